//! The port nodes with offloads negotiated: a guest's TSO super-packet arrives whole in a
//! jumbo buffer with its metadata; one handed to a guest that takes TSO goes whole with its
//! header; one for a guest that does not is cut into segments with checksums finished.

use super::tests::{publish_with, Cx};
use super::*;
use crate::device::GUEST_RX;
use crate::fake_guest::FakeGuest;
use crate::net_header::Offloads;
use packet::checksum::{fold, pseudo_header_v4, sum};
use packet::meta::{FLAG_CSUM_PARTIAL, GSO_TCP4};
use packet::PoolConfig;

const MSS: usize = 1000;
const PAYLOAD: usize = 5500;

/// Ethernet, IPv4 and TCP headers, then `payload` bytes: a super-packet as a guest sends it
/// (IP total length of the whole, TCP checksum holding the pseudo-header sum).
fn super_packet(payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + 20 + payload) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1_000_000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH ACK
    tcp[14..16].copy_from_slice(&64000u16.to_be_bytes());
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let pseudo = pseudo_header_v4([198, 18, 0, 1], [198, 18, 0, 2], 6, (20 + payload) as u16);
    // As Linux leaves it for the device: the folded pseudo-header sum, not complemented.
    f[50..52].copy_from_slice(&fold(pseudo).to_be_bytes());
    f
}

/// The virtio-net header a Linux guest puts before `super_packet`.
fn tso_header() -> Vec<u8> {
    let mut h = vec![0u8; 12];
    h[0] = 1; // NEEDS_CSUM
    h[1] = 1; // TCPV4
    h[2..4].copy_from_slice(&54u16.to_le_bytes());
    h[4..6].copy_from_slice(&(MSS as u16).to_le_bytes());
    h[6..8].copy_from_slice(&34u16.to_le_bytes());
    h[8..10].copy_from_slice(&16u16.to_le_bytes());
    h
}

fn jumbo_cx() -> Cx {
    let mut cx = Cx::new();
    cx.pool = BufferPool::with_jumbo(
        PoolConfig {
            buffers: 256,
            headroom: 128,
            data_size: 2048,
            try_hugepages: false,
        },
        1,
    )
    .expect("pool");
    cx
}

/// True when the TCP checksum of IPv4 frame `f` (no options) is right.
fn tcp_checksum_ok(f: &[u8]) -> bool {
    let tcp_len = f.len() - 34;
    let pseudo = pseudo_header_v4(
        f[26..30].try_into().unwrap(),
        f[30..34].try_into().unwrap(),
        6,
        tcp_len as u16,
    );
    fold(sum(pseudo, &f[34..])) == 0xffff
}

#[test]
fn a_tso_super_packet_arrives_whole_and_waits_for_a_jumbo_buffer() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(32);
    let stats = Arc::new(PortStats::default());
    let mut node = VhostRx::on("rx".into(), 3, "n".into(), shared.clone(), None, stats);
    let mut cx = jumbo_cx();
    publish_with(&shared, &g, GUEST_TX, 1, true, Offloads::ALL);
    let sp = super_packet(PAYLOAD);
    let mut bytes = tso_header();
    bytes.extend_from_slice(&sp);
    // The guest's layout: header and packet headers in one buffer, the payload in pages.
    let lens = [66, 4096, (bytes.len() - 66 - 4096) as u32];
    g.add_chain(&lens, false, &bytes);
    g.add_chain(&lens, false, &bytes);
    let mut out = [0u32; 8];
    let mut nexts = [0u16; 8];
    let (n, _) = node.poll(&mut cx.cx(), &mut out, &mut nexts);
    assert_eq!(n, 1, "one jumbo buffer: the second super-packet waits");
    assert_eq!(g.used_idx(), 1, "the waiting chain is not returned");
    let b = out[0];
    assert!(cx.pool.is_jumbo(b));
    assert_eq!(cx.pool.data(b), &sp[..]);
    let m = *cx.pool.meta(b);
    assert_eq!((m.gso_type, m.gso_size), (GSO_TCP4, MSS as u16));
    assert_ne!(m.flags & FLAG_CSUM_PARTIAL, 0);
    assert_eq!((m.csum_start - m.data_offset, m.csum_offset), (34, 16));
    cx.pool.free(b);
    let (n, _) = node.poll(&mut cx.cx(), &mut out, &mut nexts);
    assert_eq!(n, 1, "it came once a jumbo buffer was free");
    cx.pool.free(out[0]);
    assert_eq!(shared.counters.rx_super_packets.get(), 2);
    assert_eq!(shared.counters.rx_no_jumbo_buffers.get(), 0);
    assert_eq!(g.used_idx(), 2);
}

/// A super-packet in a jumbo buffer, as `VhostRx` leaves it.
fn jumbo_super_packet(cx: &mut Cx) -> (u32, Vec<u8>) {
    let sp = super_packet(PAYLOAD);
    let b = cx.pool.alloc_jumbo().expect("jumbo");
    assert!(cx.pool.write_packet(b, &sp));
    let m = cx.pool.meta_mut(b);
    m.flags |= FLAG_CSUM_PARTIAL;
    m.csum_start = m.data_offset + 34;
    m.csum_offset = 16;
    m.gso_type = GSO_TCP4;
    m.gso_size = MSS as u16;
    (b, sp)
}

#[test]
fn a_guest_that_takes_tso_gets_the_super_packet_whole() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(32);
    let stats = Arc::new(PortStats::default());
    let mut node = VhostTx::on("tx".into(), shared.clone(), None, stats.clone());
    let mut cx = jumbo_cx();
    publish_with(&shared, &g, GUEST_RX, 1, true, Offloads::ALL);
    for _ in 0..4 {
        g.add_chain(&[2048], true, &[]);
    }
    let (b, sp) = jumbo_super_packet(&mut cx);
    node.process(&mut cx.cx(), &[b], &mut [0]);
    assert_eq!(stats.tx_packets.get(), 1);
    assert_eq!(g.used_idx(), 3, "12 + 5554 bytes over three 2 KiB buffers");
    let hdr = g.buffer(0, 12);
    assert_eq!(hdr[0], 1, "NEEDS_CSUM");
    assert_eq!(hdr[1], 1, "TCPV4");
    assert_eq!(u16::from_le_bytes([hdr[2], hdr[3]]), 54, "hdr_len");
    assert_eq!(u16::from_le_bytes([hdr[4], hdr[5]]), MSS as u16);
    assert_eq!(u16::from_le_bytes([hdr[6], hdr[7]]), 34);
    assert_eq!(u16::from_le_bytes([hdr[8], hdr[9]]), 16);
    assert_eq!(u16::from_le_bytes([hdr[10], hdr[11]]), 3, "num_buffers");
    let mut got = g.buffer(0, 2048)[12..].to_vec();
    got.extend_from_slice(&g.buffer(1, 2048));
    got.extend_from_slice(&g.buffer(2, 12 + sp.len() - 4096));
    assert_eq!(got, sp);
    assert_eq!(shared.counters.tx_super_packets.get(), 1);
    assert_eq!(cx.pool.jumbo_available(), 1, "the jumbo buffer was freed");
}

#[test]
fn a_guest_without_tso_gets_segments_with_checksums_finished() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(32);
    let stats = Arc::new(PortStats::default());
    let mut node = VhostTx::on("tx".into(), shared.clone(), None, stats.clone());
    let mut cx = jumbo_cx();
    publish_with(&shared, &g, GUEST_RX, 1, true, Offloads::default());
    for _ in 0..8 {
        g.add_chain(&[2048], true, &[]);
    }
    let (b, sp) = jumbo_super_packet(&mut cx);
    node.process(&mut cx.cx(), &[b], &mut [0]);
    let segments = PAYLOAD.div_ceil(MSS);
    assert_eq!(g.used_idx() as usize, segments);
    let mut payload = Vec::new();
    for i in 0..segments {
        let (id, len) = g.used(i as u16);
        let buf = g.buffer(id as u16, len as usize);
        assert_eq!(&buf[..2], &[0, 0], "a plain header: nothing left to do");
        let f = &buf[12..];
        let seq = u32::from_be_bytes(f[38..42].try_into().unwrap());
        assert_eq!(seq as usize, 1_000_000 + i * MSS);
        assert_eq!(
            u16::from_be_bytes([f[16], f[17]]) as usize,
            f.len() - 14,
            "IP total length"
        );
        assert!(tcp_checksum_ok(f), "segment {i}");
        payload.extend_from_slice(&f[54..]);
    }
    assert_eq!(payload, sp[54..]);
    assert_eq!(stats.tx_packets.get(), 1);
    assert_eq!(shared.counters.tx_segmented.get(), 1);

    // A partial checksum alone is finished in place.
    let small = cx.pool.alloc().expect("buffer");
    let f = super_packet(300);
    assert!(cx.pool.write_packet(small, &f));
    let m = cx.pool.meta_mut(small);
    m.flags |= FLAG_CSUM_PARTIAL;
    m.csum_start = m.data_offset + 34;
    m.csum_offset = 16;
    let before = g.used_idx();
    node.process(&mut cx.cx(), &[small], &mut [0]);
    let (id, len) = g.used(before);
    let buf = g.buffer(id as u16, len as usize);
    assert!(tcp_checksum_ok(&buf[12..]));
    assert_eq!(&buf[12 + 54..], &f[54..]);
    assert_eq!(shared.counters.tx_checksums_finished.get(), 1);
    assert_eq!(cx.pool.available(), 256);
    assert_eq!(cx.pool.jumbo_available(), 1);
}

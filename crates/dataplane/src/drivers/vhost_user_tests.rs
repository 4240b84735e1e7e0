//! `TxOrHandoff` on worker 1 of a port with two queue pairs, against a fake guest that takes
//! TSO: a super-packet goes whole into pair 1 while the guest runs it, and reaches worker 0 as
//! plain segments (checksums right, payload whole) while it does not; what cannot be cut is
//! dropped with a named reason.

use super::TxOrHandoff;
use crate::handoff::{Handoff, HandoffRx, HandoffTx};
use crate::idle::Doorbell;
use graph::{Counter, InputNode, Node, NodeContext, PortStats, NEXT_CONSUMED};
use packet::checksum::{checksum, fold, pseudo_header_v4, sum};
use packet::headers::{build_tcp_frame, TcpFrameSpec};
use packet::meta::{FLAG_CSUM_PARTIAL, GSO_TCP4};
use packet::{BufferPool, PoolConfig};
use std::sync::Arc;
use vhostuser::device::{guest_rx, Shared};
use vhostuser::fake_guest::FakeGuest;
use vhostuser::net_header::Offloads;
use vhostuser::VhostTx;

const PORT: u16 = 3;
const MSS: u16 = 1000;
const PAYLOAD: usize = 4500;

fn pool() -> BufferPool {
    let config = PoolConfig {
        buffers: 128,
        headroom: 128,
        data_size: 2048,
        try_hugepages: false,
    };
    BufferPool::with_jumbo(config, 2).expect("pool")
}

fn cx<'a>(pool: &'a mut BufferPool, errors: &'a [Counter], worker: usize) -> NodeContext<'a> {
    NodeContext {
        pool,
        now_tsc: 0,
        tsc_hz: 1,
        worker,
        error_base: 0,
        errors,
        error_names: &[],
    }
}

/// A guest's TSO super-packet (IPv4, partial checksum) in a jumbo buffer, as `VhostRx` leaves
/// it; its bytes.
fn super_packet(pool: &mut BufferPool, payload: usize) -> (u32, Vec<u8>) {
    let f = build_tcp_frame(&TcpFrameSpec {
        payload: (0..payload).map(|i| (i % 251) as u8).collect(),
        partial_checksum: true,
        seq: 1_000_000,
        ..TcpFrameSpec::default()
    });
    let b = pool.alloc_jumbo().expect("jumbo buffer");
    assert!(pool.write_packet(b, &f));
    let m = pool.meta_mut(b);
    m.flags |= FLAG_CSUM_PARTIAL;
    m.csum_start = m.data_offset + 34;
    m.csum_offset = 16;
    m.gso_type = GSO_TCP4;
    m.gso_size = MSS;
    m.tx_port = PORT;
    (b, f)
}

/// Publish the guest's memory with pair 1's receive queue running (`g`) or none.
fn publish(shared: &Shared, g: &FakeGuest, pair1: bool, start: u64) {
    g.publish_as(
        shared,
        pair1.then_some(guest_rx(1)),
        start,
        true,
        Offloads::ALL,
    );
}

#[test]
fn worker_1_sends_super_packets_whole_into_its_pair_and_segments_what_it_hands_over() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(32);
    let stats = Arc::new(PortStats::default());
    let bells: Vec<Arc<Doorbell>> = (0..2).map(|_| Arc::new(Doorbell::new())).collect();
    let rings = Handoff::new(&bells);
    let handoff = HandoffTx::new(
        "vu-tx".into(),
        PORT,
        0,
        rings.outbox(1).expect("outbox of worker 1"),
    )
    .finishing_offloads();
    let tx = VhostTx::on("vu-tx".into(), shared.clone(), None, stats.clone()).on_pairs(&[1]);
    let mut node = TxOrHandoff { tx, handoff };
    let errors: Vec<Counter> = (0..node.error_reasons().len())
        .map(|_| Counter::default())
        .collect();
    assert_eq!(
        node.error_reasons(),
        [
            "ring-full",
            "malformed-offload",
            "no-buffer-for-segment",
            "segment-queue-full",
            "frame-too-big-for-port"
        ]
    );
    let mut pool1 = pool();

    // Pair 1 runs: the super-packet goes whole, with its virtio-net header.
    publish(&shared, &g, true, 1);
    for _ in 0..4 {
        g.add_chain(&[2048], true, &[]);
    }
    let (b, sp) = super_packet(&mut pool1, PAYLOAD);
    node.process(&mut cx(&mut pool1, &errors, 1), &[b], &mut [0]);
    assert_eq!(g.used_idx(), 3, "12 + 4554 bytes over three 2 KiB buffers");
    let hdr = g.buffer(0, 12);
    assert_eq!((hdr[0], hdr[1]), (1, 1), "NEEDS_CSUM, TCPV4");
    assert_eq!(u16::from_le_bytes([hdr[4], hdr[5]]), MSS);
    let mut got = g.buffer(0, 2048)[12..].to_vec();
    got.extend_from_slice(&g.buffer(1, 2048));
    got.extend_from_slice(&g.buffer(2, 12 + sp.len() - 4096));
    assert_eq!(got, sp);
    assert_eq!(shared.counters.tx_super_packets.get(), 1);
    assert_eq!(shared.counters.tx_segmented.get(), 0);

    // The guest stopped pair 1: worker 0 gets plain segments through the ring.
    publish(&shared, &g, false, 2);
    let (b, sp) = super_packet(&mut pool1, PAYLOAD);
    let mut nexts = [0u16];
    node.process(&mut cx(&mut pool1, &errors, 1), &[b], &mut nexts);
    assert_eq!(nexts[0], NEXT_CONSUMED);
    assert_eq!(g.used_idx(), 3, "nothing more into the guest");
    let mut pool0 = pool();
    let mut rx = HandoffRx::new(rings.take_inbox(0).expect("inbox of worker 0"));
    let (mut out, mut rx_nexts) = ([0u32; 16], [0u16; 16]);
    let (n, _) = rx.poll(&mut cx(&mut pool0, &errors, 0), &mut out, &mut rx_nexts);
    assert_eq!(n, PAYLOAD.div_ceil(usize::from(MSS)));
    let mut payload = Vec::new();
    for (i, &c) in out[..n].iter().enumerate() {
        let m = *pool0.meta(c);
        assert_eq!((m.tx_port, rx_nexts[i]), (PORT, 1), "to interface-output");
        assert!(!m.has_offload());
        let f = pool0.data(c).to_vec();
        assert_eq!(checksum(&f[14..34]), 0, "segment {i}: IPv4 header checksum");
        let pseudo = pseudo_header_v4([198, 18, 0, 1], [198, 19, 0, 1], 6, f.len() as u16 - 34);
        assert_eq!(
            fold(sum(pseudo, &f[34..])),
            0xffff,
            "segment {i}: TCP checksum"
        );
        let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
        assert_eq!(seq as usize, 1_000_000 + i * usize::from(MSS));
        payload.extend_from_slice(&f[54..]);
        pool0.free(c);
    }
    assert_eq!(payload, sp[54..]);

    // One that cannot be cut is dropped as malformed.
    let (b, _) = super_packet(&mut pool1, PAYLOAD);
    pool1.meta_mut(b).gso_size = 0;
    node.process(&mut cx(&mut pool1, &errors, 1), &[b], &mut nexts);
    assert_eq!(nexts[0], 0, "to error-drop");
    assert_eq!(pool1.meta(b).error, 1, "malformed-offload");
    pool1.free(b);
    assert!(errors.iter().all(|e| e.get() == 0), "no segment lost");
    assert_eq!((pool1.available(), pool1.jumbo_available()), (128, 2));
    assert_eq!(pool0.available(), 128);
}

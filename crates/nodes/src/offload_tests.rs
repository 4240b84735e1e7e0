//! `interface-output` with software offloads: a super-packet for a port without TSO leaves as
//! segments (in order, checksums right, the payload whole); a port that takes offloads gets
//! it whole; partial checksums are finished; jumbo buffers are copied out for ports that take
//! ordinary ones only; what cannot be done is dropped and counted; no buffer leaks.

use crate::names;
use crate::offload::PortCaps;
use crate::output::InterfaceOutput;
use crate::testkit::{check_feature_line, Seen, Sink, TEST_FEATURE_LINE};
use graph::{Dispatch, GraphBuilder, InputNode, NodeContext};
use packet::checksum::{fold, pseudo_header_v6, sum};
use packet::meta::{Offloads, FLAG_CSUM_PARTIAL, GSO_TCP6};
use packet::{BufferMeta, BufferPool, PoolConfig};
use std::sync::{Arc, Mutex};

/// Frames with the offload fields to set: (tx port, bytes, gso size or 0, partial checksum).
type Frames = Vec<(u16, Vec<u8>, u16, bool)>;

/// Hands its frames to `interface-output` once, each in a buffer big enough for it.
struct Source(Frames);

impl InputNode for Source {
    fn name(&self) -> &str {
        "source"
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::INTERFACE_OUTPUT.into()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut n = 0;
        for (port, f, gso_size, partial) in self.0.drain(..) {
            let b = cx.pool.alloc_for(f.len()).expect("a buffer per frame");
            assert!(cx.pool.write_packet(b, &f));
            let m = cx.pool.meta_mut(b);
            m.tx_port = port;
            leave_offloads(m, partial, gso_size);
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }
}

/// Ethernet, IPv6 and TCP headers and `payload` bytes, the TCP checksum field holding the
/// folded pseudo-header sum (as a sender leaves it for the device).
fn tcp6(payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 74 + payload];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
    f[20] = 6;
    f[21] = 64;
    let (src, dst) = (addr(1), addr(2));
    f[22..38].copy_from_slice(&src);
    f[38..54].copy_from_slice(&dst);
    f[54..56].copy_from_slice(&1234u16.to_be_bytes());
    f[58..62].copy_from_slice(&7u32.to_be_bytes());
    f[66] = 5 << 4;
    f[67] = 0x19; // FIN PSH ACK
    for (i, b) in f[74..].iter_mut().enumerate() {
        *b = (i * 7 % 253) as u8;
    }
    let pseudo = pseudo_header_v6(src, dst, 6, (20 + payload) as u32);
    f[70..72].copy_from_slice(&fold(pseudo).to_be_bytes());
    f
}

fn addr(host: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = host;
    a
}

fn tcp_ok(f: &[u8]) -> bool {
    let pseudo = pseudo_header_v6(addr(1), addr(2), 6, (f.len() - 54) as u32);
    fold(sum(pseudo, &f[54..])) == 0xffff
}

/// Run `frames` through `interface-output` with ports 0 (takes nothing), 1 (takes all) and
/// 2 (partial checksums only); what each port got, and the graph's drop counters by reason.
/// What reached the ports (sink, metadata, bytes), and the drops by `node/reason`.
type Outcome = (Vec<(String, BufferMeta, Vec<u8>)>, Vec<(String, u64)>);

fn run(frames: Frames) -> Outcome {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Source(frames)));
    let caps = [
        PortCaps::default(),
        PortCaps::ALL,
        PortCaps {
            offloads: Offloads {
                csum: true,
                ..Offloads::default()
            },
            jumbo: false,
        },
    ];
    b.add_node(Box::new(
        InterfaceOutput::new(vec![
            Some("tx0".into()),
            Some("tx1".into()),
            Some("tx2".into()),
        ])
        .with_caps(&caps),
    ));
    b.add_node(Box::new(crate::drop::ErrorDrop::new()));
    for name in ["tx0", "tx1", "tx2"] {
        b.add_node(Box::new(Sink(name, seen.clone())));
    }
    let mut graph = b.build(0, 1_000_000_000).expect("graph");
    let config = PoolConfig {
        buffers: 512,
        try_hugepages: false,
        ..PoolConfig::default()
    };
    let mut pool = BufferPool::with_jumbo(config, 8).expect("pool");
    for _ in 0..10 {
        graph.run_once(&mut pool);
    }
    assert_eq!(pool.available(), 512, "a buffer leaked");
    assert_eq!(pool.jumbo_available(), 8, "a jumbo buffer leaked");
    let stats = graph.stats();
    let drops = stats
        .error_names
        .iter()
        .enumerate()
        .filter(|(id, _)| stats.errors[*id].get() > 0)
        .map(|(id, (node, reason))| (format!("{node}/{reason}"), stats.errors[id].get()))
        .collect();
    let out = std::mem::take(&mut *seen.lock().expect("lock"));
    (out, drops)
}

#[test]
fn a_super_packet_leaves_as_segments_where_tso_is_not_taken() {
    let sp = tcp6(4000);
    let (out, drops) = run(vec![
        (0, sp.clone(), 1400, false),
        (1, sp.clone(), 1400, false),
    ]);
    assert!(drops.is_empty(), "{drops:?}");
    let to0: Vec<_> = out.iter().filter(|(n, _, _)| n == "tx0").collect();
    assert_eq!(to0.len(), 3, "4000 bytes at 1400 a segment");
    let mut payload = Vec::new();
    for (i, (_, m, f)) in to0.iter().enumerate() {
        assert!(!m.has_offload());
        assert!(tcp_ok(f), "segment {i}");
        let seq = u32::from_be_bytes(f[58..62].try_into().unwrap());
        assert_eq!(seq as usize, 7 + i * 1400);
        let fin = f[67] & 1 != 0;
        assert_eq!(fin, i == 2, "FIN on the last segment only");
        payload.extend_from_slice(&f[74..]);
    }
    assert_eq!(payload, sp[74..]);
    let to1: Vec<_> = out.iter().filter(|(n, _, _)| n == "tx1").collect();
    assert_eq!(to1.len(), 1);
    assert_eq!(to1[0].2, sp, "whole for a port that takes TSO");
    assert!(to1[0].1.is_gso());
}

#[test]
fn checksums_are_finished_and_jumbo_frames_copied_out_where_needed() {
    let small = tcp6(500);
    let (out, drops) = run(vec![
        (0, small.clone(), 0, true),
        (2, small.clone(), 0, true),
        // A plain frame in a jumbo buffer (the source puts frames over 2048 bytes there).
        (0, tcp6(3000), 0, false),
    ]);
    assert_eq!(
        drops,
        vec![("interface-output/frame-too-big-for-port".to_string(), 1)]
    );
    let (_, m0, f0) = out.iter().find(|(n, _, _)| n == "tx0").expect("tx0");
    assert!(
        !m0.has_offload() && tcp_ok(f0),
        "finished for a port without offloads"
    );
    let (_, m2, f2) = out.iter().find(|(n, _, _)| n == "tx2").expect("tx2");
    assert!(
        m2.flags & FLAG_CSUM_PARTIAL != 0,
        "left for a port that finishes it"
    );
    assert_eq!(f2, &small);
}

#[test]
fn a_malformed_super_packet_is_dropped_and_counted() {
    let mut bad = tcp6(4000);
    bad[20] = 17; // UDP: cannot be cut as TCP
    let (out, drops) = run(vec![(0, bad, 1400, false)]);
    assert!(out.is_empty());
    assert_eq!(
        drops,
        vec![("interface-output/malformed-offload".to_string(), 1)]
    );
}

/// A buffer holding `f` with the offload fields set as `Source` sets them.
fn offloaded(pool: &mut BufferPool, f: &[u8], gso_size: u16) -> u32 {
    let b = pool.alloc_for(f.len()).expect("a buffer");
    assert!(pool.write_packet(b, f));
    leave_offloads(pool.meta_mut(b), true, gso_size);
    b
}

/// What a TSO sender leaves for an IPv6 TCP frame: its partial checksum (`partial`, or any
/// super-packet) and, with `gso_size > 0`, its segments.
fn leave_offloads(m: &mut packet::BufferMeta, partial: bool, gso_size: u16) {
    if partial || gso_size > 0 {
        m.flags |= FLAG_CSUM_PARTIAL;
        m.csum_start = m.data_offset + 54;
        m.csum_offset = 16;
    }
    if gso_size > 0 {
        m.gso_type = GSO_TCP6;
        m.gso_size = gso_size;
    }
}

#[test]
fn the_finisher_hands_out_plain_frames_in_ordinary_buffers() {
    use crate::offload::{Finisher, OffloadDrop};
    let config = PoolConfig {
        buffers: 64,
        try_hugepages: false,
        ..PoolConfig::default()
    };
    let mut pool = BufferPool::with_jumbo(config, 2).expect("pool");
    let mut fin = Finisher::new();
    // (jumbo, metadata, bytes, carries the feature line)
    let mut got: Vec<(bool, BufferMeta, Vec<u8>, bool)> = Vec::new();
    let mut take = |pool: &mut BufferPool, c: u32| {
        let line = check_feature_line(pool, c);
        got.push((pool.is_jumbo(c), *pool.meta(c), pool.data(c).to_vec(), line));
        pool.free(c);
    };
    // Each packet carries a feature line: its segments and copies must too.
    let sp = tcp6(4000);
    let b = offloaded(&mut pool, &sp, 1400);
    *pool.feature_meta_mut(b) = TEST_FEATURE_LINE;
    assert!(pool.is_jumbo(b));
    fin.finish(&mut pool, b, &mut take).expect("segmented");
    let small = tcp6(500);
    let b = offloaded(&mut pool, &small, 0);
    *pool.feature_meta_mut(b) = TEST_FEATURE_LINE;
    fin.finish(&mut pool, b, &mut take)
        .expect("checksum finished");
    // Not a super-packet, but in a jumbo buffer: copied out to an ordinary one.
    let mid = tcp6(1000);
    let b = pool.alloc_jumbo().expect("a jumbo buffer");
    assert!(pool.write_packet(b, &mid));
    leave_offloads(pool.meta_mut(b), true, 0);
    *pool.feature_meta_mut(b) = TEST_FEATURE_LINE;
    fin.finish(&mut pool, b, &mut take).expect("copied out");
    assert_eq!(got.len(), 5, "three segments, the small frame, the copy");
    let mut payload = Vec::new();
    for (i, (jumbo, m, f, line)) in got.iter().enumerate() {
        assert!(!jumbo && !m.has_offload(), "frame {i}");
        assert!(tcp_ok(f), "frame {i}");
        assert!(line, "frame {i} lost its feature line");
        if i < 3 {
            payload.extend_from_slice(&f[74..]);
        }
    }
    assert_eq!(payload, sp[74..]);
    assert_eq!(got[3].2[74..], small[74..]);
    assert_eq!(got[4].2, {
        let mut done = mid.clone();
        done[70..72].copy_from_slice(&got[4].2[70..72]);
        done
    });

    // What cannot be cut stays the caller's.
    let mut bad = tcp6(4000);
    bad[20] = 17;
    let b = offloaded(&mut pool, &bad, 1400);
    let mut handed = 0;
    let r = fin.finish(&mut pool, b, |pool, c| {
        handed += 1;
        pool.free(c);
    });
    assert_eq!((r, handed), (Err(OffloadDrop::Malformed), 0));
    pool.free(b);
    assert_eq!(
        (pool.available(), pool.jumbo_available()),
        (64, 2),
        "a leak"
    );
}

//! The port nodes over packed rings (`PackedGuest`): frames both ways byte for byte, merged
//! receive buffers, many laps of the ring, a malformed ring, and kicks.

use super::tests::{frame, poll, rx_node, send, tx_node, Cx};
use super::*;
use crate::device::{QueueSetup, GUEST_RX};
use crate::fake_guest::{PackedGuest, P_AVAIL, P_NEXT, P_USED, P_WRITE};
use crate::net_header::Offloads;
use crate::packed_ring::WRAP_BIT;

/// Publish packed rings: `tx` as the guest's transmit queue (start 1), `rx` as its receive
/// queue (start 2), both from slot 0 on wrap counter 1, as frontends start them.
fn publish(shared: &Shared, tx: Option<&PackedGuest>, rx: Option<&PackedGuest>, mrg: bool) {
    let mut queues: [Option<QueueSetup>; crate::device::MAX_QUEUES] = Default::default();
    let setup = |g: &PackedGuest, start| QueueSetup {
        layout: g.layout(),
        base: WRAP_BIT,
        call: None,
        start,
    };
    queues[GUEST_TX] = tx.map(|g| setup(g, 1));
    queues[GUEST_RX] = rx.map(|g| setup(g, 2));
    let memory = tx.or(rx).expect("a ring").g.mem.clone();
    shared.publish(DeviceSnapshot {
        memory,
        queues,
        hdr_len: 12,
        mrg_rxbuf: mrg,
        event_idx: false,
        packed: true,
        sends: Offloads::default(),
        takes: Offloads::default(),
        rx_workers: [0; crate::device::MAX_QUEUE_PAIRS],
    });
}

/// A frame behind a plain 12-byte virtio-net header.
fn with_header(f: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 12];
    v.extend_from_slice(f);
    v
}

#[test]
fn frames_from_the_guest_arrive_over_a_packed_ring() {
    let shared = Arc::new(Shared::default());
    let mut g = PackedGuest::new(8);
    let (mut node, stats) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, Some(&g), None, false);
    let (a, b) = (frame(60, 1), frame(300, 2));
    let ia = g.add_chain(&[72], false, &with_header(&a));
    // Header and frame in separate buffers, the frame over two.
    let ib = g.add_chain(&[12, 100, 200], false, &with_header(&b));
    // Too short to be a frame: returned, counted.
    let ic = g.add_chain(&[20], false, &with_header(&[0; 8]));
    assert_eq!(poll(&mut node, &mut cx), vec![a, b]);
    assert_eq!(stats.rx_packets.get(), 2);
    assert_eq!(shared.counters.rx_bad_frames.get(), 1);
    for id in [ia, ib, ic] {
        assert_eq!(g.take_used(), Some((id, 0, P_AVAIL | P_USED)));
    }
    assert_eq!(g.take_used(), None);
    assert_eq!(shared.progress(GUEST_TX, 1), Some(5 | WRAP_BIT));
    assert_eq!(cx.pool.available(), 256, "no buffer leaked");
}

#[test]
fn packets_fill_a_packed_ring_merging_buffers() {
    let shared = Arc::new(Shared::default());
    let mut g = PackedGuest::new(16);
    let (mut node, stats) = tx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, None, Some(&g), true);
    let ids: Vec<u16> = (0..4).map(|_| g.add_chain(&[1024], true, &[])).collect();
    let (small, big) = (frame(60, 4), frame(1800, 5));
    send(&mut node, &mut cx, &[small.clone(), big.clone()]);
    assert_eq!(stats.tx_packets.get(), 2);
    let used = P_AVAIL | P_USED | P_WRITE;
    assert_eq!(g.take_used(), Some((ids[0], 72, used)));
    assert_eq!(g.take_used(), Some((ids[1], 1024, used)));
    assert_eq!(g.take_used(), Some((ids[2], 12 + 1800 - 1024, used)));
    assert_eq!(g.take_used(), None);
    assert_eq!(
        &g.g.buffer(0, 12)[10..12],
        &1u16.to_le_bytes(),
        "num_buffers"
    );
    assert_eq!(&g.g.buffer(0, 72)[12..], &small[..]);
    assert_eq!(
        &g.g.buffer(1, 12)[10..12],
        &2u16.to_le_bytes(),
        "num_buffers"
    );
    let mut got = g.g.buffer(1, 1024)[12..].to_vec();
    got.extend_from_slice(&g.g.buffer(2, 12 + 1800 - 1024));
    assert_eq!(got, big);
    // One buffer left: the big frame does not fit and takes nothing; the small one does.
    send(&mut node, &mut cx, std::slice::from_ref(&big));
    assert_eq!(shared.counters.tx_no_buffers.get(), 1);
    assert_eq!(g.take_used(), None);
    send(&mut node, &mut cx, std::slice::from_ref(&small));
    assert_eq!(g.take_used(), Some((ids[3], 72, used)));
    assert_eq!(cx.pool.available(), 256, "sent buffers are freed");
}

#[test]
fn both_nodes_go_round_a_packed_ring_many_times() {
    // Rings of 6 (not a power of two) in one memory; chains of one and two buffers.
    let shared = Arc::new(Shared::default());
    let mut tx = PackedGuest::new(6);
    let mut rx = PackedGuest::on(tx.g.another(1, 6));
    let (mut rx_node, _) = rx_node(&shared);
    let (mut tx_node, tx_stats) = tx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, Some(&tx), Some(&rx), true);
    for round in 0..50u32 {
        let f = frame(60 + round as usize, round as u8);
        let id = if round % 2 == 0 {
            tx.add_chain(&[72 + round], false, &with_header(&f))
        } else {
            tx.add_chain(&[12, 60 + round], false, &with_header(&f))
        };
        let got = poll(&mut rx_node, &mut cx);
        assert_eq!(got, vec![f.clone()], "round {round}");
        assert_eq!(tx.take_used().map(|u| u.0), Some(id), "round {round}");
        // Back into the guest's receive ring.
        let rid = rx.add_chain(&[2048], true, &[]);
        send(&mut tx_node, &mut cx, std::slice::from_ref(&f));
        let (uid, len, flags) = rx.take_used().expect("used");
        assert_eq!((uid, len as usize), (rid, 12 + f.len()), "round {round}");
        assert_eq!(flags & P_WRITE, P_WRITE);
    }
    assert_eq!(tx_stats.tx_packets.get(), 50);
    assert!(!shared.take_broken(), "{}", shared.last_error());
    assert_eq!(cx.pool.available(), 256);
}

#[test]
fn a_malformed_packed_ring_stops_the_queue_and_is_reported() {
    let shared = Arc::new(Shared::default());
    let mut g = PackedGuest::new(8);
    let (mut node, _) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, Some(&g), None, false);
    let good = with_header(&frame(60, 3));
    g.add_chain(&[72], false, &good);
    // Then an id past the ring.
    let avail = PackedGuest::avail_flags(true);
    g.set_desc(1, g.g.buffer_gpa(1), 72, 9, avail);
    let got = poll(&mut node, &mut cx);
    assert_eq!(
        got.len(),
        1,
        "the good frame before the bad chain still goes"
    );
    // The bad chain ends that batch and is met again first in the next poll.
    assert!(poll(&mut node, &mut cx).is_empty());
    assert!(shared.take_broken());
    assert!(
        shared.last_error().contains("buffer id 9"),
        "{}",
        shared.last_error()
    );
    // Stopped: nothing more is read.
    g.set_desc(1, g.g.buffer_gpa(1), 72, 1, avail);
    assert!(poll(&mut node, &mut cx).is_empty());
    // A chain running into the next lap's descriptors, after a restart from slot 1.
    let mut queues: [Option<QueueSetup>; crate::device::MAX_QUEUES] = Default::default();
    queues[GUEST_TX] = Some(QueueSetup {
        layout: g.layout(),
        base: 1 | WRAP_BIT,
        call: None,
        start: 7,
    });
    shared.publish(DeviceSnapshot {
        queues,
        packed: true,
        memory: g.g.mem.clone(),
        ..DeviceSnapshot::idle()
    });
    g.set_desc(2, g.g.buffer_gpa(2), 72, 1, PackedGuest::avail_flags(false));
    g.set_desc(1, g.g.buffer_gpa(1), 12, 1, avail | P_NEXT);
    assert!(poll(&mut node, &mut cx).is_empty());
    assert!(
        shared.last_error().contains("slot 2"),
        "{}",
        shared.last_error()
    );
    assert_eq!(shared.counters.guest_errors.get(), 2);
    assert_eq!(cx.pool.available(), 256, "no buffer leaked");
}

#[test]
fn a_sleeping_worker_asks_a_packed_ring_for_kicks() {
    let shared = Arc::new(Shared::default());
    let mut g = PackedGuest::new(8);
    let (mut node, _) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, Some(&g), None, false);
    assert!(poll(&mut node, &mut cx).is_empty());
    assert_eq!(g.device_event().1, 1, "polling: kicks disabled");
    assert!(node.before_sleep(), "nothing there: it may sleep");
    assert_eq!(g.device_event().1, 0, "kicks enabled");
    node.after_sleep();
    assert_eq!(g.device_event().1, 1);
    g.add_chain(&[72], false, &with_header(&frame(60, 9)));
    assert!(!node.before_sleep(), "a frame is there: no sleep");
}

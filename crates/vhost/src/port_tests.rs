//! The port nodes against a fake guest: frames in and out byte for byte, header checks,
//! merged receive buffers, a guest without room, malformed rings, and generations.

use super::*;
use crate::device::{DeviceSnapshot, QueueSetup, GUEST_RX};
use crate::fake_guest::FakeGuest;
use crate::net_header::Offloads;
use graph::Counter;
use packet::PoolConfig;

fn pool() -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers: 256,
        headroom: 128,
        data_size: 2048,
        try_hugepages: false,
    })
    .expect("pool")
}

/// Publish `g`'s ring as queue `q` (start number `start`, base 0), no offloads.
fn publish(shared: &Shared, g: &FakeGuest, q: usize, start: u64, mrg_rxbuf: bool) -> u64 {
    publish_with(shared, g, q, start, mrg_rxbuf, Offloads::default())
}

/// The same with `offloads` negotiated both ways.
pub(super) fn publish_with(
    shared: &Shared,
    g: &FakeGuest,
    q: usize,
    start: u64,
    mrg_rxbuf: bool,
    offloads: Offloads,
) -> u64 {
    g.publish_as(shared, Some(q), start, mrg_rxbuf, offloads)
}

pub(super) struct Cx {
    pub(super) pool: BufferPool,
    errors: Vec<Counter>,
    names: Vec<(String, String)>,
}

impl Cx {
    pub(super) fn new() -> Cx {
        Cx {
            pool: pool(),
            errors: Vec::new(),
            names: Vec::new(),
        }
    }

    pub(super) fn cx(&mut self) -> NodeContext<'_> {
        NodeContext {
            pool: &mut self.pool,
            now_tsc: 0,
            tsc_hz: 1,
            worker: 0,
            error_base: 0,
            errors: &self.errors,
            error_names: &self.names,
        }
    }
}

pub(super) fn rx_node(shared: &Arc<Shared>) -> (VhostRx, Arc<PortStats>) {
    let stats = Arc::new(PortStats::default());
    let node = VhostRx::on(
        "vu-rx".into(),
        3,
        "next".into(),
        shared.clone(),
        None,
        stats.clone(),
    );
    (node, stats)
}

pub(super) fn poll(node: &mut VhostRx, cx: &mut Cx) -> Vec<Vec<u8>> {
    let mut out = [0u32; 32];
    let mut nexts = [0u16; 32];
    let (n, _) = node.poll(&mut cx.cx(), &mut out, &mut nexts);
    let frames = out[..n]
        .iter()
        .map(|&b| {
            let m = cx.pool.meta(b);
            assert_eq!(m.rx_port, 3);
            let (s, l) = (m.data_offset as usize, m.length as usize);
            cx.pool.slot_mut(b).1[s..s + l].to_vec()
        })
        .collect();
    cx.pool.free_batch(&out[..n]);
    frames
}

pub(super) fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn frames_from_the_guest_arrive_whole_and_bad_ones_are_counted() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(16);
    let (mut node, stats) = rx_node(&shared);
    let mut cx = Cx::new();
    assert!(poll(&mut node, &mut cx).is_empty(), "no queue yet");
    let gen = publish(&shared, &g, GUEST_TX, 1, false);

    // A 12-byte header, then the frame across three buffers of odd sizes.
    let f1 = frame(100, 1);
    let mut bytes = vec![0u8; 12];
    bytes.extend_from_slice(&f1);
    g.add_chain(&[12, 50, 50], false, &bytes);
    // Header and frame in one buffer.
    let f2 = frame(1514, 2);
    let mut bytes = vec![0u8; 12];
    bytes.extend_from_slice(&f2);
    g.add_chain(&[1526], false, &bytes);
    // A runt, a frame asking for a checksum and one asking for segmentation (neither
    // negotiated), one longer than an ordinary buffer (and the pool has no jumbo buffer).
    g.add_chain(&[12 + 10], false, &[0u8; 22]);
    let mut csum = vec![1u8, 0];
    csum.extend_from_slice(&[0u8; 10 + 60]);
    g.add_chain(&[72], false, &csum);
    let mut gso = vec![0u8, 1];
    gso.extend_from_slice(&[0u8; 10 + 60]);
    g.add_chain(&[72], false, &gso);
    g.add_chain(&[12 + 2049], false, &[0u8; 12 + 2049]);
    // A chain of two zero-length buffers: no segment at all.
    g.add_chain(&[0, 0], false, &[]);

    let got = poll(&mut node, &mut cx);
    assert_eq!(
        shared.acked_generation(),
        gen,
        "the receive node acknowledged"
    );
    assert_eq!(got, vec![f1, f2]);
    assert_eq!(stats.rx_packets.get(), 2);
    assert_eq!(stats.rx_drops.get(), 5);
    assert_eq!(shared.counters.rx_bad_frames.get(), 2);
    assert_eq!(shared.counters.rx_bad_headers.get(), 2);
    assert_eq!(shared.counters.rx_no_jumbo_buffers.get(), 1);
    assert_eq!(g.used_idx(), 7, "every chain is returned, good or bad");
    assert_eq!(shared.progress(GUEST_TX, 1), Some(7));
    assert_eq!(cx.pool.available(), 256, "no buffer leaked");
}

#[test]
fn a_malformed_ring_stops_the_queue_and_is_reported() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(8);
    let (mut node, _stats) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, &g, GUEST_TX, 1, false);
    let mut good = vec![0u8; 12];
    good.extend_from_slice(&frame(60, 3));
    g.add_chain(&[72], false, &good);
    // Then a loop.
    g.set_desc(5, g.buffer_gpa(5), 64, 1, 6);
    g.set_desc(6, g.buffer_gpa(6), 64, 1, 5);
    g.push_avail(5);
    g.publish_avail(g.avail_idx);
    let got = poll(&mut node, &mut cx);
    assert_eq!(
        got.len(),
        1,
        "the good frame before the bad chain still goes"
    );
    assert!(shared.take_broken());
    assert!(
        shared.last_error().contains("loop"),
        "{}",
        shared.last_error()
    );
    assert_eq!(shared.counters.guest_errors.get(), 1);
    // Stopped: more frames are not read until the device is set up again.
    g.add_chain(&[72], false, &good);
    assert!(poll(&mut node, &mut cx).is_empty());
    assert_eq!(cx.pool.available(), 256, "no buffer leaked");
    // An index jump is an error too, after a restart (new start number).
    publish(&shared, &g, GUEST_TX, 2, false);
    g.publish_avail(g.avail_idx.wrapping_add(100));
    assert!(poll(&mut node, &mut cx).is_empty());
    assert!(
        shared.last_error().contains("jumped"),
        "{}",
        shared.last_error()
    );
}

pub(super) fn tx_node(shared: &Arc<Shared>) -> (VhostTx, Arc<PortStats>) {
    let stats = Arc::new(PortStats::default());
    (
        VhostTx::on("vu-tx".into(), shared.clone(), None, stats.clone()),
        stats,
    )
}

/// Send `frames` through the transmit node.
pub(super) fn send(node: &mut VhostTx, cx: &mut Cx, frames: &[Vec<u8>]) {
    let bufs: Vec<u32> = frames
        .iter()
        .map(|f| {
            let b = cx.pool.alloc().expect("buffer");
            let (m, slot) = cx.pool.slot_mut(b);
            let s = m.data_offset as usize;
            slot[s..s + f.len()].copy_from_slice(f);
            m.length = f.len() as u16;
            b
        })
        .collect();
    let mut nexts = vec![0u16; bufs.len()];
    node.process(&mut cx.cx(), &bufs, &mut nexts);
}

#[test]
fn packets_fill_the_guests_buffers_merging_them_when_negotiated() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(16);
    let (mut node, stats) = tx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, &g, GUEST_RX, 1, true);
    for _ in 0..4 {
        g.add_chain(&[1024], true, &[]);
    }
    let (small, big) = (frame(60, 4), frame(1800, 5));
    send(&mut node, &mut cx, &[small.clone(), big.clone()]);
    assert_eq!(stats.tx_packets.get(), 2);
    assert_eq!(g.used_idx(), 3, "one chain, then two merged");
    assert_eq!(g.used(0), (0, 72));
    assert_eq!(g.used(1), (1, 1024));
    assert_eq!(g.used(2), (2, 12 + 1800 - 1024));
    let hdr = g.buffer(0, 12);
    assert_eq!(&hdr[10..12], &1u16.to_le_bytes(), "num_buffers");
    assert_eq!(&g.buffer(0, 72)[12..], &small[..]);
    let hdr = g.buffer(1, 12);
    assert_eq!(&hdr[10..12], &2u16.to_le_bytes(), "num_buffers");
    let mut got = g.buffer(1, 1024)[12..].to_vec();
    got.extend_from_slice(&g.buffer(2, 12 + 1800 - 1024));
    assert_eq!(got, big);
    assert_eq!(cx.pool.available(), 256, "sent buffers are freed");

    // One chain left (1024 bytes): the 1800-byte frame does not fit and takes nothing.
    send(&mut node, &mut cx, std::slice::from_ref(&big));
    assert_eq!(stats.tx_drops.get(), 1);
    assert_eq!(shared.counters.tx_no_buffers.get(), 1);
    assert_eq!(g.used_idx(), 3);
    send(&mut node, &mut cx, std::slice::from_ref(&small));
    assert_eq!(g.used_idx(), 4, "the chain left was not lost");
    assert_eq!(g.used(3), (3, 72));
    assert_eq!(shared.progress(GUEST_RX, 1), Some(4));
}

#[test]
fn without_merged_buffers_a_frame_needs_one_chain() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(8);
    let (mut node, stats) = tx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, &g, GUEST_RX, 1, false);
    g.add_chain(&[1024], true, &[]);
    g.add_chain(&[1024], true, &[]);
    send(&mut node, &mut cx, &[frame(1800, 6)]);
    assert_eq!(stats.tx_drops.get(), 1);
    assert_eq!(g.used_idx(), 0);
    g.add_chain(&[12, 2000], true, &[]);
    send(&mut node, &mut cx, &[frame(1000, 7), frame(1800, 8)]);
    // Chains are taken in the order the guest posted them: 1000 B fit the first; 1800 B do
    // not fit the second and are dropped, which leaves the second and third chains posted.
    assert_eq!(stats.tx_packets.get(), 1);
    assert_eq!(stats.tx_drops.get(), 2);
    assert_eq!(g.used_idx(), 1);
    assert_eq!(g.used(0), (0, 1012));
    assert_eq!(
        &g.buffer(0, 12)[10..12],
        &1u16.to_le_bytes(),
        "num_buffers is 1"
    );
}

#[test]
fn a_new_generation_keeps_or_restarts_progress() {
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(8);
    let (mut node, _stats) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, &g, GUEST_TX, 7, false);
    let mut good = vec![0u8; 12];
    good.extend_from_slice(&frame(60, 9));
    g.add_chain(&[72], false, &good);
    assert_eq!(poll(&mut node, &mut cx).len(), 1);
    // Same start (e.g. a new call fd): progress kept, nothing read twice.
    publish(&shared, &g, GUEST_TX, 7, false);
    assert!(poll(&mut node, &mut cx).is_empty());
    g.add_chain(&[72], false, &good);
    assert_eq!(poll(&mut node, &mut cx).len(), 1);
    assert_eq!(shared.progress(GUEST_TX, 7), Some(2));
    // Stopped: nothing read, progress stays for GET_VRING_BASE.
    let gen = shared.publish(DeviceSnapshot::idle());
    g.add_chain(&[72], false, &good);
    assert!(poll(&mut node, &mut cx).is_empty());
    assert_eq!(shared.acked_generation(), gen);
    assert_eq!(shared.progress(GUEST_TX, 7), Some(2));
}

/// Whether `fd` is readable now.
fn readable_now(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn a_sleeping_worker_asks_for_kicks_and_a_kick_wakes_it() {
    use std::os::fd::FromRawFd;
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(8);
    let (mut node, _stats) = rx_node(&shared);
    let mut cx = Cx::new();
    publish(&shared, &g, GUEST_TX, 1, false);
    assert!(poll(&mut node, &mut cx).is_empty());
    assert_eq!(g.used_flags(), 1, "no kicks while polling");
    // SAFETY: eventfd takes no pointers; the result is a fresh descriptor.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(efd >= 0);
    // SAFETY: `efd` is ours; the File owns it from here on.
    let kick = unsafe { std::fs::File::from_raw_fd(efd) };
    let guest_side = kick.try_clone().expect("dup");
    shared.kicks[0].set(Some(kick));
    let wait = node.wait_fd().expect("a wait descriptor");

    assert!(node.before_sleep(), "nothing pending: it may sleep");
    assert_eq!(g.used_flags(), 0, "kicks asked for");
    assert!(!readable_now(wait));
    // The guest makes a frame available and kicks (as the flags now ask).
    let mut good = vec![0u8; 12];
    good.extend_from_slice(&frame(60, 1));
    g.add_chain(&[72], false, &good);
    std::io::Write::write_all(&mut &guest_side, &1u64.to_ne_bytes()).expect("kick");
    assert!(readable_now(wait), "the kick wakes the worker");
    node.after_sleep();
    assert_eq!(g.used_flags(), 1, "no kicks again");
    assert!(!readable_now(wait), "the kick was consumed");
    assert_eq!(poll(&mut node, &mut cx).len(), 1);

    // A frame made available before the worker asked for kicks: no sleep.
    g.add_chain(&[72], false, &good);
    assert!(!node.before_sleep());
    node.after_sleep();
    assert_eq!(poll(&mut node, &mut cx).len(), 1);
}

#[test]
fn each_queue_pair_has_its_own_nodes_and_every_worker_acknowledges() {
    use crate::device::{guest_rx, guest_tx};
    let shared = Arc::new(Shared::default());
    // Pair 1's transmit ring and pair 0's receive ring live in the same guest memory.
    let g0 = FakeGuest::new(8);
    let mut tx1 = g0.another(1, 8);
    let mut rx0 = g0.another(2, 8);
    let rx1 = g0.another(3, 8);
    let setup = |g: &FakeGuest, start| {
        Some(QueueSetup {
            layout: g.layout(),
            base: 0,
            call: None,
            start,
        })
    };
    let mut queues: [Option<QueueSetup>; crate::device::MAX_QUEUES] = Default::default();
    queues[guest_tx(1)] = setup(&tx1, 1);
    queues[guest_rx(0)] = setup(&rx0, 2);
    let snapshot = |queues| DeviceSnapshot {
        memory: g0.mem.clone(),
        queues,
        ..DeviceSnapshot::idle()
    };
    let stats = Arc::new(PortStats::default());
    // Worker 0 runs pair 0, worker 1 pair 1: two receive nodes, two acknowledgements.
    let mut rx_w0 = VhostRx::on(
        "rx0".into(),
        3,
        "n".into(),
        shared.clone(),
        None,
        stats.clone(),
    );
    let mut rx_w1 = VhostRx::on(
        "rx1".into(),
        3,
        "n".into(),
        shared.clone(),
        None,
        stats.clone(),
    )
    .on_pair(1);
    let mut tx_w1 =
        VhostTx::on("tx1".into(), shared.clone(), None, stats.clone()).on_pairs(&[1, 0]);
    let gen = shared.publish(snapshot(queues.clone()));
    let mut cx = Cx::new();
    let mut good = vec![0u8; 12];
    good.extend_from_slice(&frame(60, 5));
    tx1.add_chain(&[72], false, &good);
    assert!(
        poll(&mut rx_w0, &mut cx).is_empty(),
        "pair 0 has no transmit queue"
    );
    assert!(
        shared.acked_generation() < gen,
        "worker 1 has not seen it yet"
    );
    assert_eq!(poll(&mut rx_w1, &mut cx), vec![good[12..].to_vec()]);
    assert_eq!(shared.acked_generation(), gen, "both workers acknowledged");

    // Worker 1's transmit node prefers its own pair 1 and falls back to pair 0 while the
    // guest has not enabled pair 1's receive queue.
    rx0.add_chain(&[1024], true, &[]);
    assert!(tx_w1.can_send());
    send(&mut tx_w1, &mut cx, &[frame(100, 6)]);
    assert_eq!(rx0.used_idx(), 1, "into pair 0");
    queues[guest_rx(1)] = setup(&rx1, 3);
    shared.publish(snapshot(queues));
    let mut rx1 = rx1;
    rx1.add_chain(&[1024], true, &[]);
    send(&mut tx_w1, &mut cx, &[frame(100, 7)]);
    assert_eq!(
        (rx0.used_idx(), rx1.used_idx()),
        (1, 1),
        "into pair 1 once it runs"
    );
    assert_eq!(cx.pool.available(), 256);
}

#[test]
fn a_receive_queue_moves_between_workers_without_losing_or_repeating_a_frame() {
    use crate::device::{guest_tx, MAX_QUEUE_PAIRS};
    let shared = Arc::new(Shared::default());
    let mut g = FakeGuest::new(16);
    let q = guest_tx(0);
    // The snapshot as the control thread publishes it: pair 0 received by `owner`, its
    // transmit queue running as `start` from `base` (or stopped).
    let (layout, memory) = (g.layout(), g.mem.clone());
    let publish = |owner: u8, run: Option<(u64, u16)>| {
        let mut queues: [Option<QueueSetup>; crate::device::MAX_QUEUES] = Default::default();
        queues[q] = run.map(|(start, base)| QueueSetup {
            layout,
            base,
            call: None,
            start,
        });
        let mut rx_workers = [0; MAX_QUEUE_PAIRS];
        rx_workers[0] = owner;
        shared.publish(DeviceSnapshot {
            memory: memory.clone(),
            queues,
            rx_workers,
            ..DeviceSnapshot::idle()
        })
    };
    let (node, _) = rx_node(&shared);
    let mut on_w0 = node.on_pair(0).on_worker(0);
    let (node, _) = rx_node(&shared);
    let mut on_w1 = node.on_pair(0).on_worker(1);
    let mut cx = Cx::new();
    let sent = |g: &mut FakeGuest, seed: u8| {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&frame(60, seed));
        g.add_chain(&[72], false, &f);
    };
    publish(0, Some((1, 0)));
    for seed in 0..3 {
        sent(&mut g, seed);
    }
    assert_eq!(poll(&mut on_w0, &mut cx).len(), 3, "worker 0 receives");
    assert!(poll(&mut on_w1, &mut cx).is_empty(), "worker 1 does not");
    assert!(
        on_w1.wait_fd().is_none(),
        "nor does it wait on the pair's kicks"
    );
    // The move, as `Device::move_rx` makes it: stop the queue (both nodes take that), read where
    // it stopped, start it there on worker 1. Frames the guest sends meanwhile wait.
    let g_stop = publish(1, None);
    sent(&mut g, 3);
    assert!(poll(&mut on_w0, &mut cx).is_empty());
    assert!(poll(&mut on_w1, &mut cx).is_empty());
    assert!(shared.acked_generation() >= g_stop, "both took the stop");
    let base = shared.progress(q, 1).expect("the progress of start 1");
    assert_eq!(base, 3);
    publish(1, Some((2, base)));
    sent(&mut g, 4);
    assert!(poll(&mut on_w0, &mut cx).is_empty(), "worker 0 lets go");
    let got = poll(&mut on_w1, &mut cx);
    assert_eq!(
        got,
        vec![frame(60, 3), frame(60, 4)],
        "worker 1 takes up exactly where worker 0 stopped"
    );
    assert_eq!(g.used_idx(), 5, "every chain returned once");
    assert_eq!(shared.counters.guest_errors.get(), 0);
}

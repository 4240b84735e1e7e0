//! Software RSS between workers, for an AF_XDP port with fewer queues than workers. The worker
//! that owns a queue hashes each received frame's flow (IP 5-tuple) and hands the frames of
//! other workers' flows over, so a flow always lands on the same worker; a worker without a
//! socket on the port hands the frames it sends there to the port's owner.
//!
//! Each worker has its own pool, so a frame crosses as a copy through a bounded ring per
//! (sender, receiver) pair: single producer, single consumer, fixed slots allocated once, two
//! atomic indices; never a lock, an allocation or a wait on the fast path (a full ring drops
//! the frame and counts it). Nodes: `rss-dispatch` (after the owner's rx), `handoff-tx-<port>`
//! (a worker's transmit node for a port it has no socket on) and the input `handoff-rx`. The
//! ring carries plain bytes: `handoff-tx` finishes offloads first when its port's caps let them
//! through `interface-output` (`finishing_offloads`), else it never sees any.
//!
//! A ring is split at creation into a `Producer` and a `Consumer`, neither `Clone`: pushing and
//! popping take `&mut self`, so safe code cannot push (or pop) from two threads at once. A
//! worker's producers (one per other worker) live in its `Outbox`, which the worker's
//! `rss-dispatch` and `handoff-tx-*` nodes share through a `WorkerCell` (a second borrow at the
//! same time, which only a node leaked to another thread could cause, panics instead of racing).
//!
//! A receiving worker that sleeps (adaptive polling) is woken through its `Doorbell`: it
//! announces that it sleeps, checks its rings once more (`before_sleep`), and waits on its
//! wait set, where the doorbell's eventfd is; a producer writes it only when it sees the
//! announcement after a vector's pushes (one fence and one load per vector while the receiver
//! is awake).

use crate::idle::Doorbell;
use graph::{Dispatch, InputNode, Node, NodeContext, NEXT_CONSUMED};
use nodes::flow_hash::{ip4_flow_hash, ip6_flow_hash};
use nodes::names;
use nodes::neighbour::WorkerCell;
use nodes::offload::{Finisher, OffloadDrop};
use packet::headers::{be16, eth, ip4, ip6};
use packet::BufferPool;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Slots per ring (a power of two).
pub const RING_SLOTS: usize = 1024;
/// Bytes of frame a slot holds (longer frames are dropped as `too-long`).
pub const SLOT_BYTES: usize = 2048;

/// Where a handed-over frame goes on the receiving worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Received: to `ethernet-input`.
    Rx,
    /// To transmit on `port`: to `interface-output`.
    Tx,
}

struct Slot {
    kind: Kind,
    port: u16,
    length: u16,
    timestamp_ns: u64,
    bytes: Box<[u8; SLOT_BYTES]>,
}

/// The memory of a bounded single-producer single-consumer ring of frame copies, shared by
/// its two halves only.
struct Ring {
    slots: Box<[UnsafeCell<Slot>]>,
    head: AtomicUsize,
    tail: AtomicUsize,
}

// SAFETY: only the one `Producer` (whose methods take `&mut self`) writes a slot, and only
// between reading `tail` (the slot is free) and publishing `head` with Release; only the one
// `Consumer` (`&mut self` too) reads it, after seeing that `head` with Acquire and before
// publishing `tail` with Release. No slot is ever accessed by both at once.
unsafe impl Sync for Ring {}
// SAFETY: the slots are plain owned data.
unsafe impl Send for Ring {}

impl Ring {
    fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire))
    }
}

/// A new empty ring (allocates all its slots now) whose consumer is woken through `bell`: its
/// two halves.
pub fn ring(bell: Arc<Doorbell>) -> (Producer, Consumer) {
    let slots = (0..RING_SLOTS)
        .map(|_| {
            UnsafeCell::new(Slot {
                kind: Kind::Rx,
                port: 0,
                length: 0,
                timestamp_ns: 0,
                bytes: Box::new([0; SLOT_BYTES]),
            })
        })
        .collect();
    let ring = Arc::new(Ring {
        slots,
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
    });
    (
        Producer {
            ring: ring.clone(),
            bell,
            pushed: false,
        },
        Consumer { ring },
    )
}

/// The pushing half of a ring (not `Clone`: one thread pushes).
pub struct Producer {
    ring: Arc<Ring>,
    bell: Arc<Doorbell>,
    /// Pushed since the last `notify`.
    pushed: bool,
}

impl Producer {
    /// Copy `data`; false when the ring is full or `data` longer than a slot.
    fn push(&mut self, kind: Kind, port: u16, timestamp_ns: u64, data: &[u8]) -> bool {
        let r = &*self.ring;
        let head = r.head.load(Ordering::Relaxed);
        let tail = r.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= RING_SLOTS || data.len() > SLOT_BYTES {
            return false;
        }
        // SAFETY: see the `Sync` impl of `Ring`: slot `head` is free and only this producer
        // (borrowed mutably) writes it.
        let slot = unsafe { &mut *r.slots[head % RING_SLOTS].get() };
        slot.kind = kind;
        slot.port = port;
        slot.length = data.len() as u16;
        slot.timestamp_ns = timestamp_ns;
        slot.bytes[..data.len()].copy_from_slice(data);
        r.head.store(head.wrapping_add(1), Ordering::Release);
        self.pushed = true;
        true
    }

    /// After a vector's pushes: wake the consumer if it sleeps (nothing when nothing was
    /// pushed).
    #[inline]
    fn notify(&mut self) {
        if std::mem::take(&mut self.pushed) {
            self.bell.ring();
        }
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True when no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The popping half of a ring (not `Clone`: one thread pops).
pub struct Consumer {
    ring: Arc<Ring>,
}

impl Consumer {
    /// Hand the oldest frame to `f`; false when the ring is empty.
    fn pop(&mut self, f: impl FnOnce(&Slot)) -> bool {
        let r = &*self.ring;
        let tail = r.tail.load(Ordering::Relaxed);
        let head = r.head.load(Ordering::Acquire);
        if head == tail {
            return false;
        }
        // SAFETY: see the `Sync` impl of `Ring`: slot `tail` was published and only this
        // consumer (borrowed mutably) reads it.
        f(unsafe { &*r.slots[tail % RING_SLOTS].get() });
        r.tail.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True when no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One worker's sending side: a producer to every other worker.
pub struct Outbox {
    /// Index = receiving worker (None: this worker itself, or no ring).
    to: Vec<Option<Producer>>,
}

impl Outbox {
    /// Copy `data` into the ring to worker `to`; false when there is none or it is full.
    #[inline]
    fn push(&mut self, to: usize, kind: Kind, port: u16, timestamp_ns: u64, data: &[u8]) -> bool {
        match self.to.get_mut(to) {
            Some(Some(p)) => p.push(kind, port, timestamp_ns, data),
            _ => false,
        }
    }

    /// After a vector's pushes: wake the receivers that sleep and were handed frames.
    #[inline]
    fn notify(&mut self) {
        for p in self.to.iter_mut().flatten() {
            p.notify();
        }
    }
}

/// A worker's outbox as its nodes share it (borrowed once per vector).
pub type SharedOutbox = Arc<WorkerCell<Outbox>>;

/// The rings of a data plane, one for every ordered pair of workers, handed out once: worker
/// `w`'s outbox (shared by its nodes) and its inbox (the consumers of the rings to it).
pub struct Handoff {
    outboxes: Vec<SharedOutbox>,
    inboxes: Mutex<Vec<Option<Vec<Consumer>>>>,
}

impl Handoff {
    /// Rings between the workers whose doorbells are `bells` (index = worker; none when
    /// `bells` is empty). The rings to worker `w` ring `bells[w]`.
    pub fn new(bells: &[Arc<Doorbell>]) -> Handoff {
        let workers = bells.len();
        let mut outs: Vec<Vec<Option<Producer>>> = (0..workers)
            .map(|_| (0..workers).map(|_| None).collect())
            .collect();
        let mut ins: Vec<Vec<Consumer>> = (0..workers).map(|_| Vec::new()).collect();
        for (to, bell) in bells.iter().enumerate() {
            for (from, out) in outs.iter_mut().enumerate() {
                if from != to {
                    let (p, c) = ring(bell.clone());
                    out[to] = Some(p);
                    ins[to].push(c);
                }
            }
        }
        Handoff {
            outboxes: outs
                .into_iter()
                .map(|to| Arc::new(WorkerCell::new(Outbox { to })))
                .collect(),
            inboxes: Mutex::new(ins.into_iter().map(Some).collect()),
        }
    }

    /// Worker `from`'s outbox, for its nodes only (None: no rings).
    pub fn outbox(&self, from: usize) -> Option<SharedOutbox> {
        self.outboxes.get(from).cloned()
    }

    /// Take worker `to`'s inbox: the consumers of the rings from every other worker (once;
    /// None after, or without rings).
    pub fn take_inbox(&self, to: usize) -> Option<Vec<Consumer>> {
        self.inboxes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(to)
            .and_then(Option::take)
    }
}

/// The flow hash of an Ethernet frame's IPv4/IPv6 5-tuple (None: not IP, or too short).
pub fn frame_flow_hash(frame: &[u8]) -> Option<u32> {
    let mut l3 = eth::HEADER_LEN;
    let mut t = be16(frame.get(..eth::HEADER_LEN)?, eth::TYPE);
    for _ in 0..2 {
        if t == eth::TYPE_VLAN || t == eth::TYPE_QINQ {
            t = be16(frame.get(l3..l3 + eth::TAG_LEN)?, 2);
            l3 += eth::TAG_LEN;
        }
    }
    let h = frame.get(l3..)?;
    match t {
        eth::TYPE_IPV4 => {
            let ihl = usize::from(h.first()? & 0x0f) * 4;
            // The hash reads the ports after the header when there are any.
            (h.len() >= ihl.max(ip4::MIN_HEADER_LEN) + 4).then(|| ip4_flow_hash(h))
        }
        eth::TYPE_IPV6 => (h.len() >= ip6::HEADER_LEN + 4).then(|| ip6_flow_hash(h)),
        _ => None,
    }
}

/// The worker a flow hash belongs to.
#[inline(always)]
pub fn worker_of(hash: u32, workers: usize) -> usize {
    ((hash as u64 * workers as u64) >> 32) as usize
}

/// `rss-dispatch`: after an AF_XDP rx whose queue serves several workers; keeps this worker's
/// flows (to `ethernet-input`) and copies the others' into their rings.
pub struct RssDispatch {
    worker: usize,
    workers: usize,
    out: SharedOutbox,
}

/// Name of the node.
pub const RSS_DISPATCH: &str = "rss-dispatch";
/// Name of the input node.
pub const HANDOFF_RX: &str = "handoff-rx";

impl RssDispatch {
    /// For worker `worker` of `workers`, handing other workers' flows over through `out`.
    pub fn new(worker: usize, workers: usize, out: SharedOutbox) -> RssDispatch {
        RssDispatch {
            worker,
            workers,
            out,
        }
    }
}

const ERRORS: [&str; 1] = ["ring-full"];

impl Node for RssDispatch {
    fn name(&self) -> &str {
        RSS_DISPATCH
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ETHERNET_INPUT.into(), names::ERROR_DROP.into()]
    }

    fn error_reasons(&self) -> Vec<String> {
        ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (me, workers) = (self.worker, self.workers);
        // One borrow of the outbox per vector.
        let all_mine = self.out.with(|out| {
            let mut all_mine = true;
            for (i, &b) in frame.iter().enumerate() {
                // A frame with offloads left undone (or in a jumbo buffer) stays here: the
                // ring carries bytes only, in ordinary-sized slots. A TSO guest's flows are
                // all such frames (every packet has a partial checksum), so they keep order.
                let stays = cx.pool.meta(b).has_offload() || cx.pool.is_jumbo(b);
                let to = if stays {
                    me
                } else {
                    frame_flow_hash(cx.pool.data(b)).map_or(me, |h| worker_of(h, workers))
                };
                if to == me {
                    nexts[i] = 0;
                    continue;
                }
                all_mine = false;
                let m = *cx.pool.meta(b);
                if out.push(to, Kind::Rx, m.rx_port, m.timestamp_ns, cx.pool.data(b)) {
                    // Copied: this buffer is done here.
                    cx.pool.free(b);
                    nexts[i] = NEXT_CONSUMED;
                } else {
                    cx.pool.meta_mut(b).error = cx.error_base;
                    nexts[i] = 1;
                }
            }
            out.notify();
            all_mine
        });
        if all_mine {
            return Dispatch::AllTo(0);
        }
        Dispatch::PerPacket
    }
}

/// `handoff-tx-<port>`: the transmit node of a port this worker has no socket on; copies each
/// frame into the ring to the port's owner, which transmits it.
pub struct HandoffTx {
    name: String,
    port: u16,
    owner: usize,
    out: SharedOutbox,
    /// Finishes the offloads of what it hands over (None: `interface-output` did).
    finisher: Option<Finisher>,
}

impl HandoffTx {
    /// For `port`, handing over to worker `owner` through this worker's `out`.
    pub fn new(name: String, port: u16, owner: usize, out: SharedOutbox) -> HandoffTx {
        HandoffTx {
            name,
            port,
            owner,
            out,
            finisher: None,
        }
    }

    /// Finish itself the offloads of what it hands over (segment super-packets, finish
    /// partial checksums, copy frames out of jumbo buffers): for the transmit node of a port
    /// that declares it takes offloads although some of its packets leave through the ring.
    pub fn finishing_offloads(mut self) -> HandoffTx {
        self.finisher = Some(Finisher::new());
        self
    }
}

/// `handoff-tx` drop reasons: the ring's, then (when it finishes offloads) the software
/// offloads' (as `interface-output` names them).
const TX_ERRORS: [&str; 5] = [
    "ring-full",
    "malformed-offload",
    "no-buffer-for-segment",
    "segment-queue-full",
    "frame-too-big-for-port",
];

/// The `TX_ERRORS` index of why an offload could not be finished.
fn offload_reason(why: OffloadDrop) -> u16 {
    match why {
        OffloadDrop::Malformed => 1,
        OffloadDrop::NoBuffer => 2,
        OffloadDrop::QueueFull => 3,
        OffloadDrop::TooBig => 4,
    }
}

impl Node for HandoffTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ERROR_DROP.into()]
    }

    fn error_reasons(&self) -> Vec<String> {
        let n = if self.finisher.is_some() {
            TX_ERRORS.len()
        } else {
            1
        };
        TX_ERRORS[..n].iter().map(|r| r.to_string()).collect()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (port, owner) = (self.port, self.owner);
        let finisher = &mut self.finisher;
        self.out.with(|out| {
            for (i, &b) in frame.iter().enumerate() {
                if let Some(f) = finisher
                    .as_mut()
                    .filter(|_| cx.pool.meta(b).has_offload() || cx.pool.is_jumbo(b))
                {
                    nexts[i] = finish_and_push(cx, f, out, owner, port, b);
                    continue;
                }
                let ts = cx.pool.meta(b).timestamp_ns;
                if out.push(owner, Kind::Tx, port, ts, cx.pool.data(b)) {
                    cx.pool.free(b);
                    nexts[i] = NEXT_CONSUMED;
                } else {
                    cx.pool.meta_mut(b).error = cx.error_base;
                    nexts[i] = 0;
                }
            }
            out.notify();
        });
        Dispatch::PerPacket
    }
}

/// Hand over packet `b` as the plain frames `f` makes of it (the rare case: it has offloads
/// or sits in a jumbo buffer): its next index (`NEXT_CONSUMED`, or 0 to drop it). A frame made
/// from it that does not fit the ring is freed and counted as `ring-full` here (it is not in
/// the node's frame).
#[cold]
fn finish_and_push(
    cx: &mut NodeContext<'_>,
    f: &mut Finisher,
    out: &mut Outbox,
    owner: usize,
    port: u16,
    b: u32,
) -> u16 {
    let ts = cx.pool.meta(b).timestamp_ns;
    let mut full = 0;
    let done = f.finish(cx.pool, b, |pool, c| {
        if !out.push(owner, Kind::Tx, port, ts, pool.data(c)) {
            full += 1;
        }
        pool.free(c);
    });
    if full > 0 {
        if let Some(c) = cx.errors.get(usize::from(cx.error_base)) {
            c.add(full);
        }
    }
    match done {
        Ok(()) => NEXT_CONSUMED,
        Err(why) => {
            cx.pool.meta_mut(b).error = cx.error_id(offload_reason(why));
            0
        }
    }
}

/// `handoff-rx`: receives what other workers handed over: received frames go to
/// `ethernet-input`, frames to transmit to `interface-output`.
pub struct HandoffRx {
    rings: Vec<Consumer>,
    next_ring: usize,
}

impl HandoffRx {
    /// Polling `rings` (the consumers of the rings from every other worker to this one).
    pub fn new(rings: Vec<Consumer>) -> HandoffRx {
        HandoffRx {
            rings,
            next_ring: 0,
        }
    }
}

impl InputNode for HandoffRx {
    fn name(&self) -> &str {
        HANDOFF_RX
    }

    /// Frames pushed before the worker announced its sleep are seen here (those pushed after
    /// ring its doorbell).
    fn before_sleep(&self) -> bool {
        self.rings.iter().all(Consumer::is_empty)
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ETHERNET_INPUT.into(), names::INTERFACE_OUTPUT.into()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut n = 0;
        let rings = self.rings.len();
        for k in 0..rings {
            let ring = &mut self.rings[(self.next_ring + k) % rings];
            while n < out.len() && !ring.is_empty() {
                let Some(b) = cx.pool.alloc() else {
                    return (n, Dispatch::PerPacket);
                };
                let mut next = 0;
                let pool: &mut BufferPool = cx.pool;
                let got = ring.pop(|s| {
                    let data = &s.bytes[..usize::from(s.length)];
                    pool.write_packet(b, data);
                    let m = pool.meta_mut(b);
                    m.timestamp_ns = s.timestamp_ns;
                    match s.kind {
                        Kind::Rx => m.rx_port = s.port,
                        Kind::Tx => {
                            m.tx_port = s.port;
                            next = 1;
                        }
                    }
                });
                if !got {
                    cx.pool.free(b);
                    break;
                }
                out[n] = b;
                nexts[n] = next;
                n += 1;
            }
        }
        self.next_ring = (self.next_ring + 1) % rings.max(1);
        (n, Dispatch::PerPacket)
    }

    /// Never: the workers that feed it poll AF_XDP sockets, which never finish either (a
    /// worker whose only inputs are this and `neighbour-tx` must keep running).
    fn is_finished(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_order_and_refuses_when_full() {
        let (mut p, mut c) = ring(Arc::new(Doorbell::new()));
        for i in 0..RING_SLOTS {
            assert!(p.push(Kind::Rx, 1, i as u64, &[i as u8; 60]));
        }
        assert!(!p.push(Kind::Rx, 1, 0, &[0; 60]), "full");
        assert_eq!((p.len(), c.len()), (RING_SLOTS, RING_SLOTS));
        let (mut p2, _c2) = ring(Arc::new(Doorbell::new()));
        assert!(!p2.push(Kind::Rx, 1, 0, &[0; SLOT_BYTES + 1]));
        for i in 0..RING_SLOTS {
            assert!(c.pop(|s| {
                assert_eq!(s.timestamp_ns, i as u64);
                assert_eq!(&s.bytes[..60], &[i as u8; 60]);
            }));
        }
        assert!(!c.pop(|_| {}));
        assert!(c.is_empty() && p.is_empty());
    }

    #[test]
    fn halves_cross_threads_in_order() {
        let (mut p, mut c) = ring(Arc::new(Doorbell::new()));
        const N: u64 = 100_000;
        let producer = std::thread::spawn(move || {
            let mut i = 0u64;
            while i < N {
                if p.push(Kind::Tx, 7, i, &i.to_le_bytes()) {
                    i += 1;
                    p.notify();
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut want = 0u64;
        while want < N {
            c.pop(|s| {
                assert_eq!((s.kind, s.port, s.timestamp_ns), (Kind::Tx, 7, want));
                assert_eq!(&s.bytes[..8], &want.to_le_bytes());
                want += 1;
            });
        }
        producer.join().expect("producer");
        assert!(c.is_empty());
    }

    #[test]
    fn handoff_hands_each_half_out_once_and_rings_the_receiver() {
        let bells: Vec<Arc<Doorbell>> = (0..3).map(|_| Arc::new(Doorbell::new())).collect();
        let h = Handoff::new(&bells);
        let mut inbox1 = h.take_inbox(1).expect("inbox of worker 1");
        assert_eq!(inbox1.len(), 2, "from workers 0 and 2");
        assert!(h.take_inbox(1).is_none(), "taken once");
        let out0 = h.outbox(0).expect("outbox of worker 0");
        assert!(
            !out0.with(|o| o.push(0, Kind::Rx, 0, 0, &[1; 60])),
            "no ring to itself"
        );
        out0.with(|o| {
            assert!(o.push(1, Kind::Rx, 3, 9, &[1; 60]));
            o.notify();
        });
        assert!(inbox1[0].pop(|s| assert_eq!((s.port, s.timestamp_ns), (3, 9))));
        assert!(inbox1.iter().all(Consumer::is_empty));
        assert!(Handoff::new(&[]).outbox(0).is_none());
        assert!(Handoff::new(&[]).take_inbox(0).is_none());
    }

    #[test]
    fn flow_hash_spreads_and_is_stable() {
        use packet::headers::{build_udp_frame, UdpFrameSpec};
        let mut seen = [0usize; 2];
        for port in 0..64u16 {
            let f = build_udp_frame(&UdpFrameSpec {
                src_port: 1000 + port,
                ..UdpFrameSpec::default()
            });
            let h = frame_flow_hash(&f).expect("IPv4 UDP");
            assert_eq!(frame_flow_hash(&f), Some(h), "stable");
            seen[worker_of(h, 2)] += 1;
        }
        assert!(seen[0] > 8 && seen[1] > 8, "spread: {seen:?}");
        assert_eq!(frame_flow_hash(&[0u8; 10]), None);
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[8, 6]);
        assert_eq!(frame_flow_hash(&arp), None);
    }
}

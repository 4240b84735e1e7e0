//! Software RSS between workers, for an AF_XDP port with fewer queues than workers. The worker
//! that owns a queue hashes each received frame's flow (IP 5-tuple) and hands the frames of
//! other workers' flows over, so a flow always lands on the same worker; a worker without a
//! socket on the port hands the frames it sends there to the port's owner.
//!
//! Each worker has its own pool, so a frame crosses as a copy through a bounded ring per
//! (sender, receiver) pair: single producer, single consumer, fixed slots allocated once, two
//! atomic indices; never a lock, an allocation or a wait on the fast path (a full ring drops
//! the frame and counts it). Nodes: `rss-dispatch` (after the owner's rx), `handoff-tx-<port>`
//! (a worker's transmit node for a port it has no socket on) and the input `handoff-rx`.
//!
//! A receiving worker that sleeps (adaptive polling) is woken through its doorbell: it
//! announces that it sleeps, checks its rings once more, and waits on an eventfd that a
//! producer writes only when it sees the announcement after pushing (one fence and one load per
//! vector while the receiver is awake).

use graph::{Dispatch, InputNode, Node, NodeContext, NEXT_CONSUMED};
use nodes::flow_hash::{ip4_flow_hash, ip6_flow_hash};
use nodes::names;
use packet::headers::{be16, eth, ip4, ip6};
use packet::BufferPool;
use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// How producers wake a sleeping receiver.
pub struct Doorbell {
    sleeping: AtomicBool,
    /// An eventfd (None: the kernel refused one; the receiver then sleeps only its bounded
    /// timeout).
    fd: Option<OwnedFd>,
}

impl Doorbell {
    fn new() -> Doorbell {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        Doorbell {
            sleeping: AtomicBool::new(false),
            // SAFETY: `raw` is a descriptor nothing else owns.
            fd: (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) }),
        }
    }

    /// Producer, after pushing: wake the receiver if it announced it sleeps.
    #[inline]
    fn ring(&self) {
        // Orders the pushes before the load (pairs with the fence in `announce`).
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            if let Some(fd) = &self.fd {
                let one: u64 = 1;
                // SAFETY: writes 8 bytes from a live u64 to our eventfd.
                let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
            }
        }
    }

    /// Receiver: announce that it is about to sleep.
    fn announce(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        // Orders the announcement before the receiver's last look at its rings.
        fence(Ordering::SeqCst);
    }

    /// Receiver: awake again; clear the announcement and the eventfd.
    fn clear(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        if let Some(fd) = &self.fd {
            let mut v: u64 = 0;
            // SAFETY: reads at most 8 bytes into a live u64 from our non-blocking eventfd.
            let _ = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        }
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }
}

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

/// A bounded single-producer single-consumer ring of frame copies.
pub struct HandoffRing {
    slots: Box<[UnsafeCell<Slot>]>,
    head: AtomicUsize,
    tail: AtomicUsize,
    /// The receiver's doorbell.
    bell: Arc<Doorbell>,
}

// SAFETY: one producer thread writes a slot only between reading `tail` (the slot is free) and
// publishing `head` with Release; the one consumer reads it only after seeing that `head` with
// Acquire and before publishing `tail` with Release. No slot is ever accessed by both at once.
unsafe impl Sync for HandoffRing {}
// SAFETY: the slots are plain owned data.
unsafe impl Send for HandoffRing {}

impl HandoffRing {
    /// An empty ring (allocates all its slots now) with a doorbell of its own.
    pub fn new() -> HandoffRing {
        HandoffRing::with_doorbell(Arc::new(Doorbell::new()))
    }

    /// An empty ring whose receiver is woken through `bell`.
    fn with_doorbell(bell: Arc<Doorbell>) -> HandoffRing {
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
        HandoffRing {
            slots,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            bell,
        }
    }

    /// Producer, after a vector's pushes: wake the receiver if it sleeps.
    #[inline]
    fn notify(&self) {
        self.bell.ring();
    }

    /// Producer: copy `data`; false when the ring is full.
    fn push(&self, kind: Kind, port: u16, timestamp_ns: u64, data: &[u8]) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= RING_SLOTS || data.len() > SLOT_BYTES {
            return false;
        }
        // SAFETY: see the `Sync` impl: slot `head` is free and only this producer writes it.
        let slot = unsafe { &mut *self.slots[head % RING_SLOTS].get() };
        slot.kind = kind;
        slot.port = port;
        slot.length = data.len() as u16;
        slot.timestamp_ns = timestamp_ns;
        slot.bytes[..data.len()].copy_from_slice(data);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer: hand the oldest frame to `f`; false when the ring is empty.
    fn pop(&self, f: impl FnOnce(&Slot)) -> bool {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if head == tail {
            return false;
        }
        // SAFETY: see the `Sync` impl: slot `tail` was published and only this consumer reads it.
        f(unsafe { &*self.slots[tail % RING_SLOTS].get() });
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire))
    }

    /// True when no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for HandoffRing {
    fn default() -> Self {
        HandoffRing::new()
    }
}

/// The rings of a data plane: `ring(from, to)` for every ordered pair of workers.
pub struct Handoff {
    workers: usize,
    rings: Vec<Arc<HandoffRing>>,
}

impl Handoff {
    /// Rings for `workers` workers (the rings to one worker share its doorbell).
    pub fn new(workers: usize) -> Handoff {
        let bells: Vec<Arc<Doorbell>> = (0..workers).map(|_| Arc::new(Doorbell::new())).collect();
        Handoff {
            workers,
            rings: (0..workers * workers)
                .map(|i| Arc::new(HandoffRing::with_doorbell(bells[i % workers].clone())))
                .collect(),
        }
    }

    /// The ring from worker `from` to worker `to`.
    pub fn ring(&self, from: usize, to: usize) -> Arc<HandoffRing> {
        self.rings[from * self.workers + to].clone()
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
    out: Vec<Arc<HandoffRing>>,
}

/// Name of the node.
pub const RSS_DISPATCH: &str = "rss-dispatch";
/// Name of the input node.
pub const HANDOFF_RX: &str = "handoff-rx";

impl RssDispatch {
    /// For worker `worker`; `out[w]` is the ring to worker `w`.
    pub fn new(worker: usize, out: Vec<Arc<HandoffRing>>) -> RssDispatch {
        RssDispatch { worker, out }
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
        let workers = self.out.len();
        let mut all_mine = true;
        for (i, &b) in frame.iter().enumerate() {
            let to =
                frame_flow_hash(cx.pool.data(b)).map_or(self.worker, |h| worker_of(h, workers));
            if to == self.worker {
                nexts[i] = 0;
                continue;
            }
            all_mine = false;
            let m = *cx.pool.meta(b);
            if self.out[to].push(Kind::Rx, m.rx_port, m.timestamp_ns, cx.pool.data(b)) {
                // Copied: this buffer is done here.
                cx.pool.free(b);
                nexts[i] = NEXT_CONSUMED;
            } else {
                cx.pool.meta_mut(b).error = cx.error_base;
                nexts[i] = 1;
            }
        }
        if all_mine {
            return Dispatch::AllTo(0);
        }
        for ring in &self.out {
            ring.notify();
        }
        Dispatch::PerPacket
    }
}

/// `handoff-tx-<port>`: the transmit node of a port this worker has no socket on; copies each
/// frame into the ring to the port's owner, which transmits it.
pub struct HandoffTx {
    name: String,
    port: u16,
    ring: Arc<HandoffRing>,
}

impl HandoffTx {
    /// For `port`, handing over to its owner through `ring`.
    pub fn new(name: String, port: u16, ring: Arc<HandoffRing>) -> HandoffTx {
        HandoffTx { name, port, ring }
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
        ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        for (i, &b) in frame.iter().enumerate() {
            let ts = cx.pool.meta(b).timestamp_ns;
            if self.ring.push(Kind::Tx, self.port, ts, cx.pool.data(b)) {
                cx.pool.free(b);
                nexts[i] = NEXT_CONSUMED;
            } else {
                cx.pool.meta_mut(b).error = cx.error_base;
                nexts[i] = 0;
            }
        }
        self.ring.notify();
        Dispatch::PerPacket
    }
}

/// `handoff-rx`: receives what other workers handed over: received frames go to
/// `ethernet-input`, frames to transmit to `interface-output`.
pub struct HandoffRx {
    rings: Vec<Arc<HandoffRing>>,
    next_ring: usize,
}

impl HandoffRx {
    /// Polling `rings` (the rings from every other worker to this one).
    pub fn new(rings: Vec<Arc<HandoffRing>>) -> HandoffRx {
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

    fn wait_fd(&self) -> Option<RawFd> {
        self.rings.first().and_then(|r| r.bell.raw_fd())
    }

    fn before_sleep(&self) -> bool {
        let Some(bell) = self.rings.first().map(|r| &r.bell) else {
            return true;
        };
        bell.announce();
        // A frame pushed before the announcement was seen: no sleep.
        if self.rings.iter().any(|r| !r.is_empty()) {
            bell.clear();
            return false;
        }
        true
    }

    fn after_sleep(&self) {
        if let Some(r) = self.rings.first() {
            r.bell.clear();
        }
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
            let ring = &self.rings[(self.next_ring + k) % rings];
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
        let r = HandoffRing::new();
        for i in 0..RING_SLOTS {
            assert!(r.push(Kind::Rx, 1, i as u64, &[i as u8; 60]));
        }
        assert!(!r.push(Kind::Rx, 1, 0, &[0; 60]), "full");
        assert!(!HandoffRing::new().push(Kind::Rx, 1, 0, &[0; SLOT_BYTES + 1]));
        for i in 0..RING_SLOTS {
            assert!(r.pop(|s| {
                assert_eq!(s.timestamp_ns, i as u64);
                assert_eq!(&s.bytes[..60], &[i as u8; 60]);
            }));
        }
        assert!(!r.pop(|_| {}));
        assert!(r.is_empty());
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

//! The punt path: a worker hands a copy of a packet (or its first bytes, with its full length),
//! its metadata and a reason to the control plane without waiting. One ring per worker
//! (`punt_channel`), a token bucket per worker, per-reason counters the worker writes and the
//! control plane reads, and the [`Bell`] that wakes a sleeping consumer at most once per
//! vector. It never parses the packet and never decides what a punt means: the consumer's
//! sinks (a capture, an OpenFlow connection) do.

use crate::bucket::TokenBucket;
use crate::spsc::{ring, Consumer, Producer};
use crate::{fence, AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::Arc;
#[cfg(not(loom))]
use std::sync::Arc;

/// Why a packet was punted, numbered as OpenFlow's `ofp_packet_in_reason` (1.3, and 1.4's
/// additions), so a controller channel can send the number as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PuntReason {
    /// No rule matched: a table-miss rule (priority 0, matching everything) sent it
    /// (`OFPR_NO_MATCH`, Open vSwitch's "explicit miss").
    NoMatch = 0,
    /// A `controller` action (`OFPR_ACTION`).
    #[default]
    Action = 1,
    /// `dec_ttl` found a TTL of 0 or 1 (`OFPR_INVALID_TTL`).
    InvalidTtl = 2,
    /// A `controller` action in an action set (`OFPR_ACTION_SET`).
    ActionSet = 3,
    /// A `controller` action in a group bucket (`OFPR_GROUP`).
    Group = 4,
    /// A `controller` action of a packet-out (`OFPR_PACKET_OUT`).
    PacketOut = 5,
}

impl PuntReason {
    /// Every reason, in number order.
    pub const ALL: [PuntReason; 6] = [
        PuntReason::NoMatch,
        PuntReason::Action,
        PuntReason::InvalidTtl,
        PuntReason::ActionSet,
        PuntReason::Group,
        PuntReason::PacketOut,
    ];

    /// The name `ovs-ofctl` gives it (`controller(reason=...)`).
    pub fn name(self) -> &'static str {
        match self {
            PuntReason::NoMatch => "no_match",
            PuntReason::Action => "action",
            PuntReason::InvalidTtl => "invalid_ttl",
            PuntReason::ActionSet => "action_set",
            PuntReason::Group => "group",
            PuntReason::PacketOut => "packet_out",
        }
    }

    /// The reason named `name` (as `name` prints it).
    pub fn from_name(name: &str) -> Option<PuntReason> {
        PuntReason::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The reason numbered `n`.
    pub fn from_u8(n: u8) -> Option<PuntReason> {
        PuntReason::ALL.get(usize::from(n)).copied()
    }
}

/// `rx_port` of a packet that came in on no port (e.g. injected by the control plane).
pub const NO_PORT: u16 = u16::MAX;
/// `switch` of a packet punted outside any flow-mode bridge.
pub const NO_SWITCH: u16 = u16::MAX;

/// What comes with a punted packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PuntMeta {
    /// Why.
    pub reason: PuntReason,
    /// The worker that punted it (set by the producer).
    pub worker: u16,
    /// The vecplane port it was received on (`NO_PORT`: none).
    pub rx_port: u16,
    /// Its input port as its bridge numbers it (the OpenFlow `in_port`; 0 outside a bridge).
    pub in_port: u16,
    /// Index of its flow-mode bridge (`NO_SWITCH`: none).
    pub switch: u16,
    /// The table of the rule that punted it.
    pub table: u8,
    /// The cookie of that rule.
    pub cookie: u64,
    /// Most bytes of the packet wanted (`controller(max_len=N)`; 65535: all of it; 0: none).
    pub max_len: u16,
    /// The packet's full length in bytes (set by the producer).
    pub length: u32,
    /// TSC when it was punted (set by the producer).
    pub tsc: u64,
}

/// What the rings, the rate limit and the copies are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntConfig {
    /// Packets a worker's ring holds (rounded up to a power of two).
    pub slots: usize,
    /// Most bytes of a packet kept (the rest is counted in `length`, not copied).
    pub snap_bytes: usize,
    /// Packets a worker may punt per second (0: none).
    pub per_second: u32,
    /// Packets it may punt at once after a pause.
    pub burst: u32,
}

impl Default for PuntConfig {
    fn default() -> PuntConfig {
        PuntConfig {
            slots: 1024,
            snap_bytes: 2048,
            per_second: 100_000,
            burst: 1000,
        }
    }
}

/// One ring slot: a punted packet's metadata and its first bytes.
pub struct PuntSlot {
    /// The metadata.
    pub meta: PuntMeta,
    captured: usize,
    bytes: Box<[u8]>,
}

impl PuntSlot {
    /// The bytes kept (the first `min(length, max_len, snap_bytes)`).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.captured]
    }
}

/// Why a punt was refused (the packet itself goes on; only the copy is lost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PuntDrop {
    /// The worker's ring was full (the consumer is behind).
    RingFull,
    /// The worker's rate limit was reached.
    RateLimited,
}

/// One worker's punt counters: written by the worker only (a plain add, no read-modify-write),
/// read by anyone.
#[derive(Debug)]
pub struct PuntStats {
    sent: [AtomicU64; PuntReason::ALL.len()],
    ring_full: AtomicU64,
    rate_limited: AtomicU64,
}

#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

impl Default for PuntStats {
    fn default() -> PuntStats {
        PuntStats {
            sent: std::array::from_fn(|_| AtomicU64::new(0)),
            ring_full: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
        }
    }
}

impl PuntStats {
    /// Packets punted (put in the ring) for `reason`.
    pub fn sent(&self, reason: PuntReason) -> u64 {
        self.sent[reason as usize].load(Ordering::Relaxed)
    }

    /// Punts refused because the ring was full.
    pub fn ring_full(&self) -> u64 {
        self.ring_full.load(Ordering::Relaxed)
    }

    /// Punts refused by the rate limit.
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }
}

/// Wakes the consumer thread when it sleeps. The consumer announces its sleep and looks at
/// the rings once more before it parks; a producer rings after a vector's pushes. With a
/// sequentially consistent fence on each side between the write and the read, either the
/// consumer's last look sees the push or the producer sees the announcement (then it unparks;
/// an unpark before the park makes the park return at once). A producer that sees no
/// announcement pays one fence and one load.
pub struct Bell {
    sleeping: AtomicBool,
    #[cfg(not(loom))]
    thread: std::sync::OnceLock<std::thread::Thread>,
    #[cfg(loom)]
    thread: loom::sync::Mutex<Option<loom::thread::Thread>>,
    wakes: AtomicU64,
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bell")
            .field("sleeping", &self.sleeping.load(Ordering::Relaxed))
            .field("wakes", &self.wakes())
            .finish()
    }
}

impl Default for Bell {
    fn default() -> Bell {
        Bell::new()
    }
}

impl Bell {
    /// A bell with no consumer attached yet.
    pub fn new() -> Bell {
        Bell {
            sleeping: AtomicBool::new(false),
            #[cfg(not(loom))]
            thread: std::sync::OnceLock::new(),
            #[cfg(loom)]
            thread: loom::sync::Mutex::new(None),
            wakes: AtomicU64::new(0),
        }
    }

    /// Consumer: make the calling thread the one `ring` wakes (once, before its first wait).
    pub fn attach(&self) {
        #[cfg(not(loom))]
        let _ = self.thread.set(std::thread::current());
        #[cfg(loom)]
        {
            *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(loom::thread::current());
        }
    }

    /// Producer: after publishing items, wake the consumer if it announced that it sleeps.
    #[inline]
    pub fn ring(&self) {
        // Orders the pushes before the load (pairs with the fence in `wait`).
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.unpark();
        }
    }

    #[cold]
    fn unpark(&self) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        #[cfg(not(loom))]
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        #[cfg(loom)]
        if let Some(t) = &*self.thread.lock().unwrap_or_else(|p| p.into_inner()) {
            t.unpark();
        }
    }

    /// Consumer: sleep until rung or `timeout` passed, unless `has_work` (called after the
    /// announcement) finds work. Returns whether it slept.
    pub fn wait(&self, timeout: std::time::Duration, has_work: impl Fn() -> bool) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if has_work() {
            self.sleeping.store(false, Ordering::Relaxed);
            return false;
        }
        #[cfg(not(loom))]
        std::thread::park_timeout(timeout);
        #[cfg(loom)]
        {
            let _ = timeout;
            loom::thread::park();
        }
        self.sleeping.store(false, Ordering::Relaxed);
        true
    }

    /// How often a producer woke the consumer.
    pub fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// A worker's side of its punt ring.
pub struct PuntProducer {
    ring: Producer<PuntSlot>,
    bucket: TokenBucket,
    stats: Arc<PuntStats>,
    bell: Arc<Bell>,
    worker: u16,
    snap: usize,
    /// Pushed since the last `flush`.
    pushed: bool,
}

impl PuntProducer {
    /// Punt a copy of `bytes` (the packet as it is now) with `meta` at TSC `now`: at most
    /// `min(meta.max_len, snap_bytes)` bytes are copied, the full length recorded. Refused
    /// (and counted) when the ring is full or the rate limit reached. Call `flush` once the
    /// vector is done.
    #[inline]
    pub fn punt(&mut self, now: u64, meta: &PuntMeta, bytes: &[u8]) -> Result<(), PuntDrop> {
        if !self.ring.has_room() {
            bump(&self.stats.ring_full);
            return Err(PuntDrop::RingFull);
        }
        if !self.bucket.take(now) {
            bump(&self.stats.rate_limited);
            return Err(PuntDrop::RateLimited);
        }
        let (worker, snap) = (self.worker, self.snap);
        let pushed = self.ring.try_push(|slot| {
            let n = bytes.len().min(usize::from(meta.max_len)).min(snap);
            slot.bytes[..n].copy_from_slice(&bytes[..n]);
            slot.captured = n;
            slot.meta = PuntMeta {
                worker,
                length: bytes.len() as u32,
                tsc: now,
                ..*meta
            };
        });
        // `has_room` said yes and only this side fills slots: the push cannot fail.
        debug_assert!(pushed);
        bump(&self.stats.sent[meta.reason as usize]);
        self.pushed = true;
        Ok(())
    }

    /// After a vector: wake the consumer if it sleeps and something was punted.
    #[inline]
    pub fn flush(&mut self) {
        if std::mem::take(&mut self.pushed) {
            self.bell.ring();
        }
    }

    /// This worker's counters.
    pub fn stats(&self) -> &PuntStats {
        &self.stats
    }
}

/// The control plane's side of one worker's punt ring.
pub struct PuntConsumer {
    ring: Consumer<PuntSlot>,
    stats: Arc<PuntStats>,
    worker: u16,
}

impl PuntConsumer {
    /// Hand the oldest punted packet to `read`; None when none waits.
    #[inline]
    pub fn pop<R>(&mut self, read: impl FnOnce(&PuntSlot) -> R) -> Option<R> {
        self.ring.pop(|slot| read(slot))
    }

    /// True when no packet waits.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// The worker's counters.
    pub fn stats(&self) -> &Arc<PuntStats> {
        &self.stats
    }

    /// The worker this ring comes from.
    pub fn worker(&self) -> u16 {
        self.worker
    }

    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }
}

/// Worker `worker`'s punt ring under `config`, on a TSC running at `tsc_hz`, waking its
/// consumer through `bell` (one bell may serve every worker's ring).
pub fn punt_channel(
    config: &PuntConfig,
    worker: u16,
    tsc_hz: u64,
    bell: Arc<Bell>,
) -> (PuntProducer, PuntConsumer) {
    let snap = config.snap_bytes;
    let (p, c) = ring(config.slots, || PuntSlot {
        meta: PuntMeta::default(),
        captured: 0,
        bytes: vec![0; snap].into_boxed_slice(),
    });
    let stats = Arc::new(PuntStats::default());
    (
        PuntProducer {
            ring: p,
            bucket: TokenBucket::new(config.per_second, config.burst, tsc_hz),
            stats: stats.clone(),
            bell,
            worker,
            snap,
            pushed: false,
        },
        PuntConsumer {
            ring: c,
            stats,
            worker,
        },
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn channel(slots: usize, per_second: u32, burst: u32) -> (PuntProducer, PuntConsumer) {
        let config = PuntConfig {
            slots,
            snap_bytes: 128,
            per_second,
            burst,
        };
        punt_channel(&config, 3, 1_000_000, Arc::new(Bell::new()))
    }

    fn meta(reason: PuntReason, max_len: u16) -> PuntMeta {
        PuntMeta {
            reason,
            rx_port: 1,
            in_port: 2,
            switch: 0,
            table: 7,
            cookie: 0xfeed,
            max_len,
            ..PuntMeta::default()
        }
    }

    #[test]
    fn copies_up_to_max_len_and_snap_and_keeps_the_full_length() {
        let (mut p, mut c) = channel(4, 1000, 100);
        let packet: Vec<u8> = (0..200u8).collect();
        p.punt(10, &meta(PuntReason::Action, 65535), &packet)
            .expect("punted");
        p.punt(11, &meta(PuntReason::NoMatch, 20), &packet)
            .expect("punted");
        p.punt(12, &meta(PuntReason::Action, 0), &packet[..50])
            .expect("punted");
        let got: Vec<(PuntMeta, Vec<u8>)> =
            std::iter::from_fn(|| c.pop(|s| (s.meta, s.bytes().to_vec()))).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].1, packet[..128], "cut at the snap length");
        assert_eq!(
            (got[0].0.length, got[0].0.worker, got[0].0.tsc),
            (200, 3, 10)
        );
        assert_eq!(got[0].0.cookie, 0xfeed);
        assert_eq!(got[1].1, packet[..20], "cut at max_len");
        assert_eq!(got[1].0.reason, PuntReason::NoMatch);
        assert!(got[2].1.is_empty(), "max_len 0: metadata only");
        assert_eq!(got[2].0.length, 50);
        assert_eq!(p.stats().sent(PuntReason::Action), 2);
        assert_eq!(p.stats().sent(PuntReason::NoMatch), 1);
    }

    #[test]
    fn a_full_ring_and_the_rate_limit_are_counted_apart() {
        let (mut p, mut c) = channel(2, 1000, 3); // a token a millisecond (1000 ticks)
        let m = meta(PuntReason::Action, 65535);
        assert!(p.punt(0, &m, &[1; 60]).is_ok());
        assert!(p.punt(0, &m, &[2; 60]).is_ok());
        assert_eq!(p.punt(0, &m, &[3; 60]), Err(PuntDrop::RingFull));
        assert_eq!(c.pop(|s| s.bytes()[0]), Some(1));
        assert_eq!(c.pop(|s| s.bytes()[0]), Some(2));
        assert!(
            p.punt(0, &m, &[4; 60]).is_ok(),
            "the third token of the burst"
        );
        assert_eq!(p.punt(0, &m, &[5; 60]), Err(PuntDrop::RateLimited));
        assert!(p.punt(1000, &m, &[6; 60]).is_ok(), "a millisecond later");
        assert_eq!(p.stats().ring_full(), 1);
        assert_eq!(p.stats().rate_limited(), 1);
        assert_eq!(p.stats().sent(PuntReason::Action), 4);
        let rest: Vec<u8> = std::iter::from_fn(|| c.pop(|s| s.bytes()[0])).collect();
        assert_eq!(rest, vec![4, 6]);
    }

    #[test]
    fn the_bell_wakes_a_sleeping_consumer_once_per_flush() {
        let bell = Arc::new(Bell::new());
        let config = PuntConfig {
            slots: 8,
            snap_bytes: 64,
            per_second: 1_000_000,
            burst: 1000,
        };
        let (mut p, mut c) = punt_channel(&config, 0, 1_000_000_000, bell.clone());
        let b = bell.clone();
        let consumer = std::thread::spawn(move || {
            b.attach();
            let mut got = 0;
            while got < 3 {
                while c.pop(|_| ()).is_some() {
                    got += 1;
                }
                if got < 3 {
                    // A long timeout: only the bell ends the sleep in time.
                    b.wait(std::time::Duration::from_secs(30), || !c.is_empty());
                }
            }
            got
        });
        for i in 0..3u8 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            p.punt(
                u64::from(i) * 1000,
                &meta(PuntReason::Action, 65535),
                &[i; 60],
            )
            .expect("punted");
            p.flush();
        }
        let start = std::time::Instant::now();
        assert_eq!(consumer.join().expect("consumer"), 3);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "woken, not timed out"
        );
        p.flush(); // nothing pushed since: no wake
        assert!(bell.wakes() <= 3);
    }
}

//! The punt path's control side: `PuntHub` holds every worker's punt ring, and its thread
//! (`vecplane-punt`) drains them, counts what arrives per reason, and hands each packet to the
//! sinks: the built-in `PuntLog` (the recent packets `ctl punt capture` and the API read) and
//! any the control plane adds (an OpenFlow connection's packet-ins, later). It never touches a
//! worker's state: it reads rings and counters only, and a slow sink slows this thread, never
//! a worker (its ring fills and the worker counts `ring-full`).

use channel::punt::{
    punt_channel, Bell, PuntConfig, PuntConsumer, PuntMeta, PuntReason, PuntStats,
};
use nodes::inject::SharedPunt;
use nodes::neighbour::WorkerCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest sleep of the punt thread between two looks at the rings (the workers' bell wakes it
/// sooner when a packet arrives).
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Packets taken from one ring before the next ring's turn.
const DRAIN_BATCH: usize = 256;
/// Punted packets the log keeps.
pub const LOG_PACKETS: usize = 4096;

/// A punted packet as a sink sees it (valid for the `deliver` call only).
#[derive(Clone, Copy, Debug)]
pub struct Punted<'a> {
    /// Its metadata (reason, ports, bridge, table, cookie, worker, full length).
    pub meta: PuntMeta,
    /// The bytes kept (the first `min(length, max_len, snap-bytes)`).
    pub bytes: &'a [u8],
    /// When it was punted, in nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// A consumer of punted packets (a capture, an OpenFlow connection). `deliver` runs on the
/// punt thread for every packet: copy what is kept and return; never block.
pub trait PuntSink: Send + Sync {
    /// Take one packet.
    fn deliver(&self, packet: &Punted<'_>);
}

/// A punted packet kept by the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedPunt {
    /// Its number: 1 for the first packet punted since start.
    pub seq: u64,
    /// Its metadata.
    pub meta: PuntMeta,
    /// When it was punted (ns since the Unix epoch).
    pub unix_ns: u64,
    /// The bytes kept.
    pub bytes: Vec<u8>,
}

/// The last `LOG_PACKETS` punted packets, numbered; readers wait for newer ones.
#[derive(Debug, Default)]
pub struct PuntLog {
    packets: Mutex<(u64, VecDeque<LoggedPunt>)>,
    grew: Condvar,
}

impl PuntLog {
    /// The number of the last packet logged (0: none yet).
    pub fn last(&self) -> u64 {
        self.lock().0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, VecDeque<LoggedPunt>)> {
        self.packets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Up to `count` packets numbered after `after`, oldest first, waiting up to `wait` for the
    /// first; with the number of the last packet logged. Packets pushed out of the log before
    /// they were read are skipped (their numbers show the gap).
    pub fn after(&self, after: u64, count: usize, wait: Duration) -> (Vec<LoggedPunt>, u64) {
        let deadline = Instant::now() + wait;
        let mut g = self.lock();
        while g.0 <= after {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .grew
                .wait_timeout(g, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let got =
            g.1.iter()
                .filter(|p| p.seq > after)
                .take(count)
                .cloned()
                .collect();
        (got, g.0)
    }
}

impl PuntSink for PuntLog {
    fn deliver(&self, p: &Punted<'_>) {
        let mut g = self.lock();
        g.0 += 1;
        let seq = g.0;
        if g.1.len() == LOG_PACKETS {
            g.1.pop_front();
        }
        g.1.push_back(LoggedPunt {
            seq,
            meta: p.meta,
            unix_ns: p.unix_ns,
            bytes: p.bytes.to_vec(),
        });
        drop(g);
        self.grew.notify_all();
    }
}

/// Every worker's punt ring, the thread draining them, the sinks, the counters.
pub struct PuntHub {
    config: PuntConfig,
    producers: Vec<SharedPunt>,
    consumers: Mutex<Option<Vec<PuntConsumer>>>,
    stats: Vec<Arc<PuntStats>>,
    bell: Arc<Bell>,
    sinks: RwLock<Vec<Arc<dyn PuntSink>>>,
    log: Arc<PuntLog>,
    delivered: [AtomicU64; PuntReason::ALL.len()],
    /// (TSC, Unix ns) at start: punt times in wall-clock time.
    base: (u64, u64),
    tsc_hz: u64,
}

impl std::fmt::Debug for PuntHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PuntHub")
            .field("workers", &self.producers.len())
            .field("config", &self.config)
            .finish()
    }
}

/// One worker's punt counters, as `punt show` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerPunts {
    /// Packets put in the ring, by reason (`PuntReason as usize`).
    pub sent: [u64; PuntReason::ALL.len()],
    /// Copies lost: the ring was full.
    pub ring_full: u64,
    /// Copies lost: the rate limit was reached.
    pub rate_limited: u64,
}

impl PuntHub {
    /// Rings for `workers` workers under `config`, on a TSC running at `tsc_hz`.
    pub fn new(config: PuntConfig, workers: usize, tsc_hz: u64) -> PuntHub {
        let bell = Arc::new(Bell::new());
        let mut producers = Vec::new();
        let mut consumers = Vec::new();
        let mut stats = Vec::new();
        for w in 0..workers.max(1) {
            let (p, c) = punt_channel(&config, w as u16, tsc_hz, bell.clone());
            stats.push(c.stats().clone());
            producers.push(Arc::new(WorkerCell::new(p)));
            consumers.push(c);
        }
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let log = Arc::new(PuntLog::default());
        PuntHub {
            config,
            producers,
            consumers: Mutex::new(Some(consumers)),
            stats,
            bell,
            sinks: RwLock::new(vec![log.clone() as Arc<dyn PuntSink>]),
            log,
            delivered: std::array::from_fn(|_| AtomicU64::new(0)),
            base: (graph::rdtsc(), unix_ns),
            tsc_hz: tsc_hz.max(1),
        }
    }

    /// Worker `w`'s end of its ring, for the nodes of its graph that punt.
    pub fn producer(&self, w: usize) -> Option<SharedPunt> {
        self.producers.get(w).cloned()
    }

    /// The settings the rings were made with.
    pub fn config(&self) -> PuntConfig {
        self.config
    }

    /// The recent punted packets.
    pub fn log(&self) -> &Arc<PuntLog> {
        &self.log
    }

    /// Hand every punted packet to `sink` too (e.g. a controller connection), from now on.
    pub fn add_sink(&self, sink: Arc<dyn PuntSink>) {
        self.sinks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(sink);
    }

    /// Stop handing packets to `sink`.
    pub fn remove_sink(&self, sink: &Arc<dyn PuntSink>) {
        self.sinks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|s| !Arc::ptr_eq(s, sink));
    }

    /// Each worker's counters.
    pub fn workers(&self) -> Vec<WorkerPunts> {
        self.stats
            .iter()
            .map(|s| WorkerPunts {
                sent: PuntReason::ALL.map(|r| s.sent(r)),
                ring_full: s.ring_full(),
                rate_limited: s.rate_limited(),
            })
            .collect()
    }

    /// Packets handed to the sinks, by reason.
    pub fn delivered(&self) -> [u64; PuntReason::ALL.len()] {
        std::array::from_fn(|i| self.delivered[i].load(Ordering::Relaxed))
    }

    /// How often a worker woke the punt thread.
    pub fn wakes(&self) -> u64 {
        self.bell.wakes()
    }

    /// Start the punt thread (once; later calls start nothing): it drains until `stop`.
    pub fn start(self: &Arc<Self>, stop: Arc<AtomicBool>) -> Option<std::thread::JoinHandle<()>> {
        let consumers = self
            .consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let hub = self.clone();
        std::thread::Builder::new()
            .name("vecplane-punt".into())
            .spawn(move || hub.run(consumers, &stop))
            .map_err(|e| tracing::error!("cannot start the punt thread: {e}"))
            .ok()
    }

    fn run(&self, mut consumers: Vec<PuntConsumer>, stop: &AtomicBool) {
        self.bell.attach();
        loop {
            let got = self.drain(&mut consumers);
            if stop.load(Ordering::Acquire) {
                self.drain(&mut consumers);
                return;
            }
            if got == 0 {
                self.bell.wait(POLL_INTERVAL, || {
                    consumers.iter().any(|c| !c.is_empty()) || stop.load(Ordering::Acquire)
                });
            }
        }
    }

    /// Take what waits in the rings (a batch per ring) to the sinks; returns how many.
    fn drain(&self, consumers: &mut [PuntConsumer]) -> usize {
        if consumers.iter().all(|c| c.is_empty()) {
            return 0;
        }
        let sinks = self.sinks.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut total = 0;
        for c in consumers.iter_mut() {
            for _ in 0..DRAIN_BATCH {
                let done = c.pop(|slot| {
                    let p = Punted {
                        meta: slot.meta,
                        bytes: slot.bytes(),
                        unix_ns: self.unix_ns(slot.meta.tsc),
                    };
                    for s in &sinks {
                        s.deliver(&p);
                    }
                    self.delivered[slot.meta.reason as usize].fetch_add(1, Ordering::Relaxed);
                });
                if done.is_none() {
                    break;
                }
                total += 1;
            }
        }
        total
    }

    fn unix_ns(&self, tsc: u64) -> u64 {
        let dt = tsc.wrapping_sub(self.base.0) as u128 * 1_000_000_000 / self.tsc_hz as u128;
        self.base.1.saturating_add(dt as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_hands_punts_to_the_log_and_added_sinks() {
        struct Count(AtomicU64);
        impl PuntSink for Count {
            fn deliver(&self, p: &Punted<'_>) {
                assert_eq!(p.bytes.len(), 60);
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let hub = Arc::new(PuntHub::new(PuntConfig::default(), 2, 1_000_000_000));
        let sink = Arc::new(Count(AtomicU64::new(0)));
        hub.add_sink(sink.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = hub.start(stop.clone()).expect("thread");
        assert!(hub.start(stop.clone()).is_none(), "one thread");
        let meta = PuntMeta {
            reason: PuntReason::NoMatch,
            max_len: u16::MAX,
            ..PuntMeta::default()
        };
        for w in 0..2 {
            let p = hub.producer(w).expect("producer");
            p.with(|p| {
                p.punt(graph::rdtsc(), &meta, &[w as u8; 60]).expect("room");
                p.flush();
            });
        }
        // Readers wait for what comes after what they saw.
        let deadline = Instant::now() + Duration::from_secs(10);
        while hub.log().last() < 2 && Instant::now() < deadline {
            hub.log()
                .after(hub.log().last(), 10, Duration::from_millis(100));
        }
        stop.store(true, Ordering::Release);
        thread.join().expect("punt thread");
        assert_eq!(hub.delivered()[PuntReason::NoMatch as usize], 2);
        assert_eq!(sink.0.load(Ordering::Relaxed), 2);
        assert_eq!(hub.log().last(), 2);
        let w = hub.workers();
        assert_eq!(w[0].sent[0] + w[1].sent[0], 2);
        let (all, _) = hub.log().after(0, 10, Duration::ZERO);
        let mut firsts: Vec<u8> = all.iter().map(|p| p.bytes[0]).collect();
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1]);
        sink.0.store(0, Ordering::Relaxed);
        hub.remove_sink(&(sink.clone() as Arc<dyn PuntSink>));
    }
}

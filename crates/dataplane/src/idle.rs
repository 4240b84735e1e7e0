//! How an idle worker waits (`poll-mode`): a busy worker polls without pause; an adaptive one,
//! after a run of empty rounds, sleeps in one `ppoll` on its wait set (its inputs' AF_XDP,
//! AF_PACKET and TAP sockets and its own doorbell, a `pollfd` array built once) until one is
//! readable, its next timer is due, or a sleep that doubles from 8 us up to `poll-sleep-max-us`
//! ends, as VPP's adaptive rx-mode and Open vSwitch's `pmd-sleep-max` do. It owns the single
//! sleep site of a worker; it never sleeps while an input has work or the worker must stop, and
//! always marks the worker offline in the epoch domain first, so the control thread never waits
//! for a sleeping worker. Nothing here runs while packets flow: a round that received anything
//! costs one compare.
//!
//! Why `ppoll` and not an epoll set: an epoll registration stays on each socket's wait queue
//! while the worker is awake, so every wake-up the kernel raises on it (each receive batch, each
//! transmit completion) runs epoll's callback; on the veth router that cost 7-10% of the
//! forwarding rate under load (`vecplane bench --scenario poll`: 0.90-0.93x busy with epoll
//! against 1.01x with `ppoll`). `ppoll` is on the wait queues only while the worker sleeps; the
//! price is one registration per descriptor per sleep, which only an idle worker pays.

use crate::spec::PollMode;
use graph::{Counter, Graph};
use live::WorkerEpoch;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Empty rounds in a row before the first sleep (about 20-60 us of polling).
pub const EMPTY_ROUNDS: u32 = 256;

/// The first (shortest) sleep, in microseconds.
pub const FIRST_SLEEP_US: u32 = 8;

/// A worker's idle counters (read by `show runtime` and `/metrics`).
#[derive(Debug, Default)]
pub struct IdleStats {
    /// Sleeps taken.
    pub sleeps: Counter,
    /// Nanoseconds spent asleep.
    pub slept_ns: Counter,
    /// Sleeps ended by an input or the doorbell becoming readable (the rest timed out).
    pub woken_by_input: Counter,
    /// The worker's heartbeat: bumped every few dispatch rounds and after every sleep (at most
    /// `poll-sleep-max-us`, 100 ms), so it advances while the worker idles and stops only when
    /// the worker stalls or ended.
    pub heartbeat: Counter,
}

/// How other threads wake a worker that sleeps: an eventfd in its wait set and a flag the
/// worker raises before it sleeps. A producer handing it frames rings only when it sees the
/// flag (one fence and one load per vector while the worker is awake, no system call).
pub struct Doorbell {
    sleeping: AtomicBool,
    /// An eventfd (None: the kernel refused one; the worker then sleeps only its bounded
    /// timeout).
    fd: Option<OwnedFd>,
}

impl Doorbell {
    /// A doorbell with its own eventfd.
    pub fn new() -> Doorbell {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        Doorbell {
            sleeping: AtomicBool::new(false),
            // SAFETY: `raw` is a descriptor nothing else owns.
            fd: (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw) }),
        }
    }

    /// After publishing work for the worker (e.g. pushing into its ring): wake it if it
    /// announced that it sleeps.
    #[inline]
    pub fn ring(&self) {
        // Orders the caller's publication before the load (pairs with the fence in
        // `announce`): either the worker sees the work on its last look, or we see the flag.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::AcqRel) {
            self.write();
        }
    }

    /// Wake the worker whether or not it sleeps (cold: e.g. to make it notice `stop`).
    pub fn wake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        self.write();
    }

    fn write(&self) {
        if let Some(fd) = &self.fd {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our eventfd.
            let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Worker: about to sleep. Everything published after this is either seen by the
    /// worker's next look at its inputs or rings.
    fn announce(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Worker: awake again; lower the flag and empty the eventfd.
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

impl Default for Doorbell {
    fn default() -> Self {
        Doorbell::new()
    }
}

/// A worker's poll mode and longest sleep, changed live by the control plane (reload) and read
/// by the worker between rounds: it compares `generation` every few rounds and after each sleep,
/// and rebuilds its `Idler` (cold) when it moved. A sleeping worker takes a change when its
/// current sleep ends (within the old `poll-sleep-max-us`).
#[derive(Debug)]
pub struct PollSetting {
    adaptive: AtomicBool,
    sleep_max_us: AtomicU32,
    generation: AtomicU64,
}

impl PollSetting {
    /// `mode`, sleeping at most `sleep_max_us`.
    pub fn new(mode: PollMode, sleep_max_us: u32) -> PollSetting {
        PollSetting {
            adaptive: AtomicBool::new(mode == PollMode::Adaptive),
            sleep_max_us: AtomicU32::new(sleep_max_us),
            generation: AtomicU64::new(0),
        }
    }

    /// The mode and the longest sleep now.
    pub fn get(&self) -> (PollMode, u32) {
        let mode = if self.adaptive.load(Ordering::Acquire) {
            PollMode::Adaptive
        } else {
            PollMode::Busy
        };
        (mode, self.sleep_max_us.load(Ordering::Acquire))
    }

    /// The mode now.
    pub fn mode(&self) -> PollMode {
        self.get().0
    }

    /// Change both; returns whether anything changed.
    pub fn set(&self, mode: PollMode, sleep_max_us: u32) -> bool {
        if self.get() == (mode, sleep_max_us) {
            return false;
        }
        self.adaptive
            .store(mode == PollMode::Adaptive, Ordering::Release);
        self.sleep_max_us.store(sleep_max_us, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Moves on every `set` that changed something.
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The idle policy alone (no system call): when to sleep and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    mode: PollMode,
    empty: u32,
    sleep_us: u32,
    max_us: u32,
}

impl IdlePolicy {
    /// For a worker in `mode` whose sleeps last at most `max_us` microseconds.
    pub fn new(mode: PollMode, max_us: u32) -> IdlePolicy {
        IdlePolicy {
            mode,
            empty: 0,
            sleep_us: FIRST_SLEEP_US,
            max_us: max_us.max(FIRST_SLEEP_US),
        }
    }

    /// Whether the worker should sleep now, after a round that received `received` packets.
    #[inline(always)]
    pub fn should_sleep(&mut self, received: usize) -> bool {
        if received > 0 {
            if self.empty != 0 {
                self.reset();
            }
            return false;
        }
        self.idle_round()
    }

    #[inline(never)]
    fn idle_round(&mut self) -> bool {
        if self.mode == PollMode::Busy {
            return false;
        }
        self.empty = self.empty.saturating_add(1);
        self.empty >= EMPTY_ROUNDS
    }

    /// Traffic (or work an input announced): poll a full run of rounds again before sleeping,
    /// from the shortest sleep.
    pub fn reset(&mut self) {
        self.empty = 0;
        self.sleep_us = FIRST_SLEEP_US;
    }

    /// How long the next sleep may last, in nanoseconds: the current sleep length, cut to
    /// `until_timer_ns` (the next timer of an input, or the run's deadline) when that is sooner.
    pub fn timeout_ns(&self, until_timer_ns: Option<u64>) -> u64 {
        let ns = u64::from(self.sleep_us) * 1000;
        until_timer_ns.map_or(ns, |t| ns.min(t))
    }

    /// A sleep ended: woken by a descriptor (traffic) or by its timeout.
    pub fn woke(&mut self, by_input: bool) {
        if by_input {
            self.reset();
        } else {
            // One round (timers, inputs without a descriptor), then sleep again, longer.
            self.sleep_us = self.sleep_us.saturating_mul(2).min(self.max_us);
            self.empty = EMPTY_ROUNDS - 1;
        }
    }

    /// The length of the next sleep, in microseconds.
    pub fn sleep_us(&self) -> u32 {
        self.sleep_us
    }

    /// The mode.
    pub fn mode(&self) -> PollMode {
        self.mode
    }
}

/// Why `Idler::sleep` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// It did not sleep: an input had work, a timer was due, or the worker must stop.
    NotSlept,
    /// A descriptor became readable (traffic, or the doorbell).
    Input,
    /// The sleep's time passed.
    Timeout,
}

/// One worker's idle policy, its wait set and its doorbell: the single sleep site.
pub struct Idler {
    policy: IdlePolicy,
    /// What a sleep waits on: the inputs' descriptors and the doorbell's (empty in busy mode).
    fds: Vec<libc::pollfd>,
    bell: Arc<Doorbell>,
    stats: Arc<IdleStats>,
    tsc_hz: u64,
}

/// A wait-set entry for readability of `fd`.
fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

impl Idler {
    /// For a worker in `mode` whose inputs are those of `graph`, woken through `bell`, sleeping
    /// at most `max_us`. Builds the wait set once (cold).
    pub fn new(
        mode: PollMode,
        max_us: u32,
        graph: &Graph,
        bell: Arc<Doorbell>,
        stats: Arc<IdleStats>,
        tsc_hz: u64,
    ) -> Idler {
        let fds = match mode {
            PollMode::Busy => Vec::new(),
            PollMode::Adaptive => graph
                .wait_fds()
                .into_iter()
                .chain(bell.raw_fd())
                .map(pollfd)
                .collect(),
        };
        Idler {
            policy: IdlePolicy::new(mode, max_us),
            fds,
            bell,
            stats,
            tsc_hz: tsc_hz.max(1),
        }
    }

    /// Whether the worker should sleep now, after a round that received `received` packets.
    #[inline(always)]
    pub fn should_sleep(&mut self, received: usize) -> bool {
        self.policy.should_sleep(received)
    }

    /// Sleep until an input or the doorbell is readable, the next timer of an input is due,
    /// `deadline` passes or the current sleep length passed (cold path: only when idle). The
    /// worker is offline in the epoch domain meanwhile. Does not sleep when `stop` is set or
    /// an input says it has work.
    #[cold]
    pub fn sleep(
        &mut self,
        graph: &Graph,
        epoch: Option<&mut WorkerEpoch>,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Woken {
        self.bell.announce();
        if stop.load(Ordering::Acquire) || !graph.before_sleep() {
            self.bell.clear();
            graph.after_sleep();
            self.policy.reset();
            return Woken::NotSlept;
        }
        let now = graph::rdtsc();
        let until_timer = graph.next_timer().map(|t| {
            let ticks = t.saturating_sub(now);
            (u128::from(ticks) * 1_000_000_000 / u128::from(self.tsc_hz)) as u64
        });
        let until_deadline = deadline.map(|d| {
            d.saturating_duration_since(Instant::now())
                .as_nanos()
                .min(u128::from(u64::MAX)) as u64
        });
        let soonest = match (until_timer, until_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let timeout_ns = self.policy.timeout_ns(soonest);
        if timeout_ns == 0 {
            // A timer is due: run it in the next round.
            self.bell.clear();
            graph.after_sleep();
            return Woken::NotSlept;
        }
        let mut epoch = epoch;
        if let Some(e) = epoch.as_deref_mut() {
            // SAFETY: called between dispatch rounds: no reference from a reader is alive,
            // and none is taken before `online` below.
            unsafe { e.offline() };
        }
        if !self.fds.is_empty() {
            // The inputs' descriptors now (a vhost-user queue that moved to another worker
            // withdraws its own); the list keeps its capacity, so this allocates nothing.
            let fds = &mut self.fds;
            fds.clear();
            graph.each_wait_fd(|fd| fds.push(pollfd(fd)));
            if let Some(fd) = self.bell.raw_fd() {
                fds.push(pollfd(fd));
            }
        }
        let start = Instant::now();
        let ready = self.wait(timeout_ns);
        self.stats.sleeps.add(1);
        self.stats
            .slept_ns
            .add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if let Some(e) = epoch {
            e.online();
        }
        self.bell.clear();
        graph.after_sleep();
        self.policy.woke(ready);
        if ready {
            self.stats.woken_by_input.add(1);
            Woken::Input
        } else {
            Woken::Timeout
        }
    }

    /// Wait on the wait set for at most `ns` nanoseconds; whether a descriptor was ready (a
    /// signal or an error counts as a timeout: the next round polls every input anyway).
    fn wait(&mut self, ns: u64) -> bool {
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        for p in &mut self.fds {
            p.revents = 0;
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfd (possibly empty: a plain timed
        // sleep); `ts` lives across the call; no signal mask is passed.
        let ready = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        ready > 0
    }

    /// The policy (for tests and counters).
    pub fn policy(&self) -> &IdlePolicy {
        &self.policy
    }

    /// How many descriptors a sleep waits on (0: busy mode).
    pub fn wait_set_len(&self) -> usize {
        self.fds.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_never_sleeps_and_adaptive_sleeps_after_a_run_of_empty_rounds() {
        let mut busy = IdlePolicy::new(PollMode::Busy, 1000);
        assert!((0..10_000).all(|_| !busy.should_sleep(0)));
        let mut a = IdlePolicy::new(PollMode::Adaptive, 1000);
        assert!((1..EMPTY_ROUNDS).all(|_| !a.should_sleep(0)));
        assert!(a.should_sleep(0));
        // Traffic resets the count.
        assert!(!a.should_sleep(5));
        assert!((1..EMPTY_ROUNDS).all(|_| !a.should_sleep(0)));
        assert!(a.should_sleep(0));
    }

    #[test]
    fn sleeps_double_up_to_the_maximum_and_traffic_starts_over() {
        let mut a = IdlePolicy::new(PollMode::Adaptive, 100);
        assert_eq!(a.sleep_us(), FIRST_SLEEP_US);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(a.sleep_us());
            a.woke(false);
            // After a timeout the next empty round sleeps again at once.
            assert!(a.should_sleep(0));
        }
        assert_eq!(seen, [8, 16, 32, 64, 100, 100]);
        a.woke(true);
        assert_eq!(a.sleep_us(), FIRST_SLEEP_US);
        assert!(
            !a.should_sleep(0),
            "woken by traffic: a full run of rounds first"
        );
        // A maximum under the first sleep is raised to it.
        assert_eq!(IdlePolicy::new(PollMode::Adaptive, 1).sleep_us(), 8);
    }

    #[test]
    fn a_timer_or_deadline_cuts_the_sleep() {
        let mut a = IdlePolicy::new(PollMode::Adaptive, 1000);
        for _ in 0..10 {
            a.woke(false);
        }
        assert_eq!(a.timeout_ns(None), 1_000_000);
        assert_eq!(a.timeout_ns(Some(250_000)), 250_000);
        assert_eq!(a.timeout_ns(Some(5_000_000)), 1_000_000);
        assert_eq!(a.timeout_ns(Some(0)), 0);
    }

    /// An input that waits on `fd`, with an optional timer and a veto on sleeping.
    struct FdInput {
        fd: RawFd,
        timer: Option<u64>,
        busy: bool,
    }

    impl graph::InputNode for FdInput {
        fn name(&self) -> &str {
            "fd-rx"
        }
        fn next_nodes(&self) -> Vec<String> {
            Vec::new()
        }
        fn poll(
            &mut self,
            _: &mut graph::NodeContext<'_>,
            _: &mut [u32],
            _: &mut [u16],
        ) -> (usize, graph::Dispatch) {
            (0, graph::Dispatch::PerPacket)
        }
        fn wait_fd(&self) -> Option<RawFd> {
            Some(self.fd)
        }
        fn before_sleep(&self) -> bool {
            !self.busy
        }
        fn next_timer(&self) -> Option<u64> {
            self.timer
        }
    }

    fn hz() -> u64 {
        static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *HZ.get_or_init(|| graph::measure_tsc_hz(20))
    }

    fn setup(input: FdInput, max_us: u32) -> (Idler, Graph, Arc<Doorbell>) {
        let mut b = graph::GraphBuilder::new();
        b.add_input(Box::new(input));
        let hz = hz();
        let g = b.build(0, hz).expect("graph");
        let bell = Arc::new(Doorbell::new());
        let stats = Arc::new(IdleStats::default());
        let idler = Idler::new(PollMode::Adaptive, max_us, &g, bell.clone(), stats, hz);
        (idler, g, bell)
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into a live array of two.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both are new descriptors nothing else owns.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// A sleep no test waits out: a wake or a cut sleep returns long before it, on however
    /// loaded a machine, so "it returned before `CUT`" tells the cases apart without timing.
    const LONG_SLEEP_US: u32 = 30_000_000;
    const CUT: std::time::Duration = std::time::Duration::from_secs(10);

    /// Doubles the next sleep up to its maximum (`LONG_SLEEP_US` in the tests below).
    fn long_sleeps(idler: &mut Idler) {
        for _ in 0..32 {
            idler.policy.woke(false);
        }
    }

    #[test]
    fn an_idle_worker_sleeps_until_its_input_is_readable_or_the_timeout() {
        let (r, w) = pipe();
        let input = FdInput {
            fd: r.as_raw_fd(),
            timer: None,
            busy: false,
        };
        let (mut idler, g, bell) = setup(input, LONG_SLEEP_US);
        assert_eq!(idler.wait_set_len(), 2, "the input and the doorbell");
        let stop = AtomicBool::new(false);
        // Nothing readable: the sleep times out after its length (8 us first).
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::Timeout);
        // Readable: it returns at once, long before its 30 s.
        long_sleeps(&mut idler);
        // SAFETY: writes one byte from a live array to our pipe.
        let written = unsafe { libc::write(w.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        assert_eq!(written, 1);
        let t = Instant::now();
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::Input);
        assert!(t.elapsed() < CUT, "{:?}", t.elapsed());
        assert_eq!(
            idler.policy().sleep_us(),
            FIRST_SLEEP_US,
            "traffic: short sleeps"
        );
        // The doorbell, rung by a producer while the worker sleeps, wakes it.
        let (r2, _w2) = pipe();
        let input = FdInput {
            fd: r2.as_raw_fd(),
            timer: None,
            busy: false,
        };
        let (mut idler, g, bell2) = setup(input, LONG_SLEEP_US);
        long_sleeps(&mut idler);
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(5));
            bell2.ring();
        });
        let t = Instant::now();
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::Input);
        assert!(t.elapsed() < CUT, "{:?}", t.elapsed());
        ringer.join().expect("ringer");
        drop(bell);
    }

    #[test]
    fn no_sleep_when_stopping_or_an_input_has_work_and_timers_cut_it() {
        let (r, _w) = pipe();
        let stop = AtomicBool::new(false);
        let busy = FdInput {
            fd: r.as_raw_fd(),
            timer: None,
            busy: true,
        };
        let (mut idler, g, _) = setup(busy, 100_000);
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::NotSlept);
        let quiet = FdInput {
            fd: r.as_raw_fd(),
            timer: None,
            busy: false,
        };
        let (mut idler, g, _) = setup(quiet, LONG_SLEEP_US);
        stop.store(true, Ordering::Release);
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::NotSlept);
        stop.store(false, Ordering::Release);
        // A deadline 3 ms away cuts a 30 s sleep.
        long_sleeps(&mut idler);
        let t = Instant::now();
        let deadline = Some(t + std::time::Duration::from_millis(3));
        assert_eq!(idler.sleep(&g, None, &stop, deadline), Woken::Timeout);
        assert!(t.elapsed() < CUT, "{:?}", t.elapsed());
        // A timer due now: no sleep; one 3 ms away cuts it too.
        let due = FdInput {
            fd: r.as_raw_fd(),
            timer: Some(graph::rdtsc()),
            busy: false,
        };
        let (mut idler, g, _) = setup(due, LONG_SLEEP_US);
        long_sleeps(&mut idler);
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::NotSlept);
        let soon = FdInput {
            fd: r.as_raw_fd(),
            timer: Some(graph::rdtsc() + hz() / 333),
            busy: false,
        };
        let (mut idler, g, _) = setup(soon, LONG_SLEEP_US);
        long_sleeps(&mut idler);
        let t = Instant::now();
        assert_eq!(idler.sleep(&g, None, &stop, None), Woken::Timeout);
        assert!(t.elapsed() < CUT, "{:?}", t.elapsed());
    }

    #[test]
    fn the_doorbell_rings_only_for_a_sleeper() {
        let b = Doorbell::new();
        let fd = b.raw_fd().expect("eventfd");
        let readable = || {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, no wait.
            unsafe { libc::poll(&mut p, 1, 0) == 1 }
        };
        b.ring();
        assert!(!readable(), "awake: no system call, nothing written");
        b.announce();
        b.ring();
        assert!(readable(), "asleep: rung");
        b.ring();
        b.clear();
        assert!(!readable(), "cleared");
        b.wake();
        assert!(readable(), "wake rings regardless");
        b.clear();
    }
}

//! How an idle worker waits (`poll-mode`): a busy worker polls without pause; an adaptive one,
//! after a run of empty rounds, sleeps in one `ppoll` on its inputs' descriptors (AF_XDP,
//! AF_PACKET, TAP sockets and its handoff doorbell) for a time that doubles from 8 us up to
//! `poll-sleep-max-us`, and wakes at once when one becomes readable, as VPP's adaptive rx-mode
//! and Open vSwitch's `pmd-sleep-max` do. It owns the single sleep site of a worker; it never
//! sleeps while an input has work and always marks the worker offline in the epoch domain
//! first, so the control thread never waits for a sleeping worker.

use crate::spec::PollMode;
use graph::{Counter, Graph};
use live::WorkerEpoch;
use std::sync::Arc;
use std::time::Instant;

/// Empty rounds in a row before the first sleep (about 20-60 us of polling).
const EMPTY_ROUNDS: u32 = 256;

/// The first (shortest) sleep, in microseconds.
const FIRST_SLEEP_US: u32 = 8;

/// A worker's idle counters (read by `show runtime` and `/metrics`).
#[derive(Debug, Default)]
pub struct IdleStats {
    /// Sleeps taken.
    pub sleeps: Counter,
    /// Nanoseconds spent asleep.
    pub slept_ns: Counter,
    /// Sleeps ended by an input becoming readable (the rest timed out).
    pub woken_by_input: Counter,
}

/// One worker's idle policy and its sleep site.
pub struct Idler {
    mode: PollMode,
    fds: Vec<libc::pollfd>,
    empty: u32,
    sleep_us: u32,
    max_us: u32,
    stats: Arc<IdleStats>,
}

impl Idler {
    /// For a worker in `mode` whose inputs are those of `graph`, sleeping at most `max_us`.
    pub fn new(mode: PollMode, max_us: u32, graph: &Graph, stats: Arc<IdleStats>) -> Idler {
        Idler {
            mode,
            fds: graph
                .wait_fds()
                .into_iter()
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect(),
            empty: 0,
            sleep_us: FIRST_SLEEP_US,
            max_us: max_us.max(FIRST_SLEEP_US),
            stats,
        }
    }

    /// Whether the worker should sleep now, after a round that received `received` packets.
    #[inline]
    pub fn should_sleep(&mut self, received: usize) -> bool {
        if received > 0 {
            self.empty = 0;
            self.sleep_us = FIRST_SLEEP_US;
            return false;
        }
        if self.mode == PollMode::Busy {
            return false;
        }
        self.empty = self.empty.saturating_add(1);
        self.empty >= EMPTY_ROUNDS
    }

    /// Sleep until an input is readable or the current sleep length passed (cold path: only
    /// when idle). The worker is offline in the epoch domain meanwhile.
    #[cold]
    pub fn sleep(&mut self, graph: &Graph, epoch: Option<&mut WorkerEpoch>) {
        if !graph.before_sleep() {
            self.empty = 0;
            return;
        }
        let mut epoch = epoch;
        if let Some(e) = epoch.as_deref_mut() {
            // SAFETY: called between dispatch rounds: no reference from a reader is alive,
            // and none is taken before `online` below.
            unsafe { e.offline() };
        }
        let us = self.sleep_us;
        let ts = libc::timespec {
            tv_sec: libc::time_t::from(us / 1_000_000),
            tv_nsec: libc::c_long::from(us % 1_000_000) * 1000,
        };
        for p in &mut self.fds {
            p.revents = 0;
        }
        let start = Instant::now();
        // SAFETY: `fds` is a live array of `fds.len()` pollfd; `ts` lives across the call; no
        // signal mask is passed.
        let ready = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        self.stats.sleeps.add(1);
        self.stats
            .slept_ns
            .add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if ready > 0 {
            // Traffic: poll a full run of rounds before sleeping again, from the shortest sleep.
            self.stats.woken_by_input.add(1);
            self.sleep_us = FIRST_SLEEP_US;
            self.empty = 0;
        } else {
            // Timed out: one round (timers, inputs without a descriptor), then sleep longer.
            self.sleep_us = self.sleep_us.saturating_mul(2).min(self.max_us);
            self.empty = EMPTY_ROUNDS - 1;
        }
        if let Some(e) = epoch {
            e.online();
        }
        graph.after_sleep();
    }

    /// The mode.
    pub fn mode(&self) -> PollMode {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idler(mode: PollMode) -> Idler {
        Idler {
            mode,
            fds: Vec::new(),
            empty: 0,
            sleep_us: FIRST_SLEEP_US,
            max_us: 1000,
            stats: Arc::new(IdleStats::default()),
        }
    }

    #[test]
    fn busy_never_sleeps_and_adaptive_sleeps_after_a_run_of_empty_rounds() {
        let mut busy = idler(PollMode::Busy);
        assert!((0..10_000).all(|_| !busy.should_sleep(0)));
        let mut a = idler(PollMode::Adaptive);
        assert!((1..EMPTY_ROUNDS).all(|_| !a.should_sleep(0)));
        assert!(a.should_sleep(0));
        // Traffic resets the count.
        assert!(!a.should_sleep(5));
        assert!(!a.should_sleep(0));
    }
}

//! One server's health as the checks see it: a state machine that starts up and unchecked,
//! goes down after `fall` consecutive failures and up after `rise` consecutive successes, and
//! counts probes, successes and failures by reason. Pure: it is handed outcomes and times, it
//! never probes, never sleeps and never changes the load balancer (the runner does, on the
//! `Transition` it returns).

use super::outcome::{FailReason, ProbeOutcome};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// A change of a server's state, returned by `ServerHealth::record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// True: the server went down; false: it came up.
    pub down: bool,
    /// The consecutive failures (down) or successes (up) that made it flip.
    pub count: u32,
    /// The probe that made it flip.
    pub last: ProbeOutcome,
}

impl Transition {
    /// `down (3 failures, last: timeout)` / `up (2 successes, last: ok in 0.120 ms)`.
    pub fn describe(&self) -> String {
        let (state, what) = if self.down {
            (
                "down",
                if self.count == 1 {
                    "failure"
                } else {
                    "failures"
                },
            )
        } else {
            (
                "up",
                if self.count == 1 {
                    "success"
                } else {
                    "successes"
                },
            )
        };
        format!("{state} ({} {what}, last: {})", self.count, self.last)
    }
}

/// One server's health and its probe counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerHealth {
    rise: u32,
    fall: u32,
    up: bool,
    checked: bool,
    consecutive_ok: u32,
    consecutive_fail: u32,
    probes: u64,
    ok: u64,
    not_sent: u64,
    failures: BTreeMap<&'static str, u64>,
    last: Option<ProbeOutcome>,
    last_rtt: Option<Duration>,
    since: SystemTime,
    transitions: u64,
}

impl ServerHealth {
    /// A server that is up and not checked yet, since `now`; `rise` and `fall` are at least 1.
    pub fn new(rise: u32, fall: u32, now: SystemTime) -> ServerHealth {
        ServerHealth {
            rise: rise.max(1),
            fall: fall.max(1),
            up: true,
            checked: false,
            consecutive_ok: 0,
            consecutive_fail: 0,
            probes: 0,
            ok: 0,
            not_sent: 0,
            failures: BTreeMap::new(),
            last: None,
            last_rtt: None,
            since: now,
            transitions: 0,
        }
    }

    /// Count the outcome of one probe finished at `now`; the transition when the state flips.
    /// A probe that was not sent changes no state and no consecutive count.
    pub fn record(&mut self, outcome: ProbeOutcome, now: SystemTime) -> Option<Transition> {
        self.probes += 1;
        self.last = Some(outcome);
        match outcome {
            ProbeOutcome::NotSent(_) => {
                self.not_sent += 1;
                None
            }
            ProbeOutcome::Success { rtt } => {
                self.checked = true;
                self.ok += 1;
                self.last_rtt = Some(rtt);
                self.consecutive_fail = 0;
                self.consecutive_ok = self.consecutive_ok.saturating_add(1);
                (!self.up && self.consecutive_ok >= self.rise)
                    .then(|| self.flip(false, self.consecutive_ok, outcome, now))
            }
            ProbeOutcome::Failure(reason) => {
                self.checked = true;
                *self.failures.entry(reason.name()).or_insert(0) += 1;
                self.consecutive_ok = 0;
                self.consecutive_fail = self.consecutive_fail.saturating_add(1);
                (self.up && self.consecutive_fail >= self.fall)
                    .then(|| self.flip(true, self.consecutive_fail, outcome, now))
            }
        }
    }

    fn flip(&mut self, down: bool, count: u32, last: ProbeOutcome, now: SystemTime) -> Transition {
        self.up = !down;
        self.since = now;
        self.transitions += 1;
        Transition { down, count, last }
    }

    /// Whether the server is up (also before it is checked).
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Whether at least one probe found something (a success or a failure).
    pub fn checked(&self) -> bool {
        self.checked
    }

    /// Successes in a row (0 after a failure).
    pub fn consecutive_ok(&self) -> u32 {
        self.consecutive_ok
    }

    /// Failures in a row (0 after a success).
    pub fn consecutive_fail(&self) -> u32 {
        self.consecutive_fail
    }

    /// Probes finished (successes, failures and probes not sent).
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Successful probes.
    pub fn ok(&self) -> u64 {
        self.ok
    }

    /// Probes that could not be sent.
    pub fn not_sent(&self) -> u64 {
        self.not_sent
    }

    /// Failed probes by `FailReason::name`.
    pub fn failures(&self) -> &BTreeMap<&'static str, u64> {
        &self.failures
    }

    /// Failed probes of every reason.
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    /// The last probe's outcome.
    pub fn last(&self) -> Option<ProbeOutcome> {
        self.last
    }

    /// The round-trip time of the last successful probe.
    pub fn last_rtt(&self) -> Option<Duration> {
        self.last_rtt
    }

    /// When the state last changed (or the server was first seen).
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// How many times the state changed.
    pub fn transitions(&self) -> u64 {
        self.transitions
    }

    /// A failure reason's count.
    pub fn failures_of(&self, reason: FailReason) -> u64 {
        self.failures.get(reason.name()).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: ProbeOutcome = ProbeOutcome::Success {
        rtt: Duration::from_millis(2),
    };
    const TIMEOUT: ProbeOutcome = ProbeOutcome::Failure(FailReason::Timeout);
    const REFUSED: ProbeOutcome = ProbeOutcome::Failure(FailReason::Refused);

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn starts_up_unchecked_and_falls_after_fall_failures() {
        let mut h = ServerHealth::new(2, 3, at(0));
        assert!(h.is_up() && !h.checked());
        assert_eq!(h.record(TIMEOUT, at(1)), None);
        assert!(h.checked() && h.is_up());
        assert_eq!(h.record(REFUSED, at(2)), None);
        let t = h.record(TIMEOUT, at(3)).expect("third failure flips");
        assert_eq!(
            t,
            Transition {
                down: true,
                count: 3,
                last: TIMEOUT
            }
        );
        assert_eq!(t.describe(), "down (3 failures, last: timeout)");
        assert!(!h.is_up());
        assert_eq!(h.since(), at(3));
        // More failures do not flip again.
        assert_eq!(h.record(TIMEOUT, at(4)), None);
        assert_eq!(h.consecutive_fail(), 4);
        assert_eq!(h.transitions(), 1);
    }

    #[test]
    fn rises_after_rise_successes() {
        let mut h = ServerHealth::new(2, 1, at(0));
        assert!(h
            .record(REFUSED, at(1))
            .is_some_and(|t| t.down && t.count == 1));
        assert_eq!(h.record(OK, at(2)), None);
        let t = h.record(OK, at(3)).expect("second success flips");
        assert!(!t.down);
        assert_eq!(t.count, 2);
        assert_eq!(t.describe(), "up (2 successes, last: ok in 2.000 ms)");
        assert!(h.is_up());
        assert_eq!(h.since(), at(3));
        assert_eq!(h.record(OK, at(4)), None);
        assert_eq!(h.transitions(), 2);
    }

    #[test]
    fn flapping_faster_than_rise_and_fall_never_flips() {
        let mut h = ServerHealth::new(3, 3, at(0));
        for i in 0..50 {
            let o = if i % 3 == 2 { OK } else { TIMEOUT };
            assert_eq!(h.record(o, at(i)), None, "probe {i}");
        }
        assert!(h.is_up());
        // Down, then flapping never brings it up.
        for i in 50..53 {
            h.record(TIMEOUT, at(i));
        }
        assert!(!h.is_up());
        for i in 53..100 {
            let o = if i % 3 == 0 { TIMEOUT } else { OK };
            assert_eq!(h.record(o, at(i)), None, "probe {i}");
        }
        assert!(!h.is_up());
    }

    #[test]
    fn counters_count_probes_successes_and_failures_by_reason() {
        let mut h = ServerHealth::new(1, 10, at(0));
        h.record(OK, at(1));
        h.record(TIMEOUT, at(2));
        h.record(TIMEOUT, at(3));
        h.record(ProbeOutcome::Failure(FailReason::BadStatus(503)), at(4));
        h.record(
            ProbeOutcome::NotSent(std::io::ErrorKind::AddrNotAvailable),
            at(5),
        );
        assert_eq!(h.probes(), 5);
        assert_eq!(h.ok(), 1);
        assert_eq!(h.failed(), 3);
        assert_eq!(h.not_sent(), 1);
        assert_eq!(h.failures_of(FailReason::Timeout), 2);
        assert_eq!(h.failures().get("bad_status"), Some(&1));
        assert_eq!(h.last_rtt(), Some(Duration::from_millis(2)));
        assert_eq!(h.last().map(|o| o.name()), Some("not_sent"));
        // The probe not sent did not break the run of failures.
        assert_eq!(h.consecutive_fail(), 3);
        assert_eq!(h.consecutive_ok(), 0);
    }

    #[test]
    fn probes_not_sent_never_flip_or_mark_checked() {
        let mut h = ServerHealth::new(1, 1, at(0));
        for i in 0..10 {
            let o = ProbeOutcome::NotSent(std::io::ErrorKind::PermissionDenied);
            assert_eq!(h.record(o, at(i)), None);
        }
        assert!(h.is_up() && !h.checked());
    }
}

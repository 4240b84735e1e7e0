//! What `show`, the API and the metrics read of the health checks: a snapshot of every probed
//! server (its check, where its probes go, its state and counters), the totals and the recent
//! transitions. Plain data copied out of the runner: holding one never blocks the prober, and
//! it never changes anything.

use super::outcome::ProbeOutcome;
use lb::health::{OnDown, ProbePath};
use lb::model::{AsSlot, VipKey};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

/// A probed server's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetState {
    /// Up (also before its first probe).
    Up,
    /// Down: out of the VIP's Maglev table.
    Down,
    /// Not probed (see `TargetStatus::unprobed`); its health is never changed.
    Unprobed,
}

impl TargetState {
    /// `up`, `down`, `unprobed`.
    pub fn name(self) -> &'static str {
        match self {
            TargetState::Up => "up",
            TargetState::Down => "down",
            TargetState::Unprobed => "unprobed",
        }
    }
}

/// One server of a checked VIP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetStatus {
    /// The check (index into `HealthConfig::checks`).
    pub check: usize,
    /// The VIP.
    pub vip: VipKey,
    /// The server.
    pub server: IpAddr,
    /// Its AS slot now.
    pub slot: AsSlot,
    /// The check's type (`tcp`, `http`, `udp`, `icmp`).
    pub kind: &'static str,
    /// How the check's probes travel.
    pub via: ProbePath,
    /// What the server gets when it goes down.
    pub on_down: OnDown,
    /// Where its probes go (None when unprobed).
    pub destination: Option<SocketAddr>,
    /// Where its probes leave from (None when unprobed).
    pub source: Option<IpAddr>,
    /// True when the probes are addressed to the VIP and wrapped by the data path.
    pub via_vip: bool,
    /// Up, down or unprobed.
    pub state: TargetState,
    /// Why it is not probed.
    pub unprobed: Option<String>,
    /// Whether a probe has found something yet.
    pub checked: bool,
    /// Successes in a row.
    pub consecutive_ok: u32,
    /// Failures in a row.
    pub consecutive_fail: u32,
    /// Probes finished.
    pub probes: u64,
    /// Successful probes.
    pub ok: u64,
    /// Probes the prober could not make.
    pub not_sent: u64,
    /// Failed probes by reason name.
    pub failures: BTreeMap<&'static str, u64>,
    /// The last probe's outcome.
    pub last: Option<ProbeOutcome>,
    /// The last successful probe's round-trip time.
    pub last_rtt: Option<Duration>,
    /// When its state last changed (or it was first seen).
    pub since: SystemTime,
    /// How many times its state changed.
    pub transitions: u64,
}

/// Sums over every target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthTotals {
    /// Servers of checked VIPs.
    pub targets: u64,
    /// Up (probed).
    pub up: u64,
    /// Down.
    pub down: u64,
    /// Not probed.
    pub unprobed: u64,
    /// Probes finished.
    pub probes: u64,
    /// Successful probes.
    pub ok: u64,
    /// Failed probes.
    pub failed: u64,
    /// Probes not made.
    pub not_sent: u64,
    /// State changes since the runner started (also of servers no longer checked).
    pub transitions: u64,
    /// Probes that went out late because every probe-band port was in use or cooling down
    /// (more probes per second than the band holds: lengthen intervals or check fewer VIPs).
    pub delayed: u64,
}

/// One state change, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionRecord {
    /// Wall time of the change.
    pub at: SystemTime,
    /// The check.
    pub check: usize,
    /// The VIP.
    pub vip: VipKey,
    /// The server.
    pub server: IpAddr,
    /// True: went down; false: came up.
    pub down: bool,
    /// The consecutive failures or successes that made it flip.
    pub count: u32,
    /// The probe that made it flip.
    pub last: ProbeOutcome,
    /// Whether the server's flows were flushed (down with `on-down = flush`).
    pub flush: bool,
    /// Why the load balancer refused the change (it is retried), if it did.
    pub error: Option<String>,
}

/// Everything about the health checks, now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthStatus {
    /// Why the runner is not running (e.g. it could not enter the probe namespace).
    pub error: Option<String>,
    /// Every server of every checked VIP, by check, VIP and server.
    pub targets: Vec<TargetStatus>,
    /// Sums.
    pub totals: HealthTotals,
    /// The recent state changes, oldest first (at most `RECENT_TRANSITIONS`).
    pub transitions: Vec<TransitionRecord>,
}

/// How many state changes `HealthStatus::transitions` keeps.
pub const RECENT_TRANSITIONS: usize = 64;

impl HealthStatus {
    /// The totals of `targets` (`transitions`: the runner's count of state changes).
    pub fn sum(targets: &[TargetStatus], transitions: u64) -> HealthTotals {
        let mut t = HealthTotals {
            transitions,
            ..HealthTotals::default()
        };
        for s in targets {
            t.targets += 1;
            match s.state {
                TargetState::Up => t.up += 1,
                TargetState::Down => t.down += 1,
                TargetState::Unprobed => t.unprobed += 1,
            }
            t.probes += s.probes;
            t.ok += s.ok;
            t.failed += s.failures.values().sum::<u64>();
            t.not_sent += s.not_sent;
        }
        t
    }

    /// The status of one server of one VIP, if it is a target.
    pub fn target(&self, vip: &VipKey, server: IpAddr) -> Option<&TargetStatus> {
        self.targets
            .iter()
            .find(|t| t.vip == *vip && t.server == server)
    }
}

//! The closed loop from the data path to BGP: which VIPs this node announces, through the
//! operator's BIRD (`bgp::routes`, `bgp::bird`). A VIP is announced while the data plane
//! forwards (every worker's heartbeat advances), the node is not draining or stopping, and the
//! VIP has a server in its Maglev table (and, when its servers are health-checked, one a probe
//! found up). Its routes go via a TAP device this process holds open (the liveness device):
//! when vecplane dies the device goes and BIRD withdraws at once; when a worker stalls the
//! device is set down until it moves again. Also `drain`: withdraw everything, then wait until
//! the VIPs' traffic has stopped (or a timeout) and say the node is ready to stop.
//!
//! It owns the liveness device, the routes file's content and the drain state. It never
//! touches packets or the LB tables, and never blocks the caller longer than one BIRD request.

use crate::bgp::{bird, routes, BgpConfig};
use crate::health_host::HealthReporter;
use dataplane::idle::IdleStats;
use dataplane::lb::LbControl;
use lb::model::Prefix;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How long one request to BIRD may take.
const BIRD_TIMEOUT: Duration = Duration::from_secs(2);
/// Time between two attempts when BIRD refused or did not answer.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// Where the node is in its life, as `show bgp` says it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Announcing what is ready.
    Serving,
    /// Everything withdrawn; waiting for the traffic to stop.
    Draining {
        since: Instant,
        /// VIP packets at the last change, and when that was.
        last_packets: u64,
        last_change: Instant,
    },
    /// Drained: safe to stop.
    Ready { why: String },
    /// Shutting down: everything withdrawn for good.
    Stopping,
}

struct State {
    phase: Phase,
    /// The routes file BIRD includes, held while the announcer lives.
    routes: routes::RoutesFile,
    /// What BIRD was last told (None: nothing written yet).
    announced: Option<BTreeSet<Prefix>>,
    /// When the last attempt failed (retry after `RETRY_EVERY`).
    failed_at: Option<Instant>,
    last_error: Option<String>,
    /// Each worker's heartbeat and when it last moved.
    beats: Vec<(u64, Instant)>,
    /// Whether every worker has moved at least once since the start.
    forwarding: bool,
    /// Whether the liveness device is up.
    link_up: bool,
    stalls: u64,
    configures: u64,
    errors: u64,
    announcements: u64,
    withdrawals: u64,
}

/// The announcer of one vecplane.
pub struct Announcer {
    cfg: BgpConfig,
    lb: Arc<LbControl>,
    workers: Vec<Arc<IdleStats>>,
    health: Option<HealthReporter>,
    /// The liveness device, held open for the process's life.
    _device: Arc<ports::TapDevice>,
    state: Mutex<State>,
}

impl Announcer {
    /// Create the liveness device, bring it up and tell BIRD that nothing is announced yet
    /// (a restarted node announces only once it forwards). An error when the device cannot
    /// be made; BIRD not answering is not one (it is retried and shown).
    pub fn start(
        cfg: BgpConfig,
        lb: Arc<LbControl>,
        workers: Vec<Arc<IdleStats>>,
        health: Option<HealthReporter>,
    ) -> Result<Announcer, String> {
        let device = ports::TapDevice::open(&ports::TapConfig::new(cfg.interface.clone()))
            .map_err(|e| format!("[bgp] liveness device: {e}"))?;
        set_link(&cfg.interface, true)?;
        let now = Instant::now();
        let beats = workers.iter().map(|w| (w.heartbeat.get(), now)).collect();
        let routes = routes::RoutesFile::new(cfg.routes_file.clone());
        let a = Announcer {
            cfg,
            lb,
            workers,
            health,
            _device: device,
            state: Mutex::new(State {
                phase: Phase::Serving,
                routes,
                announced: None,
                failed_at: None,
                last_error: None,
                beats,
                forwarding: false,
                link_up: true,
                stalls: 0,
                configures: 0,
                errors: 0,
                announcements: 0,
                withdrawals: 0,
            }),
        };
        a.push(&mut a.state(), BTreeSet::new());
        Ok(a)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One step of the loop (the daemon calls it every few tens of milliseconds).
    pub fn tick(&self) {
        let now = Instant::now();
        let mut st = self.state();
        self.watch_workers(&mut st, now);
        self.follow_drain(&mut st, now);
        let desired = self.desired(&st);
        if st.announced.as_ref() != Some(&desired)
            && st
                .failed_at
                .is_none_or(|t| now.duration_since(t) >= RETRY_EVERY)
        {
            self.push(&mut st, desired);
        }
    }

    /// Workers that stopped moving for `stall` take the liveness device down (BIRD then
    /// withdraws everything); it comes back up when they all move again.
    fn watch_workers(&self, st: &mut State, now: Instant) {
        let mut stalled = false;
        let mut all_moved = true;
        for (w, (beat, at)) in self.workers.iter().zip(st.beats.iter_mut()) {
            let b = w.heartbeat.get();
            if b != *beat {
                *beat = b;
                *at = now;
            } else {
                all_moved = false;
                stalled |= now.duration_since(*at) >= self.cfg.stall;
            }
        }
        if all_moved {
            st.forwarding = true;
        }
        if stalled == st.link_up {
            // Down on a stall, up when it is over.
            let up = !stalled;
            match set_link(&self.cfg.interface, up) {
                Ok(()) => {
                    st.link_up = up;
                    if stalled {
                        st.stalls += 1;
                        tracing::warn!(
                            "bgp: a worker made no progress for {} ms: liveness \
                             device {} down, every VIP withdrawn",
                            self.cfg.stall.as_millis(),
                            self.cfg.interface
                        );
                    } else {
                        tracing::info!(
                            "bgp: workers move again: liveness device {} up",
                            self.cfg.interface
                        );
                    }
                }
                Err(e) => st.last_error = Some(e),
            }
        }
    }

    /// While draining: ready once the VIPs' packets stopped for `drain_quiet`, or at
    /// `drain_timeout`.
    fn follow_drain(&self, st: &mut State, now: Instant) {
        let Phase::Draining {
            since,
            last_packets,
            last_change,
        } = st.phase
        else {
            return;
        };
        let packets = self.vip_packets();
        let (last_packets, last_change) = if packets != last_packets {
            (packets, now)
        } else {
            (last_packets, last_change)
        };
        let why = if now.duration_since(last_change) >= self.cfg.drain_quiet {
            Some(format!(
                "no VIP traffic for {} ms",
                self.cfg.drain_quiet.as_millis()
            ))
        } else if now.duration_since(since) >= self.cfg.drain_timeout {
            Some(format!(
                "drain timeout ({} ms) with VIP traffic still arriving",
                self.cfg.drain_timeout.as_millis()
            ))
        } else {
            None
        };
        st.phase = match why {
            Some(why) => {
                tracing::info!("bgp: drained ({why}): ready to stop");
                Phase::Ready { why }
            }
            None => Phase::Draining {
                since,
                last_packets,
                last_change,
            },
        };
    }

    /// Packets sent to servers over every VIP (the drain's measure of traffic).
    fn vip_packets(&self) -> u64 {
        let ids: Vec<_> = self.lb.with_tables(|t| t.vips().map(|v| v.id).collect());
        ids.into_iter()
            .map(|id| self.lb.vip_totals(id).packets)
            .sum()
    }

    /// The VIPs to announce now.
    fn desired(&self, st: &State) -> BTreeSet<Prefix> {
        if st.phase != Phase::Serving || !st.forwarding || !st.link_up {
            return BTreeSet::new();
        }
        let checked = self.health.as_ref().map(|h| h.vips_with_a_server_up());
        self.lb.with_tables(|t| {
            t.vips()
                .filter(|v| v.active_servers > 0)
                // A checked VIP needs a server a probe found up.
                .filter(|v| checked.as_ref().and_then(|c| c.get(&v.key)) != Some(&false))
                .map(|v| v.key.prefix)
                .collect()
        })
    }

    /// Write `desired` and have BIRD read it.
    fn push(&self, st: &mut State, desired: BTreeSet<Prefix>) {
        let before = st.announced.clone().unwrap_or_default();
        let prefixes: Vec<Prefix> = desired.iter().copied().collect();
        let text = routes::render(&self.cfg, &prefixes, SystemTime::now());
        let result = st
            .routes
            .write(&text)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                bird::configure(&self.cfg.control_socket, BIRD_TIMEOUT).map_err(|e| e.to_string())
            });
        st.configures += 1;
        match result {
            Ok(_) => {
                let added = desired.difference(&before).count() as u64;
                let removed = before.difference(&desired).count() as u64;
                st.announcements += added;
                st.withdrawals += removed;
                if added + removed > 0 {
                    tracing::info!(
                        "bgp: announcing {} VIP prefix{} ({added} added, {removed} \
                         withdrawn)",
                        desired.len(),
                        if desired.len() == 1 { "" } else { "es" }
                    );
                }
                st.announced = Some(desired);
                st.failed_at = None;
                st.last_error = None;
            }
            Err(e) => {
                if st.last_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!("bgp: {e} (retrying every second)");
                }
                st.errors += 1;
                st.failed_at = Some(Instant::now());
                st.last_error = Some(e);
            }
        }
    }

    /// `drain`: withdraw every VIP now, then wait for the traffic to stop.
    pub fn drain(&self) -> (String, Value) {
        let now = Instant::now();
        {
            let mut st = self.state();
            if matches!(st.phase, Phase::Serving) {
                st.phase = Phase::Draining {
                    since: now,
                    last_packets: self.vip_packets(),
                    last_change: now,
                };
                tracing::info!("bgp: draining: every VIP withdrawn");
                self.push(&mut st, BTreeSet::new());
            }
        }
        self.show()
    }

    /// `drain cancel`: serve again.
    pub fn undrain(&self) -> (String, Value) {
        {
            let mut st = self.state();
            if matches!(st.phase, Phase::Draining { .. } | Phase::Ready { .. }) {
                st.phase = Phase::Serving;
                st.failed_at = None;
                tracing::info!("bgp: drain cancelled: announcing again");
            }
        }
        self.tick();
        self.show()
    }

    /// Withdraw everything for good (shutdown): one bounded attempt.
    pub fn shutdown(&self) {
        let mut st = self.state();
        st.phase = Phase::Stopping;
        if st.announced.as_ref().is_none_or(|a| !a.is_empty()) {
            self.push(&mut st, BTreeSet::new());
        }
    }

    /// `show bgp`: the phase, what is announced, the liveness device and the counters.
    pub fn show(&self) -> (String, Value) {
        let st = self.state();
        let now = Instant::now();
        let (phase, detail) = match &st.phase {
            Phase::Serving if !st.forwarding => (
                "waiting",
                "the data plane is not forwarding yet".to_string(),
            ),
            Phase::Serving => ("serving", String::new()),
            Phase::Draining {
                since, last_change, ..
            } => (
                "draining",
                format!(
                    "for {:.1} s; last VIP packet change {:.1} s ago",
                    now.duration_since(*since).as_secs_f64(),
                    now.duration_since(*last_change).as_secs_f64()
                ),
            ),
            Phase::Ready { why } => ("ready", why.clone()),
            Phase::Stopping => ("stopping", String::new()),
        };
        let announced: Vec<String> = st
            .announced
            .iter()
            .flatten()
            .map(|p| p.to_string())
            .collect();
        let mut text =
            format!(
            "bgp (bird at {}): {phase}{}\n  announced: {}\n  liveness device {} {}; {} stalls\n  \
             {} configures, {} errors, {} announcements, {} withdrawals\n",
            self.cfg.control_socket.display(),
            if detail.is_empty() { String::new() } else { format!(" ({detail})") },
            if announced.is_empty() { "nothing".to_string() } else { announced.join(", ") },
            self.cfg.interface,
            if st.link_up { "up" } else { "DOWN" },
            st.stalls,
            st.configures,
            st.errors,
            st.announcements,
            st.withdrawals,
        );
        if let Some(e) = &st.last_error {
            text.push_str(&format!("  last error: {e}\n"));
        }
        let json = json!({
            "phase": phase,
            "detail": detail,
            "ready_to_stop": matches!(st.phase, Phase::Ready { .. }),
            "forwarding": st.forwarding,
            "announced": announced,
            "liveness_device": self.cfg.interface,
            "liveness_up": st.link_up,
            "stalls": st.stalls,
            "configures": st.configures,
            "errors": st.errors,
            "announcements": st.announcements,
            "withdrawals": st.withdrawals,
            "last_error": st.last_error,
        });
        (text, json)
    }
}

/// `ip link set dev DEV up|down` (rare: at start and on stalls).
fn set_link(dev: &str, up: bool) -> Result<(), String> {
    let state = if up { "up" } else { "down" };
    ports::netns::ip(&["link", "set", "dev", dev, state]).map_err(|e| format!("[bgp] {e}"))
}

#[cfg(test)]
#[path = "announcer_tests.rs"]
mod tests;

//! The health checks' host in a running vecplane: the probe namespace and its leases
//! (`dataplane::probe_host`) and the load balancer (`LbControl`) behind the runner's
//! `HealthHost` trait. Targets are read from the LB's state each time (servers the API adds or
//! removes are picked up); verdicts go through `LbCommand::SetHealth`, the same all-or-nothing
//! snapshots as the API. Also what `show lb health` prints. It never probes and never decides
//! health itself.

use crate::health::runner::{HealthHandle, HealthHost, Target};
use crate::health::status::HealthStatus;
use crate::table::{self, Align};
use dataplane::lb::LbControl;
use dataplane::probe_host::ProbeHost;
use lb::model::{AsSlot, AsState, LbCommand, VipKey};
use lb::snapshot::VipEntry;
use serde_json::Value;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// The running LB and the probe host.
pub struct LbHealthHost {
    lb: Arc<LbControl>,
    probe: ProbeHost,
    /// The checked VIPs, in `HealthConfig::checks` order.
    checks: Vec<VipKey>,
}

impl LbHealthHost {
    /// A host for `checks` (the VIP of each health check, in order).
    pub fn new(lb: Arc<LbControl>, probe: ProbeHost, checks: Vec<VipKey>) -> LbHealthHost {
        LbHealthHost { lb, probe, checks }
    }
}

impl HealthHost for LbHealthHost {
    fn enter(&self) -> std::io::Result<()> {
        ports::netns::enter(self.probe.netns())
    }

    fn targets(&self) -> Vec<Target> {
        // The published snapshot: no copy of the whole LB state per refresh.
        self.lb.with_tables(|t| {
            let by_key: std::collections::HashMap<VipKey, &VipEntry> =
                t.vips().map(|v| (v.key, v)).collect();
            let mut out = Vec::new();
            for (check, key) in self.checks.iter().enumerate() {
                let Some(vip) = by_key.get(key) else {
                    continue;
                };
                for &slot in &vip.slots {
                    let a = t.as_entry(slot);
                    if matches!(a.state, AsState::Removed | AsState::Free) {
                        continue;
                    }
                    out.push(Target {
                        check,
                        vip: *key,
                        vip_addr: key.prefix.addr(),
                        encap: vip.encap,
                        server: a.addr,
                        slot,
                        health_down: a.health_down,
                    });
                }
            }
            out
        })
    }

    fn set_health(
        &self,
        vip: &VipKey,
        server: IpAddr,
        down: bool,
        flush: bool,
    ) -> Result<(), String> {
        self.lb
            .apply(&[LbCommand::SetHealth {
                vip: *vip,
                servers: vec![server],
                down,
                flush,
            }])
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn lease(&self, port: u16, slot: AsSlot) {
        self.probe.leases().lease(port, slot);
    }

    fn release(&self, port: u16) {
        self.probe.leases().release(port);
    }
}

/// The running health checks as `show`, the API and the metrics read them, and the way to
/// stop them. Cloning shares them.
#[derive(Clone)]
pub struct HealthReporter(Arc<Mutex<HealthHandle>>);

impl HealthReporter {
    /// Report on (and own) `handle`.
    pub fn new(handle: HealthHandle) -> HealthReporter {
        HealthReporter(Arc::new(Mutex::new(handle)))
    }

    fn handle(&self) -> MutexGuard<'_, HealthHandle> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every target, the totals and the recent transitions.
    pub fn status(&self) -> HealthStatus {
        self.handle().status()
    }

    /// Per checked VIP, whether a probe found one of its servers up.
    pub fn vips_with_a_server_up(&self) -> std::collections::BTreeMap<VipKey, bool> {
        self.handle().vips_with_a_server_up()
    }

    /// Stop probing (idempotent).
    pub fn stop(&self) {
        self.handle().stop();
    }
}

/// `show lb health`: one line per probed server and the recent transitions; JSON:
/// `health::json::status_json`.
pub fn show(status: &HealthStatus) -> (String, Value) {
    let t = &status.totals;
    let mut text = format!(
        "health checks: {} servers: {} up, {} down, {} not probed; {} probes, {} ok, {} failed, \
         {} not sent, {} delayed for want of a probe port; {} transitions\n",
        t.targets,
        t.up,
        t.down,
        t.unprobed,
        t.probes,
        t.ok,
        t.failed,
        t.not_sent,
        t.delayed,
        t.transitions
    );
    if let Some(e) = &status.error {
        text.push_str(&format!("NOT RUNNING: {e}\n"));
    }
    let rows: Vec<Vec<String>> = status
        .targets
        .iter()
        .map(|s| {
            vec![
                s.vip.to_string(),
                s.server.to_string(),
                format!("{} {}", s.kind, s.via.name()),
                match &s.unprobed {
                    Some(why) => format!("unprobed ({why})"),
                    None => s.state.name().to_string(),
                },
                format!("{}/{}", s.ok, s.probes),
                crate::health::json::last_text(s.last),
                s.transitions.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        text.push_str(&table::render(
            &[
                ("vip", Align::Left),
                ("server", Align::Left),
                ("check", Align::Left),
                ("state", Align::Left),
                ("ok/probes", Align::Right),
                ("last", Align::Left),
                ("changes", Align::Right),
            ],
            &rows,
        ));
    }
    if !status.transitions.is_empty() {
        text.push_str("recent transitions (oldest first):\n");
        for r in &status.transitions {
            let ago = SystemTime::now()
                .duration_since(r.at)
                .map_or(0.0, |d| d.as_secs_f64());
            text.push_str(&format!(
                "  {ago:.1} s ago: {} server {} {} after {} ({}){}\n",
                r.vip,
                r.server,
                if r.down { "down" } else { "up" },
                r.count,
                r.last,
                r.error
                    .as_ref()
                    .map_or(String::new(), |e| format!("; refused: {e}"))
            ));
        }
    }
    (text, crate::health::json::status_json(status))
}

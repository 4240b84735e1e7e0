//! Flow-mode bridges on the control side: each bridge's OpenFlow tables as one published
//! snapshot (`live::Publisher<FlowTables>`), changed by `FlowSwitch::apply` (a batch of changes
//! is one new snapshot: all or nothing) and read by every worker's `flow-switch` node, which
//! revalidates its megaflows against the new version. Also the rule timeouts (`tick`) and what
//! the workers publish (cache counters, megaflow dumps). Never touches packets and never formats
//! text for people.

use crate::idle::Doorbell;
use crate::spec::{FlowBridgeSpec, FlowCachePolicy, FlowPortSpec};
use flow::cache::{CacheConfig, CacheStats, CycleHistogram, MegaflowDump};
use flow::rule::{FlowMod, Rule};
use flow::tables::{FlowTables, RuleStats, SwitchPorts};
use flow::Group;
use live::{Domain, Publisher, Reader};
use nodes::flow_switch::FlowWorkerShared;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use thiserror::Error;

/// How long `megaflows` waits for every worker's dump.
pub const DUMP_WAIT: Duration = Duration::from_secs(1);

/// Milliseconds between two checks of the rules' idle and hard timeouts.
pub const EXPIRE_EVERY_MS: u64 = 1000;

/// A change the tables refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct FlowSwitchError {
    /// The refused change's index in its batch, when one is at fault.
    pub index: Option<usize>,
    /// What was wrong and what is accepted.
    pub message: String,
}

/// The switch's ports as the tables know them (OpenFlow number -> vecplane port).
fn switch_ports(ports: &[FlowPortSpec], tunnels: &[usize]) -> Result<SwitchPorts, FlowSwitchError> {
    let mut sp = SwitchPorts::new();
    for p in ports {
        sp.add(p.ofport, p.port as u16, tunnels.contains(&p.port))
            .map_err(|e| FlowSwitchError {
                index: None,
                message: e.to_string(),
            })?;
    }
    Ok(sp)
}

/// Whether `port` is a tunnel port (its outputs encapsulate; `DpAction::TunnelOutput`).
pub fn is_tunnel_port(port: &crate::spec::PortSpec) -> bool {
    matches!(port.driver, crate::spec::PortDriver::Vxlan(_))
}

/// Indices of the tunnel ports among `ports` (None: a port whose config had errors).
pub fn tunnel_ports<'a>(
    ports: impl IntoIterator<Item = Option<&'a crate::spec::PortSpec>>,
) -> Vec<usize> {
    ports
        .into_iter()
        .enumerate()
        .filter(|(_, p)| p.is_some_and(is_tunnel_port))
        .map(|(i, _)| i)
        .collect()
}

/// The tables a flow bridge starts with: its groups, then its rules, applied as one change.
/// Errors give the index of the refused group or rule (groups first, then rules).
pub fn initial_tables(
    spec: &FlowBridgeSpec,
    tunnels: &[usize],
) -> Result<FlowTables, (usize, String)> {
    let ports = switch_ports(&spec.ports, tunnels).map_err(|e| (0, e.message))?;
    let mods: Vec<FlowMod> = spec
        .groups
        .iter()
        .cloned()
        .map(FlowMod::AddGroup)
        .chain(spec.rules.iter().cloned().map(FlowMod::Add))
        .collect();
    FlowTables::new(ports)
        .with_frag_handling(spec.frag)
        .apply(&mods)
        .map_err(|e| (e.index, e.to_string()))
}

/// What each of `ports` ports is in the flow-mode bridges `flows` (its bridge by index, its
/// OpenFlow port number and cache settings; None: in none of them).
pub fn flow_port_infos(
    ports: usize,
    flows: &[Arc<FlowSwitch>],
) -> Vec<Option<nodes::flow_switch::FlowPortInfo>> {
    let mut out = vec![None; ports];
    for (i, sw) in flows.iter().enumerate() {
        for p in sw.ports() {
            if let Some(slot) = out.get_mut(p.port) {
                *slot = Some(nodes::flow_switch::FlowPortInfo {
                    switch: i as u16,
                    ofport: p.ofport,
                    emc: p.emc,
                    megaflow: p.megaflow,
                });
            }
        }
    }
    out
}

/// The worker-side cache settings of a policy.
pub fn cache_config(p: &FlowCachePolicy) -> CacheConfig {
    CacheConfig {
        max_megaflows: p.megaflow_limit,
        idle_timeout_ms: p.idle_seconds as u64 * 1000,
        emc_entries: p.emc_entries,
        emc_insert_inv_prob: p.emc_insert_inv_prob,
        emc_enabled: p.emc_entries > 0,
        ..CacheConfig::default()
    }
}

/// A rule with its counters, as `dump-flows` shows it.
#[derive(Clone, Debug)]
pub struct RuleView {
    /// The rule.
    pub rule: Rule,
    /// Its counters.
    pub stats: RuleStats,
    /// Seconds since it was added.
    pub duration_secs: f64,
    /// Seconds since its last hit (since it was added when never hit).
    pub idle_age_secs: u64,
}

/// One flow-mode bridge.
pub struct FlowSwitch {
    name: String,
    ports: Vec<FlowPortSpec>,
    tables: Mutex<Publisher<FlowTables>>,
    workers: Vec<Arc<FlowWorkerShared>>,
    doorbells: Vec<Arc<Doorbell>>,
    tsc_per_ms: u64,
    next_expiry_ms: Mutex<u64>,
    started: Instant,
}

impl std::fmt::Debug for FlowSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowSwitch")
            .field("name", &self.name)
            .finish()
    }
}

impl FlowSwitch {
    /// The switch of bridge `name` with `tables`, for `workers` workers.
    pub fn new(
        name: &str,
        spec: &FlowBridgeSpec,
        tables: FlowTables,
        domain: &Domain,
        doorbells: Vec<Arc<Doorbell>>,
        tsc_hz: u64,
    ) -> FlowSwitch {
        let workers = domain.workers().max(1);
        FlowSwitch {
            name: name.to_string(),
            ports: spec.ports.clone(),
            tables: Mutex::new(Publisher::new(tables, domain)),
            workers: (0..workers)
                .map(|_| Arc::new(FlowWorkerShared::default()))
                .collect(),
            doorbells,
            tsc_per_ms: (tsc_hz / 1000).max(1),
            next_expiry_ms: Mutex::new(0),
            started: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Publisher<FlowTables>> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The workers' clock in milliseconds (the TSC, as the `flow-switch` nodes count it).
    pub fn now_ms(&self) -> u64 {
        graph::rdtsc() / self.tsc_per_ms
    }

    /// The bridge's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its ports and their OpenFlow numbers.
    pub fn ports(&self) -> &[FlowPortSpec] {
        &self.ports
    }

    /// A reader of the tables, for one worker.
    pub fn reader(&self) -> Reader<FlowTables> {
        self.lock().reader()
    }

    /// What worker `w` publishes.
    pub fn worker_shared(&self, w: usize) -> Option<Arc<FlowWorkerShared>> {
        self.workers.get(w).cloned()
    }

    /// Apply `mods` as one new version of the tables (all or nothing); returns the version.
    pub fn apply(&self, mods: &[FlowMod]) -> Result<u64, FlowSwitchError> {
        let now = self.now_ms();
        let mut p = self.lock();
        let next = p
            .current()
            .apply_at(mods, now)
            .map_err(|e| FlowSwitchError {
                index: Some(e.index),
                message: e.to_string(),
            })?;
        let version = next.version();
        p.publish(next);
        Ok(version)
    }

    /// The current version of the tables.
    pub fn version(&self) -> u64 {
        self.lock().current().version()
    }

    /// How many rules the tables hold.
    pub fn rule_count(&self) -> usize {
        self.lock().current().len()
    }

    /// Every rule with its counters, in table and priority order.
    pub fn rules(&self) -> Vec<RuleView> {
        let now = self.now_ms();
        let p = self.lock();
        let t = p.current();
        t.rules()
            .map(|(id, rule)| {
                let stats = t.stats(id).unwrap_or_default();
                let added = if stats.added_ms == 0 {
                    now
                } else {
                    stats.added_ms
                };
                let last = stats.last_hit_ms.max(added);
                RuleView {
                    rule: rule.clone(),
                    stats,
                    duration_secs: now.saturating_sub(added) as f64 / 1000.0,
                    idle_age_secs: now.saturating_sub(last) / 1000,
                }
            })
            .collect()
    }

    /// Every group, by id.
    pub fn groups(&self) -> Vec<Group> {
        self.lock().current().groups().cloned().collect()
    }

    /// The OpenFlow port number of vecplane port `port`.
    pub fn ofport_of(&self, port: u16) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.port == port as usize)
            .map(|p| p.ofport)
    }

    /// A packet-out of `frame` received on OpenFlow port `in_port` (a port of the bridge, or
    /// `CONTROLLER`) running `actions`, translated against the current tables (the rules it
    /// goes through count it now): the vecplane port it counts as received on (None for
    /// `CONTROLLER`) and its datapath actions.
    pub fn packet_out(
        &self,
        frame: &[u8],
        in_port: u16,
        actions: &[flow::Action],
    ) -> Result<(Option<u16>, flow::DpActions), String> {
        let rx = self
            .ports
            .iter()
            .find(|p| p.ofport == in_port)
            .map(|p| p.port as u16);
        if rx.is_none() && in_port != crate::inject::OFPP_CONTROLLER {
            let known: Vec<String> = self.ports.iter().map(|p| p.ofport.to_string()).collect();
            return Err(format!(
                "in_port {in_port} is not a port of bridge `{}`; accepted: {} or CONTROLLER",
                self.name,
                known.join(", ")
            ));
        }
        let (key, _) = flow::extract(frame, in_port, None);
        let now = self.now_ms();
        let p = self.lock();
        let t = p.current();
        let x = t.translate_packet_out(&key, actions);
        if let Some(e) = x.error {
            return Err(format!("its actions cannot run: {e}"));
        }
        for r in x.rules.as_slice() {
            t.counters().add(*r, 1, frame.len() as u64, now);
        }
        Ok((rx, crate::inject::inline_actions(x.actions)?))
    }

    /// Every worker's megaflows: asks each for a dump and waits up to `DUMP_WAIT` (a worker
    /// that does not answer in time is left out).
    pub fn megaflows(&self) -> Vec<(usize, MegaflowDump)> {
        let wanted: Vec<u64> = self.workers.iter().map(|w| w.request_dump()).collect();
        for d in &self.doorbells {
            d.ring();
        }
        let deadline = Instant::now() + DUMP_WAIT;
        let mut got: Vec<Option<Vec<MegaflowDump>>> = vec![None; self.workers.len()];
        loop {
            for (i, w) in self.workers.iter().enumerate() {
                if got[i].is_none() {
                    got[i] = w.take_dump(wanted[i]);
                }
            }
            if got.iter().all(Option::is_some) || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        got.into_iter()
            .enumerate()
            .flat_map(|(w, d)| d.unwrap_or_default().into_iter().map(move |m| (w, m)))
            .collect()
    }

    /// Each worker's cache counters and cycles-per-miss histogram (as last published).
    pub fn cache_stats(&self) -> Vec<(CacheStats, CycleHistogram)> {
        self.workers.iter().map(|w| w.cache.load()).collect()
    }

    /// Each worker's shared side (malformed and error counters).
    pub fn workers(&self) -> &[Arc<FlowWorkerShared>] {
        &self.workers
    }

    /// Seconds since the switch was built.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Periodic control work (call every few tens of milliseconds): free retired tables, and
    /// once a second delete the rules whose idle or hard timeout passed (one new version).
    /// Returns how many rules expired.
    pub fn tick(&self) -> usize {
        let now = self.now_ms();
        let mut p = self.lock();
        p.reclaim();
        {
            let mut next = self
                .next_expiry_ms
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if now < *next {
                return 0;
            }
            *next = now + EXPIRE_EVERY_MS;
        }
        let mods = p.current().expire(now);
        if mods.is_empty() {
            return 0;
        }
        let before = p.current().len();
        match p.current().apply_at(&mods, now) {
            Ok(next) => {
                let after = next.len();
                p.publish(next);
                before.saturating_sub(after)
            }
            Err(_) => 0,
        }
    }
}

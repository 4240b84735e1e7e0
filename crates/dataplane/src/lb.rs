//! The load balancer on the control side: the running `LbState`, the `LbTables` snapshot the
//! workers' `lb` nodes read (`live::Publisher`, one new snapshot per accepted batch: all or
//! nothing), each worker's counters summed with a baseline per reused id, the NAT inside-port
//! flags, and the periodic collection of removed servers. Every data plane has one, with or
//! without `[lb]`: VIPs may come at any time, and `lb_install.rs` makes them reach the workers
//! (their prefixes' routes to `lb`, the workers' flow tables, the NAT inside ports' steering).
//! Never touches packets and never formats text for people; building a snapshot happens here,
//! never on a worker.

use ::lb::counters::LbWorkerCounters;
use ::lb::model::{
    AsSlot, AsSpec, AsState, ConfChange, LbCommand, LbError, LbState, VipId, MAX_AS_SLOTS, MAX_VIPS,
};
use ::lb::nat_inside::NatInside;
use ::lb::snapshot::LbTables;
use live::{Domain, Publisher, Reader};
use nodes::lb::TableSlot;
use nodes::steer::PortSteer;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use thiserror::Error;

#[path = "lb_install.rs"]
mod install;

/// Seconds between two `LbState::collect` runs in `tick`.
pub const COLLECT_EVERY_SECS: u64 = 1;

/// A batch `LbControl::apply` refused (nothing of it was applied).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LbApplyError {
    /// The model refused a command (which one, and why).
    #[error(transparent)]
    Model(#[from] LbError),
    /// `lb set interface nat4|nat6 in <port>` named a port the data plane does not have.
    #[error("command {index}: no port is named `{name}`; accepted: {accepted}")]
    UnknownPort {
        /// Index of the command in the batch.
        index: usize,
        /// The name as given.
        name: String,
        /// The port names.
        accepted: String,
    },
    /// The allocator refused a table the change needs (nothing was applied).
    #[error("command {index}: {source}")]
    Alloc {
        /// Index of the last command of the batch.
        index: usize,
        /// Which table.
        source: ::lb::maglev::MaglevAllocError,
    },
    /// The workers' flow tables could not be allocated for the first VIP (nothing was
    /// applied).
    #[error("command {index}: the workers' flow tables ({entries} entries each, lb conf buckets): {reason}")]
    FlowTables {
        /// Index of the command that added the first VIP.
        index: usize,
        /// Entries asked for.
        entries: u32,
        /// Why not.
        reason: String,
    },
    /// A VIP's prefix cannot be routed to the load balancer (nothing was applied).
    #[error("command {index}: {message}")]
    Route {
        /// Index of the command that added the VIP.
        index: usize,
        /// Why (from the routing tables).
        message: String,
    },
    /// `[lb]` cannot go while VIPs exist (a reload that removes it).
    #[error(
        "[lb] is removed but the load balancer has {vips} VIP(s) ({first}); accepted: delete \
         them first (`vecplane ctl lb vip <prefix> ... del`), or keep [lb]"
    )]
    InUse {
        /// VIPs there are.
        vips: usize,
        /// The first of them.
        first: String,
    },
}

impl LbApplyError {
    /// Index of the refused command in its batch.
    pub fn index(&self) -> usize {
        match self {
            LbApplyError::Model(e) => e.index,
            LbApplyError::UnknownPort { index, .. }
            | LbApplyError::Alloc { index, .. }
            | LbApplyError::FlowTables { index, .. }
            | LbApplyError::Route { index, .. } => *index,
            LbApplyError::InUse { .. } => 0,
        }
    }

    /// What was wrong, without the "command N:" prefix.
    pub fn reason(&self) -> String {
        match self {
            LbApplyError::Model(e) => e.kind.to_string(),
            LbApplyError::UnknownPort { name, accepted, .. } => {
                format!("no port is named `{name}`; accepted: {accepted}")
            }
            LbApplyError::Alloc { source, .. } => source.to_string(),
            LbApplyError::FlowTables {
                entries, reason, ..
            } => format!(
                "the workers' flow tables ({entries} entries each, lb conf buckets): {reason}"
            ),
            LbApplyError::Route { message, .. } => message.clone(),
            e @ LbApplyError::InUse { .. } => e.to_string(),
        }
    }
}

/// One VIP's counters summed over the workers (since the id was last given to a new VIP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VipTotals {
    /// Packets sent to a server.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Flows created.
    pub new_flows: u64,
    /// Flow-table entries alive (gauge).
    pub live_flows: u64,
    /// Non-SYN packets without a flow entry (ECMP reshuffle or aged-out flows).
    pub nonsyn_misses: u64,
    /// Packets dropped for want of a server with weight > 0.
    pub no_server: u64,
    /// Packets hashed without a flow entry because the flow table was full.
    pub table_full: u64,
    /// Fragments.
    pub fragments: u64,
    /// ICMP errors sent after their flow.
    pub icmp_errors: u64,
    /// Packets answered with "fragmentation needed" / "packet too big".
    pub too_big: u64,
}

impl VipTotals {
    /// The counters' names, in `values` order (JSON keys and metric names).
    pub const NAMES: [&'static str; 10] = [
        "packets",
        "bytes",
        "new_flows",
        "live_flows",
        "nonsyn_misses",
        "no_server",
        "table_full",
        "fragments",
        "icmp_errors",
        "too_big",
    ];

    /// The values, in `NAMES` order.
    pub fn values(&self) -> [u64; 10] {
        [
            self.packets,
            self.bytes,
            self.new_flows,
            self.live_flows,
            self.nonsyn_misses,
            self.no_server,
            self.table_full,
            self.fragments,
            self.icmp_errors,
            self.too_big,
        ]
    }

    fn minus(self, b: &VipTotals) -> VipTotals {
        VipTotals {
            packets: self.packets.wrapping_sub(b.packets),
            bytes: self.bytes.wrapping_sub(b.bytes),
            new_flows: self.new_flows.wrapping_sub(b.new_flows),
            live_flows: self.live_flows,
            nonsyn_misses: self.nonsyn_misses.wrapping_sub(b.nonsyn_misses),
            no_server: self.no_server.wrapping_sub(b.no_server),
            table_full: self.table_full.wrapping_sub(b.table_full),
            fragments: self.fragments.wrapping_sub(b.fragments),
            icmp_errors: self.icmp_errors.wrapping_sub(b.icmp_errors),
            too_big: self.too_big.wrapping_sub(b.too_big),
        }
    }
}

/// One AS slot's counters summed over the workers (since the slot was last given out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsTotals {
    /// Packets sent to the server.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Flows assigned to it.
    pub new_flows: u64,
    /// Flow-table entries alive pointing at it (gauge).
    pub live_flows: u64,
}

impl AsTotals {
    /// The counters' names, in `values` order.
    pub const NAMES: [&'static str; 4] = ["packets", "bytes", "new_flows", "live_flows"];

    /// The values, in `NAMES` order.
    pub fn values(&self) -> [u64; 4] {
        [self.packets, self.bytes, self.new_flows, self.live_flows]
    }

    fn minus(self, b: &AsTotals) -> AsTotals {
        AsTotals {
            packets: self.packets.wrapping_sub(b.packets),
            bytes: self.bytes.wrapping_sub(b.bytes),
            new_flows: self.new_flows.wrapping_sub(b.new_flows),
            live_flows: self.live_flows,
        }
    }
}

/// The LB node's own counters summed over the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeTotals {
    /// Packets to a VIP address on a protocol/port with no VIP.
    pub no_vip_for_port: u64,
    /// Packets too short or malformed to parse.
    pub malformed: u64,
    /// NAT replies rewritten back to the VIP.
    pub nat_replies: u64,
    /// NAT replies without a session.
    pub nat_reply_misses: u64,
    /// Health probes wrapped for their leased server.
    pub probes: u64,
    /// Health probes dropped: their source port was not leased to one of the VIP's servers.
    pub probes_unleased: u64,
    /// Packets too big for their GRE tunnel (IPv4 without DF) cut into inner fragments.
    pub gre_fragmented: u64,
    /// The fragments they were cut into.
    pub gre_fragments: u64,
}

impl NodeTotals {
    /// The counters' names, in `values` order.
    pub const NAMES: [&'static str; 8] = [
        "no_vip_for_port",
        "malformed",
        "nat_replies",
        "nat_reply_misses",
        "probes",
        "probes_unleased",
        "gre_fragmented",
        "gre_fragments",
    ];

    /// The values, in `NAMES` order.
    pub fn values(&self) -> [u64; 8] {
        [
            self.no_vip_for_port,
            self.malformed,
            self.nat_replies,
            self.nat_reply_misses,
            self.probes,
            self.probes_unleased,
            self.gre_fragmented,
            self.gre_fragments,
        ]
    }
}

struct Inner {
    publisher: Publisher<LbTables>,
    state: LbState,
    next_collect: u64,
    /// Per worker: its `lb` node was built with a table slot (`table_slot`), and the slot was
    /// given its flow tables (with the first VIP).
    claimed: Vec<bool>,
    provided: Vec<bool>,
}

/// Counter values at the time an id was freed (its next owner counts from there).
#[derive(Default)]
struct Bases {
    vip: Vec<VipTotals>,
    slot: Vec<AsTotals>,
}

/// The load balancer's control-thread handle (one per data plane).
pub struct LbControl {
    inner: Mutex<Inner>,
    /// Taken after `inner` when both are needed; totals take only this one, so they may be
    /// read inside `with_tables`.
    bases: Mutex<Bases>,
    counters: Vec<Arc<LbWorkerCounters>>,
    /// Each worker's flow tables, left here when the first VIP comes.
    slots: Vec<Arc<TableSlot>>,
    /// The data plane's port names by id ("" for an id no port has); taken after `inner`.
    ports: Mutex<Vec<String>>,
    nat_inside: Arc<NatInside>,
    /// The ports whose replies `ip4-input` / `ip6-input` hand to `lb` (NAT inside ports).
    steer: Arc<PortSteer>,
    /// The routing tables VIP prefixes are routed to `lb` in (None: tests and tools without
    /// a graph reading them).
    routing: Option<Arc<Mutex<crate::routing::Routing>>>,
    /// The config has `[lb]` (a reload adds or removes it).
    configured: AtomicBool,
    started: Instant,
}

impl std::fmt::Debug for LbControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LbControl")
            .field("workers", &self.counters.len())
            .finish()
    }
}

/// The load balancer of `spec` (its `[lb]`, or an empty one without), its tables published in
/// `domain` (one reader and one set of counters per worker of the domain) and its VIP
/// prefixes routed in `routing`. The build calls this once and gives each worker's `lb` node
/// `reader(w)`, `counters(w)`, `table_slot(w)` and `nat_inside()`, and its IP inputs `steer()`.
pub fn lb_control(
    spec: &crate::DataplaneSpec,
    domain: &Domain,
    routing: Option<Arc<Mutex<crate::routing::Routing>>>,
) -> Result<Arc<LbControl>, LbApplyError> {
    let ports: Vec<String> = spec.ports.iter().map(|p| p.name.clone()).collect();
    let state = match &spec.lb {
        Some(lb) => lb.state.clone(),
        None => LbState::new().with_memory_budget(::lb::model::MemoryBudget {
            limit: ::lb::model::DEFAULT_MEMORY_LIMIT,
            workers: domain.workers().clamp(1, u32::MAX as usize) as u32,
        }),
    };
    let c = LbControl::new(state, ports, domain);
    c.configured.store(spec.lb.is_some(), Ordering::Relaxed);
    let c = match routing {
        Some(r) => c.with_routing(r)?,
        None => c,
    };
    Ok(Arc::new(c))
}

impl LbControl {
    /// A control publishing `state`'s tables in `domain`; `ports` are the data plane's port
    /// names in port-id order (for `lb set interface`).
    pub fn new(state: LbState, ports: Vec<String>, domain: &Domain) -> LbControl {
        let workers = domain.workers().max(1);
        // Every id a port may get at run time has its flags.
        let places = ports.len().max(crate::ports_live::MAX_PORTS);
        let nat_inside = Arc::new(NatInside::new(places));
        nat_inside.set_from(&state, &ports);
        let steer = Arc::new(PortSteer::new(places));
        install::set_steer(&steer, &state, &ports);
        LbControl {
            inner: Mutex::new(Inner {
                publisher: Publisher::new(LbTables::build(&state, None), domain),
                state,
                next_collect: 0,
                claimed: vec![false; workers],
                provided: vec![false; workers],
            }),
            bases: Mutex::new(Bases::default()),
            counters: (0..workers)
                .map(|_| Arc::new(LbWorkerCounters::new()))
                .collect(),
            slots: (0..workers).map(|_| Arc::new(TableSlot::new())).collect(),
            ports: Mutex::new(ports),
            nat_inside,
            steer,
            routing: None,
            configured: AtomicBool::new(true),
            started: Instant::now(),
        }
    }

    /// A control whose tables no worker reads (tests, tools), with `counters` sets of worker
    /// counters (at least one).
    pub fn without_workers(state: LbState, ports: Vec<String>, counters: usize) -> LbControl {
        let mut c = LbControl::new(state, ports, &Domain::new(0).0);
        c.counters = (0..counters.max(1))
            .map(|_| Arc::new(LbWorkerCounters::new()))
            .collect();
        c
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bases(&self) -> MutexGuard<'_, Bases> {
        self.bases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Worker `worker`'s reader of the tables (call once per worker).
    pub fn reader(&self, _worker: usize) -> Reader<LbTables> {
        self.lock().publisher.reader()
    }

    /// Worker `worker`'s counters (None beyond the domain's workers).
    pub fn counters(&self, worker: usize) -> Option<Arc<LbWorkerCounters>> {
        self.counters.get(worker).cloned()
    }

    /// Every worker's counters.
    pub fn worker_counters(&self) -> &[Arc<LbWorkerCounters>] {
        &self.counters
    }

    /// The NAT inside-port flags the workers read.
    pub fn nat_inside(&self) -> Arc<NatInside> {
        self.nat_inside.clone()
    }

    /// The ports `ip4-input` / `ip6-input` steer to `lb` (NAT inside ports, while NAT VIPs
    /// of their family exist).
    pub fn steer(&self) -> Arc<PortSteer> {
        self.steer.clone()
    }

    /// Whether the config has `[lb]`.
    pub fn configured(&self) -> bool {
        self.configured.load(Ordering::Relaxed)
    }

    /// Whether there is anything to show: `[lb]` is configured or VIPs exist.
    pub fn in_use(&self) -> bool {
        self.configured() || self.lock().state.vips().next().is_some()
    }

    /// The data plane's port names, in port-id order ("" for an id no port has).
    pub fn ports(&self) -> Vec<String> {
        self.port_names().clone()
    }

    fn port_names(&self) -> MutexGuard<'_, Vec<String>> {
        self.ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Port `id` is now named `name` (added while running), or no port (`None`: removed): the
    /// NAT inside flags and the steering follow, and `lb set interface` takes the name.
    pub fn set_port(&self, id: usize, name: Option<&str>) {
        let g = self.lock();
        let mut ports = self.port_names();
        if ports.len() <= id {
            ports.resize(id + 1, String::new());
        }
        if let Some(slot) = ports.get_mut(id) {
            *slot = name.unwrap_or_default().to_string();
        }
        self.nat_inside.set_from(&g.state, &ports);
        install::set_steer(&self.steer, &g.state, &ports);
    }

    /// A monotonic seconds clock for `tick` (seconds since this control was made).
    pub fn now_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// The configuration as it is now (a copy).
    pub fn state(&self) -> LbState {
        self.lock().state.clone()
    }

    /// Run `f` on the snapshot the workers read now (`f` may read totals, not change the LB).
    pub fn with_tables<R>(&self, f: impl FnOnce(&LbTables) -> R) -> R {
        f(self.lock().publisher.current())
    }

    /// A copy of the current snapshot (Maglev tables are shared, not copied).
    pub fn tables(&self) -> LbTables {
        self.with_tables(LbTables::clone)
    }

    /// The current version (bumped by every change that changed something).
    pub fn version(&self) -> u64 {
        self.lock().state.version()
    }

    /// Apply `cmds` as one change, all or nothing: the new tables are built here (off the data
    /// path) and published; returns the new version (unchanged when nothing changed).
    pub fn apply(&self, cmds: &[LbCommand]) -> Result<u64, LbApplyError> {
        self.check_ports(cmds)?;
        let mut g = self.lock();
        let next = g.state.apply(cmds)?;
        // Built before anything changes: a table the allocator refuses refuses the batch.
        let tables = LbTables::try_build(&next, Some(g.publisher.current())).map_err(|source| {
            LbApplyError::Alloc {
                index: cmds.len().saturating_sub(1),
                source,
            }
        })?;
        self.commit(&mut g, next, tables, cmds)
    }

    /// Make the configuration equal `target` (a reload): the difference as commands, applied
    /// as one change. Servers that go away are removed without flush (their flows finish);
    /// VIPs that go away are deleted. Health marks are runtime state, not configuration: the
    /// servers that stay keep theirs (a down server stays out of the Maglev table with its new
    /// configured weight; nothing is marked down), whatever `target` holds.
    pub fn replace(&self, target: &LbState) -> Result<u64, LbApplyError> {
        let cmds = diff_commands(&self.lock().state, target);
        if cmds.is_empty() {
            return Ok(self.version());
        }
        self.apply(&cmds)
    }

    /// The commands `replace(target)` would apply, checked (nothing applied): for a reload
    /// that must refuse everything when the LB part would be refused.
    pub fn plan_replace(&self, target: &LbState) -> Result<Vec<LbCommand>, LbApplyError> {
        let cmds = diff_commands(&self.lock().state, target);
        self.check_ports(&cmds)?;
        let current = self.state();
        let next = current.apply(&cmds)?;
        self.check_routes(&current, &next, &cmds)?;
        Ok(cmds)
    }

    fn check_ports(&self, cmds: &[LbCommand]) -> Result<(), LbApplyError> {
        for (index, c) in cmds.iter().enumerate() {
            if let LbCommand::NatInterface { ports, .. } = c {
                let names = self.port_names();
                let named: Vec<&str> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| !n.is_empty())
                    .collect();
                if let Some(bad) = ports.iter().find(|p| !named.contains(&p.as_str())) {
                    return Err(LbApplyError::UnknownPort {
                        index,
                        name: bad.clone(),
                        accepted: if named.is_empty() {
                            "(no port)".into()
                        } else {
                            named.join(", ")
                        },
                    });
                }
            }
        }
        Ok(())
    }

    /// Publish `next` (when it differs), keeping baselines of the ids it frees.
    fn install(&self, g: &mut Inner, next: LbState, tables: LbTables) -> u64 {
        if next == g.state {
            return next.version();
        }
        let old = &g.state;
        let mut bases = self.bases();
        for i in 0..old.vip_capacity() {
            let id = VipId(i as u32);
            let Some(was) = old.vip(id) else { continue };
            let same = next.vip(id).is_some_and(|v| v.spec.key == was.spec.key);
            if !same {
                let now = self.sum_vip(id);
                set_base(&mut bases.vip, i, now, MAX_VIPS);
            }
        }
        for i in 0..old.slot_capacity() {
            let s = AsSlot(i as u32);
            let (a, b) = (old.slot(s), next.slot(s));
            if a.state == AsState::Free {
                continue;
            }
            if b.state == AsState::Free || b.vip != a.vip || b.addr != a.addr {
                let now = self.sum_slot(s);
                set_base(&mut bases.slot, i, now, MAX_AS_SLOTS);
            }
        }
        drop(bases);
        g.publisher.publish(tables);
        let ports = self.port_names();
        self.nat_inside.set_from(&next, &ports);
        install::set_steer(&self.steer, &next, &ports);
        drop(ports);
        let version = next.version();
        g.state = next;
        version
    }

    /// Periodic work (call every few tens of milliseconds with `now_secs()`): free retired
    /// snapshots, and once a second free the removed servers whose flows are over
    /// (`LbState::collect`, with live flows from the workers' gauges). Returns the new version
    /// when something was freed.
    pub fn tick(&self, now: u64) -> Option<u64> {
        let mut g = self.lock();
        g.publisher.reclaim();
        if now < g.next_collect {
            return None;
        }
        g.next_collect = now + COLLECT_EVERY_SECS;
        let next = g.state.collect(now, |s| self.live_flows(s))?;
        // Freed slots are out of every Maglev table (reused): a refusal only delays this.
        let tables = LbTables::try_build(&next, Some(g.publisher.current())).ok()?;
        Some(self.install(&mut g, next, tables))
    }

    fn live_flows(&self, s: AsSlot) -> u64 {
        self.counters
            .iter()
            .filter_map(|c| c.slot(s).map(|x| x.live_flows.get()))
            .sum()
    }

    fn sum_vip(&self, id: VipId) -> VipTotals {
        let mut t = VipTotals::default();
        for c in &self.counters {
            let Some(v) = c.vip(id) else { continue };
            t.packets = t.packets.wrapping_add(v.packets.get());
            t.bytes = t.bytes.wrapping_add(v.bytes.get());
            t.new_flows = t.new_flows.wrapping_add(v.new_flows.get());
            t.live_flows = t.live_flows.wrapping_add(v.live_flows.get());
            t.nonsyn_misses = t.nonsyn_misses.wrapping_add(v.nonsyn_misses.get());
            t.no_server = t.no_server.wrapping_add(v.no_server.get());
            t.table_full = t.table_full.wrapping_add(v.table_full.get());
            t.fragments = t.fragments.wrapping_add(v.fragments.get());
            t.icmp_errors = t.icmp_errors.wrapping_add(v.icmp_errors.get());
            t.too_big = t.too_big.wrapping_add(v.too_big.get());
        }
        t
    }

    fn sum_slot(&self, s: AsSlot) -> AsTotals {
        let mut t = AsTotals::default();
        for c in &self.counters {
            let Some(v) = c.slot(s) else { continue };
            t.packets = t.packets.wrapping_add(v.packets.get());
            t.bytes = t.bytes.wrapping_add(v.bytes.get());
            t.new_flows = t.new_flows.wrapping_add(v.new_flows.get());
            t.live_flows = t.live_flows.wrapping_add(v.live_flows.get());
        }
        t
    }

    /// VIP `id`'s counters summed over the workers, since the id was given to this VIP.
    pub fn vip_totals(&self, id: VipId) -> VipTotals {
        let base = self
            .bases()
            .vip
            .get(id.0 as usize)
            .copied()
            .unwrap_or_default();
        self.sum_vip(id).minus(&base)
    }

    /// AS slot `s`'s counters summed over the workers, since the slot was given to its server.
    pub fn slot_totals(&self, s: AsSlot) -> AsTotals {
        let base = self
            .bases()
            .slot
            .get(s.0 as usize)
            .copied()
            .unwrap_or_default();
        self.sum_slot(s).minus(&base)
    }

    /// Entries of the workers' flow tables (each worker has one of this size; 0 before the
    /// data plane is built). `lb conf buckets` changes it only when vecplane starts.
    pub fn flow_table_entries(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.flow_table_entries.get())
            .max()
            .unwrap_or(0)
    }

    /// The LB node's own counters summed over the workers.
    pub fn node_totals(&self) -> NodeTotals {
        let mut t = NodeTotals::default();
        for c in &self.counters {
            t.no_vip_for_port += c.no_vip_for_port.get();
            t.malformed += c.malformed.get();
            t.nat_replies += c.nat_replies.get();
            t.nat_reply_misses += c.nat_reply_misses.get();
            t.probes += c.probes.get();
            t.probes_unleased += c.probes_unleased.get();
            t.gre_fragmented += c.gre_fragmented.get();
            t.gre_fragments += c.gre_fragments.get();
        }
        t
    }
}

fn set_base<T: Default + Copy>(v: &mut Vec<T>, i: usize, value: T, max: usize) {
    if i >= max {
        return;
    }
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    v[i] = value;
}

/// The commands that turn `current`'s configuration into `target`'s (empty when they are
/// equal): `lb conf` with every value of `target` (a source `target` does not set is left as
/// it is: the language has no way to unset one), servers that go away removed without flush,
/// VIPs that go away deleted, VIPs added or changed, servers added or re-weighted (configured
/// weights are compared), NAT inside ports set. Health marks (`SetHealth`) are never part of
/// it: they are runtime state, and applying these commands keeps `current`'s marks.
pub fn diff_commands(current: &LbState, target: &LbState) -> Vec<LbCommand> {
    let mut out = Vec::new();
    // The memory cap first, so that a raised cap admits the rest of the change.
    if current.memory_budget() != target.memory_budget() {
        out.push(LbCommand::SetMemoryBudget(target.memory_budget()));
    }
    let (c, t) = (current.conf(), target.conf());
    if c != t {
        out.push(LbCommand::Conf(ConfChange {
            ip4_src: t.ip4_src,
            ip6_src: t.ip6_src,
            buckets: Some(t.buckets),
            tcp_timeout: Some(t.timeouts.tcp),
            udp_timeout: Some(t.timeouts.udp),
            other_timeout: Some(t.timeouts.other),
        }));
    }
    // Configured weights of the servers that are not removed (health marks left aside).
    let live = |s: &LbState, v: &::lb::model::Vip| -> BTreeMap<IpAddr, u32> {
        v.servers
            .iter()
            .filter(|(_, slot)| s.slot(**slot).state != AsState::Removed)
            .map(|(a, slot)| (*a, s.slot(*slot).weight))
            .collect()
    };
    let mut adds = Vec::new();
    for v in current.vips() {
        let key = v.spec.key;
        let want = target.vip_by_key(&key).map(|tv| live(target, tv));
        let Some(want) = want else {
            out.push(LbCommand::DelVip(key));
            continue;
        };
        let gone: Vec<IpAddr> = live(current, v)
            .keys()
            .filter(|a| !want.contains_key(a))
            .copied()
            .collect();
        if !gone.is_empty() {
            out.push(LbCommand::DelAs {
                vip: key,
                servers: gone,
                flush: false,
            });
        }
    }
    for tv in target.vips() {
        let key = tv.spec.key;
        let have = current.vip_by_key(&key);
        if have.map(|v| v.spec) != Some(tv.spec) {
            out.push(LbCommand::AddVip(tv.spec));
        }
        let have = have.map(|v| live(current, v)).unwrap_or_default();
        let servers: Vec<AsSpec> = live(target, tv)
            .into_iter()
            .filter(|(a, w)| have.get(a) != Some(w))
            .map(|(addr, w)| AsSpec {
                addr,
                weight: Some(w),
            })
            .collect();
        if !servers.is_empty() {
            adds.push(LbCommand::AddAs {
                vip: key,
                servers,
                flush: false,
            });
        }
    }
    out.extend(adds);
    for nat6 in [false, true] {
        let (have, want) = (current.nat_inside(nat6), target.nat_inside(nat6));
        let del: Vec<String> = have.difference(want).cloned().collect();
        let add: Vec<String> = want.difference(have).cloned().collect();
        if !del.is_empty() {
            out.push(LbCommand::NatInterface {
                nat6,
                ports: del,
                del: true,
            });
        }
        if !add.is_empty() {
            out.push(LbCommand::NatInterface {
                nat6,
                ports: add,
                del: false,
            });
        }
    }
    out
}

#[cfg(test)]
#[path = "lb_tests.rs"]
mod tests;

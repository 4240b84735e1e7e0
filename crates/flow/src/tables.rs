//! The flow tables of one switch as an immutable snapshot: tables 0..=254 of rules, the groups
//! and the switch's ports. Owns rule ids, the all-or-nothing application of `FlowMod`s and the
//! per-rule counters; a snapshot never changes after it is built (workers read it without a lock)
//! and this module never runs on the fast path except `RuleCounters::add`.
//!
//! A change (`apply`) builds a new snapshot sharing every untouched table with the old one, with
//! a version one higher. Rule ids are stable across snapshots (a rule replaced by an identical
//! add or changed by a modify keeps its id and counters). Counters live beside the rules, shared
//! by every snapshot, as atomics: a worker credits megaflow statistics to the rules that made the
//! megaflow (`Translation::rules`) without any lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::classifier::{Classifier, PrefixTracking};
use crate::key::{Field, FlowKey};
use crate::rule::{Action, FlowMod, Group, GroupKind, Match, PortRef, Rule, RuleFilter, RuleId};

/// OpenFlow's `LOCAL` port (the bridge's own).
const PORT_LOCAL: u16 = 0xfffe;

/// Number of OpenFlow tables (0..=254).
pub const N_TABLES: usize = 255;

/// How a switch port sends packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchPort {
    /// The vecplane port id.
    pub port: u16,
    /// A VXLAN tunnel port: output becomes `DpAction::TunnelOutput` with the key's `tun_id`.
    pub tunnel: bool,
}

/// The ports of a switch: OpenFlow port number <-> vecplane port id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPorts {
    by_ofport: BTreeMap<u16, SwitchPort>,
    /// Ports whose link is down: a fast failover bucket watching one is not live.
    down: std::collections::BTreeSet<u16>,
}

/// A port that cannot be added to a switch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwitchPortsError {
    /// OpenFlow port numbers 0 and 0xff00.. are reserved.
    #[error("OpenFlow port number {0} is reserved: use 1..=65279")]
    Reserved(u16),
    /// The number is taken.
    #[error("OpenFlow port number {0} is already used by vecplane port {1}")]
    Taken(u16, u16),
}

impl SwitchPorts {
    /// No port.
    pub fn new() -> Self {
        SwitchPorts::default()
    }

    /// Add OpenFlow port `ofport` for vecplane port `port` (a VXLAN tunnel port when `tunnel`).
    pub fn add(&mut self, ofport: u16, port: u16, tunnel: bool) -> Result<(), SwitchPortsError> {
        if ofport == 0 || ofport >= 0xff00 {
            return Err(SwitchPortsError::Reserved(ofport));
        }
        if let Some(p) = self.by_ofport.get(&ofport) {
            return Err(SwitchPortsError::Taken(ofport, p.port));
        }
        self.by_ofport.insert(ofport, SwitchPort { port, tunnel });
        Ok(())
    }

    /// The port with OpenFlow number `ofport`.
    #[inline]
    pub fn get(&self, ofport: u16) -> Option<SwitchPort> {
        self.by_ofport.get(&ofport).copied()
    }

    /// Mark port `ofport` as up (`live`) or down, for fast failover groups (every port is up
    /// until marked down).
    pub fn set_live(&mut self, ofport: u16, live: bool) {
        if live {
            self.down.remove(&ofport);
        } else {
            self.down.insert(ofport);
        }
    }

    /// True when `ofport` is a port of the switch and up (a fast failover bucket watching it is
    /// live).
    #[inline]
    pub fn is_live(&self, ofport: u16) -> bool {
        self.by_ofport.contains_key(&ofport) && !self.down.contains(&ofport)
    }

    /// The OpenFlow number of vecplane port `port`.
    pub fn ofport_of(&self, port: u16) -> Option<u16> {
        self.by_ofport
            .iter()
            .find(|(_, p)| p.port == port)
            .map(|(n, _)| *n)
    }

    /// Every port, by OpenFlow number.
    pub fn iter(&self) -> impl Iterator<Item = (u16, SwitchPort)> + '_ {
        self.by_ofport.iter().map(|(n, p)| (*n, *p))
    }

    fn list(&self) -> String {
        let v: Vec<String> = self.by_ofport.keys().map(|n| n.to_string()).collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

/// The counters of one rule (shared by every snapshot holding the rule).
#[derive(Debug, Default)]
pub struct RuleCounter {
    packets: AtomicU64,
    bytes: AtomicU64,
    /// Caller's clock (ms) of the last hit; 0: none yet.
    last_hit_ms: AtomicU64,
    /// Caller's clock (ms) when the rule was added; 0: not known yet (stamped by `expire`).
    added_ms: AtomicU64,
}

/// A copy of a rule's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleStats {
    /// Packets that hit the rule.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// When it was added (caller's clock, ms; 0: not known).
    pub added_ms: u64,
    /// When it was last hit (caller's clock, ms; 0: never or not known).
    pub last_hit_ms: u64,
}

impl RuleCounter {
    fn new(now_ms: u64) -> Self {
        RuleCounter {
            added_ms: AtomicU64::new(now_ms),
            ..Default::default()
        }
    }

    /// Credit `packets` and `bytes` hit at `now_ms`.
    #[inline]
    pub fn add(&self, packets: u64, bytes: u64, now_ms: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_hit_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// A copy.
    pub fn stats(&self) -> RuleStats {
        RuleStats {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            added_ms: self.added_ms.load(Ordering::Relaxed),
            last_hit_ms: self.last_hit_ms.load(Ordering::Relaxed),
        }
    }
}

/// Hashing for rule ids: they are small integers the tables hand out (nothing a packet
/// chooses), so one multiply spreads them; SipHash would cost the workers more per credit.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// The hasher of `IdHash`.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Every rule's counters by `RuleId`, for workers crediting megaflow statistics.
#[derive(Debug, Default)]
pub struct RuleCounters {
    by_id: HashMap<RuleId, Arc<RuleCounter>, IdHash>,
}

impl RuleCounters {
    /// The counters of rule `id` (None: no such rule in this snapshot).
    #[inline]
    pub fn get(&self, id: RuleId) -> Option<&RuleCounter> {
        self.by_id.get(&id).map(|c| &**c)
    }

    /// Credit rule `id` (ignored when the rule is gone). No allocation, no lock.
    #[inline]
    pub fn add(&self, id: RuleId, packets: u64, bytes: u64, now_ms: u64) {
        if let Some(c) = self.by_id.get(&id) {
            c.add(packets, bytes, now_ms);
        }
    }
}

/// A rule in a table, with its id and counters.
#[derive(Debug)]
pub struct RuleEntry {
    /// Its id.
    pub id: RuleId,
    /// The rule.
    pub rule: Rule,
    counter: Arc<RuleCounter>,
}

/// One table: its rules and the classifier over them (rule positions are indices in `rules`).
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub rules: Vec<Arc<RuleEntry>>,
    pub cls: Classifier,
}

impl Table {
    fn build(rules: Vec<Arc<RuleEntry>>, prefixes: PrefixTracking) -> Table {
        let v: Vec<(u16, Match)> = rules.iter().map(|e| (e.rule.priority, e.rule.m)).collect();
        Table {
            cls: Classifier::new(&v, prefixes),
            rules,
        }
    }

    /// The best rule for `key`, adding consulted bits to `wc`.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<&RuleEntry> {
        if self.rules.is_empty() {
            return None;
        }
        self.cls
            .lookup(key, wc)
            .and_then(|i| self.rules.get(i as usize))
            .map(|e| &**e)
    }
}

/// Why a change was refused (nothing of its batch was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("change {index} ({what}): {reason}")]
pub struct FlowModError {
    /// Position of the refused change in the batch (0-based).
    pub index: usize,
    /// Which kind of change (`add-flow`, `mod-flows`, `del-flows`, `add-group`, ...).
    pub what: &'static str,
    /// What was wrong and what is accepted.
    pub reason: FlowModProblem,
}

/// What was wrong with a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowModProblem {
    /// Table 255 is not a table.
    #[error("table {0} does not exist: tables are 0..=254")]
    NoSuchTable(u8),
    /// `goto_table` backwards, to itself or to 255.
    #[error(
        "goto_table:{to} in table {from}: goto_table must go to a later table, {from}+1..=254"
    )]
    GotoBackward {
        /// Table of the rule.
        from: u8,
        /// Target.
        to: u8,
    },
    /// `goto_table` somewhere else than last.
    #[error("goto_table:{0} must be the last action")]
    GotoNotLast(u8),
    /// `goto_table` in a group bucket.
    #[error("goto_table:{0} is not allowed in a group bucket (use resubmit)")]
    GotoInBucket(u8),
    /// Output to a port number the switch does not have.
    #[error("output:{port}: the switch has no OpenFlow port {port}; known ports: {known}, or in_port, flood, all, normal")]
    UnknownPort {
        /// The port.
        port: u16,
        /// The switch's port numbers.
        known: String,
    },
    /// `group:N` of a group that does not exist.
    #[error("group:{0}: no such group (add it first with add-group)")]
    NoSuchGroup(u32),
    /// `add-group` of an id that exists.
    #[error("group {0} already exists (use mod-group to change it)")]
    GroupExists(u32),
    /// A group that refers to itself.
    #[error("group {0}: a bucket may not refer to its own group")]
    GroupLoop(u32),
    /// A group with no bucket where one is needed.
    #[error("group {0}: an indirect group needs exactly one bucket, it has {1}")]
    IndirectBuckets(u32, usize),
    /// `set_field` of a field that is not writable.
    #[error("set_field: {0} cannot be set; writable: packet header fields (dl_src, dl_dst, vlan, nw_src, nw_dst, ipv6_src, ipv6_dst, ip_dscp, nw_ecn, nw_ttl, ipv6_label, arp_sha, arp_tha, tp_src, tp_dst, arp_op), in_port, tun_id, tun_src, tun_dst, metadata, reg0..reg7")]
    NotWritable(&'static str),
    /// `push_vlan` with a TPID that is not a VLAN TPID.
    #[error("push_vlan:{0:#06x}: the ethertype must be 0x8100 or 0x88a8")]
    BadTpid(u16),
}

/// Fields `set_field` may write.
/// `NwProto` is writable as an ARP packet's opcode (`set_field:2->arp_op`; translation
/// leaves an IP packet's protocol alone).
fn writable(f: Field) -> bool {
    !matches!(f, Field::EthType | Field::NwFrag | Field::TcpFlags)
}

/// An immutable snapshot of a switch's flow tables, groups and ports.
#[derive(Clone, Debug)]
pub struct FlowTables {
    version: u64,
    pub(crate) ports: Arc<SwitchPorts>,
    pub(crate) tables: Vec<Arc<Table>>,
    pub(crate) groups: Arc<BTreeMap<u32, Group>>,
    counters: Arc<RuleCounters>,
    next_id: Arc<AtomicU32>,
    prefixes: PrefixTracking,
    pub(crate) frag: FragHandling,
}

/// How a switch treats IP fragments (Open vSwitch's `ovs-ofctl set-frags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FragHandling {
    /// Fragments go through the tables as other packets, with their transport ports (ICMP
    /// type and code) read as 0, also a first fragment's; a port an action sets is still
    /// written to a first fragment (Open vSwitch's default, checked against 3.1).
    #[default]
    Normal,
    /// Every fragment is dropped.
    Drop,
    /// A first fragment's transport fields are matched as they are; `ip_frag` tells
    /// fragments apart.
    NxMatch,
}

impl FragHandling {
    /// Open vSwitch's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            FragHandling::Normal => "normal",
            FragHandling::Drop => "drop",
            FragHandling::NxMatch => "nx-match",
        }
    }

    /// The mode called `name` (`normal`, `drop`, `nx-match`).
    pub fn from_name(name: &str) -> Option<FragHandling> {
        [
            FragHandling::Normal,
            FragHandling::Drop,
            FragHandling::NxMatch,
        ]
        .into_iter()
        .find(|f| f.name() == name)
    }
}

impl FlowTables {
    /// Empty tables (every packet dropped) for a switch with `ports`; version 0.
    pub fn new(ports: SwitchPorts) -> FlowTables {
        let empty = Arc::new(Table::default());
        FlowTables {
            version: 0,
            ports: Arc::new(ports),
            tables: vec![empty; N_TABLES],
            groups: Arc::new(BTreeMap::new()),
            counters: Arc::new(RuleCounters::default()),
            next_id: Arc::new(AtomicU32::new(1)),
            prefixes: PrefixTracking::default(),
            frag: FragHandling::Normal,
        }
    }

    /// The same rules with fragments handled as `frag` says.
    pub fn with_frag_handling(&self, frag: FragHandling) -> FlowTables {
        let mut t = self.clone();
        t.frag = frag;
        t.version += 1;
        t
    }

    /// How fragments are handled.
    pub fn frag_handling(&self) -> FragHandling {
        self.frag
    }

    /// The version: 0 for new tables, one more with every `apply` or `with_ports`.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The switch's ports.
    pub fn ports(&self) -> &SwitchPorts {
        &self.ports
    }

    /// The same rules with other ports (outputs to a port that is gone do nothing).
    pub fn with_ports(&self, ports: SwitchPorts) -> FlowTables {
        let mut t = self.clone();
        t.ports = Arc::new(ports);
        t.version += 1;
        t
    }

    /// The same rules with prefix tracking on `prefixes` (every table re-indexed; use
    /// `PrefixTracking::IPV4` for Open vSwitch's default megaflows).
    pub fn with_prefix_tracking(&self, prefixes: PrefixTracking) -> FlowTables {
        let mut t = self.clone();
        t.prefixes = prefixes;
        for table in &mut t.tables {
            if !table.rules.is_empty() {
                *table = Arc::new(Table::build(table.rules.clone(), prefixes));
            }
        }
        t.version += 1;
        t
    }

    /// Which fields have prefix tracking.
    pub fn prefix_tracking(&self) -> PrefixTracking {
        self.prefixes
    }

    /// Every rule with its id: by table, then priority high to low, then id.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, &Rule)> + '_ {
        self.tables.iter().flat_map(|t| {
            let mut v: Vec<&RuleEntry> = t.rules.iter().map(|e| &**e).collect();
            v.sort_by(|a, b| b.rule.priority.cmp(&a.rule.priority).then(a.id.cmp(&b.id)));
            v.into_iter().map(|e| (e.id, &e.rule))
        })
    }

    /// Number of rules in all tables.
    pub fn len(&self) -> usize {
        self.tables.iter().map(|t| t.rules.len()).sum()
    }

    /// True when no table has a rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rule with id `id`.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        self.tables
            .iter()
            .flat_map(|t| t.rules.iter())
            .find(|e| e.id == id)
            .map(|e| &e.rule)
    }

    /// Counters of rule `id`.
    pub fn stats(&self, id: RuleId) -> Option<RuleStats> {
        self.counters.get(id).map(|c| c.stats())
    }

    /// The counters of every rule, by id (share the `Arc` with workers).
    pub fn counters(&self) -> &Arc<RuleCounters> {
        &self.counters
    }

    /// Every group, by id.
    pub fn groups(&self) -> impl Iterator<Item = &Group> + '_ {
        self.groups.values()
    }

    /// Number of subtables (distinct masks) of table `table`.
    pub fn subtables(&self, table: u8) -> usize {
        self.tables
            .get(table as usize)
            .map_or(0, |t| t.cls.subtables())
    }

    /// Apply `mods` in order, all or nothing: the new snapshot, or the first refused change.
    /// Rules added get their added time stamped by the first `expire` call.
    pub fn apply(&self, mods: &[FlowMod]) -> Result<FlowTables, FlowModError> {
        self.apply_at(mods, 0)
    }

    /// `apply`, stamping added rules with the caller's clock `now_ms` (for hard timeouts).
    pub fn apply_at(&self, mods: &[FlowMod], now_ms: u64) -> Result<FlowTables, FlowModError> {
        let mut b = Batch {
            base: self,
            touched: vec![None; N_TABLES],
            groups: None,
            restamp: Vec::new(),
            now_ms,
        };
        for (index, m) in mods.iter().enumerate() {
            b.apply(m).map_err(|reason| FlowModError {
                index,
                what: kind_name(m),
                reason,
            })?;
        }
        Ok(b.finish())
    }

    /// The deletions that idle and hard timeouts imply at `now_ms` (caller's clock, the one
    /// given to `RuleCounters::add` and `apply_at`). Rules whose added time is not known yet
    /// are stamped now.
    pub fn expire(&self, now_ms: u64) -> Vec<FlowMod> {
        let mut out = Vec::new();
        for t in &self.tables {
            for e in &t.rules {
                let r = &e.rule;
                if r.idle_timeout == 0 && r.hard_timeout == 0 {
                    continue;
                }
                let c = &e.counter;
                let _ =
                    c.added_ms
                        .compare_exchange(0, now_ms, Ordering::Relaxed, Ordering::Relaxed);
                let s = c.stats();
                let hard = r.hard_timeout != 0
                    && now_ms.saturating_sub(s.added_ms) >= r.hard_timeout as u64 * 1000;
                let idle = r.idle_timeout != 0
                    && now_ms.saturating_sub(s.last_hit_ms.max(s.added_ms))
                        >= r.idle_timeout as u64 * 1000;
                if hard || idle {
                    out.push(FlowMod::Delete(RuleFilter {
                        table: Some(r.table),
                        m: r.m,
                        strict: Some(r.priority),
                        cookie: None,
                        out_port: None,
                    }));
                }
            }
        }
        out
    }
}

fn kind_name(m: &FlowMod) -> &'static str {
    match m {
        FlowMod::Add(_) => "add-flow",
        FlowMod::Modify { filter, .. } if filter.strict.is_some() => "mod-flows --strict",
        FlowMod::Modify { .. } => "mod-flows",
        FlowMod::Delete(f) if f.strict.is_some() => "del-flows --strict",
        FlowMod::Delete(_) => "del-flows",
        FlowMod::AddGroup(_) => "add-group",
        FlowMod::ModGroup(_) => "mod-group",
        FlowMod::DelGroup(_) => "del-groups",
    }
}

/// A match with no value bit outside its mask.
fn normalized(m: &Match) -> Match {
    Match {
        key: m.key.masked(&m.mask),
        mask: m.mask,
    }
}

/// True when `filter` selects rule `r`.
fn selects(f: &RuleFilter, r: &Rule) -> bool {
    if f.table.is_some_and(|t| t != r.table) {
        return false;
    }
    if let Some((v, m)) = f.cookie {
        if (r.cookie ^ v) & m != 0 {
            return false;
        }
    }
    if let Some(p) = f.out_port {
        if !r.actions.contains(&Action::Output(PortRef::Number(p))) {
            return false;
        }
    }
    let fm = normalized(&f.m);
    match f.strict {
        Some(prio) => prio == r.priority && fm == r.m,
        None => fm.mask.is_subset_of(&r.m.mask) && r.m.key.matches(&fm.key, &fm.mask),
    }
}

/// A batch of changes being applied to a copy of the touched tables.
struct Batch<'a> {
    base: &'a FlowTables,
    touched: Vec<Option<Vec<Arc<RuleEntry>>>>,
    groups: Option<BTreeMap<u32, Group>>,
    /// Counters whose added time restarts when the batch succeeds (replaced rules).
    restamp: Vec<Arc<RuleCounter>>,
    now_ms: u64,
}

impl Batch<'_> {
    fn groups(&self) -> &BTreeMap<u32, Group> {
        self.groups.as_ref().unwrap_or(&self.base.groups)
    }

    fn table(&mut self, t: usize) -> &mut Vec<Arc<RuleEntry>> {
        let base = &self.base.tables[t];
        self.touched[t].get_or_insert_with(|| base.rules.clone())
    }

    fn check_actions(
        &self,
        actions: &[Action],
        table: Option<u8>,
        group: Option<u32>,
    ) -> Result<(), FlowModProblem> {
        for (i, a) in actions.iter().enumerate() {
            match a {
                // `LOCAL` is the bridge's own port: vecplane's flow bridge has no host-side
                // port, so an output there sends nothing (as to a port with nothing attached).
                Action::Output(PortRef::Number(PORT_LOCAL))
                | Action::OutputTrunc {
                    port: PortRef::Number(PORT_LOCAL),
                    ..
                } => {}
                Action::Output(PortRef::Number(p))
                | Action::OutputTrunc {
                    port: PortRef::Number(p),
                    ..
                } => {
                    if self.base.ports.get(*p).is_none() {
                        return Err(FlowModProblem::UnknownPort {
                            port: *p,
                            known: self.base.ports.list(),
                        });
                    }
                }
                Action::Output(_)
                | Action::OutputTrunc { .. }
                | Action::DecTtl
                | Action::DecTtlIds(_)
                | Action::PopVlan
                | Action::Note(_)
                | Action::SetQueue(_)
                | Action::Exit
                | Action::Controller(_)
                | Action::ClearActions => {}
                Action::Clone(inner) | Action::WriteActions(inner) => {
                    if let Some(g) = inner.iter().find_map(|a| match a {
                        Action::GotoTable(t) => Some(*t),
                        _ => None,
                    }) {
                        return Err(FlowModProblem::GotoInBucket(g));
                    }
                    self.check_actions(inner, None, group)?;
                }
                Action::Move { dst, .. } => {
                    if !writable(*dst) {
                        return Err(FlowModProblem::NotWritable(dst.name()));
                    }
                }
                Action::SetField { field, .. } => {
                    if !writable(*field) {
                        return Err(FlowModProblem::NotWritable(field.name()));
                    }
                }
                Action::PushVlan(tpid) => {
                    if *tpid != 0x8100 && *tpid != 0x88a8 {
                        return Err(FlowModProblem::BadTpid(*tpid));
                    }
                }
                Action::Resubmit { table: t, .. } => {
                    if let Some(t) = t {
                        if *t as usize >= N_TABLES {
                            return Err(FlowModProblem::NoSuchTable(*t));
                        }
                    }
                }
                Action::GotoTable(to) => {
                    let Some(from) = table else {
                        return Err(FlowModProblem::GotoInBucket(*to));
                    };
                    if *to <= from || *to as usize >= N_TABLES {
                        return Err(FlowModProblem::GotoBackward { from, to: *to });
                    }
                    if i + 1 != actions.len() {
                        return Err(FlowModProblem::GotoNotLast(*to));
                    }
                }
                Action::Group(g) => {
                    if group == Some(*g) {
                        return Err(FlowModProblem::GroupLoop(*g));
                    }
                    if !self.groups().contains_key(g) {
                        return Err(FlowModProblem::NoSuchGroup(*g));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_group(&self, g: &Group) -> Result<(), FlowModProblem> {
        if g.kind == GroupKind::Indirect && g.buckets.len() != 1 {
            return Err(FlowModProblem::IndirectBuckets(g.id, g.buckets.len()));
        }
        for b in &g.buckets {
            self.check_actions(&b.actions, None, Some(g.id))?;
        }
        Ok(())
    }

    fn apply(&mut self, m: &FlowMod) -> Result<(), FlowModProblem> {
        match m {
            FlowMod::Add(rule) => {
                if rule.table as usize >= N_TABLES {
                    return Err(FlowModProblem::NoSuchTable(rule.table));
                }
                self.check_actions(&rule.actions, Some(rule.table), None)?;
                let mut rule = rule.clone();
                rule.m = normalized(&rule.m);
                let now = self.now_ms;
                let next_id = self.base.next_id.clone();
                let rules = self.table(rule.table as usize);
                match rules
                    .iter()
                    .position(|e| e.rule.priority == rule.priority && e.rule.m == rule.m)
                {
                    Some(i) => {
                        // As Open vSwitch: the identical rule is replaced, its counters kept,
                        // its duration restarted.
                        let old = &rules[i];
                        let counter = old.counter.clone();
                        rules[i] = Arc::new(RuleEntry {
                            id: old.id,
                            rule,
                            counter: counter.clone(),
                        });
                        self.restamp.push(counter);
                    }
                    None => {
                        let id = next_id.fetch_add(1, Ordering::Relaxed);
                        rules.push(Arc::new(RuleEntry {
                            id,
                            rule,
                            counter: Arc::new(RuleCounter::new(now)),
                        }));
                    }
                }
            }
            FlowMod::Modify {
                filter,
                actions,
                cookie,
            } => {
                let tables = self.filter_tables(filter)?;
                let mut any = false;
                for t in tables {
                    let hits: Vec<usize> = self
                        .current(t)
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| selects(filter, &e.rule))
                        .map(|(i, _)| i)
                        .collect();
                    if hits.is_empty() {
                        continue;
                    }
                    any = true;
                    self.check_actions(actions, Some(t as u8), None)?;
                    let rules = self.table(t);
                    for i in hits {
                        let old = &rules[i];
                        let mut rule = old.rule.clone();
                        rule.actions = actions.clone();
                        if let Some(c) = cookie {
                            rule.cookie = *c;
                        }
                        rules[i] = Arc::new(RuleEntry {
                            id: old.id,
                            rule,
                            counter: old.counter.clone(),
                        });
                    }
                }
                if !any && filter.cookie.is_none() {
                    // As ovs-ofctl's default protocol (OpenFlow 1.0): a modify that selects
                    // nothing adds the rule.
                    return self.apply(&FlowMod::Add(Rule {
                        table: filter.table.unwrap_or(0),
                        priority: filter.strict.unwrap_or(crate::rule::DEFAULT_PRIORITY),
                        cookie: cookie.unwrap_or(0),
                        m: filter.m,
                        actions: actions.clone(),
                        idle_timeout: 0,
                        hard_timeout: 0,
                    }));
                }
            }
            FlowMod::Delete(filter) => {
                for t in self.filter_tables(filter)? {
                    if self.current(t).iter().any(|e| selects(filter, &e.rule)) {
                        self.table(t).retain(|e| !selects(filter, &e.rule));
                    }
                }
            }
            FlowMod::AddGroup(g) => {
                if self.groups().contains_key(&g.id) {
                    return Err(FlowModProblem::GroupExists(g.id));
                }
                self.check_group(g)?;
                self.groups_mut().insert(g.id, g.clone());
            }
            FlowMod::ModGroup(g) => {
                if !self.groups().contains_key(&g.id) {
                    return Err(FlowModProblem::NoSuchGroup(g.id));
                }
                self.check_group(g)?;
                self.groups_mut().insert(g.id, g.clone());
            }
            FlowMod::DelGroup(which) => {
                let gone: Vec<u32> = match which {
                    Some(id) => self.groups().get(id).map(|g| g.id).into_iter().collect(),
                    None => self.groups().keys().copied().collect(),
                };
                if gone.is_empty() {
                    return Ok(());
                }
                let uses = |r: &Rule| {
                    r.actions
                        .iter()
                        .any(|a| matches!(a, Action::Group(g) if gone.contains(g)))
                };
                for t in 0..N_TABLES {
                    if self.current(t).iter().any(|e| uses(&e.rule)) {
                        self.table(t).retain(|e| !uses(&e.rule));
                    }
                }
                let groups = self.groups_mut();
                for id in &gone {
                    groups.remove(id);
                }
            }
        }
        Ok(())
    }

    fn current(&self, t: usize) -> &[Arc<RuleEntry>] {
        match &self.touched[t] {
            Some(v) => v,
            None => &self.base.tables[t].rules,
        }
    }

    fn groups_mut(&mut self) -> &mut BTreeMap<u32, Group> {
        let base = &self.base.groups;
        self.groups.get_or_insert_with(|| (**base).clone())
    }

    fn filter_tables(&self, f: &RuleFilter) -> Result<std::ops::Range<usize>, FlowModProblem> {
        match f.table {
            Some(t) if t as usize >= N_TABLES => Err(FlowModProblem::NoSuchTable(t)),
            Some(t) => Ok(t as usize..t as usize + 1),
            None => Ok(0..N_TABLES),
        }
    }

    fn finish(self) -> FlowTables {
        let base = self.base;
        let mut tables = base.tables.clone();
        let mut changed = false;
        for (t, rules) in self.touched.into_iter().enumerate() {
            if let Some(rules) = rules {
                tables[t] = Arc::new(Table::build(rules, base.prefixes));
                changed = true;
            }
        }
        for c in &self.restamp {
            c.added_ms.store(self.now_ms, Ordering::Relaxed);
        }
        let counters = if changed {
            let mut by_id = HashMap::with_hasher(IdHash);
            for t in &tables {
                for e in &t.rules {
                    by_id.insert(e.id, e.counter.clone());
                }
            }
            Arc::new(RuleCounters { by_id })
        } else {
            base.counters.clone()
        };
        FlowTables {
            version: base.version + 1,
            ports: base.ports.clone(),
            tables,
            groups: match self.groups {
                Some(g) => Arc::new(g),
                None => base.groups.clone(),
            },
            counters,
            next_id: base.next_id.clone(),
            prefixes: base.prefixes,
            frag: base.frag,
        }
    }
}

#[cfg(test)]
#[path = "tables_tests.rs"]
mod tests;

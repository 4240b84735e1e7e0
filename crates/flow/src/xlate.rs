//! Translation of a flow key through the rule tables and groups into datapath actions and a
//! megaflow mask, as Open vSwitch's `ofproto-dpif-xlate` does. Owns the action semantics; it
//! never changes a table and never allocates (fixed-size results, recursion bounded by depth).
//!
//! The walk starts in table 0 with a working copy of the key. `set_field`, `dec_ttl` and VLAN
//! actions change the copy (later lookups see the changes, as OpenFlow says); before every
//! output the differences between the copy and what the datapath actions already did are
//! committed as `Set`/`PushVlan`/`PopVlan` actions. The megaflow mask is every key bit that a
//! lookup or an action consulted, with Open vSwitch's conventions: `in_port` and `dl_type` always,
//! `nw_frag` for IP packets, the tunnel fields for tunnelled packets; never metadata or registers
//! (every packet starts with them zero); ICMP type/code only their 8 bits; the CFI bit whenever
//! any VLAN bit; no port bits for later fragments.

use crate::dpaction::{DpAction, DpActions, TPID_AS_RECEIVED};
use crate::key::{Field, FlowKey, FRAG_ANY, FRAG_LATER, VLAN_CFI};
use crate::rule::{Action, Bucket, ControllerAction, GroupKind, PortRef, PuntReason, RuleId};
use crate::tables::{FlowTables, FragHandling, RuleEntry};

/// Deepest nesting of resubmit, goto_table and group (Open vSwitch: 64).
pub const MAX_DEPTH: u32 = 64;
/// Most table lookups in one translation (Open vSwitch: 4,096 resubmits).
pub const MAX_LOOKUPS: u32 = 4096;
/// Rules recorded in `RuleHits`.
pub const MAX_RULE_HITS: usize = 16;

/// Why a translation was cut short; the packet is then dropped (count it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XlateError {
    /// resubmit/goto_table/group nested deeper than `MAX_DEPTH`.
    #[error("resubmit, goto_table and groups nested deeper than {MAX_DEPTH}")]
    TooDeep,
    /// More than `MAX_LOOKUPS` table lookups.
    #[error("more than {MAX_LOOKUPS} table lookups")]
    TooManyLookups,
    /// More datapath actions than a megaflow holds.
    #[error("more than {} datapath actions", crate::dpaction::MAX_DP_ACTIONS)]
    TooManyActions,
    /// More `write_actions` before one action set runs than it holds.
    #[error("more than {MAX_WRITE_ACTIONS} write_actions into one action set")]
    ActionSetFull,
}

/// Most `write_actions` instructions an action set gathers before it runs.
pub const MAX_WRITE_ACTIONS: usize = 32;

/// The OpenFlow action set: the action lists of the `write_actions` run so far, in order (a
/// fixed array of borrowed lists, so that translation never allocates). When it runs, one
/// action of each kind is taken (the last written), in OpenFlow's order; set-field and move
/// actions all run, in the order written (as Open vSwitch's `ofpacts_execute_action_set`).
#[derive(Clone, Copy)]
struct ActionSet<'a> {
    len: usize,
    lists: [&'a [Action]; MAX_WRITE_ACTIONS],
}

impl<'a> ActionSet<'a> {
    const EMPTY: ActionSet<'a> = ActionSet {
        len: 0,
        lists: [&[]; MAX_WRITE_ACTIONS],
    };

    /// The set of one action list (a group bucket).
    fn of(actions: &'a [Action]) -> ActionSet<'a> {
        let mut set = ActionSet::EMPTY;
        set.lists[0] = actions;
        set.len = 1;
        set
    }

    /// Every action written, in order.
    fn actions(&self) -> impl Iterator<Item = &'a Action> + '_ {
        self.lists[..self.len].iter().flat_map(|l| l.iter())
    }

    /// The last action written that `pick` accepts.
    fn last(&self, pick: impl Fn(&Action) -> bool) -> Option<&'a Action> {
        self.actions().filter(|a| pick(a)).last()
    }
}

/// The rules a translation went through, in order (the first `MAX_RULE_HITS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleHits {
    len: u8,
    ids: [RuleId; MAX_RULE_HITS],
    /// More rules were hit than recorded.
    pub truncated: bool,
}

impl RuleHits {
    #[inline]
    fn push(&mut self, id: RuleId) {
        match self.ids.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = id;
                self.len += 1;
            }
            None => self.truncated = true,
        }
    }

    /// The rule ids.
    #[inline]
    pub fn as_slice(&self) -> &[RuleId] {
        &self.ids[..self.len as usize]
    }
}

/// What a key turns into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Datapath actions (empty: drop).
    pub actions: DpActions,
    /// Megaflow mask: the key bits the answer depends on.
    pub mask: FlowKey,
    /// Rules hit (for counters and traces).
    pub rules: RuleHits,
    /// Set when the translation was cut short (actions are then a drop).
    pub error: Option<XlateError>,
}

/// Packet header fields a datapath `Set` may write, in the order they are committed
/// (Ethernet, then — after VLAN — network, then transport, as Open vSwitch commits).
const SET_L2: [Field; 2] = [Field::EthSrc, Field::EthDst];
const SET_L3L4: [Field; 13] = [
    Field::NwSrc,
    Field::NwDst,
    // Read-only for IP; an ARP packet's opcode (`set_field:2->arp_op`).
    Field::NwProto,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::IpDscp,
    Field::NwEcn,
    Field::NwTtl,
    Field::Ipv6Label,
    Field::ArpSha,
    Field::ArpTha,
    Field::TpSrc,
    Field::TpDst,
];

const ETH_IP: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;

#[inline]
fn is_ip(k: &FlowKey) -> bool {
    let t = k.get(Field::EthType) as u16;
    t == ETH_IP || t == ETH_IPV6
}

/// Rule lookup used by a translation (the classifier, or the linear reference).
pub(crate) trait Lookup {
    fn lookup<'t>(
        &self,
        tables: &'t FlowTables,
        table: u8,
        key: &FlowKey,
        wc: &mut FlowKey,
    ) -> Option<&'t RuleEntry>;
}

/// The tables' own classifiers.
pub(crate) struct ClassifierLookup;

impl Lookup for ClassifierLookup {
    #[inline]
    fn lookup<'t>(
        &self,
        tables: &'t FlowTables,
        table: u8,
        key: &FlowKey,
        wc: &mut FlowKey,
    ) -> Option<&'t RuleEntry> {
        tables.tables.get(table as usize)?.lookup(key, wc)
    }
}

struct Ctx<'a, L: Lookup> {
    tables: &'a FlowTables,
    lookup: &'a L,
    /// The working copy of the key.
    flow: FlowKey,
    /// What the datapath actions emitted so far make of the packet.
    base: FlowKey,
    /// TPID of the working copy's tag (`TPID_AS_RECEIVED`: the packet's own, whatever it is).
    tpid: u16,
    /// TPID of the packet's outer tag as the emitted actions leave it (`TPID_AS_RECEIVED`: the
    /// tag it arrived with).
    base_tpid: u16,
    wc: FlowKey,
    actions: DpActions,
    hits: RuleHits,
    error: Option<XlateError>,
    depth: u32,
    lookups: u32,
    table: u8,
    /// A push or pop ran: what the commit emits depends on the packet's whole tag.
    vlan_touched: bool,
    /// `exit` ran: no further action runs (the action set neither, as in Open vSwitch).
    exited: bool,
    /// The action set (`write_actions`, `clear_actions`).
    action_set: ActionSet<'a>,
    /// When a tag was pushed over the packet's own (which the key then no longer sees): the
    /// TCI that tag has, so that a group bucket's push can be undone after the bucket.
    inner_tci: Option<u128>,
    /// A fragment under `FragHandling::Normal`: its transport fields read as 0 (in `flow` and
    /// `base`); only a port an action sets is written to the packet.
    ports_hidden: bool,
    /// Cookie of the rule whose actions run (`u64::MAX` before any: a packet-out's own).
    cookie: u64,
    /// The rule whose actions run is a table-miss rule (priority 0, matching everything): its
    /// `controller` punts with reason `no_match` (Open vSwitch's "explicit miss").
    miss: bool,
    /// The reason an `output:CONTROLLER` punts with here: `action`, or `group` in a bucket,
    /// `action_set` in an action set, `packet_out` in a packet-out's own actions.
    punt_context: PuntReason,
}

impl FlowTables {
    /// Translate `key` (from the extract stage; `in_port` an OpenFlow port number) through the
    /// tables from table 0. Never allocates.
    pub fn translate(&self, key: &FlowKey) -> Translation {
        translate_with(self, &ClassifierLookup, key)
    }

    /// Translate a packet-out: run `actions` on the packet of `key` (`in_port` the port it
    /// counts as received on, e.g. `CONTROLLER`) as Open vSwitch runs a packet-out's actions;
    /// `resubmit(,0)` (what `output:TABLE` means there) runs it through the tables from table
    /// 0. A `controller` among `actions` punts with reason `packet_out` and cookie `u64::MAX`.
    pub fn translate_packet_out<'a>(&'a self, key: &FlowKey, actions: &'a [Action]) -> Translation {
        start_with(self, &ClassifierLookup, key, |ctx| {
            ctx.punt_context = PuntReason::PacketOut;
            // One level down: a rule its `table` reaches is not the translation's rule.
            ctx.depth += 1;
            ctx.run(actions);
            ctx.depth -= 1;
        })
    }
}

pub(crate) fn translate_with<L: Lookup>(
    tables: &FlowTables,
    lookup: &L,
    key: &FlowKey,
) -> Translation {
    start_with(tables, lookup, key, |ctx| ctx.table_action(None, 0))
}

/// The translation of `key` whose first step is `first` (a lookup in table 0, or a
/// packet-out's actions); the action set runs after it.
fn start_with<'a, L: Lookup>(
    tables: &'a FlowTables,
    lookup: &'a L,
    key: &FlowKey,
    first: impl FnOnce(&mut Ctx<'a, L>),
) -> Translation {
    let mut ctx = Ctx {
        tables,
        lookup,
        flow: *key,
        base: *key,
        tpid: TPID_AS_RECEIVED,
        base_tpid: TPID_AS_RECEIVED,
        wc: FlowKey::ZERO,
        actions: DpActions::DROP,
        hits: RuleHits::default(),
        error: None,
        depth: 0,
        lookups: 0,
        table: 0,
        vlan_touched: false,
        exited: false,
        action_set: ActionSet::EMPTY,
        inner_tci: None,
        ports_hidden: false,
        cookie: u64::MAX,
        miss: false,
        punt_context: PuntReason::Action,
    };
    let tunnelled = key.get(Field::TunDst) != 0 || key.get(Field::TunSrc) != 0;
    ctx.wc.unwildcard(Field::InPort);
    ctx.wc.unwildcard(Field::EthType);
    if is_ip(key) {
        ctx.wc.unwildcard(Field::NwFrag);
        if key.get(Field::NwFrag) as u8 & FRAG_ANY != 0 {
            match tables.frag {
                FragHandling::Normal => {
                    // As Open vSwitch: a fragment's transport fields read as 0.
                    ctx.ports_hidden = true;
                    for f in [Field::TpSrc, Field::TpDst] {
                        ctx.flow.set(f, 0);
                        ctx.base.set(f, 0);
                    }
                }
                FragHandling::Drop => return ctx.finish(key, tunnelled),
                FragHandling::NxMatch => {}
            }
        }
    }
    if tunnelled {
        ctx.wc.unwildcard(Field::TunId);
        ctx.wc.unwildcard(Field::TunSrc);
        ctx.wc.unwildcard(Field::TunDst);
    }
    first(&mut ctx);
    ctx.run_action_set();
    ctx.finish(key, tunnelled)
}

impl<'a, L: Lookup> Ctx<'a, L> {
    fn finish(mut self, key: &FlowKey, tunnelled: bool) -> Translation {
        let wc = &mut self.wc;
        // Metadata and registers are not packet fields: zero in every packet at the start.
        for w in &mut wc.w[3..8] {
            *w = 0;
        }
        if !tunnelled {
            wc.w[1] = 0;
            wc.w[2] = 0;
        }
        let proto = key.get(Field::NwProto);
        let et = key.get(Field::EthType) as u16;
        if (et == ETH_IP && proto == 1) || (et == ETH_IPV6 && proto == 58) {
            // ICMP type and code are 8 bits; the cut is only right for ICMP packets, so the
            // protocol joins the mask when it cuts anything.
            let (s, d) = (wc.get(Field::TpSrc), wc.get(Field::TpDst));
            if (s | d) & !0xff != 0 {
                wc.unwildcard(Field::NwProto);
                wc.set(Field::TpSrc, s & 0xff);
                wc.set(Field::TpDst, d & 0xff);
            }
        }
        if wc.get(Field::VlanTci) != 0 {
            wc.set(Field::VlanPresent, 1);
        }
        if is_ip(key) && (self.ports_hidden || key.get(Field::NwFrag) as u8 & FRAG_LATER != 0) {
            wc.set(Field::TpSrc, 0);
            wc.set(Field::TpDst, 0);
        }
        if self.error.is_some() {
            self.actions = DpActions::DROP;
        }
        Translation {
            actions: self.actions,
            mask: self.wc,
            rules: self.hits,
            error: self.error,
        }
    }

    #[inline]
    fn fail(&mut self, e: XlateError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    #[inline]
    fn emit(&mut self, a: DpAction) {
        if !self.actions.push(a) {
            self.fail(XlateError::TooManyActions);
        }
    }

    /// Look `table` up (with `in_port` replaced for the lookup only) and run the rule found.
    fn table_action(&mut self, in_port: Option<u16>, table: u8) {
        if self.error.is_some() {
            return;
        }
        if self.depth >= MAX_DEPTH {
            return self.fail(XlateError::TooDeep);
        }
        if self.lookups >= MAX_LOOKUPS {
            return self.fail(XlateError::TooManyLookups);
        }
        self.lookups += 1;
        let saved_port = self.flow.get(Field::InPort);
        if let Some(p) = in_port {
            self.flow.set(Field::InPort, p as u128);
        }
        let tables = self.tables;
        let rule = self.lookup.lookup(tables, table, &self.flow, &mut self.wc);
        self.flow.set(Field::InPort, saved_port);
        let Some(rule) = rule else {
            return;
        };
        self.hits.push(rule.id);
        let old = (self.table, self.cookie, self.miss);
        self.table = table;
        self.cookie = rule.rule.cookie;
        self.miss = rule.rule.priority == 0 && rule.rule.m.mask == FlowKey::ZERO;
        self.depth += 1;
        self.run(&rule.rule.actions);
        self.depth -= 1;
        // The first rule stays the translation's rule (as Open vSwitch's `ctx->rule`): its
        // table and cookie are those of a `controller` in the action set, which runs last.
        if self.depth > 0 {
            (self.table, self.cookie, self.miss) = old;
        }
    }

    /// Run a rule's action list, in order.
    fn run(&mut self, actions: &'a [Action]) {
        for a in actions {
            if !self.run_one(a) {
                return;
            }
        }
    }

    /// Run one action; false when the rest of its list is skipped (an error, or dec_ttl
    /// running out).
    fn run_one(&mut self, a: &'a Action) -> bool {
        if self.error.is_some() || self.exited {
            return false;
        }
        {
            match a {
                Action::Output(p) => self.output(*p),
                Action::SetField { field, value, mask } => self.set_field(*field, *value, *mask),
                Action::DecTtl => {
                    // As Open vSwitch 3.1 (checked with ofproto/trace): TTL and protocol are
                    // consulted, also for a packet that is not IP (an ARP one).
                    self.wc.unwildcard(Field::NwTtl);
                    self.wc.unwildcard(Field::NwProto);
                    if is_ip(&self.flow) {
                        let ttl = self.flow.get(Field::NwTtl);
                        if ttl > 1 {
                            self.flow.set(Field::NwTtl, ttl - 1);
                        } else {
                            // No controller to tell: the rest of this action list is skipped.
                            return false;
                        }
                    }
                }
                Action::PushVlan(tpid) => {
                    self.vlan_touched = true;
                    self.wc.set_masked(Field::VlanPresent, 1, 1);
                    if self.flow.get(Field::VlanPresent) != 0 {
                        // Our key holds one tag: a second one is pushed at once over it.
                        self.commit();
                        self.emit(DpAction::PushVlan {
                            tpid: *tpid,
                            tci: 0,
                        });
                        if self.inner_tci.is_none() {
                            self.inner_tci = Some(self.base.get(Field::VlanTci));
                        }
                        self.base_tpid = *tpid;
                        self.flow.set(Field::VlanTci, VLAN_CFI as u128);
                        self.base.set(Field::VlanTci, VLAN_CFI as u128);
                        // A later change of the new tag re-pushes it with its own TPID.
                        self.tpid = *tpid;
                    } else {
                        self.flow.set(Field::VlanTci, VLAN_CFI as u128);
                        self.tpid = *tpid;
                    }
                }
                Action::PopVlan => {
                    self.vlan_touched = true;
                    self.wc.set_masked(Field::VlanPresent, 1, 1);
                    self.flow.set(Field::VlanTci, 0);
                    // A tag a later `mod_vlan_vid` makes is 802.1Q, as in Open vSwitch.
                    self.tpid = 0x8100;
                }
                Action::Resubmit { port, table } => {
                    let t = table.unwrap_or(self.table);
                    self.table_action(*port, t);
                }
                Action::GotoTable(t) => self.table_action(None, *t),
                Action::Group(g) => self.group(*g),
                // Actions beyond header writes and plain outputs: see `more_actions` below.
                Action::DecTtlIds(_) => {
                    if !self.dec_ttl_ids() {
                        return false;
                    }
                }
                Action::OutputTrunc { .. }
                | Action::Note(_)
                | Action::SetQueue(_)
                | Action::Exit
                | Action::Clone(_)
                | Action::WriteActions(_)
                | Action::ClearActions
                | Action::Controller(_)
                | Action::Move { .. } => self.more_action(a),
            }
        }
        true
    }

    fn set_field(&mut self, field: Field, value: u128, mask: u128) {
        let et = self.flow.get(Field::EthType) as u16;
        let ok = match field {
            Field::NwSrc | Field::NwDst => et == ETH_IP || et == ETH_ARP,
            Field::Ipv6Src | Field::Ipv6Dst | Field::Ipv6Label => et == ETH_IPV6,
            Field::IpDscp | Field::NwEcn | Field::NwTtl => et == ETH_IP || et == ETH_IPV6,
            Field::ArpSha | Field::ArpTha | Field::NwProto => et == ETH_ARP,
            Field::TpSrc | Field::TpDst => {
                if et == ETH_IP || et == ETH_IPV6 {
                    self.wc.unwildcard(Field::NwProto);
                    // A later fragment has no transport header: the write is a no-op (as
                    // Open vSwitch), not an error that ends the actions.
                    matches!(self.flow.get(Field::NwProto), 1 | 6 | 17 | 58 | 132)
                        && self.flow.get(Field::NwFrag) as u8 & FRAG_LATER == 0
                } else {
                    false
                }
            }
            Field::VlanPcp => {
                self.wc.set_masked(Field::VlanPresent, 1, 1);
                self.flow.get(Field::VlanPresent) != 0
            }
            _ => true,
        };
        if !ok {
            return;
        }
        let mask = mask & field.all_ones();
        if field.stage() == crate::key::Stage::L3 && field != Field::IpDscp {
            // As Open vSwitch 3.1 (checked with ofproto/trace): writing an L3 field, even to
            // the value it has, consults nw_proto (IP packets with nw_proto 0 are not
            // rewritten, see `commit`), except ip_dscp (`commit` consults it when the DSCP
            // changed, where OVS does not: its megaflow would rewrite an nw_proto 0 packet).
            self.wc.unwildcard(Field::NwProto);
        }
        // A VLAN field write consults only the bits it writes (and whether there is a tag):
        // a retag that changes the tag is a pop and a push, and `commit` then consults the
        // whole tag; one that leaves it as it was needs no other bit (as Open vSwitch).
        let old = self.wc.get(field);
        self.wc.set(field, old | mask);
        self.flow.set_masked(field, value, mask);
        if field == Field::VlanVid {
            // Setting a VLAN id on an untagged packet tags it.
            self.wc.set(Field::VlanPresent, 1);
            self.flow.set(Field::VlanPresent, 1);
        }
    }

    /// Emit the actions that make the packet what the working copy says.
    fn commit(&mut self) {
        for f in SET_L2 {
            self.commit_field(f);
        }
        if self.vlan_touched {
            self.wc.unwildcard(Field::VlanTci);
        }
        let (b, f) = (self.base.get(Field::VlanTci), self.flow.get(Field::VlanTci));
        // A tag with another TPID than the packet's (a group's earlier bucket pushed one, or
        // `pop_vlan,push_vlan` with the same TCI) is pushed again, although its TCI is the same.
        let other_tpid = f != 0 && b != 0 && self.base_tpid != self.tpid;
        if b != f || other_tpid {
            // Whether the packet had a tag decides between push and pop+push.
            self.wc.set(Field::VlanPresent, 1);
            if b != 0 {
                self.wc.unwildcard(Field::VlanTci);
                self.emit(DpAction::PopVlan);
            }
            if f != 0 {
                self.emit(DpAction::PushVlan {
                    tpid: self.tpid,
                    tci: (f as u16) & !VLAN_CFI,
                });
            }
            self.base_tpid = self.tpid;
            self.base.set(Field::VlanTci, f);
        }
        if SET_L3L4
            .iter()
            .any(|&f| self.flow.get(f) != self.base.get(f))
        {
            // As Open vSwitch: a packet whose `nw_proto` is 0 has no L3 header to rewrite
            // (the change stays pending), so the answer depends on the protocol.
            self.wc.unwildcard(Field::NwProto);
            if self.flow.get(Field::NwProto) == 0 {
                return;
            }
        }
        for f in SET_L3L4 {
            if self.ports_hidden && matches!(f, Field::TpSrc | Field::TpDst) {
                // The packet's real ports are not in `base` (it reads 0): a port an action
                // set is written whole, as Open vSwitch 3.1 does (checked against it).
                let v = self.flow.get(f);
                if v != self.base.get(f) {
                    self.emit(DpAction::Set {
                        field: f,
                        value: v,
                        mask: f.all_ones(),
                    });
                    self.base.set(f, v);
                }
                continue;
            }
            self.commit_field(f);
        }
    }

    #[inline]
    fn commit_field(&mut self, f: Field) {
        let v = self.flow.get(f);
        if v != self.base.get(f) {
            let mask = self.wc.get(f) | (v ^ self.base.get(f));
            self.wc.set(f, mask);
            self.emit(DpAction::Set {
                field: f,
                value: v & mask,
                mask,
            });
            self.base.set(f, v);
        }
    }

    fn output(&mut self, p: PortRef) {
        let in_port = self.flow.get(Field::InPort) as u16;
        let ofport = match p {
            PortRef::Number(n) if n == in_port => return, // OpenFlow: only `in_port` sends back
            PortRef::Number(n) => n,
            PortRef::InPort => in_port,
            PortRef::Flood | PortRef::All => {
                self.commit();
                return self.emit(DpAction::Flood);
            }
            PortRef::Normal => {
                self.commit();
                return self.emit(DpAction::Normal);
            }
        };
        let Some(port) = self.tables.ports.get(ofport) else {
            return;
        };
        self.commit();
        if port.tunnel {
            let tun_id = self.flow.get(Field::TunId) as u64;
            self.emit(DpAction::TunnelOutput {
                port: port.port,
                tun_id,
            });
        } else {
            self.emit(DpAction::Output(port.port));
        }
    }

    fn group(&mut self, id: u32) {
        let tables = self.tables;
        let Some(g) = tables.groups.get(&id) else {
            return;
        };
        if self.depth >= MAX_DEPTH {
            return self.fail(XlateError::TooDeep);
        }
        self.depth += 1;
        match g.kind {
            GroupKind::All | GroupKind::Indirect => {
                for b in &g.buckets {
                    self.bucket(&b.actions);
                }
            }
            GroupKind::Select => {
                let h = self.select_hash(&g.fields, &g.field_masks, g.method_param);
                let mut best: Option<(u64, usize)> = None;
                for (i, b) in g.buckets.iter().enumerate() {
                    if b.weight == 0 {
                        continue;
                    }
                    let score = (mix(h, b.id as u64) & 0xffff) * b.weight as u64;
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, i));
                    }
                }
                if let Some((_, i)) = best {
                    self.bucket(&g.buckets[i].actions);
                }
            }
            GroupKind::FastFailover => {
                if let Some(b) = g.buckets.iter().find(|b| self.bucket_live(b, 0)) {
                    self.bucket(&b.actions);
                }
            }
        }
        self.depth -= 1;
    }

    /// Run a bucket on a copy of the packet: what it changes does not outlive it. A bucket is
    /// an OpenFlow action set (OpenFlow 1.3 §5.10; Open vSwitch runs a bucket with
    /// `ofpacts_execute_action_set`), run as `write_actions` are: see [`Ctx::run_set`].
    fn bucket(&mut self, actions: &'a [Action]) {
        let saved = self.flow;
        let saved_tpid = self.tpid;
        let saved_inner = self.inner_tci;
        let saved_context = self.punt_context;
        if saved_context != PuntReason::PacketOut {
            self.punt_context = PuntReason::Group;
        }
        self.run_set(&ActionSet::of(actions));
        self.punt_context = saved_context;
        self.flow = saved;
        self.tpid = saved_tpid;
        if saved_inner.is_none() {
            if let Some(inner) = self.inner_tci.take() {
                // The bucket pushed a tag over the packet's: take it off again, so that the
                // packet after the group is the packet before it.
                self.emit(DpAction::PopVlan);
                self.base.set(Field::VlanTci, inner);
                self.base_tpid = TPID_AS_RECEIVED;
            }
        }
    }

    /// Hash of the fields a select group chooses by (unwildcarding them). Empty `fields`: the
    /// 5-tuple (addresses and protocol of IP packets, and ports of TCP/UDP/SCTP), or the
    /// Ethernet addresses of other packets.
    /// `masks`: fields of `fields` hashed under a mask (only those bits are consulted);
    /// `basis` (`selection_method_param`) seeds the hash.
    fn select_hash(&mut self, fields: &[Field], masks: &[(Field, u128)], basis: u64) -> u64 {
        let mut h = 0x243f_6a88_85a3_08d3u64 ^ basis;
        let mut take = |ctx: &mut Self, f: Field| {
            let m = masks
                .iter()
                .find(|(mf, _)| *mf == f)
                .map_or(f.all_ones(), |(_, m)| *m);
            ctx.wc.set(f, ctx.wc.get(f) | m);
            let v = ctx.flow.get(f) & m;
            h = mix(mix(h, v as u64), (v >> 64) as u64);
        };
        if !fields.is_empty() {
            for f in fields {
                take(self, *f);
            }
            return h;
        }
        let et = self.flow.get(Field::EthType) as u16;
        match et {
            ETH_IP | ETH_IPV6 => {
                if et == ETH_IP {
                    take(self, Field::NwSrc);
                    take(self, Field::NwDst);
                } else {
                    take(self, Field::Ipv6Src);
                    take(self, Field::Ipv6Dst);
                }
                take(self, Field::NwProto);
                if matches!(self.flow.get(Field::NwProto), 6 | 17 | 132)
                    && self.flow.get(Field::NwFrag) as u8 & FRAG_LATER == 0
                {
                    take(self, Field::TpSrc);
                    take(self, Field::TpDst);
                }
            }
            _ => {
                take(self, Field::EthSrc);
                take(self, Field::EthDst);
            }
        }
        h
    }
}

/// The actions beyond header writes and plain outputs (`exit`, `clone`, the action set,
/// `move`, truncated output, and those that change nothing on the wire), and fast failover
/// liveness. Kept apart from the core walk above.
impl<'a, L: Lookup> Ctx<'a, L> {
    fn more_action(&mut self, a: &'a Action) {
        match a {
            // No effect on the packet: a note is only text; vecplane's ports have no QoS
            // queues (Open vSwitch's userspace datapath without QoS only sets skb_priority).
            Action::Note(_) | Action::SetQueue(_) => {}
            Action::Exit => self.exited = true,
            Action::Clone(inner) => self.clone_actions(inner),
            Action::WriteActions(inner) => {
                if self.action_set.len == MAX_WRITE_ACTIONS {
                    return self.fail(XlateError::ActionSetFull);
                }
                self.action_set.lists[self.action_set.len] = inner;
                self.action_set.len += 1;
            }
            Action::ClearActions => self.action_set = ActionSet::EMPTY,
            Action::Move {
                src,
                src_ofs,
                dst,
                dst_ofs,
                bits,
            } => self.move_bits(*src, *src_ofs, *dst, *dst_ofs, *bits),
            Action::OutputTrunc { port, max_len } => self.output_trunc(*port, *max_len),
            Action::Controller(c) => self.controller(c),
            _ => {}
        }
    }

    /// `controller`: a copy of the packet as it is now goes to the control plane, with the
    /// rule's table and cookie; the actions go on. Its reason as Open vSwitch's
    /// `execute_controller_action` gives it: a plain one (`output:CONTROLLER`) takes the
    /// context's (group, action set, packet-out), and `action` from a table-miss rule is
    /// `no_match`. Consults no key bit of its own (the megaflow keeps it: every packet of
    /// the flow punts, as Open vSwitch's `userspace` action does).
    fn controller(&mut self, c: &ControllerAction) {
        self.commit();
        let mut reason = if c.is_output() {
            self.punt_context
        } else {
            c.reason
        };
        if reason == PuntReason::Action && self.miss {
            reason = PuntReason::NoMatch;
        }
        self.emit(DpAction::Controller {
            max_len: c.max_len,
            reason,
            table: self.table,
            cookie: self.cookie,
        });
    }

    /// `dec_ttl(ids)`: as `dec_ttl` (there is no controller to tell). False when the TTL ran
    /// out (the rest of the action list is skipped).
    fn dec_ttl_ids(&mut self) -> bool {
        let ran_out = is_ip(&self.flow) && self.flow.get(Field::NwTtl) <= 1;
        self.run(std::slice::from_ref(&Action::DecTtl));
        !ran_out
    }

    /// `clone(...)`: the actions run on a copy of the packet with an action set of their own
    /// (run at their end); the packet and the outer action set are as before afterwards.
    fn clone_actions(&mut self, inner: &'a [Action]) {
        let outer_set = std::mem::replace(&mut self.action_set, ActionSet::EMPTY);
        let saved = self.flow;
        let saved_tpid = self.tpid;
        self.run(inner);
        // The clone's action set runs on the packet as the clone left it.
        self.run_action_set();
        self.flow = saved;
        self.tpid = saved_tpid;
        self.action_set = outer_set;
    }

    /// Run the action set and empty it (nothing after `exit`, as Open vSwitch).
    fn run_action_set(&mut self) {
        let set = std::mem::replace(&mut self.action_set, ActionSet::EMPTY);
        if self.exited || self.error.is_some() || set.len == 0 {
            return;
        }
        let saved_context = self.punt_context;
        if saved_context != PuntReason::PacketOut {
            self.punt_context = PuntReason::ActionSet;
        }
        self.run_set(&set);
        self.punt_context = saved_context;
    }

    /// Run an action set (`write_actions`, or a group bucket) in OpenFlow's order, as Open
    /// vSwitch's `ofpacts_execute_action_set`: the last pop_vlan, the last push_vlan, the last
    /// dec_ttl, every set_field and move in the order written, then only the last group, or
    /// else the last output, or else the last resubmit. Without any of those three nothing
    /// runs (a change reaching no port is no change); a dec_ttl running out ends it.
    fn run_set(&mut self, set: &ActionSet<'a>) {
        let Some(terminal) = set
            .last(|a| matches!(a, Action::Group(_)))
            .or_else(|| set.last(|a| matches!(a, Action::Output(_) | Action::Controller(_))))
            .or_else(|| set.last(|a| matches!(a, Action::Resubmit { .. })))
        else {
            return;
        };
        let kinds: [fn(&Action) -> bool; 3] = [
            |a| matches!(a, Action::PopVlan),
            |a| matches!(a, Action::PushVlan(_)),
            |a| matches!(a, Action::DecTtl | Action::DecTtlIds(_)),
        ];
        for kind in kinds {
            if let Some(a) = set.last(kind) {
                if !self.run_one(a) {
                    return;
                }
            }
        }
        for a in set.actions() {
            if matches!(a, Action::SetField { .. } | Action::Move { .. }) && !self.run_one(a) {
                return;
            }
        }
        self.run_one(terminal);
    }

    /// `move`: copy bits of `src` into `dst` (skipped, as in Open vSwitch, when the packet
    /// has no header holding `src`; `dst` is written as `set_field` writes).
    fn move_bits(&mut self, src: Field, src_ofs: u32, dst: Field, dst_ofs: u32, bits: u32) {
        if !self.has_field(src) {
            return;
        }
        let m = if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        self.wc.set(src, self.wc.get(src) | (m << src_ofs));
        let v = (self.flow.get(src) >> src_ofs) & m;
        self.set_field(dst, v << dst_ofs, m << dst_ofs);
    }

    /// True when the packet (as the working copy says) has a header holding `f`, consulting
    /// what that depends on.
    fn has_field(&mut self, f: Field) -> bool {
        let et = self.flow.get(Field::EthType) as u16;
        match f {
            Field::NwSrc | Field::NwDst => et == ETH_IP || et == ETH_ARP,
            Field::Ipv6Src | Field::Ipv6Dst | Field::Ipv6Label => et == ETH_IPV6,
            Field::IpDscp | Field::NwEcn | Field::NwTtl | Field::NwProto => is_ip(&self.flow),
            Field::ArpSha | Field::ArpTha => et == ETH_ARP,
            Field::TpSrc | Field::TpDst => {
                self.wc.unwildcard(Field::NwProto);
                is_ip(&self.flow) && matches!(self.flow.get(Field::NwProto), 1 | 6 | 17 | 58 | 132)
            }
            _ => true,
        }
    }

    /// `output(port=P,max_len=N)`: a copy cut to `max_len` bytes to one port.
    fn output_trunc(&mut self, port: PortRef, max_len: u16) {
        let in_port = self.flow.get(Field::InPort) as u16;
        let ofport = match port {
            PortRef::Number(n) if n == in_port => return,
            PortRef::Number(n) => n,
            PortRef::InPort => in_port,
            // Open vSwitch does not translate a truncated output to these.
            PortRef::Flood | PortRef::All | PortRef::Normal => return,
        };
        let Some(p) = self.tables.ports.get(ofport) else {
            return;
        };
        if p.tunnel {
            // vecplane cuts only what it sends as it is; a tunnel would cut the encapsulated
            // packet. Send it whole there (Open vSwitch cuts the inner packet).
            return self.output(PortRef::Number(ofport));
        }
        self.commit();
        self.emit(DpAction::Truncate(max_len));
        self.emit(DpAction::Output(p.port));
    }

    /// A fast failover bucket is live when it watches nothing, or a live port, or a live
    /// group (`depth` bounds a chain of watched groups, as Open vSwitch's).
    fn bucket_live(&self, b: &Bucket, depth: u32) -> bool {
        if b.watch_port.is_none() && b.watch_group.is_none() {
            return true;
        }
        b.watch_port.is_some_and(|p| self.tables.ports.is_live(p))
            || b.watch_group.is_some_and(|g| self.group_live(g, depth + 1))
    }

    fn group_live(&self, id: u32, depth: u32) -> bool {
        depth < MAX_DEPTH
            && self
                .tables
                .groups
                .get(&id)
                .is_some_and(|g| g.buckets.iter().any(|b| self.bucket_live(b, depth)))
    }
}

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    let x = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 29)
}

#[cfg(test)]
#[path = "xlate_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "xlate_controller_tests.rs"]
mod controller_tests;

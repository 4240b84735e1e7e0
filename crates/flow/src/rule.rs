//! OpenFlow rules, actions, groups and flow-table changes as plain data: what `ofctl` parses
//! from `ovs-ofctl` syntax and prints back, what the classifier indexes. Owns no table and does
//! no lookup.

use crate::key::{Field, FlowKey};
pub use channel::punt::PuntReason;

/// A match: the bits of `mask` must equal those of `key` (`key` holds no bit outside `mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Match {
    /// Values (only bits inside `mask`).
    pub key: FlowKey,
    /// Bits that must match.
    pub mask: FlowKey,
}

impl Match {
    /// A match on everything (`mask` all zero).
    pub const ANY: Match = Match {
        key: FlowKey::ZERO,
        mask: FlowKey::ZERO,
    };

    /// True when `key` matches.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.key.matches(key, &self.mask)
    }

    /// Require `field & mask == value & mask` (adding to what is already required).
    pub fn set(&mut self, field: Field, value: u128, mask: u128) {
        let mut m = FlowKey::ZERO;
        m.set(field, mask);
        self.mask.union_with(&m);
        self.key.set_masked(field, value, mask);
    }
}

/// Identity of a rule, stable while the rule exists (counters are kept by it).
pub type RuleId = u32;

/// Where `output` sends a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortRef {
    /// An OpenFlow port number of the switch.
    Number(u16),
    /// Back out of the port it came in on (`in_port`).
    InPort,
    /// Every port of the switch except the input port (`flood`).
    Flood,
    /// Every port of the switch except the input port (`all`; no port has flooding disabled).
    All,
    /// Hand to the traditional path: the L2 bridge or the router (`normal`).
    Normal,
}

/// An OpenFlow action (a rule's or a group bucket's).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `output:PORT`, `in_port`, `flood`, `all`, `normal`.
    Output(PortRef),
    /// `set_field:VALUE[/MASK]->FIELD` and the older spellings (`mod_dl_src`, `mod_nw_dst`,
    /// `mod_tp_dst`, `mod_vlan_vid`, `set_tunnel`, `load`, ...): bits of `mask` set to `value`.
    SetField {
        /// The field written.
        field: Field,
        /// New value (bits in `mask`).
        value: u128,
        /// Bits written.
        mask: u128,
    },
    /// `dec_ttl`: decrement TTL / hop limit; a packet whose TTL would reach 0 is dropped.
    DecTtl,
    /// `push_vlan:ETHERTYPE` (0x8100 or 0x88a8): a new tag with VID 0, PCP 0.
    PushVlan(u16),
    /// `pop_vlan` / `strip_vlan`.
    PopVlan,
    /// `resubmit([port],[table])` / `resubmit:PORT`: look the packet up again in `table`
    /// (default: the current one) as if it came in on `port` (default: its input port).
    Resubmit {
        /// Input port for the lookup.
        port: Option<u16>,
        /// Table to look in.
        table: Option<u8>,
    },
    /// `goto_table:N` (must go to a later table).
    GotoTable(u8),
    /// `group:N`.
    Group(u32),
    /// `output(port=P,max_len=N)`: output a copy cut to at most `max_len` bytes.
    OutputTrunc {
        /// Where.
        port: PortRef,
        /// Longest copy sent (bytes).
        max_len: u16,
    },
    /// `dec_ttl(ID,...)`: `dec_ttl` naming the controllers to tell when the TTL runs out
    /// (vecplane has no controller channel: the same as `dec_ttl`).
    DecTtlIds(Vec<u16>),
    /// `note:HEX...`: an opaque note (does nothing; kept for dumps, padded as OVS pads it).
    Note(Vec<u8>),
    /// `set_queue:N`: the queue of later outputs. vecplane's ports have no QoS queues, so it
    /// changes nothing on the wire (as Open vSwitch's userspace datapath without QoS).
    SetQueue(u32),
    /// `exit`: stop the whole pipeline here (the action set still runs).
    Exit,
    /// `clone(ACTIONS)`: run `ACTIONS` on a copy of the packet; what they change does not
    /// outlive them.
    Clone(Vec<Action>),
    /// `write_actions(ACTIONS)`: merge `ACTIONS` into the action set, which runs when the
    /// pipeline ends (one action of each kind, in OpenFlow's order).
    WriteActions(Vec<Action>),
    /// `clear_actions`: empty the action set.
    ClearActions,
    /// `controller`, `controller:MAX_LEN`, `controller(max_len=N,reason=R,id=N)`,
    /// `output:CONTROLLER`: send a copy of the packet as it is now to the control plane (an
    /// OpenFlow packet-in); the actions go on (ovs-actions(7)).
    Controller(ControllerAction),
    /// `move:SRC[A..B]->DST[C..D]`: copy `bits` bits of `src` from bit `src_ofs` into `dst`
    /// from bit `dst_ofs`.
    Move {
        /// Field read.
        src: Field,
        /// First bit read.
        src_ofs: u32,
        /// Field written.
        dst: Field,
        /// First bit written.
        dst_ofs: u32,
        /// Number of bits.
        bits: u32,
    },
}

/// What a `controller` action asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ControllerAction {
    /// Most bytes of the packet sent (65535: all of it; 0: only the metadata).
    pub max_len: u16,
    /// The reason given (`reason=`; `Action` when absent).
    pub reason: PuntReason,
    /// The controller connection id (`id=`; 0 when absent).
    pub id: u16,
}

impl ControllerAction {
    /// `controller` / `output:CONTROLLER`: the whole packet, reason `action`, connection 0.
    pub const PLAIN: ControllerAction = ControllerAction {
        max_len: u16::MAX,
        reason: PuntReason::Action,
        id: 0,
    };

    /// True when it is what OpenFlow's `output:CONTROLLER` says (reason `action`, connection
    /// 0): its reason then follows where it runs (a group bucket, an action set, a
    /// packet-out), as in Open vSwitch, which sends such an action as an OpenFlow output.
    pub fn is_output(&self) -> bool {
        self.reason == PuntReason::Action && self.id == 0
    }
}

/// An OpenFlow rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// Table number (0..=254).
    pub table: u8,
    /// Priority (higher wins; default 32768).
    pub priority: u16,
    /// Opaque cookie.
    pub cookie: u64,
    /// What it matches.
    pub m: Match,
    /// Its actions, in order (empty: drop).
    pub actions: Vec<Action>,
    /// Seconds without a hit before it is removed (0: never).
    pub idle_timeout: u16,
    /// Seconds after it was added before it is removed (0: never).
    pub hard_timeout: u16,
}

/// Default OpenFlow priority.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Kind of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// Every bucket runs on its own copy of the packet.
    All,
    /// One bucket, chosen by a hash of the packet's fields, weighted.
    Select,
    /// The one bucket.
    Indirect,
    /// The first live bucket (`type=ff`, fast failover): a bucket is live when it watches
    /// nothing, or its `watch_port` is a live port, or its `watch_group` has a live bucket.
    FastFailover,
}

/// How a select group picks its bucket (`selection_method=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SelectionMethod {
    /// Not given: Open vSwitch's default (`dp_hash`), printed as nothing.
    #[default]
    Default,
    /// `selection_method=dp_hash`: a hash the datapath computes over the packet's 5-tuple.
    DpHash,
    /// `selection_method=hash`: a hash of `fields` (masked by `field_masks`).
    Hash,
}

/// A bucket of a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Bucket id (`bucket_id=`; assigned in order when absent).
    pub id: u32,
    /// Weight for select groups (default 1 when given as `bucket=...` without `weight`... as
    /// ovs-ofctl: 100).
    pub weight: u16,
    /// Actions of the bucket.
    pub actions: Vec<Action>,
    /// Fast failover: the OpenFlow port whose liveness makes the bucket live.
    pub watch_port: Option<u16>,
    /// Fast failover: the group whose liveness makes the bucket live.
    pub watch_group: Option<u32>,
}

/// An OpenFlow group (`ovs-ofctl add-group` syntax).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    /// Group id.
    pub id: u32,
    /// Its kind.
    pub kind: GroupKind,
    /// Fields a select group hashes (`selection_method=hash,fields(...)`); empty: the
    /// 5-tuple (source and destination address, protocol, source and destination port).
    pub fields: Vec<Field>,
    /// Its buckets.
    pub buckets: Vec<Bucket>,
    /// `selection_method=` of a select group.
    pub method: SelectionMethod,
    /// `selection_method_param=N` (0 when absent): mixed into the select hash.
    pub method_param: u64,
    /// Fields of `fields` hashed under a mask (`fields(ip_dst=255.255.255.0)`); a field of
    /// `fields` not listed here is hashed whole.
    pub field_masks: Vec<(Field, u128)>,
}

/// Which rules a `mod-flows` or `del-flows` touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleFilter {
    /// Only this table (None: all tables).
    pub table: Option<u8>,
    /// The match: non-strict, rules whose match is at least as specific; strict, the same
    /// match and priority.
    pub m: Match,
    /// Strict matching (`--strict`): priority and match must be equal.
    pub strict: Option<u16>,
    /// `cookie=VALUE/MASK`: only rules whose cookie matches under the mask.
    pub cookie: Option<(u64, u64)>,
    /// `out_port=N`: only rules that output to this port.
    pub out_port: Option<u16>,
}

/// One change to the flow tables (`add-flow`, `mod-flows`, `del-flows`, `add-group`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowMod {
    /// Add a rule (replacing one with the same table, priority and match).
    Add(Rule),
    /// Replace the actions of the rules the filter selects; when it selects none (and has no
    /// cookie filter), add the rule (`filter`'s table, match and strict priority or the
    /// default), as ovs-ofctl's default protocol (OpenFlow 1.0) does.
    Modify {
        /// Which rules.
        filter: RuleFilter,
        /// Their new actions.
        actions: Vec<Action>,
        /// Their new cookie (None: kept; an added rule gets 0). `mod-flows` text gives
        /// `Some`: `cookie=V` without a mask, else 0, as ovs-ofctl's OpenFlow 1.0 does.
        cookie: Option<u64>,
    },
    /// Delete the rules the filter selects.
    Delete(RuleFilter),
    /// Add a group (an error when the id exists).
    AddGroup(Group),
    /// Replace a group.
    ModGroup(Group),
    /// Delete a group (None: all groups), and the rules that use it.
    DelGroup(Option<u32>),
}

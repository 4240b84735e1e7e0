//! The load balancer's configuration as plain data (`LbState`): VIPs, application servers (AS)
//! with weights, `lb conf`, NAT inside ports, and the stable ids the data path counts by
//! (`VipId`, AS slots with generations). Changes go through `LbState::apply`, all or nothing.
//! Control-plane only: it never touches a packet and is never read by a worker (workers read
//! the `snapshot::LbTables` built from it).
//!
//! # VIPs and per-port VIPs
//!
//! A VIP is identified by its key: a canonical prefix (IPv4 or IPv6, host bits zero; the CLI
//! and the API clear host bits as VPP does), a protocol (`tcp`, `udp` or any) and a destination
//! port (0 = all ports). As in VPP, a key without a port takes every protocol: `apply` makes
//! `(tcp, 0)` and `(udp, 0)` into `(any, all)` (`VipKey::canonical`). Keys that coexist on one
//! prefix: `(tcp, P)`, `(udp, P)` for any number of ports P, and `(any, all)`. A packet to any
//! address of the prefix is matched (see `snapshot::LbTables::vip_for`):
//!
//! 1. by the longest prefix that holds the destination address *and* has a key that matches;
//!    a longer prefix whose keys do not match the packet falls through to a shorter one;
//! 2. within one prefix: exact protocol + port first, then protocol + all ports, then any
//!    protocol + all ports (the only key ICMP and other protocols can match).
//!
//! Refused (each with a message naming the token or the VIP):
//! - a port without `protocol tcp|udp` (`(any, P)` has no meaning: VPP itself needs a protocol);
//! - `nat4`/`nat6` without a port or without `target_port` (NAT rewrites the port);
//! - `l3dsr` on an IPv6 VIP, `l3dsr` without `dscp`, `dscp` with another encap, `dscp` > 63
//!   (an L3DSR prefix VIP, as VPP's `90.0.0.0/8`, is accepted);
//! - `type nodeport` on a VIP that is not NAT, without `lb conf ip4-src-address` (nat4) or
//!   `ip6-src-address` (nat6) — the node's address it answers on — or whose node key clashes
//!   with another VIP's key or node key;
//! - a weight over 100 (VPP's range);
//! - a change after which the tables would pass the memory cap (`[lb] memory-limit`, see
//!   `model_budget.rs`) and take more than before;
//!   `nat4` on an IPv6 VIP, `nat6` on an IPv4 VIP (VPP refuses NAT46/NAT64 too);
//! - an AS whose family does not fit the encap (`gre4`, `l3dsr`, `nat4`: IPv4 servers; `gre6`,
//!   `nat6`: IPv6 servers), including when `lb vip` changes the encap of a VIP with servers;
//! - two L3DSR VIPs on different addresses with the same DSCP and a common server (the server
//!   could not tell which VIP a packet was for);
//! - an AS twice on one line, deleting an AS or VIP that does not exist, an unspecified or
//!   multicast AS address, more than `MAX_VIPS` VIPs or `MAX_AS_SLOTS` AS slots;
//! - a `gre4` (`gre6`) VIP while `lb conf ip4-src-address` (`ip6-src-address`) is not set.
//!
//! Deliberate differences from VPP: `lb vip` on an existing key changes that VIP in place (id,
//! servers and flows stay) where VPP refuses it; `lb as` naming a server that is already there
//! (without `weight`) keeps its weight where VPP refuses the line.
//!
//! # Weights (VPP's)
//!
//! `lb as <vip> <addr>... [weight <0-100>] [flush]`: one weight for every address of the line;
//! a new (or re-added) server without `weight` gets 100; shares are proportional to weights
//! (`maglev`). Weight 0 drains: no new flows, established flows stay. `flush` evicts the named
//! servers' flows (gen bumped): `weight 0 flush` is VPP's hard drain. The API may give each
//! server its own weight (same range).
//!
//! # Extensions to VPP's syntax (see `cli`)
//!
//! - Per-protocol flow timeouts: `lb conf timeout <s>` sets all of TCP, UDP and other (VPP's
//!   meaning); `lb conf timeout tcp <s> timeout udp <s> timeout other <s>` sets them one by one.
//! - `ip4-src-address`/`ip6-src-address` may take a prefix (`198.18.0.0/24`): GRE outer sources
//!   are then spread over it per flow.
//! - `src_ip_sticky` on `lb vip` (as newer VPP), `lb flush vip <vip>` (evict the VIP's flows).
//!
//! # AS slots and generations
//!
//! Every (VIP, AS address) pair holds an AS slot: a small integer (< `MAX_AS_SLOTS`) that the
//! per-worker counters and flow entries use, with a generation `gen`. A flow entry stores
//! (slot, gen) and is valid only while the slot still has that gen and is not `Free`.
//! - weight 0: `Draining` (out of the Maglev table, flows stay);
//! - `lb as ... del` (no flush): `Removed` (out of the Maglev table, flows stay) until
//!   `LbState::collect` frees it; re-adding the address before that revives the same slot;
//! - `lb as ... del flush`, `lb flush vip` and `lb vip ... del`: the gen is bumped at once
//!   (flows invalid); the slot is freed (deletes) or stays (flush vip);
//! - a slot is freed with its gen bumped, so a reused slot never matches an old flow entry;
//! - marked down by a health check (`SetHealth`, see `model_health.rs`): `Draining` whatever
//!   its configured weight, which is kept (and may change) until it is marked up again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[path = "model_error.rs"]
mod error;
pub use error::{LbError, LbErrorKind};
#[path = "model_health.rs"]
mod health;
use health::state_for;
#[path = "model_budget.rs"]
mod budget;
#[path = "model_check.rs"]
mod check;
pub use budget::{
    maglev_bytes, show_bytes, MemoryBudget, MemoryUse, DEFAULT_MEMORY_LIMIT, MIN_MEMORY_LIMIT,
};
use check::{check_server_addr, check_server_family};
pub use check::{check_vip_spec, nodeport_key};

/// At most this many VIPs (`VipId` < `MAX_VIPS`): per-worker counter arrays are this long.
pub const MAX_VIPS: usize = 4096;
/// At most this many AS slots (`AsSlot` < `MAX_AS_SLOTS`), over all VIPs.
pub const MAX_AS_SLOTS: usize = 65536;
/// The weight of a server added without `weight` (VPP's default).
pub const DEFAULT_WEIGHT: u32 = 100;
/// The largest weight accepted (VPP's `weight <0-100>`).
pub const MAX_WEIGHT: u32 = 100;
/// The default Maglev table size (VPP's `new_len`); the table uses the next prime >= new_len.
pub const DEFAULT_NEW_LEN: u32 = 65537;
/// The largest `new_len` accepted (a 4 Mi-entry table is 16 MiB).
pub const MAX_NEW_LEN: u32 = 1 << 22;
/// The default flow idle timeout in seconds (VPP's).
pub const DEFAULT_TIMEOUT: u32 = 40;
/// The largest flow timeout accepted, in seconds (one day).
pub const MAX_TIMEOUT: u32 = 86_400;
/// The default flow-table entries per worker (`lb conf buckets`; each worker's table holds at
/// least that many, rounded up to 3 x a power of two, at most 48M).
pub const DEFAULT_BUCKETS: u32 = 1 << 20;
/// The largest `buckets` accepted: 2^25 entries, which the flow table holds in its largest
/// size (2^24 buckets of 3 entries, 1 GiB per worker); a larger request could not be honoured.
pub const MAX_BUCKETS: u32 = 1 << 25;
/// `MAX_BUCKETS` as a power of two (`buckets-log2`).
pub const MAX_BUCKETS_LOG2: u32 = 25;
/// Seconds a `Removed` slot is kept beyond the flow timeout before it may be freed, so that
/// every worker has moved to a snapshot without it in the Maglev table.
pub const COLLECT_GRACE: u64 = 5;

/// A VIP's stable id (< `MAX_VIPS`): the index of its counters and its flow-table key part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VipId(pub u32);

/// An AS slot (< `MAX_AS_SLOTS`): one (VIP, server) pair; the index of its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AsSlot(pub u32);

/// A canonical IP prefix: host bits are zero, `len` fits the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// A prefix; `None` when `len` is too long for the family or host bits are set.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let p = Prefix { addr, len };
        (len <= p.max_len() && p.masked() == addr).then_some(p)
    }

    /// A host prefix (/32 or /128).
    pub fn host(addr: IpAddr) -> Prefix {
        let len = if addr.is_ipv4() { 32 } else { 128 };
        Prefix { addr, len }
    }

    /// The prefix's (network) address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True for IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// True for a /32 or /128.
    pub fn is_host(&self) -> bool {
        self.len == self.max_len()
    }

    /// 32 or 128.
    pub fn max_len(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    /// `addr` with the bits beyond `len` cleared (what `new` would accept).
    pub fn masked(&self) -> IpAddr {
        mask_addr(self.addr, self.len)
    }

    /// True when `a` (of the same family) is inside the prefix.
    pub fn contains(&self, a: IpAddr) -> bool {
        a.is_ipv4() == self.addr.is_ipv4() && mask_addr(a, self.len) == self.addr
    }
}

/// `a` with all bits beyond `len` cleared.
pub fn mask_addr(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(v4) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - len.min(32) as u32)
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len.min(128) as u32)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The protocol part of a VIP key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VipProtocol {
    /// Every protocol (only with all ports).
    Any,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
}

impl VipProtocol {
    /// The IP protocol number (`None` for any).
    pub fn number(self) -> Option<u8> {
        match self {
            VipProtocol::Any => None,
            VipProtocol::Tcp => Some(6),
            VipProtocol::Udp => Some(17),
        }
    }
}

/// What identifies a VIP: prefix, protocol, destination port (0 = all ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VipKey {
    /// The VIP prefix.
    pub prefix: Prefix,
    /// tcp, udp or any.
    pub protocol: VipProtocol,
    /// Destination port, 0 = all ports. Non-zero only with tcp or udp.
    pub port: u16,
}

impl VipKey {
    /// An all-ports, any-protocol key.
    pub fn all(prefix: Prefix) -> VipKey {
        VipKey {
            prefix,
            protocol: VipProtocol::Any,
            port: 0,
        }
    }

    /// The key VPP means: without a port (port 0) a VIP takes every protocol and every port,
    /// whatever protocol was named (VPP's `lb vip`, `lb as` and its API all do this).
    pub fn canonical(self) -> VipKey {
        if self.port == 0 {
            VipKey::all(self.prefix)
        } else {
            self
        }
    }
}

/// `cmd` with every VIP key canonical (`VipKey::canonical`).
fn canonical(cmd: &LbCommand) -> LbCommand {
    let mut c = cmd.clone();
    match &mut c {
        LbCommand::AddVip(s) => s.key = s.key.canonical(),
        LbCommand::DelVip(k) | LbCommand::FlushVip(k) => *k = k.canonical(),
        LbCommand::AddAs { vip, .. }
        | LbCommand::DelAs { vip, .. }
        | LbCommand::SetHealth { vip, .. } => *vip = vip.canonical(),
        LbCommand::Conf(_)
        | LbCommand::NatInterface { .. }
        | LbCommand::Show(_)
        | LbCommand::SetMemoryBudget(_) => {}
    }
    c
}

impl fmt::Display for VipKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.prefix)?;
        match self.protocol {
            VipProtocol::Any => {}
            VipProtocol::Tcp => write!(f, " protocol tcp")?,
            VipProtocol::Udp => write!(f, " protocol udp")?,
        }
        if self.port != 0 {
            write!(f, " port {}", self.port)?;
        }
        Ok(())
    }
}

/// How packets reach the servers of a VIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encap {
    /// IPv4 + GRE to IPv4 servers.
    Gre4,
    /// IPv6 + GRE to IPv6 servers.
    Gre6,
    /// IPv4 destination := server, DSCP := `dscp` (0..=63); IPv4 VIPs and servers.
    L3dsr {
        /// The DSCP that names the VIP to the server.
        dscp: u8,
    },
    /// IPv4 destination address and port := server, `target_port`; replies rewritten back.
    Nat4 {
        /// The servers' port.
        target_port: u16,
    },
    /// IPv6 NAT, as `Nat4`.
    Nat6 {
        /// The servers' port.
        target_port: u16,
    },
}

impl Encap {
    /// True when the servers must be IPv6.
    pub fn wants_ipv6_servers(self) -> bool {
        matches!(self, Encap::Gre6 | Encap::Nat6 { .. })
    }

    /// The encap's CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Encap::Gre4 => "gre4",
            Encap::Gre6 => "gre6",
            Encap::L3dsr { .. } => "l3dsr",
            Encap::Nat4 { .. } => "nat4",
            Encap::Nat6 { .. } => "nat6",
        }
    }
}

/// Everything `lb vip` says about a VIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VipSpec {
    /// Which VIP.
    pub key: VipKey,
    /// How packets reach its servers.
    pub encap: Encap,
    /// Maglev table size asked for (the table uses the next prime >= this).
    pub new_len: u32,
    /// Hash on addresses only: every flow of a client goes to the same server.
    pub src_ip_sticky: bool,
    /// NAT only, `type nodeport`: the node port (VPP's `node_port`; the VIP's port when not
    /// given). Packets to the node's address (`lb conf ip4-src-address` for nat4,
    /// `ip6-src-address` for nat6, the address VPP's nodeport replies come from) with the VIP's
    /// protocol and this port go to the VIP's servers too. `None`: `type clusterip`.
    pub node_port: Option<u16>,
}

/// A source for encapsulated packets: an address, or a prefix to spread sources over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceAddress {
    /// The address (network address when `len` is shorter than the host length).
    pub addr: IpAddr,
    /// Prefix length: 32/128 for one address.
    pub len: u8,
}

/// Flow idle timeouts in seconds per protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeouts {
    /// TCP flows.
    pub tcp: u32,
    /// UDP flows.
    pub udp: u32,
    /// Every other protocol (any-protocol VIPs).
    pub other: u32,
}

impl Timeouts {
    /// The longest of the three.
    pub fn max(&self) -> u32 {
        self.tcp.max(self.udp).max(self.other)
    }
}

/// `lb conf` as a whole (the current values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LbConf {
    /// Outer IPv4 source for GRE4 (unset: no GRE4 VIP may exist).
    pub ip4_src: Option<SourceAddress>,
    /// Outer IPv6 source for GRE6.
    pub ip6_src: Option<SourceAddress>,
    /// Flow-table entries per worker.
    pub buckets: u32,
    /// Flow idle timeouts.
    pub timeouts: Timeouts,
}

impl Default for LbConf {
    fn default() -> Self {
        LbConf {
            ip4_src: None,
            ip6_src: None,
            buckets: DEFAULT_BUCKETS,
            timeouts: Timeouts {
                tcp: DEFAULT_TIMEOUT,
                udp: DEFAULT_TIMEOUT,
                other: DEFAULT_TIMEOUT,
            },
        }
    }
}

/// One `lb conf` line: the fields it sets (others keep their values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConfChange {
    /// `ip4-src-address`.
    pub ip4_src: Option<SourceAddress>,
    /// `ip6-src-address`.
    pub ip6_src: Option<SourceAddress>,
    /// `buckets` (or `buckets-log2`).
    pub buckets: Option<u32>,
    /// `timeout tcp` (or `timeout`).
    pub tcp_timeout: Option<u32>,
    /// `timeout udp` (or `timeout`).
    pub udp_timeout: Option<u32>,
    /// `timeout other` (or `timeout`).
    pub other_timeout: Option<u32>,
}

/// One server on an `lb as` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsSpec {
    /// The server's address.
    pub addr: IpAddr,
    /// `weight N` (0..=`MAX_WEIGHT`); `None`: `DEFAULT_WEIGHT` for a new (or revived) server,
    /// unchanged for an existing one.
    pub weight: Option<u32>,
}

/// Which `show` was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LbShow {
    /// `show lb`.
    Summary,
    /// `show lb vips [verbose]`.
    Vips {
        /// With servers and Maglev shares.
        verbose: bool,
    },
}

/// One line of the `lb` language, parsed (`cli::parse_line`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LbCommand {
    /// `lb conf ...`.
    Conf(ConfChange),
    /// `lb vip ...` (create or change).
    AddVip(VipSpec),
    /// `lb vip ... del`.
    DelVip(VipKey),
    /// `lb as <vip> <addr> ... [weight w] [flush]` (add, or change weights).
    AddAs {
        /// The VIP.
        vip: VipKey,
        /// The servers (at least one, each once).
        servers: Vec<AsSpec>,
        /// Evict the servers' established flows (gen bumped): with `weight 0`, VPP's hard
        /// drain; on a server re-added after `del`, its lingering flows go too.
        flush: bool,
    },
    /// `lb as <vip> <addr> ... del [flush]`.
    DelAs {
        /// The VIP.
        vip: VipKey,
        /// The servers (at least one, each once).
        servers: Vec<IpAddr>,
        /// Evict their flows now.
        flush: bool,
    },
    /// `lb flush vip <vip>`: evict every flow of the VIP (every slot's gen bumped).
    FlushVip(VipKey),
    /// `lb set interface nat4|nat6 in <port> [del]`.
    NatInterface {
        /// nat6 rather than nat4.
        nat6: bool,
        /// The inside port names (at least one).
        ports: Vec<String>,
        /// Remove rather than add.
        del: bool,
    },
    /// `show lb ...`: changes nothing.
    Show(LbShow),
    /// A health check's verdict (no `lb` line: runtime state, not configuration): `down`
    /// takes the servers out of the Maglev table like weight 0 while their configured weights
    /// are kept; `flush` also evicts their flows (gen bumped) when they go down. Setting the
    /// state a server already has changes nothing.
    SetHealth {
        /// The VIP.
        vip: VipKey,
        /// The servers (each once; each must be on the VIP and not removed).
        servers: Vec<IpAddr>,
        /// Marked down (true) or up (false).
        down: bool,
        /// When going down: evict their flows now (ignored when marking up).
        flush: bool,
    },
    /// The memory cap (`[lb] memory-limit`, no `lb` line: set by the config and its
    /// reloads). Growing changes are checked against it.
    SetMemoryBudget(MemoryBudget),
}

/// Where an AS slot is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsState {
    /// In the Maglev table (weight > 0, not marked down).
    Active,
    /// Weight 0 or marked down by a health check: out of the Maglev table, established flows
    /// stay.
    Draining,
    /// Deleted without flush: out of the table, established flows stay until collected.
    Removed,
    /// Not in use.
    Free,
}

/// One AS slot as the control plane keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsSlotInfo {
    /// The VIP it belongs to (meaningless when `Free`).
    pub vip: VipId,
    /// The server's address (meaningless when `Free`).
    pub addr: IpAddr,
    /// Its configured weight (0 when removed); the Maglev table uses `effective_weight()`.
    pub weight: u32,
    /// Generation: bumped on flush and when freed.
    pub gen: u32,
    /// Where it is in its life.
    pub state: AsState,
    /// For `Removed`: the first `collect` time that saw it removed.
    pub removed_since: Option<u64>,
    /// Marked down by a health check: out of the Maglev table whatever its weight.
    pub health_down: bool,
}

/// A VIP as the control plane keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vip {
    /// Its stable id.
    pub id: VipId,
    /// Its settings.
    pub spec: VipSpec,
    /// Every slot it holds (active, draining, removed), by server address.
    pub servers: BTreeMap<IpAddr, AsSlot>,
}

/// The whole LB configuration with its stable ids. Cheap enough to clone per change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbState {
    conf: LbConf,
    by_key: BTreeMap<VipKey, VipId>,
    vips: Vec<Option<Vip>>,
    slots: Vec<AsSlotInfo>,
    nat4_inside: BTreeSet<String>,
    nat6_inside: BTreeSet<String>,
    version: u64,
    budget: MemoryBudget,
    /// Sum of `maglev_bytes(new_len)` over the VIPs (kept as VIPs come and go).
    maglev_bytes: u64,
}

const FREE_SLOT: AsSlotInfo = AsSlotInfo {
    vip: VipId(0),
    addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    weight: 0,
    gen: 0,
    state: AsState::Free,
    removed_since: None,
    health_down: false,
};

impl LbState {
    /// An empty configuration (VPP's defaults).
    pub fn new() -> LbState {
        LbState::default()
    }

    /// `lb conf` as it is now.
    pub fn conf(&self) -> &LbConf {
        &self.conf
    }

    /// Bumped by every `apply` or `collect` that changed something.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every VIP, in key order.
    pub fn vips(&self) -> impl Iterator<Item = &Vip> + '_ {
        self.by_key.values().filter_map(|id| self.vip(*id))
    }

    /// A VIP by id.
    pub fn vip(&self, id: VipId) -> Option<&Vip> {
        self.vips.get(id.0 as usize).and_then(|v| v.as_ref())
    }

    /// A VIP by key.
    pub fn vip_by_key(&self, key: &VipKey) -> Option<&Vip> {
        self.by_key.get(key).and_then(|id| self.vip(*id))
    }

    /// An AS slot (a `Free` one when out of range).
    pub fn slot(&self, slot: AsSlot) -> &AsSlotInfo {
        self.slots.get(slot.0 as usize).unwrap_or(&FREE_SLOT)
    }

    /// One more than the highest VIP id ever used (counter arrays need this many).
    pub fn vip_capacity(&self) -> usize {
        self.vips.len()
    }

    /// One more than the highest AS slot ever used.
    pub fn slot_capacity(&self) -> usize {
        self.slots.len()
    }

    /// NAT inside ports (`lb set interface nat4|nat6 in`).
    pub fn nat_inside(&self, nat6: bool) -> &BTreeSet<String> {
        if nat6 {
            &self.nat6_inside
        } else {
            &self.nat4_inside
        }
    }

    /// Applies a batch of commands: the new state, or the first refused command and why (and
    /// `self` unchanged). `Show` commands change nothing. The version is bumped once when
    /// anything changed.
    pub fn apply(&self, cmds: &[LbCommand]) -> Result<LbState, LbError> {
        let mut s = self.clone();
        for (index, cmd) in cmds.iter().enumerate() {
            s.apply_one(cmd).map_err(|kind| LbError { index, kind })?;
        }
        s.check_final(cmds)?;
        s.check_budget(self).map_err(|kind| LbError {
            index: cmds
                .iter()
                .rposition(|c| matches!(c, LbCommand::AddVip(_) | LbCommand::Conf(_)))
                .unwrap_or(cmds.len().saturating_sub(1)),
            kind,
        })?;
        if s != *self {
            s.version = self.version + 1;
        }
        Ok(s)
    }

    /// Frees `Removed` slots whose flows are over: at least the longest flow timeout plus
    /// `COLLECT_GRACE` seconds after the first `collect` that saw them removed, and with no live
    /// flow left (`live_flows(slot)`, summed over the workers' flow tables; pass `|_| 0` when
    /// not known). A freed slot gets a new gen. `now` is any monotonic seconds clock. Call it
    /// every second or so; returns the new state when something changed.
    pub fn collect(&self, now: u64, live_flows: impl Fn(AsSlot) -> u64) -> Option<LbState> {
        let wait = self.conf.timeouts.max() as u64 + COLLECT_GRACE;
        let mut s = self.clone();
        for i in 0..s.slots.len() {
            let info = s.slots[i];
            if info.state != AsState::Removed {
                continue;
            }
            match info.removed_since {
                None => s.slots[i].removed_since = Some(now),
                Some(t) if now >= t.saturating_add(wait) && live_flows(AsSlot(i as u32)) == 0 => {
                    s.free_slot(AsSlot(i as u32));
                }
                Some(_) => {}
            }
        }
        (s != *self).then(|| {
            s.version = self.version + 1;
            s
        })
    }

    fn apply_one(&mut self, cmd: &LbCommand) -> Result<(), LbErrorKind> {
        let cmd = &canonical(cmd);
        match cmd {
            LbCommand::Conf(c) => {
                self.apply_conf(c);
                Ok(())
            }
            LbCommand::AddVip(spec) => self.add_vip(spec),
            LbCommand::DelVip(key) => self.del_vip(key),
            LbCommand::AddAs {
                vip,
                servers,
                flush,
            } => self.add_servers(vip, servers, *flush),
            LbCommand::DelAs {
                vip,
                servers,
                flush,
            } => self.del_servers(vip, servers, *flush),
            LbCommand::FlushVip(key) => {
                let id = self.find(key)?;
                let slots: Vec<AsSlot> = self.vip_ref(id).servers.values().copied().collect();
                for s in slots {
                    let info = &mut self.slots[s.0 as usize];
                    info.gen = info.gen.wrapping_add(1);
                }
                Ok(())
            }
            LbCommand::NatInterface { nat6, ports, del } => {
                let set = if *nat6 {
                    &mut self.nat6_inside
                } else {
                    &mut self.nat4_inside
                };
                for p in ports {
                    if *del {
                        if !set.remove(p) {
                            return Err(LbErrorKind::NoSuchNatPort(p.clone()));
                        }
                    } else {
                        set.insert(p.clone());
                    }
                }
                Ok(())
            }
            LbCommand::Show(_) => Ok(()),
            LbCommand::SetHealth {
                vip,
                servers,
                down,
                flush,
            } => self.set_health(vip, servers, *down, *flush),
            LbCommand::SetMemoryBudget(b) => {
                self.budget = *b;
                Ok(())
            }
        }
    }

    fn apply_conf(&mut self, c: &ConfChange) {
        let conf = &mut self.conf;
        if let Some(a) = c.ip4_src {
            conf.ip4_src = Some(a);
        }
        if let Some(a) = c.ip6_src {
            conf.ip6_src = Some(a);
        }
        if let Some(b) = c.buckets {
            conf.buckets = b;
        }
        if let Some(t) = c.tcp_timeout {
            conf.timeouts.tcp = t;
        }
        if let Some(t) = c.udp_timeout {
            conf.timeouts.udp = t;
        }
        if let Some(t) = c.other_timeout {
            conf.timeouts.other = t;
        }
    }

    fn find(&self, key: &VipKey) -> Result<VipId, LbErrorKind> {
        self.by_key
            .get(key)
            .copied()
            .ok_or(LbErrorKind::NoSuchVip(*key))
    }

    /// The VIP of an id known to exist.
    fn vip_ref(&self, id: VipId) -> &Vip {
        match self.vips.get(id.0 as usize) {
            Some(Some(v)) => v,
            _ => unreachable!("VIP ids in by_key always exist"),
        }
    }

    fn vip_mut(&mut self, id: VipId) -> &mut Vip {
        match self.vips.get_mut(id.0 as usize) {
            Some(Some(v)) => v,
            _ => unreachable!("VIP ids in by_key always exist"),
        }
    }

    fn add_vip(&mut self, spec: &VipSpec) -> Result<(), LbErrorKind> {
        check_vip_spec(spec)?;
        if let Some(&id) = self.by_key.get(&spec.key) {
            // A change in place: the servers must fit the (maybe new) encap; removed servers
            // that do not are freed (their lingering flows could not be encapsulated).
            let servers: Vec<(IpAddr, AsSlot)> = self
                .vip_ref(id)
                .servers
                .iter()
                .map(|(a, s)| (*a, *s))
                .collect();
            let mut stale = Vec::new();
            for (addr, slot) in servers {
                if let Err(e) = check_server_family(&spec.key, spec.encap, addr) {
                    if self.slots[slot.0 as usize].state != AsState::Removed {
                        return Err(e);
                    }
                    stale.push(slot);
                }
            }
            for slot in stale {
                self.free_slot(slot);
            }
            let old_len = self.vip_ref(id).spec.new_len;
            self.maglev_bytes =
                self.maglev_bytes - maglev_bytes(old_len) + maglev_bytes(spec.new_len);
            self.vip_mut(id).spec = *spec;
            return Ok(());
        }
        let id = match self.vips.iter().position(|v| v.is_none()) {
            Some(i) => i,
            None if self.vips.len() < MAX_VIPS => {
                self.vips.push(None);
                self.vips.len() - 1
            }
            None => {
                return Err(LbErrorKind::Full {
                    what: "VIPs",
                    max: MAX_VIPS,
                })
            }
        };
        let id = VipId(id as u32);
        self.vips[id.0 as usize] = Some(Vip {
            id,
            spec: *spec,
            servers: BTreeMap::new(),
        });
        self.by_key.insert(spec.key, id);
        self.maglev_bytes += maglev_bytes(spec.new_len);
        Ok(())
    }

    fn del_vip(&mut self, key: &VipKey) -> Result<(), LbErrorKind> {
        let id = self.find(key)?;
        let slots: Vec<AsSlot> = self.vip_ref(id).servers.values().copied().collect();
        for s in slots {
            self.free_slot(s);
        }
        self.maglev_bytes -= maglev_bytes(self.vip_ref(id).spec.new_len);
        self.vips[id.0 as usize] = None;
        self.by_key.remove(key);
        Ok(())
    }

    fn add_servers(
        &mut self,
        key: &VipKey,
        servers: &[AsSpec],
        flush: bool,
    ) -> Result<(), LbErrorKind> {
        let id = self.find(key)?;
        let encap = self.vip_ref(id).spec.encap;
        let mut seen = BTreeSet::new();
        let mut free_from = 0;
        for s in servers {
            if !seen.insert(s.addr) {
                return Err(LbErrorKind::DuplicateServer(s.addr));
            }
            if let Some(w) = s.weight.filter(|w| *w > MAX_WEIGHT) {
                return Err(LbErrorKind::BadWeight {
                    addr: s.addr,
                    weight: w,
                });
            }
            check_server_addr(s.addr)?;
            check_server_family(key, encap, s.addr)?;
            match self.vip_ref(id).servers.get(&s.addr).copied() {
                Some(slot) => {
                    let info = &mut self.slots[slot.0 as usize];
                    // Re-adding a removed server revives its slot (its flows never stopped).
                    let weight = match (s.weight, info.state) {
                        (Some(w), _) => w,
                        (None, AsState::Removed) => DEFAULT_WEIGHT,
                        (None, _) => info.weight,
                    };
                    if flush {
                        info.gen = info.gen.wrapping_add(1);
                    }
                    if info.state == AsState::Removed {
                        info.health_down = false; // a revived server starts up
                    }
                    info.weight = weight;
                    info.state = state_for(weight, info.health_down);
                    info.removed_since = None;
                }
                None => {
                    let slot = self.alloc_slot(&mut free_from)?;
                    let info = &mut self.slots[slot.0 as usize];
                    let weight = s.weight.unwrap_or(DEFAULT_WEIGHT);
                    *info = AsSlotInfo {
                        vip: id,
                        addr: s.addr,
                        weight,
                        gen: info.gen,
                        state: state_for(weight, false),
                        removed_since: None,
                        health_down: false,
                    };
                    self.vip_mut(id).servers.insert(s.addr, slot);
                }
            }
        }
        Ok(())
    }

    fn del_servers(
        &mut self,
        key: &VipKey,
        servers: &[IpAddr],
        flush: bool,
    ) -> Result<(), LbErrorKind> {
        let id = self.find(key)?;
        let mut seen = BTreeSet::new();
        for &addr in servers {
            if !seen.insert(addr) {
                return Err(LbErrorKind::DuplicateServer(addr));
            }
            let slot = self.vip_ref(id).servers.get(&addr).copied();
            let slot = match slot {
                Some(s) if flush || self.slots[s.0 as usize].state != AsState::Removed => s,
                _ => return Err(LbErrorKind::NoSuchServer { vip: *key, addr }),
            };
            if flush {
                self.free_slot(slot);
            } else {
                let info = &mut self.slots[slot.0 as usize];
                info.state = AsState::Removed;
                info.weight = 0;
                info.removed_since = None;
                info.health_down = false;
            }
        }
        Ok(())
    }

    /// The lowest free slot at or after `*from` (slots before it are known to be in use; the
    /// caller keeps `from` over one command so adding many servers stays linear).
    fn alloc_slot(&mut self, from: &mut usize) -> Result<AsSlot, LbErrorKind> {
        let start = (*from).min(self.slots.len());
        if let Some(i) = self.slots[start..]
            .iter()
            .position(|s| s.state == AsState::Free)
        {
            *from = start + i + 1;
            return Ok(AsSlot((start + i) as u32));
        }
        *from = self.slots.len() + 1;
        if self.slots.len() >= MAX_AS_SLOTS {
            return Err(LbErrorKind::Full {
                what: "AS slots (servers over all VIPs)",
                max: MAX_AS_SLOTS,
            });
        }
        self.slots.push(FREE_SLOT);
        Ok(AsSlot(self.slots.len() as u32 - 1))
    }

    /// Frees a slot: out of its VIP, gen bumped so no flow entry matches it again.
    fn free_slot(&mut self, slot: AsSlot) {
        let info = self.slots[slot.0 as usize];
        if let Some(Some(v)) = self.vips.get_mut(info.vip.0 as usize) {
            if v.servers.get(&info.addr) == Some(&slot) {
                v.servers.remove(&info.addr);
            }
        }
        self.slots[slot.0 as usize] = AsSlotInfo {
            gen: info.gen.wrapping_add(1),
            ..FREE_SLOT
        };
    }

    /// Nodeport VIPs: the node address is set, and no two keys (a VIP's own or a nodeport
    /// one) are the same.
    fn check_nodeports(&self, blame: &dyn Fn(&VipKey) -> usize) -> Result<(), LbError> {
        let mut taken: BTreeMap<VipKey, VipKey> = BTreeMap::new();
        for v in self.vips().filter(|v| v.spec.node_port.is_some()) {
            let key = v.spec.key;
            let err = |reason: String| LbError {
                index: blame(&key),
                kind: LbErrorKind::NodePort { vip: key, reason },
            };
            let Some(np) = nodeport_key(&v.spec, &self.conf) else {
                let k = if v.spec.key.prefix.is_ipv6() {
                    "ip6-src-address"
                } else {
                    "ip4-src-address"
                };
                return Err(err(format!(
                    "needs `lb conf {k} <the node's address>` first (nodeport VIPs take \
                     packets to it, and VPP's nodeport replies come from it)"
                )));
            };
            if let Some(other) = self.by_key.contains_key(&np).then_some(np) {
                return Err(err(format!(
                    "node port {} clashes with VIP {other}; choose another node_port",
                    np.port
                )));
            }
            if let Some(other) = taken.insert(np, key) {
                return Err(err(format!(
                    "node port {} on {} is taken by VIP {other}; choose another node_port",
                    np.port, np.prefix
                )));
            }
        }
        Ok(())
    }

    /// Checks that need the whole batch applied: GRE sources and L3DSR DSCP clashes.
    fn check_final(&self, cmds: &[LbCommand]) -> Result<(), LbError> {
        // Blame the last command that touched the VIP (or the last one of the batch).
        let blame = |key: &VipKey| {
            cmds.iter()
                .rposition(|c| match c {
                    LbCommand::AddVip(s) => s.key == *key,
                    LbCommand::AddAs { vip, .. } => vip == key,
                    _ => false,
                })
                .unwrap_or(cmds.len().saturating_sub(1))
        };
        let mut dsr: BTreeMap<u8, Vec<&Vip>> = BTreeMap::new();
        for v in self.vips() {
            let key = v.spec.key;
            let need = match v.spec.encap {
                Encap::Gre4 if self.conf.ip4_src.is_none() => Some(("gre4", "ip4-src-address")),
                Encap::Gre6 if self.conf.ip6_src.is_none() => Some(("gre6", "ip6-src-address")),
                Encap::L3dsr { dscp } => {
                    dsr.entry(dscp).or_default().push(v);
                    None
                }
                _ => None,
            };
            if let Some((encap, k)) = need {
                return Err(LbError {
                    index: blame(&key),
                    kind: LbErrorKind::NoSource {
                        vip: key,
                        encap,
                        key: k,
                    },
                });
            }
        }
        self.check_nodeports(&blame)?;
        for (dscp, vs) in dsr {
            for (i, a) in vs.iter().enumerate() {
                for b in &vs[i + 1..] {
                    if a.spec.key.prefix.addr() == b.spec.key.prefix.addr() {
                        continue;
                    }
                    let live = |v: &Vip, addr: &IpAddr| {
                        v.servers
                            .get(addr)
                            .is_some_and(|s| self.slot(*s).state != AsState::Removed)
                    };
                    if let Some(server) =
                        a.servers.keys().find(|addr| live(a, addr) && live(b, addr))
                    {
                        return Err(LbError {
                            index: blame(&b.spec.key).max(blame(&a.spec.key)),
                            kind: LbErrorKind::DscpClash {
                                vip: b.spec.key,
                                other: a.spec.key,
                                dscp,
                                server: *server,
                            },
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

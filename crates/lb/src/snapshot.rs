//! `LbTables`: the immutable, read-only snapshot of the LB configuration that workers read per
//! packet (published through crates/live, swapped atomically between vectors). It owns the VIP
//! lookup index, the Maglev tables and the AS slot table. Built on the control side only; its
//! per-packet reads never allocate, lock, hash with a key or fail on any input.
//!
//! VIP lookup (`vip_for`): one open-addressing table keyed on (masked destination, prefix
//! length, family), probed once per distinct prefix length of the packet's family, longest
//! first (so /32 and /128 VIPs cost one probe); within a prefix, the per-port precedence of the
//! `model` docs: exact protocol + port (binary search in the prefix's sorted port list), then
//! protocol + all ports, then any protocol + all ports. A prefix without a matching key falls
//! through to the next shorter one. The table is at most 1/4 full and grown until no probe
//! sequence is longer than `MAX_PROBE`, so no destination address can make a lookup slow.

use crate::maglev::{addr_bytes, MaglevAllocError, MaglevServer, MaglevTable};
use crate::model::{
    nodeport_key, AsSlot, AsState, Encap, LbConf, LbState, VipId, VipKey, VipProtocol,
};
use crate::tuple::FiveTuple;
use std::net::IpAddr;
use std::sync::Arc;

const NONE: u32 = u32::MAX;
const EMPTY_LEN: u8 = u8::MAX;
/// The longest probe sequence the VIP index allows (it grows until this holds).
pub const MAX_PROBE: usize = 8;

/// What the data path needs of a VIP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VipEntry {
    /// Its id.
    pub id: VipId,
    /// Prefix, protocol, port.
    pub key: VipKey,
    /// How packets reach its servers.
    pub encap: Encap,
    /// Hash on addresses only.
    pub src_ip_sticky: bool,
    /// IPv6 VIP.
    pub ip6: bool,
    /// The prefix address, IPv4-mapped for IPv4 (as `FiveTuple` keeps addresses).
    pub addr: [u8; 16],
    /// Maglev table size in use (a prime), also when the table is empty.
    pub maglev_size: u32,
    /// `new_len` asked for.
    pub new_len: u32,
    /// Servers in the Maglev table (weight > 0).
    pub active_servers: u32,
    /// Maglev size < 100 x active servers: balance and disruption get worse (shown as a warning).
    pub maglev_too_small: bool,
    /// Every slot of the VIP (active, draining, removed), by server address.
    pub slots: Vec<AsSlot>,
    /// A nodeport VIP's second key: the node's address, the VIP's protocol, the node port.
    pub nodeport: Option<VipKey>,
}

/// What the data path needs of an AS slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsEntry {
    /// The server's address.
    pub addr: IpAddr,
    /// The same, IPv4-mapped for IPv4.
    pub addr16: [u8; 16],
    /// The VIP the slot belongs to.
    pub vip: VipId,
    /// Generation (flow entries hold it).
    pub gen: u32,
    /// Effective weight, what the Maglev table uses (0 when draining, removed or marked down
    /// by a health check).
    pub weight: u32,
    /// The configured weight (kept while marked down; 0 when removed).
    pub configured_weight: u32,
    /// Marked down by a health check: out of the Maglev table whatever its weight.
    pub health_down: bool,
    /// Where the slot is in its life.
    pub state: AsState,
}

const FREE_ENTRY: AsEntry = AsEntry {
    addr: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    addr16: [0; 16],
    vip: VipId(0),
    gen: 0,
    weight: 0,
    configured_weight: 0,
    health_down: false,
    state: AsState::Free,
};

/// One prefix of the VIP index with its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PrefixSlot {
    addr: [u8; 16],
    /// Prefix length over the 16-byte form (IPv4: 96 + len); `EMPTY_LEN` for a free slot.
    len: u8,
    ip6: bool,
    /// Some VIP's own prefix (not only a nodeport VIP's node address): a packet to it that no
    /// key matches is dropped as no-VIP-for-port; to a node address, it passes.
    owned: bool,
    any_all: u32,
    tcp_all: u32,
    udp_all: u32,
    ports_start: u32,
    ports_len: u32,
}

const EMPTY_SLOT: PrefixSlot = PrefixSlot {
    addr: [0; 16],
    len: EMPTY_LEN,
    ip6: false,
    owned: false,
    any_all: NONE,
    tcp_all: NONE,
    udp_all: NONE,
    ports_start: 0,
    ports_len: 0,
};

/// A per-port key: (protocol, port) -> VIP id, sorted per prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct PortVip {
    protocol: u8,
    port: u16,
    vip: u32,
}

/// The snapshot. Cheap to share (`Arc`); Maglev tables are shared with the previous snapshot
/// when a VIP's servers, effective weights (health marks included) and size did not change.
#[derive(Clone, Debug)]
pub struct LbTables {
    version: u64,
    conf: LbConf,
    vips: Vec<Option<VipEntry>>,
    maglev: Vec<Arc<MaglevTable>>,
    /// The server list (effective weights) each Maglev table was built from (to reuse it).
    maglev_input: Vec<(u32, Vec<MaglevServer>)>,
    slots: Vec<AsEntry>,
    index: Box<[PrefixSlot]>,
    index_mask: usize,
    /// The longest probe sequence of any key in `index`: a lookup gives up after it.
    probe_limit: usize,
    lens4: Vec<u8>,
    lens6: Vec<u8>,
    ports: Vec<PortVip>,
}

impl LbTables {
    /// Builds the snapshot of `state`, reusing `previous`'s Maglev tables where a VIP's servers,
    /// effective weights and `new_len` are unchanged. A server marked down by a health check
    /// is left out of the Maglev input as a weight-0 one is, so the table is the one a node
    /// without that server builds.
    pub fn build(state: &LbState, previous: Option<&LbTables>) -> LbTables {
        match Self::try_build(state, previous) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// `build`, with a Maglev table the allocator refuses as an error (the control plane
    /// refuses the change instead of aborting).
    pub fn try_build(
        state: &LbState,
        previous: Option<&LbTables>,
    ) -> Result<LbTables, MaglevAllocError> {
        let nv = state.vip_capacity();
        let empty = Arc::new(MaglevTable::try_build(2, &[])?);
        let mut vips: Vec<Option<VipEntry>> = vec![None; nv];
        let mut maglev: Vec<Arc<MaglevTable>> = vec![empty; nv];
        let mut maglev_input: Vec<(u32, Vec<MaglevServer>)> = vec![(0, Vec::new()); nv];
        for v in state.vips() {
            let i = v.id.0 as usize;
            let mut input: Vec<MaglevServer> = v
                .servers
                .iter()
                .filter_map(|(addr, slot)| {
                    let weight = state.slot(*slot).effective_weight();
                    (weight > 0).then_some(MaglevServer {
                        addr: *addr,
                        weight,
                        slot: *slot,
                    })
                })
                .collect();
            input.sort_by_key(|s| addr_bytes(s.addr));
            let reused = previous.and_then(|p| {
                let (len, prev) = p.maglev_input.get(i)?;
                (*len == v.spec.new_len && *prev == input).then(|| p.maglev[i].clone())
            });
            let table = match reused {
                Some(t) => t,
                None => Arc::new(MaglevTable::try_build(v.spec.new_len, &input)?),
            };
            let key = v.spec.key;
            vips[i] = Some(VipEntry {
                id: v.id,
                key,
                encap: v.spec.encap,
                src_ip_sticky: v.spec.src_ip_sticky,
                ip6: key.prefix.is_ipv6(),
                addr: addr_bytes(key.prefix.addr()),
                maglev_size: table.size(),
                new_len: v.spec.new_len,
                active_servers: table.servers(),
                maglev_too_small: table.too_small(),
                slots: v.servers.values().copied().collect(),
                nodeport: nodeport_key(&v.spec, state.conf()),
            });
            maglev[i] = table;
            maglev_input[i] = (v.spec.new_len, input);
        }
        let slots = (0..state.slot_capacity())
            .map(|i| {
                let s = state.slot(AsSlot(i as u32));
                if s.state == AsState::Free {
                    AsEntry {
                        gen: s.gen,
                        ..FREE_ENTRY
                    }
                } else {
                    AsEntry {
                        addr: s.addr,
                        addr16: addr_bytes(s.addr),
                        vip: s.vip,
                        gen: s.gen,
                        weight: s.effective_weight(),
                        configured_weight: s.weight,
                        health_down: s.health_down,
                        state: s.state,
                    }
                }
            })
            .collect();
        let mut t = LbTables {
            version: state.version(),
            conf: *state.conf(),
            vips,
            maglev,
            maglev_input,
            slots,
            index: Box::new([EMPTY_SLOT]),
            index_mask: 0,
            probe_limit: 0,
            lens4: Vec::new(),
            lens6: Vec::new(),
            ports: Vec::new(),
        };
        t.build_index();
        Ok(t)
    }

    fn build_index(&mut self) {
        // Group the VIP keys by prefix.
        let mut prefixes: Vec<PrefixSlot> = Vec::new();
        let mut by_prefix: std::collections::BTreeMap<(bool, [u8; 16], u8), usize> =
            Default::default();
        let mut ports: Vec<(usize, PortVip)> = Vec::new();
        // Every VIP's key, and a nodeport VIP's node key (the model keeps them all distinct).
        let keys = self.vips.iter().flatten().flat_map(|v| {
            std::iter::once((v.key, v.id, true)).chain(v.nodeport.map(|k| (k, v.id, false)))
        });
        for (key, id, owned) in keys {
            let p = key.prefix;
            let ip6 = p.is_ipv6();
            let addr = addr_bytes(p.addr());
            let len = if ip6 {
                p.prefix_len()
            } else {
                96 + p.prefix_len()
            };
            let pi = *by_prefix.entry((ip6, addr, len)).or_insert_with(|| {
                prefixes.push(PrefixSlot {
                    addr,
                    len,
                    ip6,
                    ..EMPTY_SLOT
                });
                prefixes.len() - 1
            });
            let ps = &mut prefixes[pi];
            ps.owned |= owned;
            match (key.protocol, key.port) {
                (VipProtocol::Any, _) => ps.any_all = id.0,
                (VipProtocol::Tcp, 0) => ps.tcp_all = id.0,
                (VipProtocol::Udp, 0) => ps.udp_all = id.0,
                (pr, port) => ports.push((
                    pi,
                    PortVip {
                        protocol: pr.number().unwrap_or(0),
                        port,
                        vip: id.0,
                    },
                )),
            }
        }
        ports.sort();
        self.ports = ports.iter().map(|(_, p)| *p).collect();
        let mut i = 0;
        while i < ports.len() {
            let pi = ports[i].0;
            let n = ports[i..].iter().take_while(|(p, _)| *p == pi).count();
            prefixes[pi].ports_start = i as u32;
            prefixes[pi].ports_len = n as u32;
            i += n;
        }
        let mut lens4: Vec<u8> = prefixes.iter().filter(|p| !p.ip6).map(|p| p.len).collect();
        let mut lens6: Vec<u8> = prefixes.iter().filter(|p| p.ip6).map(|p| p.len).collect();
        for l in [&mut lens4, &mut lens6] {
            l.sort_unstable_by(|a, b| b.cmp(a));
            l.dedup();
        }
        self.lens4 = lens4;
        self.lens6 = lens6;
        // At most 1/4 full; grow until every probe sequence is short.
        let mut cap = (prefixes.len() * 4).next_power_of_two().max(8);
        loop {
            let mut table = vec![EMPTY_SLOT; cap].into_boxed_slice();
            let mask = cap - 1;
            let mut longest = 0;
            for p in &prefixes {
                let mut i = index_hash(&p.addr, p.len, p.ip6) as usize & mask;
                let mut n = 1;
                while table[i].len != EMPTY_LEN {
                    i = (i + 1) & mask;
                    n += 1;
                }
                table[i] = *p;
                longest = longest.max(n);
            }
            if longest <= MAX_PROBE || cap >= 1 << 24 {
                self.index = table;
                self.index_mask = mask;
                self.probe_limit = longest;
                return;
            }
            cap *= 2;
        }
    }

    /// The VIP a packet is for (longest prefix, then per-port precedence), or `None`.
    #[inline]
    pub fn vip_for(&self, t: &FiveTuple) -> Option<VipId> {
        let lens = if t.ip6 { &self.lens6 } else { &self.lens4 };
        for &len in lens {
            if let Some(p) = self.find_prefix(&t.dst, len, t.ip6) {
                let id = self.match_port(p, t.protocol, t.dst_port);
                if id != NONE {
                    return Some(VipId(id));
                }
            }
        }
        None
    }

    /// True when the packet's destination is inside some VIP prefix, whatever its protocol and
    /// port (a packet for which this is true but `vip_for` is `None` hit a VIP address on a port
    /// with no VIP). A nodeport VIP's node address is not a VIP address: its other ports are
    /// the node's own.
    pub fn is_vip_address(&self, t: &FiveTuple) -> bool {
        let lens = if t.ip6 { &self.lens6 } else { &self.lens4 };
        lens.iter().any(|&len| {
            self.find_prefix(&t.dst, len, t.ip6)
                .is_some_and(|p| p.owned)
        })
    }

    #[inline(always)]
    fn find_prefix(&self, dst: &[u8; 16], len: u8, ip6: bool) -> Option<&PrefixSlot> {
        let a = mask16(dst, len);
        let mut i = index_hash(&a, len, ip6) as usize & self.index_mask;
        for _ in 0..self.probe_limit {
            let s = self.index.get(i)?;
            if s.len == EMPTY_LEN {
                return None;
            }
            if s.len == len && s.ip6 == ip6 && s.addr == a {
                return Some(s);
            }
            i = (i + 1) & self.index_mask;
        }
        None
    }

    #[inline(always)]
    fn match_port(&self, p: &PrefixSlot, protocol: u8, port: u16) -> u32 {
        let all = match protocol {
            6 => p.tcp_all,
            17 => p.udp_all,
            _ => return p.any_all,
        };
        if p.ports_len > 0 {
            let s = p.ports_start as usize;
            if let Some(list) = self.ports.get(s..s + p.ports_len as usize) {
                if let Ok(i) =
                    list.binary_search_by(|x| (x.protocol, x.port).cmp(&(protocol, port)))
                {
                    return list[i].vip;
                }
            }
        }
        if all != NONE {
            all
        } else {
            p.any_all
        }
    }

    /// A VIP by id (`None` for an id this snapshot does not have).
    #[inline(always)]
    pub fn vip(&self, id: VipId) -> Option<&VipEntry> {
        self.vips.get(id.0 as usize).and_then(|v| v.as_ref())
    }

    /// The server for a new flow of VIP `id` with `stable_hash` `hash`; `None` when the VIP has
    /// no server with weight > 0 (or no such VIP).
    #[inline(always)]
    pub fn choose(&self, id: VipId, hash: u32) -> Option<AsSlot> {
        self.maglev.get(id.0 as usize)?.choose(hash)
    }

    /// An AS slot (a `Free` entry for a slot this snapshot does not have).
    #[inline(always)]
    pub fn as_entry(&self, slot: AsSlot) -> &AsEntry {
        self.slots.get(slot.0 as usize).unwrap_or(&FREE_ENTRY)
    }

    /// True while a flow entry holding (slot, gen) may keep sending to it: same gen, not freed
    /// (active, draining and removed servers keep their established flows).
    #[inline(always)]
    pub fn flow_still_valid(&self, slot: AsSlot, gen: u32) -> bool {
        let e = self.as_entry(slot);
        e.gen == gen && e.state != AsState::Free
    }

    /// True when a TCP SYN may reuse a flow entry holding (slot, gen): the server is active
    /// with weight > 0 and not flushed. Otherwise the SYN chooses again.
    #[inline(always)]
    pub fn usable_for_syn(&self, slot: AsSlot, gen: u32) -> bool {
        let e = self.as_entry(slot);
        e.gen == gen && e.state == AsState::Active && e.weight > 0
    }

    /// The `LbState` version this snapshot was built from.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// `lb conf` (sources, buckets, timeouts).
    pub fn conf(&self) -> &LbConf {
        &self.conf
    }

    /// Length for per-VIP counter arrays (highest VIP id + 1, <= `MAX_VIPS`).
    pub fn vip_capacity(&self) -> usize {
        self.vips.len()
    }

    /// Length for per-AS-slot counter arrays (highest slot + 1, <= `MAX_AS_SLOTS`).
    pub fn slot_capacity(&self) -> usize {
        self.slots.len()
    }

    /// Every VIP, by id.
    pub fn vips(&self) -> impl Iterator<Item = &VipEntry> + '_ {
        self.vips.iter().flatten()
    }

    /// A VIP's Maglev table (for `show`, `which` and tests).
    pub fn maglev(&self, id: VipId) -> Option<&MaglevTable> {
        self.vip(id)?;
        self.maglev.get(id.0 as usize).map(|t| &**t)
    }

    /// True when VIP `id`'s Maglev table is the very same allocation in `other` (reused).
    pub fn shares_maglev_with(&self, other: &LbTables, id: VipId) -> bool {
        match (
            self.maglev.get(id.0 as usize),
            other.maglev.get(id.0 as usize),
        ) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// `a` with the bits beyond `len` (of 128) cleared.
#[inline(always)]
fn mask16(a: &[u8; 16], len: u8) -> [u8; 16] {
    if len >= 128 {
        return *a;
    }
    let m = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    };
    (u128::from_be_bytes(*a) & m).to_be_bytes()
}

/// The VIP index's hash (unkeyed: the index holds only configured prefixes and its probe
/// sequences are bounded at build time, so a chosen address cannot make a lookup slow).
#[inline(always)]
fn index_hash(a: &[u8; 16], len: u8, ip6: bool) -> u64 {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&a[..8]);
    hi.copy_from_slice(&a[8..]);
    let x = u64::from_le_bytes(lo).rotate_left(23)
        ^ u64::from_le_bytes(hi)
        ^ ((len as u64) << 1 | ip6 as u64) << 56;
    let h = (x as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h as u64) ^ (h >> 64) as u64
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;

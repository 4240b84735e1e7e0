//! Adjacencies (how to reach a neighbour: port, MACs, MTU), gateways (a next hop named by port
//! and address, resolved in each worker's own neighbour table) and next-hop entries (one
//! adjacency or gateway, an ECMP group, a drop, a local delivery, or a graph node that takes
//! the packet, as a VPP DPO does) that FIB results index.
//! Built by the control side and published as an immutable snapshot (`live`); lookup and rewrite
//! nodes only read it. An id is never reused for something else until every worker moved past
//! the snapshot that stopped using it.

use packet::headers::{eth, put16, Mac};
use packet::meta::BufferMeta;

/// How to send to one neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adjacency {
    /// Transmit port.
    pub port: u16,
    /// Largest IP packet the port sends.
    pub mtu: u16,
    /// Ethernet header to write: destination MAC, source MAC (the ethertype is set per family).
    pub macs: [u8; 12],
}

impl Adjacency {
    /// An adjacency to `dst` through `port` whose own MAC is `src`.
    pub fn new(port: u16, mtu: u16, dst: Mac, src: Mac) -> Adjacency {
        let mut macs = [0u8; 12];
        macs[..6].copy_from_slice(&dst);
        macs[6..].copy_from_slice(&src);
        Adjacency { port, mtu, macs }
    }
}

/// Write `adj`'s Ethernet header (with `ethertype`) right before the L3 header at `l3` of the
/// frame whose bytes before `l3` are `l2`, make it the frame's start, and set the transmit
/// port. Tags or other bytes before the old Ethernet header are cut. `l3` must be at least
/// `eth::HEADER_LEN`.
#[inline(always)]
pub fn push_ethernet(
    meta: &mut BufferMeta,
    l2: &mut [u8],
    l3: usize,
    adj: &Adjacency,
    ethertype: u16,
) {
    let e = &mut l2[l3 - eth::HEADER_LEN..];
    e[..12].copy_from_slice(&adj.macs);
    put16(e, eth::TYPE, ethertype);
    let shift = (l3 - eth::HEADER_LEN) as u16;
    meta.data_offset += shift;
    meta.length -= shift;
    meta.l3_offset = eth::HEADER_LEN as u16;
    meta.l4_offset = meta.l4_offset.saturating_sub(shift);
    meta.tx_port = adj.port;
}

/// What a FIB next-hop id resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// No route (id 0).
    NoRoute,
    /// One adjacency: an index into this table's adjacencies, or (bit 31 set) a neighbour
    /// table entry (see `neighbour::is_neighbour_adjacency`).
    Adjacency(u32),
    /// An ECMP group: `count` adjacencies starting at `first` in the member list.
    Ecmp {
        /// First member index.
        first: u32,
        /// Member count (>= 2).
        count: u32,
    },
    /// Drop (a blackhole route).
    Drop,
    /// An address of vecplane itself.
    Local,
    /// A gateway: an index into this table's gateways, resolved by the worker's neighbour
    /// table (ARP / ND) like a connected destination, but for the gateway's address.
    Gateway(u32),
    /// A connected prefix on `port`: the destination itself is the neighbour, resolved by the
    /// worker's neighbour table (ARP / ND) when the packet arrives.
    Glean {
        /// The port the prefix is on.
        port: u16,
        /// Host bits of the prefix (32 - length for IPv4): an IPv4 destination whose host
        /// bits are all ones or all zeros (prefixes up to /30) is the subnet's broadcast or
        /// network address, dropped, never resolved.
        host_bits: u8,
    },
    /// Hand the packet to a graph node: target `slot` of the lookup node's list of target
    /// nodes (`IpLookup::with_targets`), with `tag` in `next_scratch` (what the node makes of
    /// it is its own: the load balancer's VIP prefixes use it to tell routed packets apart).
    Node {
        /// Index in the lookup node's target list.
        slot: u16,
        /// Written to the packet's `next_scratch`.
        tag: u32,
    },
}

/// Bit 30 of an ECMP member: the member is a gateway index, not an adjacency index.
pub const GATEWAY_MEMBER: u32 = 0x4000_0000;

/// Most gateways one family's table holds (each worker keeps a resolution cache this long).
pub const MAX_GATEWAYS: usize = 4096;

/// A next hop named by port and address; each worker resolves it in its own neighbour table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gateway {
    /// The port it is reached through (its prefix holds `addr`).
    pub port: u16,
    /// Its address (an IPv4 address as the low 32 bits).
    pub addr: u128,
    /// A static neighbour's adjacency (index into this table's adjacencies) when the address
    /// is one: used as it is, nothing is resolved.
    pub adjacency: Option<u32>,
    /// Changes whenever this index changes (another gateway, another port), so workers'
    /// caches notice.
    pub generation: u32,
}

/// Next hops and adjacencies of one family, indexed by FIB next-hop id.
#[derive(Clone, Debug)]
pub struct NextHopTable {
    entries: Vec<NextHop>,
    members: Vec<u32>,
    adjacencies: Vec<Adjacency>,
    gateways: Vec<Gateway>,
}

impl Default for NextHopTable {
    fn default() -> Self {
        NextHopTable {
            entries: vec![NextHop::NoRoute],
            members: Vec::new(),
            adjacencies: Vec::new(),
            gateways: Vec::new(),
        }
    }
}

impl NextHopTable {
    /// An empty table (id 0 = no route).
    pub fn new() -> NextHopTable {
        NextHopTable::default()
    }

    /// Add an adjacency; returns its index.
    pub fn add_adjacency(&mut self, adj: Adjacency) -> u32 {
        self.adjacencies.push(adj);
        (self.adjacencies.len() - 1) as u32
    }

    /// Add a gateway; returns its index (None when `MAX_GATEWAYS` are there).
    pub fn add_gateway(&mut self, gateway: Gateway) -> Option<u32> {
        if self.gateways.len() >= MAX_GATEWAYS {
            return None;
        }
        self.gateways.push(gateway);
        Some((self.gateways.len() - 1) as u32)
    }

    /// Replace gateway `index` (a reused index must carry a new generation).
    pub fn set_gateway(&mut self, index: u32, gateway: Gateway) {
        if let Some(g) = self.gateways.get_mut(index as usize) {
            *g = gateway;
        }
    }

    /// Replace adjacency `index` (e.g. a static neighbour's new MAC).
    pub fn set_adjacency(&mut self, index: u32, adj: Adjacency) {
        if let Some(a) = self.adjacencies.get_mut(index as usize) {
            *a = adj;
        }
    }

    /// Replace next-hop entry `id` (a free id being reused, or one being cleared).
    pub fn set_entry(&mut self, id: u32, entry: NextHop) {
        if let Some(e) = self.entries.get_mut(id as usize) {
            *e = entry;
        }
    }

    /// Store ECMP members (`GATEWAY_MEMBER` marks gateways) at the end of the member list or,
    /// when `at` is given, over members `at..at + members.len()`; returns the first index.
    pub fn put_members(&mut self, at: Option<u32>, members: &[u32]) -> u32 {
        match at {
            Some(first) => {
                let first_us = first as usize;
                if let Some(slots) = self.members.get_mut(first_us..first_us + members.len()) {
                    slots.copy_from_slice(members);
                }
                first
            }
            None => {
                let first = self.members.len() as u32;
                self.members.extend_from_slice(members);
                first
            }
        }
    }

    /// Gateway by index.
    #[inline(always)]
    pub fn gateway(&self, index: u32) -> Option<&Gateway> {
        self.gateways.get(index as usize)
    }

    /// Number of gateways (including unused indices).
    pub fn gateway_slots(&self) -> usize {
        self.gateways.len()
    }

    /// Number of adjacency indices.
    pub fn adjacency_slots(&self) -> usize {
        self.adjacencies.len()
    }

    /// Add a next-hop entry; returns its id (for the FIB). ECMP groups pass their members.
    pub fn add_entry(&mut self, entry: NextHop) -> u32 {
        self.entries.push(entry);
        (self.entries.len() - 1) as u32
    }

    /// Add an ECMP group of adjacencies (or a single adjacency when there is one); returns its id.
    pub fn add_group(&mut self, adjacencies: &[u32]) -> u32 {
        if let [one] = adjacencies {
            return self.add_entry(NextHop::Adjacency(*one));
        }
        let first = self.members.len() as u32;
        self.members.extend_from_slice(adjacencies);
        self.add_entry(NextHop::Ecmp {
            first,
            count: adjacencies.len() as u32,
        })
    }

    /// Entry of a next-hop id (unknown ids are `NoRoute`).
    #[inline(always)]
    pub fn entry(&self, id: u32) -> NextHop {
        self.entries
            .get(id as usize)
            .copied()
            .unwrap_or(NextHop::NoRoute)
    }

    /// The adjacency an ECMP group picks for `hash`.
    #[inline(always)]
    pub fn ecmp_member(&self, first: u32, count: u32, hash: u32) -> u32 {
        let k = ((hash as u64 * count as u64) >> 32) as u32;
        self.members
            .get((first + k) as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// Adjacency by index.
    #[inline(always)]
    pub fn adjacency(&self, index: u32) -> Option<&Adjacency> {
        self.adjacencies.get(index as usize)
    }

    /// Number of next-hop ids (including 0).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when only "no route" exists.
    pub fn is_empty(&self) -> bool {
        self.entries.len() <= 1
    }
}

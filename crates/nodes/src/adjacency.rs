//! Adjacencies (how to reach a neighbour: port, MACs, MTU) and next-hop entries (one adjacency,
//! an ECMP group, a drop or a local delivery) that FIB results index. Built by the control side,
//! shared read-only by lookup and rewrite nodes; never changed while a worker uses it.

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
}

/// Next hops and adjacencies of one family, indexed by FIB next-hop id.
#[derive(Clone, Debug)]
pub struct NextHopTable {
    entries: Vec<NextHop>,
    members: Vec<u32>,
    adjacencies: Vec<Adjacency>,
}

impl Default for NextHopTable {
    fn default() -> Self {
        NextHopTable {
            entries: vec![NextHop::NoRoute],
            members: Vec::new(),
            adjacencies: Vec::new(),
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

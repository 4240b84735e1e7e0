//! `ip4-lookup` and `ip6-lookup`: one node generic over the address family. It reads each
//! packet's destination, resolves a vector of them in one batched FIB lookup, and turns the
//! next-hop entry into an adjacency (ECMP by flow hash) or a counted drop. A connected prefix
//! (`NextHop::Glean`) is resolved in the worker's neighbour table; a miss goes to `ip4-arp` /
//! `ip6-discover`; so is a gateway (`NextHop::Gateway`, or an ECMP member marked
//! `GATEWAY_MEMBER`), through a per-worker cache of pinned neighbour entries. A prefix whose
//! entry names a graph node (`NextHop::Node`, e.g. a VIP's, for `lb`) hands its packets to
//! that node, one of the small list of targets the node was built with. It reads the live
//! FIB and next-hop table (see `live`) and never writes packet bytes.

use crate::adjacency::{NextHop, NextHopTable, GATEWAY_MEMBER, MAX_GATEWAYS};
use crate::flow_hash::{ip4_flow_hash, ip6_flow_hash};
use crate::names;
use crate::neighbour::{self, NeighbourHandle, Neighbours};
use fib::{Ip4Fib, Ip6Fib};
use graph::{Dispatch, Node, NodeContext};
use live::Reader;
use packet::headers::{be128, be32, ip4, ip6};
use packet::meta::FLAG_FLOW_HASH;
use packet::{BufferPool, VECTOR_SIZE};
use std::sync::Arc;

/// What the lookup node needs to know about an address family.
pub trait LookupFamily: Send + Sync + 'static {
    /// An address as an integer.
    type Addr: Copy + Default + Send;
    /// The family's FIB.
    type Fib: Send + Sync;
    /// How a worker holds it: the IPv4 table is shared and changed in place (`Arc`); an IPv6
    /// change publishes a new table (`live::Reader`).
    type FibSource: Send;
    /// The table of `source` now.
    fn fib(source: &Self::FibSource) -> &Self::Fib;
    /// Pin a neighbour entry for gateway `addr` on `port` (see `Neighbours::pin4`).
    fn pin(n: &mut Neighbours, port: u16, addr: u128) -> Option<u32>;
    /// Undo `pin` for the entry of adjacency id `id`.
    fn unpin(n: &mut Neighbours, id: u32);
    /// The node's name.
    const NODE: &'static str;
    /// The rewrite node it feeds.
    const REWRITE: &'static str;
    /// The node that resolves unknown neighbours (`ip4-arp` / `ip6-discover`).
    const RESOLVE: &'static str;
    /// Whether `addr` is the broadcast or network address of a connected prefix with
    /// `host_bits` host bits (IPv4 prefixes up to /30; never for IPv6).
    fn is_subnet_broadcast(addr: Self::Addr, host_bits: u8) -> bool;
    /// The usable neighbour adjacency of `addr` on `port`, if its MAC is known.
    fn neighbour(n: &mut Neighbours, port: u16, addr: Self::Addr, now: u64) -> Option<u32>;
    /// The destination address of the L3 header at `l3` in `packet` (None when too short).
    fn destination(packet: &[u8], l3: usize) -> Option<Self::Addr>;
    /// Batched longest-prefix match.
    fn lookup_batch(fib: &Self::Fib, addrs: &[Self::Addr], out: &mut [u32]);
    /// Flow hash for ECMP.
    fn flow_hash(l3: &[u8]) -> u32;
    /// One line about the packet for traces.
    fn describe(pool: &BufferPool, buffer: u32) -> String;
}

/// IPv4.
pub struct Ip4;

impl LookupFamily for Ip4 {
    type Addr = u32;
    type Fib = Ip4Fib;
    type FibSource = Arc<Ip4Fib>;
    #[inline(always)]
    fn fib(source: &Arc<Ip4Fib>) -> &Ip4Fib {
        source
    }
    fn pin(n: &mut Neighbours, port: u16, addr: u128) -> Option<u32> {
        n.pin4(port, std::net::Ipv4Addr::from(addr as u32))
    }
    fn unpin(n: &mut Neighbours, id: u32) {
        n.unpin4(id);
    }
    const NODE: &'static str = names::IP4_LOOKUP;
    const REWRITE: &'static str = names::IP4_REWRITE;
    const RESOLVE: &'static str = neighbour::IP4_ARP;
    #[inline(always)]
    fn is_subnet_broadcast(addr: u32, host_bits: u8) -> bool {
        if !(2..32).contains(&host_bits) {
            return false;
        }
        let host = addr & ((1u32 << host_bits) - 1);
        host == 0 || host == (1u32 << host_bits) - 1
    }
    #[inline(always)]
    fn neighbour(n: &mut Neighbours, port: u16, addr: u32, now: u64) -> Option<u32> {
        n.lookup4(port, addr, now)
    }
    #[inline(always)]
    fn destination(packet: &[u8], l3: usize) -> Option<u32> {
        let at = l3 + ip4::DST;
        packet.get(at..at + 4).map(|s| be32(s, 0))
    }
    #[inline(always)]
    fn lookup_batch(fib: &Ip4Fib, addrs: &[u32], out: &mut [u32]) {
        fib.lookup_batch(addrs, out);
    }
    #[inline(always)]
    fn flow_hash(l3: &[u8]) -> u32 {
        ip4_flow_hash(l3)
    }
    fn describe(pool: &BufferPool, buffer: u32) -> String {
        crate::ip4::describe_ip4(pool, buffer)
    }
}

/// IPv6.
pub struct Ip6;

impl LookupFamily for Ip6 {
    type Addr = u128;
    type Fib = Ip6Fib;
    type FibSource = Arc<Ip6Fib>;
    #[inline(always)]
    fn fib(source: &Arc<Ip6Fib>) -> &Ip6Fib {
        source
    }
    fn pin(n: &mut Neighbours, port: u16, addr: u128) -> Option<u32> {
        n.pin6(port, std::net::Ipv6Addr::from(addr))
    }
    fn unpin(n: &mut Neighbours, id: u32) {
        n.unpin6(id);
    }
    const NODE: &'static str = names::IP6_LOOKUP;
    const REWRITE: &'static str = names::IP6_REWRITE;
    const RESOLVE: &'static str = neighbour::IP6_DISCOVER;
    #[inline(always)]
    fn is_subnet_broadcast(_: u128, _: u8) -> bool {
        false
    }
    #[inline(always)]
    fn neighbour(n: &mut Neighbours, port: u16, addr: u128, now: u64) -> Option<u32> {
        n.lookup6(port, addr, now)
    }
    #[inline(always)]
    fn destination(packet: &[u8], l3: usize) -> Option<u128> {
        let at = l3 + ip6::DST;
        packet.get(at..at + 16).map(|s| be128(s, 0))
    }
    #[inline(always)]
    fn lookup_batch(fib: &Ip6Fib, addrs: &[u128], out: &mut [u32]) {
        fib.lookup_batch(addrs, out);
    }
    #[inline(always)]
    fn flow_hash(l3: &[u8]) -> u32 {
        ip6_flow_hash(l3)
    }
    fn describe(pool: &BufferPool, buffer: u32) -> String {
        crate::ip6::describe_ip6(pool, buffer)
    }
}

/// The lookup node of family `F`.
pub struct IpLookup<F: LookupFamily> {
    fib: F::FibSource,
    next_hops: Reader<NextHopTable>,
    neighbours: Option<NeighbourHandle>,
    /// The node packets to vecplane's own addresses go to (None: dropped as `to-us`).
    local: Option<&'static str>,
    /// The nodes `NextHop::Node` entries name, by slot (after the other next nodes).
    targets: Vec<&'static str>,
    gateways: GatewayCache,
    addrs: Box<[F::Addr; VECTOR_SIZE]>,
    ids: Box<[u32; VECTOR_SIZE]>,
}

/// One worker's resolution of gateways: per gateway index, (generation + 1, the adjacency id
/// of the neighbour entry pinned for it); (0, _) = not resolved yet. Allocated once. A gateway
/// no route uses any more gets a new generation in the table; `sweep` finds it a few slots a
/// vector and unpins its neighbour entry, so the neighbour table can age it out.
pub struct GatewayCache {
    slots: Box<[(u32, u32)]>,
    cursor: usize,
}

/// Cache slots `sweep` checks per vector (the whole cache in 512 vectors).
const SWEEP_PER_VECTOR: usize = 8;

impl GatewayCache {
    fn new() -> GatewayCache {
        GatewayCache {
            slots: vec![(0, 0); MAX_GATEWAYS].into_boxed_slice(),
            cursor: 0,
        }
    }

    /// Check the next few slots: unpin the entries of gateways whose generation moved on
    /// (retired, or the index reused for another gateway).
    #[inline]
    fn sweep<F: LookupFamily>(&mut self, table: &NextHopTable, neighbours: &mut Neighbours) {
        for _ in 0..SWEEP_PER_VECTOR {
            let g = self.cursor;
            self.cursor = (self.cursor + 1) % self.slots.len().max(1);
            let Some(slot) = self.slots.get_mut(g) else {
                continue;
            };
            if slot.0 == 0 {
                continue;
            }
            let current = table
                .gateway(g as u32)
                .map(|gw| gw.generation.wrapping_add(1).max(1));
            if current != Some(slot.0) {
                F::unpin(neighbours, slot.1);
                *slot = (0, 0);
            }
        }
    }

    /// The neighbour adjacency id of gateway `g` of `table` (pinning its entry the first time
    /// this worker sees this gateway; unpinning the entry of a gateway that had the index
    /// before). None: unknown gateway, no neighbour table, or the table is full.
    #[inline]
    fn resolve<F: LookupFamily>(
        &mut self,
        table: &NextHopTable,
        g: u32,
        neighbours: Option<&mut Neighbours>,
    ) -> Option<u32> {
        let gw = table.gateway(g)?;
        if let Some(adjacency) = gw.adjacency {
            return Some(adjacency);
        }
        let slot = self.slots.get_mut(g as usize)?;
        let tag = gw.generation.wrapping_add(1).max(1);
        if slot.0 == tag {
            return Some(slot.1);
        }
        let n = neighbours?;
        if slot.0 != 0 {
            F::unpin(n, slot.1);
        }
        let id = F::pin(n, gw.port, gw.addr)?;
        *slot = (tag, id);
        Some(id)
    }
}

/// `ip4-lookup`.
pub type Ip4Lookup = IpLookup<Ip4>;
/// `ip6-lookup`.
pub type Ip6Lookup = IpLookup<Ip6>;

impl<F: LookupFamily> IpLookup<F> {
    /// A lookup node over `fib`, whose next-hop ids index the published `next_hops`.
    pub fn new(fib: F::FibSource, next_hops: Reader<NextHopTable>) -> IpLookup<F> {
        IpLookup {
            fib,
            next_hops,
            neighbours: None,
            local: None,
            targets: Vec::new(),
            gateways: GatewayCache::new(),
            addrs: Box::new([F::Addr::default(); VECTOR_SIZE]),
            ids: Box::new([0; VECTOR_SIZE]),
        }
    }

    /// Resolve connected prefixes in `neighbours` (without it they are dropped as
    /// `neighbour-unresolved`); adds `ip4-arp` / `ip6-discover` as a next node.
    pub fn with_neighbours(mut self, neighbours: NeighbourHandle) -> IpLookup<F> {
        self.neighbours = Some(neighbours);
        self
    }

    /// Send packets addressed to vecplane itself to node `local` (e.g. `vxlan-input`) instead
    /// of dropping them as `to-us`.
    pub fn with_local(mut self, local: &'static str) -> IpLookup<F> {
        self.local = Some(local);
        self
    }

    /// The nodes `NextHop::Node { slot, .. }` entries hand packets to, by slot (e.g. `lb`
    /// for VIP prefixes); a slot beyond them is dropped as `no-target`.
    pub fn with_targets(mut self, targets: &[&'static str]) -> IpLookup<F> {
        self.targets = targets.to_vec();
        self
    }

    /// `local`'s next index.
    fn local_next(&self) -> Option<u16> {
        self.local.map(|_| 2 + u16::from(self.neighbours.is_some()))
    }

    /// Where the targets' next indices start, and how many there are.
    fn targets_next(&self) -> Targets {
        Targets {
            first: 2 + u16::from(self.neighbours.is_some()) + u16::from(self.local.is_some()),
            count: self.targets.len() as u16,
        }
    }
}

/// The next indices of a lookup node's target nodes: `first..first + count`.
#[derive(Clone, Copy)]
struct Targets {
    first: u16,
    count: u16,
}

/// Next nodes of both lookup nodes, in `next_nodes` order (names by family; `Resolve` only
/// with neighbours).
#[derive(Clone, Copy)]
#[repr(u16)]
enum Next {
    Drop,
    Rewrite,
    /// Only with neighbours.
    Resolve,
}

impl Next {
    const fn id(self) -> u16 {
        self as u16
    }
}

graph::node_indices! {
    /// Drop reasons of both lookup nodes.
    pub enum LookupError {
        /// No route covers the destination.
        NoRoute = "no-route",
        /// A drop (blackhole) route.
        Blackhole = "blackhole",
        /// Addressed to one of our own addresses.
        ToUs = "to-us",
        /// A neighbour that cannot be resolved here.
        NeighbourUnresolved = "neighbour-unresolved",
        /// A directed broadcast (RFC 1812 5.3.5.2).
        DirectedBroadcast = "directed-broadcast",
        /// A route to a graph node this lookup node was not given.
        NoTarget = "no-target",
    }
}

/// Drop reasons of both lookup nodes, by index.
pub const ERRORS: &[&str] = LookupError::NAMES;

/// Where the next-hop ids `ids` of `frame` send each packet (`nexts`); the next node of every
/// packet when they all go to one (rewrite, or a route's target node: a VIP's packets to
/// `lb`), so the vector moves in one copy. `neighbours` resolves connected prefixes (None:
/// they are dropped).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn classify<F: LookupFamily>(
    next_hops: &NextHopTable,
    gateways: &mut GatewayCache,
    ids: &[u32],
    addrs: &[F::Addr],
    mut neighbours: Option<&mut Neighbours>,
    (local, targets): (Option<u16>, Targets),
    cx: &mut NodeContext<'_>,
    frame: &[u32],
    nexts: &mut [u16],
) -> Option<u16> {
    let now = cx.now_tsc;
    for (i, &b) in frame.iter().enumerate() {
        let (meta, data) = cx.pool.packet_mut(b);
        let l3 = meta.l3_offset as usize;
        let member = match next_hops.entry(ids[i]) {
            NextHop::Adjacency(a) => Some(a),
            NextHop::Gateway(g) => Some(g | GATEWAY_MEMBER),
            NextHop::Ecmp { first, count } => {
                if meta.flags & FLAG_FLOW_HASH == 0 {
                    meta.flow_hash = F::flow_hash(&data[l3..]);
                    meta.flags |= FLAG_FLOW_HASH;
                }
                Some(next_hops.ecmp_member(first, count, meta.flow_hash))
            }
            _ => None,
        };
        if let Some(member) = member {
            // A gateway resolves to the neighbour entry pinned for it in this worker; an
            // adjacency index or a neighbour id goes to rewrite as it is.
            let next =
                if member & (GATEWAY_MEMBER | neighbour::NEIGHBOUR_ADJACENCY) == GATEWAY_MEMBER {
                    match gateways.resolve::<F>(
                        next_hops,
                        member & !GATEWAY_MEMBER,
                        neighbours.as_deref_mut(),
                    ) {
                        Some(adj) => {
                            meta.next_scratch = adj;
                            Next::Rewrite.id()
                        }
                        None => {
                            meta.error = cx.error_base + LookupError::NeighbourUnresolved.id();
                            Next::Drop.id()
                        }
                    }
                } else {
                    meta.next_scratch = member;
                    Next::Rewrite.id()
                };
            nexts[i] = next;
            continue;
        }
        let next = match next_hops.entry(ids[i]) {
            NextHop::Adjacency(_) | NextHop::Gateway(_) | NextHop::Ecmp { .. } => Next::Drop.id(),
            NextHop::Glean { host_bits, .. } if F::is_subnet_broadcast(addrs[i], host_bits) => {
                // RFC 1812 5.3.5.2 / RFC 2644: directed broadcasts are not forwarded.
                meta.error = cx.error_base + LookupError::DirectedBroadcast.id();
                Next::Drop.id()
            }
            NextHop::Glean { port, .. } => match neighbours.as_deref_mut() {
                Some(n) => {
                    meta.tx_port = port;
                    match F::neighbour(n, port, addrs[i], now) {
                        Some(adj) => {
                            meta.next_scratch = adj;
                            Next::Rewrite.id()
                        }
                        None => {
                            meta.next_scratch = neighbour::GLEAN;
                            Next::Resolve.id()
                        }
                    }
                }
                None => {
                    meta.error = cx.error_base + LookupError::NeighbourUnresolved.id();
                    Next::Drop.id()
                }
            },
            NextHop::NoRoute => {
                meta.error = cx.error_base + LookupError::NoRoute.id();
                Next::Drop.id()
            }
            NextHop::Drop => {
                meta.error = cx.error_base + LookupError::Blackhole.id();
                Next::Drop.id()
            }
            NextHop::Local => match local {
                Some(next) => next,
                None => {
                    meta.error = cx.error_base + LookupError::ToUs.id();
                    Next::Drop.id()
                }
            },
            NextHop::Node { slot, tag } if slot < targets.count => {
                meta.next_scratch = tag;
                targets.first + slot
            }
            NextHop::Node { .. } => {
                meta.error = cx.error_base + LookupError::NoTarget.id();
                Next::Drop.id()
            }
        };
        nexts[i] = next;
    }
    // One pass over 2-byte ids without an early exit, so that it vectorizes: whether every
    // packet goes to the first's next.
    let nexts = &nexts[..frame.len()];
    let first = nexts.first().copied()?;
    (nexts.iter().fold(0, |d, &n| d | (n ^ first)) == 0).then_some(first)
}

impl<F: LookupFamily> Node for IpLookup<F> {
    fn name(&self) -> &str {
        F::NODE
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v = vec![names::ERROR_DROP.into(), F::REWRITE.into()];
        if self.neighbours.is_some() {
            v.push(F::RESOLVE.into());
        }
        if let Some(local) = self.local {
            v.push(local.into());
        }
        v.extend(self.targets.iter().map(|t| t.to_string()));
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        LookupError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let n = frame.len();
        for (a, &b) in self.addrs[..n].iter_mut().zip(frame) {
            // The input node (or the ICMP error node) checked the header is present.
            let l3 = cx.pool.meta(b).l3_offset as usize;
            *a = F::destination(cx.pool.data(b), l3).unwrap_or_default();
        }
        F::lookup_batch(F::fib(&self.fib), &self.addrs[..n], &mut self.ids[..n]);
        // Loaded after the FIB: every id the lookups returned is in this table (the control
        // side publishes a next-hop entry before storing its id in the FIB).
        let local = (self.local_next(), self.targets_next());
        let hops = self.next_hops.get();
        let (gw, ids, addrs) = (&mut self.gateways, &self.ids[..n], &self.addrs[..n]);
        let uniform = match &self.neighbours {
            Some(h) => h.with(|nb| {
                gw.sweep::<F>(hops, nb);
                classify::<F>(hops, gw, ids, addrs, Some(nb), local, cx, frame, nexts)
            }),
            None => classify::<F>(hops, gw, ids, addrs, None, local, cx, frame, nexts),
        };
        match uniform {
            Some(next) => Dispatch::AllTo(next),
            None => Dispatch::PerPacket,
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("{} adjacency {}", F::describe(pool, buffer), m.next_scratch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjacency::Gateway;
    use crate::neighbour::{NeighbourConfig, NeighbourPort};

    fn pinned(n: &mut Neighbours) -> Vec<bool> {
        n.rows(0).iter().map(|r| r.pinned).collect()
    }

    #[test]
    fn the_sweep_unpins_gateways_the_table_retired() {
        let mut n = Neighbours::new(
            &NeighbourConfig {
                ports: vec![NeighbourPort {
                    mac: [2, 0, 0, 0, 1, 1],
                    mtu: 1500,
                    ip4: vec![("198.18.1.1".parse().expect("v4"), 24)],
                    ip6: Vec::new(),
                }],
                ..NeighbourConfig::default()
            },
            1_000_000,
        );
        let addr = u128::from(u32::from_be_bytes([198, 18, 1, 2]));
        let mut table = NextHopTable::new();
        let mut gw = Gateway {
            port: 0,
            addr,
            adjacency: None,
            generation: 0,
        };
        let g = table.add_gateway(gw).expect("gateway");
        let mut cache = GatewayCache::new();
        let id = cache.resolve::<Ip4>(&table, g, Some(&mut n));
        assert!(id.is_some());
        assert_eq!(pinned(&mut n), vec![true]);
        // Still in use: a full sweep keeps the pin.
        for _ in 0..MAX_GATEWAYS / SWEEP_PER_VECTOR {
            cache.sweep::<Ip4>(&table, &mut n);
        }
        assert_eq!(pinned(&mut n), vec![true]);
        // Retired (new generation): the sweep lets go within one pass over the cache.
        gw.generation += 1;
        table.set_gateway(g, gw);
        for _ in 0..MAX_GATEWAYS / SWEEP_PER_VECTOR {
            cache.sweep::<Ip4>(&table, &mut n);
        }
        assert_eq!(pinned(&mut n), vec![false]);
        assert_eq!(cache.slots[g as usize], (0, 0));
    }
}

//! Live routing: the one IPv4 FIB, IPv6 FIB and next-hop tables that every worker shares, and
//! the control thread's only way to change them (`Routing::apply`). Owns the routes, the static
//! neighbours and the system routes derived from the ports (connected prefixes, own addresses).
//! It never runs on a worker, never makes a worker wait, and never frees what a worker may read.
//!
//! # Design
//!
//! * **What workers read.** Per family a lookup table (IPv4: `fib::Ip4Fib`, DIR-24-8 changed in
//!   place with one atomic store per entry; IPv6: `fib::Ip6Fib`, changed in place per
//!   first-level region, the regions a batch touched re-encoded once at its end) and a next-hop
//!   table snapshot (`NextHopTable`, published through `live`). A FIB entry holds a next-hop id; the id's entry names gateways by address
//!   and port (one, or an ECMP set). A gateway is a static neighbour's adjacency, or is resolved
//!   by each worker in its own neighbour table (ARP / ND): routes no longer depend on
//!   per-worker neighbour slots, so one FIB serves every worker.
//! * **A batch.** `apply` takes a list of changes (routes and static neighbours, added, replaced
//!   or deleted) and first checks all of them against the state the whole batch leads to:
//!   prefixes, next hops reachable, neighbours still needed, and room (next-hop ids, gateways,
//!   tbl8 groups). One bad item: nothing changes and the error names it. Then, in this order:
//!   neighbours' adjacencies and gateways, next-hop ids for the new targets, the next-hop
//!   tables published, the FIB entries written (additions first, shortest prefix first), the
//!   IPv6 regions re-encoded, and only then the ids no route uses any more released.
//! * **Node routes.** A feature of the data plane may own routes whose prefix hands packets to
//!   a graph node (`NodeRoute`, `NextHop::Node`: the load balancer's VIP prefixes go to `lb`,
//!   as VPP steers a VIP with a DPO on its prefix). They are kept apart from configured routes
//!   and never listed as such. Precedence for one prefix: an own address, then a node route,
//!   then a configured route, a connected prefix, a static neighbour's host route (VPP: the
//!   interface source, then `lb`, then the API and CLI sources). A node route on an own
//!   address is refused; a configured route shadowed by one comes back when it goes.
//! * **Versions.** Each applied batch gets the next version number and the epoch it was
//!   completed at: once `domain().is_safe(epoch)` every worker forwards by it. Within a batch
//!   each route flips atomically (a packet sees its old or its new next hop, never a mix), as in
//!   DPDK's `rte_fib`; the batch as a whole is published before `apply` returns.
//!
//! # Thread-safety contract
//!
//! * One `Routing` per data plane, owned by the control side behind a mutex; `apply` is never
//!   called from a worker. Workers hold only the readers of `Routing::readers`.
//! * A next-hop id, gateway index, ECMP member range or adjacency index that a route stopped
//!   using is retired at an epoch advanced after the FIB stopped naming it, and reused only once
//!   every online worker passed that epoch (so a worker mid-vector never sees an id change
//!   meaning). A stalled worker delays reuse (memory), never a change.
//! * Workers call `WorkerEpoch::quiescent` between dispatch rounds and go offline while asleep.

mod apply;
mod fibstore;
mod nexthops;
mod ports;
#[cfg(test)]
mod tests;

mod node_routes;

pub use apply::{Applied, BatchError, BatchErrorKind, Change, MAX_ECMP};
pub use node_routes::{NodeRoute, ROUTE_NODES};

use crate::build::FibStats;
use crate::spec::{DataplaneSpec, NeighbourSpec, RouteTarget};
use fibstore::{FibStore, Ip4Store, Ip6Store};
use live::{Domain, Reader};
use nexthops::{HopKey, NextHopBook, Reach};
use nodes::adjacency::NextHopTable;
use packet::headers::Mac;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

/// A route as the API and `show` present it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Network address (host bits zero).
    pub prefix: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Where it sends packets.
    pub target: RouteTarget<IpAddr>,
}

/// What a worker reads: the tables of both families.
pub struct RoutingReaders {
    /// The shared IPv4 FIB.
    pub fib4: Arc<fib::Ip4Fib>,
    /// The published IPv6 FIB.
    pub fib6: Arc<fib::Ip6Fib>,
    /// The published IPv4 next-hop table, for `ip4-lookup` and for `ip4-rewrite`.
    pub next_hops4: [Reader<NextHopTable>; 2],
    /// The published IPv6 next-hop table, for `ip6-lookup` and for `ip6-rewrite`.
    pub next_hops6: [Reader<NextHopTable>; 2],
}

/// A port as routing sees it.
#[derive(Clone, Debug)]
struct PortInfo {
    mac: Mac,
    mtu: u16,
    /// Its own addresses and prefix lengths (both families).
    addrs: Vec<(IpAddr, u8)>,
}

/// The system routes of one prefix (the configured route, if any, is in `Family::user`).
#[derive(Clone, Copy, Debug, Default)]
struct System {
    /// An own address (wins over everything).
    local: Option<u32>,
    /// A connected prefix.
    connected: Option<u32>,
    /// A static neighbour's host route.
    neighbour: Option<u32>,
}

/// What a family's routes are resolved against: its width and the ports' prefixes.
#[derive(Clone)]
struct Net {
    /// 32 or 128.
    bits: u8,
    /// Connected prefixes: (network, length, port).
    connected: Vec<(u128, u8, u16)>,
    /// Own addresses.
    own: HashSet<u128>,
}

impl Net {
    fn v6(&self) -> bool {
        self.bits == 128
    }

    /// The port whose connected prefix holds `addr` (not an own address).
    fn connected_port(&self, addr: u128) -> Option<u16> {
        if self.own.contains(&addr) {
            return None;
        }
        self.connected
            .iter()
            .find(|(net, len, _)| mask(addr, *len, self.bits) == *net)
            .map(|(_, _, port)| *port)
    }

    /// How `addr` is reached given the static neighbours `neighbours`: the neighbour's port
    /// and adjacency, or the port of the connected prefix that holds it.
    fn reach(&self, neighbours: &BTreeMap<IpAddr, StaticNeighbour>, addr: u128) -> Option<Reach> {
        match neighbours.get(&to_ip(self.v6(), addr)) {
            Some(n) => Some((n.spec.port as u16, Some(n.adjacency))),
            None => self.connected_port(addr).map(|p| (p, None)),
        }
    }
}

/// One address family's routes and tables. Addresses are u128 (IPv4 in the low 32 bits).
struct Family<S> {
    net: Net,
    book: NextHopBook,
    fib: S,
    /// Configured routes: (prefix, length) -> next-hop id.
    user: BTreeMap<(u128, u8), u32>,
    /// Node routes: (prefix, length) -> (next-hop id, node name).
    node: BTreeMap<(u128, u8), (u32, &'static str)>,
    system: HashMap<(u128, u8), System>,
    /// The id of "drop".
    drop: u32,
}

/// A static neighbour and its adjacency index.
#[derive(Clone, Debug)]
struct StaticNeighbour {
    spec: NeighbourSpec,
    adjacency: u32,
}

/// The live routing state of one data plane.
pub struct Routing {
    domain: Domain,
    v4: Family<Ip4Store>,
    v6: Family<Ip6Store>,
    ports: Vec<PortInfo>,
    neighbours: BTreeMap<IpAddr, StaticNeighbour>,
    version: u64,
    /// Seconds the initial load (both families) took.
    load_seconds: f64,
}

impl std::fmt::Debug for Routing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (v4, v6) = self.route_counts();
        f.debug_struct("Routing")
            .field("version", &self.version)
            .field("routes4", &v4)
            .field("routes6", &v6)
            .field("neighbours", &self.neighbours.len())
            .finish()
    }
}

/// Why the routing tables could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RoutingError(pub String);

pub(crate) fn mask(a: u128, len: u8, bits: u8) -> u128 {
    let host = u32::from(bits.saturating_sub(len));
    if host >= 128 {
        0
    } else {
        let m = (u128::MAX << host) & if bits == 32 { 0xffff_ffff } else { u128::MAX };
        a & m
    }
}

pub(crate) fn to_u128(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(a) => (false, u128::from(u32::from(a))),
        IpAddr::V6(a) => (true, u128::from(a)),
    }
}

pub(crate) fn to_ip(v6: bool, a: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(a as u32))
    }
}

impl<S: FibStore> Family<S> {
    fn new(
        bits: u8,
        fib: Result<S, fib::FibError>,
        domain: &Domain,
    ) -> Result<Family<S>, RoutingError> {
        let fib = fib.map_err(|e| RoutingError(e.to_string()))?;
        let mut book = NextHopBook::new(domain);
        let drop = book
            .acquire(&HopKey::Drop, &|_| None)
            .ok_or_else(|| RoutingError("internal error: no next-hop id for drop".into()))?;
        Ok(Family {
            net: Net {
                bits,
                connected: Vec::new(),
                own: HashSet::new(),
            },
            book,
            fib,
            user: BTreeMap::new(),
            node: BTreeMap::new(),
            system: HashMap::new(),
            drop,
        })
    }

    /// What `prefix/len` leads to now: own address, node route, configured route, connected
    /// prefix, then a static neighbour's host route.
    fn effective(&self, key: (u128, u8)) -> Option<u32> {
        let s = self.system.get(&key).copied().unwrap_or_default();
        s.local
            .or_else(|| self.node.get(&key).map(|r| r.0))
            .or_else(|| self.user.get(&key).copied())
            .or(s.connected)
            .or(s.neighbour)
    }

    /// Configured routes after `start` (exclusive), at most `limit`.
    fn routes(&self, start: Option<(u128, u8)>, limit: usize) -> Vec<Route> {
        let range = match start {
            Some(s) => self
                .user
                .range((std::ops::Bound::Excluded(s), std::ops::Bound::Unbounded)),
            None => self.user.range(..),
        };
        range
            .take(limit)
            .map(|(&(p, l), &id)| Route {
                prefix: to_ip(self.net.v6(), p),
                len: l,
                target: self.target(id),
            })
            .collect()
    }

    /// The route target of next-hop id `id`, as addresses.
    fn target(&self, id: u32) -> RouteTarget<IpAddr> {
        if id == self.drop {
            return RouteTarget::Drop;
        }
        RouteTarget::Via(
            self.book
                .hops(id)
                .iter()
                .map(|a| to_ip(self.net.v6(), *a))
                .collect(),
        )
    }
}

impl Routing {
    /// The routes, neighbours and ports of `spec`, with tables whose retired parts wait for the
    /// workers of `domain`.
    pub fn new(spec: &DataplaneSpec, domain: Domain) -> Result<Routing, RoutingError> {
        let mut r = Routing {
            v4: Family::new(32, Ip4Store::new(&domain), &domain)?,
            v6: Family::new(128, Ip6Store::new(&domain), &domain)?,
            domain,
            ports: spec
                .ports
                .iter()
                .map(|p| PortInfo {
                    mac: p.mac,
                    mtu: p.mtu,
                    addrs: Vec::new(),
                })
                .collect(),
            neighbours: BTreeMap::new(),
            version: 0,
            load_seconds: 0.0,
        };
        // The ports' addresses, as a live change from none would install them.
        let addrs: Vec<(usize, Vec<(IpAddr, u8)>)> = spec
            .ports
            .iter()
            .enumerate()
            .map(|(id, p)| (id, p.own_addresses().collect()))
            .collect();
        r.set_port_addresses(&addrs)?;
        let mut changes: Vec<Change> =
            Vec::with_capacity(spec.neighbours.len() + spec.routes4.len() + spec.routes6.len());
        changes.extend(spec.neighbours.iter().cloned().map(Change::AddNeighbour));
        for rt in &spec.routes4 {
            changes.push(Change::AddRoute(Route {
                prefix: IpAddr::V4(rt.prefix),
                len: rt.len,
                target: via(&rt.target),
            }));
        }
        for rt in &spec.routes6 {
            changes.push(Change::AddRoute(Route {
                prefix: IpAddr::V6(rt.prefix),
                len: rt.len,
                target: via(&rt.target),
            }));
        }
        let t = Instant::now();
        r.apply(&changes)
            .map_err(|e| RoutingError(e.message.clone()))?;
        r.load_seconds = t.elapsed().as_secs_f64();
        r.version = 0;
        Ok(r)
    }

    /// Apply `changes` that belong to the tables' initial state (a feature's routes when the
    /// data plane is built) like a batch, but not counted as a version: the version stays the
    /// number of batches applied since start.
    pub(crate) fn load(&mut self, changes: &[Change]) -> Result<(), BatchError> {
        if changes.is_empty() {
            return Ok(());
        }
        let version = self.version;
        self.apply(changes)?;
        self.version = version;
        Ok(())
    }

    /// Tables of `spec` that no worker epoch guards: for tables nobody changes while they are
    /// read (tools, tests, a single graph run inline).
    pub fn without_workers(spec: &DataplaneSpec) -> Result<Routing, RoutingError> {
        Routing::new(spec, Domain::new(0).0)
    }

    /// Readers of every table, for one worker.
    pub fn readers(&self) -> RoutingReaders {
        RoutingReaders {
            fib4: self.v4.fib.fib(),
            fib6: self.v6.fib.fib(),
            next_hops4: [self.v4.book.reader(), self.v4.book.reader()],
            next_hops6: [self.v6.book.reader(), self.v6.book.reader()],
        }
    }

    /// The epoch domain of the workers reading these tables.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Version of the tables: the number of batches applied since start.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Free what every worker has moved past (tbl8 groups, snapshots, retired ids).
    pub fn reclaim(&mut self) {
        self.v4.book.reclaim();
        self.v4.fib.reclaim();
        self.v6.book.reclaim();
        self.v6.fib.reclaim();
    }

    /// FIB sizes and build time.
    pub fn stats(&self) -> FibStats {
        FibStats {
            ip4_build_seconds: self.load_seconds,
            ip4_memory_bytes: self.v4.fib.memory_bytes(),
            ip4_routes: self.v4.fib.route_count(),
            ip6_build_seconds: self.load_seconds,
            ip6_memory_bytes: self.v6.fib.memory_bytes(),
            ip6_routes: self.v6.fib.route_count(),
        }
    }

    /// Bytes the control side keeps beside the tables (route maps, painting lengths).
    pub fn control_bytes(&self) -> usize {
        let per_route = 48;
        self.v4.fib.writer_bytes()
            + self.v6.fib.writer_bytes()
            + (self.v4.user.len() + self.v6.user.len()) * per_route
    }

    /// Configured routes of one family (IPv6 when `v6`), in prefix order, starting after
    /// `after` (exclusive), at most `limit`.
    pub fn routes(&self, v6: bool, after: Option<(IpAddr, u8)>, limit: usize) -> Vec<Route> {
        let start = after.map(|(ip, len)| (to_u128(ip).1, len));
        if v6 {
            self.v6.routes(start, limit)
        } else {
            self.v4.routes(start, limit)
        }
    }

    /// The configured route `prefix/len`, if there is one.
    pub fn route(&self, prefix: IpAddr, len: u8) -> Option<Route> {
        let (v6, p) = to_u128(prefix);
        let id = if v6 {
            self.v6.user.get(&(p, len)).map(|&id| self.v6.target(id))
        } else {
            self.v4.user.get(&(p, len)).map(|&id| self.v4.target(id))
        };
        id.map(|target| Route {
            prefix,
            len,
            target,
        })
    }

    /// Number of configured routes (IPv4, IPv6).
    pub fn route_counts(&self) -> (usize, usize) {
        (self.v4.user.len(), self.v6.user.len())
    }

    /// Change port `port`'s MTU: the static neighbours on it get adjacencies with the new MTU,
    /// published as one version (the workers' own neighbour entries follow `PortMtus`). Returns
    /// the version, or an error for a port it does not have.
    pub fn set_port_mtu(&mut self, port: usize, mtu: u16) -> Result<Applied, RoutingError> {
        let Some(info) = self.ports.get_mut(port) else {
            return Err(RoutingError(format!("there is no port {port}")));
        };
        info.mtu = mtu;
        let changes: Vec<Change> = self
            .neighbours
            .values()
            .filter(|n| n.spec.port == port)
            .map(|n| Change::ReplaceNeighbour(n.spec.clone()))
            .collect();
        self.apply(&changes)
            .map_err(|e| RoutingError(e.message.clone()))
    }

    /// Static neighbours, by address.
    pub fn neighbours(&self) -> Vec<NeighbourSpec> {
        self.neighbours.values().map(|n| n.spec.clone()).collect()
    }

    /// The static neighbour at `ip`.
    pub fn neighbour(&self, ip: IpAddr) -> Option<NeighbourSpec> {
        self.neighbours.get(&ip).map(|n| n.spec.clone())
    }

    /// Next-hop entries in use (IPv4, IPv6) and items waiting for a grace period.
    pub fn next_hop_usage(&self) -> (usize, usize, usize) {
        (
            self.v4.book.entries_in_use(),
            self.v6.book.entries_in_use(),
            self.v4.book.retired() + self.v6.book.retired(),
        )
    }
}

/// A configured route target with its addresses as `IpAddr`.
fn via<A: Copy + Into<IpAddr>>(t: &RouteTarget<A>) -> RouteTarget<IpAddr> {
    match t {
        RouteTarget::Drop => RouteTarget::Drop,
        RouteTarget::Via(v) => RouteTarget::Via(v.iter().map(|a| (*a).into()).collect()),
    }
}

//! `Routing::apply`: a batch of route and static-neighbour changes, checked as a whole against
//! the state it leads to and then applied in the order the module header of `routing` gives.
//! It never leaves a batch half-applied: every check that can fail runs before the first change.

use super::nexthops::HopKey;
use super::node_routes::{stage_nodes, NodePlan, NodePlans, NodeRoute};
use super::{mask, to_ip, to_u128, Family, Route, Routing, StaticNeighbour};
use crate::routing::fibstore::FibStore;
use crate::spec::{NeighbourSpec, RouteTarget};
use nodes::adjacency::Adjacency;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

/// Most next hops of one ECMP route.
pub const MAX_ECMP: usize = 64;

/// One change of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Add a route; fails when the prefix has one already.
    AddRoute(Route),
    /// Add a route or change the one the prefix has.
    ReplaceRoute(Route),
    /// Delete a route; fails when there is none.
    DeleteRoute {
        /// Its prefix.
        prefix: IpAddr,
        /// Its length.
        len: u8,
    },
    /// Add a static neighbour; fails when the address has one already.
    AddNeighbour(NeighbourSpec),
    /// Add a static neighbour or change the one the address has.
    ReplaceNeighbour(NeighbourSpec),
    /// Delete a static neighbour; fails when there is none, or when routes still need it.
    DeleteNeighbour(IpAddr),
    /// Add a feature's node route or change the one the prefix has (see `NodeRoute`); fails
    /// on an own address.
    SetNodeRoute(NodeRoute),
    /// Delete a node route; fails when there is none.
    DeleteNodeRoute {
        /// Its prefix.
        prefix: IpAddr,
        /// Its length.
        len: u8,
    },
}

/// What kind of failure a batch met (an API maps these to status codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchErrorKind {
    /// The item is invalid (400).
    Invalid,
    /// The item names something that does not exist (404).
    NotFound,
    /// The item adds something that exists (409).
    Exists,
    /// The item conflicts with the rest of the state (409).
    Conflict,
    /// A table has no room (507).
    NoRoom,
}

/// Why a batch was refused; nothing of it was applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", item.map(|i| format!("item {i}: ")).unwrap_or_default())]
pub struct BatchError {
    /// Index of the offending change (None: the batch as a whole).
    pub item: Option<usize>,
    /// The field of that change at fault (`prefix`, `len`, `via`, `ip`, `port`, `mac`), if one.
    pub field: Option<&'static str>,
    /// What was wrong and what is accepted.
    pub message: String,
    /// Its kind.
    pub kind: BatchErrorKind,
}

impl BatchError {
    fn at(item: usize, field: &'static str, kind: BatchErrorKind, message: String) -> BatchError {
        BatchError {
            item: Some(item),
            field: Some(field),
            message,
            kind,
        }
    }
}

/// An applied batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The tables' version after it.
    pub version: u64,
    /// Every worker forwards by it once `Routing::domain().is_safe(epoch)`.
    pub epoch: u64,
}

/// A route's final state in a batch: the change that set it and its target (None: deleted).
struct RoutePlan {
    item: usize,
    key: Option<HopKey>,
}

/// A neighbour's final state in a batch (None: deleted).
struct NeighbourPlan {
    item: usize,
    spec: Option<NeighbourSpec>,
}

/// One family's route plans, by prefix.
type RoutePlans = HashMap<(u128, u8), RoutePlan>;
/// One family's node route plans, by prefix.
type NodePlanMap = HashMap<(u128, u8), NodePlan>;

/// The batch's final state, keyed as the tables are.
#[derive(Default)]
struct Plan {
    routes4: HashMap<(u128, u8), RoutePlan>,
    routes6: HashMap<(u128, u8), RoutePlan>,
    neighbours: BTreeMap<IpAddr, NeighbourPlan>,
    nodes: NodePlans,
}

use BatchErrorKind::{Conflict, Exists, Invalid, NoRoom, NotFound};

impl Routing {
    /// Whether `apply(changes)` would be accepted now; changes nothing (but frees what every
    /// worker has moved past).
    pub fn check(&mut self, changes: &[Change]) -> Result<(), BatchError> {
        self.plan(changes).map(|_| ())
    }

    /// Every change of a batch staged and the state it leads to checked.
    fn plan(&mut self, changes: &[Change]) -> Result<Plan, BatchError> {
        self.reclaim();
        let mut plan = Plan::default();
        for (item, change) in changes.iter().enumerate() {
            self.stage(item, change, &mut plan)?;
        }
        self.check_family(&self.v4, (&plan.routes4, &plan.nodes.v4), &plan.neighbours)?;
        self.check_family(&self.v6, (&plan.routes6, &plan.nodes.v6), &plan.neighbours)?;
        Ok(plan)
    }

    /// Apply `changes` as one version, or none of them (see the module header of `routing`).
    pub fn apply(&mut self, changes: &[Change]) -> Result<Applied, BatchError> {
        let plan = self.plan(changes)?;

        // Nothing below fails: every condition was checked above.
        let mut released: Vec<(bool, u32)> = Vec::new();
        let mut retired_adjacencies: Vec<(bool, u32)> = Vec::new();
        let mut host_adds: Vec<(bool, u128)> = Vec::new();
        let mut touched4: Vec<(u128, u8)> = Vec::new();
        let mut touched6: Vec<(u128, u8)> = Vec::new();
        // Gateways of deleted static neighbours, resolved dynamically from now on: repointed
        // only once the FIB is written, so a route this batch deletes never sends its packets
        // to resolution meanwhile (it did: a flood through a route deleted together with its
        // neighbour lost about a hundred packets to ip4-arp/queue-full).
        let mut unpinned_gateways: Vec<(bool, u128, u16)> = Vec::new();
        for (ip, p) in &plan.neighbours {
            let (v6, addr) = to_u128(*ip);
            let fam_book = if v6 {
                (&self.v6.net, &mut self.v6.book, &mut self.v6.system)
            } else {
                (&self.v4.net, &mut self.v4.book, &mut self.v4.system)
            };
            let (net, book, system) = fam_book;
            let touched = if v6 { &mut touched6 } else { &mut touched4 };
            match &p.spec {
                Some(spec) => {
                    let Some(port) = self.ports.get(spec.port) else {
                        continue;
                    };
                    let adj = Adjacency::new(spec.port as u16, port.mtu, spec.mac, port.mac);
                    let adjacency = match self.neighbours.get_mut(ip) {
                        Some(n) => {
                            book.set_adjacency(n.adjacency, adj);
                            n.spec = spec.clone();
                            n.adjacency
                        }
                        None => {
                            let a = book.add_adjacency(adj);
                            self.neighbours.insert(
                                *ip,
                                StaticNeighbour {
                                    spec: spec.clone(),
                                    adjacency: a,
                                },
                            );
                            host_adds.push((v6, addr));
                            a
                        }
                    };
                    book.reach_gateway(addr, (spec.port as u16, Some(adjacency)));
                }
                None => {
                    let Some(n) = self.neighbours.remove(ip) else {
                        continue;
                    };
                    retired_adjacencies.push((v6, n.adjacency));
                    if let Some(port) = net.connected_port(addr) {
                        unpinned_gateways.push((v6, addr, port));
                    }
                    let key = (addr, net.bits);
                    if let Some(id) = system.get_mut(&key).and_then(|s| s.neighbour.take()) {
                        released.push((v6, id));
                        touched.push(key);
                    }
                }
            }
        }
        let neighbours = &self.neighbours;
        stage_family(
            &mut self.v4,
            neighbours,
            plan.routes4,
            &host_adds,
            false,
            &mut touched4,
            &mut released,
        );
        stage_family(
            &mut self.v6,
            neighbours,
            plan.routes6,
            &host_adds,
            true,
            &mut touched6,
            &mut released,
        );
        stage_nodes(
            &mut self.v4,
            plan.nodes.v4,
            false,
            &mut touched4,
            &mut released,
        );
        stage_nodes(
            &mut self.v6,
            plan.nodes.v6,
            true,
            &mut touched6,
            &mut released,
        );
        self.v4.book.publish();
        self.v6.book.publish();
        write_fib(&mut self.v4, touched4);
        write_fib(&mut self.v6, touched6);
        if !unpinned_gateways.is_empty() {
            for (v6, addr, port) in unpinned_gateways {
                let book = if v6 {
                    &mut self.v6.book
                } else {
                    &mut self.v4.book
                };
                book.reach_gateway(addr, (port, None));
            }
            self.v4.book.publish();
            self.v6.book.publish();
        }
        let epoch = self.domain.advance();
        for (v6, id) in released {
            let book = if v6 {
                &mut self.v6.book
            } else {
                &mut self.v4.book
            };
            book.release(id, epoch);
        }
        for (v6, a) in retired_adjacencies {
            let book = if v6 {
                &mut self.v6.book
            } else {
                &mut self.v4.book
            };
            book.retire_adjacency(a, epoch);
        }
        self.version += 1;
        Ok(Applied {
            version: self.version,
            epoch,
        })
    }

    /// Record one change in `plan`, checking what it says on its own and against the state
    /// the earlier changes of the batch lead to.
    fn stage(&self, item: usize, change: &Change, plan: &mut Plan) -> Result<(), BatchError> {
        match change {
            Change::AddRoute(r) | Change::ReplaceRoute(r) => {
                let (v6, key) = self.route_key(item, r.prefix, r.len)?;
                let hop = self.hop_key(item, v6, r)?;
                let routes = if v6 {
                    &mut plan.routes6
                } else {
                    &mut plan.routes4
                };
                if matches!(change, Change::AddRoute(_)) {
                    let exists = match routes.get(&key) {
                        Some(p) => p.key.is_some(),
                        None => self.family_has(v6, key),
                    };
                    if exists {
                        return Err(BatchError::at(
                            item,
                            "prefix",
                            Exists,
                            format!(
                                "route {}/{} exists already; replace it (PUT) to change it",
                                r.prefix, r.len
                            ),
                        ));
                    }
                }
                routes.insert(
                    key,
                    RoutePlan {
                        item,
                        key: Some(hop),
                    },
                );
            }
            Change::DeleteRoute { prefix, len } => {
                let (v6, key) = self.route_key(item, *prefix, *len)?;
                let routes = if v6 {
                    &mut plan.routes6
                } else {
                    &mut plan.routes4
                };
                let exists = match routes.get(&key) {
                    Some(p) => p.key.is_some(),
                    None => self.family_has(v6, key),
                };
                if !exists {
                    return Err(BatchError::at(
                        item,
                        "prefix",
                        NotFound,
                        format!("there is no route {prefix}/{len}"),
                    ));
                }
                routes.insert(key, RoutePlan { item, key: None });
            }
            Change::AddNeighbour(n) | Change::ReplaceNeighbour(n) => {
                self.check_neighbour(item, n)?;
                if matches!(change, Change::AddNeighbour(_)) {
                    let exists = match plan.neighbours.get(&n.ip) {
                        Some(p) => p.spec.is_some(),
                        None => self.neighbours.contains_key(&n.ip),
                    };
                    if exists {
                        return Err(BatchError::at(
                            item,
                            "ip",
                            Exists,
                            format!(
                                "static neighbour {} exists already; replace it (PUT) to change it",
                                n.ip
                            ),
                        ));
                    }
                }
                plan.neighbours.insert(
                    n.ip,
                    NeighbourPlan {
                        item,
                        spec: Some(n.clone()),
                    },
                );
            }
            Change::DeleteNeighbour(ip) => {
                let exists = match plan.neighbours.get(ip) {
                    Some(p) => p.spec.is_some(),
                    None => self.neighbours.contains_key(ip),
                };
                if !exists {
                    return Err(BatchError::at(
                        item,
                        "ip",
                        NotFound,
                        format!("there is no static neighbour {ip}"),
                    ));
                }
                plan.neighbours
                    .insert(*ip, NeighbourPlan { item, spec: None });
            }
            Change::SetNodeRoute(r) => {
                self.stage_node(item, r.prefix, r.len, Some(r), &mut plan.nodes)?;
            }
            Change::DeleteNodeRoute { prefix, len } => {
                self.stage_node(item, *prefix, *len, None, &mut plan.nodes)?;
            }
        }
        Ok(())
    }

    fn family_has(&self, v6: bool, key: (u128, u8)) -> bool {
        if v6 {
            self.v6.user.contains_key(&key)
        } else {
            self.v4.user.contains_key(&key)
        }
    }

    /// The table key of `prefix/len`, refusing bad lengths and host bits.
    pub(super) fn route_key(
        &self,
        item: usize,
        prefix: IpAddr,
        len: u8,
    ) -> Result<(bool, (u128, u8)), BatchError> {
        let (v6, p) = to_u128(prefix);
        let bits = if v6 { 128 } else { 32 };
        if len > bits {
            return Err(BatchError::at(
                item,
                "len",
                Invalid,
                format!(
                    "prefix length {len} is out of range; an IP{} prefix length is 0..={bits}",
                    if v6 { "v6" } else { "v4" }
                ),
            ));
        }
        let net = mask(p, len, bits);
        if net != p {
            return Err(BatchError::at(
                item,
                "prefix",
                Invalid,
                format!(
                    "{prefix}/{len} has host bits set; the network is {}/{len}",
                    to_ip(v6, net)
                ),
            ));
        }
        Ok((v6, (p, len)))
    }

    /// The target of `r` as a next-hop key, checking each next hop on its own.
    fn hop_key(&self, item: usize, v6: bool, r: &Route) -> Result<HopKey, BatchError> {
        let hops = match &r.target {
            RouteTarget::Drop => return Ok(HopKey::Drop),
            RouteTarget::Via(h) => h,
        };
        let at = |message: String| BatchError::at(item, "via", Invalid, message);
        if hops.is_empty() || hops.len() > MAX_ECMP {
            return Err(at(format!(
                "route {}/{}: {} next hops; give 1 to {MAX_ECMP} (or drop)",
                r.prefix,
                r.len,
                hops.len()
            )));
        }
        let net = if v6 { &self.v6.net } else { &self.v4.net };
        let mut addrs = Vec::with_capacity(hops.len());
        for h in hops {
            let (hv6, a) = to_u128(*h);
            if hv6 != v6 {
                return Err(at(format!(
                    "route {}/{}: next hop {h} is not of the prefix's address family",
                    r.prefix, r.len
                )));
            }
            if !usable_unicast(*h) {
                return Err(at(format!(
                    "route {}/{}: next hop {h} is not a unicast address a neighbour can have",
                    r.prefix, r.len
                )));
            }
            if net.own.contains(&a) {
                return Err(at(format!(
                    "route {}/{}: next hop {h} is an address of vecplane itself",
                    r.prefix, r.len
                )));
            }
            if addrs.contains(&a) {
                return Err(at(format!(
                    "route {}/{}: next hop {h} is given twice",
                    r.prefix, r.len
                )));
            }
            addrs.push(a);
        }
        Ok(HopKey::Hops(addrs.into_boxed_slice()))
    }

    /// A static neighbour on its own: its port exists and its address is usable.
    fn check_neighbour(&self, item: usize, n: &NeighbourSpec) -> Result<(), BatchError> {
        if self.ports.get(n.port).is_none() {
            return Err(BatchError::at(
                item,
                "port",
                Invalid,
                format!(
                    "static neighbour {}: there is no port {}; ports are 0..{}",
                    n.ip,
                    n.port,
                    self.ports.len()
                ),
            ));
        }
        if !usable_unicast(n.ip) {
            return Err(BatchError::at(
                item,
                "ip",
                Invalid,
                format!(
                    "static neighbour {}: not a unicast address a neighbour can have",
                    n.ip
                ),
            ));
        }
        let (v6, a) = to_u128(n.ip);
        let net = if v6 { &self.v6.net } else { &self.v4.net };
        if net.own.contains(&a) {
            return Err(BatchError::at(
                item,
                "ip",
                Invalid,
                format!("static neighbour {}: an address of vecplane itself", n.ip),
            ));
        }
        if n.mac[0] & 1 != 0 || n.mac == [0; 6] {
            return Err(BatchError::at(
                item,
                "mac",
                Invalid,
                format!(
                    "static neighbour {}: {} is not a unicast MAC address",
                    n.ip,
                    packet::headers::format_mac(&n.mac)
                ),
            ));
        }
        Ok(())
    }

    /// Check the final state of one family: next hops reachable, neighbours still needed kept,
    /// and room in the tables.
    fn check_family<S: FibStore>(
        &self,
        fam: &Family<S>,
        (routes, nodes): (&RoutePlans, &NodePlanMap),
        neighbours: &BTreeMap<IpAddr, NeighbourPlan>,
    ) -> Result<(), BatchError> {
        let v6 = fam.net.v6();
        let final_port = |a: u128| -> Option<u16> {
            let ip = to_ip(v6, a);
            match neighbours.get(&ip) {
                Some(p) => p.spec.as_ref().map(|s| s.port as u16),
                None => self.neighbours.get(&ip).map(|n| n.spec.port as u16),
            }
            .or_else(|| fam.net.connected_port(a))
        };
        for (&(p, len), plan) in routes {
            if let Some(HopKey::Hops(addrs)) = &plan.key {
                for a in addrs.iter() {
                    if final_port(*a).is_none() {
                        return Err(BatchError::at(
                            plan.item,
                            "via",
                            Conflict,
                            format!(
                                "route {}/{len}: next hop {} is neither a static neighbour nor \
                                 inside a port's prefix",
                                to_ip(v6, p),
                                to_ip(v6, *a)
                            ),
                        ));
                    }
                }
            }
        }
        // Static neighbours deleted here whose address no port's prefix holds: no route may
        // keep them as a next hop.
        let orphans: HashSet<u128> = neighbours
            .iter()
            .filter(|(_, p)| p.spec.is_none())
            .map(|(ip, _)| to_u128(*ip))
            .filter(|(f, a)| *f == v6 && fam.net.connected_port(*a).is_none())
            .map(|(_, a)| a)
            .collect();
        if !orphans.is_empty() {
            let mut leaving: HashMap<u128, u32> = HashMap::new();
            for key in routes.keys() {
                if let Some(&id) = fam.user.get(key) {
                    for a in fam.book.hops(id) {
                        if orphans.contains(a) {
                            *leaving.entry(*a).or_default() += 1;
                        }
                    }
                }
            }
            for a in &orphans {
                // Its own host route goes with it.
                let users = fam.book.routes_via(*a).saturating_sub(1);
                let left = users.saturating_sub(leaving.get(a).copied().unwrap_or(0));
                if left > 0 {
                    let ip = to_ip(v6, *a);
                    let item = neighbours.get(&ip).map_or(0, |p| p.item);
                    return Err(BatchError::at(
                        item,
                        "ip",
                        Conflict,
                        format!(
                            "static neighbour {ip} is the next hop of {left} route(s) and no \
                             port's prefix holds it; delete or change those routes first (or in \
                             the same batch)"
                        ),
                    ));
                }
            }
        }
        // Room: new next-hop ids and gateways, and tbl8 groups.
        let mut new_keys: HashSet<&HopKey> = routes
            .values()
            .filter_map(|p| p.key.as_ref())
            .filter(|k| !fam.book.has(k))
            .collect();
        let host_keys: Vec<HopKey> = neighbours
            .iter()
            .filter(|(ip, p)| p.spec.is_some() && !self.neighbours.contains_key(ip))
            .map(|(ip, _)| to_u128(*ip))
            .filter(|(f, _)| *f == v6)
            .map(|(_, a)| HopKey::Hops(Box::new([a])))
            .collect();
        new_keys.extend(host_keys.iter().filter(|k| !fam.book.has(k)));
        new_keys.extend(
            nodes
                .values()
                .filter_map(|p| p.target.as_ref().map(|t| &t.0))
                .filter(|k| !fam.book.has(k)),
        );
        let family = if v6 { "IPv6" } else { "IPv4" };
        if new_keys.len() > fam.book.entries_available() {
            return Err(BatchError {
                item: None,
                field: None,
                message: format!(
                    "the batch needs {} new {family} next-hop entries (distinct next-hop sets) \
                     and {} are left; routes sharing next hops share an entry",
                    new_keys.len(),
                    fam.book.entries_available()
                ),
                kind: NoRoom,
            });
        }
        let new_gateways: HashSet<u128> = new_keys
            .iter()
            .filter_map(|k| match k {
                HopKey::Hops(a) => Some(a.iter().copied()),
                _ => None,
            })
            .flatten()
            .filter(|a| !fam.book.has_gateway(*a))
            .collect();
        if new_gateways.len() > fam.book.gateways_available() {
            return Err(BatchError {
                item: None,
                field: None,
                message: format!(
                    "the batch needs {} new {family} next-hop addresses and {} are left",
                    new_gateways.len(),
                    fam.book.gateways_available()
                ),
                kind: NoRoom,
            });
        }
        let additions = routes
            .iter()
            .filter(|(_, p)| p.key.is_some())
            .map(|(k, _)| *k)
            .chain(
                nodes
                    .iter()
                    .filter(|(_, p)| p.target.is_some())
                    .map(|(k, _)| *k),
            )
            .chain(
                host_keys
                    .iter()
                    .filter_map(|k| match k {
                        HopKey::Hops(a) => a.first().copied(),
                        _ => None,
                    })
                    .map(|a| (a, fam.net.bits)),
            );
        fam.fib.check_room(additions).map_err(|e| BatchError {
            item: None,
            field: None,
            message: e.to_string(),
            kind: NoRoom,
        })
    }
}

/// Take next-hop ids for the routes of `plan` and the host routes of new neighbours, note the
/// ids they replace in `released` and the prefixes to rewrite in `touched`.
fn stage_family<S: FibStore>(
    fam: &mut Family<S>,
    neighbours: &BTreeMap<IpAddr, StaticNeighbour>,
    plan: HashMap<(u128, u8), RoutePlan>,
    host_adds: &[(bool, u128)],
    v6: bool,
    touched: &mut Vec<(u128, u8)>,
    released: &mut Vec<(bool, u32)>,
) {
    let Family {
        net,
        book,
        user,
        system,
        ..
    } = fam;
    let reach = |a: u128| net.reach(neighbours, a);
    touched.reserve(plan.len());
    for (key, p) in plan {
        let new = p.key.and_then(|k| book.acquire(&k, &reach));
        let old = match new {
            Some(id) => user.insert(key, id),
            None => user.remove(&key),
        };
        if let Some(old) = old {
            released.push((v6, old));
        }
        touched.push(key);
    }
    for &(f, a) in host_adds {
        if f != v6 {
            continue;
        }
        if let Some(id) = book.acquire(&HopKey::Hops(Box::new([a])), &reach) {
            let key = (a, net.bits);
            system.entry(key).or_default().neighbour = Some(id);
            touched.push(key);
        }
    }
}

/// Write the effective next hop of every touched prefix: additions first, shortest prefix
/// first (each entry painted about once; a block keeps its tbl8 group while it changes), then
/// removals; then publish (IPv6).
pub(super) fn write_fib<S: FibStore>(fam: &mut Family<S>, mut touched: Vec<(u128, u8)>) {
    let mut writes: Vec<(bool, u8, u128, Option<u32>)> = touched
        .drain(..)
        .map(|k| {
            let eff = fam.effective(k);
            (eff.is_none(), k.1, k.0, eff)
        })
        .collect();
    writes.sort_unstable_by_key(|w| (w.0, w.1, w.2));
    writes.dedup_by_key(|w| (w.1, w.2));
    for (_, len, prefix, id) in writes {
        // Cannot fail: lengths, ids and room were checked before anything changed.
        let _ = fam.fib.set(prefix, len, id);
    }
    let _ = fam.fib.commit();
}

/// Whether `ip` is an address a neighbour or next hop can have (not unspecified, loopback,
/// multicast or broadcast).
fn usable_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            !(a.is_unspecified() || a.is_loopback() || a.is_multicast() || a.is_broadcast())
        }
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_loopback() || a.is_multicast()),
    }
}

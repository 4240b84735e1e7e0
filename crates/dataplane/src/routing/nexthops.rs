//! `NextHopBook`: the control side of one family's next-hop table. Owns the master copy, the
//! dedup map from "what a route points at" to a next-hop id, the reference counts that say when
//! an entry, a gateway, an ECMP member range or a static adjacency is no longer used, and their
//! retirement until every worker passed a grace period. Never touched by a worker: workers read
//! the snapshots it publishes.

use live::{Domain, Publisher, Reader};
use nodes::adjacency::{Adjacency, Gateway, NextHop, NextHopTable, GATEWAY_MEMBER, MAX_GATEWAYS};
use std::collections::{HashMap, VecDeque};

/// Largest next-hop id a FIB entry holds (15 bits in the IPv4 table).
pub const MAX_NEXT_HOP_ID: u32 = fib::Ip4Fib::MAX_NEXT_HOP;

/// What an entry is, for deduplication: equal keys share one id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum HopKey {
    /// A blackhole.
    Drop,
    /// An own address.
    Local,
    /// A connected prefix on a port, with its host bits.
    Glean(u16, u8),
    /// Next-hop addresses (one, or several for ECMP, in route order).
    Hops(Box<[u128]>),
    /// A graph node: the lookup's target `.0`, with tag `.1` (a feature's route).
    Node(u16, u32),
}

/// Items unlinked at an epoch, waiting until every worker passed it.
pub(crate) struct Retired<T>(VecDeque<(u64, T)>);

impl<T> Retired<T> {
    pub(crate) fn new() -> Retired<T> {
        Retired(VecDeque::new())
    }

    pub(crate) fn push(&mut self, epoch: u64, item: T) {
        self.0.push_back((epoch, item));
    }

    /// Hand every item whose grace period elapsed to `free`.
    pub(crate) fn drain_safe(&mut self, domain: &Domain, mut free: impl FnMut(T)) {
        while self.0.front().is_some_and(|(e, _)| domain.is_safe(*e)) {
            if let Some((_, item)) = self.0.pop_front() {
                free(item);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// One entry id's use.
#[derive(Clone, Debug, Default)]
struct EntryUse {
    key: Option<HopKey>,
    routes: u32,
}

/// One gateway index's use.
#[derive(Clone, Copy, Debug)]
struct GatewayUse {
    /// Routes whose next hops include it.
    routes: u32,
    gateway: Gateway,
}

/// How a next-hop address is reached: its port, and its static adjacency if it is a static
/// neighbour.
pub(crate) type Reach = (u16, Option<u32>);

/// The control side of one family's next-hop table.
pub(crate) struct NextHopBook {
    domain: Domain,
    table: NextHopTable,
    publisher: Publisher<NextHopTable>,
    dirty: bool,
    entry_of: HashMap<HopKey, u32>,
    entries: Vec<EntryUse>,
    free_entries: Vec<u32>,
    retired_entries: Retired<u32>,
    gateway_of: HashMap<u128, u32>,
    gateways: Vec<GatewayUse>,
    free_gateways: Vec<u32>,
    retired_gateways: Retired<u32>,
    /// Free ECMP member ranges by member count.
    free_members: HashMap<u32, Vec<u32>>,
    retired_members: Retired<(u32, u32)>,
    free_adjacencies: Vec<u32>,
    retired_adjacencies: Retired<u32>,
}

impl NextHopBook {
    pub(crate) fn new(domain: &Domain) -> NextHopBook {
        let table = NextHopTable::new();
        NextHopBook {
            domain: domain.clone(),
            publisher: Publisher::new(table.clone(), domain),
            table,
            dirty: false,
            entry_of: HashMap::new(),
            entries: vec![EntryUse::default()],
            free_entries: Vec::new(),
            retired_entries: Retired::new(),
            gateway_of: HashMap::new(),
            gateways: Vec::new(),
            free_gateways: Vec::new(),
            retired_gateways: Retired::new(),
            free_members: HashMap::new(),
            retired_members: Retired::new(),
            free_adjacencies: Vec::new(),
            retired_adjacencies: Retired::new(),
        }
    }

    /// A reader for one worker.
    pub(crate) fn reader(&self) -> Reader<NextHopTable> {
        self.publisher.reader()
    }

    /// Move what every worker has moved past to the free lists, and free old snapshots.
    pub(crate) fn reclaim(&mut self) {
        let d = &self.domain;
        self.retired_entries
            .drain_safe(d, |id| self.free_entries.push(id));
        self.retired_gateways
            .drain_safe(d, |g| self.free_gateways.push(g));
        let members = &mut self.free_members;
        self.retired_members
            .drain_safe(d, |(first, n)| members.entry(n).or_default().push(first));
        self.retired_adjacencies
            .drain_safe(d, |a| self.free_adjacencies.push(a));
        self.publisher.reclaim();
    }

    /// Whether `key` has an id now.
    pub(crate) fn has(&self, key: &HopKey) -> bool {
        self.entry_of.contains_key(key)
    }

    /// Whether `addr` has a gateway now.
    pub(crate) fn has_gateway(&self, addr: u128) -> bool {
        self.gateway_of.contains_key(&addr)
    }

    /// Ids that `acquire` can still create (after `reclaim`).
    pub(crate) fn entries_available(&self) -> usize {
        self.free_entries.len() + (MAX_NEXT_HOP_ID as usize + 1).saturating_sub(self.table.len())
    }

    /// The gateways routes use now: (address, port, static adjacency).
    pub(crate) fn gateways_in_use(&self) -> Vec<(u128, u16, Option<u32>)> {
        self.gateway_of
            .iter()
            .filter_map(|(&a, &g)| self.gateways.get(g as usize).map(|u| (a, u.gateway)))
            .map(|(a, g)| (a, g.port, g.adjacency))
            .collect()
    }

    /// Gateways that can still be created (after `reclaim`).
    pub(crate) fn gateways_available(&self) -> usize {
        self.free_gateways.len() + MAX_GATEWAYS.saturating_sub(self.gateways.len())
    }

    /// Routes using next-hop address `addr` now.
    pub(crate) fn routes_via(&self, addr: u128) -> u32 {
        self.gateway_of
            .get(&addr)
            .and_then(|g| self.gateways.get(*g as usize))
            .map_or(0, |g| g.routes)
    }

    /// The key of entry `id` (None: free or unknown).
    pub(crate) fn key(&self, id: u32) -> Option<&HopKey> {
        self.entries.get(id as usize).and_then(|e| e.key.as_ref())
    }

    /// Entries in use.
    pub(crate) fn entries_in_use(&self) -> usize {
        self.entry_of.len()
    }

    /// Add a static adjacency (a configured neighbour); returns its index.
    pub(crate) fn add_adjacency(&mut self, adj: Adjacency) -> u32 {
        self.dirty = true;
        match self.free_adjacencies.pop() {
            Some(a) => {
                self.table.set_adjacency(a, adj);
                a
            }
            None => self.table.add_adjacency(adj),
        }
    }

    /// Change a static adjacency in place (a neighbour's new MAC or port).
    pub(crate) fn set_adjacency(&mut self, index: u32, adj: Adjacency) {
        self.dirty = true;
        self.table.set_adjacency(index, adj);
    }

    /// Retire a static adjacency no gateway names any more.
    pub(crate) fn retire_adjacency(&mut self, index: u32, epoch: u64) {
        self.retired_adjacencies.push(epoch, index);
    }

    /// Point the gateway of `addr`, if there is one, at `reach` (a neighbour added, changed
    /// or deleted); workers' resolution caches notice by the new generation.
    pub(crate) fn reach_gateway(&mut self, addr: u128, reach: Reach) {
        let Some(&g) = self.gateway_of.get(&addr) else {
            return;
        };
        if let Some(u) = self.gateways.get_mut(g as usize) {
            u.gateway = Gateway {
                port: reach.0,
                addr,
                adjacency: reach.1,
                generation: u.gateway.generation.wrapping_add(1),
            };
            self.table.set_gateway(g, u.gateway);
            self.dirty = true;
        }
    }

    /// The gateway index of `addr`, created (reached as `reach` says) when new.
    fn gateway(&mut self, addr: u128, reach: &impl Fn(u128) -> Option<Reach>) -> Option<u32> {
        if let Some(&g) = self.gateway_of.get(&addr) {
            return Some(g);
        }
        let (port, adjacency) = reach(addr)?;
        let mut gateway = Gateway {
            port,
            addr,
            adjacency,
            generation: 0,
        };
        let g = match self.free_gateways.pop() {
            Some(g) => {
                let u = self.gateways.get_mut(g as usize)?;
                gateway.generation = u.gateway.generation.wrapping_add(1);
                *u = GatewayUse { routes: 0, gateway };
                self.table.set_gateway(g, gateway);
                g
            }
            None => {
                let g = self.table.add_gateway(gateway)?;
                self.gateways.push(GatewayUse { routes: 0, gateway });
                g
            }
        };
        self.gateway_of.insert(addr, g);
        self.dirty = true;
        Some(g)
    }

    /// The id of `key` for one more route, created when new (its gateways reached as `reach`
    /// says). None when no id or gateway is left or a next hop cannot be reached: callers
    /// check `entries_available`, `gateways_available` and reachability first.
    pub(crate) fn acquire(
        &mut self,
        key: &HopKey,
        reach: &impl Fn(u128) -> Option<Reach>,
    ) -> Option<u32> {
        let id = match self.entry_of.get(key) {
            Some(&id) => id,
            None => self.create(key, reach)?,
        };
        if let HopKey::Hops(addrs) = key {
            for a in addrs.iter() {
                if let Some(u) = self
                    .gateway_of
                    .get(a)
                    .and_then(|g| self.gateways.get_mut(*g as usize))
                {
                    u.routes += 1;
                }
            }
        }
        if let Some(e) = self.entries.get_mut(id as usize) {
            e.routes += 1;
        }
        Some(id)
    }

    fn create(&mut self, key: &HopKey, reach: &impl Fn(u128) -> Option<Reach>) -> Option<u32> {
        let entry = match key {
            HopKey::Drop => NextHop::Drop,
            HopKey::Local => NextHop::Local,
            HopKey::Glean(port, host_bits) => NextHop::Glean {
                port: *port,
                host_bits: *host_bits,
            },
            HopKey::Node(slot, tag) => NextHop::Node {
                slot: *slot,
                tag: *tag,
            },
            HopKey::Hops(addrs) => {
                let mut members = Vec::with_capacity(addrs.len());
                for a in addrs.iter() {
                    members.push(self.gateway(*a, reach)? | GATEWAY_MEMBER);
                }
                match members.as_slice() {
                    [one] => NextHop::Gateway(one & !GATEWAY_MEMBER),
                    _ => {
                        let count = members.len() as u32;
                        let at = self.free_members.get_mut(&count).and_then(Vec::pop);
                        let first = self.table.put_members(at, &members);
                        NextHop::Ecmp { first, count }
                    }
                }
            }
        };
        let id = match self.free_entries.pop() {
            Some(id) => {
                self.table.set_entry(id, entry);
                id
            }
            None => {
                if self.table.len() > MAX_NEXT_HOP_ID as usize {
                    return None;
                }
                self.entries.push(EntryUse::default());
                self.table.add_entry(entry)
            }
        };
        if let Some(e) = self.entries.get_mut(id as usize) {
            *e = EntryUse {
                key: Some(key.clone()),
                routes: 0,
            };
        }
        self.entry_of.insert(key.clone(), id);
        self.dirty = true;
        Some(id)
    }

    /// One route less uses `id`. An unused entry, and gateways only it used, are retired at
    /// `epoch` (an epoch advanced after the FIB stopped naming them).
    pub(crate) fn release(&mut self, id: u32, epoch: u64) {
        let Some(e) = self.entries.get_mut(id as usize) else {
            return;
        };
        e.routes = e.routes.saturating_sub(1);
        let Some(key) = e.key.clone() else {
            return;
        };
        if let HopKey::Hops(addrs) = &key {
            for a in addrs.iter() {
                let Some(&g) = self.gateway_of.get(a) else {
                    continue;
                };
                if let Some(u) = self.gateways.get_mut(g as usize) {
                    u.routes = u.routes.saturating_sub(1);
                    if u.routes == 0 {
                        self.gateway_of.remove(a);
                        self.retired_gateways.push(epoch, g);
                        // A new generation tells the workers' caches to let go of the
                        // neighbour entry they pinned for it (`GatewayCache::sweep`).
                        u.gateway.generation = u.gateway.generation.wrapping_add(1);
                        self.table.set_gateway(g, u.gateway);
                        self.dirty = true;
                    }
                }
            }
        }
        let unused = e.routes == 0;
        // Drop, local, glean and node entries are few and fixed: kept for good.
        if !unused || !matches!(key, HopKey::Hops(_)) {
            return;
        }
        e.key = None;
        self.entry_of.remove(&key);
        self.retired_entries.push(epoch, id);
        if let NextHop::Ecmp { first, count } = self.table.entry(id) {
            self.retired_members.push(epoch, (first, count));
        }
    }

    /// Publish the master table if it changed since the last publication.
    pub(crate) fn publish(&mut self) {
        if self.dirty {
            self.publisher.publish(self.table.clone());
            self.dirty = false;
        }
    }

    /// Next-hop addresses of entry `id` (empty for drop/local/glean).
    pub(crate) fn hops(&self, id: u32) -> &[u128] {
        match self.key(id) {
            Some(HopKey::Hops(a)) => a,
            _ => &[],
        }
    }

    /// Items waiting for a grace period (entries, gateways, member ranges, adjacencies).
    pub(crate) fn retired(&self) -> usize {
        self.retired_entries.len()
            + self.retired_gateways.len()
            + self.retired_members.len()
            + self.retired_adjacencies.len()
    }
}

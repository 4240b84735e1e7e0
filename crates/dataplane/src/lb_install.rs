//! How a load-balancer change reaches the workers beyond its tables snapshot: each VIP prefix
//! is a node route to `lb` in the routing tables (`routing::NodeRoute`, source `lb`), so only
//! packets to a VIP address visit the `lb` node; the workers' flow tables are allocated with
//! the first VIP and left in their `TableSlot`s; the NAT inside ports are steered to `lb` by
//! the IP inputs while NAT VIPs of their family exist. The order of one change, under the LB
//! lock and then the routing lock (never the other way):
//!
//! 1. everything that can fail is checked first: the routes (a VIP on an own address is
//!    refused), the flow tables (allocated before anything changes);
//! 2. the routes of VIP prefixes that go are deleted, so no worker is routed to a VIP its
//!    tables no longer have (a configured route of the same prefix comes back with it);
//! 3. the tables snapshot is published and the steering set;
//! 4. the routes of new VIP prefixes are added, to tables every worker will read with them.
//!
//! A route of the `lb` source wins over a configured route, a connected prefix and a static
//! neighbour of the same prefix, as VPP's `lb` FIB source (priority "high") does over the API
//! and CLI sources; own addresses win over it (VPP's interface source): a VIP on one is
//! refused. Nothing here runs on a worker.

use super::{LbApplyError, LbControl};
use crate::routing::{Change, NodeRoute, Routing};
use ::lb::model::{Encap, LbCommand, LbState};
use ::lb::snapshot::LbTables;
use nodes::lb::{TableSlot, WorkerTables, LB, VIP_ROUTE};
use nodes::steer::PortSteer;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

/// The distinct VIP prefixes of `state`.
fn vip_prefixes(state: &LbState) -> BTreeSet<(IpAddr, u8)> {
    state
        .vips()
        .map(|v| (v.spec.key.prefix.addr(), v.spec.key.prefix.prefix_len()))
        .collect()
}

/// The route changes that take `old`'s VIP prefixes to `new`'s: deletions, then additions.
fn route_changes(old: &LbState, new: &LbState) -> (Vec<Change>, Vec<Change>) {
    let (a, b) = (vip_prefixes(old), vip_prefixes(new));
    let gone = a
        .difference(&b)
        .map(|&(prefix, len)| Change::DeleteNodeRoute { prefix, len })
        .collect();
    let added = b
        .difference(&a)
        .map(|&(prefix, len)| {
            Change::SetNodeRoute(NodeRoute {
                prefix,
                len,
                node: LB,
                tag: VIP_ROUTE,
            })
        })
        .collect();
    (gone, added)
}

/// The index of the command of `cmds` that adds a VIP on `prefix/len` (else the last one).
fn command_of(cmds: &[LbCommand], prefix: IpAddr, len: u8) -> usize {
    cmds.iter()
        .position(|c| {
            matches!(c, LbCommand::AddVip(v)
                if v.key.prefix.addr() == prefix && v.key.prefix.prefix_len() == len)
        })
        .unwrap_or(cmds.len().saturating_sub(1))
}

/// Steer to `lb` the NAT inside ports of `state` (every port when a family has none, as
/// `NatInside` translates) for each family that has a NAT VIP.
pub(super) fn set_steer(steer: &PortSteer, state: &LbState, ports: &[String]) {
    let has = |nat6: bool| {
        state.vips().any(|v| match v.spec.encap {
            Encap::Nat4 { .. } => !nat6,
            Encap::Nat6 { .. } => nat6,
            _ => false,
        })
    };
    let family = |nat6: bool| -> Vec<bool> {
        let inside = state.nat_inside(nat6);
        ports
            .iter()
            // "": an id no port has.
            .map(|p| has(nat6) && !p.is_empty() && (inside.is_empty() || inside.contains(p)))
            .collect()
    };
    steer.set(&family(false), &family(true));
}

fn lock(r: &Mutex<Routing>) -> MutexGuard<'_, Routing> {
    crate::build::lock(r)
}

impl LbControl {
    /// Route the VIP prefixes of the current state (and of every later one) in `routing`.
    pub(super) fn with_routing(
        mut self,
        routing: Arc<Mutex<Routing>>,
    ) -> Result<LbControl, LbApplyError> {
        {
            let g = self.lock();
            let (_, added) = route_changes(&LbState::new(), &g.state);
            let mut r = lock(&routing);
            r.load(&added).map_err(|e| LbApplyError::Route {
                index: 0,
                message: e.message,
            })?;
        }
        self.routing = Some(routing);
        Ok(self)
    }

    /// Worker `worker`'s slot for its flow tables (the build calls this once per worker's `lb`
    /// node): filled now when VIPs exist already, else when the first comes.
    pub fn table_slot(&self, worker: usize) -> Result<Option<Arc<TableSlot>>, LbApplyError> {
        let mut g = self.lock();
        let Some(c) = g.claimed.get_mut(worker) else {
            return Ok(None);
        };
        *c = true;
        let state = g.state.clone();
        self.provide_tables(&mut g, &state, 0)?;
        Ok(self.slots.get(worker).cloned())
    }

    /// Give each claimed worker slot its flow tables once `state` has a VIP (before the
    /// snapshot with that VIP is published: a worker finds them when it first sees it).
    fn provide_tables(
        &self,
        g: &mut super::Inner,
        state: &LbState,
        index: usize,
    ) -> Result<(), LbApplyError> {
        if state.vips().next().is_none() {
            return Ok(());
        }
        let entries = state.conf().buckets;
        for w in 0..g.claimed.len() {
            if !g.claimed[w] || g.provided[w] {
                continue;
            }
            let t = WorkerTables::new(entries as usize).map_err(|e| LbApplyError::FlowTables {
                index,
                entries,
                reason: e.to_string(),
            })?;
            if let Some(c) = self.counters.get(w) {
                c.flow_table_entries.set(t.capacity() as u64);
            }
            if let Some(s) = self.slots.get(w) {
                s.put(t);
            }
            g.provided[w] = true;
        }
        Ok(())
    }

    /// Whether `next`'s VIP prefixes can be routed (nothing changes).
    pub(super) fn check_routes(
        &self,
        current: &LbState,
        next: &LbState,
        cmds: &[LbCommand],
    ) -> Result<(), LbApplyError> {
        let Some(routing) = &self.routing else {
            return Ok(());
        };
        let (mut all, added) = route_changes(current, next);
        all.extend(added);
        lock(routing).check(&all).map_err(|e| {
            let index = e
                .item
                .and_then(|i| all.get(i))
                .map_or(cmds.len().saturating_sub(1), |c| match c {
                    Change::SetNodeRoute(r) => command_of(cmds, r.prefix, r.len),
                    _ => cmds.len().saturating_sub(1),
                });
            LbApplyError::Route {
                index,
                message: e.message,
            }
        })
    }

    /// Make `next` (whose snapshot is `tables`) the running state, in the order of the module
    /// header; returns its version. Nothing changes when a check fails.
    pub(super) fn commit(
        &self,
        g: &mut super::Inner,
        next: LbState,
        tables: LbTables,
        cmds: &[LbCommand],
    ) -> Result<u64, LbApplyError> {
        if next == g.state {
            return Ok(next.version());
        }
        self.check_routes(&g.state, &next, cmds)?;
        let first_vip = cmds
            .iter()
            .position(|c| matches!(c, LbCommand::AddVip(_)))
            .unwrap_or(0);
        self.provide_tables(g, &next, first_vip)?;
        let (gone, added) = route_changes(&g.state, &next);
        // Checked above, under the same locks: these cannot fail.
        let mut routing = self.routing.as_deref().map(lock);
        if let Some(r) = routing.as_mut().filter(|_| !gone.is_empty()) {
            let _ = r.apply(&gone);
        }
        let version = self.install(g, next, tables);
        if let Some(r) = routing.as_mut().filter(|_| !added.is_empty()) {
            let _ = r.apply(&added);
        }
        Ok(version)
    }

    /// Mark whether the config has `[lb]` (a reload that added it).
    pub fn set_configured(&self, configured: bool) {
        self.configured.store(configured, Ordering::Relaxed);
    }

    /// The state a reload that removes `[lb]` leads to: the empty configuration (the memory
    /// budget's workers kept), or why not: VIPs exist (they are not deleted behind the
    /// operator's back: delete them, or keep `[lb]`).
    pub fn removal_target(&self) -> Result<LbState, LbApplyError> {
        let g = self.lock();
        let mut vips = g.state.vips();
        if let Some(first) = vips.next() {
            return Err(LbApplyError::InUse {
                vips: 1 + vips.count(),
                first: first.spec.key.to_string(),
            });
        }
        let budget = ::lb::model::MemoryBudget {
            limit: ::lb::model::DEFAULT_MEMORY_LIMIT,
            workers: g.state.memory_budget().workers,
        };
        Ok(LbState::new().with_memory_budget(budget))
    }
}

//! Node routes: routes a feature of the data plane owns (not configured, never listed as
//! configured), whose prefix hands packets to a graph node through `NextHop::Node`: the load
//! balancer's VIP prefixes to `lb`. They change through `Routing::apply` like any route
//! (`Change::SetNodeRoute`, `Change::DeleteNodeRoute`), so workers see them without stopping.
//! This file owns their staging and their listing; it never runs on a worker.

use super::apply::{BatchError, BatchErrorKind};
use super::fibstore::FibStore;
use super::nexthops::HopKey;
use super::{to_ip, to_u128, Family, Routing};
use std::collections::HashMap;
use std::net::IpAddr;

/// The graph nodes a node route may name; the lookup nodes are built with this list as their
/// targets (`IpLookup::with_targets`), and a route's slot is the node's index here.
pub const ROUTE_NODES: &[&str] = &[nodes::lb::LB];

/// A route owned by a feature: `prefix/len` hands its packets to graph node `node` (one of
/// `ROUTE_NODES`) with `tag` in their `next_scratch`. One per prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRoute {
    /// Network address (host bits zero).
    pub prefix: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// The node (also the route's source as `show` names it).
    pub node: &'static str,
    /// What the node finds in `next_scratch`.
    pub tag: u32,
}

/// A node route's final state in a batch: its next-hop key and node (None: deleted).
pub(super) struct NodePlan {
    pub(super) target: Option<(HopKey, &'static str)>,
}

/// The node routes a batch sets or deletes, by family.
#[derive(Default)]
pub(super) struct NodePlans {
    pub(super) v4: HashMap<(u128, u8), NodePlan>,
    pub(super) v6: HashMap<(u128, u8), NodePlan>,
}

impl NodePlans {
    fn of(&mut self, v6: bool) -> &mut HashMap<(u128, u8), NodePlan> {
        if v6 {
            &mut self.v6
        } else {
            &mut self.v4
        }
    }
}

impl Routing {
    /// Stage `SetNodeRoute(r)` (`Some`) or `DeleteNodeRoute` of `prefix/len` (`None`).
    pub(super) fn stage_node(
        &self,
        item: usize,
        prefix: IpAddr,
        len: u8,
        set: Option<&NodeRoute>,
        plans: &mut NodePlans,
    ) -> Result<(), BatchError> {
        let (v6, key) = self.route_key(item, prefix, len)?;
        let at = |field, kind, message| BatchError {
            item: Some(item),
            field: Some(field),
            message,
            kind,
        };
        let Some(r) = set else {
            let exists = match plans.of(v6).get(&key) {
                Some(p) => p.target.is_some(),
                None => self.family_node(v6, key).is_some(),
            };
            if !exists {
                return Err(at(
                    "prefix",
                    BatchErrorKind::NotFound,
                    format!("there is no node route {prefix}/{len}"),
                ));
            }
            plans.of(v6).insert(key, NodePlan { target: None });
            return Ok(());
        };
        let Some(slot) = ROUTE_NODES.iter().position(|n| *n == r.node) else {
            return Err(at(
                "node",
                BatchErrorKind::Invalid,
                format!(
                    "no route may name node `{}`; accepted: {}",
                    r.node,
                    ROUTE_NODES.join(", ")
                ),
            ));
        };
        let net = if v6 { &self.v6.net } else { &self.v4.net };
        if len == net.bits && net.own.contains(&key.0) {
            return Err(at(
                "prefix",
                BatchErrorKind::Conflict,
                format!(
                    "{prefix}/{len} is an address of vecplane itself, and own addresses take \
                     precedence over `{}` routes: its packets would never reach `{}`",
                    r.node, r.node
                ),
            ));
        }
        plans.of(v6).insert(
            key,
            NodePlan {
                target: Some((HopKey::Node(slot as u16, r.tag), r.node)),
            },
        );
        Ok(())
    }

    fn family_node(&self, v6: bool, key: (u128, u8)) -> Option<&(u32, &'static str)> {
        if v6 {
            self.v6.node.get(&key)
        } else {
            self.v4.node.get(&key)
        }
    }

    /// Node routes of one family (IPv6 when `v6`), in prefix order, starting after `after`
    /// (exclusive), at most `limit`.
    pub fn node_routes(
        &self,
        v6: bool,
        after: Option<(IpAddr, u8)>,
        limit: usize,
    ) -> Vec<NodeRoute> {
        let start = after.map(|(ip, len)| (to_u128(ip).1, len));
        if v6 {
            self.v6.node_routes(start, limit)
        } else {
            self.v4.node_routes(start, limit)
        }
    }

    /// The node route of `prefix/len`, if there is one.
    pub fn node_route(&self, prefix: IpAddr, len: u8) -> Option<NodeRoute> {
        let (v6, p) = to_u128(prefix);
        let (id, node) = *self.family_node(v6, (p, len))?;
        let book = if v6 { &self.v6.book } else { &self.v4.book };
        Some(NodeRoute {
            prefix,
            len,
            node,
            tag: node_tag(book.key(id)),
        })
    }

    /// Number of node routes (IPv4, IPv6).
    pub fn node_route_counts(&self) -> (usize, usize) {
        (self.v4.node.len(), self.v6.node.len())
    }
}

/// The tag of a node entry's key (0 for any other key).
fn node_tag(key: Option<&HopKey>) -> u32 {
    match key {
        Some(HopKey::Node(_, tag)) => *tag,
        _ => 0,
    }
}

impl<S: FibStore> Family<S> {
    fn node_routes(&self, start: Option<(u128, u8)>, limit: usize) -> Vec<NodeRoute> {
        let range = match start {
            Some(s) => self
                .node
                .range((std::ops::Bound::Excluded(s), std::ops::Bound::Unbounded)),
            None => self.node.range(..),
        };
        range
            .take(limit)
            .map(|(&(p, l), &(id, node))| NodeRoute {
                prefix: to_ip(self.net.v6(), p),
                len: l,
                node,
                tag: node_tag(self.book.key(id)),
            })
            .collect()
    }
}

/// Take next-hop ids for the node routes of `plans` (one family), note the ids they replace in
/// `released` and the prefixes to rewrite in `touched`.
pub(super) fn stage_nodes<S: FibStore>(
    fam: &mut Family<S>,
    plans: HashMap<(u128, u8), NodePlan>,
    v6: bool,
    touched: &mut Vec<(u128, u8)>,
    released: &mut Vec<(bool, u32)>,
) {
    for (key, p) in plans {
        let new = p
            .target
            .and_then(|(k, node)| fam.book.acquire(&k, &|_| None).map(|id| (id, node)));
        let old = match new {
            Some(v) => fam.node.insert(key, v),
            None => fam.node.remove(&key),
        };
        if let Some((old, _)) = old {
            released.push((v6, old));
        }
        touched.push(key);
    }
}

//! The routing table as `show ip fib` / `show ip6 fib` present it: the live routes (from
//! `Routing`, under its lock), their static neighbours, the ports' connected prefixes, and the
//! routes features own (a VIP prefix's route to `lb`: type `node`, source `lb`; a configured
//! route of the same prefix is listed too, marked as shadowed by it). Every
//! answer is one bounded page (at most `MAX_PAGE` entries, in prefix order, after a given
//! prefix), so listing a million-route table never holds more than a page in the daemon; a
//! lookup is at most one hash probe per prefix length. It never touches packets or workers.

use crate::config::{contains, mask};
use crate::table::{render, Align};
use dataplane::routing::{NodeRoute, Route, Routing};
use dataplane::{DataplaneSpec, NeighbourSpec, RouteTarget};
use packet::headers::format_mac;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::IpAddr;

/// Most text lines a FIB listing prints (`--json` pages through every entry).
pub(crate) const MAX_TEXT_LINES: usize = 1000;

/// Most entries one JSON page holds; `next` names where the following page starts.
pub const MAX_PAGE: usize = 10_000;

/// What a `show ip fib` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FibQuery {
    /// A page of the listing: the entries after `after` (from the start when None), at most
    /// `limit` of them.
    Page {
        /// The prefix the page starts after (`after PREFIX`).
        after: Option<String>,
        /// Most entries (`limit N`, 1..=`MAX_PAGE`; default `MAX_PAGE`).
        limit: usize,
    },
    /// The longest entry covering an address or prefix.
    Lookup(String),
}

#[derive(Clone, Debug)]
enum Kind {
    /// A feature's route to a graph node (the node is also its source).
    Node(&'static str),
    Via(Vec<IpAddr>),
    Drop,
    Connected(usize),
}

impl Kind {
    /// Order of entries of one prefix: the one in effect first.
    fn rank(&self) -> u8 {
        match self {
            Kind::Node(_) => 0,
            Kind::Via(_) | Kind::Drop => 1,
            Kind::Connected(_) => 2,
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    net: IpAddr,
    len: u8,
    kind: Kind,
    /// A configured route a node route of the same prefix overrides: that route's source.
    shadowed_by: Option<&'static str>,
}

impl Entry {
    fn of_route(r: Route, routing: &Routing) -> Entry {
        Entry {
            net: r.prefix,
            len: r.len,
            shadowed_by: routing.node_route(r.prefix, r.len).map(|n| n.node),
            kind: match r.target {
                RouteTarget::Via(h) => Kind::Via(h),
                RouteTarget::Drop => Kind::Drop,
            },
        }
    }

    fn of_node(r: NodeRoute) -> Entry {
        Entry {
            net: r.prefix,
            len: r.len,
            kind: Kind::Node(r.node),
            shadowed_by: None,
        }
    }
}

/// A next hop resolved to its neighbour.
struct Hop {
    ip: IpAddr,
    port: String,
    mac: String,
}

/// One family's FIB as `show` reads it: the ports come from the spec (they do not change at
/// run time), the routes and neighbours from the live tables.
pub(crate) struct FibView<'a> {
    spec: &'a DataplaneSpec,
    routing: &'a Routing,
    v6: bool,
    /// Connected prefixes of this family, sorted.
    connected: Vec<Entry>,
}

impl<'a> FibView<'a> {
    pub(crate) fn new(spec: &'a DataplaneSpec, routing: &'a Routing, v6: bool) -> FibView<'a> {
        let mut connected = Vec::new();
        for i in 0..spec.ports.len() {
            // The live addresses (reload changes them), not the ones the daemon started with.
            let nets = routing.port_addresses(i).unwrap_or_default();
            for &(a, l) in nets.iter().filter(|(a, _)| a.is_ipv6() == v6) {
                connected.push(Entry {
                    net: mask(a, l),
                    len: l,
                    kind: Kind::Connected(i),
                    shadowed_by: None,
                });
            }
        }
        connected.sort_by_key(|e| (e.net, e.len));
        FibView {
            spec,
            routing,
            v6,
            connected,
        }
    }

    fn names(&self) -> (&'static str, &'static str, &'static str) {
        if self.v6 {
            ("ip6", "show ip6 fib", "IPv6")
        } else {
            ("ip4", "show ip fib", "IPv4")
        }
    }

    /// `show ip fib ...`: text and JSON data, or an error message. Without `want_json` the
    /// JSON data of a listing is left out (`Value::Null`).
    pub(crate) fn show(
        &self,
        query: &FibQuery,
        want_json: bool,
    ) -> Result<(String, Value), String> {
        match query {
            FibQuery::Lookup(arg) => self.lookup(arg),
            FibQuery::Page { after, limit } => self.page(after.as_deref(), *limit, want_json),
        }
    }

    /// Parse `arg` as a prefix of this family (for `after`).
    fn prefix_arg(&self, arg: &str, what: &str) -> Result<(IpAddr, u8), String> {
        let (_, cmd, fam) = self.names();
        let example = if self.v6 {
            "2001:db8:2::/48"
        } else {
            "198.18.2.0/24"
        };
        let (ip, len) = crate::config::parse_prefix(arg).map_err(|why| {
            format!("`{cmd} {what} {arg}`: `{arg}` {why}; accepted: an {fam} prefix like {example}")
        })?;
        if ip.is_ipv6() != self.v6 {
            return Err(format!(
                "`{cmd} {what} {arg}`: `{arg}` is not an {fam} prefix; accepted: an {fam} prefix \
                 like {example}"
            ));
        }
        Ok((mask(ip, len), len))
    }

    fn page(
        &self,
        after: Option<&str>,
        limit: usize,
        want_json: bool,
    ) -> Result<(String, Value), String> {
        let (fam, cmd, family) = self.names();
        let start = after.map(|a| self.prefix_arg(a, "after")).transpose()?;
        let (r4, r6) = self.routing.route_counts();
        let routes = if self.v6 { r6 } else { r4 };
        let (n4, n6) = self.routing.node_route_counts();
        let node_routes = if self.v6 { n6 } else { n4 };
        let total = routes + node_routes + self.connected.len();
        // Text shows one screenful from the start (or `after`); JSON one page. One entry more
        // than shown tells whether more follow.
        let want = if want_json {
            limit
        } else {
            limit.min(MAX_TEXT_LINES)
        };
        // A prefix has up to three entries (node route, route, connected): enough beyond the
        // page to see whether it ends inside one, and one more to tell whether more follow.
        let mut entries = self.merged(start, want + 3);
        let more = entries.len() > want;
        // A page ends after the last entry of a prefix (the next starts after the prefix).
        let key = |e: &Entry| (e.net, e.len);
        let mut end = want.min(entries.len());
        while end > 1 && end < entries.len() && key(&entries[end]) == key(&entries[end - 1]) {
            end -= 1;
        }
        entries.truncate(end);
        let neighbours = self.neighbours();
        let mut text = String::new();
        if start.is_none() {
            let features = if node_routes > 0 {
                format!(", {node_routes} of features (VIPs: lb)")
            } else {
                String::new()
            };
            text = format!(
                "{family} FIB: {} ({}, {} connected{features})\n",
                plural(total, "entry", "entries"),
                plural(routes, "route", "routes"),
                self.connected.len()
            );
        }
        let (table, shown) = if entries.is_empty() {
            (String::new(), 0)
        } else {
            self.text(&neighbours, entries.iter())
        };
        text.push_str(&table);
        if shown > 0 && (more || shown < entries.len()) {
            let last = &entries[shown - 1];
            let count = if start.is_none() {
                format!("{} more entries", total.saturating_sub(shown))
            } else {
                "more entries".to_string()
            };
            text.push_str(&format!(
                "... {count} (`vecplane ctl --json {cmd}` lists all; `{cmd} after {}/{}` goes on)\n",
                last.net, last.len
            ));
        }
        let data = if want_json {
            let next = entries
                .last()
                .filter(|_| more)
                .map(|e| format!("{}/{}", e.net, e.len));
            json!({
                "family": fam,
                "total": total,
                "entries": entries.iter().map(|e| self.entry_json(&neighbours, e)).collect::<Vec<_>>(),
                "next": next,
            })
        } else {
            Value::Null
        };
        Ok((text, data))
    }

    /// Up to `limit` entries after `start`: routes, node routes and connected prefixes merged
    /// in prefix order (of one prefix, the entry in effect first).
    fn merged(&self, start: Option<(IpAddr, u8)>, limit: usize) -> Vec<Entry> {
        let routes = self.routing.routes(self.v6, start, limit);
        let nodes = self.routing.node_routes(self.v6, start, limit);
        let connected = self
            .connected
            .iter()
            .filter(|e| start.is_none_or(|s| (e.net, e.len) > s))
            .take(limit)
            .cloned();
        // Each source is sorted and gave at most `limit`: the first `limit` of the sorted
        // union are the page.
        let mut out: Vec<Entry> = routes
            .into_iter()
            .map(|r| Entry::of_route(r, self.routing))
            .chain(nodes.into_iter().map(Entry::of_node))
            .chain(connected)
            .collect();
        out.sort_by_key(|e| (e.net, e.len, e.kind.rank()));
        out.truncate(limit);
        out
    }

    fn lookup(&self, arg: &str) -> Result<(String, Value), String> {
        let (fam, cmd, _) = self.names();
        let example = if self.v6 {
            "2001:db8:2::10"
        } else {
            "198.18.2.10"
        };
        let (ip, len) = if arg.contains('/') {
            let (ip, len) = crate::config::parse_prefix(arg).map_err(|why| {
                format!(
                    "`{cmd} {arg}`: `{arg}` {why}; accepted: an address like {example} or a prefix"
                )
            })?;
            let net = mask(ip, len);
            if net != ip {
                return Err(format!(
                    "`{cmd} {arg}`: `{arg}` has host bits set (did you mean {net}/{len}?); \
                     accepted: an address or a network prefix"
                ));
            }
            (ip, len)
        } else {
            let ip: IpAddr = arg.parse().map_err(|_| {
                format!(
                    "`{cmd} {arg}`: `{arg}` is not an address or prefix; accepted: an address like \
                     {example} or a prefix like {}",
                    if self.v6 {
                        "2001:db8:2::/48"
                    } else {
                        "198.18.2.0/24"
                    }
                )
            })?;
            (ip, if ip.is_ipv6() { 128 } else { 32 })
        };
        if ip.is_ipv6() != self.v6 {
            let right = if ip.is_ipv6() {
                "show ip6 fib"
            } else {
                "show ip fib"
            };
            return Err(format!(
                "`{cmd} {arg}`: {arg} is {}; use `{right} {arg}`",
                if ip.is_ipv6() { "IPv6" } else { "IPv4" }
            ));
        }
        // The longest route: one probe per length, from `len` down; of one length, a node
        // route, then a configured route, then a connected prefix (what the FIB does).
        let route = (0..=len)
            .rev()
            .find_map(|l| self.routing.route(mask(ip, l), l))
            .map(|r| Entry::of_route(r, self.routing));
        let node = (0..=len)
            .rev()
            .find_map(|l| self.routing.node_route(mask(ip, l), l))
            .map(Entry::of_node);
        let connected = self
            .connected
            .iter()
            .filter(|e| e.len <= len && contains(e.net, e.len, ip))
            .max_by_key(|e| e.len)
            .cloned();
        let best = [node, route, connected]
            .into_iter()
            .flatten()
            .min_by_key(|e| (std::cmp::Reverse(e.len), e.kind.rank()));
        match best {
            None => Ok((
                format!("no route matches {arg}\n"),
                json!({"family": fam, "query": arg, "entries": []}),
            )),
            Some(e) => {
                let neighbours = self.neighbours();
                let (t, _) = self.text(&neighbours, std::iter::once(&e));
                Ok((
                    t,
                    json!({"family": fam, "query": arg, "entries": [self.entry_json(&neighbours, &e)]}),
                ))
            }
        }
    }

    /// The static neighbours by address (a few; routes resolve their next hops here).
    fn neighbours(&self) -> HashMap<IpAddr, NeighbourSpec> {
        self.routing
            .neighbours()
            .into_iter()
            .map(|n| (n.ip, n))
            .collect()
    }

    fn hop(&self, neighbours: &HashMap<IpAddr, NeighbourSpec>, ip: IpAddr) -> Hop {
        match neighbours.get(&ip) {
            Some(n) => Hop {
                ip,
                port: self.port_name(n.port),
                mac: format_mac(&n.mac),
            },
            None => Hop {
                ip,
                port: String::new(),
                mac: String::new(),
            },
        }
    }

    fn port_name(&self, i: usize) -> String {
        self.spec
            .ports
            .get(i)
            .map(|p| p.name.clone())
            .unwrap_or_default()
    }

    fn entry_json(&self, neighbours: &HashMap<IpAddr, NeighbourSpec>, e: &Entry) -> Value {
        let prefix = format!("{}/{}", e.net, e.len);
        let mut v = match &e.kind {
            Kind::Node(node) => json!({
                "prefix": prefix,
                "type": "node",
                "node": node,
                "source": node,
                "next_hops": [],
            }),
            Kind::Via(hops) => json!({
                "prefix": prefix,
                "type": "via",
                "next_hops": hops.iter().map(|h| {
                    let h = self.hop(neighbours, *h);
                    json!({"ip": h.ip.to_string(), "port": h.port, "mac": h.mac})
                }).collect::<Vec<_>>(),
            }),
            Kind::Drop => json!({"prefix": prefix, "type": "drop", "next_hops": []}),
            Kind::Connected(p) => json!({
                "prefix": prefix,
                "type": "connected",
                "port": self.port_name(*p),
                "next_hops": [],
            }),
        };
        if let (Some(by), Some(m)) = (e.shadowed_by, v.as_object_mut()) {
            m.insert("shadowed_by".into(), json!(by));
        }
        v
    }

    /// The table of `entries`, capped at `MAX_TEXT_LINES` rows; returns it and the entries shown.
    fn text<'e>(
        &self,
        neighbours: &HashMap<IpAddr, NeighbourSpec>,
        entries: impl Iterator<Item = &'e Entry>,
    ) -> (String, usize) {
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut shown = 0;
        for e in entries {
            let prefix = format!("{}/{}", e.net, e.len);
            let mut new_rows = Vec::new();
            let shadowed = e
                .shadowed_by
                .map(|by| format!(" (shadowed by {by})"))
                .unwrap_or_default();
            match &e.kind {
                Kind::Node(node) => new_rows.push(vec![
                    prefix,
                    format!("to {node} (source {node})"),
                    String::new(),
                    String::new(),
                ]),
                Kind::Via(hops) => {
                    for (i, h) in hops.iter().enumerate() {
                        let h = self.hop(neighbours, *h);
                        new_rows.push(vec![
                            if i == 0 {
                                prefix.clone()
                            } else {
                                String::new()
                            },
                            format!("via {}{shadowed}", h.ip),
                            h.port,
                            h.mac,
                        ]);
                    }
                }
                Kind::Drop => new_rows.push(vec![
                    prefix,
                    format!("drop{shadowed}"),
                    String::new(),
                    String::new(),
                ]),
                Kind::Connected(p) => new_rows.push(vec![
                    prefix,
                    "connected".into(),
                    self.port_name(*p),
                    String::new(),
                ]),
            }
            if rows.len() + new_rows.len() > MAX_TEXT_LINES {
                break;
            }
            rows.extend(new_rows);
            shown += 1;
        }
        let t = render(
            &[
                ("Prefix", Align::Left),
                ("Next hop", Align::Left),
                ("Port", Align::Left),
                ("MAC", Align::Left),
            ],
            &rows,
        );
        (t, shown)
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
#[path = "fibview_tests.rs"]
mod tests;

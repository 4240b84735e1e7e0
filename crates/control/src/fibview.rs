//! The routing table as `show ip fib` / `show ip6 fib` present it, computed from the spec the
//! control plane keeps (configured routes, their neighbours, and the ports' connected prefixes).
//! It never reads the data plane's FIB and never touches packets.

use crate::config::{contains, mask};
use crate::table::{render, Align};
use dataplane::{DataplaneSpec, RouteTarget};
use packet::headers::format_mac;
use serde_json::{json, Value};
use std::net::IpAddr;

/// Most text lines a FIB listing prints (JSON has every entry).
pub(crate) const MAX_TEXT_LINES: usize = 1000;

#[derive(Debug)]
enum Kind {
    Via(Vec<IpAddr>),
    Drop,
    Connected(usize),
}

#[derive(Debug)]
struct Entry {
    net: IpAddr,
    len: u8,
    kind: Kind,
}

/// Both FIBs, sorted by prefix.
#[derive(Debug)]
pub(crate) struct FibView {
    v4: Vec<Entry>,
    v6: Vec<Entry>,
}

/// A next hop resolved to its neighbour.
struct Hop {
    ip: IpAddr,
    port: String,
    mac: String,
}

impl FibView {
    pub(crate) fn new(spec: &DataplaneSpec) -> FibView {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for r in &spec.routes4 {
            v4.push(Entry {
                net: IpAddr::V4(r.prefix),
                len: r.len,
                kind: match &r.target {
                    RouteTarget::Via(h) => Kind::Via(h.iter().map(|a| IpAddr::V4(*a)).collect()),
                    RouteTarget::Drop => Kind::Drop,
                },
            });
        }
        for r in &spec.routes6 {
            v6.push(Entry {
                net: IpAddr::V6(r.prefix),
                len: r.len,
                kind: match &r.target {
                    RouteTarget::Via(h) => Kind::Via(h.iter().map(|a| IpAddr::V6(*a)).collect()),
                    RouteTarget::Drop => Kind::Drop,
                },
            });
        }
        for (i, p) in spec.ports.iter().enumerate() {
            for (a, l) in &p.ip4 {
                v4.push(Entry {
                    net: mask(IpAddr::V4(*a), *l),
                    len: *l,
                    kind: Kind::Connected(i),
                });
            }
            for (a, l) in &p.ip6 {
                v6.push(Entry {
                    net: mask(IpAddr::V6(*a), *l),
                    len: *l,
                    kind: Kind::Connected(i),
                });
            }
        }
        v4.sort_by_key(|a| (a.net, a.len));
        v6.sort_by_key(|a| (a.net, a.len));
        FibView { v4, v6 }
    }

    /// `show ip fib [ARG]` (v6: `show ip6 fib [ARG]`): text and JSON data, or an error message.
    pub(crate) fn show(
        &self,
        spec: &DataplaneSpec,
        v6: bool,
        arg: Option<&str>,
        want_json: bool,
    ) -> Result<(String, Value), String> {
        let entries = if v6 { &self.v6 } else { &self.v4 };
        let (fam, cmd) = if v6 {
            ("ip6", "show ip6 fib")
        } else {
            ("ip4", "show ip fib")
        };
        let Some(arg) = arg else {
            let routes = entries
                .iter()
                .filter(|e| !matches!(e.kind, Kind::Connected(_)))
                .count();
            let head = format!(
                "{} FIB: {} ({}, {} connected)\n",
                if v6 { "IPv6" } else { "IPv4" },
                plural(entries.len(), "entry", "entries"),
                plural(routes, "route", "routes"),
                entries.len() - routes
            );
            if entries.is_empty() {
                return Ok((head, json!({"family": fam, "entries": [], "total": 0})));
            }
            let (table, shown) = text(spec, entries.iter());
            let mut t = head + &table;
            if shown < entries.len() {
                t.push_str(&format!(
                    "... {} more entries omitted (the JSON reply, `vecplane ctl --json {cmd}`, \
                     has all)\n",
                    entries.len() - shown
                ));
            }
            // The full listing is only built when asked for (a million routes take a while).
            let data = if want_json {
                json!({
                    "family": fam,
                    "entries": entries.iter().map(|e| entry_json(spec, e)).collect::<Vec<_>>(),
                    "total": entries.len(),
                })
            } else {
                Value::Null
            };
            return Ok((t, data));
        };

        // A prefix or an address: the longest entry covering it.
        let example = if v6 { "2001:db8:2::10" } else { "198.18.2.10" };
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
                    if v6 { "2001:db8:2::/48" } else { "198.18.2.0/24" }
                )
            })?;
            (ip, if ip.is_ipv6() { 128 } else { 32 })
        };
        if ip.is_ipv6() != v6 {
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
        let best = entries
            .iter()
            .filter(|e| e.len <= len && contains(e.net, e.len, ip))
            .max_by_key(|e| e.len);
        match best {
            None => Ok((
                format!("no route matches {arg}\n"),
                json!({"family": fam, "query": arg, "entries": []}),
            )),
            Some(e) => {
                let (t, _) = text(spec, std::iter::once(e));
                Ok((
                    t,
                    json!({"family": fam, "query": arg, "entries": [entry_json(spec, e)]}),
                ))
            }
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn hop(spec: &DataplaneSpec, ip: IpAddr) -> Hop {
    match spec.neighbours.iter().find(|n| n.ip == ip) {
        Some(n) => Hop {
            ip,
            port: spec
                .ports
                .get(n.port)
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            mac: format_mac(&n.mac),
        },
        None => Hop {
            ip,
            port: String::new(),
            mac: String::new(),
        },
    }
}

fn port_name(spec: &DataplaneSpec, i: usize) -> String {
    spec.ports
        .get(i)
        .map(|p| p.name.clone())
        .unwrap_or_default()
}

fn entry_json(spec: &DataplaneSpec, e: &Entry) -> Value {
    let prefix = format!("{}/{}", e.net, e.len);
    match &e.kind {
        Kind::Via(hops) => json!({
            "prefix": prefix,
            "type": "via",
            "next_hops": hops.iter().map(|h| {
                let h = hop(spec, *h);
                json!({"ip": h.ip.to_string(), "port": h.port, "mac": h.mac})
            }).collect::<Vec<_>>(),
        }),
        Kind::Drop => json!({"prefix": prefix, "type": "drop", "next_hops": []}),
        Kind::Connected(p) => json!({
            "prefix": prefix,
            "type": "connected",
            "port": port_name(spec, *p),
            "next_hops": [],
        }),
    }
}

/// The table of `entries`, capped at `MAX_TEXT_LINES` rows; returns it and the entries shown.
fn text<'e>(spec: &DataplaneSpec, entries: impl Iterator<Item = &'e Entry>) -> (String, usize) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut shown = 0;
    for e in entries {
        let prefix = format!("{}/{}", e.net, e.len);
        let mut new_rows = Vec::new();
        match &e.kind {
            Kind::Via(hops) => {
                for (i, h) in hops.iter().enumerate() {
                    let h = hop(spec, *h);
                    new_rows.push(vec![
                        if i == 0 {
                            prefix.clone()
                        } else {
                            String::new()
                        },
                        format!("via {}", h.ip),
                        h.port,
                        h.mac,
                    ]);
                }
            }
            Kind::Drop => new_rows.push(vec![prefix, "drop".into(), String::new(), String::new()]),
            Kind::Connected(p) => new_rows.push(vec![
                prefix,
                "connected".into(),
                port_name(spec, *p),
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

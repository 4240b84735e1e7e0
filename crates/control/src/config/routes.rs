//! Routes, static neighbours and cross-connects: `[[route]]` (prefix, ECMP next hops or drop),
//! `[[neighbour]]` (an address on a port's subnet) and `[[xconnect]]`. Next hops must resolve to a
//! neighbour or a connected subnet; nothing is looked up on the host.

use super::ctx::{Ctx, Field, Fields};
use super::util::{contains, family, mask, name_list, parse_prefix, short_list};
use super::validation::neighbour_placement_problem;
use super::MAC_ACCEPTED;
use dataplane::{DataplaneSpec, NeighbourSpec, PortSpec, RouteSpec, RouteTarget, XconnectSpec};
use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;

pub(super) const ROUTE_KEYS: &[&str] = &["prefix", "via", "action"];
pub(super) const NEIGHBOUR_KEYS: &[&str] = &["ip", "mac", "port"];
pub(super) const XCONNECT_KEYS: &[&str] = &["from", "to", "dst-mac"];

impl Ctx<'_> {
    pub(super) fn neighbour(
        &mut self,
        f: &Fields<'_>,
        port_names: &[Option<String>],
        port_specs: &[Option<PortSpec>],
        seen: &mut HashMap<IpAddr, usize>,
    ) -> Option<NeighbourSpec> {
        let section = f.section.clone();
        let before = self.issues.len();
        let ip = match self.ip(f, "ip") {
            Field::Ok(ip, span) => {
                let line = self.line_of(span.start);
                if let Some(first) = seen.get(&ip) {
                    let msg = format!(
                        "duplicate neighbour {ip}: also defined at line {first}; accepted: one \
                         [[neighbour]] per address"
                    );
                    self.error(&span, &section, Some("ip"), msg);
                } else {
                    seen.insert(ip, line);
                }
                Some((ip, span))
            }
            Field::Missing => {
                self.missing(f, "ip", "an IPv4 or IPv6 address like 198.18.1.2");
                None
            }
            Field::Bad => None,
        };
        let mac = match self.mac(f, "mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => {
                self.missing(f, "mac", &format!("a unicast MAC, {MAC_ACCEPTED}"));
                None
            }
            Field::Bad => None,
        };
        let port = match self.string(f, "port") {
            Field::Ok(s, span) => match port_names.iter().position(|n| n.as_deref() == Some(s)) {
                Some(i) => Some(i),
                None => {
                    let msg = format!(
                        "no port is named `{s}`; accepted: {}",
                        name_list(port_names)
                    );
                    self.error(&span, &section, Some("port"), msg);
                    None
                }
            },
            Field::Missing => {
                let msg = name_list(port_names);
                self.missing(f, "port", &msg);
                None
            }
            Field::Bad => None,
        };

        // The address must be on one of the port's subnets (and not the port's own).
        if let (Some((ip, span)), Some(p)) = (&ip, port) {
            if let Some(Some(ps)) = port_specs.get(p) {
                let nets: Vec<(IpAddr, u8)> = match ip {
                    IpAddr::V4(_) => ps.ip4.iter().map(|(a, l)| (IpAddr::V4(*a), *l)).collect(),
                    IpAddr::V6(_) => ps.ip6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)).collect(),
                };
                if let Some(why) = neighbour_placement_problem(*ip, &ps.name, &nets) {
                    self.error(span, &section, Some("ip"), why);
                }
            }
        }
        if self.issues.len() != before {
            return None;
        }
        Some(NeighbourSpec {
            ip: ip?.0,
            mac: mac?,
            port: port?,
        })
    }

    pub(super) fn route(
        &mut self,
        f: &Fields<'_>,
        neighbours: &HashMap<IpAddr, usize>,
        connected: &[(IpAddr, u8)],
        seen: &mut HashMap<(IpAddr, u8), usize>,
        spec: &mut DataplaneSpec,
    ) {
        let section = f.section.clone();
        let before = self.issues.len();
        let prefix = match self.string(f, "prefix") {
            Field::Ok(s, span) => match parse_prefix(s) {
                Ok((ip, len)) => {
                    let net = mask(ip, len);
                    if net != ip {
                        self.error(
                            &span,
                            &section,
                            Some("prefix"),
                            format!(
                                "`{s}` has host bits set (did you mean {net}/{len}?); accepted: \
                                 a network address with its prefix length"
                            ),
                        );
                        None
                    } else {
                        let line = self.line_of(span.start);
                        if let Some(first) = seen.get(&(net, len)) {
                            let msg = format!(
                                "duplicate route {net}/{len}: also defined at line {first}; \
                                 accepted: one [[route]] per prefix"
                            );
                            self.error(&span, &section, Some("prefix"), msg);
                        } else {
                            seen.insert((net, len), line);
                        }
                        Some((net, len))
                    }
                }
                Err(why) => {
                    self.error(
                        &span,
                        &section,
                        Some("prefix"),
                        format!(
                            "`{s}` {why}; accepted: ADDRESS/LENGTH like 198.18.2.0/24 or \
                             2001:db8:2::/48"
                        ),
                    );
                    None
                }
            },
            Field::Missing => {
                self.missing(f, "prefix", "ADDRESS/LENGTH like 198.18.2.0/24");
                None
            }
            Field::Bad => None,
        };

        let via = self.strings(f, "via", true);
        let action = self.string(f, "action");
        let target: Option<RouteTarget<IpAddr>> = match (via, action) {
            (Field::Ok(..), Field::Ok(_, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("action"),
                    "a route has either `via` or `action`, not both; accepted: via = \"ADDRESS\" \
                     or [\"ADDRESS\", ...], or action = \"drop\"",
                );
                None
            }
            (Field::Missing, Field::Missing) => {
                self.missing(
                    f,
                    "via",
                    "via = \"ADDRESS\" or [\"ADDRESS\", ...] (ECMP), or action = \"drop\"",
                );
                None
            }
            (Field::Missing, Field::Ok("drop", _)) => Some(RouteTarget::Drop),
            (Field::Missing, Field::Ok(s, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("action"),
                    format!("`{s}` is not a route action; accepted: \"drop\""),
                );
                None
            }
            (Field::Ok(items, span), _) => {
                if items.is_empty() {
                    self.error(
                        &span,
                        &section,
                        Some("via"),
                        "empty list; accepted: a next-hop address or a non-empty list of them",
                    );
                    None
                } else {
                    let mut hops = Vec::new();
                    let mut ok = true;
                    for (s, span) in items {
                        let Ok(ip) = s.parse::<IpAddr>() else {
                            self.error(
                                &span,
                                &section,
                                Some("via"),
                                format!(
                                    "`{s}` is not an IP address; accepted: a next-hop \
                                     address like 198.18.2.2"
                                ),
                            );
                            ok = false;
                            continue;
                        };
                        if let Some(why) =
                            next_hop_problem(ip, prefix.map(|p| p.0), neighbours, connected)
                        {
                            self.error(&span, &section, Some("via"), why);
                            ok = false;
                            continue;
                        }
                        if hops.contains(&ip) {
                            self.error(
                                &span,
                                &section,
                                Some("via"),
                                format!(
                                    "next hop {ip} is listed twice; accepted: distinct next hops"
                                ),
                            );
                            ok = false;
                            continue;
                        }
                        hops.push(ip);
                    }
                    ok.then_some(RouteTarget::Via(hops))
                }
            }
            _ => None,
        };
        if self.issues.len() != before {
            return;
        }
        let (Some((net, len)), Some(target)) = (prefix, target) else {
            return;
        };
        match net {
            IpAddr::V4(p) => spec.routes4.push(RouteSpec {
                prefix: p,
                len,
                target: match target {
                    RouteTarget::Drop => RouteTarget::Drop,
                    RouteTarget::Via(h) => RouteTarget::Via(
                        h.into_iter()
                            .filter_map(|a| match a {
                                IpAddr::V4(a) => Some(a),
                                IpAddr::V6(_) => None,
                            })
                            .collect(),
                    ),
                },
            }),
            IpAddr::V6(p) => spec.routes6.push(RouteSpec {
                prefix: p,
                len,
                target: match target {
                    RouteTarget::Drop => RouteTarget::Drop,
                    RouteTarget::Via(h) => RouteTarget::Via(
                        h.into_iter()
                            .filter_map(|a| match a {
                                IpAddr::V6(a) => Some(a),
                                IpAddr::V4(_) => None,
                            })
                            .collect(),
                    ),
                },
            }),
        }
    }

    pub(super) fn xconnect(
        &mut self,
        f: &Fields<'_>,
        port_names: &[Option<String>],
        seen_from: &mut HashMap<usize, usize>,
    ) -> Option<XconnectSpec> {
        let section = f.section.clone();
        let before = self.issues.len();
        let port_ref = |ctx: &mut Ctx<'_>, key: &str| -> Option<(usize, Range<usize>)> {
            match ctx.string(f, key) {
                Field::Ok(s, span) => {
                    match port_names.iter().position(|n| n.as_deref() == Some(s)) {
                        Some(i) => Some((i, span)),
                        None => {
                            let msg = format!(
                                "no port is named `{s}`; accepted: {}",
                                name_list(port_names)
                            );
                            ctx.error(&span, &section, Some(key), msg);
                            None
                        }
                    }
                }
                Field::Missing => {
                    ctx.missing(f, key, &name_list(port_names));
                    None
                }
                Field::Bad => None,
            }
        };
        let from = port_ref(self, "from");
        let to = port_ref(self, "to");
        if let Some((p, span)) = &from {
            let line = self.line_of(span.start);
            if let Some(first) = seen_from.get(p) {
                let name = port_names[*p].clone().unwrap_or_default();
                let msg = format!(
                    "port `{name}` is already the `from` of the [[xconnect]] at line {first}; \
                     accepted: a port that is `from` in at most one xconnect"
                );
                self.error(span, &section, Some("from"), msg);
            } else {
                seen_from.insert(*p, line);
            }
        }
        let dst_mac = match self.mac(f, "dst-mac", false) {
            Field::Ok(m, _) => Some(Some(m)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        if self.issues.len() != before {
            return None;
        }
        Some(XconnectSpec {
            from: from?.0,
            to: to?.0,
            dst_mac: dst_mac?,
        })
    }
}

/// Why `ip` cannot be a next hop of a route to `net` (None: it can): it must be of the route's
/// family and be a static neighbour or a host on a port's subnet (not the port's own address).
pub(super) fn next_hop_problem(
    ip: IpAddr,
    net: Option<IpAddr>,
    neighbours: &HashMap<IpAddr, usize>,
    connected: &[(IpAddr, u8)],
) -> Option<String> {
    if let Some(net) = net {
        if net.is_ipv6() != ip.is_ipv6() {
            return Some(format!(
                "next hop {ip} is {} but the route is {}; accepted: a [[neighbour]] of the \
                 route's family",
                family(ip),
                family(net)
            ));
        }
    }
    let on_link = connected
        .iter()
        .any(|(a, l)| *a != ip && contains(*a, *l, ip));
    if neighbours.contains_key(&ip) || on_link {
        return None;
    }
    let mut known: Vec<&IpAddr> = neighbours
        .keys()
        .filter(|n| n.is_ipv6() == ip.is_ipv6())
        .collect();
    known.sort();
    let list = if known.is_empty() {
        format!("(no {} [[neighbour]] is defined)", family(ip))
    } else {
        short_list(known.iter().map(|a| a.to_string()))
    };
    Some(format!(
        "next hop {ip} is neither a [[neighbour]] nor on a port's subnet; accepted: an address \
         inside a port's `{}` prefix (resolved by {}), or the ip of a [[neighbour]]: {list}",
        if ip.is_ipv6() { "ip6" } else { "ip4" },
        if ip.is_ipv6() { "ND" } else { "ARP" }
    ))
}

//! The health checks of `[lb]`: `probe-source4`, `probe-source6` (each one of the config's port
//! addresses) and the `[[lb.health-check]]` tables, read into an `lb::health::HealthConfig` and
//! checked against the LB state the lines built: the VIP exists, one check per VIP, the limits
//! of `lb::health::limits`, keys that apply to the check's type only, a port where the VIP has
//! none, a probe protocol the VIP carries when probes go through it, and a probe source for
//! every family the check probes. Every problem is reported; it never builds a half config and
//! never sends a probe.

use super::super::ctx::{Ctx, Field, Fields};
use super::super::value::{kind, Node, Val};
use dataplane::PortSpec;
use lb::health::{
    defaults, limits, HealthCheck, HealthConfig, OnDown, ProbeKind, ProbePath, ProbeSources,
};
use lb::model::{AsState, LbCommand, LbState, VipKey, VipProtocol};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// The keys of one `[[lb.health-check]]`.
pub(in crate::config) const CHECK_KEYS: &[&str] = &[
    "vip",
    "type",
    "port",
    "path",
    "host",
    "expect",
    "payload",
    "expect-reply",
    "interval-ms",
    "timeout-ms",
    "rise",
    "fall",
    "on-down",
    "via",
];

/// What `vip` accepts.
const VIP_ACCEPTED: &str = "a VIP of [lb] as `lb vip` writes it: PREFIX [protocol tcp|udp] \
    [port N], e.g. \"198.18.1.1/32 protocol tcp port 80\"";
/// What `type` accepts.
const TYPES: &str = "tcp, http, https, udp, icmp";
/// What `path` and `host` accept.
const TEXT_ACCEPTED: &str = "at most 1024 visible ASCII characters (no spaces or control \
    characters)";

/// The keys that apply to some types only, and those types.
const TYPED_KEYS: &[(&str, &[&str])] = &[
    ("port", &["tcp", "http", "https", "udp"]),
    ("path", &["http", "https"]),
    ("host", &["http", "https"]),
    ("expect", &["http", "https"]),
    ("payload", &["udp"]),
    ("expect-reply", &["udp"]),
];

/// The keys a check of type `ty` accepts.
fn keys_for(ty: &str) -> Vec<&'static str> {
    CHECK_KEYS
        .iter()
        .copied()
        .filter(|k| {
            TYPED_KEYS
                .iter()
                .find(|(key, _)| key == k)
                .is_none_or(|(_, types)| types.contains(&ty))
        })
        .collect()
}

/// Whether `s` is 1..=`MAX_HTTP_TEXT` visible ASCII characters.
fn visible_text(s: &str) -> bool {
    !s.is_empty() && s.len() <= limits::MAX_HTTP_TEXT && s.bytes().all(|b| b.is_ascii_graphic())
}

/// `d` in whole milliseconds, for the bounds of `*-ms` keys.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Families of the addresses a check probes, with an example server for messages.
#[derive(Default)]
struct Needs {
    ip4: Option<IpAddr>,
    ip6: Option<IpAddr>,
}

impl Ctx<'_> {
    /// `probe-source4`, `probe-source6` and `[[lb.health-check]]` of `[lb]` (`f`), checked
    /// against `state` (None when the lines were refused: VIPs are then not looked up) and the
    /// config's `ports`. None when anything is wrong (every problem reported).
    pub(in crate::config) fn lb_health(
        &mut self,
        f: &Fields<'_>,
        state: Option<&LbState>,
        ports: &[Option<PortSpec>],
    ) -> Option<HealthConfig> {
        let before = self.issues.len();
        let (sources, given) = self.probe_sources(f, ports);
        let mut checks = Vec::new();
        let mut seen: HashMap<VipKey, usize> = HashMap::new();
        for (i, node) in self.check_tables(f).into_iter().enumerate() {
            let section = format!("[[lb.health-check]] #{}", i + 1);
            let Some(cf) = self.fields(section, None, node, CHECK_KEYS) else {
                continue;
            };
            self.remember_lines(&cf);
            if let Some(c) = self.health_check(&cf, state, &mut seen, i) {
                if let Some(state) = state {
                    self.check_sources(&cf, &c, state, &sources, given, ports);
                }
                checks.push(c);
            }
        }
        (self.issues.len() == before).then_some(HealthConfig { sources, checks })
    }

    /// The probe sources, and whether each was given (even if refused).
    fn probe_sources(
        &mut self,
        f: &Fields<'_>,
        ports: &[Option<PortSpec>],
    ) -> (ProbeSources, (bool, bool)) {
        let mut out = ProbeSources::default();
        let given = (
            f.get("probe-source4").is_some(),
            f.get("probe-source6").is_some(),
        );
        for (key, v6) in [("probe-source4", false), ("probe-source6", true)] {
            let Field::Ok(ip, span) = self.ip(f, key) else {
                continue;
            };
            let own = port_addrs(ports, v6);
            match ip {
                IpAddr::V4(a) if !v6 && own.contains(&ip) => out.ip4 = Some(a),
                IpAddr::V6(a) if v6 && own.contains(&ip) => out.ip6 = Some(a),
                _ => {
                    let what = if ip.is_ipv6() != v6 {
                        format!("`{ip}` is not an {} address", family(v6))
                    } else {
                        format!("`{ip}` is not an address of a [[port]] of this config")
                    };
                    let message = format!(
                        "{what}; accepted: one of the config's port {} addresses ({})",
                        family(v6),
                        list_addrs(&own)
                    );
                    self.error(&span, &f.section, Some(key), message);
                }
            }
        }
        (out, given)
    }

    /// The `[[lb.health-check]]` tables (an array of tables), each as a node.
    fn check_tables<'t>(&mut self, f: &Fields<'t>) -> Vec<&'t Node> {
        let Some(n) = f.get("health-check") else {
            return Vec::new();
        };
        match n.get_ref() {
            Val::Array(items) => items.iter().collect(),
            other => {
                let message = format!(
                    "expected an array of tables, found {}; accepted: one `[[lb.health-check]]` \
                     table per checked VIP",
                    kind(other)
                );
                self.error(&n.span(), &f.section, Some("health-check"), message);
                Vec::new()
            }
        }
    }

    /// One check; None (with issues) when anything is wrong with it.
    fn health_check(
        &mut self,
        f: &Fields<'_>,
        state: Option<&LbState>,
        seen: &mut HashMap<VipKey, usize>,
        index: usize,
    ) -> Option<HealthCheck> {
        let before = self.issues.len();
        let vip = self.check_vip(f, state, seen, index);
        let ty = match self.string(f, "type") {
            Field::Ok(t, _) if TYPES.split(", ").any(|a| a == t) => Some(t),
            Field::Ok(t, span) => {
                let message = format!("`{t}` is not a check type; accepted: {TYPES}");
                self.error(&span, &f.section, Some("type"), message);
                None
            }
            Field::Missing => {
                self.missing(f, "type", TYPES);
                None
            }
            Field::Bad => None,
        };
        if let Some(ty) = ty {
            let accepted = keys_for(ty);
            for (key, types) in TYPED_KEYS {
                if let Some(n) = f.get(key).filter(|_| !types.contains(&ty)) {
                    let message = format!(
                        "`{key}` does not apply to a {ty} check (only to {}); accepted for {ty}: {}",
                        types.join(", "),
                        accepted.join(", ")
                    );
                    self.bad(f, key, n, message);
                }
            }
        }
        let kind = ty.and_then(|ty| self.probe_kind(f, ty));
        let port = self.int(f, "port", 1..=65535).ok().map(|p| p as u16);
        let interval = match self.int(
            f,
            "interval-ms",
            ms(limits::MIN_INTERVAL)..=ms(limits::MAX_INTERVAL),
        ) {
            Field::Ok(v, _) => Duration::from_millis(v as u64),
            _ => defaults::INTERVAL,
        };
        let timeout = match self.int(
            f,
            "timeout-ms",
            ms(limits::MIN_TIMEOUT)..=ms(limits::MAX_INTERVAL),
        ) {
            Field::Ok(v, span) => {
                let t = Duration::from_millis(v as u64);
                if t >= interval {
                    let message = format!(
                        "{v} ms is not less than the interval ({} ms); accepted: {}..{} \
                         (a probe ends before the next one starts)",
                        interval.as_millis(),
                        ms(limits::MIN_TIMEOUT),
                        interval.as_millis()
                    );
                    self.error(&span, &f.section, Some("timeout-ms"), message);
                }
                t
            }
            _ => defaults::TIMEOUT.min(interval / 2),
        };
        let count = 1..=i64::from(limits::MAX_COUNT);
        let rise = self.int(f, "rise", count.clone()).ok();
        let fall = self.int(f, "fall", count).ok();
        let on_down = self.choice(
            f,
            "on-down",
            &[("drain", OnDown::Drain), ("flush", OnDown::Flush)],
        );
        let path = self.choice(
            f,
            "via",
            &[("encap", ProbePath::Encap), ("direct", ProbePath::Direct)],
        );
        if self.issues.len() > before {
            return None;
        }
        let (vip, kind) = (vip?, kind?);
        let check = HealthCheck {
            vip: vip.spec_key,
            kind,
            port,
            interval,
            timeout,
            rise: rise.map_or(defaults::RISE, |v| v as u32),
            fall: fall.map_or(defaults::FALL, |v| v as u32),
            on_down: on_down.unwrap_or_default(),
            path: path.unwrap_or_default(),
        };
        if let Some(encap) = vip.encap {
            self.check_destination(f, &check, encap);
        }
        (self.issues.len() == before).then_some(check)
    }

    /// `vip`: parsed, looked up in `state`, not checked twice.
    fn check_vip(
        &mut self,
        f: &Fields<'_>,
        state: Option<&LbState>,
        seen: &mut HashMap<VipKey, usize>,
        index: usize,
    ) -> Option<CheckedVip> {
        let (text, span) = match self.string(f, "vip") {
            Field::Ok(t, span) => (t, span),
            Field::Missing => {
                self.missing(f, "vip", VIP_ACCEPTED);
                return None;
            }
            Field::Bad => return None,
        };
        let key = match lb::cli::parse_line(&format!("lb flush vip {text}")) {
            Ok(LbCommand::FlushVip(key)) => key,
            other => {
                let why = match other {
                    Err(e) => format!(" ({e})"),
                    Ok(_) => String::new(),
                };
                let message = format!("`{text}` is not a VIP key{why}; accepted: {VIP_ACCEPTED}");
                self.error(&span, &f.section, Some("vip"), message);
                return None;
            }
        };
        if let Some(first) = seen.get(&key) {
            let message = format!(
                "VIP `{key}` already has a check ([[lb.health-check]] #{}); accepted: at most \
                 one check per VIP",
                first + 1
            );
            self.error(&span, &f.section, Some("vip"), message);
            return None;
        }
        seen.insert(key, index);
        let Some(state) = state else {
            return Some(CheckedVip {
                spec_key: key,
                encap: None,
            });
        };
        match state.vip_by_key(&key) {
            Some(v) => Some(CheckedVip {
                spec_key: key,
                encap: Some(v.spec.encap),
            }),
            None => {
                let vips: Vec<String> = state.vips().map(|v| format!("`{}`", v.spec.key)).collect();
                let message = format!(
                    "no VIP `{key}` in [lb]; accepted: {}",
                    if vips.is_empty() {
                        "a VIP of [lb] (none is configured)".to_string()
                    } else {
                        format!("a VIP of [lb]: {}", shorten(&vips))
                    }
                );
                self.error(&span, &f.section, Some("vip"), message);
                None
            }
        }
    }

    /// The probe of type `ty` with its type's keys.
    fn probe_kind(&mut self, f: &Fields<'_>, ty: &str) -> Option<ProbeKind> {
        match ty {
            "tcp" => Some(ProbeKind::Tcp),
            "icmp" => Some(ProbeKind::Icmp),
            "http" | "https" => {
                let path = self.http_text(f, "path", true);
                let host = self.http_text(f, "host", false);
                let expect = self.int(f, "expect", 100..=599);
                Some(ProbeKind::Http {
                    path: path
                        .ok()?
                        .unwrap_or_else(|| defaults::HTTP_PATH.to_string()),
                    host: host.ok()?,
                    expect: match expect {
                        Field::Ok(v, _) => v as u16,
                        Field::Missing => defaults::HTTP_EXPECT,
                        Field::Bad => return None,
                    },
                    tls: ty == "https",
                })
            }
            _ => {
                let payload = match self.string(f, "payload") {
                    Field::Ok(p, _) if p.len() <= limits::MAX_UDP_PAYLOAD => p.as_bytes().to_vec(),
                    Field::Ok(p, span) => {
                        let message = format!(
                            "{} bytes is too long; accepted: a text of at most {} bytes",
                            p.len(),
                            limits::MAX_UDP_PAYLOAD
                        );
                        self.error(&span, &f.section, Some("payload"), message);
                        return None;
                    }
                    Field::Missing => Vec::new(),
                    Field::Bad => return None,
                };
                let expect_reply = match self.boolean(f, "expect-reply") {
                    Field::Ok(b, _) => b,
                    Field::Missing => false,
                    Field::Bad => return None,
                };
                Some(ProbeKind::Udp {
                    payload,
                    expect_reply,
                })
            }
        }
    }

    /// `path` (`absolute`: must start with `/`) or `host`: Ok(None) when absent, Err when bad.
    fn http_text(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        absolute: bool,
    ) -> Result<Option<String>, ()> {
        match self.string(f, key) {
            Field::Ok(s, span) => {
                if visible_text(s) && (!absolute || s.starts_with('/')) {
                    return Ok(Some(s.to_string()));
                }
                let start = if absolute { "starting with `/`, " } else { "" };
                let message = format!(
                    "`{}` is refused; accepted: {start}{TEXT_ACCEPTED}",
                    s.escape_debug()
                );
                self.error(&span, &f.section, Some(key), message);
                Err(())
            }
            Field::Missing => Ok(None),
            Field::Bad => Err(()),
        }
    }

    /// A string key with a fixed set of names.
    fn choice<T: Copy>(&mut self, f: &Fields<'_>, key: &str, names: &[(&str, T)]) -> Option<T> {
        let Field::Ok(s, span) = self.string(f, key) else {
            return None;
        };
        if let Some((_, v)) = names.iter().find(|(n, _)| *n == s) {
            return Some(*v);
        }
        let accepted: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        let message = format!("`{s}` is refused; accepted: {}", accepted.join(", "));
        self.error(&span, &f.section, Some(key), message);
        None
    }

    /// The destination port exists, and a probe sent through the VIP is of its protocol.
    fn check_destination(&mut self, f: &Fields<'_>, c: &HealthCheck, encap: lb::model::Encap) {
        if c.dest_port(encap).is_none() {
            let message = format!(
                "required: the VIP `{}` has all ports; accepted: the port to probe, 1..=65535",
                c.vip
            );
            self.error(&f.span, &f.section, Some("port"), message);
        }
        let carried = matches!(
            (&c.kind, c.vip.protocol),
            (_, VipProtocol::Any)
                | (ProbeKind::Tcp | ProbeKind::Http { .. }, VipProtocol::Tcp)
                | (ProbeKind::Udp { .. }, VipProtocol::Udp)
        );
        if c.via_vip(encap) && !carried {
            let proto = if c.vip.protocol == VipProtocol::Tcp {
                "tcp"
            } else {
                "udp"
            };
            let span = f.get("type").map_or(f.span.clone(), Node::span);
            let message = format!(
                "a {} probe sent through the VIP `{}` ({} encapsulation) must be of its \
                 protocol ({proto}); accepted: a check of the VIP's protocol, or via = \"direct\"",
                c.kind.name(),
                c.vip,
                encap.name()
            );
            self.error(&span, &f.section, Some("type"), message);
        }
        // Through the VIP, the probe must be what the data path takes for the VIP's traffic.
        if let (true, Some(port)) = (c.via_vip(encap), c.port) {
            if c.vip.port != 0 && port != c.vip.port {
                let span = f.get("port").map_or(f.span.clone(), Node::span);
                let message = format!(
                    "port {port} is not the VIP's: a probe sent through the VIP `{}` ({} \
                     encapsulation) goes to its port; accepted: {} (or no port), or via = \
                     \"direct\"",
                    c.vip,
                    encap.name(),
                    c.vip.port
                );
                self.error(&span, &f.section, Some("port"), message);
            }
        }
    }

    /// Every family the check probes has a probe source (unless one was given and refused).
    fn check_sources(
        &mut self,
        f: &Fields<'_>,
        c: &HealthCheck,
        state: &LbState,
        sources: &ProbeSources,
        (given4, given6): (bool, bool),
        ports: &[Option<PortSpec>],
    ) {
        let Some(vip) = state.vip_by_key(&c.vip) else {
            return;
        };
        let mut needs = Needs::default();
        for (addr, slot) in &vip.servers {
            if matches!(state.slot(*slot).state, AsState::Removed | AsState::Free) {
                continue;
            }
            let dest = if c.via_vip(vip.spec.encap) {
                c.vip.prefix.addr()
            } else {
                *addr
            };
            match dest {
                IpAddr::V4(_) => needs.ip4 = needs.ip4.or(Some(*addr)),
                IpAddr::V6(_) => needs.ip6 = needs.ip6.or(Some(*addr)),
            }
        }
        let lacking = [
            (needs.ip4, sources.ip4.is_none() && !given4, false),
            (needs.ip6, sources.ip6.is_none() && !given6, true),
        ];
        for (server, lacks, v6) in lacking {
            let Some(server) = server.filter(|_| lacks) else {
                continue;
            };
            let how = if c.via_vip(vip.spec.encap) {
                format!(
                    "sent to the VIP {} through its {} encapsulation",
                    c.vip.prefix.addr(),
                    vip.spec.encap.name()
                )
            } else {
                "sent to the server's address".to_string()
            };
            let message = format!(
                "its probes to {} addresses (server {server}: {how}) need `probe-source{}` in \
                 [lb]; accepted: probe-source{} = one of the config's port {} addresses ({})",
                family(v6),
                if v6 { 6 } else { 4 },
                if v6 { 6 } else { 4 },
                family(v6),
                list_addrs(&port_addrs(ports, v6))
            );
            let span = f.get("vip").map_or(f.span.clone(), Node::span);
            self.error(&span, &f.section, Some("vip"), message);
        }
    }
}

/// A check's VIP key, with its encapsulation when the state was built.
struct CheckedVip {
    spec_key: VipKey,
    encap: Option<lb::model::Encap>,
}

/// "IPv4" or "IPv6".
fn family(v6: bool) -> &'static str {
    if v6 {
        "IPv6"
    } else {
        "IPv4"
    }
}

/// The addresses of the config's ports of one family.
fn port_addrs(ports: &[Option<PortSpec>], v6: bool) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for p in ports.iter().flatten() {
        if v6 {
            out.extend(p.ip6.iter().map(|(a, _)| IpAddr::V6(*a)));
        } else {
            out.extend(p.ip4.iter().map(|(a, _)| IpAddr::V4(*a)));
        }
    }
    out
}

/// `a, b, c` or "none configured".
fn list_addrs(addrs: &[IpAddr]) -> String {
    if addrs.is_empty() {
        return "none configured".to_string();
    }
    shorten(&addrs.iter().map(IpAddr::to_string).collect::<Vec<_>>())
}

/// The first few items joined, with how many more.
fn shorten(items: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

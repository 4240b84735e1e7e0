//! The route file (`route-file = "routes.txt"`): one route per line, `PREFIX via ADDR [ADDR...]`
//! or `PREFIX drop`, `#` comments and blank lines, IPv4 and IPv6 mixed. Streamed line by line with
//! no per-value spans or tree, so a million routes load in well under a second; the rules are
//! those of `[[route]]` (canonical prefixes, reachable distinct next hops, one route per prefix
//! over the file and the config). It reads only the named regular file, within a size bound.

use super::ctx::{Ctx, Field, Fields};
use super::read::{included_file, open_regular, show_bytes, ROUTE_FILE_MAX_BYTES};
use super::routes::next_hop_problem;
use super::util::{mask, parse_prefix};
use super::Issue;
use dataplane::{DataplaneSpec, RouteSpec, RouteTarget};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// Problems shown per route file; the rest are counted in one last message.
const MAX_SHOWN: usize = 100;

const LINE_ACCEPTED: &str = "PREFIX via ADDRESS [ADDRESS...] or PREFIX drop, like \
                             `198.18.2.0/24 via 198.18.1.2` or `2001:db8:9::/48 drop`";

/// What the route file's lines are checked against: the config's neighbours, connected
/// subnets and `[[route]]` prefixes (with their lines).
pub(super) struct RouteContext<'a> {
    pub(super) neighbours: &'a HashMap<IpAddr, usize>,
    pub(super) connected: &'a [(IpAddr, u8)],
    pub(super) table_routes: &'a HashMap<(IpAddr, u8), usize>,
    /// The config file's label, for duplicates of its `[[route]]`s.
    pub(super) config_label: &'a str,
}

/// Problems found in the file: (line, message), at most `MAX_SHOWN` of each kind kept.
#[derive(Default)]
struct Problems {
    kept: Vec<(u32, String)>,
    more: usize,
}

impl Problems {
    fn push(&mut self, line: u32, msg: String) {
        if self.kept.len() < MAX_SHOWN {
            self.kept.push((line, msg));
        } else {
            self.more += 1;
        }
    }
}

/// Routes read from the file, and the keys that find duplicates (prefix, length, line).
#[derive(Default)]
struct Loaded {
    routes4: Vec<RouteSpec<Ipv4Addr>>,
    routes6: Vec<RouteSpec<Ipv6Addr>>,
    keys4: Vec<(u64, u32)>,
    keys6: Vec<(u128, u8, u32)>,
}

impl Ctx<'_> {
    /// The top-level `route-file` key: read the file and append its routes to `spec`.
    pub(super) fn route_file(
        &mut self,
        top: &Fields<'_>,
        base_dir: &Path,
        rc: &RouteContext<'_>,
        spec: &mut DataplaneSpec,
    ) {
        let (name, span) = match self.string(top, "route-file") {
            Field::Ok(s, span) => (s, span),
            Field::Missing | Field::Bad => return,
        };
        if name.is_empty() {
            self.error(
                &span,
                "",
                Some("route-file"),
                "empty path; accepted: a file path relative to the config file's directory",
            );
            return;
        }
        let (path, label) = included_file(base_dir, name);
        let reader = match open_regular(&path, ROUTE_FILE_MAX_BYTES) {
            Ok(r) => r,
            Err(why) => {
                self.error(
                    &span,
                    "",
                    Some("route-file"),
                    format!(
                        "cannot read {}: {why}; accepted: a file of routes, one per line, \
                         relative to the config file's directory",
                        path.display()
                    ),
                );
                return;
            }
        };
        let mut problems = Problems::default();
        let loaded = load(reader, rc, &mut problems);
        if problems.kept.is_empty() && problems.more == 0 {
            spec.routes4.extend(loaded.routes4);
            spec.routes6.extend(loaded.routes6);
            return;
        }
        problems.kept.sort_by_key(|(line, _)| *line);
        let shown = problems.kept.len().min(MAX_SHOWN);
        let hidden = problems.more + problems.kept.len() - shown;
        let mut last_line = 0;
        for (line, message) in problems.kept.into_iter().take(shown) {
            last_line = line as usize;
            self.issues.push(Issue {
                file: label.clone(),
                line: line as usize,
                section: String::new(),
                field: None,
                message,
            });
        }
        if hidden > 0 {
            self.issues.push(Issue {
                file: label,
                line: last_line,
                section: String::new(),
                field: None,
                message: format!(
                    "{hidden} more problem{} in this file not shown (the first {shown} are)",
                    if hidden == 1 { "" } else { "s" }
                ),
            });
        }
    }
}

/// Read every line of the route file; problems go to `problems`, routes to the result.
fn load(
    reader: std::io::Take<std::fs::File>,
    rc: &RouteContext<'_>,
    problems: &mut Problems,
) -> Loaded {
    let mut out = Loaded::default();
    let mut reader = BufReader::with_capacity(1 << 17, reader);
    let mut buf: Vec<u8> = Vec::with_capacity(256);
    let mut line_no: u32 = 0;
    let mut total: u64 = 0;
    // The last next hop found valid: most routes share a few next hops.
    let mut last_good: Option<IpAddr> = None;
    loop {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                problems.push(line_no + 1, format!("cannot read this line: {e}"));
                break;
            }
        };
        line_no = line_no.saturating_add(1);
        total += n as u64;
        if total > ROUTE_FILE_MAX_BYTES {
            problems.push(
                line_no,
                format!(
                    "the file grew past {} while being read; accepted: a regular file of at \
                     most {}",
                    show_bytes(ROUTE_FILE_MAX_BYTES),
                    show_bytes(ROUTE_FILE_MAX_BYTES)
                ),
            );
            break;
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            problems.push(
                line_no,
                "this line is not UTF-8 text; accepted: ".to_string() + LINE_ACCEPTED,
            );
            continue;
        };
        let text = match text.find('#') {
            Some(i) => &text[..i],
            None => text,
        };
        let mut words = text.split_ascii_whitespace();
        let Some(prefix) = words.next() else {
            continue;
        };
        if let Err(msg) = route_line(prefix, words, line_no, rc, &mut last_good, &mut out) {
            problems.push(line_no, msg);
        }
    }
    duplicates(&mut out, rc, problems);
    out
}

/// One non-empty line: its route goes to `out`, or the first problem is returned.
fn route_line<'l>(
    prefix: &str,
    mut words: impl Iterator<Item = &'l str>,
    line: u32,
    rc: &RouteContext<'_>,
    last_good: &mut Option<IpAddr>,
    out: &mut Loaded,
) -> Result<(), String> {
    let (ip, len) = parse_prefix(prefix).map_err(|why| {
        format!(
            "`{prefix}` {why}; accepted: {LINE_ACCEPTED}, the prefix as ADDRESS/LENGTH like \
             198.18.2.0/24 or 2001:db8:2::/48"
        )
    })?;
    let net = mask(ip, len);
    if net != ip {
        return Err(format!(
            "`{prefix}` has host bits set (did you mean {net}/{len}?); accepted: a network \
             address with its prefix length"
        ));
    }
    let target = match words.next() {
        Some("drop") => {
            if let Some(w) = words.next() {
                return Err(format!(
                    "unexpected `{w}` after `drop`; accepted: {LINE_ACCEPTED}"
                ));
            }
            None
        }
        Some("via") => Some(words),
        Some(w) => {
            return Err(format!(
                "`{w}` after the prefix is not `via` or `drop`; accepted: {LINE_ACCEPTED}"
            ))
        }
        None => {
            return Err(format!(
                "a prefix without `via` or `drop`; accepted: {LINE_ACCEPTED}"
            ))
        }
    };
    match net {
        IpAddr::V4(p) => {
            let target = match target {
                None => RouteTarget::Drop,
                Some(w) => RouteTarget::Via(hops(w, net, rc, last_good, |a| match a {
                    IpAddr::V4(a) => Some(a),
                    IpAddr::V6(_) => None,
                })?),
            };
            out.routes4.push(RouteSpec {
                prefix: p,
                len,
                target,
            });
            out.keys4
                .push(((u64::from(u32::from(p)) << 8) | u64::from(len), line));
        }
        IpAddr::V6(p) => {
            let target = match target {
                None => RouteTarget::Drop,
                Some(w) => RouteTarget::Via(hops(w, net, rc, last_good, |a| match a {
                    IpAddr::V6(a) => Some(a),
                    IpAddr::V4(_) => None,
                })?),
            };
            out.routes6.push(RouteSpec {
                prefix: p,
                len,
                target,
            });
            out.keys6.push((u128::from(p), len, line));
        }
    }
    Ok(())
}

/// The next hops after `via`: at least one, each valid for a route to `net`, all distinct.
fn hops<'l, A: Copy + PartialEq>(
    words: impl Iterator<Item = &'l str>,
    net: IpAddr,
    rc: &RouteContext<'_>,
    last_good: &mut Option<IpAddr>,
    of_family: impl Fn(IpAddr) -> Option<A>,
) -> Result<Vec<A>, String> {
    let mut out: Vec<A> = Vec::with_capacity(1);
    for w in words {
        let ip: IpAddr = w.parse().map_err(|_| {
            format!("`{w}` is not an IP address; accepted: a next-hop address like 198.18.2.2")
        })?;
        if *last_good != Some(ip) {
            if let Some(why) = next_hop_problem(ip, Some(net), rc.neighbours, rc.connected) {
                return Err(why);
            }
            *last_good = Some(ip);
        }
        let Some(a) = of_family(ip) else {
            // next_hop_problem refused other families already.
            return Err(format!("next hop {ip} is not of the route's family"));
        };
        if out.contains(&a) {
            return Err(format!(
                "next hop {ip} is listed twice; accepted: distinct next hops"
            ));
        }
        out.push(a);
    }
    if out.is_empty() {
        return Err(format!(
            "`via` without a next hop; accepted: {LINE_ACCEPTED}"
        ));
    }
    Ok(out)
}

/// One route per prefix: over the file (a later line repeating an earlier one) and against the
/// config's `[[route]]` tables.
fn duplicates(out: &mut Loaded, rc: &RouteContext<'_>, problems: &mut Problems) {
    let mut keys4 = std::mem::take(&mut out.keys4);
    keys4.sort_unstable();
    for w in keys4.windows(2) {
        if w[0].0 == w[1].0 {
            let first = keys4.partition_point(|k| k.0 < w[1].0);
            let net = Ipv4Addr::from((w[1].0 >> 8) as u32);
            let len = (w[1].0 & 0xff) as u8;
            problems.push(
                w[1].1,
                format!(
                    "duplicate route {net}/{len}: also at line {}; accepted: one route per prefix",
                    keys4[first].1
                ),
            );
        }
    }
    let mut keys6 = std::mem::take(&mut out.keys6);
    keys6.sort_unstable();
    for w in keys6.windows(2) {
        if (w[0].0, w[0].1) == (w[1].0, w[1].1) {
            let first = keys6.partition_point(|k| (k.0, k.1) < (w[1].0, w[1].1));
            let net = Ipv6Addr::from(w[1].0);
            problems.push(
                w[1].2,
                format!(
                    "duplicate route {net}/{}: also at line {}; accepted: one route per prefix",
                    w[1].1, keys6[first].2
                ),
            );
        }
    }
    if rc.table_routes.is_empty() {
        return;
    }
    let in_tables = |net: IpAddr, len: u8, line: u32, problems: &mut Problems| {
        if let Some(first) = rc.table_routes.get(&(net, len)) {
            problems.push(
                line,
                format!(
                    "duplicate route {net}/{len}: also a [[route]] at {}:{first}; accepted: one \
                     route per prefix, in the route file or in the config",
                    rc.config_label
                ),
            );
        }
    };
    for (k, line) in keys4 {
        in_tables(
            IpAddr::V4(Ipv4Addr::from((k >> 8) as u32)),
            (k & 0xff) as u8,
            line,
            problems,
        );
    }
    for (a, len, line) in keys6 {
        in_tables(IpAddr::V6(Ipv6Addr::from(a)), len, line, problems);
    }
}

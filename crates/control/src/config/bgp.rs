//! The `[bgp]` table: how the load balancer's VIPs are announced through the operator's BIRD 2
//! (see `crate::bgp`). Checks and records the values: paths relative to the config's
//! directory, names that go into BIRD's config validated so they need no escaping, attributes
//! in range. The routes file's directory is checked by `check_files`. It never talks to BIRD
//! and never writes the routes file.

use super::ctx::{Ctx, Field, Fields};
use super::value::Node;
use super::{FileKind, FileRef};
use crate::bgp::{interface_problem, protocol_problem, BgpConfig, Daemon};
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The keys of `[bgp]`.
pub(super) const BGP_KEYS: &[&str] = &[
    "daemon",
    "control-socket",
    "routes-file",
    "interface",
    "protocol",
    "med",
    "communities",
    "large-communities",
    "next-hop4",
    "next-hop6",
    "drain-timeout-ms",
    "drain-quiet-ms",
    "stall-ms",
];

const S: &str = "[bgp]";

impl Ctx<'_> {
    /// `[bgp]`: None (with issues) when anything is wrong. `has_lb`: the config has an `[lb]`
    /// (the VIPs to announce); `[bgp]` without one is refused.
    pub(super) fn bgp(
        &mut self,
        node: &Node,
        base_dir: &Path,
        has_lb: bool,
        files: &mut Vec<FileRef>,
    ) -> Option<BgpConfig> {
        let f = self.fields(S.to_string(), Some("bgp"), node, BGP_KEYS)?;
        self.remember_lines(&f);
        let before = self.issues.len();
        if !has_lb {
            let span = f.span.clone();
            self.error(
                &span,
                S,
                None,
                "[bgp] announces the VIPs of [lb] and this config has no [lb]; accepted: an [lb] \
                 table with the VIPs to announce, or no [bgp]",
            );
        }
        if let Field::Ok(d, span) = self.string(&f, "daemon") {
            if d != "bird" {
                self.error(
                    &span,
                    S,
                    Some("daemon"),
                    format!("`{d}` is not a supported daemon; accepted: bird"),
                );
            }
        }
        let socket = self.bgp_path(&f, "control-socket", base_dir, "BIRD's control socket");
        let routes = self.bgp_path(
            &f,
            "routes-file",
            base_dir,
            "the file BIRD's config includes",
        );
        if let (Some(path), Some(n)) = (&routes, f.get("routes-file")) {
            files.push(FileRef {
                section: S.to_string(),
                field: "routes-file",
                line: self.line_of(n.span().start),
                path: path.clone(),
                // Checked like a pcap output: its directory must exist, it is not a directory.
                kind: FileKind::PcapTx,
            });
        }
        let mut cfg = BgpConfig::new(PathBuf::new(), PathBuf::new());
        cfg.daemon = Daemon::Bird;
        if let Field::Ok(s, span) = self.string(&f, "interface") {
            match interface_problem(s) {
                Some(p) => self.error(&span, S, Some("interface"), p),
                None => cfg.interface = s.to_string(),
            }
        }
        if let Field::Ok(s, span) = self.string(&f, "protocol") {
            match protocol_problem(s) {
                Some(p) => self.error(&span, S, Some("protocol"), p),
                None => cfg.protocol = s.to_string(),
            }
        }
        cfg.med = self
            .int(&f, "med", 0..=i64::from(u32::MAX))
            .ok()
            .map(|m| m as u32);
        cfg.communities = self
            .communities(&f, "communities", 2, u16::MAX.into())
            .into_iter()
            .map(|v| (v[0] as u16, v[1] as u16))
            .collect();
        cfg.large_communities = self
            .communities(&f, "large-communities", 3, u32::MAX.into())
            .into_iter()
            .map(|v| (v[0] as u32, v[1] as u32, v[2] as u32))
            .collect();
        match self.bgp_next_hop(&f, "next-hop4", false) {
            Some(IpAddr::V4(a)) => cfg.next_hop4 = Some(a),
            Some(IpAddr::V6(_)) | None => {}
        }
        match self.bgp_next_hop(&f, "next-hop6", true) {
            Some(IpAddr::V6(a)) => cfg.next_hop6 = Some(a),
            Some(IpAddr::V4(_)) | None => {}
        }
        cfg.drain_timeout = self.ms(&f, "drain-timeout-ms", 100..=3_600_000, cfg.drain_timeout);
        cfg.drain_quiet = self.ms(&f, "drain-quiet-ms", 100..=600_000, cfg.drain_quiet);
        cfg.stall = self.ms(&f, "stall-ms", 50..=60_000, cfg.stall);
        if self.issues.len() > before {
            return None;
        }
        cfg.control_socket = socket?;
        cfg.routes_file = routes?;
        Some(cfg)
    }

    /// A required, non-empty path, resolved against the config's directory.
    fn bgp_path(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        base_dir: &Path,
        what: &str,
    ) -> Option<PathBuf> {
        let accepted = format!("the path of {what} (relative to the config file's directory)");
        match self.string(f, key) {
            Field::Ok("", span) => {
                self.error(
                    &span,
                    S,
                    Some(key),
                    format!("empty path; accepted: {accepted}"),
                );
                None
            }
            Field::Ok(s, span) if s.contains('\0') => {
                self.error(
                    &span,
                    S,
                    Some(key),
                    format!("a NUL in the path; accepted: {accepted}"),
                );
                None
            }
            Field::Ok(s, _) => Some(base_dir.join(s)),
            Field::Missing => {
                self.missing(f, key, &accepted);
                None
            }
            Field::Bad => None,
        }
    }

    /// An array of distinct "A:B[:C]" strings of `parts` numbers each in 0..=`max`.
    fn communities(&mut self, f: &Fields<'_>, key: &str, parts: usize, max: u64) -> Vec<Vec<u64>> {
        let (form, example) = if parts == 2 {
            ("ASN:VALUE with two numbers 0..=65535", "65000:100")
        } else {
            (
                "GLOBAL:LOCAL1:LOCAL2 with three numbers 0..=4294967295",
                "65000:1:2",
            )
        };
        let Field::Ok(items, _) = self.strings(f, key, false) else {
            return Vec::new();
        };
        let mut out: Vec<Vec<u64>> = Vec::new();
        for (s, span) in items {
            let nums: Vec<Option<u64>> = s
                .split(':')
                .map(|p| p.trim().parse::<u64>().ok().filter(|n| *n <= max))
                .collect();
            let problem = if nums.len() != parts || nums.iter().any(Option::is_none) {
                Some(format!(
                    "`{s}` is not a community; accepted: {form}, like \"{example}\""
                ))
            } else {
                let v: Vec<u64> = nums.into_iter().flatten().collect();
                if out.contains(&v) {
                    Some(format!(
                        "`{s}` is listed twice; accepted: each community once"
                    ))
                } else {
                    out.push(v);
                    None
                }
            };
            if let Some(p) = problem {
                self.error(&span, S, Some(key), p);
            }
        }
        out
    }

    /// A unicast address of the family of `key` (`v6`: IPv6).
    fn bgp_next_hop(&mut self, f: &Fields<'_>, key: &str, v6: bool) -> Option<IpAddr> {
        let (fam, example) = if v6 {
            ("an IPv6", "2001:db8:11::2")
        } else {
            ("an IPv4", "198.18.11.2")
        };
        let accepted = format!("{fam} unicast address like {example}");
        let n = f.get(key)?;
        let s = match self.string(f, key) {
            Field::Ok(s, _) => s,
            _ => return None,
        };
        let problem = match s.parse::<IpAddr>() {
            Err(_) => format!("`{s}` is not an IP address; accepted: {accepted}"),
            Ok(a) if a.is_ipv6() != v6 => {
                format!("`{s}` is of the other family; accepted: {accepted}")
            }
            Ok(a) if a.is_unspecified() || a.is_multicast() || a == IpAddr::from([255; 4]) => {
                format!("`{s}` is not a unicast address; accepted: {accepted}")
            }
            Ok(a) => return Some(a),
        };
        self.bad(f, key, n, problem);
        None
    }

    /// Milliseconds in `range`, `default` when absent.
    fn ms(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        range: RangeInclusive<i64>,
        default: Duration,
    ) -> Duration {
        match self.int(f, key, range) {
            Field::Ok(ms, _) => Duration::from_millis(ms as u64),
            Field::Missing | Field::Bad => default,
        }
    }
}

//! Bridges in flow mode: the `[[bridge]]` keys `mode`, `flows`, `flow-file`, `groups` and the
//! cache sizes, and the ports' `ofport`, `emc` and `megaflow` keys, parsed in `ovs-ofctl` syntax
//! with every bad rule reported at its line. It never applies anything; `bridges` assembles the
//! `FlowBridgeSpec` and checks the rules against the bridge's ports.

use super::bridges::{BridgeHead, Membership};
use super::ctx::{Ctx, Field, Fields};
use super::read::{included_file, read_text};
use super::Issue;
use dataplane::{BridgeSpec, FlowBridgeSpec, FlowCachePolicy, FlowPortSpec, PortSpec};
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// The `[[bridge]]` keys of flow mode (besides `name`).
pub(super) const FLOW_BRIDGE_KEYS: &[&str] = &[
    "mode",
    "flows",
    "flow-file",
    "groups",
    "megaflow-limit",
    "megaflow-idle-seconds",
    "emc-entries",
    "emc-insert-inv-prob",
    "frag-handling",
];

/// Largest flow file.
pub(super) const FLOW_FILE_MAX_BYTES: u64 = 256 << 20;

/// Largest OpenFlow port number of a physical port (0xff00 and above are reserved).
pub(super) const MAX_OFPORT: i64 = 0xfeff;

/// Where a rule or group came from, to point at it when the whole set is checked.
#[derive(Clone, Debug)]
pub(super) enum Origin {
    /// An item of the config's `flows` or `groups` array.
    Config {
        /// Its span in the config.
        span: Range<usize>,
        /// The key (`flows`, `groups`).
        key: &'static str,
    },
    /// A line of the flow file.
    File {
        /// The file's label.
        label: String,
        /// 1-based line.
        line: usize,
    },
}

/// A `[[bridge]]`'s flow-mode settings.
#[derive(Clone, Debug)]
pub(super) struct FlowSettings {
    /// The section, e.g. `[[bridge]] #1`.
    pub(super) section: String,
    /// The rules, in the order given (the `flows` array, then the flow file).
    pub(super) rules: Vec<(flow::Rule, Origin)>,
    /// The groups, in the order given.
    pub(super) groups: Vec<(flow::Group, Origin)>,
    /// Cache sizes and timers.
    pub(super) cache: FlowCachePolicy,
    /// Whether `flows` or `flow-file` was given (otherwise the bridge starts with Open vSwitch's
    /// default `priority=0,actions=normal`).
    pub(super) has_rules: bool,
    /// How IP fragments are handled (`frag-handling`).
    pub(super) frag: flow::FragHandling,
}

/// A port's flow keys.
#[derive(Clone, Debug, Default)]
pub(super) struct FlowPortKeys {
    /// `ofport`, with its span.
    pub(super) ofport: Option<(u16, Range<usize>)>,
    /// `emc` (default true).
    pub(super) emc: Option<bool>,
    /// `megaflow` (default true).
    pub(super) megaflow: Option<bool>,
    /// Span of the first flow key given, to point at when the port is not in a flow bridge.
    pub(super) first: Option<(&'static str, Range<usize>)>,
}

impl Ctx<'_> {
    /// A `[[bridge]]`'s flow keys: None for a learning bridge (and flow keys on it are errors).
    pub(super) fn flow_settings(
        &mut self,
        f: &Fields<'_>,
        base_dir: &Path,
    ) -> Option<FlowSettings> {
        let flow = match self.string(f, "mode") {
            Field::Ok("flow", _) => true,
            Field::Ok("learning", _) | Field::Missing => false,
            Field::Ok(other, span) => {
                let section = f.section.clone();
                self.error(
                    &span,
                    &section,
                    Some("mode"),
                    format!(
                        "`{other}` is not a bridge mode; accepted: \"learning\" (MAC learning, \
                         the default) or \"flow\" (OpenFlow tables and a flow cache)"
                    ),
                );
                return None;
            }
            Field::Bad => return None,
        };
        if !flow {
            for key in FLOW_BRIDGE_KEYS.iter().filter(|k| **k != "mode") {
                if let Some(n) = f.get(key) {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "`{key}` applies only to a bridge in flow mode; accepted: add \
                             mode = \"flow\""
                        ),
                    );
                }
            }
            return None;
        }
        let mut out = FlowSettings {
            section: f.section.clone(),
            rules: Vec::new(),
            groups: Vec::new(),
            cache: FlowCachePolicy::default(),
            has_rules: f.get("flows").is_some() || f.get("flow-file").is_some(),
            frag: flow::FragHandling::default(),
        };
        if let Field::Ok(items, _) = self.strings(f, "flows", false) {
            for (text, span) in items {
                match flow::ofctl::parse_flow(text) {
                    Ok(rule) => out
                        .rules
                        .push((rule, Origin::Config { span, key: "flows" })),
                    Err(e) => self.error(&span, &f.section, Some("flows"), e.to_string()),
                }
            }
        }
        if let Field::Ok(name, span) = self.string(f, "flow-file") {
            self.flow_file(f, name, span, base_dir, &mut out);
        }
        if let Field::Ok(items, _) = self.strings(f, "groups", false) {
            for (text, span) in items {
                match flow::ofctl::parse_group(text) {
                    Ok(g) => out.groups.push((
                        g,
                        Origin::Config {
                            span,
                            key: "groups",
                        },
                    )),
                    Err(e) => self.error(&span, &f.section, Some("groups"), e.to_string()),
                }
            }
        }
        if let Field::Ok(v, _) = self.int(f, "megaflow-limit", 1..=10_000_000) {
            out.cache.megaflow_limit = v as usize;
        }
        if let Field::Ok(v, _) = self.int(f, "megaflow-idle-seconds", 1..=3600) {
            out.cache.idle_seconds = v as u32;
        }
        match self.int(f, "emc-entries", 0..=1 << 20) {
            Field::Ok(v, span) if v != 0 && (v as u64).count_ones() != 1 => {
                self.error(
                    &span,
                    &f.section,
                    Some("emc-entries"),
                    format!(
                        "`{v}` is not a power of two; accepted: 0 (no exact-match cache) or a \
                         power of two up to 1048576"
                    ),
                );
            }
            Field::Ok(v, _) => out.cache.emc_entries = v as usize,
            Field::Missing | Field::Bad => {}
        }
        if let Field::Ok(v, _) = self.int(f, "emc-insert-inv-prob", 1..=1_000_000) {
            out.cache.emc_insert_inv_prob = v as u32;
        }
        if let Field::Ok(name, span) = self.string(f, "frag-handling") {
            match flow::FragHandling::from_name(name) {
                Some(frag) => out.frag = frag,
                None => self.error(
                    &span,
                    &f.section,
                    Some("frag-handling"),
                    format!(
                        "`{name}` is not a fragment handling; accepted: normal (the default, as \
                         Open vSwitch's: transport ports of fragments read as 0), drop, nx-match \
                         (Open vSwitch's `reassemble` is not supported)"
                    ),
                ),
            }
        }
        Some(out)
    }

    /// The rules of `flow-file`: one `ovs-ofctl add-flows` line each, `#` comments and blank
    /// lines skipped; every bad line reported at FLOW-FILE:LINE.
    fn flow_file(
        &mut self,
        f: &Fields<'_>,
        name: &str,
        span: Range<usize>,
        base_dir: &Path,
        out: &mut FlowSettings,
    ) {
        let (path, label) = included_file(base_dir, name);
        let text = match read_text(&path, FLOW_FILE_MAX_BYTES) {
            Ok(text) => text,
            Err(why) => {
                self.error(
                    &span,
                    &f.section,
                    Some("flow-file"),
                    format!(
                        "cannot read {}: {why}; accepted: a file of rules in ovs-ofctl add-flows \
                     syntax, one per line, relative to the config file's directory",
                        path.display()
                    ),
                );
                return;
            }
        };
        for (r, line) in self.file_lines(&text, &label, rule_content, flow::ofctl::parse_flow) {
            let label = label.clone();
            out.rules.push((r, Origin::File { label, line }));
        }
    }

    /// A port's `ofport`, `emc` and `megaflow` keys.
    pub(super) fn flow_port_keys(&mut self, f: &Fields<'_>) -> FlowPortKeys {
        let mut out = FlowPortKeys::default();
        if let Field::Ok(v, span) = self.int(f, "ofport", 1..=MAX_OFPORT) {
            out.first.get_or_insert(("ofport", span.clone()));
            out.ofport = Some((v as u16, span));
        }
        for key in ["emc", "megaflow"] {
            if let Field::Ok(v, span) = self.boolean(f, key) {
                out.first.get_or_insert((key, span));
                if key == "emc" {
                    out.emc = Some(v);
                } else {
                    out.megaflow = Some(v);
                }
            }
        }
        out
    }

    /// Give bridge `b` its OpenFlow side when its section put it in flow mode: every member's
    /// OpenFlow port number (its `ofport`, else the lowest free number from 1 in port order),
    /// the rules (Open vSwitch's default `priority=0,actions=normal` when none was given) and
    /// groups checked together against those ports. A learning bridge's members may not carry
    /// flow keys.
    pub(super) fn flow_bridge(
        &mut self,
        b: &mut BridgeSpec,
        head: Option<&BridgeHead>,
        memberships: &[Option<Membership>],
        ports: &[Option<PortSpec>],
    ) {
        let members: Vec<(usize, &Membership)> = b
            .ports
            .iter()
            .filter_map(|m| {
                memberships
                    .get(m.port)
                    .and_then(Option::as_ref)
                    .map(|x| (m.port, x))
            })
            .collect();
        let Some(settings) = head.and_then(|h| h.flow.as_ref()) else {
            for (_, m) in &members {
                if let Some((k, span)) = &m.flow.first {
                    self.error(
                        span,
                        &m.section,
                        Some(k),
                        format!(
                            "`{k}` applies only to a port in a bridge in flow mode, and bridge \
                             `{}` is a learning bridge; accepted: mode = \"flow\" on the bridge",
                            b.name
                        ),
                    );
                }
            }
            return;
        };
        let mut used: HashMap<u16, &Membership> = HashMap::new();
        for (_, m) in &members {
            if let Some((n, span)) = &m.flow.ofport {
                if let Some(other) = used.get(n) {
                    self.error(
                        span,
                        &m.section,
                        Some("ofport"),
                        format!(
                            "OpenFlow port {n} is also {}'s in bridge `{}`; accepted: a number \
                             used by one port of the bridge",
                            other.section, b.name
                        ),
                    );
                } else {
                    used.insert(*n, m);
                }
            }
        }
        let mut next = 1u16;
        let mut flow_ports = Vec::new();
        for (port, m) in &members {
            let ofport = match &m.flow.ofport {
                Some((n, _)) => *n,
                None => {
                    while used.contains_key(&next) {
                        next += 1;
                    }
                    used.insert(next, m);
                    next
                }
            };
            flow_ports.push(FlowPortSpec {
                port: *port,
                ofport,
                emc: m.flow.emc.unwrap_or(true),
                megaflow: m.flow.megaflow.unwrap_or(true),
            });
        }
        let rules: Vec<flow::Rule> = if settings.has_rules {
            settings.rules.iter().map(|(r, _)| r.clone()).collect()
        } else {
            vec![flow::Rule {
                table: 0,
                priority: 0,
                cookie: 0,
                m: flow::Match::ANY,
                actions: vec![flow::Action::Output(flow::PortRef::Normal)],
                idle_timeout: 0,
                hard_timeout: 0,
            }]
        };
        let spec = FlowBridgeSpec {
            ports: flow_ports,
            rules,
            groups: settings.groups.iter().map(|(g, _)| g.clone()).collect(),
            cache: settings.cache,
            frag: settings.frag,
        };
        if let Err((index, message)) = check_flow_bridge(&spec, ports) {
            // Groups are applied first, then rules, in the order given.
            let origin = if index < settings.groups.len() {
                settings.groups.get(index).map(|(_, o)| o)
            } else {
                settings
                    .rules
                    .get(index - settings.groups.len())
                    .map(|(_, o)| o)
            };
            match origin {
                Some(o) => self.at_origin(&settings.section, &o.clone(), message),
                None => {
                    let span = head.map(|h| h.span.clone()).unwrap_or_default();
                    self.error(&span, &settings.section, None, message)
                }
            }
            return;
        }
        b.flow = Some(spec);
    }

    /// Report a problem with a rule or group at its origin.
    pub(super) fn at_origin(&mut self, section: &str, origin: &Origin, message: String) {
        match origin {
            Origin::Config { span, key } => self.error(span, section, Some(key), message),
            Origin::File { label, line } => self.issues.push(Issue {
                file: label.clone(),
                line: *line,
                section: String::new(),
                field: None,
                message,
            }),
        }
    }
}

/// Check a flow bridge's groups and rules together, as the data plane will install them: the
/// index (groups first, then rules) and message of the first problem.
fn check_flow_bridge(
    spec: &FlowBridgeSpec,
    ports: &[Option<PortSpec>],
) -> Result<(), (usize, String)> {
    let tunnels = dataplane::flows::tunnel_ports(ports.iter().map(Option::as_ref));
    dataplane::flows::initial_tables(spec, &tunnels).map(|_| ())
}

/// What of a flow-file line is read: the trimmed rule, None for a blank line or a comment (a
/// line starting with `#`).
fn rule_content(line: &str) -> Option<&str> {
    let rule = line.trim();
    (!rule.is_empty() && !rule.starts_with('#')).then_some(rule)
}

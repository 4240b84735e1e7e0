//! Bridge domains: the `[[bridge]]` sections and the ports' `bridge`, `access-vlan`,
//! `trunk-vlans` and `native-vlan` keys, resolved into `BridgeSpec`s. A bridged port never routes:
//! it has no addresses and is no xconnect `from`.

use super::ctx::{Ctx, Field, Fields};
use super::flow_bridge::{FlowPortKeys, FlowSettings, FLOW_BRIDGE_KEYS};
use super::util::valid_name;
use super::value::Node;
use super::NAME_ACCEPTED;
use dataplane::{BridgeMemberSpec, BridgePortMode, BridgeSpec, DataplaneSpec, PortSpec};
use std::ops::Range;
use std::path::Path;

/// A port's membership in a bridge, before the bridge name is resolved.
pub(super) struct Membership {
    pub(super) section: String,
    pub(super) name: String,
    pub(super) span: Range<usize>,
    /// None when its VLAN keys had errors (already reported).
    pub(super) mode: Option<BridgePortMode>,
    /// Its `ofport`, `emc` and `megaflow` keys (for a bridge in flow mode).
    pub(super) flow: FlowPortKeys,
}

/// A `[[bridge]]` section: its name and span, and its flow settings in flow mode.
pub(super) struct BridgeHead {
    pub(super) name: String,
    pub(super) span: Range<usize>,
    pub(super) flow: Option<FlowSettings>,
}

/// The keys of a `[[bridge]]`: its name and those of flow mode.
fn bridge_keys() -> Vec<&'static str> {
    std::iter::once("name")
        .chain(FLOW_BRIDGE_KEYS.iter().copied())
        .collect()
}

impl Ctx<'_> {
    /// The `[[bridge]]` sections: each one's name (None where it had an error, reported).
    pub(super) fn bridge_names(
        &mut self,
        bridges: &[&Node],
        base_dir: &Path,
    ) -> Vec<Option<BridgeHead>> {
        let mut bridge_names: Vec<Option<BridgeHead>> = Vec::new();
        for (i, node) in bridges.iter().enumerate() {
            let section = format!("[[bridge]] #{}", i + 1);
            let Some(f) = self.fields(section.clone(), None, node, &bridge_keys()) else {
                bridge_names.push(None);
                continue;
            };
            self.remember_lines(&f);
            let flow = self.flow_settings(&f, base_dir);
            match self.string(&f, "name") {
                Field::Ok(s, span) if valid_name(s) => {
                    if let Some(Some(first)) = bridge_names
                        .iter()
                        .find(|b| b.as_ref().is_some_and(|b| b.name == s))
                    {
                        let line = self.line_of(first.span.start);
                        self.error(
                            &span,
                            &section,
                            Some("name"),
                            format!(
                                "duplicate bridge name `{s}`: also defined at line {line}; \
                                 accepted: a name used by one [[bridge]] only"
                            ),
                        );
                        bridge_names.push(None);
                    } else {
                        bridge_names.push(Some(BridgeHead {
                            name: s.to_string(),
                            span,
                            flow,
                        }));
                    }
                }
                Field::Ok(s, span) => {
                    self.error(
                        &span,
                        &section,
                        Some("name"),
                        format!("`{s}` is not a valid bridge name; accepted: {NAME_ACCEPTED}"),
                    );
                    bridge_names.push(None);
                }
                Field::Missing => {
                    self.missing(&f, "name", NAME_ACCEPTED);
                    bridge_names.push(None);
                }
                Field::Bad => bridge_names.push(None),
            }
        }
        bridge_names
    }

    /// A port's `bridge`, `access-vlan`, `trunk-vlans` and `native-vlan` keys.
    pub(super) fn membership(&mut self, f: &Fields<'_>) -> Option<Membership> {
        let section = f.section.clone();
        let vlan_keys = ["access-vlan", "trunk-vlans", "native-vlan"];
        let flow = self.flow_port_keys(f);
        let (name, span) = match self.string(f, "bridge") {
            Field::Ok(s, span) => (s.to_string(), span),
            Field::Missing => {
                if let Some((k, span)) = &flow.first {
                    self.error(
                        span,
                        &section,
                        Some(k),
                        format!(
                            "`{k}` applies only to a port in a bridge in flow mode; accepted: \
                             add bridge = \"NAME\" naming a [[bridge]] with mode = \"flow\""
                        ),
                    );
                }
                for k in vlan_keys {
                    if let Some(n) = f.get(k) {
                        self.bad(
                            f,
                            k,
                            n,
                            format!(
                                "`{k}` applies only to a port in a bridge; accepted: add \
                                 bridge = \"NAME\" naming a [[bridge]]"
                            ),
                        );
                    }
                }
                return None;
            }
            Field::Bad => return None,
        };
        let access = self.int(f, "access-vlan", 1..=4094);
        let native = self.int(f, "native-vlan", 1..=4094);
        let trunk = self.distinct_ints(
            f,
            "trunk-vlans",
            1..=4094,
            ("VLAN id", "VLAN ids"),
            "distinct VLAN ids 1..=4094, like [10, 20]",
        );
        let mode = match (access, trunk, native) {
            (Field::Bad, _, _) | (_, Field::Bad, _) | (_, _, Field::Bad) => None,
            (Field::Ok(_, span), Field::Ok(..), _) => {
                self.error(
                    &span,
                    &section,
                    Some("access-vlan"),
                    "a port is an access port (`access-vlan`) or a trunk (`trunk-vlans`), not \
                     both; accepted: one of them",
                );
                None
            }
            (Field::Ok(_, span), _, Field::Ok(..)) => {
                self.error(
                    &span,
                    &section,
                    Some("native-vlan"),
                    "`native-vlan` applies only to trunk ports; accepted: `trunk-vlans` with an \
                     optional `native-vlan`, or `access-vlan` alone",
                );
                None
            }
            (Field::Ok(v, _), Field::Missing, Field::Missing) => {
                Some(BridgePortMode::Access { pvid: v as u16 })
            }
            (Field::Missing, Field::Ok(allowed, _), native) => Some(BridgePortMode::Trunk {
                allowed: allowed.into_iter().map(|v| v as u16).collect(),
                native: native.ok().map(|v| v as u16),
            }),
            (Field::Missing, Field::Missing, Field::Ok(_, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("native-vlan"),
                    "`native-vlan` applies only to trunk ports; accepted: add `trunk-vlans`",
                );
                None
            }
            (Field::Missing, Field::Missing, Field::Missing) => {
                Some(BridgePortMode::Access { pvid: 1 })
            }
        };
        Some(Membership {
            section,
            name,
            span,
            mode,
            flow,
        })
    }

    /// Resolve the ports' `bridge` keys against the [[bridge]] sections into `spec.bridges`.
    pub(super) fn bridges(
        &mut self,
        memberships: &[Option<Membership>],
        names: &[Option<BridgeHead>],
        ports: &[Option<PortSpec>],
        spec: &mut DataplaneSpec,
    ) {
        // (spec, [[bridge]] number, name span, members rejected by an error reported already)
        let mut out: Vec<(BridgeSpec, usize, Range<usize>, usize)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.as_ref().map(|b| (i, b)))
            .map(|(i, b)| {
                let spec = BridgeSpec {
                    name: b.name.clone(),
                    ports: Vec::new(),
                    flow: None,
                };
                (spec, i + 1, b.span.clone(), 0)
            })
            .collect();
        let defined = || {
            let list: Vec<String> = names
                .iter()
                .flatten()
                .map(|b| format!("`{}`", b.name))
                .collect();
            if list.is_empty() {
                "(no [[bridge]] is defined)".to_string()
            } else {
                list.join(", ")
            }
        };
        for (id, m) in memberships.iter().enumerate() {
            let Some(m) = m else { continue };
            let Some((b, _, _, rejected)) = out.iter_mut().find(|b| b.0.name == m.name) else {
                let msg = format!(
                    "no [[bridge]] is named `{}`; accepted: {}",
                    m.name,
                    defined()
                );
                self.error(&m.span, &m.section, Some("bridge"), msg);
                continue;
            };
            if let Some(Some(p)) = ports.get(id) {
                if !p.ip4.is_empty() || !p.ip6.is_empty() {
                    *rejected += 1;
                    self.error(
                        &m.span,
                        &m.section,
                        Some("bridge"),
                        format!(
                            "port `{}` has IP addresses and is in bridge `{}`; accepted: a \
                             bridged port without `ip4`/`ip6` (it switches, it does not route)",
                            p.name, m.name
                        ),
                    );
                    continue;
                }
            }
            let Some(mode) = m.mode.clone() else {
                *rejected += 1;
                continue;
            };
            if spec.xconnects.iter().any(|x| x.from == id) {
                *rejected += 1;
                self.error(
                    &m.span,
                    &m.section,
                    Some("bridge"),
                    "this port is also the `from` of an [[xconnect]]; accepted: a port either \
                     cross-connected or bridged",
                );
                continue;
            }
            b.ports.push(BridgeMemberSpec { port: id, mode });
        }
        for (b, number, _, _) in &mut out {
            let head = names.get(*number - 1).and_then(Option::as_ref);
            self.flow_bridge(b, head, memberships, ports);
        }
        for (b, number, span, rejected) in &out {
            let n = b.ports.len() + rejected;
            if n < 2 {
                let section = format!("[[bridge]] #{number}");
                self.error(
                    span,
                    &section,
                    Some("name"),
                    format!(
                        "bridge `{}` has {n} port{}; accepted: at least two ports naming it with \
                         bridge = \"{}\"",
                        b.name,
                        if n == 1 { "" } else { "s" },
                        b.name
                    ),
                );
            }
        }
        let out: Vec<BridgeSpec> = out.into_iter().map(|b| b.0).collect();
        spec.bridges = out;
    }
}

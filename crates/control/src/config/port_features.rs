//! A `[[port]]`'s `features` key: which registered features are enabled at the port on which
//! arc, as `set interface feature PORT FEATURE arc ARC` enables them at run time:
//!
//! ```toml
//! [[port]]
//! name = "Ra"
//! features = { ip4-unicast = ["ipfix"], output = ["ipfix"] }
//! ```
//!
//! Every feature named must have its table in the config (it runs) and declare a place on that
//! arc. It owns only this key's reading and checks; applying what it lists is the data plane's
//! (`dataplane::features::FeatureArcs::apply`, at start and by reload).

use super::ctx::{Ctx, Fields};
use super::value::{kind, Node, Val};
use nodes::names::{ARC_IP4_UNICAST, ARC_IP6_UNICAST, ARC_OUTPUT};
use std::ops::Range;

/// The arcs a port's `features` may name.
pub const PORT_ARCS: &[&str] = &[ARC_IP4_UNICAST, ARC_IP6_UNICAST, ARC_OUTPUT];

/// One feature enabled at one port on one arc.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortFeature {
    /// The port's name.
    pub port: String,
    /// The arc.
    pub arc: String,
    /// The feature (its name on the arc).
    pub feature: String,
}

impl PortFeature {
    /// The change that enables (or disables) it at run time.
    pub fn enable(&self, enable: bool) -> crate::commands::FeatureChange {
        crate::commands::FeatureChange {
            port: self.port.clone(),
            feature: self.feature.clone(),
            arc: self.arc.clone(),
            enable,
        }
    }
}

/// A port's `features` as written, checked against the running features once every table is
/// read (`Ctx::check_port_features`).
pub(super) struct Listed {
    section: String,
    port: String,
    /// (arc, feature, where the feature's name is).
    entries: Vec<(String, String, Range<usize>)>,
}

const ACCEPTED: &str = "a table of arcs (ip4-unicast, ip6-unicast, output), each a list of \
                        feature names, e.g. features = { ip4-unicast = [\"ipfix\"] }";

impl Ctx<'_> {
    /// Read the `features` of port `port` (section `f`), checking its shape and arcs.
    pub(super) fn port_features(&mut self, f: &Fields<'_>, port: Option<&str>) -> Option<Listed> {
        let node = f.get("features")?;
        let Val::Table(arcs) = node.get_ref() else {
            let found = kind(node.get_ref());
            self.bad(
                f,
                "features",
                node,
                format!("found {found}; accepted: {ACCEPTED}"),
            );
            return None;
        };
        let mut entries = Vec::new();
        for (arc, list) in arcs {
            let arc_name = arc.get_ref().as_str();
            if !PORT_ARCS.contains(&arc_name) {
                self.error(
                    &arc.span(),
                    &f.section,
                    Some("features"),
                    format!(
                        "`{arc_name}` is not an arc; accepted: {}",
                        PORT_ARCS.join(", ")
                    ),
                );
                continue;
            }
            for (feature, span) in self.feature_names(f, arc_name, list) {
                if entries
                    .iter()
                    .any(|(a, n, _)| a == arc_name && *n == feature)
                {
                    self.error(
                        &span,
                        &f.section,
                        Some("features"),
                        format!("`{feature}` is listed twice on arc {arc_name}; accepted: once"),
                    );
                    continue;
                }
                entries.push((arc_name.to_string(), feature, span));
            }
        }
        Some(Listed {
            section: f.section.clone(),
            port: port?.to_string(),
            entries,
        })
    }

    /// The strings of `list` (one arc's features), each with its place.
    fn feature_names(
        &mut self,
        f: &Fields<'_>,
        arc: &str,
        list: &Node,
    ) -> Vec<(String, Range<usize>)> {
        let Val::Array(items) = list.get_ref() else {
            let found = kind(list.get_ref());
            self.bad(
                f,
                "features",
                list,
                format!("arc {arc}: found {found}; accepted: a list of feature names"),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match item.get_ref() {
                Val::Str(s) => out.push((s.clone(), item.span())),
                other => self.bad(
                    f,
                    "features",
                    item,
                    format!(
                        "arc {arc}: found {}; accepted: a feature name (a string)",
                        kind(other)
                    ),
                ),
            }
        }
        out
    }

    /// Check the features the ports list against those the config runs (`running`: each
    /// feature's name and the arcs it has a place on): the enabled set, in config order.
    pub(super) fn check_port_features(
        &mut self,
        listed: Vec<Listed>,
        running: &[(String, Vec<String>)],
    ) -> Vec<PortFeature> {
        let names: Vec<&str> = running.iter().map(|(n, _)| n.as_str()).collect();
        let mut out = Vec::new();
        for l in listed {
            for (arc, feature, span) in l.entries {
                let problem = match running.iter().find(|(n, _)| *n == feature) {
                    None if names.is_empty() => Some(format!(
                        "`{feature}` is not a running feature: this config has no feature \
                         table; accepted: a feature whose table (e.g. [ipfix]) is in the config"
                    )),
                    None => Some(format!(
                        "`{feature}` is not a running feature; accepted: {}",
                        names.join(", ")
                    )),
                    Some((_, arcs)) if !arcs.contains(&arc) => Some(format!(
                        "feature `{feature}` has no place on arc {arc}; accepted there: {}",
                        on_arc(running, &arc)
                    )),
                    Some(_) => None,
                };
                match problem {
                    Some(p) => self.error(&span, &l.section, Some("features"), p),
                    None => out.push(PortFeature {
                        port: l.port.clone(),
                        arc,
                        feature,
                    }),
                }
            }
        }
        out
    }
}

/// The running features with a place on `arc`, or "none".
fn on_arc(running: &[(String, Vec<String>)], arc: &str) -> String {
    let v: Vec<&str> = running
        .iter()
        .filter(|(_, arcs)| arcs.iter().any(|a| a == arc))
        .map(|(n, _)| n.as_str())
        .collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

//! `show features` and `set interface feature PORT FEATURE arc ARC [disable]` (VPP's spelling):
//! the feature arcs, their features in the order packets visit them, and what is enabled on
//! which port; enabling and disabling a feature on a port of a running data plane. Changes go
//! through `dataplane::features::FeatureArcs::apply` (checked whole, published at once); this
//! module only names ports and formats.

use super::CommandError;
use dataplane::features::ArcChange;
use dataplane::RuntimeView;
use serde_json::{json, Value};

/// The text and JSON of `show features`.
pub(super) fn show(view: &RuntimeView) -> (String, Value) {
    let features = &view.features;
    let layout = features.layout();
    let config = features.current();
    let mut text = String::new();
    let mut arcs = Vec::new();
    for (i, arc) in layout.arcs().iter().enumerate() {
        let id = graph::arc::ArcId(i as u8);
        let masks = config.masks(id);
        text.push_str(&format!("Arc {} (then {}):\n", arc.name, arc.end));
        if arc.features.is_empty() {
            text.push_str("  (no features)\n");
        }
        let mut listed = Vec::new();
        for (pos, (name, node)) in arc.features.iter().enumerate() {
            let on: Vec<String> = view
                .ports
                .get()
                .iter()
                .enumerate()
                .filter(|(p, _)| masks.get(*p).is_some_and(|m| m & (1 << pos) != 0))
                .map(|(_, port)| port.name.clone())
                .collect();
            let where_ = if on.is_empty() {
                "not enabled".to_string()
            } else {
                format!("enabled on {}", on.join(", "))
            };
            text.push_str(&format!("  {}. {name} (node {node}): {where_}\n", pos + 1));
            listed.push(json!({"feature": name, "node": node, "enabled_on": on}));
        }
        arcs.push(json!({"arc": arc.name, "end": arc.end, "features": listed}));
    }
    let registered: Vec<&str> = features.features().iter().map(|f| f.name()).collect();
    (text, json!({"arcs": arcs, "registered": registered}))
}

/// One `set interface feature` change, named as the operator wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureChange {
    /// Port name.
    pub port: String,
    /// Feature name.
    pub feature: String,
    /// Arc name.
    pub arc: String,
    /// Enable (false: `disable`).
    pub enable: bool,
}

/// Parse the words after `set interface feature`: `PORT FEATURE arc ARC [disable]`.
pub(super) fn parse(words: &[&str]) -> Result<FeatureChange, CommandError> {
    let usage = "`set interface feature PORT FEATURE arc ARC [disable]`, e.g. \
                 `set interface feature eth0 ipfix-ip4 arc ip4-unicast`";
    match words {
        [port, feature, kw, arc, rest @ ..] if *kw == "arc" => {
            let enable = match rest {
                [] => true,
                ["disable"] => false,
                _ => {
                    return Err(CommandError(format!(
                        "`{}`: after the arc only `disable` is accepted; {usage}",
                        rest.join(" ")
                    )))
                }
            };
            Ok(FeatureChange {
                port: port.to_string(),
                feature: feature.to_string(),
                arc: arc.to_string(),
                enable,
            })
        }
        _ => Err(CommandError(format!("expected {usage}"))),
    }
}

/// Apply `changes` to the running data plane, all or none: ports are named, then the arcs
/// check features and arcs. Returns the text and JSON of the result.
pub fn apply(
    view: &RuntimeView,
    changes: &[FeatureChange],
) -> Result<(String, Value), CommandError> {
    let mut resolved = Vec::with_capacity(changes.len());
    for c in changes {
        let port = view
            .ports
            .get()
            .iter()
            .position(|p| p.name == c.port)
            .ok_or_else(|| {
                CommandError(format!(
                    "no port `{}` (ports: {})",
                    c.port,
                    view.ports
                        .get()
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        resolved.push(ArcChange {
            arc: c.arc.clone(),
            feature: c.feature.clone(),
            port,
            enable: c.enable,
        });
    }
    let changed = view
        .features
        .apply(&resolved)
        .map_err(|e| CommandError(e.to_string()))?;
    Ok((
        format!("{changed} of {} changes took effect\n", changes.len()),
        json!({"changed": changed, "requested": changes.len()}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_reads_as_vpp_writes_it() {
        assert_eq!(
            parse(&["eth0", "ipfix-ip4", "arc", "ip4-unicast", "disable"]),
            Ok(FeatureChange {
                port: "eth0".into(),
                feature: "ipfix-ip4".into(),
                arc: "ip4-unicast".into(),
                enable: false,
            })
        );
        assert!(parse(&["eth0", "ipfix-ip4", "ip4-unicast"]).is_err());
        let e = parse(&["eth0", "x", "arc", "output", "now"]).expect_err("extra word");
        assert!(e.0.contains("only `disable`"), "{}", e.0);
    }

    #[test]
    fn an_unknown_port_or_feature_changes_nothing() {
        let view = crate::testutil::view(1);
        let e = apply(
            &view,
            &[FeatureChange {
                port: "nope".into(),
                feature: "f".into(),
                arc: "output".into(),
                enable: true,
            }],
        )
        .expect_err("no such port");
        assert!(e.0.contains("ports: in0, out0"), "{}", e.0);
        let e = apply(
            &view,
            &[FeatureChange {
                port: "in0".into(),
                feature: "f".into(),
                arc: "output".into(),
                enable: true,
            }],
        )
        .expect_err("no such feature");
        assert!(e.0.contains("arc `output` has no feature `f`"), "{}", e.0);
        let (text, data) = show(&view);
        assert!(text.contains("Arc ip4-unicast (then ip4-lookup)"), "{text}");
        assert_eq!(data["arcs"].as_array().map(Vec::len), Some(3));
    }
}

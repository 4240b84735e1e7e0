//! The OpenFlow side of flow-mode bridges as the API presents it: rules and groups in
//! `ovs-ofctl` syntax (add, modify, delete, dump, with `--bundle` all or nothing), the megaflows
//! the workers installed in `ovs-appctl dpctl/dump-flows` style, and the flow caches' counters.
//! Owns the JSON model and the text parsing of requests; it never touches a worker (changes go
//! through `dataplane::flows::FlowSwitch`, which publishes new tables).

use crate::api::ApiError;
use crate::table::{render, Align};
use dataplane::flows::{FlowSwitch, FlowSwitchError};
use dataplane::RuntimeView;
use flow::cache::{CacheStats, CycleHistogram};
use flow::ofctl::{self, FlowModKind, OpenFlowVersion};
use flow::rule::FlowMod;
use flow::{DpAction, DpActions};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The flow-mode bridge named `name`.
pub fn find(view: &RuntimeView, name: &str) -> Result<Arc<FlowSwitch>, ApiError> {
    view.flows
        .iter()
        .find(|s| s.name() == name)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<String> = view
                .flows
                .iter()
                .map(|s| format!("`{}`", s.name()))
                .collect();
            ApiError::not_found(format!(
                "no bridge in flow mode is named `{name}`; accepted: {}",
                if names.is_empty() {
                    "(no bridge has mode = \"flow\")".to_string()
                } else {
                    names.join(", ")
                }
            ))
        })
}

/// `POST /v1/bridges/{name}/flows`: rules to add.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddFlows {
    /// Rules in `ovs-ofctl add-flow` syntax.
    pub flows: Vec<String>,
    /// All or nothing, as one change (`--bundle`); otherwise one change per rule, stopping at
    /// the first refused (the ones before it stay, as with `ovs-ofctl add-flows`).
    #[serde(default)]
    pub bundle: bool,
    /// The OpenFlow version the rules are sent as (`ovs-ofctl -O`): `OpenFlow10` accepts what
    /// only OpenFlow 1.0 accepts (`ip,actions=mod_tp_dst:80`); absent: OpenFlow 1.3's checks.
    #[serde(default)]
    pub openflow: Option<String>,
}

/// `PATCH /v1/bridges/{name}/flows`: new actions for the rules some matches select.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModFlows {
    /// `MATCH,actions=...` in `ovs-ofctl mod-flows` syntax.
    pub flows: Vec<String>,
    /// Strict matching (priority and match equal).
    #[serde(default)]
    pub strict: bool,
    /// One change for all (`--bundle`).
    #[serde(default)]
    pub bundle: bool,
    /// The OpenFlow version the rules are sent as (as for adding).
    #[serde(default)]
    pub openflow: Option<String>,
}

/// The `openflow` field of a request: `OpenFlow10` .. `OpenFlow15` (absent: 1.3).
fn openflow_version(v: Option<&str>) -> Result<OpenFlowVersion, ApiError> {
    match v {
        None => Ok(OpenFlowVersion::default()),
        Some(s) => s
            .parse::<OpenFlowVersion>()
            .map_err(|e| ApiError::bad("openflow", e)),
    }
}

/// `DELETE /v1/bridges/{name}/flows` (body optional): rules to delete.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelFlows {
    /// Matches in `ovs-ofctl del-flows` syntax; empty or absent: every rule.
    #[serde(default)]
    pub flows: Vec<String>,
    /// Strict matching.
    #[serde(default)]
    pub strict: bool,
}

/// `POST /v1/bridges/{name}/groups`: groups to add (or replace with `modify`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddGroups {
    /// Groups in `ovs-ofctl add-group` syntax.
    pub groups: Vec<String>,
    /// Replace existing groups (`mod-group`) instead of adding.
    #[serde(default)]
    pub modify: bool,
}

/// `DELETE /v1/bridges/{name}/groups`: group ids to delete (absent: all).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelGroups {
    /// Group ids.
    #[serde(default)]
    pub groups: Option<Vec<u32>>,
}

fn parse_all(
    texts: &[String],
    parse: impl Fn(&str) -> Result<FlowMod, ofctl::OfctlError>,
) -> Result<Vec<FlowMod>, ApiError> {
    if texts.is_empty() {
        return Err(ApiError::bad(
            "flows",
            "no rule given; accepted: a non-empty array of rules in ovs-ofctl syntax",
        ));
    }
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            parse(t).map_err(|e| {
                let mut err = ApiError::bad("flows", format!("rule {}: {e}", i + 1));
                err.item = Some(i);
                err
            })
        })
        .collect()
}

fn refused(e: FlowSwitchError, field: &str) -> ApiError {
    let mut err = ApiError::bad(field, e.to_string());
    err.item = e.index;
    err
}

/// Apply `mods` as one change (bundle) or one change each, stopping at the first refused.
fn apply(sw: &FlowSwitch, mods: &[FlowMod], bundle: bool, field: &str) -> Result<Value, ApiError> {
    if bundle {
        let version = sw.apply(mods).map_err(|e| refused(e, field))?;
        return Ok(json!({"applied": mods.len(), "version": version}));
    }
    let mut version = 0;
    for (i, m) in mods.iter().enumerate() {
        version = sw.apply(std::slice::from_ref(m)).map_err(|e| {
            let mut err = refused(e, field);
            err.item = Some(i);
            err.message = format!(
                "{} ({i} applied before it; send with \"bundle\": true for all or nothing)",
                err.message
            );
            err
        })?;
    }
    Ok(json!({"applied": mods.len(), "version": version}))
}

/// Add rules.
pub fn add_flows(sw: &FlowSwitch, body: &AddFlows) -> Result<Value, ApiError> {
    let version = openflow_version(body.openflow.as_deref())?;
    let mods = parse_all(&body.flows, |t| {
        ofctl::parse_flow_mod_as(FlowModKind::Add, t, version)
    })?;
    apply(sw, &mods, body.bundle, "flows")
}

/// Modify rules.
pub fn mod_flows(sw: &FlowSwitch, body: &ModFlows) -> Result<Value, ApiError> {
    let kind = if body.strict {
        FlowModKind::ModifyStrict
    } else {
        FlowModKind::Modify
    };
    let version = openflow_version(body.openflow.as_deref())?;
    let mods = parse_all(&body.flows, |t| ofctl::parse_flow_mod_as(kind, t, version))?;
    apply(sw, &mods, body.bundle, "flows")
}

/// Delete rules (all of them when no match is given).
pub fn del_flows(sw: &FlowSwitch, body: &DelFlows) -> Result<Value, ApiError> {
    let kind = if body.strict {
        FlowModKind::DeleteStrict
    } else {
        FlowModKind::Delete
    };
    let texts = if body.flows.is_empty() {
        vec![String::new()]
    } else {
        body.flows.clone()
    };
    let mods = parse_all(&texts, |t| ofctl::parse_flow_mod(kind, t))?;
    let before = sw.rule_count();
    let version = sw.apply(&mods).map_err(|e| refused(e, "flows"))?;
    Ok(json!({"deleted": before.saturating_sub(sw.rule_count()), "version": version}))
}

/// The rules, as `ovs-ofctl dump-flows` prints them, with their counters.
pub fn dump_flows(sw: &FlowSwitch) -> Value {
    let rules: Vec<Value> = sw
        .rules()
        .into_iter()
        .map(|v| {
            let shown = ofctl::RuleStats {
                packets: v.stats.packets,
                bytes: v.stats.bytes,
                duration_secs: v.duration_secs,
                idle_age_secs: Some(v.idle_age_secs),
            };
            let rule = &v.rule;
            json!({
                "text": ofctl::format_rule(rule, Some(&shown)),
                "table": rule.table,
                "priority": rule.priority,
                "cookie": format!("{:#x}", rule.cookie),
                "match": ofctl::format_match(&rule.m),
                "actions": ofctl::format_actions(&rule.actions),
                "n_packets": v.stats.packets,
                "n_bytes": v.stats.bytes,
                "duration_seconds": v.duration_secs,
                "idle_age_seconds": v.idle_age_secs,
                "idle_timeout": rule.idle_timeout,
                "hard_timeout": rule.hard_timeout,
            })
        })
        .collect();
    json!({"bridge": sw.name(), "version": sw.version(), "flows": rules})
}

/// Add or replace groups (all or nothing).
pub fn add_groups(sw: &FlowSwitch, body: &AddGroups) -> Result<Value, ApiError> {
    if body.groups.is_empty() {
        return Err(ApiError::bad(
            "groups",
            "no group given; accepted: a non-empty array of groups in ovs-ofctl add-group syntax",
        ));
    }
    let mut mods = Vec::new();
    for (i, t) in body.groups.iter().enumerate() {
        let g = ofctl::parse_group(t).map_err(|e| {
            let mut err = ApiError::bad("groups", format!("group {}: {e}", i + 1));
            err.item = Some(i);
            err
        })?;
        mods.push(if body.modify {
            FlowMod::ModGroup(g)
        } else {
            FlowMod::AddGroup(g)
        });
    }
    let version = sw.apply(&mods).map_err(|e| refused(e, "groups"))?;
    Ok(json!({"applied": mods.len(), "version": version}))
}

/// Delete groups (and the rules that use them).
pub fn del_groups(sw: &FlowSwitch, body: &DelGroups) -> Result<Value, ApiError> {
    let mods: Vec<FlowMod> = match &body.groups {
        None => vec![FlowMod::DelGroup(None)],
        Some(ids) => ids.iter().map(|id| FlowMod::DelGroup(Some(*id))).collect(),
    };
    let version = sw.apply(&mods).map_err(|e| refused(e, "groups"))?;
    Ok(json!({"version": version}))
}

/// The groups, as `ovs-ofctl dump-groups` prints them.
pub fn dump_groups(sw: &FlowSwitch) -> Value {
    let groups: Vec<Value> = sw
        .groups()
        .iter()
        .map(|g| json!({"id": g.id, "text": ofctl::format_group(g)}))
        .collect();
    json!({"bridge": sw.name(), "groups": groups})
}

/// Datapath actions as `ovs-appctl dpctl/dump-flows` prints them, with OpenFlow port numbers
/// (`drop` when empty).
pub fn format_dp_actions(sw: &FlowSwitch, actions: &DpActions) -> String {
    let port = |p: u16| {
        sw.ofport_of(p)
            .map(|n| n.to_string())
            .unwrap_or_else(|| format!("port{p}"))
    };
    let parts: Vec<String> = actions
        .as_slice()
        .iter()
        .map(|a| match *a {
            DpAction::Output(p) => port(p),
            DpAction::Flood => "flood".to_string(),
            DpAction::Normal => "normal".to_string(),
            DpAction::Set { field, value, mask } => {
                let mut m = flow::Match::ANY;
                m.set(field, value, mask);
                format!("set({})", ofctl::format_match(&m))
            }
            DpAction::PushVlan { tpid, tci } => {
                let tpid = if tpid == flow::TPID_AS_RECEIVED {
                    "as-received".to_string()
                } else {
                    format!("{tpid:#06x}")
                };
                format!(
                    "push_vlan(vid={},pcp={},tpid={tpid})",
                    tci & 0xfff,
                    tci >> 13
                )
            }
            DpAction::PopVlan => "pop_vlan".to_string(),
            DpAction::TunnelOutput { port: p, tun_id } => {
                format!("set(tunnel(tun_id={tun_id:#x})),{}", port(p))
            }
            DpAction::Truncate(n) => format!("trunc({n})"),
            DpAction::Controller {
                max_len,
                reason,
                table,
                cookie,
            } => format!(
                "userspace(controller(reason={},table={table},cookie={cookie:#x},max_len={max_len}))",
                reason.name()
            ),
            DpAction::Nop => "nop".to_string(),
        })
        .collect();
    if parts.is_empty() {
        "drop".to_string()
    } else {
        parts.join(",")
    }
}

/// The megaflows every worker holds, as `ovs-appctl dpctl/dump-flows` prints them.
pub fn dump_megaflows(sw: &FlowSwitch) -> Value {
    let flows: Vec<Value> = sw
        .megaflows()
        .into_iter()
        .map(|(worker, m)| {
            let matched = ofctl::format_megaflow(&flow::Match {
                key: m.key.masked(&m.mask),
                mask: m.mask,
            });
            let actions = format_dp_actions(sw, &m.actions);
            let used = if m.idle_ms >= m.age_ms && m.packets == 0 {
                "never".to_string()
            } else {
                format!("{:.3}s", m.idle_ms as f64 / 1000.0)
            };
            json!({
                "worker": worker,
                "text": format!(
                    "{matched}, packets:{}, bytes:{}, used:{used}, actions:{actions}",
                    m.packets, m.bytes
                ),
                "match": matched,
                "actions": actions,
                "packets": m.packets,
                "bytes": m.bytes,
                "idle_ms": m.idle_ms,
                "age_ms": m.age_ms,
                "current": m.current,
                "rules": m.rules.as_slice(),
            })
        })
        .collect();
    json!({"bridge": sw.name(), "megaflows": flows})
}

/// Every flow bridge's cache counters, per worker and summed.
pub fn flow_cache(view: &RuntimeView) -> Value {
    show_flow_cache(view).1
}

/// `show flow-cache`: text and JSON.
pub fn show_flow_cache(view: &RuntimeView) -> (String, Value) {
    if view.flows.is_empty() {
        return (
            "no bridge is in flow mode\n".to_string(),
            json!({"bridges": []}),
        );
    }
    let mut text = String::new();
    let mut bridges = Vec::new();
    for sw in &view.flows {
        // Read once for both the text and the JSON.
        let (rules, version) = (sw.rule_count(), sw.version());
        let mut workers = Vec::new();
        let mut total = CacheStats::default();
        let mut total_hist = CycleHistogram::default();
        let mut rows = Vec::new();
        for (w, (stats, hist)) in sw.cache_stats().iter().enumerate() {
            total.add(stats);
            total_hist.merge(hist);
            let malformed: serde_json::Map<String, Value> = sw
                .workers()
                .get(w)
                .map(|s| s.malformed_counts())
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.to_string(), json!(n)))
                .collect();
            workers.push(json!({
                "worker": w,
                "counters": counters_json(stats),
                "cycles_per_miss": hist_json(hist),
                "malformed": malformed,
            }));
            rows.push(row(&w.to_string(), stats, hist));
        }
        rows.push(row("all", &total, &total_hist));
        text.push_str(&format!(
            "bridge {}: {rules} rules, tables version {version}\n",
            sw.name(),
        ));
        text.push_str(&render(
            &[
                ("Worker", Align::Left),
                ("EMC hits", Align::Right),
                ("Megaflow hits", Align::Right),
                ("Misses", Align::Right),
                ("Subtables/hit", Align::Right),
                ("Megaflows", Align::Right),
                ("Installed", Align::Right),
                ("Revalidated", Align::Right),
                ("Evicted", Align::Right),
                ("Expired", Align::Right),
                ("Cycles/miss p50", Align::Right),
                ("p99", Align::Right),
            ],
            &rows,
        ));
        // Why keys did not reach the EMC (all workers).
        text.push_str(&format!(
            "exact-match cache: {} lookups, {} skipped while outgrown, {} bypassed (a few \
             listed megaflows answer for less)\n",
            total.emc_lookups, total.emc_skipped, total.emc_bypassed,
        ));
        bridges.push(json!({
            "bridge": sw.name(),
            "rules": rules,
            "version": version,
            "workers": workers,
            "total": counters_json(&total),
            "cycles_per_miss": hist_json(&total_hist),
        }));
    }
    (text, json!({"bridges": bridges}))
}

fn row(worker: &str, s: &CacheStats, h: &CycleHistogram) -> Vec<String> {
    vec![
        worker.to_string(),
        s.emc_hits.to_string(),
        s.megaflow_hits.to_string(),
        s.misses.to_string(),
        format!("{:.2}", s.mean_subtables_per_hit()),
        s.megaflows.to_string(),
        s.installed.to_string(),
        s.revalidated.to_string(),
        s.evicted.to_string(),
        s.expired.to_string(),
        quantile(h, 0.5),
        quantile(h, 0.99),
    ]
}

fn quantile(h: &CycleHistogram, q: f64) -> String {
    if h.count() == 0 {
        "-".to_string()
    } else {
        format!("<{}", h.quantile_upper_bound(q))
    }
}

fn counters_json(s: &CacheStats) -> Value {
    let map: serde_json::Map<String, Value> = CacheStats::NAMES
        .iter()
        .zip(s.values())
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    Value::Object(map)
}

fn hist_json(h: &CycleHistogram) -> Value {
    json!({
        "count": h.count(),
        "mean": h.mean(),
        "p50_upper_bound": h.quantile_upper_bound(0.5),
        "p99_upper_bound": h.quantile_upper_bound(0.99),
        "buckets": h.buckets.iter().enumerate().filter(|(_, n)| **n > 0)
            .map(|(b, n)| json!({"from": CycleHistogram::lower_bound(b), "count": n}))
            .collect::<Vec<_>>(),
    })
}

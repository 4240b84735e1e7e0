//! The pieces every veth scenario's report shares (`veth-router|bridge`, `veth-switch`,
//! `veth-lb`): the engine bench's JSON keys of vecplane's median run, the reference's keys, and
//! the per-node text line. It only formats; it never measures and never touches a topology.

use crate::report::{gbps, line_rate_pps};
use crate::veth::{Plan, PpsRun};
use serde_json::{json, Value};

/// The engine bench's keys of vecplane's median run `m`, shared by every veth scenario's JSON;
/// each scenario adds its own (scenario, driver, forwarding, ...) with [`with_keys`].
pub(crate) fn run_keys(p: &Plan, m: &PpsRun) -> Value {
    let fs = p.frame_size;
    json!({
        "frame_size": fs,
        "flows": p.flows,
        "routes": 0,
        "seconds": p.seconds,
        "measured_seconds": m.seconds,
        "warmup_seconds": p.warmup,
        "cpu": p.fwd_cpu,
        "generator_cpu": p.gen_cpu,
        "packets": m.packets,
        "pps": m.pps,
        "mpps": m.pps / 1e6,
        "gbps": gbps(m.pps, fs),
        "line_rate_10g_percent": 100.0 * m.pps / line_rate_pps(10.0, fs),
        "cycles_per_packet": m.cycles_per_packet,
        "offered_pps": m.offered_pps,
        "fwd_cpu_busy": m.fwd_cpu_busy,
        "gen_cpu_softirq": m.gen_cpu_softirq,
        "r_cycles_per_packet": m.r_cycles_per_packet,
        "tsc_hz": p.tsc_hz,
        "load_average": crate::sys::load_average(),
    })
}

/// The keys of the reference's median run `r` (`name`, its rates and costs, `speedup` of
/// vecplane over it).
pub(crate) fn reference_keys(name: &str, r: &PpsRun, speedup: Option<f64>) -> Value {
    json!({
        "name": name,
        "pps": r.pps,
        "mpps": r.pps / 1e6,
        "speedup": speedup,
        "cycles_per_packet": r.cycles_per_packet,
        "offered_pps": r.offered_pps,
        "fwd_cpu_busy": r.fwd_cpu_busy,
        "gen_cpu_softirq": r.gen_cpu_softirq,
        "r_cycles_per_packet": r.r_cycles_per_packet,
    })
}

/// The text line of vecplane's per-node costs (empty when there are none).
pub(crate) fn nodes_line(nodes: &[Value]) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let mut t = String::from("  vecplane nodes (median run):");
    for n in nodes {
        t.push_str(&format!(
            " {} {:.0}",
            n.get("name").and_then(Value::as_str).unwrap_or("?"),
            n.get("cycles_per_packet")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        ));
    }
    t.push_str(" (cycles/packet)\n");
    t
}

/// `json` (an object) with the keys of `more` (an object) added after its own.
pub(crate) fn with_keys(mut json: Value, more: Value) -> Value {
    if let (Some(obj), Value::Object(more)) = (json.as_object_mut(), more) {
        obj.extend(more);
    }
    json
}

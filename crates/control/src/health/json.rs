//! `HealthStatus` as JSON for the API and `show`: every key snake_case and always present
//! (null when unknown), times as Unix milliseconds, round-trip times in microseconds, failure
//! counters under every reason name (zero included) so the shape never changes. It only
//! formats; it never reads the runner.

use super::outcome::{FailReason, ProbeOutcome};
use super::status::{HealthStatus, HealthTotals, TargetStatus, TransitionRecord};
use serde_json::{json, Map, Value};
use std::time::{Duration, SystemTime};

/// The whole status.
pub fn status_json(s: &HealthStatus) -> Value {
    json!({
        "error": s.error,
        "totals": totals_json(&s.totals),
        "targets": s.targets.iter().map(target_json).collect::<Vec<_>>(),
        "transitions": s.transitions.iter().map(transition_json).collect::<Vec<_>>(),
    })
}

fn totals_json(t: &HealthTotals) -> Value {
    json!({
        "targets": t.targets,
        "up": t.up,
        "down": t.down,
        "unprobed": t.unprobed,
        "probes": t.probes,
        "ok": t.ok,
        "failed": t.failed,
        "not_sent": t.not_sent,
        "transitions": t.transitions,
        "delayed": t.delayed,
    })
}

/// One target.
pub fn target_json(t: &TargetStatus) -> Value {
    let mut failures = Map::new();
    for name in FailReason::NAMES {
        let n = t.failures.get(name).copied().unwrap_or(0);
        failures.insert((*name).to_string(), json!(n));
    }
    json!({
        "check": t.check,
        "vip": t.vip.to_string(),
        "server": t.server.to_string(),
        "slot": t.slot.0,
        "type": t.kind,
        "via": t.via.name(),
        "on_down": t.on_down.name(),
        "destination": t.destination.map(|d| d.to_string()),
        "source": t.source.map(|s| s.to_string()),
        "via_vip": t.via_vip,
        "state": t.state.name(),
        "unprobed_reason": t.unprobed,
        "checked": t.checked,
        "consecutive_successes": t.consecutive_ok,
        "consecutive_failures": t.consecutive_fail,
        "probes": t.probes,
        "ok": t.ok,
        "not_sent": t.not_sent,
        "failures": failures,
        "last_result": t.last.map(|o| o.name()),
        "last_detail": t.last.map(|o| o.to_string()),
        "last_rtt_us": t.last_rtt.map(micros),
        "since_unix_ms": unix_ms(t.since),
        "transitions": t.transitions,
    })
}

/// One transition.
pub fn transition_json(r: &TransitionRecord) -> Value {
    json!({
        "at_unix_ms": unix_ms(r.at),
        "check": r.check,
        "vip": r.vip.to_string(),
        "server": r.server.to_string(),
        "state": if r.down { "down" } else { "up" },
        "count": r.count,
        "last_result": r.last.name(),
        "last_detail": r.last.to_string(),
        "flush": r.flush,
        "error": r.error,
    })
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The last result of a target as `show` prints it (`ok in 0.120 ms`, `timeout`, `-`).
pub fn last_text(last: Option<ProbeOutcome>) -> String {
    last.map_or_else(|| "-".to_string(), |o| o.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::status::TargetState;
    use lb::health::{OnDown, ProbePath};
    use lb::model::{AsSlot, Prefix, VipKey, VipProtocol};
    use std::collections::BTreeMap;

    #[test]
    fn the_json_has_every_key_in_snake_case() {
        let vip = VipKey {
            prefix: Prefix::host("198.18.1.1".parse().expect("addr")),
            protocol: VipProtocol::Tcp,
            port: 80,
        };
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_234);
        let mut failures = BTreeMap::new();
        failures.insert("timeout", 3);
        let t = TargetStatus {
            check: 0,
            vip,
            server: "198.18.2.1".parse().expect("addr"),
            slot: AsSlot(7),
            kind: "tcp",
            via: ProbePath::Encap,
            on_down: OnDown::Flush,
            destination: Some("198.18.1.1:80".parse().expect("sa")),
            source: Some("198.18.12.1".parse().expect("addr")),
            via_vip: true,
            state: TargetState::Down,
            unprobed: None,
            checked: true,
            consecutive_ok: 0,
            consecutive_fail: 3,
            probes: 4,
            ok: 1,
            not_sent: 0,
            failures,
            last: Some(ProbeOutcome::Failure(FailReason::Timeout)),
            last_rtt: Some(Duration::from_micros(250)),
            since: at,
            transitions: 1,
        };
        let s = HealthStatus {
            error: None,
            totals: HealthStatus::sum(std::slice::from_ref(&t), 1),
            targets: vec![t],
            transitions: vec![TransitionRecord {
                at,
                check: 0,
                vip,
                server: "198.18.2.1".parse().expect("addr"),
                down: true,
                count: 3,
                last: ProbeOutcome::Failure(FailReason::Timeout),
                flush: true,
                error: None,
            }],
        };
        let v = status_json(&s);
        let t = &v["targets"][0];
        assert_eq!(t["vip"], "198.18.1.1/32 protocol tcp port 80");
        assert_eq!(t["state"], "down");
        assert_eq!(t["failures"]["timeout"], 3);
        assert_eq!(t["failures"]["refused"], 0);
        assert_eq!(t["last_result"], "timeout");
        assert_eq!(t["last_rtt_us"], 250);
        assert_eq!(t["since_unix_ms"], 1234);
        assert_eq!(t["destination"], "198.18.1.1:80");
        assert_eq!(t["unprobed_reason"], Value::Null);
        assert_eq!(v["totals"]["down"], 1);
        assert_eq!(v["totals"]["failed"], 3);
        assert_eq!(v["transitions"][0]["state"], "down");
        assert_eq!(v["transitions"][0]["flush"], true);
        // Every key is snake_case.
        fn keys(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => m.iter().for_each(|(k, v)| {
                    out.push(k.clone());
                    keys(v, out);
                }),
                Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        keys(&v, &mut all);
        for k in all {
            assert!(
                k.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{k}"
            );
        }
        assert_eq!(last_text(None), "-");
    }
}

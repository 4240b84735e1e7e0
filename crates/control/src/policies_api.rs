//! The live settings as the API presents them (poll modes, ICMP error rate, IPv4 options,
//! neighbour timers, bridge aging): `GET /v1/policies` shows them, `PATCH
//! /v1/policies` changes some, with the config file's key names and ranges. A patch is checked
//! whole before anything changes (all or nothing). Owns the JSON model and its checks; it never
//! touches a worker (it stores the atomics the workers read, `dataplane::LivePolicies`).

use crate::api::ApiError;
use dataplane::{LivePolicies, PollMode};
use nodes::ip4::Ip4Options;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// One poll mode for every worker, or one per worker.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PollModes {
    /// The same mode for all.
    One(String),
    /// One per worker, in worker order.
    PerWorker(Vec<String>),
}

/// A `PATCH /v1/policies` body: the keys to change, named as in the config's `[dataplane]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPatch {
    /// `poll-mode`.
    #[serde(rename = "poll-mode")]
    pub poll_mode: Option<PollModes>,
    /// `poll-sleep-max-us`.
    #[serde(rename = "poll-sleep-max-us")]
    pub poll_sleep_max_us: Option<i64>,
    /// `icmp-errors-per-second`.
    #[serde(rename = "icmp-errors-per-second")]
    pub icmp_errors_per_second: Option<i64>,
    /// `icmp-errors-burst`.
    #[serde(rename = "icmp-errors-burst")]
    pub icmp_errors_burst: Option<i64>,
    /// `ip4-options`.
    #[serde(rename = "ip4-options")]
    pub ip4_options: Option<String>,
    /// `neighbour-reachable-seconds`.
    #[serde(rename = "neighbour-reachable-seconds")]
    pub neighbour_reachable_seconds: Option<i64>,
    /// `neighbour-gc-seconds`.
    #[serde(rename = "neighbour-gc-seconds")]
    pub neighbour_gc_seconds: Option<i64>,
    /// `bridge-age-seconds`.
    #[serde(rename = "bridge-age-seconds")]
    pub bridge_age_seconds: Option<i64>,
}

const POLL_MODES: &str = "\"busy\", \"adaptive\"";

fn mode_name(m: PollMode) -> &'static str {
    match m {
        PollMode::Busy => "busy",
        PollMode::Adaptive => "adaptive",
    }
}

/// The settings now, with the config's key names.
pub fn show(p: &LivePolicies) -> Value {
    let (per_second, burst) = p.icmp.get();
    let modes: Vec<&str> = p.poll.iter().map(|s| mode_name(s.mode())).collect();
    let sleep = p.poll.first().map_or(0, |s| s.get().1);
    json!({
        "poll-mode": modes,
        "poll-sleep-max-us": sleep,
        "icmp-errors-per-second": per_second,
        "icmp-errors-burst": burst,
        "ip4-options": match p.ip4_options.get() {
            Ip4Options::Forward => "forward",
            Ip4Options::Drop => "drop",
        },
        "neighbour-reachable-seconds": p.neighbour.get().0,
        "neighbour-gc-seconds": p.neighbour.get().1,
        "bridge-age-seconds": p.bridge_age_seconds.load(Ordering::Relaxed),
    })
}

fn in_range(field: &str, v: Option<i64>, lo: i64, hi: i64) -> Result<Option<u32>, ApiError> {
    match v {
        None => Ok(None),
        Some(v) if (lo..=hi).contains(&v) => Ok(Some(v as u32)),
        Some(v) => Err(ApiError::bad(
            field,
            format!("{v} is out of range; accepted: {lo}..={hi}"),
        )),
    }
}

fn parse_mode(field: &str, s: &str) -> Result<PollMode, ApiError> {
    match s {
        "busy" => Ok(PollMode::Busy),
        "adaptive" => Ok(PollMode::Adaptive),
        other => Err(ApiError::bad(
            field,
            format!("`{other}` is not a poll mode; accepted: {POLL_MODES}"),
        )),
    }
}

/// Check `patch` whole, then store it; returns the keys changed.
pub fn apply(p: &LivePolicies, patch: &PolicyPatch) -> Result<Vec<&'static str>, ApiError> {
    let workers = p.poll.len();
    let modes: Option<Vec<PollMode>> = match &patch.poll_mode {
        None => None,
        Some(PollModes::One(s)) => Some(vec![parse_mode("poll-mode", s)?; workers]),
        Some(PollModes::PerWorker(list)) => {
            if list.len() != workers {
                return Err(ApiError::bad(
                    "poll-mode",
                    format!(
                        "{} poll modes for {workers} worker{}; accepted: one mode per worker, or \
                         a single mode for all: {POLL_MODES}",
                        list.len(),
                        if workers == 1 { "" } else { "s" }
                    ),
                ));
            }
            let mut v = Vec::with_capacity(workers);
            for (i, s) in list.iter().enumerate() {
                v.push(parse_mode(&format!("poll-mode[{i}]"), s)?);
            }
            Some(v)
        }
    };
    let sleep = in_range("poll-sleep-max-us", patch.poll_sleep_max_us, 10, 100_000)?;
    let max = i64::from(u32::MAX);
    let rate = in_range(
        "icmp-errors-per-second",
        patch.icmp_errors_per_second,
        0,
        max,
    )?;
    let burst = in_range("icmp-errors-burst", patch.icmp_errors_burst, 0, max)?;
    let options = match patch.ip4_options.as_deref() {
        None => None,
        Some("forward") => Some(Ip4Options::Forward),
        Some("drop") => Some(Ip4Options::Drop),
        Some(other) => {
            return Err(ApiError::bad(
                "ip4-options",
                format!("`{other}` is not a policy; accepted: \"forward\", \"drop\""),
            ))
        }
    };
    let reachable = in_range(
        "neighbour-reachable-seconds",
        patch.neighbour_reachable_seconds,
        1,
        86_400,
    )?;
    let gc = in_range(
        "neighbour-gc-seconds",
        patch.neighbour_gc_seconds,
        1,
        86_400,
    )?;
    let age = in_range("bridge-age-seconds", patch.bridge_age_seconds, 0, max)?;
    // Everything checked: store.
    let mut changed = Vec::new();
    if modes.is_some() || sleep.is_some() {
        for (w, s) in p.poll.iter().enumerate() {
            let (mode, max_us) = s.get();
            let mode = modes
                .as_ref()
                .and_then(|m| m.get(w).copied())
                .unwrap_or(mode);
            s.set(mode, sleep.unwrap_or(max_us));
        }
        changed.push("poll-mode");
    }
    if rate.is_some() || burst.is_some() {
        let (r, b) = p.icmp.get();
        p.icmp.set(rate.unwrap_or(r), burst.unwrap_or(b));
        changed.push("icmp-errors");
    }
    if let Some(o) = options {
        p.ip4_options.set(o);
        changed.push("ip4-options");
    }
    if reachable.is_some() || gc.is_some() {
        let (r, g) = p.neighbour.get();
        p.neighbour.set(reachable.unwrap_or(r), gc.unwrap_or(g));
        changed.push("neighbour-timers");
    }
    if let Some(a) = age {
        p.bridge_age_seconds.store(a, Ordering::Relaxed);
        changed.push("bridge-age-seconds");
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies(workers: usize) -> LivePolicies {
        let spec = dataplane::DataplaneSpec {
            workers,
            ..dataplane::DataplaneSpec::default()
        };
        LivePolicies::new(&spec)
    }

    fn patch(v: Value) -> Result<PolicyPatch, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn a_patch_changes_what_it_names_and_shows_it() {
        let p = policies(2);
        let changed = apply(
            &p,
            &patch(
                json!({"poll-mode": ["busy", "adaptive"], "icmp-errors-burst": 9,
                "neighbour-gc-seconds": 60, "bridge-age-seconds": 0}),
            )
            .expect("patch"),
        )
        .expect("applied");
        assert_eq!(
            changed,
            vec![
                "poll-mode",
                "icmp-errors",
                "neighbour-timers",
                "bridge-age-seconds"
            ]
        );
        let shown = show(&p);
        assert_eq!(shown["poll-mode"], json!(["busy", "adaptive"]));
        assert_eq!(shown["icmp-errors-burst"], 9);
        assert_eq!(shown["icmp-errors-per-second"], 1000);
        assert_eq!(shown["neighbour-gc-seconds"], 60);
        assert_eq!(shown["neighbour-reachable-seconds"], 30);
        assert_eq!(shown["bridge-age-seconds"], 0);
    }

    #[test]
    fn a_bad_key_or_value_changes_nothing_and_names_it() {
        let p = policies(2);
        let e = patch(json!({"poll-modes": "busy"})).expect_err("unknown key");
        assert!(e.contains("unknown field `poll-modes`"), "{e}");
        for (body, field, says) in [
            (
                json!({"poll-mode": "fast"}),
                "poll-mode",
                "accepted: \"busy\"",
            ),
            (
                json!({"poll-mode": ["busy"]}),
                "poll-mode",
                "1 poll modes for 2 workers",
            ),
            (
                json!({"poll-mode": "busy", "poll-sleep-max-us": 5}),
                "poll-sleep-max-us",
                "accepted: 10..=100000",
            ),
            (
                json!({"icmp-errors-per-second": -1}),
                "icmp-errors-per-second",
                "out of range",
            ),
            (
                json!({"ip4-options": "strip"}),
                "ip4-options",
                "accepted: \"forward\"",
            ),
        ] {
            let e = apply(&p, &patch(body.clone()).expect("shape")).expect_err("refused");
            assert_eq!(e.field.as_deref(), Some(field), "{body}");
            assert!(e.message.contains(says), "{body}: {}", e.message);
        }
        assert_eq!(show(&p)["poll-mode"], json!(["adaptive", "adaptive"]));
    }
}

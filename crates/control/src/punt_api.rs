//! The channels to and from the workers as the control plane shows and uses them: `show punt`
//! (per worker and reason: punted, lost to a full ring, lost to the rate limit; what the punt
//! thread delivered; the inject counters), the punted packets of the log (`GET
//! /v1/punt/packets`, which `ctl punt capture` writes to a pcap file), their metrics, and
//! injecting packets (`POST /v1/inject`: out of a port, or through a flow-mode bridge as an
//! OpenFlow packet-out). It checks a request whole before anything is injected; it never
//! touches a packet in a worker.

use crate::api::error::ApiError;
use crate::table::{render, Align};
use axum::http::StatusCode;
use channel::punt::{PuntReason, NO_PORT, NO_SWITCH};
use dataplane::inject::{InjectError, InjectTarget, OFPP_CONTROLLER};
use dataplane::RuntimeView;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Longest wait a packets request may ask for.
pub const MAX_WAIT_MS: u64 = 10_000;
/// Most packets one packets request returns.
pub const MAX_PACKETS: usize = 1000;

fn port_name(view: &RuntimeView, port: u16) -> Value {
    if port == NO_PORT {
        return Value::Null;
    }
    view.ports
        .get()
        .get(usize::from(port))
        .map_or(Value::Null, |p| json!(p.name))
}

fn bridge_name(view: &RuntimeView, switch: u16) -> Value {
    if switch == NO_SWITCH {
        return Value::Null;
    }
    view.flows
        .get(usize::from(switch))
        .map_or(Value::Null, |s| json!(s.name()))
}

/// `show punt`: counters as text and JSON.
pub fn show_punt(view: &RuntimeView) -> (String, Value) {
    let hub = &view.channels.punt;
    let inject = &view.channels.inject;
    let reasons = PuntReason::ALL.map(PuntReason::name);
    let mut rows = Vec::new();
    let mut workers = Vec::new();
    let istats = inject.worker_stats();
    for (w, c) in hub.workers().iter().enumerate() {
        let sent: serde_json::Map<String, Value> = reasons
            .iter()
            .zip(c.sent)
            .map(|(r, n)| (r.to_string(), json!(n)))
            .collect();
        let (to_port, packet_out) = istats
            .get(w)
            .map_or((0, 0), |s| (s.to_port.get(), s.packet_out.get()));
        for (r, n) in reasons.iter().zip(c.sent) {
            if n > 0 {
                rows.push(vec![w.to_string(), r.to_string(), n.to_string()]);
            }
        }
        for (what, n) in [("ring-full", c.ring_full), ("rate-limited", c.rate_limited)] {
            if n > 0 {
                rows.push(vec![w.to_string(), format!("lost: {what}"), n.to_string()]);
            }
        }
        workers.push(json!({
            "worker": w,
            "punted": sent,
            "ring_full": c.ring_full,
            "rate_limited": c.rate_limited,
            "injected_to_port": to_port,
            "injected_packet_out": packet_out,
        }));
    }
    let delivered = hub.delivered();
    let config = hub.config();
    let (rate, burst) = inject.rate();
    let accepted = inject.accepted.load(std::sync::atomic::Ordering::Relaxed);
    let refused_rate = inject
        .refused_rate
        .load(std::sync::atomic::Ordering::Relaxed);
    let refused_full = inject
        .refused_full
        .load(std::sync::atomic::Ordering::Relaxed);
    let mut text = format!(
        "punt: {} slots of {} bytes per worker, {}/s (burst {}) per worker; delivered {}, \
         last packet #{}, wakes {}\n",
        config.slots,
        config.snap_bytes,
        config.per_second,
        config.burst,
        delivered.iter().sum::<u64>(),
        hub.log().last(),
        hub.wakes()
    );
    if rows.is_empty() {
        text.push_str("nothing punted\n");
    } else {
        text.push_str(&render(
            &[
                ("worker", Align::Right),
                ("reason", Align::Left),
                ("packets", Align::Right),
            ],
            &rows,
        ));
    }
    text.push_str(&format!(
        "inject: {rate}/s (burst {burst}) per worker; {accepted} packets accepted, requests \
         refused: {refused_rate} rate-limited, {refused_full} ring full\n"
    ));
    let data = json!({
        "slots": config.slots,
        "snap_bytes": config.snap_bytes,
        "per_second": config.per_second,
        "burst": config.burst,
        "workers": workers,
        "delivered": reasons.iter().zip(delivered).map(|(r, n)| (r.to_string(), json!(n)))
            .collect::<serde_json::Map<String, Value>>(),
        "last": hub.log().last(),
        "wakes": hub.wakes(),
        "inject": {
            "per_second": rate,
            "burst": burst,
            "accepted": accepted,
            "refused_rate_limited": refused_rate,
            "refused_ring_full": refused_full,
        },
    });
    (text, data)
}

/// The punted packets of the log numbered after `after` (None: from now on), at most `count`,
/// waiting up to `wait` for the first: `{"last", "packets": [{"seq", "worker", "reason",
/// "port", "bridge", "in_port", "table", "cookie", "length", "unix_ns", "hex"}]}`.
pub fn packets(view: &RuntimeView, after: Option<u64>, count: usize, wait: Duration) -> Value {
    let log = view.channels.punt.log();
    let after = after.unwrap_or_else(|| log.last());
    let (got, last) = log.after(after, count.min(MAX_PACKETS), wait);
    let packets: Vec<Value> = got
        .iter()
        .map(|p| {
            json!({
                "seq": p.seq,
                "worker": p.meta.worker,
                "reason": p.meta.reason.name(),
                "port": port_name(view, p.meta.rx_port),
                "bridge": bridge_name(view, p.meta.switch),
                "in_port": p.meta.in_port,
                "table": p.meta.table,
                "cookie": format!("{:#x}", p.meta.cookie),
                "length": p.meta.length,
                "unix_ns": p.unix_ns,
                "hex": hex(&p.bytes),
            })
        })
        .collect();
    json!({ "after": after, "last": last, "packets": packets })
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes from hex (spaces, colons and dots between digits allowed); None when not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b' ' | b':' | b'.' | b'\n' | b'\t'))
        .collect();
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

/// `POST /v1/inject`: `{"port": NAME}` or `{"bridge": NAME, "in_port": N|"CONTROLLER",
/// "actions": "table"}`, with `"packets": [HEX, ...]` and optionally `"worker": N` (default 0).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectBody {
    /// Send the packets out of this port as they are.
    #[serde(default)]
    pub port: Option<String>,
    /// Or run them through this flow-mode bridge.
    #[serde(default)]
    pub bridge: Option<String>,
    /// The bridge's port they count as received on: its OpenFlow number or `CONTROLLER`.
    #[serde(default)]
    pub in_port: Option<Value>,
    /// The packet-out's actions in `ovs-ofctl` syntax (default `table`: through the tables).
    #[serde(default)]
    pub actions: Option<String>,
    /// The packets, as hex.
    pub packets: Vec<String>,
    /// The worker that sends them (default 0).
    #[serde(default)]
    pub worker: Option<usize>,
}

fn in_port(v: &Value) -> Result<u16, ApiError> {
    let bad = || {
        ApiError::bad(
            "in_port",
            format!("`{v}` is not a port; accepted: a port number of the bridge or \"CONTROLLER\""),
        )
    };
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(bad),
        Value::String(s) if s.eq_ignore_ascii_case("controller") => Ok(OFPP_CONTROLLER),
        Value::String(s) => s.trim().parse::<u16>().map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn refusal(e: InjectError) -> ApiError {
    match e {
        InjectError::BadTarget(m) => ApiError::bad("worker", m),
        InjectError::BadPacket { index, ref reason } => ApiError {
            item: Some(index),
            ..ApiError::bad("packets", format!("packet {index}: {reason}"))
        },
        InjectError::RateLimited { .. } => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, e.to_string())
        }
        InjectError::RingFull { .. } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
    }
}

/// Inject the packets of `b` (all or none).
pub fn inject(view: &RuntimeView, b: &InjectBody) -> Result<Value, ApiError> {
    let mut packets = Vec::with_capacity(b.packets.len());
    for (i, h) in b.packets.iter().enumerate() {
        packets.push(unhex(h).ok_or_else(|| ApiError {
            item: Some(i),
            ..ApiError::bad(
                "packets",
                format!("packet {i} is not hex; accepted: pairs of hex digits, e.g. \"0200...\""),
            )
        })?);
    }
    let worker = b.worker.unwrap_or(0);
    let inject = &view.channels.inject;
    let done =
        match (&b.port, &b.bridge) {
            (Some(name), None) => {
                if b.in_port.is_some() || b.actions.is_some() {
                    return Err(ApiError::bad(
                    "in_port",
                    "in_port and actions go with `bridge`; a port sends the packets as they are",
                ));
                }
                let port = view
                    .ports
                    .get()
                    .iter()
                    .position(|p| &p.name == name)
                    .ok_or_else(|| {
                        let names: Vec<String> =
                            view.ports.get().iter().map(|p| p.name.clone()).collect();
                        ApiError::bad(
                            "port",
                            format!("no port is named `{name}`; accepted: {}", names.join(", ")),
                        )
                    })?;
                inject.inject(worker, &InjectTarget::Port(port as u16), &packets)
            }
            (None, Some(name)) => {
                let index = view.flows.iter().position(|s| s.name() == name);
                let sw = crate::flows_api::find(view, name)?;
                let port = in_port(b.in_port.as_ref().ok_or_else(|| {
                    ApiError::bad("in_port", "a packet through a bridge needs its in_port")
                })?)?;
                let text = b.actions.as_deref().unwrap_or("table");
                let actions = flow::ofctl::parse_packet_out_actions(text)
                    .map_err(|e| ApiError::bad("actions", e.to_string()))?;
                let target = InjectTarget::PacketOut {
                    switch: &sw,
                    index: index.unwrap_or(0) as u16,
                    in_port: port,
                    actions: &actions,
                };
                inject.inject(worker, &target, &packets)
            }
            _ => return Err(ApiError::bad(
                "port",
                "give one of `port` (send as it is) or `bridge` with `in_port` (run through the \
                 bridge's tables or `actions`)",
            )),
        }
        .map_err(refusal)?;
    Ok(json!({ "worker": done.worker, "injected": done.packets }))
}

/// The punt and inject counters for `/metrics`.
pub(crate) fn metrics(reg: &mut prometheus_client::registry::Registry, view: &RuntimeView) {
    use crate::metrics::{counter_family, labels};
    let punted = counter_family(
        reg,
        "punt_packets",
        "Packets a worker punted to the control plane, by reason (no_match, action, ...)",
    );
    let lost = counter_family(
        reg,
        "punt_lost",
        "Punted copies a worker lost, by why (ring_full, rate_limited)",
    );
    let hub = &view.channels.punt;
    for (w, c) in hub.workers().iter().enumerate() {
        let worker = w.to_string();
        for (r, n) in PuntReason::ALL.iter().zip(c.sent) {
            punted
                .get_or_create(&labels(&[("worker", &worker), ("reason", r.name())]))
                .inc_by(n);
        }
        for (why, n) in [("ring_full", c.ring_full), ("rate_limited", c.rate_limited)] {
            lost.get_or_create(&labels(&[("worker", &worker), ("why", why)]))
                .inc_by(n);
        }
    }
    let delivered = counter_family(
        reg,
        "punt_delivered",
        "Punted packets the punt thread handed to its consumers, by reason",
    );
    for (r, n) in PuntReason::ALL.iter().zip(hub.delivered()) {
        delivered
            .get_or_create(&labels(&[("reason", r.name())]))
            .inc_by(n);
    }
    let injected = counter_family(
        reg,
        "inject_packets",
        "Packets a worker injected for the control plane, by where (port, packet_out)",
    );
    for (w, s) in view.channels.inject.worker_stats().iter().enumerate() {
        let worker = w.to_string();
        for (to, n) in [
            ("port", s.to_port.get()),
            ("packet_out", s.packet_out.get()),
        ] {
            injected
                .get_or_create(&labels(&[("worker", &worker), ("to", to)]))
                .inc_by(n);
        }
    }
    let refused = counter_family(
        reg,
        "inject_refused",
        "Inject requests refused whole, by why (rate_limited, ring_full)",
    );
    let i = &view.channels.inject;
    for (why, a) in [
        ("rate_limited", &i.refused_rate),
        ("ring_full", &i.refused_full),
    ] {
        refused
            .get_or_create(&labels(&[("why", why)]))
            .inc_by(a.load(std::sync::atomic::Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        assert_eq!(unhex("02:00 0a.ff"), Some(vec![2, 0, 0x0a, 0xff]));
        assert_eq!(hex(&[2, 0, 0x0a, 0xff]), "02000aff");
        assert_eq!(unhex("abc"), None, "odd");
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(""), None);
    }

    #[test]
    fn inject_refuses_bad_requests_whole() {
        let view = crate::testutil::view(1);
        let frame = hex(&[0x02; 60]);
        let req = |body: Value| -> InjectBody { serde_json::from_value(body).expect("a body") };
        let e = inject(&view, &req(json!({"port": "nope", "packets": [frame]}))).unwrap_err();
        assert!(e.message.contains("accepted: in0, out0"), "{}", e.message);
        let e = inject(
            &view,
            &req(json!({"port": "in0", "packets": ["02", frame]})),
        )
        .unwrap_err();
        assert!(e.message.contains("packet 0: 1 bytes"), "{}", e.message);
        assert_eq!(e.item, Some(0));
        let e = inject(&view, &req(json!({"packets": [frame]}))).unwrap_err();
        assert!(e.message.contains("give one of"), "{}", e.message);
        let e = inject(
            &view,
            &req(json!({"bridge": "br0", "in_port": 1, "packets": [frame]})),
        )
        .unwrap_err();
        assert!(
            e.message.contains("no bridge in flow mode"),
            "{}",
            e.message
        );
        let e = inject(
            &view,
            &req(json!({"port": "in0", "worker": 3, "packets": [frame]})),
        )
        .unwrap_err();
        assert!(
            e.message.contains("worker 3 does not exist"),
            "{}",
            e.message
        );
        // Nothing was injected by any of them.
        assert_eq!(
            view.channels
                .inject
                .accepted
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        let ok = inject(
            &view,
            &req(json!({"port": "out0", "packets": [frame, frame]})),
        )
        .expect("injected");
        assert_eq!(ok, json!({"worker": 0, "injected": 2}));
        let (text, data) = show_punt(&view);
        assert!(text.contains("2 packets accepted"), "{text}");
        assert_eq!(data["inject"]["accepted"], 2);
    }
}

//! What the live-change end-to-end tests share (`live_routes`, `live_ports`): an API call that
//! must succeed, and vecplane's drop count on a set of nodes.

use serde_json::Value;

/// `method path` with `body` on the control socket `ep`; panics unless the answer is 2xx.
pub fn call(ep: &control::Endpoint, method: &str, path: &str, body: Option<Value>) -> Value {
    let reply = control::http(ep, method, path, body.map(|b| b.to_string().into_bytes()))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    assert!(
        (200..300).contains(&reply.status),
        "{method} {path}: {} {}",
        reply.status,
        reply.error_message()
    );
    reply.json()
}

/// Packets vecplane dropped at `nodes` (`show errors`), all reasons.
pub fn drops(vp: &netlab::Vecplane, nodes: &[&str]) -> u64 {
    let data = vp
        .request("show errors", true)
        .expect("show errors")
        .data
        .unwrap_or(Value::Null);
    data["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| nodes.iter().any(|n| e["node"] == *n))
        .filter_map(|e| e["count"].as_u64())
        .sum()
}

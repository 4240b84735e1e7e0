//! What the live-change end-to-end tests share (`live_routes`, `live_ports`): the config of
//! vecplane in R of an A - R - B topology, an API call that must succeed, and vecplane's drop
//! count on a set of nodes.

use netlab::{addr, Topology};
use serde_json::Value;

/// Write `file` in the topology's directory: ports Ra and Rb (af-packet on R's veths,
/// 198.18.1.1/24 and 198.18.2.1/24), A and B (198.18.2.2) as static neighbours, then `extra`
/// (more `[[neighbour]]` and `[[route]]` tables).
pub fn config(t: &Topology, file: &str, extra: &str) -> std::path::PathBuf {
    let n = t.names();
    let text = format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{ra}\"\n\
         mac = \"{mac_ra}\"\nip4 = [\"198.18.1.1/24\"]\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{rb}\"\n\
         mac = \"{mac_rb}\"\nip4 = [\"198.18.2.1/24\"]\n\n\
         [[neighbour]]\nip = \"{a4}\"\nmac = \"{mac_a}\"\nport = \"Ra\"\n\n\
         [[neighbour]]\nip = \"198.18.2.2\"\nmac = \"{mac_b}\"\nport = \"Rb\"\n\n\
         {extra}",
        ra = n.ra,
        rb = n.rb,
        mac_ra = addr::MAC_RA,
        mac_rb = addr::MAC_RB,
        a4 = addr::A4,
        mac_a = addr::MAC_A0,
        mac_b = addr::MAC_B0,
    );
    let path = t.path(file);
    std::fs::write(&path, text).expect("write config");
    path
}

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

//! What the live-change end-to-end tests share (`live_routes`, `live_ports`,
//! `live_port_features`): the config of vecplane in R of an A - R - B topology, a third veth
//! from R to B, a bounded UDP flood from A or B, what an nftables counter there saw, an API call
//! that must succeed, vecplane's drop count on a set of nodes, and what IPFIX metered.

// Each test uses some of it.
#![allow(dead_code)]

use netlab::{addr, Host, Topology};
use serde_json::Value;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// The MAC of R's end of the third veth (`third_link`), vecplane's port Rc.
pub const MAC_RC: &str = "02:00:00:00:03:01";
/// The MAC of B's end of the third veth.
pub const MAC_BC: &str = "02:00:00:00:03:02";

/// The third veth: its end in R (returned; vecplane's port Rc goes on it) and its end in B with
/// 198.18.3.2/24 and `target` (an address only reached through Rc).
pub fn third_link(t: &Topology, target: &str) -> String {
    let n = t.names();
    let (rc, bc) = (format!("{}Rc", n.prefix), format!("{}Bc", n.prefix));
    t.exec_ok(
        Host::R,
        &[
            "ip", "link", "add", &rc, "address", MAC_RC, "type", "veth", "peer", "name", &bc,
            "address", MAC_BC, "netns", &n.ns_b,
        ],
    )
    .expect("third veth");
    t.exec_ok(Host::R, &["ip", "link", "set", &rc, "up"])
        .expect("rc up");
    for args in [
        vec!["ip", "addr", "add", "198.18.3.2/24", "dev", &bc],
        vec!["ip", "addr", "add", target, "dev", &bc],
        vec!["ip", "link", "set", &bc, "up"],
    ] {
        t.exec_ok(Host::B, &args).expect("B's third interface");
    }
    rc
}

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

/// `vecplane gen tx` from A (to R's Ra) or B (to R's Rb): `count` UDP packets over 64 flows to
/// `dst` at `rate` a second; its JSON summary.
pub fn flood(t: &Topology, from: Host, dst: &str, count: u64, rate: u64) -> Value {
    let n = t.names();
    let (dev, dst_mac, src_mac, src_ip) = match from {
        Host::B => (&n.b0, addr::MAC_RB, addr::MAC_B0, "198.18.2.2"),
        _ => (&n.a0, addr::MAC_RA, addr::MAC_A0, "198.18.1.2"),
    };
    let seconds = (count / rate + 10).to_string();
    let (rate, count) = (rate.to_string(), count.to_string());
    let args = [
        BIN,
        "gen",
        "tx",
        "--interface",
        dev,
        "--dst-mac",
        dst_mac,
        "--src-mac",
        src_mac,
        "--src-ip",
        src_ip,
        "--dst-ip",
        dst,
        "--flows",
        "64",
        "--rate",
        &rate,
        "--count",
        &count,
        "--seconds",
        &seconds,
        "--json",
        "--no-progress",
    ];
    let limit = Duration::from_secs(seconds.parse::<u64>().unwrap_or(20) + 20);
    let out = t
        .exec_timeout(from, &args, limit)
        .expect("vecplane gen tx runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_json::from_str::<Value>(text.trim()).unwrap_or_else(|e| {
        panic!(
            "gen tx summary ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// What the rule for `daddr` in chain `in` of nftables table `inet TABLE` in `host` counted.
pub fn counted(t: &Topology, host: Host, table: &str, daddr: &str) -> u64 {
    let out = t
        .exec_ok(host, &["nft", "list", "chain", "inet", table, "in"])
        .expect("nft list");
    out.lines()
        .find(|l| l.contains(daddr))
        .and_then(|l| l.split("packets ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Wait until `counted` reaches `want` (the last packets may still be on their way), 15 s at
/// most: a bound against a hang, not a speed (a loaded machine may take a while to deliver).
/// What it counted.
pub fn wait_counted(t: &Topology, host: Host, table: &str, daddr: &str, want: u64) -> u64 {
    let t0 = Instant::now();
    while counted(t, host, table, daddr) < want && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    counted(t, host, table, daddr)
}

/// Packets IPFIX metered, all workers (`show ipfix`).
pub fn ipfix_metered(vp: &netlab::Vecplane) -> u64 {
    let v = vp.request("show ipfix", true).expect("show ipfix").data;
    v.unwrap_or_default()["stats"]["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["packets"].as_u64())
        .sum()
}

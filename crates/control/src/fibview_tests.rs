//! `show ip fib` with routes features own: a VIP prefix's route is listed as type `node`,
//! source `lb`; a configured route of the same prefix is listed after it, shadowed; a lookup
//! answers with the entry in effect; a page never ends between two entries of one prefix.

use crate::commands::Control;
use crate::testutil::{spec, view};
use dataplane::routing::{Change, NodeRoute};
use serde_json::{json, Value};
use std::sync::Arc;

fn vip_route(prefix: &str, len: u8) -> Change {
    Change::SetNodeRoute(NodeRoute {
        prefix: prefix.parse().expect("address"),
        len,
        node: nodes::lb::LB,
        tag: nodes::lb::VIP_ROUTE,
    })
}

/// The test config's table with VIP routes on 198.18.2.128/25 (a configured drop route's
/// prefix) and 198.19.5.5/32.
fn control() -> Control {
    let v = view(1);
    dataplane::build::lock(&v.routing)
        .apply(&[vip_route("198.18.2.128", 25), vip_route("198.19.5.5", 32)])
        .expect("VIP routes");
    Control::new(v, Arc::new(spec()))
}

fn run(c: &Control, cmd: &str, json: bool) -> (String, Value) {
    let r = c.execute(cmd, json);
    assert!(r.ok, "`{cmd}`: {:?}", r.error);
    (r.text.unwrap_or_default(), r.data.unwrap_or_default())
}

#[test]
fn vip_routes_are_listed_with_their_source_and_shadow_configured_routes() {
    let c = control();
    let (t, _) = run(&c, "show ip fib", false);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "IPv4 FIB: 7 entries (3 routes, 2 connected, 2 of features (VIPs: lb))"
    );
    let at = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap_or(99);
    assert!(
        at("198.18.2.128/25  to lb (source lb)") + 1
            == at("198.18.2.128/25  drop (shadowed by lb)"),
        "the route in effect, then the one it shadows: {t}"
    );
    assert!(t.contains("198.19.5.5/32    to lb (source lb)"), "{t}");
    let (_, d) = run(&c, "show ip fib", true);
    assert_eq!(d["total"], 7);
    assert_eq!(
        d["entries"][3],
        json!({"prefix": "198.18.2.128/25", "type": "node", "node": "lb", "source": "lb",
               "next_hops": []})
    );
    assert_eq!(
        d["entries"][4],
        json!({"prefix": "198.18.2.128/25", "type": "drop", "next_hops": [],
               "shadowed_by": "lb"})
    );
    // The entry in effect for an address.
    let (_, d) = run(&c, "show ip fib 198.18.2.200", true);
    assert_eq!(d["entries"][0]["type"], "node", "{d}");
    let (_, d) = run(&c, "show ip fib 198.19.5.5", true);
    assert_eq!(d["entries"][0]["source"], "lb", "{d}");
    let (_, d) = run(&c, "show ip fib 198.19.5.6", true);
    assert_eq!(d["entries"][0]["prefix"], "198.18.0.0/15", "{d}");
}

#[test]
fn a_page_never_ends_between_two_entries_of_one_prefix() {
    let c = control();
    let (_, d) = run(&c, "show ip fib limit 4", true);
    let prefixes: Vec<&str> = d["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["prefix"].as_str())
        .collect();
    assert_eq!(
        prefixes,
        ["198.18.0.0/15", "198.18.1.0/24", "198.18.2.0/24"],
        "the 4th entry's prefix has a 5th: the page ends before it"
    );
    assert_eq!(d["next"], "198.18.2.0/24");
    let (_, d) = run(&c, "show ip fib after 198.18.2.0/24 limit 4", true);
    assert_eq!(d["entries"][0]["type"], "node");
    assert_eq!(d["entries"][1]["shadowed_by"], "lb");
}

//! End to end: `vecplane bench --scenario veth-lb --encap nat4 --reference nftables`, short and
//! bounded (one run of 1 s per balancer after a 0.5 s warm-up, 256 flows), needs root, two
//! CPUs and the lab's tools (`ip`, `ethtool`, `tc`, `nft`, `nginx`, `curl`); without them it
//! prints `skipped: <why>` (and fails under CI=true). It checks the JSON report's keys, that both
//! balancers delivered rewritten packets to the servers' side, and that the lab's namespaces and
//! scratch directory are gone afterwards. Refused arguments are checked without root. Traffic
//! stays in the lab's namespaces (198.18.0.0/15).

mod support;

use std::path::Path;
use std::time::Duration;
use support::{bench_json, num, veth_bench_possible, BIN, SHORT_RUN};

const TOOLS: &[&str] = &["ip", "ethtool", "tc", "nft", "nginx", "curl"];

/// `vecplane bench --scenario veth-lb <extra>`, bounded, for the refusals.
fn bench(extra: &[&str]) -> std::process::Output {
    let mut args = vec![BIN, "bench", "--scenario", "veth-lb"];
    args.extend(extra);
    netlab::cmd::run_bounded(&args, Duration::from_secs(300)).expect("bench ran")
}

#[test]
fn veth_lb_against_nftables_delivers_rewritten_packets_and_cleans_up() {
    if !veth_bench_possible(TOOLS) {
        return;
    }
    let mut args = vec![
        "--scenario",
        "veth-lb",
        "--encap",
        "nat4",
        "--reference",
        "nftables",
    ];
    args.extend(SHORT_RUN);
    let r = bench_json(&args);
    assert_eq!(r["scenario"], "veth-lb");
    assert_eq!(r["encap"], "nat4");
    assert_eq!(r["flows"], 256);
    assert_eq!(r["servers"], 3);
    for k in [
        "frame_size",
        "packets",
        "mpps",
        "cycles_per_packet",
        "offered_pps",
        "not_rewritten",
        "measured_seconds",
    ] {
        assert!(r[k].is_number(), "no number {k} in {r}");
    }
    assert!(num(&r, &["pps"]) > 0.0, "vecplane delivered nothing: {r}");
    let k = &r["reference"];
    assert_eq!(k["name"], "nftables");
    assert!(
        num(&r, &["reference", "pps"]) > 0.0,
        "nftables delivered nothing: {k}"
    );
    assert!(k["speedup"].is_number(), "{k}");
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(1));
    let c = &r["cleanup"];
    let namespaces = c["namespaces"].as_array().cloned().unwrap_or_default();
    assert_eq!(namespaces.len(), 6, "client, router, LB, 3 servers: {c}");
    for ns in namespaces {
        let ns = ns.as_str().expect("name");
        assert!(!netlab::namespace_exists(ns), "namespace {ns} is left");
    }
    for d in c["dirs"].as_array().cloned().unwrap_or_default() {
        let d = d.as_str().expect("path");
        assert!(!Path::new(d).exists(), "directory {d} is left");
    }
}

#[test]
fn veth_lb_refuses_what_it_does_not_measure() {
    for (args, want) in [
        (&["--encap", "gre4"][..], "accepted: nat4"),
        (&["--servers", "17"][..], "accepted: 1..=16"),
        (&["--reference", "ovs"][..], "--reference nftables"),
        (
            &["--driver", "af-packet"][..],
            "accepted: --driver auto or af-xdp",
        ),
        (&["--flows", "70000"][..], "accepted: 1..=65536"),
    ] {
        let out = bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

//! End to end: `vecplane bench --scenario veth-switch --reference ovs`, short and bounded (one
//! run of 1 s per side after a 0.5 s warm-up, the hit path and then churn), needs root, `ip`,
//! `ethtool`, `tc` and Open vSwitch (`openvswitch-switch`); without them it prints
//! `skipped: <why>` (and fails under CI=true). It checks that both switches forwarded, that
//! churn reached both slow paths, and that everything the bench made is gone afterwards: its
//! namespaces, its scratch and Open vSwitch directories and the Open vSwitch daemons. Traffic
//! stays in the bench's own namespaces (198.18.0.0/15).

mod support;

use serde_json::Value;
use std::path::Path;
use support::{bench_json, num, veth_bench_possible, SHORT_RUN};

fn prerequisites() -> bool {
    if !veth_bench_possible(&["ip", "ethtool", "tc"]) {
        return false;
    }
    if let Some(why) = netlab::ovs::missing_prerequisite() {
        testenv::skip(&why);
        return false;
    }
    true
}

/// Run the bench and return its JSON report.
fn bench(extra: &[&str]) -> Value {
    let mut args = vec!["--scenario", "veth-switch", "--reference", "ovs"];
    args.extend(SHORT_RUN);
    args.extend(extra);
    bench_json(&args)
}

/// Nothing the run made is left: namespaces, directories, Open vSwitch daemons.
fn check_cleaned_up(report: &Value) {
    let c = &report["cleanup"];
    let list = |k: &str| -> Vec<Value> { c[k].as_array().cloned().unwrap_or_default() };
    let namespaces = list("namespaces");
    assert_eq!(
        namespaces.len(),
        6,
        "two topologies of three namespaces: {c}"
    );
    for ns in namespaces {
        let ns = ns.as_str().expect("name");
        assert!(!netlab::namespace_exists(ns), "namespace {ns} is left");
    }
    let dirs = list("dirs");
    assert!(dirs.len() >= 3, "two topologies and an OVS directory: {c}");
    for d in dirs {
        let d = d.as_str().expect("path");
        assert!(!Path::new(d).exists(), "directory {d} is left");
    }
    let pids = list("ovs_pids");
    assert_eq!(pids.len(), 2, "ovsdb-server and ovs-vswitchd: {c}");
    for pid in pids {
        let pid = pid.as_u64().expect("pid");
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "Open vSwitch process {pid} is still running"
        );
    }
}

#[test]
fn veth_switch_against_open_vswitch_forwards_and_cleans_up() {
    if !prerequisites() {
        return;
    }
    let hit = bench(&[]);
    assert_eq!(hit["scenario"], "veth-switch");
    assert_eq!(hit["churn"], false);
    assert!(
        num(&hit, &["pps"]) > 0.0,
        "vecplane forwarded nothing: {hit}"
    );
    assert!(
        num(&hit, &["reference", "pps"]) > 0.0,
        "Open vSwitch forwarded nothing: {}",
        hit["reference"]
    );
    assert_eq!(hit["reference"]["name"], "ovs-afxdp");
    assert!(hit["reference"]["speedup"].is_number());
    assert!(
        hit["reference"]["pmd_perf_show"]
            .as_str()
            .is_some_and(|s| s.contains("pmd thread")),
        "no pmd-perf-show: {}",
        hit["reference"]
    );
    assert!(num(&hit, &["emc_hits"]) + num(&hit, &["megaflow_hits"]) > 0.0);
    check_cleaned_up(&hit);

    let churn = bench(&["--churn", "--new-flows-per-second", "20000"]);
    assert_eq!(churn["churn"], true);
    assert!(
        num(&churn, &["pps"]) > 0.0,
        "vecplane forwarded nothing: {churn}"
    );
    assert!(num(&churn, &["reference", "pps"]) > 0.0);
    assert!(
        num(&churn, &["misses"]) > 0.0,
        "churn did not reach vecplane's slow path"
    );
    assert!(
        num(
            &churn,
            &["reference", "pmd_stats", "miss_with_success_upcall"]
        ) > 0.0,
        "churn did not reach Open vSwitch's upcalls: {}",
        churn["reference"]["pmd_stats"]
    );
    check_cleaned_up(&churn);
}

//! One short real run of each scenario through the whole path (arguments, spec, `Dataplane`,
//! pinned worker, counters, summary): quick (0.2 s, small FIBs), checking figures are coherent.

use bench::BenchArgs;
use clap::Parser;
use std::sync::Mutex;

/// The runs pin their worker to the same CPU: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run(a: &BenchArgs) -> Vec<bench::report::Summary> {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    bench::run_with(a, &mut |_| {}).expect("run")
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn args(extra: &[&str]) -> BenchArgs {
    let mut v = vec![
        "bench",
        "--seconds",
        "0.2",
        "--warmup",
        "0.05",
        "--runs",
        "1",
    ];
    v.push("--no-progress");
    v.extend_from_slice(extra);
    Cli::try_parse_from(v).expect("arguments").args
}

fn check(s: &bench::report::Summary) {
    assert!(s.packets > 0, "{s:?}");
    assert!(s.accounted, "{s:?}");
    assert!(s.drops.is_empty(), "{:?}", s.drops);
    assert!(s.mpps > 0.0 && s.cycles_per_packet > 0.0);
    assert_eq!(s.runs.len(), 1);
    assert!(s.nodes.iter().any(|n| n.name == "rx0-rx"));
    assert!(s
        .nodes
        .iter()
        .any(|n| n.name == "tx0-tx" && n.packets == s.packets));
    let v: serde_json::Value =
        serde_json::from_str(&bench::report::json_line(s).expect("json")).expect("parse");
    assert_eq!(v["packets"].as_u64(), Some(s.packets));
}

#[test]
fn l2xc_runs() {
    let s = run(&args(&["--scenario", "l2xc"]));
    assert_eq!(s.len(), 1);
    check(&s[0]);
    assert!(
        s[0].nodes.iter().any(|n| n.name == "l2-xconnect"),
        "{:?}",
        s[0].nodes
    );
    assert!(s[0].fib_build_seconds.is_none());
}

#[test]
fn ip4_runs() {
    let s = run(&args(&[
        "--scenario",
        "ip4",
        "--routes",
        "2000",
        "--flows",
        "256",
    ]));
    check(&s[0]);
    assert_eq!(s[0].routes, 2000);
    assert!(s[0].fib_memory_bytes.is_some_and(|b| b > 0));
    assert!(
        s[0].nodes.iter().any(|n| n.name == "ip4-lookup"),
        "{:?}",
        s[0].nodes
    );
}

#[test]
fn ip6_runs_with_raised_frame_size() {
    // No random routes: flows go to the neighbour's host route (see the test below).
    let s = run(&args(&[
        "--scenario",
        "ip6",
        "--routes",
        "0",
        "--flows",
        "16",
    ]));
    check(&s[0]);
    assert_eq!(s[0].frame_size, 78);
    assert_eq!(s[0].frame_size_requested, Some(64));
    assert!(!s[0].notes.is_empty());
    assert!(
        s[0].nodes.iter().any(|n| n.name == "ip6-lookup"),
        "{:?}",
        s[0].nodes
    );
}

/// Random IPv6 destinations once made `ports::FlowSet::new` overflow a u64 checksum sum; this
/// run keeps that fixed (it panics in debug builds if it comes back).
#[test]
fn ip6_runs_with_random_routes() {
    let s = run(&args(&[
        "--scenario",
        "ip6",
        "--routes",
        "2000",
        "--flows",
        "256",
    ]));
    check(&s[0]);
    assert_eq!(s[0].routes, 2000);
    assert!(s[0].fib_memory_bytes.is_some_and(|b| b > 0));
}

#[test]
fn bad_arguments_are_refused() {
    assert!(Cli::try_parse_from([
        "bench",
        "--scenario",
        "ip4",
        "--sweep",
        "--frame-size",
        "128"
    ])
    .is_err());
    assert!(bench::run_with(
        &args(&["--scenario", "l2xc", "--frame-size", "60"]),
        &mut |_| {}
    )
    .is_err());
    let missing = args(&[
        "--scenario",
        "l2xc",
        "--reference",
        "testpmd",
        "--testpmd-path",
        "/nonexistent/testpmd",
    ]);
    let e = bench::run_with(&missing, &mut |_| {}).expect_err("missing testpmd");
    assert_eq!(e.to_string(), bench::testpmd::NOT_INSTALLED);
}

#[test]
fn route_churn_loads_churns_and_times_visibility() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = args(&[
        "--scenario",
        "route-churn",
        "--routes",
        "20000",
        "--flows",
        "256",
    ]);
    let report = bench::churn::run_with(
        &a,
        &|view, spec| Ok(Box::new(bench::churn::HttpApi::new(view, spec)?)),
        &mut |_| {},
    )
    .expect("run");
    let j = report.json();
    assert_eq!(j["routes"], 20000, "{j}");
    assert!(j["routes_per_second"].as_f64().unwrap_or(0.0) > 0.0, "{j}");
    assert!(j["peak_rss_bytes"].as_u64().unwrap_or(0) > 0, "{j}");
    assert!(
        j["forwarding_pps_quiet"].as_f64().unwrap_or(0.0) > 0.0,
        "{j}"
    );
    assert!(
        j["forwarding_pps_churn"].as_f64().unwrap_or(0.0) > 0.0,
        "{j}"
    );
    assert!(
        j["churn_changes_per_second"].as_f64().unwrap_or(0.0) > 0.0,
        "{j}"
    );
    assert_eq!(j["visible_samples"], 1000, "{j}");
    assert!(j["visible_p99_us"].as_f64().unwrap_or(-1.0) >= 0.0, "{j}");
    // The kernel's side needs root (a namespace): in CI it must have run.
    if std::env::var_os("CI").is_some() || netlab_root() {
        assert!(
            j["reference"]["routes_per_second"].as_f64().unwrap_or(0.0) > 0.0,
            "{j}"
        );
    }
}

fn netlab_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn fib_against_dpdk_reports_rates_and_memory_of_both() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = args(&[
        "--scenario",
        "fib",
        "--reference",
        "dpdk-fib",
        "--routes",
        "20000",
    ]);
    if !a.dpdk_fib_path.exists() {
        testenv::skip(&format!(
            "{} is not installed (scripts/test.sh installs dpdk-dev)",
            a.dpdk_fib_path.display()
        ));
        return;
    }
    for v6 in [false, true] {
        let j = bench::fibref::compare(&a, v6, &mut |_| {}).expect("run");
        assert_eq!(j["routes"], if v6 { 2000 } else { 20000 }, "{j}");
        for k in ["lookups_per_second", "fib_memory_bytes"] {
            assert!(j[k].as_f64().unwrap_or(0.0) > 0.0, "{k}: {j}");
        }
        for k in ["lookups_per_second", "memory_bytes", "ratio"] {
            assert!(j["reference"][k].as_f64().unwrap_or(0.0) > 0.0, "{k}: {j}");
        }
    }
}

#[test]
fn a_reference_that_does_not_fit_the_scenario_is_refused() {
    let a = args(&["--scenario", "fib", "--reference", "testpmd"]);
    let e = bench::run(&a).expect_err("refused");
    assert!(e.to_string().contains("--reference dpdk-fib"), "{e}");
}

#[test]
fn pvp_against_open_vswitch_with_dpdk_reports_both_and_the_floor() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut a = args(&["--scenario", "pvp", "--reference", "ovs-dpdk"]);
    a.seconds = 1.0;
    a.warmup = 0.5;
    let missing = if !netlab_root() {
        Some("needs root (DPDK's runtime files, Open vSwitch's namespace)".to_string())
    } else if !a.testpmd_path.exists() {
        Some(format!(
            "{} is not installed (scripts/test.sh installs dpdk-dev)",
            a.testpmd_path.display()
        ))
    } else if !std::path::Path::new(netlab::OVS_VSWITCHD_DPDK).exists() {
        Some(format!(
            "{} is not installed (scripts/test.sh installs openvswitch-switch-dpdk)",
            netlab::OVS_VSWITCHD_DPDK
        ))
    } else {
        None
    };
    if !testenv::can_run(missing) {
        return;
    }
    let (s, j) = bench::pvp::compare(&a).expect("pvp");
    assert!(s.packets > 0 && s.mpps > 0.0, "{j}");
    assert!(s.drops.is_empty(), "{:?}", s.drops);
    let nodes: Vec<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    for n in ["vu0-rx", "vu0-tx", "vu1-rx", "vu1-tx"] {
        assert!(nodes.contains(&n), "{n} missing from {nodes:?}");
    }
    for k in ["mpps", "cycles_per_packet", "speedup", "cycles_ratio"] {
        assert!(j["reference"][k].as_f64().unwrap_or(0.0) > 0.0, "{k}: {j}");
    }
    assert_eq!(j["reference"]["name"], "ovs-dpdk");
    assert!(j["floor"]["mpps"].as_f64().unwrap_or(0.0) > 0.0, "{j}");
}

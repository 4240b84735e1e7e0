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

/// Why the VM scenarios cannot run here (root for the TAPs' namespace, QEMU, the guest image).
fn vm_missing() -> Option<String> {
    if !netlab_root() {
        return Some("needs root (a namespace with a Linux bridge and TAP devices)".into());
    }
    if let Some(why) = netlab::missing_guest_prerequisite() {
        return Some(why);
    }
    netlab::GuestImage::build_or_find()
        .err()
        .map(|e| format!("{e:#}"))
}

/// A file deleted when dropped (also when the test fails).
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn positive(v: &serde_json::Value, k: &str) -> f64 {
    let x = v[k].as_f64().unwrap_or(-1.0);
    assert!(x > 0.0, "{k} is not positive: {v}");
    x
}

/// Two runs on each side, interleaved: both sides' figures, TSO on the bridge's TAPs.
#[test]
fn vm_tcp_against_a_linux_bridge_reports_both_sides_and_tso() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !testenv::can_run(vm_missing()) {
        return;
    }
    let t = std::time::Instant::now();
    let mut a = args(&["--scenario", "vm-tcp", "--reference", "linux-bridge"]);
    a.runs = 2;
    a.seconds = 1.0;
    a.warmup = 0.0;
    let r = bench::vm_tcp::compare(&a).expect("vm-tcp");
    let j = &r.json;
    println!("{}\n{:.1} s", r.text, t.elapsed().as_secs_f64());
    assert_eq!(j["scenario"], "vm-tcp", "{j}");
    assert_eq!(j["runs"], 2, "{j}");
    for side in [j, &j["reference"]] {
        assert_eq!(
            side["runs_gbps"].as_array().map(Vec::len),
            Some(2),
            "{side}"
        );
        assert_eq!(side["all_runs"].as_array().map(Vec::len), Some(2), "{side}");
        for k in ["gbps", "gbps_mean", "gbps_median", "gbps_min", "gbps_max"] {
            positive(side, k);
        }
        assert!(side["gbps_cv"].as_f64().is_some_and(|c| c >= 0.0), "{side}");
        assert!(side["tso"].is_boolean(), "{side}");
        assert!(side["offloads"]["client"]["features"].is_string(), "{side}");
    }
    assert_eq!(j["reference"]["name"], "linux-bridge", "{j}");
    // QEMU's tap backend negotiates TSO with the TAP: the reference always has it.
    assert_eq!(j["reference"]["tso"], true, "{j}");
    positive(&j["reference"], "throughput_ratio");
    assert!(j["reference"]["cv_ratio"].is_number(), "{j}");
    assert!(j["reference"]["goal"]["met"].is_boolean(), "{j}");
    assert!(j["ports"].as_array().is_some_and(|p| p.len() == 2), "{j}");
    assert!(r.text.contains("vecplane / Linux bridge"), "{}", r.text);
}

/// A chain of 0 and 1 VNF on both sides: a point per length, the table, the SVG plot.
#[test]
fn vm_chain_of_one_vnf_reports_each_length_and_writes_the_plot() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !testenv::can_run(vm_missing()) {
        return;
    }
    let t = std::time::Instant::now();
    let svg = TempFile(
        std::env::temp_dir().join(format!("vecplane-vm-chain-test-{}.svg", std::process::id())),
    );
    let plot = svg.0.display().to_string();
    let mut a = args(&[
        "--scenario",
        "vm-chain",
        "--max-vnfs",
        "1",
        "--reference",
        "linux-bridge",
        "--plot",
        &plot,
    ]);
    a.seconds = 1.0;
    a.warmup = 0.0;
    let r = bench::vm_chain::compare(&a).expect("vm-chain");
    let j = &r.json;
    println!("{}\n{:.1} s", r.text, t.elapsed().as_secs_f64());
    assert_eq!(j["scenario"], "vm-chain", "{j}");
    assert_eq!(j["max_vnfs"], 1, "{j}");
    for side in [j, &j["reference"]] {
        let points = side["points"].as_array().expect("points");
        assert_eq!(points.len(), 2, "{side}");
        for (n, pt) in points.iter().enumerate() {
            assert_eq!(pt["vnfs"], n, "{pt}");
            positive(pt, "gbps");
            assert_eq!(pt["runs_gbps"].as_array().map(Vec::len), Some(1), "{pt}");
        }
        assert_eq!(side["gbps_by_vnfs"].as_array().map(Vec::len), Some(2));
    }
    assert_eq!(j["reference"]["name"], "linux-bridge", "{j}");
    assert_eq!(
        j["reference"]["ratio_by_vnfs"].as_array().map(Vec::len),
        Some(2)
    );
    let table = j["table"].as_str().expect("table");
    assert!(
        table.contains("| 0 |") && table.contains("| 1 |"),
        "{table}"
    );
    assert_eq!(j["plot"], plot.as_str(), "{j}");
    let text = std::fs::read_to_string(&svg.0).expect("the plot was written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(200)]);
}

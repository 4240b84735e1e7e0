//! vecplane on real interfaces in namespaces (needs root, `ip`, `ethtool`, `ping`, `iperf3` and
//! `tc`; each test prints `skipped: <why>` and returns otherwise): `vecplane run` inside a netlab
//! topology routes IPv4 and IPv6 pings between A and B over af-packet and af-xdp (skipped if this
//! build refuses af-xdp), `vecplane demo --seconds 3 --driver af-packet` passes, a demo
//! interrupted by SIGINT leaves no namespace and no process behind, `vecplane demo --fleet
//! --seconds 10` (also needs `bridge`, `nft`, `nginx`, `curl`, `bird`, `birdc`, `wrk`) tells its
//! SIGKILL and rolling-upgrade story with no failed request and deletes its fleet, `vecplane demo
//! --vms --seconds 2` (also needs `qemu-system-x86_64` and the guest image's Debian packages)
//! shows its two guests pinging each other over IPv4 and IPv6 and moving TCP data through
//! vecplane's vhost-user ports with no drop or guest error, and leaves no guest, daemon or
//! scratch directory behind, also when interrupted by SIGINT, and `vecplane bench --scenario
//! veth-router|veth-bridge --reference kernel` (packet rate and `--stability`) report both sides
//! (no figures are asserted beyond "traffic got through"). Tests run one at a time; all traffic
//! is bounded (pings by count and deadline, iperf3 by `-t`, the generator by `--seconds`) and
//! goes only to hosts the test created.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::{
    unsupported_feature, Addressing, Driver, Forwarding, Host, Mode, Topology, VecplaneConfig,
};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

/// Namespaces whose names say process `pid` made them with prefix `prefix`.
fn namespaces_of(prefix: &str, pid: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-{pid}-")))
        .map(str::to_string)
        .collect()
}

fn ping_ok(t: &Topology, target: &str) -> bool {
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "-w", "6", target,
            ],
            Duration::from_secs(20),
        )
        .expect("ping runs");
    if !out.status.success() {
        println!("{}", String::from_utf8_lossy(&out.stdout));
    }
    out.status.success()
}

fn route_through_vecplane(driver: Driver) {
    let t =
        Topology::build_with_prefix("vpt", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let cfg = VecplaneConfig {
        driver,
        forwarding: Forwarding::Router,
        worker_cpu: None,
        buffers: Some(4096),
    };
    let config = match t.write_vecplane_config(&cfg) {
        Ok(c) => c,
        Err(e) => {
            if let Some(c) = e.downcast_ref::<control::ConfigError>() {
                if unsupported_feature(c).is_some() {
                    testenv::skip(&format!(
                        "this build does not accept {}: {c}",
                        driver.name()
                    ));
                    return;
                }
            }
            panic!("config: {e:#}");
        }
    };
    let vp = t
        .start_vecplane(Path::new(BIN), &config)
        .expect("vecplane run starts");
    assert!(ping_ok(&t, &t.b_ip4().to_string()), "IPv4 through vecplane");
    assert!(ping_ok(&t, &t.b_ip6().to_string()), "IPv6 through vecplane");
    let ports = vp.interfaces().expect("show interfaces");
    let ra = ports.iter().find(|p| p.name == "Ra").expect("port Ra");
    let rb = ports.iter().find(|p| p.name == "Rb").expect("port Rb");
    assert!(ra.rx_packets >= 6 && rb.tx_packets >= 6, "{ports:?}");
    assert!(rb.rx_packets >= 6 && ra.tx_packets >= 6, "{ports:?}");
    let b0 = t.link_stats(Host::B, &t.names().b0).expect("B0 counters");
    assert!(b0.rx_packets >= 6, "{b0:?}");
    let runtime = vp.runtime_text().expect("show runtime");
    assert!(runtime.contains("ip4-lookup"), "{runtime}");
    vp.stop().expect("vecplane stops cleanly");
}

#[test]
fn vecplane_run_routes_ping_between_namespaces_over_af_packet() {
    require_root!(SERIAL, &["ip", "ethtool", "ping"]);
    route_through_vecplane(Driver::AfPacket);
}

#[test]
fn vecplane_run_routes_ping_between_namespaces_over_af_xdp() {
    require_root!(SERIAL, &["ip", "ethtool", "ping"]);
    route_through_vecplane(Driver::AF_XDP);
}

#[test]
fn demo_with_af_packet_gets_traffic_through_and_cleans_up() {
    require_root!(SERIAL, &["ip", "ethtool", "ping", "iperf3"]);
    let (status, out, err, pid) = run_vecplane(
        &[
            "demo",
            "--seconds",
            "3",
            "--driver",
            "af-packet",
            "--udp-rate",
            "50M",
        ],
        Duration::from_secs(180),
    );
    println!("{out}\n{err}");
    assert!(status.success(), "demo failed: {status:?}\n{out}\n{err}");
    for line in [
        "ok    ping 198.18.2.2",
        "ok    ping 2001:db8:2::2",
        "ok    iperf3 TCP",
        "ok    iperf3 UDP",
        "show runtime",
        "traffic got through",
        "[  1 s] Ra rx",
    ] {
        assert!(out.contains(line), "missing `{line}`");
    }
    assert_eq!(namespaces_of("vdm", pid), Vec::<String>::new());
}

/// Run `vecplane ARGS` to its end, bounded by `limit` (killed and a panic after it); its exit
/// status, stdout and stderr (read while it runs, so a full pipe never blocks it) and its id.
fn run_vecplane(args: &[&str], limit: Duration) -> (std::process::ExitStatus, String, String, u32) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vecplane runs");
    let pid = child.id();
    let read = |s: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = s {
                let _ = s.read_to_string(&mut text);
            }
            text
        })
    };
    let out = read(child.stdout.take().map(|s| Box::new(s) as _));
    let err = read(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vecplane {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    (status, out, err, pid)
}

#[test]
fn demo_fleet_survives_a_sigkill_and_a_rolling_upgrade_with_no_failed_request() {
    let mut tools = netlab::FLEET_TOOLS.to_vec();
    tools.push("wrk");
    require_root!(SERIAL, &tools);
    let started = Instant::now();
    let (status, out, err, pid) = run_vecplane(
        &["demo", "--fleet", "--seconds", "10"],
        Duration::from_secs(240),
    );
    println!("{out}\n{err}");
    println!(
        "vecplane demo --fleet took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "demo --fleet failed: {status:?}\n{out}\n{err}"
    );
    for line in [
        "the router's next hops for 198.18.100.1/32: 198.18.11.2 (lb0), 198.18.11.3 (lb1), \
         198.18.11.4 (lb2)",
        "[  1 s] lb0",
        "| router -> lb0 lb1 lb2",
        "SIGKILL LB 1 (vecplane pid",
        "the router dropped LB 1",
        "restarting LB 1",
        "rolling upgrade of LB 0: drain",
        "LB 0 withdrawn",
        "LB 0 ready to stop",
        "LB 0 stopped by SIGTERM",
        "new LB 0 answers",
        "rolling upgrade done",
        "failed requests: 0 (none)",
        "vecplane ctl show bgp (LB 2)",
        "deleted the namespaces",
        "no request failed",
    ] {
        assert!(out.contains(line), "missing `{line}`");
    }
    assert_eq!(namespaces_of("vdf", pid), Vec::<String>::new());
}

#[test]
fn demo_interrupted_by_sigint_deletes_its_namespaces() {
    require_root!(SERIAL, &["ip", "ethtool", "ping", "iperf3"]);
    // At the start of the TCP transfer (its client may be entering namespace A as the signal
    // lands) and in the middle of it.
    for delay in [Duration::ZERO, Duration::from_millis(1500)] {
        interrupt_demo_after_tcp_starts(delay);
    }
}

/// `vecplane ARGS`, returned once it printed a line starting with `marker` (within
/// `timeout`; killed and failed otherwise, `phase` saying what it did not reach).
fn demo_reaching(args: &[&str], marker: &'static str, timeout: Duration, phase: &str) -> Child {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("vecplane demo");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with(marker) {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(timeout).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the demo never reached {phase}");
    }
    child
}

/// Send SIGINT to `child` and wait (up to 60 s) for it to exit; its status.
fn interrupt(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own unreaped child by its id.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the demo did not exit after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn interrupt_demo_after_tcp_starts(delay: Duration) {
    let args = [
        "demo",
        "--seconds",
        "30",
        "--driver",
        "af-packet",
        "--udp-rate",
        "10M",
        "--no-progress",
    ];
    let mut child = demo_reaching(
        &args,
        "== iperf3 TCP",
        Duration::from_secs(90),
        "its TCP phase",
    );
    let pid = child.id();
    std::thread::sleep(delay);
    assert!(
        !namespaces_of("vdm", pid).is_empty(),
        "no namespaces while running"
    );
    let status = interrupt(&mut child);
    assert!(!status.success());
    assert_eq!(namespaces_of("vdm", pid), Vec::<String>::new());
    // Nothing it started survives, not even in a namespace whose name is already gone (its
    // iperf3 clients are the only processes with `-t 30` towards B).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = survivors(&["-t", "30"]);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still running: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Live iperf3 processes towards B whose arguments include `args` in a row (a zombie has an
/// empty command line and is not listed).
fn survivors(args: &[&str]) -> Vec<String> {
    let marker = format!("\0{}\0", args.join("\0"));
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).into_owned();
            (cmd.starts_with("iperf3\0") && cmd.contains("198.18.2.2") && cmd.contains(&marker))
                .then(|| format!("{pid}: {}", cmd.replace('\0', " ")))
        })
        .collect()
}

/// Whether the QEMU guests of `vecplane demo --vms` can run here (root, QEMU and the Debian
/// packages of the guest image); reports why not through `testenv` (a failure in CI).
fn vms_can_run() -> bool {
    if let Some(why) = netlab::missing_prerequisite(&[netlab::guest::QEMU]) {
        testenv::skip(&why);
        return false;
    }
    testenv::can_run(netlab::missing_guest_packages_reason())
}

/// What a demo run with id `pid` left behind: its scratch directories (vecplane's `vvu-<pid>-*`,
/// the guests' `vng-<pid>-*`) and live processes started with them on their command line.
fn vm_demo_leftovers(pid: u32) -> Vec<String> {
    let marks = [
        format!("{}-{pid}-", netlab::vm_lab::VHOST_PREFIX),
        format!("{}-{pid}-", netlab::GUEST_PREFIX),
    ];
    let mut left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| marks.iter().any(|m| n.starts_with(m.as_str())))
        .collect();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if p != pid && marks.iter().any(|m| cmd.contains(&format!("/{m}"))) {
                left.push(format!("{p}: {cmd}"));
            }
        }
    }
    left
}

/// Wait (up to 10 s) until a demo run with id `pid` left nothing behind.
fn assert_vm_demo_cleaned_up(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = vm_demo_leftovers(pid);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Figure `key` (`rx`, `tx`, `in`, `out`, `segmented`, ...: the number after its first
/// occurrence) of the passed check of port `name`:
/// `   ok    port NAME: connected, rx R tx T packets, super-packets in S out U, segmented G, ...`.
fn port_figure(out: &str, name: &str, key: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.contains(&format!("ok    port {name}: connected, rx ")))
        .unwrap_or_else(|| panic!("no passed check of port {name}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .iter()
        .position(|x| *x == key)
        .and_then(|i| words.get(i + 1))
        .and_then(|x| x.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no `{key} N` in {line}"))
}

#[test]
fn demo_vms_two_guests_ping_and_transfer_through_vecplane_and_clean_up() {
    require_root!(SERIAL, &[netlab::guest::QEMU]);
    if !vms_can_run() {
        return;
    }
    let started = Instant::now();
    let (status, out, err, pid) = run_vecplane(
        &["demo", "--vms", "--seconds", "2"],
        Duration::from_secs(300),
    );
    println!("{out}\n{err}");
    println!(
        "vecplane demo --vms took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "demo --vms failed: {status:?}\n{out}\n{err}"
    );
    for line in [
        "vm1 ready after",
        "vm2 ready after",
        "ok    ping 198.18.10.2 from vm1: 3/3 replies",
        "ok    ping 198.18.10.1 from vm2: 3/3 replies",
        "ok    ping 2001:db8:10::2 from vm1: 3/3 replies",
        "ok    ping 2001:db8:10::1 from vm2: 3/3 replies",
        "ok    iperf3 TCP vm1 -> vm2",
        "[  1 s] vm1 rx",
        "vhost-user (server socket",
        "vhost-user (client socket",
        "connections 1",
        "ok    vecplane's log: no malformed ring",
        "deleted the sockets",
        "the two guests talked through vecplane",
    ] {
        assert!(out.contains(line), "missing `{line}`");
    }
    // The transfer moved data (vm1 -> vm2) with its acknowledgements the other way, and
    // vecplane took every frame the guests sent (the checks also need no rx drop, no guest
    // error, no bad frame).
    let mb: f64 = out
        .lines()
        .find_map(|l| l.split("ok    iperf3 TCP vm1 -> vm2: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no TCP figures"));
    assert!(mb > 0.1, "TCP moved {mb} MB");
    let f = |port: &str, key: &str| port_figure(&out, port, key);
    // What the transfer moved crossed vecplane: a frame carries at most a 64 KiB TSO
    // super-packet, so vm1's port received at least that many frames (whatever the rate; a
    // loaded machine moves fewer bytes in the same seconds, never more bytes than frames allow).
    // `mb` is printed to 0.1 MB: 0.05 MB of rounding is allowed.
    let (vm1_rx, vm2_tx) = (f("vm1", "rx"), f("vm2", "tx"));
    let frames_needed = ((mb - 0.05).max(0.0) * 1e6 / 65_536.0).floor() as u64;
    assert!(
        vm1_rx >= frames_needed && vm2_tx >= frames_needed,
        "{mb} MB moved, but vm1 rx {vm1_rx}, vm2 tx {vm2_tx} frames (at least {frames_needed})"
    );
    let (vm2_rx, vm1_tx) = (f("vm2", "rx"), f("vm1", "tx"));
    assert!(
        vm2_rx > 0 && vm1_tx > 0,
        "acks: vm2 rx {vm2_rx}, vm1 tx {vm1_tx}"
    );
    // Both guests negotiated TSO: the sender's super-packets crossed vecplane whole, into the
    // other guest whole (no software segmentation between two TSO guests).
    assert!(
        out.matches("offloads from the guest: csum tso4 tso6 ecn")
            .count()
            >= 2,
        "offloads not negotiated by both guests"
    );
    let (sent, delivered) = (f("vm1", "in"), f("vm2", "out"));
    assert!(
        sent > 0 && delivered > 0,
        "super-packets in {sent}, out {delivered}"
    );
    assert_eq!(f("vm2", "segmented"), 0, "vm2 segmented super-packets");
    assert_vm_demo_cleaned_up(pid);
}

#[test]
fn demo_vms_interrupted_by_sigint_stops_its_guests_and_vecplane() {
    require_root!(SERIAL, &[netlab::guest::QEMU]);
    if !vms_can_run() {
        return;
    }
    // At "== ping" both guests booted: QEMU, vecplane and every scratch directory exist.
    let mut child = demo_reaching(
        &["demo", "--vms", "--seconds", "30", "--no-progress"],
        "== ping",
        Duration::from_secs(180),
        "booted guests",
    );
    let pid = child.id();
    let running = vm_demo_leftovers(pid);
    assert!(
        running.iter().filter(|l| l.contains("qemu-system")).count() == 2
            && running.iter().any(|l| l.contains(" run --config")),
        "not two guests and vecplane while running: {running:?}"
    );
    let status = interrupt(&mut child);
    assert!(!status.success());
    assert_vm_demo_cleaned_up(pid);
}

/// `vecplane bench ARGS` with a deadline; (success, stdout, stderr).
fn bench(args: &[&str], timeout: Duration) -> (bool, String, String) {
    let mut argv = vec![BIN, "bench"];
    argv.extend_from_slice(args);
    let out = netlab::cmd::run_bounded(&argv, timeout).expect("vecplane bench runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn has_gen() -> bool {
    Command::new(BIN)
        .args(["gen", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn bench_veth_refuses_engine_only_options() {
    for (args, expect) in [
        (
            &["--scenario", "veth-router", "--sweep"][..],
            "--sweep is for the engine scenarios",
        ),
        (
            &["--scenario", "veth-bridge", "--reference", "testpmd"][..],
            "--reference kernel",
        ),
        (
            &["--scenario", "ip4", "--reference", "kernel"][..],
            "does not go with this scenario",
        ),
        (
            &["--scenario", "veth-router", "--seconds", "0.5"][..],
            "--seconds must be at least 1",
        ),
    ] {
        let (ok, _, err) = bench(args, Duration::from_secs(60));
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

/// Namespaces with one of `prefixes` whose creating process is gone.
fn leftovers(prefixes: &[&str]) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| {
            prefixes.iter().any(|p| {
                netlab::names::owner_pid(p, n)
                    .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            })
        })
        .map(str::to_string)
        .collect()
}

fn json_of(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn bench_veth_router_measures_vecplane_and_the_kernel() {
    require_root!(SERIAL, &["ip", "ethtool", "tc"]);
    if !has_gen() {
        testenv::skip("this vecplane has no `gen` subcommand");
        return;
    }
    let (ok, out, err) = bench(
        &[
            "--scenario",
            "veth-router",
            "--reference",
            "kernel",
            "--runs",
            "1",
            "--seconds",
            "1",
            "--json",
        ],
        Duration::from_secs(240),
    );
    println!("{err}");
    assert!(ok, "{out}\n{err}");
    let v = json_of(&out);
    assert_eq!(v["scenario"], "veth-router");
    assert!(
        ["af-xdp", "af-packet"].contains(&v["driver"].as_str().unwrap_or("")),
        "{v}"
    );
    assert!(v["pps"].as_f64().is_some_and(|p| p > 0.0), "{v}");
    assert!(
        v["mpps"].is_number() && v["cycles_per_packet"].is_number(),
        "{v}"
    );
    let r = &v["reference"];
    assert_eq!(r["name"], "linux-ip-forward");
    assert!(r["pps"].as_f64().is_some_and(|p| p > 0.0), "{v}");
    assert!(r["speedup"].as_f64().is_some_and(|s| s > 0.0), "{v}");
    assert!(err.contains("run 1/1 vecplane"), "{err}");
    assert!(err.contains("run 1/1 linux-ip-forward"), "{err}");
    assert_eq!(leftovers(&["vbv", "vbk"]), Vec::<String>::new());
}

#[test]
fn bench_veth_bridge_measures_vecplane_and_the_linux_bridge() {
    require_root!(SERIAL, &["ip", "ethtool", "tc"]);
    if !has_gen() {
        testenv::skip("this vecplane has no `gen` subcommand");
        return;
    }
    let (ok, out, err) = bench(
        &[
            "--scenario",
            "veth-bridge",
            "--reference",
            "kernel",
            "--runs",
            "1",
            "--seconds",
            "1",
            "--driver",
            "af-packet",
        ],
        Duration::from_secs(240),
    );
    println!("{err}");
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("vecplane (") && out.contains("af-packet"),
        "{out}"
    );
    assert!(out.contains("Linux bridge"), "{out}");
    assert!(out.contains("speedup"), "{out}");
    assert_eq!(leftovers(&["vbv", "vbk"]), Vec::<String>::new());
}

#[test]
fn bench_veth_stability_reports_the_spread_of_both() {
    require_root!(SERIAL, &["ip", "ethtool", "iperf3"]);
    let (ok, out, err) = bench(
        &[
            "--scenario",
            "veth-router",
            "--reference",
            "kernel",
            "--stability",
            "2",
            "--seconds",
            "1",
            "--json",
        ],
        Duration::from_secs(240),
    );
    println!("{err}");
    assert!(ok, "{out}\n{err}");
    let v = json_of(&out);
    for side in [&v, &v["reference"]] {
        for k in [
            "gbps_mean",
            "gbps_min",
            "gbps_max",
            "gbps_stddev",
            "gbps_cv",
        ] {
            assert!(side[k].is_number(), "{k}: {v}");
        }
        assert!(side["gbps_mean"].as_f64().is_some_and(|g| g > 0.0), "{v}");
        assert_eq!(side["runs_gbps"].as_array().map(Vec::len), Some(2), "{v}");
    }
    assert_eq!(v["mode"], "stability");
}

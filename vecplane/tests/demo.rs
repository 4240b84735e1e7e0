//! vecplane on real interfaces in namespaces (needs root, `ip`, `ethtool`, `ping` and `iperf3`;
//! each test prints `skipped: <why>` and returns otherwise): `vecplane run` inside a netlab
//! topology routes IPv4 and IPv6 pings between A and B over af-packet (and af-xdp when this build
//! accepts it), `vecplane demo --seconds 3 --driver af-packet` passes, and a demo interrupted by
//! SIGINT leaves no namespace behind. Tests run one at a time; all traffic is bounded (pings by
//! count and deadline, iperf3 by `-t`) and goes only to hosts the test created.

use netlab::{
    unsupported_feature, Addressing, Driver, Forwarding, Host, Mode, Topology, VecplaneConfig,
};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

macro_rules! require_root {
    ($tools:expr) => {
        if let Some(why) = netlab::missing_prerequisite($tools) {
            println!("skipped: {why}");
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

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
                    println!("skipped: this build does not accept {}: {c}", driver.name());
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
    require_root!(&["ip", "ethtool", "ping"]);
    route_through_vecplane(Driver::AfPacket);
}

#[test]
fn vecplane_run_routes_ping_between_namespaces_over_af_xdp() {
    require_root!(&["ip", "ethtool", "ping"]);
    route_through_vecplane(Driver::AF_XDP);
}

#[test]
fn demo_with_af_packet_gets_traffic_through_and_cleans_up() {
    require_root!(&["ip", "ethtool", "ping", "iperf3"]);
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--seconds",
            "3",
            "--driver",
            "af-packet",
            "--udp-rate",
            "50M",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vecplane demo");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vecplane demo did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut s, &mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut s, &mut err);
    }
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

#[test]
fn demo_interrupted_by_sigint_deletes_its_namespaces() {
    require_root!(&["ip", "ethtool", "ping", "iperf3"]);
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--seconds",
            "30",
            "--driver",
            "af-packet",
            "--udp-rate",
            "10M",
            "--no-progress",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("vecplane demo");
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("== iperf3 TCP") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(90)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the demo never reached its TCP phase");
    }
    assert!(
        !namespaces_of("vdm", pid).is_empty(),
        "no namespaces while running"
    );
    // SAFETY: signalling our own unreaped child by its id.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the demo did not exit after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert_eq!(namespaces_of("vdm", pid), Vec::<String>::new());
}


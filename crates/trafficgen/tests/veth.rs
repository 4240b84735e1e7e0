//! End-to-end tests of `vecplane gen` on a veth pair between two fresh network namespaces:
//!
//! ```text
//! ns vgen<pid>-<n>-a: <link>a  ==veth==  <link>b :ns vgen<pid>-<n>-b
//!                     gen tx                gen sink
//! ```
//!
//! Each side runs as a child process (this test executable re-run inside `ip netns exec`, its
//! `child_entry` test calling `trafficgen::run` with the arguments it is given), exactly as
//! `vecplane gen` would. They need root and `ip`: otherwise each test prints `skipped: <why>`
//! and passes. Tests run one at a time (they busy-poll); every namespace is removed by a guard
//! on every path, and those of dead test processes at start. No speed is asserted: only that
//! what was sent arrived (at least 90 %).

use clap::Parser;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicUsize = AtomicUsize::new(0);
const NS_PREFIX: &str = "vgen";
const CHILD_ENV: &str = "VECPLANE_GEN_TEST_ARGS";
/// Separates the child's arguments in `CHILD_ENV`.
const ARG_SEPARATOR: char = '\u{1f}';

#[derive(Parser)]
struct ChildCli {
    #[command(flatten)]
    gen: trafficgen::GenArgs,
}

/// Not a test: the body of a child process (does nothing unless `CHILD_ENV` is set).
#[test]
fn child_entry() {
    let Ok(args) = std::env::var(CHILD_ENV) else {
        return;
    };
    let argv = std::iter::once("gen").chain(args.split(ARG_SEPARATOR));
    let cli = ChildCli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = trafficgen::run(&cli.gen) {
        panic!("gen failed: {e:#}");
    }
}

fn missing_prerequisite() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("");
    if euid != "0" {
        return Some("not root (network namespaces, veth, XDP and AF_XDP need root)".into());
    }
    let ip = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !ip.is_ok_and(|s| s.success()) {
        return Some("`ip` (iproute2) is not installed".into());
    }
    None
}

/// The serial lock, or `None` after printing why the test cannot run here.
fn begin() -> Option<MutexGuard<'static, ()>> {
    if let Some(why) = missing_prerequisite() {
        testenv::skip(&why);
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    delete_leftovers();
    Some(guard)
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[track_caller]
fn must(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

/// Delete namespaces `vgen<pid>-...` whose creating process is gone.
fn delete_leftovers() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty()
            && pid.chars().all(|c| c.is_ascii_digit())
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = run(&["ip", "netns", "del", name]);
        }
    }
}

/// Two namespaces joined by one veth pair; both removed on drop (which removes the pair).
struct Pair {
    ns_a: String,
    ns_b: String,
    a: String,
    b: String,
}

impl Pair {
    /// `peer_napi`: give the b end NAPI through GRO before any XDP program (as a router
    /// namespace without XDP would need it).
    fn new(peer_napi: bool) -> Pair {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = format!("{NS_PREFIX}{pid}-{n}");
        // "vg" + up to 8 hex digits + "x" + counter + "a": at most 15 characters.
        let link = format!("vg{pid:x}x{n:x}");
        let p = Pair {
            ns_a: format!("{ns}-a"),
            ns_b: format!("{ns}-b"),
            a: format!("{link}a"),
            b: format!("{link}b"),
        };
        assert!(p.a.len() <= 15, "{}", p.a);
        must(&["ip", "netns", "add", &p.ns_a]);
        must(&["ip", "netns", "add", &p.ns_b]);
        must(&[
            "ip", "link", "add", &p.a, "netns", &p.ns_a, "type", "veth", "peer", "name", &p.b,
            "netns", &p.ns_b,
        ]);
        for (ns, dev) in [(&p.ns_a, &p.a), (&p.ns_b, &p.b)] {
            // No IPv6 autoconfiguration traffic to count by mistake.
            let _ = run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
            let _ = run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        if peer_napi {
            let _ = run(&[
                "ip", "netns", "exec", &p.ns_b, "ethtool", "-K", &p.b, "gro", "on",
            ]);
        }
        p
    }

    fn mac_b(&self) -> String {
        must(&[
            "ip",
            "netns",
            "exec",
            &self.ns_b,
            "cat",
            &format!("/sys/class/net/{}/address", self.b),
        ])
        .trim()
        .to_string()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

/// A child process killed (and reaped) on drop if it is still running.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Start `gen <args>` inside namespace `ns`, stdout and stderr piped.
fn spawn_gen(ns: &str, args: &[&str]) -> ChildGuard {
    let exe = std::env::current_exe().expect("test executable");
    let exe = exe.to_str().expect("utf-8 path").to_string();
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            &exe,
            "child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, args.join(&ARG_SEPARATOR.to_string()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child");
    ChildGuard(child)
}

/// Wait for a child (at most `limit`) and return the JSON object it printed on stdout.
fn finish(mut child: ChildGuard, limit: Duration, what: &str) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        match child.0.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => panic!("{what} did not end within {limit:?}"),
            Err(e) => panic!("{what}: {e}"),
        }
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.0.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    // The test harness may print "test child_entry ... " on the same line before it.
    let line = out
        .lines()
        .find_map(|l| l.find('{').map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("{what} printed no JSON.\nstdout:\n{out}\nstderr:\n{err}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"))
}

/// Start the sink in `ns` on `dev` and return once it says it is receiving.
fn start_sink(ns: &str, dev: &str, count: u64) -> (ChildGuard, std::thread::JoinHandle<String>) {
    let count = count.to_string();
    let mut sink = spawn_gen(
        ns,
        &[
            "sink",
            "--interface",
            dev,
            "--seconds",
            "15",
            "--idle-seconds",
            "1.5",
            "--count",
            &count,
            "--json",
            "--no-progress",
        ],
    );
    let stderr = sink.0.stderr.take().expect("sink stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    // Read stderr on a thread (so the pipe never fills); report the ready line.
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("receiving") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        drop(sink);
        let err = reader.join().unwrap_or_default();
        panic!("the sink did not start:\n{err}");
    }
    (sink, reader)
}

/// Send `count` frames from a to b with `tx_args` and check the sink got at least 90 %.
fn send_and_count(
    pair: &Pair,
    count: u64,
    tx_args: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let (sink, sink_err) = start_sink(&pair.ns_b, &pair.b, count);
    let mac = pair.mac_b();
    let count_s = count.to_string();
    let mut args = vec![
        "tx",
        "--interface",
        &pair.a,
        "--dst-mac",
        &mac,
        "--count",
        &count_s,
        "--seconds",
        "5",
        "--json",
        "--no-progress",
    ];
    args.extend_from_slice(tx_args);
    let tx = finish(
        spawn_gen(&pair.ns_a, &args),
        Duration::from_secs(20),
        "gen tx",
    );
    let sink = finish(sink, Duration::from_secs(20), "gen sink");
    let _ = sink_err.join();
    println!("tx:   {tx}\nsink: {sink}");
    let sent = tx["sent"].as_u64().expect("sent");
    let received = sink["received"].as_u64().expect("received");
    assert_eq!(tx["mode"], "tx");
    assert_eq!(sink["mode"], "sink");
    assert!(sent > 0, "nothing sent: {tx}");
    assert!(sent <= count, "more sent than asked: {tx}");
    assert!(
        received * 10 >= sent * 9,
        "the sink got {received} of {sent} frames: {tx} {sink}"
    );
    assert!(received <= sent, "more received than sent: {tx} {sink}");
    (tx, sink)
}

#[test]
fn ipv4_frames_reach_the_sink_with_live_frames() {
    let Some(_serial) = begin() else {
        return;
    };
    let pair = Pair::new(false);
    let (tx, sink) = send_and_count(
        &pair,
        200_000,
        &[
            "--src-ip",
            "198.18.1.2",
            "--dst-ip",
            "198.18.2.2",
            "--rate",
            "100000",
            "--method",
            "xdp-live",
        ],
    );
    assert_eq!(tx["method"], "xdp-live");
    assert_eq!(tx["offered"], 200_000, "{tx}");
    assert_eq!(sink["xdp_mode"], "native");
    assert_eq!(
        sink["bytes"].as_u64(),
        sink["received"].as_u64().map(|r| r * 60)
    );
}

#[test]
fn ipv6_frames_reach_the_sink_through_an_af_xdp_socket() {
    let Some(_serial) = begin() else {
        return;
    };
    let pair = Pair::new(false);
    let (tx, sink) = send_and_count(
        &pair,
        200_000,
        &[
            "--src-ip",
            "2001:db8:1::2",
            "--dst-ip",
            "2001:db8:2::2",
            "--frame-size",
            "128",
            "--flows",
            "100",
            "--rate",
            "100000",
            "--method",
            "af-xdp",
        ],
    );
    assert_eq!(tx["method"], "af-xdp");
    assert_eq!(tx["completion_errors"], 0, "{tx}");
    assert_eq!(
        sink["bytes"].as_u64(),
        sink["received"].as_u64().map(|r| r * 124)
    );
}

#[test]
fn auto_falls_back_to_af_xdp_when_the_peer_has_no_napi_and_errors_are_clear() {
    let Some(_serial) = begin() else {
        return;
    };
    let pair = Pair::new(false);
    let mac = pair.mac_b();
    let base = [
        "tx",
        "--interface",
        pair.a.as_str(),
        "--dst-mac",
        mac.as_str(),
        "--src-ip",
        "198.18.1.2",
        "--dst-ip",
        "198.18.2.2",
        "--count",
        "1000",
        "--json",
        "--no-progress",
    ];
    // No sink: the b end has neither XDP nor GRO, so it cannot take live frames.
    let mut live = base.to_vec();
    live.extend_from_slice(&["--method", "xdp-live"]);
    let out = spawn_gen(&pair.ns_a, &live);
    let failed = wait_output(out);
    assert!(
        failed.contains("took none of 64 live frames") && failed.contains("gro on"),
        "{failed}"
    );
    let auto = finish(
        spawn_gen(&pair.ns_a, &base),
        Duration::from_secs(20),
        "auto",
    );
    assert_eq!(auto["method"], "af-xdp", "{auto}");
    assert_eq!(auto["offered"], 1000, "{auto}");
    // A missing interface and a family mismatch are named.
    let mut missing = base.to_vec();
    missing[2] = "vgennothere0";
    assert!(wait_output(spawn_gen(&pair.ns_a, &missing)).contains("no interface `vgennothere0`"));
    let mut mixed = base.to_vec();
    mixed[8] = "2001:db8::2";
    assert!(wait_output(spawn_gen(&pair.ns_a, &mixed)).contains("different families"));
}

/// Wait for a child that is expected to fail; return its stdout and stderr.
fn wait_output(mut child: ChildGuard) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    while matches!(child.0.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut all = String::new();
    if let Some(mut o) = child.0.stdout.take() {
        let _ = o.read_to_string(&mut all);
    }
    if let Some(mut e) = child.0.stderr.take() {
        let _ = e.read_to_string(&mut all);
    }
    all
}

/// The generator XDP program, run by the kernel on one frame at a time without sending it,
/// leaves exactly the frame of some flow (valid checksums: the builder's bytes), for IPv4 and
/// IPv6 and small and large frames, and spreads its picks over the flows.
#[test]
fn live_program_writes_the_frames_of_its_flows() {
    use afxdp::direct::{LiveFrames, LiveFramesSpec};
    use trafficgen::frames::{FlowFrames, FrameRecipe, FIRST_SRC_PORT};
    let Some(_serial) = begin() else {
        return;
    };
    for (src, dst, frame_size, flows, l3) in [
        ("198.18.1.2", "198.18.2.2", 64, 7u32, 20usize),
        ("198.18.1.2", "198.18.2.2", 1518, 65536, 20),
        ("2001:db8:1::2", "2001:db8:2::2", 78, 5, 40),
    ] {
        let frames = FlowFrames::new(&FrameRecipe {
            dst_mac: [0x02, 0, 0, 0, 0, 1],
            src_mac: [0x02, 0, 0, 0, 0, 2],
            src_ip: src.parse().expect("ip"),
            dst_ip: dst.parse().expect("ip"),
            flows,
            frame_size,
        })
        .expect("frames");
        let sport = 14 + l3;
        let live = LiveFrames::new(&LiveFramesSpec {
            ifname: "lo",
            frame: frames.template(),
            flows,
            first_src_port: FIRST_SRC_PORT,
            src_port_at: sport,
            udp_checksum_at: sport + 6,
            batch: 64,
            keep_dispatched: false,
            new_flows_per_second: 0,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let mut seen = std::collections::HashSet::new();
        let mut want = vec![0u8; frames.frame_len()];
        for _ in 0..300 {
            let (action, out) = live.dry_run().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(action, LiveFrames::expected_action());
            assert_eq!(out.len(), frames.frame_len());
            let port = u16::from_be_bytes([out[sport], out[sport + 1]]);
            let flow = port.wrapping_sub(FIRST_SRC_PORT) as usize;
            assert!(flow < flows as usize, "port {port} is no flow's");
            assert_eq!(frames.write(flow, &mut want), want.len());
            assert_eq!(out, want, "{src} {frame_size}: flow {flow}");
            seen.insert(flow);
        }
        if flows <= 7 {
            assert_eq!(seen.len(), flows as usize, "every flow is picked");
        } else {
            assert!(seen.len() > 250, "flows spread: {}", seen.len());
        }
    }
}

/// The churn program (new flows per second) is accepted by the verifier and writes, for IPv4
/// and IPv6, frames whose two ports follow `churn_ports` of some flow number and whose UDP
/// checksum is the one a full sum gives (checked against the builder's frame for the same
/// ports); over a run the flow numbers move on with time.
#[test]
fn churn_program_moves_on_to_new_flows() {
    use afxdp::direct::{checksum_seed2, patched_checksum2, LiveFrames, LiveFramesSpec};
    use trafficgen::frames::{FlowFrames, FrameRecipe, FIRST_SRC_PORT};
    let Some(_serial) = begin() else {
        return;
    };
    for (src, dst, frame_size, l3) in [
        ("198.18.1.2", "198.18.1.3", 64, 20usize),
        ("2001:db8:1::2", "2001:db8:1::3", 78, 40),
    ] {
        let frames = FlowFrames::new(&FrameRecipe {
            dst_mac: [0x02, 0, 0, 0, 0, 1],
            src_mac: [0x02, 0, 0, 0, 0, 2],
            src_ip: src.parse().expect("ip"),
            dst_ip: dst.parse().expect("ip"),
            flows: 1,
            frame_size,
        })
        .expect("frames");
        let sport = 14 + l3;
        let t = frames.template();
        let csum = u16::from_be_bytes([t[sport + 6], t[sport + 7]]);
        let dport = u16::from_be_bytes([t[sport + 2], t[sport + 3]]);
        let seed = checksum_seed2(csum, FIRST_SRC_PORT, dport);
        let live = LiveFrames::new(&LiveFramesSpec {
            ifname: "lo",
            frame: t,
            flows: 4,
            first_src_port: FIRST_SRC_PORT,
            src_port_at: sport,
            udp_checksum_at: sport + 6,
            batch: 64,
            keep_dispatched: false,
            new_flows_per_second: 1_000_000,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let (action, out) = live.dry_run().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(action, LiveFrames::expected_action());
            let s = u16::from_be_bytes([out[sport], out[sport + 1]]);
            let d = u16::from_be_bytes([out[sport + 2], out[sport + 3]]);
            let c = u16::from_be_bytes([out[sport + 6], out[sport + 7]]);
            assert_eq!(c, patched_checksum2(seed, s, d), "{src}: ports {s} {d}");
            assert!((dport..dport + 1024).contains(&d));
            // Everything else is the template's.
            let mut want = t.to_vec();
            want[sport..sport + 4].copy_from_slice(&out[sport..sport + 4]);
            want[sport + 6..sport + 8].copy_from_slice(&out[sport + 6..sport + 8]);
            assert_eq!(out, want);
            seen.insert((s, d));
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        // 200 frames 50+ us apart at 1M new flows/s: the flow number moved on many times.
        assert!(
            seen.len() > 100,
            "{src}: only {} distinct port pairs",
            seen.len()
        );
    }
}

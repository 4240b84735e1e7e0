//! `vecplane run` with two TAP ports that take offloads (`offloads = true`), cross-connected
//! both ways (needs root, `ip`, `ethtool`, `python3`; prints `skipped: <why>` otherwise, fails
//! in CI). vecplane creates the TAPs in its namespace R; they move to A (a TCP sender) and B (a
//! router to C over a veth whose checksum and segmentation offloads are off, so B's kernel must
//! segment and checksum what vecplane passed on, and C checks every checksum). An IPv4 transfer
//! of 8 MiB must arrive intact, through super-packets (the TAP's average received frame is
//! larger than an Ethernet frame), with no refusal counted. With two workers, the same both
//! ways (C to A too: B's kernel hands vecplane GRO super-packets), and nothing counted as a
//! malformed offload. Bounded in bytes and seconds; namespaces and the scratch directory are
//! deleted on drop, also when the test fails.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

const TRANSFER_BYTES: usize = 8 << 20;

/// Namespaces and a directory deleted on drop.
struct Scratch {
    namespaces: Vec<String>,
    dir: std::path::PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Run a command that must succeed; its stdout.
fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stops the daemon (SIGINT, then waits) on drop.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

const RECEIVER: &str = "import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1); print('ready', flush=True)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    d = c.recv(1 << 20)
    if not d: break
    h.update(d); n += len(d)
print(n, h.hexdigest(), flush=True)
";

const SENDER: &str = "import hashlib, random, socket, sys
n = int(sys.argv[2]); d = random.Random(11).randbytes(n); h = hashlib.sha256(d).hexdigest()
s = socket.create_connection((sys.argv[1], 5001), timeout=15); s.sendall(d)
s.shutdown(socket.SHUT_WR); s.recv(1); s.close(); print(n, h, flush=True)
";

#[test]
fn tcp_through_two_offloading_taps_arrives_intact_in_super_packets() {
    require_root!(SERIAL, &["ip", "ethtool", "python3", "timeout"]);
    through_two_taps(1);
}

#[test]
fn two_workers_keep_tap_offloads_both_ways() {
    require_root!(SERIAL, &["ip", "ethtool", "python3", "timeout"]);
    through_two_taps(2);
}

/// The lab with `workers` workers: A sends to C, and with several workers C to A as well.
fn through_two_taps(workers: usize) {
    let tag = format!("vto{}{workers}", std::process::id() % 10_000);
    let (a, b, c, r) = (
        format!("{tag}a"),
        format!("{tag}b"),
        format!("{tag}c"),
        format!("{tag}r"),
    );
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let _scratch = Scratch {
        namespaces: vec![a.clone(), b.clone(), c.clone(), r.clone()],
        dir: dir.clone(),
    };
    for ns in [&a, &b, &c, &r] {
        sh(&["ip", "netns", "add", ns]);
        // IPv6 off: no router solicitation reaches a TAP that is not up yet (a tx drop).
        for key in ["all", "default"] {
            let key = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", &key]);
        }
    }
    std::fs::create_dir_all(&dir).expect("dir");
    let (ta, tb) = (format!("{tag}ta"), format!("{tag}tb"));
    let config = dir.join("tap.toml");
    std::fs::write(
        &config,
        format!(
            "[dataplane]\nworkers = {workers}\n\n\
             [[port]]\nname = \"ta\"\ndriver = \"tap\"\ninterface = \"{ta}\"\noffloads = true\n\
             mac = \"02:00:00:00:01:01\"\n\n\
             [[port]]\nname = \"tb\"\ndriver = \"tap\"\ninterface = \"{tb}\"\noffloads = true\n\
             mac = \"02:00:00:00:02:01\"\n\n\
             [[xconnect]]\nfrom = \"ta\"\nto = \"tb\"\n\n\
             [[xconnect]]\nfrom = \"tb\"\nto = \"ta\"\n"
        ),
    )
    .expect("config");
    let socket = dir.join("tap.sock");
    let _daemon = Daemon(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &r,
                BIN,
                "run",
                "--seconds",
                "60",
                "--config",
            ])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("vecplane run"),
    );
    let t0 = Instant::now();
    while control::request(&socket, "help", false).is_err() {
        // A debug build beside a CPU-heavy test binary once took over 10 s to answer.
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "vecplane answers within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A 198.18.83.1 -- (ta, vecplane, tb) -- .2 B 198.18.84.1 -- veth -- .2 C.
    sh(&[
        "ip", "-n", &b, "link", "add", "vb", "type", "veth", "peer", "name", "vc", "netns", &c,
    ]);
    for (ns, dev, ip) in [
        (&a, ta.as_str(), "198.18.83.1/24"),
        (&b, tb.as_str(), "198.18.83.2/24"),
        (&b, "vb", "198.18.84.1/24"),
        (&c, "vc", "198.18.84.2/24"),
    ] {
        if dev.starts_with(&tag) {
            sh(&["ip", "-n", &r, "link", "set", dev, "netns", ns]);
        }
        sh(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
        sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    sh(&[
        "ip",
        "-n",
        &a,
        "route",
        "add",
        "198.18.84.0/24",
        "via",
        "198.18.83.2",
    ]);
    sh(&[
        "ip",
        "-n",
        &c,
        "route",
        "add",
        "198.18.83.0/24",
        "via",
        "198.18.84.1",
    ]);
    sh(&[
        "ip",
        "netns",
        "exec",
        &b,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]);
    sh(&[
        "ip", "netns", "exec", &b, "ethtool", "-K", "vb", "tx", "off", "tso", "off", "gso", "off",
    ]);

    // A to C; with several workers, C to A as well.
    let pairs = [(&a, &c, "198.18.84.2"), (&c, &a, "198.18.83.1")];
    let ways = &pairs[..if workers > 1 { 2 } else { 1 }];
    for &(from, to, addr) in ways {
        let (sent, got) = transfer(from, to, addr);
        println!("{from} to {to}: sent `{sent}`, received `{got}`");
        assert!(
            sent.starts_with(&format!("{TRANSFER_BYTES} ")),
            "sender: `{sent}`"
        );
        assert_eq!(sent, got, "{to} received what {from} sent");
    }
    let ifs = control::request(&socket, "show interfaces", true)
        .ok()
        .and_then(|r| r.data)
        .unwrap_or(Value::Null);
    let errors = control::request(&socket, "show errors", true)
        .ok()
        .and_then(|r| r.data)
        .unwrap_or(Value::Null);
    let malformed: u64 = errors["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("malformed"))
        })
        .filter_map(|e| e["count"].as_u64())
        .sum();
    assert_eq!(malformed, 0, "no malformed offload: {errors:#}");
    let snmp = sh(&["ip", "netns", "exec", &c, "cat", "/proc/net/snmp"]);
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let csum_errors = tcp
        .next()
        .zip(tcp.next())
        .and_then(|(k, v)| {
            k.split_whitespace()
                .zip(v.split_whitespace())
                .find(|(k, _)| *k == "InCsumErrors")
                .and_then(|(_, v)| v.parse::<u64>().ok())
        })
        .unwrap_or(u64::MAX);
    println!("C's TCP checksum errors {csum_errors}\n{ifs:#}");
    assert_eq!(csum_errors, 0);
    // Super-packets came in on ta, and with transfers both ways on tb as well.
    for port in ifs["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .take(ways.len())
    {
        let (pkts, bytes) = (
            port["rx_packets"].as_u64().unwrap_or(0),
            port["rx_bytes"].as_u64().unwrap_or(0),
        );
        assert!(
            bytes > 1514 * pkts.max(1),
            "super-packets: {bytes} bytes in {pkts} frames: {port}"
        );
        let detail = port["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("offloads"), "{port}");
        if workers > 1 {
            assert!(detail.contains("software RSS over 2 workers"), "{port}");
        }
    }
    for p in ifs["interfaces"].as_array().into_iter().flatten() {
        let counters = p["driver_counters"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(counters.contains_key("rx_no_jumbo_buffer"), "{p}");
        assert!(
            counters.values().all(|v| v.as_u64() == Some(0)),
            "no refusal: {p}"
        );
        assert_eq!(p["rx_drops"].as_u64(), Some(0), "{p}");
        assert_eq!(p["tx_drops"].as_u64(), Some(0), "{p}");
    }
}

/// A bulk transfer from namespace `from` to `addr` in `to`, each side hashing the data: what
/// the sender and the receiver printed (bytes and SHA-256).
fn transfer(from: &str, to: &str, addr: &str) -> (String, String) {
    let mut rx = Command::new("ip")
        .args([
            "netns", "exec", to, "timeout", "20", "python3", "-c", RECEIVER, addr,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("receiver");
    let mut lines = BufReader::new(rx.stdout.take().expect("piped")).lines();
    assert_eq!(
        lines.next().and_then(Result::ok).as_deref(),
        Some("ready"),
        "the receiver listens"
    );
    let sent = Command::new("ip")
        .args([
            "netns", "exec", from, "timeout", "20", "python3", "-c", SENDER, addr,
        ])
        .arg(TRANSFER_BYTES.to_string())
        .output()
        .expect("sender");
    let got = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = rx.wait();
    let sent = String::from_utf8_lossy(&sent.stdout).trim().to_string();
    (sent, got)
}

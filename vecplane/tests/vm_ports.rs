//! vhost-user ports with real QEMU guests (needs root, `qemu-system-x86_64` and the Debian
//! packages the guest image is built from: linux-image-amd64, busybox-static, iperf3; each test
//! prints `skipped: <why>` and returns otherwise, and fails under CI=true):
//!
//! * two guests on vhost-user ports of a learning bridge (one port in server mode, one in client
//!   mode) ping each other over IPv4 and IPv6 and run bounded iperf3 TCP and UDP transfers; the
//!   ports count packets both ways and vecplane reports no malformed ring; each guest is then
//!   killed and started again on the same socket, and traffic resumes (the config is
//!   examples/vm-bridge.toml);
//! * service chaining: guests A and B and three VNF guests (two vhost-user NICs each, bridging
//!   them inside) on a flow-mode bridge; rules loaded with `vecplane ctl add-flow` steer A's
//!   traffic through a chain of 1, 2 and 3 VNFs to B and back; ping works through each chain and
//!   `dump-flows` counts packets on every hop.
//!
//! Guests boot once per test and are reused across its steps. Every wait is bounded; QEMU, the
//! daemon, the sockets and the scratch directory are deleted on drop, also when a test fails.
//! Addresses are from 198.18.0.0/15 and 2001:db8::/32 only.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::{
    chain, guest_mac, Addressing, Guest, GuestImage, GuestSpec, Host, Mode, NicSpec, Topology,
};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

/// Host tools besides QEMU (checked with root by `require_root!`).
const TOOLS: &[&str] = &[netlab::guest::QEMU];

/// Deadline of one short guest command.
const SHORT: Duration = Duration::from_secs(30);

/// The guest image, or `None` after reporting why guests cannot run here.
fn image() -> Option<GuestImage> {
    GuestImage::for_tests()
}

/// `vecplane run` with a config in a scratch directory of its own (which also holds the
/// vhost-user sockets); the daemon is stopped and the directory deleted on drop.
struct Daemon {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(config: &str) -> Daemon {
        Daemon::start_in(config, None)
    }

    /// `start`, inside network namespace `ns` when given (the sockets stay in the scratch
    /// directory, which every namespace sees).
    fn start_in(config: &str, ns: Option<&str>) -> Daemon {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "vp-vm-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let mut d = Daemon {
            child: None,
            socket: dir.join("ctl.sock"),
            log: dir.join("vecplane.log"),
            dir,
        };
        let path = d.dir.join("vecplane.toml");
        std::fs::write(&path, config).expect("write the config");
        let log = std::fs::File::create(&d.log).expect("daemon log");
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, BIN]);
                c
            }
            None => Command::new(BIN),
        };
        cmd.arg("run")
            .arg("--config")
            .arg(&path)
            .arg("--socket")
            .arg(&d.socket)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        // SAFETY: only prctl() between fork and exec (async-signal-safe): the daemon dies with
        // the test's thread even when the test process is killed.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        d.child = Some(cmd.spawn().expect("vecplane run starts"));
        let t = Instant::now();
        loop {
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("vecplane run exited ({st}):\n{}", d.log());
            }
            if d.socket.exists() && d.ctl(&["help"]).0 {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "vecplane did not answer within 20 s:\n{}",
                d.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// A vhost-user socket path in the scratch directory.
    fn sock(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.sock"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `vecplane ctl WORDS` (bounded to 20 s): success and stdout + stderr.
    fn ctl(&self, words: &[&str]) -> (bool, String) {
        let socket = self.socket.to_string_lossy().into_owned();
        let mut args = vec![BIN, "ctl", "--socket", &socket];
        args.extend_from_slice(words);
        match netlab::cmd::run_bounded(&args, Duration::from_secs(20)) {
            Ok(o) => (
                o.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
            ),
            Err(e) => (false, format!("{e:#}")),
        }
    }

    fn ctl_ok(&self, words: &[&str]) -> String {
        let (ok, out) = self.ctl(words);
        assert!(ok, "vecplane ctl {words:?} failed: {out}\n{}", self.log());
        out
    }

    fn ctl_json(&self, words: &[&str]) -> Value {
        let mut w = vec!["--json"];
        w.extend_from_slice(words);
        let out = self.ctl_ok(&w);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("ctl {words:?} JSON ({e}): {out}"))
    }

    /// Port `name` in `show interfaces`.
    fn port(&self, name: &str) -> Value {
        let v = self.ctl_json(&["show", "interfaces"]);
        v["interfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no port {name} in {v}"))
    }

    /// What vecplane reported about its guests that must not happen: malformed rings and
    /// failed vhost-user requests.
    fn guest_errors(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("malformed ring") || l.contains("request failed"))
            .map(str::to_string)
            .collect()
    }

    fn assert_running(&mut self) {
        if let Some(st) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            panic!("vecplane run exited ({st}):\n{}", self.log());
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = libc::pid_t::try_from(c.id()) {
                // SAFETY: kill() on our own child, not reaped yet.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let t = Instant::now();
            while c.try_wait().ok().flatten().is_none() {
                if t.elapsed() > Duration::from_secs(3) {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if std::thread::panicking() {
            eprintln!("--- vecplane log ---\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A guest with one vhost-user NIC on `socket` (`qemu_server`: QEMU listens there).
fn host_spec(name: &str, n: u8, socket: &Path, qemu_server: bool) -> GuestSpec {
    GuestSpec::new(name)
        .nic(NicSpec::VhostUser {
            socket: socket.to_path_buf(),
            server: qemu_server,
            mac: guest_mac(n, 0),
        })
        .addresses(
            &format!("198.18.10.{n}/24"),
            &format!("2001:db8:10::{n}/64"),
        )
}

/// Start QEMU for every spec in order, then wait for all of them (`Guest::boot_all`).
fn boot(image: &GuestImage, specs: Vec<GuestSpec>) -> Vec<Guest> {
    Guest::boot_all(image, specs).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Ping `to` from `g`: one answer within 10 s (the neighbour is resolved), then 3 of 3.
fn pings(g: &mut Guest, to: &str) {
    g.pings(to, SHORT).unwrap_or_else(|e| panic!("{e:#}"));
}

/// A bounded iperf3 run from `client` to `server` at `ip` (`args`: e.g. `-u -b 50M`); the
/// client's JSON report.
fn iperf3(client: &mut Guest, server: &mut Guest, ip: &str, args: &str) -> Value {
    server
        .run_ok(
            &format!("timeout 40 iperf3 -s -1 -B {ip} >/tmp/iperf3-server.log 2>&1 &"),
            SHORT,
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    server
        .run_ok(
            "for i in $(seq 50); do netstat -ltn | grep -q :5201 && break; sleep 0.1; done",
            SHORT,
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    let t = Instant::now();
    let out = client
        .run_ok(
            &format!("timeout 30 iperf3 -c {ip} -t 2 -J --connect-timeout 5000 {args}"),
            Duration::from_secs(40),
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("iperf3 {args} printed no JSON ({e}):\n{out}"));
    println!(
        "iperf3 {args} ({:.1} s): {:.1} Mbit/s",
        t.elapsed().as_secs_f64(),
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .or(v["end"]["sum"]["bits_per_second"].as_f64())
            .unwrap_or(0.0)
            / 1e6
    );
    // The server exits after its one test; wait for it so the next run can listen.
    let _ = server.run(
        "for i in $(seq 50); do netstat -ltn | grep -q :5201 || break; sleep 0.1; done",
        SHORT,
    );
    v
}

fn counter(p: &Value, k: &str) -> u64 {
    p[k].as_u64()
        .unwrap_or_else(|| panic!("no counter {k} in {p}"))
}

#[test]
fn two_guests_on_a_learning_bridge_ping_transfer_and_survive_restarts() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // The example config: vm1's port listens (vecplane is the server); vm2's connects to QEMU
    // (client mode). Its sockets are relative to the config, so they land in the scratch dir.
    let config = include_str!("../../examples/vm-bridge.toml");
    let mut vp = Daemon::start(config);
    let mut g = boot(
        &image,
        vec![
            host_spec("vm1", 1, &vp.sock("vm1"), false),
            host_spec("vm2", 2, &vp.sock("vm2"), true),
        ],
    );
    let (a, b) = g.split_at_mut(1);
    let (vm1, vm2) = (&mut a[0], &mut b[0]);

    pings(vm1, "198.18.10.2");
    pings(vm2, "198.18.10.1");
    pings(vm1, "2001:db8:10::2");
    pings(vm2, "2001:db8:10::1");

    let tcp = iperf3(vm1, vm2, "198.18.10.2", "");
    let bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(bytes > 100_000, "iperf3 TCP moved {bytes} bytes: {tcp}");
    let udp = iperf3(vm2, vm1, "198.18.10.1", "-u -b 50M");
    let sum = &udp["end"]["sum"];
    println!(
        "iperf3 UDP: {} packets, {} lost",
        sum["packets"], sum["lost_packets"]
    );
    assert!(
        sum["packets"].as_u64().unwrap_or(0) > 1000,
        "iperf3 UDP sent too little: {udp}"
    );

    vp.assert_running();
    for name in ["vm1", "vm2"] {
        let p = vp.port(name);
        println!("{name}: {p}");
        assert_eq!(p["driver"], "vhost-user", "{p}");
        assert!(counter(&p, "rx_packets") > 1000, "{p}");
        assert!(counter(&p, "tx_packets") > 1000, "{p}");
        // Frames the guest sent that vecplane could not take (bad length, offload requests).
        assert_eq!(counter(&p, "rx_drops"), 0, "{p}");
        // The port's own counters: connected, no malformed ring.
        let d = &p["driver_counters"];
        assert_eq!(d["guest_errors"], 0, "{p}");
        assert_eq!(d["rx_bad_frames"], 0, "{p}");
        assert_eq!(d["rx_bad_headers"], 0, "{p}");
        assert!(d["connections"].as_u64().unwrap_or(0) >= 1, "{p}");
        let state = p["driver_state"].as_str().unwrap_or_default();
        assert!(
            state.starts_with("connected; offloads from the guest: csum tso4 tso6 ecn"),
            "{p}"
        );
    }
    // The guests negotiated TSO: the sender's super-packets crossed whole, into the other
    // guest whole (no software segmentation between two TSO guests).
    let (sender, receiver) = (vp.port("vm1"), vp.port("vm2"));
    let supers = |p: &Value, k: &str| p["driver_counters"][k].as_u64().unwrap_or(0);
    assert!(supers(&sender, "rx_super_packets") > 10, "{sender}");
    assert!(supers(&receiver, "tx_super_packets") > 10, "{receiver}");
    assert_eq!(supers(&receiver, "tx_segmented"), 0, "{receiver}");
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("traffic done after {:.1} s", start.elapsed().as_secs_f64());

    // Each guest killed and started again on the same socket: vecplane serves the new QEMU
    // (client mode: it reconnects) and traffic resumes.
    for (i, to) in [(1usize, "198.18.10.1"), (0, "198.18.10.2")] {
        let t = Instant::now();
        let before = counter(&vp.port(g[i].name()), "rx_packets");
        let boot = g[i].restart().unwrap_or_else(|e| panic!("{e:#}"));
        println!(
            "{} restarted: ready after {:.2} s",
            g[i].name(),
            boot.as_secs_f64()
        );
        pings(&mut g[i], to);
        vp.assert_running();
        let after = counter(&vp.port(g[i].name()), "rx_packets");
        assert!(after > before, "{}: rx {before} -> {after}", g[i].name());
        println!(
            "{} restart and ping: {:.1} s",
            g[i].name(),
            t.elapsed().as_secs_f64()
        );
    }
    let (a, b) = g.split_at_mut(1);
    pings(&mut a[0], "2001:db8:10::2");
    pings(&mut b[0], "198.18.10.1");
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

#[test]
fn a_tso_guest_reaches_a_kernel_host_through_software_segmentation() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // vecplane in R bridges a guest and R's veth towards host A (whose kernel neither takes
    // nor sends super-packets there: tx offloads off on A0, GRO off on Ra).
    let topo = Topology::build_with_prefix("vmso", Mode::Dataplane(Addressing::Bridged))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let config = format!(
        "[dataplane]\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\n\n{}\
         [[port]]\nname = \"kernel\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"{}\"\nbridge = \"br0\"\n",
        chain::vhost_user_port("vm1", "02:00:00:00:10:01", "server", ""),
        topo.names().ra,
        netlab::addr::MAC_RA
    );
    let mut vp = Daemon::start_in(&config, Some(topo.ns(Host::R)));
    let mut g = boot(&image, vec![host_spec("vm1", 1, &vp.sock("vm1"), false)]);
    let vm = &mut g[0];
    vm.run_ok(
        "ip addr add 198.18.1.10/24 dev eth0 && ip -6 addr add 2001:db8:1::10/64 dev eth0",
        SHORT,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    pings(vm, "198.18.1.2");
    pings(vm, "2001:db8:1::2");
    for dst in ["198.18.1.2", "2001:db8:1::2"] {
        let mut server = topo
            .spawn(
                Host::A,
                &["timeout", "30", "iperf3", "-s", "-1", "-B", dst],
                "iperf3-server",
            )
            .unwrap_or_else(|e| panic!("{e:#}"));
        let out = vm
            .run_ok(
                &format!(
                    "for i in $(seq 50); do iperf3 -c {dst} -t 2 -J --connect-timeout 2000 \
                     >/tmp/c.json 2>&1 && break; sleep 0.2; done; cat /tmp/c.json"
                ),
                Duration::from_secs(60),
            )
            .unwrap_or_else(|e| panic!("{e:#}"));
        let v: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("iperf3 to {dst} printed no JSON ({e}):\n{out}"));
        let received = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        println!(
            "iperf3 to {dst}: {:.1} Mbit/s",
            v["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
                / 1e6
        );
        assert!(
            received > 1_000_000,
            "iperf3 to {dst}: {received} bytes: {v}"
        );
        let _ = server.wait_timeout(Duration::from_secs(10));
    }
    vp.assert_running();
    let guest = vp.port("vm1");
    let kernel = vp.port("kernel");
    println!("vm1: {guest}\nkernel: {kernel}");
    let d = &guest["driver_counters"];
    let supers = d["rx_super_packets"].as_u64().unwrap_or(0);
    assert!(supers > 10, "the guest sent super-packets: {guest}");
    assert_eq!(d["rx_bad_headers"], 0, "{guest}");
    // Cut into MTU-sized segments on the way out: many more frames left than came in, and
    // none was dropped for its offloads.
    assert!(
        counter(&kernel, "tx_packets") > 3 * supers,
        "segments: {kernel} for {supers} super-packets"
    );
    let errors = vp.ctl_json(&["show", "errors"]);
    let output_drops: u64 = errors["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["node"] == "interface-output")
        .filter_map(|e| e["count"].as_u64())
        .sum();
    assert_eq!(output_drops, 0, "{errors}");
    drop(g);
    drop(vp);
    topo.delete().unwrap_or_else(|e| panic!("{e:#}"));
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

#[test]
fn queue_pairs_are_run_by_their_own_workers() {
    let testpmd = bench::testpmd::DEFAULT_PATH;
    require_root!(SERIAL, &[testpmd]);
    let start = Instant::now();
    // Two ports of two queue pairs each, cross-connected, on two workers: pair 0 on worker
    // 0, pair 1 on worker 1. DPDK's virtio-user (two queues, io forwarding with bursts in
    // flight) is the guest, as in `vecplane bench --scenario pvp`.
    let mut config = String::from("[dataplane]\nworkers = 2\n\n");
    for (name, mac) in [("vu0", "02:00:00:00:00:10"), ("vu1", "02:00:00:00:00:11")] {
        config.push_str(&format!(
            "[[port]]\nname = \"{name}\"\ndriver = \"vhost-user\"\nmac = \"{mac}\"\n\
             socket = \"{name}.sock\"\nqueues = 2\n\n"
        ));
    }
    config.push_str(
        "[[xconnect]]\nfrom = \"vu0\"\nto = \"vu1\"\ndst-mac = \"02:00:00:00:00:21\"\n\n\
         [[xconnect]]\nfrom = \"vu1\"\nto = \"vu0\"\ndst-mac = \"02:00:00:00:00:20\"\n",
    );
    let mut vp = Daemon::start(&config);
    let (s0, s1) = (vp.sock("vu0"), vp.sock("vu1"));
    let mut guest = bench::testpmd::spawn(Path::new(testpmd), Stdio::piped(), |prefix| {
        let mut a: Vec<String> = [
            "--lcores=0@0,1@0",
            "--main-lcore=0",
            "--no-huge",
            "-m",
            "1024",
            "--no-pci",
            "--no-telemetry",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("--file-prefix={prefix}"));
        for (i, s) in [&s0, &s1].iter().enumerate() {
            a.push("--vdev".into());
            a.push(format!("net_virtio_user{i},path={},queues=2", s.display()));
        }
        a.extend(
            [
                "--",
                "--nb-cores=1",
                "--rxq=2",
                "--txq=2",
                "--forward-mode=io",
                "--tx-first",
                "--stats-period=1",
                "--no-lsc-interrupt",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        a
    })
    .unwrap_or_else(|e| panic!("{e:#}"));
    // Every receive node of every pair moves packets, each on its own worker.
    let node_packets = |rt: &Value, worker: usize, node: &str| -> u64 {
        rt["workers"][worker]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["name"] == node)
            .and_then(|n| n["packets"].as_u64())
            .unwrap_or(0)
    };
    let want = [
        (0, "vu0-rx-q0"),
        (1, "vu0-rx-q1"),
        (0, "vu1-rx-q0"),
        (1, "vu1-rx-q1"),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let rt = loop {
        let rt = vp.ctl_json(&["show", "runtime"]);
        if want.iter().all(|&(w, n)| node_packets(&rt, w, n) > 10_000) {
            break rt;
        }
        assert!(!guest.exited(), "testpmd exited:\n{}", vp.log());
        assert!(
            Instant::now() < deadline,
            "not every queue pair moved packets within 30 s: {rt}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for (w, n) in want {
        println!("worker {w}: {n}: {} packets", node_packets(&rt, w, n));
    }
    vp.assert_running();
    for name in ["vu0", "vu1"] {
        let p = vp.port(name);
        println!("{name}: {p}");
        assert_eq!(p["driver_counters"]["guest_errors"], 0, "{p}");
        assert!(
            p["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("2 queue pairs"),
            "{p}"
        );
    }
    drop(guest);
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

/// (match, n_packets) of every rule of br0.
fn rule_packets(vp: &Daemon) -> Vec<(String, u64)> {
    let v = vp.ctl_json(&["dump-flows", "br0"]);
    v["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                format!("priority={},{}", r["priority"], r["match"]).replace('"', ""),
                r["n_packets"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Packets a VNF guest sent on eth0 and eth1.
fn vnf_tx(g: &mut Guest) -> (u64, u64) {
    let out = g
        .run_ok(
            "cat /sys/class/net/eth0/statistics/tx_packets /sys/class/net/eth1/statistics/tx_packets",
            SHORT,
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    let v: Vec<u64> = out
        .split_whitespace()
        .map(|x| x.parse().unwrap_or_else(|_| panic!("counters: {out}")))
        .collect();
    assert_eq!(v.len(), 2, "counters: {out}");
    (v[0], v[1])
}

#[test]
fn flow_rules_chain_traffic_through_one_two_and_three_vnf_guests() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    const VNFS: u32 = 3;
    // The chain's config, rules and guests are netlab's (`vecplane bench --scenario vm-chain`
    // builds the same chain).
    let config = chain::vecplane_config(VNFS, "buffers = 8192").unwrap_or_else(|e| panic!("{e:#}"));
    let mut vp = Daemon::start(&config);
    let specs = chain::guest_specs(VNFS, 20, "", |p| {
        Ok(NicSpec::VhostUser {
            socket: vp.sock(&p.name),
            server: false,
            mac: p.guest_mac,
        })
    })
    .unwrap_or_else(|e| panic!("{e:#}"));
    let mut g = boot(&image, specs);

    // Nothing passes before the operator loads a chain (the default rule drops).
    let (status, _) = g[0]
        .run("ping -c 1 -w 2 198.18.20.2", SHORT)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_ne!(status, 0, "A reached B without a rule");

    let mut vnf_before: Vec<(u64, u64)> =
        (1..=VNFS).map(|k| vnf_tx(&mut g[1 + k as usize])).collect();
    for n in 1..=VNFS {
        let t = Instant::now();
        // Replace the chain as an operator would: remove the steering rules, load the new ones.
        vp.ctl_ok(&["del-flows", "br0"]);
        vp.ctl_ok(&["add-flow", "br0", chain::DEFAULT_RULE]);
        let rules = chain::chain_rules(n);
        for r in &rules {
            vp.ctl_ok(&["add-flow", "br0", r]);
        }
        let (ab, ba) = g.split_at_mut(1);
        pings(&mut ab[0], "198.18.20.2");
        pings(&mut ba[0], "198.18.20.1");
        if n == VNFS {
            pings(&mut ab[0], "2001:db8:20::2");
        }
        let counted = rule_packets(&vp);
        println!(
            "chain of {n}: {:.1} s; rules:\n{}",
            t.elapsed().as_secs_f64(),
            vp.ctl_ok(&["dump-flows", "br0"]).trim_end()
        );
        for r in &rules {
            let m = r
                .split(",actions")
                .next()
                .unwrap_or_else(|| panic!("no actions in {r}"));
            let (_, packets) = counted
                .iter()
                .find(|(c, _)| c == m)
                .unwrap_or_else(|| panic!("rule {m} not in dump-flows: {counted:?}"));
            assert!(*packets > 0, "no packet took the hop {r}: {counted:?}");
        }
        // The VNFs in the chain forwarded both ways (8 echo requests and 8 replies each way at
        // least); the others passed nothing.
        for k in 1..=VNFS {
            let now = vnf_tx(&mut g[1 + k as usize]);
            let before = std::mem::replace(&mut vnf_before[k as usize - 1], now);
            let delta = (now.0 - before.0, now.1 - before.1);
            println!("vnf{k} sent eth0/eth1: +{}/+{}", delta.0, delta.1);
            if k <= n {
                assert!(delta.0 >= 8 && delta.1 >= 8, "vnf{k} forwarded {delta:?}");
            } else {
                assert_eq!(delta, (0, 0), "vnf{k} is not in the chain of {n}");
            }
        }
    }
    vp.assert_running();
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

//! vhost-user ports with real QEMU guests (needs root, `qemu-system-x86_64` and the Debian
//! packages the guest image is built from: linux-image-amd64, busybox-static, iperf3; each test
//! prints `skipped: <why>` and returns otherwise, and fails under CI=true):
//!
//! * two guests on vhost-user ports of a learning bridge (one port in server mode, one in client
//!   mode; the config is examples/vm-bridge.toml) run a bounded iperf3 UDP transfer; the ports
//!   count it, drop nothing the guests sent and vecplane reports no malformed ring; each guest
//!   is then killed and started again (a fresh QEMU, the old one and its files gone) on the
//!   same socket, and pings over IPv4 and IPv6 resume. The same setup with pings both ways in
//!   both families and a TCP transfer is `vecplane demo --vms`, run by tests/demo.rs;
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

use netlab::vm_lab::{self, VhostLab, VM_BRIDGE_CONFIG};
use netlab::{guest_mac, Guest, GuestImage, GuestSpec, NicSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
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

/// `vecplane run` with a config in a scratch directory of its own (netlab's `VhostLab`, which
/// also holds the vhost-user sockets), driven through `vecplane ctl`; the daemon is stopped and
/// the directory deleted on drop.
struct Daemon {
    lab: VhostLab,
}

impl Daemon {
    fn start(config: &str) -> Daemon {
        Daemon {
            lab: VhostLab::start(Path::new(BIN), config).unwrap_or_else(|e| panic!("{e:#}")),
        }
    }

    /// A vhost-user socket path in the scratch directory.
    fn sock(&self, name: &str) -> PathBuf {
        self.lab.socket(name)
    }

    /// `vecplane ctl WORDS` (bounded to 20 s): success and stdout + stderr.
    fn ctl(&self, words: &[&str]) -> (bool, String) {
        let socket = match self.lab.vecplane() {
            Ok(v) => v.socket().to_string_lossy().into_owned(),
            Err(e) => return (false, format!("{e:#}")),
        };
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
        assert!(ok, "vecplane ctl {words:?} failed: {out}");
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
        self.lab.port(name).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// What vecplane reported about its guests that must not happen: malformed rings and
    /// failed vhost-user requests.
    fn guest_errors(&self) -> Vec<String> {
        self.lab.guest_errors()
    }

    fn assert_running(&mut self) {
        self.lab.check_running().unwrap_or_else(|e| panic!("{e:#}"));
    }
}

fn vhost_port(name: &str, mac: &str, mode: &str, extra: &str) -> String {
    format!(
        "[[port]]\nname = \"{name}\"\ndriver = \"vhost-user\"\nmac = \"{mac}\"\n\
         socket = \"{name}.sock\"\nsocket-mode = \"{mode}\"\nbridge = \"br0\"\n{extra}\n"
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

fn counter(p: &Value, k: &str) -> u64 {
    p[k].as_u64()
        .unwrap_or_else(|| panic!("no counter {k} in {p}"))
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn two_guests_on_a_learning_bridge_transfer_and_survive_restarts() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // The example config: vm1's port listens (vecplane is the server); vm2's connects to QEMU
    // (client mode). Its sockets are relative to the config, so they land in the scratch dir.
    let mut vp = Daemon::start(VM_BRIDGE_CONFIG);
    let mut g = boot(&image, vm_lab::vm_bridge_guests(&vp.lab));
    let (a, b) = g.split_at_mut(1);
    let (vm1, vm2) = (&mut a[0], &mut b[0]);

    // UDP from vm2 (client-mode port) to vm1 (server-mode port); `vecplane demo --vms` sends
    // TCP the other way.
    let t = Instant::now();
    let udp = vm_lab::iperf3(vm2, vm1, &vm_lab::vm_ip4(1), "-u -b 50M", 2)
        .unwrap_or_else(|e| panic!("{e:#}"));
    let sum = &udp["end"]["sum"];
    println!(
        "iperf3 UDP ({:.1} s): {} packets, {} lost, {:.1} Mbit/s",
        t.elapsed().as_secs_f64(),
        sum["packets"],
        sum["lost_packets"],
        sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6
    );
    assert!(
        sum["packets"].as_u64().unwrap_or(0) > 1000,
        "iperf3 UDP sent too little: {udp}"
    );

    vp.assert_running();
    for (name, rx_min, tx_min) in [("vm1", 1, 1000), ("vm2", 1000, 1)] {
        let p = vp.port(name);
        println!("{name}: {p}");
        assert_eq!(p["driver"], "vhost-user", "{p}");
        assert!(counter(&p, "rx_packets") >= rx_min, "{p}");
        assert!(counter(&p, "tx_packets") >= tx_min, "{p}");
        // Frames the guest sent that vecplane could not take (bad length, offload requests).
        assert_eq!(counter(&p, "rx_drops"), 0, "{p}");
        // The port's own counters: connected, no malformed ring.
        let d = &p["driver_counters"];
        assert_eq!(d["guest_errors"], 0, "{p}");
        assert_eq!(d["rx_bad_frames"], 0, "{p}");
        assert!(d["connections"].as_u64().unwrap_or(0) >= 1, "{p}");
        assert_eq!(p["driver_state"], "connected", "{p}");
    }
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("traffic done after {:.1} s", start.elapsed().as_secs_f64());

    // Each guest killed and started again on the same socket: a fresh QEMU (the old one and its
    // scratch directory gone, nothing of the old guest left), vecplane serves it (client mode:
    // it reconnects) and traffic resumes.
    for (i, to) in [(1usize, "198.18.10.1"), (0, "198.18.10.2")] {
        let t = Instant::now();
        let before = counter(&vp.port(g[i].name()), "rx_packets");
        g[i].run_ok("touch /tmp/before", SHORT)
            .unwrap_or_else(|e| panic!("{e:#}"));
        let (old_pid, old_dir) = (g[i].pid().expect("running"), g[i].dir().to_path_buf());
        let boot = g[i].restart().unwrap_or_else(|e| panic!("{e:#}"));
        println!(
            "{} restarted: ready after {:.2} s",
            g[i].name(),
            boot.as_secs_f64()
        );
        assert!(!pid_alive(old_pid), "the old QEMU {old_pid} still runs");
        assert!(!old_dir.exists(), "{} still exists", old_dir.display());
        let (status, _) = g[i]
            .run("test -e /tmp/before", SHORT)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(status, 1, "the restarted guest has the old one's files");
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
    // A killed guest runs nothing.
    g[0].kill().unwrap_or_else(|e| panic!("{e:#}"));
    assert!(g[0].pid().is_none());
    assert!(
        g[0].run("true", SHORT).is_err(),
        "a killed guest runs commands"
    );
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

/// OpenFlow port numbers: A is 1, B is 2, VNF `k`'s first NIC is `10k+1`, its second `10k+2`.
fn vnf_ports(k: u32) -> (u32, u32) {
    (10 * k + 1, 10 * k + 2)
}

/// The rules steering A -> VNF1 -> ... -> VNF`n` -> B and back, as `ovs-ofctl` takes them.
fn chain_rules(n: u32) -> Vec<String> {
    let mut r = Vec::new();
    // Forward: each hop's egress is the next hop's ingress.
    let mut from = 1;
    for k in 1..=n {
        let (first, second) = vnf_ports(k);
        r.push(format!(
            "priority=100,in_port={from},actions=output:{first}"
        ));
        from = second;
    }
    r.push(format!("priority=100,in_port={from},actions=output:2"));
    // Back: B into the last VNF's second NIC, out of its first NIC into the previous one's
    // second, ..., into A.
    let mut from = 2;
    for k in (1..=n).rev() {
        let (first, second) = vnf_ports(k);
        r.push(format!(
            "priority=100,in_port={from},actions=output:{second}"
        ));
        from = first;
    }
    r.push(format!("priority=100,in_port={from},actions=output:1"));
    r
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
    let mut config = String::from(
        "[dataplane]\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\nmode = \"flow\"\n\
         flows = [\"priority=0,actions=drop\"]\n\n",
    );
    config.push_str(&vhost_port(
        "a",
        "02:00:00:00:20:01",
        "server",
        "ofport = 1",
    ));
    config.push_str(&vhost_port(
        "b",
        "02:00:00:00:20:02",
        "server",
        "ofport = 2",
    ));
    for k in 1..=VNFS {
        let (first, second) = vnf_ports(k);
        config.push_str(&vhost_port(
            &format!("vnf{k}a"),
            &format!("02:00:00:00:2{k}:01"),
            "server",
            &format!("ofport = {first}"),
        ));
        config.push_str(&vhost_port(
            &format!("vnf{k}b"),
            &format!("02:00:00:00:2{k}:02"),
            "server",
            &format!("ofport = {second}"),
        ));
    }
    let mut vp = Daemon::start(&config);
    let nic = |socket: PathBuf, g: u8, n: u8| NicSpec::VhostUser {
        socket,
        server: false,
        mac: guest_mac(g, n),
    };
    let mut specs = vec![
        GuestSpec::new("a")
            .nic(nic(vp.sock("a"), 1, 0))
            .addresses("198.18.20.1/24", "2001:db8:20::1/64"),
        GuestSpec::new("b")
            .nic(nic(vp.sock("b"), 2, 0))
            .addresses("198.18.20.2/24", "2001:db8:20::2/64"),
    ];
    for k in 1..=VNFS {
        let g = 10 + k as u8;
        specs.push(
            GuestSpec::new(&format!("vnf{k}"))
                .nic(nic(vp.sock(&format!("vnf{k}a")), g, 0))
                .nic(nic(vp.sock(&format!("vnf{k}b")), g, 1))
                .bridged(),
        );
    }
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
        vp.ctl_ok(&["add-flow", "br0", "priority=0,actions=drop"]);
        let rules = chain_rules(n);
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

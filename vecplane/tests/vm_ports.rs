//! vhost-user ports with real QEMU guests (needs root, `qemu-system-x86_64` and the Debian
//! packages the guest image is built from: linux-image-amd64, busybox-static, iperf3; each test
//! prints `skipped: <why>` and returns otherwise, and fails under CI=true). The tests with
//! DPDK's virtio-user as the guest (queue pairs on workers, the rebalancer, packed rings both
//! ways) are in tests/vm_queues.rs.
//!
//! * two guests on vhost-user ports of a learning bridge (one port in server mode, one in client
//!   mode; the config is examples/vm-bridge.toml) run a bounded iperf3 UDP transfer; the ports
//!   count it, drop nothing the guests sent and vecplane reports no malformed ring; each guest
//!   is then killed and started again (a fresh QEMU, the old one and its files gone) on the
//!   same socket, and pings over IPv4 and IPv6 resume. The same setup with pings both ways in
//!   both families and a TCP transfer is `vecplane demo --vms`, run by tests/demo.rs;
//! * a TSO guest reaches a kernel host (a netlab namespace) through vecplane, which cuts its
//!   super-packets into segments; the same guest, routed, is an iperf3 client of a NAT4 VIP
//!   (the load balancer cuts its super-packets and finishes its checksums);
//! * multiqueue with QEMU: two guests of two vCPUs (`-smp 2`, `mq=on`) on ports of two queue
//!   pairs over two workers; their kernels enable both pairs by themselves, a bounded
//!   `iperf3 -P 4` moves packets through every pair's receive node, and every TSO
//!   super-packet, also those received on pair 1 (worker 1), reaches the other guest whole;
//! * packed virtqueues: two QEMU guests with `packed=on` NICs ping each other over IPv4 and
//!   IPv6 through the bridge, and again after one guest's driver unbinds and rebinds its NIC
//!   (QEMU stops and restarts the rings with their packed state), then run a TCP transfer
//!   (TSO super-packets, merged receive buffers) over them;
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
#[path = "support/vm_daemon.rs"]
mod vm_daemon;

use netlab::vm_lab::{self, VM_BRIDGE_CONFIG};
use netlab::{chain, Addressing, Guest, GuestImage, Host, Mode, NicSpec, Topology};
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use vm_daemon::*;

static SERIAL: Mutex<()> = Mutex::new(());

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
        assert_eq!(d["rx_bad_headers"], 0, "{p}");
        assert!(d["connections"].as_u64().unwrap_or(0) >= 1, "{p}");
        // Both guests negotiated the offloads (their TSO super-packets crossing whole is
        // checked on the TCP transfer of `vecplane demo --vms`, in tests/demo.rs).
        let state = p["driver_state"].as_str().unwrap_or_default();
        assert!(
            state.starts_with("connected; offloads from the guest: csum tso4 tso6 ecn"),
            "{p}"
        );
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

#[test]
fn a_tso_guest_reaches_a_kernel_host_through_software_segmentation() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // vecplane in R bridges a guest and R's veth towards host A (whose kernel neither takes
    // nor sends super-packets there: tx offloads off on A0, GRO off on Ra).
    let (topo, mut vp, mut g) = guest_behind_r(
        &image,
        "vmso",
        Addressing::Bridged,
        |topo| {
            format!(
                "[dataplane]\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\n\n{}\
                 [[port]]\nname = \"kernel\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
                 mac = \"{}\"\nbridge = \"br0\"\n",
                chain::vhost_user_port("vm1", "02:00:00:00:10:01", "server", ""),
                topo.names().ra,
                netlab::addr::MAC_RA
            )
        },
        "ip addr add 198.18.1.10/24 dev eth0 && ip -6 addr add 2001:db8:1::10/64 dev eth0",
    );
    let vm = &mut g[0];
    pings(vm, "198.18.1.2");
    pings(vm, "2001:db8:1::2");
    for dst in ["198.18.1.2", "2001:db8:1::2"] {
        iperf3_to_a(&topo, vm, dst, dst);
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
    assert_eq!(node_drops(&vp, "interface-output"), 0);
    drop(g);
    drop(vp);
    topo.delete().unwrap_or_else(|e| panic!("{e:#}"));
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

/// A netlab topology named `prefix` (R a data plane for A and B), vecplane in R with
/// `config(&topology)`, and guest vm1 on its port `vm1`, set up by shell line `setup`.
fn guest_behind_r(
    image: &GuestImage,
    prefix: &str,
    addressing: Addressing,
    config: impl FnOnce(&Topology) -> String,
    setup: &str,
) -> (Topology, Daemon, Vec<Guest>) {
    let topo = Topology::build_with_prefix(prefix, Mode::Dataplane(addressing))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let vp = Daemon::start_in(&config(&topo), Some(topo.ns(Host::R)));
    let mut g = boot(
        image,
        vec![vm_lab::vhost_guest("vm1", 1, &vp.sock("vm1"), false)],
    );
    g[0].run_ok(setup, SHORT)
        .unwrap_or_else(|e| panic!("{e:#}"));
    (topo, vp, g)
}

/// `iperf3_from` guest `vm` to `dst`, served once by host A on address `bind`.
fn iperf3_to_a(topo: &Topology, vm: &mut Guest, bind: &str, dst: &str) -> Value {
    let mut server = topo
        .spawn(
            Host::A,
            &["timeout", "30", "iperf3", "-s", "-1", "-B", bind],
            "iperf3-server",
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    let v = iperf3_from(vm, dst);
    let _ = server.wait_timeout(Duration::from_secs(10));
    v
}

/// A 2 s iperf3 TCP run from guest `vm` to `dst` (retried while the server starts), which
/// must carry over 1 MB; its JSON report.
fn iperf3_from(vm: &mut Guest, dst: &str) -> Value {
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
    v
}

/// Drops counted by `node` in `show errors`.
fn node_drops(vp: &Daemon, node: &str) -> u64 {
    let errors = vp.ctl_json(&["show", "errors"]);
    errors["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["node"] == node)
        .filter_map(|e| e["count"].as_u64())
        .sum()
}

#[test]
fn a_tso_guest_is_a_client_of_a_nat4_vip() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // vecplane in R routes between a guest (198.18.5.0/24) and host A (198.18.1.2, default
    // route via R), and balances VIP 198.18.100.1 port 5201 to A by NAT4: the guest's
    // super-packets and partial checksums reach the VIP.
    let (topo, mut vp, mut g) = guest_behind_r(
        &image,
        "vmlb",
        Addressing::Routed,
        |topo| {
            format!(
                "[dataplane]\nbuffers = 8192\n\n\
                 [[port]]\nname = \"vm1\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:10:01\"\n\
                 socket = \"vm1.sock\"\nip4 = [\"198.18.5.1/24\"]\n\n\
                 [[port]]\nname = \"kernel\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
                 mac = \"{}\"\nip4 = [\"198.18.1.1/24\"]\n\n\
                 [lb]\nlines = [\n\
                 \"lb vip 198.18.100.1/32 protocol tcp port 5201 encap nat4 type clusterip \
                 target_port 5201\",\n\
                 \"lb as 198.18.100.1/32 protocol tcp port 5201 198.18.1.2\",\n]\n",
                topo.names().ra,
                netlab::addr::MAC_RA
            )
        },
        "ip addr add 198.18.5.10/24 dev eth0 && ip route add default via 198.18.5.1",
    );
    let vm = &mut g[0];
    pings(vm, "198.18.1.2");
    iperf3_to_a(&topo, vm, "198.18.1.2", "198.18.100.1");
    vp.assert_running();
    let guest = vp.port("vm1");
    println!("vm1: {guest}");
    let supers = guest["driver_counters"]["rx_super_packets"]
        .as_u64()
        .unwrap_or(0);
    assert!(supers > 10, "the guest sent super-packets: {guest}");
    assert_eq!(node_drops(&vp, "lb"), 0, "{}", vp.log());
    assert_eq!(node_drops(&vp, "interface-output"), 0);
    let lb = vp.ctl_json(&["show", "lb"]);
    println!("show lb: {lb}");
    drop(g);
    drop(vp);
    topo.delete().unwrap_or_else(|e| panic!("{e:#}"));
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

#[test]
fn multiqueue_guests_spread_tcp_over_workers_and_keep_tso_on_pair_1() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    // Two guests of two vCPUs, each with two queue pairs on a learning bridge over two
    // workers: pair k of each port on worker k.
    let mut config =
        String::from("[dataplane]\nworkers = 2\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\n\n");
    for n in 1..=2 {
        config.push_str(&format!(
            "[[port]]\nname = \"vm{n}\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:10:0{n}\"\n\
             socket = \"vm{n}.sock\"\nqueues = 2\nbridge = \"br0\"\n\n"
        ));
    }
    let mut vp = Daemon::start(&config);
    let specs = (1..=2u8)
        .map(|n| {
            let name = format!("vm{n}");
            let mut s = vm_lab::vhost_guest(&name, n, &vp.sock(&name), false).cpus(2);
            if let Some(NicSpec::VhostUser { queues, .. }) = s.nics.first_mut() {
                *queues = 2;
            }
            s
        })
        .collect();
    let mut g = boot(&image, specs);
    println!("booted after {:.1} s", start.elapsed().as_secs_f64());
    // The guest's kernel enabled both pairs by itself (as many as it has vCPUs).
    for vm in g.iter_mut() {
        let q = vm
            .run_ok("ls /sys/class/net/eth0/queues | tr '\\n' ' '", SHORT)
            .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(q.trim(), "rx-0 rx-1 tx-0 tx-1", "{}: queues", vm.name());
    }
    let (a, b) = g.split_at_mut(1);
    let (vm1, vm2) = (&mut a[0], &mut b[0]);
    pings(vm1, &vm_lab::vm_ip4(2));
    // Four TCP streams from vm1 to vm2 (iperf3 -P 4), each on the queue its flow hashes to:
    // without transmit packet steering (which maps vCPU k to queue k, and the guest sends most
    // of a TCP stream from the one vCPU its interrupt line is on), rather than by vCPU. A round
    // whose streams all hashed to one queue is run again (at most 3 rounds; 1 in 8 each).
    for vm in [&mut *vm1, &mut *vm2] {
        vm.run_ok(
            "for q in /sys/class/net/eth0/queues/tx-*; do echo 0 >$q/xps_cpus; done",
            SHORT,
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let ip2 = vm_lab::vm_ip4(2);
    let want = [(0, "vm1-rx-q0"), (1, "vm1-rx-q1")];
    let mut rt = Value::Null;
    for round in 1..=3 {
        let t = Instant::now();
        let tcp = vm_lab::iperf3(vm1, vm2, &ip2, "-P 4", 2).unwrap_or_else(|e| panic!("{e:#}"));
        let received = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        println!(
            "round {round}: iperf3 -P 4 ({:.1} s): {received} bytes, {:.1} Mbit/s",
            t.elapsed().as_secs_f64(),
            tcp["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
                / 1e6
        );
        assert!(received > 1_000_000, "iperf3 moved too little: {tcp}");
        rt = vp.ctl_json(&["show", "runtime"]);
        for (w, n) in want.iter().chain(&[(0, "vm2-rx-q0"), (1, "vm2-rx-q1")]) {
            println!("  worker {w}: {n}: {} packets", node_packets(&rt, *w, n));
        }
        if want.iter().all(|&(w, n)| node_packets(&rt, w, n) > 200) {
            break;
        }
    }
    vp.assert_running();
    // vm1's streams (its super-packets) came in on both pairs, each on its own worker, and
    // worker 1 sent into vm2 itself.
    for (w, n) in want {
        assert!(node_packets(&rt, w, n) > 200, "{n} on worker {w}: {rt}");
    }
    assert!(
        node_packets(&rt, 1, "vm2-tx") > 200,
        "vm2-tx on worker 1: {rt}"
    );
    let (p1, p2) = (vp.port("vm1"), vp.port("vm2"));
    println!("vm1: {p1}\nvm2: {p2}");
    let (d1, d2) = (&p1["driver_counters"], &p2["driver_counters"]);
    let sent_whole = d1["rx_super_packets"].as_u64().unwrap_or(0);
    assert!(sent_whole > 10, "vm1 sent super-packets: {p1}");
    // Every super-packet vm1 sent, on either pair, reached vm2 whole: none was cut on the way
    // (worker 1's interface-output leaves them to its transmit node, which sends into vm2's
    // pair 1) nor by a transmit node. A guest whose receive ring is full drops a few (TCP sends
    // them again), and those are counted as `tx_no_buffers`, never as cut or malformed.
    let whole = d2["tx_super_packets"].as_u64().unwrap_or(0);
    let no_room = d2["tx_no_buffers"].as_u64().unwrap_or(0);
    assert!(
        whole + no_room >= sent_whole,
        "super-packets crossed whole: vm1 {p1}, vm2 {p2}"
    );
    assert_eq!(d2["tx_segmented"], 0, "{p2}");
    assert_eq!(d2["tx_bad_super_packets"], 0, "{p2}");
    let errors = vp.ctl_json(&["show", "errors"]);
    let offload_drops: u64 = errors["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["node"] == "interface-output" || e["node"] == "vm2-tx")
        .filter_map(|e| e["count"].as_u64())
        .sum();
    assert_eq!(offload_drops, 0, "{errors}");
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

/// vecplane's config for `virtio_user`: ports `vu0` and `vu1` of two queue pairs each,

#[test]
fn packed_ring_guests_ping_rebind_and_transfer() {
    require_root!(SERIAL, TOOLS);
    let Some(image) = image() else { return };
    let start = Instant::now();
    let mut vp = Daemon::start(VM_BRIDGE_CONFIG);
    let specs = vm_lab::vm_bridge_guests(&vp.lab)
        .into_iter()
        .map(|s| s.packed_rings())
        .collect();
    let mut g = boot(&image, specs);
    let (a, b) = g.split_at_mut(1);
    let (vm1, vm2) = (&mut a[0], &mut b[0]);
    pings(vm1, &vm_lab::vm_ip4(2));
    pings(vm2, &vm_lab::vm_ip4(1));
    pings(vm1, &vm_lab::vm_ip6(2));
    // vm1's driver lets go of its NIC and takes it again: the device is reset, QEMU stops the
    // rings (GET_VRING_BASE, packed state with wrap counters) and starts them again from
    // there (SET_VRING_BASE); traffic resumes.
    let rebind = format!(
        "cd /sys/bus/virtio/drivers/virtio_net && d=$(ls -d virtio* | head -n 1) && \
         echo $d > unbind && echo $d > bind && sleep 1 && ip link set eth0 up && \
         ip addr add {}/24 dev eth0",
        vm_lab::vm_ip4(1)
    );
    vm1.run_ok(&rebind, SHORT)
        .unwrap_or_else(|e| panic!("{e:#}"));
    pings(vm1, &vm_lab::vm_ip4(2));
    pings(vm2, &vm_lab::vm_ip4(1));
    // TCP from vm2 to vm1: TSO super-packets over merged receive buffers in packed rings.
    let tcp =
        vm_lab::iperf3(vm2, vm1, &vm_lab::vm_ip4(1), "", 2).unwrap_or_else(|e| panic!("{e:#}"));
    let bits = tcp["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    println!("iperf3 TCP vm2 -> vm1: {:.1} Mbit/s", bits / 1e6);
    assert!(bits > 0.0, "{tcp}");
    vp.assert_running();
    let vm2_port = vp.port("vm2");
    assert!(
        counter(&vm2_port["driver_counters"], "rx_super_packets") > 0,
        "{vm2_port}"
    );
    for name in vm_lab::VM_BRIDGE_PORTS {
        let p = vp.port(name);
        let state = p["driver_state"].as_str().unwrap_or_default();
        assert!(state.contains("rings: packed ("), "{p}");
        assert_eq!(counter(&p, "rx_drops"), 0, "{p}");
        assert_eq!(p["driver_counters"]["guest_errors"], 0, "{p}");
        assert!(counter(&p, "rx_packets") >= 6, "{p}");
        assert!(counter(&p, "tx_packets") >= 6, "{p}");
    }
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    drop(g);
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
            queues: 1,
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

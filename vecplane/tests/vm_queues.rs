//! vhost-user ports with DPDK's virtio-user as the guest (needs root and `dpdk-testpmd`; each
//! test prints `skipped: <why>` and returns otherwise, and fails under CI=true). The tests with
//! QEMU guests are in tests/vm_ports.rs.
//!
//! * two queue pairs per port are run by their own workers, and a pair moved to the other
//!   worker by `rxq move` is taken up there;
//! * when every pair is piled on one worker, the rebalancer moves work back while the traffic
//!   goes on;
//! * packed virtqueues: virtio-user with `packed_vq=1` on two cross-connected ports passes
//!   traffic both ways over packed rings (`show` says so, no guest error), then again after it
//!   reconnects with two queue pairs, and a split-ring frontend on the same ports after that.
//!
//! Every wait is bounded; testpmd, the daemon, the sockets and the scratch directory are
//! deleted on drop, also when a test fails.

#[macro_use]
#[path = "support/root.rs"]
mod root;
#[path = "support/vm_daemon.rs"]
mod vm_daemon;

use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use vm_daemon::*;

static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn queue_pairs_are_run_by_their_own_workers() {
    let testpmd = bench::testpmd::DEFAULT_PATH;
    require_root!(SERIAL, &[testpmd]);
    let start = Instant::now();
    // Two ports of two queue pairs each, cross-connected, on two workers: pair 0 on worker
    // 0, pair 1 on worker 1. DPDK's virtio-user (two queues, io forwarding with bursts in
    // flight) is the guest, as in `vecplane bench --scenario pvp`.
    // Placement by hand only (the rebalancer's own test is below).
    let mut vp = Daemon::start(&cross_connected_pairs("rxq-rebalance-seconds = 0\n"));
    let mut guest = virtio_user(&vp, testpmd, false, 2);
    // Every receive node of every pair moves packets, each on its own worker.
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
    // Move vu0's pair 1 to worker 0 by hand while the loop runs: worker 1 lets go of it and
    // worker 0 takes it up where it stopped. (Worker 0 sends into pair 0, so the frames
    // circling through pair 1 join pair 0's loop: the loop goes on there.)
    let before_move = vp.ctl_json(&["show", "runtime"]);
    let out = vp.ctl_ok(&["rxq", "move", "vu0", "1", "0"]);
    assert!(out.contains("moved from worker 1 to worker 0"), "{out}");
    let rxq = vp.ctl_json(&["show", "rxq"]);
    assert!(
        rxq["placement"]["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|q| q["port"] == "vu0" && q["pair"] == 1 && q["worker"] == 0),
        "{rxq}"
    );
    let at_move = vp.ctl_json(&["show", "runtime"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rt = vp.ctl_json(&["show", "runtime"]);
        let taken_up =
            node_packets(&rt, 0, "vu0-rx-q1") > node_packets(&before_move, 0, "vu0-rx-q1");
        let flowing =
            node_packets(&rt, 0, "vu0-rx-q0") > node_packets(&at_move, 0, "vu0-rx-q0") + 10_000;
        if taken_up && flowing {
            assert_eq!(
                node_packets(&rt, 1, "vu0-rx-q1"),
                node_packets(&at_move, 1, "vu0-rx-q1"),
                "worker 1 no longer receives from pair 1: {rt}"
            );
            break;
        }
        assert!(!guest.exited(), "testpmd exited:\n{}", vp.log());
        assert!(
            Instant::now() < deadline,
            "worker 0 did not take up vu0's pair 1 within 30 s: {rt}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("{}", vp.ctl_ok(&["show", "rxq"]));
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

#[test]
fn the_rebalancer_spreads_pairs_piled_on_one_worker() {
    let testpmd = bench::testpmd::DEFAULT_PATH;
    require_root!(SERIAL, &[testpmd]);
    let start = Instant::now();
    // The rebalancer looks every second and acts on any load (the default waits for 95%).
    let mut vp = Daemon::start(&cross_connected_pairs(
        "rxq-rebalance-seconds = 1\nrxq-rebalance-busy-percent = 1\n",
    ));
    let mut guest = virtio_user(&vp, testpmd, false, 2);
    let rx = |vp: &Daemon| {
        counter(&vp.port("vu0"), "rx_packets") + counter(&vp.port("vu1"), "rx_packets")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while rx(&vp) < 20_000 {
        assert!(!guest.exited(), "testpmd exited:\n{}", vp.log());
        assert!(
            Instant::now() < deadline,
            "no traffic within 30 s:\n{}",
            vp.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Pile every pair on worker 0 by hand; the rebalancer then moves work back to worker 1.
    for port in ["vu0", "vu1"] {
        vp.ctl_ok(&["rxq", "move", port, "1", "0"]);
    }
    let piled = vp.log().len();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = vp.log();
        if log
            .get(piled..)
            .is_some_and(|l| l.contains("moves from worker 0 to worker 1"))
        {
            break;
        }
        assert!(!guest.exited(), "testpmd exited:\n{log}");
        assert!(
            Instant::now() < deadline,
            "the rebalancer left every pair on worker 0 for 20 s: {}\n{log}",
            vp.ctl_ok(&["show", "rxq"])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let rxq = vp.ctl_json(&["show", "rxq"]);
    println!("{}", vp.ctl_ok(&["show", "rxq"]));
    assert!(
        rxq["placement"]["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|q| q["worker"] == 1),
        "{rxq}"
    );
    // Traffic goes on after the moves.
    let after = rx(&vp);
    let deadline = Instant::now() + Duration::from_secs(20);
    while rx(&vp) < after + 10_000 {
        assert!(
            Instant::now() < deadline,
            "traffic stopped after the moves:\n{}",
            vp.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    vp.assert_running();
    drop(guest);
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

/// vecplane's config for `virtio_user`: ports `vu0` and `vu1` of two queue pairs each,
/// cross-connected, on two workers (pair k on worker k), with `dataplane` (lines) added.
fn cross_connected_pairs(dataplane: &str) -> String {
    let mut config = format!("[dataplane]\nworkers = 2\n{dataplane}\n");
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
    config
}

/// DPDK's virtio-user (io forwarding, a burst in flight) on vecplane's ports `vu0` and `vu1`,
/// with packed rings or split ones, `queues` queue pairs each.
fn virtio_user(vp: &Daemon, testpmd: &str, packed: bool, queues: usize) -> bench::testpmd::Guard {
    let (s0, s1) = (vp.sock("vu0"), vp.sock("vu1"));
    bench::testpmd::spawn(Path::new(testpmd), Stdio::piped(), |prefix| {
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
            a.push(format!(
                "net_virtio_user{i},path={},queues={queues},packed_vq={}",
                s.display(),
                u8::from(packed)
            ));
        }
        a.push("--".into());
        a.push(format!("--rxq={queues}"));
        a.push(format!("--txq={queues}"));
        a.extend(
            [
                "--nb-cores=1",
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
    .unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn packed_rings_carry_virtio_user_traffic_both_ways() {
    let testpmd = bench::testpmd::DEFAULT_PATH;
    require_root!(SERIAL, &[testpmd]);
    let start = Instant::now();
    // Two queue pairs per port, pair k on worker k; frontends use one or both.
    let mut vp = Daemon::start(&cross_connected_pairs(""));
    // Packed, packed with both queue pairs after a reconnect, then split on the same ports.
    for (round, (packed, queues)) in [(true, 1), (true, 2), (false, 1)].into_iter().enumerate() {
        let rx = |name: &str| counter(&vp.port(name), "rx_packets");
        let before = (rx("vu0"), rx("vu1"));
        let mut guest = virtio_user(&vp, testpmd, packed, queues);
        let deadline = Instant::now() + Duration::from_secs(30);
        let layout = if packed { "packed" } else { "split" };
        // Both ports receive from the guest and send to it: traffic both ways.
        loop {
            let (a, b) = (rx("vu0") - before.0, rx("vu1") - before.1);
            // With two pairs, each pair's receive node (on its own worker) moves packets too.
            let pairs_busy = queues == 1 || {
                let rt = vp.ctl_json(&["show", "runtime"]);
                (0..2).all(|w| {
                    rt["workers"][w]["nodes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|n| n["name"] == format!("vu0-rx-q{w}"))
                        .any(|n| n["packets"].as_u64().unwrap_or(0) > 1000)
                })
            };
            if a > 10_000 && b > 10_000 && pairs_busy {
                println!("round {round} ({layout}, queue pairs: {queues}): vu0 rx {a}, vu1 rx {b}");
                break;
            }
            assert!(!guest.exited(), "testpmd exited:\n{}", vp.log());
            assert!(
                Instant::now() < deadline,
                "round {round} ({layout}): not both ways within 30 s: vu0 rx {a}, vu1 rx {b}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        for name in ["vu0", "vu1"] {
            let p = vp.port(name);
            let state = p["driver_state"].as_str().unwrap_or_default();
            let rings = if queues == 2 {
                "rx0 256, tx0 256, rx1 256, tx1 256"
            } else {
                "rx0 256, tx0 256"
            };
            assert!(state.contains(&format!("rings: {layout} ({rings})")), "{p}");
            assert_eq!(p["driver_counters"]["guest_errors"], 0, "{p}");
            assert!(counter(&p, "tx_packets") > 10_000, "{p}");
        }
        drop(guest);
        // The ports go back to waiting before the next frontend comes.
        let deadline = Instant::now() + Duration::from_secs(10);
        while ["vu0", "vu1"].iter().any(|n| {
            vp.port(n)["driver_state"]
                .as_str()
                .unwrap_or_default()
                .starts_with("connected")
        }) {
            assert!(Instant::now() < deadline, "still connected: {}", vp.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    vp.assert_running();
    assert_eq!(vp.guest_errors(), Vec::<String>::new());
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

//! QEMU guests for real (needs `qemu-system-x86_64`, and the Debian packages the image is built
//! from: linux-image-amd64, busybox-static, iperf3; each test prints `skipped: <why>` and returns
//! otherwise, and fails in CI): the console harness (exit status, output, quoting, a command
//! interrupted at its deadline) on two guests joined by a QEMU socket netdev, which ping each
//! other over IPv4 and IPv6, and whose QEMU and scratch directories are gone after a drop; a
//! guest with a vhost-user NIC (QEMU as the socket's server) waits for a backend; a guest that
//! cannot boot in time reports its console; two guests on TAP ports of a Linux bridge in a
//! namespace of their own (root only) ping, negotiate TSO, and are cut off when a TAP moves to
//! another bridge, and the namespace is gone after a drop. Tests run one at a time (the machine
//! may have two cores); every wait is bounded.
//!
//! The rest of what guests do is tested with vecplane, in vecplane/tests/vm_ports.rs (VNF
//! guests, restarts on the same vhost-user socket, iperf3 UDP) and by `vecplane demo --vms` in
//! vecplane/tests/demo.rs (iperf3 TCP), so that no guest boots twice for the same check.

use netlab::{free_port, guest_mac, Guest, GuestImage, GuestSpec, NicSpec};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const SHORT: Duration = Duration::from_secs(30);

/// The guest image, or `None` after reporting why guests cannot run here.
fn image() -> Option<GuestImage> {
    GuestImage::for_tests()
}

/// A directory of the test's own (the vhost-user socket's), deleted on drop, also on a panic.
struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    fn new(tag: &str) -> ScratchDir {
        let d = std::env::temp_dir().join(format!("netlab-guest-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        ScratchDir(d)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Start `specs` in order, each once the previous one's QEMU is up (so socket netdevs listen
/// before their peers connect), and wait for all to be ready.
fn boot(image: &GuestImage, specs: Vec<GuestSpec>) -> Vec<Guest> {
    Guest::boot_all(image, specs).unwrap_or_else(|e| panic!("{e:#}"))
}

fn pings(g: &mut Guest, to: &str) {
    g.pings(to, SHORT).unwrap_or_else(|e| panic!("{e:#}"));
}

#[test]
fn two_guests_run_commands_and_ping_over_a_socket_netdev() {
    let Some(image) = image() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let port = free_port().expect("a free port");
    let mut g = boot(
        &image,
        vec![
            GuestSpec::new("g1")
                .nic(NicSpec::SocketListen {
                    port,
                    mac: guest_mac(1, 0),
                })
                .addresses("198.18.5.1/24", "2001:db8:5::1/64"),
            GuestSpec::new("g2")
                .nic(NicSpec::SocketConnect {
                    port,
                    mac: guest_mac(2, 0),
                })
                .addresses("198.18.5.2/24", "2001:db8:5::2/64"),
        ],
    );
    let (a, b) = g.split_at_mut(1);
    let (g1, g2) = (&mut a[0], &mut b[0]);

    // The harness itself: exit status, output, quoting.
    assert_eq!(g1.run("hostname", SHORT).expect("runs"), (0, "g1\n".into()));
    let (status, out) = g1
        .run("echo 'it''s' \"$((6*7))\"; false", SHORT)
        .expect("runs");
    assert_eq!((status, out.as_str()), (1, "its 42\n"));
    assert_eq!(
        g2.run("exit_status_test() { return 3; }; exit_status_test", SHORT)
            .expect("runs")
            .0,
        3
    );
    let e = g1
        .run("sleep 20", Duration::from_secs(1))
        .expect_err("times out");
    assert!(format!("{e:#}").contains("did not finish"), "{e:#}");
    // Interrupted: the shell answers again.
    assert_eq!(g1.run_ok("echo back", SHORT).expect("runs"), "back\n");

    pings(g1, "198.18.5.2");
    pings(g2, "2001:db8:5::1");
    println!("test time {:.1} s", start.elapsed().as_secs_f64());

    let pids: Vec<u32> = g.iter().filter_map(Guest::pid).collect();
    let dirs: Vec<_> = g.iter().map(|x| x.dir().to_path_buf()).collect();
    drop(g);
    for p in pids {
        assert!(!pid_alive(p), "QEMU {p} still runs");
    }
    for d in dirs {
        assert!(!d.exists(), "{} still exists", d.display());
    }
}

/// Without a backend QEMU 7.2 listens on the vhost-user socket but does not start the guest.
/// (A new guest taking over the socket path after a kill is vm_ports.rs's restart of vm2.)
#[test]
fn a_vhost_user_guest_waits_for_its_backend() {
    let Some(image) = image() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = ScratchDir::new("vu");
    let socket = dir.0.join("vu0.sock");
    let mut spec = GuestSpec::new("vu")
        .nic(NicSpec::VhostUser {
            socket: socket.clone(),
            server: true,
            mac: guest_mac(4, 0),
            queues: 1,
        })
        .addresses("198.18.7.1/24", "2001:db8:7::1/64");
    spec.boot_timeout = Duration::from_secs(3);
    let mut g = Guest::spawn(&image, spec).unwrap_or_else(|e| panic!("{e:#}"));
    let e = format!("{:#}", g.wait_ready().expect_err("no backend, no boot"));
    assert!(e.contains("waiting for connection"), "{e}");
    assert!(socket.exists(), "QEMU did not create {}", socket.display());
    let pid = g.pid().expect("running");
    g.kill().expect("kill");
    assert!(!pid_alive(pid), "QEMU {pid} still runs");
}

#[test]
fn a_guest_that_cannot_boot_reports_its_console() {
    let Some(image) = image() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut spec = GuestSpec::new("slow");
    spec.boot_timeout = Duration::from_millis(300);
    let e = Guest::start(&image, spec)
        .err()
        .expect("cannot boot in 0.3 s");
    let e = format!("{e:#}");
    assert!(
        e.contains("did not print VP-READY") && e.contains("console of slow"),
        "{e}"
    );
}

#[test]
fn guests_on_tap_ports_of_a_linux_bridge_in_a_namespace_ping_and_are_cut_off_by_a_move() {
    let root = (!netlab::cmd::is_root()).then(|| "needs root (a namespace, TAPs)".to_string());
    if !testenv::can_run(root) {
        return;
    }
    let Some(image) = image() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let start = Instant::now();
    let mut lab = netlab::TapBridges::create().expect("namespace");
    let ns = lab.namespace().to_string();
    let (br0, br1) = (
        lab.add_bridge().expect("bridge"),
        lab.add_bridge().expect("bridge"),
    );
    let taps = [
        lab.add_tap(Some(&br0)).expect("tap"),
        lab.add_tap(Some(&br0)).expect("tap"),
    ];
    let spec = |i: u8, tap: &str| {
        lab.guest(
            GuestSpec::new(&format!("tap{i}"))
                .nic(lab.nic(tap, guest_mac(20 + i, 0)))
                .addresses(&format!("198.18.8.{i}/24"), &format!("2001:db8:8::{i}/64")),
        )
    };
    let mut g = boot(&image, vec![spec(1, &taps[0]), spec(2, &taps[1])]);
    pings(&mut g[0], "198.18.8.2");
    pings(&mut g[1], "2001:db8:8::1");
    // QEMU's tap backend negotiated TSO with the TAP (bit 11: HOST_TSO4).
    let features = g[0]
        .run_ok("cat /sys/class/net/eth0/device/features", SHORT)
        .expect("features");
    assert_eq!(
        features.trim().as_bytes().get(11),
        Some(&b'1'),
        "{features}"
    );
    // On another bridge, guest 2 is out of reach.
    lab.attach(&taps[1], Some(&br1)).expect("move");
    let (status, _) = g[0]
        .run("ping -c 1 -w 2 198.18.8.2", SHORT)
        .expect("ping runs");
    assert_ne!(status, 0, "reached a guest on another bridge");
    let pids: Vec<u32> = g.iter().filter_map(Guest::pid).collect();
    drop(g);
    lab.delete().expect("delete");
    assert!(!netlab::namespace_exists(&ns), "{ns} is still there");
    for pid in pids {
        assert!(!pid_alive(pid), "QEMU {pid} still runs");
    }
    println!("test time {:.1} s", start.elapsed().as_secs_f64());
}

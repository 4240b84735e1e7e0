//! netlab topologies for real (needs root, `ip`, `ethtool` and `ping`; each test prints
//! `skipped: <why>` and returns otherwise): the kernel router and the Linux bridge carry IPv4 and
//! IPv6 pings from A to B, the data plane mode leaves Ra/Rb bare, and nothing is left behind
//! after a drop, a panic or a SIGTERM (a child copy of this test binary is killed). Tests run one
//! at a time; traffic is a few bounded pings to hosts the test created.

use netlab::{addr, Addressing, Host, Mode, Topology};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const PREFIX: &str = "vnlt";

macro_rules! require_root {
    () => {
        if let Some(why) = netlab::missing_prerequisite(&["ip", "ethtool", "ping"]) {
            testenv::skip(&why);
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

fn ping(t: &Topology, from: Host, to: &str) -> bool {
    let out = t
        .exec_timeout(
            from,
            &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-w", "5", to],
            Duration::from_secs(20),
        )
        .expect("ping runs");
    if !out.status.success() {
        println!(
            "ping {to} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// Namespaces, links and the scratch directory of `names` that still exist.
fn remains(names: &netlab::Names) -> Vec<String> {
    let mut left: Vec<String> = names
        .namespaces()
        .iter()
        .filter(|ns| netlab::namespace_exists(ns))
        .map(|ns| format!("namespace {ns}"))
        .collect();
    let links = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for i in names.interfaces() {
        if links.contains(&format!(": {i}:")) || links.contains(&format!(": {i}@")) {
            left.push(format!("link {i}"));
        }
    }
    if names.dir.exists() {
        left.push(format!("directory {}", names.dir.display()));
    }
    left
}

#[test]
fn kernel_router_forwards_ipv4_and_ipv6_from_a_to_b() {
    require_root!();
    let t = Topology::build_with_prefix(PREFIX, Mode::KernelRouter).expect("topology");
    let before = t.link_stats(Host::B, &t.names().b0).expect("counters");
    assert!(ping(&t, Host::A, &t.b_ip4().to_string()), "IPv4 A -> B");
    assert!(ping(&t, Host::A, &t.b_ip6().to_string()), "IPv6 A -> B");
    let after = t.link_stats(Host::B, &t.names().b0).expect("counters");
    assert!(
        after.rx_packets >= before.rx_packets + 6,
        "{before:?} {after:?}"
    );
    let names = t.names().clone();
    t.delete().expect("deleted");
    assert_eq!(remains(&names), Vec::<String>::new());
}

#[test]
fn kernel_bridge_joins_a_and_b_on_one_subnet() {
    require_root!();
    let t = Topology::build_with_prefix(PREFIX, Mode::KernelBridge).expect("topology");
    assert_eq!(t.b_ip4(), addr::B4_BRIDGED);
    assert!(ping(&t, Host::A, &t.b_ip4().to_string()), "IPv4 A -> B");
    assert!(ping(&t, Host::A, &t.b_ip6().to_string()), "IPv6 A -> B");
    let links = t
        .exec_ok(
            Host::R,
            &["ip", "-o", "link", "show", "master", &t.names().br],
        )
        .expect("bridge ports");
    assert!(
        links.contains(&t.names().ra) && links.contains(&t.names().rb),
        "{links}"
    );
}

#[test]
fn dataplane_mode_leaves_ra_and_rb_to_the_data_plane() {
    require_root!();
    let t =
        Topology::build_with_prefix(PREFIX, Mode::Dataplane(Addressing::Routed)).expect("topology");
    let n = t.names().clone();
    let addrs = t
        .exec_ok(Host::R, &["ip", "-o", "addr", "show", "dev", &n.ra])
        .expect("addresses");
    assert!(addrs.trim().is_empty(), "Ra has addresses: {addrs}");
    let link = t
        .exec_ok(Host::R, &["ip", "-o", "link", "show", "dev", &n.rb])
        .expect("link");
    assert!(link.contains("UP"), "{link}");
    assert!(link.contains(addr::MAC_RB), "{link}");
    let routes = t
        .exec_ok(Host::A, &["ip", "-6", "route", "show", "default"])
        .expect("routes");
    assert!(routes.contains(&addr::RA6.to_string()), "{routes}");
    let neigh = t
        .exec_ok(Host::B, &["ip", "neigh", "show", &addr::RB4.to_string()])
        .expect("neighbours");
    assert!(
        neigh.contains(addr::MAC_RB) && neigh.contains("PERMANENT"),
        "{neigh}"
    );
    // Nothing forwards yet: the kernel in R has no addresses and no forwarding.
    assert!(!ping(&t, Host::A, &addr::B4.to_string()));
    // The address of A is usable at once (no DAD).
    let a6 = t
        .exec_ok(Host::A, &["ip", "-6", "-o", "addr", "show", "dev", &n.a0])
        .expect("addresses");
    assert!(!a6.contains("tentative"), "{a6}");
}

#[test]
fn two_topologies_coexist_with_distinct_names() {
    require_root!();
    let t1 = Topology::build_with_prefix(PREFIX, Mode::KernelRouter).expect("first");
    let t2 = Topology::build_with_prefix(PREFIX, Mode::KernelRouter).expect("second");
    assert_ne!(t1.names().ns_r, t2.names().ns_r);
    assert_ne!(t1.names().ra, t2.names().ra);
    assert!(ping(&t2, Host::A, &t2.b_ip4().to_string()));
    assert!(ping(&t1, Host::A, &t1.b_ip4().to_string()));
}

#[test]
fn drop_deletes_everything_also_after_a_panic_and_with_processes_inside() {
    require_root!();
    let mut names = None;
    let mut pid = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let t = Topology::build_with_prefix(PREFIX, Mode::KernelBridge).expect("topology");
        names = Some(t.names().clone());
        // A process the test "forgets" to stop: deleting the namespace must end it.
        let child = t
            .spawn(Host::B, &["sleep", "600"], "sleeper")
            .expect("spawn");
        pid = child.id();
        std::mem::forget(child);
        panic!("deliberate panic with a live topology");
    }));
    assert!(r.is_err());
    let names = names.expect("the topology was built");
    assert_eq!(remains(&names), Vec::<String>::new());
    // The forgotten child is gone (a zombie at most, since it is ours and never reaped).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = state
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next())
        .is_some_and(|s| s != "Z");
    assert!(!alive, "pid {pid} still runs: {state}");
    // SAFETY: reaping our own child (the forgotten `sleep`) by its id.
    unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
}

/// Builds a topology and waits to be killed; run only as the child of the SIGTERM test.
#[test]
#[ignore = "helper of sigterm_in_another_process_deletes_its_topology"]
fn child_holds_a_topology_until_killed() {
    if std::env::var_os("NETLAB_TEST_CHILD").is_none() {
        return;
    }
    let t = Topology::build_with_prefix(PREFIX, Mode::KernelRouter).expect("topology");
    let _sleeper = t.spawn(Host::A, &["sleep", "600"], "sleeper");
    println!("READY {} {}", t.names().ns_r, t.names().ra);
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn sigterm_in_another_process_deletes_its_topology() {
    require_root!();
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_holds_a_topology_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("NETLAB_TEST_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child test");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " before the test's own output on the same line.
            if let Some(at) = line.find("READY ") {
                let _ = tx.send(line[at + "READY ".len()..].to_string());
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(60));
    let Ok(ready) = ready else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child never built its topology");
    };
    let mut parts = ready.split_whitespace();
    let (ns_r, ra) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    assert!(netlab::namespace_exists(&ns_r));
    // SAFETY: signalling our own child by its id; it has not been reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(!netlab::namespace_exists(&ns_r), "{ns_r} left behind");
    let links = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&ra));
    let left: Vec<String> = ["a", "b"]
        .iter()
        .map(|r| format!("{}{r}", ns_r.trim_end_matches('r')))
        .filter(|ns| netlab::namespace_exists(ns))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn processes_entering_as_the_topology_goes_are_ended_too() {
    require_root!();
    let t = Topology::build_with_prefix(PREFIX, Mode::KernelRouter).expect("topology");
    let names = t.names().clone();
    let mut pids = Vec::new();
    for host in [Host::A, Host::R, Host::B] {
        // Started and left running, some still on their way into the namespace.
        let child = t.spawn(host, &["sleep", "600"], "late").expect("spawn");
        pids.push(child.id());
        std::mem::forget(child);
    }
    t.delete().expect("deleted");
    assert_eq!(remains(&names), Vec::<String>::new());
    for pid in pids {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next())
            .is_some_and(|s| s != "Z");
        assert!(!running, "pid {pid} still runs: {state}");
        // SAFETY: reaping our own forgotten child by its id.
        unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
    }
}

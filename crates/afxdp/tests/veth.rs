//! End-to-end tests of the AF_XDP port on veth pairs and network namespaces. They need root:
//! without it each test prints why it is skipped and passes (in CI it fails). Topology:
//!
//! ```text
//! ns A (198.18.1.2/24) a0 ==veth== a1  [vecplane, this process's namespace]  b1 ==veth== b0 (198.18.2.2/24) ns B
//! ```
//!
//! vecplane cross-connects a1 and b1 at L2 (rewriting both MACs), so ARP, ping and UDP pass.
//! Every namespace and link has a unique name (`vpxdp-<pid>-<n>...`, `vxd<pid>x<n>..`), is removed
//! by a guard on every path, and leftovers of dead test processes are removed at start. The
//! tests run one at a time (they share two CPUs and the kernel).

use afxdp::program::{self, XskProgram};
use afxdp::{AfXdpConfig, AfXdpError, AfXdpPort, AfXdpRx, AfXdpTx, ModeChoice, Umem, XdpMode};
use graph::{Dispatch, GraphBuilder, Node, NodeContext, PortStats};
use packet::{BufferPool, PoolConfig};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());
static COUNTER: AtomicUsize = AtomicUsize::new(0);
const NS_PREFIX: &str = "vpxdp-";
const LINK_PREFIX: &str = "vxd";
const CHILD_ENV: &str = "VECPLANE_AFXDP_CRASH_CHILD";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Take the serial lock, or `None` (with a message) when the test cannot run here.
fn begin(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !is_root() {
        testenv::skip(&format!(
            "{test}: needs root (network namespaces, veth, XDP, AF_XDP)"
        ));
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    remove_leftovers();
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

fn must(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

fn pid_alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Namespaces and links of earlier test processes that died without cleaning up.
fn remove_leftovers() {
    let me = std::process::id().to_string();
    if let Ok(list) = run(&["ip", "netns", "list"]) {
        for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if let Some(rest) = ns.strip_prefix(NS_PREFIX) {
                let pid = rest.split('-').next().unwrap_or("");
                if pid != me && !pid_alive(pid) {
                    let _ = run(&["ip", "netns", "del", ns]);
                }
            }
        }
    }
    if let Ok(list) = run(&["ip", "-o", "link", "show"]) {
        for name in list
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n))
        {
            // Only names of the exact form LINK_PREFIX<hex pid>x<hex counter><a0|a1|b0|b1|d>.
            if let Some(rest) = name.strip_prefix(LINK_PREFIX) {
                let mut parts = rest.splitn(2, 'x');
                let pid_hex = parts.next().unwrap_or("");
                let tail = parts.next().unwrap_or("");
                let ours = ["a0", "a1", "b0", "b1", "d"]
                    .iter()
                    .find_map(|sfx| tail.strip_suffix(sfx))
                    .is_some_and(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_hexdigit()));
                if let (true, Ok(pid)) = (ours, u32::from_str_radix(pid_hex, 16)) {
                    if pid.to_string() != me && !pid_alive(&pid.to_string()) {
                        let _ = run(&["ip", "link", "del", name]);
                    }
                }
            }
        }
    }
}

/// Two namespaces and two veth pairs; removed on drop.
struct Topo {
    ns_a: String,
    ns_b: String,
    a0: String,
    a1: String,
    b0: String,
    b1: String,
}

fn unique() -> (String, String) {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    (
        format!("{NS_PREFIX}{pid}-{n}"),
        format!("{LINK_PREFIX}{pid:x}x{n:x}"), // <= 3 + 6 + 1 + 2, plus a 2-char suffix: <= 14
    )
}

impl Topo {
    fn new(queues: u32) -> Topo {
        let (ns, link) = unique();
        let t = Topo {
            ns_a: format!("{ns}-a"),
            ns_b: format!("{ns}-b"),
            a0: format!("{link}a0"),
            a1: format!("{link}a1"),
            b0: format!("{link}b0"),
            b1: format!("{link}b1"),
        };
        let q = queues.to_string();
        for (ns, outer, inner, addr, peer_net) in [
            (&t.ns_a, &t.a1, &t.a0, "198.18.1.2/24", "198.18.2.0/24"),
            (&t.ns_b, &t.b1, &t.b0, "198.18.2.2/24", "198.18.1.0/24"),
        ] {
            must(&["ip", "netns", "add", ns]);
            must(&[
                "ip",
                "link",
                "add",
                outer,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                inner,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                ns,
            ]);
            let _ = run(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{outer}.disable_ipv6=1"),
            ]);
            must(&["ip", "link", "set", outer, "up"]);
            let _ = run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ]);
            must(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            must(&["ip", "-n", ns, "addr", "add", addr, "dev", inner]);
            must(&["ip", "-n", ns, "link", "set", inner, "up"]);
            must(&["ip", "-n", ns, "route", "add", peer_net, "dev", inner]);
            // The namespace end receives from an AF_XDP socket's sendto: give it NAPI.
            let _ = run(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", inner, "gro", "on",
            ]);
        }
        t
    }

    fn mac(&self, ns: Option<&str>, ifname: &str) -> [u8; 6] {
        let path = format!("/sys/class/net/{ifname}/address");
        let text = match ns {
            Some(ns) => must(&["ip", "netns", "exec", ns, "cat", &path]),
            None => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        };
        let mut mac = [0u8; 6];
        for (dst, part) in mac.iter_mut().zip(text.trim().split(':')) {
            *dst = u8::from_str_radix(part, 16).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        mac
    }

    fn counter(&self, ns: &str, ifname: &str, which: &str) -> u64 {
        must(&[
            "ip",
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{ifname}/statistics/{which}"),
        ])
        .trim()
        .parse()
        .unwrap_or(0)
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
        for l in [&self.a1, &self.b1] {
            let _ = run(&["ip", "link", "del", l]);
        }
    }
}

/// An ifb interface (its driver has no native XDP); removed on drop.
struct Dummy(String);

impl Dummy {
    fn new() -> Dummy {
        let (_, link) = unique();
        let name = format!("{link}d");
        must(&["ip", "link", "add", &name, "type", "ifb"]);
        must(&["ip", "link", "set", &name, "up"]);
        Dummy(name)
    }
}

impl Drop for Dummy {
    fn drop(&mut self) {
        let _ = run(&["ip", "link", "del", &self.0]);
    }
}

/// What `ip -d link show dev X` says about XDP: the words after "prog/xdp" or an "xdp*" flag.
fn ip_xdp(ifname: &str) -> Option<String> {
    let text = must(&["ip", "-d", "link", "show", "dev", ifname]);
    let first = text.lines().next().unwrap_or("");
    let flagged = first
        .split_whitespace()
        .any(|w| w == "xdp" || w == "xdpgeneric" || w == "xdpdrv" || w == "xdpoffload");
    let prog = text.lines().find(|l| l.contains("prog/xdp"));
    (flagged || prog.is_some()).then(|| {
        prog.map(|l| l.trim().to_string())
            .unwrap_or_else(|| first.to_string())
    })
}

fn pool() -> BufferPool {
    BufferPool::new(PoolConfig::default()).expect("buffer pool")
}

/// L2 cross-connect for the test: a packet from port `p` leaves on port `p ^ 1`, with the
/// source MAC of that port and the destination MAC of the far namespace's interface.
struct Cross {
    nexts: Vec<String>,
    /// (source, destination) MAC per receiving port.
    macs: Vec<([u8; 6], [u8; 6])>,
}

impl Node for Cross {
    fn name(&self) -> &str {
        "cross"
    }
    fn next_nodes(&self) -> Vec<String> {
        self.nexts.clone()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        for (i, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet_mut(b);
            let p = (meta.rx_port as usize).min(1);
            if data.len() >= 12 {
                data[0..6].copy_from_slice(&self.macs[p].1);
                data[6..12].copy_from_slice(&self.macs[p].0);
            }
            meta.tx_port = (p ^ 1) as u16;
            nexts[i] = p as u16;
        }
        Dispatch::PerPacket
    }
}

struct Forwarder {
    graph: graph::Graph,
    pool: BufferPool,
    a_stats: Vec<Arc<PortStats>>,
    b_stats: Vec<Arc<PortStats>>,
    handles: Vec<afxdp::AfXdpHandle>,
}

/// a1 <-> b1 through `Cross`, receiving on `queues` queues of each, sending on queue 0.
fn forwarder(t: &Topo, queues: u32, tsc_hz: u64) -> Forwarder {
    let mut pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let mut b = GraphBuilder::new();
    let (mut a_stats, mut b_stats, mut handles) = (Vec::new(), Vec::new(), Vec::new());
    let mut rxs: Vec<AfXdpRx> = Vec::new();
    let mut txs: Vec<AfXdpTx> = Vec::new();
    for (port_id, ifname) in [(0u16, &t.a1), (1u16, &t.b1)] {
        for q in 0..queues {
            let stats = Arc::new(PortStats::default());
            let port = AfXdpPort::open(&umem, &AfXdpConfig::new(ifname, q, port_id), stats.clone())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(port.mode(), "native", "veth has native XDP");
            assert!(!port.zerocopy(), "veth runs AF_XDP in copy mode");
            println!(
                "opened {ifname} queue {q}: {} mode, program id {}, UMEM {}",
                port.mode(),
                port.program_id(),
                if port.umem_shared() {
                    "shared (XDP_SHARED_UMEM)"
                } else {
                    "registered"
                }
            );
            handles.push(port.handle());
            let (mut rx, tx) = port.into_nodes(
                format!("{ifname}-q{q}-rx"),
                "cross",
                format!("{ifname}-q{q}-tx"),
            );
            rx.refill(&mut pool);
            rxs.push(rx);
            if q == 0 {
                txs.push(tx);
            }
            if port_id == 0 {
                a_stats.push(stats);
            } else {
                b_stats.push(stats);
            }
        }
    }
    for rx in rxs {
        b.add_input(Box::new(rx));
    }
    for tx in txs {
        b.add_node(Box::new(tx));
    }
    let (ma1, mb1) = (t.mac(None, &t.a1), t.mac(None, &t.b1));
    let (ma0, mb0) = (t.mac(Some(&t.ns_a), &t.a0), t.mac(Some(&t.ns_b), &t.b0));
    b.add_node(Box::new(Cross {
        nexts: vec![format!("{}-q0-tx", t.b1), format!("{}-q0-tx", t.a1)],
        macs: vec![(mb1, mb0), (ma1, ma0)],
    }));
    Forwarder {
        graph: b.build(0, tsc_hz).expect("graph"),
        pool,
        a_stats,
        b_stats,
        handles,
    }
}

/// Run the worker loop on its own thread until `stop` or `limit`.
fn spawn_worker(
    mut f: Forwarder,
    stop: Arc<AtomicBool>,
    limit: Duration,
    cpu: Option<usize>,
) -> std::thread::JoinHandle<(Forwarder, u64, Duration)> {
    std::thread::spawn(move || {
        if let Some(cpu) = cpu {
            if let Ok(me) = std::fs::read_link("/proc/thread-self") {
                if let Some(tid) = me.file_name().and_then(|s| s.to_str()) {
                    let _ = run(&["taskset", "-pc", &cpu.to_string(), tid]);
                }
            }
        }
        let t0 = Instant::now();
        let c0 = graph::rdtsc();
        while !stop.load(Ordering::Relaxed) && t0.elapsed() < limit {
            for _ in 0..64 {
                f.graph.run_once(&mut f.pool);
            }
        }
        (f, graph::rdtsc() - c0, t0.elapsed())
    })
}

fn sum(stats: &[Arc<PortStats>], f: impl Fn(&PortStats) -> u64) -> u64 {
    stats.iter().map(|s| f(s)).sum()
}

fn f_stats_rx_drops(stats: &[Arc<PortStats>]) -> u64 {
    sum(stats, |s| s.rx_drops.get())
}

fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

#[test]
fn forwards_ping_and_a_udp_burst_between_namespaces() {
    let Some(_guard) = begin("forwards_ping_and_a_udp_burst_between_namespaces") else {
        return;
    };
    let t = Topo::new(2);
    let tsc_hz = graph::measure_tsc_hz(50);
    let f = forwarder(&t, 2, tsc_hz);
    assert!(ip_xdp(&t.a1).is_some_and(|s| s.contains("prog/xdp")));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = spawn_worker(f, stop.clone(), Duration::from_secs(60), None);

    let ping = run(&[
        "ip",
        "netns",
        "exec",
        &t.ns_a,
        "ping",
        "-c",
        "20",
        "-i",
        "0.05",
        "-W",
        "2",
        "198.18.2.2",
    ]);
    let b_rx0 = t.counter(&t.ns_b, &t.b0, "rx_packets");
    let burst = run(&[
        "ip",
        "netns",
        "exec",
        &t.ns_a,
        "timeout",
        "30",
        python(),
        "-c",
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         for i in range(10000): s.sendto(b'x'*18,('198.18.2.2',9000+i%16))",
    ]);
    // Let the last frames cross: until B's counter stands still for 300 ms (at most 15 s, a
    // bound against a hang; a loaded machine takes longer than a fixed pause allows).
    let mut b_rx = t.counter(&t.ns_b, &t.b0, "rx_packets") - b_rx0;
    let settle = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = t.counter(&t.ns_b, &t.b0, "rx_packets") - b_rx0;
        if now == b_rx || settle.elapsed() > Duration::from_secs(15) {
            break;
        }
        b_rx = now;
    }
    stop.store(true, Ordering::Relaxed);
    let (f, _, _) = worker.join().expect("worker");

    let ping = ping.unwrap_or_else(|e| panic!("ping through vecplane failed: {e}"));
    println!(
        "{}",
        ping.lines().rev().take(2).collect::<Vec<_>>().join(" | ")
    );
    assert!(
        ping.contains("20 packets transmitted, 20 received, 0% packet loss"),
        "{ping}"
    );
    burst.unwrap_or_else(|e| panic!("UDP sender: {e}"));
    let per_queue: Vec<u64> = f.a_stats.iter().map(|s| s.rx_packets.get()).collect();
    let stats = f.handles[0].statistics().expect("XDP_STATISTICS");
    println!(
        "UDP burst: 10000 sent in A, {b_rx} received on {} in B; a1 rx per queue {per_queue:?}, \
         rx_drops {}, tx_drops {}; b1 tx {}; a1 q0 kernel stats {stats:?}",
        t.b0,
        sum(&f.a_stats, |s| s.rx_drops.get()),
        sum(&f.b_stats, |s| s.tx_drops.get()),
        sum(&f.b_stats, |s| s.tx_packets.get()),
    );
    // On a busy shared machine the fill ring can run dry for a moment: what the port could not
    // take is counted (rx_drops), never lost silently, and everything it took went out.
    let a_rx = sum(&f.a_stats, |s| s.rx_packets.get());
    let a_dropped = sum(&f.a_stats, |s| s.rx_drops.get());
    assert!(
        b_rx + a_dropped >= 9_900,
        "only {b_rx} of 10000 UDP packets reached B ({a_dropped} counted as dropped on receive)"
    );
    let b_tx = sum(&f.b_stats, |s| s.tx_packets.get());
    let b_dropped = sum(&f.b_stats, |s| s.tx_drops.get());
    assert!(
        a_rx + a_dropped >= 10_000 + 20,
        "a1: {a_rx} rx + {a_dropped} drops"
    );
    assert!(
        b_tx + b_dropped >= a_rx,
        "b1: {b_tx} tx + {b_dropped} drops < {a_rx} received"
    );
    assert!(sum(&f.a_stats, |s| s.rx_bytes.get()) >= a_rx * 60);

    let names = [t.a1.clone(), t.b1.clone()];
    drop(f);
    for n in &names {
        assert_eq!(
            ip_xdp(n),
            None,
            "XDP program left on {n} after the ports closed"
        );
    }
}

#[test]
fn program_detaches_when_the_last_port_of_an_interface_is_dropped() {
    let Some(_guard) = begin("program_detaches_when_the_last_port_of_an_interface_is_dropped")
    else {
        return;
    };
    let t = Topo::new(2);
    let pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let stats = Arc::new(PortStats::default());
    let q0 = AfXdpPort::open(&umem, &AfXdpConfig::new(&t.a1, 0, 0), stats.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let q1 = AfXdpPort::open(&umem, &AfXdpConfig::new(&t.a1, 1, 0), stats.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        q0.program_id(),
        q1.program_id(),
        "one program per interface"
    );
    assert!(q1.umem_shared());
    let shown = ip_xdp(&t.a1).expect("ip shows the XDP program");
    println!("attached: {shown}");
    assert!(
        shown.contains(&format!("id {}", q0.program_id())),
        "{shown}"
    );
    let progs = program::xdp_programs(&t.a1).expect("xdp_programs");
    assert_eq!(progs.len(), 1);
    assert_eq!(progs[0].name, program::PROGRAM_NAME);
    assert_eq!(progs[0].mode, XdpMode::Native);
    assert_eq!(q0.statistics().expect("stats"), Default::default());
    let handle = q0.handle();
    drop(q0);
    assert!(ip_xdp(&t.a1).is_some(), "queue 1 still uses the program");
    assert!(matches!(
        handle.statistics(),
        Err(AfXdpError::Closed { .. })
    ));
    drop(q1);
    assert_eq!(
        ip_xdp(&t.a1),
        None,
        "program still attached after the last port closed"
    );
    assert!(program::xdp_programs(&t.a1)
        .expect("xdp_programs")
        .is_empty());
}

/// Not a test by itself: the child process of `sigkill_leaves_no_program_behind`.
#[test]
fn crash_child() {
    let Ok(ifname) = std::env::var(CHILD_ENV) else {
        return;
    };
    let pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let port = AfXdpPort::open(
        &umem,
        &AfXdpConfig::new(&ifname, 0, 0),
        Arc::new(PortStats::default()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    println!("ATTACHED {} {}", port.mode(), port.program_id());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::thread::sleep(Duration::from_secs(30));
}

#[test]
fn sigkill_leaves_no_program_behind_and_a_restart_attaches_again() {
    let Some(_guard) = begin("sigkill_leaves_no_program_behind_and_a_restart_attaches_again")
    else {
        return;
    };
    let t = Topo::new(1);
    let exe = std::env::current_exe().expect("test executable");
    let mut child = Command::new(exe)
        .args([
            "crash_child",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, &t.a1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let mut attached = None;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // libtest prints "test crash_child ... " before the child's own output.
            if let Some(at) = line.find("ATTACHED") {
                attached = Some(line[at..].to_string());
                break;
            }
        }
    }
    let attached = attached.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("the child never attached");
    });
    println!("child {}: {attached}", child.id());
    let shown = ip_xdp(&t.a1).expect("the child's program is attached");
    assert!(attached.starts_with("ATTACHED native"), "{attached}");
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    println!("child killed ({status}); before: {shown}");
    let t0 = Instant::now();
    while ip_xdp(&t.a1).is_some() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ip_xdp(&t.a1), None, "XDP program left after SIGKILL");
    println!("detached {:?} after the child's exit", t0.elapsed());

    let pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let t1 = Instant::now();
    let port = AfXdpPort::open(
        &umem,
        &AfXdpConfig::new(&t.a1, 0, 0),
        Arc::new(PortStats::default()),
    )
    .unwrap_or_else(|e| panic!("re-attach after the crash: {e}"));
    println!(
        "re-attached in {:?}: {} mode, stale removed: {:?}",
        t1.elapsed(),
        port.mode(),
        port.stale_removed()
    );
    assert_eq!(port.mode(), "native");
    assert_eq!(port.stale_removed(), None);
    drop(port);
    assert_eq!(ip_xdp(&t.a1), None);
}

#[test]
fn stale_netlink_program_is_removed_only_if_it_is_ours() {
    let Some(_guard) = begin("stale_netlink_program_is_removed_only_if_it_is_ours") else {
        return;
    };
    let t = Topo::new(1);
    let pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let cfg = AfXdpConfig::new(&t.a1, 0, 0);

    // A vecplane program attached the legacy way, as a crashed old version could leave it.
    let stale = XskProgram::load(&t.a1).expect("load");
    let stale_id = stale.id();
    stale
        .attach_netlink(&t.a1, XdpMode::Native)
        .expect("netlink attach");
    drop(stale); // the attachment outlives the descriptors
    assert!(ip_xdp(&t.a1).is_some_and(|s| s.contains(&format!("id {stale_id}"))));
    let port = AfXdpPort::open(&umem, &cfg, Arc::new(PortStats::default()))
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "removed stale {:?}, attached id {} in {} mode",
        port.stale_removed(),
        port.program_id(),
        port.mode()
    );
    assert_eq!(
        port.stale_removed(),
        Some(afxdp::StaleProgram {
            id: stale_id,
            mode: XdpMode::Native
        })
    );
    assert_ne!(port.program_id(), stale_id);
    drop(port);
    assert_eq!(ip_xdp(&t.a1), None);

    // A foreign program is left alone, and the error says what to do.
    let foreign = XskProgram::load_named(&t.a1, "not_vecplane").expect("load");
    foreign
        .attach_netlink(&t.a1, XdpMode::Native)
        .expect("attach");
    let err = AfXdpPort::open(&umem, &cfg, Arc::new(PortStats::default()))
        .expect_err("must not replace a foreign program");
    println!("as expected: {err}");
    assert!(matches!(err, AfXdpError::Occupied { .. }));
    assert!(err.to_string().contains("not_vecplane"), "{err}");
    assert!(ip_xdp(&t.a1).is_some_and(|s| s.contains(&format!("id {}", foreign.id()))));
    program::detach_netlink(&t.a1, XdpMode::Native).expect("detach");
    assert_eq!(ip_xdp(&t.a1), None);
}

#[test]
fn auto_mode_falls_back_to_generic_on_a_driver_without_native_xdp() {
    let Some(_guard) = begin("auto_mode_falls_back_to_generic_on_a_driver_without_native_xdp")
    else {
        return;
    };
    let d = Dummy::new();
    let pool = pool();
    let umem = Umem::new(&pool).expect("umem");
    let port = AfXdpPort::open(
        &umem,
        &AfXdpConfig::new(&d.0, 0, 0),
        Arc::new(PortStats::default()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    println!("{}: {} mode", d.0, port.mode());
    assert_eq!(port.mode(), "generic");
    assert!(ip_xdp(&d.0).is_some_and(|s| s.contains("prog/xdp")));
    drop(port);
    assert_eq!(ip_xdp(&d.0), None);

    let mut native = AfXdpConfig::new(&d.0, 0, 0);
    native.mode = ModeChoice::Native;
    let err = AfXdpPort::open(&umem, &native, Arc::new(PortStats::default()))
        .expect_err("dummy has no native XDP");
    println!("as expected: {err}");
    assert!(err.to_string().contains(&d.0), "{err}");

    let mut bad = AfXdpConfig::new(&d.0, 7, 0);
    bad.rx_ring = 1000;
    let err = AfXdpPort::open(&umem, &bad, Arc::new(PortStats::default())).expect_err("ring");
    assert!(err.to_string().contains("power of two"), "{err}");
    let err = AfXdpPort::open(
        &umem,
        &AfXdpConfig::new(&d.0, 7, 0),
        Arc::new(PortStats::default()),
    )
    .expect_err("queue 7 does not exist");
    println!("as expected: {err}");
    assert!(err.to_string().contains("queue 7"), "{err}");
    assert_eq!(ip_xdp(&d.0), None, "a failed open leaves nothing attached");
}

/// 64-byte UDP from A to B for 5 s through vecplane, generated by dpdk-testpmd (txonly on an
/// AF_PACKET vdev, CPU 0) or, without it, a Python AF_PACKET loop; vecplane's worker on CPU 1.
#[test]
#[ignore = "a measurement, not a check: cargo test -p vecplane-afxdp --release -- --ignored --nocapture measure"]
fn measure_64b_forwarding() {
    let Some(_guard) = begin("measure_64b_forwarding") else {
        return;
    };
    let t = Topo::new(1);
    let tsc_hz = graph::measure_tsc_hz(100);
    let f = forwarder(&t, 1, tsc_hz);
    let stats = f.graph.stats();
    let a_rx_stats = f.a_stats.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = spawn_worker(f, stop.clone(), Duration::from_secs(60), Some(1));
    std::thread::sleep(Duration::from_millis(200));

    let a1_mac = t
        .mac(None, &t.a1)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let run_dir = std::env::temp_dir().join(format!("vpxdp-run-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&run_dir);
    let testpmd = Command::new("sh")
        .args(["-c", "command -v dpdk-testpmd"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let secs = 5u64;
    let (generator, mut gen) = if testpmd {
        let script = format!(
            "mount --bind {dir} /run && exec taskset -c 0 timeout -s INT {t} dpdk-testpmd \
             --no-huge -m 256 --no-pci --no-telemetry --lcores '0@0,1@0' \
             --vdev net_af_packet0,iface={a0},qdisc_bypass=1 -- --forward-mode=txonly \
             --txpkts=60 --tx-ip=198.18.1.2,198.18.2.2 --eth-peer=0,{mac} \
             --total-num-mbufs=16384 --nb-cores=1 --stats-period 1",
            dir = run_dir.display(),
            t = 2 * secs + 5,
            a0 = t.a0,
            mac = a1_mac,
        );
        (
            "dpdk-testpmd txonly (net_af_packet, qdisc bypass)",
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &t.ns_a,
                    "unshare",
                    "-m",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    &script,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("testpmd"),
        )
    } else {
        let code = format!(
            "import socket,time\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
             s.bind(('{a0}',0))\nf=bytes.fromhex('{dst}'+'02'*6+'0800'+'4500002e0000000040110000c6120102c6120202'\
             +'04d2162e001a0000'+'00'*18)\nend=time.time()+{t}\nwhile time.time()<end:\n for i in \
             range(1000): s.send(f)",
            a0 = t.a0,
            dst = a1_mac.replace(':', ""),
            t = 2 * secs + 4,
        );
        (
            "python3 AF_PACKET loop",
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &t.ns_a,
                    "taskset",
                    "-c",
                    "0",
                    python(),
                    "-c",
                    &code,
                ])
                .stdin(Stdio::null())
                .spawn()
                .expect("python generator"),
        )
    };
    // Two windows in the middle of the run: B's stack answering every datagram with ICMP port
    // unreachable (as in BASELINE.md), then B discarding them into a bound, never-read socket.
    std::thread::sleep(Duration::from_millis(1500));
    let mut fwd = 0.0;
    let mut sink = None;
    for phase in [
        "B replies ICMP unreachable",
        "B discards (bound UDP socket)",
    ] {
        if sink.is_none() && phase.starts_with("B discards") {
            sink = Some(
                Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        &t.ns_b,
                        python(),
                        "-c",
                        "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                         s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,4096)\n\
                         s.bind(('0.0.0.0',9))\ntime.sleep(30)",
                    ])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("UDP sink"),
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let rx0 = t.counter(&t.ns_b, &t.b0, "rx_packets");
        let off0 = t.counter(&t.ns_a, &t.a0, "tx_packets");
        let drops0 = f_stats_rx_drops(&a_rx_stats);
        let p0: Vec<u64> = stats.nodes.iter().map(|n| n.packets.get()).collect();
        let c0: Vec<u64> = stats.nodes.iter().map(|n| n.clocks.get()).collect();
        let (i0, tsc0) = (Instant::now(), graph::rdtsc());
        std::thread::sleep(Duration::from_secs(secs));
        let rx1 = t.counter(&t.ns_b, &t.b0, "rx_packets");
        let off1 = t.counter(&t.ns_a, &t.a0, "tx_packets");
        let tsc = graph::rdtsc() - tsc0;
        let elapsed = i0.elapsed().as_secs_f64();
        let pk: Vec<u64> = stats
            .nodes
            .iter()
            .zip(&p0)
            .map(|(n, p)| n.packets.get() - p)
            .collect();
        let ck: Vec<u64> = stats
            .nodes
            .iter()
            .zip(&c0)
            .map(|(n, c)| n.clocks.get() - c)
            .collect();
        fwd = (rx1 - rx0) as f64 / elapsed;
        let offered = (off1 - off0) as f64 / elapsed;
        let idx = |name: &str| stats.node_names.iter().position(|n| n == name);
        let a_rx = format!("{}-q0-rx", t.a1);
        let b_tx = format!("{}-q0-tx", t.b1);
        let fwd_pkts = idx(&b_tx).map(|i| pk[i]).unwrap_or(0).max(1) as f64;
        let node = |name: &str| idx(name).map(|i| ck[i] as f64 / fwd_pkts).unwrap_or(0.0);
        println!(
            "MEASURE 64 B UDP A->B, {secs} s, {phase}; generator: {generator} on CPU0, worker on \
             CPU1, TSC {:.3} GHz\n  offered (A0 tx) {:.0} kpps; forwarded (B0 rx) {:.0} kpps; \
             vecplane b1 tx {:.0} kpps; a1 rx_drops {}\n  worker TSC cycles/packet (busy-polling \
             core, all time) {:.0}; inside nodes {:.0} (a1 rx {:.0} incl. empty polls, cross \
             {:.0}, b1 tx {:.0} incl. the kernel's copy-mode xmit and B's receive softirq run \
             inside sendto)",
            tsc_hz as f64 / 1e9,
            offered / 1e3,
            fwd / 1e3,
            fwd_pkts / elapsed / 1e3,
            f_stats_rx_drops(&a_rx_stats) - drops0,
            tsc as f64 / fwd_pkts,
            ck.iter().sum::<u64>() as f64 / fwd_pkts,
            node(&a_rx),
            node("cross"),
            node(&b_tx),
        );
    }
    let _ = gen.wait();
    if let Some(mut s) = sink {
        let _ = s.kill();
        let _ = s.wait();
    }
    stop.store(true, Ordering::Relaxed);
    let (f, _, _) = worker.join().expect("worker");
    let _ = std::fs::remove_dir(&run_dir);
    println!(
        "a1 kernel XDP_STATISTICS at the end: {:?}",
        f.handles[0].statistics().ok()
    );
    assert!(fwd > 0.0, "nothing forwarded");
    drop(f);
    assert_eq!(ip_xdp(&t.a1), None);
}

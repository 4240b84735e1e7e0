//! AF_PACKET port end to end (needs root; skipped with a message otherwise): namespaces A and B on
//! one subnet, joined at L2 by a worker in namespace R whose graph cross-connects two AF_PACKET
//! ports (rx of one -> tx of the other). Ping and a bounded UDP burst cross it; fanout spreads flows
//! over two workers; a thread without CAP_NET_RAW gets the permission message. Every namespace
//! (and with it every veth) is deleted by a guard, also when a test panics; leftovers of dead runs
//! (prefix `vpaf-`) are deleted at start.
//!
//! The rate measurement is ignored by default:
//! `cargo test --release -p vecplane-ports --test af_packet -- --ignored --nocapture`.

mod common;

use common::{delete_leftovers, missing_prerequisite, ok, require_root, run, Sink};
use graph::{Dispatch, GraphBuilder, GraphStats, Node, NodeContext, PortStats};
use packet::{BufferPool, PoolConfig};
use ports::{AfPacketConfig, AfPacketPort, PortError, TxMode};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const NS_PREFIX: &str = "vpaf-";
const A_IP: &str = "198.18.1.2";
const B_IP: &str = "198.18.1.3";

fn skip_reason() -> Option<String> {
    missing_prerequisite(
        "network namespaces and AF_PACKET",
        &["ip", "python3", "ping", "ethtool"],
    )
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Namespaces A, R, B and veths A--Ra, Rb--B; deleted on drop (veths go with their namespace).
struct Topology {
    ns: [String; 3],
    if_a: String,
    if_ra: String,
    if_rb: String,
    if_b: String,
}

impl Topology {
    fn new() -> Topology {
        delete_leftovers(NS_PREFIX);
        let pid = std::process::id();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let ns = |r: &str| format!("{NS_PREFIX}{pid}-{n}-{r}");
        let link = |r: &str| format!("vpf{pid}x{n}{r}");
        let t = Topology {
            ns: [ns("a"), ns("r"), ns("b")],
            if_a: link("a"),
            if_ra: link("ra"),
            if_rb: link("rb"),
            if_b: link("b"),
        };
        assert!(t.if_ra.len() <= 15, "interface name {} too long", t.if_ra);
        for ns in &t.ns {
            ok(&["ip", "netns", "add", ns]);
        }
        let (a, r, b) = (&t.ns[0], &t.ns[1], &t.ns[2]);
        ok(&[
            "ip", "link", "add", &t.if_a, "netns", a, "type", "veth", "peer", "name", &t.if_ra,
            "netns", r,
        ]);
        ok(&[
            "ip", "link", "add", &t.if_b, "netns", b, "type", "veth", "peer", "name", &t.if_rb,
            "netns", r,
        ]);
        for (ns, dev, ip) in [(a, &t.if_a, A_IP), (b, &t.if_b, B_IP)] {
            ok(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                dev,
            ]);
            ok(&["ip", "-n", ns, "link", "set", dev, "up"]);
            ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            // Local senders on veth leave L4 checksums to "hardware" (CHECKSUM_PARTIAL); frames
            // crossing a packet socket need them complete.
            ok(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]);
        }
        for dev in [&t.if_ra, &t.if_rb] {
            ok(&["ip", "-n", r, "link", "set", dev, "up"]);
        }
        t
    }

    fn a(&self) -> &str {
        &self.ns[0]
    }
    fn r(&self) -> &str {
        &self.ns[1]
    }
    fn b(&self) -> &str {
        &self.ns[2]
    }

    fn rx_packets(&self, ns: &str, dev: &str) -> u64 {
        ok(&[
            "ip",
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{dev}/statistics/rx_packets"),
        ])
        .trim()
        .parse()
        .unwrap_or(0)
    }

    fn mac(&self, ns: &str, dev: &str) -> String {
        ok(&[
            "ip",
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{dev}/address"),
        ])
        .trim()
        .to_string()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

/// Move the calling thread into network namespace `ns`.
fn enter_netns(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))
        .unwrap_or_else(|e| panic!("open netns {ns}: {e}"));
    use std::os::fd::AsRawFd;
    // SAFETY: setns on a namespace fd we hold; affects only this thread.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

/// Sends each packet out of the other port: rx_port 0 -> next 1 (port 1's tx) and vice versa.
/// Counts frames carrying an 802.1Q tag with VLAN id 100.
struct Swap {
    next: [String; 2],
    vlan100: Arc<AtomicU64>,
}

impl Node for Swap {
    fn name(&self) -> &str {
        "swap"
    }
    fn next_nodes(&self) -> Vec<String> {
        self.next.to_vec()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        for (i, &b) in frame.iter().enumerate() {
            let d = cx.pool.data(b);
            if d.len() >= 16
                && d[12..14] == [0x81, 0x00]
                && u16::from_be_bytes([d[14], d[15]]) & 0xfff == 100
            {
                self.vlan100.fetch_add(1, Ordering::Relaxed);
            }
            let m = cx.pool.meta_mut(b);
            m.tx_port = 1 - (m.rx_port & 1);
            nexts[i] = m.tx_port;
        }
        Dispatch::PerPacket
    }
}

/// What a worker saw.
struct WorkerReport {
    /// Port stats of (a, b).
    ports: [Arc<PortStats>; 2],
    graph: Arc<GraphStats>,
    csum_not_ready: u64,
    kernel_drops: u64,
}

/// A worker thread in namespace R cross-connecting `ifs[0]` and `ifs[1]`.
struct Worker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Option<WorkerReport>>>,
    ports: [Arc<PortStats>; 2],
    /// Frames tagged with VLAN 100 that reached the graph.
    vlan100: Arc<AtomicU64>,
    /// TSC ticks of loop rounds that brought no packet (idle busy-polling), and the worker's
    /// thread id (for its on-CPU time in /proc).
    idle_tsc: Arc<AtomicU64>,
    tid: Arc<AtomicU64>,
}

impl Worker {
    fn start(
        ns: &str,
        ifs: [&str; 2],
        fanout: Option<u16>,
        tx_mode: TxMode,
        cpu: Option<usize>,
        limit: Duration,
    ) -> Result<Worker, PortError> {
        let stop = Arc::new(AtomicBool::new(false));
        let ports = [
            Arc::new(PortStats::default()),
            Arc::new(PortStats::default()),
        ];
        let (tx, rx) = mpsc::channel();
        let (ns, ifs_owned) = (ns.to_string(), ifs.map(String::from));
        let vlan100 = Arc::new(AtomicU64::new(0));
        let (idle_tsc, tid) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (s, p, v) = (stop.clone(), ports.clone(), vlan100.clone());
        let (idle, id) = (idle_tsc.clone(), tid.clone());
        let handle = std::thread::spawn(move || {
            enter_netns(&ns);
            if let Some(c) = cpu {
                pin(c);
            }
            let mut opened = Vec::new();
            for (id, name) in ifs_owned.iter().enumerate() {
                let mut cfg = AfPacketConfig::new(name);
                // A fanout group belongs to one interface: one group per port.
                cfg.fanout = fanout.map(|g| g + id as u16);
                cfg.tx_mode = tx_mode;
                let port = AfPacketPort::open(
                    &cfg,
                    id as u16,
                    format!("p{id}-rx"),
                    format!("p{id}-tx"),
                    "swap".into(),
                    p[id].clone(),
                );
                match port {
                    Ok(port) => opened.push(port),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return None;
                    }
                }
            }
            let sockets: Vec<_> = opened.iter().map(|p| p.rx.socket().clone()).collect();
            let mut b = GraphBuilder::new();
            for port in opened {
                b.add_input(Box::new(port.rx)).add_node(Box::new(port.tx));
            }
            b.add_node(Box::new(Swap {
                next: ["p0-tx".into(), "p1-tx".into()],
                vlan100: v,
            }));
            let mut g = b.build(0, graph::measure_tsc_hz(20)).expect("graph");
            let mut pool = BufferPool::new(PoolConfig {
                buffers: 4096,
                try_hugepages: false,
                ..PoolConfig::default()
            })
            .expect("pool");
            let _ = tx.send(Ok(()));
            let deadline = Instant::now() + limit;
            // SAFETY: gettid has no preconditions.
            id.store(unsafe { libc::gettid() } as u64, Ordering::Relaxed);
            let mut rounds = 0u64;
            let mut idle_ticks = 0u64;
            loop {
                let t0 = graph::rdtsc();
                let n = g.run_once(&mut pool);
                let dt = graph::rdtsc() - t0;
                // An idle round is well under 20 us; a longer one was preempted: not counted.
                if n == 0 && dt < 50_000 {
                    idle_ticks += dt;
                    idle.store(idle_ticks, Ordering::Relaxed);
                }
                rounds += 1;
                if rounds.is_multiple_of(64)
                    && (s.load(Ordering::Relaxed) || Instant::now() >= deadline)
                {
                    break;
                }
            }
            g.finish();
            assert_eq!(pool.available(), pool.capacity(), "every buffer returned");
            let kernel_drops = sockets
                .iter()
                .map(|s| s.kernel_stats().map(|k| k.drops).unwrap_or(0))
                .sum();
            Some(WorkerReport {
                ports: p,
                graph: g.stats(),
                csum_not_ready: sockets.iter().map(|s| s.csum_not_ready()).sum(),
                kernel_drops,
            })
        });
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = handle.join();
                return Err(e);
            }
            Err(_) => {
                let r = handle.join();
                panic!("worker died while opening its ports: {:?}", r.err());
            }
        }
        Ok(Worker {
            stop,
            handle: Some(handle),
            ports,
            vlan100,
            idle_tsc,
            tid,
        })
    }

    /// Nanoseconds the worker thread has run on a CPU (from /proc/self/task/TID/schedstat).
    fn on_cpu_ns(&self) -> u64 {
        let tid = self.tid.load(Ordering::Relaxed);
        std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    }

    fn finish(mut self) -> WorkerReport {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok().flatten())
            .expect("worker report")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0, ..) affects only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn ping(t: &Topology, count: u32) -> String {
    let out = run(&[
        "timeout",
        "30",
        "ip",
        "netns",
        "exec",
        t.a(),
        "ping",
        "-c",
        &count.to_string(),
        "-i",
        "0.05",
        "-W",
        "2",
        B_IP,
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Start a UDP receiver in B on port 9000; returns it once bound. It prints the datagram count
/// after `idle` seconds without traffic, counted from the first datagram: it waits up to 30 s
/// for that one (on a loaded machine the sender's own start can take seconds).
fn udp_receiver(t: &Topology, idle: f64) -> std::process::Child {
    let script = format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE\n\
         s.bind(('{B_IP}', 9000))\n\
         s.settimeout(30)\n\
         print('ready', flush=True)\n\
         n = 0\n\
         try:\n\
         \x20   while True:\n\
         \x20       s.recv(4096)\n\
         \x20       n += 1\n\
         \x20       s.settimeout({idle})\n\
         except socket.timeout:\n\
         \x20   pass\n\
         print(n, flush=True)\n"
    );
    let mut child = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", t.b(), "python3", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("receiver");
    let mut line = String::new();
    let out = child.stdout.as_mut().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("ready");
    assert_eq!(line.trim(), "ready", "receiver did not start");
    child
}

fn udp_count(child: std::process::Child) -> u64 {
    let out = child.wait_with_output().expect("receiver");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0)
}

/// Send `count` datagrams of `size` bytes from A to B:9000 from `ports` source ports in turn,
/// pausing 1 ms every 100 datagrams (a bounded, modest rate).
fn udp_send(t: &Topology, count: u32, size: usize, ports: u32) {
    let script = format!(
        "import socket, time\n\
         socks = []\n\
         for i in range({ports}):\n\
         \x20   s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         \x20   s.bind(('{A_IP}', 20000 + i))\n\
         \x20   socks.append(s)\n\
         data = b'x' * {size}\n\
         for i in range({count}):\n\
         \x20   socks[i % {ports}].sendto(data, ('{B_IP}', 9000))\n\
         \x20   if i % 100 == 99:\n\
         \x20       time.sleep(0.001)\n"
    );
    ok(&[
        "timeout",
        "30",
        "ip",
        "netns",
        "exec",
        t.a(),
        "python3",
        "-c",
        &script,
    ]);
}

/// Frames the kernel drops because a port's receive ring is full are the port's `rx_drops`
/// (`show interfaces`, the metrics), not only a figure in the socket: R's ring is two 4 KiB
/// blocks, A sends 600 datagrams to it before the first poll, then R polls the ring dry.
#[test]
fn frames_the_kernel_drops_for_a_full_ring_are_the_ports_rx_drops() {
    require_root!(skip_reason());
    let t = Topology::new();
    // A sends to B's address through R without resolving it (R forwards nothing here).
    let b_mac = t.mac(t.b(), &t.if_b);
    ok(&[
        "ip",
        "-n",
        t.a(),
        "neigh",
        "replace",
        B_IP,
        "lladdr",
        &b_mac,
        "dev",
        &t.if_a,
    ]);
    let stats = Arc::new(PortStats::default());
    let (ready_tx, ready_rx) = mpsc::channel();
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let (ns, dev, st) = (t.r().to_string(), t.if_ra.clone(), stats.clone());
    let worker = std::thread::spawn(move || -> Result<(u64, u64), String> {
        enter_netns(&ns);
        let mut cfg = AfPacketConfig::new(&dev);
        cfg.rx_blocks = 2;
        cfg.rx_block_size = 4096;
        let port = AfPacketPort::open(&cfg, 0, "p0-rx".into(), "p0-tx".into(), "sink".into(), st)
            .map_err(|e| e.to_string());
        let _ = ready_tx.send(port.as_ref().map(|_| ()).map_err(|e| e.clone()));
        let port = port?;
        let sock = port.rx.socket().clone();
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(port.rx)).add_node(Box::new(Sink));
        let mut g = b
            .build(0, graph::measure_tsc_hz(20))
            .map_err(|e| format!("{e:?}"))?;
        let mut pool = BufferPool::new(PoolConfig {
            buffers: 1024,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .map_err(|e| e.to_string())?;
        sent_rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|e| e.to_string())?;
        // Poll until the ring is dry and a sample came after it (one every 10 ms of polling).
        let end = Instant::now() + Duration::from_millis(300);
        while Instant::now() < end {
            g.run_once(&mut pool);
        }
        g.finish();
        let kernel = sock.kernel_stats().map_err(|e| e.to_string())?;
        Ok((kernel.packets, kernel.drops))
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the worker opened its port")
        .expect("open the AF_PACKET port");
    udp_send(&t, 600, 64, 1);
    sent_tx.send(()).expect("worker waiting");
    let (kernel_packets, kernel_drops) = worker.join().expect("worker thread").expect("worker ran");
    let (rx, drops) = (stats.rx_packets.get(), stats.rx_drops.get());
    println!(
        "kernel: {kernel_packets} frames, {kernel_drops} dropped; port: rx {rx}, rx_drops {drops}"
    );
    assert!(
        kernel_drops > 0,
        "a two-block ring took 600 datagrams: nothing to count"
    );
    assert_eq!(
        drops, kernel_drops,
        "every frame the kernel dropped is an rx drop"
    );
    // The kernel's `packets` counts the dropped frames too.
    assert_eq!(
        rx + drops,
        kernel_packets,
        "every frame received or counted"
    );
    assert!(rx + drops >= 600);
}

#[test]
fn ping_and_udp_cross_the_af_packet_xconnect_sendmmsg() {
    require_root!(skip_reason());
    ping_and_udp(TxMode::Sendmmsg);
}

#[test]
fn ping_and_udp_cross_the_af_packet_xconnect_tx_ring() {
    require_root!(skip_reason());
    ping_and_udp(TxMode::Ring);
}

fn ping_and_udp(tx_mode: TxMode) {
    let t = Topology::new();
    let w = Worker::start(
        t.r(),
        [&t.if_ra, &t.if_rb],
        None,
        tx_mode,
        None,
        Duration::from_secs(60),
    )
    .expect("open AF_PACKET ports");

    let out = ping(&t, 20);
    assert!(
        out.contains(" 0% packet loss"),
        "ping A -> B through the cross-connect lost packets:\n{out}"
    );

    let rx_b = t.rx_packets(t.b(), &t.if_b);
    let receiver = udp_receiver(&t, 5.0);
    udp_send(&t, 5000, 64, 1);
    let got = udp_count(receiver);
    let rx_b_delta = t.rx_packets(t.b(), &t.if_b) - rx_b;
    let ports = w.ports.clone();
    let rep = w.finish();
    println!(
        "tx {tx_mode:?}: ping: 20/20; UDP: {got}/5000 datagrams received in B ({rx_b_delta} frames on its veth); \
         port a rx {} tx {} drops {}/{}, port b rx {} tx {} drops {}/{}; kernel drops {}, \
         frames with incomplete checksums {}",
        ports[0].rx_packets.get(),
        ports[0].tx_packets.get(),
        ports[0].rx_drops.get(),
        ports[0].tx_drops.get(),
        ports[1].rx_packets.get(),
        ports[1].tx_packets.get(),
        ports[1].rx_drops.get(),
        ports[1].tx_drops.get(),
        rep.kernel_drops,
        rep.csum_not_ready,
    );
    // On a loaded machine the worker may fall behind and R's receive ring overflow: what it
    // could not take is counted by the kernel (`kernel_drops`), never lost silently, and
    // everything it took went out (the equalities below). How many that is depends on the load.
    assert!(got > 0, "no datagram arrived");
    assert!(
        rx_b_delta + rep.kernel_drops >= 5000,
        "only {rx_b_delta} of 5000 datagrams reached B ({} counted as dropped by the kernel)",
        rep.kernel_drops
    );
    assert!(rx_b_delta >= got);
    // Everything a received from A left on b, and the reverse.
    assert_eq!(
        ports[0].rx_packets.get(),
        ports[1].tx_packets.get() + ports[1].tx_drops.get()
    );
    assert_eq!(
        ports[1].rx_packets.get(),
        ports[0].tx_packets.get() + ports[0].tx_drops.get()
    );
    assert!(ports[0].rx_packets.get() + rep.kernel_drops >= 5000 + 20);
    assert_eq!(rep.csum_not_ready, 0, "tx offload is off in A and B");
    // The ports' rx drops are only what the kernel dropped for a full ring (folded in while the
    // worker polled): vecplane itself refused no frame.
    assert!(rep.ports[0].rx_drops.get() + rep.ports[1].rx_drops.get() <= rep.kernel_drops);
    let s = &rep.graph;
    let rx0 = s
        .node_names
        .iter()
        .position(|n| n == "p0-rx")
        .expect("node");
    assert_eq!(s.nodes[rx0].packets.get(), ports[0].rx_packets.get());
}

#[test]
fn vlan_tags_survive_the_xconnect() {
    require_root!(skip_reason());
    let t = Topology::new();
    let (mac_a, mac_b) = (t.mac(t.a(), &t.if_a), t.mac(t.b(), &t.if_b));
    let w = Worker::start(
        t.r(),
        [&t.if_ra, &t.if_rb],
        None,
        TxMode::Sendmmsg,
        None,
        Duration::from_secs(30),
    )
    .expect("open");
    // B captures frames tagged with VLAN 100 (libpcap rebuilds the tag from packet metadata).
    let mut cap = Command::new("timeout")
        .args([
            "15",
            "ip",
            "netns",
            "exec",
            t.b(),
            "tcpdump",
            "-i",
            &t.if_b,
            "-nn",
            "-e",
            "-l",
            "-c",
            "10",
            "vlan",
            "100",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump");
    let mut err = BufReader::new(cap.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("listening") {
        line.clear();
        let n = err.read_line(&mut line).expect("tcpdump starts");
        assert!(n > 0, "tcpdump ended before listening");
    }
    // The kernel strips the tag into metadata before packet sockets see a frame; rx must put
    // it back, or it would leave R untagged.
    let script = format!(
        "import socket\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{ifa}', 0))\n\
         f = bytes.fromhex('{db}{sa}8100006408004500001c0000400040110000c612010' + \
         '2c6120103000900090008000000000000000000000000000000000000')\n\
         for _ in range(10):\n\
         \x20   s.send(f)\n",
        ifa = t.if_a,
        db = mac_b.replace(':', ""),
        sa = mac_a.replace(':', ""),
    );
    ok(&["ip", "netns", "exec", t.a(), "python3", "-c", &script]);
    let out = cap.wait_with_output().expect("tcpdump");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let seen = w.vlan100.load(Ordering::Relaxed);
    drop(w);
    println!("R's graph saw {seen} frames tagged VLAN 100; B captured:\n{text}");
    assert_eq!(seen, 10, "rx put the tag back into the frame");
    assert_eq!(
        text.lines().filter(|l| l.contains("vlan 100")).count(),
        10,
        "B received the frames tagged"
    );
}

#[test]
fn fanout_spreads_flows_over_two_workers() {
    require_root!(skip_reason());
    let t = Topology::new();
    let group = 4242; // ports a and b use groups 4242 and 4243
    let w1 = Worker::start(
        t.r(),
        [&t.if_ra, &t.if_rb],
        Some(group),
        TxMode::Ring,
        None,
        Duration::from_secs(60),
    )
    .expect("worker 1");
    let w2 = Worker::start(
        t.r(),
        [&t.if_ra, &t.if_rb],
        Some(group),
        TxMode::Ring,
        None,
        Duration::from_secs(60),
    )
    .expect("worker 2");
    // Resolve ARP first: datagrams sent while it is pending queue in A and may be dropped there.
    let out = ping(&t, 3);
    assert!(out.contains(" 0% packet loss"), "{out}");
    let receiver = udp_receiver(&t, 5.0);
    udp_send(&t, 2000, 64, 32);
    let got = udp_count(receiver);
    let (r1, r2) = (w1.finish(), w2.finish());
    let (a1, a2) = (r1.ports[0].rx_packets.get(), r2.ports[0].rx_packets.get());
    println!("fanout: {got}/2000 datagrams arrived; worker 1 received {a1} from A, worker 2 {a2}");
    // As above: a loaded worker may leave frames to its ring's kernel drop counter.
    let kernel_drops = r1.kernel_drops + r2.kernel_drops;
    assert!(got > 0, "no datagram arrived");
    assert!(
        a1 > 0 && a2 > 0,
        "32 flows should land on both sockets: {a1} / {a2}"
    );
    assert!(
        a1 + a2 + kernel_drops >= 2000 + 3,
        "{a1} + {a2} received, {kernel_drops} dropped by the kernel"
    );
}

#[test]
fn missing_interface_and_missing_capability_are_explained() {
    require_root!(skip_reason());
    let e = AfPacketPort::open(
        &AfPacketConfig::new("vpfnosuch0"),
        0,
        "rx".into(),
        "tx".into(),
        "next".into(),
        Arc::new(PortStats::default()),
    )
    .err()
    .expect("missing interface");
    let s = e.to_string();
    assert!(
        s.contains("`vpfnosuch0`") && s.contains("create it first or check `ip link`"),
        "{s}"
    );

    // Capabilities are per thread: drop CAP_NET_RAW from this thread's effective set only.
    let s = std::thread::spawn(|| {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: capget/capset with a v3 header and two data words, all owned here.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
            d[0].effective &= !(1 << 13); // CAP_NET_RAW
            assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
        }
        AfPacketPort::open(
            &AfPacketConfig::new("lo"),
            0,
            "rx".into(),
            "tx".into(),
            "next".into(),
            Arc::new(PortStats::default()),
        )
        .err()
        .expect("EPERM")
        .to_string()
    })
    .join()
    .expect("thread");
    assert!(s.contains("AF_PACKET needs CAP_NET_RAW"), "{s}");
    assert!(s.contains("`lo`"), "{s}");
}

/// A running data plane, stopped on drop (also when the test panics).
struct Running(Option<dataplane::RunningDataplane>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.stop();
        }
    }
}

/// Build and start `spec` from a thread inside namespace `ns` (where its interfaces are).
fn start_dataplane(ns: &str, spec: dataplane::DataplaneSpec) -> Running {
    let ns = ns.to_string();
    let running = std::thread::spawn(move || {
        enter_netns(&ns);
        dataplane::Dataplane::new(&spec).map(|d| d.start())
    })
    .join()
    .expect("thread")
    .unwrap_or_else(|e| panic!("data plane: {e}"));
    assert!(running
        .view()
        .ports
        .get()
        .iter()
        .all(|p| p.driver == "af-packet"));
    Running(Some(running))
}

fn kernel_port(
    name: &str,
    mac: [u8; 6],
    ip4: Vec<(std::net::Ipv4Addr, u8)>,
    ifname: &str,
) -> dataplane::PortSpec {
    dataplane::PortSpec {
        name: name.into(),
        mac,
        mtu: 1500,
        ip4,
        ip6: vec![],
        driver: dataplane::PortDriver::AfPacket {
            interface: ifname.into(),
            fanout: None,
        },
    }
}

fn parse_mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (o, p) in m.iter_mut().zip(s.split(':')) {
        *o = u8::from_str_radix(p, 16).unwrap_or(0);
    }
    m
}

#[test]
fn dataplane_cross_connects_af_packet_ports() {
    require_root!(skip_reason());
    let t = Topology::new();
    let spec = dataplane::DataplaneSpec {
        buffers: 4096,
        ports: vec![
            kernel_port("a", [2, 0, 0, 0, 0x0a, 1], vec![], &t.if_ra),
            kernel_port("b", [2, 0, 0, 0, 0x0b, 1], vec![], &t.if_rb),
        ],
        xconnects: vec![
            dataplane::XconnectSpec {
                from: 0,
                to: 1,
                dst_mac: None,
            },
            dataplane::XconnectSpec {
                from: 1,
                to: 0,
                dst_mac: None,
            },
        ],
        ..Default::default()
    };
    let running = start_dataplane(t.r(), spec);
    let out = ping(&t, 10);
    let v = running.0.as_ref().expect("running").view().clone();
    drop(running);
    assert!(out.contains(" 0% packet loss"), "{out}");
    let tx_b: u64 = v.ports.get()[1]
        .stats
        .iter()
        .map(|s| s.tx_packets.get())
        .sum();
    assert!(tx_b >= 10, "port b sent {tx_b}");
}

#[test]
fn dataplane_routes_ipv4_between_af_packet_ports() {
    require_root!(skip_reason());
    let t = Topology::new();
    // A in 198.18.1.0/24, B in 198.18.2.0/24, vecplane routing between them. It answers no ARP
    // yet: A and B get static entries for its ports, it gets static neighbours for them.
    let (mac_ra, mac_rb) = ("02:00:00:00:0a:01", "02:00:00:00:0b:01");
    ok(&["ip", "-n", t.b(), "addr", "flush", "dev", &t.if_b]);
    ok(&[
        "ip",
        "-n",
        t.b(),
        "addr",
        "add",
        "198.18.2.2/24",
        "dev",
        &t.if_b,
    ]);
    for (ns, dev, gw, mac) in [
        (t.a(), &t.if_a, "198.18.1.1", mac_ra),
        (t.b(), &t.if_b, "198.18.2.1", mac_rb),
    ] {
        ok(&[
            "ip",
            "-n",
            ns,
            "neigh",
            "add",
            gw,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ]);
        ok(&["ip", "-n", ns, "route", "add", "default", "via", gw]);
    }
    let spec = dataplane::DataplaneSpec {
        buffers: 4096,
        ports: vec![
            kernel_port(
                "a",
                parse_mac(mac_ra),
                vec![("198.18.1.1".parse().expect("ip"), 24)],
                &t.if_ra,
            ),
            kernel_port(
                "b",
                parse_mac(mac_rb),
                vec![("198.18.2.1".parse().expect("ip"), 24)],
                &t.if_rb,
            ),
        ],
        neighbours: vec![
            dataplane::NeighbourSpec {
                ip: "198.18.1.2".parse().expect("ip"),
                mac: parse_mac(&t.mac(t.a(), &t.if_a)),
                port: 0,
            },
            dataplane::NeighbourSpec {
                ip: "198.18.2.2".parse().expect("ip"),
                mac: parse_mac(&t.mac(t.b(), &t.if_b)),
                port: 1,
            },
        ],
        ..Default::default()
    };
    let running = start_dataplane(t.r(), spec);
    let out = String::from_utf8_lossy(
        &run(&[
            "timeout",
            "30",
            "ip",
            "netns",
            "exec",
            t.a(),
            "ping",
            "-c",
            "10",
            "-i",
            "0.05",
            "-W",
            "2",
            "198.18.2.2",
        ])
        .stdout,
    )
    .into_owned();
    let v = running.0.as_ref().expect("running").view().clone();
    drop(running);
    println!("{out}");
    assert!(
        out.contains(" 0% packet loss"),
        "routed ping lost packets:\n{out}"
    );
    // The replies crossed vecplane too: TTL 64 - 1.
    assert!(out.contains("ttl=63"), "{out}");
    let sent: u64 = v
        .ports
        .get()
        .iter()
        .flat_map(|p| &p.stats)
        .map(|s| s.tx_packets.get())
        .sum();
    assert!(sent >= 20, "requests and replies were forwarded: {sent}");
}

/// Start a 64-byte UDP generator in A sending to `dst_mac` for `secs` seconds on CPU 0:
/// dpdk-testpmd txonly on a net_af_packet vdev when installed, else a python raw-socket loop.
fn start_generator(t: &Topology, dst_mac: &str, secs: u32) -> (std::process::Child, &'static str) {
    let testpmd = Command::new("sh")
        .args(["-c", "command -v dpdk-testpmd"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if testpmd {
        // A private /run keeps DPDK's runtime files out of the host's.
        let run_dir = format!("/tmp/vpaf-run-{}", std::process::id());
        std::fs::create_dir_all(&run_dir).expect("run dir");
        let cmd = format!(
            "mount --bind {run_dir} /run && exec timeout -s INT {secs} taskset -c 0 \
             dpdk-testpmd --no-huge -m 256 --no-pci --no-telemetry --lcores '0@0,1@0' \
             --file-prefix=vpaf{pid} --vdev net_af_packet0,iface={ifa},qdisc_bypass=1 -- \
             --forward-mode=txonly --txpkts=60 --tx-ip={A_IP},{B_IP} --eth-peer=0,{dst_mac} \
             --total-num-mbufs=16384 --nb-cores=1 --stats-period 1 >/dev/null 2>&1",
            pid = std::process::id(),
            ifa = t.if_a,
        );
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                t.a(),
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                &cmd,
            ])
            .spawn()
            .expect("testpmd");
        (
            child,
            "dpdk-testpmd txonly (net_af_packet, qdisc bypass) in A on CPU 0",
        )
    } else {
        let mac_a = t.mac(t.a(), &t.if_a);
        let script = format!(
            "import socket, struct, time\n\
             s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
             s.bind(('{ifa}', 0))\n\
             eth = bytes.fromhex('{db}') + bytes.fromhex('{sa}') + b'\\x08\\x00'\n\
             ip = bytes.fromhex('4500002e00004000401100000000000000000000')\n\
             ip = ip[:12] + socket.inet_aton('{A_IP}') + socket.inet_aton('{B_IP}')\n\
             frame = eth + ip + struct.pack('!HHHH', 9, 9, 26, 0) + bytes(18)\n\
             end = time.time() + {secs}\n\
             while time.time() < end:\n\
             \x20   for _ in range(1000):\n\
             \x20       s.send(frame)\n",
            ifa = t.if_a,
            db = dst_mac.replace(':', ""),
            sa = mac_a.replace(':', ""),
        );
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                t.a(),
                "taskset",
                "-c",
                "0",
                "python3",
                "-c",
                &script,
            ])
            .spawn()
            .expect("python generator");
        (child, "python3 raw-socket loop in A on CPU 0")
    }
}

/// Forward 64-byte UDP frames from A to `dst_mac` through the cross-connect (worker pinned to
/// CPU 1) for `secs` seconds; prints and returns forwarded packets per second.
fn measure(tx_mode: TxMode, dst_mac: &str, what: &str, secs: f64) -> f64 {
    let t = Topology::new();
    let dst = if dst_mac.is_empty() {
        t.mac(t.b(), &t.if_b)
    } else {
        dst_mac.to_string()
    };
    let w = Worker::start(
        t.r(),
        [&t.if_ra, &t.if_rb],
        None,
        tx_mode,
        Some(1),
        Duration::from_secs(60),
    )
    .expect("open");
    let (mut gen, gen_name) = start_generator(&t, &dst, (secs + 3.0) as u32);
    std::thread::sleep(Duration::from_millis(1500));
    let sample = |w: &Worker| {
        (
            t.rx_packets(t.b(), &t.if_b),
            w.ports[1].tx_packets.get(),
            t.rx_packets(t.r(), &t.if_ra),
        )
    };
    let load0 = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (b0, f0, r0) = sample(&w);
    let (cpu0, idle0) = (w.on_cpu_ns(), w.idle_tsc.load(Ordering::Relaxed));
    let c0 = graph::rdtsc();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (b1, f1, r1) = sample(&w);
    let (cpu1, idle1) = (w.on_cpu_ns(), w.idle_tsc.load(Ordering::Relaxed));
    let ticks = graph::rdtsc() - c0;
    let _ = gen.wait();
    let ports = w.ports.clone();
    let rep = w.finish();
    let hz = graph::measure_tsc_hz(100) as f64;
    let elapsed = ticks as f64 / hz;
    let (fwd, at_b, offered) = ((f1 - f0) as f64, (b1 - b0) as f64, (r1 - r0) as f64);
    let s = &rep.graph;
    let clocks = |name: &str| {
        let i = s.node_names.iter().position(|n| n == name).expect("node");
        (s.nodes[i].clocks.get(), s.nodes[i].packets.get())
    };
    let (rx_c, rx_p) = clocks("p0-rx");
    let (sw_c, _) = clocks("swap");
    let (tx_c, tx_p) = clocks("p1-tx");
    let pps = fwd / elapsed;
    let on_cpu = (cpu1 - cpu0) as f64 / 1e9;
    let busy_ticks = on_cpu * hz - (idle1 - idle0) as f64;
    println!(
        "AF_PACKET xconnect A -> B, 64 B, tx {tx_mode:?}, {what}; generator: {gen_name}\n  \
         {elapsed:.1} s: offered {:.0} kpps (R's veth rx), forwarded {:.0} kpps (port b tx), \
         {:.0} kpps counted on B's veth\n  \
         worker on CPU 1: on-CPU {:.0}% of the time, idle polling {:.0}% of that; \
         {:.0} TSC cycles per packet of non-idle on-CPU time ({:.0} if the whole core is \
         counted, at {:.3} GHz)\n  \
         whole-run node clocks per packet: p0-rx {:.0} (incl. idle polls), swap {:.0}, \
         p1-tx {:.0} (incl. the kernel work its system call runs)\n  \
         tx drops {}, kernel rx-ring drops {}, load average at start: {}",
        offered / elapsed / 1e3,
        pps / 1e3,
        at_b / elapsed / 1e3,
        100.0 * on_cpu / elapsed,
        100.0 * (idle1 - idle0) as f64 / (on_cpu * hz),
        busy_ticks / fwd,
        hz / pps,
        hz / 1e9,
        rx_c as f64 / rx_p.max(1) as f64,
        sw_c as f64 / rx_p.max(1) as f64,
        tx_c as f64 / tx_p.max(1) as f64,
        ports[1].tx_drops.get(),
        rep.kernel_drops,
        load0.trim(),
    );
    let _ = std::fs::remove_dir(format!("/tmp/vpaf-run-{}", std::process::id()));
    pps
}

/// 64-byte UDP frames from A to B through the cross-connect for 5 s, for each tx mode: addressed
/// to B's MAC (B's stack then runs inside the worker's send(), as on a real veth path), and to a
/// MAC B does not own (B drops them at L2: the cost of vecplane plus the veth alone). Reports kpps
/// and TSC cycles per packet of the worker.
#[test]
#[ignore]
fn af_packet_xconnect_rate() {
    require_root!(skip_reason());
    for mode in [TxMode::Sendmmsg, TxMode::Ring] {
        let to_b = measure(
            mode,
            "",
            "to B's MAC (B's UDP/ICMP input runs in our send())",
            5.0,
        );
        let other = measure(
            mode,
            "02:00:00:00:00:99",
            "to a MAC B does not own (B drops at L2)",
            5.0,
        );
        assert!(to_b > 0.0 && other > 0.0);
    }
}

//! TAP port end to end (needs root; skipped with a message otherwise). A TAP device is created in
//! a fresh namespace, addressed, with a static ARP entry for a neighbour behind it. A worker graph
//! `TapRx -> echo responder -> TapTx` answers the kernel's pings to that neighbour: the requests
//! prove TapRx receives what the kernel sends, the replies (checked by the kernel, counted by
//! ping and by the tap's rx counter) prove TapTx delivers. Run with and without vnet headers, plus
//! oversized frames (into jumbo buffers with offloads), packets with offloads refused by a TAP
//! without them, attaching to an existing TAP, and the error messages. Namespaces (and the
//! TAP devices in them) are deleted by a guard, also when a test panics; leftovers of dead runs
//! (prefix `vptap-`) are deleted at start.

mod common;

use common::{delete_leftovers, ok, require_root, run, tap_skip_reason, Sink};
use graph::{Dispatch, GraphBuilder, Node, NodeContext, PortStats};
use packet::{BufferPool, PoolConfig};
use ports::{TapConfig, TapPort};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS_PREFIX: &str = "vptap-";
const TAP_IP: &str = "198.18.77.1";
const NEIGH_IP: &str = "198.18.77.2";
const NEIGH_MAC: &str = "02:00:00:00:77:02";

fn skip_reason() -> Option<String> {
    tap_skip_reason(&["ip", "ping", "python3"])
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A namespace (IPv6 off, so the kernel sends no unsolicited traffic) and a TAP name for it.
struct Netns {
    ns: String,
    tap: String,
}

impl Netns {
    fn new() -> Netns {
        delete_leftovers(NS_PREFIX);
        let pid = std::process::id();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let t = Netns {
            ns: format!("{NS_PREFIX}{pid}-{n}"),
            tap: format!("vpt{pid}x{n}"),
        };
        assert!(t.tap.len() <= 15);
        ok(&["ip", "netns", "add", &t.ns]);
        for key in ["all", "default"] {
            ok(&[
                "ip",
                "netns",
                "exec",
                &t.ns,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ]);
        }
        t
    }

    /// Run `f` on a thread that has entered the namespace (a TAP is created where it is opened).
    fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = self.ns.clone();
        std::thread::spawn(move || {
            let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a namespace fd we hold; affects only this thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in namespace")
    }

    /// Address the TAP, bring it up, and point the neighbour's ARP entry through it.
    fn configure(&self) {
        let (ns, tap) = (&self.ns, &self.tap);
        ok(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{TAP_IP}/24"),
            "dev",
            tap,
        ]);
        ok(&["ip", "-n", ns, "link", "set", tap, "up"]);
        ok(&[
            "ip",
            "-n",
            ns,
            "neigh",
            "add",
            NEIGH_IP,
            "lladdr",
            NEIGH_MAC,
            "dev",
            tap,
            "nud",
            "permanent",
        ]);
    }

    fn tap_stat(&self, what: &str) -> u64 {
        ok(&[
            "ip",
            "netns",
            "exec",
            &self.ns,
            "cat",
            &format!("/sys/class/net/{}/statistics/{what}", self.tap),
        ])
        .trim()
        .parse()
        .unwrap_or(0)
    }

    fn ping(&self, count: u32, size: u32) -> String {
        let out = run(&[
            "timeout",
            "20",
            "ip",
            "netns",
            "exec",
            &self.ns,
            "ping",
            "-c",
            &count.to_string(),
            "-i",
            "0.05",
            "-W",
            "1",
            "-s",
            &size.to_string(),
            NEIGH_IP,
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.ns]);
    }
}

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (o, p) in m.iter_mut().zip(s.split(':')) {
        *o = u8::from_str_radix(p, 16).unwrap_or(0);
    }
    m
}

/// Answers ICMP echo requests to NEIGH_IP (swap MACs and addresses, type 8 -> 0, checksum fixed
/// incrementally); drops everything else. Counts the requests it saw, and the UDP datagrams whose
/// checksum is complete and correct.
struct Responder {
    requests: Arc<AtomicU64>,
    others: Arc<AtomicU64>,
    udp_ok: Arc<AtomicU64>,
    /// Mark each reply as a partial-checksum packet (an offload the TAP must refuse without
    /// offloads).
    mark_partial: bool,
}

/// True for an IPv4 UDP frame (no options) whose UDP checksum verifies.
fn udp_checksum_ok(p: &[u8]) -> bool {
    if p.len() < 42 || p[12..14] != [0x08, 0x00] || p[14] != 0x45 || p[23] != 17 {
        return false;
    }
    let udp_len = u16::from_be_bytes([p[38], p[39]]) as usize;
    if udp_len < 8 || 34 + udp_len > p.len() {
        return false;
    }
    let mut sum: u32 = 17 + udp_len as u32;
    for c in p[26..34].chunks(2) {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    for c in p[34..34 + udp_len].chunks(2) {
        sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

impl Node for Responder {
    fn name(&self) -> &str {
        "responder"
    }
    fn next_nodes(&self) -> Vec<String> {
        vec!["tap-tx".into(), "sink".into()]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let neigh = NEIGH_IP
            .parse::<std::net::Ipv4Addr>()
            .expect("NEIGH_IP is an IPv4 address")
            .octets();
        for (i, &b) in frame.iter().enumerate() {
            let (_, p) = cx.pool.packet_mut(b);
            let is_echo = p.len() >= 42
                && p[..6] == mac(NEIGH_MAC)
                && p[12..14] == [0x08, 0x00]
                && p[14] == 0x45
                && p[23] == 1
                && p[30..34] == neigh
                && p[34] == 8;
            if !is_echo {
                if udp_checksum_ok(p) {
                    self.udp_ok.fetch_add(1, Ordering::Relaxed);
                }
                self.others.fetch_add(1, Ordering::Relaxed);
                nexts[i] = 1;
                continue;
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            let (dst, src): ([u8; 6], [u8; 6]) = (
                p[..6].try_into().unwrap_or_default(),
                p[6..12].try_into().unwrap_or_default(),
            );
            p[..6].copy_from_slice(&src);
            p[6..12].copy_from_slice(&dst);
            let (s, d): ([u8; 4], [u8; 4]) = (
                p[26..30].try_into().unwrap_or_default(),
                p[30..34].try_into().unwrap_or_default(),
            );
            p[26..30].copy_from_slice(&d);
            p[30..34].copy_from_slice(&s);
            p[34] = 0;
            // RFC 1624: HC' = ~(~HC + ~m + m'), m = 0x0800 -> m' = 0x0000.
            let hc = u16::from_be_bytes([p[36], p[37]]);
            let mut sum = (!hc) as u32 + (!0x0800u16) as u32;
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            p[36..38].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            if self.mark_partial {
                let m = cx.pool.meta_mut(b);
                m.flags |= packet::meta::FLAG_CSUM_PARTIAL;
                m.csum_start = m.data_offset + 34;
                m.csum_offset = 2;
            }
            nexts[i] = 0;
        }
        Dispatch::PerPacket
    }
}

/// A worker thread running TapRx -> responder -> TapTx until stopped.
struct Worker {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<(bool, bool)>>,
    stats: Arc<PortStats>,
    requests: Arc<AtomicU64>,
    others: Arc<AtomicU64>,
    udp_ok: Arc<AtomicU64>,
}

/// How the worker is set up.
#[derive(Clone, Copy, Default)]
struct Setup {
    /// Jumbo buffers in its pool.
    jumbo: u32,
    /// `Responder::mark_partial`.
    mark_partial: bool,
}

impl Worker {
    fn start(port: TapPort, stats: Arc<PortStats>) -> Worker {
        Worker::start_with(port, stats, Setup::default())
    }

    fn start_with(port: TapPort, stats: Arc<PortStats>, setup: Setup) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let others = Arc::new(AtomicU64::new(0));
        let udp_ok = Arc::new(AtomicU64::new(0));
        let (s, r, o, u) = (
            stop.clone(),
            requests.clone(),
            others.clone(),
            udp_ok.clone(),
        );
        let handle = std::thread::spawn(move || {
            let mut b = GraphBuilder::new();
            b.add_input(Box::new(port.rx))
                .add_node(Box::new(port.tx))
                .add_node(Box::new(Responder {
                    requests: r,
                    others: o,
                    udp_ok: u,
                    mark_partial: setup.mark_partial,
                }))
                .add_node(Box::new(Sink));
            let mut g = b.build(0, 1).expect("graph");
            let mut pool = BufferPool::with_jumbo(
                PoolConfig {
                    buffers: 1024,
                    try_hugepages: false,
                    ..PoolConfig::default()
                },
                setup.jumbo,
            )
            .expect("pool");
            let deadline = Instant::now() + Duration::from_secs(60);
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                if g.run_once(&mut pool) == 0 {
                    // A tap poll is a read() even when idle; no need to spin hard in a test.
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            g.finish();
            (
                pool.available() == pool.capacity()
                    && pool.jumbo_available() == pool.jumbo_capacity(),
                true,
            )
        });
        Worker {
            stop,
            handle: Some(handle),
            stats,
            requests,
            others,
            udp_ok,
        }
    }

    /// Stop; true when every buffer went back to the pool.
    fn finish(mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .is_some_and(|(all_back, _)| all_back)
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

fn open_in(n: &Netns, vnet_hdr: bool, stats: &Arc<PortStats>) -> TapPort {
    open_with(n, vnet_hdr, false, stats)
}

fn open_with(n: &Netns, vnet_hdr: bool, offloads: bool, stats: &Arc<PortStats>) -> TapPort {
    let (name, stats) = (n.tap.clone(), stats.clone());
    n.inside(move || {
        TapPort::open(
            &TapConfig {
                name,
                vnet_hdr,
                offloads,
                netns: None,
            },
            0,
            "tap-rx".into(),
            "tap-tx".into(),
            "responder".into(),
            stats,
        )
    })
    .expect("open the TAP")
}

fn echo_through_tap(vnet_hdr: bool) {
    let n = Netns::new();
    let stats = Arc::new(PortStats::default());
    let port = open_in(&n, vnet_hdr, &stats);
    assert!(port.rx.device().created(), "a fresh name is created");
    assert_eq!(port.rx.device().vnet_hdr(), vnet_hdr);
    n.configure();
    let rx_before = n.tap_stat("rx_packets");
    let w = Worker::start(port, stats);
    let out = n.ping(10, 56);
    // UDP from the kernel: with offloads off the TAP gets complete checksums (never
    // VIRTIO_NET_HDR_F_NEEDS_CSUM), with or without vnet headers.
    ok(&[
        "ip",
        "netns",
        "exec",
        &n.ns,
        "python3",
        "-c",
        &format!(
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for i in range(5): s.sendto(b'x' * (100 + i), ('{NEIGH_IP}', 9))\n"
        ),
    ]);
    let t0 = Instant::now();
    while w.others.load(Ordering::Relaxed) < 5 && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (requests, others, udp_ok) = (
        w.requests.load(Ordering::Relaxed),
        w.others.load(Ordering::Relaxed),
        w.udp_ok.load(Ordering::Relaxed),
    );
    let stats = w.stats.clone();
    // Read the counter while the port (and with it the TAP it created) still exists.
    let rx_delta = n.tap_stat("rx_packets") - rx_before;
    let all_back = w.finish();
    println!(
        "vnet_hdr {vnet_hdr}: TapRx got {} frames ({requests} echo requests, {others} other, \
         {udp_ok} UDP with a verified checksum), \
         TapTx sent {}; the tap's kernel rx counter rose by {rx_delta}; drops rx {} tx {}",
        stats.rx_packets.get(),
        stats.tx_packets.get(),
        stats.rx_drops.get(),
        stats.tx_drops.get(),
    );
    assert!(
        out.contains(" 0% packet loss"),
        "ping through the TAP responder lost packets:\n{out}"
    );
    assert_eq!(requests, 10, "TapRx received every echo request");
    assert_eq!(udp_ok, 5, "UDP arrived with complete checksums");
    assert_eq!(stats.tx_packets.get(), 10);
    assert!(rx_delta >= 10, "the kernel received what TapTx wrote");
    assert_eq!(stats.rx_drops.get() + stats.tx_drops.get(), 0);
    assert!(all_back, "every buffer returned to the pool");
}

#[test]
fn ping_through_a_tap_responder() {
    require_root!(skip_reason());
    echo_through_tap(false);
}

#[test]
fn ping_through_a_tap_responder_with_vnet_headers() {
    require_root!(skip_reason());
    echo_through_tap(true);
}

#[test]
fn frames_larger_than_a_buffer_are_dropped_and_counted() {
    require_root!(skip_reason());
    let n = Netns::new();
    let stats = Arc::new(PortStats::default());
    let port = open_in(&n, true, &stats);
    n.configure();
    ok(&["ip", "-n", &n.ns, "link", "set", &n.tap, "mtu", "4000"]);
    let w = Worker::start(port, stats.clone());
    let big = n.ping(3, 3000); // 3042-byte frames; buffers hold 2048
    let small = n.ping(3, 56);
    let all_back = w.finish();
    assert!(big.contains("100% packet loss"), "{big}");
    assert!(small.contains(" 0% packet loss"), "{small}");
    assert_eq!(stats.rx_drops.get(), 3, "each oversized frame counted once");
    assert!(all_back);
}

/// The named driver counter of a TAP device.
fn driver_counter(dev: &ports::TapDevice, name: &str) -> u64 {
    use graph::DriverCounters;
    dev.counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(u64::MAX, |(_, v)| v)
}

/// With offloads, a frame larger than an ordinary buffer is read with its tail in a jumbo
/// buffer and its head copied over: the 3042-byte echo requests come back intact (the kernel
/// verifies the ICMP checksum over all of it). Without a jumbo buffer in the pool such frames
/// are dropped and counted by name, and small frames still flow.
#[test]
fn with_offloads_large_frames_land_in_jumbo_buffers() {
    require_root!(skip_reason());
    for jumbo in [4, 0] {
        let n = Netns::new();
        let stats = Arc::new(PortStats::default());
        let port = open_with(&n, true, true, &stats);
        assert!(port.tx.takes_offloads());
        let dev = port.rx.device().clone();
        n.configure();
        ok(&["ip", "-n", &n.ns, "link", "set", &n.tap, "mtu", "4000"]);
        let w = Worker::start_with(
            port,
            stats.clone(),
            Setup {
                jumbo,
                ..Setup::default()
            },
        );
        let big = n.ping(3, 3000);
        let small = n.ping(3, 56);
        let all_back = w.finish();
        let no_jumbo = driver_counter(&dev, "rx_no_jumbo_buffer");
        println!("jumbo buffers {jumbo}: rx_no_jumbo_buffer {no_jumbo}\n{big}");
        assert!(small.contains(" 0% packet loss"), "{small}");
        if jumbo > 0 {
            assert!(big.contains(" 0% packet loss"), "{big}");
            assert_eq!(stats.rx_drops.get(), 0);
        } else {
            assert!(big.contains("100% packet loss"), "{big}");
            assert_eq!(
                no_jumbo, 3,
                "each large frame counted as finding no jumbo buffer"
            );
            assert_eq!(stats.rx_drops.get(), 3);
        }
        assert!(
            all_back,
            "every buffer (jumbo ones too) returned to the pool"
        );
    }
}

/// A packet with an offload (here a partial checksum) never leaves a TAP without offloads:
/// dropped and counted by name.
#[test]
fn offload_packets_never_leave_a_tap_without_offloads() {
    require_root!(skip_reason());
    let n = Netns::new();
    let stats = Arc::new(PortStats::default());
    let port = open_in(&n, true, &stats);
    assert!(!port.tx.takes_offloads());
    let dev = port.rx.device().clone();
    n.configure();
    let w = Worker::start_with(
        port,
        stats.clone(),
        Setup {
            mark_partial: true,
            ..Setup::default()
        },
    );
    let out = n.ping(3, 56);
    let all_back = w.finish();
    assert!(out.contains("100% packet loss"), "{out}");
    assert_eq!(stats.tx_packets.get(), 0);
    assert_eq!(stats.tx_drops.get(), 3);
    assert_eq!(driver_counter(&dev, "tx_vnet_offload_not_negotiated"), 3);
    assert!(all_back);
}

#[test]
fn attaches_to_an_existing_tap_and_explains_refusals() {
    require_root!(skip_reason());
    let n = Netns::new();
    ok(&[
        "ip", "-n", &n.ns, "tuntap", "add", "dev", &n.tap, "mode", "tap",
    ]);
    let stats = Arc::new(PortStats::default());
    let port = open_in(&n, false, &stats);
    assert!(
        !port.rx.device().created(),
        "an existing TAP is attached to"
    );
    // A second reader on a single-queue TAP is refused with a message naming the device.
    let (name, s2) = (n.tap.clone(), stats.clone());
    let busy = n
        .inside(move || {
            TapPort::open(
                &TapConfig::new(name),
                1,
                "rx".into(),
                "tx".into(),
                "next".into(),
                s2,
            )
            .err()
            .map(|e| e.to_string())
        })
        .expect("second open refused");
    assert!(busy.contains(&format!("`{}`", n.tap)), "{busy}");
    assert!(busy.contains("already attached"), "{busy}");
    // An interface that is not a TAP.
    let s3 = stats.clone();
    let not_tap = n
        .inside(move || {
            TapPort::open(
                &TapConfig::new("lo"),
                1,
                "rx".into(),
                "tx".into(),
                "next".into(),
                s3,
            )
            .err()
            .map(|e| e.to_string())
        })
        .expect("lo refused");
    assert!(
        not_tap.contains("`lo`") && not_tap.contains("not a single-queue TAP"),
        "{not_tap}"
    );
    drop(port);
    // The attached device outlives the port (it was created persistent by `ip tuntap`).
    ok(&["ip", "-n", &n.ns, "link", "show", &n.tap]);
}

//! TAP ports with offloads, end to end (needs root; skipped with a message otherwise). Three
//! namespaces: A's TCP sender -- TAP `ta` -- [vecplane: TapRx -> observer -> TapTx both ways]
//! -- TAP `tb` -- B, a router -- veth with checksum and segmentation offloads off -- C's
//! receiver. Both TAPs take offloads, so A's kernel hands over TCP super-packets with partial
//! checksums, which go out of `tb` as they came; B's kernel must then segment and checksum
//! them in software for the veth, and C verifies every checksum: a wrong GSO or checksum field
//! shows as a stalled or corrupt transfer and in C's `InCsumErrors`. Runs an IPv4 and an IPv6
//! transfer. Two ignored tests measure (iperf3 with and without offloads; `TapRx`'s ticks per
//! super-packet injected through an AF_PACKET socket with vnet headers). Namespaces are deleted
//! by a guard, also when the test panics; leftovers of dead runs (prefix `vptoff-`) are deleted
//! at start.

mod common;

use common::{
    delete_leftovers, missing_prerequisite, ok, require_root, run, tap_skip_reason, Sink,
};
use graph::{Dispatch, DriverCounters, GraphBuilder, Node, NodeContext, PortStats};
use packet::meta::{FLAG_CSUM_PARTIAL, GSO_TCP4, GSO_TCP6};
use packet::{BufferPool, PoolConfig};
use ports::{TapConfig, TapPort};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS_PREFIX: &str = "vptoff-";
/// Bytes each transfer moves.
const TRANSFER_BYTES: usize = 16 << 20;
/// Seconds a transfer may take before it counts as stalled.
const TRANSFER_SECONDS: u32 = 20;
/// Largest frame without segmentation on a 1500-byte MTU.
const MAX_PLAIN_FRAME: usize = 1514;

fn skip_reason() -> Option<String> {
    tap_skip_reason(&["ip", "python3", "ethtool", "timeout"])
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The three namespaces and the interface names; deleting the namespaces deletes the veth and
/// (once the ports are closed) the TAPs.
struct Topology {
    a: String,
    b: String,
    c: String,
    ta: String,
    tb: String,
}

impl Topology {
    fn new() -> Topology {
        delete_leftovers(NS_PREFIX);
        let pid = std::process::id();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let ns = |s: &str| format!("{NS_PREFIX}{pid}-{n}{s}");
        let t = Topology {
            a: ns("a"),
            b: ns("b"),
            c: ns("c"),
            ta: format!("vto{pid}x{n}a"),
            tb: format!("vto{pid}x{n}b"),
        };
        assert!(t.ta.len() <= 15);
        for ns in [&t.a, &t.b, &t.c] {
            ok(&["ip", "netns", "add", ns]);
        }
        t
    }

    /// Address everything once the TAPs exist: A 198.18.81.1 / 2001:db8:81::1 on `ta`, B .2
    /// on `tb` and 198.18.82.1 / 2001:db8:82::1 on the veth to C (.2); B forwards.
    fn configure(&self) {
        let (a, b, c) = (&self.a, &self.b, &self.c);
        let ip = |ns: &str, args: &[&str]| {
            let mut v = vec!["ip", "-n", ns];
            v.extend_from_slice(args);
            ok(&v);
        };
        ip(
            b,
            &[
                "link", "add", "vb", "type", "veth", "peer", "name", "vc", "netns", c,
            ],
        );
        for (ns, dev, v4, v6) in [
            (a, self.ta.as_str(), "198.18.81.1/24", "2001:db8:81::1/64"),
            (b, self.tb.as_str(), "198.18.81.2/24", "2001:db8:81::2/64"),
            (b, "vb", "198.18.82.1/24", "2001:db8:82::1/64"),
            (c, "vc", "198.18.82.2/24", "2001:db8:82::2/64"),
        ] {
            ip(ns, &["addr", "add", v4, "dev", dev]);
            ip(ns, &["-6", "addr", "add", v6, "dev", dev, "nodad"]);
            ip(ns, &["link", "set", dev, "up"]);
        }
        for ns in [a, b, c] {
            ip(ns, &["link", "set", "lo", "up"]);
        }
        ip(a, &["route", "add", "198.18.82.0/24", "via", "198.18.81.2"]);
        ip(
            a,
            &[
                "-6",
                "route",
                "add",
                "2001:db8:82::/64",
                "via",
                "2001:db8:81::2",
            ],
        );
        ip(c, &["route", "add", "198.18.81.0/24", "via", "198.18.82.1"]);
        ip(
            c,
            &[
                "-6",
                "route",
                "add",
                "2001:db8:81::/64",
                "via",
                "2001:db8:82::1",
            ],
        );
        for key in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
            ok(&["ip", "netns", "exec", b, "sysctl", "-qw", key]);
        }
        // B must checksum and segment what it forwards to C itself.
        ok(&[
            "ip", "netns", "exec", b, "ethtool", "-K", "vb", "tx", "off", "tso", "off", "gso",
            "off",
        ]);
    }

    /// C's TCP checksum errors so far.
    fn c_tcp_csum_errors(&self) -> u64 {
        let snmp = ok(&["ip", "netns", "exec", &self.c, "cat", "/proc/net/snmp"]);
        let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
        let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else {
            return u64::MAX;
        };
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == "InCsumErrors")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(u64::MAX)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b, &self.c] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

/// Open a TAP (with or without offloads) inside namespace `ns`; its frames go to `next`.
fn open_tap(
    ns: &str,
    tap: &str,
    prefix: &str,
    next: &str,
    offloads: bool,
    stats: Arc<PortStats>,
) -> TapPort {
    let (ns, tap, prefix, next) = (
        ns.to_string(),
        tap.to_string(),
        prefix.to_string(),
        next.to_string(),
    );
    std::thread::spawn(move || {
        let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns");
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a namespace fd we hold; affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        TapPort::open(
            &TapConfig {
                name: tap,
                vnet_hdr: true,
                offloads,
                netns: None,
            },
            0,
            format!("{prefix}-rx"),
            format!("{prefix}-tx"),
            next,
            stats,
        )
    })
    .join()
    .expect("thread in namespace")
    .expect("open the TAP")
}

/// What the observer saw going one way.
#[derive(Default)]
struct Seen {
    frames: AtomicU64,
    /// Super-packets (gso_type set) longer than a plain frame, by family.
    gso4: AtomicU64,
    gso6: AtomicU64,
    longest: AtomicU64,
    /// Frames that came in a jumbo buffer.
    jumbo: AtomicU64,
    /// Frames with a partial checksum (super-packets included).
    partial: AtomicU64,
    /// Offload metadata that does not match the frame (should stay 0).
    inconsistent: AtomicU64,
}

/// The frame offset of the L4 header and whether the frame is IPv6, for untagged IP frames.
fn l4_of(p: &[u8]) -> Option<(usize, bool)> {
    match (p.get(12..14)?, p.get(14)?) {
        ([0x08, 0x00], v) if v >> 4 == 4 => Some((14 + usize::from(v & 0x0f) * 4, false)),
        ([0x86, 0xdd], v) if v >> 4 == 6 => Some((54, true)),
        _ => None,
    }
}

/// Forwards everything to the other TAP unchanged, checking the offload metadata on the way.
struct Observer {
    name: String,
    next: String,
    seen: Arc<Seen>,
}

impl Node for Observer {
    fn name(&self) -> &str {
        &self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let s = &*self.seen;
        for &b in frame {
            let m = *cx.pool.meta(b);
            let p = cx.pool.data(b);
            s.frames.fetch_add(1, Ordering::Relaxed);
            s.longest.fetch_max(p.len() as u64, Ordering::Relaxed);
            if cx.pool.is_jumbo(b) {
                s.jumbo.fetch_add(1, Ordering::Relaxed);
                if p.len() <= cx.pool.data_size() {
                    s.inconsistent.fetch_add(1, Ordering::Relaxed);
                }
            }
            if m.flags & FLAG_CSUM_PARTIAL != 0 {
                s.partial.fetch_add(1, Ordering::Relaxed);
                // csum_start counts from the slot: minus data_offset it is the L4 header.
                let at = l4_of(p).map(|(l4, _)| l4 + usize::from(m.data_offset));
                if at != Some(usize::from(m.csum_start)) {
                    s.inconsistent.fetch_add(1, Ordering::Relaxed);
                }
            }
            if m.is_gso() {
                let v6 = l4_of(p).is_some_and(|(_, v6)| v6);
                let fits = m.gso_type == if v6 { GSO_TCP6 } else { GSO_TCP4 }
                    && m.csum_offset == 16
                    && (1..=1448).contains(&m.gso_size);
                if !fits {
                    s.inconsistent.fetch_add(1, Ordering::Relaxed);
                }
                if p.len() > MAX_PLAIN_FRAME {
                    let c = if v6 { &s.gso6 } else { &s.gso4 };
                    c.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Dispatch::AllTo(0)
    }
}

/// What the worker reports when it stops.
struct Finished {
    /// Every buffer (jumbo ones too) went back to the pool.
    all_back: bool,
    /// Driver counters of both TAPs.
    counters: Vec<(&'static str, u64)>,
    /// `ta-rx`'s (packets, TSC ticks of its non-empty polls).
    ta_rx: (u64, u64),
}

/// A worker thread forwarding between the two TAPs until stopped; `busy`: poll without sleeping
/// when idle (as vecplane's workers do), else sleep 20 us after an empty round.
struct Worker {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Finished>>,
}

impl Worker {
    fn start(ta: TapPort, tb: TapPort, ab: Arc<Seen>, ba: Arc<Seen>, busy: bool) -> Worker {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let counters: Vec<Arc<dyn DriverCounters>> =
            vec![ta.rx.device().clone(), tb.rx.device().clone()];
        let handle = std::thread::spawn(move || {
            let mut b = GraphBuilder::new();
            b.add_input(Box::new(ta.rx))
                .add_input(Box::new(tb.rx))
                .add_node(Box::new(ta.tx))
                .add_node(Box::new(tb.tx))
                .add_node(Box::new(Observer {
                    name: "a-to-b".into(),
                    next: "tb-tx".into(),
                    seen: ab,
                }))
                .add_node(Box::new(Observer {
                    name: "b-to-a".into(),
                    next: "ta-tx".into(),
                    seen: ba,
                }));
            let mut g = b.build(0, 1).expect("graph");
            let stats = g.stats();
            let mut pool = jumbo_pool();
            let deadline = Instant::now() + Duration::from_secs(120);
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                if g.run_once(&mut pool) == 0 && !busy {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
            g.finish();
            let rx = stats.node_names.iter().position(|n| n == "ta-rx");
            let ta_rx = rx
                .and_then(|i| stats.nodes.get(i))
                .map_or((0, 0), |n| (n.packets.get(), n.busy_clocks.get()));
            Finished {
                all_back: pool.available() == pool.capacity()
                    && pool.jumbo_available() == pool.jumbo_capacity(),
                counters: counters.iter().flat_map(|d| d.counters()).collect(),
                ta_rx,
            }
        });
        Worker {
            stop,
            handle: Some(handle),
        }
    }

    fn finish(mut self) -> Finished {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or(Finished {
                all_back: false,
                counters: Vec::new(),
                ta_rx: (0, 0),
            })
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

/// Receiver (in C): accept one connection, read to EOF, print the byte count and SHA-256.
const RECEIVER: &str = "import hashlib, socket, sys
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1)
print('ready', flush=True)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    d = c.recv(1 << 20)
    if not d: break
    h.update(d); n += len(d)
print(n, h.hexdigest(), flush=True)
";

/// Sender (in A): send N pseudo-random bytes, print the byte count and SHA-256.
const SENDER: &str = "import hashlib, random, socket, sys
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
n = int(sys.argv[2]); chunk = random.Random(7).randbytes(1 << 20)
s = socket.create_connection((sys.argv[1], 5001), timeout=15); h = hashlib.sha256(); sent = 0
while sent < n:
    d = chunk[:min(len(chunk), n - sent)]
    s.sendall(d); h.update(d); sent += len(d)
    chunk = chunk[1:] + chunk[:1]
s.shutdown(socket.SHUT_WR); s.recv(1); s.close()
print(sent, h.hexdigest(), flush=True)
";

/// Move `TRANSFER_BYTES` from A to C's `dst`; the sender's and the receiver's "count sha256".
fn transfer(t: &Topology, dst: &str) -> (String, String, Duration) {
    let limit = TRANSFER_SECONDS.to_string();
    let mut rx = Command::new("ip")
        .args([
            "netns", "exec", &t.c, "timeout", &limit, "python3", "-c", RECEIVER, dst,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the receiver");
    let mut lines = BufReader::new(rx.stdout.take().expect("piped")).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(ready, "ready", "the receiver did not start");
    let t0 = Instant::now();
    let sent = run(&[
        "ip",
        "netns",
        "exec",
        &t.a,
        "timeout",
        &limit,
        "python3",
        "-c",
        SENDER,
        dst,
        &TRANSFER_BYTES.to_string(),
    ]);
    let took = t0.elapsed();
    let got = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = rx.wait();
    let sent_line = String::from_utf8_lossy(&sent.stdout).trim().to_string();
    assert!(
        sent.status.success(),
        "sender to {dst} failed after {took:?} (a stall means broken offloads): {}",
        String::from_utf8_lossy(&sent.stderr)
    );
    (sent_line, got, took)
}

#[test]
fn tcp_super_packets_cross_two_offloading_taps() {
    require_root!(skip_reason());
    let t = Topology::new();
    let (sa, sb) = (
        Arc::new(PortStats::default()),
        Arc::new(PortStats::default()),
    );
    let ta = open_tap(&t.a, &t.ta, "ta", "a-to-b", true, sa.clone());
    let tb = open_tap(&t.b, &t.tb, "tb", "b-to-a", true, sb.clone());
    assert!(ta.rx.device().offloads() && ta.tx.takes_offloads());
    t.configure();
    let (ab, ba) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let w = Worker::start(ta, tb, ab.clone(), ba.clone(), false);
    let mut results = Vec::new();
    for dst in ["198.18.82.2", "2001:db8:82::2"] {
        let (sent, got, took) = transfer(&t, dst);
        let mbit = TRANSFER_BYTES as f64 * 8.0 / took.as_secs_f64() / 1e6;
        println!("{dst}: sent `{sent}`, received `{got}` in {took:?} ({mbit:.0} Mbit/s)");
        results.push((dst, sent, got));
    }
    let csum_errors = t.c_tcp_csum_errors();
    let Finished {
        all_back, counters, ..
    } = w.finish();
    let g = |s: &Seen| {
        [
            &s.frames,
            &s.gso4,
            &s.gso6,
            &s.longest,
            &s.jumbo,
            &s.partial,
            &s.inconsistent,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    };
    let (fab, fba) = (g(&ab), g(&ba));
    println!(
        "A->B [frames, gso4 > 1514, gso6 > 1514, longest, jumbo, partial csum, inconsistent]: \
         {fab:?}\nB->A: {fba:?}\nta rx {} drops {} tx {} drops {}; tb rx {} drops {} tx {} \
         drops {}\nC's TCP checksum errors: {csum_errors}\nnonzero driver counters: {:?}",
        sa.rx_packets.get(),
        sa.rx_drops.get(),
        sa.tx_packets.get(),
        sa.tx_drops.get(),
        sb.rx_packets.get(),
        sb.rx_drops.get(),
        sb.tx_packets.get(),
        sb.tx_drops.get(),
        counters.iter().filter(|(_, v)| *v != 0).collect::<Vec<_>>(),
    );
    for (dst, sent, got) in &results {
        assert!(
            sent.starts_with(&format!("{TRANSFER_BYTES} ")),
            "{dst}: sender said `{sent}`"
        );
        assert_eq!(sent, got, "{dst}: what C received is what A sent");
    }
    assert!(
        fab[1] > 0,
        "IPv4 super-packets larger than a plain frame came in"
    );
    assert!(
        fab[2] > 0,
        "IPv6 super-packets larger than a plain frame came in"
    );
    assert!(
        fab[3] as usize > MAX_PLAIN_FRAME && fab[4] > 0,
        "jumbo buffers carried them"
    );
    assert_eq!(fab[6] + fba[6], 0, "offload metadata matches the frames");
    assert_eq!(csum_errors, 0, "C saw no TCP checksum error");
    assert_eq!(
        sa.rx_drops.get() + sa.tx_drops.get() + sb.rx_drops.get() + sb.tx_drops.get(),
        0
    );
    assert!(
        counters.iter().all(|(_, v)| *v == 0),
        "no refusal counted: {counters:?}"
    );
    assert!(
        all_back,
        "every buffer (jumbo ones too) returned to the pool"
    );
}

/// Measurement, not a check: iperf3 (5 s) from A to C through the two TAPs, with and without
/// offloads, the worker busy-polling; prints the throughput and `ta-rx`'s TSC ticks per
/// packet and per KiB. Run: `cargo test --release -p vecplane-ports --test tap_offloads --
/// --ignored --nocapture`.
#[test]
#[ignore = "measurement: run with --ignored --release --nocapture"]
fn measure_tcp_through_two_taps_with_and_without_offloads() {
    require_root!(skip_reason().or_else(|| missing_prerequisite("iperf3", &["iperf3"])));
    for offloads in [false, true] {
        let t = Topology::new();
        let (sa, sb) = (
            Arc::new(PortStats::default()),
            Arc::new(PortStats::default()),
        );
        let ta = open_tap(&t.a, &t.ta, "ta", "a-to-b", offloads, sa.clone());
        let tb = open_tap(&t.b, &t.tb, "tb", "b-to-a", offloads, sb);
        t.configure();
        let (ab, ba) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        let w = Worker::start(ta, tb, ab.clone(), ba, true);
        let mut server = Command::new("ip")
            .args(["netns", "exec", &t.c, "timeout", "20", "iperf3", "-s", "-1"])
            .stdout(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        std::thread::sleep(Duration::from_millis(300));
        let out = ok(&[
            "ip",
            "netns",
            "exec",
            &t.a,
            "timeout",
            "15",
            "iperf3",
            "-c",
            "198.18.82.2",
            "-t",
            "5",
            "-f",
            "m",
        ]);
        let _ = server.wait();
        let f = w.finish();
        let summary: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("sender") || l.contains("receiver"))
            .collect();
        let (pkts, ticks) = f.ta_rx;
        let bytes = sa.rx_bytes.get().max(1);
        println!(
            "offloads {offloads}: {summary:#?}\n  ta-rx: {pkts} packets, {} bytes, longest {}, \
             {} ticks/packet, {:.0} ticks/KiB; csum errors in C {}",
            bytes,
            ab.longest.load(Ordering::Relaxed),
            ticks / pkts.max(1),
            ticks as f64 * 1024.0 / bytes as f64,
            t.c_tcp_csum_errors(),
        );
    }
}

/// An AF_PACKET socket in namespace `ns` that sends frames with a virtio-net header on `dev`.
fn vnet_packet_socket(ns: &str, dev: &str) -> std::os::fd::OwnedFd {
    let (ns, dev) = (ns.to_string(), dev.to_string());
    std::thread::spawn(move || {
        use std::os::fd::{AsRawFd, FromRawFd};
        let file = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns");
        // SAFETY: setns on a namespace fd we hold; affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        // SAFETY: plain socket call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(raw >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        // SAFETY: PACKET_VNET_HDR reads one int we own.
        let r = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        let cname = std::ffi::CString::new(dev).expect("name");
        // SAFETY: `cname` is NUL-terminated.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: bind reads the sockaddr_ll we own.
        let r = unsafe {
            libc::bind(
                raw,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        fd
    })
    .join()
    .expect("socket thread")
}

/// Measurement, not a check: the TSC ticks `TapRx` spends per received 64 KiB TCP super-packet
/// (injected onto the TAP with an AF_PACKET socket that sends virtio-net headers, 200 at a
/// time, 20 rounds). Run: `cargo test --release -p vecplane-ports --test tap_offloads --
/// --ignored --nocapture measure_rx`.
#[test]
#[ignore = "measurement: run with --ignored --release --nocapture"]
fn measure_rx_of_super_packets() {
    require_root!(skip_reason());
    let t = Topology::new();
    let stats = Arc::new(PortStats::default());
    let port = open_tap(&t.a, &t.ta, "ta", "sink", true, stats.clone());
    ok(&["ip", "-n", &t.a, "link", "set", &t.ta, "up"]);
    let sock = vnet_packet_socket(&t.a, &t.ta);
    // vnet header (TCPv4 GSO, checksum partial at 34 + 16) + a 65226-byte TCP/IPv4 frame.
    let len = 65226usize;
    let mut buf = vec![0u8; 10 + len];
    buf[..10].copy_from_slice(&[1, 1, 54, 0, 0xa8, 0x05, 34, 0, 16, 0]);
    let f = &mut buf[10..];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[198, 18, 81, 1]);
    f[30..34].copy_from_slice(&[198, 18, 81, 2]);
    f[34 + 12] = 5 << 4;
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(port.rx)).add_node(Box::new(Sink));
    let mut g = b.build(0, 1).expect("graph");
    let gs = g.stats();
    let mut pool = jumbo_pool();
    let (rounds, burst) = (20u64, 200u64);
    let i = gs
        .node_names
        .iter()
        .position(|n| n == "ta-rx")
        .expect("ta-rx");
    let node = &gs.nodes[i];
    // Ticks per packet of each round: the machine is shared, the lowest rounds are the cost.
    let mut per_round = Vec::new();
    for _ in 0..rounds {
        let before = stats.rx_packets.get();
        let (p0, c0) = (node.packets.get(), node.busy_clocks.get());
        for _ in 0..burst {
            use std::os::fd::AsRawFd;
            // SAFETY: sends `buf.len()` bytes from memory we hold.
            let r = unsafe {
                libc::send(
                    sock.as_raw_fd(),
                    buf.as_ptr() as *const libc::c_void,
                    buf.len(),
                    0,
                )
            };
            assert_eq!(r, buf.len() as isize, "{}", std::io::Error::last_os_error());
        }
        let t0 = Instant::now();
        while stats.rx_packets.get() - before < burst && t0.elapsed() < Duration::from_secs(5) {
            g.run_once(&mut pool);
        }
        let (p, c) = (node.packets.get() - p0, node.busy_clocks.get() - c0);
        per_round.push(c / p.max(1));
    }
    let (pkts, ticks) = (node.packets.get(), node.busy_clocks.get());
    g.finish();
    per_round.sort_unstable();
    println!(
        "TapRx: {pkts} super-packets of {len} bytes (sent {}), drops {}: {} ticks/packet \
         overall; per round min {} median {}",
        rounds * burst,
        stats.rx_drops.get(),
        ticks / pkts.max(1),
        per_round[0],
        per_round[per_round.len() / 2],
    );
    assert!(pkts >= rounds * burst, "every super-packet was received");
}

/// 2048 ordinary buffers and 256 jumbo ones (a vector of super-packets).
fn jumbo_pool() -> BufferPool {
    BufferPool::with_jumbo(
        PoolConfig {
            buffers: 2048,
            try_hugepages: false,
            ..PoolConfig::default()
        },
        256,
    )
    .expect("pool")
}

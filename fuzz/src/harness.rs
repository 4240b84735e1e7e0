//! The router graph in-process with a packet injector in place of port drivers, for fuzzing and
//! property tests: `Harness::new(&spec)` builds one worker's pool and graph with
//! `dataplane::build::add_protocol_nodes` (the data plane's own nodes), but its only input node is
//! `InjectRx` (frames handed to it by the test, on any port) and each port's transmit node is a
//! `CaptureTx` (counts, optionally keeps the bytes, frees). After each `run`, the invariants are
//! checked: every buffer is back in the pool, and rx + ARP/ND requests made = tx + drops +
//! packets still waiting for a neighbour (flushed after each run).
//!
//! Shared by `fuzz/fuzz_targets/*.rs` (through the `vecplane_fuzz` crate) and
//! `crates/dataplane/tests/pcap_replay.rs` (through `#[path]`), so it uses only the crates the
//! data plane itself depends on.
#![allow(dead_code)]

use dataplane::{
    DataplaneSpec, IpPolicy, NeighbourSpec, OptionsPolicy, PortDriver, PortSpec, RouteSpec,
    RouteTarget, XconnectSpec,
};
use graph::{Dispatch, Graph, GraphBuilder, GraphStats, InputNode, Node, NodeContext, PortStats};
use nodes::names;
use nodes::neighbour::NeighbourHandle;
use packet::{BufferPool, PoolConfig};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// A TSC rate for the rate limiter (any value works: the harness spec's bucket never empties).
pub const TSC_HZ: u64 = 2_000_000_000;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("IPv4 address")
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("IPv6 address")
}

fn port(name: &str, last: u8, mtu: u16, ip4: &[&str], ip6: &[&str]) -> PortSpec {
    let split = |s: &&str| {
        let (a, l) = s.split_once('/').expect("prefix");
        (a.to_string(), l.parse::<u8>().expect("length"))
    };
    PortSpec {
        name: name.into(),
        mac: [2, 0, 0, 0, last, 1],
        mtu,
        ip4: ip4.iter().map(split).map(|(a, l)| (v4(&a), l)).collect(),
        ip6: ip6.iter().map(split).map(|(a, l)| (v6(&a), l)).collect(),
        driver: PortDriver::Pcap { rx: None, tx: None },
    }
}

fn neighbour(addr: &str, last: u8, port: usize) -> NeighbourSpec {
    NeighbourSpec {
        ip: ip(addr),
        mac: [2, 0, 0, 0, port as u8, last],
        port,
    }
}

fn route4(prefix: &str, len: u8, via: &[&str]) -> RouteSpec<Ipv4Addr> {
    RouteSpec {
        prefix: v4(prefix),
        len,
        target: if via.is_empty() {
            RouteTarget::Drop
        } else {
            RouteTarget::Via(via.iter().map(|a| v4(a)).collect())
        },
    }
}

fn route6(prefix: &str, len: u8, via: &[&str]) -> RouteSpec<Ipv6Addr> {
    RouteSpec {
        prefix: v6(prefix),
        len,
        target: if via.is_empty() {
            RouteTarget::Drop
        } else {
            RouteTarget::Via(via.iter().map(|a| v6(a)).collect())
        },
    }
}

/// The fixed router the fuzz targets and property tests use. Ports (id: name):
/// 0 `p0` 198.18.0.1/24 2001:db8::1/64; 1 `p1` 198.18.1.1/24 2001:db8:1::1/64;
/// 2 `p2` 198.18.2.1/24 2001:db8:2::1/64, MTU 1000; 3 `p3` cross-connected to p1 (dst MAC
/// rewritten); 4 `p4` 198.18.4.1/24 only, MTU 576, and no transmit side (`port-has-no-tx`).
/// Routes: 198.19.0.0/16 ECMP over two p1 neighbours, 198.19.128.0/17 via p2, 198.19.64.0/18 via
/// p4, 198.19.255.0/24 drop; 2001:db8:100::/40 ECMP on p1, 2001:db8:200::/40 via p2,
/// 2001:db8:dead::/48 drop. ICMP errors are not rate-limited in practice (deterministic counts).
pub fn router_spec() -> DataplaneSpec {
    DataplaneSpec {
        buffers: 1024,
        data_size: 2048,
        worker_cpu: None,
        ports: vec![
            port("p0", 0, 1500, &["198.18.0.1/24"], &["2001:db8::1/64"]),
            port("p1", 1, 1500, &["198.18.1.1/24"], &["2001:db8:1::1/64"]),
            port("p2", 2, 1000, &["198.18.2.1/24"], &["2001:db8:2::1/64"]),
            port("p3", 3, 1500, &[], &[]),
            port("p4", 4, 576, &["198.18.4.1/24"], &[]),
        ],
        neighbours: vec![
            neighbour("198.18.0.2", 0xa0, 0),
            neighbour("2001:db8::2", 0xa0, 0),
            neighbour("198.18.1.2", 0xb0, 1),
            neighbour("198.18.1.3", 0xb1, 1),
            neighbour("2001:db8:1::2", 0xb0, 1),
            neighbour("2001:db8:1::3", 0xb1, 1),
            neighbour("198.18.2.2", 0xc0, 2),
            neighbour("2001:db8:2::2", 0xc0, 2),
            neighbour("198.18.4.2", 0xe0, 4),
        ],
        routes4: vec![
            route4("198.19.0.0", 16, &["198.18.1.2", "198.18.1.3"]),
            route4("198.19.128.0", 17, &["198.18.2.2"]),
            route4("198.19.64.0", 18, &["198.18.4.2"]),
            route4("198.19.255.0", 24, &[]),
        ],
        routes6: vec![
            route6("2001:db8:100::", 40, &["2001:db8:1::2", "2001:db8:1::3"]),
            route6("2001:db8:200::", 40, &["2001:db8:2::2"]),
            route6("2001:db8:dead::", 48, &[]),
        ],
        xconnects: vec![XconnectSpec {
            from: 3,
            to: 1,
            dst_mac: Some([2, 0, 0, 0, 1, 0xee]),
        }],
        ip: IpPolicy {
            ip4_options: OptionsPolicy::Forward,
            icmp_errors_per_second: 1_000_000_000,
            icmp_errors_burst: 1_000_000,
        },
        ..DataplaneSpec::default()
    }
}

/// Ports of `router_spec` that transmit (p4 has no transmit side).
pub fn router_tx_ports() -> Vec<bool> {
    vec![true, true, true, true, false]
}

// ----------------------------------------------------------------------------------------------
// Nodes

/// One frame waiting to be received.
#[derive(Clone, Debug)]
pub struct Injected {
    pub port: u16,
    pub ts: u64,
    pub bytes: Vec<u8>,
}

type Queue = Arc<Mutex<VecDeque<Injected>>>;

/// Input node: receives the frames the test queued, each on its own port. Like a pcap port, one
/// poll takes at most one vector's worth of frames, those it cannot receive included, so a
/// replay of the same frames splits into the same vectors as through `vecplane run`.
struct InjectRx {
    queue: Queue,
    stats: Vec<Arc<PortStats>>,
}

impl InputNode for InjectRx {
    fn name(&self) -> &str {
        "inject-rx"
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ETHERNET_INPUT.to_string()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut q = self.queue.lock().expect("queue");
        let mut n = 0;
        for _ in 0..out.len() {
            let Some(f) = q.pop_front() else { break };
            let stats = &self.stats[f.port as usize % self.stats.len()];
            if f.bytes.is_empty() || f.bytes.len() > cx.pool.data_size() {
                stats.rx_drops.add(1);
                continue;
            }
            let Some(b) = cx.pool.alloc() else {
                stats.rx_drops.add(1);
                continue;
            };
            assert!(cx.pool.write_packet(b, &f.bytes));
            let m = cx.pool.meta_mut(b);
            m.rx_port = f.port;
            m.timestamp_ns = f.ts;
            stats.rx_packets.add(1);
            stats.rx_bytes.add(f.bytes.len() as u64);
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }

    fn is_finished(&self) -> bool {
        self.queue.lock().map(|q| q.is_empty()).unwrap_or(true)
    }
}

/// One transmitted frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub port: u16,
    pub ts: u64,
    pub bytes: Vec<u8>,
}

/// Transmit node of one port: counts, keeps the bytes when asked, frees.
struct CaptureTx {
    name: String,
    port: u16,
    stats: Arc<PortStats>,
    sink: Arc<Mutex<Vec<Sent>>>,
}

impl Node for CaptureTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut sink = self.sink.lock().expect("sink");
        for &b in frame {
            let m = cx.pool.meta(b);
            assert_eq!(
                m.tx_port, self.port,
                "{}: packet for port {}",
                self.name, m.tx_port
            );
            let data = cx.pool.data(b);
            self.stats.tx_packets.add(1);
            self.stats.tx_bytes.add(data.len() as u64);
            sink.push(Sent {
                port: self.port,
                ts: m.timestamp_ns,
                bytes: data.to_vec(),
            });
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

/// The graph, its pool, the injector and the captured output.
pub struct Harness {
    /// The spec the graph was built from, plus the neighbours it has learned (see
    /// `note_learned_neighbours`).
    pub spec: DataplaneSpec,
    /// How many of `spec.neighbours` the spec configured (the rest were learned).
    configured_neighbours: usize,
    pub pool: BufferPool,
    pub graph: Graph,
    pub stats: Arc<GraphStats>,
    pub ports: Vec<Arc<PortStats>>,
    queue: Queue,
    sink: Arc<Mutex<Vec<Sent>>>,
    next_ts: u64,
    neighbours: NeighbourHandle,
    /// ARP and Neighbor Discovery frames sent so far (requests vecplane made, and replies).
    pub neighbour_frames: Vec<Sent>,
    /// Free the packets waiting for a neighbour after each `run` (default). Tests of
    /// resolution turn it off so a later ARP/ND reply releases them.
    pub flush_after_run: bool,
}

/// Counters of one `run`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub rx: u64,
    pub rx_drops: u64,
    pub tx: u64,
    pub drops: u64,
}

impl Harness {
    /// Build from `spec`; `tx[p]` says whether port `p` has a transmit side.
    pub fn new(spec: &DataplaneSpec, tx: &[bool]) -> Harness {
        let pool = BufferPool::new(PoolConfig {
            buffers: spec.buffers,
            headroom: 128,
            data_size: spec.data_size,
            try_hugepages: false,
        })
        .expect("pool");
        let queue: Queue = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::new(Mutex::new(Vec::new()));
        let ports: Vec<Arc<PortStats>> = spec
            .ports
            .iter()
            .map(|_| Arc::new(PortStats::default()))
            .collect();
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(InjectRx {
            queue: queue.clone(),
            stats: ports.clone(),
        }));
        let mut tx_nodes = Vec::new();
        for (id, p) in spec.ports.iter().enumerate() {
            if tx.get(id).copied().unwrap_or(true) {
                let name = format!("{}-tx", p.name);
                b.add_node(Box::new(CaptureTx {
                    name: name.clone(),
                    port: id as u16,
                    stats: ports[id].clone(),
                    sink: sink.clone(),
                }));
                tx_nodes.push(Some(name));
            } else {
                tx_nodes.push(None);
            }
        }
        let protocols =
            dataplane::build::add_protocol_nodes(spec, &mut b, tx_nodes, TSC_HZ).expect("nodes");
        let graph = b.build(0, TSC_HZ).expect("graph");
        let stats = graph.stats();
        Harness {
            spec: spec.clone(),
            configured_neighbours: spec.neighbours.len(),
            pool,
            graph,
            stats,
            ports,
            queue,
            sink,
            next_ts: 1,
            neighbours: protocols.neighbours,
            neighbour_frames: Vec::new(),
            flush_after_run: true,
        }
    }

    /// The router of `router_spec()`.
    pub fn router() -> Harness {
        Harness::new(&router_spec(), &router_tx_ports())
    }

    pub fn totals(&self) -> Totals {
        Totals {
            rx: self.ports.iter().map(|p| p.rx_packets.get()).sum(),
            rx_drops: self.ports.iter().map(|p| p.rx_drops.get()).sum(),
            tx: self.ports.iter().map(|p| p.tx_packets.get()).sum(),
            drops: self.stats.total_drops(),
        }
    }

    /// Drop counts by "node/reason" (non-zero only).
    pub fn drops(&self) -> Vec<(String, u64)> {
        self.stats
            .error_names
            .iter()
            .zip(&self.stats.errors)
            .filter(|(_, c)| c.get() > 0)
            .map(|((n, r), c)| (format!("{n}/{r}"), c.get()))
            .collect()
    }

    /// Receive `frames` (port, bytes), carry them through the graph, and return what was sent,
    /// each with the timestamp its input got (inputs are numbered from 1 upwards across runs;
    /// the `i`-th frame of this call has timestamp `first_ts + i`). Panics when a buffer leaked
    /// or the counters do not add up.
    pub fn run(&mut self, frames: &[(u16, &[u8])]) -> (u64, Vec<Sent>) {
        let first_ts = self.next_ts;
        {
            let mut q = self.queue.lock().expect("queue");
            for (i, (p, f)) in frames.iter().enumerate() {
                q.push_back(Injected {
                    port: *p,
                    ts: first_ts + i as u64,
                    bytes: f.to_vec(),
                });
            }
        }
        self.next_ts += frames.len() as u64;
        let before = self.totals();
        let learned_before = self.learned();
        let requests_before = self.requests_sent();
        let held_before = self.held();
        let mut rounds = 0;
        loop {
            let n = self.graph.run_once(&mut self.pool);
            if n == 0 && self.graph.is_finished() {
                break;
            }
            rounds += 1;
            assert!(rounds < 1_000_000, "graph never finishes");
        }
        // Packets still waiting for a neighbour are dropped between runs.
        let originated = self.requests_sent() - requests_before;
        let before_flush = self.totals();
        if self.flush_after_run {
            dataplane::build::flush_neighbours(&self.neighbours, &mut self.pool, &self.stats);
        }
        let after = self.totals();
        let flushed = after.drops - before_flush.drops;
        let held = self.held();
        assert_eq!(
            self.pool.available() + held as usize,
            self.pool.capacity(),
            "buffer leak: {} of {} buffers not returned to the pool",
            self.pool.capacity() - self.pool.available(),
            self.pool.capacity()
        );
        let (rx, tx, drops) = (
            after.rx - before.rx,
            after.tx - before.tx,
            after.drops - before.drops,
        );
        assert_eq!(
            rx + originated + held_before,
            tx + drops + held,
            "rx {rx} + made {originated} + waiting before {held_before} != tx {tx} + drops \
             {drops} (of which {flushed} flushed) + waiting now {held}; drops now {:?}",
            self.drops()
        );
        assert_eq!(
            rx + after.rx_drops - before.rx_drops,
            frames.len() as u64,
            "every injected frame is received or counted as an rx drop"
        );
        let sent = std::mem::take(&mut *self.sink.lock().expect("sink"));
        // ARP/ND frames vecplane made come from the port's own MAC; bridged ones do not, and
        // cross-connected ones (which also get the port's MAC) keep the timestamp of a frame
        // received on a cross-connected port.
        let spec = &self.spec;
        let xconnected: Vec<u64> = frames
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| spec.xconnects.iter().any(|x| x.from == *p as usize))
            .map(|(i, _)| first_ts + i as u64)
            .collect();
        let (neighbour, forwarded): (Vec<Sent>, Vec<Sent>) = sent.into_iter().partition(|s| {
            is_neighbour_frame(&s.bytes)
                && !xconnected.contains(&s.ts)
                && spec
                    .ports
                    .get(s.port as usize)
                    .is_some_and(|p| s.bytes[6..12] == p.mac)
        });
        for s in &neighbour {
            if let Err(e) = check_neighbour_frame(&self.spec, s.port, &s.bytes) {
                panic!("bad ARP/ND frame on port {}: {e}: {:02x?}", s.port, s.bytes);
            }
        }
        self.neighbour_frames.extend(neighbour);
        self.note_learned_neighbours(&learned_before);
        (first_ts, forwarded)
    }

    /// Make `self.spec.neighbours` the configured neighbours plus those the graph knows (ARP/ND)
    /// before and after this run, so `check_output(&h.spec, ..)` accepts packets routed to a
    /// learned host in this or a later run (the tables outlive a run). The graph was built from
    /// the spec as given; only the checks read the additions. (A MAC learned and replaced
    /// within one run is not listed.)
    fn note_learned_neighbours(&mut self, before: &[NeighbourSpec]) {
        let after = self.learned();
        self.spec.neighbours.truncate(self.configured_neighbours);
        for n in before.iter().chain(&after) {
            if !self.spec.neighbours.contains(n) {
                self.spec.neighbours.push(n.clone());
            }
        }
    }

    /// The neighbours whose MAC the graph has learned.
    fn learned(&self) -> Vec<NeighbourSpec> {
        let rows = self.neighbours.with(|n| n.rows(graph::rdtsc()));
        rows.into_iter()
            .filter_map(|r| {
                r.mac.map(|mac| NeighbourSpec {
                    ip: r.ip,
                    mac,
                    port: r.port as usize,
                })
            })
            .collect()
    }

    /// Packets waiting for a neighbour.
    pub fn held(&self) -> u64 {
        self.neighbours.with(|n| n.queued() as u64)
    }

    /// Packets the graph made itself: ARP requests and Neighbor Solicitations (new buffers)
    /// and flood copies (the nodes' `emitted`).
    fn requests_sent(&self) -> u64 {
        let copies: u64 = self.stats.nodes.iter().map(|n| n.emitted.get()).sum();
        copies
            + self.neighbours.with(|n| {
                let s = n.stats();
                s.arp_requests_sent + s.ns_sent
            })
    }
}

// ----------------------------------------------------------------------------------------------
// An oracle for single outputs: is `out` (sent on `out_port`) a correct result of receiving
// `input` on `rx_port`? It checks the shape, not the routing decision (the Python model in
// scripts/vecmodel.py checks decisions).

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn fold_sum(data: &[u8], init: u64) -> u16 {
    let mut s = init;
    for c in data.chunks(2) {
        s += (u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])) as u64;
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn l3_of(frame: &[u8]) -> Option<(usize, u16)> {
    let mut off = 14;
    let mut t = be16(frame, 12);
    for _ in 0..2 {
        if t == 0x8100 || t == 0x88a8 {
            if frame.len() < off + 4 {
                return None;
            }
            t = be16(frame, off + 2);
            off += 4;
        }
    }
    Some((off, t))
}

/// True for ARP frames and ICMPv6 Neighbor Solicitations/Advertisements (an answer keeps the
/// VLAN tags of the request it answers).
pub fn is_neighbour_frame(f: &[u8]) -> bool {
    if f.len() < 14 {
        return false;
    }
    match l3_of(f) {
        Some((_, 0x0806)) => true,
        Some((l3, 0x86dd)) => {
            f.len() > l3 + 40 && f[l3 + 6] == 58 && (f[l3 + 40] == 135 || f[l3 + 40] == 136)
        }
        _ => false,
    }
}

/// Check an ARP or ND frame vecplane sent on `port`: from the port's MAC, about one of its
/// addresses, with a valid ICMPv6 checksum.
pub fn check_neighbour_frame(spec: &DataplaneSpec, port: u16, f: &[u8]) -> Result<(), String> {
    let p = spec
        .ports
        .get(port as usize)
        .ok_or(format!("frame on unknown port {port}"))?;
    if f[6..12] != p.mac {
        return Err("source MAC is not the port's".into());
    }
    let (l3, t) = l3_of(f).ok_or("ARP/ND frame with cut VLAN tags")?;
    let h = &f[l3..];
    if t == 0x0806 {
        if h.len() < 28 || f.len() < 60 {
            return Err(format!("ARP frame of {} bytes", f.len()));
        }
        if be16(h, 0) != 1 || be16(h, 2) != 0x0800 || h[4] != 6 || h[5] != 4 {
            return Err("ARP header is not Ethernet/IPv4".into());
        }
        let op = be16(h, 6);
        if op != 1 && op != 2 {
            return Err(format!("ARP operation {op}"));
        }
        if h[8..14] != p.mac {
            return Err("ARP sender MAC is not the port's".into());
        }
        let sender = Ipv4Addr::new(h[14], h[15], h[16], h[17]);
        if !p.ip4.iter().any(|(a, _)| *a == sender) {
            return Err(format!("ARP sender {sender} is not the port's address"));
        }
        return Ok(());
    }
    if h.len() < 40 || h[7] != 255 {
        return Err("ND message without an IPv6 header of hop limit 255".into());
    }
    let payload = be16(h, 4) as usize;
    if h.len() < 40 + payload || payload < 24 {
        return Err("ND payload length".into());
    }
    let mut pseudo: u64 = 0;
    for c in h[8..40].chunks(2) {
        pseudo += be16(c, 0) as u64;
    }
    pseudo += payload as u64 + 58;
    if fold_sum(&h[40..40 + payload], pseudo) != 0xffff {
        return Err("ICMPv6 checksum".into());
    }
    Ok(())
}

/// Check one output against the frame it came from.
pub fn check_output(
    spec: &DataplaneSpec,
    rx_port: u16,
    input: &[u8],
    out_port: u16,
    out: &[u8],
) -> Result<(), String> {
    let op = spec
        .ports
        .get(out_port as usize)
        .ok_or(format!("output on unknown port {out_port}"))?;
    if out.len() < 14 {
        return Err(format!("output of {} bytes", out.len()));
    }
    if out[6..12] != op.mac {
        return Err(format!(
            "source MAC {:02x?} is not port {}'s",
            &out[6..12],
            op.name
        ));
    }
    if let Some(x) = spec.xconnects.iter().find(|x| x.from == rx_port as usize) {
        if out_port as usize != x.to {
            return Err(format!(
                "cross-connect output on port {out_port}, not {}",
                x.to
            ));
        }
        let dst = x
            .dst_mac
            .map(|m| m.to_vec())
            .unwrap_or_else(|| input[0..6].to_vec());
        if out[0..6] != dst[..] || out[12..] != input[12..] {
            return Err("cross-connect changed more than the MACs".into());
        }
        return Ok(());
    }
    let neighbours: Vec<[u8; 6]> = spec
        .neighbours
        .iter()
        .filter(|n| n.port == out_port as usize)
        .map(|n| n.mac)
        .collect();
    if !neighbours.iter().any(|m| out[0..6] == m[..]) {
        return Err(format!(
            "destination MAC {:02x?} is no neighbour of the port",
            &out[0..6]
        ));
    }
    if input.len() < 14 {
        return Err("output from an input shorter than an Ethernet header".into());
    }
    let (l3, t) = l3_of(input).ok_or("input has no L3")?;
    let (inp, o) = (&input[l3..], &out[14..]);
    let et = be16(out, 12);
    if et != t {
        return Err(format!("ethertype {et:#06x}, input had {t:#06x}"));
    }
    let rp = &spec.ports[rx_port as usize];
    match et {
        0x0800 => {
            // ip4-input cuts what follows the total length (link-layer padding or a trailer).
            let inp = &inp[..(be16(inp, 2) as usize).min(inp.len())];
            let ihl = ((o[0] & 15) as usize) * 4;
            if o.len() < ihl || fold_sum(&o[..ihl], 0) != 0xffff {
                return Err("IPv4 header checksum does not verify".into());
            }
            let forwarded = o.len() == inp.len()
                && o[..8] == inp[..8]
                && o[9] == inp[9]
                && o[12..] == inp[12..];
            if forwarded {
                if o[8] != inp[8].wrapping_sub(1) || inp[8] <= 1 {
                    return Err(format!("TTL {} -> {}", inp[8], o[8]));
                }
                return Ok(());
            }
            // Otherwise an ICMP error about the input.
            let src = rp
                .ip4
                .first()
                .ok_or("ICMP error from a port without IPv4")?
                .0
                .octets();
            if o[9] != 1
                || o[8] != 64
                || o[1] != 0xc0
                || ihl != 20
                || o[12..16] != src
                || o[16..20] != inp[12..16]
            {
                return Err("neither a forwarded packet nor a well-formed ICMP error".into());
            }
            let total = be16(o, 2) as usize;
            if total != o.len() || total > 576 {
                return Err(format!(
                    "ICMP error total length {total}, frame has {}",
                    o.len()
                ));
            }
            let icmp = &o[20..];
            if fold_sum(icmp, 0) != 0xffff {
                return Err("ICMP checksum does not verify".into());
            }
            let ok_type = matches!((icmp[0], icmp[1]), (11, 0) | (3, 4));
            let quote = &icmp[8..];
            if !ok_type || inp.len() < quote.len() || quote != &inp[..quote.len()] {
                return Err(format!(
                    "ICMP type {} code {} or quote wrong",
                    icmp[0], icmp[1]
                ));
            }
            Ok(())
        }
        0x86dd => {
            // ip6-input cuts what follows the payload length.
            let inp = &inp[..(be16(inp, 4) as usize + 40).min(inp.len())];
            let forwarded = o.len() == inp.len() && o[..7] == inp[..7] && o[8..] == inp[8..];
            if forwarded {
                if o[7] != inp[7].wrapping_sub(1) || inp[7] <= 1 {
                    return Err(format!("hop limit {} -> {}", inp[7], o[7]));
                }
                return Ok(());
            }
            let src = rp
                .ip6
                .first()
                .ok_or("ICMPv6 error from a port without IPv6")?
                .0
                .octets();
            if o.len() < 48
                || o[6] != 58
                || o[7] != 64
                || o[8..24] != src
                || o[24..40] != inp[8..24]
            {
                return Err("neither a forwarded packet nor a well-formed ICMPv6 error".into());
            }
            let plen = be16(o, 4) as usize;
            if plen + 40 != o.len() || o.len() > 1280 {
                return Err(format!(
                    "ICMPv6 error payload length {plen}, frame has {}",
                    o.len()
                ));
            }
            let mut pseudo = 0u64;
            for c in o[8..40].chunks(2) {
                pseudo += be16(c, 0) as u64;
            }
            pseudo += plen as u64 + 58;
            if fold_sum(&o[40..], pseudo) != 0xffff {
                return Err("ICMPv6 checksum does not verify".into());
            }
            let icmp = &o[40..];
            let ok_type = matches!((icmp[0], icmp[1]), (3, 0) | (2, 0));
            let quote = &icmp[8..];
            if !ok_type || inp.len() < quote.len() || quote != &inp[..quote.len()] {
                return Err(format!(
                    "ICMPv6 type {} code {} or quote wrong",
                    icmp[0], icmp[1]
                ));
            }
            Ok(())
        }
        _ => Err(format!("routed output with ethertype {et:#06x}")),
    }
}

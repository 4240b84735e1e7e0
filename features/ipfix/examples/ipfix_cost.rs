//! What metering costs per packet: a generator of 60-byte IPv4 UDP frames over F flows feeds
//! `ipfix-ip4` (enabled on the arc, every packet or one in N) and a sink; the graph's own
//! per-node clocks give the node's TSC cycles per packet, beside a do-nothing node on the
//! same arc (what any feature node costs the dispatcher). Measurement only: never part of a
//! data plane, and it asserts nothing about speed.
//!
//! Run: cargo run --release -p vecplane-ipfix --example ipfix_cost -- [flows] [sampling] [seconds]

use graph::arc::{ArcConfig, ArcsBuilder, FeatureDecl};
use graph::{Dispatch, GraphBuilder, InputNode, Node, NodeContext};
use ipfix::{ArcBinding, IpfixConfig, IpfixFeature, Place, IPFIX_IP4};
use packet::{BufferPool, PoolConfig};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Makes a vector of frames per poll, cycling over `flows` source addresses.
struct Gen {
    next: String,
    frame: Vec<u8>,
    flows: u32,
    at: u32,
}

impl InputNode for Gen {
    fn name(&self) -> &str {
        "gen"
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let n = cx.pool.alloc_batch(out);
        for &b in &out[..n] {
            let src = 0xc612_0000 + self.at;
            self.at = (self.at + 1) % self.flows;
            self.frame[26..30].copy_from_slice(&src.to_be_bytes());
            cx.pool.write_packet(b, &self.frame);
            let m = cx.pool.meta_mut(b);
            m.l3_offset = 14;
            m.rx_port = 0;
        }
        (n, Dispatch::AllTo(0))
    }
}

/// Frees what reaches it (`sink`), or passes it on (`noop`, a feature doing nothing).
struct Pass(&'static str, Option<&'static str>);

impl Node for Pass {
    fn name(&self) -> &str {
        self.0
    }

    fn next_nodes(&self) -> Vec<String> {
        self.1.map(|n| vec![n.to_string()]).unwrap_or_default()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        if self.1.is_some() {
            return Dispatch::AllTo(0);
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

fn frame() -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&Ipv4Addr::new(198, 18, 0, 1).octets());
    f.extend_from_slice(&Ipv4Addr::new(198, 19, 0, 1).octets());
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let flows = args.first().copied().unwrap_or(1000) as u32;
    let sampling = args.get(1).copied().unwrap_or(1) as u32;
    let seconds = args.get(2).copied().unwrap_or(3);
    // A collector nobody reads: the exporter's sends must not fail.
    let sink = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let collector: SocketAddr = sink.local_addr().expect("addr");
    let (handle, workers) = IpfixFeature::new(IpfixConfig {
        collectors: vec![collector],
        sampling,
        flows_per_worker: (flows * 2).max(65536),
        ..IpfixConfig::default()
    })
    .expect("config");
    let w = workers.worker().expect("memory");

    let mut b = ArcsBuilder::new();
    b.arc("ip4-unicast", "sink");
    b.feature(FeatureDecl::new("ip4-unicast", "noop", "noop"));
    b.feature(FeatureDecl::new("ip4-unicast", ipfix::FEATURE, IPFIX_IP4).after("noop"));
    let arcs = b.build().expect("arcs");
    let id = arcs.arc_id("ip4-unicast").expect("arc");
    let mut config = ArcConfig::new(&arcs, 1);
    config.enable(&arcs, "ip4-unicast", "noop", 0).expect("on");
    config
        .enable(&arcs, "ip4-unicast", ipfix::FEATURE, 0)
        .expect("on");
    let pos = arcs.position(id, ipfix::FEATURE);
    let binding = ArcBinding {
        next_nodes: arcs.next_nodes(id, pos),
        cursor: arcs.cursor_at(id, pos, 0),
        config: live::fixed(config),
        place: Place::RxPort,
    };
    let mut g = GraphBuilder::new();
    g.add_input(Box::new(Gen {
        next: "noop".into(),
        frame: frame(),
        flows,
        at: 0,
    }))
    .add_input(w.timer())
    .add_node(Box::new(Pass("noop", Some(IPFIX_IP4))))
    .add_node(w.ip4_node(binding))
    .add_node(Box::new(Pass("sink", None)))
    .add_node(Box::new(Pass("error-drop", None)));
    let tsc_hz = graph::measure_tsc_hz(100);
    let mut graph = g.build(0, tsc_hz).expect("graph");
    let mut pool = BufferPool::new(PoolConfig {
        buffers: 4096,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    // Warm up: every flow in the table.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(500) {
        graph.run_once(&mut pool);
    }
    let stats = graph.stats();
    let (ip, np) = (
        graph.node_id(IPFIX_IP4).expect("node"),
        graph.node_id("noop").expect("node"),
    );
    let node = |name: &str| {
        let n = &stats.nodes[if name == "noop" { np } else { ip }];
        (n.clocks.get(), n.packets.get())
    };
    let (c0, p0) = node(IPFIX_IP4);
    let (n0, q0) = node("noop");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(seconds) {
        for _ in 0..64 {
            graph.run_once(&mut pool);
        }
    }
    let (c1, p1) = node(IPFIX_IP4);
    let (n1, q1) = node("noop");
    let per = |c: u64, p: u64| c as f64 / p.max(1) as f64;
    println!(
        "flows {flows} sampling 1/{sampling}: ipfix-ip4 {:.1} cycles/packet, noop feature {:.1} cycles/packet ({} packets, TSC {:.3} GHz)",
        per(c1 - c0, p1 - p0),
        per(n1 - n0, q1 - q0),
        p1 - p0,
        tsc_hz as f64 / 1e9
    );
    let s = handle.stats();
    // For scripts/instructions_per_packet.py: every packet the node saw, warm-up included.
    println!("median run: {} packets", stats.nodes[ip].packets.get());
    println!(
        "meter: {} packets, {} skipped, {} live flows, {} evicted, {} ring drops",
        s.workers[0].packets,
        s.workers[0].skipped,
        s.workers[0].live_flows,
        s.workers[0].evicted,
        s.workers[0].ring_drops
    );
    drop(graph);
    handle.stop();
}

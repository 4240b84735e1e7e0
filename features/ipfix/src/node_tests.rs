//! The nodes in a real graph: packets pass unchanged along the arc (per place), are counted
//! (every one, or one in N), and the timer reports them on a flush.

#[path = "../tests/common/kit.rs"]
mod kit;

use crate::node::{ArcBinding, Place, IPFIX_IP4, IPFIX_IP6, IPFIX_OUTPUT};
use crate::record::{EndReason, FlowRecord};
use crate::ring::{ring, Consumer};
use crate::worker::{IpfixWorker, LiveSettings, WorkerShared};
use graph::arc::{ArcConfig, ArcsBuilder, FeatureDecl};
use graph::GraphBuilder;
use kit::{Inject, Queue, Seen, Sink};
use packet::{BufferPool, PoolConfig};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

struct Rig {
    graph: graph::Graph,
    pool: BufferPool,
    queue: Queue,
    end: Seen,
    other: Seen,
    settings: Arc<LiveSettings>,
    shared: Arc<WorkerShared>,
    records: Consumer<FlowRecord>,
}

/// inject -> `node` (feature "ipfix" on arc "a", then feature "other") -> end or other-node.
/// ipfix is enabled on places 0 and 1, "other" on place 1 only.
/// An annotation source standing in for the LB and the flow switch: the server is the
/// destination + 1, the cookie the destination's last byte.
struct Lb;

impl crate::node::Annotate for Lb {
    fn annotate(&self, pool: &BufferPool, b: u32) -> crate::record::Annotation {
        let d = pool.data(b);
        let dst = Ipv4Addr::new(d[30], d[31], d[32], d[33].wrapping_add(1));
        crate::record::Annotation {
            server: Some(dst.into()),
            cookie: Some(u64::from(d[33])),
        }
    }
}

fn rig(node: &str, sampling: u32, place: Place) -> Rig {
    let mut b = ArcsBuilder::new();
    b.arc("a", "end");
    b.feature(FeatureDecl::new("a", "ipfix", node));
    b.feature(FeatureDecl::new("a", "other", "other-node").after("ipfix"));
    let arcs = b.build().expect("layout");
    let id = arcs.arc_id("a").expect("arc");
    let mut config = ArcConfig::new(&arcs, 2);
    config.enable(&arcs, "a", "ipfix", 0).expect("enable");
    config.enable(&arcs, "a", "ipfix", 1).expect("enable");
    config.enable(&arcs, "a", "other", 1).expect("enable");
    let pos = arcs.position(id, "ipfix");
    let binding = ArcBinding {
        next_nodes: arcs.next_nodes(id, pos),
        cursor: arcs.cursor_at(id, pos, 0),
        config: live::fixed(config),
        place,
    };
    let (producer, records) = ring(4096, FlowRecord::default());
    let settings = Arc::new(LiveSettings::new(sampling, 15, 60));
    let shared = Arc::new(WorkerShared::default());
    let w = IpfixWorker::new(1024, producer, settings.clone(), shared.clone()).expect("memory");
    let queue: Queue = Default::default();
    let (end, other): (Seen, Seen) = Default::default();
    let mut g = GraphBuilder::new();
    let inject_to = if node == "annotated" { IPFIX_IP4 } else { node };
    g.add_input(Box::new(Inject::new(inject_to, queue.clone(), 1)))
        .add_input(w.timer())
        .add_node(match node {
            IPFIX_IP4 => w.ip4_node(binding),
            "annotated" => w.ip4_node_annotated(binding, Lb),
            IPFIX_IP6 => w.ip6_node(binding),
            _ => w.output_node(binding).expect("memory"),
        })
        .add_node(Box::new(Sink {
            name: "end".into(),
            seen: end.clone(),
        }))
        .add_node(Box::new(Sink {
            name: "other-node".into(),
            seen: other.clone(),
        }))
        .add_node(Box::new(nodes::drop::ErrorDrop::new()));
    let pool = BufferPool::new(PoolConfig {
        buffers: 4096,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    Rig {
        graph: g.build(0, 1_000_000_000).expect("graph"),
        pool,
        queue,
        end,
        other,
        settings,
        shared,
        records,
    }
}

impl Rig {
    fn send(&mut self, frames: impl IntoIterator<Item = (u16, Vec<u8>)>) {
        self.queue.lock().expect("lock").extend(frames);
        while !self.queue.lock().expect("lock").is_empty() {
            self.graph.run_once(&mut self.pool);
        }
    }

    /// Flush and collect every record.
    fn flush(&mut self) -> Vec<FlowRecord> {
        let g = self
            .settings
            .flush_generation
            .fetch_add(1, Ordering::AcqRel)
            + 1;
        let mut out = Vec::new();
        for _ in 0..1_000_000 {
            self.graph.run_once(&mut self.pool);
            self.records.drain_into(&mut out, usize::MAX);
            if self.shared.flushed.load(Ordering::Acquire) >= g {
                self.records.drain_into(&mut out, usize::MAX);
                return out;
            }
        }
        panic!("the flush never finished");
    }
}

fn v4(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, i)
}

#[test]
fn every_packet_is_counted_and_passes_unchanged_to_its_place_next() {
    let mut r = rig(IPFIX_IP4, 1, Place::RxPort);
    let mut frames = Vec::new();
    for i in 0..300u16 {
        let port = i % 2;
        frames.push((
            port,
            kit::udp4(
                v4(1 + port as u8),
                v4(200),
                1000,
                53,
                18 + usize::from(i % 3),
            ),
        ));
    }
    r.send(frames.clone());
    let end = r.end.lock().expect("lock").clone();
    let other = r.other.lock().expect("lock").clone();
    // Port 0 has nothing after ipfix; port 1 goes on to "other".
    assert_eq!(end.len(), 150);
    assert_eq!(other.len(), 150);
    assert!(end.iter().all(|(p, _)| *p == 0) && other.iter().all(|(p, _)| *p == 1));
    let sent0: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|(p, _)| *p == 0)
        .map(|(_, f)| f)
        .collect();
    let got0: Vec<&Vec<u8>> = end.iter().map(|(_, f)| f).collect();
    assert_eq!(sent0, got0, "bytes unchanged, order kept");
    assert_eq!(r.shared.counters.packets.get(), 300);
    assert_eq!(r.shared.counters.flows.get(), 2);
    let mut recs = r.flush();
    recs.sort_by_key(|f| f.ingress);
    assert_eq!(recs.len(), 2);
    for (port, f) in recs.iter().enumerate() {
        let sent: Vec<&Vec<u8>> = frames
            .iter()
            .filter(|(p, _)| usize::from(*p) == port)
            .map(|(_, f)| f)
            .collect();
        assert_eq!(f.packets, sent.len() as u64);
        assert_eq!(
            f.octets,
            sent.iter().map(|f| (f.len() - 14) as u64).sum::<u64>()
        );
        assert_eq!(f.reason, EndReason::Forced);
        assert_eq!(f.ingress, port as u32 + 1);
        assert_eq!((f.src_port, f.dst_port, f.protocol), (1000, 53, 17));
    }
}

#[test]
fn one_in_n_sampling_counts_every_nth_packet_and_skips_the_rest() {
    let mut r = rig(IPFIX_IP6, 10, Place::RxPort);
    let a: Ipv6Addr = "2001:db8::1".parse().expect("ip");
    let b: Ipv6Addr = "2001:db8::2".parse().expect("ip");
    let frames: Vec<(u16, Vec<u8>)> = (0..1003u16)
        .map(|i| (0, kit::tcp6(a, b, 40000 + i % 4, 443, 0x10, 10)))
        .collect();
    r.send(frames);
    let c = r.shared.clone();
    let c = &c.counters;
    assert_eq!(c.packets.get(), 101, "packets 0, 10, ..., 1000");
    assert_eq!(c.skipped.get(), 902);
    assert_eq!(r.end.lock().expect("lock").len(), 1003, "all forwarded");
    let recs = r.flush();
    assert_eq!(recs.iter().map(|f| f.packets).sum::<u64>(), 101);
    assert!(recs
        .iter()
        .all(|f| f.sampling == 10 && f.octets == f.packets * 70));
    // The countdown goes on across vectors: 1003 packets leave 7 to skip.
    r.send((0..7).map(|_| (0, kit::tcp6(a, b, 1, 443, 0x10, 10))));
    assert_eq!(c.packets.get(), 101);
    r.send([(0, kit::tcp6(a, b, 1, 443, 0x10, 10))]);
    assert_eq!(c.packets.get(), 102);
}

#[test]
fn output_metering_reads_ethernet_and_records_the_sending_port() {
    let mut r = rig(IPFIX_OUTPUT, 1, Place::TxPort);
    let a: Ipv6Addr = "2001:db8::1".parse().expect("ip");
    let b: Ipv6Addr = "2001:db8::2".parse().expect("ip");
    let mut frames = vec![
        (0, kit::tcp6(a, b, 1, 2, 0x02, 0)),
        (0, kit::udp4(v4(1), v4(2), 3, 4, 0)),
    ];
    frames.push((0, vec![0u8; 60])); // not IP: forwarded, not counted
    r.send(frames);
    // Place is the sending port (1): "other" is enabled there.
    assert_eq!(r.other.lock().expect("lock").len(), 3);
    assert_eq!(r.shared.counters.unreadable.get(), 1);
    let recs = r.flush();
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|f| f.egress == 2 && f.ingress == 1));
    let v6 = recs
        .iter()
        .find(|f| f.src.is_ipv6())
        .expect("the IPv6 flow");
    assert_eq!((v6.protocol, v6.tcp_flags, v6.octets), (6, 0x02, 60));
}

#[test]
fn idle_flows_leave_through_the_timer_without_traffic() {
    let mut r = rig(IPFIX_IP4, 1, Place::RxPort);
    r.settings.idle_ms.store(30, Ordering::Relaxed);
    r.send([(0, kit::udp4(v4(1), v4(2), 5, 6, 0))]);
    let mut out = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while out.is_empty() && std::time::Instant::now() < until {
        r.graph.run_once(&mut r.pool);
        r.records.drain_into(&mut out, 8);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].reason, EndReason::Idle);
    assert!(out[0].end_ms >= out[0].start_ms && out[0].start_ms > 1_600_000_000_000);
}

#[test]
fn a_dropped_graph_reports_its_flows_and_leaves_flushes() {
    let mut r = rig(IPFIX_IP4, 1, Place::RxPort);
    r.send((0..10).map(|i| (0, kit::udp4(v4(i), v4(200), 1, 2, 0))));
    let Rig {
        graph,
        shared,
        mut records,
        ..
    } = r;
    drop(graph);
    let mut out = Vec::new();
    records.drain_into(&mut out, usize::MAX);
    assert_eq!(out.len(), 10);
    assert!(out
        .iter()
        .all(|f| f.reason == EndReason::Forced && f.packets == 1));
    assert_eq!(shared.flushed.load(Ordering::Acquire), u64::MAX);
    assert!(records.is_finished());
}

#[test]
fn annotations_from_the_lb_and_flow_switch_reach_the_records() {
    let mut r = rig("annotated", 1, Place::RxPort);
    r.send((0..4).map(|i| (0, kit::udp4(v4(1), v4(10 + i % 2), 1, 2, 0))));
    let mut recs = r.flush();
    recs.sort_by_key(|f| f.dst);
    assert_eq!(recs.len(), 2);
    for (f, last) in recs.iter().zip([10u8, 11]) {
        assert_eq!(f.packets, 2);
        assert_eq!(f.annotation.server, Some(v4(last + 1).into()));
        assert_eq!(f.annotation.cookie, Some(u64::from(last)));
    }
}

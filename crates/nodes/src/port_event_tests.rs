//! Ports added and removed at run time, as the protocol nodes see them: graphs built for two
//! ports are edited (`graph::GraphEdit` carrying a `PortEvent`) and driven with crafted packets.
//! `interface-output` and `interface-tx` reach a new port's transmit node over an appended arc,
//! leave the output arc's features where they were, and drop a removed port's packets;
//! `ethernet-input` routes frames for a new port's MAC.

use super::*;
use crate::drop::ErrorDrop;
use crate::ethernet::{EthernetInput, PortL2, PortMode};
use crate::names;
use crate::offload::PortCaps;
use crate::output::InterfaceOutput;
use crate::testkit::{Inject, Queue, Seen, Sink};
use graph::arc::{ArcConfig, ArcsBuilder, FeatureDecl};
use graph::{Dispatch, Graph, GraphBuilder, GraphEdit, Node, NodeContext};
use packet::headers::{build_udp_frame, UdpFrameSpec};
use packet::{BufferPool, PoolConfig};
use std::net::IpAddr;
use std::sync::Arc;

const MAC0: Mac = [2, 0, 0, 0, 0, 1];
const MAC1: Mac = [2, 0, 0, 0, 0, 2];
const MAC2: Mac = [2, 0, 0, 0, 0, 3];

/// The output arc's one feature: records where it saw each packet, then hands it on to
/// `interface-tx` as a feature at the end of the arc does.
struct Mark(Seen);

impl Node for Mark {
    fn name(&self) -> &str {
        "out-mark"
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![names::INTERFACE_TX.into()]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut seen = self.0.lock().expect("lock");
        for &b in frame {
            seen.push(("out-mark".into(), *cx.pool.meta(b), Vec::new()));
        }
        Dispatch::AllTo(0)
    }
}

fn pool() -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers: 256,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool")
}

/// A graph and what its sinks saw.
struct Bench {
    graph: Graph,
    pool: BufferPool,
    queue: Queue,
    seen: Seen,
}

impl Bench {
    /// Inject `frames` (receive port, bytes), run to completion; (node, port) of every packet
    /// a sink saw, sorted (the port is `tx_port` for the output graph, `rx_port` else).
    fn send(&mut self, frames: Vec<(u16, Vec<u8>)>, tx: bool) -> Vec<(String, u16)> {
        self.queue.lock().expect("lock").extend(frames);
        for _ in 0..10 {
            self.graph.run_once(&mut self.pool);
        }
        assert!(self.queue.lock().expect("lock").is_empty());
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        let mut out: Vec<(String, u16)> = std::mem::take(&mut *self.seen.lock().expect("lock"))
            .into_iter()
            .map(|(n, m, _)| (n, if tx { m.tx_port } else { m.rx_port }))
            .collect();
        out.sort_unstable();
        out
    }

    fn drops(&self, node: &str, reason: &str) -> u64 {
        let s = self.graph.stats();
        let id = s
            .error_id(node, reason)
            .unwrap_or_else(|| panic!("no reason {node}/{reason}"));
        s.errors[id].get()
    }

    fn apply(&mut self, edit: GraphEdit) {
        self.graph.apply(edit, &mut self.pool).expect("edit");
    }
}

fn event(e: PortEvent) -> Arc<dyn std::any::Any + Send + Sync> {
    Arc::new(e)
}

fn added(id: u16, mac: Mac, tx: Option<&str>) -> PortEvent {
    PortEvent::Added(AddedPort {
        id,
        mac,
        mtu: 1500,
        tx: tx.map(str::to_string),
        caps: PortCaps::default(),
    })
}

// ---------------------------------------------------------------------------------------------
// interface-output and interface-tx

/// inject (tx_port = rx_port) -> interface-output for ports 0 and 1 (`p0-tx`, `p1-tx`), with
/// the output arc's feature `mark` (`out-mark`, then `interface-tx`) enabled on ports 1 and 3.
fn output_bench() -> Bench {
    let mut arcs = ArcsBuilder::new();
    arcs.arc(names::ARC_OUTPUT, names::INTERFACE_TX);
    arcs.feature(FeatureDecl::new(names::ARC_OUTPUT, "mark", "out-mark"));
    let arcs = arcs.build().expect("arcs");
    // Places for more ports than the build has, as the data plane sizes them.
    let mut config = ArcConfig::new(&arcs, 4);
    for port in [1, 3] {
        config
            .enable(&arcs, names::ARC_OUTPUT, "mark", port)
            .expect("a feature");
    }
    let tx = || vec![Some("p0-tx".to_string()), Some("p1-tx".to_string())];
    let queue = Queue::default();
    let seen = Seen::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        setup: |m, _| m.tx_port = m.rx_port,
        ..Inject::new(names::INTERFACE_OUTPUT, queue.clone())
    }));
    b.add_node(Box::new(
        InterfaceOutput::new(tx()).with_arc(&arcs, live::fixed(config)),
    ));
    b.add_node(Box::new(InterfaceOutput::new(tx()).as_arc_end()));
    b.add_node(Box::new(Mark(seen.clone())));
    b.add_node(Box::new(ErrorDrop::new()));
    b.add_node(Box::new(Sink("p0-tx", seen.clone())));
    b.add_node(Box::new(Sink("p1-tx", seen.clone())));
    Bench {
        graph: b.build(0, 1_000_000_000).expect("graph"),
        pool: pool(),
        queue,
        seen,
    }
}

fn to_ports(ports: &[u16]) -> Vec<(u16, Vec<u8>)> {
    ports.iter().map(|&p| (p, vec![p as u8; 60])).collect()
}

/// (node, port) pairs, sorted as `Bench::send` returns them.
fn seen(list: &[(&str, u16)]) -> Vec<(String, u16)> {
    let mut v: Vec<(String, u16)> = list.iter().map(|&(n, p)| (n.to_string(), p)).collect();
    v.sort_unstable();
    v
}

#[test]
fn output_reaches_a_port_added_at_run_time_and_drops_it_once_removed() {
    let mut t = output_bench();
    let before = seen(&[("p0-tx", 0), ("out-mark", 1), ("p1-tx", 1)]);
    assert_eq!(t.send(to_ports(&[0, 1]), true), before);
    assert!(t.send(to_ports(&[2]), true).is_empty());
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "unknown-port"), 1);

    let mut edit = GraphEdit::new();
    edit.add_node(Box::new(Sink("p2-tx", t.seen.clone())))
        .with_event(event(added(2, MAC2, Some("p2-tx"))));
    t.apply(edit);
    // Port 2 over its appended arc; ports 0 and 1 as before, port 1 through the feature
    // (whose next index the appended arc did not move).
    let after = seen(&[
        ("p0-tx", 0),
        ("out-mark", 1),
        ("p1-tx", 1),
        ("p2-tx", 2),
        ("p2-tx", 2),
    ]);
    assert_eq!(t.send(to_ports(&[0, 1, 2, 2]), true), after);
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "unknown-port"), 1);

    // Port 3, with the feature enabled: `interface-tx` learned of it as well.
    let mut edit = GraphEdit::new();
    edit.add_node(Box::new(Sink("p3-tx", t.seen.clone())))
        .with_event(event(added(3, MAC2, Some("p3-tx"))));
    t.apply(edit);
    let all = seen(&[
        ("p0-tx", 0),
        ("p2-tx", 2),
        ("out-mark", 1),
        ("out-mark", 3),
        ("p1-tx", 1),
        ("p3-tx", 3),
    ]);
    assert_eq!(t.send(to_ports(&[0, 1, 2, 3]), true), all);

    // Removed with its transmit node: port 2's packets drop as `port-has-no-tx`, never reach
    // the retired node; the others go on.
    let mut edit = GraphEdit::new();
    edit.retire("p2-tx")
        .with_event(event(PortEvent::Removed(2)));
    t.apply(edit);
    let rest = seen(&[("p0-tx", 0), ("out-mark", 1), ("p1-tx", 1)]);
    assert_eq!(t.send(to_ports(&[0, 2, 1, 7]), true), rest);
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "port-has-no-tx"), 1);
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "unknown-port"), 2);
    assert_eq!(
        t.drops(graph::dispatch::GRAPH_NODE, "sent-to-removed-node"),
        0
    );

    // A new port takes the id: a new arc to the new `p2-tx`.
    let mut edit = GraphEdit::new();
    edit.add_node(Box::new(Sink("p2-tx", t.seen.clone())))
        .with_event(event(added(2, MAC2, Some("p2-tx"))));
    t.apply(edit);
    assert_eq!(t.send(to_ports(&[2]), true), seen(&[("p2-tx", 2)]));
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "port-has-no-tx"), 1);
}

#[test]
fn output_gives_ids_skipped_and_ports_without_tx_no_transmit_node() {
    let mut t = output_bench();
    let mut edit = GraphEdit::new();
    edit.with_event(event(added(5, MAC2, None)));
    t.apply(edit);
    assert!(t.send(to_ports(&[4, 5, 6]), true).is_empty());
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "port-has-no-tx"), 2);
    assert_eq!(t.drops(names::INTERFACE_OUTPUT, "unknown-port"), 1);
    // An event of another kind, and removing a port never given, change nothing.
    let mut edit = GraphEdit::new();
    edit.with_event(Arc::new("not a port event".to_string()));
    t.apply(edit);
    let mut edit = GraphEdit::new();
    edit.with_event(event(PortEvent::Removed(40)));
    t.apply(edit);
    let before = seen(&[("p0-tx", 0), ("out-mark", 1), ("p1-tx", 1)]);
    assert_eq!(t.send(to_ports(&[0, 1]), true), before);
}

// ---------------------------------------------------------------------------------------------
// ethernet-input

/// inject -> ethernet-input for ports 0 and 1 (L3) -> sinks standing for its next nodes.
fn ethernet_bench() -> Bench {
    let queue = Queue::default();
    let seen = Seen::default();
    let ports = [MAC0, MAC1]
        .map(|mac| PortL2 {
            mac,
            mode: PortMode::L3,
        })
        .to_vec();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject::new(names::ETHERNET_INPUT, queue.clone())));
    b.add_node(Box::new(EthernetInput::new(ports)));
    b.add_node(Box::new(ErrorDrop::new()));
    for name in [names::IP4_INPUT, names::IP6_INPUT, names::L2_XCONNECT] {
        b.add_node(Box::new(Sink(name, seen.clone())));
    }
    Bench {
        graph: b.build(0, 1_000_000_000).expect("graph"),
        pool: pool(),
        queue,
        seen,
    }
}

fn udp4_to_mac(dst_mac: Mac) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac,
        src_ip: IpAddr::V4("198.18.3.2".parse().expect("v4")),
        dst_ip: IpAddr::V4("198.18.9.9".parse().expect("v4")),
        ..UdpFrameSpec::default()
    })
}

#[test]
fn ethernet_routes_frames_for_a_port_added_at_run_time() {
    let mut t = ethernet_bench();
    assert!(t.send(vec![(2, udp4_to_mac(MAC2))], false).is_empty());
    assert_eq!(t.drops(names::ETHERNET_INPUT, "unknown-port"), 1);

    let mut edit = GraphEdit::new();
    edit.with_event(event(added(2, MAC2, Some("p2-tx"))));
    t.apply(edit);
    let frames = vec![
        (2, udp4_to_mac(MAC2)),
        (2, udp4_to_mac(MAC0)),
        (0, udp4_to_mac(MAC0)),
    ];
    let to_ip4 = |ports: &[u16]| -> Vec<(String, u16)> {
        let list: Vec<(&str, u16)> = ports.iter().map(|&p| (names::IP4_INPUT, p)).collect();
        seen(&list)
    };
    assert_eq!(t.send(frames, false), to_ip4(&[2, 0]));
    assert_eq!(
        t.drops(names::ETHERNET_INPUT, "not-for-us"),
        1,
        "port 0's MAC"
    );
    assert_eq!(t.drops(names::ETHERNET_INPUT, "unknown-port"), 1);

    // Removed: frames it received before (still in flight) are processed as before.
    let mut edit = GraphEdit::new();
    edit.with_event(event(PortEvent::Removed(2)));
    t.apply(edit);
    assert_eq!(t.send(vec![(2, udp4_to_mac(MAC2))], false), to_ip4(&[2]));

    // Ids skipped on the way take no unicast frame; the id given again takes the new MAC.
    let mut edit = GraphEdit::new();
    edit.with_event(event(added(5, MAC1, None)));
    t.apply(edit);
    let mut edit = GraphEdit::new();
    edit.with_event(event(added(2, MAC0, None)));
    t.apply(edit);
    let frames = vec![
        (3, udp4_to_mac(MAC2)),
        (5, udp4_to_mac(MAC1)),
        (2, udp4_to_mac(MAC2)),
        (2, udp4_to_mac(MAC0)),
    ];
    assert_eq!(t.send(frames, false), to_ip4(&[5, 2]));
    assert_eq!(t.drops(names::ETHERNET_INPUT, "not-for-us"), 3);
    assert_eq!(t.drops(names::ETHERNET_INPUT, "unknown-port"), 1);
}

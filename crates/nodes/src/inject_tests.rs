//! `inject-rx` and `flow-packet-out` through a real graph: packets the control plane put in the
//! ring leave on their port as they are, or run their packet-out actions (outputs, flood, a
//! punt with reason `packet_out`); a packet with no buffer waits in the ring; every buffer
//! comes back. Also the instruction-count loop of an idle `inject-rx` (ignored: run it under
//! callgrind, see `callgrind_idle_inject_rx`).

use super::*;
use crate::bridge::{BridgeConfig, BridgeDomainConfig, BridgePortConfig, BridgePortMode, L2Bridge};
use crate::drop::ErrorDrop;
use crate::flow_switch::{FlowPacketOut, FlowPortInfo, FlowWorkerShared, PacketOutBridge};
use crate::output::InterfaceOutput;
use crate::tests::{Capture, Captured};
use channel::punt::{punt_channel, Bell, PuntConfig, PuntReason};
use channel::spsc::{ring, Producer};
use flow::{DpAction, DpActions};
use graph::{Graph, GraphBuilder};
use packet::{BufferPool, PoolConfig};

const PORTS: u16 = 3;

struct Lab {
    graph: Graph,
    pool: BufferPool,
    ring: Producer<InjectSlot>,
    out: Captured,
    stats: Arc<InjectStats>,
    punts: channel::punt::PuntConsumer,
}

fn lab(buffers: u32) -> Lab {
    let (p, c) = ring(8, || InjectSlot::new(2048));
    let stats = Arc::new(InjectStats::default());
    let batch = packet_out_batch();
    let (pp, pc) = punt_channel(
        &PuntConfig::default(),
        0,
        1_000_000_000,
        Arc::new(Bell::new()),
    );
    let ports: Vec<Option<FlowPortInfo>> = (0..PORTS)
        .map(|p| {
            Some(FlowPortInfo {
                switch: 0,
                ofport: p + 1,
                emc: true,
                megaflow: true,
            })
        })
        .collect();
    let out: Captured = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(InjectRx::new(
        c,
        Some(batch.clone()),
        stats.clone(),
    )));
    b.add_node(Box::new(FlowPacketOut::new(
        vec![PacketOutBridge {
            members: (0..PORTS).collect(),
            shared: Arc::new(FlowWorkerShared::default()),
        }],
        &ports,
        batch,
        Some(Arc::new(WorkerCell::new(pp))),
    )));
    b.add_node(Box::new(
        L2Bridge::new(&BridgeConfig {
            domains: vec![BridgeDomainConfig {
                id: 1,
                ports: (0..PORTS)
                    .map(|port| BridgePortConfig {
                        port,
                        mode: BridgePortMode::Access { pvid: 1 },
                    })
                    .collect(),
            }],
            ..BridgeConfig::default()
        })
        .expect("bridge"),
    ));
    b.add_node(Box::new(InterfaceOutput::new(
        (0..PORTS).map(|p| Some(format!("tx{p}"))).collect(),
    )));
    b.add_node(Box::new(ErrorDrop::new()));
    for port in 0..PORTS {
        b.add_node(Box::new(Capture {
            name: format!("tx{port}"),
            port,
            out: out.clone(),
            feature_line: false,
        }));
    }
    Lab {
        graph: b.build(0, 1_000_000_000).expect("graph"),
        pool: BufferPool::new(PoolConfig {
            buffers,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool"),
        ring: p,
        out,
        stats,
        punts: pc,
    }
}

fn frame(n: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, n]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 9, 9]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14] = n;
    f
}

fn push(l: &mut Lab, kind: InjectKind, port: u16, actions: &[DpAction], bytes: &[u8]) {
    assert!(l.ring.try_push(|s| {
        s.kind = kind;
        s.port = port;
        s.switch = 0;
        s.in_port = 1;
        let mut a = DpActions::DROP;
        for x in actions {
            assert!(a.push(*x));
        }
        s.actions = a;
        assert!(s.set_bytes(bytes));
    }));
}

impl Lab {
    fn run(&mut self) -> Vec<(u16, Vec<u8>)> {
        self.graph.run_once(&mut self.pool);
        std::mem::take(&mut *self.out.lock().expect("lock"))
    }
}

#[test]
fn injected_packets_leave_on_their_port_as_they_are() {
    let mut l = lab(64);
    push(&mut l, InjectKind::Port, 2, &[], &frame(1));
    push(&mut l, InjectKind::Port, 0, &[], &frame(2));
    let got = l.run();
    assert_eq!(got, vec![(2, frame(1)), (0, frame(2))]);
    assert_eq!(l.stats.to_port.get(), 2);
    assert_eq!(
        l.pool.available(),
        l.pool.capacity(),
        "every buffer came back"
    );
}

#[test]
fn a_packet_out_runs_its_actions_and_punts_with_its_reason() {
    let mut l = lab(64);
    let punt = DpAction::Controller {
        max_len: u16::MAX,
        reason: PuntReason::PacketOut,
        table: 0,
        cookie: u64::MAX,
    };
    push(
        &mut l,
        InjectKind::PacketOut,
        0,
        &[DpAction::Output(1), punt, DpAction::Output(2)],
        &frame(3),
    );
    // Flood from port 0: the two others.
    push(
        &mut l,
        InjectKind::PacketOut,
        0,
        &[DpAction::Flood],
        &frame(4),
    );
    let mut got = l.run();
    got.sort();
    assert_eq!(
        got,
        vec![(1, frame(3)), (1, frame(4)), (2, frame(3)), (2, frame(4))]
    );
    assert_eq!(l.stats.packet_out.get(), 2);
    let punted: Vec<_> =
        std::iter::from_fn(|| l.punts.pop(|s| (s.meta, s.bytes().to_vec()))).collect();
    assert_eq!(punted.len(), 1);
    assert_eq!(punted[0].1, frame(3));
    assert_eq!(punted[0].0.reason, PuntReason::PacketOut);
    assert_eq!((punted[0].0.switch, punted[0].0.in_port), (0, 1));
    assert_eq!(l.pool.available(), l.pool.capacity());
}

#[test]
fn without_a_buffer_a_packet_waits_in_the_ring() {
    let mut l = lab(64);
    let mut held = Vec::new();
    while let Some(b) = l.pool.alloc() {
        held.push(b);
    }
    push(&mut l, InjectKind::Port, 1, &[], &frame(5));
    assert!(l.run().is_empty());
    assert_eq!(l.stats.no_buffer.get(), 1);
    l.pool.free_batch(&held);
    assert_eq!(l.run(), vec![(1, frame(5))], "sent once a buffer is free");
}

/// The per-round cost every worker pays for its `inject-rx` while nothing is injected: run
/// `valgrind --tool=callgrind --toggle-collect='*InjectRx*poll*' <nodes test binary>
/// callgrind_idle_inject_rx --ignored --exact` (release) and divide by the 1,000,000 rounds.
#[test]
#[ignore]
fn callgrind_idle_inject_rx() {
    let mut l = lab(64);
    for _ in 0..1_000_000 {
        l.graph.run_once(&mut l.pool);
    }
    assert_eq!(l.stats.to_port.get(), 0);
}

//! `flow-packet-out`: runs the datapath actions of a packet the control plane injected into a
//! flow-mode bridge (an OpenFlow packet-out: its own actions, or `table` to run it through the
//! bridge's tables). The control plane translated the actions (`FlowTables::
//! translate_packet_out`); `inject-rx` hands them over in a `PacketOutBatch`, indexed by each
//! packet's `next_scratch`. It owns its own emitter and shares the worker's punt ring; it never
//! looks anything up in the tables or the caches.

use super::actions::{Bridge, Executor};
use super::{fail, FlowDrop, FlowPortInfo, FlowWorkerShared};
use crate::inject::{PacketOutBatch, SharedPunt};
use flow::extract::extract;
use graph::{Dispatch, Emitter, Node, NodeContext};
use packet::VECTOR_SIZE;
use std::sync::Arc;

/// The node's name.
pub const PACKET_OUT: &str = "flow-packet-out";

/// One flow-mode bridge as `flow-packet-out` sees it.
pub struct PacketOutBridge {
    /// Its ports (vecplane ids), for `flood`.
    pub members: Vec<u16>,
    /// Its worker-side counters.
    pub shared: Arc<FlowWorkerShared>,
}

/// The `flow-packet-out` node (one per worker with flow-mode bridges).
pub struct FlowPacketOut {
    exec: Executor,
    bridges: Vec<PacketOutBridge>,
    batch: PacketOutBatch,
}

impl FlowPacketOut {
    /// For `bridges` (in flow-bridge order) and the ports of `ports` (by vecplane port id),
    /// taking each packet's actions from `batch` and punting into `punt`.
    pub fn new(
        bridges: Vec<PacketOutBridge>,
        ports: &[Option<FlowPortInfo>],
        batch: PacketOutBatch,
        punt: Option<SharedPunt>,
    ) -> FlowPacketOut {
        let mut exec = Executor::new(Emitter::new(VECTOR_SIZE * 4), ports);
        if let Some(p) = punt {
            exec.set_punt(p);
        }
        FlowPacketOut {
            exec,
            bridges,
            batch,
        }
    }
}

impl Node for FlowPacketOut {
    fn name(&self) -> &str {
        PACKET_OUT
    }

    fn next_nodes(&self) -> Vec<String> {
        super::FlowNext::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        FlowDrop::names()
    }

    fn emitter(&mut self) -> Option<&mut Emitter> {
        Some(&mut self.exec.emitter)
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let batch = self.batch.clone();
        batch.with(|entries| {
            for (i, &b) in frame.iter().enumerate() {
                let k = cx.pool.meta(b).next_scratch as usize;
                let Some(e) = entries.get(k) else {
                    nexts[i] = fail(cx, b, FlowDrop::TranslationFailed);
                    continue;
                };
                let Some(br) = self.bridges.get(usize::from(e.switch)) else {
                    nexts[i] = fail(cx, b, FlowDrop::NotFlowPort);
                    continue;
                };
                let (_, mut parsed) = extract(cx.pool.data(b), e.in_port, None);
                let bridge = Bridge {
                    members: &br.members,
                    shared: &br.shared,
                    origin: Some((e.switch, e.in_port)),
                };
                nexts[i] = self.exec.run(cx, (i, b), &mut parsed, &e.actions, &bridge);
            }
        });
        self.exec.flush();
        Dispatch::PerPacket
    }
}

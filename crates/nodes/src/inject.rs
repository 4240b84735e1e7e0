//! The inject path's worker side: `inject-rx`, an input that takes what the control plane put in
//! this worker's inject ring (a bounded SPSC ring of packet copies, `channel::spsc`) and sends
//! each packet on a port as it is (`interface-output`) or, with the datapath actions the control
//! plane translated for it, through a flow-mode bridge (`flow-packet-out`). Also the worker's
//! shared punt producer type. It never allocates after it is built, never locks, never waits:
//! a packet it has no buffer for stays in the ring until the next poll.

use crate::names;
use crate::neighbour::WorkerCell;
use channel::punt::{PuntProducer, NO_PORT};
use channel::spsc::Consumer;
use flow::DpActions;
use graph::{Counter, Dispatch, InputNode, NodeContext};
use std::sync::Arc;

/// The node's name.
pub const INJECT_RX: &str = "inject-rx";
/// Packets `inject-rx` takes from its ring per poll (and entries of a `PacketOutBatch`).
pub const INJECT_BURST: usize = 32;

/// One worker's punt ring, shared by the nodes of its graph that punt (borrowed per punt).
pub type SharedPunt = Arc<WorkerCell<PuntProducer>>;

/// Where an injected packet goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InjectKind {
    /// Out of `port` as it is.
    #[default]
    Port,
    /// Through a flow-mode bridge: run `actions` on it (an OpenFlow packet-out).
    PacketOut,
}

/// One inject ring slot, filled in place by the control plane.
#[derive(Clone, Debug, Default)]
pub struct InjectSlot {
    /// Where it goes.
    pub kind: InjectKind,
    /// `Port`: the vecplane port it leaves on. `PacketOut`: the vecplane port it counts as
    /// received on (`NO_PORT`: none, e.g. `in_port=CONTROLLER`).
    pub port: u16,
    /// `PacketOut`: the bridge's index among the flow-mode bridges.
    pub switch: u16,
    /// `PacketOut`: its `in_port` as the bridge numbers it.
    pub in_port: u16,
    /// `PacketOut`: the datapath actions (at most `flow::dpaction::INLINE_DP_ACTIONS`: no
    /// heap list, so nothing is freed on the worker).
    pub actions: DpActions,
    len: usize,
    bytes: Box<[u8]>,
}

impl InjectSlot {
    /// A slot holding packets of up to `max_bytes` bytes.
    pub fn new(max_bytes: usize) -> InjectSlot {
        InjectSlot {
            bytes: vec![0; max_bytes].into_boxed_slice(),
            port: NO_PORT,
            ..InjectSlot::default()
        }
    }

    /// Copy the packet in; false when it is longer than the slot (nothing copied).
    pub fn set_bytes(&mut self, packet: &[u8]) -> bool {
        match self.bytes.get_mut(..packet.len()) {
            Some(dst) => {
                dst.copy_from_slice(packet);
                self.len = packet.len();
                true
            }
            None => false,
        }
    }

    /// The packet.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A packet-out's bridge, `in_port` and actions, for `flow-packet-out` (indexed by the
/// packet's `next_scratch`).
#[derive(Clone, Debug, Default)]
pub struct PacketOutEntry {
    /// The bridge's index among the flow-mode bridges.
    pub switch: u16,
    /// Its `in_port` as the bridge numbers it.
    pub in_port: u16,
    /// The datapath actions.
    pub actions: DpActions,
}

/// What `inject-rx` hands `flow-packet-out` in one poll (cleared at the next: the graph runs
/// every packet of a poll to completion before it polls again).
pub type PacketOutBatch = Arc<WorkerCell<Vec<PacketOutEntry>>>;

/// A new, empty batch with room for one poll.
pub fn packet_out_batch() -> PacketOutBatch {
    Arc::new(WorkerCell::new(Vec::with_capacity(INJECT_BURST)))
}

/// One worker's inject counters (written by the worker).
#[derive(Debug, Default)]
pub struct InjectStats {
    /// Packets sent out of a port as they were.
    pub to_port: Counter,
    /// Packets run through a flow-mode bridge.
    pub packet_out: Counter,
    /// Polls that left packets in the ring for want of a buffer.
    pub no_buffer: Counter,
}

graph::node_indices! {
    /// `inject-rx`'s next nodes.
    enum InjectNext {
        /// To `INTERFACE_OUTPUT`.
        Output = names::INTERFACE_OUTPUT,
        /// To `flow-packet-out`.
        PacketOut = crate::flow_switch::PACKET_OUT,
    }
}

/// `inject-rx`: the worker's end of its inject ring.
pub struct InjectRx {
    ring: Consumer<InjectSlot>,
    /// None: no flow-mode bridge (a packet-out cannot come; one that did is sent nowhere).
    batch: Option<PacketOutBatch>,
    stats: Arc<InjectStats>,
}

impl InjectRx {
    /// Taking from `ring`; packet-outs go to `flow-packet-out` through `batch` (None when the
    /// worker has no flow-mode bridge).
    pub fn new(
        ring: Consumer<InjectSlot>,
        batch: Option<PacketOutBatch>,
        stats: Arc<InjectStats>,
    ) -> InjectRx {
        InjectRx { ring, batch, stats }
    }
}

impl InputNode for InjectRx {
    fn name(&self) -> &str {
        INJECT_RX
    }

    fn next_nodes(&self) -> Vec<String> {
        let n = if self.batch.is_some() { 2 } else { 1 };
        InjectNext::NAMES[..n]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// Packets pushed before the worker announced its sleep are seen here; the control plane
    /// rings the worker's doorbell after it pushes.
    fn before_sleep(&self) -> bool {
        self.ring.is_empty()
    }

    /// Injection only matters to a running daemon: a run of finite inputs ends around it.
    fn is_finished(&self) -> bool {
        true
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        if self.ring.is_empty() {
            return (0, Dispatch::AllTo(InjectNext::Output.id()));
        }
        let limit = out.len().min(nexts.len()).min(INJECT_BURST);
        let mut n = 0;
        let batch = self.batch.clone();
        let mut fill = |entries: Option<&mut Vec<PacketOutEntry>>| {
            let mut entries = entries;
            if let Some(e) = entries.as_deref_mut() {
                e.clear();
            }
            while n < limit && !self.ring.is_empty() {
                let Some(b) = cx.pool.alloc() else {
                    self.stats.no_buffer.add(1);
                    break;
                };
                let pool = &mut *cx.pool;
                let entries = entries.as_deref_mut();
                let next = self.ring.pop(|s| take(pool, b, s, entries));
                match next {
                    Some(Some(next)) => {
                        out[n] = b;
                        nexts[n] = next;
                        n += 1;
                    }
                    // Not sendable here (a packet-out without bridges, or too long: the
                    // control plane checks both): freed.
                    _ => cx.pool.free(b),
                }
            }
        };
        match &batch {
            Some(batch) => batch.with(|e| fill(Some(e))),
            None => fill(None),
        }
        for &next in &nexts[..n] {
            if next == InjectNext::Output.id() {
                self.stats.to_port.add(1);
            } else {
                self.stats.packet_out.add(1);
            }
        }
        (n, Dispatch::PerPacket)
    }
}

/// Copy slot `s` into buffer `b`: its next index, or None when it cannot be sent.
fn take(
    pool: &mut packet::BufferPool,
    b: u32,
    s: &mut InjectSlot,
    entries: Option<&mut Vec<PacketOutEntry>>,
) -> Option<u16> {
    if !pool.write_packet(b, s.bytes()) {
        return None;
    }
    let m = pool.meta_mut(b);
    m.rx_port = NO_PORT;
    m.timestamp_ns = 0;
    match s.kind {
        InjectKind::Port => {
            m.tx_port = s.port;
            Some(InjectNext::Output.id())
        }
        InjectKind::PacketOut => {
            let entries = entries?;
            if entries.len() >= INJECT_BURST {
                return None;
            }
            m.rx_port = s.port;
            m.next_scratch = entries.len() as u32;
            let mut e = PacketOutEntry {
                switch: s.switch,
                in_port: s.in_port,
                actions: DpActions::DROP,
            };
            e.actions.assign_from(&s.actions);
            entries.push(e);
            Some(InjectNext::PacketOut.id())
        }
    }
}

#[cfg(test)]
#[path = "inject_tests.rs"]
mod tests;

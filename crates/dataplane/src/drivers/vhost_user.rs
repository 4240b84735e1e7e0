//! vhost-user ports: the device (its control thread and socket) is opened once, by the first
//! worker built, and shared. With one queue pair, worker 0 runs it: with several workers it
//! spreads the guest's flows (software RSS) and the others hand it what they send. With
//! several pairs (`queues = N`), pair `k` is run by worker `k % workers`: each worker receives
//! from its own pairs and sends into the first of them the guest enabled, and hands to worker
//! 0 what it sends while the guest enabled none of its pairs (or when it has none). Every
//! worker that runs pairs takes offloads (super-packets go whole to a TSO guest); what it hands
//! to worker 0 it finishes first (the ring carries plain bytes), and it never finishes what
//! goes into its own pairs (the transmit node does what the guest did not negotiate).

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::handoff::{self, HandoffTx};
use graph::{Dispatch, Node, NodeContext};
use nodes::names;
use nodes::offload::PortCaps;
use packet::BufferPool;
use std::path::Path;
use std::sync::Arc;
use vhostuser::{SocketMode, VhostRx, VhostTx, VhostUserDevice};

pub(super) struct VhostUser<'a> {
    pub(super) socket: &'a Path,
    pub(super) mode: SocketMode,
    pub(super) queues: u16,
    pub(super) access: &'a vhostuser::SocketAccess,
}

impl<'a> Driver<'a> for VhostUser<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        let workers = cx.spec.workers.max(1);
        let pairs = usize::from(self.queues.max(1));
        // The pairs this worker sends into (and receives from, until the rebalancer moves
        // them).
        let mine: Vec<usize> = (0..pairs).filter(|k| k % workers == cx.worker).collect();
        if mine.is_empty() {
            // Worker 0 runs pair 0; this one hands it what it sends.
            return super::sent_by_worker0(cx, vhostuser::DRIVER);
        }
        let device = cx.shared.vhost_device(cx.id, || {
            VhostUserDevice::open_with(self.socket, self.mode, pairs, workers, self.access)
                .map(Arc::new)
                .map_err(|e| cx.error(e.why))
        })?;
        // Several pairs over several workers: every worker that has pairs gets a receive node
        // for each pair, and receives from those the device names it for (round-robin to
        // begin with; the rebalancer or `vecplane ctl rxq move` move them by load).
        let movable = pairs > 1 && workers > 1;
        let rx_nodes: Vec<String> = (0..pairs)
            .map(|k| {
                if pairs == 1 {
                    cx.rx_name.clone()
                } else {
                    format!("{}-q{k}", cx.rx_name)
                }
            })
            .collect();
        if movable && cx.worker == 0 {
            cx.shared.movable_port(crate::rebalance::MovablePort {
                id: cx.id,
                name: cx.port.name.clone(),
                device: device.clone(),
                rx_nodes: rx_nodes.clone(),
                workers: pairs.min(workers),
            });
        }
        let mode = match self.mode {
            SocketMode::Server => "server",
            SocketMode::Client => "client",
        };
        let mut detail = format!("{mode} socket {}", self.socket.display());
        // One pair over several workers: worker 0 spreads the guest's flows.
        let rss = pairs == 1 && workers > 1;
        if rss {
            detail.push_str(&format!(", software RSS over {workers} workers"));
        }
        if pairs > 1 {
            detail.push_str(&format!(
                ", {pairs} queue pairs (pair k sent on worker k mod {workers}{})",
                if movable {
                    ", received where `show rxq` says"
                } else {
                    ""
                }
            ));
        }
        let rx_next = if rss {
            handoff::RSS_DISPATCH
        } else {
            names::ETHERNET_INPUT
        };
        let counters: Arc<dyn graph::DriverCounters> = device.shared().clone();
        let receives = if movable {
            (0..pairs).collect()
        } else {
            mine.clone()
        };
        for k in receives {
            let rx = VhostRx::new(
                rx_nodes[k].clone(),
                cx.id,
                rx_next.to_string(),
                device.clone(),
                cx.stats.clone(),
            )
            .on_pair(k);
            let rx = if movable { rx.on_worker(cx.worker) } else { rx };
            cx.graph.add_input(Box::new(rx));
        }
        let tx = VhostTx::new(cx.tx_name.clone(), device, cx.stats.clone()).on_pairs(&mine);
        if cx.worker == 0 {
            cx.graph.add_node(Box::new(tx));
        } else {
            let handoff =
                HandoffTx::new(cx.tx_name.clone(), cx.id, 0, cx.shared.outbox(cx.worker)?)
                    .finishing_offloads();
            cx.graph.add_node(Box::new(TxOrHandoff { tx, handoff }));
        }
        Ok(BuiltPort {
            // The transmit node finishes itself what the guest did not negotiate; another
            // worker's finishes what it hands to worker 0 as bytes (the ring carries no
            // offload metadata) and leaves the rest to the guest.
            caps: PortCaps::ALL,
            driver: vhostuser::DRIVER,
            detail,
            tx: Some(cx.tx_name.clone()),
            rss,
            counters: Some(counters),
        })
    }

    fn may_hand_off(&self) -> bool {
        true
    }

    /// Guests send TSO super-packets: every worker that runs a queue pair receives them.
    fn wants_jumbo_buffers(&self, worker: usize, workers: usize) -> bool {
        (0..usize::from(self.queues.max(1))).any(|k| k % workers.max(1) == worker)
    }
}

/// A worker's transmit node for a port with several queue pairs, on a worker other than 0:
/// into its own pairs while the guest enabled one of them, else handed to worker 0 (which
/// always runs pair 0), its offloads finished first (the handoff's error reasons count what
/// could not be).
struct TxOrHandoff {
    tx: VhostTx,
    handoff: HandoffTx,
}

impl Node for TxOrHandoff {
    fn name(&self) -> &str {
        self.tx.name()
    }

    /// The handoff's (the vhost-user transmit node has none).
    fn next_nodes(&self) -> Vec<String> {
        self.handoff.next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        self.handoff.error_reasons()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        if self.tx.can_send() {
            self.tx.process(cx, frame, nexts)
        } else {
            self.handoff.process(cx, frame, nexts)
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        self.tx.trace(pool, buffer)
    }
}

#[cfg(test)]
#[path = "vhost_user_tests.rs"]
mod tests;

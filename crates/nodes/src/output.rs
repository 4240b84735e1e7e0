//! `interface-output`: hands each packet to the transmit node of `meta.tx_port` (and, while a
//! capture is armed, offers it to the capture). It owns the port-to-node map; it never changes
//! packet bytes.

use crate::names;
use graph::{CaptureControl, Dispatch, Node, NodeContext};
use std::sync::Arc;

/// The `interface-output` node.
pub struct InterfaceOutput {
    /// Transmit node name per port id (None: the port cannot send).
    tx_nodes: Vec<Option<String>>,
    capture: Option<Arc<CaptureControl>>,
}

impl InterfaceOutput {
    /// A node for ports whose transmit nodes are `tx_nodes` (index = port id).
    pub fn new(tx_nodes: Vec<Option<String>>) -> InterfaceOutput {
        InterfaceOutput {
            tx_nodes,
            capture: None,
        }
    }

    /// Offer every frame handed to a port to `capture` (`vecplane ctl pcap ... tx`).
    pub fn with_capture(mut self, capture: Arc<CaptureControl>) -> InterfaceOutput {
        self.capture = Some(capture);
        self
    }
}

/// Next index 0 is `error-drop`; port `p`'s transmit node is next index `p + 1`.
const NEXT_DROP: u16 = 0;
graph::node_indices! {
    /// `interface-output` drop reasons.
    enum OutputError {
        /// The packet's `tx_port` is not a port.
        UnknownPort = "unknown-port",
        /// The port has no transmit node (e.g. a pcap port without `tx`).
        NoTx = "port-has-no-tx",
    }
}

impl Node for InterfaceOutput {
    fn name(&self) -> &str {
        names::INTERFACE_OUTPUT
    }

    /// Next 0 is `error-drop`; next `p + 1` is port `p`'s transmit node.
    fn next_nodes(&self) -> Vec<String> {
        std::iter::once(names::ERROR_DROP.to_string())
            .chain(
                self.tx_nodes
                    .iter()
                    .map(|t| t.clone().unwrap_or_else(|| names::ERROR_DROP.to_string())),
            )
            .collect()
    }

    fn error_reasons(&self) -> Vec<String> {
        OutputError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        if let Some(c) = self.capture.as_ref().filter(|c| c.is_armed()) {
            c.offer(cx.pool, frame, cx.worker, true, |m| m.tx_port);
        }
        let ports = self.tx_nodes.len();
        let first = cx.pool.meta(frame[0]).tx_port;
        let mut same = true;
        for (i, &b) in frame.iter().enumerate() {
            let meta = cx.pool.meta_mut(b);
            let p = meta.tx_port as usize;
            same &= meta.tx_port == first;
            nexts[i] = if p >= ports {
                meta.error = cx.error_base + OutputError::UnknownPort.id();
                NEXT_DROP
            } else if self.tx_nodes[p].is_none() {
                meta.error = cx.error_base + OutputError::NoTx.id();
                NEXT_DROP
            } else {
                p as u16 + 1
            };
        }
        if same {
            Dispatch::AllTo(nexts[0])
        } else {
            Dispatch::PerPacket
        }
    }
}

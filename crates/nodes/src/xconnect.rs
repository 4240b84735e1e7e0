//! `l2-xconnect`: sends every frame of a cross-connected port out of its peer port, rewriting the
//! source MAC to the peer's and the destination MAC when configured. It owns the per-port peer
//! table; it never parses beyond the Ethernet addresses.

use crate::names;
use graph::{Dispatch, Node, NodeContext};
use packet::headers::{format_mac, Mac};
use packet::BufferPool;

/// Where one port's frames go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XconnectPeer {
    /// Transmit port.
    pub to: u16,
    /// Source MAC to write (the peer port's MAC).
    pub src_mac: Mac,
    /// Destination MAC to write, if any.
    pub dst_mac: Option<Mac>,
}

/// The `l2-xconnect` node.
pub struct L2Xconnect {
    peers: Vec<Option<XconnectPeer>>,
}

impl L2Xconnect {
    /// A node for `peers` (index = receiving port id).
    pub fn new(peers: Vec<Option<XconnectPeer>>) -> L2Xconnect {
        L2Xconnect { peers }
    }
}

graph::node_indices! {
    /// `l2-xconnect`'s drop reasons.
    enum XconnectError {
        /// The receiving port has no cross-connect peer.
        NoPeer = "no-peer",
    }
}

graph::node_indices! {
    /// `l2-xconnect`'s next nodes.
    enum XconnectNext {
        /// To `INTERFACE_OUTPUT`.
        Output = names::INTERFACE_OUTPUT,
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
    }
}

impl Node for L2Xconnect {
    fn name(&self) -> &str {
        names::L2_XCONNECT
    }

    fn next_nodes(&self) -> Vec<String> {
        XconnectNext::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        XconnectError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let mut all_ok = true;
        for (i, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet_mut(b);
            // ethernet-input checked the frame holds an Ethernet header.
            match self.peers.get(meta.rx_port as usize).copied().flatten() {
                Some(peer) if data.len() >= 12 => {
                    if let Some(dst) = peer.dst_mac {
                        data[0..6].copy_from_slice(&dst);
                    }
                    data[6..12].copy_from_slice(&peer.src_mac);
                    meta.tx_port = peer.to;
                    nexts[i] = XconnectNext::Output.id();
                }
                _ => {
                    meta.error = cx.error_base + XconnectError::NoPeer.id();
                    nexts[i] = XconnectNext::Drop.id();
                    all_ok = false;
                }
            }
        }
        if all_ok {
            Dispatch::AllTo(XconnectNext::Output.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let d = pool.data(buffer);
        let mut dst: Mac = [0; 6];
        if d.len() >= 6 {
            dst.copy_from_slice(&d[0..6]);
        }
        format!(
            "port {} -> port {} dst {}",
            m.rx_port,
            m.tx_port,
            format_mac(&dst)
        )
    }
}

//! What a worker's nodes are told when a port is added to or removed from the running data
//! plane (`graph::GraphEdit::with_event`, read in `Node::on_event`). Plain data: it owns the
//! event's shape, never a node's reaction to it.

use crate::offload::PortCaps;
use packet::headers::Mac;

/// A port added or removed while the data plane runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// A port is added: its nodes are in the graph, its inputs not yet polled.
    Added(AddedPort),
    /// Port `id` is removed: its inputs are drained and its nodes retired by the same edit.
    Removed(u16),
}

/// A port added at run time, as the protocol nodes need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedPort {
    /// Its id (a new one, or one a removed port had).
    pub id: u16,
    /// Its MAC.
    pub mac: Mac,
    /// Its MTU.
    pub mtu: u16,
    /// Its transmit node on this worker (None: it cannot send).
    pub tx: Option<String>,
    /// What it takes as it is.
    pub caps: PortCaps,
}

#[cfg(test)]
#[path = "port_event_tests.rs"]
mod tests;

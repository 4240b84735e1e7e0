//! Counters written by one worker and read by the control thread without locks: a relaxed load
//! and store per update (no read-modify-write), so the fast path pays a plain add.
//! It never aggregates across workers; the control plane sums snapshots.

use std::sync::atomic::{AtomicU64, Ordering};

/// A single-writer counter readable from other threads.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n` (only the owning worker calls this).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Runtime counters of one node on one worker.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// Times the node's function ran (input nodes: every poll, also empty ones).
    pub calls: Counter,
    /// Calls that carried at least one packet.
    pub vectors: Counter,
    /// Packets processed.
    pub packets: Counter,
    /// Extra packets the node sent besides those it processed (flood copies, see `Emitter`).
    pub emitted: Counter,
    /// TSC ticks spent in the node, including enqueueing to next nodes.
    pub clocks: Counter,
    /// The part of `clocks` spent in calls that carried at least one packet (for input
    /// nodes, `clocks` minus the empty polls).
    pub busy_clocks: Counter,
    /// Input nodes only: TSC ticks from each poll that received packets to the end of the
    /// graph's work on them (run to completion): what the queue's packets cost the worker in
    /// every node, the figure receive queues are placed by.
    pub carried_clocks: Counter,
}

/// The counters of one graph (one worker): per node, and per drop reason.
#[derive(Debug)]
pub struct GraphStats {
    /// Node names, by node id.
    pub node_names: Vec<String>,
    /// Whether each node is an input node.
    pub node_is_input: Vec<bool>,
    /// Runtime counters, by node id.
    pub nodes: Vec<NodeStats>,
    /// (node name, reason) of each graph-wide error id.
    pub error_names: Vec<(String, String)>,
    /// Packets dropped, by error id.
    pub errors: Vec<Counter>,
}

impl GraphStats {
    /// Error id of `reason` of node `node`, if both exist.
    pub fn error_id(&self, node: &str, reason: &str) -> Option<usize> {
        self.error_names
            .iter()
            .position(|(n, r)| n == node && r == reason)
    }

    /// Total packets dropped for all reasons.
    pub fn total_drops(&self) -> u64 {
        self.errors.iter().map(Counter::get).sum()
    }
}

/// Counters of one port on one worker.
#[derive(Debug, Default)]
pub struct PortStats {
    /// Packets received and handed to the graph.
    pub rx_packets: Counter,
    /// Bytes of those packets.
    pub rx_bytes: Counter,
    /// Frames the port could not receive (no free buffer, frame larger than a buffer, bad record).
    pub rx_drops: Counter,
    /// Packets transmitted.
    pub tx_packets: Counter,
    /// Bytes of those packets.
    pub tx_bytes: Counter,
    /// Packets the port could not transmit (ring full, write error).
    pub tx_drops: Counter,
    /// Why the port stopped early (e.g. a pcap record that ends a replay), set once.
    pub failure: std::sync::OnceLock<String>,
}

impl PortStats {
    /// Record why the port stopped (the first reason is kept).
    pub fn fail(&self, why: String) {
        let _ = self.failure.set(why);
    }

    /// Why the port stopped early, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }
}

/// Counters and state a port driver keeps beyond [`PortStats`] (a vhost-user port: guest
/// errors, frames refused, connections), shown with the port and exported as metrics.
pub trait DriverCounters: Send + Sync + std::fmt::Debug {
    /// (name, value) pairs; names are stable `snake_case` words.
    fn counters(&self) -> Vec<(&'static str, u64)>;
    /// A short state (e.g. "connected"), if the driver has one.
    fn state(&self) -> Option<String> {
        None
    }
}

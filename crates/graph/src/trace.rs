//! Packet trace: the control plane arms an input node for the next N packets; the dispatcher marks
//! them and records one line per node they pass. Only the cold path touches the lock here: the
//! fast path reads one atomic per input poll and never formats anything for untraced packets.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// Most records kept per worker; later ones are dropped.
pub const MAX_TRACE_RECORDS: usize = 4096;

/// One step of a traced packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Packet number within this trace (per worker).
    pub packet: u32,
    /// Node that handled it.
    pub node: String,
    /// What the node did / saw.
    pub text: String,
    /// Where it went next ("" when consumed).
    pub next: String,
}

/// Trace state shared between the control thread and one worker.
#[derive(Debug)]
pub struct TraceControl {
    /// Packets still to mark, by node id (only input nodes are armed).
    pub budget: Vec<AtomicU32>,
    /// True while any trace is armed or in flight: the dispatcher scans frames only then.
    pub active: AtomicBool,
    /// Recorded steps.
    pub records: Mutex<Vec<TraceRecord>>,
}

impl TraceControl {
    /// A trace control for a graph of `nodes` nodes.
    pub fn new(nodes: usize) -> TraceControl {
        TraceControl {
            budget: (0..nodes).map(|_| AtomicU32::new(0)).collect(),
            active: AtomicBool::new(false),
            records: Mutex::new(Vec::new()),
        }
    }

    /// Arm node `node` to trace its next `count` packets.
    pub fn arm(&self, node: usize, count: u32) {
        if let Some(b) = self.budget.get(node) {
            b.fetch_add(count, Ordering::Relaxed);
            self.active.store(true, Ordering::Release);
        }
    }

    /// Forget all records and stop tracing.
    pub fn clear(&self) {
        for b in &self.budget {
            b.store(0, Ordering::Relaxed);
        }
        self.active.store(false, Ordering::Release);
        if let Ok(mut r) = self.records.lock() {
            r.clear();
        }
    }

    /// A copy of the records.
    pub fn snapshot(&self) -> Vec<TraceRecord> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

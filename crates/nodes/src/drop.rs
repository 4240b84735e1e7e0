//! `error-drop`: the one place packets are dropped. It counts each packet under the drop reason
//! its dropping node wrote into `meta.error` and returns the buffer to the pool; it never looks
//! at packet bytes.

use crate::names;
use graph::{Dispatch, Node, NodeContext};
use packet::BufferPool;

/// The `error-drop` node.
pub struct ErrorDrop {
    reasons: Vec<String>,
}

impl ErrorDrop {
    /// A drop node; `reasons` (graph-wide "node: reason" names by error id) are used for traces.
    pub fn new() -> ErrorDrop {
        ErrorDrop {
            reasons: Vec::new(),
        }
    }
}

impl Default for ErrorDrop {
    fn default() -> Self {
        ErrorDrop::new()
    }
}

impl Node for ErrorDrop {
    fn name(&self) -> &str {
        names::ERROR_DROP
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        if self.reasons.is_empty() {
            // Cold, once: remember reason names for traces.
            self.reasons = cx
                .error_names
                .iter()
                .map(|(n, r)| format!("{n}: {r}"))
                .collect();
        }
        for &b in frame {
            let e = cx.pool.meta(b).error as usize;
            // An id nobody declared falls back to 0, the graph's own counter.
            cx.errors.get(e).unwrap_or(&cx.errors[0]).add(1);
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let e = pool.meta(buffer).error as usize;
        match self.reasons.get(e) {
            Some(r) => format!("dropped: {r}"),
            None => format!("dropped: error {e}"),
        }
    }
}

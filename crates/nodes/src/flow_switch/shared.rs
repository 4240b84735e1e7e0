//! What a flow-mode bridge's workers share with the control plane: each worker's published
//! cache counters and cycles-per-miss histogram, its malformed-packet counters, and the
//! megaflow dump a `dump-megaflows` asks for. The worker writes these at maintenance (relaxed
//! atomics, or a `try_lock` that never waits); the control plane only reads and asks.

use flow::cache::{MegaflowDump, PublishedStats};
use flow::extract::Malformed;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One worker's side of one flow bridge, as the control plane sees it.
#[derive(Debug, Default)]
pub struct FlowWorkerShared {
    /// Cache counters and the cycles-per-miss histogram (published at maintenance).
    pub cache: PublishedStats,
    /// Packets whose headers were malformed, by `Malformed` (they are still switched on what
    /// could be parsed, as Open vSwitch does).
    pub malformed: [AtomicU64; Malformed::ALL.len()],
    /// Translations that failed (too deep, too many actions): the packet was dropped.
    pub translate_errors: AtomicU64,
    /// Actions that could not be applied to a packet (a field its headers lack): each was
    /// skipped, and the packet's other actions ran (as Open vSwitch's datapath does).
    pub action_errors: AtomicU64,
    /// The dump generation asked for (`request_dump` bumps it).
    dump_wanted: AtomicU64,
    /// The last dump made: its generation and the megaflows.
    dump: Mutex<(u64, Vec<MegaflowDump>)>,
}

impl FlowWorkerShared {
    /// Ask the worker for a megaflow dump; returns the generation to wait for.
    pub fn request_dump(&self) -> u64 {
        self.dump_wanted.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The dump of generation `generation` or later, once the worker made it.
    pub fn take_dump(&self, generation: u64) -> Option<Vec<MegaflowDump>> {
        let d = self.dump.lock().unwrap_or_else(|p| p.into_inner());
        (d.0 >= generation).then(|| d.1.clone())
    }

    /// Worker side: the generation asked for when it is newer than `served`.
    pub(super) fn dump_wanted(&self, served: u64) -> Option<u64> {
        let want = self.dump_wanted.load(Ordering::Acquire);
        (want > served).then_some(want)
    }

    /// Worker side: store a dump (false when the control plane holds the lock: try again).
    pub(super) fn store_dump(
        &self,
        generation: u64,
        fill: impl FnOnce(&mut Vec<MegaflowDump>),
    ) -> bool {
        match self.dump.try_lock() {
            Ok(mut d) => {
                d.1.clear();
                fill(&mut d.1);
                d.0 = generation;
                true
            }
            Err(_) => false,
        }
    }

    /// Malformed-packet counts by reason name.
    pub fn malformed_counts(&self) -> Vec<(&'static str, u64)> {
        Malformed::ALL
            .iter()
            .zip(self.malformed.iter())
            .map(|(m, c)| (m.name(), c.load(Ordering::Relaxed)))
            .collect()
    }
}

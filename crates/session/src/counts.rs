//! `SessionCounts`: the live-entry counts of one session table, written by its owning worker
//! and read by the control plane without locks. It never blocks either side: the writer uses
//! plain relaxed loads and stores (it is the only writer), readers see counts at most one
//! vector old.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The bin of a value that is counted in none (`SessionValue::bin`).
pub const NO_BIN: u32 = u32::MAX;

/// Live entries of one table: in all, per group (a scope below `GROUPS`, e.g. a VIP or a
/// zone) and per bin (what the value says it counts for, e.g. a server), and the inserts
/// refused because both buckets of the key were full.
#[derive(Debug)]
pub struct SessionCounts {
    groups: Box<[AtomicU32]>,
    bins: Box<[AtomicU32]>,
    total: AtomicU32,
    refused: AtomicU64,
}

impl SessionCounts {
    pub(crate) fn new(groups: usize, bins: usize) -> SessionCounts {
        SessionCounts {
            groups: (0..groups).map(|_| AtomicU32::new(0)).collect(),
            bins: (0..bins).map(|_| AtomicU32::new(0)).collect(),
            total: AtomicU32::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Live entries of group `g` (0 for a group out of range).
    pub fn group(&self, g: u32) -> u32 {
        self.groups
            .get(g as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Live entries whose value counts in bin `b` (0 for a bin out of range).
    pub fn bin(&self, b: u32) -> u32 {
        self.bins
            .get(b as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// All live entries.
    pub fn total(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }

    /// Inserts refused because both buckets were full (since the table was made).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn bump(c: Option<&AtomicU32>, up: bool) {
        if let Some(c) = c {
            // Single writer: a plain load and store, no read-modify-write.
            let v = c.load(Ordering::Relaxed);
            c.store(
                if up {
                    v.wrapping_add(1)
                } else {
                    v.saturating_sub(1)
                },
                Ordering::Relaxed,
            );
        }
    }

    /// Count an entry of `group` whose value is in `bin` in (`up`) or out.
    #[inline(always)]
    pub(crate) fn count(&self, group: u32, bin: u32, up: bool) {
        Self::bump(self.groups.get(group as usize), up);
        Self::bump(self.bins.get(bin as usize), up);
        Self::bump(Some(&self.total), up);
    }

    /// Count one refused insert.
    #[inline(always)]
    pub(crate) fn refuse(&self) {
        let r = &self.refused;
        r.store(r.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

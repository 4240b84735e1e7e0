//! Upkeep and iteration of a `SessionTable`: `sweep` reclaims expired entries (and the ones
//! its caller refuses) a few buckets at a time, `sweep_with` shows each visited entry to the
//! caller first (flow export's expiry callback and active timeout), `entries` lists the live
//! ones (cold paths: `show`, a final export). Like the table, they never allocate or block;
//! a sweep's cost is bounded by its budget of buckets.

use crate::table::{SessionTable, SessionValue, CLASS_MASK, SHORTENED, WAYS};

/// What a sweep's visit decides for a live entry (an expired one is reclaimed regardless).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leave it in the table (with whatever the visit changed in its value).
    Keep,
    /// Reclaim it now.
    Remove,
}

/// What the table knows of an entry besides its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// Its group (the key's scope when below `GROUPS`, else `GROUPS`).
    pub group: u32,
    /// Its class.
    pub class: u8,
    /// True when a `Touch::Shorten` put it on its class's timeout for good.
    pub shortened: bool,
    /// When it expires (whole seconds, the table's clock).
    pub expiry: u32,
}

impl EntryInfo {
    /// True when the entry no longer hits at `now`.
    pub fn expired(&self, now: u32) -> bool {
        self.expiry <= now
    }
}

impl<V: SessionValue> SessionTable<V> {
    /// Visit the next `budget` buckets (wrapping), reclaiming entries that expired by `now` or
    /// whose value `keep` refuses (e.g. a flushed server's). Returns how many.
    pub fn sweep(&mut self, now: u32, budget: usize, mut keep: impl FnMut(&V) -> bool) -> usize {
        let mut n = 0;
        for _ in 0..budget.min(self.buckets.len()) {
            let b = self.sweep_at;
            self.sweep_at = (b + 1) & self.mask;
            for i in 0..WAYS {
                let e = self.buckets[b].expiry[i];
                if e != 0 && (e <= now || !keep(&self.buckets[b].val[i])) {
                    self.reclaim(b, i);
                    n += 1;
                }
            }
        }
        n
    }

    /// Like `sweep`, showing every non-empty entry of the next `budget` buckets to `visit`
    /// first, with its value to change in place (keeping its `bin`). An expired entry is
    /// reclaimed after its visit whatever it answers (the visit is its expiry callback, e.g.
    /// the export of a flow's last record); a live one when the visit answers
    /// `Verdict::Remove`. Returns how many were reclaimed.
    pub fn sweep_with(
        &mut self,
        now: u32,
        budget: usize,
        mut visit: impl FnMut(EntryInfo, &mut V) -> Verdict,
    ) -> usize {
        let mut n = 0;
        for _ in 0..budget.min(self.buckets.len()) {
            let b = self.sweep_at;
            self.sweep_at = (b + 1) & self.mask;
            for i in 0..WAYS {
                let Some(info) = self.info(b, i) else {
                    continue;
                };
                let bk = &mut self.buckets[b];
                let bin = bk.val[i].bin();
                let verdict = visit(info, &mut bk.val[i]);
                debug_assert_eq!(bin, bk.val[i].bin(), "a visit changed a value's bin");
                if info.expired(now) || verdict == Verdict::Remove {
                    self.reclaim(b, i);
                    n += 1;
                }
            }
        }
        n
    }

    /// Every entry live at `now`, with its value, in bucket order (a cold path: it reads the
    /// whole table).
    pub fn entries(&self, now: u32) -> impl Iterator<Item = (EntryInfo, &V)> + '_ {
        (0..self.buckets.len()).flat_map(move |b| {
            (0..WAYS).filter_map(move |i| {
                let info = self.info(b, i).filter(|e| !e.expired(now))?;
                Some((info, &self.buckets[b].val[i]))
            })
        })
    }

    /// Way `i` of bucket `b`, unless it is empty.
    fn info(&self, b: usize, i: usize) -> Option<EntryInfo> {
        let bk = &self.buckets[b];
        (bk.expiry[i] != 0).then(|| EntryInfo {
            group: Self::group_of(bk.tag[i]),
            class: bk.class[i] & CLASS_MASK,
            shortened: bk.class[i] & SHORTENED != 0,
            expiry: bk.expiry[i],
        })
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;

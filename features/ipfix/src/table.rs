//! The metering table of one worker and one family: flow key -> counters, in fixed buckets of
//! `WAYS` entries (one cache line each for IPv4), allocated once. Owns lookup, insertion,
//! eviction of a full bucket's oldest flow, and a resumable sweep cursor; what a report is and
//! when it is due are `meter`'s. It never allocates, locks or blocks after `new`.
//!
//! Why not the LB's flow table (moving to `crates/session`): that table stores 49-bit
//! fingerprints, not keys, and silently reuses expired places, while export needs every key
//! back and must see each flow leave. Keys here are generic (`FlowKey`), so this can move onto
//! the session table once it stores whole keys and reports evictions.
//!
//! Every key has two buckets (two choices, from the two halves of its hash): a lookup reads
//! the first bucket's entries in order until one holds the key, then the second's; an insert
//! takes the first empty entry of the first bucket, else of the second, else evicts the entry
//! of the two buckets with the oldest last packet (returned to the caller to report). With
//! two choices a table overflows only close to full (one choice of four ways overflows
//! buckets from a third full on); a new flow goes to the first free way, so most hits read
//! one line.
//! The hash is keyed per table with a random seed (from the standard library's per-process
//! randomness), so traffic cannot aim at one bucket; the worst it can do is evict early.

use crate::key::FlowKey;
use crate::record::Annotation;
use packet::huge::HugeTable;

/// Entries per bucket.
pub const WAYS: usize = 4;

/// One metered flow. `last_ms == 0` marks an empty entry (wall time is never 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Entry<K> {
    /// The flow.
    pub key: K,
    /// Packets since the flow's last report.
    pub packets: u64,
    /// IP bytes since the last report.
    pub octets: u64,
    /// Wall ms of the last packet (0: empty).
    pub last_ms: u64,
    /// Wall ms of the first packet since the last report.
    pub first_ms: u64,
    /// Sending port + 1 (0: unknown).
    pub egress: u32,
    /// One packet in this many was metered when the flow was created.
    pub sampling: u32,
    /// OR of TCP flags since the last report.
    pub tcp_flags: u8,
    /// OR of TCP flags over the flow's life (FIN or RST here shortens its idle timeout).
    pub life_flags: u8,
}

impl<K> Entry<K> {
    /// True when the entry holds a flow.
    #[inline(always)]
    pub fn is_live(&self) -> bool {
        self.last_ms != 0
    }
}

/// What `FlowTable::account` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed<K> {
    /// The flow was there.
    Found(usize),
    /// A new flow took a free entry.
    New(usize),
    /// A new flow took the entry of this older flow, which the caller must report.
    Evicted(usize, Entry<K>),
}

/// A fixed table of flows of key `K`.
pub struct FlowTable<K: FlowKey> {
    entries: HugeTable<Entry<K>>,
    /// Side array of annotations by entry (empty until `enable_annotations`).
    annotations: Vec<Annotation>,
    bucket_mask: usize,
    seed: [u64; 2],
    live: usize,
    cursor: usize,
}

/// Two random words from the standard library's per-process random seed.
fn random_seed() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut a = s.build_hasher();
    a.write_u64(0x0069_7066_6978);
    let mut b = s.build_hasher();
    b.write_u64(0x7665_6370_6c61_6e65);
    [a.finish(), b.finish()]
}

impl<K: FlowKey> FlowTable<K> {
    /// A table for about `flows` flows (rounded up to a power-of-two number of buckets);
    /// `None` when the allocator refuses the memory.
    pub fn new(flows: usize) -> Option<FlowTable<K>> {
        let buckets = flows.div_ceil(WAYS).next_power_of_two().max(1);
        Some(FlowTable {
            entries: HugeTable::try_new(buckets * WAYS, Entry::default())?,
            annotations: Vec::new(),
            bucket_mask: buckets - 1,
            seed: random_seed(),
            live: 0,
            cursor: 0,
        })
    }

    /// Keep an annotation per entry (cold: allocates the side array once).
    pub fn enable_annotations(&mut self) {
        if self.annotations.is_empty() {
            self.annotations = vec![Annotation::default(); self.entries.len()];
        }
    }

    /// Entries the table holds.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Buckets (sweep positions).
    pub fn buckets(&self) -> usize {
        self.bucket_mask + 1
    }

    /// Flows in the table.
    pub fn live(&self) -> usize {
        self.live
    }

    /// `key`'s hash.
    #[inline(always)]
    pub fn hash(&self, key: &K) -> u64 {
        key.hash(&self.seed)
    }

    /// Start loading `hash`'s bucket (a hint).
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        let b = (hash as usize) & self.bucket_mask;
        if let Some(e) = self.entries.get(b * WAYS) {
            packet::prefetch((e as *const Entry<K>).cast());
        }
    }

    /// The entry of `key` (hash `hash`), created at `now_ms` when missing — evicting the
    /// oldest flow of its two buckets when both are full. A hit in the first bucket is the
    /// inlined fast path; the rest is out of line.
    #[inline(always)]
    pub fn place(&mut self, key: &K, hash: u64, now_ms: u64) -> Placed<K> {
        let first = ((hash as usize) & self.bucket_mask) * WAYS;
        if let Some(bucket) = self.entries.get(first..first + WAYS) {
            for (w, e) in bucket.iter().enumerate() {
                if e.key == *key && e.is_live() {
                    return Placed::Found(first + w);
                }
            }
        }
        self.place_slow(key, hash, now_ms)
    }

    /// `place` past the first bucket: a hit in the second, else a free entry in either, else
    /// room made by a move, else the oldest of both evicted.
    #[inline(never)]
    fn place_slow(&mut self, key: &K, hash: u64, now_ms: u64) -> Placed<K> {
        let first = ((hash as usize) & self.bucket_mask) * WAYS;
        let second = (((hash >> 32) as usize) & self.bucket_mask) * WAYS;
        let mut free = None;
        let mut oldest = (u64::MAX, first);
        for base in [first, second] {
            for i in base..base + WAYS {
                let Some(e) = self.entries.get(i) else {
                    break;
                };
                if e.is_live() {
                    if base == second && e.key == *key {
                        return Placed::Found(i);
                    }
                    if e.last_ms < oldest.0 {
                        oldest = (e.last_ms, i);
                    }
                } else if free.is_none() {
                    free = Some(i);
                }
            }
            if second == first {
                break;
            }
        }
        let fresh = Entry {
            key: *key,
            last_ms: now_ms.max(1),
            ..Entry::default()
        };
        let free = free.or_else(|| self.make_room(first, second));
        match free {
            Some(i) => {
                self.entries[i] = fresh;
                self.live += 1;
                Placed::New(i)
            }
            None => {
                let i = oldest.1;
                let old = std::mem::replace(&mut self.entries[i], fresh);
                Placed::Evicted(i, old)
            }
        }
    }

    /// The entry holding `key` (hash `hash`), without inserting.
    pub fn find(&self, key: &K, hash: u64) -> Option<usize> {
        let first = ((hash as usize) & self.bucket_mask) * WAYS;
        let second = (((hash >> 32) as usize) & self.bucket_mask) * WAYS;
        [first, second]
            .into_iter()
            .flat_map(|b| b..b + WAYS)
            .find(|&i| {
                self.entries
                    .get(i)
                    .is_some_and(|e| e.is_live() && e.key == *key)
            })
    }

    /// Both buckets `first` and `second` are full: move one of their flows to its other
    /// bucket if that has a free entry (one cuckoo step; the key is stored, so its other bucket
    /// is its hash's other half). The entry freed, if any. Cold: only inserts into full
    /// buckets get here.
    fn make_room(&mut self, first: usize, second: usize) -> Option<usize> {
        for base in [first, second] {
            for i in base..base + WAYS {
                let key = self.entries.get(i)?.key;
                let h = self.hash(&key);
                let a = ((h as usize) & self.bucket_mask) * WAYS;
                let b = (((h >> 32) as usize) & self.bucket_mask) * WAYS;
                let other = if a == base { b } else { a };
                if other == base {
                    continue;
                }
                let Some(to) = (other..other + WAYS)
                    .find(|&j| self.entries.get(j).is_some_and(|e| !e.is_live()))
                else {
                    continue;
                };
                self.entries[to] = self.entries[i];
                if !self.annotations.is_empty() {
                    self.annotations[to] = self.annotations[i];
                    self.annotations[i] = Annotation::default();
                }
                self.entries[i] = Entry::default();
                return Some(i);
            }
        }
        None
    }

    /// Entry `i` (from `place`).
    #[inline(always)]
    pub fn entry_mut(&mut self, i: usize) -> &mut Entry<K> {
        &mut self.entries[i]
    }

    /// Entry `i`'s annotation slot, when annotations are kept.
    #[inline(always)]
    pub fn annotation_mut(&mut self, i: usize) -> Option<&mut Annotation> {
        self.annotations.get_mut(i)
    }

    /// Entry `i`'s annotation (default when none are kept).
    pub fn annotation(&self, i: usize) -> Annotation {
        self.annotations.get(i).copied().unwrap_or_default()
    }

    /// Empty entry `i`.
    pub fn remove(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            if e.is_live() {
                self.live -= 1;
            }
            *e = Entry::default();
        }
        if let Some(a) = self.annotations.get_mut(i) {
            *a = Annotation::default();
        }
    }

    /// Visit the live entries of up to `buckets` buckets from the sweep cursor, which moves
    /// past them. `visit(table, index)` returns false to stop early: the cursor then stays on
    /// that entry's bucket, to be visited again by the next sweep. Returns the buckets
    /// completed.
    pub fn sweep(
        &mut self,
        buckets: usize,
        mut visit: impl FnMut(&mut Self, usize) -> bool,
    ) -> usize {
        let mut done = 0;
        while done < buckets {
            let base = self.cursor * WAYS;
            for i in base..base + WAYS {
                if self.entries.get(i).is_some_and(|e| e.is_live()) && !visit(self, i) {
                    return done;
                }
            }
            self.cursor = (self.cursor + 1) & self.bucket_mask;
            done += 1;
        }
        done
    }

    /// The sweep cursor (a bucket index; 0 after a full round).
    pub fn cursor(&self) -> usize {
        self.cursor
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Key4, Key6};

    #[test]
    fn ipv4_entries_are_one_line_ipv6_two() {
        assert_eq!(std::mem::size_of::<Entry<Key4>>(), 64);
        assert_eq!(std::mem::size_of::<Entry<Key6>>(), 128);
    }

    #[test]
    fn place_finds_creates_and_evicts_the_oldest() {
        let mut t = FlowTable::<Key4>::new(4).expect("table");
        assert_eq!(t.buckets(), 1);
        let keys: Vec<Key4> = (0..5).map(|i| Key4::new(i, 9, 1, 2, 17, 0)).collect();
        for (i, k) in keys[..4].iter().enumerate() {
            let h = t.hash(k);
            assert!(matches!(t.place(k, h, 100 + i as u64), Placed::New(_)));
        }
        assert_eq!(t.live(), 4);
        let h = t.hash(&keys[2]);
        let Placed::Found(i) = t.place(&keys[2], h, 200) else {
            panic!("found");
        };
        assert_eq!(t.entry_mut(i).key, keys[2]);
        // Full: the fifth flow evicts the oldest (key 0, last packet at 100).
        let h = t.hash(&keys[4]);
        match t.place(&keys[4], h, 300) {
            Placed::Evicted(_, old) => assert_eq!((old.key, old.last_ms), (keys[0], 100)),
            other => panic!("{other:?}"),
        }
        assert_eq!(t.live(), 4);
        t.remove(i);
        assert_eq!(t.live(), 3);
        let h = t.hash(&keys[2]);
        assert!(matches!(t.place(&keys[2], h, 400), Placed::New(_)));
    }

    #[test]
    fn two_choices_and_a_move_fill_a_table_nearly_full_before_evicting() {
        // One choice of four ways evicts from a third full on; measured here (random seeds):
        // none at 50%, about 0.07% at 80%, 0.75% at 90% of the capacity.
        for (pct, most) in [(50, 0), (80, 1), (90, 3)] {
            let mut t = FlowTable::<Key4>::new(1 << 14).expect("table");
            let n = t.capacity() * pct / 100;
            let mut evicted = 0;
            for i in 0..n as u32 {
                let k = Key4::new(0xc612_0000 + i, 7, 1, 2, 17, 0);
                let h = t.hash(&k);
                if matches!(t.place(&k, h, 1), Placed::Evicted(..)) {
                    evicted += 1;
                }
            }
            assert!(
                evicted * 100 <= n * most,
                "{evicted} of {n} evicted at {pct}% load"
            );
            // Every flow still there is found where it was put (moves kept their keys).
            let found = (0..n as u32)
                .filter(|&i| {
                    let k = Key4::new(0xc612_0000 + i, 7, 1, 2, 17, 0);
                    t.find(&k, t.hash(&k)).is_some()
                })
                .count();
            assert_eq!(found + evicted, n);
        }
    }

    #[test]
    fn sweep_resumes_where_it_stopped() {
        let mut t = FlowTable::<Key4>::new(64).expect("table");
        assert_eq!(t.buckets(), 16);
        for i in 0..40 {
            let k = Key4::new(i, 1, 1, 1, 6, 0);
            let h = t.hash(&k);
            t.place(&k, h, 5);
        }
        let live = t.live();
        let mut seen = 0;
        // Stop after every 3rd visit; the sweep picks up the same bucket again.
        let mut budget = 0;
        let mut rounds = 0;
        while seen < live && rounds < 1000 {
            budget += 3;
            t.sweep(16, |t, i| {
                if budget == 0 {
                    return false;
                }
                budget -= 1;
                t.remove(i);
                seen += 1;
                true
            });
            rounds += 1;
        }
        assert_eq!(seen, live);
        assert_eq!(t.live(), 0);
    }
}

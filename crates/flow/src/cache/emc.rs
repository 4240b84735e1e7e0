//! The exact-match cache: full flow key -> megaflow id, 2-way set associative, filled with a
//! probability of 1/N per megaflow hit so that a flood of new flows cannot thrash it. Owns only
//! its entries; never decides anything about a megaflow (the megaflow cache says whether the
//! entry's megaflow still exists, by generation, and is current). Never allocates after
//! construction.

use super::megaflow::MegaflowId;
use crate::key::FlowKey;

/// One entry: 152 bytes of key, the megaflow and its generation when the entry was written.
#[derive(Clone, Copy)]
struct Entry {
    key: FlowKey,
    id: MegaflowId,
    gen: u32,
}

const NONE: MegaflowId = u32::MAX;

/// The exact-match cache of one worker.
pub struct ExactMatchCache {
    entries: Vec<Entry>,
    mask: usize,
    /// Insert when `rng < threshold`: `u32::MAX / inv_prob`, 0 = never, `u32::MAX` = always.
    threshold: u32,
    rng: u64,
}

impl ExactMatchCache {
    /// A cache of `entries` (a power of two; 0 makes every lookup miss), inserting with
    /// probability `1 / inv_prob` (0: never), its generator seeded with `seed`.
    pub(crate) fn new(entries: usize, inv_prob: u32, seed: u64) -> ExactMatchCache {
        let mut e = ExactMatchCache {
            entries: vec![
                Entry {
                    key: FlowKey::ZERO,
                    id: NONE,
                    gen: 0,
                };
                entries.max(1)
            ],
            mask: entries.max(1) - 1,
            threshold: 0,
            rng: seed | 1,
        };
        e.set_insert_inv_prob(inv_prob);
        if entries == 0 {
            e.threshold = 0;
        }
        e
    }

    /// Insert with probability `1 / inv_prob` (0: never, 1: always), as Open vSwitch's
    /// `emc-insert-inv-prob`.
    pub(crate) fn set_insert_inv_prob(&mut self, inv_prob: u32) {
        self.threshold = match inv_prob {
            0 => 0,
            1 => u32::MAX,
            n => u32::MAX / n,
        };
    }

    #[inline(always)]
    fn ways(&self, h: u64) -> [usize; 2] {
        [h as usize & self.mask, (h >> 32) as usize & self.mask]
    }

    /// Start loading the two ways of hash `h` (a hint).
    #[inline(always)]
    pub(crate) fn prefetch(&self, h: u64) {
        for w in self.ways(h) {
            super::megaflow::prefetch(&self.entries[w]);
        }
    }

    /// The `(megaflow, generation)` stored for `key` (whose hash is `h`).
    #[inline]
    pub(crate) fn lookup(&self, key: &FlowKey, h: u64) -> Option<(MegaflowId, u32)> {
        for w in self.ways(h) {
            let e = &self.entries[w];
            if e.id != NONE && e.key == *key {
                return Some((e.id, e.gen));
            }
        }
        None
    }

    /// Roll the insertion dice (xorshift64).
    #[inline]
    pub(crate) fn should_insert(&mut self) -> bool {
        if self.threshold == 0 {
            return false;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        ((x >> 32) as u32) <= self.threshold
    }

    /// Write `key -> (id, gen)`: into the way already holding `key`, else a way whose megaflow is
    /// gone (`dead` says so), else the way picked by the generator.
    #[inline]
    pub(crate) fn insert(
        &mut self,
        key: &FlowKey,
        h: u64,
        id: MegaflowId,
        gen: u32,
        dead: impl Fn(MegaflowId, u32) -> bool,
    ) {
        let ways = self.ways(h);
        let mut pick = ways[(self.rng & 1) as usize];
        for w in ways {
            let e = &self.entries[w];
            if e.id != NONE && e.key == *key {
                pick = w;
                break;
            }
            if e.id == NONE || dead(e.id, e.gen) {
                pick = w;
            }
        }
        self.entries[pick] = Entry { key: *key, id, gen };
    }

    /// Forget every entry.
    pub(crate) fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.id = NONE;
        }
    }

    /// Entries that name a megaflow (live or not).
    pub fn occupied(&self) -> usize {
        self.entries.iter().filter(|e| e.id != NONE).count()
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }
}

//! The exact-match cache: full flow key (as its present words, a [`SparseKey`]) -> megaflow id,
//! 2-way set associative, filled with a probability of 1/N per megaflow hit so that a flood of
//! new flows cannot thrash it. Owns only its entries; never decides anything about a megaflow
//! (the megaflow cache says whether the entry's megaflow still exists, by generation, and is
//! current). Never allocates after construction.
//!
//! An entry is two cache lines: id, generation and the first 7 words of the sparse key (the
//! map and 6 key words: an untagged IPv4 key's all) in the first, the rest in the second, so a
//! lookup of such a key reads one line per way. Equal map and equal words is equal full key
//! (words outside the map are zero), so a hit is exact.

use super::hash::{SparseKey, IP4_L4_HEAD, LONG, SHORT};
use super::megaflow::MegaflowId;
use crate::extract::Ip4Words;
use packet::huge::HugeTable;

/// One entry: the megaflow and its generation when the entry was written, and the key.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    id: MegaflowId,
    gen: u32,
    /// `SparseKey::m` without its last (pad) word.
    m: [u64; LONG],
}
const _: () = assert!(std::mem::size_of::<Entry>() == 128);

/// Sparse-key words in an entry's first cache line.
const FIRST_LINE_WORDS: usize = SHORT;

const NONE: MegaflowId = u32::MAX;

/// The exact-match cache of one worker.
pub struct ExactMatchCache {
    /// 1 MiB at the default size: on huge pages, so a lookup costs no TLB miss.
    entries: HugeTable<Entry>,
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
            entries: HugeTable::new(
                entries.max(1),
                Entry {
                    id: NONE,
                    gen: 0,
                    m: [0; LONG],
                },
            ),
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

    /// Start loading the two ways of hash `h` for a key of `len` sparse words (a hint).
    #[inline(always)]
    pub(crate) fn prefetch(&self, h: u64, short: bool) {
        for w in self.ways(h) {
            let e = &self.entries[w];
            super::megaflow::prefetch(e);
            if !short {
                super::megaflow::prefetch(&e.m[FIRST_LINE_WORDS]);
            }
        }
    }

    /// Start loading the first line of the first way of hash `h` (a hint).
    #[inline(always)]
    pub(crate) fn prefetch_first(&self, h: u64) {
        super::megaflow::prefetch(&self.entries[self.ways(h)[0]]);
    }

    /// The `(megaflow, generation)` stored for `key` (whose hash is `h`).
    #[inline]
    pub(crate) fn lookup(&self, key: &SparseKey, h: u64) -> Option<(MegaflowId, u32)> {
        let short = key.is_short();
        for w in self.ways(h) {
            let e = &self.entries[w];
            if e.id != NONE && same(e, key, short) {
                return Some((e.id, e.gen));
            }
        }
        None
    }

    /// [`ExactMatchCache::lookup`] for the `IP4_L4` key whose words are `key` (hash `h`),
    /// compared with them in place.
    #[inline]
    pub(crate) fn lookup_ip4_l4(&self, key: &Ip4Words, h: u64) -> Option<(MegaflowId, u32)> {
        for w in self.ways(h) {
            let e = &self.entries[w];
            let mut diff = e.m[0] ^ IP4_L4_HEAD;
            for (t, k) in key.iter().enumerate() {
                diff |= e.m[t + 1] ^ k;
            }
            if e.id != NONE && diff == 0 {
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

    /// Write `key -> (id, gen)`: into the way already holding `key`, else the first way whose
    /// megaflow is gone (`dead` says so), else the way picked by the generator. The first way
    /// is preferred so that most keys are found by the first comparison of a lookup (the
    /// second way's line is then prefetched but not read).
    #[inline]
    pub(crate) fn insert(
        &mut self,
        key: &SparseKey,
        h: u64,
        id: MegaflowId,
        gen: u32,
        dead: impl Fn(MegaflowId, u32) -> bool,
    ) {
        let short = key.is_short();
        let ways = self.ways(h);
        let mut pick = None;
        for w in ways {
            let e = &self.entries[w];
            if e.id != NONE && same(e, key, short) {
                pick = Some(w);
                break;
            }
            if pick.is_none() && (e.id == NONE || dead(e.id, e.gen)) {
                pick = Some(w);
            }
        }
        let pick = pick.unwrap_or(ways[(self.rng & 1) as usize]);
        let e = &mut self.entries[pick];
        e.id = id;
        e.gen = gen;
        e.m.copy_from_slice(&key.m[..LONG]);
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

/// True when entry `e` holds `key` (`short`: `key.is_short()`): same map (so the same word
/// count), same words; straight branch-free code over the first `SHORT` words (one cache line)
/// or all `LONG` (a short key's words past its own are zero in the entry as in the key, and
/// equal maps mean equal lengths).
#[inline(always)]
fn same(e: &Entry, key: &SparseKey, short: bool) -> bool {
    let mut diff = 0u64;
    for t in 0..SHORT {
        diff |= e.m[t] ^ key.m[t];
    }
    if !short {
        for t in SHORT..LONG {
            diff |= e.m[t] ^ key.m[t];
        }
    }
    diff == 0
}

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
    /// The insertion probability as `threshold + 1` in 2^32: `u32::MAX / inv_prob`,
    /// 0 = never, `u32::MAX` = always.
    threshold: u32,
    rng: u64,
    /// Insertion candidates to pass over before the next insert: a geometric draw, so that
    /// each candidate is still inserted independently with the set probability, but the
    /// dice are rolled once per insert instead of once per candidate.
    skip: u32,
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
            skip: 0,
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
        self.skip = self.draw_skip();
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

    /// Roll the insertion dice for one candidate.
    #[inline]
    pub(crate) fn should_insert(&mut self) -> bool {
        self.pick_inserts(1) != 0
    }

    /// Of the candidates set in `cands` (a bit each, taken in bit order), those to insert:
    /// each with the set probability, independently (geometric skips between inserts).
    #[inline]
    pub(crate) fn pick_inserts(&mut self, mut cands: u64) -> u64 {
        if self.threshold == 0 {
            return 0;
        }
        let mut picked = 0;
        loop {
            let n = cands.count_ones();
            if self.skip >= n {
                self.skip -= n;
                return picked;
            }
            for _ in 0..self.skip {
                cands &= cands - 1;
            }
            picked |= cands & cands.wrapping_neg();
            cands &= cands - 1;
            self.skip = self.draw_skip();
        }
    }

    /// xorshift64.
    #[inline]
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Failures before the next success of trials with the insertion probability p:
    /// `floor(ln U / ln(1 - p))` for U uniform in (0, 1].
    fn draw_skip(&mut self) -> u32 {
        if self.threshold == u32::MAX || self.threshold == 0 {
            return 0;
        }
        let u = ((self.next_random() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let p = (self.threshold as f64 + 1.0) / 4_294_967_296.0;
        let skip = (u.ln() / (-p).ln_1p()).floor();
        if skip >= u32::MAX as f64 {
            u32::MAX
        } else {
            skip as u32
        }
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
        let pick = match pick {
            Some(w) => w,
            None => ways[(self.next_random() >> 32) as usize & 1],
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Geometric skips pick each candidate with the set probability, whatever its bit and
    /// however the candidates come in chunks; 1 picks every one, 0 none.
    #[test]
    fn picked_inserts_have_the_set_probability_at_every_position() {
        for (inv, chunk) in [
            (4u32, u64::MAX),
            (100, u64::MAX),
            (4, 0b1011_0110),
            (1, 0xf0f0),
        ] {
            let mut e = ExactMatchCache::new(64, inv, 7);
            let rounds = 40_000u32;
            let mut per_bit = [0u32; 64];
            for _ in 0..rounds {
                let p = e.pick_inserts(chunk);
                assert_eq!(p & !chunk, 0);
                for (b, c) in per_bit.iter_mut().enumerate() {
                    *c += (p >> b & 1) as u32;
                }
            }
            let expected = rounds as f64 / inv as f64;
            for (b, &c) in per_bit.iter().enumerate() {
                if chunk >> b & 1 == 0 {
                    assert_eq!(c, 0);
                } else if inv == 1 {
                    assert_eq!(c, rounds);
                } else {
                    let sd = (expected * (1.0 - 1.0 / inv as f64)).sqrt();
                    assert!(
                        (c as f64 - expected).abs() < 5.0 * sd,
                        "1/{inv}: bit {b} picked {c} times of {rounds}"
                    );
                }
            }
        }
        let mut never = ExactMatchCache::new(64, 0, 7);
        assert_eq!(never.pick_inserts(u64::MAX), 0);
        assert!(!never.should_insert());
    }
}

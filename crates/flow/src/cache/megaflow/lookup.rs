//! The megaflow cache's lookups: a chunk of keys through the subtables in rank order (hashed
//! subtables by tag and candidate, listed ones by comparing with their few megaflows), and the
//! overlap search of installs. It moves only hit counters and last-use times, and revalidates
//! the stale megaflows it meets (which may delete them); it never installs, never evicts to
//! make room and never allocates.

use super::{
    prefetch, tag_of, MegaflowCache, Probe, Translator, FEW, IP4_L4_KEY_WORDS, NONE_FOUND, SEARCH,
    SLOTS,
};
use crate::cache::{Hit, MegaflowId, CHUNK};
use crate::extract::Ip4Words;
use crate::key::FlowKey;

/// A listed subtable's megaflows as a six-word key ([`Ip4Words`]) sees them: the subtable's
/// mask and each megaflow's key in the order of the six words. Made once per pass over the
/// subtable, so a key's compare reads no subtable and no megaflow.
struct Listed {
    mask: Ip4Words,
    keys: [Ip4Words; FEW],
    ids: [u32; FEW],
    n: usize,
}

impl Listed {
    /// The listed megaflow matching six-word key `w` (megaflows of one subtable never
    /// overlap: the first match is the one).
    #[inline(always)]
    fn find(&self, w: &Ip4Words) -> Option<MegaflowId> {
        for j in 0..self.n.min(FEW) {
            let k = &self.keys[j];
            let mut differ = 0;
            for t in 0..IP4_L4_KEY_WORDS.len() {
                differ |= (w[t] & self.mask[t]) ^ k[t];
            }
            if differ == 0 {
                return Some(self.ids[j]);
            }
        }
        None
    }
}

impl MegaflowCache {
    #[inline(always)]
    pub(super) fn sub_hash(&self, si: usize, key: Probe<'_>) -> u64 {
        let s = &self.subtables[si];
        match key {
            Probe::Whole(key) => self.hk.hash_masked(key, &s.mask, &s.hash),
            Probe::Ip4(w) => self.hk.hash_masked_ip4(w, &s.hash),
        }
    }

    /// True when megaflow `id` (of subtable `si`) matches `key`.
    #[inline(always)]
    pub(super) fn verify(&self, si: usize, key: Probe<'_>, id: usize) -> bool {
        let s = &self.subtables[si];
        let mk = &self.keys[id];
        match key {
            Probe::Whole(key) => s.words[..s.n_words as usize].iter().all(|&w| {
                let w = w as usize;
                key.w[w] & s.mask.w[w] == mk.w[w]
            }),
            Probe::Ip4(w) => {
                let m = &s.hash.ip4_mask;
                let mut differ = 0;
                for t in 0..IP4_L4_KEY_WORDS.len() {
                    differ |= (w[t] & m[t]) ^ mk.w[IP4_L4_KEY_WORDS[t]];
                }
                differ == 0 && (s.ip4_other == 0 || self.zero_outside_ip4(si, id))
            }
        }
    }

    /// True when megaflow `id` of subtable `si` is zero in every word of the subtable's mask
    /// outside the `IP4_L4` positions (where a key of that shape is zero).
    #[cold]
    fn zero_outside_ip4(&self, si: usize, id: usize) -> bool {
        let mk = &self.keys[id];
        let mut m = self.subtables[si].ip4_other;
        while m != 0 {
            let j = m.trailing_zeros() as usize;
            m &= m - 1;
            if mk.w.get(j).is_some_and(|&v| v != 0) {
                return false;
            }
        }
        true
    }

    /// True when `subtables` is not 0, the cache has at most that many subtables and every one
    /// is listed: a lookup then compares a key with a handful of megaflows, which costs fewer
    /// instructions than the exact-match cache's hash and probe (callgrind, flow-switch per
    /// hit at 1k flows: 303 without the EMC against 376 through it).
    pub(crate) fn cheaper_than_emc(&self, subtables: usize) -> bool {
        subtables != 0
            && self.order.len() <= subtables
            && self.order.iter().all(|&si| {
                self.subtables
                    .get(si as usize)
                    .is_some_and(|s| s.few().is_some())
            })
    }

    /// The listed megaflows `ids[..n]` of subtable `si` as [`Listed`] (for six-word keys).
    #[inline(always)]
    fn listed_ip4(&self, si: usize, ids: [u32; FEW], n: usize) -> Listed {
        let s = &self.subtables[si];
        let mut l = Listed {
            mask: s.hash.ip4_mask,
            keys: [[0; IP4_L4_KEY_WORDS.len()]; FEW],
            ids: [NONE_FOUND; FEW],
            n: 0,
        };
        for &id in &ids[..n.min(FEW)] {
            // A megaflow that needs a word a six-word key has as zero, but is not zero there,
            // matches no such key: it is left out.
            if s.ip4_other != 0 && !self.zero_outside_ip4(si, id as usize) {
                continue;
            }
            let Some(mk) = self.keys.get(id as usize) else {
                continue;
            };
            l.keys[l.n] = IP4_L4_KEY_WORDS.map(|j| mk.w[j]);
            l.ids[l.n] = id;
            l.n += 1;
        }
        l
    }

    /// The megaflow of subtable `si` matching `key`, whose subtable hash is `h`.
    #[inline(always)]
    pub(super) fn find(&self, si: usize, key: Probe<'_>, h: u64) -> Option<MegaflowId> {
        let tag = tag_of(si, h);
        let mut b = h as usize & self.bmask;
        for _ in 0..=self.bmask {
            let bucket = &self.buckets[b];
            for slot in 0..SLOTS {
                if bucket.tag[slot] == tag {
                    let id = bucket.id[slot] as usize;
                    if self.verify(si, key, id) {
                        return Some(id as MegaflowId);
                    }
                }
            }
            if bucket.overflow == 0 {
                return None;
            }
            b = (b + 1) & self.bmask;
        }
        None
    }

    /// The first candidate of `key` (hash `h`) in its home bucket: `Ok(id)` to verify,
    /// `Err(true)` for a sure miss (no candidate, no overflow), `Err(false)` to search fully.
    #[inline(always)]
    fn candidate(&self, si: usize, h: u64) -> Result<usize, bool> {
        let tag = tag_of(si, h);
        let bucket = &self.buckets[h as usize & self.bmask];
        let mut hit = 0;
        let mut n = 0;
        for (slot, &t) in bucket.tag.iter().enumerate() {
            if t == tag {
                hit = slot;
            }
            n += (t == tag) as u32;
        }
        match (n, bucket.overflow) {
            (0, 0) => Err(true),
            (1, _) => Ok(bucket.id[hit] as usize),
            _ => Err(false),
        }
    }

    /// The first megaflow (in lookup order) matching `key`, stale or not; no counter moves.
    pub(crate) fn find_any(&self, key: &FlowKey) -> Option<MegaflowId> {
        let key = Probe::Whole(key);
        self.order.iter().find_map(|&si| {
            let si = si as usize;
            self.find(si, key, self.sub_hash(si, key))
        })
    }

    /// Look up the keys of `keys` whose bit is set in `want` (at most [`CHUNK`] keys), writing
    /// `Hit::Megaflow` into `out` for the found ones; returns the bits of those not found.
    /// A key whose bit is set in `six` is looked up from its six words in `ip4` (its slot in
    /// `keys` is not read; the key's map must be `IP4_L4_MAP`). A stale megaflow is
    /// revalidated through `xl` before it is used.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lookup_chunk<T: Translator + ?Sized>(
        &mut self,
        xl: &T,
        now_ms: u64,
        keys: &[FlowKey],
        ip4: &[Ip4Words],
        six: u64,
        out: &mut [Hit],
        mut want: u64,
    ) -> u64 {
        let n = keys.len().min(out.len()).min(ip4.len()).min(CHUNK);
        let probe = |i: usize| {
            if six & (1u64 << i) != 0 {
                Probe::Ip4(&ip4[i])
            } else {
                Probe::Whole(&keys[i])
            }
        };
        if n < CHUNK {
            want &= (1u64 << n) - 1;
        }
        self.stats.megaflow_lookups += want.count_ones() as u64;
        let mut hashes = [0u64; CHUNK];
        let mut found = [0u32; CHUNK];
        let mut cand = [0u32; CHUNK];
        let mut missing = 0u64;
        // The last megaflow hit: keys of one megaflow often come in a row.
        let mut last_hit = MegaflowId::MAX;
        // Bounded: each round revalidates (renews or deletes) at least one stale megaflow.
        for _round in 0..=CHUNK {
            let mut remaining = want;
            let mut stale = 0u64;
            for (rank, oi) in (0..self.order.len()).enumerate() {
                if remaining == 0 {
                    break;
                }
                let si = self.order[oi] as usize;
                let few = self.subtables[si].few();
                // A listed subtable's keys skip passes 1 and 2: pass 3 compares them with its
                // megaflows.
                let to_hash = if few.is_some() { 0 } else { remaining };
                // Pass 1: hash the keys still unmatched, start loading their buckets.
                let mut m = to_hash;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    let h = self.sub_hash(si, probe(i));
                    hashes[i] = h;
                    prefetch(&self.buckets[h as usize & self.bmask]);
                    m &= m - 1;
                }
                // Pass 2: pick each key's candidate, start loading its megaflow key.
                let first_word = self.subtables[si].words[0] as usize;
                let mut m = to_hash;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    cand[i] = match self.candidate(si, hashes[i]) {
                        Ok(id) => {
                            prefetch(&self.keys[id].w[first_word]);
                            id as u32
                        }
                        Err(true) => NONE_FOUND,
                        Err(false) => SEARCH,
                    };
                }
                // A listed subtable's megaflows as six-word keys see them, made once per pass
                // rather than per key.
                let listed = few.map(|(ids, n)| self.listed_ip4(si, ids, n));
                // Pass 3: verify; an unclear bucket gets the full search.
                let mut m = remaining;
                let mut hits = 0u64;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let got = match (few, cand[i]) {
                        // Megaflows of one subtable never overlap: the first match is the one.
                        (Some((ids, n)), _) => match (&listed, six & (1u64 << i) != 0) {
                            (Some(l), true) => l.find(&ip4[i]),
                            _ => ids[..n]
                                .iter()
                                .copied()
                                .find(|&id| self.verify(si, probe(i), id as usize)),
                        },
                        (None, NONE_FOUND) => None,
                        (None, SEARCH) => self.find(si, probe(i), hashes[i]),
                        (None, id) if self.verify(si, probe(i), id as usize) => Some(id),
                        (None, _) => self.find(si, probe(i), hashes[i]),
                    };
                    if let Some(id) = got {
                        remaining &= !(1u64 << i);
                        let meta = &mut self.meta[id as usize];
                        if meta.version != self.version {
                            stale |= 1u64 << i;
                            found[i] = id;
                        } else {
                            meta.last_used = now_ms;
                            out[i] = Hit::Megaflow(id);
                            hits += 1;
                            if id != last_hit {
                                last_hit = id;
                                self.prefetch_rules(id);
                            }
                            self.stats.subtables_visited += rank as u64 + 1;
                        }
                    }
                }
                self.subtables[si].hits += hits;
                self.stats.megaflow_hits += hits;
            }
            missing |= remaining;
            want = 0;
            if stale == 0 {
                break;
            }
            // Revalidate what was found stale; a key whose megaflow went is looked up again.
            let mut again = 0u64;
            let mut m = stale;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let id = found[i];
                let alive = self.meta.get(id as usize).is_some_and(|m| m.alive);
                if alive && self.meta[id as usize].version != self.version {
                    self.revalidate(xl, id);
                }
                match self.meta.get_mut(id as usize) {
                    Some(meta) if meta.alive => {
                        meta.last_used = now_ms;
                        out[i] = Hit::Megaflow(id);
                        self.stats.megaflow_hits += 1;
                        self.stats.subtables_visited += 1;
                    }
                    _ => again |= 1u64 << i,
                }
            }
            if again == 0 {
                break;
            }
            want = again;
        }
        // Keys still wanted after the last round (never reached in practice) count as misses.
        missing |= want;
        self.stats.misses += missing.count_ones() as u64;
        missing
    }
}

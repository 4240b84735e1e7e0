//! One subtable of the tuple space search: the rules of a table that share one mask, indexed
//! stage by stage. Owns the stage hash sets, the final hash index and the ports trie; it never
//! looks at another subtable and never allocates on lookup.
//!
//! The mask's words are split by `Stage` (metadata, L2, L3, L4). Every stage but the last has a
//! set of the hashes of the key masked up to and including that stage; the last has the index
//! of full masked keys. A lookup hashes stage after stage and stops at the first stage whose
//! hash is absent: only the mask bits of the stages consulted so far are then added to the
//! wildcard mask. A hash collision in a set only lets the lookup go on; the final index compares
//! the masked key itself.

use super::trie::{prefix_len, prefix_mask, PrefixTrie};
use super::{PrefixTracking, TrieCtx, TRIE_FIELDS};
use crate::key::{Field, FlowKey, Stage, KEY_WORDS};

/// Hash of one more masked word into a running stage hash.
#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31)
}

/// Open-addressing set of 64-bit hashes (0 marks an empty slot; a hash of 0 is stored as 1).
#[derive(Clone, Debug, Default)]
struct HashSet64 {
    slots: Vec<u64>,
}

impl HashSet64 {
    fn with_items(items: impl Iterator<Item = u64>, n: usize) -> Self {
        let cap = (n * 2).next_power_of_two().max(4);
        let mut s = HashSet64 {
            slots: vec![0; cap],
        };
        for h in items {
            let h = h.max(1);
            let m = cap - 1;
            let mut i = (h as usize) & m;
            while s.slots[i] != 0 && s.slots[i] != h {
                i = (i + 1) & m;
            }
            s.slots[i] = h;
        }
        s
    }

    #[inline]
    fn contains(&self, h: u64) -> bool {
        let h = h.max(1);
        let m = self.slots.len() - 1;
        let mut i = (h as usize) & m;
        loop {
            let s = self.slots[i];
            if s == h {
                return true;
            }
            if s == 0 {
                return false;
            }
            i = (i + 1) & m;
        }
    }
}

/// Rules sharing one masked key, best first (priority high to low, then table order).
#[derive(Clone, Debug)]
struct Entry {
    hash: u64,
    key: FlowKey,
    rules: Vec<(u16, u32)>,
}

/// A stage of a subtable: where its words end in `words`, and which stage it is.
#[derive(Clone, Copy, Debug)]
struct StageRange {
    end: u8,
    stage: Stage,
}

/// A rule as a subtable indexes it: priority, masked key, position in the table.
pub(crate) type SubtableRule = (u16, FlowKey, u32);

/// Rules that share one mask.
#[derive(Clone, Debug)]
pub(crate) struct Subtable {
    /// The mask every rule here has.
    pub mask: FlowKey,
    /// Highest priority of its rules.
    pub max_priority: u16,
    /// Indices of the words with mask bits, in key order.
    words: [u8; KEY_WORDS],
    /// Stages with mask bits, in lookup order (at least one).
    stages: [StageRange; 4],
    n_stages: u8,
    /// Prefix length of the mask on each of `TRIE_FIELDS` (0: the field is not a prefix here).
    trie_plen: [u8; TRIE_FIELDS.len()],
    /// Stage sets of all stages but the last.
    sets: [HashSet64; 3],
    /// Final index: slots hold entry index + 1, 0 is empty.
    slots: Vec<u32>,
    entries: Vec<Entry>,
    /// Trie of the rules' transport ports (tp_src in the high 16 bits, tp_dst in the low 16)
    /// when the last stage has nothing but ports; with the mask and its prefix length.
    ports: Option<(PrefixTrie, u32)>,
}

/// The 32-bit ports value Open vSwitch tries on: tp_src high, tp_dst low.
#[inline]
fn ports_value(key: &FlowKey) -> u32 {
    ((key.get(Field::TpSrc) as u32) << 16) | key.get(Field::TpDst) as u32
}

impl Subtable {
    /// A subtable for `mask` holding `rules` (priority, match key, index in the table).
    pub fn new(mask: FlowKey, rules: &[SubtableRule], prefixes: PrefixTracking) -> Subtable {
        let mut words = [0u8; KEY_WORDS];
        let mut n_words = 0usize;
        let mut stages = [StageRange {
            end: 0,
            stage: Stage::Metadata,
        }; 4];
        let mut n_stages = 0usize;
        for stage in Stage::ALL {
            let before = n_words;
            for w in stage.words() {
                if mask.w[w] != 0 {
                    words[n_words] = w as u8;
                    n_words += 1;
                }
            }
            if n_words > before {
                stages[n_stages] = StageRange {
                    end: n_words as u8,
                    stage,
                };
                n_stages += 1;
            }
        }
        if n_stages == 0 {
            // A catch-all mask: one empty stage whose hash is the basis.
            stages[0] = StageRange {
                end: 0,
                stage: Stage::Metadata,
            };
            n_stages = 1;
        }
        let mut trie_plen = [0u8; TRIE_FIELDS.len()];
        for (j, f) in TRIE_FIELDS.iter().enumerate() {
            if !prefixes.has(j) {
                continue;
            }
            trie_plen[j] = prefix_len(mask.get(*f), f.bits()).unwrap_or(0) as u8;
        }
        let mut st = Subtable {
            mask,
            max_priority: rules.iter().map(|r| r.0).max().unwrap_or(0),
            words,
            stages,
            n_stages: n_stages as u8,
            trie_plen,
            sets: Default::default(),
            slots: Vec::new(),
            entries: Vec::new(),
            ports: None,
        };
        st.index(rules);
        st
    }

    fn stage_hashes(&self, key: &FlowKey, out: &mut [u64; 4]) {
        let mut h = 0u64;
        let mut start = 0usize;
        for (s, range) in self.stages[..self.n_stages as usize].iter().enumerate() {
            for &w in &self.words[start..range.end as usize] {
                h = mix(h, key.w[w as usize] & self.mask.w[w as usize]);
            }
            out[s] = h;
            start = range.end as usize;
        }
    }

    fn index(&mut self, rules: &[SubtableRule]) {
        let n = self.n_stages as usize;
        let mut per_stage: [Vec<u64>; 4] = Default::default();
        let mut by_key: std::collections::HashMap<FlowKey, usize> = Default::default();
        for (prio, key, idx) in rules {
            let mut hs = [0u64; 4];
            self.stage_hashes(key, &mut hs);
            for s in 0..n - 1 {
                per_stage[s].push(hs[s]);
            }
            let masked = key.masked(&self.mask);
            let e = *by_key.entry(masked).or_insert_with(|| {
                self.entries.push(Entry {
                    hash: hs[n - 1],
                    key: masked,
                    rules: Vec::new(),
                });
                self.entries.len() - 1
            });
            self.entries[e].rules.push((*prio, *idx));
        }
        for e in &mut self.entries {
            e.rules.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        for (set, items) in self.sets.iter_mut().zip(per_stage.iter()).take(n - 1) {
            *set = HashSet64::with_items(items.iter().copied(), items.len());
        }
        let cap = (self.entries.len() * 2).next_power_of_two().max(4);
        self.slots = vec![0; cap];
        for (i, e) in self.entries.iter().enumerate() {
            let m = cap - 1;
            let mut j = (e.hash as usize) & m;
            while self.slots[j] != 0 {
                j = (j + 1) & m;
            }
            self.slots[j] = i as u32 + 1;
        }
        // Ports trie: only when the last stage is L4 and has nothing but the two ports, so that
        // a miss there is decided by port bits alone.
        let last = self.stages[n - 1];
        let w = Field::TpSrc.def().word as usize;
        let ports_only = (1u64 << 32) - 1;
        if last.stage == Stage::L4 && self.mask.w[w] & !ports_only == 0 {
            let pmask = ports_value(&self.mask);
            let plen = 32 - pmask.trailing_zeros();
            let mut trie = PrefixTrie::new(32);
            for (_, key, _) in rules {
                trie.insert((ports_value(key) & pmask) as u128, plen);
            }
            self.ports = Some((trie, pmask));
        }
    }

    /// Fold the mask bits of `words[..end]` into `wc`.
    #[inline]
    fn fold(&self, wc: &mut FlowKey, end: usize) {
        for &w in &self.words[..end] {
            wc.w[w as usize] |= self.mask.w[w as usize];
        }
    }

    /// The best rule of this subtable matching `key` as (priority, index), adding to `wc` the
    /// bits the answer depended on.
    #[inline]
    pub fn lookup(
        &self,
        key: &FlowKey,
        wc: &mut FlowKey,
        tries: &[PrefixTrie; TRIE_FIELDS.len()],
        ctx: &mut TrieCtx,
    ) -> Option<(u16, u32)> {
        let n = self.n_stages as usize;
        let mut h = 0u64;
        let mut start = 0usize;
        for (s, range) in self.stages[..n].iter().enumerate() {
            let end = range.end as usize;
            if range.stage == Stage::L3 && self.check_tries(key, wc, tries, ctx) {
                self.fold(wc, start);
                return None;
            }
            for &w in &self.words[start..end] {
                h = mix(h, key.w[w as usize] & self.mask.w[w as usize]);
            }
            if s + 1 < n {
                if !self.sets[s].contains(h) {
                    self.fold(wc, end);
                    return None;
                }
                start = end;
                continue;
            }
            if let Some(found) = self.find(key, h) {
                self.fold(wc, end);
                return Some(found);
            }
            if let Some((trie, pmask)) = &self.ports {
                let value = ports_value(key) & pmask;
                let (_, needed) = trie.lookup(value as u128);
                let bits = pmask & prefix_mask(needed, 32) as u32;
                let w = Field::TpSrc.def().word as usize;
                wc.w[w] |= ((bits >> 16) as u64) | (((bits & 0xffff) as u64) << 16);
                self.fold(wc, start);
                return None;
            }
            self.fold(wc, end);
            return None;
        }
        None
    }

    #[inline]
    fn find(&self, key: &FlowKey, h: u64) -> Option<(u16, u32)> {
        let m = self.slots.len() - 1;
        let mut i = (h as usize) & m;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            let e = &self.entries[s as usize - 1];
            if e.hash == h
                && self
                    .words
                    .iter()
                    .take(self.stages[self.n_stages as usize - 1].end as usize)
                    .all(|&w| key.w[w as usize] & self.mask.w[w as usize] == e.key.w[w as usize])
            {
                return e.rules.first().copied();
            }
            i = (i + 1) & m;
        }
    }

    /// Prefix tracking: true when a trie proves that no rule of this subtable can match (and
    /// the trie bits that proved it are in `wc`).
    #[inline]
    fn check_tries(
        &self,
        key: &FlowKey,
        wc: &mut FlowKey,
        tries: &[PrefixTrie; TRIE_FIELDS.len()],
        ctx: &mut TrieCtx,
    ) -> bool {
        for (j, field) in TRIE_FIELDS.iter().enumerate() {
            let plen = self.trie_plen[j] as u32;
            if plen == 0 {
                continue;
            }
            let (plens, needed) = ctx.get(j, key, &tries[j]);
            if plens & (1u128 << (plen - 1)) == 0 {
                // As Open vSwitch: the trie is shared by the table, so its answer may need
                // more bits than this subtable's prefix; use it only when that adds no bit
                // the subtable's own lookup would not (else look the subtable up).
                let bits = prefix_mask(needed, field.bits());
                let old = wc.get(*field);
                if needed <= plen {
                    wc.set(*field, old | bits);
                    return true;
                }
                if old & bits == bits {
                    return true;
                }
            }
        }
        false
    }
}

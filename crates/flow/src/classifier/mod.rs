//! The slow-path classifier of one OpenFlow table: tuple space search with staged lookup,
//! prefix tracking and wildcard tracking. Owns the index of a table's rules; it never runs
//! actions, never changes once built (a rule change builds a new one), never allocates on lookup.
//!
//! How it works (Open vSwitch's `classifier.h` design, in our words):
//! - **Tuple space search.** Rules are grouped by mask into subtables; a subtable is one hash
//!   lookup of the key masked by its mask. Subtables are visited from the highest "highest
//!   priority" down, and the search stops once the best match found so far has a priority at
//!   least as high as everything any remaining subtable holds (ties between equal priorities
//!   that overlap are, as in OpenFlow, left undefined: the first found wins).
//! - **Wildcard tracking.** Every lookup adds to a caller's mask (`wc`) each key bit its answer
//!   depended on. Any key that agrees with the looked-up key on the bits of `wc` gets the same
//!   answer; that is what makes the megaflow built from it correct, and the fewer bits the wider
//!   (and fewer) the megaflows.
//! - **Staged lookup.** A subtable hashes the key stage by stage (metadata, L2, L3, L4) and keeps
//!   a set of the hashes of every stage prefix of its rules; when a stage's hash is absent, the
//!   subtable cannot match and only the mask bits of the stages hashed so far are consulted.
//! - **Prefix tracking.** For `nw_dst`, `nw_src`, `ipv6_dst`, `ipv6_src` the table keeps a trie
//!   of all its rules' prefixes. Before a subtable whose mask is an N-bit prefix of such a field
//!   hashes the L3 stage, the trie says whether any rule of the table has an N-bit prefix
//!   matching the key; when none does, the subtable is skipped and only the leading address bits
//!   the trie walk needed are consulted (not the subtable's whole /N). The same is done with the
//!   transport ports (a per-subtable trie) when the last stage misses on port bits alone.

mod subtable;
pub mod trie;

use crate::key::{Field, FlowKey};
use crate::rule::Match;
use subtable::{Subtable, SubtableRule};
use trie::PrefixTrie;

/// Fields with prefix tracking, in the order tries are consulted.
pub const TRIE_FIELDS: [Field; 4] = [Field::NwDst, Field::NwSrc, Field::Ipv6Dst, Field::Ipv6Src];

/// Which of `TRIE_FIELDS` have prefix tracking. Open vSwitch's default is `nw_dst` and
/// `nw_src` only (`PrefixTracking::IPV4`); ours is all four, for wider IPv6 megaflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixTracking(u8);

impl PrefixTracking {
    /// `nw_dst`, `nw_src`, `ipv6_dst`, `ipv6_src`.
    pub const ALL: PrefixTracking = PrefixTracking(0b1111);
    /// `nw_dst`, `nw_src` (Open vSwitch's default).
    pub const IPV4: PrefixTracking = PrefixTracking(0b0011);
    /// None.
    pub const NONE: PrefixTracking = PrefixTracking(0);

    /// Tracking for `fields`; None when one of them is not in `TRIE_FIELDS`.
    pub fn of(fields: &[Field]) -> Option<PrefixTracking> {
        let mut bits = 0u8;
        for f in fields {
            bits |= 1 << TRIE_FIELDS.iter().position(|t| t == f)?;
        }
        Some(PrefixTracking(bits))
    }

    #[inline]
    fn has(self, j: usize) -> bool {
        self.0 & (1 << j) != 0
    }
}

impl Default for PrefixTracking {
    fn default() -> Self {
        PrefixTracking::ALL
    }
}

/// The Ethernet type a trie field needs for its trie to speak about a key (`nw_src`/`nw_dst`
/// also hold ARP addresses; for those and other packets the trie never skips).
const fn trie_eth_type(j: usize) -> u16 {
    if j < 2 {
        0x0800
    } else {
        0x86dd
    }
}

/// Trie results of one lookup, computed on first use.
#[derive(Default)]
pub(crate) struct TrieCtx {
    done: u8,
    plens: [u128; TRIE_FIELDS.len()],
    needed: [u32; TRIE_FIELDS.len()],
}

impl TrieCtx {
    /// The matching prefix lengths and needed bits of trie `j` for `key`.
    #[inline]
    fn get(&mut self, j: usize, key: &FlowKey, trie: &PrefixTrie) -> (u128, u32) {
        if self.done & (1 << j) == 0 {
            self.done |= 1 << j;
            if key.get(Field::EthType) as u16 == trie_eth_type(j) {
                let (p, n) = trie.lookup(key.get(TRIE_FIELDS[j]));
                self.plens[j] = p;
                self.needed[j] = n;
            } else {
                // Not an address of this kind: every length "matches", nothing is skipped.
                self.plens[j] = u128::MAX;
                self.needed[j] = 0;
            }
        }
        (self.plens[j], self.needed[j])
    }
}

/// The classifier of one table. Rules are given by index; lookups answer an index.
#[derive(Clone, Debug)]
pub struct Classifier {
    subtables: Vec<Subtable>,
    tries: [PrefixTrie; TRIE_FIELDS.len()],
    n_rules: usize,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new(&[], PrefixTracking::ALL)
    }
}

impl Classifier {
    /// A classifier over `rules` (priority, match) tracking prefixes of the fields in
    /// `prefixes`; a lookup answers the rule's position.
    pub fn new(rules: &[(u16, Match)], prefixes: PrefixTracking) -> Classifier {
        let mut by_mask: Vec<(FlowKey, Vec<SubtableRule>)> = Vec::new();
        let mut pos: std::collections::HashMap<FlowKey, usize> = Default::default();
        let mut tries = TRIE_FIELDS.map(|f| PrefixTrie::new(f.bits()));
        for (i, (prio, m)) in rules.iter().enumerate() {
            let k = *pos.entry(m.mask).or_insert_with(|| {
                by_mask.push((m.mask, Vec::new()));
                by_mask.len() - 1
            });
            by_mask[k].1.push((*prio, m.key.masked(&m.mask), i as u32));
            for (j, f) in TRIE_FIELDS.iter().enumerate() {
                if !prefixes.has(j) {
                    continue;
                }
                if let Some(len) = trie::prefix_len(m.mask.get(*f), f.bits()) {
                    if len > 0 {
                        tries[j].insert(m.key.get(*f), len);
                    }
                }
            }
        }
        let mut subtables: Vec<Subtable> = by_mask
            .iter()
            .map(|(mask, rules)| Subtable::new(*mask, rules, prefixes))
            .collect();
        // Stable: subtables of equal rank keep the order their first rule was given in.
        subtables.sort_by_key(|s| std::cmp::Reverse(s.max_priority));
        Classifier {
            subtables,
            tries,
            n_rules: rules.len(),
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// True when there is no rule.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of subtables (distinct masks).
    pub fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// The position of the highest-priority rule matching `key`, adding to `wc` every key bit
    /// the answer depended on.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<u32> {
        let mut ctx = TrieCtx::default();
        let mut best: Option<(u16, u32)> = None;
        for st in &self.subtables {
            if let Some((p, _)) = best {
                if st.max_priority <= p {
                    break;
                }
            }
            if let Some((p, idx)) = st.lookup(key, wc, &self.tries, &mut ctx) {
                if best.is_none_or(|(bp, _)| p > bp) {
                    best = Some((p, idx));
                }
            }
        }
        best.map(|b| b.1)
    }
}

#[cfg(test)]
mod tests;

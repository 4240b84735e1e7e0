//! The per-worker flow caches in front of the slow-path classifier: an exact-match cache (EMC)
//! and a megaflow cache, with aging, a bounded count and revalidation. Owned by one worker thread:
//! no lock and no atomic on the lookup path, no allocation after construction; the control plane
//! sees only what the worker publishes ([`PublishedStats`]) or dumps on request.
//!
//! # Design
//!
//! ```text
//!   keys of a vector (up to 256) ─► EMC (2-way, 8192 entries, full key -> megaflow id + generation)
//!        │ miss                       └ hit only if the megaflow still has that generation and
//!        ▼                              was made for the current tables version
//!   megaflow cache: subtables (one per distinct mask) in rank order; per subtable, hash the
//!        │          still-unmatched keys (a 64-bit bitmask), probe, verify the masked key
//!        │ miss     (hit: insert into the EMC with probability 1/emc_insert_inv_prob)
//!        ▼
//!   caller: translate through the tables (`Translator`), `insert`, run the actions
//! ```
//!
//! Sizes (defaults, [`CacheConfig`]): EMC 8192 entries x 128 bytes = 1 MiB (a key is stored
//! as its present words, a [`SparseKey`]: the words extraction wrote, hashed and compared alone); megaflows 200,000
//! (Open vSwitch's flow limit): the shared hash table is sized for half load in buckets of one
//! cache line (200,000 -> 65,536 buckets, 4 MiB); a megaflow's slab entry is its masked key,
//! its creating key, its actions and counters (the slab is reserved up front and touched as it
//! fills). Up to 512 subtables. A key of the usual shape (IPv4 with a transport header, no
//! tunnel) is hashed and compared straight from its six words ([`Ip4Words`]: extraction's fast
//! path writes only those, and [`FlowCache::lookup_vector`] writes the whole key only when it
//! misses both caches: a subtable hashes and compares those six words too, see `MaskedHash`),
//! with only the first way prefetched (inserts fill the first way first); its sparse form is
//! made only to insert it. The EMC, the megaflow hash table and the slab live on huge pages
//! (`packet::huge`).
//!
//! Hashing: [`HashKey`] (NH with a per-process random key, see `hash.rs`), so crafted flows
//! cannot be aimed at one bucket.
//!
//! Overlap: as Open vSwitch's datapath does, an install first looks the creating key up; when it
//! finds a megaflow, the new one is refused and counted (`overlap_refused`), so a key never has
//! two current megaflows to choose from through its creating key.
//!
//! Full (`max_megaflows` installed): with [`FullPolicy::EvictIdlest`] (default) the megaflow
//! due soonest on the aging wheel (idle longest by the wheel's clock) that was not used in the
//! current millisecond is evicted (`evicted`; up to 8 candidates looked at, one cache miss each);
//! with [`FullPolicy::Refuse`] the install is refused (`megaflow_full`). Either way the packet
//! has its translation and is processed; nothing panics.
//!
//! Aging: a timer wheel (`wheel.rs`) expires megaflows idle for `idle_timeout_ms` (default 10 s)
//! with at most `maintenance_budget` units of work per [`FlowCache::maintain`] call; a hit only
//! writes the megaflow's last-used time.
//!
//! Revalidation: every megaflow remembers the tables version it was made for, the key that made
//! it and the rules it went through. When [`Translator::version`] changes, every older megaflow is
//! stale: a lookup that finds one re-translates its creating key before using it (so correctness
//! holds from the first packet after the change and no packet is lost), and `maintain` sweeps the
//! slab, a budget at a time, doing the same. A stale megaflow is kept (`revalidated`) when the new
//! actions are equal and the new mask consults no bit the old one did not (the classifier's
//! guarantee that every key agreeing on the mask translates alike then covers the old mask too);
//! otherwise it is deleted (`revalidation_deleted`) and its next packet is a miss. EMC entries of
//! stale megaflows are not used until the megaflow is current again.
//!
//! Ranking: each subtable counts its hits; `maintain` re-sorts the lookup order by hits once per
//! `rank_interval_ms` (the worker does it itself, a sort of at most 512 indices) and halves the
//! counts.
//!
//! Switching off: [`FlowCache::set_emc_enabled`] and [`FlowCache::set_megaflow_enabled`] (per
//! port: set them before looking up that port's vector). With the megaflow cache off every key
//! is a miss and nothing is installed.

mod emc;
mod hash;
mod megaflow;
mod stats;
mod wheel;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod tests;

pub use emc::ExactMatchCache;
pub use hash::{nonzero_words, HashKey, MaskedHash, SparseKey, LONG, SHORT, SPARSE_WORDS};
pub use megaflow::{MegaflowCache, MegaflowId};
pub use stats::{CacheStats, CycleHistogram, PublishedStats, CYCLE_BUCKETS};

use crate::dpaction::DpActions;
use crate::extract::{ip4_key, ip4_words, Ip4Words};
use crate::key::{FlowKey, KEY_WORDS};
use crate::rule::RuleId;
use hash::IP4_L4;
use megaflow::CHUNK;

/// A flag in a `words` entry of [`FlowCache::lookup_vector`]: the key is only in its
/// [`Ip4Words`] so far, not in `keys` (outside every key word's bit).
pub const KEY_IN_IP4_WORDS: u32 = 1 << 31;
const _: () = assert!(KEY_WORDS < 31);

/// Write `key` whole from `ip4` if its `words` entry says it is only there so far
/// ([`KEY_IN_IP4_WORDS`]), and clear the flag.
#[inline]
pub fn write_whole_key(key: &mut FlowKey, ip4: &Ip4Words, words: &mut u32) {
    if *words & KEY_IN_IP4_WORDS != 0 {
        *key = ip4_key(ip4);
        *words &= !KEY_IN_IP4_WORDS;
    }
}

/// [`write_whole_key`] for every entry of `which` (a bit per index).
#[inline]
fn write_keys(keys: &mut [FlowKey], ip4: &[Ip4Words], words: &mut [u32], which: u64) {
    let mut m = which;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        if let (Some(w), Some(k), Some(ip4)) = (words.get_mut(i), keys.get_mut(i), ip4.get(i)) {
            write_whole_key(k, ip4, w);
        }
    }
}

/// True when a `words` entry is the map of the usual shape (flag bits aside).
#[inline(always)]
fn is_ip4_l4(words: u32) -> bool {
    words & ((1 << KEY_WORDS) - 1) == IP4_L4
}

/// While the EMC misses, one chunk in this many consults it (the others skip it).
pub const EMC_SAMPLE: u32 = 8;

/// Most rules a megaflow remembers (more are dropped and `RuleList::truncated` is set).
pub const MAX_MEGAFLOW_RULES: usize = 8;

/// The rules a translation went through, in order (for per-rule counters and traces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RuleList {
    len: u8,
    truncated: bool,
    ids: [RuleId; MAX_MEGAFLOW_RULES],
}

impl RuleList {
    /// Append `id`; when full, sets `truncated` and returns false.
    pub fn push(&mut self, id: RuleId) -> bool {
        match self.ids.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = id;
                self.len += 1;
                true
            }
            None => {
                self.truncated = true;
                false
            }
        }
    }

    /// Make the list `ids` (truncated to the first `MAX_MEGAFLOW_RULES`), in place: the length
    /// and flag are whole stores, never a read back of bytes just written one by one.
    pub fn assign(&mut self, ids: &[RuleId]) {
        let n = ids.len().min(MAX_MEGAFLOW_RULES);
        self.ids[..n].copy_from_slice(&ids[..n]);
        self.len = n as u8;
        self.truncated = ids.len() > n;
    }

    /// The rules.
    pub fn as_slice(&self) -> &[RuleId] {
        &self.ids[..self.len as usize]
    }

    /// True when some rules did not fit.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl FromIterator<RuleId> for RuleList {
    fn from_iter<I: IntoIterator<Item = RuleId>>(iter: I) -> Self {
        let mut l = RuleList::default();
        for id in iter {
            l.push(id);
        }
        l
    }
}

/// What a translation yields for the cache: the datapath actions, the mask of the key bits it
/// consulted, the rules it went through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translated {
    /// Datapath actions (empty: drop).
    pub actions: DpActions,
    /// Bits of the key the translation consulted.
    pub mask: FlowKey,
    /// Rules it went through.
    pub rules: RuleList,
}

/// A translation's parts, borrowed: what an install copies into the cache (without first
/// assembling a [`Translated`]).
#[derive(Clone, Copy, Debug)]
pub struct TranslatedRef<'a> {
    /// Datapath actions (empty: drop).
    pub actions: &'a DpActions,
    /// Bits of the key the translation consulted.
    pub mask: &'a FlowKey,
    /// Rules it went through.
    pub rules: &'a [RuleId],
}

impl Translated {
    /// This translation, borrowed.
    pub fn as_ref(&self) -> TranslatedRef<'_> {
        TranslatedRef {
            actions: &self.actions,
            mask: &self.mask,
            rules: self.rules.as_slice(),
        }
    }
}

/// The slow path as the cache sees it (implemented by the flow tables; tests use a fake).
pub trait Translator {
    /// Version of the tables; any change makes older megaflows stale.
    fn version(&self) -> u64;
    /// Translate `key` through the tables. For every key that agrees with `key` on the returned
    /// mask, the translation must be the same actions.
    fn translate(&self, key: &FlowKey) -> Translated;
}

/// The result of a lookup, per key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hit {
    /// Neither cache has it: translate and insert.
    #[default]
    Miss,
    /// Found in the exact-match cache.
    Emc(MegaflowId),
    /// Found in the megaflow cache.
    Megaflow(MegaflowId),
}

impl Hit {
    /// The megaflow, when found.
    #[inline]
    pub fn id(self) -> Option<MegaflowId> {
        match self {
            Hit::Miss => None,
            Hit::Emc(id) | Hit::Megaflow(id) => Some(id),
        }
    }
}

/// Why an install did not happen (the caller still runs the translation's actions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InsertRefused {
    /// The key already matches this current megaflow.
    #[error("the key already matches megaflow {0}")]
    Overlap(MegaflowId),
    /// The cache is full and the policy refuses (or nothing could be evicted).
    #[error("the megaflow cache is full")]
    Full,
    /// The limit on distinct masks is reached.
    #[error("too many distinct megaflow masks")]
    TooManyMasks,
    /// The megaflow cache is switched off.
    #[error("the megaflow cache is switched off")]
    Disabled,
}

/// What to do when `max_megaflows` are installed and another must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FullPolicy {
    /// Evict the megaflow due soonest on the aging wheel (counted `evicted`).
    #[default]
    EvictIdlest,
    /// Refuse the install (counted `megaflow_full`); the packet is processed all the same.
    Refuse,
}

/// Settings of one worker's caches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Most megaflows (1..=4,000,000; default 200,000).
    pub max_megaflows: usize,
    /// Most distinct masks (1..=65,535; default 512).
    pub max_subtables: usize,
    /// Idle time after which a megaflow expires, in ms (1..=3,600,000; default 10,000).
    pub idle_timeout_ms: u64,
    /// What a full cache does.
    pub full_policy: FullPolicy,
    /// Exact-match cache entries (0 or a power of two up to 1,048,576; default 8192).
    pub emc_entries: usize,
    /// Insert into the EMC with probability 1/N on a megaflow hit (0: never; default 100).
    pub emc_insert_inv_prob: u32,
    /// Use the exact-match cache.
    pub emc_enabled: bool,
    /// Skip the exact-match cache while the megaflow cache has at most this many subtables,
    /// each of at most four megaflows (compared directly, they cost less than the EMC's
    /// probe); 0: never skip it (0..=16; default 2).
    pub emc_bypass_subtables: usize,
    /// Use the megaflow cache (off: every key misses, nothing is installed).
    pub megaflow_enabled: bool,
    /// How often the subtables are re-ranked, in ms (default 1000).
    pub rank_interval_ms: u64,
    /// Work units (megaflows examined, wheel slots passed) per maintenance step (default 1024).
    pub maintenance_budget: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_megaflows: 200_000,
            max_subtables: 512,
            idle_timeout_ms: 10_000,
            full_policy: FullPolicy::EvictIdlest,
            emc_entries: 8192,
            emc_insert_inv_prob: 100,
            emc_enabled: true,
            emc_bypass_subtables: 2,
            megaflow_enabled: true,
            rank_interval_ms: 1000,
            maintenance_budget: 1024,
        }
    }
}

/// A cache setting out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("flow cache setting {field} = {value} is out of range: {accepted}")]
pub struct CacheConfigError {
    /// The setting (its `CacheConfig` field name).
    pub field: &'static str,
    /// Its value.
    pub value: u64,
    /// What is accepted.
    pub accepted: &'static str,
}

impl CacheConfig {
    /// Check every setting is within its range.
    pub fn validate(&self) -> Result<(), CacheConfigError> {
        let err = |field, value: u64, accepted| {
            Err(CacheConfigError {
                field,
                value,
                accepted,
            })
        };
        if !(1..=4_000_000).contains(&self.max_megaflows) {
            return err("max_megaflows", self.max_megaflows as u64, "1 to 4000000");
        }
        if !(1..=65_535).contains(&self.max_subtables) {
            return err("max_subtables", self.max_subtables as u64, "1 to 65535");
        }
        if !(1..=3_600_000).contains(&self.idle_timeout_ms) {
            return err(
                "idle_timeout_ms",
                self.idle_timeout_ms,
                "1 to 3600000 (one hour)",
            );
        }
        if self.emc_entries != 0
            && (!self.emc_entries.is_power_of_two() || self.emc_entries > 1 << 20)
        {
            return err(
                "emc_entries",
                self.emc_entries as u64,
                "0 or a power of two up to 1048576",
            );
        }
        if self.maintenance_budget == 0 {
            return err("maintenance_budget", 0, "at least 1");
        }
        if self.emc_bypass_subtables > 16 {
            return err(
                "emc_bypass_subtables",
                self.emc_bypass_subtables as u64,
                "0 to 16",
            );
        }
        Ok(())
    }
}

/// One megaflow as `ctl dump-megaflows` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MegaflowDump {
    /// Its id.
    pub id: MegaflowId,
    /// Masked key.
    pub key: FlowKey,
    /// Mask.
    pub mask: FlowKey,
    /// Actions.
    pub actions: DpActions,
    /// Rules it went through.
    pub rules: RuleList,
    /// Packets credited.
    pub packets: u64,
    /// Bytes credited.
    pub bytes: u64,
    /// Time since the last hit, ms.
    pub idle_ms: u64,
    /// Time since it was installed, ms.
    pub age_ms: u64,
    /// Made for the current tables version (false: awaiting revalidation).
    pub current: bool,
}

/// Both caches of one worker.
pub struct FlowCache {
    hk: HashKey,
    emc: ExactMatchCache,
    mf: MegaflowCache,
    emc_enabled: bool,
    /// See `CacheConfig::emc_bypass_subtables`.
    emc_bypass_subtables: usize,
    /// Chunks still to look up without the EMC (see `CacheStats::emc_skipped`).
    emc_skip: u32,
    /// The last chunk that consulted the EMC mostly missed it: prefetch both ways.
    emc_missing: bool,
    /// One chunk's keys in sparse form (scratch of `lookup_chunk`).
    sparse: Box<[SparseKey]>,
}

impl FlowCache {
    /// Caches sized by `cfg`, hashing with the process key.
    pub fn new(cfg: &CacheConfig) -> Result<FlowCache, CacheConfigError> {
        FlowCache::with_hash_key(cfg, HashKey::process().clone())
    }

    /// Caches sized by `cfg`, hashing with `hk` (tests, benchmarks).
    pub fn with_hash_key(cfg: &CacheConfig, hk: HashKey) -> Result<FlowCache, CacheConfigError> {
        cfg.validate()?;
        Ok(FlowCache {
            emc: ExactMatchCache::new(cfg.emc_entries, cfg.emc_insert_inv_prob, hk.derive(1)),
            mf: MegaflowCache::new(cfg, hk.clone()),
            emc_enabled: cfg.emc_enabled && cfg.emc_entries > 0,
            emc_bypass_subtables: cfg.emc_bypass_subtables,
            emc_skip: 0,
            emc_missing: false,
            sparse: vec![SparseKey::ZERO; CHUNK].into_boxed_slice(),
            hk,
        })
    }

    /// Look up every key of `keys`, writing one [`Hit`] per key into `out` (which must be at
    /// least as long); returns the number of misses. Stale megaflows found on the way are
    /// revalidated through `xl` first. `now_ms` is the worker's coarse clock (milliseconds,
    /// monotonic), used for aging.
    pub fn lookup_batch<T: Translator + ?Sized>(
        &mut self,
        xl: &T,
        now_ms: u64,
        keys: &[FlowKey],
        out: &mut [Hit],
    ) -> usize {
        let mut words = [0u32; CHUNK];
        let n = keys.len().min(out.len());
        let mut misses = 0;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            for (w, k) in words.iter_mut().zip(&keys[start..end]) {
                *w = nonzero_words(k);
            }
            misses += self.lookup_batch_words(
                xl,
                now_ms,
                &keys[start..end],
                &words[..end - start],
                &mut out[start..end],
            );
        }
        misses
    }

    /// [`FlowCache::lookup_batch`] where `words[i]` names a superset of the non-zero words of
    /// `keys[i]` (as [`crate::extract::extract_to`] returns): the exact-match cache hashes and
    /// compares only those. A key's EMC entry is found only with the `words` it was inserted
    /// with (give [`FlowCache::insert_parts_words`] the same), so one caller should derive
    /// `words` one way. `words` must be at least as long as `keys`. (A copying front end of
    /// [`FlowCache::lookup_vector`], for callers that hold whole keys only.)
    pub fn lookup_batch_words<T: Translator + ?Sized>(
        &mut self,
        xl: &T,
        now_ms: u64,
        keys: &[FlowKey],
        words: &[u32],
        out: &mut [Hit],
    ) -> usize {
        let n = keys.len().min(out.len()).min(words.len());
        let mut chunk_keys = [FlowKey::ZERO; CHUNK];
        let mut chunk_words = [0u32; CHUNK];
        let mut ip4 = [[0u64; 6]; CHUNK];
        let mut misses = 0;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            let len = end - start;
            chunk_keys[..len].copy_from_slice(&keys[start..end]);
            for (i, k) in keys[start..end].iter().enumerate() {
                chunk_words[i] = words[start + i] & !KEY_IN_IP4_WORDS;
                ip4[i] = ip4_words(k);
            }
            misses += self.lookup_vector(
                xl,
                now_ms,
                &mut chunk_keys[..len],
                &ip4[..len],
                &mut chunk_words[..len],
                &mut out[start..end],
            );
        }
        misses
    }

    /// Look up a vector of keys as extraction left them: `words[i]` as
    /// [`crate::extract::extract_to`] returns it, `ip4[i]` the key's [`Ip4Words`] whenever
    /// that map is [`crate::extract::IP4_L4_MAP`] (the usual shape, hashed and compared from
    /// those six words). With [`KEY_IN_IP4_WORDS`] also set in `words[i]`, `keys[i]` is not
    /// written (the fast extraction wrote only the six words); every such key that misses both
    /// caches is then written into `keys[i]` and its flag cleared, so that on return every
    /// miss is whole in `keys` (a hit's key may still be only in its six words). Returns the
    /// misses; `out` gets one [`Hit`] per key (at least as long as `keys`, as `ip4` and
    /// `words` are).
    pub fn lookup_vector<T: Translator + ?Sized>(
        &mut self,
        xl: &T,
        now_ms: u64,
        keys: &mut [FlowKey],
        ip4: &[Ip4Words],
        words: &mut [u32],
        out: &mut [Hit],
    ) -> usize {
        self.mf.observe_version(xl.version());
        let n = keys.len().min(out.len()).min(words.len()).min(ip4.len());
        let mut misses = 0;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            misses += self.lookup_chunk(
                xl,
                now_ms,
                &mut keys[start..end],
                &ip4[start..end],
                &mut words[start..end],
                &mut out[start..end],
            );
        }
        misses
    }

    fn lookup_chunk<T: Translator + ?Sized>(
        &mut self,
        xl: &T,
        now_ms: u64,
        keys: &mut [FlowKey],
        ip4: &[Ip4Words],
        words: &mut [u32],
        out: &mut [Hit],
    ) -> usize {
        let n = keys.len();
        let all = if n == CHUNK {
            u64::MAX
        } else {
            (1u64 << n) - 1
        };
        out.fill(Hit::Miss);
        if !self.mf.enabled {
            self.mf.stats.misses += n as u64;
            write_keys(keys, ip4, words, all);
            return n;
        }
        let mut want = all;
        let mut emc_hash = [0u64; CHUNK];
        // Keys whose sparse form fits the EMC (all extracted keys do).
        let mut sparse_ok = 0u64;
        // Of those, keys of the usual shape (`IP4_L4`), hashed and compared from their six
        // words by both caches: their sparse form is made only to insert them into the EMC,
        // and the whole key is written only for misses (translation and install need it).
        let mut six = 0u64;
        for (i, &w) in words.iter().enumerate() {
            six |= (is_ip4_l4(w) as u64) << i;
        }
        // With a few listed megaflows the megaflow cache answers for less than the EMC costs:
        // the EMC is not consulted, nor filled from hits (installs still fill it).
        let bypass = self.emc_enabled && self.mf.cheaper_than_emc(self.emc_bypass_subtables);
        let consult = self.emc_enabled && !bypass && self.emc_skip == 0;
        if bypass {
            self.mf.stats.emc_bypassed += n as u64;
        } else if self.emc_enabled && !consult {
            self.emc_skip -= 1;
            self.mf.stats.emc_skipped += n as u64;
        }
        if consult {
            self.mf.stats.emc_lookups += n as u64;
            let missing = self.emc_missing;
            for i in 0..n {
                if six & (1 << i) != 0 {
                    let h = self.hk.hash_ip4_l4(&ip4[i]);
                    emc_hash[i] = h;
                    // Inserts fill the first way first: most hits are found there, so its
                    // second is loaded only while keys mostly miss (and read both).
                    if missing {
                        self.emc.prefetch(h, true);
                    } else {
                        self.emc.prefetch_first(h);
                    }
                    continue;
                }
                let sk = &mut self.sparse[i];
                if sk.gather(&keys[i], words[i]) {
                    let h = self.hk.hash_sparse(sk);
                    emc_hash[i] = h;
                    self.emc.prefetch(h, sk.is_short());
                    sparse_ok |= 1 << i;
                }
            }
            sparse_ok |= six;
            // Two passes: the probes read the EMC only, so the values they need stay in
            // registers (in one loop with the touches below they were reloaded per key).
            let mut answers = [None; CHUNK];
            let mut look = sparse_ok;
            while look != 0 {
                let i = look.trailing_zeros() as usize;
                look &= look - 1;
                answers[i] = if six & (1 << i) != 0 {
                    self.emc.lookup_ip4_l4(&ip4[i], emc_hash[i])
                } else {
                    self.emc.lookup(&self.sparse[i], emc_hash[i])
                };
            }
            // The last megaflow found current (and touched) in this chunk: keys of one
            // megaflow often come in a row, and for them the check and the touch are done.
            let mut current: Option<(MegaflowId, u32)> = None;
            let mut look = sparse_ok;
            while look != 0 {
                let i = look.trailing_zeros() as usize;
                look &= look - 1;
                if let Some(found) = answers[i] {
                    if current != Some(found) {
                        let (id, gen) = found;
                        if !self.mf.is_current(id, gen) {
                            continue;
                        }
                        self.mf.touch(id, now_ms);
                        self.mf.prefetch_rules(id);
                        current = Some(found);
                    }
                    out[i] = Hit::Emc(found.0);
                    want &= !(1u64 << i);
                }
            }
            self.mf.stats.emc_hits += (all & !want).count_ones() as u64;
        }
        if want == 0 {
            self.emc_missing = false;
            return 0;
        }
        let before = want;
        let missing = self.mf.lookup_chunk(xl, now_ms, keys, ip4, six, out, want);
        write_keys(keys, ip4, words, missing);
        if consult {
            // Keys the megaflow cache had but the EMC did not, against EMC hits: at 3 to 1 in
            // a chunk mostly of such keys, the working set has outgrown the EMC. (New flows,
            // which no cache has, say nothing about it.)
            let emc_hits = (all & !before).count_ones();
            let mf_hits = (before & !missing).count_ones();
            self.emc_missing = mf_hits > emc_hits;
            if mf_hits >= 3 * emc_hits && 2 * (emc_hits + mf_hits) >= CHUNK as u32 {
                self.emc_skip = EMC_SAMPLE - 1;
            }
        }
        if self.emc_enabled && !bypass {
            // Megaflow hits go into the EMC with the insertion probability, also from chunks
            // that skipped it (their key is hashed only then): it keeps learning the flows, so
            // that a sampled chunk sees the hits come back.
            let mut hits = self.emc.pick_inserts(before & !missing);
            while hits != 0 {
                let i = hits.trailing_zeros() as usize;
                hits &= hits - 1;
                let Some(id) = out[i].id() else {
                    continue;
                };
                let h = if !consult {
                    match self.sparse_hash(keys, ip4, words, i) {
                        Some(h) => h,
                        None => continue,
                    }
                } else if six & (1 << i) != 0 {
                    self.sparse[i].set_ip4(&ip4[i]);
                    emc_hash[i]
                } else if sparse_ok & (1 << i) != 0 {
                    emc_hash[i]
                } else {
                    continue;
                };
                self.emc_insert(i, h, id);
            }
        }
        missing.count_ones() as usize
    }

    /// Put key `i`'s sparse form into `sparse[i]` and return its EMC hash (None: it has too
    /// many words for the EMC).
    fn sparse_hash(
        &mut self,
        keys: &[FlowKey],
        ip4: &[Ip4Words],
        words: &[u32],
        i: usize,
    ) -> Option<u64> {
        let sk = &mut self.sparse[i];
        if is_ip4_l4(words[i]) {
            sk.set_ip4(&ip4[i]);
        } else if !sk.gather(&keys[i], words[i]) {
            return None;
        }
        Some(self.hk.hash_sparse(sk))
    }

    /// Insert the sparse key in scratch slot `i` (hash `h`) -> `id` into the EMC.
    fn emc_insert(&mut self, i: usize, h: u64, id: MegaflowId) {
        if let (Some((gen, _)), Some(key)) = (self.mf.gen_of(id), self.sparse.get(i)) {
            let mf = &self.mf;
            self.emc
                .insert(key, h, id, gen, |eid, egen| !mf.is_current(eid, egen));
            self.mf.stats.emc_inserts += 1;
        }
    }

    /// Install the megaflow that translation `t` yields for `key`. `version` is the version of
    /// the tables that made `t`, which must be the current one (it becomes the cache's current
    /// version). Also offered to the EMC with the usual probability. A refusal is counted; the
    /// caller runs `t.actions` on its packets either way.
    pub fn insert(
        &mut self,
        key: &FlowKey,
        t: &Translated,
        version: u64,
        now_ms: u64,
    ) -> Result<MegaflowId, InsertRefused> {
        self.insert_parts(key, t.as_ref(), version, now_ms)
    }

    /// Start loading what the next [`FlowCache::insert`] will write; call it before translating
    /// a miss so that the memory latency overlaps the translation.
    #[inline]
    pub fn prefetch_install(&self) {
        self.mf.prefetch_install();
    }

    /// [`FlowCache::insert`] from a borrowed translation (no copy of it first).
    pub fn insert_parts(
        &mut self,
        key: &FlowKey,
        t: TranslatedRef<'_>,
        version: u64,
        now_ms: u64,
    ) -> Result<MegaflowId, InsertRefused> {
        self.insert_parts_words(key, nonzero_words(key), t, version, now_ms)
    }

    /// [`FlowCache::insert_parts`] for a key looked up with [`FlowCache::lookup_batch_words`]
    /// (`words` as given there).
    pub fn insert_parts_words(
        &mut self,
        key: &FlowKey,
        words: u32,
        t: TranslatedRef<'_>,
        version: u64,
        now_ms: u64,
    ) -> Result<MegaflowId, InsertRefused> {
        let id = self.mf.insert(key, t, version, now_ms)?;
        if self.emc_enabled && self.emc.should_insert() && self.sparse[0].gather(key, words) {
            let h = self.hk.hash_sparse(&self.sparse[0]);
            self.emc_insert(0, h, id);
        }
        Ok(id)
    }

    /// Bounded background work, to call every few milliseconds from the worker's loop: expire
    /// idle megaflows, revalidate stale ones after a version change, re-rank subtables.
    /// Returns the work units spent (at most about four `maintenance_budget`s).
    pub fn maintain<T: Translator + ?Sized>(&mut self, xl: &T, now_ms: u64) -> usize {
        self.mf.maintain(xl, now_ms)
    }

    /// The actions of megaflow `id`.
    #[inline]
    pub fn actions(&self, id: MegaflowId) -> Option<&DpActions> {
        self.mf.actions(id)
    }

    /// The rules megaflow `id` went through.
    pub fn rules(&self, id: MegaflowId) -> Option<&RuleList> {
        self.mf.rules(id)
    }

    /// The port of megaflow `id`'s actions when they are one output and nothing else: what
    /// most hits need, from the line the lookup already read (no line of the actions).
    #[inline]
    pub fn output_port(&self, id: MegaflowId) -> Option<u16> {
        self.mf.output_port(id)
    }

    /// Add to megaflow `id`'s packet and byte counts.
    #[inline]
    pub fn credit(&mut self, id: MegaflowId, packets: u64, bytes: u64) {
        self.mf.credit(id, packets, bytes)
    }

    /// The counters (gauges as of the last maintenance or change).
    pub fn stats(&self) -> CacheStats {
        let mut s = self.mf.stats;
        s.megaflows = self.mf.len() as u64;
        s.subtables = self.mf.subtable_count() as u64;
        s
    }

    /// The megaflow cache (sizes, ranking).
    pub fn megaflows(&self) -> &MegaflowCache {
        &self.mf
    }

    /// The exact-match cache (occupancy).
    pub fn emc(&self) -> &ExactMatchCache {
        &self.emc
    }

    /// Use the exact-match cache or not (for measurement, or per port).
    pub fn set_emc_enabled(&mut self, on: bool) {
        self.emc_enabled = on && self.emc.capacity() > 0;
    }

    /// Use the megaflow cache or not (off: every key misses, nothing is installed).
    pub fn set_megaflow_enabled(&mut self, on: bool) {
        self.mf.enabled = on;
    }

    /// Change the EMC insertion probability to 1/`inv_prob` (0: never).
    pub fn set_emc_insert_inv_prob(&mut self, inv_prob: u32) {
        self.emc.set_insert_inv_prob(inv_prob);
    }

    /// Change the idle timeout (takes effect as megaflows come due; 1..=3,600,000 ms).
    pub fn set_idle_timeout_ms(&mut self, ms: u64) {
        self.mf.idle_timeout_ms = ms.clamp(1, 3_600_000);
    }

    /// Delete every megaflow and EMC entry (counted `flushed`).
    pub fn flush(&mut self) {
        self.mf.flush();
        self.emc.clear();
    }

    /// Append every megaflow to `out` (control plane; allocates).
    pub fn dump(&self, now_ms: u64, out: &mut Vec<MegaflowDump>) {
        self.mf.dump(now_ms, out)
    }
}

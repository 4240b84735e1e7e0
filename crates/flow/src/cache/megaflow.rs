//! The megaflow cache: tuple space search over one subtable per distinct mask, megaflows in a
//! preallocated slab, one bucketized hash table shared by all subtables, aging on a timer wheel,
//! revalidation against a new tables version. Owned by one worker; never locks, and never
//! allocates after construction (every array is sized from the capacity up front).
//!
//! Hash table: buckets of one cache line (7 hash tags, 7 megaflow ids, an overflow count). A
//! megaflow of subtable `s` lives at `hash(key & mask_s, salt_s)`; lookup compares tags, then
//! checks the megaflow's subtable and masked key. Linear probing across buckets; a bucket's
//! overflow count says how many entries passed it, so a lookup stops at the first bucket with
//! none and a delete needs no tombstone. Sized for a load of at most one half. A subtable of
//! at most `FEW` megaflows also lists them, and lookups compare keys with those instead of
//! hashing (see `Subtable::few`). The lookups themselves are in `megaflow/lookup.rs`.

use super::hash::{HashKey, MaskedHash};
use super::stats::CacheStats;
use super::wheel::{TimerWheel, NIL};
use super::{
    CacheConfig, FullPolicy, InsertRefused, MegaflowDump, RuleList, TranslatedRef, Translator,
};
use crate::dpaction::{DpAction, DpActions};
use crate::extract::{Ip4Words, IP4_L4_KEY_WORDS, IP4_L4_MAP};
use crate::key::{FlowKey, KEY_WORDS};
use packet::huge::{advise_huge_pages, HugeTable};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod lookup;

/// A multiply-rotate hasher over 8-byte words, for maps keyed by masks (see `by_mask`).
#[derive(Default)]
pub(crate) struct MaskHasher(u64);

impl Hasher for MaskHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }

    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Index of a megaflow in its cache's slab (stable while it exists; reused after).
pub type MegaflowId = u32;

const SLOTS: usize = 7;
const EMPTY: u32 = u32::MAX;
/// The tag of an empty slot: no entry's (subtables number at most 65,535, so a tag's high
/// half is at most 0xfffe), so a tag match alone says the slot is in use.
const EMPTY_TAG: u32 = u32::MAX;
/// Pass-2 verdicts of the batched lookup (never megaflow ids: ids stay below 4,000,000).
const NONE_FOUND: u32 = u32::MAX;
const SEARCH: u32 = u32::MAX - 1;
/// Largest batch `lookup_chunk` handles at once (a bit per key).
pub(crate) const CHUNK: usize = 64;
/// Eviction candidates looked at, at most (usually the first qualifies).
const EVICT_SAMPLE: usize = 8;
/// Megaflows a subtable lists for lookups without hashing, at most (see `Subtable::few`).
const FEW: usize = 4;
/// `Subtable::few_len` of a subtable that has outgrown its list.
const OUTGROWN: u8 = u8::MAX;

/// A key as a lookup reads it: whole, or as the six words of a key of the usual shape
/// (`IP4_L4_MAP`; zero elsewhere), hashed and compared without writing the whole key.
#[derive(Clone, Copy)]
enum Probe<'a> {
    Whole(&'a FlowKey),
    Ip4(&'a Ip4Words),
}

/// The tag of a table entry: the subtable in the high half (so a tag match is a subtable
/// match), 16 more hash bits in the low half.
#[inline(always)]
fn tag_of(si: usize, h: u64) -> u32 {
    debug_assert!(si < 0xffff, "subtable {si}: tags would meet EMPTY_TAG");
    ((si as u32) << 16) | (h >> 48) as u32
}

/// Ask the CPU to start loading `p`'s cache line (a hint; never faults).
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    packet::prefetch((p as *const T).cast::<u8>());
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Bucket {
    tag: [u32; SLOTS],
    id: [u32; SLOTS],
    overflow: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            tag: [EMPTY_TAG; SLOTS],
            id: [EMPTY; SLOTS],
            overflow: 0,
            _pad: 0,
        }
    }
}

struct Subtable {
    mask: FlowKey,
    words: [u8; KEY_WORDS],
    n_words: u8,
    hash: MaskedHash,
    /// The mask's non-zero words outside the `IP4_L4` positions (a key of that shape is zero
    /// there, so it matches only megaflows that are zero there too).
    ip4_other: u32,
    /// Hits since the last ranking.
    hits: u64,
    count: u32,
    /// Its megaflows while it has held at most [`FEW`]: a lookup compares a key with each
    /// (their keys stay in L1) instead of hashing it and reading a bucket. Wide megaflows, the
    /// ones a cache is for, make such subtables. Once it holds more (`few_len == OUTGROWN`),
    /// lookups hash, until maintenance lists it again after it shrinks (`relist_step`).
    few: [u32; FEW],
    few_len: u8,
}

/// A walk of the bucket table collecting the megaflows of an outgrown subtable that has
/// shrunk to [`FEW`] or fewer, a budget of buckets per maintenance (see `relist_step`).
#[derive(Clone, Copy)]
struct Relist {
    subtable: u16,
    /// The next bucket to read.
    bucket: usize,
    ids: [u32; FEW],
    n: usize,
}

impl Subtable {
    /// The megaflows it lists (None: it has outgrown the list).
    #[inline(always)]
    fn few(&self) -> Option<([u32; FEW], usize)> {
        (self.few_len != OUTGROWN).then_some((self.few, self.few_len as usize))
    }

    /// Note megaflow `id`, installed in it.
    fn list(&mut self, id: u32) {
        match self.few_len {
            OUTGROWN => {}
            n if (n as usize) < FEW => {
                self.few[n as usize] = id;
                self.few_len += 1;
            }
            _ => self.few_len = OUTGROWN,
        }
    }

    /// Note megaflow `id`, deleted from it.
    fn unlist(&mut self, id: u32) {
        if self.few_len == OUTGROWN {
            return;
        }
        let n = self.few_len as usize;
        if let Some(p) = self.few[..n].iter().position(|&x| x == id) {
            self.few[p] = self.few[n - 1];
            self.few_len -= 1;
        }
    }
}

/// What lookups and aging touch, per megaflow: one cache line.
#[repr(align(64))]
#[derive(Clone, Copy, Default)]
struct Meta {
    /// Bumped when the megaflow is freed: an exact-match entry holding an older value is dead.
    gen: u32,
    subtable: u16,
    alive: bool,
    /// The port of the megaflow's actions when they are one output and nothing else (the
    /// usual case), else `NO_OUTPUT`: a hit needs no line of its `Cold` part to act.
    output: u16,
    hash: u64,
    version: u64,
    last_used: u64,
    created: u64,
    packets: u64,
    bytes: u64,
}

/// What only installs, revalidation and dumps touch (and hits, for the actions). In this order,
/// so that an install writes one contiguous run of lines: the rules, then the actions in use.
/// The key a megaflow was made from is not kept: revalidation re-translates the masked key,
/// which gives the same verdict (a translation of either consults the same bits until it
/// consults one outside the old mask, and then the megaflow is deleted either way).
#[repr(C)]
#[derive(Clone, Default)]
struct Cold {
    rules: RuleList,
    actions: DpActions,
}

const _: () = assert!(std::mem::size_of::<Meta>() == 64);

/// `Meta::output` of a megaflow whose actions are not a single output.
const NO_OUTPUT: u16 = u16::MAX;

/// The port of `actions` when they are one output and nothing else (`NO_OUTPUT` otherwise).
fn single_output(actions: &DpActions) -> u16 {
    match actions.as_slice() {
        &[DpAction::Output(p)] if p != NO_OUTPUT => p,
        _ => NO_OUTPUT,
    }
}

/// Bytes of a `Cold` an install usually writes (rules, the first actions).
const COLD_INSTALL_BYTES: usize = 192;

/// The megaflow cache of one worker.
pub struct MegaflowCache {
    hk: HashKey,
    cap: usize,
    max_subtables: usize,
    pub(crate) idle_timeout_ms: u64,
    policy: FullPolicy,
    budget: usize,
    rank_interval_ms: u64,
    pub(crate) enabled: bool,

    subtables: Vec<Subtable>,
    free_subtables: Vec<u16>,
    /// Subtable of each mask. Masks come from the rule tables, never from packets, so an unkeyed
    /// fast hash is enough here (SipHash over 152 bytes cost ~3% of a miss).
    by_mask: HashMap<FlowKey, u16, BuildHasherDefault<MaskHasher>>,
    /// Subtables in lookup order (most hits first at the last ranking).
    order: Vec<u16>,

    /// On huge pages, as are the slab's arrays: under churn every lookup and install reads
    /// them at random, tens of megabytes at the default limit.
    buckets: HugeTable<Bucket>,
    bmask: usize,

    keys: Vec<FlowKey>,
    meta: Vec<Meta>,
    cold: Vec<Cold>,
    free: Vec<u32>,
    count: usize,

    wheel: TimerWheel,
    /// Version of the tables the current megaflows were made for.
    pub(crate) version: u64,
    reval_cursor: usize,
    evict_cursor: usize,
    last_rank_ms: u64,
    relist: Option<Relist>,

    pub(crate) stats: CacheStats,
}

impl MegaflowCache {
    /// An empty cache sized from `cfg` (validated by the caller).
    pub(crate) fn new(cfg: &CacheConfig, hk: HashKey) -> MegaflowCache {
        let cap = cfg.max_megaflows;
        let nb = (cap * 2).div_ceil(SLOTS).next_power_of_two().max(2);
        let keys = Vec::with_capacity(cap);
        let meta = Vec::with_capacity(cap);
        let cold = Vec::with_capacity(cap);
        advise_huge_pages(&keys);
        advise_huge_pages(&meta);
        advise_huge_pages(&cold);
        MegaflowCache {
            hk,
            cap,
            max_subtables: cfg.max_subtables,
            idle_timeout_ms: cfg.idle_timeout_ms,
            policy: cfg.full_policy,
            budget: cfg.maintenance_budget,
            rank_interval_ms: cfg.rank_interval_ms,
            enabled: cfg.megaflow_enabled,
            subtables: Vec::with_capacity(cfg.max_subtables),
            free_subtables: Vec::with_capacity(cfg.max_subtables),
            by_mask: HashMap::with_capacity_and_hasher(cfg.max_subtables, Default::default()),
            order: Vec::with_capacity(cfg.max_subtables),
            buckets: HugeTable::new(nb, Bucket::default()),
            bmask: nb - 1,
            keys,
            meta,
            cold,
            free: Vec::with_capacity(cap),
            count: 0,
            wheel: TimerWheel::new(cap, cfg.idle_timeout_ms),
            version: 0,
            reval_cursor: usize::MAX,
            evict_cursor: 0,
            last_rank_ms: 0,
            relist: None,
            stats: CacheStats::default(),
        }
    }

    /// Megaflows installed.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no megaflow is installed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Subtables (distinct masks) in use.
    pub fn subtable_count(&self) -> usize {
        self.order.len()
    }

    /// Note the tables version; a change makes every megaflow stale (re-checked before use,
    /// revalidated incrementally by maintenance).
    #[inline]
    pub(crate) fn observe_version(&mut self, v: u64) {
        if v != self.version {
            self.version = v;
            self.reval_cursor = 0;
        }
    }

    /// `(generation, current)` of megaflow `id` when it is alive.
    #[inline]
    pub(crate) fn gen_of(&self, id: MegaflowId) -> Option<(u32, bool)> {
        let m = self.meta.get(id as usize)?;
        m.alive.then_some((m.gen, m.version == self.version))
    }

    /// True when `id` is alive with generation `gen` and made for the current version.
    #[inline]
    pub(crate) fn is_current(&self, id: MegaflowId, gen: u32) -> bool {
        match self.meta.get(id as usize) {
            Some(m) => m.gen == gen && m.alive && m.version == self.version,
            None => false,
        }
    }

    #[inline]
    pub(crate) fn touch(&mut self, id: MegaflowId, now_ms: u64) {
        if let Some(m) = self.meta.get_mut(id as usize) {
            m.last_used = now_ms;
        }
    }

    /// Add to a megaflow's packet and byte counts.
    #[inline]
    pub fn credit(&mut self, id: MegaflowId, packets: u64, bytes: u64) {
        if let Some(m) = self.meta.get_mut(id as usize) {
            m.packets += packets;
            m.bytes += bytes;
        }
    }

    /// The actions of megaflow `id` (None when it does not exist).
    #[inline]
    pub fn actions(&self, id: MegaflowId) -> Option<&DpActions> {
        match self.meta.get(id as usize) {
            Some(m) if m.alive => self.cold.get(id as usize).map(|c| &c.actions),
            _ => None,
        }
    }

    /// The port of megaflow `id`'s actions when they are one output and nothing else (read
    /// from its hot line; None also when it does not exist).
    #[inline]
    pub fn output_port(&self, id: MegaflowId) -> Option<u16> {
        match self.meta.get(id as usize) {
            Some(m) if m.alive && m.output != NO_OUTPUT => Some(m.output),
            _ => None,
        }
    }

    /// Start loading the line of megaflow `id`'s rule list (read when its hits are counted),
    /// where a lookup finds it: under churn it is cold by then.
    #[inline(always)]
    pub(crate) fn prefetch_rules(&self, id: MegaflowId) {
        if let Some(c) = self.cold.get(id as usize) {
            prefetch(&c.rules);
        }
    }

    /// The rules megaflow `id` went through.
    pub fn rules(&self, id: MegaflowId) -> Option<&RuleList> {
        match self.meta.get(id as usize) {
            Some(m) if m.alive => self.cold.get(id as usize).map(|c| &c.rules),
            _ => None,
        }
    }

    /// Re-translate stale megaflow `id`: keep it (current version, new rule list) when the
    /// actions are equal and the new mask needs no bit the old one lacks; delete it otherwise.
    /// Returns true when it was kept.
    pub(crate) fn revalidate<T: Translator + ?Sized>(&mut self, xl: &T, id: MegaflowId) -> bool {
        let i = id as usize;
        let (Some(meta), Some(cold)) = (self.meta.get(i), self.cold.get(i)) else {
            return false;
        };
        if !meta.alive {
            return false;
        }
        let version = xl.version();
        let t = xl.translate(&self.keys[i]);
        let old_mask = &self.subtables[meta.subtable as usize].mask;
        if t.actions == cold.actions && t.mask.is_subset_of(old_mask) {
            self.meta[i].version = version;
            self.cold[i].rules = t.rules;
            self.stats.revalidated += 1;
            true
        } else {
            self.delete(id);
            self.stats.revalidation_deleted += 1;
            false
        }
    }

    /// Install the megaflow `t` made from `key` for tables `version`.
    pub(crate) fn insert(
        &mut self,
        key: &FlowKey,
        t: TranslatedRef<'_>,
        version: u64,
        now_ms: u64,
    ) -> Result<MegaflowId, InsertRefused> {
        if !self.enabled {
            return Err(InsertRefused::Disabled);
        }
        self.observe_version(version);
        // As Open vSwitch's dpcls: if a lookup of the key finds a megaflow, the new one would
        // overlap it (and never be reached for this key); a stale one is replaced.
        if let Some(id) = self.find_any(key) {
            if self.meta[id as usize].version == self.version {
                self.stats.overlap_refused += 1;
                return Err(InsertRefused::Overlap(id));
            }
            self.delete(id);
            self.stats.revalidation_deleted += 1;
        }
        // A slot first: evicting may empty (and free) a subtable.
        let slot = match self.take_slot(now_ms) {
            Some(s) => s,
            None => {
                self.stats.megaflow_full += 1;
                return Err(InsertRefused::Full);
            }
        };
        let si = match self.subtable_for(t.mask) {
            Some(si) => si,
            None => {
                self.free.push(slot);
                self.stats.subtable_full += 1;
                return Err(InsertRefused::TooManyMasks);
            }
        };
        let i = slot as usize;
        let masked = key.masked(t.mask);
        let h = self.sub_hash(si, Probe::Whole(&masked));
        let gen = self.meta[i].gen;
        self.keys[i] = masked;
        self.meta[i] = Meta {
            gen,
            subtable: si as u16,
            alive: true,
            output: single_output(t.actions),
            hash: h,
            version,
            last_used: now_ms,
            created: now_ms,
            packets: 0,
            bytes: 0,
        };
        // Field by field, and only the actions in use: the slot is cold, and every cache line
        // written here is one more read-for-ownership on a miss.
        let cold = &mut self.cold[i];
        cold.actions.assign_from(t.actions);
        cold.rules.assign(t.rules);
        self.table_insert(si, h, slot);
        self.wheel
            .schedule(slot, now_ms.saturating_add(self.idle_timeout_ms));
        self.subtables[si].count += 1;
        self.subtables[si].list(slot);
        self.abandon_relist(si);
        self.count += 1;
        self.stats.installed += 1;
        Ok(slot)
    }

    /// Start loading the lines the next install will write (its slot's key, metadata and
    /// cold part), so that they arrive while the miss is being translated. A hint: the slot
    /// guessed may not be the one the install takes.
    #[inline]
    pub(crate) fn prefetch_install(&self) {
        let slot = if let Some(&s) = self.free.last() {
            s as usize
        } else if self.keys.len() < self.cap {
            return; // a fresh slot: pushed (and written) in order, the hardware prefetcher has it
        } else {
            // Full: the install will evict the first candidate (usually), which means taking
            // it out of its bucket, a random line found through its metadata. Under heavy
            // churn the cache turns over faster than the idle timeout, nothing is due within
            // the wheel's window, and the victims come from the rotating window: the metadata
            // of this victim was prefetched here at the previous install, as the next one, so
            // its bucket can be prefetched now, and the next victim's metadata too.
            let (cand, from_wheel, cursor) = self.eviction_candidates();
            let victim = cand[0];
            if let Some(b) = self
                .meta
                .get(victim as usize)
                .and_then(|m| self.buckets.get(m.hash as usize & self.bmask))
            {
                prefetch(b);
            }
            let next = if from_wheel > 1 {
                cand[1]
            } else {
                ((cursor + 1) % self.cap.max(1)) as u32
            };
            if let Some(m) = self.meta.get(next as usize) {
                prefetch(m);
            }
            victim as usize
        };
        let (Some(k), Some(m), Some(c)) = (
            self.keys.get(slot),
            self.meta.get(slot),
            self.cold.get(slot),
        ) else {
            return;
        };
        let kb = (k as *const FlowKey).cast::<u8>();
        for off in (0..std::mem::size_of::<FlowKey>()).step_by(64) {
            packet::prefetch(kb.wrapping_add(off));
        }
        prefetch(m);
        self.wheel.prefetch(slot as u32);
        let base = (c as *const Cold).cast::<u8>();
        for off in (0..COLD_INSTALL_BYTES.min(std::mem::size_of::<Cold>())).step_by(64) {
            packet::prefetch(base.wrapping_add(off));
        }
    }

    /// A free slot, evicting when full. A megaflow used at `now_ms` (this worker's current
    /// vector: its packets may still hold the id) is never the victim, so an id found by a lookup
    /// stays that megaflow until the vector is done; when every sampled one is that fresh the
    /// install is refused (counted as full) instead.
    fn take_slot(&mut self, now_ms: u64) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        if self.keys.len() < self.cap {
            // Within the reserved capacity: no reallocation.
            self.keys.push(FlowKey::ZERO);
            self.meta.push(Meta::default());
            self.cold.push(Cold::default());
            return Some((self.keys.len() - 1) as u32);
        }
        if self.policy == FullPolicy::Refuse || self.count == 0 {
            return None;
        }
        // Full: evict the megaflow due soonest on the aging wheel (the one idle longest by the
        // wheel's clock), skipping any used in the current millisecond; a few candidates only,
        // each costing a cache miss, then a rotating window of the slab as a fallback.
        let (cand, _, cursor) = self.eviction_candidates();
        self.evict_cursor = cursor;
        let victim = cand.iter().copied().find(|&id| {
            id != NIL && self.meta[id as usize].alive && self.meta[id as usize].last_used < now_ms
        })?;
        self.delete(victim);
        self.stats.evicted += 1;
        self.free.pop()
    }

    /// The slots the next eviction tries, in order: those due soonest on the wheel (within 64
    /// ticks), then the rotating window after `evict_cursor`. Also how many came from the wheel
    /// and where the window's cursor ends.
    fn eviction_candidates(&self) -> ([u32; EVICT_SAMPLE], usize, usize) {
        let mut cand = [NIL; EVICT_SAMPLE];
        let from_wheel = self.wheel.soonest(&mut cand, 64);
        let mut cursor = self.evict_cursor;
        for c in cand.iter_mut().skip(from_wheel) {
            cursor = (cursor + 1) % self.cap.max(1);
            *c = cursor as u32;
        }
        (cand, from_wheel, cursor)
    }

    fn subtable_for(&mut self, mask: &FlowKey) -> Option<usize> {
        if let Some(&si) = self.by_mask.get(mask) {
            return Some(si as usize);
        }
        let mut words = [0u8; KEY_WORDS];
        let mut n = 0;
        for (w, &m) in mask.w.iter().enumerate() {
            if m != 0 {
                words[n] = w as u8;
                n += 1;
            }
        }
        let mut salt_src = 0u64;
        for (w, &m) in mask.w.iter().enumerate() {
            salt_src = salt_src.rotate_left(7) ^ m ^ (w as u64);
        }
        let salt = self.hk.derive(salt_src ^ self.hk.hash_key(mask));
        let sub = Subtable {
            mask: *mask,
            words,
            n_words: n as u8,
            hash: self.hk.masked_hash(mask, salt),
            ip4_other: crate::cache::hash::nonzero_words(mask) & !IP4_L4_MAP,
            hits: 0,
            count: 0,
            few: [EMPTY; FEW],
            few_len: 0,
        };
        let si = if let Some(si) = self.free_subtables.pop() {
            self.subtables[si as usize] = sub;
            si
        } else if self.subtables.len() < self.max_subtables {
            self.subtables.push(sub);
            (self.subtables.len() - 1) as u16
        } else {
            return None;
        };
        self.by_mask.insert(*mask, si);
        self.order.push(si);
        self.stats.subtables = self.order.len() as u64;
        Some(si as usize)
    }

    fn table_insert(&mut self, si: usize, h: u64, id: u32) {
        let tag = tag_of(si, h);
        let mut b = h as usize & self.bmask;
        for _ in 0..=self.bmask {
            let bucket = &mut self.buckets[b];
            if let Some(slot) = bucket.id.iter().position(|&x| x == EMPTY) {
                bucket.id[slot] = id;
                bucket.tag[slot] = tag;
                return;
            }
            bucket.overflow += 1;
            b = (b + 1) & self.bmask;
        }
    }

    fn table_remove(&mut self, h: u64, id: u32) {
        let start = h as usize & self.bmask;
        let mut b = start;
        for _ in 0..=self.bmask {
            if let Some(slot) = self.buckets[b].id.iter().position(|&x| x == id) {
                self.buckets[b].id[slot] = EMPTY;
                self.buckets[b].tag[slot] = EMPTY_TAG;
                let mut p = start;
                while p != b {
                    self.buckets[p].overflow -= 1;
                    p = (p + 1) & self.bmask;
                }
                return;
            }
            b = (b + 1) & self.bmask;
        }
    }

    /// Delete megaflow `id` (nothing when it does not exist).
    pub(crate) fn delete(&mut self, id: MegaflowId) {
        let i = id as usize;
        let Some(meta) = self.meta.get(i).copied() else {
            return;
        };
        if !meta.alive {
            return;
        }
        self.table_remove(meta.hash, id);
        self.wheel.cancel(id);
        self.meta[i].alive = false;
        self.meta[i].gen = meta.gen.wrapping_add(1);
        self.free.push(id);
        self.count -= 1;
        let si = meta.subtable as usize;
        self.subtables[si].count -= 1;
        self.subtables[si].unlist(id);
        self.abandon_relist(si);
        if self.subtables[si].count == 0 {
            let mask = self.subtables[si].mask;
            self.by_mask.remove(&mask);
            if let Some(pos) = self.order.iter().position(|&x| x as usize == si) {
                self.order.remove(pos);
            }
            self.free_subtables.push(si as u16);
            self.stats.subtables = self.order.len() as u64;
        }
    }

    /// Delete every megaflow.
    pub(crate) fn flush(&mut self) {
        for id in 0..self.meta.len() {
            if self.meta[id].alive {
                self.delete(id as u32);
                self.stats.flushed += 1;
            }
        }
        self.wheel.clear();
    }

    /// Bounded background work: expire idle megaflows, revalidate stale ones, rank the
    /// subtables, list again a subtable that shrank back (`relist_step`). Returns the work
    /// units spent (at most about four budgets).
    pub(crate) fn maintain<T: Translator + ?Sized>(&mut self, xl: &T, now_ms: u64) -> usize {
        self.observe_version(xl.version());
        let mut work = 0;
        // Aging.
        while let Some(id) = self.wheel.next_due(now_ms, &mut work, self.budget) {
            work += 1;
            let last = self.meta[id as usize].last_used;
            if now_ms.saturating_sub(last) >= self.idle_timeout_ms {
                self.delete(id);
                self.stats.expired += 1;
            } else {
                self.wheel
                    .schedule(id, last.saturating_add(self.idle_timeout_ms));
            }
        }
        // Incremental revalidation after a version change.
        let mut done = 0;
        while self.reval_cursor < self.meta.len() && done < self.budget {
            let id = self.reval_cursor;
            self.reval_cursor += 1;
            done += 1;
            if self.meta[id].alive && self.meta[id].version != self.version {
                self.revalidate(xl, id as u32);
            }
        }
        work += done;
        // Ranking: the worker sorts its own few hundred subtables at most once an interval.
        if now_ms.saturating_sub(self.last_rank_ms) >= self.rank_interval_ms {
            self.last_rank_ms = now_ms;
            let subs = &self.subtables;
            self.order
                .sort_unstable_by(|a, b| subs[*b as usize].hits.cmp(&subs[*a as usize].hits));
            for s in self.subtables.iter_mut() {
                s.hits /= 2;
            }
            work += self.order.len();
        }
        work += self.relist_step();
        self.stats.megaflows = self.count as u64;
        self.stats.subtables = self.order.len() as u64;
        work
    }

    /// Up to a budget of buckets of a walk that lists an outgrown subtable's megaflows again
    /// once it has shrunk to [`FEW`] or fewer (a walk starts when none runs). An install or
    /// delete in that subtable abandons the walk, so a finished walk has seen every megaflow
    /// of it and nothing else; it is kept only if it found as many as the subtable counts.
    /// Returns the buckets read.
    fn relist_step(&mut self) -> usize {
        let mut r = match self.relist {
            Some(r) => r,
            None => {
                let Some(&si) = self.order.iter().find(|&&si| {
                    let s = &self.subtables[si as usize];
                    s.few_len == OUTGROWN && s.count as usize <= FEW
                }) else {
                    return 0;
                };
                Relist {
                    subtable: si,
                    bucket: 0,
                    ids: [EMPTY; FEW],
                    n: 0,
                }
            }
        };
        let start = r.bucket;
        let end = (start + self.budget).min(self.bmask + 1);
        for b in start..end {
            let bucket = &self.buckets[b];
            for slot in 0..SLOTS {
                // A tag's high half is its subtable (an empty slot's is 0xffff, no subtable's).
                if bucket.tag[slot] >> 16 == r.subtable as u32 {
                    if r.n == FEW {
                        // More than the count said: never while the walk is current.
                        self.relist = None;
                        return b - start + 1;
                    }
                    r.ids[r.n] = bucket.id[slot];
                    r.n += 1;
                }
            }
        }
        r.bucket = end;
        if end > self.bmask {
            self.relist = None;
            let s = &mut self.subtables[r.subtable as usize];
            if s.few_len == OUTGROWN && r.n == s.count as usize {
                s.few = r.ids;
                s.few_len = r.n as u8;
                self.stats.subtables_relisted += 1;
            }
        } else {
            self.relist = Some(r);
        }
        end - start
    }

    /// Abandon the relisting walk of subtable `si`, if one runs (its list would be stale).
    #[inline]
    fn abandon_relist(&mut self, si: usize) {
        if self.relist.is_some_and(|r| r.subtable as usize == si) {
            self.relist = None;
        }
    }

    /// True while megaflows made for an older version may remain (revalidation sweep running).
    pub fn revalidation_pending(&self) -> bool {
        self.reval_cursor < self.meta.len()
    }

    /// Append every megaflow to `out` (control-plane dumps; allocates).
    pub(crate) fn dump(&self, now_ms: u64, out: &mut Vec<MegaflowDump>) {
        for (i, m) in self.meta.iter().enumerate() {
            if m.alive {
                out.push(MegaflowDump {
                    id: i as u32,
                    key: self.keys[i],
                    mask: self.subtables[m.subtable as usize].mask,
                    actions: self.cold[i].actions.clone(),
                    rules: self.cold[i].rules,
                    packets: m.packets,
                    bytes: m.bytes,
                    idle_ms: now_ms.saturating_sub(m.last_used),
                    age_ms: now_ms.saturating_sub(m.created),
                    current: m.version == self.version,
                });
            }
        }
    }

    /// `(buckets with an overflow, buckets)` of the hash table (a skewed hash shows here).
    pub fn bucket_overflow(&self) -> (usize, usize) {
        let n = self.buckets.iter().filter(|b| b.overflow > 0).count();
        (n, self.buckets.len())
    }

    /// The subtables' masks in lookup order with their hits since the last ranking.
    pub fn subtable_ranking(&self) -> impl Iterator<Item = (&FlowKey, u64)> + '_ {
        self.order.iter().map(|&si| {
            let s = &self.subtables[si as usize];
            (&s.mask, s.hits)
        })
    }
}

#[cfg(test)]
#[path = "megaflow_tests.rs"]
mod tests;

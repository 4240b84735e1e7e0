//! `SessionTable<V>`: one worker's table of sessions, (scope, 5-tuple) -> a small `Copy`
//! value, with an idle timeout per entry class. Allocated once with a fixed number of 3-entry
//! buckets; a full pair of buckets refuses an insert (the caller decides what that means), it
//! never evicts a live entry. One owner thread writes it; it never locks, never allocates after
//! `new`, and never blocks. What the value means (a server, a connection, flow counters) and
//! which class an entry is in (a protocol, a TCP state) are the caller's.
//!
//! # Layout and hashing
//! A bucket is one 64-byte line holding 3 tags, 3 expiry times, 3 class bytes and 3 values
//! (8-byte values fill the line; larger values make the bucket longer, but the match reads only
//! its first line), so a lookup reads one line: the full keys are not stored. A tag is the
//! key's group (its scope when below `GROUPS`, 13 bits) and a 51-bit fingerprint of the key; a
//! lookup matches the group exactly and the fingerprint. Bucket indexes and fingerprint come
//! from two different mixes of a keyed hash whose 256-bit key is random per table (from the
//! standard library's per-process random seed), so a sender cannot craft tuples that fall into
//! one bucket or share a fingerprint.
//!
//! Not storing the key makes a false match possible: two keys of one group whose hashes share
//! a bucket and all 51 fingerprint bits. A lookup compares at most 6 entries, so the chance is
//! about 6 x 2^-51 (3e-15) per lookup: one in ~12 years of a worker at 10 Mpps. A caller for
//! which a false match is not bounded (or that needs the key back, to export or list it)
//! stores the key, or what it needs of it, in its value. VPP's `lb` compares a 32-bit hash
//! only; Katran stores the whole key. The gain is one memory read per packet instead of two or
//! three (the key line), which is what the table's cost is made of once it outgrows the caches.
//!
//! Every key has two buckets (two choices): an insert takes a place in the primary bucket
//! first, then in the alternate; when both are full it moves one of their entries to that
//! entry's other bucket (the XOR distance between a key's buckets is a function of its
//! fingerprint, so no key is needed to find it). An insert is refused only when that fails
//! too, which below about half load is rare (a test counts it). A lookup reads the alternate
//! only when the primary has no match. `prefetch` hints the primary bucket (callers issue it
//! as soon as they have the hash, ahead of the lookup); `lookup_batch` matches the primaries of
//! a vector, then prefetches and matches the alternates of the keys still unresolved. The
//! tables are advised to transparent huge pages (fewer TLB misses).
//!
//! # Time, classes, expiry, counts
//! Time is whole seconds (`now`, any monotonic origin but never 0); an entry with expiry 0 is
//! empty, one with expiry <= now is expired: it no longer hits and its place is reused by the
//! next insert into the bucket. Each entry is in one of `CLASSES` classes with a timeout each
//! (the load balancer: TCP, UDP, other, closing; connection tracking: a protocol state). A hit
//! touches the entry (`Touch`): refresh it to now + its class's timeout, move it to another
//! class, or shorten it (a shortened entry is not refreshed again until it is moved: a closing
//! TCP flow). Live counts (`SessionCounts`, read racily by the control plane) count every
//! non-empty entry, in all, per group and per the bin its value names: an entry stops counting
//! when it is reused, replaced, removed, or reclaimed by `sweep`, which the owner calls with a
//! small budget every vector (or when idle), so an expired entry stops counting at most one
//! sweep round (`buckets / budget` calls) after it expired. `sweep_with` shows every entry it
//! visits to the caller first: the expiry callback of flow export, and its active timeout.

use crate::counts::{SessionCounts, NO_BIN};
use crate::key::SessionKey;
use packet::huge::HugeTable;
use std::sync::Arc;

/// Entries per bucket.
pub const WAYS: usize = 3;
/// Longest chain of moves an insert into two full buckets tries: 2 reads at most 30 buckets
/// (6 + 2 x 3 x 4); 1 refused ~0.03% of inserts at 2/3 load, 2 refuses none
/// (`a_table_sized_for_n_entries_...`). Only 1 once the table is 7/8 full (`cuckoo_depth`).
const CUCKOO_DEPTH: usize = 2;
/// Most buckets a table may have (2^24: 48M entries).
pub const MAX_BUCKETS: usize = 1 << 24;
/// Timeout classes of a table (`SessionTable::new`'s timeouts, `Touch`, `insert`).
pub const CLASSES: usize = 16;
/// Groups a tag holds: scopes below this are matched exactly and counted per scope; larger
/// ones share `GROUPS` in the tag (told apart by the fingerprint only) and are never counted
/// per scope.
pub const GROUPS: u32 = (1 << 13) - 1;
/// Most keys one `lookup_batch` call takes.
pub const BATCH: usize = packet::VECTOR_SIZE;

/// The power-of-two bucket count whose capacity holds at least `entries` (at least 1, at most
/// `MAX_BUCKETS`).
pub fn buckets_for(entries: usize) -> usize {
    entries
        .div_ceil(WAYS)
        .next_power_of_two()
        .clamp(1, MAX_BUCKETS)
}

/// Bytes a table of `buckets` buckets of `V` allocates (huge-page rounded when large): for
/// memory budgets.
pub fn table_bytes<V: SessionValue>(buckets: usize) -> u64 {
    packet::huge::allocation_bytes::<Bucket<V>>(buckets)
}

/// A value stored in a session table.
pub trait SessionValue: Copy + Default {
    /// The bin of `SessionCounts` this entry counts in (`NO_BIN`: none). A value changed in
    /// place (`lookup_mut`, `sweep_with`) must keep its bin, or the counts drift.
    #[inline(always)]
    fn bin(&self) -> u32 {
        NO_BIN
    }
}

impl SessionValue for u32 {}
impl SessionValue for u64 {}

/// What a lookup hit does to the entry. Classes are taken modulo `CLASSES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// Refresh the expiry to now + the timeout of the entry's class, unless the entry was
    /// shortened (then it keeps its expiry).
    Refresh,
    /// Move the entry to this class and shorten it: its expiry becomes now + that class's
    /// timeout if that is sooner, and refreshes no longer lengthen it (the LB: FIN or RST).
    Shorten(u8),
    /// Move the entry to this class, refreshed, and no longer shortened (the LB: a SYN).
    Set(u8),
}

/// What `insert` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// A new entry (in an empty or expired place).
    New,
    /// The key was there (live, expired or stale): its value was replaced.
    Replaced,
    /// Both buckets hold 3 live entries and no short path of moves frees a place: nothing
    /// stored (counted in `SessionCounts::refused`).
    Full,
}

/// Why a table could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionTableError {
    /// `buckets` is not a power of two between 1 and `MAX_BUCKETS`.
    #[error("session table buckets = {0} is not accepted: a power of two from 1 to 16777216")]
    Buckets(usize),
    /// The allocator refused the table's memory.
    #[error("cannot allocate the session table ({bytes} bytes): out of memory")]
    Alloc {
        /// The size asked for.
        bytes: u64,
    },
}

/// Where the group sits in a tag.
pub(crate) const GROUP_SHIFT: u32 = 51;
/// The fingerprint bits of a tag.
const FP_MASK: u64 = (1 << GROUP_SHIFT) - 1;
/// The bits of a class byte that name the class.
pub(crate) const CLASS_MASK: u8 = (CLASSES - 1) as u8;
/// The bit of a class byte that marks a shortened entry.
pub(crate) const SHORTENED: u8 = 0x80;
/// No way of a bucket matched.
const NO_WAY: u8 = u8::MAX;

#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
pub(crate) struct Bucket<V> {
    pub(crate) tag: [u64; WAYS],
    pub(crate) expiry: [u32; WAYS],
    /// The class (`CLASS_MASK`) and `SHORTENED` bit of each way.
    pub(crate) class: [u8; WAYS],
    pub(crate) val: [V; WAYS],
}

const _: () = assert!(core::mem::size_of::<Bucket<u64>>() == 64);
const _: () = assert!(core::mem::size_of::<Bucket<[u32; 2]>>() == 64);

/// A key's keyed hash: where its buckets are (`bucket`) and what its entry's tag holds (`tag`:
/// group and fingerprint). Made by `SessionTable::hash`, only meaningful to the table that made
/// it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionHash {
    pub(crate) bucket: u64,
    pub(crate) tag: u64,
}

/// One worker's session table of values `V`.
pub struct SessionTable<V: SessionValue> {
    /// On huge pages (32 MiB at 1M entries: a lookup costs no TLB miss).
    pub(crate) buckets: HugeTable<Bucket<V>>,
    pub(crate) mask: usize,
    key: [u64; 4],
    timeouts: [u32; CLASSES],
    pub(crate) sweep_at: usize,
    pub(crate) counts: Arc<SessionCounts>,
    /// The keys of a batch whose primary bucket had no match (their indexes).
    pending: Box<[u16; BATCH]>,
}

/// The keyed hash's mixing step (a folded 128-bit multiply).
#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    let r = u128::from(a).wrapping_mul(u128::from(b));
    (r as u64) ^ (r >> 64) as u64
}

/// A random 256-bit key from the standard library's per-process random seed.
fn random_key() -> [u64; 4] {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut k = [0u64; 4];
    for (i, w) in k.iter_mut().enumerate() {
        let mut h = s.build_hasher();
        h.write_usize(i);
        *w = h.finish() | 1;
    }
    k
}

/// The group field of a tag: scopes from `GROUPS` on become `GROUPS`, which is never counted.
#[inline(always)]
fn group_field(scope: u32) -> u64 {
    u64::from(scope.min(GROUPS))
}

impl<V: SessionValue> SessionTable<V> {
    /// A table of `buckets` x 3 entries (a power of two up to `MAX_BUCKETS`; `buckets_for`
    /// gives one for a number of entries) with `timeouts` per class (seconds), counting live
    /// entries for groups below `groups` (at most `GROUPS`) and bins below `bins`.
    pub fn new(
        buckets: usize,
        timeouts: [u32; CLASSES],
        groups: usize,
        bins: usize,
    ) -> Result<SessionTable<V>, SessionTableError> {
        Self::with_key(buckets, timeouts, groups, bins, random_key())
    }

    /// Like `new` with a given hash key (tests, benchmarks).
    pub fn with_key(
        buckets: usize,
        timeouts: [u32; CLASSES],
        groups: usize,
        bins: usize,
        key: [u64; 4],
    ) -> Result<SessionTable<V>, SessionTableError> {
        if !buckets.is_power_of_two() || buckets > MAX_BUCKETS {
            return Err(SessionTableError::Buckets(buckets));
        }
        let groups = groups.min(GROUPS as usize);
        let table = SessionTable {
            buckets: HugeTable::try_new(buckets, Bucket::default()).ok_or(
                SessionTableError::Alloc {
                    bytes: table_bytes::<V>(buckets),
                },
            )?,
            mask: buckets - 1,
            key,
            timeouts,
            sweep_at: 0,
            counts: Arc::new(SessionCounts::new(groups, bins)),
            pending: Box::new([0; BATCH]),
        };
        Ok(table)
    }

    /// Entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The live counts, for the control plane.
    pub fn counts(&self) -> Arc<SessionCounts> {
        Arc::clone(&self.counts)
    }

    /// Change the timeouts (entries keep their expiry until touched).
    pub fn set_timeouts(&mut self, timeouts: [u32; CLASSES]) {
        self.timeouts = timeouts;
    }

    /// The keyed hash of `k`: buckets from one mix of the key's words, the fingerprint from
    /// another.
    #[inline(always)]
    pub fn hash(&self, k: &SessionKey) -> SessionHash {
        let (w, s) = (&k.0, &self.key);
        let a = mix(w[0] ^ s[0], w[1] ^ s[1]);
        let b = mix(w[2] ^ s[2], w[3] ^ s[3]);
        let c = mix(w[4] ^ s[1].rotate_left(32), w[5] ^ s[2].rotate_left(32));
        let bucket = mix(a ^ s[3], b ^ c ^ 0x9e37_79b9_7f4a_7c15);
        let fp = mix(a ^ c ^ s[0].rotate_left(17), b ^ s[3].rotate_left(41));
        SessionHash {
            bucket,
            tag: group_field(k.scope()) << GROUP_SHIFT | fp & FP_MASK,
        }
    }

    /// Hint the CPU to load the primary bucket of `h` (the one a hit is usually in).
    #[inline(always)]
    pub fn prefetch(&self, h: SessionHash) {
        prefetch(&self.buckets[h.bucket as usize & self.mask]);
    }

    /// Hint the CPU to load every line of both buckets of `h` (ahead of an insert, which reads
    /// both).
    #[inline(always)]
    pub fn prefetch_for_insert(&self, h: SessionHash) {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            let base = (&self.buckets[b] as *const Bucket<V>).cast::<u8>();
            for off in (0..core::mem::size_of::<Bucket<V>>()).step_by(64) {
                packet::prefetch(base.wrapping_add(off));
            }
        }
    }

    /// The primary and alternate buckets of `h` (they may be the same bucket).
    #[inline(always)]
    fn buckets_of(&self, h: SessionHash) -> (usize, usize) {
        let b1 = h.bucket as usize & self.mask;
        (b1, self.other_bucket(b1, h.tag))
    }

    /// The other bucket of an entry with `tag` in bucket `b`: the XOR distance between a key's
    /// two buckets comes from its fingerprint alone, so an entry can be moved to its other
    /// bucket without its key (cuckoo hashing with partial keys).
    #[inline(always)]
    fn other_bucket(&self, b: usize, tag: u64) -> usize {
        let d = ((tag & FP_MASK).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize;
        b ^ (d & self.mask)
    }

    /// The live way of bucket `b` whose tag is `tag`, or `NO_WAY`.
    #[inline(always)]
    fn find(&self, b: usize, tag: u64, now: u32) -> u8 {
        let bk = &self.buckets[b];
        let mut m = 0u8;
        for i in 0..WAYS {
            let hit = (bk.tag[i] == tag) & (bk.expiry[i] > now);
            m |= (hit as u8) << i;
        }
        if m == 0 {
            NO_WAY
        } else {
            m.trailing_zeros() as u8
        }
    }

    /// Touch way `i` of bucket `b` (a hit) as `touch` says; its value.
    #[inline(always)]
    fn touch(&mut self, b: usize, i: usize, now: u32, touch: Touch) -> &mut V {
        let t = &self.timeouts;
        let bk = &mut self.buckets[b];
        let class = bk.class[i];
        match touch {
            Touch::Refresh if class & SHORTENED == 0 => {
                let e = now.saturating_add(t[usize::from(class & CLASS_MASK)]);
                if bk.expiry[i] != e {
                    bk.expiry[i] = e;
                }
            }
            Touch::Refresh => {}
            Touch::Shorten(c) => {
                let c = c & CLASS_MASK;
                let e = now.saturating_add(t[usize::from(c)]);
                bk.expiry[i] = bk.expiry[i].min(e);
                bk.class[i] = c | SHORTENED;
            }
            Touch::Set(c) => {
                let c = c & CLASS_MASK;
                bk.expiry[i] = now.saturating_add(t[usize::from(c)]);
                bk.class[i] = c;
            }
        }
        &mut bk.val[i]
    }

    /// The bucket and way of the live entry of `h` at `now`, if any.
    #[inline(always)]
    fn locate(&self, h: SessionHash, now: u32) -> Option<(usize, usize)> {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            let i = self.find(b, h.tag, now);
            if i != NO_WAY {
                return Some((b, usize::from(i)));
            }
        }
        None
    }

    /// Look the key of hash `h` (from `hash`) up at time `now`; a hit is touched as `touch`
    /// says and its value returned.
    #[inline]
    pub fn lookup(&mut self, h: SessionHash, now: u32, touch: Touch) -> Option<V> {
        let (b, i) = self.locate(h, now)?;
        Some(*self.touch(b, i, now, touch))
    }

    /// Like `lookup`, giving the value to change in place (flow counters). The value must keep
    /// its `bin`.
    #[inline]
    pub fn lookup_mut(&mut self, h: SessionHash, now: u32, touch: Touch) -> Option<&mut V> {
        let (b, i) = self.locate(h, now)?;
        Some(self.touch(b, i, now, touch))
    }

    /// Look up to `BATCH` keys up: `out[i]` for the key of hash `hashes[i]` with touch
    /// `touch[i]` (extra entries of the longer slices are ignored, as are keys past `BATCH`).
    /// The primary buckets of the whole batch are matched first (the caller has issued
    /// `prefetch` for each when it made the hash), then the alternates of the keys still
    /// unresolved are prefetched and matched.
    pub fn lookup_batch(
        &mut self,
        hashes: &[SessionHash],
        touch: &[Touch],
        now: u32,
        out: &mut [Option<V>],
    ) {
        let n = hashes.len().min(touch.len()).min(out.len()).min(BATCH);
        // The keys whose primary bucket had no match, listed for the second pass.
        let mut unresolved = 0;
        for i in 0..n {
            let h = hashes[i];
            let (b1, b2) = self.buckets_of(h);
            let w = self.find(b1, h.tag, now);
            if w != NO_WAY {
                out[i] = Some(*self.touch(b1, usize::from(w), now, touch[i]));
            } else {
                prefetch(&self.buckets[b2]);
                self.pending[unresolved] = i as u16;
                unresolved += 1;
            }
        }
        for u in 0..unresolved {
            let i = usize::from(self.pending[u]);
            let h = hashes[i];
            let (_, b2) = self.buckets_of(h);
            let w = self.find(b2, h.tag, now);
            out[i] = (w != NO_WAY).then(|| *self.touch(b2, usize::from(w), now, touch[i]));
        }
    }

    /// Store `v` for the key of hash `h` in `class` at `now`: replace the key's entry when it
    /// is in either of its two buckets (its class too, no longer shortened), else take an
    /// empty or expired place (the primary bucket first); `Full` when both buckets hold 3 live
    /// entries and no move frees a place.
    pub fn insert(&mut self, h: SessionHash, v: V, class: u8, now: u32) -> Insert {
        let (b1, b2) = self.buckets_of(h);
        let class = class & CLASS_MASK;
        let expiry = now.saturating_add(self.timeouts[usize::from(class)]).max(1);
        let group = Self::group_of(h.tag);
        let mut free = None;
        for b in [b1, b2] {
            for i in 0..WAYS {
                let bk = &self.buckets[b];
                if bk.expiry[i] != 0 && bk.tag[i] == h.tag {
                    let old = bk.val[i];
                    self.counts.count(group, old.bin(), false);
                    self.counts.count(group, v.bin(), true);
                    self.put(b, i, (h.tag, class, expiry), v);
                    return Insert::Replaced;
                }
                if free.is_none() && bk.expiry[i] <= now {
                    free = Some((b, i));
                }
            }
        }
        let (b, i) = match free {
            Some(place) => place,
            None => match self.make_room(b1, b2, now, self.cuckoo_depth()) {
                Some(place) => place,
                None => {
                    self.counts.refuse();
                    return Insert::Full;
                }
            },
        };
        if self.buckets[b].expiry[i] != 0 {
            self.uncount(b, i);
        }
        self.counts.count(group, v.bin(), true);
        self.put(b, i, (h.tag, class, expiry), v);
        Insert::New
    }

    /// Both buckets of a new key are full of live entries: move one of them to its other
    /// bucket, making room there first by moving one of that bucket's entries on to its own
    /// other bucket when needed (a cuckoo path of at most `CUCKOO_DEPTH` moves), and give back
    /// the place the first move left. None: no such path.
    fn make_room(
        &mut self,
        b1: usize,
        b2: usize,
        now: u32,
        max_depth: usize,
    ) -> Option<(usize, usize)> {
        for depth in 1..=max_depth.min(CUCKOO_DEPTH) {
            for b in [b1, b2] {
                let mut path = [usize::MAX; CUCKOO_DEPTH + 2];
                (path[0], path[1]) = (b1, b2);
                if let Some(i) = self.vacate(b, depth, now, path, 2) {
                    return Some((b, i));
                }
            }
        }
        None
    }

    /// How deep `make_room` searches: `CUCKOO_DEPTH` while at most 7/8 of the places hold
    /// entries, 1 move beyond (a table full of live entries, e.g. under a SYN flood, refuses
    /// nearly every insert: a deep search there would only make each refusal dearer).
    #[inline]
    fn cuckoo_depth(&self) -> usize {
        if (self.counts.total() as usize) * 8 <= self.capacity() * 7 {
            CUCKOO_DEPTH
        } else {
            1
        }
    }

    /// Empty a place of bucket `b` by moving its entry to that entry's other bucket, with a
    /// path of at most `depth` moves; returns the emptied way. A place is free when its entry
    /// expired (it is uncounted when overwritten). The path never enters a bucket in
    /// `path[..len]` (the new key's two buckets and the ones being emptied), so no entry is
    /// moved twice or copied.
    fn vacate(
        &mut self,
        b: usize,
        depth: usize,
        now: u32,
        mut path: [usize; CUCKOO_DEPTH + 2],
        len: usize,
    ) -> Option<usize> {
        if let Some(p) = path.get_mut(len) {
            *p = b;
        }
        for i in 0..WAYS {
            let (tag, expiry, class, val) = {
                let bk = &self.buckets[b];
                (bk.tag[i], bk.expiry[i], bk.class[i], bk.val[i])
            };
            let o = self.other_bucket(b, tag);
            if path.contains(&o) {
                continue;
            }
            let free = (0..WAYS).find(|&j| self.buckets[o].expiry[j] <= now);
            let j = match free {
                Some(j) => j,
                None if depth > 1 => match self.vacate(o, depth - 1, now, path, len + 1) {
                    Some(j) => j,
                    None => continue,
                },
                None => continue,
            };
            if self.buckets[o].expiry[j] != 0 {
                self.uncount(o, j);
            }
            self.put(o, j, (tag, class, expiry), val);
            // The entry moved, so its old place is empty without being uncounted.
            self.buckets[b].expiry[i] = 0;
            return Some(i);
        }
        None
    }

    /// The group a tag was made for (`GROUPS` for scopes that have none).
    #[inline(always)]
    pub(crate) fn group_of(tag: u64) -> u32 {
        (tag >> GROUP_SHIFT) as u32
    }

    /// Write way `i` of bucket `b`: its (tag, class byte, expiry) and value.
    #[inline(always)]
    fn put(&mut self, b: usize, i: usize, (tag, class, expiry): (u64, u8, u32), v: V) {
        let bk = &mut self.buckets[b];
        bk.tag[i] = tag;
        bk.expiry[i] = expiry;
        bk.class[i] = class;
        bk.val[i] = v;
    }

    /// Remove the entry of the key whose hash is `h` (live or expired); true when there was one.
    pub fn remove(&mut self, h: SessionHash) -> bool {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            for i in 0..WAYS {
                let bk = &self.buckets[b];
                if bk.expiry[i] != 0 && bk.tag[i] == h.tag {
                    self.reclaim(b, i);
                    return true;
                }
            }
        }
        false
    }

    /// Stop counting way `i` of bucket `b` (about to be reused or emptied).
    #[inline(always)]
    pub(crate) fn uncount(&self, b: usize, i: usize) {
        let bk = &self.buckets[b];
        self.counts
            .count(Self::group_of(bk.tag[i]), bk.val[i].bin(), false);
    }

    /// Stop counting way `i` of bucket `b` and empty it.
    #[inline(always)]
    pub(crate) fn reclaim(&mut self, b: usize, i: usize) {
        self.uncount(b, i);
        self.buckets[b].expiry[i] = 0;
    }
}

#[inline(always)]
fn prefetch<T>(p: &T) {
    packet::prefetch((p as *const T).cast::<u8>());
}

#[cfg(test)]
#[path = "table_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "table_bench.rs"]
mod bench;

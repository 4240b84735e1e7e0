//! The per-worker flow table: (VIP id, 5-tuple) -> the server a flow was given (AS slot and
//! generation) with an idle timeout per protocol, and the same structure for the NAT reverse
//! entries (server:target_port -> client gives back the VIP and its port). Allocated once, with
//! a fixed number of 3-entry buckets; a full bucket refuses the insert (the node falls back to
//! plain Maglev hashing), it never evicts a live flow and never drops a packet. One owner
//! thread writes it; it never locks, never allocates after `new`, and never blocks.
//!
//! # Layout and hashing
//! A bucket is one 64-byte line holding 3 tags, 3 expiry times and 3 values (`AsRef` is 8
//! bytes; larger values make the bucket longer), so a lookup reads one line: the full keys are
//! not stored. A tag is the VIP id (13 bits), the timeout class (2 bits) and a 49-bit
//! fingerprint of the key; a lookup matches the VIP id exactly and the fingerprint. Bucket
//! indexes and fingerprint come from two different mixes of a keyed hash whose 256-bit key is
//! random per table (from the standard library's per-process random seed), so a client cannot
//! craft tuples that fall into one bucket or share a fingerprint.
//!
//! Not storing the key makes a false match possible: two flows of the same VIP whose keys share
//! a bucket and all 49 fingerprint bits. A lookup compares at most 6 entries, so the chance is
//! about 6 x 2^-49 (1e-14) per lookup: one in ~3 years of a worker at 10 Mpps. Its effect is
//! bounded: that packet goes to the server of the other flow, a live server of the same VIP
//! (a NAT reply gets the other flow's VIP address and port, and its client drops it). VPP's
//! `lb` compares a 32-bit hash only; Katran stores the whole key. The gain is one
//! memory read per packet instead of two or three (the key line), which is what the table's
//! cost is made of once it outgrows the caches.
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
//! # Time, expiry, counts
//! Time is whole seconds (`now`, any monotonic origin but never 0); an entry with expiry 0 is
//! empty, one with expiry <= now is expired: it no longer hits and its place is reused by the
//! next insert into the bucket. A hit refreshes the expiry to now + the timeout of the entry's
//! class (TCP, UDP, other); FIN/RST (`Touch::Close`) moves the entry to the short `closing`
//! class, from which only a SYN (`Touch::Open`) brings it back. Live-flow counts per VIP id and
//! per AS slot (`FlowCounts`, shared with the control plane, which sums the workers' counts and
//! reads them racily) count every non-empty entry: an entry stops counting when it is reused,
//! replaced, removed, or reclaimed by `sweep`, which the node calls with a small budget every
//! vector (or when idle), so an expired or flushed flow stops counting at most one sweep round
//! (`buckets / budget` calls) after it expired.

use crate::parse::{Kind, Plain4};
use crate::tuple::FiveTuple;
use packet::huge::HugeTable;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Entries per bucket.
pub const WAYS: usize = 3;
/// Longest chain of moves an insert into two full buckets tries: 2 reads at most 30 buckets
/// (6 + 2 x 3 x 4); 1 refused ~0.03% of inserts at 2/3 load, 2 refuses none
/// (`a_table_sized_for_n_flows_...`). Only 1 once the table is 7/8 full (`cuckoo_depth`).
const CUCKOO_DEPTH: usize = 2;
/// Most buckets a table may have (2^24: 48M entries).
pub const MAX_BUCKETS: usize = 1 << 24;
/// The VIP id a tag holds for NAT reverse keys and for ids it cannot hold (never counted).
const VIP_NONE: u32 = (1 << 13) - 1;

/// The power-of-two bucket count whose capacity holds at least `entries` (at least 1, at most
/// `MAX_BUCKETS`).
pub fn buckets_for(entries: usize) -> usize {
    entries
        .div_ceil(WAYS)
        .next_power_of_two()
        .clamp(1, MAX_BUCKETS)
}

/// The NAT reverse table's buckets for a forward table of `buckets`: a quarter (one reverse
/// entry per NAT flow), at least one.
pub fn nat_buckets_for(buckets: usize) -> usize {
    (buckets / 4).max(1)
}

/// Bytes one worker's flow tables take for `entries` (`lb conf buckets`): the forward table of
/// `buckets_for(entries)` buckets and its NAT reverse table (`nat_buckets_for`), each rounded
/// as `packet::huge::HugeTable` allocates it. What the LB memory budget counts per worker.
pub fn worker_tables_bytes(entries: usize) -> u64 {
    let buckets = buckets_for(entries);
    table_bytes::<AsRef>(buckets) + table_bytes::<NatReverse>(nat_buckets_for(buckets))
}

/// Bytes a table of `buckets` buckets of `V` allocates (huge-page rounded when large).
fn table_bytes<V: Copy>(buckets: usize) -> u64 {
    packet::huge::allocation_bytes::<Bucket<V>>(buckets)
}

/// Most keys one `lookup_batch` call takes.
pub const BATCH: usize = packet::VECTOR_SIZE;

/// Idle timeouts in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP flows.
    pub tcp: u32,
    /// UDP flows.
    pub udp: u32,
    /// Flows of any other protocol.
    pub other: u32,
    /// A TCP flow after FIN or RST.
    pub closing: u32,
}

impl Default for Timeouts {
    /// VPP's `lb conf timeout` default (40 s) for every protocol, 4 s after FIN/RST.
    fn default() -> Self {
        Timeouts {
            tcp: 40,
            udp: 40,
            other: 40,
            closing: 4,
        }
    }
}

/// What a lookup hit does to the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// Refresh the expiry (an ordinary packet).
    Refresh,
    /// Shorten to the closing timeout (TCP FIN or RST); never lengthens.
    Close,
    /// A TCP SYN: back to the TCP class, refreshed.
    Open,
}

impl Touch {
    /// What a lookup of a packet of `kind` does to its entry.
    #[inline(always)]
    pub fn for_kind(kind: Kind) -> Touch {
        match kind {
            Kind::Syn => Touch::Open,
            Kind::FinRst => Touch::Close,
            _ => Touch::Refresh,
        }
    }
}

/// The server a flow was given: its AS slot and the slot's generation at that time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsRef {
    /// The AS slot.
    pub slot: u32,
    /// The slot's generation (a flush bumps it; entries with an old one are stale).
    pub gen: u32,
}

/// A NAT reverse entry's value: what a reply from server:target_port to the client becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatReverse {
    /// The VIP id (for counters).
    pub vip: u32,
    /// The address the client sent to (IPv4-mapped for NAT4).
    pub addr: [u8; 16],
    /// The port the client sent to.
    pub port: u16,
}

/// A value stored in a flow table.
pub trait FlowValue: Copy + Default {
    /// The AS slot this entry counts for (`u32::MAX`: none).
    fn as_slot(&self) -> u32;
}

impl FlowValue for AsRef {
    #[inline(always)]
    fn as_slot(&self) -> u32 {
        self.slot
    }
}

impl FlowValue for NatReverse {
    #[inline(always)]
    fn as_slot(&self) -> u32 {
        u32::MAX
    }
}

/// A flow table key: the VIP id and the 5-tuple packed in 6 words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct FlowKey([u64; 6]);

impl FlowKey {
    /// The VIP id used for NAT reverse keys.
    pub const REVERSE: u32 = u32::MAX;

    /// The key of `tuple` toward VIP `vip`.
    #[inline(always)]
    pub fn new(vip: u32, t: &FiveTuple) -> FlowKey {
        let w = |b: &[u8; 16], i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        FlowKey([
            u64::from(vip) | u64::from(t.protocol) << 32 | u64::from(t.ip6) << 40,
            w(&t.src, 0),
            w(&t.src, 8),
            w(&t.dst, 0),
            w(&t.dst, 8),
            // Not `src | dst << 16`: that becomes one 32-bit load of both ports, which stalls
            // when the parser has just written them as two 16-bit stores.
            u64::from(t.src_port) | u64::from(t.dst_port) << 32,
        ])
    }

    /// The key of plain IPv4 packet `p` toward VIP `vip`: `FlowKey::new(vip, &p.tuple())`,
    /// made from the 4-byte addresses without the IPv4-mapped 16-byte ones.
    #[inline(always)]
    pub fn plain4(vip: u32, p: &Plain4) -> FlowKey {
        // `::ffff:a.b.c.d` read as two little-endian words: 0, then 0xffff << 16 | a.b.c.d << 32.
        let low = |a: [u8; 4]| 0xffff_0000 | u64::from(u32::from_le_bytes(a)) << 32;
        FlowKey([
            u64::from(vip) | u64::from(p.protocol) << 32,
            0,
            low(p.src),
            0,
            low(p.dst),
            u64::from(p.src_port) | u64::from(p.dst_port) << 32,
        ])
    }

    /// The NAT reverse key of a reply `tuple` (server:target_port -> client).
    #[inline(always)]
    pub fn reverse(t: &FiveTuple) -> FlowKey {
        FlowKey::new(FlowKey::REVERSE, t)
    }

    /// The VIP id.
    #[inline(always)]
    pub fn vip(&self) -> u32 {
        self.0[0] as u32
    }

    #[inline(always)]
    fn protocol(&self) -> u8 {
        (self.0[0] >> 32) as u8
    }
}

/// Live-flow counts of one worker's table, read by the control plane without locks (relaxed
/// loads; a count may be one vector old). Only the owning worker writes.
#[derive(Debug)]
pub struct FlowCounts {
    vips: Box<[AtomicU32]>,
    slots: Box<[AtomicU32]>,
    total: AtomicU32,
    refused: AtomicU64,
}

impl FlowCounts {
    fn new(vips: usize, slots: usize) -> FlowCounts {
        FlowCounts {
            vips: (0..vips).map(|_| AtomicU32::new(0)).collect(),
            slots: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            total: AtomicU32::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Live flows of VIP `id` (0 for an id out of range).
    pub fn vip(&self, id: u32) -> u32 {
        self.vips
            .get(id as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Live flows on AS slot `slot` (0 for a slot out of range).
    pub fn slot(&self, slot: u32) -> u32 {
        self.slots
            .get(slot as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// All live flows in the table.
    pub fn total(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }

    /// Inserts refused because the bucket was full (since the table was made).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn bump(c: Option<&AtomicU32>, up: bool) {
        if let Some(c) = c {
            // Single writer: a plain load and store, no read-modify-write.
            let v = c.load(Ordering::Relaxed);
            c.store(
                if up {
                    v.wrapping_add(1)
                } else {
                    v.saturating_sub(1)
                },
                Ordering::Relaxed,
            );
        }
    }

    #[inline(always)]
    fn count(&self, vip: u32, slot: u32, up: bool) {
        Self::bump(self.vips.get(vip as usize), up);
        Self::bump(self.slots.get(slot as usize), up);
        Self::bump(Some(&self.total), up);
    }
}

/// What `insert` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// A new entry (in an empty or expired place).
    New,
    /// The key was there (live, expired or stale): its value was replaced.
    Replaced,
    /// Both buckets hold 3 live entries and no short path of moves frees a place: nothing
    /// stored (counted in `FlowCounts::refused`).
    Full,
}

/// Why a table could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowTableError {
    /// `buckets` is not a power of two between 1 and `MAX_BUCKETS`.
    #[error("flow table buckets = {0} is not accepted: a power of two from 1 to 16777216")]
    Buckets(usize),
    /// The allocator refused the table's memory.
    #[error(
        "cannot allocate the flow table ({bytes} bytes): out of memory; lower \
         `lb conf buckets` or free memory"
    )]
    Alloc {
        /// The size asked for.
        bytes: u64,
    },
}

/// Where the timeout class sits in a tag.
const CLASS_SHIFT: u32 = 49;
/// Where the VIP id sits in a tag.
const VIP_SHIFT: u32 = 51;
/// The fingerprint bits of a tag.
const FP_MASK: u64 = (1 << CLASS_SHIFT) - 1;
/// The bits of a tag a lookup compares (all but the class).
const MATCH_MASK: u64 = !(3 << CLASS_SHIFT);
const CLASS_TCP: u64 = 0;
const CLASS_UDP: u64 = 1;
const CLASS_OTHER: u64 = 2;
const CLASS_CLOSING: u64 = 3;
/// No way of a bucket matched.
const NO_WAY: u8 = u8::MAX;

#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
struct Bucket<V> {
    tag: [u64; WAYS],
    expiry: [u32; WAYS],
    val: [V; WAYS],
}

const _: () = assert!(core::mem::size_of::<Bucket<AsRef>>() == 64);

/// A key's keyed hash: where its buckets are (`bucket`) and what its entry's tag holds (`tag`:
/// VIP id and fingerprint, class bits clear). Made by `FlowTable::hash`, only meaningful to the
/// table that made it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowHash {
    bucket: u64,
    tag: u64,
}

/// One worker's flow table of values `V` (`AsRef` forward, `NatReverse` for NAT replies).
pub struct FlowTable<V: FlowValue> {
    /// On huge pages (32 MiB at 1M entries: a lookup costs no TLB miss).
    buckets: HugeTable<Bucket<V>>,
    mask: usize,
    key: [u64; 4],
    timeouts: [u32; 4],
    sweep_at: usize,
    counts: Arc<FlowCounts>,
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

/// The timeout class of a protocol.
#[inline(always)]
fn class_of(protocol: u8) -> u64 {
    match protocol {
        6 => CLASS_TCP,
        17 => CLASS_UDP,
        _ => CLASS_OTHER,
    }
}

/// The VIP id field of a tag: ids the 13 bits cannot hold (and `FlowKey::REVERSE`) become
/// `VIP_NONE`, which is never counted.
#[inline(always)]
fn vip_field(vip: u32) -> u64 {
    u64::from(vip.min(VIP_NONE))
}

impl<V: FlowValue> FlowTable<V> {
    /// A table of `buckets` x 3 entries (a power of two up to `MAX_BUCKETS`; `buckets_for`
    /// gives one for a number of entries) with `timeouts`, counting live flows for VIP ids
    /// below `vips` (at most 8191) and AS slots below `slots`.
    pub fn new(
        buckets: usize,
        timeouts: Timeouts,
        vips: usize,
        slots: usize,
    ) -> Result<FlowTable<V>, FlowTableError> {
        Self::with_key(buckets, timeouts, vips, slots, random_key())
    }

    /// Like `new` with a given hash key (tests, benchmarks).
    pub fn with_key(
        buckets: usize,
        timeouts: Timeouts,
        vips: usize,
        slots: usize,
        key: [u64; 4],
    ) -> Result<FlowTable<V>, FlowTableError> {
        if !buckets.is_power_of_two() || buckets > MAX_BUCKETS {
            return Err(FlowTableError::Buckets(buckets));
        }
        let vips = vips.min(VIP_NONE as usize);
        let table = FlowTable {
            buckets: HugeTable::try_new(buckets, Bucket::default()).ok_or(
                FlowTableError::Alloc {
                    bytes: table_bytes::<V>(buckets),
                },
            )?,
            mask: buckets - 1,
            key,
            timeouts: [timeouts.tcp, timeouts.udp, timeouts.other, timeouts.closing],
            sweep_at: 0,
            counts: Arc::new(FlowCounts::new(vips, slots)),
            pending: Box::new([0; BATCH]),
        };
        Ok(table)
    }

    /// Entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The live counts, for the control plane.
    pub fn counts(&self) -> Arc<FlowCounts> {
        Arc::clone(&self.counts)
    }

    /// Change the timeouts (entries keep their expiry until refreshed).
    pub fn set_timeouts(&mut self, t: Timeouts) {
        self.timeouts = [t.tcp, t.udp, t.other, t.closing];
    }

    /// The keyed hash of `k`: buckets from one mix of the key's words, the fingerprint from
    /// another.
    #[inline(always)]
    pub fn hash(&self, k: &FlowKey) -> FlowHash {
        let (w, s) = (&k.0, &self.key);
        let a = mix(w[0] ^ s[0], w[1] ^ s[1]);
        let b = mix(w[2] ^ s[2], w[3] ^ s[3]);
        let c = mix(w[4] ^ s[1].rotate_left(32), w[5] ^ s[2].rotate_left(32));
        let bucket = mix(a ^ s[3], b ^ c ^ 0x9e37_79b9_7f4a_7c15);
        let fp = mix(a ^ c ^ s[0].rotate_left(17), b ^ s[3].rotate_left(41));
        FlowHash {
            bucket,
            tag: vip_field(k.vip()) << VIP_SHIFT | fp & FP_MASK,
        }
    }

    /// Hint the CPU to load the primary bucket of `h` (the one a hit is usually in).
    #[inline(always)]
    pub fn prefetch(&self, h: FlowHash) {
        prefetch(&self.buckets[h.bucket as usize & self.mask]);
    }

    /// Hint the CPU to load every line of both buckets of `h` (ahead of an insert, which reads
    /// both).
    #[inline(always)]
    pub fn prefetch_for_insert(&self, h: FlowHash) {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            let base = (&self.buckets[b] as *const Bucket<V>).cast::<u8>();
            for off in (0..core::mem::size_of::<Bucket<V>>()).step_by(64) {
                prefetch_ptr(base.wrapping_add(off));
            }
        }
    }

    /// The primary and alternate buckets of `h` (they may be the same bucket).
    #[inline(always)]
    fn buckets_of(&self, h: FlowHash) -> (usize, usize) {
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
            let hit = (bk.tag[i] & MATCH_MASK == tag) & (bk.expiry[i] > now);
            m |= (hit as u8) << i;
        }
        if m == 0 {
            NO_WAY
        } else {
            m.trailing_zeros() as u8
        }
    }

    /// Touch way `i` of bucket `b` (a hit on a key of `protocol`) and return its value.
    #[inline(always)]
    fn touch(&mut self, b: usize, i: usize, protocol: u8, now: u32, touch: Touch) -> V {
        let t = self.timeouts;
        let bk = &mut self.buckets[b];
        let class = bk.tag[i] >> CLASS_SHIFT & 3;
        match touch {
            Touch::Refresh if class != CLASS_CLOSING => {
                let e = now.saturating_add(t[class as usize]);
                if bk.expiry[i] != e {
                    bk.expiry[i] = e;
                }
            }
            Touch::Refresh => {}
            Touch::Close => {
                let e = now.saturating_add(t[CLASS_CLOSING as usize]);
                bk.expiry[i] = bk.expiry[i].min(e);
                bk.tag[i] = bk.tag[i] & MATCH_MASK | CLASS_CLOSING << CLASS_SHIFT;
            }
            Touch::Open => {
                let c = class_of(protocol);
                bk.expiry[i] = now.saturating_add(t[c as usize]);
                bk.tag[i] = bk.tag[i] & MATCH_MASK | c << CLASS_SHIFT;
            }
        }
        bk.val[i]
    }

    /// Look `k` (hash `h` from `hash`) up at time `now`; a hit is touched as `touch` says.
    #[inline]
    pub fn lookup(&mut self, k: &FlowKey, h: FlowHash, now: u32, touch: Touch) -> Option<V> {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            let i = self.find(b, h.tag, now);
            if i != NO_WAY {
                return Some(self.touch(b, usize::from(i), k.protocol(), now, touch));
            }
        }
        None
    }

    /// Look up to `BATCH` keys up: `out[i]` for `keys[i]` with hash `hashes[i]` and touch
    /// `touch[i]` (all slices at least `keys.len()` long; extra keys are ignored). The primary
    /// buckets of the whole batch are matched first (the caller has issued `prefetch` for each
    /// when it made the hash), then the alternates of the keys still unresolved are prefetched
    /// and matched.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        hashes: &[FlowHash],
        touch: &[Touch],
        now: u32,
        out: &mut [Option<V>],
    ) {
        let n = keys
            .len()
            .min(hashes.len())
            .min(touch.len())
            .min(out.len())
            .min(BATCH);
        // The keys whose primary bucket had no match, listed for the second pass.
        let mut unresolved = 0;
        for i in 0..n {
            let h = hashes[i];
            let (b1, b2) = self.buckets_of(h);
            let w = self.find(b1, h.tag, now);
            if w != NO_WAY {
                out[i] = Some(self.touch(b1, usize::from(w), keys[i].protocol(), now, touch[i]));
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
            out[i] = (w != NO_WAY)
                .then(|| self.touch(b2, usize::from(w), keys[i].protocol(), now, touch[i]));
        }
    }

    /// Store `v` for `k` (hash `h`) at `now`: replace the key's entry when it is in either of
    /// its two buckets, else take an empty or expired place (the primary bucket first); `Full`
    /// when both buckets hold 3 live flows.
    pub fn insert(&mut self, k: &FlowKey, h: FlowHash, v: V, now: u32) -> Insert {
        let (b1, b2) = self.buckets_of(h);
        let class = class_of(k.protocol());
        let tag = h.tag | class << CLASS_SHIFT;
        let expiry = now.saturating_add(self.timeouts[class as usize]).max(1);
        let vip = Self::vip_of(h.tag);
        let mut free = None;
        for b in [b1, b2] {
            for i in 0..WAYS {
                let bk = &self.buckets[b];
                if bk.expiry[i] != 0 && bk.tag[i] & MATCH_MASK == h.tag {
                    let old = bk.val[i];
                    self.counts.count(vip, old.as_slot(), false);
                    self.counts.count(vip, v.as_slot(), true);
                    self.put(b, i, tag, expiry, v);
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
                    let r = &self.counts.refused;
                    r.store(r.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    return Insert::Full;
                }
            },
        };
        if self.buckets[b].expiry[i] != 0 {
            self.uncount(b, i);
        }
        self.counts.count(vip, v.as_slot(), true);
        self.put(b, i, tag, expiry, v);
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
    /// entries, 1 move beyond (a table full of live flows, e.g. under a SYN flood, refuses
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
            let (tag, expiry, val) = {
                let bk = &self.buckets[b];
                (bk.tag[i], bk.expiry[i], bk.val[i])
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
            self.put(o, j, tag, expiry, val);
            // The entry moved, so its old place is empty without being uncounted.
            self.buckets[b].expiry[i] = 0;
            return Some(i);
        }
        None
    }

    /// The VIP id a tag was made for (`VIP_NONE` for reverse keys).
    #[inline(always)]
    fn vip_of(tag: u64) -> u32 {
        (tag >> VIP_SHIFT) as u32
    }

    #[inline(always)]
    fn put(&mut self, b: usize, i: usize, tag: u64, expiry: u32, v: V) {
        let bk = &mut self.buckets[b];
        bk.tag[i] = tag;
        bk.expiry[i] = expiry;
        bk.val[i] = v;
    }

    /// Remove the entry of the key whose hash is `h` (live or expired); true when there was one.
    pub fn remove(&mut self, h: FlowHash) -> bool {
        let (b1, b2) = self.buckets_of(h);
        for b in [b1, b2] {
            for i in 0..WAYS {
                let bk = &self.buckets[b];
                if bk.expiry[i] != 0 && bk.tag[i] & MATCH_MASK == h.tag {
                    self.reclaim(b, i);
                    return true;
                }
            }
        }
        false
    }

    /// Stop counting way `i` of bucket `b` (about to be reused or emptied).
    #[inline(always)]
    fn uncount(&self, b: usize, i: usize) {
        let bk = &self.buckets[b];
        self.counts
            .count(Self::vip_of(bk.tag[i]), bk.val[i].as_slot(), false);
    }

    #[inline(always)]
    fn reclaim(&mut self, b: usize, i: usize) {
        self.uncount(b, i);
        self.buckets[b].expiry[i] = 0;
    }

    /// Visit the next `budget` buckets (wrapping), reclaiming entries that expired by `now` or
    /// whose value `keep` refuses (e.g. a flushed slot generation). Returns how many.
    pub fn sweep(&mut self, now: u32, budget: usize, mut keep: impl FnMut(&V) -> bool) -> usize {
        let mut n = 0;
        for _ in 0..budget.min(self.buckets.len()) {
            let b = self.sweep_at;
            self.sweep_at = (b + 1) & self.mask;
            for i in 0..WAYS {
                let e = self.buckets[b].expiry[i];
                if e != 0 && (e <= now || !keep(&self.buckets[b].val[i])) {
                    self.reclaim(b, i);
                    n += 1;
                }
            }
        }
        n
    }
}

#[inline(always)]
fn prefetch<T>(p: &T) {
    prefetch_ptr((p as *const T).cast::<u8>());
}

/// Hint the CPU to load the line at `p` (any address: a prefetch never faults).
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is only a hint: it never faults, whatever the address.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(p.cast::<i8>(), _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
#[path = "flowtable_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "flowtable_bench.rs"]
mod bench;

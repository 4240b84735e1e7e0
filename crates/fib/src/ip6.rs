//! IPv6 longest-prefix match: a direct-indexed first level plus in-place range search (DXR-style,
//! Zec/Rizzo/Mikuc), with 8-bit stride tables and path-compression (skip) nodes only where a
//! region is dense. Owns `Ip6Fib`, the lookup side; the lookup never allocates, locks, writes or
//! panics. `Ip6FibWriter` (ip6_writer.rs) changes it in place; ip6_build.rs encodes a region.
//!
//! Each first-level region (the top 20 bits) is encoded from the sorted list of elementary
//! intervals of its routes (each maximal run of addresses with the same longest match, adjacent
//! equal runs merged). Every region of the address space then gets one `u32` entry:
//! * **leaf** (bits 31..29 = 000): the whole region has one next hop (low 20 bits, 0 = no route);
//! * **range list** (bit 31 = 1): bits 24..31 = count-1, bits 0..24 = index into `ranges`: the
//!   region's 2..=16 intervals, searched in place (early-exit linear scan for <= 8, bisection
//!   above). Each `u128` range entry is `start << 20 | next_hop`: all starts in one region share
//!   their top 20 address bits, so the shift loses nothing that matters, and `entry <= (addr <<
//!   20) | 0xfffff` holds exactly when the interval starts at or before `addr`. Lists of <= 4
//!   entries (64 bytes) never straddle a cache line; lists of 5..=8 start on a line;
//! * **stride table** (bits 31..29 = 010): a region with more than 16 intervals is split by the
//!   next 8 address bits into a 256-entry table of entries (recursively);
//! * **skip node** (bits 31..29 = 011): when all interval boundaries of such a region lie in one
//!   sub-region at least 16 bits longer (say 100k host routes in one /64), a 32-byte node holds
//!   that sub-region's prefix and entry, and the next hops just below and above it, instead of a
//!   chain of stride tables with a single non-trivial child each.
//!
//! The first level is 2^20 atomic entries indexed by the top 20 bits (4 MiB, advised onto huge
//! pages; 2000::/3 uses 512 KiB of it); stride tables, range entries and skip nodes live in
//! arenas reserved at their maximum size and touched only as they are used. With BGP-like
//! tables almost every lookup is one first-level read plus one or two cache lines of ranges: two
//! dependent memory accesses, three in regions dense enough for a stride table or skip node. `lookup_batch` overlaps them across the batch with a
//! software pipeline (prefetch first level; read it and prefetch the next node; descend one node
//! and prefetch; resolve). A trie walk (poptrie, tree bitmap) needs 4..7 dependent accesses for
//! the /32../48 routes that dominate IPv6 tables. Adversarial tables (every length of many nested
//! prefixes) can still chain up to 14 stride tables; memory stays bounded (a table only for a
//! region of more than 16 intervals, a skip node only for a region holding a table).
//!
//! # Thread-safety contract
//! One table is shared by every worker (an `Arc<Ip6Fib>`) and one writer. First-level entries
//! are the only values changed while a reader can reach them: one `AtomicU32` each, stored with
//! `Release` and loaded with `Acquire`, so a lookup follows either the region's old encoding or
//! its new one, never a mix. Everything below the first level is written only while unreachable
//! (`mem::Slot`): a region is re-encoded into free arena space before the store that links it,
//! and the blocks of the old encoding are retired through the epoch domain (`live`) and reused
//! only once every worker has passed a quiescent point. A next-hop id is published (in the
//! next-hop table) before any entry leading to it.

use crate::mem::{prefetch, HugeArray, HugeBuf, Slot};
use crate::{FibError, NextHopId, BATCH, NO_ROUTE};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

pub(crate) const DIRECT_BITS: u32 = 20;
pub(crate) const DIRECT_LEN: usize = 1 << DIRECT_BITS;
pub(crate) const STRIDE: u32 = 8;
pub(crate) const TABLE_LEN: usize = 1 << STRIDE;
/// Range entries hold the interval start shifted left by this much (so that the region's shared
/// top bits drop out), with the next hop in the freed low bits.
pub(crate) const KEY_SHIFT: u32 = DIRECT_BITS;
pub(crate) const NH_MASK: u128 = (1 << KEY_SHIFT) - 1;

pub(crate) const RANGE_FLAG: u32 = 1 << 31;
/// Set (with bit 31 clear) for a stride table or a skip node.
pub(crate) const TABLE_FLAG: u32 = 1 << 30;
/// Set together with TABLE_FLAG for a skip node.
pub(crate) const SKIP_FLAG: u32 = 1 << 29;
/// Index bits of a stride-table or skip-node entry.
pub(crate) const NODE_INDEX_MASK: u32 = SKIP_FLAG - 1;
pub(crate) const RANGE_INDEX_MASK: u32 = (1 << 24) - 1;
pub(crate) const COUNT_SHIFT: u32 = 24;
/// Regions with more intervals than this are split into a stride table.
pub(crate) const SPLIT_THRESHOLD: usize = 16;
/// Range entries per 64-byte cache line.
pub(crate) const PER_LINE: usize = 4;
/// Range lists up to this long are scanned linearly, longer ones bisected.
pub(crate) const LINEAR_MAX: usize = 2 * PER_LINE;
/// Shift that brings a first-level stride table's 8 index bits to the bottom of an address.
pub(crate) const FIRST_TABLE_SHIFT: u32 = 128 - DIRECT_BITS - STRIDE;
/// A dense region whose interval boundaries all share at least this many more leading bits
/// than the region gets a skip node instead of a chain of single-path stride tables.
pub(crate) const MIN_SKIP: u32 = 2 * STRIDE;
/// Deepest region a skip node may point at (so a stride table still fits below it).
pub(crate) const MAX_SKIP_DEPTH: u32 = 128 - STRIDE;
/// Stages of `lookup_batch` are this many addresses apart (measured: 4..16 are within noise).
const PIPELINE_DISTANCE: usize = 8;

/// Borrowed view of the second-level structures, passed down the lookup helpers.
struct Tables<'a> {
    tables: &'a [Slot<u32>],
    ranges: &'a [Slot<u128>],
    skips: &'a [Slot<Skip>],
}

/// IPv6 forwarding table. Share it with an `Arc`; change it with `Ip6FibWriter`.
#[derive(Debug)]
pub struct Ip6Fib {
    /// First level: the only entries stored while readers can reach them (`Release`).
    pub(crate) direct: HugeArray<AtomicU32, DIRECT_LEN>,
    /// Stride tables, range entries and skip nodes: filled while unreachable (`Slot`).
    pub(crate) tables: HugeBuf<Slot<u32>>,
    pub(crate) ranges: HugeBuf<Slot<u128>>,
    pub(crate) skips: HugeBuf<Slot<Skip>>,
    pub(crate) usage: Usage,
}

/// Figures the writer keeps up to date for `memory_bytes` and the counters.
#[derive(Debug, Default)]
pub(crate) struct Usage {
    pub(crate) routes: AtomicUsize,
    pub(crate) intervals: AtomicUsize,
    /// High-water marks of the arenas (what the table has touched).
    pub(crate) range_tail: AtomicUsize,
    pub(crate) table_tail: AtomicUsize,
    pub(crate) skip_tail: AtomicUsize,
    /// Blocks in use (tail minus free).
    pub(crate) tables_in_use: AtomicUsize,
    pub(crate) skips_in_use: AtomicUsize,
}

/// Path-compression node: a region whose interval boundaries all lie in one much smaller
/// sub-region `prefix/depth`. Addresses inside continue at `child`; the others resolve at once
/// to `before` or `after`.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
pub(crate) struct Skip {
    /// First address of the sub-region.
    pub(crate) prefix: u128,
    /// Entry for the sub-region.
    pub(crate) child: u32,
    /// Next hop of the addresses below the sub-region.
    pub(crate) before: NextHopId,
    /// Next hop of the addresses above the sub-region.
    pub(crate) after: NextHopId,
    /// Prefix length of the sub-region (<= MAX_SKIP_DEPTH).
    pub(crate) depth: u32,
}

impl Ip6Fib {
    /// Largest next-hop id (20 bits, stored in the top of each range entry).
    pub const MAX_NEXT_HOP: NextHopId = (1 << 20) - 1;

    /// Range entries the table has room for (128 MiB of address space; 1M BGP-like routes use
    /// about 3.5M, and a re-encoded region needs room for its new blocks beside the old ones).
    pub const MAX_RANGES: usize = 1 << 23;
    /// Stride tables the table has room for (128 MiB; 1M BGP-like routes use about 65k).
    pub const MAX_TABLES: usize = 1 << 17;
    /// Skip nodes the table has room for (8 MiB).
    pub const MAX_SKIPS: usize = 1 << 18;

    /// An empty table (every lookup: no route) with room for `MAX_RANGES` range entries,
    /// `MAX_TABLES` stride tables and `MAX_SKIPS` skip nodes; pages are touched only as they
    /// are used.
    pub(crate) fn empty() -> Result<Ip6Fib, FibError> {
        Ok(Ip6Fib {
            direct: HugeArray::zeroed()?,
            tables: HugeBuf::zeroed(Self::MAX_TABLES * TABLE_LEN)?,
            ranges: HugeBuf::zeroed(Self::MAX_RANGES)?,
            skips: HugeBuf::zeroed(Self::MAX_SKIPS)?,
            usage: Usage::default(),
        })
    }

    /// Build from routes (prefix as host-order u128, i.e. `u128::from_be_bytes` of the address,
    /// prefix length 0..=128, next hop 1..=Ip6Fib::MAX_NEXT_HOP). Host bits beyond the prefix
    /// length are ignored (masked). Duplicate prefixes: the last one wins. For a table that
    /// changes later, use `Ip6FibWriter`.
    pub fn build(routes: &[(u128, u8, NextHopId)]) -> Result<Ip6Fib, FibError> {
        crate::Ip6FibWriter::build_table(routes)
    }

    #[inline(always)]
    fn direct_index(addr: u128) -> usize {
        (addr >> (128 - DIRECT_BITS)) as usize
    }

    /// Searches the range list `e` points at for `addr`.
    #[inline(always)]
    fn search(ranges: &[Slot<u128>], e: u32, addr: u128) -> NextHopId {
        let at = (e & RANGE_INDEX_MASK) as usize;
        let n = ((e & !RANGE_FLAG) >> COUNT_SHIFT) as usize + 1;
        let Some(list) = ranges.get(at..at + n) else {
            return NO_ROUTE;
        };
        // An entry is <= `key` exactly when its interval starts at or before `addr`; starts are
        // sorted and list[0] <= addr, so the match is the last entry <= key.
        let key = (addr << KEY_SHIFT) | NH_MASK;
        let mut base = 0usize;
        if n <= LINEAR_MAX {
            // Early-exit scan: measured faster than branch-free counting or bisection here,
            // because the predicted branches let the CPU run ahead into the next lookups.
            while base + 1 < n && list[base + 1].get() <= key {
                base += 1;
            }
        } else {
            let mut len = n;
            while len > 1 {
                let half = len / 2;
                if list[base + half].get() <= key {
                    base += half;
                }
                len -= half;
            }
        }
        (list[base].get() & NH_MASK) as NextHopId
    }

    /// One step down from a stride-table or skip-node entry `e` for `addr`; `shift` brings the
    /// 8 index bits of a stride table to the bottom of the address. Returns the next entry and
    /// its shift; a leaf entry when the walk ends early (address outside a skip's sub-region).
    #[inline(always)]
    fn descend(t: &Tables<'_>, e: u32, addr: u128, shift: u32) -> (u32, u32) {
        let index = (e & NODE_INDEX_MASK) as usize;
        if e & SKIP_FLAG == 0 {
            let i = index * TABLE_LEN + (addr.wrapping_shr(shift) as usize & (TABLE_LEN - 1));
            let next = t.tables.get(i).map_or(NO_ROUTE, Slot::get);
            (next, shift.wrapping_sub(STRIDE))
        } else {
            let Some(s) = t.skips.get(index).map(Slot::get) else {
                return (NO_ROUTE, 0);
            };
            // depth is in STRIDE..=MAX_SKIP_DEPTH, so both shifts are in range.
            if (addr ^ s.prefix).wrapping_shr(128 - s.depth) == 0 {
                (s.child, 128 - s.depth - STRIDE)
            } else if addr < s.prefix {
                (s.before, 0)
            } else {
                (s.after, 0)
            }
        }
    }

    /// Prefetches what entry `e` points at for `addr`: its range list, stride-table entry or
    /// skip node.
    #[inline(always)]
    fn prefetch_next(t: &Tables<'_>, e: u32, addr: u128, shift: u32) {
        if e & RANGE_FLAG != 0 {
            prefetch(
                t.ranges
                    .as_ptr()
                    .wrapping_add((e & RANGE_INDEX_MASK) as usize),
            );
        } else if e & TABLE_FLAG != 0 {
            let index = (e & NODE_INDEX_MASK) as usize;
            if e & SKIP_FLAG == 0 {
                let i = index * TABLE_LEN + (addr.wrapping_shr(shift) as usize & (TABLE_LEN - 1));
                prefetch(t.tables.as_ptr().wrapping_add(i));
            } else {
                prefetch(t.skips.as_ptr().wrapping_add(index));
            }
        }
    }

    /// Resolves `addr` from entry `e` (`shift` as in `descend`).
    #[inline(always)]
    fn walk_from(t: &Tables<'_>, mut e: u32, addr: u128, mut shift: u32) -> NextHopId {
        loop {
            if e & RANGE_FLAG != 0 {
                return Self::search(t.ranges, e, addr);
            }
            if e & TABLE_FLAG == 0 {
                return e;
            }
            (e, shift) = Self::descend(t, e, addr, shift);
        }
    }

    #[inline(always)]
    fn parts(&self) -> Tables<'_> {
        Tables {
            tables: &self.tables,
            ranges: &self.ranges,
            skips: &self.skips,
        }
    }

    /// Longest-prefix match of `addr` (host order); `NO_ROUTE` when nothing matches.
    #[inline]
    pub fn lookup(&self, addr: u128) -> NextHopId {
        let e = self.direct[Self::direct_index(addr)].load(Ordering::Acquire);
        Self::walk_from(&self.parts(), e, addr, FIRST_TABLE_SHIFT)
    }

    /// Batched lookup, software-pipelined so that the dependent cache misses of each lookup
    /// overlap with other lookups: at step `i` it prefetches the first-level entry of address
    /// `i`; reads the first-level entry of address `i - 8` and prefetches what it points at;
    /// descends one stride table or skip node for address `i - 16` (prefetching what follows);
    /// and resolves address `i - 24`. Designed for `addrs.len() == out.len() <= 256`; longer
    /// slices are processed in chunks of 256, and only the first `min(addrs.len(), out.len())`
    /// addresses are looked up.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [NextHopId]) {
        let direct = &*self.direct;
        let t = self.parts();
        let mut entries = [0u32; BATCH];
        let mut shifts = [FIRST_TABLE_SHIFT; BATCH];
        for (addrs, out) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let n = addrs.len().min(out.len());
            let d = PIPELINE_DISTANCE;
            for i in 0..n + 3 * d {
                // Stage 1: prefetch the first-level entry.
                if let Some(&a) = addrs.get(i) {
                    prefetch(&direct[Self::direct_index(a)]);
                }
                // Stage 2: read it and prefetch what it points at.
                if let Some(j) = i.checked_sub(d).filter(|&j| j < n) {
                    let e = direct[Self::direct_index(addrs[j])].load(Ordering::Acquire);
                    Self::prefetch_next(&t, e, addrs[j], FIRST_TABLE_SHIFT);
                    entries[j] = e;
                    shifts[j] = FIRST_TABLE_SHIFT;
                }
                // Stage 3: descend one stride table or skip node, prefetching what follows.
                if let Some(k) = i.checked_sub(2 * d).filter(|&k| k < n) {
                    let e = entries[k];
                    if e & (RANGE_FLAG | TABLE_FLAG) == TABLE_FLAG {
                        let (next, shift) = Self::descend(&t, e, addrs[k], shifts[k]);
                        Self::prefetch_next(&t, next, addrs[k], shift);
                        entries[k] = next;
                        shifts[k] = shift;
                    }
                }
                // Stage 4: resolve (deeper nodes, if any, are walked without prefetch).
                if let Some(k) = i.checked_sub(3 * d).filter(|&k| k < n) {
                    out[k] = Self::walk_from(&t, entries[k], addrs[k], shifts[k]);
                }
            }
        }
    }

    /// Bytes of the lookup tables workers touch: the first level and the used parts of the
    /// arenas (their high-water marks; the rest is reserved address space, never touched).
    pub fn memory_bytes(&self) -> usize {
        let u = &self.usage;
        self.direct.bytes()
            + u.table_tail.load(Ordering::Relaxed) * TABLE_LEN * std::mem::size_of::<u32>()
            + u.range_tail.load(Ordering::Relaxed) * std::mem::size_of::<u128>()
            + u.skip_tail.load(Ordering::Relaxed) * std::mem::size_of::<Skip>()
    }

    /// Number of distinct routes installed (after masking host bits and merging duplicates).
    pub fn route_count(&self) -> usize {
        self.usage.routes.load(Ordering::Relaxed)
    }

    /// Number of elementary intervals (maximal address runs with one next hop) in the regions
    /// holding routes longer than the first level.
    pub fn interval_count(&self) -> usize {
        self.usage.intervals.load(Ordering::Relaxed)
    }

    /// Number of 256-entry stride tables in use below the first level.
    pub fn stride_tables(&self) -> usize {
        self.usage.tables_in_use.load(Ordering::Relaxed)
    }

    /// Number of path-compression (skip) nodes in use.
    pub fn skip_nodes(&self) -> usize {
        self.usage.skips_in_use.load(Ordering::Relaxed)
    }

    /// Whether the kernel accepted transparent-huge-page advice for the first level.
    pub fn uses_huge_pages(&self) -> bool {
        self.direct.is_huge()
    }
}

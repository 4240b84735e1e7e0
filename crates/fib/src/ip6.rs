//! IPv6 longest-prefix match: a direct-indexed first level plus in-place range search (DXR-style,
//! Zec/Rizzo/Mikuc), with 8-bit stride tables and path-compression (skip) nodes only where a
//! region is dense. Owns `Ip6Fib`; the lookup never allocates, locks or panics, and a built table
//! is never mutated.
//!
//! Construction turns the route set into the sorted list of elementary intervals of the address
//! space (each maximal run of addresses with the same longest match, adjacent equal runs merged),
//! by one sweep over the prefixes sorted by (start, length) with a stack of enclosing prefixes.
//! Every region of the address space then gets one `u32` entry:
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
//! The first level is 2^20 entries indexed by the top 20 bits (4 MiB, advised onto huge pages;
//! 2000::/3 uses 512 KiB of it). With BGP-like tables almost every lookup is one first-level read
//! plus one or two cache lines of ranges: two dependent memory accesses, three in regions dense
//! enough for a stride table or skip node. `lookup_batch` overlaps them across the batch with a
//! software pipeline (prefetch first level; read it and prefetch the next node; descend one node
//! and prefetch; resolve). A trie walk (poptrie, tree bitmap) needs 4..7 dependent accesses for
//! the /32../48 routes that dominate IPv6 tables. Adversarial tables (every length of many nested
//! prefixes) can still chain up to 14 stride tables; memory stays bounded (a table only for a
//! region of more than 16 intervals, a skip node only for a region holding a table).

use crate::mem::{prefetch, HugeArray, HugeBuf};
use crate::{mask6, FibError, NextHopId, BATCH, NO_ROUTE};

const DIRECT_BITS: u32 = 20;
const DIRECT_LEN: usize = 1 << DIRECT_BITS;
const STRIDE: u32 = 8;
const TABLE_LEN: usize = 1 << STRIDE;
/// Range entries hold the interval start shifted left by this much (so that the region's shared
/// top bits drop out), with the next hop in the freed low bits.
const KEY_SHIFT: u32 = DIRECT_BITS;
const NH_MASK: u128 = (1 << KEY_SHIFT) - 1;

const RANGE_FLAG: u32 = 1 << 31;
/// Set (with bit 31 clear) for a stride table or a skip node.
const TABLE_FLAG: u32 = 1 << 30;
/// Set together with TABLE_FLAG for a skip node.
const SKIP_FLAG: u32 = 1 << 29;
/// Index bits of a stride-table or skip-node entry.
const NODE_INDEX_MASK: u32 = SKIP_FLAG - 1;
const RANGE_INDEX_MASK: u32 = (1 << 24) - 1;
const COUNT_SHIFT: u32 = 24;
/// Regions with more intervals than this are split into a stride table.
const SPLIT_THRESHOLD: usize = 16;
/// Range entries per 64-byte cache line.
const PER_LINE: usize = 4;
/// Range lists up to this long are scanned linearly, longer ones bisected.
const LINEAR_MAX: usize = 2 * PER_LINE;
/// Shift that brings a first-level stride table's 8 index bits to the bottom of an address.
const FIRST_TABLE_SHIFT: u32 = 128 - DIRECT_BITS - STRIDE;
/// A dense region whose interval boundaries all share at least this many more leading bits
/// than the region gets a skip node instead of a chain of single-path stride tables.
const MIN_SKIP: u32 = 2 * STRIDE;
/// Deepest region a skip node may point at (so a stride table still fits below it).
const MAX_SKIP_DEPTH: u32 = 128 - STRIDE;
/// Stages of `lookup_batch` are this many addresses apart (measured: 4..16 are within noise).
const PIPELINE_DISTANCE: usize = 8;

/// Borrowed view of the second-level structures, passed down the lookup helpers.
struct Tables<'a> {
    tables: &'a [u32],
    ranges: &'a [u128],
    skips: &'a [Skip],
}

/// IPv6 forwarding table. Immutable once built; share it with an `Arc`.
#[derive(Debug)]
pub struct Ip6Fib {
    direct: HugeArray<u32, DIRECT_LEN>,
    tables: HugeBuf<u32>,
    ranges: HugeBuf<u128>,
    skips: HugeBuf<Skip>,
    routes: usize,
    intervals: usize,
}

/// Path-compression node: a region whose interval boundaries all lie in one much smaller
/// sub-region `prefix/depth`. Addresses inside continue at `child`; the others resolve at once
/// to `before` or `after`.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
pub(crate) struct Skip {
    /// First address of the sub-region.
    prefix: u128,
    /// Entry for the sub-region.
    child: u32,
    /// Next hop of the addresses below the sub-region.
    before: NextHopId,
    /// Next hop of the addresses above the sub-region.
    after: NextHopId,
    /// Prefix length of the sub-region (<= MAX_SKIP_DEPTH).
    depth: u32,
}

struct Builder<'a> {
    /// Elementary intervals: (start, next hop), starts strictly increasing, first start 0.
    iv: &'a [(u128, NextHopId)],
    ranges: Vec<u128>,
    tables: Vec<u32>,
    skips: Vec<Skip>,
}

impl Builder<'_> {
    /// Encodes the 2^bits equal sub-regions of the region starting at `start` with prefix length
    /// `depth` into `out`; `first` is the interval containing `start`.
    fn children(
        &mut self,
        start: u128,
        depth: u32,
        bits: u32,
        first: usize,
        out: &mut [u32],
    ) -> Result<(), FibError> {
        let sub_bits = 128 - depth - bits;
        let sub_span = (1u128 << sub_bits) - 1;
        let iv = self.iv;
        let mut p = first;
        for (i, slot) in out.iter_mut().enumerate() {
            let sub_start = start + ((i as u128) << sub_bits);
            let sub_end = sub_start + sub_span;
            while p + 1 < iv.len() && iv[p + 1].0 <= sub_start {
                p += 1;
            }
            let mut q = p;
            while q + 1 < iv.len() && iv[q + 1].0 <= sub_end {
                q += 1;
            }
            *slot = self.encode(sub_start, depth + bits, p, q)?;
            p = q;
        }
        Ok(())
    }

    /// Entry for the region starting at `start` with prefix length `depth`, overlapped by
    /// intervals `first..=last`.
    fn encode(
        &mut self,
        start: u128,
        depth: u32,
        first: usize,
        last: usize,
    ) -> Result<u32, FibError> {
        let count = last - first + 1;
        if count == 1 {
            return Ok(self.iv[first].1);
        }
        if count <= SPLIT_THRESHOLD || depth + STRIDE > 128 {
            // depth + STRIDE > 128 means at most 2^7 addresses remain, so count <= 128 fits 7 bits.
            let mut at = self.ranges.len();
            // Keep a list of <= 4 entries inside one cache line, and one of 5..=8 in two.
            if (count <= PER_LINE && at % PER_LINE + count > PER_LINE)
                || (count > PER_LINE && count <= LINEAR_MAX)
            {
                at = at.next_multiple_of(PER_LINE);
                self.ranges.resize(at, 0);
            }
            if at + count > RANGE_INDEX_MASK as usize + 1 {
                return Err(FibError::Ip6Capacity {
                    what: "range entries",
                    needed: at + count,
                    max: RANGE_INDEX_MASK as usize + 1,
                });
            }
            let entry = |s: u128, nh: NextHopId| (s << KEY_SHIFT) | u128::from(nh);
            self.ranges.push(entry(start, self.iv[first].1));
            for &(s, nh) in &self.iv[first + 1..=last] {
                self.ranges.push(entry(s, nh));
            }
            return Ok(RANGE_FLAG | (((count - 1) as u32) << COUNT_SHIFT) | at as u32);
        }
        // All boundaries inside the region (starts of intervals first+1..=last) lie in the
        // sub-region of their common prefix; if that is much longer than `depth`, skip to it.
        let lo = self.iv[first + 1].0;
        let hi = self.iv[last].0;
        let common = (lo ^ hi).leading_zeros().min(MAX_SKIP_DEPTH);
        if common >= depth + MIN_SKIP {
            let prefix = lo & mask6(common as u8);
            // The interval containing the sub-region's first address.
            let sub_first = if lo == prefix { first + 1 } else { first };
            let child = self.encode(prefix, common, sub_first, last)?;
            let k = self.skips.len();
            if k > NODE_INDEX_MASK as usize {
                return Err(FibError::Ip6Capacity {
                    what: "skip nodes",
                    needed: k + 1,
                    max: NODE_INDEX_MASK as usize + 1,
                });
            }
            self.skips.push(Skip {
                prefix,
                child,
                before: self.iv[first].1,
                after: self.iv[last].1,
                depth: common,
            });
            return Ok(TABLE_FLAG | SKIP_FLAG | k as u32);
        }
        let t = self.tables.len() / TABLE_LEN;
        if t > NODE_INDEX_MASK as usize {
            return Err(FibError::Ip6Capacity {
                what: "stride tables",
                needed: t + 1,
                max: NODE_INDEX_MASK as usize + 1,
            });
        }
        self.tables.resize(self.tables.len() + TABLE_LEN, 0);
        let mut buf = [0u32; TABLE_LEN];
        self.children(start, depth, STRIDE, first, &mut buf)?;
        self.tables[t * TABLE_LEN..(t + 1) * TABLE_LEN].copy_from_slice(&buf);
        Ok(TABLE_FLAG | t as u32)
    }
}

/// Appends interval `(start, nh)`: an interval at the same start replaces the previous one, and
/// one equal to its predecessor's next hop is merged into it.
fn push_interval(out: &mut Vec<(u128, NextHopId)>, start: u128, nh: NextHopId) {
    if out.last().is_some_and(|l| l.0 == start) {
        out.pop();
    }
    if out.last().is_none_or(|l| l.1 != nh) {
        out.push((start, nh));
    }
}

/// Elementary intervals of a set of distinct prefixes sorted by (start, len): a sweep keeping the
/// chain of enclosing prefixes on a stack.
fn intervals(sorted: &[(u128, u8, NextHopId)]) -> Vec<(u128, NextHopId)> {
    let mut out: Vec<(u128, NextHopId)> = Vec::with_capacity(sorted.len() * 2 + 1);
    out.push((0, NO_ROUTE));
    let mut stack: Vec<(u128, NextHopId)> = Vec::with_capacity(129);
    let close = |stack: &mut Vec<(u128, NextHopId)>, out: &mut Vec<(u128, NextHopId)>| {
        if let Some((end, _)) = stack.pop() {
            let outer = stack.last().map_or(NO_ROUTE, |s| s.1);
            if let Some(next) = end.checked_add(1) {
                push_interval(out, next, outer);
            }
        }
    };
    for &(start, len, nh) in sorted {
        while stack.last().is_some_and(|s| s.0 < start) {
            close(&mut stack, &mut out);
        }
        stack.push((start | !mask6(len), nh));
        push_interval(&mut out, start, nh);
    }
    while !stack.is_empty() {
        close(&mut stack, &mut out);
    }
    if out.first().is_none_or(|f| f.0 != 0) {
        out.insert(0, (0, NO_ROUTE));
    }
    out
}

impl Ip6Fib {
    /// Largest next-hop id (20 bits, stored in the top of each range entry).
    pub const MAX_NEXT_HOP: NextHopId = (1 << 20) - 1;

    /// Build from routes (prefix as host-order u128, i.e. `u128::from_be_bytes` of the address,
    /// prefix length 0..=128, next hop 1..=Ip6Fib::MAX_NEXT_HOP). Host bits beyond the prefix
    /// length are ignored (masked). Duplicate prefixes: the last one wins.
    pub fn build(routes: &[(u128, u8, NextHopId)]) -> Result<Ip6Fib, FibError> {
        let mut sorted: Vec<(u128, u8, u32, NextHopId)> = Vec::with_capacity(routes.len());
        for (index, &(prefix, len, nh)) in routes.iter().enumerate() {
            if len > 128 {
                return Err(FibError::PrefixLength {
                    index,
                    len,
                    family: "IPv6",
                    max: 128,
                });
            }
            if nh == NO_ROUTE || nh > Self::MAX_NEXT_HOP {
                return Err(FibError::NextHop {
                    index,
                    next_hop: nh,
                    family: "IPv6",
                    max: Self::MAX_NEXT_HOP,
                });
            }
            sorted.push((prefix & mask6(len), len, index as u32, nh));
        }
        // (start, len) ascending puts every prefix after the prefixes enclosing it; the input
        // position orders duplicates so that the last one is kept.
        sorted.sort_unstable();
        let mut unique: Vec<(u128, u8, NextHopId)> = Vec::with_capacity(sorted.len());
        for (i, &(prefix, len, _, nh)) in sorted.iter().enumerate() {
            if sorted
                .get(i + 1)
                .is_some_and(|n| n.0 == prefix && n.1 == len)
            {
                continue;
            }
            unique.push((prefix, len, nh));
        }
        drop(sorted);
        let iv = intervals(&unique);

        let mut direct = HugeArray::<u32, DIRECT_LEN>::zeroed()?;
        let mut b = Builder {
            iv: &iv,
            ranges: Vec::with_capacity(iv.len() * 2),
            tables: Vec::new(),
            skips: Vec::new(),
        };
        b.children(0, 0, DIRECT_BITS, 0, &mut direct[..])?;
        let tables = HugeBuf::from_slice(&b.tables)?;
        let ranges = HugeBuf::from_slice(&b.ranges)?;
        let skips = HugeBuf::from_slice(&b.skips)?;
        Ok(Ip6Fib {
            direct,
            tables,
            ranges,
            skips,
            routes: unique.len(),
            intervals: iv.len(),
        })
    }

    #[inline(always)]
    fn direct_index(addr: u128) -> usize {
        (addr >> (128 - DIRECT_BITS)) as usize
    }

    /// Searches the range list `e` points at for `addr`.
    #[inline(always)]
    fn search(ranges: &[u128], e: u32, addr: u128) -> NextHopId {
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
            while base + 1 < n && list[base + 1] <= key {
                base += 1;
            }
        } else {
            let mut len = n;
            while len > 1 {
                let half = len / 2;
                if list[base + half] <= key {
                    base += half;
                }
                len -= half;
            }
        }
        (list[base] & NH_MASK) as NextHopId
    }

    /// One step down from a stride-table or skip-node entry `e` for `addr`; `shift` brings the
    /// 8 index bits of a stride table to the bottom of the address. Returns the next entry and
    /// its shift; a leaf entry when the walk ends early (address outside a skip's sub-region).
    #[inline(always)]
    fn descend(t: &Tables<'_>, e: u32, addr: u128, shift: u32) -> (u32, u32) {
        let index = (e & NODE_INDEX_MASK) as usize;
        if e & SKIP_FLAG == 0 {
            let i = index * TABLE_LEN + (addr.wrapping_shr(shift) as usize & (TABLE_LEN - 1));
            let next = t.tables.get(i).copied().unwrap_or(NO_ROUTE);
            (next, shift.wrapping_sub(STRIDE))
        } else {
            let Some(s) = t.skips.get(index) else {
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
        let e = self.direct[Self::direct_index(addr)];
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
                    let e = direct[Self::direct_index(addrs[j])];
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

    /// Bytes of all lookup tables (first level, stride tables, skip nodes and range entries).
    pub fn memory_bytes(&self) -> usize {
        self.direct.bytes() + self.tables.bytes() + self.ranges.bytes() + self.skips.bytes()
    }

    /// Number of distinct routes installed (after masking host bits and merging duplicates).
    pub fn route_count(&self) -> usize {
        self.routes
    }

    /// Number of elementary intervals (maximal address runs with one next hop).
    pub fn interval_count(&self) -> usize {
        self.intervals
    }

    /// Number of 256-entry stride tables below the first level.
    pub fn stride_tables(&self) -> usize {
        self.tables.len() / TABLE_LEN
    }

    /// Number of path-compression (skip) nodes.
    pub fn skip_nodes(&self) -> usize {
        self.skips.len()
    }

    /// Whether the kernel accepted transparent-huge-page advice for the first level.
    pub fn uses_huge_pages(&self) -> bool {
        self.direct.is_huge()
    }
}

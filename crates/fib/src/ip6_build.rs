//! How one region of the IPv6 table is encoded: the elementary intervals of its routes, and the
//! entry (leaf, range list, stride table or skip node; formats in ip6.rs) that resolves them,
//! written into free space of the table's arenas (`Space`). Owns the interval sweep, the encoder
//! and the arena allocator; it never writes a slot a reader can reach (the caller publishes the
//! returned entry) and never frees anything itself (the writer retires what it replaces).

use crate::ip6::{
    Ip6Fib, Skip, COUNT_SHIFT, KEY_SHIFT, LINEAR_MAX, MAX_SKIP_DEPTH, MIN_SKIP, NODE_INDEX_MASK,
    RANGE_FLAG, RANGE_INDEX_MASK, SKIP_FLAG, SPLIT_THRESHOLD, STRIDE, TABLE_FLAG, TABLE_LEN,
};
use crate::{mask6, FibError, NextHopId};

/// Range-list size classes: 2^1 ..= 2^MAX_CLASS entries (a list has 2..=128 entries).
const MAX_CLASS: usize = 7;

/// Free space of the table's arenas. Range lists get a power-of-two block aligned to its size,
/// so a list of up to 4 entries (64 bytes) never straddles a cache line and one of 5..=8 starts
/// on one; freed blocks go back to their class (no coalescing: churn of similar routes reuses
/// them; the high-water marks bound the memory touched).
#[derive(Debug, Default)]
pub(crate) struct Space {
    range_tail: usize,
    range_free: [Vec<u32>; MAX_CLASS + 1],
    table_tail: usize,
    table_free: Vec<u32>,
    skip_tail: usize,
    skip_free: Vec<u32>,
}

/// A block of one arena, as the writer retires it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Block {
    /// A range list: its first entry and its length.
    Ranges(u32, u32),
    /// A stride table.
    Table(u32),
    /// A skip node.
    Skip(u32),
}

fn class(count: usize) -> usize {
    count.next_power_of_two().trailing_zeros().max(1) as usize
}

impl Space {
    fn alloc_ranges(&mut self, count: usize) -> Result<usize, FibError> {
        let c = class(count);
        if c > MAX_CLASS {
            return Err(FibError::Ip6Capacity {
                what: "entries in one range list",
                needed: count,
                max: 1 << MAX_CLASS,
            });
        }
        if let Some(at) = self.range_free[c].pop() {
            return Ok(at as usize);
        }
        // Split the smallest larger free block, keeping the upper halves.
        if let Some(big) = (c + 1..=MAX_CLASS).find(|&b| !self.range_free[b].is_empty()) {
            let at = self.range_free[big].pop().unwrap_or_default();
            for half in (c..big).rev() {
                self.range_free[half].push(at + (1 << half));
            }
            return Ok(at as usize);
        }
        let size = 1usize << c;
        let at = self.range_tail.next_multiple_of(size);
        if at + size > Ip6Fib::MAX_RANGES {
            return Err(FibError::Ip6Capacity {
                what: "range entries",
                needed: at + size,
                max: Ip6Fib::MAX_RANGES,
            });
        }
        // The alignment gap: aligned pieces of 2 or more go to their classes.
        let mut gap = self.range_tail;
        while gap < at {
            let piece = (gap.trailing_zeros() as usize)
                .min((at - gap).ilog2() as usize)
                .min(MAX_CLASS);
            if piece >= 1 {
                self.range_free[piece].push(gap as u32);
            }
            gap += 1 << piece;
        }
        self.range_tail = at + size;
        Ok(at)
    }

    fn alloc_table(&mut self) -> Result<usize, FibError> {
        if let Some(t) = self.table_free.pop() {
            return Ok(t as usize);
        }
        let t = self.table_tail;
        if t >= Ip6Fib::MAX_TABLES {
            return Err(FibError::Ip6Capacity {
                what: "stride tables",
                needed: t + 1,
                max: Ip6Fib::MAX_TABLES,
            });
        }
        self.table_tail += 1;
        Ok(t)
    }

    fn alloc_skip(&mut self) -> Result<usize, FibError> {
        if let Some(k) = self.skip_free.pop() {
            return Ok(k as usize);
        }
        let k = self.skip_tail;
        if k >= Ip6Fib::MAX_SKIPS {
            return Err(FibError::Ip6Capacity {
                what: "skip nodes",
                needed: k + 1,
                max: Ip6Fib::MAX_SKIPS,
            });
        }
        self.skip_tail += 1;
        Ok(k)
    }

    /// Make `block` available again (the caller knows no reader can reach it).
    pub(crate) fn free(&mut self, block: Block) {
        match block {
            Block::Ranges(at, count) => self.range_free[class(count as usize)].push(at),
            Block::Table(t) => self.table_free.push(t),
            Block::Skip(k) => self.skip_free.push(k),
        }
    }

    /// High-water marks: range entries, stride tables and skip nodes ever used.
    pub(crate) fn tails(&self) -> (usize, usize, usize) {
        (self.range_tail, self.table_tail, self.skip_tail)
    }

    /// Free blocks: range entries, stride tables and skip nodes.
    pub(crate) fn free_counts(&self) -> (usize, usize, usize) {
        let ranges = (1..=MAX_CLASS).map(|c| self.range_free[c].len() << c).sum();
        (ranges, self.table_free.len(), self.skip_free.len())
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

/// Elementary intervals from `first` on, where `base` applies outside every route, of distinct
/// prefixes sorted by (start, len) that all start at or after `first`: a sweep keeping the chain
/// of enclosing prefixes on a stack. The last intervals may start past the caller's region.
pub(crate) fn intervals(
    first: u128,
    base: NextHopId,
    sorted: &[(u128, u8, NextHopId)],
) -> Vec<(u128, NextHopId)> {
    let mut out: Vec<(u128, NextHopId)> = Vec::with_capacity(sorted.len() * 2 + 1);
    out.push((first, base));
    let mut stack: Vec<(u128, NextHopId)> = Vec::with_capacity(129);
    let close = |stack: &mut Vec<(u128, NextHopId)>, out: &mut Vec<(u128, NextHopId)>| {
        if let Some((end, _)) = stack.pop() {
            let outer = stack.last().map_or(base, |s| s.1);
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
    if out.first().is_none_or(|f| f.0 != first) {
        out.insert(0, (first, base));
    }
    out
}

/// Encodes regions into free space of `fib`'s arenas, recording what it allocates.
pub(crate) struct Encoder<'a> {
    /// Elementary intervals: (start, next hop), starts strictly increasing.
    pub(crate) iv: &'a [(u128, NextHopId)],
    pub(crate) fib: &'a Ip6Fib,
    pub(crate) space: &'a mut Space,
    /// Blocks allocated so far (freed again by the caller if encoding fails).
    pub(crate) made: Vec<Block>,
}

impl Encoder<'_> {
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
    pub(crate) fn encode(
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
            let at = self.space.alloc_ranges(count)?;
            self.made.push(Block::Ranges(at as u32, count as u32));
            debug_assert!(count > LINEAR_MAX || at % count.next_power_of_two() == 0);
            let entry = |s: u128, nh: NextHopId| (s << KEY_SHIFT) | u128::from(nh);
            let ranges = &self.fib.ranges;
            for (i, &(s, nh)) in self.iv[first..=last].iter().enumerate() {
                let s = if i == 0 { start } else { s };
                if let Some(slot) = ranges.get(at + i) {
                    // SAFETY: the block was just allocated from free space: no published entry
                    // leads to it until the caller stores this function's result (Release).
                    unsafe { slot.set(entry(s, nh)) };
                }
            }
            debug_assert!(at <= RANGE_INDEX_MASK as usize);
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
            let k = self.space.alloc_skip()?;
            self.made.push(Block::Skip(k as u32));
            let node = Skip {
                prefix,
                child,
                before: self.iv[first].1,
                after: self.iv[last].1,
                depth: common,
            };
            if let Some(slot) = self.fib.skips.get(k) {
                // SAFETY: freshly allocated, unreachable until the caller publishes (as above).
                unsafe { slot.set(node) };
            }
            debug_assert!(k <= NODE_INDEX_MASK as usize);
            return Ok(TABLE_FLAG | SKIP_FLAG | k as u32);
        }
        let t = self.space.alloc_table()?;
        self.made.push(Block::Table(t as u32));
        let mut buf = [0u32; TABLE_LEN];
        self.children(start, depth, STRIDE, first, &mut buf)?;
        for (i, &e) in buf.iter().enumerate() {
            if let Some(slot) = self.fib.tables.get(t * TABLE_LEN + i) {
                // SAFETY: freshly allocated, unreachable until the caller publishes (as above).
                unsafe { slot.set(e) };
            }
        }
        debug_assert!(t <= NODE_INDEX_MASK as usize);
        Ok(TABLE_FLAG | t as u32)
    }
}

/// The blocks entry `e` leads to (for retirement), appended to `out`.
pub(crate) fn blocks_of(fib: &Ip6Fib, e: u32, out: &mut Vec<Block>) {
    if e & RANGE_FLAG != 0 {
        let at = e & RANGE_INDEX_MASK;
        let n = ((e & !RANGE_FLAG) >> COUNT_SHIFT) + 1;
        out.push(Block::Ranges(at, n));
    } else if e & TABLE_FLAG != 0 {
        let index = e & NODE_INDEX_MASK;
        if e & SKIP_FLAG == 0 {
            let base = index as usize * TABLE_LEN;
            for i in 0..TABLE_LEN {
                if let Some(slot) = fib.tables.get(base + i) {
                    blocks_of(fib, slot.get(), out);
                }
            }
            out.push(Block::Table(index));
        } else {
            if let Some(s) = fib.skips.get(index as usize) {
                blocks_of(fib, s.get().child, out);
            }
            out.push(Block::Skip(index));
        }
    }
}

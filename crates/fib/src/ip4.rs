//! IPv4 longest-prefix match with DIR-24-8 (Gupta, Lin, McKeown 1998).
//! Owns `Ip4Fib`: a 2^24-entry `u16` first level indexed by the top 24 address bits, and 256-entry
//! `u16` tbl8 groups for /24 blocks holding longer routes. Lookup never allocates, locks or panics.
//!
//! Entry format (both levels): bit 15 = "extended" (only in tbl24): the low 15 bits are a tbl8
//! group index; otherwise the low 15 bits are the next hop (0 = no route). Construction paints
//! routes in ascending prefix-length order, so longer prefixes overwrite shorter ones and no
//! depths need storing; a group is created, seeded with its tbl24 entry, by the first route
//! longer than /24 in that block (all routes <= /24 are painted before any group exists).

use crate::mem::{prefetch, HugeArray, HugeBuf};
use crate::{mask4, FibError, NextHopId, BATCH};

const TBL24_LEN: usize = 1 << 24;
const EXTENDED: u16 = 0x8000;
const LOW15: u16 = 0x7fff;

/// IPv4 forwarding table (DIR-24-8). Immutable once built; share it with an `Arc`.
#[derive(Debug)]
pub struct Ip4Fib {
    tbl24: HugeArray<u16, TBL24_LEN>,
    tbl8: HugeBuf<u16>,
    groups: usize,
    routes: usize,
}

impl Ip4Fib {
    /// Largest next-hop id (15 bits of a tbl24/tbl8 entry).
    pub const MAX_NEXT_HOP: NextHopId = 0x7fff;
    /// Largest number of tbl8 groups (distinct /24 blocks holding routes longer than /24).
    pub const MAX_TBL8_GROUPS: usize = 0x7fff;

    /// Build from routes (prefix as host-order u32, prefix length 0..=32, next hop
    /// 1..=Ip4Fib::MAX_NEXT_HOP). Host bits beyond the prefix length are ignored (masked).
    /// Duplicate prefixes: the last one wins.
    pub fn build(routes: &[(u32, u8, NextHopId)]) -> Result<Ip4Fib, FibError> {
        // Validate, mask, and sort by (len, prefix, input position): length-ascending painting
        // order, with duplicates adjacent and the last one given last.
        let mut sorted: Vec<(u64, u32, NextHopId)> = Vec::with_capacity(routes.len());
        for (index, &(prefix, len, nh)) in routes.iter().enumerate() {
            if len > 32 {
                return Err(FibError::PrefixLength {
                    index,
                    len,
                    family: "IPv4",
                    max: 32,
                });
            }
            if nh == crate::NO_ROUTE || nh > Self::MAX_NEXT_HOP {
                return Err(FibError::NextHop {
                    index,
                    next_hop: nh,
                    family: "IPv4",
                    max: Self::MAX_NEXT_HOP,
                });
            }
            let key = (u64::from(len) << 32) | u64::from(prefix & mask4(len));
            sorted.push((key, index as u32, nh));
        }
        sorted.sort_unstable();
        // Keep the last of each run of equal (len, prefix).
        let mut unique: Vec<(u32, u8, u16)> = Vec::with_capacity(sorted.len());
        for (i, &(key, _, nh)) in sorted.iter().enumerate() {
            if sorted.get(i + 1).is_some_and(|next| next.0 == key) {
                continue;
            }
            // nh <= MAX_NEXT_HOP = 0x7fff was checked above, so it fits in 15 bits.
            unique.push((key as u32, (key >> 32) as u8, nh as u16));
        }
        drop(sorted);

        // One tbl8 group per distinct /24 block holding a route longer than /24.
        let mut blocks: Vec<u32> = unique
            .iter()
            .filter(|r| r.1 > 24)
            .map(|r| r.0 >> 8)
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let groups = blocks.len();
        if groups > Self::MAX_TBL8_GROUPS {
            return Err(FibError::TooManyTbl8Groups {
                needed: groups,
                max: Self::MAX_TBL8_GROUPS,
            });
        }

        let mut tbl24 = HugeArray::<u16, TBL24_LEN>::zeroed()?;
        let mut tbl8 = HugeBuf::<u16>::zeroed(groups * 256)?;
        let mut next_group: u16 = 0;
        for &(prefix, len, nh) in &unique {
            if len <= 24 {
                let start = (prefix >> 8) as usize;
                let span = 1usize << (24 - len);
                tbl24[start..start + span].fill(nh);
            } else {
                let slot = (prefix >> 8) as usize;
                let entry = tbl24[slot];
                let group = if entry & EXTENDED != 0 {
                    entry & LOW15
                } else {
                    // Fits: next_group < groups <= MAX_TBL8_GROUPS = 0x7fff.
                    let g = next_group;
                    next_group += 1;
                    let base = usize::from(g) << 8;
                    tbl8[base..base + 256].fill(entry);
                    tbl24[slot] = EXTENDED | g;
                    g
                };
                let start = (usize::from(group) << 8) | (prefix & 0xff) as usize;
                let span = 1usize << (32 - len);
                tbl8[start..start + span].fill(nh);
            }
        }
        Ok(Ip4Fib {
            tbl24,
            tbl8,
            groups,
            routes: unique.len(),
        })
    }

    #[inline(always)]
    fn resolve(tbl8: &[u16], entry: u16, addr: u32) -> NextHopId {
        if entry & EXTENDED == 0 {
            NextHopId::from(entry)
        } else {
            let i = (usize::from(entry & LOW15) << 8) | (addr & 0xff) as usize;
            tbl8.get(i).map_or(crate::NO_ROUTE, |&e| NextHopId::from(e))
        }
    }

    /// Longest-prefix match of `addr` (host order); `NO_ROUTE` when nothing matches.
    #[inline]
    pub fn lookup(&self, addr: u32) -> NextHopId {
        let entry = self.tbl24[(addr >> 8) as usize];
        Self::resolve(&self.tbl8, entry, addr)
    }

    /// Batched lookup: prefetches the tbl24 entries of a whole batch, then resolves them, so
    /// the cache misses overlap. Designed for `addrs.len() == out.len() <= 256`; longer slices
    /// are processed in chunks of 256, and only the first `min(addrs.len(), out.len())`
    /// addresses are looked up.
    ///
    /// Measured on the 1M-route bench: about half the cost of a scalar loop when the flows'
    /// tbl24 lines miss the caches, about 0.4 ns per lookup more when they are all cached; a
    /// rolling prefetch distance (4..32 ahead) did worse when cold.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [NextHopId]) {
        let tbl24 = &*self.tbl24;
        let tbl8 = &self.tbl8[..];
        for (addrs, out) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for &a in addrs {
                prefetch(&tbl24[(a >> 8) as usize]);
            }
            for (&a, o) in addrs.iter().zip(out.iter_mut()) {
                *o = Self::resolve(tbl8, tbl24[(a >> 8) as usize], a);
            }
        }
    }

    /// Bytes of all lookup tables (tbl24 plus tbl8 groups).
    pub fn memory_bytes(&self) -> usize {
        self.tbl24.bytes() + self.tbl8.bytes()
    }

    /// Number of distinct routes installed (after masking host bits and merging duplicates).
    pub fn route_count(&self) -> usize {
        self.routes
    }

    /// Number of tbl8 groups in use.
    pub fn tbl8_groups(&self) -> usize {
        self.groups
    }

    /// Whether the kernel accepted transparent-huge-page advice for tbl24.
    pub fn uses_huge_pages(&self) -> bool {
        self.tbl24.is_huge()
    }
}

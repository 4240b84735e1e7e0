//! `Ip6FibWriter`: the control thread's side of a live IPv6 FIB. Owns the route set (RIB), the
//! route of /0../20 that covers each first-level region, the regions holding longer routes, the
//! arena space and the retirement of replaced blocks. A change touches only the regions its
//! prefix covers; it never rebuilds the table and never makes a reader wait. One writer a table.
//!
//! A route of /20 or shorter paints the first-level regions it covers whose painting length is
//! not longer (as DIR-24-8 does for tbl24): a region without longer routes gets the new next hop
//! with one atomic store at once; one with longer routes is re-encoded. A route longer than /20
//! marks its one region. `commit` re-encodes every marked region once: it builds the region's
//! intervals from the RIB, encodes them into free arena space (unreachable to readers), stores
//! the new first-level entry (`Release`) and retires the blocks of the old one at an epoch of the
//! `live` domain; they are reused only once every worker has moved past it.

use crate::ip6::{Ip6Fib, DIRECT_BITS, DIRECT_LEN};
use crate::ip6_build::{blocks_of, intervals, Block, Encoder, Space};
use crate::{mask6, FibError, NextHopId, NO_ROUTE};
use live::Domain;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bits of an address below the first-level index.
const REGION_SHIFT: u32 = 128 - DIRECT_BITS;

/// The writer of one shared `Ip6Fib`.
pub struct Ip6FibWriter {
    fib: Arc<Ip6Fib>,
    /// Every route: (prefix, length) -> next hop, in (prefix, length) order.
    rib: BTreeMap<(u128, u8), NextHopId>,
    /// Per region: the next hop of the longest route of /0../20 covering it (0: none).
    base: Vec<NextHopId>,
    /// Per region: 1 + the length of that route (0: none).
    depth: Vec<u8>,
    /// Regions holding routes longer than /20: how many, and their intervals.
    inner: HashMap<u32, (u32, u32)>,
    /// Regions to re-encode at `commit`.
    dirty: BTreeSet<u32>,
    space: Space,
    /// Blocks unlinked since the last commit.
    unlinked: Vec<Block>,
    /// Retired blocks and the epoch they were retired at.
    retired: VecDeque<(u64, Block)>,
    /// Intervals of all regions with longer routes.
    intervals: usize,
    /// None: no reader can run concurrently (a table being built), blocks are reused at once.
    domain: Option<Domain>,
}

fn check(prefix: u128, len: u8, nh: NextHopId, index: usize) -> Result<u128, FibError> {
    if len > 128 {
        return Err(FibError::PrefixLength {
            index,
            len,
            family: "IPv6",
            max: 128,
        });
    }
    if nh == NO_ROUTE || nh > Ip6Fib::MAX_NEXT_HOP {
        return Err(FibError::NextHop {
            index,
            next_hop: nh,
            family: "IPv6",
            max: Ip6Fib::MAX_NEXT_HOP,
        });
    }
    Ok(prefix & mask6(len))
}

/// The first-level regions `prefix/len` covers.
fn regions(prefix: u128, len: u8) -> std::ops::RangeInclusive<usize> {
    let first = (prefix >> REGION_SHIFT) as usize;
    let count = if u32::from(len) >= DIRECT_BITS {
        1
    } else {
        1usize << (DIRECT_BITS - u32::from(len))
    };
    first..=first + count - 1
}

impl Ip6FibWriter {
    /// An empty table whose replaced blocks are retired in `domain` (the workers' epochs).
    pub fn new(domain: Domain) -> Result<Ip6FibWriter, FibError> {
        Ip6FibWriter::with_domain(Some(domain))
    }

    fn with_domain(domain: Option<Domain>) -> Result<Ip6FibWriter, FibError> {
        Ok(Ip6FibWriter {
            fib: Arc::new(Ip6Fib::empty()?),
            rib: BTreeMap::new(),
            base: vec![NO_ROUTE; DIRECT_LEN],
            depth: vec![0; DIRECT_LEN],
            inner: HashMap::new(),
            dirty: BTreeSet::new(),
            space: Space::default(),
            unlinked: Vec::new(),
            retired: VecDeque::new(),
            intervals: 0,
            domain,
        })
    }

    /// A table of `routes` nobody reads yet (see `Ip6Fib::build`).
    pub(crate) fn build_table(routes: &[(u128, u8, NextHopId)]) -> Result<Ip6Fib, FibError> {
        let mut w = Ip6FibWriter::with_domain(None)?;
        for (index, &(prefix, len, nh)) in routes.iter().enumerate() {
            w.insert_at(prefix, len, nh, index)?;
        }
        w.commit()?;
        let fib = std::mem::replace(&mut w.fib, Arc::new(Ip6Fib::empty()?));
        Arc::try_unwrap(fib).map_err(|_| FibError::Map {
            bytes: 0,
            reason: "the table being built is shared".into(),
        })
    }

    /// The shared table.
    pub fn fib(&self) -> Arc<Ip6Fib> {
        self.fib.clone()
    }

    /// Routes in the table.
    pub fn len(&self) -> usize {
        self.rib.len()
    }

    /// Whether the table has no route.
    pub fn is_empty(&self) -> bool {
        self.rib.is_empty()
    }

    /// The next hop of exactly `prefix/len`, if that route exists.
    pub fn get(&self, prefix: u128, len: u8) -> Option<NextHopId> {
        self.rib.get(&(prefix & mask6(len.min(128)), len)).copied()
    }

    /// Add or replace `prefix/len` (host bits ignored); returns the next hop it replaced.
    /// Regions holding longer routes change at `commit`, the others at once.
    pub fn insert(
        &mut self,
        prefix: u128,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, FibError> {
        self.insert_at(prefix, len, nh, 0)
    }

    fn insert_at(
        &mut self,
        prefix: u128,
        len: u8,
        nh: NextHopId,
        index: usize,
    ) -> Result<Option<NextHopId>, FibError> {
        let prefix = check(prefix, len, nh, index)?;
        let old = self.rib.insert((prefix, len), nh);
        if old == Some(nh) {
            return Ok(old);
        }
        if u32::from(len) <= DIRECT_BITS {
            let d = len + 1;
            for r in regions(prefix, len) {
                if self.depth[r] <= d {
                    self.base[r] = nh;
                    self.depth[r] = d;
                    self.settle(r);
                }
            }
        } else {
            let r = (prefix >> REGION_SHIFT) as u32;
            if old.is_none() {
                self.inner.entry(r).or_default().0 += 1;
            }
            self.dirty.insert(r);
        }
        Ok(old)
    }

    /// Remove `prefix/len` (host bits ignored); returns its next hop if it existed.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<NextHopId> {
        if len > 128 {
            return None;
        }
        let prefix = prefix & mask6(len);
        let old = self.rib.remove(&(prefix, len))?;
        if u32::from(len) <= DIRECT_BITS {
            // The regions it painted get the longest shorter route covering it.
            let (nh, d) = (0..len)
                .rev()
                .find_map(|l| self.rib.get(&(prefix & mask6(l), l)).map(|&nh| (nh, l + 1)))
                .unwrap_or((NO_ROUTE, 0));
            for r in regions(prefix, len) {
                if self.depth[r] == len + 1 {
                    self.base[r] = nh;
                    self.depth[r] = d;
                    self.settle(r);
                }
            }
        } else {
            let r = (prefix >> REGION_SHIFT) as u32;
            if let Some(e) = self.inner.get_mut(&r) {
                e.0 = e.0.saturating_sub(1);
            }
            self.dirty.insert(r);
        }
        Some(old)
    }

    /// Region `r`'s base changed: store it at once when the region holds no longer route (and
    /// none changed in this batch), else re-encode it at `commit`.
    fn settle(&mut self, r: usize) {
        let key = r as u32;
        if self.inner.contains_key(&key) || self.dirty.contains(&key) {
            self.dirty.insert(key);
        } else {
            self.store(r, self.base[r]);
        }
    }

    /// Publish `entry` for region `r` and unlink what the old entry led to.
    fn store(&mut self, r: usize, entry: u32) {
        let old = self.fib.direct[r].swap(entry, Ordering::AcqRel);
        blocks_of(&self.fib, old, &mut self.unlinked);
    }

    /// Re-encode every region changed since the last commit and retire what they replaced.
    /// On an error (the arenas are full) the regions not yet re-encoded keep their old entries
    /// and stay marked; the routes are in the RIB.
    pub fn commit(&mut self) -> Result<(), FibError> {
        self.reclaim();
        let mut result = Ok(());
        while let Some(r) = self.dirty.pop_first() {
            if let Err(e) = self.reencode(r) {
                self.dirty.insert(r);
                result = Err(e);
                break;
            }
        }
        let unlinked = std::mem::take(&mut self.unlinked);
        if !unlinked.is_empty() {
            match &self.domain {
                Some(d) => {
                    let epoch = d.advance();
                    self.retired
                        .extend(unlinked.into_iter().map(|b| (epoch, b)));
                }
                None => unlinked.into_iter().for_each(|b| self.space.free(b)),
            }
        }
        self.publish_usage();
        result
    }

    fn reencode(&mut self, r: u32) -> Result<(), FibError> {
        let start = u128::from(r) << REGION_SHIFT;
        let end = start | ((1u128 << REGION_SHIFT) - 1);
        let routes: Vec<(u128, u8, NextHopId)> = self
            .rib
            .range((start, DIRECT_BITS as u8 + 1)..=(end, 128))
            .map(|(&(p, l), &nh)| (p, l, nh))
            .collect();
        let base = self.base[r as usize];
        let old_iv = self.inner.get(&r).map_or(0, |e| e.1);
        if routes.is_empty() {
            self.inner.remove(&r);
            self.intervals -= old_iv as usize;
            self.store(r as usize, base);
            return Ok(());
        }
        let iv = intervals(start, base, &routes);
        let last = iv.iter().rposition(|x| x.0 <= end).unwrap_or(0);
        let mut enc = Encoder {
            iv: &iv,
            fib: &self.fib,
            space: &mut self.space,
            made: Vec::new(),
        };
        let entry = match enc.encode(start, DIRECT_BITS, 0, last) {
            Ok(e) => e,
            Err(e) => {
                // Nothing reachable leads to what was made: give it back.
                let made = std::mem::take(&mut enc.made);
                made.into_iter().for_each(|b| self.space.free(b));
                return Err(e);
            }
        };
        self.inner
            .insert(r, (routes.len() as u32, (last + 1) as u32));
        self.intervals = self.intervals - old_iv as usize + last + 1;
        self.store(r as usize, entry);
        Ok(())
    }

    fn publish_usage(&self) {
        let u = &self.fib.usage;
        let (ranges, tables, skips) = self.space.tails();
        let (_, free_tables, free_skips) = self.space.free_counts();
        let retired_tables = self
            .retired
            .iter()
            .filter(|(_, b)| matches!(b, Block::Table(_)))
            .count();
        let retired_skips = self
            .retired
            .iter()
            .filter(|(_, b)| matches!(b, Block::Skip(_)))
            .count();
        u.routes.store(self.rib.len(), Ordering::Relaxed);
        u.intervals.store(self.intervals, Ordering::Relaxed);
        u.range_tail.store(ranges, Ordering::Relaxed);
        u.table_tail.store(tables, Ordering::Relaxed);
        u.skip_tail.store(skips, Ordering::Relaxed);
        u.tables_in_use.store(
            tables.saturating_sub(free_tables + retired_tables),
            Ordering::Relaxed,
        );
        u.skips_in_use.store(
            skips.saturating_sub(free_skips + retired_skips),
            Ordering::Relaxed,
        );
    }

    /// Free the retired blocks every worker has moved past; returns how many wait still.
    pub fn reclaim(&mut self) -> usize {
        while let Some(&(epoch, block)) = self.retired.front() {
            if !self.domain.as_ref().is_none_or(|d| d.is_safe(epoch)) {
                break;
            }
            self.retired.pop_front();
            self.space.free(block);
        }
        self.retired.len()
    }

    /// Blocks waiting for a grace period.
    pub fn retired_blocks(&self) -> usize {
        self.retired.len()
    }

    /// Bytes the writer keeps beside the table (RIB, per-region paint, region index).
    pub fn memory_bytes(&self) -> usize {
        // A BTreeMap entry of ((u128, u8), u32): 24 bytes of key and value, about 40 with its
        // share of the node.
        self.rib.len() * 40
            + self.base.len() * std::mem::size_of::<NextHopId>()
            + self.depth.len()
            + self.inner.capacity() * 13
    }
}

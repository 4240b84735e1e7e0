//! `Ip4FibWriter`: the control thread's side of a live IPv4 FIB. Owns the route set (RIB), the
//! prefix length that painted each entry, tbl8 group allocation and the retirement of unlinked
//! groups. A change touches only the entries its prefix covers and that no longer prefix owns;
//! it never rebuilds the table and never makes a reader wait. One writer per table.
//!
//! Adding P/len paints every entry in P's range whose painting length is <= len; deleting P/len
//! repaints the entries it painted with the longest route that covers P (found in the RIB by
//! walking the shorter lengths), or "no route". The first route longer than /24 in a /24 block
//! gets a tbl8 group, filled before tbl24 links it; when the block's last such route goes, tbl24
//! gets the block's single value back and the group is retired at an epoch of the `live` domain,
//! reused only once every worker has moved past that epoch.

use crate::ip4::{Ip4Fib, EXTENDED, GROUP, LOW15, TBL24_LEN};
use crate::{mask4, FibError, NextHopId};
use live::Domain;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The writer of one shared `Ip4Fib`.
pub struct Ip4FibWriter {
    fib: Arc<Ip4Fib>,
    /// Every route: key `len << 32 | prefix` -> next hop.
    rib: HashMap<u64, u16>,
    /// Per tbl24 entry: 1 + the length of the route that painted it (0: none).
    depth24: Vec<u8>,
    /// Per tbl8 entry, the same.
    depth8: Vec<u8>,
    /// Per group: routes longer than /24 in its block.
    group_routes: Vec<u32>,
    free_groups: Vec<u16>,
    /// Unlinked groups and the epoch they were retired at.
    retired_groups: VecDeque<(u64, u16)>,
    /// Groups never used yet start here.
    unused: u16,
    /// None: no reader can run concurrently (a table being built), groups are reused at once.
    domain: Option<Domain>,
}

fn key(prefix: u32, len: u8) -> u64 {
    (u64::from(len) << 32) | u64::from(prefix)
}

fn check(prefix: u32, len: u8, nh: NextHopId, index: usize) -> Result<(u32, u16), FibError> {
    if len > 32 {
        return Err(FibError::PrefixLength {
            index,
            len,
            family: "IPv4",
            max: 32,
        });
    }
    if nh == crate::NO_ROUTE || nh > Ip4Fib::MAX_NEXT_HOP {
        return Err(FibError::NextHop {
            index,
            next_hop: nh,
            family: "IPv4",
            max: Ip4Fib::MAX_NEXT_HOP,
        });
    }
    // nh <= MAX_NEXT_HOP = 0x7fff was checked, so it fits in 15 bits.
    Ok((prefix & mask4(len), nh as u16))
}

impl Ip4FibWriter {
    /// An empty table whose unlinked groups are retired in `domain` (the workers' epochs).
    pub fn new(domain: Domain) -> Result<Ip4FibWriter, FibError> {
        Ip4FibWriter::with_domain(Some(domain))
    }

    fn with_domain(domain: Option<Domain>) -> Result<Ip4FibWriter, FibError> {
        Ok(Ip4FibWriter {
            fib: Arc::new(Ip4Fib::empty()?),
            rib: HashMap::new(),
            // Zeroed allocations: pages are touched only as entries are painted.
            depth24: vec![0; TBL24_LEN],
            depth8: vec![0; Ip4Fib::MAX_TBL8_GROUPS * GROUP],
            group_routes: vec![0; Ip4Fib::MAX_TBL8_GROUPS],
            free_groups: Vec::new(),
            retired_groups: VecDeque::new(),
            unused: 0,
            domain,
        })
    }

    /// A table holding `routes` (as `Ip4Fib::build` takes them), changed later through this
    /// writer. Fails, changing nothing, on the first invalid route.
    pub fn with_routes(
        routes: &[(u32, u8, NextHopId)],
        domain: Domain,
    ) -> Result<Ip4FibWriter, FibError> {
        let mut w = Ip4FibWriter::new(domain)?;
        w.load(routes)?;
        Ok(w)
    }

    /// Build a table nobody reads yet (for `Ip4Fib::build`).
    pub(crate) fn build_table(routes: &[(u32, u8, NextHopId)]) -> Result<Ip4Fib, FibError> {
        let mut w = Ip4FibWriter::with_domain(None)?;
        w.load(routes)?;
        let Ip4FibWriter { fib, .. } = w;
        // The writer held the only reference.
        Arc::try_unwrap(fib).map_err(|_| FibError::Map {
            bytes: 0,
            reason: "internal error: the table being built is shared".into(),
        })
    }

    /// Validate all of `routes` (the last of equal prefixes wins), then add them shortest
    /// prefix first (each entry is painted about once). Nothing changes when one is invalid.
    pub fn load(&mut self, routes: &[(u32, u8, NextHopId)]) -> Result<(), FibError> {
        let mut sorted: Vec<(u64, u32, u16)> = Vec::with_capacity(routes.len());
        for (index, &(prefix, len, nh)) in routes.iter().enumerate() {
            let (prefix, nh) = check(prefix, len, nh, index)?;
            sorted.push((key(prefix, len), index as u32, nh));
        }
        sorted.sort_unstable();
        sorted.dedup_by(|later, earlier| {
            // Keep the later input position of equal keys (sorted by index within a key).
            if later.0 == earlier.0 {
                *earlier = *later;
                true
            } else {
                false
            }
        });
        // Enough tbl8 groups for the blocks that need one, counted before painting anything.
        self.check_groups(sorted.iter().map(|r| (r.0 as u32, (r.0 >> 32) as u8)))?;
        self.rib.reserve(sorted.len());
        for (k, _, nh) in sorted {
            self.insert(k as u32, (k >> 32) as u8, NextHopId::from(nh))?;
        }
        Ok(())
    }

    /// The table the workers read.
    pub fn fib(&self) -> Arc<Ip4Fib> {
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
    pub fn get(&self, prefix: u32, len: u8) -> Option<NextHopId> {
        if len > 32 {
            return None;
        }
        self.rib
            .get(&key(prefix & mask4(len), len))
            .map(|&nh| NextHopId::from(nh))
    }

    /// Every route as (prefix, length, next hop), in no particular order.
    pub fn routes(&self) -> impl Iterator<Item = (u32, u8, NextHopId)> + '_ {
        self.rib
            .iter()
            .map(|(&k, &nh)| (k as u32, (k >> 32) as u8, NextHopId::from(nh)))
    }

    /// tbl8 groups linked now.
    pub fn tbl8_groups(&self) -> usize {
        self.fib.tbl8_groups()
    }

    /// Bytes the writer keeps beside the table (RIB and painting lengths).
    pub fn memory_bytes(&self) -> usize {
        // A hashbrown slot of (u64, u16) is 16 bytes plus one control byte.
        self.rib.capacity() * 17
            + self.depth24.len()
            + usize::from(self.unused) * GROUP
            + self.group_routes.len() * 4
    }

    /// Add `prefix/len` -> `nh`, or change the next hop of that route. Returns the previous next
    /// hop. Host bits beyond `len` are ignored. Fails, changing nothing, when the route is
    /// invalid or needs a tbl8 group and none is free.
    pub fn insert(
        &mut self,
        prefix: u32,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, FibError> {
        let (prefix, nh16) = check(prefix, len, nh, 0)?;
        let depth = len + 1;
        if len <= 24 {
            let start = (prefix >> 8) as usize;
            let span = 1usize << (24 - len);
            let previous = self.rib.insert(key(prefix, len), nh16);
            for slot in start..start + span {
                self.paint_slot(slot, 0..GROUP, nh16, |d| d <= depth, depth);
            }
            self.fib.routes.store(self.rib.len(), Ordering::Relaxed);
            return Ok(previous.map(NextHopId::from));
        }
        let slot = (prefix >> 8) as usize;
        let group = match self.group_of(slot) {
            Some(g) => g,
            None => self.link_group(slot)?,
        };
        let previous = self.rib.insert(key(prefix, len), nh16);
        if previous.is_none() {
            if let Some(n) = self.group_routes.get_mut(usize::from(group)) {
                *n += 1;
            }
        }
        let first = (prefix & 0xff) as usize;
        let span = 1usize << (32 - len);
        self.paint_slot(slot, first..first + span, nh16, |d| d <= depth, depth);
        self.fib.routes.store(self.rib.len(), Ordering::Relaxed);
        Ok(previous.map(NextHopId::from))
    }

    /// Delete `prefix/len`; returns its next hop, or None when there was no such route (nothing
    /// changes then). Its entries take the next hop of the longest route covering it.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<NextHopId> {
        if len > 32 {
            return None;
        }
        let prefix = prefix & mask4(len);
        let old = self.rib.remove(&key(prefix, len))?;
        let (cover_nh, cover_depth) = self.cover(prefix, len);
        let depth = len + 1;
        if len <= 24 {
            let start = (prefix >> 8) as usize;
            for slot in start..start + (1usize << (24 - len)) {
                self.paint_slot(slot, 0..GROUP, cover_nh, |d| d == depth, cover_depth);
            }
        } else {
            let slot = (prefix >> 8) as usize;
            let first = (prefix & 0xff) as usize;
            let span = 1usize << (32 - len);
            self.paint_slot(
                slot,
                first..first + span,
                cover_nh,
                |d| d == depth,
                cover_depth,
            );
            if let Some(group) = self.group_of(slot) {
                let g = usize::from(group);
                if let Some(n) = self.group_routes.get_mut(g) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.unlink_group(slot, group);
                    }
                }
            }
        }
        self.fib.routes.store(self.rib.len(), Ordering::Relaxed);
        Some(NextHopId::from(old))
    }

    /// Whether adding `routes` (prefix, length) could run out of tbl8 groups: fails with
    /// `TooManyTbl8Groups` when the /24 blocks they extend outnumber the groups available.
    /// `insert` of those routes cannot fail for want of a group after this passed.
    pub fn check_groups(&self, routes: impl Iterator<Item = (u32, u8)>) -> Result<(), FibError> {
        let mut blocks: Vec<u32> = routes
            .filter(|&(_, len)| len > 24)
            .map(|(prefix, _)| prefix >> 8)
            .filter(|&block| !self.is_extended(block as usize))
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let available = self.free_groups.len()
            + (Ip4Fib::MAX_TBL8_GROUPS - usize::from(self.unused))
            + self.reclaimable_groups();
        if blocks.len() > available {
            return Err(FibError::TooManyTbl8Groups {
                needed: blocks.len() + self.tbl8_groups(),
                max: Ip4Fib::MAX_TBL8_GROUPS,
            });
        }
        Ok(())
    }

    /// Free the retired groups every worker has moved past; returns how many wait still.
    pub fn reclaim(&mut self) -> usize {
        while let Some(&(epoch, group)) = self.retired_groups.front() {
            let safe = self.domain.as_ref().is_none_or(|d| d.is_safe(epoch));
            if !safe {
                break;
            }
            self.retired_groups.pop_front();
            self.free_groups.push(group);
        }
        self.retired_groups.len()
    }

    fn reclaimable_groups(&self) -> usize {
        self.retired_groups
            .iter()
            .filter(|(e, _)| self.domain.as_ref().is_none_or(|d| d.is_safe(*e)))
            .count()
    }

    /// The next hop and painting depth of the longest route strictly shorter than `len` that
    /// covers `prefix` ((0, 0): none).
    fn cover(&self, prefix: u32, len: u8) -> (u16, u8) {
        (0..len)
            .rev()
            .find_map(|l| {
                self.rib
                    .get(&key(prefix & mask4(l), l))
                    .map(|&nh| (nh, l + 1))
            })
            .unwrap_or((0, 0))
    }

    fn is_extended(&self, slot: usize) -> bool {
        self.group_of(slot).is_some()
    }

    fn group_of(&self, slot: usize) -> Option<u16> {
        let e = self.fib.tbl24.get(slot)?.load(Ordering::Relaxed);
        (e & EXTENDED != 0).then_some(e & LOW15)
    }

    /// Write `nh` (painting depth `depth`) into the entries `within` of tbl24 slot `slot` (all
    /// 256 of them stand for the slot itself when it has no group) whose depth passes `paint`.
    fn paint_slot(
        &mut self,
        slot: usize,
        within: std::ops::Range<usize>,
        nh: u16,
        paint: impl Fn(u8) -> bool,
        depth: u8,
    ) {
        match self.group_of(slot) {
            None => {
                if let (Some(d), Some(e)) = (self.depth24.get_mut(slot), self.fib.tbl24.get(slot)) {
                    if paint(*d) {
                        e.store(nh, Ordering::Release);
                        *d = depth;
                    }
                }
            }
            Some(group) => {
                let base = usize::from(group) * GROUP;
                let range = base + within.start..base + within.end.min(GROUP);
                if let (Some(ds), Some(es)) =
                    (self.depth8.get_mut(range.clone()), self.fib.tbl8.get(range))
                {
                    for (d, e) in ds.iter_mut().zip(es) {
                        if paint(*d) {
                            e.store(nh, Ordering::Release);
                            *d = depth;
                        }
                    }
                }
            }
        }
    }

    /// Give tbl24 slot `slot` a tbl8 group holding its current value everywhere.
    fn link_group(&mut self, slot: usize) -> Result<u16, FibError> {
        self.reclaim();
        let group = match self.free_groups.pop() {
            Some(g) => g,
            None if usize::from(self.unused) < Ip4Fib::MAX_TBL8_GROUPS => {
                self.unused += 1;
                self.unused - 1
            }
            None => {
                return Err(FibError::TooManyTbl8Groups {
                    needed: self.tbl8_groups() + 1,
                    max: Ip4Fib::MAX_TBL8_GROUPS,
                })
            }
        };
        let (value, depth) = match (self.fib.tbl24.get(slot), self.depth24.get(slot)) {
            (Some(e), Some(d)) => (e.load(Ordering::Relaxed), *d),
            _ => (0, 0),
        };
        let base = usize::from(group) * GROUP;
        if let (Some(ds), Some(es)) = (
            self.depth8.get_mut(base..base + GROUP),
            self.fib.tbl8.get(base..base + GROUP),
        ) {
            ds.fill(depth);
            for e in es {
                e.store(value, Ordering::Relaxed);
            }
        }
        if let Some(n) = self.group_routes.get_mut(usize::from(group)) {
            *n = 0;
        }
        // Release: a lookup that sees the link sees the group's contents.
        if let Some(e) = self.fib.tbl24.get(slot) {
            e.store(EXTENDED | group, Ordering::Release);
        }
        self.fib.groups.fetch_add(1, Ordering::Relaxed);
        Ok(group)
    }

    /// Put the block's single value back into tbl24 and retire `group`.
    fn unlink_group(&mut self, slot: usize, group: u16) {
        let base = usize::from(group) * GROUP;
        let value = self
            .fib
            .tbl8
            .get(base)
            .map_or(0, |e| e.load(Ordering::Relaxed));
        let depth = self.depth8.get(base).copied().unwrap_or(0);
        if let (Some(e), Some(d)) = (self.fib.tbl24.get(slot), self.depth24.get_mut(slot)) {
            e.store(value, Ordering::Release);
            *d = depth;
        }
        self.fib.groups.fetch_sub(1, Ordering::Relaxed);
        match &self.domain {
            Some(d) => self.retired_groups.push_back((d.advance(), group)),
            None => self.free_groups.push(group),
        }
    }
}

//! One family's table (`Table`): its entries in a `FixedTable` keyed by (port, address), their
//! adjacency ids (slot and generation), lookups, pins and rows. It never allocates after
//! construction.

use super::*;
use crate::fixed_table::{FixedTable, TableKey};

#[derive(Clone, Copy, Debug)]
pub(super) struct Entry<A> {
    pub(super) ip: A,
    pub(super) port: u16,
    /// Changes whenever the slot is freed, so stale adjacency ids are recognised.
    pub(super) gen: u16,
    pub(super) live: bool,
    pub(super) pinned: bool,
    pub(super) state: NeighbourState,
    /// A lookup used the entry while stale (a probe is due).
    pub(super) used: bool,
    /// Requests sent since the last confirmation.
    pub(super) probes: u8,
    /// Port, MTU and MACs (destination valid unless incomplete).
    pub(super) adj: Adjacency,
    pub(super) created: u64,
    pub(super) confirmed: u64,
    pub(super) last_request: u64,
    pub(super) queue: QueueList,
}

impl<A: Family> Entry<A> {
    pub(super) fn vacant() -> Entry<A> {
        Entry {
            ip: A::default(),
            port: 0,
            gen: 0,
            live: false,
            pinned: false,
            state: NeighbourState::Incomplete,
            used: false,
            probes: 0,
            adj: Adjacency::new(0, 0, [0; 6], [0; 6]),
            created: 0,
            confirmed: 0,
            last_request: 0,
            queue: QueueList::EMPTY,
        }
    }

    #[inline(always)]
    pub(super) fn mac(&self) -> Mac {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.adj.macs[..6]);
        m
    }
}

/// The key of a neighbour: (port, address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) struct Key<A> {
    pub(super) port: u16,
    pub(super) ip: A,
}

impl<A: Family> TableKey for Key<A> {
    #[inline(always)]
    fn table_hash(&self) -> u64 {
        self.ip.hash(self.port)
    }
}

/// The neighbours of one family: a `FixedTable` (stable slots: an entry's slot is in its
/// adjacency id) and the sweep's cursor.
pub(super) struct Table<A> {
    pub(super) map: FixedTable<Key<A>, Entry<A>>,
    pub(super) cursor: usize,
}

impl<A: Family> Table<A> {
    pub(super) fn new(capacity: usize) -> Table<A> {
        Table {
            map: FixedTable::new(
                capacity.clamp(1, MAX_CAPACITY),
                Key::default(),
                Entry::vacant(),
            ),
            cursor: 0,
        }
    }

    /// Entries in use.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every slot's entry (vacant ones have `live` false).
    #[inline(always)]
    pub(super) fn entries(&self) -> &[Entry<A>] {
        self.map.values()
    }

    /// Every slot's entry, mutable.
    #[inline(always)]
    pub(super) fn entries_mut(&mut self) -> &mut [Entry<A>] {
        self.map.values_mut()
    }

    #[inline]
    pub(super) fn find(&self, port: u16, ip: A) -> Option<u16> {
        self.map.find(&Key { port, ip }).map(|s| s as u16)
    }

    /// A new incomplete entry (the key must not exist); None when full.
    pub(super) fn insert(&mut self, port: u16, ip: A, adj: Adjacency, now: u64) -> Option<u16> {
        let s = self.map.insert(Key { port, ip })?;
        let e = self.map.values_mut().get_mut(s as usize)?;
        *e = Entry {
            ip,
            port,
            gen: e.gen,
            live: true,
            created: now,
            adj,
            ..Entry::vacant()
        };
        Some(s as u16)
    }

    /// Delete an entry; returns its queue (the caller frees the buffers).
    pub(super) fn remove(&mut self, s: u16) -> QueueList {
        self.map.remove(u32::from(s));
        match self.map.values_mut().get_mut(s as usize) {
            Some(slot) => {
                let queue = slot.queue;
                *slot = Entry {
                    gen: slot.gen.wrapping_add(1) & 0x7fff,
                    ..Entry::vacant()
                };
                queue
            }
            None => QueueList::EMPTY,
        }
    }

    #[inline(always)]
    pub(super) fn id(&self, s: u16) -> u32 {
        let gen = self.entries().get(s as usize).map_or(0, |e| e.gen);
        NEIGHBOUR_ADJACENCY | (gen as u32 & 0x7fff) << 16 | s as u32
    }

    /// The slot an adjacency id names, if it still names a live entry.
    #[inline(always)]
    pub(super) fn slot_of(&self, id: u32) -> Option<u16> {
        if id & NEIGHBOUR_ADJACENCY == 0 {
            return None;
        }
        let s = (id & 0xffff) as usize;
        let e = self.entries().get(s)?;
        (e.live && e.gen as u32 == (id >> 16) & 0x7fff).then_some(s as u16)
    }
}

#[inline]
pub(super) fn lookup<A: Family>(
    t: &mut Table<A>,
    ticks: &Ticks,
    port: u16,
    ip: A,
    now: u64,
) -> Option<u32> {
    let s = t.find(port, ip)?;
    let e = t.entries_mut().get_mut(s as usize)?;
    usable(e, ticks, now).then(|| t.id(s))
}

#[inline]
pub(super) fn adjacency<A: Family>(
    t: &mut Table<A>,
    ticks: &Ticks,
    id: u32,
    now: u64,
) -> Option<Adjacency> {
    let s = t.slot_of(id)?;
    let e = t.entries_mut().get_mut(s as usize)?;
    usable(e, ticks, now).then_some(e.adj)
}

pub(super) fn pin<A: Family>(t: &mut Table<A>, core: &Core, port: u16, ip: A) -> Option<u32> {
    let p = core.ports.get(port as usize).filter(|p| !p.removed)?;
    let s = match t.find(port, ip) {
        Some(s) => s,
        None => t.insert(port, ip, Adjacency::new(port, p.mtu, [0; 6], p.mac), 0)?,
    };
    t.entries_mut().get_mut(s as usize)?.pinned = true;
    Some(t.id(s))
}

pub(super) fn unpin<A: Family>(t: &mut Table<A>, id: u32) {
    if let Some(s) = t.slot_of(id) {
        if let Some(e) = t.entries_mut().get_mut(s as usize) {
            e.pinned = false;
        }
    }
}

/// Append the live entries of `t` to `rows`, never beyond its capacity (no allocation).
pub(super) fn push_rows<A: Family>(
    t: &Table<A>,
    rows: &mut Vec<NeighbourRow>,
    now: u64,
    ticks: &Ticks,
) {
    let hz = ticks.hz;
    for e in t.entries().iter().filter(|e| e.live) {
        if rows.len() == rows.capacity() {
            return;
        }
        let incomplete = e.state == NeighbourState::Incomplete;
        let since = if incomplete { e.created } else { e.confirmed };
        let mut state = e.state;
        if state == NeighbourState::Reachable && now.wrapping_sub(e.confirmed) >= ticks.reachable {
            state = NeighbourState::Stale;
        }
        rows.push(NeighbourRow {
            port: e.port,
            ip: e.ip.ip(),
            mac: (!incomplete).then(|| e.mac()),
            state,
            age_ms: (now.wrapping_sub(since) as u128 * 1000 / hz.max(1) as u128) as u64,
            pinned: e.pinned,
            queued: e.queue.len,
        });
    }
}

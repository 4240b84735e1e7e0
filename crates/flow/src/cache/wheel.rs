//! The aging timer wheel of the megaflow cache: every megaflow sits in the slot of the tick when
//! it could first be idle long enough, in an intrusive doubly linked list by megaflow id. Owns only
//! the links; never decides expiry (the megaflow cache checks the last-used time) and never
//! allocates after construction.
//!
//! A hit never touches the wheel (it only writes the megaflow's last-used time). When a slot
//! comes due, each of its megaflows is either idle (expired by the caller) or rescheduled to
//! `last_used + timeout`: work is proportional to the megaflows that reach their deadline, not
//! to all megaflows. 512 slots span at least twice the idle timeout; a megaflow scheduled
//! further ahead (the timeout was raised, or maintenance lagged) is merely checked early.

/// No megaflow / not scheduled.
pub(crate) const NIL: u32 = u32::MAX;

const SLOTS: usize = 512;

/// One megaflow's place on the wheel; kept together so linking or unlinking a megaflow touches
/// one cache line of it (not one per array).
#[derive(Clone, Copy)]
struct Link {
    next: u32,
    prev: u32,
    slot: u32,
}

const UNLINKED: Link = Link {
    next: NIL,
    prev: NIL,
    slot: NIL,
};

pub(crate) struct TimerWheel {
    heads: Vec<u32>,
    links: Vec<Link>,
    gran_ms: u64,
    /// Next tick to process.
    cursor: u64,
}

impl TimerWheel {
    /// A wheel for ids `0..capacity`, ticks sized for `timeout_ms`.
    pub(crate) fn new(capacity: usize, timeout_ms: u64) -> TimerWheel {
        TimerWheel {
            heads: vec![NIL; SLOTS],
            links: vec![UNLINKED; capacity],
            gran_ms: (timeout_ms.saturating_mul(2)).div_ceil(SLOTS as u64).max(1),
            cursor: 0,
        }
    }

    /// Put `id` (not scheduled) in the slot of `due_ms` (at least one tick after the cursor).
    pub(crate) fn schedule(&mut self, id: u32, due_ms: u64) {
        let i = id as usize;
        let Some(link) = self.links.get(i) else {
            return;
        };
        if link.slot != NIL {
            self.cancel(id);
        }
        let tick = due_ms.div_ceil(self.gran_ms).max(self.cursor + 1);
        let s = (tick % SLOTS as u64) as usize;
        let head = self.heads[s];
        self.links[i] = Link {
            next: head,
            prev: NIL,
            slot: s as u32,
        };
        if head != NIL {
            self.links[head as usize].prev = id;
        }
        self.heads[s] = id;
    }

    /// Start loading `id`'s links (a hint).
    #[inline]
    pub(crate) fn prefetch(&self, id: u32) {
        if let Some(l) = self.links.get(id as usize) {
            super::megaflow::prefetch(l);
        }
    }

    /// Take `id` out of its slot (nothing when it is not scheduled).
    pub(crate) fn cancel(&mut self, id: u32) {
        let i = id as usize;
        let Some(&Link { next, prev, slot }) = self.links.get(i) else {
            return;
        };
        if slot == NIL {
            return;
        }
        if prev == NIL {
            self.heads[slot as usize] = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next != NIL {
            self.links[next as usize].prev = prev;
        }
        self.links[i] = UNLINKED;
    }

    /// A megaflow whose slot is due at `now_ms` (the caller must expire or reschedule it before
    /// asking again), advancing over empty slots (at most one lap a call; they are cheap, not
    /// counted); nothing once `work` has reached `budget`.
    pub(crate) fn next_due(&mut self, now_ms: u64, work: &mut usize, budget: usize) -> Option<u32> {
        let now = now_ms / self.gran_ms;
        // After a long pause, one lap of the wheel still visits every slot.
        if now >= self.cursor + SLOTS as u64 {
            self.cursor = now + 1 - SLOTS as u64;
        }
        let mut empty = 0;
        while self.cursor <= now && *work < budget && empty < SLOTS {
            let head = self.heads[(self.cursor % SLOTS as u64) as usize];
            if head != NIL {
                return Some(head);
            }
            empty += 1;
            self.cursor += 1;
        }
        None
    }

    /// Up to `out.len()` scheduled ids, the soonest due first (eviction candidates), scanning at
    /// most `max_slots` slots; returns how many were written.
    pub(crate) fn soonest(&self, out: &mut [u32], max_slots: usize) -> usize {
        let mut n = 0;
        for t in 0..max_slots.min(SLOTS) as u64 {
            let mut id = self.heads[((self.cursor + t) % SLOTS as u64) as usize];
            while id != NIL {
                if n == out.len() {
                    return n;
                }
                out[n] = id;
                n += 1;
                id = self.links[id as usize].next;
            }
        }
        n
    }

    /// Forget everything (after a flush).
    pub(crate) fn clear(&mut self) {
        self.heads.fill(NIL);
        self.links.fill(UNLINKED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_slots_come_out_in_order_and_cancel_unlinks() {
        let mut w = TimerWheel::new(8, 10_000); // 40 ms ticks
        w.schedule(1, 1000);
        w.schedule(2, 2000);
        w.schedule(3, 1000);
        w.cancel(3);
        let mut work = 0;
        assert_eq!(w.next_due(999, &mut work, 1000), None);
        work = 0;
        assert_eq!(w.next_due(1000, &mut work, 1000), Some(1));
        w.cancel(1);
        assert_eq!(w.next_due(1000, &mut work, 1000), None);
        let mut c = [0u32; 4];
        assert_eq!(w.soonest(&mut c, 512), 1);
        assert_eq!(c[0], 2);
        work = 0;
        assert_eq!(w.next_due(1_000_000, &mut work, 10_000), Some(2));
    }
}

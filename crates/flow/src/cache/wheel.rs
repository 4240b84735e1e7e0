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
    /// One bit per slot, set while its list is not empty: `soonest` skips empty slots a word at
    /// a time (under churn faster than the timeout, every eviction and every install's
    /// prefetch asked for the soonest and scanned 64 empty heads: ~7% of a miss).
    occupied: [u64; SLOTS / 64],
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
            occupied: [0; SLOTS / 64],
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
        self.occupied[s / 64] |= 1 << (s % 64);
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
            let s = slot as usize;
            self.heads[s] = next;
            if next == NIL {
                self.occupied[s / 64] &= !(1 << (s % 64));
            }
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
        let span = max_slots.min(SLOTS);
        let mut t = 0;
        while t < span {
            let s = self.slot_after_cursor(t);
            // The occupied slots from `s` to the end of its word.
            let bits = self.occupied[s / 64] >> (s % 64);
            if bits == 0 {
                t += 64 - s % 64;
                continue;
            }
            t += bits.trailing_zeros() as usize;
            if t >= span {
                break;
            }
            if !self.collect_slot(self.slot_after_cursor(t), out, &mut n) {
                break;
            }
            t += 1;
        }
        n
    }

    /// The slot `t` ticks after the cursor.
    #[inline]
    fn slot_after_cursor(&self, t: usize) -> usize {
        ((self.cursor + t as u64) % SLOTS as u64) as usize
    }

    /// Append slot `s`'s ids to `out` from `*n` on; false when `out` filled up first.
    fn collect_slot(&self, s: usize, out: &mut [u32], n: &mut usize) -> bool {
        let mut id = self.heads[s];
        while id != NIL {
            let Some(o) = out.get_mut(*n) else {
                return false;
            };
            *o = id;
            *n += 1;
            id = self.links[id as usize].next;
        }
        true
    }

    /// Forget everything (after a flush).
    pub(crate) fn clear(&mut self) {
        self.heads.fill(NIL);
        self.occupied = [0; SLOTS / 64];
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

    /// The soonest ids as a scan of every head would give them (the wheel before its bitmap).
    fn soonest_by_scan(w: &TimerWheel, out: &mut [u32], max_slots: usize) -> usize {
        let mut n = 0;
        for t in 0..max_slots.min(SLOTS) {
            if !w.collect_slot(w.slot_after_cursor(t), out, &mut n) {
                break;
            }
        }
        n
    }

    #[test]
    fn soonest_skips_empty_slots_and_finds_what_a_scan_finds() {
        let mut w = TimerWheel::new(64, 10_000); // 40 ms ticks
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut now = 0u64;
        for step in 0..5_000 {
            let id = rnd(64) as u32;
            match rnd(4) {
                0 | 1 => w.schedule(id, now + rnd(25_000)),
                2 => w.cancel(id),
                _ => {
                    now += rnd(200);
                    let mut work = 0;
                    while let Some(due) = w.next_due(now, &mut work, 8) {
                        w.cancel(due);
                        work += 1;
                    }
                }
            }
            for (len, span) in [(1, 64), (8, 64), (8, 3), (64, 512), (3, 130)] {
                let (mut a, mut b) = (vec![NIL; len], vec![NIL; len]);
                let n = w.soonest(&mut a, span);
                assert_eq!(n, soonest_by_scan(&w, &mut b, span), "step {step}");
                assert_eq!(a, b, "step {step}, {len} from {span} slots");
            }
        }
        w.clear();
        assert_eq!(w.soonest(&mut [NIL; 4], 512), 0);
        assert_eq!(w.occupied, [0; SLOTS / 64]);
    }
}

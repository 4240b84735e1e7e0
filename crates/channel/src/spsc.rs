//! The bounded single-producer single-consumer ring: slots allocated once and reused in place,
//! two indices on their own cache lines. It never allocates after [`ring`], never locks, never
//! waits: a full ring refuses a push, an empty one a pop. It knows nothing of what a slot holds.
//!
//! Protocol: `head` counts pushes (written only by the producer), `tail` counts pops (written
//! only by the consumer); both wrap. Slot `i % capacity` belongs to the producer while
//! `head - tail < capacity` says it is free, and to the consumer while `tail < head` says it is
//! filled. The producer fills a slot, then publishes `head + 1` with Release; the consumer
//! loads `head` with Acquire before it reads the slot, then publishes `tail + 1` with Release;
//! the producer loads `tail` with Acquire before it writes a slot again. So every write of a
//! slot happens before the reads of the same round, and every read before the next round's
//! writes. Each side keeps the other's index cached and reloads it only when the cached value
//! says full (producer) or empty (consumer).

#[cfg(loom)]
use loom::sync::Arc;
#[cfg(not(loom))]
use std::sync::Arc;

use crate::{AtomicUsize, Ordering};

/// One index on a cache line of its own (the producer's and the consumer's never share one).
#[repr(align(64))]
struct Line(AtomicUsize);

/// A slot: `UnsafeCell` (loom's under the model checker, which then checks every access).
struct Slot<T>(
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
);

#[cfg(not(loom))]
impl<T> Slot<T> {
    fn new(value: T) -> Slot<T> {
        Slot(std::cell::UnsafeCell::new(value))
    }

    /// # Safety
    /// The caller owns the slot now (see the module's protocol): no other access is live.
    #[inline(always)]
    unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: exclusive by the caller's contract.
        f(unsafe { &mut *self.0.get() })
    }
}

#[cfg(loom)]
impl<T> Slot<T> {
    fn new(value: T) -> Slot<T> {
        Slot(loom::cell::UnsafeCell::new(value))
    }

    /// # Safety
    /// The caller owns the slot now (see the module's protocol): no other access is live.
    unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: exclusive by the caller's contract (loom checks it).
        self.0.with_mut(|p| f(unsafe { &mut *p }))
    }
}

struct Shared<T> {
    head: Line,
    tail: Line,
    mask: usize,
    slots: Box<[Slot<T>]>,
}

// SAFETY: a slot is reached only by the one `Producer` while it is free and the one `Consumer`
// while it is filled (the module's protocol); the indices are atomics. `T: Send` because a
// slot's value is written on one thread and read on the other.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above; the slots are owned data.
unsafe impl<T: Send> Send for Shared<T> {}

/// A ring of `slots` slots (rounded up to a power of two, at least 1), each made once by
/// `make`: its two halves.
pub fn ring<T: Send>(slots: usize, mut make: impl FnMut() -> T) -> (Producer<T>, Consumer<T>) {
    let capacity = slots.max(1).next_power_of_two();
    let shared = Arc::new(Shared {
        head: Line(AtomicUsize::new(0)),
        tail: Line(AtomicUsize::new(0)),
        mask: capacity - 1,
        slots: (0..capacity).map(|_| Slot::new(make())).collect(),
    });
    (
        Producer {
            shared: shared.clone(),
            head: 0,
            tail_cache: 0,
        },
        Consumer {
            shared,
            tail: 0,
            head_cache: 0,
        },
    )
}

/// The pushing half (not `Clone`, not `Sync`: one thread pushes).
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Pushes so far (the shared `head`, which only this side writes).
    head: usize,
    /// The consumer's `tail` as last seen.
    tail_cache: usize,
}

impl<T> Producer<T> {
    /// Slots in the ring.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// True when a push would succeed now (a refused push stays refused until the consumer
    /// pops; an accepted one stays accepted, since only this side fills slots).
    #[inline]
    pub fn has_room(&mut self) -> bool {
        if self.head.wrapping_sub(self.tail_cache) < self.capacity() {
            return true;
        }
        self.tail_cache = self.shared.tail.0.load(Ordering::Acquire);
        self.head.wrapping_sub(self.tail_cache) < self.capacity()
    }

    /// Fill the next free slot in place with `fill` and publish it; false (and `fill` not
    /// called) when the ring is full. The slot holds whatever its last round left there.
    #[inline]
    pub fn try_push(&mut self, fill: impl FnOnce(&mut T)) -> bool {
        if !self.has_room() {
            return false;
        }
        let head = self.head;
        // SAFETY: `head - tail < capacity`, with `tail` loaded with Acquire: the consumer
        // released this slot (or never had it), and only this producer writes slots.
        unsafe { self.shared.slots[head & self.shared.mask].with_mut(fill) };
        self.head = head.wrapping_add(1);
        self.shared.head.0.store(self.head, Ordering::Release);
        true
    }

    /// Items waiting (a snapshot: the consumer may be popping).
    pub fn len(&self) -> usize {
        self.head
            .wrapping_sub(self.shared.tail.0.load(Ordering::Acquire))
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The popping half (not `Clone`, not `Sync`: one thread pops).
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Pops so far (the shared `tail`, which only this side writes).
    tail: usize,
    /// The producer's `head` as last seen.
    head_cache: usize,
}

impl<T> Consumer<T> {
    /// Slots in the ring.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Hand the oldest item to `read` (in place: it may take what it wants from the slot)
    /// and free its slot; None when the ring is empty.
    #[inline]
    pub fn pop<R>(&mut self, read: impl FnOnce(&mut T) -> R) -> Option<R> {
        if self.tail == self.head_cache {
            self.head_cache = self.shared.head.0.load(Ordering::Acquire);
            if self.tail == self.head_cache {
                return None;
            }
        }
        let tail = self.tail;
        // SAFETY: `tail < head`, with `head` loaded with Acquire: the producer filled and
        // published this slot and will not write it again until `tail` moves past it.
        let r = unsafe { self.shared.slots[tail & self.shared.mask].with_mut(read) };
        self.tail = tail.wrapping_add(1);
        self.shared.tail.0.store(self.tail, Ordering::Release);
        Some(r)
    }

    /// True when nothing waits (reads the producer's index: for a last look before sleeping).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.shared.head.0.load(Ordering::Acquire) == self.tail
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.shared
            .head
            .0
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn refuses_when_full_and_keeps_order_across_wraparound() {
        let (mut p, mut c) = ring(3, || 0u64);
        assert_eq!(p.capacity(), 4, "rounded up to a power of two");
        assert_eq!(c.pop(|v| *v), None, "empty");
        let mut next = 0u64;
        let mut expect = 0u64;
        // Many rounds through 4 slots: the indices wrap the slots many times over.
        for round in 0..100 {
            let n = 1 + round % 4;
            for _ in 0..n {
                assert!(p.try_push(|v| *v = next));
                next += 1;
            }
            if n == 4 {
                assert!(!p.has_room());
                assert!(!p.try_push(|_| unreachable!("a full ring calls no fill")));
                assert_eq!(p.len(), 4);
            }
            while let Some(v) = c.pop(|v| *v) {
                assert_eq!(v, expect, "FIFO");
                expect += 1;
            }
            assert!(c.is_empty());
        }
        assert_eq!(expect, next);
    }

    #[test]
    fn indices_wrap_around_usize() {
        let (mut p, mut c) = ring(2, || 0u8);
        // Start both sides just below the wrap of the index type.
        let start = usize::MAX - 2;
        p.head = start;
        p.tail_cache = start;
        c.tail = start;
        c.head_cache = start;
        p.shared.head.0.store(start, Ordering::Relaxed);
        p.shared.tail.0.store(start, Ordering::Relaxed);
        for i in 0..10u8 {
            assert!(p.try_push(|v| *v = i));
            assert!(p.try_push(|v| *v = i + 100));
            assert!(!p.try_push(|_| {}), "full at the wrap too");
            assert_eq!(c.pop(|v| *v), Some(i));
            assert_eq!(c.pop(|v| *v), Some(i + 100));
            assert_eq!(c.pop(|v| *v), None);
        }
    }

    #[test]
    fn threads_see_every_item_once_in_order() {
        let (mut p, mut c) = ring(8, || [0u64; 4]);
        const N: u64 = 200_000;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                if p.try_push(|s| *s = [i, i * 3, i * 5, !i]) {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut want = 0;
        while want < N {
            if let Some(s) = c.pop(|s| *s) {
                assert_eq!(s, [want, want * 3, want * 5, !want], "no torn slot");
                want += 1;
            } else {
                std::hint::spin_loop();
            }
        }
        t.join().expect("producer");
    }
}

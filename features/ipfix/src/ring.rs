//! A bounded single-producer single-consumer ring: how flow records leave a worker for the
//! exporter thread. Preallocated at creation; `push` never allocates, locks, waits or makes a
//! system call, and refuses (the caller counts the drop) when the ring is full. It owns only
//! the slots and the two positions, never what the values mean.
//!
//! # Protocol
//! `tail` (written by the producer only) counts values pushed, `head` (consumer only) values
//! popped; both only grow (wrapping), and slot `i % capacity` belongs to the producer while
//! `tail - head < capacity` says it is free, to the consumer between the producer's Release
//! store of `tail` past it and the consumer's Release store of `head` past it. Each side keeps
//! a cached copy of the other's position and reloads it (Acquire) only when the cache says
//! full (producer) or empty (consumer). Model-checked with loom (`tests/loom.rs`, run with
//! `RUSTFLAGS="--cfg loom"`).
//!
//! The lead's punt ring (issue 33 item 3) is the same shape; the two can merge.

#[cfg(loom)]
use loom::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};
#[cfg(not(loom))]
use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};

/// A slot: `std`'s `UnsafeCell` normally, loom's tracked one when model-checked.
#[cfg(not(loom))]
struct Slot<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T: Copy> Slot<T> {
    fn new(v: T) -> Slot<T> {
        Slot(std::cell::UnsafeCell::new(v))
    }

    /// Write the value.
    ///
    /// # Safety
    /// The caller owns the slot (see the module's protocol): nobody reads or writes it now.
    unsafe fn write(&self, v: T) {
        // SAFETY: forwarded from the caller.
        unsafe { *self.0.get() = v }
    }

    /// Read the value.
    ///
    /// # Safety
    /// The caller owns the slot: nobody writes it now.
    unsafe fn read(&self) -> T {
        // SAFETY: forwarded from the caller.
        unsafe { *self.0.get() }
    }
}

/// A slot whose accesses loom tracks.
#[cfg(loom)]
struct Slot<T>(loom::cell::UnsafeCell<T>);

#[cfg(loom)]
impl<T: Copy> Slot<T> {
    fn new(v: T) -> Slot<T> {
        Slot(loom::cell::UnsafeCell::new(v))
    }

    /// As the `std` version.
    unsafe fn write(&self, v: T) {
        // SAFETY: forwarded from the caller; loom checks it.
        self.0.with_mut(|p| unsafe { *p = v })
    }

    /// As the `std` version.
    unsafe fn read(&self) -> T {
        // SAFETY: forwarded from the caller; loom checks it.
        self.0.with(|p| unsafe { *p })
    }
}

/// Keeps a position on its own cache line (the producer's and the consumer's do not share).
#[repr(align(64))]
struct Padded<T>(T);

struct Shared<T> {
    slots: Box<[Slot<T>]>,
    mask: usize,
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    producer_gone: AtomicBool,
}

// SAFETY: a slot is accessed by one side at a time, handed over through the Release/Acquire
// pairs on `head` and `tail` (module protocol); values are `Send`.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Shared<T> {}

/// The writing end (one worker).
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    tail: usize,
    cached_head: usize,
}

/// The reading end (the exporter thread).
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    head: usize,
    cached_tail: usize,
}

/// A ring of `capacity` values (rounded up to a power of two, at least 2), every slot
/// filled with `fill` now so nothing is allocated later.
pub fn ring<T: Copy + Send>(capacity: usize, fill: T) -> (Producer<T>, Consumer<T>) {
    let capacity = capacity.max(2).next_power_of_two();
    let slots: Box<[Slot<T>]> = (0..capacity).map(|_| Slot::new(fill)).collect();
    let shared = Arc::new(Shared {
        slots,
        mask: capacity - 1,
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
        producer_gone: AtomicBool::new(false),
    });
    (
        Producer {
            shared: shared.clone(),
            tail: 0,
            cached_head: 0,
        },
        Consumer {
            shared,
            head: 0,
            cached_tail: 0,
        },
    )
}

impl<T: Copy + Send> Producer<T> {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Append `v`; `Err(v)` when the ring is full (the consumer is behind).
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), T> {
        if self.tail.wrapping_sub(self.cached_head) > self.shared.mask {
            self.cached_head = self.shared.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) > self.shared.mask {
                return Err(v);
            }
        }
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY: `tail - head < capacity`, so this slot is free: the consumer released it
        // (its store of `head` past it, which our Acquire load saw) and will not read it
        // before our Release store of `tail` below.
        unsafe { slot.write(v) };
        self.tail = self.tail.wrapping_add(1);
        self.shared.tail.0.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// True when `push` would refuse now (reloads the consumer's position).
    pub fn is_full(&mut self) -> bool {
        self.cached_head = self.shared.head.0.load(Ordering::Acquire);
        self.tail.wrapping_sub(self.cached_head) > self.shared.mask
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.shared.producer_gone.store(true, Ordering::Release);
    }
}

impl<T: Copy + Send> Consumer<T> {
    /// Take the oldest value.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.cached_tail {
            self.cached_tail = self.shared.tail.0.load(Ordering::Acquire);
            if self.head == self.cached_tail {
                return None;
            }
        }
        let slot = &self.shared.slots[self.head & self.shared.mask];
        // SAFETY: `head != tail`: the producer wrote this slot before its Release store of
        // `tail` (which our Acquire load saw) and will not write it again before our Release
        // store of `head` past it.
        let v = unsafe { slot.read() };
        self.head = self.head.wrapping_add(1);
        self.shared.head.0.store(self.head, Ordering::Release);
        Some(v)
    }

    /// Move up to `max` values into `out`; how many.
    pub fn drain_into(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.pop() {
                Some(v) => {
                    out.push(v);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// True once the producer is dropped and everything it pushed was taken.
    pub fn is_finished(&mut self) -> bool {
        self.shared.producer_gone.load(Ordering::Acquire)
            && self.shared.tail.0.load(Ordering::Acquire) == self.head
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn full_refuses_and_counts_nothing_else() {
        let (mut p, mut c) = ring(3, 0u32); // rounded up to 4
        assert_eq!(p.capacity(), 4);
        for i in 0..4 {
            assert_eq!(p.push(i), Ok(()));
        }
        assert!(p.is_full());
        assert_eq!(p.push(9), Err(9));
        assert_eq!(c.pop(), Some(0));
        assert_eq!(p.push(4), Ok(()));
        let mut out = Vec::new();
        assert_eq!(c.drain_into(&mut out, 10), 4);
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn positions_wrap_around_many_times() {
        let (mut p, mut c) = ring(4, 0u64);
        let mut next = 0u64;
        for round in 0..1000u64 {
            let n = round % 5;
            let mut pushed = 0;
            for _ in 0..n {
                if p.push(next + pushed).is_ok() {
                    pushed += 1;
                }
            }
            for _ in 0..pushed {
                assert_eq!(c.pop(), Some(next));
                next += 1;
            }
            assert_eq!(c.pop(), None);
        }
        assert!(next > 1000);
    }

    #[test]
    fn positions_wrap_past_usize_max() {
        let (mut p, mut c) = ring(2, 0u8);
        // Start both sides just below the wrap point.
        let start = usize::MAX - 2;
        p.tail = start;
        p.cached_head = start;
        c.head = start;
        c.cached_tail = start;
        p.shared.head.0.store(start, Ordering::Relaxed);
        p.shared.tail.0.store(start, Ordering::Relaxed);
        for i in 0..10u8 {
            assert_eq!(p.push(i), Ok(()));
            assert_eq!(p.push(i + 100), Ok(()));
            assert_eq!(p.push(0), Err(0));
            assert_eq!(c.pop(), Some(i));
            assert_eq!(c.pop(), Some(i + 100));
        }
    }

    #[test]
    fn a_thread_pair_sees_every_value_in_order() {
        let (mut p, mut c) = ring(64, 0u64);
        let n = 200_000u64;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < n {
                if p.push(i).is_ok() {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut want = 0;
        while want < n {
            if let Some(v) = c.pop() {
                assert_eq!(v, want);
                want += 1;
            }
        }
        t.join().expect("producer");
        assert!(c.is_finished());
    }
}

//! The AF_XDP single-producer/single-consumer rings, seen from user space: a producer ring
//! (fill, tx) that we write and the kernel reads, and a consumer ring (rx, completion) that the
//! kernel writes and we read. Indices are free-running u32s; the kernel side uses
//! smp_load_acquire/smp_store_release, so we load the other side's index with Acquire and publish
//! ours with Release. Entries are copied in and out with volatile accesses (the memory is shared
//! with the kernel). Local copies of both indices keep the shared cache lines cold.

use super::xsk::RingOffset;
use super::Mmap;
use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

/// `XDP_RING_NEED_WAKEUP` in a ring's flags word.
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// Bytes to map for a ring of `entries` entries of `T` whose descriptors start at `off.desc`.
pub(crate) fn ring_bytes<T>(off: &RingOffset, entries: u32) -> usize {
    off.desc as usize + entries as usize * std::mem::size_of::<T>()
}

/// Pointers into one mapped ring, checked against the mapping once.
struct RingPtrs<T> {
    map: Arc<Mmap>,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    size: u32,
    _t: PhantomData<T>,
}

// SAFETY: the pointers point into `map`, which this value keeps alive through the `Arc`; the
// ring is only used through its single owner (`&mut self`), so moving it to another thread is
// moving that ownership. `T` is a plain descriptor type.
unsafe impl<T: Send> Send for RingPtrs<T> {}

impl<T> RingPtrs<T> {
    fn new(map: Arc<Mmap>, off: &RingOffset, size: u32) -> io::Result<RingPtrs<T>> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("kernel ring offsets do not fit the mapping ({what})"),
            )
        };
        if size == 0 || !size.is_power_of_two() {
            return Err(bad("size"));
        }
        let len = map.len();
        let word = |o: u64, what: &str| -> io::Result<NonNull<AtomicU32>> {
            let o = o as usize;
            if o % 4 != 0 || o.checked_add(4).is_none_or(|end| end > len) {
                return Err(bad(what));
            }
            // SAFETY: `o + 4 <= len`, so the pointer stays inside the mapping; it is 4-aligned
            // because the mapping is page-aligned and `o` is a multiple of 4.
            NonNull::new(unsafe { map.ptr().add(o) } as *mut AtomicU32).ok_or_else(|| bad(what))
        };
        let producer = word(off.producer, "producer")?;
        let consumer = word(off.consumer, "consumer")?;
        let flags = word(off.flags, "flags")?;
        let d = off.desc as usize;
        if d % std::mem::align_of::<T>() != 0 || ring_bytes::<T>(off, size) > len {
            return Err(bad("descriptors"));
        }
        // SAFETY: `d + size * size_of::<T>() <= len` (checked above), aligned for T.
        let descs = NonNull::new(unsafe { map.ptr().add(d) } as *mut T)
            .ok_or_else(|| bad("descriptors"))?;
        Ok(RingPtrs {
            map,
            producer,
            consumer,
            flags,
            descs,
            mask: size - 1,
            size,
            _t: PhantomData,
        })
    }

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: checked in `new` to lie inside the live mapping, aligned; the kernel accesses
        // it only atomically (READ_ONCE/WRITE_ONCE/acquire/release).
        unsafe { self.producer.as_ref() }
    }

    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline(always)]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }
    }

    #[inline(always)]
    fn needs_wakeup(&self) -> bool {
        // Order our index publication before reading the kernel's flag, so a wake-up the kernel
        // asks for right after it went idle is not missed.
        fence(Ordering::SeqCst);
        self.flags().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }
}

/// A ring we produce into (fill: UMEM addresses; tx: descriptors).
pub(crate) struct ProdRing<T> {
    r: RingPtrs<T>,
    cached_prod: u32,
    /// Kernel consumer index plus ring size: `cached_cons - cached_prod` is the free room.
    cached_cons: u32,
}

impl<T: Copy> ProdRing<T> {
    /// A producer view of the ring described by `off` inside `map`.
    pub(crate) fn new(map: Arc<Mmap>, off: &RingOffset, size: u32) -> io::Result<ProdRing<T>> {
        let r = RingPtrs::new(map, off, size)?;
        let cached_prod = r.producer().load(Ordering::Relaxed);
        let cached_cons = r.consumer().load(Ordering::Acquire).wrapping_add(size);
        Ok(ProdRing {
            r,
            cached_prod,
            cached_cons,
        })
    }

    /// Number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.r.size
    }

    /// Free room, refreshed from the kernel when the cached view shows less than `want`.
    #[inline]
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self
            .r
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.r.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Write up to `n` entries, entry `i` being `entry(i)`, and publish them; returns how many
    /// fit (all of them unless the ring is full).
    #[inline]
    pub(crate) fn produce(&mut self, n: u32, mut entry: impl FnMut(u32) -> T) -> u32 {
        let n = n.min(self.free(n));
        for i in 0..n {
            let slot = (self.cached_prod.wrapping_add(i) & self.r.mask) as usize;
            // SAFETY: `slot <= mask < size`, inside the descriptor array checked in `new`; the
            // kernel does not read this entry before the Release store below publishes it.
            unsafe { self.r.descs.as_ptr().add(slot).write_volatile(entry(i)) };
        }
        if n > 0 {
            self.cached_prod = self.cached_prod.wrapping_add(n);
            self.r.producer().store(self.cached_prod, Ordering::Release);
        }
        n
    }

    /// True when the kernel asks for a syscall to make progress on this ring.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.r.needs_wakeup()
    }

    /// A read-only watcher of this ring's occupancy and wake-up flag (for the other half of a
    /// port, which kicks leftovers).
    pub(crate) fn watch(&self) -> RingWatch {
        RingWatch {
            _map: self.r.map.clone(),
            producer: self.r.producer,
            consumer: self.r.consumer,
            flags: self.r.flags,
        }
    }
}

/// A ring we consume from (rx: descriptors; completion: UMEM addresses).
pub(crate) struct ConsRing<T> {
    r: RingPtrs<T>,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> ConsRing<T> {
    /// A consumer view of the ring described by `off` inside `map`.
    pub(crate) fn new(map: Arc<Mmap>, off: &RingOffset, size: u32) -> io::Result<ConsRing<T>> {
        let r = RingPtrs::new(map, off, size)?;
        let cached_prod = r.producer().load(Ordering::Acquire);
        let cached_cons = r.consumer().load(Ordering::Relaxed);
        Ok(ConsRing {
            r,
            cached_prod,
            cached_cons,
        })
    }

    /// Number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.r.size
    }

    /// Take up to `max` entries, handing each to `take`, and release them to the kernel;
    /// returns how many were taken.
    #[inline]
    pub(crate) fn consume(&mut self, max: u32, mut take: impl FnMut(T)) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < max {
            self.cached_prod = self.r.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        let n = avail.min(max).min(self.r.size);
        for i in 0..n {
            let slot = (self.cached_cons.wrapping_add(i) & self.r.mask) as usize;
            // SAFETY: `slot < size`, inside the descriptor array; the kernel published this
            // entry before its producer index (read with Acquire) and does not reuse it until
            // the Release store below.
            take(unsafe { self.r.descs.as_ptr().add(slot).read_volatile() });
        }
        if n > 0 {
            self.cached_cons = self.cached_cons.wrapping_add(n);
            self.r.consumer().store(self.cached_cons, Ordering::Release);
        }
        n
    }
}

/// Occupancy and wake-up flag of a producer ring, readable by another owner (atomic loads only).
pub(crate) struct RingWatch {
    _map: Arc<Mmap>,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
}

// SAFETY: the pointers point into the mapping kept alive by `_map` and are only used for atomic
// loads, which are safe from any thread.
unsafe impl Send for RingWatch {}

impl RingWatch {
    /// Entries published but not yet taken by the kernel.
    #[inline]
    pub(crate) fn pending(&self) -> u32 {
        // SAFETY: see the `Send` impl: valid, aligned, atomically accessed words.
        let (p, c) = unsafe {
            (
                self.producer.as_ref().load(Ordering::Relaxed),
                self.consumer.as_ref().load(Ordering::Acquire),
            )
        };
        p.wrapping_sub(c)
    }

    /// True when the kernel asks for a syscall on this ring.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        // SAFETY: as in `pending`.
        unsafe { self.flags.as_ref().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A ring in a memfd mapping, with the "kernel" side played by the opposite ring type.
    fn shared_map() -> Arc<Mmap> {
        // SAFETY: memfd_create with a static NUL-terminated name; the result is checked.
        let fd = unsafe { libc::memfd_create(c"vecplane-ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: `fd` was just returned to us and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing a memfd we own.
        let rc = unsafe { libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), 4096) };
        assert_eq!(rc, 0);
        Arc::new(Mmap::map(&fd, 0, 4096).expect("map"))
    }

    fn offsets() -> RingOffset {
        RingOffset {
            producer: 0,
            consumer: 64,
            desc: 192,
            flags: 128,
        }
    }

    #[test]
    fn produce_consume_wraps_and_respects_room() {
        let map = shared_map();
        let mut prod = ProdRing::<u64>::new(map.clone(), &offsets(), 8).expect("prod");
        let mut cons = ConsRing::<u64>::new(map.clone(), &offsets(), 8).expect("cons");
        let watch = prod.watch();
        assert_eq!(prod.produce(5, |i| 100 + i as u64), 5);
        assert_eq!(watch.pending(), 5);
        let mut got = Vec::new();
        assert_eq!(cons.consume(3, |v| got.push(v)), 3);
        assert_eq!(got, [100, 101, 102]);
        // 2 still queued: 6 free, a request for 10 is cut to 6.
        assert_eq!(prod.free(10), 6);
        assert_eq!(prod.produce(10, |i| 200 + i as u64), 6);
        assert_eq!(prod.produce(1, |_| 0), 0, "full");
        got.clear();
        assert_eq!(cons.consume(100, |v| got.push(v)), 8);
        assert_eq!(got, [103, 104, 200, 201, 202, 203, 204, 205]);
        assert_eq!(watch.pending(), 0);
        assert_eq!(cons.consume(100, |_| panic!("empty")), 0);
        assert!(!prod.needs_wakeup() && !watch.needs_wakeup());
        // SAFETY: test-only write of the flags word, as the kernel would do.
        unsafe { (*(map.ptr().add(128) as *const AtomicU32)).store(1, Ordering::Relaxed) };
        assert!(prod.needs_wakeup() && watch.needs_wakeup());
    }

    #[test]
    fn offsets_outside_the_mapping_are_refused() {
        let map = shared_map();
        let mut off = offsets();
        off.desc = 4096 - 8;
        assert!(ProdRing::<u64>::new(map.clone(), &off, 8).is_err());
        let mut off = offsets();
        off.consumer = 4094;
        assert!(ConsRing::<u64>::new(map.clone(), &off, 8).is_err());
        assert!(
            ConsRing::<u64>::new(map, &offsets(), 6).is_err(),
            "not a power of two"
        );
    }
}

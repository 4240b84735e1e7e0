//! The epoch domain: a global epoch and one slot per worker (QSBR). Owns the grace-period test
//! the control thread uses before freeing; it never makes a worker wait for anything.

use crate::{fence, Arc, AtomicU64, Ordering};

/// Slot value of a worker that holds no reference (asleep, or not started).
const OFFLINE: u64 = 0;

/// One worker's slot, on its own cache line so workers never write a shared line.
#[repr(align(64))]
struct Slot(AtomicU64);

struct Inner {
    epoch: AtomicU64,
    slots: Box<[Slot]>,
}

/// The control side of an epoch domain (cheap to clone; every clone is the same domain).
#[derive(Clone)]
pub struct Domain {
    inner: Arc<Inner>,
}

/// One worker's side of a domain. Not `Clone`: one per worker thread.
pub struct WorkerEpoch {
    inner: Arc<Inner>,
    index: usize,
    seen: u64,
}

impl Domain {
    /// A domain with `workers` worker slots, and their handles (index = worker). Every worker
    /// starts online at the first epoch.
    pub fn new(workers: usize) -> (Domain, Vec<WorkerEpoch>) {
        let inner = Arc::new(Inner {
            epoch: AtomicU64::new(1),
            slots: (0..workers).map(|_| Slot(AtomicU64::new(1))).collect(),
        });
        let handles = (0..workers)
            .map(|index| WorkerEpoch {
                inner: inner.clone(),
                index,
                seen: 1,
            })
            .collect();
        (Domain { inner }, handles)
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch.load(Ordering::SeqCst)
    }

    /// Start a new epoch and return it: what was unlinked before this call may be freed once
    /// `is_safe(returned)` says so.
    pub fn advance(&self) -> u64 {
        self.inner.epoch.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether every worker is offline or has passed a quiescent point in epoch `epoch` or
    /// later (a grace period since `advance` returned `epoch` has elapsed).
    pub fn is_safe(&self, epoch: u64) -> bool {
        // Pairs with the fence in `WorkerEpoch::online`: either we see the worker online, or it
        // sees every pointer swapped before our caller's `advance`.
        fence(Ordering::SeqCst);
        self.inner.slots.iter().all(|s| {
            let v = s.0.load(Ordering::Acquire);
            v == OFFLINE || v >= epoch
        })
    }

    /// The oldest epoch an online worker is still in (None: every worker is offline).
    pub fn oldest_online(&self) -> Option<u64> {
        fence(Ordering::SeqCst);
        self.inner
            .slots
            .iter()
            .map(|s| s.0.load(Ordering::Acquire))
            .filter(|&v| v != OFFLINE)
            .min()
    }

    /// Number of worker slots.
    pub fn workers(&self) -> usize {
        self.inner.slots.len()
    }

    /// Advance the epoch and wait (sleeping 20 µs between checks, never spinning a worker's
    /// CPU) until every worker passed it, or `timeout` elapses. Returns whether it did. For
    /// the control thread only: it measures "visible to every worker".
    #[cfg(not(loom))]
    pub fn synchronize(&self, timeout: std::time::Duration) -> bool {
        let epoch = self.advance();
        let start = std::time::Instant::now();
        loop {
            if self.is_safe(epoch) {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

impl WorkerEpoch {
    /// This worker's index in its domain.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Announce a quiescent point: one load of the global epoch, and a store to this worker's
    /// own slot only when the epoch moved. Lets the control thread free what was retired
    /// before.
    ///
    /// # Safety
    /// No reference obtained from a [`crate::Reader`] of this worker may be alive: call it only
    /// between dispatch rounds, from the worker loop.
    #[inline]
    pub unsafe fn quiescent(&mut self) {
        let e = self.inner.epoch.load(Ordering::Acquire);
        if e != self.seen {
            self.seen = e;
            if let Some(slot) = self.inner.slots.get(self.index) {
                slot.0.store(e, Ordering::Release);
            }
        }
    }

    /// Mark this worker offline (about to sleep): the control thread no longer waits for it.
    ///
    /// # Safety
    /// As for [`WorkerEpoch::quiescent`]: no reference from a [`crate::Reader`] of this worker
    /// may be alive, and none may be taken before [`WorkerEpoch::online`].
    pub unsafe fn offline(&mut self) {
        if let Some(slot) = self.inner.slots.get(self.index) {
            slot.0.store(OFFLINE, Ordering::Release);
        }
    }

    /// Mark this worker online again (woken up), before it reads any snapshot.
    pub fn online(&mut self) {
        let e = self.inner.epoch.load(Ordering::SeqCst);
        self.seen = e;
        if let Some(slot) = self.inner.slots.get(self.index) {
            slot.0.store(e, Ordering::SeqCst);
        }
        // Orders the slot store before every later snapshot load (store-load ordering): pairs
        // with the fence in `Domain::is_safe`.
        fence(Ordering::SeqCst);
    }
}

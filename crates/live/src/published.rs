//! `Published<T>`: one immutable snapshot behind an atomic pointer, its per-worker `Reader`s and
//! its single `Publisher`. Owns the retired snapshots until a grace period frees them; it never
//! frees on a reader's thread and never makes a reader wait.

use crate::{Arc, AtomicPtr, Domain, Mutex, Ordering};

/// A table readers load and the control thread replaces.
pub struct Published<T> {
    current: AtomicPtr<T>,
    /// Snapshots unlinked at an epoch, waiting for a grace period (touched by the publisher
    /// only; readers never lock).
    retired: Mutex<Vec<(u64, Box<T>)>>,
}

// SAFETY: the pointers are owned boxes of T handed across threads; readers only get `&T`, so T
// must be Sync (shared reads) and Send (freed by another thread than the one that made it).
unsafe impl<T: Send + Sync> Send for Published<T> {}
// SAFETY: as for Send; all mutation goes through atomics or the mutex.
unsafe impl<T: Send + Sync> Sync for Published<T> {}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        let p = self.current.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `p` came from Box::into_raw and is owned by this Published; being dropped,
            // no Reader or Publisher (each holds an Arc of it) can read it any more.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A worker's handle on a published table. `Send`, not `Clone`, not `Sync`.
pub struct Reader<T> {
    table: Arc<Published<T>>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

/// The control thread's handle: the only one that replaces the snapshot.
pub struct Publisher<T> {
    table: Arc<Published<T>>,
    domain: Domain,
}

impl<T: Send + Sync> Reader<T> {
    /// The current snapshot. Valid until this worker's next quiescent point (see the crate's
    /// thread-safety contract); one atomic load.
    #[inline(always)]
    pub fn get(&self) -> &T {
        let p = self.table.current.load(Ordering::Acquire);
        // SAFETY: `p` is never null (set from a Box at creation and on every publish). The
        // snapshot it points to is freed only after a grace period in which this worker passed
        // a quiescent point or was offline; the worker loop calls those only when no reference
        // from `get` is alive, so the snapshot outlives the returned borrow.
        unsafe { &*p }
    }
}

impl<T: Send + Sync> Publisher<T> {
    /// Publish `initial` in `domain` (make readers with [`Publisher::reader`]).
    pub fn new(initial: T, domain: &Domain) -> Publisher<T> {
        Publisher {
            table: Arc::new(Published {
                current: AtomicPtr::new(Box::into_raw(Box::new(initial))),
                retired: Mutex::new(Vec::new()),
            }),
            domain: domain.clone(),
        }
    }

    /// A reader for one worker.
    pub fn reader(&self) -> Reader<T> {
        Reader {
            table: self.table.clone(),
            _not_sync: std::marker::PhantomData,
        }
    }

    /// The snapshot readers see now.
    pub fn current(&self) -> &T {
        let p = self.table.current.load(Ordering::Acquire);
        // SAFETY: only `publish` (which takes `&mut self`, so not while this borrow lives)
        // retires the current snapshot, and retired snapshots are freed by this publisher.
        unsafe { &*p }
    }

    /// Replace the snapshot with `next`; returns the epoch at which the old one was retired.
    /// Frees what earlier publications retired when a grace period allows it.
    pub fn publish(&mut self, next: T) -> u64 {
        let new = Box::into_raw(Box::new(next));
        let old = self.table.current.swap(new, Ordering::AcqRel);
        let epoch = self.domain.advance();
        // SAFETY: `old` came from Box::into_raw; it is unlinked now, and ownership passes to the
        // retired list (freed after a grace period).
        let old = unsafe { Box::from_raw(old) };
        if let Ok(mut retired) = self.table.retired.lock() {
            retired.push((epoch, old));
        } else {
            // A poisoned lock means a panic mid-reclaim; keeping the old snapshot alive forever
            // is the safe choice.
            std::mem::forget(old);
        }
        self.reclaim();
        epoch
    }

    /// Free the retired snapshots every worker has moved past. Returns how many remain.
    pub fn reclaim(&mut self) -> usize {
        let Ok(mut retired) = self.table.retired.lock() else {
            return 0;
        };
        let domain = &self.domain;
        retired.retain(|(epoch, _)| !domain.is_safe(*epoch));
        retired.len()
    }

    /// The domain this table is published in.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }
}

/// A reader of a table that never changes (tests, tools): published once, its publisher gone.
pub fn fixed<T: Send + Sync>(value: T) -> Reader<T> {
    let (domain, _) = Domain::new(0);
    Publisher::new(value, &domain).reader()
}

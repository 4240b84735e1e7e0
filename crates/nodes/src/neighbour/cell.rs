//! `WorkerCell`: one worker's exclusive cell shared by the nodes of its graph; a borrow is one
//! atomic flag per frame, never a wait (a second borrow at once is a bug and panics).

use super::*;

/// A value the nodes of one worker's graph share. Borrowing it costs one atomic flag; it never
/// waits. Only one thread (the worker running the graph) ever borrows it, so a second borrow at
/// the same time means a node leaked it into another thread, and panics.
pub struct WorkerCell<T> {
    pub(super) busy: AtomicBool,
    pub(super) value: UnsafeCell<T>,
}

// SAFETY: access to `value` is exclusive: `with` flips `busy` from false to true (Acquire) before
// handing out `&mut T` and back (Release) after, and refuses when it was already true. That is a
// mutex whose lock never waits, so `T: Send` suffices, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for WorkerCell<T> {}

impl<T> WorkerCell<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> WorkerCell<T> {
        WorkerCell {
            busy: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Run `f` on the value.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        if self.busy.swap(true, Ordering::Acquire) {
            panic!("WorkerCell borrowed twice at once: it belongs to one worker thread");
        }
        let _release = Release(&self.busy);
        // SAFETY: `busy` was false and is now true until `_release` drops, so this is the only
        // reference to the value (see the `Sync` impl).
        f(unsafe { &mut *self.value.get() })
    }
}

//! Live tables: how the control thread changes what workers read while they forward.
//! Owns the epoch domain (quiescent-state-based reclamation, QSBR) and `Published<T>`, an
//! immutable snapshot behind one atomic pointer. It never blocks a worker, never allocates or
//! locks on a worker's path, and never frees memory a worker may still read.
//!
//! # Design
//!
//! * **Snapshots.** A table that workers read (a next-hop table, a policy, later flow rules and
//!   load-balancer tables) lives in an immutable `T` behind a [`Published<T>`]. The control
//!   thread, through its [`Publisher<T>`], builds a new `T` and swaps the pointer; the old `T` is
//!   *retired*, not freed. Tables too big to copy per change (the IPv4 FIB) are instead changed
//!   in place with single atomic stores of entries readers load atomically; what they unlink
//!   (a tbl8 group) is retired through the same epochs (see `fib::Ip4FibWriter`).
//! * **Epochs.** A [`Domain`] has a global epoch (starts at 1) and one slot per worker holding the
//!   epoch the worker last *observed at a quiescent point*, or 0 when the worker is *offline*
//!   (asleep: it holds no reference). A worker is quiescent between two dispatch rounds: it holds
//!   no reference into any snapshot then. [`WorkerEpoch::quiescent`] costs one load of the global
//!   epoch, plus one store to the worker's own cache line when the epoch moved.
//! * **Reclamation.** Retiring something unlinked before `advance()` returned `e` makes it free-able
//!   once every slot is 0 or >= `e`: each online worker has since loaded the new epoch, so all its
//!   reads of the old object happened before it announced `e`, and all its later reads see the new
//!   pointer (its epoch load synchronises with the advance that followed the swap). Freeing is
//!   done by the control thread in [`Publisher::reclaim`] (or when the last handle goes away),
//!   never on a worker.
//!
//! # Thread-safety contract
//!
//! * Writers: one [`Publisher`] per published table; `publish` takes `&mut self`, so writers of
//!   one table are serialised by whoever owns the publisher (the control thread).
//! * Readers: a [`Reader<T>`] belongs to one worker (it is `Send`, not `Sync` and not `Clone`:
//!   make one per worker with [`Published::reader`]). A reference from [`Reader::get`] is valid
//!   until that worker's next [`WorkerEpoch::quiescent`] or [`WorkerEpoch::offline`]; those are
//!   `unsafe` and called only by the worker loop between rounds, when no node runs.
//! * A worker that sleeps calls `offline()` first and `online()` after; a stalled or sleeping
//!   worker delays reclamation (memory is kept longer), never a publication or another worker.
//! * Readers may see a new version at any point of a round; a table's users must therefore keep
//!   every id that an older version handed out valid (not reused) until a grace period passed —
//!   the publishers of next-hop tables retire ids through the same epochs.
//!
//! # Example
//!
//! A control thread publishes a new version of a table while a worker reads it; the old
//! version is freed only once the worker has passed a quiescent point:
//!
//! ```
//! use live::{Domain, Publisher};
//!
//! let (domain, mut workers) = Domain::new(1);
//! let mut routes = Publisher::new(vec!["198.18.0.0/15"], &domain);
//! let reader = routes.reader(); // moved to the worker thread in real use
//! let mut worker = workers.remove(0);
//!
//! assert_eq!(reader.get(), &["198.18.0.0/15"]);
//! routes.publish(vec!["198.18.0.0/15", "2001:db8::/32"]);
//! // The worker sees the new version at once...
//! assert_eq!(reader.get().len(), 2);
//! // ...but the old one stays allocated until the worker announces a quiescent point.
//! assert_eq!(routes.reclaim(), 1);
//! // SAFETY: no reference from `reader` is alive here (between two dispatch rounds).
//! unsafe { worker.quiescent() };
//! assert_eq!(routes.reclaim(), 0);
//!
//! // A sleeping worker is offline: it holds no reference and delays nothing.
//! // SAFETY: as above.
//! unsafe { worker.offline() };
//! routes.publish(vec![]);
//! assert_eq!(routes.reclaim(), 0);
//! worker.online();
//! assert!(reader.get().is_empty());
//! ```

#![deny(missing_docs)]

mod epoch;
mod published;

pub use epoch::{Domain, WorkerEpoch};
pub use published::{fixed, Published, Publisher, Reader};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicPtr, AtomicU64, Ordering},
    Arc, Mutex,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicPtr, AtomicU64, Ordering},
    Arc, Mutex,
};

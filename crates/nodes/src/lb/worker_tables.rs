//! The `lb` node's per-worker flow tables (forward flows and NAT reverse entries) and how a
//! worker comes to hold them. The `lb` node is in every graph, but its tables (tens of MiB at
//! the default size) cost nothing until the load balancer is used: the control side allocates
//! them when the first VIP arrives (`WorkerTables::new`, on its own thread) and leaves them in
//! each worker's `TableSlot` before it publishes the tables version with that VIP; the worker
//! takes them at the start of the first vector that sees a VIP. Until then (or should the slot
//! be empty) the node holds a one-bucket placeholder, which behaves as a full table: flows are
//! hashed by Maglev, never dropped. Nothing here runs per packet.

use lb::flowtable::{self, AsRef, FlowTableError, NatReverse, Timeouts};
use lb::model::{MAX_AS_SLOTS, MAX_VIPS};
use session::SessionTable;
use std::sync::{Mutex, TryLockError};

/// One worker's flow tables.
pub struct WorkerTables {
    pub(super) flows: SessionTable<AsRef>,
    pub(super) nat: SessionTable<NatReverse>,
}

impl std::fmt::Debug for WorkerTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerTables")
            .field("entries", &self.flows.capacity())
            .finish()
    }
}

impl WorkerTables {
    /// Tables for at least `entries` flows (3 a bucket, a power of two of buckets, at most
    /// `session::MAX_BUCKETS`), with the NAT reverse table a quarter of that
    /// (`flowtable::worker_tables_bytes` is what they take).
    pub fn new(entries: usize) -> Result<WorkerTables, FlowTableError> {
        let (flows, nat) = flowtable::worker_tables(entries, MAX_VIPS, MAX_AS_SLOTS)?;
        Ok(WorkerTables { flows, nat })
    }

    /// The stand-in a node holds before its tables come: one bucket each, counting nothing.
    pub(super) fn placeholder() -> Result<WorkerTables, FlowTableError> {
        let classes = Timeouts::default().classes();
        Ok(WorkerTables {
            flows: SessionTable::new(1, classes, 0, 0)?,
            nat: SessionTable::new(1, classes, 0, 0)?,
        })
    }

    /// Flows the forward table holds.
    pub fn capacity(&self) -> usize {
        self.flows.capacity()
    }
}

/// Where the control side leaves one worker's tables for it to take.
#[derive(Debug, Default)]
pub struct TableSlot(Mutex<Option<Box<WorkerTables>>>);

/// What `TableSlot::take` found.
pub(super) enum Taken {
    /// The tables (boxed: the enum stays small; this happens once per worker).
    Tables(Box<WorkerTables>),
    /// Nothing was left.
    Empty,
    /// The control side holds the slot right now: try at the next vector.
    Busy,
}

impl TableSlot {
    /// An empty slot.
    pub fn new() -> TableSlot {
        TableSlot::default()
    }

    /// Leave `tables` for the worker (replacing tables it has not taken).
    pub fn put(&self, tables: WorkerTables) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(tables));
    }

    /// Take what was left, never waiting (the worker's side, once, at a vector boundary).
    pub(super) fn take(&self) -> Taken {
        match self.0.try_lock() {
            Ok(mut g) => g.take().map_or(Taken::Empty, Taken::Tables),
            Err(TryLockError::Poisoned(p)) => {
                p.into_inner().take().map_or(Taken::Empty, Taken::Tables)
            }
            Err(TryLockError::WouldBlock) => Taken::Busy,
        }
    }
}

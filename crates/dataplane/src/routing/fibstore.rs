//! One family's lookup table as the routing layer writes it (`FibStore`). Both change in place:
//! IPv4 with single atomic stores per entry (`fib::Ip4FibWriter`), IPv6 per first-level region
//! (`fib::Ip6FibWriter`: the regions a batch touched are re-encoded at `commit`). Never read by a
//! worker directly: workers hold the `Arc<Ip4Fib>` / `Arc<Ip6Fib>` the stores hand out.

use fib::{FibError, Ip4Fib, Ip4FibWriter, Ip6Fib, Ip6FibWriter};
use live::Domain;
use std::sync::Arc;

/// What the routing layer needs of a family's lookup table.
pub(crate) trait FibStore {
    /// Whether routes of these (prefix, length) can all be added (IPv4: tbl8 groups).
    fn check_room(&self, routes: impl Iterator<Item = (u128, u8)>) -> Result<(), FibError>;
    /// Make `prefix/len` lead to `id`, or to nothing. IPv4 changes at once; IPv6 at `commit`.
    /// Callers checked `check_room` for the additions of a batch.
    fn set(&mut self, prefix: u128, len: u8, id: Option<u32>) -> Result<(), FibError>;
    /// Publish what `set` changed.
    fn commit(&mut self) -> Result<(), FibError>;
    /// Free what every worker has moved past.
    fn reclaim(&mut self);
    /// Routes in the table (configured, connected, neighbours' and own addresses).
    fn route_count(&self) -> usize;
    /// Bytes of the lookup table workers read.
    fn memory_bytes(&self) -> usize;
    /// Bytes the control side keeps beside it.
    fn writer_bytes(&self) -> usize;
}

/// IPv4: changed in place.
pub(crate) struct Ip4Store(Ip4FibWriter);

impl Ip4Store {
    pub(crate) fn new(domain: &Domain) -> Result<Ip4Store, FibError> {
        Ok(Ip4Store(Ip4FibWriter::new(domain.clone())?))
    }

    /// The shared table.
    pub(crate) fn fib(&self) -> Arc<Ip4Fib> {
        self.0.fib()
    }
}

impl FibStore for Ip4Store {
    fn check_room(&self, routes: impl Iterator<Item = (u128, u8)>) -> Result<(), FibError> {
        self.0.check_groups(routes.map(|(p, l)| (p as u32, l)))
    }

    fn set(&mut self, prefix: u128, len: u8, id: Option<u32>) -> Result<(), FibError> {
        match id {
            Some(id) => self.0.insert(prefix as u32, len, id).map(|_| ()),
            None => {
                self.0.remove(prefix as u32, len);
                Ok(())
            }
        }
    }

    fn commit(&mut self) -> Result<(), FibError> {
        Ok(())
    }

    fn reclaim(&mut self) {
        self.0.reclaim();
    }

    fn route_count(&self) -> usize {
        self.0.len()
    }

    fn memory_bytes(&self) -> usize {
        self.0.fib().memory_bytes()
    }

    fn writer_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

/// IPv6: changed in place, a batch's regions re-encoded at `commit`.
pub(crate) struct Ip6Store(Ip6FibWriter);

impl Ip6Store {
    pub(crate) fn new(domain: &Domain) -> Result<Ip6Store, FibError> {
        Ok(Ip6Store(Ip6FibWriter::new(domain.clone())?))
    }

    /// The shared table.
    pub(crate) fn fib(&self) -> Arc<Ip6Fib> {
        self.0.fib()
    }
}

impl FibStore for Ip6Store {
    fn check_room(&self, _routes: impl Iterator<Item = (u128, u8)>) -> Result<(), FibError> {
        // The arenas have room for millions of routes (Ip6Fib::MAX_*); a batch that still runs
        // out leaves the regions not yet re-encoded as they were and reports it at commit.
        Ok(())
    }

    fn set(&mut self, prefix: u128, len: u8, id: Option<u32>) -> Result<(), FibError> {
        match id {
            Some(id) => self.0.insert(prefix, len, id).map(|_| ()),
            None => {
                self.0.remove(prefix, len);
                Ok(())
            }
        }
    }

    fn commit(&mut self) -> Result<(), FibError> {
        self.0.commit()
    }

    fn reclaim(&mut self) {
        self.0.reclaim();
    }

    fn route_count(&self) -> usize {
        self.0.len()
    }

    fn memory_bytes(&self) -> usize {
        self.0.fib().memory_bytes()
    }

    fn writer_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

//! One family's lookup table as the routing layer writes it (`FibStore`). IPv4 is changed in
//! place (`fib::Ip4FibWriter`, single atomic stores per entry); IPv6 keeps its route set and
//! publishes a rebuilt `Ip6Fib` snapshot when a batch changed it. Never read by a worker
//! directly: workers hold the `Arc<Ip4Fib>` / `live::Reader<Ip6Fib>` the stores hand out.

use fib::{FibError, Ip4Fib, Ip4FibWriter, Ip6Fib};
use live::{Domain, Publisher, Reader};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

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
    /// Seconds the last rebuild took (0 when changed in place).
    fn rebuild_seconds(&self) -> f64;
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

    fn rebuild_seconds(&self) -> f64 {
        0.0
    }
}

/// IPv6: a route set and the published table built from it.
pub(crate) struct Ip6Store {
    /// Every route: (prefix, length) -> next-hop id.
    routes: HashMap<(u128, u8), u32>,
    /// The table workers read.
    publisher: Publisher<Ip6Fib>,
    /// Whether `routes` changed since the last publication.
    dirty: bool,
    /// Seconds the last rebuild took.
    build_seconds: f64,
}

impl Ip6Store {
    pub(crate) fn new(domain: &Domain) -> Result<Ip6Store, FibError> {
        Ok(Ip6Store {
            routes: HashMap::new(),
            publisher: Publisher::new(Ip6Fib::build(&[])?, domain),
            dirty: false,
            build_seconds: 0.0,
        })
    }

    /// A reader of the published table, for one worker.
    pub(crate) fn reader(&self) -> Reader<Ip6Fib> {
        self.publisher.reader()
    }
}

impl FibStore for Ip6Store {
    fn check_room(&self, _routes: impl Iterator<Item = (u128, u8)>) -> Result<(), FibError> {
        Ok(())
    }

    fn set(&mut self, prefix: u128, len: u8, id: Option<u32>) -> Result<(), FibError> {
        let changed = match id {
            Some(id) => self.routes.insert((prefix, len), id) != Some(id),
            None => self.routes.remove(&(prefix, len)).is_some(),
        };
        self.dirty |= changed;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), FibError> {
        if self.dirty {
            let t = Instant::now();
            let list: Vec<(u128, u8, u32)> = self
                .routes
                .iter()
                .map(|(&(p, l), &id)| (p, l, id))
                .collect();
            let table = Ip6Fib::build(&list)?;
            self.build_seconds = t.elapsed().as_secs_f64();
            self.publisher.publish(table);
            self.dirty = false;
        }
        Ok(())
    }

    fn reclaim(&mut self) {
        self.publisher.reclaim();
    }

    fn route_count(&self) -> usize {
        self.routes.len()
    }

    fn memory_bytes(&self) -> usize {
        self.publisher.current().memory_bytes()
    }

    fn writer_bytes(&self) -> usize {
        // A hashbrown slot of ((u128, u8), u32): 32 bytes plus one control byte.
        self.routes.capacity() * 33
    }

    fn rebuild_seconds(&self) -> f64 {
        self.build_seconds
    }
}

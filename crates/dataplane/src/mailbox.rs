//! Work the control side hands a running worker (a graph edit when a port is added or
//! removed), done by the worker between two of its rounds, when it next checks its flags (every
//! 64 rounds or after a sleep). It owns the queue and the flag the worker tests; it never
//! waits: the poster rings the worker's doorbell and waits for the job's own answer.

use graph::Graph;
use nodes::neighbour::NeighbourHandle;
use packet::BufferPool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What a job may change: the worker's graph, pool and neighbour tables.
pub struct WorkerParts<'a> {
    /// The worker's graph (no frame is pending while a job runs).
    pub graph: &'a mut Graph,
    /// Its buffer pool.
    pub pool: &'a mut BufferPool,
    /// Its neighbour tables.
    pub neighbours: &'a NeighbourHandle,
}

/// One job; it reports its outcome itself (a channel it captured).
pub type WorkerJob = Box<dyn FnOnce(&mut WorkerParts<'_>) + Send>;

/// A worker's queue of jobs.
#[derive(Default)]
pub struct Mailbox {
    jobs: Mutex<Vec<WorkerJob>>,
    pending: AtomicBool,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish()
    }
}

impl Mailbox {
    /// Queue `job` (the caller then rings the worker's doorbell).
    pub fn post(&self, job: WorkerJob) {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(job);
        self.pending.store(true, Ordering::Release);
    }

    /// Whether jobs wait (one load; the worker tests it with its other flags).
    #[inline]
    pub fn has_jobs(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Run every queued job, in order, on `parts` (the worker's thread, between rounds).
    /// Returns how many ran.
    pub fn run(&self, parts: &mut WorkerParts<'_>) -> usize {
        self.pending.store(false, Ordering::Release);
        let jobs = std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|p| p.into_inner()));
        let n = jobs.len();
        for job in jobs {
            job(parts);
        }
        n
    }
}

//! Worker threads: each owns a pool, a graph and a neighbour table, is pinned to its core, and
//! loops polling its inputs until told to stop or until every input is finished. It never
//! blocks and never locks. The control thread only builds them and reads their counters.

use crate::build::{BuildError, BuiltWorker, FibStats};
use crate::idle::{Doorbell, Woken};
use crate::spec::DataplaneSpec;
use crate::view::{RuntimeView, WorkerView};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How many dispatch rounds pass between checks of the stop flag and the clock.
const CHECK_EVERY: u64 = 64;

/// A data plane built and not yet running.
pub struct Dataplane {
    workers: Vec<(BuiltWorker, Option<usize>)>,
    view: RuntimeView,
}

/// Mark a worker offline however its loop ends (also when it unwinds), so the control side
/// never waits for a worker that is gone.
struct OfflineOnDrop<'a>(Option<&'a mut live::WorkerEpoch>);

impl Drop for OfflineOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(e) = self.0.take() {
            // SAFETY: the worker loop has ended; no reference from a Reader is alive.
            unsafe { e.offline() };
        }
    }
}

/// Pin the calling thread to `cpu`; returns false if the kernel refused.
pub fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; sched_setaffinity(0, ..)
    // affects only the calling thread and reads the set we pass.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

impl Dataplane {
    /// Build the pool, graph and ports of `spec`.
    pub fn new(spec: &DataplaneSpec) -> Result<Dataplane, BuildError> {
        Dataplane::new_with_features(spec, Vec::new())
    }

    /// Build the pool, graph and ports of `spec`, with `features` on the arcs.
    pub fn new_with_features(
        spec: &DataplaneSpec,
        features: Vec<Arc<dyn crate::features::WorkerFeature>>,
    ) -> Result<Dataplane, BuildError> {
        let tsc_hz = graph::measure_tsc_hz(100);
        Dataplane::with_features(spec, tsc_hz, features)
    }

    /// Build with a known TSC frequency (benchmarks measure it once for many runs).
    pub fn with_tsc_hz(spec: &DataplaneSpec, tsc_hz: u64) -> Result<Dataplane, BuildError> {
        Dataplane::with_features(spec, tsc_hz, Vec::new())
    }

    /// Build with a known TSC frequency and `features` on the arcs of every worker's graph.
    pub fn with_features(
        spec: &DataplaneSpec,
        tsc_hz: u64,
        features: Vec<Arc<dyn crate::features::WorkerFeature>>,
    ) -> Result<Dataplane, BuildError> {
        let mut workers = Vec::new();
        let shared = Arc::new(crate::build::WorkersShared::with_features(
            spec, tsc_hz, features,
        )?);
        for index in 0..spec.workers.max(1) {
            let w = BuiltWorker::with_shared(spec, index, tsc_hz, &shared)?;
            workers.push((w, spec.cpu_of(index)));
        }
        let capture = shared.capture.clone();
        let routing = shared.routing.clone();
        let policies = shared.policies.clone();
        let flows = shared.flows.clone();
        let lb = shared.lb.clone();
        let features = shared.features.clone();
        let channels = shared.channels.clone();
        let rxq =
            crate::rebalance::Rebalancer::new(shared.take_movable(), spec.workers.max(1), spec.rxq)
                .map(Arc::new);
        // What one worker learns about a neighbour, the others hear of.
        let handles: Vec<_> = workers.iter().map(|(w, _)| w.neighbours.clone()).collect();
        if handles.len() > 1 {
            nodes::neighbour::NeighbourHandle::connect(&handles);
        }
        let first = &workers[0].0;
        let mut ports = first.ports.clone();
        for (w, _) in &workers[1..] {
            for (all, mine) in ports.iter_mut().zip(&w.ports) {
                all.stats.extend(mine.stats.iter().cloned());
            }
        }
        let ports = crate::view::Published::new(Arc::new(ports));
        let port_control = Arc::new(crate::ports_live::PortControl::new(
            spec,
            shared.clone(),
            workers
                .iter()
                .map(|(w, _)| crate::ports_live::WorkerLink {
                    mailbox: w.mailbox.clone(),
                    doorbell: w.doorbell.clone(),
                    jumbo_capacity: w.pool.jumbo_capacity(),
                    umem: w.umem.clone().ok_or_else(|| {
                        w.umem_error
                            .clone()
                            .unwrap_or_else(|| "no UMEM".to_string())
                    }),
                })
                .collect(),
            ports.clone(),
        ));
        let view = RuntimeView {
            ports,
            port_control: Some(port_control),
            workers: workers
                .iter()
                .enumerate()
                .map(|(index, (w, cpu))| WorkerView {
                    index,
                    cpu: *cpu,
                    graph: w.published_stats.clone(),
                    trace: w.published_trace.clone(),
                    poll: w.poll.clone(),
                    idle: w.idle.clone(),
                    pool_free: w.pool_free.clone(),
                })
                .collect(),
            pool_backing: first.pool.backing().to_string(),
            pool_buffers: first.pool.capacity(),
            tsc_hz,
            neighbours: workers.iter().map(|(w, _)| w.neighbours.view()).collect(),
            bridges: workers
                .iter()
                .filter_map(|(w, _)| w.bridge.clone())
                .collect(),
            bridge_names: spec.bridges.iter().map(|b| b.name.clone()).collect(),
            capture,
            routing,
            policies,
            flows,
            lb,
            rxq,
            features,
            channels,
        };
        Ok(Dataplane { workers, view })
    }

    /// What the control plane may read.
    pub fn view(&self) -> &RuntimeView {
        &self.view
    }

    /// FIB build figures (of worker 0; every worker builds the same tables).
    pub fn fib_stats(&self) -> FibStats {
        self.workers[0].0.fib
    }

    /// Run every worker until `stop` is set, `deadline` passes, or every input is finished;
    /// then flush outputs. Worker 0 runs on the current thread (pinned if the spec says so),
    /// the others on scoped threads. Returns packets received.
    pub fn run_inline(&mut self, stop: &AtomicBool, deadline: Option<Instant>) -> u64 {
        let tsc_hz = self.view.tsc_hz;
        let (first, rest) = self.workers.split_at_mut(1);
        std::thread::scope(|scope| {
            let others: Vec<_> = rest
                .iter_mut()
                .enumerate()
                .map(|(i, (w, cpu))| {
                    let cpu = *cpu;
                    std::thread::Builder::new()
                        .name(format!("vecplane-worker-{}", i + 1))
                        .spawn_scoped(scope, move || run_worker(w, cpu, stop, deadline, tsc_hz))
                })
                .collect();
            let (w, cpu) = &mut first[0];
            let mut received = run_worker(w, *cpu, stop, deadline, tsc_hz);
            for h in others {
                match h {
                    Ok(h) => received += h.join().unwrap_or(0),
                    Err(e) => tracing::error!("cannot start a worker thread: {e}"),
                }
            }
            received
        })
    }

    /// Start the worker threads.
    pub fn start(self) -> RunningDataplane {
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicUsize::new(self.workers.len()));
        let view = self.view.clone();
        let tsc_hz = view.tsc_hz;
        let doorbells = self
            .workers
            .iter()
            .map(|(w, _)| w.doorbell.clone())
            .collect();
        let mut handles = Vec::new();
        let mut helpers = Vec::new();
        for (index, (mut w, cpu)) in self.workers.into_iter().enumerate() {
            let (s, r) = (stop.clone(), running.clone());
            let handle = std::thread::Builder::new()
                .name(format!("vecplane-worker-{index}"))
                .spawn(move || {
                    // Count this worker out however it ends, also when it unwinds from a
                    // panic, so the control thread never waits for a worker that is gone.
                    let _finished = CountDownOnDrop(r);
                    run_worker(&mut w, cpu, &s, None, tsc_hz);
                });
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    tracing::error!("cannot start worker {index}: {e}");
                    running.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        // The receive-queue rebalancer, when queues may move and the policy says how often.
        if let Some(rb) = view
            .rxq
            .clone()
            .filter(|rb| rb.policy().rebalance_seconds > 0)
        {
            let graphs: Vec<_> = view.workers.iter().map(|w| w.graph.clone()).collect();
            let s = stop.clone();
            match std::thread::Builder::new()
                .name("vecplane-rxq".into())
                .spawn(move || rb.run(&graphs, tsc_hz, &s))
            {
                Ok(h) => helpers.push(h),
                Err(e) => tracing::error!("cannot start the receive-queue rebalancer: {e}"),
            }
        }
        // The punt thread: drains the workers' punt rings into the sinks until `stop`.
        if let Some(h) = view.channels.punt.start(stop.clone()) {
            helpers.push(h);
        }
        RunningDataplane {
            view,
            stop,
            running,
            handles,
            helpers,
            doorbells,
        }
    }
}

/// Run one worker until `stop`, `deadline` or every input finished; flush it. Returns packets
/// received.
fn run_worker(
    w: &mut BuiltWorker,
    cpu: Option<usize>,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    tsc_hz: u64,
) -> u64 {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu);
    }
    let mut received = 0u64;
    let mut rounds = 0u64;
    let setting = w.poll.clone();
    let (bell, stats) = (w.doorbell.clone(), w.idle.clone());
    let idler_of = |graph: &graph::Graph| {
        let (mode, max_us) = setting.get();
        crate::idle::Idler::new(mode, max_us, graph, bell.clone(), stats.clone(), tsc_hz)
    };
    let mut generation = setting.generation();
    let mut idler = idler_of(&w.graph);
    let mut epoch = OfflineOnDrop(w.epoch.as_mut());
    loop {
        let n = w.graph.run_once(&mut w.pool);
        received += n as u64;
        if let Some(e) = epoch.0.as_deref_mut() {
            // SAFETY: between two dispatch rounds no node runs, so no reference a node took
            // from a live::Reader is alive.
            unsafe { e.quiescent() };
        }
        if n == 0 && w.graph.is_finished() {
            break;
        }
        rounds += 1;
        // After a sleep (a round apart at most: each may have lasted `poll-sleep-max-us`),
        // check at once rather than every CHECK_EVERY rounds; a job the control side posted
        // (a port added or removed) is taken at the next round, one load per round: 64 rounds
        // of a debug build on a loaded machine outlasted the control side's patience.
        let slept = idler.should_sleep(n)
            && idler.sleep(&w.graph, epoch.0.as_deref_mut(), stop, deadline) != Woken::NotSlept;
        if slept || rounds.is_multiple_of(CHECK_EVERY) || w.mailbox.has_jobs() {
            stats.heartbeat.add(1);
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if setting.generation() != generation {
                // The control plane changed the poll mode (reload): a new wait set.
                generation = setting.generation();
                idler = idler_of(&w.graph);
            }
            if let Some(u) = &w.umem {
                // What removed AF_XDP ports had lent the kernel.
                u.take_returned(|lent| w.pool.free_batch(lent));
            }
            w.pool_free
                .store(w.pool.available() as u64, Ordering::Relaxed);
            if w.mailbox.has_jobs() {
                let mut parts = crate::mailbox::WorkerParts {
                    graph: &mut w.graph,
                    pool: &mut w.pool,
                    neighbours: &w.neighbours,
                };
                w.mailbox.run(&mut parts);
                // An edit replaces the counters and trace control: publish them anew.
                w.published_stats.set(w.graph.stats());
                w.published_trace.set(w.graph.trace_control());
                // The graph may have new inputs (descriptors to wait on) and counters.
                idler = idler_of(&w.graph);
            }
        }
    }
    drop(epoch);
    w.graph.finish();
    // Packets still queued for resolution go back to the pool before it is dropped.
    crate::build::flush_neighbours(&w.neighbours, &mut w.pool, &w.graph.stats());
    received
}

/// Counts a running worker out when dropped.
struct CountDownOnDrop(Arc<AtomicUsize>);

impl Drop for CountDownOnDrop {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A data plane whose worker threads run.
pub struct RunningDataplane {
    view: RuntimeView,
    stop: Arc<AtomicBool>,
    running: Arc<AtomicUsize>,
    handles: Vec<std::thread::JoinHandle<()>>,
    /// Threads beside the workers (the receive-queue rebalancer), stopped with them.
    helpers: Vec<std::thread::JoinHandle<()>>,
    /// The workers' doorbells: `stop` wakes the sleeping ones at once.
    doorbells: Vec<Arc<Doorbell>>,
}

impl RunningDataplane {
    /// What the control plane may read.
    pub fn view(&self) -> &RuntimeView {
        &self.view
    }

    /// True once every worker ended by itself (every input finished, e.g. pcap files
    /// consumed).
    pub fn is_finished(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// Ask the workers to stop, wait for them, flush their outputs.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for bell in &self.doorbells {
            bell.wake();
        }
        for h in self.handles.into_iter().chain(self.helpers) {
            let _ = h.join();
        }
    }
}

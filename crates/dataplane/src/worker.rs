//! Worker threads: each owns a pool and a graph, is pinned to its core, and loops polling its
//! inputs until told to stop or until every input is finished. It never blocks and never locks.

use crate::build::{BuildError, BuiltWorker, FibStats};
use crate::spec::DataplaneSpec;
use crate::view::{RuntimeView, WorkerView};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How many dispatch rounds pass between checks of the stop flag and the clock.
const CHECK_EVERY: u64 = 64;

/// A data plane built and not yet running.
pub struct Dataplane {
    worker: BuiltWorker,
    view: RuntimeView,
    cpu: Option<usize>,
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
        let tsc_hz = graph::measure_tsc_hz(100);
        Dataplane::with_tsc_hz(spec, tsc_hz)
    }

    /// Build with a known TSC frequency (benchmarks measure it once for many runs).
    pub fn with_tsc_hz(spec: &DataplaneSpec, tsc_hz: u64) -> Result<Dataplane, BuildError> {
        let worker = BuiltWorker::new(spec, 0, tsc_hz)?;
        let view = RuntimeView {
            ports: worker.ports.clone(),
            workers: vec![WorkerView {
                index: 0,
                cpu: spec.worker_cpu,
                graph: worker.graph.stats(),
                trace: worker.graph.trace_control(),
            }],
            pool_backing: worker.pool.backing().to_string(),
            pool_buffers: worker.pool.capacity(),
            tsc_hz,
            neighbours: vec![worker.neighbours.view()],
            bridges: worker.bridge.iter().cloned().collect(),
            bridge_names: spec.bridges.iter().map(|b| b.name.clone()).collect(),
        };
        Ok(Dataplane {
            worker,
            view,
            cpu: spec.worker_cpu,
        })
    }

    /// What the control plane may read.
    pub fn view(&self) -> &RuntimeView {
        &self.view
    }

    /// FIB build figures.
    pub fn fib_stats(&self) -> FibStats {
        self.worker.fib
    }

    /// Run on the current thread (pinned if the spec says so) until `stop` is set, `deadline`
    /// passes, or every input is finished; then flush outputs. Returns packets received.
    pub fn run_inline(&mut self, stop: &AtomicBool, deadline: Option<Instant>) -> u64 {
        if let Some(cpu) = self.cpu {
            pin_current_thread(cpu);
        }
        let w = &mut self.worker;
        let mut received = 0u64;
        let mut rounds = 0u64;
        loop {
            let n = w.graph.run_once(&mut w.pool);
            received += n as u64;
            if n == 0 && w.graph.is_finished() {
                break;
            }
            rounds += 1;
            if rounds.is_multiple_of(CHECK_EVERY) {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
        }
        w.graph.finish();
        // Packets still queued for resolution go back to the pool before it is dropped.
        crate::build::flush_neighbours(&w.neighbours, &mut w.pool, &w.graph.stats());
        received
    }

    /// Start the worker thread.
    pub fn start(mut self) -> RunningDataplane {
        let stop = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let view = self.view.clone();
        let (s, f) = (stop.clone(), finished.clone());
        let handle = std::thread::Builder::new()
            .name("vecplane-worker-0".into())
            .spawn(move || {
                // Set `finished` however the worker ends, also when it unwinds from a panic, so
                // the control thread never waits for a worker that is gone.
                let _finished = SetOnDrop(f);
                self.run_inline(&s, None);
            });
        let handle = match handle {
            Ok(h) => Some(h),
            Err(e) => {
                eprintln!("vecplane: cannot start the worker thread: {e}");
                finished.store(true, Ordering::Release);
                None
            }
        };
        RunningDataplane {
            view,
            stop,
            finished,
            handle,
        }
    }
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A data plane whose worker thread runs.
pub struct RunningDataplane {
    view: RuntimeView,
    stop: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl RunningDataplane {
    /// What the control plane may read.
    pub fn view(&self) -> &RuntimeView {
        &self.view
    }

    /// True once the worker ended by itself (every input finished, e.g. pcap files consumed).
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Ask the worker to stop, wait for it, flush its outputs.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

//! One measured run of the real data plane: build a `Dataplane` from the spec (memory ports, the
//! real graph), warm it up, run it with `run_inline` on a pinned worker thread for the requested
//! time, and turn the counter deltas and TSC ticks into figures. A helper thread, kept off the
//! worker's CPU, prints progress from the shared counters about once a second.
//! It never skips a stage of the real path and never reads counters it did not snapshot itself.

use crate::scenario::Scenario;
use crate::sys;
use anyhow::{anyhow, bail, Result};
use dataplane::{Dataplane, DataplaneSpec, RuntimeView};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// How one run is made.
#[derive(Clone, Debug)]
pub struct RunSettings {
    /// Measured seconds.
    pub seconds: f64,
    /// Warm-up seconds on the same data plane before measuring (counters are snapshotted after
    /// it and only the difference is reported).
    pub warmup: f64,
    /// CPU of the worker thread.
    pub cpu: usize,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Label of the progress line, e.g. `ip4 64 B run 2/3`.
    pub label: String,
    /// Whether to print a progress line on stderr.
    pub progress: bool,
    /// Count packets received on every port (a loop through several ports, e.g. PVP), not
    /// only on the first.
    pub rx_on_every_port: bool,
}

/// One node's share of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeFigure {
    /// Node name.
    pub name: String,
    /// Packets it processed.
    pub packets: u64,
    /// Its TSC ticks divided by its packets.
    pub cycles_per_packet: f64,
}

/// Figures of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunResult {
    /// Packets received on rx0 during the measured interval.
    pub packets: u64,
    /// Packets sent on all ports.
    pub tx_packets: u64,
    /// Packets dropped for a reason (graph errors and port drops).
    pub dropped: u64,
    /// Whether received = sent + dropped held.
    pub accounted: bool,
    /// TSC ticks of the measured interval on the worker.
    pub ticks: u64,
    /// `ticks / tsc_hz`.
    pub seconds: f64,
    /// Million packets per second.
    pub mpps: f64,
    /// `ticks / packets`.
    pub cycles_per_packet: f64,
    /// Ticks per packet spent outside every node (dispatcher, loop, clock checks).
    pub dispatch_cycles_per_packet: f64,
    /// Ticks per packet of the node calls that carried packets (empty polls left out): what
    /// a packet costs when the worker is not the bottleneck and spins idle part of the time.
    pub busy_cycles_per_packet: f64,
    /// Nodes that saw packets, in graph order.
    pub nodes: Vec<NodeFigure>,
    /// Non-zero drop counts by `node/reason`.
    pub drops: BTreeMap<String, u64>,
    /// Seconds to build the whole data plane (pool, FIBs, graph).
    pub build_seconds: f64,
    /// Seconds to build the scenario's FIB (0 for l2xc).
    pub fib_build_seconds: f64,
    /// Bytes of the scenario's FIB lookup tables (0 for l2xc).
    pub fib_memory_bytes: usize,
    /// Routes in the scenario's FIB (including connected, host and local ones).
    pub fib_routes: usize,
    /// Worker thread CPU time divided by wall time during the measured interval (below 1.0: the
    /// kernel ran something else on the worker's CPU).
    pub worker_cpu_share: f64,
    /// `cycles_per_packet * worker_cpu_share`: ticks per packet while the worker was on its CPU.
    pub on_cpu_cycles_per_packet: f64,
    /// Share of time the other CPUs were busy during the measured interval (they share caches,
    /// memory bandwidth and perhaps a physical core with the worker), when known.
    pub others_busy: Option<f64>,
    /// When the worker is a real-time thread under the kernel's real-time throttling: the share
    /// of each period it may run (`sys::rt_throttle_share`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rt_throttle: Option<f64>,
    /// Involuntary context switches of the worker during the measured interval.
    pub involuntary_switches: u64,
    /// What backs the buffer pool.
    pub pool_backing: String,
    /// Flow-mode bridges' cache counters over the measured interval (None: no flow bridge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_cache: Option<crate::flows::CacheDelta>,
}

/// Counter values at one instant.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    rx: u64,
    tx: u64,
    /// (`port-node/reason`, count, is a transmit drop).
    port_drops: Vec<(String, u64, bool)>,
    /// (packets, clocks, busy clocks) by node.
    nodes: Vec<(u64, u64, u64)>,
    errors: Vec<u64>,
    flow_cache: Option<crate::flows::CacheSnapshot>,
}

fn snapshot(view: &RuntimeView, every_port: bool) -> Snapshot {
    let mut s = Snapshot::default();
    for (i, p) in view.ports.get().iter().enumerate() {
        for st in &p.stats {
            if i == 0 || every_port {
                s.rx += st.rx_packets.get();
            }
            s.tx += st.tx_packets.get();
            s.port_drops
                .push((format!("{}-rx/no-buffer", p.name), st.rx_drops.get(), false));
            s.port_drops
                .push((format!("{}-tx/tx-drop", p.name), st.tx_drops.get(), true));
        }
    }
    if let Some(w) = view.workers.first() {
        s.nodes = w
            .graph
            .get()
            .nodes
            .iter()
            .map(|n| (n.packets.get(), n.clocks.get(), n.busy_clocks.get()))
            .collect();
        s.errors = w.graph.get().errors.iter().map(|c| c.get()).collect();
    }
    s.flow_cache = crate::flows::CacheSnapshot::take(view);
    s
}

/// What the worker thread measured.
struct WorkerOutcome {
    before: Snapshot,
    after: Snapshot,
    ticks: u64,
    cpu_time: Duration,
    wall: Duration,
    involuntary: u64,
    others_busy: Option<f64>,
    rt_throttle: Option<f64>,
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;
const PHASE_DONE: u8 = 2;

fn worker(
    dp: &mut Dataplane,
    view: &RuntimeView,
    s: &RunSettings,
    phase: &AtomicU8,
    baseline: &AtomicU64,
    ready: &(impl Fn(&RuntimeView) -> bool + Sync),
) -> Result<WorkerOutcome> {
    if !dataplane::pin_current_thread(s.cpu) {
        bail!("cannot pin the worker to CPU {}", s.cpu);
    }
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let warm_until = t + Duration::from_secs_f64(s.warmup);
    if s.warmup > 0.0 {
        dp.run_inline(&stop, Some(warm_until));
    }
    // An outside source may take a while to start: keep forwarding until it flows.
    while !ready(view) {
        if t.elapsed() > Duration::from_secs_f64(s.warmup) + READY_TIMEOUT {
            bail!("no traffic arrived within {READY_TIMEOUT:?} after the warm-up");
        }
        dp.run_inline(&stop, Some(Instant::now() + Duration::from_millis(100)));
    }
    let every = s.rx_on_every_port;
    let before = snapshot(view, every);
    baseline.store(before.rx, Ordering::Relaxed);
    phase.store(PHASE_MEASURE, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs_f64(s.seconds);
    let stat0 = sys::cpu_times();
    let (iv0, cpu0) = (sys::thread_involuntary_switches(), sys::thread_cpu_time());
    let t0 = Instant::now();
    let c0 = graph::rdtsc();
    dp.run_inline(&stop, Some(deadline));
    let c1 = graph::rdtsc();
    let wall = t0.elapsed();
    let (cpu1, iv1) = (sys::thread_cpu_time(), sys::thread_involuntary_switches());
    let after = snapshot(view, every);
    let stat1 = sys::cpu_times();
    Ok(WorkerOutcome {
        others_busy: sys::others_busy(&stat0, &stat1, s.cpu),
        rt_throttle: sys::rt_throttle_share(),
        before,
        after,
        ticks: c1.wrapping_sub(c0),
        cpu_time: cpu1.saturating_sub(cpu0),
        wall,
        involuntary: iv1.saturating_sub(iv0),
    })
}

/// Print `packets so far, current Mpps` about once a second until the run is done.
fn progress(view: &RuntimeView, s: &RunSettings, phase: &AtomicU8, baseline: &AtomicU64) {
    // Stay off the worker's CPU.
    let others: Vec<usize> = sys::allowed_cpus()
        .into_iter()
        .filter(|&c| c != s.cpu)
        .collect();
    sys::pin_current_thread_to(&others);
    let tty = std::io::stderr().is_terminal();
    let ports = if s.rx_on_every_port {
        view.ports.get().len()
    } else {
        1
    };
    let rx = || {
        view.ports
            .get()
            .iter()
            .take(ports)
            .flat_map(|p| p.stats.iter())
            .map(|st| st.rx_packets.get())
            .sum::<u64>()
    };
    let mut last: Option<(Instant, u64)> = None;
    let mut next_print = Instant::now() + Duration::from_secs(1);
    let mut printed = false;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let ph = phase.load(Ordering::Acquire);
        if ph == PHASE_DONE {
            break;
        }
        if ph != PHASE_MEASURE {
            continue;
        }
        let now = Instant::now();
        let n = rx();
        let Some((t_prev, n_prev)) = last else {
            last = Some((now, n));
            continue;
        };
        if now < next_print {
            continue;
        }
        let rate = n.saturating_sub(n_prev) as f64 / now.duration_since(t_prev).as_secs_f64() / 1e6;
        let so_far = n.saturating_sub(baseline.load(Ordering::Relaxed));
        let line = format!(
            "{}: {:.1} M packets, {:.2} Mpps",
            s.label,
            so_far as f64 / 1e6,
            rate
        );
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        printed = true;
        last = Some((now, n));
        next_print = now + Duration::from_secs(1);
    }
    if tty && printed {
        let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
    }
}

/// Build the data plane of `spec` and measure one run.
pub fn run_once(spec: &DataplaneSpec, scenario: Scenario, s: &RunSettings) -> Result<RunResult> {
    run_once_with(spec, scenario, s, |_| Ok(()), |_| true).map(|(r, ())| r)
}

/// Longest wait, after the warm-up, for `ready` to say traffic flows.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// [`run_once`] with an outside traffic source: `on_built` runs once the data plane exists
/// (its ports are open) and before the worker starts (it starts the source and returns what
/// keeps it alive); the warm-up lasts until `ready` is true as well (at most a minute more).
pub fn run_once_with<G>(
    spec: &DataplaneSpec,
    scenario: Scenario,
    s: &RunSettings,
    on_built: impl FnOnce(&RuntimeView) -> Result<G>,
    ready: impl Fn(&RuntimeView) -> bool + Sync,
) -> Result<(RunResult, G)> {
    if !(s.seconds > 0.0 && s.seconds.is_finite()) {
        bail!("the measured time must be a positive number of seconds");
    }
    if !(s.warmup >= 0.0 && s.warmup.is_finite()) {
        bail!("the warm-up time must be zero or a positive number of seconds");
    }
    let t = Instant::now();
    let mut dp = Dataplane::with_tsc_hz(spec, s.tsc_hz)
        .map_err(|e| anyhow!("building the data plane: {e}"))?;
    let build_seconds = t.elapsed().as_secs_f64();
    let fib = dp.fib_stats();
    let view = dp.view().clone();
    let source = on_built(&view)?;
    let phase = AtomicU8::new(PHASE_WARMUP);
    let baseline = AtomicU64::new(0);
    let outcome = std::thread::scope(|sc| -> Result<WorkerOutcome> {
        let w = std::thread::Builder::new()
            .name("bench-worker".into())
            .spawn_scoped(sc, || worker(&mut dp, &view, s, &phase, &baseline, &ready))
            .map_err(|e| anyhow!("cannot start the worker thread: {e}"))?;
        let p = if s.progress {
            std::thread::Builder::new()
                .name("bench-progress".into())
                .spawn_scoped(sc, || progress(&view, s, &phase, &baseline))
                .ok()
        } else {
            None
        };
        let r = w.join();
        phase.store(PHASE_DONE, Ordering::Release);
        if let Some(p) = p {
            let _ = p.join();
        }
        r.map_err(|_| anyhow!("the worker thread panicked"))?
    })?;
    let (fib_build_seconds, fib_memory_bytes, fib_routes) = match scenario {
        Scenario::L2xc => (0.0, 0, 0),
        Scenario::Ip4 => (fib.ip4_build_seconds, fib.ip4_memory_bytes, fib.ip4_routes),
        Scenario::Ip6 => (fib.ip6_build_seconds, fib.ip6_memory_bytes, fib.ip6_routes),
    };
    let r = figures(
        &view,
        &outcome,
        s.tsc_hz,
        build_seconds,
        (fib_build_seconds, fib_memory_bytes, fib_routes),
    );
    Ok((r, source))
}

fn figures(
    view: &RuntimeView,
    o: &WorkerOutcome,
    tsc_hz: u64,
    build_seconds: f64,
    fib: (f64, usize, usize),
) -> RunResult {
    let packets = o.after.rx.wrapping_sub(o.before.rx);
    let tx_packets = o.after.tx.wrapping_sub(o.before.tx);
    let per_packet = |ticks: u64, n: u64| if n == 0 { 0.0 } else { ticks as f64 / n as f64 };
    let mut nodes = Vec::new();
    let mut node_ticks = 0u64;
    let mut busy_ticks = 0u64;
    if let Some(w) = view.workers.first() {
        for (i, name) in w.graph.get().node_names.iter().enumerate() {
            let (Some(b), Some(a)) = (o.before.nodes.get(i), o.after.nodes.get(i)) else {
                continue;
            };
            let (p, c) = (a.0.wrapping_sub(b.0), a.1.wrapping_sub(b.1));
            node_ticks = node_ticks.wrapping_add(c);
            busy_ticks = busy_ticks.wrapping_add(a.2.wrapping_sub(b.2));
            if p > 0 {
                nodes.push(NodeFigure {
                    name: name.clone(),
                    packets: p,
                    cycles_per_packet: per_packet(c, p),
                });
            }
        }
    }
    let mut drops = BTreeMap::new();
    let mut graph_drops = 0u64;
    if let Some(w) = view.workers.first() {
        for (i, (node, reason)) in w.graph.get().error_names.iter().enumerate() {
            let d = match (o.before.errors.get(i), o.after.errors.get(i)) {
                (Some(b), Some(a)) => a.wrapping_sub(*b),
                _ => 0,
            };
            if d > 0 {
                graph_drops += d;
                *drops.entry(format!("{node}/{reason}")).or_insert(0) += d;
            }
        }
    }
    let mut port_drops = 0u64;
    for ((key, b, is_tx), (_, a, _)) in o.before.port_drops.iter().zip(&o.after.port_drops) {
        let d = a.wrapping_sub(*b);
        if d > 0 {
            *drops.entry(key.clone()).or_insert(0) += d;
            // Frames the generator found no buffer for were never received: not in the balance.
            if *is_tx {
                port_drops += d;
            }
        }
    }
    let dropped = graph_drops + port_drops;
    let seconds = o.ticks as f64 / tsc_hz.max(1) as f64;
    let wall = o.wall.as_secs_f64();
    let share = if wall > 0.0 {
        (o.cpu_time.as_secs_f64() / wall).min(1.0)
    } else {
        0.0
    };
    RunResult {
        packets,
        tx_packets,
        dropped,
        accounted: packets == tx_packets + dropped,
        ticks: o.ticks,
        seconds,
        mpps: if seconds > 0.0 {
            packets as f64 / seconds / 1e6
        } else {
            0.0
        },
        cycles_per_packet: per_packet(o.ticks, packets),
        dispatch_cycles_per_packet: if packets == 0 {
            0.0
        } else {
            (o.ticks as f64 - node_ticks as f64) / packets as f64
        },
        busy_cycles_per_packet: per_packet(busy_ticks, packets),
        nodes,
        drops,
        build_seconds,
        fib_build_seconds: fib.0,
        fib_memory_bytes: fib.1,
        fib_routes: fib.2,
        worker_cpu_share: share,
        on_cpu_cycles_per_packet: per_packet(o.ticks, packets) * share,
        others_busy: o.others_busy,
        rt_throttle: o.rt_throttle,
        involuntary_switches: o.involuntary,
        pool_backing: view.pool_backing.clone(),
        flow_cache: match (&o.before.flow_cache, &o.after.flow_cache) {
            (Some(b), Some(a)) => Some(crate::flows::CacheDelta::between(b, a, o.ticks, tsc_hz)),
            _ => None,
        },
    }
}

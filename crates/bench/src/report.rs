//! Reports: the summary of one frame size (median run, all runs, the reference), its JSON line,
//! its human-readable text, and the throughput-by-frame-size Markdown table of a sweep.
//! Pure functions of measured figures: it never measures and never rounds before computing.

use crate::measure::{NodeFigure, RunResult};
use crate::testpmd::TestpmdRun;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// `a / b`, or 0 when `b` is not positive (a run that measured nothing).
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

pub use planner::input::WIRE_OVERHEAD;

/// Below this share of its CPU, a run is flagged as disturbed (by other tasks, or by the kernel's
/// real-time throttling: see `cpu_share_warning`).
pub const SHARED_CPU: f64 = 0.98;

/// Above this busy share of the other CPUs, a run is noted as possibly disturbed.
pub const OTHERS_BUSY: f64 = 0.25;

/// Gigabits per second on the wire of `pps` frames of `frame_size` bytes (FCS included).
pub fn gbps(pps: f64, frame_size: usize) -> f64 {
    pps * (frame_size + WIRE_OVERHEAD) as f64 * 8.0 / 1e9
}

/// Frames per second that fill a link of `link_gbps` at `frame_size`.
pub fn line_rate_pps(link_gbps: f64, frame_size: usize) -> f64 {
    link_gbps * 1e9 / ((frame_size + WIRE_OVERHEAD) as f64 * 8.0)
}

/// Index of the median of `values` (the lower middle for an even count), by value; None if
/// empty. Returning an index keeps the median a real run.
pub fn median_index(values: &[f64]) -> Option<usize> {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    idx.get(values.len().saturating_sub(1) / 2).copied()
}

/// The median of `values` (lower middle for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    median_index(values).map(|i| values[i])
}

/// The reference's figures beside ours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReferenceSummary {
    /// e.g. `dpdk-testpmd mac`.
    pub name: String,
    /// Median run's Mpps (forwarded, both ports).
    pub mpps: f64,
    /// Median run's cycles per packet.
    pub cycles_per_packet: f64,
    /// vecplane cycles/packet divided by the reference's (below 1: vecplane is cheaper).
    pub ratio: f64,
    /// Median run's forwarding-thread CPU share, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_cpu_share: Option<f64>,
    /// Median run's ticks per packet while on its CPU, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_cpu_cycles_per_packet: Option<f64>,
    /// The same ratio from on-CPU ticks (less sensitive to other tasks on the CPU), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_cpu_ratio: Option<f64>,
    /// Frame size the reference forwarded.
    pub frame_size: usize,
    /// Per-run cycles per packet.
    pub runs: Vec<f64>,
    /// Every run.
    pub all_runs: Vec<TestpmdRun>,
}

/// The result of R runs at one frame size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Frame size used (with FCS).
    pub frame_size: usize,
    /// Frame size asked for, when it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_size_requested: Option<usize>,
    /// Distinct flows.
    pub flows: u32,
    /// Random routes installed.
    pub routes: usize,
    /// Requested seconds per run.
    pub seconds: f64,
    /// Measured seconds of the median run.
    pub measured_seconds: f64,
    /// Warm-up seconds before each run.
    pub warmup_seconds: f64,
    /// Worker CPU.
    pub cpu: usize,
    /// Median run: packets received.
    pub packets: u64,
    /// Median run: Mpps.
    pub mpps: f64,
    /// Median run: Gbit/s on the wire (frame + 20 B).
    pub gbps: f64,
    /// Median run: percent of 10 GbE line rate.
    pub line_rate_10g_percent: f64,
    /// Median run: TSC ticks per packet.
    pub cycles_per_packet: f64,
    /// Median run: ticks per packet outside every node.
    pub dispatch_cycles_per_packet: f64,
    /// Median run: ticks per packet of the node calls that carried packets (empty polls left
    /// out).
    pub busy_cycles_per_packet: f64,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Median run: per-node figures.
    pub nodes: Vec<NodeFigure>,
    /// Median run: non-zero drops by `node/reason`.
    pub drops: BTreeMap<String, u64>,
    /// Median run: whether received = sent + dropped.
    pub accounted: bool,
    /// Median run: seconds to build the whole data plane (pool, FIBs with their route lists,
    /// graph).
    pub build_seconds: f64,
    /// Median run: FIB build seconds (ip4/ip6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fib_build_seconds: Option<f64>,
    /// Median run: FIB lookup-table bytes (ip4/ip6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fib_memory_bytes: Option<usize>,
    /// Median run: worker CPU time / wall time.
    pub worker_cpu_share: f64,
    /// Median run: ticks per packet while the worker was on its CPU.
    pub on_cpu_cycles_per_packet: f64,
    /// Median run: share of time the other CPUs were busy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub others_busy: Option<f64>,
    /// Median run: the share of each period the kernel's real-time throttling lets a
    /// real-time worker run (None: not a real-time worker, or no throttling).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rt_throttle: Option<f64>,
    /// What backs the buffer pool.
    pub pool_backing: String,
    /// 1-minute load average of the host when the summary was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_average: Option<f64>,
    /// Per-run cycles per packet, in run order.
    pub runs: Vec<f64>,
    /// Every run in full, in run order.
    pub all_runs: Vec<RunResult>,
    /// The reference run side by side, if asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceSummary>,
    /// Notes for the reader (e.g. a raised frame size).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What a summary is made from besides the runs.
#[derive(Clone, Debug)]
pub struct SummaryInput {
    /// Scenario name.
    pub scenario: String,
    /// Whether the scenario has a FIB.
    pub has_fib: bool,
    /// Frame size used.
    pub frame_size: usize,
    /// Frame size asked for.
    pub frame_size_requested: usize,
    /// Flows.
    pub flows: u32,
    /// Routes.
    pub routes: usize,
    /// Requested seconds.
    pub seconds: f64,
    /// Warm-up seconds.
    pub warmup_seconds: f64,
    /// Worker CPU.
    pub cpu: usize,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Notes.
    pub notes: Vec<String>,
}

/// Summarize `runs` (at least one) and the optional reference runs.
pub fn summarize(
    input: SummaryInput,
    runs: Vec<RunResult>,
    reference: Vec<TestpmdRun>,
) -> Option<Summary> {
    let cpp: Vec<f64> = runs.iter().map(|r| r.cycles_per_packet).collect();
    let m = runs.get(median_index(&cpp)?)?.clone();
    let pps = m.mpps * 1e6;
    let reference = if reference.is_empty() {
        None
    } else {
        let rcpp: Vec<f64> = reference.iter().map(|r| r.cycles_per_packet).collect();
        let rm = reference.get(median_index(&rcpp)?)?;
        Some(ReferenceSummary {
            name: crate::testpmd::NAME.to_string(),
            mpps: rm.mpps,
            cycles_per_packet: rm.cycles_per_packet,
            ratio: if rm.cycles_per_packet > 0.0 {
                m.cycles_per_packet / rm.cycles_per_packet
            } else {
                0.0
            },
            worker_cpu_share: rm.worker_cpu_share,
            on_cpu_cycles_per_packet: rm.on_cpu_cycles_per_packet,
            on_cpu_ratio: rm
                .on_cpu_cycles_per_packet
                .filter(|c| *c > 0.0)
                .map(|c| m.on_cpu_cycles_per_packet / c),
            frame_size: input.frame_size,
            runs: rcpp,
            all_runs: reference,
        })
    };
    Some(Summary {
        scenario: input.scenario,
        frame_size: input.frame_size,
        frame_size_requested: (input.frame_size_requested != input.frame_size)
            .then_some(input.frame_size_requested),
        flows: input.flows,
        routes: input.routes,
        seconds: input.seconds,
        measured_seconds: m.seconds,
        warmup_seconds: input.warmup_seconds,
        cpu: input.cpu,
        packets: m.packets,
        mpps: m.mpps,
        gbps: gbps(pps, input.frame_size),
        line_rate_10g_percent: 100.0 * pps / line_rate_pps(10.0, input.frame_size),
        cycles_per_packet: m.cycles_per_packet,
        dispatch_cycles_per_packet: m.dispatch_cycles_per_packet,
        busy_cycles_per_packet: m.busy_cycles_per_packet,
        tsc_hz: input.tsc_hz,
        nodes: m.nodes.clone(),
        drops: m.drops.clone(),
        accounted: m.accounted,
        build_seconds: m.build_seconds,
        fib_build_seconds: input.has_fib.then_some(m.fib_build_seconds),
        fib_memory_bytes: input.has_fib.then_some(m.fib_memory_bytes),
        worker_cpu_share: m.worker_cpu_share,
        on_cpu_cycles_per_packet: m.on_cpu_cycles_per_packet,
        others_busy: m.others_busy,
        rt_throttle: m.rt_throttle,
        pool_backing: m.pool_backing.clone(),
        load_average: crate::sys::load_average(),
        runs: cpp,
        all_runs: runs,
        reference,
        notes: input.notes,
    })
}

/// Why the worker had less than its whole CPU. A real-time worker (SCHED_FIFO/RR) cannot be
/// preempted by ordinary tasks; with the kernel's real-time throttling on, it is idled for the
/// rest of each period once it has run its share (or somewhat later, when another CPU lends it
/// its unused real-time time): a share at or above the throttling's is that, not other tasks.
fn cpu_share_warning(s: &Summary) -> String {
    let share = 100.0 * s.worker_cpu_share;
    match s.rt_throttle {
        Some(cap) if s.worker_cpu_share >= cap - 0.005 => format!(
            "note: the worker had {share:.1}% of its CPU: it is a real-time thread, which \
             ordinary tasks cannot preempt, and the kernel's real-time throttling \
             (kernel.sched_rt_runtime_us / sched_rt_period_us = {:.1}%, more when another CPU \
             lends it unused real-time time) idles it for the rest of each period; the \
             wall-clock figures count that idle time. `sysctl -w kernel.sched_rt_runtime_us=-1` \
             lifts it (at the risk of starving that CPU's other tasks). On-CPU: {:.1} \
             cycles/packet",
            100.0 * cap,
            s.on_cpu_cycles_per_packet
        ),
        _ => format!(
            "WARNING: the worker had only {share:.1}% of its CPU (load average {}): figures \
             include time taken by other tasks; on-CPU: {:.1} cycles/packet",
            s.load_average
                .map_or("?".to_string(), |l| format!("{l:.2}")),
            s.on_cpu_cycles_per_packet
        ),
    }
}

/// One JSON object on one line.
pub fn json_line(s: &Summary) -> serde_json::Result<String> {
    serde_json::to_string(s)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The human-readable report of one summary.
pub fn human(s: &Summary) -> String {
    let mut o = String::new();
    let _ = write!(o, "{} {} B, {} flow(s)", s.scenario, s.frame_size, s.flows);
    if s.fib_build_seconds.is_some() {
        let _ = write!(o, ", {} routes", s.routes);
    }
    let _ = writeln!(
        o,
        ": {} run(s) of {} s on CPU {} (TSC {:.3} GHz, pool on {})",
        s.runs.len(),
        s.seconds,
        s.cpu,
        s.tsc_hz as f64 / 1e9,
        s.pool_backing
    );
    for n in &s.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    let runs: Vec<String> = s.runs.iter().map(|c| format!("{c:.1}")).collect();
    let _ = writeln!(
        o,
        "  median run: {} packets in {:.2} s, {:.2} Mpps, {:.2} Gbit/s ({:.1}% of 10G), {:.1} cycles/packet (runs: {})",
        s.packets,
        s.measured_seconds,
        s.mpps,
        s.gbps,
        s.line_rate_10g_percent,
        s.cycles_per_packet,
        runs.join(", ")
    );
    if let (Some(t), Some(b)) = (s.fib_build_seconds, s.fib_memory_bytes) {
        let _ = writeln!(
            o,
            "  FIB: built in {t:.3} s, {:.1} MiB of lookup tables (whole data plane built in {:.3} s)",
            mib(b),
            s.build_seconds
        );
    } else {
        let _ = writeln!(o, "  data plane built in {:.3} s", s.build_seconds);
    }
    let _ = writeln!(
        o,
        "  {:<24} {:>14} {:>14}",
        "node", "packets", "cycles/packet"
    );
    for n in &s.nodes {
        let _ = writeln!(
            o,
            "  {:<24} {:>14} {:>14.1}",
            n.name, n.packets, n.cycles_per_packet
        );
    }
    let _ = writeln!(
        o,
        "  {:<24} {:>14} {:>14.1}",
        "(dispatch, outside nodes)", "", s.dispatch_cycles_per_packet
    );
    if s.drops.is_empty() {
        let _ = writeln!(o, "  drops: none");
    } else {
        let d: Vec<String> = s.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "  drops: {}", d.join(", "));
    }
    if !s.accounted {
        let _ = writeln!(o, "  WARNING: received != sent + dropped in the median run");
    }
    if s.worker_cpu_share < SHARED_CPU {
        let _ = writeln!(o, "  {}", cpu_share_warning(s));
    }
    if let Some(b) = s.others_busy.filter(|b| *b > OTHERS_BUSY) {
        let _ = writeln!(
            o,
            "  note: the other CPUs were {:.0}% busy during the median run; they share caches and memory with the worker, so figures may be inflated",
            100.0 * b
        );
    }
    if let Some(r) = &s.reference {
        let runs: Vec<String> = r.runs.iter().map(|c| format!("{c:.1}")).collect();
        let _ = writeln!(
            o,
            "  reference {}: {:.2} Mpps, {:.1} cycles/packet (runs: {}); ratio vecplane/reference {:.3}",
            r.name,
            r.mpps,
            r.cycles_per_packet,
            runs.join(", "),
            r.ratio
        );
        if let (Some(share), Some(c), Some(ratio)) = (
            r.worker_cpu_share,
            r.on_cpu_cycles_per_packet,
            r.on_cpu_ratio,
        ) {
            let _ = writeln!(
                o,
                "  on-CPU only: vecplane {:.1} ({:.1}% of its CPU), reference {:.1} ({:.1}%); ratio {:.3}",
                s.on_cpu_cycles_per_packet,
                100.0 * s.worker_cpu_share,
                c,
                100.0 * share,
                ratio
            );
        }
    }
    o
}

/// The throughput-by-frame-size table of a sweep, in Markdown.
pub fn sweep_table(summaries: &[Summary]) -> String {
    let reference = summaries
        .iter()
        .find_map(|s| s.reference.as_ref().map(|r| r.name.clone()));
    let mut o = String::new();
    if let Some(first) = summaries.first() {
        let _ = write!(
            o,
            "Throughput of `{}`, {} flow(s)",
            first.scenario, first.flows
        );
        if first.fib_build_seconds.is_some() {
            let _ = write!(o, ", {} routes", first.routes);
        }
        let _ = writeln!(
            o,
            ", one core (CPU {}), median of {} run(s) of {} s\n",
            first.cpu,
            first.runs.len(),
            first.seconds
        );
    }
    let _ = write!(
        o,
        "| frame size (B) | Mpps | Gbit/s | cycles/packet | % of 10G line rate |"
    );
    if let Some(name) = &reference {
        let _ = write!(o, " {name} Mpps | % of {name} |");
    }
    let _ = writeln!(o);
    let _ = write!(o, "| ---: | ---: | ---: | ---: | ---: |");
    if reference.is_some() {
        let _ = write!(o, " ---: | ---: |");
    }
    let _ = writeln!(o);
    let mut shared = false;
    for s in summaries {
        let mark = if s.worker_cpu_share < SHARED_CPU {
            shared = true;
            "*"
        } else {
            ""
        };
        let _ = write!(
            o,
            "| {} | {:.2} | {:.2} | {:.1}{mark} | {:.1} |",
            s.frame_size, s.mpps, s.gbps, s.cycles_per_packet, s.line_rate_10g_percent
        );
        if reference.is_some() {
            match &s.reference {
                Some(r) if r.mpps > 0.0 => {
                    let _ = write!(o, " {:.2} | {:.1} |", r.mpps, 100.0 * s.mpps / r.mpps);
                }
                _ => {
                    let _ = write!(o, " - | - |");
                }
            }
        }
        let _ = writeln!(o);
    }
    if shared {
        let _ = writeln!(
            o,
            "\n\\* the worker had less than {:.0}% of its CPU (other tasks ran on it, or the \
             kernel's real-time throttling idled it: `rt_throttle`); see `worker_cpu_share` and \
             `on_cpu_cycles_per_packet` in the JSON.",
            100.0 * SHARED_CPU
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpp: f64, packets: u64) -> RunResult {
        RunResult {
            packets,
            tx_packets: packets,
            dropped: 0,
            accounted: true,
            ticks: (cpp * packets as f64) as u64,
            seconds: 1.0,
            mpps: packets as f64 / 1e6,
            cycles_per_packet: cpp,
            dispatch_cycles_per_packet: 3.0,
            busy_cycles_per_packet: 0.0,
            nodes: vec![NodeFigure {
                name: "rx0-rx".into(),
                packets,
                cycles_per_packet: cpp / 2.0,
            }],
            drops: BTreeMap::new(),
            build_seconds: 0.1,
            fib_build_seconds: 0.5,
            fib_memory_bytes: 64 << 20,
            fib_routes: 10,
            worker_cpu_share: 1.0,
            on_cpu_cycles_per_packet: cpp,
            others_busy: Some(0.0),
            rt_throttle: None,
            involuntary_switches: 0,
            pool_backing: "normal pages".into(),
            flow_cache: None,
        }
    }

    #[test]
    fn a_share_cut_by_real_time_throttling_is_said_to_be_that() {
        let mut r = run(100.0, 10);
        r.worker_cpu_share = 0.95;
        r.on_cpu_cycles_per_packet = 95.0;
        r.rt_throttle = Some(0.95);
        let s = summarize(input(64), vec![r.clone()], vec![]).expect("summary");
        let w = cpu_share_warning(&s);
        assert!(
            w.starts_with("note: the worker had 95.0% of its CPU: it is a real-time thread")
                && w.contains("= 95.0%")
                && w.contains("kernel.sched_rt_runtime_us=-1")
                && w.ends_with("On-CPU: 95.0 cycles/packet"),
            "{w}"
        );
        assert!(human(&s).contains(&w), "{}", human(&s));
        // More than the throttling's share (another CPU lent it time): still the throttling.
        r.worker_cpu_share = 0.975;
        let s = summarize(input(64), vec![r.clone()], vec![]).expect("summary");
        assert!(cpu_share_warning(&s).starts_with("note: the worker had 97.5%"));
        // Less than the throttling allows: something else ran.
        r.worker_cpu_share = 0.80;
        let s = summarize(input(64), vec![r.clone()], vec![]).expect("summary");
        assert!(cpu_share_warning(&s).starts_with("WARNING: the worker had only 80.0%"));
        // Not a real-time worker.
        r.rt_throttle = None;
        r.worker_cpu_share = 0.95;
        let s = summarize(input(64), vec![r], vec![]).expect("summary");
        assert!(cpu_share_warning(&s).contains("time taken by other tasks"));
    }

    fn input(frame_size: usize) -> SummaryInput {
        SummaryInput {
            scenario: "ip4".into(),
            has_fib: true,
            frame_size,
            frame_size_requested: frame_size,
            flows: 65536,
            routes: 1000,
            seconds: 1.0,
            warmup_seconds: 0.2,
            cpu: 1,
            tsc_hz: 2_596_000_000,
            notes: vec![],
        }
    }

    #[test]
    fn gbps_counts_preamble_and_gap() {
        // 14.88 Mpps of 64-byte frames fill 10 GbE.
        assert!((gbps(14_880_952.38, 64) - 10.0).abs() < 1e-6);
        assert!((line_rate_pps(10.0, 64) - 14_880_952.38).abs() < 0.01);
        assert!((line_rate_pps(10.0, 1518) - 812_743.8).abs() < 0.1);
        assert!((gbps(1e6, 1518) - 12.304).abs() < 1e-9);
    }

    #[test]
    fn median_is_a_real_run() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median_index(&[9.0, 7.0, 8.0]), Some(2));
    }

    #[test]
    fn summary_picks_the_median_run_and_the_reference_ratio() {
        let runs = vec![run(100.0, 10), run(90.0, 20), run(110.0, 30)];
        let r = |cpp: f64| TestpmdRun {
            packets: 1,
            seconds: 1.0,
            mpps: 2596.0 / cpp,
            cycles_per_packet: cpp,
            periods: 1,
            accumulated_rx: None,
            worker_cpu_share: None,
            on_cpu_cycles_per_packet: None,
            others_busy: None,
        };
        let s = summarize(input(64), runs, vec![r(80.0), r(70.0), r(75.0)]).expect("summary");
        assert_eq!(s.packets, 10);
        assert_eq!(s.runs, vec![100.0, 90.0, 110.0]);
        let rf = s.reference.expect("reference");
        assert_eq!(rf.cycles_per_packet, 75.0);
        assert!((rf.ratio - 100.0 / 75.0).abs() < 1e-12);
        assert!(summarize(input(64), vec![], vec![]).is_none());
    }

    #[test]
    fn json_has_the_promised_keys() {
        let s = summarize(input(64), vec![run(100.0, 10)], vec![]).expect("summary");
        let v: serde_json::Value =
            serde_json::from_str(&json_line(&s).expect("json")).expect("parse");
        for k in [
            "scenario",
            "frame_size",
            "flows",
            "routes",
            "seconds",
            "packets",
            "mpps",
            "gbps",
            "cycles_per_packet",
            "tsc_hz",
            "nodes",
            "drops",
            "fib_build_seconds",
            "fib_memory_bytes",
            "runs",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        let node = &v["nodes"][0];
        for k in ["name", "packets", "cycles_per_packet"] {
            assert!(node.get(k).is_some(), "node misses {k}");
        }
        assert!(v["drops"].is_object());
        assert!(v.get("reference").is_none());
        assert!(!json_line(&s).expect("json").contains('\n'));
        let mut l2 = input(64);
        l2.has_fib = false;
        let s2 = summarize(l2, vec![run(50.0, 10)], vec![]).expect("summary");
        let v2: serde_json::Value = serde_json::to_value(&s2).expect("value");
        assert!(v2.get("fib_build_seconds").is_none());
    }

    #[test]
    fn sweep_table_renders_one_row_per_size() {
        let a = summarize(input(64), vec![run(100.0, 25_960_000)], vec![]).expect("a");
        let b = summarize(input(1518), vec![run(100.0, 25_960_000)], vec![]).expect("b");
        let t = sweep_table(&[a, b]);
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(
            lines[0],
            "| frame size (B) | Mpps | Gbit/s | cycles/packet | % of 10G line rate |"
        );
        assert_eq!(lines[2], "| 64 | 25.96 | 17.45 | 100.0 | 174.5 |");
        assert!(lines[3].starts_with("| 1518 | 25.96 | 319.41 |"));
        assert!(!t.contains('*'));
        let mut c = summarize(input(64), vec![run(100.0, 1)], vec![]).expect("c");
        c.worker_cpu_share = 0.5;
        let t = sweep_table(&[c]);
        assert!(
            t.contains("| 100.0* |") && t.contains("\\* the worker"),
            "{t}"
        );
    }

    #[test]
    fn sweep_table_has_reference_columns_when_measured() {
        let r = TestpmdRun {
            packets: 1,
            seconds: 1.0,
            mpps: 50.0,
            cycles_per_packet: 51.92,
            periods: 1,
            accumulated_rx: None,
            worker_cpu_share: None,
            on_cpu_cycles_per_packet: None,
            others_busy: None,
        };
        let a = summarize(input(64), vec![run(100.0, 25_000_000)], vec![r]).expect("a");
        let t = sweep_table(&[a]);
        assert!(
            t.contains("| dpdk-testpmd mac Mpps | % of dpdk-testpmd mac |"),
            "{t}"
        );
        assert!(t.contains("| 50.00 | 50.0 |"), "{t}");
    }
}

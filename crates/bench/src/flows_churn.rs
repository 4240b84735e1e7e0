//! `vecplane bench --scenario flows --churn`: flow churn as in "The Core Cost of Doing
//! Business": each flow sends K packets, a new flow starts every K packets, 10 s idle timeout;
//! pps per core against the hit percentage (a table, an SVG plot), the Amdahl prediction from the
//! hit and miss costs beside it, and per-second stability of one point. It owns the churn traffic
//! schedule and its report; it never changes the data plane it measures.

use crate::flows::{self, CacheDelta, CacheSnapshot, Common, FlowsSummary, Traffic};
use crate::measure;
use crate::report;
use crate::scenario::Scenario;
use crate::BenchArgs;
use anyhow::{anyhow, bail, Context, Result};
use dataplane::{Dataplane, FlowCachePolicy};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Distinct destination addresses in the churn schedule (inside the select group's /17).
pub const ADDRESSES: u32 = 8192;

/// Most packets per flow the schedule spaces out.
pub const MAX_PACKETS_PER_FLOW: u32 = 128;

/// Packets at least between two packets of one flow (four vectors: a flow's packets never
/// meet in one vector, where the node would translate them once and count every one a miss).
pub const MIN_SPACING: u32 = 1024;

/// Megaflow limit of the churn runs. Every point's flows come back only after the generator's
/// cycle (16,777,216 packets), which at 99% hits holds only 167,772 distinct flows: a cache
/// smaller than that (and LRU-like eviction) makes a returning flow a real miss, as a new flow
/// would be. At these rates the cache is always full, so eviction, not the 10 s idle timeout,
/// is what frees megaflows.
pub const CHURN_MEGAFLOW_LIMIT: usize = 100_000;

/// Packets per flow of the sweep (hit ratio 1 - 1/K: 0, 50, 75, 87.5, 90, 99%); the 100% point
/// is resident flows.
pub const SWEEP: [u32; 6] = [1, 2, 4, 8, 10, 100];

/// Resident flows of the 100% point (exact megaflows, all cached).
pub const RESIDENT_FLOWS: u32 = 8192;

/// The churn schedule for `k` packets per flow: (address index per destination slot, flows).
///
/// The memory port sends flow `i` to `destinations[i % d]` from source port `1024 + i / d`. With
/// `d = k * ADDRESSES` slots, slot `j = k*q + r` (q < ADDRESSES, r < k) holds address
/// `(q - r*D) mod ADDRESSES`: each address appears k times per source port, `k*D` packets apart,
/// and every k consecutive packets hold exactly one new flow. `D = max(64, MIN_SPACING / k)`.
pub fn schedule(k: u32) -> Result<(Vec<u32>, u32)> {
    if k == 0 || k > MAX_PACKETS_PER_FLOW {
        bail!("--packets-per-flow {k}: accepted 1..={MAX_PACKETS_PER_FLOW}");
    }
    let m = ADDRESSES;
    let spacing = (MIN_SPACING.div_ceil(k)).max(64);
    if (k - 1) * spacing >= m {
        bail!("--packets-per-flow {k}: the schedule cannot space its packets");
    }
    let mut dst = Vec::with_capacity((k * m) as usize);
    for q in 0..m {
        for r in 0..k {
            dst.push((q + m - (r * spacing) % m) % m);
        }
    }
    let d = k * m;
    let ports = (flows::MAX_FLOWS / d).min(65536);
    Ok((dst, d * ports))
}

/// One churn point.
#[derive(Clone, Debug, Serialize)]
pub struct ChurnPoint {
    /// Packets per flow (0: resident flows, the 100% point).
    pub packets_per_flow: u32,
    /// 1 - 1/K.
    pub nominal_hit_ratio: f64,
    /// Measured hits / lookups (median run).
    pub hit_ratio: f64,
    /// Packets per second on one core (median run).
    pub pps: f64,
    /// Cycles per packet (median run).
    pub cycles_per_packet: f64,
    /// New flows (misses) per second.
    pub new_flows_per_second: f64,
    /// Per-run pps.
    pub runs_pps: Vec<f64>,
    /// Median run's cache figures.
    pub flow_cache: Option<CacheDelta>,
    /// The Amdahl prediction from the hit and miss costs at the measured hit ratio.
    pub predicted_pps: f64,
    /// predicted / measured.
    pub prediction_ratio: f64,
}

/// The costs the planner combines (TSC ticks per packet), in `bench::profile`'s terms.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Costs {
    /// A packet that hits (resident exact megaflows, EMC on: what churn's hits are).
    pub hit: f64,
    /// A packet that misses (every packet a new flow).
    pub miss: f64,
    /// TSC ticks per second.
    pub tsc_hz: u64,
}

impl Costs {
    /// Amdahl's law as in "The Core Cost of Doing Business": a core spends `h*hit + (1-h)*miss`
    /// ticks per packet; pps = tsc_hz / that.
    pub fn predict_pps(&self, hit_ratio: f64) -> f64 {
        let h = hit_ratio.clamp(0.0, 1.0);
        let cpp = h * self.hit + (1.0 - h) * self.miss;
        if cpp > 0.0 {
            self.tsc_hz as f64 / cpp
        } else {
            0.0
        }
    }
}

fn churn_policy() -> FlowCachePolicy {
    FlowCachePolicy {
        megaflow_limit: CHURN_MEGAFLOW_LIMIT,
        ..FlowCachePolicy::default()
    }
}

/// Measure one churn point (`k` = 0: resident flows) with `runs` runs.
pub fn measure_point(args: &BenchArgs, c: &Common, k: u32) -> Result<FlowsSummary> {
    let traffic = if k == 0 {
        Traffic::Resident {
            flows: RESIDENT_FLOWS,
        }
    } else {
        Traffic::Churn {
            packets_per_flow: k,
        }
    };
    let rules_n = args.rules.unwrap_or(flows::DEFAULT_RULES);
    let emc = !args.no_emc;
    let base = flows::spec(traffic, rules_n, emc, churn_policy(), c.cpu)?;
    let frame = args.frame_size;
    crate::scenario::check_frame_size(frame)?;
    let dp = base.with_frame_size(frame)?;
    let mut runs = Vec::new();
    for r in 0..args.runs {
        let label = format!("flows churn K={k} {frame} B run {}/{}", r + 1, args.runs);
        runs.push(measure::run_once(
            &dp,
            Scenario::L2xc,
            &c.settings(args, args.seconds, label),
        )?);
    }
    let s = report::summarize(
        c.input(args, "flows", (frame, frame), base.flows, vec![]),
        runs,
        vec![],
    )
    .context("no run completed")?;
    Ok(FlowsSummary::new(
        s,
        if k == 0 { "resident" } else { "churn" },
        rules_n,
        emc,
        None,
    ))
}

fn point(k: u32, s: &FlowsSummary, costs: Option<&Costs>) -> ChurnPoint {
    let pps = s.summary.mpps * 1e6;
    let predicted = costs.map_or(0.0, |c| c.predict_pps(s.hit_ratio));
    ChurnPoint {
        packets_per_flow: k,
        nominal_hit_ratio: if k == 0 { 1.0 } else { 1.0 - 1.0 / k as f64 },
        hit_ratio: s.hit_ratio,
        pps,
        cycles_per_packet: s.summary.cycles_per_packet,
        new_flows_per_second: s.misses_per_second,
        runs_pps: s
            .summary
            .runs
            .iter()
            .map(|c| {
                if *c > 0.0 {
                    s.summary.tsc_hz as f64 / c
                } else {
                    0.0
                }
            })
            .collect(),
        flow_cache: s.flow_cache.clone(),
        predicted_pps: predicted,
        prediction_ratio: if pps > 0.0 { predicted / pps } else { 0.0 },
    }
}

/// The sweep: the miss cost (`--miss` traffic), the hit cost (resident flows) and every churn
/// point, each `args.runs` runs.
pub fn sweep(args: &BenchArgs, c: &Common, ks: &[u32]) -> Result<(Costs, Vec<ChurnPoint>)> {
    let rules_n = args.rules.unwrap_or(flows::DEFAULT_RULES);
    // The miss cost as `--miss` measures it (default cache policy, 16M distinct flows).
    let miss_spec = flows::spec(
        Traffic::Miss,
        rules_n,
        !args.no_emc,
        FlowCachePolicy::default(),
        c.cpu,
    )?
    .with_frame_size(args.frame_size)?;
    let mut miss_runs = Vec::new();
    for r in 0..args.runs {
        let label = format!(
            "flows miss {} B run {}/{}",
            args.frame_size,
            r + 1,
            args.runs
        );
        miss_runs.push(measure::run_once(
            &miss_spec,
            Scenario::L2xc,
            &c.settings(args, args.seconds, label),
        )?);
    }
    let cpp: Vec<f64> = miss_runs.iter().map(|r| r.cycles_per_packet).collect();
    let miss = report::median(&cpp).context("no miss run")?;
    let resident = measure_point(args, c, 0)?;
    let costs = Costs {
        hit: resident.summary.cycles_per_packet,
        miss,
        tsc_hz: c.tsc_hz,
    };
    let mut points = Vec::new();
    for &k in ks {
        let s = measure_point(args, c, k)?;
        points.push(point(k, &s, Some(&costs)));
    }
    points.push(point(0, &resident, Some(&costs)));
    Ok((costs, points))
}

/// The Markdown table of a sweep.
pub fn table(costs: &Costs, points: &[ChurnPoint]) -> String {
    let mut o = format!(
        "Churn, one core, 64 B unless said: hit cost {:.1} cycles/packet, miss cost {:.1} \
         (TSC {:.3} GHz)\n\n| packets/flow | hit % (nominal) | hit % (measured) | Mpps | cycles/packet | new flows/s | predicted Mpps | predicted / measured |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        costs.hit,
        costs.miss,
        costs.tsc_hz as f64 / 1e9
    );
    for p in points {
        let k = if p.packets_per_flow == 0 {
            "resident".to_string()
        } else {
            p.packets_per_flow.to_string()
        };
        o.push_str(&format!(
            "| {k} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0} | {:.2} | {:.3} |\n",
            100.0 * p.nominal_hit_ratio,
            100.0 * p.hit_ratio,
            p.pps / 1e6,
            p.cycles_per_packet,
            p.new_flows_per_second,
            p.predicted_pps / 1e6,
            p.prediction_ratio
        ));
    }
    o
}

/// Plot Mpps per core against the hit percentage (measured and predicted) as SVG.
pub fn plot(path: &Path, points: &[ChurnPoint]) -> Result<()> {
    use plotters::prelude::*;
    let mut pts: Vec<&ChurnPoint> = points.iter().collect();
    pts.sort_by(|a, b| a.hit_ratio.total_cmp(&b.hit_ratio));
    let ymax = pts
        .iter()
        .map(|p| p.pps.max(p.predicted_pps) / 1e6)
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    let err = |e: String| anyhow!("plotting {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "vecplane flow switch under churn: Mpps per core vs hit %",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..100f64, 0f64..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("cache hit % (measured)")
        .y_desc("Mpps, one core")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let measured: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (100.0 * p.hit_ratio, p.pps / 1e6))
        .collect();
    let predicted: Vec<(f64, f64)> = pts
        .iter()
        .map(|p| (100.0 * p.hit_ratio, p.predicted_pps / 1e6))
        .collect();
    chart
        .draw_series(LineSeries::new(measured.clone(), BLUE.stroke_width(2)))
        .map_err(|e| err(e.to_string()))?
        .label("measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart
        .draw_series(
            measured
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 4, BLUE.filled())),
        )
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(LineSeries::new(predicted, RED.stroke_width(1)))
        .map_err(|e| err(e.to_string()))?
        .label("Amdahl prediction from hit and miss costs")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// One second of a stability run.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// Seconds since the measurement began (end of the window).
    pub at_seconds: f64,
    /// Packets per second.
    pub pps: f64,
    /// Misses (new flows) per second.
    pub new_flows_per_second: f64,
    /// Hit ratio.
    pub hit_ratio: f64,
    /// Megaflows installed at the end.
    pub megaflows: u64,
    /// Evicted in the window.
    pub evicted: u64,
    /// Expired in the window.
    pub expired: u64,
}

/// Run one churn point for `args.seconds` in one-second windows on one data plane.
pub fn stability(args: &BenchArgs, c: &Common, k: u32) -> Result<Vec<Window>> {
    let rules_n = args.rules.unwrap_or(flows::DEFAULT_RULES);
    let spec = flows::spec(
        Traffic::Churn {
            packets_per_flow: k,
        },
        rules_n,
        !args.no_emc,
        churn_policy(),
        c.cpu,
    )?
    .with_frame_size(args.frame_size)?;
    let mut dp = Dataplane::with_tsc_hz(&spec, c.tsc_hz)
        .map_err(|e| anyhow!("building the data plane: {e}"))?;
    let view = dp.view().clone();
    let windows = args.seconds.ceil().max(1.0) as usize;
    let (warmup, cpu, tsc_hz) = (args.warmup, c.cpu, c.tsc_hz);
    std::thread::scope(|sc| {
        let h = std::thread::Builder::new()
            .name("bench-worker".into())
            .spawn_scoped(sc, || -> Result<Vec<Window>> {
                if !dataplane::pin_current_thread(cpu) {
                    bail!("cannot pin the worker to CPU {cpu}");
                }
                let stop = AtomicBool::new(false);
                if warmup > 0.0 {
                    dp.run_inline(
                        &stop,
                        Some(Instant::now() + Duration::from_secs_f64(warmup)),
                    );
                }
                let rx = || {
                    view.ports.first().map_or(0, |p| {
                        p.stats.iter().map(|s| s.rx_packets.get()).sum::<u64>()
                    })
                };
                let mut out = Vec::with_capacity(windows);
                let (mut p0, mut s0, mut t0) = (
                    rx(),
                    CacheSnapshot::take(&view).unwrap_or_default(),
                    graph::rdtsc(),
                );
                let start = t0;
                for _ in 0..windows {
                    dp.run_inline(&stop, Some(Instant::now() + Duration::from_secs(1)));
                    let (p1, s1, t1) = (
                        rx(),
                        CacheSnapshot::take(&view).unwrap_or_default(),
                        graph::rdtsc(),
                    );
                    let secs = t1.wrapping_sub(t0) as f64 / tsc_hz as f64;
                    let d = CacheDelta::between(&s0, &s1, t1.wrapping_sub(t0), tsc_hz);
                    out.push(Window {
                        at_seconds: t1.wrapping_sub(start) as f64 / tsc_hz as f64,
                        pps: p1.wrapping_sub(p0) as f64 / secs,
                        new_flows_per_second: d.misses_per_second,
                        hit_ratio: d.hit_ratio,
                        megaflows: d.megaflows,
                        evicted: d.evicted,
                        expired: d.expired,
                    });
                    (p0, s0, t0) = (p1, s1, t1);
                }
                Ok(out)
            })
            .map_err(|e| anyhow!("cannot start the worker thread: {e}"))?;
        h.join()
            .map_err(|_| anyhow!("the worker thread panicked"))?
    })
}

/// `--churn`: the sweep (table, SVG with `--plot`), or with `--packets-per-flow K` one point's
/// per-second stability.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.miss || args.flows.is_some() {
        bail!("--churn makes its own flows; leave out --miss and --flows");
    }
    let c = Common::new(args)?;
    if let Some(k) = args.packets_per_flow {
        let w = stability(args, &c, k)?;
        let pps: Vec<f64> = w.iter().map(|x| x.pps).collect();
        let nf: Vec<f64> = w.iter().map(|x| x.new_flows_per_second).collect();
        let (min, max) = (
            pps.iter().copied().fold(f64::INFINITY, f64::min),
            pps.iter().copied().fold(0.0, f64::max),
        );
        let mean = pps.iter().sum::<f64>() / pps.len().max(1) as f64;
        let sd =
            (pps.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / pps.len().max(1) as f64).sqrt();
        let j = serde_json::json!({
            "scenario": "flows",
            "mode": "churn-stability",
            "packets_per_flow": k,
            "frame_size": args.frame_size,
            "cpu": c.cpu,
            "tsc_hz": c.tsc_hz,
            "megaflow_limit": CHURN_MEGAFLOW_LIMIT,
            "idle_seconds": churn_policy().idle_seconds,
            "pps_median": report::median(&pps).unwrap_or(0.0),
            "pps_min": min,
            "pps_max": max,
            "pps_cv": if mean > 0.0 { sd / mean } else { 0.0 },
            "new_flows_per_second_median": report::median(&nf).unwrap_or(0.0),
            "windows": w,
        });
        if args.json {
            println!("{j}");
        } else {
            println!(
                "flows churn, {k} packets per flow, {} one-second windows on CPU {}:",
                w.len(),
                c.cpu
            );
            println!("| s | Mpps | new flows/s | hit % | megaflows | evicted | expired |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
            for x in &w {
                println!(
                    "| {:.0} | {:.2} | {:.0} | {:.2} | {} | {} | {} |",
                    x.at_seconds,
                    x.pps / 1e6,
                    x.new_flows_per_second,
                    100.0 * x.hit_ratio,
                    x.megaflows,
                    x.evicted,
                    x.expired
                );
            }
            println!(
                "pps median {:.2} M (min {:.2}, max {:.2}, CV {:.1}%), new flows/s median {:.0}",
                j["pps_median"].as_f64().unwrap_or(0.0) / 1e6,
                min / 1e6,
                max / 1e6,
                100.0 * j["pps_cv"].as_f64().unwrap_or(0.0),
                j["new_flows_per_second_median"].as_f64().unwrap_or(0.0)
            );
        }
        return Ok(());
    }
    let (costs, points) = sweep(args, &c, &SWEEP)?;
    if let Some(p) = &args.plot {
        plot(p, &points)?;
        eprintln!("plot written to {}", p.display());
    }
    if args.json {
        let j = serde_json::json!({
            "scenario": "flows",
            "mode": "churn",
            "frame_size": args.frame_size,
            "cpu": c.cpu,
            "tsc_hz": c.tsc_hz,
            "runs": args.runs,
            "seconds": args.seconds,
            "megaflow_limit": CHURN_MEGAFLOW_LIMIT,
            "idle_seconds": churn_policy().idle_seconds,
            "costs": costs,
            "profile_costs": profile_costs(&costs, args.frame_size),
            "points": points,
        });
        println!("{j}");
    } else {
        println!("{}", table(&costs, &points));
    }
    Ok(())
}

/// The measured costs in `bench::profile::Cost`'s JSON shape (path, protocol, frame size,
/// cycles per packet, scenario), ready for the profile writer once it is on main.
pub fn profile_costs(costs: &Costs, frame_size: usize) -> serde_json::Value {
    serde_json::json!([
        {"path": "emc-hit", "protocol": "ipv4", "frame_size": frame_size,
         "cycles_per_packet": costs.hit, "scenario": "flows", "flows": RESIDENT_FLOWS},
        {"path": "miss", "protocol": "ipv4", "frame_size": frame_size,
         "cycles_per_packet": costs.miss, "scenario": "flows", "flows": flows::MAX_FLOWS},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Replays the generator's rule (flow i -> destinations[i % d], port 1024 + i / d) over a
    /// stretch of packets and checks the schedule's promises.
    #[test]
    fn every_flow_sends_k_packets_spaced_apart_and_one_in_k_is_new() {
        for k in [1u32, 2, 4, 8, 10, 100] {
            let (dst, flows) = schedule(k).expect("schedule");
            let d = dst.len() as u32;
            assert_eq!(flows % d, 0);
            assert!(flows <= flows::MAX_FLOWS);
            let mut seen: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
            let n = (2 * d).min(flows);
            for i in 0..n {
                seen.entry((dst[(i % d) as usize], i / d))
                    .or_default()
                    .push(i);
            }
            assert_eq!(seen.len() as u32 * k, n, "k={k}: every flow k packets");
            for pos in seen.values() {
                assert_eq!(pos.len() as u32, k);
                for w in pos.windows(2) {
                    assert!(w[1] - w[0] >= MIN_SPACING.min(64 * k), "k={k}: spaced");
                }
            }
        }
        assert!(schedule(0).is_err());
        assert!(schedule(MAX_PACKETS_PER_FLOW + 1).is_err());
    }

    #[test]
    fn amdahl_prediction() {
        let c = Costs {
            hit: 100.0,
            miss: 1000.0,
            tsc_hz: 1_000_000_000,
        };
        assert!((c.predict_pps(1.0) - 1e7).abs() < 1e-3);
        assert!((c.predict_pps(0.0) - 1e6).abs() < 1e-3);
        assert!((c.predict_pps(0.5) - 1e9 / 550.0).abs() < 1e-3);
    }

    /// The planner check: the pps per core predicted from the hit and miss costs (Amdahl) is
    /// within 10% of the churn measurement at hit ratios 0, 50, 75, 90, 99 and 100%. Needs a
    /// quiet CPU and a release build:
    /// `cargo test --release -p vecplane-bench planner_predicts_churn -- --ignored --nocapture`.
    /// The costs come from the `--miss` run and the resident-flows run; when `vecplane plan`
    /// is on main, this calls its prediction instead of `Costs::predict_pps`.
    #[test]
    #[ignore]
    fn planner_predicts_churn_within_ten_percent() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let cli = Cli::parse_from([
            "t",
            "--scenario",
            "flows",
            "--churn",
            "--runs",
            "3",
            "--seconds",
            "2",
        ]);
        let c = Common::new(&cli.bench).expect("settings");
        let (costs, points) = sweep(&cli.bench, &c, &[1, 2, 4, 10, 100]).expect("sweep");
        println!("{}", table(&costs, &points));
        for p in &points {
            assert!(
                (p.prediction_ratio - 1.0).abs() <= 0.10,
                "K={} (hit {:.3}): predicted {:.0} pps, measured {:.0}",
                p.packets_per_flow,
                p.hit_ratio,
                p.predicted_pps,
                p.pps
            );
        }
    }
}

//! `vecplane bench --scenario flows`: the virtual switch on memory ports (rx0 -> tx0 in a bridge
//! in flow mode, a realistic rule table, 64 B, one core): the hit path beside the l2xc scenario
//! measured in the same run, and the pure miss path (`--miss`, every packet a new flow). It owns
//! the rule table, the traffic plans and the flow-cache figures; it never edits the data plane it
//! measures and takes its cache counters only from what the workers publish.

use crate::measure::{self, RunResult};
use crate::report::{self, Summary, SummaryInput};
use crate::scenario::{memory_port, Scenario, ScenarioSpec, RX0_MAC, TX0_MAC};
use crate::{sys, BenchArgs};
use anyhow::{anyhow, bail, Context, Result};
use dataplane::{
    BridgeMemberSpec, BridgePortMode, BridgeSpec, DataplaneSpec, FlowBridgeSpec, FlowCachePolicy,
    FlowPortSpec, PortDriver, RuntimeView,
};
use flow::cache::{CacheStats, CycleHistogram};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr};

/// Rules of the default table.
pub const DEFAULT_RULES: usize = 20;

/// Flows of the hit path when `--flows` is not given.
pub const DEFAULT_FLOWS: u32 = 1000;

/// The sender's address (outside every `nw_src` the table drops).
const SENDER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// First address of the prefix whose rule hands packets to the select group (198.19.128.0/17):
/// its megaflows are exact on the 5-tuple, so every new 5-tuple there is a real miss.
pub const SELECT_BASE: Ipv4Addr = Ipv4Addr::new(198, 19, 128, 0);

/// Addresses inside the select group's /17.
pub const SELECT_ADDRESSES: u32 = 1 << 15;

/// The table: 20 rules as `ovs-ofctl add-flow` would take them (rx0 is OpenFlow port 1, tx0 is
/// port 2). L2 matches with masks, L3 prefixes of several lengths on both addresses, L4 ports
/// exact and masked, DSCP and ICMP, overlapping priorities. The hit path's traffic (to
/// 198.19.0.0/18) ends in `udp,nw_dst=198.19.0.0/16` (priority 200) after the classifier has
/// ruled out the higher ones; the miss and churn traffic (198.19.128.0/17) in the select group.
pub const TABLE: [&str; DEFAULT_RULES] = [
    "priority=1000,arp,actions=normal",
    "priority=900,dl_src=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
    "priority=900,dl_dst=01:80:c2:00:00:00/ff:ff:ff:ff:ff:f0,actions=drop",
    "priority=800,ip,nw_src=10.0.0.0/8,actions=drop",
    "priority=800,ip,nw_src=172.16.0.0/12,actions=drop",
    "priority=800,ip,nw_src=192.168.0.0/16,actions=drop",
    "priority=700,icmp,nw_dst=198.19.0.0/16,icmp_type=8,actions=output:2",
    "priority=650,tcp,tp_dst=22,actions=drop",
    "priority=600,tcp,nw_dst=198.19.0.0/16,tp_dst=80,actions=output:2",
    "priority=600,tcp,nw_dst=198.19.0.0/16,tp_dst=443,actions=output:2",
    "priority=550,udp,tp_dst=53,actions=output:2",
    "priority=550,udp,nw_dst=198.19.64.0/18,tp_dst=0x1000/0xf000,actions=drop",
    "priority=500,udp,nw_dst=198.19.0.0/16,tp_src=0/0xfc00,actions=drop",
    "priority=450,udp,nw_dst=198.19.128.0/17,actions=group:1",
    "priority=400,ip,nw_dst=198.18.0.0/24,actions=output:1",
    "priority=400,ip,nw_dst=203.0.113.0/24,actions=drop",
    "priority=300,ip,nw_dst=198.19.32.0/19,ip_dscp=46,actions=output:2",
    "priority=200,udp,nw_dst=198.19.0.0/16,actions=output:2",
    "priority=100,ip,nw_dst=198.16.0.0/14,actions=output:2",
    "priority=0,actions=drop",
];

/// The select group of rule 14: hashes the 5-tuple (which makes its megaflows exact on it).
pub const GROUP: &str =
    "group_id=1,type=select,bucket=weight:50,actions=output:2,bucket=weight:50,actions=output:2";

/// The table with `n` rules: the 20 of [`TABLE`] (fewer: the first `n - 1` and the final
/// `priority=0` drop; the rules the traffic needs are kept), more: `/24` drop rules on
/// 203.0.0.0/16 and 100.64.0.0/10, each a distinct prefix the classifier has to rule out.
pub fn rule_texts(n: usize) -> Result<Vec<String>> {
    if n < 3 {
        bail!("--rules {n}: the flows table needs at least 3 rules (the hit rule, the select rule and the final drop)");
    }
    let mut out: Vec<String> = Vec::with_capacity(n);
    if n < DEFAULT_RULES {
        let needed = [13usize, 17];
        let extra = n - 1 - needed.len();
        out.extend(
            TABLE
                .iter()
                .enumerate()
                .filter(|(i, _)| !needed.contains(i) && *i != DEFAULT_RULES - 1)
                .take(extra)
                .map(|(_, t)| t.to_string()),
        );
        out.extend(needed.iter().map(|&i| TABLE[i].to_string()));
        out.push(TABLE[DEFAULT_RULES - 1].to_string());
        return Ok(out);
    }
    out.extend(TABLE.iter().map(|t| t.to_string()));
    for i in 0..n - DEFAULT_RULES {
        let prefix = if i < 256 {
            format!("203.0.{i}.0/24")
        } else {
            let j = i - 256;
            format!("100.{}.{}.0/24", 64 + (j >> 8) % 64, j & 255)
        };
        out.push(format!(
            "priority={},ip,nw_dst={prefix},actions=drop",
            250 + (i % 7) * 10
        ));
    }
    Ok(out)
}

/// The rules of a table of `n` rules, parsed as `ovs-ofctl add-flow` does.
pub fn rules(n: usize) -> Result<Vec<flow::Rule>> {
    rule_texts(n)?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            flow::ofctl::parse_flow(t).map_err(|e| anyhow!("flows table rule {}: {t}: {e}", i + 1))
        })
        .collect()
}

/// What the generator sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traffic {
    /// `flows` UDP flows to 198.19.0.0/18 (up to 1024 destinations, then source ports), all
    /// matching the priority-200 rule: after warm-up every packet hits a cache.
    Hit {
        /// Distinct flows.
        flows: u32,
    },
    /// Every packet a new 5-tuple: 256 destinations in the select group's prefix x 65,536
    /// source ports = 16,777,216 distinct flows in a cycle, each megaflow exact on them.
    Miss,
    /// The churn plan of `flows_churn`: each flow `packets_per_flow` packets, spaced apart.
    Churn {
        /// Packets each flow sends (1: every packet new).
        packets_per_flow: u32,
    },
    /// `flows` flows inside the select group's prefix (exact megaflows) that stay: the churn
    /// curve's 100% point.
    Resident {
        /// Distinct flows.
        flows: u32,
    },
}

/// Distinct 5-tuples the memory port can cycle through (ports::MAX_FLOWS).
pub const MAX_FLOWS: u32 = 1 << 24;

impl Traffic {
    /// The generator's destinations and flow count.
    pub fn plan(self) -> Result<(Vec<IpAddr>, u32)> {
        let v4 = |a: u32| IpAddr::V4(Ipv4Addr::from(a));
        match self {
            Traffic::Hit { flows } => {
                if flows == 0 || flows > MAX_FLOWS {
                    bail!("--flows {flows}: accepted 1..={MAX_FLOWS}");
                }
                let d = flows.min(1024);
                // 198.19.0.1, .17, .33, ... up to 198.19.63.241: spread over 198.19.0.0/18.
                let base = u32::from(Ipv4Addr::new(198, 19, 0, 1));
                Ok(((0..d).map(|j| v4(base + j * 16)).collect(), flows))
            }
            Traffic::Miss => {
                let base = u32::from(SELECT_BASE);
                Ok(((0..256).map(|j| v4(base + j)).collect(), MAX_FLOWS))
            }
            Traffic::Resident { flows } => {
                if flows == 0 || flows > MAX_FLOWS {
                    bail!("resident flows {flows}: accepted 1..={MAX_FLOWS}");
                }
                // Up to every address of the /17, then source ports.
                let base = u32::from(SELECT_BASE);
                let d = flows.min(SELECT_ADDRESSES);
                Ok(((0..d).map(|j| v4(base + j)).collect(), flows))
            }
            Traffic::Churn { packets_per_flow } => {
                let (dst, flows) = crate::flows_churn::schedule(packets_per_flow)?;
                let base = u32::from(SELECT_BASE);
                Ok((dst.into_iter().map(|a| v4(base + a)).collect(), flows))
            }
        }
    }
}

/// The data plane of the flows scenario: rx0 (OpenFlow port 1, generating `traffic`) and tx0
/// (port 2, a sink) in bridge `br0` in flow mode with a `rules`-rule table, the worker on `cpu`.
pub fn spec(
    traffic: Traffic,
    rules_n: usize,
    emc: bool,
    cache: FlowCachePolicy,
    cpu: usize,
) -> Result<ScenarioSpec> {
    let (dst, flows) = traffic.plan()?;
    let mut spec = DataplaneSpec {
        buffers: 16384,
        worker_cpu: Some(cpu),
        ..DataplaneSpec::default()
    };
    spec.ports = vec![
        memory_port("rx0", RX0_MAC, true, IpAddr::V4(SENDER), dst, flows),
        memory_port("tx0", TX0_MAC, false, IpAddr::V4(SENDER), vec![], 1),
    ];
    if let Some(PortDriver::Memory(m)) = spec.ports.get_mut(1).map(|p| &mut p.driver) {
        m.destinations = vec![m.src_ip];
    }
    let group = flow::ofctl::parse_group(GROUP).map_err(|e| anyhow!("flows group: {e}"))?;
    spec.bridges = vec![BridgeSpec {
        name: "br0".into(),
        ports: (0..2)
            .map(|port| BridgeMemberSpec {
                port,
                mode: BridgePortMode::Access { pvid: 1 },
            })
            .collect(),
        flow: Some(FlowBridgeSpec {
            ports: (0..2)
                .map(|port| FlowPortSpec {
                    port,
                    ofport: port as u16 + 1,
                    emc,
                    megaflow: true,
                })
                .collect(),
            rules: rules(rules_n)?,
            groups: vec![group],
            cache,
            frag: Default::default(),
        }),
    }];
    Ok(ScenarioSpec {
        scenario: Scenario::L2xc,
        routes: 0,
        flows,
        spec,
    })
}

/// The flow caches' counters (summed over bridges and workers) at one instant.
#[derive(Clone, Debug, Default)]
pub struct CacheSnapshot {
    stats: CacheStats,
    cycles: CycleHistogram,
}

impl CacheSnapshot {
    /// The counters the workers last published (they publish every `MAINTENANCE_MS`), or None
    /// when the data plane has no flow-mode bridge.
    pub fn take(view: &RuntimeView) -> Option<CacheSnapshot> {
        if view.flows.is_empty() {
            return None;
        }
        let mut s = CacheSnapshot::default();
        for sw in &view.flows {
            for (st, h) in sw.cache_stats() {
                s.stats.add(&st);
                s.cycles.merge(&h);
            }
        }
        Some(s)
    }
}

/// The flow caches over a measured interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CacheDelta {
    /// Exact-match cache hits.
    pub emc_hits: u64,
    /// Megaflow cache hits.
    pub megaflow_hits: u64,
    /// Keys neither cache answered (classified, installed, acted on).
    pub misses: u64,
    /// `misses` per second of the interval.
    pub misses_per_second: f64,
    /// Hits / (hits + misses).
    pub hit_ratio: f64,
    /// Mean TSC ticks of the node's slow path per miss (classify + install), from its
    /// cycles-per-miss histogram.
    pub slow_path_cycles_per_miss: f64,
    /// Megaflows installed.
    pub installed: u64,
    /// Megaflows evicted because the cache was full.
    pub evicted: u64,
    /// Megaflows expired after the idle timeout.
    pub expired: u64,
    /// Megaflows at the end (gauge).
    pub megaflows: u64,
    /// Subtables at the end (gauge).
    pub subtables: u64,
    /// Mean subtables visited per megaflow hit.
    pub subtables_per_hit: f64,
}

impl CacheDelta {
    /// The counters between `b` and `a`, over `ticks` TSC ticks at `tsc_hz`.
    pub fn between(b: &CacheSnapshot, a: &CacheSnapshot, ticks: u64, tsc_hz: u64) -> CacheDelta {
        let d = |x: u64, y: u64| x.wrapping_sub(y);
        let (sa, sb) = (&a.stats, &b.stats);
        let emc_hits = d(sa.emc_hits, sb.emc_hits);
        let megaflow_hits = d(sa.megaflow_hits, sb.megaflow_hits);
        let misses = d(sa.misses, sb.misses);
        let seconds = ticks as f64 / tsc_hz.max(1) as f64;
        let lookups = emc_hits + megaflow_hits + misses;
        let hist_n = a.cycles.count().wrapping_sub(b.cycles.count());
        let hist_sum = a.cycles.sum.wrapping_sub(b.cycles.sum);
        let visited = d(sa.subtables_visited, sb.subtables_visited);
        CacheDelta {
            emc_hits,
            megaflow_hits,
            misses,
            misses_per_second: if seconds > 0.0 {
                misses as f64 / seconds
            } else {
                0.0
            },
            hit_ratio: if lookups == 0 {
                0.0
            } else {
                (emc_hits + megaflow_hits) as f64 / lookups as f64
            },
            slow_path_cycles_per_miss: if hist_n == 0 {
                0.0
            } else {
                hist_sum as f64 / hist_n as f64
            },
            installed: d(sa.installed, sb.installed),
            evicted: d(sa.evicted, sb.evicted),
            expired: d(sa.expired, sb.expired),
            megaflows: sa.megaflows,
            subtables: sa.subtables,
            subtables_per_hit: if megaflow_hits == 0 {
                0.0
            } else {
                visited as f64 / megaflow_hits as f64
            },
        }
    }
}

/// The l2xc scenario measured in the same session, interleaved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct L2xcBeside {
    /// Median run's cycles per packet.
    pub cycles_per_packet: f64,
    /// Median run's Mpps.
    pub mpps: f64,
    /// Per-run cycles per packet.
    pub runs: Vec<f64>,
    /// flows cycles/packet divided by l2xc's (target: at most 2).
    pub ratio: f64,
    /// Median run's ticks per packet while on its CPU.
    pub on_cpu_cycles_per_packet: f64,
    /// The same ratio from on-CPU ticks (less sensitive to other tasks on the CPU).
    pub on_cpu_ratio: f64,
}

/// The flows scenario's report: the engine bench's keys plus the flow-cache figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowsSummary {
    /// The engine bench's summary (its keys appear at the top level).
    #[serde(flatten)]
    pub summary: Summary,
    /// `hit`, `miss`, `churn` or `resident`.
    pub mode: String,
    /// Rules in the table.
    pub rules: usize,
    /// Whether rx0 used the exact-match cache.
    pub emc: bool,
    /// Median run: exact-match cache hits.
    pub emc_hits: u64,
    /// Median run: megaflow cache hits.
    pub megaflow_hits: u64,
    /// Median run: misses.
    pub misses: u64,
    /// Median run: misses per second (one core).
    pub misses_per_second: f64,
    /// Median run: the core's TSC ticks per miss. With `--miss` (every packet a miss) that is
    /// the whole per-packet cost of a miss, receive to transmit; otherwise the node's slow path
    /// alone (`slow_path_cycles_per_miss`), see `cycles_per_miss_basis`.
    pub cycles_per_miss: f64,
    /// How `cycles_per_miss` was counted.
    pub cycles_per_miss_basis: String,
    /// Median run: hits / lookups.
    pub hit_ratio: f64,
    /// Median run: every cache figure.
    pub flow_cache: Option<CacheDelta>,
    /// The l2xc scenario in the same session (hit mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2xc: Option<L2xcBeside>,
}

/// Whether misses are (nearly) all the packets: then ticks / misses is a miss's whole cost.
fn all_miss(c: &CacheDelta, packets: u64) -> bool {
    packets > 0 && c.misses as f64 >= 0.99 * packets as f64
}

impl FlowsSummary {
    /// The summary of `s` (whose median run has flow-cache figures) for `mode`.
    pub fn new(s: Summary, mode: &str, rules: usize, emc: bool, l2xc: Option<L2xcBeside>) -> Self {
        let median = s
            .all_runs
            .iter()
            .find(|r| r.packets == s.packets && r.cycles_per_packet == s.cycles_per_packet)
            .and_then(|r| r.flow_cache.clone());
        let c = median.clone().unwrap_or(CacheDelta::between(
            &CacheSnapshot::default(),
            &CacheSnapshot::default(),
            0,
            1,
        ));
        let ticks = s.cycles_per_packet * s.packets as f64;
        let (cpm, basis) = if all_miss(&c, s.packets) {
            (
                ticks / c.misses as f64,
                "worker ticks / misses (every packet a miss: receive to transmit)",
            )
        } else {
            (
                c.slow_path_cycles_per_miss,
                "flow-switch slow path only (classify + install), the node's histogram",
            )
        };
        FlowsSummary {
            mode: mode.to_string(),
            rules,
            emc,
            emc_hits: c.emc_hits,
            megaflow_hits: c.megaflow_hits,
            misses: c.misses,
            misses_per_second: c.misses_per_second,
            cycles_per_miss: cpm,
            cycles_per_miss_basis: basis.to_string(),
            hit_ratio: c.hit_ratio,
            flow_cache: median,
            l2xc,
            summary: s,
        }
    }

    /// The report for people: the engine bench's text and the cache figures.
    pub fn human(&self) -> String {
        let mut o = report::human(&self.summary);
        o.push_str(&format!(
            "  flows ({} mode, {} rules, EMC {}): EMC hits {}, megaflow hits {}, misses {} \
             ({:.0}/s), hit ratio {:.4}, cycles/miss {:.0} ({})\n",
            self.mode,
            self.rules,
            if self.emc { "on" } else { "off" },
            self.emc_hits,
            self.megaflow_hits,
            self.misses,
            self.misses_per_second,
            self.hit_ratio,
            self.cycles_per_miss,
            self.cycles_per_miss_basis
        ));
        if let Some(c) = &self.flow_cache {
            o.push_str(&format!(
                "  megaflows {} in {} subtables ({:.2} visited per hit), installed {}, evicted {}, expired {}, slow path {:.0} cycles/miss\n",
                c.megaflows, c.subtables, c.subtables_per_hit, c.installed, c.evicted, c.expired,
                c.slow_path_cycles_per_miss
            ));
        }
        if let Some(l) = &self.l2xc {
            o.push_str(&format!(
                "  l2xc in the same session: {:.1} cycles/packet ({:.2} Mpps; runs {:?}); flows / l2xc = {:.2} (target <= 2); on-CPU {:.1} vs {:.1}: {:.2}\n",
                l.cycles_per_packet, l.mpps, l.runs, l.ratio, self.summary.on_cpu_cycles_per_packet, l.on_cpu_cycles_per_packet, l.on_cpu_ratio
            ));
        }
        o
    }
}

/// Settings shared by every flows run.
pub struct Common {
    /// CPU of the worker.
    pub cpu: usize,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Whether to print progress lines.
    pub progress: bool,
}

impl Common {
    /// Check the arguments every flows run shares and measure the TSC.
    pub fn new(args: &BenchArgs) -> Result<Common> {
        if args.runs == 0 {
            bail!("--runs must be at least 1");
        }
        if !(args.seconds > 0.0 && args.seconds.is_finite()) {
            bail!("--seconds must be a positive number");
        }
        if !(args.warmup >= 0.0 && args.warmup.is_finite()) {
            bail!("--warmup must be zero or a positive number");
        }
        if args.reference.is_some() {
            bail!(
                "--scenario flows takes no --reference (the l2xc scenario is measured beside it)"
            );
        }
        let cpu = match args.cpu {
            Some(c) => c,
            None => sys::last_cpu().context("cannot read this process's CPU affinity")?,
        };
        if !sys::allowed_cpus().contains(&cpu) {
            bail!("CPU {cpu} is not available to this process");
        }
        Ok(Common {
            cpu,
            tsc_hz: graph::measure_tsc_hz(250),
            progress: !args.no_progress,
        })
    }

    /// The settings of one measured run.
    pub fn settings(&self, args: &BenchArgs, seconds: f64, label: String) -> measure::RunSettings {
        measure::RunSettings {
            seconds,
            warmup: args.warmup,
            cpu: self.cpu,
            tsc_hz: self.tsc_hz,
            label,
            progress: self.progress,
            rx_on_every_port: false,
        }
    }

    /// The summary input of a flows run.
    pub fn input(
        &self,
        args: &BenchArgs,
        name: &str,
        frame: (usize, usize),
        flows: u32,
        notes: Vec<String>,
    ) -> SummaryInput {
        SummaryInput {
            scenario: name.to_string(),
            has_fib: false,
            frame_size: frame.1,
            frame_size_requested: frame.0,
            flows,
            routes: 0,
            seconds: args.seconds,
            warmup_seconds: args.warmup,
            cpu: self.cpu,
            tsc_hz: self.tsc_hz,
            notes,
        }
    }
}

fn warn_unaccounted(label: &str, r: &RunResult) {
    if !r.accounted {
        eprintln!(
            "warning: {label}: received {} but sent {} and dropped {}",
            r.packets, r.tx_packets, r.dropped
        );
    }
}

/// Run the hit (or `--miss`) flows scenario, calling `on_summary` per frame size.
pub fn run_with(
    args: &BenchArgs,
    on_summary: &mut dyn FnMut(&FlowsSummary),
) -> Result<Vec<FlowsSummary>> {
    let c = Common::new(args)?;
    let rules_n = args.rules.unwrap_or(DEFAULT_RULES);
    let emc = !args.no_emc;
    let (traffic, mode) = if args.miss {
        if args.flows.is_some() {
            bail!("--miss sends 16,777,216 distinct flows; leave out --flows");
        }
        (Traffic::Miss, "miss")
    } else {
        (
            Traffic::Hit {
                flows: args.flows.unwrap_or(DEFAULT_FLOWS),
            },
            "hit",
        )
    };
    let base = spec(traffic, rules_n, emc, FlowCachePolicy::default(), c.cpu)?;
    let l2 = ScenarioSpec::build(Scenario::L2xc, 0, base.flows, c.cpu, args.seed)?;
    let mut out = Vec::new();
    for (requested, frame_size, note) in crate::frame_sizes(args, Scenario::L2xc)? {
        let dp = base.with_frame_size(frame_size)?;
        let l2dp = l2.with_frame_size(frame_size)?;
        let mut runs = Vec::new();
        let mut l2runs = Vec::new();
        for r in 0..args.runs {
            let label = format!("flows {mode} {frame_size} B run {}/{}", r + 1, args.runs);
            let res = measure::run_once(
                &dp,
                Scenario::L2xc,
                &c.settings(args, args.seconds, label.clone()),
            )?;
            warn_unaccounted(&label, &res);
            runs.push(res);
            if !args.miss {
                let label = format!("l2xc {frame_size} B run {}/{}", r + 1, args.runs);
                let res = measure::run_once(
                    &l2dp,
                    Scenario::L2xc,
                    &c.settings(args, args.seconds, label.clone()),
                )?;
                warn_unaccounted(&label, &res);
                l2runs.push(res);
            }
        }
        let notes: Vec<String> = note.into_iter().collect();
        let s = report::summarize(
            c.input(args, "flows", (requested, frame_size), base.flows, notes),
            runs,
            vec![],
        )
        .context("no run completed")?;
        let l2xc = if l2runs.is_empty() {
            None
        } else {
            let cpp: Vec<f64> = l2runs.iter().map(|r| r.cycles_per_packet).collect();
            let m = report::median_index(&cpp)
                .and_then(|i| l2runs.get(i))
                .context("no l2xc run")?;
            Some(L2xcBeside {
                cycles_per_packet: m.cycles_per_packet,
                mpps: m.mpps,
                ratio: crate::report::ratio(s.cycles_per_packet, m.cycles_per_packet),
                runs: cpp,
                on_cpu_cycles_per_packet: m.on_cpu_cycles_per_packet,
                on_cpu_ratio: if m.on_cpu_cycles_per_packet > 0.0 {
                    s.on_cpu_cycles_per_packet / m.on_cpu_cycles_per_packet
                } else {
                    0.0
                },
            })
        };
        let fs = FlowsSummary::new(s, mode, rules_n, emc, l2xc);
        on_summary(&fs);
        out.push(fs);
    }
    Ok(out)
}

/// `vecplane bench --scenario flows`: hit path (with l2xc beside it), `--miss`, or `--churn`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.churn {
        return crate::flows_churn::run(args);
    }
    if args.packets_per_flow.is_some() || args.plot.is_some() {
        bail!("--packets-per-flow and --plot go with --churn");
    }
    let mut failed = None;
    let summaries = run_with(args, &mut |s| {
        if args.json {
            match serde_json::to_string(s) {
                Ok(line) => println!("{line}"),
                Err(e) => failed = Some(e),
            }
        } else {
            println!("{}", s.human());
        }
    })?;
    if let Some(e) = failed {
        return Err(e).context("cannot write the JSON report");
    }
    if !args.no_profile {
        record_costs(args, &summaries)?;
    }
    Ok(())
}

/// Which planner cost a run measured: only `--miss` (every packet a miss into a full table)
/// records one. The hit runs do not: their traffic is covered by two wide megaflows, far
/// cheaper than hits on a table of exact megaflows, which `--churn` measures for the profile.
fn cost_path(s: &FlowsSummary) -> Option<crate::profile::CostPath> {
    use crate::profile::CostPath;
    let total = s.emc_hits + s.megaflow_hits + s.misses;
    if total == 0 || s.mode != "miss" {
        return None;
    }
    (s.misses as f64 >= 0.99 * total as f64).then_some(CostPath::Miss)
}

/// Merge the costs these runs measured into the planner's profile (`vecplane plan` reads it)
/// and say where.
fn record_costs(args: &BenchArgs, summaries: &[FlowsSummary]) -> Result<()> {
    let costs: Vec<crate::profile::Cost> = summaries
        .iter()
        .filter_map(|s| {
            cost_path(s).map(|p| {
                crate::profile::cost_from_summary(&s.summary, p, crate::profile::Protocol::Ipv4)
            })
        })
        .collect();
    let Some(tsc_hz) = summaries.first().map(|s| s.summary.tsc_hz) else {
        return Ok(());
    };
    if costs.is_empty() {
        eprintln!(
            "note: only --miss and --churn runs measure planner costs; the planner profile is unchanged"
        );
        return Ok(());
    }
    let (file, _) = crate::profile::record(
        args.profile.as_deref(),
        crate::profile::HostFacts::current(tsc_hz),
        &costs,
    )
    .context("cannot write the planner profile")?;
    eprintln!(
        "planner profile: {} cost(s) merged into {} (vecplane plan reads it; --no-profile skips this)",
        costs.len(),
        file.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_at_every_size() {
        assert_eq!(rules(20).expect("20").len(), 20);
        for n in [3, 5, 19, 21, 300, 1000] {
            let r = rules(n).expect("table");
            assert_eq!(r.len(), n);
            assert!(rule_texts(n)
                .expect("texts")
                .iter()
                .any(|t| t.contains("group:1")));
        }
        assert!(rules(2).is_err());
        flow::ofctl::parse_group(GROUP).expect("group");
    }

    #[test]
    fn traffic_plans_fit_the_generator() {
        let (d, f) = Traffic::Hit { flows: 100_000 }.plan().expect("hit");
        assert_eq!((d.len(), f), (1024, 100_000));
        let (d, f) = Traffic::Miss.plan().expect("miss");
        assert_eq!((d.len(), f), (256, MAX_FLOWS));
        assert!(Traffic::Hit { flows: 0 }.plan().is_err());
    }
}

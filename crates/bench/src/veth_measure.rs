//! The packet-rate measurement the veth scenarios share: `vecplane gen tx` in A through a
//! topology (optionally churning flows), B0's receive counter over a window after a warm-up,
//! the forwarding and generator CPUs' shares from /proc/stat, and vecplane's per-node figures
//! when it is the data plane. It owns one run's measurement and the generator it starts; it
//! never builds or deletes a topology and never changes the data plane it measures.

use crate::veth::Plan;
use anyhow::{bail, Context, Result};
use netlab::{addr, Host, Spawned, Topology, Vecplane};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long the generator may take to get frames to B0.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Packets dropped because a CPU's input backlog was full (the second column of
/// /proc/net/softnet_stat, summed over CPUs): where the kernel's RPS path loses what the
/// forwarding CPU cannot take.
pub(crate) fn backlog_drops() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/softnet_stat").ok()?;
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|x| u64::from_str_radix(x, 16).ok())
        })
        .sum()
}

/// Jiffies of one CPU from /proc/stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    /// User and nice.
    pub(crate) user: u64,
    /// Softirq.
    pub(crate) softirq: u64,
    /// Everything but idle and iowait.
    pub(crate) busy: u64,
    /// Everything.
    pub(crate) total: u64,
}

impl CpuTimes {
    /// Shares of `later - self` in the total: (busy, user, softirq).
    pub(crate) fn shares(self, later: CpuTimes) -> (f64, f64, f64) {
        let t = later.total.saturating_sub(self.total);
        if t == 0 {
            return (0.0, 0.0, 0.0);
        }
        let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / t as f64;
        (
            share(self.busy, later.busy),
            share(self.user, later.user),
            share(self.softirq, later.softirq),
        )
    }
}

/// The jiffies of CPU `cpu` so far.
pub(crate) fn cpu_times(cpu: usize) -> Option<CpuTimes> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 7 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let idle = v[3] + v[4];
    Some(CpuTimes {
        user: v[0] + v[1],
        softirq: v[6],
        busy: total - idle,
        total,
    })
}

/// One measured run.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct PpsRun {
    /// Forwarded packets per second (B0's receive counter over the window).
    pub(crate) pps: f64,
    /// Packets counted in the window.
    pub(crate) packets: u64,
    /// Window length.
    pub(crate) seconds: f64,
    /// What the generator sent per second over its whole run (frames A0 accepted).
    pub(crate) offered_pps: f64,
    /// How the generator sent (`vecplane gen tx`'s `method`).
    pub(crate) generator: String,
    /// Share of the forwarding CPU that was busy in the window (vecplane polls: about 1).
    pub(crate) fwd_cpu_busy: f64,
    /// Share of the forwarding CPU spent in user space (vecplane's worker; for the kernel,
    /// other processes competing with its forwarding).
    pub(crate) fwd_cpu_user: f64,
    /// TSC ticks of the forwarding CPU's busy time per forwarded packet.
    pub(crate) cycles_per_packet: f64,
    /// Share of the generator's CPU spent in softirq: on veth, Ra's receive processing (NAPI)
    /// runs there, in the sender's context.
    pub(crate) gen_cpu_softirq: f64,
    /// TSC ticks per forwarded packet of the forwarding CPU's busy time plus the generator
    /// CPU's softirq time: all of R's work wherever it ran.
    pub(crate) r_cycles_per_packet: f64,
    /// B0 receive drops in the window.
    pub(crate) b0_rx_dropped: u64,
    /// Input backlog drops on any CPU in the window (the kernel's RPS path).
    pub(crate) backlog_drops: u64,
    /// vecplane only: per-node figures over the window (`show runtime`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) nodes: Vec<Value>,
    /// vecplane only: drops by node/reason over the window (`show errors`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) drops: Vec<Value>,
    /// vecplane only: sleeps of its workers in the window (adaptive polling).
    pub(crate) sleeps: u64,
    /// vecplane only: seconds its workers slept in the window (summed over workers).
    pub(crate) slept_seconds: f64,
}

/// Run the generator in A through `topo` and measure what reaches B0.
pub(crate) fn measure(
    p: &Plan,
    topo: &Topology,
    vp: Option<&Vecplane>,
    label: &str,
) -> Result<PpsRun> {
    measure_with(p, topo, vp, label, &|| Ok(()))
}

/// [`measure`], calling `at_window` after the warm-up, just before the window opens (to clear
/// a reference data plane's own counters).
pub(crate) fn measure_with(
    p: &Plan,
    topo: &Topology,
    vp: Option<&Vecplane>,
    label: &str,
    at_window: &dyn Fn() -> Result<()>,
) -> Result<PpsRun> {
    let n = topo.names().clone();
    let gen_seconds = START_TIMEOUT.as_secs_f64() + p.warmup + p.seconds + 5.0;
    let args: Vec<String> = vec![
        p.exe.to_string_lossy().into_owned(),
        "gen".into(),
        "tx".into(),
        "--interface".into(),
        n.a0.clone(),
        "--dst-mac".into(),
        topo.a_next_hop_mac().into(),
        "--src-mac".into(),
        addr::MAC_A0.into(),
        "--src-ip".into(),
        topo.a_ip4().to_string(),
        "--dst-ip".into(),
        topo.b_ip4().to_string(),
        "--flows".into(),
        p.flows.to_string(),
        "--frame-size".into(),
        p.frame_size.to_string(),
        "--seconds".into(),
        format!("{gen_seconds:.0}"),
        "--cpu".into(),
        p.gen_cpu.to_string(),
        "--json".into(),
        "--no-progress".into(),
    ];
    let mut args = args;
    if p.new_flows_per_second > 0 {
        args.push("--new-flows-per-second".into());
        args.push(p.new_flows_per_second.to_string());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let log = format!("gen-{}", label.replace([' ', '/'], "-"));
    let mut gen = topo.spawn(Host::A, &argv, &log)?;
    let result = measure_window(p, topo, vp, &mut gen, at_window);
    // Stop the generator (it prints its summary on SIGINT) whatever happened.
    let _ = gen.signal(libc::SIGINT);
    let status = gen.wait_timeout(Duration::from_secs(10))?;
    if status.is_none() {
        let _ = gen.stop(Duration::from_secs(1));
    }
    let mut run =
        result.with_context(|| format!("{label}; generator output:\n{}", gen.log().trim_end()))?;
    let summary = gen.log().lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l.trim())
            .ok()
            .filter(|v| v.is_object())
    });
    run.offered_pps = summary
        .as_ref()
        .and_then(|v| v.get("pps"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    run.generator = summary
        .as_ref()
        .and_then(|v| v.get("method"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(run)
}

fn b0_rx(topo: &Topology) -> Result<(netlab::LinkStats, Instant)> {
    let before = Instant::now();
    let s = topo.link_stats(Host::B, &topo.names().b0)?;
    let after = Instant::now();
    Ok((s, before + (after - before) / 2))
}

fn measure_window(
    p: &Plan,
    topo: &Topology,
    vp: Option<&Vecplane>,
    gen: &mut Spawned,
    at_window: &dyn Fn() -> Result<()>,
) -> Result<PpsRun> {
    let (start, _) = b0_rx(topo)?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(s) = gen.try_wait()? {
            bail!(
                "vecplane gen tx ended early ({})",
                netlab::cmd::describe_status(s)
            );
        }
        let (now, _) = b0_rx(topo)?;
        if now.rx_packets > start.rx_packets + 1000 {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "nothing reached B0 within {} s of starting the generator",
                START_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs_f64(p.warmup));
    if let Some(v) = vp {
        for what in ["runtime", "errors"] {
            v.request(&format!("clear {what}"), false)?;
        }
    }
    at_window()?;
    let e0 = EdgeSample::take(p);
    let (c1, t1) = b0_rx(topo)?;
    std::thread::sleep(Duration::from_secs_f64(p.seconds));
    let (c2, t2) = b0_rx(topo)?;
    let e1 = EdgeSample::take(p);
    let figures = match vp {
        Some(v) => vecplane_figures(v)?,
        None => (Vec::new(), Vec::new(), (0, 0.0)),
    };
    if let Some(s) = gen.try_wait()? {
        bail!(
            "vecplane gen tx ended inside the measured window ({})",
            netlab::cmd::describe_status(s)
        );
    }
    let seconds = t2.duration_since(t1).as_secs_f64().max(1e-3);
    let packets = c2.rx_packets.saturating_sub(c1.rx_packets);
    let mut run = window_run(p, packets, seconds, &e0, &e1, figures);
    run.b0_rx_dropped = c2.rx_dropped.saturating_sub(c1.rx_dropped);
    Ok(run)
}

/// What is sampled at each edge of a measured window: the forwarding and generator CPUs'
/// times and the kernel's backlog drops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EdgeSample {
    fwd: Option<CpuTimes>,
    gen: Option<CpuTimes>,
    backlog: Option<u64>,
}

impl EdgeSample {
    /// Sample now.
    pub(crate) fn take(p: &Plan) -> EdgeSample {
        EdgeSample {
            fwd: cpu_times(p.fwd_cpu),
            gen: cpu_times(p.gen_cpu),
            backlog: backlog_drops(),
        }
    }

    /// The forwarding CPU's times (for shares the caller computes itself).
    pub(crate) fn fwd(&self) -> Option<CpuTimes> {
        self.fwd
    }
}

/// The run of a window from `a` to `b` in which `packets` were counted in `seconds`, with
/// vecplane's per-node figures (`figures`, empty for a kernel run); `b0_rx_dropped` and the
/// generator fields are the caller's.
pub(crate) fn window_run(
    p: &Plan,
    packets: u64,
    seconds: f64,
    a: &EdgeSample,
    b: &EdgeSample,
    figures: (Vec<Value>, Vec<Value>, (u64, f64)),
) -> PpsRun {
    let pps = packets as f64 / seconds;
    let share = |x: Option<CpuTimes>, y: Option<CpuTimes>| match (x, y) {
        (Some(x), Some(y)) => x.shares(y),
        _ => (0.0, 0.0, 0.0),
    };
    let (busy, user, _) = share(a.fwd, b.fwd);
    let (_, _, gen_softirq) = share(a.gen, b.gen);
    let per_packet = |share: f64| {
        if pps > 0.0 {
            share * p.tsc_hz as f64 / pps
        } else {
            0.0
        }
    };
    let (nodes, drops, (sleeps, slept_seconds)) = figures;
    PpsRun {
        pps,
        packets,
        seconds,
        offered_pps: 0.0,
        generator: String::new(),
        fwd_cpu_busy: busy,
        fwd_cpu_user: user,
        cycles_per_packet: per_packet(busy),
        gen_cpu_softirq: gen_softirq,
        r_cycles_per_packet: per_packet(busy + gen_softirq),
        b0_rx_dropped: 0,
        backlog_drops: match (a.backlog, b.backlog) {
            (Some(x), Some(y)) => y.saturating_sub(x),
            _ => 0,
        },
        nodes,
        drops,
        sleeps,
        slept_seconds,
    }
}

/// Per-node figures and drops since the last clear.
#[allow(clippy::type_complexity)]
pub(crate) fn vecplane_figures(v: &Vecplane) -> Result<(Vec<Value>, Vec<Value>, (u64, f64))> {
    let rt = v.request("show runtime", true)?;
    let workers = rt
        .data
        .as_ref()
        .and_then(|d| d.get("workers"))
        .and_then(Value::as_array);
    let idle = workers.into_iter().flatten().fold((0, 0.0), |(n, s), w| {
        (
            n + w.get("sleeps").and_then(Value::as_u64).unwrap_or(0),
            s + w
                .get("slept_seconds")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        )
    });
    let nodes = rt
        .data
        .as_ref()
        .and_then(|d| d.get("total"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|n| n.get("packets").and_then(Value::as_u64).unwrap_or(0) > 0)
                .map(|n| {
                    json!({
                        "name": n.get("name").cloned().unwrap_or(Value::Null),
                        "packets": n.get("packets").cloned().unwrap_or(Value::Null),
                        "cycles_per_packet": n.get("clocks_per_packet").cloned().unwrap_or(Value::Null),
                        "vectors_per_call": n.get("vectors_per_call").cloned().unwrap_or(Value::Null),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let errs = v.request("show errors", true)?;
    let drops = errs
        .data
        .as_ref()
        .and_then(|d| d.get("errors"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok((nodes, drops, idle))
}

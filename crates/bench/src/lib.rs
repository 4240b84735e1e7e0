//! `vecplane bench`: benchmark scenarios run through the real graph (`Dataplane` with memory
//! ports, a pinned worker, `run_inline`), with cycles per packet from the TSC, per-node costs,
//! drops by reason, FIB build figures, frame-size sweeps and side-by-side reference runs of
//! `dpdk-testpmd`. It owns argument handling, scenario specs, measurement and reports; it never
//! replaces a stage of the real path with a shortcut, and never edits the data plane it measures.
#![deny(missing_docs)]

pub mod churn;
pub mod fibref;
pub mod fleet_sim;
pub mod flows;
pub mod flows_churn;
pub mod lb;
pub mod measure;
pub mod poll;
pub mod profile;
pub mod pvp;
pub mod report;
pub mod scenario;
pub(crate) mod scratch;
pub mod sys;
pub mod testpmd;
pub mod veth;
pub mod veth_lb;
pub(crate) mod veth_measure;
pub(crate) mod veth_report;
pub mod veth_switch;
pub(crate) mod vm;
pub mod vm_chain;
pub mod vm_tcp;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use report::Summary;
use scenario::{Scenario, ScenarioSpec};
use std::path::PathBuf;

/// A reference data plane measured side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reference {
    /// `dpdk-testpmd --forward-mode=mac` on two `net_null` vdevs (copy=1), one forwarding core.
    Testpmd,
    /// The Linux kernel in R (IPv4 forwarding or a bridge), for the veth scenarios; `ip
    /// -batch` into a namespace for route-churn.
    Kernel,
    /// DPDK's `rte_fib` through `dpdk-test-fib`, for the fib scenario.
    DpdkFib,
    /// Open vSwitch's userspace datapath with `afxdp` ports, for veth-switch.
    Ovs,
    /// The kernel's nftables DNAT through a `jhash` map over the same servers, for veth-lb.
    Nftables,
    /// Open vSwitch with DPDK and `dpdkvhostuserclient` ports (and the testpmd vhost floor),
    /// for pvp.
    OvsDpdk,
    /// Linux bridges with TAP ports for the same QEMU guests, for vm-tcp and vm-chain.
    LinuxBridge,
}

/// Arguments of `vecplane bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// What to benchmark.
    #[arg(long, value_enum)]
    pub scenario: veth::ScenarioArg,
    /// Random routes in the FIB [default: ip4 1000000, ip6 100000; l2xc has none].
    #[arg(long)]
    pub routes: Option<usize>,
    /// Distinct flows generated [default: l2xc 1, ip4/ip6 65536; fleet-sim 1000000, at most
    /// 1048576].
    #[arg(long)]
    pub flows: Option<u32>,
    /// Frame size in bytes including the FCS (ip6 raises sizes below 78 to 78).
    #[arg(long, default_value_t = 64, conflicts_with = "sweep")]
    pub frame_size: usize,
    /// Run 64, 128, 256, 512, 768, 1024, 1280 and 1518-byte frames and print a table.
    #[arg(long)]
    pub sweep: bool,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Runs per frame size (the median run by cycles/packet is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// CPU of the worker [default: the last CPU this process may use].
    #[arg(long)]
    pub cpu: Option<usize>,
    /// One JSON object per line per frame size on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also run a reference data plane, interleaved with vecplane's runs, on the same CPU.
    #[arg(long, value_enum)]
    pub reference: Option<Reference>,
    /// Seed of the random routes and flow destinations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Warm-up seconds before each measured run, on the same data plane (its counters are
    /// snapshotted after it and not reported); 0.5 s lets an idle core reach full speed.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Path of dpdk-testpmd.
    #[arg(long, default_value = testpmd::DEFAULT_PATH)]
    pub testpmd_path: PathBuf,
    /// Path of dpdk-test-fib (the fib scenario's reference).
    #[arg(long, default_value = fibref::DEFAULT_PATH)]
    pub dpdk_fib_path: PathBuf,
    /// Do not print progress lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// veth scenarios: vecplane's port driver.
    #[arg(long, value_enum, default_value_t = veth::VethDriver::Auto)]
    pub driver: veth::VethDriver,
    /// veth scenarios: N single-stream iperf3 TCP runs through each side (default 10) instead
    /// of the packet-rate runs; reports the spread in Gbit/s.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "10")]
    pub stability: Option<usize>,
    /// flows: rules in the OpenFlow table [default: 20].
    #[arg(long)]
    pub rules: Option<usize>,
    /// flows: every packet a new flow (16,777,216 distinct 5-tuples, exact megaflows).
    #[arg(long)]
    pub miss: bool,
    /// flows: rx0 skips the exact-match cache (every hit is a megaflow hit).
    #[arg(long)]
    pub no_emc: bool,
    /// flows: churn as in "The Core Cost of Doing Business": pps against the hit percentage;
    /// veth-switch: the generator starts new flows at a fixed rate (about `--flows` of them live
    /// at a time) instead of sending fixed flows.
    #[arg(long)]
    pub churn: bool,
    /// flows --churn: one point, K packets per flow, in one-second windows (stability).
    #[arg(long, value_name = "K")]
    pub packets_per_flow: Option<u32>,
    /// flows --churn: write the pps-against-hit-% plot to this SVG file; fleet-sim: the plot of
    /// the flows whose server changes against the servers removed.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// flows: the planner profile the measured costs are merged into (default
    /// $XDG_STATE_HOME/vecplane/profile.json, or ~/.local/state/vecplane/profile.json).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// flows: do not write the measured costs into the planner profile.
    #[arg(long)]
    pub no_profile: bool,
    /// lb: the VIP's encapsulation [default: l3dsr]; veth-lb: nat4 only (the default).
    #[arg(long, value_enum)]
    pub encap: Option<lb::EncapArg>,
    /// lb: servers behind the VIP [default: 100]; veth-lb: 1..=16 [default: 3]; fleet-sim:
    /// [default: 1000].
    #[arg(long)]
    pub servers: Option<u32>,
    /// ip4: also configure N load-balancer VIPs (UDP port 80, L3DSR, no servers) at addresses
    /// no generated packet goes to (198.19.0.0/16): what a packet to any other address pays
    /// for VIPs being there (at most 4096).
    #[arg(long, value_name = "N")]
    pub vips: Option<u32>,
    /// vm-tcp, vm-chain: vecplane's worker polls busily during its own runs (by default it
    /// polls adaptively, as vecplane's default config does: it sleeps when idle and a guest's
    /// kick wakes it, leaving the CPU to the guests).
    #[arg(long)]
    pub busy_worker: bool,
    /// pvp: the VM's virtio-user ports ask for packed virtqueues (`packed_vq=1`) instead of
    /// split ones, against every switch.
    #[arg(long)]
    pub packed_rings: bool,
    /// veth-switch with --churn: new flows per second [default: 100000].
    #[arg(long, value_name = "N")]
    pub new_flows_per_second: Option<u64>,
    /// vm-chain: the longest chain, in VNF guests (lengths 0..=N are measured) [default: 4].
    #[arg(long, value_name = "N")]
    pub max_vnfs: Option<u32>,
}

/// Frame sizes to run as (requested, used, note when they differ).
pub(crate) fn frame_sizes(
    args: &BenchArgs,
    scenario: Scenario,
) -> Result<Vec<(usize, usize, Option<String>)>> {
    let requested: Vec<usize> = if args.sweep {
        scenario::SWEEP_SIZES.to_vec()
    } else {
        vec![args.frame_size]
    };
    let mut out: Vec<(usize, usize, Option<String>)> = Vec::new();
    for r in requested {
        scenario::check_frame_size(r)?;
        let (used, note) = scenario::effective_frame_size(scenario, r);
        if !out.iter().any(|(_, u, _)| *u == used) {
            out.push((r, used, note));
        }
    }
    Ok(out)
}

/// Run the benchmark, calling `on_summary` as each frame size completes; returns every summary.
pub fn run_with(args: &BenchArgs, on_summary: &mut dyn FnMut(&Summary)) -> Result<Vec<Summary>> {
    let Some(scenario) = args.scenario.engine() else {
        bail!("the veth scenarios print their own report: use `bench::run`");
    };
    if args.reference == Some(Reference::Kernel) || args.stability.is_some() {
        bail!("--reference kernel and --stability are for the veth scenarios");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    if !(args.warmup >= 0.0 && args.warmup.is_finite()) {
        bail!("--warmup must be zero or a positive number");
    }
    let cpu = match args.cpu {
        Some(c) => c,
        None => sys::last_cpu().context("cannot read this process's CPU affinity")?,
    };
    if !sys::allowed_cpus().contains(&cpu) {
        bail!("CPU {cpu} is not available to this process");
    }
    if args.reference == Some(Reference::Testpmd) {
        testpmd::check_installed(&args.testpmd_path)?;
    }
    let sizes = frame_sizes(args, scenario)?;
    let progress = !args.no_progress;
    let mut notes = Vec::new();
    if scenario == Scenario::L2xc && args.routes.is_some_and(|r| r > 0) {
        notes.push("l2xc installs no routes; --routes is ignored".to_string());
    }
    if args.reference.is_some() && scenario != Scenario::L2xc {
        notes.push(
            "the reference forwards by MAC without any lookup: it is DPDK's I/O floor, not an \
             IP router"
                .to_string(),
        );
    }
    let routes = args.routes.unwrap_or_else(|| scenario.default_routes());
    let flows = args.flows.unwrap_or_else(|| scenario.default_flows());
    let tsc_hz = graph::measure_tsc_hz(250);
    if progress {
        eprintln!(
            "{}: generating {} routes and {} flows (seed {})",
            scenario.name(),
            if scenario.has_fib() { routes } else { 0 },
            flows,
            args.seed
        );
    }
    let mut base = ScenarioSpec::build(scenario, routes, flows, cpu, args.seed)?;
    if let Some(n) = args.vips {
        if scenario != Scenario::Ip4 {
            bail!("--vips is for --scenario ip4");
        }
        base.spec.lb = Some(lb::idle_vips(n)?);
        notes.push(format!(
            "{n} VIPs configured at addresses no generated packet goes to"
        ));
    }
    let mut summaries = Vec::new();
    for (requested, frame_size, note) in sizes {
        let spec = base.with_frame_size(frame_size)?;
        let mut notes = notes.clone();
        if let Some(n) = note {
            eprintln!("note: {n}");
            notes.push(n);
        }
        let mut runs = Vec::with_capacity(args.runs);
        let mut refs = Vec::new();
        for r in 0..args.runs {
            let settings = measure::RunSettings {
                seconds: args.seconds,
                warmup: args.warmup,
                cpu,
                tsc_hz,
                label: format!(
                    "{} {frame_size} B run {}/{}",
                    scenario.name(),
                    r + 1,
                    args.runs
                ),
                progress,
                rx_on_every_port: false,
            };
            let result = measure::run_once(&spec, scenario, &settings)?;
            if !result.accounted {
                eprintln!(
                    "warning: {}: received {} but sent {} and dropped {}",
                    settings.label, result.packets, result.tx_packets, result.dropped
                );
            }
            runs.push(result);
            if args.reference == Some(Reference::Testpmd) {
                let t = testpmd::TestpmdSettings {
                    path: args.testpmd_path.clone(),
                    frame_size,
                    seconds: args.seconds,
                    cpu,
                    tsc_hz,
                    label: format!("testpmd {frame_size} B run {}/{}", r + 1, args.runs),
                    progress,
                };
                refs.push(testpmd::run(&t)?);
            }
        }
        let input = report::SummaryInput {
            scenario: scenario.name().to_string(),
            has_fib: scenario.has_fib(),
            frame_size,
            frame_size_requested: requested,
            flows: base.flows,
            routes: base.routes,
            seconds: args.seconds,
            warmup_seconds: args.warmup,
            cpu,
            tsc_hz,
            notes,
        };
        let s = report::summarize(input, runs, refs).context("no run completed")?;
        on_summary(&s);
        summaries.push(s);
    }
    Ok(summaries)
}

/// `vecplane bench`: run, print each frame size's report (text, or a JSON line with `--json`)
/// on stdout, and with `--sweep` the Markdown table at the end (on stderr with `--json`, so
/// stdout stays one JSON object per line).
pub fn run(args: &BenchArgs) -> Result<()> {
    if let veth::ScenarioArg::Veth(v) = args.scenario {
        return veth::run(args, v);
    }
    if args.churn
        && !matches!(
            args.scenario,
            veth::ScenarioArg::VethSwitch | veth::ScenarioArg::Flows
        )
    {
        bail!("--churn is for --scenario flows and veth-switch");
    }
    let wanted = match args.scenario {
        veth::ScenarioArg::VethSwitch => Some(Reference::Ovs),
        veth::ScenarioArg::Pvp => Some(Reference::OvsDpdk),
        veth::ScenarioArg::VethLb => Some(Reference::Nftables),
        veth::ScenarioArg::VmTcp | veth::ScenarioArg::VmChain => Some(Reference::LinuxBridge),
        veth::ScenarioArg::Fib => Some(Reference::DpdkFib),
        veth::ScenarioArg::Poll
        | veth::ScenarioArg::Flows
        | veth::ScenarioArg::Lb
        | veth::ScenarioArg::FleetSim => None,
        veth::ScenarioArg::RouteChurn | veth::ScenarioArg::Veth(_) => Some(Reference::Kernel),
        veth::ScenarioArg::Engine(_) => Some(Reference::Testpmd),
    };
    if args.reference.is_some() && args.reference != wanted {
        bail!(
            "--reference {} does not go with this scenario; it takes --reference {}",
            args.reference
                .and_then(|r| r.to_possible_value())
                .map(|v| v.get_name().to_string())
                .unwrap_or_default(),
            wanted
                .and_then(|r| r.to_possible_value())
                .map(|v| v.get_name().to_string())
                .unwrap_or_default(),
        );
    }
    if args.scenario == veth::ScenarioArg::Poll {
        return poll::run(args);
    }
    if args.scenario == veth::ScenarioArg::Flows {
        return flows::run(args);
    }
    if args.scenario == veth::ScenarioArg::Lb {
        return lb::run(args);
    }
    if args.scenario == veth::ScenarioArg::Pvp {
        return pvp::run(args);
    }
    if args.scenario == veth::ScenarioArg::FleetSim {
        return fleet_sim::run(args);
    }
    if args.scenario == veth::ScenarioArg::VmTcp {
        return vm_tcp::run(args);
    }
    if args.scenario == veth::ScenarioArg::VmChain {
        return vm_chain::run(args);
    }
    if args.scenario == veth::ScenarioArg::VethSwitch {
        return veth_switch::run(args);
    }
    if args.scenario == veth::ScenarioArg::VethLb {
        return veth_lb::run(args);
    }
    if args.scenario == veth::ScenarioArg::Fib {
        return fibref::run(args);
    }
    if args.scenario == veth::ScenarioArg::RouteChurn {
        return churn::run(args, &|view, spec| {
            Ok(Box::new(churn::HttpApi::new(view, spec)?))
        });
    }
    let mut failed = None;
    let summaries = run_with(args, &mut |s| {
        if args.json {
            match report::json_line(s) {
                Ok(line) => println!("{line}"),
                Err(e) => failed = Some(e),
            }
        } else {
            println!("{}", report::human(s));
        }
    })?;
    if let Some(e) = failed {
        return Err(e).context("cannot write the JSON report");
    }
    if args.sweep {
        let table = report::sweep_table(&summaries);
        if args.json {
            eprintln!("{table}");
        } else {
            println!("{table}");
        }
    }
    Ok(())
}

//! `vecplane bench --scenario veth-router|veth-bridge`: vecplane against the Linux kernel on the
//! same veth + namespace topology (netlab's A - R - B), measured the same way. Each side gets its
//! own topology: R is vecplane (one worker pinned to the forwarding CPU, AF_XDP ports when this
//! build accepts them, else AF_PACKET) or the kernel (IPv4 forwarding or a Linux bridge, with RPS
//! steering its receive processing to the same CPU). Both are driven by the same generator,
//! `vecplane gen tx` in A on the other CPU, and counted by the same sink, B0's receive counter
//! (with a tc drop on B0's ingress so B's stack costs nothing); runs are interleaved and the
//! medians compared. `--stability` runs single-stream iperf3 TCP through both instead and reports
//! the spread. It owns those topologies and processes for the length of the run and deletes them
//! after (netlab also does on signals); it never modifies either data plane and never sends
//! traffic outside the namespaces it built.

use crate::report::median_index;
use crate::scenario::Scenario;
use crate::veth_report::{nodes_line, reference_keys, run_keys, with_keys};
use crate::{BenchArgs, Reference};
use anyhow::{bail, Context, Result};
use clap::builder::PossibleValue;
use netlab::{
    unsupported_feature, Addressing, Driver, Forwarding, Host, Mode, Spawned, Topology,
    Unsupported, VecplaneConfig,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

#[cfg(test)]
use crate::veth_measure::{backlog_drops, cpu_times, CpuTimes};
pub(crate) use crate::veth_measure::{measure, PpsRun};

/// A veth topology scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VethScenario {
    /// R routes 198.18.1.0/24 <-> 198.18.2.0/24 (reference: Linux IPv4 forwarding).
    Router,
    /// R bridges one subnet (reference: a Linux bridge).
    Bridge,
}

impl VethScenario {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            VethScenario::Router => "veth-router",
            VethScenario::Bridge => "veth-bridge",
        }
    }

    fn addressing(self) -> Addressing {
        match self {
            VethScenario::Router => Addressing::Routed,
            VethScenario::Bridge => Addressing::Bridged,
        }
    }

    fn kernel_mode(self) -> Mode {
        match self {
            VethScenario::Router => Mode::KernelRouter,
            VethScenario::Bridge => Mode::KernelBridge,
        }
    }

    fn reference_name(self) -> &'static str {
        match self {
            VethScenario::Router => "linux-ip-forward",
            VethScenario::Bridge => "linux-bridge",
        }
    }
}

/// What `--scenario` names: an engine scenario on memory ports, or a veth topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioArg {
    /// `l2xc`, `ip4`, `ip6`: the graph on memory ports.
    Engine(Scenario),
    /// `veth-router`, `veth-bridge`: namespaces and veths against the kernel.
    Veth(VethScenario),
    /// `route-churn`: routes through the API while forwarding, against `ip -batch`.
    RouteChurn,
    /// `fib`: lookups in the FIB alone, against DPDK's `rte_fib`.
    Fib,
    /// `poll`: the veth router with adaptive against busy polling.
    Poll,
    /// `flows`: the virtual switch (a bridge in flow mode) on memory ports.
    Flows,
    /// `veth-switch`: a flow-mode bridge against Open vSwitch's AF_XDP datapath.
    VethSwitch,
    /// `lb`: the load balancer on memory ports.
    Lb,
    /// `veth-lb`: the NAT4 load balancer in the netlab LB lab, against nftables DNAT.
    VethLb,
    /// `fleet-sim`: the scale-out simulation (load balancers behind ECMP; no packets).
    FleetSim,
    /// `pvp`: two vhost-user ports, testpmd's virtio-user as the VM (against Open vSwitch
    /// with DPDK).
    Pvp,
    /// `vm-tcp`: one TCP stream between two QEMU guests on vhost-user ports (against a Linux
    /// bridge with TAP ports).
    VmTcp,
    /// `vm-chain`: one TCP stream through a chain of 0..N VNF guests steered by flow rules
    /// (against Linux bridges with TAP ports).
    VmChain,
}

impl ScenarioArg {
    /// The engine scenario, if it is one.
    pub fn engine(self) -> Option<Scenario> {
        match self {
            ScenarioArg::Engine(s) => Some(s),
            ScenarioArg::Veth(_)
            | ScenarioArg::RouteChurn
            | ScenarioArg::Fib
            | ScenarioArg::Poll
            | ScenarioArg::Flows
            | ScenarioArg::VethSwitch
            | ScenarioArg::Lb
            | ScenarioArg::VethLb
            | ScenarioArg::FleetSim
            | ScenarioArg::Pvp
            | ScenarioArg::VmTcp
            | ScenarioArg::VmChain => None,
        }
    }
}

impl clap::ValueEnum for ScenarioArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            ScenarioArg::Engine(Scenario::L2xc),
            ScenarioArg::Engine(Scenario::Ip4),
            ScenarioArg::Engine(Scenario::Ip6),
            ScenarioArg::Veth(VethScenario::Router),
            ScenarioArg::Veth(VethScenario::Bridge),
            ScenarioArg::RouteChurn,
            ScenarioArg::Fib,
            ScenarioArg::Poll,
            ScenarioArg::Flows,
            ScenarioArg::VethSwitch,
            ScenarioArg::Lb,
            ScenarioArg::VethLb,
            ScenarioArg::FleetSim,
            ScenarioArg::Pvp,
            ScenarioArg::VmTcp,
            ScenarioArg::VmChain,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            ScenarioArg::Engine(s) => s.to_possible_value(),
            ScenarioArg::Veth(VethScenario::Router) => {
                Some(PossibleValue::new("veth-router").help(
                    "Namespaces A - R - B over veths, R routing (vecplane vs Linux forwarding)",
                ))
            }
            ScenarioArg::Veth(VethScenario::Bridge) => {
                Some(PossibleValue::new("veth-bridge").help(
                    "Namespaces A - R - B over veths, R bridging (vecplane vs a Linux bridge)",
                ))
            }
            ScenarioArg::RouteChurn => Some(PossibleValue::new("route-churn").help(
                "Load routes through the API while forwarding, churn them, time visibility \
                 (vs ip -batch into a namespace)",
            )),
            ScenarioArg::Flows => Some(PossibleValue::new("flows").help(
                "The virtual switch: a flow-mode bridge with a 20-rule table on memory ports (hit \
                 path beside l2xc, --miss, --churn)",
            )),
            ScenarioArg::VethSwitch => Some(PossibleValue::new("veth-switch").help(
                "Namespaces A - R - B over veths, R a flow-mode bridge (OpenFlow rules; vs Open \
                 vSwitch's AF_XDP datapath with --reference ovs; --churn for new flows)",
            )),
            ScenarioArg::Lb => Some(PossibleValue::new("lb").help(
                "The load balancer on memory ports: one VIP, --servers servers, --encap, --flows \
                 existing flows or --miss (every packet a new flow), beside the ip4 scenario",
            )),
            ScenarioArg::VethLb => Some(PossibleValue::new("veth-lb").help(
                "The load balancer in a client - router - LB - servers veth lab: NAT4, --flows \
                 UDP flows to one VIP over --servers servers (vs nftables DNAT through a jhash \
                 map with --reference nftables)",
            )),
            ScenarioArg::FleetSim => Some(PossibleValue::new("fleet-sim").help(
                "Scale-out simulation, no packets: 100 load balancers behind ECMP, --servers \
                 servers [1000], --flows flows [1000000]; the share of flows whose server changes \
                 when load balancers or servers come and go (--plot FILE: SVG)",
            )),
            ScenarioArg::Pvp => Some(PossibleValue::new("pvp").help(
                "Two vhost-user ports, dpdk-testpmd's virtio-user as the VM in an io loop (vs Open \
                 vSwitch with DPDK and the testpmd vhost floor with --reference ovs-dpdk)",
            )),
            ScenarioArg::VmTcp => Some(PossibleValue::new("vm-tcp").help(
                "One iperf3 TCP stream between two QEMU guests on vhost-user ports of a vecplane \
                 bridge, --runs times (vs a Linux bridge with TAP ports, interleaved, with \
                 --reference linux-bridge): mean, median, coefficient of variation, TSO",
            )),
            ScenarioArg::VmChain => Some(PossibleValue::new("vm-chain").help(
                "One iperf3 TCP stream through a chain of 0..--max-vnfs [4] VNF guests steered \
                 by flow rules (vs Linux bridges with TAP ports with --reference \
                 linux-bridge): Gbit/s by chain length, table and --plot FILE.svg",
            )),
            ScenarioArg::Poll => Some(PossibleValue::new("poll").help(
                "The veth router polling adaptively and busily: idle CPU and forwarding rate",
            )),
            ScenarioArg::Fib => Some(PossibleValue::new("fib").help(
                "FIB lookups alone, IPv4 and IPv6, on the same routes and addresses as DPDK's \
                 rte_fib (--reference dpdk-fib)",
            )),
        }
    }
}

/// vecplane's port driver in the veth scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum VethDriver {
    /// af-xdp if this build accepts and can start it, else af-packet (said in the report).
    Auto,
    /// AF_XDP only.
    AfXdp,
    /// AF_PACKET only.
    AfPacket,
}

/// Namespace prefixes of the vecplane and kernel topologies.
const PREFIX_VECPLANE: &str = "vbv";
const PREFIX_KERNEL: &str = "vbk";

/// Everything a veth run needs, resolved from the arguments.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) scenario: VethScenario,
    pub(crate) seconds: f64,
    pub(crate) warmup: f64,
    pub(crate) runs: usize,
    pub(crate) frame_size: usize,
    pub(crate) flows: u32,
    pub(crate) fwd_cpu: usize,
    pub(crate) gen_cpu: usize,
    pub(crate) driver: VethDriver,
    pub(crate) reference: bool,
    pub(crate) exe: PathBuf,
    pub(crate) tsc_hz: u64,
    pub(crate) progress: bool,
    /// `vecplane gen tx --new-flows-per-second` (0: fixed flows).
    pub(crate) new_flows_per_second: u64,
}

pub(crate) fn plan(args: &BenchArgs, scenario: VethScenario) -> Result<Plan> {
    if args.sweep {
        bail!("--sweep is for the engine scenarios (l2xc, ip4, ip6); use --frame-size");
    }
    if matches!(
        args.reference,
        Some(Reference::Testpmd | Reference::DpdkFib)
    ) {
        bail!("{}: the reference is `--reference kernel`", scenario.name());
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(args.seconds >= 1.0 && args.seconds.is_finite()) {
        bail!("--seconds must be at least 1 for the veth scenarios");
    }
    if !(args.warmup >= 0.0 && args.warmup.is_finite()) {
        bail!("--warmup must be zero or a positive number");
    }
    if !(64..=1518).contains(&args.frame_size) {
        bail!("--frame-size: accepted: 64..=1518 for the veth scenarios");
    }
    let cpus = crate::sys::allowed_cpus();
    let fwd_cpu = match args.cpu {
        Some(c) => c,
        None => *cpus
            .last()
            .context("cannot read this process's CPU affinity")?,
    };
    if !cpus.contains(&fwd_cpu) {
        bail!("CPU {fwd_cpu} is not available to this process");
    }
    let Some(&gen_cpu) = cpus.iter().find(|&&c| c != fwd_cpu) else {
        bail!(
            "the veth scenarios need two CPUs (the generator's and the forwarding one); this \
             process may use only CPU {fwd_cpu}"
        );
    };
    let mut tools = vec!["ip", "ethtool"];
    if args.stability.is_some() {
        tools.push("iperf3");
    } else {
        tools.push("tc");
    }
    if let Some(why) = netlab::missing_prerequisite(&tools) {
        bail!("{}: {why}", scenario.name());
    }
    let exe = std::env::current_exe().context("cannot find the vecplane binary")?;
    if args.stability.is_none() {
        let out = netlab::cmd::run_bounded(
            &[exe.as_os_str(), "gen".as_ref(), "--help".as_ref()],
            Duration::from_secs(10),
        )?;
        if !out.status.success() {
            bail!(
                "{} has no `gen` subcommand: the veth scenarios drive both data planes with \
                 `vecplane gen tx`",
                exe.display()
            );
        }
    }
    Ok(Plan {
        scenario,
        seconds: args.seconds,
        warmup: args.warmup.max(0.5),
        runs: args.runs,
        frame_size: args.frame_size,
        flows: args.flows.unwrap_or(1024),
        fwd_cpu,
        gen_cpu,
        driver: args.driver,
        reference: args.reference == Some(Reference::Kernel),
        exe,
        tsc_hz: graph::measure_tsc_hz(250),
        progress: !args.no_progress,
        new_flows_per_second: 0,
    })
}

/// `vecplane bench --scenario veth-*`: build, measure, print (text or one JSON line).
pub fn run(args: &BenchArgs, scenario: VethScenario) -> Result<()> {
    let p = plan(args, scenario)?;
    netlab::install_cleanup_handlers()?;
    let report = match args.stability {
        Some(n) => stability(&p, n)?,
        None => throughput(&p)?,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report.json).context("cannot write the JSON report")?
        );
    } else {
        print!("{}", report.text);
    }
    Ok(())
}

/// A finished report.
struct Report {
    text: String,
    json: Value,
}

/// The vecplane side's topology and the config it runs.
pub(crate) struct VecplaneSide {
    pub(crate) topo: Topology,
    pub(crate) config: PathBuf,
    pub(crate) driver: Driver,
    forwarding: Forwarding,
    notes: Vec<String>,
}

/// Build the vecplane topology and find the config this build accepts and can start: af-xdp
/// first (unless told otherwise), then af-packet; for the bridge, a bridge domain, else two
/// cross-connects (said in the notes).
pub(crate) fn vecplane_side(p: &Plan) -> Result<VecplaneSide> {
    let topo =
        Topology::build_with_prefix(PREFIX_VECPLANE, Mode::Dataplane(p.scenario.addressing()))?;
    let drivers: Vec<Driver> = match p.driver {
        VethDriver::Auto => vec![Driver::AF_XDP, Driver::AfPacket],
        VethDriver::AfXdp => vec![Driver::AF_XDP],
        VethDriver::AfPacket => vec![Driver::AfPacket],
    };
    let mut notes = Vec::new();
    let mut forwarding = match p.scenario {
        VethScenario::Router => Forwarding::Router,
        VethScenario::Bridge => Forwarding::Bridge,
    };
    let mut last_error = None;
    for (i, &driver) in drivers.iter().enumerate() {
        let mut cfg = VecplaneConfig {
            driver,
            forwarding,
            worker_cpu: Some(p.fwd_cpu),
            buffers: None,
        };
        let mut written = topo.write_vecplane_config(&cfg);
        if let Err(e) = &written {
            let feature = e
                .downcast_ref::<control::ConfigError>()
                .and_then(unsupported_feature);
            if feature == Some(Unsupported::Bridge) && forwarding == Forwarding::Bridge {
                notes.push(
                    "this build of vecplane does not accept [[bridge]] yet: the vecplane side \
                     is two L2 cross-connects (Ra <-> Rb), not a learning bridge"
                        .to_string(),
                );
                forwarding = Forwarding::Xconnect;
                cfg.forwarding = forwarding;
                written = topo.write_vecplane_config(&cfg);
            }
        }
        let attempt = written.and_then(|config| {
            // One start proves the driver works here (AF_XDP may be refused at run time).
            let v = topo.start_vecplane(&p.exe, &config)?;
            v.stop()?;
            Ok(config)
        });
        match attempt {
            Ok(config) => {
                if i > 0 {
                    notes.push(format!(
                        "driver {} was not usable ({}); measured with {}",
                        drivers[0].name(),
                        last_error.as_deref().unwrap_or("unknown"),
                        driver.name()
                    ));
                }
                return Ok(VecplaneSide {
                    topo,
                    config,
                    driver,
                    forwarding,
                    notes,
                });
            }
            Err(e) => {
                let why = match e
                    .downcast_ref::<control::ConfigError>()
                    .and_then(unsupported_feature)
                {
                    Some(Unsupported::Driver) => {
                        format!("this build does not accept driver = \"{}\"", driver.name())
                    }
                    _ => format!("{e:#}"),
                };
                if p.progress {
                    eprintln!(
                        "{}: vecplane with {}: {why}",
                        p.scenario.name(),
                        driver.name()
                    );
                }
                last_error = Some(why);
            }
        }
    }
    bail!(
        "no vecplane configuration could run here: {}",
        last_error.unwrap_or_default()
    )
}

/// Build the kernel topology with its receive processing steered to the forwarding CPU.
fn kernel_side(p: &Plan) -> Result<Topology> {
    let topo = Topology::build_with_prefix(PREFIX_KERNEL, p.scenario.kernel_mode())?;
    let n = topo.names().clone();
    for dev in [&n.ra, &n.rb] {
        topo.set_rps(Host::R, dev, &[p.fwd_cpu])?;
    }
    Ok(topo)
}

/// Settings of both topologies for the packet-rate runs: GRO on Ra gives it the NAPI context a
/// generator transmitting with XDP into A0 needs when Ra has no XDP program of its own (64-byte
/// UDP frames are never merged), and the sink on B0.
pub(crate) fn prepare_pps(topo: &Topology) -> Result<()> {
    let ra = topo.names().ra.clone();
    topo.ethtool_k(Host::R, &ra, &[("gro", true)])?;
    install_sink(topo)
}

/// Drop everything arriving on B0 at tc ingress: B0's receive counter has counted it by then,
/// and B's IP stack (and its ICMP errors) cost nothing. The filter is a one-instruction classic
/// BPF program returning TC_ACT_SHOT (2) in direct-action mode, which needs neither the matchall
/// classifier nor the gact action module (some kernels have neither).
fn install_sink(topo: &Topology) -> Result<()> {
    let b0 = topo.names().b0.clone();
    topo.exec_ok(Host::B, &["tc", "qdisc", "add", "dev", &b0, "clsact"])?;
    topo.exec_ok(
        Host::B,
        &[
            "tc",
            "filter",
            "add",
            "dev",
            &b0,
            "ingress",
            "bpf",
            "da",
            "bytecode",
            "1,6 0 0 2",
        ],
    )?;
    Ok(())
}

pub(crate) fn progress(p: &Plan, line: String) {
    if p.progress {
        eprintln!("{}: {line}", p.scenario.name());
    }
}

fn kernel_label(s: VethScenario, cpu: usize) -> String {
    match s {
        VethScenario::Router => format!("Linux IPv4 forwarding (RPS to CPU {cpu})"),
        VethScenario::Bridge => format!("Linux bridge (RPS to CPU {cpu})"),
    }
}

fn forwarding_name(f: Forwarding) -> &'static str {
    match f {
        Forwarding::Router => "router",
        Forwarding::Bridge => "bridge",
        Forwarding::Xconnect => "l2 cross-connect",
    }
}

fn median_run(runs: &[PpsRun]) -> Option<&PpsRun> {
    let pps: Vec<f64> = runs.iter().map(|r| r.pps).collect();
    runs.get(median_index(&pps)?)
}

/// The throughput comparison: interleaved runs, medians, ratio.
fn throughput(p: &Plan) -> Result<Report> {
    progress(p, "building the vecplane topology".to_string());
    let side = vecplane_side(p)?;
    prepare_pps(&side.topo)?;
    let kernel = if p.reference {
        progress(p, "building the kernel topology".to_string());
        let k = kernel_side(p)?;
        prepare_pps(&k)?;
        Some(k)
    } else {
        None
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for r in 0..p.runs {
        let label = format!("run {}/{} vecplane ({})", r + 1, p.runs, side.driver.name());
        let vp = side.topo.start_vecplane(&p.exe, &side.config)?;
        let m = measure(p, &side.topo, Some(&vp), &label);
        let stopped = vp.stop();
        let m = m?;
        stopped?;
        progress(
            p,
            format!(
                "{label}: {:.1} kpps forwarded (offered {:.1} kpps), CPU {} busy {:.0}%, CPU {} \
                 softirq {:.0}%",
                m.pps / 1e3,
                m.offered_pps / 1e3,
                p.fwd_cpu,
                m.fwd_cpu_busy * 100.0,
                p.gen_cpu,
                m.gen_cpu_softirq * 100.0
            ),
        );
        ours.push(m);
        if let Some(k) = &kernel {
            let label = format!("run {}/{} {}", r + 1, p.runs, p.scenario.reference_name());
            let m = measure(p, k, None, &label)?;
            progress(
                p,
                format!(
                    "{label}: {:.1} kpps forwarded (offered {:.1} kpps), CPU {} busy {:.0}%, \
                     CPU {} softirq {:.0}%",
                    m.pps / 1e3,
                    m.offered_pps / 1e3,
                    p.fwd_cpu,
                    m.fwd_cpu_busy * 100.0,
                    p.gen_cpu,
                    m.gen_cpu_softirq * 100.0
                ),
            );
            theirs.push(m);
        }
    }
    let mut notes = {
        let mut n = side.notes.clone();
        n.push(format!(
            "generator: vecplane gen tx ({}) in A on CPU {}, {} flows; sink: B0's receive \
             counter, frames dropped at B0's tc ingress",
            ours.first().map(|r| r.generator.as_str()).unwrap_or(""),
            p.gen_cpu,
            p.flows
        ));
        n.push(format!(
            "cycles_per_packet = TSC ticks of CPU {}'s busy time per forwarded packet (vecplane \
             busy-polls, so its CPU is always busy); r_cycles_per_packet adds CPU {}'s softirq \
             time, where veth runs Ra's receive side (NAPI) in the sender's context",
            p.fwd_cpu, p.gen_cpu
        ));
        n
    };
    let crowded: Vec<f64> = theirs
        .iter()
        .map(|r| r.fwd_cpu_user)
        .filter(|&u| u > 0.05)
        .collect();
    if let Some(worst) = crowded.iter().copied().reduce(f64::max) {
        let w = format!(
            "warning: other processes used up to {:.0}% of CPU {} during kernel runs (the \
             kernel forwards in softirq context, not user space): figures are disturbed",
            worst * 100.0,
            p.fwd_cpu
        );
        eprintln!("{}: {w}", p.scenario.name());
        notes.push(w);
    }
    let m = median_run(&ours).context("no run completed")?;
    let reference = median_run(&theirs).cloned();
    let speedup = reference
        .as_ref()
        .filter(|r| r.pps > 0.0)
        .map(|r| m.pps / r.pps);
    let fs = p.frame_size;
    let pps_runs: Vec<f64> = ours.iter().map(|r| r.pps).collect();
    let mut json = with_keys(
        json!({
            "scenario": p.scenario.name(),
            "driver": side.driver.name(),
            "forwarding": forwarding_name(side.forwarding),
        }),
        run_keys(p, m),
    );
    json = with_keys(
        json,
        json!({
            "nodes": m.nodes,
            "drops": m.drops,
            "runs": pps_runs,
            "all_runs": ours,
            "notes": notes,
        }),
    );
    if let Some(r) = &reference {
        json["reference"] = with_keys(
            reference_keys(p.scenario.reference_name(), r, speedup),
            json!({
                "runs": theirs.iter().map(|r| r.pps).collect::<Vec<_>>(),
                "all_runs": theirs,
            }),
        );
    }
    let mut text = format!(
        "{} {fs} B, {} flows: {} interleaved run(s) of {} s, forwarding on CPU {}, generator on \
         CPU {}\n",
        p.scenario.name(),
        p.flows,
        p.runs,
        p.seconds,
        p.fwd_cpu,
        p.gen_cpu
    );
    for n in &notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    let line = |name: String, r: &PpsRun, runs: &[PpsRun]| {
        let all: Vec<String> = runs.iter().map(|x| format!("{:.1}", x.pps / 1e3)).collect();
        format!(
            "  {name:<40} median {:>7.1} kpps (runs: {}), offered {:.1} kpps\n  {:<40} \
             forwarding CPU busy {:.0}%, {:.0} TSC cycles/packet; with the generator CPU's \
             softirq ({:.0}%): {:.0}\n",
            r.pps / 1e3,
            all.join(", "),
            r.offered_pps / 1e3,
            "",
            r.fwd_cpu_busy * 100.0,
            r.cycles_per_packet,
            r.gen_cpu_softirq * 100.0,
            r.r_cycles_per_packet
        )
    };
    text.push_str(&line(
        format!(
            "vecplane ({}, {})",
            forwarding_name(side.forwarding),
            side.driver.name()
        ),
        m,
        &ours,
    ));
    if let Some(r) = &reference {
        text.push_str(&line(kernel_label(p.scenario, p.fwd_cpu), r, &theirs));
        if let Some(s) = speedup {
            text.push_str(&format!("  speedup (vecplane pps / kernel pps): {s:.2}x\n"));
        }
    }
    text.push_str(&nodes_line(&m.nodes));
    drop(kernel);
    drop(side);
    Ok(Report { text, json })
}

/// Mean, min, max, sample standard deviation and coefficient of variation.
pub(crate) fn spread(v: &[f64]) -> (f64, f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    let sd = var.sqrt();
    let cv = if mean > 0.0 { sd / mean } else { 0.0 };
    (mean, min, max, sd, cv)
}

fn spread_json(v: &[f64], retransmits: &[u64]) -> Value {
    let (mean, min, max, sd, cv) = spread(v);
    json!({
        "gbps_mean": mean,
        "gbps_min": min,
        "gbps_max": max,
        "gbps_stddev": sd,
        "gbps_cv": cv,
        "runs_gbps": v,
        "retransmits": retransmits,
    })
}

/// One iperf3 TCP run A -> B; returns (Gbit/s received, retransmits).
fn iperf3_run(p: &Plan, topo: &Topology) -> Result<(f64, u64)> {
    let secs = format!("{:.0}", p.seconds.ceil());
    let b = topo.b_ip4().to_string();
    let cpu = p.gen_cpu.to_string();
    let argv = [
        "iperf3",
        "-J",
        "--connect-timeout",
        "3000",
        "-c",
        &b,
        "-t",
        &secs,
        "-A",
        &cpu,
    ];
    let timeout = Duration::from_secs_f64(p.seconds + 20.0);
    for attempt in 0..5 {
        let out = topo.exec_timeout(Host::A, &argv, timeout)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(&text)
            .with_context(|| format!("iperf3 printed no JSON: {}", text.trim()))?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            if e.contains("refused") && attempt < 4 {
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            bail!("iperf3: {e}");
        }
        let end = v.get("end").context("iperf3 JSON without `end`")?;
        let bps = end
            .get("sum_received")
            .and_then(|s| s.get("bits_per_second"))
            .and_then(Value::as_f64)
            .context("iperf3 JSON without end.sum_received.bits_per_second")?;
        let retr = end
            .get("sum_sent")
            .and_then(|s| s.get("retransmits"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        return Ok((bps / 1e9, retr));
    }
    bail!("iperf3 could not connect")
}

fn iperf3_server(p: &Plan, topo: &Topology) -> Result<Spawned> {
    let b = topo.b_ip4().to_string();
    let cpu = p.gen_cpu.to_string();
    let s = topo.spawn(
        Host::B,
        &["iperf3", "-s", "-B", &b, "-A", &cpu],
        "iperf3-server",
    )?;
    std::thread::sleep(Duration::from_millis(300));
    Ok(s)
}

/// `--stability N`: N single-stream iperf3 TCP runs through each, interleaved.
fn stability(p: &Plan, runs: usize) -> Result<Report> {
    if runs < 2 {
        bail!("--stability needs at least 2 runs");
    }
    progress(p, "building the vecplane topology".to_string());
    let side = vecplane_side(p)?;
    let kernel = if p.reference {
        progress(p, "building the kernel topology".to_string());
        Some(kernel_side(p)?)
    } else {
        None
    };
    let _server_v = iperf3_server(p, &side.topo)?;
    let _server_k = match &kernel {
        Some(k) => Some(iperf3_server(p, k)?),
        None => None,
    };
    let (mut ours, mut ours_retr, mut theirs, mut theirs_retr) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let vp = side.topo.start_vecplane(&p.exe, &side.config)?;
        let m = iperf3_run(p, &side.topo);
        let stopped = vp.stop();
        let (g, retr) = m?;
        stopped?;
        progress(
            p,
            format!(
                "stability run {}/{runs} vecplane ({}): {g:.2} Gbit/s, {retr} retransmits",
                r + 1,
                side.driver.name()
            ),
        );
        ours.push(g);
        ours_retr.push(retr);
        if let Some(k) = &kernel {
            let (g, retr) = iperf3_run(p, k)?;
            progress(
                p,
                format!(
                    "stability run {}/{runs} {}: {g:.2} Gbit/s, {retr} retransmits",
                    r + 1,
                    p.scenario.reference_name()
                ),
            );
            theirs.push(g);
            theirs_retr.push(retr);
        }
    }
    let mut notes = side.notes.clone();
    notes.push(format!(
        "iperf3 TCP, one stream, -t {:.0}, client and server on CPU {}; vecplane on CPU {}, the \
         kernel's forwarding steered there by RPS",
        p.seconds.ceil(),
        p.gen_cpu,
        p.fwd_cpu
    ));
    notes.push(
        "the kernel path keeps TSO/GSO (64 KB super-packets cross R as one skb); towards \
         vecplane A and B segment and checksum in software, so vecplane forwards MTU-sized \
         frames one by one"
            .to_string(),
    );
    let mut json = spread_json(&ours, &ours_retr);
    json["scenario"] = json!(p.scenario.name());
    json["mode"] = json!("stability");
    json["driver"] = json!(side.driver.name());
    json["forwarding"] = json!(forwarding_name(side.forwarding));
    json["seconds"] = json!(p.seconds.ceil());
    json["runs"] = json!(runs);
    json["cpu"] = json!(p.fwd_cpu);
    json["notes"] = json!(notes);
    if kernel.is_some() {
        let mut r = spread_json(&theirs, &theirs_retr);
        r["name"] = json!(p.scenario.reference_name());
        json["reference"] = r;
    }
    let mut text = format!(
        "{} stability: {runs} interleaved iperf3 TCP runs of {:.0} s\n",
        p.scenario.name(),
        p.seconds.ceil()
    );
    for n in &notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    let line = |name: String, v: &[f64], retr: &[u64]| {
        let (mean, min, max, sd, cv) = spread(v);
        format!(
            "  {name:<44} mean {mean:.2} Gbit/s, min {min:.2}, max {max:.2}, stddev {sd:.2}, \
             CV {:.1}%, retransmits {}\n",
            cv * 100.0,
            retr.iter().sum::<u64>()
        )
    };
    text.push_str(&line(
        format!(
            "vecplane ({}, {})",
            forwarding_name(side.forwarding),
            side.driver.name()
        ),
        &ours,
        &ours_retr,
    ));
    if kernel.is_some() {
        text.push_str(&line(
            kernel_label(p.scenario, p.fwd_cpu),
            &theirs,
            &theirs_retr,
        ));
    }
    Ok(Report { text, json })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn scenario_names_parse() {
        for (name, want) in [
            ("l2xc", ScenarioArg::Engine(Scenario::L2xc)),
            ("ip6", ScenarioArg::Engine(Scenario::Ip6)),
            ("veth-router", ScenarioArg::Veth(VethScenario::Router)),
            ("veth-bridge", ScenarioArg::Veth(VethScenario::Bridge)),
        ] {
            assert_eq!(ScenarioArg::from_str(name, false), Ok(want));
        }
        assert!(ScenarioArg::from_str("veth", false).is_err());
        assert_eq!(ScenarioArg::Veth(VethScenario::Router).engine(), None);
    }

    #[test]
    fn spread_is_sample_statistics() {
        let (mean, min, max, sd, cv) = spread(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((mean - 5.0).abs() < 1e-12);
        assert_eq!((min, max), (2.0, 9.0));
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert!((cv - sd / 5.0).abs() < 1e-12);
        assert_eq!(spread(&[]), (0.0, 0.0, 0.0, 0.0, 0.0));
        assert_eq!(spread(&[3.0]).3, 0.0);
    }

    #[test]
    fn cpu_times_reads_proc_stat() {
        let t = cpu_times(0).expect("cpu0 in /proc/stat");
        assert!(t.user <= t.busy && t.softirq <= t.busy && t.busy <= t.total && t.total > 0);
        let later = CpuTimes {
            user: t.user + 10,
            softirq: t.softirq + 20,
            busy: t.busy + 50,
            total: t.total + 100,
        };
        assert_eq!(t.shares(later), (0.5, 0.1, 0.2));
        assert_eq!(t.shares(t), (0.0, 0.0, 0.0));
        assert!(backlog_drops().is_some());
        assert_eq!(cpu_times(100_000), None);
    }
}

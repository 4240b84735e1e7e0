//! `vecplane plan`: how many cores a traffic needs, from the cycles per packet `vecplane bench`
//! measured on this host (the profile), combined by Amdahl's law over hits and misses as in
//! "The Core Cost of Doing Business". It owns the command's arguments and output; it never
//! measures, and never guesses a cost the profile does not have. A host without a profile gets
//! the built-in one (the project's reference host), with a note on stderr saying so and how to
//! measure this host.

#![deny(missing_docs)]

pub mod input;
pub mod model;
pub mod profile;
mod render;

pub use model::{packet_cost, pps_per_core, Traffic, Vxlan};

use anyhow::{Context, Result};
use input::{FrameMix, Rate};
use model::{FlowInputs, Workload};
use profile::Protocol;
use std::io::Write;
use std::path::PathBuf;

const PLAN_HELP: &str = "\
How many cores for this traffic, from the cycles per packet `vecplane bench` measured on this
host (the profile: hit and miss costs per protocol and frame size). Until this host has one
(`vecplane bench --scenario flows --churn` writes it), the built-in profile is used: IPv4 costs
measured on the project's reference host, said on stderr and in the answer.

The arithmetic (--explain prints it with your figures):
  rate R packets/s (a bit rate is converted with the frame mix: bits / (8 x (mean frame + 20 B)));
  hit ratio h and new flows N: misses M = (1 - h) x R, and each new flow's first packet is one of
    them, so N <= M. Given only h, every miss is taken as a new flow (N = M); given only N,
    h = 1 - N / R; given both, N above M is refused as a contradiction and the rest M - N are
    repeat misses (known flows whose megaflow expired or was evicted);
  cycles per packet C = h x e x C_emc + h x (1 - e) x C_megaflow + (1 - h) x C_miss
    + h x (1 - h) x C_pollution (+ the VXLAN add-on), with e = --emc-share, each cost weighted
    over the frame mix and interpolated linearly between measured frame sizes (the nearest
    measured size outside them). C_pollution is what misses add to the hits beside them (their
    installs and evictions push the hits' entries out of the CPU caches); a profile without it
    (written before the churn bench measured it) means 0;
  cores = ceil(C x R / (TSC Hz x usable share)).
It also says which part takes most cycles (e.g. \"misses take 71% of the cycles\"); the
pollution counts with the misses there, since it goes away with them.

IMIX here is 7:4:1 of 64, 576 and 1500-byte Ethernet frames, FCS included.";

/// Arguments of `vecplane plan`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_long_help = PLAN_HELP)]
pub struct PlanArgs {
    /// Offered rate: packets (10Mpps, 500kpps, 2.5e6pps) or bits on the wire (25Gbit/s,
    /// 40Gbps; frame + 20 B of preamble and gap, converted with the frame mix).
    #[arg(long, value_parser = input::parse_rate)]
    pub rate: Rate,
    /// Frame sizes in bytes with FCS: imix (7:4:1 of 64, 576 and 1500 B), one size (64),
    /// several at equal shares (64,512,1518) or with weights (64,576,1500:7,4,1).
    #[arg(long, default_value = "64", value_parser = input::parse_frame_mix)]
    pub frame_mix: FrameMix,
    /// Share of packets a flow cache answers: 0 to 1 (0.75) or a percentage (75%).
    #[arg(long, value_parser = input::parse_ratio)]
    pub hit_ratio: Option<f64>,
    /// New flows per second, each costing one miss (250000, 250k, 1.5M).
    #[arg(long, value_parser = input::parse_count, value_name = "N")]
    pub new_flows_per_second: Option<f64>,
    /// Share of hits the exact-match cache answers; the rest are megaflow hits. 0 (the
    /// default) prices every hit as a megaflow hit, the dearer tier. Under churn the EMC
    /// answers few (the churn bench: 1% of hits at 50% hits, 5% at 90%, 30% at 99%).
    #[arg(long, default_value = "0", value_parser = input::parse_ratio)]
    pub emc_share: f64,
    /// Every packet crosses a VXLAN tunnel port: encapsulated, decapsulated, or both (half each
    /// way; what --vxlan alone means).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "both", value_name = "HOW")]
    pub vxlan: Option<Vxlan>,
    /// IPv6 packets (IPv4 otherwise).
    #[arg(long)]
    pub ipv6: bool,
    /// Share of each core's cycles the plan may use, leaving headroom for bursts and upkeep.
    #[arg(long, default_value = "0.8", value_parser = input::parse_usable)]
    pub usable: f64,
    /// The bench profile [default: $XDG_STATE_HOME/vecplane/profile.json, else
    /// ~/.local/state/vecplane/profile.json, else the built-in one].
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the arithmetic step by step (with --json: an `explain` array of lines).
    #[arg(long)]
    pub explain: bool,
}

impl PlanArgs {
    /// The workload these arguments describe.
    pub fn workload(&self) -> Workload {
        Workload {
            rate: self.rate,
            traffic: Traffic {
                mix: self.frame_mix.clone(),
                protocol: if self.ipv6 {
                    Protocol::Ipv6
                } else {
                    Protocol::Ipv4
                },
                vxlan: self.vxlan,
                emc_share: self.emc_share,
            },
            flows: FlowInputs {
                hit_ratio: self.hit_ratio,
                new_flows_per_second: self.new_flows_per_second,
            },
            usable: self.usable,
        }
    }
}

/// `vecplane plan`: read the profile, plan, print.
pub fn run(args: &PlanArgs) -> Result<()> {
    let w = args.workload();
    // The inputs' own contradictions first: they need no profile.
    model::resolve_flows(w.flows, w.rate.pps(&w.traffic.mix))?;
    let (prof, source) = profile::read_or_built_in(args.profile.as_deref())?;
    let name = match &source {
        profile::ProfileSource::File(f) => f.display().to_string(),
        profile::ProfileSource::BuiltIn { missing } => {
            eprintln!(
                "vecplane plan: no bench profile at {} yet: using the built-in one, measured on \
                 {} (IPv4 flow-switch costs at 64 B); {} measures this host and writes it there",
                missing.display(),
                prof.host.cpu_model,
                profile::bench_command(profile::CostPath::MegaflowHit, Protocol::Ipv4)
            );
            profile::BUILT_IN_NAME.to_string()
        }
    };
    let p = model::plan(&prof, &w).with_context(|| name.clone())?;
    let ctx = render::Context {
        source: &source,
        profile: &prof,
        workload: &w,
        this_cpu: profile::cpu_model(),
    };
    let mut out = String::new();
    if args.json {
        let v = render::json(&ctx, &p, args.explain);
        out = serde_json::to_string_pretty(&v)?;
        out.push('\n');
    } else {
        if args.explain {
            for line in render::explain(&ctx, &p) {
                out.push_str(&line);
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(&render::text(&ctx, &p));
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A reader that stopped early (`| head`) is not an error of the plan.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write the plan to stdout")
        }
        _ => Ok(()),
    }
}

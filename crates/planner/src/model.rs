//! The planner's arithmetic: cycles per packet from the profile's costs (interpolated between
//! measured frame sizes, weighted by the frame mix), combined over hits and misses by Amdahl's
//! law as in "The Core Cost of Doing Business" (plus what misses add to the hits beside them,
//! `h (1 - h) C_pollution`), then cores for a rate. Pure functions of a
//! [`Profile`] and the inputs; it never reads files and never rounds before the last step.

use super::input::{FrameMix, Rate};
use crate::profile::{bench_command, CostPath, Profile, Protocol};
use serde::Serialize;
use thiserror::Error;

/// How packets cross a VXLAN tunnel port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vxlan {
    /// Every packet is encapsulated (sent into the tunnel).
    Encap,
    /// Every packet is decapsulated (received from the tunnel).
    Decap,
    /// Half encapsulated, half decapsulated (a hypervisor's two directions at equal rates).
    Both,
}

/// What the traffic is, apart from its rate and flows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Traffic {
    /// Frame sizes and their shares of packets.
    pub mix: FrameMix,
    /// IPv4 or IPv6.
    pub protocol: Protocol,
    /// Whether and how packets cross a VXLAN port.
    pub vxlan: Option<Vxlan>,
    /// Share of hits the exact-match cache answers (the rest: the megaflow cache).
    pub emc_share: f64,
}

/// Where one frame size's cost came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// Measured at this size.
    Measured,
    /// Linear between two measured sizes.
    Interpolated {
        /// Measured size below.
        below: usize,
        /// Measured size above.
        above: usize,
    },
    /// Outside the measured sizes: the nearest measured size's cost.
    Nearest {
        /// The size whose cost is used.
        size: usize,
    },
}

/// One path's cost at one frame size of the mix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeCost {
    /// Frame size.
    pub frame_size: usize,
    /// Its share of packets.
    pub share: f64,
    /// Cycles per packet at this size.
    pub cycles_per_packet: f64,
    /// Where it came from.
    pub source: Source,
}

/// One part of the per-packet cost (a cache tier, the misses, a VXLAN add-on, the misses'
/// pollution of the hits).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartCost {
    /// Which path.
    pub path: CostPath,
    /// Share of packets that take it (add-ons: that pay it; pollution: the hits, `h`).
    pub packet_share: f64,
    /// Its cycles per packet, weighted over the frame mix (pollution: what each hit pays at
    /// this miss share, `(1 - h) x` the profile's cost, which `sizes` holds).
    pub cycles_per_packet: f64,
    /// `packet_share * cycles_per_packet`: its part of the average packet's cycles.
    pub cycles_per_average_packet: f64,
    /// Per frame size of the mix.
    pub sizes: Vec<SizeCost>,
}

/// The average packet's cost at one hit ratio.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PacketCost {
    /// Parts with a non-zero packet share, in path order.
    pub parts: Vec<PartCost>,
    /// Their sum: cycles per average packet.
    pub cycles_per_packet: f64,
    /// Whether the profile has a `pollution` cost for the protocol (profiles written before
    /// the churn bench measured it have none: the term is then 0).
    pub pollution_in_profile: bool,
}

/// What the planner refuses.
#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    /// Neither flow input.
    #[error(
        "say how often packets miss: --hit-ratio (share of packets a flow cache answers, 0..1), \
         --new-flows-per-second (each new flow's first packet is a miss), or both"
    )]
    NoFlowInput,
    /// More new flows than packets.
    #[error(
        "--new-flows-per-second {new_flows} exceeds the packet rate ({pps} packets/s): each new \
         flow has at least one packet; accepted: at most {pps}"
    )]
    TooManyNewFlows {
        /// Given.
        new_flows: String,
        /// The rate.
        pps: String,
    },
    /// The two flow inputs disagree.
    #[error(
        "--new-flows-per-second {new_flows} contradicts --hit-ratio {hit_ratio}: each new flow's \
         first packet is a miss, so {new_flows} new flows/s need at least {new_flows} misses/s, \
         but at {pps} packets/s a hit ratio of {hit_ratio} leaves (1 - {hit_ratio}) x {pps} = \
         {misses} misses/s; accepted: --hit-ratio at most {max_hit_ratio}, or at most {misses} \
         new flows/s"
    )]
    Contradiction {
        /// Given.
        new_flows: String,
        /// Given.
        hit_ratio: String,
        /// The rate.
        pps: String,
        /// Misses the hit ratio leaves.
        misses: String,
        /// The highest hit ratio that fits the new flows.
        max_hit_ratio: String,
    },
    /// The profile lacks a path the inputs need.
    #[error(
        "the profile has no `{}` cost for {} packets (needed: {why}); how to measure it: {}",
        path.name(),
        protocol.name(),
        bench_command(*path, *protocol)
    )]
    MissingCost {
        /// Which path.
        path: CostPath,
        /// For which protocol.
        protocol: Protocol,
        /// Why the inputs need it.
        why: String,
    },
}

/// A path's cost at `size` from measured (size, cost) pairs sorted by size: linear between two
/// measured sizes, the nearest measured one outside them. None if `points` is empty.
pub fn interpolate(points: &[(usize, f64)], size: usize) -> Option<(f64, Source)> {
    let first = points.first()?;
    let last = points.last()?;
    if size <= first.0 {
        let src = if size == first.0 {
            Source::Measured
        } else {
            Source::Nearest { size: first.0 }
        };
        return Some((first.1, src));
    }
    if size >= last.0 {
        let src = if size == last.0 {
            Source::Measured
        } else {
            Source::Nearest { size: last.0 }
        };
        return Some((last.1, src));
    }
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if size == a.0 {
            return Some((a.1, Source::Measured));
        }
        if size > a.0 && size < b.0 {
            let t = (size - a.0) as f64 / (b.0 - a.0) as f64;
            return Some((
                a.1 + t * (b.1 - a.1),
                Source::Interpolated {
                    below: a.0,
                    above: b.0,
                },
            ));
        }
    }
    Some((last.1, Source::Measured))
}

fn part_cost(
    profile: &Profile,
    traffic: &Traffic,
    path: CostPath,
    packet_share: f64,
    why: &str,
) -> Result<PartCost, PlanError> {
    let points: Vec<(usize, f64)> = profile
        .costs_of(path, traffic.protocol)
        .iter()
        .map(|c| (c.frame_size, c.cycles_per_packet))
        .collect();
    let mut sizes = Vec::new();
    let mut cycles = 0.0;
    for (frame_size, share) in traffic.mix.shares() {
        let Some((c, source)) = interpolate(&points, frame_size) else {
            return Err(PlanError::MissingCost {
                path,
                protocol: traffic.protocol,
                why: why.to_string(),
            });
        };
        cycles += share * c;
        sizes.push(SizeCost {
            frame_size,
            share,
            cycles_per_packet: c,
            source,
        });
    }
    Ok(PartCost {
        path,
        packet_share,
        cycles_per_packet: cycles,
        cycles_per_average_packet: packet_share * cycles,
        sizes,
    })
}

/// Cycles per average packet when a share `hit_ratio` of packets hits a cache (of those,
/// `traffic.emc_share` the EMC, the rest the megaflow cache) and the rest miss:
/// `h*e*C_emc + h*(1-e)*C_megaflow + (1-h)*C_miss + h*(1-h)*C_pollution (+ the VXLAN add-on)`,
/// each C weighted over the frame mix. Paths with no packets need no cost in the profile; a
/// profile without `pollution` prices it at 0 (`pollution_in_profile` says so).
pub fn packet_cost(
    profile: &Profile,
    traffic: &Traffic,
    hit_ratio: f64,
) -> Result<PacketCost, PlanError> {
    let h = hit_ratio.clamp(0.0, 1.0);
    let e = traffic.emc_share.clamp(0.0, 1.0);
    let mut wanted = vec![
        (
            CostPath::EmcHit,
            h * e,
            "hits answered by the EMC (--emc-share)",
        ),
        (
            CostPath::MegaflowHit,
            h * (1.0 - e),
            "hits answered by the megaflow cache (--hit-ratio, --emc-share below 1)",
        ),
        (CostPath::Miss, 1.0 - h, "misses (--hit-ratio below 1)"),
    ];
    match traffic.vxlan {
        None => {}
        Some(Vxlan::Encap) => wanted.push((CostPath::VxlanEncap, 1.0, "--vxlan encap")),
        Some(Vxlan::Decap) => wanted.push((CostPath::VxlanDecap, 1.0, "--vxlan decap")),
        Some(Vxlan::Both) => {
            wanted.push((CostPath::VxlanEncap, 0.5, "--vxlan both"));
            wanted.push((CostPath::VxlanDecap, 0.5, "--vxlan both"));
        }
    }
    let pollution_in_profile = !profile
        .costs_of(CostPath::Pollution, traffic.protocol)
        .is_empty();
    let mut parts = Vec::new();
    for (path, share, why) in wanted {
        if share > 0.0 {
            parts.push(part_cost(profile, traffic, path, share, why)?);
        }
        if path == CostPath::Miss && pollution_in_profile && h > 0.0 && h < 1.0 {
            // Hits (share h) each pay (1 - h) C_pollution: h (1 - h) C_pollution per packet.
            let why = "hits beside misses (the pollution term)";
            let mut p = part_cost(profile, traffic, CostPath::Pollution, h, why)?;
            p.cycles_per_packet *= 1.0 - h;
            p.cycles_per_average_packet = h * p.cycles_per_packet;
            parts.push(p);
        }
    }
    let cycles_per_packet = parts.iter().map(|p| p.cycles_per_average_packet).sum();
    Ok(PacketCost {
        parts,
        cycles_per_packet,
        pollution_in_profile,
    })
}

/// Predicted packets per second one whole core forwards at `hit_ratio`: TSC ticks per second
/// divided by cycles per average packet. This is what the churn bench's pps per core is
/// compared with.
pub fn pps_per_core(
    profile: &Profile,
    traffic: &Traffic,
    hit_ratio: f64,
) -> Result<f64, PlanError> {
    let c = packet_cost(profile, traffic, hit_ratio)?;
    Ok(if c.cycles_per_packet > 0.0 {
        profile.host.tsc_hz as f64 / c.cycles_per_packet
    } else {
        0.0
    })
}

/// The flow inputs as given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowInputs {
    /// `--hit-ratio`.
    pub hit_ratio: Option<f64>,
    /// `--new-flows-per-second`.
    pub new_flows_per_second: Option<f64>,
}

/// Hits and misses per second, resolved from the flow inputs and the rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FlowRates {
    /// Share of packets a cache answers.
    pub hit_ratio: f64,
    /// `(1 - hit_ratio) * pps`.
    pub misses_per_second: f64,
    /// New flows per second (each is one of the misses).
    pub new_flows_per_second: f64,
    /// Misses that are not a new flow's first packet (expired, evicted or revalidated
    /// megaflows of known flows): `misses - new flows`.
    pub repeat_misses_per_second: f64,
    /// Whether the hit ratio was given (else: derived from the new flows).
    pub hit_ratio_given: bool,
    /// Whether the new-flow rate was given (else: every miss is taken as a new flow).
    pub new_flows_given: bool,
}

fn num(v: f64) -> String {
    // Enough digits to be exact for counts, few enough to read.
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Combine the flow inputs with the packet rate. The rules: misses are the non-hit share,
/// `M = (1 - h) * R`, and each new flow's first packet is one of them, so `N <= M`.
/// - only `h`: `M = (1 - h) R`, and every miss is taken as a new flow (`N = M`);
/// - only `N`: every miss is a new flow: `M = N`, `h = 1 - N / R` (`N <= R` required);
/// - both: `M = (1 - h) R`, `N <= M` required (the rest are repeat misses); otherwise the
///   inputs contradict each other and are refused.
pub fn resolve_flows(inputs: FlowInputs, pps: f64) -> Result<FlowRates, PlanError> {
    // Relative slack for rounding in the user's figures.
    const SLACK: f64 = 1e-9;
    match (inputs.hit_ratio, inputs.new_flows_per_second) {
        (None, None) => Err(PlanError::NoFlowInput),
        (Some(h), None) => {
            let m = (1.0 - h) * pps;
            Ok(FlowRates {
                hit_ratio: h,
                misses_per_second: m,
                new_flows_per_second: m,
                repeat_misses_per_second: 0.0,
                hit_ratio_given: true,
                new_flows_given: false,
            })
        }
        (None, Some(n)) => {
            if n > pps * (1.0 + SLACK) {
                return Err(PlanError::TooManyNewFlows {
                    new_flows: num(n),
                    pps: num(pps),
                });
            }
            let n = n.min(pps);
            Ok(FlowRates {
                hit_ratio: 1.0 - n / pps,
                misses_per_second: n,
                new_flows_per_second: n,
                repeat_misses_per_second: 0.0,
                hit_ratio_given: false,
                new_flows_given: true,
            })
        }
        (Some(h), Some(n)) => {
            let m = (1.0 - h) * pps;
            if n > m + pps * SLACK {
                if n > pps * (1.0 + SLACK) {
                    return Err(PlanError::TooManyNewFlows {
                        new_flows: num(n),
                        pps: num(pps),
                    });
                }
                return Err(PlanError::Contradiction {
                    new_flows: num(n),
                    hit_ratio: num(h),
                    pps: num(pps),
                    misses: num(m),
                    max_hit_ratio: num(1.0 - n / pps),
                });
            }
            let n = n.min(m);
            Ok(FlowRates {
                hit_ratio: h,
                misses_per_second: m,
                new_flows_per_second: n,
                repeat_misses_per_second: m - n,
                hit_ratio_given: true,
                new_flows_given: true,
            })
        }
    }
}

/// Everything `vecplane plan` is asked.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Offered rate.
    pub rate: Rate,
    /// The traffic's make-up.
    pub traffic: Traffic,
    /// Hit ratio and/or new flows.
    pub flows: FlowInputs,
    /// Share of each core's cycles the plan may use.
    pub usable: f64,
}

/// The part that takes most cycles. The pollution counts with the misses: it is what the
/// misses (their installs and evictions) add to the hits, and it goes away with them, so the
/// cycles fewer misses would save are the misses' own plus the pollution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Limit {
    /// Which path (never `pollution`: that is counted with `miss`).
    pub path: CostPath,
    /// Its share of all cycles (for `miss`: with the pollution).
    pub cycle_share: f64,
    /// The pollution's share of all cycles (part of `cycle_share` when `path` is `miss`).
    pub pollution_share: f64,
    /// e.g. `misses take 71.0% of the cycles`, with the pollution
    /// `misses take 78.0% of the cycles (71.0% missing, 7.0% in the hits they pollute)`.
    pub text: String,
}

/// The answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Packets per second.
    pub rate_pps: f64,
    /// Bits per second on the wire at the mix (frame + 20 B).
    pub rate_bits_per_second: f64,
    /// Hits, misses, new flows.
    pub flows: FlowRates,
    /// Cycles per average packet and its parts.
    pub cost: PacketCost,
    /// `cost.cycles_per_packet * rate_pps`.
    pub cycles_per_second: f64,
    /// The profile's TSC rate.
    pub tsc_hz: u64,
    /// Usable share of each core.
    pub usable: f64,
    /// `cycles_per_second / (tsc_hz * usable)`.
    pub cores_exact: f64,
    /// Rounded up (at least 1).
    pub cores: u64,
    /// Packets per second one core forwards at this mix, using all its cycles.
    pub pps_per_core: f64,
    /// The same within the usable share.
    pub pps_per_core_usable: f64,
    /// What takes most cycles.
    pub limit: Limit,
}

/// How a path is called in the limit sentence.
pub fn plural(path: CostPath) -> &'static str {
    match path {
        CostPath::EmcHit => "EMC hits",
        CostPath::MegaflowHit => "megaflow hits",
        CostPath::Miss => "misses",
        CostPath::Pollution => "cache pollution by misses",
        CostPath::VxlanEncap => "VXLAN encapsulation",
        CostPath::VxlanDecap => "VXLAN decapsulation",
        CostPath::L2xc => "cross-connects",
        CostPath::Ip4Router => "IPv4 routing",
        CostPath::Ip6Router => "IPv6 routing",
    }
}

/// Which part takes most cycles, the pollution counted with the misses (see [`Limit`]).
pub fn limit(cost: &PacketCost) -> Limit {
    let of = |path| {
        cost.parts
            .iter()
            .filter(|p| p.path == path)
            .map(|p| p.cycles_per_average_packet)
            .sum::<f64>()
    };
    let pollution = of(CostPath::Pollution);
    let top = cost
        .parts
        .iter()
        .filter(|p| p.path != CostPath::Pollution)
        .map(|p| {
            let extra = if p.path == CostPath::Miss {
                pollution
            } else {
                0.0
            };
            (p.path, p.cycles_per_average_packet + extra)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let total = cost.cycles_per_packet;
    let pollution_share = if total > 0.0 { pollution / total } else { 0.0 };
    match top {
        Some((path, cycles)) if total > 0.0 => {
            let share = cycles / total;
            let mut text = format!("{} take {:.1}% of the cycles", plural(path), 100.0 * share);
            if path == CostPath::Miss && pollution > 0.0 {
                text.push_str(&format!(
                    " ({:.1}% missing, {:.1}% in the hits they pollute)",
                    100.0 * (share - pollution_share),
                    100.0 * pollution_share
                ));
            }
            Limit {
                path,
                cycle_share: share,
                pollution_share,
                text,
            }
        }
        _ => Limit {
            path: CostPath::MegaflowHit,
            cycle_share: 0.0,
            pollution_share,
            text: "nothing takes any cycles".to_string(),
        },
    }
}

/// Plan `w` on the host of `profile`.
pub fn plan(profile: &Profile, w: &Workload) -> Result<Plan, PlanError> {
    let rate_pps = w.rate.pps(&w.traffic.mix);
    let flows = resolve_flows(w.flows, rate_pps)?;
    let cost = packet_cost(profile, &w.traffic, flows.hit_ratio)?;
    let cycles_per_second = cost.cycles_per_packet * rate_pps;
    let tsc = profile.host.tsc_hz as f64;
    let usable = w.usable.clamp(f64::MIN_POSITIVE, 1.0);
    let cores_exact = cycles_per_second / (tsc * usable);
    // A hair of slack so that exactly 3.0000000001 cores from float noise stay 3.
    let cores = ((cores_exact - 1e-9).ceil().max(1.0)) as u64;
    let pps_per_core = if cost.cycles_per_packet > 0.0 {
        tsc / cost.cycles_per_packet
    } else {
        0.0
    };
    let limit = limit(&cost);
    Ok(Plan {
        rate_pps,
        rate_bits_per_second: rate_pps * w.traffic.mix.mean_wire_bytes() * 8.0,
        flows,
        cost,
        cycles_per_second,
        tsc_hz: profile.host.tsc_hz,
        usable,
        cores_exact,
        cores,
        pps_per_core,
        pps_per_core_usable: pps_per_core * usable,
        limit,
    })
}

#[cfg(test)]
mod tests;

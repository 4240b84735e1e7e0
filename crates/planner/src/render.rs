//! The planner's output: the text report with its table, the JSON object, the step-by-step
//! arithmetic of `--explain`, and the notes (costs taken from the nearest measured frame size,
//! a profile from another CPU). Pure formatting of a computed plan; it never recomputes a figure
//! differently from the model.

use super::input::Rate;
use super::model::{plural, FlowRates, Plan, Source, Workload};
use crate::profile::{CostPath, Profile, ProfileSource};
use comfy_table::{presets::ASCII_MARKDOWN, CellAlignment, Table};
use serde_json::{json, Value};
use std::fmt::Write;

/// What the output says besides the plan.
pub(super) struct Context<'a> {
    /// Where the profile came from.
    pub source: &'a ProfileSource,
    /// Its contents.
    pub profile: &'a Profile,
    /// The inputs.
    pub workload: &'a Workload,
    /// This host's CPU model.
    pub this_cpu: String,
}

/// The profile's origin as the text report names it.
fn source_words(source: &ProfileSource) -> String {
    match source {
        ProfileSource::File(f) => f.display().to_string(),
        ProfileSource::BuiltIn { missing } => format!(
            "{} (none measured on this host yet at {})",
            crate::profile::BUILT_IN_NAME,
            missing.display()
        ),
    }
}

/// `1234567.8` -> `1,234,567.8` with `decimals` decimals.
pub(super) fn grouped(v: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// `12_500_000.0` -> `12.50 M`, `12.0` -> `12.00` (k, M, G, T).
pub(super) fn si(v: f64) -> String {
    let a = v.abs();
    let (d, p) = if a >= 1e12 {
        (1e12, " T")
    } else if a >= 1e9 {
        (1e9, " G")
    } else if a >= 1e6 {
        (1e6, " M")
    } else if a >= 1e3 {
        (1e3, " k")
    } else {
        (1.0, "")
    };
    format!("{:.2}{p}", v / d)
}

/// `si` with a unit glued to the prefix: `12.50 Mpps`, `12.00 pps`.
pub(super) fn si_unit(v: f64, unit: &str) -> String {
    let s = si(v);
    if s.contains(' ') {
        format!("{s}{unit}")
    } else {
        format!("{s} {unit}")
    }
}

fn rate_as_given(r: Rate) -> String {
    match r {
        Rate::PacketsPerSecond(p) => si_unit(p, "pps"),
        Rate::BitsPerSecond(b) => si_unit(b, "bit/s"),
    }
}

fn protocol_word(w: &Workload) -> String {
    let p = match w.traffic.protocol {
        crate::profile::Protocol::Ipv4 => "IPv4",
        crate::profile::Protocol::Ipv6 => "IPv6",
    };
    match w.traffic.vxlan {
        None => p.to_string(),
        Some(v) => format!(
            "{p} over VXLAN ({})",
            match v {
                super::model::Vxlan::Encap => "encapsulated",
                super::model::Vxlan::Decap => "decapsulated",
                super::model::Vxlan::Both => "half encapsulated, half decapsulated",
            }
        ),
    }
}

fn mix_words(w: &Workload) -> String {
    let m = &w.traffic.mix;
    if m.frames.len() == 1 {
        format!("{} B frames", m.frames[0].0)
    } else {
        format!(
            "{} frames (mean {:.1} B)",
            if m.name.eq_ignore_ascii_case("imix") {
                "IMIX".to_string()
            } else {
                m.name.clone()
            },
            m.mean_frame_bytes()
        )
    }
}

fn flow_words(f: &FlowRates) -> String {
    if f.new_flows_given && f.repeat_misses_per_second > 0.0 {
        format!(
            "{} new flows/s and {} repeat misses/s",
            si(f.new_flows_per_second),
            si(f.repeat_misses_per_second)
        )
    } else if f.new_flows_given {
        "every miss a new flow".to_string()
    } else {
        "every miss taken as a new flow".to_string()
    }
}

/// The profile's (mix-weighted) cost of a part: for the pollution, the cost per unit of
/// `h (1 - h)`, before the `(1 - h)` the part's `cycles_per_packet` holds.
fn profile_cost(part: &super::model::PartCost) -> f64 {
    part.sizes
        .iter()
        .map(|s| s.share * s.cycles_per_packet)
        .sum()
}

/// Whether hits and misses mix, so the pollution term could apply.
fn mixed(p: &Plan) -> bool {
    p.flows.hit_ratio > 0.0 && p.flows.hit_ratio < 1.0
}

/// Notes: costs from the nearest measured size, a profile from another CPU, derived inputs.
pub(super) fn notes(ctx: &Context<'_>, p: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let protocol = ctx.workload.traffic.protocol;
    for part in &p.cost.parts {
        let outside: Vec<String> = part
            .sizes
            .iter()
            .filter_map(|s| match s.source {
                Source::Nearest { size } => Some(format!("{} B (uses {size} B)", s.frame_size)),
                _ => None,
            })
            .collect();
        if outside.is_empty() {
            continue;
        }
        let measured: Vec<String> = ctx
            .profile
            .costs_of(part.path, protocol)
            .iter()
            .map(|c| c.frame_size.to_string())
            .collect();
        out.push(format!(
            "{} {} was measured at {} B only; outside that the nearest measured size's cost is \
             used: {}",
            part.path.name(),
            protocol.name(),
            measured.join(", "),
            outside.join(", ")
        ));
    }
    let host = &ctx.profile.host;
    if host.cpu_model != ctx.this_cpu {
        out.push(format!(
            "the profile was measured on `{}`, this host is `{}`: the figures are the other host's",
            host.cpu_model, ctx.this_cpu
        ));
    }
    if !p.cost.pollution_in_profile && mixed(p) {
        out.push(
            "the profile has no `pollution` cost (written before the churn bench measured it): \
             taken as 0, so hits cost the same at every miss share; `vecplane bench --scenario \
             flows --churn` measures it"
                .to_string(),
        );
    }
    if !p.flows.hit_ratio_given {
        out.push(format!(
            "hit ratio {:.4} derived from the new flows: 1 - new flows / rate",
            p.flows.hit_ratio
        ));
    }
    let churn_priced = p.cost.parts.iter().any(|x| {
        matches!(
            x.path,
            crate::profile::CostPath::EmcHit | crate::profile::CostPath::MegaflowHit
        ) && ctx
            .profile
            .costs_of(x.path, ctx.workload.traffic.protocol)
            .iter()
            .any(|c| c.scenario == "flows-churn")
    });
    if churn_priced {
        out.push(
            "the hit costs are the churn bench's (`vecplane bench --scenario flows --churn`): a \
             megaflow hit on a full table of exact megaflows among misses, an EMC hit with the \
             EMC full; hits on a few warm megaflows cost less"
                .to_string(),
        );
    }
    if p.cost
        .parts
        .iter()
        .any(|x| x.path == crate::profile::CostPath::MegaflowHit)
        && ctx.workload.traffic.emc_share == 0.0
    {
        out.push(
            "every hit is priced as a megaflow hit (--emc-share 0); give the EMC's share of hits \
             if it is known"
                .to_string(),
        );
    }
    out
}

/// The text report.
pub(super) fn text(ctx: &Context<'_>, p: &Plan) -> String {
    let w = ctx.workload;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({} on the wire) of {} {}, hit ratio {:.3}: {} misses/s ({})",
        si_unit(p.rate_pps, "pps"),
        si_unit(p.rate_bits_per_second, "bit/s"),
        protocol_word(w),
        mix_words(w),
        p.flows.hit_ratio,
        si(p.flows.misses_per_second),
        flow_words(&p.flows)
    );
    let h = &ctx.profile.host;
    let _ = writeln!(
        o,
        "profile {}: {}, TSC {:.3} GHz, {}{}",
        source_words(ctx.source),
        h.cpu_model,
        h.tsc_hz as f64 / 1e9,
        h.date,
        h.commit
            .as_deref()
            .map(|c| format!(", commit {c}"))
            .unwrap_or_default()
    );
    let _ = writeln!(o);
    let mut t = Table::new();
    t.load_preset(ASCII_MARKDOWN);
    t.set_header(vec![
        "part",
        "packets/s",
        "cycles/packet",
        "cycles/s",
        "share of cycles",
    ]);
    for part in &p.cost.parts {
        let name = if part.path == CostPath::Pollution {
            "pollution (on hits)".to_string()
        } else {
            part.path.name().to_string()
        };
        t.add_row(vec![
            name,
            si(part.packet_share * p.rate_pps),
            grouped(part.cycles_per_packet, 1),
            si(part.cycles_per_average_packet * p.rate_pps),
            format!(
                "{:.1}%",
                100.0 * part.cycles_per_average_packet / p.cost.cycles_per_packet.max(1e-300)
            ),
        ]);
    }
    t.add_row(vec![
        "total".to_string(),
        si(p.rate_pps),
        grouped(p.cost.cycles_per_packet, 1),
        si(p.cycles_per_second),
        "100.0%".to_string(),
    ]);
    for i in 1..5 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(o, "{t}");
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "cores: {} ({} / ({:.3} GHz x {:.2} usable) = {:.2})",
        p.cores,
        si_unit(p.cycles_per_second, "cycles/s"),
        p.tsc_hz as f64 / 1e9,
        p.usable,
        p.cores_exact
    );
    let _ = writeln!(o, "limit: {}", p.limit.text);
    let _ = writeln!(
        o,
        "one core: {} at this mix and hit ratio ({} within the usable {:.0}%)",
        si_unit(p.pps_per_core, "pps"),
        si_unit(p.pps_per_core_usable, "pps"),
        100.0 * p.usable
    );
    for n in notes(ctx, p) {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// The arithmetic, one step per line.
pub(super) fn explain(ctx: &Context<'_>, p: &Plan) -> Vec<String> {
    let w = ctx.workload;
    let m = &w.traffic.mix;
    let mut out = Vec::new();
    let shares = m.shares();
    let frames: Vec<String> = m
        .frames
        .iter()
        .zip(&shares)
        .map(|((s, wt), (_, sh))| format!("{s} B x {wt} ({sh:.4} of packets)"))
        .collect();
    out.push(format!(
        "1. frame mix {}: {}; mean frame {:.2} B, {:.2} B on the wire with 20 B of preamble and gap",
        m.name,
        frames.join(", "),
        m.mean_frame_bytes(),
        m.mean_wire_bytes()
    ));
    out.push(match w.rate {
        Rate::PacketsPerSecond(r) => format!(
            "2. rate {} = {} packets/s ({} x {:.2} B x 8 = {} bit/s on the wire)",
            rate_as_given(w.rate),
            grouped(r, 0),
            grouped(r, 0),
            m.mean_wire_bytes(),
            grouped(p.rate_bits_per_second, 0)
        ),
        Rate::BitsPerSecond(b) => format!(
            "2. rate {} = {} / (8 x {:.2} B) = {} packets/s",
            rate_as_given(w.rate),
            grouped(b, 0),
            m.mean_wire_bytes(),
            grouped(p.rate_pps, 0)
        ),
    });
    let f = &p.flows;
    let r = grouped(p.rate_pps, 0);
    out.push(match (f.hit_ratio_given, f.new_flows_given) {
        (true, false) => format!(
            "3. misses = (1 - {}) x {r} = {}/s; no --new-flows-per-second, so every miss is \
             taken as a new flow's first packet",
            f.hit_ratio,
            grouped(f.misses_per_second, 0)
        ),
        (false, _) => format!(
            "3. every new flow's first packet is a miss: misses = {}/s, hit ratio = 1 - {} / \
             {r} = {:.6}",
            grouped(f.new_flows_per_second, 0),
            grouped(f.new_flows_per_second, 0),
            f.hit_ratio
        ),
        (true, true) => format!(
            "3. misses = (1 - {}) x {r} = {}/s, at least the {} new flows/s (each one's first \
             packet misses); the other {}/s are repeat misses of known flows",
            f.hit_ratio,
            grouped(f.misses_per_second, 0),
            grouped(f.new_flows_per_second, 0),
            grouped(f.repeat_misses_per_second, 0)
        ),
    });
    out.push(format!(
        "4. costs from the profile ({} cycles per packet, TSC ticks), weighted over the mix:",
        w.traffic.protocol.name()
    ));
    for part in &p.cost.parts {
        let sizes: Vec<String> = part
            .sizes
            .iter()
            .map(|s| {
                let from = match s.source {
                    Source::Measured => "measured".to_string(),
                    Source::Interpolated { below, above } => {
                        format!("between {below} and {above} B")
                    }
                    Source::Nearest { size } => format!("nearest measured: {size} B"),
                };
                format!("{} B {:.2} ({from})", s.frame_size, s.cycles_per_packet)
            })
            .collect();
        let terms: Vec<String> = part
            .sizes
            .iter()
            .map(|s| format!("{:.4} x {:.2}", s.share, s.cycles_per_packet))
            .collect();
        out.push(format!(
            "   {}: {}; mix: {} = {:.2}{}",
            part.path.name(),
            sizes.join(", "),
            terms.join(" + "),
            profile_cost(part),
            if part.path == CostPath::Pollution {
                format!(
                    " per unit of h (1 - h); each hit pays (1 - {:.4}) x {:.2} = {:.2}",
                    p.flows.hit_ratio,
                    profile_cost(part),
                    part.cycles_per_packet
                )
            } else {
                String::new()
            }
        ));
    }
    if !p.cost.pollution_in_profile && mixed(p) {
        out.push(
            "   pollution: not in the profile (written before the churn bench measured it): \
             taken as 0"
                .to_string(),
        );
    }
    let terms: Vec<String> = p
        .cost
        .parts
        .iter()
        .map(|x| {
            if x.path == CostPath::Pollution {
                let h = p.flows.hit_ratio;
                format!(
                    "{h:.4} x {:.4} x {:.2} ({}: hits x miss share)",
                    1.0 - h,
                    profile_cost(x),
                    plural(x.path)
                )
            } else {
                format!(
                    "{:.4} x {:.2} ({})",
                    x.packet_share,
                    x.cycles_per_packet,
                    plural(x.path)
                )
            }
        })
        .collect();
    let sums: Vec<String> = p
        .cost
        .parts
        .iter()
        .map(|x| format!("{:.2}", x.cycles_per_average_packet))
        .collect();
    out.push(format!(
        "5. cycles per packet (Amdahl) = {} = {} = {:.2}",
        terms.join(" + "),
        sums.join(" + "),
        p.cost.cycles_per_packet
    ));
    out.push(format!(
        "6. cycles per second = {:.2} x {} = {}",
        p.cost.cycles_per_packet,
        grouped(p.rate_pps, 0),
        grouped(p.cycles_per_second, 0)
    ));
    out.push(format!(
        "7. cores = ceil({} / ({} TSC ticks/s x {} usable)) = ceil({:.4}) = {}",
        grouped(p.cycles_per_second, 0),
        grouped(p.tsc_hz as f64, 0),
        p.usable,
        p.cores_exact,
        p.cores
    ));
    let of = |path| {
        p.cost
            .parts
            .iter()
            .find(|x| x.path == path)
            .map_or(0.0, |x| x.cycles_per_average_packet)
    };
    let top = of(p.limit.path);
    let pollution = of(CostPath::Pollution);
    out.push(if p.limit.path == CostPath::Miss && pollution > 0.0 {
        format!(
            "8. misses: ({:.2} + {:.2} of pollution) / {:.2} = {:.1}% of the cycles, the largest \
             part (the pollution counts with the misses: it is what they add to the hits, and \
             goes with them)",
            top,
            pollution,
            p.cost.cycles_per_packet,
            100.0 * p.limit.cycle_share
        )
    } else {
        format!(
            "8. {}: {:.2} / {:.2} = {:.1}% of the cycles, the largest part",
            plural(p.limit.path),
            top,
            p.cost.cycles_per_packet,
            100.0 * p.limit.cycle_share
        )
    });
    out.push(format!(
        "9. one core = {} / {:.2} = {} packets/s (x {} usable = {})",
        grouped(p.tsc_hz as f64, 0),
        p.cost.cycles_per_packet,
        grouped(p.pps_per_core, 0),
        p.usable,
        grouped(p.pps_per_core_usable, 0)
    ));
    out
}

/// The JSON object.
pub(super) fn json(ctx: &Context<'_>, p: &Plan, with_explain: bool) -> Value {
    let w = ctx.workload;
    let m = &w.traffic.mix;
    let h = &ctx.profile.host;
    let frames: Vec<Value> = m
        .frames
        .iter()
        .zip(m.shares())
        .map(|((s, wt), (_, sh))| json!({"frame_size": s, "weight": wt, "share": sh}))
        .collect();
    let parts: Vec<Value> = p
        .cost
        .parts
        .iter()
        .map(|x| {
            json!({
                "path": x.path,
                "packet_share": x.packet_share,
                "packets_per_second": x.packet_share * p.rate_pps,
                "cycles_per_packet": x.cycles_per_packet,
                "cycles_per_second": x.cycles_per_average_packet * p.rate_pps,
                "cycle_share": if p.cost.cycles_per_packet > 0.0 {
                    x.cycles_per_average_packet / p.cost.cycles_per_packet
                } else { 0.0 },
                "sizes": x.sizes,
            })
        })
        .collect();
    let mut v = json!({
        "profile": {
            "path": match ctx.source {
                ProfileSource::File(f) => f.display().to_string(),
                ProfileSource::BuiltIn { .. } => crate::profile::BUILT_IN_NAME.to_string(),
            },
            "built_in": matches!(ctx.source, ProfileSource::BuiltIn { .. }),
            "cpu_model": h.cpu_model,
            "tsc_hz": h.tsc_hz,
            "date": h.date,
            "commit": h.commit,
        },
        "inputs": {
            "rate": w.rate,
            "frame_mix": {
                "name": m.name,
                "frames": frames,
                "mean_frame_bytes": m.mean_frame_bytes(),
                "mean_wire_bytes": m.mean_wire_bytes(),
            },
            "protocol": w.traffic.protocol,
            "vxlan": w.traffic.vxlan,
            "emc_share": w.traffic.emc_share,
            "hit_ratio": w.flows.hit_ratio,
            "new_flows_per_second": w.flows.new_flows_per_second,
            "usable": w.usable,
        },
        "rate_pps": p.rate_pps,
        "rate_gbps": p.rate_bits_per_second / 1e9,
        "hit_ratio": p.flows.hit_ratio,
        "misses_per_second": p.flows.misses_per_second,
        "new_flows_per_second": p.flows.new_flows_per_second,
        "repeat_misses_per_second": p.flows.repeat_misses_per_second,
        "parts": parts,
        "pollution_in_profile": p.cost.pollution_in_profile,
        "pollution_cycle_share": p.limit.pollution_share,
        "cycles_per_packet": p.cost.cycles_per_packet,
        "cycles_per_second": p.cycles_per_second,
        "tsc_hz": p.tsc_hz,
        "usable": p.usable,
        "cores_exact": p.cores_exact,
        "cores": p.cores,
        "pps_per_core": p.pps_per_core,
        "pps_per_core_usable": p.pps_per_core_usable,
        "limit": p.limit,
        "notes": notes(ctx, p),
    });
    if with_explain {
        v["explain"] = json!(explain(ctx, p));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(grouped(1234567.891, 1), "1,234,567.9");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(1000.0, 0), "1,000");
        assert_eq!(grouped(-1234.5, 1), "-1,234.5");
        assert_eq!(grouped(0.0, 2), "0.00");
        assert_eq!(si(12_500_000.0), "12.50 M");
        assert_eq!(si(2_596_000_000.0), "2.60 G");
        assert_eq!(si(1500.0), "1.50 k");
        assert_eq!(si(12.0), "12.00");
        assert_eq!(si_unit(12.0, "pps"), "12.00 pps");
        assert_eq!(si_unit(2.5e6, "pps"), "2.50 Mpps");
    }
}

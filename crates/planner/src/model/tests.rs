//! The planner's arithmetic on a made-up profile whose answers are worked out by hand.

use super::*;
use crate::input::{parse_frame_mix, FrameMix};
use crate::profile::{Cost, HostFacts};

/// 2 GHz TSC. IPv4: EMC hit 100 (64 B) to 150 (1518 B), megaflow hit 200 to 300, miss 2000
/// at every size, VXLAN encap +50, decap +70. IPv6: megaflow hit 260 only.
fn profile() -> Profile {
    let host = HostFacts {
        tsc_hz: 2_000_000_000,
        cpu_model: "Test CPU".into(),
        date: "2026-11-01T10:00:00Z".into(),
        commit: None,
    };
    let c = |path, protocol, frame_size, cycles_per_packet| Cost {
        path,
        protocol,
        frame_size,
        cycles_per_packet,
        scenario: "flows".into(),
        flows: None,
        date: String::new(),
    };
    let v4 = Protocol::Ipv4;
    let mut p = Profile::new(host.clone());
    p.merge(
        host,
        &[
            c(CostPath::EmcHit, v4, 64, 100.0),
            c(CostPath::EmcHit, v4, 1518, 150.0),
            c(CostPath::MegaflowHit, v4, 1518, 300.0),
            c(CostPath::MegaflowHit, v4, 64, 200.0),
            c(CostPath::Miss, v4, 64, 2000.0),
            c(CostPath::Miss, v4, 1518, 2000.0),
            c(CostPath::VxlanEncap, v4, 64, 50.0),
            c(CostPath::VxlanDecap, v4, 64, 70.0),
            c(CostPath::MegaflowHit, Protocol::Ipv6, 78, 260.0),
        ],
    );
    p
}

fn traffic(mix: &str) -> Traffic {
    Traffic {
        mix: parse_frame_mix(mix).expect("mix"),
        protocol: Protocol::Ipv4,
        vxlan: None,
        emc_share: 0.0,
    }
}

fn workload(rate: Rate, mix: &str, h: Option<f64>, n: Option<f64>) -> Workload {
    Workload {
        rate,
        traffic: traffic(mix),
        flows: FlowInputs {
            hit_ratio: h,
            new_flows_per_second: n,
        },
        usable: 0.8,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn ten_mpps_at_three_quarters_hits_needs_five_cores() {
    // 0.75 x 200 + 0.25 x 2000 = 650 cycles/packet; x 10 Mpps = 6.5 G cycles/s;
    // / (2 GHz x 0.8) = 4.0625 -> 5 cores; misses take 500 / 650 = 76.9%.
    let w = workload(Rate::PacketsPerSecond(10e6), "64", Some(0.75), None);
    let p = plan(&profile(), &w).expect("plan");
    assert!(close(p.cost.cycles_per_packet, 650.0));
    assert!(close(p.cycles_per_second, 6.5e9));
    assert!(close(p.cores_exact, 4.0625));
    assert_eq!(p.cores, 5);
    assert_eq!(p.limit.path, CostPath::Miss);
    assert_eq!(p.limit.text, "misses take 76.9% of the cycles");
    assert!(close(p.pps_per_core, 2e9 / 650.0));
    assert!(close(p.pps_per_core_usable, 0.8 * 2e9 / 650.0));
    assert!(close(p.flows.misses_per_second, 2.5e6));
    assert!(close(p.flows.new_flows_per_second, 2.5e6));
    let parts: Vec<(CostPath, f64)> = p
        .cost
        .parts
        .iter()
        .map(|x| (x.path, x.packet_share))
        .collect();
    assert_eq!(
        parts,
        vec![(CostPath::MegaflowHit, 0.75), (CostPath::Miss, 0.25)]
    );
    // 64 B frames: 10 Mpps x 84 B x 8 on the wire.
    assert!(close(p.rate_bits_per_second, 10e6 * 84.0 * 8.0));
}

#[test]
fn whole_cores_are_not_rounded_up_by_float_noise() {
    // Every packet a megaflow hit at 200 cycles, 10 Mpps = 2 G cycles/s = one 2 GHz core.
    let mut w = workload(Rate::PacketsPerSecond(10e6), "64", Some(1.0), None);
    w.usable = 1.0;
    let p = plan(&profile(), &w).expect("plan");
    assert!(close(p.cores_exact, 1.0));
    assert_eq!(p.cores, 1);
    assert_eq!(p.limit.text, "megaflow hits take 100.0% of the cycles");
    // A trickle still needs one core.
    let w = workload(Rate::PacketsPerSecond(1.0), "64", Some(1.0), None);
    assert_eq!(plan(&profile(), &w).expect("plan").cores, 1);
}

#[test]
fn frame_sizes_between_measured_ones_are_interpolated() {
    let pts = [(64, 200.0), (1518, 300.0)];
    assert_eq!(interpolate(&pts, 64), Some((200.0, Source::Measured)));
    assert_eq!(interpolate(&pts, 1518), Some((300.0, Source::Measured)));
    let (c, s) = interpolate(&pts, 791).expect("mid");
    assert!(close(c, 250.0));
    assert_eq!(
        s,
        Source::Interpolated {
            below: 64,
            above: 1518
        }
    );
    assert_eq!(
        interpolate(&pts, 9000),
        Some((300.0, Source::Nearest { size: 1518 }))
    );
    assert_eq!(
        interpolate(&[(78, 5.0)], 64),
        Some((5.0, Source::Nearest { size: 78 }))
    );
    assert_eq!(interpolate(&[], 64), None);
    let three = [(64, 1.0), (128, 3.0), (256, 4.0)];
    assert_eq!(interpolate(&three, 128), Some((3.0, Source::Measured)));
    assert!(close(interpolate(&three, 96).expect("96").0, 2.0));
    assert!(close(interpolate(&three, 192).expect("192").0, 3.5));

    // IMIX over the megaflow path: 7/12 at 64 B, 4/12 at 576 B, 1/12 at 1500 B.
    let at = |s: usize| 200.0 + 100.0 * (s - 64) as f64 / (1518 - 64) as f64;
    let want = (7.0 * at(64) + 4.0 * at(576) + at(1500)) / 12.0;
    let c = packet_cost(&profile(), &traffic("imix"), 1.0).expect("cost");
    assert!(
        close(c.cycles_per_packet, want),
        "{} vs {want}",
        c.cycles_per_packet
    );
    assert_eq!(c.parts[0].sizes.len(), 3);
    assert_eq!(c.parts[0].sizes[1].frame_size, 576);
}

#[test]
fn emc_share_vxlan_and_protocol_choose_the_costs() {
    let p = profile();
    // Half the hits from the EMC: 0.9 x (0.5 x 100 + 0.5 x 200) + 0.1 x 2000 = 335.
    let mut t = traffic("64");
    t.emc_share = 0.5;
    assert!(close(
        packet_cost(&p, &t, 0.9).expect("c").cycles_per_packet,
        335.0
    ));
    // VXLAN both ways: + 0.5 x 50 + 0.5 x 70 = 60 on every packet.
    t.vxlan = Some(Vxlan::Both);
    assert!(close(
        packet_cost(&p, &t, 0.9).expect("c").cycles_per_packet,
        395.0
    ));
    t.vxlan = Some(Vxlan::Decap);
    assert!(close(
        packet_cost(&p, &t, 0.9).expect("c").cycles_per_packet,
        405.0
    ));
    // All hits from the EMC: the megaflow and miss costs are not needed.
    let mut t = traffic("64");
    t.emc_share = 1.0;
    t.protocol = Protocol::Ipv6;
    let e = packet_cost(&p, &t, 1.0).expect_err("no v6 emc");
    assert_eq!(
        e,
        PlanError::MissingCost {
            path: CostPath::EmcHit,
            protocol: Protocol::Ipv6,
            why: "hits answered by the EMC (--emc-share)".into()
        }
    );
    // IPv6 megaflow hits only: measured at 78 B, used for 64 B with a nearest-size note.
    t.emc_share = 0.0;
    let c = packet_cost(&p, &t, 1.0).expect("v6 hits");
    assert!(close(c.cycles_per_packet, 260.0));
    assert_eq!(c.parts[0].sizes[0].source, Source::Nearest { size: 78 });
    // IPv6 misses were never measured: the error says no bench run measures them.
    let e = packet_cost(&p, &t, 0.5)
        .expect_err("no v6 miss")
        .to_string();
    assert!(
        e.contains("no `miss` cost for ipv6 packets")
            && e.contains("no bench run measures IPv6 flow-switch costs yet"),
        "{e}"
    );
}

#[test]
fn pps_per_core_follows_amdahl() {
    let p = profile();
    let t = traffic("64");
    // Figure 6 of the paper with these costs: all misses, all hits, and between.
    assert!(close(pps_per_core(&p, &t, 0.0).expect("0"), 1e6));
    assert!(close(pps_per_core(&p, &t, 1.0).expect("1"), 1e7));
    assert!(close(pps_per_core(&p, &t, 0.5).expect(".5"), 2e9 / 1100.0));
    assert!(close(pps_per_core(&p, &t, 0.99).expect(".99"), 2e9 / 218.0));
    let mut last = 0.0;
    for h in [0.0, 0.5, 0.75, 0.9, 0.99, 1.0] {
        let v = pps_per_core(&p, &t, h).expect("h");
        assert!(v > last, "rises with the hit ratio");
        last = v;
    }
}

#[test]
fn bit_rates_use_the_mix() {
    // 10 Gbit/s of 64-byte frames = 14.88 Mpps; every packet a megaflow hit at 200 cycles:
    // 2.976 G cycles/s / 1.6 G usable = 1.86 -> 2 cores.
    let w = workload(Rate::BitsPerSecond(10e9), "64", Some(1.0), None);
    let p = plan(&profile(), &w).expect("plan");
    assert!(close(p.rate_pps, 10e9 / (84.0 * 8.0)));
    assert!(close(p.rate_bits_per_second, 10e9));
    assert_eq!(p.cores, 2);
    let m = FrameMix::imix();
    let w = workload(Rate::BitsPerSecond(10e9), "imix", Some(1.0), None);
    let p = plan(&profile(), &w).expect("plan");
    assert!(close(p.rate_pps, 10e9 / (m.mean_wire_bytes() * 8.0)));
}

#[test]
fn hit_ratio_and_new_flows_combine_or_are_refused() {
    let r = 10e6;
    let only_h = resolve_flows(
        FlowInputs {
            hit_ratio: Some(0.75),
            new_flows_per_second: None,
        },
        r,
    )
    .expect("h");
    assert!(close(only_h.misses_per_second, 2.5e6));
    assert!(close(only_h.new_flows_per_second, 2.5e6));
    assert!(only_h.hit_ratio_given && !only_h.new_flows_given);

    let only_n = resolve_flows(
        FlowInputs {
            hit_ratio: None,
            new_flows_per_second: Some(1e6),
        },
        r,
    )
    .expect("n");
    assert!(close(only_n.hit_ratio, 0.9));
    assert!(close(only_n.misses_per_second, 1e6));

    let both = resolve_flows(
        FlowInputs {
            hit_ratio: Some(0.75),
            new_flows_per_second: Some(1e6),
        },
        r,
    )
    .expect("both");
    assert!(close(both.misses_per_second, 2.5e6));
    assert!(close(both.repeat_misses_per_second, 1.5e6));
    // Exactly as many new flows as misses is consistent.
    let eq = resolve_flows(
        FlowInputs {
            hit_ratio: Some(0.75),
            new_flows_per_second: Some(2.5e6),
        },
        r,
    )
    .expect("equal");
    assert_eq!(eq.repeat_misses_per_second, 0.0);

    let e = resolve_flows(
        FlowInputs {
            hit_ratio: Some(0.75),
            new_flows_per_second: Some(3e6),
        },
        r,
    )
    .expect_err("contradiction");
    assert_eq!(
        e.to_string(),
        "--new-flows-per-second 3000000 contradicts --hit-ratio 0.75: each new flow's first \
         packet is a miss, so 3000000 new flows/s need at least 3000000 misses/s, but at \
         10000000 packets/s a hit ratio of 0.75 leaves (1 - 0.75) x 10000000 = 2500000 \
         misses/s; accepted: --hit-ratio at most 0.7, or at most 2500000 new flows/s"
    );
    let e = resolve_flows(
        FlowInputs {
            hit_ratio: None,
            new_flows_per_second: Some(2e7),
        },
        r,
    )
    .expect_err("too many");
    assert!(e.to_string().contains("exceeds the packet rate"), "{e}");
    assert_eq!(
        resolve_flows(FlowInputs::default(), r),
        Err(PlanError::NoFlowInput)
    );
}

/// The test profile with a pollution cost of 400 cycles at 64 B.
fn polluted_profile() -> Profile {
    let mut p = profile();
    let host = p.host.clone();
    p.merge(
        host,
        &[Cost {
            path: CostPath::Pollution,
            protocol: Protocol::Ipv4,
            frame_size: 64,
            cycles_per_packet: 400.0,
            scenario: "flows-churn".into(),
            flows: None,
            date: String::new(),
        }],
    );
    p
}

#[test]
fn pollution_adds_h_times_miss_share_and_counts_with_the_misses() {
    // 0.75 x 200 + 0.25 x 2000 + 0.75 x 0.25 x 400 = 150 + 500 + 75 = 725 cycles/packet.
    let w = workload(Rate::PacketsPerSecond(10e6), "64", Some(0.75), None);
    let p = plan(&polluted_profile(), &w).expect("plan");
    assert!(close(p.cost.cycles_per_packet, 725.0));
    assert!(p.cost.pollution_in_profile);
    let pol = p
        .cost
        .parts
        .iter()
        .find(|x| x.path == CostPath::Pollution)
        .expect("pollution part");
    // The hits pay it: 0.75 of packets, (1 - 0.75) x 400 = 100 cycles each.
    assert!(close(pol.packet_share, 0.75));
    assert!(close(pol.cycles_per_packet, 100.0));
    assert!(close(pol.cycles_per_average_packet, 75.0));
    assert!(close(pol.sizes[0].cycles_per_packet, 400.0));
    // Misses' own 500 and their pollution 75 of 725: 79.3% (69.0% + 10.3%).
    assert_eq!(p.limit.path, CostPath::Miss);
    assert!(close(p.limit.cycle_share, 575.0 / 725.0));
    assert!(close(p.limit.pollution_share, 75.0 / 725.0));
    assert_eq!(
        p.limit.text,
        "misses take 79.3% of the cycles (69.0% missing, 10.3% in the hits they pollute)"
    );
    assert!(close(p.pps_per_core, 2e9 / 725.0));
    // Parts in order: the pollution right after the misses.
    let order: Vec<CostPath> = p.cost.parts.iter().map(|x| x.path).collect();
    assert_eq!(
        order,
        vec![CostPath::MegaflowHit, CostPath::Miss, CostPath::Pollution]
    );

    // No term at all hits or all misses: h (1 - h) = 0.
    let t = traffic("64");
    let pp = polluted_profile();
    assert!(close(pps_per_core(&pp, &t, 1.0).expect("1"), 1e7));
    assert!(close(pps_per_core(&pp, &t, 0.0).expect("0"), 1e6));
    // Largest at h = 0.5: 100 + 1000 + 100 = 1200.
    assert!(close(pps_per_core(&pp, &t, 0.5).expect(".5"), 2e9 / 1200.0));

    // Hits still the larger part: the megaflow hits lead, the pollution is not theirs.
    // 0.99 x 200 + 0.01 x 2000 + 0.99 x 0.01 x 400 = 198 + 20 + 3.96.
    let w = workload(Rate::PacketsPerSecond(10e6), "64", Some(0.99), None);
    let p = plan(&pp, &w).expect("plan");
    assert!(close(p.cost.cycles_per_packet, 221.96));
    assert_eq!(p.limit.path, CostPath::MegaflowHit);
    assert!(close(p.limit.cycle_share, 198.0 / 221.96));
    assert!(close(p.limit.pollution_share, 3.96 / 221.96));
    assert_eq!(p.limit.text, "megaflow hits take 89.2% of the cycles");
}

#[test]
fn a_profile_without_pollution_means_zero() {
    // The same arithmetic as before the term existed, and the plan says the term is missing.
    let w = workload(Rate::PacketsPerSecond(10e6), "64", Some(0.75), None);
    let p = plan(&profile(), &w).expect("plan");
    assert!(!p.cost.pollution_in_profile);
    assert!(close(p.cost.cycles_per_packet, 650.0));
    assert!(p.cost.parts.iter().all(|x| x.path != CostPath::Pollution));
    assert_eq!(p.limit.pollution_share, 0.0);
    assert_eq!(p.limit.text, "misses take 76.9% of the cycles");
    // A measured pollution of 0 is a part of 0 cycles, not an absence.
    let mut pp = polluted_profile();
    for c in &mut pp.costs {
        if c.path == CostPath::Pollution {
            c.cycles_per_packet = 0.0;
        }
    }
    let p = plan(&pp, &w).expect("plan");
    assert!(p.cost.pollution_in_profile);
    assert!(close(p.cost.cycles_per_packet, 650.0));
    assert_eq!(p.limit.text, "misses take 76.9% of the cycles");
}

//! Tests of the LB model: all-or-nothing `apply`, stable ids and generations, drain/remove/flush,
//! `collect`, and the per-port VIP rules.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn key(p: &str, protocol: VipProtocol, port: u16) -> VipKey {
    let (a, l) = p.split_once('/').unwrap();
    VipKey {
        prefix: Prefix::new(ip(a), l.parse().unwrap()).unwrap(),
        protocol,
        port,
    }
}

fn vip(k: VipKey, encap: Encap) -> LbCommand {
    LbCommand::AddVip(VipSpec {
        key: k,
        encap,
        new_len: DEFAULT_NEW_LEN,
        src_ip_sticky: false,
        node_port: None,
    })
}

fn add(k: VipKey, servers: &[(&str, Option<u32>)]) -> LbCommand {
    LbCommand::AddAs {
        vip: k,
        servers: servers
            .iter()
            .map(|(a, w)| AsSpec {
                addr: ip(a),
                weight: *w,
            })
            .collect(),
        flush: false,
    }
}

fn del(k: VipKey, servers: &[&str], flush: bool) -> LbCommand {
    LbCommand::DelAs {
        vip: k,
        servers: servers.iter().map(|a| ip(a)).collect(),
        flush,
    }
}

fn http() -> VipKey {
    key("198.18.1.1/32", VipProtocol::Tcp, 80)
}

fn dsr() -> Encap {
    Encap::L3dsr { dscp: 23 }
}

fn slot_of(s: &LbState, k: &VipKey, a: &str) -> AsSlot {
    s.vip_by_key(k).unwrap().servers[&ip(a)]
}

#[test]
fn apply_is_all_or_nothing() {
    let s0 = LbState::new();
    let s1 = s0
        .apply(&[vip(http(), dsr()), add(http(), &[("198.18.2.1", None)])])
        .unwrap();
    assert_eq!(s1.version(), 1);
    let bad = [
        add(http(), &[("198.18.2.2", None)]),
        add(http(), &[("2001:db8::1", None)]), // wrong family for l3dsr
    ];
    let e = s1.apply(&bad).unwrap_err();
    assert_eq!(e.index, 1);
    assert!(
        matches!(e.kind, LbErrorKind::ServerFamily { .. }),
        "{e}: {:?}",
        e.kind
    );
    assert!(e.to_string().contains("2001:db8::1"), "{e}");
    // s1 is untouched; applying nothing changes nothing (no version bump).
    assert_eq!(s1.vip_by_key(&http()).unwrap().servers.len(), 1);
    assert_eq!(s1.apply(&[]).unwrap(), s1);
    assert_eq!(s1.apply(&[LbCommand::Show(LbShow::Summary)]).unwrap(), s1);
}

#[test]
fn ids_are_stable_and_reused_lowest_first() {
    let a = key("198.18.1.1/32", VipProtocol::Any, 0);
    let b = key("198.18.1.2/32", VipProtocol::Any, 0);
    let c = key("198.18.1.3/32", VipProtocol::Any, 0);
    let conf = LbCommand::Conf(ConfChange {
        ip4_src: Some(SourceAddress {
            addr: ip("198.18.0.254"),
            len: 32,
        }),
        ..Default::default()
    });
    let s = LbState::new()
        .apply(&[conf, vip(a, Encap::Gre4), vip(b, Encap::Gre4)])
        .unwrap();
    assert_eq!(s.vip_by_key(&a).unwrap().id, VipId(0));
    assert_eq!(s.vip_by_key(&b).unwrap().id, VipId(1));
    let s = s
        .apply(&[LbCommand::DelVip(a), vip(c, Encap::Gre4)])
        .unwrap();
    assert_eq!(s.vip_by_key(&b).unwrap().id, VipId(1), "b keeps its id");
    assert_eq!(s.vip_by_key(&c).unwrap().id, VipId(0), "c reuses a's id");
    assert_eq!(s.vip_capacity(), 2);
}

#[test]
fn drain_remove_flush_and_collect() {
    let s = LbState::new()
        .apply(&[
            vip(http(), dsr()),
            add(
                http(),
                &[
                    ("198.18.2.1", None),
                    ("198.18.2.2", Some(3)),
                    ("198.18.2.3", None),
                ],
            ),
        ])
        .unwrap();
    let (s1, s2, s3) = (
        slot_of(&s, &http(), "198.18.2.1"),
        slot_of(&s, &http(), "198.18.2.2"),
        slot_of(&s, &http(), "198.18.2.3"),
    );
    assert_eq!((s1, s2, s3), (AsSlot(0), AsSlot(1), AsSlot(2)));
    assert_eq!(s.slot(s2).weight, 3);
    let g1 = s.slot(s1).gen;
    // Weight 0 drains; re-adding without weight keeps the weight.
    let s = s
        .apply(&[add(
            http(),
            &[("198.18.2.1", Some(0)), ("198.18.2.2", None)],
        )])
        .unwrap();
    assert_eq!(s.slot(s1).state, AsState::Draining);
    assert_eq!(s.slot(s1).gen, g1);
    assert_eq!(s.slot(s2).weight, 3);
    // Delete without flush: Removed, gen kept; with flush: freed, gen bumped.
    let s = s
        .apply(&[
            del(http(), &["198.18.2.1"], false),
            del(http(), &["198.18.2.3"], true),
        ])
        .unwrap();
    assert_eq!(s.slot(s1).state, AsState::Removed);
    assert_eq!(s.slot(s1).gen, g1);
    assert_eq!(s.slot(s3).state, AsState::Free);
    let g3 = s.slot(s3).gen;
    assert_ne!(g3, 0);
    // Deleting a removed server again (without flush) is refused: it is gone already.
    let e = s.apply(&[del(http(), &["198.18.2.1"], false)]).unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::NoSuchServer { .. }), "{e}");
    // A new server takes the free slot 2 with its new gen.
    let s = s.apply(&[add(http(), &[("198.18.2.9", None)])]).unwrap();
    assert_eq!(slot_of(&s, &http(), "198.18.2.9"), s3);
    assert_eq!(s.slot(s3).gen, g3);
    // collect: the first call stamps, a later one frees once timeout + grace passed and no
    // flow is left.
    let s = s.collect(1000, |_| 0).unwrap();
    assert_eq!(s.slot(s1).removed_since, Some(1000));
    assert!(s.collect(1010, |_| 0).is_none());
    let wait = DEFAULT_TIMEOUT as u64 + COLLECT_GRACE;
    assert!(
        s.collect(1000 + wait, |_| 5).is_none(),
        "live flows hold it"
    );
    let s = s.collect(1000 + wait, |_| 0).unwrap();
    assert_eq!(s.slot(s1).state, AsState::Free);
    assert_eq!(s.slot(s1).gen, g1.wrapping_add(1));
    assert!(!s
        .vip_by_key(&http())
        .unwrap()
        .servers
        .contains_key(&ip("198.18.2.1")));
}

#[test]
fn readding_a_removed_server_revives_its_slot() {
    let s = LbState::new()
        .apply(&[vip(http(), dsr()), add(http(), &[("198.18.2.1", Some(5))])])
        .unwrap();
    let s1 = slot_of(&s, &http(), "198.18.2.1");
    let g = s.slot(s1).gen;
    let s = s.apply(&[del(http(), &["198.18.2.1"], false)]).unwrap();
    let s = s.apply(&[add(http(), &[("198.18.2.1", None)])]).unwrap();
    assert_eq!(slot_of(&s, &http(), "198.18.2.1"), s1);
    assert_eq!(s.slot(s1).gen, g);
    assert_eq!(s.slot(s1).state, AsState::Active);
    assert_eq!(
        s.slot(s1).weight,
        DEFAULT_WEIGHT,
        "VPP revives a server at weight 100"
    );
}

#[test]
fn flush_vip_and_delete_vip_bump_gens() {
    let s = LbState::new()
        .apply(&[vip(http(), dsr()), add(http(), &[("198.18.2.1", None)])])
        .unwrap();
    let s1 = slot_of(&s, &http(), "198.18.2.1");
    let g = s.slot(s1).gen;
    let s = s.apply(&[LbCommand::FlushVip(http())]).unwrap();
    assert_eq!(s.slot(s1).gen, g + 1);
    assert_eq!(s.slot(s1).state, AsState::Active);
    let s = s.apply(&[LbCommand::DelVip(http())]).unwrap();
    assert_eq!(s.slot(s1).state, AsState::Free);
    assert_eq!(s.slot(s1).gen, g + 2);
    assert!(s.vip_by_key(&http()).is_none());
}

#[test]
fn per_port_vips_on_one_prefix_coexist() {
    let p = "198.18.1.1/32";
    let s = LbState::new()
        .apply(&[
            vip(key(p, VipProtocol::Tcp, 80), Encap::L3dsr { dscp: 1 }),
            vip(key(p, VipProtocol::Tcp, 443), Encap::L3dsr { dscp: 2 }),
            vip(
                key(p, VipProtocol::Udp, 53),
                Encap::Nat4 { target_port: 5353 },
            ),
            vip(key(p, VipProtocol::Any, 0), Encap::L3dsr { dscp: 4 }),
        ])
        .unwrap();
    assert_eq!(s.vips().count(), 4);
    // As VPP: a protocol without a port is the all-protocols, all-ports VIP (changed in place).
    let t = s
        .apply(&[vip(key(p, VipProtocol::Tcp, 0), Encap::L3dsr { dscp: 3 })])
        .unwrap();
    assert_eq!(t.vips().count(), 4);
    assert_eq!(
        t.vip_by_key(&key(p, VipProtocol::Any, 0))
            .unwrap()
            .spec
            .encap,
        Encap::L3dsr { dscp: 3 }
    );
}

#[test]
fn refused_vip_settings() {
    let v6 = key("2001:db8:1::1/128", VipProtocol::Tcp, 80);
    let cases: &[(VipKey, Encap, &str)] = &[
        (v6, dsr(), "IPv4 only"),
        (http(), Encap::L3dsr { dscp: 64 }, "0..=63"),
        (v6, Encap::Nat4 { target_port: 80 }, "NAT64"),
        (http(), Encap::Nat6 { target_port: 80 }, "NAT46"),
        (
            key("198.18.1.1/32", VipProtocol::Tcp, 0),
            Encap::Nat4 { target_port: 80 },
            "needs a port",
        ),
        (http(), Encap::Nat4 { target_port: 0 }, "target_port"),
        (
            VipKey {
                port: 80,
                ..key("198.18.1.1/32", VipProtocol::Any, 0)
            },
            Encap::Gre4,
            "protocol tcp",
        ),
    ];
    for (k, e, want) in cases {
        let err = LbState::new().apply(&[vip(*k, *e)]).unwrap_err();
        assert!(err.to_string().contains(want), "{k}: {err}");
    }
}

#[test]
fn gre_needs_a_source_anywhere_in_the_batch() {
    let k = key("2001:db8:1::1/128", VipProtocol::Any, 0);
    let e = LbState::new().apply(&[vip(k, Encap::Gre6)]).unwrap_err();
    assert!(e.to_string().contains("ip6-src-address"), "{e}");
    let conf = LbCommand::Conf(ConfChange {
        ip6_src: Some(SourceAddress {
            addr: ip("2001:db8::fe"),
            len: 128,
        }),
        ..Default::default()
    });
    // The conf may come after the VIP in the same batch.
    LbState::new().apply(&[vip(k, Encap::Gre6), conf]).unwrap();
}

#[test]
fn duplicates_and_unknowns_are_refused() {
    let s = LbState::new().apply(&[vip(http(), dsr())]).unwrap();
    let e = s
        .apply(&[add(
            http(),
            &[("198.18.2.1", None), ("198.18.2.1", Some(2))],
        )])
        .unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::DuplicateServer(_)), "{e}");
    let e = s.apply(&[del(http(), &["198.18.2.7"], true)]).unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::NoSuchServer { .. }), "{e}");
    let other = key("198.18.1.1/32", VipProtocol::Udp, 80);
    let e = s.apply(&[add(other, &[("198.18.2.1", None)])]).unwrap_err();
    assert!(
        e.to_string()
            .contains("no VIP 198.18.1.1/32 protocol udp port 80"),
        "{e}"
    );
    let e = s.apply(&[add(http(), &[("0.0.0.0", None)])]).unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::BadServer(_)), "{e}");
}

#[test]
fn l3dsr_dscp_clash_with_a_shared_server_is_refused() {
    let a = key("198.18.1.1/32", VipProtocol::Tcp, 80);
    let b = key("198.18.1.2/32", VipProtocol::Tcp, 80);
    let c = key("198.18.1.1/32", VipProtocol::Tcp, 443);
    let s = LbState::new()
        .apply(&[
            vip(a, dsr()),
            vip(b, dsr()),
            vip(c, dsr()),
            add(a, &[("198.18.2.1", None)]),
            add(b, &[("198.18.2.2", None)]),
            add(c, &[("198.18.2.1", None)]), // same address: fine
        ])
        .unwrap();
    let e = s.apply(&[add(b, &[("198.18.2.1", None)])]).unwrap_err();
    assert!(
        matches!(e.kind, LbErrorKind::DscpClash { dscp: 23, .. }),
        "{e}"
    );
}

#[test]
fn changing_encap_checks_servers() {
    let s = LbState::new()
        .apply(&[vip(http(), dsr()), add(http(), &[("198.18.2.1", None)])])
        .unwrap();
    let e = s
        .apply(&[vip(http(), Encap::Nat6 { target_port: 80 })])
        .unwrap_err();
    assert!(e.to_string().contains("NAT46"), "{e}");
    let s2 = s
        .apply(&[vip(http(), Encap::Nat4 { target_port: 8080 })])
        .unwrap();
    let v = s2.vip_by_key(&http()).unwrap();
    assert_eq!(v.id, s.vip_by_key(&http()).unwrap().id);
    assert_eq!(v.servers.len(), 1);
}

#[test]
fn limits_are_enforced() {
    let mut cmds: Vec<LbCommand> = (0..=MAX_VIPS as u32)
        .map(|i| {
            let a = Ipv4Addr::from(0xc612_0000u32 + i);
            vip(VipKey::all(Prefix::host(IpAddr::V4(a))), dsr_n(i))
        })
        .collect();
    let e = LbState::new().apply(&cmds).unwrap_err();
    assert_eq!(e.index, MAX_VIPS);
    assert!(matches!(e.kind, LbErrorKind::Full { .. }), "{e}");
    cmds.pop();
    assert_eq!(
        LbState::new().apply(&cmds).unwrap().vips().count(),
        MAX_VIPS
    );
}

fn dsr_n(i: u32) -> Encap {
    Encap::L3dsr {
        dscp: (i % 64) as u8,
    }
}

#[test]
fn prefixes_are_canonical() {
    assert!(Prefix::new(ip("198.18.1.1"), 24).is_none());
    assert!(Prefix::new(ip("198.18.1.0"), 33).is_none());
    let p = Prefix::new(ip("2001:db8::"), 32).unwrap();
    assert!(p.contains(ip("2001:db8:ffff::1")));
    assert!(!p.contains(ip("198.18.0.1")));
    assert_eq!(
        Prefix::new(ip("0.0.0.0"), 0).unwrap().to_string(),
        "0.0.0.0/0"
    );
}

#[test]
fn many_servers_on_one_line_get_consecutive_slots() {
    let servers: Vec<AsSpec> = (0..5000u32)
        .map(|i| AsSpec {
            addr: IpAddr::V4(Ipv4Addr::from(0xc613_0000u32 + i)),
            weight: None,
        })
        .collect();
    let s = LbState::new()
        .apply(&[
            vip(http(), dsr()),
            LbCommand::AddAs {
                vip: http(),
                servers,
                flush: false,
            },
        ])
        .unwrap();
    assert_eq!(s.slot_capacity(), 5000);
    assert_eq!(slot_of(&s, &http(), "198.19.19.135"), AsSlot(4999));
}

fn health(k: VipKey, servers: &[&str], down: bool, flush: bool) -> LbCommand {
    LbCommand::SetHealth {
        vip: k,
        servers: servers.iter().map(|a| ip(a)).collect(),
        down,
        flush,
    }
}

/// A web VIP with .1 (weight 1), .2 (weight 3) and .3 (weight 0).
fn web() -> LbState {
    LbState::new()
        .apply(&[
            vip(http(), dsr()),
            add(
                http(),
                &[
                    ("198.18.2.1", None),
                    ("198.18.2.2", Some(3)),
                    ("198.18.2.3", Some(0)),
                ],
            ),
        ])
        .unwrap()
}

#[test]
fn health_down_drains_and_keeps_the_configured_weight() {
    let s = web();
    let s2 = slot_of(&s, &http(), "198.18.2.2");
    let g = s.slot(s2).gen;
    let d = s
        .apply(&[health(http(), &["198.18.2.2"], true, false)])
        .unwrap();
    assert_eq!(d.version(), s.version() + 1);
    let info = d.slot(s2);
    assert_eq!(
        (info.state, info.weight, info.health_down, info.gen),
        (AsState::Draining, 3, true, g),
        "drained: out of the table, flows and configured weight kept"
    );
    assert_eq!(info.effective_weight(), 0);
    assert_eq!(s.slot(s2).effective_weight(), 3);
    // A weight change while down changes the configured weight only.
    let d = d.apply(&[add(http(), &[("198.18.2.2", Some(5))])]).unwrap();
    assert_eq!(
        (d.slot(s2).state, d.slot(s2).weight, d.slot(s2).health_down),
        (AsState::Draining, 5, true)
    );
    // Re-adding without a weight keeps it (and keeps it down).
    let d = d.apply(&[add(http(), &[("198.18.2.2", None)])]).unwrap();
    assert_eq!((d.slot(s2).weight, d.slot(s2).health_down), (5, true));
    // Up again: the configured weight returns.
    let u = d
        .apply(&[health(http(), &["198.18.2.2"], false, false)])
        .unwrap();
    let info = u.slot(s2);
    assert_eq!(
        (info.state, info.weight, info.health_down, info.gen),
        (AsState::Active, 5, false, g)
    );
    assert_eq!(info.effective_weight(), 5);
    // A weight-0 server marked down and up stays draining.
    let s3 = slot_of(&s, &http(), "198.18.2.3");
    let z = s
        .apply(&[
            health(http(), &["198.18.2.3"], true, false),
            health(http(), &["198.18.2.3"], false, false),
        ])
        .unwrap();
    assert_eq!(z.slot(s3).state, AsState::Draining);
    assert_eq!(z, s, "down then up in one batch changes nothing");
}

#[test]
fn health_down_with_flush_bumps_the_gen_once() {
    let s = web();
    let s1 = slot_of(&s, &http(), "198.18.2.1");
    let g = s.slot(s1).gen;
    let d = s
        .apply(&[health(http(), &["198.18.2.1"], true, true)])
        .unwrap();
    let info = d.slot(s1);
    assert_eq!(
        (info.state, info.weight, info.gen),
        (AsState::Draining, DEFAULT_WEIGHT, g.wrapping_add(1)),
        "flushed but still configured"
    );
    assert!(d
        .vip_by_key(&http())
        .unwrap()
        .servers
        .contains_key(&ip("198.18.2.1")));
    // Already down: a second flush is a no-op (idempotent), as is marking up twice.
    assert_eq!(
        d.apply(&[health(http(), &["198.18.2.1"], true, true)])
            .unwrap(),
        d
    );
    let u = d
        .apply(&[health(http(), &["198.18.2.1"], false, true)])
        .unwrap();
    assert_eq!(
        u.slot(s1).gen,
        g.wrapping_add(1),
        "flush is ignored when going up"
    );
    assert_eq!(u.slot(s1).state, AsState::Active);
    assert_eq!(
        u.apply(&[health(http(), &["198.18.2.1"], false, false)])
            .unwrap(),
        u
    );
}

#[test]
fn health_marks_are_idempotent_without_a_version_bump() {
    let s = web();
    let up = s
        .apply(&[health(http(), &["198.18.2.1", "198.18.2.2"], false, true)])
        .unwrap();
    assert_eq!(up, s);
    assert_eq!(up.version(), s.version());
    let d = s
        .apply(&[health(http(), &["198.18.2.1"], true, false)])
        .unwrap();
    let again = d
        .apply(&[health(http(), &["198.18.2.1"], true, false)])
        .unwrap();
    assert_eq!((again.version(), &again), (d.version(), &d));
}

#[test]
fn health_of_unknown_vips_or_servers_is_refused_and_applies_nothing() {
    let s = web();
    let other = key("198.18.1.9/32", VipProtocol::Tcp, 80);
    let e = s
        .apply(&[health(other, &["198.18.2.1"], true, false)])
        .unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::NoSuchVip(_)), "{e}");
    let e = s
        .apply(&[health(http(), &["198.18.2.1", "198.18.2.7"], true, false)])
        .unwrap_err();
    assert!(
        matches!(e.kind, LbErrorKind::NoSuchServer { addr, .. } if addr == ip("198.18.2.7")),
        "{e}"
    );
    assert!(e.to_string().contains("198.18.2.7"), "{e}");
    let e = s
        .apply(&[health(http(), &["198.18.2.1", "198.18.2.1"], true, false)])
        .unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::DuplicateServer(_)), "{e}");
    // A batch whose second command is a bad SetHealth applies nothing (not even the first).
    let e = s
        .apply(&[
            health(http(), &["198.18.2.1"], true, true),
            add(http(), &[("198.18.2.2", Some(9))]),
            health(http(), &["198.18.2.9"], true, false),
        ])
        .unwrap_err();
    assert_eq!(e.index, 2);
    let s1 = slot_of(&s, &http(), "198.18.2.1");
    assert!(!s.slot(s1).health_down);
    assert_eq!(s.slot(slot_of(&s, &http(), "198.18.2.2")).weight, 3);
    // A removed server is not there any more.
    let r = s.apply(&[del(http(), &["198.18.2.1"], false)]).unwrap();
    let e = r
        .apply(&[health(http(), &["198.18.2.1"], true, false)])
        .unwrap_err();
    assert!(matches!(e.kind, LbErrorKind::NoSuchServer { .. }), "{e}");
}

#[test]
fn a_server_deleted_and_added_again_starts_up() {
    let s = web();
    let s2 = slot_of(&s, &http(), "198.18.2.2");
    let d = s
        .apply(&[health(http(), &["198.18.2.2"], true, false)])
        .unwrap();
    // Removed without flush then revived: same slot, up.
    let r = d
        .apply(&[
            del(http(), &["198.18.2.2"], false),
            add(http(), &[("198.18.2.2", Some(3))]),
        ])
        .unwrap();
    assert_eq!(slot_of(&r, &http(), "198.18.2.2"), s2);
    assert_eq!(
        (r.slot(s2).state, r.slot(s2).health_down),
        (AsState::Active, false)
    );
    // Deleted with flush then added: a fresh slot, up.
    let f = d
        .apply(&[
            del(http(), &["198.18.2.2"], true),
            add(http(), &[("198.18.2.2", Some(3))]),
        ])
        .unwrap();
    let n = slot_of(&f, &http(), "198.18.2.2");
    assert_eq!(
        (f.slot(n).state, f.slot(n).health_down),
        (AsState::Active, false)
    );
    // Health is not configuration: the running config still lists the configured weight.
    let lines = crate::cli::format_state(&d);
    assert!(lines.contains("198.18.2.2 weight 3"), "{lines}");
}

fn lines(s: &LbState, text: &str) -> Result<LbState, LbError> {
    s.apply(&crate::cli::parse_lines(text).unwrap())
}

/// The case: 4,096 VIPs of new_len 4194304 (16 MiB each, ~64 GiB) are refused with a
/// message naming the need, the cap and how to raise it; nothing is applied.
#[test]
fn vips_past_the_memory_limit_are_refused_naming_the_cap() {
    let mut text = String::new();
    for i in 0..4096u32 {
        let a = Ipv4Addr::from(0xc612_0000u32 + i);
        text.push_str(&format!(
            "lb vip {a}/32 encap l3dsr dscp 1 new_len 4194304\n"
        ));
    }
    let base = LbState::new();
    let err = lines(&base, &text).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err.kind, LbErrorKind::MemoryLimit { .. }), "{msg}");
    assert!(msg.contains("memory limit of 2 GiB"), "{msg}");
    assert!(msg.contains("64.0 GiB") || msg.contains("64 GiB"), "{msg}");
    assert!(
        msg.contains("raise `memory-limit` in the config's [lb]"),
        "{msg}"
    );
    assert_eq!(err.index, 4095, "blames the last VIP line");
    // One at a time (as the API or ctl would add them): refused at the VIP that passes it.
    let mut s = base.clone();
    let mut accepted = 0;
    for line in text.lines() {
        match lines(&s, line) {
            Ok(n) => {
                s = n;
                accepted += 1;
            }
            Err(e) => {
                assert!(matches!(e.kind, LbErrorKind::MemoryLimit { .. }), "{e}");
                break;
            }
        }
    }
    let per_vip = maglev_bytes(4194304);
    let flows = s.memory_use().flow_bytes_per_worker;
    assert_eq!(accepted as u64, (DEFAULT_MEMORY_LIMIT - flows) / per_vip);
    assert!(s.memory_use().total() <= DEFAULT_MEMORY_LIMIT);
}

/// A change just under the cap is accepted, one entry more is not; freeing memory is always
/// accepted, even over a cap lowered below the use; workers each count their flow tables.
#[test]
fn the_memory_limit_is_exact_and_never_blocks_freeing() {
    let base = LbState::new().with_memory_budget(MemoryBudget {
        limit: 0,
        workers: 2,
    });
    let flows = base.memory_use().flow_bytes_per_worker;
    assert_eq!(
        flows,
        crate::flowtable::worker_tables_bytes(DEFAULT_BUCKETS as usize)
    );
    let vip_line = "lb vip 198.18.1.1/32 encap l3dsr dscp 1 new_len 1000\n";
    let need = 2 * flows + maglev_bytes(1000);
    assert_eq!(maglev_bytes(1000), 1009 * 4);
    let at = |limit| LbState::new().with_memory_budget(MemoryBudget { limit, workers: 2 });
    let ok = lines(&at(need), vip_line).unwrap();
    assert_eq!(ok.memory_use().total(), need);
    let e = lines(&at(need - 1), vip_line).unwrap_err();
    assert!(e.to_string().contains("2 workers"), "{e}");
    // Lowered below the use (a reload): deleting still works, growing does not.
    let low = ok.apply(&[LbCommand::SetMemoryBudget(MemoryBudget {
        limit: 1,
        workers: 2,
    })]);
    let low = low.unwrap();
    assert!(lines(&low, "lb vip 198.18.1.1/32 encap l3dsr dscp 1 del\n").is_ok());
    assert!(lines(&low, "lb vip 198.18.1.2/32 encap l3dsr dscp 1 new_len 7\n").is_err());
    // A bigger new_len on the same VIP is growth; a smaller one is not.
    assert!(lines(
        &low,
        "lb vip 198.18.1.1/32 encap l3dsr dscp 1 new_len 2000\n"
    )
    .is_err());
    assert!(lines(
        &low,
        "lb vip 198.18.1.1/32 encap l3dsr dscp 1 new_len 500\n"
    )
    .is_ok());
}

#[test]
fn weights_are_vpps_0_to_100_with_default_100() {
    let s = LbState::new()
        .apply(&[vip(http(), dsr()), add(http(), &[("198.18.2.1", None)])])
        .unwrap();
    assert_eq!(
        s.slot(slot_of(&s, &http(), "198.18.2.1")).weight,
        DEFAULT_WEIGHT
    );
    assert_eq!(DEFAULT_WEIGHT, 100);
    let e = s
        .apply(&[add(http(), &[("198.18.2.2", Some(101))])])
        .unwrap_err();
    assert!(e.to_string().contains("0..=100"), "{e}");
    assert!(s
        .apply(&[add(http(), &[("198.18.2.2", Some(100))])])
        .is_ok());
}

/// `type nodeport`: needs the node address (`lb conf ip4-src-address`), and its node port may
/// not clash with another VIP's key or node port.
#[test]
fn nodeport_vips_need_the_node_address_and_a_free_port() {
    let np = "lb vip 198.18.1.1/32 protocol udp port 3306 encap nat4 type nodeport \
              target_port 3307 node_port 30964\n";
    let e = lines(&LbState::new(), np).unwrap_err();
    assert!(e.to_string().contains("ip4-src-address"), "{e}");
    let s = lines(
        &LbState::new(),
        &format!("lb conf ip4-src-address 198.18.0.254\n{np}"),
    )
    .unwrap();
    let v = s.vips().next().unwrap();
    let k = nodeport_key(&v.spec, s.conf()).unwrap();
    assert_eq!(k.to_string(), "198.18.0.254/32 protocol udp port 30964");
    let e = lines(
        &s,
        "lb vip 198.18.1.2/32 protocol udp port 53 encap nat4 type nodeport target_port 53 \
         node_port 30964\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("taken"), "{e}");
    let e = lines(
        &s,
        "lb vip 198.18.0.254/32 protocol udp port 30964 encap nat4 target_port 1\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("clashes"), "{e}");
}

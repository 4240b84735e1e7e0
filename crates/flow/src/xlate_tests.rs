use super::*;
use crate::key::Field::*;
use crate::rule::{Bucket, FlowMod, Group, Match};
use crate::tables::FlowTables;
use crate::testutil::*;

fn tables(rules: &[crate::rule::Rule]) -> FlowTables {
    let mods: Vec<FlowMod> = rules.iter().cloned().map(FlowMod::Add).collect();
    FlowTables::new(ports()).apply(&mods).unwrap()
}

fn mask(fields: &[(Field, u128)]) -> FlowKey {
    let mut k = FlowKey::ZERO;
    for (f, v) in fields {
        k.set(*f, *v);
    }
    k
}

fn acts(a: &[DpAction]) -> DpActions {
    let mut d = DpActions::DROP;
    for x in a {
        assert!(d.push(*x));
    }
    d
}

/// The rule set of the Open vSwitch 3.1 trace below.
fn ovs_golden() -> FlowTables {
    tables(&[
        rule(
            0,
            100,
            m(&[
                ex(EthType, 0x800),
                ex(NwProto, 6),
                (NwDst, ip(198, 18, 2, 0), 0xffff_ff00),
                ex(TpDst, 80),
            ]),
            vec![Action::Output(PortRef::Number(2))],
        ),
        rule(
            0,
            90,
            m(&[ex(EthType, 0x800), (NwDst, ip(10, 0, 0, 0), 0xff00_0000)]),
            vec![Action::Output(PortRef::Number(3))],
        ),
        rule(
            0,
            50,
            m(&[ex(EthType, 0x800), (NwSrc, ip(198, 18, 1, 0), 0xffff_ff00)]),
            vec![
                Action::DecTtl,
                Action::SetField {
                    field: NwDst,
                    value: ip(198, 18, 9, 9),
                    mask: 0xffff_ffff,
                },
                Action::Output(PortRef::Number(3)),
            ],
        ),
        rule(
            0,
            10,
            m(&[ex(EthType, 0x806)]),
            vec![Action::Output(PortRef::Flood)],
        ),
    ])
}

// Each case: what `ovs-appctl ofproto/trace` of Open vSwitch 3.1 (netdev datapath, the same
// rules loaded with ovs-ofctl) printed as "Megaflow:" and "Datapath actions:".

#[test]
fn ovs_exact_port_hit() {
    // Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_dst=198.18.2.0/24,nw_frag=no,tp_dst=80
    // Datapath actions: 3 (OpenFlow port 2)
    let t = ovs_golden().translate(&ip4_key(
        1,
        6,
        ip(198, 18, 1, 2),
        ip(198, 18, 2, 7),
        1234,
        80,
    ));
    assert_eq!(t.actions, acts(&[DpAction::Output(12)]));
    assert_eq!(
        t.mask,
        mask(&[
            (InPort, 0xffff),
            (EthType, 0xffff),
            (NwProto, 0xff),
            (NwDst, 0xffff_ff00),
            (NwFrag, 3),
            (TpDst, 0xffff)
        ])
    );
    assert_eq!(t.error, None);
}

#[test]
fn ovs_port_trie_and_dec_ttl_set_field() {
    // Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=198.18.1.0/24,nw_dst=198.18.2.7,nw_ttl=64,
    //           nw_frag=no,tp_dst=0x100/0xff00
    // Datapath actions: set(ipv4(dst=198.18.9.9,ttl=63)),4
    let t = ovs_golden().translate(&ip4_key(
        1,
        6,
        ip(198, 18, 1, 2),
        ip(198, 18, 2, 7),
        1234,
        443,
    ));
    assert_eq!(
        t.actions,
        acts(&[
            DpAction::Set {
                field: NwDst,
                value: ip(198, 18, 9, 9),
                mask: 0xffff_ffff
            },
            DpAction::Set {
                field: NwTtl,
                value: 63,
                mask: 0xff
            },
            DpAction::Output(13),
        ])
    );
    assert_eq!(
        t.mask,
        mask(&[
            (InPort, 0xffff),
            (EthType, 0xffff),
            (NwProto, 0xff),
            (NwSrc, 0xffff_ff00),
            (NwDst, 0xffff_ffff),
            (NwTtl, 0xff),
            (NwFrag, 3),
            (TpDst, 0xff00)
        ])
    );
}

#[test]
fn ovs_address_tries_keep_megaflow_wide() {
    // Megaflow: recirc_id=0,eth,ip,in_port=1,nw_src=198.18.4.0/22,nw_dst=192.0.0.0/6,nw_frag=no
    // Datapath actions: drop
    let t = ovs_golden().translate(&ip4_key(
        1,
        6,
        ip(198, 18, 7, 2),
        ip(192, 0, 2, 1),
        1234,
        80,
    ));
    assert!(t.actions.is_drop());
    assert_eq!(
        t.mask,
        mask(&[
            (InPort, 0xffff),
            (EthType, 0xffff),
            (NwSrc, 0xffff_fc00),
            (NwDst, 0xfc00_0000),
            (NwFrag, 3)
        ])
    );
}

#[test]
fn ovs_arp_flood_and_other_ethertype() {
    // arp: Megaflow: recirc_id=0,eth,arp,in_port=1 / Datapath actions: 5,1,3,4 (all but in_port)
    // dl_type=0x88cc: Megaflow: recirc_id=0,eth,in_port=1,dl_type=0x88cc / drop
    let g = ovs_golden();
    let mut k = FlowKey::ZERO;
    k.set(InPort, 1);
    k.set(EthType, 0x806);
    k.set(NwSrc, ip(198, 18, 1, 1));
    let t = g.translate(&k);
    assert_eq!(t.actions, acts(&[DpAction::Flood]));
    assert_eq!(t.mask, mask(&[(InPort, 0xffff), (EthType, 0xffff)]));
    k.set(EthType, 0x88cc);
    let t = g.translate(&k);
    assert!(t.actions.is_drop());
    assert_eq!(t.mask, mask(&[(InPort, 0xffff), (EthType, 0xffff)]));
}

#[test]
fn output_to_input_port_needs_in_port() {
    let t = tables(&[rule0(
        Match::ANY,
        vec![
            Action::Output(PortRef::Number(1)),
            Action::Output(PortRef::Number(2)),
        ],
    )]);
    let k = ip4_key(1, 6, 1, 2, 3, 4);
    assert_eq!(t.translate(&k).actions, acts(&[DpAction::Output(12)]));
    let t = tables(&[rule0(
        Match::ANY,
        vec![
            Action::Output(PortRef::InPort),
            Action::Output(PortRef::Normal),
        ],
    )]);
    assert_eq!(
        t.translate(&k).actions,
        acts(&[DpAction::Output(11), DpAction::Normal])
    );
}

#[test]
fn goto_and_resubmit_see_set_fields_and_metadata_stays_out_of_the_mask() {
    let t = tables(&[
        rule(
            0,
            10,
            Match::ANY,
            vec![
                Action::SetField {
                    field: Reg0,
                    value: 7,
                    mask: 0xffff_ffff,
                },
                Action::GotoTable(1),
            ],
        ),
        rule(
            1,
            10,
            m(&[ex(Reg0, 7)]),
            vec![
                Action::SetField {
                    field: TpDst,
                    value: 8080,
                    mask: 0xffff,
                },
                Action::Resubmit {
                    port: Some(3),
                    table: Some(2),
                },
                Action::Output(PortRef::Number(2)),
            ],
        ),
        rule(
            2,
            10,
            m(&[ex(InPort, 3), ex(TpDst, 8080)]),
            vec![Action::Output(PortRef::Number(4))],
        ),
    ]);
    let k = ip4_key(1, 6, ip(198, 18, 1, 2), ip(198, 18, 2, 2), 1000, 80);
    let tr = t.translate(&k);
    assert_eq!(
        tr.actions,
        acts(&[
            DpAction::Set {
                field: TpDst,
                value: 8080,
                mask: 0xffff
            },
            DpAction::Output(14),
            DpAction::Output(12)
        ])
    );
    assert_eq!(tr.rules.as_slice().len(), 3);
    assert_eq!(tr.mask.get(Reg0), 0);
    assert_eq!(tr.mask.get(TpDst), 0xffff);
    assert_eq!(
        tr.mask.get(NwProto),
        0xff,
        "set_field tp_dst checks the protocol"
    );
}

#[test]
fn dec_ttl_at_one_stops_the_action_list() {
    let t = tables(&[rule0(
        Match::ANY,
        vec![
            Action::Output(PortRef::Number(3)),
            Action::DecTtl,
            Action::Output(PortRef::Number(2)),
        ],
    )]);
    let mut k = ip4_key(1, 17, 1, 2, 3, 4);
    k.set(NwTtl, 1);
    let tr = t.translate(&k);
    assert_eq!(tr.actions, acts(&[DpAction::Output(13)]));
    assert_eq!(tr.mask.get(NwTtl), 0xff);
}

#[test]
fn vlan_push_pop_and_modify() {
    let push = tables(&[rule0(
        Match::ANY,
        vec![
            Action::PushVlan(0x8100),
            Action::SetField {
                field: VlanVid,
                value: 100,
                mask: 0xfff,
            },
            Action::Output(PortRef::Number(2)),
        ],
    )]);
    let k = ip4_key(1, 6, 1, 2, 3, 4);
    let tr = push.translate(&k);
    assert_eq!(
        tr.actions,
        acts(&[
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 100
            },
            DpAction::Output(12)
        ])
    );
    assert_eq!(tr.mask.get(VlanPresent), 1);
    let mut tagged = k;
    tagged.set(VlanTci, 0x1000 | 5 | (3 << 13));
    let pop = tables(&[rule0(
        Match::ANY,
        vec![Action::PopVlan, Action::Output(PortRef::Number(2))],
    )]);
    assert_eq!(
        pop.translate(&tagged).actions,
        acts(&[DpAction::PopVlan, DpAction::Output(12)])
    );
    assert!(pop.translate(&k).actions == acts(&[DpAction::Output(12)]));
    let modv = tables(&[rule0(
        Match::ANY,
        vec![
            Action::SetField {
                field: VlanVid,
                value: 9,
                mask: 0xfff,
            },
            Action::Output(PortRef::Number(2)),
        ],
    )]);
    let tr = modv.translate(&tagged);
    // The packet's own tag keeps its TPID (802.1Q or 802.1ad: the key does not say).
    assert_eq!(
        tr.actions,
        acts(&[
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: TPID_AS_RECEIVED,
                tci: 9 | (3 << 13)
            },
            DpAction::Output(12)
        ])
    );
    assert_eq!(tr.mask.get(VlanTci), 0xffff);
}

/// A tag made after `pop_vlan` is 802.1Q (`mod_vlan_vid`) or what `push_vlan` says, even with
/// the TCI the packet's own tag had: only the packet's own tag keeps its TPID.
#[test]
fn a_tag_made_after_pop_vlan_has_its_own_tpid() {
    let mut tagged = ip4_key(1, 6, 1, 2, 3, 4);
    tagged.set(VlanTci, 0x1000 | 5);
    let vid = |v| Action::SetField {
        field: VlanVid,
        value: v,
        mask: 0xfff,
    };
    let out = Action::Output(PortRef::Number(2));
    let cases = [
        (vec![Action::PopVlan, vid(7), out.clone()], 0x8100, 7),
        (
            vec![
                Action::PopVlan,
                Action::PushVlan(0x8100),
                vid(5),
                out.clone(),
            ],
            0x8100,
            5,
        ),
        (vec![vid(7), out.clone()], TPID_AS_RECEIVED, 7),
    ];
    for (actions, tpid, tci) in cases {
        let tr = tables(&[rule0(Match::ANY, actions.clone())]).translate(&tagged);
        assert_eq!(
            tr.actions,
            acts(&[
                DpAction::PopVlan,
                DpAction::PushVlan { tpid, tci },
                DpAction::Output(12)
            ]),
            "{actions:?}"
        );
    }
}

#[test]
fn tunnel_output_carries_tun_id() {
    let t = tables(&[rule0(
        Match::ANY,
        vec![
            Action::SetField {
                field: TunId,
                value: 5000,
                mask: u64::MAX as u128,
            },
            Action::Output(PortRef::Number(9)),
        ],
    )]);
    let tr = t.translate(&ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(
        tr.actions,
        acts(&[DpAction::TunnelOutput {
            port: 99,
            tun_id: 5000
        }])
    );
    assert_eq!(
        tr.mask.w[1], 0,
        "no tunnel bits for a packet that came in untunnelled"
    );
}

#[test]
fn groups_all_restore_the_packet_and_select_is_deterministic() {
    let all = Group {
        id: 1,
        kind: crate::rule::GroupKind::All,
        fields: vec![],
        method: Default::default(),
        method_param: 0,
        field_masks: vec![],
        buckets: vec![
            Bucket {
                watch_port: None,
                watch_group: None,
                id: 0,
                weight: 0,
                actions: vec![
                    Action::SetField {
                        field: NwDst,
                        value: 9,
                        mask: 0xffff_ffff,
                    },
                    Action::Output(PortRef::Number(2)),
                ],
            },
            Bucket {
                watch_port: None,
                watch_group: None,
                id: 1,
                weight: 0,
                actions: vec![Action::Output(PortRef::Number(3))],
            },
        ],
    };
    let sel = Group {
        id: 2,
        kind: crate::rule::GroupKind::Select,
        fields: vec![],
        method: Default::default(),
        method_param: 0,
        field_masks: vec![],
        buckets: (0..4)
            .map(|i| Bucket {
                watch_port: None,
                watch_group: None,
                id: i,
                weight: 100,
                actions: vec![Action::Output(PortRef::Number(1 + i as u16))],
            })
            .collect(),
    };
    let t = FlowTables::new(ports())
        .apply(&[
            FlowMod::AddGroup(all),
            FlowMod::AddGroup(sel),
            FlowMod::Add(rule(0, 10, m(&[ex(NwProto, 6)]), vec![Action::Group(1)])),
            FlowMod::Add(rule(0, 10, m(&[ex(NwProto, 17)]), vec![Action::Group(2)])),
        ])
        .unwrap();
    let tr = t.translate(&ip4_key(4, 6, 1, 2, 3, 4));
    assert_eq!(
        tr.actions,
        acts(&[
            DpAction::Set {
                field: NwDst,
                value: 9,
                mask: 0xffff_ffff
            },
            DpAction::Output(12),
            DpAction::Set {
                field: NwDst,
                value: 2,
                mask: 0xffff_ffff
            },
            DpAction::Output(13)
        ])
    );
    let mut seen = [0u32; 5];
    for sport in 0..400u16 {
        let k = ip4_key(9, 17, ip(198, 18, 1, 1), ip(198, 18, 2, 2), sport, 53);
        let a = t.translate(&k);
        assert_eq!(a.actions, t.translate(&k).actions);
        assert_eq!(a.mask.get(TpSrc), 0xffff);
        assert_eq!(a.mask.get(NwSrc), 0xffff_ffff);
        match a.actions.as_slice() {
            [DpAction::Output(p)] => seen[(*p - 11) as usize] += 1,
            other => panic!("{other:?}"),
        }
    }
    assert!(seen[..4].iter().all(|n| *n > 50), "{seen:?}");
}

#[test]
fn resubmit_loops_are_cut_and_dropped() {
    let t = tables(&[rule0(
        Match::ANY,
        vec![
            Action::Output(PortRef::Number(2)),
            Action::Resubmit {
                port: None,
                table: None,
            },
        ],
    )]);
    // 64 outputs fit a megaflow now; the depth cuts the loop (as Open vSwitch's).
    let tr = t.translate(&ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(tr.error, Some(XlateError::TooDeep));
    assert!(tr.actions.is_drop());
    let t = tables(&[rule0(
        Match::ANY,
        vec![Action::Resubmit {
            port: None,
            table: None,
        }],
    )]);
    assert_eq!(
        t.translate(&ip4_key(1, 6, 1, 2, 3, 4)).error,
        Some(XlateError::TooDeep)
    );
}

#[test]
fn icmp_type_code_mask_is_eight_bits() {
    let t = tables(&[rule0(
        m(&[ex(EthType, 0x800), ex(NwProto, 1), ex(TpSrc, 8)]),
        vec![Action::Output(PortRef::Number(2))],
    )]);
    let tr = t.translate(&ip4_key(1, 1, 1, 2, 0, 0));
    assert!(tr.actions.is_drop());
    // The ports trie needs 13 bits of tp_src to rule out 8; the ICMP cut keeps the low 8.
    assert_eq!(tr.mask.get(TpSrc), 0xf8);
}

#[test]
#[ignore = "benchmark: cargo test --release -p vecplane-flow -- --ignored --nocapture bench_translate"]
fn bench_translate() {
    use std::time::Instant;
    for n in [20usize, 1000] {
        let mut rules = Vec::new();
        for i in 0..n {
            let i = i as u128;
            let r = match i % 4 {
                0 => rule(
                    0,
                    100 + (i % 50) as u16,
                    m(&[
                        ex(EthType, 0x800),
                        ex(NwProto, 6),
                        (NwDst, ip(198, 18, (i / 4 % 256) as u8, 0), 0xffff_ff00),
                        ex(TpDst, 80 + i % 7),
                    ]),
                    vec![Action::Output(PortRef::Number(2))],
                ),
                1 => rule(
                    0,
                    90,
                    m(&[
                        ex(EthType, 0x800),
                        (NwSrc, ip(10, (i % 256) as u8, 0, 0), 0xffff_0000),
                    ]),
                    vec![Action::DecTtl, Action::Output(PortRef::Number(3))],
                ),
                2 => rule(
                    0,
                    80,
                    m(&[ex(EthType, 0x800), ex(NwProto, 17), ex(TpSrc, 1000 + i)]),
                    vec![Action::Output(PortRef::Number(4))],
                ),
                _ => rule(
                    0,
                    70 - (i % 3) as u16,
                    m(&[ex(InPort, 1 + i % 4), (EthDst, i, 0xffff_ffff_ffff)]),
                    vec![Action::Output(PortRef::Normal)],
                ),
            };
            rules.push(r);
        }
        let t = tables(&rules);
        let keys: Vec<FlowKey> = (0..1024u32)
            .map(|j| {
                ip4_key(
                    1,
                    if j % 2 == 0 { 6 } else { 17 },
                    ip(198, 18, 1, (j % 256) as u8),
                    ip(198, 18, (j % 64) as u8, 9),
                    1024 + j as u16,
                    80 + (j % 9) as u16,
                )
            })
            .collect();
        let rounds = 200;
        let start = Instant::now();
        let mut sink = 0usize;
        for _ in 0..rounds {
            for k in &keys {
                sink += std::hint::black_box(t.translate(std::hint::black_box(k)))
                    .actions
                    .as_slice()
                    .len();
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (rounds * keys.len()) as f64;
        println!(
            "{n} rules, {} subtables: {ns:.0} ns per translate (sink {sink})",
            t.subtables(0)
        );
    }
}

#[test]
fn ovs_ipv6_without_prefix_tracking_by_default() {
    // Open vSwitch 3.1 tracks only nw_dst and nw_src by default:
    // ipv6_dst=2001:db8:1::/48 rule, packet to 2001:db8:2::1 ->
    // Megaflow: recirc_id=0,eth,ipv6,in_port=1,ipv6_dst=2001:db8:2::/48,nw_frag=no
    let net: u128 = 0x2001_0db8_0001_0000 << 64;
    let t = tables(&[rule(
        0,
        100,
        m(&[ex(EthType, 0x86dd), (Ipv6Dst, net, u128::MAX << 80)]),
        vec![Action::Output(PortRef::Number(2))],
    )]);
    let mut k = FlowKey::ZERO;
    k.set(InPort, 1);
    k.set(EthType, 0x86dd);
    k.set(Ipv6Dst, 0x2001_0db8_0002_0000_0000_0000_0000_0001);
    let ovs = t.with_prefix_tracking(crate::classifier::PrefixTracking::IPV4);
    assert_eq!(
        ovs.translate(&k).mask,
        mask(&[
            (InPort, 0xffff),
            (EthType, 0xffff),
            (Ipv6Dst, u128::MAX << 80),
            (NwFrag, 3)
        ])
    );
    // Ours (all four fields tracked): 47 bits tell 2001:db8:2:: from 2001:db8:1::.
    assert_eq!(t.translate(&k).mask.get(Ipv6Dst), u128::MAX << 81);
}

#[test]
fn l3_rewrites_depend_on_nw_proto_as_in_open_vswitch() {
    // Checked against Open vSwitch 3.1: `ip,actions=dec_ttl,output:2` gives a tcp packet
    // "set(ipv4(ttl=63)),2" with megaflow "tcp,...,nw_ttl=64", and a packet with nw_proto 0
    // just "2" (no L3 header to rewrite) with megaflow "ip,...,nw_proto=0".
    let t = tables(&[rule0(
        m(&[ex(EthType, 0x800)]),
        vec![Action::DecTtl, Action::Output(PortRef::Number(2))],
    )]);
    let k = ip4_key(1, 6, ip(198, 18, 1, 1), ip(198, 18, 2, 2), 1, 2);
    let tr = t.translate(&k);
    assert_eq!(
        tr.actions.as_slice()[0],
        DpAction::Set {
            field: NwTtl,
            value: 63,
            mask: 0xff
        }
    );
    assert_eq!(tr.mask.get(NwProto), 0xff);
    let mut k0 = k;
    k0.set(NwProto, 0);
    k0.set(TpSrc, 0);
    k0.set(TpDst, 0);
    let tr = t.translate(&k0);
    assert!(tr
        .actions
        .as_slice()
        .iter()
        .all(|a| !matches!(a, DpAction::Set { .. })));
    assert_eq!(tr.mask.get(NwProto), 0xff);
    // An ARP opcode is written like the addresses.
    let t = tables(&[rule0(
        m(&[ex(EthType, 0x806)]),
        vec![
            Action::SetField {
                field: NwProto,
                value: 2,
                mask: 0xff,
            },
            Action::Output(PortRef::Number(2)),
        ],
    )]);
    let mut arp = k0;
    arp.set(EthType, 0x806);
    arp.set(NwProto, 1);
    let tr = t.translate(&arp);
    assert_eq!(
        tr.actions.as_slice()[0],
        DpAction::Set {
            field: NwProto,
            value: 2,
            mask: 0xff
        }
    );
}

fn out(p: u16) -> Action {
    Action::Output(PortRef::Number(p))
}

fn set(field: Field, value: u128) -> Action {
    Action::SetField {
        field,
        value,
        mask: field.all_ones(),
    }
}

fn with_group(rules: &[crate::rule::Rule], buckets: Vec<Vec<Action>>) -> FlowTables {
    let g = Group {
        id: 1,
        kind: crate::rule::GroupKind::All,
        fields: vec![],
        method: Default::default(),
        method_param: 0,
        field_masks: vec![],
        buckets: buckets
            .into_iter()
            .enumerate()
            .map(|(i, actions)| Bucket {
                watch_port: None,
                watch_group: None,
                id: i as u32,
                weight: 0,
                actions,
            })
            .collect(),
    };
    let mut mods = vec![FlowMod::AddGroup(g)];
    mods.extend(rules.iter().cloned().map(FlowMod::Add));
    FlowTables::new(ports()).apply(&mods).unwrap()
}

fn tagged_key(vid: u16) -> FlowKey {
    let mut k = ip4_key(1, 6, ip(198, 18, 0, 1), ip(198, 18, 0, 2), 1000, 80);
    k.set(VlanTci, (crate::key::VLAN_CFI | vid) as u128);
    k.set(VlanPresent, 1);
    k
}

#[test]
fn a_translation_past_the_inline_actions_is_kept_whole() {
    // Twelve rewrites and twelve outputs: 24 datapath actions, as Open vSwitch forwards them.
    let mut actions = Vec::new();
    for i in 0..12u128 {
        actions.push(set(EthDst, 0x0200_0000_0100 + i));
        actions.push(out(2 + (i % 3) as u16));
    }
    let t = tables(&[rule0(Match::ANY, actions)]);
    let tr = t.translate(&ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(tr.error, None);
    assert_eq!(tr.actions.len(), 24);
    assert!(tr.actions.is_long());
    let a = tr.actions.as_slice();
    assert_eq!(
        a[22],
        DpAction::Set {
            field: EthDst,
            value: 0x0200_0000_010b,
            mask: 0xffff_ffff_ffff
        }
    );
    assert_eq!(a[23], DpAction::Output(12 + 2));
    // A copy shares the list and compares equal.
    let mut c = DpActions::DROP;
    c.assign_from(&tr.actions);
    assert_eq!(c, tr.actions);
}

#[test]
fn a_bucket_is_an_action_set() {
    // Output first, then push and set: as an action set the push and set come first.
    let t = with_group(
        &[rule0(Match::ANY, vec![Action::Group(1), out(3)])],
        vec![vec![
            out(2),
            set(EthSrc, 0x0200_0000_0009),
            Action::PushVlan(0x8100),
            set(VlanVid, 0x1005),
            out(4),
        ]],
    );
    let tr = t.translate(&ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::Set {
                field: EthSrc,
                value: 0x0200_0000_0009,
                mask: 0xffff_ffff_ffff
            },
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 5
            },
            // Only the last output of the set.
            DpAction::Output(14),
            // After the group the packet is the one before it.
            DpAction::Set {
                field: EthSrc,
                value: 0x0200_0000_0001,
                mask: 0xffff_ffff_ffff
            },
            DpAction::PopVlan,
            DpAction::Output(13),
        ]
    );
}

#[test]
fn a_tag_pushed_over_a_tag_in_a_bucket_is_gone_after_the_group() {
    let t = with_group(
        &[rule0(Match::ANY, vec![Action::Group(1), out(3)])],
        vec![vec![Action::PushVlan(0x88a8), set(VlanVid, 0x1005), out(2)]],
    );
    let tr = t.translate(&tagged_key(7));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0
            },
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 5
            },
            DpAction::Output(12),
            DpAction::PopVlan,
            DpAction::Output(13),
        ]
    );
}

#[test]
fn push_vlan_88a8_over_a_tag_keeps_its_tpid_through_set_field() {
    let t = tables(&[rule0(
        Match::ANY,
        vec![Action::PushVlan(0x88a8), set(VlanVid, 0x1005), out(2)],
    )]);
    let tr = t.translate(&tagged_key(7));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0
            },
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 5
            },
            DpAction::Output(12),
        ]
    );
}

fn fragment(later: bool) -> FlowKey {
    let mut k = ip4_key(1, 6, ip(198, 18, 0, 1), ip(198, 18, 0, 2), 1000, 80);
    let frag = crate::key::FRAG_ANY | if later { FRAG_LATER } else { 0 };
    k.set(NwFrag, frag as u128);
    if later {
        k.set(TpSrc, 0);
        k.set(TpDst, 0);
    }
    k
}

#[test]
fn a_port_rewrite_of_a_later_fragment_is_a_no_op_and_the_actions_go_on() {
    let t = tables(&[rule0(
        m(&[ex(EthType, 0x800), ex(NwProto, 6)]),
        vec![
            set(TpDst, 22),
            out(2),
            set(EthDst, 0x0200_0000_0077),
            out(3),
        ],
    )]);
    for t in [t.clone(), t.with_frag_handling(FragHandling::NxMatch)] {
        let tr = t.translate(&fragment(true));
        assert_eq!(tr.error, None);
        assert_eq!(
            tr.actions.as_slice(),
            &[
                DpAction::Output(12),
                DpAction::Set {
                    field: EthDst,
                    value: 0x0200_0000_0077,
                    mask: 0xffff_ffff_ffff
                },
                DpAction::Output(13),
            ]
        );
    }
}

#[test]
fn fragments_read_their_ports_as_zero_unless_nx_match() {
    let t = tables(&[
        rule(
            0,
            10,
            m(&[ex(EthType, 0x800), ex(NwProto, 6), ex(TpDst, 80)]),
            vec![set(TpSrc, 7), out(2)],
        ),
        rule(0, 1, Match::ANY, vec![set(TpSrc, 7), out(3)]),
    ]);
    assert_eq!(t.frag_handling(), FragHandling::Normal);
    // Normal (Open vSwitch's default): a first fragment's tp_dst reads 0, a port set by an
    // action is written whole, and the megaflow does not depend on the ports.
    let tr = t.translate(&fragment(false));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::Set {
                field: TpSrc,
                value: 7,
                mask: 0xffff
            },
            DpAction::Output(13)
        ]
    );
    assert_eq!(tr.mask.get(TpDst), 0);
    assert_eq!(tr.mask.get(TpSrc), 0);
    // nx-match: the first fragment matches its ports and is rewritten.
    let nx = t.with_frag_handling(FragHandling::NxMatch);
    let tr = nx.translate(&fragment(false));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::Set {
                field: TpSrc,
                value: 7,
                mask: 0xffff
            },
            DpAction::Output(12)
        ]
    );
    // drop: every fragment is dropped, whole packets are not.
    let d = t.with_frag_handling(FragHandling::Drop);
    assert!(d.translate(&fragment(false)).actions.is_drop());
    assert!(d.translate(&fragment(true)).actions.is_drop());
    let whole = ip4_key(1, 6, ip(198, 18, 0, 1), ip(198, 18, 0, 2), 1000, 80);
    assert_eq!(
        d.translate(&whole).actions.as_slice()[1],
        DpAction::Output(12)
    );
}

#[test]
fn a_later_bucket_pushing_another_tpid_pushes_again() {
    let t = with_group(
        &[rule0(Match::ANY, vec![Action::Group(1)])],
        vec![
            vec![Action::PushVlan(0x8100), set(VlanVid, 0x100a), out(2)],
            vec![Action::PushVlan(0x88a8), set(VlanVid, 0x100a), out(3)],
        ],
    );
    let tr = t.translate(&ip4_key(1, 6, 1, 2, 3, 4));
    assert_eq!(
        tr.actions.as_slice(),
        &[
            DpAction::PushVlan {
                tpid: 0x8100,
                tci: 10
            },
            DpAction::Output(12),
            DpAction::PopVlan,
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 10
            },
            DpAction::Output(13),
        ]
    );
}

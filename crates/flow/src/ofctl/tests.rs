//! Unit and property tests of `ofctl`: the API beyond what the golden text covers (filters,
//! flow mods, flows files, errors), never panicking on arbitrary text, and
//! format(parse(format(rule))) == format(rule) for random valid rules.

use proptest::prelude::*;

use super::*;
use crate::key::Field;
use crate::rule::{Action, PortRef, DEFAULT_PRIORITY};

#[test]
fn the_issue_example_round_trips() {
    let r = parse_flow("table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:2")
        .expect("parses");
    assert_eq!(r.table, 0);
    assert_eq!(r.priority, 100);
    assert_eq!(r.m.key.get(Field::NwDst), 0xc612_0200);
    assert_eq!(r.m.mask.get(Field::NwDst), 0xffff_ff00);
    assert_eq!(r.m.key.get(Field::TpDst), 80);
    assert_eq!(r.actions, vec![Action::Output(PortRef::Number(2))]);
    assert_eq!(
        format_rule(&r, None),
        "priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80 actions=output:2"
    );
    assert_eq!(format_match(&r.m), "tcp,nw_dst=198.18.2.0/24,tp_dst=80");
    assert_eq!(format_actions(&r.actions), "output:2");
    let stats = RuleStats {
        packets: 7,
        bytes: 448,
        duration_secs: 12.5,
        idle_age_secs: Some(3),
    };
    assert_eq!(
        format_rule(&r, Some(&stats)),
        "cookie=0x0, duration=12.500s, table=0, n_packets=7, n_bytes=448, idle_age=3, \
         priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80 actions=output:2"
    );
}

#[test]
fn filters_and_flow_mods() {
    let f = parse_filter("table=1,cookie=0x10/0xf0,out_port=2,tcp,tp_dst=80", false).expect("ok");
    assert_eq!(f.table, Some(1));
    assert_eq!(f.cookie, Some((0x10, 0xf0)));
    assert_eq!(f.out_port, Some(2));
    assert_eq!(f.strict, None);
    assert_eq!(format_match(&f.m), "tcp,tp_dst=80");

    let f = parse_filter("priority=7,ip", true).expect("ok");
    assert_eq!(f.strict, Some(7));
    assert_eq!(f.table, None);
    let f = parse_filter("table=255,ip", true).expect("ok");
    assert_eq!((f.table, f.strict), (None, Some(DEFAULT_PRIORITY)));
    assert_eq!(parse_filter("", false).expect("all").m, Match::ANY);
    assert_eq!(
        parse_filter("cookie=5", false).expect("ok").cookie,
        Some((5, u64::MAX))
    );

    let e = parse_filter("priority=7,ip", false).expect_err("priority without --strict");
    assert_eq!(e.token(), "priority");
    let e = parse_filter("ip,actions=drop", false).expect_err("actions in a filter");
    assert!(e.to_string().contains("takes no actions"), "{e}");

    match parse_flow_mod(FlowModKind::Modify, "in_port=1,actions=output:3").expect("ok") {
        FlowMod::Modify {
            filter, actions, ..
        } => {
            assert_eq!(filter.strict, None);
            assert_eq!(actions, vec![Action::Output(PortRef::Number(3))]);
        }
        m => panic!("{m:?}"),
    }
    match parse_flow_mod(
        FlowModKind::ModifyStrict,
        "priority=5,in_port=1,actions=drop",
    )
    .expect("ok")
    {
        FlowMod::Modify {
            filter, actions, ..
        } => {
            assert_eq!(filter.strict, Some(5));
            assert!(actions.is_empty());
        }
        m => panic!("{m:?}"),
    }
    assert!(parse_flow_mod(FlowModKind::Modify, "in_port=1").is_err());
    match parse_flow_mod(FlowModKind::DeleteStrict, "priority=5,in_port=1").expect("ok") {
        FlowMod::Delete(f) => assert_eq!(f.strict, Some(5)),
        m => panic!("{m:?}"),
    }
    assert!(matches!(
        parse_flow_mod(FlowModKind::Delete, "in_port=1").expect("ok"),
        FlowMod::Delete(_)
    ));
    assert!(matches!(
        parse_flow_mod(FlowModKind::Add, "in_port=1,actions=drop").expect("ok"),
        FlowMod::Add(_)
    ));
}

#[test]
fn flows_files_name_the_line() {
    let text = "# a comment\n\nin_port=1,actions=output:2\n  \n table=1, ip actions=drop\n";
    let rules = parse_flows_file(text).expect("ok");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[1].table, 1);
    // A whole `dump-flows` reply pastes as it is.
    let dump = include_str!("../../tests/golden/ofctl/dump-of13.txt");
    assert!(parse_flows_file(dump).expect("a dump parses").len() > 100);
    let dump = include_str!("../../tests/golden/ofctl/dump-of10.txt");
    assert!(parse_flows_file(dump).expect("a dump parses").len() > 100);
    let e = parse_flows_file("in_port=1,actions=output:2\n# x\ntcp,tp_dst=99999,actions=drop\n")
        .expect_err("bad line 3");
    assert_eq!(e.line, 3);
    assert_eq!(e.source.token(), "tp_dst=99999");
    assert!(e.to_string().starts_with("line 3: "), "{e}");
}

#[test]
fn errors_say_what_was_wrong_and_what_is_accepted() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "tp_dst=80,actions=drop",
            "tp_dst=80",
            "needs TCP, UDP, SCTP or ICMP",
        ),
        (
            "ip,nw_src=1.2.3.4/33,actions=drop",
            "nw_src=1.2.3.4/33",
            "0..=32",
        ),
        (
            "ip,nw_dst=1.2.3.4,nw_dst=1.2.3.5,actions=drop",
            "nw_dst=1.2.3.5",
            "give each field once",
        ),
        (
            "table=3,actions=goto_table:2",
            "goto_table:2",
            "later table",
        ),
        (
            "table=3,actions=goto_table:3",
            "goto_table:3",
            "later table",
        ),
        ("actions=frobnicate", "frobnicate", "accepted: output:PORT"),
        ("frob=1,actions=drop", "frob=1", "accepted: table, priority"),
        (
            "reg0=1/0x1ffffffff,actions=drop",
            "reg0=1/0x1ffffffff",
            "wider than the field",
        ),
        ("icmp_type=3,actions=drop", "icmp_type=3", "ICMP"),
        // On an ICMP rule tp_src/tp_dst are the 8-bit type and code (found by the fuzzer: the
        // rule printed as an icmp_type that did not parse again).
        (
            "icmp,tp_src=546,tp_dst=547,actions=drop",
            "tp_src=546",
            "wider than the field's 8 bits",
        ),
        (
            "tp_dst=0x100/0x100,icmp6,actions=drop",
            "tp_dst=0x100/0x100",
            "wider than the field's 8 bits",
        ),
        ("arp_op=1,actions=drop", "arp_op=1", "ARP"),
        ("in_port=1", "in_port=1", "actions"),
    ];
    for (input, token, says) in cases {
        let e = parse_flow(input).expect_err(input);
        assert_eq!(e.token(), *token, "{input}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(says), "{input}: {msg}");
    }
    assert!(matches!(
        parse_flow("table=3,actions=goto_table:1"),
        Err(OfctlError::BadGoto { table: 3, .. })
    ));
}

#[test]
fn vlan_actions_follow_openflow13() {
    // mod_vlan_vid pushes a tag unless the match promises one, as OVS does over OpenFlow 1.3.
    let r = parse_flow("actions=mod_vlan_vid:5,output:2").expect("ok");
    assert_eq!(
        format_actions(&r.actions),
        "push_vlan:0x8100,set_field:4101->vlan_vid,output:2"
    );
    let r = parse_flow("dl_vlan=7,actions=mod_vlan_vid:5,output:2").expect("ok");
    assert_eq!(
        format_actions(&r.actions),
        "set_field:4101->vlan_vid,output:2"
    );
    assert!(parse_flow("actions=set_field:4101->vlan_vid").is_err());
    assert!(parse_flow("actions=push_vlan:0x8100,set_field:4101->vlan_vid").is_ok());
}

#[test]
fn set_field_and_load_are_one_action() {
    let a = parse_actions("load:0x5->NXM_NX_REG1[8..15]").expect("ok");
    assert_eq!(
        a,
        vec![Action::SetField {
            field: Field::Reg1,
            value: 0x500,
            mask: 0xff00
        }]
    );
    assert_eq!(
        parse_actions("set_field:0x500/0xff00->reg1").expect("ok"),
        a
    );
    assert_eq!(format_actions(&a), "load:0x5->NXM_NX_REG1[8..15]");
    let a = parse_actions("set_field:5000->tun_id,output:3").expect("ok");
    assert_eq!(format_actions(&a), "set_field:0x1388->tun_id,output:3");
    assert_eq!(format_actions(&[]), "drop");
    assert_eq!(parse_actions("").expect("empty"), vec![]);
}

#[test]
fn groups_default_ids_and_weights() {
    let g = parse_group(
        "group_id=1,type=select,selection_method=hash,fields(ip_src,ip_dst),\
         bucket=weight:100,actions=output:1,bucket=output:2",
    )
    .expect("ok");
    assert_eq!(g.fields, vec![Field::NwSrc, Field::NwDst]);
    assert_eq!(g.buckets.len(), 2);
    assert_eq!((g.buckets[0].id, g.buckets[0].weight), (0, 100));
    assert_eq!((g.buckets[1].id, g.buckets[1].weight), (1, 1));
    assert_eq!(
        format_group(&g),
        "group_id=1,type=select,selection_method=hash,fields(ip_src,ip_dst),\
         bucket=bucket_id:0,weight:100,actions=output:1,bucket=bucket_id:1,actions=output:2"
    );
}

#[test]
fn megaflow_has_the_datapath_prefix() {
    let r = parse_flow("tcp,in_port=1,nw_dst=198.18.2.0/24,nw_frag=no,tp_dst=80,actions=drop")
        .expect("ok");
    assert_eq!(
        format_megaflow(&r.m),
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=198.18.2.0/24,nw_frag=no,tp_dst=80"
    );
    assert_eq!(format_megaflow(&Match::ANY), "recirc_id=0,eth");
}

/// Pieces of flow text, valid and not, for the no-panic property.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ip".to_string()),
        Just("tcp".to_string()),
        Just("arp".to_string()),
        Just("ipv6".to_string()),
        Just("actions=".to_string()),
        Just("bucket=".to_string()),
        Just("->".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("..".to_string()),
        Just("/".to_string()),
        Just(",".to_string()),
        Just("=".to_string()),
        Just(":".to_string()),
        Just("+".to_string()),
        Just("-".to_string()),
        Just("|".to_string()),
        "[a-z_]{1,12}",
        "[0-9a-fx:.]{1,20}",
        "(in_port|dl_vlan|vlan_tci|nw_dst|ipv6_src|tp_dst|tcp_flags|reg3|metadata|tun_id|ip_frag|\
          load|set_field|resubmit|goto_table|group|output|mod_vlan_vid|push_vlan|selection_method|\
          fields|weight|bucket_id|type|group_id|table|priority|cookie)",
        "\\PC{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn never_panics_on_any_text(parts in proptest::collection::vec(piece(), 0..24)) {
        let s: String = parts.concat();
        let _ = parse_flow(&s);
        let _ = parse_filter(&s, false);
        let _ = parse_filter(&s, true);
        let _ = parse_actions(&s);
        let _ = parse_group(&s);
        let _ = parse_flows_file(&s);
        let _ = parse_flow_stats(&s);
        for k in [FlowModKind::Add, FlowModKind::Modify, FlowModKind::DeleteStrict] {
            let _ = parse_flow_mod(k, &s);
        }
        // Whatever parses, prints, and what it prints parses to text that prints the same.
        if let Ok(r) = parse_flow(&s) {
            let t = format_rule(&r, None);
            let r2 = parse_flow(&t).map_err(|e| TestCaseError::fail(format!("{s} -> {t}: {e}")))?;
            prop_assert_eq!(format_rule(&r2, None), t);
        }
    }
}

/// A random valid rule, as text: a protocol context and fields consistent with it.
fn rule_text() -> impl Strategy<Value = String> {
    let proto = prop_oneof![
        Just(""),
        Just("ip"),
        Just("ipv6"),
        Just("arp"),
        Just("tcp"),
        Just("udp"),
        Just("sctp"),
        Just("icmp"),
        Just("tcp6"),
        Just("udp6"),
        Just("icmp6"),
    ];
    let mac = any::<[u8; 6]>().prop_map(|b| {
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    });
    (
        proto,
        0u8..=253,
        any::<u16>(),
        any::<u64>(),
        proptest::option::of(0u16..0xff00),
        proptest::option::of((0u16..4096, proptest::option::of(0u8..8))),
        proptest::option::of((mac.clone(), mac)),
        (any::<u32>(), 0u32..=32, any::<u32>(), any::<bool>()),
        (any::<u128>(), 0u32..=128, any::<u16>(), any::<u16>()),
        (0u8..64, 0u8..4, any::<u8>(), 0usize..5, any::<u16>()),
        (
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
        ),
        proptest::collection::vec(action_text(), 0..5),
    )
        .prop_map(
            |(proto, table, prio, cookie, in_port, vlan, macs, v4, v6, l3, meta, actions)| {
                let mut p: Vec<String> = vec![format!("table={table}"), format!("priority={prio}")];
                if cookie != 0 {
                    p.push(format!("cookie={cookie:#x}"));
                }
                if !proto.is_empty() {
                    p.push(proto.to_string());
                }
                if let Some(i) = in_port {
                    p.push(format!("in_port={i}"));
                }
                if let Some((vid, pcp)) = vlan {
                    p.push(format!("dl_vlan={vid}"));
                    if let Some(pcp) = pcp {
                        p.push(format!("dl_vlan_pcp={pcp}"));
                    }
                }
                if let Some((a, b)) = macs {
                    p.push(format!("dl_src={a}"));
                    p.push(format!("dl_dst={b}/{a}"));
                }
                let is4 = matches!(proto, "ip" | "tcp" | "udp" | "sctp" | "icmp");
                let is6 = matches!(proto, "ipv6" | "tcp6" | "udp6" | "icmp6");
                let (a4, n4, m4, arb) = v4;
                if is4 || proto == "arp" {
                    let ip = std::net::Ipv4Addr::from(a4);
                    p.push(format!("nw_src={ip}/{n4}"));
                    p.push(format!(
                        "nw_dst={ip}/{}",
                        std::net::Ipv4Addr::from(if arb { m4 } else { u32::MAX })
                    ));
                }
                let (a6, n6, s, d) = v6;
                if is6 {
                    let ip = std::net::Ipv6Addr::from(a6);
                    p.push(format!("ipv6_src={ip}/{n6}"));
                    p.push(format!("ipv6_dst={ip}/{}", std::net::Ipv6Addr::from(!a6)));
                    p.push(format!("ipv6_label={:#x}/{:#x}", s & 0xfff, d));
                }
                let (dscp, ecn, ttl, frag, flags) = l3;
                if is4 || is6 {
                    p.push(format!("ip_dscp={dscp}"));
                    p.push(format!("nw_ecn={ecn}"));
                    p.push(format!("nw_ttl={ttl}"));
                    p.push(format!(
                        "ip_frag={}",
                        ["no", "yes", "first", "later", "not_later"][frag]
                    ));
                }
                // A later fragment has no transport header: no L4 field then.
                let l4 = !((is4 || is6) && frag == 3);
                if l4 && matches!(proto, "tcp" | "udp" | "sctp" | "tcp6" | "udp6") {
                    p.push(format!("tp_src={s}"));
                    p.push(format!("tp_dst={s:#x}/{d:#x}"));
                }
                if l4 && matches!(proto, "tcp" | "tcp6") {
                    p.push(format!(
                        "tcp_flags={:#x}/{:#x}",
                        flags & 0xfff,
                        (flags >> 4) & 0xfff
                    ));
                }
                if l4 && matches!(proto, "icmp" | "icmp6") {
                    p.push(format!("icmp_type={}", s & 0xff));
                    p.push(format!("icmp_code={}", d & 0xff));
                }
                if proto == "arp" {
                    p.push(format!("arp_op={}", s & 0xff));
                }
                let (reg, md) = meta;
                if let Some(r) = reg {
                    p.push(format!("reg{}={r:#x}/{:#x}", r % 8, r.rotate_left(7)));
                }
                if let Some(m) = md {
                    p.push(format!("metadata={m:#x}"));
                    p.push(format!("tun_id={:#x}/{m:#x}", m.rotate_left(9)));
                }
                // At most one push_vlan: Open vSwitch refuses a third tag.
                let mut pushed = false;
                let acts: Vec<String> = actions
                    .into_iter()
                    .filter(|a| !a.contains("ip_dst") || is4)
                    .filter(|a| {
                        !a.starts_with("push_vlan") || !std::mem::replace(&mut pushed, true)
                    })
                    .collect();
                let acts = if acts.is_empty() {
                    "drop".to_string()
                } else {
                    acts.join(",")
                };
                format!("{},actions={acts}", p.join(","))
            },
        )
}

fn action_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u16..0xff00).prop_map(|p| format!("output:{p}")),
        Just("in_port".to_string()),
        Just("flood".to_string()),
        Just("all".to_string()),
        Just("normal".to_string()),
        Just("LOCAL".to_string()),
        Just("dec_ttl".to_string()),
        Just("pop_vlan".to_string()),
        Just("push_vlan:0x8100".to_string()),
        Just("push_vlan:0x88a8".to_string()),
        any::<u64>().prop_map(|t| format!("set_tunnel64:{t:#x}")),
        (any::<u32>(), any::<u32>()).prop_map(|(v, m)| format!(
            "set_field:{:#x}/{:#x}->reg2",
            v & (m | 1),
            m | 1
        )),
        any::<[u8; 6]>().prop_map(|b| format!(
            "mod_dl_dst:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )),
        (0u32..32, 0u32..32, any::<u32>()).prop_map(|(a, b, v)| {
            let (lo, hi) = (a.min(b), a.max(b));
            let n = hi - lo + 1;
            let v = if n == 32 { v } else { v & ((1u32 << n) - 1) };
            format!("load:{v:#x}->NXM_NX_REG5[{lo}..{hi}]")
        }),
        any::<u32>().prop_map(|a| format!("set_field:{}->ip_dst", std::net::Ipv4Addr::from(a))),
        (
            proptest::option::of(1u16..100),
            proptest::option::of(0u8..=254)
        )
            .prop_map(|(p, t)| match (p, t) {
                (None, None) => "resubmit:1".to_string(),
                (p, t) => format!(
                    "resubmit({},{})",
                    p.map(|p| p.to_string()).unwrap_or_default(),
                    t.map(|t| t.to_string()).unwrap_or_default()
                ),
            }),
        (0u32..1000).prop_map(|g| format!("group:{g}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn format_parse_format_is_stable(text in rule_text()) {
        let r = parse_flow(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let t1 = format_rule(&r, None);
        let r2 = parse_flow(&t1).map_err(|e| TestCaseError::fail(format!("{text} -> {t1}: {e}")))?;
        let t2 = format_rule(&r2, None);
        prop_assert_eq!(&t2, &t1, "from {}", text);
        // The match survives printing exactly (the actions may be respelled, same meaning).
        prop_assert_eq!(r2.m, r.m, "from {}", text);
        prop_assert_eq!((r2.table, r2.priority, r2.cookie), (r.table, r.priority, r.cookie));
    }
}

/// A masked ICMP type or code on a rule prints as `tp_src`/`tp_dst` (a rule's `icmp_type` takes
/// no mask) and parses back to the same rule; a megaflow prints it as `icmp_type=V/M`.
#[test]
fn masked_icmp_type_and_code_print_so_they_parse_again() {
    for text in [
        "icmp,tp_src=8/0xff,actions=drop",
        "icmp6,tp_dst=0x80/0xf0,actions=drop",
    ] {
        let r = parse_flow(text).expect(text);
        let t = format_rule(&r, None);
        assert!(
            t.contains("tp_src=0x8/0xff") || t.contains("tp_dst=0x80/0xf0"),
            "{t}"
        );
        let r2 = parse_flow(&t).expect(&t);
        assert_eq!(format_rule(&r2, None), t);
    }
    let r = parse_flow("icmp,tp_src=8/0xff,actions=drop").expect("rule");
    assert!(format_megaflow(&r.m).contains("icmp_type=0x8/0xff"));
}

//! Tests of the `lb` CLI: VPP's lines accepted unchanged, every malformed line refused naming
//! its token, and parse(format(x)) == x for any command (proptest).

use super::*;
use crate::model::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn ok(line: &str) -> LbCommand {
    parse_line(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn vpp_lines_are_accepted_unchanged() {
    let c = ok("lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 1024");
    let LbCommand::AddVip(s) = c else {
        panic!("{c:?}")
    };
    assert_eq!(s.key.to_string(), "198.18.1.1/32 protocol tcp port 80");
    assert_eq!(s.encap, Encap::L3dsr { dscp: 23 });
    assert_eq!(s.new_len, 1024);
    let LbCommand::AddVip(s) = ok("lb vip 2001:db8:1::1/128 encap gre6") else {
        panic!()
    };
    assert_eq!(s.encap, Encap::Gre6);
    assert_eq!(s.key.protocol, VipProtocol::Any);
    assert_eq!(s.new_len, DEFAULT_NEW_LEN);
    let LbCommand::AddVip(s) =
        ok("lb vip 198.18.1.1/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080")
    else {
        panic!()
    };
    assert_eq!(s.encap, Encap::Nat4 { target_port: 8080 });
    assert!(matches!(
        ok("lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23 del"),
        LbCommand::DelVip(_)
    ));
    let c = ok("lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2");
    let LbCommand::AddAs { servers, vip, .. } = c else {
        panic!()
    };
    assert_eq!(vip.port, 80);
    assert_eq!(servers.len(), 2);
    assert!(servers.iter().all(|s| s.weight.is_none()));
    assert_eq!(
        ok("lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 del flush"),
        LbCommand::DelAs {
            vip,
            servers: vec!["198.18.2.1".parse().unwrap()],
            flush: true
        }
    );
    let LbCommand::Conf(c) = ok("lb conf ip4-src-address 198.18.0.254 timeout 40") else {
        panic!()
    };
    assert_eq!(c.tcp_timeout, Some(40));
    assert_eq!(c.udp_timeout, Some(40));
    assert_eq!(c.ip4_src.unwrap().len, 32);
    assert!(matches!(
        ok("lb conf buckets-log2 16 ip6-src-address 2001:db8::fe"),
        LbCommand::Conf(ConfChange {
            buckets: Some(65536),
            ..
        })
    ));
    assert_eq!(
        ok("lb set interface nat4 in p1 del"),
        LbCommand::NatInterface {
            nat6: false,
            ports: vec!["p1".into()],
            del: true
        }
    );
    assert_eq!(ok("show lb"), LbCommand::Show(LbShow::Summary));
    assert_eq!(
        ok("show lb vips verbose"),
        LbCommand::Show(LbShow::Vips { verbose: true })
    );
    assert!(matches!(
        ok("lb flush vip 198.18.1.1/32 protocol udp port 53"),
        LbCommand::FlushVip(_)
    ));
    // Keywords in any order, as VPP's unformat loop; extra spaces are fine.
    assert_eq!(
        ok("lb vip 198.18.1.1/32 encap l3dsr  dscp 23 port 80 protocol tcp new_len 1024"),
        ok("lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 1024")
    );
}

/// VPP's `lb as`: one `weight` (0..=100) for every address of the line, wherever it stands;
/// `flush` with or without `del`; `weight` with `del` refused (VPP: mutually exclusive).
#[test]
fn a_weight_applies_to_every_address_of_the_line_as_in_vpp() {
    for line in [
        "lb as 198.18.1.1/32 198.18.2.1 198.18.2.2 198.18.2.3 weight 50",
        "lb as 198.18.1.1/32 198.18.2.1 weight 50 198.18.2.2 198.18.2.3",
        "lb as 198.18.1.1/32 weight 50 198.18.2.1 198.18.2.2 198.18.2.3",
    ] {
        let LbCommand::AddAs { servers, flush, .. } = ok(line) else {
            panic!("{line}")
        };
        let w: Vec<_> = servers.iter().map(|s| s.weight).collect();
        assert_eq!(w, [Some(50); 3], "{line}");
        assert!(!flush);
    }
    let LbCommand::AddAs { servers, flush, .. } =
        ok("lb as 198.18.1.1/32 198.18.2.1 weight 0 flush")
    else {
        panic!()
    };
    assert_eq!((servers[0].weight, flush), (Some(0), true), "hard drain");
    let LbCommand::AddAs { flush, .. } = ok("lb as 198.18.1.1/32 198.18.2.1 flush") else {
        panic!()
    };
    assert!(flush, "flush without del");
    for (line, token, accepted) in [
        ("lb as 198.18.1.1/32 198.18.2.1 weight 101", "101", "0..100"),
        (
            "lb as 198.18.1.1/32 198.18.2.1 weight 1 weight 2",
            "weight",
            "once",
        ),
        (
            "lb as 198.18.1.1/32 198.18.2.1 weight 1 del",
            "weight",
            "del",
        ),
    ] {
        let e = parse_line(line).expect_err(line);
        assert_eq!(e.token(), token, "{line}: {e}");
        assert!(e.to_string().contains(accepted), "{line}: {e}");
    }
}

/// VPP's `lb vip`: host bits cleared, `protocol` without a port (or `port 0`) an
/// all-protocols all-ports VIP, L3DSR on a prefix, `type nodeport` with `node_port`.
#[test]
fn vip_lines_mean_what_vpp_makes_of_them() {
    let LbCommand::AddVip(s) = ok("lb vip 90.1.2.3/8 encap l3dsr dscp 7") else {
        panic!()
    };
    assert_eq!(s.key.prefix.to_string(), "90.0.0.0/8");
    assert_eq!(s.encap, Encap::L3dsr { dscp: 7 });
    for line in [
        "lb vip 90.0.0.0/8 protocol tcp encap gre4",
        "lb vip 90.0.0.0/8 protocol udp port 0 encap gre4",
        "lb vip 90.0.0.0/8 encap gre4",
    ] {
        let LbCommand::AddVip(s) = ok(line) else {
            panic!("{line}")
        };
        assert_eq!(
            (s.key.protocol, s.key.port),
            (VipProtocol::Any, 0),
            "{line}"
        );
    }
    let LbCommand::AddAs { vip, .. } = ok("lb as 2001:db8::5/32 protocol tcp 2001:db8:1::1") else {
        panic!()
    };
    assert_eq!(
        vip,
        VipKey::all(Prefix::new("2001:db8::".parse().unwrap(), 32).unwrap())
    );
    let LbCommand::AddVip(s) = ok(
        "lb vip 90.1.2.1/32 protocol udp port 3306 encap nat4 type nodeport target_port 3307 \
         node_port 30964",
    ) else {
        panic!()
    };
    assert_eq!(s.node_port, Some(30964));
    assert_eq!(s.encap, Encap::Nat4 { target_port: 3307 });
    let LbCommand::AddVip(s) =
        ok("lb vip 90.1.2.1/32 protocol udp port 3306 encap nat4 type nodeport target_port 3307")
    else {
        panic!()
    };
    assert_eq!(
        s.node_port,
        Some(3306),
        "VPP's CLI: the VIP's port on the node"
    );
    let LbCommand::AddVip(s) =
        ok("lb vip 90.1.2.1/32 protocol udp port 3306 encap nat4 target_port 3307 node_port 30964")
    else {
        panic!()
    };
    assert_eq!(s.node_port, Some(30964), "as VPP's plugin docs write it");
    for (line, token) in [
        ("lb vip 90.1.2.1/32 encap gre4 node_port 30964", "node_port"),
        ("lb vip 90.1.2.1/32 protocol udp port 3306 encap nat4 type clusterip target_port 1 node_port 2", "node_port"),
        ("lb vip 90.1.2.1/32 encap nat4 type nodeport target_port 1", "nat4"),
    ] {
        let e = parse_line(line).expect_err(line);
        assert_eq!(e.token(), token, "{line}: {e}");
    }
}

#[test]
fn extensions() {
    let LbCommand::Conf(c) = ok("lb conf timeout tcp 300 timeout udp 30") else {
        panic!()
    };
    assert_eq!(
        (c.tcp_timeout, c.udp_timeout, c.other_timeout),
        (Some(300), Some(30), None)
    );
    let LbCommand::Conf(c) = ok("lb conf ip4-src-address 198.18.0.0/24") else {
        panic!()
    };
    assert_eq!(c.ip4_src.unwrap().len, 24);
    let LbCommand::AddVip(s) = ok("lb vip 198.18.1.1 encap gre4 src_ip_sticky") else {
        panic!()
    };
    assert!(s.src_ip_sticky);
    assert!(s.key.prefix.is_host());
}

#[test]
fn malformed_lines_name_their_token() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "", "lb vip"),
        ("lb", "<end of line>", "vip"),
        ("lb vipp 198.18.1.1/32", "vipp", "vip"),
        ("lb vip", "lb vip", "prefix"),
        ("lb vip 198.18.1.300/32", "198.18.1.300/32", "prefix"),
        ("lb vip 198.18.1.1/33", "198.18.1.1/33", "0..=32"),
        (
            "lb conf ip4-src-address 198.18.1.1/24",
            "198.18.1.1/24",
            "IPv4",
        ),
        (
            "lb vip 198.18.1.1/32 port 80 encap gre4",
            "port",
            "protocol tcp",
        ),
        ("lb vip 198.18.1.1/32 protocol icmp", "icmp", "tcp or udp"),
        (
            "lb vip 198.18.1.1/32 protocol tcp port 70000",
            "70000",
            "0..65535",
        ),
        ("lb vip 198.18.1.1/32 protocol tcp port", "port", "0..65535"),
        (
            "lb vip 198.18.1.1/32 protocol tcp port -1",
            "-1",
            "0..65535",
        ),
        ("lb vip 198.18.1.1/32 encap gre5", "gre5", "gre4"),
        ("lb vip 198.18.1.1/32 encap l3dsr", "l3dsr", "dscp"),
        ("lb vip 198.18.1.1/32 encap l3dsr dscp 64", "64", "0..63"),
        ("lb vip 198.18.1.1/32 encap gre4 dscp 3", "dscp", "l3dsr"),
        (
            "lb vip 198.18.1.1/32 encap nat4 target_port 80",
            "nat4",
            "port",
        ),
        (
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap nat4",
            "nat4",
            "target_port",
        ),
        (
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap nat4 type loadbalancer",
            "loadbalancer",
            "clusterip or nodeport",
        ),
        (
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap nat6 target_port 80",
            "nat6",
            "NAT46",
        ),
        (
            "lb vip 2001:db8::1/128 encap l3dsr dscp 1",
            "l3dsr",
            "IPv4 only",
        ),
        (
            "lb vip 198.18.1.1/32 encap gre4 target_port 80",
            "target_port",
            "nat4",
        ),
        ("lb vip 198.18.1.1/32 new_len 0", "0", "1..4194304"),
        (
            "lb vip 198.18.1.1/32 encap gre4 encap gre6",
            "encap",
            "once",
        ),
        ("lb vip 198.18.1.1/32 encap gre4 bogus", "bogus", "new_len"),
        ("lb as 198.18.1.1/32", "lb as", "server address"),
        (
            "lb as 198.18.1.1/32 198.18.2.1 198.18.2.1",
            "198.18.2.1",
            "once",
        ),
        (
            "lb as 198.18.1.1/32 198.18.2.1 weight 3 weight 4",
            "weight",
            "once",
        ),
        ("lb as 198.18.1.1/32 198.18.2.1 weight x", "x", "0..100"),
        (
            "lb as 198.18.1.1/32 198.18.2.1 weight 3 del",
            "weight",
            "del",
        ),
        (
            "lb as 198.18.1.1/32 198.18.2.1 hello",
            "hello",
            "server address",
        ),
        ("lb conf", "lb conf", "ip4-src-address"),
        ("lb conf timeout 0", "0", "1..86400"),
        ("lb conf timeout tcp", "timeout", "seconds"),
        ("lb conf timeout 40 timeout tcp 30", "tcp", "once"),
        ("lb conf ip4-src-address 2001:db8::1", "2001:db8::1", "IPv4"),
        ("lb conf buckets 0", "0", "1..33554432"),
        ("lb conf buckets 268435456", "268435456", "1..33554432"),
        ("lb conf buckets-log2 40", "40", "0..25"),
        ("lb conf buckets-log2 26", "26", "0..25"),
        ("lb conf color blue", "color", "buckets"),
        ("lb set interface nat5 in p1", "nat5", "nat4"),
        ("lb set interface nat4", "lb set interface", "in <port>"),
        ("lb set interface nat4 in", "in", "port name"),
        ("lb set interface nat4 out p1", "out", "in <port>"),
        ("lb flush vip 198.18.1.1/32 encap gre4", "encap", "protocol"),
        ("show lb vips loud", "loud", "verbose"),
        ("show lb as", "as", "vips"),
    ];
    for (line, token, accepted) in cases {
        let e = parse_line(line).expect_err(line);
        assert_eq!(e.token(), *token, "{line}: {e}");
        assert!(
            e.to_string().contains(accepted),
            "{line}: {e} (want `{accepted}`)"
        );
    }
}

#[test]
fn files_have_line_numbers_and_comments() {
    let text = "# LB for the web\n\nlb conf timeout 40  # VPP's default\n\
                lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
                lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2\n";
    assert_eq!(parse_lines(text).unwrap().len(), 3);
    let e =
        parse_lines("lb conf timeout 40\n# ok\nlb vip 198.18.1.1/32 encap l3dsr\n").unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.to_string().starts_with("line 3: `l3dsr`"), "{e}");
}

#[test]
fn state_prints_as_lines_that_rebuild_it() {
    let text = "lb conf ip4-src-address 198.18.0.254 timeout tcp 300\n\
                lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
                lb vip 198.18.1.1/32 encap gre4 new_len 1024 src_ip_sticky\n\
                lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 2\n\
                lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1\n\
                lb as 198.18.1.1/32 198.18.2.9 weight 0\n\
                lb set interface nat4 in p1 in p0\n";
    let s = LbState::new().apply(&parse_lines(text).unwrap()).unwrap();
    let printed = format_state(&s);
    assert_eq!(
        printed,
        "lb conf ip4-src-address 198.18.0.254 buckets 1048576 timeout tcp 300 timeout udp 40 \
         timeout other 40\n\
         lb vip 198.18.1.1/32 encap gre4 new_len 1024 src_ip_sticky\n\
         lb as 198.18.1.1/32 198.18.2.9 weight 0\n\
         lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
         lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 weight 100\n\
         lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 2\n\
         lb set interface nat4 in p0 in p1\n"
    );
    let again = LbState::new()
        .apply(&parse_lines(&printed).unwrap())
        .unwrap();
    assert_eq!(format_state(&again), printed);
}

fn arb_addr(v6: bool) -> BoxedStrategy<IpAddr> {
    if v6 {
        any::<u128>()
            .prop_map(|a| IpAddr::V6(Ipv6Addr::from(a)))
            .boxed()
    } else {
        any::<u32>()
            .prop_map(|a| IpAddr::V4(Ipv4Addr::from(a)))
            .boxed()
    }
}

fn arb_key() -> impl Strategy<Value = VipKey> {
    (
        any::<bool>(),
        any::<u128>(),
        0u8..=128,
        0u8..3,
        any::<u16>(),
    )
        .prop_map(|(v6, a, len, proto, port)| {
            let (addr, len) = if v6 {
                (IpAddr::V6(Ipv6Addr::from(a)), len)
            } else {
                (IpAddr::V4(Ipv4Addr::from(a as u32)), len % 33)
            };
            let prefix = Prefix::new(mask_addr(addr, len), len).unwrap();
            let protocol = [VipProtocol::Any, VipProtocol::Tcp, VipProtocol::Udp][proto as usize];
            let port = if protocol == VipProtocol::Any {
                0
            } else {
                port
            };
            VipKey {
                prefix,
                protocol,
                port,
            }
            .canonical()
        })
}

fn arb_vip() -> impl Strategy<Value = VipSpec> {
    (
        arb_key(),
        0u8..5,
        0u8..64,
        1u16..,
        1u32..=MAX_NEW_LEN,
        any::<bool>(),
    )
        .prop_filter_map("valid VIP", |(key, e, dscp, tp, new_len, src_ip_sticky)| {
            let encap = match e {
                0 => Encap::Gre4,
                1 => Encap::Gre6,
                2 => Encap::L3dsr { dscp },
                3 => Encap::Nat4 { target_port: tp },
                _ => Encap::Nat6 { target_port: tp },
            };
            let nat = matches!(encap, Encap::Nat4 { .. } | Encap::Nat6 { .. });
            let s = VipSpec {
                key,
                encap,
                new_len,
                src_ip_sticky,
                node_port: (nat && src_ip_sticky).then_some(tp),
            };
            check_vip_spec(&s).is_ok().then_some(s)
        })
}

fn arb_source(v6: bool) -> impl Strategy<Value = SourceAddress> {
    (arb_addr(v6), 1u8..=128).prop_map(move |(a, l)| {
        let len = if v6 { l } else { l % 32 + 1 };
        SourceAddress {
            addr: mask_addr(a, len),
            len,
        }
    })
}

fn arb_command() -> impl Strategy<Value = LbCommand> {
    let t = || proptest::option::of(1u32..=MAX_TIMEOUT);
    let conf = (
        proptest::option::of(arb_source(false)),
        proptest::option::of(arb_source(true)),
        proptest::option::of(1u32..=MAX_BUCKETS),
        t(),
        t(),
        t(),
    )
        .prop_map(|(a, b, c, d, e, f)| {
            LbCommand::Conf(ConfChange {
                ip4_src: a,
                ip6_src: b,
                buckets: c,
                tcp_timeout: d,
                udp_timeout: e,
                other_timeout: f,
            })
        })
        .prop_filter(
            "lb conf needs a setting",
            |c| !matches!(c, LbCommand::Conf(x) if *x == ConfChange::default()),
        );
    let servers = proptest::collection::btree_set(any::<bool>().prop_flat_map(arb_addr), 1..6);
    let ports = proptest::collection::btree_set("[a-z][a-z0-9_.-]{0,12}", 1..4);
    prop_oneof![
        conf,
        arb_vip().prop_map(LbCommand::AddVip),
        arb_key().prop_map(LbCommand::DelVip),
        arb_key().prop_map(LbCommand::FlushVip),
        (
            arb_key(),
            servers.clone(),
            proptest::option::of(0u32..=MAX_WEIGHT),
            any::<bool>()
        )
            .prop_map(|(vip, s, weight, flush)| LbCommand::AddAs {
                vip,
                servers: s.into_iter().map(|addr| AsSpec { addr, weight }).collect(),
                flush,
            }),
        (arb_key(), servers, any::<bool>()).prop_map(|(vip, s, flush)| LbCommand::DelAs {
            vip,
            servers: s.into_iter().collect(),
            flush,
        }),
        (any::<bool>(), ports, any::<bool>()).prop_map(|(nat6, p, del)| {
            LbCommand::NatInterface {
                nat6,
                ports: p.into_iter().collect(),
                del,
            }
        }),
        any::<bool>().prop_map(|v| LbCommand::Show(if v {
            LbShow::Summary
        } else {
            LbShow::Vips { verbose: true }
        })),
    ]
}

proptest! {
    #[test]
    fn parse_of_format_is_identity(cmd in arb_command()) {
        let line = format_command(&cmd);
        let back = parse_line(&line).map_err(|e| TestCaseError::fail(format!("{line}: {e}")))?;
        prop_assert_eq!(back, cmd, "{}", line);
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,80}") {
        let _ = parse_line(&s);
        let _ = parse_lines(&s);
    }

    #[test]
    fn lb_words_never_panic(words in proptest::collection::vec(prop_oneof![
        Just("lb"), Just("vip"), Just("as"), Just("conf"), Just("del"), Just("flush"),
        Just("protocol"), Just("tcp"), Just("port"), Just("80"), Just("encap"), Just("nat4"),
        Just("l3dsr"), Just("dscp"), Just("target_port"), Just("weight"), Just("timeout"),
        Just("198.18.1.1/32"), Just("198.18.2.1"), Just("2001:db8::1"), Just("in"),
    ], 0..12)) {
        let line = words.join(" ");
        if let Ok(c) = parse_line(&line) {
            let again = parse_line(&format_command(&c)).unwrap();
            prop_assert_eq!(again, c);
        }
    }
}

#[test]
fn show_text() {
    let s = LbState::new()
        .apply(
            &parse_lines(
                "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 100\n\
                 lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 weight 1\n\
                 lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 3\n\
                 lb vip 198.18.1.2/32 encap l3dsr dscp 1\n",
            )
            .unwrap(),
        )
        .unwrap();
    let t = crate::snapshot::LbTables::build(&s, None);
    let v = format_show(&t, LbShow::Vips { verbose: true });
    assert!(v.contains("[0] 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n  maglev 101 entries (new_len 100), 2 active of 2 servers\n  warning: 101 entries < 100 x 2 servers"), "{v}");
    assert!(
        v.contains("    198.18.2.2 slot 1 gen 0 weight 3 active entries 76 (75.25%)"),
        "{v}"
    );
    assert!(v.contains("no server with weight > 0"), "{v}");
    let sum = format_show(&t, LbShow::Summary);
    assert!(sum.contains("vips 2"), "{sum}");
}

#[test]
fn seed_lines() {
    let text = include_str!("../../tests/lb_cli_lines.txt");
    let mut refused = false;
    let mut n = 0;
    for line in text.lines() {
        if line.starts_with("# refused") {
            refused = true;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        n += 1;
        match (parse_line(line), refused) {
            (Ok(c), false) => assert_eq!(parse_line(&format_command(&c)).unwrap(), c),
            (Err(_), true) => {}
            (r, _) => panic!("{line}: {r:?}"),
        }
    }
    assert!(n > 20);
}

#[test]
fn health_marks_print_as_comments_and_are_not_configuration() {
    let LbCommand::AddAs { vip, .. } = ok("lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1")
    else {
        panic!("lb as")
    };
    let mark = LbCommand::SetHealth {
        vip,
        servers: vec!["198.18.2.1".parse().unwrap()],
        down: true,
        flush: true,
    };
    let line = format_command(&mark);
    assert_eq!(
        line,
        "# health: lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 marked down (flush)"
    );
    assert!(
        parse_lines(&line).unwrap().is_empty(),
        "a comment reads back as nothing"
    );
}

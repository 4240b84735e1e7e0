//! Neighbor Discovery: solicitations answered, advertisements learned, malformed and
//! unsolicited messages dropped and counted.

use super::*;

#[test]
fn neighbor_solicitation_for_our_address_gets_an_advertisement() {
    let mut t = Bench::new();
    t.nd_in(0, &[ns_for_us(255)]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let (port, f) = &sent[0];
    assert_eq!(*port, 0);
    let expected = nd_frame(
        136,
        CLIENT,
        MAC0,
        "2001:db8:1::1",
        "2001:db8:1::2",
        255,
        "2001:db8:1::1",
        0xe0, // router, solicited, override
        Some((2, MAC0)),
    );
    assert_eq!(f, &expected);
    let ip = &f[14..];
    assert_eq!(ip[7], 255, "hop limit 255");
    assert_eq!((ip[40], ip[41]), (136, 0));
    assert_eq!(ip[44] & 0x60, 0x60, "S and O");
    assert_eq!(
        &ip[64..72],
        &[2, 1, 2, 0, 0, 0, 0, 1],
        "target link-layer option"
    );
    assert!(icmp6_ok(ip), "checksum");
    // The solicitor is learned from its source link-layer option (stale, RFC 4861 7.2.3).
    let row = t.row("2001:db8:1::2").expect("learned");
    assert_eq!((row.mac, row.state), (Some(CLIENT), NeighbourState::Stale));
    assert_eq!(t.stats().na_sent, 1);
    t.assert_no_leak();
}

#[test]
fn unicast_and_link_local_and_dad_solicitations() {
    let mut t = Bench::new();
    // Unicast NS (a reachability probe) without a source link-layer option: answered to the
    // frame's source MAC.
    let unicast = nd_frame(
        135,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        255,
        "2001:db8:1::1",
        0,
        None,
    );
    // For our EUI-64 link-local address, from a link-local source.
    let ll = NeighbourPort {
        mac: MAC0,
        mtu: 1500,
        ip4: vec![],
        ip6: vec![],
    }
    .link_local();
    assert_eq!(ll, v6("fe80::ff:fe00:1"));
    let ll_ns = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "fe80::2",
        "ff02::1:ff00:1",
        255,
        "fe80::ff:fe00:1",
        0,
        Some((1, CLIENT)),
    );
    // DAD probe for our address: from ::, answered to all nodes without S.
    let dad = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "::",
        "ff02::1:ff00:1",
        255,
        "2001:db8:1::1",
        0,
        None,
    );
    t.nd_in(0, &[unicast, ll_ns, dad]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 3);
    for (_, f) in &sent {
        assert!(icmp6_ok(&f[14..]));
        assert_eq!(f[14 + 7], 255);
    }
    assert_eq!(&sent[0].1[0..6], &CLIENT);
    assert_eq!(
        &sent[1].1[14 + 8..14 + 24],
        &ll.octets(),
        "answered from the target"
    );
    assert_eq!(&sent[2].1[0..6], &[0x33, 0x33, 0, 0, 0, 1]);
    assert_eq!(&sent[2].1[14 + 24..14 + 40], &v6("ff02::1").octets());
    assert_eq!(
        sent[2].1[14 + 44],
        0xa0,
        "router and override, not solicited"
    );
    t.assert_no_leak();
}

#[test]
fn nd_with_hop_limit_below_255_is_dropped() {
    let mut t = Bench::new();
    let na = nd_frame(
        136,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        64,
        "2001:db8:1::2",
        0x60,
        Some((2, CLIENT)),
    );
    t.nd_in(0, &[ns_for_us(64), ns_for_us(254), na]);
    assert!(t.take_sent().is_empty());
    assert_eq!(t.drops(IP6_ND, "bad-hop-limit"), 3);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

#[test]
fn bad_nd_is_dropped_and_counted() {
    let good = ns_for_us(255);
    let mut bad_sum = good.clone();
    bad_sum[14 + 42] ^= 1;
    let fix = |mut f: Vec<u8>| {
        let c = icmp6_checksum(&f[14..]);
        f[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
        f
    };
    let mut code = good.clone();
    code[14 + 41] = 1;
    let code = fix(code);
    let mut zero_opt = good.clone();
    zero_opt[14 + 65] = 0;
    let zero_opt = fix(zero_opt);
    let not_ours = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 9],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1:ff00:9",
        255,
        "2001:db8:1::9",
        0,
        Some((1, CLIENT)),
    );
    let wrong_group = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 9],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1:ff00:9",
        255,
        "2001:db8:1::1",
        0,
        Some((1, CLIENT)),
    );
    let dad_with_slla = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "::",
        "ff02::1:ff00:1",
        255,
        "2001:db8:1::1",
        0,
        Some((1, CLIENT)),
    );
    let mcast_target = nd_frame(
        135,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        255,
        "ff02::1",
        0,
        None,
    );
    let solicited_to_group = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1",
        255,
        "2001:db8:1::2",
        0x40,
        Some((2, CLIENT)),
    );
    let na_claims_ours = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        CLIENT,
        "2001:db8:1::1",
        "ff02::1",
        255,
        "2001:db8:1::1",
        0x20,
        Some((2, CLIENT)),
    );
    let mut router_solicit = nd_frame(
        133,
        [0x33, 0x33, 0, 0, 0, 2],
        CLIENT,
        "fe80::2",
        "ff02::2",
        255,
        "::",
        0,
        None,
    );
    let c = icmp6_checksum(&router_solicit[14..]);
    router_solicit[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
    let cases = vec![
        (good[..14 + 40 + 20].to_vec(), "malformed"),
        (bad_sum, "bad-checksum"),
        (code, "malformed"),
        (zero_opt, "malformed"),
        (not_ours, "not-for-us"),
        (wrong_group, "not-for-us"),
        (dad_with_slla, "malformed"),
        (mcast_target, "malformed"),
        (solicited_to_group, "malformed"),
        (na_claims_ours, "address-conflict"),
        (router_solicit, "unsupported-type"),
    ];
    for (i, (frame, reason)) in cases.into_iter().enumerate() {
        let mut t = Bench::new();
        t.nd_in(0, &[frame]);
        assert!(t.take_sent().is_empty(), "case {i}: {reason}");
        assert_eq!(t.drops(IP6_ND, reason), 1, "case {i}: {reason}");
        assert!(t.rows().is_empty(), "{reason}: nothing learned");
        t.assert_no_leak();
    }
}

#[test]
fn unsolicited_advertisement_creates_nothing() {
    let mut t = Bench::new();
    let na = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        HOST,
        "2001:db8:2::277",
        "ff02::1",
        255,
        "2001:db8:2::277",
        0x20,
        Some((2, HOST)),
    );
    t.nd_in(1, &[na]);
    assert_eq!(t.drops(IP6_ND, "unsolicited"), 1);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

//! Tests of the encapsulations: each result is compared byte for byte with the packet built
//! from scratch with full checksums (`testpkt`), and random packets keep valid checksums.

use super::*;
use crate::parse::{parse, Kind};
use crate::testpkt::*;
use packet::headers::{be16, eth};
use packet::meta::{FLAG_FLOW_HASH, FLAG_IP6};
use proptest::prelude::*;

const C4: &str = "198.18.0.1";
const V4: &str = "198.18.1.1";
const S4: &str = "198.18.2.1";
const R4: &str = "198.18.5.5";
const C6: &str = "2001:db8::1";
const V6: &str = "2001:db8:1::1";
const S6: &str = "2001:db8:2::1";

/// A buffer slot with `headroom` bytes before an Ethernet header, the IP packet and `pad`
/// bytes of L2 padding.
struct Buf {
    meta: BufferMeta,
    slot: Vec<u8>,
}

impl Buf {
    fn new(l3: &[u8], headroom: usize, pad: usize) -> Buf {
        let mut slot = vec![0xeeu8; headroom];
        slot.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2]);
        let ip6 = l3[0] >> 4 == 6;
        slot.extend_from_slice(&if ip6 { [0x86, 0xdd] } else { [0x08, 0x00] });
        slot.extend_from_slice(l3);
        slot.extend(std::iter::repeat_n(0u8, pad));
        let len = slot.len() - headroom;
        slot.extend_from_slice(&[0xaa; 64]); // room after the packet
        let meta = BufferMeta {
            data_offset: headroom as u16,
            length: len as u16,
            l3_offset: 14,
            l4_offset: 14 + if ip6 { 40 } else { 20 },
            ethertype: if ip6 { 0x86dd } else { 0x0800 },
            flags: if ip6 { FLAG_IP6 } else { 0 },
            ..BufferMeta::default()
        };
        Buf { meta, slot }
    }

    fn frame(&self) -> &[u8] {
        let s = usize::from(self.meta.data_offset);
        &self.slot[s..s + usize::from(self.meta.length)]
    }

    fn l3(&self) -> &[u8] {
        &self.frame()[usize::from(self.meta.l3_offset)..]
    }

    fn parsed(&self) -> Parsed {
        parse(self.l3(), self.l3()[0] >> 4 == 6).expect("test packet parses")
    }
}

fn m4(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv4Addr>()
        .expect("v4")
        .to_ipv6_mapped()
        .octets()
}

#[test]
fn l3dsr_tcp_sets_dscp_keeps_ecn_and_checksums() {
    let l4 = tcp(40000, 80, 0x18, b"GET / HTTP/1.0\r\n\r\n");
    let o = Ip4Opts {
        tos: 0x03,
        ..Default::default()
    };
    let mut b = Buf::new(&ip4_with(a4(C4), a4(V4), TCP, &l4, o), 128, 6);
    let p = b.parsed();
    l3dsr(&b.meta, &mut b.slot, &p, a4(S4), 23).expect("l3dsr");
    let want = ip4_with(
        a4(C4),
        a4(S4),
        TCP,
        &l4,
        Ip4Opts {
            tos: 23 << 2 | 3,
            ..o
        },
    );
    assert_eq!(&b.l3()[..want.len()], &want[..]);
    assert_eq!(
        b.meta.length as usize,
        14 + want.len() + 6,
        "length unchanged"
    );
}

#[test]
fn l3dsr_udp_zero_checksum_stays_zero_and_v6_is_refused() {
    let l4 = udp(5000, 53, b"query");
    let o = Ip4Opts {
        zero_udp: true,
        ..Default::default()
    };
    let mut b = Buf::new(&ip4_with(a4(C4), a4(V4), UDP, &l4, o), 128, 0);
    let p = b.parsed();
    l3dsr(&b.meta, &mut b.slot, &p, a4(S4), 10).expect("l3dsr");
    assert_eq!(be16(b.l3(), 26), 0);
    assert_eq!(
        b.l3(),
        &ip4_with(a4(C4), a4(S4), UDP, &l4, Ip4Opts { tos: 40, ..o })[..]
    );
    let mut b = Buf::new(&ip6(a6(C6), a6(V6), UDP, &l4), 128, 0);
    let p = b.parsed();
    assert_eq!(
        l3dsr(&b.meta, &mut b.slot, &p, a4(S4), 10),
        Err(EncapError::FamilyMismatch)
    );
}

#[test]
fn l3dsr_fragments_reassemble_with_a_valid_checksum() {
    let payload: Vec<u8> = (0..64u8).collect();
    let whole = ip4(a4(C4), a4(V4), UDP, &udp(5000, 53, &payload));
    let l4 = &whole[20..];
    let o1 = Ip4Opts {
        frag: 0x2000,
        no_l4_sum: true,
        ..Default::default()
    };
    let o2 = Ip4Opts {
        frag: 4,
        no_l4_sum: true,
        ..Default::default()
    };
    let f1 = ip4_with(a4(C4), a4(V4), UDP, &l4[..32], o1);
    let f2 = ip4_with(a4(C4), a4(V4), UDP, &l4[32..], o2);
    let mut out = Vec::new();
    for f in [f1, f2] {
        let mut b = Buf::new(&f, 128, 0);
        let p = b.parsed();
        assert!(matches!(p.kind, Kind::FirstFragment | Kind::LaterFragment));
        l3dsr(&b.meta, &mut b.slot, &p, a4(S4), 1).expect("l3dsr");
        assert_eq!(packet::checksum::checksum(&b.l3()[..20]), 0, "ip header");
        out.extend_from_slice(&b.l3()[20..]);
    }
    let want = ip4(a4(C4), a4(S4), UDP, &udp(5000, 53, &payload));
    assert_eq!(out, &want[20..], "reassembled UDP datagram");
}

#[test]
fn l3dsr_icmp_error_follows_the_flow() {
    let reply = ip4(a4(V4), a4(C4), TCP, &tcp(80, 40000, 0x10, &[7; 60]));
    let e = icmp4_error(a4(R4), a4(V4), 3, 4, &reply[..28]);
    let mut b = Buf::new(&e, 128, 0);
    let p = b.parsed();
    assert_eq!(p.kind, Kind::IcmpError);
    l3dsr(&b.meta, &mut b.slot, &p, a4(S4), 23).expect("l3dsr");
    let want = icmp4_error(a4(R4), a4(S4), 3, 4, &reply[..28]);
    let mut want = want;
    want[1] = 23 << 2;
    let c = {
        want[10] = 0;
        want[11] = 0;
        packet::checksum::checksum(&want[..20])
    };
    want[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(b.l3(), &want[..]);
}

#[test]
fn gre4_and_gre6_wrap_v4_and_v6() {
    let inner4 = ip4(a4(C4), a4(V4), TCP, &tcp(40000, 80, 0x02, &[]));
    let inner6 = ip6(a6(C6), a6(V6), UDP, &udp(5000, 53, b"x"));
    for (inner, outer6) in [
        (&inner4, false),
        (&inner6, false),
        (&inner4, true),
        (&inner6, true),
    ] {
        let mut b = Buf::new(inner, 128, 10);
        let p = b.parsed();
        let r = if outer6 {
            gre6(
                &mut b.meta,
                &mut b.slot,
                &p,
                a6("2001:db8:ff::7"),
                a6(S6),
                60,
                1500,
                0xabcde123,
            )
        } else {
            gre4(
                &mut b.meta,
                &mut b.slot,
                &p,
                a4("198.18.0.254"),
                a4(S4),
                60,
                1500,
                0xabcde123,
            )
        };
        r.expect("gre");
        let m = b.meta;
        let over = if outer6 { GRE6_OVERHEAD } else { GRE4_OVERHEAD };
        assert_eq!(
            usize::from(m.length),
            14 + over + inner.len(),
            "padding dropped"
        );
        assert_eq!(usize::from(m.data_offset), 128 + 14 - over - 14);
        assert_eq!((m.l3_offset, m.flow_hash), (14, 0xabcde123));
        assert!(m.flags & FLAG_FLOW_HASH != 0);
        assert_eq!(m.flags & FLAG_IP6 != 0, outer6);
        assert_eq!(&b.frame()[..14], &[0u8; 14]);
        let l3 = b.l3();
        assert_eq!(&l3[over..], &inner[..], "inner untouched");
        let gre_type = if p.tuple.ip6 { 0x86dd } else { 0x0800 };
        let want_outer = if outer6 {
            let mut h = ip6(a6("2001:db8:ff::7"), a6(S6), 47, &[0, 0, 0, 0]);
            h.truncate(40);
            h[1..4].copy_from_slice(&[0x0d, 0xe1, 0x23]); // flow label from the hash
            h[4..6].copy_from_slice(&((4 + inner.len()) as u16).to_be_bytes());
            h[7] = 60;
            h
        } else {
            let mut h = ip4_with(
                a4("198.18.0.254"),
                a4(S4),
                47,
                &vec![0; 4 + inner.len()],
                Ip4Opts {
                    frag: 0x4000,
                    ttl: 60,
                    ..Default::default()
                },
            );
            h.truncate(20);
            h[4..6].copy_from_slice(&[0, 0]);
            h[10..12].copy_from_slice(&[0, 0]);
            let c = packet::checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        };
        assert_eq!(
            &l3[..over - 4],
            &want_outer[..],
            "outer header (outer6 {outer6})"
        );
        assert_eq!(
            &l3[over - 4..over],
            &[0, 0, (gre_type >> 8) as u8, gre_type as u8]
        );
        assert_eq!(
            m.ethertype,
            if outer6 {
                eth::TYPE_IPV6
            } else {
                eth::TYPE_IPV4
            }
        );
    }
}

#[test]
fn gre_mtu_headroom_and_family() {
    let big = ip4_with(
        a4(C4),
        a4(V4),
        UDP,
        &udp(1, 2, &[0; 1472]),
        Ip4Opts {
            frag: 0x4000,
            ..Default::default()
        },
    );
    let mut b = Buf::new(&big, 128, 0);
    let p = b.parsed();
    let before = b.slot.clone();
    let r = gre4(&mut b.meta, &mut b.slot, &p, a4(V4), a4(S4), 64, 1500, 1);
    assert_eq!(
        r,
        Err(EncapError::TooBig {
            mtu: 1476,
            signal: true
        })
    );
    assert_eq!(b.slot, before, "untouched");
    let r = gre6(&mut b.meta, &mut b.slot, &p, a6(V6), a6(S6), 64, 1500, 1);
    assert_eq!(
        r,
        Err(EncapError::TooBig {
            mtu: 1456,
            signal: true
        })
    );
    let no_df = ip4(a4(C4), a4(V4), UDP, &udp(1, 2, &[0; 1472]));
    let mut b = Buf::new(&no_df, 128, 0);
    let p = b.parsed();
    let r = gre4(&mut b.meta, &mut b.slot, &p, a4(V4), a4(S4), 64, 1500, 1);
    assert_eq!(
        r,
        Err(EncapError::TooBig {
            mtu: 1476,
            signal: false
        })
    );
    let v6 = ip6(a6(C6), a6(V6), UDP, &udp(1, 2, &[0; 1452]));
    let mut b = Buf::new(&v6, 128, 0);
    let p = b.parsed();
    let r = gre6(&mut b.meta, &mut b.slot, &p, a6(V6), a6(S6), 64, 1500, 1);
    assert_eq!(
        r,
        Err(EncapError::TooBig {
            mtu: 1456,
            signal: true
        })
    );
    // Fits exactly.
    let r = gre6(&mut b.meta, &mut b.slot, &p, a6(V6), a6(S6), 64, 1544, 1);
    assert_eq!(r, Ok(()));
    let small = ip4(a4(C4), a4(V4), UDP, &udp(1, 2, &[]));
    let mut b = Buf::new(&small, 20, 0);
    let p = b.parsed();
    assert_eq!(
        gre4(&mut b.meta, &mut b.slot, &p, a4(V4), a4(S4), 64, 1500, 1),
        Err(EncapError::NoHeadroom)
    );
    assert_eq!(
        gre6(&mut b.meta, &mut b.slot, &p, a6(V6), m4(S4), 64, 1500, 1),
        Err(EncapError::FamilyMismatch)
    );
}

#[test]
fn gre_source_spreads_by_hash_within_the_prefix() {
    assert_eq!(
        gre_source4(a4("198.18.0.254"), 0, 0xffff_ffff),
        a4("198.18.0.254")
    );
    assert_eq!(
        gre_source4(a4("198.18.0.0"), 8, 0x00ab_0000),
        a4("198.18.0.171")
    );
    assert_eq!(
        gre_source4(a4("198.18.0.0"), 32, 0x1234_5678),
        [0x56, 0x78, 0x12, 0x34]
    );
    let s = gre_source6(a6("2001:db8:ff::"), 16, 0xbeef_0000);
    assert_eq!(s, a6("2001:db8:ff::beef"));
    let mut seen = std::collections::HashSet::new();
    for i in 0..1000u32 {
        let t = crate::FiveTuple::v4(a4(C4), a4(V4), 6, 1000 + i as u16, 80);
        seen.insert(gre_source4(
            a4("198.18.0.0"),
            4,
            crate::stable_hash(&t, false),
        ));
    }
    assert_eq!(seen.len(), 16, "every source of a /28 is used");
}

fn nat_case(before: Vec<u8>, after: Vec<u8>, forward: bool, addr: [u8; 16], port: u16) {
    let mut b = Buf::new(&before, 128, 4);
    let p = b.parsed();
    let r = if forward {
        nat_forward(&b.meta, &mut b.slot, &p, addr, port)
    } else {
        nat_reverse(&b.meta, &mut b.slot, &p, addr, port)
    };
    r.expect("nat");
    assert_eq!(&b.l3()[..after.len()], &after[..]);
    checksums_ok(&after).expect("the expected packet is valid");
}

#[test]
fn nat4_forward_and_reverse_tcp_udp() {
    let pay = b"hello world";
    nat_case(
        ip4(a4(C4), a4(V4), TCP, &tcp(40000, 80, 0x02, pay)),
        ip4(a4(C4), a4(S4), TCP, &tcp(40000, 8080, 0x02, pay)),
        true,
        m4(S4),
        8080,
    );
    nat_case(
        ip4(a4(S4), a4(C4), TCP, &tcp(8080, 40000, 0x12, pay)),
        ip4(a4(V4), a4(C4), TCP, &tcp(80, 40000, 0x12, pay)),
        false,
        m4(V4),
        80,
    );
    nat_case(
        ip4(a4(C4), a4(V4), UDP, &udp(5000, 53, pay)),
        ip4(a4(C4), a4(S4), UDP, &udp(5000, 5353, pay)),
        true,
        m4(S4),
        5353,
    );
    let z = Ip4Opts {
        zero_udp: true,
        ..Default::default()
    };
    nat_case(
        ip4_with(a4(S4), a4(C4), UDP, &udp(5353, 5000, pay), z),
        ip4_with(a4(V4), a4(C4), UDP, &udp(53, 5000, pay), z),
        false,
        m4(V4),
        53,
    );
}

#[test]
fn nat6_forward_reverse_and_icmp6_echo() {
    let pay = b"payload";
    nat_case(
        ip6(a6(C6), a6(V6), TCP, &tcp(40000, 443, 0x10, pay)),
        ip6(a6(C6), a6(S6), TCP, &tcp(40000, 8443, 0x10, pay)),
        true,
        a6(S6),
        8443,
    );
    nat_case(
        ip6(a6(S6), a6(C6), UDP, &udp(5353, 5000, pay)),
        ip6(a6(V6), a6(C6), UDP, &udp(53, 5000, pay)),
        false,
        a6(V6),
        53,
    );
    let echo = [128, 0, 0, 0, 0, 9, 0, 1, 1, 2, 3];
    nat_case(
        ip6(a6(C6), a6(V6), 58, &echo),
        ip6(a6(C6), a6(S6), 58, &echo),
        true,
        a6(S6),
        0,
    );
}

#[test]
fn nat_family_mismatch_and_later_fragment() {
    let mut b = Buf::new(&ip6(a6(C6), a6(V6), UDP, &udp(1, 2, &[])), 128, 0);
    let p = b.parsed();
    assert_eq!(
        nat_forward(&b.meta, &mut b.slot, &p, m4(S4), 1),
        Err(EncapError::FamilyMismatch)
    );
    let o = Ip4Opts {
        frag: 10,
        no_l4_sum: true,
        ..Default::default()
    };
    nat_case(
        ip4_with(a4(C4), a4(V4), UDP, &[9; 16], o),
        ip4_with(a4(C4), a4(S4), UDP, &[9; 16], o),
        true,
        m4(S4),
        8080,
    );
}

#[test]
fn nat4_icmp_errors_both_ways() {
    // Forward: a router tells the VIP that the (reverse-NATed) reply VIP:80 -> client was too
    // big; the error goes to the server about server:8080 -> client.
    let reply = ip4(a4(V4), a4(C4), TCP, &tcp(80, 40000, 0x10, &[7; 60]));
    let as_sent = ip4(a4(S4), a4(C4), TCP, &tcp(8080, 40000, 0x10, &[7; 60]));
    for quote in [28, 48, 60] {
        nat_case(
            icmp4_error(a4(R4), a4(V4), 3, 4, &reply[..quote]),
            icmp4_error(a4(R4), a4(S4), 3, 4, &as_sent[..quote]),
            true,
            m4(S4),
            8080,
        );
    }
    // Reverse: the server says port unreachable about client -> server:5353; the client must
    // see it from the VIP about client -> VIP:53.
    let fwd = ip4(a4(C4), a4(S4), UDP, &udp(5000, 5353, b"q"));
    let orig = ip4(a4(C4), a4(V4), UDP, &udp(5000, 53, b"q"));
    nat_case(
        icmp4_error(a4(S4), a4(C4), 3, 3, &fwd),
        icmp4_error(a4(V4), a4(C4), 3, 3, &orig),
        false,
        m4(V4),
        53,
    );
}

#[test]
fn nat6_icmp_errors_both_ways() {
    let reply = ip6(a6(V6), a6(C6), TCP, &tcp(443, 40000, 0x10, &[1; 40]));
    let as_sent = ip6(a6(S6), a6(C6), TCP, &tcp(8443, 40000, 0x10, &[1; 40]));
    nat_case(
        icmp6_error(a6("2001:db8:5::5"), a6(V6), 2, 0, &reply[..48]),
        icmp6_error(a6("2001:db8:5::5"), a6(S6), 2, 0, &as_sent[..48]),
        true,
        a6(S6),
        8443,
    );
    let fwd = ip6(a6(C6), a6(S6), UDP, &udp(5000, 5353, b"q"));
    let orig = ip6(a6(C6), a6(V6), UDP, &udp(5000, 53, b"q"));
    nat_case(
        icmp6_error(a6(S6), a6(C6), 1, 4, &fwd),
        icmp6_error(a6(V6), a6(C6), 1, 4, &orig),
        false,
        a6(V6),
        53,
    );
}

proptest! {
    #[test]
    fn random_rewrites_keep_checksums_valid(
        sport in any::<u16>(), dport in any::<u16>(), port in any::<u16>(),
        s in any::<[u8; 4]>(), d in any::<[u8; 4]>(), n in any::<[u8; 4]>(),
        s6 in any::<[u8; 16]>(), d6 in any::<[u8; 16]>(), n6 in any::<[u8; 16]>(),
        pay in proptest::collection::vec(any::<u8>(), 0..40), tcp_p in any::<bool>(),
        dscp in 0u8..64, which in 0usize..5,
    ) {
        let l4 = if tcp_p { tcp(sport, dport, 0x10, &pay) } else { udp(sport, dport, &pay) };
        let proto = if tcp_p { TCP } else { UDP };
        let v4 = ip4(s, d, proto, &l4);
        let v6 = ip6(s6, d6, proto, &l4);
        let n6 = if n6[..12] == m4("0.0.0.0")[..12] { [0x20; 16] } else { n6 };
        let mapped = std::net::Ipv4Addr::from(n).to_ipv6_mapped().octets();
        let (pkt, r): (&[u8], _) = match which {
            0 => (&v4, 0),
            1 => (&v4, 1),
            2 => (&v4, 2),
            3 => (&v6, 1),
            _ => (&v6, 2),
        };
        let mut b = Buf::new(pkt, 128, 0);
        let p = b.parsed();
        let res = match (r, pkt[0] >> 4 == 6) {
            (0, _) => l3dsr(&b.meta, &mut b.slot, &p, n, dscp),
            (1, false) => nat_forward(&b.meta, &mut b.slot, &p, mapped, port),
            (2, false) => nat_reverse(&b.meta, &mut b.slot, &p, mapped, port),
            (1, true) => nat_forward(&b.meta, &mut b.slot, &p, n6, port),
            _ => nat_reverse(&b.meta, &mut b.slot, &p, n6, port),
        };
        prop_assert_eq!(res, Ok(()));
        prop_assert_eq!(checksums_ok(b.l3()), Ok(()));
    }

    /// The fast lane's L3DSR rewrite writes exactly the bytes of the general one.
    #[test]
    fn l3dsr_plain4_writes_what_l3dsr_writes(
        sport in any::<u16>(), dport in any::<u16>(), s in any::<[u8; 4]>(),
        d in any::<[u8; 4]>(), n in any::<[u8; 4]>(), tos in any::<u8>(), flags in any::<u8>(),
        pay in proptest::collection::vec(any::<u8>(), 0..40), tcp_p in any::<bool>(),
        zero_udp in any::<bool>(), pad in 0usize..8, dscp in any::<u8>(),
    ) {
        let l4 = if tcp_p { tcp(sport, dport, flags, &pay) } else { udp(sport, dport, &pay) };
        let proto = if tcp_p { TCP } else { UDP };
        let opts = crate::testpkt::Ip4Opts { tos, zero_udp, ..Default::default() };
        let pkt = ip4_with(s, d, proto, &l4, opts);
        let mut general = Buf::new(&pkt, 64, pad);
        let mut fast = Buf::new(&pkt, 64, pad);
        let plain = crate::parse::plain4(fast.l3());
        prop_assert!(plain.is_some());
        let plain = plain.unwrap_or(crate::parse::Plain4::EMPTY);
        let p = general.parsed();
        prop_assert_eq!(l3dsr(&general.meta, &mut general.slot, &p, n, dscp), Ok(()));
        prop_assert_eq!(l3dsr_plain4(&fast.meta, &mut fast.slot, &plain, n, dscp), Ok(()));
        prop_assert_eq!(&general.slot, &fast.slot);
        // A length beyond the buffer is refused, nothing written.
        let long = crate::parse::Plain4 { len: plain.len + pad as u16 + 1, ..plain };
        let before = fast.slot.clone();
        prop_assert!(l3dsr_plain4(&fast.meta, &mut fast.slot, &long, n, dscp).is_err());
        prop_assert_eq!(&before, &fast.slot);
    }
}

//! Tests of `parse`: every kind, every malformed reason, and random bytes never panic.

use super::*;
use crate::testpkt::*;
use proptest::prelude::*;

const C4: &str = "198.18.0.1";
const V4: &str = "198.18.1.1";
const C6: &str = "2001:db8::1";
const V6: &str = "2001:db8:1::1";

#[test]
fn tcp_kinds_by_flags() {
    for (flags, kind) in [
        (0x02, Kind::Syn),
        (0x12, Kind::Normal),
        (0x10, Kind::Normal),
        (0x11, Kind::FinRst),
        (0x04, Kind::FinRst),
        (0x14, Kind::FinRst),
    ] {
        let p = ip4(a4(C4), a4(V4), TCP, &tcp(40000, 80, flags, b"hi"));
        let r = parse(&p, false).expect("parses");
        assert_eq!(r.kind, kind, "flags {flags:#x}");
        assert_eq!(r.tuple, FiveTuple::v4(a4(C4), a4(V4), 6, 40000, 80));
        assert_eq!((r.l4, r.len, r.ports), (20, p.len(), (40000, 80)));
    }
}

#[test]
fn udp_v6_and_padding_after_the_packet() {
    let mut p = ip6(a6(C6), a6(V6), UDP, &udp(5000, 53, b"q"));
    let len = p.len();
    p.extend_from_slice(&[0; 7]); // Ethernet padding is not part of the packet
    let r = parse(&p, true).expect("parses");
    assert_eq!(r.tuple, FiveTuple::v6(a6(C6), a6(V6), 17, 5000, 53));
    assert_eq!((r.kind, r.len, r.l4), (Kind::Normal, len, 40));
}

#[test]
fn other_protocols_have_no_ports() {
    let p = ip4(a4(C4), a4(V4), 47, &[0; 8]);
    let r = parse(&p, false).expect("parses");
    assert_eq!(
        (r.tuple.protocol, r.tuple.src_port, r.tuple.dst_port),
        (47, 0, 0)
    );
    // ICMP echo is informational: a normal packet with ports 0.
    let p = ip4(a4(C4), a4(V4), 1, &[8, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(parse(&p, false).expect("echo").kind, Kind::Normal);
}

#[test]
fn ipv4_fragments() {
    let l4 = tcp(40000, 80, 0x10, &[0; 16]);
    let first = ip4_with(
        a4(C4),
        a4(V4),
        TCP,
        &l4,
        Ip4Opts {
            frag: 0x2000,
            ..Default::default()
        },
    );
    let r = parse(&first, false).expect("first");
    assert_eq!(r.kind, Kind::FirstFragment);
    assert_eq!(
        (r.tuple.src_port, r.tuple.dst_port, r.ports),
        (0, 0, (40000, 80))
    );
    let later = ip4_with(
        a4(C4),
        a4(V4),
        TCP,
        &[0; 24],
        Ip4Opts {
            frag: 3,
            ..Default::default()
        },
    );
    let r = parse(&later, false).expect("later");
    assert_eq!(r.kind, Kind::LaterFragment);
    assert_eq!(r.tuple, FiveTuple::v4(a4(C4), a4(V4), 6, 0, 0));
    // A first fragment with only 8 bytes of TCP: refused (RFC 1858).
    let tiny = ip4_with(
        a4(C4),
        a4(V4),
        TCP,
        &l4[..8],
        Ip4Opts {
            frag: 0x2000,
            ..Default::default()
        },
    );
    assert_eq!(parse(&tiny, false), Err(Malformed::TinyFragment));
}

fn with_frag_header(offset_flags: u16, next: u8, rest: &[u8]) -> Vec<u8> {
    let mut f = vec![next, 0, 0, 0, 0, 0, 0, 7];
    f[2..4].copy_from_slice(&offset_flags.to_be_bytes());
    f.extend_from_slice(rest);
    ip6(a6(C6), a6(V6), 44, &f)
}

#[test]
fn ipv6_fragments_and_extension_headers() {
    let u = udp(5000, 53, &[1; 20]);
    let r = parse(&with_frag_header(1, UDP, &u), true).expect("first");
    assert_eq!(
        (r.kind, r.ports, r.l4, r.tuple.protocol),
        (Kind::FirstFragment, (5000, 53), 48, 17)
    );
    let r = parse(&with_frag_header(8 << 3, UDP, &[0; 16]), true).expect("later");
    assert_eq!(
        (r.kind, r.tuple.dst_port, r.tuple.protocol),
        (Kind::LaterFragment, 0, 17)
    );
    // Atomic fragment: a whole packet with ports.
    let r = parse(&with_frag_header(0, UDP, &u), true).expect("atomic");
    assert_eq!((r.kind, r.tuple.dst_port), (Kind::Normal, 53));
    // Hop-by-hop then destination options then TCP.
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0, TCP, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&tcp(1, 2, 0x02, &[]));
    let r = parse(&ip6(a6(C6), a6(V6), 0, &ext), true).expect("ext");
    assert_eq!((r.kind, r.l4, r.tuple.src_port), (Kind::Syn, 56, 1));
    // Nine destination-options headers: refused.
    let mut many = Vec::new();
    for _ in 0..9 {
        many.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
    }
    let n = many.len();
    many[n - 8] = 59;
    assert_eq!(
        parse(&ip6(a6(C6), a6(V6), 60, &many), true),
        Err(Malformed::BadExtensionHeaders)
    );
    // An extension header that runs past the packet.
    let p = ip6(a6(C6), a6(V6), 60, &[59, 4, 0, 0, 0, 0, 0, 0]);
    assert_eq!(parse(&p, true), Err(Malformed::BadExtensionHeaders));
}

#[test]
fn icmp4_error_names_the_flow_it_is_about() {
    // A router tells the VIP its reply VIP:80 -> client:40000 was too big.
    let reply = ip4(a4(V4), a4(C4), TCP, &tcp(80, 40000, 0x10, &[0; 100]));
    let e = icmp4_error(a4("198.18.5.5"), a4(V4), 3, 4, &reply[..28]);
    let r = parse(&e, false).expect("icmp error");
    assert_eq!(r.kind, Kind::IcmpError);
    assert_eq!(r.tuple, FiveTuple::v4(a4(C4), a4(V4), 6, 40000, 80));
    assert_eq!((r.inner_l3, r.inner_l4, r.ports), (28, 48, (80, 40000)));
    // Quoting fewer than 8 L4 bytes: refused.
    let e = icmp4_error(a4("198.18.5.5"), a4(V4), 3, 4, &reply[..27]);
    assert_eq!(parse(&e, false), Err(Malformed::BadIcmpError));
    let e = icmp4_error(a4("198.18.5.5"), a4(V4), 11, 0, &reply[..12]);
    assert_eq!(parse(&e, false), Err(Malformed::BadIcmpError));
}

#[test]
fn icmp6_error_names_the_flow_it_is_about() {
    let reply = ip6(a6(V6), a6(C6), UDP, &udp(53, 5000, &[0; 1300]));
    let e = icmp6_error(a6("2001:db8:5::5"), a6(V6), 2, 0, &reply[..1232]);
    let r = parse(&e, true).expect("too big");
    assert_eq!(r.kind, Kind::IcmpError);
    assert_eq!(r.tuple, FiveTuple::v6(a6(C6), a6(V6), 17, 5000, 53));
    assert_eq!((r.inner_l3, r.inner_l4), (48, 88));
    // Echo request is not an error.
    let p = ip6(a6(C6), a6(V6), 58, &[128, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(parse(&p, true).expect("echo").kind, Kind::Normal);
}

#[test]
fn malformed_reasons() {
    let good = ip4(a4(C4), a4(V4), UDP, &udp(1, 2, &[]));
    assert_eq!(parse(&good[..19], false), Err(Malformed::Truncated));
    assert_eq!(parse(&good, true), Err(Malformed::Truncated)); // 28 bytes < 40
    let mut b = good.clone();
    b[0] = 0x65;
    assert_eq!(parse(&b, false), Err(Malformed::BadVersion));
    b[0] = 0x44;
    assert_eq!(parse(&b, false), Err(Malformed::BadHeaderLength));
    b[0] = 0x4f;
    assert_eq!(parse(&b, false), Err(Malformed::BadHeaderLength));
    let mut b = good.clone();
    b[3] = 200;
    assert_eq!(parse(&b, false), Err(Malformed::BadTotalLength));
    b[2..4].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(parse(&b, false), Err(Malformed::BadTotalLength));
    let mut b = good.clone();
    b[2..4].copy_from_slice(&27u16.to_be_bytes());
    assert_eq!(parse(&b, false), Err(Malformed::TruncatedL4));
    let t = ip4(a4(C4), a4(V4), TCP, &tcp(1, 2, 0x02, &[]));
    assert_eq!(parse(&t[..39], false), Err(Malformed::BadTotalLength));
    let mut short = t.clone();
    short[2..4].copy_from_slice(&39u16.to_be_bytes());
    assert_eq!(parse(&short, false), Err(Malformed::TruncatedL4));
    let mut off = t.clone();
    off[32] = 0x40; // data offset 4
    assert_eq!(parse(&off, false), Err(Malformed::TruncatedL4));
    off[32] = 0xf0; // data offset 15 (60 bytes) beyond the packet
    assert_eq!(parse(&off, false), Err(Malformed::TruncatedL4));
    let mut jumbo = ip6(a6(C6), a6(V6), 0, &[59, 0, 0xc2, 4, 0, 0, 0, 0]);
    jumbo[4..6].copy_from_slice(&[0, 0]);
    assert_eq!(parse(&jumbo, true), Err(Malformed::BadTotalLength));
    assert_eq!(Malformed::NAMES.len(), Malformed::BadIcmpError as usize + 1);
    assert_eq!(Malformed::TinyFragment.name(), "tiny-fragment");
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), ip6 in any::<bool>()) {
        if let Ok(p) = parse(&bytes, ip6) {
            prop_assert!(p.len <= bytes.len());
            prop_assert!(p.l4 <= p.len);
            prop_assert!(p.inner_l4 <= p.len);
        }
    }

    #[test]
    fn mutated_packets_never_panic(at in 0usize..80, v in any::<u8>(), cut in 0usize..80, which in 0usize..4) {
        let base = match which {
            0 => ip4(a4(C4), a4(V4), TCP, &tcp(1, 2, 0x02, &[0; 20])),
            1 => ip6(a6(C6), a6(V6), UDP, &udp(1, 2, &[0; 20])),
            2 => icmp4_error(a4(C4), a4(V4), 3, 4, &ip4(a4(V4), a4(C4), UDP, &udp(3, 4, &[0; 8]))),
            _ => icmp6_error(a6(C6), a6(V6), 1, 4, &ip6(a6(V6), a6(C6), TCP, &tcp(3, 4, 0x10, &[]))),
        };
        let mut b = base.clone();
        let at = at % b.len();
        b[at] = v;
        b.truncate(b.len() - cut.min(b.len()));
        let _ = parse(&b, which % 2 == 1);
        prop_assert!(parse(&base, which % 2 == 1).is_ok());
    }
}

/// What `plain4` must agree on with `parse` for a packet it accepts.
fn agrees_with_parse(b: &[u8]) -> Result<(), TestCaseError> {
    if let Some(q) = plain4(b) {
        let p = parse(b, false).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(p, q.parsed());
    }
    Ok(())
}

#[test]
fn plain4_takes_plain_tcp_and_udp_only() {
    let t = ip4(a4(C4), a4(V4), TCP, &tcp(40000, 80, 0x10, b"hi"));
    let q = plain4(&t).expect("plain TCP");
    assert_eq!(q.tuple(), FiveTuple::v4(a4(C4), a4(V4), 6, 40000, 80));
    assert_eq!((q.kind, usize::from(q.len)), (Kind::Normal, t.len()));
    let u = ip4(a4(C4), a4(V4), UDP, &udp(5000, 53, &[0; 20]));
    assert_eq!(plain4(&u).expect("plain UDP").kind, Kind::Normal);
    // A fragment, an option, ICMP and IPv6 are not plain.
    let frag = Ip4Opts {
        frag: 0x2000,
        ..Default::default()
    };
    let first = ip4_with(a4(C4), a4(V4), TCP, &tcp(1, 2, 0x10, &[0; 16]), frag);
    assert_eq!(plain4(&first), None);
    let echo = ip4(
        a4(C4),
        a4(V4),
        1,
        &[8, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(plain4(&echo), None);
    let v6 = ip6(a6(C6), a6(V6), UDP, &udp(5000, 53, &[0; 20]));
    assert_eq!(plain4(&v6), None);
    let mut options = t.clone();
    options[0] = 0x46;
    assert_eq!(plain4(&options), None);
    // Truncated: the total length says more than the bytes given.
    assert_eq!(plain4(&t[..t.len() - 1]), None);
}

proptest! {
    /// `plain4` accepts only what `parse` accepts, and says the same of it.
    #[test]
    fn plain4_agrees_with_parse_on_mutated_packets(
        at in 0usize..60, v in any::<u8>(), at2 in 0usize..60, v2 in any::<u8>(),
        cut in 0usize..40, which in 0usize..3, flags in any::<u8>(),
    ) {
        let mut b = match which {
            0 => ip4(a4(C4), a4(V4), TCP, &tcp(40000, 80, flags, &[0; 12])),
            1 => ip4(a4(C4), a4(V4), UDP, &udp(5000, 53, &[0; 12])),
            _ => ip4(a4(C4), a4(V4), TCP, &tcp(1, 443, flags, &[])),
        };
        // Unchanged, it is plain.
        prop_assert!(plain4(&b).is_some());
        agrees_with_parse(&b)?;
        let n = b.len();
        b[at % n] = v;
        b[at2 % n] = v2;
        agrees_with_parse(&b)?;
        b.truncate(n - cut.min(n));
        agrees_with_parse(&b)?;
    }

    #[test]
    fn plain4_agrees_with_parse_on_random_bytes(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..80), protocol in prop_oneof![Just(6u8), Just(17u8)],
    ) {
        // Steer the header toward what plain4 takes, so the comparison is exercised.
        if bytes.len() > 9 {
            bytes[0] = 0x45;
            bytes[2] = 0;
            bytes[3] %= bytes.len() as u8 + 1;
            bytes[6] &= 0x40;
            bytes[7] = 0;
            bytes[9] = protocol;
        }
        agrees_with_parse(&bytes)?;
    }
}

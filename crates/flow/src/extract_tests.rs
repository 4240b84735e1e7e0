//! Unit tests of `extract` with crafted frames: every protocol, truncated and malformed ones,
//! and the ns-per-packet measurement (ignored by default).

use super::*;
use crate::key::Field as F;

const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

pub(crate) fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub(crate) fn tagged(tpid: u16, tci: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut inner = tci.to_be_bytes().to_vec();
    inner.extend_from_slice(&ethertype.to_be_bytes());
    inner.extend_from_slice(payload);
    eth(tpid, &inner)
}

/// IPv4 header (checksum left zero; extraction does not look at it) plus payload.
pub(crate) fn ip4(proto: u8, tos: u8, frag: u16, options: &[u8], payload: &[u8]) -> Vec<u8> {
    let ihl = 20 + options.len();
    let mut h = vec![0u8; 20];
    h[0] = 0x40 | (ihl / 4) as u8;
    h[1] = tos;
    h[2..4].copy_from_slice(&((ihl + payload.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&[198, 18, 0, 1]);
    h[16..20].copy_from_slice(&[198, 19, 0, 2]);
    h.extend_from_slice(options);
    h.extend_from_slice(payload);
    h
}

pub(crate) const SRC6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
pub(crate) const DST6: u128 = 0x2001_0db8_0001_0000_0000_0000_0000_0002;

/// IPv6 header (traffic class 0xb8, label 0x12345, hop limit 63) plus payload.
pub(crate) fn ip6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0..4].copy_from_slice(&(0x6000_0000u32 | 0xb8 << 20 | 0x12345).to_be_bytes());
    h[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    h[6] = next;
    h[7] = 63;
    h[8..24].copy_from_slice(&SRC6.to_be_bytes());
    h[24..40].copy_from_slice(&DST6.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

pub(crate) fn tcp(sport: u16, dport: u16, flags: u16, options: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    let off = ((20 + options.len()) / 4) as u16;
    t[12..14].copy_from_slice(&(off << 12 | flags).to_be_bytes());
    t.extend_from_slice(options);
    t.extend_from_slice(b"payload");
    t
}

pub(crate) fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(b"data");
    let len = u.len() as u16;
    u[4..6].copy_from_slice(&len.to_be_bytes());
    u
}

fn arp(op: u16) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xaa, 198, 18, 0, 7]);
    a.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xbb, 198, 18, 0, 9]);
    a
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| a << 8 | b as u128)
}

fn get(k: &FlowKey, f: F) -> u128 {
    k.get(f)
}

#[test]
fn tcp_over_ipv4() {
    let f = eth(
        0x0800,
        &ip4(6, 0xb9, 0x4000, &[], &tcp(1234, 80, 0x018, &[])),
    );
    let tun = Tunnel {
        tun_id: 5000,
        tun_src: 0xc612_0001,
        tun_dst: 0xc612_0002,
    };
    let (k, p) = extract(&f, 7, Some(&tun));
    assert_eq!(p.malformed, None);
    assert_eq!((p.l3_offset, p.l4_offset, p.l4_len), (14, 34, 27));
    assert_eq!((p.l3, p.l4, p.frag, p.vlan), (L3::Ipv4, L4::Tcp, 0, false));
    assert_eq!(get(&k, F::InPort), 7);
    assert_eq!(get(&k, F::TunId), 5000);
    assert_eq!(get(&k, F::TunSrc), 0xc612_0001);
    assert_eq!(get(&k, F::TunDst), 0xc612_0002);
    assert_eq!(get(&k, F::EthDst), mac(DST));
    assert_eq!(get(&k, F::EthSrc), mac(SRC));
    assert_eq!(get(&k, F::EthType), 0x0800);
    assert_eq!(get(&k, F::VlanTci), 0);
    assert_eq!(get(&k, F::NwSrc), 0xc612_0001);
    assert_eq!(get(&k, F::NwDst), 0xc613_0002);
    assert_eq!(get(&k, F::NwProto), 6);
    assert_eq!(get(&k, F::IpDscp), 0xb9 >> 2);
    assert_eq!(get(&k, F::NwEcn), 1);
    assert_eq!(get(&k, F::NwTtl), 64);
    assert_eq!(get(&k, F::NwFrag), 0);
    assert_eq!(get(&k, F::TpSrc), 1234);
    assert_eq!(get(&k, F::TpDst), 80);
    assert_eq!(get(&k, F::TcpFlags), 0x018);
    assert_eq!(get(&k, F::Ipv6Src), 0);
    // Into an existing key: every word is rewritten.
    let mut k2 = FlowKey { w: [!0; 19] };
    assert_eq!(extract_into(&mut k2, &f, 7, Some(&tun)), p);
    assert_eq!(k2, k);
}

#[test]
fn tcp_flags_are_twelve_bits_and_options_are_skipped() {
    let f = eth(
        0x0800,
        &ip4(6, 0, 0, &[1, 1, 1, 0], &tcp(1, 2, 0xfff, &[2, 4, 5, 0xb4])),
    );
    let (k, p) = extract(&f, 1, None);
    assert_eq!(p.l4_offset, 14 + 24);
    assert_eq!(get(&k, F::TcpFlags), 0xfff);
    assert_eq!((get(&k, F::TpSrc), get(&k, F::TpDst)), (1, 2));
}

#[test]
fn vlan_tags() {
    let u = ip4(17, 0, 0, &[], &udp(53, 5353));
    for tpid in [0x8100, 0x88a8] {
        let f = tagged(tpid, 0xa000 | 100, 0x0800, &u);
        let (k, p) = extract(&f, 1, None);
        assert!(p.vlan);
        assert_eq!(get(&k, F::VlanTci), 0xb000 | 100);
        assert_eq!(get(&k, F::VlanVid), 100);
        assert_eq!(get(&k, F::VlanPcp), 5);
        assert_eq!(get(&k, F::VlanPresent), 1);
        assert_eq!(get(&k, F::EthType), 0x0800);
        assert_eq!((p.l3_offset, p.l4_offset, p.l4), (18, 38, L4::Udp));
        assert_eq!((get(&k, F::TpSrc), get(&k, F::TpDst)), (53, 5353));
    }
    // The CFI/DEI bit of the packet is not distinguishable from "present".
    let (k, _) = extract(&tagged(0x8100, 0x1000 | 7, 0x0800, &u), 1, None);
    assert_eq!(get(&k, F::VlanTci), 0x1007);
    // Two tags: as Open vSwitch with its default vlan-limit=1, the inner tag is payload.
    let inner = tagged(0x8100, 200, 0x0800, &u);
    let f = tagged(0x88a8, 100, 0x8100, &inner[16..]);
    let (k, p) = extract(&f, 1, None);
    assert_eq!(get(&k, F::VlanTci), 0x1000 | 100);
    assert_eq!(get(&k, F::EthType), 0x8100);
    assert_eq!((p.l3, p.l3_offset, p.l4_offset), (L3::Other, 18, NO_OFFSET));
    assert_eq!(get(&k, F::NwSrc), 0);
    // A TPID with no room for the tag: dl_type is the TPID, nothing else.
    let mut f = eth(0x8100, &[0, 5, 8]);
    let (k, p) = extract(&f, 1, None);
    assert_eq!(p.malformed, Some(Malformed::VlanTruncated));
    assert_eq!((get(&k, F::EthType), get(&k, F::VlanTci)), (0x8100, 0));
    f.push(0);
    let (k, p) = extract(&f, 1, None);
    assert_eq!(p.malformed, Some(Malformed::Ipv4Truncated));
    assert_eq!((get(&k, F::EthType), get(&k, F::VlanTci)), (0x0800, 0x1005));
}

#[test]
fn llc_snap_and_802_3() {
    let mut snap = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    snap.extend_from_slice(&ip4(17, 0, 0, &[], &udp(1, 2)));
    let (k, p) = extract(&eth(snap.len() as u16, &snap), 1, None);
    assert_eq!(get(&k, F::EthType), 0x0800);
    assert_eq!((p.l3_offset, p.l4), (22, L4::Udp));
    // LLC without SNAP, SNAP of another organisation, SNAP with a length: 0x05ff.
    for llc in [
        vec![0x42, 0x42, 0x03, 0, 0, 0, 0, 0, 0],
        vec![0xaa, 0xaa, 0x03, 0, 0, 1, 0x08, 0x00],
        vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x05, 0x00],
        vec![0xaa, 0xaa],
    ] {
        let (k, p) = extract(&eth(40, &llc), 1, None);
        assert_eq!(get(&k, F::EthType), 0x05ff, "{llc:?}");
        assert_eq!(p.l3, L3::Other);
        assert_eq!(p.malformed, None);
    }
}

#[test]
fn ipv4_fragments() {
    // First fragment: L4 parsed.
    let f = eth(0x0800, &ip4(17, 0, 0x2000, &[], &udp(7, 9)));
    let (k, p) = extract(&f, 1, None);
    assert_eq!(get(&k, F::NwFrag), FRAG_ANY as u128);
    assert_eq!((get(&k, F::TpSrc), p.l4), (7, L4::Udp));
    // Later fragments (with and without MF): no L4, l4_offset still set.
    for field in [0x2001u16, 0x0001, 0x1fff] {
        let f = eth(0x0800, &ip4(17, 0, field, &[], &udp(7, 9)));
        let (k, p) = extract(&f, 1, None);
        assert_eq!(get(&k, F::NwFrag), (FRAG_ANY | FRAG_LATER) as u128);
        assert_eq!(get(&k, F::NwProto), 17);
        assert_eq!(k.w[18], 0);
        assert_eq!((p.l4, p.l4_offset, p.frag), (L4::None, 34, 3));
    }
    // DF alone is not a fragment.
    let (k, _) = extract(&eth(0x0800, &ip4(17, 0, 0x4000, &[], &udp(7, 9))), 1, None);
    assert_eq!(get(&k, F::NwFrag), 0);
}

#[test]
fn ipv4_malformed_leaves_only_l2() {
    let good = ip4(6, 0, 0, &[], &tcp(1, 2, 2, &[]));
    let cases: Vec<(Vec<u8>, Malformed)> = vec![
        (good[..19].to_vec(), Malformed::Ipv4Truncated),
        (
            {
                let mut h = good.clone();
                h[0] = 0x44;
                h
            },
            Malformed::Ipv4BadHeaderLength,
        ),
        (
            {
                let mut h = good[..24].to_vec();
                h[0] = 0x46;
                h[3] = 24;
                h.truncate(23);
                h
            },
            Malformed::Ipv4BadHeaderLength,
        ),
        (
            {
                let mut h = good.clone();
                h[3] += 1;
                h
            },
            Malformed::Ipv4BadTotalLength,
        ),
        (
            {
                let mut h = good.clone();
                h[2..4].copy_from_slice(&19u16.to_be_bytes());
                h
            },
            Malformed::Ipv4BadTotalLength,
        ),
    ];
    for (ip, why) in cases {
        let (k, p) = extract(&eth(0x0800, &ip), 3, None);
        assert_eq!(p.malformed, Some(why));
        assert_eq!((p.l3, p.l3_offset, p.l4_offset), (L3::None, 14, NO_OFFSET));
        assert_eq!(get(&k, F::EthType), 0x0800);
        assert!(k.w[10..].iter().all(|&w| w == 0), "{why:?}: {k:?}");
    }
}

#[test]
fn ipv4_padding_is_not_parsed_and_short_l4_is_counted() {
    // total length covers 4 bytes of UDP; the rest of the frame is padding.
    let mut ip = ip4(17, 0, 0, &[], &udp(7, 9));
    ip[2..4].copy_from_slice(&24u16.to_be_bytes());
    let (k, p) = extract(&eth(0x0800, &ip), 1, None);
    assert_eq!(p.malformed, Some(Malformed::UdpTruncated));
    assert_eq!((get(&k, F::NwProto), k.w[18], p.l4), (17, 0, L4::None));
    assert_eq!((p.l4_offset, p.l4_len), (34, 4));
    let short: [(u8, Malformed); 5] = [
        (6, Malformed::TcpTruncated),
        (132, Malformed::SctpTruncated),
        (1, Malformed::IcmpTruncated),
        (2, Malformed::IcmpTruncated),
        (58, Malformed::IcmpTruncated),
    ];
    for (proto, why) in short {
        let (k, p) = extract(&eth(0x0800, &ip4(proto, 0, 0, &[], &[0; 7])), 1, None);
        assert_eq!(p.malformed, Some(why));
        assert_eq!(get(&k, F::NwProto), proto as u128);
        assert_eq!(k.w[18], 0);
    }
    // TCP data offset below 5 or beyond the segment.
    for doff in [4u8, 15] {
        let mut t = tcp(1, 2, 2, &[]);
        t[12] = doff << 4;
        let (k, p) = extract(&eth(0x0800, &ip4(6, 0, 0, &[], &t)), 1, None);
        assert_eq!(p.malformed, Some(Malformed::TcpBadOffset));
        assert_eq!(k.w[18], 0);
    }
}

#[test]
fn sctp_icmp_igmp() {
    let mut s = vec![0u8; 12];
    s[0..2].copy_from_slice(&3868u16.to_be_bytes());
    s[2..4].copy_from_slice(&2905u16.to_be_bytes());
    let (k, p) = extract(&eth(0x0800, &ip4(132, 0, 0, &[], &s)), 1, None);
    assert_eq!(
        (get(&k, F::TpSrc), get(&k, F::TpDst), p.l4),
        (3868, 2905, L4::Sctp)
    );
    let icmp = [3u8, 4, 0, 0, 0, 0, 0x05, 0xdc];
    let (k, p) = extract(&eth(0x0800, &ip4(1, 0, 0, &[], &icmp)), 1, None);
    assert_eq!(
        (get(&k, F::TpSrc), get(&k, F::TpDst), p.l4),
        (3, 4, L4::Icmp)
    );
    assert_eq!(get(&k, F::TcpFlags), 0);
    let igmp = [0x16u8, 0, 0, 0, 239, 1, 1, 1];
    let (k, p) = extract(&eth(0x0800, &ip4(2, 0, 0, &[], &igmp)), 1, None);
    assert_eq!(
        (get(&k, F::TpSrc), get(&k, F::TpDst), p.l4),
        (0x16, 0, L4::Igmp)
    );
}

#[test]
fn arp_fields() {
    let (k, p) = extract(&eth(0x0806, &arp(1)), 2, None);
    assert_eq!(
        (p.l3, p.l3_offset, p.l4_offset, p.malformed),
        (L3::Arp, 14, NO_OFFSET, None)
    );
    assert_eq!(get(&k, F::EthType), 0x0806);
    assert_eq!(get(&k, F::NwProto), 1);
    assert_eq!(get(&k, F::NwSrc), 0xc612_0007);
    assert_eq!(get(&k, F::NwDst), 0xc612_0009);
    assert_eq!(get(&k, F::ArpSha), 0x0200_0000_00aa);
    assert_eq!(get(&k, F::ArpTha), 0x0200_0000_00bb);
    assert_eq!(get(&k, F::NwTtl), 0);
    // RARP too; an opcode above 255 leaves nw_proto 0 but the addresses are set.
    let (k, _) = extract(&eth(0x8035, &arp(4)), 2, None);
    assert_eq!(get(&k, F::NwProto), 4);
    let (k, _) = extract(&eth(0x0806, &arp(0x101)), 2, None);
    assert_eq!((get(&k, F::NwProto), get(&k, F::NwSrc)), (0, 0xc612_0007));
    // Truncated, or not Ethernet/IPv4.
    let (k, p) = extract(&eth(0x0806, &arp(1)[..27]), 2, None);
    assert_eq!(p.malformed, Some(Malformed::ArpTruncated));
    assert!(k.w[10..].iter().all(|&w| w == 0));
    for (at, v) in [(1usize, 6u8), (2, 0x86), (4, 8), (5, 16)] {
        let mut a = arp(1);
        a[at] = v;
        let (k, p) = extract(&eth(0x0806, &a), 2, None);
        assert_eq!(p.malformed, Some(Malformed::ArpNotEthernetIpv4));
        assert!(k.w[10..].iter().all(|&w| w == 0));
    }
}

#[test]
fn tcp_over_ipv6() {
    let f = eth(0x86dd, &ip6(6, &tcp(40000, 443, 0x002, &[])));
    let (k, p) = extract(&f, 4, None);
    assert_eq!(p.malformed, None);
    assert_eq!(
        (p.l3, p.l4, p.l3_offset, p.l4_offset),
        (L3::Ipv6, L4::Tcp, 14, 54)
    );
    assert_eq!(get(&k, F::Ipv6Src), SRC6);
    assert_eq!(get(&k, F::Ipv6Dst), DST6);
    assert_eq!(get(&k, F::IpDscp), 0xb8 >> 2);
    assert_eq!(get(&k, F::NwEcn), 0);
    assert_eq!(get(&k, F::Ipv6Label), 0x12345);
    assert_eq!(get(&k, F::NwTtl), 63);
    assert_eq!(get(&k, F::NwProto), 6);
    assert_eq!(get(&k, F::NwSrc), 0);
    assert_eq!((get(&k, F::TpSrc), get(&k, F::TpDst)), (40000, 443));
    assert_eq!(get(&k, F::TcpFlags), 2);
}

fn ext(next: u8, len8: u8) -> Vec<u8> {
    let mut e = vec![0u8; (len8 as usize + 1) * 8];
    e[0] = next;
    e[1] = len8;
    e
}

#[test]
fn ipv6_extension_headers() {
    // hop-by-hop, routing (segments left 1), destination options, AH, then UDP.
    let mut pl = ext(43, 0);
    let mut rh = ext(60, 2);
    rh[3] = 1;
    pl.extend_from_slice(&rh);
    pl.extend_from_slice(&ext(51, 1));
    let mut ah = vec![0u8; 16]; // AH length 2 => (2 + 2) * 4 = 16 bytes
    ah[0] = 17;
    ah[1] = 2;
    pl.extend_from_slice(&ah);
    let l4_at = 14 + 40 + pl.len();
    pl.extend_from_slice(&udp(546, 547));
    let (k, p) = extract(&eth(0x86dd, &ip6(0, &pl)), 1, None);
    assert_eq!(p.malformed, None);
    assert!(p.ipv6_routing);
    assert_eq!((p.l4, p.l4_offset as usize), (L4::Udp, l4_at));
    assert_eq!(get(&k, F::NwProto), 17);
    assert_eq!((get(&k, F::TpSrc), get(&k, F::TpDst)), (546, 547));
    // An unknown next header ends the walk (No Next Header, ESP...).
    let (k, p) = extract(&eth(0x86dd, &ip6(59, &[0; 8])), 1, None);
    assert_eq!((get(&k, F::NwProto), p.l4, p.l4_offset), (59, L4::None, 54));
    // A truncated extension header: only the addresses.
    for pl in [ext(6, 1)[..15].to_vec(), vec![6u8, 0, 0, 0, 0, 0, 0]] {
        let (k, p) = extract(&eth(0x86dd, &ip6(60, &pl)), 1, None);
        assert_eq!(p.malformed, Some(Malformed::Ipv6ExtensionTruncated));
        assert_eq!(get(&k, F::Ipv6Src), SRC6);
        assert_eq!(get(&k, F::Ipv6Dst), DST6);
        assert_eq!((k.w[15], k.w[18], p.l4_offset), (0, 0, NO_OFFSET));
    }
}

fn frag6(next: u8, offlg: u16) -> Vec<u8> {
    let mut f = vec![next, 0, 0, 0, 0, 0, 0x12, 0x34];
    f[2..4].copy_from_slice(&offlg.to_be_bytes());
    f
}

#[test]
fn ipv6_fragments() {
    // First fragment (M=1, offset 0): L4 parsed.
    let mut pl = frag6(17, 1);
    pl.extend_from_slice(&udp(1, 2));
    let (k, p) = extract(&eth(0x86dd, &ip6(44, &pl)), 1, None);
    assert_eq!(get(&k, F::NwFrag), 1);
    assert_eq!(
        (get(&k, F::NwProto), get(&k, F::TpSrc), p.l4),
        (17, 1, L4::Udp)
    );
    assert_eq!(p.l4_offset, 14 + 48);
    // Atomic fragment (offset 0, M=0): not a fragment.
    let mut pl = frag6(17, 0);
    pl.extend_from_slice(&udp(1, 2));
    let (k, _) = extract(&eth(0x86dd, &ip6(44, &pl)), 1, None);
    assert_eq!((get(&k, F::NwFrag), get(&k, F::TpSrc)), (0, 1));
    // Later fragment: nw_proto 44, no L4.
    let mut pl = frag6(17, 0x00a8 | 1);
    pl.extend_from_slice(&udp(1, 2));
    let (k, p) = extract(&eth(0x86dd, &ip6(44, &pl)), 1, None);
    assert_eq!(get(&k, F::NwFrag), 3);
    assert_eq!((get(&k, F::NwProto), k.w[18], p.l4), (44, 0, L4::None));
    assert_eq!(get(&k, F::Ipv6Label), 0x12345);
}

#[test]
fn ipv6_malformed() {
    let good = ip6(17, &udp(1, 2));
    let (k, p) = extract(&eth(0x86dd, &good[..39]), 1, None);
    assert_eq!(p.malformed, Some(Malformed::Ipv6Truncated));
    assert_eq!(get(&k, F::Ipv6Src), 0);
    let mut bad = good.clone();
    bad[5] += 1;
    let (k, p) = extract(&eth(0x86dd, &bad), 1, None);
    assert_eq!(p.malformed, Some(Malformed::Ipv6BadPayloadLength));
    assert!(k.w[10..].iter().all(|&w| w == 0));
    // Padding after the payload is not parsed.
    let mut short = ip6(17, &udp(1, 2)[..6]);
    short.extend_from_slice(&[0; 20]);
    let (_, p) = extract(&eth(0x86dd, &short), 1, None);
    assert_eq!(p.malformed, Some(Malformed::UdpTruncated));
}

fn nd(kind: u8, opts: &[(u8, [u8; 6])]) -> Vec<u8> {
    let mut i = vec![kind, 0, 0, 0, 0x60, 0, 0, 0];
    i.extend_from_slice(&DST6.to_be_bytes());
    for (t, m) in opts {
        i.extend_from_slice(&[*t, 1]);
        i.extend_from_slice(m);
    }
    i
}

#[test]
fn icmp6_and_neighbour_discovery() {
    let echo = [128u8, 0, 0, 0, 0, 1, 0, 1];
    let (k, p) = extract(&eth(0x86dd, &ip6(58, &echo)), 1, None);
    assert_eq!(
        (get(&k, F::TpSrc), get(&k, F::TpDst), p.l4),
        (128, 0, L4::Icmp6)
    );
    let m1 = [2, 0, 0, 0, 0, 0x11];
    let m2 = [2, 0, 0, 0, 0, 0x22];
    let (k, p) = extract(&eth(0x86dd, &ip6(58, &nd(135, &[(1, m1)]))), 1, None);
    assert_eq!((get(&k, F::TpSrc), p.malformed), (135, None));
    assert_eq!((get(&k, F::ArpSha), get(&k, F::ArpTha)), (mac(m1), 0));
    let (k, _) = extract(
        &eth(0x86dd, &ip6(58, &nd(136, &[(2, m2), (1, m1)]))),
        1,
        None,
    );
    assert_eq!((get(&k, F::ArpSha), get(&k, F::ArpTha)), (mac(m1), mac(m2)));
    // A repeated option: both zero, counted; type and code kept.
    let (k, p) = extract(
        &eth(0x86dd, &ip6(58, &nd(136, &[(2, m2), (2, m1)]))),
        1,
        None,
    );
    assert_eq!((get(&k, F::ArpSha), get(&k, F::ArpTha)), (0, 0));
    assert_eq!(
        (get(&k, F::TpSrc), p.malformed),
        (136, Some(Malformed::NdBadOption))
    );
    // A zero-length option ends the walk, keeping what was found.
    let mut b = nd(135, &[(1, m1)]);
    b.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
    let (k, p) = extract(&eth(0x86dd, &ip6(58, &b)), 1, None);
    assert_eq!(
        (get(&k, F::ArpSha), p.malformed),
        (mac(m1), Some(Malformed::NdBadOption))
    );
    // A non-zero code is not ND; no target: no options.
    let mut b = nd(135, &[(1, m1)]);
    b[1] = 1;
    let (k, _) = extract(&eth(0x86dd, &ip6(58, &b)), 1, None);
    assert_eq!((get(&k, F::ArpSha), get(&k, F::TpDst)), (0, 1));
    let (k, p) = extract(&eth(0x86dd, &ip6(58, &nd(135, &[])[..20])), 1, None);
    assert_eq!(
        (get(&k, F::ArpSha), p.l4, p.malformed),
        (0, L4::Icmp6, None)
    );
}

#[test]
fn short_frames() {
    for n in 0..14 {
        let (k, p) = extract(&[0xff; 13][..n.min(13)], 9, None);
        assert_eq!(
            p,
            Parsed {
                malformed: Some(Malformed::EthernetTooShort),
                ..Parsed::NONE
            }
        );
        assert_eq!(get(&k, F::InPort), 9);
        assert!(k.w[1..].iter().all(|&w| w == 0));
    }
    let (k, p) = extract(&eth(0x0800, &[]), 1, None);
    assert_eq!(p.malformed, Some(Malformed::Ipv4Truncated));
    assert_eq!(get(&k, F::EthType), 0x0800);
    let (k, p) = extract(&eth(0x88cc, &[]), 1, None);
    assert_eq!(
        (p.l3, p.malformed, get(&k, F::EthType)),
        (L3::Other, None, 0x88cc)
    );
}

/// Every prefix of every test frame: no panic, offsets inside the frame, a complete L4 header.
#[test]
fn every_truncation_is_safe() {
    let mut frames = vec![
        eth(
            0x0800,
            &ip4(6, 0, 0, &[1, 1, 1, 0], &tcp(1, 2, 0x12, &[1, 1, 1, 1])),
        ),
        tagged(0x8100, 5, 0x0800, &ip4(17, 0, 0, &[], &udp(1, 2))),
        eth(0x0806, &arp(2)),
        eth(0x86dd, &ip6(58, &nd(135, &[(1, [1; 6]), (2, [2; 6])]))),
        eth(
            0x86dd,
            &ip6(0, &[ext(44, 0), frag6(6, 1), tcp(1, 2, 2, &[])].concat()),
        ),
    ];
    frames.push(tagged(0x88a8, 5, 0x8100, &frames[1][14..]));
    let tunnel = Tunnel {
        tun_id: 7,
        tun_src: 1,
        tun_dst: 2,
    };
    for f in &frames {
        for n in 0..=f.len() {
            // The words extract_to says it wrote cover every non-zero word.
            for t in [None, Some(&tunnel)] {
                let (mut k, mut p) = (FlowKey::ZERO, Parsed::NONE);
                let words = extract_to(&mut k, &mut p, &f[..n], 1, t);
                assert_eq!(crate::cache::nonzero_words(&k) & !words, 0, "{n} bytes");
            }
            let (_, p) = extract(&f[..n], 1, None);
            if p.l3_offset != NO_OFFSET {
                assert!(p.l3_offset as usize <= n);
            }
            if p.l4_offset != NO_OFFSET {
                assert!(p.l4_offset as usize + p.l4_len as usize <= n);
            }
            let need = match p.l4 {
                L4::None => 0,
                L4::Tcp => 20,
                L4::Sctp => 12,
                _ => 8,
            };
            assert!(p.l4 == L4::None || p.l4_len as usize >= need);
        }
    }
}

/// The fast path of the usual shape: taken for untagged unfragmented IPv4 with a 20-byte header
/// and a complete TCP or UDP header (padding allowed), declined for everything else, and equal
/// to `extract_to` wherever taken, on every truncation and every single-byte change of a set of
/// frames around that shape.
#[test]
fn the_fast_path_is_extraction_where_it_applies() {
    use crate::extract::{extract_ip4_l4, ip4_key, IP4_L4_MAP};
    let taken = [
        eth(0x0800, &ip4(6, 0x2e, 0, &[], &tcp(1, 2, 0x12, &[]))),
        eth(
            0x0800,
            &ip4(6, 0, 0, &[], &tcp(80, 443, 0xfff, &[1, 1, 1, 0])),
        ),
        eth(0x0800, &ip4(17, 3, 0, &[], &udp(53, 5353))),
        eth(0x0800, &ip4(17, 0, 0x4000, &[], &udp(1, 2))), // DF is not a fragment
        [eth(0x0800, &ip4(17, 0, 0, &[], &udp(1, 2))), vec![0; 9]].concat(), // padding
    ];
    let declined = [
        eth(0x0800, &ip4(6, 0, 0, &[1, 1, 1, 0], &tcp(1, 2, 0, &[]))), // IP options
        tagged(0x8100, 5, 0x0800, &ip4(17, 0, 0, &[], &udp(1, 2))),
        eth(0x0800, &ip4(17, 0, 0x2000, &[], &udp(1, 2))), // MF
        eth(0x0800, &ip4(17, 0, 0x0001, &[], &udp(1, 2))), // later fragment
        eth(0x0800, &ip4(1, 0, 0, &[], &[8, 0, 0, 0, 0, 0, 0, 0])), // ICMP
        eth(0x0800, &ip4(132, 0, 0, &[], &[0; 12])),
        eth(0x86dd, &ip6(6, &tcp(1, 2, 2, &[]))),
    ];
    let agree = |f: &[u8], expect: Option<bool>| {
        let (key, p) = extract(f, 3, None);
        let mut fp = Parsed::NONE;
        match extract_ip4_l4(f, 3, &mut fp) {
            Some(w) => {
                assert_eq!(ip4_key(&w), key, "{f:02x?}");
                assert_eq!(fp, p, "{f:02x?}");
                let (mut k, mut p2) = (FlowKey::ZERO, Parsed::NONE);
                assert_eq!(extract_to(&mut k, &mut p2, f, 3, None), IP4_L4_MAP);
                assert_ne!(expect, Some(false), "taken: {f:02x?}");
            }
            None => {
                assert_eq!(fp, Parsed::NONE);
                assert_ne!(expect, Some(true), "declined: {f:02x?}");
            }
        }
    };
    for (frames, expect) in [(&taken[..], true), (&declined[..], false)] {
        for f in frames {
            agree(f, Some(expect));
            for n in 0..f.len() {
                agree(&f[..n], None);
                for v in [0u8, 1, 0x45, 0x50, 0xff] {
                    let mut g = f.clone();
                    g[n] = v;
                    agree(&g, None);
                }
            }
        }
    }
}

/// ns per packet for a 64-byte TCP/IPv4 frame (`cargo test -p vecplane-flow --release --lib
/// extract_ns_per_packet -- --ignored --nocapture`).
#[test]
#[ignore]
fn extract_ns_per_packet() {
    let mut f = eth(0x0800, &ip4(6, 0, 0x4000, &[], &tcp(1234, 80, 0x10, &[])));
    f.resize(60, 0);
    let mut frames = Vec::new();
    for i in 0..256u16 {
        let mut g = f.clone();
        g[34..36].copy_from_slice(&i.to_be_bytes());
        frames.push(g);
    }
    let mut key = FlowKey::ZERO;
    let rounds = 40_000;
    let mut sum = 0u64;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        for g in &frames {
            let p = extract_into(&mut key, std::hint::black_box(g), 1, None);
            sum = sum.wrapping_add(key.w[18]).wrapping_add(p.l4_offset as u64);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * frames.len()) as f64;
    std::hint::black_box(sum);
    println!("extract: {ns:.2} ns per 64-byte TCP/IPv4 frame");
}

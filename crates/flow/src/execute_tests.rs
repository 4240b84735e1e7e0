//! Unit tests of `execute`: every settable field on every protocol, checked by re-extracting
//! the key and by recomputing every checksum from scratch; refused writes; VLAN push/pop.

use super::*;
use crate::extract::extract;
use crate::extract::tests::{eth, ip4, ip6, tagged, tcp, udp};
use crate::key::{Field as F, FlowKey, FRAG_LATER};
use packet::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};

/// Fill every checksum of `f` from scratch (IPv4 header, TCP, UDP, ICMP, IGMP, ICMPv6, SCTP).
pub(crate) fn fill_checksums(f: &mut [u8]) {
    let (_, p) = extract(f, 1, None);
    if p.l3 == L3::Ipv4 {
        let l3 = p.l3_offset as usize;
        let ihl = (f[l3] & 15) as usize * 4;
        f[l3 + 10..l3 + 12].fill(0);
        let c = !fold(sum(0, &f[l3..l3 + ihl]));
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    if p.l4 == L4::Sctp {
        sctp_fix_crc(f, &p);
        return;
    }
    let Some(at) = l4_checksum_at(p.l4) else {
        return;
    };
    let (l4, end) = (
        p.l4_offset as usize,
        p.l4_offset as usize + p.l4_len as usize,
    );
    f[l4 + at..l4 + at + 2].fill(0);
    let mut c = !fold(sum(pseudo(f, &p), &f[l4..end]));
    if p.l4 == L4::Udp && c == 0 {
        c = 0xffff;
    }
    f[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
}

fn pseudo(f: &[u8], p: &Parsed) -> u64 {
    let l3 = p.l3_offset as usize;
    let proto = match p.l4 {
        L4::Tcp => 6,
        L4::Udp => 17,
        L4::Icmp6 => 58,
        _ => return 0,
    };
    let len = p.l4_len;
    if p.l3 == L3::Ipv4 {
        let a = |at: usize| [f[at], f[at + 1], f[at + 2], f[at + 3]];
        pseudo_header_v4(a(l3 + 12), a(l3 + 16), proto, len)
    } else {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&f[l3 + 8..l3 + 24]);
        d.copy_from_slice(&f[l3 + 24..l3 + 40]);
        if p.ipv6_routing {
            // The test frames' routing header comes first and holds one address: the final
            // destination, which the pseudo-header uses.
            d.copy_from_slice(&f[l3 + 48..l3 + 64]);
        }
        pseudo_header_v6(s, d, proto, len as u32)
    }
}

/// Every checksum of `f` verified from scratch.
pub(crate) fn checksums_ok(f: &[u8]) -> Result<(), String> {
    let (_, p) = extract(f, 1, None);
    if p.l3 == L3::Ipv4 {
        let l3 = p.l3_offset as usize;
        let ihl = (f[l3] & 15) as usize * 4;
        if fold(sum(0, &f[l3..l3 + ihl])) != 0xffff {
            return Err("IPv4 header checksum".into());
        }
    }
    let (l4, end) = (
        p.l4_offset as usize,
        p.l4_offset as usize + p.l4_len as usize,
    );
    if p.l4 == L4::Sctp {
        let mut s = f[l4..end].to_vec();
        let want = [s[8], s[9], s[10], s[11]];
        s[8..12].fill(0);
        return (crc32c(&s).to_le_bytes() == want)
            .then_some(())
            .ok_or_else(|| "SCTP CRC32c".into());
    }
    if l4_checksum_at(p.l4).is_none() || p.l4 == L4::Udp && f[l4 + 6..l4 + 8] == [0, 0] {
        return Ok(());
    }
    if fold(sum(pseudo(f, &p), &f[l4..end])) != 0xffff {
        return Err(format!("{:?} checksum", p.l4));
    }
    Ok(())
}

fn icmp4() -> Vec<u8> {
    ip4(1, 0, 0, &[], &[8, 0, 0, 0, 0x12, 0x34, 0, 1, 0xde, 0xad])
}

fn sctp() -> Vec<u8> {
    let mut s = vec![0u8; 28];
    s[0..2].copy_from_slice(&5000u16.to_be_bytes());
    s[2..4].copy_from_slice(&5001u16.to_be_bytes());
    s[12] = 1; // INIT chunk
    s[15] = 16;
    s
}

/// Frames with valid checksums, one per protocol.
pub(crate) fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let mut rh = vec![6u8, 2, 0, 1, 0, 0, 0, 0];
    rh.extend_from_slice(&0x2001_0db8_00ff_0000_0000_0000_0000_0009u128.to_be_bytes());
    rh.extend_from_slice(&tcp(1, 2, 0x10, &[]));
    let mut v = vec![
        (
            "tcp4",
            eth(
                0x0800,
                &ip4(6, 0x28, 0x4000, &[], &tcp(1234, 80, 0x18, &[])),
            ),
        ),
        (
            "udp4",
            eth(0x0800, &ip4(17, 0, 0, &[7, 4, 0, 0], &udp(53, 33333))),
        ),
        (
            "udp4-frag1",
            eth(0x0800, &ip4(17, 0, 0x2000, &[], &udp(53, 9))),
        ),
        ("icmp4", eth(0x0800, &icmp4())),
        (
            "igmp",
            eth(0x0800, &ip4(2, 0, 0, &[], &[0x16, 0, 0, 0, 239, 1, 2, 3])),
        ),
        ("sctp4", eth(0x0800, &ip4(132, 0, 0, &[], &sctp()))),
        (
            "tcp4-vlan",
            tagged(
                0x8100,
                0x2000 | 42,
                0x0800,
                &ip4(6, 0, 0, &[], &tcp(9, 10, 2, &[])),
            ),
        ),
        ("tcp6", eth(0x86dd, &ip6(6, &tcp(40000, 443, 0x02, &[])))),
        ("udp6", tagged(0x88a8, 7, 0x86dd, &ip6(17, &udp(546, 547)))),
        (
            "icmp6",
            eth(0x86dd, &ip6(58, &[128, 0, 0, 0, 0, 1, 0, 1, 1, 2, 3])),
        ),
        ("tcp6-routing", eth(0x86dd, &ip6(43, &rh))),
        ("sctp6", eth(0x86dd, &ip6(132, &sctp()))),
    ];
    for (_, f) in &mut v {
        fill_checksums(f);
        checksums_ok(f).expect("built right");
    }
    let mut z = eth(0x0800, &ip4(17, 0, 0, &[], &udp(1, 2)));
    fill_checksums(&mut z);
    z[34 + 6..34 + 8].fill(0);
    v.push(("udp4-nocsum", z));
    v
}

/// A tiny deterministic generator for values.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u128 {
        let mut x = 0u128;
        for _ in 0..2 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x = x << 64 | (self.0 >> 11) as u128 ^ (self.0 as u128) << 40;
        }
        x
    }
}

const SETTABLE: [F; 16] = [
    F::EthSrc,
    F::EthDst,
    F::VlanTci,
    F::VlanVid,
    F::VlanPcp,
    F::NwSrc,
    F::NwDst,
    F::Ipv6Src,
    F::Ipv6Dst,
    F::IpDscp,
    F::NwEcn,
    F::NwTtl,
    F::Ipv6Label,
    F::TpSrc,
    F::TpDst,
    F::ArpSha,
];

#[test]
fn every_set_keeps_checksums_right_and_changes_exactly_its_field() {
    let mut rng = Lcg(7);
    let mut applied = 0;
    for (name, frame) in frames() {
        for field in SETTABLE {
            for round in 0..8 {
                let mut f = frame.clone();
                let (key, p) = extract(&f, 1, None);
                let value = rng.next();
                let mask = if round % 2 == 0 {
                    field.all_ones()
                } else {
                    rng.next()
                };
                let r = set_field(&mut f, &p, field, value, mask);
                let (after, p2) = extract(&f, 1, None);
                match r {
                    Ok(()) => {
                        applied += 1;
                        let mut want: FlowKey = key;
                        let m = if field == F::VlanTci {
                            mask & !0x1000
                        } else {
                            mask
                        };
                        want.set_masked(field, value, m & field.all_ones());
                        if matches!(p.l4, L4::Icmp | L4::Icmp6 | L4::Igmp) && field == F::TpSrc {
                            // ICMP types are 8 bits.
                            want.set(F::TpSrc, want.get(F::TpSrc) & 0xff);
                        }
                        if matches!(p.l4, L4::Icmp | L4::Icmp6 | L4::Igmp) && field == F::TpDst {
                            want.set(F::TpDst, want.get(F::TpDst) & 0xff);
                        }
                        assert_eq!(after, want, "{name} {field:?} {value:#x}/{mask:#x}");
                        assert_eq!(p2, p, "{name} {field:?}");
                        checksums_ok(&f).unwrap_or_else(|e| panic!("{name} {field:?}: {e}"));
                    }
                    Err(e) => {
                        assert_eq!(f, frame, "{name} {field:?}: refused but changed");
                        assert!(matches!(e, ExecError::NoHeader(..)), "{name} {field:?} {e}");
                    }
                }
            }
        }
    }
    assert!(applied > 600, "{applied}");
}

#[test]
fn refused_writes_leave_the_packet_alone() {
    let all = frames();
    let get = |n: &str| {
        all.iter()
            .find(|(x, _)| *x == n)
            .map(|(_, f)| f.clone())
            .expect("frame")
    };
    let cases: Vec<(Vec<u8>, F, ExecError)> = vec![
        (get("tcp6"), F::NwSrc, ExecError::NoHeader(F::NwSrc, "IPv6")),
        (
            get("tcp4"),
            F::Ipv6Dst,
            ExecError::NoHeader(F::Ipv6Dst, "IPv4"),
        ),
        (
            get("tcp4"),
            F::Ipv6Label,
            ExecError::NoHeader(F::Ipv6Label, "IPv4"),
        ),
        (
            get("tcp4"),
            F::VlanVid,
            ExecError::NoHeader(F::VlanVid, "untagged"),
        ),
        (get("tcp4"), F::EthType, ExecError::NotWritable(F::EthType)),
        (
            get("tcp4"),
            F::TcpFlags,
            ExecError::NotWritable(F::TcpFlags),
        ),
        (get("tcp4"), F::NwProto, ExecError::NotWritable(F::NwProto)),
        (get("tcp4"), F::InPort, ExecError::NotWritable(F::InPort)),
        (get("tcp4"), F::TunId, ExecError::NotWritable(F::TunId)),
        (
            get("tcp4-vlan"),
            F::VlanPresent,
            ExecError::NotWritable(F::VlanPresent),
        ),
        (
            get("tcp4"),
            F::ArpTha,
            ExecError::NoHeader(F::ArpTha, "IPv4"),
        ),
        (
            eth(0x88cc, &[0; 40]),
            F::NwTtl,
            ExecError::NoHeader(F::NwTtl, "not IP or ARP"),
        ),
        (
            eth(0x88cc, &[0; 40]),
            F::NwProto,
            ExecError::NoHeader(F::NwProto, "not IP or ARP"),
        ),
        (
            vec![0; 12],
            F::EthDst,
            ExecError::NoHeader(F::EthDst, "no network header"),
        ),
    ];
    for (frame, field, want) in cases {
        let mut f = frame.clone();
        let (_, p) = extract(&f, 1, None);
        assert_eq!(set_field(&mut f, &p, field, 1, !0), Err(want));
        assert_eq!(f, frame);
        assert!(!want.to_string().is_empty());
        assert!(want.index() < ExecError::KINDS);
    }
    // Transport fields of a later fragment, a truncated segment, SCTP in a first fragment.
    let mut later = get("udp4");
    later[14 + 6] = 0x20;
    later[14 + 7] = 0x10;
    let mut short = eth(0x0800, &ip4(6, 0, 0, &[], &tcp(1, 2, 2, &[])[..19]));
    let mut frag_sctp = eth(0x0800, &ip4(132, 0, 0x2000, &[], &sctp()));
    for f in [&mut later, &mut short] {
        let (_, p) = extract(f, 1, None);
        assert!(matches!(
            set_field(f, &p, F::TpDst, 1, !0),
            Err(ExecError::NoHeader(F::TpDst, _))
        ));
    }
    let (_, p) = extract(&frag_sctp, 1, None);
    assert_eq!(p.frag & FRAG_LATER, 0);
    assert_eq!(
        set_field(&mut frag_sctp, &p, F::TpSrc, 1, !0),
        Err(ExecError::SctpFragment(F::TpSrc))
    );
    // A `Parsed` that does not fit the bytes (misuse) is refused, not a panic.
    let (_, p) = extract(&get("tcp6"), 1, None);
    let mut tiny = vec![0u8; 30];
    assert!(set_field(&mut tiny, &p, F::Ipv6Src, 1, !0).is_err());
    assert!(set_field(&mut tiny, &p, F::TpSrc, 1, !0).is_err());
}

#[test]
fn udp_zero_checksum_stays_zero_and_computed_zero_is_sent_as_ffff() {
    let all = frames();
    let z = all
        .iter()
        .find(|(n, _)| *n == "udp4-nocsum")
        .map(|(_, f)| f.clone())
        .expect("frame");
    let mut f = z.clone();
    let (_, p) = extract(&f, 1, None);
    set_field(&mut f, &p, F::NwSrc, 0xc612_0505, !0).expect("set");
    set_field(&mut f, &p, F::TpDst, 999, !0).expect("set");
    assert_eq!(f[40..42], [0, 0]);
    // Find a port that makes the checksum come out as zero: it must be sent as 0xffff.
    let mut base = all
        .iter()
        .find(|(n, _)| *n == "udp4")
        .map(|(_, f)| f.clone())
        .expect("f");
    let (_, p) = extract(&base, 1, None);
    let at = p.l4_offset as usize;
    let c = rd16(&base, at + 6);
    let old = rd16(&base, at);
    // update16(c, old, new) == 0 when new = old + !c... search it.
    let new = (0..=u16::MAX).find(|&n| update16(c, old, n) == 0);
    let new = new.expect("some port zeroes the sum");
    set_field(&mut base, &p, F::TpSrc, new as u128, !0).expect("set");
    assert_eq!(rd16(&base, at + 6), 0xffff);
    checksums_ok(&base).expect("0xffff is a valid zero");
}

#[test]
fn arp_fields_are_written() {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&[
        2, 0, 0, 0, 0, 0xaa, 198, 18, 0, 7, 2, 0, 0, 0, 0, 0xbb, 198, 18, 0, 9,
    ]);
    let frame = eth(0x0806, &a);
    for (field, v) in [
        (F::NwSrc, 0xc612_0101u128),
        (F::NwDst, 0xc612_0202),
        (F::ArpSha, 0x0200_0000_0001),
        (F::ArpTha, 0x0200_0000_0002),
        (F::NwProto, 2),
    ] {
        let mut f = frame.clone();
        let (k, p) = extract(&f, 1, None);
        set_field(&mut f, &p, field, v, !0).expect("ARP field");
        let (k2, _) = extract(&f, 1, None);
        let mut want = k;
        want.set(field, v);
        assert_eq!(k2, want, "{field:?}");
    }
    let mut f = frame.clone();
    let (_, p) = extract(&f, 1, None);
    assert!(matches!(
        set_field(&mut f, &p, F::NwTtl, 1, !0),
        Err(ExecError::NoHeader(F::NwTtl, "ARP"))
    ));
}

fn slot_with(frame: &[u8], headroom: usize) -> (Vec<u8>, usize, usize) {
    let mut slot = vec![0xeeu8; headroom + frame.len() + 16];
    slot[headroom..headroom + frame.len()].copy_from_slice(frame);
    (slot, headroom, frame.len())
}

/// An IPv4 later fragment's payload gets the address change where a TCP (offset 16) or a
/// non-zero UDP (offset 6) checksum would be, as Open vSwitch's `packet_set_ipv4_addr` does
/// (found by `ovs_diff` with 10,000 frames); other protocols, short payloads and a zero UDP
/// "checksum" are left alone.
#[test]
fn a_later_fragment_is_updated_where_open_vswitch_updates_it() {
    let payload = [0x5au8; 24];
    let cases = [(6u8, 16usize, true), (17, 6, true), (1, 2, false)];
    for (proto, at, changes) in cases {
        let mut f = eth(0x0800, &ip4(proto, 0, 0x20b9, &[], &payload));
        let (_, p) = extract(&f, 1, None);
        assert_ne!(p.frag & FRAG_LATER, 0, "a later fragment");
        set_field(&mut f, &p, F::NwDst, 0xc612_0300, !0).expect("set");
        let c = u16::from_be_bytes([f[34 + at], f[35 + at]]);
        if changes {
            assert_ne!(c, 0x5a5a, "protocol {proto}");
        } else {
            assert_eq!(c, 0x5a5a, "protocol {proto}");
        }
    }
    // A zero UDP "checksum" stays zero; a payload shorter than a header is not touched.
    let mut zero = payload;
    zero[6] = 0;
    zero[7] = 0;
    let mut f = eth(0x0800, &ip4(17, 0, 0x20b9, &[], &zero));
    let (_, p) = extract(&f, 1, None);
    set_field(&mut f, &p, F::NwDst, 0xc612_0300, !0).expect("set");
    assert_eq!([f[40], f[41]], [0, 0]);
    let mut f = eth(0x0800, &ip4(6, 0, 0x20b9, &[], &payload[..12]));
    let before = f.clone();
    let (_, p) = extract(&f, 1, None);
    set_field(&mut f, &p, F::NwDst, 0xc612_0300, !0).expect("set");
    assert_eq!(f[34..], before[34..], "12 bytes: no TCP header's worth");
}

/// `TPID_AS_RECEIVED` re-tags with the TPID the frame arrived with, whatever was pushed or
/// popped since; an untagged frame gets 0x8100.
#[test]
fn push_as_received_keeps_the_arrival_tpid() {
    let ip = ip4(17, 0, 0, &[], &udp(53, 33333));
    for (arrived, want) in [
        (None, 0x8100u16),
        (Some(0x8100u16), 0x8100),
        (Some(0x88a8), 0x88a8),
    ] {
        let frame = match arrived {
            Some(tpid) => tagged(tpid, 0x2000 | 10, 0x0800, &ip),
            None => eth(0x0800, &ip),
        };
        let (mut slot, start, len) = slot_with(&frame, 8);
        let mut f = SlotFrame {
            slot: &mut slot,
            start,
            len,
        };
        let (_, mut p) = extract(f.bytes_mut(), 3, None);
        if arrived.is_some() {
            pop_vlan(&mut f, &mut p).expect("pop");
        }
        push_vlan(&mut f, &mut p, TPID_AS_RECEIVED, 3).expect("push");
        let b = f.bytes_mut();
        assert_eq!(u16::from_be_bytes([b[12], b[13]]), want, "{arrived:?}");
        assert_eq!(u16::from_be_bytes([b[14], b[15]]), 3, "{arrived:?}");
    }
}

#[test]
fn push_and_pop_vlan() {
    for (name, frame) in frames() {
        let (mut slot, start, len) = slot_with(&frame, 8);
        let mut f = SlotFrame {
            slot: &mut slot,
            start,
            len,
        };
        let (k, mut p) = extract(f.bytes_mut(), 3, None);
        let was_tagged = p.vlan;
        push_vlan(&mut f, &mut p, 0x8100, 0x3000 | 99).expect("push");
        assert_eq!((f.start, f.len), (start - 4, len + 4));
        let (k2, p2) = extract(f.bytes_mut(), 3, None);
        assert_eq!(
            k2.get(F::VlanTci),
            0x3000 | 99,
            "{name}: the pushed CFI bit is cleared, the key's marks \"present\""
        );
        assert!(p.vlan);
        if !was_tagged {
            // One tag, parsed as before: the same key apart from the tag, offsets moved by 4.
            let mut want = k;
            want.set(F::VlanTci, 0x3000 | 99);
            assert_eq!(k2, want, "{name}");
            let pushed = Parsed {
                received_tpid: 0x8100,
                ..p
            };
            assert_eq!(p2, pushed, "{name}");
        }
        // A set after the push lands in the right place.
        let r = set_field(f.bytes_mut(), &p, F::NwTtl, 9, !0);
        if r.is_ok() {
            checksums_ok(f.bytes_mut()).expect("after push + set");
        }
        pop_vlan(&mut f, &mut p).expect("pop");
        assert_eq!((f.start, f.len), (start, len));
        assert_eq!(p.vlan, was_tagged);
        let mut back = frame.clone();
        if r.is_ok() {
            let (_, pb) = extract(&back, 3, None);
            set_field(&mut back, &pb, F::NwTtl, 9, !0).expect("same set");
        }
        assert_eq!(f.bytes_mut(), &back[..], "{name}");
        assert_eq!(
            slot[..4],
            [0xee; 4],
            "{name}: nothing written before the frame"
        );
    }
}

#[test]
fn push_pop_refusals() {
    let frame = frames().remove(0).1;
    let (mut slot, start, len) = slot_with(&frame, 3);
    let mut f = SlotFrame {
        slot: &mut slot,
        start,
        len,
    };
    let (_, mut p) = extract(f.bytes_mut(), 1, None);
    assert_eq!(push_vlan(&mut f, &mut p, 0x8100, 1), Err(ExecError::NoRoom));
    assert_eq!(
        push_vlan(&mut f, &mut p, 0x0800, 1),
        Err(ExecError::BadTpid(0x0800))
    );
    assert_eq!(pop_vlan(&mut f, &mut p), Err(ExecError::NoVlan));
    assert_eq!(f.bytes_mut(), &frame[..]);
    let (mut slot, _, _) = slot_with(&frame[..13], 8);
    let mut f = SlotFrame {
        slot: &mut slot,
        start: 8,
        len: 13,
    };
    let (_, mut p) = extract(f.bytes_mut(), 1, None);
    assert_eq!(push_vlan(&mut f, &mut p, 0x8100, 1), Err(ExecError::NoRoom));
    // A lying SlotFrame (past the slot) is refused, not a panic.
    let mut tiny = [0u8; 20];
    let mut f = SlotFrame {
        slot: &mut tiny,
        start: 8,
        len: 100,
    };
    assert!(f.bytes_mut().is_empty());
    assert_eq!(push_vlan(&mut f, &mut p, 0x8100, 1), Err(ExecError::NoRoom));
    p.vlan = true;
    assert_eq!(pop_vlan(&mut f, &mut p), Err(ExecError::NoVlan));
}

#[test]
fn double_tag_push_then_pops() {
    let frame = frames().remove(0).1;
    let (mut slot, start, len) = slot_with(&frame, 16);
    let mut f = SlotFrame {
        slot: &mut slot,
        start,
        len,
    };
    let (_, mut p) = extract(f.bytes_mut(), 1, None);
    push_vlan(&mut f, &mut p, 0x8100, 10).expect("inner");
    push_vlan(&mut f, &mut p, 0x88a8, 20).expect("outer");
    let (k, _) = extract(f.bytes_mut(), 1, None);
    assert_eq!(
        (k.get(F::VlanTci), k.get(F::EthType)),
        (0x1000 | 20, 0x8100)
    );
    set_field(f.bytes_mut(), &p, F::VlanPcp, 5, !0).expect("outer pcp");
    pop_vlan(&mut f, &mut p).expect("outer");
    assert!(p.vlan);
    let (k, _) = extract(f.bytes_mut(), 1, None);
    assert_eq!(
        (k.get(F::VlanTci), k.get(F::EthType)),
        (0x1000 | 10, 0x0800)
    );
    pop_vlan(&mut f, &mut p).expect("inner");
    assert!(!p.vlan);
    assert_eq!(f.bytes_mut(), &frame[..]);
}

#[test]
fn apply_on_a_pool_buffer() {
    let mut pool = BufferPool::new(packet::PoolConfig {
        buffers: 4,
        try_hugepages: false,
        ..packet::PoolConfig::default()
    })
    .expect("pool");
    let frame = frames().remove(0).1;
    let b = pool.alloc().expect("buffer");
    assert!(pool.write_packet(b, &frame));
    let (_, mut p) = extract(pool.data(b), 1, None);
    let headroom = pool.headroom() as u16;
    let acts = [
        DpAction::PushVlan {
            tpid: 0x8100,
            tci: 77,
        },
        DpAction::Set {
            field: F::NwDst,
            value: 0xc612_0909,
            mask: !0,
        },
        DpAction::Output(3),
        DpAction::Set {
            field: F::VlanVid,
            value: 78,
            mask: 0xfff,
        },
    ];
    for a in &acts {
        apply_to_buffer(&mut pool, b, &mut p, a).expect("apply");
    }
    let m = *pool.meta(b);
    assert_eq!(
        (m.data_offset, m.length as usize),
        (headroom - 4, frame.len() + 4)
    );
    assert_eq!((m.l3_offset, m.l4_offset), (18, 38));
    let (k, _) = extract(pool.data(b), 1, None);
    assert_eq!((k.get(F::VlanVid), k.get(F::NwDst)), (78, 0xc612_0909));
    checksums_ok(pool.data(b)).expect("checksums");
    apply_to_buffer(&mut pool, b, &mut p, &DpAction::PopVlan).expect("pop");
    assert_eq!(pool.meta(b).data_offset, headroom);
    assert_eq!(
        apply_to_buffer(&mut pool, b, &mut p, &DpAction::PopVlan),
        Err(ExecError::NoVlan)
    );
}

#[test]
fn crc32c_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xe306_9283);
}

#[test]
fn icmp_all_zero_message_keeps_checksum_ffff() {
    // An echo request with id, sequence and payload zero turned into an echo reply: the reply
    // sums to +0, so its checksum is 0xffff (RFC 1624's update alone would give 0x0000).
    let mut f = eth(0x0800, &ip4(1, 0, 0, &[], &[8, 0, 0, 0, 0, 0, 0, 0]));
    fill_checksums(&mut f);
    let (_, p) = extract(&f, 1, None);
    set_field(&mut f, &p, F::TpSrc, 0, !0).expect("type");
    assert_eq!(f[34..38], [0, 0, 0xff, 0xff]);
    checksums_ok(&f).expect("checksum");
    // Writing the value a field already has changes nothing.
    set_field(&mut f, &p, F::TpDst, 0, !0).expect("code");
    assert_eq!(f[34..38], [0, 0, 0xff, 0xff]);
}

/// A sender's partial checksum (an offload left to the device) stays right across address and
/// port rewrites: finished afterwards, the checksum is valid.
#[test]
fn a_partial_checksum_follows_address_and_port_rewrites() {
    let mut pool = BufferPool::new(packet::PoolConfig {
        buffers: 4,
        try_hugepages: false,
        ..packet::PoolConfig::default()
    })
    .expect("pool");
    let all = frames();
    for (name, addr, value) in [
        ("tcp4", F::NwDst, 0xc612_0909u128),
        (
            "udp6",
            F::Ipv6Src,
            0x2001_0db8_0000_0000_0000_0000_0000_0077u128,
        ),
    ] {
        let mut frame = all
            .iter()
            .find(|(n, _)| *n == name)
            .expect("frame")
            .1
            .clone();
        let (_, p) = extract(&frame, 1, None);
        let l4 = p.l4_offset as usize;
        let at = if p.l4 == L4::Tcp { 16 } else { 6 };
        // What a sender leaves: the folded pseudo-header sum, not complemented.
        let partial = fold(pseudo(&frame, &p));
        frame[l4 + at..l4 + at + 2].copy_from_slice(&partial.to_be_bytes());
        let b = pool.alloc().expect("buffer");
        assert!(pool.write_packet(b, &frame));
        let m = pool.meta_mut(b);
        m.flags |= packet::meta::FLAG_CSUM_PARTIAL;
        m.csum_start = m.data_offset + l4 as u16;
        m.csum_offset = at as u16;
        let mut p = p;
        let acts = [
            DpAction::Set {
                field: addr,
                value,
                mask: !0,
            },
            DpAction::Set {
                field: F::TpDst,
                value: 8080,
                mask: 0xffff,
            },
        ];
        for a in &acts {
            apply_to_buffer(&mut pool, b, &mut p, a).expect("apply");
        }
        let (meta, data) = pool.packet_mut(b);
        let start = usize::from(meta.csum_start - meta.data_offset);
        packet::gso::finish_checksum(data, start, at).expect("finish");
        checksums_ok(data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (k, _) = extract(data, 1, None);
        assert_eq!((k.get(addr), k.get(F::TpDst)), (value, 8080), "{name}");
        pool.free(b);
    }
}

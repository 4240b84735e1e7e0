//! The body of the `flow_extract` fuzz target, shared with its stable proptest fallback
//! (crates/flow/tests/extract_props.rs): bytes -> flow key -> one header write -> VLAN push/pop,
//! checking invariants and, independently of `flow::execute`, every checksum.
//! It only asserts; it never decides what a correct key is beyond the invariants below.

use flow::execute::{crc32c, pop_vlan, push_vlan, set_field, SlotFrame};
use flow::extract::{extract, extract_into, extract_to, Parsed, L3, L4, NO_OFFSET};
use flow::{Field, FlowKey};
use packet::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};

/// Where the transport checksum is, for the protocols with an Internet checksum.
fn csum_at(l4: L4) -> Option<usize> {
    match l4 {
        L4::Tcp => Some(16),
        L4::Udp => Some(6),
        L4::Icmp | L4::Icmp6 | L4::Igmp => Some(2),
        _ => None,
    }
}

fn pseudo(f: &[u8], p: &Parsed) -> u64 {
    let l3 = p.l3_offset as usize;
    let proto = match p.l4 {
        L4::Tcp => 6,
        L4::Udp => 17,
        // ICMPv6 has a pseudo-header only over IPv6 (over IPv4 it is nonsense, summed as is).
        L4::Icmp6 if p.l3 == L3::Ipv6 => 58,
        _ => return 0,
    };
    if p.l3 == L3::Ipv4 {
        let a = |at: usize| [f[at], f[at + 1], f[at + 2], f[at + 3]];
        pseudo_header_v4(a(l3 + 12), a(l3 + 16), proto, p.l4_len)
    } else {
        let (mut s, mut d) = ([0u8; 16], [0u8; 16]);
        s.copy_from_slice(&f[l3 + 8..l3 + 24]);
        d.copy_from_slice(&f[l3 + 24..l3 + 40]);
        pseudo_header_v6(s, d, proto, p.l4_len as u32)
    }
}

/// Compute every checksum of `f` from scratch (IPv4 header, TCP, UDP, ICMP, ICMPv6, IGMP,
/// SCTP), for frames `extract` parsed to the transport header. Leaves IPv6 packets with a
/// routing header alone (their pseudo-header needs the final destination).
pub fn fill_checksums(f: &mut [u8]) {
    let (_, p) = extract(f, 0, None);
    if p.l3 == L3::Ipv4 {
        let l3 = p.l3_offset as usize;
        let ihl = (f[l3] & 15) as usize * 4;
        f[l3 + 10..l3 + 12].fill(0);
        let c = !fold(sum(0, &f[l3..l3 + ihl]));
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    if p.ipv6_routing || p.frag != 0 {
        return;
    }
    let (l4, end) = (
        p.l4_offset as usize,
        p.l4_offset as usize + p.l4_len as usize,
    );
    if p.l4 == L4::Sctp {
        f[l4 + 8..l4 + 12].fill(0);
        let c = crc32c(&f[l4..end]);
        f[l4 + 8..l4 + 12].copy_from_slice(&c.to_le_bytes());
        return;
    }
    let Some(at) = csum_at(p.l4) else {
        return;
    };
    f[l4 + at..l4 + at + 2].fill(0);
    let mut c = !fold(sum(pseudo(f, &p), &f[l4..end]));
    if p.l4 == L4::Udp && c == 0 {
        c = 0xffff;
    }
    f[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
}

/// True when every checksum `fill_checksums` would compute is right (a UDP checksum of zero
/// counts as "none").
pub fn checksums_ok(f: &[u8]) -> bool {
    let (_, p) = extract(f, 0, None);
    if p.l3 == L3::Ipv4 {
        let l3 = p.l3_offset as usize;
        let ihl = (f[l3] & 15) as usize * 4;
        if fold(sum(0, &f[l3..l3 + ihl])) != 0xffff {
            return false;
        }
    }
    if p.ipv6_routing || p.frag != 0 {
        return true;
    }
    let (l4, end) = (
        p.l4_offset as usize,
        p.l4_offset as usize + p.l4_len as usize,
    );
    if p.l4 == L4::Sctp {
        let mut s = f[l4..end].to_vec();
        let want = [s[8], s[9], s[10], s[11]];
        s[8..12].fill(0);
        return crc32c(&s).to_le_bytes() == want;
    }
    if csum_at(p.l4).is_none() || p.l4 == L4::Udp && f[l4 + 6..l4 + 8] == [0, 0] {
        return true;
    }
    fold(sum(pseudo(f, &p), &f[l4..end])) == 0xffff
}

/// Invariants of one extraction.
pub fn check_extract(frame: &[u8], in_port: u16) -> (FlowKey, Parsed) {
    let (key, p) = extract(frame, in_port, None);
    let mut again = FlowKey {
        w: [!0; flow::KEY_WORDS],
    };
    assert_eq!(extract_into(&mut again, frame, in_port, None), p);
    assert_eq!(again, key, "extraction is a function of the bytes");
    // The words extraction says it wrote cover every non-zero word (the exact-match cache
    // compares only those), with and without a tunnel.
    let mut p2 = Parsed::NONE;
    let words = extract_to(&mut again, &mut p2, frame, in_port, None);
    assert_eq!(
        flow::cache::nonzero_words(&again) & !words,
        0,
        "a non-zero word outside the words extract_to returned ({words:#x})"
    );
    let t = flow::extract::Tunnel {
        tun_id: 5000,
        tun_src: 0xc612_0001,
        tun_dst: 0xc612_0002,
    };
    let words = extract_to(&mut again, &mut p2, frame, in_port, Some(&t));
    assert_eq!(flow::cache::nonzero_words(&again) & !words, 0);
    // The fast path of the usual shape gives exactly what extraction gives, or declines.
    check_fast_path(frame, in_port, &key, &p);
    assert_eq!(key.get(Field::InPort), in_port as u128);
    if frame.len() < 14 {
        assert_eq!(p.l3_offset, NO_OFFSET);
        assert!(key.w[1..].iter().all(|&w| w == 0));
    } else {
        assert!(p.l3_offset as usize <= frame.len());
    }
    if p.l4_offset != NO_OFFSET {
        assert!(matches!(p.l3, L3::Ipv4 | L3::Ipv6));
        assert!(p.l4_offset as usize + p.l4_len as usize <= frame.len());
    }
    let need = match p.l4 {
        L4::None => 0,
        L4::Tcp => 20,
        L4::Sctp => 12,
        _ => 8,
    };
    assert!(p.l4_len as usize >= need);
    if p.l4 == L4::None {
        assert_eq!(key.get(Field::TcpFlags), 0);
    }
    if p.frag & 2 != 0 {
        assert_eq!(key.w[18], 0, "a later fragment has no L4 fields");
        assert_eq!(p.l4, L4::None);
    }
    (key, p)
}

/// `extract_ip4_l4` on `frame` agrees with `extract` (`key`, `p`): when it answers, the same
/// key (as its six words) and the same `Parsed`, and the map `extract_to` returns is the usual
/// shape's. Every untagged, unfragmented IPv4 frame with a 20-byte header and a complete TCP or
/// UDP header is answered.
pub fn check_fast_path(frame: &[u8], in_port: u16, key: &FlowKey, p: &Parsed) {
    use flow::extract::{extract_ip4_l4, ip4_key, IP4_L4_MAP};
    let mut fast_p = Parsed::NONE;
    let fast = extract_ip4_l4(frame, in_port, &mut fast_p);
    let usual = p.l3 == L3::Ipv4
        && !p.vlan
        && p.l3_offset == 14
        && p.l4_offset == 34
        && p.frag == 0
        && matches!(p.l4, L4::Tcp | L4::Udp)
        && p.malformed.is_none();
    match fast {
        Some(w) => {
            assert!(usual, "the fast path took a frame of another shape: {p:?}");
            assert_eq!(&ip4_key(&w), key, "the fast path's key differs");
            assert_eq!(&fast_p, p, "the fast path's offsets differ");
            let (mut k, mut p2) = (FlowKey::ZERO, Parsed::NONE);
            assert_eq!(
                extract_to(&mut k, &mut p2, frame, in_port, None),
                IP4_L4_MAP
            );
        }
        None => {
            assert!(
                !usual,
                "the fast path declined a frame of the usual shape: {p:?}"
            );
            assert_eq!(
                fast_p,
                Parsed::NONE,
                "a declining fast path wrote its Parsed"
            );
        }
    }
}

/// True when fields `a` and `b` share a bit of the key.
fn overlap(a: Field, b: Field) -> bool {
    let mut m = FlowKey::ZERO;
    m.unwildcard(a);
    let mut n = FlowKey::ZERO;
    n.unwildcard(b);
    (0..flow::KEY_WORDS).any(|i| m.w[i] & n.w[i] != 0)
}

/// The whole fuzz body. Byte 0: the field to write (low 6 bits), fill checksums first (bit 6),
/// full mask (bit 7); bytes 1-2: in_port; byte 3: seed of the value and mask; then the frame.
pub fn run(data: &[u8]) {
    let [sel, p0, p1, seed, ..] = *data else {
        return;
    };
    let mut frame = data[4..].to_vec();
    if sel & 0x40 != 0 {
        fill_checksums(&mut frame);
    }
    let in_port = u16::from_be_bytes([p0, p1]);
    let (key, p) = check_extract(&frame, in_port);
    let ok_before = checksums_ok(&frame);

    let field = Field::ALL[(sel & 0x3f) as usize % Field::ALL.len()];
    let spread = |s: u8| u128::from_le_bytes([s; 16]).rotate_left(s as u32);
    let value = spread(seed);
    let mask = if sel & 0x80 != 0 {
        !0
    } else {
        spread(seed.wrapping_mul(151).wrapping_add(7))
    };
    let mut f = frame.clone();
    match set_field(&mut f, &p, field, value, mask) {
        Ok(()) => {
            assert_eq!(f.len(), frame.len());
            assert!(!ok_before || checksums_ok(&f), "{field:?} broke a checksum");
            let (k2, p2) = extract(&f, in_port, None);
            assert_eq!(
                (p2.l3, p2.l4, p2.l3_offset, p2.l4_offset, p2.l4_len),
                (p.l3, p.l4, p.l3_offset, p.l4_offset, p.l4_len),
                "{field:?} changed the frame's layout"
            );
            for &g in flow::Field::ALL {
                let nd = p.l4 == L4::Icmp6
                    && matches!(field, Field::TpSrc | Field::TpDst)
                    && matches!(g, Field::ArpSha | Field::ArpTha);
                if !overlap(g, field) && !nd {
                    assert_eq!(k2.get(g), key.get(g), "{field:?} changed {g:?}");
                }
            }
        }
        Err(e) => {
            assert_eq!(f, frame, "{e}: refused but changed");
            assert!(!e.to_string().is_empty());
        }
    }

    // Push then pop restores the frame; pop then push restores it (but the CFI bit).
    let mut slot = vec![0u8; frame.len() + 8];
    slot[4..4 + frame.len()].copy_from_slice(&frame);
    let mut sf = SlotFrame {
        slot: &mut slot,
        start: 4,
        len: frame.len(),
    };
    let mut q = p;
    let tci = u16::from_be_bytes([seed, sel]);
    match push_vlan(&mut sf, &mut q, 0x8100, tci) {
        Ok(()) => {
            pop_vlan(&mut sf, &mut q).expect("pop what was pushed");
            assert_eq!(sf.bytes_mut(), &frame[..]);
            assert_eq!(
                (q.l3_offset, q.l4_offset, q.vlan),
                (p.l3_offset, p.l4_offset, p.vlan)
            );
        }
        Err(_) => assert!(frame.len() < 14),
    }
    let mut q = p;
    if pop_vlan(&mut sf, &mut q).is_ok() {
        assert!(p.vlan);
        let tpid = u16::from_be_bytes([frame[12], frame[13]]);
        let tci = u16::from_be_bytes([frame[14], frame[15]]);
        push_vlan(&mut sf, &mut q, tpid, tci).expect("push back");
        let mut want = frame.clone();
        want[14] &= !0x10;
        assert_eq!(sf.bytes_mut(), &want[..]);
    } else {
        assert!(!p.vlan);
    }
}

//! Unit tests of `gso`: segments of crafted super-packets compared with frames built
//! independently by `headers::build_tcp_frame`, and every malformed case with its error.
//! The property test and the scapy cross-check are in tests/gso_scapy.rs.

use super::*;
use crate::headers::{build_tcp_frame, build_udp_frame, TcpFrameSpec, UdpFrameSpec};
use std::net::IpAddr;

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn spec(v6: bool, len: usize) -> TcpFrameSpec {
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8:1::9".parse().unwrap(),
        )
    } else {
        ("198.18.0.1".parse().unwrap(), "198.19.7.9".parse().unwrap())
    };
    TcpFrameSpec {
        src_ip: src,
        dst_ip: dst,
        ip_id: 0x1234,
        seq: 0x1000_0000,
        ack: 0xdead_beef,
        flags: tcp::ACK | tcp::PSH,
        payload: payload(len),
        partial_checksum: true,
        ..TcpFrameSpec::default()
    }
}

/// What Linux makes of `sp` cut at `mss`, each segment built from scratch with a full checksum.
fn expected(sp: &TcpFrameSpec, mss: usize) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = if sp.payload.is_empty() {
        vec![&[]]
    } else {
        sp.payload.chunks(mss).collect()
    };
    let n = chunks.len();
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut flags = sp.flags;
            if i + 1 < n {
                flags &= !(tcp::FIN | tcp::PSH);
            }
            if i > 0 {
                flags &= !tcp::CWR;
            }
            build_tcp_frame(&TcpFrameSpec {
                seq: sp.seq.wrapping_add((i * mss) as u32),
                ip_id: sp.ip_id.wrapping_add(i as u16),
                flags,
                payload: c.to_vec(),
                partial_checksum: false,
                ..sp.clone()
            })
        })
        .collect()
}

fn kind_of(sp: &TcpFrameSpec) -> GsoKind {
    match sp.dst_ip {
        IpAddr::V4(_) => GsoKind::Tcp4,
        IpAddr::V6(_) => GsoKind::Tcp6,
    }
}

/// Segments of `frame` as whole frames (header + payload).
fn cut(frame: &[u8], kind: GsoKind, mss: u16) -> Result<Vec<Vec<u8>>, GsoError> {
    let mut out = Vec::new();
    let done = segment_tcp(frame, kind, mss, |h, p| {
        out.push([h, p].concat());
        true
    })?;
    assert_eq!(done.sent, out.len());
    assert_eq!(done.segments, out.len());
    Ok(out)
}

fn check(sp: &TcpFrameSpec, mss: usize, what: &str) {
    let frame = build_tcp_frame(sp);
    let got = cut(&frame, kind_of(sp), mss as u16).unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = expected(sp, mss);
    assert_eq!(got.len(), want.len(), "{what}: segments");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "{what}: segment {i} of {}", want.len());
    }
}

#[test]
fn segments_are_what_linux_makes() {
    for v6 in [false, true] {
        let fam = if v6 { "v6" } else { "v4" };
        check(&spec(v6, 4000), 1448, &format!("{fam} short last"));
        check(&spec(v6, 4344), 1448, &format!("{fam} exact multiple"));
        check(&spec(v6, 1448), 1448, &format!("{fam} one full segment"));
        check(&spec(v6, 100), 1448, &format!("{fam} fits in one"));
        check(&spec(v6, 0), 1448, &format!("{fam} no payload"));
        check(&spec(v6, 7), 1, &format!("{fam} mss 1"));
        check(&spec(v6, 65000), 9000, &format!("{fam} jumbo mss"));
        check(&spec(v6, 1001), 2, &format!("{fam} odd payload, even mss"));
        check(&spec(v6, 1001), 3, &format!("{fam} odd mss"));
        let mut s = spec(v6, 3000);
        s.vlans = vec![(eth::TYPE_VLAN, 0x2007)];
        check(&s, 1000, &format!("{fam} VLAN"));
        s.vlans = vec![(eth::TYPE_QINQ, 100), (eth::TYPE_VLAN, 0xe00a)];
        check(&s, 999, &format!("{fam} QinQ"));
        let mut s = spec(v6, 5000);
        s.tcp_options = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]; // NOP NOP timestamps
        check(&s, 1448, &format!("{fam} TCP options"));
        s.tcp_options = vec![1; 40];
        s.ip_options = vec![1; 40];
        s.vlans = vec![(eth::TYPE_QINQ, 1), (eth::TYPE_VLAN, 2)];
        check(&s, 1200, &format!("{fam} longest header"));
    }
}

#[test]
fn longest_header_fits_the_buffer() {
    let mut s = spec(false, 10);
    s.tcp_options = vec![1; 40];
    s.ip_options = vec![7; 40];
    s.vlans = vec![(eth::TYPE_QINQ, 1), (eth::TYPE_VLAN, 2)];
    let frame = build_tcp_frame(&s);
    let seg = Segmenter::new(&frame, GsoKind::Tcp4, 4).unwrap();
    assert_eq!(seg.header_len(), MAX_HEADER_LEN);
    assert_eq!(seg.segments(), 3);
}

#[test]
fn flags_fin_psh_on_the_last_cwr_on_the_first_others_on_all() {
    for v6 in [false, true] {
        let mut s = spec(v6, 3000);
        s.flags = tcp::FIN | tcp::PSH | tcp::CWR | tcp::ECE | tcp::URG | tcp::ACK;
        s.urgent = 77;
        let frame = build_tcp_frame(&s);
        let segs = cut(&frame, kind_of(&s), 1000).unwrap();
        let l4 = frame.len() - 3000 - 20;
        let flags: Vec<u8> = segs.iter().map(|f| f[l4 + tcp::FLAGS]).collect();
        let all = tcp::ECE | tcp::URG | tcp::ACK;
        assert_eq!(
            flags,
            [all | tcp::CWR, all, all | tcp::FIN | tcp::PSH],
            "v6 {v6}"
        );
        // The urgent pointer is copied, as Linux does.
        assert!(segs.iter().all(|f| be16(f, l4 + 18) == 77));
        check(&s, 1000, "all flags");
        // One segment keeps every flag.
        let segs = cut(&frame, kind_of(&s), 3000).unwrap();
        assert_eq!(segs[0][l4 + tcp::FLAGS], s.flags);
    }
}

#[test]
fn sequence_numbers_and_ip_ids_wrap() {
    let mut s = spec(false, 5000);
    s.seq = u32::MAX - 1500;
    s.ip_id = u16::MAX - 1;
    check(&s, 1448, "wrapping seq and id");
    let frame = build_tcp_frame(&s);
    let segs = cut(&frame, GsoKind::Tcp4, 1448).unwrap();
    let ids: Vec<u16> = segs.iter().map(|f| be16(f, 14 + ip4::ID)).collect();
    assert_eq!(ids, [0xfffe, 0xffff, 0, 1]);
    let seqs: Vec<u32> = segs
        .iter()
        .map(|f| crate::headers::be32(f, 34 + 4))
        .collect();
    assert_eq!(
        seqs,
        [u32::MAX - 1500, u32::MAX - 1500 + 1448, 1395, 1395 + 1448]
    );
}

#[test]
fn the_senders_lengths_and_checksums_are_not_read() {
    for v6 in [false, true] {
        let s = spec(v6, 3000);
        let good = build_tcp_frame(&s);
        let mut bad = good.clone();
        let l4 = good.len() - 3000 - 20;
        bad[l4 + tcp::CHECKSUM] ^= 0x5a;
        if v6 {
            put16(&mut bad, 14 + ip6::PAYLOAD_LEN, 0);
        } else {
            put16(&mut bad, 14 + ip4::TOTAL_LEN, 0);
            put16(&mut bad, 14 + ip4::CHECKSUM, 0x1111);
        }
        assert_eq!(cut(&bad, kind_of(&s), 1448), cut(&good, kind_of(&s), 1448));
        check(&s, 1448, "reference");
    }
}

#[test]
fn segments_come_in_any_order_and_emit_can_stop() {
    let s = spec(true, 10_000);
    let frame = build_tcp_frame(&s);
    let seg = Segmenter::new(&frame, GsoKind::Tcp6, 1440).unwrap();
    assert_eq!(seg.segments(), 7);
    assert_eq!(seg.payload_len(), 10_000);
    assert_eq!(seg.mss(), 1440);
    assert_eq!(seg.kind(), GsoKind::Tcp6);
    let want = expected(&s, 1440);
    let mut buf = [0u8; MAX_HEADER_LEN];
    for i in (0..7).rev() {
        let (h, p) = seg.segment(i, &mut buf).unwrap();
        assert_eq!([h, p].concat(), want[i]);
        assert_eq!(seg.segment_len(i), Some(want[i].len()));
    }
    assert!(seg.segment(7, &mut buf).is_none());
    assert_eq!(seg.segment_len(7), None);

    let mut n = 0;
    let done = segment_tcp(&frame, GsoKind::Tcp6, 1440, |_, _| {
        n += 1;
        n <= 3
    })
    .unwrap();
    assert_eq!(
        done,
        Segmented {
            sent: 3,
            segments: 7
        }
    );
    assert_eq!(n, 4);
}

/// A valid frame with VLAN tags, IPv4 options, TCP options and a payload; every cut inside its
/// headers is refused with the error of the header it cuts.
#[test]
fn truncated_at_every_header_boundary() {
    for v6 in [false, true] {
        let mut s = spec(v6, 100);
        s.vlans = vec![(eth::TYPE_QINQ, 5), (eth::TYPE_VLAN, 6)];
        s.ip_options = vec![1; 8];
        s.tcp_options = vec![1; 12];
        let frame = build_tcp_frame(&s);
        let l3 = 22;
        let l4 = l3 + if v6 { 40 } else { 28 };
        let data = l4 + 32;
        for len in 0..data {
            let want = if len < l3 {
                GsoError::TruncatedL2(len)
            } else if len < l4 {
                GsoError::TruncatedL3
            } else {
                GsoError::TruncatedL4
            };
            let got = Segmenter::new(&frame[..len], kind_of(&s), 1000).map(|_| ());
            assert_eq!(got, Err(want), "v6 {v6} cut at {len}");
        }
        // Cut right after the headers: one segment without payload.
        let segs = cut(&frame[..data], kind_of(&s), 1000).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].len(), data);
    }
}

#[test]
fn malformed_frames_are_refused_with_their_reason() {
    let v4 = build_tcp_frame(&spec(false, 3000));
    let v6 = build_tcp_frame(&spec(true, 3000));
    let err = |f: &[u8], kind, mss| Segmenter::new(f, kind, mss).map(|_| ()).unwrap_err();
    let with = |f: &[u8], at: usize, b: u8| {
        let mut f = f.to_vec();
        f[at] = b;
        f
    };

    assert_eq!(err(&v4, GsoKind::Tcp4, 0), GsoError::ZeroMss);
    assert_eq!(
        err(&v4, GsoKind::Tcp6, 1448),
        GsoError::WrongEthertype(0x0800)
    );
    assert_eq!(
        err(&v6, GsoKind::Tcp4, 1448),
        GsoError::WrongEthertype(0x86dd)
    );
    let mut arp = v4.clone();
    put16(&mut arp, 12, eth::TYPE_ARP);
    assert_eq!(
        err(&arp, GsoKind::Tcp4, 1448),
        GsoError::WrongEthertype(0x0806)
    );
    let mut three = spec(false, 10);
    three.vlans = vec![
        (eth::TYPE_QINQ, 1),
        (eth::TYPE_VLAN, 2),
        (eth::TYPE_VLAN, 3),
    ];
    assert_eq!(
        err(&build_tcp_frame(&three), GsoKind::Tcp4, 1448),
        GsoError::WrongEthertype(0x8100)
    );

    assert_eq!(
        err(&with(&v4, 14, 0x65), GsoKind::Tcp4, 1448),
        GsoError::BadIpVersion(6)
    );
    assert_eq!(
        err(&with(&v6, 14, 0x40), GsoKind::Tcp6, 1448),
        GsoError::BadIpVersion(4)
    );
    for ihl in 0..5 {
        assert_eq!(
            err(&with(&v4, 14, 0x40 | ihl), GsoKind::Tcp4, 1448),
            GsoError::BadIhl(ihl)
        );
    }
    // IHL 15 on a frame with only 20 + 20 header bytes and no payload: options past the frame.
    let bare = build_tcp_frame(&spec(false, 0));
    assert_eq!(
        err(&with(&bare, 14, 0x4f), GsoKind::Tcp4, 1448),
        GsoError::TruncatedL3
    );
    assert_eq!(
        err(&with(&v4, 14 + ip4::FRAG, 0x20), GsoKind::Tcp4, 1448),
        GsoError::Fragment
    );
    assert_eq!(
        err(&with(&v4, 14 + ip4::FRAG + 1, 1), GsoKind::Tcp4, 1448),
        GsoError::Fragment
    );
    // DF alone is fine.
    assert!(Segmenter::new(&with(&v4, 14 + ip4::FRAG, 0x40), GsoKind::Tcp4, 1448).is_ok());
    assert_eq!(
        err(&with(&v4, 14 + ip4::PROTOCOL, 17), GsoKind::Tcp4, 1448),
        GsoError::NotTcp(17)
    );
    assert_eq!(
        err(&with(&v6, 14 + ip6::NEXT_HEADER, 0), GsoKind::Tcp6, 1448),
        GsoError::NotTcp(0)
    );
    for (v, kind, l4) in [(&v4, GsoKind::Tcp4, 34), (&v6, GsoKind::Tcp6, 54)] {
        for doff in 0..5 {
            assert_eq!(
                err(&with(v, l4 + tcp::DATA_OFFSET, doff << 4), kind, 1448),
                GsoError::BadTcpOffset(doff)
            );
        }
        // Data offset 15 on a frame with no payload: options past the frame.
        let bare = &v[..l4 + 20];
        assert_eq!(
            err(&with(bare, l4 + tcp::DATA_OFFSET, 0xf0), kind, 1448),
            GsoError::TruncatedL4
        );
    }

    // 4096 payload bytes: mss 2 makes exactly MAX_SEGMENTS, mss 1 twice that.
    let big = build_tcp_frame(&spec(false, 2 * MAX_SEGMENTS));
    assert_eq!(
        Segmenter::new(&big, GsoKind::Tcp4, 2).unwrap().segments(),
        MAX_SEGMENTS
    );
    assert_eq!(
        err(&big, GsoKind::Tcp4, 1),
        GsoError::TooManySegments(2 * MAX_SEGMENTS)
    );
    let mut huge = build_tcp_frame(&spec(false, MAX_FRAME_LEN - 54));
    assert_eq!(huge.len(), MAX_FRAME_LEN);
    check(&spec(false, MAX_FRAME_LEN - 54), 65535, "largest frame");
    huge.push(0);
    assert_eq!(
        err(&huge, GsoKind::Tcp4, 1448),
        GsoError::TooLong(MAX_FRAME_LEN + 1)
    );
}

#[test]
fn error_names_are_distinct_and_indexed() {
    let all = [
        GsoError::ZeroMss,
        GsoError::TooLong(0),
        GsoError::TruncatedL2(0),
        GsoError::WrongEthertype(0),
        GsoError::TruncatedL3,
        GsoError::BadIpVersion(0),
        GsoError::BadIhl(0),
        GsoError::Fragment,
        GsoError::NotTcp(0),
        GsoError::TruncatedL4,
        GsoError::BadTcpOffset(0),
        GsoError::TooManySegments(0),
        GsoError::ChecksumOutOfFrame {
            start: 0,
            offset: 0,
            len: 0,
        },
    ];
    assert_eq!(all.len(), GsoError::KINDS);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e.index(), i);
        assert_eq!(e.name(), GsoError::NAMES[i]);
        assert!(!e.to_string().is_empty());
    }
    let mut names = GsoError::NAMES.to_vec();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), GsoError::KINDS);
}

#[test]
fn kinds_from_gso_type() {
    use crate::meta::{GSO_NONE, GSO_TCP4, GSO_TCP6};
    assert_eq!(GsoKind::from_gso_type(GSO_TCP4), Some(GsoKind::Tcp4));
    assert_eq!(GsoKind::from_gso_type(GSO_TCP6), Some(GsoKind::Tcp6));
    assert_eq!(GsoKind::from_gso_type(GSO_NONE), None);
    assert_eq!(GsoKind::from_gso_type(0x80), None);
}

#[test]
fn partial_checksums_are_finished_like_full_ones() {
    for v6 in [false, true] {
        for len in [0, 1, 2, 3, 100, 127, 128, 129, 1447, 9001] {
            let mut s = spec(v6, len);
            s.vlans = vec![(eth::TYPE_VLAN, 3)];
            s.tcp_options = vec![1; 4];
            let mut partial = build_tcp_frame(&s);
            s.partial_checksum = false;
            let full = build_tcp_frame(&s);
            let l4 = 18 + if v6 { 40 } else { 20 };
            finish_checksum(&mut partial, l4, tcp::CHECKSUM).unwrap();
            // Equal, or the same value written as 0xffff where the sum gave 0.
            let (a, b) = (be16(&partial, l4 + 16), be16(&full, l4 + 16));
            assert!(a == b || (a, b) == (0xffff, 0), "v6 {v6} len {len}");
            assert_eq!(partial[..l4 + 16], full[..l4 + 16]);
            assert_eq!(partial[l4 + 18..], full[l4 + 18..]);
        }
    }
    // UDP: a computed 0 goes out as 0xffff, as build_udp_frame (and RFC 768) want.
    for src in ["198.18.0.1", "2001:db8::1"] {
        let dst = if src.contains(':') {
            "2001:db8::2"
        } else {
            "198.18.0.2"
        };
        let good = build_udp_frame(&UdpFrameSpec {
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            frame_size: 333,
            ..UdpFrameSpec::default()
        });
        let l4 = if src.contains(':') { 54 } else { 34 };
        let mut partial = good.clone();
        let len = (good.len() - l4) as u16;
        let pseudo = match (src.parse().unwrap(), dst.parse().unwrap()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                crate::checksum::pseudo_header_v4(s.octets(), d.octets(), 17, len)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                crate::checksum::pseudo_header_v6(s.octets(), d.octets(), 17, len.into())
            }
            _ => unreachable!(),
        };
        put16(&mut partial, l4 + 6, fold(pseudo));
        finish_checksum(&mut partial, l4, 6).unwrap();
        assert_eq!(partial, good, "{src}");
    }
    // A sum of 0: all-zero bytes from start.
    let mut zeros = [0u8; 8];
    finish_checksum(&mut zeros, 0, 2).unwrap();
    assert_eq!(zeros, [0, 0, 0xff, 0xff, 0, 0, 0, 0]);
}

#[test]
fn checksum_fields_outside_the_frame_are_refused() {
    let mut f = [0u8; 40];
    let out = |start, offset| GsoError::ChecksumOutOfFrame {
        start,
        offset,
        len: 40,
    };
    assert_eq!(finish_checksum(&mut f, 38, 0), Ok(()));
    assert_eq!(finish_checksum(&mut f, 0, 38), Ok(()));
    assert_eq!(finish_checksum(&mut f, 39, 0), Err(out(39, 0)));
    assert_eq!(finish_checksum(&mut f, 20, 19), Err(out(20, 19)));
    assert_eq!(finish_checksum(&mut f, 41, 0), Err(out(41, 0)));
    assert_eq!(
        finish_checksum(&mut f, usize::MAX, 1),
        Err(out(usize::MAX, 1))
    );
    assert_eq!(
        finish_checksum(&mut f, 1, usize::MAX - 1),
        Err(out(1, usize::MAX - 1))
    );
    assert_eq!(
        finish_checksum(&mut [], 0, 0),
        Err(GsoError::ChecksumOutOfFrame {
            start: 0,
            offset: 0,
            len: 0
        })
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Valid frames with bytes overwritten and cut anywhere: an error or segments, never a
        /// panic, and never a header longer than the buffer. (The fuzz target `gso_segment`
        /// does this with coverage guidance and checks the segments.)
        #[test]
        fn damaged_frames_never_panic(
            v6 in any::<bool>(),
            tags in 0usize..=3,
            flips in proptest::collection::vec((0usize..160, any::<u8>()), 0..6),
            len in 0usize..400,
            mss in any::<u16>(),
            start in 0usize..420,
            offset in 0usize..420,
        ) {
            let mut s = spec(v6, 300);
            s.vlans = vec![(eth::TYPE_VLAN, 9); tags];
            s.tcp_options = vec![1; 8];
            let mut f = build_tcp_frame(&s);
            for (at, b) in flips {
                if let Some(x) = f.get_mut(at) {
                    *x = b;
                }
            }
            f.truncate(len);
            let mut payload = 0;
            let r = segment_tcp(&f, kind_of(&s), mss, |h, p| {
                assert!(h.len() <= MAX_HEADER_LEN);
                payload += p.len();
                true
            });
            if let Ok(done) = r {
                prop_assert_eq!(done.sent, done.segments);
                let seg = Segmenter::new(&f, kind_of(&s), mss).unwrap();
                prop_assert_eq!(payload, seg.payload_len());
                prop_assert_eq!(seg.header_len() + payload, f.len());
            }
            let before = f.clone();
            match finish_checksum(&mut f, start, offset) {
                Ok(()) => prop_assert!(start + offset + 2 <= f.len()),
                Err(_) => prop_assert_eq!(f, before),
            }
        }
    }
}

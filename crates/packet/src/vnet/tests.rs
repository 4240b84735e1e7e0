//! Translation of virtio-net headers to and from the meta, malformed headers included.

use super::*;
use proptest::prelude::*;

const DATA_OFFSET: u16 = 128;

/// An Ethernet + IPv4 (or IPv6) + TCP frame with a `doff`-word TCP header and `payload` bytes.
fn tcp_frame(v6: bool, doff: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    let l3 = if v6 { 40 } else { 20 };
    f.resize(14 + l3, 0);
    f[14] = if v6 { 0x60 } else { 0x45 };
    let l4 = f.len();
    // At least up to the data offset's byte, whatever `doff` says (0..=3 words is too short).
    f.resize((l4 + usize::from(doff) * 4 + payload).max(l4 + 13), 0xab);
    f[l4 + 12] = doff << 4;
    f
}

fn hdr(flags: u8, gso_type: u8, gso_size: u16, csum_start: u16, csum_offset: u16) -> VnetHdr {
    VnetHdr {
        flags,
        gso_type,
        hdr_len: 0,
        gso_size,
        csum_start,
        csum_offset,
    }
}

fn rx(h: &VnetHdr, frame: &[u8]) -> Result<BufferMeta, VnetError> {
    let mut m = BufferMeta {
        data_offset: DATA_OFFSET,
        length: frame.len() as u16,
        ..BufferMeta::default()
    };
    to_meta(h, frame, DATA_OFFSET, true, &mut m).map(|()| m)
}

#[test]
fn bytes_round_trip_little_endian() {
    let raw = [1u8, 0x81, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00];
    let h = VnetHdr::read(&raw).expect("10 bytes");
    assert_eq!(h, hdr(1, 0x81, 1448, 34, 16).with_hdr_len(66));
    let mut out = [0xffu8; 12];
    assert!(h.write(&mut out));
    assert_eq!(out[..10], raw);
    assert_eq!(
        out[10..],
        [0xff, 0xff],
        "nothing past the header is written"
    );
    assert!(VnetHdr::read(&raw[..9]).is_none());
    assert!(!h.write(&mut [0u8; 9]));
}

impl VnetHdr {
    fn with_hdr_len(mut self, l: u16) -> VnetHdr {
        self.hdr_len = l;
        self
    }
}

#[test]
fn plain_headers_leave_the_meta_alone() {
    let f = tcp_frame(false, 5, 100);
    for flags in [0, F_DATA_VALID] {
        let m = rx(&hdr(flags, 0, 0, 0, 0), &f).expect("plain");
        assert!(!m.has_offload());
        assert_eq!(m.flags, 0);
    }
    // hdr_len and gso_size mean nothing without a request.
    let m = rx(&hdr(0, 0, 1448, 0, 0).with_hdr_len(54), &f).expect("plain");
    assert!(!m.has_offload());
}

#[test]
fn a_partial_checksum_becomes_slot_relative() {
    // UDP over IPv4: checksum at 34 + 6.
    let f = tcp_frame(false, 5, 100);
    let m = rx(&hdr(F_NEEDS_CSUM, 0, 0, 34, 6), &f).expect("partial");
    assert_eq!(m.flags & FLAG_CSUM_PARTIAL, FLAG_CSUM_PARTIAL);
    assert_eq!(m.csum_start, DATA_OFFSET + 34);
    assert_eq!(m.csum_offset, 6);
    assert!(!m.is_gso());
    // The last two bytes of the frame may hold the checksum; one further may not.
    let end = f.len() as u16;
    assert!(rx(&hdr(F_NEEDS_CSUM, 0, 0, 34, end - 34 - 2), &f).is_ok());
    assert_eq!(
        rx(&hdr(F_NEEDS_CSUM, 0, 0, 34, end - 34 - 1), &f),
        Err(VnetError::CsumOutOfFrame)
    );
    assert_eq!(
        rx(&hdr(F_NEEDS_CSUM, 0, 0, 13, 16), &f),
        Err(VnetError::CsumOutOfFrame),
        "a checksum range starting in the Ethernet header"
    );
    assert_eq!(
        rx(&hdr(F_NEEDS_CSUM, 0, 0, u16::MAX, u16::MAX), &f),
        Err(VnetError::CsumOutOfFrame),
        "no overflow"
    );
}

#[test]
fn tcp_super_packets_become_gso_meta() {
    let f = tcp_frame(false, 8, 2896);
    let m = rx(&hdr(F_NEEDS_CSUM, GSO_TYPE_TCPV4, 1448, 34, 16), &f).expect("tso4");
    assert_eq!((m.gso_type, m.gso_size, m.gso_flags), (GSO_TCP4, 1448, 0));
    assert_eq!((m.csum_start, m.csum_offset), (DATA_OFFSET + 34, 16));
    let f6 = tcp_frame(true, 5, 3000);
    let m = rx(
        &hdr(F_NEEDS_CSUM, GSO_TYPE_TCPV6 | GSO_TYPE_ECN, 1440, 54, 16),
        &f6,
    )
    .expect("tso6 with ECN");
    assert_eq!(
        (m.gso_type, m.gso_size, m.gso_flags),
        (GSO_TCP6, 1440, GSO_FLAG_ECN)
    );
    assert_eq!(m.csum_start, DATA_OFFSET + 54);
}

#[test]
fn malformed_headers_are_refused_with_their_reason() {
    let f = tcp_frame(false, 5, 3000);
    let tso = |flags, t, size, start, off| rx(&hdr(flags, t, size, start, off), &f);
    let c = F_NEEDS_CSUM;
    assert_eq!(tso(0x04, 0, 0, 0, 0), Err(VnetError::UnknownFlags));
    assert_eq!(tso(0x80 | c, 0, 0, 34, 16), Err(VnetError::UnknownFlags));
    assert_eq!(tso(c, GSO_TYPE_UDP, 1400, 34, 6), Err(VnetError::UdpGso));
    assert_eq!(tso(c, GSO_TYPE_UDP_L4, 1400, 34, 6), Err(VnetError::UdpGso));
    for t in [2u8, 6, 0x7f, GSO_TYPE_ECN, 0xff] {
        assert_eq!(
            tso(c, t, 1400, 34, 16),
            Err(VnetError::UnknownGso),
            "type {t:#x}"
        );
    }
    assert_eq!(
        tso(c, GSO_TYPE_TCPV4, 0, 34, 16),
        Err(VnetError::GsoSizeZero)
    );
    assert_eq!(
        tso(0, GSO_TYPE_TCPV4, 1448, 34, 16),
        Err(VnetError::GsoNotTcp),
        "segmentation without a checksum request"
    );
    assert_eq!(
        tso(c, GSO_TYPE_TCPV4, 1448, 34, 6),
        Err(VnetError::GsoNotTcp),
        "the checksum is not TCP's"
    );
    assert_eq!(
        tso(c, GSO_TYPE_TCPV4, 1448, 34, 0x8000),
        Err(VnetError::CsumOutOfFrame)
    );
    // A TCP header shorter than 20 bytes, or longer than what is left of the frame.
    let mut short = tcp_frame(false, 5, 100);
    short[34 + 12] = 4 << 4;
    assert_eq!(
        rx(&hdr(c, GSO_TYPE_TCPV4, 1448, 34, 16), &short),
        Err(VnetError::GsoNotTcp)
    );
    let cut = &tcp_frame(false, 15, 0)[..34 + 40];
    assert_eq!(
        rx(&hdr(c, GSO_TYPE_TCPV4, 1448, 34, 16), cut),
        Err(VnetError::GsoNotTcp)
    );
    // The slot-relative start must fit 16 bits.
    let mut m = BufferMeta::default();
    let big = vec![0u8; 65535];
    assert_eq!(
        to_meta(&hdr(c, 0, 0, 65000, 6), &big, 1000, true, &mut m),
        Err(VnetError::CsumOutOfFrame)
    );
    assert_eq!(m, BufferMeta::default(), "a refused header changes nothing");
}

#[test]
fn without_negotiated_offloads_every_request_is_refused() {
    let f = tcp_frame(false, 5, 3000);
    let mut m = BufferMeta::default();
    for h in [
        hdr(F_NEEDS_CSUM, 0, 0, 34, 16),
        hdr(F_NEEDS_CSUM, GSO_TYPE_TCPV4, 1448, 34, 16),
        hdr(0, GSO_TYPE_TCPV4, 1448, 0, 0),
    ] {
        assert_eq!(
            to_meta(&h, &f, DATA_OFFSET, false, &mut m),
            Err(VnetError::NotNegotiated)
        );
    }
    assert!(to_meta(
        &hdr(F_DATA_VALID, 0, 0, 0, 0),
        &f,
        DATA_OFFSET,
        false,
        &mut m
    )
    .is_ok());
    assert_eq!(m, BufferMeta::default());
}

#[test]
fn headers_built_from_the_meta() {
    let mut m = BufferMeta {
        data_offset: DATA_OFFSET,
        ..BufferMeta::default()
    };
    let f = tcp_frame(false, 8, 4000);
    assert_eq!(
        from_meta(&m, &f),
        Ok(VnetHdr::default()),
        "no offload: all zero"
    );
    m.flags = FLAG_CSUM_PARTIAL;
    m.csum_start = DATA_OFFSET + 34;
    m.csum_offset = 16;
    assert_eq!(
        from_meta(&m, &f),
        Ok(hdr(F_NEEDS_CSUM, 0, 0, 34, 16).with_hdr_len(34 + 18))
    );
    m.gso_type = GSO_TCP4;
    m.gso_size = 1448;
    m.gso_flags = GSO_FLAG_ECN;
    assert_eq!(
        from_meta(&m, &f),
        Ok(hdr(F_NEEDS_CSUM, GSO_TYPE_TCPV4 | GSO_TYPE_ECN, 1448, 34, 16).with_hdr_len(34 + 32)),
        "hdr_len is the end of the TCP header (with options)"
    );
    // A VLAN tag pushed in front: the slot-relative start stays, the frame-relative one moves.
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    tagged.extend_from_slice(&f[12..]);
    let mut pushed = m;
    pushed.data_offset -= 4;
    let h = from_meta(&pushed, &tagged).expect("tagged");
    assert_eq!((h.csum_start, h.hdr_len), (38, 38 + 32));
}

#[test]
fn broken_meta_is_refused() {
    let f = tcp_frame(false, 5, 4000);
    let good = BufferMeta {
        data_offset: DATA_OFFSET,
        flags: FLAG_CSUM_PARTIAL,
        csum_start: DATA_OFFSET + 34,
        csum_offset: 16,
        gso_type: GSO_TCP4,
        gso_size: 1448,
        ..BufferMeta::default()
    };
    assert!(from_meta(&good, &f).is_ok());
    type Breaker = fn(&mut BufferMeta);
    let cases: [(Breaker, VnetError); 7] = [
        (|m| m.flags = 0, VnetError::GsoNotTcp),
        (|m| m.csum_start = 100, VnetError::CsumOutOfFrame),
        (
            |m| m.csum_start = DATA_OFFSET + 10,
            VnetError::CsumOutOfFrame,
        ),
        (|m| m.csum_offset = 5000, VnetError::CsumOutOfFrame),
        (|m| m.gso_type = 9, VnetError::UnknownGso),
        (|m| m.gso_size = 0, VnetError::GsoSizeZero),
        (|m| m.csum_offset = 6, VnetError::GsoNotTcp),
    ];
    for (i, (break_it, why)) in cases.into_iter().enumerate() {
        let mut m = good;
        break_it(&mut m);
        assert_eq!(from_meta(&m, &f), Err(why), "case {i}");
    }
    // The TCP header must be inside the frame.
    assert_eq!(
        from_meta(&good, &f[..34 + 17]),
        Err(VnetError::CsumOutOfFrame)
    );
    assert_eq!(from_meta(&good, &f[..34 + 19]), Err(VnetError::GsoNotTcp));
    assert!(from_meta(&good, &f[..34 + 20]).is_ok());
}

#[test]
fn reason_names_are_distinct_and_indexed() {
    for (i, e) in VnetError::ALL.iter().enumerate() {
        assert_eq!(e.index(), i);
        assert!(VnetError::ALL[..i].iter().all(|o| o.name() != e.name()));
    }
}

proptest! {
    /// Any header over any frame: never a panic; what is accepted is sent on unchanged (but
    /// for DATA_VALID, a hint, and hdr_len, which is recomputed).
    #[test]
    fn any_header_is_checked_and_what_passes_round_trips(
        raw in proptest::array::uniform10(any::<u8>()),
        flags in prop_oneof![Just(0u8), Just(1), Just(2), Just(3), any::<u8>()],
        gso in prop_oneof![Just(0u8), Just(1), Just(4), Just(0x81), any::<u8>()],
        start in prop_oneof![Just(34u16), Just(54), any::<u16>()],
        offset in prop_oneof![Just(16u16), Just(6), any::<u16>()],
        v6 in any::<bool>(),
        doff in 0u8..16,
        payload in 0usize..3000,
    ) {
        let mut h = VnetHdr::read(&raw).expect("10 bytes");
        h.flags = flags;
        h.gso_type = gso;
        h.csum_start = start;
        h.csum_offset = offset;
        let f = tcp_frame(v6, doff, payload);
        if let Ok(m) = rx(&h, &f) {
            let back = from_meta(&m, &f).expect("accepted meta builds a header");
            prop_assert_eq!(back.flags, h.flags & F_NEEDS_CSUM);
            if back.flags != 0 {
                prop_assert_eq!((back.csum_start, back.csum_offset), (h.csum_start, h.csum_offset));
            }
            prop_assert_eq!(back.gso_type, h.gso_type);
            if h.gso_type != 0 {
                prop_assert_eq!(back.gso_size, h.gso_size);
            }
            prop_assert!(usize::from(back.hdr_len) <= f.len());
        }
    }
}

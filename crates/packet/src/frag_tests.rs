//! Unit tests of `frag`: fragments of crafted IPv4 packets are put back together by a
//! reassembler written here from RFC 791 (not from `frag`), every refusal with its reason, and
//! a property test over random sizes, offsets and options.

use super::*;
use proptest::prelude::*;

/// An IPv4 packet: `options` (a multiple of 4 bytes) after the fixed header, `payload_len`
/// bytes of payload, flags/offset word `frag`.
fn packet(options: &[u8], payload_len: usize, frag: u16) -> Vec<u8> {
    let hl = 20 + options.len();
    let mut p = vec![0u8; hl];
    p[0] = 0x40 | (hl / 4) as u8;
    p[1] = 0xb8;
    put16(&mut p, ip4::TOTAL_LEN, (hl + payload_len) as u16);
    put16(&mut p, ip4::ID, 0xbeef);
    put16(&mut p, ip4::FRAG, frag);
    p[ip4::TTL] = 61;
    p[ip4::PROTOCOL] = 17;
    p[12..16].copy_from_slice(&[198, 18, 0, 1]);
    p[16..20].copy_from_slice(&[198, 18, 9, 9]);
    p[20..hl].copy_from_slice(options);
    let c = checksum::checksum(&p);
    put16(&mut p, ip4::CHECKSUM, c);
    p.extend((0..payload_len).map(|i| (i * 13 + i / 256) as u8));
    p
}

/// Every fragment of `original` split at `max_len`, as separate packets.
fn fragments(original: &[u8], max_len: usize) -> Vec<Vec<u8>> {
    let s = Ip4Split::plan(original, max_len, 1000).expect("splits");
    (0..s.count())
        .map(|k| {
            let mut f = vec![0u8; s.header_len()];
            s.write_header(original, k, &mut f);
            let (at, len) = s.payload_range(k);
            f.extend_from_slice(&original[at..at + len]);
            f
        })
        .collect()
}

/// Reassemble fragments (RFC 791 §3.2): payload bytes placed by offset, the first fragment's
/// header, the total length recomputed. Checks each fragment on the way.
fn reassemble(frags: &[Vec<u8>]) -> (Vec<u8>, u16, usize) {
    let mut data = vec![None; 70000];
    let mut end = 0;
    let mut header = Vec::new();
    let mut first_offset = usize::MAX;
    let mut last_more = 0;
    for f in frags {
        let hl = usize::from(f[0] & 0x0f) * 4;
        assert_eq!(checksum::checksum(&f[..hl]), 0, "header checksum");
        assert_eq!(usize::from(be16(f, 2)), f.len(), "total length");
        let word = be16(f, 6);
        assert_eq!(word & DONT_FRAGMENT, 0);
        let off = usize::from(word & 0x1fff) * 8;
        let payload = &f[hl..];
        if word & 0x2000 != 0 {
            assert_eq!(
                payload.len() % 8,
                0,
                "a non-last fragment holds 8-byte units"
            );
        }
        for (i, &b) in payload.iter().enumerate() {
            assert!(data[off + i].is_none(), "overlap at {}", off + i);
            data[off + i] = Some(b);
        }
        if off + payload.len() >= end {
            end = off + payload.len();
            last_more = word & 0x2000;
        }
        if off < first_offset {
            first_offset = off;
            header = f[..hl].to_vec();
        }
    }
    let payload: Vec<u8> = data[first_offset..end]
        .iter()
        .map(|b| b.expect("no hole"))
        .collect();
    let mut p = header;
    p.extend_from_slice(&payload);
    (p, last_more, first_offset)
}

#[test]
fn a_1476_byte_payload_splits_at_1476_into_two_whose_reassembly_is_the_packet() {
    let p = packet(&[], 1480, 0);
    let f = fragments(&p, 1476);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].len(), 20 + 1456);
    assert_eq!(f[1].len(), 20 + 24);
    assert_eq!(be16(&f[0], 6), 0x2000);
    assert_eq!(be16(&f[1], 6), 1456 / 8);
    let (r, more, off) = reassemble(&f);
    assert_eq!((more, off), (0, 0));
    assert_eq!(r[20..], p[20..]);
    assert_eq!(r[..2], p[..2]);
    assert_eq!(r[4..6], p[4..6], "identification kept");
    assert_eq!(r[8..10], p[8..10], "TTL and protocol kept");
    assert_eq!(r[12..20], p[12..20], "addresses kept");
}

#[test]
fn a_fragment_splits_into_fragments_that_continue_its_offset_and_keep_its_more_flag() {
    let middle = packet(&[], 1000, ip4::MORE_FRAGMENTS | 100);
    let f = fragments(&middle, 420);
    assert_eq!(f.len(), 3);
    assert!(
        f.iter().all(|x| be16(x, 6) & 0x2000 != 0),
        "all but none last"
    );
    let (r, more, off) = reassemble(&f);
    assert_eq!((more, off), (0x2000, 800));
    assert_eq!(r[20..], middle[20..]);

    let last = packet(&[], 1000, 100);
    let f = fragments(&last, 420);
    assert_eq!(
        be16(&f[2], 6),
        100 + 2 * 400 / 8,
        "the last piece ends the datagram"
    );
    assert_eq!(reassemble(&f).1, 0);
}

#[test]
fn later_fragments_keep_copied_options_and_blank_the_others() {
    // Router alert (copied, 4 bytes), then a record-route (not copied, 7 bytes) and an end.
    let opts = [0x94, 4, 0, 0, 7, 7, 4, 0, 0, 0, 0, 0];
    let p = packet(&opts, 600, 0);
    let f = fragments(&p, 300);
    assert_eq!(f[0][20..32], opts, "the first fragment keeps every option");
    for later in &f[1..] {
        assert_eq!(later[20..24], opts[..4], "router alert copied");
        assert_eq!(later[24..31], [1u8; 7], "record route blanked with NOPs");
        assert_eq!(later[31], 0);
    }
    assert_eq!(reassemble(&f).0[32..], p[32..]);
}

#[test]
fn refusals_say_why() {
    let p = packet(&[], 1480, 0);
    assert_eq!(Ip4Split::plan(&p, 1500, 64), Err(FragError::Fits));
    assert_eq!(Ip4Split::plan(&p, 27, 64), Err(FragError::TooSmall));
    assert_eq!(Ip4Split::plan(&p, 100, 8), Err(FragError::TooMany));
    let df = packet(&[], 1480, DONT_FRAGMENT);
    assert_eq!(Ip4Split::plan(&df, 576, 64), Err(FragError::DontFragment));
    assert_eq!(
        Ip4Split::plan(&p[..1000], 576, 64),
        Err(FragError::Malformed)
    );
    assert_eq!(Ip4Split::plan(&[], 576, 64), Err(FragError::Malformed));
    let mut v6 = p.clone();
    v6[0] = 0x65;
    assert_eq!(Ip4Split::plan(&v6, 576, 64), Err(FragError::Malformed));
    let mut short_ihl = p.clone();
    short_ihl[0] = 0x44;
    assert_eq!(
        Ip4Split::plan(&short_ihl, 576, 64),
        Err(FragError::Malformed)
    );
    let mut short_total = p.clone();
    put16(&mut short_total, 2, 19);
    assert_eq!(
        Ip4Split::plan(&short_total, 576, 64),
        Err(FragError::Malformed)
    );
    let bad_opt = packet(&[0x07, 9, 0, 0], 1000, 0);
    assert_eq!(
        Ip4Split::plan(&bad_opt, 576, 64),
        Err(FragError::BadOptions)
    );
    let zero_len_opt = packet(&[0x44, 0, 0, 0], 1000, 0);
    assert_eq!(
        Ip4Split::plan(&zero_len_opt, 576, 64),
        Err(FragError::BadOptions)
    );
    // The last fragment would start past the 13-bit offset.
    let late = packet(&[], 1000, 0x1fff - 10);
    assert_eq!(Ip4Split::plan(&late, 200, 64), Err(FragError::TooMany));
}

#[test]
fn l2_padding_after_the_packet_is_not_carried() {
    let mut p = packet(&[], 100, 0);
    let whole_len = p.len();
    p.extend_from_slice(&[0xee; 30]);
    let (r, _, _) = reassemble(&fragments(&p, 60));
    assert_eq!(r.len(), whole_len);
    assert_eq!(r[20..], p[20..whole_len]);
}

proptest! {
    #[test]
    fn reassembly_gives_back_the_payload(
        payload_len in 1usize..4000,
        max_len in 28usize..2000,
        option_words in 0usize..10,
        offset8 in 0u16..200,
        more in any::<bool>(),
    ) {
        // Router-alert options (copied into every fragment).
        let opts: Vec<u8> = (0..option_words * 4)
            .map(|i| [0x94, 4, 0, 0][i % 4])
            .collect();
        let frag = offset8 | if more { ip4::MORE_FRAGMENTS } else { 0 };
        // A fragment with more after it holds whole 8-byte units.
        let payload_len = if more { payload_len.div_ceil(8) * 8 } else { payload_len };
        let p = packet(&opts, payload_len, frag);
        match Ip4Split::plan(&p, max_len, 1000) {
            Ok(_) => {
                let f = fragments(&p, max_len);
                prop_assert!(f.iter().all(|x| x.len() <= max_len));
                let (r, last_more, off) = reassemble(&f);
                prop_assert_eq!(&r[20 + opts.len()..], &p[20 + opts.len()..]);
                prop_assert_eq!(off, usize::from(offset8) * 8);
                prop_assert_eq!(last_more != 0, more);
            }
            Err(FragError::Fits) => prop_assert!(p.len() <= max_len),
            Err(FragError::TooSmall) => prop_assert!(max_len < 20 + opts.len() + 8),
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
    }
}

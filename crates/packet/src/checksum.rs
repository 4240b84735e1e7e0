//! Internet checksum helpers (RFC 1071 sums, RFC 1624 incremental updates, pseudo-headers).
//! Pure functions over bytes: they never look at metadata and never allocate.

/// Add `data` to a running one's-complement sum (not folded). Odd lengths pad with a zero byte.
/// Long inputs (payloads) go through `sum_words`, three times faster than the big-endian
/// word loop that short ones (headers) keep.
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut data = data;
    if data.len() >= WIDE_MIN {
        // A multiple of 4 bytes, so the rest below starts at an even offset as it must.
        let (words, rest) = data.split_at(data.len() & !3);
        acc = add(acc, sum_words(words));
        data = rest;
    }
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc = add(acc, w);
    }
    // Fold to 33 bits (2^32 = 1 mod 0xffff) so the small additions below cannot overflow.
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u16::from_be_bytes([p[0], p[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

/// Inputs at least this long take the wide loop of `sum_words`.
const WIDE_MIN: usize = 128;

/// The one's-complement sum of `data` (a whole number of 32-bit words), folded to 16 bits.
///
/// RFC 1071 section 2(B): the sum does not depend on byte order, except that summing words in
/// the other order gives the byte-swapped result. So this adds native-endian 32-bit words into
/// a 64-bit accumulator, which cannot carry before 2^32 words, leaving a loop without a carry
/// chain that the compiler vectorises, then folds and swaps once (3 times faster than the
/// big-endian u64 loop with its end-around carry).
#[inline(never)]
fn sum_words(data: &[u8]) -> u64 {
    // 2^31 words (8 GiB) at most per accumulator; longer inputs (never a packet) are split.
    // Outside the loop: an outer loop over blocks kept the compiler from vectorising it.
    const MAX: u64 = 1 << 33;
    if data.len() as u64 > MAX {
        let (a, b) = data.split_at(MAX as usize);
        return add(sum_words(a), sum_words(b));
    }
    let mut words = data.chunks_exact(4);
    let mut ne = 0u64;
    for w in &mut words {
        ne += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    debug_assert!(words.remainder().is_empty(), "sum_words takes whole words");
    let folded = fold(ne);
    u64::from(if cfg!(target_endian = "little") {
        folded.swap_bytes()
    } else {
        folded
    })
}

/// Fold a running sum to 16 bits (not complemented): each half added to the other with its
/// carry added back (end-around), 64 -> 32 -> 16 bits. An end-around add of two n-bit values
/// cannot carry twice, so two steps do what five shift-and-mask steps did (`add`/`adc` pairs;
/// the L3DSR rewrite folds twice per packet).
#[inline]
pub fn fold(acc: u64) -> u16 {
    let (lo, carry) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let acc = lo + u32::from(carry);
    let (lo, carry) = (acc as u16).overflowing_add((acc >> 16) as u16);
    lo + u16::from(carry)
}

/// The Internet checksum of `data` (complemented fold of the sum).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(0, data))
}

/// RFC 1624 eqn. 3: the new checksum after a 16-bit field changed from `old` to `new`.
#[inline(always)]
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    let acc = (!check as u32) + (!old as u32) + new as u32;
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    !(acc as u16)
}

/// The new checksum after a 32-bit field changed from `old` to `new`.
#[inline(always)]
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    let c = update16(check, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// Add two running sums without overflow (end-around carry).
#[inline(always)]
pub fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// Sum of the IPv4 pseudo-header for an upper-layer checksum (folded to 16 bits, so callers may
/// add small terms to it freely).
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, length: u16) -> u64 {
    let acc = sum(sum(0, &src), &dst);
    fold(acc) as u64 + protocol as u64 + length as u64
}

/// Sum of the IPv6 pseudo-header for an upper-layer checksum (folded to 16 bits, so callers may
/// add small terms to it freely).
#[inline]
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, length: u32) -> u64 {
    let acc = sum(sum(0, &src), &dst);
    fold(acc) as u64 + (length >> 16) as u64 + (length & 0xffff) as u64 + next_header as u64
}

/// Compute the TCP or UDP checksum of an Ethernet frame whose sender left it to offload
/// (CHECKSUM_PARTIAL: the field holds only the pseudo-header sum). Handles up to two VLAN tags,
/// IPv4 (not fragmented) and IPv6 (TCP/UDP right after the fixed header). Returns false, leaving
/// the frame as it is, when it is not such a packet or is truncated.
pub fn finish_l4_checksum(frame: &mut [u8]) -> bool {
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let mut l3 = 14;
    if frame.len() < l3 {
        return false;
    }
    let mut ethertype = be16(frame, 12);
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            if frame.len() < l3 + 4 {
                return false;
            }
            ethertype = be16(frame, l3 + 2);
            l3 += 4;
        }
    }
    let (pseudo, l4, end, protocol) = match ethertype {
        0x0800 => {
            let Some(h) = frame.get(l3..l3 + 20) else {
                return false;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(be16(h, 2));
            // Fragments carry no (complete) L4 header to finish.
            if h[0] >> 4 != 4 || ihl < 20 || total < ihl || be16(h, 6) & 0x3fff != 0 {
                return false;
            }
            let (mut src, mut dst) = ([0u8; 4], [0u8; 4]);
            src.copy_from_slice(&h[12..16]);
            dst.copy_from_slice(&h[16..20]);
            let len = (total - ihl) as u16;
            (
                pseudo_header_v4(src, dst, h[9], len),
                l3 + ihl,
                l3 + total,
                h[9],
            )
        }
        0x86dd => {
            let Some(h) = frame.get(l3..l3 + 40) else {
                return false;
            };
            let payload = usize::from(be16(h, 4));
            let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
            src.copy_from_slice(&h[8..24]);
            dst.copy_from_slice(&h[24..40]);
            let pseudo = pseudo_header_v6(src, dst, h[6], payload as u32);
            (pseudo, l3 + 40, l3 + 40 + payload, h[6])
        }
        _ => return false,
    };
    let field = match protocol {
        6 => 16,
        17 => 6,
        _ => return false,
    };
    if end > frame.len() || l4 + field + 2 > end {
        return false;
    }
    frame[l4 + field] = 0;
    frame[l4 + field + 1] = 0;
    let mut c = !fold(add(pseudo, sum(0, &frame[l4..end])));
    if protocol == 17 && c == 0 {
        c = 0xffff; // RFC 768: a computed zero is sent as all ones.
    }
    frame[l4 + field..l4 + field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn partial_checksums_are_finished_like_full_ones() {
        use crate::headers::{build_udp_frame, UdpFrameSpec};
        for (src, dst) in [
            ("198.18.0.1", "198.18.1.9"),
            ("2001:db8::1", "2001:db8:1::9"),
        ] {
            for vlan in [None, Some(7)] {
                let good = build_udp_frame(&UdpFrameSpec {
                    src_ip: src.parse().unwrap(),
                    dst_ip: dst.parse().unwrap(),
                    vlan,
                    frame_size: 101,
                    ..UdpFrameSpec::default()
                });
                let mut partial = good.clone();
                let at = 14 + vlan.map_or(0, |_| 4) + if src.contains(':') { 40 } else { 20 } + 6;
                partial[at] = 0x12;
                partial[at + 1] = 0x34;
                assert!(finish_l4_checksum(&mut partial));
                assert_eq!(partial, good, "{src} vlan {vlan:?}");
            }
        }
        // Not TCP/UDP, truncated, fragments: left alone.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[8, 6]);
        assert!(!finish_l4_checksum(&mut arp));
        assert!(!finish_l4_checksum(&mut [0u8; 10]));
        let mut frag = build_udp_frame(&UdpFrameSpec::default());
        frag[20] = 0x20; // more fragments
        assert!(!finish_l4_checksum(&mut frag));
    }

    #[test]
    fn sums_near_the_top_of_u64_do_not_overflow() {
        let ff = [0xffu8; 16];
        let acc = sum(sum(0, &ff), &ff);
        assert_eq!(
            fold(sum(acc, &[0xff, 0xff, 0xff])),
            fold(sum(0, &[0xff; 35]))
        );
        assert_eq!(
            fold(pseudo_header_v6(ff, ff, 17, 0xffff_ffff)),
            fold(pseudo_header_v6(ff, ff, 17, 0xffff_ffff))
        );
        assert_eq!(fold(add(u64::MAX, u64::MAX)), fold(add(0xffff, 0xffff)));
    }

    #[test]
    fn rfc1071_example() {
        // The example of RFC 1071 section 3: sum 0xddf2, checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), 0x220d);
    }

    /// The five-step fold `fold` replaced, as the reference.
    fn fold_by_shifts(mut acc: u64) -> u16 {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
        acc = (acc & 0xffff_ffff) + (acc >> 32);
        acc = (acc & 0xffff) + (acc >> 16);
        acc = (acc & 0xffff) + (acc >> 16);
        acc = (acc & 0xffff) + (acc >> 16);
        acc as u16
    }

    #[test]
    fn fold_edges() {
        for acc in [
            0,
            1,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_ffff_ffff_ffff,
            0xffff_0000_ffff_0000,
            0x8000_0000_8000_0000,
        ] {
            assert_eq!(fold(acc), fold_by_shifts(acc), "{acc:#x}");
        }
    }

    proptest! {
        #[test]
        fn fold_matches_shifts(acc in any::<u64>(), small in 0u64..(1 << 36)) {
            prop_assert_eq!(fold(acc), fold_by_shifts(acc));
            prop_assert_eq!(fold(small), fold_by_shifts(small));
        }

        #[test]
        fn incremental_matches_full(mut data in proptest::collection::vec(any::<u8>(), 2..64), at in 0usize..31, new in any::<u16>()) {
            let at = (at * 2) % (data.len() & !1);
            let before = checksum(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let full = checksum(&data);
            let inc = update16(before, old, new);
            // 0x0000 and 0xffff are the same value in one's complement.
            prop_assert!(inc == full || (inc ^ full) == 0xffff && (inc == 0 || full == 0));
        }

        #[test]
        fn sum_matches_bytewise(data in proptest::collection::vec(any::<u8>(), 0..700), acc in any::<u64>()) {
            // Past WIDE_MIN the wide loop runs; every length mod 8 and a running sum near the
            // top of u64 are covered.
            let mut naive: u64 = fold(acc) as u64;
            for p in data.chunks(2) {
                let w = if p.len() == 2 { u16::from_be_bytes([p[0], p[1]]) } else { (p[0] as u16) << 8 };
                naive += w as u64;
            }
            prop_assert_eq!(fold(sum(acc, &data)), fold(naive));
        }
    }
}

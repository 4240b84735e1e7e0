//! Internet checksum helpers (RFC 1071 sums, RFC 1624 incremental updates, pseudo-headers).
//! Pure functions over bytes: they never look at metadata and never allocate.

/// Add `data` to a running one's-complement sum (not folded). Odd lengths pad with a zero byte.
#[inline]
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(w);
        acc = s + carry as u64;
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

/// Fold a running sum to 16 bits (not complemented).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
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
        fn sum_matches_bytewise(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut naive: u64 = 0;
            for p in data.chunks(2) {
                let w = if p.len() == 2 { u16::from_be_bytes([p[0], p[1]]) } else { (p[0] as u16) << 8 };
                naive += w as u64;
            }
            prop_assert_eq!(fold(sum(0, &data)), fold(naive));
        }
    }
}

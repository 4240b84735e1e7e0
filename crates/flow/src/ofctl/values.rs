//! Value syntax of `ovs-ofctl`: integers (decimal or `0x` hex), Ethernet, IPv4 and IPv6
//! addresses, each with an optional `/mask` (a prefix length or a full mask), and their printing.
//! Owns no field knowledge beyond widths; never panics on any text.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::OfctlError;

/// Parse a non-negative integer: decimal, or hex with `0x`.
pub(crate) fn parse_uint(s: &str) -> Option<u128> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || h.len() > 32 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(h, 16).ok()
    } else {
        if s.is_empty() || s.len() > 39 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u128>().ok()
    }
}

/// All-ones of `bits` (1..=128).
pub(crate) fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// An integer of at most `bits` bits, for `field` (error names `token`).
pub(crate) fn uint_of(field: &str, s: &str, bits: u32, token: &str) -> Result<u128, OfctlError> {
    let v = parse_uint(s).ok_or_else(|| {
        OfctlError::value(
            field,
            token,
            "not a number (accepted: decimal or 0x-prefixed hex)",
        )
    })?;
    if v > ones(bits) {
        return Err(OfctlError::value(
            field,
            token,
            format!("{v:#x} is wider than the field's {bits} bits"),
        ));
    }
    Ok(v)
}

/// `VALUE[/MASK]` as integers of `bits` bits (mask defaults to all ones).
pub(crate) fn uint_masked(field: &str, s: &str, bits: u32) -> Result<(u128, u128), OfctlError> {
    match s.split_once('/') {
        None => Ok((uint_of(field, s, bits, s)?, ones(bits))),
        Some((v, m)) => {
            let v = uint_of(field, v, bits, s)?;
            let mask = parse_uint(m).ok_or_else(|| {
                OfctlError::mask(
                    field,
                    s,
                    "the mask is not a number (accepted: decimal or 0x-prefixed hex)",
                )
            })?;
            if mask > ones(bits) {
                return Err(OfctlError::mask(
                    field,
                    s,
                    format!("mask {mask:#x} is wider than the field's {bits} bits"),
                ));
            }
            Ok((v, mask))
        }
    }
}

/// An Ethernet address `xx:xx:xx:xx:xx:xx` as a 48-bit number.
pub(crate) fn parse_mac(s: &str) -> Option<u128> {
    let mut v = 0u128;
    let mut n = 0;
    for part in s.split(':') {
        if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        v = (v << 8) | u128::from(u8::from_str_radix(part, 16).ok()?);
        n += 1;
    }
    (n == 6).then_some(v)
}

/// `MAC[/MAC]`.
pub(crate) fn mac_masked(field: &str, s: &str) -> Result<(u128, u128), OfctlError> {
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let bad = || {
        OfctlError::value(
            field,
            s,
            "not an Ethernet address (accepted: xx:xx:xx:xx:xx:xx[/xx:xx:xx:xx:xx:xx])",
        )
    };
    let v = parse_mac(v).ok_or_else(bad)?;
    let m = match m {
        None => ones(48),
        Some(m) => parse_mac(m).ok_or_else(|| {
            OfctlError::mask(
                field,
                s,
                "not an Ethernet mask (accepted: xx:xx:xx:xx:xx:xx)",
            )
        })?,
    };
    Ok((v, m))
}

/// `A.B.C.D[/N|/A.B.C.D]`.
pub(crate) fn ipv4_masked(field: &str, s: &str) -> Result<(u128, u128), OfctlError> {
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let addr: Ipv4Addr = v.parse().map_err(|_| {
        OfctlError::value(
            field,
            s,
            "not an IPv4 address (accepted: A.B.C.D, A.B.C.D/N with N 0..=32, A.B.C.D/A.B.C.D)",
        )
    })?;
    let mask = match m {
        None => u32::MAX,
        Some(m) if m.contains('.') => u32::from(m.parse::<Ipv4Addr>().map_err(|_| {
            OfctlError::mask(
                field,
                s,
                "not an IPv4 mask (accepted: /N with N 0..=32 or /A.B.C.D)",
            )
        })?),
        Some(m) => match m.parse::<u32>() {
            Ok(n) if n <= 32 => prefix_mask(n, 32) as u32,
            _ => {
                return Err(OfctlError::mask(
                    field,
                    s,
                    "an IPv4 prefix length must be 0..=32",
                ))
            }
        },
    };
    Ok((u128::from(u32::from(addr)), u128::from(mask)))
}

/// `ADDR[/N|/ADDR]` for IPv6.
pub(crate) fn ipv6_masked(field: &str, s: &str) -> Result<(u128, u128), OfctlError> {
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let addr: Ipv6Addr = v.parse().map_err(|_| {
        OfctlError::value(
            field,
            s,
            "not an IPv6 address (accepted: X:X::X, X:X::X/N with N 0..=128, X:X::X/X:X::X)",
        )
    })?;
    let mask = match m {
        None => u128::MAX,
        Some(m) if m.contains(':') => u128::from(m.parse::<Ipv6Addr>().map_err(|_| {
            OfctlError::mask(
                field,
                s,
                "not an IPv6 mask (accepted: /N with N 0..=128 or /X:X::X)",
            )
        })?),
        Some(m) => match m.parse::<u32>() {
            Ok(n) if n <= 128 => prefix_mask(n, 128),
            _ => {
                return Err(OfctlError::mask(
                    field,
                    s,
                    "an IPv6 prefix length must be 0..=128",
                ))
            }
        },
    };
    Ok((u128::from(addr), mask))
}

/// The mask of an `n`-bit prefix of a `bits`-bit field.
pub(crate) fn prefix_mask(n: u32, bits: u32) -> u128 {
    if n == 0 {
        0
    } else {
        ones(bits) & !(ones(bits - n.min(bits)))
    }
}

/// The prefix length of `mask` when it is a prefix mask of a `bits`-bit field.
pub(crate) fn prefix_len(mask: u128, bits: u32) -> Option<u32> {
    (0..=bits).find(|&n| prefix_mask(n, bits) == mask)
}

/// `xx:xx:xx:xx:xx:xx`.
pub(crate) fn fmt_mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// C's `%#x`: `0` for zero, `0x...` otherwise.
pub(crate) fn fmt_hash_x(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// An IPv4 value with its mask as OVS prints it (`/N` for a prefix, none for /32).
pub(crate) fn fmt_ipv4_masked(v: u128, m: u128) -> String {
    let a = Ipv4Addr::from(v as u32);
    if m == ones(32) {
        return a.to_string();
    }
    match prefix_len(m, 32) {
        Some(n) => format!("{a}/{n}"),
        None => format!("{a}/{}", Ipv4Addr::from(m as u32)),
    }
}

/// An IPv6 value with its mask as OVS prints it.
pub(crate) fn fmt_ipv6_masked(v: u128, m: u128) -> String {
    let a = fmt_ipv6(v);
    if m == u128::MAX {
        return a;
    }
    match prefix_len(m, 128) {
        Some(n) => format!("{a}/{n}"),
        None => format!("{a}/{}", fmt_ipv6(m)),
    }
}

/// An IPv6 address in the compressed form, as glibc's `inet_ntop` prints it (which, unlike
/// Rust, also writes `::a.b.c.d` for an IPv4-compatible address with a zero run of six words).
pub(crate) fn fmt_ipv6(v: u128) -> String {
    if v >> 32 == 0 && (v >> 16) & 0xffff != 0 {
        return format!("::{}", Ipv4Addr::from(v as u32));
    }
    Ipv6Addr::from(v).to_string()
}

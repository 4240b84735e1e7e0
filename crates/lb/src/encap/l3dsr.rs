//! L3DSR (IPv4 only): the destination becomes the server, the DSCP becomes the VIP's (ECN
//! kept), and the IPv4 and TCP/UDP checksums are updated incrementally. The server maps the
//! DSCP back to the VIP and replies straight to the client. It never changes the length.

use super::{l3_mut, l3_mut_len, Delta, EncapError};
use crate::parse::{Kind, Parsed, Plain4};
use packet::headers::{ip4, proto};
use packet::BufferMeta;

/// Rewrite the IPv4 packet of `p` for L3DSR to `server` with `dscp` (its low 6 bits). ICMP errors and
/// fragments are rewritten the same way (only the IP header changes for them, and for any
/// protocol but TCP and UDP). `FamilyMismatch` for an IPv6 packet.
#[inline]
pub fn l3dsr(
    meta: &BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    server: [u8; 4],
    dscp: u8,
) -> Result<(), EncapError> {
    if p.tuple.ip6 {
        return Err(EncapError::FamilyMismatch);
    }
    let h = l3_mut(meta, slot, p)?;
    let l4 = match p.kind {
        Kind::Normal | Kind::Syn | Kind::FinRst | Kind::FirstFragment => p.l4,
        Kind::LaterFragment | Kind::IcmpError => 0,
    };
    let sum_at = match p.tuple.protocol {
        proto::TCP if l4 != 0 => l4 + 16,
        proto::UDP if l4 != 0 => l4 + 6,
        _ => 0,
    };
    rewrite(h, sum_at, p.tuple.protocol == proto::UDP, server, dscp)
}

/// [`l3dsr`] of a plain IPv4 TCP or UDP packet (the `lb` node's fast lane): the same bytes,
/// without a `Parsed`.
#[inline(always)]
pub fn l3dsr_plain4(
    meta: &BufferMeta,
    slot: &mut [u8],
    p: &Plain4,
    server: [u8; 4],
    dscp: u8,
) -> Result<(), EncapError> {
    let h = l3_mut_len(meta, slot, usize::from(p.len))?;
    let udp = p.protocol == proto::UDP;
    let sum_at = ip4::MIN_HEADER_LEN + if udp { 6 } else { 16 };
    rewrite(h, sum_at, udp, server, dscp)
}

/// Rewrite the IPv4 packet `h` (its bytes, from its IP header to its end) for `server` and
/// `dscp`; its TCP or UDP checksum (`udp` says which) is at `sum_at`, or none when 0.
#[inline(always)]
fn rewrite(
    h: &mut [u8],
    sum_at: usize,
    udp: bool,
    server: [u8; 4],
    dscp: u8,
) -> Result<(), EncapError> {
    if h.len() < ip4::MIN_HEADER_LEN || sum_at + 2 > h.len() {
        return Err(EncapError::BadFrame);
    }
    // Fixed-size views: one length check above, no per-byte bounds checks below.
    let (ip, rest) = h.split_at_mut(ip4::MIN_HEADER_LEN);
    let ip: &mut [u8; ip4::MIN_HEADER_LEN] = ip.try_into().map_err(|_| EncapError::BadFrame)?;
    // RFC 1624 in native byte order: the one's complement sum does not depend on the byte
    // order it is computed in (RFC 1071), nor on summing 32-bit words instead of 16-bit ones,
    // so the words are loaded and stored as they are, without swapping.
    let tos_old = u16::from_ne_bytes([ip[0], ip[1]]);
    let tos_new = u16::from_ne_bytes([ip[0], (dscp & 0x3f) << 2 | ip[ip4::TOS] & 0x03]);
    let dst_at = ip4::DST;
    let dst_old = u32::from_ne_bytes([ip[dst_at], ip[dst_at + 1], ip[dst_at + 2], ip[dst_at + 3]]);
    let dst_new = u32::from_ne_bytes(server);
    let addr = u64::from(!dst_old) + u64::from(dst_new);
    let header = addr + u64::from(!tos_old) + u64::from(tos_new);
    ip[..2].copy_from_slice(&tos_new.to_ne_bytes());
    ip[dst_at..dst_at + 4].copy_from_slice(&server);
    let at = ip4::CHECKSUM;
    let check = u16::from_ne_bytes([ip[at], ip[at + 1]]);
    ip[at..at + 2].copy_from_slice(&Delta(header).apply(check).to_ne_bytes());
    // The L4 checksum is after the 20 fixed IP header bytes (`sum_at` is 0 or at least 26);
    // its pseudo-header holds the destination address.
    if let Some(at) = sum_at
        .checked_sub(ip4::MIN_HEADER_LEN)
        .filter(|_| sum_at != 0)
    {
        // `sum_at + 2 <= h.len()` was checked before anything was written: this cannot fail.
        let Some(field) = rest.get_mut(at..at + 2) else {
            return Err(EncapError::BadFrame);
        };
        let check = u16::from_ne_bytes([field[0], field[1]]);
        // UDP over IPv4 without a checksum stays without one; a UDP sum of 0 is sent as
        // 0xffff (both read the same in either byte order).
        if !(udp && check == 0) {
            let mut new = Delta(addr).apply(check);
            if udp && new == 0 {
                new = 0xffff;
            }
            field.copy_from_slice(&new.to_ne_bytes());
        }
    }
    Ok(())
}

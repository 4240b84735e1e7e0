//! L3DSR (IPv4 only): the destination becomes the server, the DSCP becomes the VIP's (ECN
//! kept), and the IPv4 and TCP/UDP checksums are updated incrementally. The server maps the
//! DSCP back to the VIP and replies straight to the client. It never changes the length.

use super::{l3_mut, set_addr, set_word, update_at, Delta, EncapError};
use crate::parse::{Kind, Parsed};
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
    if h.len() < ip4::MIN_HEADER_LEN || sum_at + 2 > h.len() {
        return Err(EncapError::BadFrame);
    }
    // Fixed-size views: one length check above, no per-byte bounds checks below.
    let (ip, rest) = h.split_at_mut(ip4::MIN_HEADER_LEN);
    let ip: &mut [u8; ip4::MIN_HEADER_LEN] = ip.try_into().map_err(|_| EncapError::BadFrame)?;
    let mut tos_delta = Delta::default();
    let mut addr = Delta::default();
    let tos = u16::from(ip[0]) << 8 | u16::from((dscp & 0x3f) << 2 | ip[ip4::TOS] & 0x03);
    set_word(ip, 0, tos, &mut tos_delta);
    set_addr(ip, ip4::DST, &server, &mut addr);
    let mut unused = Delta::default();
    update_at(ip, ip4::CHECKSUM, tos_delta.plus(addr), false, &mut unused);
    // The L4 checksum is after the 20 fixed IP header bytes (`sum_at` is 0 or at least 26).
    if let Some(at) = sum_at
        .checked_sub(ip4::MIN_HEADER_LEN)
        .filter(|_| sum_at != 0)
    {
        update_at(rest, at, addr, p.tuple.protocol == proto::UDP, &mut unused);
    }
    Ok(())
}

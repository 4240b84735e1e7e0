//! L3DSR (IPv4 only): the destination becomes the server, the DSCP becomes the VIP's (ECN
//! kept), and the IPv4 and TCP/UDP checksums are updated incrementally. The server maps the
//! DSCP back to the VIP and replies straight to the client. It never changes the length.

use super::{l3_mut, update_at, Delta, EncapError};
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
    let old_tos = u16::from_be_bytes([ip[0], ip[1]]);
    let new_tos = old_tos & 0xff03 | u16::from(dscp & 0x3f) << 2;
    let old_dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    let new_dst = u32::from_be_bytes(server);
    let mut addr = Delta::default();
    addr.word((old_dst >> 16) as u16, (new_dst >> 16) as u16);
    addr.word(old_dst as u16, new_dst as u16);
    let mut ip_delta = addr;
    ip_delta.word(old_tos, new_tos);
    ip[ip4::TOS] = new_tos as u8;
    ip[16..20].copy_from_slice(&server);
    let check = u16::from_be_bytes([ip[ip4::CHECKSUM], ip[ip4::CHECKSUM + 1]]);
    ip[ip4::CHECKSUM..ip4::CHECKSUM + 2].copy_from_slice(&ip_delta.apply(check).to_be_bytes());
    // The L4 checksum is after the 20 fixed IP header bytes (`sum_at` is 0 or at least 26).
    if let Some(at) = sum_at
        .checked_sub(ip4::MIN_HEADER_LEN)
        .filter(|_| sum_at != 0)
    {
        let mut unused = Delta::default();
        update_at(rest, at, addr, p.tuple.protocol == proto::UDP, &mut unused);
    }
    Ok(())
}

//! NAT4/NAT6: forward (client -> VIP:port becomes client -> server:target_port) and reverse
//! (server:target_port -> client becomes VIP:port -> client), with the IPv4 header and
//! TCP/UDP/ICMPv6 checksums updated incrementally; ICMP errors are handed to `icmp`. It never
//! changes the packet's length and never looks at a table.

use super::icmp::rewrite_icmp_error;
use super::{l3_mut, set_addr, set_word, unmapped, update_at, Delta, EncapError};
use crate::parse::{Kind, Parsed};
use packet::headers::{ip4, ip6, proto};
use packet::BufferMeta;

/// Which address and port of the packet change.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Destination (forward).
    Dst,
    /// Source (reverse).
    Src,
}

/// NAT forward: destination address := `server` (IPv4-mapped for NAT4), destination port :=
/// `target_port` (TCP and UDP, not on later fragments). An ICMP error toward the VIP (about a
/// reply VIP:port -> client) gets its destination and its quoted source rewritten instead.
#[inline]
pub fn nat_forward(
    meta: &BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    server: [u8; 16],
    target_port: u16,
) -> Result<(), EncapError> {
    rewrite(meta, slot, p, Side::Dst, &server, target_port)
}

/// NAT reverse: source address := `vip` (IPv4-mapped for NAT4), source port := `vip_port`.
/// An ICMP error from the server (about client -> server:target_port) gets its source and its
/// quoted destination rewritten instead.
#[inline]
pub fn nat_reverse(
    meta: &BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    vip: [u8; 16],
    vip_port: u16,
) -> Result<(), EncapError> {
    rewrite(meta, slot, p, Side::Src, &vip, vip_port)
}

#[inline(always)]
fn rewrite(
    meta: &BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    side: Side,
    addr: &[u8; 16],
    port: u16,
) -> Result<(), EncapError> {
    let ip6 = p.tuple.ip6;
    let v4 = unmapped(addr);
    if ip6 == v4.is_some() {
        return Err(EncapError::FamilyMismatch);
    }
    let h = l3_mut(meta, slot, p)?;
    let new: &[u8] = match &v4 {
        Some(a) => a,
        None => addr,
    };
    if p.kind == Kind::IcmpError {
        return rewrite_icmp_error(h, p, side, new, port);
    }
    let (addr_at, l4_sum_at) = offsets(p, side)?;
    if h.len() < addr_at + new.len() || l4_sum_at + 2 > h.len() {
        return Err(EncapError::BadFrame);
    }
    let mut a = Delta::default();
    set_addr(h, addr_at, new, &mut a);
    let mut unused = Delta::default();
    if !ip6 {
        update_at(h, ip4::CHECKSUM, a, false, &mut unused);
    }
    if l4_sum_at == 0 {
        return Ok(());
    }
    let mut l4 = a;
    if matches!(p.tuple.protocol, proto::TCP | proto::UDP) {
        let port_at = p.l4 + if side == Side::Src { 0 } else { 2 };
        set_word(h, port_at, port, &mut l4);
    }
    update_at(
        h,
        l4_sum_at,
        l4,
        !ip6 && p.tuple.protocol == proto::UDP,
        &mut unused,
    );
    Ok(())
}

/// Offsets of the address to change and of the L4 checksum that covers it (0: none).
#[inline(always)]
fn offsets(p: &Parsed, side: Side) -> Result<(usize, usize), EncapError> {
    let addr_at = match (p.tuple.ip6, side) {
        (false, Side::Src) => ip4::SRC,
        (false, Side::Dst) => ip4::DST,
        (true, Side::Src) => ip6::SRC,
        (true, Side::Dst) => ip6::DST,
    };
    if p.kind == Kind::LaterFragment {
        return Ok((addr_at, 0));
    }
    let sum_at = match p.tuple.protocol {
        proto::TCP => p.l4 + 16,
        proto::UDP => p.l4 + 6,
        proto::ICMP6 if p.tuple.ip6 => p.l4 + 2,
        _ => 0,
    };
    Ok((addr_at, sum_at))
}

//! GRE4 and GRE6: the inner IPv4 or IPv6 packet gets an outer IPv4 or IPv6 header and a
//! 4-byte GRE header (RFC 2784, no key, no checksum) written in the buffer's headroom, toward
//! the server, from a per-flow source (see the module docs of `encap`). It never copies the
//! inner packet and never fragments: a packet that would exceed the MTU is left as it was, and
//! `TooBig` says whether the sender may be told (DF, IPv6) or the packet must be fragmented.
//!
//! # Packets too big for the tunnel: inner fragmentation, as Linux does
//! An inner IPv4 packet without DF that does not fit is cut by the `lb` node into fragments of
//! the *inner* packet, each wrapped here as a packet of its own (`packet::frag` cuts,
//! `nodes::lb::wrap::wrap_fragments` makes the buffers); every outer header keeps DF and ID 0.
//! That is what Linux does for `ip_gre` and `ip6_gre`: a GRE device's MTU is the underlay's
//! minus the tunnel overhead, and the IPv4 output path (`ip_finish_output` -> `ip_fragment`)
//! fragments an inner packet without DF against that MTU *before* the tunnel's transmit
//! function adds the outer header. The tunnels themselves only answer what still does not fit
//! when it reaches them: `tnl_update_pmtu` (ip_gre) a DF packet or IPv6, `ip6gre_xmit_ipv4`
//! anything, with "fragmentation needed" / "packet too big". FD.io VPP's tunnels do the same:
//! `ip4-rewrite` sends an inner packet without DF that exceeds the tunnel adjacency's MTU to
//! `ip4-frag`, whose fragments go on to the midchain rewrite.
//!
//! For GRE6, RFC 2473 §7.2 suggests the other way: the tunnel entry wraps the whole IPv4 packet
//! and fragments the outer IPv6 packet with a Fragment header. Mainline Linux does not (only
//! out-of-tree patches keep 4in6 packets whole for §7.2), and neither does this: inner
//! fragmentation needs no outer fragment ID, keeps every outer packet whole for ECMP and the
//! firewalls on the way, and leaves reassembly to the server's IPv4 stack, which is the inner
//! packet's destination anyway. An IPv6 inner packet is never fragmented here (IPv6 routers do
//! not fragment; RFC 2473 §7.1(a)): its sender gets "packet too big".

use super::{unmapped, EncapError};
use crate::parse::Parsed;
use packet::checksum;
use packet::headers::{eth, ip4, put16};
use packet::meta::{FLAG_FLOW_HASH, FLAG_IP6};
use packet::BufferMeta;

/// Bytes GRE4 adds (outer IPv4 header and GRE header).
pub const GRE4_OVERHEAD: usize = 24;
/// Bytes GRE6 adds (outer IPv6 header and GRE header).
pub const GRE6_OVERHEAD: usize = 44;

const PROTO_GRE: u8 = 47;

/// The outer source for a flow: `base` with its low `host_bits` bits (at most 32) taken from
/// the top of `flow_hash`.
#[inline(always)]
pub fn gre_source4(base: [u8; 4], host_bits: u8, flow_hash: u32) -> [u8; 4] {
    let mask = low_mask(host_bits.min(32)) as u32;
    let b = u32::from_be_bytes(base);
    (b & !mask | flow_hash.rotate_right(16) & mask).to_be_bytes()
}

/// The outer IPv6 source for a flow: `base` with its low `host_bits` bits (at most 32) taken
/// from the top of `flow_hash`.
#[inline(always)]
pub fn gre_source6(base: [u8; 16], host_bits: u8, flow_hash: u32) -> [u8; 16] {
    let mask = low_mask(host_bits.min(32));
    let b = u128::from_be_bytes(base);
    (b & !mask | u128::from(flow_hash.rotate_right(16)) & mask).to_be_bytes()
}

#[inline(always)]
fn low_mask(bits: u8) -> u128 {
    (1u128 << bits) - 1
}

/// Where the inner IP header starts in the slot and whether it is IPv6, after the checks
/// common to both: room, MTU, family.
#[inline(always)]
fn prepare(
    meta: &BufferMeta,
    slot: &[u8],
    p: &Parsed,
    overhead: usize,
    mtu: u16,
) -> Result<usize, EncapError> {
    let at = usize::from(meta.data_offset) + usize::from(meta.l3_offset);
    let end = usize::from(meta.data_offset) + usize::from(meta.length);
    if at + p.len > end || end > slot.len() || p.len < ip4::MIN_HEADER_LEN {
        return Err(EncapError::BadFrame);
    }
    if p.len + overhead > usize::from(mtu) {
        let inner_df = !p.tuple.ip6 && slot[at + ip4::FRAG] & 0x40 != 0;
        return Err(EncapError::TooBig {
            mtu: usize::from(mtu).saturating_sub(overhead) as u16,
            signal: p.tuple.ip6 || inner_df,
        });
    }
    if at < overhead + eth::HEADER_LEN {
        return Err(EncapError::NoHeadroom);
    }
    Ok(at)
}

/// Point `meta` at the new frame: 14 bytes for the L2 header, then the outer headers.
#[inline(always)]
fn finish(
    meta: &mut BufferMeta,
    start: usize,
    outer_l3: usize,
    total: usize,
    ip6: bool,
    hash: u32,
) {
    meta.data_offset = start as u16;
    meta.l3_offset = eth::HEADER_LEN as u16;
    meta.l4_offset = (eth::HEADER_LEN + outer_l3) as u16;
    meta.length = (eth::HEADER_LEN + total) as u16;
    meta.vlan = 0;
    meta.flow_hash = hash;
    if ip6 {
        meta.ethertype = eth::TYPE_IPV6;
        meta.flags |= FLAG_IP6 | FLAG_FLOW_HASH;
    } else {
        meta.ethertype = eth::TYPE_IPV4;
        meta.flags = (meta.flags | FLAG_FLOW_HASH) & !FLAG_IP6;
    }
}

/// The GRE protocol type of the inner packet.
#[inline(always)]
fn gre_type(p: &Parsed) -> u16 {
    if p.tuple.ip6 {
        eth::TYPE_IPV6
    } else {
        eth::TYPE_IPV4
    }
}

/// The inner packet's DSCP and ECN (IPv4 TOS or IPv6 traffic class).
#[inline(always)]
fn inner_tos(slot: &[u8], at: usize, ip6: bool) -> u8 {
    if ip6 {
        slot[at] << 4 | slot[at + 1] >> 4
    } else {
        slot[at + ip4::TOS]
    }
}

/// Encapsulate the packet of `p` in IPv4 + GRE from `src` to `server` with `ttl`; `mtu` is the
/// egress MTU toward the server, `flow_hash` the flow's stable hash (kept in `meta.flow_hash`
/// for ECMP). See the module docs for the buffer layout after it.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn gre4(
    meta: &mut BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    src: [u8; 4],
    server: [u8; 4],
    ttl: u8,
    mtu: u16,
    flow_hash: u32,
) -> Result<(), EncapError> {
    let at = prepare(meta, slot, p, GRE4_OVERHEAD, mtu)?;
    let tos = inner_tos(slot, at, p.tuple.ip6);
    let o = at - GRE4_OVERHEAD;
    let total = GRE4_OVERHEAD + p.len;
    let h = &mut slot[o - eth::HEADER_LEN..at];
    h[..eth::HEADER_LEN].fill(0);
    let ip = &mut h[eth::HEADER_LEN..];
    ip[0] = 0x45;
    ip[ip4::TOS] = tos;
    put16(ip, ip4::TOTAL_LEN, total as u16);
    put16(ip, 4, 0);
    put16(ip, ip4::FRAG, 0x4000);
    ip[ip4::TTL] = ttl;
    ip[ip4::PROTOCOL] = PROTO_GRE;
    put16(ip, ip4::CHECKSUM, 0);
    ip[ip4::SRC..ip4::SRC + 4].copy_from_slice(&src);
    ip[ip4::DST..ip4::DST + 4].copy_from_slice(&server);
    let c = checksum::checksum(&ip[..ip4::MIN_HEADER_LEN]);
    put16(ip, ip4::CHECKSUM, c);
    put16(ip, 20, 0);
    put16(ip, 22, gre_type(p));
    finish(meta, o - eth::HEADER_LEN, 20, total, false, flow_hash);
    Ok(())
}

/// Encapsulate the packet of `p` in IPv6 + GRE from `src` to `server` with `hop_limit`; the
/// outer flow label is 20 bits of `flow_hash`. Otherwise like `gre4`.
#[inline]
#[allow(clippy::too_many_arguments)]
pub fn gre6(
    meta: &mut BufferMeta,
    slot: &mut [u8],
    p: &Parsed,
    src: [u8; 16],
    server: [u8; 16],
    hop_limit: u8,
    mtu: u16,
    flow_hash: u32,
) -> Result<(), EncapError> {
    if unmapped(&server).is_some() {
        return Err(EncapError::FamilyMismatch);
    }
    let at = prepare(meta, slot, p, GRE6_OVERHEAD, mtu)?;
    let tos = inner_tos(slot, at, p.tuple.ip6);
    let o = at - GRE6_OVERHEAD;
    let h = &mut slot[o - eth::HEADER_LEN..at];
    h[..eth::HEADER_LEN].fill(0);
    let ip = &mut h[eth::HEADER_LEN..];
    let label = flow_hash & 0x000f_ffff;
    let word = 6u32 << 28 | u32::from(tos) << 20 | label;
    ip[0..4].copy_from_slice(&word.to_be_bytes());
    put16(ip, 4, (4 + p.len) as u16);
    ip[6] = PROTO_GRE;
    ip[7] = hop_limit;
    ip[8..24].copy_from_slice(&src);
    ip[24..40].copy_from_slice(&server);
    put16(ip, 40, 0);
    put16(ip, 42, gre_type(p));
    finish(
        meta,
        o - eth::HEADER_LEN,
        40,
        GRE6_OVERHEAD + p.len,
        true,
        flow_hash,
    );
    Ok(())
}

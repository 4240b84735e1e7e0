//! Datapath actions on packet bytes: `Set` of a header field (with incremental IPv4, TCP, UDP,
//! ICMP, ICMPv6, IGMP checksum updates and a recomputed SCTP CRC32c), `PushVlan` and `PopVlan`
//! (moving the MAC addresses into or out of the buffer's headroom). It trusts nothing: a write
//! to a header the packet does not have is an `ExecError` to count, never a panic; it never
//! allocates and never decides where a packet goes (outputs are the caller's).

use crate::dpaction::{DpAction, TPID_AS_RECEIVED};
use crate::extract::{Parsed, L3, L4, NO_OFFSET};
use crate::key::{Field, FRAG_LATER, VLAN_CFI};
use packet::checksum::{update16, update32};
use packet::meta::FLAG_CSUM_PARTIAL;
use packet::BufferPool;
use thiserror::Error;

/// Why an action could not be applied. The packet is left as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum ExecError {
    /// The packet has no header holding the field (e.g. `nw_ttl` on ARP, `tp_src` on a later
    /// fragment or a truncated segment, `dl_vlan` on an untagged frame).
    #[error("set_field {}: the packet has no header with this field (its kind: {})", .0.name(), .1)]
    NoHeader(Field, &'static str),
    /// The field is not a packet header field that can be written.
    #[error("set_field {}: not writable; writable: dl_src, dl_dst, vlan_tci, dl_vlan, dl_vlan_pcp, nw_src, nw_dst, ipv6_src, ipv6_dst, ipv6_label, ip_dscp, nw_ecn, nw_ttl, tp_src, tp_dst, and on ARP nw_proto (opcode), arp_sha, arp_tha", .0.name())]
    NotWritable(Field),
    /// SCTP ports of a fragment: the CRC32c covers the whole datagram, which is not here.
    #[error("set_field {}: SCTP in a fragment cannot be rewritten (its CRC32c covers the whole datagram)", .0.name())]
    SctpFragment(Field),
    /// `pop_vlan` on a frame without a VLAN tag.
    #[error("pop_vlan: the frame has no VLAN tag")]
    NoVlan,
    /// `push_vlan` on a buffer with fewer than 4 bytes of headroom, or a frame shorter than
    /// an Ethernet header.
    #[error("push_vlan: no room (needs 4 bytes of headroom and a 14-byte Ethernet header)")]
    NoRoom,
    /// `push_vlan` with another TPID than 0x8100 or 0x88a8.
    #[error("push_vlan: TPID {0:#06x} is not accepted; accepted: 0x8100, 0x88a8")]
    BadTpid(u16),
}

impl ExecError {
    /// Number of kinds (`index()` is below it), for counter arrays.
    pub const KINDS: usize = 6;

    /// Index of the kind, for counter arrays.
    pub const fn index(&self) -> usize {
        match self {
            ExecError::NoHeader(..) => 0,
            ExecError::NotWritable(_) => 1,
            ExecError::SctpFragment(_) => 2,
            ExecError::NoVlan => 3,
            ExecError::NoRoom => 4,
            ExecError::BadTpid(_) => 5,
        }
    }

    /// Counter name of the kind.
    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// Counter names by `index()`.
    pub const NAMES: [&'static str; Self::KINDS] = [
        "set_no_header",
        "set_not_writable",
        "set_sctp_fragment",
        "pop_vlan_untagged",
        "push_vlan_no_room",
        "push_vlan_bad_tpid",
    ];
}

fn kind(p: &Parsed) -> &'static str {
    match (p.l3, p.l4) {
        (L3::None, _) => "no network header",
        (L3::Other, _) => "not IP or ARP",
        (L3::Arp, _) => "ARP",
        (L3::Ipv4, L4::None) => "IPv4 without a complete transport header",
        (L3::Ipv6, L4::None) => "IPv6 without a complete transport header",
        (L3::Ipv4, _) => "IPv4",
        (L3::Ipv6, _) => "IPv6",
    }
}

/// The bytes `at..at + len` of `frame`, or the error for `field`.
#[inline(always)]
fn region<'a>(
    frame: &'a mut [u8],
    at: u16,
    len: usize,
    field: Field,
    p: &Parsed,
) -> Result<&'a mut [u8], ExecError> {
    if at == NO_OFFSET {
        return Err(ExecError::NoHeader(field, kind(p)));
    }
    let at = at as usize;
    frame
        .get_mut(at..at + len)
        .ok_or(ExecError::NoHeader(field, kind(p)))
}

#[inline(always)]
fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn wr16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline(always)]
fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline(always)]
fn wr32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Write the masked bits of a `bytes`-long big-endian field at `at`; returns (old, new).
#[inline(always)]
fn masked(b: &mut [u8], at: usize, bytes: usize, value: u128, mask: u128) -> (u128, u128) {
    let mut old = 0u128;
    for &x in &b[at..at + bytes] {
        old = old << 8 | x as u128;
    }
    let new = (old & !mask) | (value & mask);
    for (i, x) in b[at..at + bytes].iter_mut().enumerate() {
        *x = (new >> (8 * (bytes - 1 - i))) as u8;
    }
    (old, new)
}

/// Offset of the checksum in the transport header.
#[inline(always)]
fn l4_checksum_at(l4: L4) -> Option<usize> {
    match l4 {
        L4::Tcp => Some(16),
        L4::Udp => Some(6),
        L4::Icmp | L4::Icmp6 | L4::Igmp => Some(2),
        L4::Sctp | L4::None => None,
    }
}

/// Apply `update` to the transport checksum (UDP: a zero checksum means "none" and stays zero;
/// a computed zero is sent as 0xffff).
#[inline(always)]
fn update_l4(frame: &mut [u8], p: &Parsed, update: impl Fn(u16) -> u16) {
    let Some(at) = l4_checksum_at(p.l4) else {
        return;
    };
    let l4 = p.l4_offset as usize;
    let Some(c) = frame.get(l4 + at..l4 + at + 2) else {
        return;
    };
    let old = rd16(c, 0);
    if p.l4 == L4::Udp && old == 0 {
        return;
    }
    let mut new = update(old);
    if new == 0 {
        if p.l4 == L4::Udp {
            new = 0xffff;
        } else if !has_pseudo_header(p) && all_zero_but(frame, l4, p.l4_len as usize, at) {
            // RFC 1624's update yields 0x0000 both for data summing to 0xffff (right) and for
            // all-zero data, whose checksum is 0xffff; only the second has no pseudo-header
            // term, so only ICMP and IGMP need the look.
            new = 0xffff;
        }
    }
    wr16(frame, l4 + at, new);
}

/// An IPv4 later fragment whose address changed: as Open vSwitch does (`packet_set_ipv4_addr`
/// takes the fragment's payload for the transport header), the bytes where a TCP checksum
/// (payload offset 16, 20 bytes or more) or a non-zero UDP checksum (offset 6, 8 bytes or
/// more) would be get the same update. The receiver reassembles the first fragment's header,
/// so this changes data; it is done only to switch frames as the peer does.
#[inline(never)]
fn later_fragment_l4(frame: &mut [u8], p: &Parsed, protocol: u8, update: impl Fn(u16) -> u16) {
    let l4 = p.l4_offset as usize;
    let (at, min) = match protocol {
        6 => (16, 20),
        17 => (6, 8),
        _ => return,
    };
    if (p.l4_len as usize) < min || p.l4_offset == NO_OFFSET {
        return;
    }
    let Some(c) = frame.get(l4 + at..l4 + at + 2) else {
        return;
    };
    let old = rd16(c, 0);
    if protocol == 17 && old == 0 {
        return;
    }
    let mut new = update(old);
    if protocol == 17 && new == 0 {
        new = 0xffff;
    }
    wr16(frame, l4 + at, new);
}

/// True when the transport checksum covers a pseudo-header (then the sum is never +0).
#[inline(always)]
fn has_pseudo_header(p: &Parsed) -> bool {
    matches!(p.l4, L4::Tcp | L4::Udp) || p.l4 == L4::Icmp6 && p.l3 == L3::Ipv6
}

/// True when `frame[start..start + len]` is zero apart from the checksum at `start + at`.
#[cold]
fn all_zero_but(frame: &[u8], start: usize, len: usize, at: usize) -> bool {
    frame.get(start..start + len).is_some_and(|b| {
        b.iter()
            .enumerate()
            .all(|(i, &x)| x == 0 || i == at || i == at + 1)
    })
}

/// Write the bits of `mask` of `field` in `frame` to those of `value` (right-aligned, as in the
/// key), updating checksums. `p` is what `extract` said about the frame (kept current by
/// `apply` across pushes and pops).
pub fn set_field(
    frame: &mut [u8],
    p: &Parsed,
    field: Field,
    value: u128,
    mask: u128,
) -> Result<(), ExecError> {
    let mask = mask & field.all_ones();
    let value = value & mask;
    match field {
        Field::EthDst | Field::EthSrc => {
            if frame.len() < 14 {
                return Err(ExecError::NoHeader(field, kind(p)));
            }
            masked(
                frame,
                if field == Field::EthDst { 0 } else { 6 },
                6,
                value,
                mask,
            );
            Ok(())
        }
        Field::VlanTci | Field::VlanVid | Field::VlanPcp => {
            if !p.vlan {
                return Err(ExecError::NoHeader(field, "untagged"));
            }
            let (v, m) = match field {
                Field::VlanTci => (value as u16, mask as u16),
                Field::VlanVid => (value as u16, mask as u16),
                _ => ((value as u16) << 13, (mask as u16) << 13),
            };
            // The CFI bit means "tagged" in the key; the packet's bit is left as it is.
            let m = m & !VLAN_CFI;
            let Some(t) = frame.get_mut(14..16) else {
                return Err(ExecError::NoHeader(field, "untagged"));
            };
            masked(t, 0, 2, v as u128, m as u128);
            Ok(())
        }
        Field::NwSrc | Field::NwDst | Field::NwProto | Field::ArpSha | Field::ArpTha
            if p.l3 == L3::Arp =>
        {
            let a = region(frame, p.l3_offset, 28, field, p)?;
            match field {
                Field::NwSrc => masked(a, 14, 4, value, mask),
                Field::NwDst => masked(a, 24, 4, value, mask),
                Field::ArpSha => masked(a, 8, 6, value, mask),
                Field::ArpTha => masked(a, 18, 6, value, mask),
                // The key has the low 8 bits of the opcode; writing it clears the high 8.
                _ => {
                    let op = (rd16(a, 6) & 0xff) as u128;
                    wr16(a, 6, ((op & !mask) | value) as u16);
                    (0, 0)
                }
            };
            Ok(())
        }
        Field::NwSrc | Field::NwDst if p.l3 == L3::Ipv4 => {
            let h = region(frame, p.l3_offset, 20, field, p)?;
            let at = if field == Field::NwSrc { 12 } else { 16 };
            let protocol = h[9];
            let (old, new) = masked(h, at, 4, value, mask);
            let (old, new) = (old as u32, new as u32);
            let c = update32(rd16(h, 10), old, new);
            wr16(h, 10, c);
            if matches!(p.l4, L4::Tcp | L4::Udp) {
                update_l4(frame, p, |c| update32(c, old, new));
            } else if p.frag & FRAG_LATER != 0 {
                later_fragment_l4(frame, p, protocol, |c| update32(c, old, new));
            }
            Ok(())
        }
        Field::IpDscp | Field::NwEcn | Field::NwTtl if p.l3 == L3::Ipv4 => {
            let h = region(frame, p.l3_offset, 20, field, p)?;
            let (at, v, m) = match field {
                Field::IpDscp => (1, value << 2, mask << 2),
                Field::NwEcn => (1, value, mask),
                _ => (8, value, mask),
            };
            let word = at & !1;
            let old = rd16(h, word);
            masked(h, at, 1, v, m);
            let c = update16(rd16(h, 10), old, rd16(h, word));
            wr16(h, 10, c);
            Ok(())
        }
        Field::Ipv6Src | Field::Ipv6Dst if p.l3 == L3::Ipv6 => {
            let h = region(frame, p.l3_offset, 40, field, p)?;
            let at = if field == Field::Ipv6Src { 8 } else { 24 };
            let (old, new) = masked(h, at, 16, value, mask);
            // With a routing header still to be followed, the pseudo-header holds the final
            // destination, not this address.
            let in_pseudo = field == Field::Ipv6Src || !p.ipv6_routing;
            if in_pseudo && matches!(p.l4, L4::Tcp | L4::Udp | L4::Icmp6) {
                update_l4(frame, p, |mut c| {
                    for i in 0..4 {
                        let s = 96 - 32 * i;
                        c = update32(c, (old >> s) as u32, (new >> s) as u32);
                    }
                    c
                });
            }
            Ok(())
        }
        Field::IpDscp | Field::NwEcn | Field::Ipv6Label | Field::NwTtl if p.l3 == L3::Ipv6 => {
            let h = region(frame, p.l3_offset, 40, field, p)?;
            match field {
                Field::NwTtl => {
                    masked(h, 7, 1, value, mask);
                }
                _ => {
                    let (v, m) = match field {
                        Field::IpDscp => (value << 22, mask << 22),
                        Field::NwEcn => (value << 20, mask << 20),
                        _ => (value, mask),
                    };
                    let w = rd32(h, 0);
                    wr32(h, 0, (w & !(m as u32)) | v as u32);
                }
            }
            Ok(())
        }
        Field::TpSrc | Field::TpDst => set_transport(frame, p, field, value, mask),
        Field::NwSrc
        | Field::NwDst
        | Field::Ipv6Src
        | Field::Ipv6Dst
        | Field::IpDscp
        | Field::NwEcn
        | Field::NwTtl
        | Field::Ipv6Label
        | Field::ArpSha
        | Field::ArpTha => Err(ExecError::NoHeader(field, kind(p))),
        Field::NwProto if p.l3 == L3::None || p.l3 == L3::Other => {
            Err(ExecError::NoHeader(field, kind(p)))
        }
        _ => Err(ExecError::NotWritable(field)),
    }
}

/// `tp_src`/`tp_dst`: ports of TCP, UDP and SCTP; type and code of ICMP, ICMPv6 and IGMP.
fn set_transport(
    frame: &mut [u8],
    p: &Parsed,
    field: Field,
    value: u128,
    mask: u128,
) -> Result<(), ExecError> {
    let src = field == Field::TpSrc;
    match p.l4 {
        L4::None => Err(ExecError::NoHeader(field, kind(p))),
        L4::Tcp | L4::Udp | L4::Sctp => {
            if p.l4 == L4::Sctp && p.frag != 0 {
                return Err(ExecError::SctpFragment(field));
            }
            let len = if p.l4 == L4::Sctp { 12 } else { 8 };
            let t = region(frame, p.l4_offset, len, field, p)?;
            let (old, new) = masked(t, if src { 0 } else { 2 }, 2, value, mask);
            if p.l4 == L4::Sctp {
                sctp_fix_crc(frame, p);
            } else {
                update_l4(frame, p, |c| update16(c, old as u16, new as u16));
            }
            Ok(())
        }
        L4::Icmp | L4::Icmp6 | L4::Igmp => {
            let t = region(frame, p.l4_offset, 8, field, p)?;
            let old = rd16(t, 0);
            masked(t, if src { 0 } else { 1 }, 1, value, mask);
            let new = rd16(t, 0);
            update_l4(frame, p, |c| update16(c, old, new));
            Ok(())
        }
    }
}

/// Recompute the CRC32c of an unfragmented SCTP packet (`l4_len` bytes at `l4_offset`).
fn sctp_fix_crc(frame: &mut [u8], p: &Parsed) {
    let at = p.l4_offset as usize;
    let Some(s) = frame.get_mut(at..at + p.l4_len as usize) else {
        return;
    };
    if s.len() < 12 {
        return;
    }
    s[8..12].fill(0);
    let crc = crc32c(s);
    // RFC 4960 appendix B: the CRC goes on the wire least significant byte first.
    s[8..12].copy_from_slice(&crc.to_le_bytes());
}

const CRC32C_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC32c (Castagnoli), as SCTP uses it.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC32C_TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// A frame inside its buffer slot: `slot[start..start + len]` are the packet bytes, the bytes
/// before `start` are headroom.
#[derive(Debug)]
pub struct SlotFrame<'a> {
    /// The whole slot.
    pub slot: &'a mut [u8],
    /// Offset of the first packet byte.
    pub start: usize,
    /// Packet length.
    pub len: usize,
}

impl SlotFrame<'_> {
    /// The packet bytes (empty when `start`/`len` do not fit the slot).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let end = self.start.saturating_add(self.len);
        self.slot.get_mut(self.start..end).unwrap_or_default()
    }
}

fn shift_offsets(p: &mut Parsed, grow: bool) {
    for o in [&mut p.l3_offset, &mut p.l4_offset] {
        if *o != NO_OFFSET {
            *o = if grow {
                o.saturating_add(4)
            } else {
                o.saturating_sub(4)
            };
        }
    }
}

/// Push an outer 802.1Q/802.1ad tag: the MAC addresses move 4 bytes into the headroom.
/// `TPID_AS_RECEIVED` takes the TPID of the tag the packet arrived with (0x8100 if none).
pub fn push_vlan(
    f: &mut SlotFrame<'_>,
    p: &mut Parsed,
    tpid: u16,
    tci: u16,
) -> Result<(), ExecError> {
    let tpid = match (tpid, p.received_tpid) {
        (TPID_AS_RECEIVED, 0) => 0x8100,
        (TPID_AS_RECEIVED, received) => received,
        (tpid, _) => tpid,
    };
    if tpid != 0x8100 && tpid != 0x88a8 {
        return Err(ExecError::BadTpid(tpid));
    }
    if f.start < 4 || f.len < 14 || f.start + f.len > f.slot.len() {
        return Err(ExecError::NoRoom);
    }
    let s = f.start;
    f.slot.copy_within(s..s + 12, s - 4);
    wr16(f.slot, s + 8, tpid);
    wr16(f.slot, s + 10, tci & !VLAN_CFI);
    f.start -= 4;
    f.len += 4;
    p.vlan = true;
    shift_offsets(p, true);
    Ok(())
}

/// Remove the outer VLAN tag: the MAC addresses move 4 bytes towards the payload.
pub fn pop_vlan(f: &mut SlotFrame<'_>, p: &mut Parsed) -> Result<(), ExecError> {
    let s = f.start;
    let tagged = |b: &[u8]| b.len() >= 18 && matches!(rd16(b, 12), 0x8100 | 0x88a8);
    if !p.vlan || !tagged(f.bytes_mut()) {
        return Err(ExecError::NoVlan);
    }
    f.slot.copy_within(s..s + 12, s + 4);
    f.start += 4;
    f.len -= 4;
    shift_offsets(p, false);
    // A second tag (payload for the key) is now the outer one.
    p.vlan = tagged(f.bytes_mut());
    Ok(())
}

/// Apply one action that edits the packet (`Set`, `PushVlan`, `PopVlan`); every other action
/// (outputs, tunnel output, `Nop`) is the caller's and is ignored here.
#[inline]
pub fn apply(f: &mut SlotFrame<'_>, p: &mut Parsed, action: &DpAction) -> Result<(), ExecError> {
    match *action {
        DpAction::Set { field, value, mask } => set_field(f.bytes_mut(), p, field, value, mask),
        DpAction::PushVlan { tpid, tci } => push_vlan(f, p, tpid, tci),
        DpAction::PopVlan => pop_vlan(f, p),
        _ => Ok(()),
    }
}

/// `apply` on a pool buffer: updates its `data_offset`, `length`, `l3_offset` and `l4_offset`
/// (from `p`) after a push or pop.
#[inline]
pub fn apply_to_buffer(
    pool: &mut BufferPool,
    buffer: u32,
    p: &mut Parsed,
    action: &DpAction,
) -> Result<(), ExecError> {
    let (meta, slot) = pool.slot_mut(buffer);
    // A partial checksum (an offload the sender left) holds the pseudo-header's sum, not a
    // checksum: an address change moves it the other way, a port change not at all.
    let partial = match action {
        DpAction::Set { field, .. } if meta.flags & FLAG_CSUM_PARTIAL != 0 => {
            let at = usize::from(meta.csum_start) + usize::from(meta.csum_offset);
            slot.get(at..at + 2)
                .map(|c| (at, [c[0], c[1]], in_pseudo_header(*field)))
        }
        _ => None,
    };
    if let Some((at, _, true)) = partial {
        invert16(slot, at);
    }
    let mut f = SlotFrame {
        slot,
        start: meta.data_offset as usize,
        len: meta.length as usize,
    };
    let applied = apply(&mut f, p, action);
    match partial {
        Some((at, _, true)) => invert16(f.slot, at),
        Some((at, before, false)) => f.slot[at..at + 2].copy_from_slice(&before),
        None => {}
    }
    applied?;
    if matches!(action, DpAction::PushVlan { .. } | DpAction::PopVlan) {
        meta.data_offset = f.start as u16;
        meta.length = f.len as u16;
        meta.l3_offset = p.l3_offset;
        meta.l4_offset = p.l4_offset;
    }
    Ok(())
}

/// True when `field` is part of the TCP/UDP pseudo-header (an IP address).
fn in_pseudo_header(field: Field) -> bool {
    matches!(
        field,
        Field::NwSrc | Field::NwDst | Field::Ipv6Src | Field::Ipv6Dst
    )
}

/// Complement the 16-bit word at `at` (in bounds: checked by the caller).
fn invert16(slot: &mut [u8], at: usize) {
    if let Some(w) = slot.get_mut(at..at + 2) {
        w[0] = !w[0];
        w[1] = !w[1];
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;

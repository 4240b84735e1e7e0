//! The load balancer's rewrites of a packet toward its application server, in the packet's
//! own buffer: L3DSR, GRE4, GRE6 (in the headroom), NAT4/NAT6 forward and reverse, and the
//! rewrite of the quoted header of ICMP errors under NAT. Checksums are updated incrementally
//! (RFC 1624), never recomputed over the payload. It never allocates, never copies the payload,
//! never chooses a server and never looks at a table: the node gives it the parsed packet
//! (`parse::parse`) and the chosen addresses.
//!
//! # How the node calls it
//! The buffer holds the received frame: `meta.data_offset` is where it starts in the slot
//! (headroom before it) and `meta.l3_offset` is where its IP header starts, after the L2 header
//! and any VLAN tags; `parse` was given exactly `slot[data_offset + l3_offset ..
//! data_offset + length]`. Every function takes the whole slot (`BufferPool::slot_mut`) and
//! that `Parsed`. L3DSR and NAT rewrite in place and leave `meta` alone (the packet keeps its
//! length, TTL is left to ip4-rewrite). GRE4/GRE6 write the outer IP and GRE headers just
//! before the inner IP header and leave 14 zero bytes before them for `ip*-rewrite` to fill:
//! `meta.data_offset` moves back, `l3_offset` = 14, `l4_offset` = the GRE header,
//! `length` = 14 + outer headers + the inner IP packet (L2 padding dropped), `ethertype` and
//! `FLAG_IP6` follow the outer family, `flow_hash` = the given flow hash with
//! `FLAG_FLOW_HASH`. They need `l3_offset + 24` (GRE4) or `+ 44` (GRE6) bytes of room before
//! the IP header minus 14, i.e. `data_offset + l3_offset >= 14 + overhead`; the pool's
//! default 128-byte headroom always has it. The node should mark GRE packets as locally
//! originated (the outer TTL is fresh).
//!
//! # GRE outer source
//! GRE has no ports, so a server's NIC spreads received tunnels over its queues (RSS) by the
//! outer addresses only. The outer source is therefore chosen per flow: the configured source
//! address with its low `host_bits` bits replaced by bits of the flow's stable hash
//! (`gre_source4`/`gre_source6`; 0 bits = the configured address for every flow). The bits
//! come from the top half of the hash, which the Maglev slot (hash mod a prime) hardly
//! depends on. GRE6 also puts 20 hash bits in the outer flow label. The operator routes that
//! source prefix back to the load balancer (or lets it be unreachable: servers never answer
//! to it, replies go straight to clients).
//!
//! # MTU and DF
//! The outer IPv4 header always has DF set and ID 0 (RFC 6864 atomic datagram): the outer
//! packet is never fragmented, here or by the underlay. When inner + overhead exceeds the
//! egress MTU the packet is left untouched and `TooBig { mtu, signal }` returned: `mtu` is the
//! largest inner packet that fits, `signal` says whether an ICMP "fragmentation needed"
//! (inner IPv4 with DF) or ICMPv6 "packet too big" (inner IPv6) may be sent to the sender.
//! An inner IPv4 packet without DF that does not fit (`signal` false) is for the node to cut
//! into inner fragments, each encapsulated again (see `gre.rs` for why the inner packet, as
//! Linux's GRE tunnels do).

mod gre;
mod icmp;
mod l3dsr;
mod nat;

pub use gre::{gre4, gre6, gre_source4, gre_source6, GRE4_OVERHEAD, GRE6_OVERHEAD};
pub use l3dsr::{l3dsr, l3dsr_plain4};
pub use nat::{nat_forward, nat_reverse};

use crate::parse::Parsed;
use packet::checksum::{add, fold};
use packet::headers::{be16, put16};
use packet::BufferMeta;

/// Why an encapsulation was not applied (the packet is unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncapError {
    /// The result would exceed the egress MTU; `mtu` is the largest inner packet that fits.
    #[error("packet too big for the tunnel: at most {mtu} bytes fit")]
    TooBig {
        /// The largest inner IP packet that fits (for the ICMP error).
        mtu: u16,
        /// An ICMP "fragmentation needed" / "packet too big" may be sent to the sender.
        signal: bool,
    },
    /// Not enough headroom before the IP header for the outer headers.
    #[error("not enough headroom for the outer headers")]
    NoHeadroom,
    /// The server's (or VIP's) address family does not fit the packet's (or encap's).
    #[error("address family of the server does not fit the packet")]
    FamilyMismatch,
    /// The parsed packet does not fit the buffer (the node parsed other bytes).
    #[error("parsed packet does not match the buffer")]
    BadFrame,
}

impl EncapError {
    /// Counter names, in the order of `index`.
    pub const NAMES: &'static [&'static str] =
        &["too-big", "no-headroom", "family-mismatch", "bad-frame"];

    /// Index of this error's counter in `NAMES`.
    pub fn index(self) -> usize {
        match self {
            EncapError::TooBig { .. } => 0,
            EncapError::NoHeadroom => 1,
            EncapError::FamilyMismatch => 2,
            EncapError::BadFrame => 3,
        }
    }
}

/// The IP packet in the slot: `p.len` bytes at `data_offset + l3_offset`.
#[inline(always)]
fn l3_mut<'s>(
    meta: &BufferMeta,
    slot: &'s mut [u8],
    p: &Parsed,
) -> Result<&'s mut [u8], EncapError> {
    l3_mut_len(meta, slot, p.len)
}

/// The IP packet of `len` bytes in the slot, at `data_offset + l3_offset`.
#[inline(always)]
fn l3_mut_len<'s>(
    meta: &BufferMeta,
    slot: &'s mut [u8],
    len: usize,
) -> Result<&'s mut [u8], EncapError> {
    let start = usize::from(meta.data_offset) + usize::from(meta.l3_offset);
    let end = usize::from(meta.data_offset) + usize::from(meta.length);
    if start + len > end {
        return Err(EncapError::BadFrame);
    }
    slot.get_mut(start..start + len).ok_or(EncapError::BadFrame)
}

/// A sum of 16-bit field changes for RFC 1624 incremental updates: HC' = ~(~HC + sum(~m + m')).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Delta(u64);

impl Delta {
    /// One 16-bit field went from `old` to `new`.
    #[inline(always)]
    pub(crate) fn word(&mut self, old: u16, new: u16) {
        self.0 += u64::from(!old) + u64::from(new);
    }

    /// An address (even length) went from `old` to `new`.
    #[inline(always)]
    pub(crate) fn bytes(&mut self, old: &[u8], new: &[u8]) {
        for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
            self.word(
                u16::from_be_bytes([o[0], o[1]]),
                u16::from_be_bytes([n[0], n[1]]),
            );
        }
    }

    /// Both changes.
    #[inline(always)]
    pub(crate) fn plus(self, other: Delta) -> Delta {
        Delta(self.0 + other.0)
    }

    /// The checksum `check` after the changes.
    #[inline(always)]
    pub(crate) fn apply(self, check: u16) -> u16 {
        !fold(add(u64::from(!check), self.0))
    }
}

/// Apply `d` to the checksum at `at` of `b`; the change of the checksum field itself is added
/// to `outer` (a checksum that covers this one, e.g. ICMP over a quoted header).
#[inline(always)]
pub(crate) fn update_at(b: &mut [u8], at: usize, d: Delta, udp: bool, outer: &mut Delta) {
    let old = be16(b, at);
    if udp && old == 0 {
        return; // UDP over IPv4 without a checksum stays without one
    }
    let mut new = d.apply(old);
    if udp && new == 0 {
        new = 0xffff;
    }
    outer.word(old, new);
    put16(b, at, new);
}

/// Write `new` at `at` of `b`, adding the change to `d`.
#[inline(always)]
pub(crate) fn set_word(b: &mut [u8], at: usize, new: u16, d: &mut Delta) {
    d.word(be16(b, at), new);
    put16(b, at, new);
}

/// Write the address `new` at `at` of `b`, adding the change to `d`.
#[inline(always)]
pub(crate) fn set_addr(b: &mut [u8], at: usize, new: &[u8], d: &mut Delta) {
    d.bytes(&b[at..at + new.len()], new);
    b[at..at + new.len()].copy_from_slice(new);
}

/// The IPv4 address inside an IPv4-mapped one (None when it is not mapped).
#[inline(always)]
pub(crate) fn unmapped(a: &[u8; 16]) -> Option<[u8; 4]> {
    if a[..10].iter().all(|&b| b == 0) && a[10] == 0xff && a[11] == 0xff {
        Some([a[12], a[13], a[14], a[15]])
    } else {
        None
    }
}

#[cfg(test)]
mod tests;

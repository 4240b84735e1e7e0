//! The virtio-net header (`struct virtio_net_hdr`, 10 bytes, little-endian) that TAP devices
//! with IFF_VNET_HDR and virtio-net queues put before each frame, and its translation to and
//! from the offload fields of `BufferMeta`. It owns that byte layout and its validation; it
//! never does I/O and never trusts a header: every field is checked before it reaches the meta.
//!
//! The contract kept in the meta: `is_gso()` implies `FLAG_CSUM_PARTIAL` with the checksum at
//! a TCP header's `check` field (`csum_offset` 16) whose whole header lies inside the frame.
//! `csum_start` in the meta counts from the start of the buffer's slot; in the wire header it
//! counts from the start of the frame.

use crate::meta::{BufferMeta, FLAG_CSUM_PARTIAL, GSO_FLAG_ECN, GSO_NONE, GSO_TCP4, GSO_TCP6};
use thiserror::Error;

/// Bytes of `struct virtio_net_hdr` (without `num_buffers`).
pub const HDR_LEN: usize = 10;

/// `flags`: the checksum from `csum_start` to the end must still be computed.
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksum was verified (a hint; nothing to do).
pub const F_DATA_VALID: u8 = 2;

/// `gso_type`: not a super-packet.
pub const GSO_TYPE_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4.
pub const GSO_TYPE_TCPV4: u8 = 1;
/// `gso_type`: UDP fragmentation offload (UFO).
pub const GSO_TYPE_UDP: u8 = 3;
/// `gso_type`: TCP over IPv6.
pub const GSO_TYPE_TCPV6: u8 = 4;
/// `gso_type`: UDP segmentation offload (USO).
pub const GSO_TYPE_UDP_L4: u8 = 5;
/// `gso_type` bit: the super-packet carries CWR (TCP ECN).
pub const GSO_TYPE_ECN: u8 = 0x80;

/// Offset of the `check` field in a TCP header: `csum_offset` of every TCP super-packet.
pub const TCP_CSUM_OFFSET: u16 = 16;
/// Shortest TCP header.
const TCP_MIN_HEADER: usize = 20;
/// Shortest frame that may carry a checksum request: the Ethernet header comes first.
const ETH_HLEN: usize = 14;

/// Why a virtio-net header (or the meta a header is built from) was refused. Each is a drop
/// reason a port counts under `name()`.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum VnetError {
    /// A flag other than NEEDS_CSUM and DATA_VALID.
    #[error("unknown flag bits in the virtio-net header")]
    UnknownFlags,
    /// The checksum range is not inside the frame (or starts in the Ethernet header).
    #[error("checksum start/offset outside the frame")]
    CsumOutOfFrame,
    /// A checksum or segmentation request on a port that did not negotiate offloads.
    #[error("offload requested but not negotiated")]
    NotNegotiated,
    /// UDP fragmentation or segmentation offload (UFO/USO): never announced, never taken.
    #[error("UDP segmentation offload is not supported")]
    UdpGso,
    /// A `gso_type` that is none of the known ones.
    #[error("unknown GSO type")]
    UnknownGso,
    /// A super-packet with `gso_size` 0.
    #[error("GSO size 0")]
    GsoSizeZero,
    /// A super-packet without a TCP checksum request, or whose TCP header is not in the frame.
    #[error("TCP super-packet without a valid partial checksum and TCP header")]
    GsoNotTcp,
}

impl VnetError {
    /// Every reason, in `index()` order.
    pub const ALL: [VnetError; 7] = [
        VnetError::UnknownFlags,
        VnetError::CsumOutOfFrame,
        VnetError::NotNegotiated,
        VnetError::UdpGso,
        VnetError::UnknownGso,
        VnetError::GsoSizeZero,
        VnetError::GsoNotTcp,
    ];

    /// Position in `ALL` (for a counter array).
    pub fn index(self) -> usize {
        self as usize
    }

    /// A stable `snake_case` name for counters.
    pub fn name(self) -> &'static str {
        match self {
            VnetError::UnknownFlags => "unknown_flags",
            VnetError::CsumOutOfFrame => "csum_out_of_frame",
            VnetError::NotNegotiated => "offload_not_negotiated",
            VnetError::UdpGso => "udp_gso",
            VnetError::UnknownGso => "unknown_gso_type",
            VnetError::GsoSizeZero => "gso_size_zero",
            VnetError::GsoNotTcp => "gso_not_tcp",
        }
    }
}

/// The fields of a virtio-net header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_*` bits.
    pub flags: u8,
    /// `GSO_TYPE_*`, with `GSO_TYPE_ECN` or'ed in.
    pub gso_type: u8,
    /// Length of the headers up to the end of the L4 header (a hint).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed range starts, from the start of the frame.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Read the first `HDR_LEN` bytes of `b`; None when `b` is shorter.
    #[inline]
    pub fn read(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..HDR_LEN)?;
        let le = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    /// Write into the first `HDR_LEN` bytes of `b`; false (nothing written) when `b` is shorter.
    #[inline]
    pub fn write(&self, b: &mut [u8]) -> bool {
        let Some(b) = b.get_mut(..HDR_LEN) else {
            return false;
        };
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        true
    }

    /// True when the header asks for no work (a complete frame).
    #[inline(always)]
    pub fn is_plain(&self) -> bool {
        self.flags & F_NEEDS_CSUM == 0 && self.gso_type == GSO_TYPE_NONE
    }
}

/// The end of the TCP header that starts at `l4` in `frame`, when the whole header is there.
#[inline]
fn tcp_header_end(frame: &[u8], l4: usize) -> Option<usize> {
    let doff = usize::from(*frame.get(l4 + 12)? >> 4) * 4;
    let end = l4 + doff;
    (doff >= TCP_MIN_HEADER && end <= frame.len()).then_some(end)
}

/// Check header `h` of received `frame` (whose first byte is at `data_offset` in its slot) and
/// record its offloads in `meta` (whose offload fields must be clear, as a fresh buffer's are).
/// `offloads`: the port negotiated checksum and TCP segmentation offload; without it any
/// request is refused. On error `meta` is unchanged.
#[inline]
pub fn to_meta(
    h: &VnetHdr,
    frame: &[u8],
    data_offset: u16,
    offloads: bool,
    meta: &mut BufferMeta,
) -> Result<(), VnetError> {
    if h.flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 {
        return Err(VnetError::UnknownFlags);
    }
    if h.is_plain() {
        return Ok(());
    }
    if !offloads {
        return Err(VnetError::NotNegotiated);
    }
    let gso_type = if h.gso_type == GSO_TYPE_NONE {
        GSO_NONE
    } else {
        match h.gso_type & !GSO_TYPE_ECN {
            GSO_TYPE_TCPV4 => GSO_TCP4,
            GSO_TYPE_TCPV6 => GSO_TCP6,
            GSO_TYPE_UDP | GSO_TYPE_UDP_L4 => return Err(VnetError::UdpGso),
            // Also NONE with the ECN bit: not a type at all.
            _ => return Err(VnetError::UnknownGso),
        }
    };
    let mut csum_slot = 0u16;
    if h.flags & F_NEEDS_CSUM != 0 {
        let (start, offset) = (usize::from(h.csum_start), usize::from(h.csum_offset));
        if start < ETH_HLEN || start + offset + 2 > frame.len() {
            return Err(VnetError::CsumOutOfFrame);
        }
        csum_slot = data_offset
            .checked_add(h.csum_start)
            .ok_or(VnetError::CsumOutOfFrame)?;
    }
    if gso_type != GSO_NONE {
        if h.gso_size == 0 {
            return Err(VnetError::GsoSizeZero);
        }
        if h.flags & F_NEEDS_CSUM == 0
            || h.csum_offset != TCP_CSUM_OFFSET
            || tcp_header_end(frame, usize::from(h.csum_start)).is_none()
        {
            return Err(VnetError::GsoNotTcp);
        }
        meta.gso_type = gso_type;
        meta.gso_size = h.gso_size;
        meta.gso_flags = if h.gso_type & GSO_TYPE_ECN != 0 {
            GSO_FLAG_ECN
        } else {
            0
        };
    }
    if h.flags & F_NEEDS_CSUM != 0 {
        meta.flags |= FLAG_CSUM_PARTIAL;
        meta.csum_start = csum_slot;
        meta.csum_offset = h.csum_offset;
    }
    Ok(())
}

/// The header to send `frame` (the packet bytes of the buffer `meta` describes) with: all zero
/// for a packet without offload; the checksum request and segmentation of the meta otherwise,
/// `hdr_len` being the end of the TCP header (or of the checksum field, without GSO).
/// Refuses a meta that breaks the contract of this module (the packet must then be dropped:
/// a half-done frame must never leave).
#[inline]
pub fn from_meta(meta: &BufferMeta, frame: &[u8]) -> Result<VnetHdr, VnetError> {
    if !meta.has_offload() {
        return Ok(VnetHdr::default());
    }
    if meta.flags & FLAG_CSUM_PARTIAL == 0 {
        // Segmentation without a checksum request: no TCP header to point at.
        return Err(VnetError::GsoNotTcp);
    }
    let start = meta
        .csum_start
        .checked_sub(meta.data_offset)
        .ok_or(VnetError::CsumOutOfFrame)?;
    let (s, o) = (usize::from(start), usize::from(meta.csum_offset));
    if s < ETH_HLEN || s + o + 2 > frame.len() {
        return Err(VnetError::CsumOutOfFrame);
    }
    let mut h = VnetHdr {
        flags: F_NEEDS_CSUM,
        csum_start: start,
        csum_offset: meta.csum_offset,
        hdr_len: (s + o + 2) as u16,
        ..VnetHdr::default()
    };
    if meta.is_gso() {
        h.gso_type = match meta.gso_type {
            GSO_TCP4 => GSO_TYPE_TCPV4,
            GSO_TCP6 => GSO_TYPE_TCPV6,
            _ => return Err(VnetError::UnknownGso),
        };
        if meta.gso_flags & GSO_FLAG_ECN != 0 {
            h.gso_type |= GSO_TYPE_ECN;
        }
        if meta.gso_size == 0 {
            return Err(VnetError::GsoSizeZero);
        }
        if meta.csum_offset != TCP_CSUM_OFFSET {
            return Err(VnetError::GsoNotTcp);
        }
        let end = tcp_header_end(frame, s).ok_or(VnetError::GsoNotTcp)?;
        h.hdr_len = end as u16;
        h.gso_size = meta.gso_size;
    }
    Ok(h)
}

#[cfg(test)]
mod tests;

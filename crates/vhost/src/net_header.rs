//! The virtio-net header in front of every frame: what a guest's header asks of us (a checksum
//! to finish, a super-packet to segment) read into the buffer's metadata, and the header we
//! write for a packet we hand to a guest. It owns the header's layout and the offload features;
//! it never touches a ring or guest memory, and never trusts a header it reads.

pub use packet::meta::Offloads;
use packet::meta::{BufferMeta, FLAG_CSUM_PARTIAL, GSO_FLAG_ECN, GSO_NONE, GSO_TCP4, GSO_TCP6};

/// The device may take frames with partial checksums (VIRTIO_NET_F_CSUM).
pub const VIRTIO_NET_F_CSUM: u64 = 1 << 0;
/// The guest takes frames with partial checksums (VIRTIO_NET_F_GUEST_CSUM).
pub const VIRTIO_NET_F_GUEST_CSUM: u64 = 1 << 1;
/// The guest takes TCP/IPv4 super-packets.
pub const VIRTIO_NET_F_GUEST_TSO4: u64 = 1 << 7;
/// The guest takes TCP/IPv6 super-packets.
pub const VIRTIO_NET_F_GUEST_TSO6: u64 = 1 << 8;
/// The guest takes super-packets with CWR set (ECN).
pub const VIRTIO_NET_F_GUEST_ECN: u64 = 1 << 9;
/// The device takes TCP/IPv4 super-packets.
pub const VIRTIO_NET_F_HOST_TSO4: u64 = 1 << 11;
/// The device takes TCP/IPv6 super-packets.
pub const VIRTIO_NET_F_HOST_TSO6: u64 = 1 << 12;
/// The device takes super-packets with CWR set (ECN).
pub const VIRTIO_NET_F_HOST_ECN: u64 = 1 << 13;

/// Every offload feature vecplane offers.
pub const OFFLOAD_FEATURES: u64 = VIRTIO_NET_F_CSUM
    | VIRTIO_NET_F_GUEST_CSUM
    | VIRTIO_NET_F_GUEST_TSO4
    | VIRTIO_NET_F_GUEST_TSO6
    | VIRTIO_NET_F_GUEST_ECN
    | VIRTIO_NET_F_HOST_TSO4
    | VIRTIO_NET_F_HOST_TSO6
    | VIRTIO_NET_F_HOST_ECN;

/// Header flag: the checksum from `csum_start` on is still to be computed.
const F_NEEDS_CSUM: u8 = 1;
/// Header flag: the checksum was checked (we never need it; accepted and ignored).
const F_DATA_VALID: u8 = 2;
/// Header `gso_type` values.
const GSO_T_NONE: u8 = 0;
const GSO_T_TCPV4: u8 = 1;
const GSO_T_TCPV6: u8 = 4;
const GSO_T_ECN: u8 = 0x80;

/// What the guest may send us, from the negotiated features.
pub fn guest_sends(features: u64) -> Offloads {
    let csum = features & VIRTIO_NET_F_CSUM != 0;
    Offloads {
        csum,
        tso4: csum && features & VIRTIO_NET_F_HOST_TSO4 != 0,
        tso6: csum && features & VIRTIO_NET_F_HOST_TSO6 != 0,
        ecn: csum && features & VIRTIO_NET_F_HOST_ECN != 0,
    }
}

/// What the guest takes from us, from the negotiated features.
pub fn guest_takes(features: u64) -> Offloads {
    let csum = features & VIRTIO_NET_F_GUEST_CSUM != 0;
    Offloads {
        csum,
        tso4: csum && features & VIRTIO_NET_F_GUEST_TSO4 != 0,
        tso6: csum && features & VIRTIO_NET_F_GUEST_TSO6 != 0,
        ecn: csum && features & VIRTIO_NET_F_GUEST_ECN != 0,
    }
}

/// Why a guest's header was refused (the frame is dropped and counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadHeader {
    /// A flag, or a checksum request, that was not negotiated.
    Flags,
    /// The checksum field lies outside the frame.
    ChecksumOutside,
    /// A segmentation type that was not negotiated (or is unknown).
    GsoType,
    /// A super-packet without a segment size or without a partial checksum.
    GsoFields,
}

/// Read the first 10 bytes of a guest's header into `meta`, for a frame of `frame_len` bytes
/// at `meta.data_offset`. Plain frames (all-zero flags and type) are the common case.
#[inline]
pub fn read_header(
    hdr: &[u8; 10],
    frame_len: usize,
    sends: Offloads,
    meta: &mut BufferMeta,
) -> Result<(), BadHeader> {
    let (flags, gso) = (hdr[0], hdr[1]);
    if flags & !F_DATA_VALID == 0 && gso == GSO_T_NONE {
        return Ok(());
    }
    if flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 || !sends.csum {
        return Err(BadHeader::Flags);
    }
    let gso_size = u16::from_le_bytes([hdr[4], hdr[5]]);
    let csum_start = u16::from_le_bytes([hdr[6], hdr[7]]);
    let csum_offset = u16::from_le_bytes([hdr[8], hdr[9]]);
    if flags & F_NEEDS_CSUM != 0 {
        let end = usize::from(csum_start) + usize::from(csum_offset) + 2;
        if end > frame_len {
            return Err(BadHeader::ChecksumOutside);
        }
        meta.flags |= FLAG_CSUM_PARTIAL;
        meta.csum_start = meta.data_offset + csum_start;
        meta.csum_offset = csum_offset;
    }
    if gso == GSO_T_NONE {
        return Ok(());
    }
    let ecn = gso & GSO_T_ECN != 0;
    let (kind, allowed) = match gso & !GSO_T_ECN {
        GSO_T_TCPV4 => (GSO_TCP4, sends.tso4),
        GSO_T_TCPV6 => (GSO_TCP6, sends.tso6),
        _ => return Err(BadHeader::GsoType),
    };
    if !allowed || (ecn && !sends.ecn) {
        return Err(BadHeader::GsoType);
    }
    if gso_size == 0 || flags & F_NEEDS_CSUM == 0 {
        return Err(BadHeader::GsoFields);
    }
    meta.gso_type = kind;
    meta.gso_size = gso_size;
    meta.gso_flags = if ecn { GSO_FLAG_ECN } else { 0 };
    Ok(())
}

/// The 12-byte header for `frame` with metadata `m` (whose offloads the guest takes, see
/// `Offloads::takes`), `num_buffers` set to `buffers`.
#[inline]
pub fn write_header(m: &BufferMeta, frame: &[u8], buffers: u16) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[10..12].copy_from_slice(&buffers.to_le_bytes());
    if m.flags & FLAG_CSUM_PARTIAL == 0 {
        return h;
    }
    let start = m.csum_start.wrapping_sub(m.data_offset);
    h[0] = F_NEEDS_CSUM;
    h[6..8].copy_from_slice(&start.to_le_bytes());
    h[8..10].copy_from_slice(&m.csum_offset.to_le_bytes());
    if m.gso_type != GSO_NONE {
        let mut t = if m.gso_type == GSO_TCP6 {
            GSO_T_TCPV6
        } else {
            GSO_T_TCPV4
        };
        if m.gso_flags & GSO_FLAG_ECN != 0 {
            t |= GSO_T_ECN;
        }
        h[1] = t;
        // hdr_len: the end of the TCP header (a hint to the guest for its linear part).
        let tcp = usize::from(start);
        let doff = frame
            .get(tcp + 12)
            .map_or(5, |b| usize::from(b >> 4))
            .max(5);
        let hdr_len = (tcp + doff * 4).min(frame.len()) as u16;
        h[2..4].copy_from_slice(&hdr_len.to_le_bytes());
        h[4..6].copy_from_slice(&m.gso_size.to_le_bytes());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Offloads = Offloads {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
    };

    fn hdr(flags: u8, gso: u8, gso_size: u16, start: u16, offset: u16) -> [u8; 10] {
        let mut h = [0u8; 10];
        h[0] = flags;
        h[1] = gso;
        h[2..4].copy_from_slice(&54u16.to_le_bytes());
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
        h[6..8].copy_from_slice(&start.to_le_bytes());
        h[8..10].copy_from_slice(&offset.to_le_bytes());
        h
    }

    fn meta() -> BufferMeta {
        BufferMeta {
            data_offset: 128,
            ..BufferMeta::default()
        }
    }

    #[test]
    fn plain_frames_pass_whatever_was_negotiated() {
        let mut m = meta();
        assert_eq!(
            read_header(&[0; 10], 60, Offloads::default(), &mut m),
            Ok(())
        );
        assert!(!m.has_offload());
        // DATA_VALID alone is harmless.
        assert_eq!(
            read_header(&hdr(2, 0, 0, 0, 0), 60, Offloads::default(), &mut m),
            Ok(())
        );
    }

    #[test]
    fn a_tso_header_becomes_metadata_and_back() {
        let mut m = meta();
        let h = hdr(1, GSO_T_TCPV4 | GSO_T_ECN, 1448, 34, 16);
        assert_eq!(read_header(&h, 60_000, ALL, &mut m), Ok(()));
        assert_eq!(
            (m.gso_type, m.gso_size, m.gso_flags),
            (GSO_TCP4, 1448, GSO_FLAG_ECN)
        );
        assert_eq!((m.csum_start, m.csum_offset), (128 + 34, 16));
        assert!(ALL.takes(&m));
        assert!(!Offloads { ecn: false, ..ALL }.takes(&m));
        let mut frame = vec![0u8; 60_000];
        frame[34 + 12] = 8 << 4; // 32-byte TCP header
        let out = write_header(&m, &frame, 3);
        assert_eq!(out[0], 1);
        assert_eq!(out[1], GSO_T_TCPV4 | GSO_T_ECN);
        assert_eq!(u16::from_le_bytes([out[2], out[3]]), 34 + 32);
        assert_eq!(&out[4..10], &h[4..10]);
        assert_eq!(u16::from_le_bytes([out[10], out[11]]), 3);
    }

    #[test]
    fn what_was_not_negotiated_or_does_not_fit_is_refused() {
        let csum_only = Offloads {
            csum: true,
            ..Offloads::default()
        };
        let cases = [
            (hdr(1, 0, 0, 34, 16), Offloads::default(), BadHeader::Flags),
            (hdr(0x40, 0, 0, 0, 0), ALL, BadHeader::Flags),
            (hdr(1, 0, 0, 50, 9), ALL, BadHeader::ChecksumOutside),
            (
                hdr(1, 0, 0, 0xffff, 0xffff),
                ALL,
                BadHeader::ChecksumOutside,
            ),
            (
                hdr(1, GSO_T_TCPV4, 1448, 34, 16),
                csum_only,
                BadHeader::GsoType,
            ),
            (hdr(1, 3, 1448, 34, 6), ALL, BadHeader::GsoType), // UFO
            (hdr(1, 5, 1448, 34, 6), ALL, BadHeader::GsoType), // USO
            (hdr(1, GSO_T_TCPV6, 0, 34, 16), ALL, BadHeader::GsoFields),
            (hdr(0, GSO_T_TCPV6, 1448, 34, 16), ALL, BadHeader::GsoFields),
            (
                hdr(1, GSO_T_TCPV6 | GSO_T_ECN, 1448, 34, 16),
                Offloads { ecn: false, ..ALL },
                BadHeader::GsoType,
            ),
        ];
        for (h, sends, want) in cases {
            let mut m = meta();
            assert_eq!(read_header(&h, 60, sends, &mut m), Err(want), "{h:?}");
        }
    }

    #[test]
    fn partial_checksums_go_only_where_taken() {
        let mut m = meta();
        read_header(&hdr(1, 0, 0, 34, 6), 60, ALL, &mut m).unwrap();
        assert!(Offloads {
            csum: true,
            ..Offloads::default()
        }
        .takes(&m));
        assert!(!Offloads::default().takes(&m));
        assert!(Offloads::default().takes(&meta()));
    }
}

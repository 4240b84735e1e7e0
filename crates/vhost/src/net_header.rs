//! The virtio-net header in front of every frame, as a vhost-user device sees it: the offload
//! features and what each side negotiated, a guest's header read into the buffer's metadata
//! (only what it negotiated), and the header we write for a guest (with `num_buffers`). The
//! header's layout and its checks are `packet::vnet`'s (shared with TAP ports); this never
//! touches a ring or guest memory, and never trusts a header it reads.

use packet::meta::BufferMeta;
pub use packet::meta::Offloads;
use packet::vnet::{self, VnetError, VnetHdr};

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

/// Read guest header `hdr` of `frame` (already copied to `meta.data_offset` of its buffer)
/// into `meta`, refusing what the guest did not negotiate (`sends`).
#[inline]
pub fn read_header(
    hdr: &[u8; 10],
    frame: &[u8],
    sends: Offloads,
    meta: &mut BufferMeta,
) -> Result<(), VnetError> {
    // DATA_VALID alone (or nothing) is the common case: no work, nothing to check.
    if hdr[0] & !vnet::F_DATA_VALID == 0 && hdr[1] == vnet::GSO_TYPE_NONE {
        return Ok(());
    }
    let h = VnetHdr::read(hdr).ok_or(VnetError::CsumOutOfFrame)?;
    let any = sends.csum;
    vnet::to_meta(&h, frame, meta.data_offset, any, meta)?;
    if !sends.takes(meta) {
        meta.clear_offload();
        return Err(VnetError::NotNegotiated);
    }
    Ok(())
}

/// The 12-byte header for `frame` with metadata `m` (whose offloads the guest takes, see
/// `Offloads::takes`), `num_buffers` set to `buffers`. Err: the metadata breaks the offload
/// contract (the packet is dropped rather than handed over half done).
#[inline]
pub fn write_header(m: &BufferMeta, frame: &[u8], buffers: u16) -> Result<[u8; 12], VnetError> {
    let mut h = [0u8; 12];
    h[10..12].copy_from_slice(&buffers.to_le_bytes());
    if m.has_offload() {
        vnet::from_meta(m, frame)?.write(&mut h);
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::meta::{GSO_FLAG_ECN, GSO_TCP4};

    const ALL: Offloads = Offloads::ALL;

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

    /// A frame of `len` bytes with a 32-byte TCP header at 34.
    fn frame(len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[34 + 12] = 8 << 4;
        f
    }

    #[test]
    fn plain_frames_pass_whatever_was_negotiated() {
        let mut m = meta();
        let none = Offloads::default();
        assert_eq!(read_header(&[0; 10], &frame(60), none, &mut m), Ok(()));
        // DATA_VALID alone is harmless.
        assert_eq!(
            read_header(&hdr(2, 0, 0, 0, 0), &frame(60), none, &mut m),
            Ok(())
        );
        assert!(!m.has_offload());
        assert_eq!(
            write_header(&m, &frame(60), 1).map(|h| h[..10] == [0; 10]),
            Ok(true)
        );
    }

    #[test]
    fn a_tso_header_becomes_metadata_and_back() {
        let mut m = meta();
        let f = frame(60_000);
        let h = hdr(1, 1 | 0x80, 1448, 34, 16); // TCPV4 with ECN
        assert_eq!(read_header(&h, &f, ALL, &mut m), Ok(()));
        assert_eq!(
            (m.gso_type, m.gso_size, m.gso_flags),
            (GSO_TCP4, 1448, GSO_FLAG_ECN)
        );
        assert_eq!((m.csum_start, m.csum_offset), (128 + 34, 16));
        let out = write_header(&m, &f, 3).expect("a header");
        assert_eq!(&out[..2], &[1, 0x81]);
        assert_eq!(u16::from_le_bytes([out[2], out[3]]), 34 + 32, "hdr_len");
        assert_eq!(&out[4..10], &h[4..10]);
        assert_eq!(u16::from_le_bytes([out[10], out[11]]), 3, "num_buffers");
    }

    #[test]
    fn what_was_not_negotiated_or_does_not_fit_is_refused() {
        let csum_only = Offloads {
            csum: true,
            ..Offloads::default()
        };
        let no_ecn = Offloads { ecn: false, ..ALL };
        let cases = [
            (
                hdr(1, 0, 0, 34, 16),
                Offloads::default(),
                VnetError::NotNegotiated,
            ),
            (hdr(1, 1, 1448, 34, 16), csum_only, VnetError::NotNegotiated),
            (hdr(1, 4, 1448, 34, 16), csum_only, VnetError::NotNegotiated),
            (hdr(1, 0x81, 1448, 34, 16), no_ecn, VnetError::NotNegotiated),
            (hdr(1, 0, 0, 90, 9), ALL, VnetError::CsumOutOfFrame),
        ];
        for (h, sends, want) in cases {
            let mut m = meta();
            assert_eq!(
                read_header(&h, &frame(100), sends, &mut m),
                Err(want),
                "{h:?}"
            );
            assert!(!m.has_offload(), "nothing half-recorded: {h:?}");
        }
    }

    #[test]
    fn the_features_say_what_each_side_takes() {
        let f = VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_GUEST_TSO6;
        assert_eq!(
            guest_sends(f),
            Offloads {
                csum: true,
                tso4: true,
                ..Offloads::default()
            }
        );
        // TSO without checksum offload means nothing.
        assert_eq!(guest_takes(f), Offloads::default());
    }
}

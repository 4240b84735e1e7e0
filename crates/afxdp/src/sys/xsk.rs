//! AF_XDP socket calls: create the socket, register a UMEM, size and map the four rings, bind
//! to an (interface, queue), read statistics and options, and the two wake-up calls (sendto for
//! transmit, recvfrom for the fill ring). Structures follow `linux/if_xdp.h` of kernel 6.x.

use super::{last_error, owned_fd, Mmap};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;

const XDP_MMAP_OFFSETS: libc::c_int = 1;
/// Socket option: rx ring size.
pub(crate) const XDP_RX_RING: libc::c_int = 2;
/// Socket option: tx ring size.
pub(crate) const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
/// Socket option: fill ring size.
pub(crate) const XDP_UMEM_FILL_RING: libc::c_int = 5;
/// Socket option: completion ring size.
pub(crate) const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Bind flag: share the UMEM of `sxdp_shared_umem_fd`.
pub(crate) const XDP_SHARED_UMEM: u16 = 1 << 0;
/// Bind flag: force copy mode.
pub(crate) const XDP_COPY: u16 = 1 << 1;
/// Bind flag: force zero-copy mode.
pub(crate) const XDP_ZEROCOPY: u16 = 1 << 2;
/// Bind flag: the kernel sets XDP_RING_NEED_WAKEUP when it needs a syscall to make progress.
pub(crate) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

/// UMEM flag: chunks may start anywhere (any stride).
pub(crate) const XDP_UMEM_UNALIGNED_CHUNK_FLAG: u32 = 1 << 0;

/// mmap offsets of the rings.
pub(crate) const XDP_PGOFF_RX_RING: u64 = 0;
/// mmap offset of the tx ring.
pub(crate) const XDP_PGOFF_TX_RING: u64 = 0x8000_0000;
/// mmap offset of the fill ring.
pub(crate) const XDP_UMEM_PGOFF_FILL_RING: u64 = 0x1_0000_0000;
/// mmap offset of the completion ring.
pub(crate) const XDP_UMEM_PGOFF_COMPLETION_RING: u64 = 0x1_8000_0000;

/// `struct xdp_umem_reg` (with `tx_metadata_len`, kernel 6.8+; older kernels read the first 28
/// bytes only when given the shorter size, see `umem_register`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UmemReg {
    /// Start of the region (page-aligned user address).
    pub addr: u64,
    /// Length of the region.
    pub len: u64,
    /// Chunk (frame) size.
    pub chunk_size: u32,
    /// Bytes the kernel leaves free at the start of every chunk (before XDP_PACKET_HEADROOM).
    pub headroom: u32,
    /// `XDP_UMEM_*` flags.
    pub flags: u32,
    /// Transmit metadata length (0: none).
    pub tx_metadata_len: u32,
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RingOffset {
    /// Offset of the producer index.
    pub producer: u64,
    /// Offset of the consumer index.
    pub consumer: u64,
    /// Offset of the descriptor array.
    pub desc: u64,
    /// Offset of the flags word.
    pub flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MmapOffsets {
    /// Rx ring.
    pub rx: RingOffset,
    /// Tx ring.
    pub tx: RingOffset,
    /// Fill ring.
    pub fr: RingOffset,
    /// Completion ring.
    pub cr: RingOffset,
}

/// `struct xdp_desc`: one rx/tx descriptor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XdpDesc {
    /// UMEM address of the packet data.
    pub addr: u64,
    /// Packet length.
    pub len: u32,
    /// Options (multi-buffer continuation, tx metadata).
    pub options: u32,
}

/// `struct xdp_statistics` as the kernel reports it (all counters since the socket was made).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Packets dropped for reasons other than the ones below (in copy mode this includes every
    /// packet that found the fill ring empty, and frames too large for a chunk).
    pub rx_dropped: u64,
    /// Invalid descriptors on the rx side.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors the application put on the tx ring (not sent).
    pub tx_invalid_descs: u64,
    /// Packets dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty when it needed a buffer.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty when it looked for work.
    pub tx_ring_empty_descs: u64,
}

#[repr(C)]
#[derive(Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// A new AF_XDP socket (close-on-exec).
pub(crate) fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked by `owned_fd`.
    owned_fd(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at `size_of::<T>()` initialised bytes that live for the call.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok(())
}

/// getsockopt into a `T` of plain integers; returns the length the kernel wrote.
fn getsockopt<T: Default>(fd: &OwnedFd, name: libc::c_int) -> io::Result<(T, usize)> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes, and T (only used with the integer-only
    // structs of this module) is valid for any bytes the kernel writes.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok((value, len as usize))
}

/// Register `reg` as the socket's UMEM.
pub(crate) fn umem_register(fd: &OwnedFd, reg: &UmemReg) -> io::Result<()> {
    setsockopt(fd, XDP_UMEM_REG, reg)
}

/// Set the size of one ring (`XDP_RX_RING`, `XDP_TX_RING`, `XDP_UMEM_FILL_RING`,
/// `XDP_UMEM_COMPLETION_RING`); `entries` must be a power of two.
pub(crate) fn set_ring_size(fd: &OwnedFd, ring: libc::c_int, entries: u32) -> io::Result<()> {
    setsockopt(fd, ring, &(entries as libc::c_int))
}

/// Let one sendto() transmit up to `budget` packets in copy mode (kernel 6.17+; older kernels
/// answer ENOPROTOOPT and keep 32).
pub(crate) fn set_tx_budget(fd: &OwnedFd, budget: u32) -> io::Result<()> {
    setsockopt(fd, XDP_MAX_TX_SKB_BUDGET, &(budget as libc::c_uint))
}

/// Where each ring sits in its mapping.
pub(crate) fn mmap_offsets(fd: &OwnedFd) -> io::Result<MmapOffsets> {
    let (off, len) = getsockopt::<MmapOffsets>(fd, XDP_MMAP_OFFSETS)?;
    if len < std::mem::size_of::<MmapOffsets>() {
        // A pre-5.4 kernel without the flags word: need_wakeup cannot work.
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(off)
}

/// The socket's kernel statistics.
pub(crate) fn statistics(fd: &OwnedFd) -> io::Result<XdpStatistics> {
    getsockopt::<XdpStatistics>(fd, XDP_STATISTICS).map(|(s, _)| s)
}

/// Whether the bound socket runs in zero-copy mode.
pub(crate) fn is_zerocopy(fd: &OwnedFd) -> io::Result<bool> {
    getsockopt::<u32>(fd, XDP_OPTIONS).map(|(flags, _)| flags & 1 != 0)
}

/// Bind to (`ifindex`, `queue`) with `XDP_*` `flags`, sharing the UMEM of `shared` if given.
pub(crate) fn bind(
    fd: &OwnedFd,
    ifindex: u32,
    queue: u32,
    flags: u16,
    shared: Option<&OwnedFd>,
) -> io::Result<()> {
    let addr = SockaddrXdp {
        family: AF_XDP as u16,
        flags: flags | if shared.is_some() { XDP_SHARED_UMEM } else { 0 },
        ifindex,
        queue_id: queue,
        shared_umem_fd: shared.map(|s| s.as_raw_fd() as u32).unwrap_or(0),
    };
    // SAFETY: `addr` is a complete `sockaddr_xdp` of the size passed, alive for the call.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &addr as *const SockaddrXdp as *const libc::sockaddr,
            std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(last_error());
    }
    Ok(())
}

/// Map the ring at `pgoff` (`XDP_PGOFF_*`), `len` bytes.
pub(crate) fn map_ring(fd: &OwnedFd, pgoff: u64, len: usize) -> io::Result<Mmap> {
    Mmap::map(fd, pgoff, len)
}

/// Ask the kernel to transmit what is on the tx ring (copy mode does the work inside this
/// call). Transient conditions (EAGAIN, EBUSY, ENOBUFS, ENETDOWN) are not errors for a poller:
/// the descriptors stay on the ring and the next kick retries.
pub(crate) fn kick_tx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: zero-length sendto with no buffer and no address, as the AF_XDP ABI specifies.
    let ret = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if ret < 0 {
        let e = last_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN) => {
                Ok(())
            }
            _ => Err(e),
        };
    }
    Ok(())
}

/// Wake the driver to refill from the fill ring (zero-copy drivers that set need_wakeup).
pub(crate) fn wake_rx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: zero-length non-blocking recvfrom with no buffer and no address.
    let ret = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if ret < 0 {
        let e = last_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENETDOWN) => Ok(()),
            _ => Err(e),
        };
    }
    Ok(())
}

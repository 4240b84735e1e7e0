//! The UMEM: a worker's `BufferPool` region registered with the kernel as AF_XDP packet memory,
//! so a buffer index and a UMEM address are two names of the same slot (address = slot offset +
//! offset inside the slot). Every socket of the worker uses it: the first registers it
//! (XDP_UMEM_REG), later ones bind with XDP_SHARED_UMEM to a live one, and a packet received on
//! one port is sent on another without a copy.
//!
//! Layout of a slot as the kernel sees it: the fill ring gets the slot's start; the kernel
//! writes a received frame at `max(pool headroom, 256)` (it always keeps XDP_PACKET_HEADROOM,
//! 256 bytes, in front of the data; a larger pool headroom becomes the UMEM headroom), so the
//! headroom for encapsulation always precedes the data. The pool's stride is rarely a power of
//! two (128 + 2048 = 2176), so the UMEM uses unaligned chunks unless it is one.
//! It owns no memory: the pool does, and must outlive the ports (the kernel pins the pages).

use crate::error::AfXdpError;
use crate::sys::xsk::{UmemReg, XDP_UMEM_UNALIGNED_CHUNK_FLAG};
use packet::pool::Backing;
use packet::BufferPool;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long buffers a closed socket had lent rest before the pool has them again: a zero-copy
/// driver lets go of its hardware ring in deferred work after the close (copy mode at once).
pub const RETURN_DELAY: Duration = Duration::from_secs(1);

/// Bytes the kernel keeps in front of every received frame (XDP_PACKET_HEADROOM).
pub const XDP_PACKET_HEADROOM: usize = 256;
/// Smallest AF_XDP chunk (XDP_UMEM_MIN_CHUNK_SIZE).
pub const MIN_CHUNK_SIZE: usize = 2048;
/// Largest chunk on normal pages (the page size); with 2 MiB hugepages the kernel takes up to
/// 64 KiB.
pub const MAX_CHUNK_SIZE_NORMAL_PAGES: usize = 4096;
const MAX_CHUNK_SIZE_HUGEPAGES: usize = 65536;

/// The pool region as a UMEM (cheap to clone; all clones are the same UMEM).
#[derive(Clone)]
pub struct Umem {
    inner: Arc<UmemInner>,
}

struct UmemInner {
    base: usize,
    len: usize,
    stride: usize,
    buffers: usize,
    kernel_headroom: usize,
    unaligned: bool,
    /// Sockets bound with this UMEM registered or shared; a live one is what the next socket
    /// shares (XDP_SHARED_UMEM needs a bound socket's descriptor).
    owners: Mutex<Vec<Weak<OwnedFd>>>,
    /// Buffers closed sockets had lent to the kernel, with when, for the pool's worker to take
    /// back once they have rested `RETURN_DELAY`.
    returned: Mutex<Vec<(Instant, Vec<u32>)>>,
    /// `returned` is not empty (read without the lock between rounds).
    has_returned: AtomicBool,
}

impl Umem {
    /// Describe `pool`'s region as a UMEM (nothing is registered until the first port opens).
    /// Fails when the pool's slots cannot be AF_XDP chunks.
    pub fn new(pool: &BufferPool) -> Result<Umem, AfXdpError> {
        let stride = pool.stride();
        let max = match pool.backing() {
            Backing::HugePages => MAX_CHUNK_SIZE_HUGEPAGES,
            Backing::NormalPages => MAX_CHUNK_SIZE_NORMAL_PAGES,
        };
        if stride < MIN_CHUNK_SIZE || stride > max {
            return Err(AfXdpError::Pool {
                reason: format!(
                    "slot stride {stride} bytes (headroom {} + data {}) is not a valid chunk size; \
                     accepted: {MIN_CHUNK_SIZE}..={max} bytes on {} (e.g. headroom 128, data 2048)",
                    pool.headroom(),
                    pool.data_size(),
                    pool.backing()
                ),
            });
        }
        let base = pool.region_ptr() as usize;
        if base % 4096 != 0 {
            return Err(AfXdpError::Pool {
                reason: format!("region at {base:#x} is not page-aligned"),
            });
        }
        let kernel_headroom = pool.headroom().saturating_sub(XDP_PACKET_HEADROOM);
        let data_offset = kernel_headroom + XDP_PACKET_HEADROOM;
        if data_offset + 64 > stride {
            return Err(AfXdpError::Pool {
                reason: format!(
                    "headroom {} leaves less than 64 bytes of a {stride}-byte slot for received data",
                    pool.headroom()
                ),
            });
        }
        Ok(Umem {
            inner: Arc::new(UmemInner {
                base,
                len: pool.region_bytes(),
                stride,
                buffers: pool.capacity(),
                kernel_headroom,
                unaligned: !stride.is_power_of_two(),
                owners: Mutex::new(Vec::new()),
                returned: Mutex::new(Vec::new()),
                has_returned: AtomicBool::new(false),
            }),
        })
    }

    /// Offset in a slot where the kernel writes a received frame.
    pub fn rx_data_offset(&self) -> usize {
        self.inner.kernel_headroom + XDP_PACKET_HEADROOM
    }

    /// Largest frame the kernel can receive into a slot.
    pub fn frame_capacity(&self) -> usize {
        self.inner.stride - self.rx_data_offset()
    }

    /// True when chunks are unaligned (the stride is not a power of two).
    pub fn is_unaligned(&self) -> bool {
        self.inner.unaligned
    }

    /// True when `pool` is the pool this UMEM was made from.
    #[inline(always)]
    pub fn is_pool(&self, pool: &BufferPool) -> bool {
        pool.region_ptr() as usize == self.inner.base
            && pool.stride() == self.inner.stride
            && pool.capacity() == self.inner.buffers
    }

    /// The XDP_UMEM_REG request for this region.
    pub(crate) fn registration(&self) -> UmemReg {
        UmemReg {
            addr: self.inner.base as u64,
            len: self.inner.len as u64,
            chunk_size: self.inner.stride as u32,
            headroom: self.inner.kernel_headroom as u32,
            flags: if self.inner.unaligned {
                XDP_UMEM_UNALIGNED_CHUNK_FLAG
            } else {
                0
            },
            tx_metadata_len: 0,
        }
    }

    /// Slot stride.
    pub(crate) fn stride(&self) -> usize {
        self.inner.stride
    }

    /// A live bound socket that registered or shares this UMEM, to share it with.
    pub(crate) fn live_socket(&self) -> Option<Arc<OwnedFd>> {
        let mut owners = self.inner.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|w| w.strong_count() > 0);
        owners.iter().find_map(Weak::upgrade)
    }

    /// Record a bound socket of this UMEM.
    pub(crate) fn add_socket(&self, fd: &Arc<OwnedFd>) {
        let mut owners = self.inner.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.push(Arc::downgrade(fd));
    }
}

impl Umem {
    /// Buffers a closed socket had lent to the kernel (any thread).
    pub(crate) fn give_back(&self, buffers: Vec<u32>) {
        if buffers.is_empty() {
            return;
        }
        let mut r = self
            .inner
            .returned
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        r.push((Instant::now(), buffers));
        self.inner.has_returned.store(true, Ordering::Release);
    }

    /// Hand the buffers closed sockets gave back at least `RETURN_DELAY` ago to `free` (the
    /// pool's worker, between rounds: one load when there are none); how many.
    pub fn take_returned(&self, mut free: impl FnMut(&[u32])) -> usize {
        if !self.inner.has_returned.load(Ordering::Acquire) {
            return 0;
        }
        let rested: Vec<Vec<u32>> = {
            let mut r = self
                .inner
                .returned
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let (rested, resting): (Vec<_>, Vec<_>) = std::mem::take(&mut *r)
                .into_iter()
                .partition(|(at, _)| at.elapsed() >= RETURN_DELAY);
            *r = resting;
            self.inner
                .has_returned
                .store(!r.is_empty(), Ordering::Release);
            rested.into_iter().map(|(_, list)| list).collect()
        };
        rested
            .iter()
            .map(|list| {
                free(list);
                list.len()
            })
            .sum()
    }

    /// Buffers in the pool (bits of a lent set).
    pub(crate) fn buffers(&self) -> usize {
        self.inner.buffers
    }
}

impl std::fmt::Debug for Umem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Umem")
            .field("len", &self.inner.len)
            .field("chunk", &self.inner.stride)
            .field("headroom", &self.inner.kernel_headroom)
            .field("unaligned", &self.inner.unaligned)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::PoolConfig;

    fn pool(headroom: u16, data: u16) -> BufferPool {
        BufferPool::new(PoolConfig {
            buffers: 64,
            headroom,
            data_size: data,
            try_hugepages: false,
        })
        .expect("pool")
    }

    #[test]
    fn default_pool_is_an_unaligned_umem() {
        let p = pool(128, 2048);
        let u = Umem::new(&p).expect("umem");
        assert!(u.is_unaligned());
        assert_eq!(u.rx_data_offset(), 256);
        assert_eq!(u.frame_capacity(), 2176 - 256);
        let r = u.registration();
        assert_eq!(r.chunk_size, 2176);
        assert_eq!(r.headroom, 0);
        assert_eq!(r.flags, XDP_UMEM_UNALIGNED_CHUNK_FLAG);
        assert_eq!(r.addr as usize, p.region_ptr() as usize);
        assert!(u.is_pool(&p));
        assert!(!u.is_pool(&pool(128, 2048)));
    }

    #[test]
    fn power_of_two_stride_is_aligned_and_large_headroom_goes_to_the_kernel() {
        let u = Umem::new(&pool(384, 1664)).expect("umem");
        assert!(!u.is_unaligned());
        assert_eq!(u.registration().headroom, 128);
        assert_eq!(u.rx_data_offset(), 384);
    }

    #[test]
    fn buffers_given_back_rest_before_the_pool_has_them() {
        let u = Umem::new(&pool(128, 2048)).expect("umem");
        assert_eq!(u.take_returned(|_| panic!("nothing given back")), 0);
        u.give_back(vec![3, 9]);
        u.give_back(Vec::new());
        assert_eq!(u.take_returned(|_| panic!("still resting")), 0);
        std::thread::sleep(RETURN_DELAY + Duration::from_millis(50));
        let mut got = Vec::new();
        assert_eq!(u.take_returned(|l| got.extend_from_slice(l)), 2);
        assert_eq!(got, vec![3, 9]);
        assert_eq!(u.take_returned(|_| panic!("taken once")), 0);
    }

    #[test]
    fn bad_strides_are_refused_with_the_accepted_range() {
        let e = Umem::new(&pool(128, 1024)).expect_err("too small");
        assert!(e.to_string().contains("2048..=4096"), "{e}");
        let e = Umem::new(&pool(128, 8192)).expect_err("too large");
        assert!(e.to_string().contains("stride 8320"), "{e}");
    }
}

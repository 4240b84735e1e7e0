//! An AF_XDP socket driven directly, in batches, by the one loop that owns it (vecplane's traffic
//! generator and sink) instead of as graph nodes: put a batch of pool buffers on the tx ring, take
//! completed ones back, receive a batch, lend buffers for reception. The socket is opened exactly
//! as `AfXdpPort::open` opens one (same XDP program, same attachment and clean-up).
//!
//! It never frees or drops a buffer by itself (whatever did not fit stays the caller's), never
//! allocates after `open`, never copies packet bytes, and makes a syscall only when a ring's
//! need_wakeup flag asks for one and the caller calls `kick_tx`/`wake_rx`.

use crate::error::AfXdpError;
use crate::program::XdpMode;
use crate::socket::{self, AfXdpConfig, SocketCore};
use crate::sys::ring::{ConsRing, ProdRing, RingWatch};
use crate::sys::xsk::{self, XdpDesc, XdpStatistics};
use crate::umem::Umem;
use packet::{BufferMeta, BufferPool};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Low 48 bits of an unaligned-mode descriptor address: the chunk's base address; the high 16
/// bits are an offset to add (XSK_UNALIGNED_BUF_OFFSET_SHIFT).
const ADDR_MASK: u64 = (1 << 48) - 1;

/// Refill the fill ring once at least this many entries are free.
const REFILL_BATCH: u32 = 64;
/// Most frames `recycle_received` handles per call.
pub const RECYCLE_BATCH: u32 = 256;

#[inline(always)]
fn umem_offset(addr: u64) -> usize {
    ((addr & ADDR_MASK) + (addr >> 48)) as usize
}

/// What one `receive` call took off the rx ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Frames written to the caller's slice (each a buffer it now owns).
    pub packets: usize,
    /// Bytes of those frames.
    pub bytes: u64,
    /// Descriptors that named no valid buffer or an empty/oversized frame (their buffers, when
    /// there was one, went back to the pool).
    pub bad: u64,
}

/// One AF_XDP socket with its four rings, owned by a single polling loop.
pub struct BatchSocket {
    // Rings first: unmapped before the socket closes.
    rx: ConsRing<XdpDesc>,
    fill: ProdRing<u64>,
    tx: ProdRing<XdpDesc>,
    comp: ConsRing<u64>,
    tx_watch: RingWatch,
    umem: Umem,
    scratch: Box<[u32]>,
    core: Arc<SocketCore>,
}

impl BatchSocket {
    /// Open the socket of `config` on `umem`, attaching vecplane's XDP program to the interface
    /// as `AfXdpPort::open` does (every frame arriving on the queue is redirected to this
    /// socket; with no buffers lent on the fill ring, the kernel drops them).
    pub fn open(umem: &Umem, config: &AfXdpConfig) -> Result<BatchSocket, AfXdpError> {
        let s = socket::open(umem, config)?;
        let scratch = vec![0u32; s.fill.size() as usize].into_boxed_slice();
        Ok(BatchSocket {
            tx_watch: s.tx.watch(),
            rx: s.rx,
            fill: s.fill,
            tx: s.tx,
            comp: s.comp,
            umem: umem.clone(),
            scratch,
            core: s.core,
        })
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.core.ifname
    }

    /// Queue index.
    pub fn queue(&self) -> u32 {
        self.core.queue
    }

    /// Where the XDP program runs.
    pub fn xdp_mode(&self) -> XdpMode {
        self.core.mode()
    }

    /// True in zero-copy mode, false in copy mode (veth, generic XDP).
    pub fn zerocopy(&self) -> bool {
        self.core.zerocopy
    }

    /// The kernel's XDP_STATISTICS for this socket.
    pub fn statistics(&self) -> Result<XdpStatistics, AfXdpError> {
        self.core.statistics()
    }

    /// Wake-up syscalls (sendto/recvfrom) that failed with an unexpected error.
    pub fn wakeup_errors(&self) -> u64 {
        self.core.wakeup_errors.load(Ordering::Relaxed)
    }

    /// Entries of the tx ring.
    pub fn tx_ring_size(&self) -> u32 {
        self.tx.size()
    }

    /// Entries of the completion ring.
    pub fn completion_ring_size(&self) -> u32 {
        self.comp.size()
    }

    #[inline(always)]
    fn check_pool(&self, pool: &BufferPool) {
        assert!(
            self.umem.is_pool(pool),
            "AF_XDP socket {} queue {}: used with a buffer pool that is not its UMEM",
            self.core.ifname,
            self.core.queue
        );
    }

    /// Free room on the tx ring.
    #[inline]
    pub fn tx_room(&mut self) -> u32 {
        self.tx.free(self.tx.size())
    }

    /// Frames on the tx ring the kernel has not taken yet.
    #[inline]
    pub fn tx_pending(&self) -> u32 {
        self.tx_watch.pending()
    }

    /// Put `buffers` (each sent as its metadata's `data_offset`/`length` describe) on the tx
    /// ring, in order, as far as there is room; returns how many were placed. The first
    /// `placed` buffers belong to the kernel until `take_completed` returns them; the rest stay
    /// the caller's. Nothing is sent before `kick_tx` (copy mode).
    #[inline]
    pub fn transmit(&mut self, pool: &BufferPool, buffers: &[u32]) -> usize {
        self.check_pool(pool);
        self.tx.produce(buffers.len() as u32, |i| {
            let b = buffers[i as usize];
            let m = pool.meta(b);
            XdpDesc {
                addr: (pool.slot_offset(b) + m.data_offset as usize) as u64,
                len: m.length as u32,
                options: 0,
            }
        }) as usize
    }

    /// Ask the kernel to send what is on the tx ring, if it wants to be asked (always in copy
    /// mode, where the sending happens inside this call); returns true when a syscall was made.
    #[inline]
    pub fn kick_tx(&self) -> bool {
        if self.tx.needs_wakeup() {
            self.core.count_wakeup(xsk::kick_tx(&self.core.fd));
            true
        } else {
            false
        }
    }

    /// Move up to `out.len()` completed transmissions off the completion ring into `out` as
    /// buffer indices (the caller owns them again); returns how many.
    #[inline]
    pub fn take_completed(&mut self, pool: &BufferPool, out: &mut [u32]) -> usize {
        self.check_pool(pool);
        let mut k = 0;
        self.comp.consume(out.len() as u32, |addr| {
            if let Some((b, _)) = pool.index_of_offset(umem_offset(addr)) {
                out[k] = b;
                k += 1;
            }
        });
        k
    }

    /// Lend the kernel free buffers for reception, as many as the fill ring has room for (and
    /// the pool has), once at least 64 entries are free; returns how many were lent.
    #[inline]
    pub fn refill(&mut self, pool: &mut BufferPool) -> usize {
        self.check_pool(pool);
        let free = self.fill.free(REFILL_BATCH);
        if free < REFILL_BATCH {
            return 0;
        }
        let want = (free as usize).min(self.scratch.len());
        let got = pool.alloc_batch(&mut self.scratch[..want]);
        let scratch = &self.scratch;
        let pool_ref = &*pool;
        let put = self.fill.produce(got as u32, |i| {
            pool_ref.slot_offset(scratch[i as usize]) as u64
        }) as usize;
        if put < got {
            pool.free_batch(&self.scratch[put..got]);
        }
        put
    }

    /// Take up to `out.len()` received frames off the rx ring into `out` as buffer indices (the
    /// caller owns them; their metadata says where the frame is and how long it is, `rx_port`
    /// is 0).
    #[inline]
    pub fn receive(&mut self, pool: &mut BufferPool, out: &mut [u32]) -> Received {
        self.check_pool(pool);
        let mut r = Received::default();
        let stride = pool.stride();
        let max = out.len() as u32;
        self.rx
            .consume(max, |d| match pool.index_of_offset(umem_offset(d.addr)) {
                Some((b, off)) if d.len > 0 && d.options == 0 && off + d.len as usize <= stride => {
                    *pool.meta_mut(b) = BufferMeta {
                        data_offset: off as u16,
                        length: d.len as u16,
                        ..BufferMeta::default()
                    };
                    out[r.packets] = b;
                    r.packets += 1;
                    r.bytes += d.len as u64;
                }
                Some((b, _)) => {
                    pool.free(b);
                    r.bad += 1;
                }
                None => r.bad += 1,
            });
        r
    }

    /// Count up to `max` received frames and hand their buffers straight back to the kernel on
    /// the fill ring, without touching the pool or the frames (for a loop that only counts).
    /// The fill ring always has room for them when no more buffers were lent than it holds.
    /// Returns the frames and bytes counted; descriptors naming no buffer are counted in `bad`
    /// and not returned.
    #[inline]
    pub fn recycle_received(&mut self, pool: &BufferPool, max: u32) -> Received {
        self.check_pool(pool);
        let mut r = Received::default();
        let room = self.fill.free(max);
        let (unaligned, stride, len) = (
            self.umem.is_unaligned(),
            pool.stride() as u64,
            pool.region_bytes() as u64,
        );
        let mut bases = [0u64; RECYCLE_BATCH as usize];
        let n = self.rx.consume(max.min(room).min(RECYCLE_BATCH), |d| {
            // The chunk's base: the address the fill ring lent (unaligned mode keeps it in the
            // low 48 bits; aligned chunks are stride-aligned, the stride a power of two).
            let base = if unaligned {
                d.addr & ADDR_MASK
            } else {
                d.addr & !(stride - 1)
            };
            if base + stride <= len && d.len > 0 {
                bases[r.packets] = base;
                r.packets += 1;
                r.bytes += d.len as u64;
            } else {
                r.bad += 1;
            }
        });
        debug_assert!(n as usize == r.packets + r.bad as usize);
        let returned = self.fill.produce(r.packets as u32, |i| bases[i as usize]);
        debug_assert!(returned as usize == r.packets, "the fill ring had room");
        r
    }

    /// Wake the driver to refill from the fill ring, if it asks for it (zero-copy drivers);
    /// returns true when a syscall was made.
    #[inline]
    pub fn wake_rx(&self) -> bool {
        if self.fill.needs_wakeup() {
            self.core.count_wakeup(xsk::wake_rx(&self.core.fd));
            true
        } else {
            false
        }
    }
}

impl std::fmt::Debug for BatchSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSocket")
            .field("ifname", &self.ifname())
            .field("queue", &self.queue())
            .field("mode", &self.xdp_mode())
            .field("zerocopy", &self.zerocopy())
            .finish()
    }
}

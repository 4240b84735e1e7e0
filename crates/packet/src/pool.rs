//! The buffer pool: one memory region of fixed-size buffer slots plus two metadata arrays (the
//! hot `BufferMeta` line, and the `FeatureMeta` line only features that need it touch), handed
//! out as `u32` indices in batches. A pool may also hold a few jumbo slots (64 KiB, in a region of
//! their own, indices after the ordinary ones) for offloaded super-packets: they are handed out
//! only by `alloc_jumbo`, so ports that register the ordinary region (AF_XDP) never see one. It owns buffer memory and the free list; it never blocks, never
//! allocates after construction and never panics on exhaustion (a short batch is the answer).

use crate::meta::{BufferMeta, FeatureMeta, FLAG_FEATURE_META};
use thiserror::Error;

/// Bytes of data a jumbo buffer holds: the largest frame `BufferMeta::length` can describe.
pub const JUMBO_DATA_SIZE: u16 = u16::MAX;

/// Size of a huge page the pool tries first.
pub const HUGE_PAGE_SIZE: usize = 2 * 1024 * 1024;

/// How a pool is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Number of buffers.
    pub buffers: u32,
    /// Bytes reserved before the packet for encapsulation (at least 128).
    pub headroom: u16,
    /// Bytes available for packet data.
    pub data_size: u16,
    /// Try 2 MiB hugepages first (falls back to normal pages when none are reserved).
    pub try_hugepages: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            buffers: 16384,
            headroom: 128,
            data_size: 2048,
            try_hugepages: true,
        }
    }
}

/// Errors building a pool.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PoolError {
    /// The configuration is out of range.
    #[error("buffer pool: {0}")]
    Invalid(String),
    /// The operating system refused the memory.
    #[error("buffer pool: cannot map {bytes} bytes: {reason}")]
    Map {
        /// Bytes asked for.
        bytes: usize,
        /// What the OS said.
        reason: String,
    },
}

/// What memory backs the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Reserved 2 MiB hugepages (MAP_HUGETLB).
    HugePages,
    /// Normal pages (transparent huge pages advised).
    NormalPages,
}

impl std::fmt::Display for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backing::HugePages => "2 MiB hugepages",
            Backing::NormalPages => "normal pages",
        })
    }
}

/// Counters of a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers asked for but not given because the pool was empty.
    pub alloc_failures: u64,
}

/// A pool of packet buffers owned by one worker.
pub struct BufferPool {
    metas: Vec<BufferMeta>,
    /// The feature line of each buffer: valid only with `FLAG_FEATURE_META` in its hot line, so
    /// allocation never writes it.
    features: Vec<FeatureMeta>,
    region: *mut u8,
    region_len: usize,
    stride: usize,
    headroom: u16,
    data_size: u16,
    free: Vec<u32>,
    /// Number of ordinary buffers; jumbo buffers have the indices from here on.
    ordinary: u32,
    jumbo_region: *mut u8,
    jumbo_region_len: usize,
    jumbo_stride: usize,
    jumbo_free: Vec<u32>,
    backing: Backing,
    stats: PoolStats,
    #[cfg(debug_assertions)]
    in_use: Vec<bool>,
}

// SAFETY: the pool exclusively owns its mapped region; moving it to another thread moves that
// ownership. It is not Sync: all access goes through `&self`/`&mut self` of one owner.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Build a pool: map its memory (hugepages if reserved, else normal pages) and fill the free list.
    pub fn new(config: PoolConfig) -> Result<BufferPool, PoolError> {
        if config.buffers == 0 || config.buffers > (1 << 24) {
            return Err(PoolError::Invalid(format!(
                "buffers = {} is out of range; accepted: 1..={}",
                config.buffers,
                1 << 24
            )));
        }
        if config.headroom < 128 {
            return Err(PoolError::Invalid(format!(
                "headroom = {} is too small; accepted: at least 128 bytes",
                config.headroom
            )));
        }
        if config.data_size < 64 {
            return Err(PoolError::Invalid(format!(
                "data size = {} is too small; accepted: 64..=65535 bytes",
                config.data_size
            )));
        }
        let stride = (config.headroom as usize + config.data_size as usize).div_ceil(64) * 64;
        let bytes = stride * config.buffers as usize;
        let (region, region_len, backing) = map_region(bytes, config.try_hugepages)?;
        let n = config.buffers as usize;
        let mut free = Vec::with_capacity(n);
        // Lowest indices on top of the stack: they are handed out first.
        free.extend((0..config.buffers).rev());
        Ok(BufferPool {
            metas: vec![BufferMeta::default(); n],
            features: vec![FeatureMeta::default(); n],
            region,
            region_len,
            stride,
            headroom: config.headroom,
            data_size: config.data_size,
            free,
            ordinary: config.buffers,
            jumbo_region: core::ptr::null_mut(),
            jumbo_region_len: 0,
            jumbo_stride: 0,
            jumbo_free: Vec::new(),
            backing,
            stats: PoolStats::default(),
            #[cfg(debug_assertions)]
            in_use: vec![false; n],
        })
    }

    /// Build a pool as `new` does, plus `jumbo` buffers of `JUMBO_DATA_SIZE` bytes each (normal
    /// pages; 0 adds none) for super-packets that ports with segmentation offload hand over.
    pub fn with_jumbo(config: PoolConfig, jumbo: u32) -> Result<BufferPool, PoolError> {
        let mut pool = BufferPool::new(config)?;
        if jumbo == 0 {
            return Ok(pool);
        }
        if jumbo > 4096 || config.buffers + jumbo > (1 << 24) {
            return Err(PoolError::Invalid(format!(
                "jumbo buffers = {jumbo} is out of range; accepted: 0..=4096, with at most {} \
                 buffers in all",
                1 << 24
            )));
        }
        let stride = (config.headroom as usize + JUMBO_DATA_SIZE as usize).div_ceil(64) * 64;
        let (region, len, _) = map_region(stride * jumbo as usize, false)?;
        pool.jumbo_region = region;
        pool.jumbo_region_len = len;
        pool.jumbo_stride = stride;
        let first = config.buffers;
        pool.jumbo_free = (first..first + jumbo).rev().collect();
        pool.metas
            .resize(pool.metas.len() + jumbo as usize, BufferMeta::default());
        pool.features
            .resize(pool.metas.len(), FeatureMeta::default());
        #[cfg(debug_assertions)]
        pool.in_use.resize(pool.metas.len(), false);
        Ok(pool)
    }

    /// Number of ordinary buffers in the pool.
    pub fn capacity(&self) -> usize {
        self.ordinary as usize
    }

    /// Number of ordinary buffers currently free.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Number of jumbo buffers in the pool.
    pub fn jumbo_capacity(&self) -> usize {
        self.metas.len() - self.ordinary as usize
    }

    /// Number of jumbo buffers currently free.
    pub fn jumbo_available(&self) -> usize {
        self.jumbo_free.len()
    }

    /// True when `buffer` is a jumbo buffer.
    #[inline(always)]
    pub fn is_jumbo(&self, buffer: u32) -> bool {
        buffer >= self.ordinary
    }

    /// Bytes of data buffer `buffer` holds after a fresh headroom (`data_size` or
    /// `JUMBO_DATA_SIZE`).
    #[inline(always)]
    pub fn buffer_data_size(&self, buffer: u32) -> usize {
        if self.is_jumbo(buffer) {
            JUMBO_DATA_SIZE as usize
        } else {
            self.data_size as usize
        }
    }

    /// Memory that backs the buffers.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// Bytes of data an ordinary buffer holds.
    pub fn data_size(&self) -> usize {
        self.data_size as usize
    }

    /// Bytes of headroom before the data of a fresh buffer.
    pub fn headroom(&self) -> usize {
        self.headroom as usize
    }

    /// Distance between two buffer slots in the region.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Bytes mapped for buffer data.
    pub fn region_bytes(&self) -> usize {
        self.region_len
    }

    /// Start of the mapped buffer region (page-aligned), e.g. to register it as an AF_XDP UMEM.
    /// Slot `i` starts `slot_offset(i)` bytes after it. Reading or writing through the pointer
    /// is the caller's `unsafe` business; the pool keeps the mapping alive until it is dropped.
    pub fn region_ptr(&self) -> *mut u8 {
        self.region
    }

    /// Byte offset of ordinary buffer `buffer`'s slot from the start of the region (jumbo
    /// buffers live elsewhere: callers that register the region must never see one).
    #[inline(always)]
    pub fn slot_offset(&self, buffer: u32) -> usize {
        debug_assert!(
            !self.is_jumbo(buffer),
            "jumbo buffer {buffer} has no region offset"
        );
        buffer as usize * self.stride
    }

    /// The buffer whose slot holds byte `offset` of the region, and the offset inside that slot;
    /// `None` when `offset` is past the last slot.
    #[inline(always)]
    pub fn index_of_offset(&self, offset: usize) -> Option<(u32, usize)> {
        let index = offset / self.stride;
        (index < self.ordinary as usize).then(|| (index as u32, offset - index * self.stride))
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Allocate up to `out.len()` buffers; returns how many were written to `out`. Each buffer's
    /// metadata is reset (data at the headroom, length 0). A short count means the pool ran dry,
    /// and the shortfall is counted in `alloc_failures`.
    #[inline]
    pub fn alloc_batch(&mut self, out: &mut [u32]) -> usize {
        let n = out.len().min(self.free.len());
        let start = self.free.len() - n;
        let template = BufferMeta {
            data_offset: self.headroom,
            ..BufferMeta::default()
        };
        for (dst, &idx) in out[..n].iter_mut().zip(&self.free[start..]) {
            *dst = idx;
            self.metas[idx as usize] = template;
            #[cfg(debug_assertions)]
            {
                debug_assert!(!self.in_use[idx as usize], "buffer {idx} allocated twice");
                self.in_use[idx as usize] = true;
            }
        }
        self.free.truncate(start);
        self.stats.alloc_failures += (out.len() - n) as u64;
        n
    }

    /// Allocate one buffer, or `None` when the pool is empty (counted).
    #[inline]
    pub fn alloc(&mut self) -> Option<u32> {
        let mut one = [0u32; 1];
        (self.alloc_batch(&mut one) == 1).then_some(one[0])
    }

    /// Allocate one jumbo buffer (reset as `alloc_batch` resets), or `None` when there are none
    /// free (counted in `alloc_failures`).
    #[inline]
    pub fn alloc_jumbo(&mut self) -> Option<u32> {
        let Some(idx) = self.jumbo_free.pop() else {
            self.stats.alloc_failures += 1;
            return None;
        };
        self.metas[idx as usize] = BufferMeta {
            data_offset: self.headroom,
            ..BufferMeta::default()
        };
        #[cfg(debug_assertions)]
        {
            debug_assert!(!self.in_use[idx as usize], "buffer {idx} allocated twice");
            self.in_use[idx as usize] = true;
        }
        Some(idx)
    }

    /// Allocate a buffer that holds `len` bytes after a fresh headroom: an ordinary one when it
    /// fits, else a jumbo one. `None` when none is free or `len` fits neither.
    #[inline]
    pub fn alloc_for(&mut self, len: usize) -> Option<u32> {
        if len <= self.data_size as usize {
            self.alloc()
        } else if len <= JUMBO_DATA_SIZE as usize {
            self.alloc_jumbo()
        } else {
            None
        }
    }

    /// Return buffers to the pool.
    #[inline]
    pub fn free_batch(&mut self, buffers: &[u32]) {
        for &idx in buffers {
            #[cfg(debug_assertions)]
            {
                debug_assert!(self.in_use[idx as usize], "buffer {idx} freed twice");
                self.in_use[idx as usize] = false;
            }
            if idx < self.ordinary {
                debug_assert!(self.free.len() < self.free.capacity());
                self.free.push(idx);
            } else {
                debug_assert!(self.jumbo_free.len() < self.jumbo_free.capacity());
                self.jumbo_free.push(idx);
            }
        }
    }

    /// Return one buffer to the pool.
    #[inline]
    pub fn free(&mut self, buffer: u32) {
        self.free_batch(&[buffer]);
    }

    /// Metadata of a buffer.
    #[inline(always)]
    pub fn meta(&self, buffer: u32) -> &BufferMeta {
        &self.metas[buffer as usize]
    }

    /// Mutable metadata of a buffer.
    #[inline(always)]
    pub fn meta_mut(&mut self, buffer: u32) -> &mut BufferMeta {
        &mut self.metas[buffer as usize]
    }

    /// The feature line of a buffer, when it holds this packet's values (`FLAG_FEATURE_META`
    /// in the hot line); `None` for a packet no feature wrote one for.
    #[inline(always)]
    pub fn feature_meta(&self, buffer: u32) -> Option<&FeatureMeta> {
        let i = buffer as usize;
        (self.metas[i].flags & FLAG_FEATURE_META != 0).then(|| &self.features[i])
    }

    /// The feature line of a buffer, to write: when it did not hold this packet's values yet
    /// (a previous packet's may still be there) it is reset first and `FLAG_FEATURE_META` set.
    #[inline]
    pub fn feature_meta_mut(&mut self, buffer: u32) -> &mut FeatureMeta {
        let i = buffer as usize;
        let m = &mut self.metas[i];
        if m.flags & FLAG_FEATURE_META == 0 {
            m.flags |= FLAG_FEATURE_META;
            self.features[i] = FeatureMeta::default();
        }
        &mut self.features[i]
    }

    /// Give buffer `to` the metadata of buffer `from`, for a copy, segment or fragment of its
    /// packet: the hot line, and the feature line when `from` has one. The caller then adjusts
    /// what differs (offsets, length, offloads) in the hot line. Every copy of a packet's
    /// metadata goes through here, so a copy never claims a feature line it did not get.
    #[inline]
    pub fn copy_meta(&mut self, from: u32, to: u32) {
        let (f, t) = (from as usize, to as usize);
        let m = self.metas[f];
        self.metas[t] = m;
        if m.flags & FLAG_FEATURE_META != 0 {
            self.features[t] = self.features[f];
        }
    }

    /// Start and length of a buffer's slot.
    #[inline(always)]
    fn slot_ptr(&self, buffer: u32) -> (*mut u8, usize) {
        if buffer < self.ordinary {
            // SAFETY: buffer < ordinary, so the offset stays inside the mapped region.
            (
                unsafe { self.region.add(buffer as usize * self.stride) },
                self.stride,
            )
        } else {
            self.jumbo_slot_ptr(buffer)
        }
    }

    #[cold]
    fn jumbo_slot_ptr(&self, buffer: u32) -> (*mut u8, usize) {
        assert!(
            (buffer as usize) < self.metas.len(),
            "buffer index {buffer} out of pool"
        );
        let i = (buffer - self.ordinary) as usize;
        // SAFETY: i < jumbo count, so the offset stays inside the jumbo region.
        let ptr = unsafe { self.jumbo_region.add(i * self.jumbo_stride) };
        (ptr, self.jumbo_stride)
    }

    /// The whole slot of a buffer (headroom and data), read-only.
    #[inline(always)]
    pub fn slot(&self, buffer: u32) -> &[u8] {
        let (ptr, len) = self.slot_ptr(buffer);
        // SAFETY: the slot is `len` bytes inside a region owned by `self`; the shared borrow
        // of `self` keeps any `&mut` to it from existing.
        unsafe { core::slice::from_raw_parts(ptr, len) }
    }

    /// Metadata and packet bytes of a buffer (one metadata lookup for both).
    #[inline(always)]
    pub fn packet(&self, buffer: u32) -> (&BufferMeta, &[u8]) {
        let m = &self.metas[buffer as usize];
        let (start, len) = (m.data_offset as usize, m.length as usize);
        (m, &self.slot(buffer)[start..start + len])
    }

    /// The packet bytes of a buffer.
    #[inline(always)]
    pub fn data(&self, buffer: u32) -> &[u8] {
        self.packet(buffer).1
    }

    /// Metadata and the packet bytes of a buffer, both mutable.
    #[inline(always)]
    pub fn packet_mut(&mut self, buffer: u32) -> (&mut BufferMeta, &mut [u8]) {
        let (meta, slot) = self.slot_mut(buffer);
        let (start, len) = (meta.data_offset as usize, meta.length as usize);
        (meta, &mut slot[start..start + len])
    }

    /// Metadata and the whole slot of a buffer (headroom and room to grow), both mutable.
    #[inline(always)]
    pub fn slot_mut(&mut self, buffer: u32) -> (&mut BufferMeta, &mut [u8]) {
        let (ptr, len) = self.slot_ptr(buffer);
        // SAFETY: the slot is `len` bytes inside a region owned by `self`, disjoint from
        // `metas`; the exclusive borrow of `self` makes this the only reference to it.
        let slot = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
        (&mut self.metas[buffer as usize], slot)
    }

    /// Copy `bytes` into a buffer as its whole packet (at the headroom). Returns false, changing
    /// nothing, when they do not fit.
    #[inline]
    pub fn write_packet(&mut self, buffer: u32, bytes: &[u8]) -> bool {
        let headroom = self.headroom as usize;
        if bytes.len() > self.buffer_data_size(buffer) {
            return false;
        }
        let (meta, slot) = self.slot_mut(buffer);
        slot[headroom..headroom + bytes.len()].copy_from_slice(bytes);
        meta.data_offset = headroom as u16;
        meta.length = bytes.len() as u16;
        true
    }

    /// Copy `len` packet bytes of buffer `from`, starting `at` bytes into its packet, into
    /// buffer `to`'s slot at byte `to_at` (counted from the start of the slot). Returns false,
    /// copying nothing, when `from == to` or either range falls outside its buffer.
    #[inline]
    pub fn copy_between(
        &mut self,
        from: u32,
        at: usize,
        len: usize,
        to: u32,
        to_at: usize,
    ) -> bool {
        if from == to || from as usize >= self.metas.len() || to as usize >= self.metas.len() {
            return false;
        }
        let m = &self.metas[from as usize];
        let Some(end) = at.checked_add(len) else {
            return false;
        };
        if end > m.length as usize {
            return false;
        }
        let src_at = m.data_offset as usize + at;
        let (src, _) = self.slot_ptr(from);
        let (dst, dst_len) = self.slot_ptr(to);
        if to_at.checked_add(len).is_none_or(|e| e > dst_len) {
            return false;
        }
        // SAFETY: both ranges were checked to lie inside their slots (the source inside its
        // packet, which the pool keeps inside the slot); two different buffers' slots never
        // overlap, and `&mut self` makes this the only access to either.
        unsafe { core::ptr::copy_nonoverlapping(src.add(src_at), dst.add(to_at), len) };
        true
    }

    /// Grow the packet at the front by `bytes` (for a new header). Returns false when the
    /// headroom is too small or the length would pass 65535.
    #[inline]
    pub fn push_front(&mut self, buffer: u32, bytes: u16) -> bool {
        let m = &mut self.metas[buffer as usize];
        let Some(length) = m.length.checked_add(bytes) else {
            return false;
        };
        if m.data_offset < bytes {
            return false;
        }
        m.data_offset -= bytes;
        m.length = length;
        true
    }

    /// Shrink the packet at the front by `bytes`. Returns false when it is shorter than that.
    #[inline]
    pub fn pull_front(&mut self, buffer: u32, bytes: u16) -> bool {
        let m = &mut self.metas[buffer as usize];
        if m.length < bytes {
            return false;
        }
        m.data_offset += bytes;
        m.length -= bytes;
        true
    }

    /// Hint the CPU to load a buffer's metadata and first data line.
    #[inline(always)]
    pub fn prefetch(&self, buffer: u32) {
        #[cfg(target_arch = "x86_64")]
        if buffer < self.ordinary {
            let meta = &self.metas[buffer as usize] as *const BufferMeta as *const i8;
            // SAFETY: prefetch never faults; both addresses are inside memory owned by `self`.
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch(meta, _MM_HINT_T0);
                let data = self
                    .region
                    .add(buffer as usize * self.stride + self.headroom as usize);
                _mm_prefetch(data as *const i8, _MM_HINT_T0);
            }
        }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: `region`/`region_len` are exactly what mmap returned in `new`, unmapped once.
        unsafe {
            libc::munmap(self.region as *mut libc::c_void, self.region_len);
            if !self.jumbo_region.is_null() {
                libc::munmap(
                    self.jumbo_region as *mut libc::c_void,
                    self.jumbo_region_len,
                );
            }
        }
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("buffers", &self.metas.len())
            .field("available", &self.free.len())
            .field("jumbo", &self.jumbo_capacity())
            .field("stride", &self.stride)
            .field("backing", &self.backing)
            .finish()
    }
}

fn map_region(bytes: usize, try_huge: bool) -> Result<(*mut u8, usize, Backing), PoolError> {
    if try_huge {
        let len = bytes.div_ceil(HUGE_PAGE_SIZE) * HUGE_PAGE_SIZE;
        // SAFETY: anonymous private mapping with no address hint; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_HUGETLB
                    | libc::MAP_POPULATE
                    | (21 << libc::MAP_HUGE_SHIFT),
                -1,
                0,
            )
        };
        if ptr != libc::MAP_FAILED {
            return Ok((ptr as *mut u8, len, Backing::HugePages));
        }
    }
    let len = bytes.div_ceil(4096) * 4096;
    // SAFETY: anonymous private mapping with no address hint; the result is checked.
    let ptr = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(PoolError::Map {
            bytes: len,
            reason: std::io::Error::last_os_error().to_string(),
        });
    }
    // SAFETY: `ptr..ptr+len` is the mapping just made. Advice failures are harmless. Touching
    // every page now keeps page faults off the fast path.
    unsafe {
        libc::madvise(ptr, len, libc::MADV_HUGEPAGE);
        libc::madvise(ptr, len, libc::MADV_POPULATE_WRITE);
    }
    Ok((ptr as *mut u8, len, Backing::NormalPages))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> BufferPool {
        BufferPool::new(PoolConfig {
            buffers: 8,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool")
    }

    #[test]
    fn alloc_free_roundtrip_and_exhaustion() {
        let mut p = small();
        let mut out = [0u32; 10];
        assert_eq!(p.alloc_batch(&mut out), 8);
        assert_eq!(p.available(), 0);
        assert_eq!(p.stats().alloc_failures, 2);
        assert!(p.alloc().is_none());
        p.free_batch(&out[..8]);
        assert_eq!(p.available(), 8);
    }

    #[test]
    fn metadata_is_reset_on_alloc() {
        let mut p = small();
        let b = p.alloc().expect("one");
        p.meta_mut(b).length = 99;
        p.meta_mut(b).flags = 7;
        p.free(b);
        let b2 = p.alloc().expect("one");
        assert_eq!(b, b2);
        assert_eq!(p.meta(b2).length, 0);
        assert_eq!(p.meta(b2).flags, 0);
        assert_eq!(p.meta(b2).data_offset as usize, p.headroom());
    }

    #[test]
    fn a_reallocated_buffer_shows_no_previous_feature_line() {
        use crate::meta::{FLAG_FEATURE_META, FM_CT, FM_MARK};
        let mut p = small();
        let b = p.alloc().expect("one");
        assert!(p.feature_meta(b).is_none(), "a fresh buffer has none");
        let f = p.feature_meta_mut(b);
        f.valid = FM_CT | FM_MARK;
        (f.zone, f.mark, f.session) = (7, 0xdead, 42);
        assert_eq!(p.feature_meta(b).map(|f| f.mark), Some(0xdead));
        p.free(b);
        let b2 = p.alloc().expect("one");
        assert_eq!(b, b2);
        assert!(
            p.feature_meta(b2).is_none(),
            "the old packet's line is not this one's"
        );
        assert_eq!(p.meta(b2).flags & FLAG_FEATURE_META, 0);
        // Writing the new packet's line starts from nothing, whatever the slot still holds.
        assert_eq!(*p.feature_meta_mut(b2), FeatureMeta::default());
        p.feature_meta_mut(b2).mark = 1;
        assert_eq!(
            p.feature_meta_mut(b2).mark,
            1,
            "a second write keeps the first"
        );
        // A hot line overwritten whole (a port building its metadata) drops the claim too.
        *p.meta_mut(b2) = BufferMeta::default();
        assert!(p.feature_meta(b2).is_none());
    }

    #[test]
    fn copies_take_the_feature_line_along() {
        use crate::meta::FM_TUN6;
        let mut p = BufferPool::with_jumbo(
            PoolConfig {
                buffers: 4,
                try_hugepages: false,
                ..PoolConfig::default()
            },
            1,
        )
        .expect("pool");
        let (a, j) = (p.alloc().expect("a"), p.alloc_jumbo().expect("jumbo"));
        p.meta_mut(a).length = 60;
        let f = p.feature_meta_mut(a);
        f.valid = FM_TUN6;
        f.tun6_src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let want = *f;
        // To a jumbo buffer and on to an ordinary one: both lines travel.
        p.copy_meta(a, j);
        let c = p.alloc().expect("c");
        p.copy_meta(j, c);
        for x in [j, c] {
            assert_eq!(p.meta(x), p.meta(a));
            assert_eq!(p.feature_meta(x), Some(&want));
        }
        // A packet without a line copied over a buffer whose slot still holds one: none.
        let plain = p.alloc().expect("plain");
        p.copy_meta(plain, c);
        assert!(p.feature_meta(c).is_none());
        assert_eq!(p.feature_meta(a), Some(&want), "the source keeps its own");
    }

    #[test]
    fn write_push_pull() {
        let mut p = small();
        let b = p.alloc().expect("one");
        assert!(p.write_packet(b, &[1, 2, 3, 4]));
        assert_eq!(p.data(b), &[1, 2, 3, 4]);
        assert!(p.push_front(b, 2));
        assert_eq!(p.data(b).len(), 6);
        assert!(p.pull_front(b, 4));
        assert_eq!(p.data(b), &[3, 4]);
        assert!(!p.pull_front(b, 3));
        assert!(!p.write_packet(b, &vec![0u8; 4096]));
        let (_, bytes) = p.packet_mut(b);
        bytes[0] = 9;
        assert_eq!(p.data(b), &[9, 4]);
    }

    #[test]
    fn slots_do_not_overlap() {
        let mut p = small();
        let mut out = [0u32; 8];
        p.alloc_batch(&mut out);
        for &b in &out {
            assert!(p.write_packet(b, &[b as u8; 2048]));
        }
        for &b in &out {
            assert!(p.data(b).iter().all(|&x| x == b as u8));
        }
    }

    #[test]
    fn jumbo_buffers_are_separate_and_come_back() {
        let mut p = BufferPool::with_jumbo(
            PoolConfig {
                buffers: 4,
                try_hugepages: false,
                ..PoolConfig::default()
            },
            2,
        )
        .unwrap();
        assert_eq!((p.capacity(), p.jumbo_capacity()), (4, 2));
        let small = p.alloc_for(1500).unwrap();
        let big = p.alloc_for(60_000).unwrap();
        assert!(!p.is_jumbo(small) && p.is_jumbo(big));
        assert_eq!(p.available(), 3);
        assert_eq!(p.jumbo_available(), 1);
        let frame: Vec<u8> = (0..65_535u32).map(|i| i as u8).collect();
        assert!(!p.write_packet(small, &frame));
        assert!(p.write_packet(big, &frame));
        assert_eq!(p.data(big), &frame[..]);
        // A header pushed on a full jumbo frame would overflow its length: refused.
        assert!(!p.push_front(big, 14));
        assert!(p.pull_front(big, 100) && p.push_front(big, 14));
        // Slots of the two jumbo buffers do not overlap.
        let other = p.alloc_jumbo().unwrap();
        assert!(p.write_packet(other, &[0xee; 100]));
        assert_eq!(&p.data(big)[14..], &frame[100..]);
        assert!(p.alloc_jumbo().is_none());
        assert_eq!(p.stats().alloc_failures, 1);
        assert!(p.alloc_for(70_000).is_none());
        // Copies between buffers stay inside both.
        assert!(p.copy_between(big, 10, 1000, small, 128));
        // The packet now starts at frame byte 86 (100 pulled, 14 pushed).
        assert!(p.slot(small)[128..1128] == frame[96..1096]);
        assert!(!p.copy_between(big, 10, 1000, big, 128));
        assert!(
            !p.copy_between(small, 0, 1, big, 0),
            "past the source packet"
        );
        assert!(
            !p.copy_between(big, 0, 3000, small, 0),
            "past the destination slot"
        );
        assert!(!p.copy_between(big, usize::MAX, 2, small, 0));
        p.free_batch(&[big, small, other]);
        assert_eq!((p.available(), p.jumbo_available()), (4, 2));
        assert!(p.index_of_offset(4 * p.stride()).is_none());
    }

    #[test]
    fn rejects_bad_config() {
        let bad = PoolConfig {
            headroom: 64,
            ..PoolConfig::default()
        };
        assert!(matches!(BufferPool::new(bad), Err(PoolError::Invalid(_))));
    }
}

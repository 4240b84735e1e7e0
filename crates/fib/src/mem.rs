//! Page-backed lookup-table storage and the prefetch hint.
//! Owns the only `unsafe` code of the crate: anonymous `mmap`/`munmap`, THP advice and raw slices.
//! It must never hand out memory that is not zero-initialised or outlive its mapping.

use crate::FibError;
use std::ptr::NonNull;

/// Size of a transparent huge page on x86-64 (and the alignment we give big tables).
const HUGE_PAGE: usize = 2 << 20;

/// Plain integer element types (and atomics of them) that are valid when all bytes are zero.
pub(crate) trait Pod: 'static + private::Sealed {}
impl Pod for u16 {}
impl Pod for std::sync::atomic::AtomicU16 {}
impl Pod for std::sync::atomic::AtomicU32 {}
impl Pod for u32 {}
impl Pod for u128 {}
impl Pod for Slot<u32> {}
impl Pod for Slot<u128> {}
impl Pod for Slot<crate::ip6::Skip> {}

mod private {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for std::sync::atomic::AtomicU16 {}
    impl Sealed for std::sync::atomic::AtomicU32 {}
    impl Sealed for u32 {}
    impl Sealed for u128 {}
    impl Sealed for super::Slot<u32> {}
    impl Sealed for super::Slot<u128> {}
    impl Sealed for super::Slot<crate::ip6::Skip> {}
}

/// A table element that one writer fills while it is unreachable to readers and that readers
/// then only read: the IPv6 table's stride tables, range lists and skip nodes.
///
/// Contract (upheld by `Ip6FibWriter`): a slot is written only while no published entry leads to
/// it (fresh, or retired and past every worker's grace period); the entry that makes it
/// reachable is stored afterwards with `Release` and loaded by readers with `Acquire`, so every
/// read of a slot happens after its last write and before its next one.
#[repr(transparent)]
pub(crate) struct Slot<T: Copy>(std::cell::UnsafeCell<T>);

// SAFETY: shared access is reads only, except `set`, whose callers guarantee (contract above) that
// no other thread can access the slot at the same time; T is plain data.
unsafe impl<T: Copy + Send> Sync for Slot<T> {}

impl<T: Copy> Slot<T> {
    /// The value.
    #[inline(always)]
    pub(crate) fn get(&self) -> T {
        // SAFETY: readers reach a slot only through a published entry, after its last write
        // (Slot's contract), so this read races with no write.
        unsafe { *self.0.get() }
    }

    /// Overwrite the value.
    ///
    /// # Safety
    /// No other thread may read or write the slot until a `Release` store (or a grace period of
    /// the epoch domain) orders this write before their access.
    #[inline]
    pub(crate) unsafe fn set(&self, v: T) {
        // SAFETY: exclusive by the caller's guarantee.
        unsafe { *self.0.get() = v }
    }
}

/// A zero-initialised array of `len` elements in its own anonymous mapping.
///
/// Tables of 2 MiB or more are aligned to 2 MiB and advised `MADV_HUGEPAGE`, so random
/// lookups walk few TLB entries; if the advice is refused the table still works on 4 KiB pages.
pub(crate) struct HugeBuf<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    map_base: *mut libc::c_void,
    map_len: usize,
    huge: bool,
}

// SAFETY: a HugeBuf exclusively owns its mapping (like a Box<[T]>); T is a plain integer or an
// atomic integer, so moving the owner to another thread is data-race free.
unsafe impl<T: Pod + Send> Send for HugeBuf<T> {}
// SAFETY: shared access only hands out `&[T]` (plain integers read-only, or atomics whose shared
// mutation is data-race free by construction); non-atomic mutation needs `&mut self`.
unsafe impl<T: Pod + Sync> Sync for HugeBuf<T> {}

impl<T: Pod> HugeBuf<T> {
    /// Maps `len` zeroed elements.
    pub(crate) fn zeroed(len: usize) -> Result<Self, FibError> {
        let elem = std::mem::size_of::<T>();
        let bytes = len.checked_mul(elem).ok_or_else(|| FibError::Map {
            bytes: usize::MAX,
            reason: format!("{len} elements of {elem} bytes overflow the address space"),
        })?;
        if bytes == 0 {
            return Ok(HugeBuf {
                ptr: NonNull::dangling(),
                len: 0,
                map_base: std::ptr::null_mut(),
                map_len: 0,
                huge: false,
            });
        }
        let want_huge = bytes >= HUGE_PAGE;
        let map_len = if want_huge {
            bytes.checked_add(HUGE_PAGE).ok_or_else(|| FibError::Map {
                bytes,
                reason: "size overflows the address space".into(),
            })?
        } else {
            bytes
        };
        // SAFETY: anonymous private mapping with no address hint: it aliases nothing, and the result
        // is checked against MAP_FAILED before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(FibError::Map {
                bytes: map_len,
                reason: std::io::Error::last_os_error().to_string(),
            });
        }
        let offset = if want_huge {
            (HUGE_PAGE - (base as usize) % HUGE_PAGE) % HUGE_PAGE
        } else {
            0
        };
        // SAFETY: offset < HUGE_PAGE and offset + bytes <= map_len, so the pointer stays inside the mapping.
        let start = unsafe { base.cast::<u8>().add(offset) };
        let mut huge = false;
        if want_huge {
            let advise_len = bytes.div_ceil(HUGE_PAGE) * HUGE_PAGE;
            let advise_len = advise_len.min(map_len - offset);
            // SAFETY: [start, start + advise_len) lies inside our own mapping; madvise only changes
            // paging policy. Failure (no THP support) is harmless and ignored.
            huge = unsafe { libc::madvise(start.cast(), advise_len, libc::MADV_HUGEPAGE) } == 0;
        }
        let ptr = NonNull::new(start.cast::<T>()).ok_or_else(|| FibError::Map {
            bytes,
            reason: "mmap returned a null pointer".into(),
        })?;
        Ok(HugeBuf {
            ptr,
            len,
            map_base: base,
            map_len,
            huge,
        })
    }

    /// Size of the table in bytes (without alignment slack).
    pub(crate) fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Whether the kernel accepted the transparent-huge-page advice.
    pub(crate) fn is_huge(&self) -> bool {
        self.huge
    }
}

impl<T: Pod> std::ops::Deref for HugeBuf<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: ptr is aligned (page or 2 MiB aligned, or dangling for len 0) and points to `len`
        // initialised (zero or written) elements that live as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> std::ops::DerefMut for HugeBuf<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in Deref, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Drop for HugeBuf<T> {
    fn drop(&mut self) {
        if self.map_len != 0 {
            // SAFETY: (map_base, map_len) is exactly the mapping created in `zeroed`, unmapped once.
            unsafe {
                libc::munmap(self.map_base, self.map_len);
            }
        }
    }
}

impl<T: Pod> std::fmt::Debug for HugeBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeBuf")
            .field("len", &self.len)
            .field("bytes", &self.bytes())
            .field("huge", &self.huge)
            .finish()
    }
}

/// A [`HugeBuf`] of exactly `N` elements that dereferences to `[T; N]`, so that indexing it with
/// a value known to be below `N` (say `addr >> 8` of a `u32`) compiles without a bounds check.
pub(crate) struct HugeArray<T: Pod, const N: usize>(HugeBuf<T>);

impl<T: Pod, const N: usize> HugeArray<T, N> {
    /// Maps `N` zeroed elements.
    pub(crate) fn zeroed() -> Result<Self, FibError> {
        HugeBuf::zeroed(N).map(HugeArray)
    }

    /// Size of the array in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.0.bytes()
    }

    /// Whether the kernel accepted the transparent-huge-page advice.
    pub(crate) fn is_huge(&self) -> bool {
        self.0.is_huge()
    }
}

impl<T: Pod, const N: usize> std::ops::Deref for HugeArray<T, N> {
    type Target = [T; N];
    #[inline(always)]
    fn deref(&self) -> &[T; N] {
        // SAFETY: the buffer was mapped by `zeroed` with exactly N initialised, aligned elements
        // (a dangling aligned pointer when N == 0), which live as long as `self`.
        unsafe { &*self.0.ptr.as_ptr().cast::<[T; N]>() }
    }
}

impl<T: Pod, const N: usize> std::ops::DerefMut for HugeArray<T, N> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T; N] {
        // SAFETY: as in Deref, and `&mut self` guarantees exclusive access.
        unsafe { &mut *self.0.ptr.as_ptr().cast::<[T; N]>() }
    }
}

impl<T: Pod, const N: usize> std::fmt::Debug for HugeArray<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Hints the CPU to pull the cache line holding `p` into L1. Never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: PREFETCHT0 is a hint (SSE, baseline on x86-64); it does not fault on any address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = p;
    }
}

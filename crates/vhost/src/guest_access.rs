//! Every load and store vecplane makes in memory the guest shares (packet bytes, descriptors,
//! ring indices and flags) goes through here, as volatile or atomic accesses: the guest may
//! write that memory at any moment, so the compiler must neither assume it holds still (read a
//! checked value twice, or merge and drop accesses) nor treat a racing plain access as UB it
//! may exploit. Callers copy what they read into memory of their own and check it there.
//!
//! It owns no memory and checks no bounds: callers pass ranges that `memory`, `ring` and
//! `packed_ring` already translated and bounded inside one mapped guest region. It never
//! allocates, locks or makes a system call (the fast path calls it per packet).
//!
//! Bulk copies move 16-byte words on x86-64 (one SSE2 load or store each, aligned on the
//! guest's side) and 8-byte words elsewhere: a volatile access is never split or merged, so a
//! byte-by-byte loop would cost a load per byte where `memcpy` moves 16 or 32 at a time.

use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::AtomicU16;

/// The widest word a single volatile access moves on this architecture.
#[cfg(target_arch = "x86_64")]
type Word = std::arch::x86_64::__m128i;
#[cfg(not(target_arch = "x86_64"))]
type Word = u64;
const WORD: usize = std::mem::size_of::<Word>();

/// One value of guest memory at `src`.
///
/// # Safety
/// `src` must be aligned for `T` and point to `size_of::<T>()` bytes of mapped guest memory; `T`
/// must be valid for any bit pattern (integers and `repr(C)` structs of integers).
#[inline(always)]
pub(crate) unsafe fn load<T: Copy>(src: *const T) -> T {
    // SAFETY: the caller's contract; volatile because the guest may write it concurrently.
    unsafe { read_volatile(src) }
}

/// Store one value into guest memory at `dst`.
///
/// # Safety
/// `dst` must be aligned for `T` and point to `size_of::<T>()` bytes of mapped guest memory the
/// device may write.
#[inline(always)]
pub(crate) unsafe fn store<T: Copy>(dst: *mut T, v: T) {
    // SAFETY: the caller's contract; volatile because the guest may read it concurrently.
    unsafe { write_volatile(dst, v) }
}

/// The 16-bit ring word (index, flags, event) at `at`, for atomic loads and stores.
///
/// # Safety
/// `at` must be 2-aligned and point to 2 bytes of mapped guest memory that stays mapped for
/// `'a` (the device's snapshot keeps the mapping while a ring refers to it).
#[inline(always)]
pub(crate) unsafe fn atomic_u16<'a>(at: *const u8) -> &'a AtomicU16 {
    // SAFETY: the caller's contract; `AtomicU16` has the size and alignment of `u16`, and
    // atomic accesses are sound on memory another process writes concurrently.
    unsafe { &*(at as *const AtomicU16) }
}

/// Copy `dst.len()` bytes of guest memory from `src` into `dst` (ours).
///
/// # Safety
/// `src[..dst.len()]` must be mapped guest memory (not overlapping `dst`).
#[inline(always)]
pub(crate) unsafe fn read_bytes(src: *const u8, dst: &mut [u8]) {
    let d = FromGuest {
        src,
        out: dst.as_mut_ptr(),
    };
    // SAFETY: the caller's contract; `copy` moves only inside `0..dst.len()`.
    unsafe { copy(&d, src as usize, dst.len()) }
}

/// Copy `src` (ours) into guest memory at `dst`.
///
/// # Safety
/// `dst[..src.len()]` must be mapped guest memory the device may write (not overlapping
/// `src`).
#[inline(always)]
pub(crate) unsafe fn write_bytes(dst: *mut u8, src: &[u8]) {
    let d = ToGuest {
        dst,
        from: src.as_ptr(),
    };
    // SAFETY: the caller's contract; `copy` moves only inside `0..src.len()`.
    unsafe { copy(&d, dst as usize, src.len()) }
}

/// One direction of a copy: moves the `T` at byte `i`, volatile on the guest's side.
trait Direction {
    /// # Safety
    /// Byte range `i..i + size_of::<T>()` must be inside both sides, and the guest's side
    /// aligned for `T`.
    unsafe fn move_one<T: Copy>(&self, i: usize);
}

struct FromGuest {
    src: *const u8,
    out: *mut u8,
}

impl Direction for FromGuest {
    #[inline(always)]
    unsafe fn move_one<T: Copy>(&self, i: usize) {
        // SAFETY: the trait's contract: an aligned volatile load from the guest, a plain
        // unaligned store into our buffer.
        unsafe {
            let v: T = read_volatile(self.src.add(i) as *const T);
            (self.out.add(i) as *mut T).write_unaligned(v);
        }
    }
}

struct ToGuest {
    dst: *mut u8,
    from: *const u8,
}

impl Direction for ToGuest {
    #[inline(always)]
    unsafe fn move_one<T: Copy>(&self, i: usize) {
        // SAFETY: the trait's contract: a plain unaligned load from our buffer, an aligned
        // volatile store into the guest.
        unsafe {
            let v: T = (self.from.add(i) as *const T).read_unaligned();
            write_volatile(self.dst.add(i) as *mut T, v);
        }
    }
}

/// Move `n` bytes whose guest side starts at address `guest`: 1-, 2-, 4- and 8-byte steps up to
/// the first `WORD`-aligned guest byte, whole words (four at a time while there are), then
/// 8-, 4-, 2- and 1-byte steps for the rest. Every guest-side access is aligned for its size.
///
/// # Safety
/// `0..n` must be inside both sides of `d`.
#[inline(always)]
unsafe fn copy<D: Direction>(d: &D, guest: usize, n: usize) {
    // Whether the guest byte at `i` is aligned to `size` but not to `2 * size`.
    let odd_at = |i: usize, size: usize| (guest + i) & (2 * size - 1) == size;
    let mut i = 0;
    // SAFETY: every step checks that its bytes are inside `0..n` and that the guest side is
    // aligned for its size (a step skipped for want of bytes leaves the address unaligned for
    // the wider ones, which are then skipped too, down to single bytes).
    unsafe {
        if i < n && odd_at(i, 1) {
            d.move_one::<u8>(i);
            i += 1;
        }
        if i + 2 <= n && odd_at(i, 2) {
            d.move_one::<u16>(i);
            i += 2;
        }
        if i + 4 <= n && odd_at(i, 4) {
            d.move_one::<u32>(i);
            i += 4;
        }
        if WORD > 8 && i + 8 <= n && odd_at(i, 8) {
            d.move_one::<u64>(i);
            i += 8;
        }
        if (guest + i).is_multiple_of(WORD) {
            while i + 4 * WORD <= n {
                d.move_one::<Word>(i);
                d.move_one::<Word>(i + WORD);
                d.move_one::<Word>(i + 2 * WORD);
                d.move_one::<Word>(i + 3 * WORD);
                i += 4 * WORD;
            }
            while i + WORD <= n {
                d.move_one::<Word>(i);
                i += WORD;
            }
            if WORD > 8 && i + 8 <= n {
                d.move_one::<u64>(i);
                i += 8;
            }
            if i + 4 <= n {
                d.move_one::<u32>(i);
                i += 4;
            }
            if i + 2 <= n {
                d.move_one::<u16>(i);
                i += 2;
            }
        }
        while i < n {
            d.move_one::<u8>(i);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every length at every alignment of either side copies exactly its bytes, and not
        /// one byte more.
        #[test]
        fn copies_are_exact_at_any_alignment(
            src_at in 0usize..40,
            dst_at in 0usize..40,
            len in 0usize..300,
            seed in any::<u8>(),
        ) {
            let source: Vec<u8> = (0..400).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let mut local = vec![0xeeu8; 400];
            // SAFETY: `src_at + len < 400`, inside `source`.
            unsafe { read_bytes(source.as_ptr().add(src_at), &mut local[dst_at..dst_at + len]) };
            prop_assert_eq!(&local[dst_at..dst_at + len], &source[src_at..src_at + len]);
            prop_assert!(local[..dst_at].iter().chain(&local[dst_at + len..]).all(|&b| b == 0xee));

            let mut guest = vec![0xeeu8; 400];
            // SAFETY: `dst_at + len < 400`, inside `guest`.
            unsafe { write_bytes(guest.as_mut_ptr().add(dst_at), &source[src_at..src_at + len]) };
            prop_assert_eq!(&guest[dst_at..dst_at + len], &source[src_at..src_at + len]);
            prop_assert!(guest[..dst_at].iter().chain(&guest[dst_at + len..]).all(|&b| b == 0xee));
        }
    }
}

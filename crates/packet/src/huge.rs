//! Fixed-size tables for random lookups on the fast path (flow caches, flow tables), backed by
//! transparent huge pages when the kernel grants them. Owns its one allocation; never grows,
//! never reallocates, and a refused huge page only costs speed.
//!
//! Why: a table of a megabyte or more that is read at random costs a TLB miss per lookup on
//! 4 KiB pages (a 1 MiB exact-match cache spans 256 of them; perf put a tenth of the
//! `flow-switch` node on the instruction after the prefetch of its entries). A plain `Box<[T]>`
//! is only 64-byte aligned, so advice covers only the whole 2 MiB pages that happen to lie
//! inside it, often none; this table is 2 MiB aligned and its size rounded up to whole huge
//! pages whenever it is at least half of one.

use std::alloc::Layout;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A transparent huge page (x86-64).
pub const HUGE_PAGE: usize = 2 << 20;

/// `len` values of `T` in one allocation, huge-page aligned when large (see the module comment).
pub struct HugeTable<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    /// The allocation's layout; `None` when nothing was allocated (empty table or zero-sized `T`).
    layout: Option<Layout>,
}

// SAFETY: the table owns its values exclusively (as a `Box<[T]>` does), so it may move to or be
// shared with another thread exactly when `T` may.
unsafe impl<T: Copy + Send> Send for HugeTable<T> {}
// SAFETY: as above; `&HugeTable` only gives `&[T]`.
unsafe impl<T: Copy + Sync> Sync for HugeTable<T> {}

/// The layout a table of `len` values of `T` allocates (`None` when nothing is allocated,
/// `Err` when the size does not fit the address space).
fn table_layout<T>(len: usize) -> Result<Option<Layout>, ()> {
    let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or(())?;
    if bytes == 0 {
        return Ok(None);
    }
    let layout = if bytes >= HUGE_PAGE / 2 {
        let rounded = bytes.checked_next_multiple_of(HUGE_PAGE).ok_or(())?;
        Layout::from_size_align(rounded, HUGE_PAGE)
    } else {
        Layout::array::<T>(len)
    };
    layout.map(Some).map_err(|_| ())
}

/// Bytes a `HugeTable` of `len` values of `T` allocates (its size rounded to whole huge pages
/// when large; `u64::MAX` when it could never be allocated): for memory budgets.
pub fn allocation_bytes<T>(len: usize) -> u64 {
    match table_layout::<T>(len) {
        Ok(Some(l)) => l.size() as u64,
        Ok(None) => 0,
        Err(()) => u64::MAX,
    }
}

impl<T: Copy> HugeTable<T> {
    /// A table of `len` copies of `v`. Panics only where `vec![v; len]` would (the size
    /// overflows, or the allocator fails); `try_new` returns `None` instead.
    pub fn new(len: usize, v: T) -> HugeTable<T> {
        match table_layout::<T>(len) {
            Ok(layout) => Self::alloc_with(len, v, layout).unwrap_or_else(|| {
                std::alloc::handle_alloc_error(layout.unwrap_or(Layout::new::<T>()))
            }),
            Err(()) => panic!("HugeTable of {len} values: size overflows"),
        }
    }

    /// A table of `len` copies of `v`, or `None` when the size does not fit the address space
    /// or the allocator refuses it (for tables whose size a user configures).
    pub fn try_new(len: usize, v: T) -> Option<HugeTable<T>> {
        Self::alloc_with(len, v, table_layout::<T>(len).ok()?)
    }

    fn alloc_with(len: usize, v: T, layout: Option<Layout>) -> Option<HugeTable<T>> {
        let Some(layout) = layout else {
            return Some(HugeTable {
                ptr: NonNull::dangling(),
                len,
                layout: None,
            });
        };
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(raw.cast::<T>())?;
        if layout.align() == HUGE_PAGE {
            // SAFETY: the range is exactly the fresh allocation, 2 MiB aligned and a multiple of
            // 2 MiB long; MADV_HUGEPAGE changes how the kernel backs it, never its contents.
            // Given before the first write, so the first touch can fault in a huge page.
            unsafe {
                libc::madvise(raw.cast(), layout.size(), libc::MADV_HUGEPAGE);
            }
        }
        for i in 0..len {
            // SAFETY: `i < len` and the allocation holds `len` values of `T`.
            unsafe { ptr.as_ptr().add(i).write(v) };
        }
        Some(HugeTable {
            ptr,
            len,
            layout: Some(layout),
        })
    }
}

/// Ask for transparent huge pages under every whole 2 MiB page of `v`'s allocation, its spare
/// capacity included: for a table that is reserved up front and filled by pushes (never
/// reallocated), advised before those pages are first written, so that their first touch can
/// fault in a huge page. Only the aligned interior is advised (a `Vec` is not 2 MiB aligned),
/// so a table under about 4 MiB may get none; a refusal only costs speed.
pub fn advise_huge_pages<T>(v: &Vec<T>) {
    let start = v.as_ptr() as usize;
    let Some(end) = v
        .capacity()
        .checked_mul(std::mem::size_of::<T>())
        .and_then(|bytes| start.checked_add(bytes))
    else {
        return;
    };
    let from = start.next_multiple_of(HUGE_PAGE);
    let to = end - end % HUGE_PAGE;
    if to > from {
        // SAFETY: [from, to) lies inside `v`'s allocation (mapped, owned by the Vec);
        // MADV_HUGEPAGE changes how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

impl<T: Copy> Deref for HugeTable<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised values (or is dangling with a zero-sized
        // view), owned by `self` for its lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for HugeTable<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeTable<T> {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `new` with exactly this layout; `T: Copy` has no drop glue.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for HugeTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeTable").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_of_every_size_hold_their_values_and_large_ones_are_huge_page_aligned() {
        for len in [0usize, 1, 3, 4096, (1 << 20) / 16, (3 << 20) / 16 + 5] {
            let mut t = HugeTable::new(len, [7u64, 9]);
            assert_eq!(t.len(), len);
            assert!(t.iter().all(|v| *v == [7, 9]));
            if let Some(last) = t.last_mut() {
                *last = [1, 2];
            }
            assert!(len == 0 || t[len - 1] == [1, 2]);
            if len * 16 >= HUGE_PAGE / 2 {
                assert_eq!(t.as_ptr() as usize % HUGE_PAGE, 0);
            }
        }
        let z = HugeTable::new(10, ());
        assert_eq!(z.len(), 10);
    }

    /// Advice on a reserved `Vec` of any size (none, empty, smaller than a huge page, many of
    /// them, zero-sized values) leaves it usable: its values are written and read back.
    #[test]
    fn advised_vecs_of_every_size_stay_usable() {
        for cap in [0usize, 1, 1000, (5 << 20) / 64 + 3] {
            let mut v: Vec<[u64; 8]> = Vec::with_capacity(cap);
            advise_huge_pages(&v);
            for i in 0..cap {
                v.push([i as u64; 8]);
            }
            assert!(v.iter().enumerate().all(|(i, x)| x[7] == i as u64));
        }
        let z: Vec<()> = Vec::with_capacity(5);
        advise_huge_pages(&z);
    }

    /// A size no allocator can give is `None` from `try_new` (not an abort), and the budget
    /// size is what is really allocated.
    #[test]
    fn try_new_refuses_an_impossible_size_and_sizes_are_what_is_allocated() {
        assert!(HugeTable::try_new(usize::MAX / 8, [0u64; 8]).is_none());
        assert!(HugeTable::try_new(1 << 58, 0u64).is_none());
        assert_eq!(allocation_bytes::<[u64; 8]>(usize::MAX / 8), u64::MAX);
        let t = HugeTable::try_new(1000, 5u32).expect("a small table");
        assert_eq!(t.len(), 1000);
        assert_eq!(allocation_bytes::<u32>(1000), 4000);
        assert_eq!(allocation_bytes::<[u8; 64]>(1 << 12), 256 << 10);
        assert_eq!(allocation_bytes::<[u8; 64]>(1 << 14), 2 << 20);
        assert_eq!(allocation_bytes::<[u8; 64]>((1 << 15) + 1), 4 << 20);
        assert_eq!(allocation_bytes::<u8>(0), 0);
    }
}

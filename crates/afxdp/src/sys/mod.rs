//! Everything that talks to the kernel directly: the bpf() syscall (maps, programs, links),
//! AF_XDP socket calls and ring mappings, the ring producer/consumer protocol over shared
//! memory, and a minimal rtnetlink client for XDP state. This is the only module with `unsafe`;
//! each block says why it is sound. It exposes safe functions and types only, and it never
//! decides policy (which mode, what to clean up): `program`, `socket` and `port` do.
#![allow(unsafe_code)]

pub(crate) mod bpf;
pub(crate) mod netlink;
pub(crate) mod ring;
pub(crate) mod xsk;

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// The error of the last failed libc call on this thread.
pub(crate) fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// Wrap a file descriptor a syscall just returned (negative: the call failed).
fn owned_fd(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` is a fresh descriptor returned by the kernel to this caller and owned by no
    // one else; `OwnedFd` closes it exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Index of the network interface `name` in the calling thread's network namespace.
pub(crate) fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(last_error());
    }
    Ok(index)
}

/// A shared memory mapping of a kernel object (an AF_XDP ring), unmapped on drop.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing ties it to a thread. All
// accesses to its contents go through atomics or through the single owner of the ring.
unsafe impl Send for Mmap {}
// SAFETY: shared references only ever read the ring's producer/consumer words with atomic loads
// (see `ring::TxWatch`); descriptor access needs the owning ring's `&mut`.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Map `len` bytes of `fd` at `offset` read-write and shared, populated.
    pub(crate) fn map(fd: &OwnedFd, offset: u64, len: usize) -> io::Result<Mmap> {
        use std::os::fd::AsRawFd;
        // SAFETY: a new shared mapping with no address hint of a descriptor we own; the result
        // is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_error());
        }
        NonNull::new(ptr as *mut u8)
            .map(|ptr| Mmap { ptr, len })
            .ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))
    }

    /// Start of the mapping.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; unmapped once. Every pointer into
        // it belongs to a value that holds this `Mmap` (directly or through an `Arc`).
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// Inode of the calling thread's network namespace (tells namespaces apart; 0 when unknown).
pub(crate) fn netns_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0)
}

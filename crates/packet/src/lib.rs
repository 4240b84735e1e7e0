//! Packet buffers for vecplane: one pool of fixed-size buffers addressed by `u32` indices, the
//! 64-byte metadata line the hot nodes touch, header constants, views and checksum helpers.
//! This crate owns memory and byte layout only; it never does I/O and never decides policy.
#![deny(missing_docs)]

pub mod checksum;
pub mod frag;
pub mod gso;
pub mod headers;
pub mod huge;
pub mod meta;
pub mod pool;
pub mod vnet;

pub use meta::BufferMeta;

/// Ask the CPU to start loading the cache line of address `p` into L1 (a hint: never
/// dereferenced, never faults, whatever the address).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint that never faults and reads nothing architecturally.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
pub use pool::{BufferPool, PoolConfig, PoolError, PoolStats};

/// Largest number of packets a node processes in one call (a "vector").
pub const VECTOR_SIZE: usize = 256;

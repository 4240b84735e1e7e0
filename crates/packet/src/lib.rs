//! Packet buffers for vecplane: one pool of fixed-size buffers addressed by `u32` indices, the
//! 64-byte metadata line the hot nodes touch, header constants, views and checksum helpers.
//! This crate owns memory and byte layout only; it never does I/O and never decides policy.
//!
//! # Example
//!
//! A packet is a `u32` index into one pool: its bytes sit after a headroom where encapsulations
//! grow the front, and its metadata travels with the index through the graph.
//!
//! ```
//! use packet::{checksum, BufferPool, PoolConfig};
//!
//! let mut pool = BufferPool::new(PoolConfig {
//!     buffers: 64,
//!     try_hugepages: false,
//!     ..PoolConfig::default()
//! })
//! .expect("a small pool on normal pages");
//! let b = pool.alloc().expect("a free buffer");
//! assert!(pool.write_packet(b, &[0xab; 60]));
//! pool.meta_mut(b).rx_port = 3;
//! assert_eq!((pool.meta(b).length, pool.meta(b).rx_port), (60, 3));
//!
//! // Prepend a 4-byte header in the headroom, then take it off again.
//! assert!(pool.push_front(b, 4));
//! assert_eq!(pool.data(b).len(), 64);
//! assert!(pool.pull_front(b, 4));
//! assert_eq!(pool.data(b), &[0xab; 60][..]);
//!
//! pool.free(b);
//! assert_eq!(pool.available(), pool.capacity());
//!
//! // An IPv4 header with a correct checksum sums to zero; rewriting the TTL (in the 16-bit
//! // word it shares with the protocol) updates the checksum incrementally (RFC 1624).
//! let mut ip = [
//!     0x45, 0, 0, 20, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 1, 2, 198, 18, 2, 2,
//! ];
//! let c = checksum::checksum(&ip);
//! ip[10..12].copy_from_slice(&c.to_be_bytes());
//! assert_eq!(checksum::checksum(&ip), 0);
//! let old = u16::from_be_bytes([ip[8], ip[9]]);
//! ip[8] -= 1;
//! let new = u16::from_be_bytes([ip[8], ip[9]]);
//! let c = checksum::update16(u16::from_be_bytes([ip[10], ip[11]]), old, new);
//! ip[10..12].copy_from_slice(&c.to_be_bytes());
//! assert_eq!(checksum::checksum(&ip), 0);
//! ```
#![deny(missing_docs)]

pub mod checksum;
pub mod frag;
pub mod gso;
pub mod headers;
pub mod huge;
pub mod meta;
pub mod pool;
pub mod transport_checks;
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

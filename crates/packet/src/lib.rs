//! Packet buffers for vecplane: one pool of fixed-size buffers addressed by `u32` indices, the
//! 64-byte metadata line the hot nodes touch, header constants, views and checksum helpers.
//! This crate owns memory and byte layout only; it never does I/O and never decides policy.
#![deny(missing_docs)]

pub mod checksum;
pub mod headers;
pub mod huge;
pub mod meta;
pub mod pool;

pub use meta::BufferMeta;
pub use pool::{BufferPool, PoolConfig, PoolError, PoolStats};

/// Largest number of packets a node processes in one call (a "vector").
pub const VECTOR_SIZE: usize = 256;

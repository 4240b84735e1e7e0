//! Error type of the FIB crate.
//! Owns the `FibError` enum only; every message must say what was wrong and what is accepted.
//! It must never carry borrowed data or lose the offending route's index.

use thiserror::Error;

/// Everything that can go wrong while building a FIB.
///
/// `index` fields are positions in the route slice passed to `build`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FibError {
    /// A route's prefix length exceeds the address width.
    #[error("route {index}: prefix length /{len} is invalid for {family}; accepted lengths are 0..={max}")]
    PrefixLength {
        /// Position of the route in the input slice.
        index: usize,
        /// The rejected prefix length.
        len: u8,
        /// Address family name ("IPv4" or "IPv6").
        family: &'static str,
        /// Largest accepted prefix length (32 or 128).
        max: u8,
    },
    /// A route's next hop is 0 (reserved for "no route") or above the table's maximum.
    #[error("route {index}: next hop {next_hop} is invalid for {family}; accepted next hops are 1..={max} (0 means \"no route\")")]
    NextHop {
        /// Position of the route in the input slice.
        index: usize,
        /// The rejected next-hop id.
        next_hop: u32,
        /// Address family name ("IPv4" or "IPv6").
        family: &'static str,
        /// Largest accepted next-hop id.
        max: u32,
    },
    /// IPv4 routes longer than /24 fall into more distinct /24s than tbl8 groups exist.
    #[error("routes longer than /24 cover {needed} distinct /24 blocks, each needing a tbl8 group; at most {max} groups are supported")]
    TooManyTbl8Groups {
        /// Number of groups the route set would need.
        needed: usize,
        /// Maximum number of groups.
        max: usize,
    },
    /// The IPv6 table outgrew one of its index fields.
    #[error("IPv6 table needs {needed} {what}; at most {max} are supported (reduce the number of routes)")]
    Ip6Capacity {
        /// Which structure overflowed ("range entries" or "stride tables").
        what: &'static str,
        /// How many were needed.
        needed: usize,
        /// How many fit in the entry encoding.
        max: usize,
    },
    /// The operating system refused to map memory for a lookup table.
    #[error("could not map {bytes} bytes of anonymous memory for a lookup table: {reason}")]
    Map {
        /// Size of the refused mapping.
        bytes: usize,
        /// `strerror` text of the failure.
        reason: String,
    },
}

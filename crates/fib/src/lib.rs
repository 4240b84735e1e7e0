//! Longest-prefix-match forwarding tables for the `ip4-lookup` and `ip6-lookup` nodes.
//! Owns route validation, table construction, in-place changes of the IPv4 table and lock-free
//! lookups; it must never allocate, lock or panic on the lookup path.
//!
//! * [`Ip4Fib`]: DIR-24-8 (a 2^24-entry first level of `u16`, 256-entry second-level groups).
//! * [`Ip6Fib`]: a 2^20-entry direct first level whose entries resolve to a next hop, a short
//!   sorted range list searched in place, or (for dense regions) an 8-bit stride table or a
//!   path-compression skip node.
//!
//! Both are shared with every worker through an `Arc` (they are `Send + Sync`) and change in
//! place while workers read them, through their writers (`Ip4FibWriter`, `Ip6FibWriter`; see
//! ip4.rs and ip6.rs for the thread-safety contracts): a change touches only what its prefix
//! covers, and memory a reader may still be in is reused only after an epoch grace period.
//!
//! # Example
//!
//! Next hops are small ids (0 is "no route"); prefixes are host-order integers:
//!
//! ```
//! use fib::{Ip4Fib, Ip4FibWriter, Ip6Fib, NO_ROUTE};
//! use std::net::{Ipv4Addr, Ipv6Addr};
//!
//! let v4 = |s: &str| u32::from(s.parse::<Ipv4Addr>().expect("IPv4"));
//! let fib = Ip4Fib::build(&[
//!     (v4("198.18.0.0"), 15, 1),
//!     (v4("198.18.2.0"), 24, 2),
//!     (v4("198.18.2.128"), 25, 3), // longer than /24: a second-level group
//! ])
//! .expect("valid routes");
//! assert_eq!(fib.lookup(v4("198.19.7.7")), 1);
//! assert_eq!(fib.lookup(v4("198.18.2.7")), 2);
//! assert_eq!(fib.lookup(v4("198.18.2.200")), 3);
//! assert_eq!(fib.lookup(v4("203.0.113.1")), NO_ROUTE);
//!
//! // A table that changes under its readers: the writer changes entries in place, and a
//! // worker's `Arc<Ip4Fib>` sees each change at once, without a copy or a lock.
//! let (domain, _workers) = live::Domain::new(1);
//! let mut writer = Ip4FibWriter::new(domain).expect("an empty table");
//! let readers_view = writer.fib();
//! writer.insert(v4("198.18.100.0"), 24, 7).expect("inserted");
//! assert_eq!(readers_view.lookup(v4("198.18.100.1")), 7);
//! assert_eq!(writer.remove(v4("198.18.100.0"), 24), Some(7));
//! assert_eq!(readers_view.lookup(v4("198.18.100.1")), NO_ROUTE);
//!
//! let v6 = |s: &str| u128::from(s.parse::<Ipv6Addr>().expect("IPv6"));
//! let fib6 = Ip6Fib::build(&[(v6("2001:db8::"), 32, 4), (v6("2001:db8:1::"), 48, 5)])
//!     .expect("valid routes");
//! assert_eq!(fib6.lookup(v6("2001:db8:1::9")), 5);
//! assert_eq!(fib6.lookup(v6("2001:db8:2::9")), 4);
//! assert_eq!(fib6.lookup(v6("2001:db9::1")), NO_ROUTE);
//! ```

#![deny(missing_docs)]

mod error;
mod gen;
mod ip4;
mod ip4_writer;
mod ip6;
mod ip6_build;
mod ip6_writer;
mod mem;

pub use error::FibError;
pub use gen::{ip4_address_in, ip6_address_in, random_ip4_routes, random_ip6_routes, SplitMix64};
pub use ip4::Ip4Fib;
pub use ip4_writer::Ip4FibWriter;
pub use ip6::Ip6Fib;
pub use ip6_writer::Ip6FibWriter;

/// Next-hop identifier stored in the FIB. 0 means "no route".
pub type NextHopId = u32;

/// The next hop returned when no route matches.
pub const NO_ROUTE: NextHopId = 0;

/// Largest batch `lookup_batch` is designed for (one vector of packets). Longer slices are
/// processed in chunks of this size.
pub const BATCH: usize = 256;

/// Network mask of an IPv4 prefix length (`len` must be <= 32).
#[inline]
pub(crate) fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Network mask of an IPv6 prefix length (`len` must be <= 128).
#[inline]
pub(crate) fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod writer6_tests;
#[cfg(test)]
mod writer_tests;

//! Per-worker session state for vecplane: `SessionTable<V>`, a fixed-size table from a
//! `SessionKey` (a 32-bit scope and an IPv4 or IPv6 `FiveTuple`) to a small `Copy` value with
//! an idle timeout per entry class, one cache line read per lookup. The load balancer keeps its
//! flows (VIP id as scope, the chosen server as value) and its NAT reverse entries in it;
//! connection tracking (zone as scope, a protocol state per class) and flow export (counters in
//! the value, `sweep_with` as the expiry callback) are built on the same table. This crate owns
//! the table's memory, hashing, expiry and live counts; it never parses packets, never decides
//! what a value means, and never allocates, locks or blocks after a table is made.
//!
//! The design (layout, hashing, the false-match bound, cuckoo moves, time and counts) is in
//! the header of `table.rs`.
//!
//! # Example
//!
//! A flow exporter counting packets and bytes per flow in zone 3, and exporting a flow when it
//! has been idle for its class's timeout:
//!
//! ```
//! use session::{FiveTuple, Insert, SessionKey, SessionTable, SessionValue, Touch, Verdict};
//! use session::CLASSES;
//!
//! #[derive(Clone, Copy, Default, Debug, PartialEq)]
//! struct Counters {
//!     packets: u32,
//!     bytes: u32,
//! }
//! impl SessionValue for Counters {}
//!
//! const UDP: u8 = 0; // this exporter's class for UDP flows: 30 s idle
//! let mut timeouts = [0; CLASSES];
//! timeouts[usize::from(UDP)] = 30;
//! // 64 buckets of 3 entries, live counts for zones 0..8, no bins.
//! let mut flows = SessionTable::<Counters>::new(64, timeouts, 8, 0).expect("a small table");
//!
//! let t = FiveTuple::v4([198, 18, 0, 1], [198, 18, 1, 1], 17, 5353, 53);
//! let key = SessionKey::new(3, &t);
//! let h = flows.hash(&key);
//! flows.prefetch(h); // a node issues this early, then works on other packets
//! let (now, len) = (100, 120);
//! match flows.lookup_mut(h, now, Touch::Refresh) {
//!     Some(c) => (c.packets, c.bytes) = (c.packets + 1, c.bytes + len),
//!     None => {
//!         let first = Counters { packets: 1, bytes: len };
//!         assert_eq!(flows.insert(h, first, UDP, now), Insert::New);
//!     }
//! }
//! let c = flows.lookup_mut(h, now + 1, Touch::Refresh).expect("the flow");
//! c.packets += 1;
//! assert_eq!(flows.counts().group(3), 1);
//!
//! // 30 s after its last packet the flow has expired; a sweep round hands it over for export
//! // and reclaims it.
//! let mut exported = Vec::new();
//! flows.sweep_with(now + 31, 64, |info, c| {
//!     if info.expired(now + 31) {
//!         exported.push(*c);
//!     }
//!     Verdict::Keep
//! });
//! assert_eq!(exported, [Counters { packets: 2, bytes: 120 }]);
//! assert_eq!(flows.counts().total(), 0);
//! ```
#![deny(missing_docs)]

pub mod counts;
pub mod key;
pub mod sweep;
pub mod table;
pub mod tuple;

pub use counts::{SessionCounts, NO_BIN};
pub use key::SessionKey;
pub use sweep::{EntryInfo, Verdict};
pub use table::{
    buckets_for, table_bytes, Insert, SessionHash, SessionTable, SessionTableError, SessionValue,
    Touch, BATCH, CLASSES, GROUPS, MAX_BUCKETS, WAYS,
};
pub use tuple::FiveTuple;

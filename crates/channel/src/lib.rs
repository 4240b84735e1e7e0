//! Channels between the data plane's workers and the control plane. Owns the bounded
//! single-producer single-consumer ring (`spsc`), the token bucket that rate-limits a channel
//! (`bucket`), and the punt path built on them (`punt`): per worker, one ring of packet copies
//! with their metadata and a reason, drained by one control-side consumer. It knows no protocol
//! and never parses a packet; it never allocates, locks or makes a system call on the
//! producer's path (waking a sleeping consumer is at most one `unpark` per vector).
//!
//! # Design
//!
//! * **Rings.** [`spsc::ring`] allocates every slot once; a slot is a plain `T` written in place
//!   by the producer ([`spsc::Producer::try_push`]) and read in place by the consumer
//!   ([`spsc::Consumer::pop`]): nothing moves, nothing is dropped per item. Two indices (head
//!   written by the producer, tail by the consumer) on their own cache lines, each side caching
//!   the other's so a non-full push and a non-empty pop touch no shared line but the slot.
//!   A full ring refuses (the caller counts the drop); it never waits.
//! * **Rate.** A [`bucket::TokenBucket`] per producer, refilled from the TSC the worker already
//!   read for its vector: no clock read and no division per packet.
//! * **Waking.** The consumer of the punt rings is one control thread. It drains, then
//!   announces that it sleeps ([`punt::Bell`]) and checks the rings once more before it parks
//!   for at most its poll interval; a producer that pushed during a vector rings the bell once
//!   at the vector's end, and only when it sees the announcement does that cost an `unpark`.
//!   The inject rings are consumed by workers, which have their own doorbell (the data plane's
//!   `idle::Doorbell`): the control side rings it after pushing.
//!
//! # Thread-safety contract
//!
//! A ring is split into a `Producer` and a `Consumer`, neither `Clone` nor `Sync`: one thread
//! pushes (`&mut self`), one pops. The protocol is model-checked with loom
//! (`RUSTFLAGS="--cfg loom" cargo test -p vecplane-channel --test loom --release`).
//!
//! # Example
//!
//! A worker punts a packet; the control side drains it:
//!
//! ```
//! use channel::punt::{punt_channel, Bell, PuntConfig, PuntMeta, PuntReason};
//! use std::sync::Arc;
//!
//! let config = PuntConfig { slots: 4, snap_bytes: 64, per_second: 1000, burst: 10 };
//! let (mut producer, mut consumer) = punt_channel(&config, 0, 1_000_000_000, Arc::new(Bell::new()));
//! let meta = PuntMeta { reason: PuntReason::Action, cookie: 0x42, max_len: u16::MAX,
//!     ..PuntMeta::default() };
//! producer.punt(1_000, &meta, &[0xab; 100]).expect("room and a token");
//! producer.flush(); // once per vector: wakes the consumer if it sleeps
//! let got = consumer.pop(|p| (p.meta.cookie, p.meta.length, p.bytes().len())).expect("one packet");
//! assert_eq!(got, (0x42, 100, 64)); // cut at the snap length, the full length kept
//! assert_eq!(producer.stats().sent(PuntReason::Action), 1);
//! ```
#![deny(missing_docs)]

pub mod bucket;
pub mod punt;
pub mod spsc;

pub use bucket::TokenBucket;
pub use spsc::{ring, Consumer, Producer};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

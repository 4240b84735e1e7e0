//! Neighbour resolution for one worker: ARP (RFC 826) and IPv6 Neighbor Discovery (RFC 4861).
//! It owns the worker's neighbour tables (fixed capacity, open addressing), the packets queued
//! while a neighbour resolves, and the nodes `arp-input`, `ip6-nd`, `ip4-arp`, `ip6-discover` and
//! the pseudo-input `neighbour-tx`. It never allocates, locks or blocks per packet, and never
//! shares its tables with another thread: the control plane reads a snapshot published at most
//! once a second.
//!
//! # Design
//!
//! * **Tables.** One `Table` per family (`u32` / `u128` addresses), keyed by (port, address).
//!   Entries live in a fixed arena (their index is stable) and an open-addressing index of twice
//!   the capacity (linear probing, backward-shift deletion) finds them. An entry is `Incomplete`
//!   (no MAC yet, packets may be queued), `Reachable` (confirmed within `reachable_seconds`) or
//!   `Stale` (MAC known, not recently confirmed; used as is, and probed by unicast when used).
//!   Aging is lazy (every lookup checks the age) plus a bounded sweep (`SWEEP_BATCH` entries a
//!   millisecond) that retries requests, probes stale entries in use, and deletes entries not
//!   confirmed for `gc_seconds`, incomplete for `incomplete_seconds` or unanswered after
//!   `MAX_PROBES` probes. Deleting an entry frees the packets queued on it.
//! * **Entries are adjacencies.** An entry's adjacency id is `NEIGHBOUR_ADJACENCY | gen << 16 |
//!   slot` (bit 31 set; `gen` changes when the slot is reused, so an id held by a packet in
//!   flight never names another neighbour). `ip4-rewrite`/`ip6-rewrite` turn such an id into an
//!   `Adjacency` with `Neighbours::adjacency4/6`; ids without bit 31 stay `NextHopTable` indices.
//! * **Resolution.** `ip4-lookup` on a connected prefix asks `lookup4(port, dst)`; a miss goes to
//!   `ip4-arp` with `next_scratch = GLEAN` and `tx_port = port`. `ip4-arp` creates the incomplete
//!   entry, queues the packet (at most `queue_per_neighbour` per neighbour, `queue_total` in all,
//!   else `queue-full`), and sends a broadcast request from a new buffer (one per neighbour per
//!   second, and at most `requests_per_second` in all). When `arp-input` (or `ip6-nd`) learns the
//!   MAC, the queued packets are released to `ip4-rewrite` (`ip6-rewrite`) with `next_scratch`
//!   set to the entry's adjacency id.
//! * **Sending new packets.** A node can only send the buffers of its own frame, so requests and
//!   released packets go into a bounded *outbox*; the input node `neighbour-tx` (polled by the
//!   graph every round, after the ports) sends them on, runs the sweep and publishes the
//!   snapshot. Once the graph's `Emitter` lands, a node may instead hand its outbox to its
//!   emitter at the end of `process` (`drain_outbox`), which saves one round of latency.
//! * **Sharing between nodes.** The nodes of one graph share `Neighbours` through a
//!   `NeighbourHandle`: a `WorkerCell` whose borrow is one atomic flag per frame, never a wait
//!   (a second borrow at the same time is a bug and panics, like `RefCell`).
//! * **Several workers.** Each worker has its own tables. `NeighbourHandle::connect` joins them:
//!   what one worker learns is posted to the others' mailboxes (never waiting: a busy or full
//!   mailbox drops the news, and the next request repairs it) and merged by their `neighbour-tx`
//!   as an update of entries they already have (so a reply that reached worker 1 releases the
//!   packets worker 0 queued).
//! * **Ports at run time.** `set_port` adds a port (or gives a removed port's id to a new one);
//!   `remove_port` deletes every entry on a port, frees what waited on them, and leaves the
//!   port without an address, so it answers and sources nothing.
//!
//! # Layout
//! `config` (what the tables are built from, live timers), `ports` (a port's addresses),
//! `family` (IPv4/IPv6 specifics and message layout), `table` (one family's entries and index),
//! `queue` (waiting packets, outbox), `core` (what both tables share; learning, resolving,
//! aging), `neighbours` (the worker's API), `handle` and `cell` (sharing within a worker and
//! between workers), `nodes` (the graph nodes), `view` (what the control plane reads).

mod cell;
mod config;
mod core;
mod family;
mod handle;
mod neighbours;
mod nodes;
mod ports;
mod queue;
mod table;
mod view;

pub use self::cell::*;
pub use self::config::*;
use self::core::*;
pub use self::family::*;
pub use self::handle::*;
pub use self::neighbours::*;
pub use self::nodes::*;
use self::ports::*;
use self::queue::*;
use self::table::*;
pub use self::view::*;

use crate::adjacency::Adjacency;
use crate::icmp::RateLimiter;
use crate::names;
use graph::{Dispatch, InputNode, Node, NodeContext};
use packet::checksum;
use packet::headers::{be128, be16, be32, eth, format_mac, ip4, ip6, proto, put16, Mac};
use packet::BufferPool;
use std::cell::UnsafeCell;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Answers ARP requests for our addresses and learns from ARP.
pub const ARP_INPUT: &str = "arp-input";
/// Queues IPv4 packets to unresolved neighbours and sends ARP requests.
pub const IP4_ARP: &str = "ip4-arp";
/// Answers Neighbor Solicitations for our addresses and learns from ND.
pub const IP6_ND: &str = "ip6-nd";
/// Queues IPv6 packets to unresolved neighbours and sends Neighbor Solicitations.
pub const IP6_DISCOVER: &str = "ip6-discover";
/// Pseudo-input: sends requests and released packets, ages entries, publishes `show neighbours`.
pub const NEIGHBOUR_TX: &str = "neighbour-tx";

graph::node_indices! {
    /// The next nodes of every neighbour node, in next-index order (the same for all of them,
    /// so an outbox entry's next index means the same thing whichever node sends it).
    pub enum NeighbourNext {
        /// `interface-output` (replies, requests).
        Output = names::INTERFACE_OUTPUT,
        /// `ip4-rewrite` (released IPv4 packets).
        Ip4Rewrite = names::IP4_REWRITE,
        /// `ip6-rewrite` (released IPv6 packets).
        Ip6Rewrite = names::IP6_REWRITE,
        /// `error-drop`.
        Drop = names::ERROR_DROP,
    }
}

/// Next index of `interface-output` in every neighbour node.
pub const NEXT_OUTPUT: u16 = NeighbourNext::Output.id();
/// Next index of `ip4-rewrite`.
pub const NEXT_IP4_REWRITE: u16 = NeighbourNext::Ip4Rewrite.id();
/// Next index of `ip6-rewrite`.
pub const NEXT_IP6_REWRITE: u16 = NeighbourNext::Ip6Rewrite.id();
/// Next index of `error-drop`.
pub const NEXT_DROP: u16 = NeighbourNext::Drop.id();

/// The next nodes of every neighbour node, in next-index order.
pub fn next_nodes() -> Vec<String> {
    NeighbourNext::names()
}

/// Bit 31 of an adjacency id: the id names a neighbour-table entry, not a `NextHopTable` index.
pub const NEIGHBOUR_ADJACENCY: u32 = 0x8000_0000;
/// `next_scratch` of a packet sent to `ip4-arp`/`ip6-discover` by a lookup: resolve the packet's
/// own destination on `meta.tx_port` (never a valid adjacency id).
pub const GLEAN: u32 = u32::MAX;

/// True when `id` (a `next_scratch` adjacency) names a neighbour-table entry.
#[inline(always)]
pub fn is_neighbour_adjacency(id: u32) -> bool {
    id & NEIGHBOUR_ADJACENCY != 0
}

/// What a rewrite node's adjacency id leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdjacencyLookup {
    /// Rewrite with this adjacency.
    Found(Adjacency),
    /// A neighbour entry that is not usable (yet): to `ip4-arp` / `ip6-discover`.
    Resolve,
    /// Neither a next-hop table adjacency nor a neighbour entry: drop as `bad-adjacency`.
    Bad,
}

/// The adjacency of `id` (a packet's `next_scratch` after lookup): a `NextHopTable` index, or
/// with bit 31 set an entry of `neighbours` (IPv6 when `v6`).
#[inline(always)]
pub fn find_adjacency(
    table: &crate::adjacency::NextHopTable,
    neighbours: Option<&mut Neighbours>,
    id: u32,
    v6: bool,
    now: u64,
) -> AdjacencyLookup {
    if !is_neighbour_adjacency(id) {
        return match table.adjacency(id) {
            Some(a) => AdjacencyLookup::Found(*a),
            None => AdjacencyLookup::Bad,
        };
    }
    let Some(n) = neighbours else {
        return AdjacencyLookup::Bad;
    };
    let found = if v6 {
        n.adjacency6(id, now)
    } else {
        n.adjacency4(id, now)
    };
    match found {
        Some(a) => AdjacencyLookup::Found(a),
        None => AdjacencyLookup::Resolve,
    }
}

/// Largest table capacity per family (slot numbers fit in 15 bits).
pub const MAX_CAPACITY: usize = 1 << 15;
/// Unanswered unicast probes after which a stale entry is deleted (RFC 4861 MAX_UNICAST_SOLICIT).
pub const MAX_PROBES: u8 = 3;
/// Entries examined per family by one sweep step.
pub const SWEEP_BATCH: usize = 64;
/// Outbox size (requests and released packets waiting for `neighbour-tx`).
pub const OUTBOX_CAPACITY: usize = 1024;
/// News one worker can hold from the others between two of its polls.
pub const MAILBOX_CAPACITY: usize = 256;

const ARP_HTYPE_ETHERNET: u16 = 1;
const ARP_OP_REQUEST: u16 = 1;
const ARP_OP_REPLY: u16 = 2;
const ARP_LEN: usize = 28;
const ND_NS: u8 = 135;
const ND_NA: u8 = 136;
const ND_OPT_SLLA: u8 = 1;
const ND_OPT_TLLA: u8 = 2;
const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;
/// ICMPv6 NS/NA with one link-layer address option: 24 + 8 bytes.
const ND_LEN: usize = 32;
const ALL_NODES: u128 = 0xff02 << 112 | 1;
const SOLICITED_PREFIX: u128 = 0xff02_0000_0000_0000_0000_0001_ff00_0000;

graph::node_indices! {
    /// `arp-input` drop reasons.
    pub enum ArpError {
        /// Counted as `malformed`.
        Malformed = "malformed",
        /// Counted as `unsupported-op`.
        UnsupportedOp = "unsupported-op",
        /// Counted as `not-for-us`.
        NotForUs = "not-for-us",
        /// Counted as `bad-sender`.
        BadSender = "bad-sender",
        /// Counted as `address-conflict`.
        AddressConflict = "address-conflict",
        /// Counted as `learned`.
        Learned = "learned",
        /// Counted as `table-full`.
        TableFull = "table-full",
        /// Counted as `unknown-port`.
        UnknownPort = "unknown-port",
    }
}

/// `arp-input` drop reasons, by index.
pub const ARP_ERRORS: &[&str] = ArpError::NAMES;

graph::node_indices! {
    /// `ip6-nd` drop reasons.
    pub enum NdError {
        /// Counted as `malformed`.
        Malformed = "malformed",
        /// Counted as `bad-hop-limit`.
        BadHopLimit = "bad-hop-limit",
        /// Counted as `bad-checksum`.
        BadChecksum = "bad-checksum",
        /// Counted as `not-for-us`.
        NotForUs = "not-for-us",
        /// Counted as `address-conflict`.
        AddressConflict = "address-conflict",
        /// Counted as `learned`.
        Learned = "learned",
        /// Counted as `unsolicited`.
        Unsolicited = "unsolicited",
        /// Counted as `unknown-port`.
        UnknownPort = "unknown-port",
        /// Counted as `unsupported-type`.
        UnsupportedType = "unsupported-type",
    }
}

/// `ip6-nd` drop reasons, by index.
pub const ND_ERRORS: &[&str] = NdError::NAMES;

graph::node_indices! {
    /// `ip4-arp` and `ip6-discover` drop reasons (they free what they drop themselves).
    pub enum ResolveError {
        /// Counted as `queue-full`.
        QueueFull = "queue-full",
        /// Counted as `table-full`.
        TableFull = "table-full",
        /// Counted as `no-source-address`.
        NoSourceAddress = "no-source-address",
        /// Counted as `stale-adjacency`.
        StaleAdjacency = "stale-adjacency",
        /// Counted as `outbox-full`.
        OutboxFull = "outbox-full",
        /// Counted as `malformed`.
        Malformed = "malformed",
        /// Counted as `unknown-port`.
        UnknownPort = "unknown-port",
    }
}

/// `ip4-arp` and `ip6-discover` drop reasons, by index (they free what they drop themselves).
pub const RESOLVE_ERRORS: &[&str] = ResolveError::NAMES;
graph::node_indices! {
    /// `neighbour-tx` drop reasons (packets freed outside a node's frame).
    pub enum TxError {
        /// Counted as `resolution-failed`.
        ResolutionFailed = "resolution-failed",
        /// Counted as `outbox-full`.
        OutboxFull = "outbox-full",
        /// Counted as `flushed-at-stop`.
        FlushedAtStop = "flushed-at-stop",
        /// Counted as `port-removed` (queued on a port removed at run time).
        PortRemoved = "port-removed",
    }
}

/// `neighbour-tx` drop reasons (packets the neighbour tables freed between two frames), by
/// index.
pub const TX_ERRORS: &[&str] = TxError::NAMES;

#[cfg(test)]
mod tests;

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
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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

/// Next index of `interface-output` in every neighbour node (replies, requests).
pub const NEXT_OUTPUT: u16 = 0;
/// Next index of `ip4-rewrite` (released IPv4 packets).
pub const NEXT_IP4_REWRITE: u16 = 1;
/// Next index of `ip6-rewrite` (released IPv6 packets).
pub const NEXT_IP6_REWRITE: u16 = 2;
/// Next index of `error-drop`.
pub const NEXT_DROP: u16 = 3;

/// The next nodes of every neighbour node, in next-index order (the same for all of them, so an
/// outbox entry's next index means the same thing whichever node sends it).
pub fn next_nodes() -> Vec<String> {
    [
        names::INTERFACE_OUTPUT,
        names::IP4_REWRITE,
        names::IP6_REWRITE,
        names::ERROR_DROP,
    ]
    .map(String::from)
    .to_vec()
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

/// `arp-input` drop reasons, by index.
pub const ARP_ERRORS: [&str; 8] = [
    "malformed",
    "unsupported-op",
    "not-for-us",
    "bad-sender",
    "address-conflict",
    "learned",
    "table-full",
    "unknown-port",
];
const A_MALFORMED: u16 = 0;
const A_UNSUPPORTED_OP: u16 = 1;
const A_NOT_FOR_US: u16 = 2;
const A_BAD_SENDER: u16 = 3;
const A_CONFLICT: u16 = 4;
const A_LEARNED: u16 = 5;
const A_TABLE_FULL: u16 = 6;
const A_UNKNOWN_PORT: u16 = 7;

/// `ip6-nd` drop reasons, by index.
pub const ND_ERRORS: [&str; 9] = [
    "malformed",
    "bad-hop-limit",
    "bad-checksum",
    "not-for-us",
    "address-conflict",
    "learned",
    "unsolicited",
    "unknown-port",
    "unsupported-type",
];
const N_MALFORMED: u16 = 0;
const N_HOP_LIMIT: u16 = 1;
const N_CHECKSUM: u16 = 2;
const N_NOT_FOR_US: u16 = 3;
const N_CONFLICT: u16 = 4;
const N_LEARNED: u16 = 5;
const N_UNSOLICITED: u16 = 6;
const N_UNKNOWN_PORT: u16 = 7;
const N_UNSUPPORTED: u16 = 8;

/// `ip4-arp` and `ip6-discover` drop reasons, by index (they free what they drop themselves).
pub const RESOLVE_ERRORS: [&str; 7] = [
    "queue-full",
    "table-full",
    "no-source-address",
    "stale-adjacency",
    "outbox-full",
    "malformed",
    "unknown-port",
];
/// `neighbour-tx` drop reasons (packets the neighbour tables freed between two frames), by
/// index.
pub const TX_ERRORS: [&str; 3] = ["resolution-failed", "outbox-full", "flushed-at-stop"];
const TX_RESOLUTION_FAILED: usize = 0;
const TX_OUTBOX_FULL: usize = 1;
const TX_FLUSHED: usize = 2;
const R_QUEUE_FULL: u16 = 0;
const R_TABLE_FULL: u16 = 1;
const R_NO_SOURCE: u16 = 2;
const R_STALE: u16 = 3;
const R_OUTBOX_FULL: u16 = 4;
const R_MALFORMED: u16 = 5;
const R_UNKNOWN_PORT: u16 = 6;

// ---------------------------------------------------------------------------------------------
// Configuration

/// What the neighbour nodes know about one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourPort {
    /// The port's MAC (source of requests and replies, source MAC of adjacencies).
    pub mac: Mac,
    /// Largest IP packet the port sends (the MTU of its adjacencies).
    pub mtu: u16,
    /// Own IPv4 addresses and prefix lengths (answered by ARP, sources of requests).
    pub ip4: Vec<(Ipv4Addr, u8)>,
    /// Own IPv6 addresses and prefix lengths (answered by ND, sources of solicitations).
    pub ip6: Vec<(Ipv6Addr, u8)>,
}

impl NeighbourPort {
    /// The port's EUI-64 link-local address (fe80::/64 from its MAC, RFC 4291 appendix A).
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 2,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }
}

/// Sizes and timers of the neighbour subsystem of one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourConfig {
    /// Ports by port id.
    pub ports: Vec<NeighbourPort>,
    /// Entries per family (1..=`MAX_CAPACITY`).
    pub capacity: usize,
    /// Seconds an entry stays reachable after a confirmation.
    pub reachable_seconds: u32,
    /// Seconds after its last confirmation an entry is deleted.
    pub gc_seconds: u32,
    /// Seconds an incomplete entry waits for an answer before it is deleted with its queue.
    pub incomplete_seconds: u32,
    /// Packets queued per unresolved neighbour.
    pub queue_per_neighbour: u16,
    /// Packets queued in all (both families).
    pub queue_total: usize,
    /// Requests (ARP and NS, broadcast and probes) sent per second, in all.
    pub requests_per_second: u32,
    /// Answer ND for each port's EUI-64 link-local address as well.
    pub link_local: bool,
}

/// The neighbour timers shared by every worker's tables and changed live (reload, API): each
/// worker reads them at its maintenance, at most once a millisecond.
#[derive(Debug)]
pub struct NeighbourTimers {
    reachable_seconds: AtomicU32,
    gc_seconds: AtomicU32,
}

impl NeighbourTimers {
    /// Entries reachable `reachable_seconds` after a confirmation, deleted `gc_seconds` after.
    pub fn new(reachable_seconds: u32, gc_seconds: u32) -> NeighbourTimers {
        NeighbourTimers {
            reachable_seconds: AtomicU32::new(reachable_seconds),
            gc_seconds: AtomicU32::new(gc_seconds),
        }
    }

    /// Change both.
    pub fn set(&self, reachable_seconds: u32, gc_seconds: u32) {
        self.reachable_seconds
            .store(reachable_seconds, Ordering::Relaxed);
        self.gc_seconds.store(gc_seconds, Ordering::Relaxed);
    }

    /// (reachable seconds, gc seconds) now.
    pub fn get(&self) -> (u32, u32) {
        (
            self.reachable_seconds.load(Ordering::Relaxed),
            self.gc_seconds.load(Ordering::Relaxed),
        )
    }
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            ports: Vec::new(),
            capacity: 4096,
            reachable_seconds: 30,
            gc_seconds: 300,
            incomplete_seconds: 3,
            queue_per_neighbour: 4,
            queue_total: 256,
            requests_per_second: 1000,
            link_local: true,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counters and the published snapshot

/// What the neighbour subsystem of one worker did (drops of packets are also error counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeighbourStats {
    /// ARP requests sent (broadcast and unicast probes).
    pub arp_requests_sent: u64,
    /// Neighbor Solicitations sent (multicast and unicast probes).
    pub ns_sent: u64,
    /// Of those requests, unicast probes of stale entries.
    pub probes_sent: u64,
    /// ARP replies sent.
    pub arp_replies_sent: u64,
    /// Neighbor Advertisements sent.
    pub na_sent: u64,
    /// MACs learned (new entries and changed MACs).
    pub learned: u64,
    /// Entries deleted by aging (not confirmed for `gc_seconds`, or probes unanswered).
    pub aged: u64,
    /// Incomplete entries given up after `incomplete_seconds`.
    pub resolution_failures: u64,
    /// Packets queued while resolving.
    pub queued: u64,
    /// Queued packets released to rewrite.
    pub released: u64,
    /// Packets dropped by the queues (full, table full, given up, outbox full, flushed).
    pub queue_drops: u64,
    /// Entries refused because the table was full.
    pub table_full: u64,
    /// Requests not sent: the pool was empty.
    pub request_alloc_failures: u64,
    /// Requests not sent: over `requests_per_second`.
    pub requests_rate_limited: u64,
    /// Buffers freed because the outbox was full.
    pub outbox_drops: u64,
    /// News from other workers merged.
    pub news_merged: u64,
    /// News for other workers lost (mailbox busy or full).
    pub news_lost: u64,
}

/// Resolution state of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighbourState {
    /// Being resolved; no MAC yet.
    Incomplete,
    /// Confirmed within `reachable_seconds`.
    Reachable,
    /// MAC known, not confirmed recently.
    Stale,
}

impl fmt::Display for NeighbourState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NeighbourState::Incomplete => "incomplete",
            NeighbourState::Reachable => "reachable",
            NeighbourState::Stale => "stale",
        })
    }
}

/// One line of `show neighbours`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighbourRow {
    /// Port id.
    pub port: u16,
    /// Neighbour address.
    pub ip: IpAddr,
    /// Its MAC (None while incomplete).
    pub mac: Option<Mac>,
    /// State.
    pub state: NeighbourState,
    /// Milliseconds since its last confirmation (since creation while incomplete).
    pub age_ms: u64,
    /// Referenced by a route (never deleted, only emptied).
    pub pinned: bool,
    /// Packets queued on it.
    pub queued: u16,
}

impl fmt::Display for NeighbourRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mac = self.mac.map_or_else(|| "-".to_string(), |m| format_mac(&m));
        write!(
            f,
            "port {} {} {} {} age {}.{:03}s",
            self.port,
            self.ip,
            mac,
            self.state,
            self.age_ms / 1000,
            self.age_ms % 1000
        )?;
        if self.pinned {
            f.write_str(" pinned")?;
        }
        if self.queued > 0 {
            write!(f, " queued {}", self.queued)?;
        }
        Ok(())
    }
}

/// What a worker last published (at most once a second).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeighbourSnapshot {
    /// Worker number.
    pub worker: usize,
    /// TSC when it was taken (0: never).
    pub taken_tsc: u64,
    /// Entries of both families.
    pub rows: Vec<NeighbourRow>,
    /// Counters.
    pub stats: NeighbourStats,
}

/// The control plane's read side of one worker's neighbours.
pub type NeighbourView = Arc<Mutex<NeighbourSnapshot>>;

// ---------------------------------------------------------------------------------------------
// The worker-local cell

/// A value the nodes of one worker's graph share. Borrowing it costs one atomic flag; it never
/// waits. Only one thread (the worker running the graph) ever borrows it, so a second borrow at
/// the same time means a node leaked it into another thread, and panics.
pub struct WorkerCell<T> {
    busy: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is exclusive: `with` flips `busy` from false to true (Acquire) before
// handing out `&mut T` and back (Release) after, and refuses when it was already true. That is a
// mutex whose lock never waits, so `T: Send` suffices, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for WorkerCell<T> {}

impl<T> WorkerCell<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> WorkerCell<T> {
        WorkerCell {
            busy: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Run `f` on the value.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        if self.busy.swap(true, Ordering::Acquire) {
            panic!("WorkerCell borrowed twice at once: it belongs to one worker thread");
        }
        let _release = Release(&self.busy);
        // SAFETY: `busy` was false and is now true until `_release` drops, so this is the only
        // reference to the value (see the `Sync` impl).
        f(unsafe { &mut *self.value.get() })
    }
}

// ---------------------------------------------------------------------------------------------
// Addresses of the two families

/// An address family of the neighbour tables: `u32` (IPv4, ARP) or `u128` (IPv6, ND).
trait Family: Copy + Eq + Default + fmt::Debug + Send + 'static {
    /// Where released packets go.
    const REWRITE: u16;
    /// IPv6?
    const V6: bool;
    /// The address widened to 128 bits (for news between workers).
    fn wide(self) -> u128;
    /// Hash of (port, address).
    fn hash(self, port: u16) -> u64;
    /// As an `IpAddr`.
    fn ip(self) -> IpAddr;
    /// The destination address of the IP packet at `l3`, if it is there.
    fn destination(data: &[u8], l3: usize) -> Option<Self>;
    /// The address `port` sends requests for `target` from.
    fn source(port: &PortInfo, target: Self) -> Option<Self>;
    /// Write a request for `target` (to `unicast`, or broadcast/multicast) into `out`; its length.
    fn request(
        port: &PortInfo,
        source: Self,
        target: Self,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize;
    /// The table of this family.
    fn table(n: &mut Neighbours) -> (&mut Table<Self>, &mut Core);
    /// Count one request sent.
    fn count_request(stats: &mut NeighbourStats);
}

#[inline(always)]
fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    let x = (x ^ (x >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

impl Family for u32 {
    const REWRITE: u16 = NEXT_IP4_REWRITE;
    const V6: bool = false;

    fn wide(self) -> u128 {
        self as u128
    }

    #[inline(always)]
    fn hash(self, port: u16) -> u64 {
        mix(self as u64 | (port as u64) << 32)
    }

    fn ip(self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self))
    }

    #[inline]
    fn destination(data: &[u8], l3: usize) -> Option<u32> {
        let at = l3 + ip4::DST;
        data.get(at..at + 4).map(|s| be32(s, 0))
    }

    fn source(port: &PortInfo, target: u32) -> Option<u32> {
        port.ip4
            .iter()
            .find(|&&(a, m)| a & m == target & m)
            .or(port.ip4.first())
            .map(|&(a, _)| a)
    }

    fn request(
        port: &PortInfo,
        source: u32,
        target: u32,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize {
        let f = &mut out[..eth::MIN_FRAME];
        f.fill(0);
        f[0..6].copy_from_slice(&unicast.unwrap_or([0xff; 6]));
        f[6..12].copy_from_slice(&port.mac);
        put16(f, eth::TYPE, eth::TYPE_ARP);
        let a = &mut f[eth::HEADER_LEN..eth::HEADER_LEN + ARP_LEN];
        put16(a, 0, ARP_HTYPE_ETHERNET);
        put16(a, 2, eth::TYPE_IPV4);
        a[4] = 6;
        a[5] = 4;
        put16(a, 6, ARP_OP_REQUEST);
        a[8..14].copy_from_slice(&port.mac);
        a[14..18].copy_from_slice(&source.to_be_bytes());
        // Target hardware address stays zero (RFC 826; RFC 1122 unicast polls alike).
        a[24..28].copy_from_slice(&target.to_be_bytes());
        eth::MIN_FRAME
    }

    fn table(n: &mut Neighbours) -> (&mut Table<u32>, &mut Core) {
        (&mut n.v4, &mut n.core)
    }

    fn count_request(stats: &mut NeighbourStats) {
        stats.arp_requests_sent += 1;
    }
}

impl Family for u128 {
    const REWRITE: u16 = NEXT_IP6_REWRITE;
    const V6: bool = true;

    fn wide(self) -> u128 {
        self
    }

    #[inline(always)]
    fn hash(self, port: u16) -> u64 {
        mix((self as u64) ^ ((self >> 64) as u64).rotate_left(23) ^ (port as u64) << 48)
    }

    fn ip(self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self))
    }

    #[inline]
    fn destination(data: &[u8], l3: usize) -> Option<u128> {
        let at = l3 + ip6::DST;
        data.get(at..at + 16).map(|s| be128(s, 0))
    }

    fn source(port: &PortInfo, target: u128) -> Option<u128> {
        port.ip6
            .iter()
            .find(|&&(a, m)| a & m == target & m)
            .or_else(|| port.ip6.iter().find(|&&(a, _)| !is_link_local6(a)))
            .map(|&(a, _)| a)
    }

    fn request(
        port: &PortInfo,
        source: u128,
        target: u128,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize {
        let dst = match unicast {
            Some(_) => target,
            None => solicited_node(target),
        };
        let len = eth::HEADER_LEN + ip6::HEADER_LEN + ND_LEN;
        let f = &mut out[..len];
        f.fill(0);
        f[0..6].copy_from_slice(&unicast.unwrap_or_else(|| multicast_mac6(dst)));
        f[6..12].copy_from_slice(&port.mac);
        put16(f, eth::TYPE, eth::TYPE_IPV6);
        write_nd(
            &mut f[eth::HEADER_LEN..],
            NdMessage {
                kind: ND_NS,
                flags: 0,
                src: source,
                dst,
                target,
                option: ND_OPT_SLLA,
                mac: port.mac,
            },
        );
        len
    }

    fn table(n: &mut Neighbours) -> (&mut Table<u128>, &mut Core) {
        (&mut n.v6, &mut n.core)
    }

    fn count_request(stats: &mut NeighbourStats) {
        stats.ns_sent += 1;
    }
}

#[inline(always)]
fn is_multicast6(a: u128) -> bool {
    a >> 120 == 0xff
}

#[inline(always)]
fn is_link_local6(a: u128) -> bool {
    a >> 118 == 0xfe80 >> 6
}

/// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX).
#[inline(always)]
pub fn solicited_node(a: u128) -> u128 {
    SOLICITED_PREFIX | (a & 0x00ff_ffff)
}

/// The Ethernet multicast MAC of an IPv6 multicast group (33:33 and its low 32 bits).
#[inline(always)]
pub fn multicast_mac6(group: u128) -> Mac {
    let g = (group as u32).to_be_bytes();
    [0x33, 0x33, g[0], g[1], g[2], g[3]]
}

/// An NS or NA with one link-layer address option.
struct NdMessage {
    kind: u8,
    flags: u8,
    src: u128,
    dst: u128,
    target: u128,
    option: u8,
    mac: Mac,
}

/// Write the IPv6 header and ICMPv6 NS/NA of `m` at the start of `h` (at least 72 bytes), with
/// hop limit 255 and the ICMPv6 checksum.
fn write_nd(h: &mut [u8], m: NdMessage) {
    let h = &mut h[..ip6::HEADER_LEN + ND_LEN];
    h.fill(0);
    h[0] = 0x60;
    put16(h, ip6::PAYLOAD_LEN, ND_LEN as u16);
    h[ip6::NEXT_HEADER] = proto::ICMP6;
    h[ip6::HOP_LIMIT] = 255;
    h[ip6::SRC..ip6::SRC + 16].copy_from_slice(&m.src.to_be_bytes());
    h[ip6::DST..ip6::DST + 16].copy_from_slice(&m.dst.to_be_bytes());
    let icmp = &mut h[ip6::HEADER_LEN..];
    icmp[0] = m.kind;
    icmp[4] = m.flags;
    icmp[8..24].copy_from_slice(&m.target.to_be_bytes());
    icmp[24] = m.option;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&m.mac);
    let pseudo = checksum::pseudo_header_v6(
        m.src.to_be_bytes(),
        m.dst.to_be_bytes(),
        proto::ICMP6,
        ND_LEN as u32,
    );
    let c = !checksum::fold(checksum::sum(pseudo, icmp));
    put16(icmp, 2, c);
}

// ---------------------------------------------------------------------------------------------
// Ports

/// A port's addresses as integers with their masks.
#[derive(Clone, Debug)]
struct PortInfo {
    mac: Mac,
    mtu: u16,
    ip4: Vec<(u32, u32)>,
    ip6: Vec<(u128, u128)>,
}

impl PortInfo {
    fn new(p: &NeighbourPort, link_local: bool) -> PortInfo {
        let mask4 = |l: u8| {
            if l == 0 {
                0
            } else {
                u32::MAX << (32 - l.min(32))
            }
        };
        let mask6 = |l: u8| {
            if l == 0 {
                0
            } else {
                u128::MAX << (128 - l.min(128))
            }
        };
        let mut ip6: Vec<(u128, u128)> = p
            .ip6
            .iter()
            .map(|(a, l)| (u128::from(*a), mask6(*l)))
            .collect();
        let ll = u128::from(p.link_local());
        if link_local && !ip6.iter().any(|&(a, _)| a == ll) {
            ip6.push((ll, mask6(64)));
        }
        PortInfo {
            mac: p.mac,
            mtu: p.mtu,
            ip4: p
                .ip4
                .iter()
                .map(|(a, l)| (u32::from(*a), mask4(*l)))
                .collect(),
            ip6,
        }
    }

    #[inline]
    fn is_own4(&self, a: u32) -> bool {
        self.ip4.iter().any(|&(x, _)| x == a)
    }

    #[inline]
    fn is_own6(&self, a: u128) -> bool {
        self.ip6.iter().any(|&(x, _)| x == a)
    }
}

// ---------------------------------------------------------------------------------------------
// Packet queue and outbox

const NIL: u16 = u16::MAX;

/// The packets queued on one entry: a linked list through `PacketQueue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct QueueList {
    head: u16,
    tail: u16,
    len: u16,
}

impl QueueList {
    const EMPTY: QueueList = QueueList {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// A fixed pool of queue cells shared by all entries of both families.
struct PacketQueue {
    buffers: Box<[u32]>,
    links: Box<[u16]>,
    free: u16,
    used: usize,
}

impl PacketQueue {
    fn new(capacity: usize) -> PacketQueue {
        let n = capacity.clamp(1, NIL as usize - 1);
        let links: Box<[u16]> = (0..n)
            .map(|i| if i + 1 < n { i as u16 + 1 } else { NIL })
            .collect();
        PacketQueue {
            buffers: vec![0; n].into_boxed_slice(),
            links,
            free: 0,
            used: 0,
        }
    }

    fn push(&mut self, list: &mut QueueList, buffer: u32) -> bool {
        let i = self.free;
        if i == NIL {
            return false;
        }
        self.free = self.links[i as usize];
        self.buffers[i as usize] = buffer;
        self.links[i as usize] = NIL;
        if list.tail == NIL {
            list.head = i;
        } else {
            self.links[list.tail as usize] = i;
        }
        list.tail = i;
        list.len += 1;
        self.used += 1;
        true
    }

    fn pop(&mut self, list: &mut QueueList) -> Option<u32> {
        let i = list.head;
        if i == NIL {
            return None;
        }
        list.head = self.links[i as usize];
        if list.head == NIL {
            list.tail = NIL;
        }
        list.len -= 1;
        self.links[i as usize] = self.free;
        self.free = i;
        self.used -= 1;
        Some(self.buffers[i as usize])
    }
}

/// Buffers waiting to be sent by `neighbour-tx` (or a node's emitter): (next index, buffer).
struct Outbox {
    ring: Box<[(u16, u32)]>,
    head: usize,
    len: usize,
}

impl Outbox {
    fn new(capacity: usize) -> Outbox {
        Outbox {
            ring: vec![(0, 0); capacity.max(1)].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, next: u16, buffer: u32) -> bool {
        if self.len == self.ring.len() {
            return false;
        }
        let at = (self.head + self.len) % self.ring.len();
        self.ring[at] = (next, buffer);
        self.len += 1;
        true
    }

    #[inline]
    fn front(&self) -> Option<(u16, u32)> {
        (self.len > 0).then(|| self.ring[self.head])
    }

    #[inline]
    fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.ring.len();
            self.len -= 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The table

#[derive(Clone, Copy, Debug)]
struct Entry<A> {
    ip: A,
    port: u16,
    /// Changes whenever the slot is freed, so stale adjacency ids are recognised.
    gen: u16,
    live: bool,
    pinned: bool,
    state: NeighbourState,
    /// A lookup used the entry while stale (a probe is due).
    used: bool,
    /// Requests sent since the last confirmation.
    probes: u8,
    /// Port, MTU and MACs (destination valid unless incomplete).
    adj: Adjacency,
    created: u64,
    confirmed: u64,
    last_request: u64,
    queue: QueueList,
}

impl<A: Family> Entry<A> {
    fn vacant() -> Entry<A> {
        Entry {
            ip: A::default(),
            port: 0,
            gen: 0,
            live: false,
            pinned: false,
            state: NeighbourState::Incomplete,
            used: false,
            probes: 0,
            adj: Adjacency::new(0, 0, [0; 6], [0; 6]),
            created: 0,
            confirmed: 0,
            last_request: 0,
            queue: QueueList::EMPTY,
        }
    }

    #[inline(always)]
    fn mac(&self) -> Mac {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.adj.macs[..6]);
        m
    }
}

/// The neighbours of one family: a stable arena of entries and an open-addressing index.
struct Table<A> {
    entries: Box<[Entry<A>]>,
    index: Box<[u16]>,
    mask: usize,
    free: Vec<u16>,
    cursor: usize,
}

impl<A: Family> Table<A> {
    fn new(capacity: usize) -> Table<A> {
        let n = capacity.clamp(1, MAX_CAPACITY);
        let slots = (n * 2).next_power_of_two();
        Table {
            entries: vec![Entry::vacant(); n].into_boxed_slice(),
            index: vec![NIL; slots].into_boxed_slice(),
            mask: slots - 1,
            free: (0..n as u16).rev().collect(),
            cursor: 0,
        }
    }

    /// Entries in use.
    fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    #[inline(always)]
    fn home(&self, port: u16, ip: A) -> usize {
        ip.hash(port) as usize & self.mask
    }

    #[inline]
    fn find(&self, port: u16, ip: A) -> Option<u16> {
        let mut i = self.home(port, ip);
        loop {
            let s = self.index[i];
            if s == NIL {
                return None;
            }
            let e = &self.entries[s as usize];
            if e.ip == ip && e.port == port {
                return Some(s);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// A new incomplete entry (the key must not exist); None when full.
    fn insert(&mut self, port: u16, ip: A, adj: Adjacency, now: u64) -> Option<u16> {
        let s = self.free.pop()?;
        let mut i = self.home(port, ip);
        while self.index[i] != NIL {
            i = (i + 1) & self.mask;
        }
        self.index[i] = s;
        let e = &mut self.entries[s as usize];
        *e = Entry {
            ip,
            port,
            gen: e.gen,
            live: true,
            created: now,
            adj,
            ..Entry::vacant()
        };
        Some(s)
    }

    /// Delete an entry; returns its queue (the caller frees the buffers).
    fn remove(&mut self, s: u16) -> QueueList {
        let e = self.entries[s as usize];
        let mut hole = self.home(e.port, e.ip);
        while self.index[hole] != s {
            hole = (hole + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole when the
        // hole lies on their way from their home slot.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let t = self.index[j];
            if t == NIL {
                break;
            }
            let other = &self.entries[t as usize];
            let h = self.home(other.port, other.ip);
            if (j.wrapping_sub(h) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.index[hole] = t;
                hole = j;
            }
        }
        self.index[hole] = NIL;
        let slot = &mut self.entries[s as usize];
        *slot = Entry {
            gen: slot.gen.wrapping_add(1) & 0x7fff,
            ..Entry::vacant()
        };
        self.free.push(s);
        e.queue
    }

    #[inline(always)]
    fn id(&self, s: u16) -> u32 {
        NEIGHBOUR_ADJACENCY | (self.entries[s as usize].gen as u32 & 0x7fff) << 16 | s as u32
    }

    /// The slot an adjacency id names, if it still names a live entry.
    #[inline(always)]
    fn slot_of(&self, id: u32) -> Option<u16> {
        if id & NEIGHBOUR_ADJACENCY == 0 {
            return None;
        }
        let s = (id & 0xffff) as usize;
        let e = self.entries.get(s)?;
        (e.live && e.gen as u32 == (id >> 16) & 0x7fff).then_some(s as u16)
    }
}

// ---------------------------------------------------------------------------------------------
// Neighbours: both tables and what they share

#[derive(Clone, Copy, Debug)]
struct Ticks {
    hz: u64,
    reachable: u64,
    gc: u64,
    incomplete: u64,
    retry: u64,
    probe_delay: u64,
    sweep: u64,
}

/// News one worker sends the others: (port, address) has `mac`.
#[derive(Clone, Copy, Debug, Default)]
struct News {
    v6: bool,
    confirm: bool,
    port: u16,
    ip: u128,
    mac: Mac,
}

/// A worker's inbox of news from the others.
struct Mailbox {
    items: Box<[News]>,
    len: usize,
}

/// What the tables of both families share: ports, queue, outbox, timers, counters.
struct Core {
    ports: Vec<PortInfo>,
    queue: PacketQueue,
    outbox: Outbox,
    limiter: RateLimiter,
    ticks: Ticks,
    queue_per_neighbour: u16,
    stats: NeighbourStats,
    /// Tell other workers what is learned (set by `NeighbourHandle::connect`).
    share_news: bool,
    /// What was learned since the last `maintain`, for the other workers.
    news: Box<[News]>,
    news_len: usize,
    /// Queued packets freed outside a node's frame and not yet counted as `neighbour-tx`
    /// errors, by `TX_ERRORS` index.
    unreported: [u64; 3],
    /// True while news from other workers is merged.
    merging: bool,
    /// Receive timestamp of the last packet queued for resolution: the timestamp of the
    /// requests it causes (so a replayed capture gives the same output file every run).
    last_timestamp_ns: u64,
}

/// How a packet teaches the table.
#[derive(Clone, Copy, Debug)]
struct Learn {
    /// Create the entry when it does not exist.
    create: bool,
    /// The packet confirms reachability (a reply to us, a solicited NA).
    confirm: bool,
    /// A different MAC replaces the known one (false: NA without the O flag).
    replace: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learned {
    /// No entry and none created.
    Ignored,
    /// The table is full.
    Full,
    /// The entry exists and did not change.
    Unchanged,
    /// Created, or its MAC or state changed.
    Updated,
}

impl Core {
    /// Send a request for entry `e` (broadcast, or unicast to its MAC when `unicast`) from a new
    /// buffer into the outbox. False when it could not (counted).
    fn send_request<A: Family>(
        &mut self,
        pool: &mut BufferPool,
        e: &mut Entry<A>,
        unicast: bool,
        now: u64,
    ) -> bool {
        let Some(port) = self.ports.get(e.port as usize) else {
            return false;
        };
        let Some(source) = A::source(port, e.ip) else {
            return false;
        };
        if !self.limiter.take(now, self.ticks.hz) {
            self.stats.requests_rate_limited += 1;
            return false;
        }
        let Some(b) = pool.alloc() else {
            self.stats.request_alloc_failures += 1;
            return false;
        };
        let mut frame = [0u8; 128];
        let len = A::request(port, source, e.ip, unicast.then(|| e.mac()), &mut frame);
        pool.write_packet(b, &frame[..len]);
        let m = pool.meta_mut(b);
        m.rx_port = e.port;
        m.tx_port = e.port;
        m.l3_offset = eth::HEADER_LEN as u16;
        m.flags |= crate::FLAG_LOCAL_ORIGIN;
        m.timestamp_ns = self.last_timestamp_ns;
        if !self.outbox.push(NEXT_OUTPUT, b) {
            pool.free(b);
            self.stats.outbox_drops += 1;
            return false;
        }
        e.last_request = now;
        e.probes = e.probes.saturating_add(1);
        A::count_request(&mut self.stats);
        if unicast {
            self.stats.probes_sent += 1;
        }
        true
    }

    /// Free every buffer of `list` (counted as queue drops).
    /// Free every buffer of `list`, counted as `neighbour-tx` error `reason` (a `TX_ERRORS`
    /// index) at its next poll.
    fn drop_queue(&mut self, pool: &mut BufferPool, mut list: QueueList, reason: usize) {
        while let Some(b) = self.queue.pop(&mut list) {
            pool.free(b);
            self.stats.queue_drops += 1;
            self.unreported[reason] += 1;
        }
    }

    /// Move every buffer of `list` to the outbox towards `next`.
    fn release(&mut self, pool: &mut BufferPool, mut list: QueueList, next: u16) {
        while let Some(b) = self.queue.pop(&mut list) {
            if self.outbox.push(next, b) {
                self.stats.released += 1;
            } else {
                pool.free(b);
                self.stats.outbox_drops += 1;
                self.stats.queue_drops += 1;
                self.unreported[TX_OUTBOX_FULL] += 1;
            }
        }
    }

    fn note_news(&mut self, news: News) {
        // News merged from another worker is not passed on again (it would echo forever).
        if !self.share_news || self.merging {
            return;
        }
        if let Some(slot) = self.news.get_mut(self.news_len) {
            *slot = news;
            self.news_len += 1;
        } else {
            self.stats.news_lost += 1;
        }
    }
}

/// Teach table `t` that `key` = (port, address) has `mac` (None: the packet carried no address).
fn learn<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    key: (u16, A),
    mac: Option<Mac>,
    how: Learn,
    now: u64,
) -> Learned {
    let (port, ip) = key;
    let s = match t.find(port, ip) {
        Some(s) => s,
        None => {
            let (true, Some(_), Some(p)) = (how.create, mac, core.ports.get(port as usize)) else {
                // A confirmation for a neighbour this worker never asked for may answer another
                // worker's request (the kernel spreads flows, not conversations): pass it on.
                if let (Some(m), true) = (mac, how.confirm) {
                    core.note_news(News {
                        v6: A::V6,
                        confirm: true,
                        port,
                        ip: ip.wide(),
                        mac: m,
                    });
                }
                return Learned::Ignored;
            };
            let adj = Adjacency::new(port, p.mtu, [0; 6], p.mac);
            match t.insert(port, ip, adj, now) {
                Some(s) => s,
                None => {
                    core.stats.table_full += 1;
                    return Learned::Full;
                }
            }
        }
    };
    let e = &mut t.entries[s as usize];
    let known = e.state != NeighbourState::Incomplete;
    let fresh = if how.confirm {
        NeighbourState::Reachable
    } else {
        NeighbourState::Stale
    };
    let outcome = match mac {
        Some(m) if !known || (m != e.mac() && how.replace) => {
            e.adj.macs[..6].copy_from_slice(&m);
            e.state = fresh;
            e.confirmed = now;
            e.probes = 0;
            e.used = false;
            core.stats.learned += 1;
            if !known {
                let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
                core.release(pool, q, A::REWRITE);
            }
            Learned::Updated
        }
        Some(m) if m != e.mac() => {
            // RFC 4861 7.2.5: a different address without the override flag only makes a
            // reachable entry stale.
            if e.state == NeighbourState::Reachable {
                e.state = NeighbourState::Stale;
                Learned::Updated
            } else {
                Learned::Unchanged
            }
        }
        _ if known && how.confirm => {
            e.state = NeighbourState::Reachable;
            e.confirmed = now;
            e.probes = 0;
            e.used = false;
            Learned::Updated
        }
        _ => Learned::Unchanged,
    };
    if outcome == Learned::Updated && e.state != NeighbourState::Incomplete {
        core.note_news(News {
            v6: A::V6,
            confirm: e.state == NeighbourState::Reachable,
            port,
            ip: ip.wide(),
            mac: e.mac(),
        });
    }
    outcome
}

/// Whether entry `e` may be used to send now (MAC known and not expired); marks stale use.
#[inline]
fn usable<A>(e: &mut Entry<A>, ticks: &Ticks, now: u64) -> bool {
    if e.state == NeighbourState::Incomplete {
        return false;
    }
    let age = now.wrapping_sub(e.confirmed);
    if age >= ticks.gc {
        return false;
    }
    if e.state == NeighbourState::Reachable && age >= ticks.reachable {
        e.state = NeighbourState::Stale;
    }
    if e.state == NeighbourState::Stale {
        e.used = true;
    }
    true
}

/// Queue packet `b` for resolution (the work of `ip4-arp` and `ip6-discover`); Err: drop reason.
fn resolve_packet<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    b: u32,
    now: u64,
) -> Result<(), u16> {
    let meta = *pool.meta(b);
    core.last_timestamp_ns = meta.timestamp_ns;
    let s = if meta.next_scratch == GLEAN {
        let port = meta.tx_port;
        let Some(p) = core.ports.get(port as usize) else {
            return Err(R_UNKNOWN_PORT);
        };
        let Some(ip) = A::destination(pool.data(b), meta.l3_offset as usize) else {
            return Err(R_MALFORMED);
        };
        if A::source(p, ip).is_none() {
            return Err(R_NO_SOURCE);
        }
        match t.find(port, ip) {
            Some(s) => s,
            None => {
                let adj = Adjacency::new(port, p.mtu, [0; 6], p.mac);
                match t.insert(port, ip, adj, now) {
                    Some(s) => s,
                    None => {
                        core.stats.table_full += 1;
                        return Err(R_TABLE_FULL);
                    }
                }
            }
        }
    } else {
        t.slot_of(meta.next_scratch).ok_or(R_STALE)?
    };
    let id = t.id(s);
    pool.meta_mut(b).next_scratch = id;
    let e = &mut t.entries[s as usize];
    if usable(e, &core.ticks, now) {
        // Resolved since the lookup: straight on to rewrite.
        return if core.outbox.push(A::REWRITE, b) {
            Ok(())
        } else {
            core.stats.outbox_drops += 1;
            Err(R_OUTBOX_FULL)
        };
    }
    if e.state != NeighbourState::Incomplete {
        // Expired: resolve again from scratch.
        e.state = NeighbourState::Incomplete;
        e.probes = 0;
        e.used = false;
    }
    if e.queue.len == 0 && e.probes == 0 {
        // Resolution starts now (a pinned entry may have waited idle since the build).
        e.created = now;
    }
    if e.probes == 0 || now.wrapping_sub(e.last_request) >= core.ticks.retry {
        core.send_request(pool, e, false, now);
    }
    if e.queue.len >= core.queue_per_neighbour || !core.queue.push(&mut e.queue, b) {
        core.stats.queue_drops += 1;
        return Err(R_QUEUE_FULL);
    }
    core.stats.queued += 1;
    Ok(())
}

/// Age up to `count` entries of `t` from its sweep cursor.
fn sweep_table<A: Family>(
    t: &mut Table<A>,
    core: &mut Core,
    pool: &mut BufferPool,
    now: u64,
    count: usize,
) {
    let ticks = core.ticks;
    let n = t.entries.len();
    for _ in 0..count.min(n) {
        let s = t.cursor;
        t.cursor = (t.cursor + 1) % n;
        let e = &mut t.entries[s];
        if !e.live {
            continue;
        }
        let since_request = now.wrapping_sub(e.last_request);
        let delete = match e.state {
            NeighbourState::Incomplete => {
                if now.wrapping_sub(e.created) >= ticks.incomplete {
                    if !e.pinned || e.queue.len > 0 {
                        core.stats.resolution_failures += 1;
                    }
                    let q = std::mem::replace(&mut e.queue, QueueList::EMPTY);
                    core.drop_queue(pool, q, TX_RESOLUTION_FAILED);
                    e.created = now;
                    e.probes = 0;
                    true
                } else {
                    if e.queue.len > 0 && since_request >= ticks.retry {
                        core.send_request(pool, e, false, now);
                    }
                    false
                }
            }
            NeighbourState::Reachable | NeighbourState::Stale => {
                let age = now.wrapping_sub(e.confirmed);
                let failed = e.state == NeighbourState::Stale
                    && e.probes >= MAX_PROBES
                    && since_request >= ticks.retry;
                if age >= ticks.gc || failed {
                    core.stats.aged += 1;
                    e.state = NeighbourState::Incomplete;
                    e.created = now;
                    e.probes = 0;
                    e.used = false;
                    true
                } else {
                    if e.state == NeighbourState::Reachable && age >= ticks.reachable {
                        e.state = NeighbourState::Stale;
                    }
                    if e.state == NeighbourState::Stale
                        && e.used
                        && age >= ticks.probe_delay
                        && since_request >= ticks.retry
                        && core.send_request(pool, e, true, now)
                    {
                        e.used = false;
                    }
                    false
                }
            }
        };
        // A pinned entry (a route's next hop) stays, empty; others go.
        if delete && !e.pinned {
            let q = t.remove(s as u16);
            core.drop_queue(pool, q, TX_RESOLUTION_FAILED);
        }
    }
}

/// The neighbour state of one worker: both tables, the queue, the outbox, counters.
pub struct Neighbours {
    v4: Table<u32>,
    v6: Table<u128>,
    core: Core,
    last_sweep: u64,
    last_publish: u64,
    worker: usize,
    view: NeighbourView,
    inbox: Arc<Mutex<Mailbox>>,
    peers: Vec<Arc<Mutex<Mailbox>>>,
    /// Live timers (None: those of the config, fixed).
    timers: Option<Arc<NeighbourTimers>>,
}

impl Neighbours {
    /// Tables for `config` on a worker whose TSC runs at `tsc_hz`.
    pub fn new(config: &NeighbourConfig, tsc_hz: u64) -> Neighbours {
        let hz = tsc_hz.max(1);
        let secs = |s: u32| hz.saturating_mul(s as u64);
        let capacity = config.capacity.clamp(1, MAX_CAPACITY);
        let view = NeighbourSnapshot {
            rows: Vec::with_capacity(capacity * 2),
            ..NeighbourSnapshot::default()
        };
        Neighbours {
            v4: Table::new(capacity),
            v6: Table::new(capacity),
            core: Core {
                ports: config
                    .ports
                    .iter()
                    .map(|p| PortInfo::new(p, config.link_local))
                    .collect(),
                queue: PacketQueue::new(config.queue_total),
                outbox: Outbox::new(OUTBOX_CAPACITY),
                limiter: RateLimiter::new(
                    config.requests_per_second,
                    (config.requests_per_second / 10).max(1),
                ),
                ticks: Ticks {
                    hz,
                    reachable: secs(config.reachable_seconds),
                    gc: secs(config.gc_seconds),
                    incomplete: secs(config.incomplete_seconds.max(1)),
                    retry: hz,
                    probe_delay: secs(5), // RFC 4861 DELAY_FIRST_PROBE_TIME
                    sweep: (hz / 1000).max(1),
                },
                queue_per_neighbour: config.queue_per_neighbour.max(1),
                stats: NeighbourStats::default(),
                share_news: false,
                news: vec![News::default(); MAILBOX_CAPACITY].into_boxed_slice(),
                news_len: 0,
                unreported: [0; 3],
                last_timestamp_ns: 0,
                merging: false,
            },
            last_sweep: 0,
            last_publish: 0,
            worker: 0,
            view: Arc::new(Mutex::new(view)),
            inbox: Arc::new(Mutex::new(Mailbox {
                items: vec![News::default(); MAILBOX_CAPACITY].into_boxed_slice(),
                len: 0,
            })),
            peers: Vec::new(),
            timers: None,
        }
    }

    /// Take the reachable and gc timers from `timers` from now on (read at each maintenance).
    pub fn set_timers(&mut self, timers: Arc<NeighbourTimers>) {
        self.timers = Some(timers);
        self.refresh_timers();
    }

    fn refresh_timers(&mut self) {
        if let Some(t) = &self.timers {
            let (reachable, gc) = t.get();
            let hz = self.core.ticks.hz;
            self.core.ticks.reachable = hz.saturating_mul(u64::from(reachable));
            self.core.ticks.gc = hz.saturating_mul(u64::from(gc));
        }
    }

    // --- For ip4-lookup / ip6-lookup and the rewrite nodes -------------------------------------

    /// The adjacency id of `ip` on `port` when its MAC is known and fresh enough to use; None:
    /// send the packet to `ip4-arp` with `next_scratch = GLEAN` and `tx_port = port`.
    #[inline]
    pub fn lookup4(&mut self, port: u16, ip: u32, now: u64) -> Option<u32> {
        lookup(&mut self.v4, &self.core.ticks, port, ip, now)
    }

    /// As `lookup4`, for IPv6 (a miss goes to `ip6-discover`).
    #[inline]
    pub fn lookup6(&mut self, port: u16, ip: u128, now: u64) -> Option<u32> {
        lookup(&mut self.v6, &self.core.ticks, port, ip, now)
    }

    /// The adjacency of a neighbour adjacency id (bit 31 set) when usable; None: send the
    /// packet to `ip4-arp` with `next_scratch` unchanged (it queues it or drops it as
    /// `stale-adjacency`).
    #[inline]
    pub fn adjacency4(&mut self, id: u32, now: u64) -> Option<Adjacency> {
        adjacency(&mut self.v4, &self.core.ticks, id, now)
    }

    /// As `adjacency4`, for IPv6 (None: to `ip6-discover`).
    #[inline]
    pub fn adjacency6(&mut self, id: u32, now: u64) -> Option<Adjacency> {
        adjacency(&mut self.v6, &self.core.ticks, id, now)
    }

    /// A permanent (never deleted) entry for a route's next hop `ip` on `port`, created
    /// incomplete; its adjacency id can stand in a `NextHopTable` group like any adjacency.
    /// None when the table is full or the port is unknown. Cold path (graph build).
    pub fn pin4(&mut self, port: u16, ip: Ipv4Addr) -> Option<u32> {
        pin(&mut self.v4, &self.core, port, u32::from(ip))
    }

    /// As `pin4`, for IPv6.
    pub fn pin6(&mut self, port: u16, ip: Ipv6Addr) -> Option<u32> {
        pin(&mut self.v6, &self.core, port, u128::from(ip))
    }

    /// Let the IPv4 entry of adjacency id `id` age out again (a gateway no route uses now).
    pub fn unpin4(&mut self, id: u32) {
        unpin(&mut self.v4, id);
    }

    /// As `unpin4`, for IPv6.
    pub fn unpin6(&mut self, id: u32) {
        unpin(&mut self.v6, id);
    }

    // --- Outbox, timers, publication -----------------------------------------------------------

    /// Hand the outbox to `emit(next, buffer)` in order until it refuses (returns false); a
    /// refused buffer stays first in the outbox. Returns how many were taken.
    pub fn drain_outbox(&mut self, emit: &mut impl FnMut(u16, u32) -> bool) -> usize {
        let mut n = 0;
        while let Some((next, b)) = self.core.outbox.front() {
            if !emit(next, b) {
                break;
            }
            self.core.outbox.pop();
            n += 1;
        }
        n
    }

    /// Buffers waiting in the outbox.
    pub fn outbox_len(&self) -> usize {
        self.core.outbox.len
    }

    /// Timer work, at most once a millisecond: merge news from other workers, sweep
    /// `SWEEP_BATCH` entries of each family per millisecond since the last sweep (a worker
    /// that slept catches up), publish the snapshot once a second.
    pub fn maintain(&mut self, pool: &mut BufferPool, now: u64) {
        let since = now.wrapping_sub(self.last_sweep);
        if since < self.core.ticks.sweep {
            return;
        }
        self.last_sweep = now;
        self.refresh_timers();
        self.send_news();
        self.merge_news(pool, now);
        let batches = (since / self.core.ticks.sweep).min(MAX_CAPACITY as u64) as usize;
        self.sweep(pool, now, SWEEP_BATCH.saturating_mul(batches));
        if self.last_publish == 0 || now.wrapping_sub(self.last_publish) >= self.core.ticks.hz {
            self.publish(now);
        }
    }

    /// When `maintain` next has work that should not wait for traffic (TSC), for a worker
    /// that sleeps while idle: the next sweep while packets wait in the outbox, for news or
    /// for resolution; else the next publication of the snapshot (entries age by a sweep
    /// that catches up whenever it runs).
    pub fn next_timer(&self) -> u64 {
        if self.core.outbox.len > 0 || self.core.news_len > 0 || self.core.queue.used > 0 {
            return self.last_sweep.wrapping_add(self.core.ticks.sweep);
        }
        self.last_publish.wrapping_add(self.core.ticks.hz)
    }

    /// Age the next `count` entries of each family now (deletes, retries, probes).
    pub fn sweep(&mut self, pool: &mut BufferPool, now: u64, count: usize) {
        sweep_table(&mut self.v4, &mut self.core, pool, now, count);
        sweep_table(&mut self.v6, &mut self.core, pool, now, count);
    }

    /// Copy entries and counters into the view (skipped when the control plane holds it).
    pub fn publish(&mut self, now: u64) {
        let Ok(mut s) = self.view.try_lock() else {
            return;
        };
        self.last_publish = now;
        s.worker = self.worker;
        s.taken_tsc = now;
        s.stats = self.core.stats;
        s.rows.clear();
        push_rows(&self.v4, &mut s.rows, now, &self.core.ticks);
        push_rows(&self.v6, &mut s.rows, now, &self.core.ticks);
    }

    /// The control plane's view (filled by `publish`).
    pub fn view(&self) -> NeighbourView {
        self.view.clone()
    }

    /// Counters now.
    pub fn stats(&self) -> NeighbourStats {
        self.core.stats
    }

    /// Entries in use: (IPv4, IPv6).
    pub fn len(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// Packets queued for resolution.
    pub fn queued(&self) -> usize {
        self.core.queue.used
    }

    /// Every entry now, as `show neighbours` would list it (cold path).
    pub fn rows(&self, now: u64) -> Vec<NeighbourRow> {
        let mut rows = Vec::with_capacity(self.v4.len() + self.v6.len());
        push_rows(&self.v4, &mut rows, now, &self.core.ticks);
        push_rows(&self.v6, &mut rows, now, &self.core.ticks);
        rows
    }

    /// Free every queued and outboxed buffer (at shutdown, before the pool goes); returns how
    /// many. The entries stay.
    pub fn flush(&mut self, pool: &mut BufferPool) -> usize {
        let before = self.core.stats.queue_drops;
        for i in 0..self.v4.entries.len() {
            let q = std::mem::replace(&mut self.v4.entries[i].queue, QueueList::EMPTY);
            self.core.drop_queue(pool, q, TX_FLUSHED);
        }
        for i in 0..self.v6.entries.len() {
            let q = std::mem::replace(&mut self.v6.entries[i].queue, QueueList::EMPTY);
            self.core.drop_queue(pool, q, TX_FLUSHED);
        }
        let mut n = (self.core.stats.queue_drops - before) as usize;
        while let Some((_, b)) = self.core.outbox.front() {
            self.core.outbox.pop();
            pool.free(b);
            self.core.unreported[TX_FLUSHED] += 1;
            n += 1;
        }
        n
    }

    /// Packets freed outside a node's frame since the last call, by `TX_ERRORS` index (counted
    /// by `neighbour-tx`; the worker counts what `flush` freed at stop itself).
    pub fn take_unreported(&mut self) -> [u64; 3] {
        std::mem::take(&mut self.core.unreported)
    }

    // --- Other workers ---------------------------------------------------------------------------

    fn send_news(&mut self) {
        for i in 0..self.core.news_len {
            let news = self.core.news[i];
            for peer in &self.peers {
                let delivered = match peer.try_lock() {
                    Ok(mut m) => {
                        let at = m.len;
                        match m.items.get_mut(at) {
                            Some(slot) => {
                                *slot = news;
                                m.len += 1;
                                true
                            }
                            None => false,
                        }
                    }
                    Err(_) => false,
                };
                if !delivered {
                    self.core.stats.news_lost += 1;
                }
            }
        }
        self.core.news_len = 0;
    }

    fn merge_news(&mut self, pool: &mut BufferPool, now: u64) {
        if self.peers.is_empty() {
            return;
        }
        let Ok(mut inbox) = self.inbox.try_lock() else {
            return;
        };
        self.core.merging = true;
        for i in 0..inbox.len {
            let n = inbox.items[i];
            let how = Learn {
                create: false,
                confirm: n.confirm,
                replace: true,
            };
            let r = if n.v6 {
                learn(
                    &mut self.v6,
                    &mut self.core,
                    pool,
                    (n.port, n.ip),
                    Some(n.mac),
                    how,
                    now,
                )
            } else {
                let ip = n.ip as u32;
                learn(
                    &mut self.v4,
                    &mut self.core,
                    pool,
                    (n.port, ip),
                    Some(n.mac),
                    how,
                    now,
                )
            };
            if r != Learned::Ignored {
                self.core.stats.news_merged += 1;
            }
        }
        self.core.merging = false;
        inbox.len = 0;
        // What this worker learned from news is not news for the others (`send_news` ran
        // just before, so only that is dropped).
        self.core.news_len = 0;
    }

    // --- The nodes' work ---------------------------------------------------------------------------

    /// `arp-input` for one packet: Ok(next) or Err(drop reason).
    fn arp_packet(&mut self, pool: &mut BufferPool, b: u32, now: u64) -> Result<u16, u16> {
        let meta = *pool.meta(b);
        let port = meta.rx_port;
        let Some(p) = self.core.ports.get(port as usize) else {
            return Err(A_UNKNOWN_PORT);
        };
        let our_mac = p.mac;
        let l3 = meta.l3_offset as usize;
        let Some(a) = pool.data(b).get(l3..l3 + ARP_LEN) else {
            return Err(A_MALFORMED);
        };
        if be16(a, 0) != ARP_HTYPE_ETHERNET
            || be16(a, 2) != eth::TYPE_IPV4
            || a[4] != 6
            || a[5] != 4
        {
            return Err(A_MALFORMED);
        }
        let op = be16(a, 6);
        if op != ARP_OP_REQUEST && op != ARP_OP_REPLY {
            return Err(A_UNSUPPORTED_OP);
        }
        let mut sha: Mac = [0; 6];
        sha.copy_from_slice(&a[8..14]);
        let spa = be32(a, 14);
        let tpa = be32(a, 24);
        if sha[0] & 1 != 0 || sha == [0; 6] {
            return Err(A_BAD_SENDER);
        }
        if p.is_own4(spa) {
            return Err(A_CONFLICT);
        }
        let for_us = p.is_own4(tpa);
        // 0.0.0.0 (an RFC 5227 probe), loopback, multicast and broadcast senders teach nothing.
        let top = spa >> 24;
        let sender_ok = spa != 0 && top != 127 && top < 224;
        // RFC 826 merge: update an existing entry whoever the target; create one when the
        // packet is for us. A reply to us confirms reachability.
        let learned = if sender_ok {
            let how = Learn {
                create: for_us,
                confirm: for_us && op == ARP_OP_REPLY,
                replace: true,
            };
            learn(
                &mut self.v4,
                &mut self.core,
                pool,
                (port, spa),
                Some(sha),
                how,
                now,
            )
        } else {
            Learned::Ignored
        };
        if !for_us {
            return Err(match learned {
                Learned::Updated | Learned::Unchanged => A_LEARNED,
                _ => A_NOT_FOR_US,
            });
        }
        if op == ARP_OP_REPLY {
            return Err(match learned {
                Learned::Full => A_TABLE_FULL,
                Learned::Ignored => A_BAD_SENDER,
                _ => A_LEARNED,
            });
        }
        // A request for one of our addresses: answer in the same buffer.
        let (m, slot) = pool.slot_mut(b);
        let start = m.data_offset as usize;
        let len = (l3 + ARP_LEN).max(eth::MIN_FRAME);
        let Some(f) = slot.get_mut(start..start + len) else {
            return Err(A_MALFORMED);
        };
        f[eth::DST..eth::DST + 6].copy_from_slice(&sha);
        f[eth::SRC..eth::SRC + 6].copy_from_slice(&our_mac);
        let a = &mut f[l3..l3 + ARP_LEN];
        put16(a, 6, ARP_OP_REPLY);
        a[8..14].copy_from_slice(&our_mac);
        a[14..18].copy_from_slice(&tpa.to_be_bytes());
        a[18..24].copy_from_slice(&sha);
        a[24..28].copy_from_slice(&spa.to_be_bytes());
        f[l3 + ARP_LEN..].fill(0);
        m.length = len as u16;
        m.tx_port = port;
        self.core.stats.arp_replies_sent += 1;
        Ok(NEXT_OUTPUT)
    }

    /// `ip6-nd` for one packet: Ok(next) or Err(drop reason).
    fn nd_packet(&mut self, pool: &mut BufferPool, b: u32, now: u64) -> Result<u16, u16> {
        let meta = *pool.meta(b);
        let port = meta.rx_port;
        let Some(p) = self.core.ports.get(port as usize) else {
            return Err(N_UNKNOWN_PORT);
        };
        let our_mac = p.mac;
        let l3 = meta.l3_offset as usize;
        let d = pool.data(b);
        let Some(h) = d.get(l3..) else {
            return Err(N_MALFORMED);
        };
        if h.len() < ip6::HEADER_LEN + 24 || h[0] >> 4 != 6 || h[ip6::NEXT_HEADER] != proto::ICMP6 {
            return Err(N_MALFORMED);
        }
        let payload = be16(h, ip6::PAYLOAD_LEN) as usize;
        if payload < 24 || ip6::HEADER_LEN + payload > h.len() {
            return Err(N_MALFORMED);
        }
        let icmp = &h[ip6::HEADER_LEN..ip6::HEADER_LEN + payload];
        let kind = icmp[0];
        if kind != ND_NS && kind != ND_NA {
            return Err(N_UNSUPPORTED);
        }
        // RFC 4861 7.1: only a packet no router forwarded may change the cache.
        if h[ip6::HOP_LIMIT] != 255 {
            return Err(N_HOP_LIMIT);
        }
        if icmp[1] != 0 {
            return Err(N_MALFORMED);
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&h[ip6::SRC..ip6::SRC + 16]);
        dst.copy_from_slice(&h[ip6::DST..ip6::DST + 16]);
        let pseudo = checksum::pseudo_header_v6(src, dst, proto::ICMP6, payload as u32);
        if checksum::fold(checksum::sum(pseudo, icmp)) != 0xffff {
            return Err(N_CHECKSUM);
        }
        let (src, dst) = (u128::from_be_bytes(src), u128::from_be_bytes(dst));
        let target = be128(icmp, 8);
        if is_multicast6(target) || is_multicast6(src) {
            return Err(N_MALFORMED);
        }
        let want = if kind == ND_NS {
            ND_OPT_SLLA
        } else {
            ND_OPT_TLLA
        };
        let lla = link_layer_option(&icmp[24..], want).ok_or(N_MALFORMED)?;
        if lla.is_some_and(|m| m[0] & 1 != 0) {
            return Err(N_MALFORMED);
        }
        let mut eth_src: Mac = [0; 6];
        eth_src.copy_from_slice(&d[eth::SRC..eth::SRC + 6]);
        if kind == ND_NA {
            let flags = icmp[4];
            if is_multicast6(dst) && flags & NA_SOLICITED != 0 {
                return Err(N_MALFORMED);
            }
            if !is_multicast6(dst) && !p.is_own6(dst) {
                return Err(N_NOT_FOR_US);
            }
            if p.is_own6(target) {
                return Err(N_CONFLICT);
            }
            // RFC 4861 7.2.5: an advertisement updates an entry, never creates one.
            let how = Learn {
                create: false,
                confirm: flags & NA_SOLICITED != 0,
                replace: flags & NA_OVERRIDE != 0,
            };
            return Err(
                match learn(
                    &mut self.v6,
                    &mut self.core,
                    pool,
                    (port, target),
                    lla,
                    how,
                    now,
                ) {
                    Learned::Ignored => N_UNSOLICITED,
                    _ => N_LEARNED,
                },
            );
        }
        // A solicitation (RFC 4861 7.1.1 and 7.2.3).
        let unspecified = src == 0;
        if unspecified && (dst != solicited_node(target) || lla.is_some()) {
            return Err(N_MALFORMED);
        }
        if !p.is_own6(target) {
            return Err(N_NOT_FOR_US);
        }
        if dst != target && dst != solicited_node(target) && !p.is_own6(dst) {
            return Err(N_NOT_FOR_US);
        }
        if p.is_own6(src) {
            return Err(N_CONFLICT);
        }
        if let (false, Some(m)) = (unspecified, lla) {
            let how = Learn {
                create: true,
                confirm: false,
                replace: true,
            };
            learn(
                &mut self.v6,
                &mut self.core,
                pool,
                (port, src),
                Some(m),
                how,
                now,
            );
        }
        // Answer in the same buffer: to the solicitor, or to all nodes for a DAD probe.
        let (reply_dst, eth_dst, flags) = if unspecified {
            (
                ALL_NODES,
                multicast_mac6(ALL_NODES),
                NA_ROUTER | NA_OVERRIDE,
            )
        } else {
            (
                src,
                lla.unwrap_or(eth_src),
                NA_ROUTER | NA_SOLICITED | NA_OVERRIDE,
            )
        };
        let (m, slot) = pool.slot_mut(b);
        let start = m.data_offset as usize;
        let len = l3 + ip6::HEADER_LEN + ND_LEN;
        let Some(f) = slot.get_mut(start..start + len) else {
            return Err(N_MALFORMED);
        };
        f[eth::DST..eth::DST + 6].copy_from_slice(&eth_dst);
        f[eth::SRC..eth::SRC + 6].copy_from_slice(&our_mac);
        write_nd(
            &mut f[l3..],
            NdMessage {
                kind: ND_NA,
                flags,
                src: target,
                dst: reply_dst,
                target,
                option: ND_OPT_TLLA,
                mac: our_mac,
            },
        );
        m.length = len as u16;
        m.l4_offset = (l3 + ip6::HEADER_LEN) as u16;
        m.tx_port = port;
        self.core.stats.na_sent += 1;
        Ok(NEXT_OUTPUT)
    }
}

/// The link-layer address in option `want` of ND options `opts`; None (outer) when the options
/// are malformed (RFC 4861 4.6: a zero length is invalid).
fn link_layer_option(mut opts: &[u8], want: u8) -> Option<Option<Mac>> {
    let mut found = None;
    while !opts.is_empty() {
        if opts.len() < 2 {
            return None;
        }
        let len = opts[1] as usize * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if opts[0] == want && found.is_none() {
            let mut m: Mac = [0; 6];
            m.copy_from_slice(&opts[2..8]);
            found = Some(m);
        }
        opts = &opts[len..];
    }
    Some(found)
}

#[inline]
fn lookup<A: Family>(t: &mut Table<A>, ticks: &Ticks, port: u16, ip: A, now: u64) -> Option<u32> {
    let s = t.find(port, ip)?;
    usable(&mut t.entries[s as usize], ticks, now).then(|| t.id(s))
}

#[inline]
fn adjacency<A: Family>(t: &mut Table<A>, ticks: &Ticks, id: u32, now: u64) -> Option<Adjacency> {
    let s = t.slot_of(id)?;
    let e = &mut t.entries[s as usize];
    usable(e, ticks, now).then_some(e.adj)
}

fn pin<A: Family>(t: &mut Table<A>, core: &Core, port: u16, ip: A) -> Option<u32> {
    let p = core.ports.get(port as usize)?;
    let s = match t.find(port, ip) {
        Some(s) => s,
        None => t.insert(port, ip, Adjacency::new(port, p.mtu, [0; 6], p.mac), 0)?,
    };
    t.entries[s as usize].pinned = true;
    Some(t.id(s))
}

fn unpin<A: Family>(t: &mut Table<A>, id: u32) {
    if let Some(s) = t.slot_of(id) {
        if let Some(e) = t.entries.get_mut(s as usize) {
            e.pinned = false;
        }
    }
}

/// Append the live entries of `t` to `rows`, never beyond its capacity (no allocation).
fn push_rows<A: Family>(t: &Table<A>, rows: &mut Vec<NeighbourRow>, now: u64, ticks: &Ticks) {
    let hz = ticks.hz;
    for e in t.entries.iter().filter(|e| e.live) {
        if rows.len() == rows.capacity() {
            return;
        }
        let incomplete = e.state == NeighbourState::Incomplete;
        let since = if incomplete { e.created } else { e.confirmed };
        let mut state = e.state;
        if state == NeighbourState::Reachable && now.wrapping_sub(e.confirmed) >= ticks.reachable {
            state = NeighbourState::Stale;
        }
        rows.push(NeighbourRow {
            port: e.port,
            ip: e.ip.ip(),
            mac: (!incomplete).then(|| e.mac()),
            state,
            age_ms: (now.wrapping_sub(since) as u128 * 1000 / hz.max(1) as u128) as u64,
            pinned: e.pinned,
            queued: e.queue.len,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The handle the nodes share

/// One worker's `Neighbours`, shared by its neighbour nodes and its lookup and rewrite nodes.
#[derive(Clone)]
pub struct NeighbourHandle(Arc<WorkerCell<Neighbours>>);

impl NeighbourHandle {
    /// Tables for `config` on a worker whose TSC runs at `tsc_hz`.
    pub fn new(config: &NeighbourConfig, tsc_hz: u64) -> NeighbourHandle {
        NeighbourHandle(Arc::new(WorkerCell::new(Neighbours::new(config, tsc_hz))))
    }

    /// Run `f` on the tables (one borrow per frame, not per packet).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut Neighbours) -> R) -> R {
        self.0.with(f)
    }

    /// The control plane's view.
    pub fn view(&self) -> NeighbourView {
        self.with(|n| n.view())
    }

    /// Free every queued and outboxed buffer (call at shutdown, before the pool is dropped).
    pub fn flush(&self, pool: &mut BufferPool) -> usize {
        self.with(|n| n.flush(pool))
    }

    /// Join the handles of all workers (`handles[w]` is worker `w`'s), so each merges what the
    /// others learn. Cold path (graph build), before the workers start.
    pub fn connect(handles: &[NeighbourHandle]) {
        let inboxes: Vec<_> = handles
            .iter()
            .map(|h| h.with(|n| n.inbox.clone()))
            .collect();
        for (w, h) in handles.iter().enumerate() {
            h.with(|n| {
                n.worker = w;
                n.core.share_news = handles.len() > 1;
                n.peers = inboxes
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != w)
                    .map(|(_, m)| m.clone())
                    .collect();
            });
        }
    }

    /// The five neighbour nodes over this handle: `arp-input`, `ip4-arp`, `ip6-nd`,
    /// `ip6-discover` and the input `neighbour-tx` (add it after the ports' inputs).
    pub fn nodes(&self) -> (Vec<Box<dyn Node>>, Box<dyn InputNode>) {
        (
            vec![
                Box::new(ArpInput::new(self.clone())),
                Box::new(Ip4Arp::new(self.clone())),
                Box::new(Ip6Nd::new(self.clone())),
                Box::new(Ip6Discover::new(self.clone())),
            ],
            Box::new(NeighbourTx::new(self.clone())),
        )
    }
}

/// Count drop reason `reason` of the running node for a packet it frees itself.
#[inline]
fn count_drop(cx: &NodeContext<'_>, reason: u16) {
    if let Some(c) = cx.errors.get(cx.error_id(reason) as usize) {
        c.add(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Nodes

/// `arp-input`: ARP frames from `ethernet-input` (ethertype 0x0806, `l3_offset` at the ARP
/// header). Answers requests for the receiving port's addresses in the same buffer, learns
/// senders, drops the rest with a reason.
pub struct ArpInput {
    neighbours: NeighbourHandle,
}

impl ArpInput {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> ArpInput {
        ArpInput { neighbours }
    }
}

impl Node for ArpInput {
    fn name(&self) -> &str {
        ARP_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        ARP_ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (now, base) = (cx.now_tsc, cx.error_base);
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                nexts[i] = match n.arp_packet(cx.pool, b, now) {
                    Ok(next) => next,
                    Err(reason) => {
                        cx.pool.meta_mut(b).error = base + reason;
                        NEXT_DROP
                    }
                };
            }
        });
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        describe_arp(pool, buffer)
    }
}

/// One line about the ARP packet of a buffer (for traces).
pub fn describe_arp(pool: &BufferPool, buffer: u32) -> String {
    let m = pool.meta(buffer);
    let l3 = m.l3_offset as usize;
    match pool.data(buffer).get(l3..l3 + ARP_LEN) {
        Some(a) => {
            let mut sha: Mac = [0; 6];
            sha.copy_from_slice(&a[8..14]);
            format!(
                "arp op {} {} ({}) -> {} port {}",
                be16(a, 6),
                Ipv4Addr::from(be32(a, 14)),
                format_mac(&sha),
                Ipv4Addr::from(be32(a, 24)),
                m.rx_port
            )
        }
        None => format!("not an ARP packet ({} bytes)", m.length),
    }
}

/// `ip4-arp`: IPv4 packets whose neighbour is unresolved (`next_scratch` = `GLEAN` with
/// `tx_port`, or a neighbour adjacency id). Queues them and sends ARP requests; owns what it
/// gets (queued, passed on through the outbox, or freed and counted).
pub struct Ip4Arp {
    neighbours: NeighbourHandle,
}

impl Ip4Arp {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip4Arp {
        Ip4Arp { neighbours }
    }
}

fn resolve_frame<A: Family>(
    neighbours: &NeighbourHandle,
    cx: &mut NodeContext<'_>,
    frame: &[u32],
) -> Dispatch {
    let now = cx.now_tsc;
    neighbours.with(|n| {
        let (t, core) = A::table(n);
        for &b in frame {
            if let Err(reason) = resolve_packet(t, core, cx.pool, b, now) {
                count_drop(cx, reason);
                cx.pool.free(b);
            }
        }
    });
    Dispatch::Consumed
}

impl Node for Ip4Arp {
    fn name(&self) -> &str {
        IP4_ARP
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        RESOLVE_ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        resolve_frame::<u32>(&self.neighbours, cx, frame)
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "resolving for adjacency 0x{:08x}: {}",
            pool.meta(buffer).next_scratch,
            crate::ip4::describe_ip4(pool, buffer)
        )
    }
}

/// `ip6-nd`: ICMPv6 Neighbor Solicitations and Advertisements from `ip6-input`. Answers
/// solicitations for the receiving port's addresses with an advertisement in the same buffer,
/// learns from both, drops the rest with a reason.
pub struct Ip6Nd {
    neighbours: NeighbourHandle,
}

impl Ip6Nd {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip6Nd {
        Ip6Nd { neighbours }
    }
}

impl Node for Ip6Nd {
    fn name(&self) -> &str {
        IP6_ND
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        ND_ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (now, base) = (cx.now_tsc, cx.error_base);
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                nexts[i] = match n.nd_packet(cx.pool, b, now) {
                    Ok(next) => next,
                    Err(reason) => {
                        cx.pool.meta_mut(b).error = base + reason;
                        NEXT_DROP
                    }
                };
            }
        });
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let at = m.l3_offset as usize + ip6::HEADER_LEN;
        let d = pool.data(buffer);
        match (d.get(at), d.get(at + 8..at + 24)) {
            (Some(&kind), Some(t)) => format!(
                "nd type {kind} target {}: {}",
                Ipv6Addr::from(be128(t, 0)),
                crate::ip6::describe_ip6(pool, buffer)
            ),
            _ => crate::ip6::describe_ip6(pool, buffer),
        }
    }
}

/// `ip6-discover`: IPv6 packets whose neighbour is unresolved; queues them and sends Neighbor
/// Solicitations to the solicited-node multicast address.
pub struct Ip6Discover {
    neighbours: NeighbourHandle,
}

impl Ip6Discover {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip6Discover {
        Ip6Discover { neighbours }
    }
}

impl Node for Ip6Discover {
    fn name(&self) -> &str {
        IP6_DISCOVER
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        RESOLVE_ERRORS.map(String::from).to_vec()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        resolve_frame::<u128>(&self.neighbours, cx, frame)
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "resolving for adjacency 0x{:08x}: {}",
            pool.meta(buffer).next_scratch,
            crate::ip6::describe_ip6(pool, buffer)
        )
    }
}

/// `neighbour-tx`: the input node that sends what the neighbour nodes produced outside their
/// frames (requests, released packets), and runs the timers. Finished when its outbox is empty.
pub struct NeighbourTx {
    neighbours: NeighbourHandle,
}

impl NeighbourTx {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> NeighbourTx {
        NeighbourTx { neighbours }
    }
}

impl InputNode for NeighbourTx {
    fn name(&self) -> &str {
        NEIGHBOUR_TX
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        TX_ERRORS.map(String::from).to_vec()
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let now = cx.now_tsc;
        let mut k = 0;
        self.neighbours.with(|n| {
            n.worker = cx.worker;
            n.maintain(cx.pool, now);
            for (reason, count) in n.take_unreported().into_iter().enumerate() {
                if count > 0 {
                    if let Some(c) = cx.errors.get(cx.error_id(reason as u16) as usize) {
                        c.add(count);
                    }
                }
            }
            n.drain_outbox(&mut |next, b| {
                if k == out.len() {
                    return false;
                }
                out[k] = b;
                nexts[k] = next;
                k += 1;
                true
            });
        });
        (k, Dispatch::PerPacket)
    }

    fn is_finished(&self) -> bool {
        self.neighbours.with(|n| n.outbox_len() == 0)
    }

    fn next_timer(&self) -> Option<u64> {
        Some(self.neighbours.with(|n| n.next_timer()))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "neighbour: sending {} bytes (adjacency 0x{:08x}) on port {}",
            m.length, m.next_scratch, m.tx_port
        )
    }
}

#[cfg(test)]
#[path = "neighbour_tests.rs"]
mod tests;

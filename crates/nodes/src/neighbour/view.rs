//! What the control plane sees of the neighbour tables: counters, entry states and rows, and the
//! snapshot a worker publishes at most once a second. It never reads a worker's tables directly.

use super::*;

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

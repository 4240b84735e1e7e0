//! The load balancer's use of the per-worker session table (`session::SessionTable`): what its
//! flow entries hold (`AsRef`, the server a flow was given), its NAT reverse entries
//! (`NatReverse`: server:target_port -> client gives back the VIP and its port), its keys (the
//! VIP id as scope; `REVERSE` for NAT replies), its timeout classes (TCP, UDP, other, and
//! closing after FIN/RST) and how a packet touches its entry, and the tables' sizes (what the
//! LB memory budget counts). The table itself (layout, hashing, expiry, counts) is the
//! `session` crate's. A full pair of buckets refuses an insert: the node falls back to plain
//! Maglev hashing, it never evicts a live flow and never drops a packet. Nothing here
//! allocates per packet.
//!
//! Live counts: groups are VIP ids (`SessionCounts::group`), bins AS slots
//! (`SessionCounts::bin`); NAT reverse entries count in neither.

use crate::parse::{Kind, Plain4};
use crate::tuple::FiveTuple;
use session::{SessionKey, SessionTable, SessionTableError, SessionValue, Touch, CLASSES};

/// The scope of NAT reverse keys (never a VIP id, and past `session::GROUPS`: never counted).
pub const REVERSE: u32 = u32::MAX;

/// Class of TCP flows.
pub const CLASS_TCP: u8 = 0;
/// Class of UDP flows.
pub const CLASS_UDP: u8 = 1;
/// Class of flows of any other protocol.
pub const CLASS_OTHER: u8 = 2;
/// Class of a TCP flow after FIN or RST (entered by `Touch::Shorten`).
pub const CLASS_CLOSING: u8 = 3;

/// The NAT reverse table's buckets for a forward table of `buckets`: a quarter (one reverse
/// entry per NAT flow), at least one.
pub fn nat_buckets_for(buckets: usize) -> usize {
    (buckets / 4).max(1)
}

/// Bytes one worker's flow tables take for `entries` (`lb conf buckets`): the forward table of
/// `session::buckets_for(entries)` buckets and its NAT reverse table (`nat_buckets_for`), each
/// rounded as `packet::huge::HugeTable` allocates it. What the LB memory budget counts per
/// worker.
pub fn worker_tables_bytes(entries: usize) -> u64 {
    let buckets = session::buckets_for(entries);
    session::table_bytes::<AsRef>(buckets)
        + session::table_bytes::<NatReverse>(nat_buckets_for(buckets))
}

/// Why a worker's flow tables could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}; lower `lb conf buckets` or free memory")]
pub struct FlowTableError(#[from] pub SessionTableError);

/// One worker's two tables for `entries` flows (`lb conf buckets`): forward flows, and NAT
/// reverse entries (a quarter of its buckets), sized as `worker_tables_bytes` counts them,
/// counting live flows for VIP ids below `vips` and AS slots below `slots`.
pub fn worker_tables(
    entries: usize,
    vips: usize,
    slots: usize,
) -> Result<(SessionTable<AsRef>, SessionTable<NatReverse>), FlowTableError> {
    let buckets = session::buckets_for(entries);
    let classes = Timeouts::default().classes();
    let flows = SessionTable::new(buckets, classes, vips, slots)?;
    let nat = SessionTable::new(nat_buckets_for(buckets), classes, vips, 1)?;
    Ok((flows, nat))
}

/// Idle timeouts in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP flows.
    pub tcp: u32,
    /// UDP flows.
    pub udp: u32,
    /// Flows of any other protocol.
    pub other: u32,
    /// A TCP flow after FIN or RST.
    pub closing: u32,
}

impl Default for Timeouts {
    /// VPP's `lb conf timeout` default (40 s) for every protocol, 4 s after FIN/RST.
    fn default() -> Self {
        Timeouts {
            tcp: 40,
            udp: 40,
            other: 40,
            closing: 4,
        }
    }
}

impl Timeouts {
    /// The session table's timeouts per class (`CLASS_*`; the classes the LB never uses get
    /// `other`'s).
    pub fn classes(&self) -> [u32; CLASSES] {
        let mut c = [self.other; CLASSES];
        c[usize::from(CLASS_TCP)] = self.tcp;
        c[usize::from(CLASS_UDP)] = self.udp;
        c[usize::from(CLASS_CLOSING)] = self.closing;
        c
    }
}

/// The class a new flow of `protocol` starts in.
#[inline(always)]
pub fn class_of(protocol: u8) -> u8 {
    match protocol {
        6 => CLASS_TCP,
        17 => CLASS_UDP,
        _ => CLASS_OTHER,
    }
}

/// What a lookup of a packet of `kind` does to its entry: a SYN back to the TCP class,
/// refreshed; FIN or RST shortens to the closing class (never lengthens); anything else
/// refreshes.
#[inline(always)]
pub fn touch_for(kind: Kind) -> Touch {
    match kind {
        Kind::Syn => Touch::Set(CLASS_TCP),
        Kind::FinRst => Touch::Shorten(CLASS_CLOSING),
        _ => Touch::Refresh,
    }
}

/// The key of a flow `t` toward VIP `vip`.
#[inline(always)]
pub fn flow_key(vip: u32, t: &FiveTuple) -> SessionKey {
    SessionKey::new(vip, t)
}

/// The key of plain IPv4 packet `p` toward VIP `vip`: `flow_key(vip, &p.tuple())`, made from
/// the 4-byte addresses.
#[inline(always)]
pub fn plain4_key(vip: u32, p: &Plain4) -> SessionKey {
    SessionKey::v4(vip, p.protocol, p.src, p.dst, p.src_port, p.dst_port)
}

/// The NAT reverse key of a reply `t` (server:target_port -> client).
#[inline(always)]
pub fn reverse_key(t: &FiveTuple) -> SessionKey {
    SessionKey::new(REVERSE, t)
}

/// The server a flow was given: its AS slot and the slot's generation at that time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsRef {
    /// The AS slot.
    pub slot: u32,
    /// The slot's generation (a flush bumps it; entries with an old one are stale).
    pub gen: u32,
}

impl SessionValue for AsRef {
    /// Live flows are counted per AS slot.
    #[inline(always)]
    fn bin(&self) -> u32 {
        self.slot
    }
}

/// A NAT reverse entry's value: what a reply from server:target_port to the client becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatReverse {
    /// The VIP id (for counters).
    pub vip: u32,
    /// The address the client sent to (IPv4-mapped for NAT4).
    pub addr: [u8; 16],
    /// The port the client sent to.
    pub port: u16,
}

impl SessionValue for NatReverse {}

#[cfg(test)]
#[path = "flowtable_tests.rs"]
mod tests;

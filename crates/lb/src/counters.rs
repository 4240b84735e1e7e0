//! Load-balancer counters of one worker: per VIP (by `VipId`), per AS slot (by `AsSlot`) and for
//! the whole LB node. Written by that worker only (relaxed load + store, no read-modify-write),
//! read racily by the control plane, which sums workers. Sized once for `MAX_VIPS` and
//! `MAX_AS_SLOTS`; never allocates after construction. Ids are reused after a VIP or a slot is
//! freed, so the control plane keeps a baseline per id taken when it frees one.

use crate::model::{AsSlot, VipId, MAX_AS_SLOTS, MAX_VIPS};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One counter with a single writer.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n` (only the owning worker calls this).
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Set (gauges such as live flows; only the owning worker calls this).
    #[inline(always)]
    pub fn set(&self, n: u64) {
        self.0.store(n, Relaxed);
    }

    /// The current value (any thread).
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counters of one VIP in one worker.
#[derive(Debug, Default)]
pub struct VipCounters {
    /// Packets sent to a server.
    pub packets: Counter,
    /// Their bytes (IP packet length before encapsulation).
    pub bytes: Counter,
    /// Flows created in the flow table (or hashed without one when it was full).
    pub new_flows: Counter,
    /// Flow-table entries alive (gauge, set by the flow table's sweep).
    pub live_flows: Counter,
    /// Non-SYN packets that found no flow entry: a flow that ECMP moved here, or one that aged out.
    pub nonsyn_misses: Counter,
    /// Packets dropped because the VIP has no server with weight > 0.
    pub no_server: Counter,
    /// Packets sent by plain Maglev hashing because the flow table had no room.
    pub table_full: Counter,
    /// Fragments (handled by the fragment policy).
    pub fragments: Counter,
    /// ICMP errors about a flow of this VIP, sent to that flow's server.
    pub icmp_errors: Counter,
    /// Packets answered with ICMP "fragmentation needed" / "packet too big".
    pub too_big: Counter,
}

/// Counters of one AS slot in one worker.
#[derive(Debug, Default)]
pub struct AsCounters {
    /// Packets sent to this server.
    pub packets: Counter,
    /// Their bytes.
    pub bytes: Counter,
    /// Flows assigned to this server.
    pub new_flows: Counter,
    /// Flow-table entries alive pointing at this server (gauge).
    pub live_flows: Counter,
}

/// Counters of the LB node of one worker.
#[derive(Debug)]
pub struct LbWorkerCounters {
    vips: Box<[VipCounters]>,
    slots: Box<[AsCounters]>,
    /// Packets to a VIP address whose protocol/port matches no VIP (dropped).
    pub no_vip_for_port: Counter,
    /// Packets too short or malformed to parse (dropped).
    pub malformed: Counter,
    /// NAT replies rewritten back to the VIP.
    pub nat_replies: Counter,
    /// NAT replies with no session (passed on unchanged).
    pub nat_reply_misses: Counter,
    /// Health probes wrapped for the server their source port is leased to.
    pub probes: Counter,
    /// Health probes to a VIP whose source port is not leased to one of its servers (dropped).
    pub probes_unleased: Counter,
    /// Packets too big for their GRE tunnel (inner IPv4 without DF) cut into inner fragments.
    pub gre_fragmented: Counter,
    /// The fragments they were cut into (each sent as a GRE packet of its own).
    pub gre_fragments: Counter,
    /// Entries this worker's flow table holds (a gauge set when the node is made: `lb conf
    /// buckets` rounded as the table rounds it).
    pub flow_table_entries: Counter,
}

impl Default for LbWorkerCounters {
    fn default() -> Self {
        LbWorkerCounters::new()
    }
}

impl LbWorkerCounters {
    /// Counters for every possible VIP id and AS slot (about 3 MiB).
    pub fn new() -> LbWorkerCounters {
        LbWorkerCounters {
            vips: (0..MAX_VIPS).map(|_| VipCounters::default()).collect(),
            slots: (0..MAX_AS_SLOTS).map(|_| AsCounters::default()).collect(),
            no_vip_for_port: Counter::default(),
            malformed: Counter::default(),
            nat_replies: Counter::default(),
            nat_reply_misses: Counter::default(),
            probes: Counter::default(),
            probes_unleased: Counter::default(),
            gre_fragmented: Counter::default(),
            gre_fragments: Counter::default(),
            flow_table_entries: Counter::default(),
        }
    }

    /// The counters of VIP `id` (None when out of range).
    #[inline(always)]
    pub fn vip(&self, id: VipId) -> Option<&VipCounters> {
        self.vips.get(id.0 as usize)
    }

    /// The counters of AS slot `slot` (None when out of range).
    #[inline(always)]
    pub fn slot(&self, slot: AsSlot) -> Option<&AsCounters> {
        self.slots.get(slot.0 as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_and_read_back() {
        let c = LbWorkerCounters::new();
        let v = c.vip(VipId(3)).expect("in range");
        v.packets.add(2);
        v.packets.add(3);
        v.live_flows.set(7);
        assert_eq!(v.packets.get(), 5);
        assert_eq!(v.live_flows.get(), 7);
        assert!(c.vip(VipId(MAX_VIPS as u32)).is_none());
        assert!(c.slot(AsSlot(MAX_AS_SLOTS as u32)).is_none());
        c.slot(AsSlot(9)).expect("in range").bytes.add(60);
        assert_eq!(c.slot(AsSlot(9)).expect("in range").bytes.get(), 60);
    }
}

//! Per-vector helpers of the `lb` node: the memo of the last VIP answer, the VIP of a later
//! fragment, the marking of what the node hands to a lookup, the vector's dispatch, and the
//! vector of a node with no VIP. They read the snapshot and the vector's own metadata; they
//! never allocate, lock or look at another worker's state.

use super::{lookup_next, LbError, LbNext, VIP_ROUTE};
use crate::FLAG_LB_DONE;
use graph::{Dispatch, NodeContext, NEXT_CONSUMED};
use lb::counters::LbWorkerCounters;
use lb::model::{VipId, VipProtocol};
use lb::snapshot::LbTables;
use lb::FiveTuple;
use packet::meta::FLAG_IP6;
use packet::BufferPool;

/// The last `vip_for` answer of a vector: packets to a VIP come in runs to the same address,
/// protocol and port, and one compare is far cheaper than the prefix search. Lives for one
/// `process` call (the tables it answered from do not change within it).
pub(super) struct VipMemo {
    dst: [u8; 16],
    protocol: u8,
    dst_port: u16,
    ip6: bool,
    valid: bool,
    vip: Option<VipId>,
}

impl VipMemo {
    pub(super) const EMPTY: VipMemo = VipMemo {
        dst: [0; 16],
        protocol: 0,
        dst_port: 0,
        ip6: false,
        valid: false,
        vip: None,
    };

    /// `tables.vip_for(t)`, from the memo when `t` asks what the last packet asked.
    #[inline(always)]
    pub(super) fn vip_for(&mut self, tables: &LbTables, t: &FiveTuple) -> Option<VipId> {
        if self.valid
            && self.dst == t.dst
            && self.dst_port == t.dst_port
            && self.protocol == t.protocol
            && self.ip6 == t.ip6
        {
            return self.vip;
        }
        let vip = tables.vip_for(t);
        *self = VipMemo {
            dst: t.dst,
            protocol: t.protocol,
            dst_port: t.dst_port,
            ip6: t.ip6,
            valid: true,
            vip,
        };
        vip
    }
}

/// The VIP of a later fragment (no ports): the first VIP, by id, whose prefix holds the
/// destination and whose protocol is the fragment's or any. A per-port VIP thus takes the
/// later fragments of every port on its address; documented as the fragment policy. Walks the
/// VIPs (no allocation): paid by later fragments only.
pub(super) fn fragment_vip(tables: &LbTables, t: &FiveTuple) -> Option<VipId> {
    let dst = t.dst_addr();
    tables
        .vips()
        .find(|v| {
            v.ip6 == t.ip6
                && v.key.prefix.contains(dst)
                && match v.key.protocol {
                    VipProtocol::Any => true,
                    VipProtocol::Tcp => t.protocol == packet::headers::proto::TCP,
                    VipProtocol::Udp => t.protocol == packet::headers::proto::UDP,
                }
        })
        .map(|v| v.id)
}

/// `AllTo` when every packet of the vector goes to the same next node: the graph then moves
/// the frame in one copy instead of scattering it packet by packet (its cost is charged to this
/// node; the check is one pass over 2-byte ids).
pub(super) fn uniform(nexts: &[u16]) -> Dispatch {
    match nexts.first() {
        Some(&first) if first != NEXT_CONSUMED && nexts.iter().all(|&n| n == first) => {
            Dispatch::AllTo(first)
        }
        _ => Dispatch::PerPacket,
    }
}

/// Mark the packets of `frame` this node hands to a lookup (`FLAG_LB_DONE`): should a VIP's
/// route bring one back, it is dropped as `vip-loop`. One pass over the vector's metadata,
/// which the node's own passes left in the cache.
#[inline]
pub(super) fn mark_sent(pool: &mut BufferPool, frame: &[u32], nexts: &[u16]) {
    let (l4, l6) = (LbNext::Ip4Lookup.id(), LbNext::Ip6Lookup.id());
    for (&b, &n) in frame.iter().zip(nexts) {
        if n == l4 || n == l6 {
            pool.meta_mut(b).flags |= FLAG_LB_DONE;
        }
    }
}

/// No VIP in the tables (the last one just went): a steered packet to its family's lookup; one
/// a VIP's route brought (the route goes before the VIP does, so hardly any) is dropped as
/// `no-vip-for-port`, and one that was here before as `vip-loop`.
#[cold]
pub(super) fn pass_all(
    cx: &mut NodeContext<'_>,
    counters: &LbWorkerCounters,
    frame: &[u32],
    nexts: &mut [u16],
) -> Dispatch {
    for (i, &b) in frame.iter().enumerate() {
        let meta = cx.pool.meta_mut(b);
        nexts[i] = if meta.flags & FLAG_LB_DONE != 0 {
            meta.error = cx.error_base + LbError::Loop.id();
            LbNext::Drop.id()
        } else if meta.next_scratch == VIP_ROUTE {
            counters.no_vip_for_port.add(1);
            meta.error = cx.error_base + LbError::NoVipForPort.id();
            LbNext::Drop.id()
        } else {
            meta.flags |= FLAG_LB_DONE;
            lookup_next(meta.flags & FLAG_IP6 != 0)
        };
    }
    uniform(nexts)
}

//! The `lb` node's fast lane: a chunk of the vector whose every packet is a plain IPv4 TCP or
//! UDP packet (`parse::plain4`: no options, not a fragment) to an L3DSR VIP, not a health
//! probe and with no offload left undone — a loaded L3DSR balancer's whole traffic. Such a
//! chunk is read into 16-byte `Plain4`s instead of `Parsed`s, keyed from the 4-byte addresses,
//! and the packets of known flows are rewritten in place by `encap::l3dsr_plain4`. Everything
//! else (a new flow, a stale entry, any other packet in the chunk) goes the general way, with
//! the same keys, the same flow table and the same bytes out: the lane only skips work, never
//! decides differently (property tests in `lb` hold `plain4`, `flowtable::plain4_key` and
//! `l3dsr_plain4` to their general twins; `tests.rs` holds whole vectors to it). It never
//! allocates, locks or makes a syscall.

use super::{count_sent, flow_serves, l3_of, v4_of, LbError, LbNext, VipRun, Work};
use crate::FLAG_LB_DONE;
use graph::NodeContext;
use lb::counters::LbWorkerCounters;
use lb::encap;
use lb::flowtable::{self, AsRef};
use lb::model::{AsSlot, Encap, VipId};
use lb::parse::{self, Plain4};
use lb::snapshot::LbTables;
use packet::meta::FLAG_IP6;
use session::{SessionHash, SessionTable, Touch};

/// The last VIP answer of the lane (packets come in runs to one VIP): destination, protocol
/// and port asked, and the VIP with its DSCP (`None`: not an L3DSR VIP). Lives for one
/// `process` call, as the tables it answered from.
pub(super) struct Memo4 {
    /// Destination, protocol and port in one word (`NONE`: nothing asked yet).
    key: u64,
    vip: Option<(VipId, u8)>,
}

impl Memo4 {
    /// A key no packet makes (its top byte is never set).
    const NONE: u64 = u64::MAX;

    pub(super) const EMPTY: Memo4 = Memo4 {
        key: Memo4::NONE,
        vip: None,
    };

    /// The L3DSR VIP of `p`, and its DSCP.
    #[inline(always)]
    fn vip(&mut self, tables: &LbTables, p: &Plain4) -> Option<(VipId, u8)> {
        let key = u64::from(u32::from_ne_bytes(p.dst))
            | u64::from(p.protocol) << 32
            | u64::from(p.dst_port) << 40;
        if self.key != key {
            self.key = key;
            self.vip = tables
                .vip_for(&p.tuple())
                .and_then(|id| match tables.vip(id)?.encap {
                    Encap::L3dsr { dscp } => Some((id, dscp)),
                    _ => None,
                });
        }
        self.vip
    }
}

/// The lane's per-chunk scratch, by VIP-packet index (`j`, the order of `sel`).
pub(super) struct Lane {
    /// Each packet as `plain4` read it.
    plain: Vec<Plain4>,
    /// Each packet's VIP and DSCP.
    vip: Vec<(VipId, u8)>,
}

/// Where the lane writes its keys' hashes, in the node's arrays (`sel`, `hashes`, `touch`).
pub(super) struct Keys<'a> {
    pub(super) sel: &'a mut [u16],
    pub(super) hashes: &'a mut [SessionHash],
    pub(super) touch: &'a mut [Touch],
}

impl Lane {
    pub(super) fn new(len: usize) -> Lane {
        Lane {
            plain: vec![Plain4::EMPTY; len],
            vip: vec![(VipId(0), 0); len],
        }
    }

    /// Pass 1 of a chunk: read every packet as plain, find its VIP, make its key and hash and
    /// prefetch its bucket; every packet goes to `ip4-lookup` unless pass 3 says otherwise.
    /// `None`, having changed nothing but scratch, as soon as a packet is not for the lane.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare(
        &mut self,
        cx: &NodeContext<'_>,
        frame: &[u32],
        nexts: &mut [u16],
        tables: &LbTables,
        flows: &SessionTable<AsRef>,
        probe_port: Option<u16>,
        memo: &mut Memo4,
        out: Keys<'_>,
    ) -> Option<usize> {
        let n = frame
            .len()
            .min(self.plain.len())
            .min(out.sel.len())
            .min(out.hashes.len())
            .min(out.touch.len());
        // Every array cut to `n`: the indexing below then needs no bounds checks.
        let (frame, sel) = (&frame[..n], &mut out.sel[..n]);
        let (hashes, touch) = (&mut out.hashes[..n], &mut out.touch[..n]);
        let (plain, vips) = (&mut self.plain[..n], &mut self.vip[..n]);
        for (j, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet(b);
            if meta.flags & (FLAG_IP6 | FLAG_LB_DONE) != 0
                || meta.has_offload()
                || Some(meta.rx_port) == probe_port
            {
                return None;
            }
            let p = parse::plain4(l3_of(meta, data))?;
            let (vip, dscp) = memo.vip(tables, &p)?;
            let h = flows.hash(&flowtable::plain4_key(vip.0, &p));
            flows.prefetch(h);
            hashes[j] = h;
            touch[j] = flowtable::touch_for(p.kind);
            sel[j] = j as u16;
            plain[j] = p;
            vips[j] = (vip, dscp);
        }
        nexts[..n].fill(LbNext::Ip4Lookup.id());
        Some(n)
    }

    /// Pass 3 of a plain chunk: rewrite the packets of known flows (`found`, from the flow
    /// table) for L3DSR and count them; the others (new flows, stale entries) are parsed
    /// into `work` and listed in `retry` for the general pass 3. The number listed.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        cx: &mut NodeContext<'_>,
        frame: &[u32],
        nexts: &mut [u16],
        tables: &LbTables,
        counters: &LbWorkerCounters,
        found: &[Option<AsRef>],
        work: &mut [Work],
        retry: &mut [u16],
        vip_run: &mut VipRun,
    ) -> usize {
        let mut m = 0;
        let n = frame
            .len()
            .min(found.len())
            .min(self.plain.len())
            .min(nexts.len());
        let (frame, found, nexts) = (&frame[..n], &found[..n], &mut nexts[..n]);
        let (plain, vips) = (&self.plain[..n], &self.vip[..n]);
        for j in 0..n {
            let p = &plain[j];
            let (vip, dscp) = vips[j];
            let b = frame[j];
            let known = found[j].filter(|&r| flow_serves(tables, r, p.kind));
            let Some(r) = known else {
                // The general way, with what `parse` would have given (`Plain4::parsed`; a
                // property test holds them equal).
                // (`work` and `retry` hold a chunk: the drop below cannot happen.)
                match (work.get_mut(j), retry.get_mut(m)) {
                    (Some(w), Some(at)) => {
                        w.parsed_ok = true;
                        w.parsed = p.parsed();
                        w.vip = vip;
                        *at = j as u16;
                        m += 1;
                    }
                    _ => {
                        cx.pool.meta_mut(b).error = cx.error_base + LbError::EncapFailed.id();
                        nexts[j] = LbNext::Drop.id();
                    }
                }
                continue;
            };
            let slot = AsSlot(r.slot);
            let server = v4_of(&tables.as_entry(slot).addr16);
            let (meta, buf) = cx.pool.slot_mut(b);
            if encap::l3dsr_plain4(meta, buf, p, server, dscp).is_err() {
                meta.error = cx.error_base + LbError::EncapFailed.id();
                nexts[j] = LbNext::Drop.id();
                continue;
            }
            count_sent(counters, vip_run, vip, slot, u64::from(p.len));
        }
        m
    }
}

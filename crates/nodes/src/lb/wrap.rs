//! The `lb` node's last step for a packet whose server is chosen: the VIP's encapsulation
//! (`wrap`), shared by client packets and health probes; and the health probes themselves
//! (`wrap_probe`): a packet from the probe host's port to a VIP goes to the server its source
//! port is leased to, never where Maglev or the flow table would send it, and leaves no flow
//! entry. A packet too big for its GRE tunnel without DF is cut into inner fragments
//! (`wrap_fragments`, cold), the only work here that takes buffers from the pool: the pool's,
//! never the heap's. Never reads a table other than the snapshot and the leases.

use super::{lookup_next, v4_of, LbError, LbNext, GRE_TTL};
use crate::{icmp_request, FLAG_LB_DONE, FLAG_LOCAL_ORIGIN};
use graph::Emitter;
use lb::counters::LbWorkerCounters;
use lb::encap::{self, EncapError};
use lb::model::{AsState, Encap, VipId};
use lb::parse::Parsed;
use lb::probe::ProbeLeases;
use lb::snapshot::{LbTables, VipEntry};
use packet::frag::{FragError, Ip4Split};
use packet::headers::ip4;
use packet::meta::FLAG_IP6;
use packet::{BufferMeta, BufferPool};
use std::net::IpAddr;
use std::sync::Arc;

/// Where health probes enter the data path: the probe host's port and its leases.
#[derive(Clone, Debug)]
pub struct LbProbe {
    /// The probe host's port id.
    pub port: u16,
    /// Which AS slot each probe-band source port probes.
    pub leases: Arc<ProbeLeases>,
    /// The probe sources (IPv4 ones IPv4-mapped, as in `FiveTuple`).
    pub sources: Vec<[u8; 16]>,
}

impl LbProbe {
    /// Whether `t` is addressed to a probe source at a probe-band port: a reply to a probe
    /// (never a client's packet: the sources are vecplane's own addresses).
    #[inline]
    pub fn is_reply(&self, t: &lb::FiveTuple) -> bool {
        lb::probe::in_band(t.dst_port) && self.sources.contains(&t.dst)
    }
}

/// Encapsulate a packet of `vip` toward `server` as the VIP says (the flow hash, needed by
/// GRE only, is computed on demand).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn wrap(
    tables: &LbTables,
    vip: &VipEntry,
    meta: &mut BufferMeta,
    buf: &mut [u8],
    p: &Parsed,
    server: [u8; 16],
    mtu: u16,
    hash: impl Fn() -> u32,
) -> Result<(), EncapError> {
    match vip.encap {
        Encap::L3dsr { dscp } => encap::l3dsr(meta, buf, p, v4_of(&server), dscp),
        Encap::Gre4 => {
            let src = tables.conf().ip4_src.map(|s| match s.addr {
                IpAddr::V4(a) => encap::gre_source4(a.octets(), 32 - s.len.min(32), hash()),
                IpAddr::V6(_) => [0; 4],
            });
            match src {
                Some(src) => encap::gre4(meta, buf, p, src, v4_of(&server), GRE_TTL, mtu, hash()),
                None => Err(EncapError::FamilyMismatch),
            }
        }
        Encap::Gre6 => {
            let src = tables.conf().ip6_src.map(|s| match s.addr {
                IpAddr::V6(a) => {
                    encap::gre_source6(a.octets(), (128 - s.len.min(128)).min(32), hash())
                }
                IpAddr::V4(_) => [0; 16],
            });
            match src {
                Some(src) => encap::gre6(meta, buf, p, src, server, GRE_TTL, mtu, hash()),
                None => Err(EncapError::FamilyMismatch),
            }
        }
        Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => {
            encap::nat_forward(meta, buf, p, server, target_port)
        }
    }
}

/// A health probe from the probe host to VIP `vip`: wrapped for the server its source port
/// is leased to, if that server belongs to the VIP; returns the next node (the lookup, an
/// ICMP error for a probe too big for the encapsulation, or a drop with `meta.error` set).
#[allow(clippy::too_many_arguments)]
pub(super) fn wrap_probe(
    tables: &LbTables,
    leases: &ProbeLeases,
    counters: &LbWorkerCounters,
    vip: VipId,
    meta: &mut BufferMeta,
    buf: &mut [u8],
    p: &Parsed,
    mtu: u16,
    error_base: u16,
) -> u16 {
    let slot = leases
        .slot_of(p.tuple.src_port)
        .map(|s| tables.as_entry(s))
        .filter(|e| e.vip == vip && e.state != AsState::Free);
    let (Some(entry), Some(v)) = (slot, tables.vip(vip)) else {
        counters.probes_unleased.add(1);
        meta.error = error_base + LbError::ProbeNotLeased.id();
        return LbNext::Drop.id();
    };
    let sticky = v.src_ip_sticky;
    let hash = || lb::stable_hash(&p.tuple, sticky);
    match wrap(tables, v, meta, buf, p, entry.addr16, mtu, hash) {
        Ok(()) => {
            counters.probes.add(1);
            if matches!(v.encap, Encap::Gre4 | Encap::Gre6) {
                meta.flags |= FLAG_LOCAL_ORIGIN;
            }
            lookup_next(meta.flags & FLAG_IP6 != 0)
        }
        Err(EncapError::TooBig { mtu, signal: true }) => {
            if p.tuple.ip6 {
                meta.next_scratch = icmp_request(2, 0, mtu);
                LbNext::Ip6IcmpError.id()
            } else {
                meta.next_scratch = icmp_request(3, 4, mtu);
                LbNext::Ip4IcmpError.id()
            }
        }
        Err(EncapError::TooBig { .. }) => {
            meta.error = error_base + LbError::TooBig.id();
            LbNext::Drop.id()
        }
        Err(_) => {
            meta.error = error_base + LbError::EncapFailed.id();
            LbNext::Drop.id()
        }
    }
}

/// Most fragments one packet is cut into: a 64 KiB jumbo packet through a 1280-byte tunnel
/// takes 53.
const MAX_FRAGMENTS: usize = 64;

/// Cut the inner IPv4 packet of `b` (no DF; `wrap` found it too big for the VIP's GRE tunnel)
/// into fragments that fit the tunnel, each wrapped as `wrap` wraps a packet: `b` becomes the
/// first fragment in place, the others are made in new buffers and emitted after frame packet
/// `after` to the same lookup. Returns the next node of `b`. All or nothing: on an error
/// nothing was emitted, every new buffer is freed and `b` is unchanged (the caller drops it
/// under the returned reason). Cold: only packets larger than the tunnel come here.
#[cold]
#[allow(clippy::too_many_arguments)]
pub(super) fn wrap_fragments(
    tables: &LbTables,
    vip: &VipEntry,
    counters: &LbWorkerCounters,
    pool: &mut BufferPool,
    emitter: &mut Emitter,
    after: usize,
    b: u32,
    p: &Parsed,
    server: [u8; 16],
    mtu: u16,
    hash: impl Fn() -> u32,
) -> Result<u16, LbError> {
    let overhead = match vip.encap {
        Encap::Gre4 => encap::GRE4_OVERHEAD,
        Encap::Gre6 => encap::GRE6_OVERHEAD,
        _ => return Err(LbError::TooBig),
    };
    if p.tuple.ip6 {
        return Err(LbError::TooBig);
    }
    let m = *pool.meta(b);
    let l3 = usize::from(m.l3_offset);
    let split = {
        let data = pool.data(b);
        let inner = data.get(l3..).ok_or(LbError::Malformed)?;
        let max = usize::from(mtu).saturating_sub(overhead);
        Ip4Split::plan(inner, max, MAX_FRAGMENTS).map_err(|e| match e {
            FragError::Malformed | FragError::BadOptions => LbError::Malformed,
            FragError::DontFragment
            | FragError::TooSmall
            | FragError::TooMany
            | FragError::Fits => LbError::TooBig,
        })?
    };
    let hl = split.header_len();
    let mut header = [0u8; ip4::MAX_HEADER_LEN];
    header[..hl].copy_from_slice(&pool.data(b)[l3..l3 + hl]);
    let count = split.count();
    if emitter.capacity() - emitter.len() < count - 1 {
        return Err(LbError::FragmentQueueFull);
    }
    let headroom = pool.headroom();
    let mut made = [0u32; MAX_FRAGMENTS];
    for k in 1..count {
        match pool.alloc_for(split.fragment_len(k)) {
            Some(c) => made[k] = c,
            None => {
                pool.free_batch(&made[1..k]);
                return Err(LbError::NoFragmentBuffer);
            }
        }
    }
    // Fragments 2..: header and payload copied into each new buffer, then wrapped.
    for k in 1..count {
        let c = made[k];
        let (at, len) = split.payload_range(k);
        let piece = Parsed {
            len: split.fragment_len(k),
            ..*p
        };
        let (_, slot) = pool.slot_mut(c);
        split.write_header(&header, k, &mut slot[headroom..]);
        pool.copy_meta(b, c);
        let cm = pool.meta_mut(c);
        cm.clear_offload();
        cm.data_offset = headroom as u16;
        cm.l3_offset = 0;
        cm.length = piece.len as u16;
        let copied = pool.copy_between(b, l3 + at, len, c, headroom + hl);
        let (cm, slot) = pool.slot_mut(c);
        if !copied || wrap(tables, vip, cm, slot, &piece, server, mtu, &hash).is_err() {
            pool.free_batch(&made[1..count]);
            return Err(LbError::EncapFailed);
        }
        // Emitted straight to the lookup: marked as `mark_sent` marks the frame's packets.
        cm.flags |= FLAG_LOCAL_ORIGIN | FLAG_LB_DONE;
    }
    // The first fragment in place: its header rewritten, the rest of the packet left behind.
    let first = Parsed {
        len: split.fragment_len(0),
        ..*p
    };
    let (meta, slot) = pool.slot_mut(b);
    let at = usize::from(meta.data_offset) + l3;
    split.write_header(&header, 0, &mut slot[at..]);
    if wrap(tables, vip, meta, slot, &first, server, mtu, &hash).is_err() {
        // Not reached: the first fragment is smaller than the packet `wrap` accepted but for
        // its size. Put the original header back so that `b` is unchanged.
        slot[at..at + hl].copy_from_slice(&header[..hl]);
        pool.free_batch(&made[1..count]);
        return Err(LbError::EncapFailed);
    }
    meta.flags |= FLAG_LOCAL_ORIGIN;
    let next = lookup_next(meta.flags & FLAG_IP6 != 0);
    for &c in &made[1..count] {
        // Room was checked above: the emitter holds `count - 1` more.
        if let Err(c) = emitter.emit(after, next, c) {
            pool.free(c);
        }
    }
    counters.gre_fragmented.add(1);
    counters.gre_fragments.add(count as u64);
    Ok(next)
}

//! The `lb` node's last step for a packet whose server is chosen: the VIP's encapsulation
//! (`wrap`), shared by client packets and health probes; and the health probes themselves
//! (`wrap_probe`): a packet from the probe host's port to a VIP goes to the server its source
//! port is leased to, never where Maglev or the flow table would send it, and leaves no flow
//! entry. Never allocates; never reads a table other than the snapshot and the leases.

use super::{lookup_next, v4_of, LbError, LbNext, GRE_TTL};
use crate::{icmp_request, FLAG_LOCAL_ORIGIN};
use lb::counters::LbWorkerCounters;
use lb::encap::{self, EncapError};
use lb::model::{AsState, Encap, VipId};
use lb::parse::Parsed;
use lb::probe::ProbeLeases;
use lb::snapshot::{LbTables, VipEntry};
use packet::meta::FLAG_IP6;
use packet::BufferMeta;
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

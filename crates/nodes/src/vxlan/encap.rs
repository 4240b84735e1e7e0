//! `<port>-tx` of a VXLAN port: prepends outer Ethernet (left for `ip4-rewrite`), IPv4 (DF set,
//! checksum), UDP (source port from the inner flow hash, checksum when enabled) and VXLAN
//! headers in the buffer's headroom and sends the packet to `ip4-lookup` as locally originated.
//! A frame too big for the tunnel is dropped and counted; an IPv4 one with DF is turned, in its
//! own buffer, into an ICMP "fragmentation needed" for its sender, received back on the port.
//! It never copies the inner frame and never allocates per packet.

use super::{source_port, Tunnel, Vni, FLAGS_VNI, HEADER_LEN, OVERHEAD};
use crate::flow_hash::{ip4_flow_hash, ip6_flow_hash};
use crate::icmp::RateLimiter;
use crate::{names, FLAG_LOCAL_ORIGIN};
use graph::{Dispatch, Node, NodeContext, PortStats};
use packet::checksum;
use packet::headers::{be16, be32, eth, ip4, ip6, proto, put16, udp};
use packet::meta::{FLAG_FLOW_HASH, FLAG_IP6, FLAG_L2_MULTICAST, FLAG_TUNNEL};
use packet::BufferPool;
use std::sync::Arc;

graph::node_indices! {
    /// The encap node's next nodes.
    enum Next {
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `IP4_LOOKUP`: the encapsulated packet.
        Lookup = names::IP4_LOOKUP,
        /// To `ETHERNET_INPUT`: an ICMP error for the inner sender, received on the port.
        Ethernet = names::ETHERNET_INPUT,
    }
}

graph::node_indices! {
    /// The encap node's drop reasons.
    pub enum EncapError {
        /// The inner frame is shorter than an Ethernet header.
        Runt = "runt",
        /// Less headroom than the outer headers need.
        NoHeadroom = "no-headroom",
        /// The inner packet is larger than the tunnel's MTU (also counted when an ICMP
        /// "fragmentation needed" was sent back instead).
        MtuExceeded = "mtu-exceeded",
        /// A flow-chosen VNI, but the frame carries no tunnel id.
        NoTunnelId = "no-tunnel-id",
    }
}

/// The encap node's drop reasons, by index.
pub const ENCAP_ERRORS: &[&str] = EncapError::NAMES;

/// `<port>-tx` of one VXLAN port.
pub struct VxlanEncap {
    name: String,
    tunnel: Tunnel,
    /// The outer IPv4 header without length and checksum, and its partial checksum sum.
    ip_template: [u8; ip4::MIN_HEADER_LEN],
    ip_sum: u64,
    /// The outer addresses' pseudo-header sum without the length.
    pseudo: u64,
    stats: Option<Arc<PortStats>>,
    limiter: RateLimiter,
}

impl VxlanEncap {
    /// The transmit node `name` of `tunnel`'s port; ICMP errors about frames too big for the
    /// tunnel are rate-limited by `limiter`.
    pub fn new(name: String, tunnel: Tunnel, limiter: RateLimiter) -> VxlanEncap {
        let mut h = [0u8; ip4::MIN_HEADER_LEN];
        h[0] = 0x45;
        put16(&mut h, ip4::FRAG, 0x4000); // DF: the underlay must not fragment
        h[ip4::TTL] = 64;
        h[ip4::PROTOCOL] = proto::UDP;
        h[ip4::SRC..ip4::SRC + 4].copy_from_slice(&tunnel.local.octets());
        h[ip4::DST..ip4::DST + 4].copy_from_slice(&tunnel.remote.octets());
        let ip_sum = checksum::sum(0, &h);
        let pseudo = checksum::pseudo_header_v4(
            tunnel.local.octets(),
            tunnel.remote.octets(),
            proto::UDP,
            0,
        );
        VxlanEncap {
            name,
            tunnel,
            ip_template: h,
            ip_sum,
            pseudo,
            stats: None,
            limiter,
        }
    }

    /// Count sent frames (inner bytes) in the port's `stats`.
    pub fn with_stats(mut self, stats: Arc<PortStats>) -> VxlanEncap {
        self.stats = Some(stats);
        self
    }
}

/// The inner frame's L3 offset and ethertype after at most two VLAN tags (None: runt or
/// truncated tag).
#[inline(always)]
fn inner_l3(frame: &[u8]) -> Option<(usize, u16)> {
    let mut t = be16(frame.get(..eth::HEADER_LEN)?, eth::TYPE);
    let mut l3 = eth::HEADER_LEN;
    for _ in 0..2 {
        if t == eth::TYPE_VLAN || t == eth::TYPE_QINQ {
            t = be16(frame.get(l3..l3 + eth::TAG_LEN)?, 2);
            l3 += eth::TAG_LEN;
        }
    }
    Some((l3, t))
}

/// Hash of the inner frame's flow: the IP 5-tuple when there is one, else the MACs and type.
#[inline(always)]
fn inner_hash(frame: &[u8]) -> u32 {
    match inner_l3(frame) {
        Some((l3, eth::TYPE_IPV4)) if frame.len() >= l3 + ip4::MIN_HEADER_LEN => {
            ip4_flow_hash(&frame[l3..])
        }
        Some((l3, eth::TYPE_IPV6)) if frame.len() >= l3 + ip6::HEADER_LEN => {
            ip6_flow_hash(&frame[l3..])
        }
        _ => {
            let mut acc = 0u64;
            for c in frame[..eth::HEADER_LEN.min(frame.len())].chunks(7) {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                acc = (acc ^ u64::from_le_bytes(w)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            }
            (acc >> 32) as u32
        }
    }
}

/// Whether an ICMP error may be sent about this inner IPv4 packet (RFC 1812 4.3.2.7: not about
/// an ICMP error, a non-first fragment, or a source that is not a unicast host).
fn icmp_allowed(h: &[u8]) -> bool {
    let top = h[ip4::SRC];
    if top == 0 || top == 127 || top >= 224 || be32(h, ip4::DST) == u32::MAX {
        return false;
    }
    if be16(h, ip4::FRAG) & ip4::OFFSET_MASK != 0 {
        return false;
    }
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    !(h[ip4::PROTOCOL] == proto::ICMP && matches!(h.get(ihl), Some(3 | 4 | 5 | 11 | 12) | None))
}

/// Most bytes of the ICMP error (RFC 1812 4.3.2.3).
const ICMP_MAX: usize = 576;
const ICMP_HEADERS: usize = ip4::MIN_HEADER_LEN + 8;

/// Turn the too-big inner IPv4 frame in `b` (L3 at `l3`) into an ICMP "fragmentation needed"
/// (next-hop MTU `mtu`) from its destination to its sender, in place: Ethernet addresses
/// swapped, VLAN tags kept. False (frame unchanged) when no error may be sent about it.
fn frag_needed(pool: &mut BufferPool, b: u32, l3: usize, mtu: u16) -> bool {
    let (meta, slot) = pool.slot_mut(b);
    let start = meta.data_offset as usize;
    let len = meta.length as usize;
    let Some(h) = slot.get(start + l3..start + len) else {
        return false;
    };
    if h.len() < ip4::MIN_HEADER_LEN || h[0] >> 4 != 4 || be16(h, ip4::FRAG) & 0x4000 == 0 {
        return false;
    }
    if !icmp_allowed(h) {
        return false;
    }
    // Only about frames sent to one host (not a broadcast or multicast MAC).
    if slot[start] & 1 != 0 {
        return false;
    }
    let quote = (be16(h, ip4::TOTAL_LEN) as usize)
        .min(h.len())
        .min(ICMP_MAX - ICMP_HEADERS);
    let at = start + l3;
    let total = ICMP_HEADERS + quote;
    if at + total > slot.len() {
        return false;
    }
    let (mut src, mut dst) = ([0u8; 4], [0u8; 4]);
    src.copy_from_slice(&slot[at + ip4::DST..at + ip4::DST + 4]);
    dst.copy_from_slice(&slot[at + ip4::SRC..at + ip4::SRC + 4]);
    slot.copy_within(at..at + quote, at + ICMP_HEADERS);
    let e = &mut slot[start..start + eth::HEADER_LEN];
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&e[6..12]);
    macs[6..].copy_from_slice(&e[..6]);
    e[..12].copy_from_slice(&macs);
    let p = &mut slot[at..at + total];
    p[..ICMP_HEADERS].fill(0);
    p[0] = 0x45;
    p[ip4::TOS] = 0xc0;
    put16(p, ip4::TOTAL_LEN, total as u16);
    p[ip4::TTL] = 64;
    p[ip4::PROTOCOL] = proto::ICMP;
    p[ip4::SRC..ip4::SRC + 4].copy_from_slice(&src);
    p[ip4::DST..ip4::DST + 4].copy_from_slice(&dst);
    let c = checksum::checksum(&p[..ip4::MIN_HEADER_LEN]);
    put16(p, ip4::CHECKSUM, c);
    let icmp = &mut p[ip4::MIN_HEADER_LEN..];
    icmp[0] = crate::ip4::ICMP_UNREACHABLE;
    icmp[1] = 4; // fragmentation needed and DF set
    put16(icmp, 6, mtu);
    let c = checksum::checksum(icmp);
    put16(icmp, 2, c);
    meta.length = (l3 + total) as u16;
    true
}

impl Node for VxlanEncap {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Next::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        EncapError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let t = self.tunnel;
        let (mut packets, mut bytes) = (0u64, 0u64);
        let mut all_lookup = true;
        for (i, &b) in frame.iter().enumerate() {
            let base = cx.error_base;
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize;
            let len = meta.length as usize;
            let next = 'encap: {
                let Some(inner) = slot.get(start..start + len) else {
                    meta.error = base + EncapError::Runt.id();
                    break 'encap Next::Drop.id();
                };
                if len < eth::HEADER_LEN {
                    meta.error = base + EncapError::Runt.id();
                    break 'encap Next::Drop.id();
                }
                if len - eth::HEADER_LEN > t.mtu as usize {
                    let ip4_l3 = match inner_l3(inner) {
                        Some((l3, eth::TYPE_IPV4)) => Some(l3),
                        _ => None,
                    };
                    let reply = ip4_l3.is_some_and(|l3| {
                        let h = &inner[l3..];
                        h.len() >= ip4::MIN_HEADER_LEN
                            && be16(h, ip4::FRAG) & 0x4000 != 0
                            && icmp_allowed(h)
                    }) && self.limiter.take(cx.now_tsc, cx.tsc_hz);
                    if let (true, Some(l3)) = (reply, ip4_l3) {
                        if frag_needed(cx.pool, b, l3, t.mtu) {
                            // Not sent, so counted here; the ICMP error goes back instead.
                            let id = cx.error_id(EncapError::MtuExceeded.id());
                            if let Some(c) = cx.errors.get(id as usize) {
                                c.add(1);
                            }
                            let meta = cx.pool.meta_mut(b);
                            meta.rx_port = t.port;
                            meta.flags &= !(FLAG_FLOW_HASH | FLAG_TUNNEL | FLAG_LOCAL_ORIGIN);
                            break 'encap Next::Ethernet.id();
                        }
                    }
                    cx.pool.meta_mut(b).error = base + EncapError::MtuExceeded.id();
                    break 'encap Next::Drop.id();
                }
                let vni = match t.vni {
                    Vni::Fixed(v) => v,
                    Vni::Flow if meta.flags & FLAG_TUNNEL != 0 => meta.tun_id,
                    Vni::Flow => {
                        meta.error = base + EncapError::NoTunnelId.id();
                        break 'encap Next::Drop.id();
                    }
                };
                if start < OVERHEAD {
                    meta.error = base + EncapError::NoHeadroom.id();
                    break 'encap Next::Drop.id();
                }
                let hash = inner_hash(inner);
                packets += 1;
                bytes += len as u64;
                let udp_len = (udp::HEADER_LEN + HEADER_LEN + len) as u16;
                let total = ip4::MIN_HEADER_LEN as u16 + udp_len;
                let new_start = start - OVERHEAD;
                let sport = source_port(hash);
                let udp_sum = if t.udp_checksum {
                    // Pseudo-header, UDP header and VXLAN header as numbers, then the frame.
                    let acc = self.pseudo
                        + u64::from(udp_len) * 2
                        + u64::from(sport)
                        + u64::from(t.dst_port)
                        + u64::from(FLAGS_VNI) * 256
                        + u64::from(vni >> 8)
                        + u64::from((vni & 0xff) << 8);
                    match !checksum::fold(checksum::sum(acc, inner)) {
                        0 => 0xffff,
                        c => c,
                    }
                } else {
                    0
                };
                let hdr = &mut slot[new_start..start];
                hdr[..eth::HEADER_LEN].fill(0);
                let ip = &mut hdr[eth::HEADER_LEN..eth::HEADER_LEN + ip4::MIN_HEADER_LEN];
                ip.copy_from_slice(&self.ip_template);
                put16(ip, ip4::TOTAL_LEN, total);
                let c = !checksum::fold(self.ip_sum + u64::from(total));
                put16(ip, ip4::CHECKSUM, c);
                let u = &mut hdr[eth::HEADER_LEN + ip4::MIN_HEADER_LEN..];
                put16(u, 0, sport);
                put16(u, 2, t.dst_port);
                put16(u, 4, udp_len);
                put16(u, udp::CHECKSUM, udp_sum);
                let v = &mut u[udp::HEADER_LEN..];
                v[..8].copy_from_slice(&[FLAGS_VNI, 0, 0, 0, 0, 0, 0, 0]);
                v[4..8].copy_from_slice(&(vni << 8).to_be_bytes());
                meta.data_offset = new_start as u16;
                meta.length = (len + OVERHEAD) as u16;
                meta.l3_offset = eth::HEADER_LEN as u16;
                meta.l4_offset = (eth::HEADER_LEN + ip4::MIN_HEADER_LEN) as u16;
                meta.ethertype = eth::TYPE_IPV4;
                meta.vlan = 0;
                meta.flow_hash = hash;
                meta.flags = (meta.flags | FLAG_LOCAL_ORIGIN | FLAG_FLOW_HASH)
                    & !(FLAG_IP6 | FLAG_L2_MULTICAST);
                Next::Lookup.id()
            };
            all_lookup &= next == Next::Lookup.id();
            nexts[i] = next;
        }
        if let Some(s) = &self.stats {
            s.tx_packets.add(packets);
            s.tx_bytes.add(bytes);
        }
        if all_lookup {
            Dispatch::AllTo(Next::Lookup.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let d = pool.data(buffer);
        let u = eth::HEADER_LEN + ip4::MIN_HEADER_LEN;
        match d.get(u..OVERHEAD) {
            Some(h) if pool.meta(buffer).flags & FLAG_LOCAL_ORIGIN != 0 => format!(
                "vxlan {} -> {} vni {} sport {} ({} bytes)",
                self.tunnel.local,
                self.tunnel.remote,
                be32(h, 12) >> 8,
                be16(h, 0),
                d.len()
            ),
            _ => format!("icmp error or dropped ({} bytes)", d.len()),
        }
    }
}

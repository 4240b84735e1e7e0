//! `vxlan-input`: UDP packets addressed to one of vecplane's own addresses arrive here from
//! `ip4-lookup` (after `ip4-input` checked the IPv4 header). A packet to a tunnel's UDP port,
//! from its remote, with a valid VXLAN header and a known VNI loses its outer headers and goes
//! to `ethernet-input` as received on the tunnel's port, the VNI and outer addresses kept in the
//! metadata; everything else is dropped under its reason. It never copies a frame.

use super::{Tunnel, Vni, FLAGS_VNI, HEADER_LEN};
use crate::names;
use graph::{Dispatch, Node, NodeContext, PortStats};
use packet::checksum;
use packet::headers::{be16, be32, eth, ip4, proto, udp};
use packet::meta::{FLAG_TRACE, FLAG_TUNNEL};
use packet::BufferPool;
use std::net::Ipv4Addr;
use std::sync::Arc;

graph::node_indices! {
    /// `vxlan-input`'s next nodes.
    enum Next {
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `ETHERNET_INPUT`: the inner frame.
        Ethernet = names::ETHERNET_INPUT,
    }
}

graph::node_indices! {
    /// `vxlan-input`'s drop reasons.
    pub enum VxlanInputError {
        /// Addressed to vecplane but not UDP (vecplane answers nothing else).
        NotUdp = "not-udp",
        /// A fragment (VXLAN packets are not reassembled).
        Fragment = "fragment",
        /// Too short for the UDP and VXLAN headers and an inner Ethernet header.
        Truncated = "truncated",
        /// The UDP length disagrees with the IPv4 length.
        BadUdpLength = "bad-udp-length",
        /// The UDP checksum is wrong.
        BadUdpChecksum = "bad-udp-checksum",
        /// UDP to a port no tunnel listens on, or to an address no tunnel uses.
        NoTunnel = "no-tunnel",
        /// From an address that is not a tunnel's remote.
        UnknownRemote = "unknown-remote",
        /// The VXLAN flags are not exactly "VNI valid".
        BadFlags = "bad-flags",
        /// No tunnel of this local address, remote and UDP port has this VNI.
        UnknownVni = "unknown-vni",
    }
}

/// `vxlan-input`'s drop reasons, by index.
pub const INPUT_ERRORS: &[&str] = VxlanInputError::NAMES;

/// The `vxlan-input` node of one worker.
pub struct VxlanInput {
    tunnels: Vec<Tunnel>,
    /// Receive counters by tunnel (same order).
    stats: Vec<Option<Arc<PortStats>>>,
}

impl VxlanInput {
    /// A node for `tunnels` with their ports' counters (`stats[i]` for `tunnels[i]`, None: not
    /// counted).
    pub fn new(tunnels: Vec<Tunnel>, stats: Vec<Option<Arc<PortStats>>>) -> VxlanInput {
        VxlanInput { tunnels, stats }
    }

    /// The tunnel index for (outer destination, source, UDP port, VNI), or the reason none is.
    #[inline(always)]
    fn find(&self, dst: u32, src: u32, port: u16, vni: u32) -> Result<usize, VxlanInputError> {
        let mut reason = VxlanInputError::NoTunnel;
        let mut flow = None;
        for (i, t) in self.tunnels.iter().enumerate() {
            if u32::from(t.local) != dst || t.dst_port != port {
                continue;
            }
            if u32::from(t.remote) != src {
                reason = VxlanInputError::UnknownRemote;
                continue;
            }
            match t.vni {
                Vni::Fixed(v) if v == vni => return Ok(i),
                Vni::Fixed(_) => reason = VxlanInputError::UnknownVni,
                Vni::Flow => flow = flow.or(Some(i)),
            }
        }
        flow.ok_or(reason)
    }
}

/// Whether the UDP checksum of `u` (header and payload) verifies for `src` -> `dst`.
#[inline(always)]
fn udp_checksum_ok(src: u32, dst: u32, u: &[u8]) -> bool {
    let pseudo = checksum::pseudo_header_v4(
        src.to_be_bytes(),
        dst.to_be_bytes(),
        proto::UDP,
        u.len() as u16,
    );
    checksum::fold(checksum::sum(pseudo, u)) == 0xffff
}

impl Node for VxlanInput {
    fn name(&self) -> &str {
        super::VXLAN_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        Next::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        VxlanInputError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let base = cx.error_base;
        let mut all_ethernet = true;
        for (i, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet_mut(b);
            let (l3, l4) = (meta.l3_offset as usize, meta.l4_offset as usize);
            let outcome = 'check: {
                // ip4-input checked the IPv4 header and cut the packet to its total length.
                let Some(h) = data.get(l3..l3 + ip4::MIN_HEADER_LEN) else {
                    break 'check Err(VxlanInputError::Truncated);
                };
                if h[ip4::PROTOCOL] != proto::UDP {
                    break 'check Err(VxlanInputError::NotUdp);
                }
                if be16(h, ip4::FRAG) & (ip4::OFFSET_MASK | ip4::MORE_FRAGMENTS) != 0 {
                    break 'check Err(VxlanInputError::Fragment);
                }
                let (src, dst) = (be32(h, ip4::SRC), be32(h, ip4::DST));
                let Some(u) = data.get(l4..) else {
                    break 'check Err(VxlanInputError::Truncated);
                };
                if u.len() < udp::HEADER_LEN + HEADER_LEN + eth::HEADER_LEN {
                    break 'check Err(VxlanInputError::Truncated);
                }
                if be16(u, 4) as usize != u.len() {
                    break 'check Err(VxlanInputError::BadUdpLength);
                }
                let v = &u[udp::HEADER_LEN..udp::HEADER_LEN + HEADER_LEN];
                let vni = be32(v, 4) >> 8;
                let t = match self.find(dst, src, be16(u, 2), vni) {
                    Ok(t) => t,
                    Err(reason) => break 'check Err(reason),
                };
                if v[0] != FLAGS_VNI {
                    break 'check Err(VxlanInputError::BadFlags);
                }
                // A zero checksum means none (RFC 768, RFC 7348 section 5).
                if be16(u, udp::CHECKSUM) != 0 && !udp_checksum_ok(src, dst, u) {
                    break 'check Err(VxlanInputError::BadUdpChecksum);
                }
                Ok((t, vni, src, dst))
            };
            nexts[i] = match outcome {
                Ok((t, vni, src, dst)) => {
                    let strip = l4 + udp::HEADER_LEN + HEADER_LEN;
                    meta.data_offset += strip as u16;
                    meta.length -= strip as u16;
                    meta.rx_port = self.tunnels[t].port;
                    meta.tun_id = vni;
                    meta.tun_src = src;
                    meta.tun_dst = dst;
                    meta.flags = (meta.flags & FLAG_TRACE) | FLAG_TUNNEL;
                    meta.l3_offset = 0;
                    meta.l4_offset = 0;
                    meta.vlan = 0;
                    meta.ethertype = 0;
                    if let Some(Some(s)) = self.stats.get(t) {
                        s.rx_packets.add(1);
                        s.rx_bytes.add(u64::from(meta.length));
                    }
                    Next::Ethernet.id()
                }
                Err(reason) => {
                    meta.error = base + reason.id();
                    Next::Drop.id()
                }
            };
            all_ethernet &= nexts[i] == Next::Ethernet.id();
        }
        if all_ethernet {
            Dispatch::AllTo(Next::Ethernet.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        if m.flags & FLAG_TUNNEL != 0 {
            format!(
                "vxlan {} -> {} vni {} to port {} ({} bytes inner)",
                Ipv4Addr::from(m.tun_src),
                Ipv4Addr::from(m.tun_dst),
                m.tun_id,
                m.rx_port,
                m.length
            )
        } else {
            crate::ip4::describe_ip4(pool, buffer)
        }
    }
}

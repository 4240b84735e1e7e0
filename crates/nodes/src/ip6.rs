//! IPv6 forwarding: the `ip6-input` node (header checks); `ip6-lookup` and `ip6-rewrite` are
//! the IPv6 instances of the generic nodes in `lookup` and `rewrite`. It reads shared tables
//! only; it never allocates or keeps per-packet state.

use crate::steer::PortSteer;
use crate::{icmp_request, names};
use graph::{Dispatch, Node, NodeContext};
use packet::headers::{be128, be16, ip6};
use packet::meta::FLAG_L2_MULTICAST;
use packet::transport_checks;
use packet::BufferPool;
use std::net::Ipv6Addr;
use std::sync::Arc;

/// ICMPv6 "packet too big".
pub const ICMP6_PACKET_TOO_BIG: u8 = 2;
/// ICMPv6 "time exceeded".
pub const ICMP6_TIME_EXCEEDED: u8 = 3;

#[inline(always)]
fn is_multicast(a: u128) -> bool {
    a >> 120 == 0xff
}

#[inline(always)]
fn is_link_local(a: u128) -> bool {
    a >> 118 == 0xfe80 >> 6
}

/// `::ffff:0:0/96`: an IPv4 address written as IPv6; never on the wire (RFC 4291 2.5.5.2).
#[inline(always)]
fn is_v4_mapped(a: u128) -> bool {
    a >> 32 == 0xffff
}

/// The scope field of a multicast address (RFC 4291 2.7).
#[inline(always)]
fn multicast_scope(a: u128) -> u8 {
    ((a >> 112) & 0xf) as u8
}

/// Why `ip6-input` refuses to forward a packet between `src` and `dst`, checked as Linux's `ip6_rcv_core` and RFC 4291 require of a packet that arrived on
/// a wire, plus what a router must not forward (link-local scope, multicast).
#[inline(always)]
fn address_error(src: u128, dst: u128) -> Option<Ip6InputError> {
    use Ip6InputError as E;
    const LOOPBACK: u128 = 1;
    // Both global unicast (2000::/3, RFC 4291 2.4), as nearly all forwarded traffic is: none of
    // the cases below can hold (they all lie in ::/8, fe80::/10 or ff00::/8).
    if src >> 125 == 1 && dst >> 125 == 1 {
        return None;
    }
    if is_multicast(src) {
        Some(E::MulticastSource) // RFC 4291 2.7
    } else if src == 0 {
        Some(E::UnspecifiedSource) // RFC 4291 2.5.2, never forwarded
    } else if src == LOOPBACK || dst == LOOPBACK {
        Some(E::LoopbackAddress) // RFC 4291 2.5.3, not from a wire
    } else if is_v4_mapped(src) || is_v4_mapped(dst) {
        Some(E::V4MappedAddress)
    } else if dst == 0 {
        Some(E::UnspecifiedDestination)
    } else if is_multicast(dst) {
        Some(match multicast_scope(dst) {
            0 => E::ReservedMulticastScope,  // RFC 4291 2.7, silently dropped
            1 => E::InterfaceLocalMulticast, // loopback only
            _ => E::MulticastDestination,    // not forwarded by this router
        })
    } else if is_link_local(src) || is_link_local(dst) {
        Some(E::LinkLocal)
    } else {
        None
    }
}

/// The `ip6-input` node.
#[derive(Default)]
pub struct Ip6Input {
    nd: bool,
    /// The `ip6-unicast` arc, when it has features.
    arc: Option<crate::feature_arc::ArcStart>,
    /// A node the ports of a `PortSteer` hand their checked packets to instead of the lookup.
    steer: Option<(&'static str, Arc<PortSteer>)>,
}

impl Ip6Input {
    /// The node; Neighbor Solicitations and Advertisements are checked like any packet (and,
    /// being multicast or link-local, dropped) unless `with_nd` is called.
    pub fn new() -> Ip6Input {
        Ip6Input::default()
    }

    /// Hand ICMPv6 Neighbor Solicitations and Advertisements to `ip6-nd` before the
    /// multicast, link-local and source checks (they use all three).
    pub fn with_nd(mut self) -> Ip6Input {
        self.nd = true;
        self
    }

    /// Hand the checked packets of the ports `ports` steers to node `node` instead of
    /// `ip6-lookup` (with `next_scratch` 0), e.g. the NAT inside ports' replies to `lb`.
    pub fn with_steer(mut self, node: &'static str, ports: Arc<PortSteer>) -> Ip6Input {
        self.steer = Some((node, ports));
        self
    }

    /// Begin the `ip6-unicast` feature arc of `arcs`: checked packets visit the features
    /// enabled for their receive port (in `config`) before `ip6-lookup`. Call after `with_nd`.
    pub fn with_arc(
        mut self,
        arcs: &graph::arc::Arcs,
        config: live::Reader<graph::arc::ArcConfig>,
    ) -> Ip6Input {
        let base = if self.nd {
            Ip6InputNext::COUNT
        } else {
            Ip6InputNext::Nd.id()
        };
        self.arc = crate::feature_arc::ArcStart::new(
            arcs,
            names::ARC_IP6_UNICAST,
            config,
            base,
            Ip6InputNext::Lookup.id(),
        );
        self
    }
}

/// ICMPv6 Neighbor Solicitation and Advertisement types.
const ND_TYPES: [u8; 2] = [135, 136];

graph::node_indices! {
    /// `ip6-input`'s next nodes (`Nd` only with `with_nd`).
    enum Ip6InputNext {
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `IP6_LOOKUP`.
        Lookup = names::IP6_LOOKUP,
        /// To `IP6_ICMP_ERROR`.
        Icmp = names::IP6_ICMP_ERROR,
        /// To `IP6_ND`.
        Nd = crate::neighbour::IP6_ND,
    }
}

graph::node_indices! {
    /// `ip6-input` drop reasons.
    pub enum Ip6InputError {
        /// Counted as `too-short`.
        TooShort = "too-short",
        /// Counted as `bad-version`.
        BadVersion = "bad-version",
        /// Counted as `bad-length`.
        BadLength = "bad-length",
        /// Counted as `multicast-source`.
        MulticastSource = "multicast-source",
        /// Counted as `multicast-destination`.
        MulticastDestination = "multicast-destination",
        /// Counted as `link-local`.
        LinkLocal = "link-local",
        /// Counted as `l2-multicast`.
        L2Multicast = "l2-multicast",
        /// Counted as `unspecified-source`.
        UnspecifiedSource = "unspecified-source",
        /// Counted as `loopback-address`.
        LoopbackAddress = "loopback-address",
        /// Counted as `v4-mapped-address`.
        V4MappedAddress = "v4-mapped-address",
        /// Counted as `unspecified-destination`.
        UnspecifiedDestination = "unspecified-destination",
        /// Counted as `reserved-multicast-scope`.
        ReservedMulticastScope = "reserved-multicast-scope",
        /// Counted as `interface-local-multicast`.
        InterfaceLocalMulticast = "interface-local-multicast",
        /// Counted as `bad-udp-length` (these are `packet::transport_checks`'s names).
        BadUdpLength = "bad-udp-length",
        /// Counted as `icmp-too-short`.
        IcmpTooShort = "icmp-too-short",
        /// Counted as `fragment-too-long`.
        FragmentTooLong = "fragment-too-long",
        /// Counted as `bad-extension-headers`.
        BadExtensionHeaders = "bad-extension-headers",
        /// Counted as `hop-by-hop-not-first`.
        HopByHopNotFirst = "hop-by-hop-not-first",
        /// Counted as `zero-payload-length`.
        ZeroPayloadLength = "zero-payload-length",
    }
}

/// `ip6-input` drop reasons, by index.
pub const INPUT_ERRORS: &[&str] = Ip6InputError::NAMES;

impl Node for Ip6Input {
    fn name(&self) -> &str {
        names::IP6_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v = Ip6InputNext::names();
        if !self.nd {
            v.truncate(Ip6InputNext::Nd.id() as usize);
        }
        if let Some(a) = &self.arc {
            v.extend_from_slice(a.next_nodes());
        }
        if let Some((node, _)) = &self.steer {
            v.push(node.to_string());
        }
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        Ip6InputError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let base = cx.error_base;
        let arc = self
            .arc
            .as_ref()
            .and_then(|a| Some((a.cursor(), a.enabled_masks()?)));
        // The steering node follows `Nd` when there is one and the arc's nodes (see
        // `next_nodes`).
        let steer_next = Ip6InputNext::Nd.id()
            + u16::from(self.nd)
            + self.arc.as_ref().map_or(0, |a| a.node_count());
        // Read once per vector: whether any port steers, and which.
        let steer = self
            .steer
            .as_ref()
            .map(|(_, s)| &**s)
            .filter(|s| s.any(true));
        let mut all_lookup = true;
        for (i, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet_mut(b);
            let l3 = meta.l3_offset as usize;
            let mut fail = |reason: u16| {
                meta.error = base + reason;
                Ip6InputNext::Drop.id()
            };
            let next = 'check: {
                let Some(h) = data.get(l3..) else {
                    break 'check fail(Ip6InputError::TooShort.id());
                };
                if h.len() < ip6::HEADER_LEN {
                    break 'check fail(Ip6InputError::TooShort.id());
                }
                if h[0] >> 4 != 6 {
                    break 'check fail(Ip6InputError::BadVersion.id());
                }
                let total = be16(h, ip6::PAYLOAD_LEN) as usize + ip6::HEADER_LEN;
                if total > h.len() {
                    break 'check fail(Ip6InputError::BadLength.id());
                }
                if self.nd
                    && h[ip6::NEXT_HEADER] == packet::headers::proto::ICMP6
                    && total > ip6::HEADER_LEN
                    && ND_TYPES.contains(&h[ip6::HEADER_LEN])
                {
                    meta.l4_offset = (l3 + ip6::HEADER_LEN) as u16;
                    meta.length = (l3 + total) as u16;
                    break 'check Ip6InputNext::Nd.id();
                }
                let src = be128(h, ip6::SRC);
                let dst = be128(h, ip6::DST);
                if let Some(reason) = address_error(src, dst) {
                    break 'check fail(reason.id());
                }
                // A unicast packet received as a link-layer multicast is not forwarded.
                if meta.flags & FLAG_L2_MULTICAST != 0 {
                    break 'check fail(Ip6InputError::L2Multicast.id());
                }
                if let Some(p) = transport_checks::ip6(h, total) {
                    break 'check fail(
                        p.index_in(Ip6InputError::NAMES, Ip6InputError::BadLength.id()),
                    );
                }
                meta.l4_offset = (l3 + ip6::HEADER_LEN) as u16;
                // Bytes after the payload length are not part of the packet (see ip4-input).
                meta.length = (l3 + total) as u16;
                if h[ip6::HOP_LIMIT] <= 1 {
                    meta.next_scratch = icmp_request(ICMP6_TIME_EXCEEDED, 0, 0);
                    Ip6InputNext::Icmp.id()
                } else if let Some((cursor, masks)) = arc {
                    cursor.next(masks, usize::from(meta.rx_port))
                } else {
                    Ip6InputNext::Lookup.id()
                }
            };
            all_lookup &= next == Ip6InputNext::Lookup.id();
            nexts[i] = next;
        }
        if let Some(s) = steer {
            // A steered port's packets go to it before any feature of the arc (without `Nd`,
            // its index is the arc's first node).
            let nd = if self.nd {
                Ip6InputNext::Nd.id()
            } else {
                Ip6InputNext::Drop.id()
            };
            let kept = [Ip6InputNext::Drop.id(), Ip6InputNext::Icmp.id(), nd];
            all_lookup &= s.apply(cx.pool, frame, nexts, (&kept, steer_next), true) == 0;
        }
        if all_lookup {
            Dispatch::AllTo(Ip6InputNext::Lookup.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        describe_ip6(pool, buffer)
    }
}

/// One line about the IPv6 header of a buffer (for traces).
pub fn describe_ip6(pool: &BufferPool, buffer: u32) -> String {
    let m = pool.meta(buffer);
    let d = pool.data(buffer);
    match d.get(m.l3_offset as usize..) {
        Some(h) if h.len() >= ip6::HEADER_LEN => format!(
            "{} -> {} next-header {} hop-limit {} payload {}",
            Ipv6Addr::from(be128(h, ip6::SRC)),
            Ipv6Addr::from(be128(h, ip6::DST)),
            h[ip6::NEXT_HEADER],
            h[ip6::HOP_LIMIT],
            be16(h, ip6::PAYLOAD_LEN)
        ),
        _ => format!("not an IPv6 header ({} bytes)", d.len()),
    }
}

pub use crate::lookup::Ip6Lookup;

pub use crate::rewrite::Ip6Rewrite;

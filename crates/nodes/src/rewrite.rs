//! `ip4-rewrite` and `ip6-rewrite`: one node generic over the address family. It turns each
//! packet's adjacency (a next-hop table index, or a neighbour-table entry) into its Ethernet
//! header, checks the MTU (too big: an ICMP error request, or a drop), decrements the TTL / hop
//! limit of forwarded packets and sets the transmit port. Unusable neighbour entries go to
//! `ip4-arp` / `ip6-discover`. It reads shared tables only and keeps no per-packet state.

use crate::adjacency::{push_ethernet, NextHopTable};
use crate::lookup::{Ip4, Ip6};
use crate::neighbour::{self, find_adjacency, AdjacencyLookup, NeighbourHandle, Neighbours};
use crate::{icmp_request, names, FLAG_LOCAL_ORIGIN};
use graph::{Dispatch, Node, NodeContext};
use packet::checksum;
use packet::headers::{be16, eth, ip4, ip6, put16};
use packet::{BufferMeta, BufferPool};
use std::marker::PhantomData;

/// What the rewrite node needs to know about an address family.
pub trait RewriteFamily: Send + Sync + 'static {
    /// The node's name.
    const NODE: &'static str;
    /// The ICMP error node it asks for "too big" errors.
    const ICMP_ERROR: &'static str;
    /// The node resolving unusable neighbour entries.
    const RESOLVE: &'static str;
    /// Ethertype written into the Ethernet header.
    const ETHERTYPE: u16;
    /// Shortest L3 header.
    const MIN_HEADER_LEN: usize;
    /// IPv6 (which neighbour table adjacency ids name).
    const V6: bool;
    /// Drop reasons, by index (`RewriteError`; IPv4 has `mtu-exceeded` too).
    const ERRORS: &'static [&'static str];
    /// For a packet whose L3 header `h` exceeds `mtu`: Ok(ICMP error request) or Err(drop reason
    /// index); None when it fits.
    fn over_mtu(h: &[u8], mtu: u16) -> Option<Result<u32, u16>>;
    /// Decrement the TTL / hop limit (and fix the checksum when the header has one).
    fn decrement_ttl(h: &mut [u8]);
    /// One line about the packet for traces.
    fn describe(pool: &BufferPool, buffer: u32) -> String;
}

graph::node_indices! {
    /// Drop reasons of the rewrite nodes.
    pub enum RewriteError {
        /// The adjacency id names no adjacency (or a neighbour entry that went away).
        BadAdjacency = "bad-adjacency",
        /// IPv4 only: too big for the link with DF clear (vecplane does not fragment).
        MtuExceeded = "mtu-exceeded",
    }
}

impl RewriteFamily for Ip4 {
    const NODE: &'static str = names::IP4_REWRITE;
    const ICMP_ERROR: &'static str = names::IP4_ICMP_ERROR;
    const RESOLVE: &'static str = neighbour::IP4_ARP;
    const ETHERTYPE: u16 = eth::TYPE_IPV4;
    const MIN_HEADER_LEN: usize = ip4::MIN_HEADER_LEN;
    const V6: bool = false;
    const ERRORS: &'static [&'static str] = RewriteError::NAMES;

    #[inline(always)]
    fn over_mtu(h: &[u8], mtu: u16) -> Option<Result<u32, u16>> {
        if be16(h, ip4::TOTAL_LEN) <= mtu {
            return None;
        }
        // DF set: "fragmentation needed"; otherwise dropped (vecplane does not fragment).
        Some(if be16(h, ip4::FRAG) & 0x4000 != 0 {
            Ok(icmp_request(crate::ip4::ICMP_UNREACHABLE, 4, mtu))
        } else {
            Err(RewriteError::MtuExceeded.id())
        })
    }

    #[inline(always)]
    fn decrement_ttl(h: &mut [u8]) {
        let ttl = h[ip4::TTL];
        let old = u16::from_be_bytes([ttl, h[ip4::PROTOCOL]]);
        h[ip4::TTL] = ttl.wrapping_sub(1);
        let new = u16::from_be_bytes([h[ip4::TTL], h[ip4::PROTOCOL]]);
        let c = checksum::update16(be16(h, ip4::CHECKSUM), old, new);
        put16(h, ip4::CHECKSUM, c);
    }

    fn describe(pool: &BufferPool, buffer: u32) -> String {
        crate::ip4::describe_ip4(pool, buffer)
    }
}

/// True when the segments of super-packet `meta` (frame `data`, L3 header at `l3`) would pass
/// `mtu`: L3 and TCP headers plus `gso_size` bytes of payload.
#[cold]
fn segment_over_mtu(meta: &BufferMeta, data: &[u8], l3: usize, mtu: u16) -> bool {
    let tcp = usize::from(meta.csum_start.wrapping_sub(meta.data_offset));
    let tcp_len = data.get(tcp + 12).map_or(60, |b| usize::from(b >> 4) * 4);
    tcp.saturating_sub(l3) + tcp_len + usize::from(meta.gso_size) > usize::from(mtu)
}

impl RewriteFamily for Ip6 {
    const NODE: &'static str = names::IP6_REWRITE;
    const ICMP_ERROR: &'static str = names::IP6_ICMP_ERROR;
    const RESOLVE: &'static str = neighbour::IP6_DISCOVER;
    const ETHERTYPE: u16 = eth::TYPE_IPV6;
    const MIN_HEADER_LEN: usize = ip6::HEADER_LEN;
    const V6: bool = true;
    // IPv6 never fragments and never drops for the MTU (ICMPv6 Packet Too Big instead).
    const ERRORS: &'static [&'static str] = &[RewriteError::NAMES[0]];

    #[inline(always)]
    fn over_mtu(h: &[u8], mtu: u16) -> Option<Result<u32, u16>> {
        let total = be16(h, ip6::PAYLOAD_LEN) as usize + ip6::HEADER_LEN;
        // IPv6 routers never fragment: always "packet too big".
        (total > mtu as usize).then(|| Ok(icmp_request(crate::ip6::ICMP6_PACKET_TOO_BIG, 0, mtu)))
    }

    #[inline(always)]
    fn decrement_ttl(h: &mut [u8]) {
        h[ip6::HOP_LIMIT] = h[ip6::HOP_LIMIT].wrapping_sub(1);
    }

    fn describe(pool: &BufferPool, buffer: u32) -> String {
        crate::ip6::describe_ip6(pool, buffer)
    }
}

/// The rewrite node of family `F`.
pub struct IpRewrite<F: RewriteFamily> {
    next_hops: live::Reader<NextHopTable>,
    neighbours: Option<NeighbourHandle>,
    family: PhantomData<F>,
}

/// `ip4-rewrite`.
pub type Ip4Rewrite = IpRewrite<Ip4>;
/// `ip6-rewrite`.
pub type Ip6Rewrite = IpRewrite<Ip6>;

impl<F: RewriteFamily> IpRewrite<F> {
    /// A rewrite node using adjacencies of the published `next_hops`.
    pub fn new(next_hops: live::Reader<NextHopTable>) -> IpRewrite<F> {
        IpRewrite {
            next_hops,
            neighbours: None,
            family: PhantomData,
        }
    }

    /// Also rewrite with neighbour-table adjacencies (ids with bit 31 set); unusable ones go to
    /// `ip4-arp` / `ip6-discover`.
    pub fn with_neighbours(mut self, neighbours: NeighbourHandle) -> IpRewrite<F> {
        self.neighbours = Some(neighbours);
        self
    }
}

/// Next nodes of both rewrite nodes, in `next_nodes` order (names by family; `Resolve` only with neighbours).
#[derive(Clone, Copy)]
#[repr(u16)]
enum Next {
    /// To `error-drop`.
    Drop,
    /// To `interface-output`.
    Output,
    /// To the family's ICMP error node.
    Icmp,
    /// To the family's resolver.
    Resolve,
}

impl Next {
    const fn id(self) -> u16 {
        self as u16
    }
}

/// Rewrite the packets of `frame`; true when all go to `interface-output`.
#[inline(always)]
fn rewrite<F: RewriteFamily>(
    next_hops: &NextHopTable,
    mut neighbours: Option<&mut Neighbours>,
    cx: &mut NodeContext<'_>,
    frame: &[u32],
    nexts: &mut [u16],
) -> bool {
    let now = cx.now_tsc;
    let mut all_out = true;
    for (i, &b) in frame.iter().enumerate() {
        let (meta, data) = cx.pool.packet_mut(b);
        let l3 = meta.l3_offset as usize;
        let next = 'rw: {
            let id = meta.next_scratch;
            let adj = match find_adjacency(next_hops, neighbours.as_deref_mut(), id, F::V6, now) {
                AdjacencyLookup::Found(a) => a,
                AdjacencyLookup::Resolve => break 'rw Next::Resolve.id(),
                AdjacencyLookup::Bad => {
                    meta.error = cx.error_base + RewriteError::BadAdjacency.id();
                    break 'rw Next::Drop.id();
                }
            };
            if l3 < eth::HEADER_LEN || data.len() < l3 + F::MIN_HEADER_LEN {
                meta.error = cx.error_base + RewriteError::BadAdjacency.id();
                break 'rw Next::Drop.id();
            }
            // A super-packet leaves as segments: their size is what the MTU bounds.
            let check_mtu = !meta.is_gso() || segment_over_mtu(meta, data, l3, adj.mtu);
            let (l2, h) = data.split_at_mut(l3);
            match check_mtu.then(|| F::over_mtu(h, adj.mtu)).flatten() {
                None => {}
                Some(Ok(request)) => {
                    meta.next_scratch = request;
                    break 'rw Next::Icmp.id();
                }
                Some(Err(reason)) => {
                    meta.error = cx.error_base + reason;
                    break 'rw Next::Drop.id();
                }
            }
            if meta.flags & FLAG_LOCAL_ORIGIN == 0 {
                F::decrement_ttl(h);
            }
            push_ethernet(meta, l2, l3, &adj, F::ETHERTYPE);
            Next::Output.id()
        };
        all_out &= next == Next::Output.id();
        nexts[i] = next;
    }
    all_out
}

impl<F: RewriteFamily> Node for IpRewrite<F> {
    fn name(&self) -> &str {
        F::NODE
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v: Vec<String> = [names::ERROR_DROP, names::INTERFACE_OUTPUT, F::ICMP_ERROR]
            .map(String::from)
            .to_vec();
        if self.neighbours.is_some() {
            v.push(F::RESOLVE.into());
        }
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        F::ERRORS.iter().map(|s| s.to_string()).collect()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let hops = self.next_hops.get();
        let all_out = match &self.neighbours {
            Some(h) => h.with(|n| rewrite::<F>(hops, Some(n), cx, frame, nexts)),
            None => rewrite::<F>(hops, None, cx, frame, nexts),
        };
        if all_out {
            Dispatch::AllTo(Next::Output.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("tx port {}: {}", m.tx_port, F::describe(pool, buffer))
    }
}

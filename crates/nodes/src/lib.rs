//! Protocol nodes of the vecplane graph: `ethernet-input`, `l2-xconnect`, `l2-bridge`,
//! `ip4-input`, `ip4-lookup`, `ip4-rewrite`, `ip4-icmp-error`, their IPv6 twins, the ARP/ND nodes
//! (`arp-input`, `ip6-nd`, `ip4-arp`, `ip6-discover`, `neighbour-tx`), the VXLAN tunnel nodes
//! (`vxlan-input`, a VXLAN port's `<port>-tx`), `interface-output`, `error-drop`, and the
//! control plane's way in (`inject-rx`, `flow-packet-out`). Each node
//! owns only its read-only tables (shared through `Arc`) and per-worker scratch; none keeps
//! global mutable state, allocates, locks or makes a syscall per packet.
#![deny(missing_docs)]

pub mod adjacency;
pub mod bridge;
pub mod drop;
pub mod ethernet;
pub mod feature_arc;
pub mod fixed_table;
pub mod flow_hash;
pub mod flow_switch;
pub mod icmp;
pub mod inject;
pub mod ip4;
pub mod ip6;
pub mod lb;
pub mod lookup;
pub mod neighbour;
#[cfg(test)]
mod node_route_tests;
pub mod offload;
#[cfg(test)]
mod offload_tests;
pub mod output;
pub mod port_event;
pub mod probe_reply;
pub mod rewrite;
pub mod steer;
pub mod vxlan;
pub mod xconnect;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

/// Node names, as other nodes refer to them.
pub mod names {
    /// Counts drops by reason and frees buffers.
    pub const ERROR_DROP: &str = "error-drop";
    /// Classifies frames by port mode and ethertype.
    pub const ETHERNET_INPUT: &str = "ethernet-input";
    /// Port-to-port forwarding.
    pub const L2_XCONNECT: &str = "l2-xconnect";
    /// IPv4 header checks.
    pub const IP4_INPUT: &str = "ip4-input";
    /// IPv4 FIB lookup.
    pub const IP4_LOOKUP: &str = "ip4-lookup";
    /// IPv4 TTL decrement and MAC rewrite.
    pub const IP4_REWRITE: &str = "ip4-rewrite";
    /// ICMPv4 error generation.
    pub const IP4_ICMP_ERROR: &str = "ip4-icmp-error";
    /// IPv6 header checks.
    pub const IP6_INPUT: &str = "ip6-input";
    /// IPv6 FIB lookup.
    pub const IP6_LOOKUP: &str = "ip6-lookup";
    /// IPv6 hop-limit decrement and MAC rewrite.
    pub const IP6_REWRITE: &str = "ip6-rewrite";
    /// ICMPv6 error generation.
    pub const IP6_ICMP_ERROR: &str = "ip6-icmp-error";
    /// Hands packets to the transmit node of `meta.tx_port`.
    pub const INTERFACE_OUTPUT: &str = "interface-output";
    /// The end of the output arc: `interface-output` again, without the arc (packets that
    /// visited output features reach their port through it).
    pub const INTERFACE_TX: &str = "interface-tx";
    /// The feature arc from `ip4-input` to `ip4-lookup` (place: the receive port).
    pub const ARC_IP4_UNICAST: &str = "ip4-unicast";
    /// The feature arc from `ip6-input` to `ip6-lookup` (place: the receive port).
    pub const ARC_IP6_UNICAST: &str = "ip6-unicast";
    /// The feature arc from `interface-output` to the port (place: the transmit port).
    pub const ARC_OUTPUT: &str = "output";
}

/// Metadata flag: the packet was originated by vecplane (an ICMP error), so rewrite does not
/// decrement its TTL.
pub const FLAG_LOCAL_ORIGIN: u16 = 1 << 8;

/// Metadata flag: the `lb` node handed the packet to a lookup (encapsulated for its server,
/// rewritten back from a NAT server, or passed on); should the lookup bring it back to `lb`
/// (a server inside a VIP's prefix), it is dropped instead of going round forever.
pub const FLAG_LB_DONE: u16 = 1 << 9;

/// `next_scratch` encoding for packets sent to an ICMP error node: type, code and an MTU.
#[inline(always)]
pub fn icmp_request(icmp_type: u8, code: u8, mtu: u16) -> u32 {
    (icmp_type as u32) << 24 | (code as u32) << 16 | mtu as u32
}

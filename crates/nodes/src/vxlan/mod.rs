//! VXLAN (RFC 7348) tunnel ports: `<port>-tx` (`VxlanEncap`, one per VXLAN port) prepends the
//! outer Ethernet/IPv4/UDP/VXLAN headers in the headroom and hands the packet to `ip4-lookup`;
//! `vxlan-input` (`VxlanInput`, one per worker) takes UDP packets addressed to vecplane from
//! `ip4-lookup`, checks them and hands the inner frame to `ethernet-input` as received on its
//! tunnel port. Both own only read-only tunnel tables and per-worker counters; they never copy a
//! frame, allocate, lock or make a syscall per packet.

mod encap;
mod input;
#[cfg(test)]
mod tests;

pub use encap::{EncapError, VxlanEncap, ENCAP_ERRORS};
pub use input::{VxlanInput, VxlanInputError, INPUT_ERRORS};

use packet::headers::{eth, ip4, udp};
use std::net::Ipv4Addr;

/// The decapsulation node.
pub const VXLAN_INPUT: &str = "vxlan-input";
/// The IANA port of VXLAN.
pub const DEFAULT_UDP_PORT: u16 = 4789;
/// Bytes of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// Bytes prepended to an inner frame: outer Ethernet, IPv4, UDP and VXLAN headers.
pub const OVERHEAD: usize = eth::HEADER_LEN + ip4::MIN_HEADER_LEN + udp::HEADER_LEN + HEADER_LEN;
/// Largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;
/// The VXLAN flags byte with the I flag (a valid VNI) and nothing else.
pub const FLAGS_VNI: u8 = 0x08;
/// First UDP source port used (RFC 7348 section 5: the dynamic/private range 49152..=65535).
pub const SOURCE_PORT_MIN: u16 = 49152;

/// Where a tunnel's VNI comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vni {
    /// Always this VNI (0..=`MAX_VNI`).
    Fixed(u32),
    /// The frame's tunnel id (`meta.tun_id` with `FLAG_TUNNEL`), chosen by a switch; on receive
    /// any VNI is accepted and kept in the metadata.
    Flow,
}

/// One VXLAN port as both nodes see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// The VXLAN port's id.
    pub port: u16,
    /// Outer source: one of vecplane's own addresses.
    pub local: Ipv4Addr,
    /// Outer destination: the tunnel's other end (decap accepts only packets from it).
    pub remote: Ipv4Addr,
    /// The VNI.
    pub vni: Vni,
    /// UDP destination port (decap: the port packets must be sent to).
    pub dst_port: u16,
    /// Compute the outer UDP checksum (otherwise 0, allowed over IPv4).
    pub udp_checksum: bool,
    /// Largest inner packet (frame minus its 14-byte Ethernet header) sent into the tunnel.
    pub mtu: u16,
}

/// The UDP source port for an inner flow hash (RFC 7348: 49152..=65535).
#[inline(always)]
pub fn source_port(hash: u32) -> u16 {
    SOURCE_PORT_MIN | ((hash ^ (hash >> 16)) as u16 & 0x3fff)
}

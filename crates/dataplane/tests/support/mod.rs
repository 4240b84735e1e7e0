//! What the data plane's integration tests share: memory ports.

use dataplane::{MemoryPortSpec, PortDriver, PortSpec};
use std::net::IpAddr;

/// Memory port `name` with MAC `mac`. With `gen` = (source, destinations, packets) it generates
/// that many 64-byte UDP frames to its own MAC, round robin over `flows` flows to the
/// destinations; without, it only receives.
pub fn memory_port(
    name: &str,
    mac: [u8; 6],
    flows: u32,
    gen: Option<(IpAddr, Vec<IpAddr>, u64)>,
) -> PortSpec {
    let (src_ip, destinations, limit) = match gen {
        Some((s, d, l)) => (s, d, Some(l)),
        None => (
            "198.18.0.1".parse().expect("ip"),
            vec!["198.18.0.2".parse().expect("ip")],
            None,
        ),
    };
    PortSpec {
        name: name.into(),
        mac,
        mtu: 1500,
        ip4: vec![],
        ip6: vec![],
        driver: PortDriver::Memory(MemoryPortSpec {
            frame_size: 64,
            flows,
            dst_mac: mac,
            src_mac: [2, 0, 0, 0, 0, 0xaa],
            vlan: None,
            src_ip,
            destinations,
            limit,
            generate: limit.is_some(),
        }),
    }
}

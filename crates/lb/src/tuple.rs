//! The flow identity the load balancer keys and hashes on (`FiveTuple`), and the stable,
//! unkeyed hash that picks a Maglev slot. The stable hash must give the same value on every
//! node and in every version (ECMP may move a flow between nodes), so it never takes a key,
//! a seed from the process or anything but the tuple's bytes.

use std::net::{IpAddr, Ipv6Addr};

/// Source and destination address, ports and IP protocol of a packet. IPv4 addresses are kept
/// IPv4-mapped (`::ffff:a.b.c.d`) so one type serves both families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct FiveTuple {
    /// Source address (IPv4-mapped for IPv4).
    pub src: [u8; 16],
    /// Destination address (IPv4-mapped for IPv4).
    pub dst: [u8; 16],
    /// Source port (host order; 0 when the protocol has none or the packet is a fragment).
    pub src_port: u16,
    /// Destination port (host order; 0 when the protocol has none or the packet is a fragment).
    pub dst_port: u16,
    /// IP protocol (6 TCP, 17 UDP, ...).
    pub protocol: u8,
    /// True for IPv6.
    pub ip6: bool,
}

impl FiveTuple {
    /// An IPv4 tuple.
    pub fn v4(src: [u8; 4], dst: [u8; 4], protocol: u8, src_port: u16, dst_port: u16) -> Self {
        FiveTuple {
            src: mapped(src),
            dst: mapped(dst),
            src_port,
            dst_port,
            protocol,
            ip6: false,
        }
    }

    /// An IPv6 tuple.
    pub fn v6(src: [u8; 16], dst: [u8; 16], protocol: u8, src_port: u16, dst_port: u16) -> Self {
        FiveTuple {
            src,
            dst,
            src_port,
            dst_port,
            protocol,
            ip6: true,
        }
    }

    /// From `std` addresses (both of one family; a mixed pair is taken as IPv6).
    pub fn new(src: IpAddr, dst: IpAddr, protocol: u8, src_port: u16, dst_port: u16) -> Self {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                FiveTuple::v4(s.octets(), d.octets(), protocol, src_port, dst_port)
            }
            _ => FiveTuple::v6(v6_octets(src), v6_octets(dst), protocol, src_port, dst_port),
        }
    }

    /// The source address.
    pub fn src_addr(&self) -> IpAddr {
        addr(&self.src, self.ip6)
    }

    /// The destination address.
    pub fn dst_addr(&self) -> IpAddr {
        addr(&self.dst, self.ip6)
    }

    /// The same flow seen from the other end (addresses and ports swapped).
    pub fn reversed(&self) -> FiveTuple {
        FiveTuple {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }
}

/// `::ffff:a.b.c.d`, made in one register (the standard library's conversion writes the 16
/// bytes one at a time, and the node reads them back as words: a store-forwarding stall).
#[inline(always)]
fn mapped(a: [u8; 4]) -> [u8; 16] {
    (0xffff_u128 << 32 | u128::from(u32::from_be_bytes(a))).to_be_bytes()
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => mapped(v4.octets()),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn addr(bytes: &[u8; 16], ip6: bool) -> IpAddr {
    let v6 = Ipv6Addr::from(*bytes);
    match (ip6, v6.to_ipv4_mapped()) {
        (false, Some(v4)) => IpAddr::V4(v4),
        _ => IpAddr::V6(v6),
    }
}

/// The stable hash of a flow for Maglev: the same on every node, process and version. With
/// `sticky` (a VIP's `src_ip_sticky`) only the addresses and protocol count, so every flow of
/// one client reaches the same server. Fixed constants, no key: a client can aim its flows at
/// one server this way, but not at one flow-table bucket (that table's hash is keyed).
#[inline]
pub fn stable_hash(t: &FiveTuple, sticky: bool) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let w = |b: &[u8; 16], i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(x)
    };
    let ports = if sticky {
        0
    } else {
        (t.src_port as u64) << 16 | t.dst_port as u64
    };
    let tail = ports | (t.protocol as u64) << 32;
    let mut h = mix(w(&t.src, 0) ^ K, w(&t.src, 8));
    h = mix(h ^ w(&t.dst, 0), w(&t.dst, 8) ^ K);
    h = mix(h, tail ^ K.rotate_left(17));
    (h ^ h >> 32) as u32
}

#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul((b ^ 0xa076_1d64_78bd_642f) as u128);
    (r as u64) ^ (r >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_round_trips_through_std_addresses() {
        let t = FiveTuple::v4([198, 18, 0, 1], [198, 18, 1, 1], 6, 40000, 80);
        assert_eq!(t.src_addr(), "198.18.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(t.dst_addr(), "198.18.1.1".parse::<IpAddr>().unwrap());
        let n = FiveTuple::new(t.src_addr(), t.dst_addr(), 6, 40000, 80);
        assert_eq!(n, t);
        assert_eq!(t.reversed().reversed(), t);
    }

    /// Every node and every version must compute exactly this value for the tuple below.
    const PINNED: u32 = 0x77e9_0a5c;

    #[test]
    fn stable_hash_is_fixed_and_sticky_ignores_ports() {
        let a = FiveTuple::v4([198, 18, 0, 1], [198, 18, 1, 1], 6, 40000, 80);
        let b = FiveTuple {
            src_port: 40001,
            ..a
        };
        assert_ne!(stable_hash(&a, false), stable_hash(&b, false));
        assert_eq!(stable_hash(&a, true), stable_hash(&b, true));
        // Pinned: every node and version must compute exactly this value.
        assert_eq!(
            stable_hash(&a, false),
            PINNED,
            "stable_hash changed: {:#x}",
            stable_hash(&a, false)
        );
    }
}

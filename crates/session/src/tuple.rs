//! The flow identity sessions are keyed on: `FiveTuple`, source and destination address and
//! port and the IP protocol, one type for IPv4 and IPv6. It only holds and converts values; it
//! never hashes (the table keys its own hash, the load balancer has its own stable hash).

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
/// bytes one at a time, and the nodes read them back as words: a store-forwarding stall).
#[inline(always)]
pub(crate) fn mapped(a: [u8; 4]) -> [u8; 16] {
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

    #[test]
    fn v6_round_trips_and_a_mixed_pair_is_ipv6() {
        let s: IpAddr = "2001:db8::1".parse().unwrap();
        let d: IpAddr = "2001:db8::2".parse().unwrap();
        let t = FiveTuple::new(s, d, 17, 5353, 53);
        assert!(t.ip6);
        assert_eq!((t.src_addr(), t.dst_addr()), (s, d));
        let v4: IpAddr = "198.18.0.1".parse().unwrap();
        let m = FiveTuple::new(v4, d, 17, 1, 2);
        assert!(m.ip6);
        assert_eq!(m.src, mapped([198, 18, 0, 1]));
    }
}

//! Flow keys and what one packet adds to its flow: the 5-tuple plus the receiving port, read
//! from IPv4/IPv6 headers (IPv6 extension headers walked, at most `MAX_EXTENSIONS`), the IP
//! length, and TCP flags. It only reads packet bytes — through checked slices, so a short or
//! malformed packet is `None`, never a panic — and never writes them.

use packet::headers::{be16, ip4, ip6, proto, tcp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most IPv6 extension headers walked to find the transport header.
pub const MAX_EXTENSIONS: usize = 4;

/// A flow key a `FlowTable` holds: compared whole, hashed with a per-table seed.
pub trait FlowKey: Copy + Default + PartialEq + Send + 'static {
    /// The key's hash under `seed` (random per table, so buckets cannot be aimed at).
    fn hash(&self, seed: &[u64; 2]) -> u64;
    /// Its fields: (source, destination, source port, destination port, protocol, receiving
    /// port).
    fn fields(&self) -> (IpAddr, IpAddr, u16, u16, u8, u16);
}

#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    let m = (a as u128).wrapping_mul(b as u128);
    (m as u64) ^ ((m >> 64) as u64)
}

/// The last round of every hash: spreads what one multiply left uneven (a key whose words
/// mostly agree, as a sweep of addresses does) over all 64 bits.
#[inline(always)]
fn finish(h: u64, seed: u64) -> u64 {
    mix(h ^ seed, 0x9e37_79b9_7f4a_7c15)
}

/// Pack (ports, protocol, receiving port) into one word.
#[inline(always)]
fn rest(src_port: u16, dst_port: u16, protocol: u8, in_port: u16) -> u64 {
    (u64::from(src_port) << 48)
        | (u64::from(dst_port) << 32)
        | (u64::from(protocol) << 16)
        | u64::from(in_port)
}

fn unpack(rest: u64) -> (u16, u16, u8, u16) {
    (
        (rest >> 48) as u16,
        (rest >> 32) as u16,
        (rest >> 16) as u8,
        rest as u16,
    )
}

/// An IPv4 flow: addresses in one word, ports, protocol and receiving port in the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key4 {
    addrs: u64,
    rest: u64,
}

impl Key4 {
    /// The key of a flow.
    pub fn new(
        src: u32,
        dst: u32,
        src_port: u16,
        dst_port: u16,
        protocol: u8,
        in_port: u16,
    ) -> Key4 {
        Key4 {
            addrs: (u64::from(src) << 32) | u64::from(dst),
            rest: rest(src_port, dst_port, protocol, in_port),
        }
    }
}

impl FlowKey for Key4 {
    #[inline(always)]
    fn hash(&self, seed: &[u64; 2]) -> u64 {
        finish(mix(self.addrs ^ seed[0], self.rest ^ seed[1]), seed[1])
    }

    fn fields(&self) -> (IpAddr, IpAddr, u16, u16, u8, u16) {
        let (sp, dp, p, port) = unpack(self.rest);
        (
            IpAddr::V4(Ipv4Addr::from((self.addrs >> 32) as u32)),
            IpAddr::V4(Ipv4Addr::from(self.addrs as u32)),
            sp,
            dp,
            p,
            port,
        )
    }
}

/// An IPv6 flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key6 {
    src: u128,
    dst: u128,
    rest: u64,
}

impl Key6 {
    /// The key of a flow.
    pub fn new(
        src: u128,
        dst: u128,
        src_port: u16,
        dst_port: u16,
        protocol: u8,
        in_port: u16,
    ) -> Key6 {
        Key6 {
            src,
            dst,
            rest: rest(src_port, dst_port, protocol, in_port),
        }
    }
}

impl FlowKey for Key6 {
    #[inline(always)]
    fn hash(&self, seed: &[u64; 2]) -> u64 {
        let a = mix(self.src as u64 ^ seed[0], (self.src >> 64) as u64 ^ seed[1]);
        let b = mix(self.dst as u64 ^ a, (self.dst >> 64) as u64 ^ seed[0]);
        finish(mix(b ^ self.rest, a ^ seed[1]), seed[0])
    }

    fn fields(&self) -> (IpAddr, IpAddr, u16, u16, u8, u16) {
        let (sp, dp, p, port) = unpack(self.rest);
        (
            IpAddr::V6(Ipv6Addr::from(self.src)),
            IpAddr::V6(Ipv6Addr::from(self.dst)),
            sp,
            dp,
            p,
            port,
        )
    }
}

/// What one packet adds to its flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// IP bytes (total length, headers included).
    pub octets: u16,
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
}

/// SCTP's protocol number.
const SCTP: u8 = 132;
/// UDP-Lite's protocol number.
const UDPLITE: u8 = 136;

/// The ports (source << 16 | destination) and TCP flags of the transport header at `data[at..]`
/// of `protocol`; zeros when it is absent or too short. ICMP's destination "port" is type x 256
/// + code, as NetFlow collectors expect.
#[inline(always)]
fn transport(protocol: u8, data: &[u8], at: usize) -> (u32, u8) {
    let word = |n: usize| data.get(at..at + n);
    match protocol {
        proto::TCP => match word(tcp::FLAGS + 1) {
            Some(t) => (u32::from_be_bytes([t[0], t[1], t[2], t[3]]), t[tcp::FLAGS]),
            None => (0, 0),
        },
        proto::UDP | SCTP | UDPLITE => match word(4) {
            Some(t) => (u32::from_be_bytes([t[0], t[1], t[2], t[3]]), 0),
            None => (0, 0),
        },
        proto::ICMP | proto::ICMP6 => match word(2) {
            Some(t) => (u32::from(u16::from_be_bytes([t[0], t[1]])), 0),
            None => (0, 0),
        },
        _ => (0, 0),
    }
}

/// The key and observation of the IPv4 packet whose header starts at `data[l3..]`, received on
/// `in_port`. Later fragments have no ports.
#[inline(always)]
pub fn parse_ip4(data: &[u8], l3: usize, in_port: u16) -> Option<(Key4, Observation)> {
    let h: &[u8; ip4::MIN_HEADER_LEN] = data.get(l3..l3 + ip4::MIN_HEADER_LEN)?.try_into().ok()?;
    if h[0] >> 4 != 4 {
        return None;
    }
    let protocol = h[ip4::PROTOCOL];
    let later_fragment = u16::from_be_bytes([h[6], h[7]]) & ip4::OFFSET_MASK != 0;
    let (ports, flags) = if later_fragment {
        (0, 0)
    } else {
        transport(protocol, data, l3 + usize::from(h[0] & 0x0f) * 4)
    };
    let addrs = u64::from_be_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]);
    Some((
        Key4 {
            addrs,
            rest: (u64::from(ports) << 32) | (u64::from(protocol) << 16) | u64::from(in_port),
        },
        Observation {
            octets: u16::from_be_bytes([h[2], h[3]]),
            tcp_flags: flags,
        },
    ))
}

/// The transport protocol and its header's offset from the IPv6 header, walking at most
/// `MAX_EXTENSIONS` extension headers; `None` for the offset when a fragment is not the first
/// or the chain runs past the packet or the limit.
fn ip6_transport(h: &[u8]) -> (u8, Option<usize>) {
    let mut next = h[ip6::NEXT_HEADER];
    let mut at = ip6::HEADER_LEN;
    for _ in 0..MAX_EXTENSIONS {
        let len = match next {
            0 | 43 | 60 => match h.get(at + 1) {
                Some(&l) => (usize::from(l) + 1) * 8,
                None => return (next, None),
            },
            44 => match h.get(at..at + 8) {
                Some(f) if be16(f, 2) >> 3 == 0 => 8,
                Some(f) => return (f[0], None),
                None => return (next, None),
            },
            51 => match h.get(at + 1) {
                Some(&l) => (usize::from(l) + 2) * 4,
                None => return (next, None),
            },
            _ => return (next, Some(at)),
        };
        match h.get(at) {
            Some(&n) => next = n,
            None => return (next, None),
        }
        at += len;
    }
    match next {
        0 | 43 | 44 | 51 | 60 => (next, None),
        _ => (next, Some(at)),
    }
}

/// The key and observation of the IPv6 packet whose header starts at `data[l3..]`.
#[inline(always)]
pub fn parse_ip6(data: &[u8], l3: usize, in_port: u16) -> Option<(Key6, Observation)> {
    let h = data.get(l3..)?;
    let fixed: &[u8; ip6::HEADER_LEN] = h.get(..ip6::HEADER_LEN)?.try_into().ok()?;
    if fixed[0] >> 4 != 6 {
        return None;
    }
    let (protocol, l4_at) = ip6_transport(h);
    let (ports, flags) = match l4_at {
        Some(at) => transport(protocol, h, at),
        None => (0, 0),
    };
    let mut src = [0u8; 16];
    src.copy_from_slice(&fixed[ip6::SRC..ip6::SRC + 16]);
    let mut dst = [0u8; 16];
    dst.copy_from_slice(&fixed[ip6::DST..ip6::DST + 16]);
    let octets = be16(fixed, ip6::PAYLOAD_LEN).saturating_add(ip6::HEADER_LEN as u16);
    Some((
        Key6 {
            src: u128::from_be_bytes(src),
            dst: u128::from_be_bytes(dst),
            rest: (u64::from(ports) << 32) | (u64::from(protocol) << 16) | u64::from(in_port),
        },
        Observation {
            octets,
            tcp_flags: flags,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip4_udp(frag: u16) -> Vec<u8> {
        let mut p = vec![0u8; 14];
        #[rustfmt::skip]
        p.extend_from_slice(&[
            0x45, 0, 0, 32, 0, 0, (frag >> 8) as u8, frag as u8, 64, 17, 0, 0,
            198, 18, 0, 1, 198, 19, 0, 2,
            0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, 1, 2, 3, 4,
        ]);
        p
    }

    #[test]
    fn ipv4_udp_key_and_length() {
        let p = ip4_udp(0);
        let (k, o) = parse_ip4(&p, 14, 3).expect("parses");
        assert_eq!(
            k.fields(),
            (
                "198.18.0.1".parse().expect("ip"),
                "198.19.0.2".parse().expect("ip"),
                12345,
                53,
                17,
                3
            )
        );
        assert_eq!(
            o,
            Observation {
                octets: 32,
                tcp_flags: 0
            }
        );
        // A later fragment: same addresses, no ports.
        let (k, _) = parse_ip4(&ip4_udp(0x0010), 14, 3).expect("parses");
        assert_eq!(k.fields().2, 0);
        assert_eq!(k.fields().3, 0);
    }

    #[test]
    fn short_or_foreign_packets_are_none_never_a_panic() {
        let p = ip4_udp(0);
        for cut in 0..p.len() {
            let r = parse_ip4(&p[..cut], 14, 0);
            if cut < 14 + 20 {
                assert!(r.is_none(), "cut {cut}");
            }
        }
        assert!(parse_ip4(&p, 200, 0).is_none());
        assert!(parse_ip6(&p, 14, 0).is_none(), "version 4 is not IPv6");
        for cut in 0..p.len() {
            let _ = parse_ip6(&p[..cut], 0, 0);
        }
    }

    fn ip6_tcp_after(ext: &[u8], first_next: u8) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        let payload = (ext.len() + 20) as u16;
        p.extend_from_slice(&payload.to_be_bytes());
        p.extend_from_slice(&[first_next, 64]);
        p.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().expect("ip").octets());
        p.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().expect("ip").octets());
        p.extend_from_slice(ext);
        let mut t = [0u8; 20];
        t[0..2].copy_from_slice(&443u16.to_be_bytes());
        t[2..4].copy_from_slice(&50000u16.to_be_bytes());
        t[13] = tcp::SYN | tcp::ACK;
        p.extend_from_slice(&t);
        p
    }

    #[test]
    fn ipv6_walks_extension_headers_to_tcp() {
        // Hop-by-hop (8 bytes) then destination options (16 bytes) then TCP.
        let mut ext = vec![60, 0, 0, 0, 0, 0, 0, 0];
        ext.extend_from_slice(&[6, 1]);
        ext.extend_from_slice(&[0; 14]);
        let p = ip6_tcp_after(&ext, 0);
        let (k, o) = parse_ip6(&p, 0, 1).expect("parses");
        let (_, _, sp, dp, pr, port) = k.fields();
        assert_eq!((sp, dp, pr, port), (443, 50000, 6, 1));
        assert_eq!(o.octets as usize, p.len());
        assert_eq!(o.tcp_flags, tcp::SYN | tcp::ACK);
    }

    #[test]
    fn ipv6_later_fragment_has_protocol_but_no_ports() {
        // Fragment header: next TCP, offset 8 (not first).
        let ext = [6, 0, 0, 8 << 3, 0, 0, 0, 1];
        let p = ip6_tcp_after(&ext, 44);
        let (k, _) = parse_ip6(&p, 0, 0).expect("parses");
        let (_, _, sp, dp, pr, _) = k.fields();
        assert_eq!((sp, dp, pr), (0, 0, 6));
        // The first fragment has them.
        let ext = [6, 0, 0, 0, 0, 0, 0, 1];
        let p = ip6_tcp_after(&ext, 44);
        let (k, _) = parse_ip6(&p, 0, 0).expect("parses");
        assert_eq!(k.fields().2, 443);
    }

    #[test]
    fn keys_differ_by_receiving_port_and_hash_by_seed() {
        let a = Key4::new(1, 2, 3, 4, 17, 0);
        let b = Key4::new(1, 2, 3, 4, 17, 1);
        assert_ne!(a, b);
        assert_ne!(a.hash(&[1, 2]), b.hash(&[1, 2]));
        assert_ne!(a.hash(&[1, 2]), a.hash(&[3, 4]));
        let c = Key6::new(1, 2, 3, 4, 6, 0);
        assert_ne!(c.hash(&[1, 2]), Key6::new(2, 1, 3, 4, 6, 0).hash(&[1, 2]));
    }
}

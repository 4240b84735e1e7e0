//! Header layouts (Ethernet, 802.1Q, IPv4, IPv6, UDP, TCP, ICMP) as offsets and constants, checked
//! views for cold paths, and a builder of test/benchmark frames. It only reads and writes bytes it
//! is given; it never allocates on the fast path (only `build_*` allocate, for templates).

use crate::checksum;
use std::net::IpAddr;

/// Ethernet II.
pub mod eth {
    /// Header length without tags.
    pub const HEADER_LEN: usize = 14;
    /// Length of one 802.1Q/802.1ad tag.
    pub const TAG_LEN: usize = 4;
    /// Offset of the destination MAC.
    pub const DST: usize = 0;
    /// Offset of the source MAC.
    pub const SRC: usize = 6;
    /// Offset of the ethertype (or TPID of the first tag).
    pub const TYPE: usize = 12;
    /// IPv4.
    pub const TYPE_IPV4: u16 = 0x0800;
    /// ARP.
    pub const TYPE_ARP: u16 = 0x0806;
    /// IPv6.
    pub const TYPE_IPV6: u16 = 0x86dd;
    /// 802.1Q customer VLAN tag.
    pub const TYPE_VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag.
    pub const TYPE_QINQ: u16 = 0x88a8;
    /// Smallest frame without FCS.
    pub const MIN_FRAME: usize = 60;
}

/// IPv4.
pub mod ip4 {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = 20;
    /// Largest header length (IHL 15).
    pub const MAX_HEADER_LEN: usize = 60;
    /// Offset of version and IHL.
    pub const VER_IHL: usize = 0;
    /// Offset of DSCP/ECN.
    pub const TOS: usize = 1;
    /// Offset of total length.
    pub const TOTAL_LEN: usize = 2;
    /// Offset of the identification.
    pub const ID: usize = 4;
    /// Offset of flags and fragment offset.
    pub const FRAG: usize = 6;
    /// Offset of TTL.
    pub const TTL: usize = 8;
    /// Offset of protocol.
    pub const PROTOCOL: usize = 9;
    /// Offset of header checksum.
    pub const CHECKSUM: usize = 10;
    /// Offset of source address.
    pub const SRC: usize = 12;
    /// Offset of destination address.
    pub const DST: usize = 16;
    /// "More fragments" flag in the FRAG field.
    pub const MORE_FRAGMENTS: u16 = 0x2000;
    /// Fragment offset mask in the FRAG field.
    pub const OFFSET_MASK: u16 = 0x1fff;
}

/// IPv6.
pub mod ip6 {
    /// Fixed header length.
    pub const HEADER_LEN: usize = 40;
    /// Offset of payload length.
    pub const PAYLOAD_LEN: usize = 4;
    /// Offset of next header.
    pub const NEXT_HEADER: usize = 6;
    /// Offset of hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Offset of source address.
    pub const SRC: usize = 8;
    /// Offset of destination address.
    pub const DST: usize = 24;
}

/// IP protocol numbers.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMP6: u8 = 58;
}

/// UDP.
pub mod udp {
    /// Header length.
    pub const HEADER_LEN: usize = 8;
    /// Offset of checksum.
    pub const CHECKSUM: usize = 6;
}

/// TCP.
pub mod tcp {
    /// Header length without options.
    pub const MIN_HEADER_LEN: usize = 20;
    /// Largest header length (data offset 15).
    pub const MAX_HEADER_LEN: usize = 60;
    /// Offset of the sequence number.
    pub const SEQ: usize = 4;
    /// Offset of the data offset (high nibble, in 32-bit words).
    pub const DATA_OFFSET: usize = 12;
    /// Offset of the flags byte (CWR .. FIN).
    pub const FLAGS: usize = 13;
    /// Offset of checksum.
    pub const CHECKSUM: usize = 16;
    /// FIN flag.
    pub const FIN: u8 = 0x01;
    /// SYN flag.
    pub const SYN: u8 = 0x02;
    /// RST flag.
    pub const RST: u8 = 0x04;
    /// PSH flag.
    pub const PSH: u8 = 0x08;
    /// ACK flag.
    pub const ACK: u8 = 0x10;
    /// URG flag.
    pub const URG: u8 = 0x20;
    /// ECE flag (ECN echo).
    pub const ECE: u8 = 0x40;
    /// CWR flag (congestion window reduced).
    pub const CWR: u8 = 0x80;
}

/// Read a big-endian u16 at `at` (caller checked the length).
#[inline(always)]
pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Read a big-endian u32 at `at` (caller checked the length).
#[inline(always)]
pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Write a big-endian u16 at `at`.
#[inline(always)]
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Read a big-endian u128 at `at` (an IPv6 address).
#[inline(always)]
pub fn be128(b: &[u8], at: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    u128::from_be_bytes(a)
}

/// A MAC address.
pub type Mac = [u8; 6];

/// Format a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(m: &Mac) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Parse `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<Mac> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for o in out.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// What a frame to build carries.
#[derive(Clone, Debug)]
pub struct UdpFrameSpec {
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source MAC.
    pub src_mac: Mac,
    /// 802.1Q VLAN id, if tagged.
    pub vlan: Option<u16>,
    /// Source address (v4 or v6; must match `dst_ip`'s family).
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// TTL or hop limit.
    pub ttl: u8,
    /// Frame size on the wire including the 4-byte FCS (so 64 builds 60 bytes); at least the
    /// headers' size, padded with payload bytes.
    pub frame_size: usize,
}

impl Default for UdpFrameSpec {
    fn default() -> Self {
        UdpFrameSpec {
            dst_mac: [0x02, 0, 0, 0, 0, 1],
            src_mac: [0x02, 0, 0, 0, 0, 2],
            vlan: None,
            src_ip: IpAddr::V4([198, 18, 0, 1].into()),
            dst_ip: IpAddr::V4([198, 19, 0, 1].into()),
            src_port: 1024,
            dst_port: 1024,
            ttl: 64,
            frame_size: 64,
        }
    }
}

/// Build a UDP frame with valid IP and UDP checksums (Ethernet FCS not included).
pub fn build_udp_frame(spec: &UdpFrameSpec) -> Vec<u8> {
    let l2 = eth::HEADER_LEN + if spec.vlan.is_some() { eth::TAG_LEN } else { 0 };
    let l3 = match spec.dst_ip {
        IpAddr::V4(_) => ip4::MIN_HEADER_LEN,
        IpAddr::V6(_) => ip6::HEADER_LEN,
    };
    let headers = l2 + l3 + udp::HEADER_LEN;
    let len = spec
        .frame_size
        .saturating_sub(4)
        .max(headers)
        .max(eth::MIN_FRAME);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    let mut at = 12;
    if let Some(v) = spec.vlan {
        put16(&mut f, at, eth::TYPE_VLAN);
        put16(&mut f, at + 2, v & 0x0fff);
        at += 4;
    }
    let udp_len = (len - l2 - l3) as u16;
    for (i, b) in f[l2 + l3 + udp::HEADER_LEN..].iter_mut().enumerate() {
        *b = i as u8;
    }
    put16(&mut f, l2 + l3, spec.src_port);
    put16(&mut f, l2 + l3 + 2, spec.dst_port);
    put16(&mut f, l2 + l3 + 4, udp_len);
    let pseudo = match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put16(&mut f, at, eth::TYPE_IPV4);
            let h = &mut f[l2..l2 + l3];
            h[0] = 0x45;
            put16(h, ip4::TOTAL_LEN, (l3 as u16) + udp_len);
            h[ip4::TTL] = spec.ttl;
            h[ip4::PROTOCOL] = proto::UDP;
            h[ip4::SRC..ip4::SRC + 4].copy_from_slice(&s.octets());
            h[ip4::DST..ip4::DST + 4].copy_from_slice(&d.octets());
            let c = checksum::checksum(h);
            put16(h, ip4::CHECKSUM, c);
            checksum::pseudo_header_v4(s.octets(), d.octets(), proto::UDP, udp_len)
        }
        (s, d) => {
            let (s, d) = (to_v6(s), to_v6(d));
            put16(&mut f, at, eth::TYPE_IPV6);
            let h = &mut f[l2..l2 + l3];
            h[0] = 0x60;
            put16(h, ip6::PAYLOAD_LEN, udp_len);
            h[ip6::NEXT_HEADER] = proto::UDP;
            h[ip6::HOP_LIMIT] = spec.ttl;
            h[ip6::SRC..ip6::SRC + 16].copy_from_slice(&s);
            h[ip6::DST..ip6::DST + 16].copy_from_slice(&d);
            checksum::pseudo_header_v6(s, d, proto::UDP, udp_len as u32)
        }
    };
    let u = l2 + l3;
    let mut c = !checksum::fold(checksum::sum(pseudo, &f[u..u + udp_len as usize]));
    if c == 0 {
        c = 0xffff;
    }
    put16(&mut f, u + udp::CHECKSUM, c);
    f
}

/// What a TCP frame to build carries: a test or benchmark template, or a super-packet as a guest
/// with TSO sends it (any payload length, IP lengths matching the frame).
#[derive(Clone, Debug)]
pub struct TcpFrameSpec {
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source MAC.
    pub src_mac: Mac,
    /// VLAN tags, outermost first, as (TPID, TCI); at most two are read back by the data plane.
    pub vlans: Vec<(u16, u16)>,
    /// Source address (v4 or v6; must match `dst_ip`'s family).
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// IPv4 identification (unused for IPv6).
    pub ip_id: u16,
    /// IPv4 "don't fragment" (unused for IPv6).
    pub dont_fragment: bool,
    /// DSCP/ECN byte (IPv4 TOS, IPv6 traffic class).
    pub tos: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 options (padded with zeros to a multiple of 4 bytes, at most 40; unused for IPv6).
    pub ip_options: Vec<u8>,
    /// TCP source port.
    pub src_port: u16,
    /// TCP destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Flags byte (`tcp::FIN` ..).
    pub flags: u8,
    /// Receive window.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// TCP options (padded with zeros to a multiple of 4 bytes, at most 40).
    pub tcp_options: Vec<u8>,
    /// The TCP payload.
    pub payload: Vec<u8>,
    /// Leave the TCP checksum to an offload, as a guest does: the field holds the folded
    /// pseudo-header sum (virtio-net `NEEDS_CSUM`) instead of the checksum.
    pub partial_checksum: bool,
}

impl Default for TcpFrameSpec {
    fn default() -> Self {
        TcpFrameSpec {
            dst_mac: [0x02, 0, 0, 0, 0, 1],
            src_mac: [0x02, 0, 0, 0, 0, 2],
            vlans: Vec::new(),
            src_ip: IpAddr::V4([198, 18, 0, 1].into()),
            dst_ip: IpAddr::V4([198, 19, 0, 1].into()),
            ip_id: 1,
            dont_fragment: true,
            tos: 0,
            ttl: 64,
            ip_options: Vec::new(),
            src_port: 40000,
            dst_port: 5201,
            seq: 1,
            ack: 1,
            flags: tcp::ACK,
            window: 512,
            urgent: 0,
            tcp_options: Vec::new(),
            payload: Vec::new(),
            partial_checksum: false,
        }
    }
}

/// Build a TCP frame with a valid IPv4 header checksum and a full (or, with
/// `partial_checksum`, partial) TCP checksum. No Ethernet padding and no FCS.
pub fn build_tcp_frame(spec: &TcpFrameSpec) -> Vec<u8> {
    let pad4 = |o: &[u8]| {
        let mut v = o[..o.len().min(40)].to_vec();
        v.resize(v.len().div_ceil(4) * 4, 0);
        v
    };
    let ip_options = pad4(&spec.ip_options);
    let tcp_options = pad4(&spec.tcp_options);
    let v4 = matches!(spec.dst_ip, IpAddr::V4(_));
    let l3 = eth::HEADER_LEN + eth::TAG_LEN * spec.vlans.len();
    let l4 = l3
        + if v4 {
            ip4::MIN_HEADER_LEN + ip_options.len()
        } else {
            ip6::HEADER_LEN
        };
    let data = l4 + tcp::MIN_HEADER_LEN + tcp_options.len();
    let mut f = vec![0u8; data + spec.payload.len()];
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    let mut at = eth::TYPE;
    for &(tpid, tci) in &spec.vlans {
        put16(&mut f, at, tpid);
        put16(&mut f, at + 2, tci);
        at += eth::TAG_LEN;
    }
    let tcp_len = (f.len() - l4) as u16;
    let pseudo = match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put16(&mut f, at, eth::TYPE_IPV4);
            let h = &mut f[l3..l4];
            h[0] = 0x40 | (h.len() / 4) as u8;
            h[ip4::TOS] = spec.tos;
            put16(h, ip4::TOTAL_LEN, h.len() as u16 + tcp_len);
            put16(h, ip4::ID, spec.ip_id);
            put16(h, ip4::FRAG, if spec.dont_fragment { 0x4000 } else { 0 });
            h[ip4::TTL] = spec.ttl;
            h[ip4::PROTOCOL] = proto::TCP;
            h[ip4::SRC..ip4::SRC + 4].copy_from_slice(&s.octets());
            h[ip4::DST..ip4::DST + 4].copy_from_slice(&d.octets());
            h[ip4::MIN_HEADER_LEN..].copy_from_slice(&ip_options);
            let c = checksum::checksum(h);
            put16(h, ip4::CHECKSUM, c);
            checksum::pseudo_header_v4(s.octets(), d.octets(), proto::TCP, tcp_len)
        }
        (s, d) => {
            let (s, d) = (to_v6(s), to_v6(d));
            put16(&mut f, at, eth::TYPE_IPV6);
            let h = &mut f[l3..l4];
            h[0] = 0x60 | spec.tos >> 4;
            h[1] = spec.tos << 4;
            put16(h, ip6::PAYLOAD_LEN, tcp_len);
            h[ip6::NEXT_HEADER] = proto::TCP;
            h[ip6::HOP_LIMIT] = spec.ttl;
            h[ip6::SRC..ip6::SRC + 16].copy_from_slice(&s);
            h[ip6::DST..ip6::DST + 16].copy_from_slice(&d);
            checksum::pseudo_header_v6(s, d, proto::TCP, u32::from(tcp_len))
        }
    };
    let t = &mut f[l4..];
    put16(t, 0, spec.src_port);
    put16(t, 2, spec.dst_port);
    t[tcp::SEQ..tcp::SEQ + 4].copy_from_slice(&spec.seq.to_be_bytes());
    t[8..12].copy_from_slice(&spec.ack.to_be_bytes());
    t[tcp::DATA_OFFSET] = (((tcp::MIN_HEADER_LEN + tcp_options.len()) / 4) as u8) << 4;
    t[tcp::FLAGS] = spec.flags;
    put16(t, 14, spec.window);
    put16(t, 18, spec.urgent);
    t[tcp::MIN_HEADER_LEN..tcp::MIN_HEADER_LEN + tcp_options.len()].copy_from_slice(&tcp_options);
    f[data..].copy_from_slice(&spec.payload);
    let c = if spec.partial_checksum {
        checksum::fold(pseudo)
    } else {
        !checksum::fold(checksum::sum(pseudo, &f[l4..]))
    };
    put16(&mut f, l4 + tcp::CHECKSUM, c);
    f
}

fn to_v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        IpAddr::V6(v) => v.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp4_frame_has_valid_checksums() {
        let f = build_udp_frame(&UdpFrameSpec::default());
        assert_eq!(f.len(), 60);
        assert_eq!(be16(&f, eth::TYPE), eth::TYPE_IPV4);
        assert_eq!(checksum::checksum(&f[14..34]), 0);
        let pseudo = checksum::pseudo_header_v4([198, 18, 0, 1], [198, 19, 0, 1], 17, 26);
        assert_eq!(!checksum::fold(checksum::sum(pseudo, &f[34..60])), 0);
    }

    #[test]
    fn udp6_vlan_frame_layout() {
        let spec = UdpFrameSpec {
            vlan: Some(10),
            src_ip: "2001:db8::1".parse().expect("addr"),
            dst_ip: "2001:db8:1::1".parse().expect("addr"),
            frame_size: 128,
            ..UdpFrameSpec::default()
        };
        let f = build_udp_frame(&spec);
        assert_eq!(f.len(), 124);
        assert_eq!(be16(&f, 12), eth::TYPE_VLAN);
        assert_eq!(be16(&f, 14), 10);
        assert_eq!(be16(&f, 16), eth::TYPE_IPV6);
        assert_eq!(be16(&f, 18 + ip6::PAYLOAD_LEN) as usize, 124 - 18 - 40);
    }

    #[test]
    fn mac_roundtrip() {
        let m = parse_mac("02:00:0a:ff:10:01").expect("mac");
        assert_eq!(format_mac(&m), "02:00:0a:ff:10:01");
        assert!(parse_mac("02:00:0a:ff:10").is_none());
        assert!(parse_mac("02:00:0a:ff:10:01:02").is_none());
        assert!(parse_mac("zz:00:0a:ff:10:01").is_none());
    }
}

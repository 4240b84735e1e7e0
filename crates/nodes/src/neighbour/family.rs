//! The two address families (`Family` for `u32` / `u128`): hashing, formatting, the request each
//! sends (ARP request, Neighbor Solicitation) and ND message layout. Pure functions of bytes.

use super::*;

/// An address family of the neighbour tables: `u32` (IPv4, ARP) or `u128` (IPv6, ND).
pub(super) trait Family: Copy + Eq + Default + fmt::Debug + Send + 'static {
    /// Where released packets go.
    const REWRITE: u16;
    /// IPv6?
    const V6: bool;
    /// The address widened to 128 bits (for news between workers).
    fn wide(self) -> u128;
    /// Hash of (port, address).
    fn hash(self, port: u16) -> u64;
    /// As an `IpAddr`.
    fn ip(self) -> IpAddr;
    /// The destination address of the IP packet at `l3`, if it is there.
    fn destination(data: &[u8], l3: usize) -> Option<Self>;
    /// The address `port` sends requests for `target` from.
    fn source(port: &PortInfo, target: Self) -> Option<Self>;
    /// Write a request for `target` (to `unicast`, or broadcast/multicast) into `out`; its length.
    fn request(
        port: &PortInfo,
        source: Self,
        target: Self,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize;
    /// The table of this family.
    fn table(n: &mut Neighbours) -> (&mut Table<Self>, &mut Core);
    /// Count one request sent.
    fn count_request(stats: &mut NeighbourStats);
}

#[inline(always)]
pub(super) fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    let x = (x ^ (x >> 32)).wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

impl Family for u32 {
    const REWRITE: u16 = NEXT_IP4_REWRITE;
    const V6: bool = false;

    fn wide(self) -> u128 {
        self as u128
    }

    #[inline(always)]
    fn hash(self, port: u16) -> u64 {
        mix(self as u64 | (port as u64) << 32)
    }

    fn ip(self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self))
    }

    #[inline]
    fn destination(data: &[u8], l3: usize) -> Option<u32> {
        let at = l3 + ip4::DST;
        data.get(at..at + 4).map(|s| be32(s, 0))
    }

    fn source(port: &PortInfo, target: u32) -> Option<u32> {
        port.ip4
            .iter()
            .find(|&&(a, m)| a & m == target & m)
            .or(port.ip4.first())
            .map(|&(a, _)| a)
    }

    fn request(
        port: &PortInfo,
        source: u32,
        target: u32,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize {
        let f = &mut out[..eth::MIN_FRAME];
        f.fill(0);
        f[0..6].copy_from_slice(&unicast.unwrap_or([0xff; 6]));
        f[6..12].copy_from_slice(&port.mac);
        put16(f, eth::TYPE, eth::TYPE_ARP);
        let a = &mut f[eth::HEADER_LEN..eth::HEADER_LEN + ARP_LEN];
        put16(a, 0, ARP_HTYPE_ETHERNET);
        put16(a, 2, eth::TYPE_IPV4);
        a[4] = 6;
        a[5] = 4;
        put16(a, 6, ARP_OP_REQUEST);
        a[8..14].copy_from_slice(&port.mac);
        a[14..18].copy_from_slice(&source.to_be_bytes());
        // Target hardware address stays zero (RFC 826; RFC 1122 unicast polls alike).
        a[24..28].copy_from_slice(&target.to_be_bytes());
        eth::MIN_FRAME
    }

    fn table(n: &mut Neighbours) -> (&mut Table<u32>, &mut Core) {
        (&mut n.v4, &mut n.core)
    }

    fn count_request(stats: &mut NeighbourStats) {
        stats.arp_requests_sent += 1;
    }
}

impl Family for u128 {
    const REWRITE: u16 = NEXT_IP6_REWRITE;
    const V6: bool = true;

    fn wide(self) -> u128 {
        self
    }

    #[inline(always)]
    fn hash(self, port: u16) -> u64 {
        mix((self as u64) ^ ((self >> 64) as u64).rotate_left(23) ^ (port as u64) << 48)
    }

    fn ip(self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self))
    }

    #[inline]
    fn destination(data: &[u8], l3: usize) -> Option<u128> {
        let at = l3 + ip6::DST;
        data.get(at..at + 16).map(|s| be128(s, 0))
    }

    fn source(port: &PortInfo, target: u128) -> Option<u128> {
        port.ip6
            .iter()
            .find(|&&(a, m)| a & m == target & m)
            .or_else(|| port.ip6.iter().find(|&&(a, _)| !is_link_local6(a)))
            .map(|&(a, _)| a)
    }

    fn request(
        port: &PortInfo,
        source: u128,
        target: u128,
        unicast: Option<Mac>,
        out: &mut [u8],
    ) -> usize {
        let dst = match unicast {
            Some(_) => target,
            None => solicited_node(target),
        };
        let len = eth::HEADER_LEN + ip6::HEADER_LEN + ND_LEN;
        let f = &mut out[..len];
        f.fill(0);
        f[0..6].copy_from_slice(&unicast.unwrap_or_else(|| multicast_mac6(dst)));
        f[6..12].copy_from_slice(&port.mac);
        put16(f, eth::TYPE, eth::TYPE_IPV6);
        write_nd(
            &mut f[eth::HEADER_LEN..],
            NdMessage {
                kind: ND_NS,
                flags: 0,
                src: source,
                dst,
                target,
                option: ND_OPT_SLLA,
                mac: port.mac,
            },
        );
        len
    }

    fn table(n: &mut Neighbours) -> (&mut Table<u128>, &mut Core) {
        (&mut n.v6, &mut n.core)
    }

    fn count_request(stats: &mut NeighbourStats) {
        stats.ns_sent += 1;
    }
}

#[inline(always)]
pub(super) fn is_multicast6(a: u128) -> bool {
    a >> 120 == 0xff
}

#[inline(always)]
pub(super) fn is_link_local6(a: u128) -> bool {
    a >> 118 == 0xfe80 >> 6
}

/// The solicited-node multicast address of `a` (ff02::1:ffXX:XXXX).
#[inline(always)]
pub fn solicited_node(a: u128) -> u128 {
    SOLICITED_PREFIX | (a & 0x00ff_ffff)
}

/// The Ethernet multicast MAC of an IPv6 multicast group (33:33 and its low 32 bits).
#[inline(always)]
pub fn multicast_mac6(group: u128) -> Mac {
    let g = (group as u32).to_be_bytes();
    [0x33, 0x33, g[0], g[1], g[2], g[3]]
}

/// An NS or NA with one link-layer address option.
pub(super) struct NdMessage {
    pub(super) kind: u8,
    pub(super) flags: u8,
    pub(super) src: u128,
    pub(super) dst: u128,
    pub(super) target: u128,
    pub(super) option: u8,
    pub(super) mac: Mac,
}

/// Write the IPv6 header and ICMPv6 NS/NA of `m` at the start of `h` (at least 72 bytes), with
/// hop limit 255 and the ICMPv6 checksum.
pub(super) fn write_nd(h: &mut [u8], m: NdMessage) {
    let h = &mut h[..ip6::HEADER_LEN + ND_LEN];
    h.fill(0);
    h[0] = 0x60;
    put16(h, ip6::PAYLOAD_LEN, ND_LEN as u16);
    h[ip6::NEXT_HEADER] = proto::ICMP6;
    h[ip6::HOP_LIMIT] = 255;
    h[ip6::SRC..ip6::SRC + 16].copy_from_slice(&m.src.to_be_bytes());
    h[ip6::DST..ip6::DST + 16].copy_from_slice(&m.dst.to_be_bytes());
    let icmp = &mut h[ip6::HEADER_LEN..];
    icmp[0] = m.kind;
    icmp[4] = m.flags;
    icmp[8..24].copy_from_slice(&m.target.to_be_bytes());
    icmp[24] = m.option;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&m.mac);
    let pseudo = checksum::pseudo_header_v6(
        m.src.to_be_bytes(),
        m.dst.to_be_bytes(),
        proto::ICMP6,
        ND_LEN as u32,
    );
    let c = !checksum::fold(checksum::sum(pseudo, icmp));
    put16(icmp, 2, c);
}

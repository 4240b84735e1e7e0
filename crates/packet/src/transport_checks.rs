//! The transport checks every IP path applies after the IP header's own (ip4-input and
//! ip6-input run them, so the router and the load balancer, whose VIP traffic comes through
//! them, refuse the same packets): a UDP length that disagrees with the datagram, an ICMP or
//! ICMPv6 message shorter than its 8-byte header, a fragment that ends past 65,535 bytes (the
//! "ping of death"), IPv6 extension headers that run past the packet or exceed
//! `MAX_EXTENSION_HEADERS`, a hop-by-hop header anywhere but first (RFC 8200 section 4.1),
//! and an IPv6 payload length of 0 with a header after the fixed one (a jumbogram, RFC 2675,
//! which vecplane does not carry). What the checks return is a reason to drop and count;
//! they read bytes only, never write, allocate or panic.
//!
//! A UDP length may be shorter than the IP payload (the rest is padding, as Linux accepts) but
//! not longer, and not below 8; only whole datagrams are held to it (a first fragment's UDP
//! length counts the reassembled datagram). Later fragments carry no transport header.

use crate::headers::{be16, ip4, ip6, proto};

/// Most IPv6 extension headers walked before a packet is refused.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// IPv6 next-header values of extension headers walked here.
mod ext {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AUTH: u8 = 51;
    pub const DEST_OPTIONS: u8 = 60;
    pub const NO_NEXT: u8 = 59;
}

/// Why a packet fails the transport checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportProblem {
    /// A UDP header cut short, or a UDP length below 8 or beyond the datagram.
    BadUdpLength,
    /// An ICMP or ICMPv6 message shorter than its 8-byte header.
    IcmpTooShort,
    /// A fragment whose end is past 65,535 bytes of reassembled datagram.
    FragmentTooLong,
    /// IPv6 extension headers that run past the packet, or too many of them.
    BadExtensionHeaders,
    /// An IPv6 hop-by-hop header after another header.
    HopByHopNotFirst,
    /// An IPv6 payload length of 0 with a header after the fixed one.
    ZeroPayloadLength,
}

impl TransportProblem {
    /// Every problem, in declaration order.
    pub const ALL: [TransportProblem; 6] = [
        TransportProblem::BadUdpLength,
        TransportProblem::IcmpTooShort,
        TransportProblem::FragmentTooLong,
        TransportProblem::BadExtensionHeaders,
        TransportProblem::HopByHopNotFirst,
        TransportProblem::ZeroPayloadLength,
    ];

    /// Whether an IPv4 packet can have it (IPv4 has no extension headers and no jumbograms).
    pub fn applies_to_ip4(self) -> bool {
        matches!(
            self,
            TransportProblem::BadUdpLength
                | TransportProblem::IcmpTooShort
                | TransportProblem::FragmentTooLong
        )
    }

    /// The drop counter's name (the input nodes count each by it).
    pub fn name(self) -> &'static str {
        match self {
            TransportProblem::BadUdpLength => "bad-udp-length",
            TransportProblem::IcmpTooShort => "icmp-too-short",
            TransportProblem::FragmentTooLong => "fragment-too-long",
            TransportProblem::BadExtensionHeaders => "bad-extension-headers",
            TransportProblem::HopByHopNotFirst => "hop-by-hop-not-first",
            TransportProblem::ZeroPayloadLength => "zero-payload-length",
        }
    }

    /// Its index in a node's drop reasons `names` (`fallback` when they lack it). Cold: only
    /// refused packets ask.
    #[cold]
    pub fn index_in(self, names: &[&str], fallback: u16) -> u16 {
        names
            .iter()
            .position(|n| *n == self.name())
            .map_or(fallback, |i| i as u16)
    }
}

/// Where the transport header of a packet is, as far as the checks found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Upper {
    protocol: u8,
    /// Offset of the transport header from the first L3 byte.
    at: usize,
    /// A later fragment (no transport header).
    later: bool,
    /// A first fragment (a transport header, but not the whole datagram).
    first: bool,
}

/// Check the transport of an IPv4 packet whose header `ihl` bytes long and whose total length
/// `total` were checked (`l3` holds at least `total` bytes).
///
/// A whole datagram (no fragment offset, no more-fragments flag: nearly every packet) takes a
/// short path of its own, in the caller's loop: a protocol test and, for UDP, one length read.
#[inline(always)]
pub fn ip4(l3: &[u8], ihl: usize, total: usize) -> Option<TransportProblem> {
    let frag = be16(l3, ip4::FRAG);
    if frag & (ip4::OFFSET_MASK | ip4::MORE_FRAGMENTS) != 0 {
        return ip4_fragment(l3, ihl, total, frag);
    }
    whole_datagram(l3[ip4::PROTOCOL], l3.get(ihl..total).unwrap_or_default())
}

/// Check the transport header of a whole (unfragmented) datagram: `protocol` is the IPv4
/// protocol or the IPv6 upper-layer header, `payload` every byte after the IP header(s).
#[inline(always)]
pub fn whole_datagram(protocol: u8, payload: &[u8]) -> Option<TransportProblem> {
    transport_header(protocol, payload, true)
}

/// The checks of a transport header `protocol` followed by `payload` (every byte after the IP
/// header(s)); `whole` false for a first fragment, whose UDP length counts the reassembled
/// datagram and so is held only to its floor of 8.
#[inline(always)]
fn transport_header(protocol: u8, payload: &[u8], whole: bool) -> Option<TransportProblem> {
    if protocol == proto::UDP {
        return (!udp_length_fits(payload, whole)).then_some(TransportProblem::BadUdpLength);
    }
    let icmp = protocol == proto::ICMP || protocol == proto::ICMP6;
    (icmp && payload.len() < 8).then_some(TransportProblem::IcmpTooShort)
}

/// Whether the UDP header is there and its length is at least 8 and, for a `whole` datagram,
/// at most the bytes that follow the IP header.
#[inline(always)]
fn udp_length_fits(payload: &[u8], whole: bool) -> bool {
    match payload.first_chunk::<8>() {
        Some(h) => {
            let ulen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            ulen >= 8 && (!whole || ulen <= payload.len())
        }
        None => false,
    }
}

/// `ip4` for a fragment: the first carries the transport header (its UDP length counts the
/// reassembled datagram), later ones none; none may end past 65,535 bytes.
#[cold]
fn ip4_fragment(l3: &[u8], ihl: usize, total: usize, frag: u16) -> Option<TransportProblem> {
    let offset = usize::from(frag & ip4::OFFSET_MASK) * 8;
    if offset + (total - ihl) > 65_535 {
        return Some(TransportProblem::FragmentTooLong);
    }
    let upper = Upper {
        protocol: l3[ip4::PROTOCOL],
        at: ihl,
        later: offset != 0,
        first: offset == 0 && frag & ip4::MORE_FRAGMENTS != 0,
    };
    upper_problem(l3, total, upper)
}

/// Check the transport of an IPv6 packet of `total` bytes (fixed header and payload, checked
/// to be in `l3`).
#[inline(always)]
pub fn ip6(l3: &[u8], total: usize) -> Option<TransportProblem> {
    let next = l3[ip6::NEXT_HEADER];
    if total == ip6::HEADER_LEN && next != ext::NO_NEXT {
        return Some(TransportProblem::ZeroPayloadLength);
    }
    // The common case: TCP, UDP or ICMPv6 right after the fixed header.
    if !is_extension(next) {
        return whole_datagram(next, l3.get(ip6::HEADER_LEN..total).unwrap_or_default());
    }
    match walk6(l3, total) {
        Ok(upper) => upper_problem(l3, total, upper),
        Err(p) => Some(p),
    }
}

#[inline(always)]
fn is_extension(next: u8) -> bool {
    matches!(
        next,
        ext::HOP_BY_HOP | ext::ROUTING | ext::FRAGMENT | ext::AUTH | ext::DEST_OPTIONS
    )
}

/// Walk the extension headers of an IPv6 packet of `total` bytes to its upper header.
#[cold]
fn walk6(l3: &[u8], total: usize) -> Result<Upper, TransportProblem> {
    let pkt = &l3[..total];
    let mut next = pkt[ip6::NEXT_HEADER];
    let mut at = ip6::HEADER_LEN;
    let mut upper = Upper {
        protocol: next,
        at,
        later: false,
        first: false,
    };
    for n in 0..=MAX_EXTENSION_HEADERS {
        if !is_extension(next) {
            upper.protocol = next;
            upper.at = at;
            return Ok(upper);
        }
        if n == MAX_EXTENSION_HEADERS {
            break;
        }
        if next == ext::HOP_BY_HOP && n != 0 {
            return Err(TransportProblem::HopByHopNotFirst);
        }
        let head = pkt
            .get(at..at + 2)
            .ok_or(TransportProblem::BadExtensionHeaders)?;
        let len = match next {
            ext::FRAGMENT => {
                let f = pkt
                    .get(at..at + 8)
                    .ok_or(TransportProblem::BadExtensionHeaders)?;
                let word = be16(f, 2);
                let offset = usize::from(word >> 3) * 8;
                let more = word & 1 != 0;
                // The fragmentable part starts after this header.
                if offset + (total - (at + 8)) > 65_535 {
                    return Err(TransportProblem::FragmentTooLong);
                }
                if offset != 0 {
                    // A later fragment: what follows is data, not headers.
                    upper.later = true;
                    return Ok(upper);
                }
                upper.first |= more;
                8
            }
            // RFC 4302: the length is in 4-byte words, minus 2.
            ext::AUTH => (usize::from(head[1]) + 2) * 4,
            _ => (usize::from(head[1]) + 1) * 8,
        };
        if at + len > total {
            return Err(TransportProblem::BadExtensionHeaders);
        }
        next = head[0];
        at += len;
    }
    Err(TransportProblem::BadExtensionHeaders)
}

/// The checks of the transport header `u` of a packet of `total` bytes.
#[inline(always)]
fn upper_problem(l3: &[u8], total: usize, u: Upper) -> Option<TransportProblem> {
    if u.later {
        return None;
    }
    let payload = l3.get(u.at..total).unwrap_or_default();
    transport_header(u.protocol, payload, !u.first)
}

#[cfg(test)]
mod tests {
    use super::TransportProblem::*;
    use super::*;

    /// An IPv4 packet: protocol, fragment word, transport bytes.
    fn v4(protocol: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let total = 20 + l4.len();
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, protocol, 0, 0];
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
        p.extend_from_slice(l4);
        p
    }

    fn udp(len: u16, payload: usize) -> Vec<u8> {
        let mut u = vec![0, 53, 0, 53];
        u.extend_from_slice(&len.to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.resize(8 + payload, 0);
        u
    }

    fn check4(p: &[u8]) -> Option<TransportProblem> {
        ip4(p, 20, p.len())
    }

    /// An IPv6 packet: first next header, the bytes after the fixed header.
    fn v6(next: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.resize(40, 1);
        p.extend_from_slice(rest);
        p
    }

    fn check6(p: &[u8]) -> Option<TransportProblem> {
        ip6(p, p.len())
    }

    #[test]
    fn whole_ipv4_datagrams_pass_and_each_bad_class_is_named() {
        assert_eq!(check4(&v4(17, 0, &udp(18, 10))), None);
        assert_eq!(check4(&v4(17, 0, &udp(8, 10))), None, "padding after UDP");
        assert_eq!(check4(&v4(17, 0, &udp(19, 10))), Some(BadUdpLength));
        assert_eq!(check4(&v4(17, 0, &udp(7, 10))), Some(BadUdpLength));
        assert_eq!(check4(&v4(17, 0, &[0; 7])), Some(BadUdpLength));
        assert_eq!(check4(&v4(1, 0, &[8, 0, 0, 0, 0, 0, 0, 0])), None);
        assert_eq!(check4(&v4(1, 0, &[8, 0, 0, 0])), Some(IcmpTooShort));
        assert_eq!(check4(&v4(6, 0, &[0; 4])), None, "TCP is not held here");
    }

    #[test]
    fn ipv4_fragments_hold_their_ends_and_first_fragments_their_udp_header() {
        // A first fragment: its UDP length is the datagram's.
        assert_eq!(check4(&v4(17, 0x2000, &udp(1000, 24))), None);
        assert_eq!(check4(&v4(17, 0x2000, &udp(4, 24))), Some(BadUdpLength));
        // A later fragment ending at 65,535 passes, one byte more does not.
        let end_at = |end: usize| {
            let offset = (end - 16) / 8;
            v4(17, offset as u16, &vec![0; end - offset * 8])
        };
        assert_eq!(check4(&end_at(65_535 - 7)), None);
        let last = v4(17, 8189, &[0; 24]);
        assert_eq!(check4(&last), Some(FragmentTooLong), "8189*8 + 24 > 65535");
        assert_eq!(check4(&v4(17, 8189, &[0; 23])), None, "ends at 65,535");
    }

    #[test]
    fn ipv6_extension_chains_are_walked_and_held_to_the_rules() {
        assert_eq!(check6(&v6(17, &udp(12, 4))), None);
        assert_eq!(check6(&v6(17, &udp(13, 4))), Some(BadUdpLength));
        assert_eq!(check6(&v6(58, &[128, 0, 0, 0])), Some(IcmpTooShort));
        // Hop-by-hop, then UDP.
        let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
        hbh.extend_from_slice(&udp(8, 0));
        assert_eq!(check6(&v6(0, &hbh)), None);
        // Destination options, then hop-by-hop: refused.
        let mut late = vec![0, 0, 1, 4, 0, 0, 0, 0];
        late.extend_from_slice(&hbh);
        assert_eq!(check6(&v6(60, &late)), Some(HopByHopNotFirst));
        // An extension header longer than the packet.
        assert_eq!(
            check6(&v6(60, &[17, 4, 1, 4, 0, 0, 0, 0])),
            Some(BadExtensionHeaders)
        );
        // Nine destination options headers.
        let mut many = Vec::new();
        for _ in 0..9 {
            many.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(check6(&v6(60, &many)), Some(BadExtensionHeaders));
        // A later fragment: no transport header to check; one ending past 65,535 refused.
        let frag = |offset: u16, more: bool, rest: &[u8]| {
            let word = (offset << 3) | u16::from(more);
            let mut f = vec![17, 0];
            f.extend_from_slice(&word.to_be_bytes());
            f.extend_from_slice(&[0, 0, 0, 1]);
            f.extend_from_slice(rest);
            v6(44, &f)
        };
        assert_eq!(check6(&frag(100, false, &[0; 3])), None);
        // A later fragment whose next header names an extension: its data is not walked.
        let mut later = frag(100, false, &[9; 16]);
        later[40] = 60;
        assert_eq!(check6(&later), None);
        assert_eq!(check6(&frag(8191, false, &[0; 8])), Some(FragmentTooLong));
        assert_eq!(check6(&frag(0, true, &udp(2000, 16))), None);
        assert_eq!(check6(&frag(0, true, &udp(3, 16))), Some(BadUdpLength));
    }

    #[test]
    fn ipv6_zero_payload_length_is_a_jumbogram_we_do_not_carry() {
        assert_eq!(check6(&v6(59, &[])), None, "no next header");
        assert_eq!(check6(&v6(17, &[])), Some(ZeroPayloadLength));
        assert_eq!(check6(&v6(0, &[])), Some(ZeroPayloadLength));
    }

    #[test]
    fn no_input_panics() {
        // Every prefix of a long chain, with its lengths kept as if whole.
        let mut chain = vec![43, 0, 0, 0, 0, 0, 0, 0, 60, 0, 1, 4, 0, 0, 0, 0];
        chain.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 1]);
        chain.extend_from_slice(&udp(8, 0));
        let p = v6(0, &chain);
        for total in 40..=p.len() {
            let _ = ip6(&p, total);
        }
        for b in 0..=255u8 {
            let _ = check6(&v6(b, &[b; 3]));
            let _ = check4(&v4(b, 0, &[b; 3]));
        }
    }
}

//! Reads an IP packet (the L3 bytes, IPv4 or IPv6) into the flow it belongs to (`FiveTuple`)
//! and what kind of packet it is: normal, TCP SYN, FIN/RST, fragment, ICMP error. It only reads;
//! it never panics, never allocates, and refuses truncated or malformed input with a reason.
//!
//! # Fragment policy
//! A fragment's tuple always has both ports 0, the first fragment's too: later fragments carry
//! no L4 header, and every fragment of one datagram must reach the same server. With ports 0
//! the Maglev hash of a fragment is the address-only (`src_ip_sticky`) hash, so all fragments of
//! a datagram, and of every datagram between the same two hosts, go to one server whatever
//! their arrival order. A first fragment also reports its real ports (`Parsed::ports`) and the
//! offset of its L4 header, so NAT can rewrite the port and checksum (later fragments need
//! only the address rewritten). A first fragment too short to hold its whole TCP or UDP header
//! (the RFC 1858 tiny-fragment trick) is malformed (`Malformed::TinyFragment`). Unfragmented
//! packets of a flow whose other packets are fragmented may reach another server: fragmented
//! TCP is rare, and for UDP each datagram stands alone.
//!
//! # ICMP error policy
//! An ICMP or ICMPv6 error (destination unreachable, time exceeded, parameter problem, and
//! ICMPv6 packet too big) is about a packet it quotes. Its tuple is the quoted header's tuple
//! reversed: it names the flow as a packet travelling the same way as the error would, so a
//! router's "fragmentation needed" about a server's reply (VIP -> client), sent to the VIP,
//! looks up the client -> VIP flow and follows it to the server that sent the reply; an error
//! from a NAT server about client -> server:target_port reads server:target_port -> client,
//! the key of the NAT reverse entry. The quoted packet must hold at least 8 bytes of its L4
//! header (RFC 792); informational ICMP (echo, ...) is a normal packet with ports 0.

use crate::tuple::FiveTuple;
use packet::headers::{be16, ip4, proto};

/// What kind of packet was parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Any packet of a flow that is not one of the kinds below.
    Normal,
    /// A TCP SYN without ACK: the start of a connection (never trusts a stale flow entry).
    Syn,
    /// A TCP segment with FIN or RST: the flow entry is shortened.
    FinRst,
    /// The first fragment (offset 0, more fragments): L4 header present, tuple ports 0.
    FirstFragment,
    /// A fragment with a non-zero offset: no L4 header, tuple ports 0.
    LaterFragment,
    /// An ICMP/ICMPv6 error; the tuple is the quoted packet's, reversed.
    IcmpError,
}

/// Why a packet could not be parsed (one counter each; `NAMES` in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Malformed {
    /// Shorter than the fixed IP header.
    Truncated = 0,
    /// The version nibble is not the family given.
    BadVersion,
    /// IPv4 header length below 20 or beyond the packet.
    BadHeaderLength,
    /// The IP total / payload length is smaller than the headers or beyond the bytes given
    /// (also IPv6 jumbograms, which have payload length 0).
    BadTotalLength,
    /// IPv6 extension headers truncated or more than `MAX_EXTENSION_HEADERS`.
    BadExtensionHeaders,
    /// The TCP or UDP header is cut short (or TCP's data offset is below 5 or beyond the packet).
    TruncatedL4,
    /// A first fragment that does not hold the whole TCP or UDP header (RFC 1858).
    TinyFragment,
    /// An ICMP error too short for its header, the quoted IP header or 8 bytes of quoted L4.
    BadIcmpError,
}

impl Malformed {
    /// Counter names, indexed by `self as usize`.
    pub const NAMES: &'static [&'static str] = &[
        "truncated",
        "bad-version",
        "bad-header-length",
        "bad-total-length",
        "bad-extension-headers",
        "truncated-l4",
        "tiny-fragment",
        "bad-icmp-error",
    ];

    /// The counter name of this reason.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// A parsed packet. Offsets count from the first L3 byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The flow (for ICMP errors the quoted packet's, reversed; for fragments, ports 0).
    pub tuple: FiveTuple,
    /// What kind of packet.
    pub kind: Kind,
    /// The IP packet's length from its header (the bytes after it, e.g. Ethernet padding, are
    /// not part of the packet).
    pub len: usize,
    /// Offset of the L4 header (for a later fragment: of its payload; for an ICMP error: of the
    /// ICMP header).
    pub l4: usize,
    /// The real source and destination ports when the packet has them: equal to the tuple's
    /// except for a first fragment (whose tuple has 0) and ICMP errors (the quoted packet's,
    /// not reversed).
    pub ports: (u16, u16),
    /// ICMP errors: offset of the quoted IP header (0 otherwise).
    pub inner_l3: usize,
    /// ICMP errors: offset of the quoted L4 header (0 otherwise; the quoted packet may be cut
    /// short anywhere after its first 8 L4 bytes).
    pub inner_l4: usize,
    /// ICMP errors: the quoted packet is a later fragment (no L4 header).
    pub inner_later_fragment: bool,
}

impl Parsed {
    /// A placeholder (an IPv4 packet of no length) for arrays parsed into.
    pub const EMPTY: Parsed = Parsed {
        tuple: FiveTuple {
            src: [0; 16],
            dst: [0; 16],
            src_port: 0,
            dst_port: 0,
            protocol: 0,
            ip6: false,
        },
        kind: Kind::Normal,
        len: 0,
        l4: 0,
        ports: (0, 0),
        inner_l3: 0,
        inner_l4: 0,
        inner_later_fragment: false,
    };
}

/// Most IPv6 extension headers walked before the packet is refused.
pub const MAX_EXTENSION_HEADERS: usize = 8;

const TCP_SYN: u8 = 0x02;
const TCP_FIN: u8 = 0x01;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// Parse the IP packet `l3` (`ip6`: the family ip4-input/ip6-input decided).
#[inline]
pub fn parse(l3: &[u8], ip6: bool) -> Result<Parsed, Malformed> {
    let mut p = Parsed::EMPTY;
    parse_into(l3, ip6, &mut p).map(|()| p)
}

/// [`parse`] into `out`, in place: a node parsing into its own per-vector array avoids moving
/// the result. `out` is written whole, once, at the end (a field written piecemeal and then
/// read back in a wider load, e.g. both ports as one word, stalls on store-to-load
/// forwarding). On an error `out` is left as it was, or partly written for a malformed ICMP
/// error: callers must not read it.
#[inline]
pub fn parse_into(l3: &[u8], ip6: bool, out: &mut Parsed) -> Result<(), Malformed> {
    let h = if ip6 {
        ip6_header(l3)?
    } else {
        ip4_header(l3)?
    };
    let pkt = &l3[..h.len];
    let l4 = &pkt[h.l4..];
    let mut tuple = h.tuple;
    let (kind, ports) = match h.frag {
        Frag::Later => (Kind::LaterFragment, (0, 0)),
        Frag::First => {
            let need = match h.tuple.protocol {
                proto::TCP => tcp_header_len(l4).ok_or(Malformed::TinyFragment)?,
                proto::UDP => 8,
                _ => 0,
            };
            if l4.len() < need {
                return Err(Malformed::TinyFragment);
            }
            let ports = if need > 0 {
                (be16(l4, 0), be16(l4, 2))
            } else {
                (0, 0)
            };
            (Kind::FirstFragment, ports)
        }
        Frag::None => match h.tuple.protocol {
            proto::TCP => {
                let n = tcp_header_len(l4).ok_or(Malformed::TruncatedL4)?;
                if l4.len() < n {
                    return Err(Malformed::TruncatedL4);
                }
                let kind = tcp_kind(l4[13]);
                (tuple.src_port, tuple.dst_port) = (be16(l4, 0), be16(l4, 2));
                (kind, (tuple.src_port, tuple.dst_port))
            }
            proto::UDP => {
                if l4.len() < 8 {
                    return Err(Malformed::TruncatedL4);
                }
                (tuple.src_port, tuple.dst_port) = (be16(l4, 0), be16(l4, 2));
                (Kind::Normal, (tuple.src_port, tuple.dst_port))
            }
            proto::ICMP | proto::ICMP6 => {
                let error = match l4.first() {
                    Some(&t) if !ip6 && h.tuple.protocol == proto::ICMP => {
                        matches!(t, 3 | 4 | 5 | 11 | 12)
                    }
                    Some(&t) if ip6 && h.tuple.protocol == proto::ICMP6 => (1..=4).contains(&t),
                    _ => false,
                };
                if error {
                    *out = Parsed {
                        tuple,
                        len: h.len,
                        l4: h.l4,
                        ..Parsed::EMPTY
                    };
                    return icmp_error(out, pkt, ip6);
                }
                (Kind::Normal, (0, 0))
            }
            _ => (Kind::Normal, (0, 0)),
        },
    };
    *out = Parsed {
        tuple,
        kind,
        len: h.len,
        l4: h.l4,
        ports,
        inner_l3: 0,
        inner_l4: 0,
        inner_later_fragment: false,
    };
    Ok(())
}

/// The kind of a TCP segment with `flags` (its 14th header byte).
#[inline(always)]
fn tcp_kind(flags: u8) -> Kind {
    if flags & (TCP_FIN | TCP_RST) != 0 {
        Kind::FinRst
    } else if flags & (TCP_SYN | TCP_ACK) == TCP_SYN {
        Kind::Syn
    } else {
        Kind::Normal
    }
}

/// A plain IPv4 TCP or UDP packet, the bulk of a load balancer's traffic: a 20-byte IP header
/// (no options), not a fragment, its whole L4 header present. Its L4 header is at offset 20.
/// What `parse` would say of it, in 16 bytes instead of `Parsed`'s 80 (the `lb` node's
/// fast lane keeps one per packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plain4 {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source port (host order).
    pub src_port: u16,
    /// Destination port (host order).
    pub dst_port: u16,
    /// The IP packet's length (its header's total length).
    pub len: u16,
    /// `proto::TCP` or `proto::UDP`.
    pub protocol: u8,
    /// Normal, Syn or FinRst.
    pub kind: Kind,
}

impl Plain4 {
    /// A placeholder for arrays parsed into.
    pub const EMPTY: Plain4 = Plain4 {
        src: [0; 4],
        dst: [0; 4],
        src_port: 0,
        dst_port: 0,
        len: 0,
        protocol: 0,
        kind: Kind::Normal,
    };

    /// What `parse` gives for the packet (`Parsed` in full; the property tests compare them).
    #[inline(always)]
    pub fn parsed(&self) -> Parsed {
        Parsed {
            tuple: self.tuple(),
            kind: self.kind,
            len: usize::from(self.len),
            l4: ip4::MIN_HEADER_LEN,
            ports: (self.src_port, self.dst_port),
            inner_l3: 0,
            inner_l4: 0,
            inner_later_fragment: false,
        }
    }

    /// The flow, as `parse` gives it.
    #[inline(always)]
    pub fn tuple(&self) -> FiveTuple {
        FiveTuple::v4(
            self.src,
            self.dst,
            self.protocol,
            self.src_port,
            self.dst_port,
        )
    }
}

/// `l3` as a [`Plain4`], or `None` when it is anything else (IP options, a fragment, another
/// protocol, IPv6, or malformed): `parse` then says what it is. For every packet it accepts,
/// `parse(l3, false)` accepts it too, with the same tuple, kind, length and L4 offset 20 (a
/// property test holds the two together).
#[inline(always)]
pub fn plain4(l3: &[u8]) -> Option<Plain4> {
    // The IP header and the first 8 bytes of L4 (the ports; UDP's whole header), read
    // through one fixed-size view.
    let h: &[u8; 28] = l3.get(..28)?.try_into().ok()?;
    let len = be16(h, ip4::TOTAL_LEN);
    let protocol = h[ip4::PROTOCOL];
    if h[0] != 0x45 || usize::from(len) > l3.len() || be16(h, ip4::FRAG) & FRAGMENT_BITS != 0 {
        return None;
    }
    let room = usize::from(len).checked_sub(ip4::MIN_HEADER_LEN)?;
    let (kind, need) = match protocol {
        proto::TCP => {
            // TCP's data offset is at least 5 words.
            let t = l3.get(32..34)?;
            let n = usize::from(t[0] >> 4) * 4;
            if n < 20 {
                return None;
            }
            (tcp_kind(t[1]), n)
        }
        proto::UDP => (Kind::Normal, 8),
        _ => return None,
    };
    // The whole L4 header is inside the packet.
    if need > room {
        return None;
    }
    let mut src = [0u8; 4];
    let mut dst = [0u8; 4];
    src.copy_from_slice(&h[ip4::SRC..ip4::SRC + 4]);
    dst.copy_from_slice(&h[ip4::DST..ip4::DST + 4]);
    Some(Plain4 {
        src,
        dst,
        src_port: be16(h, 20),
        dst_port: be16(h, 22),
        len,
        protocol,
        kind,
    })
}

/// The more-fragments flag and the fragment offset.
const FRAGMENT_BITS: u16 = ip4::MORE_FRAGMENTS | ip4::OFFSET_MASK;

/// The TCP header length from its data offset (None: the byte is not there or below 5 words).
#[inline(always)]
fn tcp_header_len(l4: &[u8]) -> Option<usize> {
    let n = usize::from(*l4.get(12)? >> 4) * 4;
    (n >= 20).then_some(n)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Frag {
    None,
    First,
    Later,
}

struct Header {
    tuple: FiveTuple,
    len: usize,
    l4: usize,
    frag: Frag,
}

#[inline(always)]
fn ip4_header(l3: &[u8]) -> Result<Header, Malformed> {
    let h = l3.get(..ip4::MIN_HEADER_LEN).ok_or(Malformed::Truncated)?;
    if h[0] >> 4 != 4 {
        return Err(Malformed::BadVersion);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < ip4::MIN_HEADER_LEN || ihl > l3.len() {
        return Err(Malformed::BadHeaderLength);
    }
    let len = usize::from(be16(h, ip4::TOTAL_LEN));
    if len < ihl || len > l3.len() {
        return Err(Malformed::BadTotalLength);
    }
    Ok(ip4_fields(h, ihl, len))
}

/// The tuple and fragment state of an IPv4 header whose first 20 bytes are `h`.
#[inline(always)]
fn ip4_fields(h: &[u8], ihl: usize, len: usize) -> Header {
    let frag = be16(h, ip4::FRAG);
    let frag = if frag & ip4::OFFSET_MASK != 0 {
        Frag::Later
    } else if frag & ip4::MORE_FRAGMENTS != 0 {
        Frag::First
    } else {
        Frag::None
    };
    let mut s = [0u8; 4];
    let mut d = [0u8; 4];
    s.copy_from_slice(&h[ip4::SRC..ip4::SRC + 4]);
    d.copy_from_slice(&h[ip4::DST..ip4::DST + 4]);
    Header {
        tuple: FiveTuple::v4(s, d, h[ip4::PROTOCOL], 0, 0),
        len,
        l4: ihl,
        frag,
    }
}

#[inline(always)]
fn ip6_header(l3: &[u8]) -> Result<Header, Malformed> {
    use packet::headers::ip6;
    let h = l3.get(..ip6::HEADER_LEN).ok_or(Malformed::Truncated)?;
    if h[0] >> 4 != 6 {
        return Err(Malformed::BadVersion);
    }
    let payload = usize::from(be16(h, ip6::PAYLOAD_LEN));
    let len = ip6::HEADER_LEN + payload;
    if payload == 0 && h[ip6::NEXT_HEADER] == 0 || len > l3.len() {
        return Err(Malformed::BadTotalLength);
    }
    ip6_walk(&l3[..len])
}

/// The tuple, L4 offset and fragment state of the IPv6 packet `pkt` (its fixed header
/// present), walking at most `MAX_EXTENSION_HEADERS` extension headers within `pkt`.
fn ip6_walk(pkt: &[u8]) -> Result<Header, Malformed> {
    use packet::headers::ip6;
    let mut s = [0u8; 16];
    let mut d = [0u8; 16];
    s.copy_from_slice(&pkt[ip6::SRC..ip6::SRC + 16]);
    d.copy_from_slice(&pkt[ip6::DST..ip6::DST + 16]);
    let mut next = pkt[ip6::NEXT_HEADER];
    let mut at = ip6::HEADER_LEN;
    let mut frag = Frag::None;
    for _ in 0..MAX_EXTENSION_HEADERS {
        let size = match next {
            0 | 43 | 60 => {
                let e = pkt.get(at..at + 2).ok_or(Malformed::BadExtensionHeaders)?;
                (usize::from(e[1]) + 1) * 8
            }
            51 => {
                let e = pkt.get(at..at + 2).ok_or(Malformed::BadExtensionHeaders)?;
                (usize::from(e[1]) + 2) * 4
            }
            44 => {
                let e = pkt.get(at..at + 8).ok_or(Malformed::BadExtensionHeaders)?;
                let off = be16(e, 2);
                frag = if off & 0xfff8 != 0 {
                    Frag::Later
                } else if off & 1 != 0 {
                    Frag::First
                } else {
                    // An atomic fragment (offset 0, no more): a whole packet.
                    Frag::None
                };
                8
            }
            _ => break,
        };
        if at + size > pkt.len() {
            return Err(Malformed::BadExtensionHeaders);
        }
        next = pkt[at];
        at += size;
        if frag == Frag::Later {
            break;
        }
    }
    if frag != Frag::Later && matches!(next, 0 | 43 | 44 | 51 | 60) {
        return Err(Malformed::BadExtensionHeaders);
    }
    Ok(Header {
        tuple: FiveTuple::v6(s, d, next, 0, 0),
        len: pkt.len(),
        l4: at,
        frag,
    })
}

/// Fill `p` from the ICMP error at `p.l4` of `pkt`: the quoted packet's tuple, reversed.
#[inline(never)]
fn icmp_error(p: &mut Parsed, pkt: &[u8], ip6: bool) -> Result<(), Malformed> {
    let inner_l3 = p.l4 + 8;
    let quoted = pkt.get(inner_l3..).ok_or(Malformed::BadIcmpError)?;
    // The quoted packet is usually cut short: its header's length is not checked.
    let h = if ip6 {
        if quoted.len() < 40 || quoted[0] >> 4 != 6 {
            return Err(Malformed::BadIcmpError);
        }
        ip6_walk(quoted).map_err(|_| Malformed::BadIcmpError)?
    } else {
        let head = quoted.get(..20).ok_or(Malformed::BadIcmpError)?;
        let ihl = usize::from(head[0] & 0x0f) * 4;
        if head[0] >> 4 != 4 || ihl < 20 || ihl > quoted.len() {
            return Err(Malformed::BadIcmpError);
        }
        ip4_fields(head, ihl, quoted.len())
    };
    let l4 = &quoted[h.l4..];
    let (sp, dp) = if h.frag == Frag::Later {
        (0, 0)
    } else if matches!(h.tuple.protocol, proto::TCP | proto::UDP) {
        if l4.len() < 8 {
            return Err(Malformed::BadIcmpError);
        }
        (be16(l4, 0), be16(l4, 2))
    } else {
        (0, 0)
    };
    p.kind = Kind::IcmpError;
    p.inner_l3 = inner_l3;
    p.inner_l4 = inner_l3 + h.l4;
    p.inner_later_fragment = h.frag == Frag::Later;
    p.ports = (sp, dp);
    let inner = FiveTuple {
        src_port: sp,
        dst_port: dp,
        ..h.tuple
    };
    p.tuple = inner.reversed();
    Ok(())
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

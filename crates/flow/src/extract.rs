//! Flow extraction: an Ethernet frame (plus its OpenFlow input port and tunnel metadata) into a
//! `FlowKey`, field for field as Open vSwitch's `miniflow_extract` fills the same fields, with
//! the L3/L4 offsets and a classification of what was malformed. Runs once per packet: straight
//! code over the bytes, no allocation, and it must never panic on any input.
//!
//! What Open vSwitch does, and so do we:
//! - fewer than 14 bytes: only the metadata (port, tunnel) is set;
//! - one 802.1Q/802.1ad tag (Open vSwitch's default `other_config:vlan-limit=1`) goes into
//!   `vlan_tci` with the CFI bit as "present"; a second tag is payload: `dl_type` is then its
//!   TPID and nothing above L2 is parsed. A tag needs 4 bytes plus the 2 of the next type;
//! - a type below 0x600 is an 802.3 length: LLC/SNAP with organisation 0 gives its type,
//!   anything else `dl_type` 0x05ff;
//! - IPv4 needs 20 bytes, 20 <= IHL*4 <= bytes, IHL*4 <= total length <= bytes (else only L2 is
//!   set); bytes past the total length are padding and never parsed;
//! - IPv6 needs 40 bytes and 40 + payload length <= bytes; hop-by-hop, routing, destination
//!   options, AH and fragment headers are walked to the upper protocol; an extension header
//!   that does not fit leaves only the addresses set (no class, label, hop limit or protocol);
//!   a fragment header with offset and flags zero is not a fragment; a later fragment has
//!   `nw_proto` 44;
//! - later fragments have no L4 fields; an L4 header shorter than its minimum (TCP 20 and its
//!   data offset, UDP 8, SCTP 12, ICMP/ICMPv6/IGMP 8) leaves the L4 word zero;
//! - ARP/RARP needs 28 bytes and Ethernet/IPv4 addresses; opcode above 255 leaves `nw_proto` 0;
//! - IPv6 neighbour solicitation/advertisement: source/target link-layer options go into
//!   `arp_sha`/`arp_tha`, a repeated option zeroes both.

use crate::key::{Field, FlowKey, FRAG_ANY, FRAG_LATER, VLAN_CFI};

/// An offset that is not known (no such header), as Open vSwitch's `UINT16_MAX`.
pub const NO_OFFSET: u16 = u16::MAX;

/// Tunnel metadata of a decapsulated packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tunnel {
    /// Tunnel id (VNI).
    pub tun_id: u64,
    /// Outer IPv4 source (host order).
    pub tun_src: u32,
    /// Outer IPv4 destination (host order).
    pub tun_dst: u32,
}

/// What was wrong with a frame. Parsing stops at the first problem (as Open vSwitch's does), so
/// a frame has at most one; the fields before it are set, those after it zero.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// Shorter than an Ethernet header (14 bytes): only metadata is in the key.
    EthernetTooShort,
    /// A VLAN TPID without room for the tag and the next type (`dl_type` is the TPID).
    VlanTruncated,
    /// IPv4 with fewer than 20 bytes.
    Ipv4Truncated,
    /// IPv4 header length below 20 or beyond the bytes present.
    Ipv4BadHeaderLength,
    /// IPv4 total length beyond the bytes present or below the header length.
    Ipv4BadTotalLength,
    /// IPv6 with fewer than 40 bytes.
    Ipv6Truncated,
    /// IPv6 payload length beyond the bytes present.
    Ipv6BadPayloadLength,
    /// An IPv6 extension header that does not fit in the payload.
    Ipv6ExtensionTruncated,
    /// ARP with fewer than 28 bytes.
    ArpTruncated,
    /// ARP for another hardware or protocol type than Ethernet and IPv4 (fields left zero).
    ArpNotEthernetIpv4,
    /// TCP with fewer than 20 bytes.
    TcpTruncated,
    /// TCP data offset below 5 words or beyond the bytes present.
    TcpBadOffset,
    /// UDP with fewer than 8 bytes.
    UdpTruncated,
    /// SCTP with fewer than 12 bytes.
    SctpTruncated,
    /// ICMP, ICMPv6 or IGMP with fewer than 8 bytes.
    IcmpTruncated,
    /// A neighbour discovery option of length zero or a repeated link-layer address option.
    NdBadOption,
}

impl Malformed {
    /// Every kind, in discriminant order (`ALL[m as usize] == m`), for counter arrays.
    pub const ALL: [Malformed; 16] = [
        Malformed::EthernetTooShort,
        Malformed::VlanTruncated,
        Malformed::Ipv4Truncated,
        Malformed::Ipv4BadHeaderLength,
        Malformed::Ipv4BadTotalLength,
        Malformed::Ipv6Truncated,
        Malformed::Ipv6BadPayloadLength,
        Malformed::Ipv6ExtensionTruncated,
        Malformed::ArpTruncated,
        Malformed::ArpNotEthernetIpv4,
        Malformed::TcpTruncated,
        Malformed::TcpBadOffset,
        Malformed::UdpTruncated,
        Malformed::SctpTruncated,
        Malformed::IcmpTruncated,
        Malformed::NdBadOption,
    ];

    /// A short name for counters (`ipv4_bad_total_length`).
    pub const fn name(self) -> &'static str {
        match self {
            Malformed::EthernetTooShort => "ethernet_too_short",
            Malformed::VlanTruncated => "vlan_truncated",
            Malformed::Ipv4Truncated => "ipv4_truncated",
            Malformed::Ipv4BadHeaderLength => "ipv4_bad_header_length",
            Malformed::Ipv4BadTotalLength => "ipv4_bad_total_length",
            Malformed::Ipv6Truncated => "ipv6_truncated",
            Malformed::Ipv6BadPayloadLength => "ipv6_bad_payload_length",
            Malformed::Ipv6ExtensionTruncated => "ipv6_extension_truncated",
            Malformed::ArpTruncated => "arp_truncated",
            Malformed::ArpNotEthernetIpv4 => "arp_not_ethernet_ipv4",
            Malformed::TcpTruncated => "tcp_truncated",
            Malformed::TcpBadOffset => "tcp_bad_offset",
            Malformed::UdpTruncated => "udp_truncated",
            Malformed::SctpTruncated => "sctp_truncated",
            Malformed::IcmpTruncated => "icmp_truncated",
            Malformed::NdBadOption => "nd_bad_option",
        }
    }
}

/// The network header found at `Parsed::l3_offset`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L3 {
    /// No Ethernet header, or an IPv4/IPv6/ARP header that failed its checks.
    None,
    /// Another ethertype (not parsed).
    Other,
    /// A valid IPv4 header.
    Ipv4,
    /// A valid IPv6 header (extension headers may still have been truncated).
    Ipv6,
    /// An Ethernet/IPv4 ARP or RARP packet.
    Arp,
}

/// The transport header found, complete, at `Parsed::l4_offset`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4 {
    /// None (not IP, a later fragment, truncated, or a protocol not parsed).
    None,
    /// TCP (header complete up to its data offset).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
    /// ICMP.
    Icmp,
    /// ICMPv6.
    Icmp6,
    /// IGMP.
    Igmp,
}

/// Where the headers of a frame are, and what was wrong with it. Small and `Copy`: nodes keep
/// one per packet next to its key; `execute` reads and updates it as actions change the frame.
/// Aligned to 16 bytes so that it moves as one aligned block: as a 12-byte struct it was copied
/// with overlapping unaligned loads of bytes just stored, a store-forwarding stall that took a
/// quarter of the `flow-switch` node's time on the hit path (perf annotate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C, align(16))]
pub struct Parsed {
    /// Offset of the L3 header (after Ethernet, one tag, and LLC/SNAP), or `NO_OFFSET`.
    pub l3_offset: u16,
    /// Offset of the L4 header (after IPv4 options or IPv6 extension headers), or `NO_OFFSET`.
    /// Set for every IP packet that passed its checks, later fragments included.
    pub l4_offset: u16,
    /// Bytes from `l4_offset` to the end of the IP payload (padding excluded).
    pub l4_len: u16,
    /// The network header.
    pub l3: L3,
    /// The transport header, when complete.
    pub l4: L4,
    /// `nw_frag` bits (`FRAG_ANY`, `FRAG_LATER`).
    pub frag: u8,
    /// An outer VLAN tag is at byte 12.
    pub vlan: bool,
    /// TPID of the outer tag the packet arrived with (0: none); pushes and pops leave it.
    pub received_tpid: u16,
    /// IPv6 with a routing header whose segments-left is not zero (the L4 pseudo-header then
    /// uses the final destination, not `ipv6_dst`).
    pub ipv6_routing: bool,
    /// What was malformed, if anything.
    pub malformed: Option<Malformed>,
}

impl Parsed {
    /// Nothing found.
    pub const NONE: Parsed = Parsed {
        l3_offset: NO_OFFSET,
        l4_offset: NO_OFFSET,
        l4_len: 0,
        l3: L3::None,
        l4: L4::None,
        frag: 0,
        vlan: false,
        received_tpid: 0,
        ipv6_routing: false,
        malformed: None,
    };
}

const fn word(f: Field) -> usize {
    f.def().word as usize
}
const fn shift(f: Field) -> u32 {
    f.def().shift as u32
}

const W_IN_PORT: usize = word(Field::InPort);
const W_TUN_ID: usize = word(Field::TunId);
const W_TUN: usize = word(Field::TunSrc);
const W_SRC_TCI: usize = word(Field::EthSrc);
const W_DST_TYPE: usize = word(Field::EthDst);
const W_NW: usize = word(Field::NwSrc);
const W_IP6_SRC: usize = word(Field::Ipv6Src);
const W_IP6_DST: usize = word(Field::Ipv6Dst);
const W_NW_MISC: usize = word(Field::NwProto);
const W_ARP_SHA: usize = word(Field::ArpSha);
const W_ARP_THA: usize = word(Field::ArpTha);
const W_TP: usize = word(Field::TpSrc);

// The word packing below assumes the key layout of `key.rs`; these catch a change to it.
const _: () = {
    assert!(word(Field::TunDst) == W_TUN && shift(Field::TunDst) == 32);
    assert!(shift(Field::EthSrc) == 0 && word(Field::VlanTci) == W_SRC_TCI);
    assert!(shift(Field::VlanTci) == 48 && shift(Field::EthDst) == 0);
    assert!(word(Field::EthType) == W_DST_TYPE && shift(Field::EthType) == 48);
    assert!(word(Field::NwDst) == W_NW && shift(Field::NwDst) == 32);
    // The TOS byte (dscp << 2 | ecn) lands at bit 8: ecn at 8, dscp at 10.
    assert!(word(Field::NwEcn) == W_NW_MISC && shift(Field::NwEcn) == 8);
    assert!(word(Field::IpDscp) == W_NW_MISC && shift(Field::IpDscp) == 10);
    assert!(shift(Field::NwProto) == 0 && shift(Field::NwTtl) == 16);
    assert!(word(Field::NwTtl) == W_NW_MISC && word(Field::NwFrag) == W_NW_MISC);
    assert!(shift(Field::NwFrag) == 24 && shift(Field::Ipv6Label) == 32);
    assert!(word(Field::Ipv6Label) == W_NW_MISC);
    assert!(shift(Field::TpSrc) == 0 && word(Field::TpDst) == W_TP);
    assert!(shift(Field::TpDst) == 16 && word(Field::TcpFlags) == W_TP);
    assert!(shift(Field::TcpFlags) == 32);
};

/// IP protocol numbers that matter here.
mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const IGMP: u8 = 2;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AH: u8 = 51;
    pub const ICMP6: u8 = 58;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
}

#[inline(always)]
fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[inline(always)]
fn at2(b: &[u8], at: usize) -> [u8; 2] {
    [b[at], b[at + 1]]
}

#[inline(always)]
fn at4(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

/// A MAC address as a 48-bit big-endian number.
#[inline(always)]
fn mac(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes([
        0,
        0,
        b[at],
        b[at + 1],
        b[at + 2],
        b[at + 3],
        b[at + 4],
        b[at + 5],
    ])
}

#[inline(always)]
fn be128(b: &[u8], at: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    u128::from_be_bytes(a)
}

/// Extract the key of `frame` received on OpenFlow port `in_port` (with `tunnel` metadata when
/// it was decapsulated). See the module comment for what is filled when.
#[inline]
pub fn extract(frame: &[u8], in_port: u16, tunnel: Option<&Tunnel>) -> (FlowKey, Parsed) {
    let mut key = FlowKey::ZERO;
    let p = extract_into(&mut key, frame, in_port, tunnel);
    (key, p)
}

/// As `extract`, writing into `key` (every word is overwritten).
#[inline]
pub fn extract_into(
    key: &mut FlowKey,
    frame: &[u8],
    in_port: u16,
    tunnel: Option<&Tunnel>,
) -> Parsed {
    let mut p = Parsed::NONE;
    extract_to(key, &mut p, frame, in_port, tunnel);
    p
}

/// As `extract`, writing into `key` and `p` in place (every word and field is overwritten). A
/// node keeping arrays of keys and `Parsed`s uses this: a returned `Parsed` is assembled on the
/// stack field by field and then copied, which stalls store forwarding. Returns the words of
/// `key` it may have written (bit `j`: word `j`; every other word is zero), for
/// `FlowCache::lookup_batch_words`: the same frame always gives the same words.
#[inline]
pub fn extract_to(
    key: &mut FlowKey,
    p: &mut Parsed,
    frame: &[u8],
    in_port: u16,
    tunnel: Option<&Tunnel>,
) -> u32 {
    extract_fields(key, p, frame, in_port, tunnel);
    written_words(p, tunnel.is_some(), frame.len())
}

/// The key words of the usual packet (IPv4 with a transport header, no tunnel), in key order:
/// port, Ethernet source and VLAN, Ethernet destination and type, addresses, the IP word, the
/// transport word. Every other word of such a key is zero.
pub const IP4_L4_KEY_WORDS: [usize; 6] = [W_IN_PORT, W_SRC_TCI, W_DST_TYPE, W_NW, W_NW_MISC, W_TP];

/// The [`IP4_L4_KEY_WORDS`] of one key, in that order: the whole key of the usual packet,
/// without its 13 zero words.
pub type Ip4Words = [u64; 6];

/// The map `extract_to` returns for a key of the usual shape (the words of
/// [`IP4_L4_KEY_WORDS`]).
pub const IP4_L4_MAP: u32 = {
    let mut m = 0u32;
    let mut t = 0;
    while t < IP4_L4_KEY_WORDS.len() {
        m |= 1 << IP4_L4_KEY_WORDS[t];
        t += 1;
    }
    m
};

/// The [`Ip4Words`] of `key` (its other words are zero when its map is [`IP4_L4_MAP`]).
#[inline]
pub fn ip4_words(key: &FlowKey) -> Ip4Words {
    IP4_L4_KEY_WORDS.map(|j| key.w[j])
}

/// The whole key of an [`Ip4Words`] (the other words zero).
#[inline]
pub fn ip4_key(words: &Ip4Words) -> FlowKey {
    let mut key = FlowKey::ZERO;
    for (t, &j) in IP4_L4_KEY_WORDS.iter().enumerate() {
        key.w[j] = words[t];
    }
    key
}

/// The fast path of [`extract_to`] for the packet most traffic is made of: untagged Ethernet,
/// IPv4 with a 20-byte header and no fragmentation, then a complete TCP or UDP header. Returns
/// the key's [`Ip4Words`] and fills `p`, exactly as `extract_to` would (it would return
/// [`IP4_L4_MAP`]); `None` (and `p` untouched) for every other frame, which `extract_to` then
/// handles. It reads the header bytes once into registers and writes 48 bytes instead of a
/// 152-byte key.
#[inline(always)]
pub fn extract_ip4_l4(frame: &[u8], in_port: u16, p: &mut Parsed) -> Option<Ip4Words> {
    // Ethernet (14) + IPv4 (20) + the shorter transport header (UDP, 8).
    let h = frame.first_chunk::<42>()?;
    if be16(at2(h, 12)) != 0x0800 || h[14] & 0x0f != 5 {
        return None;
    }
    let total = be16(at2(h, 16)) as usize;
    let proto = h[23];
    // Not a fragment (no MF flag, offset zero): the transport header follows.
    if be16(at2(h, 20)) & 0x3fff != 0 || total + 14 > frame.len() {
        return None;
    }
    let l4_len = total.checked_sub(20)?;
    let tp = match proto {
        ipproto::UDP if l4_len >= 8 => be16(at2(h, 34)) as u64 | (be16(at2(h, 36)) as u64) << 16,
        ipproto::TCP if l4_len >= 20 => {
            // `total + 14 <= frame.len()` and `l4_len >= 20`: bytes 34..54 are there.
            let t = frame.get(34..54)?;
            let hlen = (t[12] >> 4) as usize * 4;
            if hlen < 20 || l4_len < hlen {
                return None;
            }
            let flags = be16(at2(t, 12)) & 0x0fff;
            be16(at2(t, 0)) as u64 | (be16(at2(t, 2)) as u64) << 16 | (flags as u64) << 32
        }
        _ => return None,
    };
    let src = u32::from_be_bytes(at4(h, 26));
    let dst = u32::from_be_bytes(at4(h, 30));
    *p = Parsed {
        l3_offset: 14,
        l4_offset: 34,
        l4_len: l4_len as u16,
        l3: L3::Ipv4,
        l4: if proto == ipproto::TCP {
            L4::Tcp
        } else {
            L4::Udp
        },
        frag: 0,
        vlan: false,
        received_tpid: 0,
        ipv6_routing: false,
        malformed: None,
    };
    Some([
        in_port as u64,
        mac(h, 6),
        mac(h, 0) | 0x0800 << 48,
        src as u64 | (dst as u64) << 32,
        proto as u64 | (h[15] as u64) << 8 | (h[22] as u64) << 16,
        tp,
    ])
}

const fn bit(w: usize) -> u32 {
    1 << w
}

/// The words `extract_fields` may have written, from what it found: the port (and the tunnel),
/// L2 when the frame has an Ethernet header, the L3 words of the network header found, the L4
/// word when a transport header was found, the ND addresses for ICMPv6. A word is included
/// whenever its header was found, written or not (a superset is all that is asked).
#[inline(always)]
fn written_words(p: &Parsed, tunnel: bool, len: usize) -> u32 {
    const IP4: u32 = bit(W_NW) | bit(W_NW_MISC);
    const IP6_ADDRS: u32 =
        bit(W_IP6_SRC) | bit(W_IP6_SRC + 1) | bit(W_IP6_DST) | bit(W_IP6_DST + 1);
    const ND: u32 = bit(W_ARP_SHA) | bit(W_ARP_THA);
    // By `L3` discriminant: None, Other, Ipv4, Ipv6, Arp (checked below).
    const _: () = assert!(
        L3::None as usize == 0
            && L3::Other as usize == 1
            && L3::Ipv4 as usize == 2
            && L3::Ipv6 as usize == 3
            && L3::Arp as usize == 4
    );
    const L3_WORDS: [u32; 5] = [0, 0, IP4, IP6_ADDRS | bit(W_NW_MISC), IP4 | ND];
    let mut words = bit(W_IN_PORT);
    if tunnel {
        words |= bit(W_TUN_ID) | bit(W_TUN);
    }
    if len >= 14 {
        words |= bit(W_SRC_TCI) | bit(W_DST_TYPE);
    }
    words |= L3_WORDS[p.l3 as usize];
    if p.l4 != L4::None {
        words |= bit(W_TP);
    }
    if p.l4 == L4::Icmp6 {
        // Neighbour discovery's link-layer addresses.
        words |= ND;
    }
    words
}

/// The body of `extract_to`.
#[inline(always)]
fn extract_fields(
    key: &mut FlowKey,
    p: &mut Parsed,
    frame: &[u8],
    in_port: u16,
    tunnel: Option<&Tunnel>,
) {
    *key = FlowKey::ZERO;
    key.w[W_IN_PORT] = in_port as u64;
    if let Some(t) = tunnel {
        key.w[W_TUN_ID] = t.tun_id;
        key.w[W_TUN] = t.tun_src as u64 | (t.tun_dst as u64) << 32;
    }
    *p = Parsed::NONE;
    if frame.len() < 14 {
        p.malformed = Some(Malformed::EthernetTooShort);
        return;
    }
    let dst = mac(frame, 0);
    let src = mac(frame, 6);
    let mut off = 12;
    let mut tci = 0u16;
    let mut dl_type = be16(at2(frame, 12));
    if dl_type == 0x8100 || dl_type == 0x88a8 {
        let tpid = dl_type;
        if frame.len() >= 18 {
            tci = be16(at2(frame, 14)) | VLAN_CFI;
            dl_type = be16(at2(frame, 16));
            off = 16;
            p.vlan = true;
            p.received_tpid = tpid;
        } else {
            p.malformed = Some(Malformed::VlanTruncated);
        }
    }
    off += 2;
    if dl_type < 0x600 {
        dl_type = 0x05ff;
        if let Some(llc) = frame.get(off..off + 8) {
            if llc[..6] == [0xaa, 0xaa, 0x03, 0, 0, 0] {
                off += 8;
                let t = be16(at2(llc, 6));
                if t >= 0x600 {
                    dl_type = t;
                }
            }
        }
    }
    key.w[W_SRC_TCI] = src | (tci as u64) << 48;
    key.w[W_DST_TYPE] = dst | (dl_type as u64) << 48;
    p.l3_offset = off as u16;
    if p.malformed.is_some() {
        return;
    }
    // `off <= frame.len()`: off is 14, 18, 22 or 26, each checked above.
    let l3 = &frame[off..];
    let (l4, proto) = match dl_type {
        0x0800 => match ipv4(key, l3, p) {
            Some(x) => x,
            None => return,
        },
        0x86dd => match ipv6(key, l3, p) {
            Some(x) => x,
            None => return,
        },
        0x0806 | 0x8035 => {
            arp(key, l3, p);
            return;
        }
        _ => {
            p.l3 = L3::Other;
            return;
        }
    };
    // `l4` is a sub-slice of `frame`: its start minus the frame's start is its offset.
    p.l4_offset = (l4.as_ptr() as usize - frame.as_ptr() as usize) as u16;
    p.l4_len = l4.len() as u16;
    if p.frag & FRAG_LATER != 0 {
        return;
    }
    transport(key, l4, proto, p);
}

/// IPv4: fills the L3 words; returns the L4 bytes (padding cut off) and the protocol.
#[inline(always)]
fn ipv4<'a>(key: &mut FlowKey, l3: &'a [u8], p: &mut Parsed) -> Option<(&'a [u8], u8)> {
    let Some(h) = l3.first_chunk::<20>() else {
        p.malformed = Some(Malformed::Ipv4Truncated);
        return None;
    };
    let ihl = (h[0] & 0x0f) as usize * 4;
    if ihl < 20 || l3.len() < ihl {
        p.malformed = Some(Malformed::Ipv4BadHeaderLength);
        return None;
    }
    let total = be16(at2(h, 2)) as usize;
    if total > l3.len() || ihl > total {
        p.malformed = Some(Malformed::Ipv4BadTotalLength);
        return None;
    }
    let frag_field = be16(at2(h, 6));
    let mut frag = 0u8;
    if frag_field & 0x3fff != 0 {
        frag = FRAG_ANY;
        if frag_field & 0x1fff != 0 {
            frag |= FRAG_LATER;
        }
    }
    let src = u32::from_be_bytes(at4(h, 12));
    let dst = u32::from_be_bytes(at4(h, 16));
    key.w[W_NW] = src as u64 | (dst as u64) << 32;
    let proto = h[9];
    key.w[W_NW_MISC] =
        proto as u64 | (h[1] as u64) << 8 | (h[8] as u64) << 16 | (frag as u64) << 24;
    p.l3 = L3::Ipv4;
    p.frag = frag;
    Some((&l3[ihl..total], proto))
}

/// IPv6: fills the L3 words and walks the extension headers; returns the upper-layer bytes
/// (padding cut off) and protocol.
#[inline(always)]
fn ipv6<'a>(key: &mut FlowKey, l3: &'a [u8], p: &mut Parsed) -> Option<(&'a [u8], u8)> {
    let Some(h) = l3.first_chunk::<40>() else {
        p.malformed = Some(Malformed::Ipv6Truncated);
        return None;
    };
    let plen = be16(at2(h, 4)) as usize;
    if 40 + plen > l3.len() {
        p.malformed = Some(Malformed::Ipv6BadPayloadLength);
        return None;
    }
    let src = be128(h, 8);
    let dst = be128(h, 24);
    key.w[W_IP6_SRC] = (src >> 64) as u64;
    key.w[W_IP6_SRC + 1] = src as u64;
    key.w[W_IP6_DST] = (dst >> 64) as u64;
    key.w[W_IP6_DST + 1] = dst as u64;
    p.l3 = L3::Ipv6;
    let first = u32::from_be_bytes(at4(h, 0));
    let tos = (first >> 20) as u8;
    let label = first & 0x000f_ffff;
    let ttl = h[7];
    let mut proto = h[6];
    let mut rest = &l3[40..40 + plen];
    let mut frag = 0u8;
    // Every extension header is at least 8 bytes long, so this ends within plen / 8 rounds.
    loop {
        match proto {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS | ipproto::AH => {
                let Some(ext) = rest.first_chunk::<8>() else {
                    p.malformed = Some(Malformed::Ipv6ExtensionTruncated);
                    return None;
                };
                let len = if proto == ipproto::AH {
                    (ext[1] as usize + 2) * 4
                } else {
                    (ext[1] as usize + 1) * 8
                };
                if proto == ipproto::ROUTING && ext[3] != 0 {
                    p.ipv6_routing = true;
                }
                proto = ext[0];
                let Some(r) = rest.get(len..) else {
                    p.malformed = Some(Malformed::Ipv6ExtensionTruncated);
                    return None;
                };
                rest = r;
            }
            ipproto::FRAGMENT => {
                let Some(ext) = rest.first_chunk::<8>() else {
                    p.malformed = Some(Malformed::Ipv6ExtensionTruncated);
                    return None;
                };
                proto = ext[0];
                rest = &rest[8..];
                let offlg = be16(at2(ext, 2));
                if offlg != 0 {
                    frag = FRAG_ANY;
                    if offlg & 0xfff8 != 0 {
                        frag |= FRAG_LATER;
                        proto = ipproto::FRAGMENT;
                        break;
                    }
                }
            }
            _ => break,
        }
    }
    key.w[W_NW_MISC] = proto as u64
        | (tos as u64) << 8
        | (ttl as u64) << 16
        | (frag as u64) << 24
        | (label as u64) << 32;
    p.frag = frag;
    Some((rest, proto))
}

/// ARP and RARP for Ethernet/IPv4.
#[inline(always)]
fn arp(key: &mut FlowKey, l3: &[u8], p: &mut Parsed) {
    let Some(a) = l3.first_chunk::<28>() else {
        p.malformed = Some(Malformed::ArpTruncated);
        return;
    };
    if be16(at2(a, 0)) != 1 || be16(at2(a, 2)) != 0x0800 || a[4] != 6 || a[5] != 4 {
        p.malformed = Some(Malformed::ArpNotEthernetIpv4);
        return;
    }
    p.l3 = L3::Arp;
    let spa = u32::from_be_bytes(at4(a, 14));
    let tpa = u32::from_be_bytes(at4(a, 24));
    key.w[W_NW] = spa as u64 | (tpa as u64) << 32;
    let op = be16(at2(a, 6));
    if op <= 0xff {
        key.w[W_NW_MISC] = op as u64;
    }
    key.w[W_ARP_SHA] = mac(a, 8);
    key.w[W_ARP_THA] = mac(a, 18);
}

/// The transport word, for a first fragment or a whole datagram.
#[inline(always)]
fn transport(key: &mut FlowKey, l4: &[u8], proto: u8, p: &mut Parsed) {
    match proto {
        ipproto::TCP => {
            let Some(t) = l4.first_chunk::<20>() else {
                p.malformed = Some(Malformed::TcpTruncated);
                return;
            };
            let hlen = (t[12] >> 4) as usize * 4;
            if hlen < 20 || l4.len() < hlen {
                p.malformed = Some(Malformed::TcpBadOffset);
                return;
            }
            let flags = be16(at2(t, 12)) & 0x0fff;
            key.w[W_TP] =
                be16(at2(t, 0)) as u64 | (be16(at2(t, 2)) as u64) << 16 | (flags as u64) << 32;
            p.l4 = L4::Tcp;
        }
        ipproto::UDP => {
            let Some(u) = l4.first_chunk::<8>() else {
                p.malformed = Some(Malformed::UdpTruncated);
                return;
            };
            key.w[W_TP] = be16(at2(u, 0)) as u64 | (be16(at2(u, 2)) as u64) << 16;
            p.l4 = L4::Udp;
        }
        ipproto::SCTP => {
            let Some(s) = l4.first_chunk::<12>() else {
                p.malformed = Some(Malformed::SctpTruncated);
                return;
            };
            key.w[W_TP] = be16(at2(s, 0)) as u64 | (be16(at2(s, 2)) as u64) << 16;
            p.l4 = L4::Sctp;
        }
        ipproto::ICMP | ipproto::IGMP | ipproto::ICMP6 => {
            let Some(i) = l4.first_chunk::<8>() else {
                p.malformed = Some(Malformed::IcmpTruncated);
                return;
            };
            key.w[W_TP] = i[0] as u64 | (i[1] as u64) << 16;
            p.l4 = match proto {
                ipproto::ICMP => L4::Icmp,
                ipproto::IGMP => L4::Igmp,
                _ => L4::Icmp6,
            };
            if proto == ipproto::ICMP6 && i[1] == 0 && (i[0] == 135 || i[0] == 136) {
                neighbour_discovery(key, &l4[8..], p);
            }
        }
        _ => {}
    }
}

/// Link-layer address options of a neighbour solicitation/advertisement (after the 8-byte
/// ICMPv6 header): the first of each kind goes into `arp_sha`/`arp_tha`.
#[cold]
fn neighbour_discovery(key: &mut FlowKey, body: &[u8], p: &mut Parsed) {
    // The 16-byte target address first; without it there are no options.
    let Some(mut opts) = body.get(16..) else {
        return;
    };
    let (mut sll, mut tll) = (0u64, 0u64);
    while let Some(o) = opts.first_chunk::<8>() {
        let len = o[1] as usize * 8;
        if len == 0 || len > opts.len() {
            if len == 0 {
                p.malformed = Some(Malformed::NdBadOption);
            }
            break;
        }
        if len == 8 && (o[0] == 1 || o[0] == 2) {
            let slot = if o[0] == 1 { &mut sll } else { &mut tll };
            if *slot != 0 {
                // Open vSwitch treats a repeated option as invalid: both addresses zero.
                p.malformed = Some(Malformed::NdBadOption);
                return;
            }
            *slot = mac(o, 2);
        }
        opts = &opts[len..];
    }
    key.w[W_ARP_SHA] = sll;
    key.w[W_ARP_THA] = tll;
}

#[cfg(test)]
#[path = "extract_tests.rs"]
pub(crate) mod tests;

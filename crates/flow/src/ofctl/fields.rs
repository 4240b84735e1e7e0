//! The match fields `ovs-ofctl` knows by name (with Open vSwitch's aliases), their value syntax,
//! whether they take a mask, and the prerequisite each needs in the match (`tp_dst` needs
//! `tcp`/`udp`/`sctp`, `nw_dst` needs `ip` or `arp`, ...). Owns the tables only; never parses.

use crate::key::Field;
use crate::rule::Match;

/// How a field's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An OpenFlow port number or name (`LOCAL`).
    Port,
    /// An integer (decimal or hex).
    Int,
    /// An Ethernet address.
    Mac,
    /// An IPv4 address (or prefix).
    Ipv4,
    /// An IPv6 address (or prefix).
    Ipv6,
    /// `dl_vlan`: a VLAN id, or 0xffff for "no VLAN".
    VlanVid,
    /// `dl_vlan_pcp` (and OpenFlow 1.3's `vlan_pcp`).
    VlanPcp,
    /// OpenFlow 1.3's `vlan_vid`: 0x1000 | VID (0 for "no VLAN"), with an optional mask over
    /// those 13 bits.
    OxmVlanVid,
    /// `nw_tos`: the DSCP bits of the TOS byte.
    NwTos,
    /// `ip_frag`: no, yes, first, later, not_later.
    Frag,
    /// `tcp_flags`: `+syn-ack`, `syn|ack`, or numbers.
    TcpFlags,
}

/// What the match must say before a field may be matched or set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prereq {
    /// Nothing.
    None,
    /// IPv4.
    Ip4,
    /// IPv6.
    Ip6,
    /// IPv4 or IPv6.
    IpAny,
    /// IPv4, ARP or RARP.
    Ip4OrArp,
    /// IPv4, IPv6, ARP or RARP.
    IpAnyOrArp,
    /// ARP or RARP.
    Arp,
    /// TCP, UDP or SCTP over IPv4 or IPv6.
    L4,
    /// TCP, UDP, SCTP, ICMP or ICMPv6 (`tp_src`/`tp_dst` double as ICMP type/code).
    L4OrIcmp,
    /// TCP over IPv4 or IPv6.
    Tcp,
    /// UDP over IPv4 or IPv6.
    Udp,
    /// SCTP over IPv4 or IPv6.
    Sctp,
    /// ICMPv4.
    Icmp4,
    /// ICMPv4 or ICMPv6.
    IcmpAny,
    /// ICMPv6.
    Icmp6,
    /// A VLAN tag (matched, or pushed by an earlier action).
    Vlan,
}

pub(crate) const ETH_IP: u16 = 0x0800;
pub(crate) const ETH_IPV6: u16 = 0x86dd;
pub(crate) const ETH_ARP: u16 = 0x0806;
pub(crate) const ETH_RARP: u16 = 0x8035;
pub(crate) const PROTO_ICMP: u8 = 1;
pub(crate) const PROTO_TCP: u8 = 6;
pub(crate) const PROTO_UDP: u8 = 17;
pub(crate) const PROTO_SCTP: u8 = 132;
pub(crate) const PROTO_ICMP6: u8 = 58;

/// The Ethernet type and IP protocol a match pins down (fully masked), if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ctx {
    pub dl_type: Option<u16>,
    pub nw_proto: Option<u8>,
    /// The match says "a fragment other than the first" (no transport header to look at).
    pub later_fragment: bool,
    /// Made from a rule's match (not the unknown context of a group bucket).
    pub from_match: bool,
}

impl Ctx {
    pub(crate) fn of(m: &Match) -> Ctx {
        let dl_type =
            (m.mask.get(Field::EthType) == 0xffff).then(|| m.key.get(Field::EthType) as u16);
        let nw_proto =
            (m.mask.get(Field::NwProto) == 0xff).then(|| m.key.get(Field::NwProto) as u8);
        let later = u128::from(crate::key::FRAG_LATER);
        let later_fragment =
            m.mask.get(Field::NwFrag) & later != 0 && m.key.get(Field::NwFrag) & later != 0;
        Ctx {
            dl_type,
            nw_proto,
            later_fragment,
            from_match: true,
        }
    }

    /// The same without the fragment state (to tell which part of a prerequisite failed).
    pub(crate) fn ignoring_fragments(&self) -> Ctx {
        Ctx {
            later_fragment: false,
            ..*self
        }
    }

    pub(crate) fn is_ip4(&self) -> bool {
        self.dl_type == Some(ETH_IP)
    }
    pub(crate) fn is_ip6(&self) -> bool {
        self.dl_type == Some(ETH_IPV6)
    }
    pub(crate) fn is_ip_any(&self) -> bool {
        self.is_ip4() || self.is_ip6()
    }
    pub(crate) fn is_arp(&self) -> bool {
        matches!(self.dl_type, Some(ETH_ARP) | Some(ETH_RARP))
    }
    /// TCP, UDP or SCTP `p` with a transport header (as Open vSwitch: not a later fragment).
    fn proto(&self, p: u8) -> bool {
        self.is_ip_any() && self.nw_proto == Some(p) && !self.later_fragment
    }
    pub(crate) fn is_tcp(&self) -> bool {
        self.proto(PROTO_TCP)
    }
    pub(crate) fn is_udp(&self) -> bool {
        self.proto(PROTO_UDP)
    }
    pub(crate) fn is_sctp(&self) -> bool {
        self.proto(PROTO_SCTP)
    }
    /// ICMP (Open vSwitch matches type and code even on a later fragment).
    pub(crate) fn is_icmp4(&self) -> bool {
        self.is_ip4() && self.nw_proto == Some(PROTO_ICMP)
    }
    pub(crate) fn is_icmp6(&self) -> bool {
        self.is_ip6() && self.nw_proto == Some(PROTO_ICMP6)
    }
}

impl Prereq {
    /// True when `ctx` (and `vlan`: a tag is known to be present) satisfies it.
    pub(crate) fn met(self, ctx: &Ctx, vlan: bool) -> bool {
        match self {
            Prereq::None => true,
            Prereq::Ip4 => ctx.is_ip4(),
            Prereq::Ip6 => ctx.is_ip6(),
            Prereq::IpAny => ctx.is_ip_any(),
            Prereq::Ip4OrArp => ctx.is_ip4() || ctx.is_arp(),
            Prereq::IpAnyOrArp => ctx.is_ip_any() || ctx.is_arp(),
            Prereq::Arp => ctx.is_arp(),
            Prereq::L4 => ctx.is_tcp() || ctx.is_udp() || ctx.is_sctp(),
            Prereq::L4OrIcmp => {
                ctx.is_tcp() || ctx.is_udp() || ctx.is_sctp() || ctx.is_icmp4() || ctx.is_icmp6()
            }
            Prereq::Tcp => ctx.is_tcp(),
            Prereq::Udp => ctx.is_udp(),
            Prereq::Sctp => ctx.is_sctp(),
            Prereq::Icmp4 => ctx.is_icmp4(),
            Prereq::IcmpAny => ctx.is_icmp4() || ctx.is_icmp6(),
            Prereq::Icmp6 => ctx.is_icmp6(),
            Prereq::Vlan => vlan,
        }
    }

    /// What the match must say, in words.
    pub(crate) fn needs(self) -> &'static str {
        match self {
            Prereq::None => "nothing",
            Prereq::Ip4 => "IPv4 (`ip` or `dl_type=0x0800`)",
            Prereq::Ip6 => "IPv6 (`ipv6` or `dl_type=0x86dd`)",
            Prereq::IpAny => "IPv4 or IPv6 (`ip`, `ipv6`)",
            Prereq::Ip4OrArp => "IPv4 or ARP (`ip`, `arp`, `rarp`)",
            Prereq::IpAnyOrArp => "IPv4, IPv6 or ARP (`ip`, `ipv6`, `arp`)",
            Prereq::Arp => "ARP (`arp` or `rarp`)",
            Prereq::L4 => "TCP, UDP or SCTP (`tcp`, `udp`, `sctp`, `tcp6`, `udp6`, `sctp6`)",
            Prereq::L4OrIcmp => "TCP, UDP, SCTP or ICMP (`tcp`, `udp`, `sctp`, `icmp`, `tcp6`, `udp6`, `sctp6`, `icmp6`)",
            Prereq::Tcp => "TCP (`tcp` or `tcp6`)",
            Prereq::Udp => "UDP (`udp` or `udp6`)",
            Prereq::Sctp => "SCTP (`sctp` or `sctp6`)",
            Prereq::Icmp4 => "ICMP (`icmp`)",
            Prereq::IcmpAny => "ICMP (`icmp` or `icmp6`)",
            Prereq::Icmp6 => "ICMPv6 (`icmp6`)",
            Prereq::Vlan => {
                "a VLAN tag (`dl_vlan=N`, `vlan_tci=0x1000/0x1000`, or an earlier `push_vlan`)"
            }
        }
    }

    /// A shorthand that would satisfy it.
    pub(crate) fn example(self) -> &'static str {
        match self {
            Prereq::None => "",
            Prereq::Ip4 | Prereq::Ip4OrArp | Prereq::IpAny | Prereq::IpAnyOrArp => "ip",
            Prereq::Ip6 => "ipv6",
            Prereq::Arp => "arp",
            Prereq::L4 | Prereq::L4OrIcmp | Prereq::Tcp => "tcp",
            Prereq::Udp => "udp",
            Prereq::Sctp => "sctp",
            Prereq::Icmp4 | Prereq::IcmpAny => "icmp",
            Prereq::Icmp6 => "icmp6",
            Prereq::Vlan => "dl_vlan=10",
        }
    }
}

/// A match field by one of its names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatchField {
    pub field: Field,
    pub kind: Kind,
    pub maskable: bool,
    pub prereq: Prereq,
}

const fn mf(field: Field, kind: Kind, maskable: bool, prereq: Prereq) -> MatchField {
    MatchField {
        field,
        kind,
        maskable,
        prereq,
    }
}

/// Every match field name `ofctl` accepts (for error messages).
pub(crate) const ACCEPTED_FIELDS: &str = "table, priority, cookie, idle_timeout, hard_timeout, \
    ip, ipv6, arp, rarp, tcp, udp, sctp, icmp, tcp6, udp6, sctp6, icmp6, in_port, pkt_mark, \
    dl_vlan, dl_vlan_pcp/vlan_pcp, vlan_vid, vlan_tci, dl_src/eth_src, dl_dst/eth_dst, dl_type/eth_type, nw_src/ip_src, \
    nw_dst/ip_dst, ipv6_src, ipv6_dst, ipv6_label, nw_proto/ip_proto, nw_tos, ip_dscp, \
    nw_ecn/ip_ecn, nw_ttl, ip_frag/nw_frag, tp_src, tp_dst, tcp_src, tcp_dst, udp_src, udp_dst, \
    sctp_src, sctp_dst, tcp_flags, icmp_type, icmp_code, icmpv6_type, icmpv6_code, arp_op, \
    arp_spa, arp_tpa, arp_sha, arp_tha, tun_id/tunnel_id, tun_src, tun_dst, metadata, reg0..reg7";

/// The match field called `name`.
pub(crate) fn match_field(name: &str) -> Option<MatchField> {
    use Field as F;
    use Kind as K;
    use Prereq as P;
    Some(match name {
        "in_port" => mf(F::InPort, K::Port, false, P::None),
        "dl_vlan" => mf(F::VlanVid, K::VlanVid, false, P::None),
        "dl_vlan_pcp" | "vlan_pcp" => mf(F::VlanPcp, K::VlanPcp, false, P::None),
        "vlan_vid" => mf(F::VlanVid, K::OxmVlanVid, true, P::None),
        "pkt_mark" => mf(F::PktMark, K::Int, true, P::None),
        "vlan_tci" => mf(F::VlanTci, K::Int, true, P::None),
        "dl_src" | "eth_src" => mf(F::EthSrc, K::Mac, true, P::None),
        "dl_dst" | "eth_dst" => mf(F::EthDst, K::Mac, true, P::None),
        "dl_type" | "eth_type" => mf(F::EthType, K::Int, false, P::None),
        "nw_src" | "ip_src" => mf(F::NwSrc, K::Ipv4, true, P::Ip4OrArp),
        "nw_dst" | "ip_dst" => mf(F::NwDst, K::Ipv4, true, P::Ip4OrArp),
        "arp_spa" => mf(F::NwSrc, K::Ipv4, true, P::Arp),
        "arp_tpa" => mf(F::NwDst, K::Ipv4, true, P::Arp),
        "ipv6_src" => mf(F::Ipv6Src, K::Ipv6, true, P::Ip6),
        "ipv6_dst" => mf(F::Ipv6Dst, K::Ipv6, true, P::Ip6),
        "ipv6_label" => mf(F::Ipv6Label, K::Int, true, P::Ip6),
        "nw_proto" | "ip_proto" => mf(F::NwProto, K::Int, false, P::IpAnyOrArp),
        "arp_op" => mf(F::NwProto, K::Int, false, P::Arp),
        "nw_tos" => mf(F::IpDscp, K::NwTos, false, P::IpAny),
        "ip_dscp" => mf(F::IpDscp, K::Int, false, P::IpAny),
        "nw_ecn" | "ip_ecn" => mf(F::NwEcn, K::Int, false, P::IpAny),
        "nw_ttl" => mf(F::NwTtl, K::Int, false, P::IpAny),
        "ip_frag" | "nw_frag" => mf(F::NwFrag, K::Frag, false, P::IpAny),
        "tp_src" => mf(F::TpSrc, K::Int, true, P::L4OrIcmp),
        "tp_dst" => mf(F::TpDst, K::Int, true, P::L4OrIcmp),
        "tcp_src" => mf(F::TpSrc, K::Int, true, P::Tcp),
        "tcp_dst" => mf(F::TpDst, K::Int, true, P::Tcp),
        "udp_src" => mf(F::TpSrc, K::Int, true, P::Udp),
        "udp_dst" => mf(F::TpDst, K::Int, true, P::Udp),
        "sctp_src" => mf(F::TpSrc, K::Int, true, P::Sctp),
        "sctp_dst" => mf(F::TpDst, K::Int, true, P::Sctp),
        "tcp_flags" => mf(F::TcpFlags, K::TcpFlags, true, P::Tcp),
        "icmp_type" => mf(F::TpSrc, K::Int, false, P::IcmpAny),
        "icmp_code" => mf(F::TpDst, K::Int, false, P::IcmpAny),
        "icmpv6_type" => mf(F::TpSrc, K::Int, false, P::Icmp6),
        "icmpv6_code" => mf(F::TpDst, K::Int, false, P::Icmp6),
        "arp_sha" => mf(F::ArpSha, K::Mac, true, P::Arp),
        "arp_tha" => mf(F::ArpTha, K::Mac, true, P::Arp),
        "tun_id" | "tunnel_id" => mf(F::TunId, K::Int, true, P::None),
        "tun_src" => mf(F::TunSrc, K::Ipv4, true, P::None),
        "tun_dst" => mf(F::TunDst, K::Ipv4, true, P::None),
        "metadata" => mf(F::Metadata, K::Int, true, P::None),
        _ => {
            let f = reg(name)?;
            mf(f, K::Int, true, P::None)
        }
    })
}

/// `reg0`..`reg7`.
pub(crate) fn reg(name: &str) -> Option<Field> {
    Some(match name {
        "reg0" => Field::Reg0,
        "reg1" => Field::Reg1,
        "reg2" => Field::Reg2,
        "reg3" => Field::Reg3,
        "reg4" => Field::Reg4,
        "reg5" => Field::Reg5,
        "reg6" => Field::Reg6,
        "reg7" => Field::Reg7,
        _ => return None,
    })
}

/// The register number of a register field.
pub(crate) fn reg_index(f: Field) -> Option<usize> {
    const REGS: [Field; 8] = [
        Field::Reg0,
        Field::Reg1,
        Field::Reg2,
        Field::Reg3,
        Field::Reg4,
        Field::Reg5,
        Field::Reg6,
        Field::Reg7,
    ];
    REGS.iter().position(|r| *r == f)
}

/// The shorthand keywords: Ethernet type and IP protocol they set.
pub(crate) fn shorthand(name: &str) -> Option<(u16, Option<u8>)> {
    Some(match name {
        "ip" => (ETH_IP, None),
        "ipv6" => (ETH_IPV6, None),
        "arp" => (ETH_ARP, None),
        "rarp" => (ETH_RARP, None),
        "icmp" => (ETH_IP, Some(PROTO_ICMP)),
        "tcp" => (ETH_IP, Some(PROTO_TCP)),
        "udp" => (ETH_IP, Some(PROTO_UDP)),
        "sctp" => (ETH_IP, Some(PROTO_SCTP)),
        "icmp6" => (ETH_IPV6, Some(PROTO_ICMP6)),
        "tcp6" => (ETH_IPV6, Some(PROTO_TCP)),
        "udp6" => (ETH_IPV6, Some(PROTO_UDP)),
        "sctp6" => (ETH_IPV6, Some(PROTO_SCTP)),
        _ => return None,
    })
}

/// TCP flag names in Open vSwitch's order, and their bits.
pub(crate) const TCP_FLAGS: [(&str, u16); 9] = [
    ("fin", 0x001),
    ("syn", 0x002),
    ("rst", 0x004),
    ("psh", 0x008),
    ("ack", 0x010),
    ("urg", 0x020),
    ("ece", 0x040),
    ("cwr", 0x080),
    ("ns", 0x100),
];

/// Reserved OpenFlow port numbers and their names (as `ofputil_format_port` prints them).
pub(crate) const PORT_NAMES: [(&str, u16); 8] = [
    ("IN_PORT", 0xfff8),
    ("TABLE", 0xfff9),
    ("NORMAL", 0xfffa),
    ("FLOOD", 0xfffb),
    ("ALL", 0xfffc),
    ("CONTROLLER", 0xfffd),
    ("LOCAL", 0xfffe),
    ("NONE", 0xffff),
];

/// OpenFlow's `LOCAL` port number.
pub(crate) const PORT_LOCAL: u16 = 0xfffe;
/// OpenFlow's `CONTROLLER` port number.
pub(crate) const PORT_CONTROLLER: u16 = 0xfffd;
/// OpenFlow's `TABLE` port number (a packet-out's "run it through the tables").
pub(crate) const PORT_TABLE: u16 = 0xfff9;
/// Highest ordinary port number (`OFPP_MAX`).
pub(crate) const PORT_MAX: u16 = 0xff00;

/// A port written as a number or a reserved name.
pub(crate) fn parse_port(s: &str) -> Option<u16> {
    if let Some((_, n)) = PORT_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Some(*n);
    }
    let v = super::values::parse_uint(s)?;
    u16::try_from(v).ok()
}

/// A port number as OVS prints it (reserved numbers by name).
pub(crate) fn fmt_port(p: u16) -> String {
    match PORT_NAMES.iter().find(|(_, n)| *n == p) {
        Some((name, _)) => name.to_string(),
        None => p.to_string(),
    }
}

//! Test packets as Open vSwitch flow strings (what `ofproto/trace` takes) and as vecplane
//! `FlowKey`s, both ways, for the fields the oracle tests use. Owns only that conversion; it
//! never talks to Open vSwitch. A field it does not know is an error naming it.

use flow::key::VLAN_CFI;
use flow::{Field, FlowKey};
use std::net::{Ipv4Addr, Ipv6Addr};

const ETH_IP: u128 = 0x0800;
const ETH_ARP: u128 = 0x0806;
const ETH_IPV6: u128 = 0x86dd;

fn mac(s: &str) -> Result<u128, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("`{s}`: expected a MAC address xx:xx:xx:xx:xx:xx"));
    }
    parts.iter().try_fold(0u128, |acc, p| {
        u8::from_str_radix(p, 16)
            .map(|b| (acc << 8) | u128::from(b))
            .map_err(|_| format!("`{s}`: expected a MAC address"))
    })
}

fn num(s: &str) -> Result<u128, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u128::from_str_radix(h, 16),
        None => s.parse::<u128>(),
    };
    r.map_err(|_| format!("`{s}`: expected a number"))
}

fn fmt_mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A packet in OVS flow syntax (`in_port=1,tcp,nw_src=198.18.1.1,tcp_dst=80`) as a key. Fields
/// not given are zero, as for `ofproto/trace`.
pub fn parse_packet(text: &str) -> Result<FlowKey, String> {
    let mut k = FlowKey::ZERO;
    for tok in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = match tok.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (tok, None),
        };
        let Some(v) = value else {
            let (ty, proto) = match name {
                "ip" => (ETH_IP, None),
                "tcp" => (ETH_IP, Some(6)),
                "udp" => (ETH_IP, Some(17)),
                "icmp" => (ETH_IP, Some(1)),
                "sctp" => (ETH_IP, Some(132)),
                "arp" => (ETH_ARP, None),
                "ipv6" => (ETH_IPV6, None),
                "tcp6" => (ETH_IPV6, Some(6)),
                "udp6" => (ETH_IPV6, Some(17)),
                "icmp6" => (ETH_IPV6, Some(58)),
                _ => return Err(format!("`{name}`: unknown protocol keyword")),
            };
            k.set(Field::EthType, ty);
            if let Some(p) = proto {
                k.set(Field::NwProto, p);
            }
            continue;
        };
        let ip4 = |v: &str| {
            v.parse::<Ipv4Addr>()
                .map(|a| u128::from(u32::from(a)))
                .map_err(|_| format!("`{v}`: expected an IPv4 address"))
        };
        let ip6 = |v: &str| {
            v.parse::<Ipv6Addr>()
                .map(u128::from)
                .map_err(|_| format!("`{v}`: expected an IPv6 address"))
        };
        match name {
            "in_port" => k.set(Field::InPort, num(v)?),
            "dl_src" | "eth_src" => k.set(Field::EthSrc, mac(v)?),
            "dl_dst" | "eth_dst" => k.set(Field::EthDst, mac(v)?),
            "dl_type" | "eth_type" => k.set(Field::EthType, num(v)?),
            "dl_vlan" => {
                k.set(Field::VlanVid, num(v)?);
                k.set(Field::VlanPresent, 1);
            }
            "dl_vlan_pcp" => {
                k.set(Field::VlanPcp, num(v)?);
                k.set(Field::VlanPresent, 1);
            }
            "vlan_tci" => k.set(Field::VlanTci, num(v)?),
            "nw_src" | "arp_spa" => k.set(Field::NwSrc, ip4(v)?),
            "nw_dst" | "arp_tpa" => k.set(Field::NwDst, ip4(v)?),
            "ipv6_src" => k.set(Field::Ipv6Src, ip6(v)?),
            "ipv6_dst" => k.set(Field::Ipv6Dst, ip6(v)?),
            "ipv6_label" => k.set(Field::Ipv6Label, num(v)?),
            "nw_proto" | "arp_op" => k.set(Field::NwProto, num(v)?),
            "nw_ttl" => k.set(Field::NwTtl, num(v)?),
            "nw_tos" => k.set(Field::IpDscp, num(v)? >> 2),
            "ip_dscp" => k.set(Field::IpDscp, num(v)?),
            "nw_ecn" => k.set(Field::NwEcn, num(v)?),
            "arp_sha" => k.set(Field::ArpSha, mac(v)?),
            "arp_tha" => k.set(Field::ArpTha, mac(v)?),
            "tp_src" | "tcp_src" | "udp_src" | "icmp_type" | "icmpv6_type" => {
                k.set(Field::TpSrc, num(v)?)
            }
            "tp_dst" | "tcp_dst" | "udp_dst" | "icmp_code" | "icmpv6_code" => {
                k.set(Field::TpDst, num(v)?)
            }
            "tcp_flags" => k.set(Field::TcpFlags, num(v)?),
            "tun_id" => k.set(Field::TunId, num(v)?),
            "metadata" => k.set(Field::Metadata, num(v)?),
            _ => return Err(format!("`{name}`: unknown field in a test packet")),
        }
    }
    Ok(k)
}

/// A key as an OVS flow string for `ofproto/trace` (transport ports with the protocol's own
/// names, which `ofproto/trace` wants; only fields that are set or needed).
pub fn to_ovs_flow(k: &FlowKey) -> String {
    let mut out = vec![format!("in_port={}", k.get(Field::InPort))];
    let eth_type = k.get(Field::EthType);
    let proto = k.get(Field::NwProto);
    let shorthand = match (eth_type, proto) {
        (ETH_IP, 6) => Some("tcp"),
        (ETH_IP, 17) => Some("udp"),
        (ETH_IP, 1) => Some("icmp"),
        (ETH_IPV6, 6) => Some("tcp6"),
        (ETH_IPV6, 17) => Some("udp6"),
        (ETH_IPV6, 58) => Some("icmp6"),
        (ETH_IP, _) => Some("ip"),
        (ETH_IPV6, _) => Some("ipv6"),
        (ETH_ARP, _) => Some("arp"),
        _ => None,
    };
    for (f, name) in [(Field::EthSrc, "dl_src"), (Field::EthDst, "dl_dst")] {
        if k.get(f) != 0 {
            out.push(format!("{name}={}", fmt_mac(k.get(f))));
        }
    }
    if k.get(Field::VlanPresent) != 0 {
        out.push(format!("dl_vlan={}", k.get(Field::VlanVid)));
        out.push(format!("dl_vlan_pcp={}", k.get(Field::VlanPcp)));
    }
    match shorthand {
        Some(s) => out.push(s.to_string()),
        None => out.push(format!("dl_type={eth_type:#06x}")),
    }
    let v4 = |f| Ipv4Addr::from(k.get(f) as u32).to_string();
    let v6 = |f| Ipv6Addr::from(k.get(f)).to_string();
    match eth_type {
        ETH_IP | ETH_IPV6 => {
            if eth_type == ETH_IP {
                out.push(format!("nw_src={}", v4(Field::NwSrc)));
                out.push(format!("nw_dst={}", v4(Field::NwDst)));
            } else {
                out.push(format!("ipv6_src={}", v6(Field::Ipv6Src)));
                out.push(format!("ipv6_dst={}", v6(Field::Ipv6Dst)));
                if k.get(Field::Ipv6Label) != 0 {
                    out.push(format!("ipv6_label={:#x}", k.get(Field::Ipv6Label)));
                }
            }
            if shorthand == Some("ip") || shorthand == Some("ipv6") {
                out.push(format!("nw_proto={proto}"));
            }
            out.push(format!("nw_ttl={}", k.get(Field::NwTtl)));
            out.push(format!("ip_dscp={}", k.get(Field::IpDscp)));
            out.push(format!("nw_ecn={}", k.get(Field::NwEcn)));
            let (s, d) = match proto {
                6 => ("tcp_src", "tcp_dst"),
                17 => ("udp_src", "udp_dst"),
                1 => ("icmp_type", "icmp_code"),
                58 => ("icmpv6_type", "icmpv6_code"),
                _ => ("", ""),
            };
            if !s.is_empty() {
                out.push(format!("{s}={}", k.get(Field::TpSrc)));
                out.push(format!("{d}={}", k.get(Field::TpDst)));
            }
        }
        ETH_ARP => {
            out.push(format!("arp_op={proto}"));
            out.push(format!("arp_spa={}", v4(Field::NwSrc)));
            out.push(format!("arp_tpa={}", v4(Field::NwDst)));
            for (f, name) in [(Field::ArpSha, "arp_sha"), (Field::ArpTha, "arp_tha")] {
                if k.get(f) != 0 {
                    out.push(format!("{name}={}", fmt_mac(k.get(f))));
                }
            }
        }
        _ => {}
    }
    out.join(",")
}

/// True when the key carries a VLAN tag.
#[allow(dead_code)]
pub fn tagged(k: &FlowKey) -> bool {
    k.get(Field::VlanTci) & u128::from(VLAN_CFI) != 0
}

//! Printing matches and rules exactly as Open vSwitch 3.1 does: the field order and shorthands of
//! its `match_format` (`tcp,nw_dst=198.18.2.0/24,tp_dst=80`), the `dump-flows` line with or
//! without statistics, and the "Megaflow:" line of `ofproto/trace`. Never parses.

use super::actions::fmt_actions;
use super::fields::{
    fmt_port, Ctx, ETH_ARP, ETH_IP, ETH_IPV6, ETH_RARP, PROTO_ICMP, PROTO_ICMP6, PROTO_SCTP,
    PROTO_TCP, PROTO_UDP, TCP_FLAGS,
};
use super::values::{fmt_hash_x, fmt_ipv4_masked, fmt_ipv6_masked, fmt_mac, ones};
use super::RuleStats;
use crate::key::{Field, FRAG_ANY, FRAG_LATER, VLAN_CFI};
use crate::rule::{Match, Rule, DEFAULT_PRIORITY};

fn get(m: &Match, f: Field) -> (u128, u128) {
    (m.key.get(f), m.mask.get(f))
}

fn push_hex(out: &mut Vec<String>, name: &str, (v, m): (u128, u128), full: u128) {
    if m == 0 {
        return;
    }
    if m == full {
        out.push(format!("{name}={}", fmt_hash_x(v)));
    } else {
        out.push(format!("{name}={}/{}", fmt_hash_x(v), fmt_hash_x(m)));
    }
}

fn push_mac(out: &mut Vec<String>, name: &str, (v, m): (u128, u128)) {
    if m == 0 {
        return;
    }
    if m == ones(48) {
        out.push(format!("{name}={}", fmt_mac(v)));
    } else {
        out.push(format!("{name}={}/{}", fmt_mac(v), fmt_mac(m)));
    }
}

fn push_ipv4(out: &mut Vec<String>, name: &str, (v, m): (u128, u128)) {
    if m != 0 {
        out.push(format!("{name}={}", fmt_ipv4_masked(v, m)));
    }
}

fn push_ipv6(out: &mut Vec<String>, name: &str, (v, m): (u128, u128)) {
    if m != 0 {
        out.push(format!("{name}={}", fmt_ipv6_masked(v, m)));
    }
}

/// A 16-bit transport field: decimal when exact, `0x../0x..` when masked.
fn push_be16(out: &mut Vec<String>, name: &str, (v, m): (u128, u128)) {
    if m == 0 {
        return;
    }
    if m == 0xffff {
        out.push(format!("{name}={v}"));
    } else {
        out.push(format!("{name}={v:#x}/{m:#x}"));
    }
}

fn tcp_flag_name(bit: u16) -> String {
    match TCP_FLAGS.iter().find(|(_, b)| *b == bit) {
        Some((n, _)) => (*n).to_string(),
        None => format!("[{bit:x}]"),
    }
}

fn fmt_tcp_flags(v: u16, m: u16) -> String {
    if m == 0xfff {
        if v == 0 {
            return "0".into();
        }
        let names: Vec<String> = (0..12)
            .map(|i| 1u16 << i)
            .filter(|b| v & b != 0)
            .map(tcp_flag_name)
            .collect();
        return names.join("|");
    }
    let mut s = String::new();
    for b in (0..12).map(|i| 1u16 << i).filter(|b| m & b != 0) {
        s.push(if v & b != 0 { '+' } else { '-' });
        s.push_str(&tcp_flag_name(b));
    }
    s
}

/// The match's `key=value` items in Open vSwitch's order (no priority); `megaflow`: as `ofproto/trace` prints a megaflow (a masked
/// ICMP type or code as `icmp_type=V/M`), else as a rule (such a match as `tp_src=V/M`, since a
/// rule's `icmp_type` takes no mask and must parse again).
fn match_parts(m: &Match, out: &mut Vec<String>, megaflow: bool) {
    let ctx = Ctx::of(m).ignoring_fragments();
    // Open vSwitch prints the packet mark before the shorthand.
    push_hex(out, "pkt_mark", get(m, Field::PktMark), ones(32));
    let mut skip_type = false;
    let mut skip_proto = false;
    if let Some(t) = ctx.dl_type {
        skip_type = true;
        let proto = ctx.nw_proto;
        let (name, used_proto) = match (t, proto) {
            (ETH_IP, Some(PROTO_ICMP)) => ("icmp", true),
            (ETH_IP, Some(PROTO_TCP)) => ("tcp", true),
            (ETH_IP, Some(PROTO_UDP)) => ("udp", true),
            (ETH_IP, Some(PROTO_SCTP)) => ("sctp", true),
            (ETH_IP, _) => ("ip", false),
            (ETH_IPV6, Some(PROTO_ICMP6)) => ("icmp6", true),
            (ETH_IPV6, Some(PROTO_TCP)) => ("tcp6", true),
            (ETH_IPV6, Some(PROTO_UDP)) => ("udp6", true),
            (ETH_IPV6, Some(PROTO_SCTP)) => ("sctp6", true),
            (ETH_IPV6, _) => ("ipv6", false),
            (ETH_ARP, _) => ("arp", false),
            (ETH_RARP, _) => ("rarp", false),
            _ => {
                skip_type = false;
                ("", false)
            }
        };
        if skip_type {
            out.push(name.to_string());
        }
        skip_proto = used_proto;
    }
    for (i, r) in [
        Field::Reg0,
        Field::Reg1,
        Field::Reg2,
        Field::Reg3,
        Field::Reg4,
        Field::Reg5,
        Field::Reg6,
        Field::Reg7,
    ]
    .iter()
    .enumerate()
    {
        push_hex(out, &format!("reg{i}"), get(m, *r), ones(32));
    }
    push_hex(out, "tun_id", get(m, Field::TunId), ones(64));
    push_ipv4(out, "tun_src", get(m, Field::TunSrc));
    push_ipv4(out, "tun_dst", get(m, Field::TunDst));
    push_hex(out, "metadata", get(m, Field::Metadata), ones(64));
    let (p, pm) = get(m, Field::InPort);
    if pm != 0 {
        out.push(format!("in_port={}", fmt_port(p as u16)));
    }
    let (tci, tm) = get(m, Field::VlanTci);
    if tm != 0 {
        let vid_mask = tm & 0x0fff;
        let pcp_mask = tm & 0xe000;
        let cfi = tm & u128::from(VLAN_CFI);
        if cfi != 0
            && tci & u128::from(VLAN_CFI) != 0
            && (vid_mask == 0 || vid_mask == 0x0fff)
            && (pcp_mask == 0 || pcp_mask == 0xe000)
            && (vid_mask != 0 || pcp_mask != 0)
        {
            if vid_mask != 0 {
                out.push(format!("dl_vlan={}", tci & 0xfff));
            }
            if pcp_mask != 0 {
                out.push(format!("dl_vlan_pcp={}", tci >> 13));
            }
        } else if tm == 0xffff {
            out.push(format!("vlan_tci={tci:#06x}"));
        } else {
            out.push(format!("vlan_tci={tci:#06x}/{tm:#06x}"));
        }
    }
    push_mac(out, "dl_src", get(m, Field::EthSrc));
    push_mac(out, "dl_dst", get(m, Field::EthDst));
    let (t, tmask) = get(m, Field::EthType);
    if !skip_type && tmask != 0 {
        out.push(format!("dl_type={t:#06x}"));
    }
    if ctx.is_ip6() {
        push_ipv6(out, "ipv6_src", get(m, Field::Ipv6Src));
        push_ipv6(out, "ipv6_dst", get(m, Field::Ipv6Dst));
        let (l, lm) = get(m, Field::Ipv6Label);
        if lm == 0xfffff {
            out.push(format!("ipv6_label={l:#07x}"));
        } else if lm != 0 {
            out.push(format!("ipv6_label={l:#07x}/{lm:#07x}"));
        }
    } else if ctx.is_arp() {
        push_ipv4(out, "arp_spa", get(m, Field::NwSrc));
        push_ipv4(out, "arp_tpa", get(m, Field::NwDst));
    } else {
        push_ipv4(out, "nw_src", get(m, Field::NwSrc));
        push_ipv4(out, "nw_dst", get(m, Field::NwDst));
    }
    let (proto, proto_mask) = get(m, Field::NwProto);
    if !skip_proto && proto_mask != 0 {
        if ctx.is_arp() {
            out.push(format!("arp_op={proto}"));
        } else {
            out.push(format!("nw_proto={proto}"));
        }
    }
    if ctx.is_arp() {
        push_mac(out, "arp_sha", get(m, Field::ArpSha));
        push_mac(out, "arp_tha", get(m, Field::ArpTha));
    }
    let (dscp, dscp_mask) = get(m, Field::IpDscp);
    if dscp_mask != 0 {
        out.push(format!("nw_tos={}", (dscp & dscp_mask) << 2));
    }
    let (ecn, ecn_mask) = get(m, Field::NwEcn);
    if ecn_mask != 0 {
        out.push(format!("nw_ecn={}", ecn & ecn_mask));
    }
    let (ttl, ttl_mask) = get(m, Field::NwTtl);
    if ttl_mask != 0 {
        out.push(format!("nw_ttl={ttl}"));
    }
    let (frag, frag_mask) = get(m, Field::NwFrag);
    let (any, later) = (u128::from(FRAG_ANY), u128::from(FRAG_LATER));
    if frag_mask == any | later {
        out.push(
            match frag {
                0 => "nw_frag=no",
                f if f == any => "nw_frag=first",
                f if f == any | later => "nw_frag=later",
                _ => "nw_frag=<error>",
            }
            .to_string(),
        );
    } else if frag_mask == any {
        out.push(
            if frag & any != 0 {
                "nw_frag=yes"
            } else {
                "nw_frag=no"
            }
            .to_string(),
        );
    } else if frag_mask == later {
        out.push(
            if frag & later != 0 {
                "nw_frag=later"
            } else {
                "nw_frag=not_later"
            }
            .to_string(),
        );
    }
    let (tps, tps_m) = get(m, Field::TpSrc);
    let (tpd, tpd_m) = get(m, Field::TpDst);
    if ctx.is_icmp4() || ctx.is_icmp6() {
        // As OVS: a 16-bit field, so a megaflow's 8-bit ICMP mask prints `icmp_type=0x8/0xff`.
        let name = |icmp, tp, mask: u128| if megaflow || mask == 0xffff { icmp } else { tp };
        push_be16(out, name("icmp_type", "tp_src", tps_m), (tps, tps_m));
        push_be16(out, name("icmp_code", "tp_dst", tpd_m), (tpd, tpd_m));
    } else {
        push_be16(out, "tp_src", (tps, tps_m));
        push_be16(out, "tp_dst", (tpd, tpd_m));
    }
    let (fl, fl_m) = get(m, Field::TcpFlags);
    if ctx.is_tcp() && fl_m != 0 {
        out.push(format!(
            "tcp_flags={}",
            fmt_tcp_flags(fl as u16, fl_m as u16)
        ));
    }
}

/// The match as OVS prints it, with `priority=N,` first unless it is the default.
pub(crate) fn fmt_match(m: &Match, priority: u16) -> String {
    let mut out = Vec::new();
    if priority != DEFAULT_PRIORITY {
        out.push(format!("priority={priority}"));
    }
    match_parts(m, &mut out, false);
    out.join(",")
}

/// A `dump-flows` line (without the leading space OVS puts before each).
pub(crate) fn fmt_rule(r: &Rule, stats: Option<&RuleStats>) -> String {
    let mut s = String::new();
    if let Some(st) = stats {
        s.push_str(&format!(
            "cookie={:#x}, duration={}, table={}, n_packets={}, n_bytes={}, ",
            r.cookie,
            fmt_duration(st.duration_secs),
            r.table,
            st.packets,
            st.bytes
        ));
    } else {
        if r.cookie != 0 {
            s.push_str(&format!("cookie={:#x}, ", r.cookie));
        }
        if r.table != 0 {
            s.push_str(&format!("table={}, ", r.table));
        }
    }
    if r.idle_timeout != 0 {
        s.push_str(&format!("idle_timeout={}, ", r.idle_timeout));
    }
    if r.hard_timeout != 0 {
        s.push_str(&format!("hard_timeout={}, ", r.hard_timeout));
    }
    if let Some(age) = stats.and_then(|st| st.idle_age_secs) {
        s.push_str(&format!("idle_age={age}, "));
    }
    s.push_str(&fmt_match(&r.m, r.priority));
    if !s.is_empty() && !s.ends_with(' ') {
        s.push(' ');
    }
    s.push_str("actions=");
    s.push_str(&fmt_actions(
        &r.actions,
        &Ctx::of(&r.m).ignoring_fragments(),
    ));
    s
}

/// A megaflow as `ofproto/trace` prints it after "Megaflow: ".
pub(crate) fn fmt_megaflow(m: &Match) -> String {
    let mut out = vec!["recirc_id=0".to_string(), "eth".to_string()];
    match_parts(m, &mut out, true);
    out.join(",")
}

/// A duration as OVS prints it: `5s`, `5.123s` (whole milliseconds) or `5.123456789s`.
fn fmt_duration(secs: f64) -> String {
    let secs = if secs.is_finite() && secs >= 0.0 {
        secs
    } else {
        0.0
    };
    let whole = secs.trunc();
    let mut nanos = ((secs - whole) * 1e9).round() as u64;
    let mut whole = whole as u64;
    if nanos >= 1_000_000_000 {
        whole += 1;
        nanos -= 1_000_000_000;
    }
    if nanos == 0 {
        format!("{whole}s")
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{whole}.{:03}s", nanos / 1_000_000)
    } else {
        format!("{whole}.{nanos:09}s")
    }
}

//! Actions in `ovs-ofctl` syntax: parsing every spelling vecplane supports (`output`, the
//! reserved ports, `set_field`, `load`, the `mod_*` family, VLAN push/pop, `dec_ttl`,
//! `set_tunnel`, `resubmit`, `goto_table`, `group`) into `Action`s, with the checks Open vSwitch
//! makes against the match, and printing them as `ovs-ofctl -O OpenFlow13 dump-flows` does.
//! Never panics on any text.

use super::error::OfctlError;
use super::fields::{
    fmt_port, parse_port, reg, reg_index, Ctx, Prereq, PORT_CONTROLLER, PORT_LOCAL, PORT_MAX,
};
use super::more_actions::{self as more, Stage};
use super::parse::{tokens, MAX_TABLE};
use super::values::{
    fmt_hash_x, fmt_ipv6, fmt_mac, ipv4_masked, ipv6_masked, mac_masked, ones, parse_uint,
    uint_masked,
};
use super::OpenFlowVersion;
use crate::key::{Field, VLAN_CFI};
use crate::rule::{Action, Match, PortRef};

/// Every action `ofctl` accepts (for error messages).
pub(crate) const ACCEPTED_ACTIONS: &str = "output:PORT (or a bare PORT), in_port, flood, all, \
    normal, local, drop, set_field:VALUE[/MASK]->FIELD, load:VALUE->FIELD[BITS], mod_dl_src, \
    mod_dl_dst, mod_nw_src, mod_nw_dst, mod_nw_tos, mod_nw_ecn, mod_tp_src, mod_tp_dst, \
    mod_nw_ttl, mod_vlan_vid, mod_vlan_pcp, strip_vlan, pop_vlan, push_vlan:ETHERTYPE, dec_ttl, \
    dec_ttl(ID,...), set_tunnel, set_tunnel64, resubmit:PORT, resubmit([PORT],[TABLE]), \
    goto_table:TABLE, group:ID, output(port=PORT,max_len=N), move:SRC[A..B]->DST[C..D], \
    note:HEX, set_queue:N, exit, clone(ACTIONS), clear_actions, write_actions(ACTIONS), \
    controller, controller:MAX_LEN, controller(max_len=N,reason=R,id=N), output:CONTROLLER";

/// How a settable field's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VKind {
    Mac,
    Ipv4,
    Ipv6,
    Dec,
    Hex,
    Port,
}

/// A field `set_field` may write: our field, its value syntax, width and prerequisite.
#[derive(Clone, Copy, Debug)]
struct Target {
    field: Field,
    kind: VKind,
    bits: u32,
    prereq: Prereq,
}

const fn tg(field: Field, kind: VKind, bits: u32, prereq: Prereq) -> Target {
    Target {
        field,
        kind,
        bits,
        prereq,
    }
}

/// The `set_field` target called `name` (OXM-style names and the match aliases).
fn set_target(name: &str) -> Option<Target> {
    use Field as F;
    use Prereq as P;
    use VKind as K;
    Some(match name {
        "eth_src" | "dl_src" => tg(F::EthSrc, K::Mac, 48, P::None),
        "eth_dst" | "dl_dst" => tg(F::EthDst, K::Mac, 48, P::None),
        "vlan_tci" => tg(F::VlanTci, K::Hex, 16, P::None),
        // The value is checked and stored by `parse_set_field` (OpenFlow 1.3's 0x1000 | VID).
        "vlan_vid" => tg(F::VlanVid, K::Dec, 13, P::Vlan),
        "vlan_pcp" | "dl_vlan_pcp" => tg(F::VlanPcp, K::Dec, 3, P::Vlan),
        "ip_src" | "nw_src" => tg(F::NwSrc, K::Ipv4, 32, P::Ip4),
        "ip_dst" | "nw_dst" => tg(F::NwDst, K::Ipv4, 32, P::Ip4),
        "arp_spa" => tg(F::NwSrc, K::Ipv4, 32, P::Arp),
        "arp_tpa" => tg(F::NwDst, K::Ipv4, 32, P::Arp),
        "ipv6_src" => tg(F::Ipv6Src, K::Ipv6, 128, P::Ip6),
        "ipv6_dst" => tg(F::Ipv6Dst, K::Ipv6, 128, P::Ip6),
        "ipv6_label" => tg(F::Ipv6Label, K::Hex, 20, P::Ip6),
        "ip_dscp" => tg(F::IpDscp, K::Dec, 6, P::IpAny),
        "nw_ecn" | "ip_ecn" => tg(F::NwEcn, K::Dec, 2, P::IpAny),
        "nw_ttl" => tg(F::NwTtl, K::Dec, 8, P::IpAny),
        "tcp_src" | "tp_src" => tg(F::TpSrc, K::Dec, 16, P::Tcp),
        "tcp_dst" | "tp_dst" => tg(F::TpDst, K::Dec, 16, P::Tcp),
        "udp_src" => tg(F::TpSrc, K::Dec, 16, P::Udp),
        "udp_dst" => tg(F::TpDst, K::Dec, 16, P::Udp),
        "sctp_src" => tg(F::TpSrc, K::Dec, 16, P::Sctp),
        "sctp_dst" => tg(F::TpDst, K::Dec, 16, P::Sctp),
        "icmp_type" => tg(F::TpSrc, K::Dec, 8, P::Icmp4),
        "icmp_code" => tg(F::TpDst, K::Dec, 8, P::Icmp4),
        "icmpv6_type" => tg(F::TpSrc, K::Dec, 8, P::Icmp6),
        "icmpv6_code" => tg(F::TpDst, K::Dec, 8, P::Icmp6),
        "arp_op" => tg(F::NwProto, K::Dec, 8, P::Arp),
        "arp_sha" => tg(F::ArpSha, K::Mac, 48, P::Arp),
        "arp_tha" => tg(F::ArpTha, K::Mac, 48, P::Arp),
        "tun_id" | "tunnel_id" => tg(F::TunId, K::Hex, 64, P::None),
        "tun_src" => tg(F::TunSrc, K::Ipv4, 32, P::None),
        "tun_dst" => tg(F::TunDst, K::Ipv4, 32, P::None),
        "metadata" => tg(F::Metadata, K::Hex, 64, P::None),
        "in_port" => tg(F::InPort, K::Port, 16, P::None),
        "pkt_mark" => tg(F::PktMark, K::Hex, 32, P::None),
        _ => tg(reg(name)?, K::Hex, 32, P::None),
    })
}

/// A field `load` may write, by its NXM/OXM name: our field, the width the name has, prereq.
fn nxm_target(name: &str) -> Option<Target> {
    use Field as F;
    use Prereq as P;
    use VKind as K;
    Some(match name {
        "NXM_OF_IN_PORT" | "OXM_OF_IN_PORT" => tg(F::InPort, K::Port, 16, P::None),
        "NXM_NX_TUN_ID" | "OXM_OF_TUNNEL_ID" => tg(F::TunId, K::Hex, 64, P::None),
        "NXM_NX_TUN_IPV4_SRC" => tg(F::TunSrc, K::Ipv4, 32, P::None),
        "NXM_NX_TUN_IPV4_DST" => tg(F::TunDst, K::Ipv4, 32, P::None),
        "OXM_OF_METADATA" => tg(F::Metadata, K::Hex, 64, P::None),
        "NXM_OF_ETH_SRC" | "OXM_OF_ETH_SRC" => tg(F::EthSrc, K::Mac, 48, P::None),
        "NXM_OF_ETH_DST" | "OXM_OF_ETH_DST" => tg(F::EthDst, K::Mac, 48, P::None),
        "NXM_OF_VLAN_TCI" => tg(F::VlanTci, K::Hex, 16, P::None),
        "NXM_OF_IP_SRC" | "OXM_OF_IPV4_SRC" => tg(F::NwSrc, K::Ipv4, 32, P::Ip4),
        "NXM_OF_IP_DST" | "OXM_OF_IPV4_DST" => tg(F::NwDst, K::Ipv4, 32, P::Ip4),
        "NXM_OF_ARP_SPA" | "OXM_OF_ARP_SPA" => tg(F::NwSrc, K::Ipv4, 32, P::Arp),
        "NXM_OF_ARP_TPA" | "OXM_OF_ARP_TPA" => tg(F::NwDst, K::Ipv4, 32, P::Arp),
        "NXM_NX_IPV6_SRC" | "OXM_OF_IPV6_SRC" => tg(F::Ipv6Src, K::Ipv6, 128, P::Ip6),
        "NXM_NX_IPV6_DST" | "OXM_OF_IPV6_DST" => tg(F::Ipv6Dst, K::Ipv6, 128, P::Ip6),
        "NXM_NX_IPV6_LABEL" | "OXM_OF_IPV6_FLABEL" => tg(F::Ipv6Label, K::Hex, 20, P::Ip6),
        "OXM_OF_IP_DSCP" => tg(F::IpDscp, K::Dec, 6, P::IpAny),
        "NXM_NX_IP_ECN" | "OXM_OF_IP_ECN" => tg(F::NwEcn, K::Dec, 2, P::IpAny),
        "NXM_NX_IP_TTL" => tg(F::NwTtl, K::Dec, 8, P::IpAny),
        "NXM_OF_TCP_SRC" | "OXM_OF_TCP_SRC" => tg(F::TpSrc, K::Dec, 16, P::Tcp),
        "NXM_OF_TCP_DST" | "OXM_OF_TCP_DST" => tg(F::TpDst, K::Dec, 16, P::Tcp),
        "NXM_OF_UDP_SRC" | "OXM_OF_UDP_SRC" => tg(F::TpSrc, K::Dec, 16, P::Udp),
        "NXM_OF_UDP_DST" | "OXM_OF_UDP_DST" => tg(F::TpDst, K::Dec, 16, P::Udp),
        "OXM_OF_SCTP_SRC" => tg(F::TpSrc, K::Dec, 16, P::Sctp),
        "OXM_OF_SCTP_DST" => tg(F::TpDst, K::Dec, 16, P::Sctp),
        "NXM_OF_ICMP_TYPE" | "OXM_OF_ICMPV4_TYPE" => tg(F::TpSrc, K::Dec, 8, P::Icmp4),
        "NXM_OF_ICMP_CODE" | "OXM_OF_ICMPV4_CODE" => tg(F::TpDst, K::Dec, 8, P::Icmp4),
        "NXM_NX_ICMPV6_TYPE" | "OXM_OF_ICMPV6_TYPE" => tg(F::TpSrc, K::Dec, 8, P::Icmp6),
        "NXM_NX_ICMPV6_CODE" | "OXM_OF_ICMPV6_CODE" => tg(F::TpDst, K::Dec, 8, P::Icmp6),
        "NXM_NX_ARP_SHA" | "OXM_OF_ARP_SHA" => tg(F::ArpSha, K::Mac, 48, P::Arp),
        "NXM_NX_ARP_THA" | "OXM_OF_ARP_THA" => tg(F::ArpTha, K::Mac, 48, P::Arp),
        "NXM_NX_PKT_MARK" => tg(F::PktMark, K::Hex, 32, P::None),
        _ => {
            let n = name.strip_prefix("NXM_NX_REG")?;
            let f = reg(&format!("reg{n}"))?;
            tg(f, K::Hex, 32, P::None)
        }
    })
}

/// A field `move` reads (`readable`) or writes, by NXM/OXM or field name. Read-only fields
/// (`NXM_OF_ETH_TYPE`, `NXM_OF_IP_PROTO`) may be read only; the VLAN fields are not moved
/// (vecplane keeps one tag in the key, and a move into it would have to push one).
fn move_field(name: &str, readable: bool) -> Option<more::MoveField> {
    let read_only = match name {
        "NXM_OF_ETH_TYPE" | "OXM_OF_ETH_TYPE" | "eth_type" | "dl_type" => {
            Some((Field::EthType, 16, Prereq::None))
        }
        "NXM_OF_IP_PROTO" | "OXM_OF_IP_PROTO" | "ip_proto" | "nw_proto" => {
            Some((Field::NwProto, 8, Prereq::IpAny))
        }
        _ => None,
    };
    if let Some(f) = read_only {
        return readable.then_some(f);
    }
    let t = match name {
        "NXM_OF_VLAN_TCI" | "vlan_tci" | "vlan_vid" | "vlan_pcp" | "dl_vlan_pcp" => return None,
        _ => nxm_target(name).or_else(|| set_target(name))?,
    };
    Some((t.field, t.bits, t.prereq))
}

/// The NXM name OVS prints in `load:` for `field` in a rule whose match says `ctx`.
fn nxm_name(field: Field, ctx: &Ctx) -> String {
    use Field as F;
    let tp = |tcp: &str, udp: &str, sctp: &str, icmp: &str, icmp6: &str| {
        if ctx.is_udp() {
            udp
        } else if ctx.is_sctp() {
            sctp
        } else if ctx.is_icmp4() {
            icmp
        } else if ctx.is_icmp6() {
            icmp6
        } else {
            tcp
        }
        .to_string()
    };
    match field {
        F::InPort => "NXM_OF_IN_PORT".into(),
        F::TunId => "NXM_NX_TUN_ID".into(),
        F::TunSrc => "NXM_NX_TUN_IPV4_SRC".into(),
        F::TunDst => "NXM_NX_TUN_IPV4_DST".into(),
        F::Metadata => "OXM_OF_METADATA".into(),
        F::EthSrc => "NXM_OF_ETH_SRC".into(),
        F::EthDst => "NXM_OF_ETH_DST".into(),
        F::VlanTci | F::VlanVid | F::VlanPcp | F::VlanPresent => "NXM_OF_VLAN_TCI".into(),
        F::EthType => "NXM_OF_ETH_TYPE".into(),
        F::NwSrc if ctx.is_arp() => "NXM_OF_ARP_SPA".into(),
        F::NwDst if ctx.is_arp() => "NXM_OF_ARP_TPA".into(),
        F::NwSrc => "NXM_OF_IP_SRC".into(),
        F::NwDst => "NXM_OF_IP_DST".into(),
        F::Ipv6Src => "NXM_NX_IPV6_SRC".into(),
        F::Ipv6Dst => "NXM_NX_IPV6_DST".into(),
        F::NwProto if ctx.is_arp() => "NXM_OF_ARP_OP".into(),
        F::NwProto => "NXM_OF_IP_PROTO".into(),
        F::NwEcn => "NXM_NX_IP_ECN".into(),
        F::IpDscp => "OXM_OF_IP_DSCP".into(),
        F::NwTtl => "NXM_NX_IP_TTL".into(),
        F::NwFrag => "NXM_NX_IP_FRAG".into(),
        F::Ipv6Label => "NXM_NX_IPV6_LABEL".into(),
        F::ArpSha => "NXM_NX_ARP_SHA".into(),
        F::ArpTha => "NXM_NX_ARP_THA".into(),
        F::TpSrc => tp(
            "NXM_OF_TCP_SRC",
            "NXM_OF_UDP_SRC",
            "OXM_OF_SCTP_SRC",
            "NXM_OF_ICMP_TYPE",
            "NXM_NX_ICMPV6_TYPE",
        ),
        F::TpDst => tp(
            "NXM_OF_TCP_DST",
            "NXM_OF_UDP_DST",
            "OXM_OF_SCTP_DST",
            "NXM_OF_ICMP_CODE",
            "NXM_NX_ICMPV6_CODE",
        ),
        F::TcpFlags => "NXM_NX_TCP_FLAGS".into(),
        F::PktMark => "NXM_NX_PKT_MARK".into(),
        f => match reg_index(f) {
            Some(i) => format!("NXM_NX_REG{i}"),
            None => f.name().to_string(),
        },
    }
}

/// The `set_field` name OVS prints for `field` in a rule whose match says `ctx`.
fn oxm_name(field: Field, ctx: &Ctx) -> &'static str {
    use Field as F;
    let tp = |tcp, udp, sctp, icmp, icmp6| {
        if ctx.is_udp() {
            udp
        } else if ctx.is_sctp() {
            sctp
        } else if ctx.is_icmp4() {
            icmp
        } else if ctx.is_icmp6() {
            icmp6
        } else {
            tcp
        }
    };
    match field {
        F::EthSrc => "eth_src",
        F::EthDst => "eth_dst",
        F::VlanTci => "vlan_tci",
        F::VlanVid => "vlan_vid",
        F::VlanPcp => "vlan_pcp",
        F::NwSrc if ctx.is_arp() => "arp_spa",
        F::NwDst if ctx.is_arp() => "arp_tpa",
        F::NwSrc => "ip_src",
        F::NwDst => "ip_dst",
        F::Ipv6Src => "ipv6_src",
        F::Ipv6Dst => "ipv6_dst",
        F::Ipv6Label => "ipv6_label",
        F::IpDscp => "ip_dscp",
        F::NwEcn => "nw_ecn",
        F::NwTtl => "nw_ttl",
        F::NwProto if ctx.is_arp() => "arp_op",
        F::NwProto => "ip_proto",
        F::TpSrc => tp("tcp_src", "udp_src", "sctp_src", "icmp_type", "icmpv6_type"),
        F::TpDst => tp("tcp_dst", "udp_dst", "sctp_dst", "icmp_code", "icmpv6_code"),
        F::ArpSha => "arp_sha",
        F::ArpTha => "arp_tha",
        F::TunId => "tun_id",
        F::TunSrc => "tun_src",
        F::TunDst => "tun_dst",
        F::Metadata => "metadata",
        F::InPort => "in_port",
        F::PktMark => "pkt_mark",
        f => f.name(),
    }
}

/// Parse an action list in the context of a rule's match and table (None: unknown, so the
/// checks against them are skipped, as for a group bucket).
pub(crate) fn parse_actions_in(
    s: &str,
    m: Option<&Match>,
    table: Option<u8>,
) -> Result<Vec<Action>, OfctlError> {
    parse_actions_as(s, m, table, OpenFlowVersion::default())
}

/// [`parse_actions_in`] for rules sent as `version`: over OpenFlow 1.0, its own actions
/// (`mod_nw_tos`, `mod_tp_src`, `mod_tp_dst`) are not checked against the match,
/// as Open vSwitch does not check them there (they change only packets that have the field).
pub(crate) fn parse_actions_as(
    s: &str,
    m: Option<&Match>,
    table: Option<u8>,
    version: OpenFlowVersion,
) -> Result<Vec<Action>, OfctlError> {
    let of10 = version == OpenFlowVersion::OpenFlow10;
    let toks = tokens(s)?;
    let ctx = m.map(Ctx::of);
    let mut vlan = m.is_some_and(|m| {
        m.mask.get(Field::VlanTci) & u128::from(VLAN_CFI) != 0
            && m.key.get(Field::VlanTci) & u128::from(VLAN_CFI) != 0
    });
    // VLAN tags the packet has at this point (Open vSwitch handles at most two).
    let mut tags = usize::from(vlan);
    let mut out: Vec<Action> = Vec::new();
    let mut goto_seen: Option<String> = None;
    let mut stage = Stage::Apply;
    for t in &toks {
        if t.key.eq_ignore_ascii_case("drop") && t.value.is_none() {
            if toks.len() > 1 {
                return Err(OfctlError::syntax(
                    t.text,
                    "`drop` must be the only action (an empty action list drops too)",
                ));
            }
            return Ok(Vec::new());
        }
        if let Some(g) = &goto_seen {
            return Err(OfctlError::syntax(
                t.text,
                format!("nothing may follow `{g}` (goto_table is the last instruction)"),
            ));
        }
        let check = |p: Prereq, vlan: bool| -> Result<(), OfctlError> {
            match &ctx {
                Some(c) if !p.met(c, vlan) => Err(OfctlError::MissingPrerequisite {
                    token: t.text.to_string(),
                    needs: p.needs(),
                    example: p.example(),
                }),
                _ => Ok(()),
            }
        };
        let key = t.key.to_ascii_lowercase();
        let v = t.value.unwrap_or("");
        let need_value = |what: &str| -> Result<&str, OfctlError> {
            t.value
                .filter(|v| !v.is_empty())
                .ok_or_else(|| OfctlError::syntax(t.text, format!("`{}` needs {what}", t.key)))
        };
        let next_stage = match key.as_str() {
            "clear_actions" => Stage::Clear,
            "write_actions" => Stage::Write,
            "goto_table" => Stage::Goto,
            _ => Stage::Apply,
        };
        stage.advance(next_stage, t.text)?;
        match key.as_str() {
            "output" if t.text.contains('(') => out.push(more::parse_output_trunc(t)?),
            "note" => out.push(more::parse_note(t)?),
            "controller" => out.push(more::parse_controller(t)?),
            "set_queue" => out.push(more::parse_set_queue(t)?),
            "exit" if t.value.is_none() => out.push(Action::Exit),
            "clear_actions" if t.value.is_none() => out.push(Action::ClearActions),
            "dec_ttl" if t.value.is_some() => out.push(more::parse_dec_ttl_ids(t)?),
            "clone" | "write_actions" if t.text.contains('(') => {
                // The nested list is checked against the same match; it holds no instruction.
                let inner = parse_actions_as(v, m, None, version)?;
                more::check_nested(&key, &inner, t.text)?;
                out.push(if key == "clone" {
                    Action::Clone(inner)
                } else {
                    Action::WriteActions(inner)
                });
            }
            "move" => {
                let (a, sp, dp) =
                    more::parse_move(need_value("SRC[BITS]->DST[BITS]")?, t.text, move_field)?;
                check(sp, vlan)?;
                check(dp, vlan)?;
                out.push(a);
            }
            "mod_nw_ttl" => {
                let n = small(t, need_value("a TTL")?, 255, "0..=255")?;
                check(Prereq::IpAny, vlan)?;
                out.push(set(Field::NwTtl, n, 0xff));
            }
            "output" => out.push(output_action(need_value("a port")?, t.text)?),
            "in_port" | "flood" | "all" | "normal" | "local" if t.value.is_none() => {
                out.push(output_action(t.key, t.text)?)
            }
            k if t.value.is_none() && k.bytes().all(|c| c.is_ascii_digit()) => {
                out.push(output_action(t.key, t.text)?)
            }
            "set_field" => {
                let a = parse_set_field(need_value("VALUE->FIELD")?, t.text)?;
                check(a.1, vlan)?;
                out.push(a.0);
            }
            "load" => {
                let (a, p) = parse_load(need_value("VALUE->FIELD[BITS]")?, t.text)?;
                check(p, vlan)?;
                // A load into only the ECN bits of NXM_OF_IP_TOS writes nothing (as in OVS).
                if !matches!(a, Action::SetField { mask: 0, .. }) {
                    out.push(a);
                }
            }
            "mod_dl_src" | "mod_dl_dst" => {
                let f = if key == "mod_dl_src" {
                    Field::EthSrc
                } else {
                    Field::EthDst
                };
                let (val, _) = mac_masked(t.key, need_value("an Ethernet address")?)
                    .ok()
                    .filter(|_| !v.contains('/'))
                    .ok_or_else(|| {
                        OfctlError::value(t.key, t.text, "accepted: xx:xx:xx:xx:xx:xx")
                    })?;
                out.push(set(f, val, ones(48)));
            }
            "mod_nw_src" | "mod_nw_dst" => {
                let f = if key == "mod_nw_src" {
                    Field::NwSrc
                } else {
                    Field::NwDst
                };
                let (val, _) = ipv4_masked(t.key, need_value("an IPv4 address")?)
                    .ok()
                    .filter(|_| !v.contains('/'))
                    .ok_or_else(|| OfctlError::value(t.key, t.text, "accepted: A.B.C.D"))?;
                check(Prereq::Ip4, vlan)?;
                out.push(set(f, val, ones(32)));
            }
            "mod_nw_tos" => {
                let n = small(
                    t,
                    need_value("a TOS value")?,
                    255,
                    "0..=255 with the two low bits 0",
                )?;
                if n & 3 != 0 {
                    return Err(OfctlError::value(
                        t.key,
                        t.text,
                        "accepted: 0..=255 with the two low (ECN) bits 0",
                    ));
                }
                if !of10 {
                    check(Prereq::IpAny, vlan)?;
                }
                out.push(set(Field::IpDscp, n >> 2, 0x3f));
            }
            "mod_nw_ecn" => {
                let n = small(t, need_value("an ECN value")?, 3, "0..=3")?;
                check(Prereq::IpAny, vlan)?;
                out.push(set(Field::NwEcn, n, 3));
            }
            "mod_tp_src" | "mod_tp_dst" => {
                let f = if key == "mod_tp_src" {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                let n = small(t, need_value("a port number")?, 0xffff, "0..=65535")?;
                if !of10 {
                    check(Prereq::L4, vlan)?;
                }
                out.push(set(f, n, 0xffff));
            }
            "mod_vlan_vid" | "mod_vlan_pcp" => {
                let (f, n, m) = if key == "mod_vlan_vid" {
                    (
                        Field::VlanVid,
                        small(t, need_value("a VLAN id")?, 0xfff, "0..=4095")?,
                        0xfff,
                    )
                } else {
                    (
                        Field::VlanPcp,
                        small(t, need_value("a VLAN priority")?, 7, "0..=7")?,
                        7,
                    )
                };
                if !vlan {
                    // As OpenFlow 1.3 carries it: push a tag when the match does not promise one.
                    out.push(Action::PushVlan(0x8100));
                    vlan = true;
                    tags += 1;
                }
                out.push(set(f, n, m));
            }
            "strip_vlan" | "pop_vlan" if t.value.is_none() => {
                out.push(Action::PopVlan);
                tags = tags.saturating_sub(1);
                vlan = tags > 0;
            }
            "push_vlan" => {
                let n = parse_uint(v)
                    .filter(|n| *n == 0x8100 || *n == 0x88a8)
                    .ok_or_else(|| {
                        OfctlError::value(t.key, t.text, "accepted: 0x8100 or 0x88a8")
                    })?;
                if tags >= 2 {
                    return Err(OfctlError::syntax(
                        t.text,
                        "a packet carries at most two VLAN tags (Open vSwitch refuses a third)",
                    ));
                }
                out.push(Action::PushVlan(n as u16));
                vlan = true;
                tags += 1;
            }
            "dec_ttl" if t.value.is_none() => out.push(Action::DecTtl),
            "set_tunnel" | "set_tunnel64" => {
                let n = small(
                    t,
                    need_value("a tunnel id")?,
                    u128::from(u64::MAX),
                    "a 64-bit number",
                )?;
                out.push(set(Field::TunId, n, u128::from(u64::MAX)));
            }
            "resubmit" => out.push(parse_resubmit(t)?),
            "goto_table" => {
                let n = parse_uint(v)
                    .filter(|n| *n <= u128::from(MAX_TABLE) + 1)
                    .ok_or_else(|| {
                        OfctlError::value(t.key, t.text, "accepted: a table number 1..=254")
                    })? as u8;
                if let Some(cur) = table {
                    if n <= cur {
                        return Err(OfctlError::BadGoto {
                            token: t.text.to_string(),
                            table: cur,
                        });
                    }
                }
                goto_seen = Some(t.text.to_string());
                out.push(Action::GotoTable(n));
            }
            "group" => {
                let n = parse_uint(v).filter(|n| *n <= 0xffff_ff00).ok_or_else(|| {
                    OfctlError::value(t.key, t.text, "accepted: a group id 0..=4294967040")
                })?;
                out.push(Action::Group(n as u32));
            }
            _ => {
                return Err(OfctlError::UnknownAction {
                    token: t.text.to_string(),
                    accepted: ACCEPTED_ACTIONS,
                })
            }
        }
    }
    Ok(out)
}

fn set(field: Field, value: u128, mask: u128) -> Action {
    Action::SetField {
        field,
        value: value & mask,
        mask,
    }
}

fn small(t: &super::parse::Token<'_>, v: &str, max: u128, what: &str) -> Result<u128, OfctlError> {
    parse_uint(v)
        .filter(|n| *n <= max)
        .ok_or_else(|| OfctlError::value(t.key, t.text, format!("accepted: {what}")))
}

/// `output:PORT`: to a port, or to the controller (`output:CONTROLLER`, the plain
/// `controller` action, as Open vSwitch reads it).
fn output_action(s: &str, token: &str) -> Result<Action, OfctlError> {
    if parse_port(s) == Some(PORT_CONTROLLER) {
        return Ok(Action::Controller(crate::rule::ControllerAction::PLAIN));
    }
    Ok(Action::Output(output_port(s, token)?))
}

/// An output port: a number, or `IN_PORT`, `FLOOD`, `ALL`, `NORMAL`, `LOCAL`.
fn output_port(s: &str, token: &str) -> Result<PortRef, OfctlError> {
    let bad = || {
        OfctlError::value(
            "output",
            token,
            "accepted: a port 0..=65279, IN_PORT, FLOOD, ALL, NORMAL, LOCAL or CONTROLLER (port \
             names are not known here: dump with `ovs-ofctl --no-names`)",
        )
    };
    let p = parse_port(s).ok_or_else(bad)?;
    Ok(match p {
        0xfff8 => PortRef::InPort,
        0xfffa => PortRef::Normal,
        0xfffb => PortRef::Flood,
        0xfffc => PortRef::All,
        PORT_LOCAL => PortRef::Number(PORT_LOCAL),
        p if p < PORT_MAX => PortRef::Number(p),
        _ => return Err(bad()),
    })
}

fn parse_resubmit(t: &super::parse::Token<'_>) -> Result<Action, OfctlError> {
    let v = t.value.unwrap_or("");
    let port_of = |s: &str| -> Result<Option<u16>, OfctlError> {
        let s = s.trim();
        if s.is_empty() || s.eq_ignore_ascii_case("in_port") {
            return Ok(None);
        }
        parse_port(s)
            .filter(|p| *p < PORT_MAX || *p == PORT_LOCAL)
            .map(Some)
            .ok_or_else(|| {
                OfctlError::value(
                    "resubmit",
                    t.text,
                    "accepted: a port 0..=65279, LOCAL or in_port",
                )
            })
    };
    let (port, table) = if t.text.contains('(') {
        let mut parts = v.split(',');
        let p = port_of(parts.next().unwrap_or(""))?;
        let tb = parts.next().map(str::trim).unwrap_or("");
        if parts.next().is_some() {
            return Err(OfctlError::syntax(
                t.text,
                "resubmit takes (PORT,TABLE) at most",
            ));
        }
        let table = if tb.is_empty() {
            None
        } else {
            let n = parse_uint(tb)
                .filter(|n| *n <= u128::from(MAX_TABLE) + 1 || *n == 255)
                .ok_or_else(|| {
                    OfctlError::value("resubmit", t.text, "accepted: a table 0..=254")
                })?;
            (n != 255).then_some(n as u8)
        };
        (p, table)
    } else {
        (port_of(v)?, None)
    };
    if port.is_none() && table.is_none() {
        return Err(OfctlError::syntax(
            t.text,
            "resubmit needs a port or a table (resubmit:PORT, resubmit(,TABLE), resubmit(PORT,TABLE))",
        ));
    }
    Ok(Action::Resubmit { port, table })
}

/// A value of a settable field, masked or not.
fn target_value(tg: &Target, name: &str, s: &str, token: &str) -> Result<(u128, u128), OfctlError> {
    let (v, m) = match tg.kind {
        VKind::Mac => mac_masked(name, s)?,
        VKind::Ipv4 => ipv4_masked(name, s)?,
        VKind::Ipv6 => ipv6_masked(name, s)?,
        VKind::Dec | VKind::Hex => uint_masked(name, s, tg.bits)?,
        VKind::Port => {
            let p = parse_port(s).ok_or_else(|| {
                OfctlError::value(name, token, "accepted: a port number or LOCAL")
            })?;
            (u128::from(p), 0xffff)
        }
    };
    Ok((v & m, m))
}

/// `VALUE[/MASK]->FIELD`.
fn parse_set_field(s: &str, token: &str) -> Result<(Action, Prereq), OfctlError> {
    let Some((val, name)) = s.split_once("->") else {
        return Err(OfctlError::syntax(
            token,
            "set_field needs `VALUE[/MASK]->FIELD`",
        ));
    };
    if matches!(
        name,
        "eth_type" | "dl_type" | "ip_proto" | "nw_proto" | "nw_frag" | "ip_frag"
    ) {
        return Err(OfctlError::syntax(token, format!("{name} is read-only")));
    }
    if name == "nw_tos" {
        // The TOS byte's DSCP bits: Open vSwitch refuses ECN bits in the value.
        let v = parse_uint(val)
            .filter(|v| *v <= 0xff && *v & 3 == 0)
            .ok_or_else(|| {
                OfctlError::value(
                    "nw_tos",
                    token,
                    "accepted: 0..=255 with the two low (ECN) bits 0 (nw_ecn sets those)",
                )
            })?;
        return Ok((set(Field::IpDscp, v >> 2, 0x3f), Prereq::IpAny));
    }
    let tgt = set_target(name).ok_or_else(|| {
        OfctlError::syntax(
            token,
            format!(
                "`{name}` is not a field set_field can write (accepted: eth_src, eth_dst, \
                 vlan_tci, vlan_vid, vlan_pcp, ip_src, ip_dst, ipv6_src, ipv6_dst, ipv6_label, \
                 ip_dscp, nw_ecn, nw_ttl, tcp_src, tcp_dst, udp_src, udp_dst, sctp_src, sctp_dst, \
                 icmp_type, icmp_code, icmpv6_type, icmpv6_code, arp_op, arp_spa, arp_tpa, \
                 arp_sha, arp_tha, tun_id, tun_src, tun_dst, metadata, reg0..reg7, in_port)"
            ),
        )
    })?;
    if name == "vlan_vid" {
        let v = parse_uint(val)
            .filter(|v| *v <= 0x1fff && *v & u128::from(VLAN_CFI) != 0)
            .ok_or_else(|| {
                OfctlError::value(
                    "vlan_vid",
                    token,
                    "accepted: 4096 + VLAN id (0x1000 | VID, as OpenFlow 1.3 writes it)",
                )
            })?;
        return Ok((set(Field::VlanVid, v & 0xfff, 0xfff), Prereq::Vlan));
    }
    let (v, m) = target_value(&tgt, name, val, token).map_err(|e| relabel(e, token))?;
    if m == 0 {
        return Err(OfctlError::mask(name, token, "a zero mask writes nothing"));
    }
    Ok((set(tgt.field, v, m), tgt.prereq))
}

fn relabel(e: OfctlError, token: &str) -> OfctlError {
    match e {
        OfctlError::BadValue { field, reason, .. } => OfctlError::BadValue {
            field,
            token: token.to_string(),
            reason,
        },
        OfctlError::BadMask { field, reason, .. } => OfctlError::BadMask {
            field,
            token: token.to_string(),
            reason,
        },
        e => e,
    }
}

/// `VALUE->FIELD[BITS]` (`FIELD[]`, `FIELD[N]`, `FIELD[A..B]`, or `FIELD` alone).
fn parse_load(s: &str, token: &str) -> Result<(Action, Prereq), OfctlError> {
    let Some((val, dst)) = s.split_once("->") else {
        return Err(OfctlError::syntax(token, "load needs `VALUE->FIELD[BITS]`"));
    };
    let (name, range) = match dst.split_once('[') {
        None => (dst, None),
        Some((n, r)) => {
            let r = r
                .strip_suffix(']')
                .ok_or_else(|| OfctlError::syntax(token, "bits are written [], [N] or [A..B]"))?;
            (n, Some(r))
        }
    };
    if name == "NXM_OF_IP_TOS" {
        return load_ip_tos(val, range, token);
    }
    let tgt = nxm_target(name)
        .or_else(|| set_target(name).filter(|t| t.field != Field::VlanVid && t.field != Field::VlanPcp))
        .ok_or_else(|| {
            OfctlError::syntax(
                token,
                format!("unknown field `{name}` (accepted: NXM_NX_REG0..7, NXM_NX_TUN_ID, OXM_OF_METADATA, NXM_OF_ETH_SRC/DST, NXM_OF_VLAN_TCI, NXM_OF_IP_SRC/DST, NXM_NX_IPV6_SRC/DST, NXM_OF_TCP_SRC/DST, NXM_OF_UDP_SRC/DST, ... or a field name)"),
            )
        })?;
    let width = tgt.bits;
    let (lo, hi) = match range.map(str::trim) {
        None | Some("") => (0, width - 1),
        Some(r) => {
            let (a, b) = match r.split_once("..") {
                Some((a, b)) => (a, b),
                None => (r, r),
            };
            let a = a.trim().parse::<u32>().ok();
            let b = b.trim().parse::<u32>().ok();
            match (a, b) {
                (Some(a), Some(b)) if a <= b && b < width => (a, b),
                (Some(a), Some(b)) if a > b => {
                    return Err(OfctlError::syntax(
                        token,
                        format!("starting bit {a} is after ending bit {b}"),
                    ))
                }
                _ => {
                    return Err(OfctlError::syntax(
                        token,
                        format!(
                            "bits must lie within the field's {width} bits (0..{})",
                            width - 1
                        ),
                    ))
                }
            }
        }
    };
    let n = hi - lo + 1;
    let v = parse_uint(val).ok_or_else(|| {
        OfctlError::value(
            name,
            token,
            "the value must be a number (decimal or 0x hex)",
        )
    })?;
    if v > ones(n) {
        return Err(OfctlError::value(
            name,
            token,
            format!("value {v:#x} does not fit into {n} bits"),
        ));
    }
    let mask = ones(n) << lo;
    Ok((set(tgt.field, v << lo, mask), tgt.prereq))
}

/// `load:V->NXM_OF_IP_TOS[BITS]`: the TOS byte, of which Open vSwitch writes only the DSCP
/// bits (2..7); bits 0 and 1 (ECN) of the load are ignored, as OVS ignores them.
fn load_ip_tos(
    val: &str,
    range: Option<&str>,
    token: &str,
) -> Result<(Action, Prereq), OfctlError> {
    let (lo, hi) = match range.map(str::trim) {
        None | Some("") => (0, 7),
        Some(r) => {
            let (a, b) = r.split_once("..").unwrap_or((r, r));
            match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                (Ok(a), Ok(b)) if a <= b && b < 8 => (a, b),
                _ => {
                    return Err(OfctlError::syntax(
                        token,
                        "bits of NXM_OF_IP_TOS must be [A..B] with A <= B < 8",
                    ))
                }
            }
        }
    };
    let n = hi - lo + 1;
    let v = parse_uint(val).filter(|v| *v <= ones(n)).ok_or_else(|| {
        OfctlError::value(
            "NXM_OF_IP_TOS",
            token,
            format!("the value must be a number that fits into {n} bits"),
        )
    })?;
    let (v, m) = ((v << lo) >> 2, (ones(n) << lo) >> 2);
    Ok((set(Field::IpDscp, v, m), Prereq::IpAny))
}

/// Print an action list as `ovs-ofctl -O OpenFlow13 dump-flows` does, for a rule whose match
/// says `ctx` (it picks `tcp_dst` or `udp_dst`, `ip_src` or `arp_spa`, ...).
pub(crate) fn fmt_actions(actions: &[Action], ctx: &Ctx) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut parts: Vec<String> = Vec::with_capacity(actions.len());
    for a in actions {
        match a {
            Action::Output(p) => parts.push(match p {
                PortRef::Number(n) if *n >= PORT_MAX => fmt_port(*n),
                PortRef::Number(n) => format!("output:{n}"),
                PortRef::InPort => "IN_PORT".into(),
                PortRef::Flood => "FLOOD".into(),
                PortRef::All => "ALL".into(),
                PortRef::Normal => "NORMAL".into(),
            }),
            Action::SetField { field, value, mask } => {
                fmt_set(&mut parts, *field, *value, *mask, ctx)
            }
            Action::DecTtl => parts.push("dec_ttl".into()),
            Action::PushVlan(t) => parts.push(format!("push_vlan:{t:#x}")),
            Action::PopVlan => parts.push("pop_vlan".into()),
            Action::Resubmit { port, table } => parts.push(match (port, table) {
                (Some(p), None) => format!("resubmit:{}", fmt_port(*p)),
                (None, Some(t)) => format!("resubmit(,{t})"),
                (Some(p), Some(t)) => format!("resubmit({},{t})", fmt_port(*p)),
                (None, None) => "resubmit(,)".into(),
            }),
            Action::GotoTable(t) => parts.push(format!("goto_table:{t}")),
            Action::Group(g) => parts.push(format!("group:{g}")),
            Action::Move {
                src,
                src_ofs,
                dst,
                dst_ofs,
                bits,
            } => parts.push(format!(
                "move:{}->{}",
                fmt_subfield(*src, *src_ofs, *bits, ctx),
                fmt_subfield(*dst, *dst_ofs, *bits, ctx)
            )),
            a => {
                let nested = |inner: &[Action]| {
                    if inner.is_empty() {
                        String::new()
                    } else {
                        fmt_actions(inner, ctx)
                    }
                };
                if let Some(text) = more::fmt_more(a, nested) {
                    parts.push(text);
                }
            }
        }
    }
    parts.join(",")
}

/// `NAME[A..B]` as Open vSwitch prints a subfield (`[]` for the whole field, `[N]` for a bit).
fn fmt_subfield(field: Field, ofs: u32, bits: u32, ctx: &Ctx) -> String {
    let (name, width) = match field {
        Field::EthType => ("NXM_OF_ETH_TYPE".to_string(), 16),
        Field::NwProto if !ctx.is_arp() => ("NXM_OF_IP_PROTO".to_string(), 8),
        f => (nxm_name(f, ctx), f.bits()),
    };
    if ofs == 0 && bits == width {
        format!("{name}[]")
    } else if bits == 1 {
        format!("{name}[{ofs}]")
    } else {
        format!("{name}[{}..{}]", ofs, ofs + bits - 1)
    }
}

/// A field's value as `set_field` prints it.
fn fmt_value(field: Field, v: u128) -> String {
    use Field as F;
    match field {
        F::EthSrc | F::EthDst | F::ArpSha | F::ArpTha => fmt_mac(v),
        F::NwSrc | F::NwDst | F::TunSrc | F::TunDst => {
            std::net::Ipv4Addr::from(v as u32).to_string()
        }
        F::Ipv6Src | F::Ipv6Dst => fmt_ipv6(v),
        F::InPort => fmt_port(v as u16),
        F::VlanVid => (v | u128::from(VLAN_CFI)).to_string(),
        F::TpSrc
        | F::TpDst
        | F::IpDscp
        | F::NwEcn
        | F::NwTtl
        | F::NwProto
        | F::VlanPcp
        | F::NwFrag => v.to_string(),
        _ => fmt_hash_x(v),
    }
}

fn fmt_set(parts: &mut Vec<String>, field: Field, value: u128, mask: u128, ctx: &Ctx) {
    let mut full = field.all_ones();
    if matches!(field, Field::TpSrc | Field::TpDst) && (ctx.is_icmp4() || ctx.is_icmp6()) {
        // ICMP type and code are 8-bit fields kept in the 16-bit transport ports.
        full = 0xff;
    }
    let mask = mask & field.all_ones();
    if mask & full == full && ctx.from_match {
        // A rule only OpenFlow 1.0 accepts (its own rewrites need no match there): printed in
        // that spelling, as Open vSwitch prints it, so that it parses again as 1.0.
        let of10 = match field {
            Field::IpDscp if !ctx.is_ip_any() => Some(format!("mod_nw_tos:{}", value << 2)),
            Field::TpSrc if !Prereq::L4OrIcmp.met(ctx, false) => {
                Some(format!("mod_tp_src:{value}"))
            }
            Field::TpDst if !Prereq::L4OrIcmp.met(ctx, false) => {
                Some(format!("mod_tp_dst:{value}"))
            }
            _ => None,
        };
        if let Some(text) = of10 {
            parts.push(text);
            return;
        }
    }
    if mask & full == full {
        parts.push(format!(
            "set_field:{}->{}",
            fmt_value(field, value),
            oxm_name(field, ctx)
        ));
        return;
    }
    // OpenFlow 1.3 has no masked set_field: OVS writes it as one `load` per run of mask bits,
    // on the whole TCI for the VLAN sub-fields.
    let (shift, width) = match field {
        Field::VlanVid => (0, 16),
        Field::VlanPcp => (13, 16),
        Field::VlanPresent => (12, 16),
        f => (0, f.bits()),
    };
    let name = nxm_name(field, ctx);
    let mut bit = 0u32;
    while bit < 128 {
        if mask >> bit & 1 == 0 {
            bit += 1;
            continue;
        }
        let lo = bit;
        while bit < 128 && mask >> bit & 1 == 1 {
            bit += 1;
        }
        let n = bit - lo;
        let v = (value >> lo) & ones(n);
        let (a, b) = (lo + shift, bit - 1 + shift);
        let bits = if n == width {
            String::new()
        } else if a == b {
            format!("{a}")
        } else {
            format!("{a}..{b}")
        };
        parts.push(format!("load:{}->{name}[{bits}]", fmt_hash_x(v)));
    }
}

//! Groups in `ovs-ofctl add-group` syntax (`group_id=1,type=select,selection_method=hash,
//! fields(ip_src,ip_dst),bucket=weight:100,actions=output:1,bucket=...`) and printing them as
//! `ovs-ofctl -O OpenFlow15 dump-groups` does (the form that keeps bucket ids and the hash
//! fields). Never panics on any text.

use super::actions::{fmt_actions, parse_actions_in};
use super::error::OfctlError;
use super::fields::{fmt_port, match_field, parse_port, Ctx, Kind, PORT_MAX};
use super::parse::tokens;
use super::values::{
    fmt_ipv6, fmt_mac, ipv4_masked, ipv6_masked, mac_masked, parse_uint, uint_masked,
};
use crate::key::Field;
use crate::rule::{Bucket, Group, GroupKind, SelectionMethod};

/// Highest group id (`OFPG_MAX`).
const GROUP_MAX: u128 = 0xffff_ff00;

/// Weight of a bucket that does not say.
const DEFAULT_WEIGHT: u16 = 1;

/// `fields(...)`: the fields, those with a mask, and the item as written.
type HashFields = (Vec<Field>, Vec<(Field, u128)>, String);

/// Parse `add-group` syntax.
pub(crate) fn parse_group(s: &str) -> Result<Group, OfctlError> {
    let toks = tokens(s)?;
    let mut id: Option<u32> = None;
    let mut kind: Option<GroupKind> = None;
    let mut method: Option<(SelectionMethod, String)> = None;
    let mut method_param: u64 = 0;
    let mut fields: Option<HashFields> = None;
    // Each bucket: its items as written (the first may be `weight:..` or an action).
    let mut buckets: Vec<(String, Vec<&str>)> = Vec::new();
    for t in &toks {
        if t.key == "bucket" {
            let first = t.value.unwrap_or("");
            buckets.push((
                t.text.to_string(),
                if first.is_empty() {
                    vec![]
                } else {
                    vec![first]
                },
            ));
            continue;
        }
        if let Some((_, items)) = buckets.last_mut() {
            items.push(t.text);
            continue;
        }
        let v = t.value.unwrap_or("");
        match t.key {
            "group_id" => {
                let n = parse_uint(v).filter(|n| *n <= GROUP_MAX).ok_or_else(|| {
                    OfctlError::value("group_id", t.text, "accepted: 0..=4294967040")
                })?;
                id = Some(n as u32);
            }
            "type" => {
                kind = Some(match v {
                    "all" => GroupKind::All,
                    "select" => GroupKind::Select,
                    "indirect" => GroupKind::Indirect,
                    "ff" | "fast_failover" => GroupKind::FastFailover,
                    _ => {
                        return Err(OfctlError::value(
                            "type",
                            t.text,
                            "accepted: all, select, indirect, ff (fast_failover)",
                        ))
                    }
                })
            }
            "selection_method" => {
                let m = match v {
                    "hash" => SelectionMethod::Hash,
                    "dp_hash" => SelectionMethod::DpHash,
                    _ => {
                        return Err(OfctlError::value(
                            "selection_method",
                            t.text,
                            "accepted: dp_hash (Open vSwitch's default), hash",
                        ))
                    }
                };
                method = Some((m, t.text.to_string()));
            }
            "selection_method_param" => {
                method_param = parse_uint(v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| {
                        OfctlError::value(
                            "selection_method_param",
                            t.text,
                            "accepted: a 64-bit number",
                        )
                    })?;
            }
            "fields" => {
                let mut fs = Vec::new();
                let mut masks = Vec::new();
                for item in v.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let (name, mask) = match item.split_once('=') {
                        Some((n, m)) => (n, Some(m)),
                        None => (item, None),
                    };
                    let f = hash_field(name).ok_or_else(|| {
                        OfctlError::value(
                            "fields",
                            t.text,
                            format!("`{name}` cannot be hashed (accepted: eth_src, eth_dst, eth_type, vlan_tci, ip_src, ip_dst, ipv6_src, ipv6_dst, ip_proto, tcp_src, tcp_dst, udp_src, udp_dst, sctp_src, sctp_dst, in_port, tun_id, metadata, reg0..reg7)"),
                        )
                    })?;
                    if fs.contains(&f) {
                        return Err(OfctlError::Duplicate {
                            token: name.to_string(),
                            earlier: t.text.to_string(),
                        });
                    }
                    fs.push(f);
                    if let Some(m) = mask {
                        let m = hash_mask(f, name, m, t.text)?;
                        if m != f.all_ones() {
                            masks.push((f, m));
                        }
                    }
                }
                fs.sort();
                masks.sort();
                fields = Some((fs, masks, t.text.to_string()));
            }
            _ => {
                return Err(OfctlError::UnknownField {
                    token: t.text.to_string(),
                    accepted: "group_id, type, selection_method=dp_hash|hash, \
                               selection_method_param=N, fields(...), bucket=...",
                })
            }
        }
    }
    let id = id.ok_or_else(|| OfctlError::syntax(s.trim(), "a group needs `group_id=N`"))?;
    let kind = kind.ok_or_else(|| {
        OfctlError::syntax(s.trim(), "a group needs `type=all|select|indirect|ff`")
    })?;
    if let Some((_, _, tok)) = &fields {
        if !matches!(method, Some((SelectionMethod::Hash, _))) {
            return Err(OfctlError::syntax(
                tok,
                "fields(...) needs `selection_method=hash` (as Open vSwitch: fields may only \
                 be given with it)",
            ));
        }
    }
    if kind != GroupKind::Select {
        if let Some((_, m)) = method.as_ref() {
            return Err(OfctlError::syntax(
                m,
                "selection_method is only for type=select",
            ));
        }
    }
    let mut out = Vec::with_capacity(buckets.len());
    let mut next_id = 0u32;
    for (btext, items) in buckets {
        let mut weight = DEFAULT_WEIGHT;
        let mut bid: Option<u32> = None;
        let (mut watch_port, mut watch_group) = (None, None);
        let mut acts: Vec<&str> = Vec::new();
        let mut in_actions = false;
        for item in items {
            let (k, v) = match item.find([':', '=']) {
                Some(i) => (&item[..i], &item[i + 1..]),
                None => (item, ""),
            };
            if in_actions {
                acts.push(item);
                continue;
            }
            match k {
                "weight" => {
                    weight = parse_uint(v)
                        .and_then(|w| u16::try_from(w).ok())
                        .ok_or_else(|| OfctlError::value("weight", item, "accepted: 0..=65535"))?
                }
                "bucket_id" => {
                    let n = parse_uint(v).filter(|n| *n <= 0xffff_fff0).ok_or_else(|| {
                        OfctlError::value("bucket_id", item, "accepted: 0..=4294967280")
                    })?;
                    bid = Some(n as u32);
                }
                "actions" => {
                    in_actions = true;
                    if !v.is_empty() {
                        acts.push(v);
                    }
                }
                "watch_port" => {
                    // As Open vSwitch: a port number (ANY, 0xffffffff over OpenFlow 1.1+, is
                    // "none"); reserved ports such as LOCAL are refused.
                    let p = parse_port(v)
                        .filter(|p| *p > 0 && *p < PORT_MAX)
                        .ok_or_else(|| {
                            OfctlError::value("watch_port", item, "accepted: a port 1..=65279")
                        })?;
                    watch_port = Some(p);
                }
                "watch_group" => {
                    let g = parse_uint(v).filter(|n| *n <= GROUP_MAX).ok_or_else(|| {
                        OfctlError::value("watch_group", item, "accepted: a group 0..=4294967040")
                    })?;
                    watch_group = Some(g as u32);
                }
                _ => acts.push(item),
            }
        }
        if acts.is_empty() && !in_actions {
            return Err(OfctlError::syntax(
                &btext,
                "a bucket needs actions (`bucket=actions=output:1`)",
            ));
        }
        if let Some(g) = acts
            .iter()
            .find(|a| a.trim_start().starts_with("goto_table"))
        {
            return Err(OfctlError::syntax(
                g,
                "goto_table is not allowed in a bucket",
            ));
        }
        if kind != GroupKind::Select {
            // Only select groups weigh their buckets; OVS forgets the weight of others.
            weight = DEFAULT_WEIGHT;
        }
        if kind == GroupKind::FastFailover && watch_port.is_none() && watch_group.is_none() {
            return Err(OfctlError::syntax(
                &btext,
                "a fast failover bucket needs watch_port:N or watch_group:N",
            ));
        }
        let text = acts.join(",");
        let actions = parse_actions_in(&text, None, None)?;
        if let Some(a) = actions
            .iter()
            .find(|a| matches!(a, crate::rule::Action::GotoTable(_)))
        {
            return Err(OfctlError::syntax(
                &format!("{a:?}"),
                "goto_table is not allowed in a bucket",
            ));
        }
        if actions.iter().any(|a| {
            matches!(
                a,
                crate::rule::Action::WriteActions(_) | crate::rule::Action::ClearActions
            )
        }) {
            return Err(OfctlError::syntax(
                &btext,
                "write_actions and clear_actions are instructions of a rule, not allowed in a \
                 bucket",
            ));
        }
        let id = bid.unwrap_or(next_id);
        if out.iter().any(|b: &Bucket| b.id == id) {
            return Err(OfctlError::Duplicate {
                token: format!("bucket_id:{id}"),
                earlier: format!("bucket_id:{id}"),
            });
        }
        next_id = id.saturating_add(1);
        out.push(Bucket {
            id,
            weight,
            actions,
            watch_port,
            watch_group,
        });
    }
    if kind == GroupKind::Indirect && out.len() > 1 {
        return Err(OfctlError::syntax(
            s.trim(),
            "an indirect group has at most one bucket",
        ));
    }
    let (fields, field_masks) = fields.map(|f| (f.0, f.1)).unwrap_or_default();
    Ok(Group {
        id,
        kind,
        fields,
        buckets: out,
        method: method.map(|m| m.0).unwrap_or_default(),
        method_param,
        field_masks,
    })
}

/// The mask of `fields(NAME=MASK)`, in the field's value syntax.
fn hash_mask(f: Field, name: &str, m: &str, token: &str) -> Result<u128, OfctlError> {
    let kind = match f {
        Field::EthType | Field::NwProto | Field::VlanTci => Kind::Int,
        _ => match_field(name).map(|mf| mf.kind).unwrap_or(Kind::Int),
    };
    let r = match kind {
        Kind::Mac => mac_masked(name, m).map(|(v, _)| v),
        Kind::Ipv4 => ipv4_masked(name, m).map(|(v, _)| v),
        Kind::Ipv6 => ipv6_masked(name, m).map(|(v, _)| v),
        _ => uint_masked(name, m, f.bits()).map(|(v, _)| v),
    };
    r.map_err(|_| {
        OfctlError::mask(
            name,
            token,
            "a hash mask is written as the field's value (ip_dst=255.255.255.0, \
             eth_src=ff:ff:ff:00:00:00, tcp_dst=0xff00)",
        )
    })
}

/// The mask as `fields(NAME=MASK)` prints it.
fn fmt_hash_mask(f: Field, m: u128) -> String {
    match f {
        Field::EthSrc | Field::EthDst | Field::ArpSha | Field::ArpTha => fmt_mac(m),
        Field::NwSrc | Field::NwDst | Field::TunSrc | Field::TunDst => {
            std::net::Ipv4Addr::from(m as u32).to_string()
        }
        Field::Ipv6Src | Field::Ipv6Dst => fmt_ipv6(m),
        Field::TpSrc | Field::TpDst | Field::NwProto => m.to_string(),
        _ => format!("{m:#x}"),
    }
}

/// A field a select group may hash, by its name.
fn hash_field(name: &str) -> Option<Field> {
    match name {
        "eth_type" | "dl_type" => Some(Field::EthType),
        "vlan_tci" => Some(Field::VlanTci),
        "ip_proto" | "nw_proto" => Some(Field::NwProto),
        _ => match_field(name).map(|f| f.field).filter(|f| {
            !matches!(
                f,
                Field::VlanVid | Field::VlanPcp | Field::IpDscp | Field::NwFrag | Field::TcpFlags
            )
        }),
    }
}

/// The name OVS prints for a hashed field (its OXM-style name).
fn hash_field_name(f: Field) -> String {
    match f {
        Field::EthSrc => "eth_src".into(),
        Field::EthDst => "eth_dst".into(),
        Field::EthType => "eth_type".into(),
        Field::NwSrc => "ip_src".into(),
        Field::NwDst => "ip_dst".into(),
        Field::NwProto => "nw_proto".into(),
        Field::TpSrc => "tcp_src".into(),
        Field::TpDst => "tcp_dst".into(),
        f => f.name().to_string(),
    }
}

/// Print a group as `ovs-ofctl -O OpenFlow15 dump-groups` does (without the leading space).
pub(crate) fn fmt_group(g: &Group) -> String {
    let mut s = format!(
        "group_id={},type={}",
        g.id,
        match g.kind {
            GroupKind::All => "all",
            GroupKind::Select => "select",
            GroupKind::Indirect => "indirect",
            GroupKind::FastFailover => "ff",
        }
    );
    match g.method {
        SelectionMethod::Default if g.fields.is_empty() => {}
        SelectionMethod::DpHash => s.push_str(",selection_method=dp_hash"),
        _ => s.push_str(",selection_method=hash"),
    }
    if g.method_param != 0 {
        s.push_str(&format!(",selection_method_param={}", g.method_param));
    }
    if !g.fields.is_empty() {
        let names: Vec<String> = g
            .fields
            .iter()
            .map(|f| {
                let name = hash_field_name(*f);
                match g.field_masks.iter().find(|(mf, _)| mf == f) {
                    Some((_, m)) => format!("{name}={}", fmt_hash_mask(*f, *m)),
                    None => name,
                }
            })
            .collect();
        s.push_str(&format!(",fields({})", names.join(",")));
    }
    for b in &g.buckets {
        s.push_str(&format!(",bucket=bucket_id:{}", b.id));
        if g.kind == GroupKind::Select && b.weight != DEFAULT_WEIGHT {
            s.push_str(&format!(",weight:{}", b.weight));
        }
        if let Some(p) = b.watch_port {
            s.push_str(&format!(",watch_port:{}", fmt_port(p)));
        }
        if let Some(w) = b.watch_group {
            s.push_str(&format!(",watch_group:{w}"));
        }
        s.push_str(",actions=");
        s.push_str(&fmt_actions(&b.actions, &Ctx::default()));
    }
    s
}

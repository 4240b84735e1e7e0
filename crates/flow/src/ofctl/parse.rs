//! Parsing of the flow part of `ovs-ofctl` syntax: splitting `key=value` tokens the way
//! `ovs-ofctl` does, the match fields with their masks and prerequisites, and the rule keywords
//! (table, priority, cookie, timeouts; the statistics that `dump-flows` prints are accepted and
//! ignored). Never panics on any text; never looks at actions beyond finding where they start.

use std::collections::HashMap;

use super::actions::parse_actions_as;
use super::error::OfctlError;
use super::fields::{
    self, match_field, parse_port, shorthand, Ctx, Kind, Prereq, ACCEPTED_FIELDS, TCP_FLAGS,
};
use super::values::{ipv4_masked, ipv6_masked, mac_masked, parse_uint, uint_masked, uint_of};
use super::OpenFlowVersion;
use crate::key::{Field, FRAG_ANY, FRAG_LATER, VLAN_CFI};
use crate::rule::{Match, Rule, RuleFilter, DEFAULT_PRIORITY};

/// Highest table number a rule may live in (Open vSwitch has tables 0..=253).
pub(crate) const MAX_TABLE: u8 = 253;

/// One `key[=value]` item of the text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'a> {
    /// The keyword.
    pub key: &'a str,
    /// The value (after `=`/`:`, or inside `(...)`), if any.
    pub value: Option<&'a str>,
    /// The whole item as written.
    pub text: &'a str,
    /// Byte offset where the value starts (or where the item ends).
    pub value_start: usize,
}

fn is_delim(c: u8) -> bool {
    matches!(c, b',' | b' ' | b'\t' | b'\r' | b'\n')
}

/// Split `s` into items the way `ovs-ofctl` does: separated by commas or white space; a key ends
/// at `=`, `:` or `(`; a value runs to the next separator outside parentheses.
pub(crate) fn tokens(s: &str) -> Result<Vec<Token<'_>>, OfctlError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_delim(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_delim(b[i]) && !matches!(b[i], b'=' | b':' | b'(') {
            i += 1;
        }
        let key = &s[start..i];
        if i < b.len() && b[i] == b'(' {
            let vstart = i + 1;
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            if i >= b.len() {
                return Err(OfctlError::syntax(&s[start..], "unbalanced parentheses"));
            }
            let value = &s[vstart..i];
            i += 1;
            out.push(Token {
                key,
                value: Some(value),
                text: &s[start..i],
                value_start: vstart,
            });
            continue;
        }
        if i < b.len() && matches!(b[i], b'=' | b':') {
            i += 1;
            let vstart = i;
            let mut depth = 0usize;
            while i < b.len() && (depth > 0 || !is_delim(b[i])) {
                match b[i] {
                    b'(' => depth += 1,
                    b')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                i += 1;
            }
            out.push(Token {
                key,
                value: Some(&s[vstart..i]),
                text: &s[start..i],
                value_start: vstart,
            });
            continue;
        }
        out.push(Token {
            key,
            value: None,
            text: &s[start..i],
            value_start: i,
        });
    }
    Ok(out)
}

/// Keys that `dump-flows` prints and that mean nothing to a new rule.
const IGNORED_KEYS: &[&str] = &[
    "duration",
    "n_packets",
    "n_bytes",
    "idle_age",
    "hard_age",
    "reset_counts",
    "send_flow_rem",
    "check_overlap",
    "no_packet_counts",
    "no_byte_counts",
    "no_readonly_table",
    "importance",
];

/// Builds a match, refusing duplicates and checking prerequisites at the end.
#[derive(Default)]
pub(crate) struct MatchBuilder {
    pub m: Match,
    /// Which token set each field (for duplicates and prerequisite errors).
    set_by: HashMap<Field, (String, bool)>,
    /// Tokens whose prerequisites are checked once the whole match is known.
    pending: Vec<(String, Prereq)>,
}

impl MatchBuilder {
    fn claim(&mut self, f: Field, token: &str) -> Result<(), OfctlError> {
        let conflicts: &[Field] = match f {
            Field::VlanTci => &[Field::VlanTci, Field::VlanVid, Field::VlanPcp],
            Field::VlanVid => &[Field::VlanVid, Field::VlanTci],
            Field::VlanPcp => &[Field::VlanPcp, Field::VlanTci],
            _ => std::slice::from_ref(&f),
        };
        for c in conflicts {
            if let Some((earlier, _)) = self.set_by.get(c) {
                return Err(OfctlError::Duplicate {
                    token: token.to_string(),
                    earlier: earlier.clone(),
                });
            }
        }
        self.set_by.insert(f, (token.to_string(), false));
        Ok(())
    }

    /// Set `f` to `value` from a shorthand, or check it agrees with what is there.
    fn set_from_shorthand(&mut self, f: Field, value: u128, token: &str) -> Result<(), OfctlError> {
        let full = f.all_ones();
        if self.m.mask.get(f) == full {
            if self.m.key.get(f) != value {
                let earlier = self
                    .set_by
                    .get(&f)
                    .map(|(t, _)| t.clone())
                    .unwrap_or_default();
                return Err(OfctlError::Duplicate {
                    token: token.to_string(),
                    earlier,
                });
            }
            return Ok(());
        }
        self.set_by.insert(f, (token.to_string(), true));
        self.m.set(f, value, full);
        Ok(())
    }

    /// Set an explicitly named field, which may agree with a shorthand but not repeat itself.
    fn set_explicit(
        &mut self,
        f: Field,
        v: u128,
        mask: u128,
        token: &str,
    ) -> Result<(), OfctlError> {
        if let Some((earlier, was_short)) = self.set_by.get(&f) {
            let same = self.m.mask.get(f) == mask && self.m.key.get(f) == v & mask;
            if !*was_short || !same {
                return Err(OfctlError::Duplicate {
                    token: token.to_string(),
                    earlier: earlier.clone(),
                });
            }
            return Ok(());
        }
        self.claim(f, token)?;
        self.m.set(f, v & mask, mask);
        Ok(())
    }

    /// Apply one match token.
    pub(crate) fn field(&mut self, t: &Token<'_>) -> Result<(), OfctlError> {
        if let Some((dl_type, proto)) = shorthand(t.key) {
            if t.value.is_some() {
                return Err(OfctlError::syntax(
                    t.text,
                    format!("`{}` takes no value", t.key),
                ));
            }
            self.set_from_shorthand(Field::EthType, u128::from(dl_type), t.text)?;
            if let Some(p) = proto {
                self.set_from_shorthand(Field::NwProto, u128::from(p), t.text)?;
            }
            return Ok(());
        }
        let Some(mf) = match_field(t.key) else {
            return Err(OfctlError::UnknownField {
                token: t.text.to_string(),
                accepted: ACCEPTED_FIELDS,
            });
        };
        let Some(s) = t.value else {
            return Err(OfctlError::syntax(
                t.text,
                format!("`{}` needs a value (`{}=VALUE`)", t.key, t.key),
            ));
        };
        if !mf.maskable && s.contains('/') && !matches!(mf.kind, Kind::TcpFlags) {
            return Err(OfctlError::mask(
                t.key,
                t.text,
                "this field takes no mask (write the value alone)",
            ));
        }
        let name = t.key;
        if mf.prereq != Prereq::None {
            self.pending.push((t.text.to_string(), mf.prereq));
        }
        let bits = mf.field.bits();
        match mf.kind {
            Kind::Port => {
                let p = parse_port(s)
                    .filter(|p| *p < fields::PORT_MAX || *p == fields::PORT_LOCAL)
                    .ok_or_else(|| {
                        OfctlError::value(
                            name,
                            t.text,
                            "not a port (accepted: 0..=65279 or LOCAL; port names are not known \
                             here: dump with `ovs-ofctl --no-names`)",
                        )
                    })?;
                self.set_explicit(Field::InPort, u128::from(p), 0xffff, t.text)
            }
            Kind::Int if name.starts_with("icmp") => {
                // ICMP type and code: 8-bit values in the 16-bit transport ports, matched
                // whole as OVS does (a datapath megaflow may still consult only 8 bits).
                let v = uint_of(name, s, 8, t.text)?;
                self.set_explicit(mf.field, v, 0xffff, t.text)
            }
            Kind::Int => {
                let (v, m) = uint_masked(name, s, bits).map_err(|e| retoken(e, t.text))?;
                if mf.field == Field::VlanTci {
                    let (v, m) = vlan_as_oxm(v & m, m);
                    let cfi = u128::from(VLAN_CFI);
                    if m & 0xe000 != 0 && (m & cfi == 0 || v & cfi == 0) {
                        // OpenFlow 1.3 can only match a priority on a packet known to be tagged.
                        return Err(OfctlError::mask(
                            name,
                            t.text,
                            "matching the VLAN priority (0xe000) needs the tag-present bit 0x1000 \
                             set in both value and mask (e.g. vlan_tci=0x3000/0xf000), or no \
                             VLAN id bits in the value",
                        ));
                    }
                    self.claim(Field::VlanTci, t.text)?;
                    self.m.set(Field::VlanTci, v, m);
                    return Ok(());
                }
                self.set_explicit(mf.field, v, m, t.text)
            }
            Kind::Mac => {
                let (v, m) = mac_masked(name, s).map_err(|e| retoken(e, t.text))?;
                self.set_explicit(mf.field, v, m, t.text)
            }
            Kind::Ipv4 => {
                let (v, m) = ipv4_masked(name, s).map_err(|e| retoken(e, t.text))?;
                self.set_explicit(mf.field, v, m, t.text)
            }
            Kind::Ipv6 => {
                let (v, m) = ipv6_masked(name, s).map_err(|e| retoken(e, t.text))?;
                self.set_explicit(mf.field, v, m, t.text)
            }
            Kind::VlanVid => {
                let v = uint_of(name, s, 16, t.text)?;
                if v == 0xffff {
                    // "No VLAN": OpenFlow 1.3 keeps the VID and CFI bits of that.
                    self.claim(Field::VlanVid, t.text)?;
                    self.m.set(Field::VlanTci, 0, 0x1fff);
                    return Ok(());
                }
                if v > 0xfff {
                    return Err(OfctlError::value(
                        name,
                        t.text,
                        "a VLAN id is 0..=4095 (or 0xffff for no VLAN)",
                    ));
                }
                self.claim(Field::VlanVid, t.text)?;
                self.m.set(Field::VlanTci, u128::from(VLAN_CFI) | v, 0x1fff);
                Ok(())
            }
            Kind::OxmVlanVid => {
                // OpenFlow 1.3's VLAN id: the VID and tag-present bits of the TCI.
                let (v, m) = uint_masked(name, s, 13).map_err(|e| retoken(e, t.text))?;
                let (v, m) = vlan_as_oxm(v & m, m);
                self.claim(Field::VlanVid, t.text)?;
                self.m.set(Field::VlanTci, v, m);
                Ok(())
            }
            Kind::VlanPcp => {
                let v = uint_of(name, s, 3, t.text)?;
                self.claim(Field::VlanPcp, t.text)?;
                self.m
                    .set(Field::VlanTci, u128::from(VLAN_CFI) | (v << 13), 0xf000);
                Ok(())
            }
            Kind::NwTos => {
                // As Open vSwitch: the two ECN bits of the value are ignored (`nw_tos=0xb9`
                // matches as `nw_tos=184`; nw_ecn matches them).
                let v = uint_of(name, s, 8, t.text)?;
                self.set_explicit(Field::IpDscp, v >> 2, 0x3f, t.text)
            }
            Kind::Frag => {
                let any = u128::from(FRAG_ANY);
                let later = u128::from(FRAG_LATER);
                let (v, m) = match s {
                    "no" => (0, any | later),
                    "yes" => (any, any),
                    "first" => (any, any | later),
                    "later" => (any | later, any | later),
                    "not_later" => (0, later),
                    _ => {
                        return Err(OfctlError::value(
                            name,
                            t.text,
                            "accepted: no, yes, first, later, not_later",
                        ))
                    }
                };
                self.set_explicit(Field::NwFrag, v, m, t.text)
            }
            Kind::TcpFlags => {
                let (v, m) = parse_tcp_flags(s, t.text)?;
                self.set_explicit(Field::TcpFlags, v, m, t.text)
            }
        }
    }

    /// Check every pending prerequisite against the finished match.
    pub(crate) fn finish(self) -> Result<Match, OfctlError> {
        let ctx = Ctx::of(&self.m);
        for (token, p) in &self.pending {
            if !p.met(&ctx, false) && p.met(&ctx.ignoring_fragments(), false) {
                return Err(OfctlError::MissingPrerequisite {
                    token: token.clone(),
                    needs: "a packet that is not a later fragment (`ip_frag=later` leaves no \
                            transport header to match)",
                    example: "ip_frag=not_later",
                });
            }
            if !p.met(&ctx, false) {
                return Err(OfctlError::MissingPrerequisite {
                    token: token.clone(),
                    needs: p.needs(),
                    example: p.example(),
                });
            }
            if *p == Prereq::L4OrIcmp && (ctx.is_icmp4() || ctx.is_icmp6()) {
                icmp_port_fits(&self.m, token)?;
            }
        }
        Ok(self.m)
    }
}

/// On an ICMP rule `tp_src`/`tp_dst` are the ICMP type and code (as Open vSwitch prints them
/// back): 8-bit values, as `icmp_type`/`icmp_code` accept them. A wider value would print as an
/// `icmp_type` that does not parse again.
fn icmp_port_fits(m: &Match, token: &str) -> Result<(), OfctlError> {
    let (field, name) = if token.starts_with("tp_src") {
        (Field::TpSrc, "icmp_type")
    } else {
        (Field::TpDst, "icmp_code")
    };
    let v = m.key.get(field);
    if v > 0xff {
        return Err(OfctlError::value(
            name,
            token,
            format!("{v:#x} is wider than the field's 8 bits (on an ICMP rule this is `{name}`)"),
        ));
    }
    Ok(())
}

/// Replace the token of a value error by the whole `key=value` item.
fn retoken(e: OfctlError, text: &str) -> OfctlError {
    match e {
        OfctlError::BadValue { field, reason, .. } => OfctlError::BadValue {
            field,
            token: text.to_string(),
            reason,
        },
        OfctlError::BadMask { field, reason, .. } => OfctlError::BadMask {
            field,
            token: text.to_string(),
            reason,
        },
        e => e,
    }
}

/// A `vlan_tci` value/mask as OpenFlow 1.3 carries it (and so as OVS dumps it): the VID and
/// CFI bits as given, the PCP bits only when a tag is required, then all three of them.
pub(crate) fn vlan_as_oxm(v: u128, m: u128) -> (u128, u128) {
    let mut mask = m & 0x1fff;
    if v & 0x1fff != 0 && m & 0xe000 != 0 {
        mask |= 0xe000;
    }
    (v & mask, mask)
}

/// `tcp_flags=+syn-ack`, `syn|ack`, `0x012/0xfff`, `0x002`.
fn parse_tcp_flags(s: &str, token: &str) -> Result<(u128, u128), OfctlError> {
    const ACCEPTED: &str = "accepted: +flag-flag... (fin, syn, rst, psh, ack, urg, ece, cwr, ns), \
        flag|flag..., or VALUE[/MASK] with 12 bits";
    let first = s.bytes().next();
    if first.is_some_and(|c| c.is_ascii_digit()) {
        let (v, m) = uint_masked("tcp_flags", s, 16).map_err(|e| retoken(e, token))?;
        if v > 0xfff || m > 0xfff && m != 0xffff {
            return Err(OfctlError::value("tcp_flags", token, ACCEPTED));
        }
        return Ok((v & m & 0xfff, m & 0xfff));
    }
    let flag = |name: &str| -> Result<u16, OfctlError> {
        // Unnamed bits as OVS prints them: `[800]`.
        if let Some(h) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
            if let Ok(b) = u16::from_str_radix(h, 16) {
                if b.is_power_of_two() && b <= 0x800 {
                    return Ok(b);
                }
            }
        }
        TCP_FLAGS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                OfctlError::value(
                    "tcp_flags",
                    token,
                    format!("unknown flag `{name}`; {ACCEPTED}"),
                )
            })
    };
    if matches!(first, Some(b'+') | Some(b'-')) {
        let (mut v, mut m) = (0u16, 0u16);
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            let body = &rest[1..];
            let end = body.find(['+', '-']).unwrap_or(body.len());
            let name = &body[..end];
            let bit = flag(name)?;
            if m & bit != 0 {
                return Err(OfctlError::value(
                    "tcp_flags",
                    token,
                    format!("flag `{name}` is given twice"),
                ));
            }
            if c != '+' && c != '-' {
                return Err(OfctlError::value("tcp_flags", token, ACCEPTED));
            }
            m |= bit;
            if c == '+' {
                v |= bit;
            }
            rest = &body[end..];
        }
        return Ok((u128::from(v), u128::from(m)));
    }
    let mut v = 0u16;
    for name in s.split('|') {
        let bit = flag(name)?;
        if v & bit != 0 {
            return Err(OfctlError::value(
                "tcp_flags",
                token,
                format!("flag `{name}` is given twice"),
            ));
        }
        v |= bit;
    }
    Ok((u128::from(v), 0xfff))
}

/// What the flow text says besides the match and the actions.
#[derive(Default)]
struct RuleKeys {
    table: Option<(u8, String)>,
    table_all: bool,
    priority: Option<u16>,
    cookie: Option<(u64, Option<u64>)>,
    idle_timeout: u16,
    hard_timeout: u16,
    out_port: Option<u16>,
}

fn num_key<T: TryFrom<u128>>(t: &Token<'_>, what: &str) -> Result<T, OfctlError> {
    let s = t.value.unwrap_or("");
    parse_uint(s)
        .and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| OfctlError::value(t.key, t.text, format!("accepted: {what}")))
}

/// Parse the match and rule keywords of `s` (which holds no actions).
fn parse_keys(s: &str, filter: bool) -> Result<(MatchBuilder, RuleKeys), OfctlError> {
    let mut b = MatchBuilder::default();
    let mut k = RuleKeys::default();
    let mut seen: HashMap<&str, String> = HashMap::new();
    for t in tokens(s)? {
        let rule_key = matches!(
            t.key,
            "table" | "priority" | "cookie" | "idle_timeout" | "hard_timeout" | "out_port"
        );
        if rule_key {
            if let Some(earlier) = seen.insert(t.key, t.text.to_string()) {
                return Err(OfctlError::Duplicate {
                    token: t.text.to_string(),
                    earlier,
                });
            }
        }
        match t.key {
            "table" => {
                let v: u8 = num_key(&t, "a table number 0..=253")?;
                if v == 255 && filter {
                    k.table_all = true;
                } else if v > MAX_TABLE {
                    return Err(OfctlError::value(
                        "table",
                        t.text,
                        "accepted: a table number 0..=253",
                    ));
                } else {
                    k.table = Some((v, t.text.to_string()));
                }
            }
            "priority" => k.priority = Some(num_key(&t, "a priority 0..=65535")?),
            "cookie" => {
                let s = t.value.unwrap_or("");
                let (v, m) = match s.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (s, None),
                };
                let bad = || {
                    OfctlError::value(
                        "cookie",
                        t.text,
                        "accepted: a 64-bit number (decimal or 0x hex)",
                    )
                };
                let v = parse_uint(v)
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(bad)?;
                let m = match m {
                    None => None,
                    // `-1` (all ones) is how ovs-ofctl's own messages write an exact mask.
                    Some("-1") => Some(u64::MAX),
                    Some(m) => Some(
                        parse_uint(m)
                            .and_then(|v| u64::try_from(v).ok())
                            .ok_or_else(bad)?,
                    ),
                };
                if m.is_some() && !filter {
                    return Err(OfctlError::syntax(
                        t.text,
                        "a new rule takes no cookie mask (cookie=V/M is for mod-flows and del-flows)",
                    ));
                }
                k.cookie = Some((v, m));
            }
            "idle_timeout" => k.idle_timeout = num_key(&t, "seconds 0..=65535")?,
            "hard_timeout" => k.hard_timeout = num_key(&t, "seconds 0..=65535")?,
            "out_port" => {
                if !filter {
                    return Err(OfctlError::syntax(
                        t.text,
                        "out_port is only for mod-flows and del-flows filters",
                    ));
                }
                let p = t
                    .value
                    .and_then(parse_port)
                    .filter(|p| *p < fields::PORT_MAX || *p == fields::PORT_LOCAL)
                    .ok_or_else(|| {
                        OfctlError::value("out_port", t.text, "accepted: 0..=65279 or LOCAL")
                    })?;
                k.out_port = Some(p);
            }
            key if IGNORED_KEYS.contains(&key) => {}
            _ => b.field(&t)?,
        }
    }
    Ok((b, k))
}

/// Split off the actions: the text after the `actions=` keyword, if any.
fn split_actions(s: &str) -> Result<(&str, Option<&str>), OfctlError> {
    for t in tokens_prefix(s)? {
        if t.key == "actions" || t.key == "action" {
            let start = t.text.as_ptr() as usize - s.as_ptr() as usize;
            return Ok((&s[..start], Some(&s[t.value_start..])));
        }
    }
    Ok((s, None))
}

/// Tokens up to and including the first `actions` one (the rest is action syntax).
fn tokens_prefix(s: &str) -> Result<Vec<Token<'_>>, OfctlError> {
    // Find "actions" as a key at a token boundary without tokenizing the actions themselves.
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_delim(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_delim(b[i]) && !matches!(b[i], b'=' | b':' | b'(') {
            i += 1;
        }
        let key = &s[start..i];
        if (key == "actions" || key == "action") && i < b.len() && matches!(b[i], b'=' | b':') {
            out.push(Token {
                key,
                value: None,
                text: &s[start..i],
                value_start: i + 1,
            });
            return Ok(out);
        }
        // Skip the rest of this item.
        let mut depth = 0usize;
        while i < b.len() && (depth > 0 || !is_delim(b[i])) {
            match b[i] {
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
        }
    }
    Ok(out)
}

/// `add-flow` syntax: a rule.
pub(crate) fn parse_rule(s: &str, version: OpenFlowVersion) -> Result<Rule, OfctlError> {
    let (head, actions) = split_actions(s)?;
    let Some(actions) = actions else {
        return Err(OfctlError::syntax(
            s.trim(),
            "a rule needs its actions (`actions=...`, `actions=drop` to drop)",
        ));
    };
    let (b, k) = parse_keys(head, false)?;
    let m = b.finish()?;
    let table = k.table.as_ref().map(|t| t.0).unwrap_or(0);
    let actions = parse_actions_as(actions, Some(&m), Some(table), version)?;
    Ok(Rule {
        table,
        priority: k.priority.unwrap_or(DEFAULT_PRIORITY),
        cookie: k.cookie.map(|c| c.0).unwrap_or(0),
        m,
        actions,
        idle_timeout: k.idle_timeout,
        hard_timeout: k.hard_timeout,
    })
}

/// `mod-flows`/`del-flows` syntax: a filter and, for `mod-flows`, actions.
/// A filter, its actions (if any) and the cookie given without a mask (`cookie=V`: for
/// `mod-flows` the rules' new cookie, as ovs-ofctl's OpenFlow 1.0; only `cookie=V/M` filters).
pub(crate) fn parse_filter_and_actions(
    s: &str,
    strict: bool,
    version: OpenFlowVersion,
) -> Result<FilterParts, OfctlError> {
    let (head, actions) = split_actions(s)?;
    let (b, k) = parse_keys(head, true)?;
    if !strict && k.priority.is_some() {
        // ovs-ofctl ignores a priority in a non-strict filter; make it a visible error.
        return Err(OfctlError::syntax(
            "priority",
            "a priority only selects rules with --strict (mod-flows/del-flows --strict)",
        ));
    }
    let m = b.finish()?;
    let table = if k.table_all {
        None
    } else {
        k.table.as_ref().map(|t| t.0)
    };
    let actions = match actions {
        Some(a) => Some(parse_actions_as(a, Some(&m), table, version)?),
        None => None,
    };
    let filter = RuleFilter {
        table,
        m,
        strict: strict.then(|| k.priority.unwrap_or(DEFAULT_PRIORITY)),
        cookie: k.cookie.and_then(|(v, m)| Some((v, m?))),
        out_port: k.out_port,
    };
    let new_cookie = k.cookie.and_then(|(v, m)| m.is_none().then_some(v));
    Ok((filter, actions, new_cookie))
}

/// What [`parse_filter_and_actions`] returns.
pub(crate) type FilterParts = (RuleFilter, Option<Vec<crate::rule::Action>>, Option<u64>);

/// The statistics a `dump-flows` line carries (for tests and pasted dumps).
pub(crate) fn parse_stats(s: &str) -> Result<super::RuleStats, OfctlError> {
    let (head, _) = split_actions(s)?;
    let mut st = super::RuleStats::default();
    for t in tokens(head)? {
        let v = t.value.unwrap_or("");
        match t.key {
            "n_packets" => st.packets = num_key(&t, "a count")?,
            "n_bytes" => st.bytes = num_key(&t, "a count")?,
            "idle_age" => st.idle_age_secs = Some(num_key(&t, "seconds")?),
            "duration" => {
                st.duration_secs = v
                    .strip_suffix('s')
                    .and_then(|d| d.parse::<f64>().ok())
                    .filter(|d| d.is_finite() && *d >= 0.0)
                    .ok_or_else(|| {
                        OfctlError::value("duration", t.text, "accepted: SECONDS.MILLISs")
                    })?
            }
            _ => {}
        }
    }
    Ok(st)
}

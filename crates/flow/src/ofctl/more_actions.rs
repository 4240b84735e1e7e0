//! The `ovs-ofctl` actions that are not header writes or plain outputs: `output(port=,max_len=)`,
//! `note:`, `set_queue:`, `dec_ttl(ids)`, `move:`, `controller`, and the checks on where the instructions
//! (`clear_actions`, `write_actions(...)`, `goto_table`) and nested lists (`clone(...)`) may
//! stand, with their printing as `ovs-ofctl -O OpenFlow13 dump-flows` prints them.
//! Never panics on any text; knows nothing of tables or packets.

use super::error::OfctlError;
use super::fields::{fmt_port, parse_port, Prereq, PORT_LOCAL, PORT_MAX};
use super::parse::Token;
use super::values::parse_uint;
use crate::key::Field;
use crate::rule::{Action, ControllerAction, PortRef, PuntReason};

/// Shortest `max_len` Open vSwitch accepts (an Ethernet header).
const MIN_MAX_LEN: u128 = 14;

/// `output(port=P,max_len=N)` (either order; `max_len` may be absent only where OVS's
/// `output:P` would be written).
pub(crate) fn parse_output_trunc(t: &Token<'_>) -> Result<Action, OfctlError> {
    const ACCEPTED: &str = "accepted: output(port=PORT,max_len=BYTES) with BYTES 14..=65535";
    let (mut port, mut max_len) = (None, None);
    for item in t.value.unwrap_or("").split(',').map(str::trim) {
        match item.split_once('=') {
            Some(("port", p)) if port.is_none() => port = Some(p.trim()),
            Some(("max_len", n)) if max_len.is_none() => max_len = Some(n.trim()),
            _ => return Err(OfctlError::syntax(t.text, ACCEPTED)),
        }
    }
    let (Some(port), Some(max_len)) = (port, max_len) else {
        return Err(OfctlError::syntax(t.text, ACCEPTED));
    };
    let n = parse_uint(max_len)
        .filter(|n| (MIN_MAX_LEN..=0xffff).contains(n))
        .ok_or_else(|| OfctlError::value("max_len", t.text, ACCEPTED))?;
    let p = parse_port(port).ok_or_else(|| {
        OfctlError::value(
            "output",
            t.text,
            "accepted: a port 0..=65279, IN_PORT or LOCAL",
        )
    })?;
    let port = match p {
        0xfff8 => PortRef::InPort,
        p if p < PORT_MAX || p == PORT_LOCAL => PortRef::Number(p),
        _ => {
            // Open vSwitch refuses to translate a truncated output to FLOOD, ALL or NORMAL.
            return Err(OfctlError::value(
                "output",
                t.text,
                "a truncated output goes to one port (0..=65279, IN_PORT or LOCAL), not to \
                 FLOOD, ALL or NORMAL",
            ));
        }
    };
    Ok(Action::OutputTrunc {
        port,
        max_len: n as u16,
    })
}

/// `note:HEX[.HEX]...`: bytes, padded with zeros as Open vSwitch pads them (the action is a
/// multiple of 8 bytes long: 10 bytes of header, so 6, 14, 22, ... bytes of note).
pub(crate) fn parse_note(t: &Token<'_>) -> Result<Action, OfctlError> {
    let s = t.value.unwrap_or("");
    let mut bytes = Vec::new();
    let digits: Vec<u8> = s.bytes().filter(|&c| c != b'.').collect();
    if !digits.len().is_multiple_of(2) || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(OfctlError::value(
            "note",
            t.text,
            "accepted: pairs of hex digits, optionally separated by dots (note:01.02.ab)",
        ));
    }
    for pair in digits.chunks(2) {
        let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
        bytes.push(hex(pair[0]) << 4 | hex(pair[1]));
    }
    if bytes.len() > 0xffff - 16 {
        return Err(OfctlError::value(
            "note",
            t.text,
            "a note holds at most 65519 bytes",
        ));
    }
    let padded = (bytes.len() + 10).div_ceil(8) * 8 - 10;
    bytes.resize(padded.max(6), 0);
    Ok(Action::Note(bytes))
}

/// `controller`, `controller:MAX_LEN`, `controller(max_len=N,reason=R,id=N)` (keys in any
/// order, each at most once). Open vSwitch's `userdata`, `pause` and `meter_id` need its own
/// controller channel extensions: refused, naming what is accepted.
pub(crate) fn parse_controller(t: &Token<'_>) -> Result<Action, OfctlError> {
    const ACCEPTED: &str = "accepted: controller, controller:MAX_LEN, controller(max_len=N,\
        reason=R,id=N) with MAX_LEN and N 0..=65535, R one of no_match, action, invalid_ttl, \
        action_set, group, packet_out";
    let mut c = ControllerAction::PLAIN;
    let Some(v) = t.value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Action::Controller(c));
    };
    let number = |s: &str, what: &str| {
        parse_uint(s.trim())
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| OfctlError::value(what, t.text, ACCEPTED))
    };
    if !t.text.contains('(') {
        c.max_len = number(v, "controller")?;
        return Ok(Action::Controller(c));
    }
    let mut seen: Vec<&str> = Vec::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item.split_once('=').unwrap_or((item, ""));
        let key = key.trim();
        if seen.contains(&key) {
            return Err(OfctlError::syntax(
                t.text,
                format!("`{key}` given twice; {ACCEPTED}"),
            ));
        }
        seen.push(key);
        match key {
            "max_len" => c.max_len = number(value, "max_len")?,
            "id" => c.id = number(value, "id")?,
            "reason" => {
                c.reason = PuntReason::from_name(value.trim())
                    .ok_or_else(|| OfctlError::value("reason", t.text, ACCEPTED))?
            }
            "userdata" | "pause" | "meter_id" => {
                return Err(OfctlError::syntax(
                    t.text,
                    format!(
                        "controller({key}) needs Open vSwitch's own controller extensions, \
                         which vecplane does not have; {ACCEPTED}"
                    ),
                ))
            }
            _ => {
                return Err(OfctlError::syntax(
                    t.text,
                    format!("unknown key `{key}`; {ACCEPTED}"),
                ))
            }
        }
    }
    Ok(Action::Controller(c))
}

/// A `controller` action as `ovs-ofctl` prints it: `CONTROLLER:MAX_LEN` when it is a plain
/// output to the controller, else `controller(reason=R,max_len=N,id=N)` with the keys that
/// differ from the defaults.
fn fmt_controller(c: &ControllerAction) -> String {
    if c.is_output() {
        return format!("CONTROLLER:{}", c.max_len);
    }
    let mut keys = Vec::new();
    if c.reason != PuntReason::Action {
        keys.push(format!("reason={}", c.reason.name()));
    }
    if c.max_len != u16::MAX {
        keys.push(format!("max_len={}", c.max_len));
    }
    if c.id != 0 {
        keys.push(format!("id={}", c.id));
    }
    format!("controller({})", keys.join(","))
}

/// `set_queue:N`.
pub(crate) fn parse_set_queue(t: &Token<'_>) -> Result<Action, OfctlError> {
    let n = parse_uint(t.value.unwrap_or(""))
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            OfctlError::value("set_queue", t.text, "accepted: a queue 0..=4294967295")
        })?;
    Ok(Action::SetQueue(n))
}

/// `dec_ttl(ID,...)`: controller ids 0..=65535.
pub(crate) fn parse_dec_ttl_ids(t: &Token<'_>) -> Result<Action, OfctlError> {
    let mut ids = Vec::new();
    for id in t.value.unwrap_or("").split(',').map(str::trim) {
        let n = parse_uint(id)
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| {
                OfctlError::value(
                    "dec_ttl",
                    t.text,
                    "accepted: dec_ttl or dec_ttl(ID,...) with controller ids 0..=65535",
                )
            })?;
        ids.push(n);
    }
    Ok(Action::DecTtlIds(ids))
}

/// A field `move` may read or write, by NXM/OXM name or field name: the field, the width the
/// name has, and its prerequisite.
pub(crate) type MoveField = (Field, u32, Prereq);

/// `SRC[A..B]->DST[C..D]` for `move`, given how a name maps to a field (`lookup`, which also
/// knows the read-only fields when `readable` is true).
pub(crate) fn parse_move(
    s: &str,
    token: &str,
    lookup: impl Fn(&str, bool) -> Option<MoveField>,
) -> Result<(Action, Prereq, Prereq), OfctlError> {
    let Some((src, dst)) = s.split_once("->") else {
        return Err(OfctlError::syntax(
            token,
            "move needs `SRC[BITS]->DST[BITS]`",
        ));
    };
    let (sf, s_ofs, s_bits, sp) = subfield(src.trim(), token, true, &lookup)?;
    let (df, d_ofs, d_bits, dp) = subfield(dst.trim(), token, false, &lookup)?;
    if s_bits != d_bits {
        return Err(OfctlError::syntax(
            token,
            format!(
                "the source is {s_bits} bits wide but the destination is {d_bits} bits wide \
                 (give both the same width)"
            ),
        ));
    }
    let a = Action::Move {
        src: sf,
        src_ofs: s_ofs,
        dst: df,
        dst_ofs: d_ofs,
        bits: s_bits,
    };
    Ok((a, sp, dp))
}

/// `NAME[]`, `NAME[N]`, `NAME[A..B]` or `NAME`: field, first bit, width, prerequisite.
fn subfield(
    s: &str,
    token: &str,
    readable: bool,
    lookup: &impl Fn(&str, bool) -> Option<MoveField>,
) -> Result<(Field, u32, u32, Prereq), OfctlError> {
    let (name, range) = match s.split_once('[') {
        None => (s, None),
        Some((n, r)) => {
            let r = r
                .strip_suffix(']')
                .ok_or_else(|| OfctlError::syntax(token, "bits are written [], [N] or [A..B]"))?;
            (n, Some(r.trim()))
        }
    };
    let (field, width, prereq) = lookup(name, readable).ok_or_else(|| {
        OfctlError::syntax(
            token,
            format!(
                "`{name}` is not a field move can {} (accepted: NXM/OXM names such as \
                 NXM_NX_REG0, NXM_OF_IP_DST, NXM_OF_TCP_DST, NXM_NX_PKT_MARK, or field names \
                 such as reg0, ip_dst, tcp_dst, pkt_mark)",
                if readable { "read" } else { "write" }
            ),
        )
    })?;
    let (lo, hi) = match range {
        None | Some("") => (0, width - 1),
        Some(r) => {
            let (a, b) = r.split_once("..").unwrap_or((r, r));
            match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                (Ok(a), Ok(b)) if a <= b && b < width => (a, b),
                _ => {
                    return Err(OfctlError::syntax(
                        token,
                        format!(
                            "bits of `{name}` must be [A..B] with A <= B < {width} (its width)"
                        ),
                    ))
                }
            }
        }
    };
    Ok((field, lo, hi - lo + 1, prereq))
}

/// Where an item stands among a rule's instructions: OpenFlow 1.1+ orders them apply-actions,
/// `clear_actions`, `write_actions`, `goto_table`, and Open vSwitch refuses any other order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Plain actions.
    #[default]
    Apply,
    /// `clear_actions`.
    Clear,
    /// `write_actions(...)`.
    Write,
    /// `goto_table` (nothing may follow).
    Goto,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Apply => "the actions",
            Stage::Clear => "clear_actions",
            Stage::Write => "write_actions",
            Stage::Goto => "goto_table",
        }
    }

    /// Move to `next` for `token`, refusing an order Open vSwitch refuses.
    pub(crate) fn advance(&mut self, next: Stage, token: &str) -> Result<(), OfctlError> {
        if next < *self || next == *self && next != Stage::Apply {
            return Err(OfctlError::syntax(
                token,
                format!(
                    "{} must come before {} (OpenFlow orders a rule's instructions: actions, \
                     clear_actions, write_actions(...), goto_table), each at most once",
                    next.name(),
                    self.name()
                ),
            ));
        }
        *self = next;
        Ok(())
    }
}

/// What a nested action list (`clone(...)`, `write_actions(...)`) may not hold.
pub(crate) fn check_nested(outer: &str, actions: &[Action], token: &str) -> Result<(), OfctlError> {
    let bad = actions.iter().find(|a| match outer {
        // An action set runs one action of each kind in OpenFlow's order: Open vSwitch
        // accepts only those that have a place in that order.
        "write_actions" => !matches!(
            a,
            Action::Output(_)
                | Action::OutputTrunc { .. }
                | Action::Group(_)
                | Action::SetField { .. }
                | Action::Move { .. }
                | Action::PushVlan(_)
                | Action::PopVlan
                | Action::DecTtl
                | Action::DecTtlIds(_)
                | Action::SetQueue(_)
                | Action::Controller(_)
        ),
        _ => matches!(
            a,
            Action::GotoTable(_) | Action::WriteActions(_) | Action::ClearActions
        ),
    });
    match bad {
        None => Ok(()),
        Some(a) => Err(OfctlError::syntax(
            token,
            format!("{} is not allowed inside {outer}(...)", short_name(a)),
        )),
    }
}

fn short_name(a: &Action) -> &'static str {
    match a {
        Action::GotoTable(_) => "goto_table",
        Action::WriteActions(_) => "write_actions",
        Action::ClearActions => "clear_actions",
        Action::Clone(_) => "clone",
        Action::Exit => "exit",
        Action::Note(_) => "note",
        Action::Resubmit { .. } => "resubmit",
        _ => "this action",
    }
}

/// Print the actions of this module (None for the others).
pub(crate) fn fmt_more(a: &Action, nested: impl Fn(&[Action]) -> String) -> Option<String> {
    Some(match a {
        Action::OutputTrunc { port, max_len } => {
            let p = match port {
                PortRef::Number(n) => fmt_port(*n),
                PortRef::InPort => "IN_PORT".into(),
                PortRef::Flood => "FLOOD".into(),
                PortRef::All => "ALL".into(),
                PortRef::Normal => "NORMAL".into(),
            };
            format!("output(port={p},max_len={max_len})")
        }
        Action::DecTtlIds(ids) => {
            let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
            format!("dec_ttl({})", ids.join(","))
        }
        Action::Note(bytes) => {
            let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("note:{}", hex.join("."))
        }
        Action::SetQueue(q) => format!("set_queue:{q}"),
        Action::Exit => "exit".into(),
        Action::ClearActions => "clear_actions".into(),
        Action::Clone(inner) => format!("clone({})", nested(inner)),
        Action::WriteActions(inner) => format!("write_actions({})", nested(inner)),
        Action::Controller(c) => fmt_controller(c),
        _ => return None,
    })
}

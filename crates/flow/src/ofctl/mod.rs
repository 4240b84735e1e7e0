//! The flow syntax of `ovs-ofctl`: parse what Open vSwitch 3.1 accepts and dumps (rules, filters,
//! actions, groups, flows files) into the plain data of `rule`, and print it back exactly as
//! `ovs-ofctl -O OpenFlow13 dump-flows` (groups: `-O OpenFlow15 dump-groups`) and
//! `ofproto/trace` ("Megaflow:") do. Owns no table and no state; never panics on any input.
//! Checked against text recorded from a real OVS (tests/golden/ofctl/, record.sh there).
//!
//! Deliberate differences from `ovs-ofctl`, each stricter:
//! - a field whose prerequisite is missing (`tp_dst=80` without `tcp`, `tcp_dst` on `udp`) is
//!   refused, where OpenFlow 1.3 `ovs-ofctl` silently drops it or takes it for `tp_dst`;
//! - a value wider than its field (`dl_vlan=4096`, `nw_ecn=4`, `198.18.0.256`) is refused, where
//!   `ovs-ofctl` truncates it (but `nw_tos=0xb9` matches as `nw_tos=184`, as in OVS: its ECN
//!   bits are ignored); a field given twice is refused, where
//!   `ovs-ofctl` keeps the last; a priority in a non-strict filter is refused (OVS ignores it);
//! - rules live in tables 0..=253 (the ones Open vSwitch lets rules use); `goto_table` must go
//!   forward (to at most 254).
//!
//! And laxer: `pop_vlan`/`strip_vlan` and `dec_ttl` need no VLAN or IP match (as over
//! OpenFlow 1.0); an IPv6 mask may be any address (OVS misreads one that starts with a digit).
//! Port names are not known here: numbers only (`ovs-ofctl --no-names`), and `LOCAL`.
//!
//! Printing follows OpenFlow 1.3's view of a rule, so a rule pasted from an OpenFlow 1.0 dump
//! (`mod_dl_src:...`) prints as `set_field:...->eth_src`, as OVS itself prints it over 1.3; a
//! `load:` of a whole field prints as `set_field`, as OVS prints it over OpenFlow 1.5
//! (golden/ofctl/normalised.txt). `mod_vlan_vid` becomes `push_vlan` + `set_field` unless the
//! match promises a tag, as over OpenFlow 1.3. Which name a `set_field` prints (`tcp_dst` or
//! `udp_dst`, `ip_src` or `arp_spa`) follows the rule's match; `format_actions` alone, without a
//! match, prints the TCP and IPv4 names.
//!
//! Printing differs from OVS's only in spelling where an action has two: `mod_nw_ttl:N` prints
//! as `set_field:N->nw_ttl`, `set_field:T->nw_tos` and `load:..->NXM_OF_IP_TOS[..]` as the
//! `ip_dscp` write they are (golden/ofctl/spellings.txt lists the spellings of issue 32 item 12,
//! checked against ovs-ofctl and ofproto/trace by tests/ovs_spellings.rs). A rule sent as
//! OpenFlow 1.0 ([`parse_flow_as`]) whose `mod_tp_*`/`mod_nw_tos` the match does not allow
//! prints those in their 1.0 spelling, as OVS does.
//!
//! What the actions become (for those who execute them): `mod_vlan_vid:N` and
//! `set_field:0x1000|N->vlan_vid` are `SetField { field: VlanVid, value: N, mask: 0xfff }`;
//! `mod_vlan_pcp` a `SetField` of `VlanPcp`; `mod_nw_tos:T` one of `IpDscp` (`T >> 2`);
//! `set_tunnel[64]` one of `TunId`; `load:V->F[A..B]` a masked `SetField`; `icmp_type`/`icmp_code`
//! live in `TpSrc`/`TpDst` (a match on them masks all 16 bits, as OVS does).

mod actions;
mod error;
mod fields;
mod format;
mod group;
mod more_actions;
mod parse;
mod values;

#[cfg(test)]
mod tests;

pub use error::{OfctlError, OfctlFileError};

use crate::rule::{Action, FlowMod, Group, Match, Rule, RuleFilter};

/// The OpenFlow version a rule is sent as (`ovs-ofctl -O`). It decides which actions are
/// checked against the match: over OpenFlow 1.0 its own header rewrites (`mod_nw_tos`,
/// `mod_tp_src`, `mod_tp_dst`) are not (`ip,actions=mod_tp_dst:80` is a rule
/// only there); they then change only the packets that have the field, as in Open vSwitch.
/// Versions 1.1 to 1.5 check them all alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OpenFlowVersion {
    /// `OpenFlow10`.
    OpenFlow10,
    /// `OpenFlow11` .. `OpenFlow15` (the default).
    #[default]
    OpenFlow13,
}

impl std::str::FromStr for OpenFlowVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "OpenFlow10" => Ok(OpenFlowVersion::OpenFlow10),
            "OpenFlow11" | "OpenFlow12" | "OpenFlow13" | "OpenFlow14" | "OpenFlow15" => {
                Ok(OpenFlowVersion::OpenFlow13)
            }
            _ => Err(format!(
                "unknown OpenFlow version `{s}`; accepted: OpenFlow10, OpenFlow11, OpenFlow12, \
                 OpenFlow13, OpenFlow14, OpenFlow15"
            )),
        }
    }
}

/// Which `ovs-ofctl` command a flow-mod text is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowModKind {
    /// `add-flow`.
    Add,
    /// `mod-flows`.
    Modify,
    /// `mod-flows --strict`.
    ModifyStrict,
    /// `del-flows`.
    Delete,
    /// `del-flows --strict`.
    DeleteStrict,
}

/// The counters `dump-flows` prints for a rule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RuleStats {
    /// Packets that hit the rule.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Seconds since the rule was added (printed with three decimals).
    pub duration_secs: f64,
    /// Seconds since the last hit; `None` prints no `idle_age` (as OpenFlow 1.3 dumps do).
    pub idle_age_secs: Option<u64>,
}

/// A rule in `add-flow` syntax (`table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,
/// actions=output:2`). A `dump-flows` line is accepted too: its statistics are ignored.
pub fn parse_flow(text: &str) -> Result<Rule, OfctlError> {
    parse::parse_rule(text, OpenFlowVersion::default())
}

/// [`parse_flow`] for a rule sent as `version` (`ovs-ofctl -O OpenFlow10 add-flow`).
pub fn parse_flow_as(text: &str, version: OpenFlowVersion) -> Result<Rule, OfctlError> {
    parse::parse_rule(text, version)
}

/// The match part of `mod-flows`/`del-flows` (`strict`: `--strict`, so the priority counts).
/// Accepts `table=` (255 or absent: every table), `cookie=V/M` and `out_port=`.
/// `cookie=V` without a mask matches exactly that cookie (laxer than ovs-ofctl, which refuses
/// it in `del-flows` and asks for `cookie=V/-1`).
pub fn parse_filter(text: &str, strict: bool) -> Result<RuleFilter, OfctlError> {
    let (mut filter, actions, new_cookie) =
        parse::parse_filter_and_actions(text, strict, OpenFlowVersion::default())?;
    if actions.is_some() {
        return Err(OfctlError::syntax(
            text.trim(),
            "a filter takes no actions (use parse_flow_mod with Modify)",
        ));
    }
    if let Some(c) = new_cookie {
        filter.cookie = Some((c, u64::MAX));
    }
    Ok(filter)
}

/// One `add-flow`, `mod-flows [--strict]` or `del-flows [--strict]` line as a change. As
/// ovs-ofctl's default protocol (OpenFlow 1.0), `mod-flows` sets the cookie of the rules it
/// changes (or adds) to its `cookie=V` (no mask), 0 when absent; with `cookie=V/M` (a filter)
/// the cookies stay.
pub fn parse_flow_mod(cmd: FlowModKind, text: &str) -> Result<FlowMod, OfctlError> {
    parse_flow_mod_as(cmd, text, OpenFlowVersion::default())
}

/// [`parse_flow_mod`] for a change sent as `version` (`ovs-ofctl -O OpenFlow10`).
pub fn parse_flow_mod_as(
    cmd: FlowModKind,
    text: &str,
    version: OpenFlowVersion,
) -> Result<FlowMod, OfctlError> {
    match cmd {
        FlowModKind::Add => Ok(FlowMod::Add(parse_flow_as(text, version)?)),
        FlowModKind::Modify | FlowModKind::ModifyStrict => {
            let strict = cmd == FlowModKind::ModifyStrict;
            let (filter, actions, cookie) = parse::parse_filter_and_actions(text, strict, version)?;
            let actions = actions.ok_or_else(|| {
                OfctlError::syntax(
                    text.trim(),
                    "mod-flows needs the new actions (`actions=...`)",
                )
            })?;
            // With a cookie filter the cookies stay (OVS checked: 3.1 over OpenFlow 1.0).
            let cookie = match filter.cookie {
                Some(_) => None,
                None => Some(cookie.unwrap_or(0)),
            };
            Ok(FlowMod::Modify {
                filter,
                actions,
                cookie,
            })
        }
        FlowModKind::Delete | FlowModKind::DeleteStrict => {
            let strict = cmd == FlowModKind::DeleteStrict;
            Ok(FlowMod::Delete(parse_filter(text, strict)?))
        }
    }
}

/// An action list on its own (no match to check prerequisites against, no table for goto).
pub fn parse_actions(text: &str) -> Result<Vec<Action>, OfctlError> {
    actions::parse_actions_in(text, None, None)
}

/// The actions of a packet-out (`ovs-ofctl packet-out`'s ACTIONS): an action list in which
/// `table` (`output:TABLE`) runs the packet through the tables from table 0 as received on
/// its `in_port` — read as `resubmit(,0)`, which is what Open vSwitch does with it. The
/// instructions (`goto_table`, `write_actions`, `clear_actions`) are refused: a packet-out
/// carries actions only.
pub fn parse_packet_out_actions(text: &str) -> Result<Vec<Action>, OfctlError> {
    let toks = parse::tokens(text)?;
    let mut items: Vec<&str> = Vec::with_capacity(toks.len());
    for t in &toks {
        let table = match (t.key.to_ascii_lowercase().as_str(), t.value) {
            ("output", Some(v)) => fields::parse_port(v.trim()) == Some(fields::PORT_TABLE),
            (k, None) => fields::parse_port(k) == Some(fields::PORT_TABLE),
            _ => false,
        };
        items.push(if table { "resubmit(,0)" } else { t.text });
    }
    let actions = actions::parse_actions_in(&items.join(","), None, None)?;
    let instruction = actions.iter().find_map(|a| match a {
        Action::GotoTable(_) => Some("goto_table"),
        Action::WriteActions(_) => Some("write_actions"),
        Action::ClearActions => Some("clear_actions"),
        _ => None,
    });
    if let Some(i) = instruction {
        return Err(OfctlError::syntax(
            text.trim(),
            format!(
                "`{i}` is an instruction; a packet-out takes actions only (`table` runs the \
                 packet through the tables)"
            ),
        ));
    }
    Ok(actions)
}

/// A group in `add-group` syntax.
pub fn parse_group(text: &str) -> Result<Group, OfctlError> {
    group::parse_group(text)
}

/// A flows file (`add-flows FILE`): one rule a line, `#` comments and blank lines skipped, and
/// so are the reply headers of a pasted `dump-flows` (`NXST_FLOW reply (xid=0x4):`,
/// `OFPST_FLOW reply (OF1.3) (xid=0x2):`).
pub fn parse_flows_file(text: &str) -> Result<Vec<Rule>, OfctlFileError> {
    let mut rules = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        let header = (l.starts_with("NXST_FLOW reply") || l.starts_with("OFPST_FLOW reply"))
            && l.ends_with("):");
        if l.is_empty() || l.starts_with('#') || header {
            continue;
        }
        rules.push(parse_flow(l).map_err(|source| OfctlFileError {
            line: i + 1,
            source,
        })?);
    }
    Ok(rules)
}

/// The statistics of a pasted `dump-flows` line (zero when it carries none).
pub fn parse_flow_stats(text: &str) -> Result<RuleStats, OfctlError> {
    parse::parse_stats(text)
}

/// A rule as a `dump-flows` line prints it (OVS puts one space before each line; this does
/// not). With `stats`: `cookie=0x0, duration=1.234s, table=0, n_packets=.., n_bytes=.., ...`;
/// without: as `--no-stats` prints it.
pub fn format_rule(rule: &Rule, stats: Option<&RuleStats>) -> String {
    format::fmt_rule(rule, stats)
}

/// A match as OVS prints it (`tcp,nw_dst=198.18.2.0/24,tp_dst=80`; empty for match-all).
pub fn format_match(m: &Match) -> String {
    format::fmt_match(m, crate::rule::DEFAULT_PRIORITY)
}

/// Actions as OVS prints them (`drop` for none).
pub fn format_actions(actions: &[Action]) -> String {
    actions::fmt_actions(actions, &fields::Ctx::default())
}

/// A group as `dump-groups` prints it (without the leading space).
pub fn format_group(group: &Group) -> String {
    group::fmt_group(group)
}

/// A megaflow as `ofproto/trace` prints it after "Megaflow: " (and `dpctl/dump-flows`-like):
/// `recirc_id=0,eth,tcp,in_port=1,nw_dst=198.18.2.0/24,nw_frag=no,tp_dst=80`.
pub fn format_megaflow(m: &Match) -> String {
    format::fmt_megaflow(m)
}

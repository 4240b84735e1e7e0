//! Builders shared by this crate's tests: keys, matches, rules and a switch with ports 1..=4
//! (vecplane ports 11..=14) and a VXLAN tunnel port 9 (vecplane port 99).

use crate::key::{Field, FlowKey, FRAG_ANY, FRAG_LATER};
use crate::rule::{Action, Match, Rule, DEFAULT_PRIORITY};
use crate::tables::SwitchPorts;

/// Ports 1..=4 -> 11..=14, tunnel port 9 -> 99.
pub fn ports() -> SwitchPorts {
    let mut p = SwitchPorts::new();
    for i in 1..=4u16 {
        p.add(i, 10 + i, false).unwrap();
    }
    p.add(9, 99, true).unwrap();
    p
}

/// An IPv4 address from its dotted form.
pub const fn ip(a: u8, b: u8, c: u8, d: u8) -> u128 {
    ((a as u128) << 24) | ((b as u128) << 16) | ((c as u128) << 8) | d as u128
}

/// An IPv4 key as extract would give it.
pub fn ip4_key(in_port: u16, proto: u8, src: u128, dst: u128, sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, in_port as u128);
    k.set(Field::EthSrc, 0x0200_0000_0001);
    k.set(Field::EthDst, 0x0200_0000_0002);
    k.set(Field::EthType, 0x0800);
    k.set(Field::NwSrc, src);
    k.set(Field::NwDst, dst);
    k.set(Field::NwProto, proto as u128);
    k.set(Field::NwTtl, 64);
    k.set(Field::TpSrc, sport as u128);
    k.set(Field::TpDst, dport as u128);
    k
}

/// Make `k` consistent with what extract produces (fragments, ICMP, VLAN CFI, no metadata).
pub fn sanitize(k: &mut FlowKey) {
    for w in &mut k.w[1..8] {
        *w = 0;
    }
    if k.get(Field::VlanTci) != 0 {
        k.set(Field::VlanPresent, 1);
    }
    let et = k.get(Field::EthType) as u16;
    if et != 0x0800 && et != 0x86dd {
        k.set(Field::NwFrag, 0);
    }
    let frag = k.get(Field::NwFrag) as u8;
    if frag & FRAG_LATER != 0 {
        k.set(Field::NwFrag, (FRAG_ANY | FRAG_LATER) as u128);
        k.set(Field::TpSrc, 0);
        k.set(Field::TpDst, 0);
        k.set(Field::TcpFlags, 0);
    }
    let proto = k.get(Field::NwProto);
    if (et == 0x0800 && proto == 1) || (et == 0x86dd && proto == 58) {
        k.set(Field::TpSrc, k.get(Field::TpSrc) & 0xff);
        k.set(Field::TpDst, k.get(Field::TpDst) & 0xff);
    }
}

/// A match from (field, value, mask) triples.
pub fn m(fields: &[(Field, u128, u128)]) -> Match {
    let mut x = Match::ANY;
    for (f, v, mask) in fields {
        x.set(*f, *v, *mask);
    }
    x
}

/// Exact (field, value).
pub fn ex(f: Field, v: u128) -> (Field, u128, u128) {
    (f, v, f.all_ones())
}

/// A rule.
pub fn rule(table: u8, priority: u16, m: Match, actions: Vec<Action>) -> Rule {
    Rule {
        table,
        priority,
        cookie: 0,
        m,
        actions,
        idle_timeout: 0,
        hard_timeout: 0,
    }
}

/// A rule at the default priority in table 0.
pub fn rule0(m: Match, actions: Vec<Action>) -> Rule {
    rule(0, DEFAULT_PRIORITY, m, actions)
}

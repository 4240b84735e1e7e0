//! Random rule sets (ovs-ofctl text, two tables), random changes to them (add, mod and del,
//! loose and strict) and random packets (vecplane keys) for the randomized differential test,
//! from a seeded generator so that a failure can be replayed (the seed is printed). Matches use
//! in_port, VLAN, Ethernet addresses, dl_type, IPv4 prefixes and arbitrary masks, TTL, nw_proto
//! and transport ports with masks; actions output (ports, in_port, flood, all), rewrite headers,
//! push/pop/retag VLANs, dec_ttl, goto or resubmit; priorities are distinct within a table,
//! since Open vSwitch breaks ties between overlapping rules arbitrarily. A VLAN is pushed only
//! onto an untagged packet (vecplane's key holds one tag, OVS would push a second). Addresses
//! stay in 198.18.0.0/15.

use flow::{Field, FlowKey};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// A small seeded generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    /// A generator starting at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The switch's OpenFlow ports in random tests.
pub const PORTS: [u16; 4] = [1, 2, 3, 4];

/// An address of the small pool rules and packets share (198.18.0.0 - 198.19.3.7), so that
/// packets hit rules often.
fn pool_addr(rng: &mut Rng) -> u32 {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    base | ((rng.below(2) as u32) << 16) | ((rng.below(4) as u32) << 8) | rng.below(8) as u32
}

const PORT_POOL: [u16; 8] = [22, 53, 80, 81, 443, 1024, 8080, 8095];

fn ip_match(rng: &mut Rng, name: &str) -> String {
    let a = pool_addr(rng);
    if rng.chance(15) {
        // An arbitrary (non-contiguous) mask.
        let mask = 0xffff_0000 | (rng.next() as u32 & 0xffff);
        return format!(
            "{name}={}/{}",
            Ipv4Addr::from(a & mask),
            Ipv4Addr::from(mask)
        );
    }
    let len = rng.pick(&[15u32, 16, 20, 23, 24, 28, 30, 31, 32]);
    let mask = u32::MAX << (32 - len);
    format!("{name}={}/{len}", Ipv4Addr::from(a & mask))
}

fn tp_match(rng: &mut Rng, name: &str) -> String {
    let v = rng.pick(&PORT_POOL);
    match rng.below(3) {
        0 => format!("{name}={v}"),
        _ => {
            let mask = rng.pick(&[0xfff0u16, 0xff00, 0x8000, 0xfffe, 0xfc00]);
            format!("{name}={:#x}/{mask:#x}", v & mask)
        }
    }
}

fn random_match(rng: &mut Rng) -> String {
    let mut m = Vec::new();
    if rng.chance(30) {
        m.push(format!("in_port={}", rng.pick(&PORTS)));
    }
    match rng.below(10) {
        0 => m.push("vlan_tci=0x0000/0x1000".to_string()),
        1 => m.push(format!("dl_vlan={}", rng.pick(&VLANS))),
        2 => m.push(format!("dl_vlan_pcp={}", rng.below(8))),
        _ => {}
    }
    if rng.chance(10) {
        m.push(format!("dl_dst=02:00:00:00:00:1{}", rng.below(4)));
    } else if rng.chance(10) {
        m.push("dl_src=02:00:00:00:00:00/ff:ff:ff:ff:ff:fe".to_string());
    }
    let proto = rng.pick(&["", "ip", "tcp", "tcp", "udp", "udp", "icmp", "arp"]);
    if !proto.is_empty() {
        m.push(proto.to_string());
    }
    if ["ip", "tcp", "udp", "icmp"].contains(&proto) {
        if rng.chance(40) {
            m.push(ip_match(rng, "nw_src"));
        }
        if rng.chance(50) {
            m.push(ip_match(rng, "nw_dst"));
        }
        if rng.chance(8) {
            m.push(format!("nw_ttl={}", rng.pick(&[1, 2, 64])));
        }
    }
    if proto == "tcp" || proto == "udp" {
        if rng.chance(50) {
            m.push(tp_match(rng, "tp_dst"));
        }
        if rng.chance(20) {
            m.push(tp_match(rng, "tp_src"));
        }
    }
    m.join(",")
}

/// VLAN ids of rules and packets.
const VLANS: [u16; 4] = [1, 2, 3, 10];

fn random_output(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 | 1 => "drop".to_string(),
        2 | 3 => format!("output:{},output:{}", rng.pick(&PORTS), rng.pick(&PORTS)),
        4 => "in_port".to_string(),
        5 => rng.pick(&["flood", "all"]).to_string(),
        _ => format!("output:{}", rng.pick(&PORTS)),
    }
}

/// A header rewrite valid for a rule whose match is `m`.
fn random_rewrite(rng: &mut Rng, m: &str) -> Option<String> {
    let has = |k: &str| m.split(',').any(|t| t == k);
    let ip = has("ip") || has("tcp") || has("udp") || has("icmp");
    let l4 = has("tcp") || has("udp");
    let a = pool_addr(rng);
    Some(match rng.below(9) {
        0 => format!("mod_dl_dst:02:00:00:00:00:1{}", rng.below(4)),
        1 if ip => format!("mod_nw_dst:{}", Ipv4Addr::from(a)),
        2 if ip => format!(
            "set_field:{}/255.255.255.0->nw_src",
            Ipv4Addr::from(a & 0xffff_ff00)
        ),
        3 if ip => "dec_ttl".to_string(),
        4 if ip => format!("mod_nw_tos:{}", 4 * rng.below(64)),
        5 if l4 => format!("mod_tp_dst:{}", rng.pick(&PORT_POOL)),
        6 if has("vlan_tci=0x0000/0x1000") => format!(
            "push_vlan:0x8100,set_field:{}->vlan_vid",
            0x1000 | rng.pick(&VLANS)
        ),
        // Only where the match says whether there is a tag: OpenFlow 1.3 turns mod_vlan_vid
        // into push_vlan + set_field when the match does not prove a tag, so OVS would push
        // a second tag onto a tagged packet (vecplane, as OpenFlow 1.0, retags it).
        7 if m.contains("dl_vlan") || m.contains("vlan_tci") => {
            format!("mod_vlan_vid:{}", rng.pick(&VLANS))
        }
        // OpenFlow 1.3 (what rules are added over) pops only a tag the match proves.
        8 if m.contains("dl_vlan") => "strip_vlan".to_string(),
        _ => return None,
    })
}

/// Actions for a rule in `table` whose match is `m`: rewrites between outputs, and in table
/// 0 a goto or resubmit to table 1.
fn random_actions(rng: &mut Rng, table: usize, m: &str, groups: bool) -> String {
    let mut acts = Vec::new();
    if rng.chance(30) {
        acts.extend(random_rewrite(rng, m));
    }
    if table == 0 && rng.chance(30) {
        if rng.chance(30) {
            acts.push("resubmit(,1)".to_string());
            acts.push(format!("output:{}", rng.pick(&PORTS)));
        } else {
            acts.push("goto_table:1".to_string());
        }
        return acts.join(",");
    }
    let out = if groups && rng.chance(15) {
        format!("group:{}", 1 + rng.below(2))
    } else {
        random_output(rng)
    };
    if out == "drop" {
        // ovs-ofctl refuses `drop` beside other actions.
        return out;
    }
    acts.push(out);
    if rng.chance(20) {
        acts.extend(random_rewrite(rng, m));
        acts.push(format!("output:{}", rng.pick(&PORTS)));
    }
    acts.join(",")
}

/// What rules may use: priorities in use, by table (0 and 1), since Open vSwitch breaks ties
/// between overlapping rules arbitrarily, a table never gets two rules of one priority; and
/// whether the groups of [`random_groups`] exist.
#[derive(Default)]
pub struct RuleGen {
    used: [BTreeSet<u16>; 2],
    /// Rules may send to groups 1 (all) and 2 (indirect).
    pub groups: bool,
}

impl RuleGen {
    /// A priority not used yet in `table` (1..=999), now taken.
    pub fn fresh(&mut self, rng: &mut Rng, table: usize) -> u16 {
        loop {
            let p = 1 + rng.below(999) as u16;
            if self.used[table].insert(p) {
                return p;
            }
        }
    }

    /// Take `prio` in `table`; false when it was taken already.
    pub fn take(&mut self, table: usize, prio: u16) -> bool {
        self.used[table].insert(prio)
    }
}

/// One random rule (`table=T,priority=P[,cookie=C],MATCH,actions=...`) with a fresh priority.
pub fn random_rule(rng: &mut Rng, used: &mut RuleGen) -> String {
    let table = usize::from(rng.chance(35));
    let prio = used.fresh(rng, table);
    let m = random_match(rng);
    let actions = random_actions(rng, table, &m, used.groups);
    let mut parts = vec![format!("table={table}"), format!("priority={prio}")];
    if rng.chance(25) {
        parts.push(format!("cookie={:#x}", 1 + rng.below(3)));
    }
    if !m.is_empty() {
        parts.push(m);
    }
    parts.push(format!("actions={actions}"));
    parts.join(",")
}

/// Groups 1 (`all`: a copy out of one port, a rewritten copy out of another) and 2
/// (`indirect`: maybe dec_ttl, then out of a port), as ovs-ofctl add-groups text. No select
/// group: vecplane's bucket hash is not OVS's (the golden rule sets check select groups).
pub fn random_groups(rng: &mut Rng) -> String {
    let rewrite = rng.pick(&["mod_dl_dst:02:00:00:00:00:1a,", "dec_ttl,", ""]);
    let ttl = rng.pick(&["dec_ttl,", ""]);
    format!(
        "group_id=1,type=all,bucket=actions=output:{},bucket=actions={rewrite}output:{}\n\
         group_id=2,type=indirect,bucket=actions={ttl}output:{}\n",
        rng.pick(&PORTS),
        rng.pick(&PORTS),
        rng.pick(&PORTS)
    )
}

/// A rule set of `n` rules over tables 0 and 1, as ovs-ofctl add-flows text.
pub fn random_ruleset(rng: &mut Rng, n: usize) -> String {
    random_ruleset_in(rng, n, &mut RuleGen::default())
}

/// [`random_ruleset`] taking its priorities from `used`.
pub fn random_ruleset_in(rng: &mut Rng, n: usize, used: &mut RuleGen) -> String {
    let mut out = String::new();
    for _ in 0..n {
        out.push_str(&random_rule(rng, used));
        out.push('\n');
    }
    out
}

/// A change to a rule table, as the text of one ovs-ofctl command.
#[derive(Clone, Debug)]
pub enum Change {
    /// `add-flow TEXT`.
    Add(String),
    /// `mod-flows [--strict] TEXT` (TEXT has the new actions).
    Modify { text: String, strict: bool },
    /// `del-flows [--strict] TEXT`.
    Delete { text: String, strict: bool },
}

/// A random change to tables holding `existing` rules (`(table, priority, match text)`):
/// adds, modifies and deletes, loose and strict, of rules that exist and of ones that do not,
/// with table, cookie and out_port filters. Modified actions are outputs only (a modify is
/// sent as OpenFlow 1.0, which has no goto_table).
pub fn random_change(rng: &mut Rng, existing: &[(u8, u16, String)], used: &mut RuleGen) -> Change {
    let pick = |rng: &mut Rng| -> Option<(u8, u16, String)> {
        if existing.is_empty() {
            None
        } else {
            Some(existing[rng.below(existing.len() as u64) as usize].clone())
        }
    };
    let join = |parts: &[String]| {
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(",")
    };
    let loose_filter = |rng: &mut Rng| {
        let table = match rng.below(3) {
            0 => String::new(),
            t => format!("table={}", t - 1),
        };
        let m = if rng.chance(20) {
            String::new()
        } else {
            random_match(rng)
        };
        (table, m)
    };
    match rng.below(10) {
        0..=2 => Change::Add(random_rule(rng, used)),
        3 | 4 => {
            let (table, m) = loose_filter(rng);
            let actions = format!("actions={}", random_output(rng));
            Change::Modify {
                text: join(&[table, m, actions]),
                strict: false,
            }
        }
        5 => {
            let (t, p, m) = match pick(rng) {
                Some(r) if rng.chance(80) => r,
                _ => {
                    let t = rng.below(2) as u8;
                    (t, used.fresh(rng, usize::from(t)), random_match(rng))
                }
            };
            let actions = format!("actions={}", random_output(rng));
            Change::Modify {
                text: join(&[format!("table={t},priority={p}"), m, actions]),
                strict: true,
            }
        }
        6 | 7 => {
            let (table, m) = loose_filter(rng);
            let extra = match rng.below(6) {
                0 => format!("out_port={}", rng.pick(&PORTS)),
                1 => format!("cookie={:#x}/-1", 1 + rng.below(3)),
                _ => String::new(),
            };
            Change::Delete {
                text: join(&[table, m, extra]),
                strict: false,
            }
        }
        _ => {
            let (t, p, m) = match pick(rng) {
                Some((t, p, m)) if rng.chance(85) => (t, p, m),
                Some((t, p, m)) => (t, p ^ 1, m),
                None => (0, 1, String::new()),
            };
            Change::Delete {
                text: join(&[format!("table={t},priority={p}"), m]),
                strict: true,
            }
        }
    }
}

/// A random packet drawn from the same pools as the rules.
pub fn random_packet(rng: &mut Rng) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, u128::from(rng.pick(&PORTS)));
    k.set(
        Field::EthSrc,
        0x0200_0000_0000 | u128::from(rng.below(4) as u8),
    );
    k.set(
        Field::EthDst,
        0x0200_0000_0010 | u128::from(rng.below(4) as u8),
    );
    let (ty, proto) = rng.pick(&[
        (0x0800u128, 6u128),
        (0x0800, 6),
        (0x0800, 17),
        (0x0800, 17),
        (0x0800, 1),
        (0x0806, 1),
        (0x86dd, 17),
    ]);
    k.set(Field::EthType, ty);
    k.set(Field::NwProto, proto);
    if ty == 0x86dd {
        k.set(
            Field::Ipv6Src,
            0x2001_0db8_u128 << 96 | u128::from(rng.below(4)),
        );
        k.set(
            Field::Ipv6Dst,
            0x2001_0db8_u128 << 96 | 0x100 | u128::from(rng.below(4)),
        );
    } else {
        k.set(Field::NwSrc, u128::from(pool_addr(rng)));
        k.set(Field::NwDst, u128::from(pool_addr(rng)));
    }
    if rng.chance(25) {
        k.set(Field::VlanPresent, 1);
        k.set(Field::VlanVid, u128::from(rng.pick(&VLANS)));
        k.set(Field::VlanPcp, u128::from(rng.below(8) as u8));
    }
    if ty != 0x0806 {
        k.set(Field::NwTtl, rng.pick(&[64, 64, 64, 2, 1]));
        let port = |rng: &mut Rng| {
            if rng.chance(70) {
                rng.pick(&PORT_POOL) ^ (rng.below(4) as u16)
            } else {
                rng.next() as u16
            }
        };
        if proto == 1 {
            k.set(Field::TpSrc, u128::from(rng.pick(&[0u16, 3, 8, 11])));
            k.set(Field::TpDst, u128::from(rng.below(2)));
        } else {
            k.set(Field::TpSrc, u128::from(port(rng)));
            k.set(Field::TpDst, u128::from(port(rng)));
        }
    }
    k
}

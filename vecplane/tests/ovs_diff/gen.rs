//! Random rule sets, groups and packets for the differential test against Open vSwitch, from a
//! seeded generator (the test prints the seed; `VECPLANE_DIFF_SEED` replays it). Rules are
//! ovs-ofctl text that both accept, over tables 0-3 (goto and resubmit only forward, so no
//! loop), with distinct priorities per table (Open vSwitch breaks ties arbitrarily). Packets are
//! whole Ethernet frames built here, whose last four bytes tag them (`TAG` and an index) so that
//! every copy a switch sends can be told apart; addresses stay in 198.18.0.0/15 and 2001:db8::/32.
//! It never generates what the two differ on by design: select groups with more than one
//! bucket (each picks by its own hash), a tag pushed or set after which a later table could pop
//! (vecplane's key holds one tag).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// A small seeded generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The ports packets enter by and rules send to.
pub const PORTS: [u16; 4] = [1, 2, 3, 4];
/// Tables rules are spread over.
const TABLES: u8 = 4;
/// The first two bytes of every frame's last four (then the frame's index, big-endian).
pub const TAG: [u8; 2] = [0xd1, 0xf7];
const VLANS: [u16; 4] = [1, 2, 3, 10];
const PORT_POOL: [u16; 8] = [22, 53, 80, 81, 443, 1024, 8080, 8095];

fn pool_addr(rng: &mut Rng) -> u32 {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    base | ((rng.below(2) as u32) << 16) | ((rng.below(4) as u32) << 8) | rng.below(8) as u32
}

/// What a rule's match proves about the packet, for the actions that need a prerequisite.
#[derive(Clone, Copy, Default)]
struct Proves {
    ip: bool,
    l4: bool,
    /// The match says whether there is a tag (tagged: `Some(true)`).
    vlan: Option<bool>,
}

fn ip_match(rng: &mut Rng, name: &str) -> String {
    let a = pool_addr(rng);
    if rng.chance(15) {
        let mask = 0xffff_0000 | (rng.next() as u32 & 0xffff);
        return format!(
            "{name}={}/{}",
            Ipv4Addr::from(a & mask),
            Ipv4Addr::from(mask)
        );
    }
    let len = rng.pick(&[16u32, 20, 23, 24, 28, 31, 32]);
    let mask = u32::MAX << (32 - len);
    format!("{name}={}/{len}", Ipv4Addr::from(a & mask))
}

fn tp_match(rng: &mut Rng, name: &str) -> String {
    let v = rng.pick(&PORT_POOL);
    match rng.below(4) {
        0 => format!("{name}=0"),
        1 => format!("{name}={v}"),
        _ => {
            let mask = rng.pick(&[0xfff0u16, 0xff00, 0x8000, 0xfffe]);
            format!("{name}={:#x}/{mask:#x}", v & mask)
        }
    }
}

fn random_match(rng: &mut Rng) -> (String, Proves) {
    let mut m = Vec::new();
    let mut p = Proves::default();
    if rng.chance(30) {
        m.push(format!("in_port={}", rng.pick(&PORTS)));
    }
    match rng.below(10) {
        0 | 1 => {
            m.push("vlan_tci=0x0000/0x1000".to_string());
            p.vlan = Some(false);
        }
        2 => {
            m.push(format!("dl_vlan={}", rng.pick(&VLANS)));
            p.vlan = Some(true);
        }
        3 => {
            m.push(format!("dl_vlan_pcp={}", rng.below(8)));
            p.vlan = Some(true);
        }
        _ => {}
    }
    if rng.chance(10) {
        m.push(format!("dl_dst=02:00:00:00:00:1{}", rng.below(4)));
    } else if rng.chance(8) {
        m.push("dl_src=02:00:00:00:00:00/ff:ff:ff:ff:ff:fe".to_string());
    }
    let proto = rng.pick(&["", "ip", "tcp", "tcp", "udp", "udp", "icmp", "arp", "ipv6"]);
    if !proto.is_empty() {
        m.push(proto.to_string());
    }
    p.ip = ["ip", "tcp", "udp", "icmp"].contains(&proto);
    p.l4 = proto == "tcp" || proto == "udp";
    if p.ip {
        if rng.chance(35) {
            m.push(ip_match(rng, "nw_src"));
        }
        if rng.chance(45) {
            m.push(ip_match(rng, "nw_dst"));
        }
        if rng.chance(8) {
            m.push(format!("nw_ttl={}", rng.pick(&[1, 2, 64])));
        }
        if rng.chance(12) {
            let frag = rng.pick(&["no", "yes", "first", "later", "not_later"]);
            m.push(format!("ip_frag={frag}"));
            // Open vSwitch refuses transport fields where no fragment has them.
            p.l4 &= frag != "later";
        }
        if rng.chance(6) {
            m.push(format!("ip_dscp={}", rng.pick(&[0, 10, 46])));
        }
    }
    if p.l4 {
        if rng.chance(45) {
            m.push(tp_match(rng, "tp_dst"));
        }
        if rng.chance(20) {
            m.push(tp_match(rng, "tp_src"));
        }
    }
    (m.join(","), p)
}

fn output(rng: &mut Rng) -> String {
    match rng.below(14) {
        0 => "in_port".to_string(),
        1 => rng.pick(&["flood", "all"]).to_string(),
        _ => format!("output:{}", rng.pick(&PORTS)),
    }
}

/// A header rewrite valid after a match that proves `p` (VLAN changes apart).
fn rewrite(rng: &mut Rng, p: Proves) -> Option<String> {
    let a = pool_addr(rng);
    Some(match rng.below(10) {
        0 => format!("mod_dl_dst:02:00:00:00:00:1{}", rng.below(4)),
        1 => format!("mod_dl_src:02:00:00:00:00:2{}", rng.below(4)),
        2 if p.ip => format!("mod_nw_dst:{}", Ipv4Addr::from(a)),
        3 if p.ip => format!(
            "set_field:{}/255.255.255.0->nw_src",
            Ipv4Addr::from(a & 0xffff_ff00)
        ),
        4 if p.ip => "dec_ttl".to_string(),
        5 if p.ip => format!("mod_nw_tos:{}", 4 * rng.below(64)),
        6 | 7 if p.l4 => format!(
            "{}:{}",
            rng.pick(&["mod_tp_dst", "mod_tp_src"]),
            rng.pick(&PORT_POOL)
        ),
        8 if p.ip => format!("set_field:{}->ip_dscp", rng.pick(&[0, 10, 46])),
        _ => return None,
    })
}

/// A VLAN change that ends a rule's actions (only outputs may follow it).
fn vlan_change(rng: &mut Rng, p: Proves) -> Option<String> {
    let vid = rng.pick(&VLANS);
    Some(match rng.below(4) {
        0 => format!(
            "push_vlan:{},set_field:{}->vlan_vid",
            rng.pick(&["0x8100", "0x88a8"]),
            0x1000 | vid
        ),
        1 => format!(
            "push_vlan:{},mod_vlan_pcp:{}",
            rng.pick(&["0x8100", "0x88a8"]),
            rng.below(8)
        ),
        2 if p.vlan == Some(true) => "strip_vlan".to_string(),
        3 if p.vlan.is_some() => format!("mod_vlan_vid:{vid}"),
        _ => return None,
    })
}

/// Priorities in use by table.
#[derive(Default)]
struct Used([BTreeSet<u16>; TABLES as usize]);

impl Used {
    fn fresh(&mut self, rng: &mut Rng, table: u8) -> u16 {
        loop {
            let p = 1 + rng.below(999) as u16;
            if self.0[table as usize].insert(p) {
                return p;
            }
        }
    }
}

fn random_actions(rng: &mut Rng, table: u8, p: Proves, groups: u32) -> String {
    if rng.chance(6) {
        return "drop".to_string();
    }
    let mut acts = Vec::new();
    let most = if rng.chance(15) { 7 } else { 3 };
    let steps = 1 + rng.below(most);
    for _ in 0..steps {
        if rng.chance(40) {
            acts.extend(rewrite(rng, p));
        }
        if groups > 0 && rng.chance(12) {
            acts.push(format!("group:{}", 1 + rng.below(u64::from(groups))));
        } else {
            acts.push(output(rng));
        }
    }
    let forward = table + 1 < TABLES;
    if forward && rng.chance(35) {
        let to = table + 1 + rng.below(u64::from(TABLES - table - 1)) as u8;
        if rng.chance(50) {
            acts.push(format!("goto_table:{to}"));
        } else {
            let at = rng.below(acts.len() as u64 + 1) as usize;
            acts.insert(at, format!("resubmit(,{to})"));
        }
    } else if rng.chance(20) {
        if let Some(v) = vlan_change(rng, p) {
            acts.push(v);
            acts.push(output(rng));
        }
    }
    acts.join(",")
}

/// A rule set: `n` rules over tables 0-3 (ovs-ofctl add-flows text) and the groups they use
/// (add-groups text).
pub fn random_ruleset(rng: &mut Rng, n: usize) -> (String, String) {
    let n_groups = rng.below(4) as u32;
    let mut groups = String::new();
    for g in 1..=n_groups {
        groups.push_str(&random_group(rng, g));
        groups.push('\n');
    }
    let mut used = Used::default();
    let mut rules = String::new();
    for _ in 0..n {
        let table = if rng.chance(45) {
            0
        } else {
            rng.below(u64::from(TABLES)) as u8
        };
        let prio = used.fresh(rng, table);
        let (m, p) = random_match(rng);
        let actions = random_actions(rng, table, p, n_groups);
        let mut parts = vec![format!("table={table}"), format!("priority={prio}")];
        if !m.is_empty() {
            parts.push(m);
        }
        parts.push(format!("actions={actions}"));
        rules.push_str(&parts.join(","));
        rules.push('\n');
    }
    (rules, groups)
}

/// A group: `all` or `indirect`, or `select` with one bucket; bucket actions in any order
/// (OpenFlow makes a bucket an action set), rewrites of any packet's Ethernet and (harmless
/// elsewhere) IP fields, VLAN pushes, dec_ttl, one or two outputs.
fn random_group(rng: &mut Rng, id: u32) -> String {
    let kind = rng.pick(&["all", "all", "indirect", "select"]);
    let n = if kind == "all" { 1 + rng.below(3) } else { 1 };
    let mut text = format!("group_id={id},type={kind}");
    for _ in 0..n {
        let mut acts = Vec::new();
        for _ in 0..rng.below(3) {
            let a = pool_addr(rng);
            acts.push(match rng.below(6) {
                0 => format!("mod_dl_dst:02:00:00:00:00:3{}", rng.below(4)),
                // Not ip_dst: Open vSwitch ignores it on an ARP packet (IPv4 only), vecplane
                // writes the ARP target (its key has one field for both; see the report).
                1 => format!("set_field:{}->nw_ttl", 1 + a % 64),
                2 => "dec_ttl".to_string(),
                3 => format!(
                    "push_vlan:{},set_field:{}->vlan_vid",
                    rng.pick(&["0x8100", "0x88a8"]),
                    0x1000 | rng.pick(&VLANS)
                ),
                4 => format!("set_field:{}->ip_dscp", rng.pick(&[0, 10, 46])),
                _ => format!("mod_dl_src:02:00:00:00:00:4{}", rng.below(4)),
            });
        }
        let out = format!("output:{}", rng.pick(&PORTS));
        let at = rng.below(acts.len() as u64 + 1) as usize;
        acts.insert(at, out);
        if rng.chance(10) {
            acts.push(format!("output:{}", rng.pick(&PORTS)));
        }
        text.push_str(&format!(",bucket=actions={}", acts.join(",")));
    }
    text
}

/// One random frame (with its ingress port), tagged with `index` in its last four bytes.
pub fn random_frame(rng: &mut Rng, index: u16) -> (u16, Vec<u8>) {
    let in_port = rng.pick(&PORTS);
    let mut f = Vec::new();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x10 | rng.below(4) as u8]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, rng.below(4) as u8]);
    if rng.chance(25) {
        let tpid: u16 = if rng.chance(20) { 0x88a8 } else { 0x8100 };
        let tci = (rng.below(8) as u16) << 13 | rng.pick(&VLANS);
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    let tag = [TAG[0], TAG[1], (index >> 8) as u8, index as u8];
    match rng.below(10) {
        0 => arp(&mut f, rng),
        1 => ipv6_udp(&mut f, rng, &tag),
        _ => ipv4(&mut f, rng, &tag),
    }
    while f.len() < 56 {
        f.push(0);
    }
    f.extend_from_slice(&tag);
    (in_port, f)
}

fn arp(f: &mut Vec<u8>, rng: &mut Rng) {
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1 + rng.below(2) as u8]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, rng.below(4) as u8]);
    f.extend_from_slice(&pool_addr(rng).to_be_bytes());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&pool_addr(rng).to_be_bytes());
}

fn ipv6_udp(f: &mut Vec<u8>, rng: &mut Rng, tag: &[u8; 4]) {
    f.extend_from_slice(&0x86ddu16.to_be_bytes());
    let payload = 8 + 8 + 4;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload as u16).to_be_bytes());
    f.extend_from_slice(&[17, rng.pick(&[64u8, 1])]);
    let mut src = [0u8; 16];
    src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    let mut dst = src;
    src[15] = rng.below(4) as u8;
    dst[14] = 1;
    dst[15] = rng.below(4) as u8;
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let mut udp = Vec::new();
    udp.extend_from_slice(&rng.pick(&PORT_POOL).to_be_bytes());
    udp.extend_from_slice(&rng.pick(&PORT_POOL).to_be_bytes());
    udp.extend_from_slice(&(payload as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&[0xab; 8]);
    let mut sum = pseudo_sum(&src, &dst, 17, udp.len() + 4);
    sum += ones_sum(&udp);
    // The tag (added last, right after) is part of the payload.
    sum += ones_sum(tag);
    let c = match fold(sum) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&udp);
}

fn ipv4(f: &mut Vec<u8>, rng: &mut Rng, tag: &[u8; 4]) {
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let proto = rng.pick(&[6u8, 6, 17, 17, 1]);
    // Fragments: 0 none, 1 first (MF), 2 later (offset), 3 last (offset, no MF).
    let frag = if rng.chance(20) { 1 + rng.below(3) } else { 0 };
    let l4_len = match proto {
        6 => 20,
        17 => 8,
        _ => 8,
    };
    let body = if frag >= 2 { 24 } else { l4_len + 16 };
    let total = 20 + body + 4;
    let ttl = rng.pick(&[64u8, 64, 64, 2, 1]);
    let tos = rng.pick(&[0u8, 0, 0x28, 0xb8, 0x01]);
    let (flags, offset): (u16, u16) = match frag {
        0 => (0x4000, 0),
        1 => (0x2000, 0),
        2 => (0x2000, 185),
        _ => (0, 185),
    };
    let src = pool_addr(rng);
    let dst = pool_addr(rng);
    let mut ip = Vec::new();
    ip.extend_from_slice(&[0x45, tos]);
    ip.extend_from_slice(&(total as u16).to_be_bytes());
    ip.extend_from_slice(&(rng.next() as u16).to_be_bytes());
    ip.extend_from_slice(&(flags | offset).to_be_bytes());
    ip.extend_from_slice(&[ttl, proto, 0, 0]);
    ip.extend_from_slice(&src.to_be_bytes());
    ip.extend_from_slice(&dst.to_be_bytes());
    let c = fold(ones_sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut l4 = Vec::new();
    let port = |rng: &mut Rng| {
        if rng.chance(75) {
            rng.pick(&PORT_POOL) ^ (rng.below(2) as u16)
        } else {
            rng.next() as u16
        }
    };
    if frag >= 2 {
        l4.extend_from_slice(&[0x5a; 24]);
        f.extend_from_slice(&l4);
        return;
    }
    match proto {
        6 => {
            l4.extend_from_slice(&port(rng).to_be_bytes());
            l4.extend_from_slice(&port(rng).to_be_bytes());
            l4.extend_from_slice(&(rng.next() as u32).to_be_bytes());
            l4.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0]);
        }
        17 => {
            l4.extend_from_slice(&port(rng).to_be_bytes());
            l4.extend_from_slice(&port(rng).to_be_bytes());
            l4.extend_from_slice(&((8 + 16 + 4) as u16).to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
        }
        _ => {
            l4.extend_from_slice(&[rng.pick(&[0u8, 8, 3, 11]), rng.below(2) as u8, 0, 0]);
            l4.extend_from_slice(&(rng.next() as u32).to_be_bytes());
        }
    }
    l4.extend_from_slice(&[0x5a; 16]);
    let mut sum = ones_sum(&l4) + ones_sum(tag);
    if proto != 1 {
        sum += pseudo_sum4(src, dst, proto, l4.len() + 4);
    }
    let mut c = fold(sum);
    if proto == 17 && rng.chance(15) {
        c = 0; // no UDP checksum
    } else if proto == 17 && c == 0 {
        c = 0xffff;
    }
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => 2,
    };
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&l4);
}

fn ones_sum(b: &[u8]) -> u32 {
    b.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn pseudo_sum4(src: u32, dst: u32, proto: u8, len: usize) -> u32 {
    ones_sum(&src.to_be_bytes()) + ones_sum(&dst.to_be_bytes()) + u32::from(proto) + len as u32
}

fn pseudo_sum(src: &[u8; 16], dst: &[u8; 16], proto: u8, len: usize) -> u32 {
    ones_sum(src) + ones_sum(dst) + u32::from(proto) + len as u32
}

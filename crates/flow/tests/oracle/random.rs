//! Random rule sets (ovs-ofctl text, two tables) and random packets (vecplane keys) for the
//! randomized differential test, from a seeded generator so that a failure can be replayed
//! (the seed is printed). Matches use in_port, dl_type, IPv4 prefixes and arbitrary masks,
//! nw_proto and transport ports with masks; priorities are distinct within a table, since Open
//! vSwitch breaks ties between overlapping rules arbitrarily. Addresses stay in 198.18.0.0/15.

use flow::{Field, FlowKey};
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

fn random_output(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => "drop".to_string(),
        1 => format!("output:{},output:{}", rng.pick(&PORTS), rng.pick(&PORTS)),
        _ => format!("output:{}", rng.pick(&PORTS)),
    }
}

/// A rule set of `n` rules over tables 0 and 1, as ovs-ofctl add-flows text.
pub fn random_ruleset(rng: &mut Rng, n: usize) -> String {
    let mut used = [std::collections::BTreeSet::new(), Default::default()];
    let mut out = String::new();
    for _ in 0..n {
        let table = usize::from(rng.chance(35));
        let prio = loop {
            let p = 1 + rng.below(999) as u16;
            if used[table].insert(p) {
                break p;
            }
        };
        let m = random_match(rng);
        let actions = if table == 0 && rng.chance(30) {
            "goto_table:1".to_string()
        } else {
            random_output(rng)
        };
        let sep = if m.is_empty() { "" } else { "," };
        out.push_str(&format!(
            "table={table},priority={prio}{sep}{m},actions={actions}\n"
        ));
    }
    out
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
    if ty != 0x0806 {
        k.set(Field::NwTtl, 64);
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

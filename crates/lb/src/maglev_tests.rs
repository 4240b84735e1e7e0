//! Tests of the Maglev build: balance within 1% (equal and unequal weights), minimal disruption,
//! independence from insertion order, pinned construction, build time, and an even spread of the
//! flows a Linux client opens one after the other.

use super::*;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

fn servers(n: u32, weight: impl Fn(u32) -> u32) -> Vec<MaglevServer> {
    (0..n)
        .map(|i| MaglevServer {
            addr: IpAddr::V4(Ipv4Addr::from(0xc612_0200u32 + i)),
            weight: weight(i),
            slot: AsSlot(i),
        })
        .collect()
}

fn assert_balanced(t: &MaglevTable, srv: &[MaglevServer]) {
    let total: u64 = srv.iter().map(|s| s.weight as u64).sum();
    let counts = t.counts();
    assert_eq!(t.entries().len(), t.size() as usize);
    for s in srv.iter().filter(|s| s.weight > 0) {
        let want = t.size() as f64 * s.weight as f64 / total as f64;
        let got = *counts.get(&s.slot).unwrap_or(&0) as f64;
        assert!(
            (got - want).abs() <= want * 0.01 + 1.0,
            "server {} weight {}: {} entries, want {:.1}",
            s.addr,
            s.weight,
            got,
            want
        );
    }
}

#[test]
fn balanced_within_one_percent_equal_weights() {
    let srv = servers(100, |_| 1);
    let t = MaglevTable::build(65537, &srv);
    assert_eq!(t.size(), 65537);
    assert!(!t.too_small());
    assert_balanced(&t, &srv);
}

#[test]
fn balanced_within_one_percent_unequal_weights() {
    let srv = servers(50, |i| 1 + i % 7 * 10);
    let t = MaglevTable::build(65537, &srv);
    assert_balanced(&t, &srv);
    // Huge weights do not overflow; a weight 0 server is left out.
    let srv = servers(10, |i| if i == 3 { 0 } else { u32::MAX - i });
    let t = MaglevTable::build(65537, &srv);
    assert_balanced(&t, &srv);
    assert!(!t.counts().contains_key(&AsSlot(3)));
    assert_eq!(t.servers(), 9);
}

/// Entries whose server changed between `a` and `b`, ignoring those of `gone`.
fn moved(a: &MaglevTable, b: &MaglevTable, gone: Option<u32>) -> usize {
    a.entries()
        .iter()
        .zip(b.entries())
        .filter(|(x, y)| x != y && Some(**x) != gone)
        .count()
}

/// A Linux client's connections to one VIP take source ports a small even step apart (the
/// kernel's per-destination port offset), and the test suite's curl loops count which server
/// answered each: the stable hash and the table must spread such runs of ports like random
/// flows, not in stripes. Every window of 372 consecutive even ports, over two equal servers,
/// stays within 4.5 binomial standard deviations of half (a run-to-run check with 5).
#[test]
fn consecutive_source_ports_spread_like_random_flows() {
    let two = [
        MaglevServer {
            addr: IpAddr::V4(Ipv4Addr::new(198, 18, 12, 12)),
            weight: 2,
            slot: AsSlot(1),
        },
        MaglevServer {
            addr: IpAddr::V4(Ipv4Addr::new(198, 18, 12, 14)),
            weight: 2,
            slot: AsSlot(3),
        },
    ];
    let t = MaglevTable::build(65537, &two);
    let client = IpAddr::V4(Ipv4Addr::new(198, 18, 10, 2));
    let n = 372u32;
    let sd = (f64::from(n) * 0.25).sqrt();
    for vip in [[198, 18, 100, 1], [198, 18, 100, 4]] {
        let vip = IpAddr::V4(Ipv4Addr::from(vip));
        for window in 0..300u32 {
            let first = 32768 + 94 * window;
            let to_first = (0..n)
                .map(|k| (first + 2 * k) as u16)
                .filter(|&p| {
                    let flow = crate::tuple::FiveTuple::new(client, vip, 6, p, 80);
                    t.choose(crate::tuple::stable_hash(&flow, false)) == Some(AsSlot(1))
                })
                .count();
            let z = (to_first as f64 - f64::from(n) / 2.0).abs() / sd;
            assert!(
                z <= 4.5,
                "{vip}: ports {first}.. step 2: {to_first} of {n} to one server ({z:.1} sd)"
            );
        }
    }
}

#[test]
fn removing_one_of_n_moves_about_one_nth() {
    for n in [5u32, 10, 100] {
        let srv = servers(n, |_| 1);
        let a = MaglevTable::build(65537, &srv);
        let victim = n / 2;
        let rest: Vec<_> = srv.iter().copied().filter(|s| s.slot.0 != victim).collect();
        let b = MaglevTable::build(65537, &rest);
        let total = a
            .entries()
            .iter()
            .zip(b.entries())
            .filter(|(x, y)| x != y)
            .count();
        let ideal = 65537.0 / n as f64;
        // The removed server's entries must move; the others should mostly stay.
        let extra = moved(&a, &b, Some(victim));
        eprintln!(
            "n={n}: {total} entries changed ({:.2}% ; ideal {:.2}%), {extra} beyond the removed server's",
            total as f64 * 100.0 / 65537.0,
            100.0 / n as f64
        );
        assert!((total as f64) < ideal * 1.6, "n={n}: {total} changed");
    }
}

#[test]
fn changing_one_weight_moves_little() {
    let srv = servers(20, |_| 10);
    let a = MaglevTable::build(65537, &srv);
    let mut srv2 = srv.clone();
    srv2[7].weight = 5; // 5% of the table's share taken from server 7
    let b = MaglevTable::build(65537, &srv2);
    let changed = a
        .entries()
        .iter()
        .zip(b.entries())
        .filter(|(x, y)| x != y)
        .count();
    eprintln!("one weight halved (1/20 -> 1/39): {changed} entries changed");
    assert!((changed as f64) < 65537.0 * 0.05, "{changed}");
}

#[test]
fn insertion_order_does_not_matter() {
    let srv = servers(37, |i| 1 + i % 3);
    let a = MaglevTable::build(1021, &srv);
    let mut rev = srv.clone();
    rev.reverse();
    let mut rot = srv.clone();
    rot.rotate_left(11);
    assert_eq!(a, MaglevTable::build(1021, &rev));
    assert_eq!(a, MaglevTable::build(1021, &rot));
}

#[test]
fn empty_and_tiny_tables() {
    let t = MaglevTable::build(65537, &[]);
    assert_eq!(t.choose(12345), None);
    assert_eq!(t.size(), 65537);
    let t = MaglevTable::build(0, &servers(3, |_| 0));
    assert_eq!(t.choose(0), None);
    let t = MaglevTable::build(1, &servers(3, |_| 1));
    assert_eq!(t.size(), 2);
    assert!(t.too_small());
    assert!(t.choose(u32::MAX).is_some());
}

#[test]
fn primes() {
    assert_eq!(next_prime(1024), 1031);
    assert_eq!(next_prime(65536), 65537);
    assert_eq!(next_prime(65537), 65537);
    assert_eq!(next_prime(1 << 22), 4_194_319);
    assert_eq!(next_prime(0), 2);
}

#[test]
fn construction_is_pinned() {
    // Every node and every version must build exactly this table: a change here moves flows
    // between the nodes of a fleet that run different versions.
    let b = addr_bytes("198.18.2.1".parse().unwrap());
    assert_eq!(
        addr_hash(&b, 0),
        0x5bcd_0e06_277d_987a,
        "{:#x}",
        addr_hash(&b, 0)
    );
    let t = MaglevTable::build(13, &servers(3, |i| i + 1));
    assert_eq!(
        t.entries(),
        &[1, 1, 2, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1],
        "{:?}",
        t.entries()
    );
}

#[test]
fn builds_in_milliseconds() {
    let srv = servers(100, |i| 1 + i % 4);
    let start = Instant::now();
    let t = MaglevTable::build(65537, &srv);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    eprintln!("65537 entries, 100 servers: {ms:.1} ms (this build profile)");
    assert_eq!(t.servers(), 100);
    // Unoptimised test builds are ~10x slower than release; still well under a second.
    assert!(ms < 1000.0, "{ms} ms");
}

fn arb_servers() -> impl Strategy<Value = Vec<MaglevServer>> {
    proptest::collection::btree_map(any::<u128>(), 0u32..1000, 1..40).prop_map(|m| {
        m.into_iter()
            .enumerate()
            .map(|(i, (a, w))| MaglevServer {
                addr: if a & 1 == 0 {
                    IpAddr::V4(Ipv4Addr::from(a as u32))
                } else {
                    IpAddr::V6(Ipv6Addr::from(a))
                },
                weight: w,
                slot: AsSlot(i as u32),
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn any_server_set_fills_exact_quotas_in_any_order(
        srv in arb_servers(),
        new_len in 1u32..5000,
        rot in 0usize..40,
    ) {
        let t = MaglevTable::build(new_len, &srv);
        let live: Vec<_> = srv.iter().filter(|s| s.weight > 0).collect();
        if live.is_empty() {
            prop_assert!(t.entries().is_empty());
        } else {
            prop_assert_eq!(t.entries().len(), t.size() as usize);
            prop_assert!(t.size() >= new_len);
            let total: u64 = live.iter().map(|s| s.weight as u64).sum();
            let counts = t.counts();
            for s in &live {
                let want = t.size() as f64 * s.weight as f64 / total as f64;
                let got = *counts.get(&s.slot).unwrap_or(&0) as f64;
                prop_assert!((got - want).abs() < 1.0, "{} vs {}", got, want);
            }
            prop_assert!(counts.keys().all(|k| live.iter().any(|s| s.slot == *k)));
        }
        let mut r = srv.clone();
        let n = r.len();
        r.rotate_left(rot % n.max(1));
        prop_assert_eq!(&t, &MaglevTable::build(new_len, &r));
    }
}

//! Tests of `Ip6FibWriter`: random additions, changes and deletions (short routes painting many
//! regions, dense regions with stride tables and skip nodes) against a naive reference, block
//! reuse through the epochs, and lookups racing a writer on other threads.
//! Owns test-only code.

use crate::*;
use live::Domain;
use proptest::prelude::*;
use std::collections::HashMap;

/// Longest-prefix match over a route map (prefix already masked).
fn reference(routes: &HashMap<(u128, u8), NextHopId>, addr: u128) -> NextHopId {
    (0..=128u8)
        .rev()
        .find_map(|l| routes.get(&(addr & mask6(l), l)).copied())
        .unwrap_or(NO_ROUTE)
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u128, u8, NextHopId),
    Remove(u128, u8),
    Commit,
}

const TOP: u128 = 0x2001_0db8 << 96;

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    // Addresses in a few /20 regions around 2001:db8::/32, with lengths short enough to paint
    // many regions (0, 12..=20) and long ones that nest inside a region (up to host routes);
    // the low bits come in a few shapes so routes share prefixes and regions get dense.
    let prefix = (0u128..4, 0u128..3, any::<u16>(), any::<u8>()).prop_map(|(r, a, b, c)| {
        TOP | (r << 108) | (a << 96) | (u128::from(b) << 64) | u128::from(c)
    });
    let len = prop_oneof![Just(0u8), 12u8..=20, 21u8..=48, 56u8..=72, 120u8..=128];
    let op = prop_oneof![
        6 => (prefix.clone(), len.clone(), 1u32..=40).prop_map(|(p, l, n)| Op::Insert(p, l, n)),
        3 => (prefix, len).prop_map(|(p, l)| Op::Remove(p, l)),
        2 => Just(Op::Commit),
    ];
    prop::collection::vec(op, 1..150)
}

fn probes(routes: &HashMap<(u128, u8), NextHopId>) -> Vec<u128> {
    let mut v: Vec<u128> = Vec::new();
    for &(p, l) in routes.keys() {
        let last = p | !mask6(l);
        v.extend([
            p,
            last,
            p.wrapping_sub(1),
            last.wrapping_add(1),
            p | 0x81,
            p | (1 << 70),
        ]);
    }
    v.extend([0, u128::MAX, TOP, TOP | (3 << 108) | 0xffff]);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn prop_changes_match_reference(ops in arb_ops()) {
        let (domain, _) = Domain::new(0);
        let mut w = Ip6FibWriter::new(domain).unwrap();
        let fib = w.fib();
        let mut model: HashMap<(u128, u8), NextHopId> = HashMap::new();
        let mut every_probe = Vec::new();
        for op in ops.iter().chain(std::iter::once(&Op::Commit)) {
            match *op {
                Op::Insert(p, l, nh) => {
                    let before = model.insert((p & mask6(l), l), nh);
                    prop_assert_eq!(w.insert(p, l, nh).unwrap(), before);
                }
                Op::Remove(p, l) => {
                    let before = model.remove(&(p & mask6(l), l));
                    prop_assert_eq!(w.remove(p, l), before);
                }
                Op::Commit => {
                    w.commit().unwrap();
                    // This version's boundaries and the previous one's (where routes went).
                    let now = probes(&model);
                    every_probe.truncate(now.len().min(every_probe.len()));
                    every_probe.splice(0..0, now);
                    for &a in &every_probe {
                        prop_assert_eq!(fib.lookup(a), reference(&model, a), "addr {:#x}", a);
                    }
                    let mut out = vec![0; every_probe.len().min(256)];
                    fib.lookup_batch(&every_probe[..out.len()], &mut out);
                    for (&a, &nh) in every_probe.iter().zip(&out) {
                        prop_assert_eq!(nh, reference(&model, a));
                    }
                }
            }
        }
        prop_assert_eq!(fib.route_count(), model.len());
        // Deleting everything leaves an empty table: no block in use once reclaimed.
        for (p, l) in model.keys().copied().collect::<Vec<_>>() {
            w.remove(p, l);
        }
        w.commit().unwrap();
        w.reclaim();
        prop_assert_eq!(fib.stride_tables(), 0);
        prop_assert_eq!(fib.skip_nodes(), 0);
        prop_assert_eq!(fib.interval_count(), 0);
        for &a in &every_probe {
            prop_assert_eq!(fib.lookup(a), NO_ROUTE);
        }
    }
}

#[test]
fn a_change_touches_only_its_regions_and_blocks_wait_for_the_workers() {
    let (domain, mut epochs) = Domain::new(1);
    let mut w = Ip6FibWriter::new(domain).unwrap();
    let fib = w.fib();
    // 2,000 host routes in one /64: a dense region (stride tables or skip nodes).
    for i in 0..2000u128 {
        w.insert(TOP | (i * 7919), 128, 1 + (i % 50) as u32)
            .unwrap();
    }
    w.insert(TOP, 32, 99).unwrap();
    w.commit().unwrap();
    assert!(fib.stride_tables() + fib.skip_nodes() > 0);
    // Re-encoding the region replaces its blocks; the old ones wait for the worker.
    w.insert(TOP | 5, 128, 7).unwrap();
    w.commit().unwrap();
    assert!(w.retired_blocks() > 0);
    assert_eq!(w.reclaim(), w.retired_blocks());
    assert_eq!(fib.lookup(TOP | 5), 7);
    assert_eq!(fib.lookup(TOP | 6), 99);
    // SAFETY: this test holds no reference into the table's blocks.
    unsafe { epochs[0].quiescent() };
    assert_eq!(w.reclaim(), 0);
    // The freed blocks are reused: with two copies of the region's blocks (the one readers see
    // and the one replaced), flipping the route again does not grow the table.
    let before = fib.memory_bytes();
    for nh in 10..40 {
        w.insert(TOP | 5, 128, nh).unwrap();
        w.commit().unwrap();
        // SAFETY: as above.
        unsafe { epochs[0].quiescent() };
        w.reclaim();
    }
    assert!(
        fib.memory_bytes() <= before + (16 << 10),
        "{} -> {}",
        before,
        fib.memory_bytes()
    );
    // A default route paints every region that has no longer route at once, without commit.
    w.insert(0, 0, 3).unwrap();
    assert_eq!(fib.lookup(1 << 127), 3);
    assert_eq!(fib.lookup(TOP | 6), 99);
    assert!(w.remove(0, 0).is_some());
    assert_eq!(fib.lookup(1 << 127), NO_ROUTE);
}

#[test]
fn build_matches_the_writer_and_checks_routes() {
    let routes = random_ip6_routes(5_000, 11, 300);
    let built = Ip6Fib::build(&routes).unwrap();
    let (domain, _) = Domain::new(0);
    let mut w = Ip6FibWriter::new(domain).unwrap();
    for &(p, l, nh) in &routes {
        w.insert(p, l, nh).unwrap();
    }
    w.commit().unwrap();
    let fib = w.fib();
    let mut rng = SplitMix64::new(5);
    for r in routes.iter().take(2000) {
        let a = ip6_address_in(r.0, r.1, rng.next());
        assert_eq!(built.lookup(a), fib.lookup(a), "{a:#x}");
    }
    assert!(w.insert(0, 129, 1).is_err());
    assert!(w.insert(0, 0, 0).is_err());
    assert!(w.insert(0, 0, Ip6Fib::MAX_NEXT_HOP + 1).is_err());
    assert!(w.remove(0, 200).is_none());
}

/// Readers on other threads look up addresses while the writer flips routes in a dense region
/// and a short route above it: every answer is one some committed version gives.
#[test]
fn lookups_racing_the_writer_see_before_or_after() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (domain, epochs) = Domain::new(2);
    let mut w = Ip6FibWriter::new(domain).unwrap();
    // A /32 always there (nh 1); a /16 above it flipping (nh 2, 3); 40 host routes coming and
    // going in one /64 (nh 4..=43), so the region is re-encoded and blocks reused under readers.
    w.insert(TOP, 32, 1).unwrap();
    w.commit().unwrap();
    let fib = w.fib();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = epochs
        .into_iter()
        .map(|mut epoch| {
            let fib = fib.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut seen = 0u64;
                let addrs: Vec<u128> = (0..256u128)
                    .map(|i| {
                        if i < 200 {
                            TOP | (i * 3)
                        } else {
                            TOP ^ (1 << 100) | i
                        }
                    })
                    .collect();
                let mut out = vec![0; 256];
                let mut rounds = 0u32;
                while rounds < 2000 || !stop.load(Ordering::Relaxed) {
                    rounds += 1;
                    fib.lookup_batch(&addrs, &mut out);
                    for (i, (&a, &nh)) in addrs.iter().zip(&out).enumerate() {
                        let ok = if i < 200 {
                            // Inside the /32: the /32 or a host route of this very address.
                            nh == 1
                                || (nh >= 4 && u128::from(nh - 4) * 3 == a - TOP && a - TOP < 120)
                        } else {
                            // Outside the /32, inside the /16: 2 or 3 (or nothing while deleted).
                            matches!(nh, 0 | 2 | 3)
                        };
                        assert!(ok, "{a:#x} -> {nh}: no version of the table says so");
                        seen += 1;
                    }
                    // SAFETY: no reference into the table's blocks is held here.
                    unsafe { epoch.quiescent() };
                }
                // SAFETY: the thread reads nothing more.
                unsafe { epoch.offline() };
                seen
            })
        })
        .collect();
    for i in 0..3_000u32 {
        w.insert(TOP, 16, 2 + (i & 1)).unwrap();
        for k in 0..40u32 {
            let a = TOP | u128::from(k * 3);
            if (i + k) % 3 == 0 {
                w.insert(a, 128, 4 + k).unwrap();
            } else {
                w.remove(a, 128);
            }
        }
        w.commit().unwrap();
        if i % 500 == 0 {
            w.remove(TOP, 16);
            w.commit().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let seen = r
            .join()
            .expect("a reader found a lookup no version of the table gives");
        assert!(seen > 0);
    }
}

/// Measurement (ignored by default; `cargo test -p vecplane-fib --release -- --ignored
/// --nocapture ip6_writer_rates`): 1M BGP-like IPv6 routes added and committed in batches of
/// 10,000, then 10,000 single-route changes each committed alone, in a table of 1M.
#[test]
#[ignore]
fn ip6_writer_rates() {
    let routes = random_ip6_routes(1_000_000, 42, 1000);
    let (domain, _) = Domain::new(0);
    let mut w = Ip6FibWriter::new(domain).unwrap();
    let t = std::time::Instant::now();
    for chunk in routes.chunks(10_000) {
        for &(p, l, nh) in chunk {
            w.insert(p, l, nh).unwrap();
        }
        w.commit().unwrap();
    }
    let load = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    for (i, &(p, l, nh)) in routes.iter().step_by(100).take(10_000).enumerate() {
        w.insert(p, l, if i % 2 == 0 { nh % 999 + 1 } else { nh })
            .unwrap();
        w.commit().unwrap();
    }
    let one = t.elapsed().as_secs_f64() / 10_000.0;
    let fib = w.fib();
    let t = std::time::Instant::now();
    let built = Ip6Fib::build(&routes).unwrap();
    println!(
        "ip6 build in one commit: {:.2} s, table {:.1} MiB",
        t.elapsed().as_secs_f64(),
        built.memory_bytes() as f64 / 1048576.0
    );
    println!(
        "ip6 writer: {} routes loaded in {load:.2} s ({:.0} routes/s); one change committed \
         alone: {:.1} us; table {:.1} MiB, writer {:.1} MiB",
        w.len(),
        w.len() as f64 / load,
        one * 1e6,
        fib.memory_bytes() as f64 / 1048576.0,
        w.memory_bytes() as f64 / 1048576.0
    );
}

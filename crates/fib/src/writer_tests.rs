//! Tests of `Ip4FibWriter`: random additions, changes and deletions against a naive reference,
//! tbl8 group reuse through the epochs, and lookups racing a writer on other threads.
//! Owns test-only code.

use crate::*;
use live::Domain;
use proptest::prelude::*;
use std::collections::HashMap;

/// Longest-prefix match over a route map (prefix already masked).
fn reference(routes: &HashMap<(u32, u8), NextHopId>, addr: u32) -> NextHopId {
    (0..=32u8)
        .rev()
        .find_map(|l| routes.get(&(addr & mask4(l), l)).copied())
        .unwrap_or(NO_ROUTE)
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, u8, NextHopId),
    Remove(u32, u8),
}

fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    // Few distinct /24 blocks and lengths around 24 so routes nest and groups come and go. The
    // default route (which repaints all 2^24 tbl24 slots, most of this test's time) comes in
    // about one op in twelve: still several times in a typical case.
    let prefix = (0u32..3, 0u32..4, any::<u8>())
        .prop_map(|(a, b, c)| (10 << 24) | (a << 16) | (b << 8) | u32::from(c));
    let len = prop_oneof![1 => Just(0u8), 4 => 8u8..=16, 7 => 20u8..=32];
    let op = prop_oneof![
        3 => (prefix.clone(), len.clone(), 1u32..=40).prop_map(|(p, l, n)| Op::Insert(p, l, n)),
        2 => (prefix, len).prop_map(|(p, l)| Op::Remove(p, l)),
    ];
    prop::collection::vec(op, 1..120)
}

fn probes(routes: &HashMap<(u32, u8), NextHopId>) -> Vec<u32> {
    let mut v: Vec<u32> = Vec::new();
    for &(p, l) in routes.keys() {
        let last = p | !mask4(l);
        v.extend([p, last, p.wrapping_sub(1), last.wrapping_add(1), p | 0x81]);
    }
    v.extend([0, u32::MAX, 10 << 24, (10 << 24) | 0x0001_02ff]);
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn prop_changes_match_reference(ops in arb_ops()) {
        let (domain, _) = Domain::new(0);
        let mut w = Ip4FibWriter::new(domain).unwrap();
        let fib = w.fib();
        let mut model: HashMap<(u32, u8), NextHopId> = HashMap::new();
        let mut every_probe = Vec::new();
        for op in &ops {
            match *op {
                Op::Insert(p, l, nh) => {
                    let before = model.insert((p & mask4(l), l), nh);
                    prop_assert_eq!(w.insert(p, l, nh).unwrap(), before);
                }
                Op::Remove(p, l) => {
                    let before = model.remove(&(p & mask4(l), l));
                    prop_assert_eq!(w.remove(p, l), before);
                }
            }
            every_probe.extend(probes(&model));
            for &a in &every_probe {
                prop_assert_eq!(fib.lookup(a), reference(&model, a), "addr {:#x} after {:?}", a, op);
            }
        }
        prop_assert_eq!(fib.route_count(), model.len());
        // Deleting everything leaves an empty table with no group linked.
        for (p, l) in model.keys().copied().collect::<Vec<_>>() {
            w.remove(p, l);
        }
        prop_assert_eq!(fib.tbl8_groups(), 0);
        for &a in &every_probe {
            prop_assert_eq!(fib.lookup(a), NO_ROUTE);
        }
    }
}

#[test]
fn groups_are_reused_only_after_every_worker_moved_on() {
    let (domain, mut epochs) = Domain::new(1);
    let mut w = Ip4FibWriter::new(domain).unwrap();
    let a = u32::from_be_bytes([198, 18, 1, 0]);
    w.insert(a, 25, 1).unwrap();
    assert_eq!(w.tbl8_groups(), 1);
    w.remove(a, 25);
    assert_eq!(w.tbl8_groups(), 0);
    // The worker has not passed a quiescent point: the group waits.
    assert_eq!(w.reclaim(), 1);
    w.insert(a + 256, 25, 2).unwrap();
    assert_eq!(w.fib().lookup(a + 256), 2);
    // SAFETY: this test holds no reference into a published table.
    unsafe { epochs[0].quiescent() };
    assert_eq!(w.reclaim(), 0);
}

#[test]
fn load_is_all_or_nothing_and_last_duplicate_wins() {
    let (domain, _) = Domain::new(0);
    let mut w = Ip4FibWriter::new(domain).unwrap();
    let p = u32::from_be_bytes([198, 18, 0, 0]);
    assert!(w.load(&[(p, 16, 1), (p, 40, 1)]).is_err());
    assert!(w.is_empty());
    w.load(&[(p, 16, 1), (p | 5, 16, 2)]).unwrap();
    assert_eq!(w.fib().lookup(p + 7), 2);
    assert_eq!(w.get(p, 16), Some(2));
    assert_eq!(w.routes().count(), 1);
}

/// Readers on other threads look up addresses while the writer flips routes: every answer is
/// one the table had before or after a change (never a mix, never a torn entry).
#[test]
fn lookups_racing_the_writer_see_before_or_after() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (domain, epochs) = Domain::new(2);
    let mut w = Ip4FibWriter::new(domain).unwrap();
    let base = u32::from_be_bytes([198, 18, 0, 0]);
    // A /16 always there (nh 1); a /24 flipping between nh 2 and 3; /25 and /32 that come and
    // go inside it (nh 4, 5), so groups are linked and unlinked under the readers.
    w.insert(base, 16, 1).unwrap();
    let fib = w.fib();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = epochs
        .into_iter()
        .map(|mut epoch| {
            let fib = fib.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut seen = [0u64; 6];
                let addrs: Vec<u32> = (0..256).map(|i| base + 0x0100 + i).collect();
                let mut out = vec![0; 256];
                let mut rounds = 0u32;
                while rounds < 2000 || !stop.load(Ordering::Relaxed) {
                    rounds += 1;
                    fib.lookup_batch(&addrs, &mut out);
                    for (&a, &nh) in addrs.iter().zip(&out) {
                        let host = a & 0xff;
                        let ok = match nh {
                            1..=3 => true,
                            4 => host < 128,
                            5 => host == 7,
                            _ => false,
                        };
                        assert!(ok, "{a:#x} -> {nh}: no version of the table says so");
                        seen[nh as usize] += 1;
                    }
                    // SAFETY: no reference into a published snapshot is held here.
                    unsafe { epoch.quiescent() };
                }
                // SAFETY: the thread reads nothing more.
                unsafe { epoch.offline() };
                seen
            })
        })
        .collect();
    let block = base + 0x0100;
    for i in 0..20_000u32 {
        w.insert(block, 24, 2 + (i & 1)).unwrap();
        if i % 3 == 0 {
            w.insert(block, 25, 4).unwrap();
            w.insert(block + 7, 32, 5).unwrap();
        } else {
            w.remove(block + 7, 32);
            w.remove(block, 25);
        }
        if i % 500 == 0 {
            w.remove(block, 24);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let seen = r
            .join()
            .expect("a reader found a lookup no version of the table gives");
        assert!(seen.iter().sum::<u64>() > 0);
    }
}

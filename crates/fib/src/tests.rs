//! Unit and property tests of both FIBs against a naive linear-scan reference.
//! Owns test-only code; it must never be compiled into the library proper.

use crate::*;
use proptest::prelude::*;

/// Naive LPM: the longest matching prefix, last duplicate winning.
fn ref4(routes: &[(u32, u8, NextHopId)], addr: u32) -> NextHopId {
    let mut best: Option<(u8, NextHopId)> = None;
    for &(p, l, nh) in routes {
        if addr & mask4(l) == p & mask4(l) && best.is_none_or(|b| l >= b.0) {
            best = Some((l, nh));
        }
    }
    best.map_or(NO_ROUTE, |b| b.1)
}

fn ref6(routes: &[(u128, u8, NextHopId)], addr: u128) -> NextHopId {
    let mut best: Option<(u8, NextHopId)> = None;
    for &(p, l, nh) in routes {
        if addr & mask6(l) == p & mask6(l) && best.is_none_or(|b| l >= b.0) {
            best = Some((l, nh));
        }
    }
    best.map_or(NO_ROUTE, |b| b.1)
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

fn v6(s: &str) -> u128 {
    match s.parse::<std::net::Ipv6Addr>() {
        Ok(a) => u128::from(a),
        Err(e) => panic!("bad test address {s}: {e}"),
    }
}

#[test]
fn send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Ip4Fib>();
    check::<Ip6Fib>();
}

#[test]
fn ip4_empty_and_default() {
    let fib = Ip4Fib::build(&[]).unwrap();
    assert_eq!(fib.lookup(v4(1, 2, 3, 4)), NO_ROUTE);
    assert_eq!(fib.route_count(), 0);
    let fib = Ip4Fib::build(&[(0, 0, 7)]).unwrap();
    for a in [0, u32::MAX, v4(10, 0, 0, 1), v4(192, 168, 1, 1)] {
        assert_eq!(fib.lookup(a), 7);
    }
}

#[test]
fn ip4_host_route_and_edges() {
    let fib = Ip4Fib::build(&[(v4(10, 1, 2, 3), 32, 5), (u32::MAX, 32, 6), (0, 32, 8)]).unwrap();
    assert_eq!(fib.lookup(v4(10, 1, 2, 3)), 5);
    assert_eq!(fib.lookup(v4(10, 1, 2, 4)), NO_ROUTE);
    assert_eq!(fib.lookup(v4(10, 1, 2, 2)), NO_ROUTE);
    assert_eq!(fib.lookup(u32::MAX), 6);
    assert_eq!(fib.lookup(0), 8);
    assert_eq!(fib.lookup(1), NO_ROUTE);
    assert_eq!(fib.tbl8_groups(), 3);
}

#[test]
fn ip4_nested_any_order() {
    let routes = [
        (v4(10, 0, 0, 0), 8, 1),
        (v4(10, 1, 0, 0), 16, 2),
        (v4(10, 1, 2, 0), 24, 3),
        (v4(10, 1, 2, 16), 28, 4),
        (v4(10, 1, 2, 20), 32, 5),
    ];
    let expect = [
        (v4(10, 9, 9, 9), 1),
        (v4(10, 1, 9, 9), 2),
        (v4(10, 1, 2, 1), 3),
        (v4(10, 1, 2, 17), 4),
        (v4(10, 1, 2, 31), 4),
        (v4(10, 1, 2, 32), 3),
        (v4(10, 1, 2, 20), 5),
        (v4(11, 0, 0, 0), NO_ROUTE),
    ];
    // All 120 permutations.
    let mut idx = [0usize, 1, 2, 3, 4];
    let mut perms = Vec::new();
    permute(&mut idx, 0, &mut perms);
    assert_eq!(perms.len(), 120);
    for p in perms {
        let rs: Vec<_> = p.iter().map(|&i| routes[i]).collect();
        let fib = Ip4Fib::build(&rs).unwrap();
        for &(a, nh) in &expect {
            assert_eq!(fib.lookup(a), nh, "order {p:?} addr {a:#x}");
        }
        // The same routes as the top 32 bits of IPv6 prefixes.
        let rs6: Vec<_> = rs
            .iter()
            .map(|&(p, l, nh)| (u128::from(p) << 96, l, nh))
            .collect();
        let fib6 = Ip6Fib::build(&rs6).unwrap();
        for &(a, nh) in &expect {
            let a6 = (u128::from(a) << 96) | 0x5555;
            assert_eq!(fib6.lookup(a6), nh, "v6 order {p:?} addr {a6:#x}");
        }
    }
}

fn permute(v: &mut [usize; 5], k: usize, out: &mut Vec<[usize; 5]>) {
    if k == v.len() {
        out.push(*v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, out);
        v.swap(k, i);
    }
}

#[test]
fn ip4_host_bits_ignored_and_duplicates_last_wins() {
    let fib = Ip4Fib::build(&[
        (v4(10, 1, 2, 3), 16, 1),
        (v4(10, 1, 0, 0), 16, 2),
        (v4(10, 1, 255, 255), 16, 3),
        (v4(10, 2, 3, 77), 30, 4),
        (v4(10, 2, 3, 76), 30, 5),
    ])
    .unwrap();
    assert_eq!(fib.lookup(v4(10, 1, 7, 7)), 3);
    assert_eq!(fib.lookup(v4(10, 2, 3, 79)), 5);
    assert_eq!(fib.lookup(v4(10, 2, 3, 80)), NO_ROUTE);
    assert_eq!(fib.route_count(), 2);
}

#[test]
fn ip4_errors() {
    let e = Ip4Fib::build(&[(0, 0, 1), (0, 33, 1)]).unwrap_err();
    assert!(matches!(
        e,
        FibError::PrefixLength {
            index: 1,
            len: 33,
            ..
        }
    ));
    assert!(e.to_string().contains("0..=32"), "{e}");
    let e = Ip4Fib::build(&[(0, 8, 0)]).unwrap_err();
    assert!(matches!(e, FibError::NextHop { next_hop: 0, .. }));
    assert!(e.to_string().contains("1..=32767"), "{e}");
    let e = Ip4Fib::build(&[(0, 8, Ip4Fib::MAX_NEXT_HOP + 1)]).unwrap_err();
    assert!(matches!(
        e,
        FibError::NextHop {
            next_hop: 32768,
            ..
        }
    ));
    assert!(Ip4Fib::build(&[(0, 8, Ip4Fib::MAX_NEXT_HOP)]).is_ok());
}

#[test]
fn ip4_too_many_groups() {
    let routes: Vec<_> = (0..=Ip4Fib::MAX_TBL8_GROUPS as u32)
        .map(|i| (i << 8, 25, 1))
        .collect();
    let e = Ip4Fib::build(&routes).unwrap_err();
    assert!(matches!(
        e,
        FibError::TooManyTbl8Groups {
            needed: 32768,
            max: 32767
        }
    ));
    assert!(Ip4Fib::build(&routes[1..]).is_ok());
}

#[test]
fn ip4_memory() {
    let fib = Ip4Fib::build(&[(v4(1, 2, 3, 4), 32, 1)]).unwrap();
    assert_eq!(fib.memory_bytes(), (1 << 25) + 512);
}

#[test]
fn ip6_empty_default_and_host_routes() {
    let fib = Ip6Fib::build(&[]).unwrap();
    assert_eq!(fib.lookup(v6("2001:db8::1")), NO_ROUTE);
    let fib = Ip6Fib::build(&[(0, 0, 9)]).unwrap();
    assert_eq!(fib.lookup(0), 9);
    assert_eq!(fib.lookup(u128::MAX), 9);
    let fib = Ip6Fib::build(&[
        (v6("2001:db8::1"), 128, 1),
        (u128::MAX, 128, 2),
        (0, 128, 3),
        (v6("2001:db8::"), 32, 4),
    ])
    .unwrap();
    assert_eq!(fib.lookup(v6("2001:db8::1")), 1);
    assert_eq!(fib.lookup(v6("2001:db8::2")), 4);
    assert_eq!(fib.lookup(v6("2001:db8::")), 4);
    assert_eq!(fib.lookup(u128::MAX), 2);
    assert_eq!(fib.lookup(u128::MAX - 1), NO_ROUTE);
    assert_eq!(fib.lookup(0), 3);
    assert_eq!(fib.lookup(1), NO_ROUTE);
}

#[test]
fn ip6_nested() {
    let fib = Ip6Fib::build(&[
        (v6("2001:db8:1:2:3::1"), 128, 6),
        (v6("2001:db8:1:2::"), 64, 5),
        (v6("2001:db8:1::"), 48, 4),
        (v6("2001:db8::"), 32, 3),
        (v6("2000::"), 3, 2),
        (0, 0, 1),
    ])
    .unwrap();
    assert_eq!(fib.lookup(v6("2001:db8:1:2:3::1")), 6);
    assert_eq!(fib.lookup(v6("2001:db8:1:2:3::2")), 5);
    assert_eq!(fib.lookup(v6("2001:db8:1:3::")), 4);
    assert_eq!(fib.lookup(v6("2001:db8:2::")), 3);
    assert_eq!(fib.lookup(v6("2001:db9::")), 2);
    assert_eq!(fib.lookup(v6("fe80::1")), 1);
}

#[test]
fn ip6_dense_region_uses_stride_tables() {
    // 300 /64s and /128s packed into one /48: forces stride tables below the first level.
    let base = v6("2001:db8:7::");
    let mut routes = vec![(base, 48, 1)];
    for i in 0..300u128 {
        routes.push((base | (i << 64), 64, (i as u32 % 50) + 2));
        routes.push((base | (i << 64) | i, 128, 100));
    }
    let fib = Ip6Fib::build(&routes).unwrap();
    assert!(fib.stride_tables() > 0);
    let mut rng = SplitMix64::new(1);
    for i in 0..5000u64 {
        let r = routes[(i as usize) % routes.len()];
        let a = ip6_address_in(r.0, r.1, rng.next());
        assert_eq!(fib.lookup(a), ref6(&routes, a));
        let a = base | u128::from(rng.next() as u16) << 64 | u128::from(rng.next() & 0x1ff);
        assert_eq!(fib.lookup(a), ref6(&routes, a));
    }
}

#[test]
fn ip6_host_routes_in_one_prefix_use_skip_nodes() {
    // 2,000 random /128s inside one /64 under a covering /32: with the /64 itself as a route,
    // without it (the first boundary is then not aligned to the skipped-to prefix), and with a
    // /37 that starts at the /64 and covers the rest of its /36 (so that the addresses before
    // and after the skipped-to prefix resolve differently).
    let scenarios = [
        (v6("2001:db8:1:2::"), Some((v6("2001:db8:1:2::"), 64, 1))),
        (v6("2001:db8:1:2::"), None),
        (v6("2001:db8:800::"), Some((v6("2001:db8:800::"), 37, 9))),
    ];
    for (base, extra) in scenarios {
        let mut rng = SplitMix64::new(4);
        let mut routes = vec![(v6("2001:db8::"), 32, 2)];
        routes.extend(extra);
        for i in 0..2000u32 {
            routes.push((base | u128::from(rng.next() >> 1), 128, 3 + i % 7));
        }
        let fib = Ip6Fib::build(&routes).unwrap();
        assert!(fib.skip_nodes() > 0);
        let mut addrs = vec![
            base,
            base - 1,
            base + (1 << 64),
            base + (1 << 63),
            base + (1 << 63) - 1,
        ];
        for i in 0..4000usize {
            let r = routes[i % routes.len()];
            addrs.push(r.0);
            addrs.push(r.0.wrapping_add(1));
            addrs.push(r.0.wrapping_sub(1));
            addrs.push(ip6_address_in(r.0, r.1.min(64), rng.next()));
            // Inside the /32 but mostly outside the /64.
            addrs.push(ip6_address_in(base, 32 + (i % 33) as u8, rng.next()));
            addrs.push(ip6_address_in(
                base - (1 << 64),
                32 + (i % 33) as u8,
                rng.next(),
            ));
        }
        let mut out = vec![0; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = ref6(&routes, a);
            assert_eq!(fib.lookup(a), want, "{a:#x} extra {extra:?}");
            assert_eq!(o, want, "{a:#x}");
        }
    }
}

#[test]
fn ip6_errors() {
    let e = Ip6Fib::build(&[(0, 129, 1)]).unwrap_err();
    assert!(matches!(
        e,
        FibError::PrefixLength {
            len: 129,
            max: 128,
            ..
        }
    ));
    assert!(e.to_string().contains("0..=128"), "{e}");
    let e = Ip6Fib::build(&[(0, 0, 0)]).unwrap_err();
    assert!(matches!(e, FibError::NextHop { next_hop: 0, .. }));
    let e = Ip6Fib::build(&[(0, 0, Ip6Fib::MAX_NEXT_HOP + 1)]).unwrap_err();
    assert!(matches!(e, FibError::NextHop { .. }));
    assert!(e.to_string().contains("1..=1048575"), "{e}");
    let fib = Ip6Fib::build(&[(0, 0, Ip6Fib::MAX_NEXT_HOP)]).unwrap();
    assert_eq!(fib.lookup(12345), Ip6Fib::MAX_NEXT_HOP);
}

#[test]
fn ip6_host_bits_ignored_and_duplicates_last_wins() {
    let fib = Ip6Fib::build(&[
        (v6("2001:db8::ffff"), 32, 1),
        (v6("2001:db8:1::"), 32, 2),
        (v6("2001:db8::1"), 127, 3),
        (v6("2001:db8::"), 127, 4),
    ])
    .unwrap();
    assert_eq!(fib.lookup(v6("2001:db8:5::")), 2);
    assert_eq!(fib.lookup(v6("2001:db8::1")), 4);
    assert_eq!(fib.lookup(v6("2001:db8::2")), 2);
    assert_eq!(fib.route_count(), 2);
}

#[test]
fn generators_are_deterministic_and_distinct() {
    let a = random_ip4_routes(20_000, 7, 100);
    assert_eq!(a, random_ip4_routes(20_000, 7, 100));
    assert_eq!(a.len(), 20_000);
    let mut keys: Vec<_> = a.iter().map(|r| (r.0, r.1)).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), a.len());
    let slash24 = a.iter().filter(|r| r.1 == 24).count() as f64 / a.len() as f64;
    assert!((0.55..0.67).contains(&slash24), "{slash24}");
    assert!(a
        .iter()
        .all(|r| (1..=100).contains(&r.2) && r.0 & !mask4(r.1) == 0));

    let b = random_ip6_routes(20_000, 7, 100);
    assert_eq!(b, random_ip6_routes(20_000, 7, 100));
    let mut keys: Vec<_> = b.iter().map(|r| (r.0, r.1)).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), b.len());
    assert!(b.iter().all(|r| r.0 >> 125 == 1 && r.0 & !mask6(r.1) == 0));
}

#[test]
fn generated_tables_match_reference() {
    let r4 = random_ip4_routes(3_000, 3, 500);
    let f4 = Ip4Fib::build(&r4).unwrap();
    let r6 = random_ip6_routes(3_000, 3, 500);
    let f6 = Ip6Fib::build(&r6).unwrap();
    let mut rng = SplitMix64::new(9);
    let addrs4: Vec<u32> = (0..BATCH)
        .map(|i| {
            let r = r4[rng.below(r4.len() as u64) as usize];
            if i % 4 == 0 {
                rng.next() as u32
            } else {
                ip4_address_in(r.0, r.1, rng.next())
            }
        })
        .collect();
    let addrs6: Vec<u128> = (0..BATCH)
        .map(|i| {
            let r = r6[rng.below(r6.len() as u64) as usize];
            if i % 4 == 0 {
                (1u128 << 125) | (rng.next_u128() >> 3)
            } else {
                ip6_address_in(r.0, r.1, rng.next())
            }
        })
        .collect();
    let mut out4 = vec![0; BATCH];
    f4.lookup_batch(&addrs4, &mut out4);
    let mut out6 = vec![0; BATCH];
    f6.lookup_batch(&addrs6, &mut out6);
    for i in 0..BATCH {
        assert_eq!(out4[i], ref4(&r4, addrs4[i]));
        assert_eq!(out6[i], ref6(&r6, addrs6[i]));
    }
}

fn arb_routes4() -> impl Strategy<Value = Vec<(u32, u8, NextHopId)>> {
    // Cluster prefixes in a few /16s so that routes overlap and nest.
    let route = (0u32..4, any::<u16>(), 0u8..=32, 1..=Ip4Fib::MAX_NEXT_HOP).prop_map(
        |(hi, lo, len, nh)| {
            (
                (10 + hi) << 24 | u32::from(lo) << 8 | u32::from(lo >> 8),
                len,
                nh,
            )
        },
    );
    prop::collection::vec(route, 0..40)
}

fn arb_routes6() -> impl Strategy<Value = Vec<(u128, u8, NextHopId)>> {
    let route = (
        0u128..4,
        any::<u64>(),
        any::<u64>(),
        0u8..=128,
        1..=Ip6Fib::MAX_NEXT_HOP,
    )
        .prop_map(|(hi, mid, lo, len, nh)| {
            // Share the top 24 bits often, and sometimes the top 64 too, so that routes nest.
            let mid = if mid % 3 == 0 { mid & 0xff } else { mid };
            (
                (0x2001u128 << 112) | (hi << 104) | (u128::from(mid) << 40) | u128::from(lo),
                len,
                nh,
            )
        });
    prop::collection::vec(route, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn prop_ip4_matches_reference(routes in arb_routes4(), seeds in prop::collection::vec(any::<u64>(), 64)) {
        let fib = Ip4Fib::build(&routes).unwrap();
        let mut addrs = Vec::new();
        for (i, &s) in seeds.iter().enumerate() {
            let a = match routes.get(i % routes.len().max(1)) {
                Some(r) if i % 3 != 0 => {
                    let a = ip4_address_in(r.0, r.1, s);
                    // Also the first and last addresses of the route and their neighbours.
                    let m = mask4(r.1);
                    addrs.push((r.0 & m).wrapping_sub(1));
                    addrs.push(r.0 | !m);
                    addrs.push((r.0 | !m).wrapping_add(1));
                    a
                }
                _ => ((10 + (s >> 62) as u32) << 24) | (s as u32 & 0xff_ffff),
            };
            addrs.push(a);
        }
        addrs.push(0);
        addrs.push(u32::MAX);
        let mut out = vec![0; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = ref4(&routes, a);
            prop_assert_eq!(fib.lookup(a), want, "addr {:#010x}", a);
            prop_assert_eq!(o, want);
        }
    }

    #[test]
    fn prop_ip6_matches_reference(routes in arb_routes6(), seeds in prop::collection::vec(any::<u64>(), 64)) {
        let fib = Ip6Fib::build(&routes).unwrap();
        let mut addrs = Vec::new();
        for (i, &s) in seeds.iter().enumerate() {
            let a = match routes.get(i % routes.len().max(1)) {
                Some(r) if i % 3 != 0 => {
                    let m = mask6(r.1);
                    addrs.push((r.0 & m).wrapping_sub(1));
                    addrs.push(r.0 | !m);
                    addrs.push((r.0 | !m).wrapping_add(1));
                    ip6_address_in(r.0, r.1, s)
                }
                _ => (0x2001u128 << 112) | (u128::from(s >> 62) << 104) | u128::from(s),
            };
            addrs.push(a);
        }
        addrs.push(0);
        addrs.push(u128::MAX);
        let mut out = vec![0; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = ref6(&routes, a);
            prop_assert_eq!(fib.lookup(a), want, "addr {:#034x}", a);
            prop_assert_eq!(o, want);
        }
    }

    #[test]
    fn prop_ip6_clusters(
        routes in prop::collection::vec((0usize..3, 0usize..5, any::<u128>(), 0u8..=128, 1u32..6), 0..200),
        seeds in prop::collection::vec(any::<u64>(), 128),
    ) {
        // Routes packed into three clusters with spreads of 8..100 low bits: exercises skip
        // nodes, chains of stride tables, range lists and the boundaries between them.
        const BASES: [u128; 3] = [
            0x2001_0db8_0001_0002_0000_0000_0000_0000,
            0x2a00_1450_4000_0000_0000_0000_0000_0000,
            0x2001_0db8_0800_0000_0000_0000_0000_0000,
        ];
        const SPREAD: [u32; 5] = [8, 16, 40, 64, 100];
        let routes: Vec<_> = routes
            .into_iter()
            .map(|(b, w, x, l, nh)| (BASES[b] ^ (x & ((1u128 << SPREAD[w]) - 1)), l, nh))
            .collect();
        let fib = Ip6Fib::build(&routes).unwrap();
        let mut addrs = Vec::new();
        for (i, &s) in seeds.iter().enumerate() {
            match routes.get(i % routes.len().max(1)) {
                Some(r) => {
                    let m = mask6(r.1);
                    addrs.push(ip6_address_in(r.0, r.1, s));
                    addrs.push((r.0 & m).wrapping_sub(1));
                    addrs.push((r.0 | !m).wrapping_add(1));
                }
                None => addrs.push(BASES[i % 3] ^ u128::from(s)),
            }
        }
        let mut out = vec![0; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = ref6(&routes, a);
            prop_assert_eq!(fib.lookup(a), want, "addr {:#034x}", a);
            prop_assert_eq!(o, want);
        }
    }

    #[test]
    fn prop_ip6_dense(routes in prop::collection::vec((any::<u16>(), 100u8..=128, 1u32..20), 0..300), seeds in prop::collection::vec(any::<u64>(), 64)) {
        // Many routes inside one /96: exercises stride tables and long range lists.
        let base = 0x2001_0db8_0000_0000_0000_0000_0000_0000u128;
        let routes: Vec<_> = routes.into_iter().map(|(x, l, nh)| (base | u128::from(x) << 12, l, nh)).collect();
        let fib = Ip6Fib::build(&routes).unwrap();
        for (i, &s) in seeds.iter().enumerate() {
            let a = match routes.get(i % routes.len().max(1)) {
                Some(r) => ip6_address_in(r.0, r.1, s),
                None => base | u128::from(s as u32),
            };
            prop_assert_eq!(fib.lookup(a), ref6(&routes, a));
        }
    }
}

#[test]
fn lookup_batch_uneven_lengths_and_long_slices() {
    let f4 = Ip4Fib::build(&[(v4(10, 0, 0, 0), 8, 1), (v4(10, 1, 1, 1), 32, 2)]).unwrap();
    let f6 = Ip6Fib::build(&[(v6("2001:db8::"), 32, 1), (v6("2001:db8::1"), 128, 2)]).unwrap();
    // 600 addresses (three chunks), output one longer: the extra slot is left untouched.
    let a4: Vec<u32> = (0..600).map(|i| v4(10, 1, 1, 0) + i).collect();
    let a6: Vec<u128> = (0..600).map(|i| v6("2001:db8::") + i).collect();
    let mut o4 = vec![99; 601];
    let mut o6 = vec![99; 601];
    f4.lookup_batch(&a4, &mut o4);
    f6.lookup_batch(&a6, &mut o6);
    for i in 0..600 {
        assert_eq!(o4[i], f4.lookup(a4[i]));
        assert_eq!(o6[i], f6.lookup(a6[i]));
    }
    assert_eq!((o4[1], o4[2], o6[1], o6[2]), (2, 1, 2, 1));
    assert_eq!((o4[600], o6[600]), (99, 99));
    // Output shorter than the input: only the first addresses are looked up.
    let mut short = [0u32; 3];
    f6.lookup_batch(&a6, &mut short);
    assert_eq!(short, [1, 2, 1]);
}

//! Routing: batches against a reference model, all-or-nothing refusals, id retirement, and a
//! worker thread reading while a writer changes routes.

use super::apply::BatchErrorKind;
use super::*;
use crate::spec::{PortDriver, PortSpec};
use nodes::adjacency::{NextHop, GATEWAY_MEMBER};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn v4(s: &str) -> IpAddr {
    IpAddr::V4(s.parse::<Ipv4Addr>().expect("test address"))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse::<Ipv6Addr>().expect("test address"))
}

/// Two ports: p0 198.18.0.1/24 + 2001:db8::1/64, p1 198.18.1.1/24 + 2001:db8:1::1/64.
fn spec() -> DataplaneSpec {
    let port = |i: u8| PortSpec {
        name: format!("p{i}"),
        mac: [2, 0, 0, 0, 0, i + 1],
        mtu: 1500,
        ip4: vec![(Ipv4Addr::new(198, 18, i, 1), 24)],
        ip6: vec![(
            format!("2001:db8:{i}::1").parse().expect("test address"),
            64,
        )],
        driver: PortDriver::Pcap { rx: None, tx: None },
    };
    DataplaneSpec {
        ports: vec![port(0), port(1)],
        ..DataplaneSpec::default()
    }
}

fn route(prefix: IpAddr, len: u8, via: &[IpAddr]) -> Route {
    Route {
        prefix,
        len,
        target: if via.is_empty() {
            RouteTarget::Drop
        } else {
            RouteTarget::Via(via.to_vec())
        },
    }
}

/// What address `a` resolves to through the readers: the next-hop addresses (sorted), or a
/// word for the other kinds of entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    NoRoute,
    Drop,
    Local,
    Glean(u16),
    Via(Vec<u128>),
    Node(u16, u32),
}

fn seen(table: &NextHopTable, id: u32) -> Seen {
    let gw = |g: u32| table.gateway(g).map_or(u128::MAX, |g| g.addr);
    match table.entry(id) {
        NextHop::NoRoute => Seen::NoRoute,
        NextHop::Drop => Seen::Drop,
        NextHop::Local => Seen::Local,
        NextHop::Glean { port, .. } => Seen::Glean(port),
        NextHop::Gateway(g) => Seen::Via(vec![gw(g)]),
        NextHop::Ecmp { first, count } => {
            // Every member, by walking hashes that land on each slot.
            let mut v: Vec<u128> = (0..count)
                .map(|k| {
                    let hash = ((u64::from(k) << 32) / u64::from(count) + 1) as u32;
                    let m = table.ecmp_member(first, count, hash);
                    if m & GATEWAY_MEMBER != 0 {
                        gw(m & !GATEWAY_MEMBER)
                    } else {
                        u128::MAX
                    }
                })
                .collect();
            v.sort_unstable();
            Seen::Via(v)
        }
        NextHop::Adjacency(_) => Seen::Via(vec![u128::MAX]),
        NextHop::Node { slot, tag } => Seen::Node(slot, tag),
    }
}

fn seen4(r: &RoutingReaders, a: &str) -> Seen {
    let id = r
        .fib4
        .lookup(u32::from(a.parse::<Ipv4Addr>().expect("test address")));
    seen(r.next_hops4[0].get(), id)
}

fn seen6(r: &RoutingReaders, a: &str) -> Seen {
    let id = r
        .fib6
        .lookup(u128::from(a.parse::<Ipv6Addr>().expect("test address")));
    seen(r.next_hops6[0].get(), id)
}

fn ip4(a: &str) -> u128 {
    u128::from(u32::from(a.parse::<Ipv4Addr>().expect("test address")))
}

#[test]
fn system_routes_and_configured_routes_resolve() {
    let mut s = spec();
    s.neighbours.push(NeighbourSpec {
        ip: v4("198.18.9.9"),
        mac: [2, 0, 0, 0, 9, 9],
        port: 1,
    });
    s.routes4.push(crate::spec::RouteSpec {
        prefix: Ipv4Addr::new(198, 19, 0, 0),
        len: 16,
        target: RouteTarget::Via(vec![
            Ipv4Addr::new(198, 18, 1, 2),
            Ipv4Addr::new(198, 18, 9, 9),
        ]),
    });
    let r = Routing::without_workers(&s).expect("routing");
    let rd = r.readers();
    assert_eq!(seen4(&rd, "198.18.0.1"), Seen::Local);
    assert_eq!(seen4(&rd, "198.18.0.77"), Seen::Glean(0));
    assert_eq!(seen4(&rd, "198.18.1.77"), Seen::Glean(1));
    assert_eq!(seen4(&rd, "198.18.9.9"), Seen::Via(vec![ip4("198.18.9.9")]));
    assert_eq!(
        seen4(&rd, "198.19.200.1"),
        Seen::Via(vec![ip4("198.18.1.2"), ip4("198.18.9.9")])
    );
    assert_eq!(seen4(&rd, "198.20.0.1"), Seen::NoRoute);
    assert_eq!(seen6(&rd, "2001:db8:1::1"), Seen::Local);
    assert_eq!(seen6(&rd, "2001:db8:1::5"), Seen::Glean(1));
    // The static neighbour is an adjacency; the other next hop is resolved per worker.
    let table = rd.next_hops4[0].get();
    let static_gw = (0..table.gateway_slots() as u32)
        .filter_map(|g| table.gateway(g))
        .find(|g| g.addr == ip4("198.18.9.9"))
        .expect("gateway of the static neighbour");
    assert!(static_gw.adjacency.is_some());
    assert_eq!(static_gw.port, 1);
    assert_eq!(r.route(v4("198.19.0.0"), 16).map(|x| x.len), Some(16));
}

#[test]
fn add_replace_delete_and_their_refusals() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    let a = r
        .apply(&[Change::AddRoute(route(
            v4("198.19.0.0"),
            16,
            &[v4("198.18.1.2")],
        ))])
        .expect("add");
    assert_eq!(a.version, 1);
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::Via(vec![ip4("198.18.1.2")]));
    let e = r
        .apply(&[Change::AddRoute(route(
            v4("198.19.0.0"),
            16,
            &[v4("198.18.1.3")],
        ))])
        .expect_err("exists");
    assert_eq!((e.item, e.kind), (Some(0), BatchErrorKind::Exists));
    r.apply(&[Change::ReplaceRoute(route(v4("198.19.0.0"), 16, &[]))])
        .expect("replace with drop");
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::Drop);
    r.apply(&[Change::DeleteRoute {
        prefix: v4("198.19.0.0"),
        len: 16,
    }])
    .expect("delete");
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::NoRoute);
    let e = r
        .apply(&[Change::DeleteRoute {
            prefix: v4("198.19.0.0"),
            len: 16,
        }])
        .expect_err("gone");
    assert_eq!(e.kind, BatchErrorKind::NotFound);
    let refused = [
        (route(v4("198.19.0.1"), 16, &[v4("198.18.1.2")]), "prefix"),
        (route(v4("198.19.0.0"), 33, &[v4("198.18.1.2")]), "len"),
        (route(v4("198.19.0.0"), 16, &[v4("198.18.7.2")]), "via"),
        (route(v4("198.19.0.0"), 16, &[v4("198.18.1.1")]), "via"),
        (route(v4("198.19.0.0"), 16, &[v6("2001:db8::2")]), "via"),
        (route(v4("198.19.0.0"), 16, &[v4("224.0.0.1")]), "via"),
        (
            route(v4("198.19.0.0"), 16, &[v4("198.18.1.2"), v4("198.18.1.2")]),
            "via",
        ),
    ];
    for (bad, field) in refused {
        let e = r
            .apply(&[Change::AddRoute(bad.clone())])
            .expect_err("refused");
        assert_eq!(e.field, Some(field), "{bad:?}: {e}");
    }
    assert_eq!(r.version(), 3);
}

#[test]
fn a_batch_with_one_bad_item_changes_nothing() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    r.apply(&[Change::AddRoute(route(
        v4("198.19.0.0"),
        16,
        &[v4("198.18.1.2")],
    ))])
    .expect("add");
    let batch = [
        Change::ReplaceRoute(route(v4("198.19.0.0"), 16, &[v4("198.18.0.9")])),
        Change::AddRoute(route(v6("2001:db8:99::"), 48, &[v6("2001:db8:1::2")])),
        Change::AddRoute(route(v4("198.20.0.0"), 16, &[v4("203.0.113.1")])),
    ];
    let e = r.apply(&batch).expect_err("bad item");
    assert_eq!((e.item, e.field), (Some(2), Some("via")));
    assert!(e.to_string().contains("item 2"), "{e}");
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::Via(vec![ip4("198.18.1.2")]));
    assert_eq!(seen6(&rd, "2001:db8:99::1"), Seen::NoRoute);
    assert_eq!(r.version(), 1);
    assert_eq!(r.route_counts(), (1, 0));
}

#[test]
fn neighbours_change_live_and_are_kept_while_needed() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    let n = NeighbourSpec {
        ip: v4("203.0.113.7"),
        mac: [2, 0, 0, 0, 7, 7],
        port: 1,
    };
    // A next hop outside every port's prefix is usable once it is a static neighbour, also
    // when both come in one batch.
    r.apply(&[
        Change::AddRoute(route(v4("198.19.0.0"), 16, &[v4("203.0.113.7")])),
        Change::AddNeighbour(n.clone()),
    ])
    .expect("route and neighbour");
    assert_eq!(
        seen4(&rd, "198.19.1.1"),
        Seen::Via(vec![ip4("203.0.113.7")])
    );
    let e = r
        .apply(&[Change::DeleteNeighbour(n.ip)])
        .expect_err("still needed");
    assert_eq!((e.item, e.kind), (Some(0), BatchErrorKind::Conflict));
    // A new MAC changes the adjacency in place.
    r.apply(&[Change::ReplaceNeighbour(NeighbourSpec {
        mac: [2, 0, 0, 0, 7, 8],
        ..n.clone()
    })])
    .expect("new mac");
    let table = rd.next_hops4[0].get();
    let adj = (0..table.gateway_slots() as u32)
        .filter_map(|g| table.gateway(g))
        .find(|g| g.addr == ip4("203.0.113.7"))
        .and_then(|g| g.adjacency)
        .and_then(|a| table.adjacency(a))
        .expect("adjacency");
    assert_eq!(&adj.macs[..6], &[2, 0, 0, 0, 7, 8]);
    // A new MTU on its port reaches the adjacency as one more version.
    let before = r.version();
    r.set_port_mtu(1, 1280).expect("mtu");
    assert_eq!(r.version(), before + 1);
    let table = rd.next_hops4[0].get();
    let adj = (0..table.gateway_slots() as u32)
        .filter_map(|g| table.gateway(g))
        .find(|g| g.addr == ip4("203.0.113.7"))
        .and_then(|g| g.adjacency)
        .and_then(|a| table.adjacency(a))
        .expect("adjacency");
    assert_eq!(adj.mtu, 1280);
    assert!(r.set_port_mtu(9, 1280).is_err());
    r.apply(&[
        Change::DeleteRoute {
            prefix: v4("198.19.0.0"),
            len: 16,
        },
        Change::DeleteNeighbour(n.ip),
    ])
    .expect("both go");
    assert_eq!(seen4(&rd, "203.0.113.7"), Seen::NoRoute);
    assert!(r.neighbours().is_empty());
}

#[test]
fn ids_are_reused_only_after_every_worker_passed() {
    let (domain, mut epochs) = Domain::new(1);
    let mut r = Routing::new(&spec(), domain).expect("routing");
    let mut worker = epochs.pop().expect("one worker");
    let add = |hop: &str| Change::ReplaceRoute(route(v4("198.19.0.0"), 16, &[v4(hop)]));
    r.apply(&[add("198.18.1.2")]).expect("first");
    let (before, _, _) = r.next_hop_usage();
    let applied = r.apply(&[add("198.18.1.3")]).expect("second");
    // The old entry waits: the worker has not passed a quiescent point yet.
    let (_, _, waiting) = r.next_hop_usage();
    assert!(waiting >= 1);
    assert!(!r.domain().is_safe(applied.epoch));
    // SAFETY: this thread holds no reference from a reader.
    unsafe { worker.quiescent() };
    assert!(r.domain().is_safe(applied.epoch));
    r.reclaim();
    let (after, _, waiting) = r.next_hop_usage();
    assert_eq!((after, waiting), (before, 0));
}

/// A reference longest-prefix match over (prefix, len) -> hops.
fn reference(routes: &BTreeMap<(u32, u8), Vec<u32>>, addr: u32) -> Option<Vec<u32>> {
    (0..=32u8).rev().find_map(|len| {
        let p = if len == 0 {
            0
        } else {
            addr & (u32::MAX << (32 - len))
        };
        routes.get(&(p, len)).cloned()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random batches of additions, replacements and deletions (inside 198.19.0.0/16, next
    /// hops from p1's prefix) forward as a reference model says after every batch.
    #[test]
    fn random_batches_match_a_reference(
        batches in prop::collection::vec(
            prop::collection::vec((0u32..64, 14u8..=30, 0u8..4, any::<bool>()), 1..20),
            1..12,
        ),
        probes in prop::collection::vec(any::<u16>(), 64),
    ) {
        let mut r = Routing::without_workers(&spec()).expect("routing");
        let rd = r.readers();
        let mut model: BTreeMap<(u32, u8), Vec<u32>> = BTreeMap::new();
        let base = u32::from(Ipv4Addr::new(198, 19, 0, 0));
        for batch in batches {
            let mut changes = Vec::new();
            let mut next = model.clone();
            for (bits, len, hops, delete) in batch {
                let prefix = (base | (bits << 10)) & (u32::MAX << (32 - len));
                let key = (prefix, len);
                if delete {
                    if next.remove(&key).is_some() {
                        changes.push(Change::DeleteRoute { prefix: IpAddr::V4(prefix.into()), len });
                    }
                    continue;
                }
                let via: Vec<u32> = (0..=hops).map(|h| u32::from(Ipv4Addr::new(198, 18, 1, 10 + h))).collect();
                next.insert(key, via.clone());
                changes.push(Change::ReplaceRoute(Route {
                    prefix: IpAddr::V4(prefix.into()),
                    len,
                    target: RouteTarget::Via(via.iter().map(|a| IpAddr::V4((*a).into())).collect()),
                }));
            }
            r.apply(&changes).expect("valid batch");
            model = next;
            for p in &probes {
                let addr = base | u32::from(*p);
                let want = match reference(&model, addr) {
                    Some(mut v) => { v.sort_unstable(); Seen::Via(v.into_iter().map(u128::from).collect()) }
                    None => Seen::NoRoute,
                };
                let id = rd.fib4.lookup(addr);
                let got = seen(rd.next_hops4[0].get(), id);
                prop_assert_eq!(got, want, "address {}", Ipv4Addr::from(addr));
            }
        }
    }
}

/// A worker thread resolves addresses while the writer changes their routes: every answer is
/// one of the next hops the prefix ever had (a freed or reused id would show another), and
/// the worker passes quiescent points between rounds as the data plane's loop does.
#[test]
fn a_worker_reads_consistently_while_routes_change() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (domain, mut epochs) = Domain::new(1);
    let mut r = Routing::new(&spec(), domain).expect("routing");
    let mut worker = epochs.pop().expect("one worker");
    let rd = r.readers();
    let stop = AtomicBool::new(false);
    // Prefix i (198.19.i.0/24) only ever points at hops 198.18.1.(10 + i) and .(100 + i).
    let hops_of = |i: u32| {
        [
            ip4(&format!("198.18.1.{}", 10 + i)),
            ip4(&format!("198.18.1.{}", 100 + i)),
        ]
    };
    let stop = &stop;
    std::thread::scope(|s| {
        let reader = s.spawn(move || {
            let mut checked = 0u64;
            let mut ids = [0u32; 64];
            while !stop.load(Ordering::Relaxed) {
                // As ip4-lookup does: the FIB for a whole vector first, then the next-hop
                // table, held until the end of the round.
                for (i, id) in ids.iter_mut().enumerate() {
                    *id = rd
                        .fib4
                        .lookup(u32::from(Ipv4Addr::new(198, 19, i as u8, 7)));
                }
                // The rest of a vector's work: widens the window a reused id would show in.
                for _ in 0..2000 {
                    std::hint::spin_loop();
                }
                let table = rd.next_hops4[0].get();
                for (i, id) in ids.iter().enumerate() {
                    match seen(table, *id) {
                        Seen::NoRoute => {}
                        Seen::Via(v) => {
                            for a in v {
                                assert!(
                                    hops_of(i as u32).contains(&a),
                                    "prefix {i}: next hop {a:x}"
                                );
                            }
                        }
                        other => panic!("prefix {i}: {other:?}"),
                    }
                    checked += 1;
                }
                // SAFETY: no reference from a reader is alive between rounds.
                unsafe { worker.quiescent() };
            }
            // SAFETY: as above; the loop ended.
            unsafe { worker.offline() };
            checked
        });
        let mut rng = fib::SplitMix64::new(7);
        for _ in 0..20_000 {
            let mut batch = Vec::new();
            for _ in 0..1 + rng.below(6) {
                let i = rng.below(64) as u32;
                let prefix = IpAddr::V4(Ipv4Addr::new(198, 19, i as u8, 0));
                let [a, b] = hops_of(i).map(|h| IpAddr::V4(Ipv4Addr::from(h as u32)));
                let via = match rng.below(3) {
                    0 => vec![a],
                    1 => vec![b],
                    _ => vec![a, b],
                };
                batch.push(Change::ReplaceRoute(route(prefix, 24, &via)));
                if rng.below(5) == 0 && r.route(prefix, 24).is_some() {
                    batch.clear();
                    batch.push(Change::DeleteRoute { prefix, len: 24 });
                }
            }
            r.apply(&batch).expect("valid batch");
        }
        stop.store(true, Ordering::Relaxed);
        let checked = reader.join().expect("reader");
        assert!(checked > 0);
    });
    r.reclaim();
    assert_eq!(r.next_hop_usage().2, 0, "everything retired was reclaimed");
}

#[test]
fn port_addresses_change_live_and_keep_next_hops_reachable() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    r.apply(&[Change::AddRoute(route(
        v4("198.19.0.0"),
        16,
        &[v4("198.18.1.2")],
    ))])
    .expect("route via p1");
    let p1 = |a: &[(&str, u8)]| -> Vec<(IpAddr, u8)> {
        a.iter()
            .map(|(ip, l)| (ip.parse().expect("ip"), *l))
            .chain(std::iter::once(("2001:db8:1::1".parse().expect("ip"), 64)))
            .collect()
    };
    // Moving p1 away from 198.18.1.0/24 strands the route's next hop: refused, nothing changes.
    let before = r.version();
    let e = r
        .set_port_addresses(&[(1, p1(&[("198.18.9.1", 24)]))])
        .expect_err("next hop unreachable");
    assert!(e.0.contains("198.18.1.2"), "{}", e.0);
    assert_eq!(r.version(), before);
    assert_eq!(seen4(&rd, "198.18.9.5"), Seen::NoRoute);
    // Make before break: a second prefix first.
    r.set_port_addresses(&[(1, p1(&[("198.18.1.1", 24), ("198.18.9.1", 24)]))])
        .expect("second prefix");
    assert_eq!(r.version(), before + 1);
    assert_eq!(seen4(&rd, "198.18.9.1"), Seen::Local);
    assert_eq!(seen4(&rd, "198.18.9.5"), Seen::Glean(1));
    // Routes move to it, then the old prefix goes; its own address and prefix disappear.
    r.apply(&[Change::ReplaceRoute(route(
        v4("198.19.0.0"),
        16,
        &[v4("198.18.9.2")],
    ))])
    .expect("route via the new prefix");
    r.set_port_addresses(&[(1, p1(&[("198.18.9.1", 24)]))])
        .expect("old prefix goes");
    assert_eq!(seen4(&rd, "198.18.1.1"), Seen::NoRoute);
    assert_eq!(seen4(&rd, "198.18.1.7"), Seen::NoRoute);
    assert_eq!(seen4(&rd, "198.19.3.3"), Seen::Via(vec![ip4("198.18.9.2")]));
    assert_eq!(
        r.port_addresses(1).map(<[_]>::len),
        Some(2),
        "one IPv4 and one IPv6 address"
    );
    // A next hop cannot become an own address.
    let e = r
        .set_port_addresses(&[(0, vec![("198.18.9.2".parse().expect("ip"), 32)])])
        .expect_err("own next hop");
    assert!(e.0.contains("own address"), "{}", e.0);
    assert!(r.set_port_addresses(&[(7, Vec::new())]).is_err());
}

fn node_route(prefix: IpAddr, len: u8) -> Change {
    Change::SetNodeRoute(NodeRoute {
        prefix,
        len,
        node: nodes::lb::LB,
        tag: nodes::lb::VIP_ROUTE,
    })
}

const LB_NODE: Seen = Seen::Node(0, nodes::lb::VIP_ROUTE);

/// The `lb` source wins over a configured route of the same prefix and gives it back when it
/// goes; it also wins over a connected prefix and a static neighbour's host route; longer
/// prefixes still win by length; own addresses win over it (refused).
#[test]
fn node_routes_take_precedence_over_configured_ones_and_give_them_back() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    let a = |r: &mut Routing, c: &[Change]| r.apply(c).expect("applied");
    a(
        &mut r,
        &[Change::AddRoute(route(
            v4("198.19.0.0"),
            16,
            &[v4("198.18.1.2")],
        ))],
    );
    a(
        &mut r,
        &[Change::AddRoute(route(
            v4("198.19.1.1"),
            32,
            &[v4("198.18.1.3")],
        ))],
    );
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::Via(vec![ip4("198.18.1.3")]));
    // The VIP's route over the configured one of the same prefix.
    a(&mut r, &[node_route(v4("198.19.1.1"), 32)]);
    assert_eq!(seen4(&rd, "198.19.1.1"), LB_NODE);
    assert_eq!(seen4(&rd, "198.19.1.2"), Seen::Via(vec![ip4("198.18.1.2")]));
    assert!(
        r.route(v4("198.19.1.1"), 32).is_some(),
        "the configured route is kept"
    );
    assert_eq!(
        r.routes(false, None, 10).len(),
        2,
        "node routes are not configured routes"
    );
    assert_eq!(r.node_route_counts(), (1, 0));
    let nr = r.node_route(v4("198.19.1.1"), 32).expect("listed");
    assert_eq!((nr.node, nr.tag), (nodes::lb::LB, nodes::lb::VIP_ROUTE));
    // The configured route changes underneath: still shadowed, then back when the VIP goes.
    a(
        &mut r,
        &[Change::ReplaceRoute(route(
            v4("198.19.1.1"),
            32,
            &[v4("198.18.1.4")],
        ))],
    );
    assert_eq!(seen4(&rd, "198.19.1.1"), LB_NODE);
    a(
        &mut r,
        &[Change::DeleteNodeRoute {
            prefix: v4("198.19.1.1"),
            len: 32,
        }],
    );
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::Via(vec![ip4("198.18.1.4")]));
    // A VIP prefix inside a configured one, with no route of its own: gone, the covering one.
    a(&mut r, &[node_route(v4("198.19.2.0"), 24)]);
    assert_eq!(seen4(&rd, "198.19.2.77"), LB_NODE);
    a(
        &mut r,
        &[Change::DeleteNodeRoute {
            prefix: v4("198.19.2.0"),
            len: 24,
        }],
    );
    assert_eq!(
        seen4(&rd, "198.19.2.77"),
        Seen::Via(vec![ip4("198.18.1.2")])
    );
    // Over a connected prefix (its own and broadcast addresses stay the port's).
    a(&mut r, &[node_route(v4("198.18.1.0"), 24)]);
    assert_eq!(seen4(&rd, "198.18.1.9"), LB_NODE);
    assert_eq!(seen4(&rd, "198.18.1.1"), Seen::Local);
    a(
        &mut r,
        &[Change::DeleteNodeRoute {
            prefix: v4("198.18.1.0"),
            len: 24,
        }],
    );
    assert_eq!(seen4(&rd, "198.18.1.9"), Seen::Glean(1));
    // IPv6 alike.
    a(&mut r, &[node_route(v6("2001:db8:9::10"), 128)]);
    assert_eq!(seen6(&rd, "2001:db8:9::10"), LB_NODE);
    assert_eq!(r.node_route_counts(), (0, 1));
}

#[test]
fn node_routes_are_refused_on_own_addresses_unknown_nodes_and_missing_prefixes() {
    let mut r = Routing::without_workers(&spec()).expect("routing");
    let rd = r.readers();
    let version = r.version();
    let e = r
        .apply(&[
            node_route(v4("198.19.1.1"), 32),
            node_route(v4("198.18.0.1"), 32),
        ])
        .expect_err("own address");
    assert_eq!(
        (e.item, e.field, e.kind),
        (Some(1), Some("prefix"), BatchErrorKind::Conflict)
    );
    assert!(e.message.contains("address of vecplane itself"), "{e}");
    assert_eq!(r.version(), version, "nothing applied");
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::NoRoute);
    let e = r
        .apply(&[Change::SetNodeRoute(NodeRoute {
            prefix: v4("198.19.1.1"),
            len: 32,
            node: "ip4-rewrite",
            tag: 0,
        })])
        .expect_err("not a route node");
    assert_eq!(e.field, Some("node"));
    assert!(e.message.contains("accepted: lb"), "{e}");
    let e = r
        .apply(&[Change::DeleteNodeRoute {
            prefix: v4("198.19.1.1"),
            len: 32,
        }])
        .expect_err("none");
    assert_eq!(e.kind, BatchErrorKind::NotFound);
    // `check` says what `apply` would, and changes nothing.
    assert!(r.check(&[node_route(v4("198.18.0.1"), 32)]).is_err());
    r.check(&[node_route(v4("198.19.1.1"), 32)])
        .expect("would apply");
    assert_eq!(r.version(), version);
    assert_eq!(seen4(&rd, "198.19.1.1"), Seen::NoRoute);
    // Many VIP prefixes share one next-hop entry.
    let before = r.next_hop_usage().0;
    let many: Vec<Change> = (1..=200u8)
        .map(|i| node_route(IpAddr::V4(Ipv4Addr::new(198, 19, 3, i)), 32))
        .collect();
    r.apply(&many).expect("applied");
    assert_eq!(r.next_hop_usage().0, before + 1);
}

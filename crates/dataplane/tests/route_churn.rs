//! A route and the static neighbour it goes through, added and deleted together (one batch
//! each) fifty times while two workers flood it from a memory port: the flood's packets are
//! sent or dropped for want of a route, never sent to neighbour resolution. (A deletion used to
//! publish the gateway's dynamic resolution before the FIB lost the route; about a hundred
//! packets went to ip4-arp then.)

mod support;

use dataplane::routing::{Change, Route};
use dataplane::*;
use std::net::IpAddr;
use std::time::{Duration, Instant};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn ip4(s: &str) -> std::net::Ipv4Addr {
    s.parse().expect("ip")
}

fn spec() -> DataplaneSpec {
    let mut a = support::memory_port(
        "a",
        [2, 0, 0, 0, 0, 1],
        16,
        Some((ip("198.18.0.5"), vec![ip("198.19.6.1")], 0)),
    );
    if let PortDriver::Memory(m) = &mut a.driver {
        m.limit = None;
    }
    a.ip4 = vec![(ip4("198.18.0.1"), 24)];
    let mut b = support::memory_port("b", [2, 0, 0, 0, 0, 2], 1, None);
    b.ip4 = vec![(ip4("198.18.3.1"), 24)];
    DataplaneSpec {
        workers: 2,
        ports: vec![a, b],
        ..DataplaneSpec::default()
    }
}

fn tx_b(v: &RuntimeView) -> u64 {
    v.ports.get()[1]
        .stats
        .iter()
        .map(|s| s.tx_packets.get())
        .sum()
}

#[test]
fn a_route_deleted_with_its_neighbour_never_sends_to_resolution() {
    let dp = Dataplane::with_tsc_hz(&spec(), 2_596_000_000).expect("build");
    let running = dp.start();
    let v = running.view().clone();
    let apply = |changes: &[Change]| {
        v.routing
            .lock()
            .expect("routing")
            .apply(changes)
            .expect("route change");
    };
    for _ in 0..50 {
        apply(&[
            Change::AddNeighbour(NeighbourSpec {
                ip: ip("198.18.3.2"),
                mac: [2, 0, 0, 0, 3, 3],
                port: 1,
            }),
            Change::AddRoute(Route {
                prefix: ip("198.19.6.0"),
                len: 24,
                target: RouteTarget::Via(vec![ip("198.18.3.2")]),
            }),
        ]);
        let (sent, t0) = (tx_b(&v), Instant::now());
        while tx_b(&v) < sent + 100 {
            assert!(t0.elapsed() < Duration::from_secs(10), "the flood stopped");
            std::thread::sleep(Duration::from_millis(1));
        }
        apply(&[
            Change::DeleteRoute {
                prefix: ip("198.19.6.0"),
                len: 24,
            },
            Change::DeleteNeighbour(ip("198.18.3.2")),
        ]);
        std::thread::sleep(Duration::from_millis(2));
    }
    running.stop();
    let mut other = Vec::new();
    for w in &v.workers {
        let g = w.graph.get();
        for ((node, reason), c) in g.error_names.iter().zip(&g.errors) {
            let no_route = node == "ip4-lookup" && reason == "no-route";
            if c.get() > 0 && !no_route {
                other.push((node.clone(), reason.clone(), c.get()));
            }
        }
    }
    assert!(other.is_empty(), "drops other than no-route: {other:?}");
}

//! Ports added and removed while two workers run and a memory port floods: every packet the
//! flood sent is sent on a port or dropped for having no route, never lost, while a third port
//! is added, routed to, refused removal while a neighbour needs it, and removed, twenty times;
//! bad changes are refused and change nothing.

mod support;

use dataplane::routing::{Change, Route};
use dataplane::*;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// a floods 198.19.0.1 (via b) and 198.19.6.1 (via a port added later) from two workers.
fn spec() -> DataplaneSpec {
    let a = support::memory_port(
        "a",
        MAC_A,
        2,
        Some((
            ip("198.18.0.5"),
            vec![ip("198.19.0.1"), ip("198.19.6.1")],
            0,
        )),
    );
    let mut a = a;
    if let PortDriver::Memory(m) = &mut a.driver {
        m.limit = None;
    }
    a.ip4 = vec![(ip4("198.18.0.1"), 24)];
    let mut b = support::memory_port("b", MAC_B, 1, None);
    b.ip4 = vec![(ip4("198.18.2.1"), 24)];
    // A port of the start that nothing uses: it can be removed like one added later.
    let d = support::memory_port("d", [2, 0, 0, 0, 0, 4], 1, None);
    DataplaneSpec {
        workers: 2,
        ports: vec![a, b, d],
        neighbours: vec![NeighbourSpec {
            ip: ip("198.18.2.2"),
            mac: [2, 0, 0, 0, 2, 2],
            port: 1,
        }],
        routes4: vec![RouteSpec {
            prefix: ip4("198.19.0.0"),
            len: 24,
            target: RouteTarget::Via(vec![ip4("198.18.2.2")]),
        }],
        ..DataplaneSpec::default()
    }
}

fn ip4(s: &str) -> std::net::Ipv4Addr {
    s.parse().expect("ip")
}

/// A memory sink named `name` on 198.18.3.1/24.
fn sink(name: &str) -> PortSpec {
    let mut c = support::memory_port(name, [2, 0, 0, 0, 0, 3], 1, None);
    c.ip4 = vec![(ip4("198.18.3.1"), 24)];
    c
}

fn tx(v: &RuntimeView, id: usize) -> u64 {
    v.ports.get()[id]
        .stats
        .iter()
        .map(|s| s.tx_packets.get())
        .sum()
}

fn rx(v: &RuntimeView, id: usize) -> u64 {
    v.ports.get()[id]
        .stats
        .iter()
        .map(|s| s.rx_packets.get())
        .sum()
}

/// Drops by (node, reason), summed over the workers.
fn drops(v: &RuntimeView) -> Vec<((String, String), u64)> {
    let mut all = std::collections::BTreeMap::new();
    for w in &v.workers {
        let g = w.graph.get();
        for (name, c) in g.error_names.iter().zip(&g.errors) {
            if c.get() > 0 {
                *all.entry(name.clone()).or_insert(0) += c.get();
            }
        }
    }
    all.into_iter().collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Route 198.19.6.0/24 via the static neighbour 198.18.3.2 on `port`, or take both away, each
/// as one batch (deleting both at once used to send the route's packets to neighbour
/// resolution for a moment).
fn route_via_c(routing: &std::sync::Mutex<routing::Routing>, port: usize, add: bool) {
    let apply = |changes: &[Change]| {
        routing
            .lock()
            .expect("routing")
            .apply(changes)
            .expect("route change");
    };
    if add {
        apply(&[
            Change::AddNeighbour(NeighbourSpec {
                ip: ip("198.18.3.2"),
                mac: [2, 0, 0, 0, 3, 3],
                port,
            }),
            Change::AddRoute(Route {
                prefix: ip("198.19.6.0"),
                len: 24,
                target: RouteTarget::Via(vec![ip("198.18.3.2")]),
            }),
        ]);
    } else {
        apply(&[
            Change::DeleteRoute {
                prefix: ip("198.19.6.0"),
                len: 24,
            },
            Change::DeleteNeighbour(ip("198.18.3.2")),
        ]);
    }
}

#[test]
fn ports_come_and_go_while_a_flood_runs_and_no_packet_is_lost() {
    let dp = Dataplane::with_tsc_hz(&spec(), 2_596_000_000).expect("build");
    let running = dp.start();
    let v = running.view().clone();
    let pc: Arc<ports_live::PortControl> = v.port_control.clone().expect("port control");
    wait_until("the flood reaches b", || tx(&v, 1) > 1000);

    // Refused, and nothing changes.
    let before = pc.ports();
    let mut dup = sink("b");
    dup.ip4.clear();
    let e = pc.add(dup).expect_err("a second b");
    assert!(e.to_string().contains("a port is named `b` already"), "{e}");
    let mut pcap = sink("x");
    pcap.driver = PortDriver::Pcap {
        rx: None,
        tx: Some("/nonexistent/x.pcap".into()),
    };
    let e = pc.add(pcap).expect_err("pcap");
    assert!(
        e.to_string()
            .contains("accepted at run time: af-packet, memory, af-xdp"),
        "{e}"
    );
    let mut xdp = sink("x");
    xdp.driver = PortDriver::AfXdp {
        interface: "nope".into(),
        queues: 1,
        mode: Default::default(),
    };
    let e = pc.add(xdp).expect_err("af-xdp on no interface");
    assert!(e.to_string().contains("no such interface"), "{e}");
    let mut clash = sink("y");
    clash.ip4 = vec![(ip4("198.18.2.1"), 24)];
    let e = pc.add(clash).expect_err("b's address");
    assert!(
        e.to_string().contains("overlaps 198.18.2.1/24 of port `b`"),
        "{e}"
    );
    // A port whose driver cannot open takes nothing: the next port's id and view line up.
    let mut bad = sink("bad");
    bad.ip4.clear();
    bad.driver = PortDriver::AfPacket {
        interface: "vpno-such-if0".into(),
        fanout: None,
    };
    let e = pc.add(bad).expect_err("no such interface");
    assert!(e.to_string().contains("bad"), "{e}");
    let e = pc.remove("nope").expect_err("no such port");
    assert!(e.to_string().contains("ports: a, b, d"), "{e}");
    let e = pc.remove("b").expect_err("b's gateway");
    assert!(
        e.to_string().contains("port `b` has the static neighbour"),
        "{e}"
    );
    assert_eq!(pc.ports(), before);
    assert_eq!(pc.remove("d").expect("d removed").id, 2);
    assert_eq!(v.ports.get()[2].name, "d (removed)");

    let mut ids = Vec::new();
    // What the removed ports sent (an id given again shows its new port's counters).
    let mut sent_by_removed = 0;
    for round in 0..20 {
        let name = format!("c{round}");
        let id = pc.add(sink(&name)).expect("added");
        ids.push(id);
        let port = usize::from(id);
        assert_eq!(v.ports.get()[port].name, name);
        route_via_c(&v.routing, port, true);
        wait_until("the flood reaches the new port", || tx(&v, port) > 100);
        let e = pc.remove(&name).expect_err("a neighbour needs it");
        assert!(e.to_string().contains("static neighbour 198.18.3.2"), "{e}");
        route_via_c(&v.routing, port, false);
        let removed = pc.remove(&name).expect("removed");
        assert_eq!(removed.id, id);
        let sent = tx(&v, port);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(tx(&v, port), sent, "a removed port sends nothing");
        sent_by_removed += sent;
        assert_eq!(v.ports.get()[port].driver, "removed");
    }
    // Ids rest a second before they are given again, then the lowest is.
    let last = *ids.last().expect("rounds");
    let mut quick = sink("quick");
    quick.ip4.clear();
    let quick = pc.add(quick).expect("added");
    assert_ne!(quick, last, "an id just removed rests first");
    std::thread::sleep(Duration::from_millis(1100));
    let in_use: Vec<u16> = pc.ports().iter().map(|(id, _)| *id).collect();
    let lowest_free = (0..).find(|i| !in_use.contains(i)).expect("an id");
    let again = pc.add(sink("again")).expect("added");
    assert_eq!(again, lowest_free, "the lowest rested id is given again");
    assert_eq!(
        tx(&v, usize::from(again)),
        0,
        "new counters for the new port"
    );
    for name in ["again", "quick"] {
        sent_by_removed += tx(&v, usize::from(pc.remove(name).expect("removed").id));
    }

    running.stop();
    // Everything a received is accounted for: sent on b or a c, or dropped for want of a
    // route (198.19.6.1 while no c was routed); nothing else was dropped.
    let sent = tx(&v, 1) + sent_by_removed;
    let d = drops(&v);
    let no_route: u64 = d
        .iter()
        .filter(|((n, r), _)| n == "ip4-lookup" && r == "no-route")
        .map(|(_, c)| c)
        .sum();
    let other: Vec<_> = d
        .iter()
        .filter(|((n, r), _)| !(n == "ip4-lookup" && r == "no-route"))
        .collect();
    assert!(other.is_empty(), "drops other than no-route: {other:?}");
    assert_eq!(rx(&v, 0), sent + no_route, "drops {d:?}");
    assert!(tx(&v, 1) > 0 && no_route > 0);
}

//! End-to-end through the real graph on memory ports: cross-connect and IPv4/IPv6 routing,
//! counting that everything received is sent or dropped with a reason.

mod support;

use dataplane::*;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_B: [u8; 6] = [2, 0, 0, 0, 2, 2];

fn memory_port(name: &str, mac: [u8; 6], gen: Option<(IpAddr, Vec<IpAddr>, u64)>) -> PortSpec {
    support::memory_port(name, mac, 1024, gen)
}

fn totals(dp: &Dataplane) -> (u64, u64, u64) {
    let v = dp.view();
    let ports = v.ports.get();
    let rx: u64 = ports
        .iter()
        .flat_map(|p| &p.stats)
        .map(|s| s.rx_packets.get())
        .sum();
    let tx: u64 = ports
        .iter()
        .flat_map(|p| &p.stats)
        .map(|s| s.tx_packets.get())
        .sum();
    let drops: u64 = v.workers.iter().map(|w| w.graph.get().total_drops()).sum();
    (rx, tx, drops)
}

#[test]
fn xconnect_moves_every_packet() {
    let spec = DataplaneSpec {
        ports: vec![
            memory_port(
                "a",
                MAC_A,
                Some((
                    "198.18.0.1".parse().expect("ip"),
                    vec!["198.19.0.1".parse().expect("ip")],
                    100_000,
                )),
            ),
            memory_port("b", MAC_B, None),
        ],
        xconnects: vec![XconnectSpec {
            from: 0,
            to: 1,
            dst_mac: Some(PEER_B),
        }],
        ..DataplaneSpec::default()
    };
    let mut dp = Dataplane::with_tsc_hz(&spec, 2_596_000_000).expect("build");
    dp.run_inline(&AtomicBool::new(false), None);
    assert_eq!(totals(&dp), (100_000, 100_000, 0));
}

#[test]
fn ip4_and_ip6_routes_forward_and_unrouted_packets_are_counted() {
    let v4: Vec<IpAddr> = vec![
        "198.19.1.1".parse().expect("ip"),
        "198.18.200.1".parse().expect("ip"),
    ];
    let v6: Vec<IpAddr> = vec!["2001:db8:9::1".parse().expect("ip")];
    let mut a = memory_port(
        "a",
        MAC_A,
        Some(("198.18.0.5".parse().expect("ip"), v4, 10_000)),
    );
    a.ip4 = vec![("198.18.0.1".parse().expect("ip"), 24)];
    let mut c = memory_port(
        "c",
        [2, 0, 0, 0, 0, 3],
        Some(("2001:db8:1::5".parse().expect("ip"), v6, 10_000)),
    );
    c.ip6 = vec![("2001:db8:1::1".parse().expect("ip"), 64)];
    if let PortDriver::Memory(m) = &mut c.driver {
        m.frame_size = 78; // the smallest IPv6 test frame of RFC 5180
    }
    let mut b = memory_port("b", MAC_B, None);
    b.ip4 = vec![("198.18.2.1".parse().expect("ip"), 24)];
    b.ip6 = vec![("2001:db8:2::1".parse().expect("ip"), 64)];
    let spec = DataplaneSpec {
        ports: vec![a, b, c],
        neighbours: vec![
            NeighbourSpec {
                ip: "198.18.2.2".parse().expect("ip"),
                mac: PEER_B,
                port: 1,
            },
            NeighbourSpec {
                ip: "2001:db8:2::2".parse().expect("ip"),
                mac: PEER_B,
                port: 1,
            },
        ],
        routes4: vec![RouteSpec {
            prefix: "198.19.0.0".parse().expect("ip"),
            len: 16,
            target: RouteTarget::Via(vec!["198.18.2.2".parse().expect("ip")]),
        }],
        routes6: vec![RouteSpec {
            prefix: "2001:db8:9::".parse().expect("ip"),
            len: 48,
            target: RouteTarget::Via(vec!["2001:db8:2::2".parse().expect("ip")]),
        }],
        ..DataplaneSpec::default()
    };
    let mut dp = Dataplane::with_tsc_hz(&spec, 2_596_000_000).expect("build");
    dp.run_inline(&AtomicBool::new(false), None);
    let (rx, tx, drops) = totals(&dp);
    assert_eq!(rx, 20_000);
    assert_eq!(
        tx, 15_000,
        "half the v4 flows have no route, all v6 flows do"
    );
    assert_eq!(drops, 5_000);
    let g = dp.view().workers[0].graph.get();
    let id = g.error_id("ip4-lookup", "no-route").expect("reason");
    assert_eq!(g.errors[id].get(), 5_000);
    assert_eq!(dp.view().ports.get()[1].stats[0].tx_packets.get(), 15_000);
}

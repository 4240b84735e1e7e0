//! The load balancer steered by routes, through the real graph on memory ports: with a
//! thousand VIPs configured, a packet to any other address never visits the `lb` node (its
//! node counters stay at zero); packets to a VIP do and reach their server, while a packet to a
//! VIP's address on a port no VIP has is dropped as `no-vip-for-port`; a data plane started
//! without `[lb]` takes a VIP at run time (flow tables allocated then, not before), and when
//! the VIP goes the configured route of its prefix comes back.

use dataplane::routing::Routing;
use dataplane::*;

mod support;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use support::memory_port;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_B: [u8; 6] = [2, 0, 0, 0, 2, 2];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 2, 10];
/// The generator's UDP destination port (`UdpFrameSpec::default`).
const PORT: u16 = 1024;
const PACKETS: u64 = 20_000;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

/// Port `a` sends `PACKETS` UDP packets to `destinations` (round robin over its flows); port
/// `b` (198.18.2.1/24) reaches the router 198.18.2.2 and the server 198.18.2.10.
fn spec(destinations: Vec<IpAddr>, lb_lines: Option<&str>) -> DataplaneSpec {
    let mut a = memory_port(
        "a",
        MAC_A,
        64,
        Some((ip("198.18.0.5"), destinations, PACKETS)),
    );
    a.ip4 = vec![(Ipv4Addr::new(198, 18, 0, 1), 24)];
    let mut b = memory_port("b", MAC_B, 64, None);
    b.ip4 = vec![(Ipv4Addr::new(198, 18, 2, 1), 24)];
    let lb = lb_lines.map(|text| {
        let cmds = ::lb::cli::parse_lines(text).expect("lb lines parse");
        LbSpec {
            state: ::lb::model::LbState::new()
                .apply(&cmds)
                .expect("lb lines apply"),
            ..LbSpec::default()
        }
    });
    DataplaneSpec {
        ports: vec![a, b],
        neighbours: vec![
            NeighbourSpec {
                ip: ip("198.18.2.2"),
                mac: PEER_B,
                port: 1,
            },
            NeighbourSpec {
                ip: ip("198.18.2.10"),
                mac: SERVER_MAC,
                port: 1,
            },
        ],
        routes4: vec![RouteSpec {
            prefix: Ipv4Addr::new(198, 19, 0, 0),
            len: 16,
            target: RouteTarget::Via(vec![Ipv4Addr::new(198, 18, 2, 2)]),
        }],
        lb,
        ..DataplaneSpec::default()
    }
}

/// `n` VIPs at 198.18.100.x / 198.18.101.x (UDP `PORT`, L3DSR), the first with the server.
fn vips(n: u32) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "lb vip 198.18.{}.{}/32 protocol udp port {PORT} encap l3dsr dscp 23 new_len 1024\n",
            100 + i / 250,
            i % 250 + 1
        ));
    }
    s.push_str(&format!(
        "lb as 198.18.100.1/32 protocol udp port {PORT} 198.18.2.10\n"
    ));
    s
}

/// Packets node `node` processed, over every worker.
fn node_packets(dp: &Dataplane, node: &str) -> u64 {
    dp.view()
        .workers
        .iter()
        .filter_map(|w| {
            let g = w.graph.get();
            let i = g.node_names.iter().position(|n| n == node)?;
            Some(g.nodes[i].packets.get())
        })
        .sum()
}

/// Packets dropped by `node` as `reason`.
fn dropped(dp: &Dataplane, node: &str, reason: &str) -> u64 {
    dp.view()
        .workers
        .iter()
        .filter_map(|w| {
            let id = w.graph.get().error_id(node, reason)?;
            Some(w.graph.get().errors[id].get())
        })
        .sum()
}

fn tx(dp: &Dataplane) -> u64 {
    dp.view()
        .ports
        .get()
        .iter()
        .flat_map(|p| &p.stats)
        .map(|s| s.tx_packets.get())
        .sum()
}

fn run(dp: &mut Dataplane) {
    dp.run_inline(&AtomicBool::new(false), None);
}

#[test]
fn packets_to_other_addresses_never_visit_lb_with_a_thousand_vips() {
    let dst = vec![ip("198.19.1.1"), ip("198.19.7.9")];
    let mut dp =
        Dataplane::with_tsc_hz(&spec(dst, Some(&vips(1000))), 2_600_000_000).expect("build");
    assert!(dp.view().lb.flow_table_entries() > 0, "VIPs: tables given");
    run(&mut dp);
    assert_eq!(tx(&dp), PACKETS, "every packet forwarded");
    assert_eq!(node_packets(&dp, "ip4-lookup"), PACKETS);
    assert_eq!(node_packets(&dp, "lb"), 0, "no packet visited lb");
}

#[test]
fn vip_packets_visit_lb_and_other_ports_of_a_vip_address_are_dropped_and_counted() {
    // 198.18.100.1: the VIP with the server; 198.18.101.2 has a VIP on port 81 only.
    let lines = format!(
        "{}lb vip 198.18.101.2/32 protocol udp port 81 encap l3dsr dscp 24\n",
        vips(1)
    );
    let dst = vec![ip("198.18.100.1"), ip("198.18.101.2")];
    let mut dp = Dataplane::with_tsc_hz(&spec(dst, Some(&lines)), 2_600_000_000).expect("build");
    run(&mut dp);
    assert_eq!(
        node_packets(&dp, "lb"),
        PACKETS,
        "both addresses routed to lb"
    );
    assert_eq!(tx(&dp), PACKETS / 2, "the VIP's packets reached the server");
    assert_eq!(dropped(&dp, "lb", "no-vip-for-port"), PACKETS / 2);
    assert_eq!(dp.view().lb.node_totals().no_vip_for_port, PACKETS / 2);
    assert_eq!(dropped(&dp, "lb", "vip-loop"), 0);
}

#[test]
fn without_lb_a_vip_comes_at_run_time_and_its_prefix_route_comes_back_when_it_goes() {
    let mut s = spec(vec![ip("198.18.100.1")], None);
    s.routes4.push(RouteSpec {
        prefix: Ipv4Addr::new(198, 18, 100, 1),
        len: 32,
        target: RouteTarget::Via(vec![Ipv4Addr::new(198, 18, 2, 2)]),
    });
    let mut dp = Dataplane::with_tsc_hz(&s, 2_600_000_000).expect("build");
    let lb = dp.view().lb.clone();
    assert!(!lb.in_use());
    assert_eq!(lb.flow_table_entries(), 0, "no flow tables before a VIP");
    let cmds = ::lb::cli::parse_lines(&vips(1)).expect("lines");
    lb.apply(&cmds).expect("a VIP without [lb]");
    assert!(lb.in_use() && lb.flow_table_entries() > 0);
    let routing = dp.view().routing.clone();
    let shown = |r: &Routing| r.node_route(ip("198.18.100.1"), 32).map(|r| r.node);
    assert_eq!(shown(&build::lock(&routing)), Some("lb"));
    run(&mut dp);
    assert_eq!(
        node_packets(&dp, "lb"),
        PACKETS,
        "the VIP's route took them"
    );
    assert_eq!(tx(&dp), PACKETS);
    // The VIP goes: its route too; the configured route of the prefix is back.
    let del = ::lb::cli::parse_lines(&format!(
        "lb vip 198.18.100.1/32 protocol udp port {PORT} del\n"
    ))
    .expect("line");
    let as_del = ::lb::cli::parse_lines(&format!(
        "lb as 198.18.100.1/32 protocol udp port {PORT} 198.18.2.10 del flush\n"
    ))
    .expect("line");
    lb.apply(&as_del).expect("server deleted");
    lb.apply(&del).expect("VIP deleted");
    let r = build::lock(&routing);
    assert_eq!(shown(&r), None);
    assert!(
        r.route(ip("198.18.100.1"), 32).is_some(),
        "configured route kept"
    );
    let readers = r.readers();
    let id = readers
        .fib4
        .lookup(u32::from(Ipv4Addr::new(198, 18, 100, 1)));
    assert!(
        matches!(
            readers.next_hops4[0].get().entry(id),
            nodes::adjacency::NextHop::Gateway(_)
        ),
        "the configured route forwards again"
    );
}

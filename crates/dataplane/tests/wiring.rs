//! The protocol graph as `dataplane::build` wires it, driven in-process through the fuzz
//! harness (an injector in place of ports): ARP and Neighbor Discovery from an empty table,
//! routes whose next hop is resolved on demand, and an L2 bridge. Each test checks the exact
//! frames that leave and the counters.

#[path = "../../../fuzz/src/harness.rs"]
mod harness;

use dataplane::{
    BridgeMemberSpec, BridgePortMode, BridgeSpec, DataplaneSpec, PortDriver, PortSpec, RouteSpec,
    RouteTarget,
};
use harness::Harness;
use packet::checksum;
use packet::headers::{build_udp_frame, UdpFrameSpec};
use std::net::{Ipv4Addr, Ipv6Addr};

/// p0's MAC in `harness::router_spec` (port id 0).
const P0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// p1's MAC.
const P1_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
/// A host on p0's subnet that is not a static neighbour.
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x77];
const SENDER_MAC: [u8; 6] = [2, 0, 0, 0, 1, 0x55];

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("IPv4")
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("IPv6")
}

fn udp(dst_mac: [u8; 6], src_mac: [u8; 6], src: &str, dst: &str) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac,
        src_mac,
        src_ip: src.parse().expect("ip"),
        dst_ip: dst.parse().expect("ip"),
        frame_size: 128,
        ..UdpFrameSpec::default()
    })
}

/// An ARP frame (request: op 1, reply: op 2).
fn arp(
    op: u16,
    eth_dst: [u8; 6],
    sender_mac: [u8; 6],
    sender: Ipv4Addr,
    target_mac: [u8; 6],
    target: Ipv4Addr,
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&eth_dst);
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sender_mac);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&target_mac);
    f.extend_from_slice(&target.octets());
    f.resize(60, 0);
    f
}

/// An ICMPv6 Neighbor Solicitation (135) or Advertisement (136) with one link-layer option.
fn nd(
    kind: u8,
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    flags: u8,
) -> Vec<u8> {
    let mut icmp = vec![kind, 0, 0, 0, flags, 0, 0, 0];
    icmp.extend_from_slice(&target.octets());
    icmp.extend_from_slice(&[if kind == 135 { 1 } else { 2 }, 1]);
    icmp.extend_from_slice(&eth_src);
    let pseudo = checksum::pseudo_header_v6(src.octets(), dst.octets(), 58, icmp.len() as u32);
    let c = !checksum::fold(checksum::sum(pseudo, &icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::new();
    f.extend_from_slice(&eth_dst);
    f.extend_from_slice(&eth_src);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&icmp);
    f
}

fn drop_count(h: &Harness, what: &str) -> u64 {
    h.drops()
        .iter()
        .find(|(k, _)| k == what)
        .map_or(0, |(_, v)| *v)
}

#[test]
fn arp_request_for_our_address_is_answered() {
    let mut h = Harness::router();
    let req = arp(
        1,
        [0xff; 6],
        HOST_MAC,
        v4("198.18.0.77"),
        [0; 6],
        v4("198.18.0.1"),
    );
    let (_, sent) = h.run(&[(0, &req)]);
    assert!(sent.is_empty(), "ARP is not forwarded");
    assert_eq!(h.neighbour_frames.len(), 1, "one ARP reply");
    let r = &h.neighbour_frames[0];
    assert_eq!(r.port, 0);
    let expected = arp(
        2,
        HOST_MAC,
        P0_MAC,
        v4("198.18.0.1"),
        HOST_MAC,
        v4("198.18.0.77"),
    );
    assert_eq!(&r.bytes[..42], &expected[..42], "the reply names p0's MAC");
    // A request for an address that is not ours is learned from, not answered.
    let other = arp(
        1,
        [0xff; 6],
        HOST_MAC,
        v4("198.18.0.77"),
        [0; 6],
        v4("198.18.0.99"),
    );
    h.run(&[(0, &other)]);
    assert_eq!(h.neighbour_frames.len(), 1);
}

#[test]
fn ipv4_host_is_resolved_from_an_empty_table_and_queued_packets_released() {
    let mut h = Harness::router();
    h.flush_after_run = false;
    let first = udp(P1_MAC, SENDER_MAC, "198.18.1.2", "198.18.0.77");
    let (_, sent) = h.run(&[(1, &first), (1, &first)]);
    assert!(sent.is_empty(), "nothing forwarded before the MAC is known");
    assert_eq!(h.held(), 2, "both packets wait for the neighbour");
    assert_eq!(
        h.neighbour_frames.len(),
        1,
        "one ARP request, not one per packet"
    );
    let req = &h.neighbour_frames[0];
    assert_eq!(req.port, 0);
    let expected = arp(
        1,
        [0xff; 6],
        P0_MAC,
        v4("198.18.0.1"),
        [0; 6],
        v4("198.18.0.77"),
    );
    assert_eq!(&req.bytes[..42], &expected[..42]);

    let reply = arp(
        2,
        P0_MAC,
        HOST_MAC,
        v4("198.18.0.77"),
        P0_MAC,
        v4("198.18.0.1"),
    );
    let (_, sent) = h.run(&[(0, &reply)]);
    assert_eq!(
        sent.len(),
        2,
        "the queued packets leave once the reply arrives"
    );
    for s in &sent {
        assert_eq!(s.port, 0);
        assert_eq!(&s.bytes[0..6], &HOST_MAC, "to the learned MAC");
        assert_eq!(&s.bytes[6..12], &P0_MAC);
        assert_eq!(s.bytes[22], 63, "TTL decremented once");
    }
    assert_eq!(h.held(), 0);
    // Later packets go straight through.
    let (_, sent) = h.run(&[(1, &first)]);
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].bytes[0..6], &HOST_MAC);
}

#[test]
fn ipv6_host_is_resolved_by_neighbor_discovery() {
    let mut h = Harness::router();
    h.flush_after_run = false;
    let pkt = udp(P1_MAC, SENDER_MAC, "2001:db8:1::2", "2001:db8::77");
    let (_, sent) = h.run(&[(1, &pkt)]);
    assert!(sent.is_empty());
    assert_eq!(h.neighbour_frames.len(), 1, "one Neighbor Solicitation");
    let ns = &h.neighbour_frames[0].bytes;
    assert_eq!(&ns[12..14], &[0x86, 0xdd]);
    assert_eq!(ns[54], 135);
    // To the solicited-node multicast group of the target, ff02::1:ff00:77.
    assert_eq!(&ns[0..6], &[0x33, 0x33, 0xff, 0, 0, 0x77]);
    assert_eq!(
        Ipv6Addr::from(<[u8; 16]>::try_from(&ns[62..78]).expect("target")),
        v6("2001:db8::77")
    );

    let na = nd(
        136,
        P0_MAC,
        HOST_MAC,
        v6("2001:db8::77"),
        v6("2001:db8::1"),
        v6("2001:db8::77"),
        0x60,
    );
    let (_, sent) = h.run(&[(0, &na)]);
    assert_eq!(sent.len(), 1, "the queued packet leaves");
    assert_eq!(&sent[0].bytes[0..6], &HOST_MAC);
    assert_eq!(sent[0].bytes[21], 63, "hop limit decremented once");
}

#[test]
fn neighbor_solicitation_for_our_address_is_answered() {
    let mut h = Harness::router();
    let ns = nd(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        HOST_MAC,
        v6("2001:db8::77"),
        v6("ff02::1:ff00:1"),
        v6("2001:db8::1"),
        0,
    );
    let (_, sent) = h.run(&[(0, &ns)]);
    assert!(sent.is_empty());
    assert_eq!(h.neighbour_frames.len(), 1, "one Neighbor Advertisement");
    let na = &h.neighbour_frames[0].bytes;
    assert_eq!(na[54], 136);
    assert_eq!(&na[0..6], &HOST_MAC);
    assert_eq!(&na[6..12], &P0_MAC);
    // A solicitation with a hop limit other than 255 is refused.
    let mut forwarded = ns.clone();
    forwarded[21] = 64;
    h.run(&[(0, &forwarded)]);
    assert_eq!(h.neighbour_frames.len(), 1);
    assert_eq!(drop_count(&h, "ip6-nd/bad-hop-limit"), 1, "{:?}", h.drops());
}

#[test]
fn unanswered_packets_are_counted_when_flushed() {
    let mut h = Harness::router();
    let pkt = udp(P1_MAC, SENDER_MAC, "198.18.1.2", "198.18.0.78");
    h.run(&[(1, &pkt)]);
    assert_eq!(
        drop_count(&h, "neighbour-tx/flushed-at-stop"),
        1,
        "{:?}",
        h.drops()
    );
    assert_eq!(drop_count(&h, "ip4-lookup/neighbour-unresolved"), 0);
}

#[test]
fn route_via_a_dynamic_next_hop_resolves_it() {
    let mut spec = harness::router_spec();
    spec.routes4.push(RouteSpec {
        prefix: v4("198.19.200.0"),
        len: 24,
        target: RouteTarget::Via(vec![v4("198.18.0.50")]),
    });
    let mut h = Harness::new(&spec, &harness::router_tx_ports());
    h.flush_after_run = false;
    let pkt = udp(P1_MAC, SENDER_MAC, "198.18.1.2", "198.19.200.9");
    let (_, sent) = h.run(&[(1, &pkt)]);
    assert!(sent.is_empty());
    assert_eq!(h.neighbour_frames.len(), 1);
    let req = &h.neighbour_frames[0].bytes;
    assert_eq!(
        &req[38..42],
        &v4("198.18.0.50").octets(),
        "asks for the next hop"
    );
    let gw_mac = [2, 0, 0, 0, 0, 0x50];
    let reply = arp(
        2,
        P0_MAC,
        gw_mac,
        v4("198.18.0.50"),
        P0_MAC,
        v4("198.18.0.1"),
    );
    let (_, sent) = h.run(&[(0, &reply)]);
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].bytes[0..6], &gw_mac, "sent to the gateway's MAC");
    assert_eq!(&sent[0].bytes[30..34], &v4("198.19.200.9").octets());
}

fn bridge_spec() -> DataplaneSpec {
    let port = |name: &str, last: u8| PortSpec {
        name: name.into(),
        mac: [2, 0, 0, 0, 9, last],
        mtu: 1500,
        ip4: Vec::new(),
        ip6: Vec::new(),
        driver: PortDriver::Pcap { rx: None, tx: None },
    };
    DataplaneSpec {
        buffers: 1024,
        ports: vec![port("b0", 0), port("b1", 1), port("b2", 2)],
        bridges: vec![BridgeSpec {
            name: "br0".into(),
            ports: (0..3)
                .map(|port| BridgeMemberSpec {
                    port,
                    mode: BridgePortMode::Access { pvid: 1 },
                })
                .collect(),
            flow: None,
        }],
        ..DataplaneSpec::default()
    }
}

/// `bridge_spec` in flow mode with `rules` (ports b0, b1, b2 are OpenFlow ports 1, 2, 3).
fn flow_bridge_spec(rules: Vec<flow::Rule>) -> DataplaneSpec {
    let mut spec = bridge_spec();
    spec.bridges[0].flow = Some(dataplane::FlowBridgeSpec {
        ports: (0..3)
            .map(|port| dataplane::FlowPortSpec {
                port,
                ofport: port as u16 + 1,
                emc: true,
                megaflow: true,
            })
            .collect(),
        rules,
        groups: Vec::new(),
        cache: dataplane::FlowCachePolicy::default(),
        frag: Default::default(),
    });
    spec
}

fn flow_rule(priority: u16, m: flow::Match, actions: Vec<flow::Action>) -> flow::Rule {
    flow::Rule {
        table: 0,
        priority,
        cookie: 0,
        m,
        actions,
        idle_timeout: 0,
        hard_timeout: 0,
    }
}

#[test]
fn a_flow_bridge_follows_its_rules_and_normal_learns_like_a_bridge() {
    let mut to_b2 = flow::Match::ANY;
    to_b2.set(flow::Field::EthType, 0x0800, 0xffff);
    to_b2.set(flow::Field::NwDst, 0xc612_0509, u32::MAX as u128);
    let spec = flow_bridge_spec(vec![
        flow_rule(
            100,
            to_b2,
            vec![flow::Action::Output(flow::PortRef::Number(3))],
        ),
        flow_rule(
            0,
            flow::Match::ANY,
            vec![flow::Action::Output(flow::PortRef::Normal)],
        ),
    ]);
    let mut h = Harness::new(&spec, &[true, true, true]);
    let a = [2, 0, 0, 0, 0xaa, 1];
    let b = [2, 0, 0, 0, 0xbb, 1];
    let to_nine = udp(b, a, "198.18.5.1", "198.18.5.9");
    let (_, sent) = h.run(&[(0, &to_nine), (0, &to_nine)]);
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|s| s.port == 2 && s.bytes == to_nine),
        "the rule sends to port 3"
    );
    // Anything else is `normal`: flooded while unknown, then learned.
    let a_to_b = udp(b, a, "198.18.5.1", "198.18.5.2");
    let (_, sent) = h.run(&[(0, &a_to_b)]);
    let mut ports: Vec<u16> = sent.iter().map(|s| s.port).collect();
    ports.sort();
    assert_eq!(ports, vec![1, 2]);
    let b_to_a = udp(a, b, "198.18.5.2", "198.18.5.1");
    let (_, sent) = h.run(&[(1, &b_to_a)]);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].port, 0);
}

#[test]
fn bridge_floods_unknown_then_forwards_learned_unicast() {
    let mut h = Harness::new(&bridge_spec(), &[true, true, true]);
    let a = [2, 0, 0, 0, 0xaa, 1];
    let b = [2, 0, 0, 0, 0xbb, 1];
    let a_to_b = udp(b, a, "198.18.5.1", "198.18.5.2");
    let (_, sent) = h.run(&[(0, &a_to_b)]);
    let mut ports: Vec<u16> = sent.iter().map(|s| s.port).collect();
    ports.sort();
    assert_eq!(
        ports,
        vec![1, 2],
        "unknown unicast floods to the other ports"
    );
    assert!(
        sent.iter().all(|s| s.bytes == a_to_b),
        "bridged frames are unchanged"
    );
    let b_to_a = udp(a, b, "198.18.5.2", "198.18.5.1");
    let (_, sent) = h.run(&[(1, &b_to_a)]);
    assert_eq!(sent.len(), 1, "a was learned on port 0");
    assert_eq!(sent[0].port, 0);
    let (_, sent) = h.run(&[(0, &a_to_b)]);
    assert_eq!(sent.len(), 1, "b was learned on port 1");
    assert_eq!(sent[0].port, 1);
    // A bridge port does not answer ARP for anyone: it floods it.
    let req = arp(1, [0xff; 6], a, v4("198.18.5.1"), [0; 6], v4("198.18.5.2"));
    let (_, sent) = h.run(&[(0, &req)]);
    assert_eq!(sent.len(), 2);
    assert!(h.neighbour_frames.is_empty());
}

#[test]
fn directed_broadcasts_are_dropped_not_resolved() {
    let mut h = Harness::router();
    for dst in ["198.18.0.255", "198.18.0.0"] {
        let pkt = udp(P1_MAC, SENDER_MAC, "198.18.1.2", dst);
        let (_, sent) = h.run(&[(1, &pkt)]);
        assert!(sent.is_empty(), "{dst} is not forwarded");
    }
    assert!(
        h.neighbour_frames.is_empty(),
        "no ARP for the subnet's broadcast or network address"
    );
    assert_eq!(
        drop_count(&h, "ip4-lookup/directed-broadcast"),
        2,
        "{:?}",
        h.drops()
    );
}

/// Found by cargo-fuzz: an ARP request received on a cross-connected port leaves with the `to`
/// port's MAC; it is forwarded traffic, not an ARP frame vecplane made.
#[test]
fn cross_connected_arp_is_forwarded_not_answered() {
    let mut h = Harness::router();
    let req = arp(
        1,
        [0xff; 6],
        [2, 0, 0, 0, 0, 0xaa],
        v4("198.18.0.2"),
        [0; 6],
        v4("198.18.0.9"),
    );
    let (_, sent) = h.run(&[(3, &req)]);
    assert_eq!(sent.len(), 1, "cross-connected to p1");
    assert_eq!(sent[0].port, 1);
    assert!(h.neighbour_frames.is_empty());
}

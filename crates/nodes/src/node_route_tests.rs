//! The generic ways a packet reaches a feature node: a FIB entry that names a graph node
//! (`NextHop::Node`, one of the lookup node's targets, its tag in `next_scratch`; a slot the
//! lookup was not given is dropped as `no-target`) and per-port input steering (`PortSteer`:
//! only the steered ports' packets of the steered family go to the node, `next_scratch` 0).

use crate::adjacency::{Adjacency, NextHop, NextHopTable};
use crate::drop::ErrorDrop;
use crate::ip4::{Ip4Input, Ip4Lookup, Ip4Options};
use crate::names;
use crate::steer::PortSteer;
use crate::testkit::{Inject, Queue, Seen, Sink};
use fib::Ip4Fib;
use graph::GraphBuilder;
use packet::headers::{build_udp_frame, UdpFrameSpec};
use packet::{BufferMeta, BufferPool, PoolConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const FEATURE: &str = "feature";

fn ip4(a: &str) -> u32 {
    u32::from(a.parse::<Ipv4Addr>().expect("v4"))
}

fn udp4(dst: &str) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        src_ip: IpAddr::V4("198.18.0.2".parse().expect("v4")),
        dst_ip: IpAddr::V4(dst.parse().expect("v4")),
        ..UdpFrameSpec::default()
    })
}

/// What `ethernet-input` leaves for `ip4-input`.
fn ethernet_like(meta: &mut BufferMeta, _: &[u8]) {
    meta.l3_offset = 14;
}

/// Run `frames` (receive port, bytes) through ip4-input and ip4-lookup (target `feature`);
/// what reached the feature and the rewrite, and the drops.
fn run(frames: Vec<(u16, Vec<u8>)>, steer: Arc<PortSteer>) -> (Vec<(String, BufferMeta)>, u64) {
    let mut nh = NextHopTable::new();
    let adj = nh.add_adjacency(Adjacency::new(
        1,
        1500,
        [2, 0, 0, 0, 9, 9],
        [2, 0, 0, 0, 0, 1],
    ));
    let via = nh.add_group(&[adj]);
    let to_feature = nh.add_entry(NextHop::Node { slot: 0, tag: 77 });
    let to_nowhere = nh.add_entry(NextHop::Node { slot: 1, tag: 78 });
    let fib = Ip4Fib::build(&[
        (ip4("198.19.0.0"), 16, via),
        (ip4("198.19.100.1"), 32, to_feature),
        (ip4("198.19.100.2"), 32, to_nowhere),
    ])
    .expect("fib");
    let queue: Queue = Arc::default();
    queue.lock().expect("lock").extend(frames);
    let seen: Seen = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        setup: ethernet_like,
        ..Inject::new(names::IP4_INPUT, queue.clone())
    }));
    b.add_node(Box::new(
        Ip4Input::new(Ip4Options::Forward).with_steer(FEATURE, steer),
    ));
    b.add_node(Box::new(
        Ip4Lookup::new(Arc::new(fib), live::fixed(nh)).with_targets(&[FEATURE]),
    ));
    for name in [FEATURE, names::IP4_REWRITE, names::IP4_ICMP_ERROR] {
        b.add_node(Box::new(Sink(name, seen.clone())));
    }
    b.add_node(Box::new(ErrorDrop::new()));
    let mut graph = b.build(0, 2_000_000_000).expect("graph");
    let mut pool = BufferPool::new(PoolConfig {
        buffers: 256,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    for _ in 0..10 {
        graph.run_once(&mut pool);
    }
    let no_target = graph
        .stats()
        .error_id(names::IP4_LOOKUP, "no-target")
        .map_or(0, |id| graph.stats().errors[id].get());
    let out = std::mem::take(&mut *seen.lock().expect("lock"))
        .into_iter()
        .map(|(n, m, _)| (n, m))
        .collect();
    (out, no_target)
}

#[test]
fn a_node_route_hands_the_packet_to_its_target_with_its_tag() {
    let (out, no_target) = run(
        vec![
            (0, udp4("198.19.100.1")),
            (0, udp4("198.19.7.7")),
            (0, udp4("198.19.100.2")),
        ],
        Arc::new(PortSteer::new(2)),
    );
    let to = |n: &str| out.iter().filter(|(s, _)| s == n).collect::<Vec<_>>();
    assert_eq!(to(FEATURE).len(), 1, "{out:?}");
    assert_eq!(to(FEATURE)[0].1.next_scratch, 77, "the route's tag");
    assert_eq!(
        to(names::IP4_REWRITE).len(),
        1,
        "the other address is routed"
    );
    assert_eq!(no_target, 1, "a slot the lookup was not given");
}

#[test]
fn steered_ports_hand_their_packets_to_the_node_and_the_others_do_not() {
    let steer = Arc::new(PortSteer::new(2));
    steer.set(&[false, true], &[]);
    let (out, _) = run(
        vec![(0, udp4("198.19.7.7")), (1, udp4("198.19.7.7"))],
        steer.clone(),
    );
    let to = |n: &str| out.iter().filter(|(s, _)| s == n).collect::<Vec<_>>();
    assert_eq!(to(FEATURE).len(), 1, "{out:?}");
    assert_eq!(to(FEATURE)[0].1.rx_port, 1);
    assert_eq!(to(FEATURE)[0].1.next_scratch, 0);
    assert_eq!(to(names::IP4_REWRITE).len(), 1);
    // Steering IPv6 only: IPv4 packets of port 1 go to the lookup again.
    steer.set(&[], &[true, true]);
    let (out, _) = run(vec![(1, udp4("198.19.7.7"))], steer);
    assert_eq!(out[0].0, names::IP4_REWRITE);
}

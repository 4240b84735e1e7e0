//! Crafted-packet tests of every node, run through a real graph: a source node injects frames on
//! chosen ports, capture nodes record what each port sends, and every buffer must come back.

use crate::adjacency::{Adjacency, NextHop, NextHopTable};
use crate::drop::ErrorDrop;
use crate::ethernet::{EthernetInput, PortL2, PortMode};
use crate::icmp::{Ip4IcmpError, Ip6IcmpError, RateLimiter};
use crate::ip4::{Ip4Input, Ip4Lookup, Ip4Options, Ip4Rewrite};
use crate::ip6::{Ip6Input, Ip6Lookup, Ip6Rewrite};
use crate::output::InterfaceOutput;
use crate::xconnect::{L2Xconnect, XconnectPeer};
use fib::{Ip4Fib, Ip6Fib};
use graph::{Dispatch, Graph, GraphBuilder, InputNode, Node, NodeContext};
use packet::checksum;
use packet::headers::{be16, build_udp_frame, UdpFrameSpec};
use packet::{BufferPool, PoolConfig};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 2];
const MAC2: [u8; 6] = [2, 0, 0, 0, 0, 3];
const MAC3: [u8; 6] = [2, 0, 0, 0, 0, 4];
const HOST0: [u8; 6] = [2, 0, 0, 0, 1, 2];
const HOST1: [u8; 6] = [2, 0, 0, 0, 2, 2];

pub(crate) type Captured = Arc<Mutex<Vec<(u16, Vec<u8>)>>>;

struct Inject {
    frames: VecDeque<(u16, Vec<u8>)>,
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        "inject"
    }
    fn next_nodes(&self) -> Vec<String> {
        vec!["ethernet-input".into()]
    }
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut n = 0;
        while n < out.len() {
            let Some((port, f)) = self.frames.pop_front() else {
                break;
            };
            let Some(b) = cx.pool.alloc() else { break };
            assert!(cx.pool.write_packet(b, &f));
            cx.pool.meta_mut(b).rx_port = port;
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }
    fn is_finished(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Records what reaches a port's transmit node (its `tx_port` checked) and frees it; shared
/// with the other nodes' graph tests.
pub(crate) struct Capture {
    pub(crate) name: String,
    pub(crate) port: u16,
    pub(crate) out: Captured,
    /// Every packet must carry `testkit::TEST_FEATURE_LINE` (any that carries a line must).
    pub(crate) feature_line: bool,
}

impl Node for Capture {
    fn name(&self) -> &str {
        &self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut out = self.out.lock().expect("lock");
        for &b in frame {
            assert_eq!(cx.pool.meta(b).tx_port, self.port);
            let has = crate::testkit::check_feature_line(cx.pool, b);
            assert!(has || !self.feature_line, "a packet lost its feature line");
            out.push((self.port, cx.pool.data(b).to_vec()));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

struct Router {
    graph: Graph,
    pool: BufferPool,
    out: Captured,
}

fn ip4(a: &str) -> u32 {
    u32::from(a.parse::<Ipv4Addr>().expect("v4"))
}
fn ip6(a: &str) -> u128 {
    u128::from(a.parse::<Ipv6Addr>().expect("v6"))
}

fn router(frames: Vec<(u16, Vec<u8>)>, options: Ip4Options, icmp_burst: u32) -> Router {
    // Port 0 and 1 route; port 2 is cross-connected to port 3.
    let mut nh4 = NextHopTable::new();
    let a_host1 = nh4.add_adjacency(Adjacency::new(1, 1500, HOST1, MAC1));
    let a_host0 = nh4.add_adjacency(Adjacency::new(0, 1500, HOST0, MAC0));
    let a_small = nh4.add_adjacency(Adjacency::new(1, 600, HOST1, MAC1));
    let h1 = nh4.add_group(&[a_host1]);
    let h0 = nh4.add_group(&[a_host0]);
    let ecmp = nh4.add_group(&[a_host1, a_host0]);
    let small = nh4.add_group(&[a_small]);
    let drop = nh4.add_entry(NextHop::Drop);
    let local = nh4.add_entry(NextHop::Local);
    let unresolved = nh4.add_entry(NextHop::Glean {
        port: 1,
        host_bits: 8,
    });
    let fib4 = Ip4Fib::build(&[
        (ip4("198.18.2.0"), 24, unresolved),
        (ip4("198.18.2.2"), 32, h1),
        (ip4("198.18.1.0"), 24, unresolved),
        (ip4("198.18.1.2"), 32, h0),
        (ip4("198.18.1.1"), 32, local),
        (ip4("198.19.0.0"), 16, ecmp),
        (ip4("198.19.99.0"), 24, drop),
        (ip4("198.18.50.0"), 24, small),
    ])
    .expect("fib4");
    let mut nh6 = NextHopTable::new();
    let b_host1 = nh6.add_adjacency(Adjacency::new(1, 1500, HOST1, MAC1));
    let b_host0 = nh6.add_adjacency(Adjacency::new(0, 1500, HOST0, MAC0));
    let b_small = nh6.add_adjacency(Adjacency::new(1, 1280, HOST1, MAC1));
    let g1 = nh6.add_group(&[b_host1]);
    let g0 = nh6.add_group(&[b_host0]);
    let gs = nh6.add_group(&[b_small]);
    let fib6 = Ip6Fib::build(&[
        (ip6("2001:db8:2::"), 64, g1),
        (ip6("2001:db8:1::"), 64, g0),
        (ip6("2001:db8:50::"), 48, gs),
    ])
    .expect("fib6");
    let out: Captured = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        frames: frames.into(),
    }));
    b.add_node(Box::new(EthernetInput::new(vec![
        PortL2 {
            mac: MAC0,
            mode: PortMode::L3,
        },
        PortL2 {
            mac: MAC1,
            mode: PortMode::L3,
        },
        PortL2 {
            mac: MAC2,
            mode: PortMode::Xconnect,
        },
        PortL2 {
            mac: MAC3,
            mode: PortMode::L3,
        },
    ])));
    b.add_node(Box::new(L2Xconnect::new(vec![
        None,
        None,
        Some(XconnectPeer {
            to: 3,
            src_mac: MAC3,
            dst_mac: Some(HOST1),
        }),
        None,
    ])));
    b.add_node(Box::new(Ip4Input::new(options)));
    b.add_node(Box::new(Ip4Lookup::new(
        Arc::new(fib4),
        live::fixed(nh4.clone()),
    )));
    b.add_node(Box::new(Ip4Rewrite::new(live::fixed(nh4))));
    let limiter = RateLimiter::new(1000, icmp_burst);
    b.add_node(Box::new(Ip4IcmpError::new(
        vec![
            Some("198.18.1.1".parse().expect("v4")),
            Some("198.18.2.1".parse().expect("v4")),
            None,
            None,
        ],
        limiter.clone(),
    )));
    b.add_node(Box::new(Ip6Input::new()));
    b.add_node(Box::new(Ip6Lookup::new(
        Arc::new(fib6),
        live::fixed(nh6.clone()),
    )));
    b.add_node(Box::new(Ip6Rewrite::new(live::fixed(nh6))));
    b.add_node(Box::new(Ip6IcmpError::new(
        vec![
            Some("2001:db8:1::1".parse().expect("v6")),
            Some("2001:db8:2::1".parse().expect("v6")),
            None,
            None,
        ],
        limiter,
    )));
    b.add_node(Box::new(InterfaceOutput::new(
        (0..4).map(|p| Some(format!("tx{p}"))).collect(),
    )));
    b.add_node(Box::new(ErrorDrop::new()));
    for p in 0..4u16 {
        b.add_node(Box::new(Capture {
            name: format!("tx{p}"),
            port: p,
            out: out.clone(),
            feature_line: false,
        }));
    }
    let pool = BufferPool::new(PoolConfig {
        buffers: 2048,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    Router {
        graph: b.build(0, 2_596_000_000).expect("graph"),
        pool,
        out,
    }
}

impl Router {
    fn run(&mut self) -> Vec<(u16, Vec<u8>)> {
        let mut rounds = 0;
        while !self.graph.is_finished() && rounds < 1000 {
            self.graph.run_once(&mut self.pool);
            rounds += 1;
        }
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        std::mem::take(&mut *self.out.lock().expect("lock"))
    }
    fn drops(&self, node: &str, reason: &str) -> u64 {
        let s = self.graph.stats();
        let id = s
            .error_id(node, reason)
            .unwrap_or_else(|| panic!("no reason {node}/{reason}"));
        s.errors[id].get()
    }
    fn total_drops(&self) -> u64 {
        self.graph.stats().total_drops()
    }
}

fn udp4(src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: MAC0,
        src_mac: HOST0,
        src_ip: IpAddr::V4(src.parse().expect("v4")),
        dst_ip: IpAddr::V4(dst.parse().expect("v4")),
        ttl,
        ..UdpFrameSpec::default()
    })
}

fn udp6(src: &str, dst: &str, hops: u8, size: usize) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: MAC0,
        src_mac: HOST0,
        src_ip: IpAddr::V6(src.parse().expect("v6")),
        dst_ip: IpAddr::V6(dst.parse().expect("v6")),
        ttl: hops,
        frame_size: size,
        ..UdpFrameSpec::default()
    })
}

/// Recompute an IPv4 header checksum from scratch.
fn ip4_header_ok(h: &[u8]) -> bool {
    checksum::checksum(&h[..((h[0] & 15) as usize) * 4]) == 0
}

fn run1(frame: Vec<u8>) -> (Router, Vec<(u16, Vec<u8>)>) {
    let mut r = router(vec![(0, frame)], Ip4Options::Forward, 100);
    let out = r.run();
    (r, out)
}

#[test]
fn ip4_forwarded_with_ttl_checksum_and_macs() {
    let input = udp4("198.18.1.2", "198.18.2.2", 64);
    let (r, out) = run1(input.clone());
    assert_eq!(r.total_drops(), 0);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 1);
    assert_eq!(&f[0..6], &HOST1);
    assert_eq!(&f[6..12], &MAC1);
    assert_eq!(f[14 + 8], 63);
    assert!(ip4_header_ok(&f[14..]));
    assert_eq!(
        &f[14 + 12..],
        &input[14 + 12..],
        "addresses and payload unchanged"
    );
}

#[test]
fn vlan_and_qinq_tags_are_removed_on_routing() {
    for tags in [1usize, 2] {
        let mut f = udp4("198.18.1.2", "198.18.2.2", 64);
        let mut tagged = f[..12].to_vec();
        if tags == 2 {
            tagged.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64]);
        }
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        tagged.extend_from_slice(&f[12..]);
        let (r, out) = run1(tagged);
        assert_eq!(r.total_drops(), 0);
        assert_eq!(out.len(), 1);
        f[14 + 8] = 63;
        assert_eq!(out[0].1.len(), f.len());
        assert_eq!(&out[0].1[12..14], &[0x08, 0x00]);
        assert!(ip4_header_ok(&out[0].1[14..]));
    }
}

#[test]
fn ethernet_errors_are_counted() {
    let good = udp4("198.18.1.2", "198.18.2.2", 64);
    let mut three_tags = good[..12].to_vec();
    for _ in 0..3 {
        three_tags.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    }
    three_tags.extend_from_slice(&good[12..]);
    let mut unknown = good.clone();
    unknown[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut other_host = good.clone();
    other_host[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    let cases = vec![
        (good[..10].to_vec(), "runt"),
        (good[..13].to_vec(), "runt"),
        (
            [&good[..12], &[0x81, 0x00, 0x00]].concat(),
            "vlan-truncated",
        ),
        (three_tags, "too-many-vlan-tags"),
        (unknown, "unknown-ethertype"),
        (arp, "arp-unsupported"),
        (other_host, "not-for-us"),
    ];
    for (frame, reason) in cases {
        let (r, out) = run1(frame);
        assert!(out.is_empty(), "{reason}: nothing is sent");
        assert_eq!(r.drops("ethernet-input", reason), 1, "{reason}");
    }
}

#[test]
fn unknown_port_is_dropped() {
    let mut r = router(
        vec![(9, udp4("198.18.1.2", "198.18.2.2", 64))],
        Ip4Options::Forward,
        100,
    );
    assert!(r.run().is_empty());
    assert_eq!(r.drops("ethernet-input", "unknown-port"), 1);
}

#[test]
fn ip4_header_errors_are_counted() {
    let good = udp4("198.18.1.2", "198.18.2.2", 64);
    let fix = |mut f: Vec<u8>| {
        f[24..26].fill(0);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    let mut v5 = good.clone();
    v5[14] = 0x55;
    let mut ihl4 = good.clone();
    ihl4[14] = 0x44;
    let mut long = good.clone();
    long[16..18].copy_from_slice(&2000u16.to_be_bytes());
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 0xff;
    let mut mcast_src = good.clone();
    mcast_src[26..30].copy_from_slice(&[224, 0, 0, 1]);
    let mut mcast_dst = good.clone();
    mcast_dst[30..34].copy_from_slice(&[239, 1, 1, 1]);
    let mut bcast_dst = good.clone();
    bcast_dst[30..34].copy_from_slice(&[255, 255, 255, 255]);
    let cases = vec![
        (good[..30].to_vec(), "too-short"),
        (fix(v5), "bad-version"),
        (fix(ihl4), "bad-ihl"),
        (fix(long), "bad-length"),
        (bad_sum, "bad-checksum"),
        (fix(mcast_src), "bad-source"),
        (fix(mcast_dst), "multicast-destination"),
        (fix(bcast_dst), "multicast-destination"),
    ];
    for (frame, reason) in cases {
        let (r, out) = run1(frame);
        assert!(out.is_empty(), "{reason}");
        assert_eq!(r.drops("ip4-input", reason), 1, "{reason}");
    }
}

fn with_options(f: &[u8]) -> Vec<u8> {
    // Insert 4 bytes of options (NOP NOP NOP EOL) and fix IHL, total length and checksum.
    let mut o = f[..34].to_vec();
    o.extend_from_slice(&[1, 1, 1, 0]);
    o.extend_from_slice(&f[34..]);
    o[14] = 0x46;
    let total = be16(&o, 16) + 4;
    o[16..18].copy_from_slice(&total.to_be_bytes());
    o[24..26].fill(0);
    let c = checksum::checksum(&o[14..38]);
    o[24..26].copy_from_slice(&c.to_be_bytes());
    o
}

#[test]
fn ip4_options_policy() {
    let f = with_options(&udp4("198.18.1.2", "198.18.2.2", 64));
    let mut r = router(vec![(0, f.clone())], Ip4Options::Forward, 100);
    let out = r.run();
    assert_eq!(out.len(), 1);
    assert!(ip4_header_ok(&out[0].1[14..]));
    let mut r = router(vec![(0, f)], Ip4Options::Drop, 100);
    assert!(r.run().is_empty());
    assert_eq!(r.drops("ip4-input", "options"), 1);
}

#[test]
fn ttl_one_and_zero_make_time_exceeded() {
    for ttl in [1u8, 0] {
        let input = udp4("198.18.1.2", "198.18.2.2", ttl);
        let (r, out) = run1(input.clone());
        assert_eq!(r.total_drops(), 0);
        assert_eq!(out.len(), 1, "ttl {ttl}");
        let (port, f) = &out[0];
        assert_eq!(*port, 0, "back towards the sender");
        assert_eq!(&f[0..6], &HOST0);
        let ip = &f[14..];
        assert!(ip4_header_ok(ip));
        assert_eq!(ip[9], 1, "ICMP");
        assert_eq!(ip[8], 64, "locally originated: TTL not decremented");
        assert_eq!(&ip[12..16], &[198, 18, 1, 1]);
        assert_eq!(&ip[16..20], &[198, 18, 1, 2]);
        let total = be16(ip, 2) as usize;
        assert_eq!(total, 28 + (input.len() - 14));
        let icmp = &ip[20..total];
        assert_eq!((icmp[0], icmp[1]), (11, 0));
        assert_eq!(checksum::checksum(icmp), 0);
        assert_eq!(&icmp[8..], &input[14..], "quotes the original packet");
    }
}

#[test]
fn icmp_errors_are_rate_limited() {
    let frames = (0..50)
        .map(|_| (0, udp4("198.18.1.2", "198.18.2.2", 1)))
        .collect();
    let mut r = router(frames, Ip4Options::Forward, 10);
    let out = r.run();
    let limited = r.drops("ip4-icmp-error", "rate-limited");
    assert_eq!(out.len() as u64 + limited, 50);
    assert!(
        out.len() >= 10 && out.len() < 50,
        "burst 10 lets about 10 through, got {}",
        out.len()
    );
}

#[test]
fn no_icmp_error_about_an_icmp_error() {
    let mut f = udp4("198.18.1.2", "198.18.2.2", 1);
    f[14 + 9] = 1;
    f[34] = 3; // destination unreachable
    f[24..26].fill(0);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let (r, out) = run1(f);
    assert!(out.is_empty());
    assert_eq!(r.drops("ip4-icmp-error", "not-allowed"), 1);
}

#[test]
fn lookup_outcomes_are_counted() {
    for (dst, reason) in [
        ("198.18.200.1", "no-route"),
        ("198.19.99.7", "blackhole"),
        ("198.18.1.1", "to-us"),
        ("198.18.2.77", "neighbour-unresolved"),
    ] {
        let (r, out) = run1(udp4("198.18.1.2", dst, 64));
        assert!(out.is_empty(), "{dst}");
        assert_eq!(r.drops("ip4-lookup", reason), 1, "{dst}");
    }
}

#[test]
fn ecmp_spreads_flows_and_keeps_each_flow_on_one_path() {
    let mut frames = Vec::new();
    for flow in 0..200u16 {
        for _ in 0..3 {
            let mut f = udp4("198.18.1.2", "198.19.4.4", 64);
            f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
            frames.push((0, f));
        }
    }
    let mut r = router(frames, Ip4Options::Forward, 100);
    let out = r.run();
    assert_eq!(out.len(), 600);
    let on_port1 = out.iter().filter(|(p, _)| *p == 1).count();
    assert!(
        on_port1 > 150 && on_port1 < 450,
        "spread: {on_port1} of 600 on port 1"
    );
    let mut by_flow = std::collections::HashMap::new();
    for (p, f) in &out {
        let sport = be16(f, 34);
        assert_eq!(
            *by_flow.entry(sport).or_insert(*p),
            *p,
            "flow {sport} changed path"
        );
    }
}

#[test]
fn mtu_exceeded_with_and_without_df() {
    let mk = |df: bool| {
        let mut f = build_udp_frame(&UdpFrameSpec {
            dst_mac: MAC0,
            src_mac: HOST0,
            src_ip: IpAddr::V4("198.18.1.2".parse().expect("v4")),
            dst_ip: IpAddr::V4("198.18.50.9".parse().expect("v4")),
            frame_size: 1000,
            ..UdpFrameSpec::default()
        });
        if df {
            f[20] = 0x40;
            f[24..26].fill(0);
            let c = checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
        f
    };
    let (r, out) = run1(mk(false));
    assert!(out.is_empty());
    assert_eq!(r.drops("ip4-rewrite", "mtu-exceeded"), 1);
    let (r, out) = run1(mk(true));
    assert_eq!(r.total_drops(), 0);
    assert_eq!(out.len(), 1);
    let ip = &out[0].1[14..];
    assert_eq!(out[0].0, 0);
    assert_eq!(
        be16(ip, 2) as usize,
        576,
        "ICMP errors are capped at 576 bytes"
    );
    let icmp = &ip[20..576];
    assert_eq!((icmp[0], icmp[1]), (3, 4));
    assert_eq!(be16(icmp, 6), 600, "next-hop MTU");
    assert_eq!(checksum::checksum(icmp), 0);
}

#[test]
fn fragments_pass_through() {
    let mut f = udp4("198.18.1.2", "198.18.2.2", 64);
    f[20..22].copy_from_slice(&(0x2000u16 | 185).to_be_bytes()); // MF, offset 1480
    f[24..26].fill(0);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let (r, out) = run1(f);
    assert_eq!(r.total_drops(), 0);
    assert_eq!(out.len(), 1);
    assert!(ip4_header_ok(&out[0].1[14..]));
}

fn icmp6_ok(ip: &[u8]) -> bool {
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&ip[8..24]);
    dst.copy_from_slice(&ip[24..40]);
    let len = be16(ip, 4) as u32;
    let pseudo = checksum::pseudo_header_v6(src, dst, 58, len);
    checksum::fold(checksum::sum(pseudo, &ip[40..40 + len as usize])) == 0xffff
}

#[test]
fn ip6_forwarded_with_hop_limit() {
    let input = udp6("2001:db8:1::2", "2001:db8:2::2", 64, 100);
    let (r, out) = run1(input.clone());
    assert_eq!(r.total_drops(), 0);
    assert_eq!(out.len(), 1);
    let (p, f) = &out[0];
    assert_eq!(*p, 1);
    assert_eq!(&f[0..12], &[HOST1, MAC1].concat()[..]);
    assert_eq!(f[14 + 7], 63);
    assert_eq!(&f[22..], &input[22..]);
}

#[test]
fn ip6_hop_limit_one_and_too_big_make_icmp6() {
    let input = udp6("2001:db8:1::2", "2001:db8:2::2", 1, 100);
    let (r, out) = run1(input.clone());
    assert_eq!(r.total_drops(), 0);
    let ip = &out[0].1[14..];
    assert_eq!(out[0].0, 0);
    assert_eq!((ip[6], ip[7]), (58, 64));
    assert_eq!((ip[40], ip[41]), (3, 0));
    assert!(icmp6_ok(ip));
    assert_eq!(&ip[48..], &input[14..]);

    let big = udp6("2001:db8:1::2", "2001:db8:50::9", 64, 1500);
    let (r, out) = run1(big);
    assert_eq!(r.total_drops(), 0);
    let ip = &out[0].1[14..];
    assert_eq!((ip[40], ip[41]), (2, 0));
    assert_eq!(u32::from_be_bytes([ip[44], ip[45], ip[46], ip[47]]), 1280);
    assert_eq!(
        be16(ip, 4) as usize + 40,
        1280,
        "ICMPv6 errors fill at most the minimum MTU"
    );
    assert!(icmp6_ok(ip));
}

#[test]
fn ip6_errors_are_counted() {
    let good = udp6("2001:db8:1::2", "2001:db8:2::2", 64, 100);
    let mut v4 = good.clone();
    v4[14] = 0x40;
    let mut long = good.clone();
    long[18..20].copy_from_slice(&3000u16.to_be_bytes());
    let cases = vec![
        (good[..50].to_vec(), "ip6-input", "too-short"),
        (v4, "ip6-input", "bad-version"),
        (long, "ip6-input", "bad-length"),
        (
            udp6("ff02::1", "2001:db8:2::2", 64, 100),
            "ip6-input",
            "multicast-source",
        ),
        (
            udp6("::", "2001:db8:2::2", 64, 100),
            "ip6-input",
            "unspecified-source",
        ),
        (
            udp6("::1", "2001:db8:2::2", 64, 100),
            "ip6-input",
            "loopback-address",
        ),
        (
            udp6("2001:db8:1::2", "::1", 64, 100),
            "ip6-input",
            "loopback-address",
        ),
        (
            udp6("::ffff:198.18.1.2", "2001:db8:2::2", 64, 100),
            "ip6-input",
            "v4-mapped-address",
        ),
        (
            udp6("2001:db8:1::2", "::ffff:198.18.2.2", 64, 100),
            "ip6-input",
            "v4-mapped-address",
        ),
        (
            udp6("2001:db8:1::2", "::", 64, 100),
            "ip6-input",
            "unspecified-destination",
        ),
        (
            udp6("2001:db8:1::2", "ff00::1", 64, 100),
            "ip6-input",
            "reserved-multicast-scope",
        ),
        (
            udp6("2001:db8:1::2", "ff01::1", 64, 100),
            "ip6-input",
            "interface-local-multicast",
        ),
        (
            udp6("2001:db8:1::2", "fe80::9", 64, 100),
            "ip6-input",
            "link-local",
        ),
        (
            udp6("2001:db8:1::2", "ff02::1", 64, 100),
            "ip6-input",
            "multicast-destination",
        ),
        (
            udp6("fe80::1", "2001:db8:2::2", 64, 100),
            "ip6-input",
            "link-local",
        ),
        (
            udp6("2001:db8:1::2", "2001:db8:99::1", 64, 100),
            "ip6-lookup",
            "no-route",
        ),
    ];
    for (frame, node, reason) in cases {
        let (r, out) = run1(frame);
        assert!(out.is_empty(), "{reason}");
        assert_eq!(r.drops(node, reason), 1, "{reason}");
    }
}

#[test]
fn xconnect_forwards_any_frame_with_mac_rewrite() {
    let mut odd = vec![0u8; 60];
    odd[12..14].copy_from_slice(&[0x88, 0xb5]);
    let mut r = router(
        vec![(2, odd.clone()), (2, udp4("198.18.1.2", "198.18.2.2", 1))],
        Ip4Options::Forward,
        100,
    );
    let out = r.run();
    assert_eq!(r.total_drops(), 0);
    assert_eq!(out.len(), 2);
    for (p, f) in &out {
        assert_eq!(*p, 3);
        assert_eq!(&f[0..6], &HOST1);
        assert_eq!(&f[6..12], &MAC3);
    }
    assert_eq!(&out[0].1[12..], &odd[12..]);
    assert_eq!(out[1].1[22], 1, "xconnect does not touch the TTL");
}

#[test]
fn many_packets_keep_rx_equal_tx_plus_drops() {
    let mut frames = Vec::new();
    for i in 0..2000u32 {
        let mut f = udp4("198.18.1.2", "198.18.2.2", (i % 5) as u8);
        if i % 7 == 0 {
            f[24] ^= 1;
        }
        frames.push(((i % 3) as u16, f));
    }
    let mut r = router(frames, Ip4Options::Forward, 1000);
    let out = r.run();
    assert_eq!(out.len() as u64 + r.total_drops(), 2000);
}

#[test]
fn unicast_ip_in_link_layer_broadcast_or_multicast_is_not_forwarded() {
    let mut v4 = udp4("198.18.1.2", "198.18.2.2", 64);
    v4[0..6].copy_from_slice(&[0xff; 6]);
    let mut v4m = udp4("198.18.1.2", "198.18.2.2", 64);
    v4m[0..6].copy_from_slice(&[0x01, 0x00, 0x5e, 0, 0, 1]);
    let mut v6 = udp6("2001:db8:1::2", "2001:db8:2::2", 64, 100);
    v6[0..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    let mut r = router(vec![(0, v4), (0, v4m), (0, v6)], Ip4Options::Forward, 100);
    assert!(r.run().is_empty());
    assert_eq!(r.drops("ip4-input", "l2-multicast"), 2);
    assert_eq!(r.drops("ip6-input", "l2-multicast"), 1);
}

#[test]
fn icmp_rate_changes_reach_running_limiters() {
    let rate = Arc::new(crate::icmp::IcmpRate::new(0, 1));
    let mut l = crate::icmp::RateLimiter::shared(rate.clone());
    let hz = 1_000_000;
    assert!(!l.take(1_000_000, hz), "0 a second: none");
    // 1,000 a second, 2 in a row: two now, then one per millisecond.
    rate.set(1000, 2);
    assert!(l.take(2_000_000, hz) && l.take(2_000_000, hz));
    assert!(!l.take(2_000_000, hz));
    assert!(l.take(2_001_000, hz));
    rate.set(0, 2);
    assert!(!l.take(3_000_000, hz));
}

#[test]
fn the_input_nodes_count_every_transport_problem_by_its_own_name() {
    use packet::transport_checks::TransportProblem;
    for p in TransportProblem::ALL {
        if p.applies_to_ip4() {
            assert!(
                crate::ip4::INPUT_ERRORS.contains(&p.name()),
                "ip4-input lacks {p:?}"
            );
        }
        assert!(
            crate::ip6::Ip6InputError::NAMES.contains(&p.name()),
            "ip6-input lacks {p:?}"
        );
    }
}

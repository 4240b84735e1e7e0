//! The malformed transport classes (`packet::transport_checks`) are dropped and counted the
//! same way on the routing path and on the load balancer's, whatever the VIP's encapsulation:
//! a pcap of crafted frames — a UDP length beyond the datagram, an ICMP message shorter than its
//! header, a fragment ending past 65,535, an IPv6 hop-by-hop header after another, extension
//! headers running past the packet, an IPv6 payload length 0 before a UDP header — is replayed
//! through the real graph to a routed destination and to VIPs of each encapsulation (L3DSR,
//! GRE4, GRE6, NAT4); nothing leaves, and `ip4-input` / `ip6-input` count each by its reason.
//! Well-formed twins of the same frames do leave, so the drops are the checks', not the setup's.

use dataplane::*;
use packet::checksum;
use ports::{PcapReader, PcapWriter};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::atomic::AtomicBool;

const PORT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
const SRC4: [u8; 4] = [198, 18, 0, 5];
const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5];
/// Where the frames go: a routed host, and one VIP per encapsulation.
const ROUTED4: [u8; 4] = [198, 18, 7, 7];
const VIPS4: [[u8; 4]; 3] = [[198, 18, 100, 1], [198, 18, 100, 2], [198, 18, 100, 3]];
const ROUTED6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
const VIP6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

const LB_LINES: &str = "lb conf ip4-src-address 198.18.0.1 ip6-src-address 2001:db8::1\n\
    lb vip 198.18.100.1/32 protocol udp port 53 encap l3dsr dscp 23\n\
    lb as 198.18.100.1/32 protocol udp port 53 198.18.0.20\n\
    lb vip 198.18.100.2/32 protocol udp port 53 encap gre4\n\
    lb as 198.18.100.2/32 protocol udp port 53 198.18.0.20\n\
    lb vip 198.18.100.3/32 protocol udp port 53 encap nat4 type clusterip target_port 5353\n\
    lb as 198.18.100.3/32 protocol udp port 53 198.18.0.20\n\
    lb vip 2001:db8:100::1/128 protocol udp port 53 encap gre6\n\
    lb as 2001:db8:100::1/128 protocol udp port 53 2001:db8::20\n";

fn udp(len_field: u16, payload: usize) -> Vec<u8> {
    let mut u = vec![0x30, 0x39, 0, 53];
    u.extend_from_slice(&len_field.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + payload, 0x5a);
    u
}

fn eth(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = PORT_MAC.to_vec();
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// An IPv4 frame to `dst`: protocol, fragment word, transport bytes.
fn v4(dst: [u8; 4], protocol: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, protocol, 0, 0];
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip.extend_from_slice(&SRC4);
    ip.extend_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(l4);
    eth(0x0800, &ip)
}

/// An IPv6 frame to `dst`: the first next header and the bytes after the fixed header (whose
/// payload length is their length, or `payload_len` when given).
fn v6(dst: [u8; 16], next: u8, rest: &[u8], payload_len: Option<u16>) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&payload_len.unwrap_or(rest.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[next, 64]);
    ip.extend_from_slice(&SRC6);
    ip.extend_from_slice(&dst);
    ip.extend_from_slice(rest);
    eth(0x86dd, &ip)
}

/// The malformed IPv4 frames to `dst`, each with its `ip4-input` reason.
fn bad4(dst: [u8; 4]) -> Vec<(Vec<u8>, &'static str)> {
    vec![
        (v4(dst, 17, 0, &udp(40, 10)), "bad-udp-length"),
        (v4(dst, 17, 0, &udp(5, 10)), "bad-udp-length"),
        (v4(dst, 1, 0, &[8, 0, 0, 0]), "icmp-too-short"),
        (v4(dst, 17, 8189, &[0; 40]), "fragment-too-long"),
    ]
}

/// The malformed IPv6 frames to `dst`, each with its `ip6-input` reason.
fn bad6(dst: [u8; 16]) -> Vec<(Vec<u8>, &'static str)> {
    let mut late_hbh = vec![0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    late_hbh.extend_from_slice(&udp(16, 8));
    let mut long_ext = vec![17, 6, 1, 4, 0, 0, 0, 0];
    long_ext.extend_from_slice(&udp(16, 8));
    let mut past = vec![17, 0];
    past.extend_from_slice(&((8191u16 << 3).to_be_bytes()));
    past.extend_from_slice(&[0, 0, 0, 1]);
    past.extend_from_slice(&[0; 16]);
    vec![
        (v6(dst, 17, &udp(40, 8), None), "bad-udp-length"),
        (v6(dst, 58, &[128, 0, 0, 0], None), "icmp-too-short"),
        (v6(dst, 60, &late_hbh, None), "hop-by-hop-not-first"),
        (v6(dst, 60, &long_ext, None), "bad-extension-headers"),
        (v6(dst, 44, &past, None), "fragment-too-long"),
        (v6(dst, 17, &udp(16, 8), Some(0)), "zero-payload-length"),
    ]
}

fn spec(rx: &Path, tx: &Path) -> DataplaneSpec {
    let cmds = ::lb::cli::parse_lines(LB_LINES).expect("lb lines parse");
    let state = ::lb::model::LbState::new()
        .apply(&cmds)
        .expect("lb lines apply");
    let mut spec = DataplaneSpec {
        buffers: 1024,
        ..DataplaneSpec::default()
    };
    spec.ports.push(PortSpec {
        name: "p".into(),
        mac: PORT_MAC,
        mtu: 1500,
        ip4: vec![(Ipv4Addr::new(198, 18, 0, 1), 24)],
        ip6: vec![("2001:db8::1".parse().expect("address"), 64)],
        driver: PortDriver::Pcap {
            rx: Some(rx.to_path_buf()),
            tx: Some(tx.to_path_buf()),
        },
    });
    let peer4: IpAddr = Ipv4Addr::new(198, 18, 0, 20).into();
    let peer6: IpAddr = "2001:db8::20".parse::<Ipv6Addr>().expect("address").into();
    for ip in [peer4, peer6] {
        spec.neighbours.push(NeighbourSpec {
            ip,
            mac: PEER_MAC,
            port: 0,
        });
    }
    spec.routes4.push(RouteSpec {
        prefix: Ipv4Addr::from(ROUTED4),
        len: 32,
        target: RouteTarget::Via(vec![Ipv4Addr::new(198, 18, 0, 20)]),
    });
    spec.routes6.push(RouteSpec {
        prefix: Ipv6Addr::from(ROUTED6),
        len: 128,
        target: RouteTarget::Via(vec!["2001:db8::20".parse().expect("address")]),
    });
    spec.lb = Some(LbSpec {
        state,
        ..LbSpec::default()
    });
    spec
}

/// Replay `frames`; the frames sent and each (node, reason) count.
fn replay(frames: &[Vec<u8>], tag: &str) -> (usize, Dataplane) {
    let dir = std::env::temp_dir().join(format!("vecplane-malformed-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let (rx, tx) = (dir.join("in.pcap"), dir.join("out.pcap"));
    {
        let mut w = PcapWriter::create(&rx).expect("input pcap");
        for (i, f) in frames.iter().enumerate() {
            w.write_record(i as u64 * 1000, f, f.len() as u32)
                .expect("write");
        }
    }
    let mut dp = Dataplane::new(&spec(&rx, &tx)).expect("data plane");
    dp.run_inline(&AtomicBool::new(false), None);
    let mut sent = 0;
    if let Ok(mut r) = PcapReader::open(&tx) {
        let mut buf = vec![0u8; 65536];
        while let Ok(Some(_)) = r.next_record(&mut buf) {
            sent += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    (sent, dp)
}

fn dropped(dp: &Dataplane, node: &str, reason: &str) -> u64 {
    dp.view()
        .workers
        .iter()
        .filter_map(|w| Some(w.graph.get().errors[w.graph.get().error_id(node, reason)?].get()))
        .sum()
}

#[test]
fn each_malformed_class_is_dropped_and_counted_on_the_routed_and_every_lb_path() {
    let mut frames = Vec::new();
    let mut want: Vec<(&str, &str, u64)> = Vec::new();
    let mut expect = |node: &'static str, list: Vec<(Vec<u8>, &'static str)>| {
        for (f, reason) in list {
            frames.push(f);
            match want.iter_mut().find(|(n, r, _)| *n == node && *r == reason) {
                Some(w) => w.2 += 1,
                None => want.push((node, reason, 1)),
            }
        }
    };
    for dst in std::iter::once(ROUTED4).chain(VIPS4) {
        expect("ip4-input", bad4(dst));
    }
    for dst in [ROUTED6, VIP6] {
        expect("ip6-input", bad6(dst));
    }
    let (sent, dp) = replay(&frames, "bad");
    assert_eq!(sent, 0, "no malformed frame leaves");
    for (node, reason, n) in want {
        assert_eq!(dropped(&dp, node, reason), n, "{node}/{reason}");
    }
}

#[test]
fn the_well_formed_twins_leave_on_every_path() {
    let mut frames = Vec::new();
    for dst in std::iter::once(ROUTED4).chain(VIPS4) {
        frames.push(v4(dst, 17, 0, &udp(18, 10)));
        frames.push(v4(dst, 17, 0, &udp(12, 10)));
    }
    for dst in [ROUTED6, VIP6] {
        frames.push(v6(dst, 17, &udp(16, 8), None));
        let mut hbh = vec![17, 0, 1, 4, 0, 0, 0, 0];
        hbh.extend_from_slice(&udp(16, 8));
        frames.push(v6(dst, 0, &hbh, None));
    }
    let n = frames.len();
    let (sent, dp) = replay(&frames, "good");
    let drops: u64 = dp
        .view()
        .workers
        .iter()
        .map(|w| w.graph.get().total_drops())
        .sum();
    assert_eq!((sent, drops), (n, 0), "every well-formed frame leaves");
}

//! vecplane's IPFIX export decoded by real collectors from Debian: `nfcapd`/`nfdump` receiving
//! on 127.0.0.1 and ::1, and `tshark` decoding what test sockets on both received. Packets of
//! IPv4 and IPv6 flows go through the real metering nodes in a graph (memory only); the
//! exporter sends to the four collectors; every decoder's per-flow packet and byte counts must
//! equal what the meter counted. Under `CI=true` a missing tool fails the test.

mod common;

use common::kit::{self, Inject, Queue, Seen, Sink};
use common::tools::{self, Counts, Nfcapd, TempDir};
use graph::arc::{ArcConfig, ArcsBuilder};
use graph::GraphBuilder;
use ipfix::{ArcBinding, IpfixConfig, IpfixFeature, IpfixHandle, Place, IPFIX_IP4, IPFIX_IP6};
use packet::{BufferPool, PoolConfig};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

/// The graph: inject4 -> ipfix-ip4 -> end4, inject6 -> ipfix-ip6 -> end6, and the timer.
struct Rig {
    graph: graph::Graph,
    pool: BufferPool,
    q4: Queue,
    q6: Queue,
}

fn binding(arcs: &graph::arc::Arcs, arc: &str, config: &ArcConfig) -> ArcBinding {
    let id = arcs.arc_id(arc).expect("arc");
    let pos = arcs.position(id, ipfix::FEATURE);
    ArcBinding {
        next_nodes: arcs.next_nodes(id, pos),
        cursor: arcs.cursor_at(id, pos, 0),
        config: live::fixed(config.clone()),
        place: Place::RxPort,
    }
}

fn rig(workers: &ipfix::IpfixWorkers) -> Rig {
    let mut b = ArcsBuilder::new();
    b.arc("ip4-unicast", "end4").arc("ip6-unicast", "end6");
    for d in ipfix::feature_decls()
        .into_iter()
        .filter(|d| d.arc != "output")
    {
        b.feature(d);
    }
    let arcs = b.build().expect("layout");
    let mut config = ArcConfig::new(&arcs, 1);
    config
        .enable(&arcs, "ip4-unicast", ipfix::FEATURE, 0)
        .expect("enable");
    config
        .enable(&arcs, "ip6-unicast", ipfix::FEATURE, 0)
        .expect("enable");
    let w = workers.worker().expect("memory");
    let (q4, q6): (Queue, Queue) = Default::default();
    let seen: Seen = Default::default();
    let mut g = GraphBuilder::new();
    g.add_input(Box::new(Inject::new(IPFIX_IP4, q4.clone(), 0)))
        .add_input(Box::new(Inject::new(IPFIX_IP6, q6.clone(), 0)))
        .add_input(w.timer())
        .add_node(w.ip4_node(binding(&arcs, "ip4-unicast", &config)))
        .add_node(w.ip6_node(binding(&arcs, "ip6-unicast", &config)))
        .add_node(Box::new(Sink {
            name: "end4".into(),
            seen: seen.clone(),
        }))
        .add_node(Box::new(Sink {
            name: "end6".into(),
            seen,
        }))
        .add_node(Box::new(nodes::drop::ErrorDrop::new()));
    Rig {
        graph: g.build(0, graph::measure_tsc_hz(20)).expect("graph"),
        pool: BufferPool::new(PoolConfig {
            buffers: 8192,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool"),
        q4,
        q6,
    }
}

/// Flows of both families with distinct packet counts and sizes, and what each should count:
/// (ip4 frames, ip6 frames, expected counts).
fn traffic() -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Counts) {
    let mut expect = Counts::new();
    let mut f4 = Vec::new();
    let mut f6 = Vec::new();
    let dst4 = Ipv4Addr::new(198, 19, 0, 1);
    for i in 0..20u16 {
        let src = Ipv4Addr::new(198, 18, 0, 1 + i as u8);
        for p in 0..(10 + 3 * i) {
            let payload = 18 + usize::from((p * 7 + i) % 200);
            f4.push(kit::udp4(src, dst4, 1024 + i, 53, payload));
            let e = expect
                .entry((src.into(), dst4.into(), 1024 + i, 53, 17))
                .or_default();
            e.0 += 1;
            e.1 += (28 + payload) as u64;
        }
    }
    let dst6: Ipv6Addr = "2001:db8:1::1".parse().expect("ip");
    for i in 0..12u16 {
        let src: Ipv6Addr = format!("2001:db8::{}", i + 1).parse().expect("ip");
        for p in 0..(5 + 4 * i) {
            let payload = usize::from((p * 13 + i) % 300);
            f6.push(kit::tcp6(src, dst6, 40000 + i, 443, 0x10, payload));
            let e = expect
                .entry((src.into(), dst6.into(), 40000 + i, 443, 6))
                .or_default();
            e.0 += 1;
            e.1 += (60 + payload) as u64;
        }
    }
    // Interleave the flows as traffic would.
    f4.sort_by_key(|f| (f.len() * 31) % 97);
    f6.sort_by_key(|f| (f.len() * 17) % 89);
    (f4, f6, expect)
}

/// Run `frames` through the graph, flush every flow and stop the exporter.
fn export(
    handle: IpfixHandle,
    rig: &mut Rig,
    f4: Vec<Vec<u8>>,
    f6: Vec<Vec<u8>>,
) -> ipfix::IpfixStats {
    rig.q4
        .lock()
        .expect("lock")
        .extend(f4.into_iter().map(|f| (0, f)));
    rig.q6
        .lock()
        .expect("lock")
        .extend(f6.into_iter().map(|f| (0, f)));
    let busy =
        |r: &Rig| !r.q4.lock().expect("lock").is_empty() || !r.q6.lock().expect("lock").is_empty();
    while busy(rig) {
        rig.graph.run_once(&mut rig.pool);
    }
    let g = handle.flush();
    while !handle.is_flushed(g) {
        rig.graph.run_once(&mut rig.pool);
    }
    handle.stop()
}

/// A test socket on `ip` and its address.
fn capture_socket(ip: IpAddr) -> (UdpSocket, SocketAddr) {
    let s = UdpSocket::bind(SocketAddr::new(ip, 0)).expect("bind on loopback (IPv6 loopback too)");
    let a = s.local_addr().expect("addr");
    (s, a)
}

/// What tshark decodes from what socket `s` received.
fn tshark_side(
    s: &UdpSocket,
    to: SocketAddr,
    dir: &TempDir,
    tag: &str,
) -> (Counts, serde_json::Value) {
    let msgs = tools::receive_all(s, Duration::from_millis(300));
    assert!(
        !msgs.is_empty(),
        "the {tag} test collector received nothing"
    );
    let from = SocketAddr::new(to.ip(), 40000);
    let pcap = dir.0.join(format!("{tag}.pcap"));
    tools::write_pcap(&pcap, from, to, &msgs);
    let json = tools::tshark_json(&pcap, to.port());
    if let Ok(keep) = std::env::var("IPFIX_TEST_KEEP") {
        // Debugging aid: keep what tshark decoded.
        let _ = std::fs::write(format!("{keep}/{tag}.json"), json.to_string());
        let _ = std::fs::copy(&pcap, format!("{keep}/{tag}.pcap"));
    }
    (tools::tshark_counts(&json), json)
}

fn config(collectors: Vec<SocketAddr>, sampling: u32) -> IpfixConfig {
    IpfixConfig {
        collectors,
        sampling,
        observation_domain: 42,
        flows_per_worker: 4096,
        ..IpfixConfig::default()
    }
}

#[test]
fn nfdump_and_tshark_count_what_the_meter_counted_ipv4_and_ipv6() {
    if !tools::tools_present("nfdump_and_tshark_count_what_the_meter_counted") {
        return;
    }
    let lo4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let nf4 = Nfcapd::start(lo4);
    let nf6 = Nfcapd::start(lo6);
    let (cap4, cap4_addr) = capture_socket(lo4);
    let (cap6, cap6_addr) = capture_socket(lo6);
    let (handle, workers) =
        IpfixFeature::new(config(vec![nf4.addr, nf6.addr, cap4_addr, cap6_addr], 1))
            .expect("valid");
    let mut r = rig(&workers);
    let (f4, f6, expect) = traffic();
    let sent = (f4.len() + f6.len()) as u64;
    let stats = export(handle, &mut r, f4, f6);

    // The meter counted every packet, into one record per flow, and lost none.
    assert_eq!(stats.workers[0].packets, sent);
    assert_eq!(stats.workers[0].records, expect.len() as u64);
    assert_eq!(stats.ring_drops(), 0);
    assert_eq!(stats.exporter.records, expect.len() as u64);
    assert_eq!(stats.exporter.send_errors, 0);

    let dir = TempDir::new("pcap");
    let (t4, json) = tshark_side(&cap4, cap4_addr, &dir, "v4");
    let (t6, _) = tshark_side(&cap6, cap6_addr, &dir, "v6");
    assert_eq!(t4, expect, "tshark, collector on 127.0.0.1");
    assert_eq!(t6, expect, "tshark, collector on ::1");
    // tshark agrees on the header: version 10 and the observation domain.
    let mut headers = Vec::new();
    tools::objects_with(&json, "cflow.od_id", &mut headers);
    assert!(!headers.is_empty());
    assert!(headers
        .iter()
        .all(|h| h.get("cflow.od_id").and_then(|v| v.as_str()) == Some("42")));

    assert_eq!(nf4.finish(), expect, "nfdump, nfcapd on 127.0.0.1");
    assert_eq!(nf6.finish(), expect, "nfdump, nfcapd on ::1");
}

#[test]
fn sampled_export_is_described_so_nfdump_scales_it() {
    if !tools::tools_present("sampled_export_is_described_so_nfdump_scales_it") {
        return;
    }
    let lo4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let nf4 = Nfcapd::start(lo4);
    let (cap4, cap4_addr) = capture_socket(lo4);
    let (handle, workers) =
        IpfixFeature::new(config(vec![nf4.addr, cap4_addr], 10)).expect("valid");
    let mut r = rig(&workers);
    let (f4, f6, _) = traffic();
    let sent = (f4.len() + f6.len()) as u64;
    let stats = export(handle, &mut r, f4, f6);
    let w = &stats.workers[0];
    assert_eq!(w.packets + w.skipped, sent);
    assert!(w.packets > 0 && w.packets <= sent / 10 + 2);

    let dir = TempDir::new("pcap-sampled");
    let (metered, json) = tshark_side(&cap4, cap4_addr, &dir, "sampled");
    assert_eq!(metered.values().map(|c| c.0).sum::<u64>(), w.packets);
    // The options record says: systematic count-based, 1 packet, then 9 passed over.
    let mut options = Vec::new();
    tools::objects_with(&json, "cflow.sampling_packet_interval", &mut options);
    assert!(
        !options.is_empty(),
        "tshark found the sampling options record"
    );
    // nfdump applies the announced rate: packets and bytes times 10.
    let scaled: Counts = metered
        .iter()
        .map(|(k, (p, b))| (*k, (p * 10, b * 10)))
        .collect();
    assert_eq!(nf4.finish(), scaled);
}

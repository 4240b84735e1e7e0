//! Tests of ARP, ND and on-demand resolution with crafted packets. Most drive the nodes directly
//! with a hand-made `NodeContext` so time is exact (1 tick = 1 ns); one runs a real graph. Every
//! test ends with every buffer back in the pool.

use super::*;
use crate::drop::ErrorDrop;
use graph::{Counter, GraphBuilder};
use packet::headers::{build_udp_frame, UdpFrameSpec};
use packet::PoolConfig;
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};

const HZ: u64 = 1_000_000_000;
const T0: u64 = 100 * HZ;
const MAC0: Mac = [2, 0, 0, 0, 0, 1];
const MAC1: Mac = [2, 0, 0, 0, 0, 2];
/// A host on port 0 (198.18.1.2, 2001:db8:1::2).
const CLIENT: Mac = [2, 0, 0, 0, 1, 2];
/// A host on port 1 (198.18.2.77, 2001:db8:2::277).
const HOST: Mac = [2, 0, 0, 0, 2, 0x77];
const HOST2: Mac = [2, 0, 0, 0, 2, 0x78];

const BASE_ARP: u16 = 1;
const BASE_R4: u16 = 20;
const BASE_ND: u16 = 40;
const BASE_R6: u16 = 60;

fn v4(a: &str) -> Ipv4Addr {
    a.parse().expect("v4")
}
fn v6(a: &str) -> Ipv6Addr {
    a.parse().expect("v6")
}

fn config() -> NeighbourConfig {
    NeighbourConfig {
        ports: vec![
            NeighbourPort {
                mac: MAC0,
                mtu: 1500,
                ip4: vec![(v4("198.18.1.1"), 24)],
                ip6: vec![(v6("2001:db8:1::1"), 64)],
            },
            NeighbourPort {
                mac: MAC1,
                mtu: 1400,
                ip4: vec![(v4("198.18.2.1"), 24)],
                ip6: vec![(v6("2001:db8:2::1"), 64)],
            },
        ],
        ..NeighbourConfig::default()
    }
}

fn pool(buffers: u32) -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool")
}

// ---------------------------------------------------------------------------------------------
// Frames

fn arp_frame(op: u16, eth_dst: Mac, sha: Mac, spa: &str, tha: Mac, tpa: &str) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&eth_dst);
    f[6..12].copy_from_slice(&sha);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, op as u8]);
    f[22..28].copy_from_slice(&sha);
    f[28..32].copy_from_slice(&v4(spa).octets());
    f[32..38].copy_from_slice(&tha);
    f[38..42].copy_from_slice(&v4(tpa).octets());
    f
}

/// An NS or NA frame; `option` is (type, MAC). The checksum is computed here, independently of
/// the code under test (only the RFC 1071 sum comes from `packet::checksum`).
#[allow(clippy::too_many_arguments)]
fn nd_frame(
    kind: u8,
    eth_dst: Mac,
    eth_src: Mac,
    src: &str,
    dst: &str,
    hop: u8,
    target: &str,
    flags: u8,
    option: Option<(u8, Mac)>,
) -> Vec<u8> {
    let payload = 24 + if option.is_some() { 8 } else { 0 };
    let mut f = vec![0u8; 14 + 40 + payload];
    f[0..6].copy_from_slice(&eth_dst);
    f[6..12].copy_from_slice(&eth_src);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let h = &mut f[14..];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    h[6] = 58;
    h[7] = hop;
    h[8..24].copy_from_slice(&v6(src).octets());
    h[24..40].copy_from_slice(&v6(dst).octets());
    let i = &mut h[40..];
    i[0] = kind;
    i[4] = flags;
    i[8..24].copy_from_slice(&v6(target).octets());
    if let Some((t, m)) = option {
        i[24] = t;
        i[25] = 1;
        i[26..32].copy_from_slice(&m);
    }
    let c = icmp6_checksum(&f[14..]);
    f[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
    f
}

/// The ICMPv6 checksum an IPv6 packet should carry (its checksum field taken as zero).
fn icmp6_checksum(ip: &[u8]) -> u16 {
    let len = u16::from_be_bytes([ip[4], ip[5]]) as usize;
    let mut body = ip[40..40 + len].to_vec();
    body[2] = 0;
    body[3] = 0;
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[8..40]);
    pseudo.extend_from_slice(&(len as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&body);
    checksum::checksum(&pseudo)
}

fn icmp6_ok(ip: &[u8]) -> bool {
    icmp6_checksum(ip) == u16::from_be_bytes([ip[42], ip[43]])
}

fn udp4_to(dst: &str) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: MAC0,
        src_mac: CLIENT,
        src_ip: IpAddr::V4(v4("198.18.1.2")),
        dst_ip: IpAddr::V4(v4(dst)),
        ..UdpFrameSpec::default()
    })
}

fn udp6_to(dst: &str) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: MAC0,
        src_mac: CLIENT,
        src_ip: IpAddr::V6(v6("2001:db8:1::2")),
        dst_ip: IpAddr::V6(v6(dst)),
        frame_size: 100,
        ..UdpFrameSpec::default()
    })
}

// ---------------------------------------------------------------------------------------------
// A bench that drives the nodes by hand

struct Bench {
    pool: BufferPool,
    n: NeighbourHandle,
    errors: Vec<Counter>,
    names: Vec<(String, String)>,
    arp: ArpInput,
    ip4_arp: Ip4Arp,
    nd: Ip6Nd,
    discover: Ip6Discover,
    tx: NeighbourTx,
    now: u64,
    /// What reached `interface-output`: (tx port, frame).
    sent: Vec<(u16, Vec<u8>)>,
    /// Released packets after the stand-in rewrite: (tx port, frame).
    routed: Vec<(u16, Vec<u8>)>,
}

fn call(
    node: &mut dyn Node,
    pool: &mut BufferPool,
    errors: &[Counter],
    names: &[(String, String)],
    base: u16,
    now: u64,
    frame: &[u32],
) -> (Dispatch, Vec<u16>) {
    let mut cx = NodeContext {
        pool,
        now_tsc: now,
        tsc_hz: HZ,
        worker: 0,
        error_base: base,
        errors,
        error_names: names,
    };
    let mut nexts = vec![u16::MAX; frame.len()];
    let d = node.process(&mut cx, frame, &mut nexts);
    (d, nexts)
}

impl Bench {
    fn new() -> Bench {
        Bench::with(config(), 512)
    }

    fn with(config: NeighbourConfig, buffers: u32) -> Bench {
        let n = NeighbourHandle::new(&config, HZ);
        let mut names = vec![("?".to_string(), "?".to_string()); 100];
        for (base, node, reasons) in [
            (BASE_ARP, ARP_INPUT, &ARP_ERRORS[..]),
            (BASE_R4, IP4_ARP, &RESOLVE_ERRORS[..]),
            (BASE_ND, IP6_ND, &ND_ERRORS[..]),
            (BASE_R6, IP6_DISCOVER, &RESOLVE_ERRORS[..]),
        ] {
            for (i, r) in reasons.iter().enumerate() {
                names[base as usize + i] = (node.to_string(), r.to_string());
            }
        }
        Bench {
            pool: pool(buffers),
            errors: (0..100).map(|_| Counter::default()).collect(),
            names,
            arp: ArpInput::new(n.clone()),
            ip4_arp: Ip4Arp::new(n.clone()),
            nd: Ip6Nd::new(n.clone()),
            discover: Ip6Discover::new(n.clone()),
            tx: NeighbourTx::new(n.clone()),
            n,
            now: T0,
            sent: Vec::new(),
            routed: Vec::new(),
        }
    }

    fn drops(&self, node: &str, reason: &str) -> u64 {
        let id = self
            .names
            .iter()
            .position(|(n, r)| n == node && r == reason)
            .unwrap_or_else(|| panic!("no reason {node}/{reason}"));
        self.errors[id].get()
    }

    fn total_drops(&self) -> u64 {
        self.errors.iter().map(Counter::get).sum()
    }

    fn buffer(&mut self, frame: &[u8], rx_port: u16) -> u32 {
        let b = self.pool.alloc().expect("buffer");
        assert!(self.pool.write_packet(b, frame));
        let m = self.pool.meta_mut(b);
        m.rx_port = rx_port;
        m.l3_offset = 14;
        b
    }

    /// Where a node sent `b`: the stand-ins of `interface-output`, the rewrites and `error-drop`.
    fn deliver(&mut self, next: u16, b: u32) {
        match next {
            NEXT_OUTPUT => {
                let port = self.pool.meta(b).tx_port;
                self.sent.push((port, self.pool.data(b).to_vec()));
            }
            NEXT_DROP => {
                let e = self.pool.meta(b).error as usize;
                self.errors[e].add(1);
            }
            NEXT_IP4_REWRITE | NEXT_IP6_REWRITE => {
                // What ip4-rewrite/ip6-rewrite will do with a neighbour adjacency id.
                let id = self.pool.meta(b).next_scratch;
                assert!(is_neighbour_adjacency(id), "released with id 0x{id:08x}");
                let now = self.now;
                let adj = self
                    .n
                    .with(|n| {
                        if next == NEXT_IP4_REWRITE {
                            n.adjacency4(id, now)
                        } else {
                            n.adjacency6(id, now)
                        }
                    })
                    .expect("released packets have a usable adjacency");
                let (m, d) = self.pool.packet_mut(b);
                d[..12].copy_from_slice(&adj.macs);
                m.tx_port = adj.port;
                self.routed.push((adj.port, d.to_vec()));
            }
            other => panic!("unknown next {other}"),
        }
        self.pool.free(b);
    }

    fn finish(&mut self, frame: &[u32], d: Dispatch, nexts: Vec<u16>) {
        match d {
            Dispatch::Consumed => {}
            Dispatch::AllTo(next) => frame.iter().for_each(|&b| self.deliver(next, b)),
            Dispatch::PerPacket => {
                for (&b, &next) in frame.iter().zip(&nexts) {
                    self.deliver(next, b);
                }
            }
        }
    }

    fn arp_in(&mut self, port: u16, frames: &[Vec<u8>]) {
        let bufs: Vec<u32> = frames.iter().map(|f| self.buffer(f, port)).collect();
        let (d, nexts) = call(
            &mut self.arp,
            &mut self.pool,
            &self.errors,
            &self.names,
            BASE_ARP,
            self.now,
            &bufs,
        );
        self.finish(&bufs, d, nexts);
    }

    fn nd_in(&mut self, port: u16, frames: &[Vec<u8>]) {
        let bufs: Vec<u32> = frames.iter().map(|f| self.buffer(f, port)).collect();
        let (d, nexts) = call(
            &mut self.nd,
            &mut self.pool,
            &self.errors,
            &self.names,
            BASE_ND,
            self.now,
            &bufs,
        );
        self.finish(&bufs, d, nexts);
    }

    /// Packets a lookup sends to `ip4-arp`/`ip6-discover`: `scratch` is GLEAN (with `tx_port`)
    /// or a neighbour adjacency id.
    fn resolve(&mut self, v6: bool, tx_port: u16, scratch: u32, frames: &[Vec<u8>]) {
        let bufs: Vec<u32> = frames
            .iter()
            .map(|f| {
                let b = self.buffer(f, 0);
                let m = self.pool.meta_mut(b);
                m.tx_port = tx_port;
                m.next_scratch = scratch;
                b
            })
            .collect();
        let (node, base): (&mut dyn Node, u16) = if v6 {
            (&mut self.discover, BASE_R6)
        } else {
            (&mut self.ip4_arp, BASE_R4)
        };
        let (d, nexts) = call(
            node,
            &mut self.pool,
            &self.errors,
            &self.names,
            base,
            self.now,
            &bufs,
        );
        assert_eq!(d, Dispatch::Consumed);
        self.finish(&bufs, d, nexts);
    }

    /// One poll of `neighbour-tx`.
    fn poll(&mut self) -> usize {
        let mut out = [0u32; 256];
        let mut nexts = [0u16; 256];
        let mut cx = NodeContext {
            pool: &mut self.pool,
            now_tsc: self.now,
            tsc_hz: HZ,
            worker: 0,
            error_base: 0,
            errors: &self.errors,
            error_names: &self.names,
        };
        let (k, d) = self.tx.poll(&mut cx, &mut out, &mut nexts);
        assert_eq!(d, Dispatch::PerPacket);
        for i in 0..k {
            self.deliver(nexts[i], out[i]);
        }
        k
    }

    /// Sweep every entry now (as the timer would over 64 ms), then send what it produced.
    fn sweep_all(&mut self) {
        let now = self.now;
        self.n.with(|n| n.sweep(&mut self.pool, now, MAX_CAPACITY));
        self.poll();
    }

    fn take_sent(&mut self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.sent)
    }

    fn take_routed(&mut self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.routed)
    }

    fn rows(&self) -> Vec<NeighbourRow> {
        let now = self.now;
        self.n.with(|n| n.rows(now))
    }

    fn row(&self, ip: &str) -> Option<NeighbourRow> {
        let ip: IpAddr = ip.parse().expect("ip");
        self.rows().into_iter().find(|r| r.ip == ip)
    }

    fn stats(&self) -> NeighbourStats {
        self.n.with(|n| n.stats())
    }

    fn lookup4(&self, port: u16, ip: &str) -> Option<u32> {
        let now = self.now;
        self.n.with(|n| n.lookup4(port, u32::from(v4(ip)), now))
    }

    /// Flush and check that every buffer is back.
    fn assert_no_leak(&mut self) {
        self.n.flush(&mut self.pool);
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// ARP

#[test]
fn arp_request_for_our_address_is_answered_byte_exact() {
    let mut t = Bench::new();
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    t.arp_in(0, &[req]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 0, "out of the receiving port");
    let expected = hex("020000000102 020000000001 0806
         0001 0800 06 04 0002 020000000001 c6120101 020000000102 c6120102
         000000000000000000000000000000000000");
    assert_eq!(sent[0].1, expected);
    assert_eq!(t.stats().arp_replies_sent, 1);
    // The requester is learned (stale: a request proves no reachability), usable at once.
    let row = t.row("198.18.1.2").expect("learned");
    assert_eq!(
        (row.port, row.mac, row.state),
        (0, Some(CLIENT), NeighbourState::Stale)
    );
    assert!(t.lookup4(0, "198.18.1.2").is_some());
    assert_eq!(t.total_drops(), 0);
    t.assert_no_leak();
}

#[test]
fn arp_reply_of_a_42_byte_request_is_padded_and_vlan_tag_kept() {
    let mut t = Bench::new();
    // A 42-byte request (kernels send them unpadded over veth) with an 802.1Q tag.
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    let mut tagged = req[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    tagged.extend_from_slice(&req[12..42]);
    let b = t.buffer(&tagged, 0);
    t.pool.meta_mut(b).l3_offset = 18;
    let (d, nexts) = call(
        &mut t.arp,
        &mut t.pool,
        &t.errors,
        &t.names,
        BASE_ARP,
        t.now,
        &[b],
    );
    t.finish(&[b], d, nexts);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let f = &sent[0].1;
    assert_eq!(f.len(), 60);
    assert_eq!(&f[12..18], &[0x81, 0x00, 0x00, 0x0a, 0x08, 0x06]);
    assert_eq!(&f[18 + 6..18 + 8], &[0, 2]);
    assert_eq!(&f[18 + 8..18 + 14], &MAC0);
    assert!(f[46..].iter().all(|&x| x == 0));
    t.assert_no_leak();
}

#[test]
fn arp_for_another_address_is_not_answered_nor_learned() {
    let mut t = Bench::new();
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.9");
    // Our port-1 address asked on port 0 is not ours there either.
    let other_port = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.2.1");
    t.arp_in(0, &[req, other_port]);
    assert!(t.take_sent().is_empty());
    assert_eq!(t.drops(ARP_INPUT, "not-for-us"), 2);
    assert!(t.rows().is_empty(), "a request not for us creates nothing");
    t.assert_no_leak();
}

#[test]
fn gratuitous_arp_updates_only_known_entries() {
    let mut t = Bench::new();
    let garp = |mac| arp_frame(1, [0xff; 6], mac, "198.18.1.2", [0; 6], "198.18.1.2");
    t.arp_in(0, &[garp(CLIENT)]);
    assert!(t.rows().is_empty());
    assert_eq!(t.drops(ARP_INPUT, "not-for-us"), 1);
    // Once known (from a request to us), a gratuitous ARP moves it to a new MAC.
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    t.arp_in(0, &[req]);
    t.take_sent();
    let moved = [2, 0, 0, 0, 1, 0x99];
    t.arp_in(0, &[garp(moved)]);
    assert_eq!(t.drops(ARP_INPUT, "learned"), 1);
    assert_eq!(t.row("198.18.1.2").expect("entry").mac, Some(moved));
    assert!(t.take_sent().is_empty());
    t.assert_no_leak();
}

#[test]
fn arp_reply_to_us_creates_a_reachable_entry() {
    let mut t = Bench::new();
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    assert_eq!(t.drops(ARP_INPUT, "learned"), 1);
    let row = t.row("198.18.2.77").expect("entry");
    assert_eq!(
        (row.port, row.mac, row.state),
        (1, Some(HOST), NeighbourState::Reachable)
    );
    let id = t.lookup4(1, "198.18.2.77").expect("usable");
    let adj = t.n.with(|n| n.adjacency4(id, T0)).expect("adjacency");
    assert_eq!(adj, Adjacency::new(1, 1400, HOST, MAC1));
    assert!(t.lookup4(0, "198.18.2.77").is_none(), "keyed by port");
    assert_eq!(t.stats().learned, 1);
    t.assert_no_leak();
}

#[test]
fn malformed_arp_is_dropped_and_counted() {
    let good = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    let with = |at: usize, bytes: &[u8]| {
        let mut f = good.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        f
    };
    let cases = vec![
        (good[..41].to_vec(), "malformed"),
        (good[..20].to_vec(), "malformed"),
        (with(14, &[0, 6]), "malformed"),       // hardware type 6
        (with(16, &[0x86, 0xdd]), "malformed"), // protocol IPv6
        (with(18, &[8]), "malformed"),          // hlen
        (with(19, &[16]), "malformed"),         // plen
        (with(20, &[0, 3]), "unsupported-op"),  // RARP request
        (with(22, &[0xff; 6]), "bad-sender"),   // broadcast sender MAC
        (with(22, &[1, 0, 0x5e, 0, 0, 1]), "bad-sender"),
        (with(28, &[198, 18, 1, 1]), "address-conflict"),
    ];
    for (frame, reason) in cases {
        let mut t = Bench::new();
        t.arp_in(0, &[frame]);
        assert!(t.take_sent().is_empty(), "{reason}");
        assert_eq!(t.drops(ARP_INPUT, reason), 1, "{reason}");
        assert!(t.rows().is_empty(), "{reason}: nothing learned");
        t.assert_no_leak();
    }
    let mut t = Bench::new();
    t.arp_in(7, &[good]);
    assert_eq!(t.drops(ARP_INPUT, "unknown-port"), 1);
    t.assert_no_leak();
}

#[test]
fn arp_probe_from_zero_is_answered_without_learning() {
    let mut t = Bench::new();
    let probe = arp_frame(1, [0xff; 6], CLIENT, "0.0.0.0", [0; 6], "198.18.1.1");
    t.arp_in(0, &[probe]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].1[32..42], &[2, 0, 0, 0, 1, 2, 0, 0, 0, 0]);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

// ---------------------------------------------------------------------------------------------
// ND

fn ns_for_us(hop: u8) -> Vec<u8> {
    nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1:ff00:1",
        hop,
        "2001:db8:1::1",
        0,
        Some((1, CLIENT)),
    )
}

#[test]
fn neighbor_solicitation_for_our_address_gets_an_advertisement() {
    let mut t = Bench::new();
    t.nd_in(0, &[ns_for_us(255)]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let (port, f) = &sent[0];
    assert_eq!(*port, 0);
    let expected = nd_frame(
        136,
        CLIENT,
        MAC0,
        "2001:db8:1::1",
        "2001:db8:1::2",
        255,
        "2001:db8:1::1",
        0xe0, // router, solicited, override
        Some((2, MAC0)),
    );
    assert_eq!(f, &expected);
    let ip = &f[14..];
    assert_eq!(ip[7], 255, "hop limit 255");
    assert_eq!((ip[40], ip[41]), (136, 0));
    assert_eq!(ip[44] & 0x60, 0x60, "S and O");
    assert_eq!(
        &ip[64..72],
        &[2, 1, 2, 0, 0, 0, 0, 1],
        "target link-layer option"
    );
    assert!(icmp6_ok(ip), "checksum");
    // The solicitor is learned from its source link-layer option (stale, RFC 4861 7.2.3).
    let row = t.row("2001:db8:1::2").expect("learned");
    assert_eq!((row.mac, row.state), (Some(CLIENT), NeighbourState::Stale));
    assert_eq!(t.stats().na_sent, 1);
    t.assert_no_leak();
}

#[test]
fn unicast_and_link_local_and_dad_solicitations() {
    let mut t = Bench::new();
    // Unicast NS (a reachability probe) without a source link-layer option: answered to the
    // frame's source MAC.
    let unicast = nd_frame(
        135,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        255,
        "2001:db8:1::1",
        0,
        None,
    );
    // For our EUI-64 link-local address, from a link-local source.
    let ll = NeighbourPort {
        mac: MAC0,
        mtu: 1500,
        ip4: vec![],
        ip6: vec![],
    }
    .link_local();
    assert_eq!(ll, v6("fe80::ff:fe00:1"));
    let ll_ns = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "fe80::2",
        "ff02::1:ff00:1",
        255,
        "fe80::ff:fe00:1",
        0,
        Some((1, CLIENT)),
    );
    // DAD probe for our address: from ::, answered to all nodes without S.
    let dad = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "::",
        "ff02::1:ff00:1",
        255,
        "2001:db8:1::1",
        0,
        None,
    );
    t.nd_in(0, &[unicast, ll_ns, dad]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 3);
    for (_, f) in &sent {
        assert!(icmp6_ok(&f[14..]));
        assert_eq!(f[14 + 7], 255);
    }
    assert_eq!(&sent[0].1[0..6], &CLIENT);
    assert_eq!(
        &sent[1].1[14 + 8..14 + 24],
        &ll.octets(),
        "answered from the target"
    );
    assert_eq!(&sent[2].1[0..6], &[0x33, 0x33, 0, 0, 0, 1]);
    assert_eq!(&sent[2].1[14 + 24..14 + 40], &v6("ff02::1").octets());
    assert_eq!(
        sent[2].1[14 + 44],
        0xa0,
        "router and override, not solicited"
    );
    t.assert_no_leak();
}

#[test]
fn nd_with_hop_limit_below_255_is_dropped() {
    let mut t = Bench::new();
    let na = nd_frame(
        136,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        64,
        "2001:db8:1::2",
        0x60,
        Some((2, CLIENT)),
    );
    t.nd_in(0, &[ns_for_us(64), ns_for_us(254), na]);
    assert!(t.take_sent().is_empty());
    assert_eq!(t.drops(IP6_ND, "bad-hop-limit"), 3);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

#[test]
fn bad_nd_is_dropped_and_counted() {
    let good = ns_for_us(255);
    let mut bad_sum = good.clone();
    bad_sum[14 + 42] ^= 1;
    let fix = |mut f: Vec<u8>| {
        let c = icmp6_checksum(&f[14..]);
        f[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
        f
    };
    let mut code = good.clone();
    code[14 + 41] = 1;
    let code = fix(code);
    let mut zero_opt = good.clone();
    zero_opt[14 + 65] = 0;
    let zero_opt = fix(zero_opt);
    let not_ours = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 9],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1:ff00:9",
        255,
        "2001:db8:1::9",
        0,
        Some((1, CLIENT)),
    );
    let wrong_group = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 9],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1:ff00:9",
        255,
        "2001:db8:1::1",
        0,
        Some((1, CLIENT)),
    );
    let dad_with_slla = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0, 1],
        CLIENT,
        "::",
        "ff02::1:ff00:1",
        255,
        "2001:db8:1::1",
        0,
        Some((1, CLIENT)),
    );
    let mcast_target = nd_frame(
        135,
        MAC0,
        CLIENT,
        "2001:db8:1::2",
        "2001:db8:1::1",
        255,
        "ff02::1",
        0,
        None,
    );
    let solicited_to_group = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        CLIENT,
        "2001:db8:1::2",
        "ff02::1",
        255,
        "2001:db8:1::2",
        0x40,
        Some((2, CLIENT)),
    );
    let na_claims_ours = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        CLIENT,
        "2001:db8:1::1",
        "ff02::1",
        255,
        "2001:db8:1::1",
        0x20,
        Some((2, CLIENT)),
    );
    let mut router_solicit = nd_frame(
        133,
        [0x33, 0x33, 0, 0, 0, 2],
        CLIENT,
        "fe80::2",
        "ff02::2",
        255,
        "::",
        0,
        None,
    );
    let c = icmp6_checksum(&router_solicit[14..]);
    router_solicit[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
    let cases = vec![
        (good[..14 + 40 + 20].to_vec(), "malformed"),
        (bad_sum, "bad-checksum"),
        (code, "malformed"),
        (zero_opt, "malformed"),
        (not_ours, "not-for-us"),
        (wrong_group, "not-for-us"),
        (dad_with_slla, "malformed"),
        (mcast_target, "malformed"),
        (solicited_to_group, "malformed"),
        (na_claims_ours, "address-conflict"),
        (router_solicit, "unsupported-type"),
    ];
    for (i, (frame, reason)) in cases.into_iter().enumerate() {
        let mut t = Bench::new();
        t.nd_in(0, &[frame]);
        assert!(t.take_sent().is_empty(), "case {i}: {reason}");
        assert_eq!(t.drops(IP6_ND, reason), 1, "case {i}: {reason}");
        assert!(t.rows().is_empty(), "{reason}: nothing learned");
        t.assert_no_leak();
    }
}

#[test]
fn unsolicited_advertisement_creates_nothing() {
    let mut t = Bench::new();
    let na = nd_frame(
        136,
        [0x33, 0x33, 0, 0, 0, 1],
        HOST,
        "2001:db8:2::277",
        "ff02::1",
        255,
        "2001:db8:2::277",
        0x20,
        Some((2, HOST)),
    );
    t.nd_in(1, &[na]);
    assert_eq!(t.drops(IP6_ND, "unsolicited"), 1);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

// ---------------------------------------------------------------------------------------------
// Resolution on demand

#[test]
fn unresolved_ip4_packet_is_queued_requested_and_released() {
    let mut t = Bench::new();
    let data = udp4_to("198.18.2.77");
    t.resolve(false, 1, GLEAN, std::slice::from_ref(&data));
    assert_eq!(t.total_drops(), 0);
    assert!(
        t.take_sent().is_empty(),
        "nothing leaves before neighbour-tx runs"
    );
    assert_eq!(t.poll(), 1);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let expected = hex("ffffffffffff 020000000002 0806
         0001 0800 06 04 0001 020000000002 c6120201 000000000000 c612024d
         000000000000000000000000000000000000");
    assert_eq!(
        sent[0],
        (1, expected),
        "broadcast ARP request out of port 1"
    );
    let row = t.row("198.18.2.77").expect("incomplete entry");
    assert_eq!(
        (row.state, row.queued, row.mac),
        (NeighbourState::Incomplete, 1, None)
    );
    assert_eq!(t.stats().arp_requests_sent, 1);

    // The answer releases the packet to ip4-rewrite with the learned MAC.
    t.now += HZ / 1000;
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    assert!(t.take_routed().is_empty(), "released through the outbox");
    assert_eq!(t.poll(), 1);
    let routed = t.take_routed();
    assert_eq!(routed.len(), 1);
    let (port, f) = &routed[0];
    assert_eq!(*port, 1);
    assert_eq!(&f[0..6], &HOST);
    assert_eq!(&f[6..12], &MAC1);
    assert_eq!(&f[12..], &data[12..], "IP packet untouched by resolution");
    let row = t.row("198.18.2.77").expect("entry");
    assert_eq!((row.state, row.queued), (NeighbourState::Reachable, 0));
    let s = t.stats();
    assert_eq!((s.queued, s.released, s.learned), (1, 1, 1));
    // Later packets resolve in the lookup.
    assert!(t.lookup4(1, "198.18.2.77").is_some());
    t.assert_no_leak();
}

#[test]
fn unresolved_ip6_packet_sends_ns_and_is_released_by_na() {
    let mut t = Bench::new();
    let data = udp6_to("2001:db8:2::277");
    t.resolve(true, 1, GLEAN, &[data.clone(), data.clone()]);
    assert_eq!(t.poll(), 1, "one solicitation for two packets");
    let sent = t.take_sent();
    let expected = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0x02, 0x77],
        MAC1,
        "2001:db8:2::1",
        "ff02::1:ff00:277",
        255,
        "2001:db8:2::277",
        0,
        Some((1, MAC1)),
    );
    assert_eq!(sent, vec![(1, expected.clone())]);
    assert!(icmp6_ok(&sent[0].1[14..]));
    assert_eq!(t.stats().ns_sent, 1);

    let na = nd_frame(
        136,
        MAC1,
        HOST,
        "2001:db8:2::277",
        "2001:db8:2::1",
        255,
        "2001:db8:2::277",
        0x60,
        Some((2, HOST)),
    );
    t.nd_in(1, &[na]);
    assert_eq!(t.drops(IP6_ND, "learned"), 1);
    assert_eq!(t.poll(), 2);
    let routed = t.take_routed();
    assert_eq!(routed.len(), 2);
    for (port, f) in &routed {
        assert_eq!(*port, 1);
        assert_eq!(&f[0..12], &[HOST, MAC1].concat()[..]);
        assert_eq!(&f[12..], &data[12..]);
    }
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!(
        (row.state, row.mac),
        (NeighbourState::Reachable, Some(HOST))
    );
    t.assert_no_leak();
}

#[test]
fn na_without_override_does_not_replace_a_known_mac() {
    let mut t = Bench::new();
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::277")]);
    t.poll();
    let na = |mac: Mac, flags: u8| {
        nd_frame(
            136,
            MAC1,
            mac,
            "2001:db8:2::277",
            "2001:db8:2::1",
            255,
            "2001:db8:2::277",
            flags,
            Some((2, mac)),
        )
    };
    t.nd_in(1, &[na(HOST, 0x60)]);
    t.poll();
    t.nd_in(1, &[na(HOST2, 0x40)]);
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!((row.mac, row.state), (Some(HOST), NeighbourState::Stale));
    t.nd_in(1, &[na(HOST2, 0x60)]);
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!(
        (row.mac, row.state),
        (Some(HOST2), NeighbourState::Reachable)
    );
    t.assert_no_leak();
}

#[test]
fn queue_limits_per_neighbour_and_in_total() {
    let mut t = Bench::with(
        NeighbourConfig {
            queue_total: 10,
            ..config()
        },
        512,
    );
    let six: Vec<Vec<u8>> = (0..6).map(|_| udp4_to("198.18.2.77")).collect();
    t.resolve(false, 1, GLEAN, &six);
    assert_eq!(t.drops(IP4_ARP, "queue-full"), 2, "4 per neighbour");
    for host in ["198.18.2.78", "198.18.2.79"] {
        let four: Vec<Vec<u8>> = (0..4).map(|_| udp4_to(host)).collect();
        t.resolve(false, 1, GLEAN, &four);
    }
    assert_eq!(t.drops(IP4_ARP, "queue-full"), 4, "10 in all");
    assert_eq!(t.n.with(|n| n.queued()), 10);
    assert_eq!(t.stats().queue_drops, 4);
    assert_eq!(t.poll(), 3, "one request per neighbour");
    t.assert_no_leak();
}

#[test]
fn requests_are_rate_limited_per_neighbour() {
    let mut t = Bench::new();
    let p = || vec![udp4_to("198.18.2.77")];
    t.resolve(false, 1, GLEAN, &p());
    t.now += HZ / 2;
    t.resolve(false, 1, GLEAN, &p());
    t.poll();
    assert_eq!(t.take_sent().len(), 1, "one request in the first second");
    t.now += HZ / 2;
    t.resolve(false, 1, GLEAN, &p());
    t.poll();
    assert_eq!(t.take_sent().len(), 1, "a second one after a second");
    assert_eq!(t.stats().arp_requests_sent, 2);
    // The sweep retransmits while packets wait, once a second.
    t.now += HZ / 2;
    t.sweep_all();
    assert!(t.take_sent().is_empty());
    t.now += HZ / 2;
    t.sweep_all();
    assert_eq!(t.take_sent().len(), 1);
    t.assert_no_leak();
}

#[test]
fn global_request_rate_is_bounded() {
    let mut t = Bench::with(
        NeighbourConfig {
            requests_per_second: 20,
            ..config()
        },
        512,
    );
    let many: Vec<Vec<u8>> = (10..60)
        .map(|i| udp4_to(&format!("198.18.2.{i}")))
        .collect();
    t.resolve(false, 1, GLEAN, &many);
    t.poll();
    // A burst of a tenth of the rate (2 tokens) passes; the rest waits for tokens (the packets
    // stay queued, and the sweep retries).
    assert_eq!(t.take_sent().len(), 2);
    assert!(t.stats().requests_rate_limited >= 48);
    t.now += HZ / 10;
    t.sweep_all();
    assert_eq!(t.take_sent().len(), 2, "20 a second");
    t.assert_no_leak();
}

#[test]
fn unanswered_resolution_gives_up_and_frees_the_queue() {
    let mut t = Bench::with(config(), 64);
    let four: Vec<Vec<u8>> = (0..4).map(|_| udp4_to("198.18.2.77")).collect();
    t.resolve(false, 1, GLEAN, &four);
    t.poll();
    assert_eq!(t.pool.available(), 60);
    t.now += 3 * HZ;
    t.sweep_all();
    assert!(t.rows().is_empty(), "deleted after incomplete_seconds");
    assert_eq!(
        t.pool.available(),
        64,
        "queued buffers freed with the entry"
    );
    let s = t.stats();
    assert_eq!((s.resolution_failures, s.queue_drops), (1, 4));
    t.assert_no_leak();
}

#[test]
fn empty_pool_counts_the_request_and_still_queues() {
    let mut t = Bench::with(config(), 1);
    t.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.stats().request_alloc_failures, 1);
    assert_eq!(t.n.with(|n| n.queued()), 1);
    assert_eq!(t.poll(), 0);
    t.assert_no_leak();
}

#[test]
fn no_source_address_and_stale_adjacency_are_dropped() {
    let mut cfg = config();
    cfg.ports[1].ip4.clear();
    let mut t = Bench::with(cfg, 64);
    t.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.drops(IP4_ARP, "no-source-address"), 1);
    t.resolve(false, 9, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.drops(IP4_ARP, "unknown-port"), 1);
    t.resolve(false, 0, NEIGHBOUR_ADJACENCY | 5, &[udp4_to("198.18.1.5")]);
    assert_eq!(t.drops(IP4_ARP, "stale-adjacency"), 1);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

#[test]
fn flush_frees_every_queued_buffer() {
    let mut t = Bench::new();
    for host in ["198.18.2.77", "198.18.2.78"] {
        let three: Vec<Vec<u8>> = (0..3).map(|_| udp4_to(host)).collect();
        t.resolve(false, 1, GLEAN, &three);
    }
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::9")]);
    // Requests still in the outbox, packets in the queue.
    assert_eq!(t.pool.available(), t.pool.capacity() - 10);
    let freed = t.n.flush(&mut t.pool);
    assert_eq!(freed, 10);
    assert_eq!(t.pool.available(), t.pool.capacity());
}

// ---------------------------------------------------------------------------------------------
// Aging

fn learn_host(t: &mut Bench) {
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
}

#[test]
fn entries_go_stale_then_are_deleted_after_gc_seconds() {
    let mut t = Bench::new();
    learn_host(&mut t);
    let id = t.lookup4(1, "198.18.2.77").expect("reachable");
    t.now = T0 + 29 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Reachable
    );
    t.now = T0 + 30 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Stale
    );
    assert!(
        t.take_sent().is_empty(),
        "unused stale entries are not probed"
    );
    t.now = T0 + 299 * HZ;
    assert_eq!(
        t.n.with(|n| n.adjacency4(id, T0 + 299 * HZ))
            .map(|a| a.port),
        Some(1)
    );
    t.now = T0 + 300 * HZ;
    assert!(t.lookup4(1, "198.18.2.77").is_none(), "lazily expired");
    t.sweep_all();
    assert!(t.rows().is_empty());
    assert_eq!(t.stats().aged, 1);
    assert!(
        t.n.with(|n| n.adjacency4(id, T0 + 300 * HZ)).is_none(),
        "old id dead"
    );
    t.assert_no_leak();
}

#[test]
fn stale_entries_in_use_are_probed_and_deleted_when_silent() {
    let mut t = Bench::new();
    learn_host(&mut t);
    t.now = T0 + 31 * HZ;
    assert!(t.lookup4(1, "198.18.2.77").is_some(), "stale is usable");
    t.sweep_all();
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].1[0..6], &HOST, "a unicast probe");
    assert_eq!(&sent[0].1[20..22], &[0, 1]);
    assert_eq!(t.stats().probes_sent, 1);
    // An answer confirms it again.
    learn_host(&mut t);
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Reachable
    );
    // Silent: three probes a second apart, then deleted.
    t.now += 31 * HZ;
    for _ in 0..3 {
        assert!(t.lookup4(1, "198.18.2.77").is_some());
        t.sweep_all();
        assert_eq!(t.take_sent().len(), 1);
        t.now += HZ + 1;
    }
    t.sweep_all();
    assert!(t.rows().is_empty());
    assert!(t.lookup4(1, "198.18.2.77").is_none());
    assert_eq!(t.stats().aged, 1);
    t.assert_no_leak();
}

#[test]
fn pinned_next_hops_are_resolved_and_never_deleted() {
    let mut t = Bench::new();
    let id = t.n.with(|n| n.pin4(1, v4("198.18.2.254"))).expect("pinned");
    assert!(is_neighbour_adjacency(id));
    assert!(t.n.with(|n| n.adjacency4(id, T0)).is_none(), "incomplete");
    // ip4-rewrite sends the packet to ip4-arp with the id it had.
    t.resolve(false, 1, id, &[udp4_to("198.19.0.1")]);
    t.poll();
    let sent = t.take_sent();
    assert_eq!(
        &sent[0].1[38..42],
        &[198, 18, 2, 254],
        "asks for the next hop"
    );
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.254", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    t.poll();
    assert_eq!(t.take_routed().len(), 1);
    t.now += 400 * HZ;
    t.sweep_all();
    let row = t.row("198.18.2.254").expect("kept");
    assert!(row.pinned);
    assert_eq!(row.state, NeighbourState::Incomplete);
    assert_eq!(
        t.n.with(|n| n.pin4(1, v4("198.18.2.254"))),
        Some(id),
        "same id"
    );
    t.assert_no_leak();
}

#[test]
fn snapshot_is_published_for_show_neighbours() {
    let mut t = Bench::new();
    let view = t.n.view();
    learn_host(&mut t);
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::9")]);
    t.now += 2 * HZ;
    t.poll();
    let s = view.lock().expect("view").clone();
    assert_eq!(s.taken_tsc, t.now);
    assert_eq!(s.rows.len(), 2);
    let v4row = s.rows.iter().find(|r| r.ip.is_ipv4()).expect("v4");
    assert_eq!(
        (v4row.port, v4row.mac, v4row.state, v4row.age_ms),
        (1, Some(HOST), NeighbourState::Reachable, 2000)
    );
    assert_eq!(
        v4row.to_string(),
        "port 1 198.18.2.77 02:00:00:00:02:77 reachable age 2.000s"
    );
    let v6row = s.rows.iter().find(|r| r.ip.is_ipv6()).expect("v6");
    assert_eq!((v6row.state, v6row.queued), (NeighbourState::Incomplete, 1));
    assert_eq!(
        s.stats.ns_sent, 2,
        "the solicitation and one retry a second later"
    );
    // Not again within the second.
    t.now += HZ / 2;
    t.poll();
    assert_eq!(view.lock().expect("view").taken_tsc, t.now - HZ / 2);
    t.assert_no_leak();
}

#[test]
fn news_from_another_worker_releases_queued_packets() {
    let mut w0 = Bench::new();
    let mut w1 = Bench::new();
    NeighbourHandle::connect(&[w0.n.clone(), w1.n.clone()]);
    w0.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    w0.poll();
    assert_eq!(w0.take_sent().len(), 1);
    // The reply lands on worker 1.
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    w1.arp_in(1, &[reply]);
    w1.now += HZ / 100;
    w1.poll(); // sends the news
    w0.now += HZ / 100;
    w0.poll(); // merges it: the packet goes to rewrite through the outbox
    w0.poll();
    let routed = w0.take_routed();
    assert_eq!(routed.len(), 1);
    assert_eq!(&routed[0].1[0..6], &HOST);
    assert_eq!(w0.stats().news_merged, 1);
    w0.assert_no_leak();
    w1.assert_no_leak();
}

// ---------------------------------------------------------------------------------------------
// The table itself

proptest! {
    #[test]
    fn table_matches_a_map_through_inserts_and_deletes(ops in proptest::collection::vec((any::<bool>(), 0u16..3, 0u32..40), 1..400)) {
        let mut t: Table<u32> = Table::new(16);
        let mut model: HashMap<(u16, u32), u16> = HashMap::new();
        let adj = Adjacency::new(0, 1500, [0; 6], [0; 6]);
        for (insert, port, ip) in ops {
            let found = t.find(port, ip);
            prop_assert_eq!(found, model.get(&(port, ip)).copied());
            match (insert, found) {
                (true, None) => {
                    let r = t.insert(port, ip, adj, 1);
                    if model.len() < 16 {
                        let s = r.expect("room");
                        model.insert((port, ip), s);
                    } else {
                        prop_assert!(r.is_none());
                    }
                }
                (false, Some(s)) => {
                    let old = t.id(s);
                    t.remove(s);
                    model.remove(&(port, ip));
                    prop_assert!(t.slot_of(old).is_none());
                }
                _ => {}
            }
            prop_assert_eq!(t.len(), model.len());
            for (&(p, a), &s) in &model {
                prop_assert_eq!(t.find(p, a), Some(s));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// In a real graph

type Shared<T> = Arc<Mutex<T>>;

struct Inject {
    frames: Shared<VecDeque<(u16, u16, Vec<u8>)>>,
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        "inject"
    }
    fn next_nodes(&self) -> Vec<String> {
        [ARP_INPUT, IP6_ND, IP4_ARP].map(String::from).to_vec()
    }
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut q = self.frames.lock().expect("lock");
        let mut n = 0;
        while let Some((port, next, f)) = q.pop_front() {
            let b = cx.pool.alloc().expect("buffer");
            cx.pool.write_packet(b, &f);
            let m = cx.pool.meta_mut(b);
            m.rx_port = 0;
            m.l3_offset = 14;
            if next == 2 {
                // As ip4-lookup sends a packet to a connected host without an entry.
                m.tx_port = port;
                m.next_scratch = GLEAN;
            } else {
                m.rx_port = port;
            }
            out[n] = b;
            nexts[n] = next;
            n += 1;
        }
        (n, Dispatch::PerPacket)
    }
    fn is_finished(&self) -> bool {
        self.frames.lock().expect("lock").is_empty()
    }
}

/// Stands in for `interface-output`: records (tx port, frame).
struct Wire(Shared<Vec<(u16, Vec<u8>)>>);

impl Node for Wire {
    fn name(&self) -> &str {
        names::INTERFACE_OUTPUT
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![]
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        let mut w = self.0.lock().expect("lock");
        for &b in frame {
            w.push((cx.pool.meta(b).tx_port, cx.pool.data(b).to_vec()));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

/// Stands in for `ip4-rewrite`/`ip6-rewrite` with the neighbour part the lead adds: a neighbour
/// adjacency id becomes the entry's MACs, or goes to the resolution node.
struct Rewrite {
    name: &'static str,
    neighbours: NeighbourHandle,
}

impl Node for Rewrite {
    fn name(&self) -> &str {
        self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        let resolve = if self.name == names::IP4_REWRITE {
            IP4_ARP
        } else {
            IP6_DISCOVER
        };
        [names::INTERFACE_OUTPUT, resolve]
            .map(String::from)
            .to_vec()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let v4 = self.name == names::IP4_REWRITE;
        let now = cx.now_tsc;
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                let (m, d) = cx.pool.packet_mut(b);
                let id = m.next_scratch;
                let adj = if v4 {
                    n.adjacency4(id, now)
                } else {
                    n.adjacency6(id, now)
                };
                nexts[i] = match adj {
                    Some(a) => {
                        d[..12].copy_from_slice(&a.macs);
                        m.tx_port = a.port;
                        0
                    }
                    None => 1,
                };
            }
        });
        Dispatch::PerPacket
    }
}

#[test]
fn in_a_graph_arp_is_answered_and_a_packet_is_resolved_and_forwarded() {
    let n = NeighbourHandle::new(&config(), 2_596_000_000);
    let frames: Shared<VecDeque<(u16, u16, Vec<u8>)>> = Arc::default();
    let wire: Shared<Vec<(u16, Vec<u8>)>> = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        frames: frames.clone(),
    }));
    let (nodes, tx) = n.nodes();
    for node in nodes {
        b.add_node(node);
    }
    b.add_input(tx);
    b.add_node(Box::new(Wire(wire.clone())));
    b.add_node(Box::new(ErrorDrop::new()));
    for name in [names::IP4_REWRITE, names::IP6_REWRITE] {
        b.add_node(Box::new(Rewrite {
            name,
            neighbours: n.clone(),
        }));
    }
    let mut g = b.build(0, 2_596_000_000).expect("graph");
    let mut pool = pool(256);
    let run = |g: &mut graph::Graph, pool: &mut BufferPool| {
        for _ in 0..100 {
            if g.is_finished() {
                break;
            }
            g.run_once(pool);
        }
    };

    let data = udp4_to("198.18.2.77");
    {
        let mut q = frames.lock().expect("lock");
        q.push_back((
            0,
            0,
            arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1"),
        ));
        q.push_back((0, 1, ns_for_us(255)));
        q.push_back((1, 2, data.clone()));
    }
    run(&mut g, &mut pool);
    let out = std::mem::take(&mut *wire.lock().expect("lock"));
    assert_eq!(out.len(), 3, "ARP reply, NA, ARP request");
    let arp_reply = out.iter().find(|(_, f)| f[12..14] == [8, 6] && f[21] == 2);
    assert_eq!(arp_reply.map(|o| o.0), Some(0));
    let na = out.iter().find(|(_, f)| f[12..14] == [0x86, 0xdd]);
    assert_eq!(na.map(|(p, f)| (*p, f[14 + 40])), Some((0, 136)));
    let request = out.iter().find(|(_, f)| f[0..6] == [0xff; 6]);
    assert_eq!(request.map(|(p, f)| (*p, f[21])), Some((1, 1)));

    frames.lock().expect("lock").push_back((
        1,
        0,
        arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1"),
    ));
    run(&mut g, &mut pool);
    let out = std::mem::take(&mut *wire.lock().expect("lock"));
    assert_eq!(out.len(), 1, "the queued packet");
    assert_eq!(out[0].0, 1);
    assert_eq!(&out[0].1[0..12], &[HOST, MAC1].concat()[..]);
    assert_eq!(&out[0].1[12..], &data[12..]);
    let s = g.stats();
    let learned = s.error_id(ARP_INPUT, "learned").expect("reason");
    assert_eq!(s.errors[learned].get(), 1);
    assert_eq!(s.total_drops(), 1, "only the consumed reply");
    n.flush(&mut pool);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn timers_changed_live_apply_at_the_next_maintenance() {
    let mut t = Bench::new();
    let timers = Arc::new(NeighbourTimers::new(30, 300));
    t.n.with(|n| n.set_timers(timers.clone()));
    learn_host(&mut t);
    // Reachable for 5 s from now on, deleted 60 s after the last confirmation.
    timers.set(5, 60);
    t.now = T0 + 2 * HZ;
    let now = t.now;
    t.n.with(|n| n.maintain(&mut t.pool, now));
    t.now = T0 + 6 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Stale
    );
    t.now = T0 + 61 * HZ;
    t.sweep_all();
    assert!(t.rows().is_empty(), "deleted after the new gc time");
    assert_eq!(t.stats().aged, 1);
    t.assert_no_leak();
}

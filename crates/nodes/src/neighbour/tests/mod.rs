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

mod aging;
mod arp;
mod nd;
mod resolution;
mod runtime_ports;
mod table;

pub(super) const HZ: u64 = 1_000_000_000;
pub(super) const T0: u64 = 100 * HZ;
pub(super) const MAC0: Mac = [2, 0, 0, 0, 0, 1];
pub(super) const MAC1: Mac = [2, 0, 0, 0, 0, 2];
/// A host on port 0 (198.18.1.2, 2001:db8:1::2).
pub(super) const CLIENT: Mac = [2, 0, 0, 0, 1, 2];
/// A host on port 1 (198.18.2.77, 2001:db8:2::277).
pub(super) const HOST: Mac = [2, 0, 0, 0, 2, 0x77];
pub(super) const HOST2: Mac = [2, 0, 0, 0, 2, 0x78];

pub(super) const BASE_ARP: u16 = 1;
pub(super) const BASE_R4: u16 = 20;
pub(super) const BASE_ND: u16 = 40;
pub(super) const BASE_R6: u16 = 60;
pub(super) const BASE_TX: u16 = 80;

pub(super) fn v4(a: &str) -> Ipv4Addr {
    a.parse().expect("v4")
}
pub(super) fn v6(a: &str) -> Ipv6Addr {
    a.parse().expect("v6")
}

pub(super) fn config() -> NeighbourConfig {
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

pub(super) fn pool(buffers: u32) -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool")
}

// ---------------------------------------------------------------------------------------------
// Frames

pub(super) fn arp_frame(
    op: u16,
    eth_dst: Mac,
    sha: Mac,
    spa: &str,
    tha: Mac,
    tpa: &str,
) -> Vec<u8> {
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
pub(super) fn nd_frame(
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
pub(super) fn icmp6_checksum(ip: &[u8]) -> u16 {
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

pub(super) fn icmp6_ok(ip: &[u8]) -> bool {
    icmp6_checksum(ip) == u16::from_be_bytes([ip[42], ip[43]])
}

pub(super) fn udp4_to(dst: &str) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: MAC0,
        src_mac: CLIENT,
        src_ip: IpAddr::V4(v4("198.18.1.2")),
        dst_ip: IpAddr::V4(v4(dst)),
        ..UdpFrameSpec::default()
    })
}

pub(super) fn udp6_to(dst: &str) -> Vec<u8> {
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

pub(super) struct Bench {
    pub(super) pool: BufferPool,
    pub(super) n: NeighbourHandle,
    pub(super) errors: Vec<Counter>,
    pub(super) names: Vec<(String, String)>,
    pub(super) arp: ArpInput,
    pub(super) ip4_arp: Ip4Arp,
    pub(super) nd: Ip6Nd,
    pub(super) discover: Ip6Discover,
    pub(super) tx: NeighbourTx,
    pub(super) now: u64,
    /// What reached `interface-output`: (tx port, frame).
    pub(super) sent: Vec<(u16, Vec<u8>)>,
    /// Released packets after the stand-in rewrite: (tx port, frame).
    pub(super) routed: Vec<(u16, Vec<u8>)>,
}

pub(super) fn call(
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
    pub(super) fn new() -> Bench {
        Bench::with(config(), 512)
    }

    pub(super) fn with(config: NeighbourConfig, buffers: u32) -> Bench {
        let n = NeighbourHandle::new(&config, HZ);
        let mut names = vec![("?".to_string(), "?".to_string()); 100];
        for (base, node, reasons) in [
            (BASE_ARP, ARP_INPUT, ARP_ERRORS),
            (BASE_R4, IP4_ARP, RESOLVE_ERRORS),
            (BASE_ND, IP6_ND, ND_ERRORS),
            (BASE_R6, IP6_DISCOVER, RESOLVE_ERRORS),
            (BASE_TX, NEIGHBOUR_TX, TX_ERRORS),
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

    pub(super) fn drops(&self, node: &str, reason: &str) -> u64 {
        let id = self
            .names
            .iter()
            .position(|(n, r)| n == node && r == reason)
            .unwrap_or_else(|| panic!("no reason {node}/{reason}"));
        self.errors[id].get()
    }

    pub(super) fn total_drops(&self) -> u64 {
        self.errors.iter().map(Counter::get).sum()
    }

    pub(super) fn buffer(&mut self, frame: &[u8], rx_port: u16) -> u32 {
        let b = self.pool.alloc().expect("buffer");
        assert!(self.pool.write_packet(b, frame));
        let m = self.pool.meta_mut(b);
        m.rx_port = rx_port;
        m.l3_offset = 14;
        b
    }

    /// Where a node sent `b`: the stand-ins of `interface-output`, the rewrites and `error-drop`.
    pub(super) fn deliver(&mut self, next: u16, b: u32) {
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

    pub(super) fn finish(&mut self, frame: &[u32], d: Dispatch, nexts: Vec<u16>) {
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

    pub(super) fn arp_in(&mut self, port: u16, frames: &[Vec<u8>]) {
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

    pub(super) fn nd_in(&mut self, port: u16, frames: &[Vec<u8>]) {
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
    pub(super) fn resolve(&mut self, v6: bool, tx_port: u16, scratch: u32, frames: &[Vec<u8>]) {
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
    pub(super) fn poll(&mut self) -> usize {
        let mut out = [0u32; 256];
        let mut nexts = [0u16; 256];
        let mut cx = NodeContext {
            pool: &mut self.pool,
            now_tsc: self.now,
            tsc_hz: HZ,
            worker: 0,
            error_base: BASE_TX,
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
    pub(super) fn sweep_all(&mut self) {
        let now = self.now;
        self.n.with(|n| n.sweep(&mut self.pool, now, MAX_CAPACITY));
        self.poll();
    }

    pub(super) fn take_sent(&mut self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.sent)
    }

    pub(super) fn take_routed(&mut self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.routed)
    }

    pub(super) fn rows(&self) -> Vec<NeighbourRow> {
        let now = self.now;
        self.n.with(|n| n.rows(now))
    }

    pub(super) fn row(&self, ip: &str) -> Option<NeighbourRow> {
        let ip: IpAddr = ip.parse().expect("ip");
        self.rows().into_iter().find(|r| r.ip == ip)
    }

    pub(super) fn stats(&self) -> NeighbourStats {
        self.n.with(|n| n.stats())
    }

    pub(super) fn lookup4(&self, port: u16, ip: &str) -> Option<u32> {
        let now = self.now;
        self.n.with(|n| n.lookup4(port, u32::from(v4(ip)), now))
    }

    /// Flush and check that every buffer is back.
    pub(super) fn assert_no_leak(&mut self) {
        self.n.flush(&mut self.pool);
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
    }
}

pub(super) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub(super) fn ns_for_us(hop: u8) -> Vec<u8> {
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

pub(super) fn learn_host(t: &mut Bench) {
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
}

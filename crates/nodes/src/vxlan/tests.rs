//! Crafted-packet tests of `<port>-tx` (encap) and `vxlan-input` (decap), each run in a small
//! graph whose next nodes are captures: the encapsulated bytes are checked by scapy (skipped
//! with a message without it, failing under CI=true), every malformed input is dropped under
//! its own reason, and a frame too big for the tunnel turns into an ICMP error or a drop.

use super::*;
use crate::drop::ErrorDrop;
use crate::icmp::RateLimiter;
use crate::testkit::{Seen, Sink};
use graph::{Dispatch, Graph, GraphBuilder, InputNode, Node, NodeContext};
use packet::checksum;
use packet::headers::{be16, be32, build_udp_frame, put16, UdpFrameSpec};
use packet::meta::FLAG_TUNNEL;
use packet::{BufferMeta, BufferPool, PoolConfig};
use std::collections::VecDeque;
use std::io::Write;
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;

const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);

fn tunnel(vni: Vni, udp_checksum: bool) -> Tunnel {
    Tunnel {
        port: 3,
        local: LOCAL,
        remote: REMOTE,
        vni,
        dst_port: DEFAULT_UDP_PORT,
        udp_checksum,
        mtu: 1450,
    }
}

/// Injects (meta setup, frame) pairs into `next`.
struct Inject {
    next: &'static str,
    frames: VecDeque<(BufferMeta, Vec<u8>)>,
}

impl InputNode for Inject {
    fn name(&self) -> &str {
        "inject"
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.into()]
    }
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let mut n = 0;
        while n < out.len() {
            let Some((m, f)) = self.frames.pop_front() else {
                break;
            };
            let Some(b) = cx.pool.alloc() else { break };
            assert!(cx.pool.write_packet(b, &f));
            let (meta, slot) = cx.pool.slot_mut(b);
            let at = meta.data_offset as usize;
            *meta = BufferMeta {
                data_offset: if m.data_offset == 0 {
                    meta.data_offset
                } else {
                    m.data_offset
                },
                length: f.len() as u16,
                ..m
            };
            // A smaller data offset moves the frame towards the slot's start (less headroom).
            let to = meta.data_offset as usize;
            slot.copy_within(at..at + f.len(), to);
            out[n] = b;
            n += 1;
        }
        (n, Dispatch::AllTo(0))
    }
    fn is_finished(&self) -> bool {
        self.frames.is_empty()
    }
}

struct Harness {
    graph: Graph,
    pool: BufferPool,
    seen: Seen,
}

impl Harness {
    fn new(node: Box<dyn Node>, next: &'static str, frames: Vec<(BufferMeta, Vec<u8>)>) -> Harness {
        let seen: Seen = Arc::default();
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(Inject {
            next,
            frames: frames.into(),
        }));
        b.add_node(node);
        for name in [crate::names::IP4_LOOKUP, crate::names::ETHERNET_INPUT] {
            b.add_node(Box::new(Sink(name, seen.clone())));
        }
        b.add_node(Box::new(ErrorDrop::new()));
        let pool = BufferPool::new(PoolConfig {
            buffers: 256,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        Harness {
            graph: b.build(0, 2_000_000_000).expect("graph"),
            pool,
            seen,
        }
    }

    fn run(&mut self) -> Vec<(String, BufferMeta, Vec<u8>)> {
        for _ in 0..100 {
            if self.graph.is_finished() {
                break;
            }
            self.graph.run_once(&mut self.pool);
        }
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        std::mem::take(&mut *self.seen.lock().expect("lock"))
    }

    fn drops(&self, node: &str, reason: &str) -> u64 {
        let s = self.graph.stats();
        let id = s
            .error_id(node, reason)
            .unwrap_or_else(|| panic!("no reason {node}/{reason}"));
        s.errors[id].get()
    }
}

fn encap(t: Tunnel, frames: Vec<(BufferMeta, Vec<u8>)>) -> Harness {
    let node = VxlanEncap::new("vx0-tx".into(), t, RateLimiter::new(1000, 10));
    Harness::new(Box::new(node), "vx0-tx", frames)
}

fn decap(tunnels: Vec<Tunnel>, frames: Vec<(BufferMeta, Vec<u8>)>) -> Harness {
    let stats = tunnels.iter().map(|_| None).collect();
    Harness::new(
        Box::new(VxlanInput::new(tunnels, stats)),
        VXLAN_INPUT,
        frames,
    )
}

/// An inner UDP frame (`size` bytes on the wire with FCS), IPv4 or IPv6, optionally tagged.
fn inner(src: &str, dst: &str, sport: u16, size: usize, vlan: Option<u16>) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: [2, 0, 0, 0, 0x50, 2],
        src_mac: [2, 0, 0, 0, 0x50, 1],
        vlan,
        src_ip: src.parse::<IpAddr>().expect("ip"),
        dst_ip: dst.parse::<IpAddr>().expect("ip"),
        src_port: sport,
        dst_port: 5201,
        ttl: 64,
        frame_size: size,
    })
}

/// Set DF on the untagged inner IPv4 frame `f` (fixing its header checksum).
fn with_df(mut f: Vec<u8>) -> Vec<u8> {
    put16(&mut f, 14 + 6, 0x4000);
    put16(&mut f, 14 + 10, 0);
    let c = checksum::checksum(&f[14..34]);
    put16(&mut f, 14 + 10, c);
    f
}

fn plain() -> BufferMeta {
    BufferMeta {
        rx_port: 1,
        ..BufferMeta::default()
    }
}

/// scapy checks each outer frame (hex, one per line, `expect` = "vni checksum-on") and answers
/// "ok" or what is wrong.
const SCAPY_CHECK: &str = r#"
import sys
from scapy.all import Ether, IP, UDP
from scapy.layers.vxlan import VXLAN
for line in sys.stdin:
    hexframe, inner_hex, vni, csum = line.split()
    p = Ether(bytes.fromhex(hexframe))
    err = []
    ip, udp = p[IP], p[UDP]
    q = Ether(bytes(p)); del q[IP].chksum; del q[UDP].chksum
    q = Ether(bytes(q))
    if ip.chksum != q[IP].chksum: err.append("ip checksum %x want %x" % (ip.chksum, q[IP].chksum))
    if ip.flags != "DF" or ip.frag != 0: err.append("flags %s" % ip.flags)
    if ip.ttl != 64 or ip.src != "198.18.1.1" or ip.dst != "198.18.1.2": err.append("ip %s" % ip.summary())
    if ip.len != len(p) - 14: err.append("ip len")
    if udp.dport != 4789 or not 49152 <= udp.sport <= 65535: err.append("ports %d %d" % (udp.sport, udp.dport))
    if udp.len != len(p) - 34: err.append("udp len")
    if csum == "1" and udp.chksum != q[UDP].chksum: err.append("udp checksum %x want %x" % (udp.chksum, q[UDP].chksum))
    if csum == "0" and udp.chksum != 0: err.append("udp checksum %x want 0" % udp.chksum)
    v = p[VXLAN]
    if v.flags != 0x08 or v.vni != int(vni): err.append("vxlan flags %s vni %d" % (v.flags, v.vni))
    if bytes(v.payload) != bytes.fromhex(inner_hex): err.append("inner frame differs")
    print("ok" if not err else "; ".join(err))
"#;

/// Run `SCAPY_CHECK` over `cases` (outer, inner, vni, checksum on); None when scapy is missing
/// outside CI (the test is then skipped with a message).
fn scapy_check(cases: &[(Vec<u8>, Vec<u8>, u32, bool)]) -> Option<Vec<String>> {
    let py = std::env::var_os("VECPLANE_PYTHON").unwrap_or_else(|| "/usr/bin/python3".into());
    let have = Command::new(&py)
        .args(["-c", "import scapy.all"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        let why = format!(
            "{} cannot import scapy (apt-get install python3-scapy)",
            py.to_string_lossy()
        );
        testenv::skip(&why);
        return None;
    }
    let mut child = Command::new(&py)
        .args(["-c", SCAPY_CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut input = String::new();
    for (outer, inner, vni, csum) in cases {
        input += &format!("{} {} {vni} {}\n", hex(outer), hex(inner), u8::from(*csum));
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write to python3");
    let out = child.wait_with_output().expect("python3 runs");
    assert!(
        out.status.success(),
        "scapy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect(),
    )
}

/// CI=true (the tests must run there).
#[test]
fn encapsulated_bytes_are_what_scapy_expects() {
    let frames = vec![
        inner("198.18.50.1", "198.18.50.2", 1000, 64, None),
        inner("198.18.50.1", "198.18.50.2", 1001, 1000, None),
        inner("2001:db8:50::1", "2001:db8:50::2", 1002, 333, None),
        inner("198.18.50.1", "198.18.50.2", 1003, 1464, Some(7)),
        // An odd length, so the checksum pads.
        inner("198.18.50.1", "198.18.50.2", 1004, 101, None),
    ];
    let mut cases = Vec::new();
    for csum in [true, false] {
        for vni in [Vni::Fixed(5000), Vni::Fixed(MAX_VNI), Vni::Fixed(0)] {
            let mut h = encap(
                tunnel(vni, csum),
                frames.iter().map(|f| (plain(), f.clone())).collect(),
            );
            let out = h.run();
            assert_eq!(out.len(), frames.len());
            for ((next, meta, bytes), f) in out.into_iter().zip(&frames) {
                assert_eq!(next, crate::names::IP4_LOOKUP);
                assert_eq!(bytes.len(), f.len() + OVERHEAD);
                assert_eq!(meta.l3_offset, 14);
                assert_eq!(meta.l4_offset, 34);
                assert_ne!(
                    meta.flags & crate::FLAG_LOCAL_ORIGIN,
                    0,
                    "rewrite keeps its TTL"
                );
                // The outer Ethernet header is ip4-rewrite's to fill; give it one for scapy.
                let mut outer = bytes.clone();
                outer[..12].copy_from_slice(&[2, 0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 1]);
                put16(&mut outer, 12, 0x0800);
                let Vni::Fixed(v) = vni else { unreachable!() };
                cases.push((outer, f.clone(), v, csum));
            }
        }
    }
    let Some(verdicts) = scapy_check(&cases) else {
        return;
    };
    assert_eq!(verdicts.len(), cases.len());
    for (i, v) in verdicts.iter().enumerate() {
        assert_eq!(v, "ok", "case {i}: {v}");
    }
}

#[test]
fn the_source_port_follows_the_inner_flow() {
    let frames: Vec<_> = (0..64u16)
        .flat_map(|p| {
            let f = inner("198.18.50.1", "198.18.50.2", 2000 + p, 64, None);
            [(plain(), f.clone()), (plain(), f)]
        })
        .collect();
    let out = encap(tunnel(Vni::Fixed(1), false), frames).run();
    let ports: Vec<u16> = out.iter().map(|(_, _, b)| be16(b, 34)).collect();
    for pair in ports.chunks(2) {
        assert_eq!(pair[0], pair[1], "one flow, one source port");
    }
    let distinct: std::collections::HashSet<_> = ports.iter().collect();
    assert!(
        distinct.len() > 48,
        "64 flows gave {} source ports",
        distinct.len()
    );
    assert!(ports.iter().all(|&p| p >= SOURCE_PORT_MIN));
}

#[test]
fn a_flow_chosen_vni_comes_from_the_metadata() {
    let f = inner("198.18.50.1", "198.18.50.2", 1, 64, None);
    let tagged = BufferMeta {
        flags: FLAG_TUNNEL,
        tun_id: 77,
        ..plain()
    };
    let mut h = encap(
        tunnel(Vni::Flow, true),
        vec![(tagged, f.clone()), (plain(), f)],
    );
    let out = h.run();
    assert_eq!(out.len(), 1);
    assert_eq!(be32(&out[0].2, 46) >> 8, 77);
    assert_eq!(h.drops("vx0-tx", "no-tunnel-id"), 1);
}

#[test]
fn runts_and_frames_without_headroom_are_dropped() {
    let short = BufferMeta {
        data_offset: 20,
        ..plain()
    };
    let f = inner("198.18.50.1", "198.18.50.2", 1, 64, None);
    let mut h = encap(
        tunnel(Vni::Fixed(1), false),
        vec![(plain(), vec![0u8; 13]), (short, f)],
    );
    assert!(h.run().is_empty());
    assert_eq!(h.drops("vx0-tx", "runt"), 1);
    assert_eq!(h.drops("vx0-tx", "no-headroom"), 1);
}

#[test]
fn too_big_for_the_tunnel_gives_frag_needed_with_df_and_a_drop_without() {
    // 1451-byte inner IPv4 packets: one over the tunnel's MTU of 1450.
    let big = inner("198.18.50.1", "198.18.50.2", 1, 1451 + 14 + 4, None);
    let fits = inner("198.18.50.1", "198.18.50.2", 1, 1450 + 14 + 4, None);
    let big6 = inner("2001:db8:50::1", "2001:db8:50::2", 1, 1451 + 14 + 4, None);
    let mut h = encap(
        tunnel(Vni::Fixed(5000), true),
        vec![
            (plain(), with_df(big.clone())),
            (plain(), big.clone()),
            (plain(), big6),
            (plain(), fits),
        ],
    );
    let out = h.run();
    assert_eq!(
        h.drops("vx0-tx", "mtu-exceeded"),
        3,
        "every frame too big is counted"
    );
    assert_eq!(out.len(), 2, "{out:?}");
    let (next, meta, icmp) = &out[0];
    assert_eq!(next, crate::names::ETHERNET_INPUT);
    assert_eq!(meta.rx_port, 3, "received back on the tunnel port");
    // Ethernet addresses swapped, from the inner destination to the inner source.
    assert_eq!(&icmp[..6], &big[6..12]);
    assert_eq!(&icmp[6..12], &big[..6]);
    let ip = &icmp[14..];
    assert_eq!(&ip[12..16], &[198, 18, 50, 2]);
    assert_eq!(&ip[16..20], &[198, 18, 50, 1]);
    assert_eq!(checksum::checksum(&ip[..20]), 0, "IPv4 header checksum");
    let total = be16(ip, 2) as usize;
    assert_eq!(total, 20 + 8 + 548, "quotes up to 576 bytes");
    assert_eq!(icmp.len(), 14 + total);
    assert_eq!((ip[20], ip[21], be16(ip, 26)), (3, 4, 1450));
    assert_eq!(checksum::checksum(&ip[20..total]), 0, "ICMP checksum");
    assert_eq!(
        &ip[28..48],
        &with_df(big)[14..34],
        "the original header is quoted"
    );
    assert_eq!(out[1].0, crate::names::IP4_LOOKUP, "1450 bytes fit");
}

/// An outer packet as `ip4-input` leaves it: metadata offsets set, length cut.
fn outer(
    src: Ipv4Addr,
    dport: u16,
    vni: u32,
    flags: u8,
    frame: &[u8],
    csum: bool,
) -> (BufferMeta, Vec<u8>) {
    let udp_len = 16 + frame.len();
    let mut p = vec![0u8; 34 + udp_len];
    p[12..14].copy_from_slice(&[8, 0]);
    let ip = &mut p[14..34];
    ip[0] = 0x45;
    put16(ip, 2, (20 + udp_len) as u16);
    put16(ip, 6, 0x4000);
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&LOCAL.octets());
    let c = checksum::checksum(ip);
    put16(ip, 10, c);
    put16(&mut p, 34, 55555);
    put16(&mut p, 36, dport);
    put16(&mut p, 38, udp_len as u16);
    p[42] = flags;
    p[46..50].copy_from_slice(&(vni << 8).to_be_bytes());
    p[50..].copy_from_slice(frame);
    if csum {
        let pseudo = checksum::pseudo_header_v4(src.octets(), LOCAL.octets(), 17, udp_len as u16);
        let c = !checksum::fold(checksum::sum(pseudo, &p[34..]));
        put16(&mut p, 40, if c == 0 { 0xffff } else { c });
    }
    let meta = BufferMeta {
        rx_port: 0,
        l3_offset: 14,
        l4_offset: 34,
        ..BufferMeta::default()
    };
    (meta, p)
}

#[test]
fn decap_hands_the_inner_frame_to_ethernet_input_on_the_tunnel_port() {
    let f = inner("198.18.50.2", "198.18.50.1", 9, 200, None);
    let mut h = decap(
        vec![tunnel(Vni::Fixed(5000), true)],
        vec![
            outer(REMOTE, 4789, 5000, 0x08, &f, true),
            outer(REMOTE, 4789, 5000, 0x08, &f, false),
        ],
    );
    let out = h.run();
    assert_eq!(out.len(), 2);
    for (next, meta, bytes) in out {
        assert_eq!(next, crate::names::ETHERNET_INPUT);
        assert_eq!(bytes, f);
        assert_eq!(meta.rx_port, 3);
        assert_eq!(meta.flags, FLAG_TUNNEL);
        assert_eq!(
            (meta.tun_id, meta.tun_src, meta.tun_dst),
            (5000, u32::from(REMOTE), u32::from(LOCAL))
        );
    }
}

#[test]
fn encap_then_decap_gives_back_the_frame() {
    let f = inner("2001:db8:50::1", "2001:db8:50::2", 9, 301, Some(12));
    let mut h = encap(tunnel(Vni::Fixed(42), true), vec![(plain(), f.clone())]);
    let out = h.run();
    // The other end sends it back with the addresses swapped (both checksums stay right:
    // the sums do not depend on the order of the addresses).
    let back = encap_back(&out[0].2);
    let out = decap(vec![tunnel(Vni::Fixed(42), true)], vec![back]).run();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].2, f);
}

/// Our encapsulated packet `p` as the other end would send it back (addresses swapped).
fn encap_back(p: &[u8]) -> (BufferMeta, Vec<u8>) {
    let mut q = p.to_vec();
    q[26..30].copy_from_slice(&REMOTE.octets());
    q[30..34].copy_from_slice(&LOCAL.octets());
    let meta = BufferMeta {
        l3_offset: 14,
        l4_offset: 34,
        ..BufferMeta::default()
    };
    (meta, q)
}

#[test]
fn malformed_vxlan_is_dropped_under_its_reason() {
    let f = inner("198.18.50.2", "198.18.50.1", 9, 64, None);
    let good = || outer(REMOTE, 4789, 5000, 0x08, &f, true);
    let mut cases: Vec<(&str, (BufferMeta, Vec<u8>))> = Vec::new();
    let mut not_udp = good();
    not_udp.1[23] = 6;
    cases.push(("not-udp", not_udp));
    let mut fragment = good();
    put16(&mut fragment.1, 20, 0x2000);
    cases.push(("fragment", fragment));
    let mut truncated = good();
    truncated.1.truncate(34 + 16 + 13);
    cases.push(("truncated", truncated));
    let mut long = good();
    put16(&mut long.1, 38, 200);
    cases.push(("bad-udp-length", long));
    let mut corrupt = good();
    let last = corrupt.1.len() - 1;
    corrupt.1[last] ^= 0x40;
    cases.push(("bad-udp-checksum", corrupt));
    cases.push(("no-tunnel", outer(REMOTE, 4790, 5000, 0x08, &f, true)));
    cases.push((
        "unknown-remote",
        outer(Ipv4Addr::new(198, 18, 1, 9), 4789, 5000, 0x08, &f, true),
    ));
    cases.push(("bad-flags", outer(REMOTE, 4789, 5000, 0x0c, &f, true)));
    cases.push(("bad-flags", outer(REMOTE, 4789, 5000, 0x00, &f, true)));
    cases.push(("unknown-vni", outer(REMOTE, 4789, 5001, 0x08, &f, true)));
    let expected = cases.iter().map(|(r, _)| *r).collect::<Vec<_>>();
    let mut h = decap(
        vec![tunnel(Vni::Fixed(5000), true)],
        cases.into_iter().map(|(_, c)| c).collect(),
    );
    assert!(h.run().is_empty());
    for r in INPUT_ERRORS {
        let want = expected.iter().filter(|e| *e == r).count() as u64;
        assert_eq!(h.drops(VXLAN_INPUT, r), want, "{r}");
    }
}

#[test]
fn a_flow_tunnel_takes_any_vni_and_a_fixed_one_wins() {
    let f = inner("198.18.50.2", "198.18.50.1", 9, 64, None);
    let mut fixed = tunnel(Vni::Fixed(7), false);
    fixed.port = 4;
    let out = decap(
        vec![tunnel(Vni::Flow, false), fixed],
        vec![
            outer(REMOTE, 4789, 123, 0x08, &f, false),
            outer(REMOTE, 4789, 7, 0x08, &f, false),
        ],
    )
    .run();
    let got: Vec<(u16, u32)> = out.iter().map(|(_, m, _)| (m.rx_port, m.tun_id)).collect();
    assert_eq!(got, [(3, 123), (4, 7)]);
}

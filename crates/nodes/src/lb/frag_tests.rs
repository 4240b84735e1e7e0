//! Crafted-packet tests of GRE fragmentation in the `lb` node (`wrap::wrap_fragments`): an
//! inner IPv4 packet without DF too big for its GRE4/GRE6 tunnel leaves as GRE packets of inner
//! fragments that fit, reassembled here and by scapy (`defragment`) into the packet sent; DF and
//! IPv6 still get their ICMP error; fragments of fragments keep their offsets; malformed input
//! and an empty buffer pool are dropped under their reasons, leaking nothing.

#[path = "../../../../tests/golden/golden_support.rs"]
mod support;

use super::*;
use crate::drop::ErrorDrop;
use crate::testkit::{Inject, Queue, Seen, Sink};
use graph::{Graph, GraphBuilder};
use lb::model::LbState;
use live::{Domain, Publisher};
use packet::checksum;
use packet::headers::{be16, put16};
use packet::meta::FLAG_FEATURE_META;
use packet::{BufferMeta, BufferPool, PoolConfig};
use std::collections::BTreeMap;
use std::process::Command;
use support::{run_ok, scapy_or_skip, write_pcap, TempDir};

const CLIENT: [u8; 4] = [198, 18, 0, 2];
const VIP4: [u8; 4] = [198, 18, 100, 2];
const SERVER4: [u8; 4] = [198, 18, 12, 12];
const GRE_SRC4: [u8; 4] = [198, 18, 12, 1];
const UDP: u8 = 17;

const GRE4_VIP: &str = "lb conf ip4-src-address 198.18.12.1\n\
                        lb vip 198.18.100.2/32 encap gre4\n\
                        lb as 198.18.100.2/32 198.18.12.12\n";
const GRE6_VIP: &str = "lb conf ip6-src-address 2001:db8:ff::1\n\
                        lb vip 198.18.100.2/32 encap gre6\n\
                        lb as 198.18.100.2/32 2001:db8:12::12\n";
const GRE4_VIP6: &str = "lb conf ip4-src-address 198.18.12.1\n\
                         lb vip 2001:db8:100::2/128 encap gre4\n\
                         lb as 2001:db8:100::2/128 198.18.12.12\n";

/// One output: the next node's name, the metadata and the frame it got.
type Out = (String, BufferMeta, Vec<u8>);

fn ip_input_like(meta: &mut BufferMeta, f: &[u8]) {
    meta.l3_offset = 14;
    if f.get(12..14) == Some(&[0x86, 0xdd]) {
        meta.flags |= FLAG_IP6;
    }
}

/// The `lb` node with a tunnel MTU of `mtu` in a graph whose next nodes are captures, over a
/// pool of `buffers`.
struct FragLab {
    graph: Graph,
    pool: BufferPool,
    queue: Queue,
    seen: Seen,
    counters: Arc<LbWorkerCounters>,
    drops: BTreeMap<String, u64>,
}

impl FragLab {
    fn new(lines: &str, mtu: u16, buffers: u32) -> FragLab {
        let cmds = lb::cli::parse_lines(lines).expect("lines parse");
        let state = LbState::new().apply(&cmds).expect("lines apply");
        let publisher = Publisher::new(LbTables::build(&state, None), &Domain::new(0).0);
        let counters = Arc::new(LbWorkerCounters::new());
        let node = LbNode::new(LbConfig {
            tables: publisher.reader(),
            counters: counters.clone(),
            slot: None,
            flow_entries: 4096,
            mtu,
            nat_inside: Arc::new(NatInside::new(1)),
            probe: None,
        })
        .expect("node");
        // The tables stay published for the node's life (its reader holds them).
        std::mem::forget(publisher);
        let seen: Seen = Arc::default();
        let queue: Queue = Arc::default();
        let mut b = GraphBuilder::new();
        // Every packet carries a feature line: its fragments must take it along.
        b.add_input(Box::new(Inject {
            setup: ip_input_like,
            feature_line: true,
            ..Inject::new(LB, queue.clone())
        }));
        b.add_node(Box::new(node));
        for name in [
            names::IP4_LOOKUP,
            names::IP6_LOOKUP,
            names::IP4_ICMP_ERROR,
            names::IP6_ICMP_ERROR,
        ] {
            b.add_node(Box::new(Sink(name, seen.clone())));
        }
        b.add_node(Box::new(ErrorDrop::new()));
        let pool = BufferPool::new(PoolConfig {
            buffers,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        FragLab {
            graph: b.build(0, 2_000_000_000).expect("graph"),
            pool,
            queue,
            seen,
            counters,
            drops: BTreeMap::new(),
        }
    }

    /// Run `frames` through the node: what reached each next node, then one `drop:<reason>`
    /// per packet dropped. Every buffer is back in the pool after.
    fn run(&mut self, frames: Vec<Vec<u8>>) -> Vec<Out> {
        self.queue
            .lock()
            .expect("lock")
            .extend(frames.into_iter().map(|f| (0, f)));
        for _ in 0..100 {
            if self.queue.lock().expect("lock").is_empty() {
                break;
            }
            self.graph.run_once(&mut self.pool);
        }
        self.graph.run_once(&mut self.pool);
        let mut out = std::mem::take(&mut *self.seen.lock().expect("lock"));
        let s = self.graph.stats();
        for r in LbError::names() {
            let Some(id) = s.error_id(LB, &r) else {
                continue;
            };
            let now = s.errors[id].get();
            let before = self.drops.insert(r.clone(), now).unwrap_or(0);
            for _ in before..now {
                out.push((format!("drop:{r}"), BufferMeta::default(), Vec::new()));
            }
        }
        out
    }
}

/// An IPv4 UDP packet of `total` bytes from the client to `dst` with flags/offset `frag`,
/// checksums right (the UDP checksum over what this packet carries).
fn udp4(dst: [u8; 4], total: usize, frag: u16) -> Vec<u8> {
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[1] = 0x28;
    put16(&mut ip, 2, total as u16);
    put16(&mut ip, 4, 0x5a5a);
    put16(&mut ip, 6, frag);
    ip[8] = 63;
    ip[9] = UDP;
    ip[12..16].copy_from_slice(&CLIENT);
    ip[16..20].copy_from_slice(&dst);
    let c = checksum::checksum(&ip);
    put16(&mut ip, 10, c);
    let mut l4: Vec<u8> = (0..total - 20).map(|i| (i * 7 + i / 256) as u8).collect();
    put16(&mut l4, 0, 40000);
    put16(&mut l4, 2, 53);
    put16(&mut l4, 4, (total - 20) as u16);
    put16(&mut l4, 6, 0);
    let ph = checksum::pseudo_header_v4(CLIENT, dst, UDP, (total - 20) as u16);
    let c = !checksum::fold(checksum::sum(ph, &l4));
    put16(&mut l4, 6, if c == 0 { 0xffff } else { c });
    ip.extend_from_slice(&l4);
    ip
}

/// An Ethernet frame around the IP packet `ip`.
fn frame(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    let ethertype: [u8; 2] = if ip[0] >> 4 == 6 {
        [0x86, 0xdd]
    } else {
        [0x08, 0x00]
    };
    f.extend_from_slice(&ethertype);
    f.extend_from_slice(ip);
    f
}

/// The outer IP packet of an output (what follows the 14 bytes left for `ip*-rewrite`).
fn outer(o: &Out) -> &[u8] {
    &o.2[o.1.l3_offset as usize..]
}

/// Check a GRE4 output (outer header, DF, ID 0, checksum, length, addresses, at most `mtu`
/// bytes) and return its inner packet.
fn gre4_inner(o: &Out, mtu: usize) -> Vec<u8> {
    assert_eq!(o.0, names::IP4_LOOKUP, "{o:?}");
    assert!(o.1.flags & FLAG_LOCAL_ORIGIN != 0);
    let ip = outer(o);
    assert_eq!(ip.len(), usize::from(be16(ip, 2)), "outer total length");
    assert!(ip.len() <= mtu, "{} > MTU {mtu}", ip.len());
    assert_eq!(ip[9], 47, "GRE");
    assert_eq!(be16(ip, 6), 0x4000, "outer DF, no fragment");
    assert_eq!(be16(ip, 4), 0, "outer ID 0");
    assert_eq!(checksum::checksum(&ip[..20]), 0, "outer header checksum");
    assert_eq!(&ip[12..16], &GRE_SRC4);
    assert_eq!(&ip[16..20], &SERVER4);
    assert_eq!(&ip[20..24], &[0, 0, 0x08, 0x00], "GRE carries IPv4");
    ip[24..].to_vec()
}

/// Check a GRE6 output and return its inner packet.
fn gre6_inner(o: &Out, mtu: usize) -> Vec<u8> {
    assert_eq!(o.0, names::IP6_LOOKUP, "{o:?}");
    let ip = outer(o);
    assert_eq!(ip[0] >> 4, 6);
    assert_eq!(
        ip.len(),
        40 + usize::from(be16(ip, 4)),
        "outer payload length"
    );
    assert!(ip.len() <= mtu, "{} > MTU {mtu}", ip.len());
    assert_eq!(ip[6], 47, "GRE, no fragment header");
    assert_eq!(&ip[40..44], &[0, 0, 0x08, 0x00], "GRE carries IPv4");
    ip[44..].to_vec()
}

/// Reassemble inner IPv4 fragments (RFC 791 §3.2, written here apart from `packet::frag`):
/// each fragment's header checksum is checked, payloads placed by offset with no overlap and no
/// hole; the first fragment's header with the flags of the whole and a fresh total length and
/// checksum.
fn reassemble(frags: &[Vec<u8>]) -> Vec<u8> {
    let mut payload = vec![None; 65536];
    let mut end = 0;
    let mut header = Vec::new();
    for f in frags {
        let hl = usize::from(f[0] & 15) * 4;
        assert_eq!(checksum::checksum(&f[..hl]), 0, "inner header checksum");
        assert_eq!(usize::from(be16(f, 2)), f.len(), "inner total length");
        let word = be16(f, 6);
        let off = usize::from(word & 0x1fff) * 8;
        for (i, &b) in f[hl..].iter().enumerate() {
            assert!(payload[off + i].is_none(), "overlap at {}", off + i);
            payload[off + i] = Some(b);
        }
        if word & 0x2000 == 0 {
            end = off + f.len() - hl;
        }
        if off == 0 {
            header = f[..hl].to_vec();
        }
    }
    assert!(
        !header.is_empty() && end > 0,
        "first and last fragments present"
    );
    let mut p = header;
    p.extend(payload[..end].iter().map(|b| b.expect("no hole")));
    let total = p.len() as u16;
    put16(&mut p, 2, total);
    put16(&mut p, 6, 0);
    put16(&mut p, 10, 0);
    let c = checksum::checksum(&p[..20]);
    put16(&mut p, 10, c);
    p
}

/// The frames of GRE outputs as a pcap (the 14 zero bytes left for `ip*-rewrite` made an
/// Ethernet header of the outer family) for scapy.
fn write_outputs(path: &std::path::Path, outs: &[Out]) {
    let frames: Vec<Vec<u8>> = outs.iter().map(|o| frame(outer(o))).collect();
    let records: Vec<(u64, &[u8])> = frames.iter().map(|f| (0, f.as_slice())).collect();
    write_pcap(path, &records).expect("write pcap");
}

/// Scapy's view: every output's outer and inner checksums are what scapy computes, and
/// `defragment` of the inner packets gives `expected_inner` byte for byte.
fn scapy_agrees(test: &str, outs: &[Out], expected_inner: &[u8]) {
    let Some(py) = scapy_or_skip(test) else {
        return;
    };
    let dir = TempDir::new("lb-gre-frag");
    let pcap = dir.path("out.pcap");
    write_outputs(&pcap, outs);
    let script = r#"
import sys
from scapy.all import rdpcap, raw, IP, IPv6, GRE, defragment
frames = rdpcap(sys.argv[1])
inner = []
for f in frames:
    outer = f.payload
    if outer.haslayer(IP) and isinstance(outer, IP):
        again = outer.copy()
        del again.chksum
        assert raw(IP(raw(again))) == raw(outer), "outer IPv4 checksum"
    gre = outer[GRE]
    assert gre.proto == 0x0800, gre.proto
    i = IP(raw(gre.payload))
    again = i.copy()
    del again.chksum
    assert raw(IP(raw(again))) == raw(i), "inner fragment header checksum"
    inner.append(i)
whole = defragment(inner)
assert len(whole) == 1, len(whole)
got = raw(whole[0])
want = bytes.fromhex(sys.argv[2])
assert got == want, (got.hex(), want.hex())
print("scapy ok", len(frames), "fragments")
"#;
    let out = run_ok(
        Command::new(py).args(["-c", script]).arg(&pcap).arg(
            expected_inner
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        ),
        "scapy defragment",
    );
    assert!(out.contains("scapy ok"), "{out}");
}

#[test]
fn a_1500_byte_packet_without_df_to_a_gre4_vip_leaves_as_fragments_that_reassemble_to_it() {
    let mut lab = FragLab::new(GRE4_VIP, 1500, 256);
    let sent = udp4(VIP4, 1500, 0);
    let out = lab.run(vec![frame(&sent)]);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        out.iter().all(|o| o.1.flags & FLAG_FEATURE_META != 0),
        "every fragment keeps the packet's feature line (the sink checked its content)"
    );
    let inner: Vec<Vec<u8>> = out.iter().map(|o| gre4_inner(o, 1500)).collect();
    assert_eq!(inner[0].len(), 1476, "the first fragment fills the tunnel");
    assert_eq!(be16(&inner[0], 6), 0x2000, "MF, offset 0");
    assert_eq!(be16(&inner[1], 6), 1456 / 8, "offset 1456, last");
    assert!(
        inner.iter().all(|f| be16(f, 4) == 0x5a5a),
        "the sender's ID kept"
    );
    assert_eq!(reassemble(&inner), sent);
    assert_eq!(outer(&out[0])[12..20], outer(&out[1])[12..20], "one tunnel");
    assert_eq!(lab.counters.gre_fragmented.get(), 1);
    assert_eq!(lab.counters.gre_fragments.get(), 2);
    let vc = lab.counters.vip(VipId(0)).expect("vip counters");
    assert_eq!((vc.packets.get(), vc.too_big.get()), (1, 0));
    scapy_agrees(
        "a_1500_byte_packet_without_df_to_a_gre4_vip_leaves_as_fragments_that_reassemble_to_it",
        &out,
        &sent,
    );
}

#[test]
fn a_large_packet_through_a_small_tunnel_makes_many_fragments_in_order() {
    let mut lab = FragLab::new(GRE4_VIP, 576, 256);
    let sent = udp4(VIP4, 1500, 0);
    let out = lab.run(vec![frame(&sent), frame(&udp4(VIP4, 100, 0))]);
    assert_eq!(out.len(), 4, "{out:?}");
    let inner: Vec<Vec<u8>> = out[..3].iter().map(|o| gre4_inner(o, 576)).collect();
    let offsets: Vec<u16> = inner.iter().map(|f| be16(f, 6) & 0x1fff).collect();
    assert_eq!(offsets, [0, 66, 132], "528-byte steps, in order");
    assert_eq!(reassemble(&inner), sent);
    assert_eq!(
        gre4_inner(&out[3], 576),
        udp4(VIP4, 100, 0),
        "the next packet whole"
    );
    scapy_agrees(
        "a_large_packet_through_a_small_tunnel_makes_many_fragments_in_order",
        &out[..3],
        &sent,
    );
}

#[test]
fn a_gre6_tunnel_fragments_the_inner_ipv4_packet_and_never_the_outer() {
    let mut lab = FragLab::new(GRE6_VIP, 1500, 256);
    let sent = udp4(VIP4, 1500, 0);
    let out = lab.run(vec![frame(&sent)]);
    assert_eq!(out.len(), 2, "{out:?}");
    let inner: Vec<Vec<u8>> = out.iter().map(|o| gre6_inner(o, 1500)).collect();
    assert_eq!(
        inner[0].len(),
        20 + 1432,
        "1500 - 44 - 20 rounded down to 8 bytes of payload"
    );
    assert_eq!(reassemble(&inner), sent);
    scapy_agrees(
        "a_gre6_tunnel_fragments_the_inner_ipv4_packet_and_never_the_outer",
        &out,
        &sent,
    );
}

#[test]
fn with_df_the_sender_still_gets_fragmentation_needed() {
    let mut lab = FragLab::new(GRE4_VIP, 1500, 256);
    let out = lab.run(vec![frame(&udp4(VIP4, 1500, 0x4000))]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].0, names::IP4_ICMP_ERROR);
    assert_eq!(out[0].1.next_scratch, icmp_request(3, 4, 1476));
    assert_eq!(lab.counters.gre_fragments.get(), 0);
}

#[test]
fn an_ipv6_packet_too_big_for_the_tunnel_gets_packet_too_big() {
    let mut lab = FragLab::new(GRE4_VIP6, 1500, 256);
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    put16(&mut ip, 4, 1460);
    ip[6] = UDP;
    ip[7] = 64;
    ip[8..24].copy_from_slice(
        &"2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    ip[24..40].copy_from_slice(
        &"2001:db8:100::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    let mut udp = vec![0u8; 1460];
    put16(&mut udp, 0, 40000);
    put16(&mut udp, 2, 53);
    put16(&mut udp, 4, 1460);
    ip.extend_from_slice(&udp);
    let out = lab.run(vec![frame(&ip)]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].0, names::IP6_ICMP_ERROR);
    assert_eq!(out[0].1.next_scratch, icmp_request(2, 0, 1476));
}

#[test]
fn a_fragment_too_big_for_the_tunnel_becomes_fragments_that_continue_it() {
    let mut lab = FragLab::new(GRE4_VIP, 1500, 256);
    // The first 1480 bytes of a datagram (MF), then its last 1000 (offset 1480).
    let first = udp4(VIP4, 1500, 0x2000);
    let last = udp4(VIP4, 1020, 1480 / 8);
    let out = lab.run(vec![frame(&first), frame(&last)]);
    assert_eq!(out.len(), 3, "{out:?}");
    let inner: Vec<Vec<u8>> = out.iter().map(|o| gre4_inner(o, 1500)).collect();
    let words: Vec<u16> = inner.iter().map(|f| be16(f, 6)).collect();
    assert_eq!(
        words,
        [0x2000, 0x2000 | (1456 / 8), 1480 / 8],
        "both pieces of the first keep MF; the last fragment stays whole"
    );
    assert_eq!(inner[1].len(), 20 + 24);
    assert_eq!(&inner[1][20..], &first[20 + 1456..]);
    assert_eq!(inner[2], last);
}

#[test]
fn malformed_options_and_truncated_packets_are_dropped_and_counted() {
    let mut lab = FragLab::new(GRE4_VIP, 1500, 256);
    // IHL 6 with an option whose length runs past the header.
    let mut bad = udp4(VIP4, 1500, 0);
    bad.splice(20..20, [0x07, 9, 0, 0]);
    bad[0] = 0x46;
    put16(&mut bad, 2, 1504);
    put16(&mut bad, 10, 0);
    let c = checksum::checksum(&bad[..24]);
    put16(&mut bad, 10, c);
    // A total length past the frame's end.
    let mut cut = udp4(VIP4, 1500, 0);
    cut.truncate(1400);
    let out = lab.run(vec![frame(&bad), frame(&cut)]);
    let names: Vec<&str> = out.iter().map(|o| o.0.as_str()).collect();
    assert_eq!(names, ["drop:malformed", "drop:malformed"], "{out:?}");
    assert_eq!(lab.counters.malformed.get(), 2);
    assert_eq!(lab.counters.gre_fragments.get(), 0);
    assert_eq!(lab.pool.available(), lab.pool.capacity(), "a buffer leaked");
}

#[test]
fn an_empty_pool_drops_the_packet_counted_and_leaks_nothing() {
    let mut lab = FragLab::new(GRE4_VIP, 1500, 64);
    // Hold every buffer but the one the injected frame takes.
    let mut held = Vec::new();
    while lab.pool.available() > 1 {
        held.push(lab.pool.alloc().expect("free buffer"));
    }
    let out = lab.run(vec![frame(&udp4(VIP4, 1500, 0))]);
    let names: Vec<&str> = out.iter().map(|o| o.0.as_str()).collect();
    assert_eq!(names, ["drop:no-buffer-for-fragment"], "{out:?}");
    assert_eq!(lab.pool.available(), 1, "the packet's buffer came back");
    assert_eq!(lab.counters.gre_fragments.get(), 0);
    lab.pool.free_batch(&held);
    // With buffers again, the same packet is fragmented.
    let out = lab.run(vec![frame(&udp4(VIP4, 1500, 0))]);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(lab.pool.available(), lab.pool.capacity(), "a buffer leaked");
}

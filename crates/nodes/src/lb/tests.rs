//! Crafted-packet tests of the `lb` node in a small graph whose next nodes are captures: VIP
//! traffic reaches its servers (L3DSR, GRE4, NAT4 both ways) with valid checksums and sticks to
//! its server, drain and flush behave as the issue says, and what is not for a VIP passes or is
//! dropped under its own reason. Independent byte-level checks of every encapsulation are in
//! crates/lb's golden tests (scapy).

use super::*;
use crate::drop::ErrorDrop;
use crate::testkit::{Inject, Queue, Seen, Sink};
use graph::{Graph, GraphBuilder};
use lb::model::LbState;
use live::{Domain, Publisher};
use packet::checksum;
use packet::{BufferMeta, BufferPool, PoolConfig};
use std::collections::BTreeMap;

/// The lab's port names, by id (for `lb set interface`).
const PORTS: [&str; 2] = ["p0", "p1"];
/// The port health probes arrive on.
const PROBE_PORT: u16 = 7;

/// What `ip*-input` leaves for the `lb` node: the L3 offset, and the family.
fn ip_input_like(meta: &mut BufferMeta, f: &[u8]) {
    meta.l3_offset = 14;
    if f.get(12..14) == Some(&[0x86, 0xdd]) {
        meta.flags |= FLAG_IP6;
    }
}

struct Lab {
    publisher: Publisher<LbTables>,
    state: LbState,
    counters: Arc<LbWorkerCounters>,
    nat_inside: Arc<NatInside>,
    leases: Arc<lb::probe::ProbeLeases>,
    graph: Graph,
    pool: BufferPool,
    queue: Queue,
    seen: Seen,
    drops: BTreeMap<String, u64>,
}

impl Lab {
    fn new(lines: &str) -> Lab {
        Lab::with_setup(lines, ip_input_like)
    }

    /// A lab whose injected packets get `setup` (what `ip*-input` and the receiving port left).
    fn with_setup(lines: &str, setup: fn(&mut BufferMeta, &[u8])) -> Lab {
        Lab::build(lines, setup, true)
    }

    /// A lab whose node tries its fast lane (`plain.rs`) or not.
    fn build(lines: &str, setup: fn(&mut BufferMeta, &[u8]), use_lane: bool) -> Lab {
        Lab::build_with(lines, setup, use_lane, None)
    }

    /// `build`, the node taking its flow tables from `slot`.
    fn build_with(
        lines: &str,
        setup: fn(&mut BufferMeta, &[u8]),
        use_lane: bool,
        slot: Option<Arc<TableSlot>>,
    ) -> Lab {
        let state = apply(&LbState::new(), lines);
        let tables = LbTables::build(&state, None);
        let publisher = Publisher::new(tables, &Domain::new(0).0);
        let counters = Arc::new(LbWorkerCounters::new());
        let nat_inside = Arc::new(NatInside::new(PORTS.len()));
        nat_inside.set_from(&state, &PORTS.map(String::from));
        let leases = Arc::new(lb::probe::ProbeLeases::new());
        let mut node = LbNode::new(LbConfig {
            tables: publisher.reader(),
            counters: counters.clone(),
            slot,
            flow_entries: 4096,
            mtu: 1500,
            nat_inside: nat_inside.clone(),
            probe: Some(LbProbe {
                port: PROBE_PORT,
                leases: leases.clone(),
                sources: vec![std::net::Ipv4Addr::new(198, 18, 12, 1)
                    .to_ipv6_mapped()
                    .octets()],
            }),
        })
        .expect("node");
        node.use_lane = use_lane;
        let seen: Seen = Arc::default();
        let queue: Queue = Arc::default();
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(Inject {
            setup,
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
            buffers: 1024,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        Lab {
            publisher,
            state,
            counters,
            nat_inside,
            leases,
            graph: b.build(0, 2_000_000_000).expect("graph"),
            pool,
            queue,
            seen,
            drops: BTreeMap::new(),
        }
    }

    fn change(&mut self, lines: &str) {
        self.state = apply(&self.state, lines);
        let next = LbTables::build(&self.state, Some(self.publisher.current()));
        self.publisher.publish(next);
        self.nat_inside
            .set_from(&self.state, &PORTS.map(String::from));
    }

    /// Run `frames` through the node; what reached each next node, then one `drop:<reason>`
    /// entry per packet dropped.
    fn run(&mut self, frames: Vec<Vec<u8>>) -> Vec<(String, BufferMeta, Vec<u8>)> {
        self.run_on(0, frames)
    }

    /// `run` with the frames received on port `port`.
    fn run_on(&mut self, port: u16, frames: Vec<Vec<u8>>) -> Vec<(String, BufferMeta, Vec<u8>)> {
        self.queue
            .lock()
            .expect("lock")
            .extend(frames.into_iter().map(|f| (port, f)));
        for _ in 0..1000 {
            if self.queue.lock().expect("lock").is_empty() {
                break;
            }
            self.graph.run_once(&mut self.pool);
        }
        self.graph.run_once(&mut self.pool);
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
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

fn apply(state: &LbState, lines: &str) -> LbState {
    let cmds = lb::cli::parse_lines(lines).expect("lines parse");
    state.apply(&cmds).expect("lines apply")
}

const TCP: u8 = 6;
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// An Ethernet + IPv4 + TCP frame with correct checksums.
fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut l4 = vec![0u8; 20];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    l4[12] = 5 << 4;
    l4[13] = flags;
    l4[14..16].copy_from_slice(&1024u16.to_be_bytes());
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(40u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = TCP;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let ph = checksum::pseudo_header_v4(src, dst, TCP, 20);
    let c = checksum::fold(checksum::sum(ph, &l4));
    l4[16..18].copy_from_slice(&(!c).to_be_bytes());
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&l4);
    f
}

/// IPv4 header and TCP checksums of a frame (Ethernet at 0) verify.
fn checksums_ok(f: &[u8]) -> bool {
    ip4_checksums_ok(&f[14..])
}

/// IPv4 header and L4 checksums of the IPv4 packet at the start of `ip` verify.
fn ip4_checksums_ok(ip: &[u8]) -> bool {
    let ihl = (ip[0] & 15) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if checksum::checksum(&ip[..ihl]) != 0 {
        return false;
    }
    let mut src = [0u8; 4];
    let mut dst = [0u8; 4];
    src.copy_from_slice(&ip[12..16]);
    dst.copy_from_slice(&ip[16..20]);
    let ph = checksum::pseudo_header_v4(src, dst, ip[9], (total - ihl) as u16);
    checksum::fold(checksum::sum(ph, &ip[ihl..total])) == 0xffff
}

fn dst4(f: &[u8]) -> [u8; 4] {
    [f[30], f[31], f[32], f[33]]
}

const CLIENT: [u8; 4] = [198, 18, 0, 2];
const VIP: [u8; 4] = [198, 18, 100, 1];
const S1: [u8; 4] = [198, 18, 12, 11];
const S2: [u8; 4] = [198, 18, 12, 12];
const S3: [u8; 4] = [198, 18, 12, 13];

const L3DSR: &str =
    "lb vip 198.18.100.1/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 1024\n\
    lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 198.18.12.12 198.18.12.13\n";

fn syns(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| tcp4(CLIENT, VIP, 20000 + i, 80, SYN))
        .collect()
}

fn acks(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| tcp4(CLIENT, VIP, 20000 + i, 80, ACK))
        .collect()
}

/// Server chosen per source port.
fn servers_by_port(out: &[(String, BufferMeta, Vec<u8>)]) -> BTreeMap<u16, [u8; 4]> {
    out.iter()
        .filter(|(n, _, _)| n == names::IP4_LOOKUP)
        .map(|(_, _, f)| (u16::from_be_bytes([f[34], f[35]]), dst4(f)))
        .collect()
}

#[test]
fn l3dsr_spreads_new_flows_and_keeps_each_on_its_server() {
    let mut lab = Lab::new(L3DSR);
    let out = lab.run(syns(300));
    assert_eq!(out.len(), 300);
    let mut per = BTreeMap::new();
    for (next, _, f) in &out {
        assert_eq!(next, names::IP4_LOOKUP);
        assert!(checksums_ok(f), "checksums after L3DSR");
        assert_eq!(f[15] >> 2, 23, "DSCP");
        *per.entry(dst4(f)).or_insert(0) += 1;
    }
    assert_eq!(per.len(), 3, "all three servers get flows: {per:?}");
    assert!(per.values().all(|&n| n > 50), "spread: {per:?}");
    let first = servers_by_port(&out);
    let again = servers_by_port(&lab.run(acks(300)));
    assert_eq!(first, again, "every flow stays on its server");
    let v = lab.counters.vip(VipId(0)).expect("vip counters");
    assert_eq!(v.new_flows.get(), 300);
    assert_eq!(v.packets.get(), 600);
    assert_eq!(v.nonsyn_misses.get(), 0);
}

#[test]
fn drain_keeps_flows_and_flush_moves_them() {
    let mut lab = Lab::new(L3DSR);
    let first = servers_by_port(&lab.run(syns(300)));
    // Drain S1: its flows stay, new flows avoid it.
    lab.change("lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 weight 0\n");
    assert_eq!(servers_by_port(&lab.run(acks(300))), first);
    let new: Vec<Vec<u8>> = (0..300)
        .map(|i| tcp4(CLIENT, VIP, 40000 + i, 80, SYN))
        .collect();
    let fresh = servers_by_port(&lab.run(new));
    assert!(
        fresh.values().all(|s| *s != S1),
        "no new flow on a drained server"
    );
    // Flush S2: its flows move (to S3, the only server left with weight).
    lab.change("lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.12 del flush\n");
    let after = servers_by_port(&lab.run(acks(300)));
    for (port, server) in &first {
        match *server {
            s if s == S2 => assert_eq!(after[port], S3, "flushed flow moved"),
            s => assert_eq!(after[port], s, "other flows unchanged"),
        }
    }
    let v = lab.counters.vip(VipId(0)).expect("vip counters");
    assert!(
        v.nonsyn_misses.get() > 0,
        "the moved flows were non-SYN misses"
    );
}

#[test]
fn what_is_not_for_a_vip_passes_or_is_dropped_with_its_reason() {
    let mut lab = Lab::new(L3DSR);
    let other = tcp4(CLIENT, [198, 18, 50, 1], 1000, 80, SYN);
    let wrong_port = tcp4(CLIENT, VIP, 1000, 81, SYN);
    let mut truncated = tcp4(CLIENT, VIP, 1000, 80, SYN);
    truncated.truncate(14 + 20 + 10);
    truncated[16..18].copy_from_slice(&30u16.to_be_bytes());
    let out = lab.run(vec![other.clone(), wrong_port, truncated]);
    let names: Vec<&str> = out.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(names.contains(&names::IP4_LOOKUP));
    assert!(names.contains(&"drop:no-vip-for-port"), "{names:?}");
    assert!(names.contains(&"drop:malformed"), "{names:?}");
    let passed = out
        .iter()
        .find(|(n, _, _)| n == names::IP4_LOOKUP)
        .expect("passed");
    assert_eq!(passed.2, other, "a packet for no VIP is untouched");
    // A VIP whose servers all have weight 0 drops new flows.
    lab.change(
        "lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 198.18.12.12 198.18.12.13 \
         weight 0\n",
    );
    let out = lab.run(vec![tcp4(CLIENT, VIP, 5000, 80, SYN)]);
    assert_eq!(out[0].0, "drop:no-server");
}

#[test]
fn nat4_rewrites_to_the_server_and_the_reply_back_to_the_vip() {
    let mut lab = Lab::new(
        "lb vip 198.18.100.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n\
         lb as 198.18.100.4/32 protocol tcp port 80 198.18.12.11\n",
    );
    let vip = [198, 18, 100, 4];
    let out = lab.run(vec![tcp4(CLIENT, vip, 33000, 80, SYN)]);
    assert_eq!(out.len(), 1);
    let f = &out[0].2;
    assert_eq!(dst4(f), S1);
    assert_eq!(u16::from_be_bytes([f[36], f[37]]), 8080);
    assert!(checksums_ok(f));
    // The server's reply comes back through the node, rewritten to come from the VIP.
    let reply = tcp4(S1, CLIENT, 8080, 33000, SYN | ACK);
    let out = lab.run(vec![reply]);
    let f = &out[0].2;
    assert_eq!(out[0].0, names::IP4_LOOKUP);
    assert_eq!([f[26], f[27], f[28], f[29]], vip, "source is the VIP");
    assert_eq!(
        u16::from_be_bytes([f[34], f[35]]),
        80,
        "source port is the VIP's"
    );
    assert!(checksums_ok(f));
    assert_eq!(lab.counters.nat_replies.get(), 1);
    // With an inside port named, replies are translated there only.
    lab.change("lb set interface nat4 in p1\n");
    let out = lab.run_on(0, vec![tcp4(S1, CLIENT, 8080, 33000, ACK)]);
    let f = &out[0].2;
    assert_eq!([f[26], f[27], f[28], f[29]], S1, "outside port: untouched");
    assert_eq!(
        (
            lab.counters.nat_replies.get(),
            lab.counters.nat_reply_misses.get()
        ),
        (1, 0)
    );
    let out = lab.run_on(1, vec![tcp4(S1, CLIENT, 8080, 33000, ACK)]);
    let f = &out[0].2;
    assert_eq!([f[26], f[27], f[28], f[29]], vip, "inside port: rewritten");
    assert!(checksums_ok(f));
    assert_eq!(lab.counters.nat_replies.get(), 2);
}

#[test]
fn gre4_wraps_the_packet_for_the_server() {
    let mut lab = Lab::new(
        "lb conf ip4-src-address 198.18.12.1\n\
         lb vip 198.18.100.2/32 encap gre4\n\
         lb as 198.18.100.2/32 198.18.12.12\n",
    );
    let out = lab.run(vec![tcp4(CLIENT, [198, 18, 100, 2], 1234, 80, SYN)]);
    let (next, meta, f) = &out[0];
    assert_eq!(next, names::IP4_LOOKUP);
    assert!(meta.flags & FLAG_LOCAL_ORIGIN != 0);
    let outer = &f[meta.l3_offset as usize..];
    assert_eq!(outer[9], 47, "GRE");
    assert_eq!(&outer[12..16], &[198, 18, 12, 1]);
    assert_eq!(&outer[16..20], &S2);
    assert_eq!(checksum::checksum(&outer[..20]), 0);
    assert_eq!(&outer[22..24], &[0x08, 0x00], "GRE carries IPv4");
    assert_eq!(
        &outer[24 + 16..24 + 20],
        &[198, 18, 100, 2],
        "inner destination is the VIP"
    );
}

/// An IPv4 fragment (Ethernet at 0): `offset8` in 8-byte units, `more` fragments follow.
fn frag4(src: [u8; 4], dst: [u8; 4], id: u16, offset8: u16, more: bool, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    let flags = if more { 0x2000 } else { 0 } | offset8;
    ip[6..8].copy_from_slice(&flags.to_be_bytes());
    ip[8] = 64;
    ip[9] = TCP;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(payload);
    f
}

#[test]
fn fragments_of_a_datagram_reach_one_server_of_a_per_port_vip() {
    let mut lab = Lab::new(L3DSR);
    for id in 0..40u16 {
        let client = [198, 18, 0, 10 + id as u8];
        let mut first = tcp4(client, VIP, 30000 + id, 80, ACK)[34..54].to_vec();
        first.extend_from_slice(&[0u8; 4]);
        let out = lab.run(vec![
            frag4(client, VIP, id, 0, true, &first),
            frag4(client, VIP, id, 3, false, &[7u8; 8]),
        ]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.iter().all(|(n, _, _)| n == names::IP4_LOOKUP));
        assert_eq!(
            dst4(&out[0].2),
            dst4(&out[1].2),
            "both fragments on one server"
        );
        assert!(out
            .iter()
            .all(|(_, _, f)| checksum::checksum(&f[14..34]) == 0));
    }
    let v = lab.counters.vip(VipId(0)).expect("vip counters");
    assert_eq!(v.fragments.get(), 80);
    assert_eq!(v.new_flows.get(), 0, "fragments create no flow");
}

/// The AS slot of `server` in the current tables.
fn slot_of(lab: &Lab, server: [u8; 4]) -> lb::model::AsSlot {
    let t = lab.publisher.current();
    t.vips()
        .flat_map(|v| v.slots.iter().copied())
        .find(|&s| t.as_entry(s).addr == std::net::IpAddr::from(server))
        .expect("server has a slot")
}

#[test]
fn a_probe_goes_to_the_server_its_port_is_leased_to_and_makes_no_flow() {
    let mut lab = Lab::new(L3DSR);
    let port = lb::probe::PROBE_PORT_BASE + 5;
    for server in [S1, S2, S3, S2] {
        assert!(lab.leases.lease(port, slot_of(&lab, server)));
        let probe = tcp4([198, 18, 12, 1], VIP, port, 80, SYN);
        let out = lab.run_on(PROBE_PORT, vec![probe]);
        let (next, _, f) = &out[0];
        assert_eq!(next, names::IP4_LOOKUP);
        assert_eq!(dst4(f), server, "the leased server, whatever Maglev says");
        assert_eq!(f[15] >> 2, 23, "wrapped as L3DSR");
        assert!(checksums_ok(f));
    }
    assert_eq!(lab.counters.probes.get(), 4);
    let counters = lab.counters.clone();
    let v = counters.vip(VipId(0)).expect("vip counters");
    assert_eq!(v.new_flows.get(), 0, "probes make no flow");
    assert_eq!(v.packets.get(), 0, "probes are not client traffic");
    // The same packet from a client port is balanced as usual and makes a flow.
    let out = lab.run_on(0, vec![tcp4([198, 18, 12, 1], VIP, port, 80, SYN)]);
    assert_eq!(out[0].0, names::IP4_LOOKUP);
    assert_eq!(v.new_flows.get(), 1);
}

#[test]
fn an_unleased_probe_or_one_leased_to_another_vip_is_dropped() {
    let mut lab = Lab::new(&format!(
        "{L3DSR}lb vip 198.18.100.3/32 protocol tcp port 80 encap l3dsr dscp 24\n\
         lb as 198.18.100.3/32 protocol tcp port 80 198.18.12.14\n"
    ));
    let port = lb::probe::PROBE_PORT_BASE;
    let out = lab.run_on(PROBE_PORT, vec![tcp4([198, 18, 12, 1], VIP, port, 80, SYN)]);
    assert_eq!(out[0].0, "drop:probe-not-leased");
    // Leased to the other VIP's server: not a server of this VIP.
    assert!(lab.leases.lease(port, slot_of(&lab, [198, 18, 12, 14])));
    let out = lab.run_on(PROBE_PORT, vec![tcp4([198, 18, 12, 1], VIP, port, 80, SYN)]);
    assert_eq!(out[0].0, "drop:probe-not-leased");
    // A source port outside the band is never leased.
    let out = lab.run_on(
        PROBE_PORT,
        vec![tcp4([198, 18, 12, 1], VIP, 40000, 80, SYN)],
    );
    assert_eq!(out[0].0, "drop:probe-not-leased");
    assert_eq!(lab.counters.probes_unleased.get(), 3);
    // Released: dropped again.
    assert!(lab.leases.lease(port, slot_of(&lab, S1)));
    lab.leases.release(port);
    let out = lab.run_on(PROBE_PORT, vec![tcp4([198, 18, 12, 1], VIP, port, 80, SYN)]);
    assert_eq!(out[0].0, "drop:probe-not-leased");
}

#[test]
fn a_probe_to_a_drained_server_still_reaches_it_and_gre_probes_are_wrapped() {
    let mut lab = Lab::new(
        "lb conf ip4-src-address 198.18.12.1\n\
         lb vip 198.18.100.2/32 encap gre4\n\
         lb as 198.18.100.2/32 198.18.12.12 198.18.12.13\n",
    );
    // A server out of the table (weight 0) is still probed: that is how it comes back.
    lab.change("lb as 198.18.100.2/32 198.18.12.12 weight 0\n");
    let port = lb::probe::PROBE_PORT_BASE + 77;
    assert!(lab.leases.lease(port, slot_of(&lab, S2)));
    let out = lab.run_on(
        PROBE_PORT,
        vec![tcp4([198, 18, 12, 1], [198, 18, 100, 2], port, 80, SYN)],
    );
    let (next, meta, f) = &out[0];
    assert_eq!(next, names::IP4_LOOKUP);
    assert!(meta.flags & FLAG_LOCAL_ORIGIN != 0);
    let outer = &f[meta.l3_offset as usize..];
    assert_eq!(outer[9], 47, "GRE");
    assert_eq!(&outer[16..20], &S2);
    assert_eq!(
        &outer[24 + 16..24 + 20],
        &[198, 18, 100, 2],
        "inner: the VIP"
    );
}

#[test]
fn a_probe_reply_on_a_nat_inside_port_is_not_a_nat_miss() {
    let mut lab = Lab::new(
        "lb vip 198.18.100.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n\
         lb as 198.18.100.4/32 protocol tcp port 80 198.18.12.11\n",
    );
    // A NAT VIP's probe goes straight to server:8080; its reply comes back to the probe
    // source on a band port and passes untouched, counted as neither a reply nor a miss.
    let band = lb::probe::PROBE_PORT_BASE + 1;
    let reply = tcp4(S1, [198, 18, 12, 1], 8080, band, SYN | ACK);
    let out = lab.run(vec![reply.clone()]);
    assert_eq!(out[0].0, names::IP4_LOOKUP);
    assert_eq!(out[0].2, reply);
    assert_eq!(lab.counters.nat_replies.get(), 0);
    assert_eq!(lab.counters.nat_reply_misses.get(), 0);
    // A client on the same band port at another address is a NAT reply as ever (a miss here).
    lab.run(vec![tcp4(S1, CLIENT, 8080, band, SYN | ACK)]);
    assert_eq!(lab.counters.nat_reply_misses.get(), 1);
}

/// Bytes per segment of the test super-packets.
const MSS: u16 = 500;
/// Source port of a super-packet whose segment size is 0 (malformed).
const BAD_GSO_PORT: u16 = 666;

/// An Ethernet + IPv4 + TCP frame with `payload` bytes (the i-th is `i as u8`) as a sender
/// that leaves the TCP checksum to the device writes it: the checksum field holds the
/// pseudo-header sum.
fn tcp4_partial(src: [u8; 4], dst: [u8; 4], sport: u16, payload: usize) -> Vec<u8> {
    let mut f = tcp4(src, dst, sport, 80, ACK);
    f.extend((0..payload).map(|i| i as u8));
    let total = (40 + payload) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let ph = checksum::pseudo_header_v4(src, dst, TCP, total - 20);
    f[50..52].copy_from_slice(&checksum::fold(ph).to_be_bytes());
    f
}

/// `ip_input_like`, and the offloads a TSO guest's port leaves: a partial TCP checksum, and
/// a super-packet of `MSS`-byte segments when the payload is longer than that.
fn from_a_tso_guest(meta: &mut BufferMeta, f: &[u8]) {
    ip_input_like(meta, f);
    meta.flags |= packet::meta::FLAG_CSUM_PARTIAL;
    meta.csum_start = meta.data_offset + 34;
    meta.csum_offset = 16;
    if f.len() > 54 + usize::from(MSS) {
        meta.gso_type = packet::meta::GSO_TCP4;
        meta.gso_size = if f.get(34..36) == Some(&BAD_GSO_PORT.to_be_bytes()) {
            0
        } else {
            MSS
        };
    }
}

/// The IPv4 packet each output carries for its server: the inner one for GRE.
fn delivered(out: &[(String, BufferMeta, Vec<u8>)], gre: bool) -> Vec<Vec<u8>> {
    out.iter()
        .map(|(next, meta, f)| {
            assert_eq!(next, names::IP4_LOOKUP, "{out:?}");
            assert!(!meta.has_offload(), "offloads finished before the lookup");
            let l3 = &f[meta.l3_offset as usize..];
            if gre {
                assert_eq!(l3[9], 47, "GRE");
                l3[24..].to_vec()
            } else {
                l3.to_vec()
            }
        })
        .collect()
}

#[test]
fn a_guests_super_packet_is_cut_before_each_encapsulation_and_the_segments_follow_its_flow() {
    let cases = [
        (L3DSR, [198, 18, 100, 1], false),
        (
            "lb conf ip4-src-address 198.18.12.1\n\
             lb vip 198.18.100.2/32 encap gre4\n\
             lb as 198.18.100.2/32 198.18.12.12\n",
            [198, 18, 100, 2],
            true,
        ),
        (
            "lb vip 198.18.100.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n\
             lb as 198.18.100.4/32 protocol tcp port 80 198.18.12.11\n",
            [198, 18, 100, 4],
            false,
        ),
    ];
    for (lines, vip, gre) in cases {
        let mut lab = Lab::with_setup(lines, from_a_tso_guest);
        let out = lab.run(vec![tcp4_partial(CLIENT, vip, 40000, 1200)]);
        let packets = delivered(&out, gre);
        assert_eq!(packets.len(), 3, "{lines}: 500 + 500 + 200 bytes");
        let server = packets[0][16..20].to_vec();
        let mut payload = Vec::new();
        let mut seq = Vec::new();
        for p in &packets {
            assert!(ip4_checksums_ok(p), "{lines}: {p:?}");
            assert_eq!(p[16..20], server[..], "{lines}: one flow, one server");
            seq.push(u32::from_be_bytes([p[24], p[25], p[26], p[27]]));
            payload.extend_from_slice(&p[40..]);
        }
        assert_eq!(payload, (0..1200).map(|i| i as u8).collect::<Vec<_>>());
        assert_eq!(seq, [seq[0], seq[0] + 500, seq[0] + 1000], "{lines}");
        let vc = lab.counters.vip(VipId(0)).expect("vip counters");
        assert_eq!((vc.packets.get(), vc.new_flows.get()), (3, 1), "{lines}");
    }
}

#[test]
fn a_partial_checksum_is_finished_before_nat_and_a_bad_super_packet_is_dropped() {
    let mut lab = Lab::with_setup(
        "lb vip 198.18.100.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n\
         lb as 198.18.100.4/32 protocol tcp port 80 198.18.12.11\n",
        from_a_tso_guest,
    );
    let vip = [198, 18, 100, 4];
    let out = lab.run(vec![tcp4_partial(CLIENT, vip, 40001, 300)]);
    let packets = delivered(&out, false);
    assert_eq!(packets.len(), 1);
    assert_eq!(packets[0][16..20], S1);
    assert!(ip4_checksums_ok(&packets[0]));
    // A server's reply with its checksum left partial comes back from the VIP, valid.
    let out = lab.run(vec![{
        let mut r = tcp4_partial(S1, CLIENT, 8080, 100);
        r[36..38].copy_from_slice(&40001u16.to_be_bytes());
        r
    }]);
    let packets = delivered(&out, false);
    assert_eq!(packets[0][12..16], vip, "source is the VIP");
    assert!(ip4_checksums_ok(&packets[0]));
    assert_eq!(lab.counters.nat_replies.get(), 1);
    // A super-packet with no segment size cannot be cut.
    let out = lab.run(vec![tcp4_partial(CLIENT, vip, BAD_GSO_PORT, 1200)]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, "drop:malformed-offload");
}

/// An Ethernet + IPv4 + UDP frame with correct checksums.
fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut f = tcp4(src, dst, sport, dport, 0);
    f.truncate(14 + 20);
    let len = (8 + payload) as u16;
    let mut l4 = vec![0u8; usize::from(len)];
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    l4[4..6].copy_from_slice(&len.to_be_bytes());
    let ph = checksum::pseudo_header_v4(src, dst, 17, len);
    let c = !checksum::fold(checksum::sum(ph, &l4));
    l4[6..8].copy_from_slice(&c.to_be_bytes());
    let ip = &mut f[14..];
    ip[2..4].copy_from_slice(&(20 + len).to_be_bytes());
    ip[9] = 17;
    ip[10..12].fill(0);
    let c = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&l4);
    f
}

/// Every counter of the VIPs and slots a few lines of config make.
fn counter_snapshot(c: &LbWorkerCounters) -> Vec<u64> {
    let mut all = vec![c.no_vip_for_port.get(), c.malformed.get()];
    for v in 0..4 {
        let v = c.vip(VipId(v)).expect("vip");
        all.extend([
            v.packets.get(),
            v.bytes.get(),
            v.new_flows.get(),
            v.nonsyn_misses.get(),
            v.no_server.get(),
            v.fragments.get(),
        ]);
    }
    for s in 0..8 {
        let s = c.slot(lb::model::AsSlot(s)).expect("slot");
        all.extend([s.packets.get(), s.bytes.get(), s.new_flows.get()]);
    }
    all
}

/// One packet of the differential test below, by kind.
fn mixed_packet(kind: u8, port: u16) -> Vec<u8> {
    let flags = [SYN, ACK, ACK | 0x01, 0x04, ACK | 0x08][usize::from(port % 5)];
    match kind % 8 {
        0..=2 => tcp4(CLIENT, VIP, 20000 + port, 80, flags),
        3 => udp4(
            CLIENT,
            [198, 18, 100, 2],
            30000 + port,
            53,
            usize::from(port % 3),
        ),
        4 => tcp4(CLIENT, VIP, 20000 + port, 81, ACK),
        5 => tcp4(CLIENT, [198, 18, 200, 9], 20000 + port, 80, ACK),
        6 => {
            let mut f = tcp4(CLIENT, VIP, 20000 + port, 80, ACK);
            f.truncate(14 + 20 + 10);
            f[16..18].copy_from_slice(&30u16.to_be_bytes());
            f
        }
        _ => frag4(CLIENT, VIP, port, 0, true, &[0; 24]),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// The fast lane only skips work: mixed vectors (plain packets to L3DSR VIPs, new and known
    /// flows, SYNs, FINs and RSTs, UDP, packets to no VIP, malformed ones, fragments), a drain
    /// and a flush between rounds, give the same packets out, the same drops and the same
    /// counters with the lane as without it. A server is drained after the first round,
    /// another flushed after the second and added back after the third.
    #[test]
    fn the_fast_lane_decides_as_the_general_path(
        rounds in proptest::collection::vec(
            proptest::collection::vec((0u8..8, 0u16..40), 1..200), 1..4),
        plain_only in proptest::prelude::any::<bool>(),
    ) {
        let lines = format!(
            "{L3DSR}lb vip 198.18.100.2/32 protocol udp port 53 encap l3dsr dscp 5\n\
             lb as 198.18.100.2/32 protocol udp port 53 198.18.12.11 198.18.12.12\n"
        );
        let mut with = Lab::build(&lines, ip_input_like, true);
        let mut without = Lab::build(&lines, ip_input_like, false);
        for (r, round) in rounds.iter().enumerate() {
            let frames: Vec<Vec<u8>> = round
                .iter()
                .map(|&(k, p)| mixed_packet(if plain_only { k % 4 } else { k }, p))
                .collect();
            let a = with.run(frames.clone());
            let b = without.run(frames);
            let strip = |o: Vec<(String, BufferMeta, Vec<u8>)>| {
                o.into_iter().map(|(n, _, f)| (n, f)).collect::<Vec<_>>()
            };
            proptest::prop_assert_eq!(strip(a), strip(b), "round {}", r);
            proptest::prop_assert_eq!(
                counter_snapshot(&with.counters),
                counter_snapshot(&without.counters)
            );
            let change = match r {
                0 => "lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.12 weight 0\n",
                1 => "lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.13 del flush\n",
                _ => "lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.13\n",
            };
            with.change(change);
            without.change(change);
        }
    }
}

/// VPP's `test_lb_ip4_l3dsr` on a prefix VIP (its `90.0.0.0/8`; here 198.18.128.0/17 with the
/// host bits VPP clears), with VPP's `lb as ... weight 50` beside default-weight servers:
/// flows to any address of the prefix (VPP's `getIPv4Flow`: one destination per flow) reach a
/// server with the DSCP set, in the shares VPP's weights give (50/350 for the weight-50
/// server), the same through the fast lane and the general path; an address outside passes.
#[test]
fn a_prefix_l3dsr_vip_serves_every_address_in_vpps_weight_shares() {
    let lines = "lb vip 198.18.200.9/17 encap l3dsr dscp 7\n\
                 lb as 198.18.128.0/17 198.18.12.11 198.18.12.12 198.18.12.13\n\
                 lb as 198.18.128.0/17 198.18.12.14 weight 50\n";
    let flows: Vec<Vec<u8>> = (0..2800u16)
        .map(|id| {
            let dst = [198, 18, 128 + (id / 255) as u8, (id % 255) as u8];
            let src = [198, 19, (id / 255) as u8, (id % 255) as u8];
            udp4(src, dst, 10000 + id, 20000, 8)
        })
        .collect();
    let mut by_path = Vec::new();
    for use_lane in [true, false] {
        let mut lab = Lab::build(lines, ip_input_like, use_lane);
        let mut per: BTreeMap<[u8; 4], u32> = BTreeMap::new();
        let mut chosen = Vec::new();
        for chunk in flows.chunks(200) {
            for (next, _, f) in lab.run(chunk.to_vec()) {
                assert_eq!(next, names::IP4_LOOKUP, "every flow is balanced");
                assert_eq!(f[15] >> 2, 7, "DSCP");
                assert!(checksums_ok(&f));
                *per.entry(dst4(&f)).or_insert(0) += 1;
                chosen.push(dst4(&f));
            }
        }
        assert_eq!(chosen.len(), flows.len());
        let share = |s: [u8; 4]| f64::from(per.get(&s).copied().unwrap_or(0)) / 2800.0;
        let weighted = share([198, 18, 12, 14]);
        assert!((weighted - 50.0 / 350.0).abs() < 0.04, "weight 50: {per:?}");
        for s in [S1, S2, S3] {
            assert!(
                (share(s) - 100.0 / 350.0).abs() < 0.05,
                "weight 100: {per:?}"
            );
        }
        let out = lab.run(vec![udp4(CLIENT, [198, 18, 127, 255], 1, 20000, 8)]);
        assert_eq!(
            dst4(&out[0].2),
            [198, 18, 127, 255],
            "outside the prefix: untouched"
        );
        by_path.push(chosen);
    }
    assert_eq!(
        by_path[0], by_path[1],
        "the lane decides as the general path"
    );
}

/// VPP's `type nodeport`: packets to the node's address (`lb conf ip4-src-address`) on the
/// node port go to the VIP's servers (NAT to `target_port`), as packets to the VIP do; the
/// reply is rewritten back to what the client sent to.
#[test]
fn a_nodeport_vip_answers_on_the_node_address_and_port() {
    let node = [198, 18, 0, 254];
    let mut lab = Lab::new(
        "lb conf ip4-src-address 198.18.0.254\n\
         lb vip 198.18.100.4/32 protocol udp port 3306 encap nat4 type nodeport target_port 3307 \
         node_port 30964\n\
         lb as 198.18.100.4/32 protocol udp port 3306 198.18.12.11\n",
    );
    for (dst, dport) in [(node, 30964), ([198, 18, 100, 4], 3306)] {
        let out = lab.run(vec![udp4(CLIENT, dst, 33000, dport, 8)]);
        assert_eq!(out.len(), 1);
        let f = &out[0].2;
        assert_eq!(out[0].0, names::IP4_LOOKUP, "to {dst:?}:{dport}");
        assert_eq!(dst4(f), S1);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 3307, "target_port");
        assert!(checksums_ok(f));
        let out = lab.run(vec![udp4(S1, CLIENT, 3307, 33000, 8)]);
        assert_eq!(out[0].0, names::IP4_LOOKUP, "reply for {dst:?}:{dport}");
        let f = &out[0].2;
        assert_eq!(
            [f[26], f[27], f[28], f[29]],
            dst,
            "reply from what the client asked"
        );
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), dport);
        assert!(checksums_ok(f));
    }
    // Another port on the node address is not the VIP's.
    let out = lab.run(vec![udp4(CLIENT, node, 33000, 30965, 8)]);
    assert_eq!(dst4(&out[0].2), node);
}

/// VPP's hard drain (`weight 0 flush`): the server leaves the table and its flows move at
/// once; a plain `weight 0` keeps them; `flush` alone (no `del`) moves flows through the table.
#[test]
fn weight_0_flush_moves_a_servers_flows_at_once() {
    let mut lab = Lab::new(L3DSR);
    let first = servers_by_port(&lab.run(syns(300)));
    lab.change("lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 weight 0\n");
    assert_eq!(
        servers_by_port(&lab.run(acks(300))),
        first,
        "graceful drain"
    );
    lab.change("lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 weight 0 flush\n");
    let after = servers_by_port(&lab.run(acks(300)));
    for (port, server) in &first {
        if *server == S1 {
            assert_ne!(after[port], S1, "hard drain moved the flow");
        } else {
            assert_eq!(after[port], *server, "other flows unchanged");
        }
    }
    assert!(first.values().any(|s| *s == S1));
    // Back at weight 100 with `flush`: S1's table share returns; flows still valid elsewhere.
    lab.change("lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 weight 100 flush\n");
    let fresh: Vec<Vec<u8>> = (0..300)
        .map(|i| tcp4(CLIENT, VIP, 50000 + i, 80, SYN))
        .collect();
    assert!(servers_by_port(&lab.run(fresh)).values().any(|s| *s == S1));
}

#[path = "route_tests.rs"]
mod route;

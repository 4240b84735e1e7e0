//! Crafted-frame tests of `flow-switch` through a real graph: an injector hands frames to the
//! node (as `ethernet-input` would for flow ports), capture nodes record what each port sends,
//! and every buffer must come back. Tables are built and changed through `FlowTables::apply`
//! and published as the control plane does.

use super::*;
use crate::bridge::{BridgeConfig, BridgeDomainConfig, BridgePortConfig, BridgePortMode, L2Bridge};
use crate::drop::ErrorDrop;
use crate::output::InterfaceOutput;
use crate::testkit::{Inject, Queue};
use crate::tests::{Capture, Captured};
use flow::rule::{FlowMod, Rule, DEFAULT_PRIORITY};
use flow::tables::SwitchPorts;
use flow::{Action, Field, Match, PortRef};
use graph::{Graph, GraphBuilder};
use live::{Domain, Publisher};
use packet::headers::{build_udp_frame, UdpFrameSpec};
use packet::PoolConfig;
use std::net::IpAddr;

/// The graph's clock is the TSC: the node's milliseconds must follow it.
fn hz() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| graph::measure_tsc_hz(20))
}
const PORTS: u16 = 3;

struct Switch {
    graph: Graph,
    pool: BufferPool,
    queue: Queue,
    out: Captured,
    tables: Publisher<FlowTables>,
    shared: Arc<FlowWorkerShared>,
}

fn ports() -> SwitchPorts {
    let mut p = SwitchPorts::new();
    for i in 0..PORTS {
        p.add(i + 1, i, false).expect("port");
    }
    p
}

fn rule(priority: u16, m: Match, actions: Vec<Action>) -> Rule {
    Rule {
        table: 0,
        priority,
        cookie: 0,
        m,
        actions,
        idle_timeout: 0,
        hard_timeout: 0,
    }
}

fn out(port: u16) -> Action {
    Action::Output(PortRef::Number(port))
}

fn switch(rules: Vec<Rule>, port_cache: [(bool, bool); PORTS as usize]) -> Switch {
    switch_with(rules, port_cache, CacheConfig::default())
}

fn switch_with(
    rules: Vec<Rule>,
    port_cache: [(bool, bool); PORTS as usize],
    cache: CacheConfig,
) -> Switch {
    switch_full(rules, port_cache, cache, None)
}

/// A switch whose `controller` actions punt into `punt`.
fn switch_full(
    rules: Vec<Rule>,
    port_cache: [(bool, bool); PORTS as usize],
    cache: CacheConfig,
    punt: Option<crate::inject::SharedPunt>,
) -> Switch {
    let tables = FlowTables::new(ports())
        .apply(&rules.into_iter().map(FlowMod::Add).collect::<Vec<_>>())
        .expect("rules");
    let publisher = Publisher::new(tables, &Domain::new(0).0);
    let shared = Arc::new(FlowWorkerShared::default());
    let (node, maintenance) = flow_switch_nodes(
        (0..PORTS)
            .map(|p| {
                Some(FlowPortInfo {
                    switch: 0,
                    ofport: p + 1,
                    emc: port_cache[p as usize].0,
                    megaflow: port_cache[p as usize].1,
                })
            })
            .collect(),
        vec![SwitchSetup {
            tables: publisher.reader(),
            cache,
            members: (0..PORTS).collect(),
            shared: shared.clone(),
        }],
        hz(),
    )
    .expect("node");
    let node = match punt {
        Some(p) => node.with_punt(p),
        None => node,
    };
    let queue: Queue = Arc::default();
    let captured: Captured = Arc::default();
    let mut b = GraphBuilder::new();
    // Every frame carries a feature line, which every copy must take along.
    b.add_input(Box::new(Inject {
        feature_line: true,
        ..Inject::new(NAME, queue.clone())
    }));
    b.add_input(Box::new(maintenance));
    b.add_node(Box::new(node));
    b.add_node(Box::new(
        L2Bridge::new(&BridgeConfig {
            domains: vec![BridgeDomainConfig {
                id: 1,
                ports: (0..PORTS)
                    .map(|port| BridgePortConfig {
                        port,
                        mode: BridgePortMode::Access { pvid: 1 },
                    })
                    .collect(),
            }],
            ..BridgeConfig::default()
        })
        .expect("bridge"),
    ));
    b.add_node(Box::new(InterfaceOutput::new(
        (0..PORTS).map(|p| Some(format!("tx{p}"))).collect(),
    )));
    b.add_node(Box::new(ErrorDrop::new()));
    for p in 0..PORTS {
        b.add_node(Box::new(Capture {
            name: format!("tx{p}"),
            port: p,
            out: captured.clone(),
            feature_line: true,
        }));
    }
    let pool = BufferPool::new(PoolConfig {
        buffers: 2048,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    Switch {
        graph: b.build(0, hz()).expect("graph"),
        pool,
        queue,
        out: captured,
        tables: publisher,
        shared,
    }
}

impl Switch {
    fn send(&mut self, frames: Vec<(u16, Vec<u8>)>) -> Vec<(u16, Vec<u8>)> {
        self.queue.lock().expect("lock").extend(frames);
        let mut rounds = 0;
        while !self.queue.lock().expect("lock").is_empty() && rounds < 1000 {
            self.graph.run_once(&mut self.pool);
            rounds += 1;
        }
        self.graph.run_once(&mut self.pool);
        assert_eq!(
            self.pool.available(),
            self.pool.capacity(),
            "a buffer leaked"
        );
        std::mem::take(&mut *self.out.lock().expect("lock"))
    }

    fn drops(&self, reason: &str) -> u64 {
        let s = self.graph.stats();
        let id = s.error_id(NAME, reason).expect("reason");
        s.errors[id].get()
    }

    fn apply(&mut self, mods: &[FlowMod]) {
        let next = self.tables.current().apply(mods).expect("change");
        self.tables.publish(next);
    }

    /// What the trace recorded at this node.
    fn trace_lines(&self) -> Vec<String> {
        self.graph
            .trace_control()
            .snapshot()
            .into_iter()
            .filter(|r| r.node == NAME)
            .map(|r| r.text)
            .collect()
    }

    fn stats(&mut self) -> flow::cache::CacheStats {
        // Maintenance publishes the counters.
        std::thread::sleep(std::time::Duration::from_millis(MAINTENANCE_MS + 5));
        self.graph.run_once(&mut self.pool);
        self.shared.cache.load().0
    }
}

fn udp(src_port: u16, dst: [u8; 4]) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        src_port,
        dst_ip: IpAddr::V4(dst.into()),
        ..UdpFrameSpec::default()
    })
}

fn udp_match(dst: u32, len: u32) -> Match {
    let mut m = Match::ANY;
    m.set(Field::EthType, 0x0800, 0xffff);
    m.set(Field::NwDst, dst as u128, (u32::MAX << (32 - len)) as u128);
    m
}

#[test]
fn a_rule_forwards_and_the_second_packet_hits_the_megaflow() {
    let mut s = switch(
        vec![rule(
            DEFAULT_PRIORITY,
            udp_match(0xc613_0000, 16),
            vec![out(2)],
        )],
        [(true, true); 3],
    );
    let f = udp(1000, [198, 19, 0, 1]);
    let got = s.send(vec![(0, f.clone()), (0, f.clone())]);
    assert_eq!(got, vec![(1, f.clone()), (1, f.clone())]);
    let got = s.send(vec![(0, udp(2000, [198, 19, 3, 4]))]);
    assert_eq!(got.len(), 1);
    let st = s.stats();
    assert_eq!(st.installed, 1, "one megaflow covers both flows: {st:?}");
    // Both packets of the first vector missed the caches; the second was covered by the
    // megaflow the first installed (one translation), the third flow hit it in the cache.
    assert_eq!(st.misses, 2, "{st:?}");
    assert_eq!(st.emc_hits + st.megaflow_hits, 1, "{st:?}");
}

#[test]
fn unmatched_packets_are_dropped_and_counted() {
    let mut s = switch(
        vec![rule(
            DEFAULT_PRIORITY,
            udp_match(0xc613_0000, 16),
            vec![out(2)],
        )],
        [(true, true); 3],
    );
    assert!(s.send(vec![(0, udp(1, [198, 18, 9, 9]))]).is_empty());
    assert_eq!(s.drops("dropped-by-rules"), 1);
}

#[test]
fn flood_and_several_outputs_copy_the_packet() {
    let mut s = switch(
        vec![
            rule(
                10,
                udp_match(0xc613_0000, 16),
                vec![Action::Output(PortRef::Flood)],
            ),
            rule(20, udp_match(0xc613_0100, 24), vec![out(2), out(3)]),
        ],
        [(true, true); 3],
    );
    let f = udp(7, [198, 19, 0, 1]);
    let mut got = s.send(vec![(0, f.clone())]);
    got.sort();
    assert_eq!(got, vec![(1, f.clone()), (2, f.clone())]);
    let g = udp(7, [198, 19, 1, 1]);
    let mut got = s.send(vec![(0, g.clone())]);
    got.sort();
    assert_eq!(got, vec![(1, g.clone()), (2, g.clone())]);
    // OpenFlow never sends a packet back out of its input port with output:N.
    let got = s.send(vec![(2, g.clone())]);
    assert_eq!(got, vec![(1, g.clone())]);
    // The same flows again, now all cache hits (the vector's actions run from the hits):
    // still copied, each port in order.
    let got = s.send(vec![(0, f.clone()), (0, g.clone()), (0, f.clone())]);
    for port in [1, 2] {
        let on: Vec<&Vec<u8>> = got.iter().filter(|o| o.0 == port).map(|o| &o.1).collect();
        assert_eq!(on, vec![&f, &g, &f], "port {port}");
    }
    assert_eq!(got.len(), 6);
    let st = s.stats();
    assert_eq!(st.misses, 3, "{st:?}");
}

#[test]
fn set_field_rewrites_with_valid_checksums() {
    let mut s = switch(
        vec![rule(
            1,
            udp_match(0xc613_0000, 16),
            vec![
                Action::SetField {
                    field: Field::NwDst,
                    value: 0xc612_0505,
                    mask: 0xffff_ffff,
                },
                out(3),
            ],
        )],
        [(true, true); 3],
    );
    let got = s.send(vec![(0, udp(9, [198, 19, 0, 1]))]);
    assert_eq!(got.len(), 1);
    let (port, f) = &got[0];
    assert_eq!(*port, 2);
    assert_eq!(&f[30..34], &[198, 18, 5, 5]);
    assert_eq!(
        packet::checksum::checksum(&f[14..34]),
        0,
        "IPv4 header checksum"
    );
    let mut expect = f.clone();
    assert!(packet::checksum::finish_l4_checksum(&mut expect));
    assert_eq!(&expect, f, "the UDP checksum was updated");
}

#[test]
fn a_rule_change_applies_from_the_next_packet() {
    let mut s = switch(
        vec![rule(1, udp_match(0xc613_0000, 16), vec![out(2)])],
        [(true, true); 3],
    );
    let f = udp(3, [198, 19, 0, 1]);
    for _ in 0..3 {
        assert_eq!(s.send(vec![(0, f.clone())]), vec![(1, f.clone())]);
    }
    s.apply(&[FlowMod::Add(rule(
        1,
        udp_match(0xc613_0000, 16),
        vec![out(3)],
    ))]);
    assert_eq!(s.send(vec![(0, f.clone())]), vec![(2, f.clone())]);
}

#[test]
fn normal_hands_the_packet_to_the_bridge() {
    let mut s = switch(
        vec![rule(0, Match::ANY, vec![Action::Output(PortRef::Normal)])],
        [(true, true); 3],
    );
    // Unknown destination: the bridge floods to the other two ports.
    let mut got = s.send(vec![(1, udp(5, [198, 19, 0, 1]))]);
    got.sort_by_key(|g| g.0);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 2]);
}

#[test]
fn with_caches_off_every_packet_is_translated_and_still_forwarded() {
    let mut s = switch(
        vec![rule(1, udp_match(0xc613_0000, 16), vec![out(2)])],
        [(false, false); 3],
    );
    let f = udp(3, [198, 19, 0, 1]);
    let got = s.send((0..10).map(|_| (0, f.clone())).collect());
    assert_eq!(got.len(), 10);
    let st = s.stats();
    assert_eq!(st.installed, 0, "{st:?}");
}

#[test]
fn malformed_and_short_frames_are_switched_on_what_parses_without_a_leak() {
    let mut s = switch(vec![rule(0, Match::ANY, vec![out(2)])], [(true, true); 3]);
    let f = udp(3, [198, 19, 0, 1]);
    let mut frames = Vec::new();
    for len in [0usize, 1, 13, 14, 20, 33, 34, 41, 42] {
        frames.push((0, f[..len.min(f.len())].to_vec()));
    }
    let got = s.send(frames);
    assert!(got.len() >= 8, "{}", got.len());
    assert!(s.shared.malformed_counts().iter().map(|c| c.1).sum::<u64>() > 0);
}

#[test]
fn the_trace_names_the_tier_and_the_rules() {
    let mut s = switch(
        vec![rule(1, udp_match(0xc613_0000, 16), vec![out(2)])],
        [(true, true); 3],
    );
    let inject = s.graph.node_id("inject").expect("inject");
    s.graph.trace_control().arm(inject, 2);
    let f = udp(3, [198, 19, 0, 1]);
    s.send(vec![(0, f.clone())]);
    s.send(vec![(0, f.clone())]);
    let lines = s.trace_lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("miss: classified, megaflow installed"),
        "{lines:?}"
    );
    assert!(lines[1].contains("cache hit"), "{lines:?}");
    assert!(lines.iter().all(|l| l.contains("rules #")), "{lines:?}");
}

/// Ports with different cache switches in one vector: the node looks each group up apart
/// (the keys of the usual shape are written whole for it), and every packet still goes where
/// the rule says, in order, vector after vector, traced or not.
#[test]
fn ports_with_different_cache_switches_share_a_vector() {
    let mut s = switch_with(
        vec![rule(1, udp_match(0xc613_0000, 16), vec![out(3)])],
        [(true, true), (false, true), (true, false)],
        CacheConfig {
            emc_insert_inv_prob: 1,
            // One megaflow would bypass the EMC; this test wants both caches to answer.
            emc_bypass_subtables: 0,
            ..CacheConfig::default()
        },
    );
    let frames: Vec<(u16, Vec<u8>)> = (0..48u16)
        .map(|i| (i % 2, udp(100 + i / 3, [198, 19, 0, 1 + (i % 5) as u8])))
        .collect();
    let expect: Vec<(u16, Vec<u8>)> = frames.iter().map(|f| (2, f.1.clone())).collect();
    for round in 0..3 {
        if round == 2 {
            let inject = s.graph.node_id("inject").expect("inject");
            s.graph.trace_control().arm(inject, 1);
        }
        assert_eq!(s.send(frames.clone()), expect, "round {round}");
    }
    let lines = s.trace_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("cache hit"), "{lines:?}");
    // Port 2 bypasses the megaflow cache: translated, and not sent back out of its own port
    // (output:3 is its input port), beside a hit from port 0.
    let f = udp(9, [198, 19, 0, 1]);
    let got = s.send(vec![(2, f.clone()), (0, f.clone())]);
    assert_eq!(got, vec![(2, f)]);
    let st = s.stats();
    assert!(st.emc_hits > 0 && st.megaflow_hits > 0, "{st:?}");
}

/// Rule counters are summed per vector before they are credited: with more distinct rules in
/// one vector than the sum keeps (`RULE_TALLY`), every rule still counts each of its packets
/// and bytes once, whether they missed (first send) or hit a cache (second).
#[test]
fn rule_counters_count_every_packet_when_a_vector_spans_many_rules() {
    const RULES: u8 = 24;
    let rules = (0..RULES)
        .map(|k| {
            rule(
                DEFAULT_PRIORITY,
                udp_match(0xc613_0000 | k as u32, 32),
                vec![out(2)],
            )
        })
        .collect();
    let mut s = switch(rules, [(true, true); 3]);
    // Three packets per rule, interleaved, in one vector.
    let frames: Vec<(u16, Vec<u8>)> = (0..3u16)
        .flat_map(|j| (0..RULES).map(move |k| (0, udp(1000 + j, [198, 19, 0, k]))))
        .collect();
    let len = frames[0].1.len() as u64;
    for _ in 0..2 {
        assert_eq!(s.send(frames.clone()).len(), frames.len());
    }
    let tables = s.tables.current();
    let ids: Vec<_> = tables.rules().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), RULES as usize);
    for id in ids {
        let st = tables.stats(id).expect("counters");
        assert_eq!((st.packets, st.bytes), (6, 6 * len), "rule {id}");
    }
}

/// `output(port=P,max_len=N)` sends a copy cut to N bytes (first or last output alike); the
/// other outputs send the whole packet.
#[test]
fn a_truncated_output_sends_the_first_bytes_only() {
    let trunc = |port: u16, max_len: u16| Action::OutputTrunc {
        port: PortRef::Number(port),
        max_len,
    };
    let mut s = switch(
        vec![
            rule(
                DEFAULT_PRIORITY,
                udp_match(0xc613_0000, 16),
                vec![trunc(2, 20), out(3)],
            ),
            rule(
                DEFAULT_PRIORITY,
                udp_match(0xc614_0000, 16),
                vec![out(3), trunc(2, 30)],
            ),
        ],
        [(true, true); 3],
    );
    let f = udp(1000, [198, 19, 0, 1]);
    let mut got = s.send(vec![(0, f.clone())]);
    got.sort();
    assert_eq!(got, vec![(1, f[..20].to_vec()), (2, f.clone())]);
    let f = udp(1000, [198, 20, 0, 1]);
    let mut got = s.send(vec![(0, f.clone())]);
    got.sort();
    assert_eq!(got, vec![(1, f[..30].to_vec()), (2, f.clone())]);
    // Longer than the packet: sent whole.
    s.apply(&[FlowMod::Add(rule(
        DEFAULT_PRIORITY,
        udp_match(0xc613_0000, 16),
        vec![trunc(2, 1500)],
    ))]);
    let f = udp(1000, [198, 19, 0, 1]);
    assert_eq!(s.send(vec![(0, f.clone())]), vec![(1, f)]);
}

#[test]
fn a_rewrite_the_packet_has_no_header_for_is_skipped_and_the_rest_runs() {
    // UDP with only 4 bytes of its header: the key says UDP (ports 0), the frame has no
    // ports to write. Open vSwitch's datapath skips the write and sends the packet on.
    let mut s = switch(
        vec![rule(
            1,
            udp_match(0xc613_0000, 16),
            vec![
                Action::SetField {
                    field: Field::TpDst,
                    value: 80,
                    mask: 0xffff,
                },
                out(2),
                out(3),
            ],
        )],
        [(true, true); 3],
    );
    let mut f = udp(9, [198, 19, 0, 1]);
    f.truncate(14 + 20 + 4);
    f[16..18].copy_from_slice(&24u16.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = packet::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let mut got = s.send(vec![(0, f.clone())]);
    got.sort();
    assert_eq!(got, vec![(1, f.clone()), (2, f.clone())]);
    assert_eq!(
        s.shared
            .action_errors
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[path = "punt_tests.rs"]
mod punt;

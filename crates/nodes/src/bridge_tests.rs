//! Crafted-frame tests of `l2-bridge` through a real graph: an injector hands frames straight to
//! the bridge (with the metadata `ethernet-input` would set), capture nodes record what each port
//! sends, and every buffer must come back. Plus a model check of the MAC table.

use super::*;
use crate::drop::ErrorDrop;
use crate::output::InterfaceOutput;
use crate::testkit::{Inject, Queue};
use graph::{Graph, GraphBuilder};
use packet::PoolConfig;
use proptest::prelude::*;
use std::collections::HashMap;

type Captured = Arc<Mutex<Vec<(u16, Vec<u8>)>>>;

/// Ticks per second of the test graph (and its manual clock).
const HZ: u64 = 1000;
const PORTS: u16 = 8;

/// What `ethernet-input` records for a frame of a bridge port: the outer VLAN, the ethertype
/// after the tags and the L3 offset.
fn classify_like_ethernet_input(m: &mut BufferMeta, d: &[u8]) {
    let mut t = be16(d, eth::TYPE);
    let mut l3 = eth::HEADER_LEN;
    m.vlan = 0;
    if t == eth::TYPE_VLAN || t == eth::TYPE_QINQ {
        m.vlan = be16(d, l3) & 0x0fff;
        t = be16(d, l3 + 2);
        l3 += eth::TAG_LEN;
    }
    m.ethertype = t;
    m.l3_offset = l3 as u16;
}

struct Capture {
    name: String,
    port: u16,
    out: Captured,
}

/// Every frame the bridge sends (originals and flood copies) carries the feature line
/// `Inject` gave its packet.
fn check_feature_line(pool: &BufferPool, b: u32) {
    assert!(
        crate::testkit::check_feature_line(pool, b),
        "a frame lost its feature line"
    );
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
            let m = cx.pool.meta(b);
            assert_eq!(m.tx_port, self.port);
            let d = cx.pool.data(b);
            // Metadata stays consistent with the bytes.
            let tagged = be16(d, eth::TYPE) == eth::TYPE_VLAN;
            let l3 = eth::HEADER_LEN + if tagged { eth::TAG_LEN } else { 0 };
            assert_eq!(m.l3_offset as usize, l3, "l3_offset follows the tag");
            check_feature_line(cx.pool, b);
            out.push((self.port, d.to_vec()));
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

struct Bridge {
    graph: Graph,
    pool: BufferPool,
    queue: Queue,
    out: Captured,
    stats: Arc<BridgeStats>,
    clock: ManualClock,
}

fn bridge(config: BridgeConfig, buffers: u32) -> Bridge {
    bridge_aging(config, buffers, None)
}

/// `bridge`, with its aging time shared through `aging` when given.
fn bridge_aging(
    config: BridgeConfig,
    buffers: u32,
    aging: Option<Arc<std::sync::atomic::AtomicU32>>,
) -> Bridge {
    let clock = ManualClock::new(0);
    let mut node = L2Bridge::new(&config)
        .expect("config")
        .with_clock(clock.clone());
    if let Some(a) = aging {
        node = node.with_aging(a);
    }
    let stats = node.stats();
    let queue: Queue = Arc::default();
    let out: Captured = Arc::default();
    let mut b = GraphBuilder::new();
    b.add_input(Box::new(Inject {
        setup: |m, d| {
            if d.len() >= eth::HEADER_LEN + eth::TAG_LEN {
                classify_like_ethernet_input(m, d);
            }
        },
        feature_line: true,
        ..Inject::new(NAME, queue.clone())
    }));
    b.add_node(Box::new(node));
    b.add_node(Box::new(InterfaceOutput::new(
        (0..PORTS).map(|p| Some(format!("tx{p}"))).collect(),
    )));
    b.add_node(Box::new(ErrorDrop::new()));
    for p in 0..PORTS {
        b.add_node(Box::new(Capture {
            name: format!("tx{p}"),
            port: p,
            out: out.clone(),
        }));
    }
    let pool = BufferPool::new(PoolConfig {
        buffers,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool");
    Bridge {
        graph: b.build(0, HZ).expect("graph"),
        pool,
        queue,
        out,
        stats,
        clock,
    }
}

impl Bridge {
    /// Inject `frames` (in one vector when they fit), run to completion, return what each port
    /// sent, in order.
    fn send(&mut self, frames: Vec<(u16, Vec<u8>)>) -> Vec<(u16, Vec<u8>)> {
        self.queue.lock().expect("lock").extend(frames);
        let mut rounds = 0;
        while !self.queue.lock().expect("lock").is_empty() && rounds < 1000 {
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
    fn send1(&mut self, port: u16, frame: Vec<u8>) -> Vec<(u16, Vec<u8>)> {
        self.send(vec![(port, frame)])
    }
    fn drops(&self, reason: &str) -> u64 {
        let s = self.graph.stats();
        let id = s
            .error_id(NAME, reason)
            .unwrap_or_else(|| panic!("no reason {reason}"));
        s.errors[id].get()
    }
    fn total_drops(&self) -> u64 {
        self.graph.stats().total_drops()
    }
    fn advance_seconds(&self, s: u64) {
        self.clock.advance(s * HZ);
    }
}

fn ports_of(out: &[(u16, Vec<u8>)]) -> Vec<u16> {
    let mut p: Vec<u16> = out.iter().map(|(p, _)| *p).collect();
    p.sort_unstable();
    p
}

fn mac(n: u8) -> Mac {
    [2, 0, 0, 0, 0, n]
}
const A: u8 = 0xa;
const B: u8 = 0xb;
const C: u8 = 0xc;
const X: u8 = 0x58;
const BROADCAST: Mac = [0xff; 6];

/// An IPv4-typed frame of `len` bytes before any tag; `tci` adds an 802.1Q tag.
fn frame(dst: Mac, src: Mac, tci: Option<u16>, len: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    if let Some(tci) = tci {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let body = len - eth::HEADER_LEN;
    f.extend((0..body).map(|i| (i * 7 + 3) as u8));
    f
}

fn f(dst: u8, src: u8) -> Vec<u8> {
    frame(mac(dst), mac(src), None, 64)
}

fn ft(dst: u8, src: u8, tci: u16) -> Vec<u8> {
    frame(mac(dst), mac(src), Some(tci), 64)
}

fn access(port: u16, pvid: u16) -> BridgePortConfig {
    BridgePortConfig {
        port,
        mode: BridgePortMode::Access { pvid },
    }
}

fn trunk(port: u16, allowed: &[u16], native: Option<u16>) -> BridgePortConfig {
    BridgePortConfig {
        port,
        mode: BridgePortMode::Trunk {
            allowed: allowed.to_vec(),
            native,
        },
    }
}

/// Domain 1: p0, p1 access VLAN 10; p2 access VLAN 20; p3 trunk 10,20; p4 trunk 20 with native
/// 10. Domain 2: p5, p6 access VLAN 10. Port 7 is in no bridge.
fn topo() -> BridgeConfig {
    BridgeConfig {
        domains: vec![
            BridgeDomainConfig {
                id: 1,
                ports: vec![
                    access(0, 10),
                    access(1, 10),
                    access(2, 20),
                    trunk(3, &[10, 20], None),
                    trunk(4, &[20], Some(10)),
                ],
            },
            BridgeDomainConfig {
                id: 2,
                ports: vec![access(5, 10), access(6, 10)],
            },
        ],
        ..BridgeConfig::default()
    }
}

fn topo_bridge() -> Bridge {
    bridge(topo(), 256)
}

#[test]
fn learns_then_forwards_known_unicast() {
    let mut br = topo_bridge();
    // B unknown: flooded to the other VLAN 10 ports of domain 1 only.
    let out = br.send1(0, f(B, A));
    assert_eq!(ports_of(&out), vec![1, 3, 4]);
    // B answers from port 1: A is known on port 0.
    let out = br.send1(1, f(A, B));
    assert_eq!(out, vec![(0, f(A, B))]);
    // And now B is known on port 1.
    let out = br.send1(0, f(B, A));
    assert_eq!(out, vec![(1, f(B, A))]);
    let c = br.stats.counts();
    assert_eq!((c.learned, c.macs, c.flooded, c.flood_copies), (2, 2, 1, 2));
    assert_eq!((c.moves, c.refused, c.aged), (0, 0, 0));
    assert_eq!(br.total_drops(), 0);
    let s = br.graph.stats();
    let id = br.graph.node_id(NAME).expect("node");
    assert_eq!(s.nodes[id].packets.get(), 3);
    assert_eq!(s.nodes[id].emitted.get(), 2);
}

#[test]
fn unknown_unicast_stays_in_its_domain_and_vlan() {
    let mut br = topo_bridge();
    // VLAN 20 of domain 1: p2 (access), p3 (trunk), p4 (trunk, tagged).
    let out = br.send1(2, f(X, A));
    assert_eq!(ports_of(&out), vec![3, 4]);
    for (_, o) in &out {
        assert_eq!(o, &ft(X, A, 20), "VLAN 20 leaves the trunks tagged");
    }
    // Domain 2 reuses VLAN number 10 but is a separate bridge.
    let out = br.send1(5, f(X, A));
    assert_eq!(out, vec![(6, f(X, A))]);
    // A learned in domain 2 VLAN 10 is unknown in domain 1 VLAN 10: flooded, not sent to p5.
    let out = br.send1(0, f(A, B));
    assert_eq!(ports_of(&out), vec![1, 3, 4]);
}

#[test]
fn broadcast_and_multicast_flood_even_when_learned() {
    let mut br = topo_bridge();
    br.send1(1, f(A, B)); // B learned on p1
    let out = br.send1(0, frame(BROADCAST, mac(A), None, 64));
    assert_eq!(ports_of(&out), vec![1, 3, 4]);
    let mcast = [0x01, 0x00, 0x5e, 0, 0, 1];
    let out = br.send1(3, frame(mcast, mac(C), Some(10), 64));
    assert_eq!(ports_of(&out), vec![0, 1, 4]);
    for (p, o) in &out {
        assert_eq!(o, &frame(mcast, mac(C), None, 64), "untagged on {p}");
    }
    assert_eq!(br.stats.counts().flooded, 3);
}

#[test]
fn access_to_trunk_pushes_the_tag_and_back_pops_it() {
    let mut br = topo_bridge();
    // X lives behind trunk p3 in VLAN 10, sends with priority 5.
    let out = br.send1(3, ft(A, X, 0xa00a));
    // Flooded: untagged to the access ports and p4's native VLAN.
    assert_eq!(ports_of(&out), vec![0, 1, 4]);
    for (_, o) in &out {
        assert_eq!(o, &f(A, X), "tag popped");
    }
    // A on access p0 to X: the tag is pushed with VID 10, priority 0.
    let out = br.send1(0, f(X, A));
    assert_eq!(out, vec![(3, ft(X, A, 0x000a))]);
    let want: Vec<u8> = [
        &mac(X)[..],
        &mac(A)[..],
        &[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00],
        &f(X, A)[14..],
    ]
    .concat();
    assert_eq!(out[0].1, want, "byte-exact tagged frame");
    // Back: popped, byte-exact.
    let out = br.send1(3, ft(A, X, 0x000a));
    assert_eq!(out, vec![(0, f(A, X))]);
}

#[test]
fn trunk_to_trunk_keeps_the_tag_and_native_vlan_leaves_untagged() {
    let mut br = topo_bridge();
    // C behind p4 in VLAN 20 (tagged) and in native VLAN 10 (untagged).
    br.send1(4, ft(X, C, 0x0014));
    br.send1(4, f(X, C));
    // From p3 in VLAN 20 with priority 3: unchanged on p4.
    let out = br.send1(3, ft(C, A, 0x6014));
    assert_eq!(out, vec![(4, ft(C, A, 0x6014))]);
    // From p3 in VLAN 10: p4's native VLAN, so untagged.
    let out = br.send1(3, ft(C, A, 0x000a));
    assert_eq!(out, vec![(4, f(C, A))]);
    // A native frame tagged with the native VID is accepted too.
    let out = br.send1(4, ft(A, C, 0x000a));
    assert_eq!(out, vec![(3, ft(A, C, 0x000a))]);
}

#[test]
fn priority_tagged_and_pvid_tagged_frames_on_access_ports() {
    let mut br = topo_bridge();
    br.send1(3, ft(A, X, 0x000a)); // X on p3
    br.send1(1, f(A, B)); // B on p1
                          // VID 0 with priority 1 on access p0: VLAN 10; the priority travels in the pushed tag.
    let out = br.send1(0, ft(X, A, 0x2000));
    assert_eq!(out, vec![(3, ft(X, A, 0x200a))]);
    let out = br.send1(0, ft(B, A, 0x2000));
    assert_eq!(out, vec![(1, f(B, A))], "popped to an access port");
    // Tagged with the access port's own VLAN: accepted.
    let out = br.send1(0, ft(B, A, 0x000a));
    assert_eq!(out, vec![(1, f(B, A))]);
    assert_eq!(br.total_drops(), 0);
}

#[test]
fn vlan_not_allowed_and_no_domain_are_dropped() {
    let mut br = topo_bridge();
    assert!(br.send1(3, ft(B, A, 30)).is_empty(), "VLAN 30 not on p3");
    assert!(
        br.send1(3, f(B, A)).is_empty(),
        "untagged on a trunk without native"
    );
    assert!(
        br.send1(0, ft(B, A, 20)).is_empty(),
        "VLAN 20 on an access port of 10"
    );
    assert!(
        !br.send1(4, ft(B, A, 0x2000)).is_empty(),
        "p4 has native 10"
    );
    assert_eq!(br.drops("vlan-not-allowed"), 3);
    assert!(br.send1(7, f(B, A)).is_empty());
    assert_eq!(br.drops("no-domain"), 1);
    // Nothing was learned from refused frames (A on p4 only).
    assert_eq!(br.stats.counts().learned, 1);
}

#[test]
fn same_port_invalid_source_and_runt_are_dropped() {
    let mut br = topo_bridge();
    br.send1(0, f(X, B)); // B on p0
    assert!(br.send1(0, f(B, A)).is_empty());
    assert_eq!(br.drops("same-port"), 1);
    assert!(br
        .send1(0, frame(mac(B), [1, 0, 0, 0, 0, 9], None, 64))
        .is_empty());
    assert!(br.send1(0, frame(mac(B), [0; 6], None, 64)).is_empty());
    assert_eq!(br.drops("invalid-src-mac"), 2);
    assert!(br.send1(0, vec![0x02; 13]).is_empty());
    let mut short_tag = f(B, A)[..16].to_vec();
    short_tag[12..14].copy_from_slice(&[0x81, 0x00]);
    assert!(br.send1(0, short_tag).is_empty());
    assert_eq!(br.drops("runt"), 2);
}

#[test]
fn flood_with_nobody_else_is_dropped() {
    let mut cfg = topo();
    cfg.domains.push(BridgeDomainConfig {
        id: 3,
        ports: vec![access(7, 99)],
    });
    let mut br = bridge(cfg, 64);
    assert!(br.send1(7, f(X, A)).is_empty());
    assert_eq!(br.drops("no-other-port"), 1);
}

#[test]
fn mac_move_updates_the_port() {
    let mut br = topo_bridge();
    br.send1(0, f(X, A)); // A on p0
    br.send1(1, f(X, A)); // A moves to p1
    let out = br.send1(3, ft(A, B, 10));
    assert_eq!(out, vec![(1, f(A, B))]);
    let c = br.stats.counts();
    assert_eq!((c.moves, c.learned, c.macs), (1, 2, 2));
}

#[test]
fn entries_age_out_and_refreshing_keeps_them() {
    let mut br = topo_bridge();
    br.send1(1, f(X, B)); // B on p1 at t = 0
    assert_eq!(br.send1(0, f(B, A)), vec![(1, f(B, A))]);
    br.advance_seconds(200);
    br.send1(1, f(X, B)); // refreshed at t = 200
    br.advance_seconds(200);
    assert_eq!(
        br.send1(0, f(B, A)),
        vec![(1, f(B, A))],
        "still known at t = 400"
    );
    br.advance_seconds(301);
    let out = br.send1(0, f(B, A));
    assert_eq!(ports_of(&out), vec![1, 3, 4], "aged out: flooded again");
    let c = br.stats.counts();
    assert!(c.aged >= 1, "{c:?}");
    assert_eq!(c.flooded, 3);
}

#[test]
fn the_aging_time_changes_live() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let age = Arc::new(AtomicU32::new(300));
    let mut br = bridge_aging(topo(), 256, Some(age.clone()));
    br.send1(1, f(X, B)); // B on p1 at t = 0
    br.advance_seconds(20);
    assert_eq!(
        br.send1(0, f(B, A)),
        vec![(1, f(B, A))],
        "known at 300 s aging"
    );
    // Down to 10 s: B, last seen 20 s ago, is forgotten; then 0 keeps entries forever.
    age.store(10, Ordering::Relaxed);
    let out = br.send1(0, f(B, A));
    assert_eq!(ports_of(&out), vec![1, 3, 4], "aged out: flooded again");
    age.store(0, Ordering::Relaxed);
    br.send1(1, f(X, B));
    br.advance_seconds(100_000);
    assert_eq!(br.send1(0, f(B, A)), vec![(1, f(B, A))], "never ages at 0");
}

#[test]
fn the_sweep_reclaims_expired_entries_without_traffic_to_them() {
    let mut cfg = topo();
    cfg.max_macs = 4; // 16 slots: one sweep of 16 covers the whole table
    let mut br = bridge(cfg, 64);
    for h in 1..=4 {
        br.send1(0, f(X, h));
    }
    assert_eq!(br.stats.counts().macs, 4);
    br.advance_seconds(301);
    // Host 1 comes back (on another port: a re-learn, not a move); two calls sweep 32 slots.
    br.send1(1, f(X, 1));
    br.send1(1, f(X, 1));
    let c = br.stats.counts();
    assert_eq!((c.macs, c.aged, c.learned), (1, 4, 5), "{c:?}");
    assert_eq!((c.refused, c.moves), (0, 0), "{c:?}");
    // The room is back.
    br.send1(1, f(X, C));
    assert_eq!(br.stats.counts().macs, 2);
}

#[test]
fn full_table_refuses_new_macs_but_forwards_their_frames() {
    let mut cfg = topo();
    cfg.max_macs = 2;
    let mut br = bridge(cfg, 64);
    br.send1(0, f(X, A));
    br.send1(1, f(X, B));
    // C is refused but its frame to A still goes out, and so does a flood from C.
    assert_eq!(br.send1(3, ft(A, C, 10)), vec![(0, f(A, C))]);
    assert_eq!(ports_of(&br.send1(3, ft(X, C, 10))), vec![0, 1, 4]);
    // Traffic to C floods: C is unknown.
    assert_eq!(ports_of(&br.send1(0, f(C, A))), vec![1, 3, 4]);
    let c = br.stats.counts();
    assert_eq!((c.learned, c.refused, c.macs), (2, 2, 2));
    // Known MACs are still refreshed and can still move when the table is full.
    br.send1(4, f(X, B));
    assert_eq!(br.send1(0, f(B, A)), vec![(4, f(B, A))]);
    assert_eq!(br.stats.counts().moves, 1);
    assert_eq!(br.total_drops(), 0, "refusals are not drops");
}

#[test]
fn pool_exhaustion_during_flood_is_counted() {
    // Two buffers: the original and one copy; the second copy finds the pool empty.
    let mut br = bridge(topo(), 2);
    let out = br.send1(0, frame(BROADCAST, mac(A), None, 64));
    assert_eq!(ports_of(&out), vec![1, 3]);
    assert_eq!(br.drops("no-buffer-for-flood"), 1);
    assert_eq!(br.stats.counts().flood_copies, 1);
}

#[test]
fn flood_queue_overflow_is_counted() {
    let mut cfg = topo();
    cfg.flood_queue = 3;
    let mut br = bridge(cfg, 64);
    // One vector of 4 broadcasts from p0: 8 copies wanted, 3 fit.
    let frames = (0..4)
        .map(|i| (0, frame(BROADCAST, mac(A + i), None, 64)))
        .collect();
    let out = br.send(frames);
    assert_eq!(out.len(), 4 + 3);
    assert_eq!(br.drops("flood-queue-full"), 5);
    // The next call has room again.
    assert_eq!(br.send1(0, frame(BROADCAST, mac(A), None, 64)).len(), 3);
}

#[test]
fn copies_and_unicast_keep_their_order_on_a_port() {
    let mut br = topo_bridge();
    // In one vector: A -> X floods (p1 gets the original, p3 and p4 copies); X answers from
    // p3; A -> X then goes to p3 as known unicast. p3 must send the copy first.
    let first = frame(mac(X), mac(A), None, 100);
    let third = frame(mac(X), mac(A), None, 120);
    let out = br.send(vec![
        (0, first.clone()),
        (3, ft(A, X, 10)),
        (0, third.clone()),
    ]);
    let on3: Vec<&Vec<u8>> = out
        .iter()
        .filter(|(p, _)| *p == 3)
        .map(|(_, f)| f)
        .collect();
    assert_eq!(on3.len(), 2);
    assert_eq!(on3[0].len(), 104, "the flood copy first");
    assert_eq!(on3[1].len(), 124, "then the unicast frame");
    let on1: Vec<usize> = out
        .iter()
        .filter(|(p, _)| *p == 1)
        .map(|(_, f)| f.len())
        .collect();
    assert_eq!(on1, vec![100]);
}

#[test]
fn large_frames_are_copied_whole() {
    let mut br = topo_bridge();
    let big = frame(BROADCAST, mac(A), None, 1514);
    let out = br.send1(0, big.clone());
    assert_eq!(ports_of(&out), vec![1, 3, 4]);
    for (p, o) in &out {
        if *p == 3 {
            assert_eq!(o.len(), 1518);
            assert_eq!(&o[16..], &big[12..]);
        } else {
            assert_eq!(o, &big);
        }
    }
}

#[test]
fn snapshot_lists_entries_with_ages() {
    let mut cfg = topo();
    cfg.max_macs = 8; // 16 slots: a snapshot pass takes one call
    let mut br = bridge(cfg, 64);
    assert_eq!(br.stats.snapshot().generation, 0);
    br.send1(0, f(X, A));
    br.send1(3, ft(X, B, 20));
    br.send1(5, f(X, A));
    // The first call published right away (with A only); the next is due a second later.
    let s = br.stats.snapshot();
    assert_eq!(s.generation, 1);
    assert_eq!(s.entries.len(), 1);
    br.advance_seconds(5);
    br.send1(1, f(X, C));
    let s = br.stats.snapshot();
    assert_eq!(s.generation, 2);
    assert!(s.taken_unix_ms > 0);
    let e = |domain, vlan, m: u8, port, age_seconds| MacEntry {
        domain,
        vlan,
        mac: mac(m),
        port,
        age_seconds,
    };
    assert_eq!(
        s.entries,
        vec![
            e(1, 10, A, 0, 5),
            e(1, 10, C, 1, 0),
            e(1, 20, B, 3, 5),
            e(2, 10, A, 5, 5),
        ]
    );
}

#[test]
fn bad_configurations_are_refused() {
    let bad = |domains: Vec<BridgeDomainConfig>| {
        L2Bridge::new(&BridgeConfig {
            domains,
            ..BridgeConfig::default()
        })
        .err()
        .expect("refused")
        .to_string()
    };
    let d = |id, ports| BridgeDomainConfig { id, ports };
    assert!(bad(vec![d(1, vec![access(0, 10), access(0, 20)])]).contains("port 0"));
    assert!(bad(vec![d(1, vec![access(0, 10)]), d(2, vec![access(0, 10)])]).contains("port 0"));
    assert!(bad(vec![d(1, vec![]), d(1, vec![])]).contains("domain 1"));
    assert!(bad(vec![d(1, vec![access(0, 0)])]).contains("1..=4094"));
    assert!(bad(vec![d(1, vec![trunk(0, &[4095], None)])]).contains("1..=4094"));
    assert!(bad(vec![d(1, vec![trunk(0, &[], None)])]).contains("no VLAN"));
    let too_big = BridgeConfig {
        max_macs: MAX_MAX_MACS + 1,
        ..BridgeConfig::default()
    };
    assert!(L2Bridge::new(&too_big).is_err());
}

// ---------------------------------------------------------------------------------------------
// The MAC table against a model.

#[derive(Clone, Debug)]
enum Op {
    Learn(u64, u16),
    Lookup(u64),
    Sweep(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Few keys over two bridge indexes, so chains collide and wrap in a 16-slot table.
    let key = (0u16..2, 0u64..12).prop_map(|(bd, m)| mac_key(bd, 0x0200_0000_0000 | m));
    prop_oneof![
        4 => (key.clone(), 0u16..4).prop_map(|(k, p)| Op::Learn(k, p)),
        4 => key.prop_map(Op::Lookup),
        1 => (1usize..20).prop_map(Op::Sweep),
        2 => (0u64..8).prop_map(Op::Advance),
    ]
}

proptest! {
    #[test]
    fn mac_table_matches_a_model(ops in proptest::collection::vec(op(), 1..300)) {
        const AGE: u64 = 10;
        let st = BridgeStats::default();
        let mut t = MacTable::new(8);
        // key -> (port, seen); entries the table accepted.
        let mut model: HashMap<u64, (u16, u64)> = HashMap::new();
        let mut now = 0u64;
        let live = |m: &HashMap<u64, (u16, u64)>, k: u64, now: u64| {
            m.get(&k).filter(|(_, seen)| now - seen <= AGE).map(|(p, _)| *p)
        };
        for op in ops {
            match op {
                Op::Learn(k, p) => {
                    let refused = st.refused.get();
                    t.learn(k, p, now, AGE, &st);
                    if st.refused.get() == refused {
                        model.insert(k, (p, now));
                    } else {
                        prop_assert!(live(&model, k, now).is_none(), "refused a known MAC");
                        prop_assert_eq!(t.len(), 8);
                    }
                }
                Op::Lookup(k) => {
                    prop_assert_eq!(t.lookup(k, now, AGE, &st), live(&model, k, now));
                }
                Op::Sweep(n) => t.sweep(now, AGE, n, &st),
                Op::Advance(s) => now += s,
            }
            prop_assert!(t.len() <= 8);
            let live_count = model.keys().filter(|&&k| live(&model, k, now).is_some()).count();
            prop_assert!(t.len() >= live_count);
        }
        // A full sweep leaves exactly the live entries.
        t.sweep(now, AGE, 64, &st);
        let live_count = model.keys().filter(|&&k| live(&model, k, now).is_some()).count();
        prop_assert_eq!(t.len(), live_count);
        for &k in model.keys() {
            prop_assert_eq!(t.lookup(k, now, AGE, &st), live(&model, k, now));
        }
        let c = (st.learned.get(), st.aged.get());
        prop_assert_eq!(c.0 - c.1, t.len() as u64, "learned - aged = entries");
    }
}

/// Rough cost of the node: `cargo test --release -p vecplane-nodes bridge_cost -- --ignored
/// --nocapture` prints l2-bridge's TSC ticks per packet for known unicast and for floods.
#[test]
#[ignore]
fn bridge_cost() {
    let hosts = 4096u32;
    let host = |h: u32| -> Mac { [2, 0, 0, (h >> 16) as u8, (h >> 8) as u8, h as u8] };
    for (what, flood) in [("known unicast", false), ("broadcast to 3 ports", true)] {
        let mut br = bridge(topo(), 4096);
        // Learn every host: even ones on p0, odd ones on p1.
        let learn: Vec<(u16, Vec<u8>)> = (0..hosts)
            .map(|h| ((h % 2) as u16, frame(BROADCAST, host(h), None, 64)))
            .collect();
        for chunk in learn.chunks(256) {
            br.send(chunk.to_vec());
        }
        let id = br.graph.node_id(NAME).expect("node");
        let s = br.graph.stats();
        let (c0, p0) = (s.nodes[id].clocks.get(), s.nodes[id].packets.get());
        for round in 0..200u32 {
            let v: Vec<(u16, Vec<u8>)> = (0..256u32)
                .map(|i| {
                    let h = ((round * 256 + i) % hosts) & !1; // even: on p0
                    let dst = if flood { BROADCAST } else { host(h + 1) };
                    (0, frame(dst, host(h), None, 64))
                })
                .collect();
            br.send(v);
        }
        let (c1, p1) = (s.nodes[id].clocks.get(), s.nodes[id].packets.get());
        println!(
            "l2-bridge {what}: {:.0} ticks/packet ({} packets)",
            (c1 - c0) as f64 / (p1 - p0) as f64,
            p1 - p0
        );
    }
}

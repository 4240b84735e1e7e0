//! `controller` actions through a real graph: the copy punted (bytes, reason, in_port, table,
//! cookie), the packet still forwarded, every packet of a cached flow punted, a table-miss
//! punt consuming the packet without a drop, the ring full and the rate limit counted apart.

use super::*;
use crate::neighbour::WorkerCell;
use channel::punt::{punt_channel, Bell, PuntConfig, PuntConsumer, PuntMeta, PuntReason};
use flow::ofctl::parse_flow;

fn punting(rules: &[&str], config: PuntConfig) -> (Switch, PuntConsumer) {
    let rules = rules
        .iter()
        .map(|r| parse_flow(r).expect("a rule"))
        .collect();
    let (p, c) = punt_channel(&config, 0, hz(), Arc::new(Bell::new()));
    let s = switch_full(
        rules,
        [(true, true); 3],
        CacheConfig::default(),
        Some(Arc::new(WorkerCell::new(p))),
    );
    (s, c)
}

fn roomy() -> PuntConfig {
    PuntConfig {
        slots: 64,
        snap_bytes: 2048,
        per_second: 1_000_000,
        burst: 1000,
    }
}

fn drain(c: &mut PuntConsumer) -> Vec<(PuntMeta, Vec<u8>)> {
    std::iter::from_fn(|| c.pop(|s| (s.meta, s.bytes().to_vec()))).collect()
}

#[test]
fn controller_then_output_punts_a_copy_and_still_forwards() {
    let (mut s, mut c) = punting(
        &["cookie=0xbeef,priority=10,udp,actions=controller,output:2"],
        roomy(),
    );
    let f = udp(1000, [198, 19, 0, 1]);
    let got = s.send(vec![(0, f.clone())]);
    assert_eq!(got, vec![(1, f.clone())], "forwarded as it was");
    let punted = drain(&mut c);
    assert_eq!(punted.len(), 1);
    let (m, bytes) = &punted[0];
    assert_eq!(bytes, &f, "the copy is the packet");
    assert_eq!(m.reason, PuntReason::Action);
    assert_eq!((m.rx_port, m.in_port, m.switch, m.table), (0, 1, 0, 0));
    assert_eq!(m.cookie, 0xbeef);
    assert_eq!(m.length as usize, f.len());
    // The flow is in the caches now, and its packets still punt, each of them.
    let got = s.send(vec![(0, f.clone()), (0, f.clone())]);
    assert_eq!(got.len(), 2);
    assert_eq!(drain(&mut c).len(), 2, "a cached flow punts every packet");
    let st = s.stats();
    assert_eq!(st.installed, 1, "{st:?}");
    assert!(st.emc_hits + st.megaflow_hits >= 2, "{st:?}");
}

#[test]
fn a_table_miss_punt_consumes_the_packet_without_a_drop() {
    let (mut s, mut c) = punting(
        &[
            "priority=100,udp,nw_dst=198.19.9.9,actions=output:3",
            "cookie=0x5,priority=0,actions=controller:40",
        ],
        roomy(),
    );
    let f = udp(1000, [198, 19, 0, 1]);
    assert!(s.send(vec![(1, f.clone())]).is_empty(), "nothing forwarded");
    assert_eq!(
        s.drops("dropped-by-rules"),
        0,
        "not a drop: it went to the controller"
    );
    let punted = drain(&mut c);
    assert_eq!(punted.len(), 1);
    assert_eq!(
        punted[0].0.reason,
        PuntReason::NoMatch,
        "an explicit table miss"
    );
    assert_eq!(punted[0].0.in_port, 2);
    assert_eq!(punted[0].1, f[..40], "cut at max_len");
    assert_eq!(punted[0].0.length as usize, f.len());
}

#[test]
fn the_copy_is_the_packet_as_the_actions_made_it_and_the_output_is_not_changed_after() {
    let (mut s, mut c) = punting(
        &["priority=10,udp,actions=output:2,mod_nw_dst:198.19.7.7,controller"],
        roomy(),
    );
    let f = udp(1000, [198, 19, 0, 1]);
    let got = s.send(vec![(0, f.clone())]);
    assert_eq!(
        got,
        vec![(1, f.clone())],
        "the output left before the rewrite"
    );
    let punted = drain(&mut c);
    assert_eq!(punted.len(), 1);
    assert_eq!(
        punted[0].1[30..34],
        [198, 19, 7, 7],
        "the punt saw the rewrite"
    );
}

#[test]
fn a_full_ring_and_the_rate_limit_lose_copies_not_packets() {
    let small = PuntConfig {
        slots: 2,
        ..roomy()
    };
    let (mut s, mut c) = punting(&["priority=10,udp,actions=controller,output:2"], small);
    let f = udp(1000, [198, 19, 0, 1]);
    let got = s.send((0..5).map(|_| (0, f.clone())).collect());
    assert_eq!(got.len(), 5, "every packet forwarded");
    assert_eq!(drain(&mut c).len(), 2);
    assert_eq!(s.drops("punt-ring-full"), 3);
    let slow = PuntConfig {
        per_second: 1,
        burst: 2,
        ..roomy()
    };
    let (mut s, mut c) = punting(&["priority=10,udp,actions=controller,output:2"], slow);
    let got = s.send((0..5).map(|_| (0, f.clone())).collect());
    assert_eq!(got.len(), 5);
    assert_eq!(drain(&mut c).len(), 2, "the burst");
    assert_eq!(s.drops("punt-rate-limited"), 3);
    assert_eq!(s.drops("punt-ring-full"), 0);
}

#[test]
fn without_a_punt_ring_the_copies_are_counted_lost() {
    let mut s = switch(
        vec![parse_flow("priority=10,udp,actions=controller,output:2").expect("rule")],
        [(true, true); 3],
    );
    let f = udp(1000, [198, 19, 0, 1]);
    assert_eq!(s.send(vec![(0, f.clone())]), vec![(1, f)]);
    assert_eq!(s.drops("punt-ring-full"), 1);
}

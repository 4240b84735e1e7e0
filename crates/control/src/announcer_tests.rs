//! The announcer against the real BIRD 2 in a private namespace (root; skipped elsewhere,
//! failed in CI): nothing is announced until every worker's heartbeat moves; a VIP is announced
//! while it has a server in its table and withdrawn when health takes the last one out; a
//! stalled worker takes the liveness device down (BIRD withdraws) and it comes back; a drain
//! withdraws everything and is ready once the VIPs' traffic stopped; shutdown withdraws.

use super::Announcer;
use crate::bgp::real_bird_tests::{missing, Bird};
use crate::bgp::BgpConfig;
use dataplane::idle::IdleStats;
use dataplane::lb::LbControl;
use lb::model::{LbCommand, LbState};
use ports::netns;
use std::sync::Arc;
use std::time::{Duration, Instant};

const VIP: &str = "198.18.100.1/32";

fn lb() -> Arc<LbControl> {
    let cmds = lb::cli::parse_lines(
        "lb vip 198.18.100.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
         lb as 198.18.100.1/32 protocol tcp port 80 198.18.12.11 198.18.12.12\n",
    )
    .expect("lines");
    let state = LbState::new().apply(&cmds).expect("apply");
    Arc::new(LbControl::without_workers(state, Vec::new(), 1))
}

fn set_health(lb: &LbControl, down: bool) {
    let key = lb.state().vips().next().expect("a vip").spec.key;
    lb.apply(&[LbCommand::SetHealth {
        vip: key,
        servers: vec![
            "198.18.12.11".parse().unwrap(),
            "198.18.12.12".parse().unwrap(),
        ],
        down,
        flush: false,
    }])
    .expect("set health");
}

/// Tick (inside BIRD's namespace, where the liveness device is) while beating, until
/// `show bgp`'s JSON satisfies `ok`.
fn tick_until(
    a: &Announcer,
    bird: &Bird,
    beat: &IdleStats,
    beating: bool,
    what: &str,
    ok: impl Fn(&serde_json::Value) -> bool,
) {
    let t0 = Instant::now();
    loop {
        if beating {
            beat.heartbeat.add(1);
        }
        netns::run_in(&bird.ns, || a.tick()).expect("enter the namespace");
        let v = a.show().1;
        if ok(&v) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{what}: not within 5 s: {v}\nBIRD log:\n{}",
            bird.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_announcer_follows_forwarding_health_stalls_and_drain() {
    if !testenv::can_run(missing()) {
        return;
    }
    let mut cfg = BgpConfig::new("", "");
    cfg.interface = "vpltest0".into();
    cfg.stall = Duration::from_millis(200);
    cfg.drain_quiet = Duration::from_millis(200);
    cfg.drain_timeout = Duration::from_secs(5);
    let bird = Bird::start_with(&mut cfg, false);
    let lb = lb();
    let beat = Arc::new(IdleStats::default());
    let a = netns::run_in(&bird.ns, || {
        Announcer::start(cfg.clone(), lb.clone(), vec![beat.clone()], None)
    })
    .expect("enter the namespace")
    .expect("the announcer starts");
    let has_vip = |t: &str| t.contains(VIP);

    // Not forwarding yet: nothing announced.
    netns::run_in(&bird.ns, || a.tick()).expect("ns");
    assert_eq!(a.show().1["phase"], "waiting");
    bird.routes_until("vecplane4", |t| !has_vip(t));
    // The worker moves: announced.
    tick_until(&a, &bird, &beat, true, "announced", |v| {
        v["announced"][0] == VIP
    });
    bird.routes_until("vecplane4", has_vip);

    // Every server down by health: withdrawn; one up: announced again.
    set_health(&lb, true);
    tick_until(&a, &bird, &beat, true, "withdrawn", |v| {
        v["announced"].as_array().is_some_and(|x| x.is_empty())
    });
    bird.routes_until("vecplane4", |t| !has_vip(t));
    set_health(&lb, false);
    tick_until(&a, &bird, &beat, true, "announced again", |v| {
        v["announced"][0] == VIP
    });
    bird.routes_until("vecplane4", has_vip);

    // The worker stalls: the liveness device goes down and BIRD withdraws; it moves again.
    tick_until(&a, &bird, &beat, false, "liveness down", |v| {
        v["liveness_up"] == false
    });
    bird.routes_until("vecplane4", |t| !has_vip(t));
    assert_eq!(a.show().1["stalls"], 1);
    tick_until(&a, &bird, &beat, true, "liveness up", |v| {
        v["liveness_up"] == true && v["announced"][0] == VIP
    });
    bird.routes_until("vecplane4", has_vip);

    // Drain: withdrawn at once, ready once no VIP traffic for drain-quiet.
    let (_, v) = netns::run_in(&bird.ns, || a.drain()).expect("ns");
    assert_eq!(v["phase"], "draining");
    bird.routes_until("vecplane4", |t| !has_vip(t));
    tick_until(&a, &bird, &beat, true, "ready", |v| {
        v["ready_to_stop"] == true
    });
    // Cancel: announced again; shutdown: withdrawn for good.
    netns::run_in(&bird.ns, || a.undrain()).expect("ns");
    tick_until(&a, &bird, &beat, true, "serving", |v| {
        v["phase"] == "serving" && v["announced"][0] == VIP
    });
    bird.routes_until("vecplane4", has_vip);
    netns::run_in(&bird.ns, || a.shutdown()).expect("ns");
    bird.routes_until("vecplane4", |t| !has_vip(t));
    assert_eq!(a.show().1["phase"], "stopping");
    assert_eq!(a.show().1["errors"], 0, "{}", a.show().0);
}

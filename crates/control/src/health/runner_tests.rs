//! The runner with a fake `HealthHost` (and mostly a fake prober, so these run anywhere):
//! transitions reach the LB with drain or flush and are logged and kept; targets are re-read
//! (added, removed, re-added with another slot, disagreements re-applied); unprobeable targets
//! are reported and left alone; ports are leased before and released after every probe, never
//! shared; first probes are spread; stop is prompt. One test (root) probes for real inside a
//! namespace through `HealthHost::enter`.

use super::outcome::{FailReason, ProbeOutcome};
use super::runner::{HealthHandle, HealthHost, HealthRunner, ProbeJob, Prober, Target};
use super::status::{HealthStatus, TargetState};
use super::testns::{missing, TestNs};
use lb::health::{HealthCheck, HealthConfig, OnDown, ProbeKind, ProbePath, ProbeSources};
use lb::model::{AsSlot, Encap, Prefix, VipKey, VipProtocol};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `set_health` call.
type Call = (VipKey, IpAddr, bool, bool);

#[derive(Default)]
struct FakeHost {
    targets: Mutex<Vec<Target>>,
    calls: Mutex<Vec<Call>>,
    leases: Mutex<HashMap<u16, AsSlot>>,
    leased: Mutex<u64>,
    violations: Mutex<Vec<String>>,
    enter_fails: bool,
    ns: Option<TestNs>,
}

impl HealthHost for FakeHost {
    fn enter(&self) -> io::Result<()> {
        if self.enter_fails {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        self.ns.as_ref().map_or(Ok(()), TestNs::enter)
    }

    fn targets(&self) -> Vec<Target> {
        self.targets.lock().expect("lock").clone()
    }

    fn set_health(
        &self,
        vip: &VipKey,
        server: IpAddr,
        down: bool,
        flush: bool,
    ) -> Result<(), String> {
        self.calls
            .lock()
            .expect("lock")
            .push((*vip, server, down, flush));
        for t in self.targets.lock().expect("lock").iter_mut() {
            if t.vip == *vip && t.server == server {
                t.health_down = down;
            }
        }
        Ok(())
    }

    fn lease(&self, port: u16, slot: AsSlot) {
        *self.leased.lock().expect("lock") += 1;
        if let Some(old) = self.leases.lock().expect("lock").insert(port, slot) {
            self.violations
                .lock()
                .expect("lock")
                .push(format!("port {port} leased twice ({old:?}, {slot:?})"));
        }
    }

    fn release(&self, port: u16) {
        if self.leases.lock().expect("lock").remove(&port).is_none() {
            self.violations
                .lock()
                .expect("lock")
                .push(format!("port {port} released unleased"));
        }
    }
}

impl FakeHost {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("lock").clone()
    }

    fn set_targets(&self, t: Vec<Target>) {
        *self.targets.lock().expect("lock") = t;
    }

    fn check_clean(&self) {
        let v = self.violations.lock().expect("lock").clone();
        assert!(v.is_empty(), "{v:?}");
        assert!(
            self.leases.lock().expect("lock").is_empty(),
            "leases left after stop"
        );
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("addr")
}

fn vip() -> VipKey {
    VipKey {
        prefix: Prefix::host(ip("198.18.1.1")),
        protocol: VipProtocol::Tcp,
        port: 80,
    }
}

fn check(on_down: OnDown, interval_ms: u64) -> HealthCheck {
    HealthCheck {
        vip: vip(),
        kind: ProbeKind::Tcp,
        port: None,
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(interval_ms / 2),
        rise: 2,
        fall: 2,
        on_down,
        path: ProbePath::Encap,
    }
}

fn config(checks: Vec<HealthCheck>) -> HealthConfig {
    HealthConfig {
        sources: ProbeSources {
            ip4: Some("198.18.12.1".parse().expect("v4")),
            ip6: None,
        },
        checks,
    }
}

fn target(server: &str, slot: u32) -> Target {
    Target {
        check: 0,
        vip: vip(),
        vip_addr: ip("198.18.1.1"),
        encap: Encap::L3dsr { dscp: 23 },
        server: ip(server),
        slot: AsSlot(slot),
        health_down: false,
    }
}

/// Outcomes by slot (default: success), and every probe's (time, slot, local, destination).
#[derive(Default)]
struct FakeNet {
    outcomes: Mutex<HashMap<AsSlot, ProbeOutcome>>,
    log: Mutex<Vec<(Instant, AsSlot, SocketAddr, SocketAddr)>>,
}

const OK: ProbeOutcome = ProbeOutcome::Success {
    rtt: Duration::from_micros(100),
};
const REFUSED: ProbeOutcome = ProbeOutcome::Failure(FailReason::Refused);

/// A prober that finds the probed slot by the lease of its port (as the data path does).
fn fake_prober(host: Arc<FakeHost>, net: Arc<FakeNet>, hang: bool) -> Prober {
    Box::new(move |job: ProbeJob| {
        let slot = host
            .leases
            .lock()
            .expect("lock")
            .get(&job.local.port())
            .copied();
        let outcome = match slot {
            Some(s) => {
                net.log
                    .lock()
                    .expect("lock")
                    .push((Instant::now(), s, job.local, job.dest));
                net.outcomes
                    .lock()
                    .expect("lock")
                    .get(&s)
                    .copied()
                    .unwrap_or(OK)
            }
            None => {
                host.violations
                    .lock()
                    .expect("lock")
                    .push(format!("probe from unleased port {}", job.local));
                REFUSED
            }
        };
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            outcome
        })
    })
}

/// Wait (at most 5 s) until `f` holds.
#[track_caller]
fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn start(
    host: &Arc<FakeHost>,
    net: &Arc<FakeNet>,
    checks: Vec<HealthCheck>,
    hang: bool,
) -> HealthHandle {
    let prober = fake_prober(host.clone(), net.clone(), hang);
    HealthRunner::start_with(config(checks), host.clone(), prober)
}

fn state_of(s: &HealthStatus, server: &str) -> Option<TargetState> {
    s.target(&vip(), ip(server)).map(|t| t.state)
}

#[test]
fn transitions_reach_the_lb_with_flush_and_are_kept() {
    let host = Arc::new(FakeHost::default());
    host.set_targets(vec![target("198.18.2.1", 0), target("198.18.2.2", 1)]);
    let net = Arc::new(FakeNet::default());
    net.outcomes
        .lock()
        .expect("lock")
        .insert(AsSlot(1), REFUSED);
    let mut h = start(&host, &net, vec![check(OnDown::Flush, 100)], false);
    let b = ip("198.18.2.2");
    wait("B down", || host.calls().contains(&(vip(), b, true, true)));
    let s = h.status();
    assert_eq!(state_of(&s, "198.18.2.2"), Some(TargetState::Down));
    assert_eq!(state_of(&s, "198.18.2.1"), Some(TargetState::Up));
    let tb = s.target(&vip(), b).expect("B");
    assert!(
        tb.failures.get("refused").is_some_and(|n| *n >= 2),
        "{tb:?}"
    );
    assert_eq!(tb.destination, Some("198.18.1.1:80".parse().expect("sa")));
    assert!(tb.via_vip);
    assert_eq!(s.transitions.len(), 1);
    assert!(s.transitions[0].down && s.transitions[0].flush && s.transitions[0].count == 2);
    // Probes go to the VIP from the probe source and a band port.
    for (_, _, local, dest) in net.log.lock().expect("lock").iter() {
        assert_eq!(local.ip(), ip("198.18.12.1"));
        assert!(lb::probe::in_band(local.port()));
        assert_eq!(*dest, "198.18.1.1:80".parse().expect("sa"));
    }
    net.outcomes.lock().expect("lock").insert(AsSlot(1), OK);
    wait("B up", || host.calls().contains(&(vip(), b, false, false)));
    let s = h.status();
    assert_eq!(s.transitions.len(), 2);
    assert_eq!(s.totals.transitions, 2);
    assert_eq!(s.totals.up, 2);
    h.stop();
    // A never flipped, so no call names it.
    assert!(host.calls().iter().all(|c| c.1 == b), "{:?}", host.calls());
    host.check_clean();
}

#[test]
fn targets_are_reread_and_disagreements_reapplied() {
    let host = Arc::new(FakeHost::default());
    host.set_targets(vec![target("198.18.2.1", 0), target("198.18.2.2", 1)]);
    let net = Arc::new(FakeNet::default());
    net.outcomes
        .lock()
        .expect("lock")
        .insert(AsSlot(1), REFUSED);
    net.outcomes
        .lock()
        .expect("lock")
        .insert(AsSlot(5), REFUSED);
    let mut h = start(&host, &net, vec![check(OnDown::Drain, 100)], false);
    let b = ip("198.18.2.2");
    wait("B down", || host.calls().contains(&(vip(), b, true, false)));
    // A server added at run time is probed; a removed one is dropped.
    host.set_targets(vec![target("198.18.2.2", 1), target("198.18.2.3", 2)]);
    wait("C probed", || {
        h.status()
            .target(&vip(), ip("198.18.2.3"))
            .is_some_and(|t| t.probes > 0)
    });
    assert!(h.status().target(&vip(), ip("198.18.2.1")).is_none());
    // B deleted and re-added: a new slot, and the model forgot it was down.
    let calls = host.calls().len();
    let mut readded = target("198.18.2.2", 5);
    readded.health_down = false;
    host.set_targets(vec![readded, target("198.18.2.3", 2)]);
    wait("B down re-applied", || {
        host.calls()[calls..].contains(&(vip(), b, true, false))
    });
    wait("B's new slot probed", || {
        net.log
            .lock()
            .expect("lock")
            .iter()
            .any(|l| l.1 == AsSlot(5))
    });
    assert_eq!(
        h.status().target(&vip(), b).map(|t| t.slot),
        Some(AsSlot(5))
    );
    h.stop();
    host.check_clean();
}

#[test]
fn targets_that_cannot_be_probed_are_reported_and_left_alone() {
    let host = Arc::new(FakeHost::default());
    let mut t = target("2001:db8:2::1", 3);
    t.vip_addr = ip("2001:db8:1::1");
    t.encap = Encap::Nat6 { target_port: 8080 };
    t.health_down = true;
    host.set_targets(vec![t]);
    let net = Arc::new(FakeNet::default());
    let mut h = start(&host, &net, vec![check(OnDown::Drain, 100)], false);
    wait("the target is seen", || !h.status().targets.is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let s = h.status();
    let t = &s.targets[0];
    assert_eq!(t.state, TargetState::Unprobed);
    assert!(
        t.unprobed
            .as_deref()
            .is_some_and(|r| r.contains("probe-source6")),
        "{t:?}"
    );
    assert_eq!(t.probes, 0);
    assert_eq!(s.totals.unprobed, 1);
    h.stop();
    assert!(host.calls().is_empty(), "{:?}", host.calls());
    assert!(net.log.lock().expect("lock").is_empty());
    host.check_clean();
}

#[test]
fn stop_is_prompt_and_releases_every_lease() {
    let host = Arc::new(FakeHost::default());
    host.set_targets(
        (0..50)
            .map(|i| target(&format!("198.18.3.{i}"), i))
            .collect(),
    );
    let net = Arc::new(FakeNet::default());
    let mut h = start(&host, &net, vec![check(OnDown::Drain, 100)], true);
    wait("probes out", || {
        !host.leases.lock().expect("lock").is_empty()
    });
    let start = Instant::now();
    h.stop();
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "stop took {:?}",
        start.elapsed()
    );
    host.check_clean();
    h.stop();
    // Dropping a running handle stops it too.
    let h = self::start(&host, &net, vec![check(OnDown::Drain, 100)], true);
    wait("probes out again", || {
        !host.leases.lock().expect("lock").is_empty()
    });
    drop(h);
    host.check_clean();
}

#[test]
fn first_probes_are_spread_over_the_interval() {
    let host = Arc::new(FakeHost::default());
    host.set_targets(
        (0..20)
            .map(|i| target(&format!("198.18.3.{i}"), i))
            .collect(),
    );
    let net = Arc::new(FakeNet::default());
    let mut h = start(&host, &net, vec![check(OnDown::Drain, 1000)], false);
    wait("every target probed", || {
        let s = h.status();
        s.targets.len() == 20 && s.targets.iter().all(|t| t.probes > 0)
    });
    h.stop();
    let log = net.log.lock().expect("lock").clone();
    let mut first: HashMap<AsSlot, Instant> = HashMap::new();
    for (at, slot, _, _) in log {
        first.entry(slot).or_insert(at);
    }
    let (lo, hi) = (first.values().min().copied(), first.values().max().copied());
    let spread = hi.zip(lo).map(|(h, l)| h - l).unwrap_or_default();
    assert!(
        spread >= Duration::from_millis(600),
        "first probes within {spread:?}"
    );
    host.check_clean();
}

#[test]
fn a_runner_that_cannot_enter_the_namespace_says_so() {
    let host = Arc::new(FakeHost {
        enter_fails: true,
        ..FakeHost::default()
    });
    let net = Arc::new(FakeNet::default());
    let h = start(&host, &net, vec![check(OnDown::Drain, 100)], false);
    wait("the error", || h.status().error.is_some());
    let e = h.status().error.unwrap_or_default();
    assert!(e.contains("probe namespace"), "{e}");
}

#[test]
fn the_runner_probes_for_real_inside_the_namespace() {
    if !testenv::can_run(missing()) {
        return;
    }
    let ns =
        TestNs::new(&["198.18.12.1/32", "198.18.2.1/32", "198.18.2.2/32"], &[]).expect("namespace");
    // A listener on the first server only (created inside the namespace).
    let listener = std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter().expect("enter");
            std::net::TcpListener::bind("198.18.2.1:80").expect("listen")
        })
        .join()
        .expect("listener thread")
    });
    std::thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
        }
    });
    let host = Arc::new(FakeHost {
        ns: Some(ns),
        ..FakeHost::default()
    });
    let mut a = target("198.18.2.1", 0);
    let mut b = target("198.18.2.2", 1);
    for t in [&mut a, &mut b] {
        t.encap = Encap::Nat4 { target_port: 80 };
    }
    host.set_targets(vec![a, b]);
    let mut h = HealthRunner::start(config(vec![check(OnDown::Flush, 100)]), host.clone());
    let b = ip("198.18.2.2");
    wait("B down", || host.calls().contains(&(vip(), b, true, true)));
    let s = h.status();
    let ta = s.target(&vip(), ip("198.18.2.1")).expect("A");
    assert_eq!(ta.state, TargetState::Up);
    assert!(ta.ok > 0 && ta.last_rtt.is_some(), "{ta:?}");
    let tb = s.target(&vip(), b).expect("B");
    assert!(
        tb.failures.get("refused").is_some_and(|n| *n >= 2),
        "{tb:?}"
    );
    h.stop();
    host.check_clean();
}

#[test]
fn probes_beyond_the_band_wait_and_are_counted_once() {
    // More targets than band ports, every probe hanging: the first 8192 take every port, the
    // rest wait for one and are counted once each.
    let band = usize::from(lb::probe::PROBE_PORTS);
    let extra = 100;
    let host = Arc::new(FakeHost::default());
    host.set_targets(
        (0..band + extra)
            .map(|i| {
                let a = 0x0a00_0000u32 + i as u32;
                let server = std::net::Ipv4Addr::from(0xc612_0000 | (a & 0xffff)).to_string();
                target(&server, i as u32)
            })
            .collect(),
    );
    let net = Arc::new(FakeNet::default());
    let h = start(&host, &net, vec![check(OnDown::Drain, 200)], true);
    wait("every port out", || {
        host.leases.lock().expect("lock").len() == band
    });
    wait("the rest counted as delayed", || {
        h.status().totals.delayed == extra as u64
    });
    // Still once each, a few scheduling rounds later.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(h.status().totals.delayed, extra as u64);
    drop(h);
    host.check_clean();
}

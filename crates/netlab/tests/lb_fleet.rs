//! The load-balancer fleet's BGP and ECMP, for real, without vecplane (needs root, `ip`,
//! `ethtool`, `nft`, `nginx`, `curl`, `bird`, `birdc`; each test prints `skipped: <why>` and
//! returns otherwise, and fails under CI=true): a fleet of two LBs and two nginx servers is
//! built, each LB's BIRD is made to announce the VIP by hand (a routes file with the VIP via a
//! TAP device, `birdc configure`), and the router's kernel must get the VIP route through the
//! LBs' data uplinks: one next hop, then both (ECMP), then only the second when the first LB's
//! device goes. Everything is bounded in time, and nothing is left behind. Traffic stays inside
//! the fleet's own namespaces (198.18.0.0/15).

use netlab::lb_fleet::addr;
use netlab::{FleetSpec, LbFleet, FLEET_TOOLS};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const PREFIX: &str = "vlft";

/// How long the router may take to install or remove a route after an LB's change.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(8);

macro_rules! require_root {
    () => {
        if let Some(why) = netlab::missing_prerequisite(FLEET_TOOLS) {
            testenv::skip(&why);
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

fn remains(names: &netlab::FleetNames) -> Vec<String> {
    let mut left: Vec<String> = names
        .namespaces()
        .into_iter()
        .filter(|ns| netlab::namespace_exists(ns))
        .map(|ns| format!("namespace {ns}"))
        .collect();
    if names.dir.exists() {
        left.push(format!("directory {}", names.dir.display()));
    }
    left
}

/// Create LB `i`'s liveness device as a TAP (what vecplane would hold open) and bring it up.
fn tap_up(fleet: &LbFleet, i: usize) {
    let ns = fleet.lb_ns(i).expect("LB namespace");
    let dev = fleet.liveness_device(i).expect("device name");
    fleet
        .exec_ok(ns, &["ip", "tuntap", "add", "dev", dev, "mode", "tap"])
        .expect("tap");
    fleet
        .exec_ok(ns, &["ip", "link", "set", dev, "up"])
        .expect("tap up");
}

#[test]
fn bgp_announcements_become_ecmp_routes_in_the_router() {
    require_root!();
    let t0 = Instant::now();
    let spec = FleetSpec {
        prefix: PREFIX.to_string(),
        ..FleetSpec::new(2, &[1, 1])
    };
    let fleet = LbFleet::build(&spec).expect("fleet");
    let names = fleet.names().clone();
    println!("built in {:.2} s", t0.elapsed().as_secs_f64());
    let vip = format!("{}/32", addr::VIP4);
    let (up0, up1) = (addr::lb_up4(0), addr::lb_up4(1));

    // Nothing is announced at build (the routes files are empty).
    assert!(fleet.router_nexthops(&vip).expect("route").is_empty());
    let t = Instant::now();
    fleet
        .wait_bgp_established(Duration::from_secs(10))
        .expect("sessions");
    println!("sessions up after {:.2} s", t.elapsed().as_secs_f64());
    assert!(fleet.router_nexthops(&vip).expect("route").is_empty());

    // LB 0 announces: one next hop, its data uplink (not its management address).
    tap_up(&fleet, 0);
    let t = Instant::now();
    fleet
        .announce_by_hand(0, &[addr::VIP4])
        .expect("announce 0");
    fleet
        .wait_nexthops(&vip, &[up0], ROUTE_TIMEOUT)
        .expect("LB 0's route");
    println!("LB 0's route after {:.2} s", t.elapsed().as_secs_f64());

    // LB 1 too: ECMP over both.
    tap_up(&fleet, 1);
    let t = Instant::now();
    fleet
        .announce_by_hand(1, &[addr::VIP4])
        .expect("announce 1");
    fleet
        .wait_nexthops(&vip, &[up0, up1], ROUTE_TIMEOUT)
        .expect("ECMP route");
    println!("ECMP route after {:.2} s", t.elapsed().as_secs_f64());
    let policy = fleet
        .exec_ok(
            fleet.router_ns(),
            &["cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy"],
        )
        .expect("sysctl");
    assert_eq!(policy.trim(), "1", "L4 hash policy");

    // LB 0's device goes (as when its vecplane dies): only LB 1 is left.
    let t = Instant::now();
    fleet
        .exec_ok(
            fleet.lb_ns(0).expect("LB 0"),
            &[
                "ip",
                "link",
                "del",
                fleet.liveness_device(0).expect("device"),
            ],
        )
        .expect("delete LB 0's device");
    fleet
        .wait_nexthops(&vip, &[up1], ROUTE_TIMEOUT)
        .expect("fallback to LB 1");
    println!("fell back to LB 1 after {:.2} s", t.elapsed().as_secs_f64());

    // The servers answer on their own addresses from the router (they are up for vecplane).
    let body = fleet
        .exec_ok(
            fleet.router_ns(),
            &["curl", "-s", "-m", "2", "http://198.18.12.12/"],
        )
        .expect("server s1");
    assert!(body.starts_with("s1 "), "{body}");

    fleet.delete().expect("delete");
    assert_eq!(remains(&names), Vec::<String>::new());
    println!("whole test {:.2} s", t0.elapsed().as_secs_f64());
}

#[test]
fn dropping_a_fleet_ends_bird_and_deletes_everything() {
    require_root!();
    // A spec it cannot build is refused before anything is made.
    assert!(LbFleet::build(&FleetSpec {
        prefix: PREFIX.to_string(),
        ..FleetSpec::new(1, &[1; 9])
    })
    .is_err());
    let t0 = Instant::now();
    let fleet = LbFleet::build(&FleetSpec {
        prefix: PREFIX.to_string(),
        ..FleetSpec::new(1, &[1])
    })
    .expect("fleet");
    println!("built in {:.2} s", t0.elapsed().as_secs_f64());
    let names = fleet.names().clone();
    let pids: Vec<String> = ["router", "lb0"]
        .iter()
        .map(|w| {
            let p = fleet.path(&format!("{w}-bird.pid"));
            std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
                .trim()
                .to_string()
        })
        .collect();
    for p in &pids {
        assert!(
            std::path::Path::new(&format!("/proc/{p}")).exists(),
            "bird {p}"
        );
    }
    drop(fleet);
    assert_eq!(remains(&names), Vec::<String>::new());
    for p in &pids {
        // Gone, or (if the id was reused at once) no longer a bird.
        let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        assert_ne!(comm.trim(), "bird", "bird {p} outlived its fleet");
    }
}

//! The load-balancer fleet end to end (issue 11), in netlab's `LbFleet` (needs root, `ip`,
//! `bridge`, `nft`, `nginx`, `curl`, `wrk`, `bird`, `birdc`; prints `skipped: <why>` and returns
//! otherwise, fails under CI=true): three vecplanes on AF_PACKET ports in front of three nginx
//! servers (L3DSR, HTTP health checks through the encapsulation), each announcing the VIP
//! through its own BIRD to a router whose BIRD installs an ECMP route (L4 hash). Checked:
//! - the VIP is announced by all three and the router spreads new flows over them;
//! - SIGKILL of one vecplane under keep-alive load withdraws its route (its liveness device
//!   goes with the process) and the load goes on (requests lost and errors are reported; L3DSR
//!   flows ECMP moves keep their server, so none should break);
//! - a rolling upgrade (drain, ready, stop, start, announce) of all three under continuous
//!   load of new connections completes with zero failed requests;
//! - every server of the VIP down by health withdraws the VIP everywhere;
//! - a BIRD restart, a hung server, a server flapping faster than rise/fall and API changes
//!   under load: every LB keeps serving, transitions come in pairs, at most the requests on
//!   the hung connections are lost.
//!
//! Traffic stays in the fleet's namespaces (198.18.0.0/15), bounded in packets and seconds.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::lb_fleet::addr;
use netlab::{FleetSpec, LbFleet, LoadResult, WrkSpec};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

/// How long the router may take to follow an announcement or a withdrawal.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a drain may take to become ready.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

/// The fleet's tools and wrk.
fn fleet_tools() -> Vec<&'static str> {
    let mut tools = netlab::FLEET_TOOLS.to_vec();
    tools.push("wrk");
    tools
}

fn vip_prefix() -> String {
    format!("{}/32", addr::VIP4)
}

/// A fleet of `lbs` vecplanes over three servers, with HTTP health checks and a short drain.
fn fleet(lbs: usize) -> LbFleet {
    let spec = FleetSpec {
        prefix: "vlbx".to_string(),
        bgp_keys: "drain-quiet-ms = 700\ndrain-timeout-ms = 10000\n".to_string(),
        extra_toml: format!(
            "[[lb.health-check]]\nvip = \"{} protocol tcp port 80\"\ntype = \"http\"\n\
             interval-ms = 200\ntimeout-ms = 150\nrise = 2\nfall = 2\n",
            vip_prefix()
        ),
        ..FleetSpec::new(lbs, &[1, 1, 1])
    };
    LbFleet::build(&spec).expect("fleet")
}

fn uplinks(lbs: &[usize]) -> Vec<Ipv4Addr> {
    let mut v: Vec<Ipv4Addr> = lbs.iter().map(|&i| addr::lb_up4(i)).collect();
    v.sort();
    v
}

/// Wait until the router's route to the VIP goes via exactly `lbs`; how long it took.
fn wait_route(f: &LbFleet, lbs: &[usize], what: &str) -> Duration {
    let t0 = Instant::now();
    f.wait_nexthops(&vip_prefix(), &uplinks(lbs), ROUTE_TIMEOUT)
        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
    t0.elapsed()
}

/// `show …` of LB `i` as JSON.
fn show(f: &LbFleet, i: usize, command: &str) -> Value {
    f.lb(i)
        .unwrap_or_else(|| panic!("LB {i} is not running"))
        .request(command, true)
        .unwrap_or_else(|e| panic!("LB {i}: {command}: {e:#}"))
        .data
        .unwrap_or(Value::Null)
}

/// VIP packets LB `i` sent to servers.
fn vip_packets(f: &LbFleet, i: usize) -> u64 {
    show(f, i, "show lb")["vips"][0]["counters"]["packets"]
        .as_u64()
        .unwrap_or(0)
}

fn start_all(f: &mut LbFleet, lbs: usize) {
    for i in 0..lbs {
        f.start_lb(i, Path::new(BIN)).expect("start vecplane");
    }
    let took = wait_route(f, &(0..lbs).collect::<Vec<_>>(), "every LB announces");
    println!("the router has the VIP via all {lbs} LBs {took:?} after the last start");
}

fn report(what: &str, r: &LoadResult) {
    println!(
        "{what}: {} requests in {:.1} s, errors {:?}, by server {:?}",
        r.requests,
        r.duration_us as f64 / 1e6,
        r.errors,
        r.per_server
    );
}

#[test]
fn three_lbs_share_a_vip_survive_a_sigkill_and_a_rolling_upgrade() {
    require_root!(SERIAL, &fleet_tools());
    let mut f = fleet(3);
    start_all(&mut f, 3);

    // New flows spread over the three LBs, and every request is answered.
    let r = f.curl_loop(90).expect("curl");
    assert!(r.incomplete(90).is_none(), "{:?}", r.incomplete(90));
    let per_lb: Vec<u64> = (0..3).map(|i| vip_packets(&f, i)).collect();
    println!("VIP packets per LB after 90 new connections: {per_lb:?}");
    assert!(
        per_lb.iter().all(|&p| p > 0),
        "ECMP uses every LB: {per_lb:?}"
    );

    // SIGKILL of LB 1 under keep-alive load. A request in flight toward LB 1 when it dies is
    // retransmitted on TCP's backoff (about 0.2, 0.6, 1.4, 3.0, 6.2 s after it was sent) and
    // arrives with the first retransmission after the router moved its flow (~2.4 s here):
    // at ~3 s, or ~6.2 s if the move takes longer than 3 s. A 3 s timeout sat on that edge
    // and failed one request in 68,332 once (CI, 2026-11-28, beside QEMU guests).
    let job = f
        .wrk_job(&WrkSpec {
            seconds: 6,
            connections: 24,
            threads: 2,
            new_connection_per_request: false,
            timeout_seconds: 7,
        })
        .expect("wrk");
    let load = std::thread::spawn(move || job.run());
    std::thread::sleep(Duration::from_secs(2));
    let before = vip_packets(&f, 1);
    let pid = f.lb(1).expect("LB 1").pid();
    let killed = Instant::now();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    let took = wait_route(&f, &[0, 2], "LB 1's route withdrawn after SIGKILL");
    println!(
        "SIGKILL of LB 1 (it had sent {before} VIP packets): the router moved its flows to LBs 0 \
         and 2 in {:?} ({took:?} of polling)",
        killed.elapsed()
    );
    let r = load
        .join()
        .expect("the load thread")
        .expect("wrk under SIGKILL");
    report("keep-alive load across the SIGKILL", &r);
    // The surviving LBs take LB 1's flows without an entry for them: Maglev chooses their
    // server again, the same one only while every LB sees the same healthy servers. A probe
    // timing out twice on a loaded machine would take a server out on one LB and reset the
    // flows it then sends elsewhere; the health transitions tell that case apart.
    let flaps: Vec<u64> = [0, 2].iter().map(|&i| transitions(&f, i)).collect();
    println!("health transitions on LBs 0 and 2 during the load: {flaps:?}");
    assert!(r.requests > 0);
    assert_eq!(
        r.failures(),
        0,
        "no request fails when an LB dies: its L3DSR flows keep their server on the others \
         (errors {:?}; health transitions on LBs 0 and 2: {flaps:?}; LB 0's health: {})",
        r.errors,
        show(&f, 0, "show lb health")
    );
    f.kill_lb(1).expect("reap LB 1");
    f.start_lb(1, Path::new(BIN)).expect("restart LB 1");
    let took = wait_route(&f, &[0, 1, 2], "LB 1 announces again");
    println!("restarted LB 1 announced again after {took:?}");

    // A rolling upgrade of all three under continuous load of new connections.
    let job = f
        .wrk_job(&WrkSpec {
            seconds: 12,
            connections: 8,
            threads: 1,
            new_connection_per_request: true,
            timeout_seconds: 3,
        })
        .expect("wrk");
    let started = Instant::now();
    let load = std::thread::spawn(move || job.run());
    std::thread::sleep(Duration::from_secs(1));
    for i in 0..3 {
        let t0 = Instant::now();
        let v = show(&f, i, "drain");
        assert_eq!(v["phase"], "draining", "{v}");
        let others: Vec<usize> = (0..3).filter(|&j| j != i).collect();
        let withdrawn = wait_route(&f, &others, "drained LB withdrawn");
        loop {
            let v = show(&f, i, "show bgp");
            if v["ready_to_stop"] == true {
                println!(
                    "LB {i}: withdrawn in {withdrawn:?}, ready to stop after {:?} ({})",
                    t0.elapsed(),
                    v["detail"]
                );
                break;
            }
            assert!(t0.elapsed() < DRAIN_TIMEOUT, "LB {i} never ready: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
        f.stop_lb(i).expect("stop the drained LB");
        f.start_lb(i, Path::new(BIN)).expect("start the new LB");
        let took = wait_route(&f, &[0, 1, 2], "the new LB announces");
        println!("LB {i}: new vecplane announced {took:?} after its start");
    }
    println!(
        "rolling upgrade of 3 LBs done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let r = load
        .join()
        .expect("the load thread")
        .expect("wrk during the upgrade");
    report("new connections during the rolling upgrade", &r);
    assert!(r.requests > 0);
    assert_eq!(r.failures(), 0, "a rolling upgrade fails no request");

    // Every server down: no LB announces the VIP; one back: all announce it again.
    for j in 0..3 {
        f.stop_server(j).expect("stop server");
    }
    let took = wait_route(&f, &[], "the VIP withdrawn when no server is up");
    println!("every server down: VIP withdrawn from the router in {took:?}");
    f.start_server(0).expect("start server 0");
    let took = wait_route(&f, &[0, 1, 2], "the VIP back with one server");
    println!("one server back: VIP announced by all 3 LBs again in {took:?}");
    let r = f.curl_loop(20).expect("curl");
    assert!(r.incomplete(20).is_none(), "{:?}", r.incomplete(20));
}

/// `lines` through LB `i`'s API (`POST /v1/lb/commands`), all or nothing.
fn lb_lines(f: &LbFleet, i: usize, lines: &[String]) {
    let vp = f.lb(i).unwrap_or_else(|| panic!("LB {i} is not running"));
    let body = serde_json::json!({ "lines": lines })
        .to_string()
        .into_bytes();
    let r = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "POST",
        "/v1/lb/commands",
        Some(body),
    )
    .expect("POST /v1/lb/commands");
    assert_eq!(r.status, 200, "LB {i}: {}", r.error_message());
}

/// The health transitions LB `i` counted.
fn transitions(f: &LbFleet, i: usize) -> u64 {
    show(f, i, "show lb health")["totals"]["transitions"]
        .as_u64()
        .unwrap_or(0)
}

/// Wait until LB `i` says server `server` of the VIP is `state`.
fn wait_health(f: &LbFleet, i: usize, server: Ipv4Addr, state: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    let s = server.to_string();
    loop {
        let h = show(f, i, "show lb health");
        let ok = h["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["server"] == s.as_str() && t["state"] == state);
        if ok {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < limit, "LB {i}: {server} not {state}: {h}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bird_restarts_hung_and_flapping_servers_and_api_changes_under_load_keep_serving() {
    require_root!(SERIAL, &fleet_tools());
    let mut f = fleet(3);
    start_all(&mut f, 3);
    let servers: Vec<Ipv4Addr> = f.servers().iter().map(|s| s.ip4).collect();
    let job = f
        .wrk_job(&WrkSpec {
            seconds: 16,
            connections: 8,
            threads: 1,
            new_connection_per_request: true,
            timeout_seconds: 3,
        })
        .expect("wrk");
    let load = std::thread::spawn(move || job.run());
    std::thread::sleep(Duration::from_secs(1));

    // LB 0's BIRD restarts: its route goes and comes back; nothing fails meanwhile.
    f.restart_lb_bird(0).expect("restart LB 0's BIRD");
    let took = wait_route(
        &f,
        &[0, 1, 2],
        "LB 0 announces again after its BIRD restarted",
    );
    println!("LB 0's BIRD restarted: the VIP via all three again {took:?} after BIRD answered");

    // Server 2 hangs (packets to port 80 dropped): every LB's probes time out and take it
    // out within fall x interval + timeout; its clients move to the others.
    let ns = f.names().ns_servers[2].clone();
    let hang = "add table inet vlbx_hang\n\
                add chain inet vlbx_hang input { type filter hook input priority 0; }\n\
                add rule inet vlbx_hang input tcp dport 80 drop\n";
    let rules = f.path("hang.nft");
    std::fs::write(&rules, hang).expect("write rules");
    f.exec_ok(&ns, &["nft", "-f", &rules.to_string_lossy()])
        .expect("hang server 2");
    let limit = Duration::from_millis(2 * 200 + 150 + 1500);
    for i in 0..3 {
        let took = wait_health(&f, i, servers[2], "down", limit);
        println!("hung server 2 down on LB {i} after {took:?}");
    }

    // The API changes the servers on every LB at once (the same change keeps their Maglev
    // tables identical): server 0 to weight 2, then back.
    let vip = vip_prefix();
    for w in [2, 1] {
        let line = format!("lb as {vip} protocol tcp port 80 {} weight {w}", servers[0]);
        for i in 0..3 {
            lb_lines(&f, i, std::slice::from_ref(&line));
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    // Server 2 answers again: up everywhere.
    f.exec_ok(&ns, &["nft", "delete", "table", "inet", "vlbx_hang"])
        .expect("unhang server 2");
    for i in 0..3 {
        let took = wait_health(&f, i, servers[2], "up", limit);
        println!("server 2 up again on LB {i} after {took:?}");
    }

    // Server 1 flaps faster than rise/fall (hung for 150 ms, then answering for 150 ms, for
    // 3 s): whatever the probes make of it, every change is counted in pairs, and it ends up.
    let ns1 = f.names().ns_servers[1].clone();
    let flap = Instant::now();
    let mut hung = false;
    while flap.elapsed() < Duration::from_secs(3) {
        if hung {
            f.exec_ok(&ns1, &["nft", "delete", "table", "inet", "vlbx_hang"])
                .expect("unhang server 1");
        } else {
            f.exec_ok(&ns1, &["nft", "-f", &rules.to_string_lossy()])
                .expect("hang server 1");
        }
        hung = !hung;
        std::thread::sleep(Duration::from_millis(150));
    }
    if hung {
        f.exec_ok(&ns1, &["nft", "delete", "table", "inet", "vlbx_hang"])
            .expect("unhang server 1");
    }
    for i in 0..3 {
        let took = wait_health(&f, i, servers[1], "up", limit);
        println!("server 1 up on LB {i} {took:?} after the flapping stopped");
    }
    let r = load
        .join()
        .expect("the load thread")
        .expect("wrk during the failures");
    report(
        "new connections through a BIRD restart, a hung and a flapping server and API changes",
        &r,
    );
    // A request on a connection a server hangs under cannot be answered: at most the load's
    // open connections, per hang, may fail (one in the run of 2026-11-26).
    let lost = r.failures();
    println!("requests lost to the hung and flapping servers: {lost}");
    assert!(r.requests > 0);
    assert!(
        lost <= 8 * 3,
        "at most the connections open on the hung servers fail: {:?}",
        r.errors
    );
    for i in 0..3 {
        // Server 2: one down, one up; server 1: as many downs as ups.
        let n = transitions(&f, i);
        println!("LB {i}: {n} health transitions (2 of them server 2's)");
        assert!(n >= 2 && n.is_multiple_of(2), "LB {i}: {n} transitions");
        let b = show(&f, i, "show bgp");
        assert_eq!(b["phase"], "serving", "{b}");
    }
}

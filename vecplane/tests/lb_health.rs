//! Health checks end to end, in the netlab load-balancer lab (needs root, `ip`, `nft`, `nginx`,
//! `curl`; prints `skipped: <why>` and returns otherwise, fails under CI=true): vecplane on
//! AF_PACKET ports balances an L3DSR VIP, a GRE4 VIP (inner IPv4 and IPv6) and a NAT4 VIP over
//! three nginx servers and checks them with HTTP probes that travel as client traffic does
//! (wrapped in L3DSR or GRE by the data path, or NAT's target port). Every server comes up;
//! a stopped server is marked down within fall x interval (plus a probe timeout), bounded curl
//! loops then complete without it, it is not in any VIP's Maglev table, and it comes back
//! within rise x interval once started. A server that answers but can no longer take L3DSR
//! (its DSCP mapping removed) is marked down on the L3DSR VIP only: probes reach it as the
//! clients' packets do. `show lb health`, `GET /v1/lb/health`-shaped JSON and
//! the Prometheus metrics say so. Traffic stays in the lab (198.18.0.0/15, 2001:db8::/32).

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::lb::addr;
use netlab::{Driver, Encap, LbLab, LbMode, LbSpec, Vecplane, Vip};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

/// Probe timing of the test's checks.
const INTERVAL_MS: u64 = 200;
const TIMEOUT_MS: u64 = 150;
const RISE: u64 = 2;
const FALL: u64 = 2;

/// Slack on top of the ideal detection time (scheduling on a loaded 2-CPU machine, a probe
/// already out when the server stops, the next snapshot).
const SLACK: Duration = Duration::from_millis(1500);

/// Requests per VIP per curl loop.
const REQUESTS: u32 = 30;

/// vecplane and its lab; vecplane stops first (fields drop in order).
struct Bench {
    vp: Vecplane,
    lab: LbLab,
}

/// The `[lb]` section: the lab's lines, the probe sources (the LB's server-side addresses),
/// and one HTTP check per VIP.
fn lb_section(lab: &LbLab) -> String {
    let mut lines = lab.lb_cli_lines();
    if lab
        .spec()
        .encaps
        .iter()
        .any(|e| matches!(e, Encap::Nat4 { .. }))
    {
        lines.push("lb set interface nat4 in down".to_string());
    }
    let mut s = String::from("\n[lb]\nlines = [\n");
    for l in &lines {
        s.push_str(&format!("  {l:?},\n"));
    }
    s.push_str(&format!(
        "]\nprobe-source4 = \"{}\"\nprobe-source6 = \"{}\"\n",
        addr::LB_DOWN4,
        addr::LB_DOWN6
    ));
    for v in lab.vips() {
        let prefix = match v.addr {
            std::net::IpAddr::V4(a) => format!("{a}/32"),
            std::net::IpAddr::V6(a) => format!("{a}/128"),
        };
        s.push_str(&format!(
            "\n[[lb.health-check]]\nvip = \"{prefix} protocol tcp port {}\"\ntype = \"http\"\n\
             path = \"/\"\nexpect = 200\ninterval-ms = {INTERVAL_MS}\ntimeout-ms = {TIMEOUT_MS}\n\
             rise = {RISE}\nfall = {FALL}\n",
            v.port
        ));
    }
    s
}

fn start(driver: Driver) -> Bench {
    let spec = LbSpec {
        prefix: "vlbh".to_string(),
        encaps: vec![
            Encap::L3dsr { dscp: 23 },
            Encap::Gre4,
            Encap::Nat4 { target_port: 8080 },
        ],
        ..LbSpec::new(Encap::Gre4, &[1, 1, 1])
    }
    .with_lb(LbMode::Bare);
    let lab = LbLab::build(&spec).expect("lab");
    let mut config = lab.vecplane_config(driver, None).expect("config");
    config.push_str(&lb_section(&lab));
    let path = lab.path("vecplane-health.toml");
    std::fs::write(&path, &config).expect("write config");
    let vp = lab
        .start_vecplane(Path::new(BIN), &path)
        .unwrap_or_else(|e| panic!("vecplane starts: {e:#}\n{config}"));
    Bench { vp, lab }
}

/// `show lb health --json`.
fn health(b: &Bench) -> Value {
    b.vp.request("show lb health", true)
        .expect("show lb health")
        .data
        .expect("show lb health has data")
}

/// The targets of `server` (an address of server `i` in any family) and whether all of them
/// satisfy `f`.
fn every_target_of(h: &Value, b: &Bench, i: usize, f: impl Fn(&Value) -> bool) -> bool {
    let s = &b.lab.servers()[i];
    let (a4, a6) = (s.ip4.to_string(), s.ip6.to_string());
    let ts: Vec<&Value> = h["targets"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter(|t| t["server"] == a4.as_str() || t["server"] == a6.as_str())
                .collect()
        })
        .unwrap_or_default();
    !ts.is_empty() && ts.into_iter().all(f)
}

/// Wait until `f(health)` holds; the time it took, or a panic with the last status.
fn wait_for(b: &Bench, what: &str, limit: Duration, f: impl Fn(&Value) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        let h = health(b);
        if f(&h) {
            return t0.elapsed();
        }
        if t0.elapsed() > limit {
            let text =
                b.vp.request("show lb health", false)
                    .ok()
                    .and_then(|r| r.text)
                    .unwrap_or_default();
            panic!("{what}: not within {limit:?}\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A bounded curl loop to `vip`: every request answered; the answers by server name.
fn curl_all(b: &Bench, vip: &Vip) -> std::collections::BTreeMap<String, u64> {
    let r = b.lab.curl_loop(vip, REQUESTS).expect("curl loop");
    if let Some(why) = r.incomplete(u64::from(REQUESTS)) {
        panic!("{}: {why}", vip.url());
    }
    r.per_server
}

#[test]
fn a_stopped_server_is_marked_down_and_comes_back_when_it_answers_again() {
    require_root!(SERIAL, netlab::LAB_TOOLS);
    stopped_server_down_and_back(Driver::AfPacket);
}

/// The same on AF_XDP ports: the LB namespace's kernel never sees a reply there, so the probes
/// must come and go through the data path.
#[test]
fn health_checks_work_on_af_xdp_ports() {
    require_root!(SERIAL, netlab::LAB_TOOLS);
    stopped_server_down_and_back(Driver::AF_XDP);
}

fn stopped_server_down_and_back(driver: Driver) {
    let mut b = start(driver);
    let vips = b.lab.vips();
    let up = |t: &Value| t["state"] == "up" && t["checked"] == true && t["ok"].as_u64() > Some(0);
    let took = wait_for(&b, "every server up", Duration::from_secs(10), |h| {
        (0..3).all(|i| every_target_of(h, &b, i, up))
    });
    println!("every server probed and up after {took:?}");
    let h = health(&b);
    let targets = h["targets"].as_array().map_or(0, Vec::len);
    assert_eq!(targets, 3 * vips.len(), "every server of every VIP: {h}");
    for t in h["targets"].as_array().into_iter().flatten() {
        let via_vip = t["via_vip"] == true;
        let nat = t["vip"]
            .as_str()
            .is_some_and(|v| v.starts_with("198.18.100.4"));
        assert_eq!(
            via_vip, !nat,
            "L3DSR and GRE probes go to the VIP, NAT's to the server: {t}"
        );
    }
    for v in &vips {
        let per = curl_all(&b, v);
        assert_eq!(
            per.len(),
            3,
            "{}: all three servers answer: {per:?}",
            v.url()
        );
    }

    // Stop server 1: down within fall x interval (+ a timeout and slack), on every VIP.
    let name = b.lab.servers()[1].name.clone();
    b.lab.stop_server(1).expect("stop server 1");
    let limit = Duration::from_millis(FALL * INTERVAL_MS + TIMEOUT_MS) + SLACK;
    let took = wait_for(&b, "server 1 down", limit, |h| {
        every_target_of(h, &b, 1, |t| t["state"] == "down")
    });
    println!("server 1 marked down on every VIP {took:?} after it stopped");
    for v in &vips {
        let per = curl_all(&b, v);
        assert!(
            !per.contains_key(&name),
            "{}: {name} answered while down: {per:?}",
            v.url()
        );
    }
    let verbose =
        b.vp.request("show lb vips verbose", true)
            .expect("show lb")
            .data
            .expect("data");
    let s1 = b.lab.servers()[1].ip4.to_string();
    let marked: Vec<&Value> = verbose["vips"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["servers"].as_array().into_iter().flatten())
        .filter(|s| s["address"] == s1.as_str())
        .collect();
    assert!(!marked.is_empty());
    for s in marked {
        assert_eq!(s["health"], "down", "{s}");
        assert_eq!(s["maglev_entries"], 0, "out of the Maglev table: {s}");
    }
    // The other servers never went down.
    let h = health(&b);
    assert!(every_target_of(&h, &b, 0, |t| t["transitions"] == 0));
    assert!(every_target_of(&h, &b, 2, |t| t["transitions"] == 0));

    // Start it again: up within rise x interval (+ slack), and it answers again.
    b.lab.start_server(1).expect("start server 1");
    let limit = Duration::from_millis(RISE * INTERVAL_MS + TIMEOUT_MS) + SLACK;
    let took = wait_for(&b, "server 1 up again", limit, |h| {
        every_target_of(h, &b, 1, |t| t["state"] == "up")
    });
    println!("server 1 up again on every VIP {took:?} after it started");
    for v in &vips {
        let per = curl_all(&b, v);
        assert!(
            per.contains_key(&name),
            "{}: {name} is back: {per:?}",
            v.url()
        );
    }
    let h = health(&b);
    assert!(
        h["totals"]["transitions"].as_u64() >= Some(2 * vips.len() as u64),
        "a down and an up per VIP: {h}"
    );
    let text =
        b.vp.request("show lb health", false)
            .expect("text")
            .text
            .unwrap_or_default();
    assert!(text.contains("recent transitions"), "{text}");
    let reply = control::http(
        &control::Endpoint::Unix(b.vp.socket().to_path_buf()),
        "GET",
        "/v1/lb/health",
        None,
    )
    .expect("GET /v1/lb/health");
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json()["totals"]["targets"],
        3 * vips.len(),
        "the API says the same"
    );
    println!("{text}");
    cannot_decapsulate(&b);
    let api = control::Endpoint::Unix(b.vp.socket().to_path_buf());
    let metrics = control::http(&api, "GET", "/metrics", None).expect("GET /metrics");
    let metrics = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        metrics.contains("vecplane_lb_health_up{"),
        "health metrics exported:\n{metrics}"
    );
    let probes =
        b.vp.request("show lb", true)
            .expect("show lb")
            .data
            .expect("data");
    assert!(
        probes["node"]["probes"].as_u64() > Some(0),
        "the data path wrapped probes: {probes}"
    );
    // A probe's port is leased while its check runs; a packet of a probe whose check already
    // gave up (a SYN retransmitted or a RST sent late by the probe host's kernel on a loaded
    // machine: CI saw 1 of 1,252) finds no lease and is dropped and counted, never sent to a
    // server. Such stragglers stay rare.
    let unleased = probes["node"]["probes_unleased"]
        .as_u64()
        .unwrap_or(u64::MAX);
    let wrapped = probes["node"]["probes"].as_u64().unwrap_or(0);
    assert!(unleased.saturating_mul(20) <= wrapped, "{probes}");
}

/// Server 2 loses its L3DSR mapping (nginx keeps running): the L3DSR probes, wrapped as client
/// traffic, now fail, so it goes down on the L3DSR VIP alone, and that VIP's clients all get
/// answers from the others; with the mapping back it comes up again.
fn cannot_decapsulate(b: &Bench) {
    let ns = b.lab.names().ns_servers[2].clone();
    let s2 = b.lab.servers()[2].ip4.to_string();
    let l3dsr = "198.18.100.1/32 protocol tcp port 80";
    netlab::cmd::run_ok(&netlab::cmd::in_ns(
        &ns,
        &["nft", "delete", "table", "ip", "vlb_l3dsr"],
    ))
    .expect("remove server 2's L3DSR mapping");
    let limit = Duration::from_millis(FALL * INTERVAL_MS + TIMEOUT_MS) + SLACK;
    let took = wait_for(b, "server 2 down on the L3DSR VIP", limit, |h| {
        h["targets"].as_array().into_iter().flatten().all(|t| {
            let broken = t["vip"] == l3dsr && t["server"] == s2.as_str();
            t["state"] == if broken { "down" } else { "up" }
        })
    });
    println!("server 2 without its L3DSR mapping: down on the L3DSR VIP after {took:?}");
    let vips = b.lab.vips();
    let name = b.lab.servers()[2].name.clone();
    for v in &vips {
        let per = curl_all(b, v);
        let is_l3dsr = matches!(v.encap, Encap::L3dsr { .. });
        assert_eq!(!per.contains_key(&name), is_l3dsr, "{}: {per:?}", v.url());
    }
    let path = b.lab.path("s2-l3dsr.nft");
    netlab::cmd::run_ok(&netlab::cmd::in_ns(
        &ns,
        &["nft", "-f", &path.to_string_lossy()],
    ))
    .expect("restore server 2's L3DSR mapping");
    let limit = Duration::from_millis(RISE * INTERVAL_MS + TIMEOUT_MS) + SLACK;
    wait_for(b, "server 2 up again on the L3DSR VIP", limit, |h| {
        every_target_of(h, b, 2, |t| t["state"] == "up")
    });
}

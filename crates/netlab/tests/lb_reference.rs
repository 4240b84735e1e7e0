//! The load-balancer lab with the kernel reference balancer, for real (needs root, `ip`,
//! `ethtool`, `nft`, `nginx`, `curl`, `wrk`, `python3`; each test prints `skipped: <why>` and
//! returns otherwise, and fails under CI=true): client -> router -> LB namespace -> nginx servers
//! with weights 1:2:3, for L3DSR (replies straight through the router), NAT4/NAT6 (replies back
//! through the LB) and GRE4/GRE6 (servers decapsulate, replies straight). Every request of a
//! bounded curl loop or wrk run must complete, and the answers spread by weight. Nothing is left
//! behind. Frames crafted with scapy as vecplane will send them (L3DSR, GRE4/GRE6 with an outer
//! source that is not the LB's, inner IPv4 and IPv6) get their SYN-ACK from the VIP straight
//! at the client. Traffic only goes to the lab's own namespaces (198.18.0.0/15, 2001:db8::/32).

#[path = "../../../tests/golden/golden_support.rs"]
mod golden_support;

use netlab::lb::addr;
use netlab::{Encap, KernelHash, LbLab, LbMode, LbSpec, LoadResult, WrkSpec};
use std::net::IpAddr;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

const PREFIX: &str = "vlbt";

/// Standard deviations a server's share may stray from its weight.
const SIGMAS: f64 = 5.0;

macro_rules! require_root {
    () => {
        if let Some(why) = netlab::missing_prerequisite(netlab::LAB_TOOLS) {
            testenv::skip(&why);
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

fn all_complete(what: &str, r: &LoadResult, expected: u64) {
    if let Some(why) = r.incomplete(expected) {
        panic!("{what}: {why}");
    }
}

/// Packets the LB's uplink sent (towards the router).
fn lb_uplink_tx(lab: &LbLab) -> u64 {
    let out = lab
        .exec_ok(
            lab.lb_ns(),
            &[
                "cat",
                &format!(
                    "/sys/class/net/{}/statistics/tx_packets",
                    lab.uplink().ifname
                ),
            ],
        )
        .expect("counter");
    out.trim().parse().expect("a number")
}

fn remains(lab_names: &netlab::LbNames) -> Vec<String> {
    let mut left: Vec<String> = lab_names
        .namespaces()
        .into_iter()
        .filter(|ns| netlab::namespace_exists(ns))
        .map(|ns| format!("namespace {ns}"))
        .collect();
    if lab_names.dir.exists() {
        left.push(format!("directory {}", lab_names.dir.display()));
    }
    left
}

#[test]
fn kernel_reference_balances_every_encapsulation_by_weight() {
    require_root!();
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        ..LbSpec::all(&[1, 2, 3])
    };
    let t0 = std::time::Instant::now();
    let mut lab = LbLab::build(&spec).expect("lab");
    println!("lab built in {:.1} s", t0.elapsed().as_secs_f64());
    let names = lab.names().clone();
    let servers = lab.servers().to_vec();

    for vip in lab.vips() {
        let n: u32 = if vip.encap.direct_return() && matches!(vip.encap, Encap::Gre4 | Encap::Gre6)
        {
            120
        } else {
            600
        };
        let tx0 = lb_uplink_tx(&lab);
        let logs0 = lab.server_log_counts().expect("logs");
        let r = lab.curl_loop(&vip, n).expect("curl loop");
        let tx = lb_uplink_tx(&lab) - tx0;
        let logs: Vec<u64> = lab
            .server_log_counts()
            .expect("logs")
            .iter()
            .zip(&logs0)
            .map(|(a, b)| a - b)
            .collect();
        let what = format!("{} {}", vip.encap.name(), vip.addr);
        println!(
            "{what}: {} requests in {:.2} s, per server {:?} (logs {logs:?}), LB uplink sent {tx}",
            r.requests,
            r.duration_us as f64 / 1e6,
            r.counts(&servers),
        );
        all_complete(&what, &r, u64::from(n));
        assert_eq!(
            r.counts(&servers),
            logs,
            "{what}: client and server counts differ"
        );
        if n >= 600 {
            r.check_spread(&servers, SIGMAS)
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        } else {
            assert!(r.counts(&servers).iter().all(|&c| c > 0), "{what}: {r:?}");
        }
        // Each server saw the request on the address and port the encapsulation implies,
        // from the client's own address (nothing rewrote the source).
        for body in &r.bodies {
            let mut w = body.split_whitespace();
            let name = w.next().expect("name");
            let server = servers.iter().find(|s| s.name == name).expect("a server");
            let (a, p) = vip.seen_by(server);
            let got: Vec<&str> = w.collect();
            assert_eq!(got, [a.to_string(), p.to_string()], "{what}: {body}");
        }
        let client = match vip.addr {
            IpAddr::V4(_) => addr::CLIENT4.to_string(),
            IpAddr::V6(_) => addr::CLIENT6.to_string(),
        };
        for s in &servers {
            let log = lab.server_log(s.index).expect("log");
            let last = log.last().expect("a request");
            assert!(last.starts_with(&format!("{client} ")), "{what}: {last}");
        }
        // Direct return: the replies did not cross the LB (a few stray packets at most);
        // NAT: every reply did (several packets per request).
        if vip.encap.direct_return() {
            assert!(
                tx < u64::from(n) / 10,
                "{what}: LB uplink sent {tx} packets"
            );
        } else {
            assert!(
                tx >= u64::from(n) * 3,
                "{what}: LB uplink sent only {tx} packets"
            );
        }
    }

    // wrk, bounded: a new connection per request (each a new flow), then kept connections.
    let nat4 = lab
        .vip(Encap::Nat4 { target_port: 8080 }, false)
        .expect("nat4 vip");
    let l3dsr = lab
        .vip(Encap::L3dsr { dscp: 23 }, false)
        .expect("l3dsr vip");
    for (vip, spec) in [
        (nat4, WrkSpec::default()),
        (l3dsr, WrkSpec::default()),
        (
            nat4,
            WrkSpec {
                new_connection_per_request: false,
                connections: 12,
                ..WrkSpec::default()
            },
        ),
    ] {
        let logs0 = lab.server_log_counts().expect("logs");
        let r = lab.run_wrk(&vip, &spec).expect("wrk");
        let logged: u64 = lab
            .server_log_counts()
            .expect("logs")
            .iter()
            .zip(&logs0)
            .map(|(a, b)| a - b)
            .sum();
        let what = format!("wrk {} {:?}", vip.encap.name(), spec);
        println!(
            "{what}: {} requests ({:.0}/s, p50 {} us, p99 {} us), per server {:?}, logged {logged}",
            r.requests,
            r.rate(),
            r.p50_us,
            r.p99_us,
            r.counts(&servers)
        );
        all_complete(&what, &r, 0);
        assert!(r.requests > 100, "{what}: {r:?}");
        assert_eq!(r.per_server.values().sum::<u64>(), r.requests, "{what}");
        // The servers logged every request wrk counted, plus at most the ones in flight when
        // wrk stopped.
        assert!(
            logged >= r.requests && logged <= r.requests + u64::from(spec.connections),
            "{what}: logged {logged}"
        );
        if spec.new_connection_per_request {
            r.check_spread(&servers, SIGMAS)
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        }
    }

    // A stopped server refuses its share (the kernel reference has no health checks); started
    // again, everything completes.
    lab.stop_server(2).expect("stop s2");
    assert!(!lab.server_running(2));
    let r = lab.curl_loop(&nat4, 120).expect("curl loop");
    assert_eq!(r.per_server.get("s2"), None, "{r:?}");
    assert!(
        r.failures() > 20,
        "about half the requests hash to s2: {r:?}"
    );
    lab.start_server(2).expect("start s2");
    let r = lab.curl_loop(&nat4, 120).expect("curl loop");
    all_complete("after restarting s2", &r, 120);

    lab.delete().expect("deleted");
    assert_eq!(remains(&names), Vec::<String>::new());
}

#[test]
fn kernel_reference_nat_round_robin_is_exact_and_a_panic_leaves_nothing() {
    require_root!();
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        encaps: vec![
            Encap::Nat4 { target_port: 8080 },
            Encap::Nat6 { target_port: 8081 },
        ],
        ..LbSpec::new(Encap::Gre4, &[1, 1, 2])
    }
    .with_lb(LbMode::Kernel(KernelHash::NumgenInc));
    let lab = LbLab::build(&spec).expect("lab");
    let names = lab.names().clone();
    for vip in lab.vips() {
        let r = lab.curl_loop(&vip, 100).expect("curl");
        all_complete(vip.encap.name(), &r, 100);
        // numgen inc: slots 0,1,2,3 -> s0, s1, s2, s2 in turn.
        assert_eq!(r.counts(lab.servers()), vec![25, 25, 50], "{r:?}");
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _lab = lab;
        panic!("a failing test");
    }));
    assert!(result.is_err());
    assert_eq!(remains(&names), Vec::<String>::new());
}

#[test]
fn bare_lab_leaves_the_lb_ports_to_vecplane() {
    require_root!();
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        ..LbSpec::all(&[1, 1, 1])
    }
    .with_lb(LbMode::Bare);
    let lab = LbLab::build(&spec).expect("lab");
    for p in [lab.uplink(), lab.server_port()] {
        let out = lab
            .exec_ok(lab.lb_ns(), &["ip", "-j", "addr", "show", "dev", &p.ifname])
            .expect("ip addr");
        assert!(out.contains("\"operstate\":\"UP\""), "{out}");
        assert!(!out.contains("\"local\""), "{}: bare: {out}", p.ifname);
    }
    let config = lab
        .vecplane_config(netlab::Driver::AF_XDP, Some(1))
        .expect("config");
    assert!(config.contains(&format!("interface = \"{}\"", lab.uplink().ifname)));
    let lines = lab.lb_cli_lines();
    assert!(
        lines.contains(
            &"lb vip 198.18.100.1/32 protocol tcp port 80 encap l3dsr dscp 23".to_string()
        ),
        "{lines:?}"
    );
    assert!(lines.contains(&"lb as 2001:db8:100::3/128 protocol tcp port 80 2001:db8:12::11 2001:db8:12::12 2001:db8:12::13".to_string()), "{lines:?}");
    // Servers are up and reachable on their segment (from the router) even with no balancer.
    let s = &lab.servers()[1];
    let body = lab
        .exec_ok(
            lab.router_ns(),
            &["curl", "-s", "-m", "2", &format!("http://{}:8080/", s.ip4)],
        )
        .expect("curl");
    assert_eq!(body.trim(), format!("s1 {} 8080", s.ip4));
    // The same lab switches to the kernel reference and back (interleaved comparisons).
    let mut lab = lab;
    lab.set_lb(LbMode::Kernel(KernelHash::Jhash))
        .expect("to the kernel reference");
    for vip in lab.vips() {
        let r = lab.curl_loop(&vip, 30).expect("curl");
        all_complete(&format!("switched {}", vip.addr), &r, 30);
    }
    lab.set_lb(LbMode::Bare).expect("back to bare");
    for p in [lab.uplink(), lab.server_port()] {
        let out = lab
            .exec_ok(lab.lb_ns(), &["ip", "-j", "addr", "show", "dev", &p.ifname])
            .expect("ip addr");
        assert!(
            !out.contains("\"local\""),
            "{}: bare again: {out}",
            p.ifname
        );
    }
    let rules = lab
        .exec_ok(lab.lb_ns(), &["nft", "list", "ruleset"])
        .expect("nft");
    assert!(rules.trim().is_empty(), "{rules}");
}

/// What vecplane will send, crafted: each case a frame leaving the LB's server-side port and
/// the VIP whose SYN-ACK must reach the client directly (through the router).
#[test]
fn crafted_l3dsr_and_gre_frames_get_their_answer_straight_at_the_client() {
    require_root!();
    let Some(py) = golden_support::scapy_or_skip("crafted_l3dsr_and_gre_frames") else {
        return;
    };
    let spec = LbSpec {
        prefix: PREFIX.to_string(),
        ..LbSpec::all(&[1, 1, 1])
    }
    .with_lb(LbMode::Bare);
    let lab = LbLab::build(&spec).expect("lab");
    let s = lab.servers();
    let (c4, c6) = (addr::CLIENT4, addr::CLIENT6);
    // GRE outer sources chosen per flow, not the LB's own addresses.
    let (o4, o6) = ("198.18.12.200", "2001:db8:12::200");
    let lb_mac = addr::MAC_LB_DOWN;
    let cases = [
        (
            "198.18.100.1",
            format!(
                "Ether(src='{lb_mac}',dst='{}')/IP(src='{c4}',dst='{}',tos=23<<2)/TCP(sport=41001,dport=80,flags='S')",
                s[0].mac, s[0].ip4
            ),
        ),
        (
            "198.18.100.2",
            format!(
                "Ether(src='{lb_mac}',dst='{}')/IP(src='{o4}',dst='{}')/GRE(proto=0x0800)/IP(src='{c4}',dst='198.18.100.2')/TCP(sport=41002,dport=80,flags='S')",
                s[1].mac, s[1].ip4
            ),
        ),
        (
            "2001:db8:100::2",
            format!(
                "Ether(src='{lb_mac}',dst='{}')/IP(src='{o4}',dst='{}')/GRE(proto=0x86dd)/IPv6(src='{c6}',dst='2001:db8:100::2')/TCP(sport=41003,dport=80,flags='S')",
                s[2].mac, s[2].ip4
            ),
        ),
        (
            "198.18.100.3",
            format!(
                "Ether(src='{lb_mac}',dst='{}')/IPv6(src='{o6}',dst='{}')/GRE(proto=0x0800)/IP(src='{c4}',dst='198.18.100.3')/TCP(sport=41004,dport=80,flags='S')",
                s[0].mac, s[0].ip6
            ),
        ),
        (
            "2001:db8:100::3",
            format!(
                "Ether(src='{lb_mac}',dst='{}')/IPv6(src='{o6}',dst='{}')/GRE(proto=0x86dd)/IPv6(src='{c6}',dst='2001:db8:100::3')/TCP(sport=41005,dport=80,flags='S')",
                s[1].mac, s[1].ip6
            ),
        ),
    ];
    // Count SYN-ACKs from each VIP as they arrive at the client.
    let mut nft = String::from(
        "table inet vlb_check {\n  chain in {\n    type filter hook prerouting priority 0; policy accept;\n",
    );
    for (i, (vip, _)) in cases.iter().enumerate() {
        let fam = if vip.contains(':') { "ip6" } else { "ip" };
        nft.push_str(&format!(
            "    {fam} saddr {vip} tcp sport 80 tcp flags & (syn | ack) == syn | ack counter name c{i}\n"
        ));
    }
    nft.push_str("  }\n");
    for i in 0..cases.len() {
        nft.push_str(&format!("  counter c{i} {{ }}\n"));
    }
    nft.push_str("}\n");
    let nft_path = lab.path("check.nft");
    std::fs::write(&nft_path, &nft).expect("write rules");
    lab.exec_ok(lab.client_ns(), &["nft", "-f", &nft_path.to_string_lossy()])
        .unwrap_or_else(|e| panic!("{e:#}\n{nft}"));
    let frames: Vec<String> = cases.iter().map(|(_, f)| f.clone()).collect();
    let script = format!(
        "from scapy.all import *\nconf.verb = 0\nfor f in [{}]:\n    sendp(f, iface='{}')\n",
        frames.join(", "),
        lab.server_port().ifname
    );
    let py = py.to_string_lossy().into_owned();
    let out = lab
        .exec_timeout(
            lab.lb_ns(),
            &[&py, "-c", &script],
            std::time::Duration::from_secs(60),
        )
        .expect("scapy runs");
    assert!(
        out.status.success(),
        "scapy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let listing = lab
            .exec_ok(
                lab.client_ns(),
                &["nft", "list", "table", "inet", "vlb_check"],
            )
            .expect("counters");
        let hits: Vec<bool> = (0..cases.len())
            .map(|i| {
                listing
                    .split(&format!("counter c{i} {{"))
                    .nth(1)
                    .is_some_and(|rest| !rest.trim_start().starts_with("packets 0 "))
            })
            .collect();
        if hits.iter().all(|&h| h) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "SYN-ACKs missing at the client: {:?}\n{listing}",
            cases
                .iter()
                .zip(&hits)
                .filter(|(_, h)| !**h)
                .map(|(c, _)| c.0)
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

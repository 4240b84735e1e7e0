//! Route changes while traffic flows, end to end (root; A - R - B over veths with `vecplane
//! run` in R): during a bounded 10 s UDP flood from A to an address of B (`vecplane gen tx`,
//! 100,000 packets at 10,000/s), 1,000 route changes through the API for prefixes the flood
//! does not use, and the flood's own route switched between two next hops 100 times. Nothing
//! may be lost: an nftables counter in B counts every packet that arrived, and vecplane's
//! counters show no drop on the IPv4 path. Addresses are 198.18.0.0/15 only; the namespaces
//! (and B's nftables table with them) are deleted also when the test fails.

#[path = "support/live.rs"]
mod live;

use live::{call, drops, flood};
use netlab::{addr, Addressing, Host, Mode, Topology};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// The flood's destination: an address of B reached only through the churned route.
const TARGET: &str = "198.19.5.1";
const ROUTE: &str = "198.19.5.0/24";

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "nft", "ping"]))
}

fn config(t: &Topology) -> std::path::PathBuf {
    let mac_b = addr::MAC_B0;
    live::config(
        t,
        "live-routes.toml",
        &format!(
            "[[neighbour]]\nip = \"198.18.2.3\"\nmac = \"{mac_b}\"\nport = \"Rb\"\n\n\
             [[route]]\nprefix = \"{ROUTE}\"\nvia = \"198.18.2.2\"\n"
        ),
    )
}

#[test]
fn route_changes_during_a_udp_flood_lose_nothing() {
    if !prerequisites() {
        return;
    }
    let t =
        Topology::build_with_prefix("vplr", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let b0 = t.names().b0.clone();
    t.exec_ok(
        Host::B,
        &["ip", "addr", "add", &format!("{TARGET}/32"), "dev", &b0],
    )
    .expect("B's extra address");
    // B counts (and drops) what arrives for the target, before its stack sees it.
    let count_rule =
        format!("add rule inet vplr in ip daddr {TARGET} meta l4proto udp counter drop");
    for rule in [
        "add table inet vplr",
        "add chain inet vplr in { type filter hook prerouting priority -300 ; }",
        count_rule.as_str(),
    ] {
        t.exec_ok(Host::B, &["nft", rule])
            .unwrap_or_else(|e| panic!("nft {rule}: {e:#}"));
    }
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t))
        .expect("vecplane run starts");
    let ep = control::Endpoint::Unix(vp.socket().to_path_buf());
    let ping = t
        .exec_timeout(
            Host::A,
            &[
                "ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "2", TARGET,
            ],
            Duration::from_secs(15),
        )
        .expect("ping runs");
    assert!(
        ping.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&ping.stdout),
        vp.log()
    );
    let path_nodes = [
        "ip4-input",
        "ip4-lookup",
        "ip4-rewrite",
        "interface-output",
        "Rb-tx",
    ];
    let drops_before = drops(&vp, &path_nodes);

    const PACKETS: u64 = 100_000;
    let (summary, changes, flips) = std::thread::scope(|s| {
        let flood = s.spawn(|| flood(&t, Host::A, TARGET, PACKETS, 10_000));
        // Give the flood a second to start, then churn for about eight seconds.
        std::thread::sleep(Duration::from_secs(1));
        let start = Instant::now();
        let (mut changes, mut flips) = (0u32, 0u32);
        for i in 0..1000u32 {
            let prefix = format!("198.19.{}.0", 100 + i % 100);
            let path = format!("/v1/routes/{prefix}/24");
            match (i / 100) % 3 {
                0 => call(&ep, "PUT", &path, Some(json!({"via": ["198.18.2.2"]}))),
                1 => call(
                    &ep,
                    "PUT",
                    &path,
                    Some(json!({"via": ["198.18.2.2", "198.18.2.3"]})),
                ),
                _ => call(&ep, "DELETE", &path, None),
            };
            changes += 1;
            if i % 10 == 9 {
                let via = if flips % 2 == 0 {
                    "198.18.2.3"
                } else {
                    "198.18.2.2"
                };
                call(
                    &ep,
                    "PUT",
                    &format!("/v1/routes/{ROUTE}"),
                    Some(json!({"via": [via]})),
                );
                flips += 1;
            }
            // Spread the changes over the flood.
            let due = Duration::from_millis(8 * u64::from(i + 1));
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        (flood.join().expect("flood thread"), changes, flips)
    });
    assert_eq!((changes, flips), (1000, 100));
    let sent = summary["sent"].as_u64().unwrap_or(0);
    // `sent` leaves out what A's own veth dropped before vecplane saw it (`interface_dropped`:
    // on a loaded host, as many as the receiving side's softirq falls behind by); what
    // vecplane received must all arrive. Half the flood is plenty for the changes to land
    // among packets; how much more depends on the machine's load, not on vecplane.
    assert!(sent >= PACKETS / 2, "the generator sent too few: {summary}");
    let received = live::wait_counted(&t, Host::B, "vplr", TARGET, sent);
    assert_eq!(
        received,
        sent,
        "B received {received} of {sent} packets sent during route changes\n{}\n{}",
        vp.request("show errors", false)
            .map(|r| r.text.unwrap_or_default())
            .unwrap_or_default(),
        vp.log()
    );
    assert_eq!(
        drops(&vp, &path_nodes),
        drops_before,
        "drops on the IPv4 path: {}",
        vp.request("show errors", false)
            .map(|r| r.text.unwrap_or_default())
            .unwrap_or_default()
    );
    let routes = call(&ep, "GET", "/v1/routes?family=ipv4&limit=1000", None);
    assert!(routes["version"].as_u64().unwrap_or(0) >= 1100, "{routes}");
    vp.stop().expect("vecplane stops cleanly");
}

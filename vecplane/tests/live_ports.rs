//! Ports added and removed while traffic flows, end to end (root; A - R - B over veths with
//! `vecplane run` in R, and a third veth from R to B): during a bounded 10 s UDP flood from B
//! to an address of A through ports Rb and Ra (`vecplane gen tx`, 50,000 packets at
//! 5,000/s: a debug build on a loaded 2-core machine keeps up with it), port Rc is added on the third veth, routed to, sent 300 pings from A's kernel
//! through and removed again, six times, in turn through the API, `vecplane ctl` and a reload
//! of the config file with and without Rc's `[[port]]` table.
//! Nothing of the flood may be lost (an nftables counter in A) and vecplane shows no drop on
//! its path; every round's pings arrive in B through Rc (a counter in B); Ra and Rb keep their
//! ids. (The pings come from A's kernel, not a second generator: `gen tx` attaches XDP to its
//! interface, which would take A's share of the flood.) Addresses are 198.18.0.0/15 only; the
//! namespaces (with the third veth and B's nftables table) are deleted also when the test fails.

#[path = "support/live.rs"]
mod live;

use live::{call, drops, flood, third_link, MAC_RC};
use netlab::{addr, Addressing, Host, Mode, Topology};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// The flood's destination, an address of A reached through Ra.
const FLOOD_TARGET: &str = "198.19.5.1";
/// An address of B reached only through Rc while it exists.
const RC_TARGET: &str = "198.19.6.1";
const RC_ROUTE: &str = "198.19.6.0/24";

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "nft", "ping"]))
}

/// The config, with `extra` at its end.
fn config(t: &Topology, extra: &str) -> std::path::PathBuf {
    let a4 = addr::A4;
    live::config(
        t,
        "live-ports.toml",
        &format!("[[route]]\nprefix = \"198.19.5.0/24\"\nvia = \"{a4}\"\n\n{extra}"),
    )
}

/// How a round adds and removes Rc.
#[derive(Clone, Copy, Debug)]
enum Via {
    Api,
    Ctl,
    Reload,
}

#[test]
fn ports_added_and_removed_during_a_udp_flood_lose_nothing() {
    if !prerequisites() {
        return;
    }
    let t =
        Topology::build_with_prefix("vplp", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let a0 = t.names().a0.clone();
    t.exec_ok(
        Host::A,
        &[
            "ip",
            "addr",
            "add",
            &format!("{FLOOD_TARGET}/32"),
            "dev",
            &a0,
        ],
    )
    .expect("A's flood address");
    let rc = third_link(&t, "198.19.6.1/32");
    // A counts (and drops) the flood before its stack sees it; B counts what reaches its
    // address behind Rc.
    let flood_rule = format!("ip daddr {FLOOD_TARGET} meta l4proto udp counter drop");
    let ping_rule = format!("ip daddr {RC_TARGET} counter");
    for (host, rule) in [(Host::A, flood_rule), (Host::B, ping_rule)] {
        for rule in [
            "add table inet vplp".to_string(),
            "add chain inet vplp in { type filter hook prerouting priority -300 ; }".to_string(),
            format!("add rule inet vplp in {rule}"),
        ] {
            t.exec_ok(host, &["nft", &rule])
                .unwrap_or_else(|e| panic!("nft {rule}: {e:#}"));
        }
    }
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, ""))
        .expect("vecplane run starts");
    let socket = vp.socket().to_string_lossy().into_owned();
    let ep = control::Endpoint::Unix(vp.socket().to_path_buf());
    let rc_table = format!(
        "[[port]]\nname = \"Rc\"\ndriver = \"af-packet\"\ninterface = \"{rc}\"\n\
         mac = \"{MAC_RC}\"\nip4 = [\"198.18.3.1/24\"]\n"
    );
    let reload = |extra: &str| {
        config(&t, extra);
        let r = call(&ep, "POST", "/v1/reload", None);
        assert_eq!(r["port_errors"], json!([]), "{r}");
        r
    };
    let ping = t
        .exec_timeout(
            Host::B,
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                "3",
                "-i",
                "0.2",
                "-W",
                "2",
                FLOOD_TARGET,
            ],
            Duration::from_secs(15),
        )
        .expect("ping runs");
    assert!(ping.status.success(), "{}", vp.log());
    let path_nodes = [
        "ip4-input",
        "ip4-lookup",
        "ip4-rewrite",
        "interface-output",
        "Ra-tx",
    ];
    let drops_before = drops(&vp, &path_nodes);
    let ids_before = call(&ep, "GET", "/v1/interfaces", None);

    const PACKETS: u64 = 50_000;
    const ROUNDS: u64 = 6;
    let pings = "300";
    let (summary, per_round) = std::thread::scope(|s| {
        let flood = s.spawn(|| flood(&t, Host::B, FLOOD_TARGET, PACKETS, 5_000));
        std::thread::sleep(Duration::from_millis(500));
        let mut per_round = Vec::new();
        for round in 0..ROUNDS {
            let via = [Via::Api, Via::Ctl, Via::Reload][round as usize % 3];
            if let Via::Api = via {
                let added = call(
                    &ep,
                    "POST",
                    "/v1/interfaces",
                    Some(json!({"name": "Rc", "driver": "af-packet", "interface": rc,
                        "mac": MAC_RC, "ip4": ["198.18.3.1/24"]})),
                );
                assert_eq!(added["name"], "Rc", "{added}");
            } else if let Via::Reload = via {
                let r = reload(&rc_table);
                assert_eq!(r["ports_added"], json!(["Rc"]), "{r}");
            } else {
                let out = std::process::Command::new(BIN)
                    .args(["ctl", "--socket", &socket, "interface", "add", "name=Rc"])
                    .args(["driver=af-packet", &format!("interface={rc}")])
                    .args([&format!("mac={MAC_RC}"), "ip4=198.18.3.1/24"])
                    .output()
                    .expect("vecplane ctl runs");
                assert!(out.status.success(), "{out:?}");
            }
            call(
                &ep,
                "PUT",
                &format!("/v1/routes/{RC_ROUTE}"),
                Some(json!({"via": ["198.18.3.2"]})),
            );
            // B's address on Rc is resolved (ARP) before the burst: one ping answered (the
            // answer comes back through Rb and Ra) says so. A bound against a hang: ten tries.
            let resolved = (0..10).any(|_| {
                t.exec_timeout(
                    Host::A,
                    &["ping", "-n", "-q", "-c", "1", "-W", "1", RC_TARGET],
                    Duration::from_secs(10),
                )
                .is_ok_and(|o| o.status.success())
            });
            assert!(
                resolved,
                "round {round}: no ping answered through Rc\n{}",
                vp.log()
            );
            let before = live::counted(&t, Host::B, "vplp", RC_TARGET);
            let out = t
                .exec_timeout(
                    Host::A,
                    &[
                        "ping", "-n", "-q", "-c", pings, "-i", "0.001", "-W", "1", RC_TARGET,
                    ],
                    Duration::from_secs(20),
                )
                .expect("ping runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let sent: u64 = text
                .split(" packets transmitted")
                .next()
                .and_then(|l| l.rsplit(['\n', ' ']).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("ping's summary: {text}"));
            let got = live::wait_counted(&t, Host::B, "vplp", RC_TARGET, before + sent) - before;
            per_round.push((sent, got));
            call(&ep, "DELETE", &format!("/v1/routes/{RC_ROUTE}"), None);
            if let Via::Api = via {
                call(&ep, "DELETE", "/v1/interfaces/Rc", None);
            } else if let Via::Reload = via {
                let r = reload("");
                assert_eq!(r["ports_removed"], json!(["Rc"]), "{r}");
            } else {
                let out = std::process::Command::new(BIN)
                    .args(["ctl", "--socket", &socket, "interface", "del", "Rc"])
                    .output()
                    .expect("vecplane ctl runs");
                assert!(out.status.success(), "{out:?}");
            }
        }
        (flood.join().expect("flood thread"), per_round)
    });
    for (round, (sent, got)) in per_round.iter().enumerate() {
        assert!(*sent > 0, "round {round}: nothing sent through Rc");
        assert_eq!(got, sent, "round {round}: B got {got} of {sent} through Rc");
    }
    let sent = summary["sent"].as_u64().unwrap_or(0);
    assert!(sent >= PACKETS / 2, "the generator sent too few: {summary}");
    let received = live::wait_counted(&t, Host::A, "vplp", FLOOD_TARGET, sent);
    let errors = || {
        ["show errors", "show interfaces"]
            .map(|c| {
                vp.request(c, false)
                    .map(|r| r.text.unwrap_or_default())
                    .unwrap_or_default()
            })
            .join("\n")
    };
    assert_eq!(
        received,
        sent,
        "A received {received} of {sent} flood packets while ports came and went\n{}\n{}",
        errors(),
        vp.log()
    );
    assert_eq!(drops(&vp, &path_nodes), drops_before, "{}", errors());
    // Ra and Rb kept their ids; Rc is gone.
    let now = call(&ep, "GET", "/v1/interfaces", None);
    for (i, name) in ["Ra", "Rb"].iter().enumerate() {
        assert_eq!(now["interfaces"][i]["name"], *name, "{now}");
        assert_eq!(ids_before["interfaces"][i]["name"], *name, "{ids_before}");
    }
    let listed = now.to_string();
    assert!(!listed.contains("\"Rc\""), "{now}");
    let gone = control::http(&ep, "DELETE", "/v1/interfaces/Rc", None).expect("DELETE");
    assert_eq!(gone.status, 404, "{}", gone.error_message());
    vp.stop().expect("vecplane stops cleanly");
}

//! IPFIX as a registered feature, live (root; a netlab topology A - R - B with veths,
//! `vecplane run` routing in R): `[ipfix]` in the config starts it, its nodes sit on the arcs
//! but meter nothing until `set interface feature Ra ipfix arc ip4-unicast`; then A's pings are
//! metered (`show ipfix`, `/v1/features/ipfix`, `/metrics`), their flow leaves as IPFIX
//! messages to the collector, and after `... disable` nothing more is metered. A bad `[ipfix]`
//! key is refused at start, naming its line. The collector is a UDP socket of this test on
//! loopback; the records' decoding by nfdump and tshark is `features/ipfix/tests/collectors.rs`.
//! Addresses: 198.18.0.0/15 only; the namespaces go also on failure.

#[macro_use]
#[path = "support/root.rs"]
mod root;

use netlab::{Addressing, Host, Mode, Topology};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");
static SERIAL: Mutex<()> = Mutex::new(());
const TOOLS: &[&str] = &["ip", "ping", "python3"];

fn config(t: &Topology, collector: u16, ipfix_extra: &str) -> String {
    let n = t.names();
    format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [ipfix]\ncollectors = [\"127.0.0.1:{collector}\"]\nobservation-domain = 7\n\
         idle-timeout-s = 1\nactive-timeout-s = 2\n{ipfix_extra}\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nip4 = [\"198.18.1.1/24\"]\nip6 = [\"2001:db8:1::1/64\"]\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nip4 = [\"198.18.2.1/24\"]\nip6 = [\"2001:db8:2::1/64\"]\n",
        n.ra, n.rb
    )
}

fn ping(t: &Topology, count: u32) -> bool {
    let c = count.to_string();
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                &c,
                "-i",
                "0.05",
                "-W",
                "2",
                "-w",
                "15",
                "198.18.2.2",
            ],
            Duration::from_secs(30),
        )
        .expect("ping runs");
    String::from_utf8_lossy(&out.stdout).contains(" 0% packet loss")
}

fn data(vp: &netlab::Vecplane, cmd: &str) -> Value {
    vp.request(cmd, true)
        .unwrap_or_else(|e| panic!("{cmd}: {e:#}"))
        .data
        .unwrap_or(Value::Null)
}

fn metered(vp: &netlab::Vecplane) -> u64 {
    data(vp, "show ipfix")["stats"]["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["packets"].as_u64())
        .sum()
}

/// The collector, in R's namespace (where vecplane runs): how many IPFIX messages (version
/// 10, its length, observation domain 7) reach 127.0.0.1:4739 there within `seconds`.
fn collect(t: &Topology, seconds: u32) -> usize {
    let script = format!(
        "import socket, struct, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('127.0.0.1', {COLLECTOR_PORT}))\n\
         s.settimeout(0.5)\n\
         end = time.time() + {seconds}\n\
         n = 0\n\
         while time.time() < end:\n\
         \x20   try:\n\
         \x20       d = s.recv(65536)\n\
         \x20   except socket.timeout:\n\
         \x20       continue\n\
         \x20   if len(d) >= 16 and d[:2] == b'\\x00\\x0a' and struct.unpack('!H', d[2:4])[0] == len(d) \\\n\
         \x20           and struct.unpack('!I', d[12:16])[0] == 7:\n\
         \x20       n += 1\n\
         print('messages', n)\n"
    );
    let out = t
        .exec_timeout(
            Host::R,
            &["python3", "-c", &script],
            Duration::from_secs(u64::from(seconds) + 10),
        )
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("messages ")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

const COLLECTOR_PORT: u16 = 4739;

#[test]
fn ipfix_meters_only_where_enabled_and_exports_to_the_collector() {
    require_root!(SERIAL, TOOLS);
    let t =
        Topology::build_with_prefix("vpix", Mode::Dataplane(Addressing::Routed)).expect("topology");
    // The exporter sends from R's namespace, whose loopback the collector listens on.
    t.exec_timeout(
        Host::R,
        &["ip", "link", "set", "lo", "up"],
        Duration::from_secs(10),
    )
    .expect("lo up in R");
    let port = COLLECTOR_PORT;

    // A bad key is refused at start, at its line, and nothing starts.
    let bad = t.path("bad.toml");
    std::fs::write(&bad, config(&t, port, "sampling = 0\n")).expect("write config");
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&bad)
        .output()
        .expect("vecplane runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(":9: [ipfix] field `sampling`"), "{err}");

    let path = t.path("ipfix.toml");
    std::fs::write(&path, config(&t, port, "")).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    let features = data(&vp, "show features");
    assert!(
        features["registered"]
            .as_array()
            .is_some_and(|r| r.iter().any(|f| f == "ipfix")),
        "{features}"
    );
    // On the arcs, enabled nowhere: nothing is metered.
    assert!(ping(&t, 5), "ping through vecplane\n{}", vp.log());
    assert_eq!(metered(&vp), 0, "{}", data(&vp, "show ipfix"));

    let r = vp
        .request("set interface feature Ra ipfix arc ip4-unicast", false)
        .expect("the daemon answers");
    assert!(r.ok, "enable: {:?}", r.error);
    let got = std::thread::scope(|s| {
        let collector = s.spawn(|| collect(&t, 10));
        std::thread::sleep(Duration::from_millis(500));
        assert!(ping(&t, 20), "ping while metered\n{}", vp.log());
        collector.join().expect("collector")
    });
    assert_eq!(metered(&vp), 20, "A's 20 echo requests, on Ra only");
    assert!(
        got > 0,
        "IPFIX messages reach the collector\n{}",
        data(&vp, "show ipfix")
    );
    let api = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "GET",
        "/v1/features/ipfix",
        None,
    )
    .expect("GET /v1/features/ipfix");
    assert!(
        api.json()["stats"]["exporter"].is_object(),
        "{}",
        api.json()
    );
    let metrics = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "GET",
        "/metrics",
        None,
    )
    .expect("GET /metrics");
    let m = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        m.contains("vecplane_ipfix_packets_total{worker=\"0\"} 20"),
        "{m}"
    );

    let r = vp
        .request(
            "set interface feature Ra ipfix arc ip4-unicast disable",
            false,
        )
        .expect("the daemon answers");
    assert!(r.ok, "disable: {:?}", r.error);
    assert!(ping(&t, 5), "ping after disabling");
    assert_eq!(metered(&vp), 20, "nothing metered once disabled");
    vp.stop().expect("vecplane stops cleanly");
    t.delete().expect("namespaces removed");
}

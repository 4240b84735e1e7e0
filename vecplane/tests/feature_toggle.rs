//! A feature turned on and off while a UDP flood runs, by API and by reload, loses no packet
//! (root; a netlab topology A - R - B with veths, `vecplane run` routing in R). A sends a
//! bounded flood of numbered datagrams to B; meanwhile IPFIX is enabled and disabled on R's
//! ports by `POST /v1/features` and by reloads of a config whose ports' `features` come and go.
//! B must receive every datagram once, vecplane's graph must drop none, and IPFIX must have
//! metered some of them (it ran) but not all (it was off part of the time). Addresses:
//! 198.18.0.0/15 only; the namespaces and the daemon go also on failure.

#[macro_use]
#[path = "support/root.rs"]
mod root;
#[path = "support/live.rs"]
mod live;

use netlab::{Addressing, Host, Mode, Topology};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");
static SERIAL: Mutex<()> = Mutex::new(());
const TOOLS: &[&str] = &["ip", "ping", "python3"];
/// Datagrams in the flood, and its rate (a loaded CI machine keeps up with it).
const DATAGRAMS: u32 = 6000;
const PER_SECOND: u32 = 1000;

fn config(t: &Topology, features: &str) -> String {
    let n = t.names();
    format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [ipfix]\ncollectors = [\"127.0.0.1:4739\"]\nidle-timeout-s = 1\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nip4 = [\"198.18.1.1/24\"]\n{features}\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nip4 = [\"198.18.2.1/24\"]\n{features}\n",
        n.ra, n.rb
    )
}

const ON: &str = "features = { ip4-unicast = [\"ipfix\"], output = [\"ipfix\"] }";

fn api(vp: &netlab::Vecplane, method: &str, path: &str, body: Option<Value>) -> Value {
    let r = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        method,
        path,
        body.map(|b| b.to_string().into_bytes()),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e:#}"));
    assert!(
        (200..300).contains(&r.status),
        "{method} {path}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// Drops on the flood's path (IPv4 forwarding, the IPFIX nodes, output): the kernel's own
/// IPv6 chatter from A and B, which R has no address for, is dropped elsewhere.
fn graph_drops(vp: &netlab::Vecplane) -> u64 {
    let v = vp.request("show errors", true).expect("show errors").data;
    v.unwrap_or(Value::Null)["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            let node = e["node"].as_str().unwrap_or("");
            node.starts_with("ip4")
                || node.starts_with("ipfix")
                || node.starts_with("interface")
                || node.ends_with("-tx")
        })
        .filter_map(|e| e["count"].as_u64())
        .sum()
}

/// B's receiver: the distinct sequence numbers of the flood it got (python3 in B).
fn receive(t: &Topology) -> (u64, u64) {
    let script = format!(
        "import socket, struct, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)\n\
         s.bind(('198.18.2.2', 5001))\n\
         s.settimeout(0.5)\n\
         seen = set(); n = 0; last = None; end = time.time() + 60\n\
         while time.time() < end and len(seen) < {DATAGRAMS}:\n\
         \x20   try:\n\
         \x20       d = s.recv(2048)\n\
         \x20   except socket.timeout:\n\
         \x20       if last is not None and time.time() - last > 5: break\n\
         \x20       continue\n\
         \x20   last = time.time(); n += 1\n\
         \x20   seen.add(struct.unpack('!I', d[:4])[0])\n\
         print('got', len(seen), n)\n"
    );
    let out = t
        .exec_timeout(
            Host::B,
            &["python3", "-c", &script],
            Duration::from_secs(75),
        )
        .expect("python3 runs in B");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut w = text
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0));
    (w.next().unwrap_or(0), w.next().unwrap_or(0))
}

/// A's sender: the flood, paced, numbered.
fn send(t: &Topology) {
    let script = format!(
        "import socket, struct, time\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         start = time.time()\n\
         for i in range({DATAGRAMS}):\n\
         \x20   s.sendto(struct.pack('!I', i) + b'x' * 60, ('198.18.2.2', 5001))\n\
         \x20   ahead = start + (i + 1) / {PER_SECOND} - time.time()\n\
         \x20   if ahead > 0: time.sleep(ahead)\n"
    );
    t.exec_timeout(
        Host::A,
        &["python3", "-c", &script],
        Duration::from_secs(60),
    )
    .expect("python3 runs in A");
}

#[test]
fn a_feature_toggled_by_api_and_reload_under_a_flood_loses_no_packet() {
    require_root!(SERIAL, TOOLS);
    let t =
        Topology::build_with_prefix("vpft", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let path = t.path("toggle.toml");
    std::fs::write(&path, config(&t, "")).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    // Neighbours resolved before the flood (A's and B's ARP are not part of it).
    let ping = t
        .exec_timeout(
            Host::A,
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                "3",
                "-i",
                "0.2",
                "-w",
                "15",
                "198.18.2.2",
            ],
            Duration::from_secs(30),
        )
        .expect("ping runs");
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains(" 0% packet loss"),
        "ping through vecplane\n{}",
        vp.log()
    );
    let drops_before = graph_drops(&vp);

    let (got, toggles) = std::thread::scope(|s| {
        let receiver = s.spawn(|| receive(&t));
        std::thread::sleep(Duration::from_millis(500));
        let sender = s.spawn(|| send(&t));
        let mut toggles = 0;
        let until = Instant::now() + Duration::from_secs(u64::from(DATAGRAMS / PER_SECOND));
        while Instant::now() < until && !sender.is_finished() {
            // By API: on for both ports and arcs at once, then off.
            for enable in [true, false] {
                let changes: Vec<Value> = ["Ra", "Rb"]
                    .iter()
                    .flat_map(|p| {
                        ["ip4-unicast", "output"].map(|arc| {
                            json!({"port": p, "feature": "ipfix", "arc": arc, "enable": enable})
                        })
                    })
                    .collect();
                api(
                    &vp,
                    "POST",
                    "/v1/features",
                    Some(json!({ "changes": changes })),
                );
                toggles += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            // By reload: the ports' `features` come, then go.
            for features in [ON, ""] {
                std::fs::write(&path, config(&t, features)).expect("rewrite config");
                let r = api(&vp, "POST", "/v1/reload", None);
                assert!(
                    r["policies_changed"]
                        .as_array()
                        .is_some_and(|p| p.iter().any(|x| x == "port-features")),
                    "{r}"
                );
                toggles += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        sender.join().expect("sender");
        (receiver.join().expect("receiver"), toggles)
    });
    let (distinct, total) = got;
    let metered = live::ipfix_metered(&vp);
    let drops = graph_drops(&vp) - drops_before;
    let interfaces = vp
        .request("show interfaces", false)
        .ok()
        .and_then(|r| r.text)
        .unwrap_or_default();
    assert!(toggles >= 4, "toggled {toggles} times during the flood");
    assert_eq!(
        (distinct, total, drops),
        (u64::from(DATAGRAMS), u64::from(DATAGRAMS), 0),
        "every datagram reached B once, none dropped in the graph\n{interfaces}\n{}",
        vp.request("show errors", false)
            .ok()
            .and_then(|r| r.text)
            .unwrap_or_default()
    );
    assert!(
        metered > 0 && metered < 4 * u64::from(DATAGRAMS),
        "IPFIX metered part of the flood (on 2 arcs of 2 ports while enabled): {metered}"
    );
    vp.stop().expect("vecplane stops cleanly");
    t.delete().expect("namespaces removed");
}

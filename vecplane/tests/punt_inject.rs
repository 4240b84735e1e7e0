//! The punt and inject paths live (root; a netlab topology A - R - B with veths, `vecplane run`
//! in R with both ports in a bridge in flow mode): a rule `actions=controller,output:2` punts a
//! copy and still forwards, and the copy `vecplane ctl punt capture` writes equals the bytes A
//! sent; `ctl punt show` and `/metrics` count it; a packet `ctl inject port` sends leaves on the
//! named port and arrives in B; one `ctl inject bridge` sends through the tables obeys them
//! (what a rule drops never arrives, and that rule counts it). Without root or a tool the test
//! says why it is skipped (and fails under CI=true). Addresses: 198.18.0.0/15 only; the
//! namespaces go also on failure.

use netlab::topology::addr;
use netlab::{Addressing, Host, Mode, Topology};
use packet::headers::{build_udp_frame, UdpFrameSpec};
use serde_json::Value;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");
const TOOLS: &[&str] = &["ip", "python3"];

fn config(t: &Topology) -> String {
    let n = t.names();
    format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [[bridge]]\nname = \"br0\"\nmode = \"flow\"\nflows = [\n\
           \"cookie=0x77,priority=100,udp,in_port=1,tp_dst=9999,actions=controller,output:2\",\n\
           \"priority=100,udp,in_port=1,tp_dst=9997,actions=drop\",\n\
           \"priority=10,in_port=1,actions=output:2\",\n\
           \"priority=10,in_port=2,actions=output:1\",\n]\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\nofport = 1\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nbridge = \"br0\"\nofport = 2\n",
        n.ra, n.rb
    )
}

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (i, part) in s.split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(part, 16).expect("a MAC");
    }
    m
}

/// A UDP frame from A to B's `port`, as A's kernel would send it.
fn frame(t: &Topology, port: u16) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: mac(addr::MAC_B0),
        src_mac: mac(addr::MAC_A0),
        vlan: None,
        src_ip: IpAddr::V4(t.a_ip4()),
        dst_ip: IpAddr::V4(t.b_ip4()),
        src_port: 40000,
        dst_port: port,
        ttl: 64,
        frame_size: 128,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn ctl(vp: &netlab::Vecplane, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("ctl")
        .arg("--socket")
        .arg(vp.socket())
        .args(args)
        .output()
        .expect("vecplane ctl runs")
}

fn ctl_ok(vp: &netlab::Vecplane, args: &[&str]) -> String {
    let o = ctl(vp, args);
    assert!(
        o.status.success(),
        "vecplane ctl {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Send `frame` out of A's veth as it is (a packet socket).
fn send_from_a(t: &Topology, frame: &[u8]) {
    let script = format!(
        "import socket; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); \
         s.bind(('{}', 0)); s.send(bytes.fromhex('{}'))",
        t.names().a0,
        hex(frame)
    );
    let o = t
        .exec_timeout(
            Host::A,
            &["python3", "-c", &script],
            Duration::from_secs(10),
        )
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "send: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Whether B's UDP `port` receives a datagram while `act` runs: once after half a second
/// (`again` false: a packet that must not arrive), or every half second until the listener
/// (up to 5 s) got one, since a loaded machine may start it late.
fn b_receives(t: &Topology, port: u16, again: bool, act: impl Fn()) -> bool {
    let script = format!(
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.bind(('{}', {port})); s.settimeout(5); print('got', len(s.recv(2048)))",
        t.b_ip4()
    );
    std::thread::scope(|s| {
        let listener = s.spawn(|| {
            t.exec_timeout(
                Host::B,
                &["python3", "-c", &script],
                Duration::from_secs(15),
            )
            .expect("python3 runs")
        });
        for _ in 0..if again { 10 } else { 1 } {
            std::thread::sleep(Duration::from_millis(500));
            if listener.is_finished() {
                break;
            }
            act();
        }
        let o = listener.join().expect("listener");
        String::from_utf8_lossy(&o.stdout).contains("got")
    })
}

/// The first record of a classic pcap file: (caplen bytes, orig_len).
fn first_record(path: &Path) -> (Vec<u8>, u32) {
    let mut r = ports::pcapfile::PcapReader::open(path).expect("a pcap file");
    let mut buf = vec![0u8; 65536];
    let rec = r
        .next_record(&mut buf)
        .expect("readable")
        .expect("a record");
    (buf[..rec.caplen].to_vec(), rec.orig_len)
}

#[test]
fn punt_and_inject_through_a_live_flow_bridge() {
    if !testenv::can_run(netlab::missing_prerequisite(TOOLS)) {
        return;
    }
    let t = Topology::build_with_prefix("vppn", Mode::Dataplane(Addressing::Bridged))
        .expect("topology");
    let path = t.path("punt.toml");
    std::fs::write(&path, config(&t)).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");

    // 1. controller,output:2: B gets the packet, and the punted copy is the same bytes.
    let sent = frame(&t, 9999);
    assert!(
        b_receives(&t, 9999, true, || send_from_a(&t, &sent)),
        "the punting rule still forwards\n{}",
        vp.log()
    );
    let pcap = t.path("punted.pcap");
    let out = ctl_ok(
        &vp,
        &[
            "punt",
            "capture",
            "--from-start",
            "--count",
            "1",
            "--timeout",
            "10",
            "--file",
            &pcap.to_string_lossy(),
        ],
    );
    assert!(out.contains("1 punted packets written"), "{out}");
    let (bytes, orig) = first_record(&pcap);
    assert_eq!(bytes, sent, "the punted copy is what A sent");
    assert_eq!(orig as usize, sent.len());
    let show: Value =
        serde_json::from_str(&ctl_ok(&vp, &["--json", "punt", "show"])).expect("punt show JSON");
    // A may have sent more than once (the listener started late): each one punted.
    let punted = show["workers"][0]["punted"]["action"].as_u64().unwrap_or(0);
    assert!(punted >= 1, "{show}");
    assert_eq!(show["delivered"]["action"], punted, "{show}");
    let text = ctl_ok(&vp, &["punt", "show"]);
    assert!(text.contains("action"), "{text}");
    let packets = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "GET",
        "/v1/punt/packets?after=0",
        None,
    )
    .expect("GET /v1/punt/packets");
    let v = packets.json();
    assert_eq!(v["packets"][0]["cookie"], "0x77", "{v}");
    assert_eq!(v["packets"][0]["port"], "Ra", "{v}");
    assert_eq!(v["packets"][0]["bridge"], "br0", "{v}");
    assert_eq!(v["packets"][0]["in_port"], 1, "{v}");
    let metrics = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "GET",
        "/metrics",
        None,
    )
    .expect("GET /metrics");
    let m = String::from_utf8_lossy(&metrics.body).into_owned();
    let line = format!("vecplane_punt_packets_total{{worker=\"0\",reason=\"action\"}} {punted}");
    assert!(m.contains(&line), "{m}");

    // 2. inject port: out of Rb as it is, into B.
    let to_b = frame(&t, 9998);
    let hex_b = hex(&to_b);
    assert!(
        b_receives(&t, 9998, true, || {
            let out = ctl_ok(&vp, &["inject", "port", "Rb", &hex_b]);
            assert!(out.contains("injected 1 packets"), "{out}");
        }),
        "an injected packet leaves on Rb\n{}",
        vp.log()
    );

    // 3. inject bridge: through br0's tables as received on port 1.
    assert!(
        b_receives(&t, 9998, true, || {
            ctl_ok(&vp, &["inject", "bridge", "br0", "1", &hex_b]);
        }),
        "in_port=1 goes to port 2 by the tables\n{}",
        vp.log()
    );
    let dropped = hex(&frame(&t, 9997));
    assert!(
        !b_receives(&t, 9997, false, || {
            ctl_ok(&vp, &["inject", "bridge", "br0", "1", &dropped]);
        }),
        "the drop rule holds for injected packets too"
    );
    let flows = ctl_ok(&vp, &["dump-flows", "br0"]);
    let drop_rule = flows
        .lines()
        .find(|l| l.contains("tp_dst=9997"))
        .unwrap_or_default();
    assert!(drop_rule.contains("n_packets=1"), "{flows}");
    // The packet-out's own actions: output:2 from in_port CONTROLLER.
    assert!(
        b_receives(&t, 9998, true, || {
            ctl_ok(
                &vp,
                &["inject", "bridge", "br0", "CONTROLLER", &hex_b, "output:2"],
            );
        }),
        "a packet-out's own actions"
    );

    // 4. Bad requests are refused whole, saying why.
    for (args, says) in [
        (
            vec!["inject", "port", "nope", &hex_b[..]],
            "no port is named `nope`",
        ),
        (vec!["inject", "port", "Rb", "0102"], "2 bytes"),
        (
            vec!["inject", "bridge", "br0", "7", &hex_b[..]],
            "in_port 7 is not a port",
        ),
        (
            vec!["inject", "bridge", "br0", "1", &hex_b[..], "goto_table:1"],
            "actions only",
        ),
    ] {
        let o = ctl(&vp, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
        assert!(err.contains("nothing was injected"), "{err}");
    }
    let show: Value =
        serde_json::from_str(&ctl_ok(&vp, &["--json", "punt", "show"])).expect("punt show JSON");
    assert!(show["inject"]["accepted"].as_u64() >= Some(4), "{show}");
    drop(vp);
    t.delete().expect("namespaces removed");
}

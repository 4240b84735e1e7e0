//! VXLAN interop with Linux (needs root, `ip`, `ethtool`, `ping`, `iperf3` and the kernel's
//! vxlan device; prints `skipped: <why>` and returns otherwise, fails under CI=true): in a netlab
//! topology A - R - B, A has a Linux `vxlan` device (VNI 5000, UDP 4789, UDP checksums on) whose
//! remote is vecplane's underlay port in R; vecplane bridges its VXLAN port with the port
//! towards B. Ping and bounded iperf3 TCP runs go both ways through the tunnel; the kernel
//! checks vecplane's UDP checksums (its UDP checksum error counter stays 0) and vecplane checks
//! the kernel's; a packet too big for the tunnel with DF gets B an ICMP "fragmentation
//! needed" with the tunnel's MTU. Addresses are from 198.18.0.0/15; the namespaces (and the vxlan device in A)
//! are deleted on drop, also when the test fails.

use netlab::{Addressing, Host, Mode, Topology};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");
const TOOLS: &[&str] = &["ip", "ethtool", "ping", "iperf3"];
/// A's address inside the tunnel, and B's on the same overlay subnet.
const A_OVERLAY: &str = "198.18.50.1";
const B_OVERLAY: &str = "198.18.50.2";

fn data(vp: &netlab::Vecplane, cmd: &str) -> Value {
    vp.request(cmd, true)
        .unwrap_or_else(|e| panic!("{cmd}: {e:#}"))
        .data
        .unwrap_or(Value::Null)
}

fn errors(vp: &netlab::Vecplane, node: &str) -> Vec<(String, u64)> {
    data(vp, "show errors")["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["node"] == node)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["count"].as_u64().unwrap_or(0),
            )
        })
        .filter(|(_, c)| *c > 0)
        .collect()
}

/// The kernel's UDP counter `name` (from /proc/net/snmp) in `host`'s namespace.
fn udp_counter(t: &Topology, host: Host, name: &str) -> u64 {
    let snmp = t
        .exec_ok(host, &["cat", "/proc/net/snmp"])
        .expect("read /proc/net/snmp");
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        panic!("no Udp lines in /proc/net/snmp:\n{snmp}");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_else(|| panic!("no Udp {name} in /proc/net/snmp:\n{snmp}"))
}

fn ping(t: &Topology, from: Host, target: &str, count: u32) -> (bool, String) {
    let c = count.to_string();
    let deadline = (count + 8).to_string();
    let out = t
        .exec_timeout(
            from,
            &[
                "ping", "-n", "-q", "-c", &c, "-i", "0.2", "-W", "2", "-w", &deadline, target,
            ],
            Duration::from_secs(30),
        )
        .expect("ping runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success() && text.contains(" 0% packet loss"),
        text,
    )
}

/// A bounded iperf3 TCP run with the server in B, the client in A (`reverse`: B sends).
fn iperf3(t: &Topology, reverse: bool) -> Value {
    let _server = t
        .spawn(
            Host::B,
            &["iperf3", "-s", "-1", "-p", "5299"],
            "iperf3-server",
        )
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(500));
    let mut cmd = vec![
        "iperf3",
        "-c",
        B_OVERLAY,
        "-p",
        "5299",
        "-J",
        "--connect-timeout",
        "3000",
        "-t",
        "2",
    ];
    if reverse {
        cmd.push("-R");
    }
    let out = t
        .exec_timeout(Host::A, &cmd, Duration::from_secs(30))
        .expect("iperf3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("iperf3 JSON ({e}): {text}"))
}

/// The topology with a Linux `vxl0` (VNI 5000) in A and B on the overlay subnet; None (after
/// saying why) when it cannot be built here.
fn overlay() -> Option<Topology> {
    if let Some(why) = netlab::missing_prerequisite(TOOLS) {
        testenv::skip(&why);
        return None;
    }
    let t =
        Topology::build_with_prefix("vpx", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let n = t.names();
    // A: the Linux end of the tunnel, over A0 (198.18.1.2) to vecplane's Ra (198.18.1.1).
    let add = t
        .exec_timeout(
            Host::A,
            &[
                "ip",
                "link",
                "add",
                "vxl0",
                "type",
                "vxlan",
                "id",
                "5000",
                "remote",
                "198.18.1.1",
                "local",
                "198.18.1.2",
                "dstport",
                "4789",
                "udpcsum",
                "dev",
                &n.a0,
            ],
            Duration::from_secs(10),
        )
        .expect("ip runs");
    if !add.status.success() {
        testenv::skip(&format!(
            "the kernel has no vxlan device: {}",
            String::from_utf8_lossy(&add.stderr).trim()
        ));
        return None;
    }
    for args in [
        &[
            "ip",
            "addr",
            "add",
            &format!("{A_OVERLAY}/24"),
            "dev",
            "vxl0",
        ][..],
        &[
            "ip",
            "link",
            "set",
            "vxl0",
            "address",
            "02:00:00:00:50:01",
            "up",
        ],
    ] {
        t.exec_ok(Host::A, args).expect("configure vxl0");
    }
    // Inner frames leave A fully checksummed and segmented (as the topology's veths do).
    t.ethtool_k(
        Host::A,
        "vxl0",
        &[("tx", false), ("tso", false), ("gso", false)],
    )
    .expect("vxl0 offloads off");
    // B: on the overlay subnet, behind vecplane's bridge.
    t.exec_ok(
        Host::B,
        &[
            "ip",
            "addr",
            "add",
            &format!("{B_OVERLAY}/24"),
            "dev",
            &n.b0,
        ],
    )
    .expect("B overlay address");
    Some(t)
}

#[test]
fn vxlan_interoperates_with_the_linux_vxlan_device() {
    let Some(t) = overlay() else { return };
    let n = t.names();
    let config = format!(
        "[dataplane]\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nip4 = [\"198.18.1.1/24\"]\n\n\
         [[port]]\nname = \"vx0\"\ndriver = \"vxlan\"\nmac = \"02:00:00:00:05:01\"\n\
         local = \"198.18.1.1\"\nremote = \"198.18.1.2\"\nvni = 5000\ndst-port = 4789\n\
         udp-checksum = true\nbridge = \"br0\"\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nbridge = \"br0\"\n",
        n.ra, n.rb
    );
    let path = t.path("vxlan.toml");
    std::fs::write(&path, config).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    let csum_errors_before = udp_counter(&t, Host::A, "InCsumErrors");

    let (ok, out) = ping(&t, Host::A, B_OVERLAY, 5);
    assert!(ok, "ping A -> B through the tunnel: {out}\n{}", vp.log());
    let (ok, out) = ping(&t, Host::B, A_OVERLAY, 5);
    assert!(ok, "ping B -> A through the tunnel: {out}\n{}", vp.log());

    for reverse in [false, true] {
        let r = iperf3(&t, reverse);
        let bytes = r["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        println!(
            "iperf3 TCP {}: {:.0} Mbit/s",
            if reverse { "B -> A" } else { "A -> B" },
            r["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap_or(0.0)
                / 1e6
        );
        assert!(
            bytes > 100_000,
            "iperf3 TCP {} through the tunnel: {r}\n{}",
            if reverse { "B -> A" } else { "A -> B" },
            vp.log()
        );
    }

    // The kernel verified every UDP checksum vecplane wrote, and vecplane the kernel's.
    assert_eq!(
        udp_counter(&t, Host::A, "InCsumErrors"),
        csum_errors_before,
        "the kernel found bad UDP checksums in vecplane's VXLAN packets"
    );
    let input = errors(&vp, "vxlan-input");
    assert!(input.is_empty(), "vxlan-input dropped packets: {input:?}");
    let encap = errors(&vp, "vx0-tx");
    assert!(encap.is_empty(), "vx0-tx dropped packets: {encap:?}");

    // Too big for the tunnel with DF: B hears "fragmentation needed" with the tunnel's MTU.
    let out = t
        .exec_timeout(
            Host::B,
            &[
                "ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1430", A_OVERLAY,
            ],
            Duration::from_secs(10),
        )
        .expect("ping runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Frag needed") && text.contains("1450"),
        "B should get frag-needed (mtu 1450) for 1458 bytes: {text}"
    );
    assert_eq!(errors(&vp, "vx0-tx"), [("mtu-exceeded".to_string(), 1)]);
    let ifs = data(&vp, "show interfaces");
    let vx = ifs["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "vx0")
        .cloned()
        .unwrap_or(Value::Null);
    println!("vx0: {vx}");
    assert_eq!(vx["driver"], "vxlan", "{ifs}");
    assert!(vx["rx_packets"].as_u64().unwrap_or(0) > 100, "{vx}");
    assert!(vx["tx_packets"].as_u64().unwrap_or(0) > 100, "{vx}");
    t.delete().expect("delete the topology");
}

/// The same overlay through a bridge in flow mode: rules choose the tunnel id
/// (`set_field:5000->tun_id,output:vx0` on a `vni = "flow"` port) and match it on the way in.
#[test]
fn a_flow_bridge_chooses_and_matches_the_tunnel_id() {
    let Some(t) = overlay() else { return };
    let n = t.names();
    let config = format!(
        "[dataplane]\nbuffers = 8192\n\n[[bridge]]\nname = \"br0\"\nmode = \"flow\"\n\
         flows = [\n  \"priority=100,in_port=2,actions=set_field:5000->tun_id,output:1\",\n  \
         \"priority=100,in_port=1,tun_id=5000,actions=output:2\",\n  \
         \"priority=0,actions=drop\",\n]\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nip4 = [\"198.18.1.1/24\"]\n\n\
         [[port]]\nname = \"vx0\"\ndriver = \"vxlan\"\nmac = \"02:00:00:00:05:01\"\n\
         local = \"198.18.1.1\"\nremote = \"198.18.1.2\"\nvni = \"flow\"\nudp-checksum = true\n\
         bridge = \"br0\"\nofport = 1\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"af-packet\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nbridge = \"br0\"\nofport = 2\n",
        n.ra, n.rb
    );
    let path = t.path("vxlan-flow.toml");
    std::fs::write(&path, config).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    let (ok, out) = ping(&t, Host::A, B_OVERLAY, 5);
    assert!(
        ok,
        "ping A -> B through the flow bridge: {out}\n{}",
        vp.log()
    );
    let (ok, out) = ping(&t, Host::B, A_OVERLAY, 5);
    assert!(
        ok,
        "ping B -> A through the flow bridge: {out}\n{}",
        vp.log()
    );
    let input = errors(&vp, "vxlan-input");
    assert!(input.is_empty(), "vxlan-input dropped packets: {input:?}");
    let cache = data(&vp, "show flow-cache");
    println!("flow cache: {cache}");
    assert!(
        cache["bridges"][0]["total"]["installed"]
            .as_u64()
            .unwrap_or(0)
            >= 2,
        "{cache}"
    );
    t.delete().expect("delete the topology");
}

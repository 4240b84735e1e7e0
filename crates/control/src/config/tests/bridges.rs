//! Config tests of `[[bridge]]` and the ports' bridge keys, and the neighbour/bridge policies.

use super::*;

const BRIDGE: &str = "[[bridge]]\nname = \"br0\"\n\n\
    [[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\n\n\
    [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\nbridge = \"br0\"\n";

#[test]
fn bridge_with_access_and_trunk_ports() {
    let spec = ok(BRIDGE);
    assert_eq!(spec.bridges.len(), 1);
    assert_eq!(spec.bridges[0].name, "br0");
    let modes: Vec<_> = spec.bridges[0]
        .ports
        .iter()
        .map(|m| (m.port, m.mode.clone()))
        .collect();
    assert_eq!(
        modes,
        vec![
            (0, BridgePortMode::Access { pvid: 1 }),
            (1, BridgePortMode::Access { pvid: 1 }),
        ]
    );
    let text = format!(
        "{BRIDGE}\n[[port]]\nname = \"c\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:03\"\n\
         bridge = \"br0\"\ntrunk-vlans = [10, 20]\nnative-vlan = 1\n\n\
         [[port]]\nname = \"d\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:04\"\n\
         bridge = \"br0\"\naccess-vlan = 10\n"
    );
    let spec = ok(&text);
    assert_eq!(
        spec.bridges[0].ports[2].mode,
        BridgePortMode::Trunk {
            allowed: vec![10, 20],
            native: Some(1)
        }
    );
    assert_eq!(
        spec.bridges[0].ports[3].mode,
        BridgePortMode::Access { pvid: 10 }
    );
}

#[test]
fn bridge_errors_name_the_line_and_what_is_accepted() {
    // An unknown bridge name lists the defined ones.
    let text = BRIDGE.replacen("bridge = \"br0\"", "bridge = \"br9\"", 1);
    let v = issues(&text);
    assert!(
        v.iter().any(|i| i
            .to_string()
            .contains("no [[bridge]] is named `br9`; accepted: `br0`")),
        "{v:#?}"
    );
    // A bridge needs two ports (reported at its name).
    assert!(
        v.iter()
            .any(|i| i.line == 2 && i.to_string().contains("bridge `br0` has 1 port")),
        "{v:#?}"
    );
    // A bridged port has no IP address.
    let text = BRIDGE.replacen(
        "bridge = \"br0\"",
        "bridge = \"br0\"\nip4 = [\"198.18.1.1/24\"]",
        1,
    );
    one_error(
        &text,
        8,
        Some("bridge"),
        "has IP addresses and is in bridge `br0`",
    );
    // VLAN keys need a bridge, and access/trunk exclude each other.
    one_error(
        &pcap_port("access-vlan = 5\n"),
        5,
        Some("access-vlan"),
        "`access-vlan` applies only to a port in a bridge",
    );
    let text = BRIDGE.replacen(
        "bridge = \"br0\"",
        "bridge = \"br0\"\naccess-vlan = 5\ntrunk-vlans = [6]",
        1,
    );
    one_error(&text, 9, Some("access-vlan"), "not both");
    let text = BRIDGE.replacen(
        "bridge = \"br0\"",
        "bridge = \"br0\"\ntrunk-vlans = [6, 6]",
        1,
    );
    one_error(&text, 9, Some("trunk-vlans"), "is not a new VLAN id");
    let text = BRIDGE.replacen(
        "bridge = \"br0\"",
        "bridge = \"br0\"\naccess-vlan = 4095",
        1,
    );
    one_error(&text, 9, Some("access-vlan"), "accepted: 1..=4094");
    // Duplicate bridge names.
    let text = format!("{BRIDGE}\n[[bridge]]\nname = \"br0\"\n");
    assert!(issues(&text).iter().any(|i| i
        .to_string()
        .contains("duplicate bridge name `br0`: also defined at line 2")));
}

#[test]
fn neighbour_and_bridge_policies() {
    let spec = ok(&with(
        "[dataplane]\nneighbour-capacity = 100\nneighbour-reachable-seconds = 5\n\
         neighbour-gc-seconds = 60\nneighbour-queue = 8\nbridge-max-macs = 10\n\
         bridge-age-seconds = 0\n",
    ));
    assert_eq!(spec.neighbour.capacity, 100);
    assert_eq!(spec.neighbour.reachable_seconds, 5);
    assert_eq!(spec.neighbour.gc_seconds, 60);
    assert_eq!(spec.neighbour.queue_per_neighbour, 8);
    assert_eq!(spec.bridge.max_macs, 10);
    assert_eq!(spec.bridge.age_seconds, 0);
    one_error(
        &with("[dataplane]\nneighbour-capacity = 100000\n"),
        B + 2,
        Some("neighbour-capacity"),
        "accepted: 1..=32768",
    );
}

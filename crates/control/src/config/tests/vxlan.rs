//! Config tests of VXLAN ports: their keys, defaults and every bad value, with its line.

use super::*;
use dataplane::{VxlanPortSpec, VxlanVni};

/// An underlay port (line 1..=5) and a VXLAN port bridged with a third port; `extra` is added
/// to the VXLAN port's table, which starts at line 7 (`name` on line 8, `extra` from line 12).
fn config(extra: &str) -> String {
    format!(
        "[[port]]\nname = \"up\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nip4 = [\"198.18.1.1/24\"]\n\n\
         [[port]]\nname = \"vx0\"\ndriver = \"vxlan\"\nmac = \"02:00:00:00:05:01\"\nbridge = \"br0\"\n\
         {extra}\n\n\
         [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:02:01\"\nbridge = \"br0\"\n\n\
         [[bridge]]\nname = \"br0\"\n"
    )
}

const GOOD: &str = "local = \"198.18.1.1\"\nremote = \"198.18.1.2\"\nvni = 5000";

#[test]
fn a_vxlan_port_with_defaults() {
    let spec = ok(&config(GOOD));
    let p = &spec.ports[1];
    assert_eq!(p.mtu, 1450, "1500 minus the VXLAN headers, as Linux");
    assert_eq!(
        p.driver,
        PortDriver::Vxlan(VxlanPortSpec {
            local: Ipv4Addr::new(198, 18, 1, 1),
            remote: Ipv4Addr::new(198, 18, 1, 2),
            vni: VxlanVni::Fixed(5000),
            dst_port: 4789,
            udp_checksum: false,
        })
    );
    assert_eq!(spec.bridges[0].ports.len(), 2);
}

#[test]
fn a_vxlan_port_with_every_key() {
    let spec = ok(&config(
        "local = \"198.18.1.1\"\nremote = \"198.18.1.9\"\nvni = \"flow\"\ndst-port = 8472\n\
         udp-checksum = true\nmtu = 1400",
    ));
    let p = &spec.ports[1];
    assert_eq!(p.mtu, 1400);
    assert_eq!(
        p.driver,
        PortDriver::Vxlan(VxlanPortSpec {
            local: Ipv4Addr::new(198, 18, 1, 1),
            remote: Ipv4Addr::new(198, 18, 1, 9),
            vni: VxlanVni::Flow,
            dst_port: 8472,
            udp_checksum: true,
        })
    );
}

#[test]
fn bad_values_name_line_field_and_what_is_accepted() {
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "local = \"198.18.1.1\"\nremote = \"198.18.1.2\"\nvni = 16777216",
            14,
            "vni",
            "accepted: an integer 0..=16777215, or \"flow\"",
        ),
        (
            "local = \"198.18.1.1\"\nremote = \"198.18.1.2\"\nvni = \"any\"",
            14,
            "vni",
            "`any` is not a VNI",
        ),
        (
            "local = \"198.18.1.1\"\nremote = \"224.0.0.1\"\nvni = 1",
            13,
            "remote",
            "cannot be a tunnel's other end",
        ),
        (
            "local = \"198.18.1.1\"\nremote = \"2001:db8::1\"\nvni = 1",
            13,
            "remote",
            "VXLAN over IPv6 is not supported",
        ),
        (
            "local = \"198.18.1.1\"\nremote = \"198.18.1.1\"\nvni = 1",
            13,
            "remote",
            "is also `local`",
        ),
        (
            "local = \"198.18.1.7\"\nremote = \"198.18.1.2\"\nvni = 1",
            12,
            "local",
            "not an own address of any port",
        ),
        (
            "local = \"198.18.1.1\"\nremote = \"nowhere\"\nvni = 1",
            13,
            "remote",
            "is not an IP address",
        ),
        (
            &format!("{GOOD}\ndst-port = 0"),
            15,
            "dst-port",
            "accepted: 1..=65535",
        ),
        (
            &format!("{GOOD}\nudp-checksum = \"yes\""),
            15,
            "udp-checksum",
            "accepted: true, false",
        ),
        (
            &format!("{GOOD}\nmtu = 1460"),
            15,
            "mtu",
            "exceeds the MTU 1500 of port `up`, which holds local address 198.18.1.1; \
             accepted: mtu at most 1450",
        ),
    ];
    for (extra, line, field, needle) in cases {
        one_error(&config(extra), *line, Some(field), needle);
    }
}

#[test]
fn missing_keys_are_reported() {
    let v = issues(&config(""));
    let fields: Vec<_> = v.iter().filter_map(|i| i.field.clone()).collect();
    assert_eq!(fields, ["local", "remote", "vni"], "{v:#?}");
    assert!(v[2].message.contains("accepted: an integer 0..=16777215"));
}

#[test]
fn vxlan_keys_on_other_drivers_and_other_keys_on_vxlan_ports() {
    let text = "[[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nvni = 5\n";
    one_error(text, 5, Some("vni"), "applies only to driver = \"vxlan\"");
    one_error(
        &config(&format!("{GOOD}\ninterface = \"eth0\"")),
        15,
        Some("interface"),
        "this port's driver is \"vxlan\", whose keys are: local, remote, vni",
    );
}

#[test]
fn own_address_as_remote_or_local_of_the_tunnel_itself() {
    let text = config("local = \"198.18.1.1\"\nremote = \"198.18.9.1\"\nvni = 1")
        .replace(
            "bridge = \"br0\"\nlocal",
            "ip4 = [\"198.18.9.1/24\"]\nlocal",
        )
        .replace(
            "[[port]]\nname = \"b\"",
            "[[port]]\nname = \"b\"\nip4 = [\"198.18.3.1/24\"]",
        );
    let text = text.replace("bridge = \"br0\"\n\n[[bridge]]\nname = \"br0\"\n", "\n");
    one_error(
        &text,
        13,
        Some("remote"),
        "is one of vecplane's own addresses",
    );
    let text = config("local = \"198.18.9.1\"\nremote = \"198.18.1.2\"\nvni = 1").replace(
        "bridge = \"br0\"\nlocal",
        "ip4 = [\"198.18.9.1/24\"]\nlocal",
    );
    let text = text.replace("bridge = \"br0\"\n\n[[bridge]]\nname = \"br0\"\n", "\n");
    one_error(&text, 12, Some("local"), "this VXLAN port's own address");
}

#[test]
fn two_ports_with_the_same_tunnel() {
    let text = format!(
        "{}\n[[port]]\nname = \"vx1\"\ndriver = \"vxlan\"\nmac = \"02:00:00:00:05:02\"\n{GOOD}\n",
        config(GOOD)
    );
    let e = one_error(
        &text,
        31,
        Some("vni"),
        "port `vx0` at line 14 is the same tunnel",
    );
    assert!(
        e.contains("198.18.1.1 -> 198.18.1.2, UDP port 4789, vni 5000"),
        "{e}"
    );
    // Another VNI is another tunnel.
    let other = format!(
        "{}\n[[port]]\nname = \"vx1\"\ndriver = \"vxlan\"\nmac = \"02:00:00:00:05:02\"\n{}\n",
        config(GOOD),
        GOOD.replace("5000", "5001")
    );
    assert_eq!(ok(&other).ports.len(), 4);
}

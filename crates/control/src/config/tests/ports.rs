//! Config tests of `[[port]]`: names, drivers and their keys, MACs, MTUs, own addresses.

use super::*;

// --- [[port]] --------------------------------------------------------------------------------

#[test]
fn port_good_pcap() {
    let s = ok(BASE);
    let p = &s.ports[0];
    assert_eq!(p.name, "in0");
    assert_eq!(p.mac, mac("02:00:00:00:01:01"));
    assert_eq!(p.mtu, 1500);
    assert_eq!(p.ip4, vec![("198.18.1.1".parse().unwrap(), 24)]);
    assert_eq!(p.ip6, vec![("2001:db8:1::1".parse().unwrap(), 64)]);
    assert_eq!(
        p.driver,
        PortDriver::Pcap {
            rx: Some(PathBuf::from("/base/in.pcap")),
            tx: None
        }
    );
    assert_eq!(
        s.ports[1].driver,
        PortDriver::Pcap {
            rx: None,
            tx: Some(PathBuf::from("/base/out.pcap"))
        }
    );
}

#[test]
fn port_absolute_paths_stay() {
    let s = ok(&pcap_port("rx = \"/captures/a.pcap\"\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::Pcap {
            rx: Some(PathBuf::from("/captures/a.pcap")),
            tx: None
        }
    );
}

#[test]
fn port_name_rules() {
    ok(&pcap_port("").replace("p0", "A-b_c.9"));
    one_error(
        &pcap_port("").replace("\"p0\"", "\"bad name\""),
        2,
        Some("name"),
        "`bad name` is not a valid port name; accepted: 1 to 32 characters",
    );
    let long = "x".repeat(33);
    one_error(
        &pcap_port("").replace("p0", &long),
        2,
        Some("name"),
        "not a valid port name",
    );
    one_error(
        &pcap_port("").replace("\"p0\"", "\"\""),
        2,
        Some("name"),
        "not a valid port name",
    );
    one_error(
        "[[port]]\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\n",
        1,
        Some("name"),
        "missing required field",
    );
}

#[test]
fn port_names_are_unique() {
    let text = format!(
        "{}\n{}",
        pcap_port(""),
        pcap_port("").replace("01:01", "01:02")
    );
    one_error(
        &text,
        7,
        Some("name"),
        "duplicate port name `p0`: also the name of [[port]] #1 at line 2",
    );
}

#[test]
fn port_driver() {
    one_error(
        &pcap_port("").replace("\"pcap\"", "\"af_xdp\""),
        3,
        Some("driver"),
        "`af_xdp` is not a driver; accepted: \"pcap\", \"memory\"",
    );
    one_error(
        &pcap_port("").replace("\"pcap\"", "\"af_packet\""),
        3,
        Some("driver"),
        "accepted: \"pcap\", \"memory\", \"af-packet\", \"af-xdp\", \"tap\"",
    );
    one_error(
        "[[port]]\nname = \"p0\"\nmac = \"02:00:00:00:01:01\"\n",
        1,
        Some("driver"),
        "missing required field; accepted: \"pcap\", \"memory\"",
    );
}

#[test]
fn port_mac() {
    let text = format!(
        "{}\n{}",
        pcap_port(""),
        pcap_port("")
            .replace("p0", "p1")
            .replace("02:00:00:00:01:01", "zz:00")
    );
    let s = one_error(&text, 9, Some("mac"), "");
    assert_eq!(
        s,
        "test.toml:9: [[port]] #2 field `mac`: `zz:00` is not a MAC address; accepted: six hex \
         octets like 02:00:00:00:00:01"
    );
    one_error(
        &pcap_port("").replace("02:00:00:00:01:01", "01:00:5e:00:00:01"),
        4,
        Some("mac"),
        "not a unicast MAC address",
    );
    one_error(
        &pcap_port("").replace("02:00:00:00:01:01", "00:00:00:00:00:00"),
        4,
        Some("mac"),
        "not a unicast MAC address",
    );
    one_error(
        "[[port]]\nname = \"p0\"\ndriver = \"pcap\"\n",
        1,
        Some("mac"),
        "missing required field",
    );
}

#[test]
fn port_mtu() {
    assert_eq!(ok(&pcap_port("mtu = 68\n")).ports[0].mtu, 68);
    assert_eq!(ok(&pcap_port("mtu = 9000\n")).ports[0].mtu, 9000);
    one_error(&pcap_port("mtu = 67\n"), 5, Some("mtu"), "68..=9000");
    one_error(&pcap_port("mtu = 9001\n"), 5, Some("mtu"), "68..=9000");
}

#[test]
fn port_addresses() {
    let s = ok(&pcap_port(
        "ip4 = [\"198.18.1.1/24\", \"198.18.5.1/30\"]\nip6 = [\"2001:db8::1/128\"]\n",
    ));
    assert_eq!(s.ports[0].ip4.len(), 2);
    assert_eq!(s.ports[0].ip6, vec![("2001:db8::1".parse().unwrap(), 128)]);
    one_error(
        &pcap_port("ip4 = [\"198.18.1.1\"]\n"),
        5,
        Some("ip4"),
        "has no prefix length; accepted: ADDRESS/LENGTH",
    );
    one_error(
        &pcap_port("ip4 = [\"198.18.1.1/33\"]\n"),
        5,
        Some("ip4"),
        "invalid prefix length",
    );
    one_error(
        &pcap_port("ip4 = [\"2001:db8::1/64\"]\n"),
        5,
        Some("ip4"),
        "put it in `ip6`",
    );
    one_error(
        &pcap_port("ip6 = [\"198.18.1.1/24\"]\n"),
        5,
        Some("ip6"),
        "put it in `ip4`",
    );
    one_error(
        &pcap_port("ip4 = \"198.18.1.1/24\"\n"),
        5,
        Some("ip4"),
        "expected an array of strings",
    );
    one_error(
        &pcap_port("ip4 = [\"198.18.1.1/0\"]\n"),
        5,
        Some("ip4"),
        "prefix length 0",
    );
    one_error(
        &pcap_port("ip6 = [\n  \"2001:db8::1/64\",\n  \"nope/64\",\n]\n"),
        7,
        Some("ip6"),
        "does not start with an IP address",
    );
}

#[test]
fn port_addresses_are_unique() {
    let text = with("\n[[port]]\nname = \"x\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:09\"\nip4 = [\"198.18.1.1/24\"]\n");
    one_error(
        &text,
        B + 6,
        Some("ip4"),
        "address 198.18.1.1 is already assigned to port `in0` at line 5",
    );
}

#[test]
fn a_port_lists_each_address_once() {
    one_error(
        &pcap_port("ip4 = [\"198.18.1.1/24\", \"198.18.1.1/25\"]\n"),
        5,
        Some("ip4"),
        "`198.18.1.1/25` repeats 198.18.1.1/24, already an address of port `p0`; accepted: \
         each address once per port",
    );
}

#[test]
fn pcap_only_and_memory_only_keys() {
    one_error(
        &pcap_port("flows = 10\n"),
        5,
        Some("flows"),
        "`flows` applies only to driver = \"memory\"",
    );
    one_error(
        &memory_port("rx = \"in.pcap\"\n"),
        7,
        Some("rx"),
        "`rx` applies only to driver = \"pcap\"",
    );
}

#[test]
fn pcap_paths() {
    one_error(&pcap_port("rx = \"\"\n"), 5, Some("rx"), "empty path");
    one_error(
        &pcap_port("rx = \"a.pcap\"\ntx = \"a.pcap\"\n"),
        6,
        Some("tx"),
        "same file as `rx`",
    );
    one_error(
        &pcap_port("rx = 5\n"),
        5,
        Some("rx"),
        "expected a string, found an integer",
    );
    let text = with("\n[[port]]\nname = \"x\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:09\"\ntx = \"out.pcap\"\n");
    one_error(
        &text,
        B + 6,
        Some("tx"),
        "also the `tx` file of port `out0` at line 15",
    );
}

#[test]
fn memory_port_defaults() {
    let s = ok(&memory_port(""));
    let PortDriver::Memory(m) = &s.ports[0].driver else {
        panic!("not a memory port")
    };
    assert_eq!(
        *m,
        MemoryPortSpec {
            frame_size: 64,
            flows: 1024,
            dst_mac: mac("02:00:00:00:01:01"),
            src_mac: DEFAULT_SRC_MAC,
            vlan: None,
            src_ip: "198.18.0.1".parse().unwrap(),
            destinations: vec!["198.18.2.10".parse().unwrap()],
            limit: None,
            generate: true,
        }
    );
}

#[test]
fn memory_port_all_fields() {
    let s = ok(&memory_port(
        "frame-size = 128\nflows = 16777216\nsrc-mac = \"02:00:00:00:00:bb\"\n\
         dst-mac = \"ff:ff:ff:ff:ff:ff\"\nvlan = 4094\nlimit = 1000000\ngenerate = true\n",
    ));
    let PortDriver::Memory(m) = &s.ports[0].driver else {
        panic!("not a memory port")
    };
    assert_eq!(m.frame_size, 128);
    assert_eq!(m.flows, 16_777_216);
    assert_eq!(m.src_mac, mac("02:00:00:00:00:bb"));
    assert_eq!(m.dst_mac, [0xff; 6]);
    assert_eq!(m.vlan, Some(4094));
    assert_eq!(m.limit, Some(1_000_000));
}

#[test]
fn memory_port_ranges() {
    one_error(
        &memory_port("frame-size = 63\n"),
        7,
        Some("frame-size"),
        "64..=9000",
    );
    one_error(
        &memory_port("frame-size = 9001\n"),
        7,
        Some("frame-size"),
        "64..=9000",
    );
    one_error(
        &memory_port("flows = 0\n"),
        7,
        Some("flows"),
        "1..=16777216",
    );
    one_error(
        &memory_port("flows = 16777217\n"),
        7,
        Some("flows"),
        "1..=16777216",
    );
    one_error(&memory_port("vlan = 0\n"), 7, Some("vlan"), "1..=4094");
    one_error(&memory_port("vlan = 4095\n"), 7, Some("vlan"), "1..=4094");
    one_error(
        &memory_port("limit = 0\n"),
        7,
        Some("limit"),
        "out of range",
    );
    one_error(
        &memory_port("generate = \"yes\"\n"),
        7,
        Some("generate"),
        "accepted: true, false",
    );
    one_error(
        &memory_port("src-mac = \"03:00:00:00:00:01\"\n"),
        7,
        Some("src-mac"),
        "not a unicast MAC",
    );
    one_error(
        &memory_port("dst-mac = \"nope\"\n"),
        7,
        Some("dst-mac"),
        "not a MAC address",
    );
}

#[test]
fn memory_port_addresses() {
    one_error(
        &memory_port("").replace("\"198.18.0.1\"", "\"198.18.0\""),
        5,
        Some("src-ip"),
        "`198.18.0` is not an IP address",
    );
    one_error(
        &memory_port("").replace("[\"198.18.2.10\"]", "[]"),
        6,
        Some("destinations"),
        "empty list",
    );
    one_error(
        &memory_port("").replace("[\"198.18.2.10\"]", "[\"198.18.2.10\", \"2001:db8::1\"]"),
        6,
        Some("destinations"),
        "`2001:db8::1` is not of the same family as src-ip 198.18.0.1",
    );
    one_error(
        "[[port]]\nname = \"m0\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\ndestinations = [\"198.18.2.10\"]\n",
        1,
        Some("src-ip"),
        "missing required field",
    );
    one_error(
        "[[port]]\nname = \"m0\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\nsrc-ip = \"198.18.0.1\"\n",
        1,
        Some("destinations"),
        "missing required field",
    );
    // A sink needs no addresses.
    let s = ok("[[port]]\nname = \"sink\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\ngenerate = false\n");
    let PortDriver::Memory(m) = &s.ports[0].driver else {
        panic!("not a memory port")
    };
    assert!(!m.generate);
    assert!(!m.destinations.is_empty());
}

#[test]
fn memory_port_frame_must_hold_headers_and_fit_a_buffer() {
    let v6 = memory_port("")
        .replace("\"198.18.0.1\"", "\"2001:db8::1\"")
        .replace("\"198.18.2.10\"", "\"2001:db8:2::10\"");
    one_error(
        &v6,
        1,
        Some("frame-size"),
        "cannot hold the Ethernet, IPv6 and UDP headers",
    );
    ok(&format!("{v6}frame-size = 66\n"));
    one_error(
        &format!("{v6}frame-size = 66\nvlan = 5\n"),
        7,
        Some("frame-size"),
        "accepted: 70..=9000",
    );
    one_error(
        &format!(
            "[dataplane]\ndata-size = 2048\n{}",
            memory_port("frame-size = 2053\n")
        ),
        9,
        Some("frame-size"),
        "do not fit a 2048-byte buffer",
    );
    ok(&format!(
        "[dataplane]\ndata-size = 2048\n{}",
        memory_port("frame-size = 2052\n")
    ));
}

#[test]
fn af_packet_port_good() {
    let s = ok(&af_packet_port("interface = \"eth1\"\nfanout = 7\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::AfPacket {
            interface: "eth1".into(),
            fanout: Some(7)
        }
    );
    // The interface defaults to the port's name; fanout is optional.
    let s = ok(&af_packet_port(""));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::AfPacket {
            interface: "veth0".into(),
            fanout: None
        }
    );
}

/// The driver `tap_port` configures, with its vnet-header and offload flags.
fn tap0_driver(vnet_hdr: bool, offloads: bool) -> PortDriver {
    PortDriver::Tap {
        name: "tap0".into(),
        vnet_hdr,
        offloads,
    }
}

#[test]
fn tap_port_good() {
    let s = ok(&tap_port("vnet-hdr = true\n"));
    assert_eq!(s.ports[0].driver, tap0_driver(true, false));
    let s = ok(&tap_port("interface = \"vm1-tap\"\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::Tap {
            name: "vm1-tap".into(),
            vnet_hdr: false,
            offloads: false
        }
    );
}

#[test]
fn tap_offloads_imply_vnet_headers() {
    for extra in ["offloads = true\n", "vnet-hdr = true\noffloads = true\n"] {
        let s = ok(&tap_port(extra));
        assert_eq!(s.ports[0].driver, tap0_driver(true, true), "{extra}");
    }
    let s = ok(&tap_port("vnet-hdr = false\noffloads = false\n"));
    assert_eq!(s.ports[0].driver, tap0_driver(false, false));
}

#[test]
fn tap_offloads_refusals_name_the_line_and_what_is_accepted() {
    one_error(
        &tap_port("vnet-hdr = false\noffloads = true\n"),
        6,
        Some("offloads"),
        "offloads travel in virtio-net headers, and this port has `vnet-hdr = false` at line 5; \
         accepted: vnet-hdr = true or no vnet-hdr key (offloads = true implies it), or \
         offloads = false",
    );
    // Several workers: worker 0 owns the TAP and keeps its offloaded frames.
    let s = ok(&format!(
        "[dataplane]\nworkers = 2\n\n{}",
        tap_port("offloads = true\n")
    ));
    assert_eq!(s.ports[0].driver, tap0_driver(true, true));
    ok(&format!(
        "[dataplane]\nworkers = 2\n\n{}",
        tap_port("offloads = false\n")
    ));
    one_error(
        &tap_port("offloads = 1\n"),
        5,
        Some("offloads"),
        "accepted: true, false",
    );
    one_error(
        &memory_port("offloads = true\n"),
        7,
        Some("offloads"),
        "`offloads` applies only to driver = \"tap\"",
    );
}

#[test]
fn kernel_port_interface_names() {
    one_error(
        &af_packet_port("interface = \"a23456789012345x\"\n"),
        5,
        Some("interface"),
        "`a23456789012345x` is not a valid interface name; accepted: a kernel interface name of \
         1 to 15 bytes",
    );
    for bad in ["", "a/b", "a b", "a:0", ".."] {
        one_error(
            &tap_port(&format!("interface = \"{bad}\"\n")),
            5,
            Some("interface"),
            "is not a valid interface name",
        );
    }
    // Without `interface`, a port name the kernel refuses is reported on `name`.
    one_error(
        &af_packet_port("").replace("\"veth0\"", "\"a-very-long-port-name\""),
        2,
        Some("name"),
        "port name `a-very-long-port-name` is also its interface name (there is no `interface` \
         key) and the kernel does not accept it; accepted: set `interface`",
    );
}

#[test]
fn kernel_interfaces_and_fanout_groups_are_unique() {
    let text = format!(
        "{}\n{}",
        af_packet_port("interface = \"eth1\"\nfanout = 3\n"),
        tap_port("interface = \"eth1\"\n")
    );
    one_error(
        &text,
        12,
        Some("interface"),
        "interface `eth1` is also used by port `veth0` at line 5; accepted: one port per kernel \
         interface",
    );
    let text = format!(
        "{}\n{}",
        af_packet_port("fanout = 3\n"),
        af_packet_port("fanout = 3\n")
            .replace("veth0", "veth1")
            .replace("01:01", "01:02")
    );
    one_error(
        &text,
        11,
        Some("fanout"),
        "fanout group 3 is also used by port `veth0` at line 5",
    );
    // A defaulted interface collides with an explicit one too.
    let text = format!(
        "{}\n{}",
        af_packet_port(""),
        tap_port("interface = \"veth0\"\n")
    );
    one_error(
        &text,
        10,
        Some("interface"),
        "interface `veth0` is also used",
    );
}

#[test]
fn kernel_port_settings() {
    one_error(
        &af_packet_port("fanout = 65536\n"),
        5,
        Some("fanout"),
        "0..=65535",
    );
    one_error(
        &af_packet_port("fanout = -1\n"),
        5,
        Some("fanout"),
        "0..=65535",
    );
    one_error(
        &tap_port("vnet-hdr = \"yes\"\n"),
        5,
        Some("vnet-hdr"),
        "accepted: true, false",
    );
}

#[test]
fn driver_specific_keys_name_their_drivers() {
    one_error(
        &tap_port("fanout = 1\n"),
        5,
        Some("fanout"),
        "`fanout` applies only to driver = \"af-packet\"; this port's driver is \"tap\", whose \
         keys are: interface, vnet-hdr, offloads",
    );
    one_error(
        &pcap_port("interface = \"eth0\"\n"),
        5,
        Some("interface"),
        "`interface` applies only to driver = \"af-packet\" or \"af-xdp\" or \"tap\"; this port's driver is \
         \"pcap\"",
    );
    one_error(
        &af_packet_port("rx = \"in.pcap\"\n"),
        5,
        Some("rx"),
        "`rx` applies only to driver = \"pcap\"; this port's driver is \"af-packet\", whose \
         keys are: interface, fanout",
    );
    one_error(
        &memory_port("vnet-hdr = true\n"),
        7,
        Some("vnet-hdr"),
        "`vnet-hdr` applies only to driver = \"tap\"",
    );
}

#[test]
fn port_unknown_key() {
    one_error(
        &pcap_port("mtuu = 1500\n"),
        5,
        None,
        "[[port]] #1: unknown key `mtuu` (did you mean `mtu`?)",
    );
}

#[test]
fn af_xdp_port() {
    let spec = ok(
        "[[port]]\nname = \"x0\"\ndriver = \"af-xdp\"\nmac = \"02:00:00:00:01:01\"\n\
                   interface = \"veth9\"\nqueues = 2\nxdp-mode = \"generic\"\n",
    );
    assert_eq!(
        spec.ports[0].driver,
        PortDriver::AfXdp {
            interface: "veth9".into(),
            queues: 2,
            mode: dataplane::XdpModeChoice::Generic,
        }
    );
    let spec = ok("[[port]]\nname = \"x0\"\ndriver = \"af-xdp\"\nmac = \"02:00:00:00:01:01\"\n");
    assert_eq!(
        spec.ports[0].driver,
        PortDriver::AfXdp {
            interface: "x0".into(),
            queues: 0,
            mode: dataplane::XdpModeChoice::Auto,
        }
    );
    let port = "[[port]]\nname = \"x0\"\ndriver = \"af-xdp\"\nmac = \"02:00:00:00:01:01\"\n";
    one_error(
        &format!("{port}xdp-mode = \"fast\"\n"),
        5,
        Some("xdp-mode"),
        "`fast` is not an XDP mode; accepted: \"auto\", \"native\", \"generic\"",
    );
    one_error(
        &format!("{port}queues = 0\n"),
        5,
        Some("queues"),
        "accepted: 1..=64",
    );
    one_error(
        &format!("{port}fanout = 3\n"),
        5,
        Some("fanout"),
        "`fanout` applies only to driver = \"af-packet\"; this port's driver is \"af-xdp\"",
    );
}

fn vhost_port(name: &str, extra: &str) -> String {
    format!(
        "[[port]]\nname = \"{name}\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:01:01\"\n{extra}"
    )
}

#[test]
fn vhost_user_ports() {
    let s = ok(&vhost_port("vm1", "socket = \"vm1.sock\"\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::VhostUser {
            socket: "/base/vm1.sock".into(),
            mode: vhostuser::SocketMode::Server,
            queues: 1,
            access: vhostuser::SocketAccess::default(),
        }
    );
    let s = ok(&vhost_port(
        "vm1",
        "socket = \"/run/q/vm1.sock\"\nsocket-mode = \"client\"\nqueues = 4\n",
    ));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::VhostUser {
            socket: "/run/q/vm1.sock".into(),
            mode: vhostuser::SocketMode::Client,
            queues: 4,
            access: vhostuser::SocketAccess::default(),
        }
    );
    one_error(
        &vhost_port("vm1", "socket = \"a.sock\"\nqueues = 9\n"),
        6,
        Some("queues"),
        "accepted: 1..=8",
    );
    one_error(
        &vhost_port("vm1", ""),
        1,
        Some("socket"),
        "missing required field; accepted: a UNIX socket path",
    );
    one_error(
        &vhost_port("vm1", "socket = \"a.sock\"\nsocket-mode = \"listen\"\n"),
        6,
        Some("socket-mode"),
        "`listen` is not a socket mode; accepted: \"server\"",
    );
    one_error(
        &vhost_port("vm1", "socket = \"\"\n"),
        5,
        Some("socket"),
        "empty path",
    );
    let long = format!("socket = \"{}\"\n", "s".repeat(120));
    one_error(
        &vhost_port("vm1", &long),
        5,
        Some("socket"),
        "accepted: at most 107 bytes",
    );
    // One port per socket; a key of another driver is refused.
    let two = vhost_port("vm1", "socket = \"a.sock\"\n")
        + "\n"
        + &vhost_port("vm2", "socket = \"a.sock\"\n");
    one_error(
        &two,
        11,
        Some("socket"),
        "is also the socket of port `vm1` at line 5; accepted: one port per socket",
    );
    one_error(
        &vhost_port("vm1", "socket = \"a.sock\"\nvnet-hdr = true\n"),
        6,
        Some("vnet-hdr"),
        "socket, socket-mode, socket-permissions, socket-group, queues",
    );
}

#[test]
fn vhost_user_socket_permissions_and_group() {
    let s = ok(&vhost_port(
        "vm1",
        "socket = \"vm1.sock\"\nsocket-permissions = \"0660\"\nsocket-group = \"root\"\n",
    ));
    let PortDriver::VhostUser { access, .. } = &s.ports[0].driver else {
        panic!("not vhost-user");
    };
    assert_eq!(access.permissions, 0o660);
    assert_eq!(access.group.as_ref().map(|g| g.gid), Some(0));
    one_error(
        &vhost_port(
            "vm1",
            "socket = \"a.sock\"\nsocket-permissions = \"0666x\"\n",
        ),
        6,
        Some("socket-permissions"),
        "`0666x` is not a socket mode; accepted: an octal mode of 3 or 4 digits",
    );
    one_error(
        &vhost_port("vm1", "socket = \"a.sock\"\nsocket-permissions = 660\n"),
        6,
        Some("socket-permissions"),
        "expected a string",
    );
    one_error(
        &vhost_port(
            "vm1",
            "socket = \"a.sock\"\nsocket-group = \"no-such-group-vp\"\n",
        ),
        6,
        Some("socket-group"),
        "no group `no-such-group-vp` on this host; accepted: a group name",
    );
    one_error(
        &vhost_port(
            "vm1",
            "socket = \"a.sock\"\nsocket-mode = \"client\"\nsocket-group = \"root\"\n",
        ),
        7,
        Some("socket-group"),
        "applies only to socket-mode = \"server\"",
    );
}

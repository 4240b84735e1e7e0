//! Config tests: one per rule, good and bad, asserting the line and the field of each error.

use super::*;
use crate::testutil::TempDir;
use dataplane::IpPolicy;

const FILE: &str = "test.toml";

fn parse(text: &str) -> Result<DataplaneSpec, ConfigError> {
    parse_config(text, FILE, Path::new("/base"))
}

fn ok(text: &str) -> DataplaneSpec {
    match parse(text) {
        Ok(s) => s,
        Err(e) => panic!("expected a valid config, got:\n{e}\n--- config ---\n{text}"),
    }
}

fn issues(text: &str) -> Vec<Issue> {
    match parse(text) {
        Err(ConfigError::Invalid(v)) => v,
        Err(e) => panic!("unexpected error {e}"),
        Ok(s) => panic!("expected errors, got a valid spec {s:?}\n--- config ---\n{text}"),
    }
}

/// Assert that `text` has exactly one error, at `line`, about `field`, whose rendering contains
/// `needle`; return its rendering.
#[track_caller]
fn one_error(text: &str, line: usize, field: Option<&str>, needle: &str) -> String {
    let v = issues(text);
    assert_eq!(v.len(), 1, "expected one error, got {v:#?}");
    check(&v[0], line, field, needle)
}

#[track_caller]
fn check(i: &Issue, line: usize, field: Option<&str>, needle: &str) -> String {
    let shown = i.to_string();
    assert_eq!(i.line, line, "wrong line in {shown}");
    assert_eq!(i.field.as_deref(), field, "wrong field in {shown}");
    assert!(
        shown.starts_with(&format!("{FILE}:{line}: ")),
        "no FILE:LINE in {shown}"
    );
    if let Some(f) = field {
        assert!(
            shown.contains(&format!("field `{f}`")),
            "field not named in {shown}"
        );
    }
    assert!(shown.contains(needle), "`{needle}` not in {shown}");
    shown
}

/// Two pcap ports and three neighbours; 30 lines, so appended text starts at line 31.
const BASE: &str = r#"[[port]]
name = "in0"
driver = "pcap"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
ip6 = ["2001:db8:1::1/64"]
rx = "in.pcap"

[[port]]
name = "out0"
driver = "pcap"
mac = "02:00:00:00:01:02"
ip4 = ["198.18.3.1/24"]
ip6 = ["2001:db8:3::1/64"]
tx = "out.pcap"

[[neighbour]]
ip = "198.18.1.2"
mac = "02:00:00:00:02:02"
port = "in0"

[[neighbour]]
ip = "198.18.3.2"
mac = "02:00:00:00:03:02"
port = "out0"

[[neighbour]]
ip = "2001:db8:3::2"
mac = "02:00:00:00:03:03"
port = "out0"
"#;
const B: usize = 30;

fn with(extra: &str) -> String {
    assert_eq!(BASE.lines().count(), B);
    format!("{BASE}{extra}")
}

/// One pcap port whose extra lines start at line 5.
fn pcap_port(extra: &str) -> String {
    format!("[[port]]\nname = \"p0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\n{extra}")
}

/// One memory port whose extra lines start at line 7.
fn memory_port(extra: &str) -> String {
    format!(
        "[[port]]\nname = \"m0\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:01\"\n\
         src-ip = \"198.18.0.1\"\ndestinations = [\"198.18.2.10\"]\n{extra}"
    )
}

/// One af-packet port whose extra lines start at line 5.
fn af_packet_port(extra: &str) -> String {
    format!(
        "[[port]]\nname = \"veth0\"\ndriver = \"af-packet\"\nmac = \"02:00:00:00:01:01\"\n{extra}"
    )
}

/// One tap port whose extra lines start at line 5.
fn tap_port(extra: &str) -> String {
    format!("[[port]]\nname = \"tap0\"\ndriver = \"tap\"\nmac = \"02:00:00:00:01:01\"\n{extra}")
}

fn mac(s: &str) -> Mac {
    parse_mac(s).unwrap()
}

// --- the file --------------------------------------------------------------------------------

#[test]
fn base_is_valid() {
    let s = ok(BASE);
    assert_eq!(s.ports.len(), 2);
    assert_eq!(s.neighbours.len(), 3);
    assert_eq!(s.buffers, 16384);
}

#[test]
fn empty_file_is_an_empty_dataplane() {
    assert_eq!(ok(""), DataplaneSpec::default());
}

#[test]
fn syntax_error_has_file_and_line() {
    let v = issues("[dataplane]\nbuffers = 64\ndata-size = = 3\n");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].line, 3);
    assert!(
        v[0].to_string()
            .starts_with("test.toml:3: TOML syntax error"),
        "{}",
        v[0]
    );
}

#[test]
fn duplicate_key_is_a_syntax_error_with_line() {
    let v = issues("[[port]]\nname = \"a\"\nname = \"b\"\n");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].line, 3, "{}", v[0]);
}

#[test]
fn datetime_is_rejected_with_line() {
    let v = issues("[dataplane]\nbuffers = 1979-05-27T07:32:00Z\n");
    assert_eq!(v[0].line, 2);
    assert!(v[0].message.contains("date/time"), "{}", v[0]);
}

#[test]
fn unknown_top_level_key() {
    let s = one_error(
        &with("[[neighbor]]\nip = \"198.18.1.3\"\n"),
        B + 1,
        None,
        "unknown key `neighbor` (did you mean `neighbour`?); accepted: api, dataplane, port, route, neighbour, xconnect",
    );
    assert!(s.contains("test.toml:31:"));
}

#[test]
fn single_port_table_is_rejected() {
    one_error(
        "[port]\nname = \"x\"\n",
        1,
        Some("port"),
        "expected an array of tables",
    );
}

#[test]
fn all_errors_are_collected_in_line_order() {
    let text = with(
        "[[route]]\nprefix = \"198.18.9.1/24\"\nvia = \"198.18.1.2\"\n\
         [dataplane]\nbuffers = 1\ndata-size = 1\n",
    );
    let v = issues(&text);
    assert_eq!(v.len(), 3, "{v:#?}");
    check(&v[0], B + 2, Some("prefix"), "did you mean 198.18.9.0/24?");
    check(&v[1], B + 5, Some("buffers"), "64..=16777216");
    check(&v[2], B + 6, Some("data-size"), "256..=9216");
    let e = ConfigError::Invalid(v);
    assert_eq!(e.to_string().lines().count(), 3);
}

#[test]
fn read_error_names_the_path() {
    let e = load_config(Path::new("/nonexistent/vecplane.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/vecplane.toml: cannot read"),
        "{e}"
    );
}

// --- [dataplane] -----------------------------------------------------------------------------

#[test]
fn dataplane_good() {
    let s = ok(
        "[dataplane]\nbuffers = 64\ndata-size = 9216\nworker-cpu = 0\n\
                ip4-options = \"drop\"\nicmp-errors-per-second = 0\nicmp-errors-burst = 7\n",
    );
    assert_eq!(s.buffers, 64);
    assert_eq!(s.data_size, 9216);
    assert_eq!(s.worker_cpu, Some(0));
    assert_eq!(s.ip.ip4_options, OptionsPolicy::Drop);
    assert_eq!(s.ip.icmp_errors_per_second, 0);
    assert_eq!(s.ip.icmp_errors_burst, 7);
    let s = ok("[dataplane]\nbuffers = 16777216\ndata-size = 256\nip4-options = \"forward\"\n");
    assert_eq!(s.buffers, 16_777_216);
    assert_eq!(s.worker_cpu, None);
    assert_eq!(s.ip.ip4_options, OptionsPolicy::Forward);
}

#[test]
fn dataplane_buffers_range() {
    one_error(
        "[dataplane]\nbuffers = 63\n",
        2,
        Some("buffers"),
        "`63` is out of range; accepted: 64..=16777216",
    );
    one_error(
        "[dataplane]\n\nbuffers = 16777217\n",
        3,
        Some("buffers"),
        "64..=16777216",
    );
    one_error(
        "[dataplane]\nbuffers = \"many\"\n",
        2,
        Some("buffers"),
        "expected an integer, found a string",
    );
}

#[test]
fn dataplane_data_size_range() {
    one_error(
        "[dataplane]\ndata-size = 255\n",
        2,
        Some("data-size"),
        "256..=9216",
    );
    one_error(
        "[dataplane]\ndata-size = 9217\n",
        2,
        Some("data-size"),
        "256..=9216",
    );
}

#[test]
fn dataplane_worker_cpu_must_exist() {
    one_error(
        "[dataplane]\nworker-cpu = 100000\n",
        2,
        Some("worker-cpu"),
        "CPU 100000 does not exist",
    );
    one_error(
        "[dataplane]\nworker-cpu = -1\n",
        2,
        Some("worker-cpu"),
        "out of range",
    );
}

#[test]
fn dataplane_ip4_options_policy() {
    one_error(
        "[dataplane]\nip4-options = \"strip\"\n",
        2,
        Some("ip4-options"),
        "`strip` is not a policy; accepted: \"forward\", \"drop\"",
    );
}

#[test]
fn dataplane_icmp_rates() {
    one_error(
        "[dataplane]\nicmp-errors-per-second = -5\n",
        2,
        Some("icmp-errors-per-second"),
        "out of range",
    );
    one_error(
        "[dataplane]\nicmp-errors-burst = true\n",
        2,
        Some("icmp-errors-burst"),
        "expected an integer, found a boolean",
    );
}

#[test]
fn dataplane_unknown_key_suggests() {
    one_error(
        "[dataplane]\ndata_size = 2048\n",
        2,
        None,
        "[dataplane]: unknown key `data_size` (did you mean `data-size`?); accepted: buffers, data-size",
    );
}

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

#[test]
fn tap_port_good() {
    let s = ok(&tap_port("vnet-hdr = true\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::Tap {
            name: "tap0".into(),
            vnet_hdr: true
        }
    );
    let s = ok(&tap_port("interface = \"vm1-tap\"\n"));
    assert_eq!(
        s.ports[0].driver,
        PortDriver::Tap {
            name: "vm1-tap".into(),
            vnet_hdr: false
        }
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
         keys are: interface, vnet-hdr",
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

// --- [[neighbour]] ---------------------------------------------------------------------------

#[test]
fn neighbour_good() {
    let s = ok(BASE);
    assert_eq!(
        s.neighbours[2],
        NeighbourSpec {
            ip: "2001:db8:3::2".parse().unwrap(),
            mac: mac("02:00:00:00:03:03"),
            port: 1
        }
    );
}

#[test]
fn neighbour_port_must_exist() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in9\"\n",
        ),
        B + 5,
        Some("port"),
        "no port is named `in9`; accepted: the name of a [[port]]: `in0`, `out0`",
    );
}

#[test]
fn neighbour_must_be_on_a_port_subnet() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.9.3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "198.18.9.3 is not on a subnet of port `in0`; accepted: an address inside 198.18.1.0/24",
    );
    one_error(
        &with("\n[[neighbour]]\nip = \"2001:db8:9::3\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n"),
        B + 3,
        Some("ip"),
        "inside 2001:db8:1::/64",
    );
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.1\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "port `in0`'s own address",
    );
}

#[test]
fn neighbours_are_unique() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.2\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "duplicate neighbour 198.18.1.2: also defined at line 18",
    );
}

#[test]
fn neighbour_fields() {
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.3\"\nmac = \"ff:ff:ff:ff:ff:ff\"\nport = \"in0\"\n",
        ),
        B + 4,
        Some("mac"),
        "not a unicast MAC",
    );
    one_error(
        &with("\n[[neighbour]]\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n"),
        B + 2,
        Some("ip"),
        "missing required field",
    );
    one_error(
        &with(
            "\n[[neighbour]]\nip = \"198.18.1.300\"\nmac = \"02:00:00:00:02:03\"\nport = \"in0\"\n",
        ),
        B + 3,
        Some("ip"),
        "is not an IP address",
    );
}

// --- [[route]] -------------------------------------------------------------------------------

#[test]
fn route_good() {
    let s = ok(&with(
        "[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\n\
         [[route]]\nprefix = \"0.0.0.0/0\"\nvia = [\"198.18.1.2\", \"198.18.3.2\"]\n\
         [[route]]\nprefix = \"198.19.0.0/16\"\naction = \"drop\"\n\
         [[route]]\nprefix = \"2001:db8:2::/48\"\nvia = [\"2001:db8:3::2\"]\n",
    ));
    assert_eq!(
        s.routes4,
        vec![
            RouteSpec {
                prefix: "198.18.2.0".parse().unwrap(),
                len: 24,
                target: RouteTarget::Via(vec!["198.18.1.2".parse().unwrap()])
            },
            RouteSpec {
                prefix: "0.0.0.0".parse().unwrap(),
                len: 0,
                target: RouteTarget::Via(vec![
                    "198.18.1.2".parse().unwrap(),
                    "198.18.3.2".parse().unwrap()
                ])
            },
            RouteSpec {
                prefix: "198.19.0.0".parse().unwrap(),
                len: 16,
                target: RouteTarget::Drop
            },
        ]
    );
    assert_eq!(
        s.routes6,
        vec![RouteSpec {
            prefix: "2001:db8:2::".parse().unwrap(),
            len: 48,
            target: RouteTarget::Via(vec!["2001:db8:3::2".parse().unwrap()])
        }]
    );
}

#[test]
fn route_host_bits() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.1/24\"\nvia = \"198.18.1.2\"\n"),
        B + 2,
        Some("prefix"),
        "`198.18.2.1/24` has host bits set (did you mean 198.18.2.0/24?)",
    );
    one_error(
        &with("[[route]]\nprefix = \"2001:db8:2::1/48\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "did you mean 2001:db8:2::/48?",
    );
}

#[test]
fn route_prefix_syntax() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "has no prefix length",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/40\"\naction = \"drop\"\n"),
        B + 2,
        Some("prefix"),
        "invalid prefix length `40`",
    );
    one_error(
        &with("[[route]]\naction = \"drop\"\n"),
        B + 1,
        Some("prefix"),
        "missing required field",
    );
}

#[test]
fn route_prefixes_are_unique() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\naction = \"drop\"\n\n[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\n"),
        B + 6,
        Some("prefix"),
        "duplicate route 198.18.2.0/24: also defined at line 32",
    );
}

#[test]
fn route_via_must_be_a_neighbour_or_on_link_of_the_family() {
    // A host on a port's subnet is resolved by ARP: accepted without a [[neighbour]].
    let spec = ok(&with(
        "[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.9\"\n",
    ));
    assert_eq!(
        spec.routes4[0].target,
        RouteTarget::Via(vec!["198.18.1.9".parse().unwrap()])
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.9.9\"\n"),
        B + 3,
        Some("via"),
        "next hop 198.18.9.9 is neither a [[neighbour]] nor on a port's subnet; accepted: an address inside a port's `ip4` prefix (resolved by ARP), or the ip of a [[neighbour]]: 198.18.1.2, 198.18.3.2",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.1\"\n"),
        B + 3,
        Some("via"),
        "next hop 198.18.1.1 is neither",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = [\"198.18.1.2\", \"2001:db8:3::2\"]\n"),
        B + 3,
        Some("via"),
        "next hop 2001:db8:3::2 is IPv6 but the route is IPv4",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = []\n"),
        B + 3,
        Some("via"),
        "empty list",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = [\"198.18.1.2\", \"198.18.1.2\"]\n"),
        B + 3,
        Some("via"),
        "listed twice",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = 5\n"),
        B + 3,
        Some("via"),
        "expected a string or an array of strings",
    );
}

#[test]
fn route_via_or_action() {
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\nvia = \"198.18.1.2\"\naction = \"drop\"\n"),
        B + 4,
        Some("action"),
        "either `via` or `action`, not both",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\n"),
        B + 1,
        Some("via"),
        "missing required field; accepted: via = ",
    );
    one_error(
        &with("[[route]]\nprefix = \"198.18.2.0/24\"\naction = \"reject\"\n"),
        B + 3,
        Some("action"),
        "`reject` is not a route action; accepted: \"drop\"",
    );
}

// --- [[xconnect]] ----------------------------------------------------------------------------

#[test]
fn xconnect_good() {
    let s = ok(&with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\ndst-mac = \"02:00:00:00:02:02\"\n[[xconnect]]\nfrom = \"out0\"\nto = \"in0\"\n"));
    assert_eq!(
        s.xconnects,
        vec![
            XconnectSpec {
                from: 0,
                to: 1,
                dst_mac: Some(mac("02:00:00:00:02:02"))
            },
            XconnectSpec {
                from: 1,
                to: 0,
                dst_mac: None
            }
        ]
    );
}

#[test]
fn xconnect_ports_must_exist() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"eth9\"\n"),
        B + 3,
        Some("to"),
        "no port is named `eth9`",
    );
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\n"),
        B + 1,
        Some("to"),
        "missing required field",
    );
}

#[test]
fn xconnect_from_at_most_once() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\n[[xconnect]]\nfrom = \"in0\"\nto = \"in0\"\n"),
        B + 5,
        Some("from"),
        "port `in0` is already the `from` of the [[xconnect]] at line 32",
    );
}

#[test]
fn xconnect_dst_mac() {
    one_error(
        &with("[[xconnect]]\nfrom = \"in0\"\nto = \"out0\"\ndst-mac = \"02:00\"\n"),
        B + 4,
        Some("dst-mac"),
        "`02:00` is not a MAC address",
    );
}

// --- check_files and the examples ------------------------------------------------------------

#[test]
fn check_files_reports_missing_rx_and_tx_dir() {
    let d = TempDir::new();
    let text = pcap_port("rx = \"in.pcap\"\ntx = \"nodir/out.pcap\"\n");
    let c = Config::parse(&text, FILE, &d.0).unwrap();
    let e = c.check_files().unwrap_err();
    let v = e.issues();
    assert_eq!(v.len(), 2, "{e}");
    check(&v[0], 5, Some("rx"), "cannot open");
    check(&v[1], 6, Some("tx"), "does not exist");
    std::fs::write(d.0.join("in.pcap"), b"").unwrap();
    std::fs::create_dir(d.0.join("nodir")).unwrap();
    c.check_files().unwrap();
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn router_example_round_trips() {
    let dir = examples_dir();
    let spec = load_config(&dir.join("router.toml")).unwrap();
    let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let expected = DataplaneSpec {
        buffers: 16384,
        data_size: 2048,
        worker_cpu: None,
        ports: vec![
            PortSpec {
                name: "in0".into(),
                mac: mac("02:00:00:00:01:01"),
                mtu: 1500,
                ip4: vec![(v4("198.18.1.1"), 24)],
                ip6: vec![(v6("2001:db8:1::1"), 64)],
                driver: PortDriver::Pcap {
                    rx: Some(dir.join("router-in.pcap")),
                    tx: Some(dir.join("router-in-tx.pcap")),
                },
            },
            PortSpec {
                name: "out0".into(),
                mac: mac("02:00:00:00:02:01"),
                mtu: 1500,
                ip4: vec![(v4("198.18.2.1"), 24)],
                ip6: vec![(v6("2001:db8:2::1"), 64)],
                driver: PortDriver::Pcap {
                    rx: None,
                    tx: Some(dir.join("router-out.pcap")),
                },
            },
        ],
        routes4: vec![
            RouteSpec {
                prefix: v4("198.18.100.0"),
                len: 24,
                target: RouteTarget::Via(vec![v4("198.18.2.2")]),
            },
            RouteSpec {
                prefix: v4("198.18.200.0"),
                len: 24,
                target: RouteTarget::Via(vec![v4("198.18.1.2"), v4("198.18.2.2")]),
            },
            RouteSpec {
                prefix: v4("198.19.0.0"),
                len: 16,
                target: RouteTarget::Drop,
            },
        ],
        routes6: vec![
            RouteSpec {
                prefix: v6("2001:db8:100::"),
                len: 48,
                target: RouteTarget::Via(vec![v6("2001:db8:2::2")]),
            },
            RouteSpec {
                prefix: v6("2001:db8:200::"),
                len: 48,
                target: RouteTarget::Via(vec![v6("2001:db8:1::2"), v6("2001:db8:2::2")]),
            },
        ],
        neighbours: vec![
            NeighbourSpec {
                ip: "198.18.1.2".parse().unwrap(),
                mac: mac("02:00:00:00:01:02"),
                port: 0,
            },
            NeighbourSpec {
                ip: "198.18.2.2".parse().unwrap(),
                mac: mac("02:00:00:00:02:02"),
                port: 1,
            },
            NeighbourSpec {
                ip: "2001:db8:1::2".parse().unwrap(),
                mac: mac("02:00:00:00:01:02"),
                port: 0,
            },
            NeighbourSpec {
                ip: "2001:db8:2::2".parse().unwrap(),
                mac: mac("02:00:00:00:02:02"),
                port: 1,
            },
        ],
        xconnects: vec![],
        ip: IpPolicy {
            ip4_options: OptionsPolicy::Forward,
            icmp_errors_per_second: 1000,
            icmp_errors_burst: 100,
        },
        ..DataplaneSpec::default()
    };
    assert_eq!(spec, expected);
}

#[test]
fn l2xc_example_loads() {
    let dir = examples_dir();
    let spec = load_config(&dir.join("l2xc.toml")).unwrap();
    assert_eq!(spec.ports.len(), 2);
    assert_eq!(
        spec.xconnects,
        vec![XconnectSpec {
            from: 0,
            to: 1,
            dst_mac: Some(mac("02:00:00:00:02:02"))
        }]
    );
}

#[test]
fn examples_pass_check_files_once_their_captures_exist() {
    // Copy each example next to the capture files it names, in a temp dir.
    for name in ["router.toml", "l2xc.toml"] {
        let d = TempDir::new();
        let text = std::fs::read_to_string(examples_dir().join(name)).unwrap();
        std::fs::write(d.0.join(name), &text).unwrap();
        let c = Config::load(&d.0.join(name)).unwrap();
        assert!(
            c.check_files().is_err(),
            "{name}: rx capture should be missing"
        );
        for p in &c.spec.ports {
            if let PortDriver::Pcap { rx: Some(rx), .. } = &p.driver {
                std::fs::write(rx, b"").unwrap();
            }
        }
        c.check_files().unwrap();
    }
}

#[test]
fn suggestions() {
    assert_eq!(suggest("neighbor", TOP_KEYS), Some("neighbour"));
    assert_eq!(suggest("src_mac", PORT_KEYS), Some("src-mac"));
    assert_eq!(suggest("zzzzzz", PORT_KEYS), None);
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

#[test]
fn several_workers() {
    let spec = ok("[dataplane]\nworkers = 2\nworker-cpus = [0, 1]\n");
    assert_eq!(spec.workers, 2);
    assert_eq!(spec.worker_cpus, vec![0, 1]);
    assert_eq!(spec.cpu_of(1), Some(1));
    one_error(
        "[dataplane]\nworkers = 2\nworker-cpus = [0]\n",
        3,
        Some("worker-cpus"),
        "1 CPUs for 2 workers; accepted: one CPU per worker",
    );
    one_error(
        "[dataplane]\nworkers = 2\nworker-cpu = 0\n",
        3,
        Some("worker-cpu"),
        "with workers > 1 accepted: worker-cpus",
    );
    // Ports that cannot be shared between workers, and too few AF_XDP queues.
    let two = "[dataplane]\nworkers = 2\n\n";
    one_error(
        &format!("{two}[[port]]\nname = \"p\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\n"),
        6,
        Some("driver"),
        "a \"pcap\" port runs on one worker, and [dataplane] workers = 2",
    );
    // Fewer AF_XDP queues than workers is software RSS, not an error.
    ok(&format!(
        "{two}[[port]]\nname = \"x\"\ndriver = \"af-xdp\"\nmac = \"02:00:00:00:01:01\"\n\
         queues = 1\n"
    ));
    ok(&format!(
        "{two}[[port]]\nname = \"x\"\ndriver = \"af-packet\"\nmac = \"02:00:00:00:01:01\"\n"
    ));
}

#[test]
fn poll_mode_one_or_per_worker_and_sleep_bound() {
    let s = ok("[dataplane]\npoll-mode = \"busy\"\npoll-sleep-max-us = 500\n");
    assert_eq!(s.poll.mode_of(0), dataplane::PollMode::Busy);
    assert_eq!(s.poll.sleep_max_us, 500);
    let s = ok("[dataplane]\nworkers = 2\npoll-mode = [\"busy\", \"adaptive\"]\n");
    assert_eq!(s.poll.mode_of(1), dataplane::PollMode::Adaptive);
    assert_eq!(ok("").poll.mode_of(0), dataplane::PollMode::Adaptive);
    one_error(
        "[dataplane]\npoll-mode = \"lazy\"\n",
        2,
        Some("poll-mode"),
        "`lazy` is not a mode; accepted: \"busy\"",
    );
    one_error(
        "[dataplane]\nworkers = 2\npoll-mode = [\"busy\"]\n",
        3,
        Some("poll-mode"),
        "1 modes for 2 worker(s)",
    );
    one_error(
        "[dataplane]\npoll-sleep-max-us = 5\n",
        2,
        Some("poll-sleep-max-us"),
        "10..=100000",
    );
}

#[test]
fn api_tcp_needs_a_token_file() {
    one_error(
        "[api]\ntcp = \"127.0.0.1:8080\"\n",
        2,
        Some("tcp"),
        "needs token-file",
    );
    one_error(
        "[api]\ntcp = \"localhost\"\ntoken-file = \"t\"\n",
        2,
        Some("tcp"),
        "not an address and port",
    );
}

#[test]
fn own_addresses_must_be_usable_unicast_and_subnets_not_shared() {
    let port = |ip: &str| {
        format!("[[port]]\nname = \"p0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:09:01\"\nip4 = [\"{ip}\"]\n")
    };
    for (ip, needle) in [
        ("127.0.0.1/8", "loopback"),
        ("224.0.0.5/24", "multicast"),
        ("255.255.255.255/24", "broadcast address 255.255.255.255"),
        ("0.0.0.0/24", "unspecified"),
        ("198.18.1.0/24", "network or the broadcast address"),
        ("198.18.1.255/24", "network or the broadcast address"),
    ] {
        one_error(&port(ip), 5, Some("ip4"), needle);
    }
    // /31 and /32 have no network or broadcast address.
    ok(&port("198.18.1.0/31"));
    let v6 = |ip: &str| {
        format!("[[port]]\nname = \"p0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:09:01\"\nip6 = [\"{ip}\"]\n")
    };
    for (ip, needle) in [
        ("::1/128", "loopback"),
        ("ff02::1/64", "multicast"),
        ("::/64", "unspecified"),
        ("::ffff:198.18.1.1/120", "IPv4-mapped"),
    ] {
        one_error(&v6(ip), 5, Some("ip6"), needle);
    }
    // The same subnet on two ports.
    let two = format!(
        "{}\n[[port]]\nname = \"p1\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:09:02\"\nip4 = [\"198.18.1.9/16\"]\n",
        port("198.18.1.1/24")
    );
    one_error(
        &two,
        11,
        Some("ip4"),
        "overlaps 198.18.1.0/24 of port `p0` (line 5)",
    );
}

#[test]
fn a_config_that_is_not_a_regular_file_is_refused() {
    let e = Config::load(Path::new("/dev/zero")).expect_err("a device");
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

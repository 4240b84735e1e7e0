//! Config tests: one per rule, good and bad, asserting the line and the field of each error.

use super::document::TOP_KEYS;
use super::ports::PORT_KEYS;
use super::util::suggest;
use super::*;
use crate::testutil::TempDir;
use dataplane::{
    BridgePortMode, IpPolicy, MemoryPortSpec, NeighbourSpec, OptionsPolicy, PortDriver, PortSpec,
    RouteSpec, RouteTarget, XconnectSpec,
};
use packet::headers::{parse_mac, Mac};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

mod addresses;
mod bgp;
mod bridges;
mod diff;
mod examples;
mod flow_bridges;
mod lb;
mod policies;
mod ports;
mod route_file;
mod routes;
mod vxlan;

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
        "unknown key `neighbor` (did you mean `neighbour`?); accepted: dataplane, port, route, neighbour, xconnect",
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

#[test]
fn suggestions() {
    assert_eq!(suggest("neighbor", TOP_KEYS), Some("neighbour"));
    assert_eq!(suggest("src_mac", PORT_KEYS), Some("src-mac"));
    assert_eq!(suggest("zzzzzz", PORT_KEYS), None);
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

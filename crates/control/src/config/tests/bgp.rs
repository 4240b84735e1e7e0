//! `[bgp]`: a good table with every key, the defaults, and every refusal at its line naming
//! `[bgp]`, the key and what is accepted.

use super::*;
use crate::bgp::{BgpConfig, Daemon};
use std::time::Duration;

/// An empty `[lb]` then `[bgp]` with the two required keys; extra lines start at line 5.
fn bgp(extra: &str) -> String {
    format!(
        "[lb]\n[bgp]\ncontrol-socket = \"bird.ctl\"\nroutes-file = \"/etc/bird/vecplane.conf\"\n\
         {extra}"
    )
}

fn parsed(text: &str) -> BgpConfig {
    match Config::parse(text, FILE, Path::new("/base")) {
        Ok(c) => c.bgp.expect("[bgp] given"),
        Err(e) => panic!("expected a valid config, got:\n{e}\n--- config ---\n{text}"),
    }
}

#[test]
fn every_key() {
    let c = parsed(&bgp(
        "daemon = \"bird\"\ninterface = \"lb-live.0\"\nprotocol = \"vp_lb\"\nmed = 4294967295\n\
         communities = [\"65000:100\", \"0:65535\"]\nlarge-communities = [\"65000:1:2\"]\n\
         next-hop4 = \"198.18.11.2\"\nnext-hop6 = \"2001:db8:11::2\"\ndrain-timeout-ms = 100\n\
         drain-quiet-ms = 600000\nstall-ms = 50\n",
    ));
    assert_eq!(
        c,
        BgpConfig {
            daemon: Daemon::Bird,
            control_socket: PathBuf::from("/base/bird.ctl"),
            routes_file: PathBuf::from("/etc/bird/vecplane.conf"),
            interface: "lb-live.0".into(),
            protocol: "vp_lb".into(),
            med: Some(u32::MAX),
            communities: vec![(65000, 100), (0, 65535)],
            large_communities: vec![(65000, 1, 2)],
            next_hop4: Some(Ipv4Addr::new(198, 18, 11, 2)),
            next_hop6: Some("2001:db8:11::2".parse().unwrap()),
            drain_timeout: Duration::from_millis(100),
            drain_quiet: Duration::from_millis(600_000),
            stall: Duration::from_millis(50),
        }
    );
    assert_eq!(
        (c.protocol4(), c.protocol6()),
        ("vp_lb4".into(), "vp_lb6".into())
    );
}

#[test]
fn defaults_and_absence() {
    let c = parsed(&bgp(""));
    assert_eq!(
        c,
        BgpConfig::new("/base/bird.ctl", "/etc/bird/vecplane.conf")
    );
    assert_eq!(c.interface, "vplbgp0");
    assert_eq!(c.protocol, "vecplane");
    assert_eq!(c.drain_timeout, Duration::from_secs(30));
    assert_eq!(c.drain_quiet, Duration::from_secs(2));
    assert_eq!(c.stall, Duration::from_millis(500));
    let none = Config::parse("[lb]\n", FILE, Path::new("/base")).unwrap();
    assert_eq!(none.bgp, None);
    assert!(TOP_KEYS.contains(&"bgp"));
}

#[test]
fn bgp_needs_lb() {
    one_error(
        "[bgp]\ncontrol-socket = \"s\"\nroutes-file = \"r\"\n",
        1,
        None,
        "[bgp]: [bgp] announces the VIPs of [lb] and this config has no [lb]; accepted: an [lb] table",
    );
}

#[test]
fn required_paths() {
    let v = issues("[lb]\n[bgp]\n");
    assert_eq!(v.len(), 2, "{v:#?}");
    check(
        &v[0],
        2,
        Some("control-socket"),
        "missing required field; accepted: the path of BIRD's control socket",
    );
    check(
        &v[1],
        2,
        Some("routes-file"),
        "missing required field; accepted: the path of the file",
    );
    one_error(
        "[lb]\n[bgp]\ncontrol-socket = \"\"\nroutes-file = \"r\"\n",
        3,
        Some("control-socket"),
        "[bgp] field `control-socket`: empty path; accepted",
    );
    one_error(
        "[lb]\n[bgp]\ncontrol-socket = \"s\"\nroutes-file = 7\n",
        4,
        Some("routes-file"),
        "expected a string, found an integer",
    );
}

#[test]
fn bad_values_name_the_key_and_what_is_accepted() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "daemon = \"gobgp\"",
            "daemon",
            "`gobgp` is not a supported daemon; accepted: bird",
        ),
        (
            "interface = \"\"",
            "interface",
            "not an interface name; accepted: 1 to 15",
        ),
        (
            "interface = \"a-very-long-name0\"",
            "interface",
            "not an interface name",
        ),
        (
            "interface = \"vpl bgp\"",
            "interface",
            "not an interface name",
        ),
        ("interface = \"..\"", "interface", "(not `.` or `..`)"),
        (
            "protocol = \"vec-plane\"",
            "protocol",
            "not a BIRD symbol; accepted: a letter or `_`",
        ),
        ("protocol = \"4lb\"", "protocol", "not a BIRD symbol"),
        ("protocol = \"\"", "protocol", "not a BIRD symbol"),
        (
            "protocol = \"ipv\"",
            "protocol",
            "`ipv4`/`ipv6` are BIRD keywords or tables",
        ),
        (
            "protocol = \"master\"",
            "protocol",
            "accepted: another name",
        ),
        (
            "protocol = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
            "protocol",
            "33 characters long; accepted: 1 to 32",
        ),
        ("med = -1", "med", "accepted: 0..=4294967295"),
        ("med = 4294967296", "med", "accepted: 0..=4294967295"),
        ("med = \"10\"", "med", "expected an integer"),
        (
            "communities = \"65000:100\"",
            "communities",
            "expected an array of strings",
        ),
        (
            "communities = [\"65536:1\"]",
            "communities",
            "`65536:1` is not a community; accepted: ASN:VALUE with two numbers 0..=65535",
        ),
        (
            "communities = [\"65000\"]",
            "communities",
            "not a community",
        ),
        (
            "communities = [\"65000:1:2\"]",
            "communities",
            "not a community",
        ),
        ("communities = [\"a:b\"]", "communities", "not a community"),
        (
            "communities = [\"1:2\", \"1:2\"]",
            "communities",
            "`1:2` is listed twice",
        ),
        (
            "large-communities = [\"1:2\"]",
            "large-communities",
            "accepted: GLOBAL:LOCAL1:LOCAL2 with three numbers 0..=4294967295",
        ),
        (
            "large-communities = [\"4294967296:1:2\"]",
            "large-communities",
            "not a community",
        ),
        (
            "next-hop4 = \"2001:db8::1\"",
            "next-hop4",
            "of the other family; accepted: an IPv4 unicast address",
        ),
        (
            "next-hop4 = \"198.18.11\"",
            "next-hop4",
            "not an IP address; accepted: an IPv4",
        ),
        (
            "next-hop4 = \"0.0.0.0\"",
            "next-hop4",
            "not a unicast address",
        ),
        (
            "next-hop4 = \"224.0.0.1\"",
            "next-hop4",
            "not a unicast address",
        ),
        (
            "next-hop6 = \"198.18.11.2\"",
            "next-hop6",
            "accepted: an IPv6 unicast address",
        ),
        (
            "next-hop6 = \"ff02::1\"",
            "next-hop6",
            "not a unicast address",
        ),
        (
            "drain-timeout-ms = 99",
            "drain-timeout-ms",
            "accepted: 100..=3600000",
        ),
        (
            "drain-quiet-ms = 600001",
            "drain-quiet-ms",
            "accepted: 100..=600000",
        ),
        ("stall-ms = 49", "stall-ms", "accepted: 50..=60000"),
        ("stall-ms = 60001", "stall-ms", "accepted: 50..=60000"),
    ];
    for (line, key, needle) in cases {
        let shown = one_error(&bgp(&format!("{line}\n")), 5, Some(key), needle);
        assert!(shown.contains("[bgp] field"), "{shown}");
    }
    // Every bad key at once, each at its line.
    let v = issues(&bgp("med = -1\nstall-ms = 1\n"));
    assert_eq!(v.len(), 2, "{v:#?}");
    check(&v[0], 5, Some("med"), "0..=4294967295");
    check(&v[1], 6, Some("stall-ms"), "50..=60000");
}

#[test]
fn unknown_key_names_the_accepted_ones() {
    one_error(
        &bgp("next-hop = \"198.18.11.2\"\n"),
        5,
        None,
        "[bgp]: unknown key `next-hop` (did you mean `next-hop4`?); accepted: daemon, control-socket",
    );
    one_error("bgp = 1\n[lb]\n", 1, Some("bgp"), "expected a table");
}

#[test]
fn routes_file_directory_is_checked_with_the_pcap_files() {
    let dir = TempDir::new();
    let text = "[lb]\n[bgp]\ncontrol-socket = \"bird.ctl\"\nroutes-file = \"bird/vecplane.conf\"\n";
    let c = Config::parse(text, FILE, &dir.0).unwrap();
    let e = c.check_files().unwrap_err();
    check(
        &e.issues()[0],
        4,
        Some("routes-file"),
        "does not exist; accepted: a file path whose directory exists",
    );
    std::fs::create_dir_all(dir.0.join("bird/vecplane.conf")).unwrap();
    let e = c.check_files().unwrap_err();
    check(&e.issues()[0], 4, Some("routes-file"), "is a directory");
    std::fs::remove_dir(dir.0.join("bird/vecplane.conf")).unwrap();
    c.check_files().unwrap();
    // The control socket need not exist yet: BIRD may start after vecplane.
    assert_eq!(c.bgp.unwrap().control_socket, dir.0.join("bird.ctl"));
}

#[test]
fn reload_refuses_a_changed_bgp() {
    let cfg = |t: &str| Config::parse(t, FILE, Path::new("/base")).expect("valid");
    let old = cfg(&bgp(""));
    assert!(crate::config::live_diff(&old, &old)
        .expect("same")
        .is_empty());
    for (new, needle) in [
        (cfg(&bgp("med = 5\n")), "[bgp] changed"),
        (cfg("[lb]\n"), "[bgp] is removed"),
    ] {
        let e = crate::config::live_diff(&old, &new).expect_err("refused");
        assert!(e.to_string().contains(needle), "{e}");
    }
}

//! Tests of `live_diff`: what a reload applies live, and what it refuses with the key and line.

use super::*;
use crate::config::{live_diff, LiveDiff, NotLive};
use dataplane::{PollMode, RouteSpec};

fn cfg(text: &str) -> Config {
    match Config::parse(text, FILE, Path::new("/base")) {
        Ok(c) => c,
        Err(e) => panic!("invalid config:\n{e}\n--- config ---\n{text}"),
    }
}

fn diff(old: &str, new: &str) -> LiveDiff {
    match live_diff(&cfg(old), &cfg(new)) {
        Ok(d) => d,
        Err(e) => panic!("expected a live diff, got:\n{e}"),
    }
}

fn refused(old: &str, new: &str) -> NotLive {
    match live_diff(&cfg(old), &cfg(new)) {
        Ok(d) => panic!("expected a refusal, got {d:?}"),
        Err(e) => e,
    }
}

/// The one refusal of a reload from `old` to `new`: at `line`, about `field`, containing `needle`.
#[track_caller]
fn one_refusal(old: &str, new: &str, line: usize, field: Option<&str>, needle: &str) {
    let e = refused(old, new);
    assert_eq!(e.0.len(), 1, "expected one refusal, got {e}");
    let shown = check(&e.0[0], line, field, needle);
    assert!(
        shown.contains("not applied: changes that need a restart"),
        "{shown}"
    );
    assert!(shown.contains("live: routes"), "{shown}");
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn same_config_changes_nothing() {
    let d = diff(BASE, BASE);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(d, LiveDiff::default());
}

#[test]
fn routes_added_removed_changed() {
    let old = with(
        "\n[[route]]\nprefix = \"198.18.10.0/24\"\nvia = \"198.18.1.2\"\n\
         \n[[route]]\nprefix = \"198.18.11.0/24\"\naction = \"drop\"\n\
         \n[[route]]\nprefix = \"2001:db8:10::/48\"\nvia = \"2001:db8:1::2\"\n",
    );
    let new = with(
        "\n[[route]]\nprefix = \"198.18.10.0/24\"\nvia = [\"198.18.1.2\", \"198.18.3.2\"]\n\
         \n[[route]]\nprefix = \"198.18.12.0/24\"\naction = \"drop\"\n\
         \n[[route]]\nprefix = \"2001:db8:10::/48\"\nvia = \"2001:db8:1::2\"\n\
         \n[[route]]\nprefix = \"2001:db8:11::/48\"\naction = \"drop\"\n",
    );
    let d = diff(&old, &new);
    assert_eq!(
        d.routes4.changed,
        vec![RouteSpec {
            prefix: v4("198.18.10.0"),
            len: 24,
            target: RouteTarget::Via(vec![v4("198.18.1.2"), v4("198.18.3.2")]),
        }]
    );
    assert_eq!(d.routes4.added.len(), 1);
    assert_eq!(d.routes4.added[0].prefix, v4("198.18.12.0"));
    assert_eq!(d.routes4.removed.len(), 1);
    assert_eq!(d.routes4.removed[0].prefix, v4("198.18.11.0"));
    assert_eq!(d.routes4.removed[0].target, RouteTarget::Drop);
    assert!(d.routes6.removed.is_empty() && d.routes6.changed.is_empty());
    assert_eq!(d.routes6.added.len(), 1);
    assert_eq!(d.routes6.added[0].len, 48);
    assert!(d.neighbours.is_empty() && d.ip.is_none() && d.poll.is_none());
    assert!(!d.is_empty());
}

#[test]
fn neighbours_added_removed_changed() {
    // BASE has 198.18.1.2 (in0), 198.18.3.2 and 2001:db8:3::2 (out0).
    let new = BASE
        .replace("02:00:00:00:03:02", "02:00:00:00:03:99")
        .replace("ip = \"2001:db8:3::2\"", "ip = \"2001:db8:3::7\"");
    let d = diff(BASE, &new);
    assert_eq!(d.neighbours.changed.len(), 1);
    assert_eq!(d.neighbours.changed[0].ip.to_string(), "198.18.3.2");
    assert_eq!(d.neighbours.changed[0].mac, mac("02:00:00:00:03:99"));
    assert_eq!(d.neighbours.added.len(), 1);
    assert_eq!(d.neighbours.added[0].ip.to_string(), "2001:db8:3::7");
    assert_eq!(d.neighbours.removed.len(), 1);
    assert_eq!(d.neighbours.removed[0].ip.to_string(), "2001:db8:3::2");
    assert!(d.routes4.is_empty() && d.routes6.is_empty());
}

#[test]
fn live_policies() {
    let old = "[dataplane]\nworkers = 2\n".to_string();
    let new = String::from(
        "[dataplane]\nworkers = 2\nicmp-errors-per-second = 10\nneighbour-gc-seconds = 60\n\
         ip4-options = \"drop\"\nbridge-age-seconds = 0\npoll-mode = [\"busy\", \"adaptive\"]\npoll-sleep-max-us = 50\n",
    );
    let d = diff(&old, &new);
    let ip = d.ip.unwrap();
    assert_eq!(ip.icmp_errors_per_second, 10);
    assert_eq!(ip.icmp_errors_burst, IpPolicy::default().icmp_errors_burst);
    assert_eq!(ip.ip4_options, dataplane::OptionsPolicy::Drop);
    assert_eq!(d.neighbour.unwrap().gc_seconds, 60);
    assert_eq!(d.bridge.unwrap().age_seconds, 0);
    let poll = d.poll.unwrap();
    assert_eq!(poll.modes, vec![PollMode::Busy, PollMode::Adaptive]);
    assert_eq!(poll.sleep_max_us, 50);
    assert!(d.routes4.is_empty() && d.neighbours.is_empty());
    // Back to the defaults is live too.
    let d = diff(&new, &old);
    assert_eq!(d.poll, Some(dataplane::PollPolicy::default()));
}

#[test]
fn dataplane_keys_that_need_a_restart() {
    one_refusal(
        "[dataplane]\nbuffers = 1024\nworkers = 1\n",
        "[dataplane]\nbuffers = 1024\nworkers = 2\n",
        3,
        Some("workers"),
        "[dataplane] field `workers`: changed from 1 to 2",
    );
    one_refusal(
        "",
        "[dataplane]\nbuffers = 1024\n",
        2,
        Some("buffers"),
        "changed from 16384 to 1024",
    );
    // A key the new file no longer has: no line to name.
    let e = refused("[dataplane]\nneighbour-queue = 8\n", "");
    assert_eq!(e.0.len(), 1, "{e}");
    assert_eq!(e.0[0].line, 0);
    assert!(
        e.to_string()
            .starts_with("test.toml: [dataplane] field `neighbour-queue`: changed from 8 to 4"),
        "{e}"
    );
    one_refusal(
        "",
        "\n[dataplane]\nneighbour-capacity = 100\n",
        3,
        Some("neighbour-capacity"),
        "changed from",
    );
    one_refusal(
        "",
        "[dataplane]\nbridge-max-macs = 100\n",
        2,
        Some("bridge-max-macs"),
        "changed from",
    );
    one_refusal(
        "",
        "[dataplane]\nworker-cpus = [0]\n",
        2,
        Some("worker-cpus"),
        "changed from [] to [0]",
    );
    // Every refusal is listed, and nothing is applied even with live changes beside them.
    let e = refused(
        "",
        "[dataplane]\nbuffers = 1024\ndata-size = 4096\nicmp-errors-burst = 1\n",
    );
    assert_eq!(e.0.len(), 2, "{e}");
    assert_eq!((e.0[0].line, e.0[1].line), (2, 3));
}

#[test]
fn ports_that_need_a_restart() {
    one_refusal(
        BASE,
        &BASE.replace("mac = \"02:00:00:00:01:02\"", "mac = \"02:00:00:00:01:07\""),
        12,
        Some("mac"),
        "[[port]] #2 field `mac`: port `out0`: its mac changed",
    );
    // A port's own addresses are live (all of the port's addresses are given).
    let d = diff(BASE, &BASE.replace("198.18.3.1/24", "198.18.3.1/25"));
    assert_eq!(d.addrs.len(), 1);
    assert_eq!(d.addrs[0].0, "out0");
    assert_eq!(
        d.addrs[0].1 .0,
        vec![("198.18.3.1".parse::<Ipv4Addr>().expect("ip"), 25)]
    );
    assert_eq!(d.addrs[0].1 .1.len(), 1, "the IPv6 address is kept");
    one_refusal(
        BASE,
        &BASE.replace("tx = \"out.pcap\"", "tx = \"other.pcap\""),
        15,
        Some("tx"),
        "port `out0`: its `tx` changed",
    );
    // A port's MTU is live.
    let d = diff(
        BASE,
        &BASE.replace("rx = \"in.pcap\"\n", "rx = \"in.pcap\"\nmtu = 9000\n"),
    );
    assert_eq!(d.mtus, vec![("in0".to_string(), 9000)]);
    assert!(!d.is_empty());
    let added = with(
        "\n[[port]]\nname = \"x\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:09\"\n\
         generate = false\n",
    );
    // A memory or af-packet port comes and goes live; a pcap port does not.
    let d = diff(BASE, &added);
    assert_eq!(d.ports_added.len(), 1, "{d:?}");
    assert_eq!(d.ports_added[0].name, "x");
    assert!(!d.is_empty());
    assert_eq!(diff(&added, BASE).ports_removed, vec!["x".to_string()]);
    let pcap = with(
        "\n[[port]]\nname = \"x\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:09\"\n\
         rx = \"x.pcap\"\n",
    );
    one_refusal(
        BASE,
        &pcap,
        B + 6,
        Some("rx"),
        "[[port]] #3 field `rx`: port `x`: is added, and its driver cannot be added while \
         running (accepted then: af-packet, memory, af-xdp (with as many queues as workers \
         or more), tap (with one worker))",
    );
    let e = refused(
        BASE,
        &BASE
            .replace("name = \"in0\"", "name = \"in1\"")
            .replace("port = \"in0\"", "port = \"in1\""),
    );
    assert!(
        e.to_string()
            .contains("port `in0` is removed, and its driver cannot be removed"),
        "{e}"
    );
    let kernel = |driver: &str| {
        format!("[[port]]\nname = \"k\"\ndriver = \"{driver}\"\nmac = \"02:00:00:00:01:01\"\n")
    };
    one_refusal(
        &kernel("af-packet"),
        &kernel("af-xdp"),
        3,
        Some("driver"),
        "port `k`: its `driver` changed",
    );
    one_refusal(
        &kernel("af-xdp"),
        &format!("{}queues = 2\n", kernel("af-xdp")),
        5,
        Some("queues"),
        "its `queues` changed",
    );
    let vhost = |extra: &str| {
        format!(
            "[[port]]\nname = \"vm\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:01:01\"\n\
             socket = \"vm.sock\"\n{extra}"
        )
    };
    one_refusal(
        &vhost(""),
        &vhost("socket-permissions = \"0660\"\n"),
        6,
        Some("socket-permissions"),
        "its `socket-permissions` changed",
    );
    one_refusal(
        &vhost(""),
        &vhost("socket-group = \"root\"\n"),
        6,
        Some("socket-group"),
        "its `socket-group` changed",
    );
}

/// Ports are matched by name: removing the first port moves the others' indices, and their
/// neighbours, cross-connect, addresses and MTUs are still the same.
#[test]
fn ports_are_matched_by_name_not_position() {
    let port = |name: &str, mac: u8, ip: u8| {
        format!(
            "[[port]]\nname = \"{name}\"\ndriver = \"memory\"\nmac = \"02:00:00:00:01:{mac:02x}\"\n\
             generate = false\nip4 = [\"198.18.{ip}.1/24\"]\n\n"
        )
    };
    let rest = "[[xconnect]]\nfrom = \"m1\"\nto = \"m2\"\n\n\
                [[neighbour]]\nip = \"198.18.3.2\"\nmac = \"02:00:00:00:03:02\"\nport = \"m2\"\n";
    let three = format!(
        "{}{}{}{rest}",
        port("m0", 0, 1),
        port("m1", 1, 2),
        port("m2", 2, 3)
    );
    let two = format!("{}{}{rest}", port("m1", 1, 2), port("m2", 2, 3));
    let d = diff(&three, &two);
    assert_eq!(d.ports_removed, vec!["m0".to_string()]);
    assert!(d.ports_added.is_empty() && d.neighbours.is_empty(), "{d:?}");
    assert!(d.addrs.is_empty() && d.mtus.is_empty(), "{d:?}");
    let d = diff(&two, &three);
    assert_eq!(d.ports_added.len(), 1);
    assert!(
        d.ports_removed.is_empty() && d.neighbours.is_empty(),
        "{d:?}"
    );
    // The same port moved in the file changes nothing.
    let moved = format!(
        "{}{}{}{rest}",
        port("m2", 2, 3),
        port("m0", 0, 1),
        port("m1", 1, 2)
    );
    assert!(diff(&three, &moved).is_empty());
    // A changed neighbour is given with its port's index in the new file.
    let d = diff(
        &three,
        &moved.replace("02:00:00:00:03:02", "02:00:00:00:03:09"),
    );
    assert_eq!(d.neighbours.changed.len(), 1, "{d:?}");
    assert_eq!(
        d.neighbours.changed[0].port, 0,
        "m2 is the new file's first port"
    );
}

#[test]
fn bridges_xconnects_and_api_need_a_restart() {
    let bridge = "[[bridge]]\nname = \"br0\"\n\n\
        [[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\n\n\
        [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\nbridge = \"br0\"\n";
    one_refusal(
        bridge,
        &bridge.replacen(
            "bridge = \"br0\"\n",
            "bridge = \"br0\"\naccess-vlan = 7\n",
            1,
        ),
        1,
        None,
        "[[bridge]] #1: bridge 1 changed (its name, ports or settings)",
    );
    let xc = "[[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\n\n\
        [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\n";
    one_refusal(
        xc,
        &format!("{xc}\n[[xconnect]]\nfrom = \"a\"\nto = \"b\"\n"),
        11,
        None,
        "[[xconnect]] #1: xconnect 1 is added",
    );
    let e = refused("", "[api]\ntcp = \"127.0.0.1:8080\"\ntoken-file = \"t\"\n");
    assert_eq!(e.0.len(), 2, "{e}");
    check(
        &e.0[0],
        2,
        Some("tcp"),
        "changed from (unset) to 127.0.0.1:8080",
    );
    check(
        &e.0[1],
        3,
        Some("token-file"),
        "changed from (unset) to \"/base/t\"",
    );
}

#[test]
fn a_flow_bridges_rules_and_groups_change_live_its_other_keys_do_not() {
    let base = "[[bridge]]\nname = \"br0\"\nmode = \"flow\"\nflows = [\"priority=1,actions=output:2\"]\n\n\
        [[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\n\n\
        [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\nbridge = \"br0\"\n";
    let new = base.replace("actions=output:2", "actions=output:1");
    let d = diff(base, &new);
    assert!(!d.is_empty());
    assert_eq!(d.flows.len(), 1);
    assert_eq!(d.flows[0].0, "br0");
    assert_eq!(
        d.flows[0].2[0].actions,
        vec![flow::Action::Output(flow::PortRef::Number(1))]
    );
    let grouped = base.replace(
        "flows = [\"priority=1,actions=output:2\"]",
        "flows = [\"priority=1,actions=group:7\"]\ngroups = [\"group_id=7,type=all,bucket=actions=output:1\"]",
    );
    let d = diff(base, &grouped);
    assert_eq!(d.flows[0].1.len(), 1, "the new groups come along");
    // The cache sizes and the ports' OpenFlow numbers need a restart.
    let e = refused(
        base,
        &base.replace(
            "mode = \"flow\"\n",
            "mode = \"flow\"\nmegaflow-limit = 10\n",
        ),
    );
    assert!(e.to_string().contains("bridge 1 changed"), "{e}");
    assert!(diff(base, base).is_empty());
}

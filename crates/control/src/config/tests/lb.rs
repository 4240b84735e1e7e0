//! `[lb]`: VPP `lb` lines in the config and in a file, every bad line at its FILE:LINE naming
//! the token, a refused batch at the refused line, NAT ports checked, and reloads.

use super::*;
use crate::config::live_diff;
use ::lb::health::{OnDown, ProbeKind, ProbePath};
use std::time::Duration;

const WEB: &str = r##"[lb]
lines = [
  "lb conf ip4-src-address 198.18.0.254 timeout 40",
  "lb vip 198.18.1.10/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 1024",
  "lb as 198.18.1.10/32 protocol tcp port 80 198.18.2.1 198.18.2.2 weight 3",
  "# a comment item",
  "lb set interface nat4 in in0",
]
"##;

#[test]
fn lines_build_the_lb_state() {
    let spec = ok(&with(WEB));
    let lb = spec.lb.expect("[lb] given");
    let vip = lb.state.vips().next().expect("one VIP");
    assert_eq!(vip.spec.new_len, 1024);
    assert_eq!(vip.servers.len(), 2);
    assert_eq!(lb.state.conf().timeouts.tcp, 40);
    assert!(lb.state.nat_inside(false).contains("in0"));
    // Without [lb]: no load balancer at all.
    assert!(ok(BASE).lb.is_none());
    // An empty [lb]: a load balancer with nothing configured yet.
    assert_eq!(
        ok(&with("[lb]\n")).lb.map(|l| l.state.vips().count()),
        Some(0)
    );
}

#[test]
fn every_bad_line_is_reported_at_its_line_naming_the_token() {
    let text = with(
        "[lb]\nlines = [\n  \"lb vip 198.18.1.1/32 port 80 encap gre4\",\n  \
         \"lb vip 198.18.1.1/32 encap l3dsr dscp 99\",\n  \"lb frobnicate\",\n]\n",
    );
    let v = issues(&text);
    assert_eq!(v.len(), 3, "{v:#?}");
    check(&v[0], B + 3, Some("lines"), "lb.lines[0]");
    check(&v[1], B + 4, Some("lines"), "`99`");
    check(&v[2], B + 5, Some("lines"), "`frobnicate`");
    assert!(v[2].to_string().contains("accepted"), "{}", v[2]);
}

#[test]
fn a_refused_batch_names_the_refused_line_and_applies_nothing() {
    let text = with(
        "[lb]\nlines = [\n  \"lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\",\n  \
         \"lb as 198.18.1.9/32 protocol tcp port 80 198.18.2.1\",\n]\n",
    );
    one_error(
        &text,
        B + 4,
        Some("lines"),
        "lb.lines[1]: no VIP 198.18.1.9/32",
    );
    // A GRE VIP needs the source: the line of the VIP is blamed.
    one_error(
        &with("[lb]\nlines = [\"lb vip 198.18.1.1/32 encap gre4\"]\n"),
        B + 2,
        Some("lines"),
        "ip4-src-address",
    );
}

#[test]
fn nat_ports_must_be_ports_of_the_config_and_show_is_refused() {
    one_error(
        &with("[lb]\nlines = [\"lb set interface nat4 in eth9\"]\n"),
        B + 2,
        Some("lines"),
        "`eth9` is not a port of this config; accepted: in0, out0",
    );
    one_error(
        &with("[lb]\nlines = [\"show lb vips\"]\n"),
        B + 2,
        Some("lines"),
        "not configuration",
    );
    one_error(
        &with("[lb]\nlnes = []\n"),
        B + 2,
        None,
        "unknown key `lnes` (did you mean `lines`?)",
    );
}

#[test]
fn file_lines_are_reported_at_file_and_line() {
    let dir = TempDir::new();
    let f = dir.0.join("lb.conf");
    std::fs::write(
        &f,
        "# VIPs\nlb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\n\
         lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 wieght 3\n\
         lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 # trailing comment\n",
    )
    .expect("write");
    let text = with("[lb]\nfile = \"lb.conf\"\n");
    let e = parse_config(&text, FILE, &dir.0).expect_err("bad line");
    let v = e.issues();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].line, 4);
    let shown = v[0].to_string();
    assert!(shown.contains("lb.conf:4: "), "{shown}");
    assert!(shown.contains("`wieght`"), "{shown}");
    // A refused batch from the file names the file's line.
    std::fs::write(
        &f,
        "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
         lb as 198.18.1.1/32 protocol tcp port 80 2001:db8::1\n",
    )
    .expect("write");
    let e = parse_config(&text, FILE, &dir.0).expect_err("family");
    let shown = e.to_string();
    assert!(shown.contains("lb.conf:2: "), "{shown}");
    assert!(shown.contains("IPv4 servers"), "{shown}");
    // Lines and file together: lines first.
    std::fs::write(
        &f,
        "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2\n",
    )
    .expect("write");
    let text = with(
        "[lb]\nlines = [\"lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\"]\n\
         file = \"lb.conf\"\n",
    );
    let spec = parse_config(&text, FILE, &dir.0).expect("valid");
    assert_eq!(spec.lb.map(|l| l.state.slot_capacity()), Some(2));
    // A missing file.
    let text = with("[lb]\nfile = \"nope.conf\"\n");
    let e = parse_config(&text, FILE, &dir.0).expect_err("missing");
    assert!(e.to_string().contains("field `file`"), "{e}");
}

#[test]
fn reload_changes_the_lb_live_and_it_may_come_and_go() {
    use crate::config::LbChange;
    let cfg = |t: &str| Config::parse(t, FILE, Path::new("/base")).expect("valid");
    let old = cfg(&with(WEB));
    let new = cfg(&with(&WEB.replace("weight 3", "weight 5")));
    let d = live_diff(&old, &new).expect("live");
    let Some(LbChange::Set(st)) = d.lb else {
        panic!("lb changed: {:?}", d.lb);
    };
    let v = st.vips().next().expect("VIP");
    let slot = v.servers[&"198.18.2.2".parse().unwrap()];
    assert_eq!(st.slot(slot).weight, 5);
    assert!(live_diff(&old, &old).expect("same").is_empty());
    let added = live_diff(&cfg(BASE), &new).expect("[lb] added live");
    assert!(
        matches!(&added.lb, Some(LbChange::Set(s)) if s.vips().count() == 1),
        "{added:?}"
    );
    let removed = live_diff(&old, &cfg(BASE)).expect("[lb] removed live");
    assert_eq!(removed.lb, Some(LbChange::Remove));
    // Health checks and probe sources start with vecplane: [lb] with them waits for a restart.
    let e = live_diff(&cfg(BASE), &cfg(&health(""))).expect_err("probe sources");
    assert!(
        e.to_string()
            .contains("the health checks or probe sources changed"),
        "{e}"
    );
}

/// `[lb]` with probe sources and three VIPs (L3DSR tcp/80, GRE4 all ports, NAT6 udp/53); 12
/// lines, so a check appended starts at line B + 13.
const LB_HEAD: &str = r##"[lb]
probe-source4 = "198.18.3.1"
probe-source6 = "2001:db8:3::1"
lines = [
  "lb conf ip4-src-address 198.18.0.254",
  "lb vip 198.18.1.10/32 protocol tcp port 80 encap l3dsr dscp 23",
  "lb as 198.18.1.10/32 protocol tcp port 80 198.18.2.1 198.18.2.2",
  "lb vip 198.18.1.11/32 encap gre4",
  "lb as 198.18.1.11/32 198.18.2.1",
  "lb vip 2001:db8:1::10/128 protocol udp port 53 encap nat6 target_port 5353",
  "lb as 2001:db8:1::10/128 protocol udp port 53 2001:db8:2::1",
]
"##;
const H: usize = B + 12;

/// The head and `extra`.
fn health(extra: &str) -> String {
    assert_eq!(LB_HEAD.lines().count(), H - B);
    with(&format!("{LB_HEAD}{extra}"))
}

/// One check of `vip` with `keys` (line H + 2 onwards).
fn one_check(vip: &str, keys: &str) -> String {
    health(&format!("[[lb.health-check]]\nvip = \"{vip}\"\n{keys}"))
}

const WEB_VIP: &str = "198.18.1.10/32 protocol tcp port 80";

#[test]
fn health_checks_are_read_into_the_lb_spec() {
    let spec = ok(&health(
        r#"[[lb.health-check]]
vip = "198.18.1.10/32 protocol tcp port 80"
type = "http"
path = "/healthz"
host = "www.example"
expect = 204
interval-ms = 2000
timeout-ms = 300
rise = 3
fall = 4
on-down = "flush"

[[lb.health-check]]
vip = "198.18.1.11/32"
type = "tcp"
port = 22
via = "direct"

[[lb.health-check]]
vip = "2001:db8:1::10/128 protocol udp port 53"
type = "udp"
payload = "ping"
expect-reply = true
"#,
    ));
    let h = spec.lb.expect("[lb]").health;
    assert_eq!(h.sources.ip4, Some("198.18.3.1".parse().expect("v4")));
    assert_eq!(h.sources.ip6, Some("2001:db8:3::1".parse().expect("v6")));
    assert_eq!(h.checks.len(), 3);
    let web = &h.checks[0];
    assert_eq!(web.vip.to_string(), WEB_VIP);
    assert_eq!(
        web.kind,
        ProbeKind::Http {
            path: "/healthz".to_string(),
            host: Some("www.example".to_string()),
            expect: 204,
            tls: false,
        }
    );
    assert_eq!((web.rise, web.fall, web.on_down), (3, 4, OnDown::Flush));
    assert_eq!(web.interval, Duration::from_secs(2));
    assert_eq!(web.timeout, Duration::from_millis(300));
    assert_eq!(web.path, ProbePath::Encap);
    let gre = &h.checks[1];
    assert_eq!(
        (gre.kind.clone(), gre.port, gre.path),
        (ProbeKind::Tcp, Some(22), ProbePath::Direct)
    );
    assert_eq!((gre.rise, gre.fall, gre.on_down), (2, 3, OnDown::Drain));
    assert_eq!(
        (gre.interval, gre.timeout),
        (Duration::from_secs(1), Duration::from_millis(500))
    );
    assert_eq!(
        h.checks[2].kind,
        ProbeKind::Udp {
            payload: b"ping".to_vec(),
            expect_reply: true
        }
    );
    // Defaults: no check, no sources; a short interval gets a timeout of half of it.
    assert_eq!(
        ok(&with(WEB)).lb.map(|l| l.health),
        Some(Default::default())
    );
    let spec = ok(&one_check(WEB_VIP, "type = \"tcp\"\ninterval-ms = 200\n"));
    let c = &spec.lb.expect("[lb]").health.checks[0];
    assert_eq!(c.timeout, Duration::from_millis(100));
    // ICMP needs no port on an all-ports VIP.
    ok(&one_check("198.18.1.11/32", "type = \"icmp\"\n"));
}

#[test]
fn a_check_must_name_a_vip_of_lb_once() {
    one_error(
        &one_check("198.18.1.99/32 protocol tcp port 80", "type = \"tcp\"\n"),
        H + 2,
        Some("vip"),
        "no VIP `198.18.1.99/32 protocol tcp port 80` in [lb]; accepted: a VIP of [lb]: \
         `198.18.1.10/32 protocol tcp port 80`",
    );
    let e = one_error(
        &one_check("198.18.1.10/32 proto tcp", "type = \"tcp\"\n"),
        H + 2,
        Some("vip"),
        "is not a VIP key (unknown `proto`",
    );
    assert!(
        e.contains("accepted: a VIP of [lb] as `lb vip` writes it"),
        "{e}"
    );
    let text = health(&format!(
        "[[lb.health-check]]\nvip = \"{WEB_VIP}\"\ntype = \"tcp\"\n\n\
         [[lb.health-check]]\nvip = \"{WEB_VIP}\"\ntype = \"http\"\n"
    ));
    let e = one_error(
        &text,
        H + 6,
        Some("vip"),
        "already has a check ([[lb.health-check]] #1)",
    );
    assert!(e.contains("[[lb.health-check]] #2 field `vip`"), "{e}");
    assert!(e.contains("accepted: at most one check per VIP"), "{e}");
    one_error(
        &health("[[lb.health-check]]\ntype = \"tcp\"\n"),
        H + 1,
        Some("vip"),
        "missing required field; accepted: a VIP of [lb]",
    );
}

#[test]
fn a_check_type_and_its_keys_are_checked() {
    one_error(
        &one_check(WEB_VIP, "type = \"grpc\"\n"),
        H + 3,
        Some("type"),
        "`grpc` is not a check type; accepted: tcp, http, https, udp, icmp",
    );
    one_error(
        &one_check(WEB_VIP, ""),
        H + 1,
        Some("type"),
        "accepted: tcp, http, https, udp, icmp",
    );
    let e = one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\npath = \"/\"\n"),
        H + 4,
        Some("path"),
        "`path` does not apply to a tcp check (only to http, https)",
    );
    assert!(
        e.contains("accepted for tcp: vip, type, port, interval-ms"),
        "{e}"
    );
    one_error(
        &one_check("198.18.1.11/32", "type = \"icmp\"\nport = 22\n"),
        H + 4,
        Some("port"),
        "`port` does not apply to a icmp check",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"http\"\nexpect-reply = true\n"),
        H + 4,
        Some("expect-reply"),
        "only to udp",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"http\"\npath = \"healthz\"\n"),
        H + 4,
        Some("path"),
        "accepted: starting with `/`",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"http\"\nhost = \"a b\"\n"),
        H + 4,
        Some("host"),
        "visible ASCII",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"http\"\nexpect = 42\n"),
        H + 4,
        Some("expect"),
        "accepted: 100..=599",
    );
    let long = "x".repeat(1025);
    one_error(
        &one_check(
            "2001:db8:1::10/128 protocol udp port 53",
            &format!("type = \"udp\"\npayload = \"{long}\"\n"),
        ),
        H + 4,
        Some("payload"),
        "1025 bytes is too long; accepted: a text of at most 1024 bytes",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\nintervall-ms = 100\n"),
        H + 4,
        None,
        "unknown key `intervall-ms` (did you mean `interval-ms`?)",
    );
}

#[test]
fn timing_counts_and_choices_are_within_their_limits() {
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\ninterval-ms = 50\n"),
        H + 4,
        Some("interval-ms"),
        "`50` is out of range; accepted: 100..=3600000",
    );
    one_error(
        &one_check(
            WEB_VIP,
            "type = \"tcp\"\ninterval-ms = 1000\ntimeout-ms = 1000\n",
        ),
        H + 5,
        Some("timeout-ms"),
        "1000 ms is not less than the interval (1000 ms); accepted: 10..1000",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\ntimeout-ms = 5\n"),
        H + 4,
        Some("timeout-ms"),
        "accepted: 10..=3600000",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\nrise = 0\n"),
        H + 4,
        Some("rise"),
        "accepted: 1..=100",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\nfall = 101\n"),
        H + 4,
        Some("fall"),
        "accepted: 1..=100",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\non-down = \"kill\"\n"),
        H + 4,
        Some("on-down"),
        "`kill` is refused; accepted: drain, flush",
    );
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\nvia = \"gre\"\n"),
        H + 4,
        Some("via"),
        "accepted: encap, direct",
    );
}

#[test]
fn probes_need_a_port_and_the_vips_protocol() {
    one_error(
        &one_check("198.18.1.11/32", "type = \"tcp\"\n"),
        H + 1,
        Some("port"),
        "required: the VIP `198.18.1.11/32` has all ports; accepted: the port to probe",
    );
    // Through an L3DSR tcp VIP, a UDP probe would not be the VIP's traffic.
    one_error(
        &one_check(WEB_VIP, "type = \"udp\"\n"),
        H + 3,
        Some("type"),
        "a udp probe sent through the VIP `198.18.1.10/32 protocol tcp port 80` (l3dsr \
         encapsulation) must be of its protocol (tcp); accepted: a check of the VIP's \
         protocol, or via = \"direct\"",
    );
    ok(&one_check(WEB_VIP, "type = \"udp\"\nvia = \"direct\"\n"));
    // Through a per-port VIP, the probe goes to the VIP's port.
    one_error(
        &one_check(WEB_VIP, "type = \"tcp\"\nport = 8080\n"),
        H + 4,
        Some("port"),
        "port 8080 is not the VIP's: a probe sent through the VIP `198.18.1.10/32 protocol tcp \
         port 80` (l3dsr encapsulation) goes to its port; accepted: 80 (or no port), or via = \
         \"direct\"",
    );
    ok(&one_check(WEB_VIP, "type = \"tcp\"\nport = 80\n"));
    ok(&one_check(
        WEB_VIP,
        "type = \"tcp\"\nport = 8080\nvia = \"direct\"\n",
    ));
    // A NAT VIP is probed at the server: any protocol.
    ok(&one_check(
        "2001:db8:1::10/128 protocol udp port 53",
        "type = \"tcp\"\n",
    ));
}

#[test]
fn probe_sources_are_port_addresses_of_each_probed_family() {
    let without = |key: &str| {
        LB_HEAD
            .lines()
            .filter(|l| !l.starts_with(key))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let text = with(&format!(
        "{}[[lb.health-check]]\nvip = \"2001:db8:1::10/128 protocol udp port 53\"\ntype = \"udp\"\n",
        without("probe-source6")
    ));
    one_error(
        &text,
        H + 1,
        Some("vip"),
        "its probes to IPv6 addresses (server 2001:db8:2::1: sent to the server's address) need \
         `probe-source6` in [lb]; accepted: probe-source6 = one of the config's port IPv6 \
         addresses (2001:db8:1::1, 2001:db8:3::1)",
    );
    // Through an L3DSR VIP the VIP's family decides.
    let text = with(&format!(
        "{}[[lb.health-check]]\nvip = \"{WEB_VIP}\"\ntype = \"tcp\"\n",
        without("probe-source4")
    ));
    one_error(
        &text,
        H + 1,
        Some("vip"),
        "sent to the VIP 198.18.1.10 through its l3dsr encapsulation) need `probe-source4`",
    );
    // Sources without checks are fine; a source must be a port's address of its family.
    ok(&with(&without("[[nothing")));
    let bad = |v4: &str| with(&LB_HEAD.replace("\"198.18.3.1\"", &format!("\"{v4}\"")));
    one_error(
        &bad("198.18.9.9"),
        B + 2,
        Some("probe-source4"),
        "`198.18.9.9` is not an address of a [[port]] of this config; accepted: one of the \
         config's port IPv4 addresses (198.18.1.1, 198.18.3.1)",
    );
    one_error(
        &bad("2001:db8:3::1"),
        B + 2,
        Some("probe-source4"),
        "is not an IPv4 address",
    );
    one_error(
        &bad("nope"),
        B + 2,
        Some("probe-source4"),
        "is not an IP address",
    );
}

#[test]
fn any_health_error_refuses_the_whole_lb_and_all_are_reported() {
    let text = with("[lb]\nhealth-check = 3\nlines = [\"lb frobnicate\"]\n");
    let v = issues(&text);
    assert_eq!(v.len(), 2, "{v:#?}");
    check(
        &v[0],
        B + 2,
        Some("health-check"),
        "accepted: one `[[lb.health-check]]` table per checked VIP",
    );
    check(&v[1], B + 3, Some("lines"), "`frobnicate`");
    // A refused line and a bad check: both reported, nothing built.
    let text = health(&format!(
        "[[lb.health-check]]\nvip = \"{WEB_VIP}\"\ntype = \"tcp\"\nrise = 0\n"
    ))
    .replace("dscp 23", "dscp 99");
    let v = issues(&text);
    assert_eq!(v.len(), 2, "{v:#?}");
    check(&v[0], B + 6, Some("lines"), "`99`");
    check(&v[1], H + 4, Some("rise"), "1..=100");
}

#[test]
fn reload_refuses_changed_health_checks() {
    let cfg = |t: &str| Config::parse(t, FILE, Path::new("/base")).expect("valid");
    let old = cfg(&one_check(WEB_VIP, "type = \"tcp\"\n"));
    let new = cfg(&one_check(WEB_VIP, "type = \"tcp\"\nrise = 5\n"));
    assert!(live_diff(&old, &old).expect("same").is_empty());
    let e = live_diff(&old, &new).expect_err("health changed");
    assert!(
        e.to_string()
            .contains("the health checks or probe sources changed"),
        "{e}"
    );
}

#[test]
fn an_https_check_takes_the_http_keys() {
    let cfg = Config::parse(
        &one_check(
            WEB_VIP,
            "type = \"https\"\npath = \"/healthz\"\nhost = \"www.example\"\nexpect = 204\n",
        ),
        FILE,
        Path::new("/base"),
    )
    .expect("valid");
    let check = &cfg.spec.lb.expect("lb").health.checks[0];
    assert_eq!(
        check.kind,
        ProbeKind::Http {
            path: "/healthz".to_string(),
            host: Some("www.example".to_string()),
            expect: 204,
            tls: true,
        }
    );
    assert_eq!(check.kind.name(), "https");
}

/// `[lb] memory-limit`: the LB's tables are budgeted against it (Maglev tables plus each
/// worker's flow tables); the line that passes it is refused naming the need, the cap and the
/// key to raise; a bad value names what is accepted.
#[test]
fn memory_limit_refuses_the_line_that_passes_it() {
    let two = "[lb]\nmemory-limit = \"80MiB\"\nlines = [\n  \
               \"lb vip 198.18.1.1/32 encap l3dsr dscp 1 new_len 4194304\",\n  \
               \"lb vip 198.18.1.2/32 encap l3dsr dscp 2 new_len 4194304\",\n]\n";
    let v = issues(&with(two));
    assert_eq!(v.len(), 1, "{v:#?}");
    check(&v[0], B + 5, Some("lines"), "lb.lines[1]");
    let m = v[0].to_string();
    assert!(m.contains("memory limit of 80 MiB"), "{m}");
    assert!(m.contains("raise `memory-limit`"), "{m}");
    // One fits (16 MiB of Maglev + 48 MiB of flow and NAT tables for 1 worker).
    let one = two.replace(
        "  \"lb vip 198.18.1.2/32 encap l3dsr dscp 2 new_len 4194304\",\n",
        "",
    );
    let spec = ok(&with(&one));
    let lb = spec.lb.expect("[lb]");
    assert_eq!(lb.state.memory_budget().limit, 80 << 20);
    assert!(lb.state.memory_use().total() <= 80 << 20);
    // Raised, both fit.
    assert!(ok(&with(&two.replace("80MiB", "1GiB"))).lb.is_some());
    for bad in ["\"lots\"", "\"1MiB\"", "-5", "\"2PiB\""] {
        let v = issues(&with(&format!("[lb]\nmemory-limit = {bad}\n")));
        assert_eq!(v.len(), 1, "{bad}: {v:#?}");
        check(&v[0], B + 2, Some("memory-limit"), "64MiB..=1TiB");
    }
    assert_eq!(
        ok(&with("[lb]\nmemory-limit = 1073741824\n"))
            .lb
            .map(|l| l.state.memory_budget().limit),
        Some(1 << 30)
    );
}

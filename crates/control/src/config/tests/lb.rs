//! `[lb]`: VPP `lb` lines in the config and in a file, every bad line at its FILE:LINE naming
//! the token, a refused batch at the refused line, NAT ports checked, and reloads.

use super::*;
use crate::config::live_diff;

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
fn reload_changes_the_lb_live_but_not_its_presence() {
    let cfg = |t: &str| Config::parse(t, FILE, Path::new("/base")).expect("valid");
    let old = cfg(&with(WEB));
    let new = cfg(&with(&WEB.replace("weight 3", "weight 5")));
    let d = live_diff(&old, &new).expect("live");
    let st = d.lb.expect("lb changed");
    let v = st.vips().next().expect("VIP");
    let slot = v.servers[&"198.18.2.2".parse().unwrap()];
    assert_eq!(st.slot(slot).weight, 5);
    assert!(live_diff(&old, &old).expect("same").is_empty());
    let e = live_diff(&cfg(BASE), &new).expect_err("added");
    assert!(e.to_string().contains("[lb] is added"), "{e}");
    let e = live_diff(&old, &cfg(BASE)).expect_err("removed");
    assert!(e.to_string().contains("[lb] is removed"), "{e}");
}

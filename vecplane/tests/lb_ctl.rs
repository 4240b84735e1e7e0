//! End to end: the load balancer's control side against a running daemon (memory ports, no
//! root): `[lb]` lines and file at start, `vecplane ctl lb ...` (one VPP line), `lb-file`
//! (all or nothing, errors at FILE:LINE), `show lb vips [verbose] [--json]`, `lb which`, and
//! reload replacing the LB state. Addresses from 198.18.0.0/15 only.

mod support;

use support::{stderr, Daemon, TempDir};

const CONFIG: &str = r#"
[dataplane]
buffers = 4096

[[port]]
name = "in0"
driver = "memory"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
frame-size = 64
flows = 16
src-ip = "198.18.1.2"
destinations = ["198.19.0.10"]

[[port]]
name = "out0"
driver = "memory"
mac = "02:00:00:00:02:01"
ip4 = ["198.18.2.1/24"]
generate = false

[lb]
lines = ["lb conf timeout 40",
         "lb vip 198.18.10.1/32 protocol tcp port 80 encap l3dsr dscp 23"]
file = "lb.conf"
"#;

const LB_FILE: &str =
    "# servers\nlb as 198.18.10.1/32 protocol tcp port 80 198.18.2.10 198.18.2.11 weight 2\n";

#[test]
fn lb_through_ctl_config_and_reload() {
    let d = TempDir::new();
    d.write("lb.conf", LB_FILE);
    let cfg = d.write("lb.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();

    // What the config made.
    let v = dm.ctl_json(&["show", "lb", "vips", "verbose"]);
    assert_eq!(
        v["vips"][0]["vip"], "198.18.10.1/32 protocol tcp port 80",
        "{v}"
    );
    assert_eq!(v["vips"][0]["servers"][1]["weight"], 2, "{v}");
    let id = v["vips"][0]["id"].as_u64().expect("id");

    // One VPP line at a time.
    dm.ctl_ok(&[
        "lb",
        "vip",
        "198.18.10.2/32",
        "protocol",
        "udp",
        "port",
        "53",
        "encap",
        "l3dsr",
        "dscp",
        "24",
    ]);
    dm.ctl_ok(&[
        "lb",
        "as",
        "198.18.10.2/32",
        "protocol",
        "udp",
        "port",
        "53",
        "198.18.2.12",
    ]);
    dm.ctl_ok(&["lb", "conf", "timeout", "30"]);
    dm.ctl_ok(&[
        "lb",
        "as",
        "198.18.10.1/32",
        "protocol",
        "tcp",
        "port",
        "80",
        "198.18.2.10",
        "del",
        "flush",
    ]);
    let text = dm.ctl_ok(&["show", "lb", "vips", "verbose"]);
    assert!(
        text.contains("198.18.10.2/32 protocol udp port 53 encap l3dsr dscp 24"),
        "{text}"
    );
    assert!(!text.contains("198.18.2.10 "), "flushed: {text}");
    assert!(text.contains("no-server 0"), "{text}");
    let text = dm.ctl_ok(&["show", "lb"]);
    assert!(text.contains("timeout tcp 30"), "{text}");
    // The default lb conf buckets (1,048,576) as the worker's table rounds it (3 x 2^19).
    assert!(
        text.contains("flow table per worker: 1572864 entries"),
        "{text}"
    );
    assert!(
        text.contains("nat4 replies: translated on every port"),
        "{text}"
    );

    // A bad line: refused, naming the token.
    let o = dm.ctl(&[
        "lb",
        "vip",
        "198.18.10.3/32",
        "encap",
        "l3dsr",
        "dscp",
        "99",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("`99`"), "{}", stderr(&o));

    // lb-file: all or nothing, the error at FILE:LINE.
    let bad = d.write(
        "more.conf",
        "lb vip 198.18.10.4/32 protocol tcp port 443 encap l3dsr dscp 25\n\
         # comment\n\
         lb as 198.18.10.4/32 protocol tcp port 443 198.18.2.20 weigth 3\n",
    );
    let o = dm.ctl(&["lb-file", bad.to_str().expect("path")]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("more.conf:3: ") && e.contains("`weigth`"), "{e}");
    let v = dm.ctl_json(&["show", "lb", "vips"]);
    assert_eq!(
        v["vips"].as_array().map(Vec::len),
        Some(2),
        "nothing applied: {v}"
    );
    let good = d.write(
        "more.conf",
        "lb vip 198.18.10.4/32 protocol tcp port 443 encap l3dsr dscp 25\n\
         lb as 198.18.10.4/32 protocol tcp port 443 198.18.2.20 weight 3\n",
    );
    dm.ctl_ok(&["lb-file", good.to_str().expect("path")]);
    let v = dm.ctl_json(&["show", "lb", "vips"]);
    assert_eq!(v["vips"].as_array().map(Vec::len), Some(3), "{v}");

    // Which server, and why.
    let w = dm.ctl_json(&[
        "lb",
        "which",
        "tcp",
        "198.19.0.7",
        "40000",
        "198.18.10.1",
        "80",
    ]);
    assert_eq!(w["server"], "198.18.2.11", "the only server left: {w}");
    let text = dm.ctl_ok(&[
        "lb",
        "which",
        "tcp",
        "198.19.0.7",
        "40000",
        "198.18.10.1",
        "80",
    ]);
    assert!(text.contains("Maglev entry"), "{text}");

    // Reload: the running LB becomes the file's again (the ctl changes are undone).
    d.write("lb.conf", &LB_FILE.replace("weight 2", "weight 5"));
    let r = dm.ctl_json(&["reload"]);
    assert!(r["policies_changed"].to_string().contains("lb"), "{r}");
    let v = dm.ctl_json(&["show", "lb", "vips", "verbose"]);
    assert_eq!(v["vips"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        v["vips"][0]["id"].as_u64(),
        Some(id),
        "the VIP kept its id: {v}"
    );
    let servers = v["vips"][0]["servers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        servers
            .iter()
            .any(|s| s["address"] == "198.18.2.11" && s["weight"] == 5),
        "{v}"
    );
    assert!(
        servers
            .iter()
            .any(|s| s["address"] == "198.18.2.10" && s["state"] == "active"),
        "re-added by the reload: {v}"
    );
    let text = dm.ctl_ok(&["show", "lb"]);
    assert!(text.contains("timeout tcp 40"), "{text}");
}

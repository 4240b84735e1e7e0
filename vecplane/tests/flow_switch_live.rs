//! The virtual switch live (root; a netlab topology A - R - B with veths, `vecplane run` in R
//! with both ports in a bridge in flow mode): ping and a bounded iperf3 cross it; `vecplane ctl`
//! add-flow, mod-flows, del-flows, add-flows FILE --bundle (a bundle with one bad rule changes
//! nothing and its error names the token), dump-flows (counters grow), dump-megaflows and show
//! flow-cache (text and --json) change and show the path while a bounded ping flood loses
//! nothing; `/metrics` has the vecplane_flow_* families; changing `flows` in the config file and
//! `ctl reload` (then SIGHUP) replaces the rules live; and what a real Open vSwitch's
//! `ovs-ofctl dump-flows` prints, pasted into `vecplane ctl add-flows`, is printed back the same
//! by `vecplane ctl dump-flows`. Without root or a tool each test prints why it is skipped (and
//! fails under CI=true). Addresses: 198.18.0.0/15 only; the namespaces go also on failure.

use netlab::{Addressing, Host, Mode, Topology};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

static SERIAL: Mutex<()> = Mutex::new(());

const TOOLS: &[&str] = &["ip", "ping", "iperf3"];

/// The rules the bridge starts with: a plain two-port switch (ARP and IP alike).
const BASE_FLOWS: &[&str] = &[
    "priority=10,in_port=1,actions=output:2",
    "priority=10,in_port=2,actions=output:1",
];

fn config_text(t: &Topology, driver: &str, flows: &[&str]) -> String {
    let n = t.names();
    let list: Vec<String> = flows.iter().map(|f| format!("  \"{f}\",")).collect();
    format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [[bridge]]\nname = \"br0\"\nmode = \"flow\"\nflows = [\n{}\n]\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"{driver}\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\nofport = 1\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"{driver}\"\ninterface = \"{}\"\n\
         mac = \"02:00:00:00:02:01\"\nbridge = \"br0\"\nofport = 2\n",
        list.join("\n"),
        n.ra,
        n.rb
    )
}

fn start(t: &Topology, driver: &str) -> (netlab::Vecplane, PathBuf) {
    let path = t.path(&format!("flow-switch-{driver}.toml"));
    std::fs::write(&path, config_text(t, driver, BASE_FLOWS)).expect("write config");
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    (vp, path)
}

fn ctl(vp: &netlab::Vecplane, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("ctl")
        .arg("--socket")
        .arg(vp.socket())
        .args(args)
        .output()
        .expect("vecplane ctl runs")
}

fn ctl_ok(vp: &netlab::Vecplane, args: &[&str]) -> String {
    let o = ctl(vp, args);
    assert!(
        o.status.success(),
        "vecplane ctl {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ctl_json(vp: &netlab::Vecplane, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let text = ctl_ok(vp, &all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("ctl {args:?} JSON ({e}): {text}"))
}

/// The bridge's rules as (priority, match, actions) -> n_packets.
fn rule_counters(vp: &netlab::Vecplane) -> Vec<(String, u64)> {
    let v = ctl_json(vp, &["dump-flows", "br0"]);
    v["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                format!(
                    "table={},priority={},{} actions={}",
                    r["table"], r["priority"], r["match"], r["actions"]
                )
                .replace('"', ""),
                r["n_packets"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn rules_only(vp: &netlab::Vecplane) -> Vec<String> {
    rule_counters(vp).into_iter().map(|(r, _)| r).collect()
}

fn packets_of(vp: &netlab::Vecplane, needle: &str) -> u64 {
    rule_counters(vp)
        .into_iter()
        .filter(|(r, _)| r.contains(needle))
        .map(|(_, n)| n)
        .sum()
}

/// Ping B from A: (all answered, ping's output).
fn ping(t: &Topology, count: u32, interval: &str) -> (bool, String) {
    let c = count.to_string();
    let deadline = (f64::from(count) * 0.02 + 6.0).ceil().to_string();
    let target = t.b_ip4().to_string();
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping", "-n", "-q", "-c", &c, "-i", interval, "-W", "1", "-w", &deadline, &target,
            ],
            Duration::from_secs(40),
        )
        .expect("ping runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success() && text.contains(" 0% packet loss"),
        text,
    )
}

/// Whether any of `count` pings gets an answer.
fn ping_gets_through(t: &Topology, count: u32) -> bool {
    let target = t.b_ip4().to_string();
    let c = count.to_string();
    t.exec_timeout(
        Host::A,
        &[
            "ping", "-n", "-q", "-c", &c, "-i", "0.2", "-W", "1", &target,
        ],
        Duration::from_secs(20),
    )
    .map(|o| o.status.success())
    .unwrap_or(false)
}

fn iperf3_tcp(t: &Topology) -> Value {
    let _server = t
        .spawn(
            Host::B,
            &["iperf3", "-s", "-1", "-p", "5301"],
            "iperf3-server",
        )
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(500));
    let target = t.b_ip4().to_string();
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "iperf3",
                "-c",
                &target,
                "-p",
                "5301",
                "-J",
                "-t",
                "1",
                "--connect-timeout",
                "3000",
            ],
            Duration::from_secs(20),
        )
        .expect("iperf3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("iperf3 JSON ({e}): {text}"))
}

/// Wait until `f` holds (the workers publish their cache counters every 20 ms).
fn eventually(what: &str, mut f: impl FnMut() -> Result<(), String>) {
    let mut last = String::new();
    for _ in 0..50 {
        match f() {
            Ok(()) => return,
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: {last}");
}

#[test]
fn flow_bridge_live_rules_change_under_traffic_without_loss() {
    if !testenv::can_run(netlab::missing_prerequisite(TOOLS)) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = Topology::build_with_prefix("vpfs", Mode::Dataplane(Addressing::Bridged))
        .expect("topology");
    let (vp, config) = start(&t, "af-xdp");

    // 1. Ping and TCP across the switch; the rules count them.
    let (ok, text) = ping(&t, 3, "0.2");
    assert!(ok, "ping through the flow bridge: {text}\n{}", vp.log());
    let tcp = iperf3_tcp(&t);
    let bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(bytes > 0, "TCP through the flow bridge: {tcp}");
    println!(
        "TCP through the flow bridge: {:.2} Gbit/s",
        tcp["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0)
            / 1e9
    );
    let before = packets_of(&vp, "in_port=1 ");
    assert!(
        before > 3,
        "in_port=1's rule counted: {:?}",
        rule_counters(&vp)
    );

    // 2. A bounded ping flood (1,000 at 200/s) while the tables change under it: nothing lost.
    let dir = t.path("rules");
    std::fs::create_dir_all(&dir).expect("rules dir");
    let good = dir.join("good.flows");
    std::fs::write(
        &good,
        "# a bundle of three\n\
         priority=25,icmp,in_port=1,actions=output:2\n\
         priority=25,icmp,in_port=2,actions=output:1\n\n\
         priority=5,arp,actions=flood\n",
    )
    .expect("write");
    let bad = dir.join("bad.flows");
    std::fs::write(
        &bad,
        "priority=26,icmp,in_port=1,actions=drop\n\
         priority=26,tcp,tp_dst=80,actions=bogus_action:3\n",
    )
    .expect("write");
    let (g, b) = (good.to_string_lossy(), bad.to_string_lossy());
    let (flood_ok, flood_text, bad_err, unchanged) = std::thread::scope(|s| {
        let flood = s.spawn(|| ping(&t, 1000, "0.005"));
        let pause = || std::thread::sleep(Duration::from_millis(250));
        pause();
        ctl_ok(
            &vp,
            &[
                "add-flow",
                "br0",
                "priority=20,icmp,in_port=1,actions=output:2",
            ],
        );
        pause();
        ctl_ok(
            &vp,
            &[
                "mod-flows",
                "br0",
                "in_port=2,actions=mod_dl_src:02:00:00:00:02:02,output:1",
            ],
        );
        pause();
        ctl_ok(&vp, &["add-flows", "br0", &g, "--bundle"]);
        pause();
        let rules = rules_only(&vp);
        let o = ctl(&vp, &["add-flows", "br0", &b, "--bundle"]);
        assert!(!o.status.success(), "a bundle with a bad rule is refused");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let unchanged = rules == rules_only(&vp);
        pause();
        ctl_ok(&vp, &["del-flows", "br0", "icmp"]);
        pause();
        ctl_ok(&vp, &["del-flows", "br0", "arp", "--strict"]);
        pause();
        ctl_ok(&vp, &["add-flows", "br0", &g]);
        let (ok, text) = flood.join().expect("ping thread");
        (ok, text, err, unchanged)
    });
    assert!(
        flood_ok,
        "the ping flood lost packets while the rules changed: {flood_text}"
    );
    assert!(
        bad_err.contains("bogus_action"),
        "the error names the bad token: {bad_err}"
    );
    assert!(unchanged, "a refused bundle changed the rules");
    // The ping flood was switched by rules that count it.
    let after = packets_of(&vp, "in_port=1 ") + packets_of(&vp, "in_port=1,");
    assert!(after > before, "counters grow: {:?}", rule_counters(&vp));

    // 3. The caches: megaflows in dpctl style, counters in text and JSON, Prometheus.
    let mega = ctl_ok(&vp, &["dump-megaflows", "br0"]);
    assert!(
        mega.lines().any(|l| l.contains("actions:")),
        "dump-megaflows: {mega}"
    );
    println!("megaflows:\n{mega}");
    let text = ctl_ok(&vp, &["show", "flow-cache"]);
    assert!(
        text.contains("bridge br0")
            && text.contains("Megaflow hits")
            && text.contains("exact-match cache:"),
        "{text}"
    );
    eventually("show flow-cache --json counts hits and installs", || {
        let v = ctl_json(&vp, &["show", "flow-cache"]);
        let total = &v["bridges"][0]["total"];
        let hits =
            total["emc_hits"].as_u64().unwrap_or(0) + total["megaflow_hits"].as_u64().unwrap_or(0);
        let installed = total["installed"].as_u64().unwrap_or(0);
        let revalidated = total["revalidated"].as_u64().unwrap_or(0)
            + total["revalidation_deleted"].as_u64().unwrap_or(0)
            + total["flushed"].as_u64().unwrap_or(0);
        if hits > 1000 && installed > 0 && revalidated > 0 {
            Ok(())
        } else {
            Err(format!("{v}"))
        }
    });
    let metrics = control::http(
        &control::Endpoint::Unix(vp.socket().to_path_buf()),
        "GET",
        "/metrics",
        None,
    )
    .expect("GET /metrics");
    assert_eq!(metrics.status, 200);
    let body = String::from_utf8_lossy(&metrics.body).into_owned();
    for family in [
        "vecplane_flow_cache_events",
        "vecplane_flow_megaflows",
        "vecplane_flow_rules",
    ] {
        assert!(body.contains(family), "/metrics lacks {family}");
    }

    // 4. The path changes with the rules: a drop rule stops the pings, deleting it lets them
    // through again.
    ctl_ok(
        &vp,
        &["add-flow", "br0", "priority=30,icmp,in_port=1,actions=drop"],
    );
    assert!(!ping_gets_through(&t, 2), "the drop rule stops the pings");
    assert!(
        packets_of(&vp, "priority=30,icmp") >= 2,
        "the drop rule counts them"
    );
    ctl_ok(
        &vp,
        &["del-flows", "br0", "priority=30,icmp,in_port=1", "--strict"],
    );
    let (ok, text) = ping(&t, 3, "0.2");
    assert!(ok, "pings pass again: {text}");

    // 5. Reload: the config's `flows` replace the rules (ctl reload), and back (SIGHUP).
    let mut reloaded: Vec<&str> = BASE_FLOWS.to_vec();
    reloaded.push("priority=40,icmp,in_port=1,actions=drop");
    std::fs::write(&config, config_text(&t, "af-xdp", &reloaded)).expect("rewrite config");
    ctl_ok(&vp, &["reload"]);
    let rules = rules_only(&vp);
    assert_eq!(rules.len(), 3, "the config's three rules only: {rules:?}");
    assert!(rules.iter().any(|r| r.contains("priority=40")), "{rules:?}");
    assert!(
        !ping_gets_through(&t, 2),
        "the reloaded drop rule stops pings"
    );
    std::fs::write(&config, config_text(&t, "af-xdp", BASE_FLOWS)).expect("rewrite config");
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(vp.pid() as i32, libc::SIGHUP) }, 0);
    eventually("SIGHUP restores the two rules", || {
        let r = rules_only(&vp);
        if r.len() == 2 {
            Ok(())
        } else {
            Err(format!("{r:?}"))
        }
    });
    let (ok, text) = ping(&t, 3, "0.2");
    assert!(ok, "pings pass after SIGHUP: {text}");
    vp.stop().expect("vecplane stops cleanly");
}

/// Rules for Open vSwitch to print: many matches (ports, VLAN, masked MACs, ARP, IPv4/IPv6
/// prefixes, L4 ports with masks, TCP flags, ICMP, TTL, ECN, fragments, tunnel id, metadata)
/// and actions (output, in_port, flood, normal, drop, set_field, dec_ttl, push/pop VLAN,
/// goto_table, resubmit, group), cookies and timeouts.
const OVS_RULES: &str = "\
cookie=0x10,table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:2
table=0,priority=90,udp,in_port=1,nw_src=198.18.1.0/25,udp_dst=0x1000/0xf000,actions=set_field:46->ip_dscp,output:2
table=0,priority=80,ipv6,ipv6_dst=2001:db8:2::/48,actions=dec_ttl,output:2
table=0,priority=70,dl_vlan=100,dl_vlan_pcp=3,actions=strip_vlan,output:2
table=0,priority=60,arp,arp_tpa=198.18.1.1,arp_op=1,actions=flood
table=0,priority=50,dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00,actions=normal
table=0,priority=40,icmp,icmp_type=8,icmp_code=0,actions=in_port
table=0,priority=30,ip,nw_ttl=1,actions=drop
table=0,priority=20,tcp,tcp_flags=+syn-ack,actions=goto_table:1
table=1,priority=10,tcp,actions=mod_tp_dst:8080,output:2
table=0,priority=15,ip,nw_frag=first,actions=output:1
cookie=0x1234,table=0,priority=12,in_port=2,dl_type=0x88cc,actions=drop
table=0,priority=11,ip,nw_ecn=1,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:2
table=0,priority=9,udp6,ipv6_src=2001:db8:1::/64,udp_src=53,actions=resubmit(,2)
table=2,priority=5,actions=output:1
table=0,priority=8,tun_id=0x64,actions=output:2
table=0,priority=7,metadata=0x5/0xff,actions=mod_dl_dst:02:00:00:00:02:02,output:2
table=0,priority=6,ip,nw_dst=198.18.9.9,idle_timeout=300,hard_timeout=600,actions=output:2
table=0,priority=5,ip,nw_dst=198.18.9.10,actions=group:1
table=0,priority=4,sctp,sctp_dst=9,actions=output:2
table=0,priority=3,ipv6,ipv6_src=2001:db8:1::1,ipv6_dst=2001:db8:2::/ffff:ffff:0:0:ffff::,actions=output:2
";

const OVS_GROUP: &str = "group_id=1,type=all,bucket=output:1,bucket=output:2";

/// A dump-flows line without what changes with time and traffic (duration, counters, ages),
/// and without `table=0`/`cookie=0x0`, which one printer may leave out.
fn without_counters(line: &str) -> String {
    let (head, actions) = line.split_once("actions=").unwrap_or((line, ""));
    let fields: Vec<&str> = head
        .split([',', ' '])
        .map(str::trim)
        .filter(|f| {
            !f.is_empty()
                && ![
                    "duration=",
                    "n_packets=",
                    "n_bytes=",
                    "idle_age=",
                    "hard_age=",
                ]
                .iter()
                .any(|p| f.starts_with(p))
                && *f != "table=0"
                && *f != "cookie=0x0"
        })
        .collect();
    format!("{} actions={actions}", fields.join(","))
}

#[test]
fn ovs_ofctl_dump_flows_pasted_into_ctl_add_flows_prints_back_the_same() {
    let missing = netlab::missing_prerequisite(TOOLS).or_else(netlab::ovs::missing_prerequisite);
    if !testenv::can_run(missing) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Open vSwitch prints the rules.
    let ovs = netlab::Ovs::start(&[1, 2]).expect("Open vSwitch starts");
    ovs.add_groups(OVS_GROUP).expect("ovs-ofctl add-groups");
    ovs.add_flows(OVS_RULES).expect("ovs-ofctl add-flows");
    let dumped = ovs.dump_flows_with_stats().expect("ovs-ofctl dump-flows");
    ovs.stop().expect("Open vSwitch stops");
    assert_eq!(dumped.len(), OVS_RULES.lines().count(), "{dumped:#?}");
    assert!(
        dumped.iter().all(|l| l.contains("n_packets=")),
        "{dumped:#?}"
    );
    println!("ovs-ofctl dump-flows:\n{}", dumped.join("\n"));
    // vecplane takes the text as it is.
    let t = Topology::build_with_prefix("vpfo", Mode::Dataplane(Addressing::Bridged))
        .expect("topology");
    let (vp, _) = start(&t, "af-packet");
    ctl_ok(&vp, &["del-flows", "br0"]);
    ctl_ok(&vp, &["add-group", "br0", OVS_GROUP]);
    let file = t.path("ovs-dump.flows");
    std::fs::write(&file, dumped.join("\n") + "\n").expect("write");
    ctl_ok(
        &vp,
        &["add-flows", "br0", &file.to_string_lossy(), "--bundle"],
    );
    let printed = ctl_ok(&vp, &["dump-flows", "br0"]);
    let mut want: Vec<String> = dumped.iter().map(|l| without_counters(l)).collect();
    let mut got: Vec<String> = printed.lines().map(without_counters).collect();
    want.sort();
    got.sort();
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "vecplane ctl dump-flows differs from ovs-ofctl dump-flows\n\
         only in Open vSwitch's: {missing:#?}\nonly in vecplane's: {extra:#?}\n\
         --- ovs-ofctl dump-flows\n{}\n--- vecplane ctl dump-flows\n{printed}",
        dumped.join("\n")
    );
    // A rule only OpenFlow 1.0 takes (ovs-ofctl -O OpenFlow10): refused as 1.3, naming the
    // action, and added with `ctl -O OpenFlow10`.
    let only_of10 = "priority=7,ip,actions=mod_tp_dst:80,output:2";
    let o = ctl(&vp, &["add-flow", "br0", only_of10]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("mod_tp_dst:80"),
        "{err}"
    );
    ctl_ok(&vp, &["-O", "OpenFlow10", "add-flow", "br0", only_of10]);
    let printed = ctl_ok(&vp, &["dump-flows", "br0"]);
    assert!(
        printed.contains("priority=7,ip actions=mod_tp_dst:80,output:2"),
        "{printed}"
    );
    let o = ctl(&vp, &["-O", "OpenFlow9", "add-flow", "br0", only_of10]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("accepted: OpenFlow10"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    vp.stop().expect("vecplane stops cleanly");
}

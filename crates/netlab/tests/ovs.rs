//! netlab's private Open vSwitch for real (needs root and `openvswitch-switch`; each test prints
//! `skipped: <why>` and returns otherwise, and fails under CI=true): it starts, takes rules and
//! groups, traces packets with the datapath ports mapped back to OpenFlow ports, and leaves no
//! process, namespace, link or directory behind after a stop, a drop or a panic. It also measures
//! what one `ofproto/trace` costs over the kept control session and through `ovs-appctl`.

use netlab::ovs::{self, Ovs};
use std::path::PathBuf;
use std::time::Instant;

macro_rules! require_ovs {
    () => {
        if let Some(why) = ovs::missing_prerequisite() {
            testenv::skip(&why);
            return;
        }
    };
}

/// What one running Open vSwitch owns, to check that all of it is gone afterwards.
struct Owned {
    ns: String,
    dir: PathBuf,
    pids: Vec<u32>,
}

fn owned(o: &Ovs) -> Owned {
    Owned {
        ns: o.namespace().to_string(),
        dir: o.dir().to_path_buf(),
        pids: o.pids(),
    }
}

fn host_links() -> String {
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_gone(w: &Owned) {
    assert!(!netlab::namespace_exists(&w.ns), "namespace {} left", w.ns);
    assert!(!w.dir.exists(), "{} left", w.dir.display());
    for pid in &w.pids {
        // A reaped child has no /proc entry (its id could only be reused by a new process,
        // which would not be ours to worry about; check the command line to be sure).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(&w.dir.display().to_string()),
            "process {pid} still running: {cmdline}"
        );
    }
}

#[test]
fn rules_groups_and_traces_then_nothing_is_left() {
    require_ovs!();
    let before = host_links();
    let o = Ovs::start(&[1, 2, 7]).expect("Open vSwitch starts");
    let w = owned(&o);
    assert_eq!(w.pids.len(), 2);
    // The bridge's tap devices are in the private namespace, not on the host.
    assert_eq!(host_links(), before, "a link appeared on the host");
    let of: Vec<u16> = o.dp_ports().values().copied().collect();
    for p in [1, 2, 7, ovs::OFPP_LOCAL] {
        assert!(of.contains(&p), "port {p} missing from {:?}", o.dp_ports());
    }
    // fail_mode=secure: no rule at all, and a miss drops.
    assert_eq!(o.dump_flows().expect("dump"), Vec::<String>::new());
    let t = o
        .trace("in_port=1,tcp,nw_dst=198.18.2.7,tcp_dst=80")
        .expect("trace");
    assert_eq!(t.datapath_actions, "drop");

    o.add_groups(
        "group_id=1,type=select,selection_method=hash,fields(ip_src,ip_dst),bucket=output:2,bucket=output:7\n\
         group_id=2,type=all,bucket=output:2,bucket=mod_vlan_vid:5,output:7\n",
    )
    .expect("add groups");
    o.add_flows(
        "# comment\n\
         table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:7\n\
         table=0,priority=90,udp,actions=group:1\n\
         table=0,priority=80,ip,nw_src=198.18.9.0/24,actions=dec_ttl,mod_dl_src:02:00:00:00:00:09,group:2\n\
         table=0,priority=70,ip,actions=goto_table:3\n\
         table=3,priority=5,ip,nw_dst=198.18.3.0/24,actions=output:1\n",
    )
    .expect("add flows");
    let flows = o.dump_flows().expect("dump");
    assert_eq!(flows.len(), 5, "{flows:?}");
    assert!(
        flows
            .iter()
            .any(|f| f.contains("priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80")),
        "{flows:?}"
    );
    let groups = o.dump_groups().expect("dump groups");
    assert!(
        groups
            .iter()
            .any(|g| g.contains("selection_method=hash,fields(ip_src,ip_dst)")),
        "{groups:?}"
    );

    let t = o
        .trace("in_port=1,tcp,nw_src=198.18.1.2,nw_dst=198.18.2.7,tcp_src=1234,tcp_dst=80")
        .expect("trace");
    assert_eq!(o.openflow_actions(&t.datapath_actions), "7");
    assert_eq!(
        t.megaflow,
        "recirc_id=0,eth,tcp,in_port=1,nw_dst=198.18.2.0/24,nw_frag=no,tp_dst=80"
    );
    let t = o
        .trace("in_port=2,tcp,nw_src=198.18.9.2,nw_dst=198.18.5.7,nw_ttl=64,tcp_dst=81")
        .expect("trace");
    assert_eq!(
        o.openflow_actions(&t.datapath_actions),
        "set(eth(src=02:00:00:00:00:09)),set(ipv4(ttl=63)),push_vlan(vid=5,pcp=0),7",
        "{}",
        t.text
    );
    let t = o
        .trace("in_port=2,icmp,nw_src=198.18.1.1,nw_dst=198.18.3.9")
        .expect("trace");
    assert_eq!(o.openflow_actions(&t.datapath_actions), "1", "{}", t.text);
    // A select group with hash fields picks the same bucket for the same addresses.
    let a = o
        .trace("in_port=1,udp,nw_src=198.18.1.2,nw_dst=198.18.2.7,udp_dst=53")
        .expect("trace");
    let b = o
        .trace("in_port=1,udp,nw_src=198.18.1.2,nw_dst=198.18.2.7,udp_dst=54")
        .expect("trace");
    assert_eq!(a.datapath_actions, b.datapath_actions);
    assert!(!a.datapath_actions.contains("recirc"), "{}", a.text);

    // A bad rule names the problem. (OVS itself ignores `tp_dst` without `tcp`/`udp`; an
    // impossible prefix it refuses.)
    let e = o
        .add_flows("priority=1,ip,nw_dst=198.18.0.0/33,actions=drop\n")
        .expect_err("bad rule");
    assert!(format!("{e:#}").contains("198.18.0.0/33"), "{e:#}");
    let e = o.trace("in_port=1,bogus=3").expect_err("bad flow");
    assert!(format!("{e:#}").contains("bogus"), "{e:#}");

    o.del_flows().expect("del");
    assert_eq!(o.dump_flows().expect("dump"), Vec::<String>::new());
    assert_eq!(o.dump_groups().expect("dump groups"), Vec::<String>::new());
    o.stop().expect("stop");
    assert_gone(&w);
    assert_eq!(host_links(), before, "a link was left on the host");
}

#[test]
fn drop_and_panic_delete_everything() {
    require_ovs!();
    let o = Ovs::start(&[3]).expect("Open vSwitch starts");
    let w = owned(&o);
    drop(o);
    assert_gone(&w);

    let (tx, rx) = std::sync::mpsc::channel();
    let r = std::panic::catch_unwind(move || {
        let o = Ovs::start(&[1, 2]).expect("Open vSwitch starts");
        tx.send(owned(&o)).expect("send");
        panic!("on purpose, with Open vSwitch running");
    });
    assert!(r.is_err());
    assert_gone(&rx.recv().expect("owned"));
}

#[test]
fn two_switches_run_side_by_side() {
    require_ovs!();
    let a = Ovs::start(&[1, 2]).expect("first");
    let b = Ovs::start(&[1, 2]).expect("second");
    assert_ne!(a.dir(), b.dir());
    assert_ne!(a.namespace(), b.namespace());
    a.add_flows("priority=1,in_port=1,actions=output:2\n")
        .expect("flows");
    let ta = a.trace("in_port=1").expect("trace");
    let tb = b.trace("in_port=1").expect("trace");
    assert_eq!(a.openflow_actions(&ta.datapath_actions), "2");
    assert_eq!(tb.datapath_actions, "drop");
}

#[test]
fn bad_port_numbers_are_refused() {
    require_ovs!();
    for bad in [&[0u16][..], &[1, 1], &[65534]] {
        let e = Ovs::start(bad).expect_err("refused");
        assert!(format!("{e:#}").contains("accepted"), "{e:#}");
    }
}

/// Prints what one trace costs; the oracle tests budget on it.
#[test]
fn trace_cost() {
    require_ovs!();
    let o = Ovs::start(&[1, 2]).expect("Open vSwitch starts");
    o.add_flows("priority=10,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:2\n")
        .expect("flows");
    let flow = "in_port=1,tcp,nw_src=198.18.1.2,nw_dst=198.18.2.7,tcp_src=1234,tcp_dst=80";
    let n = 500;
    let t0 = Instant::now();
    for _ in 0..n {
        o.trace(flow).expect("trace");
    }
    let session = t0.elapsed() / n;
    let m = 50;
    let t0 = Instant::now();
    for _ in 0..m {
        o.appctl_process(&["ofproto/trace", ovs::BRIDGE, flow])
            .expect("ovs-appctl");
    }
    let process = t0.elapsed() / m;
    println!(
        "ofproto/trace: {:.0} us per trace over the kept unixctl session, {:.0} us per ovs-appctl process",
        session.as_secs_f64() * 1e6,
        process.as_secs_f64() * 1e6
    );
}

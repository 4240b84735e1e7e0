//! Tests of the LB control: all-or-nothing apply and publication, port names, counter sums with
//! baselines for reused ids, collection of removed servers, and the reload diff.

use super::*;
use ::lb::cli::parse_lines;
use ::lb::tuple::FiveTuple;

fn cmds(text: &str) -> Vec<LbCommand> {
    parse_lines(text).expect("valid lines")
}

fn control(workers: usize) -> LbControl {
    let (domain, _epochs) = Domain::new(workers);
    LbControl::new(LbState::new(), vec!["in0".into(), "out0".into()], &domain)
}

const WEB: &str = "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
                   lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2 weight 3\n";

fn tuple() -> FiveTuple {
    FiveTuple::new(
        "198.19.0.7".parse().unwrap(),
        "198.18.1.1".parse().unwrap(),
        6,
        40000,
        80,
    )
}

#[test]
fn apply_publishes_what_readers_see_and_refuses_all_or_nothing() {
    let c = control(2);
    let r = c.reader(0);
    assert!(r.get().vip_for(&tuple()).is_none());
    let v = c.apply(&cmds(WEB)).expect("applied");
    assert_eq!(v, 1);
    let id = r.get().vip_for(&tuple()).expect("the VIP is published");
    assert!(r.get().choose(id, 7).is_some());
    // A batch with a bad second command changes nothing.
    let bad = cmds(
        "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.9\n\
                    lb as 198.18.9.9/32 198.18.2.1\n",
    );
    let e = c.apply(&bad).expect_err("refused");
    assert_eq!(e.index(), 1);
    assert!(e.to_string().contains("198.18.9.9"), "{e}");
    assert_eq!(c.version(), 1);
    assert_eq!(c.state().vips().next().map(|v| v.servers.len()), Some(2));
    // Nothing changed: same version, nothing published.
    assert_eq!(c.apply(&cmds("show lb")).expect("no-op"), 1);
}

#[test]
fn nat_inside_ports_must_exist_and_are_flagged() {
    let c = control(1);
    let e = c
        .apply(&cmds("lb set interface nat4 in nope"))
        .expect_err("unknown port");
    assert!(
        matches!(&e, LbApplyError::UnknownPort { name, .. } if name == "nope"),
        "{e}"
    );
    assert!(e.to_string().contains("accepted: in0, out0"), "{e}");
    c.apply(&cmds("lb set interface nat6 in out0")).expect("ok");
    let n = c.nat_inside();
    assert!(n.is_inside(1, true));
    assert!(!n.is_inside(1, false));
    assert!(!n.is_inside(0, true));
    assert!(!n.is_inside(9, true));
    c.apply(&cmds("lb set interface nat6 in out0 del"))
        .expect("ok");
    assert!(!n.is_inside(1, true));
}

#[test]
fn counters_sum_workers_and_restart_when_an_id_is_reused() {
    let c = control(2);
    c.apply(&cmds(WEB)).expect("applied");
    let st = c.state();
    let v = st.vips().next().expect("one VIP");
    let id = v.id;
    let slot = v.servers[&"198.18.2.1".parse::<IpAddr>().unwrap()];
    for w in 0..2 {
        let k = c.counters(w).expect("worker");
        k.vip(id).expect("id").packets.add(10 + w as u64);
        k.vip(id).expect("id").live_flows.set(3);
        k.slot(slot).expect("slot").bytes.add(100);
    }
    assert!(c.counters(2).is_none());
    let t = c.vip_totals(id);
    assert_eq!((t.packets, t.live_flows), (21, 6));
    assert_eq!(c.slot_totals(slot).bytes, 200);
    // Delete the VIP and make another: it gets the same id, and counts from zero.
    c.apply(&cmds(
        "lb vip 198.18.1.1/32 protocol tcp port 80 del\n\
         lb vip 198.18.1.2/32 protocol tcp port 80 encap l3dsr dscp 24\n\
         lb as 198.18.1.2/32 protocol tcp port 80 198.18.2.7\n",
    ))
    .expect("applied");
    let st = c.state();
    let v = st.vips().next().expect("one VIP");
    assert_eq!(v.id, id, "the freed id is reused");
    assert_eq!(v.servers[&"198.18.2.7".parse::<IpAddr>().unwrap()], slot);
    let t = c.vip_totals(id);
    assert_eq!(t.packets, 0);
    assert_eq!(t.live_flows, 6, "gauges are not baselined");
    assert_eq!(c.slot_totals(slot).bytes, 0);
    c.counters(0)
        .expect("w0")
        .vip(id)
        .expect("id")
        .packets
        .add(5);
    assert_eq!(c.vip_totals(id).packets, 5);
}

#[test]
fn tick_frees_removed_servers_once_their_flows_are_over() {
    let c = control(1);
    c.apply(&cmds(&format!("lb conf timeout 2\n{WEB}")))
        .expect("applied");
    let st = c.state();
    let addr: IpAddr = "198.18.2.1".parse().unwrap();
    let slot = st.vips().next().expect("VIP").servers[&addr];
    c.apply(&cmds(
        "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 del",
    ))
    .expect("removed");
    let k = c.counters(0).expect("w0");
    k.slot(slot).expect("slot").live_flows.set(1);
    // First sight: the removal time is remembered (a new version of the state).
    assert!(c.tick(100).is_some());
    assert_eq!(c.tick(100), None, "not again within the second");
    let wait = 2 + ::lb::model::COLLECT_GRACE;
    assert_eq!(c.tick(100 + wait), None, "a live flow keeps it");
    k.slot(slot).expect("slot").live_flows.set(0);
    let v = c.tick(101 + wait).expect("freed");
    assert_eq!(v, c.version());
    assert_eq!(c.state().slot(slot).state, AsState::Free);
    assert!(!c.with_tables(|t| t.flow_still_valid(slot, 0)));
}

#[test]
fn replace_turns_one_state_into_another_without_touching_what_stays() {
    let c = control(1);
    c.apply(&cmds(&format!(
        "{WEB}lb vip 198.18.1.3/32 protocol udp port 53 encap l3dsr dscp 5\n\
         lb as 198.18.1.3/32 protocol udp port 53 198.18.2.5\n\
         lb set interface nat4 in in0\n"
    )))
    .expect("applied");
    let before = c.state();
    let web = before.vips().next().expect("web").id;
    let kept = before.vips().next().expect("web").servers[&"198.18.2.2".parse::<IpAddr>().unwrap()];
    let target = LbState::new()
        .apply(&cmds(
            "lb conf timeout 30\n\
             lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.2 weight 3\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.3 weight 0\n\
             lb set interface nat4 in out0\n",
        ))
        .expect("target");
    let diff = diff_commands(&before, &target);
    assert!(
        diff.iter()
            .any(|d| matches!(d, LbCommand::DelAs { flush: false, .. })),
        "{diff:?}"
    );
    c.replace(&target).expect("replaced");
    let after = c.state();
    assert_eq!(after.conf().timeouts.tcp, 30);
    assert_eq!(after.vips().count(), 1);
    let v = after
        .vip_by_key(&target.vips().next().expect("t").spec.key)
        .expect("web");
    assert_eq!(v.id, web, "a VIP that stays keeps its id");
    assert_eq!(
        v.servers[&"198.18.2.2".parse::<IpAddr>().unwrap()],
        kept,
        "a server that stays keeps its slot"
    );
    let gone = v.servers[&"198.18.2.1".parse::<IpAddr>().unwrap()];
    assert_eq!(
        after.slot(gone).state,
        AsState::Removed,
        "no flush on reload"
    );
    assert_eq!(after.nat_inside(false).len(), 1);
    assert!(c.nat_inside().is_inside(1, false));
    // Again: nothing to do.
    assert!(diff_commands(&after, &target).is_empty());
    let v1 = c.version();
    assert_eq!(c.replace(&target).expect("same"), v1);
}

#[test]
fn replace_keeps_health_marks_and_never_marks_anything_down() {
    let c = control(1);
    c.apply(&cmds(WEB)).expect("applied");
    let key = c.state().vips().next().expect("web").spec.key;
    let (a1, a2): (IpAddr, IpAddr) = ("198.18.2.1".parse().unwrap(), "198.18.2.2".parse().unwrap());
    c.apply(&[LbCommand::SetHealth {
        vip: key,
        servers: vec![a2],
        down: true,
        flush: false,
    }])
    .expect("marked down");
    let slot2 = c.state().vips().next().expect("web").servers[&a2];
    let slot1 = c.state().vips().next().expect("web").servers[&a1];
    // The same configuration: nothing to do, .2 stays down.
    let same = LbState::new().apply(&cmds(WEB)).expect("same");
    assert!(diff_commands(&c.state(), &same).is_empty());
    let v = c.version();
    assert_eq!(c.replace(&same).expect("same"), v);
    assert!(c.state().slot(slot2).health_down);
    // A new weight for the down server (and a new server): its configured weight changes, it
    // stays out of the Maglev table; the healthy server is not marked down.
    let target = LbState::new()
        .apply(&cmds(
            "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\n\
             lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2 weight 5 198.18.2.4\n",
        ))
        .expect("target");
    let plan = c.plan_replace(&target).expect("planned");
    assert!(
        !plan
            .iter()
            .any(|p| matches!(p, LbCommand::SetHealth { .. })),
        "{plan:?}"
    );
    c.replace(&target).expect("replaced");
    let st = c.state();
    let s2 = st.slot(slot2);
    assert_eq!(
        (s2.weight, s2.health_down, s2.state),
        (5, true, AsState::Draining)
    );
    assert!(!st.slot(slot1).health_down);
    c.with_tables(|t| {
        let id = st.vips().next().expect("web").id;
        let m = t.maglev(id).expect("table");
        assert!(!m.entries().contains(&slot2.0), "the down server stays out");
        assert!(m.entries().contains(&slot1.0));
        assert_eq!(t.as_entry(slot2).weight, 0);
        assert_eq!(t.as_entry(slot2).configured_weight, 5);
    });
    // Marked up: the weight from the reload returns.
    c.apply(&[LbCommand::SetHealth {
        vip: key,
        servers: vec![a2],
        down: false,
        flush: false,
    }])
    .expect("marked up");
    assert_eq!(c.with_tables(|t| t.as_entry(slot2).weight), 5);
    assert!(diff_commands(&c.state(), &target).is_empty());
}

/// A reload carries the config's memory cap: a raised `[lb] memory-limit` admits what the old
/// cap refused (the cap goes first in the diff), and the running LB then holds the new cap.
#[test]
fn a_reload_brings_the_new_memory_limit_first() {
    let budget = |limit| ::lb::model::MemoryBudget { limit, workers: 1 };
    let (domain, _epochs) = Domain::new(0);
    let start = LbState::new().with_memory_budget(budget(80 << 20));
    let c = LbControl::new(start, vec!["in0".into()], &domain);
    let two = "lb vip 198.18.1.1/32 encap l3dsr dscp 1 new_len 4194304\n\
               lb vip 198.18.1.2/32 encap l3dsr dscp 2 new_len 4194304\n";
    let e = c.apply(&cmds(two)).unwrap_err();
    assert!(e.reason().contains("memory-limit"), "{e}");
    assert_eq!(c.state().vips().count(), 0, "nothing applied");
    let target = LbState::new()
        .with_memory_budget(budget(1 << 30))
        .apply(&cmds(two))
        .expect("fits the raised cap");
    let plan = c.plan_replace(&target).expect("planned");
    assert!(matches!(plan[0], LbCommand::SetMemoryBudget(_)), "{plan:?}");
    c.replace(&target).expect("reloaded");
    assert_eq!(c.state().vips().count(), 2);
    assert_eq!(c.state().memory_budget().limit, 1 << 30);
}

/// A control routing its VIP prefixes in tables with one port, in0 = 198.18.0.1/24.
fn routed() -> (LbControl, Arc<Mutex<crate::routing::Routing>>) {
    let spec = crate::DataplaneSpec {
        ports: vec![crate::spec::PortSpec {
            name: "in0".into(),
            mac: [2, 0, 0, 0, 0, 1],
            mtu: 1500,
            ip4: vec![("198.18.0.1".parse().unwrap(), 24)],
            ip6: vec![],
            driver: crate::spec::PortDriver::Pcap { rx: None, tx: None },
        }],
        ..crate::DataplaneSpec::default()
    };
    let routing = Arc::new(Mutex::new(
        crate::routing::Routing::without_workers(&spec).expect("routing"),
    ));
    let c = LbControl::new(LbState::new(), vec!["in0".into()], &Domain::new(1).0)
        .with_routing(routing.clone())
        .expect("routed");
    (c, routing)
}

#[test]
fn vip_prefixes_are_routed_to_lb_as_vips_come_and_go() {
    let (c, routing) = routed();
    let has = |p: &str| {
        crate::build::lock(&routing)
            .node_route(p.parse().unwrap(), 32)
            .is_some()
    };
    c.apply(&cmds(WEB)).expect("applied");
    assert!(has("198.18.1.1"));
    // A second VIP on the same address: one route; it stays while either VIP does.
    c.apply(&cmds(
        "lb vip 198.18.1.1/32 protocol udp port 53 encap l3dsr dscp 24\n",
    ))
    .expect("second");
    assert_eq!(crate::build::lock(&routing).node_route_counts(), (1, 0));
    c.apply(&cmds("lb vip 198.18.1.1/32 protocol udp port 53 del\n"))
        .expect("deleted");
    assert!(has("198.18.1.1"));
    // A VIP on an own address is refused, naming its command; nothing is applied.
    let version = c.version();
    let e = c
        .apply(&cmds(
            "lb vip 198.18.7.7/32 encap l3dsr dscp 2\nlb vip 198.18.0.1/32 encap l3dsr dscp 1\n",
        ))
        .expect_err("own address");
    assert!(matches!(e, LbApplyError::Route { index: 1, .. }), "{e}");
    assert!(e.reason().contains("address of vecplane itself"), "{e}");
    assert_eq!(c.version(), version);
    assert!(!has("198.18.7.7"));
    // The last VIP of the prefix goes: so does its route.
    c.apply(&cmds(
        "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2 del flush\n\
         lb vip 198.18.1.1/32 protocol tcp port 80 del\n",
    ))
    .expect("deleted");
    assert!(!has("198.18.1.1"));
}

#[test]
fn flow_tables_come_with_the_first_vip_and_only_for_built_workers() {
    let (c, _routing) = routed();
    assert_eq!(c.flow_table_entries(), 0);
    c.apply(&cmds(WEB)).expect("applied");
    assert_eq!(
        c.flow_table_entries(),
        0,
        "no worker was built: nothing allocated"
    );
    let (c, _routing) = routed();
    c.apply(&cmds("lb conf buckets 4096\n")).expect("conf");
    let slot = c.table_slot(0).expect("slot").expect("worker 0");
    assert_eq!(c.flow_table_entries(), 0, "no VIP yet: nothing allocated");
    assert!(format!("{slot:?}").contains("None"), "{slot:?}");
    c.apply(&cmds(WEB)).expect("applied");
    assert_eq!(
        c.flow_table_entries(),
        6144,
        "4096 entries: 2048 buckets x 3"
    );
    assert!(format!("{slot:?}").contains("entries: 6144"), "{slot:?}");
    assert!(c.table_slot(9).expect("no such worker").is_none());
}

#[test]
fn nat_vips_steer_their_inside_ports_and_only_their_family() {
    let c = control(1);
    let s = c.steer();
    assert!(!s.any(false) && !s.any(true));
    c.apply(&cmds(
        "lb vip 198.18.1.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n",
    ))
    .expect("nat4 VIP");
    assert!(
        s.steers(0, false) && s.steers(1, false),
        "no inside port: every port"
    );
    assert!(!s.any(true), "no NAT6 VIP");
    c.apply(&cmds("lb set interface nat4 in out0\n"))
        .expect("inside port");
    assert!(s.steers(1, false) && !s.steers(0, false));
    c.apply(&cmds("lb vip 198.18.1.4/32 protocol tcp port 80 del\n"))
        .expect("deleted");
    assert!(!s.any(false), "no NAT VIP: nothing steered");
}

/// A port added while running is one `lb set interface` names, and its replies are steered
/// like the others'; once removed, its id is nobody's.
#[test]
fn ports_added_at_run_time_are_named_steered_and_forgotten() {
    let c = control(1);
    let s = c.steer();
    let e = c
        .apply(&cmds("lb set interface nat4 in late0"))
        .expect_err("not yet a port");
    assert!(e.to_string().contains("accepted: in0, out0"), "{e}");
    c.apply(&cmds(
        "lb vip 198.18.1.4/32 protocol tcp port 80 encap nat4 type clusterip target_port 8080\n",
    ))
    .expect("nat4 VIP");
    c.set_port(5, Some("late0"));
    assert!(
        s.steers(5, false),
        "no inside port named: every port, the new one too"
    );
    c.apply(&cmds("lb set interface nat4 in late0"))
        .expect("the new port");
    assert!(c.nat_inside().is_inside(5, false));
    assert!(s.steers(5, false) && !s.steers(0, false));
    c.apply(&cmds("lb set interface nat4 in late0 del"))
        .expect("taken out");
    c.set_port(5, None);
    assert!(!c.nat_inside().is_inside(5, false) && !s.steers(5, false));
    assert_eq!(c.ports(), vec!["in0", "out0", "", "", "", ""]);
    let e = c
        .apply(&cmds("lb set interface nat4 in late0"))
        .expect_err("gone");
    assert!(e.to_string().contains("accepted: in0, out0"), "{e}");
}

#[test]
fn lb_removal_is_refused_while_vips_exist() {
    let c = control(2);
    c.apply(&cmds(WEB)).expect("applied");
    let e = c.removal_target().expect_err("a VIP exists");
    assert!(
        e.to_string()
            .contains("1 VIP(s) (198.18.1.1/32 protocol tcp port 80)"),
        "{e}"
    );
    c.apply(&cmds(
        "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2 del flush\n\
         lb vip 198.18.1.1/32 protocol tcp port 80 del\nlb conf timeout 10\n",
    ))
    .expect("emptied");
    let target = c.removal_target().expect("no VIP");
    assert_eq!(target.vips().count(), 0);
    assert_eq!(
        target.memory_budget().workers,
        c.state().memory_budget().workers
    );
    c.replace(&target).expect("replaced");
    assert_eq!(
        c.state().conf().timeouts.tcp,
        LbState::new().conf().timeouts.tcp
    );
}

use super::*;
use crate::key::Field::*;
use crate::rule::{Bucket, GroupKind};
use crate::testutil::*;

fn out(p: u16) -> Action {
    Action::Output(PortRef::Number(p))
}

fn filter(table: Option<u8>, m: Match, strict: Option<u16>) -> RuleFilter {
    RuleFilter {
        table,
        m,
        strict,
        cookie: None,
        out_port: None,
    }
}

fn sel_group(id: u32) -> Group {
    Group {
        id,
        kind: GroupKind::Select,
        fields: vec![],
        method: Default::default(),
        method_param: 0,
        field_masks: vec![],
        buckets: vec![Bucket {
            watch_port: None,
            watch_group: None,
            id: 0,
            weight: 100,
            actions: vec![out(2)],
        }],
    }
}

#[test]
fn add_replaces_identical_rule_keeping_id_and_counters() {
    let r = rule(0, 100, m(&[ex(InPort, 1)]), vec![out(2)]);
    let t = FlowTables::new(ports())
        .apply(&[FlowMod::Add(r.clone())])
        .unwrap();
    let (id, _) = t.rules().next().unwrap();
    t.counters().add(id, 3, 300, 5);
    let mut r2 = r.clone();
    r2.actions = vec![out(3)];
    r2.m.key.set(InPort, 1); // same match
    let t2 = t.apply_at(&[FlowMod::Add(r2)], 1000).unwrap();
    assert_eq!(t2.len(), 1);
    let (id2, rule2) = t2.rules().next().unwrap();
    assert_eq!(id2, id);
    assert_eq!(rule2.actions, vec![out(3)]);
    let s = t2.stats(id).unwrap();
    assert_eq!((s.packets, s.bytes, s.added_ms), (3, 300, 1000));
    // Another priority is another rule.
    let t3 = t2
        .apply(&[FlowMod::Add(rule(0, 101, m(&[ex(InPort, 1)]), vec![]))])
        .unwrap();
    assert_eq!(t3.len(), 2);
    assert_eq!(t3.version(), 3);
    assert_eq!(t.len(), 1, "snapshots do not change");
}

#[test]
fn add_normalizes_value_bits_outside_the_mask() {
    let mut mt = Match::ANY;
    mt.mask.set(NwDst, 0xffff_ff00);
    mt.key.set(NwDst, ip(198, 18, 2, 7));
    let t = FlowTables::new(ports())
        .apply(&[FlowMod::Add(rule0(mt, vec![]))])
        .unwrap();
    assert_eq!(
        t.rules().next().unwrap().1.m.key.get(NwDst),
        ip(198, 18, 2, 0)
    );
}

#[test]
fn modify_and_delete_strict_and_not() {
    let a = rule(
        0,
        100,
        m(&[ex(EthType, 0x800), ex(NwProto, 6)]),
        vec![out(1)],
    );
    let b = rule(
        0,
        200,
        m(&[ex(EthType, 0x800), ex(NwProto, 6), ex(TpDst, 80)]),
        vec![out(2)],
    );
    let mut c = rule(1, 100, m(&[ex(EthType, 0x800)]), vec![out(2)]);
    c.cookie = 0xab;
    let t = FlowTables::new(ports())
        .apply(&[
            FlowMod::Add(a.clone()),
            FlowMod::Add(b.clone()),
            FlowMod::Add(c),
        ])
        .unwrap();
    // Non-strict modify on "tcp" changes a and b (both at least as specific), not c.
    let tcp = m(&[ex(EthType, 0x800), ex(NwProto, 6)]);
    let t2 = t
        .apply(&[FlowMod::Modify {
            filter: filter(None, tcp, None),
            actions: vec![out(4)],
            cookie: None,
        }])
        .unwrap();
    let acts: Vec<_> = t2.rules().map(|(_, r)| r.actions.clone()).collect();
    assert_eq!(acts, vec![vec![out(4)], vec![out(4)], vec![out(2)]]);
    // Strict delete takes only the exact match and priority.
    let t3 = t
        .apply(&[FlowMod::Delete(filter(Some(0), tcp, Some(100)))])
        .unwrap();
    assert_eq!(t3.len(), 2);
    assert!(t3.rules().all(|(_, r)| r.priority != 100 || r.table == 1));
    // Cookie mask and out_port.
    let mut f = filter(None, Match::ANY, None);
    f.cookie = Some((0xa0, 0xf0));
    assert_eq!(t.apply(&[FlowMod::Delete(f)]).unwrap().len(), 2);
    let mut f = filter(None, Match::ANY, None);
    f.out_port = Some(2);
    assert_eq!(t.apply(&[FlowMod::Delete(f)]).unwrap().len(), 1);
    // Delete everything.
    assert!(t
        .apply(&[FlowMod::Delete(filter(None, Match::ANY, None))])
        .unwrap()
        .is_empty());
}

#[test]
fn bad_changes_are_refused_with_index_and_nothing_applies() {
    let t = FlowTables::new(ports());
    let good = FlowMod::Add(rule0(Match::ANY, vec![out(1)]));
    let cases: Vec<(FlowMod, &str)> = vec![
        (
            FlowMod::Add(rule(1, 1, Match::ANY, vec![Action::GotoTable(1)])),
            "goto_table must go to a later table",
        ),
        (
            FlowMod::Add(rule(1, 1, Match::ANY, vec![Action::GotoTable(255)])),
            "goto_table must go to a later table",
        ),
        (
            FlowMod::Add(rule(0, 1, Match::ANY, vec![Action::GotoTable(2), out(1)])),
            "must be the last action",
        ),
        (
            FlowMod::Add(rule(255, 1, Match::ANY, vec![])),
            "tables are 0..=254",
        ),
        (
            FlowMod::Add(rule0(Match::ANY, vec![out(7)])),
            "known ports: 1, 2, 3, 4, 9",
        ),
        (
            FlowMod::Add(rule0(Match::ANY, vec![Action::Group(5)])),
            "no such group",
        ),
        (
            FlowMod::Add(rule0(
                Match::ANY,
                vec![Action::SetField {
                    field: EthType,
                    value: 1,
                    mask: 0xffff,
                }],
            )),
            "dl_type cannot be set",
        ),
        (
            FlowMod::Add(rule0(Match::ANY, vec![Action::PushVlan(0x800)])),
            "0x8100 or 0x88a8",
        ),
        (FlowMod::ModGroup(sel_group(3)), "no such group"),
    ];
    for (bad, says) in cases {
        let e = t.apply(&[good.clone(), bad.clone()]).unwrap_err();
        assert_eq!(e.index, 1, "{bad:?}");
        let msg = e.to_string();
        assert!(msg.contains(says), "{msg}");
        assert!(msg.starts_with("change 1 ("), "{msg}");
    }
    let e = t
        .apply(&[
            FlowMod::AddGroup(sel_group(1)),
            FlowMod::AddGroup(sel_group(1)),
        ])
        .unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(t.version(), 0);
    assert!(t.is_empty());
}

#[test]
fn deleting_a_group_deletes_the_rules_that_use_it() {
    let t = FlowTables::new(ports())
        .apply(&[
            FlowMod::AddGroup(sel_group(1)),
            FlowMod::AddGroup(sel_group(2)),
            FlowMod::Add(rule(0, 1, Match::ANY, vec![Action::Group(1)])),
            FlowMod::Add(rule(0, 2, Match::ANY, vec![Action::Group(2)])),
            FlowMod::Add(rule(0, 3, Match::ANY, vec![out(1)])),
        ])
        .unwrap();
    let t2 = t.apply(&[FlowMod::DelGroup(Some(1))]).unwrap();
    assert_eq!(t2.len(), 2);
    assert_eq!(t2.groups().count(), 1);
    let t3 = t.apply(&[FlowMod::DelGroup(None)]).unwrap();
    assert_eq!(t3.len(), 1);
    assert_eq!(t3.groups().count(), 0);
    // A group used in the same batch right after being added is fine.
    assert!(t3
        .apply(&[
            FlowMod::AddGroup(sel_group(7)),
            FlowMod::Add(rule0(Match::ANY, vec![Action::Group(7)]))
        ])
        .is_ok());
}

#[test]
fn timeouts_expire_by_idle_and_hard_time() {
    let mut idle = rule(0, 1, m(&[ex(InPort, 1)]), vec![]);
    idle.idle_timeout = 10;
    let mut hard = rule(0, 2, m(&[ex(InPort, 2)]), vec![]);
    hard.hard_timeout = 30;
    let t = FlowTables::new(ports())
        .apply_at(&[FlowMod::Add(idle), FlowMod::Add(hard)], 1_000)
        .unwrap();
    assert!(t.expire(5_000).is_empty());
    let idle_id = t.rules().find(|(_, r)| r.priority == 1).unwrap().0;
    t.counters().add(idle_id, 1, 64, 8_000);
    assert!(t.expire(17_999).is_empty());
    let gone = t.expire(18_000);
    assert_eq!(gone.len(), 1);
    let t2 = t.apply(&gone).unwrap();
    assert_eq!(t2.len(), 1);
    assert_eq!(t2.expire(31_000).len(), 1);
    assert_eq!(t2.stats(idle_id), None);
}

#[test]
fn apply_without_a_clock_stamps_at_first_expire() {
    let mut r = rule0(Match::ANY, vec![]);
    r.hard_timeout = 1;
    let t = FlowTables::new(ports()).apply(&[FlowMod::Add(r)]).unwrap();
    assert!(t.expire(50_000).is_empty());
    assert_eq!(t.expire(51_000).len(), 1);
}

#[test]
fn switch_ports_refuse_reserved_and_taken_numbers() {
    let mut p = SwitchPorts::new();
    assert!(p.add(0, 1, false).is_err());
    assert!(p.add(0xff00, 1, false).is_err());
    p.add(1, 5, false).unwrap();
    assert!(p
        .add(1, 6, false)
        .unwrap_err()
        .to_string()
        .contains("already used by vecplane port 5"));
    assert_eq!(p.ofport_of(5), Some(1));
}

#[test]
fn modify_selecting_nothing_adds_as_ovs_ofctl_does() {
    // ovs-ofctl mod-flows br0 "ip,actions=drop" on an empty bridge adds "ip actions=drop".
    let ipm = m(&[ex(EthType, 0x800)]);
    let t = FlowTables::new(ports())
        .apply(&[FlowMod::Modify {
            filter: filter(None, ipm, None),
            actions: vec![],
            cookie: Some(7),
        }])
        .unwrap();
    let rules: Vec<_> = t.rules().map(|(_, r)| r.clone()).collect();
    let mut want = rule0(ipm, vec![]);
    want.cookie = 7;
    assert_eq!(rules, vec![want.clone()]);
    // A modify that selects rules sets their cookie (Some) or keeps it (None).
    for (cookie, want_cookie) in [(None, 7), (Some(9), 9)] {
        let t2 = t
            .apply(&[FlowMod::Modify {
                filter: filter(None, ipm, None),
                actions: vec![out(2)],
                cookie,
            }])
            .unwrap();
        let r: Vec<_> = t2
            .rules()
            .map(|(_, r)| (r.cookie, r.actions.clone()))
            .collect();
        assert_eq!(r, vec![(want_cookie, vec![out(2)])]);
    }
    // Not with a cookie filter.
    let mut f = filter(None, ipm, None);
    f.cookie = Some((1, u64::MAX));
    assert!(FlowTables::new(ports())
        .apply(&[FlowMod::Modify {
            filter: f,
            actions: vec![],
            cookie: None,
        }])
        .unwrap()
        .is_empty());
}

#[test]
fn mod_flows_text_sets_cookies_as_ovs_ofctl_does() {
    // Open vSwitch 3.1, ovs-ofctl's default protocol (OpenFlow 1.0): `mod-flows` without a
    // cookie zeroes the cookies of the rules it changes, `cookie=7` sets 7 (and an added rule
    // gets it), `cookie=4/-1` selects by cookie and keeps it; `del-flows` takes `cookie=V/-1`.
    use crate::ofctl::{parse_flow_mod, FlowModKind as K};
    let flows = [
        "cookie=0x1,priority=150,tcp,actions=output:3",
        "cookie=0x3,priority=150,icmp,actions=output:3",
        "cookie=0x4,priority=150,arp,actions=output:3",
    ];
    let mut mods: Vec<FlowMod> = flows
        .iter()
        .map(|f| parse_flow_mod(K::Add, f).unwrap())
        .collect();
    for (k, text) in [
        (K::Modify, "tcp,actions=output:4"),
        (K::Modify, "cookie=0x7,icmp,actions=output:4"),
        (K::Modify, "cookie=0x4/-1,actions=output:1"),
        (K::Modify, "cookie=0x9,ipv6,actions=output:2"),
        (K::Delete, "cookie=0x7/-1"),
    ] {
        mods.push(parse_flow_mod(k, text).unwrap());
    }
    let t = FlowTables::new(ports()).apply(&mods).unwrap();
    let mut got: Vec<String> = t
        .rules()
        .map(|(_, r)| crate::ofctl::format_rule(r, None))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "cookie=0x4, priority=150,arp actions=output:1",
            "cookie=0x9, ipv6 actions=output:2",
            "priority=150,tcp actions=output:4",
        ]
    );
}

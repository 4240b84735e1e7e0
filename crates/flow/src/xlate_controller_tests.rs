//! The `controller` action through translation: where it punts among the other actions, with
//! which reason, table and cookie, and what the megaflow then holds (the punt stays in it, so
//! every packet of the flow punts); the packet-out translation and its parsing.

use super::*;
use crate::key::Field::*;
use crate::ofctl::{format_actions, parse_actions, parse_flow, parse_packet_out_actions};
use crate::rule::{FlowMod, Rule};
use crate::tables::FlowTables;
use crate::testutil::*;

fn tables(rules: &[&str]) -> FlowTables {
    let mods: Vec<FlowMod> = rules
        .iter()
        .map(|r| FlowMod::Add(parse_flow(r).expect("a rule")))
        .collect();
    FlowTables::new(ports()).apply(&mods).expect("valid rules")
}

fn key() -> FlowKey {
    ip4_key(1, 17, ip(198, 18, 1, 2), ip(198, 18, 2, 7), 1024, 53)
}

fn punt(reason: PuntReason, table: u8, cookie: u64, max_len: u16) -> DpAction {
    DpAction::Controller {
        max_len,
        reason,
        table,
        cookie,
    }
}

#[test]
fn controller_then_output_punts_a_copy_and_forwards() {
    let t = tables(&["cookie=0x1234,priority=10,udp,actions=controller,output:2"]);
    let x = t.translate(&key());
    assert_eq!(
        x.actions.as_slice(),
        &[
            punt(PuntReason::Action, 0, 0x1234, 65535),
            DpAction::Output(12)
        ]
    );
    // The punt consults no field of its own: the megaflow is what the match consulted.
    let mut want = FlowKey::ZERO;
    for f in [InPort, EthType, NwFrag, NwProto] {
        want.unwildcard(f);
    }
    assert_eq!(x.mask, want);
}

#[test]
fn the_punted_copy_sees_the_header_changes_made_before_it() {
    let t = tables(&["priority=10,udp,actions=mod_nw_dst:198.18.9.9,controller:64,output:3"]);
    let x = t.translate(&key());
    let a = x.actions.as_slice();
    assert!(matches!(a[0], DpAction::Set { field: NwDst, .. }), "{a:?}");
    assert_eq!(a[1], punt(PuntReason::Action, 0, 0, 64));
    assert_eq!(a[2], DpAction::Output(13));
}

#[test]
fn a_table_miss_rule_punts_with_reason_no_match() {
    // Open vSwitch's explicit miss: `action` from a priority-0 match-everything rule.
    let t = tables(&[
        "table=0,priority=100,tcp,actions=output:2",
        "table=0,priority=0,actions=goto_table:3",
        "table=3,cookie=0x77,priority=0,actions=controller",
    ]);
    let x = t.translate(&key());
    assert_eq!(
        x.actions.as_slice(),
        &[punt(PuntReason::NoMatch, 3, 0x77, 65535)]
    );
    // A priority-0 rule that matches something is no table-miss rule.
    let t = tables(&["priority=0,udp,actions=controller"]);
    assert_eq!(
        t.translate(&key()).actions.as_slice(),
        &[punt(PuntReason::Action, 0, 0, 65535)]
    );
    // An explicit reason is kept.
    let t = tables(&["priority=10,actions=controller(reason=invalid_ttl,max_len=100)"]);
    assert_eq!(
        t.translate(&key()).actions.as_slice(),
        &[punt(PuntReason::InvalidTtl, 0, 0, 100)]
    );
}

#[test]
fn output_controller_takes_the_reason_of_where_it_runs() {
    let mods = vec![
        FlowMod::AddGroup(
            crate::ofctl::parse_group("group_id=5,type=all,bucket=output:CONTROLLER")
                .expect("group"),
        ),
        FlowMod::Add(
            parse_flow("priority=10,udp,actions=group:5,write_actions(controller)").expect("rule"),
        ),
    ];
    let t = FlowTables::new(ports()).apply(&mods).expect("valid");
    assert_eq!(
        t.translate(&key()).actions.as_slice(),
        &[
            punt(PuntReason::Group, 0, 0, 65535),
            punt(PuntReason::ActionSet, 0, 0, 65535)
        ]
    );
}

#[test]
fn a_packet_out_runs_its_actions_or_the_tables() {
    let t = tables(&["cookie=0x9,priority=10,udp,actions=output:3,controller"]);
    let mut k = key();
    k.set(InPort, 0xfffd); // in_port=CONTROLLER
    let own = parse_packet_out_actions("output:2,controller:10").expect("actions");
    let x = t.translate_packet_out(&k, &own);
    assert_eq!(
        x.actions.as_slice(),
        &[
            DpAction::Output(12),
            punt(PuntReason::PacketOut, 0, u64::MAX, 10)
        ]
    );
    // `table`: as received on port 1, through the tables. An `output:CONTROLLER` there still
    // says `packet_out` (Open vSwitch checks `in_packet_out` first; over OpenFlow 1.3, which
    // has no such reason, it sends `action`), with the rule's table and cookie.
    let through = parse_packet_out_actions("TABLE").expect("actions");
    assert_eq!(through, parse_actions("resubmit(,0)").expect("same"));
    let x = t.translate_packet_out(&key(), &through);
    assert_eq!(
        x.actions.as_slice(),
        &[
            DpAction::Output(13),
            punt(PuntReason::PacketOut, 0, 0x9, 65535)
        ]
    );
    assert_eq!(
        x.rules.as_slice().len(),
        1,
        "the rule is hit (its counters count it)"
    );
    let then_own = parse_packet_out_actions("table,controller:5").expect("actions");
    let x = t.translate_packet_out(&key(), &then_own);
    assert_eq!(
        x.actions.as_slice()[2],
        punt(PuntReason::PacketOut, 0, u64::MAX, 5),
        "the packet-out's own action has no rule's cookie"
    );
    let err = parse_packet_out_actions("output:2,goto_table:1").expect_err("an instruction");
    assert!(err.to_string().contains("actions only"), "{err}");
}

#[test]
fn controller_spellings_parse_and_print_as_ovs_ofctl() {
    // Each: what `ovs-ofctl -O OpenFlow13 parse-flow` (Open vSwitch 3.1) prints.
    for (given, printed) in [
        ("controller", "CONTROLLER:65535"),
        ("controller:100", "CONTROLLER:100"),
        ("controller()", "CONTROLLER:65535"),
        ("controller(max_len=128)", "CONTROLLER:128"),
        ("output:CONTROLLER", "CONTROLLER:65535"),
        ("output:controller", "CONTROLLER:65535"),
        ("65533", "CONTROLLER:65535"),
        ("CONTROLLER:65535", "CONTROLLER:65535"),
        ("controller:0", "CONTROLLER:0"),
        ("controller(reason=action,max_len=64)", "CONTROLLER:64"),
        ("controller(id=0,reason=action)", "CONTROLLER:65535"),
        ("controller(reason=no_match)", "controller(reason=no_match)"),
        ("controller(id=3)", "controller(id=3)"),
        (
            "controller(id=3,max_len=100)",
            "controller(max_len=100,id=3)",
        ),
        (
            "controller(max_len=100,id=3,reason=invalid_ttl)",
            "controller(reason=invalid_ttl,max_len=100,id=3)",
        ),
        ("controller,output:2", "CONTROLLER:65535,output:2"),
        ("clone(controller)", "clone(CONTROLLER:65535)"),
        (
            "write_actions(controller)",
            "write_actions(CONTROLLER:65535)",
        ),
    ] {
        let a = parse_actions(given).unwrap_or_else(|e| panic!("{given}: {e}"));
        assert_eq!(format_actions(&a), printed, "{given}");
        // What is printed parses back to the same.
        assert_eq!(parse_actions(printed).expect("printed"), a, "{printed}");
    }
    for bad in [
        "controller(reason=bogus)",
        "controller(max_len=70000)",
        "controller:x",
        "controller(pause)",
        "controller(userdata=01.02)",
        "controller(max_len=1,max_len=2)",
    ] {
        assert!(parse_actions(bad).is_err(), "{bad} must be refused");
    }
    let e = parse_actions("controller(pause)").expect_err("pause");
    assert!(e.to_string().contains("accepted: controller"), "{e}");
    let r: Rule = parse_flow("priority=0,actions=controller").expect("a table-miss rule");
    assert_eq!(r.actions, vec![Action::Controller(ControllerAction::PLAIN)]);
}

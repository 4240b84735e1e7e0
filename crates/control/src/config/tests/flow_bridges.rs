//! Config tests of bridges in flow mode: rules, groups, the flow file, the cache keys and the
//! ports' `ofport`, `emc` and `megaflow`; every bad rule reported at its line, naming the token.

use super::*;

/// A flow bridge with three ports (OpenFlow 1, 2, 3); `{extra}` lands in the [[bridge]].
fn flow_bridge(extra: &str) -> String {
    format!(
        "[[bridge]]\nname = \"br0\"\nmode = \"flow\"\n{extra}\n\
         [[port]]\nname = \"a\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nbridge = \"br0\"\n\n\
         [[port]]\nname = \"b\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:02\"\nbridge = \"br0\"\n\n\
         [[port]]\nname = \"c\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:03\"\nbridge = \"br0\"\n"
    )
}

#[test]
fn a_flow_bridge_gets_rules_groups_and_openflow_ports() {
    let text = flow_bridge(
        "flows = [\n  \"table=0,priority=100,tcp,nw_dst=198.18.2.0/24,tp_dst=80,actions=output:2\",\n  \
         \"priority=10,actions=group:1\",\n]\n\
         groups = [\"group_id=1,type=select,bucket=weight:100,actions=output:2,bucket=weight:50,actions=output:3\"]\n\
         megaflow-limit = 1000\nemc-entries = 0\n",
    );
    let spec = ok(&text);
    let f = spec.bridges[0].flow.as_ref().expect("flow mode");
    assert_eq!(f.rules.len(), 2);
    assert_eq!(f.groups.len(), 1);
    assert_eq!(f.cache.megaflow_limit, 1000);
    assert_eq!(f.cache.emc_entries, 0);
    let ofports: Vec<_> = f.ports.iter().map(|p| (p.port, p.ofport)).collect();
    assert_eq!(ofports, vec![(0, 1), (1, 2), (2, 3)]);
}

#[test]
fn without_rules_a_flow_bridge_behaves_like_open_vswitch_normal() {
    let spec = ok(&flow_bridge(""));
    let f = spec.bridges[0].flow.as_ref().expect("flow mode");
    assert_eq!(f.rules.len(), 1);
    assert_eq!(
        f.rules[0].actions,
        vec![flow::Action::Output(flow::PortRef::Normal)]
    );
    assert_eq!(f.rules[0].priority, 0);
}

#[test]
fn explicit_ofports_and_cache_switches() {
    let text = flow_bridge("").replacen(
        "bridge = \"br0\"\n",
        "bridge = \"br0\"\nofport = 7\nemc = false\nmegaflow = false\n",
        1,
    );
    let spec = ok(&text);
    let f = spec.bridges[0].flow.as_ref().expect("flow mode");
    assert_eq!(f.ports[0].ofport, 7);
    assert!(!f.ports[0].emc && !f.ports[0].megaflow);
    assert_eq!(f.ports[1].ofport, 1, "the lowest free number");
    // Duplicate numbers are refused at the second port.
    let text = flow_bridge("").replace("bridge = \"br0\"\n", "bridge = \"br0\"\nofport = 5\n");
    let v = issues(&text);
    assert!(
        v.iter().any(|i| i.field.as_deref() == Some("ofport")
            && i.to_string().contains("OpenFlow port 5 is also")),
        "{v:#?}"
    );
}

#[test]
fn bad_rules_are_reported_at_their_line_naming_the_token() {
    // Line 5 holds the second rule.
    let text = flow_bridge(
        "flows = [\n  \"priority=1,actions=drop\",\n  \"priority=1,tp_dst=80,actions=output:2\",\n]\n",
    );
    let v = issues(&text);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].line, 6, "{}", v[0]);
    assert_eq!(v[0].field.as_deref(), Some("flows"));
    assert!(v[0].to_string().contains("tp_dst"), "{}", v[0]);
    // Unknown field and action.
    for (bad, token) in [
        ("nw_dts=198.18.0.1,actions=drop", "nw_dts"),
        ("ip,actions=frobnicate", "frobnicate"),
        ("ip,nw_dst=198.18.0.0/33,actions=drop", "33"),
    ] {
        let v = issues(&flow_bridge(&format!("flows = [\"{bad}\"]\n")));
        assert!(
            v.iter()
                .any(|i| i.line == 4 && i.to_string().contains(token)),
            "{bad}: {v:#?}"
        );
    }
    // A rule that parses but does not fit the bridge: output to a port it does not have, a
    // missing group, a goto backwards; reported at the rule's line.
    for (bad, needle) in [
        ("actions=output:9", "9"),
        ("actions=group:4", "group"),
        ("table=3,actions=goto_table:1", "goto_table"),
    ] {
        let v = issues(&flow_bridge(&format!("flows = [\"{bad}\"]\n")));
        assert!(
            v.iter().any(|i| i.line == 4
                && i.field.as_deref() == Some("flows")
                && i.to_string().contains(needle)),
            "{bad}: {v:#?}"
        );
    }
}

#[test]
fn flow_file_rules_are_reported_at_file_and_line() {
    let dir = TempDir::new();
    let rules = dir.0.join("flows.txt");
    std::fs::write(
        &rules,
        "# comment\n\npriority=5,ip,actions=output:2\npriority=5,ip,nw_src=x,actions=output:2\n",
    )
    .expect("write");
    let text = flow_bridge("flow-file = \"flows.txt\"\n");
    let e = parse_config(&text, FILE, &dir.0).expect_err("bad rule");
    let v = e.issues();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].line, 4);
    assert!(v[0].file.ends_with("flows.txt"), "{}", v[0]);
    assert!(v[0].to_string().contains("nw_src"), "{}", v[0]);
    // The good file loads.
    std::fs::write(&rules, "priority=5,ip,actions=output:2\n").expect("write");
    let spec = parse_config(&text, FILE, &dir.0).expect("valid");
    assert_eq!(
        spec.bridges[0].flow.as_ref().map(|f| f.rules.len()),
        Some(1)
    );
}

#[test]
fn flow_keys_need_flow_mode() {
    let text = flow_bridge("").replacen("mode = \"flow\"\n", "flows = [\"actions=drop\"]\n", 1);
    let v = issues(&text);
    assert!(
        v.iter()
            .any(|i| i.field.as_deref() == Some("flows")
                && i.to_string().contains("mode = \"flow\"")),
        "{v:#?}"
    );
    let text = flow_bridge("")
        .replacen("mode = \"flow\"\n", "", 1)
        .replacen("bridge = \"br0\"\n", "bridge = \"br0\"\nofport = 3\n", 1);
    let v = issues(&text);
    assert!(
        v.iter()
            .any(|i| i.field.as_deref() == Some("ofport")
                && i.to_string().contains("learning bridge")),
        "{v:#?}"
    );
    let v = issues(&flow_bridge("").replacen("\"flow\"", "\"openflow\"", 1));
    assert!(
        v.iter()
            .any(|i| i.line == 3 && i.to_string().contains("accepted: \"learning\"")),
        "{v:#?}"
    );
    let v = issues(&flow_bridge("emc-entries = 1000\n"));
    assert!(
        v.iter().any(|i| i.to_string().contains("power of two")),
        "{v:#?}"
    );
}

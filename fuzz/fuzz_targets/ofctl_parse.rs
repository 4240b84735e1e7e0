//! Arbitrary bytes as `ovs-ofctl` text through every parser of `flow::ofctl` (rule, filter,
//! flow mod, actions, group, flows file, statistics; rules also as OpenFlow 1.0). Must never panic; whatever parses as a rule
//! or a group must print, and the printed text must parse again and print the same.
#![no_main]

use flow::ofctl::{self, FlowModKind, OpenFlowVersion};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ofctl::parse_filter(s, false);
    let _ = ofctl::parse_filter(s, true);
    let _ = ofctl::parse_actions(s);
    let _ = ofctl::parse_flows_file(s);
    let _ = ofctl::parse_flow_stats(s);
    for k in [FlowModKind::Modify, FlowModKind::DeleteStrict] {
        let _ = ofctl::parse_flow_mod(k, s);
    }
    if let Ok(r) = ofctl::parse_flow(s) {
        let t = ofctl::format_rule(&r, None);
        let r2 = ofctl::parse_flow(&t).expect("a printed rule parses");
        assert_eq!(ofctl::format_rule(&r2, None), t);
        let _ = ofctl::format_megaflow(&r.m);
    }
    // Over OpenFlow 1.0 (fewer match checks) the printed rule parses again as 1.0.
    if let Ok(r) = ofctl::parse_flow_as(s, OpenFlowVersion::OpenFlow10) {
        let t = ofctl::format_rule(&r, None);
        let r2 = ofctl::parse_flow_as(&t, OpenFlowVersion::OpenFlow10)
            .expect("a printed OpenFlow 1.0 rule parses as 1.0");
        assert_eq!(ofctl::format_rule(&r2, None), t);
    }
    if let Ok(g) = ofctl::parse_group(s) {
        let t = ofctl::format_group(&g);
        let g2 = ofctl::parse_group(&t).expect("a printed group parses");
        assert_eq!(ofctl::format_group(&g2), t);
    }
});

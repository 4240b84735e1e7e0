//! The exposition: names, labels, types and values of a test view.

use super::*;
use crate::testutil::{run_node, view};

#[test]
fn counters_carry_labels_and_values() {
    let v = view(2);
    run_node(&v, 1, "ip4-input", 3, 3, 700, 9000);
    if let Some(p) = v.ports.get().first() {
        p.stats[0].rx_packets.add(5);
        p.stats[1].rx_packets.add(7);
    }
    let text = render(&v);
    assert!(
        text.contains("# TYPE vecplane_port_rx_packets counter"),
        "{text}"
    );
    assert!(
        text.contains("vecplane_port_rx_packets_total{port=\"in0\",driver=\"pcap\"} 12"),
        "{text}"
    );
    assert!(
        text.contains("vecplane_node_packets_total{worker=\"1\",node=\"ip4-input\"} 700"),
        "{text}"
    );
    // Input nodes also say what their packets cost in the whole graph.
    run_node(&v, 0, "in0-rx", 2, 2, 300, 3000);
    let g = v.workers[0].graph.get();
    if let Some(i) = g.node_names.iter().position(|n| n == "in0-rx") {
        g.nodes[i].carried_clocks.add(45_000);
    }
    let text = render(&v);
    assert!(
        text.contains("vecplane_rxq_clocks_total{worker=\"0\",node=\"in0-rx\"} 45000"),
        "{text}"
    );
    assert!(!text.contains("vecplane_rxq_clocks_total{worker=\"1\",node=\"ip4-input\"}"));
    let routes = crate::testutil::spec().routes4.len();
    assert!(
        text.contains(&format!("vecplane_routes{{family=\"ipv4\"}} {routes}")),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}

#[test]
fn worker_sleeps_in_seconds() {
    let v = view(1);
    v.workers[0].idle.sleeps.add(4);
    v.workers[0].idle.slept_ns.add(1_500_000_000);
    let text = render(&v);
    assert!(
        text.contains("vecplane_worker_sleeps_total{worker=\"0\",mode=\"adaptive\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("vecplane_worker_slept_seconds_total{worker=\"0\",mode=\"adaptive\"} 1.5"),
        "{text}"
    );
}

#[test]
fn the_text_format_names_counters_by_their_samples() {
    let v = view(1);
    let text = render_text(&v);
    assert!(
        text.contains("# TYPE vecplane_port_rx_packets_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# HELP vecplane_port_rx_packets_total Packets received"),
        "{text}"
    );
    assert!(text.contains("# TYPE vecplane_routes gauge"), "{text}");
    assert!(!text.contains("# EOF"));
}

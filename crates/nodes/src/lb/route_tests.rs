//! How packets come to the `lb` node now that only VIP prefixes' routes and NAT inside ports
//! bring them: a routed packet no VIP takes is dropped as `no-vip-for-port` (as VPP's default
//! VIP drops it), also when the tables have no VIP left; what the node hands to a lookup is
//! marked, and a marked packet routed back is dropped as `vip-loop`; the flow tables are taken
//! from the worker's slot with the first VIP, not before.

use super::*;

/// What a lookup leaves for `lb` when a VIP prefix's route took the packet.
fn routed(meta: &mut BufferMeta, f: &[u8]) {
    ip_input_like(meta, f);
    meta.next_scratch = VIP_ROUTE;
}

/// A routed packet that `lb` had handed to a lookup before.
fn routed_back(meta: &mut BufferMeta, f: &[u8]) {
    routed(meta, f);
    meta.flags |= FLAG_LB_DONE;
}

#[test]
fn a_routed_packet_no_vip_takes_is_dropped_and_counted_and_vip_packets_are_marked() {
    let mut lab = Lab::with_setup(L3DSR, routed);
    let out = lab.run(vec![
        tcp4(CLIENT, [198, 18, 100, 9], 1000, 80, SYN),
        tcp4(CLIENT, VIP, 1000, 81, SYN),
        tcp4(CLIENT, VIP, 1000, 80, SYN),
    ]);
    let names: Vec<&str> = out.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            names::IP4_LOOKUP,
            "drop:no-vip-for-port",
            "drop:no-vip-for-port"
        ],
        "an address of the VIP's route without a VIP, and a port without one: dropped"
    );
    assert_eq!(lab.counters.no_vip_for_port.get(), 2);
    let (_, meta, f) = &out[0];
    assert_eq!(dst4(f), S1);
    assert_ne!(meta.flags & FLAG_LB_DONE, 0, "handed to a lookup: marked");
}

#[test]
fn a_packet_routed_back_to_lb_is_dropped_as_a_loop() {
    for lane in [true, false] {
        let mut lab = Lab::build(L3DSR, routed_back, lane);
        let out = lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, "drop:vip-loop", "lane {lane}");
    }
    // With no VIP in the tables, too; a steered packet passes there (marked).
    let mut lab = Lab::with_setup("", routed_back);
    let out = lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(out[0].0, "drop:vip-loop");
    let mut lab = Lab::with_setup("", routed);
    let out = lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(out[0].0, "drop:no-vip-for-port");
    let mut lab = Lab::new("");
    let out = lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(out[0].0, names::IP4_LOOKUP);
    assert_ne!(out[0].1.flags & FLAG_LB_DONE, 0);
}

#[test]
fn the_flow_tables_come_from_the_slot_with_the_first_vip() {
    let slot = Arc::new(TableSlot::new());
    let tables = WorkerTables::new(300).expect("tables");
    let entries = tables.capacity() as u64;
    slot.put(tables);
    let mut lab = Lab::build_with("", ip_input_like, true, Some(slot.clone()));
    lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(
        lab.counters.flow_table_entries.get(),
        0,
        "no VIP: not taken"
    );
    assert!(format!("{slot:?}").contains("Some"), "still in the slot");
    lab.change(L3DSR);
    let out = lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(dst4(&out[0].2), S1);
    assert_eq!(lab.counters.flow_table_entries.get(), entries, "taken");
    assert!(format!("{slot:?}").contains("None"), "the slot is empty");
    // Flows stick: the taken table holds them.
    let counters = lab.counters.clone();
    let v = counters.vip(VipId(0)).expect("vip");
    let before = v.new_flows.get();
    lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, ACK)]);
    assert_eq!(v.new_flows.get(), before, "the flow was found");
}

#[test]
fn without_a_slot_the_node_makes_its_own_tables_with_the_first_vip() {
    let mut lab = Lab::new("");
    lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(lab.counters.flow_table_entries.get(), 0);
    lab.change(L3DSR);
    lab.run(vec![tcp4(CLIENT, VIP, 1000, 80, SYN)]);
    assert_eq!(
        lab.counters.flow_table_entries.get(),
        6144,
        "4096 entries asked"
    );
}

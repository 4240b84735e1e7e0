//! Ports added and removed at run time: a port given by `set_port` answers, resolves and
//! learns like a port of the build; `remove_port` frees what waited on it, deletes its entries
//! and leaves it answering nothing, whatever the live address list says later.

use super::*;

const MAC2: Mac = [2, 0, 0, 0, 0, 3];
/// A host on port 2 (198.18.3.77).
const HOST3: Mac = [2, 0, 0, 0, 3, 0x77];

fn port2() -> NeighbourPort {
    NeighbourPort {
        mac: MAC2,
        mtu: 1300,
        ip4: vec![(v4("198.18.3.1"), 24)],
        ip6: vec![(v6("2001:db8:3::1"), 64)],
    }
}

/// An ARP request from `HOST3` (198.18.3.77) for `tpa`.
fn ask(tpa: &str) -> Vec<u8> {
    arp_frame(1, [0xff; 6], HOST3, "198.18.3.77", [0; 6], tpa)
}

/// A multicast solicitation from `HOST3` (2001:db8:3::77) for `target`.
fn solicit(target: &str) -> Vec<u8> {
    let group = Ipv6Addr::from(solicited_node(u128::from(v6(target))));
    nd_frame(
        135,
        multicast_mac6(u128::from(group)),
        HOST3,
        "2001:db8:3::77",
        &group.to_string(),
        255,
        target,
        0,
        Some((1, HOST3)),
    )
}

fn rows_on(t: &Bench, port: u16) -> usize {
    t.rows().iter().filter(|r| r.port == port).count()
}

#[test]
fn a_port_set_at_run_time_answers_and_resolves() {
    let mut t = Bench::new();
    t.arp_in(2, &[ask("198.18.3.1")]);
    assert_eq!(t.drops(ARP_INPUT, "unknown-port"), 1, "before set_port");
    t.n.with(|n| n.set_port(2, &port2()));

    t.arp_in(2, &[ask("198.18.3.1")]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 2, "answered out of port 2");
    assert_eq!(&sent[0].1[6..12], &MAC2);
    assert_eq!(
        &sent[0].1[28..32],
        &[198, 18, 3, 1],
        "from port 2's address"
    );
    // The requester is learned on port 2, with port 2's MTU and MAC.
    let id = t.lookup4(2, "198.18.3.77").expect("learned");
    let adj = t.n.with(|n| n.adjacency4(id, T0)).expect("usable");
    assert_eq!((adj.port, adj.mtu), (2, 1300));
    assert_eq!(&adj.macs[..6], &HOST3);
    assert_eq!(&adj.macs[6..], &MAC2);
    let link_local = port2().link_local().to_string();
    t.nd_in(2, &[solicit("2001:db8:3::1"), solicit(&link_local)]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 2, "both solicitations answered");
    assert!(sent.iter().all(|(p, f)| *p == 2 && f[6..12] == MAC2));

    // An unresolved neighbour on port 2: queued, asked from port 2.
    t.resolve(false, 2, GLEAN, &[udp4_to("198.18.3.9")]);
    assert_eq!(t.poll(), 1);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 2);
    assert_eq!(&sent[0].1[6..12], &MAC2);
    assert_eq!(&sent[0].1[28..32], &[198, 18, 3, 1]);
    assert_eq!(t.n.with(|n| n.queued()), 1);
    t.assert_no_leak();
}

#[test]
fn a_removed_port_frees_its_queue_loses_its_entries_and_answers_nothing() {
    let mut t = Bench::new();
    t.n.with(|n| n.set_port(2, &port2()));
    // On port 2: a learned neighbour, two waiting packets, a pinned next hop.
    t.arp_in(2, &[ask("198.18.3.1")]);
    t.resolve(false, 2, GLEAN, &[udp4_to("198.18.3.9")]);
    t.resolve(true, 2, GLEAN, &[udp6_to("2001:db8:3::9")]);
    assert_eq!(t.poll(), 2, "an ARP request and a solicitation");
    let pinned = t.n.with(|n| n.pin4(2, v4("198.18.3.254"))).expect("pinned");
    // On port 0: a learned neighbour that must stay.
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    t.arp_in(0, &[req]);
    t.take_sent();
    assert_eq!(rows_on(&t, 2), 4);
    assert_eq!(
        t.pool.capacity() - t.pool.available(),
        2,
        "two packets wait"
    );

    let freed = t.n.with(|n| n.remove_port(2, &mut t.pool));
    assert_eq!(freed, 2);
    assert_eq!(t.pool.available(), t.pool.capacity(), "the queue is freed");
    assert_eq!(t.n.with(|n| n.queued()), 0);
    assert_eq!(
        rows_on(&t, 2),
        0,
        "every entry on port 2 is gone, pinned too"
    );
    assert_eq!(rows_on(&t, 0), 1, "port 0 keeps its entries");
    assert!(t.n.with(|n| n.adjacency4(pinned, T0)).is_none());
    assert_eq!(t.stats().queue_drops, 2);
    t.poll();
    assert_eq!(t.drops(NEIGHBOUR_TX, "port-removed"), 2);

    // Its former addresses are not answered, nor its link-local one; it sources nothing.
    let drops = t.drops(ARP_INPUT, "not-for-us");
    t.arp_in(2, &[ask("198.18.3.1")]);
    assert_eq!(t.drops(ARP_INPUT, "not-for-us"), drops + 1);
    let link_local = port2().link_local().to_string();
    t.nd_in(2, &[solicit("2001:db8:3::1"), solicit(&link_local)]);
    assert_eq!(t.drops(IP6_ND, "not-for-us"), 2);
    t.resolve(false, 2, GLEAN, &[udp4_to("198.18.3.9")]);
    assert_eq!(t.drops(IP4_ARP, "no-source-address"), 1);
    assert!(t.n.with(|n| n.pin4(2, v4("198.18.3.254"))).is_none());
    assert!(t.take_sent().is_empty());
    assert_eq!(rows_on(&t, 2), 0, "and learns nothing");

    // The other ports still answer.
    let req = arp_frame(1, [0xff; 6], HOST, "198.18.2.77", [0; 6], "198.18.2.1");
    t.arp_in(1, &[req]);
    assert_eq!(t.take_sent().len(), 1);
    t.assert_no_leak();
}

#[test]
fn live_addresses_skip_removed_and_skipped_ports_until_set_again() {
    let mut t = Bench::new();
    let own = |a: &str| -> OwnAddresses { (vec![(v4(a), 24)], Vec::new()) };
    let addrs = Arc::new(PortAddresses::new(vec![
        own("198.18.1.1"),
        own("198.18.2.1"),
    ]));
    t.n.with(|n| n.set_port_addresses(addrs.clone()));
    let maintain = |t: &mut Bench| {
        t.now += HZ / 100;
        let now = t.now;
        t.n.with(|n| n.maintain(&mut t.pool, now));
    };
    let answered = |t: &mut Bench, port: u16, tpa: &str| {
        t.arp_in(port, &[ask(tpa)]);
        !t.take_sent().is_empty()
    };

    // The control thread makes room and names the address; the worker learns of port 3
    // without addresses (port 2 is skipped on the way).
    addrs.ensure_len(4);
    addrs.set(3, own("198.18.3.1"));
    let p3 = NeighbourPort {
        ip4: Vec::new(),
        ip6: Vec::new(),
        ..port2()
    };
    t.n.with(|n| n.set_port(3, &p3));
    assert!(!answered(&mut t, 3, "198.18.3.1"), "not before maintenance");
    maintain(&mut t);
    assert!(
        answered(&mut t, 3, "198.18.3.1"),
        "the live list is applied"
    );
    addrs.set(2, own("198.18.4.1"));
    maintain(&mut t);
    assert!(
        !answered(&mut t, 2, "198.18.4.1"),
        "a skipped id has no address"
    );
    assert_eq!(t.drops(ARP_INPUT, "unknown-port"), 0, "but is a port");

    t.n.with(|n| n.remove_port(3, &mut t.pool));
    assert!(!answered(&mut t, 3, "198.18.3.1"));
    addrs.set(3, own("198.18.3.2"));
    maintain(&mut t);
    assert!(
        !answered(&mut t, 3, "198.18.3.2"),
        "a removed port stays bare"
    );

    // The id given again takes the live list's addresses.
    t.n.with(|n| n.set_port(3, &p3));
    maintain(&mut t);
    assert!(answered(&mut t, 3, "198.18.3.2"));
    assert!(answered(&mut t, 0, "198.18.1.1"), "port 0 untouched");
    t.assert_no_leak();
}

#[test]
fn port_addresses_grow_and_move_their_generation_only_when_they_grow() {
    let addrs = PortAddresses::new(vec![(vec![(v4("198.18.1.1"), 24)], Vec::new())]);
    let g = addrs.generation();
    addrs.ensure_len(1);
    assert_eq!(addrs.generation(), g, "long enough already");
    addrs.set(2, (vec![(v4("198.18.3.1"), 24)], Vec::new()));
    assert_eq!(addrs.generation(), g, "an id past the list is ignored");
    addrs.ensure_len(3);
    assert!(addrs.generation() > g);
    let list = addrs.try_get().expect("not held");
    assert_eq!(list.len(), 3);
    assert_eq!(list[0].0, vec![(v4("198.18.1.1"), 24)], "kept");
    assert!(list[1].0.is_empty() && list[1].1.is_empty() && list[2].0.is_empty());
    let g = addrs.generation();
    addrs.ensure_len(2);
    assert_eq!(addrs.generation(), g, "never shrinks");
    assert_eq!(addrs.try_get().map(|l| l.len()), Some(3));
}

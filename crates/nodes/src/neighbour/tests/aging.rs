//! Aging: reachable, stale, probed and deleted entries; pins; live timers.

use super::*;

#[test]
fn entries_go_stale_then_are_deleted_after_gc_seconds() {
    let mut t = Bench::new();
    learn_host(&mut t);
    let id = t.lookup4(1, "198.18.2.77").expect("reachable");
    t.now = T0 + 29 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Reachable
    );
    t.now = T0 + 30 * HZ;
    t.sweep_all();
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Stale
    );
    assert!(
        t.take_sent().is_empty(),
        "unused stale entries are not probed"
    );
    t.now = T0 + 299 * HZ;
    assert_eq!(
        t.n.with(|n| n.adjacency4(id, T0 + 299 * HZ))
            .map(|a| a.port),
        Some(1)
    );
    t.now = T0 + 300 * HZ;
    assert!(t.lookup4(1, "198.18.2.77").is_none(), "lazily expired");
    t.sweep_all();
    assert!(t.rows().is_empty());
    assert_eq!(t.stats().aged, 1);
    assert!(
        t.n.with(|n| n.adjacency4(id, T0 + 300 * HZ)).is_none(),
        "old id dead"
    );
    t.assert_no_leak();
}

#[test]
fn stale_entries_in_use_are_probed_and_deleted_when_silent() {
    let mut t = Bench::new();
    learn_host(&mut t);
    t.now = T0 + 31 * HZ;
    assert!(t.lookup4(1, "198.18.2.77").is_some(), "stale is usable");
    t.sweep_all();
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].1[0..6], &HOST, "a unicast probe");
    assert_eq!(&sent[0].1[20..22], &[0, 1]);
    assert_eq!(t.stats().probes_sent, 1);
    // An answer confirms it again.
    learn_host(&mut t);
    assert_eq!(
        t.row("198.18.2.77").expect("entry").state,
        NeighbourState::Reachable
    );
    // Silent: three probes a second apart, then deleted.
    t.now += 31 * HZ;
    for _ in 0..3 {
        assert!(t.lookup4(1, "198.18.2.77").is_some());
        t.sweep_all();
        assert_eq!(t.take_sent().len(), 1);
        t.now += HZ + 1;
    }
    t.sweep_all();
    assert!(t.rows().is_empty());
    assert!(t.lookup4(1, "198.18.2.77").is_none());
    assert_eq!(t.stats().aged, 1);
    t.assert_no_leak();
}

#[test]
fn pinned_next_hops_are_resolved_and_never_deleted() {
    let mut t = Bench::new();
    let id = t.n.with(|n| n.pin4(1, v4("198.18.2.254"))).expect("pinned");
    assert!(is_neighbour_adjacency(id));
    assert!(t.n.with(|n| n.adjacency4(id, T0)).is_none(), "incomplete");
    // ip4-rewrite sends the packet to ip4-arp with the id it had.
    t.resolve(false, 1, id, &[udp4_to("198.19.0.1")]);
    t.poll();
    let sent = t.take_sent();
    assert_eq!(
        &sent[0].1[38..42],
        &[198, 18, 2, 254],
        "asks for the next hop"
    );
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.254", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    t.poll();
    assert_eq!(t.take_routed().len(), 1);
    t.now += 400 * HZ;
    t.sweep_all();
    let row = t.row("198.18.2.254").expect("kept");
    assert!(row.pinned);
    assert_eq!(row.state, NeighbourState::Incomplete);
    assert_eq!(
        t.n.with(|n| n.pin4(1, v4("198.18.2.254"))),
        Some(id),
        "same id"
    );
    t.assert_no_leak();
}

#[test]
fn snapshot_is_published_for_show_neighbours() {
    let mut t = Bench::new();
    let view = t.n.view();
    learn_host(&mut t);
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::9")]);
    t.now += 2 * HZ;
    t.poll();
    let s = view.lock().expect("view").clone();
    assert_eq!(s.taken_tsc, t.now);
    assert_eq!(s.rows.len(), 2);
    let v4row = s.rows.iter().find(|r| r.ip.is_ipv4()).expect("v4");
    assert_eq!(
        (v4row.port, v4row.mac, v4row.state, v4row.age_ms),
        (1, Some(HOST), NeighbourState::Reachable, 2000)
    );
    assert_eq!(
        v4row.to_string(),
        "port 1 198.18.2.77 02:00:00:00:02:77 reachable age 2.000s"
    );
    let v6row = s.rows.iter().find(|r| r.ip.is_ipv6()).expect("v6");
    assert_eq!((v6row.state, v6row.queued), (NeighbourState::Incomplete, 1));
    assert_eq!(
        s.stats.ns_sent, 2,
        "the solicitation and one retry a second later"
    );
    // Not again within the second.
    t.now += HZ / 2;
    t.poll();
    assert_eq!(view.lock().expect("view").taken_tsc, t.now - HZ / 2);
    t.assert_no_leak();
}

#[test]
fn news_from_another_worker_releases_queued_packets() {
    let mut w0 = Bench::new();
    let mut w1 = Bench::new();
    NeighbourHandle::connect(&[w0.n.clone(), w1.n.clone()]);
    w0.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    w0.poll();
    assert_eq!(w0.take_sent().len(), 1);
    // The reply lands on worker 1.
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    w1.arp_in(1, &[reply]);
    w1.now += HZ / 100;
    w1.poll(); // sends the news
    w0.now += HZ / 100;
    w0.poll(); // merges it: the packet goes to rewrite through the outbox
    w0.poll();
    let routed = w0.take_routed();
    assert_eq!(routed.len(), 1);
    assert_eq!(&routed[0].1[0..6], &HOST);
    assert_eq!(w0.stats().news_merged, 1);
    w0.assert_no_leak();
    w1.assert_no_leak();
}

#[test]
fn port_mtus_changed_live_reach_existing_and_new_entries() {
    let mut t = Bench::new();
    let mtus = Arc::new(PortMtus::new(&[1500, 1500]));
    t.n.with(|n| n.set_port_mtus(mtus.clone()));
    learn_host(&mut t);
    let id = t.lookup4(1, "198.18.2.77").expect("reachable");
    let now = t.now;
    let mtu = |t: &Bench| t.n.with(|n| n.adjacency4(id, now)).map(|a| a.mtu);
    assert_eq!(mtu(&t), Some(1500));
    assert!(mtus.set(1, 1280));
    assert!(!mtus.set(1, 1280), "unchanged");
    assert_eq!(mtu(&t), Some(1500), "taken at the next maintenance");
    t.n.with(|n| n.maintain(&mut t.pool, now + HZ));
    assert_eq!(mtu(&t), Some(1280));
    // An entry learned after the change gets it too.
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.99", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    let other = t.lookup4(1, "198.18.2.99").expect("learned");
    assert_eq!(
        t.n.with(|n| n.adjacency4(other, now)).map(|a| a.mtu),
        Some(1280)
    );
    t.assert_no_leak();
}

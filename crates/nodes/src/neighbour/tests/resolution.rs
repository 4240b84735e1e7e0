//! Resolution on demand: packets queued while a neighbour resolves, released when it answers,
//! limits and failures counted.

use super::*;

#[test]
fn unresolved_ip4_packet_is_queued_requested_and_released() {
    let mut t = Bench::new();
    let data = udp4_to("198.18.2.77");
    t.resolve(false, 1, GLEAN, std::slice::from_ref(&data));
    assert_eq!(t.total_drops(), 0);
    assert!(
        t.take_sent().is_empty(),
        "nothing leaves before neighbour-tx runs"
    );
    assert_eq!(t.poll(), 1);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let expected = hex("ffffffffffff 020000000002 0806
         0001 0800 06 04 0001 020000000002 c6120201 000000000000 c612024d
         000000000000000000000000000000000000");
    assert_eq!(
        sent[0],
        (1, expected),
        "broadcast ARP request out of port 1"
    );
    let row = t.row("198.18.2.77").expect("incomplete entry");
    assert_eq!(
        (row.state, row.queued, row.mac),
        (NeighbourState::Incomplete, 1, None)
    );
    assert_eq!(t.stats().arp_requests_sent, 1);

    // The answer releases the packet to ip4-rewrite with the learned MAC.
    t.now += HZ / 1000;
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    assert!(t.take_routed().is_empty(), "released through the outbox");
    assert_eq!(t.poll(), 1);
    let routed = t.take_routed();
    assert_eq!(routed.len(), 1);
    let (port, f) = &routed[0];
    assert_eq!(*port, 1);
    assert_eq!(&f[0..6], &HOST);
    assert_eq!(&f[6..12], &MAC1);
    assert_eq!(&f[12..], &data[12..], "IP packet untouched by resolution");
    let row = t.row("198.18.2.77").expect("entry");
    assert_eq!((row.state, row.queued), (NeighbourState::Reachable, 0));
    let s = t.stats();
    assert_eq!((s.queued, s.released, s.learned), (1, 1, 1));
    // Later packets resolve in the lookup.
    assert!(t.lookup4(1, "198.18.2.77").is_some());
    t.assert_no_leak();
}

#[test]
fn unresolved_ip6_packet_sends_ns_and_is_released_by_na() {
    let mut t = Bench::new();
    let data = udp6_to("2001:db8:2::277");
    t.resolve(true, 1, GLEAN, &[data.clone(), data.clone()]);
    assert_eq!(t.poll(), 1, "one solicitation for two packets");
    let sent = t.take_sent();
    let expected = nd_frame(
        135,
        [0x33, 0x33, 0xff, 0, 0x02, 0x77],
        MAC1,
        "2001:db8:2::1",
        "ff02::1:ff00:277",
        255,
        "2001:db8:2::277",
        0,
        Some((1, MAC1)),
    );
    assert_eq!(sent, vec![(1, expected.clone())]);
    assert!(icmp6_ok(&sent[0].1[14..]));
    assert_eq!(t.stats().ns_sent, 1);

    let na = nd_frame(
        136,
        MAC1,
        HOST,
        "2001:db8:2::277",
        "2001:db8:2::1",
        255,
        "2001:db8:2::277",
        0x60,
        Some((2, HOST)),
    );
    t.nd_in(1, &[na]);
    assert_eq!(t.drops(IP6_ND, "learned"), 1);
    assert_eq!(t.poll(), 2);
    let routed = t.take_routed();
    assert_eq!(routed.len(), 2);
    for (port, f) in &routed {
        assert_eq!(*port, 1);
        assert_eq!(&f[0..12], &[HOST, MAC1].concat()[..]);
        assert_eq!(&f[12..], &data[12..]);
    }
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!(
        (row.state, row.mac),
        (NeighbourState::Reachable, Some(HOST))
    );
    t.assert_no_leak();
}

#[test]
fn na_without_override_does_not_replace_a_known_mac() {
    let mut t = Bench::new();
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::277")]);
    t.poll();
    let na = |mac: Mac, flags: u8| {
        nd_frame(
            136,
            MAC1,
            mac,
            "2001:db8:2::277",
            "2001:db8:2::1",
            255,
            "2001:db8:2::277",
            flags,
            Some((2, mac)),
        )
    };
    t.nd_in(1, &[na(HOST, 0x60)]);
    t.poll();
    t.nd_in(1, &[na(HOST2, 0x40)]);
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!((row.mac, row.state), (Some(HOST), NeighbourState::Stale));
    t.nd_in(1, &[na(HOST2, 0x60)]);
    let row = t.row("2001:db8:2::277").expect("entry");
    assert_eq!(
        (row.mac, row.state),
        (Some(HOST2), NeighbourState::Reachable)
    );
    t.assert_no_leak();
}

#[test]
fn queue_limits_per_neighbour_and_in_total() {
    let mut t = Bench::with(
        NeighbourConfig {
            queue_total: 10,
            ..config()
        },
        512,
    );
    let six: Vec<Vec<u8>> = (0..6).map(|_| udp4_to("198.18.2.77")).collect();
    t.resolve(false, 1, GLEAN, &six);
    assert_eq!(t.drops(IP4_ARP, "queue-full"), 2, "4 per neighbour");
    for host in ["198.18.2.78", "198.18.2.79"] {
        let four: Vec<Vec<u8>> = (0..4).map(|_| udp4_to(host)).collect();
        t.resolve(false, 1, GLEAN, &four);
    }
    assert_eq!(t.drops(IP4_ARP, "queue-full"), 4, "10 in all");
    assert_eq!(t.n.with(|n| n.queued()), 10);
    assert_eq!(t.stats().queue_drops, 4);
    assert_eq!(t.poll(), 3, "one request per neighbour");
    t.assert_no_leak();
}

#[test]
fn requests_are_rate_limited_per_neighbour() {
    let mut t = Bench::new();
    let p = || vec![udp4_to("198.18.2.77")];
    t.resolve(false, 1, GLEAN, &p());
    t.now += HZ / 2;
    t.resolve(false, 1, GLEAN, &p());
    t.poll();
    assert_eq!(t.take_sent().len(), 1, "one request in the first second");
    t.now += HZ / 2;
    t.resolve(false, 1, GLEAN, &p());
    t.poll();
    assert_eq!(t.take_sent().len(), 1, "a second one after a second");
    assert_eq!(t.stats().arp_requests_sent, 2);
    // The sweep retransmits while packets wait, once a second.
    t.now += HZ / 2;
    t.sweep_all();
    assert!(t.take_sent().is_empty());
    t.now += HZ / 2;
    t.sweep_all();
    assert_eq!(t.take_sent().len(), 1);
    t.assert_no_leak();
}

#[test]
fn global_request_rate_is_bounded() {
    let mut t = Bench::with(
        NeighbourConfig {
            requests_per_second: 20,
            ..config()
        },
        512,
    );
    let many: Vec<Vec<u8>> = (10..60)
        .map(|i| udp4_to(&format!("198.18.2.{i}")))
        .collect();
    t.resolve(false, 1, GLEAN, &many);
    t.poll();
    // A burst of a tenth of the rate (2 tokens) passes; the rest waits for tokens (the packets
    // stay queued, and the sweep retries).
    assert_eq!(t.take_sent().len(), 2);
    assert!(t.stats().requests_rate_limited >= 48);
    t.now += HZ / 10;
    t.sweep_all();
    assert_eq!(t.take_sent().len(), 2, "20 a second");
    t.assert_no_leak();
}

#[test]
fn unanswered_resolution_gives_up_and_frees_the_queue() {
    let mut t = Bench::with(config(), 64);
    let four: Vec<Vec<u8>> = (0..4).map(|_| udp4_to("198.18.2.77")).collect();
    t.resolve(false, 1, GLEAN, &four);
    t.poll();
    assert_eq!(t.pool.available(), 60);
    t.now += 3 * HZ;
    t.sweep_all();
    assert!(t.rows().is_empty(), "deleted after incomplete_seconds");
    assert_eq!(
        t.pool.available(),
        64,
        "queued buffers freed with the entry"
    );
    let s = t.stats();
    assert_eq!((s.resolution_failures, s.queue_drops), (1, 4));
    t.assert_no_leak();
}

#[test]
fn empty_pool_counts_the_request_and_still_queues() {
    let mut t = Bench::with(config(), 1);
    t.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.stats().request_alloc_failures, 1);
    assert_eq!(t.n.with(|n| n.queued()), 1);
    assert_eq!(t.poll(), 0);
    t.assert_no_leak();
}

#[test]
fn no_source_address_and_stale_adjacency_are_dropped() {
    let mut cfg = config();
    cfg.ports[1].ip4.clear();
    let mut t = Bench::with(cfg, 64);
    t.resolve(false, 1, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.drops(IP4_ARP, "no-source-address"), 1);
    t.resolve(false, 9, GLEAN, &[udp4_to("198.18.2.77")]);
    assert_eq!(t.drops(IP4_ARP, "unknown-port"), 1);
    t.resolve(false, 0, NEIGHBOUR_ADJACENCY | 5, &[udp4_to("198.18.1.5")]);
    assert_eq!(t.drops(IP4_ARP, "stale-adjacency"), 1);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

#[test]
fn flush_frees_every_queued_buffer() {
    let mut t = Bench::new();
    for host in ["198.18.2.77", "198.18.2.78"] {
        let three: Vec<Vec<u8>> = (0..3).map(|_| udp4_to(host)).collect();
        t.resolve(false, 1, GLEAN, &three);
    }
    t.resolve(true, 1, GLEAN, &[udp6_to("2001:db8:2::9")]);
    // Requests still in the outbox, packets in the queue.
    assert_eq!(t.pool.available(), t.pool.capacity() - 10);
    let freed = t.n.flush(&mut t.pool);
    assert_eq!(freed, 10);
    assert_eq!(t.pool.available(), t.pool.capacity());
}

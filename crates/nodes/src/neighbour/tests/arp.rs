//! ARP: requests answered, replies learned, malformed and foreign frames dropped and counted.

use super::*;

#[test]
fn arp_request_for_our_address_is_answered_byte_exact() {
    let mut t = Bench::new();
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    t.arp_in(0, &[req]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 0, "out of the receiving port");
    let expected = hex("020000000102 020000000001 0806
         0001 0800 06 04 0002 020000000001 c6120101 020000000102 c6120102
         000000000000000000000000000000000000");
    assert_eq!(sent[0].1, expected);
    assert_eq!(t.stats().arp_replies_sent, 1);
    // The requester is learned (stale: a request proves no reachability), usable at once.
    let row = t.row("198.18.1.2").expect("learned");
    assert_eq!(
        (row.port, row.mac, row.state),
        (0, Some(CLIENT), NeighbourState::Stale)
    );
    assert!(t.lookup4(0, "198.18.1.2").is_some());
    assert_eq!(t.total_drops(), 0);
    t.assert_no_leak();
}

#[test]
fn arp_reply_of_a_42_byte_request_is_padded_and_vlan_tag_kept() {
    let mut t = Bench::new();
    // A 42-byte request (kernels send them unpadded over veth) with an 802.1Q tag.
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    let mut tagged = req[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    tagged.extend_from_slice(&req[12..42]);
    let b = t.buffer(&tagged, 0);
    t.pool.meta_mut(b).l3_offset = 18;
    let (d, nexts) = call(
        &mut t.arp,
        &mut t.pool,
        &t.errors,
        &t.names,
        BASE_ARP,
        t.now,
        &[b],
    );
    t.finish(&[b], d, nexts);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    let f = &sent[0].1;
    assert_eq!(f.len(), 60);
    assert_eq!(&f[12..18], &[0x81, 0x00, 0x00, 0x0a, 0x08, 0x06]);
    assert_eq!(&f[18 + 6..18 + 8], &[0, 2]);
    assert_eq!(&f[18 + 8..18 + 14], &MAC0);
    assert!(f[46..].iter().all(|&x| x == 0));
    t.assert_no_leak();
}

#[test]
fn arp_for_another_address_is_not_answered_nor_learned() {
    let mut t = Bench::new();
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.9");
    // Our port-1 address asked on port 0 is not ours there either.
    let other_port = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.2.1");
    t.arp_in(0, &[req, other_port]);
    assert!(t.take_sent().is_empty());
    assert_eq!(t.drops(ARP_INPUT, "not-for-us"), 2);
    assert!(t.rows().is_empty(), "a request not for us creates nothing");
    t.assert_no_leak();
}

#[test]
fn gratuitous_arp_updates_only_known_entries() {
    let mut t = Bench::new();
    let garp = |mac| arp_frame(1, [0xff; 6], mac, "198.18.1.2", [0; 6], "198.18.1.2");
    t.arp_in(0, &[garp(CLIENT)]);
    assert!(t.rows().is_empty());
    assert_eq!(t.drops(ARP_INPUT, "not-for-us"), 1);
    // Once known (from a request to us), a gratuitous ARP moves it to a new MAC.
    let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    t.arp_in(0, &[req]);
    t.take_sent();
    let moved = [2, 0, 0, 0, 1, 0x99];
    t.arp_in(0, &[garp(moved)]);
    assert_eq!(t.drops(ARP_INPUT, "learned"), 1);
    assert_eq!(t.row("198.18.1.2").expect("entry").mac, Some(moved));
    assert!(t.take_sent().is_empty());
    t.assert_no_leak();
}

#[test]
fn arp_reply_to_us_creates_a_reachable_entry() {
    let mut t = Bench::new();
    let reply = arp_frame(2, MAC1, HOST, "198.18.2.77", MAC1, "198.18.2.1");
    t.arp_in(1, &[reply]);
    assert_eq!(t.drops(ARP_INPUT, "learned"), 1);
    let row = t.row("198.18.2.77").expect("entry");
    assert_eq!(
        (row.port, row.mac, row.state),
        (1, Some(HOST), NeighbourState::Reachable)
    );
    let id = t.lookup4(1, "198.18.2.77").expect("usable");
    let adj = t.n.with(|n| n.adjacency4(id, T0)).expect("adjacency");
    assert_eq!(adj, Adjacency::new(1, 1400, HOST, MAC1));
    assert!(t.lookup4(0, "198.18.2.77").is_none(), "keyed by port");
    assert_eq!(t.stats().learned, 1);
    t.assert_no_leak();
}

#[test]
fn malformed_arp_is_dropped_and_counted() {
    let good = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], "198.18.1.1");
    let with = |at: usize, bytes: &[u8]| {
        let mut f = good.clone();
        f[at..at + bytes.len()].copy_from_slice(bytes);
        f
    };
    let cases = vec![
        (good[..41].to_vec(), "malformed"),
        (good[..20].to_vec(), "malformed"),
        (with(14, &[0, 6]), "malformed"),       // hardware type 6
        (with(16, &[0x86, 0xdd]), "malformed"), // protocol IPv6
        (with(18, &[8]), "malformed"),          // hlen
        (with(19, &[16]), "malformed"),         // plen
        (with(20, &[0, 3]), "unsupported-op"),  // RARP request
        (with(22, &[0xff; 6]), "bad-sender"),   // broadcast sender MAC
        (with(22, &[1, 0, 0x5e, 0, 0, 1]), "bad-sender"),
        (with(28, &[198, 18, 1, 1]), "address-conflict"),
    ];
    for (frame, reason) in cases {
        let mut t = Bench::new();
        t.arp_in(0, &[frame]);
        assert!(t.take_sent().is_empty(), "{reason}");
        assert_eq!(t.drops(ARP_INPUT, reason), 1, "{reason}");
        assert!(t.rows().is_empty(), "{reason}: nothing learned");
        t.assert_no_leak();
    }
    let mut t = Bench::new();
    t.arp_in(7, &[good]);
    assert_eq!(t.drops(ARP_INPUT, "unknown-port"), 1);
    t.assert_no_leak();
}

#[test]
fn arp_probe_from_zero_is_answered_without_learning() {
    let mut t = Bench::new();
    let probe = arp_frame(1, [0xff; 6], CLIENT, "0.0.0.0", [0; 6], "198.18.1.1");
    t.arp_in(0, &[probe]);
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0].1[32..42], &[2, 0, 0, 0, 1, 2, 0, 0, 0, 0]);
    assert!(t.rows().is_empty());
    t.assert_no_leak();
}

#[test]
fn own_addresses_changed_live_are_answered_after_the_next_maintenance() {
    let mut t = Bench::new();
    let addrs = Arc::new(PortAddresses::new(vec![
        (vec![(v4("198.18.1.1"), 24)], Vec::new()),
        (vec![(v4("198.18.2.1"), 24)], Vec::new()),
    ]));
    t.n.with(|n| n.set_port_addresses(addrs.clone()));
    let ask = |t: &mut Bench, ip: &str| {
        let req = arp_frame(1, [0xff; 6], CLIENT, "198.18.1.2", [0; 6], ip);
        t.arp_in(0, &[req]);
        t.take_sent().len()
    };
    assert_eq!(ask(&mut t, "198.18.1.1"), 1);
    assert_eq!(ask(&mut t, "198.18.1.5"), 0);
    // Port 0 moves to 198.18.1.5: the old address is no longer answered, the new one is.
    addrs.set(0, (vec![(v4("198.18.1.5"), 24)], Vec::new()));
    let now = t.now;
    t.n.with(|n| n.maintain(&mut t.pool, now + HZ));
    assert_eq!(ask(&mut t, "198.18.1.1"), 0);
    assert_eq!(ask(&mut t, "198.18.1.5"), 1);
    t.assert_no_leak();
}

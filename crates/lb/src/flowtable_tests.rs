//! Tests of the LB's use of the session table: timeouts per protocol with FIN/RST and SYN,
//! live counts per VIP and AS slot, NAT reverse entries (never counted against a VIP), the
//! tables' sizes, and the fast lane's keys. The table itself is tested in `session`.

use super::*;
use proptest::prelude::*;
use session::{Insert, SessionTable, MAX_BUCKETS, WAYS};

const KEY: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
];

fn tuple(i: u32, protocol: u8) -> FiveTuple {
    let b = i.to_be_bytes();
    FiveTuple::v4([198, 18, b[2], b[3]], [198, 19, 0, 1], protocol, 1024, 80)
}

fn put(t: &mut SessionTable<AsRef>, vip: u32, tu: &FiveTuple, slot: u32, now: u32) -> Insert {
    let h = t.hash(&flow_key(vip, tu));
    t.insert(h, AsRef { slot, gen: 1 }, class_of(tu.protocol), now)
}

fn get(t: &mut SessionTable<AsRef>, tu: &FiveTuple, now: u32, kind: Kind) -> Option<AsRef> {
    let h = t.hash(&flow_key(0, tu));
    t.lookup(h, now, touch_for(kind))
}

#[test]
fn timeouts_per_protocol_and_fin_rst_then_syn() {
    let to = Timeouts {
        tcp: 100,
        udp: 10,
        other: 5,
        closing: 2,
    };
    let mut t = SessionTable::<AsRef>::with_key(64, to.classes(), 1, 1, KEY).expect("table");
    let (tc, ud, ot) = (tuple(1, 6), tuple(2, 17), tuple(3, 47));
    for x in [&tc, &ud, &ot] {
        put(&mut t, 0, x, 0, 1000);
    }
    assert!(get(&mut t, &ot, 1004, Kind::Normal).is_some());
    assert!(
        get(&mut t, &ot, 1010, Kind::Normal).is_none(),
        "other: 5 s after 1004"
    );
    assert!(get(&mut t, &ud, 1009, Kind::Normal).is_some());
    assert!(get(&mut t, &ud, 1020, Kind::Normal).is_none());
    // FIN shortens to 2 s, refreshes do not lengthen it again, a SYN reopens it.
    assert!(get(&mut t, &tc, 1050, Kind::FinRst).is_some());
    assert!(get(&mut t, &tc, 1051, Kind::Normal).is_some());
    assert!(
        get(&mut t, &tc, 1052, Kind::Normal).is_none(),
        "closing: 2 s after 1050"
    );
    put(&mut t, 0, &tc, 0, 1060);
    assert!(get(&mut t, &tc, 1061, Kind::FinRst).is_some());
    assert!(get(&mut t, &tc, 1062, Kind::Syn).is_some());
    assert!(
        get(&mut t, &tc, 1150, Kind::Normal).is_some(),
        "reopened: TCP timeout"
    );
}

/// Flows count per VIP and AS slot; NAT reverse keys are never counted against a VIP.
#[test]
fn live_counts_per_vip_and_slot() {
    let (mut flows, mut nat) = worker_tables(1024, 8, 16).expect("tables");
    let a = tuple(1, 6);
    assert_eq!(put(&mut flows, 0, &a, 3, 10), Insert::New);
    assert_eq!(put(&mut flows, 1, &a, 3, 10), Insert::New);
    assert_eq!(put(&mut flows, 1, &a, 4, 11), Insert::Replaced);
    let c = flows.counts();
    assert_eq!((c.total(), c.group(0), c.group(1)), (2, 1, 1));
    assert_eq!((c.bin(3), c.bin(4)), (1, 1));
    let h = nat.hash(&reverse_key(&a));
    assert_eq!(
        nat.insert(h, NatReverse::default(), CLASS_TCP, 10),
        Insert::New
    );
    assert_eq!(reverse_key(&a).scope(), REVERSE);
    let n = nat.counts();
    assert_eq!((n.total(), n.group(0), n.bin(0)), (1, 0, 0));
}

#[test]
fn nat_reverse_entries() {
    let mut t = SessionTable::<NatReverse>::with_key(64, Timeouts::default().classes(), 0, 0, KEY)
        .expect("t");
    let fwd = FiveTuple::v4([198, 18, 0, 1], [198, 18, 2, 1], 6, 40000, 8080);
    let reply = fwd.reversed();
    let h = t.hash(&reverse_key(&reply));
    let vip = FiveTuple::v4([0; 4], [198, 18, 1, 1], 6, 0, 80).dst;
    let v = NatReverse {
        vip: 5,
        addr: vip,
        port: 80,
    };
    assert_eq!(t.insert(h, v, class_of(6), 10), Insert::New);
    assert_eq!(t.lookup(h, 11, Touch::Refresh), Some(v));
    assert_eq!(t.counts().total(), 1);
}

#[test]
fn the_largest_accepted_buckets_setting_fits_the_largest_table() {
    let entries = crate::model::MAX_BUCKETS as usize;
    assert!(session::buckets_for(entries) * WAYS >= entries);
    assert!(session::buckets_for(entries) <= MAX_BUCKETS);
    assert_eq!(1usize << crate::model::MAX_BUCKETS_LOG2, entries);
}

/// The tables `worker_tables` makes are the ones `worker_tables_bytes` counts.
#[test]
fn worker_tables_are_the_size_the_budget_counts() {
    let (flows, nat) = worker_tables(3000, 1, 1).expect("tables");
    assert_eq!(flows.capacity(), 1024 * WAYS);
    assert_eq!(nat.capacity(), 256 * WAYS);
    // 1024 buckets of one line, 256 of two (a NAT reverse value is 24 bytes).
    assert_eq!(worker_tables_bytes(3000), 1024 * 64 + 256 * 128);
    let e = FlowTableError(session::SessionTableError::Alloc { bytes: 1 }).to_string();
    assert!(e.contains("lb conf buckets"), "{e}");
}

#[test]
fn classes_and_touches() {
    let c = Timeouts {
        tcp: 1,
        udp: 2,
        other: 3,
        closing: 4,
    }
    .classes();
    assert_eq!(&c[..4], &[1, 2, 3, 4]);
    assert!(c[4..].iter().all(|&t| t == 3));
    assert_eq!(
        (class_of(6), class_of(17), class_of(1)),
        (CLASS_TCP, CLASS_UDP, CLASS_OTHER)
    );
    assert_eq!(touch_for(Kind::Syn), Touch::Set(CLASS_TCP));
    assert_eq!(touch_for(Kind::FinRst), Touch::Shorten(CLASS_CLOSING));
    assert_eq!(touch_for(Kind::Normal), Touch::Refresh);
}

proptest! {
    /// The fast lane's key of a plain IPv4 packet is the key the general path makes of it, so
    /// either finds the flows the other made.
    #[test]
    fn plain4_keys_equal_tuple_keys(
        vip in any::<u32>(), src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
        sp in any::<u16>(), dp in any::<u16>(), tcp in any::<bool>(),
    ) {
        let p = crate::parse::Plain4 {
            src,
            dst,
            src_port: sp,
            dst_port: dp,
            len: 40,
            protocol: if tcp { 6 } else { 17 },
            kind: crate::parse::Kind::Normal,
        };
        prop_assert_eq!(plain4_key(vip, &p), flow_key(vip, &p.tuple()));
    }
}

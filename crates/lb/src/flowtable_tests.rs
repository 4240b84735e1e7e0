//! Tests of the flow table: hits and misses, timeouts per class, FIN/RST and SYN, a full
//! bucket, reuse of expired places, sweep with exact counts, NAT reverse entries, and a
//! model-based proptest.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

const KEY: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
];

fn tuple(i: u32, protocol: u8) -> FiveTuple {
    let b = i.to_be_bytes();
    FiveTuple::v4(
        [198, 18, b[2], b[3]],
        [198, 19, 0, 1],
        protocol,
        (i >> 16) as u16 + 1024,
        80,
    )
}

fn table(buckets: usize) -> FlowTable<AsRef> {
    FlowTable::with_key(buckets, Timeouts::default(), 8, 16, KEY).expect("table")
}

fn put(t: &mut FlowTable<AsRef>, vip: u32, tu: &FiveTuple, slot: u32, now: u32) -> Insert {
    let k = FlowKey::new(vip, tu);
    let h = t.hash(&k);
    t.insert(&k, h, AsRef { slot, gen: 1 }, now)
}

fn get(
    t: &mut FlowTable<AsRef>,
    vip: u32,
    tu: &FiveTuple,
    now: u32,
    touch: Touch,
) -> Option<AsRef> {
    let k = FlowKey::new(vip, tu);
    let h = t.hash(&k);
    t.lookup(&k, h, now, touch)
}

#[test]
fn buckets_must_be_a_power_of_two() {
    for bad in [0, 3, 1000, MAX_BUCKETS * 2] {
        let e = FlowTable::<AsRef>::new(bad, Timeouts::default(), 1, 1).err();
        assert_eq!(e, Some(FlowTableError::Buckets(bad)));
    }
    assert!(e_msg().contains("power of two"));
    assert_eq!(table(1024).capacity(), 3072);
    assert_eq!((buckets_for(1), buckets_for(3), buckets_for(4)), (1, 1, 2));
    assert_eq!(buckets_for(1 << 20), 1 << 19);
    assert_eq!(buckets_for(usize::MAX / 2), MAX_BUCKETS);
}

fn e_msg() -> String {
    FlowTableError::Buckets(3).to_string()
}

#[test]
fn hit_miss_and_vip_is_part_of_the_key() {
    let mut t = table(1024);
    let a = tuple(1, 6);
    assert_eq!(get(&mut t, 0, &a, 10, Touch::Refresh), None);
    assert_eq!(put(&mut t, 0, &a, 3, 10), Insert::New);
    assert_eq!(
        get(&mut t, 0, &a, 11, Touch::Refresh),
        Some(AsRef { slot: 3, gen: 1 })
    );
    assert_eq!(get(&mut t, 1, &a, 11, Touch::Refresh), None);
    assert_eq!(put(&mut t, 0, &a, 4, 12), Insert::Replaced);
    assert_eq!(
        get(&mut t, 0, &a, 12, Touch::Refresh).map(|v| v.slot),
        Some(4)
    );
    let c = t.counts();
    assert_eq!((c.total(), c.vip(0), c.slot(3), c.slot(4)), (1, 1, 0, 1));
}

#[test]
fn timeouts_per_protocol_refresh_and_close() {
    let to = Timeouts {
        tcp: 100,
        udp: 10,
        other: 5,
        closing: 2,
    };
    let mut t = FlowTable::<AsRef>::with_key(64, to, 1, 1, KEY).expect("table");
    let (tc, ud, ot) = (tuple(1, 6), tuple(2, 17), tuple(3, 47));
    for x in [&tc, &ud, &ot] {
        put(&mut t, 0, x, 0, 1000);
    }
    assert!(get(&mut t, 0, &ot, 1004, Touch::Refresh).is_some());
    assert!(
        get(&mut t, 0, &ot, 1010, Touch::Refresh).is_none(),
        "other: 5 s after 1004"
    );
    assert!(get(&mut t, 0, &ud, 1009, Touch::Refresh).is_some());
    assert!(get(&mut t, 0, &ud, 1020, Touch::Refresh).is_none());
    // FIN shortens to 2 s, refreshes do not lengthen it again, a SYN reopens it.
    assert!(get(&mut t, 0, &tc, 1050, Touch::Close).is_some());
    assert!(get(&mut t, 0, &tc, 1051, Touch::Refresh).is_some());
    assert!(
        get(&mut t, 0, &tc, 1052, Touch::Refresh).is_none(),
        "closing: 2 s after 1050"
    );
    put(&mut t, 0, &tc, 0, 1060);
    assert!(get(&mut t, 0, &tc, 1061, Touch::Close).is_some());
    assert!(get(&mut t, 0, &tc, 1062, Touch::Open).is_some());
    assert!(
        get(&mut t, 0, &tc, 1150, Touch::Refresh).is_some(),
        "reopened: TCP timeout"
    );
}

/// A 1-bucket table: every key has bucket 0 twice.
#[test]
fn full_bucket_refuses_and_expired_places_are_reused() {
    let mut t = FlowTable::<AsRef>::with_key(1, Timeouts::default(), 2, 2, KEY).expect("t");
    for i in 0..3 {
        assert_eq!(put(&mut t, 0, &tuple(i, 17), 1, 100), Insert::New);
    }
    assert_eq!(put(&mut t, 0, &tuple(9, 17), 1, 100), Insert::Full);
    let c = t.counts();
    assert_eq!((c.total(), c.refused()), (3, 1));
    for i in 0..3 {
        assert!(
            get(&mut t, 0, &tuple(i, 17), 101, Touch::Refresh).is_some(),
            "never evicted"
        );
    }
    // After the timeout every place is free again; counts follow the reuse.
    assert_eq!(put(&mut t, 1, &tuple(9, 17), 0, 200), Insert::New);
    assert_eq!(
        (c.total(), c.vip(0), c.vip(1), c.slot(1), c.slot(0)),
        (3, 2, 1, 2, 1)
    );
}

/// Keys of different VIPs never match each other, whatever their fingerprints; reverse keys
/// are never counted against a VIP.
#[test]
fn the_vip_id_is_matched_exactly() {
    let mut t = table(1);
    let a = tuple(1, 6);
    assert_eq!(put(&mut t, 0, &a, 1, 10), Insert::New);
    assert_eq!(put(&mut t, 1, &a, 2, 10), Insert::New);
    assert_eq!(
        get(&mut t, 0, &a, 11, Touch::Refresh).map(|v| v.slot),
        Some(1)
    );
    assert_eq!(
        get(&mut t, 1, &a, 11, Touch::Refresh).map(|v| v.slot),
        Some(2)
    );
    assert_eq!(get(&mut t, 2, &a, 11, Touch::Refresh), None);
    let k = FlowKey::reverse(&a);
    let h = t.hash(&k);
    assert_eq!(t.insert(&k, h, AsRef { slot: 3, gen: 0 }, 10), Insert::New);
    let c = t.counts();
    assert_eq!((c.total(), c.vip(0), c.vip(1), c.slot(3)), (3, 1, 1, 1));
    assert_eq!(t.hash(&k).tag >> VIP_SHIFT, u64::from(VIP_NONE));
}

/// 300k flows at half load: every one found again with its own value (no false match between
/// the fingerprints of live flows, no lost entry).
#[test]
fn many_flows_each_find_their_own_entry() {
    let n = 300_000u32;
    let mut t = FlowTable::<AsRef>::with_key(
        buckets_for(2 * n as usize),
        Timeouts::default(),
        8,
        1 << 20,
        KEY,
    )
    .expect("t");
    for i in 0..n {
        let k = FlowKey::new(i % 8, &tuple(i, 6));
        let h = t.hash(&k);
        assert_ne!(
            t.insert(&k, h, AsRef { slot: i, gen: i }, 5),
            Insert::Full,
            "flow {i}"
        );
    }
    for i in 0..n {
        let k = FlowKey::new(i % 8, &tuple(i, 6));
        let h = t.hash(&k);
        assert_eq!(
            t.lookup(&k, h, 6, Touch::Refresh),
            Some(AsRef { slot: i, gen: i })
        );
    }
    assert_eq!(t.counts().total(), n);
}

#[test]
fn sweep_reclaims_expired_and_refused_entries_with_exact_counts() {
    let mut t = table(256);
    for i in 0..500 {
        put(&mut t, i % 2, &tuple(i, 6), i % 4, 100);
    }
    let c = t.counts();
    let stored = c.total();
    // 500 flows in 768 places (65% load): a rare key finds both its buckets full even after
    // moving an entry (refused, no eviction).
    assert!(stored >= 495, "{stored} stored");
    assert_eq!(u64::from(stored) + c.refused(), 500);
    // A sweep at a time when nothing expired, keeping all: nothing changes.
    assert_eq!(t.sweep(120, 256, |_| true), 0);
    // Flush slot 3: sweep reclaims its entries only.
    let before3 = c.slot(3);
    let n = t.sweep(120, 256, |v| v.slot != 3);
    assert_eq!(
        (n as u32, c.slot(3), c.total()),
        (before3, 0, stored - before3)
    );
    // Half a sweep round after expiry reclaims about half; a whole round all.
    let half = t.sweep(1000, 128, |_| true);
    assert!(half > 0 && (half as u32) < c.total() + half as u32);
    t.sweep(1000, 128, |_| true);
    assert_eq!((c.total(), c.vip(0), c.vip(1), c.slot(0)), (0, 0, 0, 0));
}

#[test]
fn remove_uncounts() {
    let mut t = table(16);
    let a = tuple(5, 6);
    put(&mut t, 2, &a, 7, 1);
    let k = FlowKey::new(2, &a);
    let h = t.hash(&k);
    assert!(t.remove(h));
    assert!(!t.remove(h));
    assert_eq!(
        (t.counts().total(), t.counts().vip(2), t.counts().slot(7)),
        (0, 0, 0)
    );
}

#[test]
fn nat_reverse_entries() {
    let mut t = FlowTable::<NatReverse>::with_key(64, Timeouts::default(), 0, 0, KEY).expect("t");
    let fwd = FiveTuple::v4([198, 18, 0, 1], [198, 18, 2, 1], 6, 40000, 8080);
    let reply = fwd.reversed();
    let k = FlowKey::reverse(&reply);
    let h = t.hash(&k);
    let vip = FiveTuple::v4([0; 4], [198, 18, 1, 1], 6, 0, 80).dst;
    let v = NatReverse {
        vip: 5,
        addr: vip,
        port: 80,
    };
    assert_eq!(t.insert(&k, h, v, 10), Insert::New);
    assert_eq!(t.lookup(&k, h, 11, Touch::Refresh), Some(v));
    assert_eq!(k.vip(), FlowKey::REVERSE);
    assert_eq!(t.counts().total(), 1);
}

#[test]
fn batch_lookup_matches_single_lookups() {
    let mut t = table(4096);
    let keys: Vec<FlowKey> = (0..300).map(|i| FlowKey::new(1, &tuple(i, 6))).collect();
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 != 0) {
        let h = t.hash(k);
        t.insert(
            k,
            h,
            AsRef {
                slot: i as u32,
                gen: 0,
            },
            5,
        );
    }
    let hashes: Vec<FlowHash> = keys.iter().map(|k| t.hash(k)).collect();
    let touch = vec![Touch::Refresh; keys.len()];
    let mut out = vec![None; keys.len()];
    t.lookup_batch(&keys, &hashes, &touch, 6, &mut out);
    for (i, o) in out.iter().enumerate() {
        if i < BATCH {
            let want = (i % 3 != 0).then_some(AsRef {
                slot: i as u32,
                gen: 0,
            });
            assert_eq!(*o, want, "key {i}");
        } else {
            assert_eq!(*o, None, "beyond BATCH: untouched");
        }
    }
}

#[test]
fn keys_differ_per_table() {
    let a = FlowTable::<AsRef>::new(16, Timeouts::default(), 0, 0).expect("a");
    let b = FlowTable::<AsRef>::new(16, Timeouts::default(), 0, 0).expect("b");
    let k = FlowKey::new(0, &tuple(1, 6));
    assert_ne!(a.hash(&k), b.hash(&k));
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, u32),
    Lookup(u8),
    Close(u8),
    Sweep(u8),
    Tick(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), 0u32..4).prop_map(|(k, s)| Op::Insert(k % 40, s)),
        any::<u8>().prop_map(|k| Op::Lookup(k % 40)),
        any::<u8>().prop_map(|k| Op::Close(k % 40)),
        any::<u8>().prop_map(Op::Sweep),
        (0u8..30).prop_map(Op::Tick),
    ]
}

proptest! {
    /// Against a model (a map with expiry times): a lookup never returns a wrong value and
    /// never misses a live entry (4 buckets x 3 ways for 40 keys: inserts may be refused, and
    /// the model forgets those); after a whole sweep round the count is exactly the live ones.
    #[test]
    fn behaves_like_a_map_with_expiry(ops in proptest::collection::vec(op(), 1..200)) {
        let to = Timeouts { tcp: 20, udp: 10, other: 10, closing: 3 };
        let mut t = FlowTable::<AsRef>::with_key(4, to, 1, 4, KEY).expect("t");
        // key -> (slot, expiry, closing)
        let mut model: HashMap<u8, (u32, u32, bool)> = HashMap::new();
        let mut now = 1u32;
        let tu = |k: u8| tuple(u32::from(k), if k.is_multiple_of(2) { 6 } else { 17 });
        let timeout = |k: u8| if k.is_multiple_of(2) { 20 } else { 10 };
        for o in ops {
            match o {
                Op::Insert(k, s) => match put(&mut t, 0, &tu(k), s, now) {
                    Insert::Full => {
                        model.remove(&k);
                    }
                    _ => {
                        model.insert(k, (s, now + timeout(k), false));
                    }
                },
                Op::Lookup(k) | Op::Close(k) => {
                    let close = matches!(o, Op::Close(_)) && k.is_multiple_of(2);
                    let touch = if close { Touch::Close } else { Touch::Refresh };
                    let got = get(&mut t, 0, &tu(k), now, touch);
                    let live = model.get(&k).filter(|m| m.1 > now).map(|m| m.0);
                    prop_assert_eq!(got.map(|v| v.slot), live, "key {}", k);
                    if let (Some(_), Some(m)) = (live, model.get_mut(&k)) {
                        if close {
                            m.1 = m.1.min(now + 3);
                            m.2 = true;
                        } else if !m.2 {
                            m.1 = now + timeout(k);
                        }
                    }
                }
                Op::Sweep(n) => {
                    t.sweep(now, usize::from(n % 5), |_| true);
                }
                Op::Tick(d) => now += u32::from(d),
            }
        }
        t.sweep(now, 4, |_| true);
        let live = model.values().filter(|m| m.1 > now).count() as u32;
        prop_assert_eq!(t.counts().total(), live);
    }
}

#[test]
fn the_largest_accepted_buckets_setting_fits_the_largest_table() {
    let entries = crate::model::MAX_BUCKETS as usize;
    assert!(buckets_for(entries) * WAYS >= entries);
    assert!(buckets_for(entries) <= MAX_BUCKETS);
    assert_eq!(1usize << crate::model::MAX_BUCKETS_LOG2, entries);
}

/// A table sized by `buckets_for(n)` takes n flows without refusing one: with n a power of
/// two the load is 2/3 (the lb bench's 1M flows in the default 1M-entry setting), which the
/// cuckoo moves fill.
#[test]
fn a_table_sized_for_n_flows_takes_n_flows() {
    let n = 1u32 << 18;
    let mut t = FlowTable::<AsRef>::with_key(
        buckets_for(n as usize),
        Timeouts::default(),
        8,
        1 << 20,
        KEY,
    )
    .expect("t");
    let full = (0..n)
        .filter(|&i| {
            let k = FlowKey::new(i % 8, &tuple(i, 17));
            let h = t.hash(&k);
            t.insert(&k, h, AsRef { slot: i, gen: i }, 5) == Insert::Full
        })
        .count();
    assert_eq!(
        full,
        0,
        "refused at load {:.2}",
        f64::from(n) / t.capacity() as f64
    );
    assert_eq!(t.counts().total(), n);
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
        prop_assert_eq!(FlowKey::plain4(vip, &p), FlowKey::new(vip, &p.tuple()));
    }
}

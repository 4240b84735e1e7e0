//! Tests of the session table: hits and misses, the scope and group as part of the key, class
//! timeouts with refresh, shorten and set, a full bucket, reuse of expired places, removal,
//! batched lookups, in-place values, and a model-based proptest.

use super::*;
use crate::tuple::FiveTuple;
use proptest::prelude::*;
use std::collections::HashMap;

const KEY: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
];

/// Classes of these tests: by protocol, and a short one for closing TCP flows.
const TCP: u8 = 0;
const UDP: u8 = 1;
const OTHER: u8 = 2;
const CLOSING: u8 = 3;

fn timeouts(tcp: u32, udp: u32, other: u32, closing: u32) -> [u32; CLASSES] {
    let mut t = [0; CLASSES];
    t[..4].copy_from_slice(&[tcp, udp, other, closing]);
    t
}

fn class_of(protocol: u8) -> u8 {
    match protocol {
        6 => TCP,
        17 => UDP,
        _ => OTHER,
    }
}

/// A value that counts in bin `slot`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    slot: u32,
    gen: u32,
}

impl SessionValue for Slot {
    fn bin(&self) -> u32 {
        self.slot
    }
}

pub(crate) fn tuple(i: u32, protocol: u8) -> FiveTuple {
    let b = i.to_be_bytes();
    FiveTuple::v4(
        [198, 18, b[2], b[3]],
        [198, 19, 0, 1],
        protocol,
        (i >> 16) as u16 + 1024,
        80,
    )
}

fn table(buckets: usize) -> SessionTable<Slot> {
    SessionTable::with_key(buckets, timeouts(40, 40, 40, 4), 8, 16, KEY).expect("table")
}

fn put(t: &mut SessionTable<Slot>, scope: u32, tu: &FiveTuple, slot: u32, now: u32) -> Insert {
    let h = t.hash(&SessionKey::new(scope, tu));
    t.insert(h, Slot { slot, gen: 1 }, class_of(tu.protocol), now)
}

fn get(
    t: &mut SessionTable<Slot>,
    scope: u32,
    tu: &FiveTuple,
    now: u32,
    touch: Touch,
) -> Option<Slot> {
    let h = t.hash(&SessionKey::new(scope, tu));
    t.lookup(h, now, touch)
}

#[test]
fn buckets_must_be_a_power_of_two() {
    for bad in [0, 3, 1000, MAX_BUCKETS * 2] {
        let e = SessionTable::<u64>::new(bad, [1; CLASSES], 1, 1).err();
        assert_eq!(e, Some(SessionTableError::Buckets(bad)));
    }
    assert!(SessionTableError::Buckets(3)
        .to_string()
        .contains("power of two"));
    assert_eq!(table(1024).capacity(), 3072);
    assert_eq!((buckets_for(1), buckets_for(3), buckets_for(4)), (1, 1, 2));
    assert_eq!(buckets_for(1 << 20), 1 << 19);
    assert_eq!(buckets_for(usize::MAX / 2), MAX_BUCKETS);
    assert_eq!(table_bytes::<u64>(16), 16 * 64);
}

#[test]
fn hit_miss_and_the_scope_is_part_of_the_key() {
    let mut t = table(1024);
    let a = tuple(1, 6);
    assert_eq!(get(&mut t, 0, &a, 10, Touch::Refresh), None);
    assert_eq!(put(&mut t, 0, &a, 3, 10), Insert::New);
    assert_eq!(
        get(&mut t, 0, &a, 11, Touch::Refresh),
        Some(Slot { slot: 3, gen: 1 })
    );
    assert_eq!(get(&mut t, 1, &a, 11, Touch::Refresh), None);
    assert_eq!(put(&mut t, 0, &a, 4, 12), Insert::Replaced);
    assert_eq!(
        get(&mut t, 0, &a, 12, Touch::Refresh).map(|v| v.slot),
        Some(4)
    );
    let c = t.counts();
    assert_eq!((c.total(), c.group(0), c.bin(3), c.bin(4)), (1, 1, 0, 1));
}

#[test]
fn ipv4_and_ipv6_tuples_with_equal_bytes_are_different_keys() {
    let mut t = table(64);
    let a = tuple(1, 17);
    let a6 = FiveTuple { ip6: true, ..a };
    put(&mut t, 0, &a, 1, 10);
    assert_eq!(get(&mut t, 0, &a6, 10, Touch::Refresh), None);
    put(&mut t, 0, &a6, 2, 10);
    assert_eq!(
        get(&mut t, 0, &a, 10, Touch::Refresh).map(|v| v.slot),
        Some(1)
    );
    assert_eq!(
        get(&mut t, 0, &a6, 10, Touch::Refresh).map(|v| v.slot),
        Some(2)
    );
}

#[test]
fn class_timeouts_refresh_shorten_and_set() {
    let to = timeouts(100, 10, 5, 2);
    let mut t = SessionTable::<Slot>::with_key(64, to, 1, 1, KEY).expect("table");
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
    // Shortened to 2 s; refreshes do not lengthen it again; a Set reopens it.
    assert!(get(&mut t, 0, &tc, 1050, Touch::Shorten(CLOSING)).is_some());
    assert!(get(&mut t, 0, &tc, 1051, Touch::Refresh).is_some());
    assert!(
        get(&mut t, 0, &tc, 1052, Touch::Refresh).is_none(),
        "closing: 2 s after 1050"
    );
    put(&mut t, 0, &tc, 0, 1060);
    assert!(get(&mut t, 0, &tc, 1061, Touch::Shorten(CLOSING)).is_some());
    assert!(get(&mut t, 0, &tc, 1062, Touch::Set(TCP)).is_some());
    assert!(
        get(&mut t, 0, &tc, 1150, Touch::Refresh).is_some(),
        "set back: TCP timeout"
    );
    // A shorten never lengthens: a 2 s class on an entry expiring in 1 s keeps 1 s.
    put(&mut t, 0, &ot, 0, 2000);
    assert!(get(&mut t, 0, &ot, 2004, Touch::Shorten(CLOSING)).is_some());
    assert!(get(&mut t, 0, &ot, 2005, Touch::Refresh).is_none());
}

/// Classes past the first four work alike (connection tracking's states), and a class is
/// taken modulo `CLASSES`.
#[test]
fn every_class_has_its_own_timeout() {
    let mut to = [0; CLASSES];
    for (c, s) in to.iter_mut().enumerate() {
        *s = 10 * (c as u32 + 1);
    }
    let mut t = SessionTable::<u64>::with_key(256, to, 0, 0, KEY).expect("table");
    for c in 0..CLASSES as u8 {
        let h = t.hash(&SessionKey::new(u32::from(c), &tuple(1, 6)));
        assert_eq!(t.insert(h, u64::from(c), c, 100), Insert::New);
        let last = 100 + 10 * (u32::from(c) + 1);
        assert!(t
            .lookup(h, last - 1, Touch::Set(c + CLASSES as u8))
            .is_some());
        assert!(t
            .lookup(h, last - 1 + 10 * (u32::from(c) + 1), Touch::Refresh)
            .is_none());
    }
}

/// A 1-bucket table: every key has bucket 0 twice.
#[test]
fn full_bucket_refuses_and_expired_places_are_reused() {
    let mut t = SessionTable::<Slot>::with_key(1, timeouts(40, 40, 40, 4), 2, 2, KEY).expect("t");
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
        (c.total(), c.group(0), c.group(1), c.bin(1), c.bin(0)),
        (3, 2, 1, 2, 1)
    );
}

/// Keys of different groups never match each other, whatever their fingerprints; scopes past
/// `GROUPS` are never counted per group.
#[test]
fn the_group_is_matched_exactly() {
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
    let k = SessionKey::new(u32::MAX, &a);
    let h = t.hash(&k);
    assert_eq!(t.insert(h, Slot { slot: 3, gen: 0 }, TCP, 10), Insert::New);
    let c = t.counts();
    assert_eq!((c.total(), c.group(0), c.group(1), c.bin(3)), (3, 1, 1, 1));
    assert_eq!(t.hash(&k).tag >> GROUP_SHIFT, u64::from(GROUPS));
}

/// 300k keys at half load: every one found again with its own value (no false match between
/// the fingerprints of live entries, no lost entry).
#[test]
fn many_keys_each_find_their_own_entry() {
    let n = 300_000u32;
    let mut t = SessionTable::<Slot>::with_key(
        buckets_for(2 * n as usize),
        timeouts(40, 40, 40, 4),
        8,
        1 << 20,
        KEY,
    )
    .expect("t");
    for i in 0..n {
        let h = t.hash(&SessionKey::new(i % 8, &tuple(i, 6)));
        let v = Slot { slot: i, gen: i };
        assert_ne!(t.insert(h, v, TCP, 5), Insert::Full, "key {i}");
    }
    for i in 0..n {
        let h = t.hash(&SessionKey::new(i % 8, &tuple(i, 6)));
        assert_eq!(
            t.lookup(h, 6, Touch::Refresh),
            Some(Slot { slot: i, gen: i })
        );
    }
    assert_eq!(t.counts().total(), n);
}

#[test]
fn remove_uncounts() {
    let mut t = table(16);
    let a = tuple(5, 6);
    put(&mut t, 2, &a, 7, 1);
    let h = t.hash(&SessionKey::new(2, &a));
    assert!(t.remove(h));
    assert!(!t.remove(h));
    assert_eq!(
        (t.counts().total(), t.counts().group(2), t.counts().bin(7)),
        (0, 0, 0)
    );
}

#[test]
fn lookup_mut_changes_the_value_in_place() {
    let mut t = SessionTable::<u64>::with_key(16, [10; CLASSES], 0, 0, KEY).expect("t");
    let h = t.hash(&SessionKey::new(0, &tuple(1, 17)));
    assert!(t.lookup_mut(h, 1, Touch::Refresh).is_none());
    t.insert(h, 0, UDP, 1);
    for now in 2..12 {
        *t.lookup_mut(h, now, Touch::Refresh).expect("live") += 100;
    }
    assert_eq!(t.lookup(h, 12, Touch::Refresh), Some(1000));
}

#[test]
fn batch_lookup_matches_single_lookups() {
    let mut t = table(4096);
    let hashes: Vec<SessionHash> = (0..300)
        .map(|i| t.hash(&SessionKey::new(1, &tuple(i, 6))))
        .collect();
    for (i, &h) in hashes.iter().enumerate().filter(|(i, _)| i % 3 != 0) {
        let v = Slot {
            slot: i as u32,
            gen: 0,
        };
        t.insert(h, v, TCP, 5);
    }
    let touch = vec![Touch::Refresh; hashes.len()];
    let mut out = vec![None; hashes.len()];
    t.lookup_batch(&hashes, &touch, 6, &mut out);
    for (i, o) in out.iter().enumerate() {
        if i < BATCH {
            let want = (i % 3 != 0).then_some(Slot {
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
    let a = SessionTable::<u64>::new(16, [1; CLASSES], 0, 0).expect("a");
    let b = SessionTable::<u64>::new(16, [1; CLASSES], 0, 0).expect("b");
    let k = SessionKey::new(0, &tuple(1, 6));
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
        let mut t = SessionTable::<Slot>::with_key(4, timeouts(20, 10, 10, 3), 1, 4, KEY)
            .expect("t");
        // key -> (slot, expiry, shortened)
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
                    let touch = if close { Touch::Shorten(CLOSING) } else { Touch::Refresh };
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

/// A table sized by `buckets_for(n)` takes n entries without refusing one: with n a power of
/// two the load is 2/3 (the lb bench's 1M flows in the default 1M-entry setting), which the
/// cuckoo moves fill.
#[test]
fn a_table_sized_for_n_entries_takes_n_entries() {
    let n = 1u32 << 18;
    let mut t = SessionTable::<Slot>::with_key(
        buckets_for(n as usize),
        timeouts(40, 40, 40, 4),
        8,
        1 << 20,
        KEY,
    )
    .expect("t");
    let full = (0..n)
        .filter(|&i| {
            let h = t.hash(&SessionKey::new(i % 8, &tuple(i, 17)));
            t.insert(h, Slot { slot: i, gen: i }, UDP, 5) == Insert::Full
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

//! Tests of sweeping and iteration: exact counts after a sweep, the expiry callback of
//! `sweep_with` (each expired entry shown once, then reclaimed), removal and in-place changes
//! of live entries, and `entries`.

use super::*;
use crate::table::tests::tuple;
use crate::table::{Insert, CLASSES};
use crate::{SessionKey, SessionTable, Touch, GROUPS};

const KEY: [u64; 4] = [1, 3, 5, 7];

/// A value counted in bin `slot`, with a packet counter changed in place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Flow {
    slot: u32,
    packets: u32,
}

impl SessionValue for Flow {
    fn bin(&self) -> u32 {
        self.slot
    }
}

/// Class 0: 10 s, class 1: 100 s, class 2: 2 s.
fn table(buckets: usize) -> SessionTable<Flow> {
    let mut to = [0; CLASSES];
    to[..3].copy_from_slice(&[10, 100, 2]);
    SessionTable::with_key(buckets, to, 4, 4, KEY).expect("table")
}

fn put(t: &mut SessionTable<Flow>, scope: u32, i: u32, class: u8, now: u32) -> Insert {
    let h = t.hash(&SessionKey::new(scope, &tuple(i, 17)));
    let v = Flow {
        slot: i % 4,
        packets: i,
    };
    t.insert(h, v, class, now)
}

#[test]
fn sweep_reclaims_expired_and_refused_entries_with_exact_counts() {
    let mut t = table(256);
    for i in 0..500 {
        put(&mut t, i % 2, i, 0, 100);
    }
    let c = t.counts();
    let stored = c.total();
    // 500 entries in 768 places (65% load): a rare key finds both its buckets full even
    // after moving an entry (refused, no eviction).
    assert!(stored >= 495, "{stored} stored");
    assert_eq!(u64::from(stored) + c.refused(), 500);
    // A sweep at a time when nothing expired, keeping all: nothing changes.
    assert_eq!(t.sweep(105, 256, |_| true), 0);
    // Refuse bin 3: the sweep reclaims its entries only.
    let before3 = c.bin(3);
    let n = t.sweep(105, 256, |v| v.slot != 3);
    assert_eq!(
        (n as u32, c.bin(3), c.total()),
        (before3, 0, stored - before3)
    );
    // Half a sweep round after expiry reclaims about half; a whole round all.
    let half = t.sweep(1000, 128, |_| true);
    assert!(half > 0 && (half as u32) < c.total() + half as u32);
    t.sweep(1000, 128, |_| true);
    assert_eq!((c.total(), c.group(0), c.group(1), c.bin(0)), (0, 0, 0, 0));
}

/// Flow export's use: every expired entry is shown once, with its last value, then gone; a
/// live one stays with what the visit changed (an active timeout's export resets counters)
/// unless the visit removes it.
#[test]
fn sweep_with_shows_each_expired_entry_once_then_reclaims_it() {
    let mut t = table(64);
    // Entries 0..10 in class 2 (2 s), 10..20 in class 1 (100 s), all at time 100.
    for i in 0..20 {
        let class = if i < 10 { 2 } else { 1 };
        assert_eq!(put(&mut t, 0, i, class, 100), Insert::New);
    }
    // One packet more on entry 3 and on entry 15.
    for i in [3, 15] {
        let h = t.hash(&SessionKey::new(0, &tuple(i, 17)));
        t.lookup_mut(h, 101, Touch::Refresh).expect("live").packets += 1;
    }
    let now = 104; // past 101 + 2: entries 0..10 expired
    let (mut expired, mut live) = (Vec::new(), Vec::new());
    let n = t.sweep_with(now, 64, |info, v| {
        if info.expired(now) {
            expired.push(v.packets);
            return Verdict::Keep; // ignored for an expired entry
        }
        let packets = v.packets;
        live.push((info.class, packets));
        v.packets = 0; // exported: counting starts again
        if info.expiry == 201 {
            Verdict::Remove // entry 15, the one live entry refreshed at 101
        } else {
            Verdict::Keep
        }
    });
    expired.sort_unstable();
    assert_eq!(expired, [0, 1, 2, 4, 4, 5, 6, 7, 8, 9]);
    assert_eq!(live.len(), 10);
    assert!(live.iter().all(|&(class, _)| class == 1));
    assert_eq!(n, 11, "10 expired and entry 15 removed");
    assert_eq!(t.counts().total(), 9);
    // A second round sees only the 9 live entries, their packets reset.
    let mut seen = 0;
    t.sweep_with(now, 64, |info, v| {
        assert!(!info.expired(now));
        assert_eq!(v.packets, 0);
        seen += 1;
        Verdict::Keep
    });
    assert_eq!(seen, 9);
}

#[test]
fn sweep_with_visits_each_bucket_once_a_round_and_wraps() {
    let mut t = table(16);
    for i in 0..30 {
        put(&mut t, 0, i, 1, 10);
    }
    let stored = t.counts().total();
    let mut seen = 0;
    for _ in 0..4 {
        t.sweep_with(11, 4, |_, _| {
            seen += 1;
            Verdict::Keep
        });
    }
    assert_eq!(seen, stored, "4 x 4 buckets: one round");
    t.sweep_with(11, 100, |_, _| {
        seen += 1;
        Verdict::Keep
    });
    assert_eq!(seen, 2 * stored, "a budget past the table is one round");
}

#[test]
fn entries_lists_the_live_ones_with_their_state() {
    let mut t = table(16);
    put(&mut t, 1, 1, 0, 100); // 10 s
    put(&mut t, 2, 2, 1, 100); // 100 s
    put(&mut t, GROUPS + 5, 3, 1, 100);
    let h = t.hash(&SessionKey::new(2, &tuple(2, 17)));
    t.lookup(h, 101, Touch::Shorten(2));
    let mut got: Vec<_> = t.entries(105).map(|(e, v)| (e, v.packets)).collect();
    got.sort_by_key(|(_, p)| *p);
    let info = |group, class, shortened, expiry| EntryInfo {
        group,
        class,
        shortened,
        expiry,
    };
    assert_eq!(
        got,
        [
            (info(1, 0, false, 110), 1),
            (info(2, 2, true, 103), 2),
            (info(GROUPS, 1, false, 200), 3),
        ]
        .into_iter()
        .filter(|(e, _)| !e.expired(105))
        .collect::<Vec<_>>()
    );
    assert_eq!(
        t.entries(105).count(),
        2,
        "the shortened one expired at 103"
    );
    assert_eq!(t.entries(300).count(), 0);
}

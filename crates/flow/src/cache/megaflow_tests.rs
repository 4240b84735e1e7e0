//! Tests of the megaflow cache's internals (listed subtables, six-word verification, eviction
//! prediction, the hot line's output port); the cache's behaviour is tested in `tests.rs`.

use super::*;
use crate::cache::Hit;
use crate::extract::ip4_words;
use crate::key::Field;

/// A key looked up from its six words never verifies against a megaflow that is not zero
/// where its subtable's mask reaches outside those words (a tunnel's megaflow): the hash
/// keeps the two apart too, but a tag collision must not make a wrong hit.
#[test]
fn six_words_never_verify_against_a_megaflow_nonzero_outside_them() {
    let mut c = MegaflowCache::new(&CacheConfig::default(), HashKey::from_seed(1));
    let mut plain = FlowKey::ZERO;
    plain.set(Field::InPort, 1);
    plain.set(Field::EthType, 0x0800);
    plain.set(Field::NwDst, 0xc612_0001);
    plain.set(Field::NwProto, 17);
    plain.set(Field::TpDst, 4789);
    let mut tunnel = plain;
    tunnel.set(Field::TunId, 5);
    let mut mask = FlowKey::ZERO;
    mask.unwildcard(Field::TunId);
    mask.unwildcard(Field::NwDst);
    let t = TranslatedRef {
        actions: &DpActions::DROP,
        mask: &mask,
        rules: &[],
    };
    let Ok(tid) = c.insert(&tunnel, t, 1, 0) else {
        panic!("tunnel megaflow refused");
    };
    let si = c.meta[tid as usize].subtable as usize;
    let w = ip4_words(&plain);
    assert!(c.verify(si, Probe::Whole(&tunnel), tid as usize));
    assert!(!c.verify(si, Probe::Whole(&plain), tid as usize));
    assert!(!c.verify(si, Probe::Ip4(&w), tid as usize));
    // The same subtable's megaflow without a tunnel is found from the six words.
    let Ok(pid) = c.insert(&plain, t, 1, 0) else {
        panic!("plain megaflow refused");
    };
    assert_eq!(c.meta[pid as usize].subtable as usize, si);
    assert!(c.verify(si, Probe::Ip4(&w), pid as usize));
    let h = c.sub_hash(si, Probe::Ip4(&w));
    assert_eq!(h, c.sub_hash(si, Probe::Whole(&plain)));
    assert_eq!(c.find(si, Probe::Ip4(&w), h), Some(pid));
}

/// A subtable lists its megaflows while it has held at most `FEW`, and lookups compare
/// keys with them; past that it hashes until maintenance has walked the buckets after it
/// shrank (a walk an install interrupts is abandoned). Either way every key finds its
/// megaflow (from its six words or whole) and no other.
#[test]
fn few_megaflows_are_listed_many_hashed_and_shrunk_ones_listed_again() {
    let mut c = MegaflowCache::new(&CacheConfig::default(), HashKey::from_seed(3));
    // Version 1, as every install below: no megaflow is stale.
    let xl = crate::cache::tests::FakeTables::new(Vec::new());
    let mut mask = FlowKey::ZERO;
    mask.unwildcard(Field::NwDst);
    let t = TranslatedRef {
        actions: &DpActions::DROP,
        mask: &mask,
        rules: &[],
    };
    let key = |d: u32| {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 1);
        k.set(Field::EthType, 0x0800);
        k.set(Field::NwProto, 17);
        k.set(Field::NwDst, (0xc612_0000 + d).into());
        k.set(Field::TpDst, 53);
        k
    };
    let looked_up = |c: &mut MegaflowCache, d: u32| {
        let k = key(d);
        let mut got = [None; 2];
        for (j, six) in [0u64, 1].into_iter().enumerate() {
            let mut out = [Hit::Miss];
            let left = c.lookup_chunk(&xl, 0, &[k], &[ip4_words(&k)], six, &mut out, 1);
            got[j] = (left == 0).then(|| out[0].id()).flatten();
        }
        assert_eq!(got[0], got[1], "key {d}: whole and six-word lookups differ");
        got[0]
    };
    let mut ids = Vec::new();
    for d in 0..FEW as u32 {
        let Ok(id) = c.insert(&key(d), t, 1, 0) else {
            panic!("install {d} refused");
        };
        ids.push(id);
    }
    let si = c.meta[ids[0] as usize].subtable as usize;
    assert_eq!(c.subtables[si].few().map(|(_, n)| n), Some(FEW));
    for (d, &id) in ids.iter().enumerate() {
        assert_eq!(looked_up(&mut c, d as u32), Some(id));
    }
    assert_eq!(looked_up(&mut c, 99), None);
    // A delete takes it off the list; the others are still found.
    c.delete(ids[1]);
    assert_eq!(c.subtables[si].few().map(|(_, n)| n), Some(FEW - 1));
    assert_eq!(looked_up(&mut c, 1), None);
    assert_eq!(looked_up(&mut c, 3), Some(ids[3]));
    // Outgrown: hashed, also once it has shrunk, until maintenance lists it again.
    for d in 10..12u32 {
        let Ok(id) = c.insert(&key(d), t, 1, 0) else {
            panic!("install {d} refused");
        };
        ids.push(id);
    }
    assert!(c.subtables[si].few().is_none());
    c.delete(ids[4]);
    c.delete(ids[5]);
    assert!(c.subtables[si].few().is_none());
    assert_eq!(looked_up(&mut c, 0), Some(ids[0]));
    assert_eq!(looked_up(&mut c, 10), None);
    // A walk that an install interrupts is abandoned, and the next one lists all four.
    c.budget = 64;
    c.maintain(&xl, 0);
    assert!(c.relist.is_some(), "a walk of several budgets");
    let Ok(late) = c.insert(&key(20), t, 1, 0) else {
        panic!("install refused");
    };
    assert!(c.relist.is_none());
    let mut calls = 0;
    while c.subtables[si].few().is_none() {
        c.maintain(&xl, 0);
        calls += 1;
        assert!(calls <= 2 * (c.bmask + 1) / 64 + 2, "never listed again");
    }
    assert_eq!(c.stats.subtables_relisted, 1);
    let Some((listed, n)) = c.subtables[si].few() else {
        unreachable!();
    };
    let mut listed = listed[..n].to_vec();
    listed.sort_unstable();
    let mut want = vec![ids[0], ids[2], ids[3], late];
    want.sort_unstable();
    assert_eq!(listed, want);
    for (d, id) in [(0, ids[0]), (2, ids[2]), (3, ids[3]), (20, late)] {
        assert_eq!(looked_up(&mut c, d), Some(id));
    }
    assert_eq!(looked_up(&mut c, 10), None);
    // Emptied and made anew: listed from the start.
    for &id in &[ids[0], ids[2], ids[3], late] {
        c.delete(id);
    }
    let Ok(id) = c.insert(&key(7), t, 1, 0) else {
        panic!("install refused");
    };
    let si = c.meta[id as usize].subtable as usize;
    assert_eq!(c.subtables[si].few().map(|(_, n)| n), Some(1));
    assert_eq!(looked_up(&mut c, 7), Some(id));
}

/// A megaflow whose actions are one output gives its port from the hot line; any other
/// actions (drop, two outputs, a set before the output) give none, and neither does a
/// deleted megaflow.
#[test]
fn only_a_lone_output_is_read_from_the_hot_line() {
    let mut c = MegaflowCache::new(&CacheConfig::default(), HashKey::from_seed(4));
    let mut mask = FlowKey::ZERO;
    mask.unwildcard(Field::TpDst);
    let output = |ports: &[u16]| {
        let mut a = DpActions::DROP;
        for &p in ports {
            a.push(DpAction::Output(p));
        }
        a
    };
    let mut set_then_output = DpActions::DROP;
    set_then_output.push(DpAction::Set {
        field: Field::NwTtl,
        value: 9,
        mask: 0xff,
    });
    set_then_output.push(DpAction::Output(3));
    let cases = [
        (output(&[3]), Some(3)),
        (output(&[]), None),
        (output(&[3, 4]), None),
        (set_then_output, None),
        (output(&[NO_OUTPUT]), None),
    ];
    for (port, (actions, want)) in cases.iter().enumerate() {
        let mut k = FlowKey::ZERO;
        k.set(Field::TpDst, port as u128);
        let t = TranslatedRef {
            actions,
            mask: &mask,
            rules: &[],
        };
        let Ok(id) = c.insert(&k, t, 1, 0) else {
            panic!("install {port} refused");
        };
        assert_eq!(c.output_port(id), *want, "case {port}");
        c.delete(id);
        assert_eq!(c.output_port(id), None, "case {port} deleted");
    }
}

/// `prefetch_install` prefetches the bucket of the slot the next install evicts and the
/// metadata of the one after: both must be the slots evicted, whether the victims come
/// from the wheel (due within its window) or from the rotating window (under churn faster
/// than the idle timeout).
#[test]
fn the_predicted_victims_are_the_ones_evicted() {
    // 10 s: every megaflow is due beyond the wheel's window; 20 ms (1 ms ticks): within it.
    for (timeout_ms, wheel) in [(10_000, false), (20, true)] {
        let cfg = CacheConfig {
            max_megaflows: 16,
            idle_timeout_ms: timeout_ms,
            ..CacheConfig::default()
        };
        let mut c = MegaflowCache::new(&cfg, HashKey::from_seed(2));
        let mut mask = FlowKey::ZERO;
        mask.unwildcard(Field::TpDst);
        let t = TranslatedRef {
            actions: &DpActions::DROP,
            mask: &mask,
            rules: &[],
        };
        let key = |port: u64| {
            let mut k = FlowKey::ZERO;
            k.set(Field::TpDst, port.into());
            k
        };
        for p in 0..16 {
            assert!(c.insert(&key(p), t, 1, p).is_ok());
        }
        let mut predicted_next = None;
        let mut from_the_wheel = 0;
        for p in 16..40u64 {
            let (cand, from_wheel, cursor) = c.eviction_candidates();
            from_the_wheel += from_wheel.min(1);
            if let Some(n) = predicted_next {
                assert_eq!(cand[0], n, "timeout {timeout_ms}, install {p}");
            }
            let Ok(id) = c.insert(&key(p), t, 1, p) else {
                panic!("install {p} refused");
            };
            assert_eq!(id, cand[0], "timeout {timeout_ms}, install {p}");
            predicted_next = Some(if from_wheel > 1 {
                cand[1]
            } else {
                ((cursor + 1) % 16) as u32
            });
        }
        assert_eq!(c.stats.evicted, 24);
        assert_eq!(from_the_wheel > 0, wheel, "timeout {timeout_ms}");
    }
}

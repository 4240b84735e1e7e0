//! Tests of the flow caches against a fake translator (a priority list of matches whose mask is
//! the union of the matches it examined) and a naive list of megaflows.

use super::*;
use crate::dpaction::DpAction;
use crate::key::Field;
use crate::rule::Match;
use proptest::prelude::*;
use std::cell::Cell;

/// A priority-ordered rule list; translation consults every rule up to the first match.
pub(super) struct FakeTables {
    pub rules: Vec<(Match, u16)>,
    pub version: u64,
    pub translations: Cell<u64>,
}

impl FakeTables {
    pub fn new(rules: Vec<(Match, u16)>) -> FakeTables {
        FakeTables {
            rules,
            version: 1,
            translations: Cell::new(0),
        }
    }
}

pub(super) fn out(port: u16) -> DpActions {
    let mut a = DpActions::DROP;
    a.push(DpAction::Output(port));
    a
}

impl Translator for FakeTables {
    fn version(&self) -> u64 {
        self.version
    }
    fn translate(&self, key: &FlowKey) -> Translated {
        self.translations.set(self.translations.get() + 1);
        let mut t = Translated::default();
        for (i, (m, port)) in self.rules.iter().enumerate() {
            t.mask.union_with(&m.mask);
            if m.matches(key) {
                t.actions = out(*port);
                t.rules.push(i as RuleId);
                break;
            }
        }
        t
    }
}

fn m(fields: &[(Field, u128, u128)]) -> Match {
    let mut x = Match::ANY;
    for &(f, v, mask) in fields {
        x.set(f, v, mask);
    }
    x
}

pub(super) fn key(in_port: u16, nw_dst: u32, tp_dst: u16) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set(Field::InPort, in_port as u128);
    k.set(Field::EthType, 0x0800);
    k.set(Field::NwDst, nw_dst as u128);
    k.set(Field::NwProto, 6);
    k.set(Field::TpDst, tp_dst as u128);
    k
}

/// The defaults, but the EMC consulted however few megaflows there are (these tests are about
/// the EMC; `few_listed_megaflows_bypass_the_emc` covers the bypass).
fn emc_always() -> CacheConfig {
    CacheConfig {
        emc_bypass_subtables: 0,
        ..CacheConfig::default()
    }
}

fn small(max: usize) -> CacheConfig {
    CacheConfig {
        max_megaflows: max,
        emc_insert_inv_prob: 1,
        ..emc_always()
    }
}

fn cache(cfg: &CacheConfig) -> FlowCache {
    FlowCache::with_hash_key(cfg, HashKey::from_seed(42)).unwrap()
}

/// Look `k` up; on a miss translate and install. Returns the actions the packet gets.
fn process(c: &mut FlowCache, xl: &FakeTables, now: u64, k: &FlowKey) -> (Hit, DpActions) {
    let mut o = [Hit::Miss];
    c.lookup_batch(xl, now, std::slice::from_ref(k), &mut o);
    match o[0].id() {
        Some(id) => (o[0], c.actions(id).unwrap().clone()),
        None => {
            let t = xl.translate(k);
            let _ = c.insert(k, &t, xl.version(), now);
            (Hit::Miss, t.actions)
        }
    }
}

fn l3_l4_rules() -> Vec<(Match, u16)> {
    vec![
        (
            m(&[
                (Field::NwDst, 0xc612_0200, 0xffff_ff00),
                (Field::TpDst, 80, 0xffff),
            ]),
            1,
        ),
        (m(&[(Field::NwDst, 0xc612_0000, 0xffff_0000)]), 2),
        (m(&[(Field::InPort, 3, 0xffff)]), 3),
    ]
}

#[test]
fn miss_install_then_megaflow_then_emc_hit() {
    let xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let k = key(1, 0xc612_0207, 80);
    assert_eq!(process(&mut c, &xl, 0, &k).0, Hit::Miss);
    // Insert always offers to the EMC with probability 1 here.
    let (hit, a) = process(&mut c, &xl, 1, &k);
    assert!(matches!(hit, Hit::Emc(_)), "{hit:?}");
    assert_eq!(a, out(1));
    // Another key of the same megaflow (tp_src differs, not in the mask).
    let mut k2 = k;
    k2.set(Field::TpSrc, 1234);
    let (hit, a) = process(&mut c, &xl, 2, &k2);
    assert!(matches!(hit, Hit::Megaflow(_)), "{hit:?}");
    assert_eq!(a, out(1));
    let s = c.stats();
    assert_eq!(
        (s.installed, s.misses, s.megaflow_hits, s.emc_hits),
        (1, 1, 1, 1)
    );
    assert_eq!(s.subtables_visited, 1);
    assert_eq!(c.megaflows().len(), 1);
}

#[test]
fn an_overlapping_megaflow_is_refused_and_counted() {
    let xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let k = key(1, 0xc612_0207, 80);
    let t = xl.translate(&k);
    let id = c.insert(&k, &t, 1, 0).unwrap();
    // The same key again, and a wider megaflow containing it.
    assert_eq!(c.insert(&k, &t, 1, 0), Err(InsertRefused::Overlap(id)));
    let wide = Translated {
        actions: out(9),
        mask: m(&[(Field::NwDst, 0, 0xffff_0000)]).mask,
        rules: RuleList::default(),
    };
    assert_eq!(c.insert(&k, &wide, 1, 0), Err(InsertRefused::Overlap(id)));
    assert_eq!(c.stats().overlap_refused, 2);
    assert_eq!(c.megaflows().len(), 1);
}

#[test]
fn emc_insertion_happens_with_probability_one_in_n() {
    let xl = FakeTables::new(l3_l4_rules());
    let cfg = CacheConfig {
        emc_insert_inv_prob: 100,
        ..emc_always()
    };
    let mut c = cache(&cfg);
    let k = key(1, 0xc612_0207, 80);
    c.insert(&k, &xl.translate(&k), 1, 0).unwrap();
    // Distinct keys of one megaflow (tp_src is wildcarded): each a megaflow hit.
    let n = 100_000u32;
    let mut keys = vec![FlowKey::ZERO; 256];
    let mut hits = vec![Hit::Miss; 256];
    for b in 0..n / 256 {
        for (i, kk) in keys.iter_mut().enumerate() {
            *kk = k;
            kk.set(Field::TpSrc, ((b * 256 + i as u32) % 65536) as u128);
            kk.set(Field::NwSrc, (b * 256 + i as u32) as u128);
        }
        c.lookup_batch(&xl, 0, &keys, &mut hits);
    }
    let s = c.stats();
    let expected = s.megaflow_hits as f64 / 100.0;
    assert!(
        (s.emc_inserts as f64 - expected).abs() < 5.0 * expected.sqrt() + 2.0,
        "{} inserts for {} megaflow hits",
        s.emc_inserts,
        s.megaflow_hits
    );
    c.set_emc_insert_inv_prob(0);
    let before = c.stats().emc_inserts;
    c.lookup_batch(&xl, 0, &keys, &mut hits);
    assert_eq!(c.stats().emc_inserts, before);
}

#[test]
fn a_full_cache_evicts_the_idlest_or_refuses_by_policy() {
    // One exact rule per tp_dst makes one megaflow per port.
    let rules: Vec<_> = (0..10u16)
        .map(|p| (m(&[(Field::TpDst, p as u128, 0xffff)]), p))
        .collect();
    let xl = FakeTables::new(rules);
    for policy in [FullPolicy::EvictIdlest, FullPolicy::Refuse] {
        let mut c = cache(&CacheConfig {
            full_policy: policy,
            ..small(100)
        });
        for i in 0..300u32 {
            let k = key(1, i, 1000 + i as u16);
            let _ = process(&mut c, &xl, i as u64, &k);
            assert!(c.megaflows().len() <= 100);
        }
        let s = c.stats();
        assert_eq!(s.megaflows, 100);
        match policy {
            FullPolicy::EvictIdlest => {
                assert_eq!((s.evicted, s.megaflow_full, s.installed), (200, 0, 300));
                // The most recent flows are the ones kept.
                let (hit, _) = process(&mut c, &xl, 400, &key(1, 299, 1299));
                assert_ne!(hit, Hit::Miss);
            }
            FullPolicy::Refuse => {
                assert_eq!((s.evicted, s.megaflow_full, s.installed), (0, 200, 100));
                let (hit, _) = process(&mut c, &xl, 400, &key(1, 0, 1000));
                assert_ne!(hit, Hit::Miss);
            }
        }
    }
}

#[test]
fn a_megaflow_used_in_the_current_millisecond_is_never_evicted() {
    // The flow-switch node resolves a vector's hits before it installs its misses: an id a hit
    // returned must still be that megaflow when its packet's actions run.
    let rules: Vec<_> = (0..10u16)
        .map(|p| (m(&[(Field::TpDst, p as u128, 0xffff)]), p))
        .collect();
    let xl = FakeTables::new(rules);
    let mut c = cache(&small(4));
    for i in 0..4u32 {
        process(&mut c, &xl, 7, &key(1, i, 1000 + i as u16));
    }
    // Full, and every megaflow was used at 7: a new one at 7 is refused, not installed over one.
    let (hit, _) = process(&mut c, &xl, 7, &key(1, 9, 1009));
    assert_eq!(hit, Hit::Miss);
    let s = c.stats();
    assert_eq!(
        (s.evicted, s.megaflow_full, s.megaflows),
        (0, 1, 4),
        "{s:?}"
    );
    // A millisecond later the idlest can go.
    process(&mut c, &xl, 8, &key(1, 9, 1009));
    assert_eq!(c.stats().evicted, 1);
}

#[test]
fn idle_megaflows_expire_on_the_wheel_with_a_fake_clock() {
    let xl = FakeTables::new(vec![(m(&[(Field::TpDst, 0, 0xffff)]), 1)]);
    let mut c = cache(&CacheConfig {
        idle_timeout_ms: 10_000,
        ..small(1000)
    });
    for i in 0..100u16 {
        process(&mut c, &xl, 0, &key(1, 0, 1 + i));
    }
    assert_eq!(c.megaflows().len(), 100);
    // Keep ten alive by hitting them at 6 s.
    for i in 0..10u16 {
        assert_ne!(process(&mut c, &xl, 6000, &key(1, 0, 1 + i)).0, Hit::Miss);
    }
    let mut now = 0;
    while now < 10_500 {
        c.maintain(&xl, now);
        now += 100;
    }
    assert_eq!(c.megaflows().len(), 10, "only the ones hit at 6 s remain");
    assert_eq!(c.stats().expired, 90);
    while now < 16_500 {
        c.maintain(&xl, now);
        now += 100;
    }
    assert_eq!(c.megaflows().len(), 0);
    assert_eq!(c.stats().expired, 100);
    assert_eq!(c.megaflows().subtable_count(), 0);
}

#[test]
fn maintenance_work_is_bounded() {
    let xl = FakeTables::new(vec![(m(&[(Field::TpDst, 0, 0xffff)]), 1)]);
    let mut c = cache(&CacheConfig {
        maintenance_budget: 64,
        ..small(10_000)
    });
    for i in 0..5000u16 {
        process(&mut c, &xl, 0, &key(1, 0, i));
    }
    let w = c.maintain(&xl, 20_000);
    assert!(w <= 4 * 64 + 512, "{w}");
    assert!(c.megaflows().len() < 5000 && c.megaflows().len() > 4000);
    let mut steps = 0;
    while !c.megaflows().is_empty() {
        c.maintain(&xl, 20_000);
        steps += 1;
        assert!(steps < 200);
    }
}

#[test]
fn revalidation_after_a_version_change_keeps_deletes_and_never_misroutes() {
    let mut xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let a = key(1, 0xc612_0207, 80); // rule 0 -> 1
    let b = key(1, 0xc612_0507, 22); // rule 1 -> 2
    let d = key(3, 0x0a00_0001, 22); // rule 2 -> 3
    for k in [a, b, d] {
        process(&mut c, &xl, 0, &k);
    }
    assert_eq!(c.megaflows().len(), 3);
    // New version: 198.18.0.0/16 now goes to 7; the others are unchanged.
    xl.rules[1].1 = 7;
    xl.version = 2;
    // First packets after the change are right at once (b's megaflow is re-checked, deleted).
    assert_eq!(process(&mut c, &xl, 1, &b).1, out(7));
    assert_eq!(process(&mut c, &xl, 1, &a).1, out(1));
    assert_eq!(c.stats().revalidation_deleted, 1);
    assert_eq!(c.stats().revalidated, 1);
    // Maintenance revalidates the rest (d) without a packet.
    c.maintain(&xl, 2);
    assert!(!c.megaflows().revalidation_pending());
    let s = c.stats();
    assert_eq!((s.revalidated, s.revalidation_deleted), (2, 1));
    let mut dump = Vec::new();
    c.dump(3, &mut dump);
    assert!(dump.iter().all(|d| d.current));
    // A rule added in front that consults a new field: masks change, megaflows go.
    xl.rules.insert(0, (m(&[(Field::TpSrc, 5, 0xffff)]), 9));
    xl.version = 3;
    c.maintain(&xl, 4);
    assert_eq!(c.megaflows().len(), 0);
    assert_eq!(process(&mut c, &xl, 5, &d).1, out(3));
}

#[test]
fn stale_emc_entries_are_not_used() {
    let mut xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let b = key(1, 0xc612_0507, 22);
    process(&mut c, &xl, 0, &b);
    assert!(matches!(process(&mut c, &xl, 0, &b).0, Hit::Emc(_)));
    xl.rules[1].1 = 7;
    xl.version = 2;
    assert_eq!(process(&mut c, &xl, 1, &b), (Hit::Miss, out(7)));
    assert_eq!(process(&mut c, &xl, 1, &b).1, out(7));
}

#[test]
fn caches_can_be_switched_off() {
    let xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let k = key(1, 0xc612_0207, 80);
    process(&mut c, &xl, 0, &k);
    c.set_emc_enabled(false);
    assert!(matches!(process(&mut c, &xl, 0, &k).0, Hit::Megaflow(_)));
    c.set_megaflow_enabled(false);
    assert_eq!(process(&mut c, &xl, 0, &k), (Hit::Miss, out(1)));
    assert_eq!(
        c.insert(&k, &xl.translate(&k), 1, 0),
        Err(InsertRefused::Disabled)
    );
}

#[test]
fn subtables_are_ranked_by_hits() {
    // Rule 0 (tp_dst) is consulted first, so its mask is in every megaflow; rule 1 adds nw_dst.
    let xl = FakeTables::new(vec![
        (m(&[(Field::TpDst, 80, 0xffff)]), 1),
        (m(&[(Field::NwDst, 0, 0)]), 2),
        (m(&[(Field::InPort, 0, 0)]), 3),
    ]);
    let mut c = cache(&CacheConfig {
        emc_enabled: false,
        ..small(1000)
    });
    process(&mut c, &xl, 0, &key(1, 1, 80)); // mask: tp_dst
    process(&mut c, &xl, 0, &key(1, 1, 22)); // mask: tp_dst (+ empty masks) — same subtable
    let wide = Translated {
        actions: out(5),
        mask: m(&[(Field::InPort, 0, 0xffff)]).mask,
        rules: RuleList::default(),
    };
    c.insert(&key(7, 0, 7), &wide, 1, 0).unwrap();
    assert_eq!(c.megaflows().subtable_count(), 2);
    for _ in 0..50 {
        process(&mut c, &xl, 0, &key(7, 0, 7));
    }
    c.maintain(&xl, 5000);
    let first = c
        .megaflows()
        .subtable_ranking()
        .next()
        .map(|(mask, _)| *mask);
    assert_eq!(first, Some(wide.mask));
    process(&mut c, &xl, 0, &key(7, 0, 7));
    assert_eq!(c.stats().subtables_visited, 50 * 2 + 1);
}

#[test]
fn crafted_keys_of_one_subtable_stay_fast() {
    // 100k keys differing in a few high bits of nw_src and tp_src: every lookup must still find
    // its megaflow; the keyed hash keeps buckets from overflowing in bulk.
    let xl = FakeTables::new(vec![(m(&[(Field::InPort, 9, 0xffff)]), 1)]);
    let mut c = cache(&small(200_000));
    let exact = {
        let mut x = FlowKey::ZERO;
        x.unwildcard(Field::NwSrc);
        x.unwildcard(Field::TpSrc);
        x
    };
    let t = Translated {
        actions: out(1),
        mask: exact,
        rules: RuleList::default(),
    };
    let mk = |i: u32| {
        let mut k = FlowKey::ZERO;
        k.set(Field::NwSrc, ((i & 0xffff) << 16) as u128);
        k.set(Field::TpSrc, (i >> 16) as u128);
        k
    };
    for i in 0..100_000u32 {
        c.insert(&mk(i), &t, 1, 0).unwrap();
    }
    let mut hits = [Hit::Miss; 1];
    for i in (0..100_000u32).step_by(7) {
        assert_eq!(c.lookup_batch(&xl, 0, &[mk(i)], &mut hits), 0);
    }
    let (overflowing, buckets) = c.megaflows().bucket_overflow();
    assert!(
        overflowing * 20 < buckets,
        "{overflowing} of {buckets} buckets overflow"
    );
}

// ---- differential: the cache against a naive list of megaflows ----

#[derive(Clone, Debug)]
enum Op {
    /// Look up (and install on a miss) key from the small key space (port, nw_dst, tp_dst,
    /// tun_id).
    Packet(u16, u32, u16, u64),
    Advance(u64),
    Maintain,
    /// Change rule `i`'s output port (version bump).
    ChangeRule(usize, u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..4u16, 0..8u32, 0..6u16, prop_oneof![3 => Just(0u64), 1 => 1..3u64])
            .prop_map(|(p, d, t, tun)| Op::Packet(p, d, t, tun)),
        1 => (0..4000u64).prop_map(Op::Advance),
        1 => Just(Op::Maintain),
        1 => (0..6usize, 0..4u16).prop_map(|(i, p)| Op::ChangeRule(i, p)),
    ]
}

fn rule() -> impl Strategy<Value = (Match, u16)> {
    (
        prop::option::of(0..4u16),
        prop::option::of((
            0..8u32,
            prop_oneof![Just(0xffff_fff8u32), Just(0xffff_fffe), Just(u32::MAX)],
        )),
        prop::option::of(0..6u16),
        prop::option::of(0..2u64),
        0..4u16,
    )
        .prop_map(|(p, d, t, meta, port)| {
            let mut x = Match::ANY;
            if let Some(p) = p {
                x.set(Field::InPort, p as u128, 0xffff);
            }
            if let Some((d, mask)) = d {
                x.set(Field::NwDst, d as u128, mask as u128);
            }
            if let Some(t) = t {
                x.set(Field::TpDst, t as u128, 0xffff);
            }
            // A word outside the usual shape's six: a packet's tunnel id (0 without one).
            if let Some(v) = meta {
                x.set(Field::TunId, v as u128, u64::MAX as u128);
            }
            (x, port)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn cache_agrees_with_a_naive_megaflow_list_and_the_tables(
        rules in prop::collection::vec(rule(), 1..6),
        ops in prop::collection::vec(op(), 1..300),
        emc_prob in prop_oneof![Just(0u32), Just(1), Just(3)],
        cap in prop_oneof![Just(4usize), Just(1000)],
        six in any::<bool>(),
    ) {
        let mut xl = FakeTables::new(rules);
        let mut c = cache(&CacheConfig {
            emc_insert_inv_prob: emc_prob,
            idle_timeout_ms: 2000,
            maintenance_budget: 3,
            max_megaflows: cap,
            ..emc_always()
        });
        // The naive model: a linear scan over every installed megaflow (the cache's dump),
        // against which the tuple-space lookup (hash table, subtables, EMC) is checked.
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Packet(p, d, t, tun) => {
                    let mut k = key(p, d, t);
                    k.set(Field::TunId, tun as u128);
                    let mut hit = [Hit::Miss];
                    let mut model = Vec::new();
                    c.dump(now, &mut model);
                    let matching: Vec<_> = model.iter().filter(|m| k.matches(&m.key, &m.mask)).collect();
                    if six && tun == 0 {
                        // From the key's six words, its slot holding garbage.
                        let mut slot = [FlowKey { w: [0xdead; KEY_WORDS] }];
                        let mut words = [crate::extract::IP4_L4_MAP | KEY_IN_IP4_WORDS];
                        let ip4 = [crate::extract::ip4_words(&k)];
                        c.lookup_vector(&xl, now, &mut slot, &ip4, &mut words, &mut hit);
                        if hit[0] == Hit::Miss {
                            prop_assert_eq!(slot[0], k);
                        }
                    } else {
                        c.lookup_batch(&xl, now, &[k], &mut hit);
                    }
                    let want = xl.translate(&k);
                    match hit[0].id() {
                        Some(id) => {
                            // Found one the naive list also matches, with the tables' actions.
                            prop_assert!(matching.iter().any(|m| m.id == id));
                            prop_assert_eq!(c.actions(id).unwrap().clone(), want.actions);
                        }
                        None => {
                            // A miss leaves no megaflow matching the key (a stale one found
                            // on the way was revalidated away).
                            let mut after = Vec::new();
                            c.dump(now, &mut after);
                            prop_assert!(!after.iter().any(|m| k.matches(&m.key, &m.mask)));
                            let r = c.insert(&k, &want, xl.version, now);
                            let mut after = Vec::new();
                            c.dump(now, &mut after);
                            let current_match = after.iter().filter(|m| k.matches(&m.key, &m.mask)).count();
                            match r {
                                Ok(id) => {
                                    prop_assert_eq!(current_match, 1);
                                    prop_assert!(after.iter().any(|m| m.id == id && m.mask == want.mask));
                                }
                                Err(InsertRefused::Full) => prop_assert_eq!(current_match, 0),
                                Err(e) => prop_assert!(false, "unexpected refusal {e:?}"),
                            }
                        }
                    }
                }
                Op::Advance(ms) => now += ms,
                Op::Maintain => { c.maintain(&xl, now); }
                Op::ChangeRule(i, p) => {
                    if let Some(r) = xl.rules.get_mut(i) { r.1 = p; }
                    xl.version += 1;
                }
            }
            prop_assert!(c.megaflows().len() <= cap);
            let mut all = Vec::new();
            c.dump(now, &mut all);
            prop_assert_eq!(all.len(), c.megaflows().len());
        }
        // Everything expires eventually.
        for _ in 0..100 {
            now += 100;
            c.maintain(&xl, now);
        }
        now += 10_000;
        for _ in 0..100 {
            c.maintain(&xl, now);
            now += 50;
        }
        prop_assert_eq!(c.megaflows().len(), 0);
    }
}

/// Keys of the usual shape (word map `IP4_L4`, as extraction gives for IPv4 with a transport
/// header) are hashed and compared in place; beside keys of other shapes in one chunk, every
/// key finds its own entry, whichever path inserted it (install, or a megaflow hit).
#[test]
fn in_place_keys_and_gathered_keys_share_the_emc() {
    let xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&small(1000));
    let usual = |k: &FlowKey| {
        let mut k = *k;
        k.set(Field::EthSrc, 0x0200_0000_0001);
        k.set(Field::TpSrc, 7);
        k
    };
    let mut keys = Vec::new();
    let mut words = Vec::new();
    // 30 keys: fewer than half a chunk, so the EMC is consulted whatever it answers (see
    // `a_working_set_beyond_the_emc_skips_it_and_it_comes_back`).
    for i in 0..15u32 {
        let k = usual(&key(1, 0xc612_0200 + i, 80 + (i % 2) as u16));
        keys.push(k);
        words.push(hash::IP4_L4);
        // The same key with the tunnel words named as well (written as zero): another shape.
        keys.push(k);
        words.push(hash::IP4_L4 | 1 << 1 | 1 << 2);
    }
    assert!(keys.iter().all(|k| nonzero_words(k) & !hash::IP4_L4 == 0));
    let mut out = vec![Hit::Miss; keys.len()];
    // First round: all miss; install them with their words (the EMC gets each, probability 1).
    assert_eq!(
        c.lookup_batch_words(&xl, 0, &keys, &words, &mut out),
        keys.len()
    );
    for (k, &w) in keys.iter().zip(&words) {
        let t = xl.translate(k);
        let _ = c.insert_parts_words(k, w, t.as_ref(), xl.version(), 0);
    }
    // Second round: every key hits; those whose install was refused (their megaflow was
    // already there) hit the megaflow and go into the EMC now.
    assert_eq!(c.lookup_batch_words(&xl, 1, &keys, &words, &mut out), 0);
    assert!(out.iter().any(|h| matches!(h, Hit::Emc(_))), "{out:?}");
    // Third round: every key is an EMC hit on its own megaflow, whichever its shape.
    assert_eq!(c.lookup_batch_words(&xl, 2, &keys, &words, &mut out), 0);
    for (k, h) in keys.iter().zip(&out) {
        assert!(matches!(h, Hit::Emc(_)), "{h:?}");
        let a = c.actions(h.id().unwrap()).unwrap().clone();
        assert_eq!(a, xl.translate(k).actions);
    }
    // Keys the EMC has not seen that hit a megaflow are inserted from the megaflow hit (the
    // usual ones gathered first) and found in the EMC next time.
    let fresh: Vec<FlowKey> = keys
        .iter()
        .map(|k| {
            let mut k = *k;
            k.set(Field::TpSrc, 9);
            k
        })
        .collect();
    assert_eq!(c.lookup_batch_words(&xl, 3, &fresh, &words, &mut out), 0);
    assert!(out.iter().all(|h| matches!(h, Hit::Megaflow(_))), "{out:?}");
    assert_eq!(c.lookup_batch_words(&xl, 4, &fresh, &words, &mut out), 0);
    assert!(out.iter().all(|h| matches!(h, Hit::Emc(_))), "{out:?}");
}

/// A working set the EMC does not hold (its hits are a small share of the megaflow cache's):
/// most chunks skip the EMC (counted), one in `EMC_SAMPLE` still consults it, every key is
/// still answered right; when the working set shrinks back, the EMC is consulted again and hits.
#[test]
fn a_working_set_beyond_the_emc_skips_it_and_it_comes_back() {
    let xl = FakeTables::new(l3_l4_rules());
    let mut c = cache(&CacheConfig {
        emc_entries: 64,
        emc_insert_inv_prob: 1,
        ..emc_always()
    });
    let many: Vec<FlowKey> = (0..4096u32)
        .map(|i| key(1, 0xc612_0200 + (i % 200), 1000 + (i / 200) as u16))
        .collect();
    let words: Vec<u32> = many.iter().map(nonzero_words).collect();
    let mut out = vec![Hit::Miss; many.len()];
    for round in 0..3u64 {
        let misses = c.lookup_batch_words(&xl, round, &many, &words, &mut out);
        for (i, (k, h)) in many.iter().zip(&out).enumerate() {
            let got = match h.id() {
                Some(id) => c.actions(id).unwrap().clone(),
                None => {
                    let t = xl.translate(k);
                    let _ = c.insert_parts_words(k, words[i], t.as_ref(), xl.version(), round);
                    t.actions
                }
            };
            assert_eq!(got, xl.translate(k).actions, "round {round}, key {i}");
        }
        assert!(round == 0 || misses == 0);
    }
    let st = c.stats();
    assert!(st.emc_skipped > 0, "{st:?}");
    assert!(
        st.emc_lookups >= (st.emc_lookups + st.emc_skipped) / EMC_SAMPLE as u64,
        "one chunk in {EMC_SAMPLE} still consults the EMC: {st:?}"
    );
    // A small working set again: after at most `EMC_SAMPLE` chunks the EMC answers.
    let few: Vec<FlowKey> = many[..16].to_vec();
    let fw = &words[..16];
    let mut out = vec![Hit::Miss; 16];
    let mut emc_hit = false;
    for round in 0..2 * EMC_SAMPLE as u64 {
        assert_eq!(c.lookup_batch_words(&xl, 10 + round, &few, fw, &mut out), 0);
        emc_hit |= out.iter().all(|h| matches!(h, Hit::Emc(_)));
    }
    assert!(emc_hit, "{:?}", c.stats());
}

/// `lookup_vector` with keys left in their six words (`KEY_IN_IP4_WORDS`, the slots of `keys`
/// holding garbage) answers exactly as `lookup_batch_words` on whole keys, vector after vector
/// of a shifting working set, and on return every key neither cache answered is whole in
/// `keys` with its flag cleared.
#[test]
fn keys_left_in_six_words_are_looked_up_as_whole_keys() {
    use crate::extract::{ip4_words, IP4_L4_MAP};
    let xl = FakeTables::new(l3_l4_rules());
    let cfg = CacheConfig {
        emc_entries: 256,
        emc_insert_inv_prob: 3,
        ..small(5000)
    };
    let (mut whole, mut six) = (cache(&cfg), cache(&cfg));
    let mut seed = 7u64;
    for round in 0..60u64 {
        let n = 1 + (round as usize * 37) % 256;
        let keys: Vec<FlowKey> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (seed >> 33) as u32;
                key(
                    1 + (r % 3) as u16,
                    0xc612_0000 + (r >> 2) % (200 + 40 * round as u32),
                    80 + (r % 4) as u16,
                )
            })
            .collect();
        let words = vec![IP4_L4_MAP; n];
        let mut out_a = vec![Hit::Miss; n];
        whole.lookup_batch_words(&xl, round, &keys, &words, &mut out_a);
        let ip4: Vec<[u64; 6]> = keys.iter().map(ip4_words).collect();
        let mut garbage = vec![
            FlowKey {
                w: [0xdead; KEY_WORDS]
            };
            n
        ];
        let mut words_b = vec![IP4_L4_MAP | KEY_IN_IP4_WORDS; n];
        let mut out_b = vec![Hit::Miss; n];
        six.lookup_vector(&xl, round, &mut garbage, &ip4, &mut words_b, &mut out_b);
        assert_eq!(out_a, out_b, "round {round}");
        for i in 0..n {
            if out_b[i] == Hit::Miss {
                assert_eq!(garbage[i], keys[i], "round {round}, key {i}");
                assert_eq!(words_b[i], IP4_L4_MAP);
            }
            if out_a[i] == Hit::Miss {
                let t = xl.translate(&keys[i]);
                let a =
                    whole.insert_parts_words(&keys[i], IP4_L4_MAP, t.as_ref(), xl.version(), round);
                let b = six.insert_parts_words(
                    &garbage[i],
                    words_b[i],
                    t.as_ref(),
                    xl.version(),
                    round,
                );
                assert_eq!(a.ok(), b.ok());
            }
        }
    }
    assert_eq!(whole.stats(), six.stats());
    let st = six.stats();
    // Both the EMC and the megaflow cache answered, and the working set outgrew the EMC
    // for a while (chunks skipped it).
    assert!(
        st.emc_hits > 0 && st.megaflow_hits > 0 && st.emc_skipped > 0,
        "{st:?}"
    );
}

/// While the megaflow cache has at most two subtables of at most four megaflows, lookups
/// compare keys with those and do not read the EMC (counted as bypassed), nor fill it from
/// their hits (installs still do); a third subtable brings the EMC back.
#[test]
fn few_listed_megaflows_bypass_the_emc() {
    // Each rule a later key reaches adds a field to its mask: three rules, three subtables.
    let xl = FakeTables::new(vec![
        (m(&[(Field::TpDst, 80, 0xffff)]), 1),
        (m(&[(Field::TpSrc, 7, 0xffff)]), 2),
        (m(&[(Field::NwSrc, 0x0a00_0001, 0xffff_ffff)]), 3),
    ]);
    let mut c = cache(&CacheConfig {
        emc_insert_inv_prob: 1,
        ..CacheConfig::default()
    });
    let a = key(1, 0xc612_0207, 80);
    let mut b = key(1, 0xc612_0207, 81);
    b.set(Field::TpSrc, 7);
    for now in 0..3 {
        process(&mut c, &xl, now, &a);
        process(&mut c, &xl, now, &b);
    }
    let s = c.stats();
    assert_eq!(
        (
            s.installed,
            s.megaflow_hits,
            s.emc_hits,
            s.emc_lookups,
            s.emc_inserts
        ),
        (2, 4, 0, 0, 2),
        "{s:?}"
    );
    assert_eq!(s.emc_bypassed, 6, "{s:?}");
    let mut d = key(1, 0xc612_0207, 81);
    d.set(Field::NwSrc, 0x0a00_0001);
    assert_eq!(process(&mut c, &xl, 3, &d).0, Hit::Miss);
    // Its install put `a` in the EMC: the next lookup finds it there.
    let (hit, actions) = process(&mut c, &xl, 4, &a);
    assert!(matches!(hit, Hit::Emc(_)), "{hit:?}");
    assert_eq!(actions, out(1));
    let s = c.stats();
    assert_eq!((s.emc_bypassed, s.emc_hits), (7, 1), "{s:?}");
}

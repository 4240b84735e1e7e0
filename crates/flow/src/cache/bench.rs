//! Cycle counts of the flow caches: `cargo test -p vecplane-flow --release --lib -- --ignored
//! cache_bench --nocapture`. TSC ticks per key, the best of several passes (a shared machine
//! preempts); batches of 256 keys in a shuffled order, as a worker's vector would bring them.

use super::tests::{key, FakeTables};
use super::*;
use crate::key::Field;
use std::hint::black_box;

/// Best ticks per unit of `f` (which does `units` units) over `passes` passes.
fn best(passes: usize, units: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..passes)
        .map(|_| {
            let t = graph::rdtsc();
            f();
            (graph::rdtsc() - t) as f64 / units as f64
        })
        .fold(f64::MAX, f64::min)
}

/// The mask of subtable `j` of `s`: in_port exact (the port picks the subtable), an nw_dst
/// prefix whose length depends on `j`, tp_dst exact.
fn mask(j: u32) -> FlowKey {
    let mut m = FlowKey::ZERO;
    m.unwildcard(Field::InPort);
    m.set(Field::NwDst, (u32::MAX << (j % 8)) as u128);
    m.unwildcard(Field::TpDst);
    if j >= 8 {
        m.unwildcard(Field::NwProto);
    }
    m
}

/// Key of megaflow `i` of `n` spread over `s` subtables (a random-looking tp_src, not masked).
fn flow_key(i: u32, s: u32) -> FlowKey {
    let j = i % s;
    let mut k = key(j as u16, (i / s) << 8, (i % 65_000) as u16);
    k.set(Field::TpSrc, (i.wrapping_mul(2_654_435_761) >> 16) as u128);
    k
}

fn build(n: u32, s: u32, emc: bool) -> (FlowCache, Vec<FlowKey>) {
    let cfg = CacheConfig {
        emc_enabled: emc,
        emc_insert_inv_prob: 1,
        ..CacheConfig::default()
    };
    let mut c = FlowCache::with_hash_key(&cfg, HashKey::from_seed(7)).unwrap();
    let mut keys = Vec::with_capacity(n as usize);
    for i in 0..n {
        let k = flow_key(i, s);
        let t = Translated {
            actions: super::tests::out(1),
            mask: mask(i % s),
            rules: RuleList::default(),
        };
        c.insert(&k, &t, 1, 0).unwrap();
        keys.push(k);
    }
    // Shuffle (deterministic LCG Fisher-Yates).
    let mut x = 12345u64;
    for i in (1..keys.len()).rev() {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        keys.swap(i, (x >> 33) as usize % (i + 1));
    }
    (c, keys)
}

fn lookup_all(c: &mut FlowCache, xl: &FakeTables, keys: &[FlowKey], out: &mut [Hit]) {
    for chunk in keys.chunks(256) {
        let m = c.lookup_batch(xl, 1, chunk, &mut out[..chunk.len()]);
        black_box(m);
    }
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn cache_bench() {
    let xl = FakeTables::new(Vec::new());
    let hk = HashKey::from_seed(1);
    let keys: Vec<FlowKey> = (0..4096).map(|i| flow_key(i, 10)).collect();
    let h = best(20, keys.len(), || {
        for k in &keys {
            black_box(hk.hash_key(black_box(k)));
        }
    });
    let m = mask(3);
    let mh = hk.masked_hash(&m, 5);
    let hm = best(20, keys.len(), || {
        for k in &keys {
            black_box(hk.hash_masked(black_box(k), &m, &mh));
        }
    });
    println!("keyed hash: whole key (19 words) {h:.1} ticks, masked (3 words) {hm:.1} ticks");

    let mut out = vec![Hit::Miss; 256];
    for &(n, s) in &[(1_000u32, 1u32), (1_000, 10), (100_000, 1), (100_000, 10)] {
        let (mut c, keys) = build(n, s, false);
        let passes = if n > 10_000 { 5 } else { 50 };
        let mf = best(passes, keys.len(), || {
            lookup_all(&mut c, &xl, &keys, &mut out)
        });
        let st = c.stats();
        assert_eq!(st.misses, 0);
        let (mut e, keys) = build(n, s, true);
        lookup_all(&mut e, &xl, &keys, &mut out); // warm the EMC
        e.set_emc_insert_inv_prob(100);
        let emc = best(passes, keys.len(), || {
            lookup_all(&mut e, &xl, &keys, &mut out)
        });
        let es = e.stats();
        println!(
            "{n:>7} megaflows, {s:>2} subtables: megaflow hit {mf:6.1} ticks/key \
             ({:.2} subtables/hit); EMC on {emc:6.1} ticks/key (EMC hit ratio {:.2})",
            st.mean_subtables_per_hit(),
            es.emc_hits as f64 / es.emc_lookups.max(1) as f64
        );
    }

    // Insert cost (overlap check, subtable, slab, table, wheel), into an empty cache.
    for &s in &[1u32, 10] {
        let n = 100_000u32;
        let ts: Vec<_> = (0..n)
            .map(|i| {
                (
                    flow_key(i, s),
                    Translated {
                        actions: super::tests::out(1),
                        mask: mask(i % s),
                        rules: RuleList::default(),
                    },
                )
            })
            .collect();
        let cfg = CacheConfig {
            emc_enabled: false,
            ..CacheConfig::default()
        };
        let mut c = FlowCache::with_hash_key(&cfg, HashKey::from_seed(7)).unwrap();
        let t0 = graph::rdtsc();
        for (k, t) in &ts {
            black_box(c.insert(k, t, 1, 0).is_ok());
        }
        let first = (graph::rdtsc() - t0) as f64 / n as f64;
        let mut ins = f64::MAX;
        for _ in 0..3 {
            c.flush();
            let t0 = graph::rdtsc();
            for (k, t) in &ts {
                black_box(c.insert(k, t, 1, 0).is_ok());
            }
            ins = ins.min((graph::rdtsc() - t0) as f64 / n as f64);
        }
        println!(
            "insert into {s:>2} subtables: {ins:6.1} ticks/megaflow into reused slots \
             ({first:.1} on first fill, page faults included), 100k megaflows"
        );
    }
}

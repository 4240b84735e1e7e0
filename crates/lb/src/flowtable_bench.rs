//! Cycle counts of the flow table: `cargo test -p vecplane-lb --release --lib -- --ignored
//! flowtable_bench --nocapture`. TSC ticks per key, the best of several passes (a shared
//! machine preempts); batches of 256 keys in a shuffled order, as a worker's vector brings them.

use super::*;
use std::hint::black_box;

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

fn tuple(i: u32) -> FiveTuple {
    let x = i.wrapping_mul(2_654_435_761);
    let b = x.to_be_bytes();
    FiveTuple::v4(
        [10, b[0], b[1], b[2]],
        [198, 18, 1, 1],
        6,
        (x >> 8) as u16 | 1024,
        80,
    )
}

fn run(flows: u32, entries: usize) {
    let buckets = entries / WAYS;
    let mut t = FlowTable::<AsRef>::new(buckets, Timeouts::default(), 4, 128).expect("table");
    let mut keys: Vec<FlowKey> = (0..flows).map(|i| FlowKey::new(1, &tuple(i))).collect();
    let mut stored = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let h = t.hash(k);
        if t.insert(
            k,
            h,
            AsRef {
                slot: i as u32 % 100,
                gen: 0,
            },
            10,
        ) != Insert::Full
        {
            stored.push(*k);
        }
    }
    let refused = keys.len() - stored.len();
    keys = stored;
    // A fixed shuffle (xorshift) so batches touch random buckets.
    let mut s = 0x9e37_79b9u32;
    for i in (1..keys.len()).rev() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        keys.swap(i, s as usize % (i + 1));
    }
    let n = keys.len().min(1 << 16);
    let touch = [Touch::Refresh; BATCH];
    let mut hashes = [FlowHash::default(); BATCH];
    let mut out = [None; BATCH];
    let batched = best(7, n, || {
        for c in keys[..n].chunks(BATCH) {
            for (h, k) in hashes.iter_mut().zip(c) {
                *h = t.hash(k);
                t.prefetch(*h);
            }
            t.lookup_batch(c, &hashes, &touch, 11, &mut out);
            black_box(&out);
        }
    });
    let single = best(7, n, || {
        for k in &keys[..n] {
            let h = t.hash(k);
            black_box(t.lookup(k, h, 11, Touch::Refresh));
        }
    });
    let sweep = best(3, buckets, || {
        black_box(t.sweep(11, buckets, |_| true));
    });
    println!(
        "flows {flows:>8} entries {entries:>8} ({WAYS} ways, {:>5.1}% full, {refused} refused): hit batched {batched:>5.1} ticks, one by one {single:>5.1} ticks, sweep {sweep:.1} ticks/bucket",
        100.0 * (flows as usize - refused) as f64 / (buckets * WAYS) as f64
    );
}

#[test]
#[ignore]
fn flowtable_bench() {
    run(1_000, 1 << 12);
    run(100_000, 1 << 18);
    run(1_000_000, 1 << 21);
    run(1_000_000, 1 << 22);
}

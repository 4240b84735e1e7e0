//! Lookup cost of the session table: `cargo test -p vecplane-session --release --lib --
//! --ignored table_bench --nocapture`. Nanoseconds per key, the best of several passes (a
//! shared machine preempts); batches of 256 keys in a shuffled order, as a worker's vector
//! brings them. (The lb node's cost per packet is measured in instructions by
//! `scripts/instructions_per_packet.py`.)

use super::*;
use crate::tuple::FiveTuple;
use std::hint::black_box;
use std::time::Instant;

fn best(passes: usize, units: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..passes)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / units as f64
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

fn run(keys_n: u32, entries: usize) {
    let buckets = buckets_for(entries);
    let mut t = SessionTable::<u64>::new(buckets, [40; CLASSES], 4, 0).expect("table");
    let mut hashes: Vec<SessionHash> = (0..keys_n)
        .map(|i| t.hash(&SessionKey::new(1, &tuple(i))))
        .collect();
    let before = hashes.len();
    hashes.retain(|&h| t.insert(h, 0, 0, 10) != Insert::Full);
    let refused = before - hashes.len();
    // A fixed shuffle (xorshift) so batches touch random buckets.
    let mut s = 0x9e37_79b9u32;
    for i in (1..hashes.len()).rev() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        hashes.swap(i, s as usize % (i + 1));
    }
    let n = hashes.len().min(1 << 16);
    let touch = [Touch::Refresh; BATCH];
    let mut out = [None; BATCH];
    let batched = best(7, n, || {
        for c in hashes[..n].chunks(BATCH) {
            for &h in c {
                t.prefetch(h);
            }
            t.lookup_batch(c, &touch, 11, &mut out);
            black_box(&out);
        }
    });
    let single = best(7, n, || {
        for &h in &hashes[..n] {
            black_box(t.lookup(h, 11, Touch::Refresh));
        }
    });
    let sweep = best(3, buckets, || {
        black_box(t.sweep(11, buckets, |_| true));
    });
    println!(
        "keys {keys_n:>8} entries {entries:>8} ({WAYS} ways, {:>5.1}% full, {refused} refused): hit batched {batched:>5.1} ns, one by one {single:>5.1} ns, sweep {sweep:.1} ns/bucket",
        100.0 * (keys_n as usize - refused) as f64 / (buckets * WAYS) as f64
    );
}

#[test]
#[ignore]
fn table_bench() {
    run(1_000, 1 << 12);
    run(100_000, 1 << 18);
    run(1_000_000, 1 << 21);
    run(1_000_000, 1 << 22);
}

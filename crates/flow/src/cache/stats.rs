//! Counters of the flow caches (`ctl show flow-cache`) and the cycles-per-miss histogram: plain
//! integers the owning worker bumps, and a published copy (relaxed atomics) that the worker
//! refreshes at maintenance and the control plane reads. Never locks; the worker never reads back.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Counters of one worker's flow caches (sum several workers' with [`CacheStats::add`]).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct CacheStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl CacheStats {
            /// Counter names, in field order (for metrics and `show`).
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// The counters in field order.
            pub fn values(&self) -> [u64; Self::NAMES.len()] {
                [$(self.$name),*]
            }

            fn from_values(v: &[u64; Self::NAMES.len()]) -> CacheStats {
                let mut it = v.iter().copied();
                CacheStats { $($name: it.next().unwrap_or(0),)* }
            }

            /// Add `other`'s counters (gauges too: the sum over workers).
            pub fn add(&mut self, other: &CacheStats) {
                $(self.$name = self.$name.wrapping_add(other.$name);)*
            }
        }
    };
}

counters! {
    /// Keys looked up in the exact-match cache.
    emc_lookups,
    /// Exact-match cache hits (on a current megaflow).
    emc_hits,
    /// Keys not looked up in the exact-match cache because it was missing: when in a chunk the
    /// megaflow cache answered at least three times as many keys as the EMC (the working set
    /// outgrew the EMC), only one chunk in `EMC_SAMPLE` consults it until its hits come back.
    emc_skipped,
    /// Keys not looked up in the exact-match cache (nor inserted into it on a megaflow hit)
    /// because the megaflow cache had at most `emc_bypass_subtables` subtables (default 2) of
    /// at most four megaflows each: comparing a key with those costs less than the EMC's
    /// hash and probe.
    emc_bypassed,
    /// Entries written into the exact-match cache.
    emc_inserts,
    /// Keys looked up in the megaflow cache (those the exact-match cache did not answer).
    megaflow_lookups,
    /// Megaflow cache hits.
    megaflow_hits,
    /// Keys neither cache answered (sent to the slow path).
    misses,
    /// Sum over megaflow hits of the subtables visited (1 = found in the first); divide by
    /// `megaflow_hits` for the mean.
    subtables_visited,
    /// Megaflows installed.
    installed,
    /// Megaflows evicted to make room when the cache was full.
    evicted,
    /// Megaflows removed after the idle timeout.
    expired,
    /// Stale megaflows re-translated and kept (same actions, mask no wider).
    revalidated,
    /// Stale megaflows deleted because their actions or mask changed.
    revalidation_deleted,
    /// Installs refused because the key already matched another megaflow.
    overlap_refused,
    /// Installs refused because the cache was full and nothing could be evicted.
    megaflow_full,
    /// Installs refused because the subtable (distinct mask) limit was reached.
    subtable_full,
    /// Megaflows deleted by a flush.
    flushed,
    /// Subtables listed again after they outgrew their list of a few megaflows (looked up
    /// by hashing meanwhile) and shrank back to it.
    subtables_relisted,
    /// Gauge: megaflows now installed.
    megaflows,
    /// Gauge: subtables (distinct masks) now in use.
    subtables,
}

impl CacheStats {
    /// Mean subtables visited per megaflow hit (0 when there was none).
    pub fn mean_subtables_per_hit(&self) -> f64 {
        if self.megaflow_hits == 0 {
            0.0
        } else {
            self.subtables_visited as f64 / self.megaflow_hits as f64
        }
    }
}

/// Buckets of [`CycleHistogram`]: bucket `b` holds values in `[2^(b-1), 2^b)`, bucket 0 the
/// value 0; the last bucket takes everything above.
pub const CYCLE_BUCKETS: usize = 40;

/// A histogram of TSC cycles (per miss: classify + install + act), log2 buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleHistogram {
    /// Counts per bucket (see [`CYCLE_BUCKETS`]).
    pub buckets: [u64; CYCLE_BUCKETS],
    /// Sum of the recorded values (for the mean).
    pub sum: u64,
}

impl Default for CycleHistogram {
    fn default() -> Self {
        CycleHistogram {
            buckets: [0; CYCLE_BUCKETS],
            sum: 0,
        }
    }
}

impl CycleHistogram {
    /// The bucket of `cycles`.
    #[inline]
    pub fn bucket_of(cycles: u64) -> usize {
        ((64 - cycles.leading_zeros()) as usize).min(CYCLE_BUCKETS - 1)
    }

    /// Lowest value of bucket `b` (its upper bound is `lower_bound(b + 1)`).
    pub fn lower_bound(b: usize) -> u64 {
        if b == 0 {
            0
        } else {
            1u64 << (b - 1).min(63)
        }
    }

    /// Count `cycles` (`n` times, for a group of misses sharing one classification).
    #[inline]
    pub fn record(&mut self, cycles: u64, n: u64) {
        self.buckets[Self::bucket_of(cycles)] += n;
        self.sum = self.sum.wrapping_add(cycles.wrapping_mul(n));
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Mean of the recorded values (0 when none).
    pub fn mean(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// Upper bound of the bucket holding the `q`-quantile (`q` in 0..=1); 0 when empty.
    pub fn quantile_upper_bound(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let target = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= target {
                return Self::lower_bound(b + 1).saturating_sub(1).max(1);
            }
        }
        u64::MAX
    }

    /// Add `other`'s counts.
    pub fn merge(&mut self, other: &CycleHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.sum = self.sum.wrapping_add(other.sum);
    }
}

/// What a worker publishes for the control plane: its counters and histogram as relaxed
/// atomics. The worker stores with [`PublishedStats::publish`] (at maintenance), the control
/// plane reads with [`PublishedStats::load`]; a reader may see a mix of two publications, which is
/// fine for counters that only grow.
#[derive(Debug)]
pub struct PublishedStats {
    counters: [AtomicU64; CacheStats::NAMES.len()],
    cycles: [AtomicU64; CYCLE_BUCKETS],
    cycles_sum: AtomicU64,
}

impl Default for PublishedStats {
    fn default() -> Self {
        PublishedStats {
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            cycles: std::array::from_fn(|_| AtomicU64::new(0)),
            cycles_sum: AtomicU64::new(0),
        }
    }
}

impl PublishedStats {
    /// Publish a copy (worker side; relaxed stores, no lock).
    pub fn publish(&self, stats: &CacheStats, cycles: &CycleHistogram) {
        for (a, v) in self.counters.iter().zip(stats.values()) {
            a.store(v, Ordering::Relaxed);
        }
        for (a, v) in self.cycles.iter().zip(cycles.buckets.iter()) {
            a.store(*v, Ordering::Relaxed);
        }
        self.cycles_sum.store(cycles.sum, Ordering::Relaxed);
    }

    /// Read the last publication (control-plane side).
    pub fn load(&self) -> (CacheStats, CycleHistogram) {
        let v = std::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed));
        let mut h = CycleHistogram::default();
        for (b, a) in h.buckets.iter_mut().zip(self.cycles.iter()) {
            *b = a.load(Ordering::Relaxed);
        }
        h.sum = self.cycles_sum.load(Ordering::Relaxed);
        (CacheStats::from_values(&v), h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_log2() {
        assert_eq!(CycleHistogram::bucket_of(0), 0);
        assert_eq!(CycleHistogram::bucket_of(1), 1);
        assert_eq!(CycleHistogram::bucket_of(2), 2);
        assert_eq!(CycleHistogram::bucket_of(3), 2);
        assert_eq!(CycleHistogram::bucket_of(1024), 11);
        assert_eq!(CycleHistogram::bucket_of(u64::MAX), CYCLE_BUCKETS - 1);
        let mut h = CycleHistogram::default();
        h.record(1500, 9);
        h.record(100_000, 1);
        assert_eq!(h.count(), 10);
        assert_eq!(h.quantile_upper_bound(0.5), 2047);
        assert_eq!(h.quantile_upper_bound(1.0), 131_071);
        assert!((h.mean() - 11_350.0).abs() < 1e-9);
    }

    #[test]
    fn published_stats_round_trip() {
        let p = PublishedStats::default();
        let s = CacheStats {
            emc_hits: 5,
            megaflows: 7,
            subtables: 2,
            ..Default::default()
        };
        let mut h = CycleHistogram::default();
        h.record(2000, 3);
        p.publish(&s, &h);
        assert_eq!(p.load(), (s, h));
        let mut sum = s;
        sum.add(&s);
        assert_eq!(sum.emc_hits, 10);
    }
}

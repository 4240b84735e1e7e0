//! Deterministic synthetic route tables and addresses for benchmarks and tests.
//! Owns a tiny PRNG (SplitMix64) and realistic BGP-like prefix-length distributions;
//! it must never be used on the forwarding path or depend on an external RNG crate.

use crate::{mask4, mask6, Ip4Fib, Ip6Fib, NextHopId};
use std::collections::HashSet;

/// SplitMix64: a small, fast, deterministic 64-bit PRNG (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// Creates a generator; equal seeds give equal sequences.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// Next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Next 128 random bits.
    pub fn next_u128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }

    /// Uniform value in `0..n` (returns 0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Picks a prefix length from a cumulative weight table `(len, weight)`.
fn pick_len(rng: &mut SplitMix64, weights: &[(u8, u32)]) -> u8 {
    let total: u32 = weights.iter().map(|w| w.1).sum();
    let mut r = rng.below(u64::from(total)) as u32;
    for &(len, w) in weights {
        if r < w {
            return len;
        }
        r -= w;
    }
    weights.last().map_or(24, |w| w.0)
}

/// IPv4 prefix-length weights (per 10,000), shaped like a 2020s BGP table:
/// ~61% /24, ~37% spread over /8../23 (mostly /19../23), 2% /25../32.
const IP4_WEIGHTS: &[(u8, u32)] = &[
    (8, 1),
    (9, 1),
    (10, 2),
    (11, 5),
    (12, 10),
    (13, 20),
    (14, 35),
    (15, 60),
    (16, 130),
    (17, 80),
    (18, 130),
    (19, 250),
    (20, 400),
    (21, 450),
    (22, 1100),
    (23, 1000),
    (24, 6126),
    (25, 40),
    (26, 35),
    (27, 30),
    (28, 25),
    (29, 25),
    (30, 20),
    (31, 5),
    (32, 20),
];

/// Distinct /24 blocks that routes longer than /24 are drawn from, which bounds the number of
/// DIR-24-8 tbl8 groups whatever the route count.
const IP4_LONG_POOL: usize = 16_384;

/// `count` distinct random IPv4 routes `(prefix, len, next_hop)` with a BGP-like length mix
/// (see the module docs); prefixes are unicast (first octet 1..=223), next hops uniform in
/// `1..=next_hops` (clamped to `1..=Ip4Fib::MAX_NEXT_HOP`). Deterministic for a given seed.
///
/// Routes longer than /24 are more-specifics inside a pool of 16,384 /24 blocks, so the table
/// never needs more tbl8 groups than that. Meant for up to a few million routes: if a length's
/// space is exhausted the generator falls back to /24s.
pub fn random_ip4_routes(count: usize, seed: u64, next_hops: u32) -> Vec<(u32, u8, NextHopId)> {
    let mut rng = SplitMix64::new(seed);
    let nh_max = next_hops.clamp(1, Ip4Fib::MAX_NEXT_HOP);
    let unicast = |rng: &mut SplitMix64| -> u32 {
        let first = rng.below(223) as u32 + 1;
        (first << 24) | (rng.next() as u32 & 0x00ff_ffff)
    };
    let pool: Vec<u32> = (0..IP4_LONG_POOL)
        .map(|_| unicast(&mut rng) & 0xffff_ff00)
        .collect();
    let mut seen: HashSet<(u32, u8)> = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    let mut budget = count.saturating_mul(64).max(1024);
    while out.len() < count && budget > 0 {
        let mut len = pick_len(&mut rng, IP4_WEIGHTS);
        for attempt in 0..64 {
            budget = budget.saturating_sub(1);
            if attempt == 16 {
                len = 24;
            }
            let addr = if len > 24 {
                pool[rng.below(pool.len() as u64) as usize] | (rng.next() as u32 & 0xff)
            } else {
                unicast(&mut rng)
            };
            let prefix = addr & mask4(len);
            if seen.insert((prefix, len)) {
                let nh = rng.below(u64::from(nh_max)) as u32 + 1;
                out.push((prefix, len, nh));
                break;
            }
        }
    }
    out
}

/// IPv6 prefix-length weights (per 1,000): 50% /48, 15% /32, 1% /128, the rest over /29../64.
const IP6_WEIGHTS: &[(u8, u32)] = &[
    (29, 20),
    (30, 10),
    (31, 10),
    (32, 150),
    (33, 10),
    (34, 10),
    (35, 10),
    (36, 10),
    (37, 10),
    (38, 10),
    (39, 10),
    (40, 10),
    (41, 10),
    (42, 10),
    (43, 10),
    (44, 10),
    (45, 10),
    (46, 10),
    (47, 10),
    (48, 500),
    (49, 5),
    (50, 5),
    (51, 5),
    (52, 5),
    (53, 5),
    (54, 5),
    (55, 5),
    (56, 30),
    (57, 5),
    (58, 5),
    (59, 5),
    (60, 5),
    (61, 5),
    (62, 5),
    (63, 5),
    (64, 50),
    (128, 10),
];

/// `count` distinct random IPv6 routes `(prefix, len, next_hop)` inside 2000::/3 with a
/// BGP-like length mix: 50% /48, 15% /32, 1% /128, the rest spread over /29../64. Prefixes are
/// uniform in 2000::/3 (so they rarely nest); next hops uniform in `1..=next_hops` (clamped to
/// `1..=Ip6Fib::MAX_NEXT_HOP`). Addresses are host-order `u128`. Deterministic for a given seed.
pub fn random_ip6_routes(count: usize, seed: u64, next_hops: u32) -> Vec<(u128, u8, NextHopId)> {
    let mut rng = SplitMix64::new(seed);
    let nh_max = next_hops.clamp(1, Ip6Fib::MAX_NEXT_HOP);
    let mut seen: HashSet<(u128, u8)> = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let len = pick_len(&mut rng, IP6_WEIGHTS);
        let addr = (1u128 << 125) | (rng.next_u128() >> 3);
        let prefix = addr & mask6(len);
        if seen.insert((prefix, len)) {
            let nh = rng.below(u64::from(nh_max)) as u32 + 1;
            out.push((prefix, len, nh));
        }
    }
    out
}

/// A pseudo-random address inside `prefix/len` (host bits drawn from `seed`; the prefix's own
/// host bits are ignored). Lengths above 32 are treated as 32.
pub fn ip4_address_in(prefix: u32, len: u8, seed: u64) -> u32 {
    let m = mask4(len.min(32));
    let host = SplitMix64::new(seed).next() as u32;
    (prefix & m) | (host & !m)
}

/// A pseudo-random address inside `prefix/len` (host bits drawn from `seed`; the prefix's own
/// host bits are ignored). Lengths above 128 are treated as 128.
pub fn ip6_address_in(prefix: u128, len: u8, seed: u64) -> u128 {
    let m = mask6(len.min(128));
    let host = SplitMix64::new(seed).next_u128();
    (prefix & m) | (host & !m)
}

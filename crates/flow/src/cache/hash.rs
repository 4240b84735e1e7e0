//! The keyed hash of the flow caches: NH (the inner hash of UMAC) over the key words with a
//! per-process random key, then a keyed multiply-fold. Owns the key and the two hash shapes
//! (whole key for the exact-match cache, masked words for a megaflow subtable); never allocates.
//!
//! Why NH: attacker-chosen headers must not pile into one bucket. NH sums the 128-bit products
//! `(m[2i] + k[2i]) * (m[2i+1] + k[2i+1])` (additions mod 2^64, sum mod 2^128); for two distinct
//! inputs of the same length it collides with probability at most 2^-64 over the random key
//! (Black et al., "UMAC: Fast and Secure Message Authentication", 1999). A subtable always hashes
//! the same words, so inputs of one subtable have one length. The 128-bit sum is folded to 64 bits
//! by a keyed 64x64->128 multiply whose two halves are xored, so every input bit reaches the low
//! bits that pick a bucket. Cost: one multiply per two words, all independent (no chain), so the
//! 19-word key hashes in about as many cycles as it has words (`cargo test -p vecplane-flow
//! --release -- --ignored cache_bench --nocapture` prints it). SipHash would be a PRF but costs
//! several times more; an unkeyed hash (CRC32, FNV) lets anyone who knows the code build
//! colliding flows. The key is drawn once per process from the standard library's random
//! `RandomState` seeds (the operating system's random source); tests may fix it.

use crate::key::{FlowKey, KEY_WORDS};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// The secret of the keyed hash: one key word per flow-key word, a pad word for an odd count,
/// and two words for the final fold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashKey {
    k: [u64; KEY_WORDS + 1],
    fold: [u64; 2],
}

/// SplitMix64 step: expands one seed into the key words.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn nh_pair(a: u64, ka: u64, b: u64, kb: u64) -> u128 {
    (a.wrapping_add(ka) as u128).wrapping_mul(b.wrapping_add(kb) as u128)
}

impl HashKey {
    /// A key expanded from `seed` (tests and benchmarks; production uses [`HashKey::process`]).
    pub fn from_seed(seed: u64) -> HashKey {
        let mut s = seed;
        let mut k = [0u64; KEY_WORDS + 1];
        for w in k.iter_mut() {
            *w = splitmix(&mut s);
        }
        // Odd multipliers keep the fold from discarding low bits.
        let fold = [splitmix(&mut s) | 1, splitmix(&mut s) | 1];
        HashKey { k, fold }
    }

    /// A fresh random key (from the standard library's per-process random seeds, which come
    /// from the operating system).
    pub fn random() -> HashKey {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x7665_6370_6c61_6e65);
        let a = h.finish();
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(a);
        HashKey::from_seed(a ^ h.finish().rotate_left(32))
    }

    /// The key of this process, drawn once on first use and shared by every worker.
    pub fn process() -> &'static HashKey {
        static KEY: OnceLock<HashKey> = OnceLock::new();
        KEY.get_or_init(HashKey::random)
    }

    /// A 64-bit value derived from the key (to seed per-cache generators and subtable salts).
    pub fn derive(&self, what: u64) -> u64 {
        let mut s = self.k[0] ^ what.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        splitmix(&mut s)
    }

    #[inline(always)]
    fn finish(&self, acc: u128) -> u64 {
        fold(
            (acc as u64) ^ self.fold[0],
            ((acc >> 64) as u64) ^ self.fold[1],
        )
    }

    /// Hash of the whole key (the exact-match cache's).
    #[inline]
    pub fn hash_key(&self, key: &FlowKey) -> u64 {
        let w = &key.w;
        let k = &self.k;
        let mut acc: u128 = 0;
        let mut i = 0;
        while i + 1 < KEY_WORDS {
            acc = acc.wrapping_add(nh_pair(w[i], k[i], w[i + 1], k[i + 1]));
            i += 2;
        }
        if KEY_WORDS % 2 == 1 {
            acc = acc.wrapping_add(nh_pair(w[KEY_WORDS - 1], k[KEY_WORDS - 1], 0, k[KEY_WORDS]));
        }
        self.finish(acc)
    }

    /// Hash of `key & mask` over the words listed in `words` (those where the mask is not
    /// zero), started from `salt` (one per subtable, so that equal masked values of different
    /// subtables land apart).
    #[inline]
    pub fn hash_masked(&self, key: &FlowKey, mask: &FlowKey, words: &[u8], salt: u64) -> u64 {
        let k = &self.k;
        let mut acc: u128 = salt as u128;
        let mut pairs = words.chunks_exact(2);
        for p in &mut pairs {
            let (a, b) = (p[0] as usize % KEY_WORDS, p[1] as usize % KEY_WORDS);
            acc = acc.wrapping_add(nh_pair(
                key.w[a] & mask.w[a],
                k[a],
                key.w[b] & mask.w[b],
                k[b],
            ));
        }
        if let [a] = pairs.remainder() {
            let a = *a as usize % KEY_WORDS;
            acc = acc.wrapping_add(nh_pair(key.w[a] & mask.w[a], k[a], 0, k[KEY_WORDS]));
        }
        self.finish(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Field;

    /// Chi-square statistic of `n` keys over `buckets` buckets (expected about `buckets`).
    fn chi_square(hashes: impl Iterator<Item = u64>, buckets: usize) -> (f64, usize) {
        let mut counts = vec![0usize; buckets];
        let mut n = 0;
        for h in hashes {
            counts[(h as usize) & (buckets - 1)] += 1;
            n += 1;
        }
        let e = n as f64 / buckets as f64;
        let chi = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        (chi, counts.into_iter().max().unwrap_or(0))
    }

    fn adversarial_families() -> Vec<(&'static str, Vec<FlowKey>)> {
        let n = 1 << 16;
        let base = {
            let mut k = FlowKey::ZERO;
            k.set(Field::EthType, 0x0800);
            k.set(Field::NwProto, 6);
            k
        };
        let with = |f: &dyn Fn(&mut FlowKey, u64)| -> Vec<FlowKey> {
            (0..n as u64)
                .map(|i| {
                    let mut k = base;
                    f(&mut k, i);
                    k
                })
                .collect()
        };
        vec![
            (
                "sequential tp_src",
                with(&|k, i| k.set(Field::TpSrc, i as u128)),
            ),
            (
                "multiples of 65536 in nw_src (high bits only)",
                with(&|k, i| k.set(Field::NwSrc, (i << 16) as u128)),
            ),
            (
                "one bit of 16 positions x 4096 ports",
                with(&|k, i| {
                    k.set(Field::TpDst, (i >> 4) as u128);
                    k.set(Field::NwDst, 1u128 << (i & 15));
                }),
            ),
            (
                "ipv6 low word stepping by 2^48",
                with(&|k, i| k.w[12] = i << 48),
            ),
            (
                "the same value in two words (cancels in xor-based hashes)",
                with(&|k, i| {
                    k.w[10] = i.wrapping_mul(0x1_0000_0001);
                    k.w[18] = i.wrapping_mul(0x1_0000_0001);
                }),
            ),
        ]
    }

    #[test]
    fn adversarial_key_families_spread_evenly() {
        let buckets = 4096;
        for seed in [1u64, 2, 3] {
            let hk = HashKey::from_seed(seed);
            for (name, keys) in adversarial_families() {
                let (chi, max) = chi_square(keys.iter().map(|k| hk.hash_key(k)), buckets);
                // 65536 keys over 4096 buckets: 16 a bucket; chi-square has mean 4095 and
                // standard deviation about 90.
                assert!(
                    chi < 4095.0 + 6.0 * 90.0,
                    "{name}: chi-square {chi} (seed {seed})"
                );
                assert!(max < 48, "{name}: a bucket holds {max} (seed {seed})");
                let mut mask = FlowKey::ZERO;
                mask.w = [u64::MAX; KEY_WORDS];
                let words: Vec<u8> = (0..KEY_WORDS as u8).collect();
                let (chi, _) = chi_square(
                    keys.iter().map(|k| hk.hash_masked(k, &mask, &words[..], 7)),
                    buckets,
                );
                assert!(
                    chi < 4095.0 + 6.0 * 90.0,
                    "{name} (masked): chi-square {chi}"
                );
            }
        }
    }

    #[test]
    fn masked_hash_ignores_bits_outside_the_mask_and_depends_on_the_key() {
        let a = HashKey::from_seed(1);
        let b = HashKey::from_seed(2);
        let mut mask = FlowKey::ZERO;
        mask.unwildcard(Field::NwDst);
        mask.unwildcard(Field::TpDst);
        let words = [10u8, 18];
        let mut k1 = FlowKey::ZERO;
        k1.set(Field::NwDst, 0xc612_0001);
        let mut k2 = k1;
        k2.set(Field::NwSrc, 0xc612_0002);
        k2.set(Field::TpSrc, 99);
        assert_eq!(
            a.hash_masked(&k1, &mask, &words, 5),
            a.hash_masked(&k2, &mask, &words, 5)
        );
        assert_ne!(
            a.hash_masked(&k1, &mask, &words, 5),
            b.hash_masked(&k1, &mask, &words, 5)
        );
        assert_ne!(
            a.hash_masked(&k1, &mask, &words, 5),
            a.hash_masked(&k1, &mask, &words, 6)
        );
        assert_ne!(HashKey::random(), HashKey::random());
    }
}

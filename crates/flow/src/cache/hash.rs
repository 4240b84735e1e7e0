//! The keyed hash of the flow caches: NH (the inner hash of UMAC) over the key words with a
//! per-process random key, then a keyed multiply-fold. Owns the key and the hash shapes (whole
//! key, sparse key for the exact-match cache, masked key for a megaflow subtable); never
//! allocates.
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

use crate::extract::{Ip4Words, IP4_L4_KEY_WORDS};
use crate::key::{Field, FlowKey, KEY_WORDS};
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// The secret of the keyed hash: one key word per flow-key word, a pad word for an odd count,
/// and two words for the final fold; `tail[p]` is what the all-zero pairs `p..` of a
/// `KEY_WORDS + 1`-word message add (so a short message hashes as if zero-padded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashKey {
    k: [u64; KEY_WORDS + 1],
    fold: [u64; 2],
    tail: [u128; PAIRS + 1],
}

/// Pairs in a message of `KEY_WORDS + 1` words (a sparse key's longest).
const PAIRS: usize = KEY_WORDS.div_ceil(2);

/// Most key words a [`SparseKey`] holds (extraction writes at most 13: port, tunnel id and
/// addresses, L2, IPv6 addresses, the IP word, neighbour discovery addresses, L4).
pub const SPARSE_WORDS: usize = 14;

/// Words of a short [`SparseKey`]'s message (the map and up to 6 key words: an IPv4 key with a
/// transport header), hashed as 4 pairs (the 8th word is zero) and compared as 7 words.
pub const SHORT: usize = 7;
/// Words of a long one's message, compared as 15 words and hashed as 8 pairs.
pub const LONG: usize = SPARSE_WORDS + 1;

const fn w(f: crate::key::Field) -> u32 {
    1 << f.def().word
}
/// The word map of an untagged or tagged IPv4 packet with a transport header, no tunnel.
pub(crate) const IP4_L4: u32 = w(Field::InPort)
    | w(Field::EthSrc)
    | w(Field::EthDst)
    | w(Field::NwSrc)
    | w(Field::NwProto)
    | w(Field::TpSrc);
/// The same for IPv6 (both halves of each address).
const IP6_L4: u32 = w(Field::InPort)
    | w(Field::EthSrc)
    | w(Field::EthDst)
    | w(Field::Ipv6Src)
    | w(Field::Ipv6Src) << 1
    | w(Field::Ipv6Dst)
    | w(Field::Ipv6Dst) << 1
    | w(Field::NwProto)
    | w(Field::TpSrc);
/// Tunnel metadata words (a packet a VXLAN port decapsulated).
const TUNNEL: u32 = w(Field::TunId) | w(Field::TunSrc);

/// The first word (map and count) of an `IP4_L4` key's sparse form.
pub(crate) const IP4_L4_HEAD: u64 = IP4_L4 as u64 | 6 << 32;

// Extraction's fast path hands over exactly these words, in key order (the order of a sparse
// key's words): its `Ip4Words` are the sparse form's `m[1..7]`.
const _: () = {
    assert!(IP4_L4 == crate::extract::IP4_L4_MAP);
    let w = crate::extract::IP4_L4_KEY_WORDS;
    let mut t = 1;
    while t < 6 {
        assert!(w[t - 1] < w[t]);
        t += 1;
    }
};

/// A flow key as its present words: `m[0]` says which words of the `FlowKey` are present (bit
/// `j`: word `j`) and, in its high half, how many (n); `m[1..=n]` are those words in order, and
/// every word not present is zero. Two keys are equal exactly when their sparse forms with the
/// same `m[0]` are (same words, same values). A short key (1 + n <= `SHORT`) is zero in
/// `m[1 + n..SHORT + 1]`, a long one in `m[1 + n..]`, so hashing and comparing are fixed-length
/// straight code of either length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct SparseKey {
    /// The word map and count, then the present words, then zeros.
    pub m: [u64; LONG + 1],
}

impl SparseKey {
    /// Empty (no words).
    pub const ZERO: SparseKey = SparseKey { m: [0; LONG + 1] };

    /// Words of `m` in use (the map and the present words). The count is stored, not
    /// computed: without the `popcnt` instruction (the baseline x86-64 target) a population
    /// count is a dozen instructions.
    #[inline(always)]
    pub fn len(&self) -> usize {
        1 + ((self.m[0] >> 32) as usize).min(SPARSE_WORDS)
    }

    /// Never true (the map is always there); for clippy's `len_without_is_empty`.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// True for a short key (see the type's comment).
    #[inline(always)]
    pub fn is_short(&self) -> bool {
        self.len() <= SHORT
    }

    /// The sparse form of the `IP4_L4` key whose words are `w`.
    #[inline(always)]
    pub fn set_ip4(&mut self, w: &Ip4Words) {
        self.m[0] = IP4_L4_HEAD;
        self.m[1..7].copy_from_slice(w);
        self.m[7..].fill(0);
    }

    /// Gather the words of `key` that `words` names (a superset of its non-zero words) into
    /// `self`; false (and `self` unusable) when more than `SPARSE_WORDS` are named. The usual
    /// shapes (IPv4 or IPv6 with a transport header, with or without a tunnel) are gathered by
    /// straight code, the rest bit by bit.
    #[inline(always)]
    pub fn gather(&mut self, key: &FlowKey, words: u32) -> bool {
        let words = words & ((1u32 << KEY_WORDS) - 1);
        match words {
            IP4_L4 => self.fixed::<6>(key, words),
            IP6_L4 => self.fixed::<9>(key, words),
            x if x == IP4_L4 | TUNNEL => self.fixed::<8>(key, words),
            x if x == IP6_L4 | TUNNEL => self.fixed::<11>(key, words),
            _ => self.bit_by_bit(key, words),
        }
    }

    /// Gather the `N` words of `words` (which has exactly `N` bits set) with unrolled code.
    #[inline(always)]
    fn fixed<const N: usize>(&mut self, key: &FlowKey, words: u32) -> bool {
        let mut idx = [0usize; N];
        let mut bits = words;
        for slot in idx.iter_mut() {
            *slot = bits.trailing_zeros() as usize % KEY_WORDS;
            bits &= bits.wrapping_sub(1);
        }
        self.m[0] = words as u64 | (N as u64) << 32;
        for (t, &j) in idx.iter().enumerate() {
            self.m[t + 1] = key.w[j];
        }
        let end = if N < SHORT { SHORT + 1 } else { LONG + 1 };
        for t in N + 1..end {
            self.m[t] = 0;
        }
        true
    }

    #[cold]
    fn bit_by_bit(&mut self, key: &FlowKey, words: u32) -> bool {
        let mut bits = words;
        let mut n = 0;
        while bits != 0 {
            if n == SPARSE_WORDS {
                return false;
            }
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            n += 1;
            // n <= SPARSE_WORDS and j < KEY_WORDS: both in bounds.
            self.m[n] = key.w[j];
        }
        self.m[0] = words as u64 | (n as u64) << 32;
        for t in n + 1..LONG + 1 {
            self.m[t] = 0;
        }
        true
    }
}

/// The words of `key` that are not zero, as a [`SparseKey`] map.
#[inline]
pub fn nonzero_words(key: &FlowKey) -> u32 {
    let mut words = 0u32;
    for (j, w) in key.w.iter().enumerate() {
        words |= ((*w != 0) as u32) << j;
    }
    words
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
        let mut tail = [0u128; PAIRS + 1];
        for p in (0..PAIRS).rev() {
            tail[p] =
                tail[p + 1].wrapping_add((k[2 * p] as u128).wrapping_mul(k[2 * p + 1] as u128));
        }
        HashKey { k, fold, tail }
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

    /// Hash of a sparse key (the exact-match cache's): NH over its message (`SHORT + 1` or
    /// `LONG + 1` words, zero past its words) zero-padded to `KEY_WORDS + 1` words, so that
    /// distinct sparse keys (distinct messages of one length) collide with probability at most
    /// 2^-64 as for the whole key. The padding's pairs are the precomputed `tail`: a typical
    /// IPv4 key (6 words and the map) costs 4 multiplies instead of 10.
    #[inline(always)]
    pub fn hash_sparse(&self, s: &SparseKey) -> u64 {
        if s.is_short() {
            self.nh_prefix::<{ SHORT.div_ceil(2) }>(s)
        } else {
            self.nh_prefix::<{ LONG.div_ceil(2) }>(s)
        }
    }

    /// [`HashKey::hash_sparse`] of the `IP4_L4` key (the usual shape) whose words are `w`: the
    /// same value, without gathering the sparse key first.
    #[inline(always)]
    pub(crate) fn hash_ip4_l4(&self, w: &Ip4Words) -> u64 {
        let w = |t: usize| w[t];
        let k = &self.k;
        let acc = nh_pair(IP4_L4_HEAD, k[0], w(0), k[1])
            .wrapping_add(nh_pair(w(1), k[2], w(2), k[3]))
            .wrapping_add(nh_pair(w(3), k[4], w(4), k[5]))
            .wrapping_add(nh_pair(w(5), k[6], 0, k[7]));
        self.finish(acc.wrapping_add(self.tail[SHORT.div_ceil(2)]))
    }

    #[inline(always)]
    fn nh_prefix<const P: usize>(&self, s: &SparseKey) -> u64 {
        let k = &self.k;
        let mut acc: u128 = 0;
        for p in 0..P {
            acc = acc.wrapping_add(nh_pair(s.m[2 * p], k[2 * p], s.m[2 * p + 1], k[2 * p + 1]));
        }
        self.finish(acc.wrapping_add(self.tail[P]))
    }

    /// How a subtable of `mask` with `salt` hashes (see [`MaskedHash`]).
    pub fn masked_hash(&self, mask: &FlowKey, salt: u64) -> MaskedHash {
        let k = &self.k;
        let zero_pair = |p: usize| (k[2 * p] as u128).wrapping_mul(k[2 * p + 1] as u128);
        let mut mh = MaskedHash {
            base: salt as u128,
            ip4_base: salt as u128,
            pairs: [0; PAIRS],
            n_pairs: 0,
            ip4_mask: IP4_L4_KEY_WORDS.map(|j| mask.w[j]),
        };
        for p in 0..PAIRS {
            let word = |j: usize| mask.w.get(j).copied().unwrap_or(0);
            if word(2 * p) | word(2 * p + 1) != 0 {
                mh.pairs[mh.n_pairs as usize] = p as u8;
                mh.n_pairs += 1;
            } else {
                mh.base = mh.base.wrapping_add(zero_pair(p));
            }
            if !IP4_PAIRS.contains(&p) {
                mh.ip4_base = mh.ip4_base.wrapping_add(zero_pair(p));
            }
        }
        mh
    }

    /// A subtable's hash of `key & mask` (`mh` made from `mask`): NH over the masked key,
    /// its pairs where the mask is zero taken from `mh`'s constant.
    #[inline]
    pub fn hash_masked(&self, key: &FlowKey, mask: &FlowKey, mh: &MaskedHash) -> u64 {
        let k = &self.k;
        let masked = |j: usize| match (key.w.get(j), mask.w.get(j)) {
            (Some(v), Some(m)) => v & m,
            _ => 0, // the pad word
        };
        let mut acc = mh.base;
        for &p in &mh.pairs[..(mh.n_pairs as usize).min(PAIRS)] {
            let (a, b) = (2 * p as usize, 2 * p as usize + 1);
            acc = acc.wrapping_add(nh_pair(masked(a), k[a], masked(b), k[b]));
        }
        self.finish(acc)
    }

    /// [`HashKey::hash_masked`] of the `IP4_L4` key whose words are `w` (its other words are
    /// zero): the same value, from the six words, in five multiplies.
    #[inline(always)]
    pub(crate) fn hash_masked_ip4(&self, w: &Ip4Words, mh: &MaskedHash) -> u64 {
        let k = &self.k;
        let m = &mh.ip4_mask;
        // Words 0 | 8, 9 | 10 | 15 | 18 (checked by `IP4_PAIRS`' assertion below).
        let acc = mh
            .ip4_base
            .wrapping_add(nh_pair(w[0] & m[0], k[0], 0, k[1]))
            .wrapping_add(nh_pair(w[1] & m[1], k[8], w[2] & m[2], k[9]))
            .wrapping_add(nh_pair(w[3] & m[3], k[10], 0, k[11]))
            .wrapping_add(nh_pair(0, k[14], w[4] & m[4], k[15]))
            .wrapping_add(nh_pair(w[5] & m[5], k[18], 0, k[19]));
        self.finish(acc)
    }
}

/// The NH pairs the words of an `IP4_L4` key fall in (`hash_masked_ip4` is written for them).
const IP4_PAIRS: [usize; 5] = [0, 4, 5, 7, 9];
const _: () = assert!(matches!(IP4_L4_KEY_WORDS, [0, 8, 9, 10, 15, 18]));

/// How one megaflow subtable hashes a key: `salt + NH(key & mask)` over the whole key and a
/// zero pad word, folded as every hash here. The pairs where the mask is zero add a constant,
/// precomputed, so a whole key costs a multiply per pair the mask touches; a key of the usual
/// shape (`IP4_L4`, zero outside its six words) costs five, whatever the mask, and hashes to
/// the same value as its whole key (so either form finds a megaflow the other installed).
/// Within one subtable the inputs are masked keys of one length: NH's 2^-64 collision bound
/// over the random key holds as for [`HashKey::hash_key`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MaskedHash {
    /// The salt plus the products of the pairs where the mask is zero.
    base: u128,
    /// The salt plus the products of the pairs no `IP4_L4` word falls in (zero in such a key).
    ip4_base: u128,
    /// The pairs where the mask is not zero, in order (`n_pairs` of them).
    pairs: [u8; PAIRS],
    n_pairs: u8,
    /// The mask's words at the `IP4_L4` positions.
    pub(crate) ip4_mask: Ip4Words,
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
                let mh = hk.masked_hash(&mask, 7);
                let (chi, _) =
                    chi_square(keys.iter().map(|k| hk.hash_masked(k, &mask, &mh)), buckets);
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
        let mut k1 = FlowKey::ZERO;
        k1.set(Field::NwDst, 0xc612_0001);
        let mut k2 = k1;
        k2.set(Field::NwSrc, 0xc612_0002);
        k2.set(Field::TpSrc, 99);
        let h = |hk: &HashKey, k: &FlowKey, salt: u64| {
            hk.hash_masked(k, &mask, &hk.masked_hash(&mask, salt))
        };
        assert_eq!(h(&a, &k1, 5), h(&a, &k2, 5));
        assert_ne!(h(&a, &k1, 5), h(&b, &k1, 5));
        assert_ne!(h(&a, &k1, 5), h(&a, &k1, 6));
        let mut k3 = k1;
        k3.set(Field::TpDst, 80);
        assert_ne!(h(&a, &k1, 5), h(&a, &k3, 5));
        assert_ne!(HashKey::random(), HashKey::random());
    }

    /// The masked hash is NH over the whole masked key and the pad word, from the salt, for
    /// any mask; a key of the usual shape hashed from its six words gets the same value.
    #[test]
    fn masked_hash_is_nh_of_the_masked_key_and_six_words_agree() {
        let hk = HashKey::from_seed(3);
        let mut seed = 11u64;
        let masks = [
            0u32,
            IP4_L4,
            IP4_L4 | TUNNEL,
            0x7_ffff,
            1 << 3 | 1 << 10,
            1 << 18,
        ];
        for &mask_map in &masks {
            for round in 0..100 {
                // Masks with whole, partial and zero words in and outside the six.
                let mut mask = random_key(mask_map, &mut seed);
                for w in mask.w.iter_mut().filter(|w| **w != 0) {
                    match round % 3 {
                        1 => *w = u64::MAX,
                        2 => *w &= splitmix(&mut seed),
                        _ => {}
                    }
                }
                let salt = splitmix(&mut seed);
                let mh = hk.masked_hash(&mask, salt);
                let key = random_key(IP4_L4 | mask_map, &mut seed);
                let mut msg = [0u64; KEY_WORDS + 1];
                for (m, (k, mk)) in msg.iter_mut().zip(key.w.iter().zip(&mask.w)) {
                    *m = k & mk;
                }
                assert_eq!(
                    hk.hash_masked(&key, &mask, &mh),
                    nh_reference(&hk, &msg, salt as u128)
                );
                let six = random_key(IP4_L4, &mut seed);
                let w = crate::extract::ip4_words(&six);
                assert_eq!(
                    hk.hash_masked_ip4(&w, &mh),
                    hk.hash_masked(&six, &mask, &mh),
                    "mask map {mask_map:#x}"
                );
            }
        }
    }

    /// NH over a whole message, pair by pair from `start`, folded: what every hash here must
    /// equal, computed the plain way.
    fn nh_reference(hk: &HashKey, msg: &[u64; KEY_WORDS + 1], start: u128) -> u64 {
        let mut acc = start;
        for p in 0..PAIRS {
            acc = acc.wrapping_add(nh_pair(
                msg[2 * p],
                hk.k[2 * p],
                msg[2 * p + 1],
                hk.k[2 * p + 1],
            ));
        }
        hk.finish(acc)
    }

    /// A key whose words in `map` are random (non-zero) and the rest zero.
    fn random_key(map: u32, seed: &mut u64) -> FlowKey {
        let mut k = FlowKey::ZERO;
        for (j, w) in k.w.iter_mut().enumerate() {
            if map & (1 << j) != 0 {
                *w = splitmix(seed) | 1;
            }
        }
        k
    }

    #[test]
    fn sparse_keys_are_exact_and_every_gather_path_agrees() {
        let hk = HashKey::from_seed(9);
        let mut seed = 5u64;
        let maps = [
            IP4_L4,
            IP6_L4,
            IP4_L4 | TUNNEL,
            IP6_L4 | TUNNEL,
            0b1,
            0x3_0301,
            0x7_ffff,
        ];
        for &map in &maps {
            for _ in 0..200 {
                let a = random_key(map, &mut seed);
                let mut b = a;
                let mut sa = SparseKey::ZERO;
                let mut sb = SparseKey {
                    m: [u64::MAX; LONG + 1],
                };
                let ok = sa.gather(&a, map);
                assert_eq!(ok, map.count_ones() as usize <= SPARSE_WORDS);
                if !ok {
                    continue;
                }
                // The unrolled shapes and the bit-by-bit path give the same sparse key.
                assert!(sb.bit_by_bit(&a, map));
                let pad = if sa.is_short() { SHORT + 1 } else { LONG + 1 };
                assert_eq!(sa.m[..pad], sb.m[..pad], "map {map:#x}");
                assert_eq!(hk.hash_sparse(&sa), hk.hash_sparse(&sb));
                // The sparse hash is NH over the zero-padded message, as the whole-key hash
                // is over the key: check against a direct computation.
                let mut msg = [0u64; KEY_WORDS + 1];
                msg[..sa.len()].copy_from_slice(&sa.m[..sa.len()]);
                assert_eq!(hk.hash_sparse(&sa), nh_reference(&hk, &msg, 0));
                // One bit of one word changed: a different sparse key.
                let j = (splitmix(&mut seed) % 19) as usize;
                if map & (1 << j) != 0 {
                    b.w[j] ^= 1 << (splitmix(&mut seed) % 64);
                    let mut s2 = SparseKey::ZERO;
                    assert!(s2.gather(&b, map));
                    assert_ne!(sa.m[..pad], s2.m[..pad]);
                }
            }
        }
        // The usual shape hashed in place is the sparse hash of its gathered form.
        for _ in 0..200 {
            let a = random_key(IP4_L4, &mut seed);
            let mut sa = SparseKey::ZERO;
            assert!(sa.gather(&a, IP4_L4) && sa.is_short());
            assert_eq!(sa.m[0], IP4_L4_HEAD);
            let w = crate::extract::ip4_words(&a);
            assert_eq!(sa.m[1..7], w);
            assert_eq!(hk.hash_ip4_l4(&w), hk.hash_sparse(&sa));
            let mut sb = SparseKey::ZERO;
            sb.set_ip4(&w);
            assert_eq!(sa.m[..SHORT + 1], sb.m[..SHORT + 1]);
            assert_eq!(crate::extract::ip4_key(&w), a);
        }
        // The same key under two maps (a word written as zero): different sparse keys, so at
        // worst an EMC miss, never a false hit.
        let a = random_key(IP4_L4, &mut seed);
        let (mut s1, mut s2) = (SparseKey::ZERO, SparseKey::ZERO);
        assert!(s1.gather(&a, IP4_L4) && s2.gather(&a, IP4_L4 | 1 << 16));
        assert_ne!(s1.m[0], s2.m[0]);
    }
}

//! Prefix tries for prefix tracking: one binary trie of the prefixes a table's rules use on an
//! address field (and one per subtable over the transport ports). Owns the trie and its lookup;
//! it never decides which subtables to skip (the classifier does) and never allocates on lookup.
//!
//! The lookup answers two things for a value: which prefix lengths of the stored prefixes match
//! it (`plens`, bit `len - 1` set for a matching length), and how many leading bits of the value
//! the walk needed to know that (`needed`): every value that agrees on those bits gets the same
//! `plens`, which is what lets a megaflow keep the rest of the address wildcarded. The trie is
//! path-compressed: a node exists only where a prefix ends or the stored prefixes fork, and the
//! bits between two nodes are compared in one step (the walk costs one step per fork or prefix
//! end, not one per bit). `needed` is what a one-node-per-bit walk gives, as Open vSwitch's
//! trie does: a walk that falls off a node that still has another child, or that leaves a
//! compressed run of bits, needed one more bit (the one that chose the way); one that falls off
//! a leaf did not. The tests check it against such a walk.

/// A node: the prefix that leads to it, its children by the next bit, and how many stored
/// prefixes end here.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    /// The leading `depth` bits of every value under this node (the rest zero).
    prefix: u128,
    /// Bits from the root to this node.
    depth: u32,
    /// Child index by the bit after `depth`; 0 means none (the root is never a child).
    child: [u32; 2],
    /// Prefixes ending at this node.
    n_rules: u32,
}

/// A path-compressed binary trie over the leading bits of a field of `width` bits (at most 128).
#[derive(Clone, Debug)]
pub struct PrefixTrie {
    width: u32,
    nodes: Vec<Node>,
}

/// The bit of `value` at position `depth` counted from the most significant of `width` bits.
#[inline]
fn bit(value: u128, width: u32, depth: u32) -> usize {
    ((value >> (width - 1 - depth)) & 1) as usize
}

/// The depth of the first bit where `a` and `b` differ within their leading `len` bits, or
/// `len` when they agree there.
#[inline]
fn common_len(a: u128, b: u128, len: u32, width: u32) -> u32 {
    let diff = (a ^ b) & prefix_mask(len, width);
    if diff == 0 {
        len
    } else {
        diff.leading_zeros() - (128 - width)
    }
}

impl PrefixTrie {
    /// An empty trie over `width`-bit values.
    pub fn new(width: u32) -> Self {
        PrefixTrie {
            width,
            nodes: vec![Node::default()],
        }
    }

    /// True when no prefix is stored.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].n_rules == 0
    }

    fn push(&mut self, prefix: u128, depth: u32) -> u32 {
        self.nodes.push(Node {
            prefix,
            depth,
            ..Node::default()
        });
        (self.nodes.len() - 1) as u32
    }

    /// Store the leading `len` bits of `value` (1..=width).
    pub fn insert(&mut self, value: u128, len: u32) {
        let w = self.width;
        let len = len.min(w);
        let value = value & prefix_mask(len, w);
        let mut node = 0usize;
        loop {
            let depth = self.nodes[node].depth;
            if depth == len {
                self.nodes[node].n_rules += 1;
                return;
            }
            let b = bit(value, w, depth);
            let next = self.nodes[node].child[b];
            if next == 0 {
                let leaf = self.push(value, len);
                self.nodes[node].child[b] = leaf;
                self.nodes[leaf as usize].n_rules = 1;
                return;
            }
            let c = self.nodes[next as usize];
            let p = common_len(value, c.prefix, len.min(c.depth), w);
            if p == c.depth {
                node = next as usize;
                continue;
            }
            // `value` leaves the run of bits to `c` at depth p: a fork (or a prefix end) there.
            let fork = self.push(value & prefix_mask(p, w), p);
            self.nodes[fork as usize].child[bit(c.prefix, w, p)] = next;
            self.nodes[node].child[b] = fork;
            if p == len {
                self.nodes[fork as usize].n_rules = 1;
            } else {
                let leaf = self.push(value, len);
                self.nodes[leaf as usize].n_rules = 1;
                self.nodes[fork as usize].child[bit(value, w, p)] = leaf;
            }
            return;
        }
    }

    /// Which stored prefix lengths match `value` (bit `len - 1` of the result set for a
    /// matching prefix of length `len`), and the number of leading bits of `value` needed to
    /// know that.
    #[inline]
    pub fn lookup(&self, value: u128) -> (u128, u32) {
        let w = self.width;
        let mut plens = 0u128;
        let mut n = &self.nodes[0];
        loop {
            if n.n_rules > 0 && n.depth > 0 {
                plens |= 1u128 << (n.depth - 1);
            }
            if n.depth == w {
                return (plens, w);
            }
            let b = bit(value, w, n.depth);
            let next = n.child[b];
            if next == 0 {
                let needed = if n.child[1 - b] != 0 {
                    n.depth + 1
                } else {
                    n.depth
                };
                return (plens, needed);
            }
            let c = &self.nodes[next as usize];
            let p = common_len(value, c.prefix, c.depth, w);
            if p < c.depth {
                // Off the run of bits to `c` at depth p, where the stored way goes on.
                return (plens, p + 1);
            }
            n = c;
        }
    }
}

/// Length of `mask` as a prefix of a `width`-bit field: `Some(len)` when the mask is `len`
/// leading ones (0 included), `None` for any other mask.
pub fn prefix_len(mask: u128, width: u32) -> Option<u32> {
    let ones = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let len = mask.count_ones();
    (prefix_mask(len, width) == mask & ones && mask & !ones == 0).then_some(len)
}

/// The mask of the leading `len` bits of a `width`-bit field.
#[inline]
pub fn prefix_mask(len: u32, width: u32) -> u128 {
    if len == 0 {
        return 0;
    }
    let ones = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    (ones << (width - len.min(width))) & ones
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A one-node-per-bit trie: the reference the compressed one must agree with.
    struct BitTrie {
        width: u32,
        /// (children, prefixes ending here)
        nodes: Vec<([usize; 2], bool)>,
    }

    impl BitTrie {
        fn new(width: u32) -> Self {
            BitTrie {
                width,
                nodes: vec![([0, 0], false)],
            }
        }

        fn insert(&mut self, value: u128, len: u32) {
            let mut node = 0;
            for d in 0..len {
                let b = bit(value, self.width, d);
                if self.nodes[node].0[b] == 0 {
                    self.nodes.push(([0, 0], false));
                    let i = self.nodes.len() - 1;
                    self.nodes[node].0[b] = i;
                }
                node = self.nodes[node].0[b];
            }
            self.nodes[node].1 = true;
        }

        fn lookup(&self, value: u128) -> (u128, u32) {
            let (mut plens, mut node, mut d) = (0u128, 0, 0);
            loop {
                if self.nodes[node].1 && d > 0 {
                    plens |= 1 << (d - 1);
                }
                if d == self.width {
                    return (plens, d);
                }
                let b = bit(value, self.width, d);
                let next = self.nodes[node].0[b];
                if next == 0 {
                    let other = self.nodes[node].0[1 - b] != 0;
                    return (plens, d + u32::from(other));
                }
                node = next;
                d += 1;
            }
        }
    }

    fn prefixes() -> impl Strategy<Value = Vec<(u32, u32)>> {
        // Values from a few leading patterns so that prefixes share runs and fork.
        proptest::collection::vec(
            (
                prop_oneof![Just(0xc612_0000u32), Just(0xc613_8000), any::<u32>()],
                0u32..16,
                1u32..=32,
            )
                .prop_map(|(base, noise, len)| (base ^ (noise << (32 - len.min(28) - 4)), len)),
            0..24,
        )
    }

    proptest! {
        /// The compressed trie answers what a one-node-per-bit walk answers, for stored values,
        /// their neighbours and random values.
        #[test]
        fn agrees_with_a_bit_per_node_trie(ps in prefixes(), probes in proptest::collection::vec(any::<u32>(), 1..32)) {
            let (mut t, mut r) = (PrefixTrie::new(32), BitTrie::new(32));
            for &(v, len) in &ps {
                t.insert(u128::from(v), len);
                r.insert(u128::from(v), len);
            }
            let mut values: Vec<u32> = probes;
            for &(v, _) in &ps {
                values.extend([v, v ^ 1, v ^ 0x100, v ^ 0x8000_0000, !v]);
            }
            for v in values {
                prop_assert_eq!(t.lookup(u128::from(v)), r.lookup(u128::from(v)), "value {:#x}", v);
            }
        }

        /// The same over 128-bit fields (IPv6).
        #[test]
        fn agrees_at_128_bits(ps in proptest::collection::vec((any::<u128>(), 1u32..=128), 0..12), probe in any::<u128>()) {
            let (mut t, mut r) = (PrefixTrie::new(128), BitTrie::new(128));
            for &(v, len) in &ps {
                let v = if len > 64 { v } else { v | 0x2001_0db8 << 96 };
                t.insert(v, len);
                r.insert(v, len);
            }
            for &(v, _) in &ps {
                for x in [v, v ^ 1, v ^ (1 << 100), probe] {
                    prop_assert_eq!(t.lookup(x), r.lookup(x));
                }
            }
        }
    }

    #[test]
    fn prefix_lengths_and_masks() {
        assert_eq!(prefix_len(0xffff_ff00, 32), Some(24));
        assert_eq!(prefix_len(0, 32), Some(0));
        assert_eq!(prefix_len(0xffff_ffff, 32), Some(32));
        assert_eq!(prefix_len(0xff00_ff00, 32), None);
        assert_eq!(prefix_len(u128::MAX, 128), Some(128));
        assert_eq!(prefix_mask(8, 32), 0xff00_0000);
        assert_eq!(prefix_mask(0, 32), 0);
        assert_eq!(prefix_mask(128, 128), u128::MAX);
    }

    #[test]
    fn lookup_reports_matching_lengths_and_needed_bits() {
        let mut t = PrefixTrie::new(32);
        assert!(t.is_empty());
        t.insert(0xc612_0200, 24); // 198.18.2.0/24
        t.insert(0xc612_0000, 16); // 198.18.0.0/16
        t.insert(0x0a00_0000, 8); // 10.0.0.0/8
        let (plens, needed) = t.lookup(0xc612_0207);
        assert_eq!(plens, (1 << 23) | (1 << 15));
        assert_eq!(needed, 24);
        // 198.18.3.1: /16 matches, the /24 branch is left at bit 23 (needs 24 bits).
        let (plens, needed) = t.lookup(0xc612_0301);
        assert_eq!(plens, 1 << 15);
        assert_eq!(needed, 24);
        // 192.0.2.1 leaves the 198/10 fork at bit 4 (0xc0 vs 0xc6 differ there).
        let (plens, needed) = t.lookup(0xc000_0201);
        assert_eq!(plens, 0);
        assert_eq!(needed, 6);
        // Every value agreeing on the needed bits gets the same answer.
        for v in [0xc000_0000u128, 0xc3ff_ffff] {
            assert_eq!(t.lookup(v).0, 0);
        }
    }

    #[test]
    fn leaf_walk_needs_no_extra_bit() {
        let mut t = PrefixTrie::new(32);
        t.insert(0xc612_0200, 24);
        let (plens, needed) = t.lookup(0xc612_02ff);
        assert_eq!((plens, needed), (1 << 23, 24));
        let mut e = PrefixTrie::new(32);
        e.insert(0, 0);
        assert_eq!(e.lookup(5).1, 0);
    }
}

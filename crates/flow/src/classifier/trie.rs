//! Prefix tries for prefix tracking: one binary trie of the prefixes a table's rules use on an
//! address field (and one per subtable over the transport ports). Owns the trie and its lookup;
//! it never decides which subtables to skip (the classifier does) and never allocates on lookup.
//!
//! The lookup answers two things for a value: which prefix lengths of the stored prefixes match
//! it (`plens`, bit `len - 1` set for a matching length), and how many leading bits of the value
//! the walk needed to know that (`needed`): every value that agrees on those bits gets the same
//! `plens`, which is what lets a megaflow keep the rest of the address wildcarded. The trie is
//! kept one node per bit (no path compression); the answer is the same as Open vSwitch's
//! compressed trie gives: a walk that falls off a node that still has another child needed one
//! more bit (the one that chose the branch), one that falls off a leaf did not.

/// A node: children by the next bit, and how many stored prefixes end here.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    /// Child index by bit value; 0 means none (the root is never a child).
    child: [u32; 2],
    /// Prefixes ending at this node.
    n_rules: u32,
}

/// A binary trie over the leading bits of a field of `width` bits (at most 128).
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

    /// Store the leading `len` bits of `value` (1..=width).
    pub fn insert(&mut self, value: u128, len: u32) {
        let mut node = 0usize;
        for depth in 0..len.min(self.width) {
            let b = bit(value, self.width, depth);
            let next = self.nodes[node].child[b];
            node = if next == 0 {
                self.nodes.push(Node::default());
                let idx = self.nodes.len() - 1;
                self.nodes[node].child[b] = idx as u32;
                idx
            } else {
                next as usize
            };
        }
        self.nodes[node].n_rules += 1;
    }

    /// Which stored prefix lengths match `value` (bit `len - 1` of the result set for a
    /// matching prefix of length `len`), and the number of leading bits of `value` needed to
    /// know that.
    #[inline]
    pub fn lookup(&self, value: u128) -> (u128, u32) {
        let mut plens = 0u128;
        let mut node = 0usize;
        let mut depth = 0u32;
        loop {
            let n = &self.nodes[node];
            if n.n_rules > 0 && depth > 0 {
                plens |= 1u128 << (depth - 1);
            }
            if depth == self.width {
                return (plens, depth);
            }
            let b = bit(value, self.width, depth);
            let next = n.child[b];
            if next != 0 {
                node = next as usize;
                depth += 1;
                continue;
            }
            let needed = if n.child[1 - b] != 0 {
                depth + 1
            } else {
                depth
            };
            return (plens, needed);
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

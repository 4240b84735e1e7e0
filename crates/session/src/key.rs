//! `SessionKey`: what a session table is keyed on, a 32-bit scope and an IPv4 or IPv6
//! 5-tuple packed in six words that the table's keyed hash reads whole. It only packs values;
//! it never hashes and never allocates.
//!
//! # Layout
//! | word | bits |
//! | --- | --- |
//! | 0 | scope (0..32), IP protocol (32..40), IPv6 flag (40), reserved, always 0 (41..64) |
//! | 1, 2 | source address, 16 bytes (IPv4-mapped `::ffff:a.b.c.d` for IPv4) |
//! | 3, 4 | destination address, the same way |
//! | 5 | source port (0..16), destination port (32..48) |
//!
//! The scope tells apart keys whose tuples are equal: the load balancer puts the VIP id there
//! (and `u32::MAX` for its NAT reverse entries), connection tracking the zone, flow export the
//! observation point. Scopes below `GROUPS` are also matched exactly and counted per scope
//! (see `SessionTable`).

use crate::tuple::FiveTuple;

/// A session table key: scope and 5-tuple in six words (see the module comment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C, align(16))]
pub struct SessionKey(pub(crate) [u64; 6]);

/// Eight bytes of a 16-byte address as one little-endian word.
#[inline(always)]
fn word(b: &[u8; 16], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

impl SessionKey {
    /// The key of tuple `t` in `scope`.
    #[inline(always)]
    pub fn new(scope: u32, t: &FiveTuple) -> SessionKey {
        SessionKey([
            u64::from(scope) | u64::from(t.protocol) << 32 | u64::from(t.ip6) << 40,
            word(&t.src, 0),
            word(&t.src, 8),
            word(&t.dst, 0),
            word(&t.dst, 8),
            // Not `src | dst << 16`: that becomes one 32-bit load of both ports, which stalls
            // when a parser has just written them as two 16-bit stores.
            u64::from(t.src_port) | u64::from(t.dst_port) << 32,
        ])
    }

    /// The key of an IPv4 tuple from its 4-byte addresses: equal to
    /// `SessionKey::new(scope, &FiveTuple::v4(src, dst, protocol, src_port, dst_port))`,
    /// made without the 16-byte IPv4-mapped addresses (a fast lane's key).
    #[inline(always)]
    pub fn v4(
        scope: u32,
        protocol: u8,
        src: [u8; 4],
        dst: [u8; 4],
        src_port: u16,
        dst_port: u16,
    ) -> SessionKey {
        // `::ffff:a.b.c.d` read as two little-endian words: 0, then 0xffff << 16 | a.b.c.d << 32.
        let low = |a: [u8; 4]| 0xffff_0000 | u64::from(u32::from_le_bytes(a)) << 32;
        SessionKey([
            u64::from(scope) | u64::from(protocol) << 32,
            0,
            low(src),
            0,
            low(dst),
            u64::from(src_port) | u64::from(dst_port) << 32,
        ])
    }

    /// The scope.
    #[inline(always)]
    pub fn scope(&self) -> u32 {
        self.0[0] as u32
    }

    /// The IP protocol.
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        (self.0[0] >> 32) as u8
    }

    /// True for an IPv6 tuple.
    #[inline(always)]
    pub fn is_ip6(&self) -> bool {
        self.0[0] >> 40 & 1 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_read_back_and_families_differ() {
        let t4 = FiveTuple::v4([198, 18, 0, 1], [198, 18, 1, 1], 6, 40000, 80);
        let k = SessionKey::new(7, &t4);
        assert_eq!((k.scope(), k.protocol(), k.is_ip6()), (7, 6, false));
        // The same 16 bytes as an IPv6 tuple are another key.
        let t6 = FiveTuple { ip6: true, ..t4 };
        let k6 = SessionKey::new(7, &t6);
        assert!(k6.is_ip6());
        assert_ne!(k, k6);
        assert_ne!(k, SessionKey::new(8, &t4), "the scope is part of the key");
    }

    proptest! {
        /// The 4-byte constructor makes the key the tuple constructor makes.
        #[test]
        fn v4_keys_equal_tuple_keys(
            scope in any::<u32>(), src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
            sp in any::<u16>(), dp in any::<u16>(), protocol in any::<u8>(),
        ) {
            let t = FiveTuple::v4(src, dst, protocol, sp, dp);
            prop_assert_eq!(
                SessionKey::v4(scope, protocol, src, dst, sp, dp),
                SessionKey::new(scope, &t)
            );
        }
    }
}

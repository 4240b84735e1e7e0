//! The flow identity the load balancer keys and hashes on (`FiveTuple`, the `session`
//! crate's), and the stable, unkeyed hash that picks a Maglev slot. The stable hash must give
//! the same value on every node and in every version (ECMP may move a flow between nodes), so
//! it never takes a key, a seed from the process or anything but the tuple's bytes.

pub use session::FiveTuple;

/// The stable hash of a flow for Maglev: the same on every node, process and version. With
/// `sticky` (a VIP's `src_ip_sticky`) only the addresses and protocol count, so every flow of
/// one client reaches the same server. Fixed constants, no key: a client can aim its flows at
/// one server this way, but not at one flow-table bucket (that table's hash is keyed).
#[inline]
pub fn stable_hash(t: &FiveTuple, sticky: bool) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let w = |b: &[u8; 16], i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(x)
    };
    let ports = if sticky {
        0
    } else {
        (t.src_port as u64) << 16 | t.dst_port as u64
    };
    let tail = ports | (t.protocol as u64) << 32;
    let mut h = mix(w(&t.src, 0) ^ K, w(&t.src, 8));
    h = mix(h ^ w(&t.dst, 0), w(&t.dst, 8) ^ K);
    h = mix(h, tail ^ K.rotate_left(17));
    (h ^ h >> 32) as u32
}

#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul((b ^ 0xa076_1d64_78bd_642f) as u128);
    (r as u64) ^ (r >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node and every version must compute exactly this value for the tuple below.
    const PINNED: u32 = 0x77e9_0a5c;

    #[test]
    fn stable_hash_is_fixed_and_sticky_ignores_ports() {
        let a = FiveTuple::v4([198, 18, 0, 1], [198, 18, 1, 1], 6, 40000, 80);
        let b = FiveTuple {
            src_port: 40001,
            ..a
        };
        assert_ne!(stable_hash(&a, false), stable_hash(&b, false));
        assert_eq!(stable_hash(&a, true), stable_hash(&b, true));
        // Pinned: every node and version must compute exactly this value.
        assert_eq!(
            stable_hash(&a, false),
            PINNED,
            "stable_hash changed: {:#x}",
            stable_hash(&a, false)
        );
    }
}

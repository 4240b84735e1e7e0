//! Flow hashing for ECMP: a fast hash of addresses, protocol and L4 ports. Pure functions over a
//! packet's L3 bytes; they never write the packet.

use packet::headers::{be16, ip4, ip6, proto};

#[inline(always)]
fn mix(x: u64) -> u32 {
    let x = (x ^ (x >> 31)).wrapping_mul(0x7fb5_d329_728e_a185);
    let x = (x ^ (x >> 27)).wrapping_mul(0x81da_def4_bc2d_d44d);
    (x ^ (x >> 33)) as u32
}

/// Hash of an IPv4 packet's 5-tuple (3-tuple for fragments and non-TCP/UDP). `l3` starts at the
/// IPv4 header, whose length the caller has checked.
#[inline]
pub fn ip4_flow_hash(l3: &[u8]) -> u32 {
    let addrs = u64::from_be_bytes([
        l3[12], l3[13], l3[14], l3[15], l3[16], l3[17], l3[18], l3[19],
    ]);
    let protocol = l3[ip4::PROTOCOL];
    let ihl = ((l3[0] & 0x0f) as usize) * 4;
    let not_first = be16(l3, ip4::FRAG) & ip4::OFFSET_MASK != 0;
    let ports = if (protocol == proto::TCP || protocol == proto::UDP)
        && !not_first
        && l3.len() >= ihl + 4
    {
        u32::from_be_bytes([l3[ihl], l3[ihl + 1], l3[ihl + 2], l3[ihl + 3]]) as u64
    } else {
        0
    };
    mix(addrs ^ (ports << 17 | protocol as u64).rotate_left(29))
}

/// Hash of an IPv6 packet's addresses, next header, L4 ports and flow label.
#[inline]
pub fn ip6_flow_hash(l3: &[u8]) -> u32 {
    let mut acc = 0u64;
    for c in l3[ip6::SRC..ip6::SRC + 32].chunks_exact(8) {
        acc = acc.rotate_left(23)
            ^ u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    }
    let nh = l3[ip6::NEXT_HEADER];
    let ports = if (nh == proto::TCP || nh == proto::UDP) && l3.len() >= ip6::HEADER_LEN + 4 {
        u32::from_be_bytes([l3[40], l3[41], l3[42], l3[43]]) as u64
    } else {
        0
    };
    let label = (u32::from_be_bytes([l3[0], l3[1], l3[2], l3[3]]) & 0x000f_ffff) as u64;
    mix(acc ^ (ports << 20 | label).rotate_left(7) ^ nh as u64)
}

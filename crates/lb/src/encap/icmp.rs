//! The NAT rewrite of ICMP and ICMPv6 errors: the outer address and, inside the quoted packet,
//! the opposite address and port, with the quoted IPv4 header checksum, the quoted TCP/UDP
//! checksum (when quoted) and the ICMP checksum all updated incrementally. It never reads past
//! the quoted bytes and never changes the length.

use super::nat::Side;
use super::{set_addr, set_word, update_at, Delta, EncapError};
use crate::parse::Parsed;
use packet::headers::{ip4, ip6, proto};

/// Rewrite the ICMP error `h` (parsed as `p`): outer `side` address := `addr`; the quoted
/// packet's other side address := `addr` and its port := `port`.
pub(crate) fn rewrite_icmp_error(
    h: &mut [u8],
    p: &Parsed,
    side: Side,
    addr: &[u8],
    port: u16,
) -> Result<(), EncapError> {
    let ip6 = p.tuple.ip6;
    // Forward: an error to the VIP about VIP:port -> client (the quoted source is the VIP).
    // Reverse: an error from the server about client -> server:target (the quoted destination).
    let (outer_addr, inner_addr) = match (ip6, side) {
        (false, Side::Dst) => (ip4::DST, ip4::SRC),
        (false, Side::Src) => (ip4::SRC, ip4::DST),
        (true, Side::Dst) => (ip6::DST, ip6::SRC),
        (true, Side::Src) => (ip6::SRC, ip6::DST),
    };
    let inner_port = if side == Side::Dst { 0 } else { 2 };
    let icmp_sum = p.l4 + 2;
    let il3 = p.inner_l3;
    let il4 = p.inner_l4;
    let inner_proto = p.tuple.protocol;
    let has_ports = !p.inner_later_fragment && matches!(inner_proto, proto::TCP | proto::UDP);
    if h.len() < il3 + inner_addr + addr.len() || has_ports && h.len() < il4 + 8 {
        return Err(EncapError::BadFrame);
    }
    // The outer header: the IPv4 header checksum, or (ICMPv6) the pseudo-header.
    let mut outer = Delta::default();
    set_addr(h, outer_addr, addr, &mut outer);
    let mut icmp = Delta::default();
    let mut unused = Delta::default();
    if ip6 {
        icmp = outer;
    } else {
        update_at(h, ip4::CHECKSUM, outer, false, &mut unused);
    }
    // The quoted packet: its address, its IPv4 header checksum, its port and L4 checksum.
    let mut inner = Delta::default();
    set_addr(h, il3 + inner_addr, addr, &mut inner);
    icmp = icmp.plus(inner);
    if !ip6 {
        update_at(h, il3 + ip4::CHECKSUM, inner, false, &mut icmp);
    }
    if has_ports {
        let mut l4 = inner;
        let mut port_change = Delta::default();
        set_word(h, il4 + inner_port, port, &mut port_change);
        icmp = icmp.plus(port_change);
        l4 = l4.plus(port_change);
        let sum_at = if inner_proto == proto::TCP {
            il4 + 16
        } else {
            il4 + 6
        };
        // The quoted L4 checksum only when it was quoted (TCP's sits past the first 8 bytes).
        if sum_at + 2 <= h.len() {
            let udp4 = !ip6 && inner_proto == proto::UDP;
            update_at(h, sum_at, l4, udp4, &mut icmp);
        }
    }
    update_at(h, icmp_sum, icmp, false, &mut unused);
    Ok(())
}

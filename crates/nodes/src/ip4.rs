//! IPv4 forwarding: the `ip4-input` node (header checks); `ip4-lookup` and `ip4-rewrite` are
//! the IPv4 instances of the generic nodes in `lookup` and `rewrite`. It reads shared tables
//! only; it never allocates or keeps per-packet state.

use crate::steer::PortSteer;
use crate::{icmp_request, names};
use graph::{Dispatch, Node, NodeContext};
use packet::checksum;
use packet::headers::{be16, be32, ip4};
use packet::meta::FLAG_L2_MULTICAST;
use packet::transport_checks;
use packet::BufferPool;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What `ip4-input` does with packets carrying options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip4Options {
    /// Forward unchanged.
    Forward,
    /// Drop as `options`.
    Drop,
}

/// The options policy shared by every worker's `ip4-input`, changed live (reload, API): read
/// once per vector.
#[derive(Debug)]
pub struct Ip4OptionsSetting(AtomicBool);

impl Ip4OptionsSetting {
    /// Starting with `options`.
    pub fn new(options: Ip4Options) -> Ip4OptionsSetting {
        Ip4OptionsSetting(AtomicBool::new(options == Ip4Options::Drop))
    }

    /// The policy now.
    #[inline(always)]
    pub fn get(&self) -> Ip4Options {
        if self.0.load(Ordering::Relaxed) {
            Ip4Options::Drop
        } else {
            Ip4Options::Forward
        }
    }

    /// Change it.
    pub fn set(&self, options: Ip4Options) {
        self.0.store(options == Ip4Options::Drop, Ordering::Relaxed);
    }
}

/// ICMP type "time exceeded".
pub const ICMP_TIME_EXCEEDED: u8 = 11;
/// ICMP type "destination unreachable" (code 4: fragmentation needed and DF set).
pub const ICMP_UNREACHABLE: u8 = 3;

/// Whether a header's checksum verifies; the option-less 20-byte header is summed as five
/// 32-bit words (the common case), longer ones by the general routine. The words are read in
/// the machine's byte order: the ones' complement sum of byte-swapped words is the byte-swapped
/// sum (RFC 1071 section 2), and a verifying header sums to 0xffff in either order.
#[inline(always)]
fn header_checksum_ok(h: &[u8]) -> bool {
    if let Some(w) = h.first_chunk::<20>() {
        if h.len() == 20 {
            let word = |i: usize| u32::from_ne_bytes([w[i], w[i + 1], w[i + 2], w[i + 3]]) as u64;
            let acc = word(0) + word(4) + word(8) + word(12) + word(16);
            return checksum::fold(acc) == 0xffff;
        }
    }
    checksum::fold(checksum::sum(0, h)) == 0xffff
}

/// The common case in one test: a 20-byte header (no options) that verifies, a total length
/// within the buffer, a unicast source and destination received as link-layer unicast, not a
/// fragment, TTL above 1, and a transport header that passes `transport_checks`. Returns the
/// total length; `None` sends the packet through the checks one by one, which name the reason.
#[inline(always)]
fn common_case(h: &[u8], flags: u16) -> Option<usize> {
    let w = h.first_chunk::<20>()?;
    let total = usize::from(u16::from_be_bytes([w[2], w[3]]));
    let src = u32::from_be_bytes([w[12], w[13], w[14], w[15]]);
    let dst = u32::from_be_bytes([w[16], w[17], w[18], w[19]]);
    let frag = u16::from_be_bytes([w[6], w[7]]);
    // `&`, not `&&`: every test is cheap and none can fail to read, so one branch decides.
    let plain = (w[0] == 0x45)
        & (total >= ip4::MIN_HEADER_LEN)
        & (total <= h.len())
        & (frag & (ip4::OFFSET_MASK | ip4::MORE_FRAGMENTS) == 0)
        & (w[ip4::TTL] > 1)
        & !bad_source(src)
        & (dst >> 28 < 0xe)
        & (flags & FLAG_L2_MULTICAST == 0);
    if !plain || !header_checksum_ok(w) {
        return None;
    }
    let payload = h.get(ip4::MIN_HEADER_LEN..total)?;
    match transport_checks::whole_datagram(w[ip4::PROTOCOL], payload) {
        None => Some(total),
        Some(_) => None,
    }
}

/// True for addresses never valid as a source: 0/8, 127/8, multicast, class E and broadcast.
#[inline(always)]
fn bad_source(a: u32) -> bool {
    let top = a >> 24;
    top == 0 || top == 127 || top >= 224
}

// ---------------------------------------------------------------------------------------------

/// The `ip4-input` node.
pub struct Ip4Input {
    options: Arc<Ip4OptionsSetting>,
    /// The `ip4-unicast` arc, when it has features.
    arc: Option<crate::feature_arc::ArcStart>,
    /// A node the ports of a `PortSteer` hand their checked packets to instead of the lookup.
    steer: Option<(&'static str, Arc<PortSteer>)>,
}

impl Ip4Input {
    /// A node with an options policy.
    pub fn new(options: Ip4Options) -> Ip4Input {
        Ip4Input::shared(Arc::new(Ip4OptionsSetting::new(options)))
    }

    /// A node whose options policy is `options` (shared, changed live).
    pub fn shared(options: Arc<Ip4OptionsSetting>) -> Ip4Input {
        Ip4Input {
            options,
            arc: None,
            steer: None,
        }
    }

    /// Begin the `ip4-unicast` feature arc of `arcs`: checked packets visit the features
    /// enabled for their receive port (in `config`) before `ip4-lookup`.
    pub fn with_arc(
        mut self,
        arcs: &graph::arc::Arcs,
        config: live::Reader<graph::arc::ArcConfig>,
    ) -> Ip4Input {
        self.arc = crate::feature_arc::ArcStart::new(
            arcs,
            names::ARC_IP4_UNICAST,
            config,
            Ip4InputNext::COUNT,
            Ip4InputNext::Lookup.id(),
        );
        self
    }

    /// Hand the checked packets of the ports `ports` steers to node `node` instead of
    /// `ip4-lookup` (with `next_scratch` 0), e.g. the NAT inside ports' replies to `lb`.
    pub fn with_steer(mut self, node: &'static str, ports: Arc<PortSteer>) -> Ip4Input {
        self.steer = Some((node, ports));
        self
    }
}

graph::node_indices! {
    /// `ip4-input`'s next nodes.
    enum Ip4InputNext {
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `IP4_LOOKUP`.
        Lookup = names::IP4_LOOKUP,
        /// To `IP4_ICMP_ERROR`.
        Icmp = names::IP4_ICMP_ERROR,
    }
}

graph::node_indices! {
    /// `ip4-input` drop reasons.
    pub enum Ip4InputError {
        /// Counted as `too-short`.
        TooShort = "too-short",
        /// Counted as `bad-version`.
        BadVersion = "bad-version",
        /// Counted as `bad-ihl`.
        BadIhl = "bad-ihl",
        /// Counted as `bad-length`.
        BadLength = "bad-length",
        /// Counted as `bad-checksum`.
        BadChecksum = "bad-checksum",
        /// Counted as `options`.
        Options = "options",
        /// Counted as `bad-source`.
        BadSource = "bad-source",
        /// Counted as `multicast-destination`.
        MulticastDestination = "multicast-destination",
        /// Counted as `l2-multicast`.
        L2Multicast = "l2-multicast",
        /// Counted as `bad-udp-length` (these are `packet::transport_checks`'s names).
        BadUdpLength = "bad-udp-length",
        /// Counted as `icmp-too-short`.
        IcmpTooShort = "icmp-too-short",
        /// Counted as `fragment-too-long`.
        FragmentTooLong = "fragment-too-long",
    }
}

/// `ip4-input` drop reasons, by index.
pub const INPUT_ERRORS: &[&str] = Ip4InputError::NAMES;

impl Node for Ip4Input {
    fn name(&self) -> &str {
        names::IP4_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v = Ip4InputNext::names();
        if let Some(a) = &self.arc {
            v.extend_from_slice(a.next_nodes());
        }
        if let Some((node, _)) = &self.steer {
            v.push(node.to_string());
        }
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        Ip4InputError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let base = cx.error_base;
        let drop_options = self.options.get() == Ip4Options::Drop;
        let arc = self
            .arc
            .as_ref()
            .and_then(|a| Some((a.cursor(), a.enabled_masks()?)));
        // Read once per vector: whether any port steers, and which.
        let steer = self
            .steer
            .as_ref()
            .map(|(_, s)| &**s)
            .filter(|s| s.any(false));
        let mut all_lookup = true;
        for (i, &b) in frame.iter().enumerate() {
            let (meta, data) = cx.pool.packet_mut(b);
            let l3 = meta.l3_offset as usize;
            let mut fail = |reason: u16| {
                meta.error = base + reason;
                Ip4InputNext::Drop.id()
            };
            let next = 'check: {
                let Some(h) = data.get(l3..) else {
                    break 'check fail(Ip4InputError::TooShort.id());
                };
                if let Some(total) = common_case(h, meta.flags) {
                    meta.l4_offset = (l3 + ip4::MIN_HEADER_LEN) as u16;
                    meta.length = (l3 + total) as u16;
                    break 'check match arc {
                        Some((cursor, masks)) => cursor.next(masks, usize::from(meta.rx_port)),
                        None => Ip4InputNext::Lookup.id(),
                    };
                }
                if h.len() < ip4::MIN_HEADER_LEN {
                    break 'check fail(Ip4InputError::TooShort.id());
                }
                if h[0] >> 4 != 4 {
                    break 'check fail(Ip4InputError::BadVersion.id());
                }
                let ihl = ((h[0] & 0x0f) as usize) * 4;
                let total = be16(h, ip4::TOTAL_LEN) as usize;
                if ihl < ip4::MIN_HEADER_LEN || ihl > total {
                    break 'check fail(Ip4InputError::BadIhl.id());
                }
                if total > h.len() {
                    break 'check fail(Ip4InputError::BadLength.id());
                }
                if !header_checksum_ok(&h[..ihl]) {
                    break 'check fail(Ip4InputError::BadChecksum.id());
                }
                if ihl > ip4::MIN_HEADER_LEN && drop_options {
                    break 'check fail(Ip4InputError::Options.id());
                }
                if bad_source(be32(h, ip4::SRC)) {
                    break 'check fail(Ip4InputError::BadSource.id());
                }
                if be32(h, ip4::DST) >> 28 >= 0xe {
                    break 'check fail(Ip4InputError::MulticastDestination.id());
                }
                // RFC 1812 5.3.4: a unicast packet received as a link-layer broadcast or
                // multicast is not forwarded.
                if meta.flags & FLAG_L2_MULTICAST != 0 {
                    break 'check fail(Ip4InputError::L2Multicast.id());
                }
                if let Some(p) = transport_checks::ip4(h, ihl, total) {
                    break 'check fail(
                        p.index_in(Ip4InputError::NAMES, Ip4InputError::BadLength.id()),
                    );
                }
                meta.l4_offset = (l3 + ihl) as u16;
                // Bytes after the total length (link-layer padding or a trailer) are not part of
                // the packet: cut them so they are never forwarded past the MTU (as Linux does).
                meta.length = (l3 + total) as u16;
                if h[ip4::TTL] <= 1 {
                    meta.next_scratch = icmp_request(ICMP_TIME_EXCEEDED, 0, 0);
                    Ip4InputNext::Icmp.id()
                } else if let Some((cursor, masks)) = arc {
                    cursor.next(masks, usize::from(meta.rx_port))
                } else {
                    Ip4InputNext::Lookup.id()
                }
            };
            all_lookup &= next == Ip4InputNext::Lookup.id();
            nexts[i] = next;
        }
        if let Some(s) = steer {
            // The steering node follows the arc's nodes (see `next_nodes`); a steered port's
            // packets go to it before any feature of the arc.
            let to = Ip4InputNext::COUNT + self.arc.as_ref().map_or(0, |a| a.node_count());
            let kept = [Ip4InputNext::Drop.id(), Ip4InputNext::Icmp.id()];
            all_lookup &= s.apply(cx.pool, frame, nexts, (&kept, to), false) == 0;
        }
        if all_lookup {
            Dispatch::AllTo(Ip4InputNext::Lookup.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        describe_ip4(pool, buffer)
    }
}

/// One line about the IPv4 header of a buffer (for traces).
pub fn describe_ip4(pool: &BufferPool, buffer: u32) -> String {
    let m = pool.meta(buffer);
    let d = pool.data(buffer);
    match d.get(m.l3_offset as usize..) {
        Some(h) if h.len() >= ip4::MIN_HEADER_LEN => format!(
            "{} -> {} proto {} ttl {} len {} checksum 0x{:04x}",
            Ipv4Addr::from(be32(h, ip4::SRC)),
            Ipv4Addr::from(be32(h, ip4::DST)),
            h[ip4::PROTOCOL],
            h[ip4::TTL],
            be16(h, ip4::TOTAL_LEN),
            be16(h, ip4::CHECKSUM)
        ),
        _ => format!("not an IPv4 header ({} bytes)", d.len()),
    }
}

// ---------------------------------------------------------------------------------------------

pub use crate::lookup::Ip4Lookup;

// ---------------------------------------------------------------------------------------------

pub use crate::rewrite::Ip4Rewrite;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A 20-byte header from 198.18.0.1 to 198.18.1.1 with a good checksum, then `l4`.
    fn packet(protocol: u8, ttl: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let total = (20 + l4.len()) as u16;
        let mut p = vec![0x45, 0, 0, 0, 0, 1, 0, 0, ttl, protocol, 0, 0];
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(&[198, 18, 0, 1, 198, 18, 1, 1]);
        let sum = checksum::checksum(&p);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p.extend_from_slice(l4);
        p
    }

    /// The checks of `ip4-input` one by one, as its loop applies them when `common_case`
    /// declines: the total length when a packet goes on to the lookup.
    fn one_by_one(h: &[u8], flags: u16) -> Option<usize> {
        if h.len() < ip4::MIN_HEADER_LEN || h[0] >> 4 != 4 {
            return None;
        }
        let ihl = ((h[0] & 0x0f) as usize) * 4;
        let total = be16(h, ip4::TOTAL_LEN) as usize;
        let ok = ihl == ip4::MIN_HEADER_LEN
            && ihl <= total
            && total <= h.len()
            && header_checksum_ok(&h[..ihl])
            && !bad_source(be32(h, ip4::SRC))
            && be32(h, ip4::DST) >> 28 < 0xe
            && flags & FLAG_L2_MULTICAST == 0
            && transport_checks::ip4(h, ihl, total).is_none()
            && h[ip4::TTL] > 1;
        ok.then_some(total)
    }

    #[test]
    fn the_common_case_takes_plain_datagrams_and_declines_the_rest() {
        let udp = [0, 53, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4];
        assert_eq!(common_case(&packet(17, 64, 0, &udp), 0), Some(32));
        assert_eq!(common_case(&packet(17, 64, 0x4000, &udp), 0), Some(32)); // DF
        assert_eq!(common_case(&packet(6, 64, 0, &[0; 20]), 0), Some(40));
        assert_eq!(common_case(&packet(17, 1, 0, &udp), 0), None); // TTL
        assert_eq!(common_case(&packet(17, 64, 0x2000, &udp), 0), None); // a fragment
        assert_eq!(common_case(&packet(17, 64, 0, &udp[..6]), 0), None); // UDP header cut
        assert_eq!(common_case(&packet(1, 64, 0, &[8, 0, 0, 0]), 0), None); // ICMP < 8
        let l2 = FLAG_L2_MULTICAST;
        assert_eq!(common_case(&packet(17, 64, 0, &udp), l2), None);
        let mut bad = packet(17, 64, 0, &udp);
        bad[10] ^= 1;
        assert_eq!(common_case(&bad, 0), None);
    }

    proptest! {
        /// Whatever the bytes, the common case accepts only what the checks one by one accept,
        /// with the same length.
        #[test]
        fn the_common_case_never_accepts_what_the_checks_refuse(
            protocol in prop::sample::select(vec![1u8, 6, 17, 58, 47]),
            ttl in 0u8..4,
            frag in prop::sample::select(vec![0u16, 0x4000, 0x2000, 0x0001, 0x1fff]),
            l4 in prop::collection::vec(any::<u8>(), 0..24),
            flips in prop::collection::vec((0usize..44, any::<u8>()), 0..3),
            flags in prop::sample::select(vec![0u16, FLAG_L2_MULTICAST]),
            pad in 0usize..4,
        ) {
            let mut p = packet(protocol, ttl, frag, &l4);
            p.resize(p.len() + pad, 0);
            for (at, x) in flips {
                if let Some(b) = p.get_mut(at) {
                    *b ^= x;
                }
            }
            let fast = common_case(&p, flags);
            if fast.is_some() {
                prop_assert_eq!(fast, one_by_one(&p, flags));
            }
            // Nothing the one-by-one checks accept is left to them, bar options and fragments.
            let fragment = be16(&p, ip4::FRAG) & (ip4::OFFSET_MASK | ip4::MORE_FRAGMENTS) != 0;
            if one_by_one(&p, flags).is_some() && p[0] == 0x45 && !fragment {
                prop_assert!(fast.is_some());
            }
        }
    }
}

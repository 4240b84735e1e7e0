//! `ip4-icmp-error` and `ip6-icmp-error`: turn a packet that cannot be forwarded (TTL/hop limit
//! expired, too big for the next link) into the ICMP/ICMPv6 error for its sender, in the same
//! buffer, rate-limited by a per-worker token bucket, and send it back to lookup. They never
//! answer errors about errors, multicast or non-first fragments (RFC 1812, RFC 4443).

use crate::neighbour::{OwnAddresses, PortAddresses};
use crate::{names, FLAG_LOCAL_ORIGIN};
use graph::{Dispatch, Node, NodeContext};
use packet::checksum;
use packet::headers::{be128, be16, be32, ip4, ip6, proto, put16};
use packet::meta::{FLAG_FEATURE_META, FLAG_FLOW_HASH};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The ICMP error rate and burst, shared by every worker's limiters and changed live (reload):
/// each `take` reads them (only packets that would get an error pay for it).
#[derive(Debug)]
pub struct IcmpRate {
    per_second: AtomicU32,
    burst: AtomicU32,
}

impl IcmpRate {
    /// `per_second` errors a second (0: none), at most `burst` in a row.
    pub fn new(per_second: u32, burst: u32) -> IcmpRate {
        IcmpRate {
            per_second: AtomicU32::new(per_second),
            burst: AtomicU32::new(burst),
        }
    }

    /// Change both.
    pub fn set(&self, per_second: u32, burst: u32) {
        self.per_second.store(per_second, Ordering::Relaxed);
        self.burst.store(burst, Ordering::Relaxed);
    }

    /// (per second, burst) now.
    pub fn get(&self) -> (u32, u32) {
        (
            self.per_second.load(Ordering::Relaxed),
            self.burst.load(Ordering::Relaxed),
        )
    }
}

/// A token bucket counted in TSC ticks: a token costs `hz / rate` ticks of credit. Its rate
/// and burst are an `IcmpRate` that may change at any time; its credit is its own.
#[derive(Clone, Debug)]
pub struct RateLimiter {
    rate: Arc<IcmpRate>,
    credit: u64,
    last_tsc: u64,
}

impl RateLimiter {
    /// `per_second` tokens a second, at most `burst` saved up (0 per second: never).
    pub fn new(per_second: u32, burst: u32) -> RateLimiter {
        RateLimiter::shared(Arc::new(IcmpRate::new(per_second, burst)))
    }

    /// A bucket with its own credit whose rate and burst are `rate`.
    pub fn shared(rate: Arc<IcmpRate>) -> RateLimiter {
        RateLimiter {
            rate,
            credit: 0,
            last_tsc: 0,
        }
    }

    /// Take one token at time `now` (TSC) with `hz` ticks a second.
    #[inline]
    pub fn take(&mut self, now: u64, hz: u64) -> bool {
        let (per_second, burst) = self.rate.get();
        if per_second == 0 {
            return false;
        }
        let cost = (hz / u64::from(per_second)).max(1);
        let cap = cost.saturating_mul(u64::from(burst.max(1)));
        let elapsed = now.wrapping_sub(self.last_tsc);
        self.last_tsc = now;
        self.credit = self.credit.saturating_add(elapsed).min(cap);
        if self.credit >= cost {
            self.credit -= cost;
            true
        } else {
            false
        }
    }
}

/// Next nodes of both ICMP error nodes, in `next_nodes` order (names by family).
#[derive(Clone, Copy)]
#[repr(u16)]
enum Next {
    /// To `error-drop`.
    Drop,
    /// To the family's lookup.
    Lookup,
}

impl Next {
    const fn id(self) -> u16 {
        self as u16
    }
}

graph::node_indices! {
    /// Drop reasons of both ICMP error nodes.
    pub enum IcmpError {
        /// Counted as `rate-limited`.
        RateLimited = "rate-limited",
        /// Counted as `no-source-address`.
        NoSourceAddress = "no-source-address",
        /// Counted as `not-allowed`.
        NotAllowed = "not-allowed",
        /// Counted as `no-room`.
        NoRoom = "no-room",
    }
}

/// Drop reasons of both ICMP error nodes, by index.
pub const ERRORS: &[&str] = IcmpError::NAMES;

/// Most bytes of an ICMPv4 error (RFC 1812 4.3.2.3: at most 576).
pub const ICMP4_MAX: usize = 576;
/// Most bytes of an ICMPv6 error (RFC 4443 2.4(c): the minimum MTU).
pub const ICMP6_MAX: usize = 1280;
const ICMP4_HEADERS: usize = ip4::MIN_HEADER_LEN + 8;
const ICMP6_HEADERS: usize = ip6::HEADER_LEN + 8;

/// Each port's source address for errors (the first own address of the family), following the
/// ports' live addresses when given: one atomic load per vector, a copy (`try_lock`, never a
/// wait) only when they changed.
struct Sources<A> {
    list: Vec<Option<A>>,
    live: Option<(Arc<PortAddresses>, u64)>,
    pick: fn(&OwnAddresses) -> Option<A>,
}

impl<A: Copy> Sources<A> {
    fn new(list: Vec<Option<A>>, pick: fn(&OwnAddresses) -> Option<A>) -> Sources<A> {
        Sources {
            list,
            live: None,
            pick,
        }
    }

    fn follow(&mut self, addrs: Arc<PortAddresses>) {
        self.live = Some((addrs, u64::MAX));
        self.refresh();
    }

    #[inline]
    fn refresh(&mut self) {
        let Some((addrs, seen)) = &mut self.live else {
            return;
        };
        let generation = addrs.generation();
        if generation == *seen {
            return;
        }
        if let Some(list) = addrs.try_get() {
            *seen = generation;
            self.list = list.iter().map(self.pick).collect();
        }
    }

    /// The source for packets received on `port`.
    #[inline(always)]
    fn of(&self, port: u16) -> Option<A> {
        self.list.get(port as usize).copied().flatten()
    }
}

/// The `ip4-icmp-error` node.
pub struct Ip4IcmpError {
    sources: Sources<Ipv4Addr>,
    limiter: RateLimiter,
}

impl Ip4IcmpError {
    /// `sources[p]`: the address errors about packets received on port `p` come from.
    pub fn new(sources: Vec<Option<Ipv4Addr>>, limiter: RateLimiter) -> Ip4IcmpError {
        Ip4IcmpError {
            sources: Sources::new(sources, |a| a.0.first().map(|x| x.0)),
            limiter,
        }
    }

    /// Take the sources from the ports' live own addresses (checked once per vector).
    pub fn with_addresses(mut self, addrs: Arc<PortAddresses>) -> Ip4IcmpError {
        self.sources.follow(addrs);
        self
    }

    #[inline]
    fn refresh(&mut self) {
        self.sources.refresh();
    }
}

/// Whether an ICMP error may be sent about this IPv4 packet.
fn ip4_error_allowed(h: &[u8]) -> bool {
    let src = be32(h, ip4::SRC);
    let top = src >> 24;
    if top == 0 || top == 127 || top >= 224 {
        return false;
    }
    if be16(h, ip4::FRAG) & ip4::OFFSET_MASK != 0 {
        return false;
    }
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    if h[ip4::PROTOCOL] == proto::ICMP {
        // Errors are types 3, 4, 5, 11 and 12; never answer them.
        match h.get(ihl) {
            Some(3 | 4 | 5 | 11 | 12) | None => return false,
            _ => {}
        }
    }
    true
}

impl Node for Ip4IcmpError {
    fn name(&self) -> &str {
        names::IP4_ICMP_ERROR
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ERROR_DROP.into(), names::IP4_LOOKUP.into()]
    }

    fn error_reasons(&self) -> Vec<String> {
        IcmpError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        self.refresh();
        for (i, &b) in frame.iter().enumerate() {
            let (now, hz, base) = (cx.now_tsc, cx.tsc_hz, cx.error_base);
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize + meta.l3_offset as usize;
            let avail = (meta.length as usize).saturating_sub(meta.l3_offset as usize);
            let request = meta.next_scratch;
            let outcome = 'build: {
                let Some(src) = self.sources.of(meta.rx_port) else {
                    break 'build Err(IcmpError::NoSourceAddress.id());
                };
                let h = &slot[start..start + avail];
                if avail < ip4::MIN_HEADER_LEN || !ip4_error_allowed(h) {
                    break 'build Err(IcmpError::NotAllowed.id());
                }
                if !self.limiter.take(now, hz) {
                    break 'build Err(IcmpError::RateLimited.id());
                }
                let original = (be16(h, ip4::TOTAL_LEN) as usize).min(avail);
                let quote = original.min(ICMP4_MAX - ICMP4_HEADERS);
                let total = ICMP4_HEADERS + quote;
                if start + total > slot.len() {
                    break 'build Err(IcmpError::NoRoom.id());
                }
                let dst = [h[12], h[13], h[14], h[15]];
                slot.copy_within(start..start + quote, start + ICMP4_HEADERS);
                let p = &mut slot[start..start + total];
                p[..ICMP4_HEADERS].fill(0);
                p[0] = 0x45;
                p[ip4::TOS] = 0xc0; // internetwork control
                put16(p, ip4::TOTAL_LEN, total as u16);
                p[ip4::TTL] = 64;
                p[ip4::PROTOCOL] = proto::ICMP;
                p[ip4::SRC..ip4::SRC + 4].copy_from_slice(&src.octets());
                p[ip4::DST..ip4::DST + 4].copy_from_slice(&dst);
                let c = checksum::checksum(&p[..ip4::MIN_HEADER_LEN]);
                put16(p, ip4::CHECKSUM, c);
                let icmp = &mut p[ip4::MIN_HEADER_LEN..];
                icmp[0] = (request >> 24) as u8;
                icmp[1] = (request >> 16) as u8;
                put16(icmp, 6, request as u16); // next-hop MTU for "fragmentation needed"
                let c = checksum::checksum(icmp);
                put16(icmp, 2, c);
                Ok(total)
            };
            nexts[i] = match outcome {
                Ok(total) => {
                    meta.length = meta.l3_offset + total as u16;
                    meta.l4_offset = meta.l3_offset + ip4::MIN_HEADER_LEN as u16;
                    // A new packet from here: the offending packet's hash and feature line
                    // (its connection state) are not its own.
                    meta.flags =
                        (meta.flags | FLAG_LOCAL_ORIGIN) & !(FLAG_FLOW_HASH | FLAG_FEATURE_META);
                    Next::Lookup.id()
                }
                Err(reason) => {
                    meta.error = base + reason;
                    Next::Drop.id()
                }
            };
        }
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &packet::BufferPool, buffer: u32) -> String {
        format!("icmp error: {}", crate::ip4::describe_ip4(pool, buffer))
    }
}

/// The `ip6-icmp-error` node.
pub struct Ip6IcmpError {
    sources: Sources<Ipv6Addr>,
    limiter: RateLimiter,
}

impl Ip6IcmpError {
    /// `sources[p]`: the address errors about packets received on port `p` come from.
    pub fn new(sources: Vec<Option<Ipv6Addr>>, limiter: RateLimiter) -> Ip6IcmpError {
        Ip6IcmpError {
            sources: Sources::new(sources, |a| a.1.first().map(|x| x.0)),
            limiter,
        }
    }

    /// Take the sources from the ports' live own addresses (checked once per vector).
    pub fn with_addresses(mut self, addrs: Arc<PortAddresses>) -> Ip6IcmpError {
        self.sources.follow(addrs);
        self
    }

    #[inline]
    fn refresh(&mut self) {
        self.sources.refresh();
    }
}

/// Whether an ICMPv6 error may be sent about this IPv6 packet.
fn ip6_error_allowed(h: &[u8]) -> bool {
    let src = be128(h, ip6::SRC);
    if src == 0 || src >> 120 == 0xff || be128(h, ip6::DST) >> 120 == 0xff {
        return false;
    }
    !carries_icmp6_error(h)
}

/// Whether an IPv6 packet's upper-layer header, found behind at most 8 hop-by-hop, routing,
/// destination-options or first-fragment headers, is an ICMPv6 error (type below 128) — or an
/// ICMPv6 header too short to tell. What cannot be reached is not an error.
fn carries_icmp6_error(h: &[u8]) -> bool {
    const HOP_BY_HOP: u8 = 0;
    const ROUTING: u8 = 43;
    const FRAGMENT: u8 = 44;
    const DESTINATION_OPTIONS: u8 = 60;
    let (mut next, mut at) = (h[ip6::NEXT_HEADER], ip6::HEADER_LEN);
    for _ in 0..8 {
        match next {
            proto::ICMP6 => return h.get(at).is_none_or(|&t| t < 128),
            HOP_BY_HOP | ROUTING | DESTINATION_OPTIONS => match h.get(at..at + 2) {
                Some(e) => {
                    next = e[0];
                    at += (e[1] as usize + 1) * 8;
                }
                None => return false,
            },
            FRAGMENT => match h.get(at..at + 8) {
                // A later fragment does not show the upper-layer header.
                Some(e) if be16(e, 2) & 0xfff8 == 0 => {
                    next = e[0];
                    at += 8;
                }
                _ => return false,
            },
            _ => return false,
        }
    }
    false
}

impl Node for Ip6IcmpError {
    fn name(&self) -> &str {
        names::IP6_ICMP_ERROR
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ERROR_DROP.into(), names::IP6_LOOKUP.into()]
    }

    fn error_reasons(&self) -> Vec<String> {
        IcmpError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        self.refresh();
        for (i, &b) in frame.iter().enumerate() {
            let (now, hz, base) = (cx.now_tsc, cx.tsc_hz, cx.error_base);
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize + meta.l3_offset as usize;
            let avail = (meta.length as usize).saturating_sub(meta.l3_offset as usize);
            let request = meta.next_scratch;
            let outcome = 'build: {
                let Some(src) = self.sources.of(meta.rx_port) else {
                    break 'build Err(IcmpError::NoSourceAddress.id());
                };
                let h = &slot[start..start + avail];
                if avail < ip6::HEADER_LEN || !ip6_error_allowed(h) {
                    break 'build Err(IcmpError::NotAllowed.id());
                }
                if !self.limiter.take(now, hz) {
                    break 'build Err(IcmpError::RateLimited.id());
                }
                let original = (be16(h, ip6::PAYLOAD_LEN) as usize + ip6::HEADER_LEN).min(avail);
                let quote = original.min(ICMP6_MAX - ICMP6_HEADERS);
                let total = ICMP6_HEADERS + quote;
                if start + total > slot.len() {
                    break 'build Err(IcmpError::NoRoom.id());
                }
                let mut dst = [0u8; 16];
                dst.copy_from_slice(&h[ip6::SRC..ip6::SRC + 16]);
                slot.copy_within(start..start + quote, start + ICMP6_HEADERS);
                let p = &mut slot[start..start + total];
                p[..ICMP6_HEADERS].fill(0);
                p[0] = 0x60;
                let payload = (8 + quote) as u16;
                put16(p, ip6::PAYLOAD_LEN, payload);
                p[ip6::NEXT_HEADER] = proto::ICMP6;
                p[ip6::HOP_LIMIT] = 64;
                p[ip6::SRC..ip6::SRC + 16].copy_from_slice(&src.octets());
                p[ip6::DST..ip6::DST + 16].copy_from_slice(&dst);
                let icmp = &mut p[ip6::HEADER_LEN..];
                icmp[0] = (request >> 24) as u8;
                icmp[1] = (request >> 16) as u8;
                // "Packet too big" carries the MTU as a 32-bit field.
                put16(icmp, 6, request as u16);
                let pseudo =
                    checksum::pseudo_header_v6(src.octets(), dst, proto::ICMP6, payload as u32);
                let c = !checksum::fold(checksum::sum(pseudo, icmp));
                put16(icmp, 2, c);
                Ok(total)
            };
            nexts[i] = match outcome {
                Ok(total) => {
                    meta.length = meta.l3_offset + total as u16;
                    meta.l4_offset = meta.l3_offset + ip6::HEADER_LEN as u16;
                    // A new packet from here: the offending packet's hash and feature line
                    // (its connection state) are not its own.
                    meta.flags =
                        (meta.flags | FLAG_LOCAL_ORIGIN) & !(FLAG_FLOW_HASH | FLAG_FEATURE_META);
                    Next::Lookup.id()
                }
                Err(reason) => {
                    meta.error = base + reason;
                    Next::Drop.id()
                }
            };
        }
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &packet::BufferPool, buffer: u32) -> String {
        format!("icmp6 error: {}", crate::ip6::describe_ip6(pool, buffer))
    }
}

#[cfg(test)]
mod live_sources_tests {
    use super::*;

    #[test]
    fn sources_follow_the_ports_live_addresses() {
        let addrs = Arc::new(PortAddresses::new(vec![(
            vec![("198.18.1.1".parse().expect("v4"), 24)],
            vec![("2001:db8:1::1".parse().expect("v6"), 64)],
        )]));
        let mut v4 =
            Ip4IcmpError::new(vec![None], RateLimiter::new(10, 1)).with_addresses(addrs.clone());
        let mut v6 =
            Ip6IcmpError::new(vec![None], RateLimiter::new(10, 1)).with_addresses(addrs.clone());
        assert_eq!(
            v4.sources.list,
            vec![Some("198.18.1.1".parse().expect("v4"))]
        );
        assert_eq!(
            v6.sources.list,
            vec![Some("2001:db8:1::1".parse().expect("v6"))]
        );
        addrs.set(
            0,
            (vec![("198.18.9.1".parse().expect("v4"), 24)], Vec::new()),
        );
        v4.refresh();
        v6.refresh();
        assert_eq!(
            v4.sources.list,
            vec![Some("198.18.9.1".parse().expect("v4"))]
        );
        assert_eq!(v6.sources.list, vec![None], "no IPv6 address any more");
    }
}

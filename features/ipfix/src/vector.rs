//! The per-vector metering loops the nodes run: pick the packets (every one, or one in N
//! continuing the countdown), then count them in two passes — the first reads each packet's
//! headers, hashes its key and prefetches its bucket into a preallocated scratch array, the
//! second counts (by then the buckets are in the cache). Input metering reads one family at
//! the L3 offset (`Family`); output metering reads Ethernet and both families. It reads
//! packets and never writes them, and allocates, locks and calls nothing per packet.

use crate::key::{parse_ip4, parse_ip6, FlowKey, Key4, Key6, Observation};
use crate::meter::{Meter, MeterCounters, Staged};
use crate::node::Annotate;
use crate::record::{Annotation, FlowRecord};
use crate::ring::Producer;
use crate::table::FlowTable;
use packet::headers::{be16, eth};
use packet::{BufferPool, VECTOR_SIZE};

/// A vector's packets staged for counting, by family (preallocated for a whole vector).
pub(crate) struct Scratch {
    v4: Box<[Staged<Key4>]>,
    v6: Box<[Staged<Key6>]>,
    /// Annotations by staged packet (empty unless the node's source is active).
    ann4: Box<[Annotation]>,
    ann6: Box<[Annotation]>,
}

impl Scratch {
    pub(crate) fn new(annotations: bool) -> Scratch {
        let ann = if annotations { VECTOR_SIZE } else { 0 };
        Scratch {
            v4: vec![Staged::default(); VECTOR_SIZE].into_boxed_slice(),
            v6: vec![Staged::default(); VECTOR_SIZE].into_boxed_slice(),
            ann4: vec![Annotation::default(); ann].into_boxed_slice(),
            ann6: vec![Annotation::default(); ann].into_boxed_slice(),
        }
    }
}

/// One IP family as the loops see it.
pub(crate) trait Family {
    /// Its flow key.
    type Key: FlowKey;
    /// Parse the header at `d[l3..]`.
    fn parse(d: &[u8], l3: usize, in_port: u16) -> Option<(Self::Key, Observation)>;
    /// Its table.
    fn table(m: &mut Meter) -> &mut FlowTable<Self::Key>;
    /// Its staging arrays.
    fn scratch(sc: &mut Scratch) -> (&mut [Staged<Self::Key>], &mut [Annotation]);
}

/// IPv4.
pub(crate) struct V4;
/// IPv6.
pub(crate) struct V6;

impl Family for V4 {
    type Key = Key4;
    #[inline(always)]
    fn parse(d: &[u8], l3: usize, in_port: u16) -> Option<(Key4, Observation)> {
        parse_ip4(d, l3, in_port)
    }
    #[inline(always)]
    fn table(m: &mut Meter) -> &mut FlowTable<Key4> {
        &mut m.v4
    }
    #[inline(always)]
    fn scratch(sc: &mut Scratch) -> (&mut [Staged<Key4>], &mut [Annotation]) {
        (&mut sc.v4, &mut sc.ann4)
    }
}

impl Family for V6 {
    type Key = Key6;
    #[inline(always)]
    fn parse(d: &[u8], l3: usize, in_port: u16) -> Option<(Key6, Observation)> {
        parse_ip6(d, l3, in_port)
    }
    #[inline(always)]
    fn table(m: &mut Meter) -> &mut FlowTable<Key6> {
        &mut m.v6
    }
    #[inline(always)]
    fn scratch(sc: &mut Scratch) -> (&mut [Staged<Key6>], &mut [Annotation]) {
        (&mut sc.v6, &mut sc.ann6)
    }
}

/// Which packets of a vector are metered: indexes `start, start + step, ...`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pick {
    pub start: usize,
    pub step: usize,
}

impl Pick {
    /// Every packet (`sampling` 1), or one in `sampling` after passing `skip` over; also
    /// returns the countdown left for the next vector of `len` packets.
    #[inline(always)]
    pub fn new(sampling: u32, skip: u32, len: usize) -> (Pick, u32) {
        if sampling <= 1 {
            return (Pick { start: 0, step: 1 }, 0);
        }
        let (start, step) = (skip as usize, sampling as usize);
        let left = if start >= len {
            start - len
        } else {
            // The first index past the vector, minus its length.
            (step - (len - start) % step) % step
        };
        (Pick { start, step }, left as u32)
    }

    /// How many of `len` packets it picks.
    #[inline(always)]
    pub fn count(self, len: usize) -> usize {
        if self.start >= len {
            0
        } else {
            (len - self.start).div_ceil(self.step)
        }
    }
}

/// What a vector's counting needs besides its packets.
pub(crate) struct Ctx<'a, A> {
    pub pool: &'a BufferPool,
    pub annotate: &'a A,
    pub sampling: u32,
    pub now: u64,
}

/// Meter the picked packets of `frame` (one family at each packet's L3 offset, input arcs);
/// returns (counted, unreadable).
#[inline(always)]
pub(crate) fn meter_input<F: Family, A: Annotate>(
    cx: &Ctx<'_, A>,
    meter: &mut Meter,
    ring: &mut Producer<FlowRecord>,
    c: &MeterCounters,
    sc: &mut Scratch,
    frame: &[u32],
    pick: Pick,
) -> (usize, usize) {
    let (staged, anns) = F::scratch(sc);
    let table = F::table(meter);
    let mut n = 0;
    let mut unreadable = 0;
    let mut i = pick.start;
    while let Some(&b) = frame.get(i) {
        i += pick.step;
        let (m, d) = cx.pool.packet(b);
        let Some((key, obs)) = F::parse(d, usize::from(m.l3_offset), m.rx_port) else {
            unreadable += 1;
            continue;
        };
        let hash = table.hash(&key);
        table.prefetch(hash);
        if let Some(slot) = staged.get_mut(n) {
            *slot = Staged {
                key,
                hash,
                obs,
                egress: 0,
            };
            if A::ACTIVE {
                if let Some(a) = anns.get_mut(n) {
                    *a = cx.annotate.annotate(cx.pool, b);
                }
            }
            n += 1;
        }
    }
    for (j, p) in staged.iter().take(n).enumerate() {
        let a = if A::ACTIVE {
            anns.get(j).copied()
        } else {
            None
        };
        crate::meter::account(table, c, ring, p, cx.sampling, cx.now, a);
    }
    (n, unreadable)
}

/// The L3 offset and whether it is IPv6, for an Ethernet frame (up to two VLAN tags).
#[inline(always)]
pub(crate) fn ethernet_l3(d: &[u8]) -> Option<(usize, bool)> {
    let mut at = eth::TYPE;
    for _ in 0..3 {
        let t = be16(d.get(at..at + 2)?, 0);
        match t {
            eth::TYPE_IPV4 => return Some((at + 2, false)),
            eth::TYPE_IPV6 => return Some((at + 2, true)),
            eth::TYPE_VLAN | eth::TYPE_QINQ => at += eth::TAG_LEN,
            _ => return None,
        }
    }
    None
}

/// Meter the picked packets of `frame` as they are sent (Ethernet frames of either family,
/// with their sending port); returns (counted, unreadable).
pub(crate) fn meter_output<A: Annotate>(
    cx: &Ctx<'_, A>,
    meter: &mut Meter,
    ring: &mut Producer<FlowRecord>,
    c: &MeterCounters,
    sc: &mut Scratch,
    frame: &[u32],
    pick: Pick,
) -> (usize, usize) {
    let (mut n4, mut n6, mut unreadable) = (0, 0, 0);
    let mut i = pick.start;
    while let Some(&b) = frame.get(i) {
        i += pick.step;
        let (m, d) = cx.pool.packet(b);
        let egress = u32::from(m.tx_port) + 1;
        let ann = if A::ACTIVE {
            cx.annotate.annotate(cx.pool, b)
        } else {
            Annotation::default()
        };
        let staged = match ethernet_l3(d) {
            Some((l3, true)) => parse_ip6(d, l3, m.rx_port).and_then(|(key, obs)| {
                let slot = sc.v6.get_mut(n6)?;
                *slot = meter.stage6(key, obs, egress);
                if let Some(a) = sc.ann6.get_mut(n6) {
                    *a = ann;
                }
                n6 += 1;
                Some(())
            }),
            Some((l3, false)) => parse_ip4(d, l3, m.rx_port).and_then(|(key, obs)| {
                let slot = sc.v4.get_mut(n4)?;
                *slot = meter.stage4(key, obs, egress);
                if let Some(a) = sc.ann4.get_mut(n4) {
                    *a = ann;
                }
                n4 += 1;
                Some(())
            }),
            None => None,
        };
        if staged.is_none() {
            unreadable += 1;
        }
    }
    let ann = |a: &[Annotation], j: usize| if A::ACTIVE { a.get(j).copied() } else { None };
    for (j, p) in sc.v4.iter().take(n4).enumerate() {
        meter.account4(c, ring, p, cx.sampling, cx.now, ann(&sc.ann4, j));
    }
    for (j, p) in sc.v6.iter().take(n6).enumerate() {
        meter.account6(c, ring, p, cx.sampling, cx.now, ann(&sc.ann6, j));
    }
    (n4 + n6, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_follow_the_countdown_across_vectors() {
        // Every packet.
        let (p, left) = Pick::new(1, 0, 256);
        assert_eq!((p.count(256), left), (256, 0));
        // One in 10 over 3 vectors of 256 and one of 5: indexes 0, 10, ... of the stream.
        let mut skip = 0;
        let mut picked = Vec::new();
        let mut base = 0;
        for len in [256, 256, 256, 5] {
            let (p, left) = Pick::new(10, skip, len);
            let mut i = p.start;
            while i < len {
                picked.push(base + i);
                i += p.step;
            }
            assert_eq!(p.count(len), picked.iter().filter(|&&x| x >= base).count());
            skip = left;
            base += len;
        }
        assert_eq!(picked, (0..base).step_by(10).collect::<Vec<_>>());
        // A countdown longer than the vector passes it all over.
        let (p, left) = Pick::new(1000, 900, 256);
        assert_eq!((p.count(256), left), (0, 644));
    }

    #[test]
    fn ethernet_l3_skips_vlan_tags_and_refuses_others() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd]);
        assert_eq!(ethernet_l3(&f), Some((18, true)));
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x06]);
        assert_eq!(ethernet_l3(&f), None, "ARP");
        assert_eq!(ethernet_l3(&[0u8; 13]), None, "short");
    }
}

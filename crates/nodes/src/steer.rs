//! Per-port input steering: the ports whose checked IPv4 or IPv6 packets `ip4-input` /
//! `ip6-input` hand to a feature node instead of the lookup (an input feature enabled per port,
//! as VPP enables an interface feature on the `ip4-unicast` arc: the load balancer's NAT
//! replies, which are addressed to clients, not to a VIP, so no route brings them). Written by
//! the control side, read by the input nodes: one relaxed load per vector while no port is
//! steered (the packet loop is not touched), a second pass over the vector while one is. It
//! never locks and never allocates after `new`.
//!
//! Changing it never leaves a moment in which a port that is steered before and after is not:
//! `set` turns the new ports on before it turns the old ones off.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

const V4: u8 = 1;
const V6: u8 = 2;

/// Which ports steer which family.
#[derive(Debug)]
pub struct PortSteer {
    /// Per port id: `V4 | V6`.
    ports: Box<[AtomicU8]>,
    /// The families at least one port steers.
    any: AtomicU8,
}

#[inline(always)]
fn bit(ip6: bool) -> u8 {
    if ip6 {
        V6
    } else {
        V4
    }
}

impl PortSteer {
    /// For `ports` ports, none steered.
    pub fn new(ports: usize) -> PortSteer {
        PortSteer {
            ports: (0..ports).map(|_| AtomicU8::new(0)).collect(),
            any: AtomicU8::new(0),
        }
    }

    /// Whether some port steers packets of the family (read once per vector).
    #[inline(always)]
    pub fn any(&self, ip6: bool) -> bool {
        self.any.load(Relaxed) & bit(ip6) != 0
    }

    /// Whether packets of the family received on `port` are steered.
    #[inline(always)]
    pub fn steers(&self, port: u16, ip6: bool) -> bool {
        self.ports
            .get(usize::from(port))
            .is_some_and(|f| f.load(Relaxed) & bit(ip6) != 0)
    }

    /// Send the packets of `frame` that arrived on a steered port to `to` instead of their
    /// `nexts`, with `next_scratch` 0, except those bound for one of `kept` (a drop, an ICMP
    /// error, neighbour discovery); returns how many. The input nodes call it only when `any`
    /// says some port of the family is steered.
    #[inline]
    pub fn apply(
        &self,
        pool: &mut packet::BufferPool,
        frame: &[u32],
        nexts: &mut [u16],
        (kept, to): (&[u16], u16),
        ip6: bool,
    ) -> usize {
        let mut n = 0;
        for (&b, next) in frame.iter().zip(nexts.iter_mut()) {
            if kept.contains(next) {
                continue;
            }
            let meta = pool.meta_mut(b);
            if self.steers(meta.rx_port, ip6) {
                meta.next_scratch = 0;
                *next = to;
                n += 1;
            }
        }
        n
    }

    /// Steer exactly the ports of `v4` (IPv4) and `v6` (IPv6), by port id (ids beyond the
    /// ports are ignored): the ports turned on first, then those turned off.
    pub fn set(&self, v4: &[bool], v6: &[bool]) {
        let want = |i: usize| {
            let mut f = 0;
            if v4.get(i).copied().unwrap_or(false) {
                f |= V4;
            }
            if v6.get(i).copied().unwrap_or(false) {
                f |= V6;
            }
            f
        };
        let all = (0..self.ports.len()).fold(0, |a, i| a | want(i));
        self.any.fetch_or(all, Relaxed);
        for (i, p) in self.ports.iter().enumerate() {
            p.fetch_or(want(i), Relaxed);
        }
        for (i, p) in self.ports.iter().enumerate() {
            p.store(want(i), Relaxed);
        }
        self.any.store(all, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_steers_exactly_the_ports_given_per_family() {
        let s = PortSteer::new(3);
        assert!(!s.any(false) && !s.any(true));
        s.set(&[false, true], &[true]);
        assert!(s.any(false) && s.any(true));
        assert!(s.steers(1, false) && !s.steers(0, false) && !s.steers(2, false));
        assert!(s.steers(0, true) && !s.steers(1, true));
        assert!(!s.steers(9, false), "a port it does not have");
        s.set(&[], &[]);
        assert!(!s.any(false) && !s.any(true) && !s.steers(1, false));
    }
}

//! Health probes on the data path. Probes are made by the kernel of a private network
//! namespace (vecplane's probe host) and enter the data path through its TAP port; each probe
//! socket is bound to a local port of the probe band, and the prober leases that port to the AS
//! slot it probes before it sends. The `lb` node reads the lease of a probe addressed to a VIP
//! and wraps it for that server, as it would a client's packet. Replies come back to the data
//! path's own address; `is_probe_reply` says which of those go to the probe host.
//!
//! It owns the lease table: one atomic word per band port, written by the prober, read by the
//! workers (relaxed: a probe is sent after its lease is stored, by the same thread that stores
//! it, and a stale read only sends one probe where the old lease said). It never allocates, locks
//! or blocks on a worker's path.

use crate::model::AsSlot;
use packet::headers::{be16, proto};
use std::sync::atomic::{AtomicU32, Ordering};

/// First local port of the probe band.
pub const PROBE_PORT_BASE: u16 = 50_000;
/// Ports in the band: at most this many probes are in flight at once.
pub const PROBE_PORTS: u16 = 8192;
/// Last local port of the probe band.
pub const PROBE_PORT_LAST: u16 = PROBE_PORT_BASE + PROBE_PORTS - 1;

/// Whether `port` is in the probe band.
#[inline]
pub fn in_band(port: u16) -> bool {
    (PROBE_PORT_BASE..=PROBE_PORT_LAST).contains(&port)
}

/// Which AS slot each band port probes (the prober writes, workers read).
#[derive(Debug)]
pub struct ProbeLeases {
    /// Per band port: 0 = free, else the AS slot + 1.
    ports: Box<[AtomicU32]>,
}

impl Default for ProbeLeases {
    fn default() -> Self {
        ProbeLeases::new()
    }
}

impl ProbeLeases {
    /// Every port free.
    pub fn new() -> ProbeLeases {
        ProbeLeases {
            ports: (0..PROBE_PORTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Lease `port` (in the band) to `slot`; false if the port is outside the band.
    pub fn lease(&self, port: u16, slot: AsSlot) -> bool {
        match self.index(port) {
            Some(i) => {
                self.ports[i].store(slot.0.wrapping_add(1), Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Free `port`.
    pub fn release(&self, port: u16) {
        if let Some(i) = self.index(port) {
            self.ports[i].store(0, Ordering::Release);
        }
    }

    /// The slot `port` is leased to, if it is a leased band port.
    #[inline]
    pub fn slot_of(&self, port: u16) -> Option<AsSlot> {
        let v = self.ports[self.index(port)?].load(Ordering::Acquire);
        v.checked_sub(1).map(AsSlot)
    }

    fn index(&self, port: u16) -> Option<usize> {
        in_band(port).then(|| usize::from(port - PROBE_PORT_BASE))
    }
}

/// ICMPv4 echo reply, destination unreachable, time exceeded.
const ICMP4_ECHO_REPLY: u8 = 0;
const ICMP4_UNREACH: u8 = 3;
const ICMP4_TIME_EXCEEDED: u8 = 11;
/// ICMPv6 destination unreachable, time exceeded, echo reply.
const ICMP6_UNREACH: u8 = 1;
const ICMP6_TIME_EXCEEDED: u8 = 3;
const ICMP6_ECHO_REPLY: u8 = 129;

/// Whether a packet addressed to the data path itself (`l3`: its IP header onwards, `ip6`:
/// its family) answers a probe: TCP or UDP to a band port, an echo reply whose identifier is
/// a band port, or an ICMP error quoting a TCP or UDP packet from a band port. Anything short
/// or malformed is not.
pub fn is_probe_reply(l3: &[u8], ip6: bool) -> bool {
    let Some((protocol, l4)) = transport(l3, ip6) else {
        return false;
    };
    match protocol {
        proto::TCP | proto::UDP => l4.len() >= 4 && in_band(be16(l4, 2)),
        proto::ICMP if !ip6 => match l4.first() {
            Some(&ICMP4_ECHO_REPLY) => l4.len() >= 8 && in_band(be16(l4, 4)),
            Some(&ICMP4_UNREACH | &ICMP4_TIME_EXCEEDED) => {
                quotes_band_source(&l4[8.min(l4.len())..], false)
            }
            _ => false,
        },
        proto::ICMP6 if ip6 => match l4.first() {
            Some(&ICMP6_ECHO_REPLY) => l4.len() >= 8 && in_band(be16(l4, 4)),
            Some(&ICMP6_UNREACH | &ICMP6_TIME_EXCEEDED) => {
                quotes_band_source(&l4[8.min(l4.len())..], true)
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether an ICMP error's quoted packet is TCP or UDP from a band port.
fn quotes_band_source(quoted: &[u8], ip6: bool) -> bool {
    match transport(quoted, ip6) {
        Some((proto::TCP | proto::UDP, l4)) => l4.len() >= 2 && in_band(be16(l4, 0)),
        _ => false,
    }
}

/// The protocol and the bytes after the IP header (no IPv6 extension headers: probes and
/// their replies carry none); None when the header is short or not of the family.
fn transport(l3: &[u8], ip6: bool) -> Option<(u8, &[u8])> {
    if ip6 {
        if l3.len() < 40 || l3[0] >> 4 != 6 {
            return None;
        }
        Some((l3[6], &l3[40..]))
    } else {
        let first = *l3.first()?;
        let ihl = usize::from(first & 0x0f) * 4;
        if first >> 4 != 4 || ihl < 20 || l3.len() < ihl {
            return None;
        }
        // A later fragment carries no transport header.
        if be16(l3, 6) & 0x1fff != 0 {
            return None;
        }
        Some((l3[9], &l3[ihl..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip4(protocol: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protocol, 0, 0];
        p.extend_from_slice(&[198, 18, 1, 1, 198, 18, 12, 1]);
        p.extend_from_slice(l4);
        p
    }

    fn ip6(protocol: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, protocol, 64];
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(l4);
        p
    }

    fn ports(src: u16, dst: u16) -> Vec<u8> {
        let mut v = src.to_be_bytes().to_vec();
        v.extend_from_slice(&dst.to_be_bytes());
        v.extend_from_slice(&[0; 16]);
        v
    }

    #[test]
    fn leases_map_band_ports_to_slots() {
        let l = ProbeLeases::new();
        assert_eq!(l.slot_of(PROBE_PORT_BASE), None);
        assert!(l.lease(PROBE_PORT_BASE + 7, AsSlot(0)));
        assert!(l.lease(PROBE_PORT_LAST, AsSlot(65535)));
        assert_eq!(l.slot_of(PROBE_PORT_BASE + 7), Some(AsSlot(0)));
        assert_eq!(l.slot_of(PROBE_PORT_LAST), Some(AsSlot(65535)));
        l.release(PROBE_PORT_BASE + 7);
        assert_eq!(l.slot_of(PROBE_PORT_BASE + 7), None);
        assert!(!l.lease(PROBE_PORT_BASE - 1, AsSlot(1)));
        assert!(!l.lease(PROBE_PORT_LAST + 1, AsSlot(1)));
        assert_eq!(l.slot_of(80), None);
        l.release(80);
    }

    #[test]
    fn replies_to_band_ports_are_probe_replies() {
        assert!(is_probe_reply(
            &ip4(proto::TCP, &ports(80, PROBE_PORT_BASE)),
            false
        ));
        assert!(is_probe_reply(
            &ip4(proto::UDP, &ports(53, PROBE_PORT_LAST)),
            false
        ));
        assert!(!is_probe_reply(
            &ip4(proto::TCP, &ports(80, PROBE_PORT_BASE - 1)),
            false
        ));
        assert!(!is_probe_reply(&ip4(proto::TCP, &ports(80, 22)), false));
        assert!(is_probe_reply(
            &ip6(proto::TCP, &ports(80, PROBE_PORT_BASE + 1)),
            true
        ));
        // Wrong family flag, short headers.
        assert!(!is_probe_reply(
            &ip6(proto::TCP, &ports(80, PROBE_PORT_BASE)),
            false
        ));
        assert!(!is_probe_reply(
            &ip4(proto::TCP, &ports(80, PROBE_PORT_BASE))[..22],
            false
        ));
        assert!(!is_probe_reply(&[], false));
        assert!(!is_probe_reply(&[0x60; 39], true));
    }

    #[test]
    fn echo_replies_and_errors_about_band_sources_are_probe_replies() {
        let echo = |t: u8, id: u16| {
            let mut v = vec![t, 0, 0, 0];
            v.extend_from_slice(&id.to_be_bytes());
            v.extend_from_slice(&[0, 1]);
            v
        };
        assert!(is_probe_reply(
            &ip4(proto::ICMP, &echo(0, PROBE_PORT_BASE + 3)),
            false
        ));
        assert!(!is_probe_reply(
            &ip4(proto::ICMP, &echo(8, PROBE_PORT_BASE + 3)),
            false
        ));
        assert!(!is_probe_reply(&ip4(proto::ICMP, &echo(0, 1)), false));
        assert!(is_probe_reply(
            &ip6(proto::ICMP6, &echo(129, PROBE_PORT_BASE)),
            true
        ));
        assert!(!is_probe_reply(
            &ip6(proto::ICMP6, &echo(128, PROBE_PORT_BASE)),
            true
        ));
        // Port unreachable quoting a UDP probe from a band port.
        let mut err = vec![3, 3, 0, 0, 0, 0, 0, 0];
        err.extend_from_slice(&ip4(proto::UDP, &ports(PROBE_PORT_BASE + 9, 53)));
        assert!(is_probe_reply(&ip4(proto::ICMP, &err), false));
        let mut other = vec![3, 3, 0, 0, 0, 0, 0, 0];
        other.extend_from_slice(&ip4(proto::UDP, &ports(40000, 53)));
        assert!(!is_probe_reply(&ip4(proto::ICMP, &other), false));
        let mut err6 = vec![1, 4, 0, 0, 0, 0, 0, 0];
        err6.extend_from_slice(&ip6(proto::UDP, &ports(PROBE_PORT_BASE, 53)));
        assert!(is_probe_reply(&ip6(proto::ICMP6, &err6), true));
        // Truncated quotes.
        assert!(!is_probe_reply(&ip4(proto::ICMP, &err[..10]), false));
        assert!(!is_probe_reply(&ip4(proto::ICMP, &err[..4]), false));
    }

    #[test]
    fn later_fragments_are_not_probe_replies() {
        let mut p = ip4(proto::UDP, &ports(53, PROBE_PORT_BASE));
        p[6] = 0x00;
        p[7] = 0x10;
        assert!(!is_probe_reply(&p, false));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_judged_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), ip6 in proptest::prelude::any::<bool>()) {
            let _ = is_probe_reply(&bytes, ip6);
        }
    }
}

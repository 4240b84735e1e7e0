//! A port as the neighbour code uses it (`PortInfo`): its MAC, MTU, own addresses and link-local
//! address, and which own address answers or sources a request. Plain data; no packets.
//! A removed port (or an id never given) keeps a `PortInfo` with no address: it answers
//! nothing and sources nothing.

use super::*;

/// A port's addresses as integers with their masks.
#[derive(Clone, Debug)]
pub(super) struct PortInfo {
    pub(super) mac: Mac,
    pub(super) mtu: u16,
    pub(super) ip4: Vec<(u32, u32)>,
    pub(super) ip6: Vec<(u128, u128)>,
    /// The port was removed (or its id was never given): live address changes pass it by.
    pub(super) removed: bool,
}

impl PortInfo {
    pub(super) fn new(p: &NeighbourPort, link_local: bool) -> PortInfo {
        let mask4 = |l: u8| {
            if l == 0 {
                0
            } else {
                u32::MAX << (32 - l.min(32))
            }
        };
        let mask6 = |l: u8| {
            if l == 0 {
                0
            } else {
                u128::MAX << (128 - l.min(128))
            }
        };
        let mut ip6: Vec<(u128, u128)> = p
            .ip6
            .iter()
            .map(|(a, l)| (u128::from(*a), mask6(*l)))
            .collect();
        let ll = u128::from(p.link_local());
        if link_local && !ip6.iter().any(|&(a, _)| a == ll) {
            ip6.push((ll, mask6(64)));
        }
        PortInfo {
            mac: p.mac,
            mtu: p.mtu,
            ip4: p
                .ip4
                .iter()
                .map(|(a, l)| (u32::from(*a), mask4(*l)))
                .collect(),
            ip6,
            removed: false,
        }
    }

    /// What stands for a port id that was never given: no MAC, no MTU, no address.
    pub(super) fn absent() -> PortInfo {
        PortInfo {
            mac: [0; 6],
            mtu: 0,
            ip4: Vec::new(),
            ip6: Vec::new(),
            removed: true,
        }
    }

    #[inline]
    pub(super) fn is_own4(&self, a: u32) -> bool {
        self.ip4.iter().any(|&(x, _)| x == a)
    }

    #[inline]
    pub(super) fn is_own6(&self, a: u128) -> bool {
        self.ip6.iter().any(|&(x, _)| x == a)
    }
}

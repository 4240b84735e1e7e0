//! Which ports are NAT "inside" ports (`lb set interface nat4|nat6 in <port>`): the ports on
//! which a packet that is not for a VIP is looked up in the NAT reverse table (a server's reply
//! to be rewritten back to the VIP). Written by the control side, read by the workers with
//! relaxed loads (a change takes effect within a vector or so); it never locks, never allocates
//! after `new` and never looks at packets.
//!
//! As in VPP, replies are translated on the inside ports only; unlike VPP, a family with no
//! inside port at all translates on every port, so that a NAT VIP works before (or without)
//! `lb set interface`; `show lb` says which applies.

use crate::model::LbState;
use std::sync::atomic::{
    AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};

const NAT4_IN: u8 = 1;
const NAT6_IN: u8 = 2;

/// The inside-port flags of one data plane.
#[derive(Debug)]
pub struct NatInside {
    /// Per port id: `NAT4_IN | NAT6_IN`.
    flags: Box<[AtomicU8]>,
    /// The families that have at least one inside port.
    configured: AtomicU8,
}

#[inline(always)]
fn bit(nat6: bool) -> u8 {
    if nat6 {
        NAT6_IN
    } else {
        NAT4_IN
    }
}

impl NatInside {
    /// Flags for `ports` ports, none inside.
    pub fn new(ports: usize) -> NatInside {
        NatInside {
            flags: (0..ports).map(|_| AtomicU8::new(0)).collect(),
            configured: AtomicU8::new(0),
        }
    }

    /// True when `port` was named by `lb set interface nat6` (`nat6`) or `nat4 in`.
    #[inline(always)]
    pub fn is_inside(&self, port: usize, nat6: bool) -> bool {
        self.flags
            .get(port)
            .is_some_and(|f| f.load(Relaxed) & bit(nat6) != 0)
    }

    /// True when the family has at least one inside port.
    #[inline(always)]
    pub fn configured(&self, nat6: bool) -> bool {
        self.configured.load(Acquire) & bit(nat6) != 0
    }

    /// True when a reply of the family received on `port` is looked up in the NAT reverse
    /// table: `port` is an inside port, or the family has none.
    #[inline(always)]
    pub fn translates_on(&self, port: usize, nat6: bool) -> bool {
        !self.configured(nat6) || self.is_inside(port, nat6)
    }

    /// Take the inside ports of `state`; `ports` are the data plane's port names by id. While
    /// the flags change, a family that has inside ports before or after counts as having none
    /// (replies are translated on every port), so that no moment translates on no port.
    pub fn set_from(&self, state: &LbState, ports: &[String]) {
        let flags: Vec<u8> = ports
            .iter()
            .map(|name| {
                let mut v = 0;
                if state.nat_inside(false).contains(name) {
                    v |= NAT4_IN;
                }
                if state.nat_inside(true).contains(name) {
                    v |= NAT6_IN;
                }
                v
            })
            .collect();
        let configured = flags.iter().fold(0, |a, &v| a | v);
        let before = self.configured.load(Acquire);
        self.configured.store(before & configured, Release);
        for (f, v) in self.flags.iter().zip(flags) {
            f.store(v, Release);
        }
        self.configured.store(configured, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_lines;

    #[test]
    fn a_family_without_inside_ports_translates_everywhere() {
        let ports = ["in0".to_string(), "out0".to_string()];
        let n = NatInside::new(ports.len());
        let none = LbState::default();
        n.set_from(&none, &ports);
        assert!(n.translates_on(0, false) && n.translates_on(1, true));
        let cmds = parse_lines("lb set interface nat4 in out0\n").expect("parse");
        let state = none.apply(&cmds).expect("apply");
        n.set_from(&state, &ports);
        assert!(n.is_inside(1, false) && !n.is_inside(0, false) && !n.is_inside(9, false));
        assert!(n.configured(false) && !n.configured(true));
        assert!(n.translates_on(1, false) && !n.translates_on(0, false));
        assert!(
            n.translates_on(0, true),
            "nat6 has no inside port: everywhere"
        );
        n.set_from(&none, &ports);
        assert!(n.translates_on(0, false));
    }
}

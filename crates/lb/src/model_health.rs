//! The health overlay on the AS slots: `LbCommand::SetHealth` marks servers down or up. A
//! server marked down leaves its VIP's Maglev table as a weight-0 (draining) server does, while
//! its configured weight is kept: it may change while the server is down (API, config reload)
//! without bringing it back, and it returns when the server is marked up. The Maglev table of a
//! VIP with a down server is the one a node without that server builds, so every LB node of a
//! fleet still agrees.
//!
//! Rules: a server must be on the VIP and not removed (else `NoSuchServer`), each once per
//! command (else `DuplicateServer`); marking a server with the state it has is a no-op; `flush`
//! bumps the gen (its flows are evicted, as `lb as ... del flush`, but the server stays) only
//! when the server goes from up to down. A server added, or revived after `lb as ... del`,
//! starts up. Health is runtime state: it is not part of `cli::state_commands`, and a reload
//! (`dataplane::lb::diff_commands`) keeps it. Owns no state beyond `AsSlotInfo::health_down`.

use super::{AsSlotInfo, AsState, LbErrorKind, LbState, VipKey};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The state of a slot in use with configured weight `weight`, marked down or not.
pub(super) fn state_for(weight: u32, health_down: bool) -> AsState {
    if weight == 0 || health_down {
        AsState::Draining
    } else {
        AsState::Active
    }
}

impl AsSlotInfo {
    /// The weight the Maglev table uses: the configured weight, 0 when marked down by a
    /// health check (or removed, or free).
    pub fn effective_weight(&self) -> u32 {
        match self.state {
            AsState::Active if !self.health_down => self.weight,
            _ => 0,
        }
    }
}

impl LbState {
    /// `SetHealth`: mark `servers` of VIP `key` down or up (see the module docs).
    pub(super) fn set_health(
        &mut self,
        key: &VipKey,
        servers: &[IpAddr],
        down: bool,
        flush: bool,
    ) -> Result<(), LbErrorKind> {
        let id = self.find(key)?;
        let mut seen = BTreeSet::new();
        for &addr in servers {
            if !seen.insert(addr) {
                return Err(LbErrorKind::DuplicateServer(addr));
            }
            let slot = match self.vip_ref(id).servers.get(&addr).copied() {
                Some(s) if self.slots[s.0 as usize].state != AsState::Removed => s,
                _ => return Err(LbErrorKind::NoSuchServer { vip: *key, addr }),
            };
            let info = &mut self.slots[slot.0 as usize];
            if info.health_down == down {
                continue;
            }
            info.health_down = down;
            info.state = state_for(info.weight, down);
            if down && flush {
                info.gen = info.gen.wrapping_add(1);
            }
        }
        Ok(())
    }
}

//! Datapath actions: what a translation through the rule tables boils down to for one megaflow,
//! a short fixed-capacity list that a worker runs on every packet of the megaflow. No table
//! lookups, no registers, no goto: those are resolved when the megaflow is made.

use crate::key::Field;
use channel::punt::PuntReason;
use std::sync::Arc;

/// Actions a `DpActions` holds in place. Eight, not sixteen: a `DpActions` is copied several
/// times per miss (translation, install) and 16 slots of 48 bytes made those copies a quarter
/// of a miss's cost (perf); flood is one action, so eight covers the usual rule sets.
pub const INLINE_DP_ACTIONS: usize = 8;

/// Most actions one megaflow can hold; a translation needing more is refused (the packet is
/// dropped and counted as `translation-failed`). Open vSwitch bounds a translation by the
/// 64 KiB of its datapath actions (about 4,000 outputs); this bound is as generous for the
/// actions vecplane has. Beyond `INLINE_DP_ACTIONS` the actions move to a list on the heap,
/// made once when the translation needs it (a miss, never a hit) and shared by every copy.
pub const MAX_DP_ACTIONS: usize = 4096;

/// `PushVlan`'s `tpid` for "the TPID of the outer tag the packet arrived with" (0x8100 when it
/// arrived untagged). A translation knows a packet's tag but not its TPID (the key has none), so
/// re-tagging the packet's own tag (`mod_vlan_vid` on an 802.1ad frame) keeps 0x88a8 as Open
/// vSwitch does, and one megaflow serves 802.1Q and 802.1ad frames alike.
pub const TPID_AS_RECEIVED: u16 = 0;

/// One datapath action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DpAction {
    /// Send a copy of the packet as it is now to vecplane port `0` (the last output sends the
    /// packet itself).
    Output(u16),
    /// Send to every port of the packet's switch except the one it came in on.
    Flood,
    /// Hand the packet to the traditional path (L2 bridge or router) of its input port.
    Normal,
    /// Write the bits of `mask` of a packet header field (checksums follow).
    Set {
        /// The field (a packet header field, never metadata).
        field: Field,
        /// New value (bits in `mask`).
        value: u128,
        /// Bits written.
        mask: u128,
    },
    /// Push an 802.1Q tag with this TPID and TCI (CFI bit clear).
    PushVlan {
        /// 0x8100, 0x88a8 or [`TPID_AS_RECEIVED`].
        tpid: u16,
        /// Priority and VLAN id.
        tci: u16,
    },
    /// Remove the outer VLAN tag.
    PopVlan,
    /// Encapsulate in VXLAN with VNI `tun_id` and send through tunnel port `port`.
    TunnelOutput {
        /// The vecplane port of the tunnel.
        port: u16,
        /// The VNI.
        tun_id: u64,
    },
    /// Cut the copy the next output sends to at most this many bytes (`output(port=,max_len=)`;
    /// the packet itself stays whole for later actions).
    Truncate(u16),
    /// Send a copy of the packet as it is now to the control plane (punt); the actions go on.
    Controller {
        /// Most bytes of the packet sent (65535: all; 0: only the metadata).
        max_len: u16,
        /// Why (already resolved: a table-miss rule's `action` is `NoMatch`).
        reason: PuntReason,
        /// Table of the rule whose action it is.
        table: u8,
        /// Cookie of that rule (`u64::MAX` for a packet-out's own actions).
        cookie: u64,
    },
    /// Nothing (padding of unused slots).
    #[default]
    Nop,
}

/// The actions of a megaflow, in order; empty means drop.
/// (Equality and hashing look only at the actions in use.) Up to `INLINE_DP_ACTIONS` are held
/// in place; a longer list is on the heap (`long`), shared by clones without a copy.
#[derive(Clone, Default)]
pub struct DpActions {
    len: u8,
    items: [DpAction; INLINE_DP_ACTIONS],
    /// Every action, when there are more than fit in `items`.
    long: Option<Arc<Vec<DpAction>>>,
}

impl PartialEq for DpActions {
    fn eq(&self, other: &DpActions) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for DpActions {}

impl std::hash::Hash for DpActions {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl std::fmt::Debug for DpActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl DpActions {
    /// No action: drop.
    pub const DROP: DpActions = DpActions {
        len: 0,
        items: [DpAction::Nop; INLINE_DP_ACTIONS],
        long: None,
    };

    /// Append `a`; false (and nothing appended) when `MAX_DP_ACTIONS` are there already.
    /// Allocates when the list first outgrows `INLINE_DP_ACTIONS` (and as it grows on).
    #[inline]
    pub fn push(&mut self, a: DpAction) -> bool {
        if let Some(long) = &mut self.long {
            if long.len() >= MAX_DP_ACTIONS {
                return false;
            }
            Arc::make_mut(long).push(a);
            return true;
        }
        match self.items.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = a;
                self.len += 1;
                true
            }
            None => {
                self.spill(a);
                true
            }
        }
    }

    #[cold]
    fn spill(&mut self, a: DpAction) {
        let mut v = Vec::with_capacity(4 * INLINE_DP_ACTIONS);
        v.extend_from_slice(&self.items);
        v.push(a);
        self.long = Some(Arc::new(v));
    }

    /// Become a copy of `other`, writing only the actions in use (the rest stay as they were
    /// and are never read); a long list is shared, not copied.
    #[inline]
    pub fn assign_from(&mut self, other: &DpActions) {
        let n = other.len as usize;
        self.items[..n].copy_from_slice(&other.items[..n]);
        self.len = other.len;
        if self.long.is_some() || other.long.is_some() {
            self.long.clone_from(&other.long);
        }
    }

    /// The actions.
    #[inline]
    pub fn as_slice(&self) -> &[DpAction] {
        match &self.long {
            None => &self.items[..self.len as usize],
            Some(long) => long.as_slice(),
        }
    }

    /// Number of actions.
    #[inline]
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// True when there is no action (the same as `is_drop`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.is_drop()
    }

    /// True when the list drops the packet.
    #[inline]
    pub fn is_drop(&self) -> bool {
        self.len == 0
    }

    /// True when the actions are on the heap (more than `INLINE_DP_ACTIONS`).
    #[inline]
    pub fn is_long(&self) -> bool {
        self.long.is_some()
    }
}

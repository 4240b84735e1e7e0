//! Datapath actions: what a translation through the rule tables boils down to for one megaflow,
//! a short fixed-capacity list that a worker runs on every packet of the megaflow. No table
//! lookups, no registers, no goto: those are resolved when the megaflow is made.

use crate::key::Field;

/// Most actions one megaflow can hold; a translation needing more is refused (the packet is
/// dropped and counted as `translation-failed`). Eight, not sixteen: a `DpActions` is copied
/// several times per miss (translation, install) and 16 slots of 48 bytes made those copies a
/// quarter of a miss's cost (perf); flood is one action, so eight covers the rule sets seen.
pub const MAX_DP_ACTIONS: usize = 8;

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
        /// 0x8100 or 0x88a8.
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
    /// Nothing (padding of unused slots).
    #[default]
    Nop,
}

/// The actions of a megaflow, in order; empty means drop.
/// (Equality and hashing look only at the actions in use.)
#[derive(Clone, Copy, Default)]
pub struct DpActions {
    len: u8,
    items: [DpAction; MAX_DP_ACTIONS],
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
        items: [DpAction::Nop; MAX_DP_ACTIONS],
    };

    /// Append `a`; false (and nothing appended) when full.
    #[inline]
    pub fn push(&mut self, a: DpAction) -> bool {
        match self.items.get_mut(self.len as usize) {
            Some(slot) => {
                *slot = a;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Become a copy of `other`, writing only the actions in use (the rest stay as they were
    /// and are never read).
    #[inline]
    pub fn assign_from(&mut self, other: &DpActions) {
        let n = other.len as usize;
        self.items[..n].copy_from_slice(&other.items[..n]);
        self.len = other.len;
    }

    /// The actions.
    #[inline]
    pub fn as_slice(&self) -> &[DpAction] {
        &self.items[..self.len as usize]
    }

    /// True when the list drops the packet.
    #[inline]
    pub fn is_drop(&self) -> bool {
        self.len == 0
    }
}

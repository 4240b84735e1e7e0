//! What the port nodes need of a virtqueue, whichever its layout: `Virtqueue`, implemented by
//! the split ring (`ring`) and the packed ring (`packed_ring`), and `Ring`, the one a running
//! queue has. The nodes match on `Ring` once per poll and run a body generic over
//! `Virtqueue`, so each layout gets its own monomorphic fast path (no dispatch per packet).
//!
//! It owns nothing but the choice of layout; it never touches guest memory itself.

use crate::memory::GuestMemory;
use crate::packed_ring::{PackedHead, PackedRing};
use crate::ring::{Direction, RingError, RingLayout, Segment, SplitRing, MAX_SEGMENTS};

/// A device-side virtqueue: chains taken in order, read, and returned as used in order.
pub trait Virtqueue {
    /// What names a taken chain until it is returned.
    type Head: Copy + Default;

    /// Take up to `heads.len()` available chains; returns how many.
    fn take_heads(&mut self, heads: &mut [Self::Head]) -> Result<usize, RingError>;
    /// Take the next available chain, if any.
    fn take_one(&mut self) -> Result<Option<Self::Head>, RingError>;
    /// Give back chains taken and not returned as used, `heads[0]` the earliest.
    fn give_back(&mut self, heads: &[Self::Head]);
    /// The chain as one buffer, or None when it has more (see `chain`).
    fn single(&self, mem: &GuestMemory, head: Self::Head) -> Result<Option<Segment>, RingError>;
    /// The chain's buffers: how many and their total length.
    fn chain(
        &self,
        mem: &GuestMemory,
        head: Self::Head,
        segs: &mut [Segment; MAX_SEGMENTS],
    ) -> Result<(usize, u64), RingError>;
    /// Return a chain as used, `len` bytes written into it.
    fn push_used(&mut self, head: Self::Head, len: u32);
    /// Make the used chains visible; true when the guest wants an interrupt.
    fn publish(&mut self) -> bool;
    /// Where the device reads next, as GET_VRING_BASE reports it.
    fn last_avail(&self) -> u16;
}

impl Virtqueue for SplitRing {
    type Head = u16;

    #[inline(always)]
    fn take_heads(&mut self, heads: &mut [u16]) -> Result<usize, RingError> {
        let n = usize::from(self.available()?).min(heads.len());
        Ok(SplitRing::take_heads(self, &mut heads[..n]))
    }

    #[inline(always)]
    fn take_one(&mut self) -> Result<Option<u16>, RingError> {
        Ok(match self.available()? {
            0 => None,
            _ => Some(self.next_head()),
        })
    }

    #[inline(always)]
    fn give_back(&mut self, heads: &[u16]) {
        self.rewind(heads.len() as u16);
    }

    #[inline(always)]
    fn single(&self, mem: &GuestMemory, head: u16) -> Result<Option<Segment>, RingError> {
        SplitRing::single(self, mem, head)
    }

    #[inline(always)]
    fn chain(
        &self,
        mem: &GuestMemory,
        head: u16,
        segs: &mut [Segment; MAX_SEGMENTS],
    ) -> Result<(usize, u64), RingError> {
        SplitRing::chain(self, mem, head, segs)
    }

    #[inline(always)]
    fn push_used(&mut self, head: u16, len: u32) {
        SplitRing::push_used(self, head, len)
    }

    #[inline(always)]
    fn publish(&mut self) -> bool {
        SplitRing::publish(self)
    }

    #[inline(always)]
    fn last_avail(&self) -> u16 {
        SplitRing::last_avail(self)
    }
}

impl Virtqueue for PackedRing {
    type Head = PackedHead;

    #[inline(always)]
    fn take_heads(&mut self, heads: &mut [PackedHead]) -> Result<usize, RingError> {
        PackedRing::take_heads(self, heads)
    }

    #[inline(always)]
    fn take_one(&mut self) -> Result<Option<PackedHead>, RingError> {
        PackedRing::take_one(self)
    }

    #[inline(always)]
    fn give_back(&mut self, heads: &[PackedHead]) {
        self.rewind(heads);
    }

    #[inline(always)]
    fn single(&self, mem: &GuestMemory, head: PackedHead) -> Result<Option<Segment>, RingError> {
        PackedRing::single(self, mem, head)
    }

    #[inline(always)]
    fn chain(
        &self,
        mem: &GuestMemory,
        head: PackedHead,
        segs: &mut [Segment; MAX_SEGMENTS],
    ) -> Result<(usize, u64), RingError> {
        PackedRing::chain(self, mem, head, segs)
    }

    #[inline(always)]
    fn push_used(&mut self, head: PackedHead, len: u32) {
        PackedRing::push_used(self, head, len)
    }

    #[inline(always)]
    fn publish(&mut self) -> bool {
        PackedRing::publish(self)
    }

    #[inline(always)]
    fn last_avail(&self) -> u16 {
        PackedRing::last_avail(self)
    }
}

/// A running queue's ring, of either layout.
pub enum Ring {
    /// A split virtqueue.
    Split(SplitRing),
    /// A packed virtqueue (VIRTIO_F_RING_PACKED).
    Packed(PackedRing),
}

impl Ring {
    /// A ring of the given layout starting at `base` (for a packed ring, the avail wrap
    /// counter in bit 15).
    pub fn new(
        packed: bool,
        layout: RingLayout,
        base: u16,
        event_idx: bool,
        dir: Direction,
    ) -> Ring {
        if packed {
            Ring::Packed(PackedRing::new(layout, base, event_idx, dir))
        } else {
            Ring::Split(SplitRing::new(layout, base, event_idx, dir))
        }
    }

    /// Whether it is a packed ring.
    pub fn is_packed(&self) -> bool {
        matches!(self, Ring::Packed(_))
    }

    /// The same progress on rings that moved.
    pub fn relocate(&mut self, layout: RingLayout) {
        match self {
            Ring::Split(r) => r.relocate(layout),
            Ring::Packed(r) => r.relocate(layout),
        }
    }

    /// Where the device reads next (GET_VRING_BASE).
    pub fn last_avail(&self) -> u16 {
        match self {
            Ring::Split(r) => r.last_avail(),
            Ring::Packed(r) => r.last_avail(),
        }
    }

    /// Make used chains visible; true when the guest wants an interrupt.
    pub fn publish(&mut self) -> bool {
        match self {
            Ring::Split(r) => r.publish(),
            Ring::Packed(r) => PackedRing::publish(r),
        }
    }

    /// Ask for a kick before a sleep; true when a chain is already there.
    pub fn arm_kick(&self) -> bool {
        match self {
            Ring::Split(r) => r.arm_kick(),
            Ring::Packed(r) => r.arm_kick(),
        }
    }

    /// No kicks while polling.
    pub fn disarm_kick(&self) {
        match self {
            Ring::Split(r) => r.disarm_kick(),
            Ring::Packed(r) => r.disarm_kick(),
        }
    }
}

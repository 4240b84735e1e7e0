//! A packed virtqueue (virtio 1.1, section 2.8; VIRTIO_F_RING_PACKED) seen from the device:
//! one ring of 16-byte descriptors that the driver marks available and the device marks used
//! in place, the two sides told apart by the AVAIL/USED flag bits against a wrap counter that
//! flips every lap, plus the two event suppression structures (the driver's, read here to
//! decide on interrupts; the device's, written here to ask for kicks or not).
//!
//! It owns only its progress: the next descriptor to read and its wrap counter, the next one
//! to write as used and its wrap counter, and the first used descriptor of the batch not yet
//! published (its flags are written last, with Release ordering, so the driver sees a whole
//! batch at once). The ring lives in guest memory, which the guest may change at any moment.
//! It never follows a descriptor outside the guest's memory, never walks more descriptors than
//! the ring has, never trusts a buffer id, never allocates, locks or makes a system call:
//! anything malformed is a `RingError`, after which the port stops the queue. Indirect
//! descriptors are not negotiated, so they are refused.

use crate::guest_access;
use crate::memory::GuestMemory;
use crate::ring::{Direction, RingError, RingLayout, Segment, MAX_SEGMENTS};
use std::sync::atomic::{fence, AtomicU16, Ordering};

/// Descriptor flag: the chain continues in the next slot.
const DESC_F_NEXT: u16 = 1;
/// Descriptor flag: the device writes this buffer (otherwise it reads it).
const DESC_F_WRITE: u16 = 2;
/// Descriptor flag: the buffer is a table of descriptors (not negotiated, so refused).
const DESC_F_INDIRECT: u16 = 4;
/// Descriptor flag: available, when equal to the driver's wrap counter.
const DESC_F_AVAIL: u16 = 1 << 7;
/// Descriptor flag: used, when equal to the device's wrap counter.
const DESC_F_USED: u16 = 1 << 15;
/// Event suppression flags: notifications wanted, not wanted, or at one descriptor (EVENT_IDX).
const EVENT_FLAGS_ENABLE: u16 = 0;
const EVENT_FLAGS_DISABLE: u16 = 1;
const EVENT_FLAGS_DESC: u16 = 2;
/// The wrap counter's bit in an event offset and in the vring base.
pub const WRAP_BIT: u16 = 1 << 15;
/// Largest packed ring (any size from 1 up; not necessarily a power of two).
pub const MAX_PACKED_SIZE: u16 = 32768;

/// Where a packed queue's parts are: the descriptor ring, the driver's event suppression
/// structure (the frontend's "available" address) and the device's (its "used" address).
pub fn translate(
    mem: &GuestMemory,
    size: u16,
    desc_uva: u64,
    driver_uva: u64,
    device_uva: u64,
) -> Result<RingLayout, String> {
    if !(1..=MAX_PACKED_SIZE).contains(&size) {
        return Err(format!(
            "packed queue size {size}; accepted: 1 to {MAX_PACKED_SIZE}"
        ));
    }
    let part = |uva: u64, len: u64, align: u64, what: &str| -> Result<*mut u8, String> {
        if !uva.is_multiple_of(align) {
            return Err(format!("{what} at {uva:#x} is not {align}-byte aligned"));
        }
        mem.uva(uva, len).ok_or_else(|| {
            format!("{what} at {uva:#x} ({len} bytes) is outside the guest's memory")
        })
    };
    Ok(RingLayout {
        desc: part(desc_uva, 16 * u64::from(size), 16, "packed descriptor ring")?,
        avail: part(driver_uva, 4, 4, "driver event suppression")?,
        used: part(device_uva, 4, 4, "device event suppression")?,
        size,
    })
}

/// A descriptor as it is in guest memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Desc {
    addr: u64,
    len: u32,
    id: u16,
    flags: u16,
}

/// A chain the device took: where it starts, how many descriptors it spans and its buffer id
/// (from its last descriptor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackedHead {
    /// Slot of its first descriptor.
    pub slot: u16,
    /// The driver's wrap counter at that slot.
    pub wrap: bool,
    /// Descriptors in the chain (1..=size).
    pub count: u16,
    /// Buffer id (below the ring size).
    pub id: u16,
}

/// A device's view of one packed ring: the layout plus its own progress.
pub struct PackedRing {
    layout: RingLayout,
    /// Next slot to read and the driver's wrap counter there.
    next_avail: u16,
    avail_wrap: bool,
    /// Next slot to write as used and the device's wrap counter there.
    next_used: u16,
    used_wrap: bool,
    /// The flags a used descriptor gets on the current used lap (AVAIL and USED both equal to
    /// the used wrap counter, WRITE on a queue the device writes).
    used_flags: u16,
    /// The first used descriptor since the last `publish`: its slot and the flags it gets then.
    pending: Option<(u16, u16)>,
    /// `next_used` when the guest was last notified (or the ring started).
    signalled: u16,
    event_idx: bool,
    dir: Direction,
}

// SAFETY: plain progress and a layout (see `RingLayout`); one worker owns a ring.
unsafe impl Send for PackedRing {}

/// Whether descriptor flags say "available" to a device whose avail wrap counter is `wrap`:
/// AVAIL equal to it, USED not.
#[inline(always)]
fn is_available(flags: u16, wrap: bool) -> bool {
    let want = if wrap { DESC_F_AVAIL } else { DESC_F_USED };
    flags & (DESC_F_AVAIL | DESC_F_USED) == want
}

impl PackedRing {
    /// A ring starting at `base` (slot in bits 0..15, avail wrap counter in bit 15, as
    /// SET_VRING_BASE carries it); used descriptors are written from the same place. The
    /// device asks not to be kicked (it polls).
    pub fn new(layout: RingLayout, base: u16, event_idx: bool, dir: Direction) -> PackedRing {
        let slot = (base & !WRAP_BIT) % layout.size.max(1);
        let wrap = base & WRAP_BIT != 0;
        let write = if dir == Direction::Write {
            DESC_F_WRITE
        } else {
            0
        };
        let ring = PackedRing {
            layout,
            next_avail: slot,
            avail_wrap: wrap,
            next_used: slot,
            used_wrap: wrap,
            used_flags: write | if wrap { DESC_F_AVAIL | DESC_F_USED } else { 0 },
            pending: None,
            signalled: slot,
            event_idx,
            dir,
        };
        ring.device_event(1)
            .store(EVENT_FLAGS_DISABLE, Ordering::Relaxed);
        ring
    }

    /// The same progress on a ring that moved (a new memory table).
    pub fn relocate(&mut self, layout: RingLayout) {
        debug_assert_eq!(layout.size, self.layout.size);
        self.layout = layout;
    }

    /// Next slot the device reads, with the avail wrap counter in bit 15 (what GET_VRING_BASE
    /// reports; used descriptors are written in order, so the used side is the same after a
    /// `publish`).
    pub fn last_avail(&self) -> u16 {
        self.next_avail | if self.avail_wrap { WRAP_BIT } else { 0 }
    }

    /// Which way this queue moves data.
    pub fn direction(&self) -> Direction {
        self.dir
    }

    /// The flags of descriptor `slot` (`slot < size`).
    #[inline(always)]
    fn flags(&self, slot: u16) -> &AtomicU16 {
        debug_assert!(slot < self.layout.size);
        // SAFETY: callers pass `slot < size` (the ring's own progress, always reduced modulo
        // the size); the ring is `16 * size` bytes, 16-aligned, in mapped guest memory, and
        // the flags are the 2-aligned last two bytes of a descriptor.
        unsafe { guest_access::atomic_u16(self.layout.desc.add(16 * usize::from(slot) + 14)) }
    }

    /// Word `i` (0: offset and wrap, 1: flags) of the driver's event suppression structure.
    #[inline(always)]
    fn driver_event(&self, i: usize) -> &AtomicU16 {
        // SAFETY: the structure is 4 bytes, 4-aligned, in mapped guest memory (`translate`);
        // callers pass 0 or 1.
        unsafe { guest_access::atomic_u16(self.layout.avail.add(2 * (i & 1))) }
    }

    /// Word `i` of the device's event suppression structure.
    #[inline(always)]
    fn device_event(&self, i: usize) -> &AtomicU16 {
        // SAFETY: as `driver_event`, for the device's structure.
        unsafe { guest_access::atomic_u16(self.layout.used.add(2 * (i & 1))) }
    }

    /// The slot after `slot`, and the wrap counter there.
    #[inline(always)]
    fn step(&self, slot: u16, wrap: bool) -> (u16, bool) {
        let next = slot + 1;
        if next == self.layout.size {
            (0, !wrap)
        } else {
            (next, wrap)
        }
    }

    /// `n` slots after `slot` (`n <= size`), and the wrap counter there.
    #[inline(always)]
    fn advance(&self, slot: u16, wrap: bool, n: u16) -> (u16, bool) {
        let size = u32::from(self.layout.size);
        let to = u32::from(slot) + u32::from(n);
        if to >= size {
            ((to - size) as u16, !wrap)
        } else {
            (to as u16, wrap)
        }
    }

    fn desc(&self, slot: u16) -> Result<Desc, RingError> {
        if slot >= self.layout.size {
            return Err(RingError::DescriptorIndex {
                index: slot,
                size: self.layout.size,
            });
        }
        // SAFETY: `slot < size` and the ring is `16 * size` bytes, 16-aligned, in mapped guest
        // memory; a volatile read because the guest may write it concurrently.
        Ok(unsafe { guest_access::load((self.layout.desc as *const Desc).add(usize::from(slot))) })
    }

    /// The buffer id of descriptor `slot` (`slot < size`).
    #[inline(always)]
    fn id(&self, slot: u16) -> u16 {
        debug_assert!(slot < self.layout.size);
        // SAFETY: as `flags`: the id is the 2-aligned pair of bytes before the flags; volatile
        // because the guest maps it.
        unsafe {
            guest_access::load(self.layout.desc.add(16 * usize::from(slot) + 12) as *const u16)
        }
    }

    /// Take the next chain the driver made available, if there is one: its head's flags are
    /// read with Acquire (the driver writes them last), then the rest of the chain's, which
    /// must be marked available for their own lap. The buffer id comes from the last one.
    #[inline(always)]
    pub fn take_one(&mut self) -> Result<Option<PackedHead>, RingError> {
        let (slot, wrap) = (self.next_avail, self.avail_wrap);
        let flags = self.flags(slot).load(Ordering::Acquire);
        if !is_available(flags, wrap) {
            return Ok(None);
        }
        if flags & DESC_F_NEXT != 0 {
            return self.take_chain(slot, wrap, flags);
        }
        // One descriptor: the usual case.
        let id = self.id(slot);
        if id >= self.layout.size {
            return Err(RingError::BufferId {
                id,
                size: self.layout.size,
            });
        }
        (self.next_avail, self.avail_wrap) = self.step(slot, wrap);
        Ok(Some(PackedHead {
            slot,
            wrap,
            count: 1,
            id,
        }))
    }

    /// `take_one` for a chain of several descriptors, the first at `slot` with `flags`.
    #[inline(never)]
    fn take_chain(
        &mut self,
        slot: u16,
        wrap: bool,
        mut flags: u16,
    ) -> Result<Option<PackedHead>, RingError> {
        let size = self.layout.size;
        let (mut at, mut at_wrap, mut count) = (slot, wrap, 1u16);
        while flags & DESC_F_NEXT != 0 {
            if count == size {
                return Err(RingError::Loop(size));
            }
            (at, at_wrap) = self.step(at, at_wrap);
            flags = self.flags(at).load(Ordering::Relaxed);
            if !is_available(flags, at_wrap) {
                return Err(RingError::WrapMismatch {
                    slot: at,
                    flags,
                    wrap: at_wrap,
                });
            }
            count += 1;
        }
        let id = self.id(at);
        if id >= size {
            return Err(RingError::BufferId { id, size });
        }
        (self.next_avail, self.avail_wrap) = self.step(at, at_wrap);
        Ok(Some(PackedHead {
            slot,
            wrap,
            count,
            id,
        }))
    }

    /// Take up to `heads.len()` available chains in ring order; returns how many were taken.
    /// Chains not used may be given back with `rewind`. A malformed chain after good ones
    /// ends the batch there (the error comes with the next take, as `take_one` does not move
    /// past it), so the good ones still go.
    #[inline]
    pub fn take_heads(&mut self, heads: &mut [PackedHead]) -> Result<usize, RingError> {
        let size = self.layout.size;
        let mut n = 0;
        // `take_one` unrolled for single descriptors: the position stays in registers.
        let (mut slot, mut wrap) = (self.next_avail, self.avail_wrap);
        while n < heads.len() {
            let flags = self.flags(slot).load(Ordering::Acquire);
            if !is_available(flags, wrap) {
                break;
            }
            let taken = if flags & DESC_F_NEXT != 0 {
                (self.next_avail, self.avail_wrap) = (slot, wrap);
                let t = self.take_chain(slot, wrap, flags);
                (slot, wrap) = (self.next_avail, self.avail_wrap);
                t
            } else {
                let id = self.id(slot);
                if id < size {
                    let h = PackedHead {
                        slot,
                        wrap,
                        count: 1,
                        id,
                    };
                    (slot, wrap) = self.step(slot, wrap);
                    Ok(Some(h))
                } else {
                    Err(RingError::BufferId { id, size })
                }
            };
            match taken {
                Ok(Some(h)) => heads[n] = h,
                Ok(None) => break,
                Err(e) if n == 0 => return Err(e),
                Err(_) => break,
            }
            n += 1;
        }
        (self.next_avail, self.avail_wrap) = (slot, wrap);
        Ok(n)
    }

    /// Give back chains taken and not pushed as used, `heads[0]` the earliest of them.
    #[inline]
    pub fn rewind(&mut self, heads: &[PackedHead]) {
        if let Some(h) = heads.first() {
            self.next_avail = h.slot;
            self.avail_wrap = h.wrap;
        }
    }

    /// Check one descriptor of a chain going this queue's way and translate it.
    #[inline(always)]
    fn segment(&self, mem: &GuestMemory, d: Desc) -> Result<Segment, RingError> {
        if d.flags & DESC_F_INDIRECT != 0 {
            return Err(RingError::Indirect);
        }
        self.dir.check(d.flags & DESC_F_WRITE != 0)?;
        if d.len == 0 {
            return Err(RingError::ZeroLength);
        }
        let ptr = mem.gpa(d.addr, d.len).ok_or(RingError::OutOfRange {
            addr: d.addr,
            len: d.len,
        })?;
        Ok(Segment { ptr, len: d.len })
    }

    /// The chain `head` when it is a single buffer (the usual case): `Some(segment)`; None
    /// when it has more (use `chain`). The same checks as `chain`.
    #[inline]
    pub fn single(
        &self,
        mem: &GuestMemory,
        head: PackedHead,
    ) -> Result<Option<Segment>, RingError> {
        if head.count != 1 {
            return Ok(None);
        }
        self.segment(mem, self.desc(head.slot)?).map(Some)
    }

    /// Translate chain `head` into `segs`; returns how many segments and their total length.
    /// Every buffer must go this queue's way, be non-empty and lie in guest memory.
    #[inline]
    pub fn chain(
        &self,
        mem: &GuestMemory,
        head: PackedHead,
        segs: &mut [Segment; MAX_SEGMENTS],
    ) -> Result<(usize, u64), RingError> {
        if usize::from(head.count) > MAX_SEGMENTS {
            return Err(RingError::TooLong);
        }
        let (mut slot, mut total) = (head.slot, 0u64);
        for s in segs.iter_mut().take(usize::from(head.count)) {
            *s = self.segment(mem, self.desc(slot)?)?;
            total += u64::from(s.len);
            slot = if slot + 1 >= self.layout.size {
                0
            } else {
                slot + 1
            };
        }
        Ok((usize::from(head.count), total))
    }

    /// Return chain `head` as used, `len` bytes written into it (0 for read chains): its id
    /// and length go into the next used slot now, its flags too unless it is the first of the
    /// batch, whose flags `publish` writes last (the driver reads used descriptors in order, so
    /// the batch stays invisible until then).
    #[inline]
    pub fn push_used(&mut self, head: PackedHead, len: u32) {
        let slot = self.next_used;
        let flags = self.used_flags;
        // SAFETY: `slot < size` (the ring's own progress): its descriptor is inside the ring;
        // the device owns it (the driver made it available and it was read). Volatile because
        // the guest maps it.
        unsafe {
            let d = (self.layout.desc as *mut Desc).add(usize::from(slot));
            guest_access::store(std::ptr::addr_of_mut!((*d).len), len);
            guest_access::store(std::ptr::addr_of_mut!((*d).id), head.id);
        }
        match self.pending {
            None => self.pending = Some((slot, flags)),
            Some(_) => self.flags(slot).store(flags, Ordering::Release),
        }
        let count = head.count.clamp(1, self.layout.size);
        let (next, wrap) = self.advance(slot, self.used_wrap, count);
        if wrap != self.used_wrap {
            self.used_flags ^= DESC_F_AVAIL | DESC_F_USED;
        }
        (self.next_used, self.used_wrap) = (next, wrap);
    }

    /// Make the used descriptors pushed so far visible; true when the guest asked to be told
    /// (its interrupt must be raised through the call eventfd).
    #[inline]
    pub fn publish(&mut self) -> bool {
        let Some((slot, flags)) = self.pending.take() else {
            return false;
        };
        self.flags(slot).store(flags, Ordering::Release);
        // The driver's suppression structure must be read after the flags store.
        fence(Ordering::SeqCst);
        let (old, new) = (self.signalled, self.next_used);
        self.signalled = new;
        match self.driver_event(1).load(Ordering::Relaxed) {
            EVENT_FLAGS_DISABLE => false,
            EVENT_FLAGS_DESC if self.event_idx => {
                let off_wrap = self.driver_event(0).load(Ordering::Relaxed);
                self.need_event(off_wrap, old, new)
            }
            // ENABLE; DESC without EVENT_IDX and reserved values: an interrupt too many is
            // harmless, one too few stalls the guest.
            _ => true,
        }
    }

    /// With EVENT_IDX: whether the used descriptor the driver asked to hear about (`off_wrap`:
    /// slot and wrap counter) was written between `old` and `new` (one batch, at most a lap).
    fn need_event(&self, off_wrap: u16, old: u16, new: u16) -> bool {
        let size = self.layout.size;
        // Positions on one line: the previous lap's slots count as negative.
        let old = if new <= old {
            old.wrapping_sub(size)
        } else {
            old
        };
        let mut off = off_wrap & !WRAP_BIT;
        if (off_wrap & WRAP_BIT != 0) != self.used_wrap {
            off = off.wrapping_sub(size);
        }
        // vring_need_event: `off` lies in [old, new).
        new.wrapping_sub(off).wrapping_sub(1) < new.wrapping_sub(old)
    }

    /// Before the worker sleeps: ask the driver to kick for the next chain it makes available.
    /// Returns true when one already is (the worker must not sleep).
    pub fn arm_kick(&self) -> bool {
        if self.event_idx {
            self.device_event(0)
                .store(self.last_avail(), Ordering::Relaxed);
            self.device_event(1)
                .store(EVENT_FLAGS_DESC, Ordering::Relaxed);
        } else {
            self.device_event(1)
                .store(EVENT_FLAGS_ENABLE, Ordering::Relaxed);
        }
        // The driver reads our request after it publishes a descriptor; we read its
        // descriptor after our request is visible: one of us sees the other.
        fence(Ordering::SeqCst);
        is_available(
            self.flags(self.next_avail).load(Ordering::Acquire),
            self.avail_wrap,
        )
    }

    /// After the worker woke: kicks are not wanted while it polls.
    pub fn disarm_kick(&self) {
        self.device_event(1)
            .store(EVENT_FLAGS_DISABLE, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "packed_ring_tests.rs"]
mod tests;

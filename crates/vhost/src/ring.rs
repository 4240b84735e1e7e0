//! A split virtqueue (virtio 1.x, section 2.7) seen from the device: reading the chains the
//! driver made available and returning them as used, with event-index and flag based
//! notification suppression. This is the fast path of a vhost-user port.
//!
//! It owns only its progress (next available entry to read, next used entry to write); the
//! rings live in guest memory, which the guest may change at any moment. It never follows a
//! descriptor outside the guest's memory, never walks more descriptors than the ring has (a
//! loop), never trusts an index, never allocates, locks or makes a system call: anything
//! malformed is a `RingError`, after which the port stops the queue.

use crate::guest_access;
use crate::memory::GuestMemory;
use std::sync::atomic::{fence, AtomicU16, Ordering};

/// Descriptor flag: the chain continues at `next`.
const DESC_F_NEXT: u16 = 1;
/// Descriptor flag: the device writes this buffer (otherwise it reads it).
const DESC_F_WRITE: u16 = 2;
/// Descriptor flag: the buffer is a table of descriptors (not negotiated, so refused).
const DESC_F_INDIRECT: u16 = 4;
/// Used ring flag: the device does not want kicks (without event index).
const USED_F_NO_NOTIFY: u16 = 1;
/// Available ring flag: the driver does not want interrupts (without event index).
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// Largest queue a split ring may have.
pub const MAX_QUEUE_SIZE: u16 = 32768;

/// Whether a split ring may have `size` entries: a power of two up to `MAX_QUEUE_SIZE`.
pub fn valid_queue_size(size: u16) -> bool {
    size.is_power_of_two() && size <= MAX_QUEUE_SIZE
}

/// A descriptor as it is in guest memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// What a guest did wrong in a ring; the queue stops until the frontend sets it up again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The available index moved by more than the ring holds.
    #[error("available index jumped from {from} to {to} on a ring of {size}")]
    IndexJump {
        /// Last index read.
        from: u16,
        /// Index the guest wrote.
        to: u16,
        /// Ring size.
        size: u16,
    },
    /// A chain head or `next` names a descriptor past the table.
    #[error("descriptor {index} is past the ring of {size}")]
    DescriptorIndex {
        /// The index.
        index: u16,
        /// Ring size.
        size: u16,
    },
    /// A chain longer than the ring: a loop.
    #[error("descriptor chain longer than the ring of {0}: a loop")]
    Loop(u16),
    /// A buffer outside the guest's memory.
    #[error("buffer at guest address {addr:#x}, {len} bytes, is outside the guest's memory")]
    OutOfRange {
        /// Its guest physical address.
        addr: u64,
        /// Its length.
        len: u32,
    },
    /// A chain of more buffers than a port follows (on rings larger than that, also what a
    /// loop looks like).
    #[error("descriptor chain of more than {MAX_SEGMENTS} buffers (a loop, or longer than a port follows)")]
    TooLong,
    /// An indirect descriptor (not negotiated).
    #[error("indirect descriptor, which was not negotiated")]
    Indirect,
    /// A buffer of zero bytes in a packed ring (drivers never post one).
    #[error("a zero-length buffer in a packed ring")]
    ZeroLength,
    /// A packed ring's buffer id at or past the ring size.
    #[error("buffer id {id} is past the packed ring of {size}")]
    BufferId {
        /// The id.
        id: u16,
        /// Ring size.
        size: u16,
    },
    /// A packed chain goes on into a descriptor not marked available for its lap.
    #[error("packed chain continues into slot {slot} (flags {flags:#06x}), not available for wrap counter {wrap}")]
    WrapMismatch {
        /// The slot.
        slot: u16,
        /// Its flags.
        flags: u16,
        /// The wrap counter of that slot.
        wrap: bool,
    },
    /// A buffer the device should read was marked writable, or the other way round.
    #[error("a {found} buffer in a chain the device must {want}")]
    Direction {
        /// What was found ("device-writable" or "device-readable").
        found: &'static str,
        /// What the queue does ("read" or "write").
        want: &'static str,
    },
}

/// Where a queue's three parts are, as the frontend set them (already translated).
#[derive(Clone, Copy, Debug)]
pub struct RingLayout {
    /// Descriptor table (16-byte aligned, `16 * size` bytes).
    pub desc: *mut u8,
    /// Available ring (2-byte aligned, `6 + 2 * size` bytes).
    pub avail: *mut u8,
    /// Used ring (4-byte aligned, `6 + 8 * size` bytes).
    pub used: *mut u8,
    /// Entries (a power of two, 1..=32768).
    pub size: u16,
}

// SAFETY: the pointers point into a `GuestMemory` the device keeps mapped as long as any
// worker may hold a layout made from it; the layout itself is plain data.
unsafe impl Send for RingLayout {}
// SAFETY: as above.
unsafe impl Sync for RingLayout {}

impl RingLayout {
    /// Translate the frontend's addresses of a ring of `size` entries, checking alignment,
    /// size and that each part lies inside one region.
    pub fn translate(
        mem: &GuestMemory,
        size: u16,
        desc_uva: u64,
        avail_uva: u64,
        used_uva: u64,
    ) -> Result<RingLayout, String> {
        if !valid_queue_size(size) {
            return Err(format!(
                "queue size {size}; accepted: a power of two from 1 to {MAX_QUEUE_SIZE}"
            ));
        }
        let n = u64::from(size);
        let part = |uva: u64, len: u64, align: u64, what: &str| -> Result<*mut u8, String> {
            if !uva.is_multiple_of(align) {
                return Err(format!(
                    "{what} ring at {uva:#x} is not {align}-byte aligned"
                ));
            }
            mem.uva(uva, len).ok_or_else(|| {
                format!("{what} ring at {uva:#x} ({len} bytes) is outside the guest's memory")
            })
        };
        Ok(RingLayout {
            desc: part(desc_uva, 16 * n, 16, "descriptor")?,
            avail: part(avail_uva, 6 + 2 * n, 2, "available")?,
            used: part(used_uva, 6 + 8 * n, 4, "used")?,
            size,
        })
    }
}

/// Which way a queue moves data, from the device's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The device reads the buffers (the guest's transmit queue).
    Read,
    /// The device writes the buffers (the guest's receive queue).
    Write,
}

impl Direction {
    /// A buffer the guest marked device-writable (`writable`) or not must go this way.
    #[inline(always)]
    pub(crate) fn check(self, writable: bool) -> Result<(), RingError> {
        match (self, writable) {
            (Direction::Read, true) => Err(RingError::Direction {
                found: "device-writable",
                want: "read",
            }),
            (Direction::Write, false) => Err(RingError::Direction {
                found: "device-readable",
                want: "write",
            }),
            _ => Ok(()),
        }
    }
}

/// One buffer of a chain, translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Where it is mapped here.
    pub ptr: *mut u8,
    /// Its length.
    pub len: u32,
}

// SAFETY: a scratch record of a translated buffer; only dereferenced by the node that made it,
// while it holds the snapshot whose memory it points into.
unsafe impl Send for Segment {}

/// Most buffers one chain may have that a port keeps track of (longer chains are an error
/// only past the ring size; this bounds the scratch array).
pub const MAX_SEGMENTS: usize = 64;

/// A device's view of one split ring: the layout plus its own progress.
pub struct SplitRing {
    layout: RingLayout,
    mask: u16,
    /// Next available entry to read.
    last_avail: u16,
    /// Available index as last loaded (entries up to it may be read without another load).
    avail_idx: u16,
    /// Next used entry to write.
    used_idx: u16,
    /// Used index when the guest was last notified (or the ring started).
    signalled: u16,
    event_idx: bool,
    dir: Direction,
}

// SAFETY: plain progress and a layout (see `RingLayout`); one worker owns a ring.
unsafe impl Send for SplitRing {}

impl SplitRing {
    /// A ring starting at available (and used) index `base`, as SET_VRING_BASE said.
    pub fn new(layout: RingLayout, base: u16, event_idx: bool, dir: Direction) -> SplitRing {
        let ring = SplitRing {
            layout,
            mask: layout.size - 1,
            last_avail: base,
            avail_idx: base,
            used_idx: base,
            signalled: base,
            event_idx,
            dir,
        };
        // Polling: kicks are not wanted. With event index the driver looks at `avail_event`
        // instead, which is left where it is, so it kicks at most once per 65536 buffers.
        if !event_idx {
            ring.used_u16(0).store(USED_F_NO_NOTIFY, Ordering::Relaxed);
        }
        ring
    }

    /// The same progress on rings that moved (a new memory table).
    pub fn relocate(&mut self, layout: RingLayout) {
        debug_assert_eq!(layout.size, self.layout.size);
        self.layout = layout;
        self.mask = layout.size - 1;
    }

    /// Give back the last `n` heads taken by `next_head` (not yet pushed as used).
    #[inline]
    pub fn rewind(&mut self, n: u16) {
        self.last_avail = self.last_avail.wrapping_sub(n);
    }

    /// Next available entry the device will read (what GET_VRING_BASE reports).
    pub fn last_avail(&self) -> u16 {
        self.last_avail
    }

    fn avail_u16(&self, i: usize) -> &AtomicU16 {
        // SAFETY: `avail` is 2-aligned and `6 + 2 * size` bytes long inside mapped guest
        // memory (checked by `RingLayout::translate`); callers pass `i <= size + 2`.
        unsafe { guest_access::atomic_u16(self.layout.avail.add(2 * i)) }
    }

    fn used_u16(&self, i: usize) -> &AtomicU16 {
        // SAFETY: `used` is 4-aligned and `6 + 8 * size` bytes long inside mapped guest
        // memory; callers pass 0 (flags), 1 (idx) or `2 + 4 * size` (avail_event).
        unsafe { guest_access::atomic_u16(self.layout.used.add(2 * i)) }
    }

    /// Chains the driver has made available and the device has not read yet.
    #[inline]
    pub fn available(&mut self) -> Result<u16, RingError> {
        if self.avail_idx == self.last_avail {
            let idx = self.avail_u16(1).load(Ordering::Acquire);
            let n = idx.wrapping_sub(self.last_avail);
            if n > self.layout.size {
                return Err(RingError::IndexJump {
                    from: self.last_avail,
                    to: idx,
                    size: self.layout.size,
                });
            }
            self.avail_idx = idx;
        }
        Ok(self.avail_idx.wrapping_sub(self.last_avail))
    }

    /// The head of the next available chain; call only when `available()` was non-zero.
    #[inline]
    pub fn next_head(&mut self) -> u16 {
        let slot = usize::from(self.last_avail & self.mask);
        let head = self.avail_u16(2 + slot).load(Ordering::Relaxed);
        self.last_avail = self.last_avail.wrapping_add(1);
        head
    }

    fn desc(&self, index: u16) -> Result<Desc, RingError> {
        if index >= self.layout.size {
            return Err(RingError::DescriptorIndex {
                index,
                size: self.layout.size,
            });
        }
        // SAFETY: `index < size` and the table is `16 * size` bytes, 16-aligned, in mapped
        // guest memory; a volatile read because the guest may write it concurrently.
        Ok(
            unsafe {
                guest_access::load((self.layout.desc as *const Desc).add(usize::from(index)))
            },
        )
    }

    /// Take up to `heads.len()` available chain heads (at most `available()`), their ring
    /// slots' cache lines requested together first, and ask for each head's descriptor; returns
    /// how many were taken. Heads not used may be given back with `rewind`.
    #[inline]
    pub fn take_heads(&mut self, heads: &mut [u16]) -> usize {
        let n = heads
            .len()
            .min(usize::from(self.avail_idx.wrapping_sub(self.last_avail)));
        let first = usize::from(self.last_avail & self.mask);
        // 32 two-byte slots per 64-byte line; the ring wraps at most once in a batch.
        let mut k = 0;
        while k < n {
            let slot = (first + k) & usize::from(self.mask);
            packet::prefetch(self.avail_u16(2 + slot) as *const AtomicU16 as *const u8);
            k += 32 - (slot & 31);
        }
        for h in heads.iter_mut().take(n) {
            *h = self.next_head();
            if *h < self.layout.size {
                // SAFETY: only the address is computed (`head < size`, inside the table).
                let d = unsafe { (self.layout.desc as *const Desc).add(usize::from(*h)) };
                packet::prefetch(d.cast());
            }
        }
        n
    }

    /// The chain at `head` when it is a single buffer (the usual case): `Some(segment)`; None
    /// when it continues (use `chain`). The same checks as `chain`.
    #[inline]
    pub fn single(&self, mem: &GuestMemory, head: u16) -> Result<Option<Segment>, RingError> {
        let d = self.desc(head)?;
        if d.flags & (DESC_F_NEXT | DESC_F_INDIRECT) != 0 {
            return Ok(None);
        }
        self.dir.check(d.flags & DESC_F_WRITE != 0)?;
        let ptr = mem.gpa(d.addr, d.len).ok_or(RingError::OutOfRange {
            addr: d.addr,
            len: d.len,
        })?;
        Ok(Some(Segment { ptr, len: d.len }))
    }

    /// Translate the chain at `head` into `segs`; returns how many segments and their total
    /// length. Every buffer must go this queue's way and lie in guest memory.
    #[inline]
    pub fn chain(
        &self,
        mem: &GuestMemory,
        head: u16,
        segs: &mut [Segment; MAX_SEGMENTS],
    ) -> Result<(usize, u64), RingError> {
        let mut index = head;
        let (mut n, mut total) = (0usize, 0u64);
        for _ in 0..self.layout.size {
            let d = self.desc(index)?;
            if d.flags & DESC_F_INDIRECT != 0 {
                return Err(RingError::Indirect);
            }
            self.dir.check(d.flags & DESC_F_WRITE != 0)?;
            let ptr = mem.gpa(d.addr, d.len).ok_or(RingError::OutOfRange {
                addr: d.addr,
                len: d.len,
            })?;
            if d.len > 0 {
                if n == MAX_SEGMENTS {
                    return Err(RingError::TooLong);
                }
                segs[n] = Segment { ptr, len: d.len };
                n += 1;
                total += u64::from(d.len);
            }
            if d.flags & DESC_F_NEXT == 0 {
                return Ok((n, total));
            }
            index = d.next;
        }
        Err(RingError::Loop(self.layout.size))
    }

    /// Return the chain at `head` as used, `len` bytes written into it (0 for read chains).
    /// Visible to the driver only after `publish`.
    #[inline]
    pub fn push_used(&mut self, head: u16, len: u32) {
        let slot = usize::from(self.used_idx & self.mask);
        // SAFETY: element `slot < size` of the used ring (4 + 8 * slot, 8 bytes, 4-aligned),
        // inside the translated used ring; volatile because the guest maps it.
        unsafe {
            let elem = self.layout.used.add(4 + 8 * slot) as *mut u32;
            guest_access::store(elem, u32::from(head));
            guest_access::store(elem.add(1), len);
        }
        self.used_idx = self.used_idx.wrapping_add(1);
    }

    /// Make the used entries pushed so far visible; true when the guest asked to be told
    /// (its interrupt must be raised through the call eventfd).
    #[inline]
    pub fn publish(&mut self) -> bool {
        let new = self.used_idx;
        if new == self.signalled {
            return false;
        }
        self.used_u16(1).store(new, Ordering::Release);
        // The guest's suppression flags or event index must be read after the index store.
        fence(Ordering::SeqCst);
        let old = self.signalled;
        self.signalled = new;
        if self.event_idx {
            let size = usize::from(self.layout.size);
            let used_event = self.avail_u16(2 + size).load(Ordering::Relaxed);
            // vring_need_event: notify when `used_event` lies in [old, new).
            new.wrapping_sub(used_event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            self.avail_u16(0).load(Ordering::Relaxed) & AVAIL_F_NO_INTERRUPT == 0
        }
    }

    /// Before the worker sleeps: ask the driver to kick for the next chain it makes available.
    /// Returns true when one already is (the worker must not sleep).
    pub fn arm_kick(&self) -> bool {
        if self.event_idx {
            let size = usize::from(self.layout.size);
            self.used_u16(2 + 4 * size)
                .store(self.last_avail, Ordering::Relaxed);
        } else {
            self.used_u16(0).store(0, Ordering::Relaxed);
        }
        // The driver reads our request after it publishes its index; we read its index after
        // our request is visible: one of us sees the other.
        fence(Ordering::SeqCst);
        self.avail_u16(1).load(Ordering::Acquire) != self.last_avail
    }

    /// After the worker woke: kicks are not wanted while it polls (with event index, the
    /// request moves half the ring space away: at most one kick per 32768 chains).
    pub fn disarm_kick(&self) {
        if self.event_idx {
            let size = usize::from(self.layout.size);
            let far = self.last_avail.wrapping_add(0x8000);
            self.used_u16(2 + 4 * size).store(far, Ordering::Relaxed);
        } else {
            self.used_u16(0).store(USED_F_NO_NOTIFY, Ordering::Relaxed);
        }
    }

    /// Which way this queue moves data.
    pub fn direction(&self) -> Direction {
        self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_guest::{FakeGuest, GPA, MEM};

    fn segs() -> Box<[Segment; MAX_SEGMENTS]> {
        Box::new(
            [Segment {
                ptr: std::ptr::null_mut(),
                len: 0,
            }; MAX_SEGMENTS],
        )
    }

    #[test]
    fn a_chain_is_read_and_returned_with_the_index_published() {
        let mut g = FakeGuest::new(8);
        let head = g.add_chain(&[12, 60], false, &[7u8; 72]);
        let mut r = SplitRing::new(g.layout(), 0, false, Direction::Read);
        assert_eq!(g.used_flags(), USED_F_NO_NOTIFY, "kicks are not wanted");
        assert_eq!(r.available(), Ok(1));
        assert_eq!(r.next_head(), head);
        let mut s = segs();
        let (n, total) = r.chain(&g.mem, head, &mut s).expect("chain");
        assert_eq!((n, total), (2, 72));
        r.push_used(head, 0);
        assert_eq!(g.used_idx(), 0, "not visible before publish");
        assert!(r.publish(), "the guest did not suppress interrupts");
        assert_eq!(g.used_idx(), 1);
        assert_eq!(g.used(0), (u32::from(head), 0));
        assert_eq!(r.last_avail(), 1);
    }

    #[test]
    fn malformed_rings_are_errors_never_reads_outside() {
        let mut s = segs();
        // A loop: 0 -> 1 -> 0.
        let mut g = FakeGuest::new(8);
        g.set_desc(0, g.buffer_gpa(0), 64, DESC_F_NEXT, 1);
        g.set_desc(1, g.buffer_gpa(1), 64, DESC_F_NEXT, 0);
        g.push_avail(0);
        g.publish_avail(1);
        let mut r = SplitRing::new(g.layout(), 0, false, Direction::Read);
        r.available().expect("one");
        let h = r.next_head();
        assert_eq!(r.chain(&g.mem, h, &mut s).err(), Some(RingError::Loop(8)));
        // Out of range: past the end of memory, wrapping, and below it.
        for (addr, len) in [
            (GPA + MEM - 10, 64),
            (u64::MAX - 8, 64),
            (0, 64),
            (GPA, u32::MAX),
        ] {
            g.set_desc(0, addr, len, 0, 0);
            assert_eq!(
                r.chain(&g.mem, 0, &mut s).err(),
                Some(RingError::OutOfRange { addr, len })
            );
        }
        // A head or next past the table.
        assert_eq!(
            r.chain(&g.mem, 8, &mut s).err(),
            Some(RingError::DescriptorIndex { index: 8, size: 8 })
        );
        g.set_desc(0, g.buffer_gpa(0), 64, DESC_F_NEXT, 9);
        assert_eq!(
            r.chain(&g.mem, 0, &mut s).err(),
            Some(RingError::DescriptorIndex { index: 9, size: 8 })
        );
        // Indirect and wrong-direction buffers.
        g.set_desc(0, g.buffer_gpa(0), 64, DESC_F_INDIRECT, 0);
        assert_eq!(r.chain(&g.mem, 0, &mut s).err(), Some(RingError::Indirect));
        g.set_desc(0, g.buffer_gpa(0), 64, DESC_F_WRITE, 0);
        assert!(matches!(
            r.chain(&g.mem, 0, &mut s),
            Err(RingError::Direction { .. })
        ));
        let w = SplitRing::new(g.layout(), 0, false, Direction::Write);
        g.set_desc(0, g.buffer_gpa(0), 64, 0, 0);
        assert!(matches!(
            w.chain(&g.mem, 0, &mut s),
            Err(RingError::Direction { .. })
        ));
        // Zero-length buffers are skipped, not errors.
        g.set_desc(0, g.buffer_gpa(0), 0, DESC_F_NEXT, 1);
        g.set_desc(1, g.buffer_gpa(1), 64, 0, 0);
        assert_eq!(r.chain(&g.mem, 0, &mut s).expect("chain").0, 1);
    }

    #[test]
    fn an_index_jump_past_the_ring_is_an_error() {
        let g = FakeGuest::new(8);
        let mut r = SplitRing::new(g.layout(), 0, false, Direction::Read);
        g.publish_avail(8);
        assert_eq!(r.available(), Ok(8), "a full ring is fine");
        let mut r = SplitRing::new(g.layout(), 0, false, Direction::Read);
        g.publish_avail(9);
        assert_eq!(
            r.available(),
            Err(RingError::IndexJump {
                from: 0,
                to: 9,
                size: 8
            })
        );
        // Indices wrap at 65536: base 65530 + 8 is fine.
        let mut r = SplitRing::new(g.layout(), 65530, false, Direction::Read);
        g.publish_avail(65530u16.wrapping_add(8));
        assert_eq!(r.available(), Ok(8));
    }

    #[test]
    fn notifications_follow_the_guests_flag_or_event_index() {
        let mut g = FakeGuest::new(8);
        let h = g.add_chain(&[64], false, &[0; 64]);
        let mut r = SplitRing::new(g.layout(), 0, false, Direction::Read);
        g.set_avail_flags(AVAIL_F_NO_INTERRUPT);
        r.available().expect("one");
        r.next_head();
        r.push_used(h, 0);
        assert!(!r.publish(), "interrupts suppressed by the flag");
        assert!(!r.publish(), "nothing new, nothing to tell");

        // Event index: notify only when used_event lies in [old, new).
        let g = FakeGuest::new(8);
        let mut r = SplitRing::new(g.layout(), 0, true, Direction::Read);
        assert_eq!(g.used_flags(), 0, "event index: the flag is not used");
        g.set_used_event(1);
        r.push_used(0, 0);
        assert!(!r.publish(), "used 0 -> 1, the guest waits for 1 -> 2");
        r.push_used(1, 0);
        r.push_used(2, 0);
        assert!(r.publish(), "used 1 -> 3 crosses 1");
        g.set_used_event(2);
        r.push_used(3, 0);
        assert!(
            !r.publish(),
            "2 is behind: the guest is still busy with what it had"
        );
    }
}

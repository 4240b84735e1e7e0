//! Tests only: the driver side of one split ring in a memfd, as a guest would lay it out, so
//! the device code can be fed well-formed and malformed rings byte by byte.

use crate::memory::{GuestMemory, RegionSpec};
use crate::ring::RingLayout;
use std::sync::Arc;

/// Guest physical address where the fake guest's memory starts.
pub const GPA: u64 = 0x10_0000;
/// The frontend's virtual address of the same memory.
pub const UVA: u64 = 0x7f00_0000_0000;
/// Bytes of fake guest memory.
pub const MEM: u64 = 1 << 20;
/// Offsets of the rings (descriptor table, available, used) and of the data buffers.
const DESC_AT: u64 = 0;
const AVAIL_AT: u64 = 0x4000;
const USED_AT: u64 = 0x8000;
/// Data buffers start here.
pub const DATA_AT: u64 = 0x10000;

/// One ring of `size` entries in its own memory.
pub struct FakeGuest {
    pub mem: Arc<GuestMemory>,
    pub size: u16,
    host: *mut u8,
    /// Next available index the driver will publish.
    pub avail_idx: u16,
    /// Next free descriptor.
    next_desc: u16,
}

impl FakeGuest {
    pub fn new(size: u16) -> FakeGuest {
        let spec = RegionSpec {
            gpa: GPA,
            len: MEM,
            uva: UVA,
            mmap_offset: 0,
        };
        let mem = GuestMemory::map(&[spec], vec![crate::memory::tests::memfd(MEM)]).expect("map");
        let host = mem.gpa(GPA, 1).expect("host");
        FakeGuest {
            mem: Arc::new(mem),
            size,
            host,
            avail_idx: 0,
            next_desc: 0,
        }
    }

    pub fn layout(&self) -> RingLayout {
        RingLayout::translate(
            &self.mem,
            self.size,
            UVA + DESC_AT,
            UVA + AVAIL_AT,
            UVA + USED_AT,
        )
        .expect("layout")
    }

    fn at(&self, off: u64) -> *mut u8 {
        assert!(off < MEM);
        self.host.wrapping_add(off as usize)
    }

    pub fn write(&self, off: u64, data: &[u8]) {
        assert!(off + data.len() as u64 <= MEM);
        // SAFETY: inside the fake guest's mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.at(off), data.len()) }
    }

    pub fn read(&self, off: u64, len: usize) -> Vec<u8> {
        assert!(off + len as u64 <= MEM);
        let mut v = vec![0u8; len];
        // SAFETY: inside the fake guest's mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(self.at(off), v.as_mut_ptr(), len) }
        v
    }

    fn u16_at(&self, off: u64) -> u16 {
        let b = self.read(off, 2);
        u16::from_le_bytes([b[0], b[1]])
    }

    /// Write descriptor `i` as given (any values: tests make malformed ones).
    pub fn set_desc(&self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.write(DESC_AT + 16 * u64::from(i), &d);
    }

    /// Make `head` available (not yet published).
    pub fn push_avail(&mut self, head: u16) {
        let slot = u64::from(self.avail_idx % self.size);
        self.write(AVAIL_AT + 4 + 2 * slot, &head.to_le_bytes());
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Publish the available index (any value: tests make it jump).
    pub fn publish_avail(&self, idx: u16) {
        self.write(AVAIL_AT + 2, &idx.to_le_bytes());
    }

    pub fn set_avail_flags(&self, flags: u16) {
        self.write(AVAIL_AT, &flags.to_le_bytes());
    }

    /// `used_event` (after the available ring).
    pub fn set_used_event(&self, v: u16) {
        self.write(AVAIL_AT + 4 + 2 * u64::from(self.size), &v.to_le_bytes());
    }

    pub fn used_idx(&self) -> u16 {
        self.u16_at(USED_AT + 2)
    }

    pub fn used_flags(&self) -> u16 {
        self.u16_at(USED_AT)
    }

    /// Used element `i`: (id, len).
    pub fn used(&self, i: u16) -> (u32, u32) {
        let b = self.read(USED_AT + 4 + 8 * u64::from(i % self.size), 8);
        (
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        )
    }

    /// A chain of buffers of the given lengths (each in its own data area), readable or
    /// device-writable, with `data` written across the readable ones; made available and
    /// published. Returns the head.
    pub fn add_chain(&mut self, lens: &[u32], writable: bool, data: &[u8]) -> u16 {
        let head = self.next_desc;
        let mut written = 0usize;
        for (k, &len) in lens.iter().enumerate() {
            let i = self.next_desc;
            self.next_desc = (self.next_desc + 1) % self.size;
            let addr = Self::buffer_gpa(i);
            let last = k + 1 == lens.len();
            let flags = u16::from(!last) | if writable { 2 } else { 0 };
            self.set_desc(i, addr, len, flags, (i + 1) % self.size);
            if !writable {
                let n = (len as usize).min(data.len() - written);
                self.write(addr - GPA, &data[written..written + n]);
                written += n;
            }
        }
        self.push_avail(head);
        self.publish_avail(self.avail_idx);
        head
    }

    /// The guest physical address of descriptor `i`'s data area (4 KiB each).
    pub fn buffer_gpa(i: u16) -> u64 {
        GPA + DATA_AT + 4096 * u64::from(i % 200)
    }

    /// Read `len` bytes of descriptor `i`'s data area.
    pub fn buffer(&self, i: u16, len: usize) -> Vec<u8> {
        self.read(Self::buffer_gpa(i) - GPA, len)
    }
}

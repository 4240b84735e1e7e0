//! Tests only (this crate's, and other crates' with the `fake-guest` feature): the driver
//! side of one split ring (`FakeGuest`) or packed ring (`PackedGuest`) in a memfd, as a guest
//! would lay it out, so the device code can be fed well-formed and malformed rings byte by
//! byte. It panics on any failure.

use crate::memory::{GuestMemory, RegionSpec};
use crate::ring::RingLayout;
use std::sync::Arc;

/// Guest physical address where the fake guest's memory starts.
pub const GPA: u64 = 0x10_0000;
/// The frontend's virtual address of the same memory.
pub const UVA: u64 = 0x7f00_0000_0000;
/// Bytes of fake guest memory.
pub const MEM: u64 = 4 << 20;
/// Offsets of a ring's parts from its start (rings of at most 256 entries).
const DESC_AT: u64 = 0;
const AVAIL_AT: u64 = 0x1000;
const USED_AT: u64 = 0x2000;
/// Each ring's area (its parts) and data area (200 buffers of 4 KiB).
const RING_AREA: u64 = 0x4000;
const DATA_AREA: u64 = 200 * 4096;
/// Data areas start here.
const DATA_AT: u64 = 0x10000;

/// A memfd of `len` bytes filled with zeroes.
pub fn memfd(len: u64) -> std::fs::File {
    use std::io::Write;
    let name = c"vecplane-vhost-test";
    // SAFETY: a plain syscall with a valid C string; the fd is owned by the File below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    f.set_len(len).expect("set_len");
    f.flush().expect("flush");
    f
}

/// One ring of `size` entries in its own memory.
pub struct FakeGuest {
    pub mem: Arc<GuestMemory>,
    /// The memory's file (for a frontend to send).
    pub file: Arc<std::fs::File>,
    pub size: u16,
    host: *mut u8,
    /// Which ring of the memory this is (0, 1, ...).
    ring: u64,
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
        let file = memfd(MEM);
        let dup = file.try_clone().expect("dup");
        let mem = GuestMemory::map(&[spec], vec![dup]).expect("map");
        let host = mem.gpa(GPA, 1).expect("host");
        FakeGuest {
            mem: Arc::new(mem),
            file: Arc::new(file),
            size,
            host,
            ring: 0,
            avail_idx: 0,
            next_desc: 0,
        }
    }

    /// Another ring in the same memory (ring number `ring`, 1..=3).
    pub fn another(&self, ring: u64, size: u16) -> FakeGuest {
        assert!((1..4).contains(&ring));
        FakeGuest {
            mem: self.mem.clone(),
            file: self.file.clone(),
            size,
            host: self.host,
            ring,
            avail_idx: 0,
            next_desc: 0,
        }
    }

    /// The frontend's addresses of this ring's descriptor table, available and used rings.
    pub fn ring_uvas(&self) -> (u64, u64, u64) {
        let base = UVA + self.ring * RING_AREA;
        (base + DESC_AT, base + AVAIL_AT, base + USED_AT)
    }

    pub fn layout(&self) -> RingLayout {
        let (d, a, u) = self.ring_uvas();
        RingLayout::translate(&self.mem, self.size, d, a, u).expect("layout")
    }

    /// Publish this memory to the worker with this ring as queue `q` (None: no queue runs),
    /// start number `start` from base 0, split rings, `offloads` negotiated both ways.
    pub fn publish_as(
        &self,
        shared: &crate::device::Shared,
        q: Option<usize>,
        start: u64,
        mrg_rxbuf: bool,
        offloads: crate::net_header::Offloads,
    ) -> u64 {
        use crate::device::{DeviceSnapshot, QueueSetup, MAX_QUEUES};
        let mut queues: [Option<QueueSetup>; MAX_QUEUES] = Default::default();
        if let Some(slot) = q.and_then(|q| queues.get_mut(q)) {
            *slot = Some(QueueSetup {
                layout: self.layout(),
                base: 0,
                call: None,
                start,
            });
        }
        shared.publish(DeviceSnapshot {
            memory: self.mem.clone(),
            queues,
            hdr_len: 12,
            mrg_rxbuf,
            event_idx: false,
            packed: false,
            sends: offloads,
            takes: offloads,
            rx_workers: [0; crate::device::MAX_QUEUE_PAIRS],
        })
    }

    /// Offset in memory of a part of this ring.
    fn part(&self, at: u64) -> u64 {
        self.ring * RING_AREA + at
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
        self.write(self.part(DESC_AT) + 16 * u64::from(i), &d);
    }

    /// Make `head` available (not yet published).
    pub fn push_avail(&mut self, head: u16) {
        let slot = u64::from(self.avail_idx % self.size);
        self.write(self.part(AVAIL_AT) + 4 + 2 * slot, &head.to_le_bytes());
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Publish the available index (any value: tests make it jump).
    pub fn publish_avail(&self, idx: u16) {
        self.write(self.part(AVAIL_AT) + 2, &idx.to_le_bytes());
    }

    pub fn set_avail_flags(&self, flags: u16) {
        self.write(self.part(AVAIL_AT), &flags.to_le_bytes());
    }

    /// `used_event` (after the available ring).
    pub fn set_used_event(&self, v: u16) {
        self.write(
            self.part(AVAIL_AT) + 4 + 2 * u64::from(self.size),
            &v.to_le_bytes(),
        );
    }

    pub fn used_idx(&self) -> u16 {
        self.u16_at(self.part(USED_AT) + 2)
    }

    pub fn used_flags(&self) -> u16 {
        self.u16_at(self.part(USED_AT))
    }

    /// Used element `i`: (id, len).
    pub fn used(&self, i: u16) -> (u32, u32) {
        let b = self.read(self.part(USED_AT) + 4 + 8 * u64::from(i % self.size), 8);
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
            let addr = self.buffer_gpa(i);
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
    pub fn buffer_gpa(&self, i: u16) -> u64 {
        GPA + DATA_AT + self.ring * DATA_AREA + 4096 * u64::from(i % 200)
    }

    /// Read `len` bytes of descriptor `i`'s data area.
    pub fn buffer(&self, i: u16, len: usize) -> Vec<u8> {
        self.read(self.buffer_gpa(i) - GPA, len)
    }
}

/// The driver side of a packed ring in a `FakeGuest`'s memory: descriptors where the split
/// ring's table is, the driver's event suppression structure where its available ring is, the
/// device's where its used ring is. It keeps the driver's wrap counters and which chain
/// length each buffer id has, as a driver does.
pub struct PackedGuest {
    pub g: FakeGuest,
    /// Next slot to make available, and the driver's wrap counter there.
    pub next: u16,
    pub wrap: bool,
    /// Next slot the device will write as used, and the wrap counter it will carry.
    used_at: u16,
    used_wrap: bool,
    /// Descriptors per buffer id in flight.
    counts: Vec<u16>,
    next_id: u16,
}

/// Packed descriptor flags.
pub const P_NEXT: u16 = 1;
pub const P_WRITE: u16 = 2;
pub const P_AVAIL: u16 = 1 << 7;
pub const P_USED: u16 = 1 << 15;

impl PackedGuest {
    pub fn new(size: u16) -> PackedGuest {
        PackedGuest::on(FakeGuest::new(size))
    }

    pub fn on(g: FakeGuest) -> PackedGuest {
        let size = g.size;
        PackedGuest {
            g,
            next: 0,
            wrap: true,
            used_at: 0,
            used_wrap: true,
            counts: vec![0; usize::from(size)],
            next_id: 0,
        }
    }

    pub fn layout(&self) -> RingLayout {
        let (d, a, u) = self.g.ring_uvas();
        crate::packed_ring::translate(&self.g.mem, self.g.size, d, a, u).expect("layout")
    }

    /// The flags that mark a descriptor available on lap `wrap`.
    pub fn avail_flags(wrap: bool) -> u16 {
        if wrap {
            P_AVAIL
        } else {
            P_USED
        }
    }

    /// Write descriptor `slot` as given (any values: tests make malformed ones).
    pub fn set_desc(&self, slot: u16, addr: u64, len: u32, id: u16, flags: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&id.to_le_bytes());
        d[14..16].copy_from_slice(&flags.to_le_bytes());
        self.g
            .write(self.g.part(DESC_AT) + 16 * u64::from(slot), &d);
    }

    /// Descriptor `slot`: (addr, len, id, flags).
    pub fn desc(&self, slot: u16) -> (u64, u32, u16, u16) {
        let b = self.g.read(self.g.part(DESC_AT) + 16 * u64::from(slot), 16);
        let w = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[0..8]);
        (
            u64::from_le_bytes(a),
            u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            w(12),
            w(14),
        )
    }

    /// A chain of buffers of the given lengths, readable or device-writable, with `data`
    /// written across the readable ones; the head's flags written last. Returns its id.
    pub fn add_chain(&mut self, lens: &[u32], writable: bool, data: &[u8]) -> u16 {
        let id = self.next_id;
        self.next_id = (self.next_id + 1) % self.g.size;
        let (head, head_wrap) = (self.next, self.wrap);
        let mut head_flags = 0;
        let mut written = 0usize;
        for (k, &len) in lens.iter().enumerate() {
            let slot = self.next;
            let addr = self.g.buffer_gpa(slot);
            let last = k + 1 == lens.len();
            let flags = Self::avail_flags(self.wrap)
                | if last { 0 } else { P_NEXT }
                | if writable { P_WRITE } else { 0 };
            if !writable {
                let n = (len as usize).min(data.len() - written);
                self.g.write(addr - GPA, &data[written..written + n]);
                written += n;
            }
            if slot == head {
                head_flags = flags;
                // Not available yet: marked used on the lap before.
                let before = if head_wrap { 0 } else { P_AVAIL | P_USED };
                self.set_desc(slot, addr, len, id, (flags & !(P_AVAIL | P_USED)) | before);
            } else {
                self.set_desc(slot, addr, len, id, flags);
            }
            self.next += 1;
            if self.next == self.g.size {
                self.next = 0;
                self.wrap = !self.wrap;
            }
        }
        self.counts[usize::from(id)] = lens.len() as u16;
        let (addr, len) = (self.g.buffer_gpa(head), lens[0]);
        self.set_desc(head, addr, len, id, head_flags);
        id
    }

    /// The next used descriptor if the device published one: (id, len, flags).
    pub fn take_used(&mut self) -> Option<(u16, u32, u16)> {
        let (_, len, id, flags) = self.desc(self.used_at);
        let used =
            (flags & P_AVAIL != 0) == self.used_wrap && (flags & P_USED != 0) == self.used_wrap;
        if !used {
            return None;
        }
        let n = self
            .counts
            .get(usize::from(id))
            .copied()
            .unwrap_or(1)
            .max(1);
        for _ in 0..n {
            self.used_at += 1;
            if self.used_at == self.g.size {
                self.used_at = 0;
                self.used_wrap = !self.used_wrap;
            }
        }
        Some((id, len, flags))
    }

    /// The driver's event suppression structure.
    pub fn set_driver_event(&self, off_wrap: u16, flags: u16) {
        let at = self.g.part(AVAIL_AT);
        self.g.write(at, &off_wrap.to_le_bytes());
        self.g.write(at + 2, &flags.to_le_bytes());
    }

    /// The device's event suppression structure: (off_wrap, flags).
    pub fn device_event(&self) -> (u16, u16) {
        let at = self.g.part(USED_AT);
        (self.g.u16_at(at), self.g.u16_at(at + 2))
    }
}

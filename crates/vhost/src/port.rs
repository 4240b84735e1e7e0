//! A vhost-user port's two nodes on the worker that owns it: `VhostRx` (an input node) copies
//! the frames the guest transmits out of its memory into pool buffers; `VhostTx` copies packets
//! into the receive buffers the guest posted (merging buffers when negotiated) and frees them.
//! The copy between guest memory and the pool is the only copy; a poll makes no system call
//! unless the guest asked for an interrupt (one eventfd write per batch at most).
//!
//! Each node checks the device's generation before it touches a ring and picks up the new
//! snapshot when it moved; the receive node then acknowledges it for both (see `device`).
//! A malformed ring stops the queue at once and is reported to the control thread, which
//! resets the connection. These nodes never allocate, lock or block on the fast path, and
//! never read or write outside the guest's memory (every buffer is translated and bounded).

use crate::backend::VhostUserDevice;
use crate::device::{notify, DeviceSnapshot, QueueSetup, Shared, GUEST_RX, GUEST_TX};
use crate::ring::{Direction, RingError, Segment, SplitRing, MAX_SEGMENTS};
use graph::{Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::{BufferPool, VECTOR_SIZE};
use std::fs::File;
use std::sync::Arc;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "vhost-user";

/// Shortest frame accepted from a guest: an Ethernet header.
const ETH_HLEN: usize = 14;
/// virtio-net header flag: the checksum must still be computed (not negotiated).
const HDR_F_NEEDS_CSUM: u8 = 1;
/// Most receive chains one frame may be merged over.
const MAX_MERGED: usize = 16;

/// One queue as a node runs it.
struct RunningQueue {
    start: u64,
    ring: SplitRing,
    call: Option<Arc<File>>,
}

/// What each node keeps of the device: the snapshot it runs and its queue.
struct View {
    q: usize,
    generation: u64,
    snap: Arc<DeviceSnapshot>,
    running: Option<RunningQueue>,
}

impl View {
    fn new(q: usize) -> View {
        View {
            q,
            generation: 0,
            snap: Arc::new(DeviceSnapshot::idle()),
            running: None,
        }
    }

    /// Pick up generation changes; true when it changed.
    #[inline]
    fn refresh(&mut self, shared: &Shared) -> bool {
        if shared.generation() == self.generation {
            return false;
        }
        self.reload(shared);
        true
    }

    #[cold]
    fn reload(&mut self, shared: &Shared) {
        let (g, snap) = shared.snapshot();
        let dir = if self.q == GUEST_TX {
            Direction::Read
        } else {
            Direction::Write
        };
        self.running = match (&snap.queues[self.q], self.running.take()) {
            (None, _) => None,
            (Some(setup), Some(mut run)) if run.start == setup.start => {
                run.ring.relocate(setup.layout);
                run.call = setup.call.clone();
                Some(run)
            }
            (Some(setup), _) => Some(start(setup, snap.event_idx, dir)),
        };
        self.generation = g;
        self.snap = snap;
    }

    /// Stop the queue after a malformed ring and report it.
    #[cold]
    fn fail(&mut self, shared: &Shared, e: RingError) {
        let which = if self.q == GUEST_TX {
            "transmit"
        } else {
            "receive"
        };
        shared.ring_error(format!("guest {which} queue: {e}"));
        self.running = None;
    }
}

fn start(setup: &QueueSetup, event_idx: bool, dir: Direction) -> RunningQueue {
    RunningQueue {
        start: setup.start,
        ring: SplitRing::new(setup.layout, setup.base, event_idx, dir),
        call: setup.call.clone(),
    }
}

/// Copy `n` bytes from `src` to `dst`: frames of up to 256 bytes in 16-byte moves (the last
/// one overlapping), inline, instead of a call to `memcpy` per header and per small frame.
///
/// # Safety
/// `src[..n]` must be readable, `dst[..n]` writable, and the two must not overlap.
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    if (16..=256).contains(&n) {
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: `i + 16 <= n`: inside both ranges (the caller's contract).
            unsafe {
                let v = std::ptr::read_unaligned(src.add(i) as *const [u8; 16]);
                std::ptr::write_unaligned(dst.add(i) as *mut [u8; 16], v);
            }
            i += 16;
        }
        if i < n {
            // SAFETY: `n >= 16`, so `n - 16 ..n` is inside both ranges.
            unsafe {
                let v = std::ptr::read_unaligned(src.add(n - 16) as *const [u8; 16]);
                std::ptr::write_unaligned(dst.add(n - 16) as *mut [u8; 16], v);
            }
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }
}

/// Walk the chain's segments from byte `offset` on, `want` bytes at most, calling
/// `f(segment pointer at that byte, bytes done so far, bytes in this segment)`; returns the
/// bytes walked (less than `want` when the chain is shorter).
#[inline(always)]
fn walk(
    segs: &[Segment],
    mut offset: usize,
    want: usize,
    mut f: impl FnMut(*mut u8, usize, usize),
) -> usize {
    let mut at = 0;
    for s in segs {
        let len = s.len as usize;
        if offset >= len {
            offset -= len;
            continue;
        }
        let n = (len - offset).min(want - at);
        // `s.ptr[offset..offset + n]` is inside the segment, which `SplitRing` translated and
        // bounded inside guest memory.
        f(s.ptr.wrapping_add(offset), at, n);
        at += n;
        offset = 0;
        if at == want {
            break;
        }
    }
    at
}

/// Copy from the chain's segments, skipping `skip` bytes, into `dst`; returns bytes copied.
#[inline]
fn gather(segs: &[Segment], skip: usize, dst: &mut [u8]) -> usize {
    let out = dst.as_mut_ptr();
    walk(segs, skip, dst.len(), |p, at, n| {
        // SAFETY: `p[..n]` is inside a translated guest segment (`walk`); `at + n` is at most
        // `dst.len()`.
        unsafe { copy_bytes(p, out.add(at), n) }
    })
}

/// Copy `src` into the segments from byte `offset` on; returns bytes copied.
#[inline]
fn scatter(segs: &[Segment], offset: usize, src: &[u8]) -> usize {
    walk(segs, offset, src.len(), |p, at, n| {
        // SAFETY: as in `gather`, the other way: the segment is device-writable guest memory.
        unsafe { copy_bytes(src.as_ptr().add(at), p, n) }
    })
}

/// Input node: frames the guest transmits.
pub struct VhostRx {
    name: String,
    port_id: u16,
    next: String,
    /// Keeps the control thread and socket alive as long as the graph.
    _device: Option<Arc<VhostUserDevice>>,
    shared: Arc<Shared>,
    stats: Arc<PortStats>,
    view: View,
    segs: Box<[Segment; MAX_SEGMENTS]>,
    heads: Box<[u16; VECTOR_SIZE]>,
}

impl VhostRx {
    /// The receive node of port `port_id`, handing frames to `next`.
    pub fn new(
        name: String,
        port_id: u16,
        next: String,
        device: Arc<VhostUserDevice>,
        stats: Arc<PortStats>,
    ) -> VhostRx {
        let shared = device.shared().clone();
        VhostRx::on(name, port_id, next, shared, Some(device), stats)
    }

    /// The same on a bare `Shared` (tests drive the device side themselves).
    pub fn on(
        name: String,
        port_id: u16,
        next: String,
        shared: Arc<Shared>,
        device: Option<Arc<VhostUserDevice>>,
        stats: Arc<PortStats>,
    ) -> VhostRx {
        VhostRx {
            name,
            port_id,
            next,
            shared,
            _device: device,
            stats,
            view: View::new(GUEST_TX),
            segs: Box::new(
                [Segment {
                    ptr: std::ptr::null_mut(),
                    len: 0,
                }; MAX_SEGMENTS],
            ),
            heads: Box::new([0; VECTOR_SIZE]),
        }
    }
}

impl InputNode for VhostRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        if self.view.refresh(&self.shared) {
            // Both nodes of this port run on this thread and check the generation before
            // touching a ring: from here on neither uses an older snapshot.
            self.shared.acknowledge(self.view.generation);
        }
        let View { snap, running, .. } = &mut self.view;
        let Some(run) = running.as_mut() else {
            return (0, Dispatch::AllTo(0));
        };
        let avail = match run.ring.available() {
            Ok(0) => return (0, Dispatch::AllTo(0)),
            Ok(n) => usize::from(n),
            Err(e) => {
                self.view.fail(&self.shared, e);
                return (0, Dispatch::AllTo(0));
            }
        };
        let hdr_len = snap.hdr_len;
        let data_size = cx.pool.data_size();
        let (mut n, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        let mut error = None;
        let want = out.len().min(avail).min(VECTOR_SIZE);
        let taken = run.ring.take_heads(&mut self.heads[..want]);
        let mut i = 0;
        while i < taken {
            let Some(b) = cx.pool.alloc() else { break };
            let head = self.heads[i];
            i += 1;
            let found = match run.ring.single(&snap.memory, head) {
                Ok(Some(seg)) => {
                    self.segs[0] = seg;
                    Ok((1, u64::from(seg.len)))
                }
                Ok(None) => run.ring.chain(&snap.memory, head, &mut self.segs),
                Err(e) => Err(e),
            };
            let (nseg, total) = match found {
                Ok(c) => c,
                Err(e) => {
                    cx.pool.free(b);
                    error = Some(e);
                    break;
                }
            };
            let segs = &self.segs[..nseg];
            run.ring.push_used(head, 0);
            let frame = (total as usize).saturating_sub(hdr_len);
            // A chain of zero-length buffers has no segment at all (and no frame).
            let hdr = match segs.first() {
                Some(s) if s.len >= 2 => {
                    // SAFETY: the first segment holds at least two bytes (checked just above).
                    unsafe { std::ptr::read_unaligned(s.ptr as *const [u8; 2]) }
                }
                _ => {
                    let mut h = [0u8; 2];
                    gather(segs, 0, &mut h);
                    h
                }
            };
            if frame < ETH_HLEN || frame > data_size {
                bad += 1;
                cx.pool.free(b);
                continue;
            }
            if hdr[0] & HDR_F_NEEDS_CSUM != 0 || hdr[1] != 0 {
                // Checksum and segmentation offloads were not negotiated.
                bad += 1;
                cx.pool.free(b);
                continue;
            }
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize;
            let Some(dst) = slot.get_mut(start..start + frame) else {
                bad += 1;
                cx.pool.free(b);
                continue;
            };
            gather(segs, hdr_len, dst);
            meta.length = frame as u16;
            meta.rx_port = self.port_id;
            out[n] = b;
            n += 1;
            bytes += frame as u64;
        }
        if error.is_none() && i < taken {
            // Out of buffers: the heads not read stay available for the next poll.
            run.ring.rewind((taken - i) as u16);
        }
        self.shared
            .set_progress(GUEST_TX, run.start, run.ring.last_avail());
        if run.ring.publish() {
            if let Some(call) = &run.call {
                if notify(call) {
                    self.shared.counters.notifications.add(1);
                }
            }
        }
        if n > 0 {
            self.stats.rx_packets.add(n as u64);
            self.stats.rx_bytes.add(bytes);
        }
        if bad > 0 {
            self.stats.rx_drops.add(bad);
            self.shared.counters.rx_bad_frames.add(bad);
        }
        if let Some(e) = error {
            self.view.fail(&self.shared, e);
        }
        (n, Dispatch::AllTo(0))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("vhost-user rx: port {}, {} bytes", m.rx_port, m.length)
    }
}

/// Transmit node: packets into the guest's receive buffers.
pub struct VhostTx {
    name: String,
    _device: Option<Arc<VhostUserDevice>>,
    shared: Arc<Shared>,
    stats: Arc<PortStats>,
    view: View,
    segs: Box<[Segment; MAX_SEGMENTS]>,
    heads: Box<[u16; VECTOR_SIZE]>,
    /// The fast path's buffer per packet.
    bufs: Box<[Segment; VECTOR_SIZE]>,
}

impl VhostTx {
    /// The transmit node of a port.
    pub fn new(name: String, device: Arc<VhostUserDevice>, stats: Arc<PortStats>) -> VhostTx {
        let shared = device.shared().clone();
        VhostTx::on(name, shared, Some(device), stats)
    }

    /// The same on a bare `Shared` (tests drive the device side themselves).
    pub fn on(
        name: String,
        shared: Arc<Shared>,
        device: Option<Arc<VhostUserDevice>>,
        stats: Arc<PortStats>,
    ) -> VhostTx {
        VhostTx {
            name,
            shared,
            _device: device,
            stats,
            view: View::new(GUEST_RX),
            segs: Box::new(
                [Segment {
                    ptr: std::ptr::null_mut(),
                    len: 0,
                }; MAX_SEGMENTS],
            ),
            heads: Box::new([0; VECTOR_SIZE]),
            bufs: Box::new(
                [Segment {
                    ptr: std::ptr::null_mut(),
                    len: 0,
                }; VECTOR_SIZE],
            ),
        }
    }
}

/// What putting one packet into the guest's buffers came to.
enum Put {
    /// Delivered.
    Sent,
    /// The guest posted too little room; nothing was consumed.
    NoRoom,
    /// The ring is malformed.
    Broken(RingError),
}

/// Put `data` (with a virtio-net header before it) into the receive chains of `run`.
#[inline]
fn put(
    run: &mut RunningQueue,
    snap: &DeviceSnapshot,
    segs: &mut [Segment; MAX_SEGMENTS],
    data: &[u8],
) -> Put {
    let hdr_len = snap.hdr_len;
    let need = hdr_len + data.len();
    let max_chains = if snap.mrg_rxbuf { MAX_MERGED } else { 1 };
    // First find enough chains (taken, not yet returned), then copy: a packet that does not
    // fit gives every chain back untouched.
    let mut heads = [(0u16, 0u32); MAX_MERGED];
    let (mut chains, mut room) = (0usize, 0usize);
    while room < need {
        if chains == max_chains {
            run.ring.rewind(chains as u16);
            return Put::NoRoom;
        }
        match run.ring.available() {
            Ok(0) => {
                run.ring.rewind(chains as u16);
                return Put::NoRoom;
            }
            Ok(_) => {}
            Err(e) => return Put::Broken(e),
        }
        let head = run.ring.next_head();
        let (_, total) = match run.ring.chain(&snap.memory, head, segs) {
            Ok(c) => c,
            Err(e) => return Put::Broken(e),
        };
        let total = total.min(u64::from(u32::MAX)) as u32;
        heads[chains] = (head, total);
        chains += 1;
        room += total as usize;
    }
    // The header: no offload, `num_buffers` = chains (VERSION_1 or MRG_RXBUF: 12 bytes).
    let mut hdr = [0u8; 12];
    hdr[10..12].copy_from_slice(&(chains as u16).to_le_bytes());
    let mut pos = 0usize;
    for (i, &(head, total)) in heads[..chains].iter().enumerate() {
        // The chain was translated above; translating again is cheap and keeps one scratch.
        let nseg = match run.ring.chain(&snap.memory, head, segs) {
            Ok((n, _)) => n,
            Err(e) => return Put::Broken(e),
        };
        let segs = &segs[..nseg];
        let mut written = 0usize;
        if i == 0 {
            written += scatter(segs, 0, &hdr[..hdr_len]);
        }
        let want = (total as usize - written).min(data.len() - pos);
        written += scatter(segs, written, &data[pos..pos + want]);
        pos += want;
        run.ring.push_used(head, written as u32);
    }
    Put::Sent
}

impl Node for VhostTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        self.view.refresh(&self.shared);
        let (mut sent, mut bytes, mut no_room) = (0u64, 0u64, 0u64);
        let mut error = None;
        if let Some(run) = self.view.running.as_mut() {
            let snap = &self.view.snap;
            // Fast path: each packet into the next receive chain when that chain is one
            // buffer holding header and packet (what guests post with merged buffers), the
            // ring slots and descriptors of the whole batch requested first.
            let avail = match run.ring.available() {
                Ok(n) => usize::from(n),
                Err(e) => {
                    error = Some(e);
                    0
                }
            };
            let taken = run
                .ring
                .take_heads(&mut self.heads[..frame.len().min(avail).min(VECTOR_SIZE)]);
            let hdr_len = snap.hdr_len;
            let mut hdr = [0u8; 12];
            hdr[10] = 1; // num_buffers = 1 (VERSION_1 or MRG_RXBUF headers have it)
                         // Pass 1: the buffers, each asked for (the guest touched them last).
            let mut fast = 0;
            while fast < taken {
                let len = cx.pool.meta(frame[fast]).length as usize;
                match run.ring.single(&snap.memory, self.heads[fast]) {
                    Ok(Some(seg)) if seg.len as usize >= hdr_len + len => {
                        packet::prefetch(seg.ptr);
                        self.bufs[fast] = seg;
                    }
                    Ok(_) => break,
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
                fast += 1;
            }
            // Pass 2: header and packet into each.
            let batch = frame.iter().zip(self.heads.iter().zip(self.bufs.iter()));
            for (&b, (&head, &seg)) in batch.take(fast) {
                let (meta, slot) = cx.pool.slot_mut(b);
                let (start, len) = (meta.data_offset as usize, meta.length as usize);
                let Some(data) = slot.get(start..start + len) else {
                    // Cannot happen (the pool keeps lengths inside slots); the chain goes
                    // back empty rather than half written.
                    run.ring.push_used(head, 0);
                    continue;
                };
                // SAFETY: the segment is device-writable guest memory of at least
                // `hdr_len + len` bytes (checked in pass 1); `hdr` and `data` are ours.
                unsafe {
                    copy_bytes(hdr.as_ptr(), seg.ptr, hdr_len);
                    copy_bytes(data.as_ptr(), seg.ptr.add(hdr_len), len);
                }
                run.ring.push_used(head, (hdr_len + len) as u32);
                sent += 1;
                bytes += len as u64;
            }
            if error.is_none() && fast < taken {
                // The rest go the general way, from the first chain the fast path left.
                run.ring.rewind((taken - fast) as u16);
            }
            let rest = if error.is_some() {
                &[][..]
            } else {
                &frame[fast..]
            };
            for &b in rest {
                let (meta, slot) = cx.pool.slot_mut(b);
                let (start, len) = (meta.data_offset as usize, meta.length as usize);
                let Some(data) = slot.get(start..start + len) else {
                    no_room += 1;
                    continue;
                };
                match put(run, snap, &mut self.segs, data) {
                    Put::Sent => {
                        sent += 1;
                        bytes += len as u64;
                    }
                    Put::NoRoom => no_room += 1,
                    Put::Broken(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            self.shared
                .set_progress(GUEST_RX, run.start, run.ring.last_avail());
            if run.ring.publish() {
                if let Some(call) = &run.call {
                    if notify(call) {
                        self.shared.counters.notifications.add(1);
                    }
                }
            }
        }
        cx.pool.free_batch(frame);
        let dropped = frame.len() as u64 - sent;
        if let Some(e) = error {
            self.view.fail(&self.shared, e);
        }
        self.stats.tx_packets.add(sent);
        self.stats.tx_bytes.add(bytes);
        if dropped > 0 {
            self.stats.tx_drops.add(dropped);
            self.shared.counters.tx_no_buffers.add(no_room);
        }
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "vhost-user tx: {} bytes into the guest's receive buffers",
            pool.meta(buffer).length
        )
    }
}

#[cfg(test)]
#[path = "port_tests.rs"]
mod tests;

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
use crate::device::{guest_rx, guest_tx, notify, DeviceSnapshot, QueueSetup, Shared, GUEST_TX};
use crate::net_header::{read_header, write_header};
use crate::ring::{Direction, RingError, Segment, SplitRing, MAX_SEGMENTS};
use graph::{Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::gso::{self, finish_checksum, GsoError, GsoKind};
use packet::meta::BufferMeta;
use packet::pool::JUMBO_DATA_SIZE;
use packet::{BufferPool, VECTOR_SIZE};
use std::fs::File;
use std::sync::Arc;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "vhost-user";

/// Shortest frame accepted from a guest: an Ethernet header.
const ETH_HLEN: usize = 14;
/// Most receive chains one frame may be merged over (a 64 KiB super-packet over the guest's
/// page-sized buffers takes 17; over MTU-sized ones, 44).
const MAX_MERGED: usize = 64;

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
        let dir = if self.q % 2 == GUEST_TX {
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
        let which = if self.q % 2 == GUEST_TX {
            "transmit"
        } else {
            "receive"
        };
        shared.ring_error(format!("guest {which} queue {}: {e}", self.q / 2));
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
    /// This node's slot among the port's acknowledging nodes.
    acker: Option<usize>,
    segs: Box<[Segment; MAX_SEGMENTS]>,
    heads: Box<[u16; VECTOR_SIZE]>,
}

impl VhostRx {
    /// Receive from the transmit queue of queue pair `pair` (default: pair 0).
    pub fn on_pair(mut self, pair: usize) -> VhostRx {
        self.view = View::new(guest_tx(pair));
        self
    }

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
            acker: shared.register_acker(),
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
            if let Some(slot) = self.acker {
                self.shared.acknowledge(slot, self.view.generation);
            }
        }
        let View {
            snap, running, q, ..
        } = &mut self.view;
        let q = *q;
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
        let sends = snap.sends;
        let data_size = cx.pool.data_size();
        let (mut n, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        let (mut bad_headers, mut no_jumbo, mut supers) = (0u64, 0u64, 0u64);
        let mut error = None;
        let want = out.len().min(avail).min(VECTOR_SIZE);
        let taken = run.ring.take_heads(&mut self.heads[..want]);
        let mut i = 0;
        while i < taken {
            let Some(mut b) = cx.pool.alloc() else { break };
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
            let frame = (total as usize).saturating_sub(hdr_len);
            if frame > data_size && frame <= JUMBO_DATA_SIZE as usize {
                cx.pool.free(b);
                match cx.pool.alloc_jumbo() {
                    Some(j) => b = j,
                    None if cx.pool.jumbo_capacity() > 0 => {
                        // All in flight: this chain and the rest wait for the next poll.
                        i -= 1;
                        break;
                    }
                    None => {
                        run.ring.push_used(head, 0);
                        no_jumbo += 1;
                        continue;
                    }
                }
            }
            run.ring.push_used(head, 0);
            // A chain of zero-length buffers has no segment at all (and no frame).
            let hdr = match segs.first() {
                Some(s) if s.len >= 10 => {
                    // SAFETY: the first segment holds at least ten bytes (checked just above).
                    unsafe { std::ptr::read_unaligned(s.ptr as *const [u8; 10]) }
                }
                _ => {
                    let mut h = [0u8; 10];
                    gather(segs, 0, &mut h);
                    h
                }
            };
            if !(ETH_HLEN..=JUMBO_DATA_SIZE as usize).contains(&frame) {
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
            // The header is checked against the frame it describes (a TCP header where a
            // super-packet says it is).
            if read_header(&hdr, dst, sends, meta).is_err() {
                bad_headers += 1;
                cx.pool.free(b);
                continue;
            }
            supers += u64::from(meta.is_gso());
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
            .set_progress(q, run.start, run.ring.last_avail());
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
        if bad + bad_headers + no_jumbo > 0 {
            let c = &self.shared.counters;
            self.stats.rx_drops.add(bad + bad_headers + no_jumbo);
            c.rx_bad_frames.add(bad);
            c.rx_bad_headers.add(bad_headers);
            c.rx_no_jumbo_buffers.add(no_jumbo);
        }
        if supers > 0 {
            self.shared.counters.rx_super_packets.add(supers);
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

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.shared.kicks.get(self.view.q / 2)?.wait_fd()
    }

    /// Ask the guest to kick for its next frame; no sleep when one is already there.
    fn before_sleep(&self) -> bool {
        self.view
            .running
            .as_ref()
            .is_none_or(|run| !run.ring.arm_kick())
    }

    fn after_sleep(&self) {
        if let Some(run) = &self.view.running {
            run.ring.disarm_kick();
        }
        if let Some(k) = self.shared.kicks.get(self.view.q / 2) {
            k.drain();
        }
    }
}

/// Transmit node: packets into the guest's receive buffers.
pub struct VhostTx {
    name: String,
    _device: Option<Arc<VhostUserDevice>>,
    shared: Arc<Shared>,
    stats: Arc<PortStats>,
    /// The receive queues of the pairs this node may fill, in order of preference.
    views: Vec<View>,
    segs: Box<[Segment; MAX_SEGMENTS]>,
    heads: Box<[u16; VECTOR_SIZE]>,
    /// The fast path's buffer per packet.
    bufs: Box<[Segment; VECTOR_SIZE]>,
}

impl VhostTx {
    /// Fill the receive queues of queue pairs `pairs` (the first running one; default: pair
    /// 0). An empty list keeps pair 0.
    pub fn on_pairs(mut self, pairs: &[usize]) -> VhostTx {
        if !pairs.is_empty() {
            self.views = pairs.iter().map(|&p| View::new(guest_rx(p))).collect();
        }
        self
    }

    /// Pick up configuration changes; true when one of its queues runs (the guest enabled
    /// it), i.e. when `process` can deliver. Cold callers (a wrapper deciding per vector).
    pub fn can_send(&mut self) -> bool {
        let shared = &self.shared;
        self.views.iter_mut().fold(false, |any, v| {
            v.refresh(shared);
            any | v.running.is_some()
        })
    }

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
            views: vec![View::new(guest_rx(0))],
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

/// Put the frame `parts[0]` then `parts[1]`, after the virtio-net header `vhdr` (its
/// `num_buffers` filled in here), into the receive chains of `run`.
#[inline]
fn put(
    run: &mut RunningQueue,
    snap: &DeviceSnapshot,
    segs: &mut [Segment; MAX_SEGMENTS],
    vhdr: &[u8; 12],
    parts: [&[u8]; 2],
) -> Put {
    let hdr_len = snap.hdr_len;
    let len = parts[0].len() + parts[1].len();
    let need = hdr_len + len;
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
    // `num_buffers` = chains (VERSION_1 or MRG_RXBUF: 12-byte headers have it).
    let mut hdr = *vhdr;
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
        let mut want = (total as usize - written).min(len - pos);
        while want > 0 {
            // The part that byte `pos` of the frame is in.
            let (part, at) = if pos < parts[0].len() {
                (parts[0], pos)
            } else {
                (parts[1], pos - parts[0].len())
            };
            let n = want.min(part.len() - at);
            written += scatter(segs, written, &part[at..at + n]);
            pos += n;
            want -= n;
        }
        run.ring.push_used(head, written as u32);
    }
    Put::Sent
}

/// Cut super-packet `data` (metadata `meta`) into segments, each into the guest's receive
/// chains with a plain header. `Put::NoRoom` when any segment found no room (those segments
/// are lost; TCP sends them again); `Err` when the packet cannot be segmented.
fn segment_into(
    run: &mut RunningQueue,
    snap: &DeviceSnapshot,
    segs: &mut [Segment; MAX_SEGMENTS],
    meta: &BufferMeta,
    data: &[u8],
) -> Result<Put, GsoError> {
    let mut plain = [0u8; 12];
    plain[10] = 1;
    let kind = GsoKind::from_gso_type(meta.gso_type).ok_or(GsoError::NotTcp(meta.gso_type))?;
    let mut outcome = Put::Sent;
    gso::segment_tcp(data, kind, meta.gso_size, |hdr, payload| {
        match put(run, snap, segs, &plain, [hdr, payload]) {
            Put::Sent => true,
            Put::NoRoom => {
                outcome = Put::NoRoom;
                true
            }
            broken @ Put::Broken(_) => {
                outcome = broken;
                false
            }
        }
    })?;
    Ok(outcome)
}

impl Node for VhostTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        // The first of its queues that runs (one, unless the port has several queue pairs).
        let mut pick = None;
        for (i, v) in self.views.iter_mut().enumerate() {
            v.refresh(&self.shared);
            if pick.is_none() && v.running.is_some() {
                pick = Some(i);
            }
        }
        let view = &mut self.views[pick.unwrap_or(0)];
        let (mut sent, mut bytes, mut no_room) = (0u64, 0u64, 0u64);
        let (mut supers, mut segmented, mut finished, mut bad_supers) = (0u64, 0u64, 0u64, 0u64);
        let mut error = None;
        if let Some(run) = view.running.as_mut() {
            let snap = &view.snap;
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
            let takes = snap.takes;
            let mut plain = [0u8; 12];
            plain[10] = 1; // num_buffers = 1 (VERSION_1 or MRG_RXBUF headers have it)
                           // Pass 1: the buffers, each asked for (the guest touched them last).
                           // A packet with offloads the guest does not take goes the general way.
            let mut fast = 0;
            while fast < taken {
                let m = cx.pool.meta(frame[fast]);
                if !takes.takes(m) {
                    break;
                }
                let len = m.length as usize;
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
                let hdr = if meta.has_offload() {
                    match write_header(meta, data, 1) {
                        Ok(h) => {
                            supers += u64::from(meta.is_gso());
                            h
                        }
                        Err(_) => {
                            // The chain goes back empty; the packet is dropped and counted.
                            bad_supers += 1;
                            run.ring.push_used(head, 0);
                            continue;
                        }
                    }
                } else {
                    plain
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
                let Some(data) = slot.get_mut(start..start + len) else {
                    no_room += 1;
                    continue;
                };
                let put = if takes.takes(meta) {
                    let Ok(h) = write_header(meta, data, 0) else {
                        bad_supers += 1;
                        continue;
                    };
                    supers += u64::from(meta.is_gso());
                    put(run, snap, &mut self.segs, &h, [data, &[]])
                } else if meta.is_gso() {
                    segmented += 1;
                    match segment_into(run, snap, &mut self.segs, meta, data) {
                        Ok(put) => put,
                        Err(_) => {
                            bad_supers += 1;
                            continue;
                        }
                    }
                } else {
                    // A partial checksum the guest cannot take: finished here.
                    let at = usize::from(meta.csum_start.wrapping_sub(meta.data_offset));
                    if finish_checksum(data, at, usize::from(meta.csum_offset)).is_err() {
                        bad_supers += 1;
                        continue;
                    }
                    meta.clear_offload();
                    finished += 1;
                    put(run, snap, &mut self.segs, &plain, [data, &[]])
                };
                match put {
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
                .set_progress(view.q, run.start, run.ring.last_avail());
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
            view.fail(&self.shared, e);
        }
        self.stats.tx_packets.add(sent);
        self.stats.tx_bytes.add(bytes);
        if dropped > 0 {
            self.stats.tx_drops.add(dropped);
            self.shared.counters.tx_no_buffers.add(no_room);
            self.shared.counters.tx_bad_super_packets.add(bad_supers);
        }
        if supers + segmented + finished > 0 {
            let c = &self.shared.counters;
            c.tx_super_packets.add(supers);
            c.tx_segmented.add(segmented);
            c.tx_checksums_finished.add(finished);
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

#[cfg(test)]
#[path = "port_offload_tests.rs"]
mod offload_tests;

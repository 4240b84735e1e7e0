//! A vhost-user port's nodes on a worker that runs some of its queue pairs: `VhostRx` (an input
//! node, one per pair; here) copies the frames the guest transmits out of its memory into pool
//! buffers (a super-packet into a jumbo buffer, its virtio-net header into the metadata);
//! `VhostTx` (in `port_tx`) copies packets into the receive buffers the guest posted on the
//! first of its pairs the guest enabled (merging buffers when negotiated; a super-packet whole
//! to a guest that took TSO, else cut into segments straight into its buffers) and frees them.
//! The copy between
//! guest memory and the pool is the only copy; a poll makes no system call unless the guest
//! asked for an interrupt (one eventfd write per batch at most).
//!
//! Each node checks the device's generation before it touches a ring and picks up the new
//! snapshot when it moved; each receive node then acknowledges it for its worker (see
//! `device`). A malformed ring stops the queue at once and is reported to the control thread,
//! which resets the connection. These nodes never allocate, lock or block on the fast path, and
//! never read or write outside the guest's memory (every buffer is translated and bounded).
//! Before an adaptive worker sleeps, the receive node asks the guest for a kick.
//!
//! Both nodes run split and packed rings alike: they match on the queue's `Ring` once per poll
//! and run a body generic over `Virtqueue`.

use crate::backend::VhostUserDevice;
use crate::device::{guest_tx, notify, DeviceSnapshot, QueueSetup, Shared, GUEST_TX};
use crate::guest_access;
use crate::net_header::read_header;
use crate::packed_ring::PackedHead;
use crate::ring::{Direction, RingError, Segment, MAX_SEGMENTS};
use crate::virtqueue::{Ring, Virtqueue};
use graph::{Dispatch, InputNode, NodeContext, PortStats};
use packet::pool::JUMBO_DATA_SIZE;
use packet::{BufferPool, VECTOR_SIZE};
use std::fs::File;
use std::sync::Arc;

pub use crate::port_tx::VhostTx;

/// Driver name used in messages and `show interfaces`.
pub const DRIVER: &str = "vhost-user";

/// Shortest frame accepted from a guest: an Ethernet header.
const ETH_HLEN: usize = 14;
/// One queue as a node runs it.
pub(crate) struct RunningQueue {
    pub(crate) start: u64,
    pub(crate) ring: Ring,
    pub(crate) call: Option<Arc<File>>,
}

impl RunningQueue {
    /// Record the progress for the control thread and make what was used visible, raising
    /// the guest's interrupt when it asked for one (once per batch).
    #[inline]
    pub(crate) fn finish_batch(&mut self, shared: &Shared, q: usize) {
        shared.set_progress(q, self.start, self.ring.last_avail());
        if self.ring.publish() {
            if let Some(call) = &self.call {
                if notify(call) {
                    shared.counters.notifications.add(1);
                }
            }
        }
    }
}

/// What each node keeps of the device: the snapshot it runs and its queue.
pub(crate) struct View {
    pub(crate) q: usize,
    /// The worker this node runs on, when its queue may move between workers: it then runs
    /// the queue only while the snapshot names this worker (`DeviceSnapshot::rx_workers`).
    pub(crate) worker: Option<usize>,
    /// False while another worker receives from this queue (then this node neither runs it
    /// nor takes its kicks). Kept, not derived from `snap`: before the first snapshot it says
    /// yes, so the worker's wait set is sized for every queue when it is built.
    pub(crate) here: bool,
    pub(crate) generation: u64,
    pub(crate) snap: Arc<DeviceSnapshot>,
    pub(crate) running: Option<RunningQueue>,
}

/// A node's scratch list of chain heads taken in one batch, one per ring layout.
pub(crate) struct Heads {
    pub(crate) split: Box<[u16; VECTOR_SIZE]>,
    pub(crate) packed: Box<[PackedHead; VECTOR_SIZE]>,
}

impl Heads {
    pub(crate) fn new() -> Heads {
        Heads {
            split: Box::new([0; VECTOR_SIZE]),
            packed: Box::new([PackedHead::default(); VECTOR_SIZE]),
        }
    }
}

/// A fresh scratch list of segments.
pub(crate) fn segments<const N: usize>() -> Box<[Segment; N]> {
    Box::new(
        [Segment {
            ptr: std::ptr::null_mut(),
            len: 0,
        }; N],
    )
}

impl View {
    pub(crate) fn new(q: usize) -> View {
        View {
            q,
            worker: None,
            here: true,
            generation: 0,
            snap: Arc::new(DeviceSnapshot::idle()),
            running: None,
        }
    }

    /// Pick up generation changes; true when it changed.
    #[inline]
    pub(crate) fn refresh(&mut self, shared: &Shared) -> bool {
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
        // Another worker receives from this queue now: stop here (the progress of the last
        // batch is recorded; the control thread restarts the queue there on that worker).
        let elsewhere = self.worker.is_some_and(|w| {
            self.q % 2 == GUEST_TX
                && snap
                    .rx_workers
                    .get(self.q / 2)
                    .is_some_and(|&o| usize::from(o) != w)
        });
        self.here = !elsewhere;
        self.running = match (&snap.queues[self.q], self.running.take()) {
            _ if elsewhere => None,
            (None, _) => None,
            (Some(setup), Some(mut run))
                if run.start == setup.start && run.ring.is_packed() == snap.packed =>
            {
                run.ring.relocate(setup.layout);
                run.call = setup.call.clone();
                Some(run)
            }
            (Some(setup), _) => Some(start(setup, &snap, dir)),
        };
        self.generation = g;
        self.snap = snap;
    }

    /// Stop the queue after a malformed ring and report it.
    #[cold]
    pub(crate) fn fail(&mut self, shared: &Shared, e: RingError) {
        let which = if self.q % 2 == GUEST_TX {
            "transmit"
        } else {
            "receive"
        };
        shared.ring_error(format!("guest {which} queue {}: {e}", self.q / 2));
        self.running = None;
    }
}

fn start(setup: &QueueSetup, snap: &DeviceSnapshot, dir: Direction) -> RunningQueue {
    RunningQueue {
        start: setup.start,
        ring: Ring::new(snap.packed, setup.layout, setup.base, snap.event_idx, dir),
        call: setup.call.clone(),
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
pub(crate) fn gather(segs: &[Segment], skip: usize, dst: &mut [u8]) -> usize {
    walk(segs, skip, dst.len(), |p, at, n| {
        // SAFETY: `p[..n]` is inside a translated guest segment (`walk`); `at + n` is at most
        // `dst.len()`.
        unsafe { guest_access::read_bytes(p, &mut dst[at..at + n]) }
    })
}

/// Copy `src` into the segments from byte `offset` on; returns bytes copied.
#[inline]
pub(crate) fn scatter(segs: &[Segment], offset: usize, src: &[u8]) -> usize {
    walk(segs, offset, src.len(), |p, at, n| {
        // SAFETY: as in `gather`, the other way: the segment is device-writable guest memory.
        unsafe { guest_access::write_bytes(p, &src[at..at + n]) }
    })
}

/// What one receive poll came to.
#[derive(Default)]
struct RxTally {
    n: usize,
    bytes: u64,
    bad: u64,
    bad_headers: u64,
    no_jumbo: u64,
    supers: u64,
    error: Option<RingError>,
}

/// One receive poll over a ring of either layout.
struct Receive<'a> {
    snap: &'a DeviceSnapshot,
    segs: &'a mut [Segment; MAX_SEGMENTS],
    port_id: u16,
    tally: RxTally,
}

impl Receive<'_> {
    /// Take up to `heads.len()` chains and copy their frames into pool buffers listed in
    /// `out`; the chains are returned as used (not yet published). Returns how many chains
    /// were taken.
    #[inline(always)]
    fn run<R: Virtqueue>(
        &mut self,
        ring: &mut R,
        heads: &mut [R::Head],
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
    ) -> usize {
        let snap = self.snap;
        let t = &mut self.tally;
        let taken = match ring.take_heads(heads) {
            Ok(n) => n,
            Err(e) => {
                t.error = Some(e);
                return 0;
            }
        };
        let hdr_len = snap.hdr_len;
        let sends = snap.sends;
        let data_size = cx.pool.data_size();
        let mut i = 0;
        while i < taken {
            let Some(mut b) = cx.pool.alloc() else { break };
            let head = heads[i];
            i += 1;
            let found = match ring.single(&snap.memory, head) {
                Ok(Some(seg)) => {
                    self.segs[0] = seg;
                    Ok((1, u64::from(seg.len)))
                }
                Ok(None) => ring.chain(&snap.memory, head, self.segs),
                Err(e) => Err(e),
            };
            let (nseg, total) = match found {
                Ok(c) => c,
                Err(e) => {
                    cx.pool.free(b);
                    t.error = Some(e);
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
                        ring.push_used(head, 0);
                        t.no_jumbo += 1;
                        continue;
                    }
                }
            }
            // Visible to the guest only at `publish`, after the copy below.
            ring.push_used(head, 0);
            // A chain of zero-length buffers has no segment at all (and no frame).
            let hdr = match segs.first() {
                Some(s) if s.len >= 10 => {
                    let mut h = [0u8; 10];
                    // SAFETY: the first segment holds at least ten bytes (checked just above).
                    unsafe { guest_access::read_bytes(s.ptr, &mut h) };
                    h
                }
                _ => {
                    let mut h = [0u8; 10];
                    gather(segs, 0, &mut h);
                    h
                }
            };
            if !(ETH_HLEN..=JUMBO_DATA_SIZE as usize).contains(&frame) {
                t.bad += 1;
                cx.pool.free(b);
                continue;
            }
            let (meta, slot) = cx.pool.slot_mut(b);
            let start = meta.data_offset as usize;
            let Some(dst) = slot.get_mut(start..start + frame) else {
                t.bad += 1;
                cx.pool.free(b);
                continue;
            };
            gather(segs, hdr_len, dst);
            // The header is checked against the frame it describes (a TCP header where a
            // super-packet says it is).
            if read_header(&hdr, dst, sends, meta).is_err() {
                t.bad_headers += 1;
                cx.pool.free(b);
                continue;
            }
            t.supers += u64::from(meta.is_gso());
            meta.length = frame as u16;
            meta.rx_port = self.port_id;
            out[t.n] = b;
            t.n += 1;
            t.bytes += frame as u64;
        }
        if t.error.is_none() && i < taken {
            // Out of buffers: the heads not read stay available for the next poll.
            ring.give_back(&heads[i..taken]);
        }
        taken
    }
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
    heads: Heads,
}

impl VhostRx {
    /// Receive from the transmit queue of queue pair `pair` (default: pair 0).
    pub fn on_pair(mut self, pair: usize) -> VhostRx {
        let worker = self.view.worker;
        self.view = View::new(guest_tx(pair));
        self.view.worker = worker;
        self
    }

    /// Run on worker `worker` a queue that may move: receive only while the device names this
    /// worker for the pair (`VhostUserDevice::move_rx`). Without it the node receives
    /// whenever the queue runs.
    pub fn on_worker(mut self, worker: usize) -> VhostRx {
        self.view.worker = Some(worker);
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
            segs: segments(),
            heads: Heads::new(),
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
        let want = out.len().min(VECTOR_SIZE);
        let mut rx = Receive {
            snap,
            segs: &mut self.segs,
            port_id: self.port_id,
            tally: RxTally::default(),
        };
        let taken = match &mut run.ring {
            Ring::Split(r) => rx.run(r, &mut self.heads.split[..want], cx, out),
            Ring::Packed(r) => rx.run(r, &mut self.heads.packed[..want], cx, out),
        };
        let t = rx.tally;
        if taken == 0 && t.error.is_none() {
            return (0, Dispatch::AllTo(0));
        }
        run.finish_batch(&self.shared, q);
        if t.n > 0 {
            self.stats.rx_packets.add(t.n as u64);
            self.stats.rx_bytes.add(t.bytes);
        }
        if t.bad + t.bad_headers + t.no_jumbo > 0 {
            let c = &self.shared.counters;
            self.stats.rx_drops.add(t.bad + t.bad_headers + t.no_jumbo);
            c.rx_bad_frames.add(t.bad);
            c.rx_bad_headers.add(t.bad_headers);
            c.rx_no_jumbo_buffers.add(t.no_jumbo);
        }
        if t.supers > 0 {
            self.shared.counters.rx_super_packets.add(t.supers);
        }
        if let Some(e) = t.error {
            self.view.fail(&self.shared, e);
        }
        (t.n, Dispatch::AllTo(0))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("vhost-user rx: port {}, {} bytes", m.rx_port, m.length)
    }

    /// The pair's kicks, while this worker receives from it.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        if !self.view.here {
            return None;
        }
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
        // Only the worker receiving from the queue takes its kicks (another one may wake on
        // them too: the pair's wait descriptor is in every such worker's wait set).
        if self.view.here {
            if let Some(k) = self.shared.kicks.get(self.view.q / 2) {
                k.drain();
            }
        }
    }
}

#[cfg(test)]
use graph::Node;

#[cfg(test)]
#[path = "port_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "port_offload_tests.rs"]
mod offload_tests;

#[cfg(test)]
#[path = "port_packed_tests.rs"]
mod packed_tests;

#[cfg(test)]
#[path = "port_bench_tests.rs"]
mod bench_tests;

//! A vhost-user port's transmit node, `VhostTx`: packets into the receive buffers the guest
//! posted on the first of its queue pairs the guest enabled (merging buffers when negotiated;
//! a super-packet whole to a guest that took TSO, else cut into segments straight into its
//! buffers; a partial checksum finished for a guest without checksum offload), then freed.
//!
//! It owns its scratch lists only. Like the receive node (`port`), it checks the device's
//! generation before it touches a ring, runs split and packed rings through one body generic
//! over `Virtqueue` (a match once per vector), never allocates, locks or blocks on the fast
//! path, and never writes outside the guest's memory (every buffer is translated and bounded).

use crate::backend::VhostUserDevice;
use crate::device::{guest_rx, DeviceSnapshot, Shared};
use crate::guest_access;
use crate::net_header::write_header;
use crate::port::{scatter, segments, Heads, View};
use crate::ring::{RingError, Segment, MAX_SEGMENTS};
use crate::virtqueue::{Ring, Virtqueue};
use graph::{Dispatch, Node, NodeContext, PortStats};
use packet::gso::{self, finish_checksum, GsoError, GsoKind};
use packet::meta::BufferMeta;
use packet::{BufferPool, VECTOR_SIZE};
use std::sync::Arc;

/// Most receive chains one frame may be merged over (a 64 KiB super-packet over the guest's
/// page-sized buffers takes 17; over MTU-sized ones, 44).
const MAX_MERGED: usize = 64;

/// Transmit node: packets into the guest's receive buffers.
pub struct VhostTx {
    name: String,
    _device: Option<Arc<VhostUserDevice>>,
    shared: Arc<Shared>,
    stats: Arc<PortStats>,
    /// The receive queues of the pairs this node may fill, in order of preference.
    views: Vec<View>,
    segs: Box<[Segment; MAX_SEGMENTS]>,
    heads: Heads,
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
            segs: segments(),
            heads: Heads::new(),
            bufs: segments(),
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
fn put<R: Virtqueue>(
    ring: &mut R,
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
    let mut heads = [R::Head::default(); MAX_MERGED];
    let mut totals = [0u32; MAX_MERGED];
    let (mut chains, mut room) = (0usize, 0usize);
    while room < need {
        if chains == max_chains {
            ring.give_back(&heads[..chains]);
            return Put::NoRoom;
        }
        let head = match ring.take_one() {
            Ok(Some(h)) => h,
            Ok(None) => {
                ring.give_back(&heads[..chains]);
                return Put::NoRoom;
            }
            Err(e) => return Put::Broken(e),
        };
        let (_, total) = match ring.chain(&snap.memory, head, segs) {
            Ok(c) => c,
            Err(e) => return Put::Broken(e),
        };
        let total = total.min(u64::from(u32::MAX)) as u32;
        heads[chains] = head;
        totals[chains] = total;
        chains += 1;
        room += total as usize;
    }
    // `num_buffers` = chains (VERSION_1 or MRG_RXBUF: 12-byte headers have it).
    let mut hdr = *vhdr;
    hdr[10..12].copy_from_slice(&(chains as u16).to_le_bytes());
    let mut pos = 0usize;
    for (i, (&head, &total)) in heads[..chains].iter().zip(&totals[..chains]).enumerate() {
        // The chain was translated above; translating again is cheap and keeps one scratch.
        let nseg = match ring.chain(&snap.memory, head, segs) {
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
        ring.push_used(head, written as u32);
    }
    Put::Sent
}

/// Cut super-packet `data` (metadata `meta`) into segments, each into the guest's receive
/// chains with a plain header. `Put::NoRoom` when any segment found no room (those segments
/// are lost; TCP sends them again); `Err` when the packet cannot be segmented.
fn segment_into<R: Virtqueue>(
    ring: &mut R,
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
        match put(ring, snap, segs, &plain, [hdr, payload]) {
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

/// What one vector to the guest came to.
#[derive(Default)]
struct TxTally {
    sent: u64,
    bytes: u64,
    no_room: u64,
    supers: u64,
    segmented: u64,
    finished: u64,
    bad_supers: u64,
    error: Option<RingError>,
}

/// One vector into a ring of either layout.
struct Transmit<'a> {
    snap: &'a DeviceSnapshot,
    segs: &'a mut [Segment; MAX_SEGMENTS],
    bufs: &'a mut [Segment; VECTOR_SIZE],
    tally: TxTally,
}

impl Transmit<'_> {
    /// Put the packets of `frame` into the guest's receive chains (returned as used, not yet
    /// published); `heads` is as long as the fast path may go.
    #[inline(always)]
    fn run<R: Virtqueue>(
        &mut self,
        ring: &mut R,
        heads: &mut [R::Head],
        cx: &mut NodeContext<'_>,
        frame: &[u32],
    ) {
        let snap = self.snap;
        let t = &mut self.tally;
        // Fast path: each packet into the next receive chain when that chain is one buffer
        // holding header and packet (what guests post with merged buffers), the ring slots and
        // descriptors of the whole batch requested first.
        let taken = match ring.take_heads(heads) {
            Ok(n) => n,
            Err(e) => {
                t.error = Some(e);
                return;
            }
        };
        let hdr_len = snap.hdr_len;
        let takes = snap.takes;
        let mut plain = [0u8; 12];
        // num_buffers = 1 (VERSION_1 or MRG_RXBUF headers have it).
        plain[10] = 1;
        // Pass 1: the buffers, each asked for (the guest touched them last). A packet with
        // offloads the guest does not take goes the general way.
        let mut fast = 0;
        while fast < taken {
            let m = cx.pool.meta(frame[fast]);
            if !takes.takes(m) {
                break;
            }
            let len = m.length as usize;
            match ring.single(&snap.memory, heads[fast]) {
                Ok(Some(seg)) if seg.len as usize >= hdr_len + len => {
                    packet::prefetch(seg.ptr);
                    self.bufs[fast] = seg;
                }
                Ok(_) => break,
                Err(e) => {
                    t.error = Some(e);
                    return;
                }
            }
            fast += 1;
        }
        // Pass 2: header and packet into each.
        let batch = frame.iter().zip(heads.iter().zip(self.bufs.iter()));
        for (&b, (&head, &seg)) in batch.take(fast) {
            let (meta, slot) = cx.pool.slot_mut(b);
            let (start, len) = (meta.data_offset as usize, meta.length as usize);
            let Some(data) = slot.get(start..start + len) else {
                // Cannot happen (the pool keeps lengths inside slots); the chain goes back
                // empty rather than half written.
                ring.push_used(head, 0);
                continue;
            };
            let hdr = if meta.has_offload() {
                match write_header(meta, data, 1) {
                    Ok(h) => {
                        t.supers += u64::from(meta.is_gso());
                        h
                    }
                    Err(_) => {
                        // The chain goes back empty; the packet is dropped and counted.
                        t.bad_supers += 1;
                        ring.push_used(head, 0);
                        continue;
                    }
                }
            } else {
                plain
            };
            // SAFETY: the segment is device-writable guest memory of at least
            // `hdr_len + len` bytes (checked in pass 1); `hdr` and `data` are ours.
            unsafe {
                guest_access::write_bytes(seg.ptr, &hdr[..hdr_len]);
                guest_access::write_bytes(seg.ptr.add(hdr_len), &data[..len]);
            }
            ring.push_used(head, (hdr_len + len) as u32);
            t.sent += 1;
            t.bytes += len as u64;
        }
        if fast < taken {
            // The rest go the general way, from the first chain the fast path left.
            ring.give_back(&heads[fast..taken]);
        }
        for &b in &frame[fast..] {
            let (meta, slot) = cx.pool.slot_mut(b);
            let (start, len) = (meta.data_offset as usize, meta.length as usize);
            let Some(data) = slot.get_mut(start..start + len) else {
                t.no_room += 1;
                continue;
            };
            let put = if takes.takes(meta) {
                let Ok(h) = write_header(meta, data, 0) else {
                    t.bad_supers += 1;
                    continue;
                };
                t.supers += u64::from(meta.is_gso());
                put(ring, snap, self.segs, &h, [data, &[]])
            } else if meta.is_gso() {
                t.segmented += 1;
                match segment_into(ring, snap, self.segs, meta, data) {
                    Ok(put) => put,
                    Err(_) => {
                        t.bad_supers += 1;
                        continue;
                    }
                }
            } else {
                // A partial checksum the guest cannot take: finished here.
                let at = usize::from(meta.csum_start.wrapping_sub(meta.data_offset));
                if finish_checksum(data, at, usize::from(meta.csum_offset)).is_err() {
                    t.bad_supers += 1;
                    continue;
                }
                meta.clear_offload();
                t.finished += 1;
                put(ring, snap, self.segs, &plain, [data, &[]])
            };
            match put {
                Put::Sent => {
                    t.sent += 1;
                    t.bytes += len as u64;
                }
                Put::NoRoom => t.no_room += 1,
                Put::Broken(e) => {
                    t.error = Some(e);
                    return;
                }
            }
        }
    }
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
        let mut tx = Transmit {
            snap: &view.snap,
            segs: &mut self.segs,
            bufs: &mut self.bufs,
            tally: TxTally::default(),
        };
        if let Some(run) = view.running.as_mut() {
            let want = frame.len().min(VECTOR_SIZE);
            match &mut run.ring {
                Ring::Split(r) => tx.run(r, &mut self.heads.split[..want], cx, frame),
                Ring::Packed(r) => tx.run(r, &mut self.heads.packed[..want], cx, frame),
            }
            run.finish_batch(&self.shared, view.q);
        }
        let t = tx.tally;
        cx.pool.free_batch(frame);
        let dropped = frame.len() as u64 - t.sent;
        if let Some(e) = t.error {
            view.fail(&self.shared, e);
        }
        self.stats.tx_packets.add(t.sent);
        self.stats.tx_bytes.add(t.bytes);
        if dropped > 0 {
            self.stats.tx_drops.add(dropped);
            self.shared.counters.tx_no_buffers.add(t.no_room);
            self.shared.counters.tx_bad_super_packets.add(t.bad_supers);
        }
        if t.supers + t.segmented + t.finished > 0 {
            let c = &self.shared.counters;
            c.tx_super_packets.add(t.supers);
            c.tx_segmented.add(t.segmented);
            c.tx_checksums_finished.add(t.finished);
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

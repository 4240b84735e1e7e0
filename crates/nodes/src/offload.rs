//! Software offloads at the output: for a port that cannot take what a packet's sender left
//! undone, it cuts super-packets into segments (each in a fresh buffer), finishes partial
//! checksums in place and moves frames out of jumbo buffers. It owns a preallocated scratch of
//! segment headers; it never allocates per packet and never touches a packet the port takes
//! as it is. `Finisher` does the same for a consumer of plain bytes outside the graph (a
//! handoff ring to another worker), one packet at a time.

use graph::Emitter;
use packet::gso::{self, GsoKind, MAX_HEADER_LEN, MAX_SEGMENTS};
use packet::meta::{Offloads, FLAG_CSUM_PARTIAL};
use packet::BufferPool;

/// What a port takes as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCaps {
    /// Offloads left undone that the port (or its driver) finishes itself.
    pub offloads: Offloads,
    /// The port's transmit node takes jumbo buffers (it copies frames out of them).
    pub jumbo: bool,
}

impl PortCaps {
    /// A port that takes everything: its driver handles offloads and any buffer.
    pub const ALL: PortCaps = PortCaps {
        offloads: Offloads::ALL,
        jumbo: true,
    };
}

/// What became of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It goes to the port as it is (perhaps with its checksum finished).
    AsIs,
    /// It was replaced by the packets emitted in its place and freed.
    Replaced,
}

/// Why a packet could not be made fit for its port (it is dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadDrop {
    /// A super-packet or partial checksum whose headers do not allow the work.
    Malformed,
    /// No buffer was free for a segment or a copy.
    NoBuffer,
    /// The node's queue of extra packets was full.
    QueueFull,
    /// The frame does not fit an ordinary buffer and the port takes no jumbo buffer.
    TooBig,
}

/// Where replacements of frame packet `after` go: `emitter`, to next index `next`.
pub struct Replace<'a> {
    /// The node's queue of extra packets.
    pub emitter: &'a mut Emitter,
    /// Index in the frame of the packet being replaced.
    pub after: usize,
    /// Next index of the replacements.
    pub next: u16,
}

impl Replace<'_> {
    /// Emit `c` in the packet's place; a full queue frees it.
    fn emit(&mut self, pool: &mut BufferPool, c: u32) -> Result<(), OffloadDrop> {
        self.emitter.emit(self.after, self.next, c).map_err(|c| {
            pool.free(c);
            OffloadDrop::QueueFull
        })
    }
}

/// Bytes of scratch per segment header.
const MAX_HEADER: usize = MAX_HEADER_LEN;

/// Where one segment's header and payload are.
#[derive(Clone, Copy, Debug, Default)]
struct Piece {
    header_len: u16,
    payload_at: u32,
    payload_len: u32,
}

/// The scratch of one node's software offloads.
pub struct SoftwareOffload {
    headers: Box<[u8]>,
    pieces: Vec<Piece>,
}

impl Default for SoftwareOffload {
    fn default() -> Self {
        SoftwareOffload::new()
    }
}

impl SoftwareOffload {
    /// Scratch for one super-packet at a time.
    pub fn new() -> SoftwareOffload {
        SoftwareOffload {
            headers: vec![0u8; MAX_SEGMENTS * MAX_HEADER].into_boxed_slice(),
            pieces: Vec::with_capacity(MAX_SEGMENTS),
        }
    }

    /// Make packet `b` fit a port with `caps`, replacing it through `to` when it must. The
    /// caller checks first that the packet has offloads or sits in a jumbo buffer
    /// (`BufferMeta::has_offload`, `BufferPool::is_jumbo`): that is the rare case.
    pub fn prepare(
        &mut self,
        pool: &mut BufferPool,
        b: u32,
        caps: PortCaps,
        to: Replace<'_>,
    ) -> Result<Fate, OffloadDrop> {
        let m = *pool.meta(b);
        let jumbo = pool.is_jumbo(b);
        let taken = caps.offloads.takes(&m);
        if taken && (caps.jumbo || !jumbo) {
            return Ok(Fate::AsIs);
        }
        if m.is_gso() {
            return self.segment(pool, b, caps, to);
        }
        if m.flags & FLAG_CSUM_PARTIAL != 0 && !caps.offloads.csum {
            let (meta, data) = pool.packet_mut(b);
            let start = usize::from(meta.csum_start.wrapping_sub(meta.data_offset));
            gso::finish_checksum(data, start, usize::from(meta.csum_offset))
                .map_err(|_| OffloadDrop::Malformed)?;
            meta.clear_offload();
        }
        if jumbo && !caps.jumbo {
            return move_to_ordinary(pool, b, to);
        }
        Ok(Fate::AsIs)
    }

    /// Cut super-packet `b` into segments in new buffers, emitted in its place.
    fn segment(
        &mut self,
        pool: &mut BufferPool,
        b: u32,
        caps: PortCaps,
        mut to: Replace<'_>,
    ) -> Result<Fate, OffloadDrop> {
        let m = *pool.meta(b);
        let kind = GsoKind::from_gso_type(m.gso_type).ok_or(OffloadDrop::Malformed)?;
        let data = pool.data(b);
        let base = data.as_ptr() as usize;
        self.pieces.clear();
        let (headers, pieces) = (&mut self.headers, &mut self.pieces);
        let mut fits = true;
        let cut = gso::segment_tcp(data, kind, m.gso_size, |header, payload| {
            let i = pieces.len();
            if i == MAX_SEGMENTS || header.len() > MAX_HEADER {
                fits = false;
                return false;
            }
            headers[i * MAX_HEADER..i * MAX_HEADER + header.len()].copy_from_slice(header);
            pieces.push(Piece {
                header_len: header.len() as u16,
                // The payload is a slice of `data`: its place is its distance from the start.
                payload_at: (payload.as_ptr() as usize - base) as u32,
                payload_len: payload.len() as u32,
            });
            true
        });
        if cut.is_err() || !fits {
            return Err(OffloadDrop::Malformed);
        }
        let headroom = pool.headroom();
        let mut outcome = Ok(Fate::Replaced);
        for (i, piece) in self.pieces.iter().enumerate() {
            let (hl, pl) = (usize::from(piece.header_len), piece.payload_len as usize);
            let len = hl + pl;
            if len > pool.data_size() && !caps.jumbo {
                outcome = Err(OffloadDrop::TooBig);
                break;
            }
            let Some(c) = pool.alloc_for(len) else {
                outcome = Err(OffloadDrop::NoBuffer);
                break;
            };
            let (_, slot) = pool.slot_mut(c);
            slot[headroom..headroom + hl]
                .copy_from_slice(&self.headers[i * MAX_HEADER..i * MAX_HEADER + hl]);
            pool.copy_meta(b, c);
            let cm = pool.meta_mut(c);
            cm.data_offset = headroom as u16;
            cm.length = len as u16;
            cm.clear_offload();
            if !pool.copy_between(b, piece.payload_at as usize, pl, c, headroom + hl) {
                pool.free(c);
                outcome = Err(OffloadDrop::Malformed);
                break;
            }
            if let Err(why) = to.emit(pool, c) {
                outcome = Err(why);
                break;
            }
        }
        if outcome.is_ok() {
            pool.free(b);
        }
        // On a failure the segments already emitted still go out (TCP resends the rest);
        // the caller drops the original and counts why.
        outcome
    }
}

/// Copy a frame out of jumbo buffer `b` into an ordinary one, emitted in its place.
fn move_to_ordinary(
    pool: &mut BufferPool,
    b: u32,
    mut to: Replace<'_>,
) -> Result<Fate, OffloadDrop> {
    let m = *pool.meta(b);
    let len = usize::from(m.length);
    if len > pool.data_size() {
        return Err(OffloadDrop::TooBig);
    }
    let c = pool.alloc().ok_or(OffloadDrop::NoBuffer)?;
    let headroom = pool.headroom();
    if !pool.copy_between(b, 0, len, c, headroom) {
        pool.free(c);
        return Err(OffloadDrop::Malformed);
    }
    pool.copy_meta(b, c);
    let cm = pool.meta_mut(c);
    cm.data_offset = headroom as u16;
    if m.flags & FLAG_CSUM_PARTIAL != 0 {
        cm.csum_start = m
            .csum_start
            .wrapping_sub(m.data_offset)
            .wrapping_add(headroom as u16);
    }
    to.emit(pool, c)?;
    pool.free(b);
    Ok(Fate::Replaced)
}

/// Software offloads for a consumer that takes plain frames in ordinary buffers (a handoff
/// ring carries bytes, no offload metadata): it owns its scratch and its own queue of
/// replacements, so it needs no next node; it allocates nothing per packet.
pub struct Finisher {
    offload: SoftwareOffload,
    made: Emitter,
}

impl Default for Finisher {
    fn default() -> Self {
        Finisher::new()
    }
}

impl Finisher {
    /// Scratch for one packet at a time (a super-packet's segments at most).
    pub fn new() -> Finisher {
        Finisher {
            offload: SoftwareOffload::new(),
            made: Emitter::new(MAX_SEGMENTS),
        }
    }

    /// Hand `each` the plain frames packet `b` becomes, in order: `b` itself (its checksum
    /// finished) or, when it was a super-packet or sat in a jumbo buffer, its segments or copy
    /// (`b` is then freed). `each` owns what it is handed. On an error, what was made so far
    /// went to `each` and `b` is still the caller's (to drop and count).
    pub fn finish(
        &mut self,
        pool: &mut BufferPool,
        b: u32,
        mut each: impl FnMut(&mut BufferPool, u32),
    ) -> Result<(), OffloadDrop> {
        self.made.clear();
        let to = Replace {
            emitter: &mut self.made,
            after: 0,
            next: 0,
        };
        let fate = self.offload.prepare(pool, b, PortCaps::default(), to);
        for e in self.made.items() {
            each(pool, e.buffer);
        }
        self.made.clear();
        if fate? == Fate::AsIs {
            each(pool, b);
        }
        Ok(())
    }
}

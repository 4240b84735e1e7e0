//! Software offloads for ports that cannot take what a guest left undone: cutting a TCP
//! super-packet into segments (GSO, what a NIC with TSO does) and finishing a partial checksum.
//! Pure functions over bytes: they never allocate, never panic on any input, never read metadata.
//!
//! # Segments
//!
//! [`Segmenter::new`] checks a super-packet once (Ethernet, up to two VLAN tags, IPv4 with any
//! options or IPv6 without extension headers, TCP with any options) and sums the parts of its
//! headers that every segment shares. [`Segmenter::segment`] then gives segment `i` as a
//! rewritten copy of the headers, written into a caller's [`HeaderBuf`] (at most
//! [`MAX_HEADER_LEN`] bytes), and the slice of the original frame that is its payload: the
//! caller copies both wherever the segment goes (a guest's receive buffers, a pool buffer), so
//! nothing here allocates or knows the pool. [`segment_tcp`] is the loop over all segments.
//!
//! Each segment is what Linux's `tcp_gso_segment`/`inet_gso_segment`/`ipv6_gso_segment` make:
//! - payload: `mss` bytes of the original's payload in order, the last one the rest (a frame
//!   whose payload fits in one segment, or has none, gives one segment);
//! - IPv4: total length of the segment, identification the original's plus the segment's index
//!   (mod 2^16), header checksum recomputed; TOS, DF, TTL and options copied;
//! - IPv6: payload length of the segment;
//! - TCP: sequence number the original's plus the payload offset (mod 2^32); FIN and PSH only on
//!   the last segment, CWR only on the first; every other flag, the urgent pointer and the
//!   options copied; checksum computed from nothing over pseudo-header, header and payload. The
//!   field the sender left (a pseudo-header sum under `NEEDS_CSUM`, or anything) is not read.
//!
//! CWR goes to the first segment only whether or not the sender set the ECN bit
//! (`meta::GSO_FLAG_ECN`), as in Linux: that bit only says whether a device that has TSO but not
//! TSO-with-ECN may take the super-packet, which is the caller's choice of port, not ours.
//!
//! Lengths: the frame's length is the packet's, as Linux trusts `skb->len` and a TSO NIC its
//! descriptor; the IPv4 total length and IPv6 payload length the sender wrote are not read
//! (they are rewritten for every segment anyway). A guest's frame has no Ethernet padding, and
//! virtio's `NEEDS_CSUM` already defines the checksummed range as "to the end of the buffer";
//! requiring the fields to agree would only drop senders that leave them 0 (as NDIS large-send
//! does before its driver fills them in).
//!
//! At most [`MAX_SEGMENTS`] segments: see there why.
//!
//! # Partial checksums
//!
//! [`finish_checksum`] does what a NIC with checksum offload does with virtio-net's
//! `NEEDS_CSUM` (`csum_start`, `csum_offset`): the ones'-complement sum of the frame from
//! `csum_start` to its end, complemented, stored at `csum_start + csum_offset`.

use crate::checksum::{add, fold, sum};
use crate::headers::{be16, eth, ip4, ip6, proto, put16, tcp};
use crate::meta::{GSO_TCP4, GSO_TCP6};

/// Longest header of a segment: Ethernet, two VLAN tags, IPv4 with 40 bytes of options and TCP
/// with 40 bytes of options (142 bytes; IPv6 headers are shorter).
pub const MAX_HEADER_LEN: usize =
    eth::HEADER_LEN + 2 * eth::TAG_LEN + ip4::MAX_HEADER_LEN + tcp::MAX_HEADER_LEN;

/// Where [`Segmenter::segment`] writes a segment's header (on the caller's stack).
pub type HeaderBuf = [u8; MAX_HEADER_LEN];

/// Most segments one super-packet may be cut into; a super-packet that would make more is
/// refused ([`GsoError::TooManySegments`]).
///
/// Why a cap: the work and the output of one packet grow with `frame length / mss`, and the
/// sender chooses the mss. A guest sending 64 KiB with an mss of 1 would make the worker write
/// 65,000 segments (3.5 MB of headers, as many pool buffers or guest buffers) for one
/// descriptor, a cheap way to stall the worker for milliseconds. Why this cap: Linux's TCP never
/// uses an mss below 48 bytes (`tcp_min_snd_mss`), and 64 KiB at that mss is 1,365 segments; so
/// 2048 refuses nothing a real TCP sends, and bounds the worst case to about 30 times the
/// segments of a 64 KiB super-packet at a 1448-byte mss.
pub const MAX_SEGMENTS: usize = 2048;

/// Longest frame: the most a buffer's `length` or an IP length field holds.
pub const MAX_FRAME_LEN: usize = 65535;

/// The kind of super-packet (virtio-net `gso_type` without the ECN bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    /// TCP over IPv4.
    Tcp4,
    /// TCP over IPv6.
    Tcp6,
}

impl GsoKind {
    /// The kind of a `BufferMeta::gso_type` (`GSO_TCP4`, `GSO_TCP6`); None for anything else.
    pub const fn from_gso_type(gso_type: u8) -> Option<GsoKind> {
        match gso_type {
            GSO_TCP4 => Some(GsoKind::Tcp4),
            GSO_TCP6 => Some(GsoKind::Tcp6),
            _ => None,
        }
    }

    /// The ethertype frames of this kind carry.
    pub const fn ethertype(self) -> u16 {
        match self {
            GsoKind::Tcp4 => eth::TYPE_IPV4,
            GsoKind::Tcp6 => eth::TYPE_IPV6,
        }
    }
}

/// Why a frame cannot be segmented or its checksum finished. Every kind has a counter name
/// ([`GsoError::name`], [`GsoError::NAMES`]) for a node's drop reasons.
#[derive(thiserror::Error, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// The segment size is 0.
    #[error("segment size (gso_size) is 0; accepted: 1 to 65535")]
    ZeroMss,
    /// The frame is longer than [`MAX_FRAME_LEN`].
    #[error("frame of {0} bytes is longer than 65535 bytes")]
    TooLong(usize),
    /// The frame ends inside its Ethernet header or VLAN tags.
    #[error("frame of {0} bytes ends inside its Ethernet header or VLAN tags")]
    TruncatedL2(usize),
    /// The ethertype (after at most two VLAN tags) is not the IP version of the GSO kind.
    #[error("ethertype {0:#06x} after the VLAN tags is not the one of the GSO type (0x0800 for TCPv4, 0x86dd for TCPv6; at most two tags)")]
    WrongEthertype(u16),
    /// The frame ends inside the IP header or its options.
    #[error("frame ends inside the IP header or its options")]
    TruncatedL3,
    /// The IP version is not the one of the GSO kind.
    #[error("IP version {0} is not the one of the GSO type")]
    BadIpVersion(u8),
    /// The IPv4 header length is below 5 words.
    #[error("IPv4 header length of {0} words is below the minimum of 5")]
    BadIhl(u8),
    /// The IPv4 packet is a fragment.
    #[error("IPv4 fragment (more-fragments flag or an offset): a fragment cannot be segmented")]
    Fragment,
    /// The IPv4 protocol or IPv6 next header is not TCP.
    #[error("IP protocol (or IPv6 next header) {0} is not TCP (6); IPv6 extension headers are not segmented")]
    NotTcp(u8),
    /// The frame ends inside the TCP header or its options.
    #[error("frame ends inside the TCP header or its options")]
    TruncatedL4,
    /// The TCP data offset is below 5 words.
    #[error("TCP data offset of {0} words is below the minimum of 5")]
    BadTcpOffset(u8),
    /// The super-packet would make more than [`MAX_SEGMENTS`] segments.
    #[error(
        "{0} segments: more than the 2048 one super-packet may make (payload / gso_size too large)"
    )]
    TooManySegments(usize),
    /// `finish_checksum`: the checksum field is not inside the frame.
    #[error("checksum field at csum_start {start} + csum_offset {offset} is not inside the {len}-byte frame")]
    ChecksumOutOfFrame {
        /// `csum_start`, from the start of the frame.
        start: usize,
        /// `csum_offset`.
        offset: usize,
        /// Frame length.
        len: usize,
    },
}

impl GsoError {
    /// Number of kinds (`index()` is below it), for counter arrays.
    pub const KINDS: usize = 13;

    /// Counter names by `index()`.
    pub const NAMES: [&'static str; Self::KINDS] = [
        "gso-zero-mss",
        "gso-too-long",
        "gso-truncated-l2",
        "gso-wrong-ethertype",
        "gso-truncated-l3",
        "gso-bad-ip-version",
        "gso-bad-ihl",
        "gso-ip-fragment",
        "gso-not-tcp",
        "gso-truncated-l4",
        "gso-bad-tcp-offset",
        "gso-too-many-segments",
        "csum-out-of-frame",
    ];

    /// Index of the kind, for counter arrays.
    pub const fn index(&self) -> usize {
        match self {
            GsoError::ZeroMss => 0,
            GsoError::TooLong(_) => 1,
            GsoError::TruncatedL2(_) => 2,
            GsoError::WrongEthertype(_) => 3,
            GsoError::TruncatedL3 => 4,
            GsoError::BadIpVersion(_) => 5,
            GsoError::BadIhl(_) => 6,
            GsoError::Fragment => 7,
            GsoError::NotTcp(_) => 8,
            GsoError::TruncatedL4 => 9,
            GsoError::BadTcpOffset(_) => 10,
            GsoError::TooManySegments(_) => 11,
            GsoError::ChecksumOutOfFrame { .. } => 12,
        }
    }

    /// Counter name of the kind (a drop reason, e.g. `gso-truncated-l4`).
    pub const fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }
}

/// Finish a partial checksum in place, as a NIC does for virtio-net's `NEEDS_CSUM`: the field
/// at `start + offset` holds the pseudo-header sum the sender left; the ones'-complement sum of
/// `frame[start..]` is complemented and stored there. `start` is counted from the start of the
/// frame (`BufferMeta::csum_start` counts from the buffer's slot: subtract `data_offset`).
///
/// A computed 0 is stored as 0xffff (the same value in ones'-complement), as Linux's
/// `skb_checksum_help` does, because UDP reads 0 as "no checksum".
pub fn finish_checksum(frame: &mut [u8], start: usize, offset: usize) -> Result<(), GsoError> {
    let len = frame.len();
    let out = GsoError::ChecksumOutOfFrame { start, offset, len };
    let at = start
        .checked_add(offset)
        .filter(|at| at.checked_add(2).is_some_and(|end| end <= len))
        .ok_or(out)?;
    let range = frame.get(start..).ok_or(out)?;
    let mut c = !fold(sum(0, range));
    if c == 0 {
        c = 0xffff;
    }
    frame
        .get_mut(at..at + 2)
        .ok_or(out)?
        .copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// What [`segment_tcp`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segmented {
    /// Segments `emit` took (returned true for).
    pub sent: usize,
    /// Segments the super-packet makes; `segments - sent` were not sent because `emit` stopped.
    pub segments: usize,
}

/// Cut the TCP super-packet `frame` into segments of at most `mss` payload bytes (see the
/// module's documentation for what each segment is) and call `emit(header, payload)` for each,
/// in order, until it returns false (the segment was not taken: stop). Checks the whole frame
/// before the first call, so on an error nothing was emitted.
pub fn segment_tcp(
    frame: &[u8],
    kind: GsoKind,
    mss: u16,
    mut emit: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<Segmented, GsoError> {
    let s = Segmenter::new(frame, kind, mss)?;
    let mut buf: HeaderBuf = [0; MAX_HEADER_LEN];
    let mut sent = 0;
    for i in 0..s.segments() {
        match s.segment(i, &mut buf) {
            Some((header, payload)) if emit(header, payload) => sent += 1,
            _ => break,
        }
    }
    Ok(Segmented {
        sent,
        segments: s.segments(),
    })
}

/// A checked super-packet, ready to give its segments in any order (see the module's
/// documentation). Holds the sums of the header parts all segments share, so a segment costs a
/// header copy, a few field writes and one pass over its payload.
#[derive(Clone, Debug)]
pub struct Segmenter<'a> {
    frame: &'a [u8],
    kind: GsoKind,
    /// Offset of the IP header.
    l3: usize,
    /// Offset of the TCP header.
    l4: usize,
    /// Offset of the payload: the length of every segment's header.
    header_len: usize,
    mss: usize,
    segments: usize,
    seq: u32,
    ip_id: u16,
    flags: u8,
    /// Sum of the IPv4 header with total length, identification and checksum zeroed.
    ip_sum: u64,
    /// Sum of the pseudo-header without its length, and of the TCP header with sequence number,
    /// flags byte and checksum zeroed.
    tcp_sum: u64,
}

impl<'a> Segmenter<'a> {
    /// Check `frame` as a super-packet of `kind` to cut at `mss` payload bytes. Errors on
    /// anything malformed (see [`GsoError`]); never panics.
    pub fn new(frame: &'a [u8], kind: GsoKind, mss: u16) -> Result<Segmenter<'a>, GsoError> {
        if mss == 0 {
            return Err(GsoError::ZeroMss);
        }
        if frame.len() > MAX_FRAME_LEN {
            return Err(GsoError::TooLong(frame.len()));
        }
        let (l3, ethertype) = l2(frame)?;
        if ethertype != kind.ethertype() {
            return Err(GsoError::WrongEthertype(ethertype));
        }
        let (l4, ip_sum, pseudo, ip_id) = match kind {
            GsoKind::Tcp4 => ip4_header(frame, l3)?,
            GsoKind::Tcp6 => ip6_header(frame, l3)?,
        };
        let fixed = frame
            .get(l4..l4 + tcp::MIN_HEADER_LEN)
            .ok_or(GsoError::TruncatedL4)?;
        let doff = fixed[tcp::DATA_OFFSET] >> 4;
        if doff < 5 {
            return Err(GsoError::BadTcpOffset(doff));
        }
        let th_len = usize::from(doff) * 4;
        let th = frame.get(l4..l4 + th_len).ok_or(GsoError::TruncatedL4)?;
        let seq = u32::from_be_bytes([th[4], th[5], th[6], th[7]]);
        let flags = th[tcp::FLAGS];
        let mut t = [0u8; tcp::MAX_HEADER_LEN];
        let t = &mut t[..th_len];
        t.copy_from_slice(th);
        t[tcp::SEQ..tcp::SEQ + 4].fill(0);
        t[tcp::FLAGS] = 0;
        t[tcp::CHECKSUM..tcp::CHECKSUM + 2].fill(0);
        let tcp_sum = add(pseudo, sum(0, t));

        let header_len = l4 + th_len;
        let payload = frame.len() - header_len;
        let mss = usize::from(mss);
        let segments = payload.div_ceil(mss).max(1);
        if segments > MAX_SEGMENTS {
            return Err(GsoError::TooManySegments(segments));
        }
        Ok(Segmenter {
            frame,
            kind,
            l3,
            l4,
            header_len,
            mss,
            segments,
            seq,
            ip_id,
            flags,
            ip_sum,
            tcp_sum,
        })
    }

    /// Number of segments (at least 1).
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Length of every segment's header (Ethernet to the end of the TCP options).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Payload bytes of the super-packet (all segments' together).
    pub fn payload_len(&self) -> usize {
        self.frame.len() - self.header_len
    }

    /// The segment size.
    pub fn mss(&self) -> usize {
        self.mss
    }

    /// The kind of super-packet.
    pub fn kind(&self) -> GsoKind {
        self.kind
    }

    /// Length of segment `i` (header and payload), None past the last.
    pub fn segment_len(&self, i: usize) -> Option<usize> {
        self.payload_range(i).map(|(a, b)| self.header_len + b - a)
    }

    /// Bytes `start..end` of the frame that are segment `i`'s payload.
    #[inline]
    fn payload_range(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.segments {
            return None;
        }
        // i < MAX_SEGMENTS and mss <= 65535: no overflow.
        let start = self.header_len + i * self.mss;
        Some((start, (start + self.mss).min(self.frame.len())))
    }

    /// Segment `i` (from 0): its header, written into `buf`, and its payload, a slice of the
    /// original frame. None past the last segment.
    pub fn segment<'h>(&self, i: usize, buf: &'h mut HeaderBuf) -> Option<(&'h [u8], &'a [u8])> {
        let (start, end) = self.payload_range(i)?;
        let payload = self.frame.get(start..end)?;
        let header = buf.get_mut(..self.header_len)?;
        header.copy_from_slice(self.frame.get(..self.header_len)?);

        let mut flags = self.flags;
        if i + 1 < self.segments {
            flags &= !(tcp::FIN | tcp::PSH);
        }
        if i > 0 {
            flags &= !tcp::CWR;
        }
        // The payload offset is below 65536: it fits in u32.
        let seq = self.seq.wrapping_add((start - self.header_len) as u32);
        // Both lengths are at most the frame's, at most 65535.
        let tcp_len = (self.header_len - self.l4 + payload.len()) as u16;
        if self.kind == GsoKind::Tcp4 {
            let ip_len = (self.header_len - self.l3 + payload.len()) as u16;
            let id = self.ip_id.wrapping_add(i as u16);
            let c = !fold(self.ip_sum + u64::from(ip_len) + u64::from(id));
            // new() checked that the IPv4 header (l3..l4) is inside the header.
            put16(header, self.l3 + ip4::TOTAL_LEN, ip_len);
            put16(header, self.l3 + ip4::ID, id);
            put16(header, self.l3 + ip4::CHECKSUM, c);
        } else {
            put16(header, self.l3 + ip6::PAYLOAD_LEN, tcp_len);
        }
        let t = self.l4;
        header[t + tcp::SEQ..t + tcp::SEQ + 4].copy_from_slice(&seq.to_be_bytes());
        header[t + tcp::FLAGS] = flags;
        let head = self.tcp_sum
            + u64::from(tcp_len)
            + u64::from(seq >> 16)
            + u64::from(seq & 0xffff)
            + u64::from(flags);
        let c = !fold(add(head, sum(0, payload)));
        put16(header, t + tcp::CHECKSUM, c);
        Some((header, payload))
    }
}

/// Skip the Ethernet header and up to two VLAN tags: (offset of L3, ethertype).
fn l2(frame: &[u8]) -> Result<(usize, u16), GsoError> {
    let mut at = eth::TYPE;
    let mut tags = 0;
    loop {
        let t = frame
            .get(at..at + 2)
            .ok_or(GsoError::TruncatedL2(frame.len()))?;
        let ethertype = u16::from_be_bytes([t[0], t[1]]);
        // A third tag comes back as the ethertype, which is no GSO kind's.
        if tags == 2 || (ethertype != eth::TYPE_VLAN && ethertype != eth::TYPE_QINQ) {
            return Ok((at + 2, ethertype));
        }
        at += eth::TAG_LEN;
        tags += 1;
    }
}

/// Check the IPv4 header at `l3`: (offset of TCP, header sum without length, id and checksum,
/// pseudo-header sum without length, identification).
fn ip4_header(frame: &[u8], l3: usize) -> Result<(usize, u64, u64, u16), GsoError> {
    let fixed = frame
        .get(l3..l3 + ip4::MIN_HEADER_LEN)
        .ok_or(GsoError::TruncatedL3)?;
    let version = fixed[ip4::VER_IHL] >> 4;
    if version != 4 {
        return Err(GsoError::BadIpVersion(version));
    }
    let ihl = fixed[ip4::VER_IHL] & 0x0f;
    if ihl < 5 {
        return Err(GsoError::BadIhl(ihl));
    }
    let len = usize::from(ihl) * 4;
    let h = frame.get(l3..l3 + len).ok_or(GsoError::TruncatedL3)?;
    if be16(h, ip4::FRAG) & (ip4::MORE_FRAGMENTS | ip4::OFFSET_MASK) != 0 {
        return Err(GsoError::Fragment);
    }
    if h[ip4::PROTOCOL] != proto::TCP {
        return Err(GsoError::NotTcp(h[ip4::PROTOCOL]));
    }
    let mut t = [0u8; ip4::MAX_HEADER_LEN];
    let t = &mut t[..len];
    t.copy_from_slice(h);
    t[ip4::TOTAL_LEN..ip4::TOTAL_LEN + 2].fill(0);
    t[ip4::ID..ip4::ID + 2].fill(0);
    t[ip4::CHECKSUM..ip4::CHECKSUM + 2].fill(0);
    let pseudo = fold(sum(0, &h[ip4::SRC..ip4::DST + 4]));
    Ok((
        l3 + len,
        sum(0, t),
        u64::from(pseudo) + u64::from(proto::TCP),
        be16(h, ip4::ID),
    ))
}

/// Check the IPv6 header at `l3`: as [`ip4_header`], without the IPv4-only parts (0).
fn ip6_header(frame: &[u8], l3: usize) -> Result<(usize, u64, u64, u16), GsoError> {
    let h = frame
        .get(l3..l3 + ip6::HEADER_LEN)
        .ok_or(GsoError::TruncatedL3)?;
    let version = h[0] >> 4;
    if version != 6 {
        return Err(GsoError::BadIpVersion(version));
    }
    if h[ip6::NEXT_HEADER] != proto::TCP {
        return Err(GsoError::NotTcp(h[ip6::NEXT_HEADER]));
    }
    let pseudo = fold(sum(0, &h[ip6::SRC..ip6::DST + 16]));
    Ok((
        l3 + ip6::HEADER_LEN,
        0,
        u64::from(pseudo) + u64::from(proto::TCP),
        0,
    ))
}

#[cfg(test)]
#[path = "gso_tests.rs"]
mod tests;

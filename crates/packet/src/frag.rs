//! IPv4 fragmentation (RFC 791 §2.3, §3.2): how one IPv4 packet splits into fragments no longer
//! than a given size, and the header of each fragment. It works on bytes only: it never
//! allocates, never touches a buffer pool and never decides whether a packet may be fragmented
//! (a DF packet is refused here, but the ICMP answer and any policy are the caller's).
//!
//! Every fragment keeps the original header's length: in fragments after the first, options
//! without the "copied" flag are overwritten with NOPs (as Linux does), so every fragment
//! carries the same payload step (a multiple of 8) except the last. A packet that is already
//! a fragment splits into fragments of it: offsets continue from its own and the last piece
//! keeps its "more fragments" flag.

use crate::checksum;
use crate::headers::{be16, ip4, put16};

/// The DF ("don't fragment") flag of the IPv4 flags/offset word.
pub const DONT_FRAGMENT: u16 = 0x4000;

/// Largest offset (in bytes) a fragment may start at: 13 bits of 8-byte units.
const MAX_OFFSET: usize = (ip4::OFFSET_MASK as usize) * 8;

/// Option type "end of option list".
const OPT_END: u8 = 0;
/// Option type "no operation".
const OPT_NOP: u8 = 1;
/// The "copied" bit of an option type: the option goes into every fragment.
const OPT_COPIED: u8 = 0x80;

/// Why a packet cannot be fragmented (it is left as it was).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FragError {
    /// Not a whole IPv4 packet: bad version, header length or total length for the bytes given.
    #[error("not a whole IPv4 packet")]
    Malformed,
    /// An option's length runs past the header (its non-copied options cannot be blanked).
    #[error("IPv4 options do not parse")]
    BadOptions,
    /// DF is set: the sender asked for no fragmentation.
    #[error("DF is set")]
    DontFragment,
    /// `max_len` leaves no room for 8 payload bytes after the header.
    #[error("fragment size leaves no room for payload")]
    TooSmall,
    /// The fragments would need more than the caller allows, or an offset past 13 bits.
    #[error("too many fragments")]
    TooMany,
    /// The packet already fits `max_len`: there is nothing to split.
    #[error("packet already fits")]
    Fits,
}

/// How one IPv4 packet splits: made by `Ip4Split::plan`, then asked for each fragment's
/// payload range (`payload_range`) and header (`write_header`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip4Split {
    /// The original header's length (every fragment's header length).
    header_len: usize,
    /// The original packet's payload bytes (total length minus header).
    payload_len: usize,
    /// Payload bytes per fragment but the last (a multiple of 8).
    step: usize,
    /// The original packet's fragment offset, in bytes.
    base_offset: usize,
    /// The original packet's "more fragments" flag.
    more: bool,
    /// Number of fragments.
    count: usize,
}

impl Ip4Split {
    /// Plan the split of the IPv4 packet at the start of `packet` (its total length is read
    /// from its header; bytes after it, such as L2 padding, are ignored) into fragments of at
    /// most `max_len` bytes each, refusing more than `max_fragments`.
    pub fn plan(
        packet: &[u8],
        max_len: usize,
        max_fragments: usize,
    ) -> Result<Ip4Split, FragError> {
        let header_len = header_len(packet)?;
        let total = usize::from(be16(packet, ip4::TOTAL_LEN));
        if total < header_len || total > packet.len() {
            return Err(FragError::Malformed);
        }
        let flags = be16(packet, ip4::FRAG);
        if flags & DONT_FRAGMENT != 0 {
            return Err(FragError::DontFragment);
        }
        if total <= max_len {
            return Err(FragError::Fits);
        }
        let step = max_len.saturating_sub(header_len) & !7;
        if step == 0 {
            return Err(FragError::TooSmall);
        }
        let payload_len = total - header_len;
        let count = payload_len.div_ceil(step);
        let base_offset = usize::from(flags & ip4::OFFSET_MASK) * 8;
        let last_offset = base_offset + (count - 1) * step;
        if count > max_fragments || last_offset > MAX_OFFSET {
            return Err(FragError::TooMany);
        }
        check_options(&packet[ip4::MIN_HEADER_LEN..header_len])?;
        Ok(Ip4Split {
            header_len,
            payload_len,
            step,
            base_offset,
            more: flags & ip4::MORE_FRAGMENTS != 0,
            count,
        })
    }

    /// Number of fragments.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Length of every fragment's header.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Where fragment `k`'s payload lies in the original packet (offsets from its IP header),
    /// as `(start, len)`.
    pub fn payload_range(&self, k: usize) -> (usize, usize) {
        let start = k * self.step;
        let len = self.step.min(self.payload_len.saturating_sub(start));
        (self.header_len + start, len)
    }

    /// Fragment `k`'s total length (header and payload).
    pub fn fragment_len(&self, k: usize) -> usize {
        self.header_len + self.payload_range(k).1
    }

    /// Write fragment `k`'s header into `out` (at least `header_len` bytes) from the original
    /// header `original` (at least `header_len` bytes): total length, flags and offset, the
    /// non-copied options blanked after the first fragment, and a fresh header checksum.
    pub fn write_header(&self, original: &[u8], k: usize, out: &mut [u8]) {
        let hl = self.header_len;
        let h = &mut out[..hl];
        h.copy_from_slice(&original[..hl]);
        if k > 0 {
            blank_uncopied_options(&mut h[ip4::MIN_HEADER_LEN..]);
        }
        put16(h, ip4::TOTAL_LEN, self.fragment_len(k) as u16);
        let last = k + 1 == self.count;
        let more = if last { self.more } else { true };
        let offset = ((self.base_offset + k * self.step) / 8) as u16;
        let flags = if more { ip4::MORE_FRAGMENTS } else { 0 } | offset;
        put16(h, ip4::FRAG, flags);
        put16(h, ip4::CHECKSUM, 0);
        let c = checksum::checksum(h);
        put16(h, ip4::CHECKSUM, c);
    }
}

/// The header length of the IPv4 packet at the start of `packet`, checked against its bytes.
fn header_len(packet: &[u8]) -> Result<usize, FragError> {
    let first = *packet.first().ok_or(FragError::Malformed)?;
    let len = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || len < ip4::MIN_HEADER_LEN || len > packet.len() {
        return Err(FragError::Malformed);
    }
    Ok(len)
}

/// Walk the options; an option whose length is below 2 or runs past the header is refused.
fn check_options(options: &[u8]) -> Result<(), FragError> {
    let mut at = 0;
    while at < options.len() {
        match options[at] {
            OPT_END => return Ok(()),
            OPT_NOP => at += 1,
            _ => {
                let len = usize::from(*options.get(at + 1).ok_or(FragError::BadOptions)?);
                if len < 2 || at + len > options.len() {
                    return Err(FragError::BadOptions);
                }
                at += len;
            }
        }
    }
    Ok(())
}

/// Overwrite every option without the "copied" flag with NOPs (options already checked).
fn blank_uncopied_options(options: &mut [u8]) {
    let mut at = 0;
    while at < options.len() {
        match options[at] {
            OPT_END => return,
            OPT_NOP => at += 1,
            t => {
                let len = usize::from(options[at + 1]).clamp(2, options.len() - at);
                if t & OPT_COPIED == 0 {
                    options[at..at + len].fill(OPT_NOP);
                }
                at += len;
            }
        }
    }
}

#[cfg(test)]
#[path = "frag_tests.rs"]
mod tests;

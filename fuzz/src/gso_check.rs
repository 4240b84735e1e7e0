//! The body of the `gso_segment` fuzz target: arbitrary bytes as a TCP super-packet through
//! `packet::gso` (`segment_tcp`, `Segmenter`, `finish_checksum`). Never a panic; a refused
//! frame emits nothing; an accepted one gives segments whose payloads put together are the
//! original's, each at most mss bytes, with checksums that verify (summed here byte by byte,
//! not with `packet::checksum`). It only asserts; it never decides what a correct segment is
//! beyond these invariants (crates/packet/tests/gso_scapy.rs checks that against scapy).
//!
//! Input: byte 0 bit 0 chooses TCPv4 or TCPv6, bytes 1-2 the mss (big-endian, 0 included),
//! bytes 3-4 `csum_start` and `csum_offset` for `finish_checksum`; the rest is the frame.

use packet::gso::{
    finish_checksum, segment_tcp, GsoError, GsoKind, Segmenter, MAX_HEADER_LEN, MAX_SEGMENTS,
};

/// Ones'-complement sum of big-endian 16-bit words, byte by byte, folded.
fn naive_sum(parts: &[&[u8]]) -> u16 {
    let mut s: u64 = 0;
    let mut odd = false;
    for p in parts {
        for b in p.iter() {
            s += if odd {
                u64::from(*b)
            } else {
                u64::from(*b) << 8
            };
            odd = !odd;
        }
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Offsets of the IP and TCP headers of a frame `Segmenter` accepted.
fn offsets(frame: &[u8], kind: GsoKind) -> (usize, usize) {
    let mut l3 = 14;
    for _ in 0..2 {
        if matches!(
            u16::from_be_bytes([frame[l3 - 2], frame[l3 - 1]]),
            0x8100 | 0x88a8
        ) {
            l3 += 4;
        }
    }
    let l4 = match kind {
        GsoKind::Tcp4 => l3 + usize::from(frame[l3] & 0x0f) * 4,
        GsoKind::Tcp6 => l3 + 40,
    };
    (l3, l4)
}

pub fn run(data: &[u8]) {
    if data.len() < 5 {
        return;
    }
    let (head, frame) = data.split_at(5);
    let kind = if head[0] & 1 == 0 {
        GsoKind::Tcp4
    } else {
        GsoKind::Tcp6
    };
    let mss = u16::from_be_bytes([head[1], head[2]]);
    segments(frame, kind, mss);
    checksum(frame, usize::from(head[3]), usize::from(head[4]));
}

fn segments(frame: &[u8], kind: GsoKind, mss: u16) {
    let mut segs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let r = segment_tcp(frame, kind, mss, |h, p| {
        segs.push((h.to_vec(), p.to_vec()));
        true
    });
    let done = match r {
        Err(e) => {
            assert!(segs.is_empty(), "{e}: emitted before refusing");
            assert!(e.index() < GsoError::KINDS);
            assert!(!matches!(e, GsoError::ChecksumOutOfFrame { .. }));
            return;
        }
        Ok(done) => done,
    };
    assert_eq!((done.sent, done.segments), (segs.len(), segs.len()));
    let mss = usize::from(mss);
    let hl = segs[0].0.len();
    assert!(hl <= MAX_HEADER_LEN && hl <= frame.len());
    let payload = &frame[hl..];
    assert_eq!(segs.len(), payload.len().div_ceil(mss).max(1));
    assert!(segs.len() <= MAX_SEGMENTS);
    let (l3, l4) = offsets(frame, kind);
    assert!(l3 < l4 && l4 + 20 <= hl);
    let mut joined = Vec::with_capacity(payload.len());
    for (i, (h, p)) in segs.iter().enumerate() {
        assert_eq!(h.len(), hl);
        assert!(p.len() <= mss && (i + 1 == segs.len() || p.len() == mss));
        // Everything before the IP header is copied.
        assert_eq!(h[..l3], frame[..l3]);
        joined.extend_from_slice(p);
        let tcp_len = (hl - l4 + p.len()) as u16;
        let (src, dst) = match kind {
            GsoKind::Tcp4 => {
                assert_eq!(naive_sum(&[&h[l3..l4]]), 0xffff, "IPv4 header checksum");
                let len = u16::from_be_bytes([h[l3 + 2], h[l3 + 3]]);
                assert_eq!(usize::from(len), hl - l3 + p.len());
                (&h[l3 + 12..l3 + 16], &h[l3 + 16..l3 + 20])
            }
            GsoKind::Tcp6 => {
                assert_eq!(u16::from_be_bytes([h[l3 + 4], h[l3 + 5]]), tcp_len);
                (&h[l3 + 8..l3 + 24], &h[l3 + 24..l3 + 40])
            }
        };
        let pseudo = [0, 6, (tcp_len >> 8) as u8, tcp_len as u8];
        assert_eq!(
            naive_sum(&[src, dst, &pseudo, &h[l4..], p]),
            0xffff,
            "TCP checksum of segment {i}"
        );
    }
    assert_eq!(joined, payload);

    // Any segment on its own is the same as in order; a stop is honoured.
    let s = Segmenter::new(frame, kind, mss as u16).expect("accepted once");
    let mut buf = [0u8; MAX_HEADER_LEN];
    for i in [segs.len() - 1, segs.len() / 2, 0] {
        let (h, p) = s.segment(i, &mut buf).expect("segment in range");
        assert_eq!((h, p), (&segs[i].0[..], &segs[i].1[..]));
        assert_eq!(s.segment_len(i), Some(h.len() + p.len()));
    }
    assert!(s.segment(segs.len(), &mut buf).is_none());
    let stop = segs.len() / 2;
    let mut calls = 0;
    let done = segment_tcp(frame, kind, mss as u16, |_, _| {
        calls += 1;
        calls <= stop
    })
    .expect("accepted once");
    assert_eq!((done.sent, calls), (stop, stop + 1));
}

fn checksum(frame: &[u8], start: usize, offset: usize) {
    let mut f = frame.to_vec();
    match finish_checksum(&mut f, start, offset) {
        Err(e) => {
            assert!(matches!(e, GsoError::ChecksumOutOfFrame { .. }), "{e}");
            assert!(start + offset + 2 > frame.len());
            assert_eq!(f, frame);
        }
        Ok(()) => {
            let at = start + offset;
            assert!(at + 2 <= frame.len());
            assert_eq!(f[..at], frame[..at]);
            assert_eq!(f[at + 2..], frame[at + 2..]);
            let c = u16::from_be_bytes([f[at], f[at + 1]]);
            let want = !naive_sum(&[&frame[start..]]);
            assert!(c == want || (want == 0 && c == 0xffff), "{c:#x} {want:#x}");
        }
    }
}

//! Classic libpcap files (not pcapng): a reader that accepts microsecond and nanosecond magic in
//! either byte order and Ethernet link type only, and a writer of nanosecond little-endian files.
//! It owns the file format; it never panics on file contents and never allocates per record.

use crate::error::{path_name, PortError};
use crate::outfile::{HeldOutput, Truncate};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Magic of microsecond-resolution files (as written by the writing host).
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic of nanosecond-resolution files.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Link type of Ethernet (`LINKTYPE_ETHERNET`).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Size of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest captured length accepted whatever the file's snaplen says (libpcap's limit).
pub const MAX_CAPLEN: u32 = 256 * 1024;
/// Snap length the writer declares.
pub const WRITER_SNAPLEN: u32 = 65535;
/// Size of the reader's and writer's I/O buffers.
const IO_BUFFER: usize = 256 * 1024;

/// Resolution of a file's timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampPrecision {
    /// Microseconds (magic 0xa1b2c3d4).
    Micro,
    /// Nanoseconds (magic 0xa1b23c4d).
    Nano,
}

/// One record read by `PcapReader::next_record`; its bytes are in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapRecord {
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Bytes captured (the first `caplen` bytes of the caller's buffer).
    pub caplen: usize,
    /// Length of the packet on the wire (may exceed `caplen` when the capture was snapped).
    pub orig_len: u32,
}

/// Reads a classic pcap file record by record into caller-provided buffers.
///
/// After an error other than `BufferTooSmall` the reader is finished: later calls return
/// `Ok(None)`.
#[derive(Debug)]
pub struct PcapReader<R: Read> {
    inner: R,
    name: String,
    big_endian: bool,
    precision: TimestampPrecision,
    version: (u16, u16),
    snaplen: u32,
    limit: u32,
    linktype: u32,
    records: u64,
    done: bool,
}

impl PcapReader<BufReader<File>> {
    /// Open a pcap file and read its header.
    pub fn open(path: &Path) -> Result<Self, PortError> {
        let name = path_name(path);
        // A regular file only: a FIFO could block the worker (and a capture) forever.
        let file = crate::outfile::open_input(path)?;
        PcapReader::new(BufReader::with_capacity(IO_BUFFER, file), &name)
    }
}

/// Read until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> PcapReader<R> {
    /// Read the file header from `inner`; `name` names the source in error messages.
    pub fn new(mut inner: R, name: &str) -> Result<Self, PortError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut inner, &mut h)
            .map_err(|e| PortError::io(name, "read file header", e))?;
        if got < FILE_HEADER_LEN {
            // Say "not pcap" rather than "truncated" when even the magic is wrong.
            if got >= 4 {
                check_magic(name, [h[0], h[1], h[2], h[3]])?;
            }
            return Err(PortError::TruncatedHeader {
                path: name.to_string(),
                got,
            });
        }
        let (precision, big_endian) = check_magic(name, [h[0], h[1], h[2], h[3]])?;
        let u16_at = |at: usize| {
            let b = [h[at], h[at + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |at: usize| {
            let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (major, minor) = (u16_at(4), u16_at(6));
        if major != 2 {
            return Err(PortError::BadVersion {
                path: name.to_string(),
                major,
                minor,
            });
        }
        let snaplen = u32_at(16);
        // The upper bits carry FCS information (libpcap's LT_LINKTYPE mask).
        let linktype = u32_at(20) & 0x03ff_ffff;
        if linktype != LINKTYPE_ETHERNET {
            return Err(PortError::BadLinkType {
                path: name.to_string(),
                linktype,
            });
        }
        let limit = if snaplen == 0 || snaplen > MAX_CAPLEN {
            MAX_CAPLEN
        } else {
            snaplen
        };
        Ok(PcapReader {
            inner,
            name: name.to_string(),
            big_endian,
            precision,
            version: (major, minor),
            snaplen,
            limit,
            linktype,
            records: 0,
            done: false,
        })
    }

    /// The name used in error messages (the path for files).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Resolution of the file's timestamps.
    pub fn precision(&self) -> TimestampPrecision {
        self.precision
    }

    /// True when the file was written big-endian.
    pub fn is_big_endian(&self) -> bool {
        self.big_endian
    }

    /// Format version (major, minor).
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// Snap length declared in the file header.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Link type (always Ethernet, 1, once opened).
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Largest captured length a record may have; a buffer this big never gets `BufferTooSmall`.
    pub fn max_caplen(&self) -> usize {
        self.limit as usize
    }

    /// Records read so far (including one that failed).
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// True after the end of the file or an error that ends reading.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Read the next record into `buf`. `Ok(None)` at the end of the file. A truncated record or
    /// one larger than `max_caplen()` is an error that ends reading; a record larger than `buf`
    /// is skipped with `BufferTooSmall` and reading can go on.
    pub fn next_record(&mut self, buf: &mut [u8]) -> Result<Option<PcapRecord>, PortError> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_record(buf);
        if !matches!(result, Ok(Some(_)) | Err(PortError::BufferTooSmall { .. })) {
            self.done = true;
        }
        result
    }

    fn read_record(&mut self, buf: &mut [u8]) -> Result<Option<PcapRecord>, PortError> {
        let mut h = [0u8; RECORD_HEADER_LEN];
        let record = self.records + 1;
        let got = read_full(&mut self.inner, &mut h)
            .map_err(|e| PortError::io(&self.name, format!("read record {record}"), e))?;
        if got == 0 {
            return Ok(None);
        }
        self.records = record;
        if got < RECORD_HEADER_LEN {
            return Err(PortError::TruncatedRecord {
                path: self.name.clone(),
                record,
                what: format!("header has {got} of {RECORD_HEADER_LEN} bytes"),
            });
        }
        let word = |at: usize| {
            let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (sec, frac, caplen, orig_len) = (word(0), word(4), word(8), word(12));
        if caplen > self.limit {
            return Err(PortError::RecordTooLarge {
                path: self.name.clone(),
                record,
                caplen,
                limit: self.limit,
            });
        }
        let frac_ns = match self.precision {
            TimestampPrecision::Micro => frac as u64 * 1_000,
            TimestampPrecision::Nano => frac as u64,
        };
        let timestamp_ns = (sec as u64 * 1_000_000_000).wrapping_add(frac_ns);
        let len = caplen as usize;
        let Some(dst) = buf.get_mut(..len) else {
            // Skip the bytes so the next record can still be read.
            let skipped = io::copy(&mut (&mut self.inner).take(len as u64), &mut io::sink())
                .map_err(|e| PortError::io(&self.name, format!("read record {record}"), e))?;
            if skipped < len as u64 {
                return Err(self.truncated_data(record, skipped as usize, len));
            }
            return Err(PortError::BufferTooSmall {
                path: self.name.clone(),
                record,
                caplen,
                capacity: buf.len(),
            });
        };
        let got = read_full(&mut self.inner, dst)
            .map_err(|e| PortError::io(&self.name, format!("read record {record}"), e))?;
        if got < len {
            return Err(self.truncated_data(record, got, len));
        }
        Ok(Some(PcapRecord {
            timestamp_ns,
            caplen: len,
            orig_len,
        }))
    }

    #[cold]
    fn truncated_data(&self, record: u64, got: usize, len: usize) -> PortError {
        PortError::TruncatedRecord {
            path: self.name.clone(),
            record,
            what: format!("data has {got} of {len} captured bytes"),
        }
    }
}

/// (precision, big-endian) of a magic number, or the error naming it.
fn check_magic(name: &str, b: [u8; 4]) -> Result<(TimestampPrecision, bool), PortError> {
    let le = u32::from_le_bytes(b);
    match (le, u32::from_be_bytes(b)) {
        (MAGIC_MICROS, _) => Ok((TimestampPrecision::Micro, false)),
        (MAGIC_NANOS, _) => Ok((TimestampPrecision::Nano, false)),
        (_, MAGIC_MICROS) => Ok((TimestampPrecision::Micro, true)),
        (_, MAGIC_NANOS) => Ok((TimestampPrecision::Nano, true)),
        _ => Err(PortError::BadMagic {
            path: name.to_string(),
            magic: le,
        }),
    }
}

/// Writes a classic pcap file: nanosecond magic, little-endian, version 2.4, snaplen 65535,
/// Ethernet. Records are gathered in a buffer and written out whole; call `flush` to see write
/// errors (dropping flushes and ignores them).
///
/// The file only ever ends on a record boundary: when writing the buffer fails or falls short
/// (a full disk), the file is cut back to its last whole record, the buffered records are lost
/// (`records_lost`), and every later write is refused with the first error: a capture that
/// could not be written whole stops rather than leaving a file no reader parses to the end.
#[derive(Debug)]
pub struct PcapWriter<W: Truncate> {
    inner: W,
    /// Whole records (and, at first, the file header) not yet written to `inner`.
    pending: Vec<u8>,
    pending_records: u64,
    name: String,
    /// Bytes of `inner` known to hold the header and whole records.
    written_len: u64,
    written_records: u64,
    lost_records: u64,
    lost_bytes: u64,
    /// The first write error; once set, nothing more is written.
    failure: Option<String>,
}

impl PcapWriter<HeldOutput> {
    /// Create (or truncate) a pcap file and write its header (see `outfile::create_output`:
    /// no symlink, a regular file only, locked against a second writer).
    pub fn create(path: &Path) -> Result<Self, PortError> {
        PcapWriter::create_checked(path, &[], format!("the pcap file `{}`", path.display()))
    }

    /// `create`, refusing also the files `forbidden` (the config and the inputs of a run); the
    /// file is held as `role` (see `outfile::HeldOutput`) while the writer lives.
    pub fn create_checked(
        path: &Path,
        forbidden: &[crate::outfile::FileId],
        role: impl Into<String>,
    ) -> Result<Self, PortError> {
        let name = path_name(path);
        let file = crate::outfile::create_held(path, forbidden, role)?;
        PcapWriter::new(file, &name)
    }
}

impl<W: Truncate> PcapWriter<W> {
    /// A writer into `inner` (empty: the file header is its first bytes); `name` names the
    /// destination in error messages. The header is written with the first flush.
    pub fn new(inner: W, name: &str) -> Result<Self, PortError> {
        let mut pending = Vec::with_capacity(IO_BUFFER);
        let mut h = [0u8; FILE_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&WRITER_SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        pending.extend_from_slice(&h);
        Ok(PcapWriter {
            inner,
            pending,
            pending_records: 0,
            name: name.to_string(),
            written_len: 0,
            written_records: 0,
            lost_records: 0,
            lost_bytes: 0,
            failure: None,
        })
    }

    /// The name used in error messages (the path for files).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Records in the file: written out whole (buffered ones are not counted until a flush).
    pub fn records_written(&self) -> u64 {
        self.written_records
    }

    /// Records accepted by `write_record` and not yet written out.
    pub fn records_buffered(&self) -> u64 {
        self.pending_records
    }

    /// Records accepted by `write_record` that a failed write lost.
    pub fn records_lost(&self) -> u64 {
        self.lost_records
    }

    /// Captured bytes (without record headers) of the records a failed write lost.
    pub fn bytes_lost(&self) -> u64 {
        self.lost_bytes
    }

    /// The first write error, if writing failed (the file then ends after `records_written`).
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Append a record: capture time in ns since the epoch, the bytes (cut at the snaplen) and
    /// the length on the wire (at least the bytes written). An error when the buffer had to be
    /// written out and that failed (see the type's comment), or when an earlier write failed;
    /// this record is then not accepted.
    #[inline]
    pub fn write_record(
        &mut self,
        timestamp_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> Result<(), PortError> {
        let data = &data[..data.len().min(WRITER_SNAPLEN as usize)];
        if self.failure.is_some() || self.pending.len() + RECORD_HEADER_LEN + data.len() > IO_BUFFER
        {
            self.flush()?;
        }
        let caplen = data.len() as u32;
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&((timestamp_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((timestamp_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&caplen.to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(caplen).to_le_bytes());
        // Within the capacity reserved at creation: no allocation.
        self.pending.extend_from_slice(&h);
        self.pending.extend_from_slice(data);
        self.pending_records += 1;
        Ok(())
    }

    /// Write out the buffered records. When that fails or falls short, the records that did
    /// reach the file whole stay, the file is cut back to the end of the last of them, the rest
    /// are lost, and this and every later call return the error.
    pub fn flush(&mut self) -> Result<(), PortError> {
        if let Some(f) = &self.failure {
            return Err(self.failed(f.clone()));
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        let mut result = Ok(());
        while done < self.pending.len() {
            match self.inner.write(&self.pending[done..]) {
                Ok(0) => {
                    result = Err(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        match result.and_then(|()| self.inner.flush()) {
            Ok(()) => {
                self.written_len += self.pending.len() as u64;
                self.written_records += self.pending_records;
                self.pending.clear();
                self.pending_records = 0;
                Ok(())
            }
            Err(e) => Err(self.write_failed(e, done)),
        }
    }

    /// (bytes, records) at the start of `pending` that hold whole records (and the file header
    /// if it is in `pending`) within its first `done` bytes.
    fn whole_prefix(&self, done: usize) -> (usize, u64) {
        let mut at = if self.written_len == 0 {
            FILE_HEADER_LEN
        } else {
            0
        };
        if at > done {
            return (0, 0);
        }
        let mut records = 0;
        while records < self.pending_records {
            let Some(h) = self.pending.get(at..at + RECORD_HEADER_LEN) else {
                break;
            };
            let caplen = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            let end = at + RECORD_HEADER_LEN + caplen;
            if end > done {
                break;
            }
            at = end;
            records += 1;
        }
        (at, records)
    }

    #[cold]
    fn write_failed(&mut self, e: io::Error, done: usize) -> PortError {
        let (kept_len, kept_records) = self.whole_prefix(done);
        let header = if self.written_len == 0 {
            FILE_HEADER_LEN
        } else {
            0
        };
        let lost_records = self.pending_records - kept_records;
        let lost_framing =
            if kept_len == 0 { header } else { 0 } + lost_records as usize * RECORD_HEADER_LEN;
        self.lost_bytes += (self.pending.len() - kept_len - lost_framing) as u64;
        self.lost_records += lost_records;
        self.written_len += kept_len as u64;
        self.written_records += kept_records;
        let cut = match self.inner.truncate_to(self.written_len) {
            Ok(()) => String::new(),
            Err(c) => format!(" (and cutting it back failed: {c})"),
        };
        let first = self.written_records + 1;
        let last = self.written_records + lost_records;
        let what = match (self.written_len, lost_records) {
            (0, _) => "the file header was".to_string(),
            (_, 1) => format!("record {first} was"),
            _ => format!("records {first}..={last} were"),
        };
        let why = format!(
            "{what} not written ({e}); the file ends after the {} whole record{} before{cut}",
            self.written_records,
            if self.written_records == 1 { "" } else { "s" }
        );
        self.pending.clear();
        self.pending_records = 0;
        self.failure = Some(why.clone());
        self.failed(why)
    }

    #[cold]
    fn failed(&self, why: String) -> PortError {
        PortError::io(&self.name, "write", io::Error::other(why))
    }
}

impl<W: Truncate> Drop for PcapWriter<W> {
    fn drop(&mut self) {
        // Errors are the caller's to see through `flush`; the file stays whole either way.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use packet::headers::{build_udp_frame, UdpFrameSpec};

    /// A file written by hand: `precision`/`big_endian` header, then (sec, frac, bytes) records.
    fn handmade(
        precision: TimestampPrecision,
        big_endian: bool,
        linktype: u32,
        records: &[(u32, u32, Vec<u8>)],
    ) -> Vec<u8> {
        let w32 = |v: u32| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let magic = match precision {
            TimestampPrecision::Micro => MAGIC_MICROS,
            TimestampPrecision::Nano => MAGIC_NANOS,
        };
        let mut f = Vec::new();
        f.extend_from_slice(&w32(magic));
        f.extend_from_slice(&w16(2));
        f.extend_from_slice(&w16(4));
        f.extend_from_slice(&w32(0));
        f.extend_from_slice(&w32(0));
        f.extend_from_slice(&w32(65535));
        f.extend_from_slice(&w32(linktype));
        for (sec, frac, bytes) in records {
            f.extend_from_slice(&w32(*sec));
            f.extend_from_slice(&w32(*frac));
            f.extend_from_slice(&w32(bytes.len() as u32));
            f.extend_from_slice(&w32(bytes.len() as u32 + 4));
            f.extend_from_slice(bytes);
        }
        f
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<(PcapRecord, Vec<u8>)>, PortError> {
        let mut r = PcapReader::new(bytes, "mem.pcap")?;
        let mut buf = vec![0u8; r.max_caplen()];
        let mut out = Vec::new();
        while let Some(rec) = r.next_record(&mut buf)? {
            out.push((rec, buf[..rec.caplen].to_vec()));
        }
        Ok(out)
    }

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                build_udp_frame(&UdpFrameSpec {
                    src_port: 1000 + i as u16,
                    frame_size: 64 + i * 37,
                    ..UdpFrameSpec::default()
                })
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        let mut file = Vec::new();
        let fs = frames(20);
        {
            let mut w = PcapWriter::new(&mut file, "mem.pcap").expect("writer");
            for (i, f) in fs.iter().enumerate() {
                let ts = 1_700_000_000_123_456_789 + i as u64 * 1_001;
                w.write_record(ts, f, f.len() as u32 + (i as u32 % 2))
                    .expect("write");
            }
            w.flush().expect("flush");
            assert_eq!(w.records_written(), 20);
        }
        // Header: nanosecond magic, LE, 2.4, snaplen 65535, Ethernet.
        assert_eq!(&file[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&file[4..8], &[2, 0, 4, 0]);
        assert_eq!(&file[16..20], &65535u32.to_le_bytes());
        assert_eq!(&file[20..24], &1u32.to_le_bytes());
        let recs = read_all(&file).expect("read");
        assert_eq!(recs.len(), 20);
        for (i, (rec, bytes)) in recs.iter().enumerate() {
            assert_eq!(
                rec.timestamp_ns,
                1_700_000_000_123_456_789 + i as u64 * 1_001
            );
            assert_eq!(bytes, &fs[i]);
            assert_eq!(rec.orig_len, fs[i].len() as u32 + (i as u32 % 2));
        }
        let r = PcapReader::new(&file[..], "mem.pcap").expect("reader");
        assert_eq!(r.precision(), TimestampPrecision::Nano);
        assert!(!r.is_big_endian());
        assert_eq!(r.version(), (2, 4));
        assert_eq!(r.snaplen(), 65535);
        assert_eq!(r.linktype(), 1);
    }

    #[test]
    fn both_magics_both_endians() {
        let data = frames(3);
        let recs: Vec<_> = data
            .iter()
            .enumerate()
            .map(|(i, f)| (1_600_000_000 + i as u32, 999_999 - i as u32, f.clone()))
            .collect();
        for precision in [TimestampPrecision::Micro, TimestampPrecision::Nano] {
            for big_endian in [false, true] {
                let file = handmade(precision, big_endian, 1, &recs);
                let r = PcapReader::new(&file[..], "x").expect("header");
                assert_eq!(r.precision(), precision);
                assert_eq!(r.is_big_endian(), big_endian);
                let got = read_all(&file).expect("records");
                assert_eq!(got.len(), 3);
                for (i, (rec, bytes)) in got.iter().enumerate() {
                    let frac = 999_999 - i as u64;
                    let frac_ns = match precision {
                        TimestampPrecision::Micro => frac * 1000,
                        TimestampPrecision::Nano => frac,
                    };
                    let want = (1_600_000_000 + i as u64) * 1_000_000_000 + frac_ns;
                    assert_eq!(rec.timestamp_ns, want, "{precision:?} BE={big_endian}");
                    assert_eq!(bytes, &data[i]);
                    assert_eq!(rec.orig_len as usize, data[i].len() + 4);
                }
            }
        }
    }

    #[test]
    fn truncated_header() {
        for len in [0usize, 3, 4, 10, 23] {
            let file = handmade(TimestampPrecision::Nano, false, 1, &[]);
            let err = PcapReader::new(&file[..len], "short.pcap").expect_err("truncated");
            assert!(
                matches!(err, PortError::TruncatedHeader { got, .. } if got == len),
                "{err}"
            );
            assert!(err.to_string().contains("short.pcap"));
        }
    }

    #[test]
    fn not_pcap_and_bad_version() {
        let mut file = handmade(TimestampPrecision::Nano, false, 1, &[]);
        file[0..4].copy_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a]); // pcapng section header
        let err = PcapReader::new(&file[..], "ng.pcapng").expect_err("pcapng");
        assert!(matches!(err, PortError::BadMagic { .. }));
        assert!(err.to_string().contains("pcapng is not supported"), "{err}");
        let mut file = handmade(TimestampPrecision::Nano, false, 1, &[]);
        file[4] = 1;
        let err = PcapReader::new(&file[..], "v1.pcap").expect_err("version");
        assert!(
            matches!(err, PortError::BadVersion { major: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn wrong_linktype() {
        let file = handmade(TimestampPrecision::Micro, true, 101, &[]);
        let err = PcapReader::new(&file[..], "raw.pcap").expect_err("linktype");
        assert!(matches!(err, PortError::BadLinkType { linktype: 101, .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("raw.pcap") && msg.contains("1 (Ethernet)"),
            "{msg}"
        );
        // FCS bits above the link type are ignored.
        let file = handmade(TimestampPrecision::Micro, false, 1 | 0x1000_0000, &[]);
        assert!(PcapReader::new(&file[..], "fcs.pcap").is_ok());
    }

    #[test]
    fn truncated_record_header_and_data() {
        let recs = vec![(1, 2, vec![7u8; 100]), (3, 4, vec![8u8; 80])];
        let file = handmade(TimestampPrecision::Nano, false, 1, &recs);
        let whole = file.len();
        // Cut inside the second record's header, then inside its data.
        for (cut, header) in [(whole - 80 - 10, true), (whole - 1, false)] {
            let mut r = PcapReader::new(&file[..cut], "cut.pcap").expect("header");
            let mut buf = vec![0u8; r.max_caplen()];
            let first = r.next_record(&mut buf).expect("first").expect("some");
            assert_eq!(first.caplen, 100);
            let err = r.next_record(&mut buf).expect_err("truncated");
            match &err {
                PortError::TruncatedRecord { record, what, .. } => {
                    assert_eq!(*record, 2);
                    assert_eq!(what.contains("header"), header, "{what}");
                }
                e => panic!("unexpected {e}"),
            }
            // The reader is finished after the error.
            assert!(r.is_done());
            assert!(r.next_record(&mut buf).expect("done").is_none());
        }
    }

    #[test]
    fn oversized_record_is_an_error_not_a_panic() {
        let mut file = handmade(TimestampPrecision::Nano, false, 1, &[(1, 2, vec![0u8; 64])]);
        // Claim 300000 captured bytes (over 256 KiB and over the snaplen).
        file[24 + 8..24 + 12].copy_from_slice(&300_000u32.to_le_bytes());
        let mut r = PcapReader::new(&file[..], "big.pcap").expect("header");
        let mut buf = vec![0u8; r.max_caplen()];
        let err = r.next_record(&mut buf).expect_err("too large");
        assert!(matches!(
            err,
            PortError::RecordTooLarge {
                caplen: 300_000,
                limit: 65535,
                ..
            }
        ));
    }

    #[test]
    fn small_buffer_skips_the_record() {
        let recs = vec![(1, 0, vec![1u8; 200]), (2, 0, vec![2u8; 50])];
        let file = handmade(TimestampPrecision::Nano, false, 1, &recs);
        let mut r = PcapReader::new(&file[..], "m").expect("header");
        let mut buf = [0u8; 100];
        let err = r.next_record(&mut buf).expect_err("small");
        assert!(matches!(err, PortError::BufferTooSmall { caplen: 200, .. }));
        let rec = r.next_record(&mut buf).expect("second").expect("some");
        assert_eq!(&buf[..rec.caplen], &[2u8; 50][..]);
        assert!(r.next_record(&mut buf).expect("eof").is_none());
    }

    #[test]
    fn files_on_disk_and_open_errors() {
        let dir = TempDir::new("pcapfile");
        let path = dir.path("a.pcap");
        let fs = frames(5);
        let mut w = PcapWriter::create(&path).expect("create");
        for f in &fs {
            w.write_record(1, f, f.len() as u32).expect("write");
        }
        w.flush().expect("flush");
        drop(w);
        let mut r = PcapReader::open(&path).expect("open");
        let mut buf = vec![0u8; r.max_caplen()];
        let mut n = 0;
        while r.next_record(&mut buf).expect("rec").is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
        let missing = dir.path("missing.pcap");
        let err = PcapReader::open(&missing).expect_err("missing");
        assert!(err.to_string().contains("missing.pcap"), "{err}");
        let err = PcapWriter::create(&dir.path("no/such/dir.pcap")).expect_err("no dir");
        assert!(matches!(err, PortError::Io { .. }));
    }

    #[test]
    fn flush_reports_write_errors() {
        let path = Path::new("/dev/full");
        if !path.exists() {
            testenv::skip("/dev/full does not exist");
            return;
        }
        // A device is refused as an output file; the write path is tested on it directly.
        assert!(PcapWriter::create(path).is_err());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open /dev/full");
        let mut w = PcapWriter::new(file, "/dev/full").expect("header buffered");
        w.write_record(1, &[0u8; 60], 60).expect("buffered");
        let err = w.flush().expect_err("disk full");
        assert!(err.to_string().contains("/dev/full"), "{err}");
    }

    /// A file system with room for `room` bytes: a write past it is cut short, the next one
    /// fails with ENOSPC (as a full disk does).
    struct SmallDisk {
        bytes: Vec<u8>,
        room: usize,
    }

    impl std::io::Write for SmallDisk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let free = self.room - self.bytes.len();
            if free == 0 && !buf.is_empty() {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = free.min(buf.len());
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Truncate for SmallDisk {
        fn truncate_to(&mut self, len: u64) -> io::Result<()> {
            self.bytes.truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_leaves_whole_records_and_stops_the_writer() {
        let fs = frames(10);
        let whole = |n: usize| -> usize {
            FILE_HEADER_LEN
                + fs[..n]
                    .iter()
                    .map(|f| RECORD_HEADER_LEN + f.len())
                    .sum::<usize>()
        };
        // Room for three records and half of the fourth.
        let room = whole(3) + (RECORD_HEADER_LEN + fs[3].len()) / 2;
        let mut disk = SmallDisk {
            bytes: Vec::new(),
            room,
        };
        {
            // One flush: the three records that reached the file whole are kept.
            let mut w = PcapWriter::new(&mut disk, "small.pcap").expect("writer");
            for (i, f) in fs.iter().enumerate() {
                w.write_record(i as u64, f, f.len() as u32)
                    .expect("buffered");
            }
            let e = w.flush().expect_err("disk full");
            let msg = e.to_string();
            assert!(
                msg.contains("small.pcap")
                    && msg.contains("records 4..=10 were not written")
                    && msg.contains("No space left on device")
                    && msg.contains("ends after the 3 whole records"),
                "{msg}"
            );
            assert_eq!((w.records_written(), w.records_lost()), (3, 7));
            let lost: usize = fs[3..].iter().map(Vec::len).sum();
            assert_eq!(w.bytes_lost(), lost as u64);
            assert!(w.failure().is_some());
            // Nothing more is accepted, and every flush says why.
            assert!(w.write_record(0, &fs[0], 60).is_err());
            assert!(w.flush().is_err());
        }
        assert_eq!(
            disk.bytes.len(),
            whole(3),
            "cut back to the last whole record"
        );
        let recs = read_all(&disk.bytes).expect("the file parses to its end");
        assert_eq!(recs.len(), 3);
        // No room even for the header: an empty file, never a torn one.
        let mut tiny = SmallDisk {
            bytes: Vec::new(),
            room: 10,
        };
        let mut w = PcapWriter::new(&mut tiny, "tiny.pcap").expect("writer");
        let e = w.flush().expect_err("no room");
        assert!(
            e.to_string().contains("the file header was not written"),
            "{e}"
        );
        drop(w);
        assert!(tiny.bytes.is_empty());
    }

    #[test]
    fn readable_by_tcpdump() {
        let dir = TempDir::new("tcpdump");
        let path = dir.path("t.pcap");
        let mut w = PcapWriter::create(&path).expect("create");
        let v6 = UdpFrameSpec {
            src_ip: "2001:db8::1".parse().expect("addr"),
            dst_ip: "2001:db8::2".parse().expect("addr"),
            vlan: Some(7),
            frame_size: 128,
            ..UdpFrameSpec::default()
        };
        let fs = [
            build_udp_frame(&UdpFrameSpec::default()),
            build_udp_frame(&v6),
        ];
        for (i, f) in fs.iter().enumerate() {
            w.write_record(
                1_700_000_000_000_000_000 + i as u64 * 1_500,
                f,
                f.len() as u32,
            )
            .expect("write");
        }
        w.flush().expect("flush");
        drop(w);
        let out = match std::process::Command::new("tcpdump")
            .args(["-nn", "-r"])
            .arg(&path)
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                testenv::skip(&format!("cannot run tcpdump ({e})"));
                return;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        println!("tcpdump said:\n{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tcpdump failed: {stderr}");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{stdout}");
        assert!(lines[0].contains("198.18.0.1.1024 > 198.19.0.1.1024: UDP, length 18"));
        assert!(lines[1].contains("vlan 7") || lines[1].contains("2001:db8::1.1024"));
        assert!(
            stdout.contains("2001:db8::1.1024 > 2001:db8::2.1024"),
            "{stdout}"
        );
        // Nanosecond timestamps survive (tcpdump prints microseconds by default).
        assert!(lines[1].contains(".000001"), "{stdout}");
    }
}

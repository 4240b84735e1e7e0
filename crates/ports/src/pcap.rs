//! The pcap port: `PcapRx` replays a classic pcap file into the graph, `PcapTx` captures the
//! packets it is given into one. They copy bytes between file and buffers and count them; they
//! never panic on file contents and never allocate per packet.

use crate::error::PortError;
use crate::outfile::HeldOutput;
use crate::pcapfile::{PcapReader, PcapWriter};
use graph::{Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::{BufferPool, VECTOR_SIZE};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

/// Input node that reads Ethernet frames from a pcap file, up to one vector per poll.
///
/// Frames that are empty, larger than a buffer's data area, or that find no free buffer are
/// counted in `rx_drops`. A read error or a truncated file is counted as one drop and ends the
/// replay (`is_finished()` turns true, as it does at the end of the file).
pub struct PcapRx {
    name: String,
    port_id: u16,
    next: String,
    reader: PcapReader<BufReader<File>>,
    scratch: Box<[u8]>,
    stats: Arc<PortStats>,
    finished: bool,
    error: Option<PortError>,
    /// (buffer, record number) of the packets of the last poll, for `trace`.
    last: Vec<(u32, u64)>,
}

impl PcapRx {
    /// Open `path` for port `port_id`; packets go to the node named `next` (normally
    /// `ethernet-input`).
    pub fn open(
        node_name: String,
        port_id: u16,
        path: &Path,
        next: String,
        stats: Arc<PortStats>,
    ) -> Result<PcapRx, PortError> {
        let reader = PcapReader::open(path)?;
        let scratch = vec![0u8; reader.max_caplen()].into_boxed_slice();
        Ok(PcapRx {
            name: node_name,
            port_id,
            next,
            reader,
            scratch,
            stats,
            finished: false,
            error: None,
            last: Vec::with_capacity(VECTOR_SIZE),
        })
    }

    /// The port number stamped into `rx_port`.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The error that ended the replay early, if any.
    pub fn error(&self) -> Option<&PortError> {
        self.error.as_ref()
    }

    /// Records read from the file so far (received or dropped).
    pub fn records_read(&self) -> u64 {
        self.reader.records_read()
    }
}

impl InputNode for PcapRx {
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
        self.last.clear();
        if self.finished || out.is_empty() {
            return (0, Dispatch::AllTo(0));
        }
        let got = cx.pool.alloc_batch(out);
        let data_size = cx.pool.data_size();
        let (mut n, mut bytes, mut drops) = (0usize, 0u64, 0u64);
        for _ in 0..out.len() {
            match self.reader.next_record(&mut self.scratch) {
                Ok(Some(rec)) => {
                    let (len, b) = (rec.caplen, out.get(n).copied());
                    let Some(b) = b.filter(|_| n < got && len > 0 && len <= data_size) else {
                        drops += 1;
                        continue;
                    };
                    if !cx.pool.write_packet(b, &self.scratch[..len]) {
                        drops += 1;
                        continue;
                    }
                    let m = cx.pool.meta_mut(b);
                    m.rx_port = self.port_id;
                    m.timestamp_ns = rec.timestamp_ns;
                    if self.last.len() < self.last.capacity() {
                        self.last.push((b, self.reader.records_read()));
                    }
                    n += 1;
                    bytes += len as u64;
                }
                Ok(None) => {
                    self.finished = true;
                    break;
                }
                Err(PortError::BufferTooSmall { .. }) => drops += 1,
                Err(e) => {
                    drops += 1;
                    self.stats.fail(e.to_string());
                    self.error = Some(e);
                    self.finished = true;
                    break;
                }
            }
        }
        cx.pool.free_batch(&out[n..got]);
        self.stats.rx_packets.add(n as u64);
        self.stats.rx_bytes.add(bytes);
        if drops > 0 {
            self.stats.rx_drops.add(drops);
        }
        (n, Dispatch::AllTo(0))
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let len = pool.meta(buffer).length;
        match self.last.iter().find(|(b, _)| *b == buffer) {
            Some((_, frame)) => format!("pcap rx: frame {frame}, {len} bytes"),
            None => format!("pcap rx: frame ?, {len} bytes"),
        }
    }
}

/// Output node that writes every packet it is given to a pcap file and frees it.
///
/// Each record carries the packet's `timestamp_ns` (the wall clock when that is 0). A write error
/// (a full disk) ends the capture with whole records only (see `PcapWriter`): the packets that
/// were not written, buffered ones included, move from `tx_packets` to `tx_drops`, and the port
/// fails (`PortStats::fail`: shown, in the stats, and the run's exit status). `finish()` (and
/// dropping) flushes the file.
pub struct PcapTx {
    name: String,
    port_id: u16,
    writer: PcapWriter<HeldOutput>,
    stats: Arc<PortStats>,
    error: Option<PortError>,
    flushed: bool,
}

impl PcapTx {
    /// Create (or truncate) `path` for port `port_id`.
    pub fn create(
        node_name: String,
        port_id: u16,
        path: &Path,
        stats: Arc<PortStats>,
    ) -> Result<PcapTx, PortError> {
        PcapTx::create_checked(node_name, port_id, path, stats, &[])
    }

    /// `create`, refusing also the files `forbidden` (the config and the inputs of a run).
    pub fn create_checked(
        node_name: String,
        port_id: u16,
        path: &Path,
        stats: Arc<PortStats>,
        forbidden: &[crate::outfile::FileId],
    ) -> Result<PcapTx, PortError> {
        let role = format!("the pcap file of `{node_name}`");
        Ok(PcapTx::with_writer(
            node_name,
            port_id,
            PcapWriter::create_checked(path, forbidden, role)?,
            stats,
        ))
    }

    /// A node writing through `writer`.
    pub(crate) fn with_writer(
        node_name: String,
        port_id: u16,
        writer: PcapWriter<HeldOutput>,
        stats: Arc<PortStats>,
    ) -> PcapTx {
        PcapTx {
            name: node_name,
            port_id,
            writer,
            stats,
            error: None,
            flushed: true,
        }
    }

    /// The port number this node stands for.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The first write or flush error, if any.
    pub fn error(&self) -> Option<&PortError> {
        self.error.as_ref()
    }

    /// Write out buffered records.
    pub fn flush(&mut self) -> Result<(), PortError> {
        self.flushed = true;
        if let Err(e) = self.writer.flush() {
            self.fail(e);
        }
        // After a failure every flush returns it again.
        self.writer.flush()
    }

    fn flush_or_report(&mut self) {
        if !self.flushed {
            let _ = self.flush();
        }
    }

    /// The file could not be written: count what it lost and fail the port (once).
    #[cold]
    fn fail(&mut self, e: PortError) {
        if self.error.is_some() {
            return;
        }
        // Buffered records were counted as sent when they were accepted; they never reached
        // the file. (Counters are single-writer: this worker is the writer.)
        let (lost, lost_bytes) = (self.writer.records_lost(), self.writer.bytes_lost());
        self.stats.tx_packets.add(lost.wrapping_neg());
        self.stats.tx_bytes.add(lost_bytes.wrapping_neg());
        self.stats.tx_drops.add(lost);
        eprintln!("{}: {e}", self.name);
        self.stats.fail(e.to_string());
        self.error = Some(e);
    }
}

fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Node for PcapTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        let (mut packets, mut bytes, mut drops) = (0u64, 0u64, 0u64);
        if self.error.is_some() {
            drops = frame.len() as u64;
        } else {
            let mut now = 0u64;
            self.flushed = false;
            for (i, &b) in frame.iter().enumerate() {
                let mut ts = cx.pool.meta(b).timestamp_ns;
                if ts == 0 {
                    if now == 0 {
                        now = wall_clock_ns();
                    }
                    ts = now;
                }
                let data = cx.pool.data(b);
                match self.writer.write_record(ts, data, data.len() as u32) {
                    Ok(()) => {
                        packets += 1;
                        bytes += data.len() as u64;
                    }
                    Err(e) => {
                        drops = (frame.len() - i) as u64;
                        self.fail(e);
                        break;
                    }
                }
            }
        }
        cx.pool.free_batch(frame);
        self.stats.tx_packets.add(packets);
        self.stats.tx_bytes.add(bytes);
        if drops > 0 {
            self.stats.tx_drops.add(drops);
        }
        Dispatch::Consumed
    }

    fn finish(&mut self) {
        self.flush_or_report();
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "pcap tx: port {}, {} bytes",
            self.port_id,
            pool.meta(buffer).length
        )
    }
}

impl Drop for PcapTx {
    fn drop(&mut self) {
        self.flush_or_report();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryTx;
    use crate::pcapfile::{PcapRecord, TimestampPrecision, MAGIC_MICROS};
    use crate::testutil::{node, pool, with_cx, TempDir};
    use graph::GraphBuilder;
    use packet::headers::{build_udp_frame, UdpFrameSpec};
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn frame(i: usize, size: usize) -> Vec<u8> {
        build_udp_frame(&UdpFrameSpec {
            src_port: i as u16,
            frame_size: size,
            ..UdpFrameSpec::default()
        })
    }

    /// Write `frames` (timestamp, bytes) to `path` with our writer.
    fn write_file(path: &Path, frames: &[(u64, Vec<u8>)]) {
        let mut w = PcapWriter::create(path).expect("create");
        for (ts, f) in frames {
            w.write_record(*ts, f, f.len() as u32).expect("write");
        }
        w.flush().expect("flush");
    }

    fn read_file(path: &Path) -> Vec<(PcapRecord, Vec<u8>)> {
        let mut r = PcapReader::open(path).expect("open");
        let mut buf = vec![0u8; r.max_caplen()];
        let mut out = Vec::new();
        while let Some(rec) = r.next_record(&mut buf).expect("record") {
            out.push((rec, buf[..rec.caplen].to_vec()));
        }
        out
    }

    fn rx(path: &Path, stats: &Arc<PortStats>, next: &str) -> PcapRx {
        PcapRx::open("pcap0-rx".into(), 2, path, next.into(), stats.clone()).expect("open")
    }

    /// Run pcap-rx -> pcap-tx over `input`; returns (rx stats, tx stats, pool fully returned).
    fn copy_file(
        input: &Path,
        output: &Path,
        data_size: u16,
    ) -> (Arc<PortStats>, Arc<PortStats>, bool) {
        let (rs, ts) = (
            Arc::new(PortStats::default()),
            Arc::new(PortStats::default()),
        );
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(rx(input, &rs, "pcap1-tx")))
            .add_node(Box::new(
                PcapTx::create("pcap1-tx".into(), 1, output, ts.clone()).expect("create"),
            ));
        let mut g = b.build(0, 1).expect("graph");
        let mut p = pool(1024, data_size);
        let mut polls = 0;
        while !g.is_finished() {
            g.run_once(&mut p);
            polls += 1;
            assert!(polls < 10_000, "replay does not end");
        }
        g.finish();
        let s = g.stats();
        assert_eq!(
            s.nodes[node(&s, "pcap1-tx")].packets.get(),
            rs.rx_packets.get()
        );
        (rs, ts, p.available() == p.capacity())
    }

    #[test]
    fn rx_to_tx_copies_a_file_byte_for_byte() {
        let dir = TempDir::new("copy");
        let (input, output) = (dir.path("in.pcap"), dir.path("out.pcap"));
        let frames: Vec<(u64, Vec<u8>)> = (0..600)
            .map(|i| {
                let ts = 1_700_000_000_000_000_000 + i as u64 * 1_234_567;
                (ts, frame(i, 64 + (i * 7) % 1455))
            })
            .collect();
        write_file(&input, &frames);
        let (rs, ts, all_back) = copy_file(&input, &output, 2048);
        assert!(all_back, "every buffer returned to the pool");
        let bytes: u64 = frames.iter().map(|(_, f)| f.len() as u64).sum();
        assert_eq!(rs.rx_packets.get(), 600);
        assert_eq!(rs.rx_bytes.get(), bytes);
        assert_eq!(ts.tx_packets.get(), 600);
        assert_eq!(ts.tx_bytes.get(), bytes);
        assert_eq!(rs.rx_drops.get() + ts.tx_drops.get(), 0);
        let a = std::fs::read(&input).expect("in");
        let b = std::fs::read(&output).expect("out");
        assert!(a == b, "output differs from input");
    }

    #[test]
    fn microsecond_big_endian_input_keeps_timestamps() {
        let dir = TempDir::new("micro");
        let (input, output) = (dir.path("in.pcap"), dir.path("out.pcap"));
        let mut file = Vec::new();
        file.extend_from_slice(&MAGIC_MICROS.to_be_bytes());
        file.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        file.extend_from_slice(&1514u32.to_be_bytes());
        file.extend_from_slice(&1u32.to_be_bytes());
        for i in 0..3u32 {
            let f = frame(i as usize, 100);
            file.extend_from_slice(&(1_600_000_000 + i).to_be_bytes());
            file.extend_from_slice(&(123_456 + i).to_be_bytes());
            file.extend_from_slice(&(f.len() as u32).to_be_bytes());
            file.extend_from_slice(&(f.len() as u32).to_be_bytes());
            file.extend_from_slice(&f);
        }
        std::fs::write(&input, &file).expect("write");
        let (rs, _, all_back) = copy_file(&input, &output, 2048);
        assert!(all_back);
        assert_eq!(rs.rx_packets.get(), 3);
        let out = read_file(&output);
        assert_eq!(out.len(), 3);
        for (i, (rec, bytes)) in out.iter().enumerate() {
            let want = (1_600_000_000 + i as u64) * 1_000_000_000 + (123_456 + i as u64) * 1000;
            assert_eq!(rec.timestamp_ns, want);
            assert_eq!(bytes, &frame(i, 100));
        }
        let r = PcapReader::open(&output).expect("open");
        assert_eq!(r.precision(), TimestampPrecision::Nano);
    }

    #[test]
    fn oversized_and_empty_frames_are_dropped() {
        let dir = TempDir::new("oversize");
        let (input, output) = (dir.path("in.pcap"), dir.path("out.pcap"));
        let frames = vec![
            (10, frame(0, 64)),
            (11, vec![0xab; 3000]), // larger than a 2048-byte buffer
            (12, Vec::new()),       // empty record
            (13, frame(3, 1518)),
        ];
        write_file(&input, &frames);
        let (rs, ts, all_back) = copy_file(&input, &output, 2048);
        assert!(all_back);
        assert_eq!(rs.rx_packets.get(), 2);
        assert_eq!(rs.rx_drops.get(), 2);
        assert_eq!(ts.tx_packets.get(), 2);
        let out = read_file(&output);
        assert_eq!(out[0].1, frames[0].1);
        assert_eq!(out[1].0.timestamp_ns, 13);
        assert_eq!(out[1].1, frames[3].1);
    }

    #[test]
    fn truncated_file_counts_a_drop_and_ends() {
        let dir = TempDir::new("trunc");
        let (input, output) = (dir.path("in.pcap"), dir.path("out.pcap"));
        let frames: Vec<(u64, Vec<u8>)> = (0..300).map(|i| (i as u64 + 1, frame(i, 64))).collect();
        write_file(&input, &frames);
        let mut bytes = std::fs::read(&input).expect("read");
        bytes.truncate(bytes.len() - 30); // inside the last record's data
        std::fs::write(&input, &bytes).expect("write");
        let (rs, ts, all_back) = copy_file(&input, &output, 2048);
        assert!(all_back);
        assert_eq!(rs.rx_packets.get(), 299);
        assert_eq!(rs.rx_drops.get(), 1);
        assert_eq!(ts.tx_packets.get(), 299);

        // Polled by hand, the error is kept and the node says it is finished.
        let stats = Arc::new(PortStats::default());
        let mut r = rx(&input, &stats, "x");
        let mut p = pool(512, 2048);
        let (mut out, mut nexts) = ([0u32; 256], [0u16; 256]);
        let mut got = 0;
        while !r.is_finished() {
            let (n, d) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
            assert_eq!(d, Dispatch::AllTo(0));
            p.free_batch(&out[..n]);
            got += n;
        }
        assert_eq!(got, 299);
        assert!(matches!(
            r.error(),
            Some(PortError::TruncatedRecord { record: 300, .. })
        ));
        assert_eq!(r.records_read(), 300);
        assert_eq!(p.available(), p.capacity());
    }

    #[test]
    fn empty_pool_counts_drops() {
        let dir = TempDir::new("pool");
        let input = dir.path("in.pcap");
        let frames: Vec<(u64, Vec<u8>)> = (0..10).map(|i| (i as u64 + 1, frame(i, 64))).collect();
        write_file(&input, &frames);
        let stats = Arc::new(PortStats::default());
        let mut r = rx(&input, &stats, "x");
        let mut p = pool(4, 2048);
        let (mut out, mut nexts) = ([0u32; 256], [0u16; 256]);
        let (n, _) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
        assert_eq!(n, 4);
        assert_eq!(stats.rx_packets.get(), 4);
        assert_eq!(stats.rx_drops.get(), 6);
        for (i, &b) in out[..4].iter().enumerate() {
            assert_eq!(p.data(b), &frames[i].1[..]);
            assert_eq!(p.meta(b).rx_port, 2);
            assert_eq!(p.meta(b).timestamp_ns, i as u64 + 1);
        }
        assert_eq!(r.trace(&p, out[2]), "pcap rx: frame 3, 60 bytes");
        p.free_batch(&out[..4]);
        let (n, _) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
        assert_eq!(n, 0);
        assert!(r.is_finished());
        assert_eq!(p.available(), p.capacity());
    }

    #[test]
    fn trace_names_the_frame() {
        let dir = TempDir::new("trace");
        let input = dir.path("in.pcap");
        let frames: Vec<(u64, Vec<u8>)> = (0..5).map(|i| (1, frame(i, 64 + i * 10))).collect();
        write_file(&input, &frames);
        let stats = Arc::new(PortStats::default());
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(rx(&input, &stats, "mem-tx")))
            .add_node(Box::new(MemoryTx::new("mem-tx".into(), 0, stats.clone())));
        let mut g = b.build(0, 1).expect("graph");
        let id = g.node_id("pcap0-rx").expect("id");
        g.trace_control().arm(id, 2);
        let mut p = pool(64, 2048);
        g.run_once(&mut p);
        let recs = g.trace_control().snapshot();
        let texts: Vec<&str> = recs
            .iter()
            .filter(|r| r.node == "pcap0-rx")
            .map(|r| r.text.as_str())
            .collect();
        assert_eq!(
            texts,
            vec!["pcap rx: frame 1, 60 bytes", "pcap rx: frame 2, 70 bytes"]
        );
        assert!(recs
            .iter()
            .any(|r| r.node == "mem-tx" && r.text == "memory tx: port 0, 60 bytes"));
    }

    #[test]
    fn tx_uses_the_wall_clock_for_unstamped_packets() {
        let dir = TempDir::new("clock");
        let output = dir.path("out.pcap");
        let stats = Arc::new(PortStats::default());
        let mut tx = PcapTx::create("pcap-tx".into(), 0, &output, stats.clone()).expect("create");
        let mut p = pool(8, 2048);
        let mut bufs = [0u32; 2];
        p.alloc_batch(&mut bufs);
        p.write_packet(bufs[0], &frame(0, 64));
        p.write_packet(bufs[1], &frame(1, 64));
        p.meta_mut(bufs[1]).timestamp_ns = 42;
        let before = wall_clock_ns();
        with_cx(&mut p, |cx| tx.process(cx, &bufs, &mut [0; 2]));
        tx.finish();
        assert_eq!(p.available(), p.capacity());
        let out = read_file(&output);
        assert!(out[0].0.timestamp_ns >= before);
        assert_eq!(out[1].0.timestamp_ns, 42);
        assert_eq!(stats.tx_packets.get(), 2);
        assert_eq!(stats.tx_bytes.get(), 120);
    }

    #[test]
    fn tx_write_errors_count_drops() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            testenv::skip("/dev/full does not exist");
            return;
        }
        let stats = Arc::new(PortStats::default());
        // A device is refused as an output file; the write path is tested on it directly.
        assert!(PcapTx::create("pcap-tx".into(), 0, full, stats.clone()).is_err());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(full)
            .expect("open /dev/full");
        let file = HeldOutput::hold(file, "/dev/full").expect("hold");
        let writer = PcapWriter::new(file, "/dev/full").expect("header buffered");
        let mut tx = PcapTx::with_writer("pcap-tx".into(), 0, writer, stats.clone());
        let mut p = pool(256, 2048);
        let mut bufs = [0u32; 256];
        let mut sent = 0u64;
        // 256 KiB of buffered output fills after about 170 vectors of 1514-byte frames.
        for _ in 0..200 {
            assert_eq!(p.alloc_batch(&mut bufs), 256);
            for &b in &bufs {
                p.write_packet(b, &frame(0, 1518));
            }
            with_cx(&mut p, |cx| tx.process(cx, &bufs, &mut [0; 256]));
            sent += 256;
        }
        assert_eq!(p.available(), p.capacity());
        assert!(stats.tx_drops.get() > 0, "the write error was counted");
        assert_eq!(stats.tx_packets.get() + stats.tx_drops.get(), sent);
        assert!(tx
            .error()
            .is_some_and(|e| e.to_string().contains("/dev/full")));
        // The port failed (shown, in the stats, the exit status), once, with why.
        let failure = stats.failure().expect("the port failed");
        assert!(
            failure.contains("/dev/full") && failure.contains("not written"),
            "{failure}"
        );
        tx.finish(); // the same error again, no panic
        assert_eq!(stats.failure(), Some(failure));
        assert_eq!(stats.tx_packets.get() + stats.tx_drops.get(), sent);
    }

    #[test]
    fn open_errors_name_the_file() {
        let dir = TempDir::new("open");
        let stats = Arc::new(PortStats::default());
        let missing = dir.path("missing.pcap");
        let err = PcapRx::open("rx".into(), 0, &missing, "x".into(), stats.clone())
            .err()
            .expect("missing");
        assert!(err.to_string().contains("missing.pcap"), "{err}");
        let raw = dir.path("raw.pcap");
        let mut bytes = Vec::new();
        {
            let _w = PcapWriter::new(&mut bytes, "raw").expect("writer");
        }
        bytes[20] = 101; // LINKTYPE_RAW
        std::fs::write(&raw, &bytes).expect("write");
        let err = PcapRx::open("rx".into(), 0, &raw, "x".into(), stats.clone())
            .err()
            .expect("linktype");
        assert!(matches!(err, PortError::BadLinkType { linktype: 101, .. }));
        let bad_dir: PathBuf = dir.path("no/such/dir/out.pcap");
        assert!(PcapTx::create("tx".into(), 0, &bad_dir, stats).is_err());
    }

    /// A file's bytes: arbitrary, or a valid header (any magic and byte order) plus arbitrary
    /// bytes, or a valid file with a few bytes overwritten and maybe cut short.
    fn file_bytes() -> impl Strategy<Value = Vec<u8>> {
        let valid = |n: usize| {
            let mut bytes = Vec::new();
            {
                let mut w = PcapWriter::new(&mut bytes, "p").expect("writer");
                for i in 0..n {
                    let f = frame(i, 64 + i * 300);
                    w.write_record(i as u64, &f, f.len() as u32).expect("w");
                }
            }
            bytes
        };
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            (0usize..4, proptest::collection::vec(any::<u8>(), 0..600)).prop_map(
                move |(m, tail)| {
                    let mut h = valid(0);
                    let magic: [u8; 4] = match m {
                        0 => [0xd4, 0xc3, 0xb2, 0xa1],
                        1 => [0xa1, 0xb2, 0xc3, 0xd4],
                        2 => [0x4d, 0x3c, 0xb2, 0xa1],
                        _ => [0xa1, 0xb2, 0x3c, 0x4d],
                    };
                    h[0..4].copy_from_slice(&magic);
                    if m % 2 == 1 {
                        // Big-endian header fields.
                        h[4..8].copy_from_slice(&[0, 2, 0, 4]);
                        h[16..24].copy_from_slice(&[0, 0, 0x08, 0, 0, 0, 0, 1]);
                    }
                    h.extend_from_slice(&tail);
                    h
                }
            ),
            (
                1usize..8,
                proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
                any::<Option<usize>>()
            )
                .prop_map(move |(n, edits, cut)| {
                    let mut f = valid(n);
                    for (at, v) in edits {
                        let i = 24 + at % (f.len() - 24);
                        f[i] = v;
                    }
                    if let Some(c) = cut {
                        f.truncate(c % (f.len() + 1));
                    }
                    f
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn arbitrary_files_never_panic_or_leak(bytes in file_bytes()) {
            let dir = TempDir::new("prop");
            let path = dir.path("fuzz.pcap");
            std::fs::write(&path, &bytes).expect("write");
            let stats = Arc::new(PortStats::default());
            let Ok(r) = PcapRx::open("pcap0-rx".into(), 0, &path, "sink".into(), stats.clone())
            else {
                return Ok(());
            };
            let mut b = GraphBuilder::new();
            b.add_input(Box::new(r))
                .add_node(Box::new(MemoryTx::new("sink".into(), 0, stats.clone())));
            let mut g = b.build(0, 1).expect("graph");
            let mut p = pool(32, 1024);
            let mut polls = 0;
            while !g.is_finished() {
                g.run_once(&mut p);
                polls += 1;
                prop_assert!(polls <= bytes.len() + 2, "replay does not end");
            }
            prop_assert_eq!(p.available(), p.capacity());
            prop_assert_eq!(stats.rx_packets.get(), stats.tx_packets.get());
            prop_assert!(stats.rx_packets.get() + stats.rx_drops.get() <= bytes.len() as u64 / 16 + 1);
        }
    }
}

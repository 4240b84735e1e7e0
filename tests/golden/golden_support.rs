//! Shared by the golden and replay tests (`crates/dataplane/tests/pcap_replay.rs` and
//! `vecplane/tests/golden.rs` include it with `#[path]`): std only, so it works in any crate.
//!
//! - pcap files: read, compare with an expected file record by record, and explain the first
//!   difference (hex and, when tcpdump is installed, `tcpdump -nn -e -vv` of both records);
//! - a small JSON reader (stats files) and a reader for the subset of TOML our configs use;
//! - expected-stats checks (drops per (node, reason), packets per port, rx = tx + drops);
//! - finding `/usr/bin/python3` with scapy, temporary directories.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

// ----------------------------------------------------------------------------------------------
// Paths and processes

/// The repository root, given a crate's `CARGO_MANIFEST_DIR`.
pub fn repo_root(manifest_dir: &str) -> PathBuf {
    let mut p = PathBuf::from(manifest_dir);
    while !p.join("tests/golden/router.toml").exists() {
        assert!(
            p.pop(),
            "tests/golden/router.toml not found above {manifest_dir}"
        );
    }
    p
}

/// A directory removed when dropped (kept when `VECPLANE_KEEP_TMP` is set, for debugging).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let p = base.join(format!("vecplane-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("VECPLANE_KEEP_TMP").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The Python that has scapy: `$VECPLANE_PYTHON`, else `/usr/bin/python3` (Debian's
/// python3-scapy; a pyenv `python3` on PATH usually has no scapy). None, with the reason, when
/// scapy cannot be imported.
pub fn python_with_scapy() -> Result<PathBuf, String> {
    let py = std::env::var_os("VECPLANE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/python3"));
    match Command::new(&py).args(["-c", "import scapy.all"]).output() {
        Ok(o) if o.status.success() => Ok(py),
        Ok(o) => Err(format!(
            "{} cannot import scapy ({}); install it with `apt-get install python3-scapy`",
            py.display(),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
        Err(e) => Err(format!("cannot run {}: {e}", py.display())),
    }
}

/// The Python with scapy for test `test`: on a developer machine without it, say the test is
/// skipped and why (None); in CI (`CI` set), fail the test instead.
pub fn scapy_or_skip(test: &str) -> Option<PathBuf> {
    match python_with_scapy() {
        Ok(py) => Some(py),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: {why} (CI must run this test)")
        }
        Err(why) => {
            println!("SKIPPED {test}: {why}");
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// Run a command, panicking with its output when it fails.
pub fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
}

// ----------------------------------------------------------------------------------------------
// pcap

/// One record: timestamp in ns and the captured bytes; `raw` is header + data as in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub ts: u64,
    pub data: Vec<u8>,
    pub raw: Vec<u8>,
}

/// A classic pcap file: its 24-byte header and records.
pub struct Pcap {
    pub header: Vec<u8>,
    pub records: Vec<Record>,
    pub nanos: bool,
}

pub fn read_pcap(path: &Path) -> Result<Pcap, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if b.len() < 24 {
        return Err(format!(
            "{}: {} bytes, not a pcap file",
            path.display(),
            b.len()
        ));
    }
    let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let (be, nanos) = match magic {
        0xa1b2_c3d4 => (false, false),
        0xa1b2_3c4d => (false, true),
        0xd4c3_b2a1 => (true, false),
        0x4d3c_b2a1 => (true, true),
        m => return Err(format!("{}: bad magic {m:#x}", path.display())),
    };
    let word = |at: usize| {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if be {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let mut records = Vec::new();
    let mut off = 24;
    while off < b.len() {
        if off + 16 > b.len() {
            return Err(format!(
                "{}: truncated record header at {off}",
                path.display()
            ));
        }
        let (sec, frac, caplen) = (
            word(off) as u64,
            word(off + 4) as u64,
            word(off + 8) as usize,
        );
        if off + 16 + caplen > b.len() {
            return Err(format!(
                "{}: truncated record data at {off}",
                path.display()
            ));
        }
        let ts = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        records.push(Record {
            ts,
            data: b[off + 16..off + 16 + caplen].to_vec(),
            raw: b[off..off + 16 + caplen].to_vec(),
        });
        off += 16 + caplen;
    }
    Ok(Pcap {
        header: b[..24].to_vec(),
        records,
        nanos,
    })
}

/// Write a nanosecond little-endian pcap (the layout vecplane writes).
pub fn write_pcap(path: &Path, records: &[(u64, &[u8])]) -> std::io::Result<()> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (ts, data) in records {
        f.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        f.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(data);
    }
    std::fs::write(path, f)
}

fn hex_lines(b: &[u8], from: usize, to: usize) -> String {
    let mut s = String::new();
    let start = from / 16 * 16;
    let end = to.min(b.len());
    let mut at = start;
    while at < end {
        let line = &b[at..(at + 16).min(b.len())];
        let _ = write!(s, "    {at:04x}:");
        for (i, x) in line.iter().enumerate() {
            if i % 2 == 0 {
                s.push(' ');
            }
            let _ = write!(s, "{x:02x}");
        }
        s.push('\n');
        at += 16;
    }
    s
}

/// `tcpdump -nn -e -vv` of one record (or why not).
pub fn tcpdump_record(ts: u64, data: &[u8], dir: &Path, tag: &str) -> String {
    let path = dir.join(format!("diff-{tag}.pcap"));
    if let Err(e) = write_pcap(&path, &[(ts, data)]) {
        return format!("(cannot write {}: {e})", path.display());
    }
    match Command::new("tcpdump")
        .args(["-nn", "-e", "-vv", "--nano", "-r"])
        .arg(&path)
        .output()
    {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            if text.trim().is_empty() {
                String::from_utf8_lossy(&o.stderr).into_owned()
            } else {
                text
            }
        }
        Err(e) => format!("(tcpdump not available: {e})"),
    }
}

/// Describe how two records differ (first differing byte, hex around it, tcpdump of both).
pub fn explain_difference(i: usize, want: &Record, got: &Record, dir: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "record {i}: expected ts {} len {}, got ts {} len {}",
        want.ts,
        want.data.len(),
        got.ts,
        got.data.len()
    );
    let first = want
        .data
        .iter()
        .zip(&got.data)
        .position(|(a, b)| a != b)
        .unwrap_or(want.data.len().min(got.data.len()));
    let _ = writeln!(s, "first differing data byte: {first} (0x{first:x})");
    let (from, to) = (first.saturating_sub(16), first + 32);
    let _ = writeln!(s, "  expected bytes:\n{}", hex_lines(&want.data, from, to));
    let _ = writeln!(s, "  actual bytes:\n{}", hex_lines(&got.data, from, to));
    let _ = writeln!(
        s,
        "  expected (tcpdump):\n{}",
        tcpdump_record(want.ts, &want.data, dir, "expected")
    );
    let _ = writeln!(
        s,
        "  actual (tcpdump):\n{}",
        tcpdump_record(got.ts, &got.data, dir, "actual")
    );
    s
}

/// Compare an output pcap with its expected file.
///
/// The file header must be identical. Records are compared byte for byte (record header with
/// timestamp and lengths, and data). vecplane may emit packets of *different* flows in a
/// different order than they arrived (a vector is split by protocol, ICMP errors re-enter the
/// graph on a later pass, packets waiting for ARP/ND leave when the answer comes), so both sides
/// are put in timestamp order first. Each input frame has a distinct timestamp; the frames one
/// input causes on one port (an ARP request or Neighbor Solicitation carries the timestamp of
/// the packet that made it ask, and that packet may follow) are ordered by their bytes. The
/// order of one flow's packets is checked separately with `assert_flow_order`. Returns whether
/// the file was already byte-identical.
pub fn compare_pcap(expected: &Path, actual: &Path, dir: &Path) -> Result<bool, String> {
    let want = read_pcap(expected)?;
    let got = read_pcap(actual)?;
    let exp_bytes = std::fs::read(expected).map_err(|e| e.to_string())?;
    let act_bytes = std::fs::read(actual).map_err(|e| e.to_string())?;
    if exp_bytes == act_bytes {
        return Ok(true);
    }
    let name = actual.display();
    if want.header != got.header {
        return Err(format!(
            "{name}: file header differs:\n  expected {:02x?}\n  actual   {:02x?}",
            want.header, got.header
        ));
    }
    let mut sorted = got.records.clone();
    sorted.sort_by(|a, b| (a.ts, &a.data).cmp(&(b.ts, &b.data)));
    let mut want_sorted = want.records.clone();
    want_sorted.sort_by(|a, b| (a.ts, &a.data).cmp(&(b.ts, &b.data)));
    let want = Pcap {
        records: want_sorted,
        ..want
    };
    for (i, (w, g)) in want.records.iter().zip(&sorted).enumerate() {
        if w.raw != g.raw {
            return Err(format!(
                "{name} differs from {} (records in timestamp order):\n{}",
                expected.display(),
                explain_difference(i, w, g, dir)
            ));
        }
    }
    if want.records.len() != sorted.len() {
        let extra = if sorted.len() > want.records.len() {
            let r = &sorted[want.records.len()];
            format!(
                "first extra actual record:\n{}",
                tcpdump_record(r.ts, &r.data, dir, "extra")
            )
        } else {
            let r = &want.records[sorted.len()];
            format!(
                "first missing record:\n{}",
                tcpdump_record(r.ts, &r.data, dir, "missing")
            )
        };
        return Err(format!(
            "{name}: {} records, expected {} ({}):\n{extra}",
            sorted.len(),
            want.records.len(),
            expected.display()
        ));
    }
    Ok(false)
}

/// Packets of one flow must leave in the order they arrived: for each group of timestamps (one
/// flow's packets), their records in `actual` appear in increasing timestamp order.
pub fn assert_flow_order(actual: &Path, flow: &[u64]) -> Result<(), String> {
    let got = read_pcap(actual)?;
    let order: Vec<u64> = got
        .records
        .iter()
        .map(|r| r.ts)
        .filter(|t| flow.contains(t))
        .collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    if order != sorted || order.len() != flow.len() {
        return Err(format!(
            "{}: packets of one flow left as {order:?}, expected {flow:?}",
            actual.display()
        ));
    }
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// JSON (enough for stats files)

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(v) => v.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) if *n >= 0.0 && n.fract() == 0.0 => Some(*n as u64),
            _ => None,
        }
    }
    pub fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            _ => &[],
        }
    }
    pub fn entries(&self) -> &[(String, Json)] {
        match self {
            Json::Obj(v) => v,
            _ => &[],
        }
    }
}

pub fn parse_json(text: &str) -> Result<Json, String> {
    let b = text.as_bytes();
    let mut i = 0;
    let v = json_value(b, &mut i)?;
    json_ws(b, &mut i);
    if i != b.len() {
        return Err(format!("JSON: trailing data at byte {i}"));
    }
    Ok(v)
}

fn json_ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn json_value(b: &[u8], i: &mut usize) -> Result<Json, String> {
    json_ws(b, i);
    let c = *b.get(*i).ok_or("JSON: unexpected end")?;
    match c {
        b'{' => {
            *i += 1;
            let mut v = Vec::new();
            json_ws(b, i);
            if b.get(*i) == Some(&b'}') {
                *i += 1;
                return Ok(Json::Obj(v));
            }
            loop {
                json_ws(b, i);
                let Json::Str(k) = json_value(b, i)? else {
                    return Err(format!("JSON: object key expected at {i}"));
                };
                json_ws(b, i);
                if b.get(*i) != Some(&b':') {
                    return Err(format!("JSON: ':' expected at {i}"));
                }
                *i += 1;
                v.push((k, json_value(b, i)?));
                json_ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {
                        *i += 1;
                        return Ok(Json::Obj(v));
                    }
                    _ => return Err(format!("JSON: ',' or '}}' expected at {i}")),
                }
            }
        }
        b'[' => {
            *i += 1;
            let mut v = Vec::new();
            json_ws(b, i);
            if b.get(*i) == Some(&b']') {
                *i += 1;
                return Ok(Json::Arr(v));
            }
            loop {
                v.push(json_value(b, i)?);
                json_ws(b, i);
                match b.get(*i) {
                    Some(b',') => *i += 1,
                    Some(b']') => {
                        *i += 1;
                        return Ok(Json::Arr(v));
                    }
                    _ => return Err(format!("JSON: ',' or ']' expected at {i}")),
                }
            }
        }
        b'"' => {
            *i += 1;
            let mut s = String::new();
            loop {
                let c = *b.get(*i).ok_or("JSON: unterminated string")?;
                *i += 1;
                match c {
                    b'"' => return Ok(Json::Str(s)),
                    b'\\' => {
                        let e = *b.get(*i).ok_or("JSON: bad escape")?;
                        *i += 1;
                        match e {
                            b'n' => s.push('\n'),
                            b't' => s.push('\t'),
                            b'r' => s.push('\r'),
                            b'b' => s.push('\u{8}'),
                            b'f' => s.push('\u{c}'),
                            b'u' => {
                                let h = std::str::from_utf8(b.get(*i..*i + 4).ok_or("JSON: \\u")?)
                                    .map_err(|e| e.to_string())?;
                                let cp = u32::from_str_radix(h, 16).map_err(|e| e.to_string())?;
                                s.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                                *i += 4;
                            }
                            other => s.push(other as char),
                        }
                    }
                    _ => {
                        // Copy one UTF-8 sequence.
                        let start = *i - 1;
                        let mut end = *i;
                        while end < b.len() && (b[end] & 0xc0) == 0x80 {
                            end += 1;
                        }
                        s.push_str(std::str::from_utf8(&b[start..end]).map_err(|e| e.to_string())?);
                        *i = end;
                    }
                }
            }
        }
        b't' if b[*i..].starts_with(b"true") => {
            *i += 4;
            Ok(Json::Bool(true))
        }
        b'f' if b[*i..].starts_with(b"false") => {
            *i += 5;
            Ok(Json::Bool(false))
        }
        b'n' if b[*i..].starts_with(b"null") => {
            *i += 4;
            Ok(Json::Null)
        }
        _ => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                *i += 1;
            }
            let t = std::str::from_utf8(&b[start..*i]).map_err(|e| e.to_string())?;
            t.parse::<f64>()
                .map(Json::Num)
                .map_err(|_| format!("JSON: bad value at byte {start}"))
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Stats

/// Counters of a finished run, from vecplane's `--stats-json` or from the dataplane API.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// name -> (rx_packets, tx_packets, rx_drops, tx_drops)
    pub ports: BTreeMap<String, (u64, u64, u64, u64)>,
    /// (node, reason) -> count
    pub errors: BTreeMap<(String, String), u64>,
    pub drops_total: u64,
    /// Packets the data plane made itself: ARP requests and Neighbor Solicitations
    /// (`neighbours.originated`) and bridge flood copies (`emitted_total`). Answers (ARP replies,
    /// Neighbor Advertisements) reuse the received buffer and are not counted here.
    pub originated: u64,
    /// The `neighbours` counters (`arp_requests_sent`, `ns_sent`, `arp_replies_sent`,
    /// `na_sent`, `learned`, `queued`, `released`, `queue_drops`, `resolution_failures`,
    /// `originated`).
    pub neighbours: BTreeMap<String, u64>,
}

/// The counters of the `neighbours` object of `--stats-json`, in its order.
pub const NEIGHBOUR_COUNTERS: [&str; 10] = [
    "arp_requests_sent",
    "ns_sent",
    "arp_replies_sent",
    "na_sent",
    "learned",
    "queued",
    "released",
    "queue_drops",
    "resolution_failures",
    "originated",
];

impl RunStats {
    /// From the object `vecplane run --stats-json` writes (see control::stats::final_stats_json):
    /// `{"ports":[{"name","rx_packets","tx_packets","rx_drops","tx_drops",..}],
    ///   "errors":[{"node","reason","count"}], "drops_total": N,
    ///   "neighbours": {"arp_requests_sent", .., "originated"}, "emitted_total": N, ..}`.
    pub fn from_stats_json(v: &Json) -> Result<RunStats, String> {
        let mut s = RunStats::default();
        let num = |o: &Json, k: &str| {
            o.get(k)
                .and_then(Json::u64)
                .ok_or_else(|| format!("stats JSON: `{k}` missing or not a count in {o:?}"))
        };
        let ports = v.get("ports").ok_or("stats JSON: no `ports`")?;
        for p in ports.arr() {
            let name = p
                .get("name")
                .and_then(Json::str)
                .ok_or("port without name")?;
            s.ports.insert(
                name.to_string(),
                (
                    num(p, "rx_packets")?,
                    num(p, "tx_packets")?,
                    num(p, "rx_drops")?,
                    num(p, "tx_drops")?,
                ),
            );
        }
        let errors = v.get("errors").ok_or("stats JSON: no `errors`")?;
        for e in errors.arr() {
            let node = e
                .get("node")
                .and_then(Json::str)
                .ok_or("error without node")?;
            let reason = e
                .get("reason")
                .and_then(Json::str)
                .ok_or("error without reason")?;
            *s.errors.entry((node.into(), reason.into())).or_default() += num(e, "count")?;
        }
        s.drops_total = num(v, "drops_total")?;
        let neighbours = v
            .get("neighbours")
            .ok_or("stats JSON: no `neighbours` (ARP/ND counters)")?;
        for k in NEIGHBOUR_COUNTERS {
            s.neighbours.insert(k.to_string(), num(neighbours, k)?);
        }
        let emitted = match v.get("emitted_total") {
            Some(e) => e
                .u64()
                .ok_or("stats JSON: `emitted_total` is not a count")?,
            None => 0,
        };
        s.originated = s.neighbours["originated"] + emitted;
        Ok(s)
    }

    /// The same shape as `vecplane run --stats-json` (what scripts/check_replay.py reads).
    pub fn to_stats_json(&self) -> String {
        let mut s = String::from("{\"ports\": [");
        for (i, (name, (rx, tx, rxd, txd))) in self.ports.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(
                s,
                "{{\"name\": \"{name}\", \"rx_packets\": {rx}, \"tx_packets\": {tx}, \
                 \"rx_drops\": {rxd}, \"tx_drops\": {txd}}}"
            );
        }
        s.push_str("], \"errors\": [");
        for (i, ((node, reason), n)) in self.errors.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(
                s,
                "{{\"node\": \"{node}\", \"reason\": \"{reason}\", \"count\": {n}}}"
            );
        }
        let _ = write!(
            s,
            "], \"drops_total\": {}, \"neighbours\": {{",
            self.drops_total
        );
        for (i, (k, n)) in self.neighbours.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "\"{k}\": {n}");
        }
        s.push_str("}}");
        s
    }

    pub fn rx(&self) -> u64 {
        self.ports.values().map(|p| p.0).sum()
    }
    pub fn tx(&self) -> u64 {
        self.ports.values().map(|p| p.1).sum()
    }

    /// rx + originated = tx + drops + tx_drops (every packet received or made is sent or
    /// counted as dropped), drops_total is the sum of the error counters, and originated is
    /// the requests made (ARP requests + Neighbor Solicitations).
    pub fn check_conservation(&self) -> Result<(), String> {
        let sum: u64 = self.errors.values().sum();
        if sum != self.drops_total {
            return Err(format!(
                "drops_total {} is not the sum of the error counters {sum}",
                self.drops_total
            ));
        }
        let n = |k: &str| self.neighbours.get(k).copied().unwrap_or(0);
        if n("originated") != n("arp_requests_sent") + n("ns_sent") {
            return Err(format!(
                "neighbours.originated {} is not arp_requests_sent {} + ns_sent {}",
                n("originated"),
                n("arp_requests_sent"),
                n("ns_sent")
            ));
        }
        let tx_drops: u64 = self.ports.values().map(|p| p.3).sum();
        let made = self.rx() + self.originated;
        if made != self.tx() + self.drops_total + tx_drops {
            return Err(format!(
                "rx {} + originated {} != tx {} + drops {} + tx_drops {tx_drops}: {} packets \
                 unaccounted for\n{self:#?}",
                self.rx(),
                self.originated,
                self.tx(),
                self.drops_total,
                made as i128 - (self.tx() + self.drops_total + tx_drops) as i128
            ));
        }
        Ok(())
    }

    /// Compare with an expected_stats.json written by make_golden.py.
    pub fn check_expected(&self, expected: &Json) -> Result<(), String> {
        let mut problems = Vec::new();
        let want_rx = expected.get("rx_packets").and_then(Json::u64).unwrap_or(0);
        if self.rx() != want_rx {
            problems.push(format!("rx_packets {} (expected {want_rx})", self.rx()));
        }
        for (port, n) in expected.get("tx_packets").map(Json::entries).unwrap_or(&[]) {
            let got = self.ports.get(port).map(|p| p.1).unwrap_or(0);
            let want = n.u64().unwrap_or(0);
            if got != want {
                problems.push(format!("port {port}: tx_packets {got} (expected {want})"));
            }
        }
        for (port, p) in &self.ports {
            if p.2 != 0 || p.3 != 0 {
                problems.push(format!("port {port}: rx_drops {} tx_drops {}", p.2, p.3));
            }
        }
        let mut want_errors: BTreeMap<(String, String), u64> = BTreeMap::new();
        for (node, reasons) in expected.get("errors").map(Json::entries).unwrap_or(&[]) {
            for (reason, n) in reasons.entries() {
                want_errors.insert((node.clone(), reason.clone()), n.u64().unwrap_or(0));
            }
        }
        for (key, want) in &want_errors {
            let got = self.errors.get(key).copied().unwrap_or(0);
            if got != *want {
                problems.push(format!(
                    "drops {}/{}: {got} (expected {want})",
                    key.0, key.1
                ));
            }
        }
        for (key, got) in &self.errors {
            if *got != 0 && !want_errors.contains_key(key) {
                problems.push(format!("drops {}/{}: {got} (expected 0)", key.0, key.1));
            }
        }
        let want_total = expected.get("drops_total").and_then(Json::u64).unwrap_or(0);
        if self.drops_total != want_total {
            problems.push(format!(
                "drops_total {} (expected {want_total})",
                self.drops_total
            ));
        }
        let want_originated = expected.get("originated").and_then(Json::u64).unwrap_or(0);
        if self.originated != want_originated {
            problems.push(format!(
                "originated {} (expected {want_originated}: ARP requests and Neighbor \
                 Solicitations)",
                self.originated
            ));
        }
        // Every ARP/ND counter; those the file does not list must be 0.
        let want_neighbours = expected.get("neighbours");
        for k in NEIGHBOUR_COUNTERS {
            let want = want_neighbours
                .and_then(|n| n.get(k))
                .and_then(Json::u64)
                .unwrap_or(0);
            let got = self.neighbours.get(k).copied().unwrap_or(0);
            if got != want {
                problems.push(format!("neighbours.{k} {got} (expected {want})"));
            }
        }
        if let Err(e) = self.check_conservation() {
            problems.push(e);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "stats differ from expected:\n  {}",
                problems.join("\n  ")
            ))
        }
    }
}

// ----------------------------------------------------------------------------------------------
// The TOML subset of our test configs: `[table]`, `[[array-of-tables]]`, `key = "string"`,
// `key = 123`, `key = true`, `key = ["a", "b"]` (one line), `# comments`.

#[derive(Clone, Debug, PartialEq)]
pub enum TomlVal {
    Str(String),
    Int(i64),
    Bool(bool),
    Arr(Vec<TomlVal>),
}

impl TomlVal {
    pub fn str(&self) -> Option<&str> {
        match self {
            TomlVal::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn int(&self) -> Option<i64> {
        match self {
            TomlVal::Int(n) => Some(*n),
            _ => None,
        }
    }
    /// A string or an array of strings, as a list.
    pub fn strings(&self) -> Vec<String> {
        match self {
            TomlVal::Str(s) => vec![s.clone()],
            TomlVal::Arr(v) => v.iter().filter_map(|x| x.str().map(String::from)).collect(),
            _ => Vec::new(),
        }
    }
}

/// (table name, its keys) in file order; `[dataplane]` is a table named "dataplane", each
/// `[[port]]` one named "port".
pub type TomlTables = Vec<(String, BTreeMap<String, TomlVal>)>;

pub fn parse_test_toml(text: &str) -> Result<TomlTables, String> {
    let mut tables: TomlTables = vec![(String::new(), BTreeMap::new())];
    for (n, line) in text.lines().enumerate() {
        let line = strip_comment(line).trim().to_string();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            tables.push((name.trim().to_string(), BTreeMap::new()));
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            tables.push((name.trim().to_string(), BTreeMap::new()));
        } else if let Some((k, v)) = line.split_once('=') {
            let val = toml_value(v.trim()).map_err(|e| format!("line {}: {e}", n + 1))?;
            let last = tables.last_mut().expect("table");
            last.1.insert(k.trim().to_string(), val);
        } else {
            return Err(format!("line {}: cannot read `{line}`", n + 1));
        }
    }
    Ok(tables)
}

fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => return &line[..i],
            _ => {}
        }
    }
    line
}

fn toml_value(v: &str) -> Result<TomlVal, String> {
    if let Some(s) = v.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        return Ok(TomlVal::Str(s.to_string()));
    }
    if let Some(inner) = v.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        return inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(toml_value)
            .collect::<Result<Vec<_>, _>>()
            .map(TomlVal::Arr);
    }
    match v {
        "true" => return Ok(TomlVal::Bool(true)),
        "false" => return Ok(TomlVal::Bool(false)),
        _ => {}
    }
    v.replace('_', "")
        .parse::<i64>()
        .map(TomlVal::Int)
        .map_err(|_| format!("unsupported value `{v}`"))
}

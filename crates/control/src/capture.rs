//! `vecplane ctl pcap start|stop` and `show pcap`: one capture at a time. Starting arms the data
//! plane's `CaptureControl` and starts a writer thread that drains the workers' capture buffers
//! into a nanosecond pcap file every 50 ms (flushed each time, so the file is readable while the
//! capture runs) until the count is reached or `pcap stop`. It never touches packets itself.

use graph::capture::{DIR_RX, DIR_TX};
use graph::CaptureControl;
use ports::pcapfile::PcapWriter;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest packet count one capture may ask for.
pub const MAX_COUNT: u64 = 10_000_000;
/// Default bytes kept of each packet.
pub const DEFAULT_SNAPLEN: u32 = 2048;

/// What `pcap start` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureRequest {
    /// Port name.
    pub port: String,
    /// Absolute path of the pcap file to write.
    pub file: PathBuf,
    /// `DIR_RX`, `DIR_TX` or both.
    pub dirs: u8,
    /// Packets to capture.
    pub count: u64,
    /// Bytes kept of each packet.
    pub snaplen: u32,
}

/// The running (or last) capture.
pub struct CaptureJob {
    request: CaptureRequest,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    error: Arc<Mutex<Option<String>>>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// "rx", "tx" or "rx+tx".
pub fn dirs_name(dirs: u8) -> &'static str {
    match dirs {
        DIR_RX => "rx",
        DIR_TX => "tx",
        _ => "rx+tx",
    }
}

impl CaptureJob {
    /// Arm `control` for port `port_id` and start writing `request.file`.
    pub fn start(
        control: Arc<CaptureControl>,
        port_id: u16,
        request: CaptureRequest,
        tsc_hz: u64,
        forbidden: &[ports::outfile::FileId],
    ) -> Result<CaptureJob, String> {
        let role = format!("the file of the running capture of `{}`", request.port);
        let mut writer = PcapWriter::create_checked(&request.file, forbidden, role)
            .map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let error = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        control.take(); // forget leftovers of an earlier capture
                        // The TSC of a capture, turned into wall-clock nanoseconds.
        let base_tsc = graph::rdtsc();
        let base_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let hz = tsc_hz.max(1) as u128;
        control.arm(port_id, request.dirs, request.count, request.snaplen);
        let (s, w, e, d) = (stop.clone(), written.clone(), error.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("vecplane-pcap".into())
            .spawn(move || {
                loop {
                    let stopping = s.load(Ordering::Acquire);
                    if stopping {
                        control.disarm();
                    }
                    let finished = stopping || !control.is_armed();
                    let mut result = Ok(());
                    for p in control.take() {
                        let dt = p.tsc.wrapping_sub(base_tsc) as u128 * 1_000_000_000 / hz;
                        let ts = base_ns.saturating_add(dt as u64);
                        result = writer.write_record(ts, &p.bytes, p.length);
                        if result.is_err() {
                            break;
                        }
                    }
                    // Only records in the file count as written (a full disk loses the
                    // buffered ones and leaves the file on a record boundary).
                    let result = result.and_then(|()| writer.flush());
                    w.store(writer.records_written(), Ordering::Relaxed);
                    if let Err(err) = result {
                        *e.lock().unwrap_or_else(|x| x.into_inner()) = Some(err.to_string());
                        control.disarm();
                        break;
                    }
                    if finished {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                d.store(true, Ordering::Release);
            })
            .map_err(|e| format!("cannot start the capture writer: {e}"))?;
        Ok(CaptureJob {
            request,
            stop,
            written,
            error,
            done,
            thread: Some(thread),
        })
    }

    /// True while packets may still be captured or written.
    pub fn is_running(&self) -> bool {
        !self.done.load(Ordering::Acquire)
    }

    /// Stop capturing, write what was captured, close the file.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The capture's state as text and JSON.
    pub fn status(&self, lost: u64) -> (String, Value) {
        let error = self.error.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let r = &self.request;
        let written = self.written.load(Ordering::Relaxed);
        let state = if self.is_running() {
            "running"
        } else if error.is_some() {
            "failed"
        } else {
            "done"
        };
        let mut text = format!(
            "capture of {} ({}) into {}: {state}, {written} of {} packets written, {lost} lost\n",
            r.port,
            dirs_name(r.dirs),
            r.file.display(),
            r.count
        );
        if let Some(e) = &error {
            text.push_str(&format!("error: {e}\n"));
        }
        let data = json!({
            "port": r.port,
            "direction": dirs_name(r.dirs),
            "file": r.file.display().to_string(),
            "count": r.count,
            "snaplen": r.snaplen,
            "state": state,
            "written": written,
            "lost": lost,
            "error": error,
        });
        (text, data)
    }
}

impl Drop for CaptureJob {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Parse `pcap start PORT FILE [rx|tx|both] [count N] [snaplen N]` (words after `start`).
pub fn parse_start(words: &[&str]) -> Result<CaptureRequest, String> {
    const USAGE: &str =
        "usage: pcap start PORT FILE [rx|tx|both] [count N] [snaplen N], FILE an absolute path";
    let (Some(port), Some(file)) = (words.first(), words.get(1)) else {
        return Err(format!("`pcap start` needs PORT and FILE; {USAGE}"));
    };
    let file = Path::new(file);
    if !file.is_absolute() {
        return Err(format!(
            "`{}` is not an absolute path; accepted: an absolute path the daemon can write, e.g. \
             /tmp/{port}.pcap",
            file.display()
        ));
    }
    let mut r = CaptureRequest {
        port: port.to_string(),
        file: file.to_path_buf(),
        dirs: DIR_RX | DIR_TX,
        count: 1000,
        snaplen: DEFAULT_SNAPLEN,
    };
    let mut i = 2;
    while let Some(w) = words.get(i) {
        match *w {
            "rx" => r.dirs = DIR_RX,
            "tx" => r.dirs = DIR_TX,
            "both" => r.dirs = DIR_RX | DIR_TX,
            "count" | "snaplen" => {
                let v = words.get(i + 1).and_then(|v| v.parse::<u64>().ok());
                match (*w, v) {
                    ("count", Some(n)) if (1..=MAX_COUNT).contains(&n) => r.count = n,
                    ("snaplen", Some(n)) if (64..=65535).contains(&n) => r.snaplen = n as u32,
                    _ => {
                        return Err(format!(
                            "`{w}` needs a number: count 1..={MAX_COUNT}, snaplen 64..=65535"
                        ))
                    }
                }
                i += 1;
            }
            other => return Err(format!("unexpected `{other}`; {USAGE}")),
        }
        i += 1;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_arguments() {
        let r = parse_start(&["in0", "/tmp/x.pcap", "rx", "count", "5", "snaplen", "128"])
            .expect("valid");
        assert_eq!(
            r,
            CaptureRequest {
                port: "in0".into(),
                file: "/tmp/x.pcap".into(),
                dirs: DIR_RX,
                count: 5,
                snaplen: 128
            }
        );
        assert_eq!(
            parse_start(&["in0", "/tmp/x.pcap"]).expect("valid").count,
            1000
        );
        assert!(parse_start(&["in0"])
            .unwrap_err()
            .contains("needs PORT and FILE"));
        assert!(parse_start(&["in0", "x.pcap"])
            .unwrap_err()
            .contains("is not an absolute path"));
        assert!(parse_start(&["in0", "/tmp/x", "count", "0"])
            .unwrap_err()
            .contains("count 1..="));
        assert!(parse_start(&["in0", "/tmp/x", "sideways"])
            .unwrap_err()
            .contains("unexpected `sideways`"));
    }
}

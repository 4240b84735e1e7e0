//! The files `vecplane run` writes, end to end: on a full file system (a 64 KiB tmpfs the test
//! mounts and unmounts, also on failure) a pcap tx file and a `ctl pcap` capture end on a whole
//! record that an independent reader (scapy's `rdpcap`) parses to the end, the failure is in
//! `--stats-json`, `show` and the exit status, and only records in the file count as written;
//! and no output may be another (a capture into the stats file or the config, a routes file
//! that is the config or the stats file, or in a directory others can write).
//! The tmpfs tests need root (skipped on a developer's machine without it, failures in CI).
//! Addresses come from 198.18.0.0/15 only.

#[path = "../../tests/golden/golden_support.rs"]
mod golden_support;

mod support;

use packet::headers::{build_udp_frame, UdpFrameSpec};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{stderr, Daemon, TempDir};

/// A tmpfs of `size` mounted on a fresh directory; unmounted (and the directory removed) on
/// drop, also when the test fails.
struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mount one under `parent`, or None (after `testenv::skip`) without root or mount.
    fn mount(parent: &TempDir, size: &str) -> Option<SmallFs> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            testenv::skip("mounting a small tmpfs needs root");
            return None;
        }
        let dir = parent.path("full");
        std::fs::create_dir(&dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("vecplane-test-full")
            .arg(&dir)
            .output();
        match o {
            Ok(o) if o.status.success() => Some(SmallFs { dir }),
            Ok(o) => {
                testenv::skip(&format!("cannot mount a tmpfs: {}", stderr(&o)));
                None
            }
            Err(e) => {
                testenv::skip(&format!("cannot run mount: {e}"));
                None
            }
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a daemon of a failed test): detach it now, it goes when released.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A classic pcap file of `frames` (microsecond magic, little endian).
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let records: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (1_700_000_000_000_000_000 + i as u64 * 1000, f.as_slice()))
        .collect();
    golden_support::write_pcap(path, &records).unwrap();
}

/// Records scapy's `rdpcap` reads from `path` (it raises on a torn record), or None (after
/// a skip) without scapy.
fn scapy_records(path: &Path, test: &str) -> Option<usize> {
    let py = golden_support::scapy_or_skip(test)?;
    let script = "import sys\nfrom scapy.utils import rdpcap\nprint(len(rdpcap(sys.argv[1])))";
    let o = Command::new(py)
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scapy cannot read {} to its end: {}",
        path.display(),
        stderr(&o)
    );
    Some(String::from_utf8_lossy(&o.stdout).trim().parse().unwrap())
}

fn frames(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            build_udp_frame(&UdpFrameSpec {
                src_port: 1000 + i as u16,
                frame_size: size,
                ..UdpFrameSpec::default()
            })
        })
        .collect()
}

/// An L2 cross-connect from a pcap file to a pcap file at `tx`.
fn xconnect_config(tx: &Path) -> String {
    format!(
        "[[port]]\nname = \"x0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:0a:01\"\nrx = \"in.pcap\"\n\n\
         [[port]]\nname = \"x1\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:0b:01\"\ntx = \"{}\"\n\n\
         [[xconnect]]\nfrom = \"x0\"\nto = \"x1\"\n",
        tx.display()
    )
}

#[test]
fn a_full_disk_under_a_pcap_tx_file_fails_the_run_and_leaves_whole_records() {
    let d = TempDir::new();
    let Some(fs) = SmallFs::mount(&d, "64k") else {
        return;
    };
    let out = fs.path("out.pcap");
    let cfg = d.write("xc.toml", &xconnect_config(&out));
    // 400 frames of 1000 bytes: about 400 KiB for a 64 KiB file system.
    let sent = frames(400, 1000);
    write_pcap(&d.path("in.pcap"), &sent);
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    assert_eq!(dm.wait_exit(Duration::from_secs(60)), 1, "{}", dm.logs());
    let logs = dm.logs();
    assert!(
        logs.contains("port `x1`") && logs.contains("out.pcap") && logs.contains("not written"),
        "{logs}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let x1 = &s["ports"][1];
    let failure = x1["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("No space left on device") && failure.contains("whole record"),
        "{s}"
    );
    let (tx, drops) = (
        x1["tx_packets"].as_u64().unwrap(),
        x1["tx_drops"].as_u64().unwrap(),
    );
    assert_eq!(tx + drops, 400, "{s}");
    assert!(tx > 0 && drops > 0, "{s}");
    // The file ends on a whole record and holds exactly what was counted as sent.
    let size = std::fs::metadata(&out).unwrap().len();
    let frame = sent[0].len() as u64;
    assert_eq!(size, 24 + tx * (16 + frame), "{s}");
    assert_eq!(x1["tx_bytes"].as_u64().unwrap(), tx * frame, "{s}");
    if let Some(n) = scapy_records(&out, "a_full_disk_under_a_pcap_tx_file") {
        assert_eq!(n as u64, tx);
    }
}

/// A daemon whose memory port sends for as long as it runs.
const MEMORY: &str = r#"
[[port]]
name = "in0"
driver = "memory"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
frame-size = 1000
flows = 16
src-ip = "198.18.1.2"
destinations = ["198.19.0.10"]

[[port]]
name = "out0"
driver = "memory"
mac = "02:00:00:00:02:01"
ip4 = ["198.18.2.1/24"]
generate = false

[[neighbour]]
ip = "198.18.2.2"
mac = "02:00:00:00:02:02"
port = "out0"

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"
"#;

#[test]
fn a_full_disk_under_a_capture_counts_only_written_records_and_says_why() {
    let d = TempDir::new();
    let Some(fs) = SmallFs::mount(&d, "64k") else {
        return;
    };
    let cfg = d.write("mem.toml", MEMORY);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let cap = fs.path("cap.pcap");
    dm.ctl_ok(&[
        "pcap",
        "start",
        "in0",
        cap.to_str().unwrap(),
        "rx",
        "count",
        "100000",
    ]);
    let t0 = Instant::now();
    let status = loop {
        let st = dm.ctl_json(&["show", "pcap"]);
        if st["state"] != "running" {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{st}\n{}",
            dm.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status["state"], "failed", "{status}");
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("No space left on device") && error.contains("cap.pcap"),
        "{status}"
    );
    let text = dm.ctl_ok(&["show", "pcap"]);
    assert!(
        text.contains("failed") && text.contains("No space left"),
        "{text}"
    );
    let written = status["written"].as_u64().unwrap();
    assert!(written > 0, "{status}");
    let size = std::fs::metadata(&cap).unwrap().len();
    assert!(size <= 64 * 1024, "{size}");
    if let Some(n) = scapy_records(&cap, "a_full_disk_under_a_capture") {
        assert_eq!(n as u64, written, "{status}");
    }
}

#[test]
fn a_capture_into_the_stats_file_or_the_config_is_refused() {
    let d = TempDir::new();
    let cfg = d.write("mem.toml", MEMORY);
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    dm.wait_ready();
    let other_spelling = d.path("./stats.json");
    for (file, needle) in [
        (&stats, "--stats-json file"),
        (&other_spelling, "--stats-json file"),
        (&cfg, "config file"),
    ] {
        let o = dm.ctl(&["pcap", "start", "in0", file.to_str().unwrap()]);
        let err = stderr(&o);
        assert!(
            !o.status.success(),
            "a capture into {} was accepted",
            file.display()
        );
        assert!(err.contains(needle), "{}: {err}", file.display());
    }
    assert!(std::fs::read_to_string(&cfg).unwrap() == MEMORY);
    dm.signal(libc::SIGTERM);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert!(s["ports"][0]["rx_packets"].as_u64().unwrap() > 0, "{s}");
}

/// `[lb]` and `[bgp]` with the routes file at `routes`.
fn bgp_config(routes: &Path) -> String {
    format!(
        "{MEMORY}\n[lb]\n\n[bgp]\ncontrol-socket = \"bird.ctl\"\nroutes-file = \"{}\"\n",
        routes.display()
    )
}

#[test]
fn a_routes_file_that_is_another_file_or_in_an_open_directory_is_refused() {
    let d = TempDir::new();
    let cfg = d.path("lb.toml");
    let stats = d.path("stats.json");
    let open_dir = d.path("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    for (routes, extra, needle) in [
        (cfg.clone(), vec![], "it is the config file"),
        (
            stats.clone(),
            vec!["--stats-json", stats.to_str().unwrap()],
            "another output of this run names the same file",
        ),
        (
            open_dir.join("vecplane.conf"),
            vec![],
            "writable by others (mode 0777) without the sticky bit",
        ),
    ] {
        std::fs::write(&cfg, bgp_config(&routes)).unwrap();
        let mut dm = Daemon::start(&d, &cfg, &extra);
        assert_eq!(dm.wait_exit(Duration::from_secs(30)), 2, "{}", dm.logs());
        let logs = dm.logs();
        assert!(
            logs.contains(needle) && logs.contains("nothing was started"),
            "{}: {logs}",
            routes.display()
        );
        assert_eq!(
            std::fs::read_to_string(&cfg).unwrap(),
            bgp_config(&routes),
            "the config was changed"
        );
    }
    assert!(!stats.exists() || std::fs::read(&stats).unwrap().is_empty());
}

#[test]
fn a_capture_into_the_routes_file_is_refused_while_it_is_announced() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testenv::skip("the BGP liveness device (a TAP) needs root");
        return;
    }
    let d = TempDir::new();
    let routes = d.path("vecplane.conf");
    let device = format!("vpo{}", std::process::id() % 1_000_000);
    let cfg = d.write(
        "lb.toml",
        &format!("{}interface = \"{device}\"\n", bgp_config(&routes)),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let written = std::fs::read_to_string(&routes).unwrap();
    assert!(written.contains("protocol static vecplane4"), "{written}");
    let o = dm.ctl(&["pcap", "start", "in0", routes.to_str().unwrap()]);
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "a capture into the routes file was accepted"
    );
    assert!(err.contains("BGP routes file"), "{err}");
    assert_eq!(std::fs::read_to_string(&routes).unwrap(), written);
    // A second daemon with the same routes file is refused before it starts anything.
    let d2 = TempDir::new();
    let cfg2 = d2.write(
        "lb.toml",
        &format!("{}interface = \"{device}b\"\n", bgp_config(&routes)),
    );
    let mut second = Daemon::start(&d2, &cfg2, &[]);
    assert_eq!(
        second.wait_exit(Duration::from_secs(30)),
        2,
        "{}",
        second.logs()
    );
    assert!(
        second.logs().contains("another process"),
        "{}",
        second.logs()
    );
    dm.signal(libc::SIGTERM);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

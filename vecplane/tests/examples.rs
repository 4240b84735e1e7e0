//! Every example config under examples/ runs as shipped, as README's tour starts them: the pcap
//! replay (`l2xc.toml`, its capture shipped beside it) ends by itself with its output complete;
//! the daemons (`router.toml` on TAP ports, the tour's; `flow-switch.toml` on TAP ports;
//! `vm-bridge.toml` on vhost-user sockets with no guest yet) come up, answer `vecplane ctl`, and
//! stop cleanly on SIGINT with their final counters written. Each runs from a temp copy of
//! examples/ (relative paths as shipped, outputs never in the tree) and the daemons in a network
//! namespace of their own (`unshare --net`, root), so their TAPs never meet the host's and go
//! away with them.

#[macro_use]
#[path = "support/root.rs"]
mod root;
mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{stderr, stdout, TempDir, BIN};

/// The daemons run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The examples that end by themselves (pcap inputs only).
const REPLAYS: [&str; 1] = ["l2xc.toml"];
/// The examples that run until SIGINT.
const DAEMONS: [&str; 3] = ["router.toml", "flow-switch.toml", "vm-bridge.toml"];

/// How long a start or a stop may take before the test gives up: generous, a bound against a
/// hang, not a speed (a loaded machine takes longer and must still pass).
const PATIENCE: Duration = Duration::from_secs(60);

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A copy of examples/ (its regular files) in `d`; returns the copy's directory.
fn copy_examples(d: &TempDir) -> PathBuf {
    let to = d.path("examples");
    std::fs::create_dir_all(&to).expect("mkdir");
    for e in std::fs::read_dir(examples_dir()).expect("examples/") {
        let p = e.expect("entry").path();
        // Outputs of a run in the tree (ignored by git) are not part of what is shipped.
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_file() && !name.ends_with("-out.pcap") {
            std::fs::copy(&p, to.join(name)).expect("copy");
        }
    }
    to
}

/// Records in a classic pcap file (24-byte header, 16-byte record headers).
fn pcap_records(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut at = 24;
    let mut n = 0;
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16 + incl;
        n += 1;
    }
    assert_eq!(at, b.len(), "{}: a torn last record", path.display());
    n
}

fn port<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no port {name} in {stats}"))
}

#[test]
fn every_example_is_run_by_a_test() {
    let mut shipped: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("examples/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    shipped.sort();
    let mut covered: Vec<String> = REPLAYS
        .iter()
        .chain(&DAEMONS)
        .map(|s| s.to_string())
        .collect();
    covered.sort();
    assert_eq!(shipped, covered, "an example config no test runs");
}

#[test]
fn the_replay_example_ends_by_itself_with_its_output_complete() {
    let d = TempDir::new();
    let dir = copy_examples(&d);
    let stats_file = d.path("l2xc-stats.json");
    let mut child = Command::new(BIN)
        .args(["run", "--config"])
        .arg(dir.join("l2xc.toml"))
        .arg("--socket")
        .arg(d.path("l2xc.sock"))
        .arg("--stats-json")
        .arg(&stats_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vecplane run starts");
    let status = wait_exit(&mut child, "l2xc.toml");
    let out = child.wait_with_output().expect("output");
    assert!(status.success(), "l2xc.toml: {status}\n{}", stderr(&out));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats_file).expect("--stats-json"))
            .expect("JSON");
    let sent = pcap_records(&dir.join("l2xc-in.pcap"));
    assert!(sent > 0, "the shipped capture is empty");
    assert_eq!(port(&stats, "in0")["rx_packets"], sent as u64, "{stats}");
    assert_eq!(port(&stats, "out0")["tx_packets"], sent as u64, "{stats}");
    assert_eq!(pcap_records(&dir.join("l2xc-out.pcap")), sent);
}

/// Wait for `child` to exit, at most `PATIENCE`; kills it and fails after that.
fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if t0.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {PATIENCE:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A daemon example running in a network namespace of its own; killed on drop.
struct Running {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
    name: String,
}

impl Running {
    fn start(d: &TempDir, dir: &Path, name: &str) -> Running {
        let socket = d.path(&format!("{name}.sock"));
        let log = d.path(&format!("{name}.log"));
        let child = Command::new("unshare")
            .arg("--net")
            .arg("--")
            .arg(BIN)
            .args(["run", "--config"])
            .arg(dir.join(name))
            .arg("--socket")
            .arg(&socket)
            .arg("--stats-json")
            .arg(d.path(&format!("{name}-stats.json")))
            .stdout(Stdio::from(std::fs::File::create(&log).expect("log")))
            .stderr(Stdio::from(
                std::fs::File::options()
                    .append(true)
                    .open(&log)
                    .expect("log"),
            ))
            .spawn()
            .expect("unshare --net vecplane run starts");
        let mut r = Running {
            child: Some(child),
            socket,
            log,
            name: name.to_string(),
        };
        r.wait_ready();
        r
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().expect("wait"))
            {
                panic!("{}: exited at once ({s}):\n{}", self.name, self.log());
            }
            if self.socket.exists() && self.ctl(&["show", "interfaces"]).0 {
                return;
            }
            assert!(
                t0.elapsed() < PATIENCE,
                "{}: no answer on its socket after {PATIENCE:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `vecplane ctl WORDS`: (success, stdout + stderr).
    fn ctl(&self, words: &[&str]) -> (bool, String) {
        let o = Command::new(BIN)
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(words)
            .output()
            .expect("vecplane ctl runs");
        (o.status.success(), format!("{}{}", stdout(&o), stderr(&o)))
    }

    fn ctl_ok(&self, words: &[&str]) -> String {
        let (ok, out) = self.ctl(words);
        assert!(ok, "{}: ctl {words:?}: {out}\n{}", self.name, self.log());
        out
    }

    /// SIGINT, as Ctrl-C: it must exit 0 and write its final counters.
    fn interrupt(mut self) -> Value {
        let mut child = self.child.take().expect("running");
        // SAFETY: a signal to our own child (unshare execs vecplane: the same process).
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        let status = wait_exit(&mut child, &self.name);
        assert!(status.success(), "{}: {status}\n{}", self.name, self.log());
        let file = self.log.with_file_name(format!("{}-stats.json", self.name));
        serde_json::from_str(&std::fs::read_to_string(&file).expect("--stats-json written"))
            .expect("JSON")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn the_daemon_examples_start_answer_ctl_and_stop_cleanly_on_sigint() {
    require_root!(SERIAL, &["unshare"]);
    let d = TempDir::new();
    let dir = copy_examples(&d);
    for (name, ports) in [
        ("router.toml", &["in0", "out0"][..]),
        ("flow-switch.toml", &["p1", "p2", "p3"][..]),
        ("vm-bridge.toml", &["vm1", "vm2"][..]),
    ] {
        let r = Running::start(&d, &dir, name);
        let shown = r.ctl_ok(&["show", "interfaces"]);
        for p in ports {
            assert!(shown.contains(p), "{name}: no port {p} in\n{shown}");
        }
        if name == "router.toml" {
            readme_tour(&r);
        }
        if name == "flow-switch.toml" {
            let flows = r.ctl_ok(&["dump-flows", "br0"]);
            assert!(flows.contains("tp_dst=80"), "{flows}");
        }
        let stats = r.interrupt();
        for p in ports {
            port(&stats, p);
        }
    }
}

/// The `ctl` commands of README's tour that need no traffic, against examples/router.toml.
fn readme_tour(r: &Running) {
    let rt = r.ctl_ok(&["show", "runtime"]);
    assert!(rt.contains("in0-rx") && rt.contains("out0-rx"), "{rt}");
    let fib = r.ctl_ok(&["show", "ip", "fib", "198.18.100.7"]);
    assert!(
        fib.contains("198.18.100.0/24") && fib.contains("198.18.2.2"),
        "{fib}"
    );
    r.ctl_ok(&["show", "neighbours"]);
    r.ctl_ok(&["show", "errors"]);
    r.ctl_ok(&["show", "rxq"]);
    r.ctl_ok(&[
        "route",
        "add",
        "198.19.0.0/16",
        "via",
        "198.18.2.2",
        "198.18.2.3",
    ]);
    let shown = r.ctl_ok(&["route", "show", "198.19.0.0/16"]);
    assert!(shown.contains("198.18.2.3"), "{shown}");
    r.ctl_ok(&["route", "replace", "198.19.0.0/16", "via", "198.18.2.9"]);
    r.ctl_ok(&["route", "del", "198.19.0.0/16"]);
    r.ctl_ok(&[
        "neighbour",
        "add",
        "198.18.2.9",
        "02:00:00:00:02:09",
        "out0",
    ]);
    let capture = r.socket.with_file_name("in0.pcap");
    let capture = capture.to_str().expect("utf-8 path");
    r.ctl_ok(&["pcap", "start", "in0", capture, "rx", "count", "100"]);
    r.ctl_ok(&["show", "pcap"]);
    r.ctl_ok(&["pcap", "stop"]);
    r.ctl_ok(&["trace", "add", "in0-rx", "10"]);
    r.ctl_ok(&["show", "trace"]);
    r.ctl_ok(&["clear", "runtime"]);
    let v: Value = serde_json::from_str(&r.ctl_ok(&["--json", "show", "runtime"])).expect("JSON");
    assert!(v.is_object(), "{v}");
}

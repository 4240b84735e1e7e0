//! What the binary's end-to-end tests share: a temp directory, running `vecplane`, and a
//! daemon under test with its own socket, logs and `ctl`. Nothing here asserts a feature.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "vecplane-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

// --- a daemon under test ---------------------------------------------------------------------

pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

impl Daemon {
    pub fn start(dir: &TempDir, config: &Path, extra: &[&str]) -> Daemon {
        let socket = dir.path("ctl/vecplane.sock");
        let out = dir.path("daemon.out");
        let err = dir.path("daemon.err");
        let child = Command::new(BIN)
            .arg("run")
            .arg("--config")
            .arg(config)
            .arg("--socket")
            .arg(&socket)
            .args(extra)
            .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
            .spawn()
            .unwrap();
        Daemon {
            child: Some(child),
            socket,
            out,
            err,
        }
    }

    pub fn logs(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            std::fs::read_to_string(&self.out).unwrap_or_default(),
            std::fs::read_to_string(&self.err).unwrap_or_default()
        )
    }

    /// Wait until the daemon answers on its socket.
    pub fn wait_ready(&mut self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited early ({st}):\n{}", self.logs());
            }
            if self.socket.exists() && self.ctl(&["help"]).status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("daemon not ready after 20 s:\n{}", self.logs());
    }

    pub fn ctl(&self, words: &[&str]) -> Output {
        Command::new(BIN)
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(words)
            .output()
            .unwrap()
    }

    pub fn ctl_ok(&self, words: &[&str]) -> String {
        let o = self.ctl(words);
        assert!(o.status.success(), "ctl {words:?} failed: {}", stderr(&o));
        stdout(&o)
    }

    pub fn ctl_json(&self, words: &[&str]) -> Value {
        let mut w = vec!["--json"];
        w.extend_from_slice(words);
        serde_json::from_str(&self.ctl_ok(&w)).unwrap()
    }

    /// Wait for the daemon to exit by itself; its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> i32 {
        let t0 = Instant::now();
        let child = self.child.as_mut().unwrap();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                self.child = None;
                return st.code().unwrap_or(-1);
            }
            if t0.elapsed() > limit {
                panic!("daemon still running after {limit:?}:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// --- veth benchmarks run as tests ------------------------------------------------------------

/// The arguments of a short veth bench run: one run of 1 s after a 0.5 s warm-up, 256 flows,
/// JSON, no progress lines.
pub const SHORT_RUN: [&str; 10] = [
    "--runs",
    "1",
    "--seconds",
    "1",
    "--warmup",
    "0.5",
    "--flows",
    "256",
    "--json",
    "--no-progress",
];

/// True when a veth bench can run here: the lab `tools` and two CPUs; else the test is skipped
/// (`testenv::skip`, which fails under CI=true).
pub fn veth_bench_possible(tools: &[&str]) -> bool {
    if let Some(why) = netlab::missing_prerequisite(tools) {
        testenv::skip(&why);
        return false;
    }
    if std::thread::available_parallelism().map_or(0, |n| n.get()) < 2 {
        testenv::skip("the veth benchmarks need two CPUs");
        return false;
    }
    true
}

/// `vecplane bench <args>`, bounded to 300 s: its JSON report (panics with the bench's output
/// when it failed or printed no JSON).
pub fn bench_json(args: &[&str]) -> Value {
    let mut all = vec![BIN, "bench"];
    all.extend(args);
    let out = netlab::cmd::run_bounded(&all, Duration::from_secs(300)).expect("bench ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("bench printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// The number at `path` in `v` (panics naming the path when there is none).
pub fn num(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

//! What the vhost-user port tests share (tests/vm_ports.rs with QEMU guests, tests/vm_queues.rs
//! with DPDK's virtio-user): `vecplane run` in a scratch directory of its own, driven through
//! `vecplane ctl`, the guest image, booting and pinging guests, and reading counters. Nothing
//! here asserts a feature.
#![allow(dead_code)]

use netlab::vm_lab::VhostLab;
use netlab::{Guest, GuestImage, GuestSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

/// Host tools besides QEMU (checked with root by `require_root!`).
pub const TOOLS: &[&str] = &[netlab::guest::QEMU];

/// Deadline of one short guest command.
pub const SHORT: Duration = Duration::from_secs(30);

/// The guest image, or `None` after reporting why guests cannot run here.
pub fn image() -> Option<GuestImage> {
    GuestImage::for_tests()
}

/// `vecplane run` with a config in a scratch directory of its own (netlab's `VhostLab`, which
/// also holds the vhost-user sockets), driven through `vecplane ctl`; the daemon is stopped and
/// the directory deleted on drop.
pub struct Daemon {
    pub lab: VhostLab,
}

impl Daemon {
    pub fn start(config: &str) -> Daemon {
        Daemon::start_in(config, None)
    }

    /// `start`, inside network namespace `ns` when given (the sockets stay in the scratch
    /// directory, which every namespace sees).
    pub fn start_in(config: &str, ns: Option<&str>) -> Daemon {
        Daemon {
            lab: VhostLab::start_in(Path::new(BIN), config, ns).unwrap_or_else(|e| panic!("{e:#}")),
        }
    }

    /// What the daemon printed so far.
    pub fn log(&self) -> String {
        self.lab.vecplane().map(|v| v.log()).unwrap_or_default()
    }

    /// A vhost-user socket path in the scratch directory.
    pub fn sock(&self, name: &str) -> PathBuf {
        self.lab.socket(name)
    }

    /// `vecplane ctl WORDS` (bounded to 20 s): success and stdout + stderr.
    pub fn ctl(&self, words: &[&str]) -> (bool, String) {
        let socket = match self.lab.vecplane() {
            Ok(v) => v.socket().to_string_lossy().into_owned(),
            Err(e) => return (false, format!("{e:#}")),
        };
        let mut args = vec![BIN, "ctl", "--socket", &socket];
        args.extend_from_slice(words);
        match netlab::cmd::run_bounded(&args, Duration::from_secs(20)) {
            Ok(o) => (
                o.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
            ),
            Err(e) => (false, format!("{e:#}")),
        }
    }

    pub fn ctl_ok(&self, words: &[&str]) -> String {
        let (ok, out) = self.ctl(words);
        assert!(ok, "vecplane ctl {words:?} failed: {out}");
        out
    }

    pub fn ctl_json(&self, words: &[&str]) -> Value {
        let mut w = vec!["--json"];
        w.extend_from_slice(words);
        let out = self.ctl_ok(&w);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("ctl {words:?} JSON ({e}): {out}"))
    }

    /// Port `name` in `show interfaces`.
    pub fn port(&self, name: &str) -> Value {
        self.lab.port(name).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// What vecplane reported about its guests that must not happen: malformed rings and
    /// failed vhost-user requests.
    pub fn guest_errors(&self) -> Vec<String> {
        self.lab.guest_errors()
    }

    pub fn assert_running(&mut self) {
        self.lab.check_running().unwrap_or_else(|e| panic!("{e:#}"));
    }
}

/// Start QEMU for every spec in order, then wait for all of them (`Guest::boot_all`).
pub fn boot(image: &GuestImage, specs: Vec<GuestSpec>) -> Vec<Guest> {
    Guest::boot_all(image, specs).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Ping `to` from `g`: one answer within 10 s (the neighbour is resolved), then 3 of 3.
pub fn pings(g: &mut Guest, to: &str) {
    g.pings(to, SHORT).unwrap_or_else(|e| panic!("{e:#}"));
}

pub fn counter(p: &Value, k: &str) -> u64 {
    p[k].as_u64()
        .unwrap_or_else(|| panic!("no counter {k} in {p}"))
}

pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Packets node `node` of worker `worker` processed (`show runtime`).
pub fn node_packets(rt: &Value, worker: usize, node: &str) -> u64 {
    rt["workers"][worker]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["name"] == node)
        .and_then(|n| n["packets"].as_u64())
        .unwrap_or(0)
}

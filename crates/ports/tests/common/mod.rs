//! Helpers shared by the ports' namespace tests: prerequisite checks, running them one at a time,
//! running commands, and deleting namespaces left behind by dead runs. Test code only.

use std::process::{Command, Output, Stdio};

/// Why the test cannot run here (not root, or one of `tools` missing), if it cannot.
pub fn missing_prerequisite(needs_root_for: &str, tools: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(format!("not root ({needs_root_for} need root)"));
    }
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

/// Tests run one at a time: each busy-polls a core, and this machine may have only two.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Return from the test with a printed reason when `$skip` (an `Option<String>`) says why it
/// cannot run; otherwise hold the serialising lock for the rest of the test.
macro_rules! require_root {
    ($skip:expr) => {
        if let Some(why) = $skip {
            testenv::skip(&why);
            return;
        }
        let _serial = common::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}
pub(crate) use require_root;

/// Why a TAP test cannot run here (not root, a tool of `tools` missing, no /dev/net/tun).
#[allow(dead_code)] // not every test file has TAP tests
pub fn tap_skip_reason(tools: &[&str]) -> Option<String> {
    missing_prerequisite("network namespaces and TAP devices", tools).or_else(|| {
        (!std::path::Path::new("/dev/net/tun").exists())
            .then(|| "/dev/net/tun does not exist".to_string())
    })
}

/// Run a command and return its output (panics only when it cannot be started).
pub fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"))
}

/// Run a command that must succeed; returns its stdout.
#[track_caller]
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Delete namespaces named `<prefix><pid>-...` whose creating process is gone.
pub fn delete_leftovers(prefix: &str) {
    let list = String::from_utf8_lossy(&run(&["ip", "netns", "list"]).stdout).into_owned();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run(&["ip", "netns", "del", name]);
        }
    }
}

/// A node named `sink` that frees what it is given.
#[allow(dead_code)] // not every test file builds a graph
pub struct Sink;

impl graph::Node for Sink {
    fn name(&self) -> &str {
        "sink"
    }
    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }
    fn process(
        &mut self,
        cx: &mut graph::NodeContext<'_>,
        frame: &[u32],
        _: &mut [u16],
    ) -> graph::Dispatch {
        cx.pool.free_batch(frame);
        graph::Dispatch::Consumed
    }
}

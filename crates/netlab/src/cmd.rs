//! Running external commands for netlab: bounded runs (every command has a deadline and is killed
//! when it passes it), commands inside a namespace (`ip netns exec`), long-running children that
//! are stopped when dropped (and, outside netlab's namespaces, killed when this process ends),
//! prerequisite checks, and writing a sysctl inside a namespace. It only signals processes it
//! spawned itself, by their id, and never leaves one running past its owner.

use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Deadline of the setup and inspection commands (`ip`, `ethtool`, ...).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Grace period between SIGTERM and SIGKILL when a child is stopped.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// `args` prefixed with `ip netns exec NS`.
pub fn in_ns<S: AsRef<str>>(ns: &str, args: &[S]) -> Vec<String> {
    let mut v = vec![
        "ip".to_string(),
        "netns".to_string(),
        "exec".to_string(),
        ns.to_string(),
    ];
    v.extend(args.iter().map(|a| a.as_ref().to_string()));
    v
}

fn command<S: AsRef<OsStr>>(args: &[S]) -> Result<Command> {
    let Some((prog, rest)) = args.split_first() else {
        bail!("empty command line");
    };
    let mut c = Command::new(prog);
    c.args(rest);
    Ok(c)
}

fn show<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// Run `args` to completion, killing it after `timeout`; stdout and stderr are captured. An
/// error only when it cannot be started or passes its deadline (a non-zero exit is returned).
pub fn run_bounded<S: AsRef<OsStr>>(args: &[S], timeout: Duration) -> Result<Output> {
    let mut child = command(args)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{}`", show(args)))?;
    let out = child.stdout.take().map(read_all);
    let err = child.stderr.take().map(read_all);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().context("waiting for a child")? {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => bail!(
            "`{}` did not finish within {:.0} s (killed){}",
            show(args),
            timeout.as_secs_f64(),
            tail(&stderr)
        ),
    }
}

fn tail(stderr: &[u8]) -> String {
    let s = String::from_utf8_lossy(stderr);
    let s = s.trim();
    if s.is_empty() {
        String::new()
    } else {
        format!(": {s}")
    }
}

/// Run `args` (bounded by [`DEFAULT_TIMEOUT`]); it must exit 0. Returns its stdout.
pub fn run_ok<S: AsRef<OsStr>>(args: &[S]) -> Result<String> {
    run_ok_within(args, DEFAULT_TIMEOUT)
}

/// [`run_ok`], killed after `limit`.
pub fn run_ok_within<S: AsRef<OsStr>>(args: &[S], limit: Duration) -> Result<String> {
    let out = run_bounded(args, limit)?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}){}",
            show(args),
            describe_status(out.status),
            tail(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// "exit status N" or "killed by signal N".
pub fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// Whether `tool` is on PATH.
pub fn tool_available(tool: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        let p = dir.join(tool);
        std::fs::metadata(&p).is_ok_and(|m| m.is_file())
    })
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Why a namespace test or tool cannot run here (not root, or one of `tools` missing), if so.
pub fn missing_prerequisite(tools: &[&str]) -> Option<String> {
    if !is_root() {
        return Some("not root (network namespaces need root)".to_string());
    }
    tools
        .iter()
        .find(|t| !tool_available(t))
        .map(|t| format!("`{t}` is not installed"))
}

/// Write `value` to `/proc/sys/<key>` (key with `/` separators, e.g. `net/ipv4/ip_forward`) as
/// seen from network namespace `ns`, from a short-lived thread that joins it (no process spawned).
pub fn write_sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    let ns_path = PathBuf::from("/run/netns").join(ns);
    let key_path = PathBuf::from("/proc/sys").join(key);
    let value = value.to_string();
    let shown = format!("{}={value} in {ns}", key.replace('/', "."));
    let handle = std::thread::spawn(move || -> Result<()> {
        let f = File::open(&ns_path).with_context(|| format!("open {}", ns_path.display()))?;
        // SAFETY: setns on a namespace file descriptor we hold open; it changes only the
        // network namespace of this short-lived thread.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("setns");
        }
        std::fs::write(&key_path, value.as_bytes())
            .with_context(|| format!("write {}", key_path.display()))
    });
    match handle.join() {
        Ok(r) => r.with_context(|| format!("cannot set {shown}")),
        Err(_) => bail!("cannot set {shown}: the helper thread panicked"),
    }
}

/// A long-running child (normally inside a namespace), stopped when dropped.
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    label: String,
    log: Option<PathBuf>,
    status: Option<ExitStatus>,
}

impl Spawned {
    /// Spawn `args` with stdin closed, stdout and stderr appended to `log` (or discarded).
    pub fn start<S: AsRef<OsStr>>(args: &[S], log: Option<&Path>) -> Result<Spawned> {
        let (mut cmd, label) = Spawned::command(args, log)?;
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start `{label}`"))?;
        Ok(Spawned {
            child,
            label,
            log: log.map(Path::to_path_buf),
            status: None,
        })
    }

    /// [`Spawned::start`] for a child outside netlab's namespaces (whose deletion would end it):
    /// it gets SIGKILL when this process ends, also when the process is killed or aborts.
    pub fn start_tied<S: AsRef<OsStr>>(args: &[S], log: Option<&Path>) -> Result<Spawned> {
        let (mut cmd, label) = Spawned::command(args, log)?;
        // SAFETY: the closure only calls prctl(), which is async-signal-safe, between fork and
        // exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // From a thread that lives as long as the process: the parent-death signal follows the
        // spawning thread.
        let child = crate::guest::spawn_from_long_lived_thread(cmd)
            .with_context(|| format!("cannot start `{label}`"))?;
        Ok(Spawned {
            child,
            label,
            log: log.map(Path::to_path_buf),
            status: None,
        })
    }

    fn command<S: AsRef<OsStr>>(args: &[S], log: Option<&Path>) -> Result<(Command, String)> {
        let (out, err) = match log {
            Some(p) => {
                let f = File::create(p).with_context(|| format!("create {}", p.display()))?;
                let g = f.try_clone().context("duplicate a log file handle")?;
                (Stdio::from(f), Stdio::from(g))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        let mut cmd = command(args)?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        Ok((cmd, show(args)))
    }

    /// The command line, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if it has exited (reaping it).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .with_context(|| format!("waiting for `{}`", self.label))?;
        }
        Ok(self.status)
    }

    /// Wait up to `timeout` for it to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Send `sig` if it has not exited yet (by its id; it is our unreaped child, so the id is
    /// still its own).
    pub fn signal(&mut self, sig: libc::c_int) -> Result<()> {
        if self.try_wait()?.is_none() {
            let pid = libc::pid_t::try_from(self.child.id()).context("process id out of range")?;
            // SAFETY: kill() on the id of our own child that has not been reaped yet.
            unsafe { libc::kill(pid, sig) };
        }
        Ok(())
    }

    /// Stop it: SIGTERM, then SIGKILL after `grace`; returns its exit status.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
        self.signal(libc::SIGTERM)?;
        if let Some(s) = self.wait_timeout(grace)? {
            return Ok(s);
        }
        let _ = self.child.kill();
        let s = self
            .child
            .wait()
            .with_context(|| format!("waiting for `{}`", self.label))?;
        self.status = Some(s);
        Ok(s)
    }

    /// The log file, if output goes to one.
    pub fn log_path(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// What it wrote so far (empty when it has no log).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.stop(STOP_GRACE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_runs_capture_and_time_out() {
        let out = run_bounded(
            &["sh", "-c", "echo hi; echo err >&2; exit 3"],
            DEFAULT_TIMEOUT,
        )
        .expect("sh runs");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
        let e = run_bounded(&["sleep", "5"], Duration::from_millis(100)).expect_err("deadline");
        assert!(e.to_string().contains("did not finish"), "{e}");
        let e = run_ok(&["sh", "-c", "echo bad >&2; exit 1"]).expect_err("fails");
        assert!(e.to_string().contains("(exit status 1): bad"), "{e}");
        assert!(run_bounded::<&str>(&[], DEFAULT_TIMEOUT).is_err());
    }

    #[test]
    fn spawned_children_are_stopped() {
        let dir = std::env::temp_dir().join(format!("netlab-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let log = dir.join("child.log");
        let mut c = Spawned::start(&["sh", "-c", "echo started; exec sleep 30"], Some(&log))
            .expect("spawn");
        assert!(c
            .wait_timeout(Duration::from_millis(200))
            .expect("wait")
            .is_none());
        let s = c.stop(Duration::from_secs(2)).expect("stop");
        assert_eq!(s.signal(), Some(libc::SIGTERM));
        assert!(c.log().contains("started"));
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn in_ns_prefixes_the_command() {
        assert_eq!(
            in_ns("x", &["ping", "-c", "1"]),
            ["ip", "netns", "exec", "x", "ping", "-c", "1"]
        );
    }

    #[test]
    fn tools_are_found_on_path() {
        assert!(tool_available("sh"));
        assert!(!tool_available("no-such-tool-netlab"));
    }
}

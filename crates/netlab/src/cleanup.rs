//! The process-wide registry of live netlab namespaces and scratch directories, their teardown,
//! and the handlers that tear everything down on SIGINT/SIGTERM/SIGHUP (and on a panic when
//! panics abort). It owns deletion: a namespace is emptied of its processes (by id, SIGTERM then
//! SIGKILL; only netlab's own namespaces, where nothing but what netlab started can run) and then
//! deleted, which destroys its veths and bridge; [`RegisteredDir`] lends the same care to a
//! caller's scratch directory. It never touches a namespace it did not create, except leftovers
//! of dead runs with its own prefix.

use crate::cmd::run_ok;
use crate::names::owner_pid;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// What is alive and must be deleted at exit.
#[derive(Default)]
pub(crate) struct Live {
    namespaces: Vec<String>,
    dirs: Vec<PathBuf>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    namespaces: Vec::new(),
    dirs: Vec::new(),
});

fn live() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Register namespace `ns` and create it while holding the registry, so a signal's teardown
/// either sees it or runs after it exists.
pub(crate) fn create_namespace(ns: &str) -> Result<()> {
    let mut l = live();
    l.namespaces.push(ns.to_string());
    run_ok(&["ip", "netns", "add", ns])?;
    Ok(())
}

/// Register and create scratch directory `dir`.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    let mut l = live();
    l.dirs.push(dir.to_path_buf());
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    Ok(())
}

/// Tear down `namespaces` and `dirs` and forget them. Returns what could not be deleted.
pub(crate) fn release(namespaces: &[&str], dirs: &[&Path]) -> Vec<String> {
    let mut l = live();
    let mut failed = Vec::new();
    for ns in namespaces {
        if let Err(e) = delete_namespace(ns) {
            failed.push(format!("{ns}: {e:#}"));
        }
        l.namespaces.retain(|n| n != ns);
    }
    for d in dirs {
        if d.exists() {
            if let Err(e) = std::fs::remove_dir_all(d) {
                failed.push(format!("{}: {e}", d.display()));
            }
        }
        l.dirs.retain(|x| x != d);
    }
    failed
}

/// A scratch directory for a caller outside netlab (a benchmark's sockets and config), kept in
/// the same registry as netlab's own: deleted on drop, by the SIGINT/SIGTERM/SIGHUP handlers,
/// and, named `<tmp>/<prefix>-<pid>-<seq>`, as the leftover of a dead run by the next
/// [`RegisteredDir::create`] with the same prefix.
#[derive(Debug)]
pub struct RegisteredDir {
    path: PathBuf,
}

impl RegisteredDir {
    /// A fresh, empty directory named after `prefix` (1 to 4 of `[a-z0-9]`).
    pub fn create(prefix: &str) -> Result<RegisteredDir> {
        install_cleanup_handlers()?;
        delete_leftovers(prefix);
        let path = crate::names::Names::next(prefix)?.dir;
        create_dir(&path)?;
        Ok(RegisteredDir { path })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RegisteredDir {
    fn drop(&mut self) {
        for f in release(&[], &[&self.path]) {
            eprintln!("netlab: cannot delete {f}");
        }
    }
}

/// Names of the namespaces netlab holds right now (for tests and messages).
pub fn live_namespaces() -> Vec<String> {
    live().namespaces.clone()
}

/// The inode of network namespace `ns` (of its file under /run/netns), if it exists.
fn namespace_inode(ns: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(Path::new("/run/netns").join(ns))
        .ok()
        .map(|m| m.ino())
}

/// The ids of the processes whose network namespace is the one with inode `inode` (found
/// through /proc, so also after the namespace's name is gone).
fn pids_in(inode: u64) -> Vec<libc::pid_t> {
    let want = format!("net:[{inode}]");
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid > 1 && pid != me)
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|l| l.as_os_str() == want.as_str())
        })
        .filter_map(|pid| libc::pid_t::try_from(pid).ok())
        .collect()
}

/// Whether namespace `ns` exists.
pub fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// Delete namespace `ns` and end every process still inside it.
///
/// The name goes first, so nothing new can enter by it; then the processes found inside (also
/// one that entered just before) get SIGTERM, and SIGKILL after 1.5 s, until none is left (at
/// most 5 s). The namespace, with its veths, is freed when its last process is gone.
pub fn delete_namespace(ns: &str) -> Result<()> {
    let Some(inode) = namespace_inode(ns) else {
        return Ok(());
    };
    run_ok(&["ip", "netns", "del", ns])?;
    let start = Instant::now();
    let mut termed: Vec<libc::pid_t> = Vec::new();
    let mut quiet_scans = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let pids = pids_in(inode);
        if pids.is_empty() {
            // Look twice, a little apart: a process may have been entering as the name went.
            quiet_scans += 1;
            if quiet_scans >= 2 {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        quiet_scans = 0;
        let hard = start.elapsed() > Duration::from_millis(1500);
        for pid in pids {
            let sig = if hard {
                libc::SIGKILL
            } else if termed.contains(&pid) {
                continue;
            } else {
                termed.push(pid);
                libc::SIGTERM
            };
            // SAFETY: kill() by id on a process found inside a namespace this process created;
            // only processes netlab started (and their children) can be there.
            unsafe { libc::kill(pid, sig) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!("processes inside {ns} did not end within 5 s")
}

/// Tear down everything registered (used by the signal and panic handlers, and by tests).
pub fn cleanup_all() {
    let mut l = live();
    teardown_locked(&mut l);
}

fn teardown_locked(l: &mut Live) {
    for ns in std::mem::take(&mut l.namespaces) {
        let _ = delete_namespace(&ns);
    }
    for d in std::mem::take(&mut l.dirs) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Delete namespaces named `<prefix>-<pid>-...` whose process `pid` is gone (runs that were
/// killed before they could clean up). Returns the names deleted.
pub fn delete_leftovers(prefix: &str) -> Vec<String> {
    let Ok(list) = run_ok(&["ip", "netns", "list"]) else {
        return Vec::new();
    };
    let mut deleted = Vec::new();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = owner_pid(prefix, name) else {
            continue;
        };
        if pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && delete_namespace(name).is_ok()
        {
            deleted.push(name.to_string());
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = owner_pid(prefix, &format!("{name}-a")) else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    deleted
}

/// Write end of the self-pipe the signal handler writes the signal number to.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write() is async-signal-safe; one byte from a valid stack location.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn install() -> Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let (rd, wr) = (fds[0], fds[1]);
    SIGNAL_PIPE.store(wr, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("netlab-signals".into())
        .spawn(move || loop {
            let mut b = 0u8;
            // SAFETY: read() of one byte into a valid stack location from our pipe.
            let n = unsafe { libc::read(rd, (&mut b as *mut u8).cast(), 1) };
            if n == 1 {
                let sig = libc::c_int::from(b);
                // Keep the registry locked to the end: nothing new can be created meanwhile.
                let mut l = live();
                eprintln!("netlab: signal {sig}: deleting the test topology");
                teardown_locked(&mut l);
                // SAFETY: restoring the default action and re-raising the signal ends the
                // process the way the signal would have; exit() is the fallback.
                unsafe {
                    libc::signal(sig, libc::SIG_DFL);
                    libc::kill(libc::getpid(), sig);
                }
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(128 + sig);
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                return;
            }
        })?;
    for sig in SIGNALS {
        // SAFETY: a zeroed sigaction with our handler, SA_RESTART and an empty mask is valid;
        // the handler only performs an async-signal-safe write().
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error().into());
            }
        }
    }
    if cfg!(panic = "abort") {
        // Drop does not run when panics abort: tear down from the hook instead.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if let Ok(mut l) = LIVE.try_lock() {
                teardown_locked(&mut l);
            }
        }));
    }
    Ok(())
}

static INSTALL: Once = Once::new();
static INSTALL_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Install (once per process) the SIGINT/SIGTERM/SIGHUP handlers that delete every live
/// topology and then end the process as the signal would, and, when panics abort, a panic hook
/// that deletes them too. Topologies call this themselves when they are built.
pub fn install_cleanup_handlers() -> Result<()> {
    INSTALL.call_once(|| {
        if let Err(e) = install() {
            *INSTALL_ERROR.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{e:#}"));
        }
    });
    match INSTALL_ERROR
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        Some(e) => anyhow::bail!("cannot install netlab's signal handlers: {e}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_dir_is_deleted_on_drop_and_forgotten() {
        let d = RegisteredDir::create("vtst").expect("dir");
        let path = d.path().to_path_buf();
        assert!(path.is_dir());
        assert!(path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("vtst-{}-", std::process::id()))));
        std::fs::write(path.join("x.sock"), b"").expect("a file inside");
        assert!(live().dirs.contains(&path));
        drop(d);
        assert!(!path.exists());
        assert!(!live().dirs.contains(&path));
    }
}

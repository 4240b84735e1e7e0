//! The process's guard against guest memory that shrinks under its mapping. A frontend shares
//! guest memory as files; if it truncates one (a `memory-backend-memfd` with `seal=off`, a
//! file on tmpfs or hugetlbfs, or a hostile frontend), the next access to a page past the
//! file's new end raises SIGBUS, which would kill vecplane with every other port. This module
//! owns a SIGBUS handler and a fixed table of the guest mappings: a fault inside one is
//! answered by mapping zero pages over that whole mapping (the access completes, reading
//! zeroes) and flagging it, so the port's control thread resets the connection; the frontend's
//! file is never touched.
//!
//! It never handles a fault outside a registered mapping (those go to the handler that was
//! installed before, Rust's stack-overflow guard, or the default action: the process dies as
//! it would have), and the handler never allocates, locks or calls anything but `mmap`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Mappings guarded at once in the process (32 regions for each of 32 ports).
pub const MAX_GUARDED: usize = 1024;

/// One guarded mapping; `start == 0`: a free slot.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static SLOTS: [Slot; MAX_GUARDED] = [FREE; MAX_GUARDED];
/// Registration and release (never the handler).
static TABLE: Mutex<()> = Mutex::new(());
/// SIGBUS's disposition before ours (set once, before ours is installed).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A registered mapping: released (unguarded) on drop, which must come before the unmap.
#[derive(Debug)]
pub struct Guard {
    slot: usize,
}

/// Why a mapping could not be guarded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    /// Every slot is taken.
    #[error("{MAX_GUARDED} guest memory mappings are already guarded in this process")]
    Full,
    /// The handler could not be installed.
    #[error("cannot install the SIGBUS handler: {0}")]
    Install(String),
}

/// Guard `[start, start + len)`, a whole mapping (page-aligned `start`).
pub fn guard(start: *mut u8, len: usize) -> Result<Guard, GuardError> {
    install()?;
    let _table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let slot = SLOTS
        .iter()
        .position(|s| s.start.load(Ordering::Relaxed) == 0)
        .ok_or(GuardError::Full)?;
    let s = &SLOTS[slot];
    s.faulted.store(false, Ordering::Relaxed);
    s.len.store(len, Ordering::Relaxed);
    // Published last: the handler reads `start` first.
    s.start.store(start as usize, Ordering::Release);
    Ok(Guard { slot })
}

impl Guard {
    /// Whether a fault in the mapping replaced it with zero pages (the frontend shrank its
    /// file): the guest's memory is no longer shared there.
    pub fn faulted(&self) -> bool {
        SLOTS[self.slot].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _table = TABLE.lock().unwrap_or_else(|p| p.into_inner());
        let s = &SLOTS[self.slot];
        s.start.store(0, Ordering::Release);
        s.len.store(0, Ordering::Release);
    }
}

/// Install the handler once for the process.
fn install() -> Result<(), GuardError> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            // SAFETY: sigaction reads `action` and writes `old`, both valid for the call; the
            // handler below is async-signal-safe (atomics and mmap only).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    on_sigbus;
                action.sa_sigaction = handler as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                // Read the current disposition first, so the handler never runs without it.
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                    return Err(std::io::Error::last_os_error().to_string());
                }
                let _ = PREVIOUS.set(old);
                if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                    return Err(std::io::Error::last_os_error().to_string());
                }
            }
            Ok(())
        })
        .clone()
        .map_err(GuardError::Install)
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in &SLOTS {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || addr < start {
            continue;
        }
        let len = s.len.load(Ordering::Acquire);
        if addr - start >= len {
            continue;
        }
        // SAFETY: `[start, start + len)` is a mapping vecplane owns and has not unmapped (the
        // slot is freed before the unmap); replacing it with private zero pages changes what
        // it reads, never what else is mapped.
        let r = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED {
            s.faulted.store(true, Ordering::Release);
            return;
        }
        break;
    }
    forward(sig, info, context);
}

/// Not ours: what SIGBUS did before (Rust's stack-overflow handler, or the default action).
fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.get();
    let handler = previous.map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // The default action: restore it and return; the access faults again and the process
        // dies of SIGBUS (ignoring a fault would spin on it forever).
        // SAFETY: a zeroed sigaction with SIG_DFL is valid; sigaction is async-signal-safe.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        return;
    }
    if previous.is_some_and(|p| p.sa_flags & libc::SA_SIGINFO != 0) {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
        // signature, and gets the arguments the kernel gave us.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, context);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes the signal number only.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn memfd(len: u64) -> std::fs::File {
        crate::fake_guest::memfd(len)
    }

    /// Map `file` shared, `len` bytes.
    fn map(file: &std::fs::File, len: usize) -> *mut u8 {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of a file we own; unmapped by the test.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn a_file_shrunk_under_a_guarded_mapping_reads_zeroes_and_is_flagged() {
        let len = 64 * 4096;
        let mut file = memfd(len as u64);
        file.write_all(&[7u8; 4096]).expect("write");
        let p = map(&file, len);
        let g = guard(p, len).expect("guard");
        // SAFETY: inside the mapping.
        assert_eq!(unsafe { std::ptr::read_volatile(p) }, 7);
        assert!(!g.faulted());
        file.set_len(4096).expect("shrink");
        // Past the file's new end: SIGBUS, answered by zero pages over the whole mapping.
        // SAFETY: inside the mapping (which the guard keeps readable).
        let v = unsafe { std::ptr::read_volatile(p.add(10 * 4096)) };
        assert_eq!(v, 0);
        assert!(g.faulted());
        // The whole mapping is private zeroes now, the part still in the file too.
        // SAFETY: inside the mapping.
        assert_eq!(unsafe { std::ptr::read_volatile(p) }, 0);
        drop(g);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p.cast(), len) };
    }

    #[test]
    fn released_slots_are_free_again() {
        let len = 4096;
        let file = memfd(len as u64);
        let p = map(&file, len);
        // More registrations than slots, one at a time (other tests guard mappings meanwhile,
        // so the table is never filled here).
        for _ in 0..(MAX_GUARDED + 10) {
            let g = guard(p, len).expect("a released slot is free again");
            drop(g);
        }
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p.cast(), len) };
    }

    /// Run in a child process by the test below: a fault outside every guarded mapping.
    #[test]
    #[ignore = "run by an_unguarded_fault_still_kills_the_process, in a child process"]
    fn child_faults_outside_the_guard() {
        let len = 2 * 4096;
        let file = memfd(len as u64);
        let guarded = map(&memfd(len as u64), len);
        let _g = guard(guarded, len).expect("guard");
        let p = map(&file, len);
        file.set_len(0).expect("shrink");
        // SAFETY: inside the mapping; its file is gone, so this raises SIGBUS.
        let v = unsafe { std::ptr::read_volatile(p.add(4096)) };
        println!("survived, read {v}");
    }

    #[test]
    fn an_unguarded_fault_still_kills_the_process() {
        use std::os::unix::process::ExitStatusExt;
        let exe = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                "fault_guard::tests::child_faults_outside_the_guard",
                "--nocapture",
                "--test-threads=1",
            ])
            .output()
            .expect("run the child");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGBUS),
            "{:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

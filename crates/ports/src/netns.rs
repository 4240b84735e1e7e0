//! Private network namespaces held by a descriptor: `create_private` makes a fresh namespace
//! that lives exactly as long as its descriptor (no name under /run/netns, so nothing is left
//! behind when vecplane exits, even on SIGKILL), `enter` moves the calling thread into one,
//! `run_in` runs a closure on a short-lived thread inside one, and `ip` runs iproute2 in the
//! calling thread's namespace (the set-up of the interfaces vecplane makes). It changes no thread
//! but the calling one or the one it spawns, and never the process's own namespace.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// A network namespace kept alive by its descriptor. Cloning shares the descriptor.
#[derive(Clone, Debug)]
pub struct Netns(Arc<OwnedFd>);

impl PartialEq for Netns {
    fn eq(&self, other: &Netns) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Netns {}

impl Netns {
    /// Its descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Move the calling thread into `ns` (needs CAP_SYS_ADMIN). Sockets it opens afterwards, and
/// processes it spawns, belong to that namespace.
pub fn enter(ns: &Netns) -> io::Result<()> {
    // SAFETY: setns on a descriptor we hold, for this thread only; the result is checked.
    if unsafe { libc::setns(ns.fd().as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Run `f` on a new thread inside `ns` and wait for it.
pub fn run_in<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter(ns)?;
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("a thread in the private namespace panicked"))?
    })
}

/// A fresh, empty network namespace (only a down `lo`), held by the returned descriptor.
/// Needs CAP_SYS_ADMIN.
pub fn create_private() -> io::Result<Netns> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare affects only this short-lived thread's namespaces.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let f = File::open("/proc/thread-self/ns/net")?;
            Ok(Netns(Arc::new(OwnedFd::from(f))))
        })
        .join()
        .map_err(|_| io::Error::other("the thread creating a namespace panicked"))?
    })
}

/// Run `ip ARGS` in the calling thread's namespace (a child process inherits it); what failed,
/// with `ip`'s own message, otherwise.
pub fn ip<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let out = std::process::Command::new("ip")
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether the calling process may create namespaces (effective uid 0).
pub fn may_create() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_netns_inode() -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/thread-self/ns/net")
            .map(|m| m.ino())
            .unwrap_or(0)
    }

    #[test]
    fn a_private_namespace_is_not_ours_and_threads_enter_it() {
        if !may_create() {
            testenv::skip("creating a network namespace needs root");
            return;
        }
        let ours = own_netns_inode();
        let ns = create_private().expect("create a private namespace");
        let inside = run_in(&ns, own_netns_inode).expect("run in it");
        assert_ne!(inside, ours);
        assert_eq!(run_in(&ns, own_netns_inode).expect("again"), inside);
        assert_eq!(
            own_netns_inode(),
            ours,
            "the calling thread stays where it was"
        );
        assert_eq!(ns.clone(), ns);
    }
}

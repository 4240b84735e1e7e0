//! Test network namespaces for the probe tests: a private namespace with `lo` up, test
//! addresses (198.18.0.0/15, 2001:db8::/32) on `lo`, extra routes, and ping sockets allowed;
//! closures run on a thread that entered it. Test code only: it never touches the namespace
//! the tests run in.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;

/// Why the namespace tests cannot run here (not root, no `ip`), if they cannot.
pub(crate) fn missing() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the probe tests create network namespaces)".to_string());
    }
    let ip = Command::new("ip").arg("-V").output();
    if !ip.is_ok_and(|o| o.status.success()) {
        return Some("`ip` (iproute2) is not installed".to_string());
    }
    None
}

/// A network namespace kept alive by its file.
pub(crate) struct TestNs {
    ns: File,
}

/// Run `ip ARGS` (from the calling thread: in its namespace).
fn ip(args: &str) -> io::Result<()> {
    let out = Command::new("ip").args(args.split_whitespace()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {args}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl TestNs {
    /// A new namespace: `lo` up with `addrs` (ADDR/LEN), `routes` (`ip route add` arguments)
    /// and `net.ipv4.ping_group_range` open to every group.
    pub(crate) fn new(addrs: &[&str], routes: &[&str]) -> io::Result<TestNs> {
        let addrs: Vec<String> = addrs.iter().map(|s| s.to_string()).collect();
        let routes: Vec<String> = routes.iter().map(|s| s.to_string()).collect();
        let made = std::thread::spawn(move || -> io::Result<File> {
            // SAFETY: unshare with CLONE_NEWNET only changes this thread's network namespace.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            ip("link set lo up")?;
            for a in &addrs {
                let nodad = if a.contains(':') { " nodad" } else { "" };
                ip(&format!("addr add {a} dev lo{nodad}"))?;
            }
            for r in &routes {
                ip(&format!("route add {r}"))?;
            }
            std::fs::write("/proc/sys/net/ipv4/ping_group_range", "0 2147483647")?;
            File::open("/proc/thread-self/ns/net")
        })
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))??;
        Ok(TestNs { ns: made })
    }

    /// Move the calling thread into the namespace.
    pub(crate) fn enter(&self) -> io::Result<()> {
        // SAFETY: the fd is an open network namespace file; setns changes only this thread.
        if unsafe { libc::setns(self.ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Run `f` on a new thread inside the namespace, with a current-thread tokio runtime.
    pub(crate) fn block_on<T: Send, F: std::future::Future<Output = T>>(
        &self,
        f: impl FnOnce() -> F + Send,
    ) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter().expect("enter the test namespace");
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(f())
            })
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }
}

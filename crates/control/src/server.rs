//! The control socket: a Unix stream socket (directory 0700 when created, socket 0600, peers
//! checked with SO_PEERCRED) served on its own threads, one JSON request and reply per line.
//! It never blocks or locks anything the worker uses: commands only read the `RuntimeView`.

use crate::commands::{Control, Reply, Request};
pub use crate::stats::final_stats_json;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

/// Where `vecplane run` listens and `vecplane ctl` connects unless `--socket PATH` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/vecplane/vecplane.sock";

/// Longest request line accepted.
pub const MAX_REQUEST: usize = 64 * 1024;

/// Most connections served at once (more are answered with an error and closed).
pub const MAX_CONNECTIONS: usize = 32;

/// A connection idle this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Why the control socket could not be set up.
#[derive(Debug, Error)]
pub enum ServerError {
    /// The socket's directory could not be created.
    #[error("cannot create the socket directory {path}: {cause}; choose another place with --socket PATH")]
    Dir {
        /// The directory.
        path: String,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Something that is not a socket is in the way.
    #[error(
        "{path} exists and is not a socket; refusing to remove it; choose another --socket PATH"
    )]
    NotASocket {
        /// The path.
        path: String,
    },
    /// A live daemon answers on the socket.
    #[error(
        "another vecplane is already listening on {path}; stop it or choose another --socket PATH"
    )]
    InUse {
        /// The path.
        path: String,
    },
    /// Any other I/O failure, with what was being done.
    #[error("control socket {path}: cannot {what}: {cause}")]
    Io {
        /// The path.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// The socket file we created; removed when dropped if it is still ours (same inode).
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    id: (u64, u64),
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.id {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// A bound control socket, not yet served.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    file: SocketFile,
}

/// Whether a peer with user id `peer` may use a daemon running as `own`: root or the same user.
pub fn peer_allowed(peer: u32, own: u32) -> bool {
    peer == 0 || peer == own
}

/// The user id of the process at the other end of `stream`.
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the fd is open.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl ControlSocket {
    /// Create the directory (mode 0700) if it does not exist, replace a stale socket file
    /// (refusing if a daemon answers on it or if it is not a socket), bind, and set mode 0600.
    pub fn bind(path: &Path) -> Result<ControlSocket, ServerError> {
        let shown = path.display().to_string();
        let io = |what: &'static str| {
            let p = shown.clone();
            move |cause| ServerError::Io {
                path: p,
                what,
                cause,
            }
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .and_then(|_| {
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                })
                .map_err(|cause| ServerError::Dir {
                    path: dir.display().to_string(),
                    cause,
                })?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if UnixStream::connect(path).is_ok() {
                    return Err(ServerError::InUse { path: shown });
                }
                std::fs::remove_file(path).map_err(io("remove the stale socket file"))?;
            }
            Ok(_) => return Err(ServerError::NotASocket { path: shown }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("inspect the path")(e)),
        }
        let listener = UnixListener::bind(path).map_err(io("listen"))?;
        let m = std::fs::symlink_metadata(path).map_err(io("inspect the new socket"))?;
        let file = SocketFile {
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io("set mode 0600"))?;
        Ok(ControlSocket { listener, file })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Serve `control` on a thread of its own (one more thread per connection).
    pub fn serve(self, control: Arc<Control>) -> Result<ServerHandle, ServerError> {
        let path = self.file.path.display().to_string();
        self.listener
            .set_nonblocking(true)
            .map_err(|cause| ServerError::Io {
                path: path.clone(),
                what: "make the listener non-blocking",
                cause,
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let listener = self.listener;
        let thread = std::thread::Builder::new()
            .name("vecplane-ctl".into())
            .spawn(move || accept_loop(listener, control, stop2))
            .map_err(|cause| ServerError::Io {
                path,
                what: "start the control thread",
                cause,
            })?;
        Ok(ServerHandle {
            stop,
            thread: Some(thread),
            file: self.file,
        })
    }
}

/// A served control socket. Dropping it (or `shutdown`) stops accepting and removes the socket.
#[derive(Debug)]
pub struct ServerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    file: SocketFile,
}

impl ServerHandle {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Stop accepting connections and remove the socket file.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: UnixListener, control: Arc<Control>, stop: Arc<AtomicBool>) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, 100 ms timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n <= 0 {
            continue;
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            let _ = write_reply(
                &stream,
                &Reply::failure(format!(
                    "too many control connections (at most {MAX_CONNECTIONS}); try again later"
                )),
            );
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (c, a) = (control.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("vecplane-ctl-conn".into())
            .spawn(move || {
                serve_connection(stream, &c);
                a.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn write_reply(mut stream: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).unwrap_or_else(|e| {
        format!(
            "{{\"ok\":false,\"error\":{}}}",
            serde_json::Value::String(format!("cannot encode the reply: {e}"))
        )
    });
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    stream.flush()
}

/// Answer requests on one connection until EOF, an I/O error, or a protocol violation.
fn serve_connection(stream: UnixStream, control: &Control) {
    match peer_uid(&stream) {
        Ok(uid) if peer_allowed(uid, own_uid()) => {}
        Ok(uid) => {
            let _ = write_reply(
                &stream,
                &Reply::failure(format!(
                    "permission denied: uid {uid} may not use this daemon; accepted: root or \
                     uid {}",
                    own_uid()
                )),
            );
            return;
        }
        Err(e) => {
            let _ = write_reply(
                &stream,
                &Reply::failure(format!("cannot check the peer's credentials: {e}")),
            );
            return;
        }
    }
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    loop {
        let mut buf = Vec::new();
        match reader
            .by_ref()
            .take(MAX_REQUEST as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.len() > MAX_REQUEST {
            let _ = write_reply(
                &stream,
                &Reply::failure(format!(
                    "request longer than {MAX_REQUEST} bytes; accepted: one JSON object per line"
                )),
            );
            return;
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            let _ = write_reply(&stream, &Reply::failure("request is not UTF-8"));
            return;
        };
        if text.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Request>(text) {
            Ok(req) => control.execute(&req.command, req.json),
            Err(e) => Reply::failure(format!(
                "bad request: {e}; accepted: one JSON object per line like \
                 {{\"command\": \"show runtime\", \"json\": false}}"
            )),
        };
        if write_reply(&stream, &reply).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;

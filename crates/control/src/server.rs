//! The control socket: a Unix stream socket (directory 0700 when created, socket 0600, peers
//! checked with SO_PEERCRED) on which the HTTP API (`crate::api`) is served, and optionally a
//! TCP listener with a bearer token. It owns the socket file's life (stale files replaced, a
//! live daemon's socket never taken, the file removed at the end); it never touches packets.

use crate::api::{ApiServer, ApiStartError, ApiState, Limits};
use crate::commands::Control;
pub use crate::stats::final_stats_json;
use crate::ApiConfig;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;
use vhostuser::socket_file::SocketFile;

/// Where `vecplane run` listens and `vecplane ctl` connects unless `--socket PATH` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/vecplane/vecplane.sock";

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
    /// The API could not start (token file, TCP listener, runtime).
    #[error(transparent)]
    Api(#[from] ApiStartError),
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
    peer_uid_fd(stream)
}

/// The user id of the process at the other end of the Unix stream socket `fd`.
pub fn peer_uid_fd(stream: &impl AsRawFd) -> std::io::Result<u32> {
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
        let file = SocketFile::bound(path.to_path_buf(), (m.dev(), m.ino()));
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io("set mode 0600"))?;
        Ok(ControlSocket { listener, file })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Serve the HTTP API over `control` on this socket and, when `api.tcp` is set, on that
    /// TCP address (a token file is required for it; an address other hosts can reach also
    /// `allow_remote`, and is warned about), on a thread of its own.
    pub fn serve(
        self,
        control: Arc<Control>,
        api: &ApiConfig,
    ) -> Result<ServerHandle, ServerError> {
        self.serve_with(Arc::new(ApiState::new(control)), api, Limits::default())
    }

    /// `serve` with a prepared state (e.g. with reload) and limits.
    pub fn serve_with(
        self,
        state: Arc<ApiState>,
        api: &ApiConfig,
        limits: Limits,
    ) -> Result<ServerHandle, ServerError> {
        let tcp = match &api.tcp {
            Some(addr) => {
                let path = api
                    .token_file
                    .as_ref()
                    .ok_or_else(|| ApiStartError::Token {
                        path: "(none)".into(),
                        reason: format!(
                        "[api] tcp = \"{addr}\" needs token-file: every TCP request must carry \
                         its token"
                    ),
                    })?;
                let token = crate::api::read_token(path)?;
                if let Some(remote) = api.remote_tcp() {
                    if !api.allow_remote {
                        return Err(ApiStartError::Remote { addr: remote }.into());
                    }
                    tracing::warn!(
                        "the API listens on {remote}, which other hosts can \
                         reach ([api] allow-remote = true); anyone there with the token \
                         controls this daemon"
                    );
                }
                let listener =
                    std::net::TcpListener::bind(addr).map_err(|cause| ApiStartError::Io {
                        what: format!("listen on {addr}"),
                        cause,
                    })?;
                Some((listener, token))
            }
            None => None,
        };
        let server = ApiServer::start(state, self.listener, tcp, limits)?;
        Ok(ServerHandle {
            server: Some(server),
            file: self.file,
        })
    }
}

/// A served control socket. Dropping it (or `shutdown`) stops serving and removes the socket.
pub struct ServerHandle {
    server: Option<ApiServer>,
    file: SocketFile,
}

impl ServerHandle {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The TCP address served, if any.
    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().and_then(ApiServer::tcp_addr)
    }

    /// Stop serving and remove the socket file.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

#[cfg(test)]
mod admission_tests;
#[cfg(test)]
mod tests;

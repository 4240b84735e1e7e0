//! Where the HTTP API listens besides the Unix socket (`[api]` in the config file). Plain,
//! validated data: the config module fills it, the API server reads it; it does no I/O.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The `[api]` table: the optional TCP listener of the HTTP API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiConfig {
    /// TCP address to serve the API on (None: the Unix socket only). Loopback unless
    /// `allow_remote` is set.
    pub tcp: Option<SocketAddr>,
    /// `allow-remote = true`: the operator accepts a TCP address other hosts can reach
    /// (0.0.0.0, [::], or any non-loopback address); the daemon warns when it serves one.
    pub allow_remote: bool,
    /// File holding the bearer token every TCP request must carry (required with `tcp`).
    pub token_file: Option<PathBuf>,
}

impl ApiConfig {
    /// The TCP address when other hosts can reach it (not a loopback address).
    pub fn remote_tcp(&self) -> Option<SocketAddr> {
        self.tcp.filter(|a| !a.ip().is_loopback())
    }
}

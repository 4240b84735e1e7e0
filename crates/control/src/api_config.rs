//! Where the HTTP API listens besides the Unix socket (`[api]` in the config file). Plain,
//! validated data: the config module fills it, the API server reads it; it does no I/O.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The `[api]` table: the optional TCP listener of the HTTP API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiConfig {
    /// TCP address to serve the API on (None: the Unix socket only). Loopback unless the
    /// operator writes another address.
    pub tcp: Option<SocketAddr>,
    /// File holding the bearer token every TCP request must carry (required with `tcp`).
    pub token_file: Option<PathBuf>,
}

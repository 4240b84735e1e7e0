//! The versioned HTTP API (`/v1`, plus `/metrics`): axum on a small tokio runtime of its own
//! thread, served on the Unix control socket and, when configured, on a TCP address with a
//! bearer token. Owns the router and the body limit; resources live in `resources`; admission,
//! the token check and connection limits in `serve`; the description in `openapi`. It never
//! runs on a data-plane worker and changes tables only through
//! `dataplane::routing::Routing::apply`.
//!
//! To add a resource: write its handler in `resources`, add its route in `router` and its line
//! in `openapi::ENDPOINTS` (a test checks the two agree).

mod bgp;
pub mod error;
mod flows;
mod interfaces;
mod lb;
pub mod openapi;
mod punt;
mod resources;
pub mod serve;
#[cfg(test)]
mod tests;

use crate::commands::Control;
use axum::extract::DefaultBodyLimit;
pub use axum::http::StatusCode as HttpStatus;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use dataplane::RuntimeView;
pub use error::ApiError;
use serde_json::Value;
pub use serve::{ApiCounters, Limits};
use std::os::unix::net::UnixListener as StdUnixListener;
use std::sync::Arc;
use thiserror::Error;

/// Largest request body (a batch of about 40,000 route changes).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// A reload: re-read the config file, apply the difference, describe what changed.
pub type ReloadFn = dyn Fn() -> Result<Value, ApiError> + Send + Sync;

/// What handlers share.
pub struct ApiState {
    /// The command engine of `vecplane ctl`.
    pub control: Arc<Control>,
    /// The running data plane's view (counters, routing).
    pub view: RuntimeView,
    /// How to reload the config, when the daemon has a config file.
    pub reload: Option<Arc<ReloadFn>>,
    /// What the API's admission refused or cut (`serve`), for `GET /metrics`.
    pub counters: Arc<ApiCounters>,
}

impl ApiState {
    /// Port names by port id, as they are now (ports come and go at run time; a removed
    /// port's id holds `NAME (removed)`, which no request can name).
    pub fn ports(&self) -> Vec<String> {
        self.view
            .ports
            .get()
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }

    /// State for `control`'s data plane, without reload.
    pub fn new(control: Arc<Control>) -> ApiState {
        let view = control.view().clone();
        ApiState {
            view,
            control,
            reload: None,
            counters: Arc::default(),
        }
    }
}

/// The API's routes over `state` (no authentication: add it per listener).
pub fn router(state: Arc<ApiState>) -> Router {
    use resources as r;
    Router::new()
        .route("/v1", get(r::get_index))
        .route("/v1/openapi.json", get(r::get_openapi))
        .route("/v1/command", post(r::post_command))
        .route("/v1/runtime", get(r::get_runtime))
        .route("/v1/rxq", get(r::get_rxq))
        .route("/v1/features", get(r::get_features).post(r::post_features))
        .route("/v1/features/{name}", get(r::get_feature))
        .route(
            "/v1/interfaces",
            get(r::get_interfaces).post(interfaces::post_interface),
        )
        .route(
            "/v1/interfaces/{name}",
            axum::routing::patch(r::patch_interface).delete(interfaces::delete_interface),
        )
        .route("/v1/errors", get(r::get_errors))
        .route("/v1/neighbour-tables", get(r::get_neighbour_tables))
        .route("/v1/bridges", get(r::get_bridges))
        .route("/v1/fib/{family}", get(r::get_fib))
        .route(
            "/v1/trace",
            get(r::get_trace)
                .post(r::post_trace)
                .delete(r::delete_trace),
        )
        .route(
            "/v1/pcap",
            get(r::get_pcap).post(r::post_pcap).delete(r::delete_pcap),
        )
        .route("/v1/punt", get(r::get_punt))
        .route("/v1/punt/packets", get(punt::get_packets))
        .route("/v1/inject", post(punt::post_inject))
        .route("/v1/clear/{what}", post(r::post_clear))
        .route("/v1/routes", get(r::get_routes).post(r::post_routes))
        .route(
            "/v1/routes/{address}/{length}",
            get(r::get_route).put(r::put_route).delete(r::delete_route),
        )
        .route(
            "/v1/neighbours",
            get(r::get_neighbours).post(r::post_neighbour),
        )
        .route(
            "/v1/neighbours/{ip}",
            get(r::get_neighbour)
                .put(r::put_neighbour)
                .delete(r::delete_neighbour),
        )
        .route("/v1/batch", post(r::post_batch))
        .route("/v1/reload", post(r::post_reload))
        .route(
            "/v1/policies",
            get(r::get_policies).patch(r::patch_policies),
        )
        .route(
            "/v1/bridges/{name}/flows",
            get(flows::get_flows)
                .post(flows::post_flows)
                .patch(flows::patch_flows)
                .delete(flows::delete_flows),
        )
        .route(
            "/v1/bridges/{name}/groups",
            get(flows::get_groups)
                .post(flows::post_groups)
                .delete(flows::delete_groups),
        )
        .route("/v1/bridges/{name}/megaflows", get(flows::get_megaflows))
        .route("/v1/flow-cache", get(flows::get_flow_cache))
        .route("/v1/lb", get(lb::get_lb))
        .route("/v1/lb/commands", post(lb::post_commands))
        .route("/v1/lb/conf", get(lb::get_conf).patch(lb::patch_conf))
        .route("/v1/lb/health", get(lb::get_health))
        .route("/v1/bgp", get(bgp::get_bgp))
        .route(
            "/v1/bgp/drain",
            post(bgp::post_drain).delete(bgp::delete_drain),
        )
        .route("/v1/lb/vips", get(lb::get_vips).post(lb::post_vip))
        .route(
            "/v1/lb/vips/{id}",
            get(lb::get_vip).patch(lb::patch_vip).delete(lb::delete_vip),
        )
        .route(
            "/v1/lb/vips/{id}/servers",
            get(lb::get_servers).post(lb::post_servers),
        )
        .route(
            "/v1/lb/vips/{id}/servers/{address}",
            get(lb::get_server)
                .patch(lb::patch_server)
                .delete(lb::delete_server),
        )
        .route("/metrics", get(r::get_metrics))
        .fallback(r::not_found)
        .method_not_allowed_fallback(r::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Why the API could not start.
#[derive(Debug, Error)]
pub enum ApiStartError {
    /// The token file could not be read or is unusable.
    #[error("[api] token-file {path}: {reason}")]
    Token {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A TCP address other hosts can reach, without `allow-remote = true`.
    #[error(
        "[api] tcp = \"{addr}\" can be reached from other hosts; accepted: a loopback address \
         like 127.0.0.1:8080, or allow-remote = true in [api]"
    )]
    Remote {
        /// The address.
        addr: std::net::SocketAddr,
    },
    /// A listener or the runtime could not be set up.
    #[error("API: cannot {what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// Read the bearer token of `path`: one line, at least 16 characters, no spaces; the file must
/// not be readable by others (it would give them the daemon).
pub fn read_token(path: &std::path::Path) -> Result<Vec<u8>, ApiStartError> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display().to_string();
    let fail = |reason: String| ApiStartError::Token {
        path: shown.clone(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(fail("not a regular file".into()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(fail(format!(
            "mode {:o} lets others read it; chmod 600 it",
            meta.permissions().mode() & 0o777
        )));
    }
    if meta.len() > 4096 {
        return Err(fail("longer than 4096 bytes; a token is one line".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let token = text.trim();
    if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(fail(
            "the token must be one line of at least 16 visible characters without spaces".into(),
        ));
    }
    Ok(token.as_bytes().to_vec())
}

/// A running API server; dropping it stops it.
pub struct ApiServer {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    tcp_addr: Option<std::net::SocketAddr>,
}

impl ApiServer {
    /// Serve `state` on the Unix listener `unix` (peers must be root or this user) and, when
    /// given, on the TCP listener with the bearer `token`, under `limits`.
    pub fn start(
        state: Arc<ApiState>,
        unix: StdUnixListener,
        tcp: Option<(std::net::TcpListener, Vec<u8>)>,
        limits: Limits,
    ) -> Result<ApiServer, ApiStartError> {
        let io = |what: &str| {
            let what = what.to_string();
            move |cause| ApiStartError::Io { what, cause }
        };
        unix.set_nonblocking(true)
            .map_err(io("make the socket non-blocking"))?;
        let tcp_addr = match &tcp {
            Some((l, _)) => {
                l.set_nonblocking(true)
                    .map_err(io("make the TCP listener non-blocking"))?;
                Some(l.local_addr().map_err(io("read the TCP address"))?)
            }
            None => None,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(4)
            .thread_name("vecplane-api")
            .enable_all()
            .build()
            .map_err(io("start the API runtime"))?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let counters = state.counters.clone();
        let plain = router(state);
        let thread = std::thread::Builder::new()
            .name("vecplane-api".into())
            .spawn(move || {
                runtime.block_on(run(plain, unix, tcp, limits, counters, stop_rx));
                runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            })
            .map_err(io("start the API thread"))?;
        Ok(ApiServer {
            shutdown: Some(stop_tx),
            thread: Some(thread),
            tcp_addr,
        })
    }

    /// The TCP address served, if any.
    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.tcp_addr
    }

    /// Stop serving.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(
    router: Router,
    unix: StdUnixListener,
    tcp: Option<(std::net::TcpListener, Vec<u8>)>,
    limits: Limits,
    counters: Arc<ApiCounters>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(unix) = tokio::net::UnixListener::from_std(unix) else {
        return;
    };
    let tcp = tcp.and_then(|(l, token)| {
        let l = tokio::net::TcpListener::from_std(l).ok()?;
        Some((l, Arc::new(token)))
    });
    let admission = serve::Admission::new(limits, counters.clone());
    let mut unix_backoff = serve::AcceptBackoff::new(counters.clone());
    let mut tcp_backoff = serve::AcceptBackoff::new(counters);
    let own = own_uid();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = unix.accept() => match accepted {
                Ok((stream, _)) => {
                    unix_backoff.reset();
                    let refused = match crate::server::peer_uid_fd(&stream) {
                        Ok(uid) if crate::server::peer_allowed(uid, own) => None,
                        Ok(uid) => Some(ApiError::new(
                            StatusCode::FORBIDDEN,
                            format!("uid {uid} may not use this daemon; accepted: root or uid {own}"),
                        )),
                        Err(e) => Some(ApiError::new(
                            StatusCode::FORBIDDEN,
                            format!("cannot check the peer's credentials: {e}"),
                        )),
                    };
                    admission.admit_unix(stream, router.clone(), refused);
                }
                Err(e) => unix_backoff.failed("control socket", &e).await,
            },
            accepted = async {
                match &tcp {
                    Some((l, _)) => l.accept().await,
                    None => std::future::pending().await,
                }
            } => match (accepted, &tcp) {
                (Ok((stream, peer)), Some((_, token))) => {
                    tcp_backoff.reset();
                    let _ = stream.set_nodelay(true);
                    admission.admit_tcp(stream, peer.ip(), router.clone(), token.clone());
                }
                (Err(e), _) => tcp_backoff.failed("TCP listener", &e).await,
                (Ok(_), None) => {}
            },
        }
    }
}

fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

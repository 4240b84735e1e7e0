//! Serving the API: the Unix control socket (peers checked with SO_PEERCRED) and an optional TCP
//! listener (every request needs the bearer token), on a small tokio runtime of its own thread —
//! never on a data-plane worker. Owns admission, the connection limits and the accept loop; it
//! never interprets requests: the router does.
//!
//! Admission is built so that nobody without the token can keep root from the daemon:
//! * Each listener has its own pool. The Unix socket (0600, peers checked) has
//!   `unix_connections` slots that TCP never takes: root's `vecplane ctl` is served whatever TCP
//!   clients do.
//! * A TCP connection first holds a slot of a small pool of unauthenticated connections
//!   (`tcp_unauthenticated`) and must send a request carrying the right bearer token within
//!   `auth_timeout` of being accepted, or it is closed. Its first authenticated request moves it
//!   to the pool of authenticated connections (`tcp_connections`) and frees the first slot; when
//!   that pool is full the request is answered 503 and the connection closed. So a client
//!   without the token holds a slot for seconds, never for as long as it likes.
//! * One client holds at most `per_client` TCP connections at once (both pools together); more
//!   are answered 429 at once. A client is an IPv4 address, or an IPv6 /64 (a host commonly
//!   has a whole /64 to pick addresses from).
//! * Deadlines, all fixed (a client dripping a byte at a time cannot stretch them): a request's
//!   headers within `header_timeout`, its body within `request_timeout` of its headers; and no
//!   connection sits without progress in either direction longer than `idle_timeout`.
//! * accept() failing for want of file descriptors (EMFILE/ENFILE) leaves the connection in the
//!   backlog and the listener readable: the loop backs off (10 ms doubling to 100 ms) instead
//!   of spinning, counts it and says so once.
//!
//! What is refused or cut is counted in `ApiCounters` (`GET /metrics`).

use super::error::ApiError;
use super::MAX_BODY;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// Connection limits and timeouts (see the module header for how they fit together).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once on the Unix socket (TCP never takes these).
    pub unix_connections: usize,
    /// Authenticated TCP connections served at once.
    pub tcp_connections: usize,
    /// TCP connections at once that have not yet sent a request with the token.
    pub tcp_unauthenticated: usize,
    /// TCP connections at once from one source address, authenticated or not.
    pub per_client: usize,
    /// Time a TCP connection has, from being accepted, to send a request with the token.
    pub auth_timeout: Duration,
    /// Time a client has to send a request's headers once it started.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body once its headers are in.
    pub request_timeout: Duration,
    /// Longest time without any progress reading or writing.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            unix_connections: 256,
            tcp_connections: 128,
            tcp_unauthenticated: 64,
            per_client: 8,
            auth_timeout: Duration::from_secs(5),
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// What the API refused or cut since the daemon started (shown by `GET /metrics`).
#[derive(Debug, Default)]
pub struct ApiCounters {
    /// Unix-socket connections refused because its pool was full.
    pub unix_busy: AtomicU64,
    /// Authenticated TCP requests refused because the authenticated pool was full.
    pub tcp_busy: AtomicU64,
    /// TCP connections refused because the unauthenticated pool was full.
    pub unauthenticated_busy: AtomicU64,
    /// TCP connections refused because their source address had `per_client` already.
    pub per_client: AtomicU64,
    /// TCP connections closed for not sending the token within `auth_timeout`.
    pub auth_timeouts: AtomicU64,
    /// Requests answered 408 for not sending their body within `request_timeout`.
    pub request_timeouts: AtomicU64,
    /// accept() calls that failed for want of file descriptors (EMFILE/ENFILE).
    pub accept_fd_exhausted: AtomicU64,
}

impl ApiCounters {
    /// Every counter with its reason label, for `GET /metrics`.
    pub fn refused(&self) -> [(&'static str, u64); 6] {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("unix-busy", g(&self.unix_busy)),
            ("tcp-busy", g(&self.tcp_busy)),
            ("unauthenticated-busy", g(&self.unauthenticated_busy)),
            ("per-client", g(&self.per_client)),
            ("auth-timeout", g(&self.auth_timeouts)),
            ("request-timeout", g(&self.request_timeouts)),
        ]
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A stream that fails with `TimedOut` after `limit` without progress in either direction.
struct IdleIo<S> {
    inner: S,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<S> IdleIo<S> {
    fn new(inner: S, limit: Duration) -> IdleIo<S> {
        IdleIo {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }

    fn progressed(&mut self) {
        let at = tokio::time::Instant::now() + self.limit;
        self.deadline.as_mut().reset(at);
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.deadline.as_mut().poll(cx).is_ready()
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle too long")
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.progressed();
                }
                Poll::Ready(r)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, data) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.progressed();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(e) => Poll::Ready(e),
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            r => r,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Answer a connection we cannot serve with `err` and close it.
async fn refuse<S: AsyncWrite + Unpin>(mut stream: S, err: ApiError) {
    let body = err.body().to_string();
    let head = format!(
        "HTTP/1.1 {} {}\r\n{}: application/json\r\n{}: {}\r\nconnection: close\r\n\r\n",
        err.status.as_u16(),
        err.status.canonical_reason().unwrap_or(""),
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}

/// `err` as a response that closes its connection.
fn closing(err: ApiError) -> Response {
    let mut r = err.into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Read the whole body within `request_timeout` of the headers (408 and close if it does not
/// come, 413 if it is larger than `MAX_BODY`), then hand the request on with the body in memory.
async fn body_within_deadline(
    State((limit, counters)): State<(Duration, Arc<ApiCounters>)>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(limit, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) if too_large(&e) => closing(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {MAX_BODY} bytes; accepted: at most \
                 {MAX_BODY} bytes (split a large batch)"
            ),
        )),
        Ok(Err(e)) => closing(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )),
        Err(_) => {
            bump(&counters.request_timeouts);
            closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} ms of its headers; accepted: \
                     a whole request sent without pauses",
                    limit.as_millis()
                ),
            ))
        }
    }
}

/// Whether reading a body failed because it passed the size limit.
fn too_large(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// `router` with the body deadline of `limits`.
fn with_body_deadline(router: Router, limits: &Limits, counters: &Arc<ApiCounters>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        (limits.request_timeout, counters.clone()),
        body_within_deadline,
    ))
}

/// Serve one accepted connection with `router` under `limits`.
async fn serve_connection<S>(stream: S, router: Router, limits: Limits)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(IdleIo::new(stream, limits.idle_timeout));
    let service = TowerToHyperService::new(router);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true)
        .serve_connection(io, service);
    let _ = conn.await;
}

/// Whether `given` is `Authorization: Bearer <token>`, compared in constant time.
fn token_matches(req: &Request, token: &[u8]) -> bool {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    given.is_some_and(|g| {
        g.len() == token.len()
            && g.iter()
                .zip(token.iter())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0
    })
}

/// One TCP connection's gate: the token every request must carry, and, until its first
/// authenticated request, the way to hand the connection a slot of the authenticated pool.
struct AuthGate {
    token: Arc<Vec<u8>>,
    authenticated: Arc<Semaphore>,
    max: usize,
    counters: Arc<ApiCounters>,
    promote: Mutex<Option<oneshot::Sender<OwnedSemaphorePermit>>>,
}

/// Refuse a request without the token (401, and close: a connection gets no second slot-free
/// try); on the connection's first good one, move it to the authenticated pool (503 if full).
async fn authenticate(State(gate): State<Arc<AuthGate>>, req: Request, next: Next) -> Response {
    if !token_matches(&req, &gate.token) {
        let mut r = closing(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this listener needs `Authorization: Bearer <token>` with the token of the \
             daemon's [api] token-file",
        ));
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let busy = {
        let mut promote = gate.promote.lock().unwrap_or_else(|p| p.into_inner());
        match promote.take() {
            None => false,
            Some(tx) => match gate.authenticated.clone().try_acquire_owned() {
                Ok(permit) => {
                    let _ = tx.send(permit);
                    false
                }
                Err(_) => {
                    *promote = Some(tx);
                    true
                }
            },
        }
    };
    if busy {
        bump(&gate.counters.tcp_busy);
        return closing(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many authenticated API connections over TCP (at most {}); try again later",
                gate.max
            ),
        ));
    }
    next.run(req).await
}

/// The TCP connections of each source address; a `ClientSlot` gives its place back.
type ClientCounts = Arc<Mutex<HashMap<IpAddr, usize>>>;

struct ClientSlot {
    counts: ClientCounts,
    ip: IpAddr,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// The client a source address counts for: an IPv4 address itself, an IPv6 one its /64 (one
/// host commonly holds a whole /64, so counting its addresses one by one would limit nothing).
fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(a) & !(u128::MAX >> 64)).into()),
        },
        v4 => v4,
    }
}

/// The pools and limits every listener admits connections through.
pub(crate) struct Admission {
    unix: Arc<Semaphore>,
    authenticated: Arc<Semaphore>,
    unauthenticated: Arc<Semaphore>,
    clients: ClientCounts,
    limits: Limits,
    counters: Arc<ApiCounters>,
}

impl Admission {
    pub(crate) fn new(limits: Limits, counters: Arc<ApiCounters>) -> Admission {
        Admission {
            unix: Arc::new(Semaphore::new(limits.unix_connections)),
            authenticated: Arc::new(Semaphore::new(limits.tcp_connections)),
            unauthenticated: Arc::new(Semaphore::new(limits.tcp_unauthenticated)),
            clients: Arc::default(),
            limits,
            counters,
        }
    }

    /// Serve a Unix-socket `stream` if its pool has a free slot (held until the connection
    /// ends), else answer 503; `refused`: the peer may not use the daemon.
    pub(crate) fn admit_unix<S>(&self, stream: S, router: Router, refused: Option<ApiError>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        if let Some(err) = refused {
            tokio::spawn(refuse(stream, err));
            return;
        }
        let Ok(permit) = self.unix.clone().try_acquire_owned() else {
            bump(&self.counters.unix_busy);
            let err = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many API connections on the control socket (at most {}); try again \
                     later",
                    self.limits.unix_connections
                ),
            );
            tokio::spawn(refuse(stream, err));
            return;
        };
        let limits = self.limits;
        let router = with_body_deadline(router, &limits, &self.counters);
        tokio::spawn(async move {
            serve_connection(stream, router, limits).await;
            drop(permit);
        });
    }

    /// Take a place for `ip` among the TCP clients, or None if it has `per_client` already.
    fn client_slot(&self, ip: IpAddr) -> Option<ClientSlot> {
        let ip = client_of(ip);
        let mut counts = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(ip).or_insert(0);
        if *n >= self.limits.per_client {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            counts: self.clients.clone(),
            ip,
        })
    }

    /// Serve a TCP `stream` from `peer` whose requests must carry `token`: as unauthenticated
    /// until its first good request (closed if none comes within `auth_timeout`), then in the
    /// authenticated pool.
    pub(crate) fn admit_tcp<S>(&self, stream: S, peer: IpAddr, router: Router, token: Arc<Vec<u8>>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Some(client) = self.client_slot(peer) else {
            bump(&self.counters.per_client);
            let err = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many API connections from {} (at most {} at once per client address, \
                     an IPv6 /64 counting as one); close some or try again later",
                    match client_of(peer) {
                        IpAddr::V6(net) => format!("{net}/64"),
                        v4 => v4.to_string(),
                    },
                    self.limits.per_client
                ),
            );
            tokio::spawn(refuse(stream, err));
            return;
        };
        let Ok(waiting) = self.unauthenticated.clone().try_acquire_owned() else {
            bump(&self.counters.unauthenticated_busy);
            let err = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many TCP connections waiting to show the API token (at most {}); \
                     try again later",
                    self.limits.tcp_unauthenticated
                ),
            );
            tokio::spawn(refuse(stream, err));
            return;
        };
        let (promote, promoted) = oneshot::channel();
        let gate = Arc::new(AuthGate {
            token,
            authenticated: self.authenticated.clone(),
            max: self.limits.tcp_connections,
            counters: self.counters.clone(),
            promote: Mutex::new(Some(promote)),
        });
        let limits = self.limits;
        let counters = self.counters.clone();
        let router = with_body_deadline(router, &limits, &self.counters)
            .layer(axum::middleware::from_fn_with_state(gate, authenticate));
        tokio::spawn(async move {
            let conn = serve_connection(stream, router, limits);
            tokio::pin!(conn);
            let deadline = tokio::time::sleep(limits.auth_timeout);
            tokio::pin!(deadline);
            // Biased: a connection that showed the token as the deadline passed keeps going.
            let held = tokio::select! {
                biased;
                _ = &mut conn => return,
                permit = promoted => permit.ok(),
                _ = &mut deadline => {
                    bump(&counters.auth_timeouts);
                    return;
                }
            };
            drop(waiting);
            conn.await;
            drop((held, client));
        });
    }
}

/// Pauses of the accept loop after accept() fails: 10 ms doubling to 100 ms, reset by a success.
pub(crate) struct AcceptBackoff {
    next: Duration,
    counters: Arc<ApiCounters>,
    said: bool,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_millis(100);

    pub(crate) fn new(counters: Arc<ApiCounters>) -> AcceptBackoff {
        AcceptBackoff {
            next: Self::FIRST,
            counters,
            said: false,
        }
    }

    /// An accept succeeded.
    pub(crate) fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    /// accept() on `listener` failed with `e`: count it if descriptors ran out, and pause.
    pub(crate) async fn failed(&mut self, listener: &str, e: &io::Error) {
        let fds = matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE));
        if fds {
            bump(&self.counters.accept_fd_exhausted);
            if !self.said {
                self.said = true;
                tracing::warn!(
                    "API: cannot accept on the {listener}: {e}; pausing up to {} ms \
                     between tries (counted in vecplane_api_accept_fd_exhausted_total); raise \
                     the limit (ulimit -n) if this goes on",
                    Self::MOST.as_millis()
                );
            }
        } else if matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
        ) {
            // The peer gave up before we took its connection: nothing to wait for.
            return;
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(Self::MOST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addresses_of_one_ipv6_slash_64_count_as_one_client() {
        let limits = Limits {
            per_client: 2,
            ..Limits::default()
        };
        let admission = Admission::new(limits, Arc::default());
        let slot = |ip: &str| admission.client_slot(ip.parse().unwrap());
        let a = slot("2001:db8::1");
        let b = slot("2001:db8::ffff:2");
        assert!(a.is_some() && b.is_some());
        assert!(slot("2001:db8::3").is_none(), "a third address of the /64");
        let other = slot("2001:db8:0:1::1");
        assert!(other.is_some(), "another /64 is another client");
        // IPv4 addresses, mapped or not, are one client each.
        let c = slot("198.18.0.1");
        let d = slot("::ffff:198.18.0.1");
        assert!(c.is_some() && d.is_some());
        assert!(slot("198.18.0.1").is_none());
        assert!(slot("198.18.0.2").is_some());
        // A slot given back makes room.
        drop(a);
        assert!(slot("2001:db8::4").is_some());
        drop((b, other, c, d));
        assert!(admission.clients.lock().unwrap().is_empty());
    }
}

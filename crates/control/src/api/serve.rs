//! Serving the API: the Unix control socket (peers checked with SO_PEERCRED) and an optional TCP
//! listener (every request needs the bearer token), on a small tokio runtime of its own thread —
//! never on a data-plane worker. Owns the connection limits: at most `max_connections` at once
//! (more are answered 503 and closed), a header-read timeout against half-sent requests, and an
//! idle timeout on every read and write so neither a silent nor a non-reading client holds a
//! connection. It never interprets requests: the router does.

use super::error::ApiError;
use axum::http::{header, StatusCode};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Semaphore;
use tokio::time::Sleep;

/// Connection limits and timeouts.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a client has to send a request's headers once it started.
    pub header_timeout: Duration,
    /// Longest time without any progress reading or writing.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
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

/// What a listener needs to admit a connection.
pub(crate) struct Admission {
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) limits: Limits,
}

impl Admission {
    /// Serve `stream` if a slot is free (holding it until the connection ends), else refuse.
    pub(crate) fn admit<S>(&self, stream: S, router: Router, refused: Option<ApiError>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        if let Some(err) = refused {
            tokio::spawn(refuse(stream, err));
            return;
        }
        match self.slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let limits = self.limits;
                tokio::spawn(async move {
                    serve_connection(stream, router, limits).await;
                    drop(permit);
                });
            }
            Err(_) => {
                let err = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "too many API connections (at most {}); try again later",
                        self.limits.max_connections
                    ),
                );
                tokio::spawn(refuse(stream, err));
            }
        }
    }
}

//! The client side of the API (`vecplane ctl`, tests, tools): one HTTP/1.1 request over the
//! Unix control socket or TCP (with a bearer token), answered as status and body; and the
//! command language sent as `POST /v1/command`. It never interprets replies beyond decoding
//! them.

use crate::commands::Reply;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// How long to wait for a reply (large FIB listings take a while).
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the API is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The Unix control socket.
    Unix(PathBuf),
    /// A TCP listener (`host:port`) and the bearer token it needs.
    Tcp {
        /// `host:port`.
        addr: String,
        /// The token.
        token: Option<String>,
    },
}

impl Endpoint {
    fn shown(&self) -> String {
        match self {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp { addr, .. } => format!("http://{addr}"),
        }
    }
}

/// Why a request failed before a reply arrived.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Nothing listens there.
    #[error("cannot connect to {path}: is `vecplane run` running? ({cause})")]
    Connect {
        /// The socket path or URL.
        path: String,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Sending or receiving failed.
    #[error("{path}: cannot {what}: {cause}")]
    Io {
        /// The socket path or URL.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The error.
        cause: String,
    },
    /// The daemon did not answer in time.
    #[error("{path}: no reply within {} s", REPLY_TIMEOUT.as_secs())]
    Timeout {
        /// The socket path or URL.
        path: String,
    },
    /// The reply was not what the API sends.
    #[error("{path}: unreadable reply from the daemon: {reason}")]
    BadReply {
        /// The socket path or URL.
        path: String,
        /// The decoding error.
        reason: String,
    },
}

/// A reply: status and body.
#[derive(Clone, Debug)]
pub struct HttpReply {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpReply {
    /// The body as JSON (Null if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The message of an API error body, or the body as text.
    pub fn error_message(&self) -> String {
        let v = self.json();
        v["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&self.body).trim().to_string())
    }
}

/// Send `method path` with `body` (JSON) to the API at `endpoint`.
pub fn http(
    endpoint: &Endpoint,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<HttpReply, ClientError> {
    let shown = endpoint.shown();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClientError::Io {
            path: shown.clone(),
            what: "start the client runtime",
            cause: e.to_string(),
        })?;
    rt.block_on(async {
        match tokio::time::timeout(REPLY_TIMEOUT, send(endpoint, method, path, body)).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout { path: shown }),
        }
    })
}

async fn send(
    endpoint: &Endpoint,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<HttpReply, ClientError> {
    let shown = endpoint.shown();
    let io = |what: &'static str| {
        let p = shown.clone();
        move |e: hyper::Error| ClientError::Io {
            path: p,
            what,
            cause: e.to_string(),
        }
    };
    let mut req = Request::builder().method(method).uri(path);
    req = match endpoint {
        Endpoint::Unix(_) => req.header("host", "localhost"),
        Endpoint::Tcp { addr, token } => {
            let r = req.header("host", addr.as_str());
            match token {
                Some(t) => r.header("authorization", format!("Bearer {t}")),
                None => r,
            }
        }
    };
    let has_body = body.is_some();
    if has_body {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| ClientError::BadReply {
            path: shown.clone(),
            reason: format!("cannot build the request: {e}"),
        })?;
    let connect = |cause| ClientError::Connect {
        path: shown.clone(),
        cause,
    };
    let response = match endpoint {
        Endpoint::Unix(p) => {
            let stream = tokio::net::UnixStream::connect(p).await.map_err(connect)?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(io("start HTTP"))?;
            tokio::spawn(conn);
            sender
                .send_request(req)
                .await
                .map_err(io("send the request"))?
        }
        Endpoint::Tcp { addr, .. } => {
            let stream = tokio::net::TcpStream::connect(addr.as_str())
                .await
                .map_err(connect)?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(io("start HTTP"))?;
            tokio::spawn(conn);
            sender
                .send_request(req)
                .await
                .map_err(io("send the request"))?
        }
    };
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(io("read the reply"))?
        .to_bytes()
        .to_vec();
    Ok(HttpReply { status, body })
}

/// Send the command line `command` to the daemon at `socket`; `json` asks for the `data` field.
pub fn request(socket: &Path, command: &str, json: bool) -> Result<Reply, ClientError> {
    request_at(&Endpoint::Unix(socket.to_path_buf()), command, json)
}

/// `request` to any endpoint.
pub fn request_at(endpoint: &Endpoint, command: &str, json: bool) -> Result<Reply, ClientError> {
    let body = serde_json::to_vec(&serde_json::json!({ "command": command, "json": json }))
        .map_err(|e| ClientError::BadReply {
            path: endpoint.shown(),
            reason: format!("cannot encode the request: {e}"),
        })?;
    let reply = http(endpoint, "POST", "/v1/command", Some(body))?;
    if reply.status == 200 {
        serde_json::from_slice(&reply.body).map_err(|e| ClientError::BadReply {
            path: endpoint.shown(),
            reason: e.to_string(),
        })
    } else {
        Ok(Reply::failure(reply.error_message()))
    }
}

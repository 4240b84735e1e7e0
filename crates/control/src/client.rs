//! The client side of the control socket (`vecplane ctl`): sends one command as a JSON line and
//! reads one reply. It never interprets the reply beyond decoding it.

use crate::commands::{Reply, Request};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use thiserror::Error;

/// How long to wait for a reply (large FIB listings take a while).
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a request failed before a reply arrived.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Nothing listens on the socket.
    #[error("cannot connect to {path}: is `vecplane run` running? ({cause})")]
    Connect {
        /// The socket path.
        path: String,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// Sending or receiving failed.
    #[error("{path}: cannot {what}: {cause}")]
    Io {
        /// The socket path.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The daemon closed the connection without a reply.
    #[error("{path}: the daemon closed the connection without replying")]
    NoReply {
        /// The socket path.
        path: String,
    },
    /// The reply was not a reply object.
    #[error("{path}: unreadable reply from the daemon: {reason}")]
    BadReply {
        /// The socket path.
        path: String,
        /// The decoding error.
        reason: String,
    },
}

/// Send `command` to the daemon at `socket`; `json` asks for the `data` field.
pub fn request(socket: &Path, command: &str, json: bool) -> Result<Reply, ClientError> {
    let path = socket.display().to_string();
    let io = |what: &'static str| {
        let p = path.clone();
        move |cause| ClientError::Io {
            path: p,
            what,
            cause,
        }
    };
    let mut stream = UnixStream::connect(socket).map_err(|cause| ClientError::Connect {
        path: path.clone(),
        cause,
    })?;
    stream
        .set_read_timeout(Some(REPLY_TIMEOUT))
        .map_err(io("set a timeout"))?;
    let req = Request {
        command: command.to_string(),
        json,
    };
    let mut line = serde_json::to_string(&req).map_err(|e| ClientError::BadReply {
        path: path.clone(),
        reason: format!("cannot encode the request: {e}"),
    })?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(io("send the request"))?;
    let mut reader = BufReader::new(&stream);
    let mut reply = String::new();
    let n = reader.read_line(&mut reply).map_err(io("read the reply"))?;
    if n == 0 {
        return Err(ClientError::NoReply { path });
    }
    serde_json::from_str(&reply).map_err(|e| ClientError::BadReply {
        path,
        reason: e.to_string(),
    })
}

//! Errors of the AF_XDP port. Every message names the interface (and queue when there is one),
//! the step that failed, the kernel's answer, and where it helps, what to check.

use std::io;
use thiserror::Error;

/// What went wrong setting up or running an AF_XDP port.
#[derive(Debug, Error)]
pub enum AfXdpError {
    /// A kernel call failed while setting up a socket.
    #[error("AF_XDP on {ifname} queue {queue}: {what} failed: {source}{hint}")]
    Socket {
        /// Interface name.
        ifname: String,
        /// Queue index.
        queue: u32,
        /// The step, e.g. `XDP_UMEM_REG`.
        what: &'static str,
        /// The kernel's answer.
        source: io::Error,
        /// What to check, as " (…)", or empty.
        hint: String,
    },
    /// A kernel call failed while loading, attaching or inspecting the XDP program.
    #[error("XDP on {ifname}: {what} failed: {source}{hint}")]
    Xdp {
        /// Interface name.
        ifname: String,
        /// The step, e.g. `BPF_PROG_LOAD`.
        what: &'static str,
        /// The kernel's answer.
        source: io::Error,
        /// What to check or the verifier's log, as " (…)", or empty.
        hint: String,
    },
    /// The interface already has an XDP program that vecplane must not remove.
    #[error("XDP on {ifname}: {detail}")]
    Occupied {
        /// Interface name.
        ifname: String,
        /// Which program, how it is attached, and what to do.
        detail: String,
    },
    /// The configuration or the buffer pool does not fit AF_XDP.
    #[error("AF_XDP on {ifname} queue {queue}: {reason}")]
    Invalid {
        /// Interface name (empty for a pool check before any interface).
        ifname: String,
        /// Queue index.
        queue: u32,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The buffer pool cannot serve as a UMEM.
    #[error("AF_XDP UMEM from the buffer pool: {reason}")]
    Pool {
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The port was closed (a statistics request through a handle outliving the port).
    #[error("AF_XDP on {ifname} queue {queue}: the port is closed")]
    Closed {
        /// Interface name.
        ifname: String,
        /// Queue index.
        queue: u32,
    },
}

/// " (hint)" or "".
pub(crate) fn hint(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" ({text})")
    }
}

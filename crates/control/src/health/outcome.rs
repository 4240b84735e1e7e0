//! What one probe found: success with its round-trip time, a failure with its reason (each with
//! a stable short name for counters), or "not sent" when the prober itself could not make the
//! probe. Pure data: it never probes and never judges a server (that is `state`).

use std::fmt;
use std::io;
use std::time::Duration;

/// Why a probe failed: the server (or the path to it) did not answer as required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// No (complete) answer within the timeout.
    Timeout,
    /// Connection refused (TCP RST to the SYN, ICMP port unreachable for UDP).
    Refused,
    /// The connection was reset or aborted after it was established.
    Reset,
    /// Host or network unreachable (an ICMP error, or no route).
    Unreachable,
    /// An HTTP status line with another status than expected.
    BadStatus(u16),
    /// An answer that is not what the probe expects (no HTTP status line, a closed connection
    /// before one, a malformed echo reply).
    BadResponse,
    /// Any other I/O error on the way.
    Io(io::ErrorKind),
}

impl FailReason {
    /// Every counter name, in the order `show` lists them.
    pub const NAMES: &'static [&'static str] = &[
        "timeout",
        "refused",
        "reset",
        "unreachable",
        "bad_status",
        "bad_response",
        "io",
    ];

    /// The stable short name of the reason (a counter's label; the status code and the I/O
    /// error kind are in the `Display` text only).
    pub fn name(&self) -> &'static str {
        match self {
            FailReason::Timeout => "timeout",
            FailReason::Refused => "refused",
            FailReason::Reset => "reset",
            FailReason::Unreachable => "unreachable",
            FailReason::BadStatus(_) => "bad_status",
            FailReason::BadResponse => "bad_response",
            FailReason::Io(_) => "io",
        }
    }

    /// The reason an I/O error from the network (connect, send, receive) stands for.
    pub fn from_io(e: &io::Error) -> FailReason {
        match e.kind() {
            io::ErrorKind::TimedOut => return FailReason::Timeout,
            io::ErrorKind::ConnectionRefused => return FailReason::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => return FailReason::Reset,
            io::ErrorKind::UnexpectedEof => return FailReason::BadResponse,
            _ => {}
        }
        match e.raw_os_error() {
            Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN) => {
                FailReason::Unreachable
            }
            _ => FailReason::Io(e.kind()),
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::BadStatus(code) => write!(f, "bad status {code}"),
            FailReason::BadResponse => f.write_str("bad response"),
            FailReason::Io(kind) => write!(f, "io error: {kind}"),
            other => f.write_str(other.name()),
        }
    }
}

/// The result of one probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The server answered as required, after `rtt`.
    Success {
        /// From the start of the probe (socket opened) to the answer.
        rtt: Duration,
    },
    /// The server did not answer as required.
    Failure(FailReason),
    /// The probe could not be made here (socket, option or bind failed): says nothing about
    /// the server, so it never counts towards `rise` or `fall`.
    NotSent(io::ErrorKind),
}

impl ProbeOutcome {
    /// The short name: "ok", a `FailReason` name, or "not_sent".
    pub fn name(&self) -> &'static str {
        match self {
            ProbeOutcome::Success { .. } => "ok",
            ProbeOutcome::Failure(r) => r.name(),
            ProbeOutcome::NotSent(_) => "not_sent",
        }
    }
}

impl fmt::Display for ProbeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeOutcome::Success { rtt } => write!(f, "ok in {}", fmt_rtt(*rtt)),
            ProbeOutcome::Failure(r) => r.fmt(f),
            ProbeOutcome::NotSent(kind) => write!(f, "not sent: {kind}"),
        }
    }
}

/// A round-trip time as `1.234 ms`.
pub fn fmt_rtt(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_to_reasons_with_stable_names() {
        let os = |n| io::Error::from_raw_os_error(n);
        assert_eq!(
            FailReason::from_io(&os(libc::ECONNREFUSED)),
            FailReason::Refused
        );
        assert_eq!(
            FailReason::from_io(&os(libc::ECONNRESET)),
            FailReason::Reset
        );
        assert_eq!(
            FailReason::from_io(&os(libc::EHOSTUNREACH)),
            FailReason::Unreachable
        );
        assert_eq!(
            FailReason::from_io(&os(libc::ENETUNREACH)),
            FailReason::Unreachable
        );
        assert_eq!(
            FailReason::from_io(&os(libc::ETIMEDOUT)),
            FailReason::Timeout
        );
        let other = FailReason::from_io(&os(libc::EPERM));
        assert_eq!(other.name(), "io");
        assert!(other.to_string().starts_with("io error: "), "{other}");
        assert_eq!(FailReason::BadStatus(503).to_string(), "bad status 503");
        assert_eq!(FailReason::BadStatus(503).name(), "bad_status");
        for r in [
            FailReason::Timeout,
            FailReason::Refused,
            FailReason::Reset,
            FailReason::Unreachable,
            FailReason::BadStatus(1),
            FailReason::BadResponse,
            FailReason::Io(io::ErrorKind::Other),
        ] {
            assert!(FailReason::NAMES.contains(&r.name()));
        }
        let ok = ProbeOutcome::Success {
            rtt: Duration::from_micros(1500),
        };
        assert_eq!(ok.to_string(), "ok in 1.500 ms");
        assert_eq!(
            ProbeOutcome::NotSent(io::ErrorKind::AddrNotAvailable).name(),
            "not_sent"
        );
    }
}

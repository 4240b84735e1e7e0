//! The HTTP side of an HTTP check: the request text and the reading of the answer's status line
//! (`HTTP/1.x NNN ...`), bounded. Pure bytes in, verdict out: it never touches a socket and
//! never reads past the status line.

/// The longest answer read while looking for the end of the status line.
pub const MAX_STATUS_BYTES: usize = 4096;

/// The request of a check: `GET path` with `Host`, closing the connection.
pub fn request(path: &str, host: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
         User-Agent: vecplane-health\r\n\r\n"
    )
    .into_bytes()
}

/// `Host` header text for `addr:port` (IPv6 in brackets; the port only when not 80).
pub fn host_header(target: std::net::SocketAddr) -> String {
    let ip = match target.ip() {
        std::net::IpAddr::V4(a) => a.to_string(),
        std::net::IpAddr::V6(a) => format!("[{a}]"),
    };
    if target.port() == 80 {
        ip
    } else {
        format!("{ip}:{}", target.port())
    }
}

/// What the bytes received so far say about the status line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusLine {
    /// A complete status line with this status code.
    Status(u16),
    /// Not complete yet: read more.
    Incomplete,
    /// Not an HTTP/1.x status line (or longer than `MAX_STATUS_BYTES`).
    Malformed,
}

/// Read the status line at the start of `buf` (what has been received so far). The line must
/// be `HTTP/1.<digit> <3 digits>` followed by a space (and a reason) or the line end (CRLF or
/// LF). Anything that cannot become that is `Malformed` as soon as it is seen.
pub fn status_line(buf: &[u8]) -> StatusLine {
    const PREFIX: &[u8] = b"HTTP/1.";
    let head = &buf[..buf.len().min(PREFIX.len())];
    if head != &PREFIX[..head.len()] {
        return StatusLine::Malformed;
    }
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_STATUS_BYTES {
            StatusLine::Malformed
        } else {
            StatusLine::Incomplete
        };
    };
    let line = &buf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // HTTP/1.x SP NNN [SP reason]
    let rest = &line[PREFIX.len()..];
    match rest {
        [minor, b' ', a, b, c, tail @ ..]
            if minor.is_ascii_digit()
                && [a, b, c].iter().all(|d| d.is_ascii_digit())
                && (tail.is_empty() || tail[0] == b' ') =>
        {
            let code = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            if (100..=599).contains(&code) {
                StatusLine::Status(code)
            } else {
                StatusLine::Malformed
            }
        }
        _ => StatusLine::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_a_closing_get_with_host_and_agent() {
        let r = String::from_utf8(request("/healthz", "www.example")).expect("text");
        assert_eq!(
            r,
            "GET /healthz HTTP/1.1\r\nHost: www.example\r\nConnection: close\r\n\
             User-Agent: vecplane-health\r\n\r\n"
        );
        assert_eq!(
            host_header("198.18.1.1:80".parse().expect("addr")),
            "198.18.1.1"
        );
        assert_eq!(
            host_header("[2001:db8::1]:8080".parse().expect("addr")),
            "[2001:db8::1]:8080"
        );
    }

    #[test]
    fn complete_status_lines_give_their_code() {
        assert_eq!(status_line(b"HTTP/1.1 200 OK\r\n"), StatusLine::Status(200));
        assert_eq!(
            status_line(b"HTTP/1.0 503 Service Unavailable\r\nServer: x\r\n\r\n"),
            StatusLine::Status(503)
        );
        assert_eq!(status_line(b"HTTP/1.1 204\r\n"), StatusLine::Status(204));
        assert_eq!(
            status_line(b"HTTP/1.1 404 Not Found\n"),
            StatusLine::Status(404)
        );
    }

    #[test]
    fn truncated_status_lines_ask_for_more() {
        for cut in [
            "",
            "H",
            "HTTP/",
            "HTTP/1.1",
            "HTTP/1.1 2",
            "HTTP/1.1 200 O",
            "HTTP/1.1 200 OK\r",
        ] {
            assert_eq!(
                status_line(cut.as_bytes()),
                StatusLine::Incomplete,
                "{cut:?}"
            );
        }
    }

    #[test]
    fn malformed_status_lines_are_refused() {
        for bad in [
            "SSH-2.0-OpenSSH\r\n",
            "HTTP/2 200\r\n",
            "http/1.1 200 OK\r\n",
            "HTTP/1.1 20 OK\r\n",
            "HTTP/1.1 2000 OK\r\n",
            "HTTP/1.1 abc OK\r\n",
            "HTTP/1.1  200 OK\r\n",
            "HTTP/1.1 099 Low\r\n",
            "HTTP/1.1 600 High\r\n",
            "HTTP/1.1\r\n",
            "\r\n",
        ] {
            assert_eq!(
                status_line(bad.as_bytes()),
                StatusLine::Malformed,
                "{bad:?}"
            );
        }
        // Early: a wrong first byte needs no line end.
        assert_eq!(status_line(b"X"), StatusLine::Malformed);
        // A status line that never ends.
        let mut long = b"HTTP/1.1 200 ".to_vec();
        long.resize(MAX_STATUS_BYTES, b'a');
        assert_eq!(status_line(&long), StatusLine::Malformed);
        assert_eq!(
            status_line(&long[..MAX_STATUS_BYTES - 1]),
            StatusLine::Incomplete
        );
    }

    proptest::proptest! {
        /// A server's answer is untrusted: any bytes give a verdict, never a panic, and a
        /// status comes only from a well-formed line.
        #[test]
        fn any_answer_gets_a_verdict(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let StatusLine::Status(n) = status_line(&bytes) {
                proptest::prop_assert!((100..=999).contains(&n));
                proptest::prop_assert!(bytes.starts_with(b"HTTP/"));
            }
        }
    }
}

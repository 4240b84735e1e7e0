//! One probe, with the kernel's sockets of the namespace the calling thread is in: TCP connect,
//! HTTP GET with an expected status, UDP datagram, ICMP echo (an unprivileged ping socket, whose
//! echo identifier is the bound port). Each socket is bound to the given local address and band
//! port and everything ends within the timeout; TCP sockets close with a reset (SO_LINGER 0) so
//! the band port is free again at once. It never retries, never leases ports (the runner does)
//! and never judges a server beyond one outcome.

use super::http::{host_header, request, status_line, StatusLine, MAX_STATUS_BYTES};
use super::outcome::{FailReason, ProbeOutcome};
use lb::health::ProbeKind;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use tokio::time::{timeout_at, Instant};

/// Probe `target` from `local` (a probe source and a band port) with `kind`, within `timeout`.
/// For ICMP the target's port is ignored. Needs a tokio runtime with I/O and time enabled.
pub async fn probe(
    kind: &ProbeKind,
    local: SocketAddr,
    target: SocketAddr,
    timeout: Duration,
) -> ProbeOutcome {
    let start = Instant::now();
    let deadline = start + timeout;
    let result = match kind {
        ProbeKind::Tcp => connect(local, target, deadline).await.map(|s| {
            reset(&s);
        }),
        ProbeKind::Http {
            path,
            host,
            expect,
            tls,
        } => {
            let host = host.clone().unwrap_or_else(|| host_header(target));
            http(local, target, deadline, path, &host, *expect, *tls).await
        }
        ProbeKind::Udp {
            payload,
            expect_reply,
        } => udp(local, target, deadline, payload, *expect_reply).await,
        ProbeKind::Icmp => icmp(local, target, deadline).await,
    };
    match result {
        Ok(()) => ProbeOutcome::Success {
            rtt: start.elapsed(),
        },
        Err(outcome) => outcome,
    }
}

/// A local failure: the probe was not made.
fn not_sent(e: io::Error) -> ProbeOutcome {
    ProbeOutcome::NotSent(e.kind())
}

/// A network failure: the server or the path to it.
fn failed(e: io::Error) -> ProbeOutcome {
    ProbeOutcome::Failure(FailReason::from_io(&e))
}

const TIMEOUT: ProbeOutcome = ProbeOutcome::Failure(FailReason::Timeout);
const BAD_RESPONSE: ProbeOutcome = ProbeOutcome::Failure(FailReason::BadResponse);

/// A TCP connection from `local` (SO_REUSEADDR: the band port is reused) to `target`.
async fn connect(
    local: SocketAddr,
    target: SocketAddr,
    deadline: Instant,
) -> Result<TcpStream, ProbeOutcome> {
    let sock = if local.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(not_sent)?;
    sock.set_reuseaddr(true).map_err(not_sent)?;
    sock.bind(local).map_err(not_sent)?;
    match timeout_at(deadline, sock.connect(target)).await {
        Err(_) => Err(TIMEOUT),
        Ok(Err(e)) => Err(failed(e)),
        Ok(Ok(s)) => {
            // From here on every way out closes with a reset: no TIME_WAIT on the band port.
            reset(&s);
            Ok(s)
        }
    }
}

/// Make closing `s` send a reset (SO_LINGER 0).
fn reset(s: &TcpStream) {
    // A failure leaves a normal close, which only delays the port's reuse.
    let _ = s.set_zero_linger();
}

/// HTTP(S): connect (and shake hands), send the request, read until the status line is
/// complete.
async fn http(
    local: SocketAddr,
    target: SocketAddr,
    deadline: Instant,
    path: &str,
    host: &str,
    expect: u16,
    tls: bool,
) -> Result<(), ProbeOutcome> {
    let s = connect(local, target, deadline).await?;
    if !tls {
        return exchange(s, deadline, path, host, expect).await;
    }
    let Some(connector) = super::tls::connector() else {
        return Err(ProbeOutcome::NotSent(io::ErrorKind::Unsupported));
    };
    let name = super::tls::server_name(host, target);
    match timeout_at(deadline, connector.connect(name, s)).await {
        Err(_) => Err(TIMEOUT),
        // A failed handshake: the server is not speaking TLS we can use.
        Ok(Err(e)) if e.kind() == io::ErrorKind::InvalidData => Err(BAD_RESPONSE),
        Ok(Err(e)) => Err(failed(e)),
        Ok(Ok(tls)) => exchange(tls, deadline, path, host, expect).await,
    }
}

/// Send the request on `s` and read its answer's status line, by `deadline`.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    deadline: Instant,
    path: &str,
    host: &str,
    expect: u16,
) -> Result<(), ProbeOutcome> {
    let exchange = async {
        s.write_all(&request(path, host)).await.map_err(failed)?;
        let mut buf = vec![0u8; MAX_STATUS_BYTES];
        let mut len = 0;
        loop {
            let n = s.read(&mut buf[len..]).await.map_err(failed)?;
            len += n;
            match status_line(&buf[..len]) {
                StatusLine::Status(code) if code == expect => return Ok(()),
                StatusLine::Status(code) => {
                    return Err(ProbeOutcome::Failure(FailReason::BadStatus(code)))
                }
                StatusLine::Malformed => return Err(BAD_RESPONSE),
                StatusLine::Incomplete if n == 0 || len == buf.len() => return Err(BAD_RESPONSE),
                StatusLine::Incomplete => {}
            }
        }
    };
    timeout_at(deadline, exchange).await.unwrap_or(Err(TIMEOUT))
}

/// UDP: send the payload; a datagram back is a success, ICMP port unreachable (ECONNREFUSED)
/// a failure, and silence a success only when no reply is expected.
async fn udp(
    local: SocketAddr,
    target: SocketAddr,
    deadline: Instant,
    payload: &[u8],
    expect_reply: bool,
) -> Result<(), ProbeOutcome> {
    let sock = UdpSocket::bind(local).await.map_err(not_sent)?;
    sock.connect(target).await.map_err(failed)?;
    let exchange = async {
        sock.send(payload).await.map_err(failed)?;
        let mut buf = [0u8; 2048];
        sock.recv(&mut buf).await.map_err(failed)?;
        Ok(())
    };
    match timeout_at(deadline, exchange).await {
        Ok(r) => r,
        Err(_) if expect_reply => Err(TIMEOUT),
        Err(_) => Ok(()),
    }
}

/// The sequence number of the next echo request.
static ECHO_SEQ: AtomicU16 = AtomicU16::new(1);

/// ICMP echo with a ping socket bound to `local` (its port is the echo identifier).
async fn icmp(
    local: SocketAddr,
    target: SocketAddr,
    deadline: Instant,
) -> Result<(), ProbeOutcome> {
    use socket2::{Domain, Protocol, Socket, Type};
    let v6 = local.is_ipv6();
    let (domain, protocol, request_type, reply_type) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6, 128u8, 129u8)
    } else {
        (Domain::IPV4, Protocol::ICMPV4, 8u8, 0u8)
    };
    let s = Socket::new(domain, Type::DGRAM, Some(protocol)).map_err(not_sent)?;
    s.set_nonblocking(true).map_err(not_sent)?;
    s.bind(&local.into()).map_err(not_sent)?;
    let sock = UdpSocket::from_std(std::net::UdpSocket::from(s)).map_err(not_sent)?;
    // Connected: the kernel reports hard ICMP errors (unreachable) to recv.
    sock.connect(SocketAddr::new(target.ip(), 0))
        .await
        .map_err(failed)?;
    let seq = ECHO_SEQ.fetch_add(1, Ordering::Relaxed);
    let mut echo = vec![request_type, 0, 0, 0, 0, 0];
    echo.extend_from_slice(&seq.to_be_bytes());
    echo.extend_from_slice(b"vecplane-health");
    let exchange = async {
        sock.send(&echo).await.map_err(failed)?;
        let mut buf = [0u8; 2048];
        loop {
            let n = sock.recv(&mut buf).await.map_err(failed)?;
            // The kernel delivers only replies with our identifier; skip old sequence numbers.
            if n >= 8 && buf[0] == reply_type && buf[6..8] == seq.to_be_bytes() {
                return Ok(());
            }
        }
    };
    timeout_at(deadline, exchange).await.unwrap_or(Err(TIMEOUT))
}

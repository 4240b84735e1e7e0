//! Real probes against real sockets, each test in a network namespace of its own (root only:
//! skipped elsewhere, failing in CI): TCP up, refused and timing out, reuse of one band port,
//! HTTP statuses, UDP echo, refusal and silence, ICMP echo (IPv4, IPv6), and a bind that
//! cannot be made. Every probe is bounded by a short timeout.

use super::outcome::{FailReason, ProbeOutcome};
use super::probe::probe;
use super::testns::{missing, TestNs};
use lb::health::ProbeKind;
use lb::probe::PROBE_PORT_BASE;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

const SHORT: Duration = Duration::from_millis(300);

/// The namespace of the probe tests: the probe sources, two servers, and 198.18.99.0/24 and
/// 2001:db8:99::/48 routed to `lo` without an owner (probes there are dropped: timeouts).
fn ns() -> Option<TestNs> {
    if !testenv::can_run(missing()) {
        return None;
    }
    let ns = TestNs::new(
        &[
            "198.18.12.1/32",
            "198.18.2.1/32",
            "198.18.2.2/32",
            "2001:db8:12::1/128",
            "2001:db8:2::1/128",
        ],
        &["198.18.99.0/24 dev lo", "2001:db8:99::/48 dev lo"],
    )
    .expect("test namespace");
    Some(ns)
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn local(port_offset: u16) -> SocketAddr {
    SocketAddr::new(sa("198.18.12.1:0").ip(), PROBE_PORT_BASE + port_offset)
}

fn is_ok(o: ProbeOutcome) -> bool {
    matches!(o, ProbeOutcome::Success { .. })
}

#[test]
fn tcp_probes_find_a_listener_a_refusal_and_a_timeout() {
    let Some(ns) = ns() else { return };
    ns.block_on(|| async {
        let listener = TcpListener::bind(sa("198.18.2.1:80"))
            .await
            .expect("listen");
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                drop(s);
            }
        });
        // Twice from the same band port: the reset close leaves no TIME_WAIT behind.
        for _ in 0..2 {
            let o = probe(&ProbeKind::Tcp, local(0), sa("198.18.2.1:80"), SHORT).await;
            assert!(is_ok(o), "{o}");
        }
        let o = probe(&ProbeKind::Tcp, local(0), sa("198.18.2.1:81"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Refused));
        let start = Instant::now();
        let o = probe(&ProbeKind::Tcp, local(1), sa("198.18.99.1:80"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Timeout));
        // Bounded by the probe's timeout, not the kernel's own (SYN retries for two minutes);
        // the margin leaves room for a loaded machine.
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
        // A source the namespace does not have: the probe is not made.
        let o = probe(
            &ProbeKind::Tcp,
            sa("198.18.77.1:50000"),
            sa("198.18.2.1:80"),
            SHORT,
        )
        .await;
        assert_eq!(
            o,
            ProbeOutcome::NotSent(std::io::ErrorKind::AddrNotAvailable)
        );
    });
}

/// A one-request HTTP server answering `answer` and sending back what it read.
async fn http_server(
    addr: &str,
    answer: &'static str,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let listener = TcpListener::bind(sa(addr)).await.expect("listen");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = vec![0u8; 2048];
            let mut len = 0;
            while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
                match s.read(&mut buf[len..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => len += n,
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&buf[..len]).into_owned());
            let _ = s.write_all(answer.as_bytes()).await;
        }
    });
    rx
}

#[test]
fn http_probes_compare_the_status() {
    let Some(ns) = ns() else { return };
    ns.block_on(|| async {
        let mut seen = http_server(
            "198.18.2.1:80",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        let _sick = http_server("198.18.2.1:81", "HTTP/1.1 503 Service Unavailable\r\n\r\n").await;
        let _odd = http_server("198.18.2.1:82", "SSH-2.0-OpenSSH_9\r\n").await;
        let _slow = TcpListener::bind(sa("198.18.2.1:83"))
            .await
            .expect("listen");
        let get = |expect| ProbeKind::Http {
            path: "/healthz".to_string(),
            host: None,
            expect,
            tls: false,
        };
        let o = probe(&get(200), local(2), sa("198.18.2.1:80"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let request = seen.recv().await.expect("request seen");
        assert!(
            request.starts_with("GET /healthz HTTP/1.1\r\nHost: 198.18.2.1\r\n"),
            "{request}"
        );
        assert!(
            request.contains("User-Agent: vecplane-health\r\n"),
            "{request}"
        );
        let o = probe(&get(200), local(2), sa("198.18.2.1:81"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::BadStatus(503)));
        // Not local(2) again: a second connection from the same band port to the same target
        // right after the first failed with EADDRNOTAVAIL in ~3% of runs under load
        // (2026-11-28, cause not found; probes of one target are an interval apart).
        let o = probe(&get(503), local(6), sa("198.18.2.1:81"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let o = probe(&get(200), local(2), sa("198.18.2.1:82"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::BadResponse));
        // Connected but never answered: the whole exchange is bounded by the timeout.
        let o = probe(&get(200), local(3), sa("198.18.2.1:83"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Timeout));
        let with_host = ProbeKind::Http {
            path: "/".to_string(),
            host: Some("www.example".to_string()),
            expect: 200,
            tls: false,
        };
        let o = probe(&with_host, local(7), sa("198.18.2.1:80"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let request = seen.recv().await.expect("request seen");
        assert!(request.contains("Host: www.example\r\n"), "{request}");
    });
}

#[test]
fn udp_probes_take_an_echo_a_refusal_and_silence() {
    let Some(ns) = ns() else { return };
    ns.block_on(|| async {
        let echo = UdpSocket::bind(sa("198.18.2.1:53")).await.expect("bind");
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = echo.recv_from(&mut buf).await {
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let mute = UdpSocket::bind(sa("198.18.2.1:54")).await.expect("bind");
        let udp = |expect_reply| ProbeKind::Udp {
            payload: b"ping".to_vec(),
            expect_reply,
        };
        let o = probe(&udp(true), local(4), sa("198.18.2.1:53"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let o = probe(&udp(true), local(4), sa("198.18.2.1:55"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Refused));
        let o = probe(&udp(false), local(4), sa("198.18.2.1:55"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Refused));
        let o = probe(&udp(true), local(4), sa("198.18.2.1:54"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Timeout));
        let o = probe(&udp(false), local(4), sa("198.18.2.1:54"), SHORT).await;
        assert!(is_ok(o), "silence without expect-reply is healthy: {o}");
        drop(mute);
    });
}

#[test]
fn icmp_probes_are_answered_by_echo_replies() {
    let Some(ns) = ns() else { return };
    ns.block_on(|| async {
        let o = probe(&ProbeKind::Icmp, local(5), sa("198.18.2.1:0"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let o = probe(&ProbeKind::Icmp, local(5), sa("198.18.2.2:0"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let o = probe(&ProbeKind::Icmp, local(5), sa("198.18.99.1:0"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Timeout));
        let v6 = SocketAddr::new(sa("[2001:db8:12::1]:0").ip(), PROBE_PORT_BASE + 5);
        let o = probe(&ProbeKind::Icmp, v6, sa("[2001:db8:2::1]:0"), SHORT).await;
        assert!(is_ok(o), "{o}");
        let o = probe(&ProbeKind::Icmp, v6, sa("[2001:db8:99::1]:0"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::Timeout));
    });
}

/// An HTTPS server on `addr` (a fresh self-signed certificate for `www.example`) answering
/// every request with `answer`.
async fn https_server(addr: &str, answer: &'static str) {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let ck = rcgen::generate_simple_self_signed(vec!["www.example".to_string()]).expect("cert");
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = TcpListener::bind(sa(addr)).await.expect("listen");
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(s).await else {
                    return;
                };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(answer.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
}

#[test]
fn https_probes_shake_hands_and_compare_the_status() {
    let Some(ns) = ns() else { return };
    ns.block_on(|| async {
        https_server(
            "198.18.2.1:443",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        https_server("198.18.2.1:444", "HTTP/1.1 503 Service Unavailable\r\n\r\n").await;
        let _plain = http_server("198.18.2.1:445", "HTTP/1.1 200 OK\r\n\r\n").await;
        let get = |host: Option<&str>| ProbeKind::Http {
            path: "/".to_string(),
            host: host.map(str::to_string),
            expect: 200,
            tls: true,
        };
        // A band port each: see `http_probes_compare_the_status` on reusing one toward the same
        // target at once.
        for (host, port) in [(None, 2), (Some("www.example"), 6)] {
            let o = probe(&get(host), local(port), sa("198.18.2.1:443"), SHORT).await;
            assert!(is_ok(o), "{host:?}: {o}");
        }
        let o = probe(&get(None), local(2), sa("198.18.2.1:444"), SHORT).await;
        assert_eq!(o, ProbeOutcome::Failure(FailReason::BadStatus(503)));
        // Plain HTTP where TLS is expected: the handshake fails.
        let o = probe(&get(None), local(2), sa("198.18.2.1:445"), SHORT).await;
        assert!(matches!(o, ProbeOutcome::Failure(_)), "{o}");
        assert!(!is_ok(o));
    });
}

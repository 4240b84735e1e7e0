//! Admission tests (`api::serve`): idle TCP clients without the token never keep the Unix
//! socket from being served, the per-client limit, the token deadline, the move of an
//! authenticated connection to its own pool, the body deadline against a dripping client, and
//! the accept loop's back-off when file descriptors run out (in a child process).

use super::*;
use crate::api::{ApiCounters, ApiState, Limits};
use crate::client::request;
use crate::testutil::{spec, view, TempDir};
use crate::ApiConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef-admission-test";

/// A daemon on `d`'s socket and a loopback TCP port with the token, under `limits`.
fn serve_tcp(d: &TempDir, limits: Limits) -> (ServerHandle, PathBuf, SocketAddr, Arc<ApiCounters>) {
    let token = d.path().join("api.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let api = ApiConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        token_file: Some(token),
        ..ApiConfig::default()
    };
    let sock = d.path().join("s.sock");
    let state = ApiState::new(Arc::new(Control::new(view(1), Arc::new(spec()))));
    let counters = state.counters.clone();
    let h = ControlSocket::bind(&sock)
        .unwrap()
        .serve_with(Arc::new(state), &api, limits)
        .unwrap();
    let addr = h.tcp_addr().unwrap();
    (h, sock, addr, counters)
}

fn get(path: &str, token: Option<&str>, close: bool) -> Vec<u8> {
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let conn = if close { "connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nhost: x\r\n{auth}{conn}\r\n").into_bytes()
}

/// Read one HTTP answer's head and body (by content-length) from `s`, or what came before EOF.
fn answer(s: &mut impl Read) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => out.push(byte[0]),
            _ => return String::from_utf8_lossy(&out).to_string(),
        }
    }
    let head = String::from_utf8_lossy(&out).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = s.read_exact(&mut body);
    out.extend(body);
    String::from_utf8_lossy(&out).to_string()
}

/// Send `bytes` on a new TCP connection and read one answer.
fn tcp_once(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    answer(&mut s)
}

/// A TCP connection to `addr` from the loopback address `from`.
fn connect_from(from: std::net::Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::from((from, 0)).into())?;
    s.connect(&addr.into())?;
    Ok(s.into())
}

#[test]
fn three_hundred_idle_tcp_clients_without_a_token_do_not_lock_out_the_unix_socket() {
    let d = TempDir::new();
    let limits = Limits {
        unix_connections: 4,
        tcp_connections: 4,
        tcp_unauthenticated: 16,
        per_client: 8,
        auth_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let (_h, sock, addr, counters) = serve_tcp(&d, limits);
    // 300 silent connections from 30 loopback addresses: more than any pool holds.
    let mut idle = Vec::new();
    for i in 0..300u32 {
        let from = std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % 30) as u8);
        idle.push(connect_from(from, addr).unwrap());
    }
    // Those over a limit are answered at once; the others stay silent and open.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let r = request(&sock, "show errors", false).unwrap();
        assert!(r.ok, "{r:?}");
    }
    assert!(counters.per_client.load(Ordering::Relaxed) == 0);
    assert!(
        counters.unauthenticated_busy.load(Ordering::Relaxed) >= 300 - 16,
        "{counters:?}"
    );
    let mut refused = idle.pop().unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let r = answer(&mut refused);
    assert!(
        r.starts_with("HTTP/1.1 503") && r.contains("waiting to show the API token (at most 16)"),
        "{r}"
    );
    drop(idle);
}

#[test]
fn one_client_address_is_limited_with_a_429_that_says_so() {
    let d = TempDir::new();
    let limits = Limits {
        per_client: 2,
        auth_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let (_h, sock, addr, counters) = serve_tcp(&d, limits);
    let a = TcpStream::connect(addr).unwrap();
    let b = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let r = tcp_once(addr, &get("/v1", Some(TOKEN), true));
    assert!(
        r.starts_with("HTTP/1.1 429")
            && r.contains("too many API connections from 127.0.0.1 (at most 2 at once per client"),
        "{r}"
    );
    assert_eq!(counters.per_client.load(Ordering::Relaxed), 1);
    // Root on the socket is unaffected; once a connection closes, the client is served again.
    assert!(request(&sock, "show errors", false).unwrap().ok);
    drop(a);
    let start = Instant::now();
    loop {
        let r = tcp_once(addr, &get("/v1", Some(TOKEN), true));
        if r.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(b);
}

#[test]
fn a_tcp_client_without_the_token_is_closed_at_the_auth_deadline() {
    let d = TempDir::new();
    let limits = Limits {
        auth_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let (_h, _sock, addr, counters) = serve_tcp(&d, limits);
    let mut silent = TcpStream::connect(addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let start = Instant::now();
    // Closed by the daemon (EOF), not by our read timeout.
    assert_eq!(silent.read_to_end(&mut rest).unwrap(), 0);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(counters.auth_timeouts.load(Ordering::Relaxed), 1);
    // A wrong token is answered 401 and the connection closed.
    let r = tcp_once(addr, &get("/v1", Some("wrong-token-wrong-token"), false));
    assert!(r.starts_with("HTTP/1.1 401") && r.contains("Bearer"), "{r}");
}

#[test]
fn an_authenticated_connection_moves_to_its_own_pool() {
    let d = TempDir::new();
    let limits = Limits {
        tcp_connections: 2,
        tcp_unauthenticated: 1,
        auth_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let (_h, _sock, addr, counters) = serve_tcp(&d, limits);
    // Two keep-alive connections, one after the other, through the one unauthenticated slot.
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&get("/v1", Some(TOKEN), false)).unwrap();
        let r = answer(&mut s);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        kept.push(s);
    }
    // Past the auth deadline they are still served: they showed the token.
    std::thread::sleep(Duration::from_millis(800));
    for s in &mut kept {
        s.write_all(&get("/v1", Some(TOKEN), false)).unwrap();
        let r = answer(s);
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    // A third finds the authenticated pool full.
    let r = tcp_once(addr, &get("/v1", Some(TOKEN), false));
    assert!(
        r.starts_with("HTTP/1.1 503")
            && r.contains("too many authenticated API connections over TCP (at most 2)"),
        "{r}"
    );
    assert_eq!(counters.tcp_busy.load(Ordering::Relaxed), 1);
    assert_eq!(counters.auth_timeouts.load(Ordering::Relaxed), 0);
}

#[test]
fn a_body_dripping_one_byte_at_a_time_is_cut_at_the_request_deadline() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let limits = Limits {
        request_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(400),
        ..Limits::default()
    };
    let state = Arc::new(ApiState::new(Arc::new(Control::new(
        view(1),
        Arc::new(spec()),
    ))));
    let counters = state.counters.clone();
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve_with(state, &ApiConfig::default(), limits)
        .unwrap();
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // 100 bytes announced, one sent every 100 ms: each byte is progress for the idle
    // timeout, but the whole body would take 10 s.
    s.write_all(
        b"POST /v1/command HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n",
    )
    .unwrap();
    let mut writer = s.try_clone().unwrap();
    let drip = std::thread::spawn(move || {
        for _ in 0..100 {
            if writer.write_all(b" ").is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        true
    });
    let r = answer(&mut s);
    assert!(
        r.starts_with("HTTP/1.1 408") && r.contains("did not arrive within 500 ms"),
        "{r}"
    );
    assert_eq!(counters.request_timeouts.load(Ordering::Relaxed), 1);
    // The daemon closed the connection: the dripper's writes fail before it is done.
    assert!(!drip.join().unwrap(), "the whole body was taken");
}

#[test]
fn an_address_other_hosts_reach_is_served_only_with_allow_remote() {
    let d = TempDir::new();
    let token = d.path().join("api.token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut api = ApiConfig {
        tcp: Some("0.0.0.0:0".parse().unwrap()),
        token_file: Some(token),
        allow_remote: false,
    };
    let serve = |api: &ApiConfig| {
        ControlSocket::bind(&d.path().join("s.sock"))
            .unwrap()
            .serve(Arc::new(Control::new(view(1), Arc::new(spec()))), api)
    };
    let e = serve(&api).err().unwrap();
    assert!(
        e.to_string().contains("can be reached from other hosts")
            && e.to_string().contains("allow-remote = true"),
        "{e}"
    );
    api.allow_remote = true;
    let h = serve(&api).unwrap();
    assert!(h.tcp_addr().unwrap().ip().is_unspecified());
}

/// Set by the parent test: this process is the child of the descriptor test.
const FD_CHILD: &str = "VECPLANE_TEST_FD_EXHAUSTION_CHILD";

#[test]
fn the_accept_loop_backs_off_when_descriptors_run_out() {
    // In a child process: running out of descriptors must not touch the other tests.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "server::admission_tests::fd_exhaustion_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FD_CHILD, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran nothing:\n{text}");
    assert!(text.contains("fd child done"), "{text}");
}

/// The child of `the_accept_loop_backs_off_when_descriptors_run_out` (does nothing unless it
/// is that child): lower RLIMIT_NOFILE, use up every descriptor while a client waits in the
/// backlog, check accept() failures are counted at most once per 10 ms pause, then free the
/// descriptors and check the waiting client and a new one are served.
#[test]
fn fd_exhaustion_child() {
    if std::env::var_os(FD_CHILD).is_none() {
        return;
    }
    let limit = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 256,
    };
    // SAFETY: `limit` is a valid rlimit; this process is the child alone.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let state = Arc::new(ApiState::new(Arc::new(Control::new(
        view(1),
        Arc::new(spec()),
    ))));
    let counters = state.counters.clone();
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve_with(state, &ApiConfig::default(), Limits::default())
        .unwrap();
    assert!(request(&sock, "show errors", false).unwrap().ok);
    // Use up every descriptor, then free one for the client's socket.
    let mut files = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        files.push(f);
    }
    files.pop();
    let mut waiting = UnixStream::connect(&sock).unwrap();
    let start = Instant::now();
    while counters.accept_fd_exhausted.load(Ordering::Relaxed) < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "accept() failures not counted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let failures = counters.accept_fd_exhausted.load(Ordering::Relaxed);
    let elapsed = start.elapsed().as_millis() as u64;
    // Each failure is followed by a pause of at least 10 ms (two listeners could fail at once).
    assert!(
        failures <= 2 * (elapsed / 10 + 2),
        "{failures} failures in {elapsed} ms: the loop does not back off"
    );
    drop(files);
    waiting
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    waiting
        .write_all(b"GET /v1/errors HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let r = answer(&mut waiting);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(request(&sock, "show errors", false).unwrap().ok);
    println!("fd child done: {failures} failures counted in {elapsed} ms");
}

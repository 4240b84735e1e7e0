//! Socket tests: permissions, stale and live sockets, HTTP on the socket (malformed, unknown
//! fields, oversized bodies, half requests, too many connections), the client.

use super::*;
use crate::client::{request, ClientError};
use crate::testutil::{spec, view, TempDir};
use crate::ApiConfig;

fn control() -> Arc<Control> {
    Arc::new(Control::new(view(1), Arc::new(spec())))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn creates_directory_0700_and_socket_0600() {
    let d = TempDir::new();
    let dir = d.path().join("run").join("vecplane");
    let sock = dir.join("vecplane.sock");
    let s = ControlSocket::bind(&sock).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&sock), 0o600);
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());
    drop(s);
    assert!(!sock.exists(), "socket removed when dropped");
}

#[test]
fn existing_directory_keeps_its_mode() {
    let d = TempDir::new();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let _s = ControlSocket::bind(&d.path().join("s.sock")).unwrap();
    assert_eq!(mode(d.path()), 0o755);
}

#[test]
fn stale_socket_is_replaced() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    drop(UnixListener::bind(&sock).unwrap()); // leaves the file, nobody listens
    assert!(sock.exists());
    let s = ControlSocket::bind(&sock).unwrap();
    let h = s.serve(control(), &ApiConfig::default()).unwrap();
    let r = request(&sock, "show errors", false).unwrap();
    assert!(r.ok);
    h.shutdown();
    assert!(!sock.exists(), "socket removed at shutdown");
}

#[test]
fn live_socket_is_not_stolen() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let _first = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control(), &ApiConfig::default())
        .unwrap();
    let e = ControlSocket::bind(&sock).unwrap_err();
    assert!(matches!(e, ServerError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("already listening"), "{e}");
    assert!(request(&sock, "help", false).unwrap().ok);
}

#[test]
fn regular_file_is_not_removed() {
    let d = TempDir::new();
    let p = d.path().join("notasocket");
    std::fs::write(&p, b"keep me").unwrap();
    let e = ControlSocket::bind(&p).unwrap_err();
    assert!(matches!(e, ServerError::NotASocket { .. }), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"keep me");
}

#[test]
fn directory_creation_failure_is_explained() {
    let d = TempDir::new();
    let file = d.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let e = ControlSocket::bind(&file.join("sub").join("s.sock")).unwrap_err();
    assert!(matches!(e, ServerError::Dir { .. }), "{e}");
    assert!(e.to_string().contains("--socket PATH"), "{e}");
}

#[test]
fn socket_removal_only_if_still_ours() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let h = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control(), &ApiConfig::default())
        .unwrap();
    // Someone replaced the file: shutting down must not remove theirs.
    std::fs::remove_file(&sock).unwrap();
    std::fs::write(&sock, b"other").unwrap();
    h.shutdown();
    assert_eq!(std::fs::read(&sock).unwrap(), b"other");
}

#[test]
fn replies_text_and_json() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let h = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control(), &ApiConfig::default())
        .unwrap();
    let r = request(&sock, "show interfaces", false).unwrap();
    assert!(r.ok && r.data.is_none());
    assert!(r.text.unwrap().starts_with("Name  Driver  MAC"));
    let r = request(&sock, "show interfaces", true).unwrap();
    assert_eq!(r.data.unwrap()["interfaces"][0]["name"], "in0");
    let r = request(&sock, "frobnicate", false).unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("accepted commands"));
    let r = request(&sock, "show ip fib 198.18.2.9", true).unwrap();
    assert_eq!(r.data.unwrap()["entries"][0]["prefix"], "198.18.2.0/24");
    drop(h);
}

/// Send raw bytes on a new connection and read until the daemon closes it (or `wait` passes).
fn raw(sock: &Path, bytes: &[u8], wait: std::time::Duration) -> String {
    use std::io::{Read, Write};
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").into_bytes()
}

#[test]
fn http_errors_have_one_body_and_name_what_is_wrong() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control(), &ApiConfig::default())
        .unwrap();
    let wait = std::time::Duration::from_secs(5);
    let r = raw(&sock, &post("/v1/command", "{\"command\": "), wait);
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(
        r.contains("{\"error\":{") && r.contains("malformed JSON"),
        "{r}"
    );
    let r = raw(
        &sock,
        &post("/v1/command", "{\"command\": \"help\", \"x\": 1}"),
        wait,
    );
    assert!(
        r.starts_with("HTTP/1.1 400") && r.contains("unknown field `x`"),
        "{r}"
    );
    let r = raw(&sock, &post("/v1/nowhere", "{}"), wait);
    assert!(
        r.starts_with("HTTP/1.1 404") && r.contains("openapi.json"),
        "{r}"
    );
    let r = raw(
        &sock,
        b"DELETE /v1/runtime HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        wait,
    );
    assert!(
        r.starts_with("HTTP/1.1 405") && r.contains("\"status\":405"),
        "{r}"
    );
    let big = "x".repeat(crate::api::MAX_BODY + 10);
    let r = raw(&sock, &post("/v1/batch", &big), wait);
    assert!(
        r.starts_with("HTTP/1.1 413") && r.contains("\"status\":413"),
        "{r}"
    );
    let r = raw(&sock, &get("/v1/errors?format=text"), wait);
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("No errors."),
        "{r}"
    );
    let r = raw(&sock, &get("/v1/errors?colour=red"), wait);
    assert!(
        r.starts_with("HTTP/1.1 400") && r.contains("unknown query parameter `colour`"),
        "{r}"
    );
}

#[test]
fn a_half_sent_request_is_dropped_and_too_many_connections_are_refused() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let limits = crate::api::Limits {
        unix_connections: 2,
        header_timeout: std::time::Duration::from_millis(300),
        idle_timeout: std::time::Duration::from_millis(600),
        ..crate::api::Limits::default()
    };
    let state = Arc::new(crate::api::ApiState::new(control()));
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve_with(state, &ApiConfig::default(), limits)
        .unwrap();
    let start = std::time::Instant::now();
    let r = raw(
        &sock,
        b"GET /v1/errors HTTP/1.1\r\nhost:",
        std::time::Duration::from_secs(10),
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "closed by the daemon"
    );
    assert!(!r.contains("200 OK"), "{r}");
    // Two silent connections take both slots; the third is refused at once.
    let a = UnixStream::connect(&sock).unwrap();
    let b = UnixStream::connect(&sock).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r = raw(&sock, &get("/v1"), std::time::Duration::from_secs(5));
    assert!(
        r.starts_with("HTTP/1.1 503") && r.contains("too many API connections"),
        "{r}"
    );
    // The daemon drops silent connections after the idle timeout; then requests are served.
    std::thread::sleep(std::time::Duration::from_millis(900));
    drop((a, b));
    let r = request(&sock, "show errors", false).unwrap();
    assert!(r.ok);
}

#[test]
fn peer_credentials() {
    let (a, _b) = UnixStream::pair().unwrap();
    // SAFETY: geteuid has no preconditions.
    assert_eq!(peer_uid(&a).unwrap(), unsafe { libc::geteuid() });
    assert!(peer_allowed(0, 1000));
    assert!(peer_allowed(1000, 1000));
    assert!(!peer_allowed(1001, 1000));
    assert!(peer_allowed(0, 0));
}

#[test]
fn client_explains_a_missing_daemon() {
    let d = TempDir::new();
    let sock = d.path().join("nobody.sock");
    let e = request(&sock, "help", false).unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }));
    let s = e.to_string();
    assert!(
        s.starts_with(&format!(
            "cannot connect to {}: is `vecplane run` running?",
            sock.display()
        )),
        "{s}"
    );
}

//! Socket tests: permissions, stale and live sockets, the line protocol, the client.

use super::*;
use crate::client::{request, ClientError};
use crate::testutil::{spec, view, TempDir};
use serde_json::json;

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
    let h = s.serve(control()).unwrap();
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
        .serve(control())
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
        .serve(control())
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
        .serve(control())
        .unwrap();
    let r = request(&sock, "show interfaces", false).unwrap();
    assert!(r.ok && r.data.is_none());
    assert!(r.text.unwrap().starts_with("Name  Driver  MAC"));
    let r = request(&sock, "show interfaces", true).unwrap();
    assert_eq!(r.data.unwrap()["interfaces"][0]["name"], "in0");
    let r = request(&sock, "frobnicate", false).unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("accepted commands"));
    drop(h);
}

#[test]
fn line_protocol_several_requests_and_bad_json() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control())
        .unwrap();
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"{\"command\": \"show errors\"}\n\nnot json\n{\"command\": \"help\", \"json\": true, \"x\": 1}\n{\"command\": \"show ip fib 198.18.2.9\", \"json\": true}\n")
        .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut read = || {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        serde_json::from_str::<serde_json::Value>(&l).unwrap()
    };
    assert_eq!(read(), json!({"ok": true, "text": "No errors.\n"}));
    let bad = read();
    assert_eq!(bad["ok"], false);
    assert!(
        bad["error"].as_str().unwrap().starts_with("bad request:"),
        "{bad}"
    );
    let unknown = read();
    assert_eq!(unknown["ok"], false);
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `x`"),
        "{unknown}"
    );
    let fib = read();
    assert_eq!(fib["ok"], true);
    assert_eq!(fib["data"]["entries"][0]["prefix"], "198.18.2.0/24");
}

#[test]
fn oversized_request_is_refused() {
    let d = TempDir::new();
    let sock = d.path().join("s.sock");
    let _h = ControlSocket::bind(&sock)
        .unwrap()
        .serve(control())
        .unwrap();
    let mut s = UnixStream::connect(&sock).unwrap();
    let big = vec![b'x'; MAX_REQUEST + 10];
    let _ = s.write_all(&big);
    let mut l = String::new();
    BufReader::new(&s).read_line(&mut l).unwrap();
    let v: serde_json::Value = serde_json::from_str(&l).unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("request longer than"),
        "{v}"
    );
}

#[test]
fn peer_credentials() {
    let (a, _b) = UnixStream::pair().unwrap();
    assert_eq!(peer_uid(&a).unwrap(), own_uid());
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

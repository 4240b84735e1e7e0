//! Entry points for the cargo-fuzz targets (fuzz/) and the property tests beside the parsers:
//! text an operator, an API client or BIRD sends, through the code that takes it, with what every
//! input must keep: no panic, and an error that says where (a line of the file, a field).
//! Each function panics when a property breaks (that is the finding).
//!
//! It never writes outside a private temporary directory of its own, never opens a socket and never runs
//! a command; it is not part of the API (compiled for tests and the `fuzzing` feature only).

use crate::api::{openapi::ENDPOINTS, router, ApiState};
use crate::bgp::bird::Conversation;
use crate::commands::Control;
use crate::config::{Config, ConfigError};
use crate::testutil::{spec, view};
use dataplane::lb::LbControl;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Where relative paths of a fuzzed config resolve: nowhere (no file is read or written).
const NO_DIR: &str = "/nonexistent/vecplane-fuzz";

/// A fresh private directory (mode 0700), removed with its contents on drop.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new() -> PrivateDir {
        use std::os::unix::fs::DirBuilderExt;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("vp-fuzz-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&d)
            .expect("a private directory");
        PrivateDir(d)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Check what a parse of a file of `lines` lines said: every problem names a line of it
/// (1-based; one past the end for what is missing at its end).
fn check_issues(e: &ConfigError, label: &str, lines: usize) {
    let shown = e.to_string();
    assert!(!shown.is_empty(), "an empty error");
    for i in e.issues() {
        if i.file != label {
            continue;
        }
        assert!(
            (1..=lines + 1).contains(&i.line),
            "problem without a line of the file ({lines} lines): {i}"
        );
        assert!(!i.message.is_empty(), "problem without a message: {i}");
    }
}

fn line_count(text: &[u8]) -> usize {
    text.split(|&b| b == b'\n').count()
}

/// A config file's text through parse and validation.
pub fn config_text(text: &str) {
    if let Err(e) = Config::parse(text, "fuzz.toml", Path::new(NO_DIR)) {
        check_issues(&e, "fuzz.toml", line_count(text.as_bytes()));
    }
}

/// A route file's bytes, included by a valid config (its ports, neighbours and routes are
/// what the routes are checked against).
pub fn route_file(bytes: &[u8]) {
    let dir = PrivateDir::new();
    let path = dir.0.join("routes.txt");
    std::fs::write(&path, bytes).expect("write the route file");
    let text = format!("route-file = \"routes.txt\"\n{}", crate::testutil::SPEC);
    if let Err(e) = Config::parse(&text, "fuzz.toml", &dir.0) {
        check_issues(&e, &path.display().to_string(), line_count(bytes));
        assert!(
            e.issues().iter().all(|i| i.file != "fuzz.toml"),
            "the config itself was refused: {e}"
        );
    }
}

/// One line of the `ctl` command language through its parser.
pub fn command_line(text: &str) {
    if let Err(e) = crate::parse_command(text) {
        assert!(!e.to_string().is_empty(), "an empty error for {text:?}");
    }
}

/// Bytes as BIRD's side of a control-socket conversation: replies are read one after the other
/// until one is refused; each is whole (a final code of four digits, no newline inside a line).
pub fn bird_reply(bytes: &[u8]) {
    let set_read_timeout = |_: Duration| Ok(());
    let mut conv = Conversation {
        reader: Cursor::new(bytes),
        socket: Path::new("/fuzz/bird.ctl"),
        deadline: Instant::now() + Duration::from_secs(3600),
        timeout: Duration::from_secs(3600),
        set_read_timeout: &set_read_timeout,
    };
    for _ in 0..64 {
        match conv.reply("show route") {
            Ok(r) => {
                assert!(r.code <= 9999, "code {}", r.code);
                assert!(!r.lines.is_empty(), "a reply without a line");
                assert!(r.lines.iter().all(|l| !l.contains('\n')), "{r:?}");
                let _ = (r.text(), r.is_success());
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                return;
            }
        }
    }
}

/// The endpoints that take a JSON body, but for those that act on files (`/v1/pcap` writes a
/// capture) or run the command language (`/v1/command`; `command_line` covers its parser).
pub fn api_body_endpoints() -> Vec<(&'static str, &'static str)> {
    ENDPOINTS
        .iter()
        .filter(|e| e.body.is_some() && !matches!(e.path, "/v1/pcap" | "/v1/command"))
        .map(|e| (e.method, e.path))
        .collect()
}

/// `body` sent to endpoint `which` (modulo their number) of a fresh control plane (the fake
/// view's two ports, routes and neighbours, and an empty load balancer): the answer is a success
/// or a client error naming what was wrong; never a panic, never a server error.
pub fn api_body(which: usize, body: &[u8]) {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    });
    let endpoints = api_body_endpoints();
    let (method, path) = endpoints[which % endpoints.len()];
    let path = path
        .replace("{address}/{length}", "198.18.2.0/24")
        .replace("{ip}", "198.18.1.2")
        .replace("{name}", "in0")
        .replace("{id}", "0")
        .replace("{address}", "198.18.12.11");
    let mut v = view(1);
    v.lb = Arc::new(LbControl::without_workers(
        lb::model::LbState::new(),
        vec!["in0".into(), "out0".into()],
        1,
    ));
    let control = Arc::new(Control::new(v, Arc::new(spec())));
    let r = router(Arc::new(ApiState::new(control)));
    let req = axum::http::Request::builder()
        .method(method.to_uppercase().as_str())
        .uri(&path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_vec()))
        .expect("request");
    let (status, bytes) = rt.block_on(async {
        use tower::ServiceExt;
        let resp = r.oneshot(req).await.expect("served");
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .expect("body");
        (status, bytes)
    });
    assert!(
        !status.is_server_error(),
        "{method} {path} answered {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    if status.is_client_error() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON error body");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{method} {path}: {v}");
    }
}

#[cfg(test)]
#[path = "fuzzing_tests.rs"]
mod tests;

//! End-to-end tests of the HTTP API against a running daemon (memory ports): curl over the Unix
//! socket and over TCP with the token, `vecplane ctl`, create/read/list/update/delete of routes
//! and static neighbours, all-or-nothing batches, malformed requests, 200 concurrent clients,
//! reload (API and SIGHUP), and `GET /metrics` checked by promtool. Addresses come from
//! 198.18.0.0/15 only.

mod support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{stderr, stdout, Daemon, TempDir};

/// A tool the test needs: in CI it must be there; elsewhere the test says what is missing.
fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        testenv::skip(&format!(
            "{name} is not installed (scripts/test.sh installs it)"
        ));
    }
    found
}

const CONFIG: &str = r#"
[dataplane]
buffers = 4096

[[port]]
name = "in0"
driver = "memory"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
frame-size = 64
flows = 16
src-ip = "198.18.1.2"
destinations = ["198.19.0.10", "198.19.0.11"]

[[port]]
name = "out0"
driver = "memory"
mac = "02:00:00:00:02:01"
ip4 = ["198.18.2.1/24"]
generate = false

[[neighbour]]
ip = "198.18.2.2"
mac = "02:00:00:00:02:02"
port = "out0"

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"
"#;

/// curl over the daemon's socket: (status, body).
fn curl(sock: &Path, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut c = Command::new("curl");
    c.args([
        "-s",
        "-m",
        "20",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
    ])
    .arg("--unix-socket")
    .arg(sock);
    if let Some(b) = body {
        c.args(["-H", "content-type: application/json", "--data-binary", b]);
    }
    c.arg(format!("http://localhost{path}"));
    let o = c.output().expect("curl runs");
    let text = stdout(&o);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::Null)
}

fn tx_packets(dm: &Daemon) -> u64 {
    dm.ctl_json(&["show", "interfaces"])["interfaces"][1]["tx_packets"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn routes_and_neighbours_through_curl_and_ctl() {
    if !tool("curl") {
        return;
    }
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let sock = dm.socket.clone();

    // Create, read, list, update, delete a route with curl.
    let (st, b) = curl(
        &sock,
        "POST",
        "/v1/routes",
        Some(r#"{"prefix": "198.19.8.0/24", "via": ["198.18.2.7"]}"#),
    );
    assert_eq!(st, 201, "{b}");
    assert_eq!(json_of(&b)["version"], 1, "{b}");
    let (st, b) = curl(&sock, "GET", "/v1/routes/198.19.8.0/24", None);
    assert_eq!(
        (st, json_of(&b)),
        (
            200,
            json!({"prefix": "198.19.8.0/24", "via": ["198.18.2.7"]})
        )
    );
    let (st, b) = curl(
        &sock,
        "PUT",
        "/v1/routes/198.19.8.0/24",
        Some(r#"{"drop": true}"#),
    );
    assert_eq!(st, 200, "{b}");
    let (_, b) = curl(&sock, "GET", "/v1/routes?family=ipv4", None);
    let list = json_of(&b);
    assert_eq!(list["total"], 2, "{b}");
    assert!(
        list["routes"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r == &json!({"prefix": "198.19.8.0/24", "drop": true}))),
        "{b}"
    );
    let (st, _) = curl(&sock, "DELETE", "/v1/routes/198.19.8.0/24", None);
    assert_eq!(st, 200);
    let (st, b) = curl(&sock, "GET", "/v1/routes/198.19.8.0/24", None);
    assert_eq!(st, 404, "{b}");
    assert_eq!(json_of(&b)["error"]["status"], 404);

    // Static neighbours with curl.
    let (st, b) = curl(
        &sock,
        "POST",
        "/v1/neighbours",
        Some(r#"{"ip": "198.18.2.9", "mac": "02:00:00:00:02:09", "port": "out0"}"#),
    );
    assert_eq!(st, 201, "{b}");
    let (st, b) = curl(
        &sock,
        "PUT",
        "/v1/neighbours/198.18.2.9",
        Some(r#"{"mac": "02:00:00:00:02:0a", "port": "out0"}"#),
    );
    assert_eq!(st, 200, "{b}");
    let (_, b) = curl(&sock, "GET", "/v1/neighbours/198.18.2.9", None);
    assert_eq!(json_of(&b)["mac"], "02:00:00:00:02:0a", "{b}");
    let (st, _) = curl(&sock, "DELETE", "/v1/neighbours/198.18.2.9", None);
    assert_eq!(st, 200);

    // The same with vecplane ctl.
    dm.ctl_ok(&[
        "route",
        "add",
        "198.19.9.0/24",
        "via",
        "198.18.2.2",
        "198.18.2.3",
    ]);
    let shown = dm.ctl_ok(&["route", "show", "198.19.9.0/24"]);
    assert_eq!(shown, "198.19.9.0/24 via 198.18.2.2 198.18.2.3\n");
    dm.ctl_ok(&["route", "replace", "198.19.9.0/24", "drop"]);
    assert!(dm
        .ctl_ok(&["route", "show"])
        .contains("198.19.9.0/24 drop\n"));
    dm.ctl_ok(&["route", "del", "198.19.9.0/24"]);
    let gone = dm.ctl(&["route", "show", "198.19.9.0/24"]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        stderr(&gone).contains("there is no route 198.19.9.0/24"),
        "{}",
        stderr(&gone)
    );
    dm.ctl_ok(&[
        "neighbour",
        "add",
        "198.18.2.5",
        "02:00:00:00:02:05",
        "out0",
    ]);
    assert!(dm
        .ctl_ok(&["neighbour", "show"])
        .contains("198.18.2.5 02:00:00:00:02:05 out0\n"));
    dm.ctl_ok(&["neighbour", "del", "198.18.2.5"]);

    // A batch with one bad item applies nothing and names the item.
    let batch = d.write(
        "batch.json",
        r#"{"changes": [
            {"op": "add", "route": {"prefix": "198.19.20.0/24", "via": ["198.18.2.2"]}},
            {"op": "add", "route": {"prefix": "198.19.21.0/24", "via": ["198.18.77.1"]}}
        ]}"#,
    );
    let o = dm.ctl(&["batch", batch.to_str().unwrap_or("")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("(item 1)") && stderr(&o).contains("198.18.77.1"),
        "{}",
        stderr(&o)
    );
    let (st, _) = curl(&sock, "GET", "/v1/routes/198.19.20.0/24", None);
    assert_eq!(st, 404, "nothing of the batch was applied");

    // Malformed JSON, unknown fields, out-of-range values, a 10 MB body.
    let (st, b) = curl(&sock, "POST", "/v1/batch", Some("{\"changes\": ["));
    assert!(st == 400 && b.contains("malformed JSON"), "{st} {b}");
    let (st, b) = curl(
        &sock,
        "POST",
        "/v1/routes",
        Some(r#"{"prefix": "198.19.0.0/16", "via": ["198.18.2.2"], "metric": 5}"#),
    );
    assert!(
        st == 400 && b.contains("unknown field `metric`"),
        "{st} {b}"
    );
    let (st, b) = curl(
        &sock,
        "POST",
        "/v1/routes",
        Some(r#"{"prefix": "198.19.30.0/33", "via": ["198.18.2.2"]}"#),
    );
    assert!(
        st == 400 && json_of(&b)["error"]["field"] == "len",
        "{st} {b}"
    );
    let big = d.write("big.json", &"x".repeat(10 * 1024 * 1024));
    let o = Command::new("curl")
        .args([
            "-s",
            "-m",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
        ])
        .arg("--unix-socket")
        .arg(&sock)
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(format!("@{}", big.display()))
        .arg("http://localhost/v1/batch")
        .output()
        .expect("curl");
    assert_eq!(stdout(&o).trim(), "413");

    // Forwarding went on through all of it.
    let before = tx_packets(&dm);
    std::thread::sleep(Duration::from_millis(200));
    assert!(tx_packets(&dm) > before);
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn two_hundred_concurrent_clients_are_served_or_refused_cleanly() {
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let ep = control::Endpoint::Unix(dm.socket.clone());
    let before = tx_packets(&dm);
    let threads: Vec<_> = (0..200)
        .map(|i| {
            let ep = ep.clone();
            std::thread::spawn(move || {
                let path = if i % 2 == 0 {
                    "/v1/interfaces"
                } else {
                    "/v1/routes?limit=5"
                };
                control::http(&ep, "GET", path, None).map(|r| r.status)
            })
        })
        .collect();
    let mut ok = 0;
    for t in threads {
        match t.join().expect("client thread") {
            Ok(200) => ok += 1,
            Ok(503) => {}
            other => panic!("a client got {other:?}"),
        }
    }
    assert!(ok >= 100, "only {ok} of 200 served");
    assert!(tx_packets(&dm) > before, "forwarding went on");
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn tcp_listener_needs_the_token() {
    if !tool("curl") {
        return;
    }
    let d = TempDir::new();
    let token = d.write("api.token", "0123456789abcdef-test-token\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let cfg = d.write(
        "api.toml",
        &format!("[api]\ntcp = \"127.0.0.1:0\"\ntoken-file = \"api.token\"\n{CONFIG}"),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let logs = dm.logs();
    let url = logs
        .split("API also on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no TCP address in the logs:\n{logs}"))
        .to_string();
    let get = |auth: Option<&str>| {
        let mut c = Command::new("curl");
        c.args(["-s", "-m", "10", "-o", "-", "-w", "\n%{http_code}"]);
        if let Some(a) = auth {
            c.args(["-H", &format!("authorization: {a}")]);
        }
        let o = c
            .arg(format!("{url}/v1/interfaces"))
            .output()
            .expect("curl");
        stdout(&o)
            .rsplit_once('\n')
            .map(|(_, c)| c.trim().to_string())
            .unwrap_or_default()
    };
    assert_eq!(get(None), "401");
    assert_eq!(get(Some("Bearer wrong-token-of-same-len")), "401");
    assert_eq!(get(Some("Bearer 0123456789abcdef-test-token")), "200");
    // vecplane ctl over TCP with the token file.
    let o = Command::new(support::BIN)
        .args(["ctl", "--url", &url, "--token-file"])
        .arg(&token)
        .args(["show", "errors"])
        .output()
        .expect("ctl");
    assert!(o.status.success(), "{}", stderr(&o));
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn an_api_other_hosts_reach_needs_allow_remote_and_is_warned_about() {
    let d = TempDir::new();
    let token = d.write("api.token", "0123456789abcdef-test-token\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let api = "[api]\ntcp = \"0.0.0.0:0\"\ntoken-file = \"api.token\"\n";
    let refused = d.write("refused.toml", &format!("{api}{CONFIG}"));
    let o = support::run(&["run", "--config", refused.to_str().unwrap_or("")]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!(
            "{}:2: [api] field `tcp`: `0.0.0.0:0` is every address of this host",
            refused.display()
        )),
        "{}",
        stderr(&o)
    );
    let cfg = d.write(
        "remote.toml",
        &format!("{api}allow-remote = true\n{CONFIG}"),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let logs = dm.logs();
    assert!(
        logs.contains("WARN")
            && logs.contains("the API listens on 0.0.0.0:")
            && logs.contains("which other hosts can reach"),
        "{logs}"
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn reload_applies_a_changed_file_and_refuses_a_bad_one() {
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    // A new route in the file, applied by `ctl reload` while traffic flows.
    d.write(
        "api.toml",
        &format!("{CONFIG}\n[[route]]\nprefix = \"198.19.40.0/24\"\nvia = \"198.18.2.2\"\n"),
    );
    let answer = dm.ctl_ok(&["reload"]);
    assert!(answer.contains("\"routes_set\": 1"), "{answer}");
    dm.ctl_ok(&["route", "show", "198.19.40.0/24"]);
    // One bad line: nothing changes, and the error names the line.
    d.write(
        "api.toml",
        &format!(
            "{CONFIG}\n[[route]]\nprefix = \"198.19.41.0/24\"\nvia = \"198.18.2.2\"\n\n[[route]]\nprefix = \"198.19.42.0/24\"\nvia = \"nowhere\"\n"
        ),
    );
    let o = dm.ctl(&["reload"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("api.toml:") && stderr(&o).contains("nowhere"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        dm.ctl(&["route", "show", "198.19.41.0/24"]).status.code(),
        Some(1)
    );
    assert_eq!(
        dm.ctl(&["route", "show", "198.19.40.0/24"]).status.code(),
        Some(0)
    );
    // A change that cannot be live: refused, naming the key.
    d.write(
        "api.toml",
        &CONFIG.replace("buffers = 4096", "buffers = 8192"),
    );
    let o = dm.ctl(&["reload"]);
    assert!(stderr(&o).contains("`buffers`"), "{}", stderr(&o));
    // SIGHUP reloads too: the file without 198.19.40.0/24 removes it.
    d.write("api.toml", CONFIG);
    dm.signal(libc::SIGHUP);
    let t0 = Instant::now();
    while dm
        .ctl(&["route", "show", "198.19.40.0/24"])
        .status
        .success()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "SIGHUP did not reload:\n{}",
            dm.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(dm.logs().contains("reloaded"), "{}", dm.logs());
    // A second prefix on out0, live: the FIB and show interfaces follow, traffic goes on.
    d.write(
        "api.toml",
        &CONFIG.replace(
            "ip4 = [\"198.18.2.1/24\"]",
            "ip4 = [\"198.18.2.1/24\", \"198.18.5.1/24\"]",
        ),
    );
    let answer = dm.ctl_ok(&["reload"]);
    assert!(answer.contains("addresses"), "{answer}");
    let fib = dm.ctl_ok(&["show", "ip", "fib", "198.18.5.7"]);
    assert!(
        fib.contains("198.18.5.0/24") && fib.contains("connected"),
        "{fib}"
    );
    let ifs = dm.ctl_json(&["show", "interfaces"]);
    assert_eq!(
        ifs["interfaces"][1]["ip4"],
        serde_json::json!(["198.18.2.1/24", "198.18.5.1/24"]),
        "{ifs}"
    );
    let tx = tx_packets(&dm);
    std::thread::sleep(Duration::from_millis(200));
    assert!(tx_packets(&dm) > tx, "forwarding goes on");
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn metrics_pass_promtool_and_count_packets() {
    if !tool("curl") || !tool("promtool") {
        return;
    }
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    std::thread::sleep(Duration::from_millis(200));
    let (st, text) = curl(&dm.socket, "GET", "/metrics", None);
    assert_eq!(st, 200);
    assert!(
        text.contains("vecplane_port_tx_packets_total{port=\"out0\",driver=\"memory\"}"),
        "{text}"
    );
    let file = d.write("metrics.txt", &text);
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", file.display()))
        .output()
        .expect("promtool");
    assert!(
        o.status.success() && stdout(&o).trim().is_empty() && stderr(&o).trim().is_empty(),
        "promtool: {}{}",
        stdout(&o),
        stderr(&o)
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

/// A child process killed and reaped when dropped (also when the test fails).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for a test).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn a_real_prometheus_scrapes_the_packet_counters() {
    if !tool("curl") || !tool("prometheus") {
        return;
    }
    let d = TempDir::new();
    let token = d.write("api.token", "prometheus-scrape-token-0123\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let cfg = d.write(
        "api.toml",
        &format!("[api]\ntcp = \"127.0.0.1:0\"\ntoken-file = \"api.token\"\n{CONFIG}"),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let logs = dm.logs();
    let target = logs
        .split("API also on http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no TCP address in the logs:\n{logs}"))
        .to_string();
    let prom_cfg = d.write(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vecplane\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{target}']\n",
            token.display()
        ),
    );
    let web = format!("127.0.0.1:{}", free_port());
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", prom_cfg.display()))
        .arg(format!("--storage.tsdb.path={}", d.path("tsdb").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(d.path("prometheus.log")).expect("log file"))
        .spawn()
        .expect("prometheus starts");
    let prom = KillOnDrop(prom);
    // Query until a scrape has landed (bounded).
    let query = format!(
        "http://{web}/api/v1/query?query=vecplane_port_tx_packets_total%7Bport%3D%22out0%22%7D"
    );
    let t0 = Instant::now();
    let mut last;
    let value = loop {
        let o = Command::new("curl")
            .args(["-s", "-m", "5", &query])
            .output()
            .expect("curl");
        last = stdout(&o);
        let v = json_of(&last);
        if let Some(x) = v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
        {
            break x;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            break -1.0;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    drop(prom);
    assert!(
        value > 0.0,
        "Prometheus has no vecplane packet counter: {last}\n{}",
        std::fs::read_to_string(d.path("prometheus.log")).unwrap_or_default()
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn show_ip_fib_shows_routes_the_api_changed() {
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    dm.ctl_ok(&["route", "add", "198.19.77.0/24", "via", "198.18.2.2"]);
    let fib = dm.ctl_ok(&["show", "ip", "fib", "198.19.77.9"]);
    assert!(fib.contains("198.19.77.0/24"), "{fib}");
    dm.ctl_ok(&["route", "del", "198.19.77.0/24"]);
    let fib = dm.ctl_ok(&["show", "ip", "fib", "198.19.77.9"]);
    assert!(
        !fib.contains("198.19.77.0/24") && fib.contains("198.19.0.0/16"),
        "{fib}"
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn a_large_fib_is_listed_in_pages_and_printed_as_one_document() {
    if !tool("curl") {
        return;
    }
    let d = TempDir::new();
    // 25,000 routes from a route file: three pages of at most 10,000.
    let mut routes = String::new();
    for i in 0..25_000u32 {
        routes.push_str(&format!(
            "198.19.{}.{}/32 via 198.18.2.2\n",
            i / 256,
            i % 256
        ));
    }
    d.write("routes.txt", &routes);
    let cfg = d.write(
        "api.toml",
        &format!("route-file = \"routes.txt\"\n{CONFIG}"),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    // The daemon answers one page at a time.
    let page = dm.ctl_json(&["show", "ip", "fib", "limit", "10000"]);
    assert_eq!(page["total"], 25_003, "{}", page["total"]);
    assert_eq!(page["entries"].as_array().map(Vec::len), Some(10_000));
    assert!(page["next"].is_string(), "{}", page["next"]);
    // ctl follows `next` and prints one document, exactly as pretty-printing the whole would.
    let o = dm.ctl(&["--json", "show", "ip", "fib"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let doc = json_of(&text);
    let entries = doc["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 25_003);
    assert_eq!(doc["next"], Value::Null);
    assert_eq!(
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        text
    );
    // In prefix order, each once: the connected /24s first, then the /16 route and the /32s.
    let prefixes: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["prefix"].as_str())
        .collect();
    let mut unique = prefixes.clone();
    unique.dedup();
    assert_eq!(unique.len(), prefixes.len());
    assert_eq!(prefixes[0], "198.18.1.0/24");
    // Over HTTP: the same pages.
    let (code, body) = curl(
        &dm.socket,
        "GET",
        "/v1/fib/ipv4?after=198.19.0.0/16&limit=2",
        None,
    );
    assert_eq!(code, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["entries"][0]["prefix"], "198.19.0.0/32", "{body}");
    assert_eq!(v["next"], "198.19.0.1/32", "{body}");
    let (code, body) = curl(&dm.socket, "GET", "/v1/fib/ipv4?limit=0", None);
    assert_eq!(code, 400, "{body}");
    // Text stays one screenful and says how to go on.
    let t = dm.ctl_ok(&["show", "ip", "fib"]);
    assert!(t.lines().count() <= 1003, "{}", t.lines().count());
    assert!(t.contains("more entries"), "{t}");
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn route_show_follows_the_pages_past_ten_thousand_routes() {
    let d = TempDir::new();
    // 25,000 routes from a route file, and the config's one: three pages of at most 10,000.
    let mut routes = String::new();
    for i in 0..25_000u32 {
        routes.push_str(&format!(
            "198.19.{}.{}/32 via 198.18.2.2\n",
            i / 256,
            i % 256
        ));
    }
    d.write("routes.txt", &routes);
    let cfg = d.write(
        "api.toml",
        &format!("route-file = \"routes.txt\"\n{CONFIG}"),
    );
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    // Text: every route once, in prefix order.
    let text = dm.ctl_ok(&["route", "show"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 25_001, "{:?}", lines.last());
    assert_eq!(lines[0], "198.19.0.0/16 via 198.18.2.2");
    assert_eq!(lines[25_000], "198.19.97.167/32 via 198.18.2.2");
    let mut unique = lines.clone();
    unique.dedup();
    assert_eq!(unique.len(), lines.len());
    // JSON: one document, exactly as pretty-printing the whole listing would.
    let o = dm.ctl(&["--json", "route", "show"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let doc = json_of(&out);
    assert_eq!(doc["routes"].as_array().map(Vec::len), Some(25_001));
    assert_eq!(doc["total"], 25_001);
    assert_eq!(doc["family"], "ipv4");
    assert_eq!(doc["next"], Value::Null);
    assert_eq!(
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        out
    );
    // A family without routes is an empty document, not an error.
    let o = dm.ctl(&["--json", "route", "show", "ipv6"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json_of(&stdout(&o));
    assert_eq!(doc["routes"], json!([]));
    assert_eq!(
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        stdout(&o)
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

#[test]
fn policies_and_port_mtus_are_read_and_changed_live_through_the_api() {
    if !tool("curl") {
        return;
    }
    let d = TempDir::new();
    let cfg = d.write("api.toml", CONFIG);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    dm.wait_ready();
    let (code, body) = curl(&dm.socket, "GET", "/v1/policies", None);
    assert_eq!(code, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["poll-mode"], serde_json::json!(["adaptive"]), "{body}");
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/policies",
        Some(r#"{"poll-mode": "busy", "icmp-errors-per-second": 5}"#),
    );
    assert_eq!(code, 200, "{body}");
    let rt = dm.ctl_json(&["show", "runtime"]);
    assert_eq!(rt["workers"][0]["poll_mode"], "busy", "{rt}");
    // One bad value: nothing changes, the field is named.
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/policies",
        Some(r#"{"poll-mode": "adaptive", "icmp-errors-burst": -3}"#),
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        json_of(&body)["error"]["field"],
        "icmp-errors-burst",
        "{body}"
    );
    let (_, body) = curl(&dm.socket, "GET", "/v1/policies", None);
    let v = json_of(&body);
    assert_eq!(v["poll-mode"], serde_json::json!(["busy"]), "{body}");
    assert_eq!(v["icmp-errors-per-second"], 5, "{body}");
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/policies",
        Some(r#"{"workers": 4}"#),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("unknown field `workers`"), "{body}");
    // The same through ctl.
    dm.ctl_ok(&["policy", "set", "poll-mode", "adaptive"]);
    let shown = dm.ctl_ok(&["policy", "show"]);
    assert_eq!(
        json_of(&shown)["poll-mode"],
        serde_json::json!(["adaptive"]),
        "{shown}"
    );
    let o = dm.ctl(&["policy", "set", "poll-sleep-max-us", "1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("(field poll-sleep-max-us)"),
        "{}",
        stderr(&o)
    );
    // A port's MTU, live.
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/out0",
        Some(r#"{"mtu": 1280}"#),
    );
    assert_eq!(code, 200, "{body}");
    let ifs = dm.ctl_json(&["show", "interfaces"]);
    assert_eq!(ifs["interfaces"][1]["mtu"], 1280, "{ifs}");
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/out0",
        Some(r#"{"mtu": 50}"#),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("68..=9000"), "{body}");
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/nope",
        Some(r#"{"mtu": 1500}"#),
    );
    assert_eq!(code, 404, "{body}");
    // Its own addresses, live: a second prefix, then refusals that change nothing.
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/out0",
        Some(r#"{"ip4": ["198.18.2.1/24", "198.18.6.1/24"]}"#),
    );
    assert_eq!(code, 200, "{body}");
    let fib = dm.ctl_ok(&["show", "ip", "fib", "198.18.6.7"]);
    assert!(fib.contains("198.18.6.0/24"), "{fib}");
    for (patch, status, says) in [
        (
            r#"{"ip4": ["198.18.1.9/24"]}"#,
            400,
            "overlaps 198.18.1.1/24",
        ),
        (r#"{"ip4": ["198.18.6.0/24"]}"#, 400, "network address"),
        (
            r#"{"ip4": ["2001:db8:7::1/64"]}"#,
            400,
            "not an IPv4 address",
        ),
    ] {
        let (code, body) = curl(&dm.socket, "PATCH", "/v1/interfaces/out0", Some(patch));
        assert_eq!(code, status, "{patch}: {body}");
        assert!(body.contains(says), "{patch}: {body}");
    }
    // The static neighbour 198.18.2.2 keeps a subnet of out0 holding it (as in the config).
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/out0",
        Some(r#"{"ip4": ["198.18.6.1/24"]}"#),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("static neighbour 198.18.2.2 is not on a subnet of port `out0`"),
        "{body}"
    );
    // A route through 198.18.2.200 keeps 198.18.2.128/25 on out0.
    dm.ctl_ok(&["route", "add", "198.19.77.0/24", "via", "198.18.2.200"]);
    let (code, body) = curl(
        &dm.socket,
        "PATCH",
        "/v1/interfaces/out0",
        Some(r#"{"ip4": ["198.18.2.1/25", "198.18.6.1/24"]}"#),
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("198.18.2.200"), "{body}");
    let ifs = dm.ctl_json(&["show", "interfaces"]);
    assert_eq!(
        ifs["interfaces"][1]["ip4"],
        serde_json::json!(["198.18.2.1/24", "198.18.6.1/24"]),
        "{ifs}"
    );
    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
}

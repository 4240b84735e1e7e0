//! End-to-end tests of the `vecplane` binary: config errors, `ctl` against a live daemon (memory
//! ports), pcap runs that end by themselves, and signals. Each test uses its own temp dir and socket.
//! Addresses come from 198.18.0.0/15 and 2001:db8::/32 only.

use packet::headers::{build_udp_frame, UdpFrameSpec};
use serde_json::Value;
use std::net::IpAddr;
use std::path::Path;

use std::time::{Duration, Instant};

mod support;
use support::{run, stderr, stdout, Daemon, TempDir};

// --- pcap files (classic format, little endian) ----------------------------------------------

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&0i32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        b.extend_from_slice(&(i as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() >= 24, "{} has no pcap header", path.display());
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    assert!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "{}: unexpected magic {magic:#x}",
        path.display()
    );
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    out
}

fn mac(s: &str) -> [u8; 6] {
    packet::headers::parse_mac(s).unwrap()
}

fn udp(dst_mac: &str, src_mac: &str, src: &str, dst: &str, sport: u16) -> Vec<u8> {
    build_udp_frame(&UdpFrameSpec {
        dst_mac: mac(dst_mac),
        src_mac: mac(src_mac),
        vlan: None,
        src_ip: src.parse::<IpAddr>().unwrap(),
        dst_ip: dst.parse::<IpAddr>().unwrap(),
        src_port: sport,
        dst_port: 4789,
        ttl: 64,
        frame_size: 128,
    })
}

// --- config errors (no data plane needed) ----------------------------------------------------

#[test]
fn bad_config_exits_2_with_file_and_line() {
    let d = TempDir::new();
    let cfg = d.write(
        "bad.toml",
        "[dataplane]\nbuffers = 16384\n\n[[port]]\nname = \"in0\"\ndriver = \"pcap\"\nmac = \"zz:00\"\n\
         [[route]]\nprefix = \"198.18.2.1/24\"\naction = \"drop\"\n",
    );
    let sock = d.path("s.sock");
    let o = run(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    let file = cfg.display().to_string();
    assert!(
        e.contains(&format!(
            "{file}:7: [[port]] #1 field `mac`: `zz:00` is not a MAC address; accepted: six hex octets"
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!("{file}:9: [[route]] #1 field `prefix`"))
            && e.contains("did you mean 198.18.2.0/24?"),
        "{e}"
    );
    assert!(e.contains("2 problems"), "{e}");
    assert!(!sock.exists(), "nothing may be started on a config error");
    assert!(stdout(&o).is_empty());
}

#[test]
fn syntax_error_exits_2_with_line() {
    let d = TempDir::new();
    let cfg = d.write("bad.toml", "[[port]]\nname = \"in0\"\ndriver = pcap\n");
    let o = run(&["run", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:3: TOML syntax error", cfg.display())),
        "{}",
        stderr(&o)
    );
}

#[test]
fn missing_rx_capture_exits_2_with_line() {
    let d = TempDir::new();
    let cfg = d.write(
        "r.toml",
        "[[port]]\nname = \"in0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:01:01\"\nrx = \"nothere.pcap\"\n",
    );
    let o = run(&["run", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "{}:5: [[port]] #1 field `rx`: cannot open",
            cfg.display()
        )),
        "{e}"
    );
}

#[test]
fn missing_config_file_exits_2() {
    let o = run(&["run", "--config", "/nonexistent/vecplane.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/vecplane.toml: cannot read the config file"));
}

#[test]
fn ctl_without_daemon_explains() {
    let d = TempDir::new();
    let sock = d.path("none.sock");
    let o = run(&["ctl", "--socket", sock.to_str().unwrap(), "show", "runtime"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(&format!(
            "cannot connect to {}: is `vecplane run` running?",
            sock.display()
        )),
        "{}",
        stderr(&o)
    );
}

// --- with a running data plane ---------------------------------------------------------------

const MEMORY: &str = r#"
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

#[test]
fn memory_run_answers_ctl() {
    let d = TempDir::new();
    let cfg = d.write("mem.toml", MEMORY);
    let stats = d.path("stats.json");
    // No --seconds: the test decides when the run ends (SIGINT), so a slow machine cannot make the
    // daemon leave before the queries are done.
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    dm.wait_ready();

    let rt = dm.ctl_ok(&["show", "runtime"]);
    assert!(rt.starts_with("Time ") && rt.contains("in0-rx"), "{rt}");
    let j = dm.ctl_json(&["show", "runtime"]);
    assert!(j["workers"][0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["name"] == "in0-rx"));

    let ifs = dm.ctl_json(&["show", "interfaces"]);
    assert_eq!(ifs["interfaces"][0]["name"], "in0");
    assert_eq!(ifs["interfaces"][0]["driver"], "memory");
    assert!(
        ifs["interfaces"][0]["rx_packets"].as_u64().unwrap() > 0,
        "{ifs}"
    );
    // `--json` also works after the words.
    let o = dm.ctl(&["show", "interfaces", "--json"]);
    assert!(o.status.success());
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["interfaces"][1]["name"], "out0");

    let fib = dm.ctl_ok(&["show", "ip", "fib", "198.19.0.7"]);
    assert!(
        fib.contains("198.19.0.0/16") && fib.contains("02:00:00:00:02:02"),
        "{fib}"
    );

    let t = dm.ctl_ok(&["trace", "add", "in0-rx", "3"]);
    assert!(t.contains("tracing the next 3 packets"), "{t}");
    let t0 = Instant::now();
    let mut trace = String::new();
    while t0.elapsed() < Duration::from_secs(3) {
        trace = dm.ctl_ok(&["show", "trace"]);
        if trace.contains("Packet ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        trace.contains("Packet ") && trace.contains("in0-rx"),
        "{trace}"
    );
    let tj = dm.ctl_json(&["show", "trace"]);
    assert!(!tj["workers"][0]["packets"].as_array().unwrap().is_empty());

    let e = dm.ctl(&["trace", "add", "ip4-lookup", "3"]);
    assert_eq!(e.status.code(), Some(1));
    assert!(
        stderr(&e).contains("not an input node; accepted: in0-rx"),
        "{}",
        stderr(&e)
    );
    let e = dm.ctl(&["show", "bogus"]);
    assert_eq!(e.status.code(), Some(1));
    assert!(
        stderr(&e).contains("accepted commands: help"),
        "{}",
        stderr(&e)
    );

    dm.ctl_ok(&["clear", "interfaces"]);
    dm.ctl_ok(&["clear", "runtime"]);
    dm.ctl_ok(&["clear", "errors"]);
    dm.ctl_ok(&["clear", "trace"]);

    // A second daemon on the same socket is refused.
    let o = run(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--socket",
        dm.socket.to_str().unwrap(),
        "--seconds",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already listening"), "{}", stderr(&o));

    dm.signal(libc::SIGINT);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    assert!(!dm.socket.exists(), "socket removed at exit");
    let logs = dm.logs();
    assert!(
        logs.contains("vecplane: running") && logs.contains("stopped (signal)"),
        "{logs}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert!(s["ports"][1]["tx_packets"].as_u64().unwrap() > 0, "{s}");
    assert!(s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["name"] == "in0-rx"));
    assert!(s["pool"]["buffers"].as_u64().unwrap() > 0);
}

#[test]
fn sigterm_stops_cleanly() {
    let d = TempDir::new();
    let cfg = d.write("mem.toml", MEMORY);
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    dm.wait_ready();
    dm.signal(libc::SIGTERM);
    assert_eq!(dm.wait_exit(Duration::from_secs(20)), 0, "{}", dm.logs());
    assert!(!dm.socket.exists());
    assert!(dm.logs().contains("stopped (signal)"));
    assert!(stats.exists());
}

#[test]
fn seconds_limit_ends_the_run() {
    let d = TempDir::new();
    let cfg = d.write("mem.toml", MEMORY);
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(
        &d,
        &cfg,
        &["--seconds", "1", "--stats-json", stats.to_str().unwrap()],
    );
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    assert!(dm.logs().contains("stopped (time limit)"), "{}", dm.logs());
    assert!(!dm.socket.exists());
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert!(s["ports"][0]["rx_packets"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["pool"]["buffers"], 4096);
}

/// The JSON events of a daemon's log (its other lines are not JSON).
fn json_events(logs: &str) -> Vec<Value> {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect()
}

#[test]
fn the_log_is_json_for_collectors_and_keeps_to_its_level() {
    let d = TempDir::new();
    let cfg = d.write("mem.toml", MEMORY);
    let mut dm = Daemon::start(&d, &cfg, &["--seconds", "1", "--log-format", "json"]);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    let events = json_events(&dm.logs());
    let running = events
        .iter()
        .find(|e| e["fields"]["message"] == "running")
        .unwrap_or_else(|| panic!("a `running` event: {}", dm.logs()));
    assert_eq!(running["level"], "INFO", "{running}");
    assert!(running["timestamp"].is_string(), "{running}");
    assert_eq!(running["fields"]["config"], cfg.display().to_string());
    assert!(
        events
            .iter()
            .any(|e| e["fields"]["message"] == "stopped" && e["fields"]["reason"] == "time limit"),
        "{}",
        dm.logs()
    );
    // At `warn`, no `info` event is written.
    let mut dm = Daemon::start(
        &d,
        &cfg,
        &[
            "--seconds",
            "1",
            "--log-format",
            "json",
            "--log-level",
            "warn",
        ],
    );
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    assert!(
        json_events(&dm.logs()).iter().all(|e| e["level"] != "INFO"),
        "{}",
        dm.logs()
    );
    // A format it does not know is refused, naming those it does.
    let o = run(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--log-format",
        "xml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("text, json"), "{}", stderr(&o));
}

const IN0: &str = "02:00:00:00:01:01";
const OUT0: &str = "02:00:00:00:02:01";
const HOST: &str = "02:00:00:00:01:02";
const NH: &str = "02:00:00:00:02:02";

const PCAP_ROUTER: &str = r#"
[[port]]
name = "in0"
driver = "pcap"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
ip6 = ["2001:db8:1::1/64"]
rx = "in.pcap"

[[port]]
name = "out0"
driver = "pcap"
mac = "02:00:00:00:02:01"
ip4 = ["198.18.2.1/24"]
ip6 = ["2001:db8:2::1/64"]
tx = "out.pcap"

[[neighbour]]
ip = "198.18.2.2"
mac = "02:00:00:00:02:02"
port = "out0"

[[neighbour]]
ip = "2001:db8:2::2"
mac = "02:00:00:00:02:02"
port = "out0"

[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"

[[route]]
prefix = "2001:db8:100::/48"
via = ["2001:db8:2::2"]
"#;

#[test]
fn pcap_router_run_ends_by_itself() {
    let d = TempDir::new();
    let cfg = d.write("router.toml", PCAP_ROUTER);
    let mut frames = Vec::new();
    for i in 0..10u16 {
        frames.push(udp(
            IN0,
            HOST,
            "198.18.1.2",
            &format!("198.19.0.{}", i + 1),
            1000 + i,
        ));
    }
    for i in 0..5u16 {
        frames.push(udp(
            IN0,
            HOST,
            "2001:db8:1::2",
            &format!("2001:db8:100::{}", i + 1),
            2000 + i,
        ));
    }
    write_pcap(&d.path("in.pcap"), &frames);
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    assert!(
        dm.logs().contains("stopped (all inputs finished)"),
        "{}",
        dm.logs()
    );
    assert!(!dm.socket.exists());

    // Within one vector the IPv4 and IPv6 paths reach out0-tx separately, so match each output
    // to its input by UDP source port rather than by position.
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 15);
    let sport = |f: &[u8]| -> u16 {
        let l4 = if f[12..14] == [0x08, 0x00] { 34 } else { 54 };
        u16::from_be_bytes([f[l4], f[l4 + 1]])
    };
    let mut seen = std::collections::HashSet::new();
    for o in &out {
        let f = frames
            .iter()
            .find(|f| sport(f) == sport(o) && f[12..14] == o[12..14])
            .expect("an output frame matches no input frame");
        assert!(
            seen.insert(sport(o)),
            "frame with port {} sent twice",
            sport(o)
        );
        assert_eq!(o[0..6], mac(NH), "destination MAC");
        assert_eq!(o[6..12], mac(OUT0), "source MAC");
        assert_eq!(o.len(), f.len());
        if o[12..14] == [0x08, 0x00] {
            assert_eq!(o[14 + 8], 63, "TTL");
            assert_eq!(o[14 + 12..14 + 20], f[14 + 12..14 + 20], "addresses");
            assert_eq!(o[34..], f[34..], "UDP header and payload");
        } else {
            assert_eq!(o[14 + 7], 63, "hop limit");
            assert_eq!(
                o[14 + 8..],
                f[14 + 8..],
                "addresses, UDP header and payload"
            );
        }
    }
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["ports"][0]["rx_packets"], 15, "{s}");
    assert_eq!(s["ports"][1]["tx_packets"], 15, "{s}");
    assert_eq!(s["drops_total"], 0, "{s}");
}

/// A pcap record that cannot be read (caplen above the snap length, or cut short) stops the
/// replay: the run says which file and record, counts the rx drop and exits 1, after
/// forwarding the records before it.
#[test]
fn a_bad_pcap_record_fails_the_run_and_names_its_number() {
    let d = TempDir::new();
    let cfg = d.write("router.toml", PCAP_ROUTER);
    let frames: Vec<Vec<u8>> = (0..4u16)
        .map(|i| udp(IN0, HOST, "198.18.1.2", "198.19.0.1", 1000 + i))
        .collect();
    let input = d.path("in.pcap");
    write_pcap(&input, &frames);
    let mut bytes = std::fs::read(&input).unwrap();
    // Record 3's caplen (its header starts after the file header and two records).
    let at = 24 + 2 * (16 + frames[0].len()) + 8;
    bytes[at..at + 4].copy_from_slice(&70_000u32.to_le_bytes());
    std::fs::write(&input, &bytes).unwrap();
    let stats = d.path("stats.json");
    let mut dm = Daemon::start(&d, &cfg, &["--stats-json", stats.to_str().unwrap()]);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 1, "{}", dm.logs());
    let logs = dm.logs();
    assert!(
        logs.contains("port `in0`") && logs.contains("in.pcap") && logs.contains("record 3"),
        "{logs}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["ports"][0]["rx_packets"], 2, "{s}");
    assert_eq!(s["ports"][0]["rx_drops"], 1, "{s}");
    assert!(s["ports"][0]["failure"].as_str().is_some(), "{s}");
    assert_eq!(read_pcap(&d.path("out.pcap")).len(), 2);

    // A file cut inside its last record: record 4 is named.
    write_pcap(&input, &frames);
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.truncate(bytes.len() - 5);
    std::fs::write(&input, &bytes).unwrap();
    let mut dm = Daemon::start(&d, &cfg, &[]);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 1, "{}", dm.logs());
    assert!(dm.logs().contains("record 4"), "{}", dm.logs());
}

#[test]
fn pcap_l2xc_run_rewrites_macs() {
    let d = TempDir::new();
    let cfg = d.write(
        "l2xc.toml",
        "[[port]]\nname = \"x0\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:0a:01\"\nrx = \"in.pcap\"\n\n\
         [[port]]\nname = \"x1\"\ndriver = \"pcap\"\nmac = \"02:00:00:00:0b:01\"\ntx = \"out.pcap\"\n\n\
         [[xconnect]]\nfrom = \"x0\"\nto = \"x1\"\ndst-mac = \"02:00:00:00:0b:ee\"\n",
    );
    let frames: Vec<Vec<u8>> = (0..4u16)
        .map(|i| udp("02:00:00:00:0a:01", HOST, "198.18.1.2", "198.19.0.1", i))
        .collect();
    write_pcap(&d.path("in.pcap"), &frames);
    let mut dm = Daemon::start(&d, &cfg, &[]);
    assert_eq!(dm.wait_exit(Duration::from_secs(30)), 0, "{}", dm.logs());
    let out = read_pcap(&d.path("out.pcap"));
    assert_eq!(out.len(), 4);
    for (o, f) in out.iter().zip(frames.iter()) {
        assert_eq!(o[0..6], mac("02:00:00:00:0b:ee"));
        assert_eq!(o[6..12], mac("02:00:00:00:0b:01"));
        assert_eq!(o[12..], f[12..]);
    }
}

// --- files a root daemon writes on an operator's word ----------------------------------------

/// `vecplane run` of PCAP_ROUTER with `tx` replaced by `tx`; its output and exit code.
fn run_with_tx(d: &TempDir, tx: &str, extra: &[&str]) -> std::process::Output {
    let cfg = d.write(
        "files.toml",
        &PCAP_ROUTER.replace("tx = \"out.pcap\"", &format!("tx = \"{tx}\"")),
    );
    let mut args = vec!["run", "--config", cfg.to_str().unwrap_or(""), "--socket"];
    let sock = d.path("files.sock");
    args.push(sock.to_str().unwrap_or(""));
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn outputs_never_overwrite_inputs_symlinks_or_the_config() {
    let d = TempDir::new();
    let frames = vec![udp(IN0, HOST, "198.18.1.2", "198.19.0.1", 1000)];
    write_pcap(&d.path("in.pcap"), &frames);
    let input = std::fs::read(d.path("in.pcap")).unwrap();
    std::fs::create_dir_all(d.path("sub")).unwrap();
    // The input by another spelling.
    let o = run_with_tx(&d, "sub/../in.pcap", &["--seconds", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("input of this run"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(d.path("in.pcap")).unwrap(),
        input,
        "the input is intact"
    );
    // A symlink to a file the operator may not write.
    std::fs::write(d.path("precious"), b"keep me").unwrap();
    std::os::unix::fs::symlink(d.path("precious"), d.path("link.pcap")).unwrap();
    let o = run_with_tx(&d, "link.pcap", &["--seconds", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    assert_eq!(std::fs::read(d.path("precious")).unwrap(), b"keep me");
    // --stats-json naming the config, or a missing directory: refused at start, nothing written.
    let cfg = d.path("files.toml");
    let o = run_with_tx(
        &d,
        "out.pcap",
        &["--stats-json", cfg.to_str().unwrap(), "--seconds", "1"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let after = std::fs::read_to_string(&cfg).unwrap();
    assert_eq!(after, PCAP_ROUTER, "the config is intact");
    let missing = d.path("no/such/dir/stats.json");
    let o = run_with_tx(
        &d,
        "out.pcap",
        &["--stats-json", missing.to_str().unwrap(), "--seconds", "1"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("stats.json"), "{}", stderr(&o));
    // A good run still works, and its output exists.
    let o = run_with_tx(&d, "out.pcap", &["--seconds", "5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.path("out.pcap").exists());
}

#[test]
fn a_fifo_as_pcap_input_is_refused() {
    let d = TempDir::new();
    let fifo = d.path("in.pcap");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = run_with_tx(&d, "out.pcap", &["--seconds", "2"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
}

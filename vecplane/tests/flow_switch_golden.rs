//! Golden test of the virtual switch through the `vecplane` binary: a bridge in flow mode on pcap
//! ports (tests/golden/flow/switch.toml) switches switch_input.pcap and must write exactly the
//! pcaps tests/golden/flow/make_switch_golden.py computed with scapy (output, flood, several
//! outputs, header rewrites with checksums, dec_ttl, push/pop VLAN, goto_table, resubmit, all and
//! select groups, normal, in_port), spread the hashing select group's flows over its two ports
//! without splitting a flow, count every rule's packets and every malformed frame, and crash on
//! none. A second test checks that the checked-in files are what the script writes.

#[path = "../../tests/golden/golden_support.rs"]
mod support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{compare_pcap, python_with_scapy, read_pcap, repo_root, write_pcap, TempDir};

const RUN_LIMIT: Duration = Duration::from_secs(30);
const PORTS: [&str; 6] = ["p1", "p2", "p3", "p4", "p5", "p6"];

fn flow_dir() -> PathBuf {
    repo_root(env!("CARGO_MANIFEST_DIR")).join("tests/golden/flow")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(flow_dir().join("expected_switch.json")).expect("read");
    serde_json::from_str(&text).expect("expected_switch.json is JSON")
}

/// `vecplane run --config switch.toml --stats-json stats.json` in a copy of the golden files;
/// it must end by itself (its only input is a pcap file) with status 0.
fn run_switch(dir: &TempDir) -> Value {
    run_switch_edited(dir, |c| c)
}

/// `run_switch` with the config edited by `edit` first.
fn run_switch_edited(dir: &TempDir, edit: impl Fn(String) -> String) -> Value {
    let config = std::fs::read_to_string(flow_dir().join("switch.toml")).expect("switch.toml");
    std::fs::write(dir.path("switch.toml"), edit(config)).expect("write config");
    std::fs::copy(
        flow_dir().join("switch_input.pcap"),
        dir.path("switch_input.pcap"),
    )
    .expect("copy input");
    let stats = dir.path("stats.json");
    let err = dir.path("vecplane.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vecplane"))
        .arg("run")
        .arg("--config")
        .arg(dir.path("switch.toml"))
        .arg("--stats-json")
        .arg(&stats)
        .arg("--socket")
        .arg(dir.path("vecplane.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("vecplane starts");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`vecplane run` did not end within {RUN_LIMIT:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(status.success(), "vecplane run failed ({status}):\n{log}");
    let text = std::fs::read_to_string(&stats).expect("stats written");
    serde_json::from_str(&text).expect("stats JSON")
}

/// The records of `actual` whose destination MAC is (`keep` true) or is not `mac`, written to
/// `out`.
fn split_by_mac(actual: &Path, mac: [u8; 6], keep: bool, out: &Path) -> Vec<(u64, Vec<u8>)> {
    let p = read_pcap(actual).unwrap_or_else(|e| panic!("{e}"));
    let recs: Vec<(u64, Vec<u8>)> = p
        .records
        .iter()
        .filter(|r| (r.data.get(..6) == Some(&mac[..])) == keep)
        .map(|r| (r.ts, r.data.clone()))
        .collect();
    let refs: Vec<(u64, &[u8])> = recs.iter().map(|(t, d)| (*t, d.as_slice())).collect();
    write_pcap(out, &refs).expect("write filtered pcap");
    recs
}

fn mac_of(text: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, h) in m.iter_mut().zip(text.split(':')) {
        *b = u8::from_str_radix(h, 16).expect("MAC in expected_switch.json");
    }
    m
}

#[test]
fn flow_switch_golden_through_vecplane_run() {
    let want = expected();
    let dir = TempDir::new("flow-golden");
    let stats = run_switch(&dir);
    let sel = mac_of(want["select_mac"].as_str().expect("select_mac"));

    // 1. Every port's output, byte for byte (the hashing select group's frames apart).
    let mut failures = Vec::new();
    let mut selected: BTreeMap<u64, &str> = BTreeMap::new();
    let mut select_records = Vec::new();
    for p in PORTS {
        let actual = dir.path(&format!("{p}.out.pcap"));
        if !actual.exists() {
            failures.push(format!("vecplane did not write {p}.out.pcap"));
            continue;
        }
        let rest = dir.path(&format!("{p}.rest.pcap"));
        split_by_mac(&actual, sel, false, &rest);
        let picked = split_by_mac(&actual, sel, true, &dir.path(&format!("{p}.sel.pcap")));
        for (ts, data) in picked {
            if selected.insert(ts, p).is_some() {
                failures.push(format!("select group: frame {ts} left twice"));
            }
            select_records.push((ts, data));
        }
        let golden = flow_dir().join(format!("expected_switch_{p}.pcap"));
        match compare_pcap(&golden, &rest, &dir.0) {
            Ok(_) => println!("{p}: as expected_switch_{p}.pcap"),
            Err(e) => failures.push(e),
        }
    }
    // 2. The select group: each flow wholly on one of its buckets' ports (p5, p6), both used,
    // every frame unchanged.
    let input = read_pcap(&flow_dir().join("switch_input.pcap")).expect("input");
    let by_ts: BTreeMap<u64, &[u8]> = input
        .records
        .iter()
        .map(|r| (r.ts, r.data.as_slice()))
        .collect();
    let mut used = BTreeSet::new();
    for flow in want["select_flows"].as_array().expect("select_flows") {
        let ports: BTreeSet<Option<&&str>> = flow
            .as_array()
            .expect("flow")
            .iter()
            .map(|ts| selected.get(&ts.as_u64().expect("ts")))
            .collect();
        match ports.iter().next() {
            Some(Some(p)) if ports.len() == 1 && (**p == "p5" || **p == "p6") => {
                used.insert(**p);
            }
            _ => failures.push(format!("select flow {flow}: left by {ports:?}")),
        }
    }
    for (ts, data) in &select_records {
        if by_ts.get(ts) != Some(&data.as_slice()) {
            failures.push(format!("select group: frame {ts} changed"));
        }
    }
    if used.len() != 2 {
        failures.push(format!(
            "select group: 24 flows over two buckets all went to {used:?}"
        ));
    }
    // 3. Counters: each rule's packets, malformed frames by reason, rx.
    let bridge = &stats["flows"][0];
    let rules: BTreeMap<String, (u64, String)> = bridge["rules"]
        .as_array()
        .expect("rules in the stats")
        .iter()
        .map(|r| {
            (
                r["cookie"].as_str().unwrap_or("").to_string(),
                (
                    r["n_packets"].as_u64().unwrap_or(u64::MAX),
                    r["text"].as_str().unwrap_or("").to_string(),
                ),
            )
        })
        .collect();
    for (cookie, rule) in want["rules"].as_object().expect("rules") {
        let n = rule["n_packets"].as_u64();
        match rules.get(cookie) {
            Some((got, _)) if Some(*got) == n => {}
            got => failures.push(format!(
                "rule {} (cookie {cookie}): {got:?}, expected n_packets {n:?}",
                rule["name"]
            )),
        }
    }
    if bridge["malformed"] != want["malformed"] {
        failures.push(format!(
            "malformed frames: {}, expected {}",
            bridge["malformed"], want["malformed"]
        ));
    }
    let rx: u64 = stats["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["rx_packets"].as_u64())
        .sum();
    if Some(rx) != want["rx_packets"].as_u64() {
        failures.push(format!("rx {rx}, expected {}", want["rx_packets"]));
    }
    let runts = stats["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["node"] == "ethernet-input" && e["reason"] == "runt")
        .and_then(|e| e["count"].as_u64());
    if runts != Some(1) {
        failures.push(format!(
            "the runt: ethernet-input/runt {runts:?}, expected 1"
        ));
    }
    assert!(
        failures.is_empty(),
        "{}\n--- stats\n{}",
        failures.join("\n\n"),
        serde_json::to_string_pretty(&stats).unwrap_or_default()
    );
}

/// Open vSwitch's dump-flows (OpenFlow 1.3) prints `mod_vlan_vid:100` on an untagged match as
/// `push_vlan:0x8100,set_field:4196->vlan_vid`; that spelling must be accepted and do the same.
#[test]
fn set_field_vlan_vid_as_ovs_prints_it_pushes_the_same_tag() {
    let dir = TempDir::new("flow-golden-vid");
    let from = "mod_vlan_vid:100,mod_vlan_pcp:5";
    run_switch_edited(&dir, |c| {
        assert!(c.contains(from), "switch.toml has the push rule");
        c.replace(from, "set_field:4196->vlan_vid,set_field:5->vlan_pcp")
    });
    let sel = mac_of(expected()["select_mac"].as_str().expect("select_mac"));
    let rest = dir.path("p5.rest.pcap");
    split_by_mac(&dir.path("p5.out.pcap"), sel, false, &rest);
    compare_pcap(&flow_dir().join("expected_switch_p5.pcap"), &rest, &dir.0)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn flow_switch_golden_files_are_what_the_script_writes() {
    let py = match python_with_scapy() {
        Ok(p) => p,
        Err(why) => {
            testenv::skip(&why);
            return;
        }
    };
    let dir = TempDir::new("flow-golden-regen");
    let out = Command::new(&py)
        .arg(flow_dir().join("make_switch_golden.py"))
        .arg("--out")
        .arg(&dir.0)
        .output()
        .expect("the script runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut stale = Vec::new();
    let mut files = vec![
        "switch.toml".to_string(),
        "switch_input.pcap".to_string(),
        "expected_switch.json".to_string(),
    ];
    files.extend(PORTS.iter().map(|p| format!("expected_switch_{p}.pcap")));
    for f in &files {
        let fresh = std::fs::read(dir.path(f)).unwrap_or_default();
        let kept = std::fs::read(flow_dir().join(f)).unwrap_or_default();
        if fresh != kept {
            stale.push(f.clone());
        }
    }
    assert!(
        stale.is_empty(),
        "tests/golden/flow/{stale:?} differ from what make_switch_golden.py writes; rerun \
         `/usr/bin/python3 tests/golden/flow/make_switch_golden.py` and commit the result"
    );
}

/// examples/flow-switch.toml is a valid config: `vecplane run` gets past the config (exit 2 is
/// a config problem); without root it stops at creating its TAP ports (tests/examples.rs runs
/// every example for real).
#[test]
fn example_flow_switch_config_is_valid() {
    let example = repo_root(env!("CARGO_MANIFEST_DIR")).join("examples/flow-switch.toml");
    let dir = TempDir::new("flow-example");
    let o = Command::new(env!("CARGO_BIN_EXE_vecplane"))
        .arg("run")
        .arg("--config")
        .arg(&example)
        .arg("--socket")
        .arg(dir.path("vecplane.sock"))
        .arg("--seconds")
        .arg("1")
        .output()
        .expect("vecplane runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(2), "a config problem: {err}");
    if !o.status.success() {
        assert!(
            err.contains("vp-p1"),
            "it stops at the interfaces only: {err}"
        );
    }
}

//! End-to-end tests of `vecplane plan`: help, the text and JSON answers for a profile written
//! by `planner::profile::record` (as the bench writes it), errors for bad input naming the flag,
//! contradictions, the built-in profile on a host without one (saying so), and a missing
//! `--profile` file naming the bench command that makes one.
//! No data plane, no root; each test uses its own temp dir.

use planner::profile::{self, Cost, CostPath, HostFacts, Protocol};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;
use support::{stderr, stdout, TempDir, BIN};

/// 2 GHz; IPv4 megaflow hit 200, EMC hit 100, miss 2000 cycles at 64 and 1518 B; VXLAN encap +50.
/// No pollution cost, as in a profile written before the churn bench measured it.
fn write_profile(d: &TempDir) -> PathBuf {
    write_profile_with(d, None)
}

/// The same, with a pollution cost at 64 B if given.
fn write_profile_with(d: &TempDir, pollution: Option<f64>) -> PathBuf {
    let file = d.path("state/profile.json");
    let host = HostFacts {
        tsc_hz: 2_000_000_000,
        cpu_model: profile::cpu_model(),
        date: "2026-11-01T10:00:00Z".into(),
        commit: Some("abc1234".into()),
    };
    let c = |path, frame_size, cycles_per_packet| Cost {
        path,
        protocol: Protocol::Ipv4,
        frame_size,
        cycles_per_packet,
        scenario: "flows".into(),
        flows: Some(1000),
        date: "2026-11-01T10:00:00Z".into(),
    };
    let costs = [
        c(CostPath::EmcHit, 64, 100.0),
        c(CostPath::EmcHit, 1518, 100.0),
        c(CostPath::MegaflowHit, 64, 200.0),
        c(CostPath::MegaflowHit, 1518, 200.0),
        c(CostPath::Miss, 64, 2000.0),
        c(CostPath::Miss, 1518, 2000.0),
        c(CostPath::VxlanEncap, 64, 50.0),
        c(CostPath::VxlanEncap, 1518, 50.0),
    ];
    let mut costs = costs.to_vec();
    if let Some(cpp) = pollution {
        costs.push(c(CostPath::Pollution, 64, cpp));
    }
    profile::record(Some(&file), host, &costs).expect("record the profile");
    file
}

fn plan(args: &[&str], profile: Option<&Path>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("plan").args(args);
    if let Some(p) = profile {
        cmd.arg("--profile").arg(p);
    }
    cmd.output().expect("run vecplane plan")
}

#[test]
fn help_says_the_model_and_the_imix() {
    let o = plan(&["--help"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let h = stdout(&o);
    for want in [
        "--rate",
        "--frame-mix",
        "--hit-ratio",
        "--new-flows-per-second",
        "--vxlan",
        "--ipv6",
        "--profile",
        "--json",
        "--explain",
        "IMIX here is 7:4:1 of 64, 576 and 1500-byte Ethernet frames",
        "misses M = (1 - h) x R",
        "cores = ceil(C x R / (TSC Hz x usable share))",
        "~/.local/state/vecplane/profile.json",
    ] {
        assert!(h.contains(want), "help lacks {want:?}:\n{h}");
    }
    let o = Command::new(BIN).arg("--help").output().expect("run");
    assert!(stdout(&o).contains("plan"), "{}", stdout(&o));
}

#[test]
fn json_answer_has_cores_parts_and_limit() {
    let d = TempDir::new();
    let p = write_profile(&d);
    let o = plan(
        &[
            "--rate",
            "10Mpps",
            "--frame-mix",
            "64",
            "--hit-ratio",
            "0.75",
            "--new-flows-per-second",
            "1M",
            "--json",
            "--explain",
        ],
        Some(&p),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
    // 0.75 x 200 + 0.25 x 2000 = 650 cycles; 6.5 G/s over 1.6 G usable per core = 4.06 -> 5.
    assert_eq!(v["cycles_per_packet"].as_f64(), Some(650.0));
    assert_eq!(v["cycles_per_second"].as_f64(), Some(6.5e9));
    assert_eq!(v["cores"].as_u64(), Some(5));
    assert!((v["cores_exact"].as_f64().expect("exact") - 4.0625).abs() < 1e-9);
    assert_eq!(v["tsc_hz"].as_u64(), Some(2_000_000_000));
    assert_eq!(v["rate_pps"].as_f64(), Some(1e7));
    assert_eq!(v["misses_per_second"].as_f64(), Some(2.5e6));
    assert_eq!(v["new_flows_per_second"].as_f64(), Some(1e6));
    assert_eq!(v["repeat_misses_per_second"].as_f64(), Some(1.5e6));
    assert_eq!(v["limit"]["path"], "miss");
    assert_eq!(v["limit"]["text"], "misses take 76.9% of the cycles");
    let parts = v["parts"].as_array().expect("parts");
    let names: Vec<&str> = parts.iter().filter_map(|x| x["path"].as_str()).collect();
    assert_eq!(names, vec!["megaflow-hit", "miss"]);
    for k in [
        "packet_share",
        "packets_per_second",
        "cycles_per_packet",
        "cycles_per_second",
        "cycle_share",
        "sizes",
    ] {
        assert!(parts[0].get(k).is_some(), "a part lacks {k}");
    }
    assert_eq!(v["profile"]["path"], p.display().to_string());
    assert_eq!(v["profile"]["commit"], "abc1234");
    assert_eq!(v["inputs"]["protocol"], "ipv4");
    assert_eq!(
        v["inputs"]["rate"]["packets_per_second"].as_f64(),
        Some(1e7)
    );
    // The old profile has no pollution: 0, said in the explanation and in a note.
    assert_eq!(v["pollution_in_profile"], false);
    assert_eq!(v["pollution_cycle_share"].as_f64(), Some(0.0));
    let explain: Vec<&str> = v["explain"]
        .as_array()
        .expect("explain")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(explain.len(), 12, "{explain:#?}");
    assert!(
        explain
            .iter()
            .any(|l| l.contains("pollution: not in the profile") && l.contains("taken as 0")),
        "{explain:#?}"
    );
    assert!(v["notes"].to_string().contains("no `pollution` cost"));
}

#[test]
fn pollution_is_priced_explained_and_counted_with_the_misses() {
    let d = TempDir::new();
    let p = write_profile_with(&d, Some(400.0));
    let args = [
        "--rate",
        "10Mpps",
        "--frame-mix",
        "64",
        "--hit-ratio",
        "0.75",
        "--explain",
    ];
    let o = plan(&[&args[..], &["--json"]].concat(), Some(&p));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
    // 0.75 x 200 + 0.25 x 2000 + 0.75 x 0.25 x 400 = 725 cycles/packet.
    assert_eq!(v["cycles_per_packet"].as_f64(), Some(725.0));
    assert_eq!(v["pollution_in_profile"], true);
    let share = v["pollution_cycle_share"].as_f64().expect("share");
    assert!((share - 75.0 / 725.0).abs() < 1e-12, "{share}");
    let parts = v["parts"].as_array().expect("parts");
    let pol = parts
        .iter()
        .find(|x| x["path"] == "pollution")
        .expect("a pollution part");
    assert_eq!(pol["cycle_share"].as_f64(), Some(share));
    assert_eq!(v["limit"]["path"], "miss");
    assert_eq!(
        v["limit"]["text"],
        "misses take 79.3% of the cycles (69.0% missing, 10.3% in the hits they pollute)"
    );
    let o = plan(&args, Some(&p));
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    for want in [
        "   pollution: 64 B 400.00 (measured); mix: 1.0000 x 400.00 = 400.00 per unit of h (1 - h); \
         each hit pays (1 - 0.7500) x 400.00 = 100.00",
        "0.7500 x 0.2500 x 400.00 (cache pollution by misses: hits x miss share)",
        "= 150.00 + 500.00 + 75.00 = 725.00",
        "8. misses: (500.00 + 75.00 of pollution) / 725.00 = 79.3% of the cycles",
        "| pollution (on hits)",
    ] {
        assert!(t.contains(want), "output lacks {want:?}:\n{t}");
    }
    assert!(!t.contains("no `pollution` cost"), "{t}");
}

#[test]
fn text_answer_has_a_table_and_explains() {
    let d = TempDir::new();
    let p = write_profile(&d);
    let o = plan(
        &[
            "--rate",
            "10Gbit/s",
            "--frame-mix",
            "imix",
            "--new-flows-per-second",
            "100k",
            "--vxlan",
            "encap",
            "--emc-share",
            "50%",
            "--explain",
        ],
        Some(&p),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    // 10 Gbit/s of IMIX (374.33 B on the wire) = 3,339,270 pps; 100k new flows/s.
    for want in [
        "1. frame mix imix: 64 B x 7",
        "2. rate 10.00 Gbit/s = 10,000,000,000 / (8 x 374.33 B) = 3,339,270 packets/s",
        "3. every new flow's first packet is a miss: misses = 100,000/s",
        "5. cycles per packet (Amdahl) = ",
        "7. cores = ceil(",
        "| part",
        "| emc-hit",
        "| megaflow-hit",
        "| miss",
        "| vxlan-encap",
        "| total",
        "of IPv4 over VXLAN (encapsulated) IMIX frames",
        "limit: ",
        "one core: ",
    ] {
        assert!(t.contains(want), "output lacks {want:?}:\n{t}");
    }
    assert!(t.contains("\ncores: "), "{t}");
}

#[test]
fn bad_input_names_the_flag_and_what_is_accepted() {
    let d = TempDir::new();
    let p = write_profile(&d);
    for (args, flag, says) in [
        (vec!["--rate", "10"], "--rate", "has no unit"),
        (vec!["--rate", "10GB/s"], "--rate", "counts bytes"),
        (
            vec!["--rate", "1Mpps", "--frame-mix", "64,1518:1"],
            "--frame-mix",
            "weight",
        ),
        (
            vec!["--rate", "1Mpps", "--hit-ratio", "2"],
            "--hit-ratio",
            "from 0 to 1",
        ),
        (
            vec!["--rate", "1Mpps", "--new-flows-per-second=-5"],
            "--new-flows-per-second",
            "0 or more",
        ),
        (
            vec!["--rate", "1Mpps", "--usable", "0"],
            "--usable",
            "above 0",
        ),
        (
            vec!["--rate", "1Mpps", "--vxlan", "sideways"],
            "--vxlan",
            "encap, decap, both",
        ),
    ] {
        let o = plan(&args, Some(&p));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(flag) && e.contains(says), "{args:?}: {e}");
        assert!(
            e.contains("accepted") || e.contains("possible values"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn contradictions_and_missing_costs_are_refused() {
    let d = TempDir::new();
    let p = write_profile(&d);
    let o = plan(
        &[
            "--rate",
            "10Mpps",
            "--hit-ratio",
            "0.75",
            "--new-flows-per-second",
            "3M",
        ],
        Some(&p),
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("vecplane plan: --new-flows-per-second 3000000 contradicts --hit-ratio 0.75")
            && e.contains("accepted: --hit-ratio at most 0.7"),
        "{e}"
    );
    let o = plan(&["--rate", "10Mpps"], Some(&p));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--hit-ratio"), "{}", stderr(&o));
    let o = plan(
        &["--rate", "10Mpps", "--hit-ratio", "0.5", "--ipv6"],
        Some(&p),
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "{}: the profile has no `megaflow-hit` cost for ipv6",
            p.display()
        )) && e.contains("no bench run measures IPv6 flow-switch costs yet"),
        "{e}"
    );
    let o = plan(
        &["--rate", "10Mpps", "--hit-ratio", "0.5", "--vxlan", "decap"],
        Some(&p),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no `vxlan-decap` cost"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn without_a_profile_the_built_in_one_answers_and_says_so() {
    let d = TempDir::new();
    // The default place under XDG_STATE_HOME, then under HOME: nothing there yet, so the
    // built-in profile answers (a fresh machine), and stderr says where this host's would go.
    for (xdg, want) in [
        (Some(d.path("xdg")), d.path("xdg/vecplane/profile.json")),
        (None, d.path("home/.local/state/vecplane/profile.json")),
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args(["plan", "--rate", "1Mpps", "--hit-ratio", "0.9", "--json"])
            .env("HOME", d.path("home"));
        match &xdg {
            Some(x) => cmd.env("XDG_STATE_HOME", x),
            None => cmd.env_remove("XDG_STATE_HOME"),
        };
        let o = cmd.output().expect("run");
        let e = stderr(&o);
        assert!(o.status.success(), "{e}");
        assert!(
            e.contains(&format!("no bench profile at {} yet", want.display()))
                && e.contains("using the built-in one")
                && e.contains("vecplane bench --scenario flows --churn"),
            "{e}"
        );
        let v: Value = serde_json::from_str(&stdout(&o)).expect("JSON");
        assert_eq!(v["profile"]["built_in"], true, "{v}");
        assert_eq!(v["profile"]["path"], "built-in", "{v}");
        assert!(v["cores"].as_u64().is_some_and(|c| c >= 1), "{v}");
        assert!(!want.exists(), "the planner never writes a profile");
    }
    // Text: the profile line names it.
    let o = Command::new(BIN)
        .args(["plan", "--rate", "1Mpps", "--hit-ratio", "0.9"])
        .env("XDG_STATE_HOME", d.path("xdg"))
        .output()
        .expect("run");
    assert!(
        stdout(&o).contains("profile built-in (none measured on this host yet at "),
        "{}",
        stdout(&o)
    );
}

#[test]
fn missing_or_broken_profile_says_how_to_make_one() {
    let d = TempDir::new();
    // A profile named with --profile must exist: no fallback to the built-in one.
    let want = d.path("none/profile.json");
    let o = plan(&["--rate", "1Mpps", "--hit-ratio", "0.9"], Some(&want));
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}: no bench profile here", want.display()))
            && e.contains("vecplane bench --scenario flows")
            && e.contains("--profile FILE"),
        "{e}"
    );
    let bad = d.write(
        "bad.json",
        "{\n  \"format\": \"vecplane-profile/1\",\n  \"costs\": 7\n}\n",
    );
    let o = plan(&["--rate", "1Mpps", "--hit-ratio", "0.9"], Some(&bad));
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}:3:", bad.display())) && e.contains("not a bench profile"),
        "{e}"
    );
}

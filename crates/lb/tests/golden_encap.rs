//! Golden checks of the load balancer's encapsulations against scapy:
//! - every frame of crates/lb/tests/golden/lb_input.pcap, parsed and rewritten as its line of
//!   lb_cases.txt says (L3DSR, GRE4, GRE6, NAT4/NAT6 forward and reverse, ICMP errors,
//!   fragments, MTU, malformed), must equal byte for byte the frame of lb_expected.pcap, which
//!   scapy built from scratch with its own checksums (no scapy needed for this check);
//! - the checked-in files are what make_lb_golden.py writes now (needs scapy).
//!
//! Without scapy the scapy test skips with a message; under CI=true it fails.

#[path = "../../../tests/golden/golden_support.rs"]
mod support;

use lb::encap::{self, EncapError};
use lb::parse::parse;
use packet::BufferMeta;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use support::{read_pcap, run_ok, scapy_or_skip, TempDir};

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let p = read_pcap(path).unwrap_or_else(|e| panic!("{e}"));
    p.records.into_iter().map(|r| r.data).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap_or_else(|e| panic!("address {s}: {e}"))
}

fn v4(s: &str) -> [u8; 4] {
    match ip(s) {
        IpAddr::V4(a) => a.octets(),
        IpAddr::V6(_) => panic!("{s}: not IPv4"),
    }
}

fn v6(s: &str) -> [u8; 16] {
    match ip(s) {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("number {s}: {e}"))
}

/// Apply one case to `frame`; returns the outcome (`ok`, `toobig:MTU:SIGNAL`,
/// `malformed:REASON`, `family`) and the frame as it leaves.
fn apply(op: &str, p: &HashMap<&str, &str>, frame: &[u8]) -> (String, Vec<u8>) {
    const HEADROOM: usize = 128;
    let mut slot = vec![0u8; HEADROOM];
    slot.extend_from_slice(frame);
    slot.extend_from_slice(&[0u8; 64]);
    let mut meta = BufferMeta {
        data_offset: HEADROOM as u16,
        length: frame.len() as u16,
        l3_offset: 14,
        ..BufferMeta::default()
    };
    let ip6 = frame[12..14] == [0x86, 0xdd];
    let parsed = match parse(&frame[14..], ip6) {
        Ok(x) => x,
        Err(m) => return (format!("malformed:{}", m.name()), frame.to_vec()),
    };
    let get = |k: &str| *p.get(k).unwrap_or_else(|| panic!("{op}: no {k}="));
    let r = match op {
        "l3dsr" => encap::l3dsr(
            &meta,
            &mut slot,
            &parsed,
            v4(get("server")),
            num(get("dscp")) as u8,
        ),
        "gre4" | "gre6" => {
            let (bits, hash) = (num(get("bits")) as u8, num(get("hash")) as u32);
            let (ttl, mtu) = (num(get("ttl")) as u8, num(get("mtu")) as u16);
            if op == "gre4" {
                let src = encap::gre_source4(v4(get("src")), bits, hash);
                encap::gre4(
                    &mut meta,
                    &mut slot,
                    &parsed,
                    src,
                    v4(get("server")),
                    ttl,
                    mtu,
                    hash,
                )
            } else {
                let src = encap::gre_source6(v6(get("src")), bits, hash);
                encap::gre6(
                    &mut meta,
                    &mut slot,
                    &parsed,
                    src,
                    v6(get("server")),
                    ttl,
                    mtu,
                    hash,
                )
            }
        }
        "nat-forward" => encap::nat_forward(
            &meta,
            &mut slot,
            &parsed,
            v6(get("addr")),
            num(get("port")) as u16,
        ),
        "nat-reverse" => encap::nat_reverse(
            &meta,
            &mut slot,
            &parsed,
            v6(get("addr")),
            num(get("port")) as u16,
        ),
        other => panic!("unknown op {other}"),
    };
    let outcome = match r {
        Ok(()) => "ok".to_string(),
        Err(EncapError::TooBig { mtu, signal }) => format!("toobig:{mtu}:{}", u8::from(signal)),
        Err(EncapError::FamilyMismatch) => "family".to_string(),
        Err(e) => format!("error:{e}"),
    };
    let start = usize::from(meta.data_offset);
    let mut out = slot[start..start + usize::from(meta.length)].to_vec();
    if op.starts_with("gre") && outcome == "ok" {
        // What ip4-rewrite / ip6-rewrite would write: MACs and the outer ethertype.
        out[..12].copy_from_slice(&frame[..12]);
        out[12..14].copy_from_slice(&meta.ethertype.to_be_bytes());
    }
    (outcome, out)
}

#[test]
fn encapsulations_match_the_frames_scapy_built() {
    let dir = golden();
    let input = frames(&dir.join("lb_input.pcap"));
    let expected = frames(&dir.join("lb_expected.pcap"));
    let cases = std::fs::read_to_string(dir.join("lb_cases.txt")).expect("lb_cases.txt");
    let lines: Vec<&str> = cases.lines().collect();
    assert_eq!(lines.len(), input.len());
    assert_eq!(lines.len(), expected.len());
    assert!(lines.len() >= 30);
    let mut bad = Vec::new();
    for ((line, inp), want) in lines.iter().zip(&input).zip(&expected) {
        let mut words = line.split(' ');
        let name = words.next().expect("name");
        let op = words.next().expect("op");
        let params: HashMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
        let (outcome, got) = apply(op, &params, inp);
        if outcome != params["expect"] {
            bad.push(format!(
                "{name}: outcome {outcome}, want {}",
                params["expect"]
            ));
        } else if &got != want {
            let at = got
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            bad.push(format!(
                "{name}: frames differ at byte {at} (got {} bytes, scapy {}):\n  got   {:02x?}\n  scapy {:02x?}",
                got.len(),
                want.len(),
                &got[at.saturating_sub(4)..(at + 12).min(got.len())],
                &want[at.saturating_sub(4)..(at + 12).min(want.len())]
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} cases wrong:\n{}",
        bad.len(),
        lines.len(),
        bad.join("\n")
    );
}

#[test]
fn golden_files_are_what_make_lb_golden_py_writes() {
    let Some(py) = scapy_or_skip("golden_files_are_what_make_lb_golden_py_writes") else {
        return;
    };
    let tmp = TempDir::new("lb-golden");
    run_ok(
        Command::new(&py)
            .arg(golden().join("make_lb_golden.py"))
            .arg("--out")
            .arg(&tmp.0),
        "make_lb_golden.py",
    );
    for f in ["lb_input.pcap", "lb_expected.pcap", "lb_cases.txt"] {
        let want = std::fs::read(golden().join(f)).expect("checked-in file");
        let got = std::fs::read(tmp.path(f)).expect("written file");
        assert!(
            want == got,
            "{f} differs from what make_lb_golden.py writes now; regenerate with `/usr/bin/python3 crates/lb/tests/golden/make_lb_golden.py --out crates/lb/tests/golden`"
        );
    }
}

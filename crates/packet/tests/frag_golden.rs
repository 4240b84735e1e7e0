//! Golden checks of IPv4 fragmentation (`packet::frag`) against scapy:
//! - every frame of crates/packet/tests/golden/frag_input.pcap, cut at its line's `max_len` in
//!   frag_cases.txt, gives byte for byte the next frames of frag_expected.pcap, which scapy's
//!   `fragment()` made with its own checksums (no scapy needed for this check); a refused
//!   packet gives its reason and stands for itself there;
//! - the checked-in files are what make_frag_golden.py writes now (needs scapy).
//!
//! Without scapy the scapy test skips with a message; under CI=true it fails.

#[path = "../../../tests/golden/golden_support.rs"]
mod support;

use packet::frag::{FragError, Ip4Split};
use std::path::PathBuf;
use std::process::Command;
use support::{read_pcap, run_ok, scapy_or_skip, TempDir};

/// Ethernet header length of the golden frames (no VLAN).
const ETH: usize = 14;

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn frames(name: &str) -> Vec<Vec<u8>> {
    let p = read_pcap(&golden().join(name)).unwrap_or_else(|e| panic!("{e}"));
    p.records.into_iter().map(|r| r.data).collect()
}

/// The frames `packet::frag` makes of `frame` at `max_len`, or why it refused.
fn cut(frame: &[u8], max_len: usize) -> Result<Vec<Vec<u8>>, FragError> {
    let ip = &frame[ETH..];
    let split = Ip4Split::plan(ip, max_len, 64)?;
    Ok((0..split.count())
        .map(|k| {
            let mut f = frame[..ETH].to_vec();
            f.resize(ETH + split.header_len(), 0);
            split.write_header(ip, k, &mut f[ETH..]);
            let (at, len) = split.payload_range(k);
            f.extend_from_slice(&ip[at..at + len]);
            f
        })
        .collect())
}

fn reason(e: FragError) -> &'static str {
    match e {
        FragError::DontFragment => "df",
        FragError::Fits => "fits",
        FragError::TooSmall => "too-small",
        FragError::TooMany => "too-many",
        FragError::Malformed => "malformed",
        FragError::BadOptions => "bad-options",
    }
}

#[test]
fn fragments_match_the_frames_scapy_built() {
    let input = frames("frag_input.pcap");
    let expected = frames("frag_expected.pcap");
    let cases = std::fs::read_to_string(golden().join("frag_cases.txt")).expect("frag_cases.txt");
    let lines: Vec<&str> = cases.lines().collect();
    assert_eq!(lines.len(), input.len());
    let mut want = expected.iter();
    let mut bad = Vec::new();
    for (line, frame) in lines.iter().zip(&input) {
        let mut words = line.split(' ');
        let name = words.next().expect("name");
        let params: Vec<(&str, &str)> = words.filter_map(|w| w.split_once('=')).collect();
        let get = |k: &str| {
            params
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("{name}: no {k}="))
        };
        let max_len: usize = get("max_len").parse().expect("max_len");
        let expect = get("expect");
        match cut(frame, max_len) {
            Ok(got) => {
                if expect != got.len().to_string() {
                    bad.push(format!("{name}: {} fragments, want {expect}", got.len()));
                    break;
                }
                for (k, g) in got.iter().enumerate() {
                    let w = want.next().expect("an expected frame");
                    if g != w {
                        let at = g.iter().zip(w).position(|(a, b)| a != b).unwrap_or(0);
                        bad.push(format!(
                            "{name}: fragment {k} differs at byte {at} (got {} bytes, scapy {})",
                            g.len(),
                            w.len()
                        ));
                    }
                }
            }
            Err(e) => {
                let w = want.next().expect("the refused input");
                if expect != format!("refused:{}", reason(e)) || w != frame {
                    bad.push(format!("{name}: refused ({e}), want {expect}"));
                }
            }
        }
    }
    assert!(want.next().is_none(), "expected frames left over");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn golden_files_are_what_make_frag_golden_py_writes() {
    let Some(py) = scapy_or_skip("golden_files_are_what_make_frag_golden_py_writes") else {
        return;
    };
    let tmp = TempDir::new("frag-golden");
    run_ok(
        Command::new(&py)
            .arg(golden().join("make_frag_golden.py"))
            .arg("--out")
            .arg(&tmp.0),
        "make_frag_golden.py",
    );
    for f in ["frag_input.pcap", "frag_expected.pcap", "frag_cases.txt"] {
        let want = std::fs::read(golden().join(f)).expect("checked-in file");
        let got = std::fs::read(tmp.path(f)).expect("written file");
        assert!(
            want == got,
            "{f} differs from what make_frag_golden.py writes now; regenerate with \
             `/usr/bin/python3 crates/packet/tests/golden/make_frag_golden.py --out \
             crates/packet/tests/golden`"
        );
    }
}

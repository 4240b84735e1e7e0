//! Golden checks of flow extraction and header writes against scapy:
//! - tests/golden/flow/extract.pcap (frames built by scapy, truncated and malformed ones too)
//!   must extract to exactly the keys and offsets of expected_keys.txt, which
//!   tests/golden/flow/make_flow_golden.py computed from scapy's dissection (no scapy needed);
//! - the checked-in files are what the script writes now (needs scapy);
//! - every field write and VLAN push/pop on those frames leaves checksums that scapy
//!   recomputes identically (needs scapy).
//!
//! Without scapy the scapy tests skip with a message; under CI=true they fail.

#[path = "../../../tests/golden/golden_support.rs"]
mod support;

use flow::execute::{apply, set_field, SlotFrame};
use flow::extract::{extract, L4, NO_OFFSET};
use flow::{DpAction, Field};
use std::path::PathBuf;
use std::process::Command;
use support::{read_pcap, repo_root, run_ok, scapy_or_skip, write_pcap, TempDir};

/// The key fields in the script's order (`FIELDS` of make_flow_golden.py).
const FIELDS: [Field; 32] = [
    Field::InPort,
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::Metadata,
    Field::Reg0,
    Field::Reg1,
    Field::Reg2,
    Field::Reg3,
    Field::Reg4,
    Field::Reg5,
    Field::Reg6,
    Field::Reg7,
    Field::EthSrc,
    Field::VlanTci,
    Field::EthDst,
    Field::EthType,
    Field::NwSrc,
    Field::NwDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::NwProto,
    Field::NwEcn,
    Field::IpDscp,
    Field::NwTtl,
    Field::NwFrag,
    Field::Ipv6Label,
    Field::ArpSha,
    Field::ArpTha,
    Field::TpSrc,
    Field::TpDst,
    Field::TcpFlags,
];

fn golden() -> PathBuf {
    repo_root(env!("CARGO_MANIFEST_DIR")).join("tests/golden/flow")
}

fn frames() -> Vec<Vec<u8>> {
    let p = read_pcap(&golden().join("extract.pcap")).unwrap_or_else(|e| panic!("{e}"));
    p.records.into_iter().map(|r| r.data).collect()
}

fn key_line(frame: &[u8]) -> String {
    let (k, p) = extract(frame, 1, None);
    let mut s: Vec<String> = FIELDS
        .iter()
        .map(|f| format!("{}={:#x}", f.name(), k.get(*f)))
        .collect();
    let off = |o: u16| {
        if o == NO_OFFSET {
            "-".to_string()
        } else {
            o.to_string()
        }
    };
    s.push(format!("l3={}", off(p.l3_offset)));
    s.push(format!("l4={}", off(p.l4_offset)));
    s.join(" ")
}

#[test]
fn extracted_keys_are_what_scapy_dissects() {
    let want = std::fs::read_to_string(golden().join("expected_keys.txt")).expect("expected");
    let frames = frames();
    let lines: Vec<&str> = want.lines().collect();
    assert_eq!(lines.len(), frames.len());
    assert!(frames.len() >= 40);
    let mut bad = Vec::new();
    for (line, frame) in lines.iter().zip(&frames) {
        let (head, fields) = line.split_once(": ").expect("`N name: fields`");
        let got = key_line(frame);
        if got != fields {
            let diff: Vec<String> = fields
                .split(' ')
                .zip(got.split(' '))
                .filter(|(a, b)| a != b)
                .map(|(a, b)| format!("scapy {a}, vecplane {b}"))
                .collect();
            bad.push(format!("{head}: {}", diff.join("; ")));
        }
    }
    assert!(bad.is_empty(), "keys differ:\n{}", bad.join("\n"));
}

#[test]
fn golden_files_are_what_make_flow_golden_py_writes() {
    let Some(py) = scapy_or_skip("golden_files_are_what_make_flow_golden_py_writes") else {
        return;
    };
    let dir = TempDir::new("flow-golden");
    run_ok(
        Command::new(&py)
            .arg(golden().join("make_flow_golden.py"))
            .arg("--out")
            .arg(&dir.0),
        "make_flow_golden.py",
    );
    for f in ["extract.pcap", "expected_keys.txt"] {
        let a = std::fs::read(golden().join(f)).expect("checked-in file");
        let b = std::fs::read(dir.path(f)).expect("regenerated file");
        assert!(
            a == b,
            "tests/golden/flow/{f} is stale: rerun `/usr/bin/python3 tests/golden/flow/make_flow_golden.py --out tests/golden/flow`"
        );
    }
}

#[test]
fn header_writes_keep_checksums_scapy_agrees_with() {
    let Some(py) = scapy_or_skip("header_writes_keep_checksums_scapy_agrees_with") else {
        return;
    };
    let writes: [(Field, u128, u128); 16] = [
        (Field::EthSrc, 0x0200_0000_00ee, !0),
        (Field::VlanVid, 321, !0),
        (Field::VlanPcp, 6, !0),
        (Field::NwSrc, 0xc612_0a0b, !0),
        (Field::NwDst, 0xc613_0000, 0xffff_0000),
        (Field::IpDscp, 46, !0),
        (Field::NwEcn, 3, !0),
        (Field::NwTtl, 1, !0),
        (
            Field::Ipv6Src,
            0x2001_0db8_0000_0000_0000_0000_dead_beef,
            !0,
        ),
        (Field::Ipv6Dst, 0xffff, 0xffff_ffff),
        (Field::Ipv6Label, 0xabcde, !0),
        (Field::TpSrc, 1, !0),
        (Field::TpDst, 0x1234, 0xff00),
        (Field::ArpSha, 0x0200_0000_0077, !0),
        (Field::NwProto, 2, !0),
        (Field::TpDst, 9, !0),
    ];
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut what = Vec::new();
    for (i, frame) in frames().iter().enumerate() {
        let (_, p) = extract(frame, 1, None);
        // Only frames scapy's own checksums were made for (whole, unfragmented datagrams).
        if p.malformed.is_some() || p.frag != 0 || p.l4 == L4::None && p.l4_offset != NO_OFFSET {
            continue;
        }
        for (field, value, mask) in writes {
            let mut f = frame.clone();
            if set_field(&mut f, &p, field, value, mask).is_ok() {
                what.push(format!("frame {i} set {}", field.name()));
                out.push(f);
            }
        }
        // Push a tag, write through it, pop it again: the frame is as one write made it.
        let mut slot = vec![0u8; frame.len() + 8];
        slot[8..].copy_from_slice(frame);
        let mut sf = SlotFrame {
            slot: &mut slot,
            start: 8,
            len: frame.len(),
        };
        let mut q = p;
        let acts = [
            DpAction::PushVlan {
                tpid: 0x88a8,
                tci: 0x2005,
            },
            DpAction::Set {
                field: Field::NwTtl,
                value: 9,
                mask: !0,
            },
        ];
        if acts.iter().all(|a| apply(&mut sf, &mut q, a).is_ok()) {
            what.push(format!("frame {i} push_vlan + set nw_ttl"));
            out.push(sf.bytes_mut().to_vec());
        }
    }
    assert!(out.len() > 150, "{} writes", out.len());
    let dir = TempDir::new("flow-writes");
    let recs: Vec<(u64, &[u8])> = out.iter().map(|f| (0, &f[..])).collect();
    write_pcap(&dir.path("writes.pcap"), &recs).expect("write pcap");
    let o = Command::new(&py)
        .arg(golden().join("make_flow_golden.py"))
        .arg("--check-checksums")
        .arg(dir.path("writes.pcap"))
        .output()
        .expect("run make_flow_golden.py");
    let text = String::from_utf8_lossy(&o.stdout);
    let bad: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("bad "))
        .map(|l| {
            let n: usize = l[4..]
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            format!("{}: {l}", what[n])
        })
        .collect();
    assert!(
        o.status.success() && bad.is_empty(),
        "scapy disagrees with {} of {} written frames:\n{}\n{}",
        bad.len(),
        out.len(),
        bad.join("\n"),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        out.len()
    );
}

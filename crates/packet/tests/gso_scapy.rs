//! Property tests of `packet::gso` on random TCP super-packets (v4/v6, 0-2 VLAN tags, IPv4 and
//! TCP options, any flags, sequence numbers and IP ids, mss 1-9000, payloads up to 65000 bytes):
//! - in Rust: the payloads put together are the original's, and every segment's header is the
//!   original's with exactly the fields segmentation rewrites (lengths, id, sequence number,
//!   flags) set as Linux sets them, and checksums that verify (a byte-wise sum, not the
//!   `checksum` module's);
//! - with scapy (crates/packet/tests/gso_check.py), on one batch of cases written to a pcap: the
//!   same facts, read by scapy's dissectors, and checksums equal to what scapy computes.
//!
//! Without scapy the scapy test skips with a message; under CI=true it fails.
//! The scapy batch's seed is printed; rerun one with VECPLANE_GSO_SEED=<seed>.

#[path = "../../../tests/golden/golden_support.rs"]
mod support;

use packet::gso::{segment_tcp, GsoError, GsoKind, MAX_FRAME_LEN, MAX_SEGMENTS};
use packet::headers::{build_tcp_frame, tcp, TcpFrameSpec};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::process::Command;
use support::{scapy_or_skip, write_pcap, TempDir};

/// TCP options scapy dissects and rebuilds byte for byte: NOP, MSS, window scale, SACK
/// permitted, timestamps, one SACK block.
const TCP_OPTIONS: [&[u8]; 6] = [
    &[1],
    &[2, 4, 5, 0xb4],
    &[3, 3, 7],
    &[4, 2],
    &[8, 10, 1, 2, 3, 4, 5, 6, 7, 8],
    &[5, 10, 0, 0, 1, 0, 0, 0, 2, 0],
];
/// IPv4 options likewise: NOP, router alert.
const IP_OPTIONS: [&[u8]; 2] = [&[1], &[0x94, 4, 0, 0]];

/// Options from the menu, as many as fit in 40 bytes.
fn options(menu: &[&[u8]], picks: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    for &p in picks {
        let o = menu[p % menu.len()];
        if out.len() + o.len() > 40 {
            break;
        }
        out.extend_from_slice(o);
    }
    out
}

#[derive(Clone, Debug)]
struct Case {
    spec: TcpFrameSpec,
    mss: u16,
}

impl Case {
    fn kind(&self) -> GsoKind {
        match self.spec.dst_ip {
            IpAddr::V4(_) => GsoKind::Tcp4,
            IpAddr::V6(_) => GsoKind::Tcp6,
        }
    }
}

/// Random super-packets cut into at most `max_segments` segments.
fn cases(max_segments: usize) -> impl Strategy<Value = Case> {
    let l2 = (
        any::<bool>(),
        prop::collection::vec(
            (prop_oneof![Just(0x8100u16), Just(0x88a8u16)], any::<u16>()),
            0..=2,
        ),
        prop::collection::vec(0usize..16, 0..12),
        prop::collection::vec(0usize..16, 0..16),
        0u8..4,
    );
    let tcp = (
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u8>(),
        40000u16..60000,
        40000u16..60000,
        any::<u16>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
    );
    let size = (
        prop_oneof![
            1u16..=64,
            1u16..=9000,
            Just(536u16),
            Just(1448u16),
            Just(1460u16),
            8000u16..=9000
        ],
        prop_oneof![0usize..=65000, 0usize..=3000],
        any::<u64>(),
    );
    (l2, tcp, size).prop_map(
        move |(
            (v6, vlans, ip_opts, tcp_opts, addr),
            (flags, seq, ack, ip_id, tos, sport, dport, window, urgent, df, partial),
            (mss, len, seed),
        )| {
            let (src, dst): (IpAddr, IpAddr) = if v6 {
                (
                    format!("2001:db8:{addr}::1").parse().unwrap(),
                    "2001:db8:ff::9".parse().unwrap(),
                )
            } else {
                (
                    format!("198.18.{addr}.1").parse().unwrap(),
                    "198.19.255.9".parse().unwrap(),
                )
            };
            let mut spec = TcpFrameSpec {
                vlans,
                src_ip: src,
                dst_ip: dst,
                ip_id,
                dont_fragment: df,
                tos,
                ttl: 64,
                ip_options: if v6 {
                    Vec::new()
                } else {
                    options(&IP_OPTIONS, &ip_opts)
                },
                src_port: sport,
                dst_port: dport,
                seq,
                ack,
                flags,
                window,
                urgent,
                tcp_options: options(&TCP_OPTIONS, &tcp_opts),
                payload: Vec::new(),
                partial_checksum: partial,
                ..TcpFrameSpec::default()
            };
            let header = build_tcp_frame(&spec).len();
            let len = len
                .min(MAX_FRAME_LEN - header)
                .min(usize::from(mss) * max_segments);
            // xorshift64*: cheap bytes, different for every case.
            let mut x = seed | 1;
            spec.payload = (0..len)
                .map(|_| {
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
                })
                .collect();
            Case { spec, mss }
        },
    )
}

/// Sum of 16-bit big-endian words, byte by byte (independent of `packet::checksum`).
fn naive_sum(parts: &[&[u8]]) -> u16 {
    let mut s: u64 = 0;
    for p in parts {
        for (i, b) in p.iter().enumerate() {
            s += if i % 2 == 0 {
                u64::from(*b) << 8
            } else {
                u64::from(*b)
            };
        }
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One segment: (header, payload).
type Segment = (Vec<u8>, Vec<u8>);

/// The segments of a case.
fn cut(case: &Case, frame: &[u8]) -> Result<Vec<Segment>, GsoError> {
    let mut out = Vec::new();
    let done = segment_tcp(frame, case.kind(), case.mss, |h, p| {
        out.push((h.to_vec(), p.to_vec()));
        true
    })?;
    assert_eq!((done.sent, done.segments), (out.len(), out.len()));
    Ok(out)
}

/// Everything Rust can check of one case's segments.
fn check(case: &Case, frame: &[u8], segs: &[Segment]) -> Result<(), String> {
    let sp = &case.spec;
    let mss = usize::from(case.mss);
    let v6 = case.kind() == GsoKind::Tcp6;
    let l3 = 14 + 4 * sp.vlans.len();
    let l4 = l3
        + if v6 {
            40
        } else {
            20 + sp.ip_options.len().div_ceil(4) * 4
        };
    let hl = frame.len() - sp.payload.len();
    let want = sp.payload.len().div_ceil(mss).max(1);
    if segs.len() != want {
        return Err(format!("{} segments, expected {want}", segs.len()));
    }
    let joined: Vec<u8> = segs.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if joined != sp.payload {
        return Err("the segments' payloads together are not the original's".into());
    }
    let n = segs.len();
    for (i, (h, p)) in segs.iter().enumerate() {
        let what = |s: &str| format!("segment {i} of {n}: {s}");
        if h.len() != hl {
            return Err(what(&format!("header of {} bytes, expected {hl}", h.len())));
        }
        if p.len() != mss.min(sp.payload.len() - i * mss) {
            return Err(what(&format!("{} payload bytes", p.len())));
        }
        // The original's header with the rewritten fields set as expected; checksums apart.
        let mut exp = frame[..hl].to_vec();
        let tcp_len = (hl - l4 + p.len()) as u16;
        if v6 {
            exp[l3 + 4..l3 + 6].copy_from_slice(&tcp_len.to_be_bytes());
        } else {
            let ip_len = (hl - l3 + p.len()) as u16;
            exp[l3 + 2..l3 + 4].copy_from_slice(&ip_len.to_be_bytes());
            let id = sp.ip_id.wrapping_add(i as u16);
            exp[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
            exp[l3 + 10..l3 + 12].copy_from_slice(&h[l3 + 10..l3 + 12]);
            if naive_sum(&[&h[l3..l4]]) != 0xffff {
                return Err(what("IPv4 header checksum does not verify"));
            }
        }
        let seq = sp.seq.wrapping_add((i * mss) as u32);
        exp[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = sp.flags;
        if i + 1 < n {
            flags &= !(tcp::FIN | tcp::PSH);
        }
        if i > 0 {
            flags &= !tcp::CWR;
        }
        exp[l4 + 13] = flags;
        exp[l4 + 16..l4 + 18].copy_from_slice(&h[l4 + 16..l4 + 18]);
        if *h != exp {
            let at = h.iter().zip(&exp).position(|(a, b)| a != b).unwrap_or(0);
            return Err(what(&format!(
                "header differs from the expected one at byte {at} (seq {:#x}, expected {seq:#x}; flags {:#04x}, expected {flags:#04x})",
                be32(h, l4 + 4),
                h[l4 + 13]
            )));
        }
        let (src, dst) = if v6 {
            (&h[l3 + 8..l3 + 24], &h[l3 + 24..l3 + 40])
        } else {
            (&h[l3 + 12..l3 + 16], &h[l3 + 16..l3 + 20])
        };
        let pseudo = [0, 6, (tcp_len >> 8) as u8, tcp_len as u8];
        if naive_sum(&[src, dst, &pseudo, &h[l4..], p]) != 0xffff {
            return Err(what(&format!(
                "TCP checksum {:#06x} does not verify",
                be16(h, l4 + 16)
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn segments_put_together_are_the_super_packet(case in cases(MAX_SEGMENTS)) {
        let frame = build_tcp_frame(&case.spec);
        let segs = cut(&case, &frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check(&case, &frame, &segs).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn too_many_segments_is_refused_before_any_is_emitted(mss in 1u16..=31, extra in 1usize..1000) {
        let len = usize::from(mss) * MAX_SEGMENTS + extra;
        let frame = build_tcp_frame(&TcpFrameSpec { payload: vec![0; len], ..TcpFrameSpec::default() });
        let mut emitted = 0;
        let r = segment_tcp(&frame, GsoKind::Tcp4, mss, |_, _| { emitted += 1; true });
        prop_assert_eq!(r, Err(GsoError::TooManySegments(len.div_ceil(usize::from(mss)))));
        prop_assert_eq!(emitted, 0);
    }
}

/// Cases in the scapy batch, and most segments per case (scapy dissects a few thousand packets
/// a second: about 200 cases and 2,500 segments take 2-4 s).
const SCAPY_CASES: usize = 200;
const SCAPY_MAX_SEGMENTS: usize = 24;

#[test]
fn segments_pass_scapys_checks() {
    let Some(py) = scapy_or_skip("segments_pass_scapys_checks") else {
        return;
    };
    let seed: u64 = match std::env::var("VECPLANE_GSO_SEED") {
        Ok(s) => s.parse().expect("VECPLANE_GSO_SEED: a decimal u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    );
    let strategy = cases(SCAPY_MAX_SEGMENTS);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut manifest = String::from("[\n");
    let mut segments = 0;
    for c in 0..SCAPY_CASES {
        let case = strategy
            .new_tree(&mut runner)
            .expect("generate a case")
            .current();
        let frame = build_tcp_frame(&case.spec);
        let segs =
            cut(&case, &frame).unwrap_or_else(|e| panic!("seed {seed}, case {c}: {e}\n{case:?}"));
        if let Err(e) = check(&case, &frame, &segs) {
            panic!("seed {seed}, case {c}: {e}");
        }
        let _ = writeln!(
            manifest,
            "{}{{\"case\": {c}, \"orig\": {}, \"first\": {}, \"count\": {}, \"mss\": {}}}",
            if c == 0 { "" } else { "," },
            frames.len(),
            frames.len() + 1,
            segs.len(),
            case.mss
        );
        segments += segs.len();
        frames.push(frame);
        frames.extend(segs.into_iter().map(|(h, p)| [h, p].concat()));
    }
    manifest.push(']');
    let dir = TempDir::new("gso-scapy");
    let recs: Vec<(u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u64 * 1000, &f[..]))
        .collect();
    write_pcap(&dir.path("cases.pcap"), &recs).expect("write pcap");
    std::fs::write(dir.path("cases.json"), manifest).expect("write manifest");
    let out = Command::new(&py)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gso_check.py"))
        .arg(dir.path("cases.pcap"))
        .arg(dir.path("cases.json"))
        .output()
        .expect("run gso_check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let bad: Vec<&str> = stdout.lines().filter(|l| l.starts_with("bad ")).collect();
    assert!(
        out.status.success() && bad.is_empty(),
        "seed {seed}: scapy disagrees in {} places (rerun with VECPLANE_GSO_SEED={seed}; \
         VECPLANE_KEEP_TMP=1 keeps the pcap):\n{}\n--- stderr\n{}",
        bad.len(),
        bad.iter().take(40).copied().collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = format!("checked {SCAPY_CASES} cases, {segments} segments");
    assert!(
        stdout.lines().any(|l| l == summary),
        "seed {seed}: gso_check.py did not report `{summary}`:\n{stdout}"
    );
    println!("seed {seed}: {summary}");
}

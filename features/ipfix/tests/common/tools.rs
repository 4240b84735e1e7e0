//! Real collectors for the export tests: finding `tshark`, `nfcapd` and `nfdump` (a missing
//! tool fails the test under `CI=true` and skips it, saying so, elsewhere), an `nfcapd` on a
//! loopback port in a private directory (stopped on drop, also on panic), a pcap writer for
//! what a test socket received, and the two decoders' per-flow counts. Test-only.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A flow as both decoders name it: (source, destination, source port, destination port,
/// protocol).
pub type FlowKey = (IpAddr, IpAddr, u16, u16, u8);
/// Per flow: (packets, bytes).
pub type Counts = BTreeMap<FlowKey, (u64, u64)>;

/// True when every tool is installed. When one is missing: `testenv::skip` (a failure in CI, a
/// printed skip elsewhere) and false.
pub fn tools_present(test: &str) -> bool {
    let missing: Vec<&str> = ["tshark", "nfcapd", "nfdump"]
        .into_iter()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(Stdio::null())
                .status()
                .map(|s| !s.success())
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    testenv::skip(&format!(
        "{test}: {} not installed (Debian: apt-get install tshark nfdump)",
        missing.join(", ")
    ));
    false
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "vecplane-ipfix-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free UDP port on `ip` (bound then released).
pub fn free_port(ip: IpAddr) -> u16 {
    let s = UdpSocket::bind(SocketAddr::new(ip, 0)).expect("bind a loopback port");
    s.local_addr().expect("addr").port()
}

/// True once something listens on UDP `port` of family `v6` (from /proc/net/udp{,6}).
fn udp_listening(port: u16, v6: bool) -> bool {
    let file = if v6 {
        "/proc/net/udp6"
    } else {
        "/proc/net/udp"
    };
    let want = format!(":{port:04X} ");
    std::fs::read_to_string(file)
        .map(|t| {
            t.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| format!("{a} ").ends_with(&want))
            })
        })
        .unwrap_or(false)
}

/// An `nfcapd` collecting into its own directory; killed on drop.
pub struct Nfcapd {
    pub addr: SocketAddr,
    pub dir: TempDir,
    child: Option<Child>,
}

impl Nfcapd {
    /// Start one on loopback address `ip` (127.0.0.1 or ::1).
    pub fn start(ip: IpAddr) -> Nfcapd {
        let dir = TempDir::new("nfcapd");
        let port = free_port(ip);
        let mut cmd = Command::new("nfcapd");
        if ip.is_ipv6() {
            cmd.arg("-6");
        }
        cmd.args([
            "-b",
            &ip.to_string(),
            "-p",
            &port.to_string(),
            "-t",
            "3600",
            "-w",
        ])
        .arg(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = cmd.spawn().expect("nfcapd starts");
        let until = Instant::now() + Duration::from_secs(10);
        while !udp_listening(port, ip.is_ipv6()) {
            assert!(
                Instant::now() < until,
                "nfcapd never listened on {ip} port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nfcapd {
            addr: SocketAddr::new(ip, port),
            dir,
            child: Some(child),
        }
    }

    /// Stop it (it writes its file on SIGTERM) and read the flows with `nfdump`.
    pub fn finish(mut self) -> Counts {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let until = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        nfdump_counts(&self.dir.0)
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Per-flow counts of every file `nfdump` finds under `dir` (CSV output, columns by name).
pub fn nfdump_counts(dir: &Path) -> Counts {
    let out = Command::new("nfdump")
        .arg("-R")
        .arg(dir)
        .args(["-o", "csv"])
        .output()
        .expect("nfdump runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nfdump failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("nfdump csv has no `{name}` column: {header:?}"))
    };
    let (sa, da, sp, dp, pr, ipkt, ibyt) = (
        col("sa"),
        col("da"),
        col("sp"),
        col("dp"),
        col("pr"),
        col("ipkt"),
        col("ibyt"),
    );
    let mut counts = Counts::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() < header.len() || f[sa].parse::<IpAddr>().is_err() {
            continue; // the summary lines
        }
        let proto = match f[pr].trim() {
            "TCP" => 6,
            "UDP" => 17,
            "ICMP" => 1,
            other => other.parse().unwrap_or(0),
        };
        let key = (
            f[sa].parse().expect("ip"),
            f[da].parse().expect("ip"),
            f[sp].parse().unwrap_or(0),
            f[dp].trim().parse::<f64>().map(|v| v as u16).unwrap_or(0),
            proto,
        );
        let e = counts.entry(key).or_default();
        e.0 += f[ipkt].parse::<u64>().expect("packets");
        e.1 += f[ibyt].parse::<u64>().expect("bytes");
    }
    counts
}

/// Write `payloads` (UDP datagrams from `from` to `to`) as an Ethernet pcap file.
pub fn write_pcap(path: &Path, from: SocketAddr, to: SocketAddr, payloads: &[Vec<u8>]) {
    let mut out = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    // The version word is two u16s (major 2, minor 4).
    out[4..8].copy_from_slice(&[2, 0, 4, 0]);
    for (i, p) in payloads.iter().enumerate() {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        let udp_len = (8 + p.len()) as u16;
        let mut udp = Vec::new();
        udp.extend_from_slice(&from.port().to_be_bytes());
        udp.extend_from_slice(&to.port().to_be_bytes());
        udp.extend_from_slice(&udp_len.to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        match (from.ip(), to.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
                f.extend_from_slice(&(20 + udp_len).to_be_bytes());
                f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                f.extend_from_slice(&udp_len.to_be_bytes());
                f.extend_from_slice(&[17, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            _ => panic!("one family"),
        }
        f.extend_from_slice(&udp);
        f.extend_from_slice(p);
        for w in [i as u32 + 1, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&f);
    }
    std::fs::write(path, out).expect("write pcap");
}

/// Every datagram `s` receives until it stays quiet for `quiet`.
pub fn receive_all(s: &UdpSocket, quiet: Duration) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(quiet)).expect("timeout");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = s.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// `tshark`'s JSON decoding of `pcap` with UDP port `port` as IPFIX.
pub fn tshark_json(pcap: &Path, port: u16) -> serde_json::Value {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-d", &format!("udp.port=={port},cflow"), "-T", "json"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("tshark prints JSON")
}

/// Every JSON object under `v` holding key `key`.
pub fn objects_with<'a>(
    v: &'a serde_json::Value,
    key: &str,
    out: &mut Vec<&'a serde_json::Map<String, serde_json::Value>>,
) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key(key) {
                out.push(m);
            }
            for x in m.values() {
                objects_with(x, key, out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                objects_with(x, key, out);
            }
        }
        _ => {}
    }
}

/// Per-flow counts of the IPFIX data records `tshark` decoded.
pub fn tshark_counts(json: &serde_json::Value) -> Counts {
    // tshark 4.0 names 8-byte counters `cflow.packets`/`cflow.octets`, older ones `...64`.
    let mut records = Vec::new();
    objects_with(json, "cflow.packets", &mut records);
    objects_with(json, "cflow.packets64", &mut records);
    let s = |m: &serde_json::Map<String, serde_json::Value>, k: &str| -> Option<String> {
        m.get(k).and_then(|v| v.as_str()).map(str::to_string)
    };
    let mut counts = Counts::new();
    for m in records {
        let src = s(m, "cflow.srcaddr")
            .or_else(|| s(m, "cflow.srcaddrv6"))
            .expect("a source");
        let dst = s(m, "cflow.dstaddr")
            .or_else(|| s(m, "cflow.dstaddrv6"))
            .expect("a destination");
        let num = |k: &str| {
            s(m, k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("tshark record without {k}: {m:?}"))
        };
        let key = (
            src.parse().expect("ip"),
            dst.parse().expect("ip"),
            num("cflow.srcport") as u16,
            num("cflow.dstport") as u16,
            num("cflow.protocol") as u8,
        );
        let e = counts.entry(key).or_default();
        let pick = |a: &str, b: &str| if m.contains_key(a) { num(a) } else { num(b) };
        e.0 += pick("cflow.packets", "cflow.packets64");
        e.1 += pick("cflow.octets", "cflow.octets64");
    }
    counts
}

//! Two separate `vecplane run` processes with the same load-balancer configuration (the `lb as`
//! servers listed in opposite orders) replay the same 100k TCP SYNs from pcap files (in opposite
//! orders) and must send every flow to the same server: Maglev is deterministic and unkeyed
//! (only the flow tables are keyed per process). No root: pcap ports, files in a temp directory
//! deleted on drop. 50k flows to an L3DSR IPv4 VIP, 50k to a GRE6 IPv6 VIP, 10 servers each with
//! weights 1..=10.

use packet::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};
use ports::pcapfile::{PcapReader, PcapWriter};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FLOWS_PER_VIP: u32 = 50_000;
const SERVERS: usize = 10;
const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const DSCP: u8 = 23;
const UP_MAC: [u8; 6] = [0x02, 0, 0, 0x11, 0, 0x02];
const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0x11, 0, 0x01];

/// A scratch directory, deleted on drop (also when the test panics).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let p = std::env::temp_dir().join(format!("vecplane-lb-replay-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch directory");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn server4(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 12, 11 + i as u8)
}

fn server6(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, 0x12, 0, 0, 0, 0, 0x11 + i as u16)
}

/// Flow `k`'s client address and port (all distinct).
fn client(k: u32, v6: bool) -> (IpAddr, u16) {
    let port = 1024 + (k % 50_000) as u16;
    let host = k / 50_000 + 1;
    let a = if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x20, 0, 0, 0, 0, host as u16))
    } else {
        IpAddr::V4(Ipv4Addr::new(198, 19, 0, host as u8))
    };
    (a, port)
}

fn tcp_syn(src_port: u16, seq: u32) -> [u8; 20] {
    let mut t = [0u8; 20];
    t[0..2].copy_from_slice(&src_port.to_be_bytes());
    t[2..4].copy_from_slice(&80u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    t
}

/// An Ethernet frame with a TCP SYN from flow `k` to the VIP of its family.
fn syn_frame(k: u32, v6: bool) -> Vec<u8> {
    let (src, sport) = client(k, v6);
    let mut tcp = tcp_syn(sport, k.wrapping_mul(2_654_435_761));
    let mut f = Vec::with_capacity(80);
    f.extend_from_slice(&UP_MAC);
    f.extend_from_slice(&CLIENT_MAC);
    match src {
        IpAddr::V4(s) => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&40u16.to_be_bytes());
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&VIP4.octets());
            let c = !fold(sum(0, &ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let ph = pseudo_header_v4(s.octets(), VIP4.octets(), 6, 20);
            let c = !fold(sum(ph, &tcp));
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        IpAddr::V6(s) => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&20u16.to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&VIP6.octets());
            let ph = pseudo_header_v6(s.octets(), VIP6.octets(), 6, 20);
            let c = !fold(sum(ph, &tcp));
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
    }
    f.extend_from_slice(&tcp);
    f
}

/// The config of one run: ports `up` (reads `rx`) and `down` (writes `tx`), the servers as
/// static neighbours, and `[lb]` with the servers listed in `order`.
fn config(rx: &Path, tx: &Path, order: &[usize]) -> String {
    let mut s = format!(
        "[dataplane]\nbuffers = 8192\n\n\
         [[port]]\nname = \"up\"\ndriver = \"pcap\"\nmac = \"02:00:00:11:00:02\"\n\
         ip4 = [\"198.18.11.2/24\"]\nip6 = [\"2001:db8:11::2/64\"]\nrx = \"{}\"\n\n\
         [[port]]\nname = \"down\"\ndriver = \"pcap\"\nmac = \"02:00:00:12:00:01\"\n\
         ip4 = [\"198.18.12.1/24\"]\nip6 = [\"2001:db8:12::1/64\"]\ntx = \"{}\"\n",
        rx.display(),
        tx.display()
    );
    for i in 0..SERVERS {
        let mac = format!("02:00:00:12:01:{:02x}", 0x11 + i);
        for a in [IpAddr::V4(server4(i)), IpAddr::V6(server6(i))] {
            s.push_str(&format!(
                "\n[[neighbour]]\nip = \"{a}\"\nmac = \"{mac}\"\nport = \"down\"\n"
            ));
        }
    }
    // One `lb as` per server: VPP's `weight` is the whole line's.
    let as_lines = |vip: String, v6: bool| -> Vec<String> {
        order
            .iter()
            .map(|&i| {
                let a = if v6 {
                    server6(i).to_string()
                } else {
                    server4(i).to_string()
                };
                format!("lb as {vip} protocol tcp port 80 {a} weight {}", i + 1)
            })
            .collect()
    };
    let mut lines = vec![
        "lb conf ip4-src-address 198.18.12.1 ip6-src-address 2001:db8:12::1".to_string(),
        format!("lb vip {VIP4}/32 protocol tcp port 80 encap l3dsr dscp {DSCP}"),
    ];
    lines.extend(as_lines(format!("{VIP4}/32"), false));
    lines.push(format!("lb vip {VIP6}/128 protocol tcp port 80 encap gre6"));
    lines.extend(as_lines(format!("{VIP6}/128"), true));
    s.push_str("\n[lb]\nlines = [\n");
    for l in lines {
        s.push_str(&format!("  \"{l}\",\n"));
    }
    s.push_str("]\n");
    s
}

fn write_pcap(path: &Path, flows: impl Iterator<Item = (u32, bool)>) {
    let mut w = PcapWriter::create(path).expect("create pcap");
    for (n, (k, v6)) in flows.enumerate() {
        let f = syn_frame(k, v6);
        w.write_record(n as u64 * 1000, &f, f.len() as u32)
            .expect("write pcap");
    }
    w.flush().expect("flush pcap");
}

/// Flow (client address, port) -> the server it was sent to, from a `down` capture; panics on
/// a frame that is not what the VIP's encapsulation makes.
fn flows_by_server(path: &Path) -> BTreeMap<(IpAddr, u16), IpAddr> {
    let mut r = PcapReader::open(path).expect("open output pcap");
    let mut buf = vec![0u8; 65_536];
    let mut out = BTreeMap::new();
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let v6 = |b: &[u8], at: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    while let Some(rec) = r.next_record(&mut buf).expect("read output pcap") {
        let f = &buf[..rec.caplen];
        let (key, server) = match be16(f, 12) {
            0x0800 => {
                // L3DSR: destination := the server, DSCP := the VIP's, source and ports kept.
                let ip = &f[14..];
                let ihl = usize::from(ip[0] & 0xf) * 4;
                assert_eq!(ip[1] >> 2, DSCP, "dscp of {f:02x?}");
                let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
                let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
                ((src, be16(ip, ihl)), dst)
            }
            0x86dd => {
                // GRE6: outer IPv6 to the server, GRE, the client's IPv6 packet unchanged.
                let ip = &f[14..];
                assert_eq!(ip[6], 47, "next header of {f:02x?}");
                let gre = &ip[40..];
                assert_eq!(be16(gre, 2), 0x86dd, "GRE protocol of {f:02x?}");
                let inner = &gre[4..];
                assert_eq!(v6(inner, 24), IpAddr::V6(VIP6));
                ((v6(inner, 8), be16(inner, 40)), v6(ip, 24))
            }
            t => panic!("unexpected ethertype {t:#06x}: {f:02x?}"),
        };
        assert!(out.insert(key, server).is_none(), "flow {key:?} sent twice");
    }
    out
}

/// Run vecplane on `config` until it ends by itself (its pcap input consumed), at most 120 s.
fn run(bin: &str, dir: &Path, name: &str, config: &str) -> Duration {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).expect("write config");
    let socket = dir.join(format!("{name}.sock"));
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log");
    let t0 = Instant::now();
    let mut child = Command::new(bin)
        .arg("run")
        .arg("--config")
        .arg(&path)
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("vecplane starts");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{name}: vecplane did not end within 120 s:\n{}",
                std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        status.success(),
        "{name}: vecplane {status}:\n{}\n{config}",
        std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
    );
    t0.elapsed()
}

pub fn same_flows_same_servers(bin: &str) {
    let dir = Scratch::new();
    let total = FLOWS_PER_VIP * 2;
    // Run A: v4 and v6 flows interleaved in ascending order; run B: descending, one family
    // after the other.
    let a_in = dir.0.join("a-in.pcap");
    let b_in = dir.0.join("b-in.pcap");
    write_pcap(&a_in, (0..total).map(|n| (n / 2, n % 2 == 1)));
    write_pcap(
        &b_in,
        (0..FLOWS_PER_VIP)
            .rev()
            .map(|k| (k, true))
            .chain((0..FLOWS_PER_VIP).rev().map(|k| (k, false))),
    );
    let (a_out, b_out) = (dir.0.join("a-down.pcap"), dir.0.join("b-down.pcap"));
    let asc: Vec<usize> = (0..SERVERS).collect();
    let desc: Vec<usize> = (0..SERVERS).rev().collect();
    let ta = run(bin, &dir.0, "a", &config(&a_in, &a_out, &asc));
    let tb = run(bin, &dir.0, "b", &config(&b_in, &b_out, &desc));
    let a = flows_by_server(&a_out);
    let b = flows_by_server(&b_out);
    let mut per_server: BTreeMap<IpAddr, u64> = BTreeMap::new();
    for s in a.values() {
        *per_server.entry(*s).or_default() += 1;
    }
    println!(
        "run a {:.2} s, run b {:.2} s; {} and {} flows out; per server {per_server:?}",
        ta.as_secs_f64(),
        tb.as_secs_f64(),
        a.len(),
        b.len()
    );
    assert_eq!(a.len() as u32, total, "run a lost flows");
    assert_eq!(b.len() as u32, total, "run b lost flows");
    let differ: Vec<_> = a
        .iter()
        .filter(|(k, s)| b.get(k) != Some(s))
        .take(10)
        .collect();
    assert!(
        differ.is_empty(),
        "flows sent elsewhere by run b: {differ:?}"
    );
    // And by weight (1..=10 of 55 for each VIP): within 10% of each server's share.
    for i in 0..SERVERS {
        for s in [IpAddr::V4(server4(i)), IpAddr::V6(server6(i))] {
            let got = per_server.get(&s).copied().unwrap_or(0) as f64;
            let want = f64::from(FLOWS_PER_VIP) * (i + 1) as f64 / 55.0;
            assert!(
                (got - want).abs() <= want * 0.1 + 50.0,
                "{s}: {got} flows, expected about {want:.0}"
            );
        }
    }
}

//! The control-plane build costs and the per-packet read path of `LbTables`: Maglev build
//! (65537 entries, 100 servers), snapshot build, and `vip_for` + `stable_hash` + `choose` per
//! packet over 64k flows (1 VIP with 100 servers; and 200 per-port /32 VIPs plus prefix VIPs).
//! Prints its own min/median ns per packet, then lets criterion time one 64k-flow pass.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lb::cli::parse_lines;
use lb::maglev::{MaglevServer, MaglevTable};
use lb::model::{AsSlot, LbState};
use lb::snapshot::LbTables;
use lb::{stable_hash, FiveTuple};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const FLOWS: usize = 1 << 16;

fn one_vip() -> LbState {
    let mut text = String::from(
        "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23\nlb as 198.18.1.1/32 protocol tcp port 80",
    );
    for i in 0..100u32 {
        text.push_str(&format!(" {}", Ipv4Addr::from(0xc613_0000u32 + i)));
    }
    LbState::new().apply(&parse_lines(&text).unwrap()).unwrap()
}

fn many_vips() -> LbState {
    let mut text = String::from("lb conf ip4-src-address 198.18.0.254\n");
    for v in 0..100u32 {
        let vip = Ipv4Addr::from(0xc612_0100u32 + v);
        for port in [80, 443] {
            text.push_str(&format!(
                "lb vip {vip}/32 protocol tcp port {port} encap l3dsr dscp {}\n\
                 lb as {vip}/32 protocol tcp port {port} 198.19.{v}.1 198.19.{v}.2 198.19.{v}.3\n",
                (v + port) % 64
            ));
        }
    }
    text.push_str("lb vip 198.18.2.0/24 encap gre4\nlb as 198.18.2.0/24 198.19.200.1\n");
    text.push_str("lb vip 198.18.0.0/16 protocol udp encap gre4\nlb as 198.18.0.0/16 protocol udp 198.19.200.2\n");
    LbState::new().apply(&parse_lines(&text).unwrap()).unwrap()
}

fn flows(dsts: &[[u8; 4]]) -> Vec<FiveTuple> {
    let mut x = 0x1234_5678_9abc_def0u64;
    (0..FLOWS)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let src = ((x >> 32) as u32 | 0x0a00_0000).to_be_bytes();
            let dst = dsts[i % dsts.len()];
            FiveTuple::v4(src, dst, 6, x as u16, if i % 2 == 0 { 80 } else { 443 })
        })
        .collect()
}

/// One pass: VIP, hash, Maglev choice per flow; returns a checksum.
fn pass(t: &LbTables, f: &[FiveTuple]) -> u64 {
    let mut sum = 0u64;
    for tuple in f {
        if let Some(id) = t.vip_for(tuple) {
            let sticky = t.vip(id).is_some_and(|v| v.src_ip_sticky);
            if let Some(slot) = t.choose(id, stable_hash(tuple, sticky)) {
                sum += slot.0 as u64 + t.as_entry(slot).gen as u64;
            }
        }
    }
    sum
}

/// `vip_for` alone.
fn pass_vip(t: &LbTables, f: &[FiveTuple]) -> u64 {
    f.iter()
        .map(|tuple| t.vip_for(tuple).map_or(7, |id| id.0 as u64))
        .sum()
}

fn ns_per_packet(
    t: &LbTables,
    f: &[FiveTuple],
    p: fn(&LbTables, &[FiveTuple]) -> u64,
) -> (f64, f64) {
    black_box(p(t, f));
    let start = Instant::now();
    let mut v = Vec::new();
    while start.elapsed() < Duration::from_millis(700) {
        let s = Instant::now();
        black_box(p(black_box(t), f));
        v.push(s.elapsed().as_nanos() as f64 / f.len() as f64);
    }
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn bench(c: &mut Criterion) {
    let servers: Vec<MaglevServer> = (0..100u32)
        .map(|i| MaglevServer {
            addr: IpAddr::V4(Ipv4Addr::from(0xc613_0000u32 + i)),
            weight: 1 + i % 4,
            slot: AsSlot(i),
        })
        .collect();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let s = Instant::now();
        black_box(MaglevTable::build(65537, &servers));
        best = best.min(s.elapsed().as_secs_f64() * 1e3);
    }
    println!("maglev build 65537 entries x 100 servers: {best:.2} ms (best of 5)");
    let big: Vec<MaglevServer> = (0..1000u32)
        .map(|i| MaglevServer {
            slot: AsSlot(i),
            addr: IpAddr::V4(Ipv4Addr::from(0xc613_0000u32 + i)),
            weight: 1,
        })
        .collect();
    let s = Instant::now();
    black_box(MaglevTable::build(100_003, &big));
    println!(
        "maglev build 100003 entries x 1000 servers: {:.2} ms",
        s.elapsed().as_secs_f64() * 1e3
    );

    let one = one_vip();
    let s = Instant::now();
    let t1 = LbTables::build(&one, None);
    println!(
        "LbTables::build, 1 VIP x 100 servers: {:.2} ms",
        s.elapsed().as_secs_f64() * 1e3
    );
    let many = many_vips();
    let s = Instant::now();
    let t2 = LbTables::build(&many, None);
    let first = s.elapsed().as_secs_f64() * 1e3;
    let s = Instant::now();
    let _t3 = LbTables::build(&many, Some(&t2));
    println!(
        "LbTables::build, 202 VIPs: {first:.2} ms, again reusing every Maglev table: {:.2} ms",
        s.elapsed().as_secs_f64() * 1e3
    );

    let f1 = flows(&[[198, 18, 1, 1]]);
    let dsts: Vec<[u8; 4]> = (0..128u32)
        .map(|i| (0xc612_0100u32 + i % 100 + (i / 100) * 0x100).to_be_bytes())
        .collect();
    let f2 = flows(&dsts);
    for (name, t, f) in [
        ("1 VIP, 100 servers", &t1, &f1),
        ("202 VIPs (per-port /32 + prefixes)", &t2, &f2),
    ] {
        let (min, med) = ns_per_packet(t, f, pass);
        println!("vip_for + stable_hash + choose, {name}, 64k flows: min {min:.2} ns/packet, median {med:.2}");
        let (min, med) = ns_per_packet(t, f, pass_vip);
        println!("vip_for alone, {name}, 64k flows: min {min:.2} ns/packet, median {med:.2}");
    }

    let mut g = c.benchmark_group("lb_tables");
    g.throughput(Throughput::Elements(FLOWS as u64));
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    g.bench_function("vip_for+choose/1vip_100as", |b| b.iter(|| pass(&t1, &f1)));
    g.bench_function("vip_for+choose/202vips", |b| b.iter(|| pass(&t2, &f2)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

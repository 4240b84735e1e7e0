//! Software offloads on the worker's fast path: cutting a 64 KiB TCP super-packet into segments
//! (headers written to a stack buffer, payloads summed; the copy to the destination is the
//! caller's and not timed), finishing a partial checksum, and the checksum sum itself.
//! One criterion iteration is one super-packet (or one frame); throughput is in payload bytes.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packet::checksum;
use packet::gso::{finish_checksum, segment_tcp, GsoKind};
use packet::headers::{build_tcp_frame, TcpFrameSpec};
use std::hint::black_box;

fn frame(v6: bool, payload: usize) -> Vec<u8> {
    let mut spec = TcpFrameSpec {
        payload: (0..payload).map(|i| (i * 31) as u8).collect(),
        tcp_options: vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
        partial_checksum: true,
        ..TcpFrameSpec::default()
    };
    if v6 {
        spec.src_ip = "2001:db8::1".parse().unwrap();
        spec.dst_ip = "2001:db8::2".parse().unwrap();
    }
    build_tcp_frame(&spec)
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("gso");
    for (name, v6, payload, mss) in [
        ("tcp4_64k_mss1448", false, 65_000, 1448u16),
        ("tcp6_64k_mss1428", true, 65_000, 1428),
        ("tcp4_64k_mss8948", false, 65_000, 8948),
        ("tcp4_1448_one_segment", false, 1448, 1448),
    ] {
        let f = frame(v6, payload);
        let kind = if v6 { GsoKind::Tcp6 } else { GsoKind::Tcp4 };
        g.throughput(Throughput::Bytes(payload as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0usize;
                segment_tcp(black_box(&f), kind, mss, |h, p| {
                    n += h.len() + p.len();
                    true
                })
                .unwrap();
                black_box(n)
            })
        });
    }
    for len in [1448usize, 65_000] {
        let mut f = frame(false, len);
        let l4 = 34;
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("finish_checksum_{len}"), |b| {
            b.iter(|| finish_checksum(black_box(&mut f), l4, 16).unwrap())
        });
    }
    for len in [20usize, 60, 1448, 65_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("checksum_sum_{len}"), |b| {
            b.iter(|| checksum::fold(checksum::sum(0, black_box(&data))))
        });
    }
    g.finish();
}

criterion_group!(gso, benches);
criterion_main!(gso);

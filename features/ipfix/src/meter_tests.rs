//! Metering and timeouts under a fake clock: what is reported when, with which counts and
//! reasons, and what a full bucket or a full ring does.

use super::*;
use crate::ring::{ring, Consumer};
use packet::headers::tcp;

const T: Timeouts = Timeouts {
    idle_ms: 15_000,
    active_ms: 60_000,
};

struct Rig {
    m: Meter,
    c: MeterCounters,
    out: Producer<FlowRecord>,
    rx: Consumer<FlowRecord>,
}

fn rig(flows: usize, ring_len: usize) -> Rig {
    let (out, rx) = ring(ring_len, FlowRecord::default());
    Rig {
        m: Meter::new(flows).expect("memory"),
        c: MeterCounters::default(),
        out,
        rx,
    }
}

impl Rig {
    fn udp4(&mut self, src: u32, len: u16, now: u64) {
        let k = Key4::new(src, 0xc613_0001, 5000, 53, 17, 2);
        let o = Observation {
            octets: len,
            tcp_flags: 0,
        };
        let p = self.m.stage4(k, o, 0);
        self.m.account4(&self.c, &mut self.out, &p, 1, now, None);
    }

    fn tcp6(&mut self, flags: u8, now: u64) {
        let k = Key6::new(
            0x2001_0db8 << 96 | 1,
            0x2001_0db8 << 96 | 2,
            443,
            50000,
            6,
            1,
        );
        let o = Observation {
            octets: 80,
            tcp_flags: flags,
        };
        let p = self.m.stage6(k, o, 7);
        self.m.account6(&self.c, &mut self.out, &p, 1, now, None);
    }

    fn sweep(&mut self, now: u64) -> bool {
        self.m.sweep(&self.c, &mut self.out, now, T, 1 << 20)
    }

    fn records(&mut self) -> Vec<FlowRecord> {
        let mut v = Vec::new();
        self.rx.drain_into(&mut v, usize::MAX);
        v
    }
}

#[test]
fn an_idle_flow_is_reported_once_with_its_counts_and_times() {
    let mut r = rig(1024, 64);
    let t0 = 1_700_000_000_000;
    r.sweep(t0);
    r.udp4(1, 100, t0);
    r.udp4(1, 200, t0 + 10);
    r.udp4(2, 60, t0 + 20);
    r.sweep(t0 + 14_000);
    assert!(r.records().is_empty(), "not idle yet");
    r.sweep(t0 + 16_000);
    let mut got = r.records();
    got.sort_by_key(|f| f.src);
    assert_eq!(got.len(), 2);
    let f = got[0];
    assert_eq!(f.src, "0.0.0.1".parse::<std::net::IpAddr>().expect("ip"));
    assert_eq!(f.dst, "198.19.0.1".parse::<std::net::IpAddr>().expect("ip"));
    assert_eq!((f.src_port, f.dst_port, f.protocol), (5000, 53, 17));
    assert_eq!((f.packets, f.octets), (2, 300));
    assert_eq!((f.start_ms, f.end_ms), (t0, t0 + 10));
    assert_eq!(
        (f.ingress, f.egress),
        (3, 0),
        "port 2 is ifIndex 3; egress unknown"
    );
    assert_eq!(f.reason, EndReason::Idle);
    assert_eq!((got[1].packets, got[1].octets), (1, 60));
    assert_eq!(r.m.live(), 0);
    assert_eq!((r.c.flows.get(), r.c.records.get()), (2, 2));
    r.sweep(t0 + 40_000);
    assert!(r.records().is_empty(), "reported once");
}

#[test]
fn a_long_flow_reports_deltas_at_the_active_timeout() {
    let mut r = rig(1024, 64);
    let t0 = 1_000_000;
    r.sweep(t0);
    // A packet every second for 150 s.
    let mut reports = Vec::new();
    for s in 0..150u64 {
        r.udp4(9, 100, t0 + s * 1000);
        r.sweep(t0 + s * 1000 + 500);
        reports.extend(r.records());
    }
    assert_eq!(reports.len(), 2, "at 60 s and 120 s");
    assert!(reports.iter().all(|f| f.reason == EndReason::Active));
    assert_eq!(reports[0].start_ms, t0);
    assert_eq!(reports[0].packets, 61, "packets 0..=60 s");
    assert_eq!(
        reports[1].start_ms,
        t0 + 61_000,
        "the next interval starts afresh"
    );
    // Then it goes idle: the rest is reported once, as idle.
    r.sweep(t0 + 149_000 + 16_000);
    let last = r.records();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].reason, EndReason::Idle);
    let total: u64 = reports.iter().chain(&last).map(|f| f.packets).sum();
    assert_eq!(total, 150, "deltas add up to every packet");
    let octets: u64 = reports.iter().chain(&last).map(|f| f.octets).sum();
    assert_eq!(octets, 150 * 100);
}

#[test]
fn fin_or_rst_ends_a_flow_sooner_and_flags_are_ored() {
    let mut r = rig(1024, 64);
    let t0 = 5_000;
    r.sweep(t0);
    r.tcp6(tcp::SYN, t0);
    r.tcp6(tcp::ACK, t0 + 1);
    r.tcp6(tcp::FIN | tcp::ACK, t0 + 2);
    r.sweep(t0 + 2 + TCP_END_MS + 600);
    let got = r.records();
    assert_eq!(got.len(), 1);
    let f = got[0];
    assert_eq!(f.reason, EndReason::EndOfFlow);
    assert_eq!(f.tcp_flags, tcp::SYN | tcp::ACK | tcp::FIN);
    assert_eq!((f.packets, f.octets, f.egress, f.ingress), (3, 240, 7, 2));
    assert!(f.src.is_ipv6());
}

#[test]
fn a_full_bucket_evicts_its_oldest_flow_and_reports_it() {
    let mut r = rig(4, 64); // one bucket of four
    let t0 = 10_000;
    for i in 0..4 {
        r.udp4(i, 100, t0 + u64::from(i));
    }
    assert!(r.records().is_empty());
    r.udp4(99, 100, t0 + 10);
    let got = r.records();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].reason, EndReason::LackOfResources);
    assert_eq!(
        got[0].src,
        "0.0.0.0".parse::<std::net::IpAddr>().expect("ip")
    );
    assert_eq!(r.c.evicted.get(), 1);
    assert_eq!(r.m.live(), 4);
}

#[test]
fn a_full_ring_counts_evictions_lost_and_holds_timeouts_back() {
    let mut r = rig(4, 2);
    let t0 = 10_000;
    r.sweep(t0);
    for i in 0..4 {
        r.udp4(i, 100, t0);
    }
    // Two evictions fill the ring, the third is lost.
    for i in 10..13 {
        r.udp4(i, 100, t0 + 1);
    }
    assert_eq!(r.c.ring_drops.get(), 1);
    assert_eq!(r.c.records.get(), 2);
    // The ring is full: idle flows wait in the table.
    r.sweep(t0 + 20_000);
    assert_eq!(r.m.live(), 4);
    assert_eq!(r.records().len(), 2);
    // Room again: the next sweep reports them.
    let mut reported = 0;
    for s in 1..10 {
        r.sweep(t0 + 20_000 + s * 1000);
        reported += r.records().len();
    }
    assert_eq!(reported, 4);
    assert_eq!(r.m.live(), 0);
    assert_eq!(r.c.ring_drops.get(), 1, "timeouts never drop");
}

#[test]
fn a_flush_reports_every_flow_as_forced() {
    let mut r = rig(1 << 12, 1 << 12);
    let t0 = 10_000;
    r.sweep(t0);
    for i in 0..1000 {
        r.udp4(i, 64, t0);
    }
    r.tcp6(tcp::SYN, t0);
    r.m.flush();
    let mut rounds = 0;
    while !r.m.sweep(&r.c, &mut r.out, t0 + 1, T, 64) {
        rounds += 1;
    }
    assert!(rounds > 1, "bounded per call");
    let got = r.records();
    assert_eq!(got.len(), 1001);
    let forced = got.iter().filter(|f| f.reason == EndReason::Forced).count();
    assert_eq!(
        forced as u64,
        1001 - r.c.evicted.get(),
        "the rest were evicted"
    );
    assert_eq!(r.m.live(), 0);
}

#[test]
fn the_sweep_follows_time_not_calls() {
    let mut r = rig(1 << 16, 1 << 12); // 16k buckets
    let t0 = 10_000;
    r.sweep(t0);
    r.udp4(1, 64, t0);
    // 100 ms of a 1 s round visit a tenth of the buckets, however many calls.
    for _ in 0..100 {
        r.sweep(t0 + 100);
    }
    assert_eq!(r.m.v4.cursor(), (1 << 14) / 10);
    assert!(r.records().is_empty());
    // Past the idle timeout, a round later at most, the flow is out.
    r.sweep(t0 + 15_000);
    r.sweep(t0 + 16_000);
    assert_eq!(r.records().len(), 1);
}

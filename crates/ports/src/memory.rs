//! The memory port (for benchmarks): `MemoryRx` writes a flow set's frames into fresh buffers,
//! `MemoryTx` copies every packet out into a sink and frees it, like DPDK's net_null with copy=1.
//! It does the real per-packet work of a port without a kernel; it never recycles untouched
//! buffers, never allocates after construction and never takes a lock.

use crate::flows::FlowSet;
use graph::{Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::BufferPool;
use std::sync::Arc;

/// Size of `MemoryTx`'s sink: any packet (lengths are 16-bit) fits.
pub const SINK_SIZE: usize = 1 << 16;

/// Packets up to this size are copied to the sink as one fixed-size block.
const SMALL: usize = 64;

/// Input node that fills up to one vector of fresh buffers per poll with a flow set's frames,
/// flow after flow (round-robin), until an optional packet limit.
///
/// The limit counts packets offered: received ones plus those that found no free buffer
/// (counted in `rx_drops`), so a run with a limit always ends. Frames larger than the pool's
/// data size cannot be received: every packet offered is then counted in `rx_drops`.
pub struct MemoryRx {
    name: String,
    port_id: u16,
    flows: FlowSet,
    cursor: usize,
    limited: bool,
    remaining: u64,
    next: String,
    stats: Arc<PortStats>,
}

impl MemoryRx {
    /// A memory port `port_id` sending `flows` to the node named `next`, `limit` packets in all
    /// (`None`: forever).
    pub fn new(
        node_name: String,
        port_id: u16,
        flows: FlowSet,
        limit: Option<u64>,
        next: String,
        stats: Arc<PortStats>,
    ) -> MemoryRx {
        MemoryRx {
            name: node_name,
            port_id,
            flows,
            cursor: 0,
            limited: limit.is_some(),
            remaining: limit.unwrap_or(u64::MAX),
            next,
            stats,
        }
    }

    /// The flows it sends.
    pub fn flows(&self) -> &FlowSet {
        &self.flows
    }

    /// Packets still to offer (`None` without a limit).
    pub fn remaining(&self) -> Option<u64> {
        self.limited.then_some(self.remaining)
    }
}

impl InputNode for MemoryRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    #[inline]
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let want = if self.limited {
            (out.len() as u64).min(self.remaining) as usize
        } else {
            out.len()
        };
        if want == 0 {
            return (0, Dispatch::AllTo(0));
        }
        if self.limited {
            self.remaining -= want as u64;
        }
        let out = &mut out[..want];
        let mut n = cx.pool.alloc_batch(out);
        let len = self.flows.frame_len();
        if len <= cx.pool.data_size() {
            self.cursor = self
                .flows
                .fill(cx.pool, &out[..n], self.cursor, self.port_id);
        } else {
            cx.pool.free_batch(&out[..n]);
            n = 0;
        }
        self.stats.rx_packets.add(n as u64);
        self.stats.rx_bytes.add((n * len) as u64);
        if n < want {
            self.stats.rx_drops.add((want - n) as u64);
        }
        (n, Dispatch::AllTo(0))
    }

    fn is_finished(&self) -> bool {
        self.limited && self.remaining == 0
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("memory rx: port {}, {} bytes", m.rx_port, m.length)
    }
}

/// Output node that copies every packet's bytes into a sink (so they are really read), counts
/// them and frees the buffers.
pub struct MemoryTx {
    name: String,
    port_id: u16,
    stats: Arc<PortStats>,
    sink: Box<[u8; SINK_SIZE]>,
}

impl MemoryTx {
    /// A memory port `port_id`'s transmit side.
    pub fn new(node_name: String, port_id: u16, stats: Arc<PortStats>) -> MemoryTx {
        MemoryTx {
            name: node_name,
            port_id,
            stats,
            sink: Box::new([0u8; SINK_SIZE]),
        }
    }

    /// The port number this node stands for.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The sink: the bytes of the last packet sent are at its start.
    pub fn sink(&self) -> &[u8] {
        &self.sink[..]
    }
}

impl Node for MemoryTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    #[inline]
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        let mut bytes = 0usize;
        for &b in frame {
            let m = cx.pool.meta(b);
            let (off, len) = (m.data_offset as usize, m.length as usize);
            let slot = cx.pool.slot(b);
            // Small packets: one fixed 64-byte copy (bytes past the packet are still inside the
            // slot) instead of a call to memcpy.
            if let (true, Some(src)) = (
                len <= SMALL,
                slot.get(off..).and_then(|s| s.first_chunk::<SMALL>()),
            ) {
                if let Some(dst) = self.sink.first_chunk_mut::<SMALL>() {
                    *dst = *src;
                }
            } else if let Some(src) = slot.get(off..off + len) {
                self.sink[..len].copy_from_slice(src);
            }
            bytes += len;
        }
        cx.pool.free_batch(frame);
        self.stats.tx_packets.add(frame.len() as u64);
        self.stats.tx_bytes.add(bytes as u64);
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "memory tx: port {}, {} bytes",
            self.port_id,
            pool.meta(buffer).length
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{node, pool, with_cx};
    use graph::{GraphBuilder, NodeContext};
    use packet::headers::UdpFrameSpec;
    use packet::{PoolConfig, VECTOR_SIZE};
    use std::net::IpAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn flows(n: u32, frame_size: usize) -> FlowSet {
        let dsts: Vec<IpAddr> = (0..4u8).map(|i| IpAddr::from([198, 19, i, 1])).collect();
        let base = UdpFrameSpec {
            frame_size,
            ..UdpFrameSpec::default()
        };
        FlowSet::new(&base, n, &dsts).expect("flows")
    }

    fn rx(flows: FlowSet, limit: Option<u64>, stats: &Arc<PortStats>) -> MemoryRx {
        MemoryRx::new(
            "mem0-rx".into(),
            3,
            flows,
            limit,
            "mem0-tx".into(),
            stats.clone(),
        )
    }

    /// Checks every packet against the flow set, in round-robin order, then passes it on.
    struct Check {
        flows: FlowSet,
        cursor: usize,
        scratch: Vec<u8>,
        /// Packets seen and packets that differed, read by the test after the run.
        seen: Arc<AtomicUsize>,
        bad: Arc<AtomicUsize>,
    }
    impl Node for Check {
        fn name(&self) -> &str {
            "check"
        }
        fn next_nodes(&self) -> Vec<String> {
            vec!["mem0-tx".into()]
        }
        fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
            for &b in frame {
                let n = self.flows.write(self.cursor, &mut self.scratch);
                let m = cx.pool.meta(b);
                if cx.pool.data(b) != &self.scratch[..n] || m.rx_port != 3 {
                    self.bad.fetch_add(1, Ordering::Relaxed);
                }
                self.cursor = (self.cursor + 1) % self.flows.len();
            }
            self.seen.fetch_add(frame.len(), Ordering::Relaxed);
            Dispatch::AllTo(0)
        }
    }

    #[test]
    fn rx_to_tx_counts_and_returns_every_buffer() {
        let stats = Arc::new(PortStats::default());
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(rx(flows(100, 64), Some(1000), &stats)))
            .add_node(Box::new(MemoryTx::new("mem0-tx".into(), 3, stats.clone())));
        let mut g = b.build(0, 1).expect("graph");
        let mut p = pool(1024, 2048);
        let mut polls = 0;
        while !g.is_finished() {
            g.run_once(&mut p);
            polls += 1;
        }
        assert_eq!(polls, 4); // 256 + 256 + 256 + 232
        assert_eq!(stats.rx_packets.get(), 1000);
        assert_eq!(stats.rx_bytes.get(), 60_000);
        assert_eq!(stats.tx_packets.get(), 1000);
        assert_eq!(stats.tx_bytes.get(), 60_000);
        assert_eq!(stats.rx_drops.get() + stats.tx_drops.get(), 0);
        assert_eq!(p.available(), p.capacity());
        let s = g.stats();
        assert_eq!(s.nodes[node(&s, "mem0-tx")].packets.get(), 1000);
        // Finished: further polls bring nothing.
        assert_eq!(g.run_once(&mut p), 0);
        assert_eq!(stats.rx_packets.get(), 1000);
    }

    #[test]
    fn frames_are_the_flows_in_round_robin_order() {
        let cases = [
            (64, 128, 2048),
            (200, 128, 2048),
            (1518, 128, 2048),
            (1004, 130, 1000),
        ];
        for (frame_size, headroom, data_size) in cases {
            let stats = Arc::new(PortStats::default());
            let (seen, bad) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let f = flows(37, frame_size);
            let exact_path = headroom + f.padded_len() > {
                let p = BufferPool::new(PoolConfig {
                    buffers: 1,
                    headroom: headroom as u16,
                    data_size,
                    try_hugepages: false,
                })
                .expect("pool");
                p.stride()
            };
            assert_eq!(
                exact_path,
                frame_size == 1004,
                "the last case takes the exact-copy path"
            );
            let mut b = GraphBuilder::new();
            b.add_input(Box::new(MemoryRx::new(
                "mem0-rx".into(),
                3,
                f,
                Some(600),
                "check".into(),
                stats.clone(),
            )))
            .add_node(Box::new(Check {
                flows: flows(37, frame_size),
                cursor: 0,
                scratch: vec![0; 2048],
                seen: seen.clone(),
                bad: bad.clone(),
            }))
            .add_node(Box::new(MemoryTx::new("mem0-tx".into(), 3, stats.clone())));
            let mut g = b.build(0, 1).expect("graph");
            let mut p = BufferPool::new(PoolConfig {
                buffers: 512,
                headroom: headroom as u16,
                data_size,
                try_hugepages: false,
            })
            .expect("pool");
            while !g.is_finished() {
                g.run_once(&mut p);
            }
            assert_eq!(seen.load(Ordering::Relaxed), 600);
            assert_eq!(bad.load(Ordering::Relaxed), 0, "frame size {frame_size}");
            assert_eq!(stats.tx_packets.get(), 600);
            assert_eq!(p.available(), p.capacity());
        }
    }

    #[test]
    fn limit_stops_rx() {
        let stats = Arc::new(PortStats::default());
        let mut r = rx(flows(10, 64), Some(300), &stats);
        let mut p = pool(1024, 2048);
        let mut out = [0u32; VECTOR_SIZE];
        let mut nexts = [0u16; VECTOR_SIZE];
        let mut counts = Vec::new();
        for _ in 0..4 {
            let (n, d) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
            assert_eq!(d, Dispatch::AllTo(0));
            counts.push(n);
            p.free_batch(&out[..n]);
        }
        assert_eq!(counts, vec![256, 44, 0, 0]);
        assert!(r.is_finished());
        assert_eq!(r.remaining(), Some(0));
        assert_eq!(stats.rx_packets.get(), 300);
        let unlimited = rx(flows(10, 64), None, &stats);
        assert!(!unlimited.is_finished());
        assert_eq!(unlimited.remaining(), None);
    }

    #[test]
    fn pool_exhaustion_counts_drops() {
        let stats = Arc::new(PortStats::default());
        let mut r = rx(flows(10, 64), Some(1000), &stats);
        let mut p = pool(100, 2048);
        let mut out = [0u32; VECTOR_SIZE];
        let mut nexts = [0u16; VECTOR_SIZE];
        let (n, _) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
        assert_eq!(n, 100);
        assert_eq!(stats.rx_drops.get(), 156);
        let (n2, _) = with_cx(&mut p, |cx| r.poll(cx, &mut out[100..], &mut nexts));
        assert_eq!(n2, 0);
        assert_eq!(stats.rx_drops.get(), 312);
        p.free_batch(&out[..100]);
        assert_eq!(r.remaining(), Some(1000 - 256 - 156));
        assert_eq!(p.available(), p.capacity());
    }

    #[test]
    fn frames_larger_than_a_buffer_are_dropped() {
        let stats = Arc::new(PortStats::default());
        let mut r = rx(flows(10, 1518), None, &stats);
        let mut p = pool(512, 1024);
        let mut out = [0u32; VECTOR_SIZE];
        let mut nexts = [0u16; VECTOR_SIZE];
        let (n, _) = with_cx(&mut p, |cx| r.poll(cx, &mut out, &mut nexts));
        assert_eq!(n, 0);
        assert_eq!(stats.rx_drops.get(), 256);
        assert_eq!(p.available(), p.capacity());
    }

    #[test]
    fn tx_reads_every_byte_into_the_sink() {
        let stats = Arc::new(PortStats::default());
        let mut tx = MemoryTx::new("mem0-tx".into(), 1, stats.clone());
        let mut p = pool(4, 2048);
        let mut bufs = [0u32; 2];
        assert_eq!(p.alloc_batch(&mut bufs), 2);
        assert!(p.write_packet(bufs[0], &[9u8; 100]));
        assert!(p.write_packet(bufs[1], &[7u8; 60]));
        let d = with_cx(&mut p, |cx| tx.process(cx, &bufs, &mut [0u16; 2]));
        assert_eq!(d, Dispatch::Consumed);
        // The last packet is at the start (a small one is copied as a 64-byte block); the
        // 100-byte one before it was copied exactly.
        assert_eq!(&tx.sink()[..60], &[7u8; 60][..]);
        assert_eq!(&tx.sink()[64..100], &[9u8; 36][..]);
        assert_eq!(tx.sink()[100], 0);
        assert_eq!(stats.tx_packets.get(), 2);
        assert_eq!(stats.tx_bytes.get(), 160);
        assert_eq!(p.available(), p.capacity());
        assert!(tx.trace(&p, bufs[0]).starts_with("memory tx: port 1"));
    }

    /// Release-mode cost of MemoryRx -> MemoryTx through the real dispatcher:
    /// `cargo test --release -p vecplane-ports -- --ignored --nocapture memory_rx_tx_cycles`.
    #[test]
    #[ignore]
    fn memory_rx_tx_cycles() {
        let stats = Arc::new(PortStats::default());
        let dsts: Vec<IpAddr> = (0..16u8).map(|i| IpAddr::from([198, 19, i, 1])).collect();
        let set = FlowSet::new(&UdpFrameSpec::default(), 65536, &dsts).expect("flows");
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(rx(set, None, &stats)))
            .add_node(Box::new(MemoryTx::new("mem0-tx".into(), 3, stats.clone())));
        let mut g = b.build(0, graph::measure_tsc_hz(50)).expect("graph");
        let mut p = BufferPool::new(PoolConfig::default()).expect("pool");
        for _ in 0..20_000 {
            g.run_once(&mut p);
        }
        let s = g.stats();
        let (rx_id, tx_id) = (node(&s, "mem0-rx"), node(&s, "mem0-tx"));
        // 40 segments of 5000 vectors; the best and the median segment are reported (other
        // processes on the host inflate some segments).
        let mut segs: Vec<(f64, f64, f64)> = Vec::new();
        for _ in 0..40 {
            let (rx0, tx0) = (s.nodes[rx_id].clocks.get(), s.nodes[tx_id].clocks.get());
            let before = stats.rx_packets.get();
            let t0 = graph::rdtsc();
            for _ in 0..5000 {
                g.run_once(&mut p);
            }
            let cycles = graph::rdtsc() - t0;
            let pkts = (stats.rx_packets.get() - before) as f64;
            assert_eq!(pkts as usize, 5000 * VECTOR_SIZE);
            segs.push((
                cycles as f64 / pkts,
                (s.nodes[rx_id].clocks.get() - rx0) as f64 / pkts,
                (s.nodes[tx_id].clocks.get() - tx0) as f64 / pkts,
            ));
        }
        assert_eq!(stats.tx_packets.get(), stats.rx_packets.get());
        segs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best, median) = (segs[0], segs[segs.len() / 2]);
        let hz = graph::measure_tsc_hz(100) as f64;
        println!(
            "memory rx -> tx, 64 B, 65536 flows, pool on {}: TSC cycles/packet in all: best {:.1} \
             (rx node {:.1}, tx node {:.1}), median {:.1} (rx {:.1}, tx {:.1}); node clocks include \
             enqueueing; best {:.1} Mpps at {:.2} GHz TSC",
            p.backing(),
            best.0,
            best.1,
            best.2,
            median.0,
            median.1,
            median.2,
            hz / best.0 / 1e6,
            hz / 1e9,
        );
        assert_eq!(p.available(), p.capacity());
    }
}

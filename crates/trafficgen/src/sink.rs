//! `gen sink`: the counting loop. One AF_XDP socket on (interface, queue) with vecplane's XDP
//! program redirecting every frame of that queue to it (which also gives a veth the NAPI its
//! peer's transmissions need); every buffer is lent on the fill ring once, and each round
//! counts the frames on the rx ring and hands their buffers straight back on the fill ring
//! (no pool, no metadata: a few bytes of ring per frame, so the sink outruns any sender).
//!
//! It never looks inside a frame, never allocates in the loop, and always ends: by `--count`,
//! `--seconds`, `--idle-seconds` without frames once some arrived, or SIGINT/SIGTERM. While it
//! runs, the kernel stack of that interface's queue sees nothing (ARP included).

use crate::args::SinkPlan;
use crate::report::{rate, Progress, SinkSummary, StopReason};
use crate::sys;
use afxdp::direct::BatchSocket;
use afxdp::direct::RECYCLE_BATCH;
use afxdp::{AfXdpConfig, ModeChoice, Umem};
use anyhow::{Context, Result};
use graph::rdtsc;
use packet::{BufferPool, PoolConfig};

/// Rx and fill ring entries, and buffers (7 ms of frames at 2.3 Mpps).
pub const RX_RING: u32 = 16384;
/// Receive-side rings of the sending socket: the smallest the kernel takes (unused).
const UNUSED_RING: u32 = 64;

/// How to run `gen sink`, besides the plan.
#[derive(Clone, Copy, Debug)]
pub struct SinkRun {
    /// XDP mode to ask for.
    pub mode: ModeChoice,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Print progress once a second.
    pub progress: bool,
}

/// Count as `plan` says; `stop` is polled every round.
pub fn run_sink(plan: &SinkPlan, run: SinkRun, stop: &dyn Fn() -> bool) -> Result<SinkSummary> {
    // As many buffers as the fill ring holds: then it always has room for recycled ones.
    let mut pool = BufferPool::new(PoolConfig {
        buffers: RX_RING,
        headroom: 128,
        data_size: 2048,
        try_hugepages: false,
    })
    .context("cannot make the receive buffer pool")?;
    let umem = Umem::new(&pool).context("cannot use the buffer pool as AF_XDP memory")?;
    let mut config = AfXdpConfig::new(plan.interface.clone(), plan.queue, 0);
    config.mode = run.mode;
    config.rx_ring = RX_RING;
    config.fill_ring = RX_RING;
    config.tx_ring = UNUSED_RING;
    config.comp_ring = UNUSED_RING;
    let mut sock = BatchSocket::open(&umem, &config).with_context(|| {
        format!(
            "cannot open an AF_XDP socket on {} queue {}",
            plan.interface, plan.queue
        )
    })?;
    sock.refill(&mut pool);
    sock.wake_rx();
    // One line saying the socket is ready (scripts wait for it before they start sending).
    eprintln!(
        "gen sink {} queue {}: receiving ({} XDP, {})",
        plan.interface,
        plan.queue,
        sock.xdp_mode(),
        if sock.zerocopy() { "zero-copy" } else { "copy" }
    );

    let tsc_hz = run.tsc_hz.max(1);
    let limit = plan.count.unwrap_or(u64::MAX);
    let (mut received, mut bytes, mut invalid) = (0u64, 0u64, 0u64);
    let (mut first, mut last) = (None::<u64>, 0u64);
    let cpu_start = sys::thread_cpu_seconds();
    let start = rdtsc();
    let deadline = start.saturating_add((plan.seconds * tsc_hz as f64) as u64);
    let idle = ((plan.idle_seconds * tsc_hz as f64) as u64).max(1);
    let mut progress = Progress::new(
        format!("gen sink {}", plan.interface),
        run.progress,
        tsc_hz,
        start,
    );
    let stopped_by = loop {
        let want = (RECYCLE_BATCH as u64).min(limit - received) as u32;
        let r = sock.recycle_received(&pool, want);
        let now = rdtsc();
        if r.packets > 0 {
            received += r.packets as u64;
            bytes += r.bytes;
            first.get_or_insert(now);
            last = now;
        }
        invalid += r.bad;
        sock.wake_rx();
        if received >= limit {
            break StopReason::Count;
        }
        if stop() {
            break StopReason::Signal;
        }
        if now >= deadline {
            break StopReason::Seconds;
        }
        if first.is_some() && now.wrapping_sub(last) >= idle {
            break StopReason::Idle;
        }
        progress.tick(now, received, bytes);
    };
    let cpu_seconds = sys::thread_cpu_seconds() - cpu_start;
    let seconds = match first {
        Some(f) => last.wrapping_sub(f) as f64 / tsc_hz as f64,
        None => 0.0,
    };
    let stats = sock.statistics().unwrap_or_default();
    Ok(SinkSummary {
        interface: plan.interface.clone(),
        queue: plan.queue,
        xdp_mode: sock.xdp_mode().as_str(),
        received,
        bytes,
        seconds,
        pps: rate(received, seconds),
        kernel_rx_dropped: stats.rx_dropped + stats.rx_ring_full,
        kernel_rx_ring_full: stats.rx_ring_full,
        invalid,
        cpu_seconds,
        stopped_by,
    })
}

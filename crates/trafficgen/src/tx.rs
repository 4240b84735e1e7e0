//! `gen tx`: the sending loop. One AF_XDP socket on (interface, queue) whose UMEM is a pool of
//! exactly as many buffers as the tx ring has entries (so the ring can never overflow); every
//! buffer gets flow 0's frame once, and each round takes free buffers, rewrites their 4 per-flow
//! bytes, puts them on the tx ring and makes one sendto (copy mode transmits inside it);
//! completed buffers go back to the pool. Pacing is by the TSC.
//!
//! The loop never allocates, never makes more than one syscall per round, and always ends: by
//! `--count`, by `--seconds`, or by SIGINT/SIGTERM, then waits at most one second for the
//! frames still in flight. Frames arriving on the bound queue are dropped by the kernel (the
//! socket lends no receive buffers).

use crate::args::TxPlan;
use crate::frames::{FlowFrames, FrameRecipe};
use crate::pace::Pacer;
use crate::report::{rate, Progress, StopReason, TxSummary};
use crate::sys;
use afxdp::direct::BatchSocket;
use afxdp::{AfXdpConfig, ModeChoice, Umem};
use anyhow::{bail, Context, Result};
use graph::rdtsc;
use packet::{BufferPool, PoolConfig};

/// Tx ring entries, and buffers in the pool.
pub const TX_RING: u32 = 2048;
/// Receive-side rings of the sending socket: the smallest the kernel takes (unused).
const UNUSED_RING: u32 = 64;
/// Paced sending releases frames in groups of this much traffic (at most one batch).
const PACED_GROUP_SECONDS: f64 = 50e-6;
/// Longest wait for frames in flight after the loop stopped.
const DRAIN_SECONDS: f64 = 1.0;

/// How to run `gen tx`, besides the plan.
#[derive(Clone, Copy, Debug)]
pub struct TxRun {
    /// XDP mode to ask for.
    pub mode: ModeChoice,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Print progress once a second.
    pub progress: bool,
}

/// Send as `plan` says; `stop` is polled every round.
pub fn run_tx(plan: &TxPlan, run: TxRun, stop: &dyn Fn() -> bool) -> Result<TxSummary> {
    let frames = FlowFrames::new(&FrameRecipe {
        dst_mac: plan.dst_mac,
        src_mac: plan.src_mac,
        src_ip: plan.src_ip,
        dst_ip: plan.dst_ip,
        flows: plan.flows,
        frame_size: plan.frame_size,
    })?;
    let mut pool = BufferPool::new(PoolConfig {
        buffers: TX_RING,
        headroom: 128,
        data_size: 2048,
        try_hugepages: false,
    })
    .context("cannot make the transmit buffer pool")?;
    let frame_len = frames.frame_len();
    if frame_len > pool.data_size() {
        bail!(
            "frames of {frame_len} bytes do not fit a {}-byte buffer",
            pool.data_size()
        );
    }
    // Every buffer holds flow 0's frame from now on; sending rewrites the per-flow bytes only.
    let mut all = vec![0u32; pool.capacity()];
    let n = pool.alloc_batch(&mut all);
    for &b in &all[..n] {
        if !pool.write_packet(b, frames.template()) {
            bail!("internal: a frame did not fit its buffer");
        }
    }
    pool.free_batch(&all[..n]);
    drop(all);

    let umem = Umem::new(&pool).context("cannot use the buffer pool as AF_XDP memory")?;
    let mut config = AfXdpConfig::new(plan.interface.clone(), plan.queue, 0);
    config.mode = run.mode;
    config.tx_ring = TX_RING;
    config.comp_ring = TX_RING;
    config.rx_ring = UNUSED_RING;
    config.fill_ring = UNUSED_RING;
    let mut sock = BatchSocket::open(&umem, &config).with_context(|| {
        format!(
            "cannot open an AF_XDP socket on {} queue {}",
            plan.interface, plan.queue
        )
    })?;
    let facts = sys::interface_facts(&plan.interface)?;
    let dropped_before = sys::interface_tx_dropped(&plan.interface, facts.index);

    let tsc_hz = run.tsc_hz.max(1);
    let headroom = pool.headroom();
    let flows = frames.flows();
    let mut batch = vec![0u32; plan.batch];
    let mut completions = vec![0u32; TX_RING as usize];
    let limit = plan.count.unwrap_or(u64::MAX);
    let (mut queued, mut completed) = (0u64, 0u64);
    let (mut tx_ring_full, mut kicks, mut kick_ticks) = (0u64, 0u64, 0u64);
    let mut next_flow = 0usize;

    let cpu_start = sys::thread_cpu_seconds();
    let start = rdtsc();
    let deadline = start.saturating_add((plan.seconds * tsc_hz as f64) as u64);
    let mut pacer = Pacer::new(
        plan.rate,
        tsc_hz,
        start,
        PACED_GROUP_SECONDS,
        plan.batch as u64,
    );
    let mut progress = Progress::new(
        format!("gen tx {}", plan.interface),
        run.progress,
        tsc_hz,
        start,
    );
    let stopped_by = loop {
        let now = rdtsc();
        let done = sock.take_completed(&pool, &mut completions);
        if done > 0 {
            pool.free_batch(&completions[..done]);
            completed += done as u64;
        }
        if stop() {
            break StopReason::Signal;
        }
        if now >= deadline {
            break StopReason::Seconds;
        }
        if queued >= limit {
            break StopReason::Count;
        }
        let want = (plan.batch as u64)
            .min(limit - queued)
            .min(pacer.allowed(now)) as usize;
        if want > 0 {
            let got = pool.alloc_batch(&mut batch[..want]);
            if got < want {
                tx_ring_full += 1;
            }
            for &b in &batch[..got] {
                let (meta, slot) = pool.slot_mut(b);
                meta.length = frame_len as u16;
                frames.patch(next_flow, &mut slot[headroom..]);
                next_flow += 1;
                if next_flow == flows {
                    next_flow = 0;
                }
            }
            let placed = sock.transmit(&pool, &batch[..got]);
            if placed < got {
                // Cannot happen with a pool no larger than the ring; kept safe anyway.
                pool.free_batch(&batch[placed..got]);
                tx_ring_full += 1;
            }
            queued += placed as u64;
            pacer.sent(placed as u64);
        }
        if sock.tx_pending() > 0 {
            let t0 = rdtsc();
            if sock.kick_tx() {
                kicks += 1;
                kick_ticks += rdtsc().wrapping_sub(t0);
            }
        }
        progress.tick(now, completed, completed * frame_len as u64);
    };

    // Frames still in flight: kick and collect until all are back or a second passed.
    let mut end = rdtsc();
    let drain_deadline = end.saturating_add((DRAIN_SECONDS * tsc_hz as f64) as u64);
    while completed < queued && end < drain_deadline {
        if sock.tx_pending() > 0 {
            let t0 = rdtsc();
            if sock.kick_tx() {
                kicks += 1;
                kick_ticks += rdtsc().wrapping_sub(t0);
            }
        }
        let done = sock.take_completed(&pool, &mut completions);
        if done > 0 {
            pool.free_batch(&completions[..done]);
            completed += done as u64;
        }
        end = rdtsc();
    }
    let ticks = end.wrapping_sub(start);
    let seconds = ticks as f64 / tsc_hz as f64;
    let cpu_seconds = sys::thread_cpu_seconds() - cpu_start;
    let stats = sock.statistics().ok();
    let completion_errors = stats.map(|s| s.tx_invalid_descs).unwrap_or(0) + sock.wakeup_errors();
    let interface_dropped = match (
        dropped_before,
        sys::interface_tx_dropped(&plan.interface, facts.index),
    ) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    // A frame the device refused was still completed (copy mode frees it either way).
    let sent = completed.saturating_sub(interface_dropped.unwrap_or(0));
    let per_packet = |t: u64| {
        if completed > 0 {
            t as f64 / completed as f64
        } else {
            0.0
        }
    };
    Ok(TxSummary {
        interface: plan.interface.clone(),
        queue: plan.queue,
        method: "af-xdp",
        xdp_mode: sock.xdp_mode().as_str(),
        frame_size: plan.frame_size,
        flows: plan.flows,
        rate: plan.rate,
        offered: completed,
        sent,
        bytes: sent * frame_len as u64,
        seconds,
        pps: rate(sent, seconds),
        offered_pps: rate(completed, seconds),
        tx_ring_full,
        completion_errors,
        interface_dropped,
        kicks,
        cycles_per_packet: per_packet(ticks),
        kick_cycles_per_packet: per_packet(kick_ticks),
        cpu_seconds,
        cpu_cycles_per_packet: per_packet((cpu_seconds * tsc_hz as f64) as u64),
        stopped_by,
    })
}

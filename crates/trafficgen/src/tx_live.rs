//! `gen tx --method xdp-live`: the kernel builds each frame from the template, runs vecplane's
//! generator XDP program on it (random flow: UDP source port and checksum) and redirects it out
//! of the interface in bulk (`afxdp::direct::LiveFrames`). Each call sends one group of frames
//! on this CPU at full speed; a call costs about 80 us besides its frames, so paced groups are
//! one millisecond of traffic (at least 64 frames) and unpaced ones 16384 frames; the loop
//! checks the clock, `--count` and the stop flag between groups.
//!
//! It never allocates in the loop and always ends (count, seconds, signal). What the device
//! accepted and refused is read from its driver counters (`ethtool -S`: `*_xdp_xmit`,
//! `*_xdp_xmit_errors`) before and after, when the driver has them (veth does).

use crate::args::TxPlan;
use crate::frames::{FlowFrames, FrameRecipe, FIRST_SRC_PORT};
use crate::pace::Pacer;
use crate::report::{rate, Progress, StopReason, TxSummary};
use crate::sys;
use crate::tx::TxRun;
use afxdp::direct::{LiveFrames, LiveFramesSpec};
use anyhow::Result;
use graph::rdtsc;
use packet::headers::{eth, ip4, ip6, udp};

/// Frames per call when unpaced (a few milliseconds of work).
const UNPACED_GROUP: u64 = 16384;
/// Paced calls send this much traffic at once ...
const PACED_GROUP_SECONDS: f64 = 1e-3;
/// ... but at least this many frames.
const PACED_GROUP_MIN: u64 = 64;
/// Frames the kernel builds and flushes to the device at once.
const KERNEL_BATCH: u32 = 64;

/// Sums of the driver counters that say what the device did with redirected frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct XmitCounters {
    accepted: u64,
    refused: u64,
}

fn xmit_counters(ifname: &str) -> Option<XmitCounters> {
    let stats = sys::device_stats(ifname)?;
    let mut c = XmitCounters::default();
    let mut seen = false;
    for (name, v) in stats {
        if name.ends_with("xdp_xmit") {
            c.accepted += v;
            seen = true;
        } else if name.ends_with("xdp_xmit_errors") || name.ends_with("xdp_xmit_err") {
            c.refused += v;
        }
    }
    seen.then_some(c)
}

/// Frames sent first to check that the interface takes live frames at all.
const PROBE_FRAMES: u64 = 64;

/// What a live-frame run came to.
#[derive(Debug)]
pub enum LiveOutcome {
    /// It ran.
    Done(TxSummary),
    /// Live frames cannot be used here (why); nothing else was sent.
    Unusable(String),
}

/// Send as `plan` says with live frames; `stop` is polled between groups.
pub fn run_tx_live(plan: &TxPlan, run: TxRun, stop: &dyn Fn() -> bool) -> Result<LiveOutcome> {
    let frames = FlowFrames::new(&FrameRecipe {
        dst_mac: plan.dst_mac,
        src_mac: plan.src_mac,
        src_ip: plan.src_ip,
        dst_ip: plan.dst_ip,
        flows: plan.flows,
        frame_size: plan.frame_size,
    })?;
    let l3 = if plan.src_ip.is_ipv4() {
        ip4::MIN_HEADER_LEN
    } else {
        ip6::HEADER_LEN
    };
    let src_port_at = eth::HEADER_LEN + l3;
    let live = match LiveFrames::new(&LiveFramesSpec {
        ifname: &plan.interface,
        frame: frames.template(),
        flows: plan.flows,
        first_src_port: FIRST_SRC_PORT,
        src_port_at,
        udp_checksum_at: src_port_at + udp::CHECKSUM,
        batch: KERNEL_BATCH,
        keep_dispatched: true,
        new_flows_per_second: plan.new_flows_per_second,
    }) {
        Ok(l) => l,
        Err(e) => return Ok(LiveOutcome::Unusable(e.to_string())),
    };
    let frame_len = frames.frame_len() as u64;
    let before = xmit_counters(&plan.interface);
    let limit = plan.count.unwrap_or(u64::MAX);
    let cpu_start = sys::thread_cpu_seconds();
    let start = rdtsc();

    // Probe: a driver that cannot take XDP frames (a veth whose peer has no NAPI, an interface
    // that is down) drops them without a word; its counters tell.
    let probe = PROBE_FRAMES.min(limit);
    let mut offered = 0u64;
    match live.send(probe as u32) {
        Ok(true) => offered += probe,
        Ok(false) => {}
        Err(e) => return Ok(LiveOutcome::Unusable(e.to_string())),
    }
    if let (Some(b), Some(a)) = (before, xmit_counters(&plan.interface)) {
        if offered > 0 && a.accepted == b.accepted {
            return Ok(LiveOutcome::Unusable(format!(
                "{} took none of {offered} live frames (is it up? a veth's peer needs NAPI: an \
                 XDP program on it, or `ethtool -K PEER gro on`)",
                plan.interface
            )));
        }
    }

    let tsc_hz = run.tsc_hz.max(1);
    let group = if plan.rate == 0 {
        UNPACED_GROUP
    } else {
        ((plan.rate as f64 * PACED_GROUP_SECONDS) as u64).clamp(PACED_GROUP_MIN, UNPACED_GROUP)
    };
    let (mut calls, mut interrupted_calls) = (1u64, 0u64);
    let deadline = start.saturating_add((plan.seconds * tsc_hz as f64) as u64);
    let mut pacer = Pacer::new(plan.rate, tsc_hz, start, PACED_GROUP_SECONDS, group);
    pacer.sent(offered);
    let mut progress = Progress::new(
        format!("gen tx {} (offered)", plan.interface),
        run.progress,
        tsc_hz,
        start,
    );
    let stopped_by = loop {
        let now = rdtsc();
        if stop() {
            break StopReason::Signal;
        }
        if now >= deadline {
            break StopReason::Seconds;
        }
        if offered >= limit {
            break StopReason::Count;
        }
        progress.tick(now, offered, offered * frame_len);
        let n = group.min(limit - offered).min(pacer.allowed(now));
        if n == 0 {
            continue;
        }
        calls += 1;
        if live.send(n as u32)? {
            offered += n;
            pacer.sent(n);
        } else {
            // A signal interrupted the group: an unknown part of it went out; not counted.
            interrupted_calls += 1;
        }
    };
    let end = rdtsc();
    let ticks = end.wrapping_sub(start);
    let seconds = ticks as f64 / tsc_hz as f64;
    let cpu_seconds = sys::thread_cpu_seconds() - cpu_start;
    let after = xmit_counters(&plan.interface);
    let (sent, refused) = match (before, after) {
        (Some(b), Some(a)) => (
            a.accepted.saturating_sub(b.accepted),
            Some(a.refused.saturating_sub(b.refused)),
        ),
        _ => (offered, None),
    };
    let per_packet = |t: f64| {
        if offered > 0 {
            t / offered as f64
        } else {
            0.0
        }
    };
    Ok(LiveOutcome::Done(TxSummary {
        interface: plan.interface.clone(),
        queue: plan.queue,
        method: "xdp-live",
        xdp_mode: "native",
        frame_size: plan.frame_size,
        flows: plan.flows,
        rate: plan.rate,
        offered,
        sent,
        bytes: sent * frame_len,
        seconds,
        pps: rate(sent, seconds),
        offered_pps: rate(offered, seconds),
        tx_ring_full: refused.unwrap_or(0),
        interface_dropped: refused,
        completion_errors: interrupted_calls,
        kicks: calls,
        cycles_per_packet: per_packet(ticks as f64),
        kick_cycles_per_packet: 0.0,
        cpu_seconds,
        cpu_cycles_per_packet: per_packet(cpu_seconds * tsc_hz as f64),
        stopped_by,
    }))
}

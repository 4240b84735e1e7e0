//! The vector graph: nodes that each process a frame of up to 256 buffer indices, a dispatcher
//! that carries every input vector through the graph to completion, per-node counters and the
//! packet trace. It knows no protocol: what a packet means is the nodes' business.
#![deny(missing_docs)]

pub mod capture;
pub mod counters;
pub mod dispatch;
pub mod indices;
pub mod node;
pub mod trace;

pub use capture::{CaptureControl, CapturedPacket};
pub use counters::{Counter, DriverCounters, GraphStats, NodeStats, PortStats};
pub use dispatch::{Graph, GraphBuilder, GraphError};
pub use node::{Dispatch, Emitted, Emitter, InputNode, Node, NodeContext, NEXT_CONSUMED};
pub use trace::{TraceControl, TraceRecord};

/// Read the CPU's time-stamp counter (TSC ticks; this is what "clocks" and "cycles" mean here).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// Measure the TSC frequency against the monotonic clock over `millis` milliseconds.
pub fn measure_tsc_hz(millis: u64) -> u64 {
    let t0 = std::time::Instant::now();
    let c0 = rdtsc();
    std::thread::sleep(std::time::Duration::from_millis(millis));
    let c1 = rdtsc();
    let ns = t0.elapsed().as_nanos().max(1);
    ((c1.wrapping_sub(c0)) as u128 * 1_000_000_000 / ns) as u64
}

//! The vector graph: nodes that each process a frame of up to 256 buffer indices, a dispatcher
//! that carries every input vector through the graph to completion, per-node counters and the
//! packet trace. It knows no protocol: what a packet means is the nodes' business.
//!
//! # Example
//!
//! An input node that makes three packets, and a node that counts odd lengths as drops and
//! frees every packet; the dispatcher carries the vector from one to the other and counts
//! calls, vectors and packets per node:
//!
//! ```
//! use graph::{Dispatch, GraphBuilder, InputNode, Node, NodeContext};
//! use packet::{BufferPool, PoolConfig};
//!
//! struct Three(bool);
//! impl InputNode for Three {
//!     fn name(&self) -> &str { "three-rx" }
//!     fn next_nodes(&self) -> Vec<String> { vec!["sink".into()] }
//!     fn poll(&mut self, cx: &mut NodeContext<'_>, out: &mut [u32], _: &mut [u16])
//!         -> (usize, Dispatch) {
//!         if self.0 { return (0, Dispatch::AllTo(0)); }
//!         self.0 = true;
//!         let n = cx.pool.alloc_batch(&mut out[..3]);
//!         for (i, &b) in out[..n].iter().enumerate() {
//!             cx.pool.write_packet(b, &vec![0u8; 60 + i]);
//!         }
//!         (n, Dispatch::AllTo(0)) // every packet to next node 0, "sink"
//!     }
//!     fn is_finished(&self) -> bool { self.0 }
//! }
//!
//! struct Sink;
//! impl Node for Sink {
//!     fn name(&self) -> &str { "sink" }
//!     fn next_nodes(&self) -> Vec<String> { vec![] }
//!     fn error_reasons(&self) -> Vec<String> { vec!["odd-length".into()] }
//!     fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16])
//!         -> Dispatch {
//!         for &b in frame {
//!             if cx.pool.meta(b).length % 2 == 1 {
//!                 cx.errors[usize::from(cx.error_id(0))].add(1);
//!             }
//!         }
//!         cx.pool.free_batch(frame);
//!         Dispatch::Consumed // the node took every packet
//!     }
//! }
//!
//! let mut pool = BufferPool::new(PoolConfig { buffers: 256, try_hugepages: false,
//!     ..PoolConfig::default() }).expect("pool");
//! let mut b = GraphBuilder::new();
//! b.add_input(Box::new(Three(false))).add_node(Box::new(Sink));
//! let mut g = b.build(0, 1_000_000_000).expect("every next node exists");
//! while !g.is_finished() {
//!     g.run_once(&mut pool);
//! }
//! let s = g.stats();
//! let sink = g.node_id("sink").expect("a node");
//! assert_eq!((s.nodes[sink].vectors.get(), s.nodes[sink].packets.get()), (1, 3));
//! assert_eq!(s.errors[s.error_id("sink", "odd-length").expect("a reason")].get(), 1);
//! assert_eq!(pool.available(), pool.capacity());
//! ```
#![deny(missing_docs)]

pub mod arc;
pub mod capture;
pub mod counters;
pub mod dispatch;
pub mod edit;
pub mod indices;
pub mod node;
pub mod trace;

pub use capture::{CaptureControl, CapturedPacket};
pub use counters::{Counter, DriverCounters, GraphStats, NodeStats, PortStats};
pub use dispatch::{Graph, GraphBuilder, GraphError};
pub use edit::{GraphEdit, InputState, NextArcs, RemovedNode};
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

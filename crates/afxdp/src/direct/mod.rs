//! Packet I/O driven directly by the one loop that owns it (vecplane's traffic generator and
//! sink) instead of as graph nodes:
//!
//! - `BatchSocket`: an AF_XDP socket opened exactly like `AfXdpPort` (same XDP program and
//!   clean-up) whose rings the caller fills and drains in batches.
//! - `LiveFrames`: an XDP program run by the kernel on frames it makes from one template
//!   (`BPF_PROG_TEST_RUN` with live frames), each given a UDP source port and redirected out of
//!   an interface; the fastest way to put frames into a veth, since they reach the peer as XDP
//!   frames in bulk, with no socket buffer per frame.
//!
//! Neither allocates per packet or parses what it receives; neither decides rates or counts
//! beyond what the kernel reports: the caller does.

mod live;
mod socket;

pub use live::{
    checksum_seed, checksum_seed2, churn_ports, patched_checksum, patched_checksum2, LiveFrames,
    LiveFramesSpec, CHURN_DST_PORT_BITS, LIVE_BATCH_MAX, MAX_NEW_FLOWS_PER_SECOND,
};
pub use socket::{BatchSocket, Received, RECYCLE_BATCH};

//! Port drivers: the memory port (benchmarks: a flow set written into fresh buffers, a sink that
//! reads every byte) and the pcap port (tests, replay, capture), as graph input and output nodes.
//! It moves packets in and out of the buffer pool; it never parses headers beyond building frames.
#![deny(missing_docs)]

pub mod error;
pub mod flows;
pub mod memory;
pub mod pcap;
pub mod pcapfile;

#[cfg(test)]
mod testutil;

pub use error::PortError;
pub use flows::FlowSet;
pub use memory::{MemoryRx, MemoryTx};
pub use pcap::{PcapRx, PcapTx};
pub use pcapfile::{PcapReader, PcapRecord, PcapWriter, TimestampPrecision};

//! Port drivers: the memory port (benchmarks: a flow set written into fresh buffers, a sink that
//! reads every byte), the pcap port (tests, replay, capture), the AF_PACKET port (any kernel
//! interface, TPACKET_V3 rings) and the TAP port (the host stack, VMs), as graph input and output
//! nodes.
//! It moves packets in and out of the buffer pool; it never parses headers beyond building frames.
#![deny(missing_docs)]

pub mod af_packet;
pub mod error;
pub mod flows;
pub mod memory;
pub mod netns;
pub mod outfile;
pub mod pcap;
pub mod pcapfile;
pub mod tap;

#[cfg(test)]
mod testutil;

pub use af_packet::{AfPacketConfig, AfPacketPort, AfPacketRx, AfPacketSocket, AfPacketTx, TxMode};
pub use error::PortError;
pub use flows::FlowSet;
pub use memory::{MemoryRx, MemoryTx};
pub use pcap::{PcapRx, PcapTx};
pub use pcapfile::{PcapReader, PcapRecord, PcapWriter, TimestampPrecision};
pub use tap::{TapConfig, TapDevice, TapPort, TapRx, TapTx};

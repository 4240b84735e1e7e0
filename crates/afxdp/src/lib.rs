//! The AF_XDP port of vecplane. The worker's buffer pool is the UMEM, so a packet received on
//! one AF_XDP port is transmitted on another without a copy; each (interface, queue) gets one
//! socket; vecplane loads and attaches the XDP program that redirects packets to the sockets
//! itself (hand-assembled eBPF, an XSKMAP, a bpf link: nothing to clean up after a crash).
//!
//! Use: `Umem::new(&pool)` once per worker pool, `AfXdpPort::open(&umem, &config, stats)` per
//! (interface, queue), then `port.into_nodes(rx_name, rx_next, tx_name)` for the graph.
//! `unsafe` lives in `sys` only. This crate moves packets between the kernel and the pool; it
//! never parses them.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod direct;
pub mod error;
mod lent;
pub mod port;
pub mod program;
pub mod socket;
mod sys;
pub mod umem;

pub use error::AfXdpError;
pub use port::{AfXdpHandle, AfXdpPort, AfXdpRx, AfXdpTx};
pub use program::{ModeChoice, StaleProgram, XdpMode};
pub use socket::{AfXdpConfig, BindMode};
pub use sys::xsk::XdpStatistics;
pub use umem::Umem;

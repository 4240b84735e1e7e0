//! The L4 load balancer's tables and packet work, independent of the graph: the VIP and
//! application-server (AS) model, Maglev tables, the per-worker flow table, the
//! encapsulations (L3DSR, GRE4, GRE6, NAT4, NAT6) and the VPP `lb` CLI language. It never does
//! I/O, never blocks, and never allocates on a worker's per-packet path.
#![deny(missing_docs)]

pub mod encap;
pub mod flowtable;
pub mod parse;
#[cfg(test)]
mod testpkt;
pub mod tuple;

pub mod counters;

pub use tuple::{stable_hash, FiveTuple};
pub mod cli;
pub mod health;
pub mod maglev;
pub mod model;
pub mod nat_inside;
pub mod probe;
pub mod snapshot;

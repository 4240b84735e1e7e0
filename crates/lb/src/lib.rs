//! The L4 load balancer's tables and packet work, independent of the graph: the VIP and
//! application-server (AS) model, Maglev tables, its flows in the per-worker session table
//! (`flowtable`; the table is the `session` crate's), the encapsulations (L3DSR, GRE4, GRE6,
//! NAT4, NAT6) and the VPP `lb` CLI language. It never does I/O, never blocks, and never
//! allocates on a worker's per-packet path.
//!
//! # Example
//!
//! VPP `lb` lines build the model; the model builds the tables a worker reads. The Maglev
//! table depends only on the set of servers, so two load balancers given the same servers in
//! another order send a flow to the same server (ECMP may move flows between them):
//!
//! ```
//! use lb::cli::parse_line;
//! use lb::model::LbState;
//! use lb::snapshot::LbTables;
//! use lb::{stable_hash, FiveTuple};
//!
//! let vip = "lb vip 198.18.100.1/32 protocol tcp port 80 encap l3dsr dscp 23 new_len 1024";
//! let server = |a: &str| format!("lb as 198.18.100.1/32 protocol tcp port 80 {a}");
//! let build = |servers: &[&str]| {
//!     let mut lines = vec![vip.to_string()];
//!     lines.extend(servers.iter().map(|a| server(a)));
//!     let cmds: Vec<_> = lines
//!         .iter()
//!         .map(|l| parse_line(l).expect("VPP syntax"))
//!         .collect();
//!     LbTables::build(&LbState::new().apply(&cmds).expect("a valid change"), None)
//! };
//! let a = build(&["198.18.12.11", "198.18.12.12", "198.18.12.13"]);
//! let b = build(&["198.18.12.13", "198.18.12.11", "198.18.12.12"]);
//!
//! // A client's connection to the VIP: which server, on either load balancer.
//! let flow = FiveTuple::v4([198, 18, 0, 2], [198, 18, 100, 1], 6, 40000, 80);
//! let chosen = |t: &LbTables| {
//!     let vip = t.vip_for(&flow).expect("traffic to the VIP");
//!     let slot = t.choose(vip, stable_hash(&flow, false)).expect("a server");
//!     t.as_entry(slot).addr.to_string()
//! };
//! assert!(chosen(&a).starts_with("198.18.12."));
//! assert_eq!(chosen(&a), chosen(&b));
//!
//! // Another port is not the VIP's traffic.
//! let other = FiveTuple::v4([198, 18, 0, 2], [198, 18, 100, 1], 6, 40000, 81);
//! assert_eq!(a.vip_for(&other), None);
//! ```
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

//! The virtual switch's flow tables, as Open vSwitch's userspace datapath has them: a flow key
//! extracted once per packet (`key`), OpenFlow rules and groups in `ovs-ofctl` syntax (`rule`,
//! `ofctl`), the slow-path classifier that translates a key into datapath actions and records
//! which key bits it consulted (`classifier`, `xlate`), and the per-worker caches in front of it
//! (`cache`: exact-match cache, megaflow cache, aging). This crate never does I/O and never owns
//! ports; nodes and the control plane drive it.
//!
//! # Example
//!
//! Rules in `ovs-ofctl` syntax, a frame's key, and the slow path's answer: the datapath
//! actions and the megaflow mask (which key bits the answer depended on, so one cached entry
//! serves every packet that agrees on them):
//!
//! ```
//! use flow::ofctl::parse_flow;
//! use flow::rule::FlowMod;
//! use flow::{extract, DpAction, Field, FlowTables, SwitchPorts};
//!
//! let mut ports = SwitchPorts::new();
//! ports.add(1, 0, false).expect("OpenFlow port 1 is vecplane port 0");
//! ports.add(2, 1, false).expect("OpenFlow port 2 is vecplane port 1");
//! let rule = |t: &str| FlowMod::Add(parse_flow(t).expect("ovs-ofctl syntax"));
//! let tables = FlowTables::new(ports)
//!     .apply(&[
//!         rule("priority=100,udp,nw_dst=198.18.2.0/24,tp_dst=53,actions=output:2"),
//!         rule("priority=0,actions=drop"),
//!     ])
//!     .expect("valid rules");
//!
//! // A UDP frame from 198.18.1.2:1024 to 198.18.2.7:53, received on OpenFlow port 1.
//! let mut frame = vec![2, 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 2, 0x08, 0x00];
//! frame.extend([0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 1, 2, 198, 18, 2, 7]);
//! frame.extend([0x04, 0x00, 0, 53, 0, 8, 0, 0]);
//! frame.resize(60, 0);
//! let (key, _) = extract(&frame, 1, None);
//! assert_eq!(key.get(Field::TpDst), 53);
//!
//! let t = tables.translate(&key);
//! assert_eq!(t.actions.as_slice(), &[DpAction::Output(1)]); // vecplane port 1
//! // The answer depended on the destination's first 24 bits, not on the source address.
//! assert_eq!(t.mask.get(Field::NwDst), 0xffff_ff00);
//! assert_eq!(t.mask.get(Field::NwSrc), 0);
//!
//! // Another port: the low-priority rule drops it.
//! frame[36..38].copy_from_slice(&54u16.to_be_bytes());
//! let (key, _) = extract(&frame, 1, None);
//! assert!(tables.translate(&key).actions.is_drop());
//! ```
#![deny(missing_docs)]

pub mod cache;
pub mod classifier;
pub mod dpaction;
pub mod execute;
pub mod extract;
pub mod key;
pub mod linear;
pub mod ofctl;
pub mod rule;
pub mod tables;
#[cfg(test)]
mod testutil;
pub mod xlate;

pub use dpaction::{DpAction, DpActions, TPID_AS_RECEIVED};
pub use extract::{extract, extract_into, Malformed, Parsed, Tunnel};
pub use key::{Field, FlowKey, Stage, KEY_WORDS};
pub use rule::{Action, Bucket, Group, GroupKind, Match, PortRef, Rule};
pub use tables::{FlowModError, FlowTables, FragHandling, RuleCounters, RuleStats, SwitchPorts};
pub use xlate::{RuleHits, Translation, XlateError};

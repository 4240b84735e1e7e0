//! The virtual switch's flow tables, as Open vSwitch's userspace datapath has them: a flow key
//! extracted once per packet (`key`), OpenFlow rules and groups in `ovs-ofctl` syntax (`rule`,
//! `ofctl`), the slow-path classifier that translates a key into datapath actions and records
//! which key bits it consulted (`classifier`, `xlate`), and the per-worker caches in front of it
//! (`cache`: exact-match cache, megaflow cache, aging). This crate never does I/O and never owns
//! ports; nodes and the control plane drive it.
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

pub use dpaction::{DpAction, DpActions};
pub use extract::{extract, extract_into, Malformed, Parsed, Tunnel};
pub use key::{Field, FlowKey, Stage, KEY_WORDS};
pub use rule::{Action, Bucket, Group, GroupKind, Match, PortRef, Rule};
pub use tables::{FlowModError, FlowTables, FragHandling, RuleCounters, RuleStats, SwitchPorts};
pub use xlate::{RuleHits, Translation, XlateError};

//! Health checks of the load balancer's servers, in the control plane: per checked VIP, every
//! server is probed (TCP connect, HTTP GET with an expected status, UDP, ICMP echo) from
//! vecplane's probe namespace, by default through the VIP's own encapsulation; `rise`/`fall`
//! consecutive results move it up or down, which marks it in the LB through the `HealthHost`
//! (drain or flush). The status (targets, counters, transitions) is read by `show`, the API and
//! the metrics.
//!
//! Owns: the per-server state machine (`state`), one probe (`probe`, `http`), where probes go
//! (`target`), the scheduler thread (`runner`) and the status and its JSON (`status`, `json`).
//! It never touches the LB tables or the data path directly: everything goes through
//! `HealthHost`, which the daemon implements.

pub mod http;
pub mod json;
pub mod outcome;
pub mod probe;
pub mod runner;
pub mod state;
pub mod status;
pub mod target;
pub mod tls;

#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod runner_tests;
#[cfg(test)]
mod testns;

pub use json::status_json;
pub use outcome::{FailReason, ProbeOutcome};
pub use probe::probe;
pub use runner::{HealthHandle, HealthHost, HealthRunner, Target};
pub use state::{ServerHealth, Transition};
pub use status::{HealthStatus, HealthTotals, TargetState, TargetStatus, TransitionRecord};

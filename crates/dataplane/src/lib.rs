//! The data plane: builds a worker's buffer pool and graph from a validated `DataplaneSpec`, runs
//! the worker pinned to a core, and hands the control plane read-only views of its counters.
//! It never parses config text and never formats output for people.
#![deny(missing_docs)]

pub mod build;
pub mod channels;
mod drivers;
pub mod features;
pub mod flows;
pub mod handoff;
pub mod idle;
pub mod inject;
pub mod lb;
pub mod mailbox;
pub mod placement;
pub mod ports_live;
pub mod probe_host;
pub mod punt;
pub mod rebalance;
pub mod routing;
pub mod spec;
pub mod view;
pub mod worker;

pub use build::{BuildError, BuiltWorker, FibStats};
pub use spec::*;
pub use view::{LivePolicies, PortView, RuntimeView, WorkerView};
pub use worker::{pin_current_thread, Dataplane, RunningDataplane};

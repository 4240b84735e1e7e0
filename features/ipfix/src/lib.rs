//! IPFIX flow export (RFC 7011/7012) as one feature: metering nodes on the feature arcs,
//! per-worker flow tables with active and idle timeouts, one-in-N sampling, a bounded ring per
//! worker, and an exporter thread sending templates and records over UDP to collectors.
//! This crate owns everything of the feature but its registration (config section, API,
//! `ctl`, arc placement), which the feature registry does with the calls below. It never
//! touches another feature's state, never changes a packet, and never blocks a worker.
//!
//! # Use (what the registry calls)
//!
//! ```no_run
//! use ipfix::{IpfixConfig, IpfixFeature};
//!
//! let config = IpfixConfig {
//!     collectors: vec!["198.18.0.10:4739".parse().expect("addr")],
//!     ..IpfixConfig::default()
//! };
//! // Validates, starts the exporter thread.
//! let (handle, workers) = IpfixFeature::new(config).expect("valid");
//! // Per worker, when its graph is built (see `IpfixWorker` for the nodes):
//! let worker = workers.worker().expect("memory");
//! let _timer = worker.timer();
//! // ... worker.ip4_node(binding), worker.ip6_node(binding), worker.output_node(binding)
//! // At run time: handle.apply(new_config), handle.stats(); when disabled:
//! handle.shutdown(std::time::Duration::from_secs(1));
//! ```
//!
//! # Data path
//! `ipfix-ip4`/`ipfix-ip6`/`ipfix-output` count packets into the worker's `Meter`; its
//! `ipfix-timer` sweeps the tables (a time-paced bounded sweep) and pushes due records into
//! the worker's SPSC ring; the exporter thread drains all rings every 10 ms.
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod exporter;
pub mod key;
pub mod message;
pub mod meter;
pub mod node;
pub mod record;
#[cfg(not(loom))]
pub mod registration;
pub mod ring;
pub mod table;
pub mod template;
mod vector;
pub mod worker;

#[cfg(test)]
mod node_tests;

pub use config::{ConfigError, IpfixConfig};
pub use exporter::ExporterStats;
pub use meter::AllocError;
pub use node::{
    Annotate, ArcBinding, NoAnnotation, Place, IPFIX_IP4, IPFIX_IP6, IPFIX_OUTPUT, IPFIX_TIMER,
};
pub use record::{Annotation, EndReason, FlowRecord};
pub use worker::IpfixWorker;

use exporter::ExporterShared;
use graph::arc::FeatureDecl;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;
use worker::{LiveSettings, WorkerShared};

/// The feature's name on its arcs.
pub const FEATURE: &str = "ipfix";

/// Where the feature's nodes go: `ipfix-ip4` on `ip4-unicast`, `ipfix-ip6` on
/// `ip6-unicast`, `ipfix-output` on `output` (arc names as issue 33 names them; the registry
/// may add ordering constraints).
pub fn feature_decls() -> Vec<FeatureDecl> {
    vec![
        FeatureDecl::new("ip4-unicast", FEATURE, IPFIX_IP4),
        FeatureDecl::new("ip6-unicast", FEATURE, IPFIX_IP6),
        FeatureDecl::new("output", FEATURE, IPFIX_OUTPUT),
    ]
}

/// Why the feature refused to start or to take a configuration.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum IpfixError {
    /// A key is invalid.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// Keys that size per-worker memory changed: disable and enable the feature to apply.
    #[error("ipfix: {} cannot change while the feature runs (disable and enable it)", .0.join(", "))]
    NeedsRestart(Vec<&'static str>),
    /// The exporter thread could not be started.
    #[error("ipfix: cannot start the exporter thread: {0}")]
    Thread(String),
}

/// Entry point.
pub struct IpfixFeature;

impl IpfixFeature {
    /// Validate `config` and start the exporter thread: the control handle, and the factory
    /// of per-worker nodes.
    #[allow(clippy::new_ret_no_self)] // A feature is its two halves: control and data path.
    pub fn new(config: IpfixConfig) -> Result<(IpfixHandle, IpfixWorkers), IpfixError> {
        config.validate()?;
        let settings = Arc::new(LiveSettings::new(
            config.sampling,
            config.idle_timeout_s,
            config.active_timeout_s,
        ));
        let exporter = Arc::new(ExporterShared {
            settings: Mutex::new((0, config.clone())),
            rings: Mutex::new(Vec::new()),
            counters: Default::default(),
            stop: AtomicBool::new(false),
        });
        let workers = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let shared = exporter.clone();
            std::thread::Builder::new()
                .name("ipfix-export".into())
                .spawn(move || exporter::run(shared))
                .map_err(|e| IpfixError::Thread(e.to_string()))?
        };
        let handle = IpfixHandle {
            settings: settings.clone(),
            exporter: exporter.clone(),
            workers: workers.clone(),
            thread: Some(thread),
        };
        let factory = IpfixWorkers {
            flows: config.flows_per_worker as usize,
            ring_records: config.ring_records as usize,
            settings,
            exporter,
            workers,
        };
        Ok((handle, factory))
    }
}

/// Builds each worker's IPFIX state and nodes (cheap to clone).
#[derive(Clone)]
pub struct IpfixWorkers {
    flows: usize,
    ring_records: usize,
    settings: Arc<LiveSettings>,
    exporter: Arc<ExporterShared>,
    workers: Arc<Mutex<Vec<Arc<WorkerShared>>>>,
}

impl IpfixWorkers {
    /// One more worker: its tables (`flows_per_worker` per family) and its ring to the
    /// exporter. Call once per worker graph; the nodes it builds belong in that graph only.
    pub fn worker(&self) -> Result<IpfixWorker, AllocError> {
        let (producer, consumer) = ring::ring(self.ring_records, FlowRecord::default());
        let shared = Arc::new(WorkerShared::default());
        let w = IpfixWorker::new(self.flows, producer, self.settings.clone(), shared.clone())?;
        exporter::lock(&self.exporter.rings).push(consumer);
        exporter::lock(&self.workers).push(shared);
        Ok(w)
    }
}

/// Counters of one worker's metering.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerStats {
    /// Packets counted into flows.
    pub packets: u64,
    /// Packets passed over by sampling.
    pub skipped: u64,
    /// Packets not readable as IPv4/IPv6 (forwarded, not counted).
    pub unreadable: u64,
    /// Flows created.
    pub flows: u64,
    /// Flows in the tables now.
    pub live_flows: u64,
    /// Flows evicted from a full bucket.
    pub evicted: u64,
    /// Records handed to the exporter.
    pub records: u64,
    /// Records lost to a full ring.
    pub ring_drops: u64,
}

/// Everything the feature counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IpfixStats {
    /// The exporter's counters.
    pub exporter: ExporterStats,
    /// Each worker's, in the order they were built.
    pub workers: Vec<WorkerStats>,
}

impl IpfixStats {
    /// Records lost to full rings, over all workers.
    pub fn ring_drops(&self) -> u64 {
        self.workers.iter().map(|w| w.ring_drops).sum()
    }
}

/// The control plane's handle: change settings, read counters, flush, stop.
pub struct IpfixHandle {
    settings: Arc<LiveSettings>,
    exporter: Arc<ExporterShared>,
    workers: Arc<Mutex<Vec<Arc<WorkerShared>>>>,
    thread: Option<JoinHandle<()>>,
}

impl IpfixHandle {
    /// The configuration in force.
    pub fn config(&self) -> IpfixConfig {
        exporter::lock(&self.exporter.settings).1.clone()
    }

    /// Apply `next` to the running feature: collectors, domain, timeouts, sampling, template
    /// refresh, message size and cookie PEN change at once (workers see timeouts and sampling
    /// at their next vector); memory sizes need the feature re-created.
    pub fn apply(&self, next: IpfixConfig) -> Result<(), IpfixError> {
        next.validate()?;
        let mut s = exporter::lock(&self.exporter.settings);
        let restart = s.1.restart_keys(&next);
        if !restart.is_empty() {
            return Err(IpfixError::NeedsRestart(restart));
        }
        self.settings
            .sampling
            .store(next.sampling, Ordering::Relaxed);
        let ms = |s: u32| u64::from(s) * 1000;
        self.settings
            .idle_ms
            .store(ms(next.idle_timeout_s), Ordering::Relaxed);
        self.settings
            .active_ms
            .store(ms(next.active_timeout_s), Ordering::Relaxed);
        s.0 += 1;
        s.1 = next;
        Ok(())
    }

    /// The counters now.
    pub fn stats(&self) -> IpfixStats {
        let workers = exporter::lock(&self.workers)
            .iter()
            .map(|w| {
                let c = &w.counters;
                WorkerStats {
                    packets: c.packets.get(),
                    skipped: c.skipped.get(),
                    unreadable: c.unreadable.get(),
                    flows: c.flows.get(),
                    live_flows: c.live.load(Ordering::Relaxed),
                    evicted: c.evicted.get(),
                    records: c.records.get(),
                    ring_drops: c.ring_drops.get(),
                }
            })
            .collect();
        IpfixStats {
            exporter: self.exporter.counters.snapshot(),
            workers,
        }
    }

    /// Ask every worker to report all its flows now (`forcedEnd`); the generation to wait for
    /// with `is_flushed`.
    pub fn flush(&self) -> u64 {
        self.settings
            .flush_generation
            .fetch_add(1, Ordering::AcqRel)
            + 1
    }

    /// True once every worker finished flush `generation` (its records are in its ring).
    pub fn is_flushed(&self, generation: u64) -> bool {
        exporter::lock(&self.workers)
            .iter()
            .all(|w| w.flushed.load(Ordering::Acquire) >= generation)
    }

    /// Stop the exporter once it sent what the rings hold, wait for it, and return the final
    /// counters.
    pub fn stop(mut self) -> IpfixStats {
        self.stop_thread();
        self.stats()
    }

    /// Flush every worker's flows (waiting up to `wait` for running workers to report them),
    /// send them, and stop; the final counters.
    pub fn shutdown(self, wait: Duration) -> IpfixStats {
        let g = self.flush();
        let until = Instant::now() + wait;
        while !self.is_flushed(g) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.stop()
    }

    fn stop_thread(&mut self) {
        self.exporter.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for IpfixHandle {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

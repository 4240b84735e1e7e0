//! The feature registry: what a feature supplies in one place so the hubs (config, `ctl`,
//! API, metrics, reload, the data plane's build) iterate it instead of naming it. A feature
//! crate implements `Feature` (its config table, checked and started) and `RunningFeature`
//! (its worker half on the arcs, its `show`, metrics and reload); the binary installs the
//! list once at start (`install`), one line per feature. This module owns the contract and
//! the list; it never knows a feature's config keys, nodes or counters.

use dataplane::features::WorkerFeature;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// One problem in a feature's config table: the key (None: the table itself) and what is
/// wrong and what is accepted. The config hub adds the file, line and section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureIssue {
    /// The key at fault.
    pub key: Option<String>,
    /// What is wrong, and what is accepted.
    pub message: String,
}

impl FeatureIssue {
    /// A problem with `key`.
    pub fn key(key: &str, message: impl Into<String>) -> FeatureIssue {
        FeatureIssue {
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    /// A problem with the table as a whole.
    pub fn table(message: impl Into<String>) -> FeatureIssue {
        FeatureIssue {
            key: None,
            message: message.into(),
        }
    }
}

/// What the data plane looks like to a feature starting.
#[derive(Clone, Debug)]
pub struct StartContext {
    /// Port names, by port id.
    pub ports: Vec<String>,
    /// Worker threads.
    pub workers: usize,
}

/// A feature as the registry knows it before it runs.
pub trait Feature: Send + Sync {
    /// Its name: its config table (`[NAME]`), `show NAME`, `GET /v1/features/NAME`.
    fn name(&self) -> &'static str;
    /// One line saying what it does (for `show features` and help).
    fn summary(&self) -> &'static str;
    /// The places its nodes take on the arcs (what its worker half declares), so that a
    /// port's `features` can be checked before anything starts.
    fn arcs(&self) -> Vec<graph::arc::FeatureDecl>;
    /// Check its config table (`[NAME]` as TOML), reporting every problem.
    fn check(&self, table: &toml::Value, cx: &StartContext) -> Result<(), Vec<FeatureIssue>>;
    /// Start it with a checked table (threads, sockets): its running half.
    fn start(
        &self,
        table: &toml::Value,
        cx: &StartContext,
    ) -> Result<Arc<dyn RunningFeature>, String>;
}

/// A started feature.
pub trait RunningFeature: Send + Sync {
    /// Its name (the `Feature`'s).
    fn name(&self) -> &'static str;
    /// What it adds to each worker's graph (its nodes on the arcs).
    fn worker(&self) -> Arc<dyn WorkerFeature>;
    /// `show NAME`: text and JSON.
    fn show(&self) -> (String, Value);
    /// Its Prometheus text (families prefixed `vecplane_NAME_`), appended to `/metrics`.
    fn metrics(&self) -> String {
        String::new()
    }
    /// A reload changed its table: whether `reload` would take it (what needs a restart is
    /// refused here, naming it). Nothing is applied.
    fn check_reload(&self, table: &toml::Value) -> Result<(), String>;
    /// Apply a table `check_reload` accepted. Returns what changed, as JSON.
    fn reload(&self, table: &toml::Value) -> Result<Value, String>;
    /// The daemon stops: flush and end its threads.
    fn stop(&self) {}
}

static INSTALLED: OnceLock<Vec<&'static dyn Feature>> = OnceLock::new();

/// Install the features this binary has (once, before any config is read; later calls are
/// ignored and return false).
pub fn install(features: Vec<&'static dyn Feature>) -> bool {
    INSTALLED.set(features).is_ok()
}

/// The installed features (none until `install`).
pub fn installed() -> &'static [&'static dyn Feature] {
    INSTALLED.get().map_or(&[], Vec::as_slice)
}

/// The installed feature called `name`.
pub fn find(name: &str) -> Option<&'static dyn Feature> {
    installed().iter().copied().find(|f| f.name() == name)
}

/// Start the features whose tables `tables` holds (name, table), in order; on a failure,
/// the ones started are stopped and the error names the feature.
pub fn start_all(
    tables: &[(String, toml::Value)],
    cx: &StartContext,
) -> Result<Vec<Arc<dyn RunningFeature>>, String> {
    let mut started: Vec<Arc<dyn RunningFeature>> = Vec::new();
    for (name, table) in tables {
        let Some(f) = find(name) else {
            stop_all(&started);
            return Err(format!("[{name}]: no such feature in this binary"));
        };
        match f.start(table, cx) {
            Ok(r) => started.push(r),
            Err(e) => {
                stop_all(&started);
                return Err(format!("[{name}]: {e}"));
            }
        }
    }
    Ok(started)
}

/// Stop every feature of `running`.
pub fn stop_all(running: &[Arc<dyn RunningFeature>]) {
    for r in running {
        r.stop();
    }
}

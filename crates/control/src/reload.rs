//! Config reload (`POST /v1/reload`, `vecplane ctl reload`, SIGHUP): re-read the config file,
//! compare it with the running one, and apply what may change live — routes and static
//! neighbours — as one routing batch. Anything else that differs is refused with the key it
//! is under, and then nothing is applied. It never restarts a port or a worker.

use crate::config::Config;
use dataplane::routing::{Change, Route, Routing};
use dataplane::{DataplaneSpec, NeighbourSpec, RouteSpec, RouteTarget};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Why a reload changed nothing.
#[derive(Debug, Error)]
pub enum ReloadError {
    /// The new file is invalid (its errors name FILE:LINE).
    #[error("{0}")]
    Invalid(String),
    /// Something that cannot change while running differs.
    #[error(
        "{file}: `{key}` differs from the running config and cannot change while vecplane runs \
         (restart to change it); nothing was applied"
    )]
    NotLive {
        /// The config file.
        file: String,
        /// The key.
        key: &'static str,
    },
    /// The routing tables refused the batch (e.g. a next hop no port reaches).
    #[error("{file}: {message}; nothing was applied")]
    Refused {
        /// The config file.
        file: String,
        /// The routing error.
        message: String,
    },
}

impl ReloadError {
    /// The HTTP status an API answer carries.
    pub fn status(&self) -> u16 {
        match self {
            ReloadError::Invalid(_) => 400,
            ReloadError::NotLive { .. } | ReloadError::Refused { .. } => 409,
        }
    }
}

/// The running config and where it came from.
pub struct Reloader {
    path: PathBuf,
    running: Mutex<DataplaneSpec>,
    routing: Arc<Mutex<Routing>>,
}

fn route_key<A: Copy + Into<IpAddr>>(r: &RouteSpec<A>) -> (IpAddr, u8) {
    (r.prefix.into(), r.len)
}

fn as_route<A: Copy + Into<IpAddr>>(r: &RouteSpec<A>) -> Route {
    Route {
        prefix: r.prefix.into(),
        len: r.len,
        target: match &r.target {
            RouteTarget::Drop => RouteTarget::Drop,
            RouteTarget::Via(v) => RouteTarget::Via(v.iter().map(|a| (*a).into()).collect()),
        },
    }
}

/// The keys whose values differ between `old` and `new` and cannot change live.
fn not_live(old: &DataplaneSpec, new: &DataplaneSpec) -> Option<&'static str> {
    let checks: [(&'static str, bool); 11] = [
        ("buffers", old.buffers != new.buffers),
        ("data-size", old.data_size != new.data_size),
        ("workers", old.workers != new.workers),
        (
            "worker-cpu / worker-cpus",
            old.worker_cpu != new.worker_cpu || old.worker_cpus != new.worker_cpus,
        ),
        ("[[port]]", old.ports != new.ports),
        ("[[xconnect]]", old.xconnects != new.xconnects),
        ("[[bridge]]", old.bridges != new.bridges),
        (
            "[bridge] (MAC table size and aging)",
            old.bridge != new.bridge,
        ),
        ("[ip] (ICMP error rate, IPv4 options)", old.ip != new.ip),
        (
            "[neighbour] (table size and timers)",
            old.neighbour != new.neighbour,
        ),
        ("poll-mode / poll-sleep-max-us", old.poll != new.poll),
    ];
    checks.iter().find(|(_, d)| *d).map(|(k, _)| *k)
}

/// The changes that take `old`'s routes and neighbours to `new`'s. Additions are written as
/// replacements and deletions of what is no longer there are left out, so routes the API
/// changed since do not make a reload fail.
pub fn route_changes(old: &DataplaneSpec, new: &DataplaneSpec) -> Vec<Change> {
    let mut changes = Vec::new();
    let old_n: BTreeMap<IpAddr, &NeighbourSpec> =
        old.neighbours.iter().map(|n| (n.ip, n)).collect();
    let new_n: BTreeMap<IpAddr, &NeighbourSpec> =
        new.neighbours.iter().map(|n| (n.ip, n)).collect();
    let mut old_r: BTreeMap<(IpAddr, u8), Route> = BTreeMap::new();
    old_r.extend(old.routes4.iter().map(|r| (route_key(r), as_route(r))));
    old_r.extend(old.routes6.iter().map(|r| (route_key(r), as_route(r))));
    let mut new_r: BTreeMap<(IpAddr, u8), Route> = BTreeMap::new();
    new_r.extend(new.routes4.iter().map(|r| (route_key(r), as_route(r))));
    new_r.extend(new.routes6.iter().map(|r| (route_key(r), as_route(r))));
    for (k, n) in &new_n {
        match old_n.get(k) {
            Some(o) if o == n => {}
            _ => changes.push(Change::ReplaceNeighbour((*n).clone())),
        }
    }
    for (k, r) in &new_r {
        match old_r.get(k) {
            Some(o) if o == r => {}
            _ => changes.push(Change::ReplaceRoute(r.clone())),
        }
    }
    for k in old_r.keys().filter(|k| !new_r.contains_key(k)) {
        changes.push(Change::DeleteRoute {
            prefix: k.0,
            len: k.1,
        });
    }
    for k in old_n.keys().filter(|k| !new_n.contains_key(k)) {
        changes.push(Change::DeleteNeighbour(*k));
    }
    changes
}

impl Reloader {
    /// For the daemon started from `path` with `running`, whose tables are `routing`.
    pub fn new(path: &Path, running: DataplaneSpec, routing: Arc<Mutex<Routing>>) -> Reloader {
        Reloader {
            path: path.to_path_buf(),
            running: Mutex::new(running),
            routing,
        }
    }

    /// Re-read the file and apply the difference as one version, or nothing.
    pub fn reload(&self) -> Result<Value, ReloadError> {
        let file = self.path.display().to_string();
        let config = Config::load(&self.path)
            .and_then(|c| c.check_files().map(|()| c))
            .map_err(|e| ReloadError::Invalid(e.to_string()))?;
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(key) = not_live(&running, &config.spec) {
            return Err(ReloadError::NotLive { file, key });
        }
        let mut routing = dataplane::build::lock(&self.routing);
        // Deletions of what the API already removed are left out.
        let changes: Vec<Change> = route_changes(&running, &config.spec)
            .into_iter()
            .filter(|c| match c {
                Change::DeleteRoute { prefix, len } => routing.route(*prefix, *len).is_some(),
                Change::DeleteNeighbour(ip) => routing.neighbour(*ip).is_some(),
                _ => true,
            })
            .collect();
        let version = if changes.is_empty() {
            routing.version()
        } else {
            routing
                .apply(&changes)
                .map_err(|e| ReloadError::Refused {
                    file: file.clone(),
                    message: e.to_string(),
                })?
                .version
        };
        drop(routing);
        let counts = |f: fn(&Change) -> bool| changes.iter().filter(|c| f(c)).count();
        let answer = json!({
            "file": file,
            "version": version,
            "changes": changes.len(),
            "routes_set": counts(|c| matches!(c, Change::ReplaceRoute(_))),
            "routes_deleted": counts(|c| matches!(c, Change::DeleteRoute { .. })),
            "neighbours_set": counts(|c| matches!(c, Change::ReplaceNeighbour(_))),
            "neighbours_deleted": counts(|c| matches!(c, Change::DeleteNeighbour(_))),
        });
        *running = config.spec;
        Ok(answer)
    }
}

#[cfg(test)]
mod tests;

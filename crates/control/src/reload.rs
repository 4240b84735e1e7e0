//! Config reload (`POST /v1/reload`, `vecplane ctl reload`, SIGHUP): re-read the config file,
//! compare it with the running one, and apply what may change live — ports added and removed
//! (matched by name) and ports' own addresses (in a reload of their own), routes and static
//! neighbours as one routing batch, then ports'
//! MTUs, the live policies (poll modes, ICMP error rate, IPv4 options, neighbour timers,
//! bridge aging), flow rules, registered features' tables and what the ports' `features` keys
//! enable, and the load balancer's `[lb]` (added, changed, or removed while no VIP exists) — or
//! nothing: anything else that differs is refused with the key it is under
//! and its line. It never restarts a port or a worker.

use crate::config::Config;
use dataplane::features::ArcChange;
use dataplane::ports_live::PortControl;
use dataplane::routing::{Change, Route, Routing};
use dataplane::{LivePolicies, RouteSpec, RouteTarget};
use ports::{id_of, LivePorts, PortPlan};
use serde_json::{json, Value};
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
    /// Something that cannot change while running differs (each key named, with its line).
    #[error("{what}\nthese cannot change while vecplane runs (restart to change them); nothing was applied")]
    NotLive {
        /// The differences, one per line (FILE:LINE: key ...).
        what: String,
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
    running: Mutex<Config>,
    routing: Arc<Mutex<Routing>>,
    policies: LivePolicies,
    flows: Vec<Arc<dataplane::flows::FlowSwitch>>,
    lb: Option<Arc<dataplane::lb::LbControl>>,
    /// The registered features that run (`crate::registry`).
    features: Vec<Arc<dyn crate::registry::RunningFeature>>,
    /// Where the ports' `features` are enabled, and the ports' names by id.
    arcs: Option<(Arc<dataplane::features::FeatureArcs>, Vec<String>)>,
    /// Adds and removes ports; the ports that run, by id (None: the ports of the start).
    ports: Option<Arc<PortControl>>,
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

/// A diff's routes as changes: additions and changes as replacements (a route the API added
/// meanwhile does not make the reload fail), deletions of what is there.
fn route_changes<A: Copy + Into<IpAddr>>(
    c: &crate::config::RouteChanges<A>,
    out: &mut Vec<Change>,
) {
    out.extend(
        c.added
            .iter()
            .chain(&c.changed)
            .map(|r| Change::ReplaceRoute(as_route(r))),
    );
    out.extend(c.removed.iter().map(|r| Change::DeleteRoute {
        prefix: r.prefix.into(),
        len: r.len,
    }));
}

/// All the changes of `diff`, in an order a batch accepts (neighbours first, their deletion
/// last).
pub fn changes_of(diff: &crate::config::LiveDiff) -> Vec<Change> {
    let n = &diff.neighbours;
    let mut out: Vec<Change> = n
        .added
        .iter()
        .chain(&n.changed)
        .map(|x| Change::ReplaceNeighbour(x.clone()))
        .collect();
    route_changes(&diff.routes4, &mut out);
    route_changes(&diff.routes6, &mut out);
    out.extend(n.removed.iter().map(|x| Change::DeleteNeighbour(x.ip)));
    out
}

impl Reloader {
    /// For the daemon started from `path` with `running`, whose tables are `routing` and whose
    /// live settings are `policies`.
    pub fn new(
        path: &Path,
        running: Config,
        routing: Arc<Mutex<Routing>>,
        policies: LivePolicies,
    ) -> Reloader {
        Reloader {
            path: path.to_path_buf(),
            running: Mutex::new(running),
            routing,
            policies,
            flows: Vec::new(),
            lb: None,
            features: Vec::new(),
            arcs: None,
            ports: None,
        }
    }

    /// Also add and remove the ports the file adds and removes, through `ports`.
    pub fn with_port_control(mut self, ports: Arc<PortControl>) -> Reloader {
        self.ports = Some(ports);
        self
    }

    /// Also make the load balancer's configuration equal the file's `[lb]` when it changes,
    /// comes or goes.
    pub fn with_lb(mut self, lb: Arc<dataplane::lb::LbControl>) -> Reloader {
        self.lb = Some(lb);
        self
    }

    /// Also replace the rules and groups of these flow-mode bridges when the file changes them.
    pub fn with_flows(mut self, flows: Vec<Arc<dataplane::flows::FlowSwitch>>) -> Reloader {
        self.flows = flows;
        self
    }

    /// Hand changed tables of registered features to the features that run.
    pub fn with_features(
        mut self,
        features: Vec<Arc<dyn crate::registry::RunningFeature>>,
    ) -> Reloader {
        self.features = features;
        self
    }

    /// Also enable and disable what the ports' `features` keys add and remove, on `arcs`,
    /// whose ports are `ports` (names by id).
    pub fn with_port_features(
        mut self,
        arcs: Arc<dataplane::features::FeatureArcs>,
        ports: Vec<String>,
    ) -> Reloader {
        self.arcs = Some((arcs, ports));
        self
    }

    /// What the ports' `features` add and remove, as changes of the arcs, checked against
    /// what is enabled now (a feature the API enabled meanwhile is no refusal; nothing is
    /// applied), and the features of the ports the reload adds (`adding`), whose ids are
    /// known once they are added. Empty when nothing differs.
    fn plan_port_features(
        &self,
        file: &str,
        (running, config): (&Config, &Config),
        (live, adding): (&LivePorts, &[dataplane::PortSpec]),
    ) -> Result<(Vec<ArcChange>, Vec<crate::config::PortFeature>), ReloadError> {
        let Some((arcs, _)) = &self.arcs else {
            return Ok((Vec::new(), Vec::new()));
        };
        let refused = |message: String| ReloadError::Refused {
            file: file.to_string(),
            message,
        };
        let removed = running
            .port_features
            .iter()
            .filter(|f| !config.port_features.contains(f))
            .map(|f| (f, false));
        let added = config
            .port_features
            .iter()
            .filter(|f| !running.port_features.contains(f))
            .map(|f| (f, true));
        let mut changes = Vec::new();
        let mut on_added = Vec::new();
        for (f, enable) in removed.chain(added) {
            let change = |port| ArcChange {
                arc: f.arc.clone(),
                feature: f.feature.clone(),
                port,
                enable,
            };
            let Some(port) = id_of(live, &f.port) else {
                if enable && adding.iter().any(|p| p.name == f.port) {
                    // Its arc and feature are checked at place 0 (any place would do).
                    arcs.check(&[change(0)])
                        .map_err(|e| refused(format!("[[port]] features: {e}")))?;
                    on_added.push(f.clone());
                    continue;
                }
                if !enable {
                    // The port is gone (the API removed it): so are its features.
                    continue;
                }
                return Err(refused(format!("[[port]] features: no port `{}`", f.port)));
            };
            changes.push(change(port));
        }
        arcs.check(&changes)
            .map_err(|e| refused(format!("[[port]] features: {e}")))?;
        Ok((changes, on_added))
    }

    /// The registered features' tables that changed, each checked by its running feature
    /// (nothing is applied here; a refusal refuses the whole reload). A table added or removed
    /// needs a restart. Returns the features to hand their new tables to.
    #[allow(clippy::type_complexity)]
    fn plan_features(
        &self,
        file: &str,
        running: &Config,
        config: &Config,
    ) -> Result<Vec<(Arc<dyn crate::registry::RunningFeature>, toml::Value)>, ReloadError> {
        let table = |c: &Config, name: &str| {
            c.features
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
        };
        let mut names: Vec<&str> = running
            .features
            .iter()
            .chain(&config.features)
            .map(|(n, _)| n.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut changed = Vec::new();
        for name in names {
            match (table(running, name), table(config, name)) {
                (Some(a), Some(b)) if a == b => {}
                (Some(_), Some(b)) => {
                    let Some(r) = self.features.iter().find(|r| r.name() == name) else {
                        continue;
                    };
                    r.check_reload(&b).map_err(|e| ReloadError::Refused {
                        file: file.to_string(),
                        message: format!("[{name}]: {e}"),
                    })?;
                    changed.push((r.clone(), b));
                }
                (None, Some(_)) | (Some(_), None) => {
                    return Err(ReloadError::NotLive {
                        what: format!(
                            "{file}: [{name}] was added or removed (a feature starts and stops \
                             with the daemon)"
                        ),
                    })
                }
                (None, None) => {}
            }
        }
        Ok(changed)
    }

    /// The tables of `diff` and the plans checked before: flow bridges' rules and groups,
    /// registered features' tables, the ports' features, the load balancer. Names what changed
    /// in `changed`; returns the load balancer's version when it changed.
    #[allow(clippy::type_complexity)]
    fn apply_tables(
        &self,
        diff: &crate::config::LiveDiff,
        (features, port_features): (
            &[(Arc<dyn crate::registry::RunningFeature>, toml::Value)],
            &[ArcChange],
        ),
        lb_plan: &Option<(Vec<lb::model::LbCommand>, bool)>,
        changed: &mut Vec<&'static str>,
    ) -> Option<u64> {
        let mut lb_version = None;
        // Flow bridges' rules and groups: each bridge's tables replaced as one change (the file
        // was checked against the same ports when it was parsed, so this does not fail).
        for (name, groups, rules) in &diff.flows {
            let Some(sw) = self.flows.iter().find(|s| s.name() == name) else {
                continue;
            };
            let mods: Vec<flow::rule::FlowMod> = [
                flow::rule::FlowMod::Delete(flow::rule::RuleFilter::default()),
                flow::rule::FlowMod::DelGroup(None),
            ]
            .into_iter()
            .chain(groups.iter().cloned().map(flow::rule::FlowMod::AddGroup))
            .chain(rules.iter().cloned().map(flow::rule::FlowMod::Add))
            .collect();
            if let Err(e) = sw.apply(&mods) {
                tracing::warn!("reload: bridge `{name}`: {e}");
            }
        }
        if !diff.flows.is_empty() {
            changed.push("flows");
        }
        // Registered features (checked above).
        for (r, table) in features {
            match r.reload(table) {
                Ok(_) => changed.push(r.name()),
                Err(e) => tracing::warn!("reload: [{}]: {e}", r.name()),
            }
        }
        // The ports' features (checked above), published as one version of the arcs.
        if let (Some((arcs, _)), false) = (&self.arcs, port_features.is_empty()) {
            match arcs.apply(port_features) {
                Ok(_) => changed.push("port-features"),
                Err(e) => tracing::warn!("reload: [[port]] features: {e}"),
            }
        }
        // The LB: its difference as one change (checked above).
        if let (Some((cmds, configured)), Some(lb)) = (lb_plan, &self.lb) {
            match lb.apply(cmds) {
                Ok(v) => lb_version = Some(v),
                Err(e) => tracing::warn!("reload: [lb]: {e}"),
            }
            lb.set_configured(*configured);
            changed.push("lb");
        }
        lb_version
    }

    /// The live settings of `diff` (poll modes, neighbour timers, bridge aging, ICMP errors,
    /// IPv4 options): they cannot fail. Names what changed in `changed`.
    fn apply_settings(&self, diff: &crate::config::LiveDiff, changed: &mut Vec<&str>) {
        if let Some(p) = &diff.poll {
            for (w, setting) in self.policies.poll.iter().enumerate() {
                setting.set(p.mode_of(w), p.sleep_max_us);
            }
            changed.push("poll-mode");
        }
        if let Some(n) = &diff.neighbour {
            self.policies
                .neighbour
                .set(n.reachable_seconds, n.gc_seconds);
            changed.push("neighbour-timers");
        }
        if let Some(b) = &diff.bridge {
            self.policies
                .bridge_age_seconds
                .store(b.age_seconds, std::sync::atomic::Ordering::Relaxed);
            changed.push("bridge-age-seconds");
        }
        if let Some(ip) = &diff.ip {
            let rate = (ip.icmp_errors_per_second, ip.icmp_errors_burst);
            if self.policies.icmp.get() != rate {
                self.policies.icmp.set(rate.0, rate.1);
                changed.push("icmp-errors");
            }
            let options = dataplane::build::ip4_options(ip.ip4_options);
            if self.policies.ip4_options.get() != options {
                self.policies.ip4_options.set(options);
                changed.push("ip4-options");
            }
        }
    }

    /// The routing changes of `diff` against the tables as they are: deletions of what the API
    /// already removed are left out, and static neighbours' ports are the running ids of the
    /// ports the file names.
    fn routing_changes(
        &self,
        file: &str,
        (diff, config): (&crate::config::LiveDiff, &Config),
        live: &LivePorts,
        routing: &Routing,
    ) -> Result<Vec<Change>, ReloadError> {
        let mut changes = Vec::new();
        for c in changes_of(diff) {
            match c {
                Change::DeleteRoute { prefix, len } if routing.route(prefix, len).is_none() => {}
                Change::DeleteNeighbour(ip) if routing.neighbour(ip).is_none() => {}
                Change::ReplaceNeighbour(mut n) => {
                    let name = config
                        .spec
                        .ports
                        .get(n.port)
                        .map_or("", |p| p.name.as_str());
                    n.port = id_of(live, name).ok_or_else(|| ReloadError::Refused {
                        file: file.to_string(),
                        message: format!(
                            "a static neighbour's port `{name}` does not run (the API removed \
                             it); accepted: a port that runs"
                        ),
                    })?;
                    changes.push(Change::ReplaceNeighbour(n));
                }
                c => changes.push(c),
            }
        }
        Ok(changes)
    }

    /// Re-read the file and apply the difference as one version, or nothing.
    pub fn reload(&self) -> Result<Value, ReloadError> {
        let file = self.path.display().to_string();
        let config = Config::load(&self.path)
            .and_then(|c| c.check_files().map(|()| c))
            .map_err(|e| ReloadError::Invalid(e.to_string()))?;
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let diff =
            crate::config::live_diff(&running, &config).map_err(|n| ReloadError::NotLive {
                what: n.to_string(),
            })?;
        let live = self.live_ports(&running);
        let features = self.plan_features(&file, &running, &config)?;
        let (mut port_features, features_of_added) =
            self.plan_port_features(&file, (&running, &config), (&live, &diff.ports_added))?;
        // The LB part is checked first against the running LB (the API may have changed it):
        // a refusal there applies nothing at all. A change of the health checks (`[lb]` probe
        // sources and `[[lb.health-check]]`) or of `[bgp]` was refused by `live_diff`: they
        // take effect at a restart.
        let lb_plan = match (&diff.lb, &self.lb) {
            (Some(change), Some(lb)) => {
                Some(plan_lb(lb, change).map_err(|e| ReloadError::Refused {
                    file: file.clone(),
                    message: format!("[lb]: {}", e.reason()),
                })?)
            }
            _ => None,
        };
        let mut routing = dataplane::build::lock(&self.routing);
        let changes = self.routing_changes(&file, (&diff, &config), &live, &routing)?;
        // Ports added and removed and ports' own addresses: alone, so that routes never point
        // at a prefix that is not there yet or any more (make before break: add the port or
        // the new prefix, move the routes, drop the old prefix or port, each in its own reload).
        let ports_change = !(diff.ports_added.is_empty()
            && diff.ports_removed.is_empty()
            && diff.addrs.is_empty());
        let mut version = routing.version();
        let mut port_plan = PortPlan::default();
        let mut port_errors = Vec::new();
        if ports_change {
            if !changes.is_empty() {
                return Err(ReloadError::NotLive {
                    what: format!(
                        "{file}: ports or their ip4/ip6 and routes or static neighbours changed \
                         together; accepted: change the ports in one reload and the routes in \
                         another (add the port or prefix, move the routes, then drop the old \
                         prefix or port)"
                    ),
                });
            }
            // Adding and removing a port, and checking that it can go, take the routing
            // tables' lock.
            drop(routing);
            port_plan = self.plan_ports(&file, &diff, &live)?;
            port_errors = self.apply_ports(&file, &port_plan)?;
            // The added ports' features, now that they have ids.
            let now = self.live_ports(&config);
            port_features.extend(features_of_added.iter().filter_map(|f| {
                Some(ArcChange {
                    arc: f.arc.clone(),
                    feature: f.feature.clone(),
                    port: id_of(&now, &f.port)?,
                    enable: true,
                })
            }));
        } else if !changes.is_empty() {
            version = routing
                .apply(&changes)
                .map_err(|e| ReloadError::Refused {
                    file: file.clone(),
                    message: e.to_string(),
                })?
                .version;
            drop(routing);
        } else {
            drop(routing);
        }
        let mut routing = dataplane::build::lock(&self.routing);
        // Ports' MTUs: static neighbours' adjacencies first, then the workers' entries. This
        // cannot fail: the ports run (a port the API removed is left out) and the neighbours it
        // republishes were accepted before.
        for (name, mtu) in &diff.mtus {
            let Some(port) = id_of(&live, name) else {
                continue;
            };
            if let Err(e) = routing.set_port_mtu(port, *mtu) {
                tracing::warn!("reload: mtu of port `{name}`: {}", e.0);
            }
            self.policies.port_mtus.set(port, *mtu);
        }
        version = version.max(routing.version());
        drop(routing);
        // The routing batch is in: the policies cannot fail.
        let mut policies: Vec<&str> = Vec::new();
        if !diff.addrs.is_empty() {
            policies.push("addresses");
        }
        if !diff.mtus.is_empty() {
            policies.push("mtu");
        }
        let lb_version =
            self.apply_tables(&diff, (&features, &port_features), &lb_plan, &mut policies);
        self.apply_settings(&diff, &mut policies);
        let counts = |f: fn(&Change) -> bool| changes.iter().filter(|c| f(c)).count();
        let answer = json!({
            "file": file,
            "version": version,
            "changes": changes.len(),
            "routes_set": counts(|c| matches!(c, Change::ReplaceRoute(_))),
            "routes_deleted": counts(|c| matches!(c, Change::DeleteRoute { .. })),
            "neighbours_set": counts(|c| matches!(c, Change::ReplaceNeighbour(_))),
            "neighbours_deleted": counts(|c| matches!(c, Change::DeleteNeighbour(_))),
            "policies_changed": policies,
            "ports_added": port_plan.added.iter().map(|p| &p.name).collect::<Vec<_>>(),
            "ports_removed": port_plan.removed.iter().map(|(_, n)| n).collect::<Vec<_>>(),
            "port_errors": port_errors,
            "lb_commands": lb_plan.as_ref().map_or(0, |p| p.0.len()),
            "lb_version": lb_version,
        });
        *running = config;
        Ok(answer)
    }
}

/// The commands that make `lb` what `change` says, and whether `[lb]` is configured after
/// them; checked against the running load balancer (the API may have changed it), nothing
/// applied.
fn plan_lb(
    lb: &dataplane::lb::LbControl,
    change: &crate::config::LbChange,
) -> Result<(Vec<lb::model::LbCommand>, bool), dataplane::lb::LbApplyError> {
    match change {
        crate::config::LbChange::Set(target) => Ok((lb.plan_replace(target)?, true)),
        crate::config::LbChange::Remove => {
            let target = lb.removal_target()?;
            Ok((lb.plan_replace(&target)?, false))
        }
    }
}

mod ports;
#[cfg(test)]
mod tests;

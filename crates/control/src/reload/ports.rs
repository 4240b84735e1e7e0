//! The ports a reload adds and removes: matched by name with the ports that run (the API may
//! have added or removed some since the file was applied), checked before anything changes,
//! then added, their addresses and the removed ports' taken as one routing change, and
//! removed. It owns the order of those steps; `PortControl` does each.

use super::{ReloadError, Reloader};
use crate::config::Config;
use std::net::IpAddr;

/// Ports that run: (id, name).
pub(super) type LivePorts = Vec<(usize, String)>;

pub(super) fn id_of(live: &LivePorts, name: &str) -> Option<usize> {
    live.iter().find(|(_, n)| n == name).map(|(i, _)| *i)
}

/// What a reload does to the ports, checked before anything is applied.
#[derive(Default)]
pub(super) struct PortPlan {
    /// Ports to add, in file order.
    pub(super) added: Vec<dataplane::PortSpec>,
    /// Ports to remove: (id, name).
    pub(super) removed: Vec<(usize, String)>,
    /// Ports' new own addresses: (id, all of them).
    pub(super) addrs: Vec<(usize, nodes::neighbour::OwnAddresses)>,
}

impl Reloader {
    /// The ports that run, by id: the port control's, else the start's.
    pub(super) fn live_ports(&self, running: &Config) -> LivePorts {
        match (&self.ports, &self.arcs) {
            (Some(pc), _) => pc
                .ports()
                .into_iter()
                .map(|(i, p)| (usize::from(i), p.name))
                .collect(),
            (None, Some((_, names))) => names.iter().cloned().enumerate().collect(),
            (None, None) => running
                .spec
                .ports
                .iter()
                .map(|p| p.name.clone())
                .enumerate()
                .collect(),
        }
    }

    /// What the reload does to the ports, checked against the ports that run (a port the API
    /// removed meanwhile is left out; one the API added with the file's settings is kept).
    /// Nothing is applied.
    pub(super) fn plan_ports(
        &self,
        file: &str,
        diff: &crate::config::LiveDiff,
        live: &LivePorts,
    ) -> Result<PortPlan, ReloadError> {
        let refused = |message: String| ReloadError::Refused {
            file: file.to_string(),
            message,
        };
        let mut plan = PortPlan::default();
        let pc = match &self.ports {
            Some(pc) => Some(pc),
            None if diff.ports_added.is_empty() && diff.ports_removed.is_empty() => None,
            None => {
                return Err(ReloadError::NotLive {
                    what: format!(
                        "{file}: ports are added or removed, and this data plane cannot change \
                         its ports while it runs"
                    ),
                })
            }
        };
        if let Some(pc) = pc {
            let running = pc.ports();
            for port in &diff.ports_added {
                match running.iter().find(|(_, p)| p.name == port.name) {
                    Some((_, p)) if p == port => {}
                    Some(_) => {
                        return Err(refused(format!(
                            "port `{}` runs already (the API added it) with other settings; \
                             accepted: the settings it runs with, or remove it first",
                            port.name
                        )))
                    }
                    None => plan.added.push(port.clone()),
                }
            }
            for name in &diff.ports_removed {
                let Some(id) = id_of(live, name) else {
                    continue;
                };
                pc.check_removal(name)
                    .map_err(|e| refused(format!("port `{name}` cannot be removed: {e}")))?;
                plan.removed.push((id, name.clone()));
            }
        }
        plan.addrs = diff
            .addrs
            .iter()
            .filter_map(|(name, a)| id_of(live, name).map(|id| (id, a.clone())))
            .collect();
        Ok(plan)
    }

    /// Apply `plan`: add the ports (a refusal removes those added before it and applies
    /// nothing), give the addresses and take the removed ports' away as one routing change
    /// (a refusal likewise), then remove the ports. Returns what failed after the point of no
    /// return (a removal a worker did not answer), which the answer lists as `port_errors`.
    pub(super) fn apply_ports(
        &self,
        file: &str,
        plan: &PortPlan,
    ) -> Result<Vec<String>, ReloadError> {
        let refused = |message: String| ReloadError::Refused {
            file: file.to_string(),
            message,
        };
        // Take back the ports added before a refusal; a port that would not go is said.
        let undo = |added: &[&str], why: String| {
            let stuck: Vec<String> = added
                .iter()
                .filter_map(|name| match self.ports.as_ref().map(|pc| pc.remove(name)) {
                    Some(Err(e)) => Some(format!("port `{name}` stays: {e}")),
                    _ => None,
                })
                .collect();
            if stuck.is_empty() {
                refused(why)
            } else {
                refused(format!(
                    "{why}; taking back what was added: {}",
                    stuck.join("; ")
                ))
            }
        };
        let mut added: Vec<&str> = Vec::new();
        for port in &plan.added {
            let Some(pc) = &self.ports else { break };
            if let Err(e) = pc.add(port.clone()) {
                return Err(undo(&added, format!("port `{}`: {e}", port.name)));
            }
            added.push(&port.name);
        }
        let list: Vec<(usize, Vec<(IpAddr, u8)>)> = plan
            .addrs
            .iter()
            .map(|(p, (v4, v6))| {
                let all = v4
                    .iter()
                    .map(|(a, l)| (IpAddr::V4(*a), *l))
                    .chain(v6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)))
                    .collect();
                (*p, all)
            })
            .chain(plan.removed.iter().map(|(id, _)| (*id, Vec::new())))
            .collect();
        if !list.is_empty() {
            let set = dataplane::build::lock(&self.routing).set_port_addresses(&list);
            if let Err(e) = set {
                let why = plan
                    .removed
                    .iter()
                    .map(|(_, n)| n.as_str())
                    .collect::<Vec<_>>();
                let hint = if why.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (removing {}: delete the routes through them first)",
                        why.join(", ")
                    )
                };
                return Err(undo(&added, format!("{}{hint}", e.0)));
            }
            for (p, addrs) in &plan.addrs {
                self.policies.port_addrs.set(*p, addrs.clone());
            }
        }
        let mut errors = Vec::new();
        for (_, name) in &plan.removed {
            if let Some(Err(e)) = self.ports.as_ref().map(|pc| pc.remove(name)) {
                errors.push(format!("port `{name}`: {e}"));
            }
        }
        Ok(errors)
    }
}

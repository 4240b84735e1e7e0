//! The health-check probe host: a private network namespace, held by vecplane alone (no name,
//! gone with the process, even on SIGKILL), whose kernel makes the probes. Its only interface
//! is a TAP that is a port of the data path (`lb-probe`): the kernel there holds the probe
//! source addresses (vecplane's own port addresses) and routes everything into the data path,
//! which wraps probes for their servers (`lb` node, `lb::probe` leases) and hands replies to
//! the probe sources back (`probe-reply` node). It owns the namespace, the port's description
//! and the kernel-side set-up; it never sends a probe and never changes a table.
//!
//! The TAP and its kernel side share one MAC and the kernel side does no ARP or ND (`arp off`):
//! the kernel addresses every frame to its own MAC, which is the port's, and accepts frames
//! addressed to it; nothing needs resolving on this link.

use crate::spec::{PortDriver, PortSpec};
use lb::health::ProbeSources;
use lb::probe::{ProbeLeases, PROBE_PORT_BASE};
use packet::headers::Mac;
use ports::netns::{self, Netns};
use std::sync::Arc;

/// The port's name in `show interfaces`.
pub const PROBE_PORT: &str = "lb-probe";
/// The TAP's name inside the namespace.
pub const PROBE_TAP: &str = "vplprobe";
/// The MAC of both ends of the TAP (locally administered).
pub const PROBE_MAC: Mac = [0x02, 0x76, 0x70, 0x70, 0x72, 0x01];
/// Largest packet on the probe link.
pub const PROBE_MTU: u16 = 1500;

/// What the data path needs of the probe host's port.
#[derive(Clone, Debug)]
pub struct ProbeHostPort {
    /// The TAP's name inside the namespace.
    pub name: String,
    /// The namespace.
    pub netns: Netns,
    /// The probe band's leases (written by the prober, read by the `lb` node).
    pub leases: Arc<ProbeLeases>,
}

impl PartialEq for ProbeHostPort {
    fn eq(&self, other: &ProbeHostPort) -> bool {
        self.name == other.name
            && self.netns == other.netns
            && Arc::ptr_eq(&self.leases, &other.leases)
    }
}

/// The probe host: its namespace and leases.
#[derive(Clone, Debug)]
pub struct ProbeHost {
    port: ProbeHostPort,
}

impl ProbeHost {
    /// A fresh private namespace for the probes (needs root).
    pub fn create() -> Result<ProbeHost, String> {
        let netns = netns::create_private().map_err(|e| {
            format!("health checks: cannot create the probe namespace (needs root): {e}")
        })?;
        Ok(ProbeHost {
            port: ProbeHostPort {
                name: PROBE_TAP.to_string(),
                netns,
                leases: Arc::new(ProbeLeases::new()),
            },
        })
    }

    /// The port to add to the data plane (before it is built).
    pub fn port_spec(&self) -> PortSpec {
        PortSpec {
            name: PROBE_PORT.to_string(),
            mac: PROBE_MAC,
            mtu: PROBE_MTU,
            ip4: Vec::new(),
            ip6: Vec::new(),
            driver: PortDriver::ProbeHost(self.port.clone()),
        }
    }

    /// The probe band's leases.
    pub fn leases(&self) -> &Arc<ProbeLeases> {
        &self.port.leases
    }

    /// The namespace (the prober's threads enter it).
    pub fn netns(&self) -> &Netns {
        &self.port.netns
    }

    /// Set up the kernel side once the data plane has created the TAP: `lo` and the TAP up,
    /// the TAP's MAC, no ARP/ND, the probe sources on it, default routes through it, the
    /// ephemeral ports below the probe band and ping sockets allowed.
    pub fn configure(&self, sources: &ProbeSources) -> Result<(), String> {
        let mac = PROBE_MAC
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let tap = self.port.name.as_str();
        let mut steps: Vec<Vec<String>> = vec![
            strings(&["link", "set", "lo", "up"]),
            strings(&["link", "set", tap, "address", &mac, "arp", "off"]),
            strings(&["link", "set", tap, "up"]),
        ];
        if let Some(a) = sources.ip4 {
            steps.push(strings(&["addr", "add", &format!("{a}/32"), "dev", tap]));
            steps.push(strings(&["route", "add", "default", "dev", tap]));
        }
        if let Some(a) = sources.ip6 {
            steps.push(strings(&[
                "-6",
                "addr",
                "add",
                &format!("{a}/128"),
                "dev",
                tap,
                "nodad",
            ]));
            steps.push(strings(&["-6", "route", "add", "default", "dev", tap]));
        }
        let sysctls = [
            (
                "/proc/sys/net/ipv4/ip_local_port_range",
                format!("32768 {}", PROBE_PORT_BASE - 1),
            ),
            (
                "/proc/sys/net/ipv4/ping_group_range",
                "0 2147483647".to_string(),
            ),
        ];
        let v6_sysctls = [
            format!("/proc/sys/net/ipv6/conf/{tap}/accept_ra"),
            format!("/proc/sys/net/ipv6/conf/{tap}/router_solicitations"),
        ];
        netns::run_in(&self.port.netns, || -> Result<(), String> {
            for (path, value) in &sysctls {
                std::fs::write(path, value)
                    .map_err(|e| format!("probe namespace: cannot write {path}: {e}"))?;
            }
            for path in &v6_sysctls {
                // IPv6 may be off in the kernel: then there is nothing to quiet.
                let _ = std::fs::write(path, "0");
            }
            for a in &steps {
                netns::ip(a)?;
            }
            Ok(())
        })
        .map_err(|e| format!("probe namespace: {e}"))?
    }
}

/// Owned copies of `a` (one `ip` command).
fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The probe host's port in a spec: its port id and description.
pub fn find(ports: &[PortSpec]) -> Option<(usize, &ProbeHostPort)> {
    ports.iter().enumerate().find_map(|(i, p)| match &p.driver {
        PortDriver::ProbeHost(h) => Some((i, h)),
        _ => None,
    })
}

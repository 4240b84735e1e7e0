//! What a health check is, as the configuration and the API state it: per VIP, the probe
//! (TCP connect, HTTP GET with an expected status, UDP, ICMP echo), its timing (interval,
//! timeout, rise and fall counts), what a server that goes down gets (drain: weight 0, its
//! flows stay; flush: its flows are evicted too) and how the probe travels (through the VIP's
//! encapsulation, the default, or straight to the server's address). Also the data path's
//! probe sources (the addresses probes leave from). Pure data and validation: it never sends a
//! probe, never touches a socket and never changes a table.

use crate::model::{Encap, VipKey};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// What a probe does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// A TCP connection is established (then reset).
    Tcp,
    /// An HTTP/1.1 `GET path` whose status line carries `expect`; over TLS with `tls`
    /// (HTTPS: the server's certificate is not verified, as a health check only reads the
    /// status).
    Http {
        /// The request path (starts with `/`).
        path: String,
        /// The `Host` header (None: the probed address).
        host: Option<String>,
        /// The status the server must answer with.
        expect: u16,
        /// HTTPS.
        tls: bool,
    },
    /// A UDP datagram with `payload`; healthy when any datagram comes back before the
    /// timeout (`expect_reply`), or when no ICMP "port unreachable" does (not `expect_reply`).
    Udp {
        /// What is sent.
        payload: Vec<u8>,
        /// Whether a reply is required.
        expect_reply: bool,
    },
    /// An ICMP/ICMPv6 echo request answered by an echo reply (always sent straight to the
    /// server's address: echo has no port to carry a VIP's service).
    Icmp,
}

impl ProbeKind {
    /// The name used in the configuration and in `show`.
    pub fn name(&self) -> &'static str {
        match self {
            ProbeKind::Tcp => "tcp",
            ProbeKind::Http { tls: false, .. } => "http",
            ProbeKind::Http { tls: true, .. } => "https",
            ProbeKind::Udp { .. } => "udp",
            ProbeKind::Icmp => "icmp",
        }
    }
}

/// What a server marked down gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnDown {
    /// Out of the Maglev table (no new flows); established flows stay.
    #[default]
    Drain,
    /// Out of the Maglev table and its flows evicted.
    Flush,
}

impl OnDown {
    /// The name used in the configuration and in `show`.
    pub fn name(self) -> &'static str {
        match self {
            OnDown::Drain => "drain",
            OnDown::Flush => "flush",
        }
    }
}

/// How a probe reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProbePath {
    /// Addressed to the VIP and wrapped as client traffic is (L3DSR, GRE4, GRE6), so a server
    /// that cannot take the encapsulation is marked down. NAT VIPs are probed at the server's
    /// address and target port, which is what their clients' packets become.
    #[default]
    Encap,
    /// Addressed to the server's own address.
    Direct,
}

impl ProbePath {
    /// The name used in the configuration and in `show`.
    pub fn name(self) -> &'static str {
        match self {
            ProbePath::Encap => "encap",
            ProbePath::Direct => "direct",
        }
    }
}

/// One VIP's health check: every server of the VIP is probed with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    /// The VIP whose servers are probed.
    pub vip: VipKey,
    /// The probe.
    pub kind: ProbeKind,
    /// Destination port (None: the VIP's port, or its NAT target port; required for an
    /// all-ports VIP unless the kind is ICMP).
    pub port: Option<u16>,
    /// Time between the starts of two probes of one server.
    pub interval: Duration,
    /// How long a probe may take (less than `interval`).
    pub timeout: Duration,
    /// Consecutive successes that bring a down server up.
    pub rise: u32,
    /// Consecutive failures that take an up server down.
    pub fall: u32,
    /// What a server marked down gets.
    pub on_down: OnDown,
    /// How the probe travels.
    pub path: ProbePath,
}

impl HealthCheck {
    /// Whether probes are addressed to the VIP and wrapped by the data path as client traffic
    /// (`Encap` path on an L3DSR, GRE4 or GRE6 VIP, any kind but ICMP) rather than addressed
    /// to the server itself (NAT VIPs, the `Direct` path, ICMP).
    pub fn via_vip(&self, encap: Encap) -> bool {
        self.path == ProbePath::Encap
            && self.kind != ProbeKind::Icmp
            && matches!(encap, Encap::L3dsr { .. } | Encap::Gre4 | Encap::Gre6)
    }

    /// The destination port of the probes: `port`, else the NAT target port, else the VIP's
    /// port. ICMP: always `Some(0)` (echo has no port). None: an all-ports VIP without `port`.
    pub fn dest_port(&self, encap: Encap) -> Option<u16> {
        if self.kind == ProbeKind::Icmp {
            return Some(0);
        }
        let default = match encap {
            Encap::Nat4 { target_port } | Encap::Nat6 { target_port } if target_port != 0 => {
                target_port
            }
            _ => self.vip.port,
        };
        self.port.or(Some(default)).filter(|p| *p != 0)
    }
}

/// Defaults of a health check's optional fields.
pub mod defaults {
    use std::time::Duration;
    /// `interval`.
    pub const INTERVAL: Duration = Duration::from_secs(1);
    /// `timeout`.
    pub const TIMEOUT: Duration = Duration::from_millis(500);
    /// `rise`.
    pub const RISE: u32 = 2;
    /// `fall`.
    pub const FALL: u32 = 3;
    /// HTTP `expect`.
    pub const HTTP_EXPECT: u16 = 200;
    /// HTTP `path`.
    pub const HTTP_PATH: &str = "/";
}

/// Limits of a health check's fields.
pub mod limits {
    use std::time::Duration;
    /// Shortest `interval`.
    pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
    /// Longest `interval`.
    pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
    /// Shortest `timeout`.
    pub const MIN_TIMEOUT: Duration = Duration::from_millis(10);
    /// Largest `rise` and `fall`.
    pub const MAX_COUNT: u32 = 100;
    /// Longest UDP payload.
    pub const MAX_UDP_PAYLOAD: usize = 1024;
    /// Longest HTTP path or host.
    pub const MAX_HTTP_TEXT: usize = 1024;
}

/// The addresses probes leave the data path from: each must be one of vecplane's own port
/// addresses (replies come back to the data path, which hands them to the prober).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ProbeSources {
    /// Source of IPv4 probes (needed when an IPv4 server is probed).
    pub ip4: Option<Ipv4Addr>,
    /// Source of IPv6 probes (needed when an IPv6 server is probed).
    pub ip6: Option<Ipv6Addr>,
}

/// Every health check of a configuration, with the probe sources.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HealthConfig {
    /// Where probes leave from.
    pub sources: ProbeSources,
    /// The checks, at most one per VIP.
    pub checks: Vec<HealthCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Prefix, VipProtocol};

    fn check(kind: ProbeKind, port: Option<u16>, path: ProbePath, vip_port: u16) -> HealthCheck {
        HealthCheck {
            vip: VipKey {
                prefix: Prefix::host("198.18.1.1".parse().expect("addr")),
                protocol: if vip_port == 0 {
                    VipProtocol::Any
                } else {
                    VipProtocol::Tcp
                },
                port: vip_port,
            },
            kind,
            port,
            interval: defaults::INTERVAL,
            timeout: defaults::TIMEOUT,
            rise: defaults::RISE,
            fall: defaults::FALL,
            on_down: OnDown::Drain,
            path,
        }
    }

    #[test]
    fn probes_go_through_the_vip_only_on_encap_l3dsr_and_gre() {
        let tcp = check(ProbeKind::Tcp, None, ProbePath::Encap, 80);
        assert!(tcp.via_vip(Encap::L3dsr { dscp: 1 }));
        assert!(tcp.via_vip(Encap::Gre4));
        assert!(tcp.via_vip(Encap::Gre6));
        assert!(!tcp.via_vip(Encap::Nat4 { target_port: 8080 }));
        assert!(!tcp.via_vip(Encap::Nat6 { target_port: 8080 }));
        assert!(!check(ProbeKind::Tcp, None, ProbePath::Direct, 80).via_vip(Encap::Gre4));
        assert!(!check(ProbeKind::Icmp, None, ProbePath::Encap, 80).via_vip(Encap::Gre4));
    }

    #[test]
    fn the_probe_port_is_the_checks_the_nat_targets_or_the_vips() {
        let nat = Encap::Nat4 { target_port: 8080 };
        assert_eq!(
            check(ProbeKind::Tcp, None, ProbePath::Encap, 80).dest_port(Encap::Gre4),
            Some(80)
        );
        assert_eq!(
            check(ProbeKind::Tcp, None, ProbePath::Encap, 80).dest_port(nat),
            Some(8080)
        );
        assert_eq!(
            check(ProbeKind::Tcp, Some(22), ProbePath::Encap, 80).dest_port(nat),
            Some(22)
        );
        assert_eq!(
            check(ProbeKind::Tcp, None, ProbePath::Encap, 0).dest_port(Encap::Gre4),
            None
        );
        assert_eq!(
            check(ProbeKind::Icmp, None, ProbePath::Encap, 0).dest_port(Encap::Gre4),
            Some(0)
        );
    }
}

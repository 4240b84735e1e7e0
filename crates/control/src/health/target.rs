//! Where a probe goes and where it leaves from: addressed to the VIP (wrapped by the data path
//! for the probed server, as client traffic) on an L3DSR/GRE VIP with the `encap` path, else to
//! the server's own address; at the check's port, the NAT target port or the VIP's port; from
//! the probe source of the destination's family. Pure: it never opens a socket; a target it
//! cannot place is reported, never probed.

use lb::health::{HealthCheck, ProbeSources};
use lb::model::Encap;
use std::net::{IpAddr, SocketAddr};

/// Where one server's probes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbePlan {
    /// The probe source address (the band port is chosen per probe).
    pub source: IpAddr,
    /// The destination (port 0 for ICMP).
    pub dest: SocketAddr,
    /// True when addressed to the VIP and wrapped by the data path.
    pub via_vip: bool,
}

/// The plan for probing `server` of a VIP at `vip_addr` with encapsulation `encap` by `check`;
/// Err with the reason when it cannot be probed (no port, no source of the family).
pub fn plan(
    check: &HealthCheck,
    vip_addr: IpAddr,
    encap: Encap,
    server: IpAddr,
    sources: &ProbeSources,
) -> Result<ProbePlan, String> {
    let via_vip = check.via_vip(encap);
    let addr = if via_vip { vip_addr } else { server };
    let Some(port) = check.dest_port(encap) else {
        return Err(format!(
            "no port to probe: the VIP {} has all ports and the check gives none",
            check.vip
        ));
    };
    let source = match addr {
        IpAddr::V4(_) => sources.ip4.map(IpAddr::V4),
        IpAddr::V6(_) => sources.ip6.map(IpAddr::V6),
    };
    let Some(source) = source else {
        let (family, key) = if addr.is_ipv4() {
            ("IPv4", "probe-source4")
        } else {
            ("IPv6", "probe-source6")
        };
        return Err(format!(
            "no {family} probe source ([lb] {key}) to probe {addr}"
        ));
    };
    Ok(ProbePlan {
        source,
        dest: SocketAddr::new(addr, port),
        via_vip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb::health::{OnDown, ProbeKind, ProbePath};
    use lb::model::{Prefix, VipKey, VipProtocol};
    use std::time::Duration;

    fn check(kind: ProbeKind, port: Option<u16>, path: ProbePath, vip_port: u16) -> HealthCheck {
        let addr: IpAddr = "198.18.1.1".parse().expect("addr");
        HealthCheck {
            vip: VipKey {
                prefix: Prefix::host(addr),
                protocol: if vip_port == 0 {
                    VipProtocol::Any
                } else {
                    VipProtocol::Tcp
                },
                port: vip_port,
            },
            kind,
            port,
            interval: Duration::from_secs(1),
            timeout: Duration::from_millis(500),
            rise: 2,
            fall: 3,
            on_down: OnDown::Drain,
            path,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("addr")
    }

    fn both() -> ProbeSources {
        ProbeSources {
            ip4: Some("198.18.12.1".parse().expect("v4")),
            ip6: Some("2001:db8:12::1".parse().expect("v6")),
        }
    }

    const VIP: &str = "198.18.1.1";

    #[test]
    fn encap_probes_of_l3dsr_and_gre_vips_go_to_the_vip() {
        let c = check(ProbeKind::Tcp, None, ProbePath::Encap, 80);
        for encap in [Encap::L3dsr { dscp: 23 }, Encap::Gre4] {
            let p = plan(&c, ip(VIP), encap, ip("198.18.2.1"), &both()).expect("plan");
            assert_eq!(p.dest, "198.18.1.1:80".parse().expect("sa"));
            assert_eq!(p.source, ip("198.18.12.1"));
            assert!(p.via_vip);
        }
        // GRE6: IPv6 servers, but the probe goes to the (IPv4) VIP: the VIP's family decides.
        let p = plan(&c, ip(VIP), Encap::Gre6, ip("2001:db8:2::1"), &both()).expect("plan");
        assert_eq!(p.source, ip("198.18.12.1"));
        assert_eq!(p.dest.ip(), ip(VIP));
        // The check's port wins over the VIP's.
        let c = check(ProbeKind::Tcp, Some(8080), ProbePath::Encap, 80);
        let p = plan(&c, ip(VIP), Encap::Gre4, ip("198.18.2.1"), &both()).expect("plan");
        assert_eq!(p.dest.port(), 8080);
    }

    #[test]
    fn nat_direct_and_icmp_probes_go_to_the_server() {
        let c = check(ProbeKind::Tcp, None, ProbePath::Encap, 80);
        let nat = Encap::Nat4 { target_port: 8080 };
        let p = plan(&c, ip(VIP), nat, ip("198.18.2.1"), &both()).expect("plan");
        assert_eq!(p.dest, "198.18.2.1:8080".parse().expect("sa"));
        assert!(!p.via_vip);
        let p = plan(
            &c,
            ip("2001:db8:1::1"),
            Encap::Nat6 { target_port: 81 },
            ip("2001:db8:2::1"),
            &both(),
        )
        .expect("plan");
        assert_eq!(p.dest, "[2001:db8:2::1]:81".parse().expect("sa"));
        assert_eq!(p.source, ip("2001:db8:12::1"));
        let c = check(ProbeKind::Tcp, None, ProbePath::Direct, 80);
        let p = plan(
            &c,
            ip(VIP),
            Encap::L3dsr { dscp: 1 },
            ip("198.18.2.1"),
            &both(),
        )
        .expect("plan");
        assert_eq!(p.dest, "198.18.2.1:80".parse().expect("sa"));
        assert!(!p.via_vip);
        let c = check(ProbeKind::Icmp, None, ProbePath::Encap, 0);
        let p = plan(&c, ip(VIP), Encap::Gre6, ip("2001:db8:2::1"), &both()).expect("plan");
        assert_eq!(p.dest, "[2001:db8:2::1]:0".parse().expect("sa"));
        assert_eq!(p.source, ip("2001:db8:12::1"));
    }

    #[test]
    fn a_target_without_a_source_or_port_is_not_probed() {
        let v4_only = ProbeSources {
            ip4: both().ip4,
            ip6: None,
        };
        let c = check(ProbeKind::Icmp, None, ProbePath::Encap, 80);
        let e = plan(&c, ip(VIP), Encap::Gre6, ip("2001:db8:2::1"), &v4_only).expect_err("no v6");
        assert!(e.contains("probe-source6"), "{e}");
        let c = check(ProbeKind::Tcp, None, ProbePath::Encap, 0);
        let e = plan(&c, ip(VIP), Encap::Gre4, ip("198.18.2.1"), &both()).expect_err("no port");
        assert!(e.contains("no port"), "{e}");
        let c = check(ProbeKind::Tcp, Some(22), ProbePath::Encap, 0);
        assert!(plan(&c, ip(VIP), Encap::Gre4, ip("198.18.2.1"), &both()).is_ok());
    }
}

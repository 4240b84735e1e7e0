//! What a load-balancer lab is made of: its fixed addresses and MACs, the encapsulations and
//! their VIPs, who balances (vecplane on bare ports or the kernel reference), the build spec and
//! its checks, and the servers and LB ports as built. Plain data: it never creates anything.

use anyhow::{bail, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Fixed addresses and MACs of the lab (all from 198.18.0.0/15 and 2001:db8::/32).
pub mod addr {
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The client (prefix length 24 / 64 on every subnet).
    pub const CLIENT4: Ipv4Addr = Ipv4Addr::new(198, 18, 10, 2);
    /// The client's IPv6 address.
    pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 0, 0, 0, 0, 2);
    /// The router towards the client (the client's gateway).
    pub const ROUTER_C4: Ipv4Addr = Ipv4Addr::new(198, 18, 10, 1);
    /// The router towards the client, IPv6.
    pub const ROUTER_C6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x10, 0, 0, 0, 0, 1);
    /// The router towards the load balancer (the LB's default gateway).
    pub const ROUTER_U4: Ipv4Addr = Ipv4Addr::new(198, 18, 11, 1);
    /// The router towards the load balancer, IPv6.
    pub const ROUTER_U6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x11, 0, 0, 0, 0, 1);
    /// The load balancer's uplink (the router's next hop for every VIP).
    pub const LB_UP4: Ipv4Addr = Ipv4Addr::new(198, 18, 11, 2);
    /// The load balancer's uplink, IPv6.
    pub const LB_UP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x11, 0, 0, 0, 0, 2);
    /// The load balancer on the servers' segment (the servers' default gateway; the GRE outer
    /// source of the kernel reference).
    pub const LB_DOWN4: Ipv4Addr = Ipv4Addr::new(198, 18, 12, 1);
    /// The load balancer on the servers' segment, IPv6.
    pub const LB_DOWN6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x12, 0, 0, 0, 0, 1);
    /// The router on the servers' segment (where replies from a VIP go).
    pub const ROUTER_S4: Ipv4Addr = Ipv4Addr::new(198, 18, 12, 254);
    /// The router on the servers' segment, IPv6.
    pub const ROUTER_S6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x12, 0, 0, 0, 0, 0xfe);
    /// Every VIP is inside this prefix (routed by the router to the LB's uplink).
    pub const VIP_NET4: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 100, 0), 24);
    /// Every IPv6 VIP is inside this prefix.
    pub const VIP_NET6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2001, 0xdb8, 0x100, 0, 0, 0, 0, 0), 64);
    /// Prefix length of the IPv4 subnets.
    pub const LEN4: u8 = 24;
    /// Prefix length of the IPv6 subnets.
    pub const LEN6: u8 = 64;

    /// MAC of the client's veth.
    pub const MAC_CLIENT: &str = "02:00:00:10:00:02";
    /// MAC of the router's veth towards the client.
    pub const MAC_ROUTER_C: &str = "02:00:00:10:00:01";
    /// MAC of the router's veth towards the LB.
    pub const MAC_ROUTER_U: &str = "02:00:00:11:00:01";
    /// MAC of the LB's uplink (vecplane's port there uses it too).
    pub const MAC_LB_UP: &str = "02:00:00:11:00:02";
    /// MAC of the LB's port on the servers' segment (vecplane's port there uses it too).
    pub const MAC_LB_DOWN: &str = "02:00:00:12:00:01";
    /// MAC of the router's bridge on the servers' segment.
    pub const MAC_ROUTER_S: &str = "02:00:00:12:00:fe";

    /// Server `i`'s IPv4 address (198.18.12.11 + i).
    pub fn server4(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 12, 11 + i as u8)
    }

    /// Server `i`'s IPv6 address (2001:db8:12::11 + i, hexadecimal).
    pub fn server6(i: usize) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, 0x12, 0, 0, 0, 0, 0x11 + i as u16)
    }

    /// Server `i`'s MAC.
    pub fn server_mac(i: usize) -> String {
        format!("02:00:00:12:01:{:02x}", 0x11 + i)
    }
}

/// Most servers a lab holds.
pub const MAX_SERVERS: usize = 16;

/// The port every VIP listens on.
pub const VIP_PORT: u16 = 80;

/// The programs a test needs to build the lab and put load on it (for
/// `missing_prerequisite`): namespaces and links, nftables, the servers, the clients, the GRE
/// helper.
pub const LAB_TOOLS: &[&str] = &["ip", "ethtool", "nft", "nginx", "curl", "wrk", "python3"];

/// The default prefix of the lab's names (not the A-R-B topologies' `vnl`).
pub const LB_PREFIX: &str = "vlb";

/// How the load balancer reaches a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encap {
    /// IPv4 destination := the server, DSCP := `dscp`; the server maps the DSCP back to the VIP
    /// (a stateless nftables rule) and answers the client directly through the router.
    L3dsr {
        /// DSCP marking this VIP (0..=63).
        dscp: u8,
    },
    /// Outer IPv4 + GRE to the server, which decapsulates; replies go directly to the client.
    Gre4,
    /// Outer IPv6 + GRE to the server, which decapsulates; replies go directly to the client.
    Gre6,
    /// IPv4 destination address and port := the server and `target_port`; replies return
    /// through the load balancer, which rewrites them back.
    Nat4 {
        /// The port the servers listen on for this VIP.
        target_port: u16,
    },
    /// IPv6 NAT, as [`Encap::Nat4`].
    Nat6 {
        /// The port the servers listen on for this VIP.
        target_port: u16,
    },
}

impl Encap {
    /// The VPP `lb` name of the encapsulation.
    pub fn name(self) -> &'static str {
        match self {
            Encap::L3dsr { .. } => "l3dsr",
            Encap::Gre4 => "gre4",
            Encap::Gre6 => "gre6",
            Encap::Nat4 { .. } => "nat4",
            Encap::Nat6 { .. } => "nat6",
        }
    }

    /// Its VIPs: L3DSR and NAT4 one IPv4 VIP, NAT6 one IPv6 VIP, GRE4 and GRE6 one of each
    /// (inner IPv4 and IPv6). Each encapsulation has its own addresses, so one lab serves all.
    pub fn vips(self) -> Vec<IpAddr> {
        let v4 = |x: u8| IpAddr::V4(Ipv4Addr::new(198, 18, 100, x));
        let v6 = |x: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x100, 0, 0, 0, 0, x));
        match self {
            Encap::L3dsr { .. } => vec![v4(1)],
            Encap::Gre4 => vec![v4(2), v6(2)],
            Encap::Gre6 => vec![v4(3), v6(3)],
            Encap::Nat4 { .. } => vec![v4(4)],
            Encap::Nat6 { .. } => vec![v6(4)],
        }
    }

    /// Whether the servers answer the client directly (with the VIP as source).
    pub fn direct_return(self) -> bool {
        !matches!(self, Encap::Nat4 { .. } | Encap::Nat6 { .. })
    }

    /// The port the servers see the request on.
    pub fn server_port(self) -> u16 {
        match self {
            Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => target_port,
            _ => VIP_PORT,
        }
    }

    /// Whether the servers must carry the server-side family `v6` for it (the address the LB
    /// sends to: GRE6 and NAT6 use the servers' IPv6 addresses, the others IPv4).
    pub fn server_family_v6(self) -> bool {
        matches!(self, Encap::Gre6 | Encap::Nat6 { .. })
    }
}

/// One VIP of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vip {
    /// How it reaches the servers.
    pub encap: Encap,
    /// Its address.
    pub addr: IpAddr,
    /// Its port (TCP).
    pub port: u16,
}

impl Vip {
    /// `http://ADDR:PORT/` (IPv6 in brackets).
    pub fn url(&self) -> String {
        match self.addr {
            IpAddr::V4(a) => format!("http://{a}:{}/", self.port),
            IpAddr::V6(a) => format!("http://[{a}]:{}/", self.port),
        }
    }

    /// What a server of this VIP reports as its local address and port: the VIP for direct
    /// return, its own address and the target port for NAT.
    pub fn seen_by(&self, server: &ServerInfo) -> (IpAddr, u16) {
        match self.encap {
            Encap::Nat4 { target_port } => (IpAddr::V4(server.ip4), target_port),
            Encap::Nat6 { target_port } => (IpAddr::V6(server.ip6), target_port),
            _ => (self.addr, self.port),
        }
    }
}

/// How the kernel reference load balancer picks a server (nftables expressions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelHash {
    /// `jhash` of source address and port (flow-consistent; required by the stateless L3DSR
    /// and GRE references).
    Jhash,
    /// `numgen inc` (round robin per new connection; NAT only, where conntrack keeps flows).
    NumgenInc,
    /// `numgen random` (NAT only).
    NumgenRandom,
}

/// Who balances in the LB namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbMode {
    /// The LB's veth ends are up with no addresses (IPv6 off, GRO off), for vecplane to attach
    /// to with AF_XDP or AF_PACKET ([`LbLab::vecplane_config`]).
    Bare,
    /// The kernel reference: a router with nftables (L3DSR: stateless DSCP + destination
    /// rewrite; NAT4/NAT6: DNAT through a map) and a GRE encapsulator for GRE4/GRE6.
    Kernel(KernelHash),
}

/// What to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LbSpec {
    /// Name prefix (1..=4 of `[a-z0-9]`, starting with a letter).
    pub prefix: String,
    /// The encapsulations to serve (each with its own VIPs); at most one of each kind.
    pub encaps: Vec<Encap>,
    /// One weight per server (1..=16 servers; weights need not sum to anything; the kernel
    /// reference needs a positive sum of at most 4096).
    pub weights: Vec<u32>,
    /// Who balances.
    pub lb: LbMode,
    /// MTU of the servers' segment (the LB's server-side port, the bridge, the servers);
    /// 1500 by default, raise it to let encapsulated 1500-byte packets through.
    pub server_mtu: u32,
}

impl LbSpec {
    /// One encapsulation, servers with `weights`, the kernel reference with `jhash`.
    pub fn new(encap: Encap, weights: &[u32]) -> LbSpec {
        LbSpec {
            prefix: LB_PREFIX.to_string(),
            encaps: vec![encap],
            weights: weights.to_vec(),
            lb: LbMode::Kernel(KernelHash::Jhash),
            server_mtu: 1500,
        }
    }

    /// Every encapsulation at once (L3DSR dscp 23, GRE4, GRE6, NAT4/NAT6 to port 8080).
    pub fn all(weights: &[u32]) -> LbSpec {
        LbSpec {
            encaps: vec![
                Encap::L3dsr { dscp: 23 },
                Encap::Gre4,
                Encap::Gre6,
                Encap::Nat4 { target_port: 8080 },
                Encap::Nat6 { target_port: 8080 },
            ],
            ..LbSpec::new(Encap::Gre4, weights)
        }
    }

    /// The same with `lb` as the balancer.
    pub fn with_lb(mut self, lb: LbMode) -> LbSpec {
        self.lb = lb;
        self
    }

    /// An error naming the field and what is accepted, if the spec cannot be built.
    pub fn check(&self) -> Result<()> {
        if self.weights.is_empty() || self.weights.len() > MAX_SERVERS {
            bail!(
                "LbSpec.weights: {} servers; accepted: 1 to {MAX_SERVERS}",
                self.weights.len()
            );
        }
        if self.encaps.is_empty() {
            bail!("LbSpec.encaps is empty; accepted: at least one encapsulation");
        }
        for (i, e) in self.encaps.iter().enumerate() {
            if self.encaps[..i].iter().any(|x| x.name() == e.name()) {
                bail!(
                    "LbSpec.encaps: {} twice; accepted: each kind at most once",
                    e.name()
                );
            }
            match *e {
                Encap::L3dsr { dscp } if dscp == 0 || dscp > 63 => {
                    bail!("LbSpec.encaps: l3dsr dscp {dscp}; accepted: 1..=63")
                }
                Encap::Nat4 { target_port } | Encap::Nat6 { target_port }
                    if target_port == 0 || target_port == VIP_PORT =>
                {
                    bail!(
                        "LbSpec.encaps: {} target_port {target_port}; accepted: 1..=65535 \
                         except {VIP_PORT}",
                        e.name()
                    )
                }
                _ => {}
            }
        }
        if !(1280..=9000).contains(&self.server_mtu) {
            bail!(
                "LbSpec.server_mtu {}; accepted: 1280..=9000",
                self.server_mtu
            );
        }
        if let LbMode::Kernel(h) = self.lb {
            let total: u64 = self.weights.iter().map(|&w| u64::from(w)).sum();
            if total == 0 || total > 4096 {
                bail!(
                    "LbSpec.weights sum to {total}; the kernel reference accepts 1..=4096 \
                     (one nftables map slot per unit of weight)"
                );
            }
            if h != KernelHash::Jhash
                && self
                    .encaps
                    .iter()
                    .any(|e| matches!(e, Encap::L3dsr { .. } | Encap::Gre4 | Encap::Gre6))
            {
                bail!(
                    "LbSpec.lb: {h:?} keeps no flow state, so the stateless L3DSR and GRE \
                     references would scatter a connection's packets; accepted: Jhash"
                );
            }
        }
        Ok(())
    }
}

/// One server as the lab built it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// Index (0-based).
    pub index: usize,
    /// Its name, `s<index>`: what it answers and how results are keyed.
    pub name: String,
    /// Its namespace.
    pub ns: String,
    /// Its interface (on the servers' segment).
    pub ifname: String,
    /// Its MAC.
    pub mac: String,
    /// Its IPv4 address (/24).
    pub ip4: Ipv4Addr,
    /// Its IPv6 address (/64).
    pub ip6: Ipv6Addr,
    /// Its weight.
    pub weight: u32,
}

impl ServerInfo {
    /// Servers of `weights` with the lab's addresses and made-up namespace and interface
    /// names (`x-s<i>`, `xs<i>`), for tests of what is rendered from them; no lab is built.
    pub fn unbuilt(weights: &[u32]) -> Vec<ServerInfo> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| ServerInfo {
                index: i,
                name: format!("s{i}"),
                ns: format!("x-s{i}"),
                ifname: format!("xs{i}"),
                mac: crate::lb::addr::server_mac(i),
                ip4: crate::lb::addr::server4(i),
                ip6: crate::lb::addr::server6(i),
                weight,
            })
            .collect()
    }
}

/// One of the load balancer's two ports (where vecplane attaches).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LbPort {
    /// Namespace (the LB's).
    pub ns: String,
    /// The veth end in the LB namespace.
    pub ifname: String,
    /// Its MAC (the neighbours on the other side have it as a static entry).
    pub mac: &'static str,
    /// Its IPv4 address (prefix length [`addr::LEN4`]).
    pub ip4: Ipv4Addr,
    /// Its IPv6 address (prefix length [`addr::LEN6`]).
    pub ip6: Ipv6Addr,
    /// MTU.
    pub mtu: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_stay_in_the_test_ranges() {
        let mut v4 = vec![
            addr::CLIENT4,
            addr::ROUTER_C4,
            addr::ROUTER_U4,
            addr::LB_UP4,
            addr::LB_DOWN4,
            addr::ROUTER_S4,
            addr::VIP_NET4.0,
        ];
        let mut v6 = vec![
            addr::CLIENT6,
            addr::ROUTER_C6,
            addr::ROUTER_U6,
            addr::LB_UP6,
            addr::LB_DOWN6,
            addr::ROUTER_S6,
            addr::VIP_NET6.0,
        ];
        for i in 0..MAX_SERVERS {
            v4.push(addr::server4(i));
            v6.push(addr::server6(i));
        }
        for e in LbSpec::all(&[1]).encaps {
            for a in e.vips() {
                match a {
                    IpAddr::V4(a) => v4.push(a),
                    IpAddr::V6(a) => v6.push(a),
                }
            }
        }
        for a in v4 {
            let o = a.octets();
            assert!(o[0] == 198 && (o[1] & 0xfe) == 18, "{a}");
        }
        for a in v6 {
            assert_eq!(&a.segments()[..2], &[0x2001, 0xdb8], "{a}");
        }
    }

    #[test]
    fn specs_are_checked() {
        assert!(LbSpec::all(&[1, 2, 3]).check().is_ok());
        assert!(LbSpec::new(Encap::Gre4, &[]).check().is_err());
        assert!(LbSpec::new(Encap::Gre4, &[0, 0]).check().is_err());
        assert!(LbSpec::new(Encap::Gre4, &[0, 0])
            .with_lb(LbMode::Bare)
            .check()
            .is_ok());
        assert!(LbSpec::new(Encap::L3dsr { dscp: 64 }, &[1])
            .check()
            .is_err());
        assert!(LbSpec::new(Encap::Nat4 { target_port: 80 }, &[1])
            .check()
            .is_err());
        let e = LbSpec::new(Encap::L3dsr { dscp: 8 }, &[1])
            .with_lb(LbMode::Kernel(KernelHash::NumgenInc))
            .check()
            .expect_err("stateless with numgen");
        assert!(e.to_string().contains("Jhash"), "{e}");
        assert!(LbSpec::new(Encap::Nat6 { target_port: 8080 }, &[1])
            .with_lb(LbMode::Kernel(KernelHash::NumgenInc))
            .check()
            .is_ok());
        let mut s = LbSpec::new(Encap::Gre4, &[1]);
        s.encaps.push(Encap::Gre4);
        assert!(s.check().is_err());
    }
}

//! The load-balancer lab: a client, a kernel router with the servers' Linux bridge, the load
//! balancer's namespace (bare veth ends for vecplane, or the kernel reference) and 1..=16 server
//! namespaces running nginx, set up for L3DSR, GRE4/GRE6 and NAT4/NAT6 at once. It owns building
//! and deleting all of it (on drop, on a failed build, on SIGINT/SIGTERM/SIGHUP); it never
//! touches anything outside its own namespaces and scratch directory, and only uses addresses
//! from 198.18.0.0/15 and 2001:db8::/32.
//!
//! ```text
//!  client ──c0───rc── router ──ru────────lu── LB ──ld──┐   (VIPs routed via LB's lu)
//!  198.18.10.2        (kernel)  198.18.11.1/.2          │
//!                        └── bridge br 198.18.12.254 ──bd┘   servers' segment 198.18.12.0/24
//!                              ├─p0── s0 198.18.12.11   (default route via LB 198.18.12.1:
//!                              ├─p1── s1 198.18.12.12    NAT replies return through the LB;
//!                              └─...                     replies from a VIP go to the router)
//! ```
//!
//! The servers answer `<name> <local address> <local port>` on ports 80 and every NAT target
//! port, over IPv4 and IPv6, and log each request to their own access log.

use crate::cleanup;
use crate::cmd::{self, run_ok, Spawned};
use crate::lb_servers::Server;
use crate::names::Names;
use crate::vecplane::{validate_config, Driver, Vecplane};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

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

    fn check(&self) -> Result<()> {
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

/// Every name of one lab.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LbNames {
    /// Client namespace.
    pub ns_client: String,
    /// Router namespace (also holds the servers' bridge).
    pub ns_router: String,
    /// Load balancer namespace.
    pub ns_lb: String,
    /// Server namespaces.
    pub ns_servers: Vec<String>,
    /// Client veth (peer of `rc`).
    pub c0: String,
    /// Router veth towards the client.
    pub rc: String,
    /// Router veth towards the LB.
    pub ru: String,
    /// LB uplink (peer of `ru`).
    pub lu: String,
    /// LB port on the servers' segment (peer of `bd`).
    pub ld: String,
    /// Bridge port of the LB's segment port.
    pub bd: String,
    /// The servers' bridge (in the router).
    pub br: String,
    /// Server interfaces.
    pub servers: Vec<String>,
    /// Bridge ports of the servers.
    pub ports: Vec<String>,
    /// Scratch directory.
    pub dir: PathBuf,
}

/// Roles of the lab's namespaces (`<prefix>-<pid>-<seq>-<role>`).
fn is_lb_role(role: &str) -> bool {
    matches!(role, "c" | "rt" | "lb")
        || role
            .strip_prefix('s')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The process id encoded in a lab namespace made with `prefix`, if it is one.
pub fn lb_owner_pid(prefix: &str, namespace: &str) -> Option<u32> {
    let rest = namespace.strip_prefix(prefix)?.strip_prefix('-')?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let seq = parts.next()?;
    let role = parts.next()?;
    if parts.next().is_some() || seq.parse::<u32>().is_err() || !is_lb_role(role) {
        return None;
    }
    Some(pid)
}

impl LbNames {
    /// Names for `servers` servers from one fresh [`Names`] (unique per process and run).
    pub fn from_names(n: &Names, servers: usize) -> Result<LbNames> {
        if servers > MAX_SERVERS {
            bail!("{servers} servers; accepted: at most {MAX_SERVERS}");
        }
        let base = n
            .ns_a
            .strip_suffix("-a")
            .context("netlab names: namespace A does not end in -a")?;
        let stem =
            n.a0.strip_suffix("a0")
                .context("netlab names: A0 does not end in a0")?;
        let digit = |i: usize| char::from(b"0123456789abcdefghijklmnopqrstuvwxyz"[i]);
        Ok(LbNames {
            ns_client: format!("{base}-c"),
            ns_router: format!("{base}-rt"),
            ns_lb: format!("{base}-lb"),
            ns_servers: (0..servers).map(|i| format!("{base}-s{i}")).collect(),
            c0: format!("{stem}c0"),
            rc: format!("{stem}rc"),
            ru: format!("{stem}ru"),
            lu: format!("{stem}lu"),
            ld: format!("{stem}ld"),
            bd: format!("{stem}bd"),
            br: format!("{stem}br"),
            servers: (0..servers)
                .map(|i| format!("{stem}s{}", digit(i)))
                .collect(),
            ports: (0..servers)
                .map(|i| format!("{stem}p{}", digit(i)))
                .collect(),
            dir: n.dir.clone(),
        })
    }

    /// Every namespace.
    pub fn namespaces(&self) -> Vec<&str> {
        let mut v = vec![
            self.ns_client.as_str(),
            self.ns_router.as_str(),
            self.ns_lb.as_str(),
        ];
        v.extend(self.ns_servers.iter().map(String::as_str));
        v
    }

    /// Every interface name the lab creates.
    pub fn interfaces(&self) -> Vec<&str> {
        let mut v = vec![
            self.c0.as_str(),
            self.rc.as_str(),
            self.ru.as_str(),
            self.lu.as_str(),
            self.ld.as_str(),
            self.bd.as_str(),
            self.br.as_str(),
        ];
        v.extend(self.servers.iter().map(String::as_str));
        v.extend(self.ports.iter().map(String::as_str));
        v
    }
}

/// Delete lab namespaces named `<prefix>-<pid>-...` whose process is gone (runs killed before
/// they could clean up), and their scratch directories. Returns the namespaces deleted.
pub fn delete_lb_leftovers(prefix: &str) -> Vec<String> {
    let Ok(list) = run_ok(&["ip", "netns", "list"]) else {
        return Vec::new();
    };
    let mut deleted = Vec::new();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = lb_owner_pid(prefix, name) else {
            continue;
        };
        if pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && cleanup::delete_namespace(name).is_ok()
        {
            deleted.push(name.to_string());
        }
    }
    // Scratch directories carry the same `<prefix>-<pid>-<seq>` stem as A-R-B topologies.
    cleanup::delete_leftovers(prefix);
    deleted
}

/// One load-balancer lab; dropping it deletes it.
#[derive(Debug)]
pub struct LbLab {
    pub(crate) names: LbNames,
    pub(crate) spec: LbSpec,
    pub(crate) servers: Vec<ServerInfo>,
    pub(crate) nginx: Vec<Option<Server>>,
    pub(crate) helpers: Vec<Spawned>,
    deleted: bool,
}

impl LbLab {
    /// Build the lab of `spec`: namespaces, links, addresses, routes, the servers' set-up for
    /// every encapsulation in `spec.encaps`, nginx on every server, and the balancer of
    /// `spec.lb`. A failed step deletes whatever was made.
    pub fn build(spec: &LbSpec) -> Result<LbLab> {
        spec.check()?;
        if let Some(why) = cmd::missing_prerequisite(&["ip", "ethtool", "nft", "nginx", "curl"]) {
            bail!("cannot build a load-balancer lab: {why}");
        }
        cleanup::install_cleanup_handlers()?;
        delete_lb_leftovers(&spec.prefix);
        let names = LbNames::from_names(&Names::next(&spec.prefix)?, spec.weights.len())?;
        let servers = spec
            .weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| ServerInfo {
                index: i,
                name: format!("s{i}"),
                ns: names.ns_servers[i].clone(),
                ifname: names.servers[i].clone(),
                mac: addr::server_mac(i),
                ip4: addr::server4(i),
                ip6: addr::server6(i),
                weight,
            })
            .collect();
        let mut lab = LbLab {
            names,
            spec: spec.clone(),
            servers,
            nginx: Vec::new(),
            helpers: Vec::new(),
            deleted: false,
        };
        lab.setup().context("cannot build the load-balancer lab")?;
        Ok(lab)
    }

    fn setup(&mut self) -> Result<()> {
        let n = self.names.clone();
        cleanup::create_dir(&n.dir)?;
        for ns in n.namespaces() {
            cleanup::create_namespace(ns)?;
            for conf in ["all", "default"] {
                cmd::write_sysctl(ns, &format!("net/ipv6/conf/{conf}/accept_dad"), "0")?;
                cmd::write_sysctl(ns, &format!("net/ipv6/conf/{conf}/dad_transmits"), "0")?;
                cmd::write_sysctl(ns, &format!("net/ipv4/conf/{conf}/rp_filter"), "0")?;
            }
            ip(ns, &["link", "set", "lo", "up"])?;
        }
        let mtu = self.spec.server_mtu.to_string();
        veth(
            &n.c0,
            &n.ns_client,
            Some(addr::MAC_CLIENT),
            &n.rc,
            &n.ns_router,
            Some(addr::MAC_ROUTER_C),
        )?;
        veth(
            &n.ru,
            &n.ns_router,
            Some(addr::MAC_ROUTER_U),
            &n.lu,
            &n.ns_lb,
            Some(addr::MAC_LB_UP),
        )?;
        veth(
            &n.ld,
            &n.ns_lb,
            Some(addr::MAC_LB_DOWN),
            &n.bd,
            &n.ns_router,
            None,
        )?;
        ip(&n.ns_lb, &["link", "set", &n.ld, "mtu", &mtu])?;
        ip(&n.ns_router, &["link", "set", &n.bd, "mtu", &mtu])?;

        // Router: client side, LB side, and the servers' bridge.
        let r = &n.ns_router;
        ip(
            r,
            &[
                "link",
                "add",
                "name",
                &n.br,
                "address",
                addr::MAC_ROUTER_S,
                "mtu",
                &mtu,
                "type",
                "bridge",
                "stp_state",
                "0",
                "forward_delay",
                "0",
            ],
        )?;
        ip(r, &["link", "set", &n.bd, "master", &n.br])?;
        for (dev, a4, a6) in [
            (&n.rc, addr::ROUTER_C4, addr::ROUTER_C6),
            (&n.ru, addr::ROUTER_U4, addr::ROUTER_U6),
            (&n.br, addr::ROUTER_S4, addr::ROUTER_S6),
        ] {
            addr_add(r, dev, a4, a6)?;
        }
        for dev in [&n.rc, &n.ru, &n.bd, &n.br] {
            ip(r, &["link", "set", dev, "up"])?;
        }
        cmd::write_sysctl(r, "net/ipv4/ip_forward", "1")?;
        cmd::write_sysctl(r, "net/ipv6/conf/all/forwarding", "1")?;
        neigh(r, &addr::CLIENT4.to_string(), addr::MAC_CLIENT, &n.rc)?;
        neigh(r, &addr::CLIENT6.to_string(), addr::MAC_CLIENT, &n.rc)?;
        neigh(r, &addr::LB_UP4.to_string(), addr::MAC_LB_UP, &n.ru)?;
        neigh(r, &addr::LB_UP6.to_string(), addr::MAC_LB_UP, &n.ru)?;
        let (v4net, v4len) = addr::VIP_NET4;
        let (v6net, v6len) = addr::VIP_NET6;
        ip(
            r,
            &[
                "route",
                "add",
                &format!("{v4net}/{v4len}"),
                "via",
                &addr::LB_UP4.to_string(),
            ],
        )?;
        ip(
            r,
            &[
                "-6",
                "route",
                "add",
                &format!("{v6net}/{v6len}"),
                "via",
                &addr::LB_UP6.to_string(),
            ],
        )?;

        // Client.
        let c = &n.ns_client;
        addr_add(c, &n.c0, addr::CLIENT4, addr::CLIENT6)?;
        ip(c, &["link", "set", &n.c0, "up"])?;
        neigh(c, &addr::ROUTER_C4.to_string(), addr::MAC_ROUTER_C, &n.c0)?;
        neigh(c, &addr::ROUTER_C6.to_string(), addr::MAC_ROUTER_C, &n.c0)?;
        ip(
            c,
            &[
                "route",
                "add",
                "default",
                "via",
                &addr::ROUTER_C4.to_string(),
            ],
        )?;
        ip(
            c,
            &[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &addr::ROUTER_C6.to_string(),
            ],
        )?;
        // Real frames for a data plane reading them (no checksum offload, no super-frames),
        // and many short connections in a row.
        ethtool_off(c, &n.c0)?;
        cmd::write_sysctl(c, "net/ipv4/ip_local_port_range", "10000 65000")?;
        cmd::write_sysctl(c, "net/ipv4/tcp_tw_reuse", "1")?;

        // Servers.
        for i in 0..self.servers.len() {
            self.setup_server(i)?;
        }

        // The load balancer.
        self.setup_lb()?;
        crate::lb_servers::start_all(self)?;
        Ok(())
    }

    fn setup_server(&mut self, i: usize) -> Result<()> {
        let n = &self.names;
        let s = &self.servers[i];
        let mtu = self.spec.server_mtu.to_string();
        veth(
            &s.ifname,
            &s.ns,
            Some(&s.mac),
            &n.ports[i],
            &n.ns_router,
            None,
        )?;
        let ns = &s.ns;
        ip(ns, &["link", "set", &s.ifname, "mtu", &mtu])?;
        ip(&n.ns_router, &["link", "set", &n.ports[i], "mtu", &mtu])?;
        ip(&n.ns_router, &["link", "set", &n.ports[i], "master", &n.br])?;
        ip(&n.ns_router, &["link", "set", &n.ports[i], "up"])?;
        addr_add(ns, &s.ifname, s.ip4, s.ip6)?;
        ip(ns, &["link", "set", &s.ifname, "up"])?;
        ethtool_off(ns, &s.ifname)?;
        for conf in ["all", "default"] {
            // The VIPs on lo are not announced on the segment.
            cmd::write_sysctl(ns, &format!("net/ipv4/conf/{conf}/arp_ignore"), "1")?;
            cmd::write_sysctl(ns, &format!("net/ipv4/conf/{conf}/arp_announce"), "2")?;
        }
        for (a, mac) in [
            (IpAddr::V4(addr::LB_DOWN4), addr::MAC_LB_DOWN),
            (IpAddr::V6(addr::LB_DOWN6), addr::MAC_LB_DOWN),
            (IpAddr::V4(addr::ROUTER_S4), addr::MAC_ROUTER_S),
            (IpAddr::V6(addr::ROUTER_S6), addr::MAC_ROUTER_S),
        ] {
            neigh(ns, &a.to_string(), mac, &s.ifname)?;
        }
        // Replies from the server's own address (NAT) go back through the LB; replies from a
        // VIP (L3DSR, GRE) go straight to the router.
        ip(
            ns,
            &[
                "route",
                "add",
                "default",
                "via",
                &addr::LB_DOWN4.to_string(),
            ],
        )?;
        ip(
            ns,
            &[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &addr::LB_DOWN6.to_string(),
            ],
        )?;
        ip(
            ns,
            &[
                "route",
                "add",
                "default",
                "via",
                &addr::ROUTER_S4.to_string(),
                "table",
                "100",
            ],
        )?;
        ip(
            ns,
            &[
                "-6",
                "route",
                "add",
                "default",
                "via",
                &addr::ROUTER_S6.to_string(),
                "table",
                "100",
            ],
        )?;
        let (v4net, v4len) = addr::VIP_NET4;
        let (v6net, v6len) = addr::VIP_NET6;
        ip(
            ns,
            &[
                "rule",
                "add",
                "from",
                &format!("{v4net}/{v4len}"),
                "lookup",
                "100",
                "pref",
                "100",
            ],
        )?;
        ip(
            ns,
            &[
                "-6",
                "rule",
                "add",
                "from",
                &format!("{v6net}/{v6len}"),
                "lookup",
                "100",
                "pref",
                "100",
            ],
        )?;
        crate::lb_servers::setup_encaps(self, i)?;
        Ok(())
    }

    fn setup_lb(&mut self) -> Result<()> {
        let n = self.names.clone();
        let l = &n.ns_lb;
        match self.spec.lb {
            LbMode::Bare => {
                for dev in [&n.lu, &n.ld] {
                    cmd::write_sysctl(l, &format!("net/ipv6/conf/{dev}/disable_ipv6"), "1")?;
                    ip(l, &["link", "set", dev, "up"])?;
                    self.exec_ok_in(l, &["ethtool", "-K", dev, "gro", "off"])?;
                }
            }
            LbMode::Kernel(hash) => {
                addr_add(l, &n.lu, addr::LB_UP4, addr::LB_UP6)?;
                addr_add(l, &n.ld, addr::LB_DOWN4, addr::LB_DOWN6)?;
                for dev in [&n.lu, &n.ld] {
                    ip(l, &["link", "set", dev, "up"])?;
                }
                cmd::write_sysctl(l, "net/ipv4/ip_forward", "1")?;
                cmd::write_sysctl(l, "net/ipv6/conf/all/forwarding", "1")?;
                neigh(l, &addr::ROUTER_U4.to_string(), addr::MAC_ROUTER_U, &n.lu)?;
                neigh(l, &addr::ROUTER_U6.to_string(), addr::MAC_ROUTER_U, &n.lu)?;
                for s in &self.servers {
                    neigh(l, &s.ip4.to_string(), &s.mac, &n.ld)?;
                    neigh(l, &s.ip6.to_string(), &s.mac, &n.ld)?;
                }
                ip(
                    l,
                    &[
                        "route",
                        "add",
                        "default",
                        "via",
                        &addr::ROUTER_U4.to_string(),
                    ],
                )?;
                ip(
                    l,
                    &[
                        "-6",
                        "route",
                        "add",
                        "default",
                        "via",
                        &addr::ROUTER_U6.to_string(),
                    ],
                )?;
                crate::lb_kernel::install(self, hash)?;
            }
        }
        Ok(())
    }

    fn exec_ok_in(&self, ns: &str, args: &[&str]) -> Result<String> {
        run_ok(&cmd::in_ns(ns, args))
    }

    /// The names of everything the lab made.
    pub fn names(&self) -> &LbNames {
        &self.names
    }

    /// What it was built from.
    pub fn spec(&self) -> &LbSpec {
        &self.spec
    }

    /// The scratch directory (configs, logs), deleted with the lab.
    pub fn dir(&self) -> &Path {
        &self.names.dir
    }

    /// A file in the scratch directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.names.dir.join(file)
    }

    /// The client's namespace.
    pub fn client_ns(&self) -> &str {
        &self.names.ns_client
    }

    /// The router's namespace.
    pub fn router_ns(&self) -> &str {
        &self.names.ns_router
    }

    /// The load balancer's namespace (run vecplane here).
    pub fn lb_ns(&self) -> &str {
        &self.names.ns_lb
    }

    /// The servers.
    pub fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    /// Every VIP of the lab, in `spec.encaps` order (IPv4 before IPv6).
    pub fn vips(&self) -> Vec<Vip> {
        self.spec
            .encaps
            .iter()
            .flat_map(|&encap| {
                encap.vips().into_iter().map(move |addr| Vip {
                    encap,
                    addr,
                    port: VIP_PORT,
                })
            })
            .collect()
    }

    /// The VIP of `encap` in family `v6`, if the lab serves it.
    pub fn vip(&self, encap: Encap, v6: bool) -> Option<Vip> {
        self.vips()
            .into_iter()
            .find(|v| v.encap == encap && v.addr.is_ipv6() == v6)
    }

    /// The LB's port towards the router (clients' packets arrive here; NAT replies leave here).
    pub fn uplink(&self) -> LbPort {
        LbPort {
            ns: self.names.ns_lb.clone(),
            ifname: self.names.lu.clone(),
            mac: addr::MAC_LB_UP,
            ip4: addr::LB_UP4,
            ip6: addr::LB_UP6,
            mtu: 1500,
        }
    }

    /// The LB's port on the servers' segment (encapsulated packets leave here; NAT replies
    /// arrive here).
    pub fn server_port(&self) -> LbPort {
        LbPort {
            ns: self.names.ns_lb.clone(),
            ifname: self.names.ld.clone(),
            mac: addr::MAC_LB_DOWN,
            ip4: addr::LB_DOWN4,
            ip6: addr::LB_DOWN6,
            mtu: self.spec.server_mtu,
        }
    }

    /// A vecplane config (ports `up` and `down` on the LB's veth ends with their addresses and
    /// MACs, static neighbours for the router and every server, default routes via the
    /// router), validated by vecplane's parser. The `lb` lines ([`LbLab::lb_cli_lines`]) are
    /// not part of it. Needs a lab built with [`LbMode::Bare`].
    pub fn vecplane_config(&self, driver: Driver, worker_cpu: Option<usize>) -> Result<String> {
        if self.spec.lb != LbMode::Bare {
            bail!("vecplane needs a lab built with LbMode::Bare (the kernel reference owns the LB namespace)");
        }
        let mut s = String::from(
            "# The load balancer's ports in a netlab LbLab: `up` towards the router (VIP\n\
             # traffic arrives here), `down` on the servers' segment.\n\n[dataplane]\nbuffers = 8192\n",
        );
        if let Some(c) = worker_cpu {
            let _ = writeln!(s, "worker-cpu = {c}");
        }
        for (name, p) in [("up", self.uplink()), ("down", self.server_port())] {
            let _ = writeln!(
                s,
                "\n[[port]]\nname = \"{name}\"\ndriver = \"{}\"",
                driver.name()
            );
            let _ = writeln!(s, "interface = \"{}\"", p.ifname);
            let _ = writeln!(s, "mac = \"{}\"\nmtu = {}", p.mac, p.mtu);
            let _ = writeln!(s, "ip4 = [\"{}/{}\"]", p.ip4, addr::LEN4);
            let _ = writeln!(s, "ip6 = [\"{}/{}\"]", p.ip6, addr::LEN6);
        }
        let mut neighbours = vec![
            (
                IpAddr::V4(addr::ROUTER_U4),
                addr::MAC_ROUTER_U.to_string(),
                "up",
            ),
            (
                IpAddr::V6(addr::ROUTER_U6),
                addr::MAC_ROUTER_U.to_string(),
                "up",
            ),
        ];
        for sv in &self.servers {
            neighbours.push((IpAddr::V4(sv.ip4), sv.mac.clone(), "down"));
            neighbours.push((IpAddr::V6(sv.ip6), sv.mac.clone(), "down"));
        }
        for (ip, mac, port) in neighbours {
            let _ = writeln!(
                s,
                "\n[[neighbour]]\nip = \"{ip}\"\nmac = \"{mac}\"\nport = \"{port}\""
            );
        }
        let _ = writeln!(
            s,
            "\n[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"{}\"",
            addr::ROUTER_U4
        );
        let _ = writeln!(
            s,
            "\n[[route]]\nprefix = \"::/0\"\nvia = \"{}\"",
            addr::ROUTER_U6
        );
        validate_config(&s)
            .map_err(|e| anyhow::anyhow!("the generated vecplane config is refused: {e}\n{s}"))?;
        Ok(s)
    }

    /// The VPP `lb` CLI lines for this lab's VIPs and servers: `lb conf` with the LB's
    /// server-side addresses as GRE sources, one `lb vip` per VIP and one `lb as` per VIP with
    /// every server of the VIP's server family (`weight N` after an address whose weight is
    /// not 1).
    pub fn lb_cli_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "lb conf ip4-src-address {} ip6-src-address {}",
            addr::LB_DOWN4,
            addr::LB_DOWN6
        )];
        for v in self.vips() {
            let prefix = match v.addr {
                IpAddr::V4(a) => format!("{a}/32"),
                IpAddr::V6(a) => format!("{a}/128"),
            };
            let encap = match v.encap {
                Encap::L3dsr { dscp } => format!("l3dsr dscp {dscp}"),
                Encap::Nat4 { target_port } => {
                    format!("nat4 type clusterip target_port {target_port}")
                }
                Encap::Nat6 { target_port } => {
                    format!("nat6 type clusterip target_port {target_port}")
                }
                e => e.name().to_string(),
            };
            out.push(format!(
                "lb vip {prefix} protocol tcp port {} encap {encap}",
                v.port
            ));
            let mut line = format!("lb as {prefix} protocol tcp port {}", v.port);
            for s in &self.servers {
                let a = if v.encap.server_family_v6() {
                    IpAddr::V6(s.ip6)
                } else {
                    IpAddr::V4(s.ip4)
                };
                let _ = write!(line, " {a}");
                if s.weight != 1 {
                    let _ = write!(line, " weight {}", s.weight);
                }
            }
            out.push(line);
        }
        out
    }

    /// Start `exe run --config CONFIG` inside the LB namespace (see [`LbLab::vecplane_config`])
    /// and wait until its control socket answers.
    pub fn start_vecplane(&self, exe: &Path, config: &Path) -> Result<Vecplane> {
        crate::vecplane::start_in(&self.names.ns_lb, &self.names.dir, exe, config)
    }

    /// Run `args` inside namespace `ns` of this lab, bounded by `timeout`; a non-zero exit is
    /// returned, not an error.
    pub fn exec_timeout(
        &self,
        ns: &str,
        args: &[&str],
        timeout: std::time::Duration,
    ) -> Result<std::process::Output> {
        if !self.names.namespaces().contains(&ns) {
            bail!("{ns} is not a namespace of this lab");
        }
        cmd::run_bounded(&cmd::in_ns(ns, args), timeout)
    }

    /// Run `args` inside `ns` (bounded by 30 s); it must exit 0; returns stdout.
    pub fn exec_ok(&self, ns: &str, args: &[&str]) -> Result<String> {
        if !self.names.namespaces().contains(&ns) {
            bail!("{ns} is not a namespace of this lab");
        }
        self.exec_ok_in(ns, args)
    }

    /// Delete everything now, reporting what could not be deleted.
    pub fn delete(mut self) -> Result<()> {
        self.delete_inner()
    }

    fn delete_inner(&mut self) -> Result<()> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        // Children first (SIGTERM, then SIGKILL), then the namespaces with anything left.
        self.helpers.clear();
        self.nginx.clear();
        let ns = self.names.namespaces();
        let failed = cleanup::release(&ns, &[self.names.dir.as_path()]);
        if failed.is_empty() {
            Ok(())
        } else {
            bail!("could not delete: {}", failed.join("; "))
        }
    }
}

impl Drop for LbLab {
    fn drop(&mut self) {
        if let Err(e) = self.delete_inner() {
            eprintln!("netlab: {e:#}");
        }
    }
}

pub(crate) fn ip(ns: &str, args: &[&str]) -> Result<()> {
    let mut v = vec!["ip", "-n", ns];
    v.extend_from_slice(args);
    run_ok(&v).map(|_| ())
}

fn veth(
    x: &str,
    x_ns: &str,
    x_mac: Option<&str>,
    y: &str,
    y_ns: &str,
    y_mac: Option<&str>,
) -> Result<()> {
    let mut v = vec!["ip", "link", "add", x];
    if let Some(m) = x_mac {
        v.extend_from_slice(&["address", m]);
    }
    v.extend_from_slice(&["netns", x_ns, "type", "veth", "peer", "name", y]);
    if let Some(m) = y_mac {
        v.extend_from_slice(&["address", m]);
    }
    v.extend_from_slice(&["netns", y_ns]);
    run_ok(&v).map(|_| ())
}

fn addr_add(ns: &str, dev: &str, a4: Ipv4Addr, a6: Ipv6Addr) -> Result<()> {
    ip(
        ns,
        &["addr", "add", &format!("{a4}/{}", addr::LEN4), "dev", dev],
    )?;
    ip(
        ns,
        &[
            "-6",
            "addr",
            "add",
            &format!("{a6}/{}", addr::LEN6),
            "dev",
            dev,
            "nodad",
        ],
    )
}

pub(crate) fn neigh(ns: &str, ip_s: &str, mac: &str, dev: &str) -> Result<()> {
    ip(
        ns,
        &[
            "neigh",
            "replace",
            ip_s,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ],
    )
}

fn ethtool_off(ns: &str, dev: &str) -> Result<()> {
    run_ok(&cmd::in_ns(
        ns,
        &[
            "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
        ],
    ))
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_are_distinct() {
        let n = Names::for_ids("abcd", 60_466_175, 46_655).expect("names");
        let l = LbNames::from_names(&n, MAX_SERVERS).expect("lb names");
        let ifs = l.interfaces();
        for i in &ifs {
            assert!(i.len() <= crate::names::IFNAME_MAX, "{i}");
        }
        let set: std::collections::HashSet<&&str> = ifs.iter().collect();
        assert_eq!(set.len(), ifs.len());
        for ns in l.namespaces() {
            assert_eq!(lb_owner_pid("abcd", ns), Some(60_466_175), "{ns}");
            // The A-R-B leftover sweep does not take them for its own.
            assert_eq!(crate::names::owner_pid("abcd", ns), None, "{ns}");
        }
        assert_eq!(lb_owner_pid("abcd", "abcd-1-2-a"), None);
        assert_eq!(lb_owner_pid("abcd", "abcd-1-2-sx"), None);
        assert!(LbNames::from_names(&n, MAX_SERVERS + 1).is_err());
    }

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

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
use anyhow::{bail, Context, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

pub use crate::lb_spec::*;

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
/// (`lb<N>` are the load balancers of a fleet, [`crate::lb_fleet::LbFleet`].)
fn is_lb_role(role: &str) -> bool {
    let numbered = |p: &str| {
        role.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(role, "c" | "rt" | "lb") || numbered("s") || numbered("lb")
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
    pub(crate) lb_helper: Option<Spawned>,
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
            lb_helper: None,
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

        setup_client(&n.ns_client, &n.c0)?;

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
        let neighbours = [
            (IpAddr::V4(addr::LB_DOWN4), addr::MAC_LB_DOWN),
            (IpAddr::V6(addr::LB_DOWN6), addr::MAC_LB_DOWN),
            (IpAddr::V4(addr::ROUTER_S4), addr::MAC_ROUTER_S),
            (IpAddr::V6(addr::ROUTER_S6), addr::MAC_ROUTER_S),
        ];
        // Replies from the server's own address (NAT) go back through the LB; replies from a
        // VIP (L3DSR, GRE) go straight to the router.
        let seg = crate::lb_servers::ServerSegment {
            router_ns: &self.names.ns_router,
            bridge: &self.names.br,
            mtu: self.spec.server_mtu,
            neighbours: &neighbours,
            gateway: (addr::LB_DOWN4, addr::LB_DOWN6),
            vip_gateway: (addr::ROUTER_S4, addr::ROUTER_S6),
        };
        crate::lb_servers::attach_server(&self.servers[i], &self.names.ports[i], &seg)?;
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

    /// Switch who balances, keeping the client, the router and the servers (and their logs):
    /// to [`LbMode::Bare`] the kernel reference's rules, encapsulator, addresses and routes go
    /// (then start vecplane); to [`LbMode::Kernel`] they are installed again (stop vecplane
    /// first). For interleaved runs of vecplane and the kernel reference on one lab.
    pub fn set_lb(&mut self, lb: LbMode) -> Result<()> {
        let mut spec = self.spec.clone();
        spec.lb = lb;
        spec.check()?;
        if lb == self.spec.lb {
            return Ok(());
        }
        self.clear_lb()
            .with_context(|| format!("cannot take down {:?} in the LB namespace", self.spec.lb))?;
        self.spec.lb = lb;
        self.setup_lb()
            .with_context(|| format!("cannot set up {lb:?} in the LB namespace"))
    }

    fn clear_lb(&mut self) -> Result<()> {
        let n = self.names.clone();
        let l = &n.ns_lb;
        match self.spec.lb {
            LbMode::Kernel(_) => {
                self.lb_helper = None;
                if ip(l, &["link", "show", crate::lb_kernel::LB_GRE_DEV]).is_ok() {
                    ip(l, &["link", "del", crate::lb_kernel::LB_GRE_DEV])?;
                }
                for fam in ["ip", "ip6"] {
                    self.exec_ok_in(l, &["nft", "delete", "table", fam, "vlb_reference"])?;
                }
                cmd::write_sysctl(l, "net/ipv4/ip_forward", "0")?;
                cmd::write_sysctl(l, "net/ipv6/conf/all/forwarding", "0")?;
                for dev in [&n.lu, &n.ld] {
                    for fam in ["-4", "-6"] {
                        ip(l, &[fam, "route", "flush", "dev", dev])?;
                        ip(l, &[fam, "addr", "flush", "dev", dev])?;
                        ip(l, &[fam, "neigh", "flush", "dev", dev, "nud", "all"])?;
                    }
                }
            }
            LbMode::Bare => {
                for dev in [&n.lu, &n.ld] {
                    cmd::write_sysctl(l, &format!("net/ipv6/conf/{dev}/disable_ipv6"), "0")?;
                }
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
        self.lb_helper = None;
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

pub(crate) fn veth(
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

pub(crate) fn addr_add(ns: &str, dev: &str, a4: Ipv4Addr, a6: Ipv6Addr) -> Result<()> {
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

pub(crate) fn ethtool_off(ns: &str, dev: &str) -> Result<()> {
    run_ok(&cmd::in_ns(
        ns,
        &[
            "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
        ],
    ))
    .map(|_| ())
}

/// Set up the client namespace `c` with its veth `c0` (peer of the router's client port):
/// addresses, static neighbour and default routes via the router, no offloads (real frames
/// for a data plane reading them), and a wide port range with TIME_WAIT reuse for many short
/// connections in a row.
pub(crate) fn setup_client(c: &str, c0: &str) -> Result<()> {
    addr_add(c, c0, addr::CLIENT4, addr::CLIENT6)?;
    ip(c, &["link", "set", c0, "up"])?;
    neigh(c, &addr::ROUTER_C4.to_string(), addr::MAC_ROUTER_C, c0)?;
    neigh(c, &addr::ROUTER_C6.to_string(), addr::MAC_ROUTER_C, c0)?;
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
    ethtool_off(c, c0)?;
    cmd::write_sysctl(c, "net/ipv4/ip_local_port_range", "10000 65000")?;
    cmd::write_sysctl(c, "net/ipv4/tcp_tw_reuse", "1")
}

#[cfg(test)]
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
}

//! The load-balancer fleet: a client, a kernel router running BIRD 2 with ECMP (L4 hash),
//! 1..=4 load-balancer namespaces (bare veth ends for vecplane, plus BIRD speaking eBGP to the
//! router over a management segment) and 1..=8 nginx servers set up for L3DSR. It owns building
//! and deleting all of it (namespaces, veths, bridges, BIRD, vecplane and nginx processes, the
//! scratch directory), on drop, on a failed build and on SIGINT/SIGTERM/SIGHUP; it never
//! touches anything outside its own namespaces and scratch directory and only uses addresses
//! from 198.18.0.0/15 and 2001:db8::/32. A sibling of [`crate::LbLab`], sharing its client and
//! server set-up ([`crate::lb_servers`]).
//!
//! ```text
//!  client ──c0──rc── router (kernel, BIRD AS 65000, ECMP L4 hash)
//!  198.18.10.2        ├─ bridge bu 198.18.11.1 ──── LB i `up`   (198.18.11.2+i, vecplane)
//!                     ├─ bridge bm 198.18.13.1 ──── LB i mgmt   198.18.13.2+i (kernel, BIRD
//!                     │                               AS 65001+i, eBGP to 198.18.13.1)
//!                     └─ bridge bs 198.18.12.254 ─┬─ LB i `down` (198.18.12.1+i, vecplane)
//!                                                 └─ server j   198.18.12.11+j (nginx, VIP on
//!                                                    lo, L3DSR nft rule, replies to router)
//! ```
//!
//! Each LB's BIRD includes the routes file vecplane writes (`<dir>/lb<i>-vips.conf`, empty at
//! build) and exports `vecplane4` with next hop its data uplink 198.18.11.2+i, so the router
//! sends VIP traffic to the LBs' `up` ports, spread by ECMP.

mod bird;
mod lbs;
mod spec;

pub use crate::lb_load::WrkJob;
pub use bird::{lb_config, render_routes_file, router_config, Bird, BIRD_READY_TIMEOUT};
pub use spec::{
    addr, delete_fleet_leftovers, parse_nexthops, FleetNames, FleetSpec, FLEET_PREFIX, FLEET_TOOLS,
    MAX_FLEET_SERVERS, MAX_LBS,
};

use crate::cleanup;
use crate::cmd::{self, run_ok, Spawned};
use crate::lb::{self, addr_add, ip, neigh, veth, Encap, ServerInfo, Vip, VIP_PORT};
use crate::lb_servers::{self, Server, ServerEnv, ServerSegment};
use crate::names::Names;
use crate::vecplane::Vecplane;
use anyhow::{bail, Context, Result};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One fleet; dropping it deletes it.
#[derive(Debug)]
pub struct LbFleet {
    names: FleetNames,
    spec: FleetSpec,
    servers: Vec<ServerInfo>,
    encaps: Vec<Encap>,
    nginx: Vec<Option<Server>>,
    helpers: Vec<Spawned>,
    router_bird: Option<Bird>,
    lb_birds: Vec<Option<Bird>>,
    vecplanes: Vec<Option<Vecplane>>,
    deleted: bool,
}

impl LbFleet {
    /// Build the fleet of `spec`: namespaces, bridges, links, addresses, the servers (nginx,
    /// VIP on lo, L3DSR rule), BIRD in the router and in every LB namespace (each LB's routes
    /// file empty, so nothing is announced yet). vecplane is not started ([`LbFleet::start_lb`]).
    /// A failed step deletes whatever was made.
    pub fn build(spec: &FleetSpec) -> Result<LbFleet> {
        spec.check()?;
        if let Some(why) = cmd::missing_prerequisite(FLEET_TOOLS) {
            bail!("cannot build a load-balancer fleet: {why}");
        }
        cleanup::install_cleanup_handlers()?;
        delete_fleet_leftovers(&spec.prefix);
        let names =
            FleetNames::from_names(&Names::next(&spec.prefix)?, spec.lbs, spec.weights.len())?;
        let servers = spec
            .weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| ServerInfo {
                index: i,
                name: format!("s{i}"),
                ns: names.ns_servers[i].clone(),
                ifname: names.servers[i].clone(),
                mac: lb::addr::server_mac(i),
                ip4: lb::addr::server4(i),
                ip6: lb::addr::server6(i),
                weight,
            })
            .collect();
        let mut fleet = LbFleet::assemble(names, spec, servers, false);
        fleet
            .setup()
            .context("cannot build the load-balancer fleet")?;
        Ok(fleet)
    }

    /// The fleet of `spec` as it would be built, with names for process 1, run 2 and prefix
    /// `vlbx` (scratch directory `/tmp/vlbf-1-2`); nothing is created, and dropping it
    /// deletes nothing. For tests of what is rendered from a fleet.
    #[cfg(test)]
    pub(crate) fn unbuilt(spec: &FleetSpec) -> Result<LbFleet> {
        spec.check()?;
        let mut names =
            FleetNames::from_names(&Names::for_ids("vlbx", 1, 2)?, spec.lbs, spec.weights.len())?;
        names.dir = PathBuf::from("/tmp/vlbf-1-2");
        let servers = ServerInfo::unbuilt(&spec.weights);
        Ok(LbFleet::assemble(names, spec, servers, true))
    }

    /// The fleet's record before anything runs (`deleted`: nothing to delete on drop).
    fn assemble(
        names: FleetNames,
        spec: &FleetSpec,
        servers: Vec<ServerInfo>,
        deleted: bool,
    ) -> LbFleet {
        LbFleet {
            names,
            spec: spec.clone(),
            servers,
            encaps: vec![Encap::L3dsr {
                dscp: addr::VIP_DSCP,
            }],
            nginx: Vec::new(),
            helpers: Vec::new(),
            router_bird: None,
            lb_birds: (0..spec.lbs).map(|_| None).collect(),
            vecplanes: (0..spec.lbs).map(|_| None).collect(),
            deleted,
        }
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
        self.setup_router()?;
        veth(
            &n.c0,
            &n.ns_client,
            Some(lb::addr::MAC_CLIENT),
            &n.rc,
            &n.ns_router,
            Some(lb::addr::MAC_ROUTER_C),
        )?;
        addr_add(
            &n.ns_router,
            &n.rc,
            lb::addr::ROUTER_C4,
            lb::addr::ROUTER_C6,
        )?;
        ip(&n.ns_router, &["link", "set", &n.rc, "up"])?;
        for a in [IpAddr::V4(lb::addr::CLIENT4), IpAddr::V6(lb::addr::CLIENT6)] {
            neigh(&n.ns_router, &a.to_string(), lb::addr::MAC_CLIENT, &n.rc)?;
        }
        lb::setup_client(&n.ns_client, &n.c0)?;
        for i in 0..self.spec.lbs {
            self.setup_lb(i)?;
        }
        for i in 0..self.servers.len() {
            self.setup_server(i)?;
        }
        self.start_birds()
    }

    fn setup_router(&mut self) -> Result<()> {
        let n = &self.names;
        let r = &n.ns_router;
        for (br, mac) in [
            (&n.br_up, Some(lb::addr::MAC_ROUTER_U)),
            (&n.br_mgmt, None),
            (&n.br_servers, Some(lb::addr::MAC_ROUTER_S)),
        ] {
            let mut args = vec!["link", "add", "name", br.as_str()];
            if let Some(m) = mac {
                args.extend_from_slice(&["address", m]);
            }
            args.extend_from_slice(&["type", "bridge", "stp_state", "0", "forward_delay", "0"]);
            ip(r, &args)?;
        }
        let len4 = lb::addr::LEN4;
        for (dev, a4) in [
            (&n.br_up, lb::addr::ROUTER_U4),
            (&n.br_mgmt, addr::ROUTER_M4),
        ] {
            ip(r, &["addr", "add", &format!("{a4}/{len4}"), "dev", dev])?;
        }
        // Dual-stack on the servers' segment: the servers' readiness is checked over both.
        addr_add(r, &n.br_servers, lb::addr::ROUTER_S4, lb::addr::ROUTER_S6)?;
        for br in [&n.br_up, &n.br_mgmt, &n.br_servers] {
            ip(r, &["link", "set", br, "up"])?;
        }
        cmd::write_sysctl(r, "net/ipv4/ip_forward", "1")?;
        cmd::write_sysctl(r, "net/ipv6/conf/all/forwarding", "1")?;
        // ECMP by the L4 hash (addresses, protocol and ports), so flows spread over the LBs.
        cmd::write_sysctl(r, "net/ipv4/fib_multipath_hash_policy", "1")?;
        Ok(())
    }

    fn setup_lb(&mut self, i: usize) -> Result<()> {
        let n = self.names.clone();
        let (l, r) = (&n.ns_lbs[i], &n.ns_router);
        for (dev, mac, port, br) in [
            (&n.lb_up[i], addr::lb_up_mac(i), &n.up_ports[i], &n.br_up),
            (
                &n.lb_down[i],
                addr::lb_down_mac(i),
                &n.down_ports[i],
                &n.br_servers,
            ),
            (
                &n.lb_mgmt[i],
                addr::lb_mgmt_mac(i),
                &n.mgmt_ports[i],
                &n.br_mgmt,
            ),
        ] {
            veth(dev, l, Some(&mac), port, r, None)?;
            ip(r, &["link", "set", port, "master", br])?;
            ip(r, &["link", "set", port, "up"])?;
        }
        // The data ports stay bare (no addresses, IPv6 off, GRO off) for vecplane, as in
        // LbMode::Bare; the management port is the kernel's, for BGP.
        for dev in [&n.lb_up[i], &n.lb_down[i]] {
            cmd::write_sysctl(l, &format!("net/ipv6/conf/{dev}/disable_ipv6"), "1")?;
            ip(l, &["link", "set", dev, "up"])?;
            run_ok(&cmd::in_ns(l, &["ethtool", "-K", dev, "gro", "off"]))?;
        }
        let m = &n.lb_mgmt[i];
        cmd::write_sysctl(l, &format!("net/ipv6/conf/{m}/disable_ipv6"), "1")?;
        let mgmt = format!("{}/{}", addr::lb_mgmt4(i), addr::MGMT_LEN);
        ip(l, &["addr", "add", &mgmt, "dev", m])?;
        ip(l, &["link", "set", m, "up"])?;
        // The router reaches the LB's data uplink (the BGP next hop) without ARP, and its
        // bridges know the data ports' MACs: an L3DSR balancer never sends on `up`, so the
        // bridge would never learn its MAC and would flood every VIP packet to every LB.
        neigh(
            r,
            &addr::lb_up4(i).to_string(),
            &addr::lb_up_mac(i),
            &n.br_up,
        )?;
        for (mac, port) in [
            (addr::lb_up_mac(i), &n.up_ports[i]),
            (addr::lb_down_mac(i), &n.down_ports[i]),
        ] {
            run_ok(&[
                "bridge", "-n", r, "fdb", "replace", &mac, "dev", port, "master", "static",
            ])?;
        }
        Ok(())
    }

    fn setup_server(&mut self, i: usize) -> Result<()> {
        let mut neighbours: Vec<(IpAddr, String)> = vec![
            (
                IpAddr::V4(lb::addr::ROUTER_S4),
                lb::addr::MAC_ROUTER_S.to_string(),
            ),
            (
                IpAddr::V6(lb::addr::ROUTER_S6),
                lb::addr::MAC_ROUTER_S.to_string(),
            ),
        ];
        // Health-check replies to each LB's probe source.
        for l in 0..self.spec.lbs {
            neighbours.push((IpAddr::V4(addr::lb_down4(l)), addr::lb_down_mac(l)));
        }
        let neighbours: Vec<(IpAddr, &str)> =
            neighbours.iter().map(|(a, m)| (*a, m.as_str())).collect();
        let router = (lb::addr::ROUTER_S4, lb::addr::ROUTER_S6);
        let seg = ServerSegment {
            router_ns: &self.names.ns_router,
            bridge: &self.names.br_servers,
            mtu: 1500,
            neighbours: &neighbours,
            gateway: router,
            vip_gateway: router,
        };
        lb_servers::attach_server(&self.servers[i], &self.names.ports[i], &seg)?;
        let env = server_env(&self.names, &self.encaps);
        lb_servers::setup_encaps_in(&env, &self.servers[i], &mut self.helpers)?;
        lb_servers::start_slot(&env, &self.servers, &mut self.nginx, i)
    }

    /// Restart LB `i`'s BIRD (killed, then started with the same config): its BGP session
    /// drops and comes back; the routes file is left as vecplane last wrote it.
    pub fn restart_lb_bird(&mut self, i: usize) -> Result<()> {
        let n = self.names.clone();
        let routes = self.routes_file(i);
        let Some(slot) = self.lb_birds.get_mut(i) else {
            bail!("LB {i}: the fleet has {} LBs", self.spec.lbs);
        };
        *slot = None;
        let conf = lb_config(&n.dir, i, &routes);
        *slot = Some(Bird::start(&n.ns_lbs[i], &n.dir, &format!("lb{i}"), &conf)?);
        Ok(())
    }

    fn start_birds(&mut self) -> Result<()> {
        let n = self.names.clone();
        let conf = router_config(&n.dir, self.spec.lbs);
        self.router_bird = Some(Bird::start(&n.ns_router, &n.dir, "router", &conf)?);
        for i in 0..self.spec.lbs {
            let routes = self.routes_file(i);
            std::fs::write(&routes, "").with_context(|| format!("write {}", routes.display()))?;
            let conf = lb_config(&n.dir, i, &routes);
            self.lb_birds[i] = Some(Bird::start(&n.ns_lbs[i], &n.dir, &format!("lb{i}"), &conf)?);
        }
        Ok(())
    }

    /// The names of everything the fleet made.
    pub fn names(&self) -> &FleetNames {
        &self.names
    }

    /// What it was built from.
    pub fn spec(&self) -> &FleetSpec {
        &self.spec
    }

    /// The scratch directory (configs, sockets, logs), deleted with the fleet.
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

    /// Load balancer `i`'s namespace (vecplane and its BIRD run here).
    pub fn lb_ns(&self, i: usize) -> Option<&str> {
        self.names.ns_lbs.get(i).map(String::as_str)
    }

    /// The number of load balancers.
    pub fn lb_count(&self) -> usize {
        self.spec.lbs
    }

    /// The servers.
    pub fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    /// The fleet's VIP (L3DSR, [`addr::VIP4`] port 80).
    pub fn vip(&self) -> Vip {
        Vip {
            encap: self.encaps[0],
            addr: IpAddr::V4(addr::VIP4),
            port: VIP_PORT,
        }
    }

    /// The routes file LB `i`'s BIRD includes (`[bgp] routes-file`).
    pub fn routes_file(&self, i: usize) -> PathBuf {
        self.path(&format!("lb{i}-vips.conf"))
    }

    /// The control socket of LB `i`'s BIRD (`[bgp] control-socket`).
    pub fn bird_socket(&self, i: usize) -> PathBuf {
        self.path(&format!("lb{i}-bird.ctl"))
    }

    /// LB `i`'s liveness device name (`[bgp] interface`), unique per run.
    pub fn liveness_device(&self, i: usize) -> Option<&str> {
        self.names.liveness.get(i).map(String::as_str)
    }

    /// The router's BIRD.
    pub fn router_bird(&self) -> Result<&Bird> {
        self.router_bird
            .as_ref()
            .context("the router's BIRD is not running")
    }

    /// LB `i`'s BIRD.
    pub fn lb_bird(&self, i: usize) -> Result<&Bird> {
        self.lb_birds
            .get(i)
            .and_then(Option::as_ref)
            .with_context(|| {
                format!(
                    "LB {i}'s BIRD is not running (the fleet has {} LBs)",
                    self.spec.lbs
                )
            })
    }

    /// Announce `vips` from LB `i` by hand, as vecplane would: write its routes file (routes
    /// via its liveness device, which must exist and be up in its namespace for BIRD to
    /// export them) and `birdc configure`.
    pub fn announce_by_hand(&self, i: usize, vips: &[Ipv4Addr]) -> Result<()> {
        let dev = self
            .liveness_device(i)
            .with_context(|| format!("LB {i}: the fleet has {} LBs", self.spec.lbs))?;
        let path = self.routes_file(i);
        std::fs::write(&path, render_routes_file(dev, vips))
            .with_context(|| format!("write {}", path.display()))?;
        self.lb_bird(i)?.configure()
    }

    /// The state of the router's BGP session with each LB (`Established`, `Active`, ...).
    pub fn bgp_states(&self) -> Result<Vec<String>> {
        let text = self.router_bird()?.birdc(&["show", "protocols"])?;
        (0..self.spec.lbs)
            .map(|i| {
                let name = format!("lb{i}");
                text.lines()
                    .find(|l| l.split_whitespace().next() == Some(name.as_str()))
                    .map(|l| {
                        // Name Proto Table State Since(1-2 words) Info: Info is the last word.
                        l.split_whitespace().last().unwrap_or("").to_string()
                    })
                    .with_context(|| format!("no protocol {name} in `show protocols`:\n{text}"))
            })
            .collect()
    }

    /// Wait until the router's BGP session with every LB is established.
    pub fn wait_bgp_established(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let states = self.bgp_states()?;
            if states.iter().all(|s| s == "Established") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "BGP sessions not established within {:.0} s: {states:?}",
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The next hops of the router's kernel route for `prefix` (e.g. `198.18.100.1/32`),
    /// sorted: every path of a multipath route, or the single gateway; none when there is no
    /// such route.
    pub fn router_nexthops(&self, prefix: &str) -> Result<Vec<Ipv4Addr>> {
        nexthops_in(self.router_ns(), prefix, cmd::DEFAULT_TIMEOUT)
    }

    /// Wait until the router's next hops for `prefix` are exactly `expected` (any order).
    pub fn wait_nexthops(
        &self,
        prefix: &str,
        expected: &[Ipv4Addr],
        timeout: Duration,
    ) -> Result<()> {
        let mut want = expected.to_vec();
        want.sort();
        want.dedup();
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.router_nexthops(prefix)?;
            if got == want {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let bgp = self
                    .router_bird()
                    .and_then(|b| b.birdc(&["show", "route", "all"]))
                    .unwrap_or_else(|e| format!("{e:#}"));
                bail!(
                    "the router's next hops for {prefix} are {got:?}, not {want:?}, after {:.1} s; \
                     its BIRD has:\n{bgp}",
                    timeout.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Start server `i`'s nginx (again) and wait until it answers.
    pub fn start_server(&mut self, i: usize) -> Result<()> {
        let env = server_env(&self.names, &self.encaps);
        lb_servers::start_slot(&env, &self.servers, &mut self.nginx, i)
    }

    /// Stop server `i`'s nginx (SIGTERM, SIGKILL after 3 s).
    pub fn stop_server(&mut self, i: usize) -> Result<()> {
        lb_servers::stop_slot(&mut self.nginx, i)
    }

    /// The access log lines of server `i`.
    pub fn server_log(&self, i: usize) -> Result<Vec<String>> {
        lb_servers::read_access_log(self.dir(), i)
    }

    /// Run `args` inside `ns` (one of the fleet's namespaces), bounded by 30 s; it must exit
    /// 0; returns stdout.
    pub fn exec_ok(&self, ns: &str, args: &[&str]) -> Result<String> {
        if !self.names.namespaces().contains(&ns) {
            bail!("{ns} is not a namespace of this fleet");
        }
        run_ok(&cmd::in_ns(ns, args))
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
        // vecplane first (it withdraws), then BIRD, the servers, the helpers; then the
        // namespaces with anything left in them, and the scratch directory.
        self.vecplanes.clear();
        self.lb_birds.clear();
        self.router_bird = None;
        self.nginx.clear();
        self.helpers.clear();
        let ns = self.names.namespaces();
        let failed = cleanup::release(&ns, &[self.names.dir.as_path()]);
        if failed.is_empty() {
            Ok(())
        } else {
            bail!("could not delete: {}", failed.join("; "))
        }
    }
}

/// The next hops of `prefix` in namespace `router_ns` (see [`LbFleet::router_nexthops`]), for
/// a caller that holds only the namespace's name (a thread watching while the fleet changes);
/// `ip` is killed after `limit`.
pub fn nexthops_in(router_ns: &str, prefix: &str, limit: Duration) -> Result<Vec<Ipv4Addr>> {
    let out = cmd::run_ok_within(
        &["ip", "-n", router_ns, "-j", "route", "show", prefix],
        limit,
    )?;
    parse_nexthops(&out).with_context(|| format!("`ip -j route show {prefix}`: {out}"))
}

impl Drop for LbFleet {
    fn drop(&mut self) {
        if let Err(e) = self.delete_inner() {
            eprintln!("netlab: {e:#}");
        }
    }
}

/// What the fleet's servers share (see [`ServerEnv`]).
fn server_env<'a>(names: &'a FleetNames, encaps: &'a [Encap]) -> ServerEnv<'a> {
    ServerEnv {
        dir: &names.dir,
        router_ns: &names.ns_router,
        encaps,
    }
}

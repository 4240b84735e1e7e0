//! The lab's servers: nginx in each server namespace (private config, pid, logs and temp files
//! in the lab's scratch directory; each answers with its own name), attaching a server
//! namespace to the servers' bridge, the per-encapsulation set-up (VIPs on lo, the stateless
//! nftables rule mapping an L3DSR DSCP back to its VIP, GRE decapsulation), stopping and
//! starting a server, and reading its access log. Shared by [`LbLab`] and the fleet
//! ([`crate::lb_fleet::LbFleet`]) through [`ServerEnv`] and [`ServerSegment`]. It never touches
//! the system's nginx (no default paths are used) nor anything outside the server namespaces.

use crate::cmd::{self, run_ok, Spawned};
use crate::lb::{addr_add, ethtool_off, ip, neigh, veth, Encap, LbLab, ServerInfo, VIP_PORT};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a server may take to answer after it was started.
pub const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The user-space GRE helper (decapsulator on servers, encapsulator for the kernel reference),
/// for kernels built without GRE tunnels.
pub(crate) const GRE_HELPER: &str = include_str!("lb_gre.py");

/// Name of the GRE decapsulating device in a server namespace (TUN or Linux GRE).
pub const SERVER_GRE_DEV: &str = "vlbgre";

/// One running nginx.
#[derive(Debug)]
pub struct Server {
    child: Spawned,
}

impl Server {
    /// Stop it (SIGTERM, SIGKILL after [`cmd::STOP_GRACE`]).
    pub(crate) fn stop(&mut self) -> Result<()> {
        self.child.stop(cmd::STOP_GRACE).map(|_| ())
    }

    /// Whether it still runs.
    pub(crate) fn running(&mut self) -> bool {
        self.child
            .try_wait()
            .map(|st| st.is_none())
            .unwrap_or(false)
    }
}

/// What the servers of one lab share: the scratch directory (each server's files in
/// `<dir>/s<index>`), the namespace their readiness is checked from (on their segment), and
/// the encapsulations they are set up for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerEnv<'a> {
    /// The lab's scratch directory.
    pub dir: &'a Path,
    /// The router's namespace (holds the servers' bridge).
    pub router_ns: &'a str,
    /// The encapsulations served.
    pub encaps: &'a [Encap],
}

/// How a server namespace hangs off the servers' segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerSegment<'a> {
    /// The router's namespace (holds the bridge).
    pub router_ns: &'a str,
    /// The servers' bridge in it.
    pub bridge: &'a str,
    /// MTU of the server's veth pair.
    pub mtu: u32,
    /// Static neighbours of the server on the segment (address, MAC).
    pub neighbours: &'a [(IpAddr, &'a str)],
    /// Default gateways of replies from the server's own addresses (IPv4, IPv6).
    pub gateway: (Ipv4Addr, Ipv6Addr),
    /// Where replies from a VIP go (IPv4, IPv6): the router on the segment.
    pub vip_gateway: (Ipv4Addr, Ipv6Addr),
}

/// Create server `s`'s veth pair (its end `s.ifname` in `s.ns`, `port` on the bridge), its
/// addresses, static neighbours and routes: replies from its own addresses go to
/// `seg.gateway`, replies from a VIP (L3DSR, GRE) to `seg.vip_gateway` (table 100).
pub(crate) fn attach_server(s: &ServerInfo, port: &str, seg: &ServerSegment<'_>) -> Result<()> {
    let mtu = seg.mtu.to_string();
    let r = seg.router_ns;
    veth(&s.ifname, &s.ns, Some(&s.mac), port, r, None)?;
    let ns = &s.ns;
    ip(ns, &["link", "set", &s.ifname, "mtu", &mtu])?;
    ip(r, &["link", "set", port, "mtu", &mtu])?;
    ip(r, &["link", "set", port, "master", seg.bridge])?;
    ip(r, &["link", "set", port, "up"])?;
    addr_add(ns, &s.ifname, s.ip4, s.ip6)?;
    ip(ns, &["link", "set", &s.ifname, "up"])?;
    ethtool_off(ns, &s.ifname)?;
    for conf in ["all", "default"] {
        // The VIPs on lo are not announced on the segment.
        cmd::write_sysctl(ns, &format!("net/ipv4/conf/{conf}/arp_ignore"), "1")?;
        cmd::write_sysctl(ns, &format!("net/ipv4/conf/{conf}/arp_announce"), "2")?;
    }
    for (a, mac) in seg.neighbours {
        neigh(ns, &a.to_string(), mac, &s.ifname)?;
    }
    let (v4net, v4len) = crate::lb::addr::VIP_NET4;
    let (v6net, v6len) = crate::lb::addr::VIP_NET6;
    let (g4, g6) = (seg.gateway.0.to_string(), seg.gateway.1.to_string());
    let (r4, r6) = (seg.vip_gateway.0.to_string(), seg.vip_gateway.1.to_string());
    let (n4, n6) = (format!("{v4net}/{v4len}"), format!("{v6net}/{v6len}"));
    for (fam, gw, vip_gw, net) in [("-4", &g4, &r4, &n4), ("-6", &g6, &r6, &n6)] {
        ip(ns, &[fam, "route", "add", "default", "via", gw])?;
        ip(
            ns,
            &[
                fam, "route", "add", "default", "via", vip_gw, "table", "100",
            ],
        )?;
        ip(
            ns,
            &[
                fam, "rule", "add", "from", net, "lookup", "100", "pref", "100",
            ],
        )?;
    }
    Ok(())
}

fn server_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("s{i}"))
}

/// The access log of server `i` (one line per request:
/// `remote_addr remote_port server_addr server_port status`).
pub fn access_log(lab: &LbLab, i: usize) -> PathBuf {
    server_dir(lab.dir(), i).join("access.log")
}

/// The lines of server `i`'s access log under scratch directory `dir` (none yet: empty).
pub(crate) fn read_access_log(dir: &Path, i: usize) -> Result<Vec<String>> {
    let p = server_dir(dir, i).join("access.log");
    match std::fs::read_to_string(&p) {
        Ok(t) => Ok(t.lines().map(str::to_string).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("read {}", p.display())),
    }
}

/// The nginx config of server `name` with files under `dir`, listening on `ports` (IPv4 and
/// IPv6, any address, so VIPs on lo are served too).
pub fn render_nginx_config(name: &str, dir: &Path, ports: &[u16]) -> String {
    let d = dir.display();
    let mut s = format!(
        "# netlab load-balancer lab server {name} (private: nothing outside {d})\n\
         worker_processes 1;\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n\
         \x20   log_format vlb '$remote_addr $remote_port $server_addr $server_port $status';\n\
         \x20   access_log {d}/access.log vlb;\n\
         \x20   client_body_temp_path {d}/tmp/body;\n\
         \x20   proxy_temp_path {d}/tmp/proxy;\n\
         \x20   fastcgi_temp_path {d}/tmp/fastcgi;\n\
         \x20   uwsgi_temp_path {d}/tmp/uwsgi;\n\
         \x20   scgi_temp_path {d}/tmp/scgi;\n\
         \x20   keepalive_requests 1000000;\n\
         \x20   server {{\n"
    );
    for p in ports {
        let _ = writeln!(
            s,
            "        listen {p};\n        listen [::]:{p} ipv6only=on;"
        );
    }
    let _ = write!(
        s,
        "        default_type text/plain;\n\
         \x20       location / {{ return 200 \"{name} $server_addr $server_port\\n\"; }}\n\
         \x20   }}\n\
         }}\n"
    );
    s
}

fn ports(encaps: &[Encap]) -> Vec<u16> {
    let mut p = vec![VIP_PORT];
    for e in encaps {
        let t = e.server_port();
        if !p.contains(&t) {
            p.push(t);
        }
    }
    p
}

/// Whether this kernel has Linux GRE tunnels (tried once in namespace `ns`).
fn kernel_has_gre(ns: &str) -> bool {
    let ok = ip(
        ns,
        &[
            "link",
            "add",
            "vlbprobe",
            "type",
            "gre",
            "local",
            "198.18.12.250",
        ],
    )
    .is_ok();
    if ok {
        let _ = ip(ns, &["link", "del", "vlbprobe"]);
    }
    ok
}

/// Set server `i` of the lab up for every encapsulation of the lab (see [`setup_encaps_in`]).
pub(crate) fn setup_encaps(lab: &mut LbLab, i: usize) -> Result<()> {
    let env = ServerEnv {
        dir: &lab.names.dir,
        router_ns: &lab.names.ns_router,
        encaps: &lab.spec.encaps,
    };
    setup_encaps_in(&env, &lab.servers[i], &mut lab.helpers)
}

/// Set server `s` up for every encapsulation of `env`: VIPs of direct-return encapsulations
/// on lo, an nftables rule per L3DSR VIP, GRE decapsulation for GRE4/GRE6 (a helper process
/// pushed to `helpers` when the kernel has no GRE).
pub(crate) fn setup_encaps_in(
    env: &ServerEnv<'_>,
    s: &ServerInfo,
    helpers: &mut Vec<Spawned>,
) -> Result<()> {
    let ns = s.ns.as_str();
    let mut nft = String::new();
    let mut gre = false;
    for &e in env.encaps {
        if e.direct_return() {
            for v in e.vips() {
                let (fam, a) = match v {
                    IpAddr::V4(a) => ("-4", format!("{a}/32")),
                    IpAddr::V6(a) => ("-6", format!("{a}/128")),
                };
                ip(ns, &[fam, "addr", "add", &a, "dev", "lo"])?;
            }
        }
        match e {
            Encap::L3dsr { dscp } => {
                for v in e.vips() {
                    let _ = writeln!(
                        nft,
                        "    ip dscp {dscp} ip daddr {} notrack ip daddr set {v}",
                        s.ip4
                    );
                }
            }
            Encap::Gre4 | Encap::Gre6 => gre = true,
            _ => {}
        }
    }
    if !nft.is_empty() {
        // Stateless: the server's own address back to the VIP the DSCP stands for, before
        // conntrack and routing, so the VIP on lo takes the packet and the reply leaves from it.
        let rules = format!(
            "table ip vlb_l3dsr {{\n  chain prerouting {{\n    type filter hook prerouting \
             priority raw; policy accept;\n{nft}  }}\n}}\n"
        );
        let path = env.dir.join(format!("s{}-l3dsr.nft", s.index));
        std::fs::write(&path, &rules).with_context(|| format!("write {}", path.display()))?;
        run_ok(&cmd::in_ns(ns, &["nft", "-f", &path.to_string_lossy()]))
            .with_context(|| format!("L3DSR rules of {}:\n{rules}", s.name))?;
    }
    if gre {
        setup_gre(env.dir, s, helpers)?;
    }
    Ok(())
}

fn setup_gre(dir: &Path, s: &ServerInfo, helpers: &mut Vec<Spawned>) -> Result<()> {
    let ns = s.ns.as_str();
    if kernel_has_gre(ns) {
        // Linux GRE tunnels with any remote: the LB may pick a different outer source per flow.
        let v4 = format!("{SERVER_GRE_DEV}4");
        let v6 = format!("{SERVER_GRE_DEV}6");
        ip(
            ns,
            &[
                "link",
                "add",
                &v4,
                "type",
                "gre",
                "local",
                &s.ip4.to_string(),
                "ttl",
                "64",
            ],
        )?;
        ip(
            ns,
            &[
                "link",
                "add",
                &v6,
                "type",
                "ip6gre",
                "local",
                &s.ip6.to_string(),
                "hoplimit",
                "64",
            ],
        )?;
        for d in [&v4, &v6] {
            cmd::write_sysctl(ns, &format!("net/ipv4/conf/{d}/rp_filter"), "0")?;
            ip(ns, &["link", "set", d, "up"])?;
        }
        return Ok(());
    }
    // This kernel has no GRE (CONFIG_NET_IPGRE unset): a TUN device fed by a user-space
    // decapsulator that reads GRE from raw sockets (so the kernel sends no protocol
    // unreachable) and writes the inner packets into the TUN device.
    if let Some(why) = cmd::missing_prerequisite(&["python3"]) {
        bail!("GRE decapsulation on {}: {why}", s.name);
    }
    ip(ns, &["tuntap", "add", "dev", SERVER_GRE_DEV, "mode", "tun"])?;
    cmd::write_sysctl(
        ns,
        &format!("net/ipv4/conf/{SERVER_GRE_DEV}/rp_filter"),
        "0",
    )?;
    ip(ns, &["link", "set", SERVER_GRE_DEV, "up"])?;
    let script = write_gre_helper_in(dir)?;
    let log = dir.join(format!("s{}-gre.log", s.index));
    let child = Spawned::start(
        &cmd::in_ns(
            ns,
            &[
                "python3",
                &script.to_string_lossy(),
                "decap",
                "--tun",
                SERVER_GRE_DEV,
            ],
        ),
        Some(&log),
    )?;
    helpers.push(child);
    wait_for_log(&log, "ready", Duration::from_secs(10))
        .with_context(|| format!("the GRE decapsulator of {}", s.name))
}

pub(crate) fn write_gre_helper(lab: &LbLab) -> Result<PathBuf> {
    write_gre_helper_in(lab.dir())
}

fn write_gre_helper_in(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("lb_gre.py");
    if !path.exists() {
        std::fs::write(&path, GRE_HELPER).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(path)
}

pub(crate) fn wait_for_log(log: &Path, word: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|l| l.trim() == word) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "did not say `{word}` within {:.0} s; its output:\n{text}",
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start nginx on every server and wait until each answers.
pub(crate) fn start_all(lab: &mut LbLab) -> Result<()> {
    lab.nginx = (0..lab.servers.len()).map(|_| None).collect();
    for i in 0..lab.servers.len() {
        lab.start_server(i)?;
    }
    Ok(())
}

/// Start nginx for server `s` of `env` and wait until it answers on every port (asked from
/// `env.router_ns` over both families); its access log is kept (appended to).
pub(crate) fn start_nginx(env: &ServerEnv<'_>, s: &ServerInfo) -> Result<Server> {
    let dir = server_dir(env.dir, s.index);
    std::fs::create_dir_all(dir.join("tmp"))
        .with_context(|| format!("create {}", dir.display()))?;
    let ports = ports(env.encaps);
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, render_nginx_config(&s.name, &dir, &ports))
        .with_context(|| format!("write {}", conf.display()))?;
    let d = dir.to_string_lossy().into_owned();
    let child = Spawned::start(
        &cmd::in_ns(
            &s.ns,
            &[
                "nginx",
                "-e",
                &format!("{d}/error.log"),
                "-p",
                &d,
                "-c",
                &conf.to_string_lossy(),
                "-g",
                "daemon off; master_process on;",
            ],
        ),
        Some(&dir.join("nginx.out")),
    )?;
    let mut server = Server { child };
    let deadline = Instant::now() + SERVER_READY_TIMEOUT;
    // Ask it from the router (on its segment) over both families, on every port.
    for p in &ports {
        for url in [
            format!("http://{}:{p}/", s.ip4),
            format!("http://[{}]:{p}/", s.ip6),
        ] {
            loop {
                if let Some(st) = server.child.try_wait()? {
                    bail!(
                        "nginx of {} exited ({}): {}{}",
                        s.name,
                        cmd::describe_status(st),
                        server.child.log(),
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                }
                let out = cmd::run_bounded(
                    &cmd::in_ns(env.router_ns, &["curl", "-g", "-s", "-m", "1", &url]),
                    Duration::from_secs(5),
                )?;
                let body = String::from_utf8_lossy(&out.stdout);
                if out.status.success() && body.starts_with(&format!("{} ", s.name)) {
                    break;
                }
                if Instant::now() >= deadline {
                    bail!(
                        "nginx of {} does not answer {url} within {:.0} s: {}",
                        s.name,
                        SERVER_READY_TIMEOUT.as_secs_f64(),
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    Ok(server)
}

/// Start server `i` of `servers` into its slot of `nginx` (an error if it runs already).
pub(crate) fn start_slot(
    env: &ServerEnv<'_>,
    servers: &[ServerInfo],
    nginx: &mut Vec<Option<Server>>,
    i: usize,
) -> Result<()> {
    let s = servers
        .get(i)
        .with_context(|| format!("server {i}: the lab has {} servers", servers.len()))?;
    if nginx.len() < servers.len() {
        nginx.resize_with(servers.len(), || None);
    }
    if nginx[i].is_some() {
        bail!("server {} is already running", s.name);
    }
    nginx[i] = Some(start_nginx(env, s)?);
    Ok(())
}

/// Stop the nginx in slot `i` of `nginx` (SIGTERM, SIGKILL after 3 s).
pub(crate) fn stop_slot(nginx: &mut [Option<Server>], i: usize) -> Result<()> {
    let count = nginx.len();
    let slot = nginx
        .get_mut(i)
        .with_context(|| format!("server {i}: the lab has {count} servers"))?;
    match slot.take() {
        Some(mut s) => s.stop(),
        None => bail!("server s{i} is not running"),
    }
}

impl LbLab {
    /// Start server `i`'s nginx (again) and wait until it answers on every port; its access
    /// log is kept (appended to).
    pub fn start_server(&mut self, i: usize) -> Result<()> {
        let env = ServerEnv {
            dir: &self.names.dir,
            router_ns: &self.names.ns_router,
            encaps: &self.spec.encaps,
        };
        start_slot(&env, &self.servers, &mut self.nginx, i)
    }

    /// Stop server `i`'s nginx (SIGTERM, SIGKILL after 3 s): its connections are reset and
    /// new ones refused, as when a real server goes down.
    pub fn stop_server(&mut self, i: usize) -> Result<()> {
        stop_slot(&mut self.nginx, i)
    }

    /// Whether server `i`'s nginx runs.
    pub fn server_running(&mut self, i: usize) -> bool {
        self.nginx
            .get_mut(i)
            .and_then(Option::as_mut)
            .is_some_and(Server::running)
    }

    /// Requests logged so far by each server (lines of its access log), in server order.
    pub fn server_log_counts(&self) -> Result<Vec<u64>> {
        (0..self.servers.len())
            .map(|i| Ok(self.server_log(i)?.len() as u64))
            .collect()
    }

    /// The access log lines of server `i` (`remote_addr remote_port server_addr server_port
    /// status`).
    pub fn server_log(&self, i: usize) -> Result<Vec<String>> {
        read_access_log(self.dir(), i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_config_is_private_and_listens_everywhere() {
        let c = render_nginx_config("s1", Path::new("/tmp/x/s1"), &[80, 8080]);
        for want in [
            "pid /tmp/x/s1/nginx.pid;",
            "access_log /tmp/x/s1/access.log vlb;",
            "listen 8080;",
            "listen [::]:80 ipv6only=on;",
            "return 200 \"s1 $server_addr $server_port\\n\";",
        ] {
            assert!(c.contains(want), "{want} missing:\n{c}");
        }
        // Every path it names is inside its directory.
        for w in c
            .split_whitespace()
            .filter(|w| w.starts_with('/') && w.len() > 1)
        {
            assert!(w.starts_with("/tmp/x/s1"), "{w}");
        }
        assert!(GRE_HELPER.contains("def decap"));
    }
}

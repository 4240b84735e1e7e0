//! The lab's servers: nginx in each server namespace (private config, pid, logs and temp files
//! in the lab's scratch directory; each answers with its own name), the per-encapsulation
//! set-up (VIPs on lo, the stateless nftables rule mapping an L3DSR DSCP back to its VIP, GRE
//! decapsulation), stopping and starting a server, and reading its access log. It never touches
//! the system's nginx (no default paths are used) nor anything outside the server namespaces.

use crate::cmd::{self, run_ok, Spawned};
use crate::lb::{ip, Encap, LbLab, ServerInfo, VIP_PORT};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::net::IpAddr;
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

fn server_dir(lab: &LbLab, i: usize) -> PathBuf {
    lab.path(&format!("s{i}"))
}

/// The access log of server `i` (one line per request:
/// `remote_addr remote_port server_addr server_port status`).
pub fn access_log(lab: &LbLab, i: usize) -> PathBuf {
    server_dir(lab, i).join("access.log")
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

fn ports(lab: &LbLab) -> Vec<u16> {
    let mut p = vec![VIP_PORT];
    for e in &lab.spec.encaps {
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

/// Set server `i` up for every encapsulation of the lab: VIPs of direct-return encapsulations
/// on lo, an nftables rule per L3DSR VIP, GRE decapsulation for GRE4/GRE6.
pub(crate) fn setup_encaps(lab: &mut LbLab, i: usize) -> Result<()> {
    let s: ServerInfo = lab.servers[i].clone();
    let ns = s.ns.as_str();
    let mut nft = String::new();
    let mut gre = false;
    for e in lab.spec.encaps.clone() {
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
        let path = lab.path(&format!("s{i}-l3dsr.nft"));
        std::fs::write(&path, &rules).with_context(|| format!("write {}", path.display()))?;
        run_ok(&cmd::in_ns(ns, &["nft", "-f", &path.to_string_lossy()]))
            .with_context(|| format!("L3DSR rules of {}:\n{rules}", s.name))?;
    }
    if gre {
        setup_gre(lab, &s)?;
    }
    Ok(())
}

fn setup_gre(lab: &mut LbLab, s: &ServerInfo) -> Result<()> {
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
    let script = write_gre_helper(lab)?;
    let log = lab.path(&format!("s{}-gre.log", s.index));
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
    lab.helpers.push(child);
    wait_for_log(&log, "ready", Duration::from_secs(10))
        .with_context(|| format!("the GRE decapsulator of {}", s.name))
}

pub(crate) fn write_gre_helper(lab: &LbLab) -> Result<PathBuf> {
    let path = lab.path("lb_gre.py");
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

impl LbLab {
    /// Start server `i`'s nginx (again) and wait until it answers on every port; its access
    /// log is kept (appended to).
    pub fn start_server(&mut self, i: usize) -> Result<()> {
        let s = self
            .servers
            .get(i)
            .with_context(|| format!("server {i}: the lab has {}", self.servers.len()))?
            .clone();
        if self.nginx.get(i).is_some_and(Option::is_some) {
            bail!("server {} is already running", s.name);
        }
        let dir = server_dir(self, i);
        std::fs::create_dir_all(dir.join("tmp"))
            .with_context(|| format!("create {}", dir.display()))?;
        let ports = ports(self);
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
                        &cmd::in_ns(
                            &self.names.ns_router,
                            &["curl", "-g", "-s", "-m", "1", &url],
                        ),
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
        self.nginx[i] = Some(server);
        Ok(())
    }

    /// Stop server `i`'s nginx (SIGTERM, SIGKILL after 3 s): its connections are reset and
    /// new ones refused, as when a real server goes down.
    pub fn stop_server(&mut self, i: usize) -> Result<()> {
        let slot = self
            .nginx
            .get_mut(i)
            .with_context(|| format!("server {i}: the lab has {} servers", self.servers.len()))?;
        match slot.take() {
            Some(mut s) => {
                s.child.stop(cmd::STOP_GRACE)?;
                Ok(())
            }
            None => bail!("server s{i} is not running"),
        }
    }

    /// Whether server `i`'s nginx runs.
    pub fn server_running(&mut self, i: usize) -> bool {
        match self.nginx.get_mut(i) {
            Some(Some(s)) => s.child.try_wait().map(|st| st.is_none()).unwrap_or(false),
            _ => false,
        }
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
        let p = access_log(self, i);
        match std::fs::read_to_string(&p) {
            Ok(t) => Ok(t.lines().map(str::to_string).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("read {}", p.display())),
        }
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

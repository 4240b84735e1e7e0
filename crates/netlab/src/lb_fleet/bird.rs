//! BIRD 2 in the fleet: the router's config (AS 65000, one eBGP neighbour per load balancer,
//! ECMP into the kernel with `merge paths on`), each load balancer's config (its own AS, the
//! routes file vecplane writes included, the VIPs exported with the LB's data uplink as next
//! hop), the routes file written by hand (for tests without vecplane), and the `bird -f`
//! daemons started inside the namespaces with private files in the fleet's scratch directory.
//! A daemon is stopped when dropped; nothing here touches the system's BIRD (no default paths).

use super::addr;
use crate::cmd::{self, Spawned};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a BIRD may take to answer on its control socket after it was started.
pub const BIRD_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The BGP timers of every session (both sides): hold 3 s, keepalive 1 s, and quick (re)connects
/// so a session comes up within a couple of seconds of both daemons running.
const TIMERS: &str = "  hold time 3;\n  keepalive time 1;\n  connect delay time 1;\n  \
                      connect retry time 1;\n  error wait time 1, 3;\n";

/// The router's BIRD config: AS [`addr::ROUTER_AS`] on the management bridge, one eBGP
/// neighbour `lb<i>` per load balancer (AS [`addr::lb_as`]), everything imported, and the
/// kernel protocol merging equal routes into one multipath route (ECMP).
pub fn router_config(dir: &Path, lbs: usize) -> String {
    let mut s = format!(
        "# netlab LbFleet: the router (AS {as_}). Private: nothing outside {d}.\n\
         log \"{d}/router-bird.log\" all;\n\
         router id {id};\n\
         protocol device {{}}\n\
         protocol kernel {{\n  ipv4 {{ export all; }};\n  merge paths on;\n}}\n\
         template bgp lbs {{\n  local {id} as {as_};\n{TIMERS}  ipv4 {{ import all; export none; }};\n}}\n",
        as_ = addr::ROUTER_AS,
        d = dir.display(),
        id = addr::ROUTER_M4,
    );
    for i in 0..lbs {
        let _ = writeln!(
            s,
            "protocol bgp lb{i} from lbs {{ neighbor {} as {}; }}",
            addr::lb_mgmt4(i),
            addr::lb_as(i)
        );
    }
    s
}

/// Load balancer `i`'s BIRD config: its AS, the routes file vecplane writes (`routes_file`,
/// static protocols `vecplane4`/`vecplane6`) included, and one eBGP session to the router over
/// the management segment exporting `vecplane4`'s routes with next hop the LB's data uplink
/// ([`addr::lb_up4`]): `next hop address` replaces the session's own (management) address, and
/// the router accepts it because it is on one of its directly connected subnets.
pub fn lb_config(dir: &Path, i: usize, routes_file: &Path) -> String {
    format!(
        "# netlab LbFleet: load balancer {i} (AS {as_}). Private: nothing outside {d}.\n\
         log \"{d}/lb{i}-bird.log\" all;\n\
         router id {id};\n\
         protocol device {{}}\n\
         include \"{routes}\";\n\
         protocol bgp uplink {{\n  local {id} as {as_};\n  neighbor {rid} as {ras};\n{TIMERS}  \
         ipv4 {{\n    import none;\n    export where proto = \"vecplane4\";\n    \
         next hop address {nh};\n  }};\n}}\n",
        as_ = addr::lb_as(i),
        d = dir.display(),
        id = addr::lb_mgmt4(i),
        routes = routes_file.display(),
        rid = addr::ROUTER_M4,
        ras = addr::ROUTER_AS,
        nh = addr::lb_up4(i),
    )
}

/// A routes file as vecplane writes it: `vecplane4` with one route per VIP `via "<device>"`,
/// and an empty `vecplane6`. For announcing by hand, without vecplane.
pub fn render_routes_file(device: &str, vips: &[Ipv4Addr]) -> String {
    let mut s = String::from("# written by netlab (by hand, not by vecplane)\n");
    s.push_str("protocol static vecplane4 {\n  ipv4;\n");
    for v in vips {
        let _ = writeln!(s, "  route {v}/32 via \"{device}\";");
    }
    s.push_str("}\nprotocol static vecplane6 {\n  ipv6;\n}\n");
    s
}

/// One `bird -f` inside a namespace; stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Bird {
    child: Spawned,
    socket: PathBuf,
    log: PathBuf,
}

impl Bird {
    /// Write `config` to `<dir>/<name>-bird.conf` and start `bird -f -c CONF -s SOCK -P PID`
    /// inside `ns` (its output in `<name>-bird.out`, its log in `<name>-bird.log`); wait until
    /// it answers on its control socket.
    pub fn start(ns: &str, dir: &Path, name: &str, config: &str) -> Result<Bird> {
        let conf = dir.join(format!("{name}-bird.conf"));
        std::fs::write(&conf, config).with_context(|| format!("write {}", conf.display()))?;
        let socket = dir.join(format!("{name}-bird.ctl"));
        let pid = dir.join(format!("{name}-bird.pid"));
        let out = dir.join(format!("{name}-bird.out"));
        let child = Spawned::start(
            &cmd::in_ns(
                ns,
                &[
                    "bird",
                    "-f",
                    "-c",
                    &conf.to_string_lossy(),
                    "-s",
                    &socket.to_string_lossy(),
                    "-P",
                    &pid.to_string_lossy(),
                ],
            ),
            Some(&out),
        )?;
        let mut b = Bird {
            child,
            socket,
            log: dir.join(format!("{name}-bird.log")),
        };
        let deadline = Instant::now() + BIRD_READY_TIMEOUT;
        loop {
            if let Some(st) = b.child.try_wait()? {
                bail!(
                    "bird ({name}) exited ({}): {}\nits config:\n{config}",
                    cmd::describe_status(st),
                    b.child.log().trim_end()
                );
            }
            if b.socket.exists() && b.birdc(&["show", "status"]).is_ok() {
                return Ok(b);
            }
            if Instant::now() >= deadline {
                bail!(
                    "bird ({name}) did not answer on {} within {:.0} s: {}",
                    b.socket.display(),
                    BIRD_READY_TIMEOUT.as_secs_f64(),
                    b.child.log().trim_end()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Its log file (`log "<file>" all;`).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Run `birdc -s SOCKET ARGS...` (bounded by 10 s); it must exit 0; returns its output.
    pub fn birdc(&self, args: &[&str]) -> Result<String> {
        let sock = self.socket.to_string_lossy().into_owned();
        let mut v = vec!["birdc", "-s", &sock];
        v.extend_from_slice(args);
        let out = cmd::run_bounded(&v, Duration::from_secs(10))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "`{}` failed ({}): {text}{}",
                v.join(" "),
                cmd::describe_status(out.status),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(text)
    }

    /// `birdc configure`: re-read the config (and the files it includes); an error with
    /// BIRD's message when it refuses it (it then keeps running the old one).
    pub fn configure(&self) -> Result<()> {
        let text = self.birdc(&["configure"])?;
        if text.contains("Reconfigured") || text.contains("Reconfiguration in progress") {
            Ok(())
        } else {
            bail!("BIRD refused its config: {}", text.trim_end())
        }
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().map(|s| s.is_none()).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_the_sessions_and_the_next_hop() {
        let dir = Path::new("/tmp/vlbf-1-2");
        let r = router_config(dir, 3);
        for want in [
            "log \"/tmp/vlbf-1-2/router-bird.log\" all;",
            "router id 198.18.13.1;",
            "merge paths on;",
            "hold time 3;",
            "keepalive time 1;",
            "local 198.18.13.1 as 65000;",
            "protocol bgp lb0 from lbs { neighbor 198.18.13.2 as 65001; }",
            "protocol bgp lb2 from lbs { neighbor 198.18.13.4 as 65003; }",
            "import all; export none;",
        ] {
            assert!(r.contains(want), "{want} missing:\n{r}");
        }
        let l = lb_config(dir, 1, &dir.join("lb1-vips.conf"));
        for want in [
            "include \"/tmp/vlbf-1-2/lb1-vips.conf\";",
            "router id 198.18.13.3;",
            "local 198.18.13.3 as 65002;",
            "neighbor 198.18.13.1 as 65000;",
            "export where proto = \"vecplane4\";",
            "next hop address 198.18.11.3;",
            "protocol device {}",
        ] {
            assert!(l.contains(want), "{want} missing:\n{l}");
        }
        // Every path either names is inside the scratch directory.
        for w in r.split_whitespace().chain(l.split_whitespace()) {
            if let Some(p) = w.trim_matches(|c| c == '"' || c == ';').strip_prefix('/') {
                assert!(p.starts_with("tmp/vlbf-1-2"), "{w}");
            }
        }
        let f = render_routes_file("vlbfx-0g0", &[Ipv4Addr::new(198, 18, 100, 1)]);
        assert!(f.contains(
            "protocol static vecplane4 {\n  ipv4;\n  route 198.18.100.1/32 via \"vlbfx-0g0\";\n}"
        ));
        assert!(f.contains("protocol static vecplane6 {\n  ipv6;\n}"));
    }
}

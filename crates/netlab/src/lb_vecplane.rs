//! The load-balancer lab seen from vecplane: the config of its two ports on the LB's veth ends
//! (validated by vecplane's own parser), the VPP `lb` CLI lines for the lab's VIPs and servers,
//! and starting `vecplane run` in the LB namespace. It never edits the config format.

use crate::lb::{addr, Encap, LbLab, LbMode};
use crate::vecplane::{validate_config, Driver, Vecplane};
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;

impl LbLab {
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
    /// server-side addresses as GRE sources, one `lb vip` per VIP and, per VIP, one `lb as` per
    /// weight with the servers of the VIP's server family that have it (VPP's `weight` is the
    /// whole line's; weights are 0..=100), without `weight` when all servers share one.
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
            // One `lb as` line per weight (VPP's `weight` is the whole line's), servers in
            // order; no `weight` at all when every server has the same one (only ratios count).
            let same = self.servers.windows(2).all(|w| w[0].weight == w[1].weight)
                && self.servers.first().is_some_and(|s| s.weight > 0);
            let mut weights: Vec<u32> = Vec::new();
            for s in &self.servers {
                if !weights.contains(&s.weight) {
                    weights.push(s.weight);
                }
            }
            for w in weights {
                let mut line = format!("lb as {prefix} protocol tcp port {}", v.port);
                for s in self.servers.iter().filter(|s| s.weight == w) {
                    let a = if v.encap.server_family_v6() {
                        IpAddr::V6(s.ip6)
                    } else {
                        IpAddr::V4(s.ip4)
                    };
                    let _ = write!(line, " {a}");
                }
                if !same {
                    let _ = write!(line, " weight {w}");
                }
                out.push(line);
            }
        }
        out
    }

    /// Start `exe run --config CONFIG` inside the LB namespace (see [`LbLab::vecplane_config`])
    /// and wait until its control socket answers.
    pub fn start_vecplane(&self, exe: &Path, config: &Path) -> Result<Vecplane> {
        crate::vecplane::start_in(&self.names.ns_lb, &self.names.dir, exe, config)
    }
}

//! The kernel reference load balancer in the lab's LB namespace: nftables over the same
//! servers and weights (one map slot per unit of weight): L3DSR as a stateless DSCP + destination
//! rewrite picked by `jhash`, NAT4/NAT6 as DNAT through a `jhash`/`numgen` map (conntrack
//! rewrites the replies), GRE4/GRE6 by routing the VIPs into the user-space GRE encapsulator
//! (this kernel has no GRE). It only writes rules and routes inside the LB namespace.

use crate::cmd::{self, run_ok, Spawned};
use crate::lb::{ip, Encap, KernelHash, LbLab, ServerInfo, VIP_PORT};
use crate::lb_servers::{wait_for_log, write_gre_helper};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::net::IpAddr;

/// The TUN device the GRE VIPs are routed into in the LB namespace.
pub const LB_GRE_DEV: &str = "vlbgre";

/// Server index of each map slot: server `i` takes `weights[i]` consecutive slots.
pub fn weighted_slots(weights: &[u32]) -> Vec<usize> {
    weights
        .iter()
        .enumerate()
        .flat_map(|(i, &w)| std::iter::repeat_n(i, w as usize))
        .collect()
}

fn hash_expr(hash: KernelHash, v6: bool, slots: usize) -> String {
    let saddr = if v6 { "ip6 saddr" } else { "ip saddr" };
    match hash {
        KernelHash::Jhash => format!("jhash {saddr} . tcp sport mod {slots}"),
        KernelHash::NumgenInc => format!("numgen inc mod {slots}"),
        KernelHash::NumgenRandom => format!("numgen random mod {slots}"),
    }
}

/// The nftables ruleset of the kernel reference for `encaps` over `servers`.
pub fn render_ruleset(encaps: &[Encap], servers: &[ServerInfo], hash: KernelHash) -> String {
    let weights: Vec<u32> = servers.iter().map(|s| s.weight).collect();
    let slots = weighted_slots(&weights);
    let map = |f: &dyn Fn(&ServerInfo) -> String| {
        slots
            .iter()
            .enumerate()
            .map(|(k, &i)| format!("{k} : {}", f(&servers[i])))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (mut raw4, mut nat4, mut raw6, mut nat6) =
        (String::new(), String::new(), String::new(), String::new());
    for &e in encaps {
        for vip in e.vips() {
            let v6 = vip.is_ipv6();
            let (raw, nat, fam) = if v6 {
                (&mut raw6, &mut nat6, "ip6")
            } else {
                (&mut raw4, &mut nat4, "ip")
            };
            let m = format!("{fam} daddr {vip} tcp dport {VIP_PORT}");
            match e {
                Encap::L3dsr { dscp } => {
                    let _ = writeln!(
                        raw,
                        "    {m} notrack ip dscp set {dscp} ip daddr set {} map {{ {} }}",
                        hash_expr(KernelHash::Jhash, false, slots.len()),
                        map(&|s| s.ip4.to_string())
                    );
                }
                Encap::Gre4 | Encap::Gre6 => {
                    // Routed into the encapsulator, statelessly.
                    let _ = writeln!(raw, "    {fam} daddr {vip} notrack");
                }
                Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => {
                    let _ = writeln!(
                        nat,
                        "    {m} dnat {fam} to {} map {{ {} }}",
                        hash_expr(hash, v6, slots.len()),
                        map(&|s| {
                            let a = if v6 {
                                IpAddr::V6(s.ip6)
                            } else {
                                IpAddr::V4(s.ip4)
                            };
                            format!("{a} . {target_port}")
                        })
                    );
                }
            }
        }
    }
    let mut out = String::new();
    for (fam, raw, nat) in [("ip", raw4, nat4), ("ip6", raw6, nat6)] {
        let _ = writeln!(out, "table {fam} vlb_reference {{");
        let _ = writeln!(
            out,
            "  chain raw {{\n    type filter hook prerouting priority raw; policy accept;\n{raw}  }}"
        );
        let _ = writeln!(
            out,
            "  chain nat {{\n    type nat hook prerouting priority dstnat; policy accept;\n{nat}  }}"
        );
        let _ = writeln!(out, "}}");
    }
    out
}

/// Install the kernel reference in the lab's LB namespace (addresses and routes are already
/// there).
pub(crate) fn install(lab: &mut LbLab, hash: KernelHash) -> Result<()> {
    let ns = lab.names.ns_lb.clone();
    let rules = render_ruleset(&lab.spec.encaps, &lab.servers, hash);
    let path = lab.path("lb-reference.nft");
    std::fs::write(&path, &rules).with_context(|| format!("write {}", path.display()))?;
    run_ok(&cmd::in_ns(&ns, &["nft", "-f", &path.to_string_lossy()]))
        .with_context(|| format!("the kernel reference's nftables rules:\n{rules}"))?;
    let gre: Vec<(IpAddr, Encap)> = lab
        .spec
        .encaps
        .iter()
        .filter(|e| matches!(e, Encap::Gre4 | Encap::Gre6))
        .flat_map(|&e| e.vips().into_iter().map(move |v| (v, e)))
        .collect();
    if gre.is_empty() {
        return Ok(());
    }
    ip(&ns, &["tuntap", "add", "dev", LB_GRE_DEV, "mode", "tun"])?;
    ip(&ns, &["link", "set", LB_GRE_DEV, "up"])?;
    let routes = gre
        .iter()
        .map(|(v, e)| format!("{v}={}", e.name()))
        .collect::<Vec<_>>()
        .join(",");
    let servers = lab
        .servers
        .iter()
        .map(|s| format!("{}/{}", s.ip4, s.ip6))
        .collect::<Vec<_>>()
        .join(",");
    let weights = lab
        .servers
        .iter()
        .map(|s| s.weight.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let script = write_gre_helper(lab)?;
    let log = lab.path("lb-gre.log");
    let child = Spawned::start(
        &cmd::in_ns(
            &ns,
            &[
                "python3",
                &script.to_string_lossy(),
                "encap",
                "--tun",
                LB_GRE_DEV,
                "--routes",
                &routes,
                "--servers",
                &servers,
                "--weights",
                &weights,
            ],
        ),
        Some(&log),
    )?;
    lab.lb_helper = Some(child);
    wait_for_log(&log, "ready", std::time::Duration::from_secs(10))
        .context("the kernel reference's GRE encapsulator")?;
    for (v, _) in &gre {
        let (fam, p) = match v {
            IpAddr::V4(a) => ("-4", format!("{a}/32")),
            IpAddr::V6(a) => ("-6", format!("{a}/128")),
        };
        ip(&ns, &[fam, "route", "add", &p, "dev", LB_GRE_DEV])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(weights: &[u32]) -> Vec<ServerInfo> {
        ServerInfo::unbuilt(weights)
    }

    #[test]
    fn slots_follow_the_weights() {
        assert_eq!(weighted_slots(&[1, 0, 2]), vec![0, 2, 2]);
        assert!(weighted_slots(&[0]).is_empty());
    }

    #[test]
    fn ruleset_maps_every_slot() {
        let r = render_ruleset(
            &[
                Encap::L3dsr { dscp: 23 },
                Encap::Nat4 { target_port: 8080 },
                Encap::Nat6 { target_port: 8081 },
                Encap::Gre6,
            ],
            &servers(&[1, 2]),
            KernelHash::NumgenInc,
        );
        for want in [
            "ip daddr 198.18.100.1 tcp dport 80 notrack ip dscp set 23 ip daddr set jhash ip saddr \
             . tcp sport mod 3 map { 0 : 198.18.12.11, 1 : 198.18.12.12, 2 : 198.18.12.12 }",
            "ip daddr 198.18.100.4 tcp dport 80 dnat ip to numgen inc mod 3 map { 0 : \
             198.18.12.11 . 8080, 1 : 198.18.12.12 . 8080, 2 : 198.18.12.12 . 8080 }",
            "ip6 daddr 2001:db8:100::4 tcp dport 80 dnat ip6 to numgen inc mod 3 map { 0 : \
             2001:db8:12::11 . 8081,",
            "ip6 daddr 2001:db8:100::3 notrack",
            "ip daddr 198.18.100.3 notrack",
        ] {
            assert!(r.contains(want), "{want}\nnot in\n{r}");
        }
    }
}

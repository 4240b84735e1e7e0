//! Printing `lb` commands and a whole `LbState` back as canonical `lb` lines: what `parse_line`
//! reads back to the same value (`SetHealth`, runtime state with no `lb` line, prints as a
//! `#` comment). Health marks are not configuration: `state_commands` gives configured
//! weights. Owns no state; never fails.

use crate::model::{
    AsState, ConfChange, Encap, LbCommand, LbShow, LbState, SourceAddress, DEFAULT_NEW_LEN,
};
use std::fmt::Write;

fn source(s: &SourceAddress) -> String {
    let host = if s.addr.is_ipv4() { 32 } else { 128 };
    if s.len == host {
        s.addr.to_string()
    } else {
        format!("{}/{}", s.addr, s.len)
    }
}

fn conf(c: &ConfChange) -> String {
    let mut o = String::from("lb conf");
    if let Some(a) = &c.ip4_src {
        let _ = write!(o, " ip4-src-address {}", source(a));
    }
    if let Some(a) = &c.ip6_src {
        let _ = write!(o, " ip6-src-address {}", source(a));
    }
    if let Some(b) = c.buckets {
        let _ = write!(o, " buckets {b}");
    }
    match (c.tcp_timeout, c.udp_timeout, c.other_timeout) {
        (Some(a), Some(b), Some(c)) if a == b && b == c => {
            let _ = write!(o, " timeout {a}");
        }
        (t, u, x) => {
            for (name, v) in [("tcp", t), ("udp", u), ("other", x)] {
                if let Some(v) = v {
                    let _ = write!(o, " timeout {name} {v}");
                }
            }
        }
    }
    o
}

/// One command as its canonical line.
pub fn format_command(cmd: &LbCommand) -> String {
    match cmd {
        LbCommand::Conf(c) => conf(c),
        LbCommand::AddVip(s) => {
            let mut o = format!("lb vip {} encap {}", s.key, s.encap.name());
            match s.encap {
                Encap::L3dsr { dscp } => {
                    let _ = write!(o, " dscp {dscp}");
                }
                Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => match s.node_port {
                    None => {
                        let _ = write!(o, " type clusterip target_port {target_port}");
                    }
                    Some(np) => {
                        let _ =
                            write!(o, " type nodeport target_port {target_port} node_port {np}");
                    }
                },
                Encap::Gre4 | Encap::Gre6 => {}
            }
            if s.new_len != DEFAULT_NEW_LEN {
                let _ = write!(o, " new_len {}", s.new_len);
            }
            if s.src_ip_sticky {
                o.push_str(" src_ip_sticky");
            }
            o
        }
        LbCommand::DelVip(k) => format!("lb vip {k} del"),
        LbCommand::AddAs {
            vip,
            servers,
            flush,
        } => {
            // One line per weight (a line's `weight` is every address's, as in VPP).
            let mut lines: Vec<String> = Vec::new();
            let mut weights: Vec<Option<u32>> = servers.iter().map(|s| s.weight).collect();
            weights.dedup();
            weights.sort();
            weights.dedup();
            for w in weights {
                let mut o = format!("lb as {vip}");
                for s in servers.iter().filter(|s| s.weight == w) {
                    let _ = write!(o, " {}", s.addr);
                }
                if let Some(w) = w {
                    let _ = write!(o, " weight {w}");
                }
                if *flush {
                    o.push_str(" flush");
                }
                lines.push(o);
            }
            lines.join("\n")
        }
        LbCommand::DelAs {
            vip,
            servers,
            flush,
        } => {
            let mut o = format!("lb as {vip}");
            for a in servers {
                let _ = write!(o, " {a}");
            }
            o.push_str(if *flush { " del flush" } else { " del" });
            o
        }
        LbCommand::FlushVip(k) => format!("lb flush vip {k}"),
        LbCommand::NatInterface { nat6, ports, del } => {
            let mut o = format!("lb set interface {}", if *nat6 { "nat6" } else { "nat4" });
            for p in ports {
                let _ = write!(o, " in {p}");
            }
            if *del {
                o.push_str(" del");
            }
            o
        }
        LbCommand::SetHealth {
            vip,
            servers,
            down,
            flush,
        } => {
            // Runtime state with no `lb` line: a comment (`parse_lines` skips it).
            let mut o = format!("# health: lb as {vip}");
            for a in servers {
                let _ = write!(o, " {a}");
            }
            o.push_str(match (*down, *flush) {
                (true, true) => " marked down (flush)",
                (true, false) => " marked down",
                (false, _) => " marked up",
            });
            o
        }
        LbCommand::SetMemoryBudget(b) => format!(
            "# memory-limit {} for {} workers (set by the config's [lb] memory-limit)",
            b.limit, b.workers
        ),
        LbCommand::Show(LbShow::Summary) => "show lb".into(),
        LbCommand::Show(LbShow::Vips { verbose }) => {
            if *verbose {
                "show lb vips verbose".into()
            } else {
                "show lb vips".into()
            }
        }
    }
}

/// The `lb conf` command that sets every setting of `state`'s conf.
pub fn conf_command(state: &LbState) -> LbCommand {
    let c = state.conf();
    LbCommand::Conf(ConfChange {
        ip4_src: c.ip4_src,
        ip6_src: c.ip6_src,
        buckets: Some(c.buckets),
        tcp_timeout: Some(c.timeouts.tcp),
        udp_timeout: Some(c.timeouts.udp),
        other_timeout: Some(c.timeouts.other),
    })
}

/// The commands that rebuild `state` from an empty one (same VIPs, servers and weights; ids,
/// generations and removed servers are not part of it), in a stable order: conf, VIPs with
/// their servers (by key, servers by address), NAT inside ports.
pub fn state_commands(state: &LbState) -> Vec<LbCommand> {
    let mut out = vec![conf_command(state)];
    for v in state.vips() {
        out.push(LbCommand::AddVip(v.spec));
        let servers: Vec<_> = v
            .servers
            .iter()
            .filter_map(|(addr, slot)| {
                let info = state.slot(*slot);
                (info.state != AsState::Removed).then_some(crate::model::AsSpec {
                    addr: *addr,
                    weight: Some(info.weight),
                })
            })
            .collect();
        // One command per weight, in the order of each weight's first server.
        let mut weights: Vec<Option<u32>> = Vec::new();
        for s in &servers {
            if !weights.contains(&s.weight) {
                weights.push(s.weight);
            }
        }
        for w in weights {
            out.push(LbCommand::AddAs {
                vip: v.spec.key,
                servers: servers.iter().filter(|s| s.weight == w).copied().collect(),
                flush: false,
            });
        }
    }
    for nat6 in [false, true] {
        let ports: Vec<String> = state.nat_inside(nat6).iter().cloned().collect();
        if !ports.is_empty() {
            out.push(LbCommand::NatInterface {
                nat6,
                ports,
                del: false,
            });
        }
    }
    out
}

/// `state` as `lb` lines (the running configuration), one per line.
pub fn format_state(state: &LbState) -> String {
    let mut o = String::new();
    for c in state_commands(state) {
        o.push_str(&format_command(&c));
        o.push('\n');
    }
    o
}

//! `show lb`, `show lb vips [verbose]` and `lb which` of the command language: text for people
//! and JSON from the published LB tables and the summed counters. `lb which` says which VIP a
//! 5-tuple matches (and by which rule), and which server Maglev gives a new flow of it. It only
//! reads; it never changes the LB.

use crate::commands::CommandError;
use crate::lb_api::{overview, state_name};
use dataplane::lb::{LbControl, VipTotals};
use lb::model::{Encap, LbShow, VipProtocol};
use lb::tuple::{stable_hash, FiveTuple};
use serde_json::{json, Value};
use std::fmt::Write;
use std::net::IpAddr;

/// Text and JSON of `show lb ...`.
pub fn show(lb: &LbControl, what: LbShow) -> (String, Value) {
    let data = overview(lb);
    let mut o = match what {
        LbShow::Summary => lb.with_tables(|t| lb::cli::format_show(t, LbShow::Summary)),
        LbShow::Vips { .. } => String::new(),
    };
    if let LbShow::Summary = what {
        let n = &data["node"];
        let _ = writeln!(
            o,
            "node: no-vip-for-port {} malformed {} nat-replies {} nat-reply-misses {} \
             gre-fragmented {} gre-fragments {}",
            n["no_vip_for_port"],
            n["malformed"],
            n["nat_replies"],
            n["nat_reply_misses"],
            n["gre_fragmented"],
            n["gre_fragments"]
        );
        let entries = data["flow_table_entries_per_worker"].as_u64().unwrap_or(0);
        if entries == 0 {
            let _ = writeln!(
                o,
                "flow table per worker: none yet (allocated with the first VIP, as lb conf \
                 buckets says then)"
            );
        } else {
            let _ = writeln!(
                o,
                "flow table per worker: {entries} entries (lb conf buckets took effect when \
                 the first VIP came)"
            );
        }
        let m = &data["memory"];
        let bytes = |k: &str| lb::model::show_bytes(m[k].as_u64().unwrap_or(0));
        let _ = writeln!(
            o,
            "memory: {} of {} ([lb] memory-limit): Maglev tables {} for {} VIPs, flow tables {} \
             x {} workers",
            bytes("used_bytes"),
            bytes("limit_bytes"),
            bytes("maglev_bytes"),
            m["vips"],
            bytes("flow_bytes_per_worker"),
            m["workers"]
        );
        for (family, key) in [("nat4", "nat4_inside"), ("nat6", "nat6_inside")] {
            let ports: Vec<&str> = data[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let _ = if ports.is_empty() {
                writeln!(
                    o,
                    "{family} replies: translated on every port (no inside port set)"
                )
            } else {
                writeln!(
                    o,
                    "{family} replies: translated on inside ports {}",
                    ports.join(", ")
                )
            };
        }
        return (o, data);
    }
    let verbose = matches!(what, LbShow::Vips { verbose: true });
    let empty = Vec::new();
    let vips = data["vips"].as_array().unwrap_or(&empty);
    if vips.is_empty() {
        o.push_str("no VIP\n");
    }
    for v in vips {
        let _ = write!(
            o,
            "[{}] {} encap {}",
            v["id"],
            str_of(&v["vip"]),
            str_of(&v["encap"])
        );
        if !v["dscp"].is_null() {
            let _ = write!(o, " dscp {}", v["dscp"]);
        }
        if !v["target_port"].is_null() {
            let _ = write!(o, " target_port {}", v["target_port"]);
        }
        if v["src_ip_sticky"] == true {
            o.push_str(" src_ip_sticky");
        }
        let servers = v["servers"].as_array().unwrap_or(&empty);
        let _ = writeln!(
            o,
            "\n  maglev {} entries (new_len {}), {} active of {} servers",
            v["maglev_size"],
            v["new_len"],
            v["active_servers"],
            servers.len()
        );
        for w in v["warnings"].as_array().unwrap_or(&empty) {
            let _ = writeln!(o, "  warning: {}", str_of(w));
        }
        let c = &v["counters"];
        o.push(' ');
        for name in VipTotals::NAMES {
            let _ = write!(o, " {} {}", name.replace('_', "-"), c[name]);
        }
        o.push('\n');
        if !verbose {
            continue;
        }
        for s in servers {
            let c = &s["counters"];
            let _ = writeln!(
                o,
                "    {} slot {} gen {} weight {}{} {} entries {} ({:.2}%) packets {} bytes {} \
                 new-flows {} live-flows {}",
                str_of(&s["address"]),
                s["slot"],
                s["gen"],
                s["weight"],
                if s["health"] == "down" {
                    " (down: health)"
                } else {
                    ""
                },
                str_of(&s["state"]),
                s["maglev_entries"],
                s["share_percent"].as_f64().unwrap_or(0.0),
                c["packets"],
                c["bytes"],
                c["new_flows"],
                c["live_flows"]
            );
        }
    }
    (o, data)
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

const WHICH_USAGE: &str = "accepted: lb which tcp|udp|icmp|icmp6|PROTOCOL-NUMBER SRC-ADDRESS \
                           SRC-PORT DST-ADDRESS DST-PORT (ports 0 for ICMP), e.g. `lb which tcp \
                           198.19.0.7 40000 198.18.1.1 80`";

/// The words after `lb which`, checked: (protocol, src, sport, dst, dport).
pub fn parse_which(words: &[&str]) -> Result<FiveTuple, CommandError> {
    let [proto, src, sport, dst, dport] = words else {
        return Err(CommandError(format!(
            "`lb which` needs 5 words, got {}; {WHICH_USAGE}",
            words.len()
        )));
    };
    let protocol = match *proto {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "icmp6" | "ipv6-icmp" => 58,
        n => n
            .parse::<u8>()
            .map_err(|_| CommandError(format!("`{n}` is not a protocol; {WHICH_USAGE}")))?,
    };
    let addr = |s: &str| {
        s.parse::<IpAddr>()
            .map_err(|_| CommandError(format!("`{s}` is not an address; {WHICH_USAGE}")))
    };
    let port = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| CommandError(format!("`{s}` is not a port (0..=65535); {WHICH_USAGE}")))
    };
    let (s, d) = (addr(src)?, addr(dst)?);
    if s.is_ipv4() != d.is_ipv4() {
        return Err(CommandError(format!(
            "`{src}` and `{dst}` are of different families; {WHICH_USAGE}"
        )));
    }
    Ok(FiveTuple::new(s, d, protocol, port(sport)?, port(dport)?))
}

/// Which VIP and which server a new flow with tuple `t` gets, and why.
pub fn which(lb: &LbControl, t: &FiveTuple) -> (String, Value) {
    lb.with_tables(|tables| {
        let flow = format!(
            "{} {}:{} -> {}:{}",
            t.protocol,
            t.src_addr(),
            t.src_port,
            t.dst_addr(),
            t.dst_port
        );
        let Some(id) = tables.vip_for(t) else {
            let (reason, why) = if tables.is_vip_address(t) {
                (
                    "no_vip_for_port",
                    "the destination is a VIP address, but no VIP of it takes this protocol \
                     and port: the packet is dropped (counted as no-vip-for-port)",
                )
            } else {
                (
                    "not_a_vip",
                    "the destination is not inside any VIP prefix: the LB leaves the packet \
                     to routing",
                )
            };
            return (
                format!("{flow}: {why}\n"),
                json!({"flow": flow, "vip": null, "server": null, "reason": reason, "why": why}),
            );
        };
        let Some(v) = tables.vip(id) else {
            return (
                format!("{flow}: VIP {} vanished\n", id.0),
                json!({"flow": flow}),
            );
        };
        let rule = match (v.key.protocol, v.key.port) {
            (VipProtocol::Any, _) => "any protocol, all ports",
            (_, 0) => "this protocol, all ports",
            _ => "exact protocol and port",
        };
        let vip_why = format!(
            "VIP [{}] {} (longest prefix holding the destination; within it, {rule})",
            id.0, v.key
        );
        let hash = stable_hash(t, v.src_ip_sticky);
        let size = v.maglev_size.max(1) as u64;
        let entry = (hash as u64 * size) >> 32;
        let hashed = if v.src_ip_sticky {
            "addresses and protocol (src_ip_sticky)"
        } else {
            "the 5-tuple"
        };
        match tables.choose(id, hash) {
            None => {
                let why = "the VIP has no server with weight > 0: a new flow is dropped \
                           (counted as no-server)";
                (
                    format!("{flow}: {vip_why}; {why}\n"),
                    json!({"flow": flow, "vip": v.key.to_string(), "vip_id": id.0,
                           "server": null, "reason": "no_server", "why": why}),
                )
            }
            Some(slot) => {
                let a = tables.as_entry(slot);
                let encap = match v.encap {
                    Encap::L3dsr { dscp } => format!("l3dsr dscp {dscp}"),
                    Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => {
                        format!("{} to port {target_port}", v.encap.name())
                    }
                    e => e.name().to_string(),
                };
                let why = format!(
                    "the unkeyed hash of {hashed} is {hash:#010x}, which picks Maglev entry \
                     {entry} of {size}; it holds server {} (slot {}, gen {}, weight {}, {}), \
                     sent by {encap}. A flow already in a worker's flow table keeps its server \
                     while that server is not flushed or freed (drained and removed servers \
                     keep their flows)",
                    a.addr,
                    slot.0,
                    a.gen,
                    a.weight,
                    state_name(a.state)
                );
                (
                    format!("{flow}: {vip_why}; {why}\n"),
                    json!({"flow": flow, "vip": v.key.to_string(), "vip_id": id.0,
                           "server": a.addr.to_string(), "slot": slot.0, "gen": a.gen,
                           "hash": hash, "maglev_entry": entry, "maglev_size": size,
                           "encap": v.encap.name(), "reason": "maglev", "why": why}),
                )
            }
        }
    })
}

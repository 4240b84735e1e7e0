//! The parser of the `lb` language: one line of words into one `LbCommand`, keywords in any
//! order after the VIP prefix (as VPP's unformat loops), each at most once. Never panics; every
//! refusal names the token. Owns no state: checks needing the configuration are `LbState`'s.

use super::error::CliError;
use crate::model::{
    check_vip_spec, AsSpec, ConfChange, Encap, LbCommand, LbErrorKind, LbShow, Prefix,
    SourceAddress, VipKey, VipProtocol, VipSpec, DEFAULT_NEW_LEN, MAX_BUCKETS, MAX_BUCKETS_LOG2,
    MAX_NEW_LEN, MAX_TIMEOUT, MAX_WEIGHT,
};
use std::net::IpAddr;

const COMMANDS: &str = "`lb vip`, `lb as`, `lb conf`, `lb flush vip`, \
    `lb set interface nat4|nat6`, `show lb`, `show lb vips [verbose]`";
const VIP_WORDS: &str = "protocol tcp|udp, port <n>, encap gre4|gre6|l3dsr|nat4|nat6, dscp <n>, \
    type clusterip|nodeport, target_port <n>, node_port <n>, new_len <n>, src_ip_sticky, del";
const AS_WORDS: &str =
    "protocol tcp|udp, port <n>, server addresses, weight <0-100> (for all of them), del, flush";
const CONF_WORDS: &str = "ip4-src-address <addr>[/<len>], ip6-src-address <addr>[/<len>], \
    buckets <n>, buckets-log2 <n>, timeout [tcp|udp|other] <seconds>";
const PREFIX: &str = "an IPv4 or IPv6 prefix such as 198.18.1.1/32 or 2001:db8:1::1/128";

/// A cursor over a line's words.
struct Words<'a> {
    w: Vec<&'a str>,
    i: usize,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let t = self.w.get(self.i).copied();
        self.i += t.is_some() as usize;
        t
    }

    fn peek(&self) -> Option<&'a str> {
        self.w.get(self.i).copied()
    }

    /// The value after keyword `kw`.
    fn value(&mut self, kw: &str, accepted: &'static str) -> Result<&'a str, CliError> {
        self.next().ok_or_else(|| CliError::MissingValue {
            token: kw.to_string(),
            accepted,
        })
    }

    fn number(
        &mut self,
        kw: &'static str,
        min: u64,
        max: u64,
        accepted: &'static str,
    ) -> Result<u64, CliError> {
        let t = self.value(kw, accepted)?;
        match t.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) && t.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(CliError::value(kw, t, accepted)),
        }
    }
}

/// Sets `slot` once; a second time is a `Duplicate` error naming `kw`.
fn once<T>(slot: &mut Option<T>, kw: &str, v: T) -> Result<(), CliError> {
    if slot.is_some() {
        return Err(CliError::Duplicate {
            token: kw.to_string(),
        });
    }
    *slot = Some(v);
    Ok(())
}

/// One `lb`/`show lb` line (no comment, not empty) into a command.
pub fn parse_line(line: &str) -> Result<LbCommand, CliError> {
    let mut w = Words {
        w: line.split_whitespace().collect(),
        i: 0,
    };
    let first = w.next().unwrap_or("");
    let second = w.next();
    match (first, second) {
        ("lb", Some("vip")) => parse_vip(&mut w),
        ("lb", Some("as")) => parse_as(&mut w),
        ("lb", Some("conf")) => parse_conf(&mut w),
        ("lb", Some("flush")) => match w.next() {
            Some("vip") => {
                let key = parse_key(&mut w, "lb flush vip", "protocol tcp|udp, port <n>", |_| {
                    Ok(false)
                })?;
                Ok(LbCommand::FlushVip(key))
            }
            t => Err(unknown(t, "lb flush", "vip")),
        },
        ("lb", Some("set")) => parse_set(&mut w),
        ("lb", t) => Err(unknown(t, "lb", "vip, as, conf, flush vip, set interface")),
        ("show", Some("lb")) => match w.next() {
            None => Ok(LbCommand::Show(LbShow::Summary)),
            Some("vips") => match w.next() {
                None => Ok(LbCommand::Show(LbShow::Vips { verbose: false })),
                Some("verbose") => match w.next() {
                    None => Ok(LbCommand::Show(LbShow::Vips { verbose: true })),
                    t => Err(unknown(t, "show lb vips verbose", "nothing more")),
                },
                t => Err(unknown(t, "show lb vips", "verbose")),
            },
            t => Err(unknown(t, "show lb", "vips")),
        },
        ("show", t) => Err(unknown(t, "show", "lb")),
        _ => Err(CliError::Unknown {
            token: first.to_string(),
            command: "lb line",
            accepted: COMMANDS,
        }),
    }
}

fn unknown(t: Option<&str>, command: &'static str, accepted: &'static str) -> CliError {
    CliError::Unknown {
        token: t.unwrap_or("<end of line>").to_string(),
        command,
        accepted,
    }
}

/// `<addr>[/<len>]`, canonical (host bits zero): with `normalise`, host bits are cleared (as
/// VPP does to a VIP prefix), else refused.
fn parse_prefix(t: &str, field: &'static str, normalise: bool) -> Result<Prefix, CliError> {
    let (a, len) = match t.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (t, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| CliError::value(field, t, PREFIX))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max && l.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => {
                return Err(CliError::value(
                    field,
                    t,
                    format!("a prefix length 0..={max} after the `/`"),
                ))
            }
        },
    };
    let addr = if normalise {
        crate::model::mask_addr(addr, len)
    } else {
        addr
    };
    Prefix::new(addr, len).ok_or_else(|| {
        let canon = crate::model::mask_addr(addr, len);
        CliError::invalid(
            t,
            format!("host bits are set; the prefix is {canon}/{len} (write it so)"),
        )
    })
}

/// The VIP prefix and the `protocol`/`port` words (anywhere on the line); `other` handles the
/// remaining words (returns false for an unknown one).
fn parse_key<'a>(
    w: &mut Words<'a>,
    command: &'static str,
    accepted: &'static str,
    mut other: impl FnMut(&mut Words<'a>) -> Result<bool, CliError>,
) -> Result<VipKey, CliError> {
    let p = w.next().ok_or_else(|| CliError::MissingValue {
        token: command.to_string(),
        accepted: PREFIX,
    })?;
    let prefix = parse_prefix(p, "VIP prefix", true)?;
    let mut protocol: Option<VipProtocol> = None;
    let mut port: Option<(u16, &str)> = None;
    while let Some(t) = w.peek() {
        match t {
            "protocol" => {
                w.next();
                let v = w.value(t, "tcp or udp")?;
                let pr = match v {
                    "tcp" => VipProtocol::Tcp,
                    "udp" => VipProtocol::Udp,
                    _ => return Err(CliError::value("protocol", v, "tcp or udp")),
                };
                once(&mut protocol, t, pr)?;
            }
            "port" => {
                w.next();
                let n = w.number("port", 0, 65535, "a port 0..65535 (0: all ports)")?;
                once(&mut port, t, (n as u16, t))?;
            }
            _ => {
                if !other(w)? {
                    return Err(CliError::Unknown {
                        token: t.to_string(),
                        command,
                        accepted,
                    });
                }
            }
        }
    }
    let port = port.map_or(0, |p| p.0);
    let protocol = protocol.unwrap_or(VipProtocol::Any);
    if port != 0 && protocol == VipProtocol::Any {
        return Err(CliError::invalid(
            "port",
            "a port needs `protocol tcp` or `protocol udp` on the same line",
        ));
    }
    // As VPP: without a port the VIP takes every protocol and port, whatever `protocol` said.
    Ok(VipKey {
        prefix,
        protocol,
        port,
    }
    .canonical())
}

fn parse_vip(w: &mut Words<'_>) -> Result<LbCommand, CliError> {
    let mut encap: Option<&str> = None;
    let mut dscp: Option<u8> = None;
    let mut srv_type: Option<&str> = None;
    let mut target_port: Option<u16> = None;
    let mut node_port: Option<u16> = None;
    let mut new_len: Option<u32> = None;
    let mut sticky: Option<()> = None;
    let mut del: Option<()> = None;
    let key = parse_key(w, "lb vip", VIP_WORDS, |w| {
        let Some(t) = w.next() else {
            return Ok(false);
        };
        match t {
            "encap" => {
                let acc = "gre4, gre6, l3dsr, nat4 or nat6";
                let v = w.value(t, acc)?;
                if !matches!(v, "gre4" | "gre6" | "l3dsr" | "nat4" | "nat6") {
                    return Err(CliError::value("encap", v, acc));
                }
                once(&mut encap, t, v)?;
            }
            "dscp" => {
                let n = w.number("dscp", 0, 63, "a DSCP 0..63")?;
                once(&mut dscp, t, n as u8)?;
            }
            "type" => {
                let v = w.value(t, "clusterip or nodeport")?;
                match v {
                    "clusterip" | "nodeport" => once(&mut srv_type, t, v)?,
                    _ => return Err(CliError::value("type", v, "clusterip or nodeport")),
                }
            }
            "target_port" => {
                let n = w.number("target_port", 1, 65535, "a port 1..65535")?;
                once(&mut target_port, t, n as u16)?;
            }
            "node_port" => {
                let n = w.number("node_port", 1, 65535, "a port 1..65535")?;
                once(&mut node_port, t, n as u16)?;
            }
            "new_len" => {
                let n = w.number("new_len", 1, MAX_NEW_LEN as u64, "a table size 1..4194304")?;
                once(&mut new_len, t, n as u32)?;
            }
            "src_ip_sticky" => once(&mut sticky, t, ())?,
            "del" => once(&mut del, t, ())?,
            _ => {
                w.i -= 1;
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if del.is_some() {
        // As VPP: the other settings on a `del` line are ignored.
        return Ok(LbCommand::DelVip(key));
    }
    let nat = matches!(encap, Some("nat4" | "nat6"));
    if dscp.is_some() && encap != Some("l3dsr") {
        return Err(CliError::invalid("dscp", "only with `encap l3dsr`"));
    }
    if (target_port.is_some() || srv_type.is_some() || node_port.is_some()) && !nat {
        let t = if target_port.is_some() {
            "target_port"
        } else if node_port.is_some() {
            "node_port"
        } else {
            "type"
        };
        return Err(CliError::invalid(
            t,
            "only with `encap nat4` or `encap nat6`",
        ));
    }
    let encap = match encap.unwrap_or("gre4") {
        "gre4" => Encap::Gre4,
        "gre6" => Encap::Gre6,
        "l3dsr" => Encap::L3dsr {
            dscp: dscp
                .ok_or_else(|| CliError::invalid("l3dsr", "encap l3dsr needs `dscp <0..63>`"))?,
        },
        e => {
            let tp = target_port.ok_or_else(|| {
                CliError::invalid(e, "NAT needs `target_port <1..65535>` (the servers' port)")
            })?;
            if e == "nat4" {
                Encap::Nat4 { target_port: tp }
            } else {
                Encap::Nat6 { target_port: tp }
            }
        }
    };
    // `node_port` names the node port (VPP's API and plugin docs); without it a nodeport VIP
    // takes the VIP's port on the node's address, as VPP's CLI registers it. `node_port` alone
    // means `type nodeport`.
    let node_port = match srv_type {
        Some("clusterip") if node_port.is_some() => {
            return Err(CliError::invalid(
                "node_port",
                "only with `type nodeport` (or without `type`)",
            ))
        }
        Some("nodeport") => Some(node_port.unwrap_or(key.port)),
        _ => node_port,
    };
    let spec = VipSpec {
        key,
        encap,
        new_len: new_len.unwrap_or(DEFAULT_NEW_LEN),
        src_ip_sticky: sticky.is_some(),
        node_port,
    };
    // The model's own rules (l3dsr on IPv6 or on a prefix, NAT without a port, NAT46, ...).
    check_vip_spec(&spec).map_err(|e| match e {
        LbErrorKind::BadVip { reason, .. } => CliError::invalid(encap.name(), reason),
        other => CliError::invalid(encap.name(), other.to_string()),
    })?;
    Ok(LbCommand::AddVip(spec))
}

fn parse_as(w: &mut Words<'_>) -> Result<LbCommand, CliError> {
    let mut servers: Vec<AsSpec> = Vec::new();
    let mut del: Option<()> = None;
    let mut flush: Option<()> = None;
    let mut weight: Option<u32> = None;
    let key = parse_key(w, "lb as", AS_WORDS, |w| {
        let Some(t) = w.next() else {
            return Ok(false);
        };
        match t {
            "del" => once(&mut del, t, ())?,
            "flush" => once(&mut flush, t, ())?,
            "weight" => {
                let n = w.number(
                    "weight",
                    0,
                    MAX_WEIGHT as u64,
                    "a weight 0..100 (VPP's range; it applies to every address on the line)",
                )?;
                once(&mut weight, t, n as u32)?;
            }
            _ => match t.parse::<IpAddr>() {
                Ok(addr) => {
                    if servers.iter().any(|s| s.addr == addr) {
                        return Err(CliError::Duplicate { token: t.into() });
                    }
                    servers.push(AsSpec { addr, weight: None });
                }
                Err(_) => {
                    w.i -= 1;
                    return Ok(false);
                }
            },
        }
        Ok(true)
    })?;
    if servers.is_empty() {
        return Err(CliError::MissingValue {
            token: "lb as".into(),
            accepted: "at least one server address after the VIP",
        });
    }
    if del.is_some() {
        if weight.is_some() {
            return Err(CliError::invalid(
                "weight",
                "`weight` and `del` do not go together (as in VPP)",
            ));
        }
        return Ok(LbCommand::DelAs {
            vip: key,
            servers: servers.into_iter().map(|s| s.addr).collect(),
            flush: flush.is_some(),
        });
    }
    // As VPP: one weight for every address of the line.
    for s in &mut servers {
        s.weight = weight;
    }
    Ok(LbCommand::AddAs {
        vip: key,
        servers,
        flush: flush.is_some(),
    })
}

fn parse_source(w: &mut Words<'_>, kw: &'static str, v6: bool) -> Result<SourceAddress, CliError> {
    let acc = if v6 {
        "an IPv6 address, or a prefix to spread sources over (2001:db8::/64)"
    } else {
        "an IPv4 address, or a prefix to spread sources over (198.18.0.0/24)"
    };
    let t = w.value(kw, acc)?;
    let p = parse_prefix(t, kw, false).map_err(|_| CliError::value(kw, t, acc))?;
    if p.is_ipv6() != v6 || p.prefix_len() == 0 {
        return Err(CliError::value(kw, t, acc));
    }
    Ok(SourceAddress {
        addr: p.addr(),
        len: p.prefix_len(),
    })
}

fn parse_conf(w: &mut Words<'_>) -> Result<LbCommand, CliError> {
    let mut c = ConfChange::default();
    let secs = "seconds 1..86400";
    if w.peek().is_none() {
        return Err(CliError::MissingValue {
            token: "lb conf".into(),
            accepted: CONF_WORDS,
        });
    }
    while let Some(t) = w.next() {
        match t {
            "ip4-src-address" => {
                let a = parse_source(w, "ip4-src-address", false)?;
                once(&mut c.ip4_src, t, a)?;
            }
            "ip6-src-address" => {
                let a = parse_source(w, "ip6-src-address", true)?;
                once(&mut c.ip6_src, t, a)?;
            }
            "buckets" => {
                let n = w.number("buckets", 1, MAX_BUCKETS as u64, "entries 1..33554432")?;
                once(&mut c.buckets, t, n as u32)?;
            }
            "buckets-log2" => {
                let n = w.number(
                    "buckets-log2",
                    0,
                    u64::from(MAX_BUCKETS_LOG2),
                    "a power of two exponent 0..25",
                )?;
                once(&mut c.buckets, t, 1u32 << n)?;
            }
            "timeout" => {
                let which = match w.peek() {
                    Some(p @ ("tcp" | "udp" | "other")) => {
                        w.next();
                        Some(p)
                    }
                    _ => None,
                };
                let n = w.number("timeout", 1, MAX_TIMEOUT as u64, secs)? as u32;
                let kw = which.unwrap_or("timeout");
                match which {
                    Some("tcp") => once(&mut c.tcp_timeout, kw, n)?,
                    Some("udp") => once(&mut c.udp_timeout, kw, n)?,
                    Some(_) => once(&mut c.other_timeout, kw, n)?,
                    None => {
                        once(&mut c.tcp_timeout, kw, n)?;
                        once(&mut c.udp_timeout, kw, n)?;
                        once(&mut c.other_timeout, kw, n)?;
                    }
                }
            }
            _ => {
                return Err(CliError::Unknown {
                    token: t.to_string(),
                    command: "lb conf",
                    accepted: CONF_WORDS,
                })
            }
        }
    }
    Ok(LbCommand::Conf(c))
}

fn parse_set(w: &mut Words<'_>) -> Result<LbCommand, CliError> {
    match w.next() {
        Some("interface") => {}
        t => return Err(unknown(t, "lb set", "interface")),
    }
    let nat6 = match w.next() {
        Some("nat4") => false,
        Some("nat6") => true,
        t => return Err(unknown(t, "lb set interface", "nat4, nat6")),
    };
    let mut ports: Vec<String> = Vec::new();
    let mut del: Option<()> = None;
    while let Some(t) = w.next() {
        match t {
            "in" => {
                let p = w.value(t, "a port name")?;
                if ports.iter().any(|q| q == p) {
                    return Err(CliError::Duplicate { token: p.into() });
                }
                ports.push(p.to_string());
            }
            "del" => once(&mut del, t, ())?,
            _ => {
                return Err(CliError::Unknown {
                    token: t.to_string(),
                    command: "lb set interface",
                    accepted: "in <port>, del",
                })
            }
        }
    }
    if ports.is_empty() {
        return Err(CliError::MissingValue {
            token: "lb set interface".into(),
            accepted: "in <port>",
        });
    }
    Ok(LbCommand::NatInterface {
        nat6,
        ports,
        del: del.is_some(),
    })
}

//! `[[port]]` sections: names, MACs, MTUs, own addresses, memory generators, kernel interface
//! names, and which driver (each driver's own keys are parsed in `drivers`). Kernel resources
//! are only named here, never opened.

use super::ctx::{Ctx, Field, Fields};
use super::drivers::{Drv, DRIVERS_ACCEPTED};
use super::util::{parse_prefix, valid_name};
use super::validation::{own_address_problem, repeated_address, SeenAddrs};
use super::{FileRef, MAC_ACCEPTED, NAME_ACCEPTED};
use dataplane::{DataplaneSpec, MemoryPortSpec, PortDriver, PortSpec};
use packet::headers::Mac;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// Kernel resources claimed by ports so far: interface name / fanout group -> (line, port).
#[derive(Default)]
pub(super) struct SeenKernel {
    pub(super) interfaces: HashMap<String, (usize, String)>,
    pub(super) fanouts: HashMap<u16, (usize, String)>,
    /// vhost-user sockets: (line, port) of the port that has each.
    pub(super) sockets: HashMap<std::path::PathBuf, (usize, String)>,
}

pub(super) const PORT_KEYS: &[&str] = &[
    "name",
    "driver",
    "mac",
    "mtu",
    "ip4",
    "ip6",
    "rx",
    "tx",
    "frame-size",
    "flows",
    "src-mac",
    "dst-mac",
    "vlan",
    "src-ip",
    "destinations",
    "limit",
    "generate",
    "interface",
    "fanout",
    "vnet-hdr",
    "offloads",
    "queues",
    "xdp-mode",
    "bridge",
    "access-vlan",
    "trunk-vlans",
    "native-vlan",
    "ofport",
    "emc",
    "megaflow",
    "local",
    "remote",
    "vni",
    "dst-port",
    "udp-checksum",
    "socket",
    "socket-mode",
    "socket-permissions",
    "socket-group",
    "features",
];
pub(super) const IFNAME_ACCEPTED: &str =
    "a kernel interface name of 1 to 15 bytes without '/', ':' or \
                               whitespace, not \".\" or \"..\"";
/// Default source MAC of generated frames (locally administered, unicast).
pub const DEFAULT_SRC_MAC: Mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0xaa];
/// Default frame size of memory ports.
pub const DEFAULT_FRAME_SIZE: usize = 64;
/// Default flow count of memory ports.
pub const DEFAULT_FLOWS: u32 = 1024;

impl Ctx<'_> {
    /// One `[[port]]`: its name (if valid, so references resolve even when the port has other
    /// errors), the port if fully valid, and its pcap file references.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn port(
        &mut self,
        f: &Fields<'_>,
        spec: &DataplaneSpec,
        base_dir: &Path,
        seen_names: &mut HashMap<String, (usize, usize)>,
        seen_ips: &mut SeenAddrs,
        seen_tx: &mut HashMap<PathBuf, (usize, String)>,
        seen_kernel: &mut SeenKernel,
    ) -> (Option<String>, Option<PortSpec>, Vec<FileRef>) {
        let section = f.section.clone();
        let errors_before = self.issues.len();
        let mut refs = Vec::new();

        let name = match self.string(f, "name") {
            Field::Ok(s, span) => {
                if valid_name(s) {
                    let line = self.line_of(span.start);
                    if let Some((first, idx)) = seen_names.get(s) {
                        let msg = format!(
                            "duplicate port name `{s}`: also the name of [[port]] #{} at line \
                             {first}; accepted: a name used by one port only",
                            idx + 1
                        );
                        self.error(&span, &section, Some("name"), msg);
                    } else {
                        let idx = seen_names.len();
                        seen_names.insert(s.to_string(), (line, idx));
                    }
                    Some(s.to_string())
                } else {
                    self.error(
                        &span,
                        &section,
                        Some("name"),
                        format!("`{s}` is not a valid port name; accepted: {NAME_ACCEPTED}"),
                    );
                    None
                }
            }
            Field::Missing => {
                self.missing(f, "name", NAME_ACCEPTED);
                None
            }
            Field::Bad => None,
        };
        let label = name.clone().unwrap_or_else(|| section.clone());

        let driver = match self.string(f, "driver") {
            Field::Ok(s, span) => {
                let d = Drv::ALL.into_iter().find(|d| d.name() == s);
                if d.is_none() {
                    self.error(
                        &span,
                        &section,
                        Some("driver"),
                        format!("`{s}` is not a driver; accepted: {DRIVERS_ACCEPTED}"),
                    );
                }
                d
            }
            Field::Missing => {
                self.missing(f, "driver", DRIVERS_ACCEPTED);
                None
            }
            Field::Bad => None,
        };

        let mac = match self.mac(f, "mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => {
                self.missing(f, "mac", &format!("a unicast MAC, {MAC_ACCEPTED}"));
                None
            }
            Field::Bad => None,
        };
        let mtu = match self.int(f, "mtu", 68..=9000) {
            Field::Ok(v, _) => Some(v as u16),
            Field::Missing if driver == Some(Drv::Vxlan) => Some(super::vxlan::DEFAULT_MTU as u16),
            Field::Missing => Some(1500),
            Field::Bad => None,
        };

        let ip4 = self.own_addresses(f, "ip4", false, &label, seen_ips);
        let ip6 = self.own_addresses(f, "ip6", true, &label, seen_ips);

        // Driver-specific keys.
        if let Some(d) = driver {
            let own = d.keys();
            for (k, n) in &f.entries {
                if own.contains(k) {
                    continue;
                }
                let owners: Vec<String> = Drv::ALL
                    .into_iter()
                    .filter(|o| o.keys().contains(k))
                    .map(|o| format!("\"{}\"", o.name()))
                    .collect();
                if owners.is_empty() {
                    continue;
                }
                self.bad(
                    f,
                    k,
                    n,
                    format!(
                        "`{k}` applies only to driver = {}; this port's driver is \"{}\", \
                         whose keys are: {}",
                        owners.join(" or "),
                        d.name(),
                        own.join(", ")
                    ),
                );
            }
        }

        if let (Some(d @ Drv::Pcap), Some(n)) = (driver, f.get("driver")) {
            if spec.workers > 1 {
                self.bad(
                    f,
                    "driver",
                    n,
                    format!(
                        "a \"{}\" port runs on one worker, and [dataplane] workers = {}; \
                         accepted: workers = 1, or \"af-xdp\", \"af-packet\" or \"tap\" \
                         ports",
                        d.name(),
                        spec.workers
                    ),
                );
            }
        }
        let drv = match driver {
            Some(Drv::Pcap) => self.pcap_driver(f, &section, &label, base_dir, &mut refs, seen_tx),
            Some(Drv::Memory) => self.memory_port(f, spec, mac).map(PortDriver::Memory),
            Some(Drv::AfPacket) => {
                self.af_packet_driver(f, &section, name.as_deref(), &label, seen_kernel)
            }
            Some(Drv::AfXdp) => {
                self.af_xdp_driver(f, &section, name.as_deref(), &label, seen_kernel)
            }
            Some(Drv::Tap) => self.tap_driver(f, name.as_deref(), &label, seen_kernel),
            Some(Drv::Vxlan) => self.vxlan_driver(f),
            Some(Drv::VhostUser) => self.vhost_user_driver(f, &label, base_dir, seen_kernel),
            None => None,
        };

        if self.issues.len() != errors_before {
            return (name, None, refs);
        }
        match (name.clone(), mac, mtu, ip4, ip6, drv) {
            (Some(name), Some(mac), Some(mtu), Some(ip4), Some(ip6), Some(driver)) => {
                let ip4 = ip4
                    .into_iter()
                    .filter_map(|(a, l)| match a {
                        IpAddr::V4(a) => Some((a, l)),
                        IpAddr::V6(_) => None,
                    })
                    .collect();
                let ip6 = ip6
                    .into_iter()
                    .filter_map(|(a, l)| match a {
                        IpAddr::V6(a) => Some((a, l)),
                        IpAddr::V4(_) => None,
                    })
                    .collect();
                let port = PortSpec {
                    name: name.clone(),
                    mac,
                    mtu,
                    ip4,
                    ip6,
                    driver,
                };
                (Some(name), Some(port), refs)
            }
            _ => (name, None, refs),
        }
    }

    /// `interface` of an af-packet or tap port (default: the port's name): a name the kernel
    /// accepts, used by one port only.
    pub(super) fn interface(
        &mut self,
        f: &Fields<'_>,
        port_name: Option<&str>,
        label: &str,
        seen: &mut SeenKernel,
    ) -> Option<String> {
        let section = f.section.clone();
        // Where a problem is reported: the `interface` key, else the `name` it defaults to.
        let (value, key, span) = match self.string(f, "interface") {
            Field::Ok(s, span) => (s.to_string(), "interface", span),
            Field::Missing => {
                let name = port_name?;
                let span = f.get("name").map(|n| n.span())?;
                (name.to_string(), "name", span)
            }
            Field::Bad => return None,
        };
        let valid = !value.is_empty()
            && value.len() <= 15
            && value != "."
            && value != ".."
            && !value.contains(['/', ':'])
            && !value.contains(char::is_whitespace);
        if !valid {
            let msg = if key == "interface" {
                format!("`{value}` is not a valid interface name; accepted: {IFNAME_ACCEPTED}")
            } else {
                format!(
                    "port name `{value}` is also its interface name (there is no `interface` \
                     key) and the kernel does not accept it; accepted: set `interface` to \
                     {IFNAME_ACCEPTED}"
                )
            };
            self.error(&span, &section, Some(key), msg);
            return None;
        }
        let line = self.line_of(span.start);
        if let Some((first, other)) = seen.interfaces.get(&value) {
            let msg = format!(
                "interface `{value}` is also used by port `{other}` at line {first}; accepted: \
                 one port per kernel interface (several workers share a port)"
            );
            self.error(&span, &section, Some(key), msg);
            return None;
        }
        seen.interfaces
            .insert(value.clone(), (line, label.to_string()));
        Some(value)
    }

    /// `ip4` / `ip6` of a port: own addresses with prefix lengths.
    pub(super) fn own_addresses(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        v6: bool,
        port: &str,
        seen: &mut SeenAddrs,
    ) -> Option<Vec<(IpAddr, u8)>> {
        let items = match self.strings(f, key, false) {
            Field::Ok(items, _) => items,
            Field::Missing => return Some(Vec::new()),
            Field::Bad => return None,
        };
        let section = f.section.clone();
        let example = if v6 {
            "2001:db8:1::1/64"
        } else {
            "198.18.1.1/24"
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (s, span) in items {
            match parse_prefix(s) {
                Ok((ip, len)) if ip.is_ipv6() == v6 => {
                    if len == 0 {
                        self.error(
                            &span,
                            &section,
                            Some(key),
                            format!(
                                "`{s}` has prefix length 0; accepted: an address with a prefix \
                                 length of at least 1, like {example}"
                            ),
                        );
                        ok = false;
                        continue;
                    }
                    if let Some(why) = own_address_problem(s, ip, len) {
                        self.error(&span, &section, Some(key), why);
                        ok = false;
                        continue;
                    }
                    if let Some(why) = repeated_address(s, ip, &out, port) {
                        self.error(&span, &section, Some(key), why);
                        ok = false;
                        continue;
                    }
                    let line = self.line_of(span.start);
                    if let Err(why) = seen.claim(ip, len, line, port) {
                        self.error(&span, &section, Some(key), why);
                        ok = false;
                        continue;
                    }
                    out.push((ip, len));
                }
                Ok((ip, _)) => {
                    let other = if v6 { "ip4" } else { "ip6" };
                    self.error(
                        &span,
                        &section,
                        Some(key),
                        format!(
                            "`{s}` is an {} address; put it in `{other}`; accepted here: \
                             addresses like {example}",
                            if ip.is_ipv6() { "IPv6" } else { "IPv4" }
                        ),
                    );
                    ok = false;
                }
                Err(why) => {
                    self.error(
                        &span,
                        &section,
                        Some(key),
                        format!("`{s}` {why}; accepted: ADDRESS/LENGTH like {example}"),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    pub(super) fn memory_port(
        &mut self,
        f: &Fields<'_>,
        spec: &DataplaneSpec,
        mac: Option<Mac>,
    ) -> Option<MemoryPortSpec> {
        let before = self.issues.len();
        let section = f.section.clone();
        let frame_size = match self.int(f, "frame-size", 64..=9000) {
            Field::Ok(v, span) => Some((v as usize, Some(span))),
            Field::Missing => Some((DEFAULT_FRAME_SIZE, None)),
            Field::Bad => None,
        };
        let flows = match self.int(f, "flows", 1..=16_777_216) {
            Field::Ok(v, _) => Some(v as u32),
            Field::Missing => Some(DEFAULT_FLOWS),
            Field::Bad => None,
        };
        let src_mac = match self.mac(f, "src-mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => Some(DEFAULT_SRC_MAC),
            Field::Bad => None,
        };
        let dst_mac = match self.mac(f, "dst-mac", false) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => mac,
            Field::Bad => None,
        };
        let vlan = match self.int(f, "vlan", 1..=4094) {
            Field::Ok(v, _) => Some(Some(v as u16)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        let limit = match self.int(f, "limit", 1..=i64::MAX) {
            Field::Ok(v, _) => Some(Some(v as u64)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        let generate = match self.boolean(f, "generate") {
            Field::Ok(b, _) => Some(b),
            Field::Missing => Some(true),
            Field::Bad => None,
        };
        let gen = generate.unwrap_or(true);
        let src_ip = match self.ip(f, "src-ip") {
            Field::Ok(ip, _) => Some(ip),
            Field::Missing if gen => {
                self.missing(
                    f,
                    "src-ip",
                    "an IPv4 or IPv6 source address like 198.18.0.1 (required unless generate = false)",
                );
                None
            }
            Field::Missing => Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))),
            Field::Bad => None,
        };
        let destinations = match self.strings(f, "destinations", false) {
            Field::Ok(items, span) => {
                if items.is_empty() {
                    self.error(
                        &span,
                        &section,
                        Some("destinations"),
                        "empty list; accepted: a non-empty list of addresses of the same family \
                         as `src-ip`",
                    );
                    None
                } else {
                    let mut out = Vec::new();
                    let mut ok = true;
                    for (s, span) in items {
                        match s.parse::<IpAddr>() {
                            Ok(ip) => {
                                if let Some(src) = src_ip {
                                    if src.is_ipv6() != ip.is_ipv6() {
                                        self.error(
                                            &span,
                                            &section,
                                            Some("destinations"),
                                            format!(
                                                "`{s}` is not of the same family as src-ip {src}; \
                                                 accepted: {} addresses",
                                                if src.is_ipv6() { "IPv6" } else { "IPv4" }
                                            ),
                                        );
                                        ok = false;
                                    }
                                }
                                out.push(ip);
                            }
                            Err(_) => {
                                self.error(
                                    &span,
                                    &section,
                                    Some("destinations"),
                                    format!(
                                        "`{s}` is not an IP address; accepted: addresses like \
                                         198.18.2.10 or 2001:db8:2::10"
                                    ),
                                );
                                ok = false;
                            }
                        }
                    }
                    ok.then_some(out)
                }
            }
            Field::Missing if gen => {
                self.missing(
                    f,
                    "destinations",
                    "a non-empty list of destination addresses like [\"198.18.2.10\"] \
                     (required unless generate = false)",
                );
                None
            }
            Field::Missing => match src_ip {
                Some(IpAddr::V6(_)) => Some(vec![IpAddr::V6(Ipv6Addr::new(
                    0x2001, 0xdb8, 0, 0, 0, 0, 0, 2,
                ))]),
                _ => Some(vec![IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))]),
            },
            Field::Bad => None,
        };

        // The frame must hold the generated headers and fit a buffer.
        if let (Some((size, span)), Some(src), Some(vlan)) = (frame_size.clone(), src_ip, vlan) {
            let l3 = if src.is_ipv6() { 40 } else { 20 };
            let min = 14 + if vlan.is_some() { 4 } else { 0 } + l3 + 8 + 4;
            let span = span.unwrap_or_else(|| f.span.clone());
            if size < min {
                self.error(
                    &span,
                    &section,
                    Some("frame-size"),
                    format!(
                        "{size}{} bytes cannot hold the Ethernet{}, {} and UDP headers plus FCS; \
                         accepted: {min}..=9000",
                        if f.get("frame-size").is_none() {
                            " (the default)"
                        } else {
                            ""
                        },
                        if vlan.is_some() { ", 802.1Q" } else { "" },
                        if src.is_ipv6() { "IPv6" } else { "IPv4" }
                    ),
                );
            } else if size - 4 > usize::from(spec.data_size) {
                self.error(
                    &span,
                    &section,
                    Some("frame-size"),
                    format!(
                        "{size}-byte frames do not fit a {}-byte buffer ([dataplane] data-size); \
                         accepted: up to {} or a larger data-size",
                        spec.data_size,
                        usize::from(spec.data_size) + 4
                    ),
                );
            }
        }

        if self.issues.len() != before {
            return None;
        }
        Some(MemoryPortSpec {
            frame_size: frame_size?.0,
            flows: flows?,
            dst_mac: dst_mac?,
            src_mac: src_mac?,
            vlan: vlan?,
            src_ip: src_ip?,
            destinations: destinations?,
            limit: limit?,
            generate: generate?,
        })
    }
}

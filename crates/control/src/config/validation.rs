//! Rules for a port's own addresses: what may be assigned (no loopback, multicast, broadcast,
//! unspecified or IPv4-mapped address, no IPv4 network or broadcast address of its subnet), and
//! that an address and a subnet belong to one port only. Pure checks; the caller reports.

use super::util::{contains, mask};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// What an own-address error says is accepted.
const OWN_ACCEPTED: &str = "a unicast host address that is not loopback, multicast, broadcast, \
                            unspecified or IPv4-mapped";

/// Why `ip/len` cannot be a port's own address (None: it can). `s` is the text as written.
pub(crate) fn own_address_problem(s: &str, ip: IpAddr, len: u8) -> Option<String> {
    let what = match ip {
        IpAddr::V4(a) => {
            if a.is_unspecified() {
                Some("the unspecified address".to_string())
            } else if a.is_loopback() {
                Some("a loopback address (127.0.0.0/8)".to_string())
            } else if a.is_broadcast() {
                Some("the limited broadcast address".to_string())
            } else if a.is_multicast() {
                Some("a multicast address (224.0.0.0/4)".to_string())
            } else if len <= 30 {
                let net = mask(ip, len);
                let host_bits = u32::MAX >> len;
                let host = u32::from(a) & host_bits;
                if host == 0 {
                    Some(format!("the network address of {net}/{len}"))
                } else if host == host_bits {
                    Some(format!("the broadcast address of {net}/{len}"))
                } else {
                    None
                }
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            if a.is_unspecified() {
                Some("the unspecified address (::)".to_string())
            } else if a.is_loopback() {
                Some("the loopback address (::1)".to_string())
            } else if a.is_multicast() {
                Some("a multicast address (ff00::/8)".to_string())
            } else if a.to_ipv4_mapped().is_some() {
                Some("an IPv4-mapped address (::ffff:0:0/96)".to_string())
            } else {
                None
            }
        }
    }?;
    let hint = match ip {
        IpAddr::V4(a) if len <= 30 && what.ends_with(&format!("/{len}")) => {
            let net = u32::from(a) & !(u32::MAX >> len);
            let last = net | (u32::MAX >> len);
            format!(
                " (inside {}/{len}: {} to {}; /31 and /32 have no network or broadcast address)",
                Ipv4Addr::from(net),
                Ipv4Addr::from(net + 1),
                Ipv4Addr::from(last - 1)
            )
        }
        _ => String::new(),
    };
    Some(format!("`{s}` is {what}; accepted: {OWN_ACCEPTED}{hint}"))
}

/// Addresses and subnets claimed by the ports read so far.
#[derive(Default)]
pub(super) struct SeenAddrs {
    /// Address -> (line, port).
    ips: HashMap<IpAddr, (usize, String)>,
    /// (network, length, line, port) of every own address.
    subnets: Vec<(IpAddr, u8, usize, String)>,
}

impl SeenAddrs {
    /// Claim `ip/len` (written at `line`) for `port`: refused if another port (or this one)
    /// already has the address, or another port has the same or an overlapping subnet.
    pub(super) fn claim(
        &mut self,
        ip: IpAddr,
        len: u8,
        line: usize,
        port: &str,
    ) -> Result<(), String> {
        if let Some((first, other)) = self.ips.get(&ip) {
            return Err(format!(
                "address {ip} is already assigned to port `{other}` at line {first}; accepted: \
                 an address assigned once"
            ));
        }
        let net = mask(ip, len);
        let clash = self.subnets.iter().find(|(n, l, _, p)| {
            p != port && n.is_ipv6() == net.is_ipv6() && contains(*n, len.min(*l), net)
        });
        if let Some((n, l, first, other)) = clash {
            let how = if *l == len { "is also" } else { "overlaps" };
            return Err(format!(
                "subnet {net}/{len} {how} the subnet {n}/{l} of port `{other}` at line {first}; \
                 accepted: a subnet on one port only (each port is its own link)"
            ));
        }
        self.ips.insert(ip, (line, port.to_string()));
        self.subnets.push((net, len, line, port.to_string()));
        Ok(())
    }
}

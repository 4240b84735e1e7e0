//! Rules for a port's own addresses: what may be assigned (no loopback, multicast, broadcast,
//! unspecified or IPv4-mapped address, no IPv4 network or broadcast address of its subnet), that
//! an address is listed once and a subnet belongs to one port only, and that each static
//! neighbour is another host on one of its port's subnets. Pure checks; the caller reports. The
//! config file and `PATCH /v1/interfaces` both use them, so both refuse the same things alike.

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

/// Why `ip/len` (written `s`) cannot join a port's own addresses `earlier` of `port` (None: it
/// can): the port has that address already.
pub(crate) fn repeated_address(
    s: &str,
    ip: IpAddr,
    earlier: &[(IpAddr, u8)],
    port: &str,
) -> Option<String> {
    let (_, len) = earlier.iter().find(|(a, _)| *a == ip)?;
    Some(format!(
        "`{s}` repeats {ip}/{len}, already an address of port `{port}`; accepted: each address \
         once per port"
    ))
}

/// Why static neighbour `ip` cannot be on port `port`, whose own addresses of `ip`'s family are
/// `nets` (None: it can): it must be another host on one of the port's subnets.
pub(crate) fn neighbour_placement_problem(
    ip: IpAddr,
    port: &str,
    nets: &[(IpAddr, u8)],
) -> Option<String> {
    let accepted = "accepted: each static neighbour of a port on one of the port's subnets, not \
                    its own address (move or delete the neighbour, or keep an address whose \
                    subnet holds it)";
    if nets.iter().any(|(a, _)| *a == ip) {
        return Some(format!(
            "static neighbour {ip} is port `{port}`'s own address; {accepted}"
        ));
    }
    if nets.iter().any(|(a, l)| contains(*a, *l, ip)) {
        return None;
    }
    let fam = if ip.is_ipv6() { "IPv6" } else { "IPv4" };
    let subnets = if nets.is_empty() {
        format!("it has no {fam} address")
    } else {
        let list: Vec<String> = nets
            .iter()
            .map(|(a, l)| format!("{}/{l}", mask(*a, *l)))
            .collect();
        format!("its {fam} subnets: {}", list.join(", "))
    };
    Some(format!(
        "static neighbour {ip} is not on a subnet of port `{port}` ({subnets}); {accepted}"
    ))
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

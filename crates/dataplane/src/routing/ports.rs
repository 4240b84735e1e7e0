//! Ports' own addresses changed live (`Routing::set_port_addresses`): their connected prefixes
//! and own-address routes replaced as one version, after checking that every next hop a route
//! uses stays reachable and no static neighbour becomes an own address. Same publication order
//! as `apply`: new next-hop entries, then the FIB, then the old ids released after a grace
//! period. Never runs on a worker.

use super::apply::write_fib;
use super::fibstore::FibStore;
use super::nexthops::HopKey;
use super::{mask, to_ip, to_u128, Applied, Family, Net, Routing, RoutingError};
use std::net::IpAddr;

/// The connected prefix and own-address keys of `addr/len` in a family `bits` wide.
fn keys(addr: u128, len: u8, bits: u8) -> Vec<(u128, u8)> {
    let mut k = vec![(addr, bits)];
    if len < bits {
        k.push((mask(addr, len, bits), len));
    }
    k
}

impl Routing {
    /// Give ports new own addresses (`changes`: port index, all its addresses of both
    /// families), as one version, or change nothing: every gateway a route uses must stay
    /// reachable (a static neighbour, or inside some port's prefix), and no static neighbour
    /// may become an own address. The ports' other settings, and validity of the addresses
    /// themselves (as the config checks them), are the caller's.
    pub fn set_port_addresses(
        &mut self,
        changes: &[(usize, Vec<(IpAddr, u8)>)],
    ) -> Result<Applied, RoutingError> {
        let mut net4 = self.v4.net.clone();
        let mut net6 = self.v6.net.clone();
        let mut added4 = Vec::new();
        let mut added6 = Vec::new();
        for (port, addrs) in changes {
            let Some(info) = self.ports.get(*port) else {
                return Err(RoutingError(format!("there is no port {port}")));
            };
            let p = *port as u16;
            for &(ip, len) in info.addrs.iter().filter(|a| !addrs.contains(a)) {
                let (v6, addr) = to_u128(ip);
                let net = if v6 { &mut net6 } else { &mut net4 };
                net.own.remove(&addr);
                let prefix = mask(addr, len, net.bits);
                net.connected.retain(|c| *c != (prefix, len, p));
            }
            for &(ip, len) in addrs.iter().filter(|a| !info.addrs.contains(a)) {
                let (v6, addr) = to_u128(ip);
                let (net, added) = if v6 {
                    (&mut net6, &mut added6)
                } else {
                    (&mut net4, &mut added4)
                };
                net.own.insert(addr);
                if len < net.bits {
                    net.connected.push((mask(addr, len, net.bits), len, p));
                }
                added.extend(keys(addr, len, net.bits));
            }
        }
        check_family(&self.v4, &net4, self)?;
        check_family(&self.v6, &net6, self)?;
        if self.v4.book.entries_available() < added4.len()
            || self.v6.book.entries_available() < added6.len()
        {
            return Err(RoutingError(
                "no next-hop id left for the new addresses' routes".into(),
            ));
        }
        self.v4
            .fib
            .check_room(added4.iter().copied())
            .map_err(|e| RoutingError(e.to_string()))?;

        // Nothing below fails: everything was checked above.
        let mut released: Vec<(bool, u32)> = Vec::new();
        let mut touched4 = Vec::new();
        let mut touched6 = Vec::new();
        for (port, addrs) in changes {
            let p = *port as u16;
            let old = self.ports[*port].addrs.clone();
            for &(ip, len) in old.iter().filter(|a| !addrs.contains(a)) {
                let (v6, addr) = to_u128(ip);
                if v6 {
                    remove_address(&mut self.v6, p, addr, len, &mut touched6, &mut released);
                } else {
                    remove_address(&mut self.v4, p, addr, len, &mut touched4, &mut released);
                }
            }
            for &(ip, len) in addrs.iter().filter(|a| !old.contains(a)) {
                let (v6, addr) = to_u128(ip);
                if v6 {
                    add_address(&mut self.v6, p, addr, len, &mut touched6);
                } else {
                    add_address(&mut self.v4, p, addr, len, &mut touched4);
                }
            }
            self.ports[*port].addrs = addrs.clone();
        }
        repoint_gateways(&mut self.v4);
        repoint_gateways(&mut self.v6);
        self.v4.book.publish();
        self.v6.book.publish();
        write_fib(&mut self.v4, touched4);
        write_fib(&mut self.v6, touched6);
        let epoch = self.domain.advance();
        for (v6, id) in released {
            if v6 {
                self.v6.book.release(id, epoch);
            } else {
                self.v4.book.release(id, epoch);
            }
        }
        self.version += 1;
        Ok(Applied {
            version: self.version,
            epoch,
        })
    }

    /// Make port `port` known, without addresses (no route leads to it yet): a port added at
    /// run time, at the next id or at a removed port's (whose addresses were taken away).
    pub fn add_port(
        &mut self,
        port: usize,
        mac: packet::headers::Mac,
        mtu: u16,
    ) -> Result<(), RoutingError> {
        let info = super::PortInfo {
            mac,
            mtu,
            addrs: Vec::new(),
        };
        let len = self.ports.len();
        match self.ports.get_mut(port) {
            Some(p) if p.addrs.is_empty() => *p = info,
            Some(_) => {
                return Err(RoutingError(format!(
                    "port {port} still has addresses; it was not removed"
                )))
            }
            None if port == len => self.ports.push(info),
            None => {
                return Err(RoutingError(format!(
                    "port {port} is not the next id ({len})"
                )))
            }
        }
        Ok(())
    }

    /// Each port's own addresses now.
    pub fn port_addresses(&self, port: usize) -> Option<&[(IpAddr, u8)]> {
        self.ports.get(port).map(|p| p.addrs.as_slice())
    }
}

/// Whether the gateways of `fam` stay reachable with `net`, and no static neighbour becomes
/// an own address.
fn check_family<S: FibStore>(
    fam: &Family<S>,
    net: &Net,
    routing: &Routing,
) -> Result<(), RoutingError> {
    for (addr, _, adjacency) in fam.book.gateways_in_use() {
        let ip = to_ip(net.v6(), addr);
        if net.own.contains(&addr) {
            return Err(RoutingError(format!(
                "{ip} would be an own address, but routes use it as a next hop; accepted: \
                 delete or change those routes first"
            )));
        }
        if adjacency.is_none() && net.connected_port(addr).is_none() {
            return Err(RoutingError(format!(
                "next hop {ip} of a route would be in no port's prefix any more; accepted: \
                 change those routes first, or add it as a static neighbour"
            )));
        }
    }
    for ip in routing.neighbours.keys() {
        let (v6, addr) = to_u128(*ip);
        if v6 == net.v6() && net.own.contains(&addr) {
            return Err(RoutingError(format!(
                "{ip} is a static neighbour and would be an own address; accepted: delete the \
                 neighbour first"
            )));
        }
    }
    Ok(())
}

/// Withdraw own address `addr` and its connected prefix `len` of `port`.
fn remove_address<S: FibStore>(
    fam: &mut Family<S>,
    port: u16,
    addr: u128,
    len: u8,
    touched: &mut Vec<(u128, u8)>,
    released: &mut Vec<(bool, u32)>,
) {
    let bits = fam.net.bits;
    let v6 = fam.net.v6();
    fam.net.own.remove(&addr);
    if let Some(id) = fam
        .system
        .get_mut(&(addr, bits))
        .and_then(|s| s.local.take())
    {
        released.push((v6, id));
    }
    touched.push((addr, bits));
    if len < bits {
        let prefix = mask(addr, len, bits);
        fam.net.connected.retain(|c| *c != (prefix, len, port));
        if let Some(id) = fam
            .system
            .get_mut(&(prefix, len))
            .and_then(|s| s.connected.take())
        {
            released.push((v6, id));
        }
        touched.push((prefix, len));
    }
}

/// Install own address `addr` and its connected prefix `len` of `port` (ids were counted).
fn add_address<S: FibStore>(
    fam: &mut Family<S>,
    port: u16,
    addr: u128,
    len: u8,
    touched: &mut Vec<(u128, u8)>,
) {
    let bits = fam.net.bits;
    let none = |_| None;
    fam.net.own.insert(addr);
    if let Some(id) = fam.book.acquire(&HopKey::Local, &none) {
        fam.system.entry((addr, bits)).or_default().local = Some(id);
        touched.push((addr, bits));
    }
    if len < bits {
        let prefix = mask(addr, len, bits);
        fam.net.connected.push((prefix, len, port));
        if let Some(id) = fam.book.acquire(&HopKey::Glean(port, bits - len), &none) {
            fam.system.entry((prefix, len)).or_default().connected = Some(id);
            touched.push((prefix, len));
        }
    }
}

/// Point every gateway that is not a static neighbour at the port whose prefix holds it now.
fn repoint_gateways<S: FibStore>(fam: &mut Family<S>) {
    for (addr, port, adjacency) in fam.book.gateways_in_use() {
        if adjacency.is_some() {
            continue;
        }
        if let Some(p) = fam.net.connected_port(addr) {
            if p != port {
                fam.book.reach_gateway(addr, (p, None));
            }
        }
    }
}

//! VXLAN ports in the config: the keys of `driver = "vxlan"` (`local`, `remote`, `vni`,
//! `dst-port`, `udp-checksum`) and the checks that need every port (`local` is another port's
//! own address whose MTU fits the tunnel's; one tunnel per local, remote, UDP port and VNI).
//! Only names addresses; never opens anything.

use super::ctx::{Ctx, Field, Fields};
use super::ports::PORT_KEYS;
use super::value::{kind, show, Node, Val};
use dataplane::{PortDriver, PortSpec, VxlanPortSpec, VxlanVni};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

pub(super) const VXLAN_KEYS: &[&str] = &["local", "remote", "vni", "dst-port", "udp-checksum"];
/// Default MTU of a VXLAN port: 1500 minus the 50 bytes of outer headers (as Linux).
pub(super) const DEFAULT_MTU: i64 = 1500 - nodes::vxlan::OVERHEAD as i64;
const VNI_ACCEPTED: &str = "an integer 0..=16777215, or \"flow\" (the tunnel id the switch sets)";
const REMOTE_ACCEPTED: &str =
    "a unicast IPv4 address that is not loopback, multicast, broadcast, unspecified or one of \
     vecplane's own addresses";

/// What makes a tunnel: local, remote, UDP port and VNI (None: flow-chosen).
type TunnelKey = (Ipv4Addr, Ipv4Addr, u16, Option<u32>);

impl Ctx<'_> {
    /// A VXLAN port's tunnel (its `local` is checked against the other ports later, in
    /// `vxlan_ports`).
    pub(super) fn vxlan_driver(&mut self, f: &Fields<'_>) -> Option<PortDriver> {
        let section = f.section.clone();
        let local = self.ipv4(
            f,
            "local",
            "one of vecplane's own IPv4 addresses (on another port)",
        );
        let remote = match self.ipv4(f, "remote", REMOTE_ACCEPTED) {
            Some((a, span))
                if a.is_unspecified()
                    || a.is_loopback()
                    || a.is_multicast()
                    || a.is_broadcast() =>
            {
                self.error(
                    &span,
                    &section,
                    Some("remote"),
                    format!("`{a}` cannot be a tunnel's other end; accepted: {REMOTE_ACCEPTED}"),
                );
                None
            }
            r => r,
        };
        let vni = match f.get("vni") {
            None => {
                self.missing(f, "vni", VNI_ACCEPTED);
                None
            }
            Some(n) => match n.get_ref() {
                Val::Int(v) if (0..=i64::from(nodes::vxlan::MAX_VNI)).contains(v) => {
                    Some(VxlanVni::Fixed(*v as u32))
                }
                Val::Str(s) if s == "flow" => Some(VxlanVni::Flow),
                other => {
                    self.bad(
                        f,
                        "vni",
                        n,
                        format!(
                            "{} {} is not a VNI; accepted: {VNI_ACCEPTED}",
                            kind(other),
                            show(other)
                        ),
                    );
                    None
                }
            },
        };
        let dst_port = match self.int(f, "dst-port", 1..=65535) {
            Field::Ok(v, _) => Some(v as u16),
            Field::Missing => Some(nodes::vxlan::DEFAULT_UDP_PORT),
            Field::Bad => None,
        };
        let udp_checksum = match self.boolean(f, "udp-checksum") {
            Field::Ok(b, _) => Some(b),
            Field::Missing => Some(false),
            Field::Bad => None,
        };
        if let (Some((local, _)), Some((remote, span))) = (&local, &remote) {
            if local == remote {
                self.error(
                    span,
                    &section,
                    Some("remote"),
                    format!("`{remote}` is also `local`; accepted: {REMOTE_ACCEPTED}"),
                );
                return None;
            }
        }
        Some(PortDriver::Vxlan(VxlanPortSpec {
            local: local?.0,
            remote: remote?.0,
            vni: vni?,
            dst_port: dst_port?,
            udp_checksum: udp_checksum?,
        }))
    }

    /// An IPv4 address field (required).
    fn ipv4(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        accepted: &str,
    ) -> Option<(Ipv4Addr, std::ops::Range<usize>)> {
        match self.ip(f, key) {
            Field::Ok(IpAddr::V4(a), span) => Some((a, span)),
            Field::Ok(IpAddr::V6(a), span) => {
                let section = f.section.clone();
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!(
                        "`{a}` is IPv6 (VXLAN over IPv6 is not supported); accepted: {accepted}"
                    ),
                );
                None
            }
            Field::Missing => {
                self.missing(f, key, accepted);
                None
            }
            Field::Bad => None,
        }
    }

    /// Checks of the VXLAN ports against all ports (`nodes[i]` is `[[port]] #i+1`, `specs[i]` its
    /// port when valid): `local` is an own IPv4 address of another port, the tunnel's MTU plus
    /// its headers fits that port's, `remote` is not an own address, and no two tunnels share
    /// local, remote, UDP port and VNI. A port that fails is set to None. Skipped while another
    /// port has errors (its addresses are unknown).
    pub(super) fn vxlan_ports(&mut self, nodes: &[&Node], specs: &mut [Option<PortSpec>]) {
        if specs.iter().any(Option::is_none) {
            return;
        }
        let owners: HashMap<Ipv4Addr, usize> = specs
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                p.iter()
                    .flat_map(move |p| p.ip4.iter().map(move |a| (a.0, i)))
            })
            .collect();
        let mut seen: HashMap<TunnelKey, (usize, String)> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let Some(Some(p)) = specs.get(i) else {
                continue;
            };
            let PortDriver::Vxlan(v) = p.driver else {
                continue;
            };
            let (name, mtu) = (p.name.clone(), p.mtu);
            let Some(f) = self.fields(format!("[[port]] #{}", i + 1), None, node, PORT_KEYS) else {
                continue;
            };
            let before = self.issues.len();
            if let Some(n) = f.get("local") {
                match owners
                    .get(&v.local)
                    .and_then(|&o| specs[o].as_ref().map(|s| (o, s)))
                {
                    None => self.bad(
                        &f,
                        "local",
                        n,
                        format!(
                            "`{}` is not an own address of any port; accepted: an address in \
                             another port's `ip4`",
                            v.local
                        ),
                    ),
                    Some((o, _)) if o == i => self.bad(
                        &f,
                        "local",
                        n,
                        format!(
                            "`{}` is this VXLAN port's own address (the tunnel would carry \
                             itself); accepted: an address in another port's `ip4`",
                            v.local
                        ),
                    ),
                    Some((_, under))
                        if usize::from(mtu) + nodes::vxlan::OVERHEAD > usize::from(under.mtu) =>
                    {
                        let at = f.get("mtu").unwrap_or(n);
                        let (key, msg) = (
                            if f.get("mtu").is_some() {
                                "mtu"
                            } else {
                                "local"
                            },
                            format!(
                                "the tunnel's MTU {mtu} plus {} bytes of VXLAN headers exceeds \
                                 the MTU {} of port `{}`, which holds local address {}; \
                                 accepted: mtu at most {}",
                                nodes::vxlan::OVERHEAD,
                                under.mtu,
                                under.name,
                                v.local,
                                usize::from(under.mtu).saturating_sub(nodes::vxlan::OVERHEAD)
                            ),
                        );
                        self.bad(&f, key, at, msg);
                    }
                    Some(_) => {}
                }
            }
            if let (Some(n), true) = (f.get("remote"), owners.contains_key(&v.remote)) {
                self.bad(
                    &f,
                    "remote",
                    n,
                    format!(
                        "`{}` is one of vecplane's own addresses; accepted: {REMOTE_ACCEPTED}",
                        v.remote
                    ),
                );
            }
            let vni = match v.vni {
                VxlanVni::Fixed(x) => Some(x),
                VxlanVni::Flow => None,
            };
            let key = (v.local, v.remote, v.dst_port, vni);
            let line = f
                .get("vni")
                .map(|n| self.line_of(n.span().start))
                .unwrap_or(0);
            if let (Some((first, other)), Some(n)) = (seen.get(&key), f.get("vni")) {
                let msg = format!(
                    "port `{other}` at line {first} is the same tunnel ({} -> {}, UDP port {}, \
                     vni {}); accepted: a different vni, remote, local or dst-port",
                    v.local,
                    v.remote,
                    v.dst_port,
                    vni.map_or("\"flow\"".to_string(), |x| x.to_string())
                );
                self.bad(&f, "vni", n, msg);
            } else {
                seen.insert(key, (line, name));
            }
            if self.issues.len() != before {
                if let Some(s) = specs.get_mut(i) {
                    *s = None;
                }
            }
        }
    }
}

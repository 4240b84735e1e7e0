//! The rules a VIP's settings and a server's address must follow, each taken alone (the
//! rules that need the whole state, such as L3DSR DSCP clashes and GRE sources, are checked by
//! `LbState::apply`). Pure checks: they own no state and change nothing.

use super::{Encap, LbErrorKind, Prefix, VipKey, VipProtocol, VipSpec, MAX_NEW_LEN};
use crate::model::{LbConf, SourceAddress};
use std::net::{IpAddr, Ipv4Addr};

/// A server address that can be one: unicast, specified, not the IPv4 broadcast.
pub(super) fn check_server_addr(a: IpAddr) -> Result<(), LbErrorKind> {
    if a.is_unspecified() || a.is_multicast() || a == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Err(LbErrorKind::BadServer(a));
    }
    Ok(())
}

/// A server of the family `encap` sends to.
pub(super) fn check_server_family(
    vip: &VipKey,
    encap: Encap,
    addr: IpAddr,
) -> Result<(), LbErrorKind> {
    let want6 = encap.wants_ipv6_servers();
    if addr.is_ipv6() != want6 {
        return Err(LbErrorKind::ServerFamily {
            vip: *vip,
            addr,
            encap: encap.name(),
            want: if want6 { "IPv6" } else { "IPv4" },
        });
    }
    Ok(())
}

/// The rules of one VIP's settings taken alone (the CLI parser refuses these too, naming the
/// token; this catches API callers).
pub fn check_vip_spec(spec: &VipSpec) -> Result<(), LbErrorKind> {
    let key = spec.key;
    let bad = |reason: &str| {
        Err(LbErrorKind::BadVip {
            vip: key,
            reason: reason.to_string(),
        })
    };
    if Prefix::new(key.prefix.addr(), key.prefix.prefix_len()).is_none() {
        return bad("the prefix has host bits set");
    }
    if key.port != 0 && key.protocol == VipProtocol::Any {
        return bad("a port needs `protocol tcp` or `protocol udp`");
    }
    if spec.new_len == 0 || spec.new_len > MAX_NEW_LEN {
        return bad("new_len must be 1..=4194304");
    }
    let v6 = key.prefix.is_ipv6();
    let nat = matches!(spec.encap, Encap::Nat4 { .. } | Encap::Nat6 { .. });
    if spec.node_port.is_some() && !nat {
        return bad("type nodeport is for encap nat4 or nat6");
    }
    if spec.node_port == Some(0) {
        return bad("node_port must be 1..=65535");
    }
    match spec.encap {
        Encap::Gre4 | Encap::Gre6 => Ok(()),
        Encap::L3dsr { dscp } => {
            if v6 {
                bad("encap l3dsr is IPv4 only; use gre4, gre6 or nat6 for an IPv6 VIP")
            } else if dscp > 63 {
                bad("dscp must be 0..=63")
            } else {
                Ok(())
            }
        }
        Encap::Nat4 { target_port } | Encap::Nat6 { target_port } => {
            let nat6 = matches!(spec.encap, Encap::Nat6 { .. });
            if nat6 != v6 {
                bad(if nat6 {
                    "encap nat6 needs an IPv6 VIP (NAT46 is not supported); use nat4"
                } else {
                    "encap nat4 needs an IPv4 VIP (NAT64 is not supported); use nat6"
                })
            } else if key.port == 0 {
                bad("NAT needs a port: `protocol tcp|udp port <n>`")
            } else if target_port == 0 {
                bad("NAT needs `target_port <1..65535>`")
            } else {
                Ok(())
            }
        }
    }
}

/// The key a nodeport VIP also answers on: the node's address (`lb conf ip4-src-address` for
/// nat4, `ip6-src-address` for nat6, as a prefix when given as one), the VIP's protocol and the
/// node port. `None` for a clusterip VIP, or when the node address is not set.
pub fn nodeport_key(spec: &VipSpec, conf: &LbConf) -> Option<VipKey> {
    let port = spec.node_port?;
    let src: SourceAddress = match spec.encap {
        Encap::Nat4 { .. } => conf.ip4_src?,
        Encap::Nat6 { .. } => conf.ip6_src?,
        _ => return None,
    };
    Some(VipKey {
        prefix: Prefix::new(super::mask_addr(src.addr, src.len), src.len)?,
        protocol: spec.key.protocol,
        port,
    })
}

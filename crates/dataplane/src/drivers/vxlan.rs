//! VXLAN ports: no receive node of their own (`vxlan-input`, added once per worker by the
//! first VXLAN port, hands them what it decapsulates) and `<port>-tx`, the encapsulation node.
//! Opens nothing; runs at build time on the control thread.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::spec::{DataplaneSpec, PortDriver, VxlanPortSpec};
use nodes::icmp::RateLimiter;
use nodes::offload::PortCaps;
use nodes::vxlan::{Tunnel, VxlanEncap, VxlanInput};

pub(super) struct Vxlan<'a>(pub(super) &'a VxlanPortSpec);

/// The tunnels of `spec`'s VXLAN ports, with their port ids.
pub(crate) fn tunnels(spec: &DataplaneSpec) -> Vec<Tunnel> {
    spec.ports
        .iter()
        .enumerate()
        .filter_map(|(id, p)| match &p.driver {
            PortDriver::Vxlan(v) => Some(Tunnel {
                port: id as u16,
                local: v.local,
                remote: v.remote,
                vni: v.vni,
                dst_port: v.dst_port,
                udp_checksum: v.udp_checksum,
                mtu: p.mtu,
            }),
            _ => None,
        })
        .collect()
}

impl<'a> Driver<'a> for Vxlan<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        let all = tunnels(cx.spec);
        let Some(tunnel) = all.iter().find(|t| t.port == cx.id).copied() else {
            return Err(cx.error("not a VXLAN port of the spec"));
        };
        if all.first().map(|t| t.port) == Some(cx.id) {
            let stats = all
                .iter()
                .map(|t| cx.all_stats.get(t.port as usize).cloned())
                .collect();
            cx.graph.add_node(Box::new(VxlanInput::new(all, stats)));
        }
        let limiter = RateLimiter::shared(cx.shared.policies.icmp.clone());
        cx.graph.add_node(Box::new(
            VxlanEncap::new(cx.tx_name.clone(), tunnel, limiter).with_stats(cx.stats.clone()),
        ));
        let vni = match self.0.vni {
            nodes::vxlan::Vni::Fixed(v) => v.to_string(),
            nodes::vxlan::Vni::Flow => "flow".to_string(),
        };
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: "vxlan",
            detail: format!(
                "{} -> {} vni {vni} udp {}{}",
                self.0.local,
                self.0.remote,
                self.0.dst_port,
                if self.0.udp_checksum { " checksum" } else { "" }
            ),
            tx: Some(cx.tx_name.clone()),
            rss: false,
            counters: None,
        })
    }
}

//! Memory ports: synthetic traffic for benchmarks (rx writes frames from templates, tx copies
//! out and frees), like DPDK's `net_null` with `copy=1`.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::spec::MemoryPortSpec;
use nodes::names;
use nodes::offload::PortCaps;
use packet::headers::UdpFrameSpec;
use ports::{FlowSet, MemoryRx, MemoryTx};

pub(super) struct Memory<'a>(pub(super) &'a MemoryPortSpec);

impl<'a> Driver<'a> for Memory<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        let m = self.0;
        if m.generate {
            let template = UdpFrameSpec {
                dst_mac: m.dst_mac,
                src_mac: m.src_mac,
                vlan: m.vlan,
                src_ip: m.src_ip,
                dst_ip: m.destinations.first().copied().unwrap_or(m.src_ip),
                frame_size: m.frame_size,
                ..UdpFrameSpec::default()
            };
            let flows = FlowSet::new(&template, m.flows, &m.destinations)
                .map_err(|e| cx.error(e.to_string()))?;
            let workers = cx.spec.workers.max(1) as u64;
            let worker = cx.worker as u64;
            cx.graph.add_input(Box::new(MemoryRx::new(
                cx.rx_name.clone(),
                cx.id,
                flows,
                // Each worker generates its share of a limited run.
                m.limit
                    .map(|l| l / workers + u64::from(worker < l % workers)),
                names::ETHERNET_INPUT.to_string(),
                cx.stats.clone(),
            )));
        }
        cx.graph.add_node(Box::new(MemoryTx::new(
            cx.tx_name.clone(),
            cx.id,
            cx.stats.clone(),
        )));
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: "memory",
            detail: String::new(),
            tx: Some(cx.tx_name.clone()),
            rss: false,
            counters: None,
        })
    }
}

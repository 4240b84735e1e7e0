//! AF_PACKET ports: a TPACKET_V3 socket on an existing kernel interface; several workers share
//! it through a PACKET_FANOUT hash group.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use nodes::names;
use nodes::offload::PortCaps;
use ports::{AfPacketConfig, AfPacketPort};

pub(super) struct AfPacket<'a> {
    pub(super) interface: &'a str,
    pub(super) fanout: Option<u16>,
}

impl<'a> Driver<'a> for AfPacket<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        let mut config = AfPacketConfig::new(self.interface.to_string());
        config.fanout = self.fanout;
        if cx.spec.workers > 1 && self.fanout.is_none() {
            // Every worker's socket must join the same group: derive one from the process and
            // the port, unlikely to meet another process's.
            config.fanout = Some(
                (std::process::id() as u16)
                    .wrapping_mul(31)
                    .wrapping_add(cx.id),
            );
        }
        let port = AfPacketPort::open(
            &config,
            cx.id,
            cx.rx_name.clone(),
            cx.tx_name.clone(),
            names::ETHERNET_INPUT.to_string(),
            cx.stats.clone(),
        )
        .map_err(|e| cx.error(e.to_string()))?;
        cx.graph.add_input(Box::new(port.rx));
        cx.graph.add_node(Box::new(port.tx));
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: ports::af_packet::DRIVER,
            detail: String::new(),
            tx: Some(cx.tx_name.clone()),
            rss: false,
            counters: None,
        })
    }
}

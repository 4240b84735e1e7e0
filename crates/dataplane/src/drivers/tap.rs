//! TAP ports: a TAP device (created if missing); with several workers worker 0 owns it and
//! spreads its flows (software RSS), the others hand it what they send.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::handoff;
use nodes::names;
use nodes::offload::PortCaps;
use ports::{TapConfig, TapPort};

pub(super) struct Tap<'a> {
    pub(super) name: &'a str,
    pub(super) vnet_hdr: bool,
    /// The namespace the device is created in (the probe host's), None: ours.
    pub(super) netns: Option<&'a ports::netns::Netns>,
}

impl<'a> Driver<'a> for Tap<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        if cx.worker > 0 {
            // Worker 0 owns the TAP; the others hand what they send on it to worker 0.
            return super::sent_by_worker0(cx, ports::tap::DRIVER);
        }
        let config = TapConfig {
            name: self.name.to_string(),
            vnet_hdr: self.vnet_hdr,
            netns: self.netns.cloned(),
        };
        // With several workers, worker 0 spreads the TAP's flows (software RSS).
        let workers = cx.spec.workers;
        let (rx_next, rss, detail) = if workers > 1 {
            (
                handoff::RSS_DISPATCH,
                true,
                format!("software RSS over {workers} workers"),
            )
        } else {
            (names::ETHERNET_INPUT, false, String::new())
        };
        let port = TapPort::open(
            &config,
            cx.id,
            cx.rx_name.clone(),
            cx.tx_name.clone(),
            rx_next.to_string(),
            cx.stats.clone(),
        )
        .map_err(|e| cx.error(e.to_string()))?;
        cx.graph.add_input(Box::new(port.rx));
        cx.graph.add_node(Box::new(port.tx));
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: ports::tap::DRIVER,
            detail,
            tx: Some(cx.tx_name.clone()),
            rss,
            counters: None,
        })
    }

    fn may_hand_off(&self) -> bool {
        true
    }
}

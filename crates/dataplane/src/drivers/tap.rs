//! TAP ports: a TAP device (created if missing); with several workers worker 0 owns it and
//! spreads its flows (software RSS), the others hand it what they send. With offloads, worker
//! 0 asks for jumbo buffers and keeps the TAP's offloaded frames (`rss-dispatch` never hands
//! them over: the rings carry plain frames only); the other workers declare no caps for it, so
//! their `interface-output` segments and finishes before handing over.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::handoff;
use nodes::names;
use nodes::offload::PortCaps;
use ports::{TapConfig, TapPort};
use std::sync::Arc;

pub(super) struct Tap<'a> {
    pub(super) name: &'a str,
    pub(super) vnet_hdr: bool,
    /// Checksum and TCP segmentation offloads in the vnet headers.
    pub(super) offloads: bool,
    /// The namespace the device is created in (the probe host's), None: ours.
    pub(super) netns: Option<&'a ports::netns::Netns>,
}

impl<'a> Driver<'a> for Tap<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        if self.offloads && cx.worker == 0 && cx.jumbo_capacity == 0 {
            return Err(cx.error(
                "a tap port with offloads needs jumbo buffers, and the worker's pool has none",
            ));
        }
        if cx.worker > 0 {
            // Worker 0 owns the TAP; the others hand what they send on it to worker 0.
            return super::sent_by_worker0(cx, ports::tap::DRIVER);
        }
        let config = TapConfig {
            name: self.name.to_string(),
            vnet_hdr: self.vnet_hdr,
            offloads: self.offloads,
            netns: self.netns.cloned(),
        };
        // With several workers, worker 0 spreads the TAP's flows (software RSS).
        let workers = cx.spec.workers;
        let (rx_next, rss, mut detail) = if workers > 1 {
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
        let counters: Arc<dyn graph::DriverCounters> = port.rx.device().clone();
        if self.offloads {
            let with = "checksum and TCP segmentation offloads";
            detail = if detail.is_empty() {
                with.to_string()
            } else {
                format!("{detail}, {with}")
            };
        }
        cx.graph.add_input(Box::new(port.rx));
        cx.graph.add_node(Box::new(port.tx));
        Ok(BuiltPort {
            // With offloads the kernel finishes checksums and segments (vnet headers).
            caps: if self.offloads {
                PortCaps::ALL
            } else {
                PortCaps::default()
            },
            driver: ports::tap::DRIVER,
            detail,
            tx: Some(cx.tx_name.clone()),
            rss,
            counters: Some(counters),
        })
    }

    fn may_hand_off(&self) -> bool {
        true
    }

    /// Worker 0 owns the TAP and receives on it.
    fn wants_jumbo_buffers(&self, worker: usize, _workers: usize) -> bool {
        self.offloads && worker == 0
    }
}

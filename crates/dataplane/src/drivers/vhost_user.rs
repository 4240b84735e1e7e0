//! vhost-user ports: the device (its control thread and socket) is opened once, by worker 0,
//! which owns both queues; with several workers worker 0 spreads the guest's flows (software
//! RSS) and the others hand it what they send.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::handoff;
use nodes::names;
use std::path::Path;
use std::sync::Arc;
use vhostuser::{SocketMode, VhostRx, VhostTx, VhostUserDevice};

pub(super) struct VhostUser<'a> {
    pub(super) socket: &'a Path,
    pub(super) mode: SocketMode,
}

impl<'a> Driver<'a> for VhostUser<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        if cx.worker > 0 {
            // Worker 0 owns the device and both queues; the others hand it what they send.
            return super::sent_by_worker0(cx, vhostuser::DRIVER);
        }
        let workers = cx.spec.workers;
        let (rx_next, rss) = if workers > 1 {
            (handoff::RSS_DISPATCH, true)
        } else {
            (names::ETHERNET_INPUT, false)
        };
        let device =
            Arc::new(VhostUserDevice::open(self.socket, self.mode).map_err(|e| cx.error(e.why))?);
        let mode = match self.mode {
            SocketMode::Server => "server",
            SocketMode::Client => "client",
        };
        let mut detail = format!("{mode} socket {}", self.socket.display());
        if workers > 1 {
            detail.push_str(&format!(", software RSS over {workers} workers"));
        }
        let counters: Arc<dyn graph::DriverCounters> = device.shared().clone();
        cx.graph.add_input(Box::new(VhostRx::new(
            cx.rx_name.clone(),
            cx.id,
            rx_next.to_string(),
            device.clone(),
            cx.stats.clone(),
        )));
        cx.graph.add_node(Box::new(VhostTx::new(
            cx.tx_name.clone(),
            device,
            cx.stats.clone(),
        )));
        Ok(BuiltPort {
            driver: vhostuser::DRIVER,
            detail,
            tx: Some(cx.tx_name.clone()),
            rss,
            counters: Some(counters),
        })
    }

    fn may_hand_off(&self) -> bool {
        true
    }
}

//! pcap ports: rx replays a file (its first bad record ends the replay and fails the run), tx
//! writes a nanosecond pcap file through `ports::outfile`'s checks. One worker only.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use nodes::names;
use nodes::offload::PortCaps;
use ports::{PcapRx, PcapTx};
use std::path::Path;

pub(super) struct Pcap<'a> {
    pub(super) rx: Option<&'a Path>,
    pub(super) tx: Option<&'a Path>,
}

impl<'a> Driver<'a> for Pcap<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        if cx.worker > 0 {
            return Err(cx.error("pcap ports run on one worker; accepted: workers = 1"));
        }
        if let Some(path) = self.rx {
            let node = PcapRx::open(
                cx.rx_name.clone(),
                cx.id,
                path,
                names::ETHERNET_INPUT.to_string(),
                cx.stats.clone(),
            )
            .map_err(|e| cx.error(e.to_string()))?;
            cx.graph.add_input(Box::new(node));
        }
        let mut tx = None;
        if let Some(path) = self.tx {
            let node = PcapTx::create_checked(
                cx.tx_name.clone(),
                cx.id,
                path,
                cx.stats.clone(),
                &cx.spec.input_files(),
            )
            .map_err(|e| cx.error(e.to_string()))?;
            cx.graph.add_node(Box::new(node));
            tx = Some(cx.tx_name.clone());
        }
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: "pcap",
            detail: String::new(),
            tx,
            rss: false,
            counters: None,
        })
    }

    fn input_file(&self) -> Option<&'a Path> {
        self.rx
    }

    fn output_file(&self) -> Option<&'a Path> {
        self.tx
    }
}

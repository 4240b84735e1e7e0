//! AF_XDP ports: one socket per queue on an existing kernel interface, the worker's pool as
//! UMEM, vecplane's own XDP redirect program. Worker `w` receives on queues `w, w + workers,
//! ...` and transmits on queue `w`; with fewer queues than workers the queue owners spread flows
//! in software (RSS) and the other workers hand what they send to an owner.

use super::{BuiltPort, Driver, PortContext};
use crate::build::BuildError;
use crate::handoff::{self, HandoffTx};
use crate::spec::XdpModeChoice;
use afxdp::{AfXdpConfig, AfXdpPort, Umem};
use nodes::names;
use nodes::offload::PortCaps;

pub(super) struct AfXdp<'a> {
    pub(super) interface: &'a str,
    pub(super) queues: u32,
    pub(super) mode: XdpModeChoice,
}

/// Receive queues of kernel interface `name` (1..=64).
pub(crate) fn rx_queues(name: &str) -> Result<u32, String> {
    let dir = format!("/sys/class/net/{name}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read {dir}: {e}"))?;
    let n = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Ok((n as u32).clamp(1, 64))
}

impl<'a> Driver<'a> for AfXdp<'a> {
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError> {
        let queues = if self.queues == 0 {
            rx_queues(self.interface).map_err(|e| cx.error(e))?
        } else {
            self.queues
        };
        let index = cx.worker;
        let workers = cx.spec.workers.max(1) as u32;
        // Fewer queues than workers: the queue owners spread flows in software.
        let rss = workers > queues;
        if rss && index as u32 >= queues {
            // No socket here: frames for this port go to its owner's ring.
            let owner = index % queues as usize;
            cx.graph.add_node(Box::new(HandoffTx::new(
                cx.tx_name.clone(),
                cx.id,
                owner,
                cx.shared.outbox(index)?,
            )));
            return Ok(BuiltPort {
                caps: PortCaps::default(),
                driver: "af-xdp",
                detail: format!("software RSS: sent by worker {owner}"),
                tx: Some(cx.tx_name.clone()),
                rss: true,
                counters: None,
            });
        }
        let umem = match cx.umem.as_ref() {
            Some(u) => u.clone(),
            None => {
                // A running worker's UMEM is made with the worker (PortControl passes it).
                let pool = cx
                    .pool
                    .ok_or_else(|| cx.error("the worker's pool cannot be AF_XDP memory"))?;
                let u = Umem::new(pool).map_err(|e| cx.error(e.to_string()))?;
                *cx.umem = Some(u.clone());
                u
            }
        };
        let mut detail = String::new();
        let mut needs_rss_nodes = false;
        for queue in (index as u32..queues).step_by(workers as usize) {
            let mut config = AfXdpConfig::new(self.interface.to_string(), queue, cx.id);
            config.mode = self.mode;
            let port = AfXdpPort::open(&umem, &config, cx.stats.clone())
                .map_err(|e| cx.error(format!("queue {queue}: {e}")))?;
            if queue == index as u32 {
                detail = format!(
                    "xdp {}, {}, {} queue{}{}",
                    port.mode(),
                    if port.zerocopy() { "zero-copy" } else { "copy" },
                    queues,
                    if queues == 1 { "" } else { "s" },
                    if rss {
                        format!(", software RSS over {workers} workers")
                    } else {
                        String::new()
                    }
                );
            }
            let rx_q = if queues == 1 {
                cx.rx_name.clone()
            } else {
                format!("{}{queue}", cx.rx_name)
            };
            let rx_next = if rss {
                needs_rss_nodes = true;
                handoff::RSS_DISPATCH
            } else {
                names::ETHERNET_INPUT
            };
            let (rx, tx) = port.into_nodes(rx_q, rx_next, cx.tx_name.clone());
            cx.graph.add_input(Box::new(rx));
            // One transmit node per port and worker: its first queue's socket.
            if queue == index as u32 {
                cx.graph.add_node(Box::new(tx));
            }
        }
        Ok(BuiltPort {
            caps: PortCaps::default(),
            driver: "af-xdp",
            detail,
            tx: Some(cx.tx_name.clone()),
            rss: needs_rss_nodes,
            counters: None,
        })
    }

    fn may_hand_off(&self) -> bool {
        true
    }
}

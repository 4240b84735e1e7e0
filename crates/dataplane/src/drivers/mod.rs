//! Port drivers: how one port of the spec becomes nodes of one worker's graph (`Driver`), and
//! which driver a `PortDriver` is (`of`, the one place that lists them). A new driver is a
//! module here with its `Driver` implementation, one arm in `of`, and its keys in the config's
//! driver table. Runs at build time on the control thread; never on the fast path.

mod af_packet;
mod af_xdp;
mod memory;
mod pcap;
mod tap;
mod vhost_user;
pub(crate) mod vxlan;

use crate::build::{BuildError, WorkersShared};
use crate::spec::{DataplaneSpec, PortDriver, PortSpec};
use afxdp::Umem;
use graph::{GraphBuilder, PortStats};
use nodes::offload::PortCaps;
use packet::BufferPool;
use std::path::Path;
use std::sync::Arc;

/// What building one port on one worker has at hand.
pub(crate) struct PortContext<'a> {
    pub(crate) spec: &'a DataplaneSpec,
    pub(crate) port: &'a PortSpec,
    /// Port id (index in the spec).
    pub(crate) id: u16,
    /// Worker being built.
    pub(crate) worker: usize,
    /// Its receive and transmit node names.
    pub(crate) rx_name: String,
    pub(crate) tx_name: String,
    /// Its counters on this worker.
    pub(crate) stats: Arc<PortStats>,
    /// Every port's counters on this worker (index = port id).
    pub(crate) all_stats: &'a [Arc<PortStats>],
    pub(crate) graph: &'a mut GraphBuilder,
    /// The worker's pool, when the worker is being built (None: a port added to a running
    /// worker, whose pool its thread owns).
    pub(crate) pool: Option<&'a BufferPool>,
    /// Jumbo buffers in the worker's pool.
    pub(crate) jumbo_capacity: usize,
    pub(crate) shared: &'a WorkersShared,
    /// The pool registered as UMEM, once per worker, by its first AF_XDP port.
    pub(crate) umem: &'a mut Option<Umem>,
}

impl PortContext<'_> {
    /// A build error of this port.
    pub(crate) fn error(&self, reason: impl Into<String>) -> BuildError {
        BuildError::Port {
            port: self.port.name.clone(),
            reason: reason.into(),
        }
    }
}

/// What a driver added for one port on one worker.
pub(crate) struct BuiltPort {
    /// The driver's name, as `show interfaces` prints it.
    pub(crate) driver: &'static str,
    /// Details worth showing (XDP mode, queues, software RSS); may be empty.
    pub(crate) detail: String,
    /// The transmit node `interface-output` sends this port's packets to (None: cannot send).
    pub(crate) tx: Option<String>,
    /// Whether this worker takes part in software RSS for it (rss-dispatch, handoff-rx).
    pub(crate) rss: bool,
    /// The driver's own counters, if it keeps any.
    pub(crate) counters: Option<Arc<dyn graph::DriverCounters>>,
    /// What its transmit node takes as it is (offloads, jumbo buffers); `interface-output`
    /// does the rest in software.
    pub(crate) caps: PortCaps,
}

/// Receive queues of kernel interface `name` (1..=64), as an AF_XDP port with `queues = 0`
/// opens them.
pub(crate) fn af_xdp_queues(name: &str) -> Result<u32, String> {
    af_xdp::rx_queues(name)
}

/// A port that worker 0 owns (TAP, vhost-user), on another worker: what this worker sends on
/// it is handed to worker 0, by a handoff node in place of the transmit node.
pub(crate) fn sent_by_worker0(
    cx: &mut PortContext<'_>,
    driver: &'static str,
) -> Result<BuiltPort, BuildError> {
    cx.graph.add_node(Box::new(crate::handoff::HandoffTx::new(
        cx.tx_name.clone(),
        cx.id,
        0,
        cx.shared.outbox(cx.worker)?,
    )));
    Ok(BuiltPort {
        caps: PortCaps::default(),
        driver,
        detail: "software RSS: sent by worker 0".to_string(),
        tx: Some(cx.tx_name.clone()),
        rss: true,
        counters: None,
    })
}

/// A port driver.
pub(crate) trait Driver<'a> {
    /// Add the port's nodes to `cx.graph` for worker `cx.worker`.
    fn build(&self, cx: &mut PortContext<'_>) -> Result<BuiltPort, BuildError>;

    /// Files the port reads (no output may overwrite them).
    fn input_file(&self) -> Option<&'a Path> {
        None
    }

    /// Files the port writes.
    fn output_file(&self) -> Option<&'a Path> {
        None
    }

    /// Whether, with several workers, frames of this port may be handed between workers
    /// (software RSS), so the handoff rings must exist.
    fn may_hand_off(&self) -> bool {
        false
    }

    /// Whether the port receives super-packets (segmentation offload) larger than an ordinary
    /// buffer on worker `worker` of `workers`, so that worker's pool must have jumbo buffers
    /// (`JUMBO_BUFFERS`).
    fn wants_jumbo_buffers(&self, _worker: usize, _workers: usize) -> bool {
        false
    }
}

/// Jumbo (64 KiB) buffers in the pool of a worker that has a port wanting them. The dispatcher
/// drains each input's vector before it polls the next, so one vector (256) of super-packets is
/// what a receiving port holds at once; with more parked (neighbour queues) the port only
/// drops the super-packets that find none (counted), small frames still flow. 256 x 64 KiB
/// = 16.8 MB, populated at start.
pub(crate) const JUMBO_BUFFERS: u32 = packet::VECTOR_SIZE as u32;

/// Whether any port of `spec` wants jumbo buffers in worker `worker`'s pool.
pub(crate) fn any_wants_jumbo_buffers(spec: &DataplaneSpec, worker: usize) -> bool {
    let workers = spec.workers.max(1);
    spec.ports
        .iter()
        .any(|p| of(&p.driver).wants_jumbo_buffers(worker, workers))
}

/// The driver of `d`.
pub(crate) fn of(d: &PortDriver) -> Box<dyn Driver<'_> + '_> {
    match d {
        PortDriver::Memory(m) => Box::new(memory::Memory(m)),
        PortDriver::Pcap { rx, tx } => Box::new(pcap::Pcap {
            rx: rx.as_deref(),
            tx: tx.as_deref(),
        }),
        PortDriver::AfPacket { interface, fanout } => Box::new(af_packet::AfPacket {
            interface,
            fanout: *fanout,
        }),
        PortDriver::AfXdp {
            interface,
            queues,
            mode,
        } => Box::new(af_xdp::AfXdp {
            interface,
            queues: *queues,
            mode: *mode,
        }),
        PortDriver::Tap {
            name,
            vnet_hdr,
            offloads,
        } => Box::new(tap::Tap {
            name,
            vnet_hdr: *vnet_hdr,
            offloads: *offloads,
            netns: None,
        }),
        PortDriver::ProbeHost(p) => Box::new(tap::Tap {
            name: &p.name,
            vnet_hdr: false,
            offloads: false,
            netns: Some(&p.netns),
        }),
        PortDriver::Vxlan(v) => Box::new(vxlan::Vxlan(v)),
        PortDriver::VhostUser {
            socket,
            mode,
            queues,
            access,
        } => Box::new(vhost_user::VhostUser {
            queues: *queues,
            socket,
            mode: *mode,
            access,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(name: &str, vnet_hdr: bool, offloads: bool) -> PortSpec {
        PortSpec {
            name: name.into(),
            mac: [2, 0, 0, 0, 0, 1],
            mtu: 1500,
            ip4: Vec::new(),
            ip6: Vec::new(),
            driver: PortDriver::Tap {
                name: name.into(),
                vnet_hdr,
                offloads,
            },
        }
    }

    #[test]
    fn only_a_port_with_offloads_asks_for_jumbo_buffers() {
        let mut spec = DataplaneSpec {
            ports: vec![
                tap("t0", false, false),
                tap("t1", true, false),
                PortSpec {
                    driver: PortDriver::Pcap { rx: None, tx: None },
                    ..tap("p0", false, false)
                },
            ],
            ..DataplaneSpec::default()
        };
        assert!(!any_wants_jumbo_buffers(&spec, 0));
        spec.ports.push(tap("t2", true, true));
        assert!(any_wants_jumbo_buffers(&spec, 0));
    }
}

//! The channels between the workers and the control plane, as one piece the build wires in:
//! the punt hub (every worker's punt ring, drained by the punt thread) and the inject rings,
//! and each worker's nodes on them (`inject-rx`, `flow-packet-out`). It builds; it never runs
//! on the fast path.

use crate::build::BuildError;
use crate::flows::FlowSwitch;
use crate::idle::Doorbell;
use crate::inject::InjectControl;
use crate::punt::PuntHub;
use crate::spec::DataplaneSpec;
use channel::punt::PuntConfig;
use graph::GraphBuilder;
use nodes::flow_switch::{FlowPacketOut, PacketOutBridge};
use nodes::inject::{packet_out_batch, InjectRx};
use std::sync::Arc;

/// The punt and inject channels of a data plane.
#[derive(Debug)]
pub struct Channels {
    /// Punted packets: the rings, the thread, the sinks, the counters.
    pub punt: Arc<PuntHub>,
    /// Injected packets: the rings and their limits.
    pub inject: Arc<InjectControl>,
}

impl Channels {
    /// The channels of `spec`'s workers (whose doorbells are `doorbells`).
    pub fn new(spec: &DataplaneSpec, doorbells: &[Arc<Doorbell>], tsc_hz: u64) -> Channels {
        let p = &spec.punt;
        let config = PuntConfig {
            slots: p.slots as usize,
            snap_bytes: p.snap_bytes as usize,
            per_second: p.per_second,
            burst: p.burst,
        };
        let bells: Vec<Arc<Doorbell>> = if doorbells.is_empty() {
            (0..spec.workers.max(1))
                .map(|_| Arc::new(Doorbell::new()))
                .collect()
        } else {
            doorbells.to_vec()
        };
        Channels {
            punt: Arc::new(PuntHub::new(config, spec.workers.max(1), tsc_hz)),
            inject: Arc::new(InjectControl::new(
                &bells,
                usize::from(spec.data_size),
                (p.inject_per_second, p.inject_burst),
                tsc_hz,
            )),
        }
    }

    /// Add worker `worker`'s `inject-rx` (and `flow-packet-out` when there are flow-mode
    /// bridges `flows`) to `b`.
    pub fn add_worker_nodes(
        &self,
        spec: &DataplaneSpec,
        b: &mut GraphBuilder,
        flows: &[Arc<FlowSwitch>],
        worker: usize,
    ) -> Result<(), BuildError> {
        let (ring, stats) = self.inject.take_consumer(worker).ok_or_else(|| {
            BuildError::Routing(format!("worker {worker}: its inject ring was taken"))
        })?;
        if flows.is_empty() {
            b.add_input(Box::new(InjectRx::new(ring, None, stats)));
            return Ok(());
        }
        let batch = packet_out_batch();
        let ports = crate::flows::flow_port_infos(spec.ports.len(), flows);
        let bridges = flows
            .iter()
            .map(|sw| PacketOutBridge {
                members: sw.ports().iter().map(|p| p.port as u16).collect(),
                shared: sw.worker_shared(worker).unwrap_or_default(),
            })
            .collect();
        b.add_node(Box::new(FlowPacketOut::new(
            bridges,
            &ports,
            batch.clone(),
            self.punt.producer(worker),
        )));
        b.add_input(Box::new(InjectRx::new(ring, Some(batch), stats)));
        Ok(())
    }
}

//! Turns a `DataplaneSpec` into one worker's pool and graph: port nodes, protocol nodes
//! (`add_protocol_nodes`, shared with the fuzz harness), FIBs, adjacencies, the neighbour tables
//! and the bridge. Runs once, on the control thread, before the worker starts; never on the fast
//! path.

use crate::flows::FlowSwitch;
use crate::handoff::{Handoff, HandoffRx, RssDispatch, SharedOutbox};
use crate::idle::Doorbell;
use crate::routing::{Routing, RoutingReaders, ROUTE_NODES};
use crate::spec::{DataplaneSpec, OptionsPolicy};
use crate::view::PortView;
use afxdp::Umem;
use graph::{Graph, GraphBuilder, PortStats};
use live::{Domain, WorkerEpoch};
use nodes::bridge::{BridgeConfig, BridgeDomainConfig, BridgePortConfig, BridgeStats, L2Bridge};
use nodes::drop::ErrorDrop;
use nodes::ethernet::{EthernetInput, PortL2, PortMode};
use nodes::flow_switch::{
    flow_switch_nodes, FlowMaintenance, FlowSwitch as FlowSwitchNode, SwitchSetup,
};
use nodes::icmp::{Ip4IcmpError, Ip6IcmpError, RateLimiter};
use nodes::ip4::{Ip4Input, Ip4Lookup, Ip4Options, Ip4Rewrite};
use nodes::ip6::{Ip6Input, Ip6Lookup, Ip6Rewrite};
use nodes::lb::{LbConfig, LbNode, LbProbe, LB};
use nodes::neighbour::{NeighbourConfig, NeighbourHandle, NeighbourPort};
use nodes::offload::PortCaps;
use nodes::output::InterfaceOutput;
use nodes::xconnect::{L2Xconnect, XconnectPeer};
use packet::{BufferPool, PoolConfig};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Errors building a worker (the spec was valid, but a resource was not).
#[derive(Debug, Error)]
pub enum BuildError {
    /// The buffer pool could not be made.
    #[error(transparent)]
    Pool(#[from] packet::PoolError),
    /// The graph could not be assembled.
    #[error(transparent)]
    Graph(#[from] graph::GraphError),
    /// A port could not be opened.
    #[error("port `{port}`: {reason}")]
    Port {
        /// Port name.
        port: String,
        /// What went wrong.
        reason: String,
    },
    /// A route or neighbour could not be installed.
    #[error("{0}")]
    Routing(String),
}

/// How long the FIBs took to build and how much memory they use.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FibStats {
    /// Seconds to build the IPv4 lookup table (`Ip4Fib::build` alone).
    pub ip4_build_seconds: f64,
    /// Bytes of the IPv4 lookup tables.
    pub ip4_memory_bytes: usize,
    /// IPv4 routes in the table (configured, connected, host and local).
    pub ip4_routes: usize,
    /// Seconds to build the IPv6 lookup table.
    pub ip6_build_seconds: f64,
    /// Bytes of the IPv6 lookup tables.
    pub ip6_memory_bytes: usize,
    /// IPv6 routes in the table.
    pub ip6_routes: usize,
}

/// One worker, ready to run.
pub struct BuiltWorker {
    /// Its buffer pool.
    pub pool: BufferPool,
    /// Its graph.
    pub graph: Graph,
    /// Its ports as the control plane sees them.
    pub ports: Vec<PortView>,
    /// FIB build figures.
    pub fib: FibStats,
    /// Its epoch handle: quiescent between rounds, offline while asleep or finished.
    pub epoch: Option<WorkerEpoch>,
    /// How it waits when idle, and its longest sleep (microseconds); changed live.
    pub poll: Arc<crate::idle::PollSetting>,
    /// Its sleeps.
    pub idle: Arc<crate::idle::IdleStats>,
    /// Its doorbell (in its wait set): rung to wake it while it sleeps.
    pub doorbell: Arc<Doorbell>,
    /// Its neighbour tables (flush them into `pool` when the worker ends).
    pub neighbours: NeighbourHandle,
    /// Its bridge's counters and MAC table snapshot, when it has bridge domains.
    pub bridge: Option<Arc<BridgeStats>>,
    /// Jobs the control side hands it while it runs (graph edits).
    pub mailbox: Arc<crate::mailbox::Mailbox>,
    /// Its pool as AF_XDP packet memory (None: the pool's slots cannot be AF_XDP chunks, and
    /// `umem_error` says why): shared by every AF_XDP socket of the worker, those of ports
    /// added at run time too; it takes back what closed sockets had lent the kernel.
    pub umem: Option<Umem>,
    /// Why the pool is no UMEM, when it is not.
    pub umem_error: Option<String>,
    /// Free buffers in its pool, as the worker last counted them.
    pub pool_free: Arc<std::sync::atomic::AtomicU64>,
    /// Its graph's counters as the control side reads them (republished after an edit).
    pub published_stats: Arc<crate::view::Published<graph::GraphStats>>,
    /// Its trace control as the control side reads it (republished after an edit).
    pub published_trace: Arc<crate::view::Published<graph::TraceControl>>,
}

/// What the workers of one data plane share: the packet capture, the software-RSS rings and
/// the routing tables (one FIB for every worker).
pub struct WorkersShared {
    /// `vecplane ctl pcap`.
    pub capture: Arc<graph::CaptureControl>,
    /// Rings between every pair of workers.
    pub handoff: Arc<Handoff>,
    /// Each worker's doorbell (index = worker): rung by whoever hands it work while it sleeps.
    pub doorbells: Vec<Arc<Doorbell>>,
    /// The live routing tables, changed by the control side.
    pub routing: Arc<Mutex<Routing>>,
    /// The settings that change live.
    pub policies: crate::view::LivePolicies,
    /// The flow-mode bridges' tables (in bridge order), changed by the control side.
    pub flows: Vec<Arc<FlowSwitch>>,
    /// The load balancer (empty without `[lb]`), changed by the control side.
    pub lb: Arc<crate::lb::LbControl>,
    /// The features on the arcs, and what is enabled where (changed by the control side).
    pub features: Arc<crate::features::FeatureArcs>,
    /// The punt and inject channels to the control plane.
    pub channels: Arc<crate::channels::Channels>,
    /// Each worker's epoch handle, taken by the worker built with that index.
    epochs: Mutex<Vec<Option<WorkerEpoch>>>,
    /// vhost-user devices by port id, opened by the first worker built that needs one.
    vhost_devices: Mutex<std::collections::HashMap<u16, Arc<vhostuser::VhostUserDevice>>>,
    /// Ports whose receive queues may move between workers (registered by their driver).
    movable: Mutex<Vec<crate::rebalance::MovablePort>>,
}

impl WorkersShared {
    /// For the workers of `spec` (rings only when an AF_XDP port may need them); builds the
    /// routing tables.
    pub fn new(spec: &DataplaneSpec, tsc_hz: u64) -> Result<WorkersShared, BuildError> {
        WorkersShared::with_features(spec, tsc_hz, Vec::new())
    }

    /// As `new`, with `features` on the arcs.
    pub fn with_features(
        spec: &DataplaneSpec,
        tsc_hz: u64,
        features: Vec<Arc<dyn crate::features::WorkerFeature>>,
    ) -> Result<WorkersShared, BuildError> {
        let workers = spec.workers.max(1);
        let rss = workers > 1
            && spec
                .ports
                .iter()
                .any(|p| crate::drivers::of(&p.driver).may_hand_off());
        let (domain, epochs) = Domain::new(workers);
        let doorbells: Vec<Arc<Doorbell>> =
            (0..workers).map(|_| Arc::new(Doorbell::new())).collect();
        let flows = flow_switches(spec, &domain, &doorbells, tsc_hz)?;
        // Every id a port may be given at run time has its place on the arcs.
        let places = spec.ports.len().max(crate::ports_live::MAX_PORTS);
        let features = crate::features::FeatureArcs::new(features, places, &domain)
            .map_err(|e| BuildError::Routing(format!("feature arcs: {e}")))?;
        let routing = Arc::new(Mutex::new(
            Routing::new(spec, domain.clone()).map_err(|e| BuildError::Routing(e.0))?,
        ));
        let lb = crate::lb::lb_control(spec, &domain, Some(routing.clone()))
            .map_err(|e| BuildError::Routing(format!("load balancer: {e}")))?;
        let channels = Arc::new(crate::channels::Channels::new(spec, &doorbells, tsc_hz));
        Ok(WorkersShared {
            capture: Arc::new(graph::CaptureControl::new(workers)),
            handoff: Arc::new(Handoff::new(if rss { &doorbells } else { &[] })),
            doorbells,
            routing,
            policies: crate::view::LivePolicies::new(spec),
            flows,
            lb,
            features: Arc::new(features),
            channels,
            epochs: Mutex::new(epochs.into_iter().map(Some).collect()),
            vhost_devices: Mutex::default(),
            movable: Mutex::default(),
        })
    }

    /// Port `port`'s vhost-user device, opened by `open` the first time a worker asks.
    pub(crate) fn vhost_device(
        &self,
        port: u16,
        open: impl FnOnce() -> Result<Arc<vhostuser::VhostUserDevice>, BuildError>,
    ) -> Result<Arc<vhostuser::VhostUserDevice>, BuildError> {
        let mut devices = self.vhost_devices.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = devices.get(&port) {
            return Ok(d.clone());
        }
        let d = open()?;
        devices.insert(port, d.clone());
        Ok(d)
    }

    /// Register a port whose receive queues may move (once per port).
    pub(crate) fn movable_port(&self, port: crate::rebalance::MovablePort) {
        let mut ports = self.movable.lock().unwrap_or_else(|p| p.into_inner());
        if ports.iter().all(|p| p.id != port.id) {
            ports.push(port);
        }
    }

    /// The ports registered by `movable_port`.
    pub(crate) fn take_movable(&self) -> Vec<crate::rebalance::MovablePort> {
        std::mem::take(&mut *self.movable.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Readers of the routing tables, for one worker.
    pub fn readers(&self) -> RoutingReaders {
        lock(&self.routing).readers()
    }

    /// Worker `index`'s outbox of handoff rings (an error when there are no rings).
    pub(crate) fn outbox(&self, index: usize) -> Result<SharedOutbox, BuildError> {
        self.handoff.outbox(index).ok_or_else(|| {
            BuildError::Routing(format!("worker {index}: no software-RSS rings were built"))
        })
    }

    /// Take worker `index`'s epoch handle (once).
    pub fn take_epoch(&self, index: usize) -> Option<WorkerEpoch> {
        self.epochs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(index)
            .and_then(Option::take)
    }
}

/// Lock the routing state, also after a panic elsewhere (its state is changed only by
/// `Routing::apply`, which checks before it writes).
pub fn lock(routing: &Mutex<Routing>) -> std::sync::MutexGuard<'_, Routing> {
    routing.lock().unwrap_or_else(|p| p.into_inner())
}

/// What `add_protocol_nodes` leaves for the control plane and the worker.
pub struct ProtocolState {
    /// FIB build figures.
    pub fib: FibStats,
    /// The worker's neighbour tables.
    pub neighbours: NeighbourHandle,
    /// The bridge's counters, when there are bridge domains.
    pub bridge: Option<Arc<BridgeStats>>,
}

impl BuiltWorker {
    /// Build worker `index` of `spec` (with a capture and handoff rings of its own).
    pub fn new(spec: &DataplaneSpec, index: usize, tsc_hz: u64) -> Result<BuiltWorker, BuildError> {
        BuiltWorker::with_shared(spec, index, tsc_hz, &WorkersShared::new(spec, tsc_hz)?)
    }

    /// Build worker `index` of `spec` with what the workers of one data plane share.
    pub fn with_shared(
        spec: &DataplaneSpec,
        index: usize,
        tsc_hz: u64,
        shared: &WorkersShared,
    ) -> Result<BuiltWorker, BuildError> {
        let capture = shared.capture.clone();
        let pool = BufferPool::with_jumbo(
            PoolConfig {
                buffers: spec.buffers,
                headroom: 128,
                data_size: spec.data_size,
                try_hugepages: true,
            },
            jumbo_buffers(spec, index),
        )?;
        let mut b = GraphBuilder::new();
        let mut views = Vec::new();
        let mut tx_nodes = Vec::new();
        let mut caps = Vec::new();
        // The pool as a UMEM (registered with the kernel by the first AF_XDP socket, at start
        // or later).
        let (mut umem, umem_error) = match Umem::new(&pool) {
            Ok(u) => (Some(u), None),
            Err(e) => (None, Some(e.to_string())),
        };
        // Whether this worker takes part in software RSS (rss-dispatch, handoff-rx).
        let mut needs_rss_nodes = false;
        let all_stats: Vec<Arc<PortStats>> = spec.ports.iter().map(|_| Arc::default()).collect();
        for (id, p) in spec.ports.iter().enumerate() {
            let stats = all_stats[id].clone();
            let mut cx = crate::drivers::PortContext {
                spec,
                port: p,
                id: id as u16,
                worker: index,
                rx_name: format!("{}-rx", p.name),
                tx_name: format!("{}-tx", p.name),
                stats: stats.clone(),
                all_stats: &all_stats,
                graph: &mut b,
                pool: Some(&pool),
                jumbo_capacity: pool.jumbo_capacity(),
                shared,
                umem: &mut umem,
            };
            let built = crate::drivers::of(&p.driver).build(&mut cx)?;
            needs_rss_nodes |= built.rss;
            tx_nodes.push(built.tx);
            caps.push(built.caps);
            views.push(PortView {
                name: p.name.clone(),
                driver: built.driver.to_string(),
                detail: built.detail,
                mac: p.mac,
                stats: vec![stats],
                driver_counters: built.counters,
            });
        }

        let protocols = add_protocol_nodes_with(
            spec,
            &mut b,
            (tx_nodes, &caps),
            tsc_hz,
            Some(capture),
            shared.readers(),
            &shared.policies,
            (&shared.flows, index, shared.channels.punt.producer(index)),
            &shared.lb,
            &shared.features,
        )?;
        shared
            .channels
            .add_worker_nodes(spec, &mut b, &shared.flows, index)?;
        if needs_rss_nodes {
            let workers = spec.workers.max(1);
            b.add_node(Box::new(RssDispatch::new(
                index,
                workers,
                shared.outbox(index)?,
            )));
            let inbox = shared.handoff.take_inbox(index).ok_or_else(|| {
                BuildError::Routing(format!("worker {index}: its handoff rings were taken"))
            })?;
            b.add_input(Box::new(HandoffRx::new(inbox)));
        }
        let graph = b.build(index, tsc_hz)?;
        Ok(BuiltWorker {
            pool_free: Arc::new(std::sync::atomic::AtomicU64::new(pool.available() as u64)),
            umem,
            umem_error,
            published_stats: crate::view::Published::new(graph.stats()),
            published_trace: crate::view::Published::new(graph.trace_control()),
            mailbox: Arc::default(),
            pool,
            graph,
            ports: views,
            fib: lock(&shared.routing).stats(),
            epoch: shared.take_epoch(index),
            poll: shared.policies.poll.get(index).cloned().unwrap_or_else(|| {
                Arc::new(crate::idle::PollSetting::new(
                    spec.poll.mode_of(index),
                    spec.poll.sleep_max_us,
                ))
            }),
            idle: Arc::new(crate::idle::IdleStats::default()),
            doorbell: shared
                .doorbells
                .get(index)
                .cloned()
                .unwrap_or_else(|| Arc::new(Doorbell::new())),
            neighbours: protocols.neighbours,
            bridge: protocols.bridge,
        })
    }
}

/// How many receive queues kernel interface `name` has (`/sys/class/net/NAME/queues/rx-*`).
/// Free the packets still queued for neighbour resolution (at stop, before the pool goes) and
/// count them, with any other drop the neighbour tables have not reported yet, as
/// `neighbour-tx` errors of `stats`. Returns the packets flushed. Call on the worker's thread.
pub fn flush_neighbours(
    neighbours: &NeighbourHandle,
    pool: &mut BufferPool,
    stats: &graph::GraphStats,
) -> u64 {
    let flushed = neighbours.flush(pool) as u64;
    let unreported = neighbours.with(|n| {
        // The final counters, for `--stats-json` and `show neighbours` after the stop.
        n.publish(graph::rdtsc());
        n.take_unreported()
    });
    for (reason, count) in nodes::neighbour::TX_ERRORS.iter().zip(unreported) {
        if let Some(id) = stats.error_id(nodes::neighbour::NEIGHBOUR_TX, reason) {
            if let Some(c) = stats.errors.get(id) {
                c.add(count);
            }
        }
    }
    flushed
}

/// The node's options policy for the spec's.
pub fn ip4_options(p: OptionsPolicy) -> Ip4Options {
    match p {
        OptionsPolicy::Forward => Ip4Options::Forward,
        OptionsPolicy::Drop => Ip4Options::Drop,
    }
}

/// Jumbo buffers (64 KiB each) worker `index` keeps for super-packets: `JUMBO_BUFFERS` when
/// one of its ports receives them there (see `Driver::wants_jumbo_buffers`), else none.
pub fn jumbo_buffers(spec: &DataplaneSpec, index: usize) -> u32 {
    if crate::drivers::any_wants_jumbo_buffers(spec, index) {
        crate::drivers::JUMBO_BUFFERS
    } else {
        0
    }
}

/// Add the protocol nodes of `spec` to `b`: `ethernet-input`, `l2-xconnect`, `l2-bridge` (when
/// there are bridge domains), the IPv4/IPv6 nodes with their FIBs, the neighbour nodes and the
/// `neighbour-tx` input (add the ports' inputs first), `interface-output` (to `tx_nodes[port]`)
/// and `error-drop`.
pub fn add_protocol_nodes(
    spec: &DataplaneSpec,
    b: &mut GraphBuilder,
    tx_nodes: Vec<Option<String>>,
    tsc_hz: u64,
) -> Result<ProtocolState, BuildError> {
    // Tables nobody changes: no worker epochs to wait for.
    let routing = Arc::new(Mutex::new(
        Routing::without_workers(spec).map_err(|e| BuildError::Routing(e.0))?,
    ));
    let policies = crate::view::LivePolicies::new(spec);
    let flows = flow_switches(spec, &Domain::new(0).0, &[], tsc_hz)?;
    let lb = crate::lb::lb_control(spec, &Domain::new(0).0, Some(routing.clone()))
        .map_err(|e| BuildError::Routing(format!("load balancer: {e}")))?;
    let features = crate::features::FeatureArcs::none(spec.ports.len());
    let readers = lock(&routing).readers();
    let mut state = add_protocol_nodes_with(
        spec,
        b,
        (tx_nodes, &[]),
        tsc_hz,
        None,
        readers,
        &policies,
        (&flows, 0, None),
        &lb,
        &features,
    )?;
    state.fib = lock(&routing).stats();
    Ok(state)
}

/// The flow-mode bridges of `spec` with their initial tables, published in `domain`.
pub fn flow_switches(
    spec: &DataplaneSpec,
    domain: &Domain,
    doorbells: &[Arc<Doorbell>],
    tsc_hz: u64,
) -> Result<Vec<Arc<FlowSwitch>>, BuildError> {
    let mut out = Vec::new();
    let tunnels = crate::flows::tunnel_ports(spec.ports.iter().map(Some));
    for b in &spec.bridges {
        let Some(f) = &b.flow else { continue };
        if out.len() == nodes::flow_switch::MAX_SWITCHES {
            return Err(BuildError::Routing(format!(
                "bridge `{}`: more than {} bridges in flow mode",
                b.name,
                nodes::flow_switch::MAX_SWITCHES
            )));
        }
        let tables = crate::flows::initial_tables(f, &tunnels).map_err(|(i, why)| {
            BuildError::Routing(format!("bridge `{}`: change {i}: {why}", b.name))
        })?;
        out.push(Arc::new(FlowSwitch::new(
            &b.name,
            f,
            tables,
            domain,
            doorbells.to_vec(),
            tsc_hz,
        )));
    }
    Ok(out)
}

/// `add_protocol_nodes`, with what each port takes as it is (`caps`, by port id; missing
/// ports take nothing), the packet capture of `vecplane ctl pcap` when `capture` is given,
/// the tables of `tables`, the live settings of `policies` and the flow-mode bridges of
/// `flows` (for worker `flows.1`, punting into `flows.2`), and the load balancer `lb` (its
/// `lb` node, which the lookups hand VIP prefixes' packets to and the IP inputs the NAT inside
/// ports' packets), with `features`' nodes on the arcs.
#[allow(clippy::too_many_arguments)]
pub fn add_protocol_nodes_with(
    spec: &DataplaneSpec,
    b: &mut GraphBuilder,
    (tx_nodes, caps): (Vec<Option<String>>, &[PortCaps]),
    tsc_hz: u64,
    capture: Option<Arc<graph::CaptureControl>>,
    tables: RoutingReaders,
    policies: &crate::view::LivePolicies,
    (flows, worker, punt): (&[Arc<FlowSwitch>], usize, Option<nodes::inject::SharedPunt>),
    lb: &crate::lb::LbControl,
    features: &crate::features::FeatureArcs,
) -> Result<ProtocolState, BuildError> {
    let neighbours = NeighbourHandle::new(
        &NeighbourConfig {
            ports: spec
                .ports
                .iter()
                .map(|p| NeighbourPort {
                    mac: p.mac,
                    mtu: p.mtu,
                    ip4: p.ip4.clone(),
                    ip6: p.ip6.clone(),
                })
                .collect(),
            capacity: spec.neighbour.capacity,
            reachable_seconds: spec.neighbour.reachable_seconds,
            gc_seconds: spec.neighbour.gc_seconds,
            queue_per_neighbour: spec.neighbour.queue_per_neighbour,
            ..NeighbourConfig::default()
        },
        tsc_hz,
    );
    neighbours.with(|n| {
        n.set_timers(policies.neighbour.clone());
        n.set_port_mtus(policies.port_mtus.clone());
        n.set_port_addresses(policies.port_addrs.clone());
    });
    let mut peers = vec![None; spec.ports.len()];
    let mut modes: Vec<PortL2> = spec
        .ports
        .iter()
        .map(|p| PortL2 {
            mac: p.mac,
            mode: PortMode::L3,
        })
        .collect();
    for x in &spec.xconnects {
        let to = spec.ports.get(x.to).ok_or_else(|| {
            BuildError::Routing(format!("xconnect to port {} which does not exist", x.to))
        })?;
        if let (Some(slot), Some(mode)) = (peers.get_mut(x.from), modes.get_mut(x.from)) {
            *slot = Some(XconnectPeer {
                to: x.to as u16,
                src_mac: to.mac,
                dst_mac: x.dst_mac,
            });
            mode.mode = PortMode::Xconnect;
        }
    }
    let mut domains = Vec::new();
    for (i, bridge) in spec.bridges.iter().enumerate() {
        let mut ports = Vec::new();
        for m in &bridge.ports {
            let mode = modes.get_mut(m.port).ok_or_else(|| {
                BuildError::Routing(format!(
                    "bridge `{}` names port {} which does not exist",
                    bridge.name, m.port
                ))
            })?;
            mode.mode = if bridge.flow.is_some() {
                PortMode::Flow
            } else {
                PortMode::Bridge
            };
            ports.push(BridgePortConfig {
                port: m.port as u16,
                mode: m.mode.clone(),
            });
        }
        domains.push(BridgeDomainConfig {
            id: i as u32 + 1,
            ports,
        });
    }

    let RoutingReaders {
        fib4,
        fib6,
        next_hops4: [lookup4, rewrite4],
        next_hops6: [lookup6, rewrite6],
    } = tables;
    let limiter = RateLimiter::shared(policies.icmp.clone());
    let bridge = if domains.is_empty() {
        None
    } else {
        let node = L2Bridge::new(&BridgeConfig {
            domains,
            max_macs: spec.bridge.max_macs,
            age_seconds: spec.bridge.age_seconds,
            ..BridgeConfig::default()
        })
        .map_err(|e| BuildError::Routing(e.0))?
        .with_aging(policies.bridge_age_seconds.clone());
        let stats = node.stats();
        b.add_node(Box::new(node));
        Some(stats)
    };
    let mut ethernet = EthernetInput::new(modes).with_arp();
    let interface_tx = || InterfaceOutput::new(tx_nodes.clone()).with_caps(caps);
    let mut output = interface_tx().with_arc(features.layout(), features.reader());
    if let Some(c) = capture {
        ethernet = ethernet.with_capture(c.clone());
        output = output.with_capture(c);
    }
    let has_vxlan = !crate::drivers::vxlan::tunnels(spec).is_empty();
    let probe_host = crate::probe_host::find(&spec.ports);
    if let Some((port, _)) = probe_host {
        b.add_node(Box::new(nodes::probe_reply::ProbeReply::new(
            port as u16,
            crate::probe_host::PROBE_MAC,
            has_vxlan,
        )));
    }
    b.add_node(Box::new(lb_node(spec, lb, worker, probe_host)?));
    let arcs = features.layout();
    let ip4_input = Ip4Input::shared(policies.ip4_options.clone())
        .with_arc(arcs, features.reader())
        .with_steer(LB, lb.steer());
    let ip6_input = Ip6Input::new()
        .with_nd()
        .with_arc(arcs, features.reader())
        .with_steer(LB, lb.steer());
    features.add_nodes(worker, b, interface_tx, tsc_hz)?;
    b.add_node(Box::new(ethernet))
        .add_node(Box::new(L2Xconnect::new(peers)))
        .add_node(Box::new(ip4_input))
        .add_node(Box::new({
            let lookup = Ip4Lookup::new(fib4, lookup4)
                .with_neighbours(neighbours.clone())
                .with_targets(ROUTE_NODES);
            // The probe host receives its probes' replies (and hands the rest to VXLAN);
            // VXLAN ports (their driver added `vxlan-input`) receive what is sent to us.
            if probe_host.is_some() {
                lookup.with_local(nodes::probe_reply::PROBE_REPLY)
            } else if has_vxlan {
                lookup.with_local(nodes::vxlan::VXLAN_INPUT)
            } else {
                lookup
            }
        }))
        .add_node(Box::new(
            Ip4Rewrite::new(rewrite4).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(
            Ip4IcmpError::new(
                spec.ports
                    .iter()
                    .map(|p| p.ip4.first().map(|a| a.0))
                    .collect(),
                limiter.clone(),
            )
            .with_addresses(policies.port_addrs.clone()),
        ))
        .add_node(Box::new(ip6_input))
        .add_node(Box::new({
            let lookup = Ip6Lookup::new(fib6, lookup6)
                .with_neighbours(neighbours.clone())
                .with_targets(ROUTE_NODES);
            if probe_host.is_some() {
                lookup.with_local(nodes::probe_reply::PROBE_REPLY)
            } else {
                lookup
            }
        }))
        .add_node(Box::new(
            Ip6Rewrite::new(rewrite6).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(
            Ip6IcmpError::new(
                spec.ports
                    .iter()
                    .map(|p| p.ip6.first().map(|a| a.0))
                    .collect(),
                limiter,
            )
            .with_addresses(policies.port_addrs.clone()),
        ))
        .add_node(Box::new(output))
        .add_node(Box::new(ErrorDrop::new()));
    if !flows.is_empty() {
        let (mut node, maintenance) = flow_switch_node(spec, flows, worker, tsc_hz)?;
        if let Some(p) = punt {
            node = node.with_punt(p);
        }
        b.add_node(Box::new(node));
        b.add_input(Box::new(maintenance));
    }
    let (nodes, input) = neighbours.nodes();
    for node in nodes {
        b.add_node(node);
    }
    b.add_input(input);
    Ok(ProtocolState {
        fib: FibStats::default(),
        neighbours,
        bridge,
    })
}

/// Worker `worker`'s `lb` node: in every graph (only VIP prefixes' routes and NAT inside ports
/// bring it packets); its flow tables come with the first VIP.
fn lb_node(
    spec: &DataplaneSpec,
    lb: &crate::lb::LbControl,
    worker: usize,
    probe_host: Option<(usize, &crate::probe_host::ProbeHostPort)>,
) -> Result<LbNode, BuildError> {
    let failed = |e: String| BuildError::Routing(format!("load balancer: {e}"));
    LbNode::new(LbConfig {
        tables: lb.reader(worker),
        counters: lb.counters(worker).unwrap_or_default(),
        slot: lb.table_slot(worker).map_err(|e| failed(e.to_string()))?,
        flow_entries: lb.with_tables(|t| t.conf().buckets) as usize,
        mtu: spec.ports.iter().map(|p| p.mtu).min().unwrap_or(1500),
        nat_inside: lb.nat_inside(),
        probe: probe_host.map(|(port, h)| LbProbe {
            port: port as u16,
            leases: h.leases.clone(),
            sources: spec
                .lb
                .as_ref()
                .map(|l| {
                    let s = l.health.sources;
                    let v4 = s.ip4.map(|a| a.to_ipv6_mapped().octets());
                    v4.into_iter().chain(s.ip6.map(|a| a.octets())).collect()
                })
                .unwrap_or_default(),
        }),
    })
    .map_err(|e| failed(e.to_string()))
}

/// Worker `worker`'s `flow-switch` node and its maintenance input over `flows`.
fn flow_switch_node(
    spec: &DataplaneSpec,
    flows: &[Arc<FlowSwitch>],
    worker: usize,
    tsc_hz: u64,
) -> Result<(FlowSwitchNode, FlowMaintenance), BuildError> {
    let ports = crate::flows::flow_port_infos(spec.ports.len(), flows);
    let mut setups = Vec::new();
    for sw in flows {
        let policy = spec
            .bridges
            .iter()
            .find(|b| b.name == sw.name())
            .and_then(|b| b.flow.as_ref())
            .map(|f| f.cache)
            .unwrap_or_default();
        setups.push(SwitchSetup {
            tables: sw.reader(),
            cache: crate::flows::cache_config(&policy),
            members: sw.ports().iter().map(|p| p.port as u16).collect(),
            shared: sw
                .worker_shared(worker)
                .unwrap_or_else(|| Arc::new(nodes::flow_switch::FlowWorkerShared::default())),
        });
    }
    flow_switch_nodes(ports, setups, tsc_hz)
        .map_err(|e| BuildError::Routing(format!("flow cache: {e}")))
}

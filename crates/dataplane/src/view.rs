//! What the control plane may see of a running data plane: shared, read-only counters and the
//! trace switches. The control plane reads these; it never touches packets or worker state.

use graph::{GraphStats, PortStats, TraceControl};
use packet::headers::Mac;
use std::sync::Arc;

/// A value a worker or the control side replaces now and then (a port added at run time grows
/// a worker's counters and the port list), read by the control side: `get` returns the current
/// one. Readers lock only to clone an `Arc`; the fast path never reads it.
#[derive(Debug)]
pub struct Published<T>(std::sync::Mutex<Arc<T>>);

impl<T> Published<T> {
    /// A slot holding `value`.
    pub fn new(value: Arc<T>) -> Arc<Published<T>> {
        Arc::new(Published(std::sync::Mutex::new(value)))
    }

    /// The current value.
    pub fn get(&self) -> Arc<T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replace the value.
    pub fn set(&self, value: Arc<T>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = value;
    }
}

/// Everything `show` commands read.
#[derive(Clone, Debug)]
pub struct RuntimeView {
    /// Ports in port-id order (replaced when a port is added or removed at run time; a removed
    /// port's id keeps an entry named `NAME (removed)` with driver `removed`, its counters
    /// frozen, until the id is given again).
    pub ports: Arc<Published<Vec<PortView>>>,
    /// Workers in worker order.
    pub workers: Vec<WorkerView>,
    /// What backs the buffer pool ("2 MiB hugepages" or "normal pages").
    pub pool_backing: String,
    /// Buffers in each worker's pool.
    pub pool_buffers: usize,
    /// TSC ticks per second (measured at start).
    pub tsc_hz: u64,
    /// Each worker's neighbour table snapshot (published by the worker about once a second).
    pub neighbours: Vec<nodes::neighbour::NeighbourView>,
    /// Each worker's bridge counters and MAC table snapshot (empty without bridge domains).
    pub bridges: Vec<Arc<nodes::bridge::BridgeStats>>,
    /// Bridge domain names, by domain id - 1.
    pub bridge_names: Vec<String>,
    /// The packet capture of `vecplane ctl pcap` (shared by the workers).
    pub capture: Arc<graph::CaptureControl>,
    /// The live routing tables (routes, static neighbours): read and changed by the control
    /// side only, through `Routing::apply`.
    pub routing: Arc<std::sync::Mutex<crate::routing::Routing>>,
    /// The settings that change live (reload).
    pub policies: LivePolicies,
    /// The flow-mode bridges (rules, groups, caches).
    pub flows: Vec<Arc<crate::flows::FlowSwitch>>,
    /// The load balancer (empty until `[lb]` or the first VIP): its tables, counters and NAT
    /// inside ports.
    pub lb: Arc<crate::lb::LbControl>,
    /// Where the receive queues that may move run, and their moves (None: none may move).
    pub rxq: Option<Arc<crate::rebalance::Rebalancer>>,
    /// The feature arcs: their features, and what is enabled on which port.
    pub features: Arc<crate::features::FeatureArcs>,
    /// The punt and inject channels between the workers and the control plane.
    pub channels: Arc<crate::channels::Channels>,
    /// Adds and removes ports while the workers run (None: not a running data plane).
    pub port_control: Option<Arc<crate::ports_live::PortControl>>,
}

/// The settings of a running data plane that the control plane changes live (reload): atomics
/// shared by every worker, which read them between rounds or where they use them.
#[derive(Clone, Debug)]
pub struct LivePolicies {
    /// Each worker's poll mode and longest sleep.
    pub poll: Vec<Arc<crate::idle::PollSetting>>,
    /// The ICMP error rate and burst (each worker keeps its own bucket).
    pub icmp: Arc<nodes::icmp::IcmpRate>,
    /// What `ip4-input` does with packets carrying options.
    pub ip4_options: Arc<nodes::ip4::Ip4OptionsSetting>,
    /// Neighbour entries' reachable and gc times.
    pub neighbour: Arc<nodes::neighbour::NeighbourTimers>,
    /// Bridge MAC aging, seconds (0: never).
    pub bridge_age_seconds: Arc<std::sync::atomic::AtomicU32>,
    /// Each port's MTU (the workers' neighbour entries follow it; static neighbours' adjacencies
    /// change through `Routing::set_port_mtu`).
    pub port_mtus: Arc<nodes::neighbour::PortMtus>,
    /// Each port's own addresses (ARP/ND answers and sources, ICMP error sources); the routes
    /// they make change through `Routing::set_port_addresses`.
    pub port_addrs: Arc<nodes::neighbour::PortAddresses>,
}

impl LivePolicies {
    /// The settings of `spec`, for its workers.
    pub fn new(spec: &crate::DataplaneSpec) -> LivePolicies {
        LivePolicies {
            poll: (0..spec.workers.max(1))
                .map(|w| {
                    Arc::new(crate::idle::PollSetting::new(
                        spec.poll.mode_of(w),
                        spec.poll.sleep_max_us,
                    ))
                })
                .collect(),
            icmp: Arc::new(nodes::icmp::IcmpRate::new(
                spec.ip.icmp_errors_per_second,
                spec.ip.icmp_errors_burst,
            )),
            ip4_options: Arc::new(nodes::ip4::Ip4OptionsSetting::new(
                crate::build::ip4_options(spec.ip.ip4_options),
            )),
            neighbour: Arc::new(nodes::neighbour::NeighbourTimers::new(
                spec.neighbour.reachable_seconds,
                spec.neighbour.gc_seconds,
            )),
            bridge_age_seconds: Arc::new(std::sync::atomic::AtomicU32::new(
                spec.bridge.age_seconds,
            )),
            // Room for the ports added at run time.
            port_mtus: Arc::new(nodes::neighbour::PortMtus::new(
                &(0..crate::ports_live::MAX_PORTS.max(spec.ports.len()))
                    .map(|i| spec.ports.get(i).map_or(0, |p| p.mtu))
                    .collect::<Vec<_>>(),
            )),
            port_addrs: Arc::new(nodes::neighbour::PortAddresses::new(
                spec.ports
                    .iter()
                    .map(|p| (p.ip4.clone(), p.ip6.clone()))
                    .collect(),
            )),
        }
    }
}

impl RuntimeView {
    /// The handles to the settings that change live.
    pub fn policies(&self) -> LivePolicies {
        self.policies.clone()
    }
}

/// One port.
#[derive(Clone, Debug)]
pub struct PortView {
    /// Port name.
    pub name: String,
    /// Driver name: `memory`, `pcap`, `af-packet`, `af-xdp` or `tap`.
    pub driver: String,
    /// Driver details worth showing (AF_XDP: XDP mode, copy or zero-copy, queues); may be empty.
    pub detail: String,
    /// Its MAC.
    pub mac: Mac,
    /// Its counters, one per worker (sum them).
    pub stats: Vec<Arc<PortStats>>,
    /// The driver's own counters and state, if it keeps any (vhost-user).
    pub driver_counters: Option<Arc<dyn graph::DriverCounters>>,
}

impl PortView {
    /// Why the port stopped early (a pcap record that ended its replay), if it did.
    pub fn failure(&self) -> Option<&str> {
        self.stats.iter().find_map(|s| s.failure())
    }
}

/// One worker.
#[derive(Clone, Debug)]
pub struct WorkerView {
    /// Worker number.
    pub index: usize,
    /// CPU it is pinned to.
    pub cpu: Option<usize>,
    /// Its graph's counters (replaced, values kept, when its graph is edited at run time).
    pub graph: Arc<Published<GraphStats>>,
    /// Its trace switches and records (replaced with its counters).
    pub trace: Arc<Published<TraceControl>>,
    /// `busy` or `adaptive`, and the longest sleep: read and changed live.
    pub poll: Arc<crate::idle::PollSetting>,
    /// Its sleeps (adaptive polling).
    pub idle: Arc<crate::idle::IdleStats>,
    /// Free buffers in its pool, as it last counted them (every few rounds and after each
    /// sleep): what ports, queues and rings hold is the rest.
    pub pool_free: Arc<std::sync::atomic::AtomicU64>,
}

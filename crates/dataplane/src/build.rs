//! Turns a `DataplaneSpec` into one worker's pool and graph: port nodes, protocol nodes
//! (`add_protocol_nodes`, shared with the fuzz harness), FIBs, adjacencies, the neighbour tables
//! and the bridge. Runs once, on the control thread, before the worker starts; never on the fast
//! path.

use crate::handoff::{self, Handoff, HandoffRx, HandoffTx, RssDispatch};
use crate::spec::{DataplaneSpec, OptionsPolicy, PortDriver, RouteSpec, RouteTarget};
use crate::view::PortView;
use afxdp::{AfXdpConfig, AfXdpPort, Umem};
use fib::{Ip4Fib, Ip6Fib};
use graph::{Graph, GraphBuilder, PortStats};
use nodes::adjacency::{Adjacency, NextHop, NextHopTable};
use nodes::bridge::{BridgeConfig, BridgeDomainConfig, BridgePortConfig, BridgeStats, L2Bridge};
use nodes::drop::ErrorDrop;
use nodes::ethernet::{EthernetInput, PortL2, PortMode};
use nodes::icmp::{Ip4IcmpError, Ip6IcmpError, RateLimiter};
use nodes::ip4::{Ip4Input, Ip4Lookup, Ip4Options, Ip4Rewrite};
use nodes::ip6::{Ip6Input, Ip6Lookup, Ip6Rewrite};
use nodes::names;
use nodes::neighbour::{NeighbourConfig, NeighbourHandle, NeighbourPort};
use nodes::output::InterfaceOutput;
use nodes::xconnect::{L2Xconnect, XconnectPeer};
use packet::headers::UdpFrameSpec;
use packet::{BufferPool, PoolConfig};
use ports::{
    AfPacketConfig, AfPacketPort, FlowSet, MemoryRx, MemoryTx, PcapRx, PcapTx, TapConfig, TapPort,
};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
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
    /// Its neighbour tables (flush them into `pool` when the worker ends).
    pub neighbours: NeighbourHandle,
    /// Its bridge's counters and MAC table snapshot, when it has bridge domains.
    pub bridge: Option<Arc<BridgeStats>>,
}

/// What the workers of one data plane share: the packet capture and the software-RSS rings.
pub struct WorkersShared {
    /// `vecplane ctl pcap`.
    pub capture: Arc<graph::CaptureControl>,
    /// Rings between every pair of workers.
    pub handoff: Arc<Handoff>,
}

impl WorkersShared {
    /// For the workers of `spec` (rings only when an AF_XDP port may need them).
    pub fn new(spec: &DataplaneSpec) -> WorkersShared {
        let workers = spec.workers.max(1);
        let rss = workers > 1
            && spec
                .ports
                .iter()
                .any(|p| matches!(p.driver, PortDriver::AfXdp { .. } | PortDriver::Tap { .. }));
        WorkersShared {
            capture: Arc::new(graph::CaptureControl::new(workers)),
            handoff: Arc::new(Handoff::new(if rss { workers } else { 0 })),
        }
    }
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

/// The next-hop ids of one family's special routes and groups, deduplicated.
struct NextHops {
    table: NextHopTable,
    groups: HashMap<Vec<u32>, u32>,
    drop: u32,
    local: u32,
    glean: HashMap<(u16, u8), u32>,
}

impl NextHops {
    fn new() -> NextHops {
        let mut table = NextHopTable::new();
        let drop = table.add_entry(NextHop::Drop);
        let local = table.add_entry(NextHop::Local);
        NextHops {
            table,
            groups: HashMap::new(),
            drop,
            local,
            glean: HashMap::new(),
        }
    }

    /// The entry of a connected prefix on `port` with `host_bits` host bits.
    fn glean(&mut self, port: u16, host_bits: u8) -> u32 {
        let table = &mut self.table;
        *self
            .glean
            .entry((port, host_bits))
            .or_insert_with(|| table.add_entry(NextHop::Glean { port, host_bits }))
    }

    fn group(&mut self, adjacencies: Vec<u32>) -> u32 {
        if let Some(&id) = self.groups.get(&adjacencies) {
            return id;
        }
        let id = self.table.add_group(&adjacencies);
        self.groups.insert(adjacencies, id);
        id
    }
}

/// Routes of one family as (prefix, length, next-hop id) with their next-hop table.
type RoutingTable<A> = (Vec<(A, u8, u32)>, NextHopTable);

/// Routes of one family as (prefix, length, next-hop id), in install order (later wins), and
/// their next-hop table. `A` is the address as an integer (u32 or u128). A route's next hop
/// that is not a static neighbour must lie in a port's prefix: `pin(port, hop)` makes it a
/// permanent neighbour-table entry resolved by ARP/ND.
#[allow(clippy::too_many_arguments)]
fn routing_table<A: Copy + Eq + std::hash::Hash + std::fmt::Display>(
    spec: &DataplaneSpec,
    own: impl Fn(&crate::spec::PortSpec) -> Vec<(A, u8)>,
    neighbour_ip: impl Fn(IpAddr) -> Option<A>,
    routes: &[(A, u8, RouteTarget<A>)],
    mask: impl Fn(A, u8) -> A,
    host_len: u8,
    mut pin: impl FnMut(u16, A) -> Option<u32>,
) -> Result<RoutingTable<A>, BuildError> {
    let mut nh = NextHops::new();
    // Install order matters only between equal prefixes (the later wins): neighbours' host
    // routes, connected prefixes, configured routes, then own addresses.
    let mut out = Vec::new();
    let mut adjacency_of = HashMap::new();
    for n in &spec.neighbours {
        let Some(ip) = neighbour_ip(n.ip) else {
            continue;
        };
        let port = spec.ports.get(n.port).ok_or_else(|| {
            BuildError::Routing(format!(
                "neighbour {} names port {} which does not exist",
                n.ip, n.port
            ))
        })?;
        let adj = nh
            .table
            .add_adjacency(Adjacency::new(n.port as u16, port.mtu, n.mac, port.mac));
        adjacency_of.insert(ip, adj);
        out.push((ip, host_len, nh.group(vec![adj])));
    }
    for (id, port) in spec.ports.iter().enumerate() {
        for (addr, len) in own(port) {
            if len < host_len {
                let glean = nh.glean(id as u16, host_len - len);
                out.push((mask(addr, len), len, glean));
            }
        }
    }
    // The port whose prefix holds `hop` (not one of its own addresses).
    let connected_port = |hop: A| {
        spec.ports.iter().enumerate().find_map(|(id, p)| {
            own(p)
                .into_iter()
                .any(|(addr, len)| {
                    len < host_len && addr != hop && mask(addr, len) == mask(hop, len)
                })
                .then_some(id as u16)
        })
    };
    for (prefix, len, target) in routes {
        let (prefix, len) = (*prefix, *len);
        let id = match target {
            RouteTarget::Drop => nh.drop,
            RouteTarget::Via(hops) => {
                let mut adjs = Vec::with_capacity(hops.len());
                for h in hops {
                    let adj = match adjacency_of.get(h) {
                        Some(adj) => *adj,
                        None => {
                            let port = connected_port(*h).ok_or_else(|| {
                                BuildError::Routing(format!(
                                    "route {prefix}/{len}: next hop {h} is neither a configured \
                                     neighbour nor inside a port's prefix"
                                ))
                            })?;
                            let id = pin(port, *h).ok_or_else(|| {
                                BuildError::Routing(format!(
                                    "route {prefix}/{len}: next hop {h}: the neighbour table is full"
                                ))
                            })?;
                            adjacency_of.insert(*h, id);
                            id
                        }
                    };
                    adjs.push(adj);
                }
                nh.group(adjs)
            }
        };
        out.push((prefix, len, id));
    }
    for port in &spec.ports {
        for (addr, _) in own(port) {
            out.push((addr, host_len, nh.local));
        }
    }
    Ok((out, nh.table))
}

/// Routes with their addresses as integers, the form the FIBs take.
fn integer_routes<A: Copy, B>(
    routes: &[RouteSpec<A>],
    to_int: impl Fn(A) -> B,
) -> Vec<(B, u8, RouteTarget<B>)> {
    routes
        .iter()
        .map(|r| {
            let target = match &r.target {
                RouteTarget::Drop => RouteTarget::Drop,
                RouteTarget::Via(v) => RouteTarget::Via(v.iter().map(|a| to_int(*a)).collect()),
            };
            (to_int(r.prefix), r.len, target)
        })
        .collect()
}

fn mask4(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - len))
    }
}

fn mask6(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - len))
    }
}

impl BuiltWorker {
    /// Build worker `index` of `spec` (with a capture and handoff rings of its own).
    pub fn new(spec: &DataplaneSpec, index: usize, tsc_hz: u64) -> Result<BuiltWorker, BuildError> {
        BuiltWorker::with_shared(spec, index, tsc_hz, &WorkersShared::new(spec))
    }

    /// Build worker `index` of `spec` with what the workers of one data plane share.
    pub fn with_shared(
        spec: &DataplaneSpec,
        index: usize,
        tsc_hz: u64,
        shared: &WorkersShared,
    ) -> Result<BuiltWorker, BuildError> {
        let capture = shared.capture.clone();
        let pool = BufferPool::new(PoolConfig {
            buffers: spec.buffers,
            headroom: 128,
            data_size: spec.data_size,
            try_hugepages: true,
        })?;
        let mut b = GraphBuilder::new();
        let mut views = Vec::new();
        let mut tx_nodes = Vec::new();
        // The pool registered as UMEM, once, by the first AF_XDP port.
        let mut umem: Option<Umem> = None;
        // Whether this worker takes part in software RSS (rss-dispatch, handoff-rx).
        let mut needs_rss_nodes = false;
        for (id, p) in spec.ports.iter().enumerate() {
            let port_err = |reason: String| BuildError::Port {
                port: p.name.clone(),
                reason,
            };
            let stats = Arc::new(PortStats::default());
            let rx_name = format!("{}-rx", p.name);
            let tx_name = format!("{}-tx", p.name);
            let mut detail = String::new();
            let driver = match &p.driver {
                PortDriver::Memory(m) => {
                    if m.generate {
                        let template = UdpFrameSpec {
                            dst_mac: m.dst_mac,
                            src_mac: m.src_mac,
                            vlan: m.vlan,
                            src_ip: m.src_ip,
                            dst_ip: m.destinations.first().copied().unwrap_or(m.src_ip),
                            frame_size: m.frame_size,
                            ..UdpFrameSpec::default()
                        };
                        let flows = FlowSet::new(&template, m.flows, &m.destinations)
                            .map_err(|e| port_err(e.to_string()))?;
                        b.add_input(Box::new(MemoryRx::new(
                            rx_name,
                            id as u16,
                            flows,
                            // Each worker generates its share of a limited run.
                            m.limit.map(|l| {
                                let n = spec.workers.max(1) as u64;
                                l / n + u64::from((index as u64) < l % n)
                            }),
                            names::ETHERNET_INPUT.to_string(),
                            stats.clone(),
                        )));
                    }
                    b.add_node(Box::new(MemoryTx::new(
                        tx_name.clone(),
                        id as u16,
                        stats.clone(),
                    )));
                    tx_nodes.push(Some(tx_name));
                    "memory"
                }
                PortDriver::Pcap { .. } if index > 0 => {
                    return Err(port_err(
                        "pcap ports run on one worker; accepted: workers = 1".into(),
                    ));
                }
                PortDriver::Tap { .. } if index > 0 => {
                    // Worker 0 owns the TAP; the others hand what they send on it to worker 0.
                    b.add_node(Box::new(HandoffTx::new(
                        tx_name.clone(),
                        id as u16,
                        shared.handoff.ring(index, 0),
                    )));
                    needs_rss_nodes = true;
                    tx_nodes.push(Some(tx_name));
                    detail = "software RSS: sent by worker 0".to_string();
                    ports::tap::DRIVER
                }
                PortDriver::Pcap { rx, tx } => {
                    if let Some(path) = rx {
                        let node = PcapRx::open(
                            rx_name,
                            id as u16,
                            path,
                            names::ETHERNET_INPUT.to_string(),
                            stats.clone(),
                        )
                        .map_err(|e| port_err(e.to_string()))?;
                        b.add_input(Box::new(node));
                    }
                    if let Some(path) = tx {
                        let node = PcapTx::create(tx_name.clone(), id as u16, path, stats.clone())
                            .map_err(|e| port_err(e.to_string()))?;
                        b.add_node(Box::new(node));
                        tx_nodes.push(Some(tx_name));
                    } else {
                        tx_nodes.push(None);
                    }
                    "pcap"
                }
                PortDriver::AfPacket { interface, fanout } => {
                    let mut config = AfPacketConfig::new(interface.clone());
                    config.fanout = *fanout;
                    if spec.workers > 1 && fanout.is_none() {
                        // Every worker's socket must join the same group: derive one from
                        // the process and the port, unlikely to meet another process's.
                        config.fanout = Some(
                            (std::process::id() as u16)
                                .wrapping_mul(31)
                                .wrapping_add(id as u16),
                        );
                    }
                    let port = AfPacketPort::open(
                        &config,
                        id as u16,
                        rx_name,
                        tx_name.clone(),
                        names::ETHERNET_INPUT.to_string(),
                        stats.clone(),
                    )
                    .map_err(|e| port_err(e.to_string()))?;
                    b.add_input(Box::new(port.rx));
                    b.add_node(Box::new(port.tx));
                    tx_nodes.push(Some(tx_name));
                    ports::af_packet::DRIVER
                }
                PortDriver::AfXdp {
                    interface,
                    queues,
                    mode,
                } => {
                    let queues = &if *queues == 0 {
                        rx_queues(interface).map_err(port_err)?
                    } else {
                        *queues
                    };
                    let workers = spec.workers.max(1) as u32;
                    // Fewer queues than workers: the queue owners spread flows in software.
                    let rss = workers > *queues;
                    if rss && index as u32 >= *queues {
                        // No socket here: frames for this port go to its owner's ring.
                        let owner = index % *queues as usize;
                        b.add_node(Box::new(HandoffTx::new(
                            tx_name.clone(),
                            id as u16,
                            shared.handoff.ring(index, owner),
                        )));
                        detail = format!("software RSS: sent by worker {owner}");
                        needs_rss_nodes = true;
                        tx_nodes.push(Some(tx_name));
                        views.push(PortView {
                            name: p.name.clone(),
                            driver: "af-xdp".to_string(),
                            detail,
                            mac: p.mac,
                            stats: vec![stats],
                        });
                        continue;
                    }
                    let umem = match &umem {
                        Some(u) => u.clone(),
                        None => {
                            let u = Umem::new(&pool).map_err(|e| port_err(e.to_string()))?;
                            umem = Some(u.clone());
                            u
                        }
                    };
                    // Worker `index` receives on queues index, index + workers, ... and
                    // transmits on queue `index`.
                    for queue in (index as u32..*queues).step_by(workers as usize) {
                        let mut config = AfXdpConfig::new(interface.clone(), queue, id as u16);
                        config.mode = *mode;
                        let port = AfXdpPort::open(&umem, &config, stats.clone())
                            .map_err(|e| port_err(format!("queue {queue}: {e}")))?;
                        if queue == index as u32 {
                            detail = format!(
                                "xdp {}, {}, {} queue{}{}",
                                port.mode(),
                                if port.zerocopy() { "zero-copy" } else { "copy" },
                                queues,
                                if *queues == 1 { "" } else { "s" },
                                if rss {
                                    format!(", software RSS over {workers} workers")
                                } else {
                                    String::new()
                                }
                            );
                        }
                        let rx_q = if *queues == 1 {
                            rx_name.clone()
                        } else {
                            format!("{rx_name}{queue}")
                        };
                        let rx_next = if rss {
                            needs_rss_nodes = true;
                            handoff::RSS_DISPATCH
                        } else {
                            names::ETHERNET_INPUT
                        };
                        let (rx, tx) = port.into_nodes(rx_q, rx_next, tx_name.clone());
                        b.add_input(Box::new(rx));
                        // One transmit node per port and worker: its first queue's socket.
                        if queue == index as u32 {
                            b.add_node(Box::new(tx));
                        }
                    }
                    tx_nodes.push(Some(tx_name));
                    "af-xdp"
                }
                PortDriver::Tap { name, vnet_hdr } => {
                    let config = TapConfig {
                        name: name.clone(),
                        vnet_hdr: *vnet_hdr,
                    };
                    // With several workers, worker 0 spreads the TAP's flows (software RSS).
                    let rx_next = if spec.workers > 1 {
                        needs_rss_nodes = true;
                        detail = format!("software RSS over {} workers", spec.workers);
                        handoff::RSS_DISPATCH
                    } else {
                        names::ETHERNET_INPUT
                    };
                    let port = TapPort::open(
                        &config,
                        id as u16,
                        rx_name,
                        tx_name.clone(),
                        rx_next.to_string(),
                        stats.clone(),
                    )
                    .map_err(|e| port_err(e.to_string()))?;
                    b.add_input(Box::new(port.rx));
                    b.add_node(Box::new(port.tx));
                    tx_nodes.push(Some(tx_name));
                    ports::tap::DRIVER
                }
            };
            views.push(PortView {
                name: p.name.clone(),
                driver: driver.to_string(),
                detail,
                mac: p.mac,
                stats: vec![stats],
            });
        }

        let protocols = add_protocol_nodes_with(spec, &mut b, tx_nodes, tsc_hz, Some(capture))?;
        if needs_rss_nodes {
            let workers = spec.workers.max(1);
            b.add_node(Box::new(RssDispatch::new(
                index,
                (0..workers)
                    .map(|w| shared.handoff.ring(index, w))
                    .collect(),
            )));
            b.add_input(Box::new(HandoffRx::new(
                (0..workers)
                    .filter(|&w| w != index)
                    .map(|w| shared.handoff.ring(w, index))
                    .collect(),
            )));
        }
        let graph = b.build(index, tsc_hz)?;
        Ok(BuiltWorker {
            pool,
            graph,
            ports: views,
            fib: protocols.fib,
            neighbours: protocols.neighbours,
            bridge: protocols.bridge,
        })
    }
}

/// How many receive queues kernel interface `name` has (`/sys/class/net/NAME/queues/rx-*`).
fn rx_queues(name: &str) -> Result<u32, String> {
    let dir = format!("/sys/class/net/{name}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read {dir}: {e}"))?;
    let n = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Ok((n as u32).clamp(1, 64))
}

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
    add_protocol_nodes_with(spec, b, tx_nodes, tsc_hz, None)
}

/// `add_protocol_nodes`, with the packet capture of `vecplane ctl pcap` when `capture` is given.
pub fn add_protocol_nodes_with(
    spec: &DataplaneSpec,
    b: &mut GraphBuilder,
    tx_nodes: Vec<Option<String>>,
    tsc_hz: u64,
    capture: Option<Arc<graph::CaptureControl>>,
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
            mode.mode = PortMode::Bridge;
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

    let mut fib = FibStats::default();
    let routes4_spec = integer_routes(&spec.routes4, u32::from);
    let (routes4, nh4) = routing_table(
        spec,
        |p| p.ip4.iter().map(|(a, l)| (u32::from(*a), *l)).collect(),
        |ip| match ip {
            IpAddr::V4(a) => Some(u32::from(a)),
            IpAddr::V6(_) => None,
        },
        &routes4_spec,
        mask4,
        32,
        |port, hop| neighbours.with(|n| n.pin4(port, hop.into())),
    )?;
    let t = Instant::now();
    let fib4 = Ip4Fib::build(&routes4).map_err(|e| BuildError::Routing(e.to_string()))?;
    fib.ip4_build_seconds = t.elapsed().as_secs_f64();
    fib.ip4_memory_bytes = fib4.memory_bytes();
    fib.ip4_routes = fib4.route_count();
    let routes6_spec = integer_routes(&spec.routes6, u128::from);
    let (routes6, nh6) = routing_table(
        spec,
        |p| p.ip6.iter().map(|(a, l)| (u128::from(*a), *l)).collect(),
        |ip| match ip {
            IpAddr::V6(a) => Some(u128::from(a)),
            IpAddr::V4(_) => None,
        },
        &routes6_spec,
        mask6,
        128,
        |port, hop| neighbours.with(|n| n.pin6(port, hop.into())),
    )?;
    let t = Instant::now();
    let fib6 = Ip6Fib::build(&routes6).map_err(|e| BuildError::Routing(e.to_string()))?;
    fib.ip6_build_seconds = t.elapsed().as_secs_f64();
    fib.ip6_memory_bytes = fib6.memory_bytes();
    fib.ip6_routes = fib6.route_count();
    let (nh4, nh6) = (Arc::new(nh4), Arc::new(nh6));

    let limiter = RateLimiter::new(spec.ip.icmp_errors_per_second, spec.ip.icmp_errors_burst);
    let options = match spec.ip.ip4_options {
        OptionsPolicy::Forward => Ip4Options::Forward,
        OptionsPolicy::Drop => Ip4Options::Drop,
    };
    let bridge = if domains.is_empty() {
        None
    } else {
        let node = L2Bridge::new(&BridgeConfig {
            domains,
            max_macs: spec.bridge.max_macs,
            age_seconds: spec.bridge.age_seconds,
            ..BridgeConfig::default()
        })
        .map_err(|e| BuildError::Routing(e.0))?;
        let stats = node.stats();
        b.add_node(Box::new(node));
        Some(stats)
    };
    let mut ethernet = EthernetInput::new(modes).with_arp();
    let mut output = InterfaceOutput::new(tx_nodes);
    if let Some(c) = capture {
        ethernet = ethernet.with_capture(c.clone());
        output = output.with_capture(c);
    }
    b.add_node(Box::new(ethernet))
        .add_node(Box::new(L2Xconnect::new(peers)))
        .add_node(Box::new(Ip4Input::new(options)))
        .add_node(Box::new(
            Ip4Lookup::new(Arc::new(fib4), nh4.clone()).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(
            Ip4Rewrite::new(nh4).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(Ip4IcmpError::new(
            spec.ports
                .iter()
                .map(|p| p.ip4.first().map(|a| a.0))
                .collect(),
            limiter,
        )))
        .add_node(Box::new(Ip6Input::new().with_nd()))
        .add_node(Box::new(
            Ip6Lookup::new(Arc::new(fib6), nh6.clone()).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(
            Ip6Rewrite::new(nh6).with_neighbours(neighbours.clone()),
        ))
        .add_node(Box::new(Ip6IcmpError::new(
            spec.ports
                .iter()
                .map(|p| p.ip6.first().map(|a| a.0))
                .collect(),
            limiter,
        )))
        .add_node(Box::new(output))
        .add_node(Box::new(ErrorDrop::new()));
    let (nodes, input) = neighbours.nodes();
    for node in nodes {
        b.add_node(node);
    }
    b.add_input(input);
    Ok(ProtocolState {
        fib,
        neighbours,
        bridge,
    })
}

//! Turns a `DataplaneSpec` into one worker's pool and graph: port nodes, protocol nodes, FIBs and
//! adjacencies. Runs once, on the control thread, before the worker starts; never on the fast path.

use crate::spec::{DataplaneSpec, OptionsPolicy, PortDriver, RouteSpec, RouteTarget};
use crate::view::PortView;
use fib::{Ip4Fib, Ip6Fib};
use graph::{Graph, GraphBuilder, PortStats};
use nodes::adjacency::{Adjacency, NextHop, NextHopTable};
use nodes::drop::ErrorDrop;
use nodes::ethernet::{EthernetInput, PortL2, PortMode};
use nodes::icmp::{Ip4IcmpError, Ip6IcmpError, RateLimiter};
use nodes::ip4::{Ip4Input, Ip4Lookup, Ip4Options, Ip4Rewrite};
use nodes::ip6::{Ip6Input, Ip6Lookup, Ip6Rewrite};
use nodes::names;
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
}

/// The next-hop ids of one family's special routes and groups, deduplicated.
struct NextHops {
    table: NextHopTable,
    groups: HashMap<Vec<u32>, u32>,
    drop: u32,
    local: u32,
    unresolved: u32,
}

impl NextHops {
    fn new() -> NextHops {
        let mut table = NextHopTable::new();
        let drop = table.add_entry(NextHop::Drop);
        let local = table.add_entry(NextHop::Local);
        let unresolved = table.add_entry(NextHop::Unresolved);
        NextHops {
            table,
            groups: HashMap::new(),
            drop,
            local,
            unresolved,
        }
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
/// their next-hop table. `A` is the address as an integer (u32 or u128).
fn routing_table<A: Copy + Eq + std::hash::Hash + std::fmt::Display>(
    spec: &DataplaneSpec,
    own: impl Fn(&crate::spec::PortSpec) -> Vec<(A, u8)>,
    neighbour_ip: impl Fn(IpAddr) -> Option<A>,
    routes: &[(A, u8, RouteTarget<A>)],
    mask: impl Fn(A, u8) -> A,
    host_len: u8,
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
    for port in &spec.ports {
        for (addr, len) in own(port) {
            if len < host_len {
                out.push((mask(addr, len), len, nh.unresolved));
            }
        }
    }
    for (prefix, len, target) in routes {
        let (prefix, len) = (*prefix, *len);
        let id = match target {
            RouteTarget::Drop => nh.drop,
            RouteTarget::Via(hops) => {
                let mut adjs = Vec::with_capacity(hops.len());
                for h in hops {
                    let adj = adjacency_of.get(h).ok_or_else(|| {
                        BuildError::Routing(format!(
                            "route {prefix}/{len}: next hop {h} is not a configured neighbour"
                        ))
                    })?;
                    adjs.push(*adj);
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
    /// Build worker `index` of `spec`.
    pub fn new(spec: &DataplaneSpec, index: usize, tsc_hz: u64) -> Result<BuiltWorker, BuildError> {
        let pool = BufferPool::new(PoolConfig {
            buffers: spec.buffers,
            headroom: 128,
            data_size: spec.data_size,
            try_hugepages: true,
        })?;
        let mut b = GraphBuilder::new();
        let mut views = Vec::new();
        let mut tx_nodes = Vec::new();
        for (id, p) in spec.ports.iter().enumerate() {
            let port_err = |reason: String| BuildError::Port {
                port: p.name.clone(),
                reason,
            };
            let stats = Arc::new(PortStats::default());
            let rx_name = format!("{}-rx", p.name);
            let tx_name = format!("{}-tx", p.name);
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
                            m.limit,
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
                PortDriver::Tap { name, vnet_hdr } => {
                    let config = TapConfig {
                        name: name.clone(),
                        vnet_hdr: *vnet_hdr,
                    };
                    let port = TapPort::open(
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
                    ports::tap::DRIVER
                }
            };
            views.push(PortView {
                name: p.name.clone(),
                driver: driver.to_string(),
                mac: p.mac,
                stats: vec![stats],
            });
        }

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
        b.add_node(Box::new(EthernetInput::new(modes)))
            .add_node(Box::new(L2Xconnect::new(peers)))
            .add_node(Box::new(Ip4Input::new(options)))
            .add_node(Box::new(Ip4Lookup::new(Arc::new(fib4), nh4.clone())))
            .add_node(Box::new(Ip4Rewrite::new(nh4)))
            .add_node(Box::new(Ip4IcmpError::new(
                spec.ports
                    .iter()
                    .map(|p| p.ip4.first().map(|a| a.0))
                    .collect(),
                limiter,
            )))
            .add_node(Box::new(Ip6Input))
            .add_node(Box::new(Ip6Lookup::new(Arc::new(fib6), nh6.clone())))
            .add_node(Box::new(Ip6Rewrite::new(nh6)))
            .add_node(Box::new(Ip6IcmpError::new(
                spec.ports
                    .iter()
                    .map(|p| p.ip6.first().map(|a| a.0))
                    .collect(),
                limiter,
            )))
            .add_node(Box::new(InterfaceOutput::new(tx_nodes)))
            .add_node(Box::new(ErrorDrop::new()));
        let graph = b.build(index, tsc_hz)?;
        Ok(BuiltWorker {
            pool,
            graph,
            ports: views,
            fib,
        })
    }
}

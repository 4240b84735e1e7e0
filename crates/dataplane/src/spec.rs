//! The validated description of a data plane: what `control` produces from a config file or the
//! API, and what `dataplane` builds graphs from. Plain data with no parsing and no I/O: every
//! value here has already been checked (names resolve, prefixes are canonical, MACs parse).

pub use afxdp::ModeChoice as XdpModeChoice;
pub use nodes::bridge::BridgePortMode;
pub use nodes::vxlan::Vni as VxlanVni;
/// Largest `BridgePolicy::max_macs`.
pub const MAX_BRIDGE_MACS: usize = nodes::bridge::MAX_MAX_MACS;
/// Largest `NeighbourPolicy::capacity`.
pub const MAX_NEIGHBOUR_CAPACITY: usize = nodes::neighbour::MAX_CAPACITY;
use packet::headers::Mac;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// The whole data plane.
#[derive(Clone, Debug, PartialEq)]
pub struct DataplaneSpec {
    /// Buffer pool of the worker.
    pub buffers: u32,
    /// Bytes of packet data per buffer (default 2048).
    pub data_size: u16,
    /// CPU the worker thread is pinned to (None: not pinned); with several workers, worker `w`
    /// is pinned to `worker_cpus[w]` instead.
    pub worker_cpu: Option<usize>,
    /// Worker threads (1..): each has its own pool, graph and neighbour table; flows are spread
    /// over them by the kernel (AF_XDP queues, AF_PACKET fanout hash), so a flow stays on one.
    pub workers: usize,
    /// CPU of each worker when there are several (empty: not pinned).
    pub worker_cpus: Vec<usize>,
    /// Ports, in port-id order (port id = index).
    pub ports: Vec<PortSpec>,
    /// IPv4 routes.
    pub routes4: Vec<RouteSpec<Ipv4Addr>>,
    /// IPv6 routes.
    pub routes6: Vec<RouteSpec<Ipv6Addr>>,
    /// Static neighbours (IPv4 and IPv6).
    pub neighbours: Vec<NeighbourSpec>,
    /// Port-to-port cross-connects (their `from` ports bypass IP processing).
    pub xconnects: Vec<XconnectSpec>,
    /// Bridge domains (their ports bypass IP processing).
    pub bridges: Vec<BridgeSpec>,
    /// MAC table bound and aging of the bridges.
    pub bridge: BridgePolicy,
    /// IP-level policies.
    pub ip: IpPolicy,
    /// Neighbour (ARP/ND) table sizes and timers.
    pub neighbour: NeighbourPolicy,
    /// How each worker waits for packets when its inputs are idle.
    pub poll: PollPolicy,
    /// Receive queues placed over the workers by measured load.
    pub rxq: RxqPolicy,
    /// The punt and inject channels between the workers and the control plane.
    pub punt: PuntPolicy,
    /// The L4 load balancer (`[lb]`); None: an empty one (the `lb` node is in every graph, and
    /// VIPs may come at run time; no flow tables until the first).
    pub lb: Option<LbSpec>,
}

/// The load balancer's starting configuration: the validated `lb` model (VIPs, servers,
/// weights, `lb conf`, NAT inside port names, all checked against the config's ports). Changed
/// at run time only through `lb::LbControl`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LbSpec {
    /// VIPs, servers and `lb conf`, with their stable ids.
    pub state: ::lb::model::LbState,
    /// The servers' health checks and the probe sources (`[lb]` `probe-source4`,
    /// `probe-source6`, `[[lb.health-check]]`), validated against `state`.
    pub health: ::lb::health::HealthConfig,
}

impl DataplaneSpec {
    /// Identities of the files the run reads (pcap `rx`), which no output may overwrite.
    pub fn input_files(&self) -> Vec<ports::outfile::FileId> {
        self.ports
            .iter()
            .filter_map(|p| {
                crate::drivers::of(&p.driver)
                    .input_file()
                    .and_then(ports::outfile::file_id)
            })
            .collect()
    }

    /// The pcap files the run writes (`tx`).
    pub fn output_files(&self) -> Vec<&std::path::Path> {
        self.ports
            .iter()
            .filter_map(|p| crate::drivers::of(&p.driver).output_file())
            .collect()
    }

    /// The CPU worker `w` is pinned to, if any.
    pub fn cpu_of(&self, w: usize) -> Option<usize> {
        if self.workers <= 1 && w == 0 {
            return self
                .worker_cpu
                .or_else(|| self.worker_cpus.first().copied());
        }
        self.worker_cpus.get(w).copied()
    }
}

impl Default for DataplaneSpec {
    fn default() -> Self {
        DataplaneSpec {
            buffers: 16384,
            data_size: 2048,
            worker_cpu: None,
            workers: 1,
            worker_cpus: Vec::new(),
            ports: Vec::new(),
            routes4: Vec::new(),
            routes6: Vec::new(),
            neighbours: Vec::new(),
            xconnects: Vec::new(),
            bridges: Vec::new(),
            bridge: BridgePolicy::default(),
            ip: IpPolicy::default(),
            neighbour: NeighbourPolicy::default(),
            poll: PollPolicy::default(),
            rxq: RxqPolicy::default(),
            punt: PuntPolicy::default(),
            lb: None,
        }
    }
}

/// How a worker waits for packets (`poll-mode` in the config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PollMode {
    /// Poll the inputs without pause: lowest latency, one whole CPU per worker even when idle.
    Busy,
    /// Poll while there is traffic; after a run of empty polls sleep until an input's file
    /// descriptor is readable (or a bounded timeout), as VPP's adaptive rx-mode does.
    #[default]
    Adaptive,
}

/// Poll modes of the workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollPolicy {
    /// Mode per worker (index = worker); a worker past the end uses `default`.
    pub modes: Vec<PollMode>,
    /// Mode of workers not named in `modes`.
    pub default: PollMode,
    /// Longest sleep of an adaptive worker, in microseconds (it wakes earlier on traffic).
    pub sleep_max_us: u32,
}

/// When receive queues that may move (vhost-user queue pairs) move to even the workers out
/// (`placement`): every `rebalance_seconds` (0: never; they stay where round-robin put them)
/// when the busiest worker carried packets at least `busy_percent` of that time and a new
/// placement lightens it by a quarter or more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxqPolicy {
    /// Seconds between looks at the loads (0: off).
    pub rebalance_seconds: u32,
    /// The busiest worker's load that makes a look worth a move, in percent of its time.
    pub busy_percent: u32,
}

impl Default for RxqPolicy {
    /// Every 10 s, at 95% busy: Open vSwitch's auto load balancing threshold.
    fn default() -> Self {
        RxqPolicy {
            rebalance_seconds: 10,
            busy_percent: 95,
        }
    }
}

/// The channels between the workers and the control plane (`punt-*` and `inject-*` in
/// `[dataplane]`): each worker's punt ring and rate, and its inject ring's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntPolicy {
    /// Packets a worker's punt ring holds (a power of two).
    pub slots: u32,
    /// Most bytes of a punted packet kept (its full length is recorded).
    pub snap_bytes: u32,
    /// Packets a worker may punt per second (0: none).
    pub per_second: u32,
    /// Packets a worker may punt at once after a pause.
    pub burst: u32,
    /// Packets the control plane may inject per second into one worker (0: none).
    pub inject_per_second: u32,
    /// Packets it may inject at once after a pause.
    pub inject_burst: u32,
}

impl Default for PuntPolicy {
    /// 1024 packets of up to 2 KiB per worker (2 MiB), 100,000 punts a second with a burst of
    /// 1,000; 10,000 injected packets a second with a burst of 256.
    fn default() -> Self {
        PuntPolicy {
            slots: 1024,
            snap_bytes: 2048,
            per_second: 100_000,
            burst: 1000,
            inject_per_second: 10_000,
            inject_burst: 256,
        }
    }
}

impl PollPolicy {
    /// The mode of worker `w`.
    pub fn mode_of(&self, w: usize) -> PollMode {
        self.modes.get(w).copied().unwrap_or(self.default)
    }
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            modes: Vec::new(),
            default: PollMode::default(),
            sleep_max_us: 1000,
        }
    }
}

/// A bridge domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeSpec {
    /// Its name (unique), shown by `show bridge`; its domain id is its index + 1.
    pub name: String,
    /// Its ports, in port-id order.
    pub ports: Vec<BridgeMemberSpec>,
    /// OpenFlow tables in front of it (`mode = "flow"`): its ports' packets go through the
    /// flow cache, and the `normal` action hands them to this bridge domain. None: a learning
    /// bridge.
    pub flow: Option<FlowBridgeSpec>,
}

/// The OpenFlow side of a bridge in flow mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowBridgeSpec {
    /// Its ports with their OpenFlow port numbers, in port-id order.
    pub ports: Vec<FlowPortSpec>,
    /// Rules it starts with (default: one `priority=0,actions=normal`, as Open vSwitch).
    pub rules: Vec<flow::Rule>,
    /// Groups it starts with.
    pub groups: Vec<flow::Group>,
    /// Its caches' sizes and timers.
    pub cache: FlowCachePolicy,
    /// How it handles IP fragments (Open vSwitch's `set-frags`; default `normal`).
    pub frag: flow::FragHandling,
}

/// A port of a flow-mode bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPortSpec {
    /// Port (index into `ports`).
    pub port: usize,
    /// Its OpenFlow port number (1..=65279), unique in the bridge.
    pub ofport: u16,
    /// Whether its packets use the exact-match cache.
    pub emc: bool,
    /// Whether its packets use the megaflow cache (off: every packet is classified).
    pub megaflow: bool,
}

/// Sizes and timers of a flow bridge's caches, per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowCachePolicy {
    /// Most megaflows per worker (Open vSwitch's flow-limit default is 200,000).
    pub megaflow_limit: usize,
    /// Seconds without a hit after which a megaflow expires.
    pub idle_seconds: u32,
    /// Exact-match cache entries per worker (a power of two; 0: no EMC).
    pub emc_entries: usize,
    /// A megaflow hit enters the EMC with probability 1/this (1: always).
    pub emc_insert_inv_prob: u32,
}

impl Default for FlowCachePolicy {
    fn default() -> Self {
        FlowCachePolicy {
            megaflow_limit: 200_000,
            idle_seconds: 10,
            emc_entries: 8192,
            emc_insert_inv_prob: 100,
        }
    }
}

/// A port of a bridge domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeMemberSpec {
    /// Port (index into `ports`); in at most one domain, and not cross-connected.
    pub port: usize,
    /// Access (one VLAN, untagged) or trunk (tagged VLANs).
    pub mode: BridgePortMode,
}

/// MAC learning limits of the bridges, per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgePolicy {
    /// Largest number of MACs learned (more are refused and counted).
    pub max_macs: usize,
    /// Seconds after which a MAC not seen again is forgotten (0: never).
    pub age_seconds: u32,
}

impl Default for BridgePolicy {
    fn default() -> Self {
        BridgePolicy {
            max_macs: nodes::bridge::DEFAULT_MAX_MACS,
            age_seconds: nodes::bridge::DEFAULT_AGE_SECONDS,
        }
    }
}

/// Neighbour table sizes and timers, per worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighbourPolicy {
    /// Entries per family.
    pub capacity: usize,
    /// Seconds an entry stays reachable after a confirmation.
    pub reachable_seconds: u32,
    /// Seconds after its last confirmation an unused entry is deleted.
    pub gc_seconds: u32,
    /// Packets queued per unresolved neighbour.
    pub queue_per_neighbour: u16,
}

impl Default for NeighbourPolicy {
    fn default() -> Self {
        let d = nodes::neighbour::NeighbourConfig::default();
        NeighbourPolicy {
            capacity: d.capacity,
            reachable_seconds: d.reachable_seconds,
            gc_seconds: d.gc_seconds,
            queue_per_neighbour: d.queue_per_neighbour,
        }
    }
}

/// Policies of the IP nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPolicy {
    /// What `ip4-input` does with packets carrying IPv4 options.
    pub ip4_options: OptionsPolicy,
    /// ICMP/ICMPv6 errors generated per second per worker (token bucket rate); 0 disables them.
    pub icmp_errors_per_second: u32,
    /// Token bucket depth for ICMP errors.
    pub icmp_errors_burst: u32,
}

impl Default for IpPolicy {
    fn default() -> Self {
        IpPolicy {
            ip4_options: OptionsPolicy::Forward,
            icmp_errors_per_second: 1000,
            icmp_errors_burst: 100,
        }
    }
}

/// What to do with IPv4 packets that carry options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionsPolicy {
    /// Forward them unchanged (options are not processed).
    Forward,
    /// Drop them, counted as `options`.
    Drop,
}

/// One port.
#[derive(Clone, Debug, PartialEq)]
pub struct PortSpec {
    /// Unique name, e.g. `eth0`; its nodes are `<name>-rx` and `<name>-tx`.
    pub name: String,
    /// The port's own MAC address (source MAC of what it sends).
    pub mac: Mac,
    /// Largest IP packet it sends (default 1500); longer forwarded packets are dropped as `mtu-exceeded`.
    pub mtu: u16,
    /// Own IPv4 addresses with their prefix lengths (the prefix is a connected route).
    pub ip4: Vec<(Ipv4Addr, u8)>,
    /// Own IPv6 addresses with their prefix lengths.
    pub ip6: Vec<(Ipv6Addr, u8)>,
    /// The driver and its settings.
    pub driver: PortDriver,
}

impl PortSpec {
    /// Its own addresses of both families, IPv4 first, with their prefix lengths.
    pub fn own_addresses(&self) -> impl Iterator<Item = (IpAddr, u8)> + '_ {
        let v4 = self.ip4.iter().map(|(a, l)| (IpAddr::V4(*a), *l));
        v4.chain(self.ip6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)))
    }
}

/// How a port moves packets.
#[derive(Clone, Debug, PartialEq)]
pub enum PortDriver {
    /// Synthetic traffic for benchmarks: rx writes frames from templates, tx copies out and frees.
    Memory(MemoryPortSpec),
    /// pcap files: rx reads `rx` (if any), tx writes `tx` (if any).
    Pcap {
        /// File to read frames from.
        rx: Option<PathBuf>,
        /// File to write frames to (nanosecond pcap).
        tx: Option<PathBuf>,
    },
    /// An AF_PACKET socket on an existing kernel interface (TPACKET_V3 receive ring, qdisc
    /// bypass, promiscuous).
    AfPacket {
        /// Kernel interface name (1..=15 bytes).
        interface: String,
        /// PACKET_FANOUT (hash) group id, so several workers can share the interface; unique
        /// per port. With several workers and none given, one is derived from the process id
        /// and the port id.
        fanout: Option<u16>,
    },
    /// AF_XDP sockets on an existing kernel interface, one per queue `0..queues`; the pool is
    /// the UMEM; vecplane attaches its own XDP redirect program.
    AfXdp {
        /// Kernel interface name (1..=15 bytes).
        interface: String,
        /// Queues to open (1..=64; 0: every receive queue the interface has): worker `w`
        /// receives on queues `w, w + workers, ...` and transmits on queue `w`. With fewer
        /// queues than workers, a queue's owner spreads its flows over all workers (software
        /// RSS) and the others hand what they send on this port to an owner.
        queues: u32,
        /// XDP mode of the redirect program.
        mode: XdpModeChoice,
    },
    /// A TAP device (created if missing, attached to if it exists).
    Tap {
        /// Kernel interface name (1..=15 bytes).
        name: String,
        /// Exchange virtio-net headers.
        vnet_hdr: bool,
        /// Take and pass on checksum and TCP segmentation offloads in those headers (needs
        /// `vnet_hdr` and one worker); the worker's pool gets jumbo buffers.
        offloads: bool,
    },
    /// The health-check probe host's port: a TAP created inside vecplane's private network
    /// namespace (`probe_host`), never named in a config file.
    ProbeHost(crate::probe_host::ProbeHostPort),
    /// A VXLAN tunnel: frames sent on the port are encapsulated towards `remote` and routed;
    /// VXLAN packets from `remote` to `local` are received on it. Its `mtu` is the largest
    /// inner packet (frame minus its Ethernet header).
    Vxlan(VxlanPortSpec),
    /// A vhost-user socket: vecplane is the virtio-net device of a QEMU guest (or of DPDK's
    /// virtio-user) and copies frames in and out of the guest's shared memory.
    VhostUser {
        /// The UNIX socket.
        socket: PathBuf,
        /// Server: vecplane creates the socket and the frontend connects; client: vecplane
        /// connects to the frontend's socket (and reconnects when it restarts).
        mode: vhostuser::SocketMode,
        /// Queue pairs offered (1..=8); pair `k` is run by worker `k % workers`.
        queues: u16,
        /// A server-mode socket's mode and group (0600, the process's group by default).
        access: vhostuser::SocketAccess,
    },
}

/// A VXLAN port's tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanPortSpec {
    /// Outer source: one of the ports' own IPv4 addresses.
    pub local: Ipv4Addr,
    /// Outer destination: the other end (packets from elsewhere are dropped).
    pub remote: Ipv4Addr,
    /// A fixed VNI, or the tunnel id the switch chose (`Vni::Flow`).
    pub vni: VxlanVni,
    /// UDP destination port (default 4789), also the port it listens on.
    pub dst_port: u16,
    /// Compute the outer UDP checksum (otherwise 0).
    pub udp_checksum: bool,
}

/// What a memory port generates.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPortSpec {
    /// Frame size on the wire including FCS (64..=9000); the port writes `frame_size - 4` bytes.
    pub frame_size: usize,
    /// Number of distinct flows (varying destination address and source port).
    pub flows: u32,
    /// Destination MAC of generated frames (normally the receiving port's MAC).
    pub dst_mac: Mac,
    /// Source MAC of generated frames.
    pub src_mac: Mac,
    /// 802.1Q tag, if any.
    pub vlan: Option<u16>,
    /// Source address of generated packets (its family sets IPv4 or IPv6).
    pub src_ip: IpAddr,
    /// Destination addresses: flow `i` goes to `destinations[i % len]` (must be non-empty, same
    /// family as `src_ip`).
    pub destinations: Vec<IpAddr>,
    /// Stop after this many packets (None: never stop).
    pub limit: Option<u64>,
    /// Whether rx generates at all (a tx-only memory port is a sink).
    pub generate: bool,
}

/// A route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSpec<A> {
    /// Network address (host bits zero).
    pub prefix: A,
    /// Prefix length.
    pub len: u8,
    /// Where matching packets go.
    pub target: RouteTarget<A>,
}

/// Where a route sends packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteTarget<A> {
    /// Via one next hop, or several (ECMP by flow hash); each a static neighbour or an address
    /// inside a port's prefix (resolved by ARP/ND).
    Via(Vec<A>),
    /// Drop (blackhole), counted as `blackhole`.
    Drop,
}

/// A static neighbour (IPv4 or IPv6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourSpec {
    /// Its address.
    pub ip: IpAddr,
    /// Its MAC.
    pub mac: Mac,
    /// Port it is reached through (index into `ports`).
    pub port: usize,
}

/// A cross-connect: everything received on `from` leaves on `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XconnectSpec {
    /// Receiving port (index into `ports`).
    pub from: usize,
    /// Transmitting port (index into `ports`).
    pub to: usize,
    /// Destination MAC written into each frame (None: unchanged); the source MAC becomes `to`'s MAC.
    pub dst_mac: Option<Mac>,
}

//! The config file: TOML text -> a validated `DataplaneSpec`, every rule checked and every error
//! collected with FILE:LINE, the section and the field. Parsing is pure (nothing is applied, nothing
//! started); the only filesystem access is reading the file and its route file (regular files,
//! size-bounded), and `check_files` for the pcap and token paths.
//!
//! Layout: `read` (bounded reads of regular files), `value` (spanned TOML tree), `ctx` (issues and
//! key readers), `document` (section order), then one module per concept: `policies`
//! ([dataplane]), `api` (`[api]`), `bgp` (`[bgp]`), `ports`, `routes` (routes, neighbours,
//! xconnects), `route_file`, `bridges`, `validation` (own addresses); `diff` compares two configs
//! for a reload; `util` holds pure helpers shared with the command language.

mod api;
mod bgp;
mod bridges;
mod ctx;
mod diff;
mod document;
mod drivers;
mod features;
mod port_features;
pub use port_features::{PortFeature, PORT_ARCS};
mod flow_bridge;
mod lb;
mod policies;
mod ports;
mod read;
mod route_file;
mod routes;
mod util;
mod validation;
mod value;
mod vxlan;

use ctx::Ctx;
use dataplane::DataplaneSpec;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml::Spanned;
use value::Val;

use ctx::{MAC_ACCEPTED, NAME_ACCEPTED};
pub use diff::{live_diff, LbChange, LiveDiff, NeighbourChanges, NotLive, RouteChanges};
pub use ports::{DEFAULT_FLOWS, DEFAULT_FRAME_SIZE, DEFAULT_SRC_MAC};
pub use read::{CONFIG_MAX_BYTES, ROUTE_FILE_MAX_BYTES};
pub(crate) use util::{contains, mask, parse_prefix};
pub(crate) use validation::{neighbour_placement_problem, own_address_problem, repeated_address};

/// One problem found in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// The file label (normally its path).
    pub file: String,
    /// 1-based line of the offending key or value (0 when no line applies).
    pub line: usize,
    /// The section, e.g. `[[port]] #2` (1-based: the second `[[port]]` table), or "" for the file.
    pub section: String,
    /// The field (key) concerned, if any.
    pub field: Option<String>,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.file, self.line)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        match (&self.section.is_empty(), &self.field) {
            (false, Some(field)) => write!(f, "{} field `{}`: ", self.section, field)?,
            (false, None) => write!(f, "{}: ", self.section)?,
            (true, Some(field)) => write!(f, "field `{field}`: ")?,
            (true, None) => {}
        }
        f.write_str(&self.message)
    }
}

/// Why a config could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read the config file: {cause}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file was read but is not a valid config; all problems found, in line order.
    #[error("{}", display_issues(.0))]
    Invalid(Vec<Issue>),
}

impl ConfigError {
    /// The problems (empty for `Read`).
    pub fn issues(&self) -> &[Issue] {
        match self {
            ConfigError::Invalid(v) => v,
            ConfigError::Read { .. } => &[],
        }
    }
}

fn display_issues(issues: &[Issue]) -> String {
    issues
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A parsed and validated config: the spec plus what `check_files` needs to point at lines.
///
/// The `rx`/`tx` files of pcap ports are resolved against the config file's directory while
/// parsing, but their existence is checked by the separate [`Config::check_files`] step (which
/// `vecplane run` calls), so a config can be parsed and validated without its captures.
///
/// Grammar (TOML, kebab-case keys; unknown keys are errors naming the accepted ones):
///
/// ```toml
/// route-file = "routes.txt"         # optional, top level (before any [table]): more routes, one
///                                   #   per line, relative to the config's directory; see below
///
/// [dataplane]                       # optional
/// buffers = 16384                   # 64..=16777216
/// data-size = 2048                  # 256..=9216
/// worker-cpu = 1                    # < online CPUs; absent: not pinned (one worker only)
/// workers = 2                       # 1..=64 worker threads; flows are spread by AF_XDP queues
///                                   #   (software RSS when fewer), AF_PACKET fanout or software
///                                   #   RSS by worker 0 (tap); pcap ports need workers = 1
/// worker-cpus = [0, 1]              # one distinct online CPU per worker; absent: not pinned
/// ip4-options = "forward"           # "forward" | "drop"
/// icmp-errors-per-second = 1000     # 0..=4294967295 (0 disables)
/// icmp-errors-burst = 100           # 0..=4294967295
/// neighbour-capacity = 4096         # ARP/ND entries per family per worker, 1..=32768
/// neighbour-reachable-seconds = 30  # 1..=86400: confirmed entries stay reachable this long
/// neighbour-gc-seconds = 300        # 1..=86400: unconfirmed entries are deleted after this
/// neighbour-queue = 4               # 1..=256 packets queued per unresolved neighbour
/// bridge-max-macs = 65536           # 0..=16777216 MACs learned per worker (more are refused)
/// bridge-age-seconds = 300          # 0..=4294967295 (0: never age)
/// poll-mode = "adaptive"            # "busy" | "adaptive" for every worker, or an array with one
///                                   #   per worker like ["busy", "adaptive"]; default "adaptive":
///                                   #   an idle worker sleeps (up to poll-sleep-max-us) and wakes
///                                   #   on traffic; "busy" polls without pause (one whole CPU)
/// poll-sleep-max-us = 1000          # 10..=100000: longest sleep of an adaptive worker
/// rxq-rebalance-seconds = 10        # 0..=3600: how often movable receive queues (vhost-user
///                                   #   queue pairs) are placed again by measured load; 0: never
/// rxq-rebalance-busy-percent = 95   # 1..=100: the busiest worker's load that makes it worth it
/// punt-ring-slots = 1024           # 16..=65536, a power of two: packets each worker's punt ring
///                                   #   holds for the control plane (more are counted as
///                                   #   punt-ring-full)
/// punt-snap-bytes = 2048            # 64..=65535: most bytes of a punted packet kept (its full
///                                   #   length is recorded); a ring is slots x this
/// punt-per-second = 100000          # 0..=4294967295 punts a second per worker (0: none; more
///                                   #   are counted as punt-rate-limited)
/// punt-burst = 1000                 # 1..=4294967295
/// inject-per-second = 10000         # 0..=4294967295 packets a second the API may inject into
///                                   #   one worker (0: none; a request past it is refused whole)
/// inject-burst = 256                # 1..=4294967295
///
/// [api]                             # optional: the HTTP API also on TCP (always on the socket)
/// tcp = "127.0.0.1:8080"            # ADDRESS:PORT (port 1..=65535); requires token-file; a
///                                   #   loopback address unless allow-remote = true
/// token-file = "/etc/vecplane/token" # file holding the bearer token every TCP request carries;
///                                   #   relative to the config's directory; must exist when
///                                   #   `vecplane run` starts (checked with the pcap files)
/// allow-remote = false              # true: accept a tcp address other hosts reach (0.0.0.0,
///                                   #   [::] or any non-loopback one); warned about at start
///
/// [[port]]                          # port id = order of appearance
/// name = "in0"                      # [a-zA-Z0-9_.-]{1,32}, unique
/// driver = "pcap"                   # "pcap" | "memory" | "af-packet" | "af-xdp" | "tap" |
///                                   #   "vxlan" | "vhost-user"
/// mac = "02:00:00:00:01:01"         # required, unicast, not all zero
/// mtu = 1500                        # 68..=9000, default 1500
/// ip4 = ["198.18.1.1/24"]           # own addresses, prefix 1..=32, unique over all ports; not
///                                   #   loopback, multicast, 0.0.0.0, 255.255.255.255, nor the
///                                   #   network or broadcast address of its subnet (up to /30);
///                                   #   a subnet (or an overlapping one) on one port only
/// ip6 = ["2001:db8:1::1/64"]        # prefix 1..=128; not ::, ::1, multicast or IPv4-mapped
/// rx = "in.pcap"                    # pcap only, optional; relative to the config's directory
/// tx = "out.pcap"                   # pcap only, optional; not the same file as rx or another tx
/// frame-size = 64                   # memory only: 64..=9000 (default 64), must hold the headers
///                                   #   and fit data-size + 4
/// flows = 1024                      # memory only: 1..=16777216 (default 1024)
/// src-mac = "02:00:00:00:00:aa"     # memory only: unicast (default 02:00:00:00:00:aa)
/// dst-mac = "02:00:00:00:01:01"     # memory only: any MAC (default: this port's mac)
/// vlan = 100                        # memory only: 1..=4094, optional
/// src-ip = "198.18.0.1"             # memory only: required unless generate = false
/// destinations = ["198.18.2.10"]    # memory only: non-empty, family of src-ip; required unless
///                                   #   generate = false
/// limit = 1000000                   # memory only: 1..=2^63-1, optional
/// generate = true                   # memory only: default true
/// interface = "eth0"                # af-packet, af-xdp, tap: kernel interface, 1..=15 bytes
///                                   #   without '/', ':' or whitespace (default: the port's
///                                   #   name); one port per interface. af-packet, af-xdp: must
///                                   #   exist; tap: created if missing, attached to if a TAP
/// fanout = 7                        # af-packet only: PACKET_FANOUT group 0..=65535, optional,
///                                   #   unique over all ports
/// vnet-hdr = false                  # tap only: virtio-net headers; default false (true when
///                                   #   offloads = true)
/// offloads = false                  # tap only: checksum and TCP segmentation offloads in the
///                                   #   virtio-net headers (64 KiB super-packets, jumbo buffers
///                                   #   in the pool); needs vnet-hdr and workers = 1; default
///                                   #   false (the kernel checksums and segments everything)
/// queues = 1                        # af-xdp only: 1..=64 queues (sockets); default: every
///                                   #   receive queue of the interface. Fewer queues than
///                                   #   workers: the queue owners spread flows (software RSS)
/// xdp-mode = "auto"                 # af-xdp only: "auto" (native if the driver has it, else
///                                   #   generic) | "native" | "generic"
/// socket = "vm1.sock"               # vhost-user only, required: the UNIX socket (relative to
///                                   #   the config's directory, at most 107 bytes), one port
///                                   #   per socket
/// socket-mode = "server"            # vhost-user only: "server" (vecplane creates the socket,
///                                   #   QEMU connects; the default) | "client" (vecplane
///                                   #   connects to QEMU's server=on socket, reconnecting)
/// socket-permissions = "0600"       # vhost-user server only: the socket's mode, octal "0000"
///                                   #   to "0777" (default "0600": vecplane's user only)
/// socket-group = "kvm"              # vhost-user server only: the socket's group (a name or a
///                                   #   gid; e.g. QEMU's group with socket-permissions "0660")
/// queues = 1                        # vhost-user only: queue pairs offered, 1..=8 (QEMU
///                                   #   `-netdev vhost-user,queues=N` and virtio-net-pci
///                                   #   `mq=on`); pair k is run by worker k % workers
/// bridge = "br0"                    # any driver: the port switches in this [[bridge]] (no
///                                   #   ip4/ip6 then, not an xconnect `from`)
/// access-vlan = 1                   # bridged port: its VLAN, 1..=4094, untagged (default 1)
/// trunk-vlans = [10, 20]            # bridged port instead of access-vlan: tagged VLANs
/// native-vlan = 1                   # trunk only: VLAN carried untagged, optional
/// ofport = 1                        # port of a bridge in flow mode: its OpenFlow port number,
///                                   #   1..=65279, unique in the bridge (default: the lowest
///                                   #   free number from 1, in port order)
/// emc = true                        # flow-bridge port: its packets use the exact-match cache
/// megaflow = true                   # flow-bridge port: its packets use the megaflow cache (off:
///                                   #   every packet is classified; for measurement)
/// local = "198.18.1.1"              # vxlan only: outer source, an own IPv4 address of another
///                                   #   port, whose mtu must fit this port's mtu + 50
/// remote = "198.18.1.2"             # vxlan only: the other end (unicast IPv4, not our own)
/// vni = 5000                        # vxlan only: 0..=16777215, or "flow" (the switch's tun_id)
/// dst-port = 4789                   # vxlan only: UDP port sent to and listened on, 1..=65535
/// udp-checksum = false              # vxlan only: outer UDP checksum (default false, as Linux);
///                                   #   a vxlan port's mtu (inner packet) defaults to 1450
///
/// [[route]]
/// prefix = "198.18.2.0/24"          # v4 or v6, no host bits ("did you mean ...?"), unique
/// via = "198.18.1.2"                # or a non-empty list (ECMP) of distinct next hops of the
///                                   #   route's family: [[neighbour]] ips, or hosts on a port's
///                                   #   prefix (resolved by ARP/ND)
/// # action = "drop"                 # instead of via
///
/// [[neighbour]]
/// ip = "198.18.1.2"                 # unique; inside one of the port's prefixes, not its own address
/// mac = "02:00:00:00:02:02"         # unicast
/// port = "in0"                      # a port name
///
/// [[xconnect]]
/// from = "in0"                      # a port name; `from` of at most one xconnect
/// to = "out0"                       # a port name
/// dst-mac = "02:00:00:00:02:02"     # optional, any MAC
///
/// [[bridge]]                        # a bridge domain; ports join it with `bridge = "br0"`
/// name = "br0"                      # [a-zA-Z0-9_.-]{1,32}, unique; at least two ports
/// mode = "learning"                 # "learning" (MAC learning) | "flow": OpenFlow tables and a
///                                   #   flow cache in front; the `normal` action hands a packet
///                                   #   to the bridge's MAC learning (at most 16 flow bridges)
/// flows = ["priority=100,tcp,tp_dst=80,actions=output:2"]
///                                   # flow mode: rules in ovs-ofctl add-flow syntax (what
///                                   #   `ovs-ofctl dump-flows` prints is accepted); none given:
///                                   #   Open vSwitch's default `priority=0,actions=normal`
/// flow-file = "flows.txt"           # flow mode: more rules, one per line (`#` comments), relative
///                                   #   to the config's directory; errors name FLOW-FILE:LINE
/// groups = ["group_id=1,type=select,bucket=weight:100,actions=output:2,bucket=weight:100,actions=output:3"]
///                                   # flow mode: groups in ovs-ofctl add-group syntax
/// megaflow-limit = 200000           # flow mode: 1..=10000000 megaflows per worker (when full,
///                                   #   the idlest of a sample is evicted)
/// megaflow-idle-seconds = 10        # flow mode: 1..=3600: an unused megaflow expires
/// emc-entries = 8192                # flow mode: 0 (no EMC) or a power of two up to 1048576
/// emc-insert-inv-prob = 100         # flow mode: 1..=1000000: a megaflow hit enters the EMC with
///                                   #   probability 1/N (so a flood of new flows cannot thrash it)
/// frag-handling = "normal"          # flow mode: IP fragments as Open vSwitch's `set-frags`:
///                                   #   normal (default: their L4 ports read as 0), drop, nx-match
///
/// [lb]                              # optional: the L4 load balancer (VIPs, servers, lb conf)
/// lines = ["lb conf ip4-src-address 198.18.0.254 timeout 40",
///          "lb vip 198.18.1.1/32 protocol tcp port 80 encap l3dsr dscp 23",
///          "lb as 198.18.1.1/32 protocol tcp port 80 198.18.2.1 198.18.2.2 weight 50"]
///                                   # FD.io VPP `lb` CLI lines (see `lb::cli`); `lines`, then
///                                   #   `file`, applied in order as one batch (all or nothing);
///                                   #   errors name lb.lines[i] at the item's line
/// file = "lb.conf"                  # more lines, one per line (`#` comments), relative to the
///                                   #   config's directory; errors name LB-FILE:LINE.
///                                   #   `lb set interface nat4|nat6 in PORT` names a [[port]]
/// memory-limit = "2GiB"             # cap on the LB's tables (default 2GiB; 64MiB..=1TiB; bytes or
///                                   #   KiB/MiB/GiB/TiB): every VIP's Maglev table (4 bytes x
///                                   #   the prime >= new_len) plus each worker's flow and NAT
///                                   #   tables (`lb conf buckets`); a line, API call or reload
///                                   #   that would pass it is refused, naming need and cap
/// probe-source4 = "198.18.3.1"      # health probes to IPv4 addresses leave from here: an ip4
///                                   #   address of a [[port]]; needed when a check probes one
/// probe-source6 = "2001:db8:3::1"   # the same for IPv6 (an ip6 address of a [[port]])
///
/// [[lb.health-check]]               # optional, at most one per VIP: every server of the VIP is
///                                   #   probed; `fall` failures in a row mark it down (out of
///                                   #   the Maglev table), `rise` successes bring it back
/// vip = "198.18.1.1/32 protocol tcp port 80"
///                                   # a VIP of the lines, as `lb vip` writes it
/// type = "http"                     # "tcp" (connect) | "http" / "https" (GET, status; HTTPS: certificate not verified) | "udp" | "icmp"
/// port = 8080                       # not icmp: 1..=65535 (default: the VIP's port, or its NAT
///                                   #   target_port); required for an all-ports VIP
/// path = "/healthz"                 # http only: starts with `/` (default "/")
/// host = "www.example"              # http only: the Host header (default: the probed address)
/// expect = 200                      # http only: the status required, 100..=599 (default 200)
/// payload = "ping"                  # udp only: text sent, at most 1024 bytes (default empty)
/// expect-reply = false              # udp only: a datagram must come back (default false:
///                                   #   healthy unless ICMP port unreachable comes back)
/// interval-ms = 1000                # 100..=3600000 (default 1000)
/// timeout-ms = 500                  # 10..interval-ms (default: 500, at most half the interval)
/// rise = 2                          # 1..=100 (default 2)
/// fall = 3                          # 1..=100 (default 3)
/// on-down = "drain"                 # "drain" (flows stay) | "flush" (flows evicted)
/// via = "encap"                     # "encap": on an L3DSR/GRE VIP the probe is addressed to the
///                                   #   VIP and wrapped for the server as client traffic (a
///                                   #   server that cannot decapsulate is marked down; the
///                                   #   probe's protocol must be the VIP's); NAT VIPs and icmp
///                                   #   are probed at the server. "direct": at the server's
///                                   #   address. Health settings are read at start; a reload
///                                   #   does not change them
///
/// [bgp]                             # optional, needs [lb]: announce the VIPs through the
///                                   #   operator's BIRD 2, whose bird.conf has `include
///                                   #   "<routes-file>";` at its top level and a BGP export
///                                   #   filter taking the routes of the static protocols below
/// daemon = "bird"                   # "bird" (the default and only daemon)
/// control-socket = "/run/bird/bird.ctl" # required: BIRD's control socket (`bird -s`); relative
///                                   #   to the config's directory
/// routes-file = "/etc/bird/vecplane.conf" # required: the file vecplane rewrites (atomically)
///                                   #   and BIRD includes; its directory must exist (checked
///                                   #   with the pcap files)
/// interface = "vplbgp0"             # the device routes go via, held open by vecplane (it
///                                   #   vanishes when vecplane dies, and BIRD withdraws): 1..=15
///                                   #   bytes of a-z A-Z 0-9 _ . - (default vplbgp0)
/// protocol = "vecplane"             # static protocols `<protocol>4` and `<protocol>6`: a letter
///                                   #   or _, then letters, digits, _; 1..=32 (default vecplane)
/// med = 10                          # bgp_med, 0..=4294967295 (default: not set)
/// communities = ["65000:100"]       # ASN:VALUE, 0..=65535 each, added to every route
/// large-communities = ["65000:1:2"] # GLOBAL:LOCAL1:LOCAL2, 0..=4294967295 each
/// next-hop4 = "198.18.11.2"         # bgp_next_hop of the IPv4 routes (BIRD's BGP channel
///                                   #   replaces it unless `next hop keep` or its export
///                                   #   filter sets it)
/// next-hop6 = "2001:db8:11::2"      # bgp_next_hop of the IPv6 routes
/// drain-timeout-ms = 30000          # 100..=3600000: `vecplane ctl drain` waits at most this
///                                   #   long after the withdrawal before traffic stops
/// drain-quiet-ms = 2000             # 100..=600000: the drain ends early once no new flow came
///                                   #   for this long after the withdrawal
/// stall-ms = 500                    # 50..=60000: workers making no progress this long
///                                   #   withdraw the announcement
/// ```
///
/// The route file (a regular file of at most 1 GiB; the config itself at most 64 MiB) holds one
/// route per line, IPv4 and IPv6 mixed, with the rules of `[[route]]` (a prefix in the file and in
/// a `[[route]]` is a duplicate); errors name ROUTE-FILE:LINE:
///
/// ```text
/// # comment; blank lines are skipped
/// 198.18.2.0/24 via 198.18.1.2              # PREFIX via ADDRESS [ADDRESS...] (ECMP)
/// 2001:db8:9::/48 via 2001:db8:1::2 2001:db8:1::3
/// 198.18.66.0/24 drop                       # PREFIX drop
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// The validated data plane description.
    pub spec: DataplaneSpec,
    /// The file label used in messages.
    pub label: String,
    /// The HTTP API's TCP listener (`[api]`).
    pub api: crate::api_config::ApiConfig,
    /// How the VIPs are announced over BGP (`[bgp]`); None: not announced.
    pub bgp: Option<crate::bgp::BgpConfig>,
    /// The tables of registered features (`crate::registry`), checked by each feature: (name,
    /// table), in the registry's order.
    pub features: Vec<(String, toml::Value)>,
    /// What the ports' `features` keys enable, in config order.
    pub port_features: Vec<PortFeature>,
    files: Vec<FileRef>,
    /// Lines of sections and keys ("[[port]] #2", "[[port]] #2.driver"), for reload messages.
    lines: HashMap<String, usize>,
}

/// A file the config names, checked by `check_files`.
#[derive(Clone, Debug)]
struct FileRef {
    section: String,
    field: &'static str,
    line: usize,
    path: PathBuf,
    kind: FileKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileKind {
    /// A pcap port's input: must exist.
    PcapRx,
    /// A pcap port's output: its directory must exist.
    PcapTx,
    /// The API's bearer token: must be an existing regular file.
    Token,
}

impl Config {
    /// Read and validate the config file at `path` (relative pcap paths resolve against its
    /// directory). Does not check that pcap files exist: see [`Config::check_files`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read::read_text(path, CONFIG_MAX_BYTES).map_err(|cause| ConfigError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Config::parse(&text, &path.display().to_string(), &base)
    }

    /// Validate config `text`; `file_label` names it in messages, `base_dir` resolves relative paths.
    pub fn parse(text: &str, file_label: &str, base_dir: &Path) -> Result<Config, ConfigError> {
        let mut ctx = Ctx::new(text, file_label);
        let root = match toml::from_str::<Spanned<Val>>(text) {
            Ok(root) => root,
            Err(e) => {
                let line = e.span().map(|s| ctx.line_of(s.start)).unwrap_or(0);
                let msg = e
                    .message()
                    .trim()
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join("; ");
                let message = if msg.contains("$__toml_private_datetime") {
                    "a date/time value is not accepted; accepted: strings, integers, booleans, \
                     arrays and tables"
                        .to_string()
                } else {
                    format!("TOML syntax error: {msg}")
                };
                return Err(ConfigError::Invalid(vec![Issue {
                    file: file_label.to_string(),
                    line,
                    section: String::new(),
                    field: None,
                    message,
                }]));
            }
        };
        let parsed = ctx.document(&root, base_dir);
        if ctx.issues.is_empty() {
            Ok(Config {
                spec: parsed.spec,
                label: file_label.to_string(),
                api: parsed.api,
                bgp: parsed.bgp,
                features: parsed.features,
                port_features: parsed.port_features,
                files: parsed.files,
                lines: ctx.lines,
            })
        } else {
            // The config's problems in line order, then those of its route file.
            ctx.issues.sort_by_key(|i| (i.file != file_label, i.line));
            Err(ConfigError::Invalid(ctx.issues))
        }
    }

    /// Check the filesystem side of the config: each pcap `rx` file exists and is not a directory,
    /// each `tx` file's directory exists. All problems are reported, with their lines.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        let mut issues = Vec::new();
        for f in &self.files {
            let problem = if f.kind == FileKind::Token {
                match std::fs::metadata(&f.path) {
                    Ok(m) if m.is_file() => None,
                    Ok(_) => Some(format!(
                        "{} is not a regular file; accepted: a file holding the API's bearer \
                         token (path relative to the config file's directory)",
                        f.path.display()
                    )),
                    Err(e) => Some(format!(
                        "cannot open {}: {e}; accepted: an existing file holding the API's \
                         bearer token (path relative to the config file's directory)",
                        f.path.display()
                    )),
                }
            } else if f.kind == FileKind::PcapRx {
                match std::fs::metadata(&f.path) {
                    Ok(m) if m.is_dir() => Some(format!(
                        "{} is a directory; accepted: a pcap file (path relative to the config \
                         file's directory)",
                        f.path.display()
                    )),
                    Ok(_) => None,
                    Err(e) => Some(format!(
                        "cannot open {}: {e}; accepted: an existing pcap file (path relative to \
                         the config file's directory)",
                        f.path.display()
                    )),
                }
            } else {
                let dir = match f.path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                if f.path.is_dir() {
                    Some(format!(
                        "{} is a directory; accepted: a file path whose directory exists",
                        f.path.display()
                    ))
                } else if !dir.is_dir() {
                    Some(format!(
                        "directory {} does not exist; accepted: a file path whose directory exists \
                         (relative to the config file's directory)",
                        dir.display()
                    ))
                } else {
                    None
                }
            };
            if let Some(message) = problem {
                issues.push(Issue {
                    file: self.label.clone(),
                    line: f.line,
                    section: f.section.clone(),
                    field: Some(f.field.to_string()),
                    message,
                });
            }
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(issues))
        }
    }
}

/// Read and validate the config file at `path` (see [`Config::load`]).
pub fn load_config(path: &Path) -> Result<DataplaneSpec, ConfigError> {
    Config::load(path).map(|c| c.spec)
}

/// Validate config `text` (see [`Config::parse`]).
pub fn parse_config(
    text: &str,
    file_label: &str,
    base_dir: &Path,
) -> Result<DataplaneSpec, ConfigError> {
    Config::parse(text, file_label, base_dir).map(|c| c.spec)
}

/// Check the pcap files of a loaded config (see [`Config::check_files`]).
pub fn check_files(config: &Config) -> Result<(), ConfigError> {
    config.check_files()
}

#[cfg(test)]
mod tests;

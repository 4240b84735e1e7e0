//! The config file: TOML text -> a validated `DataplaneSpec`, every rule checked and every error
//! collected with FILE:LINE, the section and the field. Parsing is pure (nothing is applied, nothing
//! started); the only filesystem access is reading the file, and `check_files` for pcap paths.

use dataplane::{
    BridgeMemberSpec, BridgePortMode, BridgeSpec, DataplaneSpec, MemoryPortSpec, NeighbourSpec,
    OptionsPolicy, PortDriver, PortSpec, RouteSpec, RouteTarget, XconnectSpec, XdpModeChoice,
};
use packet::headers::{parse_mac, Mac};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use thiserror::Error;
use toml::Spanned;

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
/// [dataplane] poll-mode = "adaptive"  # or "busy", or one per worker: ["busy", "adaptive"];
///                                   #   adaptive workers sleep when idle and wake on traffic
/// [dataplane] poll-sleep-max-us = 1000  # 10..=100000: an adaptive worker's longest sleep
///
/// [api]                             # optional: the HTTP API also on TCP
/// tcp = "127.0.0.1:8080"            # address:port (the Unix control socket is always served)
/// token-file = "api.token"          # required with tcp: one line, >= 16 characters, mode 0600;
///                                   #   every TCP request needs `Authorization: Bearer <token>`
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
///
/// [[port]]                          # port id = order of appearance
/// name = "in0"                      # [a-zA-Z0-9_.-]{1,32}, unique
/// driver = "pcap"                   # "pcap" | "memory" | "af-packet" | "af-xdp" | "tap"
/// mac = "02:00:00:00:01:01"         # required, unicast, not all zero
/// mtu = 1500                        # 68..=9000, default 1500
/// ip4 = ["198.18.1.1/24"]           # own addresses, prefix 1..=32, unique over all ports
/// ip6 = ["2001:db8:1::1/64"]        # prefix 1..=128
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
/// vnet-hdr = false                  # tap only: virtio-net headers (offloads off); default false
/// queues = 1                        # af-xdp only: 1..=64 queues (sockets); default: every
///                                   #   receive queue of the interface. Fewer queues than
///                                   #   workers: the queue owners spread flows (software RSS)
/// xdp-mode = "auto"                 # af-xdp only: "auto" (native if the driver has it, else
///                                   #   generic) | "native" | "generic"
/// bridge = "br0"                    # any driver: the port switches in this [[bridge]] (no
///                                   #   ip4/ip6 then, not an xconnect `from`)
/// access-vlan = 1                   # bridged port: its VLAN, 1..=4094, untagged (default 1)
/// trunk-vlans = [10, 20]            # bridged port instead of access-vlan: tagged VLANs
/// native-vlan = 1                   # trunk only: VLAN carried untagged, optional
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
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// The validated data plane description.
    pub spec: DataplaneSpec,
    /// The file label used in messages.
    pub label: String,
    /// The HTTP API's TCP listener (`[api]`).
    pub api: crate::api_config::ApiConfig,
    files: Vec<FileRef>,
}

#[derive(Clone, Debug)]
struct FileRef {
    section: String,
    field: &'static str,
    line: usize,
    path: PathBuf,
    is_rx: bool,
}

impl Config {
    /// Read and validate the config file at `path` (relative pcap paths resolve against its
    /// directory). Does not check that pcap files exist: see [`Config::check_files`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_bounded(path).map_err(|cause| ConfigError::Read {
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
                files: parsed.files,
            })
        } else {
            ctx.issues.sort_by_key(|i| i.line);
            Err(ConfigError::Invalid(ctx.issues))
        }
    }

    /// Check the filesystem side of the config: each pcap `rx` file exists and is not a directory,
    /// each `tx` file's directory exists. All problems are reported, with their lines.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        let mut issues = Vec::new();
        for f in &self.files {
            let problem = if f.is_rx {
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

// ---------------------------------------------------------------------------------------------
// A TOML value tree that keeps the span of every key and value.

#[derive(Debug)]
enum Val {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Spanned<Val>>),
    Table(Vec<(Spanned<String>, Spanned<Val>)>),
}

type Node = Spanned<Val>;

impl<'de> Deserialize<'de> for Val {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Val, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Val;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Val, E> {
                Ok(Val::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Val, E> {
                Ok(Val::Str(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val, E> {
                Ok(Val::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val, E> {
                Ok(Val::Int(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val, E> {
                Ok(Val::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Val, E> {
                Ok(Val::Bool(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Val, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<Node>()? {
                    out.push(x);
                }
                Ok(Val::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Val, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = a.next_key::<Spanned<String>>()? {
                    let v = a.next_value::<Node>()?;
                    out.push((k, v));
                }
                Ok(Val::Table(out))
            }
        }
        d.deserialize_any(V)
    }
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::Str(_) => "a string",
        Val::Int(_) => "an integer",
        Val::Float(_) => "a float",
        Val::Bool(_) => "a boolean",
        Val::Array(_) => "an array",
        Val::Table(_) => "a table",
    }
}

fn show(v: &Val) -> String {
    match v {
        Val::Str(s) => format!("`{s}`"),
        Val::Int(i) => format!("`{i}`"),
        Val::Float(x) => format!("`{x}`"),
        Val::Bool(b) => format!("`{b}`"),
        Val::Array(_) => "an array".to_string(),
        Val::Table(_) => "a table".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Validation context and field helpers.

struct Ctx<'a> {
    file: &'a str,
    line_starts: Vec<usize>,
    issues: Vec<Issue>,
    /// Own subnets seen so far: (network, length, line, port).
    own_nets: Vec<(IpAddr, u8, usize, String)>,
}

/// Outcome of reading one field: absent, present but invalid (already reported), or a value
/// with the span of what was read.
enum Field<T> {
    Missing,
    Bad,
    Ok(T, Range<usize>),
}

impl<T> Field<T> {
    fn ok(self) -> Option<T> {
        match self {
            Field::Ok(v, _) => Some(v),
            _ => None,
        }
    }
}

/// The keys of one table, checked against the accepted ones.
struct Fields<'t> {
    section: String,
    span: Range<usize>,
    entries: Vec<(&'t str, &'t Node)>,
}

impl<'t> Fields<'t> {
    fn get(&self, key: &str) -> Option<&'t Node> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

struct Parsed {
    spec: DataplaneSpec,
    files: Vec<FileRef>,
    api: crate::api_config::ApiConfig,
}

/// A port's membership in a bridge, before the bridge name is resolved.
struct Membership {
    section: String,
    name: String,
    span: Range<usize>,
    /// None when its VLAN keys had errors (already reported).
    mode: Option<BridgePortMode>,
}

/// Kernel resources claimed by ports so far: interface name / fanout group -> (line, port).
#[derive(Default)]
struct SeenKernel {
    interfaces: HashMap<String, (usize, String)>,
    fanouts: HashMap<u16, (usize, String)>,
}

/// A port driver as the config names it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drv {
    Pcap,
    Memory,
    AfPacket,
    AfXdp,
    Tap,
}

impl Drv {
    const ALL: [Drv; 5] = [Drv::Pcap, Drv::Memory, Drv::AfPacket, Drv::AfXdp, Drv::Tap];

    fn name(self) -> &'static str {
        match self {
            Drv::Pcap => "pcap",
            Drv::Memory => "memory",
            Drv::AfPacket => "af-packet",
            Drv::AfXdp => "af-xdp",
            Drv::Tap => "tap",
        }
    }

    /// The keys only this driver's ports accept.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Drv::Pcap => PCAP_KEYS,
            Drv::Memory => MEMORY_KEYS,
            Drv::AfPacket => AF_PACKET_KEYS,
            Drv::AfXdp => AF_XDP_KEYS,
            Drv::Tap => TAP_KEYS,
        }
    }
}

const API_KEYS: &[&str] = &["tcp", "token-file"];
const TOP_KEYS: &[&str] = &[
    "api",
    "dataplane",
    "port",
    "route",
    "neighbour",
    "xconnect",
    "bridge",
];
const DATAPLANE_KEYS: &[&str] = &[
    "buffers",
    "data-size",
    "worker-cpu",
    "workers",
    "worker-cpus",
    "ip4-options",
    "icmp-errors-per-second",
    "icmp-errors-burst",
    "bridge-max-macs",
    "bridge-age-seconds",
    "neighbour-capacity",
    "neighbour-reachable-seconds",
    "neighbour-gc-seconds",
    "neighbour-queue",
    "poll-mode",
    "poll-sleep-max-us",
];
const PORT_KEYS: &[&str] = &[
    "name",
    "driver",
    "mac",
    "mtu",
    "ip4",
    "ip6",
    "rx",
    "tx",
    "frame-size",
    "flows",
    "src-mac",
    "dst-mac",
    "vlan",
    "src-ip",
    "destinations",
    "limit",
    "generate",
    "interface",
    "fanout",
    "vnet-hdr",
    "queues",
    "xdp-mode",
    "bridge",
    "access-vlan",
    "trunk-vlans",
    "native-vlan",
];
const PCAP_KEYS: &[&str] = &["rx", "tx"];
const MEMORY_KEYS: &[&str] = &[
    "frame-size",
    "flows",
    "src-mac",
    "dst-mac",
    "vlan",
    "src-ip",
    "destinations",
    "limit",
    "generate",
];
const AF_PACKET_KEYS: &[&str] = &["interface", "fanout"];
const AF_XDP_KEYS: &[&str] = &["interface", "queues", "xdp-mode"];
const TAP_KEYS: &[&str] = &["interface", "vnet-hdr"];
const DRIVERS_ACCEPTED: &str = "\"pcap\", \"memory\", \"af-packet\", \"af-xdp\", \"tap\"";
const XDP_MODES_ACCEPTED: &str = "\"auto\", \"native\", \"generic\"";
const BRIDGE_KEYS: &[&str] = &["name"];
const IFNAME_ACCEPTED: &str = "a kernel interface name of 1 to 15 bytes without '/', ':' or \
                               whitespace, not \".\" or \"..\"";
const ROUTE_KEYS: &[&str] = &["prefix", "via", "action"];
const NEIGHBOUR_KEYS: &[&str] = &["ip", "mac", "port"];
const XCONNECT_KEYS: &[&str] = &["from", "to", "dst-mac"];

const MAC_ACCEPTED: &str = "six hex octets like 02:00:00:00:00:01";
const NAME_ACCEPTED: &str = "1 to 32 characters from a-z A-Z 0-9 _ . -";
/// Default source MAC of generated frames (locally administered, unicast).
pub const DEFAULT_SRC_MAC: Mac = [0x02, 0x00, 0x00, 0x00, 0x00, 0xaa];
/// Default frame size of memory ports.
pub const DEFAULT_FRAME_SIZE: usize = 64;
/// Default flow count of memory ports.
pub const DEFAULT_FLOWS: u32 = 1024;

fn first_line_break_positions(text: &str) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    v
}

impl<'a> Ctx<'a> {
    fn new(text: &'a str, file: &'a str) -> Ctx<'a> {
        Ctx {
            file,
            line_starts: first_line_break_positions(text),
            issues: Vec::new(),
            own_nets: Vec::new(),
        }
    }

    fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    fn error(
        &mut self,
        span: &Range<usize>,
        section: &str,
        field: Option<&str>,
        message: impl Into<String>,
    ) {
        let line = self.line_of(span.start);
        self.issues.push(Issue {
            file: self.file.to_string(),
            line,
            section: section.to_string(),
            field: field.map(str::to_string),
            message: message.into(),
        });
    }

    /// Check that `node` is a table and that its keys are accepted.
    fn fields<'t>(
        &mut self,
        section: String,
        field: Option<&str>,
        node: &'t Node,
        accepted: &[&str],
    ) -> Option<Fields<'t>> {
        let Val::Table(entries) = node.get_ref() else {
            self.error(
                &node.span(),
                &section,
                field,
                format!("expected a table, found {}", kind(node.get_ref())),
            );
            return None;
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let key = k.get_ref().as_str();
            if accepted.contains(&key) {
                out.push((key, v));
            } else {
                let hint = suggest(key, accepted)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                self.error(
                    &k.span(),
                    &section,
                    None,
                    format!(
                        "unknown key `{key}`{hint}; accepted: {}",
                        accepted.join(", ")
                    ),
                );
            }
        }
        Some(Fields {
            section,
            span: node.span(),
            entries: out,
        })
    }

    fn bad(&mut self, f: &Fields<'_>, key: &str, node: &Node, message: impl Into<String>) {
        let section = f.section.clone();
        self.error(&node.span(), &section, Some(key), message);
    }

    fn missing(&mut self, f: &Fields<'_>, key: &str, accepted: &str) {
        let section = f.section.clone();
        let span = f.span.clone();
        self.error(
            &span,
            &section,
            Some(key),
            format!("missing required field; accepted: {accepted}"),
        );
    }

    fn string<'t>(&mut self, f: &Fields<'t>, key: &str) -> Field<&'t str> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Str(s) => Field::Ok(s.as_str(), n.span()),
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!("expected a string, found {}", kind(other)),
                    );
                    Field::Bad
                }
            },
        }
    }

    fn int(&mut self, f: &Fields<'_>, key: &str, range: RangeInclusive<i64>) -> Field<i64> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Int(i) if range.contains(i) => Field::Ok(*i, n.span()),
                Val::Int(i) => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "`{i}` is out of range; accepted: {}..={}",
                            range.start(),
                            range.end()
                        ),
                    );
                    Field::Bad
                }
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "expected an integer, found {} {}; accepted: {}..={}",
                            kind(other),
                            show(other),
                            range.start(),
                            range.end()
                        ),
                    );
                    Field::Bad
                }
            },
        }
    }

    fn boolean(&mut self, f: &Fields<'_>, key: &str) -> Field<bool> {
        match f.get(key) {
            None => Field::Missing,
            Some(n) => match n.get_ref() {
                Val::Bool(b) => Field::Ok(*b, n.span()),
                other => {
                    self.bad(
                        f,
                        key,
                        n,
                        format!(
                            "expected a boolean, found {} {}; accepted: true, false",
                            kind(other),
                            show(other)
                        ),
                    );
                    Field::Bad
                }
            },
        }
    }

    /// A non-empty array of distinct integers in `range` (`one`/`many`: what an item is, e.g.
    /// "VLAN id" / "VLAN ids"; `accepted`: what errors say is accepted), every bad item reported.
    fn distinct_ints(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        range: RangeInclusive<i64>,
        (one, many): (&str, &str),
        accepted: &str,
    ) -> Field<Vec<i64>> {
        let Some(n) = f.get(key) else {
            return Field::Missing;
        };
        let items = match n.get_ref() {
            Val::Array(items) if !items.is_empty() => items,
            Val::Array(_) => {
                let msg =
                    format!("expected a non-empty array of {many}, found []; accepted: {accepted}");
                self.bad(f, key, n, msg);
                return Field::Bad;
            }
            other => {
                self.bad(
                    f,
                    key,
                    n,
                    format!(
                        "expected a non-empty array of {many}, found {} {}; accepted: {accepted}",
                        kind(other),
                        show(other)
                    ),
                );
                return Field::Bad;
            }
        };
        let mut out = Vec::new();
        let mut ok = true;
        for item in items {
            match item.get_ref() {
                Val::Int(v) if range.contains(v) && !out.contains(v) => out.push(*v),
                other => {
                    self.bad(
                        f,
                        key,
                        item,
                        format!(
                            "{} {} is not a new {one}; accepted: {accepted}",
                            kind(other),
                            show(other)
                        ),
                    );
                    ok = false;
                }
            }
        }
        if ok {
            Field::Ok(out, n.span())
        } else {
            Field::Bad
        }
    }

    /// A MAC address; `unicast` additionally rejects group and all-zero addresses.
    fn mac(&mut self, f: &Fields<'_>, key: &str, unicast: bool) -> Field<Mac> {
        let (s, span) = match self.string(f, key) {
            Field::Ok(s, span) => (s, span),
            Field::Missing => return Field::Missing,
            Field::Bad => return Field::Bad,
        };
        let section = f.section.clone();
        match parse_mac(s) {
            None => {
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!("`{s}` is not a MAC address; accepted: {MAC_ACCEPTED}"),
                );
                Field::Bad
            }
            Some(m) if unicast && (m[0] & 1 == 1 || m == [0; 6]) => {
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!(
                        "`{s}` is not a unicast MAC address; accepted: {MAC_ACCEPTED} with the \
                         lowest bit of the first octet clear, not all zero"
                    ),
                );
                Field::Bad
            }
            Some(m) => Field::Ok(m, span),
        }
    }

    /// An array of strings (each with its span); `one_or_many` also accepts a single string.
    fn strings<'t>(
        &mut self,
        f: &Fields<'t>,
        key: &str,
        one_or_many: bool,
    ) -> Field<Vec<(&'t str, Range<usize>)>> {
        let Some(n) = f.get(key) else {
            return Field::Missing;
        };
        match n.get_ref() {
            Val::Str(s) if one_or_many => Field::Ok(vec![(s.as_str(), n.span())], n.span()),
            Val::Array(items) => {
                let mut out = Vec::new();
                let mut ok = true;
                for item in items {
                    match item.get_ref() {
                        Val::Str(s) => out.push((s.as_str(), item.span())),
                        other => {
                            self.bad(
                                f,
                                key,
                                item,
                                format!(
                                    "expected a string in the array, found {} {}",
                                    kind(other),
                                    show(other)
                                ),
                            );
                            ok = false;
                        }
                    }
                }
                if ok {
                    Field::Ok(out, n.span())
                } else {
                    Field::Bad
                }
            }
            other => {
                let what = if one_or_many {
                    "a string or an array of strings"
                } else {
                    "an array of strings"
                };
                self.bad(
                    f,
                    key,
                    n,
                    format!("expected {what}, found {} {}", kind(other), show(other)),
                );
                Field::Bad
            }
        }
    }

    /// An IP address (no prefix length).
    fn ip(&mut self, f: &Fields<'_>, key: &str) -> Field<IpAddr> {
        let (s, span) = match self.string(f, key) {
            Field::Ok(s, span) => (s, span),
            Field::Missing => return Field::Missing,
            Field::Bad => return Field::Bad,
        };
        match s.parse::<IpAddr>() {
            Ok(ip) => Field::Ok(ip, span),
            Err(_) => {
                let section = f.section.clone();
                self.error(
                    &span,
                    &section,
                    Some(key),
                    format!(
                        "`{s}` is not an IP address; accepted: an IPv4 or IPv6 address like \
                         198.18.1.2 or 2001:db8:1::2"
                    ),
                );
                Field::Bad
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // The document.

    fn document(&mut self, root: &Node, base_dir: &Path) -> Parsed {
        let mut spec = DataplaneSpec::default();
        let mut files = Vec::new();
        let Some(top) = self.fields(String::new(), None, root, TOP_KEYS) else {
            return Parsed {
                spec,
                files,
                api: crate::api_config::ApiConfig::default(),
            };
        };

        if let Some(n) = top.get("dataplane") {
            self.dataplane(n, &mut spec);
        }
        let ports = self.array_of_tables(&top, "port");
        let routes = self.array_of_tables(&top, "route");
        let neighbours = self.array_of_tables(&top, "neighbour");
        let xconnects = self.array_of_tables(&top, "xconnect");
        let bridges = self.array_of_tables(&top, "bridge");

        // Ports.
        let mut memberships: Vec<Option<Membership>> = Vec::new();
        let mut port_names: Vec<Option<String>> = Vec::new();
        let mut port_specs: Vec<Option<PortSpec>> = Vec::new();
        let mut seen_names: HashMap<String, (usize, usize)> = HashMap::new();
        let mut seen_ips: HashMap<IpAddr, (usize, String)> = HashMap::new();
        let mut seen_tx: HashMap<PathBuf, (usize, String)> = HashMap::new();
        let mut seen_kernel = SeenKernel::default();
        for (i, node) in ports.iter().enumerate() {
            let section = format!("[[port]] #{}", i + 1);
            let Some(f) = self.fields(section.clone(), None, node, PORT_KEYS) else {
                port_names.push(None);
                port_specs.push(None);
                memberships.push(None);
                continue;
            };
            memberships.push(self.membership(&f));
            let (name, port, refs) = self.port(
                &f,
                &spec,
                base_dir,
                &mut seen_names,
                &mut seen_ips,
                &mut seen_tx,
                &mut seen_kernel,
            );
            port_names.push(name);
            port_specs.push(port);
            files.extend(refs);
        }

        // Neighbours.
        let mut neigh: Vec<Option<NeighbourSpec>> = Vec::new();
        let mut neigh_ips: HashMap<IpAddr, usize> = HashMap::new();
        for (i, node) in neighbours.iter().enumerate() {
            let section = format!("[[neighbour]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, NEIGHBOUR_KEYS) else {
                neigh.push(None);
                continue;
            };
            neigh.push(self.neighbour(&f, &port_names, &port_specs, &mut neigh_ips));
        }

        // Routes: a next hop is a static neighbour or a host on a port's prefix.
        let connected: Vec<(IpAddr, u8)> = port_specs
            .iter()
            .flatten()
            .flat_map(|p| {
                let v4 = p.ip4.iter().map(|(a, l)| (IpAddr::V4(*a), *l));
                v4.chain(p.ip6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)))
            })
            .collect();
        let mut seen_prefixes: HashMap<(IpAddr, u8), usize> = HashMap::new();
        for (i, node) in routes.iter().enumerate() {
            let section = format!("[[route]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, ROUTE_KEYS) else {
                continue;
            };
            self.route(&f, &neigh_ips, &connected, &mut seen_prefixes, &mut spec);
        }

        // Cross-connects.
        let mut seen_from: HashMap<usize, usize> = HashMap::new();
        for (i, node) in xconnects.iter().enumerate() {
            let section = format!("[[xconnect]] #{}", i + 1);
            let Some(f) = self.fields(section, None, node, XCONNECT_KEYS) else {
                continue;
            };
            if let Some(x) = self.xconnect(&f, &port_names, &mut seen_from) {
                spec.xconnects.push(x);
            }
        }

        // Bridges and their ports.
        let mut bridge_names: Vec<Option<(String, Range<usize>)>> = Vec::new();
        for (i, node) in bridges.iter().enumerate() {
            let section = format!("[[bridge]] #{}", i + 1);
            let Some(f) = self.fields(section.clone(), None, node, BRIDGE_KEYS) else {
                bridge_names.push(None);
                continue;
            };
            match self.string(&f, "name") {
                Field::Ok(s, span) if valid_name(s) => {
                    if let Some(Some((_, first))) = bridge_names
                        .iter()
                        .find(|b| b.as_ref().is_some_and(|(n, _)| n == s))
                    {
                        let line = self.line_of(first.start);
                        self.error(
                            &span,
                            &section,
                            Some("name"),
                            format!(
                                "duplicate bridge name `{s}`: also defined at line {line}; \
                                 accepted: a name used by one [[bridge]] only"
                            ),
                        );
                        bridge_names.push(None);
                    } else {
                        bridge_names.push(Some((s.to_string(), span)));
                    }
                }
                Field::Ok(s, span) => {
                    self.error(
                        &span,
                        &section,
                        Some("name"),
                        format!("`{s}` is not a valid bridge name; accepted: {NAME_ACCEPTED}"),
                    );
                    bridge_names.push(None);
                }
                Field::Missing => {
                    self.missing(&f, "name", NAME_ACCEPTED);
                    bridge_names.push(None);
                }
                Field::Bad => bridge_names.push(None),
            }
        }
        self.bridges(&memberships, &bridge_names, &port_specs, &mut spec);

        spec.ports = port_specs.into_iter().flatten().collect();
        spec.neighbours = neigh.into_iter().flatten().collect();
        let api = match top.get("api") {
            Some(n) => self.api(n, base_dir),
            None => crate::api_config::ApiConfig::default(),
        };
        Parsed { spec, files, api }
    }

    /// `poll-mode` (one mode, or one per worker) and `poll-sleep-max-us` of `[dataplane]`.
    fn poll(&mut self, f: &Fields<'_>, spec: &mut DataplaneSpec) {
        let accepted = "accepted: \"busy\" (poll without pause) or \"adaptive\" (sleep when \
                        idle, wake on traffic), or a list with one of them per worker";
        let mode = |s: &str| match s {
            "busy" => Some(dataplane::PollMode::Busy),
            "adaptive" => Some(dataplane::PollMode::Adaptive),
            _ => None,
        };
        if let Some(node) = f.get("poll-mode") {
            match node.get_ref() {
                Val::Str(s) => match mode(s) {
                    Some(m) => spec.poll.default = m,
                    None => self.bad(
                        f,
                        "poll-mode",
                        node,
                        format!("`{s}` is not a mode; {accepted}"),
                    ),
                },
                Val::Array(items) => {
                    let mut modes = Vec::new();
                    for it in items {
                        match it.get_ref() {
                            Val::Str(s) if mode(s).is_some() => modes.extend(mode(s)),
                            _ => {
                                self.bad(
                                    f,
                                    "poll-mode",
                                    node,
                                    format!("a list entry is not a mode; {accepted}"),
                                );
                                return;
                            }
                        }
                    }
                    if modes.len() != spec.workers {
                        self.bad(
                            f,
                            "poll-mode",
                            node,
                            format!(
                                "{} modes for {} worker(s); {accepted}",
                                modes.len(),
                                spec.workers
                            ),
                        );
                        return;
                    }
                    spec.poll.modes = modes;
                }
                _ => self.bad(f, "poll-mode", node, accepted),
            }
        }
        if let Some(v) = self.int(f, "poll-sleep-max-us", 10..=100_000).ok() {
            spec.poll.sleep_max_us = v as u32;
        }
    }

    /// `[api]`: the TCP listener of the HTTP API and its token file.
    fn api(&mut self, node: &Node, base_dir: &Path) -> crate::api_config::ApiConfig {
        let mut api = crate::api_config::ApiConfig::default();
        let Some(f) = self.fields("[api]".to_string(), Some("api"), node, API_KEYS) else {
            return api;
        };
        let mut tcp_span = None;
        match self.string(&f, "tcp") {
            Field::Ok(s, span) => match s.parse::<std::net::SocketAddr>() {
                Ok(a) => {
                    api.tcp = Some(a);
                    tcp_span = Some(span);
                }
                Err(_) => self.error(
                    &span,
                    "[api]",
                    Some("tcp"),
                    format!(
                        "`{s}` is not an address and port; accepted: \"127.0.0.1:8080\" or \
                         \"[::1]:8080\" (loopback unless the network is trusted)"
                    ),
                ),
            },
            Field::Missing | Field::Bad => {}
        }
        match self.string(&f, "token-file") {
            Field::Ok(s, _) => api.token_file = Some(base_dir.join(s)),
            Field::Missing | Field::Bad => {}
        }
        if let (Some(span), None) = (tcp_span, &api.token_file) {
            self.error(
                &span,
                "[api]",
                Some("tcp"),
                "a TCP listener needs token-file: every request on it must carry the token \
                 (`Authorization: Bearer ...`)"
                    .to_string(),
            );
        }
        api
    }

    /// A port's `bridge`, `access-vlan`, `trunk-vlans` and `native-vlan` keys.
    fn membership(&mut self, f: &Fields<'_>) -> Option<Membership> {
        let section = f.section.clone();
        let vlan_keys = ["access-vlan", "trunk-vlans", "native-vlan"];
        let (name, span) = match self.string(f, "bridge") {
            Field::Ok(s, span) => (s.to_string(), span),
            Field::Missing => {
                for k in vlan_keys {
                    if let Some(n) = f.get(k) {
                        self.bad(
                            f,
                            k,
                            n,
                            format!(
                                "`{k}` applies only to a port in a bridge; accepted: add \
                                 bridge = \"NAME\" naming a [[bridge]]"
                            ),
                        );
                    }
                }
                return None;
            }
            Field::Bad => return None,
        };
        let access = self.int(f, "access-vlan", 1..=4094);
        let native = self.int(f, "native-vlan", 1..=4094);
        let trunk = self.distinct_ints(
            f,
            "trunk-vlans",
            1..=4094,
            ("VLAN id", "VLAN ids"),
            "distinct VLAN ids 1..=4094, like [10, 20]",
        );
        let mode = match (access, trunk, native) {
            (Field::Bad, _, _) | (_, Field::Bad, _) | (_, _, Field::Bad) => None,
            (Field::Ok(_, span), Field::Ok(..), _) => {
                self.error(
                    &span,
                    &section,
                    Some("access-vlan"),
                    "a port is an access port (`access-vlan`) or a trunk (`trunk-vlans`), not \
                     both; accepted: one of them",
                );
                None
            }
            (Field::Ok(_, span), _, Field::Ok(..)) => {
                self.error(
                    &span,
                    &section,
                    Some("native-vlan"),
                    "`native-vlan` applies only to trunk ports; accepted: `trunk-vlans` with an \
                     optional `native-vlan`, or `access-vlan` alone",
                );
                None
            }
            (Field::Ok(v, _), Field::Missing, Field::Missing) => {
                Some(BridgePortMode::Access { pvid: v as u16 })
            }
            (Field::Missing, Field::Ok(allowed, _), native) => Some(BridgePortMode::Trunk {
                allowed: allowed.into_iter().map(|v| v as u16).collect(),
                native: native.ok().map(|v| v as u16),
            }),
            (Field::Missing, Field::Missing, Field::Ok(_, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("native-vlan"),
                    "`native-vlan` applies only to trunk ports; accepted: add `trunk-vlans`",
                );
                None
            }
            (Field::Missing, Field::Missing, Field::Missing) => {
                Some(BridgePortMode::Access { pvid: 1 })
            }
        };
        Some(Membership {
            section,
            name,
            span,
            mode,
        })
    }

    /// Resolve the ports' `bridge` keys against the [[bridge]] sections into `spec.bridges`.
    fn bridges(
        &mut self,
        memberships: &[Option<Membership>],
        names: &[Option<(String, Range<usize>)>],
        ports: &[Option<PortSpec>],
        spec: &mut DataplaneSpec,
    ) {
        // (spec, [[bridge]] number, name span, members rejected by an error reported already)
        let mut out: Vec<(BridgeSpec, usize, Range<usize>, usize)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.as_ref().map(|(n, span)| (i, n, span)))
            .map(|(i, n, span)| {
                let spec = BridgeSpec {
                    name: n.clone(),
                    ports: Vec::new(),
                };
                (spec, i + 1, span.clone(), 0)
            })
            .collect();
        let defined = || {
            let list: Vec<String> = names
                .iter()
                .flatten()
                .map(|(n, _)| format!("`{n}`"))
                .collect();
            if list.is_empty() {
                "(no [[bridge]] is defined)".to_string()
            } else {
                list.join(", ")
            }
        };
        for (id, m) in memberships.iter().enumerate() {
            let Some(m) = m else { continue };
            let Some((b, _, _, rejected)) = out.iter_mut().find(|b| b.0.name == m.name) else {
                let msg = format!(
                    "no [[bridge]] is named `{}`; accepted: {}",
                    m.name,
                    defined()
                );
                self.error(&m.span, &m.section, Some("bridge"), msg);
                continue;
            };
            if let Some(Some(p)) = ports.get(id) {
                if !p.ip4.is_empty() || !p.ip6.is_empty() {
                    *rejected += 1;
                    self.error(
                        &m.span,
                        &m.section,
                        Some("bridge"),
                        format!(
                            "port `{}` has IP addresses and is in bridge `{}`; accepted: a \
                             bridged port without `ip4`/`ip6` (it switches, it does not route)",
                            p.name, m.name
                        ),
                    );
                    continue;
                }
            }
            let Some(mode) = m.mode.clone() else {
                *rejected += 1;
                continue;
            };
            if spec.xconnects.iter().any(|x| x.from == id) {
                *rejected += 1;
                self.error(
                    &m.span,
                    &m.section,
                    Some("bridge"),
                    "this port is also the `from` of an [[xconnect]]; accepted: a port either \
                     cross-connected or bridged",
                );
                continue;
            }
            b.ports.push(BridgeMemberSpec { port: id, mode });
        }
        for (b, number, span, rejected) in &out {
            let n = b.ports.len() + rejected;
            if n < 2 {
                let section = format!("[[bridge]] #{number}");
                self.error(
                    span,
                    &section,
                    Some("name"),
                    format!(
                        "bridge `{}` has {n} port{}; accepted: at least two ports naming it with \
                         bridge = \"{}\"",
                        b.name,
                        if n == 1 { "" } else { "s" },
                        b.name
                    ),
                );
            }
        }
        let out: Vec<BridgeSpec> = out.into_iter().map(|b| b.0).collect();
        spec.bridges = out;
    }

    fn array_of_tables<'t>(&mut self, top: &Fields<'t>, key: &str) -> Vec<&'t Node> {
        let Some(n) = top.get(key) else {
            return Vec::new();
        };
        match n.get_ref() {
            Val::Array(items) => items.iter().collect(),
            other => {
                self.error(
                    &n.span(),
                    "",
                    Some(key),
                    format!(
                        "expected an array of tables, found {}; accepted: one `[[{key}]]` \
                         header per {key}",
                        kind(other)
                    ),
                );
                Vec::new()
            }
        }
    }

    fn dataplane(&mut self, node: &Node, spec: &mut DataplaneSpec) {
        let Some(f) = self.fields(
            "[dataplane]".to_string(),
            Some("dataplane"),
            node,
            DATAPLANE_KEYS,
        ) else {
            return;
        };
        if let Some(v) = self.int(&f, "buffers", 64..=16_777_216).ok() {
            spec.buffers = v as u32;
        }
        if let Some(v) = self.int(&f, "data-size", 256..=9216).ok() {
            spec.data_size = v as u16;
        }
        match self.int(&f, "worker-cpu", 0..=i64::from(u32::MAX)) {
            Field::Ok(v, span) => {
                let cpus = online_cpus();
                if (v as usize) < cpus {
                    spec.worker_cpu = Some(v as usize);
                } else {
                    self.error(
                        &span,
                        "[dataplane]",
                        Some("worker-cpu"),
                        format!(
                            "CPU {v} does not exist; accepted: 0..={} (this host has {cpus} \
                             online CPUs)",
                            cpus.saturating_sub(1)
                        ),
                    );
                }
            }
            Field::Missing | Field::Bad => {}
        }
        if let Some(v) = self.int(&f, "workers", 1..=64).ok() {
            spec.workers = v as usize;
        }
        let cpus = online_cpus() as i64;
        let accepted = format!(
            "distinct CPUs 0..={} (this host has {cpus} online CPUs), like [0, 1]",
            cpus - 1
        );
        let cpu_list = self.distinct_ints(
            &f,
            "worker-cpus",
            0..=cpus - 1,
            ("online CPU", "CPUs"),
            &accepted,
        );
        if let Field::Ok(list, span) = cpu_list {
            if list.len() != spec.workers {
                self.error(
                    &span,
                    "[dataplane]",
                    Some("worker-cpus"),
                    format!(
                        "{} CPUs for {} worker{}; accepted: one CPU per worker",
                        list.len(),
                        spec.workers,
                        if spec.workers == 1 { "" } else { "s" }
                    ),
                );
            } else {
                spec.worker_cpus = list.into_iter().map(|c| c as usize).collect();
            }
        }
        if spec.workers > 1 {
            if let Some(n) = f.get("worker-cpu") {
                self.bad(
                    &f,
                    "worker-cpu",
                    n,
                    "`worker-cpu` pins the only worker; with workers > 1 accepted: worker-cpus = \
                     [CPU, ...] with one CPU per worker",
                );
            }
        }
        match self.string(&f, "ip4-options") {
            Field::Ok("forward", _) => spec.ip.ip4_options = OptionsPolicy::Forward,
            Field::Ok("drop", _) => spec.ip.ip4_options = OptionsPolicy::Drop,
            Field::Ok(s, span) => self.error(
                &span,
                "[dataplane]",
                Some("ip4-options"),
                format!("`{s}` is not a policy; accepted: \"forward\", \"drop\""),
            ),
            Field::Missing | Field::Bad => {}
        }
        self.poll(&f, spec);
        let max = i64::from(u32::MAX);
        if let Some(v) = self.int(&f, "icmp-errors-per-second", 0..=max).ok() {
            spec.ip.icmp_errors_per_second = v as u32;
        }
        if let Some(v) = self.int(&f, "icmp-errors-burst", 0..=max).ok() {
            spec.ip.icmp_errors_burst = v as u32;
        }
        let max_macs = dataplane::MAX_BRIDGE_MACS as i64;
        if let Some(v) = self.int(&f, "bridge-max-macs", 0..=max_macs).ok() {
            spec.bridge.max_macs = v as usize;
        }
        if let Some(v) = self.int(&f, "bridge-age-seconds", 0..=max).ok() {
            spec.bridge.age_seconds = v as u32;
        }
        let capacity = dataplane::MAX_NEIGHBOUR_CAPACITY as i64;
        if let Some(v) = self.int(&f, "neighbour-capacity", 1..=capacity).ok() {
            spec.neighbour.capacity = v as usize;
        }
        if let Some(v) = self.int(&f, "neighbour-reachable-seconds", 1..=86_400).ok() {
            spec.neighbour.reachable_seconds = v as u32;
        }
        if let Some(v) = self.int(&f, "neighbour-gc-seconds", 1..=86_400).ok() {
            spec.neighbour.gc_seconds = v as u32;
        }
        if let Some(v) = self.int(&f, "neighbour-queue", 1..=256).ok() {
            spec.neighbour.queue_per_neighbour = v as u16;
        }
    }

    /// One `[[port]]`: its name (if valid, so references resolve even when the port has other
    /// errors), the port if fully valid, and its pcap file references.
    #[allow(clippy::too_many_arguments)]
    fn port(
        &mut self,
        f: &Fields<'_>,
        spec: &DataplaneSpec,
        base_dir: &Path,
        seen_names: &mut HashMap<String, (usize, usize)>,
        seen_ips: &mut HashMap<IpAddr, (usize, String)>,
        seen_tx: &mut HashMap<PathBuf, (usize, String)>,
        seen_kernel: &mut SeenKernel,
    ) -> (Option<String>, Option<PortSpec>, Vec<FileRef>) {
        let section = f.section.clone();
        let errors_before = self.issues.len();
        let mut refs = Vec::new();

        let name = match self.string(f, "name") {
            Field::Ok(s, span) => {
                if valid_name(s) {
                    let line = self.line_of(span.start);
                    if let Some((first, idx)) = seen_names.get(s) {
                        let msg = format!(
                            "duplicate port name `{s}`: also the name of [[port]] #{} at line \
                             {first}; accepted: a name used by one port only",
                            idx + 1
                        );
                        self.error(&span, &section, Some("name"), msg);
                    } else {
                        let idx = seen_names.len();
                        seen_names.insert(s.to_string(), (line, idx));
                    }
                    Some(s.to_string())
                } else {
                    self.error(
                        &span,
                        &section,
                        Some("name"),
                        format!("`{s}` is not a valid port name; accepted: {NAME_ACCEPTED}"),
                    );
                    None
                }
            }
            Field::Missing => {
                self.missing(f, "name", NAME_ACCEPTED);
                None
            }
            Field::Bad => None,
        };
        let label = name.clone().unwrap_or_else(|| section.clone());

        let driver = match self.string(f, "driver") {
            Field::Ok(s, span) => {
                let d = Drv::ALL.into_iter().find(|d| d.name() == s);
                if d.is_none() {
                    self.error(
                        &span,
                        &section,
                        Some("driver"),
                        format!("`{s}` is not a driver; accepted: {DRIVERS_ACCEPTED}"),
                    );
                }
                d
            }
            Field::Missing => {
                self.missing(f, "driver", DRIVERS_ACCEPTED);
                None
            }
            Field::Bad => None,
        };

        let mac = match self.mac(f, "mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => {
                self.missing(f, "mac", &format!("a unicast MAC, {MAC_ACCEPTED}"));
                None
            }
            Field::Bad => None,
        };
        let mtu = match self.int(f, "mtu", 68..=9000) {
            Field::Ok(v, _) => Some(v as u16),
            Field::Missing => Some(1500),
            Field::Bad => None,
        };

        let ip4 = self.own_addresses(f, "ip4", false, &label, seen_ips);
        let ip6 = self.own_addresses(f, "ip6", true, &label, seen_ips);

        // Driver-specific keys.
        if let Some(d) = driver {
            let own = d.keys();
            for (k, n) in &f.entries {
                if own.contains(k) {
                    continue;
                }
                let owners: Vec<String> = Drv::ALL
                    .into_iter()
                    .filter(|o| o.keys().contains(k))
                    .map(|o| format!("\"{}\"", o.name()))
                    .collect();
                if owners.is_empty() {
                    continue;
                }
                self.bad(
                    f,
                    k,
                    n,
                    format!(
                        "`{k}` applies only to driver = {}; this port's driver is \"{}\", \
                         whose keys are: {}",
                        owners.join(" or "),
                        d.name(),
                        own.join(", ")
                    ),
                );
            }
        }

        if let (Some(d @ Drv::Pcap), Some(n)) = (driver, f.get("driver")) {
            if spec.workers > 1 {
                self.bad(
                    f,
                    "driver",
                    n,
                    format!(
                        "a \"{}\" port runs on one worker, and [dataplane] workers = {}; \
                         accepted: workers = 1, or \"af-xdp\", \"af-packet\" or \"tap\" \
                         ports",
                        d.name(),
                        spec.workers
                    ),
                );
            }
        }
        let drv = match driver {
            Some(Drv::Pcap) => {
                let mut path_of = |ctx: &mut Ctx<'_>, key: &'static str| -> Option<PathBuf> {
                    match ctx.string(f, key) {
                        Field::Ok("", span) => {
                            ctx.error(
                                &span,
                                &section,
                                Some(key),
                                "empty path; accepted: a file path relative to the config \
                                 file's directory",
                            );
                            None
                        }
                        Field::Ok(s, span) => {
                            let p = base_dir.join(s);
                            refs.push(FileRef {
                                section: section.clone(),
                                field: key,
                                line: ctx.line_of(span.start),
                                path: p.clone(),
                                is_rx: key == "rx",
                            });
                            Some(p)
                        }
                        Field::Missing | Field::Bad => None,
                    }
                };
                let rx = path_of(self, "rx");
                let tx = path_of(self, "tx");
                if let (Some(r), Some(t)) = (&rx, &tx) {
                    if r == t {
                        if let Some(n) = f.get("tx") {
                            self.bad(
                                f,
                                "tx",
                                n,
                                "`tx` is the same file as `rx`; accepted: a different file",
                            );
                        }
                    }
                }
                if let (Some(t), Some(n)) = (&tx, f.get("tx")) {
                    let line = self.line_of(n.span().start);
                    if let Some((first, other)) = seen_tx.get(t) {
                        let msg = format!(
                            "{} is also the `tx` file of port `{other}` at line {first}; \
                             accepted: one writer per file",
                            t.display()
                        );
                        self.bad(f, "tx", n, msg);
                    } else {
                        seen_tx.insert(t.clone(), (line, label.clone()));
                    }
                }
                Some(PortDriver::Pcap { rx, tx })
            }
            Some(Drv::Memory) => self.memory_port(f, spec, mac).map(PortDriver::Memory),
            Some(Drv::AfPacket) => {
                let interface = self.interface(f, name.as_deref(), &label, seen_kernel);
                let fanout = match self.int(f, "fanout", 0..=65535) {
                    Field::Ok(v, span) => {
                        let line = self.line_of(span.start);
                        let group = v as u16;
                        if let Some((first, other)) = seen_kernel.fanouts.get(&group) {
                            let msg = format!(
                                "fanout group {group} is also used by port `{other}` at line \
                                 {first}; accepted: a group id used by one port only (a group \
                                 belongs to one interface)"
                            );
                            self.error(&span, &section, Some("fanout"), msg);
                            None
                        } else {
                            seen_kernel.fanouts.insert(group, (line, label.clone()));
                            Some(Some(group))
                        }
                    }
                    Field::Missing => Some(None),
                    Field::Bad => None,
                };
                match (interface, fanout) {
                    (Some(interface), Some(fanout)) => {
                        Some(PortDriver::AfPacket { interface, fanout })
                    }
                    _ => None,
                }
            }
            Some(Drv::AfXdp) => {
                let interface = self.interface(f, name.as_deref(), &label, seen_kernel);
                let queues = match self.int(f, "queues", 1..=64) {
                    Field::Ok(v, _) => Some(v as u32),
                    // All of the interface's receive queues, counted when the port opens.
                    Field::Missing => Some(0),
                    Field::Bad => None,
                };
                let mode = match self.string(f, "xdp-mode") {
                    Field::Ok("auto", _) | Field::Missing => Some(XdpModeChoice::Auto),
                    Field::Ok("native", _) => Some(XdpModeChoice::Native),
                    Field::Ok("generic", _) => Some(XdpModeChoice::Generic),
                    Field::Ok(s, span) => {
                        self.error(
                            &span,
                            &section,
                            Some("xdp-mode"),
                            format!("`{s}` is not an XDP mode; accepted: {XDP_MODES_ACCEPTED}"),
                        );
                        None
                    }
                    Field::Bad => None,
                };
                match (interface, queues, mode) {
                    (Some(interface), Some(queues), Some(mode)) => Some(PortDriver::AfXdp {
                        interface,
                        queues,
                        mode,
                    }),
                    _ => None,
                }
            }
            Some(Drv::Tap) => {
                let interface = self.interface(f, name.as_deref(), &label, seen_kernel);
                let vnet_hdr = match self.boolean(f, "vnet-hdr") {
                    Field::Ok(b, _) => Some(b),
                    Field::Missing => Some(false),
                    Field::Bad => None,
                };
                match (interface, vnet_hdr) {
                    (Some(name), Some(vnet_hdr)) => Some(PortDriver::Tap { name, vnet_hdr }),
                    _ => None,
                }
            }
            None => None,
        };

        if self.issues.len() != errors_before {
            return (name, None, refs);
        }
        match (name.clone(), mac, mtu, ip4, ip6, drv) {
            (Some(name), Some(mac), Some(mtu), Some(ip4), Some(ip6), Some(driver)) => {
                let ip4 = ip4
                    .into_iter()
                    .filter_map(|(a, l)| match a {
                        IpAddr::V4(a) => Some((a, l)),
                        IpAddr::V6(_) => None,
                    })
                    .collect();
                let ip6 = ip6
                    .into_iter()
                    .filter_map(|(a, l)| match a {
                        IpAddr::V6(a) => Some((a, l)),
                        IpAddr::V4(_) => None,
                    })
                    .collect();
                let port = PortSpec {
                    name: name.clone(),
                    mac,
                    mtu,
                    ip4,
                    ip6,
                    driver,
                };
                (Some(name), Some(port), refs)
            }
            _ => (name, None, refs),
        }
    }

    /// `interface` of an af-packet or tap port (default: the port's name): a name the kernel
    /// accepts, used by one port only.
    fn interface(
        &mut self,
        f: &Fields<'_>,
        port_name: Option<&str>,
        label: &str,
        seen: &mut SeenKernel,
    ) -> Option<String> {
        let section = f.section.clone();
        // Where a problem is reported: the `interface` key, else the `name` it defaults to.
        let (value, key, span) = match self.string(f, "interface") {
            Field::Ok(s, span) => (s.to_string(), "interface", span),
            Field::Missing => {
                let name = port_name?;
                let span = f.get("name").map(|n| n.span())?;
                (name.to_string(), "name", span)
            }
            Field::Bad => return None,
        };
        let valid = !value.is_empty()
            && value.len() <= 15
            && value != "."
            && value != ".."
            && !value.contains(['/', ':'])
            && !value.contains(char::is_whitespace);
        if !valid {
            let msg = if key == "interface" {
                format!("`{value}` is not a valid interface name; accepted: {IFNAME_ACCEPTED}")
            } else {
                format!(
                    "port name `{value}` is also its interface name (there is no `interface` \
                     key) and the kernel does not accept it; accepted: set `interface` to \
                     {IFNAME_ACCEPTED}"
                )
            };
            self.error(&span, &section, Some(key), msg);
            return None;
        }
        let line = self.line_of(span.start);
        if let Some((first, other)) = seen.interfaces.get(&value) {
            let msg = format!(
                "interface `{value}` is also used by port `{other}` at line {first}; accepted: \
                 one port per kernel interface (several workers share a port)"
            );
            self.error(&span, &section, Some(key), msg);
            return None;
        }
        seen.interfaces
            .insert(value.clone(), (line, label.to_string()));
        Some(value)
    }

    /// `ip4` / `ip6` of a port: own addresses with prefix lengths.
    fn own_addresses(
        &mut self,
        f: &Fields<'_>,
        key: &str,
        v6: bool,
        port: &str,
        seen: &mut HashMap<IpAddr, (usize, String)>,
    ) -> Option<Vec<(IpAddr, u8)>> {
        let items = match self.strings(f, key, false) {
            Field::Ok(items, _) => items,
            Field::Missing => return Some(Vec::new()),
            Field::Bad => return None,
        };
        let section = f.section.clone();
        let example = if v6 {
            "2001:db8:1::1/64"
        } else {
            "198.18.1.1/24"
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (s, span) in items {
            match parse_prefix(s) {
                Ok((ip, len)) if ip.is_ipv6() == v6 => {
                    if len == 0 {
                        self.error(
                            &span,
                            &section,
                            Some(key),
                            format!(
                                "`{s}` has prefix length 0; accepted: an address with a prefix \
                                 length of at least 1, like {example}"
                            ),
                        );
                        ok = false;
                        continue;
                    }
                    if let Some(why) = unusable_own_address(ip, len) {
                        self.error(
                            &span,
                            &section,
                            Some(key),
                            format!(
                                "`{s}`: {why}; accepted: a unicast address of the port's own \
                                 subnet, like {example}"
                            ),
                        );
                        ok = false;
                        continue;
                    }
                    let line = self.line_of(span.start);
                    if let Some((first, other)) = seen.get(&ip) {
                        let msg = format!(
                            "address {ip} is already assigned to port `{other}` at line {first}; \
                             accepted: an address assigned once"
                        );
                        self.error(&span, &section, Some(key), msg);
                        ok = false;
                        continue;
                    }
                    let net = mask(ip, len);
                    if let Some((onet, olen, oline, oport)) = self
                        .own_nets
                        .iter()
                        .find(|(n, l, _, p)| {
                            p != port && (contains(*n, *l, net) || contains(net, len, *n))
                        })
                        .cloned()
                    {
                        let msg = format!(
                            "subnet {net}/{len} overlaps {onet}/{olen} of port `{oport}` (line \
                             {oline}); accepted: one subnet per port, not shared with another \
                             port"
                        );
                        self.error(&span, &section, Some(key), msg);
                        ok = false;
                        continue;
                    }
                    seen.insert(ip, (line, port.to_string()));
                    self.own_nets.push((net, len, line, port.to_string()));
                    out.push((ip, len));
                }
                Ok((ip, _)) => {
                    let other = if v6 { "ip4" } else { "ip6" };
                    self.error(
                        &span,
                        &section,
                        Some(key),
                        format!(
                            "`{s}` is an {} address; put it in `{other}`; accepted here: \
                             addresses like {example}",
                            if ip.is_ipv6() { "IPv6" } else { "IPv4" }
                        ),
                    );
                    ok = false;
                }
                Err(why) => {
                    self.error(
                        &span,
                        &section,
                        Some(key),
                        format!("`{s}` {why}; accepted: ADDRESS/LENGTH like {example}"),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn memory_port(
        &mut self,
        f: &Fields<'_>,
        spec: &DataplaneSpec,
        mac: Option<Mac>,
    ) -> Option<MemoryPortSpec> {
        let before = self.issues.len();
        let section = f.section.clone();
        let frame_size = match self.int(f, "frame-size", 64..=9000) {
            Field::Ok(v, span) => Some((v as usize, Some(span))),
            Field::Missing => Some((DEFAULT_FRAME_SIZE, None)),
            Field::Bad => None,
        };
        let flows = match self.int(f, "flows", 1..=16_777_216) {
            Field::Ok(v, _) => Some(v as u32),
            Field::Missing => Some(DEFAULT_FLOWS),
            Field::Bad => None,
        };
        let src_mac = match self.mac(f, "src-mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => Some(DEFAULT_SRC_MAC),
            Field::Bad => None,
        };
        let dst_mac = match self.mac(f, "dst-mac", false) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => mac,
            Field::Bad => None,
        };
        let vlan = match self.int(f, "vlan", 1..=4094) {
            Field::Ok(v, _) => Some(Some(v as u16)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        let limit = match self.int(f, "limit", 1..=i64::MAX) {
            Field::Ok(v, _) => Some(Some(v as u64)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        let generate = match self.boolean(f, "generate") {
            Field::Ok(b, _) => Some(b),
            Field::Missing => Some(true),
            Field::Bad => None,
        };
        let gen = generate.unwrap_or(true);
        let src_ip = match self.ip(f, "src-ip") {
            Field::Ok(ip, _) => Some(ip),
            Field::Missing if gen => {
                self.missing(
                    f,
                    "src-ip",
                    "an IPv4 or IPv6 source address like 198.18.0.1 (required unless generate = false)",
                );
                None
            }
            Field::Missing => Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))),
            Field::Bad => None,
        };
        let destinations = match self.strings(f, "destinations", false) {
            Field::Ok(items, span) => {
                if items.is_empty() {
                    self.error(
                        &span,
                        &section,
                        Some("destinations"),
                        "empty list; accepted: a non-empty list of addresses of the same family \
                         as `src-ip`",
                    );
                    None
                } else {
                    let mut out = Vec::new();
                    let mut ok = true;
                    for (s, span) in items {
                        match s.parse::<IpAddr>() {
                            Ok(ip) => {
                                if let Some(src) = src_ip {
                                    if src.is_ipv6() != ip.is_ipv6() {
                                        self.error(
                                            &span,
                                            &section,
                                            Some("destinations"),
                                            format!(
                                                "`{s}` is not of the same family as src-ip {src}; \
                                                 accepted: {} addresses",
                                                if src.is_ipv6() { "IPv6" } else { "IPv4" }
                                            ),
                                        );
                                        ok = false;
                                    }
                                }
                                out.push(ip);
                            }
                            Err(_) => {
                                self.error(
                                    &span,
                                    &section,
                                    Some("destinations"),
                                    format!(
                                        "`{s}` is not an IP address; accepted: addresses like \
                                         198.18.2.10 or 2001:db8:2::10"
                                    ),
                                );
                                ok = false;
                            }
                        }
                    }
                    ok.then_some(out)
                }
            }
            Field::Missing if gen => {
                self.missing(
                    f,
                    "destinations",
                    "a non-empty list of destination addresses like [\"198.18.2.10\"] \
                     (required unless generate = false)",
                );
                None
            }
            Field::Missing => match src_ip {
                Some(IpAddr::V6(_)) => Some(vec![IpAddr::V6(Ipv6Addr::new(
                    0x2001, 0xdb8, 0, 0, 0, 0, 0, 2,
                ))]),
                _ => Some(vec![IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))]),
            },
            Field::Bad => None,
        };

        // The frame must hold the generated headers and fit a buffer.
        if let (Some((size, span)), Some(src), Some(vlan)) = (frame_size.clone(), src_ip, vlan) {
            let l3 = if src.is_ipv6() { 40 } else { 20 };
            let min = 14 + if vlan.is_some() { 4 } else { 0 } + l3 + 8 + 4;
            let span = span.unwrap_or_else(|| f.span.clone());
            if size < min {
                self.error(
                    &span,
                    &section,
                    Some("frame-size"),
                    format!(
                        "{size}{} bytes cannot hold the Ethernet{}, {} and UDP headers plus FCS; \
                         accepted: {min}..=9000",
                        if f.get("frame-size").is_none() {
                            " (the default)"
                        } else {
                            ""
                        },
                        if vlan.is_some() { ", 802.1Q" } else { "" },
                        if src.is_ipv6() { "IPv6" } else { "IPv4" }
                    ),
                );
            } else if size - 4 > usize::from(spec.data_size) {
                self.error(
                    &span,
                    &section,
                    Some("frame-size"),
                    format!(
                        "{size}-byte frames do not fit a {}-byte buffer ([dataplane] data-size); \
                         accepted: up to {} or a larger data-size",
                        spec.data_size,
                        usize::from(spec.data_size) + 4
                    ),
                );
            }
        }

        if self.issues.len() != before {
            return None;
        }
        Some(MemoryPortSpec {
            frame_size: frame_size?.0,
            flows: flows?,
            dst_mac: dst_mac?,
            src_mac: src_mac?,
            vlan: vlan?,
            src_ip: src_ip?,
            destinations: destinations?,
            limit: limit?,
            generate: generate?,
        })
    }

    fn neighbour(
        &mut self,
        f: &Fields<'_>,
        port_names: &[Option<String>],
        port_specs: &[Option<PortSpec>],
        seen: &mut HashMap<IpAddr, usize>,
    ) -> Option<NeighbourSpec> {
        let section = f.section.clone();
        let before = self.issues.len();
        let ip = match self.ip(f, "ip") {
            Field::Ok(ip, span) => {
                let line = self.line_of(span.start);
                if let Some(first) = seen.get(&ip) {
                    let msg = format!(
                        "duplicate neighbour {ip}: also defined at line {first}; accepted: one \
                         [[neighbour]] per address"
                    );
                    self.error(&span, &section, Some("ip"), msg);
                } else {
                    seen.insert(ip, line);
                }
                Some((ip, span))
            }
            Field::Missing => {
                self.missing(f, "ip", "an IPv4 or IPv6 address like 198.18.1.2");
                None
            }
            Field::Bad => None,
        };
        let mac = match self.mac(f, "mac", true) {
            Field::Ok(m, _) => Some(m),
            Field::Missing => {
                self.missing(f, "mac", &format!("a unicast MAC, {MAC_ACCEPTED}"));
                None
            }
            Field::Bad => None,
        };
        let port = match self.string(f, "port") {
            Field::Ok(s, span) => match port_names.iter().position(|n| n.as_deref() == Some(s)) {
                Some(i) => Some(i),
                None => {
                    let msg = format!(
                        "no port is named `{s}`; accepted: {}",
                        name_list(port_names)
                    );
                    self.error(&span, &section, Some("port"), msg);
                    None
                }
            },
            Field::Missing => {
                let msg = name_list(port_names);
                self.missing(f, "port", &msg);
                None
            }
            Field::Bad => None,
        };

        // The address must be on one of the port's subnets (and not the port's own).
        if let (Some((ip, span)), Some(p)) = (&ip, port) {
            if let Some(Some(ps)) = port_specs.get(p) {
                let nets: Vec<(IpAddr, u8)> = match ip {
                    IpAddr::V4(_) => ps.ip4.iter().map(|(a, l)| (IpAddr::V4(*a), *l)).collect(),
                    IpAddr::V6(_) => ps.ip6.iter().map(|(a, l)| (IpAddr::V6(*a), *l)).collect(),
                };
                let fam = if ip.is_ipv6() { "IPv6" } else { "IPv4" };
                if nets.iter().any(|(a, _)| a == ip) {
                    self.error(
                        span,
                        &section,
                        Some("ip"),
                        format!(
                            "{ip} is port `{}`'s own address; accepted: another host on one of \
                             its subnets",
                            ps.name
                        ),
                    );
                } else if !nets.iter().any(|(a, l)| contains(*a, *l, *ip)) {
                    let list = if nets.is_empty() {
                        format!("(port `{}` has no {fam} address)", ps.name)
                    } else {
                        nets.iter()
                            .map(|(a, l)| format!("{}/{l}", mask(*a, *l)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    self.error(
                        span,
                        &section,
                        Some("ip"),
                        format!(
                            "{ip} is not on a subnet of port `{}`; accepted: an address inside \
                             {list}",
                            ps.name
                        ),
                    );
                }
            }
        }
        if self.issues.len() != before {
            return None;
        }
        Some(NeighbourSpec {
            ip: ip?.0,
            mac: mac?,
            port: port?,
        })
    }

    fn route(
        &mut self,
        f: &Fields<'_>,
        neighbours: &HashMap<IpAddr, usize>,
        connected: &[(IpAddr, u8)],
        seen: &mut HashMap<(IpAddr, u8), usize>,
        spec: &mut DataplaneSpec,
    ) {
        let section = f.section.clone();
        let before = self.issues.len();
        let prefix = match self.string(f, "prefix") {
            Field::Ok(s, span) => match parse_prefix(s) {
                Ok((ip, len)) => {
                    let net = mask(ip, len);
                    if net != ip {
                        self.error(
                            &span,
                            &section,
                            Some("prefix"),
                            format!(
                                "`{s}` has host bits set (did you mean {net}/{len}?); accepted: \
                                 a network address with its prefix length"
                            ),
                        );
                        None
                    } else {
                        let line = self.line_of(span.start);
                        if let Some(first) = seen.get(&(net, len)) {
                            let msg = format!(
                                "duplicate route {net}/{len}: also defined at line {first}; \
                                 accepted: one [[route]] per prefix"
                            );
                            self.error(&span, &section, Some("prefix"), msg);
                        } else {
                            seen.insert((net, len), line);
                        }
                        Some((net, len))
                    }
                }
                Err(why) => {
                    self.error(
                        &span,
                        &section,
                        Some("prefix"),
                        format!(
                            "`{s}` {why}; accepted: ADDRESS/LENGTH like 198.18.2.0/24 or \
                             2001:db8:2::/48"
                        ),
                    );
                    None
                }
            },
            Field::Missing => {
                self.missing(f, "prefix", "ADDRESS/LENGTH like 198.18.2.0/24");
                None
            }
            Field::Bad => None,
        };

        let via = self.strings(f, "via", true);
        let action = self.string(f, "action");
        let target: Option<RouteTarget<IpAddr>> = match (via, action) {
            (Field::Ok(..), Field::Ok(_, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("action"),
                    "a route has either `via` or `action`, not both; accepted: via = \"ADDRESS\" \
                     or [\"ADDRESS\", ...], or action = \"drop\"",
                );
                None
            }
            (Field::Missing, Field::Missing) => {
                self.missing(
                    f,
                    "via",
                    "via = \"ADDRESS\" or [\"ADDRESS\", ...] (ECMP), or action = \"drop\"",
                );
                None
            }
            (Field::Missing, Field::Ok("drop", _)) => Some(RouteTarget::Drop),
            (Field::Missing, Field::Ok(s, span)) => {
                self.error(
                    &span,
                    &section,
                    Some("action"),
                    format!("`{s}` is not a route action; accepted: \"drop\""),
                );
                None
            }
            (Field::Ok(items, span), _) => {
                if items.is_empty() {
                    self.error(
                        &span,
                        &section,
                        Some("via"),
                        "empty list; accepted: a next-hop address or a non-empty list of them",
                    );
                    None
                } else {
                    let mut hops = Vec::new();
                    let mut ok = true;
                    for (s, span) in items {
                        let Ok(ip) = s.parse::<IpAddr>() else {
                            self.error(
                                &span,
                                &section,
                                Some("via"),
                                format!(
                                    "`{s}` is not an IP address; accepted: a next-hop \
                                     address like 198.18.2.2"
                                ),
                            );
                            ok = false;
                            continue;
                        };
                        if let Some((net, _)) = prefix {
                            if net.is_ipv6() != ip.is_ipv6() {
                                self.error(
                                    &span,
                                    &section,
                                    Some("via"),
                                    format!(
                                        "next hop {ip} is {} but the route is {}; accepted: a \
                                         [[neighbour]] of the route's family",
                                        family(ip),
                                        family(net)
                                    ),
                                );
                                ok = false;
                                continue;
                            }
                        }
                        let on_link = connected
                            .iter()
                            .any(|(a, l)| *a != ip && contains(*a, *l, ip));
                        if !neighbours.contains_key(&ip) && !on_link {
                            let mut known: Vec<&IpAddr> = neighbours
                                .keys()
                                .filter(|n| n.is_ipv6() == ip.is_ipv6())
                                .collect();
                            known.sort();
                            let list = if known.is_empty() {
                                format!("(no {} [[neighbour]] is defined)", family(ip))
                            } else {
                                short_list(known.iter().map(|a| a.to_string()))
                            };
                            self.error(
                                &span,
                                &section,
                                Some("via"),
                                format!(
                                    "next hop {ip} is neither a [[neighbour]] nor on a port's \
                                     subnet; accepted: an address inside a port's `{}` prefix \
                                     (resolved by {}), or the ip of a [[neighbour]]: {list}",
                                    if ip.is_ipv6() { "ip6" } else { "ip4" },
                                    if ip.is_ipv6() { "ND" } else { "ARP" }
                                ),
                            );
                            ok = false;
                            continue;
                        }
                        if hops.contains(&ip) {
                            self.error(
                                &span,
                                &section,
                                Some("via"),
                                format!(
                                    "next hop {ip} is listed twice; accepted: distinct next hops"
                                ),
                            );
                            ok = false;
                            continue;
                        }
                        hops.push(ip);
                    }
                    ok.then_some(RouteTarget::Via(hops))
                }
            }
            _ => None,
        };
        if self.issues.len() != before {
            return;
        }
        let (Some((net, len)), Some(target)) = (prefix, target) else {
            return;
        };
        match net {
            IpAddr::V4(p) => spec.routes4.push(RouteSpec {
                prefix: p,
                len,
                target: match target {
                    RouteTarget::Drop => RouteTarget::Drop,
                    RouteTarget::Via(h) => RouteTarget::Via(
                        h.into_iter()
                            .filter_map(|a| match a {
                                IpAddr::V4(a) => Some(a),
                                IpAddr::V6(_) => None,
                            })
                            .collect(),
                    ),
                },
            }),
            IpAddr::V6(p) => spec.routes6.push(RouteSpec {
                prefix: p,
                len,
                target: match target {
                    RouteTarget::Drop => RouteTarget::Drop,
                    RouteTarget::Via(h) => RouteTarget::Via(
                        h.into_iter()
                            .filter_map(|a| match a {
                                IpAddr::V6(a) => Some(a),
                                IpAddr::V4(_) => None,
                            })
                            .collect(),
                    ),
                },
            }),
        }
    }

    fn xconnect(
        &mut self,
        f: &Fields<'_>,
        port_names: &[Option<String>],
        seen_from: &mut HashMap<usize, usize>,
    ) -> Option<XconnectSpec> {
        let section = f.section.clone();
        let before = self.issues.len();
        let port_ref = |ctx: &mut Ctx<'_>, key: &str| -> Option<(usize, Range<usize>)> {
            match ctx.string(f, key) {
                Field::Ok(s, span) => {
                    match port_names.iter().position(|n| n.as_deref() == Some(s)) {
                        Some(i) => Some((i, span)),
                        None => {
                            let msg = format!(
                                "no port is named `{s}`; accepted: {}",
                                name_list(port_names)
                            );
                            ctx.error(&span, &section, Some(key), msg);
                            None
                        }
                    }
                }
                Field::Missing => {
                    ctx.missing(f, key, &name_list(port_names));
                    None
                }
                Field::Bad => None,
            }
        };
        let from = port_ref(self, "from");
        let to = port_ref(self, "to");
        if let Some((p, span)) = &from {
            let line = self.line_of(span.start);
            if let Some(first) = seen_from.get(p) {
                let name = port_names[*p].clone().unwrap_or_default();
                let msg = format!(
                    "port `{name}` is already the `from` of the [[xconnect]] at line {first}; \
                     accepted: a port that is `from` in at most one xconnect"
                );
                self.error(span, &section, Some("from"), msg);
            } else {
                seen_from.insert(*p, line);
            }
        }
        let dst_mac = match self.mac(f, "dst-mac", false) {
            Field::Ok(m, _) => Some(Some(m)),
            Field::Missing => Some(None),
            Field::Bad => None,
        };
        if self.issues.len() != before {
            return None;
        }
        Some(XconnectSpec {
            from: from?.0,
            to: to?.0,
            dst_mac: dst_mac?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers (also used by the command language).

fn valid_name(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
}

fn name_list(names: &[Option<String>]) -> String {
    let mut v: Vec<String> = Vec::new();
    for n in names.iter().flatten() {
        let n = format!("`{n}`");
        if !v.contains(&n) {
            v.push(n);
        }
    }
    if v.is_empty() {
        "the name of a [[port]] (none is defined)".to_string()
    } else {
        format!("the name of a [[port]]: {}", v.join(", "))
    }
}

fn short_list(items: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = items.collect();
    if v.len() > 8 {
        format!("{}, ... ({} in all)", v[..8].join(", "), v.len())
    } else {
        v.join(", ")
    }
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        "IPv6"
    } else {
        "IPv4"
    }
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// Parse `ADDRESS/LENGTH`; the error text completes "`X` ...".
/// Largest config file read (a bigger one is refused before it is read).
pub const MAX_CONFIG_BYTES: u64 = 64 * 1024 * 1024;

/// Read a config file: a regular file (a FIFO or a device would block or never end) of at
/// most `MAX_CONFIG_BYTES`.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory is not a config file)",
        ));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} bytes; a config file is at most {MAX_CONFIG_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it grew past {MAX_CONFIG_BYTES} bytes while being read"),
        ));
    }
    Ok(text)
}

/// Why `ip/len` cannot be an address of a port (None: it can).
fn unusable_own_address(ip: IpAddr, len: u8) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => {
            if a.is_unspecified() {
                Some("the unspecified address 0.0.0.0 cannot be a port's address")
            } else if a.is_loopback() {
                Some("a loopback address (127.0.0.0/8) cannot be a port's address")
            } else if a.is_multicast() {
                Some("a multicast address cannot be a port's address")
            } else if a.is_broadcast() {
                Some("the broadcast address 255.255.255.255 cannot be a port's address")
            } else if len <= 30 && {
                let host = u32::from(a) & (u32::MAX >> len);
                host == 0 || host == u32::MAX >> len
            } {
                Some("it is the network or the broadcast address of its own subnet")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            if a.is_unspecified() {
                Some("the unspecified address :: cannot be a port's address")
            } else if a.is_loopback() {
                Some("the loopback address ::1 cannot be a port's address")
            } else if a.is_multicast() {
                Some("a multicast address cannot be a port's address")
            } else if u128::from(a) >> 32 == 0xffff {
                Some("an IPv4-mapped address (::ffff:0:0/96) cannot be a port's address")
            } else {
                None
            }
        }
    }
}

pub(crate) fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let Some((a, l)) = s.split_once('/') else {
        return Err("has no prefix length".to_string());
    };
    let ip: IpAddr = a
        .parse()
        .map_err(|_| format!("does not start with an IP address (`{a}`)"))?;
    let max = if ip.is_ipv6() { 128 } else { 32 };
    match l.parse::<u8>() {
        Ok(len) if len <= max => Ok((ip, len)),
        _ => Err(format!("has an invalid prefix length `{l}` (0..={max})")),
    }
}

/// The network address of `ip/len`.
pub(crate) fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// Whether `ip` lies inside `net/len` (families must match).
pub(crate) fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    net.is_ipv6() == ip.is_ipv6() && mask(net, len) == mask(ip, len)
}

/// The accepted word closest to `key`, if it is close (a typo or `_` for `-`).
pub(crate) fn suggest<'k>(key: &str, accepted: &[&'k str]) -> Option<&'k str> {
    let norm = key.replace('_', "-").to_ascii_lowercase();
    accepted
        .iter()
        .map(|a| (edit_distance(&norm, a), *a))
        .filter(|(d, a)| *d <= 2.min(a.len() / 2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests;

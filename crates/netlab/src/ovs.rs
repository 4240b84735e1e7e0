//! A private Open vSwitch (userspace `netdev` datapath) used as an oracle for vecplane's flow
//! tables: ovsdb-server and ovs-vswitchd run inside a netlab namespace with their run, log, db and
//! sysconf directories in a netlab scratch directory, one bridge with chosen OpenFlow port numbers,
//! rules and groups loaded with `ovs-ofctl`, packets traced with `ofproto/trace`. It owns the
//! namespace (so the bridge's tap devices never show up on the host), both daemons and the
//! directory, and deletes them on drop, on a signal and on an aborting panic; it never touches
//! another Open vSwitch (the system's, or another run's). [`Ovs::start_afxdp`] instead runs it
//! as a data plane inside a topology's namespace R (AF_XDP ports on Ra and Rb, one PMD thread
//! pinned): that namespace stays the topology's, only the daemons and the directory are its own.

use crate::cleanup;
use crate::cmd::{self, run_bounded, Spawned};
use crate::names::{Names, DEFAULT_PREFIX};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tools a private Open vSwitch needs (Debian package `openvswitch-switch`).
pub const OVS_TOOLS: [&str; 6] = [
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovs-ofctl",
    "ovs-appctl",
];

/// Where Debian keeps the database schema.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// The bridge's name (inside the private namespace, so it cannot collide).
pub const BRIDGE: &str = "br0";

/// The OpenFlow number of the bridge's own (LOCAL) port.
pub const OFPP_LOCAL: u16 = 65534;

/// How long the daemons may take to come up, and a command to finish.
const START_TIMEOUT: Duration = Duration::from_secs(15);
const CMD_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the datapath to show every port the bridge was given.
const PORTS_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a private Open vSwitch cannot run here (not root, a tool or the schema missing), if so.
pub fn missing_prerequisite() -> Option<String> {
    let mut tools = vec!["ip"];
    tools.extend(OVS_TOOLS);
    if let Some(why) = cmd::missing_prerequisite(&tools) {
        return Some(format!(
            "{why} (Open vSwitch: apt-get install openvswitch-switch)"
        ));
    }
    if !Path::new(SCHEMA).exists() {
        return Some(format!(
            "{SCHEMA} is missing (apt-get install openvswitch-switch)"
        ));
    }
    None
}

/// Refuse OpenFlow port numbers out of 1..=65279 or given twice.
fn check_ofports(ofports: &[u16]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for &p in ofports {
        if p == 0 || p > 0xfeff || !seen.insert(p) {
            bail!("OpenFlow port {p}: accepted: distinct numbers 1..=65279");
        }
    }
    Ok(())
}

/// What `ofproto/trace` says about one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The "Datapath actions:" line's text, in datapath port numbers (as OVS prints it).
    pub datapath_actions: String,
    /// The "Megaflow:" line's text.
    pub megaflow: String,
    /// The whole trace output, for messages.
    pub text: String,
}

/// Parse `ofproto/trace` output: the first "Megaflow:" and "Datapath actions:" lines.
pub fn parse_trace(text: &str) -> Result<Trace> {
    let find = |tag: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(tag))
            .map(|s| s.trim().to_string())
    };
    let (Some(megaflow), Some(datapath_actions)) = (find("Megaflow:"), find("Datapath actions:"))
    else {
        bail!("ofproto/trace output has no \"Megaflow:\" and \"Datapath actions:\" lines:\n{text}");
    };
    Ok(Trace {
        datapath_actions,
        megaflow,
        text: text.to_string(),
    })
}

/// Parse `ovs-appctl dpif/show`: datapath port number -> OpenFlow port number, for `bridge`.
/// Lines look like `    p1 1/3: (tap)` (name, OpenFlow port, datapath port).
pub fn parse_dpif_show(text: &str, bridge: &str) -> Result<BTreeMap<u32, u16>> {
    let mut map = BTreeMap::new();
    let mut in_bridge = false;
    let header = format!("{bridge}:");
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent == 2 {
            in_bridge = t == header;
            continue;
        }
        if !in_bridge || indent < 4 {
            continue;
        }
        let mut words = t.split_whitespace();
        let (Some(_name), Some(ports)) = (words.next(), words.next()) else {
            continue;
        };
        let ports = ports.trim_end_matches(':');
        let parsed = ports
            .split_once('/')
            .and_then(|(of, dp)| Some((of.parse::<u16>().ok()?, dp.parse::<u32>().ok()?)));
        let Some((of, dp)) = parsed else {
            bail!("dpif/show line `{t}`: expected `NAME OFPORT/DPPORT: (TYPE)`");
        };
        map.insert(dp, of);
    }
    if map.is_empty() {
        bail!("dpif/show lists no port of bridge {bridge}:\n{text}");
    }
    Ok(map)
}

/// Split `s` at commas that are outside parentheses.
pub fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// Rewrite the datapath port numbers of "Datapath actions:" text into OpenFlow port numbers
/// (`LOCAL` for the bridge's own port; `dp?N` for a number `map` does not know), so that they
/// can be compared with vecplane's actions, which name OpenFlow ports. Only top-level outputs
/// (bare numbers) are rewritten; `drop` and the other actions are kept as they are.
pub fn datapath_to_openflow(actions: &str, map: &BTreeMap<u32, u16>) -> String {
    split_top_level(actions)
        .into_iter()
        .map(|a| match a.parse::<u32>() {
            Ok(dp) => match map.get(&dp) {
                Some(&OFPP_LOCAL) => "LOCAL".to_string(),
                Some(of) => of.to_string(),
                None => format!("dp?{dp}"),
            },
            Err(_) => a.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A persistent JSON-RPC session with a daemon's unixctl socket (what `ovs-appctl` speaks), so
/// that a trace costs no process start.
struct Unixctl {
    stream: BufReader<UnixStream>,
    next_id: u64,
}

impl Unixctl {
    fn connect(path: &Path) -> Result<Unixctl> {
        let s = UnixStream::connect(path)
            .with_context(|| format!("cannot connect to {}", path.display()))?;
        s.set_read_timeout(Some(CMD_TIMEOUT))?;
        s.set_write_timeout(Some(CMD_TIMEOUT))?;
        Ok(Unixctl {
            stream: BufReader::new(s),
            next_id: 0,
        })
    }

    fn call(&mut self, method: &str, params: &[&str]) -> Result<String> {
        let id = self.next_id;
        self.next_id += 1;
        let req = serde_json::json!({"id": id, "method": method, "params": params});
        let mut bytes = serde_json::to_vec(&req)?;
        bytes.push(b'\n');
        self.stream.get_mut().write_all(&bytes)?;
        let reply = serde_json::Deserializer::from_reader(&mut self.stream)
            .into_iter::<serde_json::Value>()
            .next()
            .ok_or_else(|| anyhow!("ovs-vswitchd closed its control socket during {method}"))?
            .with_context(|| format!("reading the reply to {method}"))?;
        if reply.get("id").and_then(|v| v.as_u64()) != Some(id) {
            bail!("unixctl reply to {method} has the wrong id: {reply}");
        }
        if let Some(e) = reply.get("error").filter(|e| !e.is_null()) {
            bail!("{method} failed: {}", e.as_str().unwrap_or_default().trim());
        }
        match reply.get("result").and_then(|v| v.as_str()) {
            Some(s) => Ok(s.to_string()),
            None => bail!("unixctl reply to {method} has no result: {reply}"),
        }
    }
}

/// A port of the private bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PortSpec {
    /// An internal port `p<N>` with OpenFlow number N.
    Internal(u16),
    /// An existing interface of the namespace as an `afxdp` port (native XDP mode).
    Afxdp {
        /// The interface.
        ifname: String,
        /// Its OpenFlow number.
        ofport: u16,
    },
    /// A `dummy` port `p<N>` (OpenFlow number N) writing what it sends to `tx_pcap`; packets
    /// enter it by `netdev-dummy/receive` (ovs-vswitchd runs with `--enable-dummy`).
    Dummy {
        /// Its OpenFlow number.
        ofport: u16,
        /// The pcap file of what the port transmits.
        tx_pcap: PathBuf,
    },
    /// A `dpdkvhostuserclient` port `vu<N>`: Open vSwitch with DPDK connects to a vhost-user
    /// socket a frontend (QEMU, virtio-user) serves.
    VhostUserClient {
        /// The frontend's socket.
        socket: PathBuf,
        /// Its OpenFlow number.
        ofport: u16,
    },
}

impl PortSpec {
    fn ofport(&self) -> u16 {
        match self {
            PortSpec::Internal(p) => *p,
            PortSpec::Afxdp { ofport, .. }
            | PortSpec::VhostUserClient { ofport, .. }
            | PortSpec::Dummy { ofport, .. } => *ofport,
        }
    }
}

/// Where the datapath's threads run when Open vSwitch is a data plane.
#[derive(Clone, Copy, Debug)]
struct Threads {
    pmd_cpu: usize,
    main_cpu: Option<usize>,
}

/// Where [`Ovs::start_dpdk_vhost`] runs Open vSwitch with DPDK.
#[derive(Clone, Debug)]
pub struct DpdkVhostSwitch<'a> {
    /// (frontend socket, OpenFlow port number) of each `dpdkvhostuserclient` port.
    pub ports: &'a [(&'a Path, u16)],
    /// CPU of the one PMD thread.
    pub pmd_cpu: usize,
    /// CPU of DPDK's main lcore and the daemons' other threads.
    pub main_cpu: usize,
}

/// Debian's Open vSwitch built with DPDK (package `openvswitch-switch-dpdk`).
pub const OVS_VSWITCHD_DPDK: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";

/// Where [`Ovs::start_afxdp`] runs Open vSwitch as a data plane.
#[derive(Clone, Debug)]
pub struct AfxdpSwitch<'a> {
    /// An existing namespace (a topology's R) holding the interfaces; it is not deleted.
    pub namespace: &'a str,
    /// (interface, OpenFlow port number) of each `afxdp` port.
    pub ports: &'a [(&'a str, u16)],
    /// CPU of the one PMD thread (`other_config:pmd-cpu-mask`).
    pub pmd_cpu: usize,
    /// CPUs of the daemons' other threads (None: not pinned).
    pub main_cpu: Option<usize>,
    /// `options:xdp-mode` of the ports (`native`, `generic`, `best-effort`).
    pub xdp_mode: &'a str,
}

/// A private Open vSwitch with one bridge (`br0`, `datapath_type=netdev`, `fail_mode=secure`:
/// a table miss drops) whose ports are internal ports `p<N>` with OpenFlow numbers N (or, from
/// [`Ovs::start_afxdp`], `afxdp` ports on existing interfaces).
pub struct Ovs {
    names: Names,
    /// The namespace the daemons run in, and whether it is this value's to delete.
    namespace: String,
    owns_namespace: bool,
    vswitchd: Option<Spawned>,
    ovsdb: Option<Spawned>,
    ctl: Mutex<Option<Unixctl>>,
    dp_ports: BTreeMap<u32, u16>,
    files: std::sync::atomic::AtomicU32,
    deleted: bool,
}

impl std::fmt::Debug for Ovs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ovs")
            .field("namespace", &self.namespace)
            .field("dir", &self.names.dir)
            .field("dp_ports", &self.dp_ports)
            .finish()
    }
}

impl Ovs {
    /// Start a private Open vSwitch whose bridge has ports with OpenFlow numbers `ofports`
    /// (1..=65279, distinct).
    pub fn start(ofports: &[u16]) -> Result<Ovs> {
        if let Some(why) = missing_prerequisite() {
            bail!("cannot start Open vSwitch: {why}");
        }
        check_ofports(ofports)?;
        cleanup::install_cleanup_handlers()?;
        cleanup::delete_leftovers(DEFAULT_PREFIX);
        let names = Names::next(DEFAULT_PREFIX)?;
        // From here on, Drop deletes whatever was made, also when a step fails.
        let namespace = names.ns_r.clone();
        let mut ovs = Ovs::unstarted(names, namespace, true);
        let ports: Vec<PortSpec> = ofports.iter().map(|&p| PortSpec::Internal(p)).collect();
        ovs.setup(&ports, None, None)
            .with_context(|| format!("cannot start Open vSwitch in {}", ovs.dir().display()))?;
        Ok(ovs)
    }

    /// Start a private Open vSwitch whose bridge has `dummy` ports `p<N>` with OpenFlow numbers
    /// `ofports` (1..=65279, distinct): packets enter a port with [`Ovs::receive`] and what a
    /// port sends is written to [`Ovs::tx_pcap`] (flushed after every packet). The bridge is
    /// the userspace (`netdev`) datapath that [`Ovs::start`]'s is, with no rule yet.
    pub fn start_dummy(ofports: &[u16]) -> Result<Ovs> {
        if let Some(why) = missing_prerequisite() {
            bail!("cannot start Open vSwitch: {why}");
        }
        check_ofports(ofports)?;
        cleanup::install_cleanup_handlers()?;
        cleanup::delete_leftovers(DEFAULT_PREFIX);
        let names = Names::next(DEFAULT_PREFIX)?;
        let namespace = names.ns_r.clone();
        let mut ovs = Ovs::unstarted(names, namespace, true);
        let ports: Vec<PortSpec> = ofports
            .iter()
            .map(|&p| PortSpec::Dummy {
                ofport: p,
                tx_pcap: ovs.tx_pcap(p),
            })
            .collect();
        ovs.setup(&ports, None, None)
            .with_context(|| format!("cannot start Open vSwitch in {}", ovs.dir().display()))?;
        Ok(ovs)
    }

    /// The file a dummy port of [`Ovs::start_dummy`] writes what it sends to.
    pub fn tx_pcap(&self, ofport: u16) -> PathBuf {
        self.path(&format!("p{ofport}.tx.pcap"))
    }

    /// Hand Ethernet frames to dummy port `p<ofport>` as if they arrived on it
    /// (`netdev-dummy/receive`); they are switched after this returns, in order.
    pub fn receive(&self, ofport: u16, frames: &[Vec<u8>]) -> Result<()> {
        let name = format!("p{ofport}");
        for chunk in frames.chunks(64) {
            let hex: Vec<String> = chunk
                .iter()
                .map(|f| f.iter().map(|b| format!("{b:02x}")).collect())
                .collect();
            let mut args = vec!["netdev-dummy/receive", name.as_str()];
            args.extend(hex.iter().map(String::as_str));
            self.appctl(&args)
                .with_context(|| format!("netdev-dummy/receive on {name}"))?;
        }
        Ok(())
    }

    /// Start a private Open vSwitch as a data plane in `spec.namespace` (which must exist and
    /// stays): bridge `br0` (netdev datapath, `fail_mode=secure`, no rules yet) with an `afxdp`
    /// port per interface, one PMD thread on `spec.pmd_cpu`. Its directory's names start with
    /// `prefix` (1..=4 of `[a-z0-9]`). Stopping it (or dropping it) ends both daemons, which
    /// detach their XDP programs, and deletes the directory.
    pub fn start_afxdp(prefix: &str, spec: &AfxdpSwitch<'_>) -> Result<Ovs> {
        if let Some(why) = missing_prerequisite() {
            bail!("cannot start Open vSwitch: {why}");
        }
        if !matches!(spec.xdp_mode, "native" | "generic" | "best-effort") {
            bail!(
                "xdp-mode `{}`: accepted: native, generic, best-effort",
                spec.xdp_mode
            );
        }
        if spec.pmd_cpu >= 64 {
            bail!("PMD CPU {}: accepted: 0..=63", spec.pmd_cpu);
        }
        let mut seen = std::collections::BTreeSet::new();
        for &(_, p) in spec.ports {
            if p == 0 || p > 0xfeff || !seen.insert(p) {
                bail!("OpenFlow port {p}: accepted: distinct numbers 1..=65279");
            }
        }
        if !cleanup::namespace_exists(spec.namespace) {
            bail!("namespace {} does not exist", spec.namespace);
        }
        cleanup::install_cleanup_handlers()?;
        let names = Names::next(prefix)?;
        let namespace = spec.namespace.to_string();
        let mut ovs = Ovs::unstarted(names, namespace, false);
        let ports: Vec<PortSpec> = spec
            .ports
            .iter()
            .map(|&(ifname, ofport)| PortSpec::Afxdp {
                ifname: ifname.to_string(),
                ofport,
            })
            .collect();
        let threads = Threads {
            pmd_cpu: spec.pmd_cpu,
            main_cpu: spec.main_cpu,
        };
        ovs.setup(&ports, Some(threads), Some(spec.xdp_mode))
            .with_context(|| {
                format!(
                    "cannot start Open vSwitch with afxdp ports in {} ({})",
                    spec.namespace,
                    ovs.dir().display()
                )
            })?;
        Ok(ovs)
    }

    /// Start a private Open vSwitch with DPDK (`ovs-vswitchd-dpdk`, no huge pages needed) as
    /// a data plane: bridge `br0` (netdev datapath, `fail_mode=secure`, no rules yet) with a
    /// `dpdkvhostuserclient` port per socket (the frontends must serve them), one PMD thread
    /// on `spec.pmd_cpu`, DPDK's main lcore on `spec.main_cpu`. Its directory's names start
    /// with `prefix`; the daemons run in a namespace of their own (vhost-user sockets are
    /// files, reachable from any namespace).
    pub fn start_dpdk_vhost(prefix: &str, spec: &DpdkVhostSwitch<'_>) -> Result<Ovs> {
        if let Some(why) = missing_prerequisite() {
            bail!("cannot start Open vSwitch: {why}");
        }
        if !Path::new(OVS_VSWITCHD_DPDK).is_file() {
            bail!("{OVS_VSWITCHD_DPDK} is not installed (apt-get install openvswitch-switch-dpdk)");
        }
        if spec.pmd_cpu >= 64 || spec.main_cpu >= 64 {
            bail!(
                "CPUs {} and {}: accepted: 0..=63",
                spec.pmd_cpu,
                spec.main_cpu
            );
        }
        cleanup::install_cleanup_handlers()?;
        let names = Names::next(prefix)?;
        let namespace = names.ns_r.clone();
        let mut ovs = Ovs::unstarted(names, namespace, true);
        let ports: Vec<PortSpec> = spec
            .ports
            .iter()
            .map(|&(socket, ofport)| PortSpec::VhostUserClient {
                socket: socket.to_path_buf(),
                ofport,
            })
            .collect();
        let threads = Threads {
            pmd_cpu: spec.pmd_cpu,
            main_cpu: Some(spec.main_cpu),
        };
        ovs.setup(&ports, Some(threads), None).with_context(|| {
            format!(
                "cannot start Open vSwitch with DPDK in {}",
                ovs.dir().display()
            )
        })?;
        Ok(ovs)
    }

    /// An Open vSwitch not started yet, in `namespace` (deleted with it when `owns`): Drop
    /// deletes whatever `setup` makes from here on, also when a step fails.
    fn unstarted(names: Names, namespace: String, owns: bool) -> Ovs {
        Ovs {
            namespace,
            owns_namespace: owns,
            names,
            vswitchd: None,
            ovsdb: None,
            ctl: Mutex::new(None),
            dp_ports: BTreeMap::new(),
            files: std::sync::atomic::AtomicU32::new(0),
            deleted: false,
        }
    }

    /// The scratch directory (run, log, db and sysconf directory of this Open vSwitch).
    pub fn dir(&self) -> &Path {
        &self.names.dir
    }

    /// The network namespace the daemons (and the bridge's tap devices) live in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Process ids of ovsdb-server and ovs-vswitchd.
    pub fn pids(&self) -> Vec<u32> {
        [&self.ovsdb, &self.vswitchd]
            .iter()
            .filter_map(|s| s.as_ref().map(Spawned::id))
            .collect()
    }

    /// Datapath port number -> OpenFlow port number (from `dpif/show`; 65534 is LOCAL).
    pub fn dp_ports(&self) -> &BTreeMap<u32, u16> {
        &self.dp_ports
    }

    fn path(&self, file: &str) -> PathBuf {
        self.names.dir.join(file)
    }

    fn env_args(&self) -> Vec<String> {
        let d = self.dir().display().to_string();
        let mut v = vec!["env".to_string()];
        for var in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            v.push(format!("{var}={d}"));
        }
        v
    }

    /// Run an Open vSwitch tool with the private environment; it must exit 0.
    fn tool(&self, args: &[&str]) -> Result<String> {
        let mut full = self.env_args();
        full.extend(args.iter().map(|s| s.to_string()));
        let out = run_bounded(&full, CMD_TIMEOUT)?;
        if !out.status.success() {
            bail!(
                "`{}` failed ({}): {}",
                args.join(" "),
                cmd::describe_status(out.status),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn spawn_daemon(&self, args: &[String], log: &str, cpu: Option<usize>) -> Result<Spawned> {
        let mut inner = self.env_args();
        if let Some(c) = cpu {
            inner = [
                vec!["taskset".to_string(), "-c".into(), c.to_string()],
                inner,
            ]
            .concat();
        }
        let mut full = cmd::in_ns(self.namespace(), &inner);
        full.extend(args.iter().cloned());
        Spawned::start(&full, Some(&self.path(log)))
    }

    fn wait_for(&self, what: &str, daemon: &mut Spawned, file: &Path) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        while !file.exists() {
            if let Some(s) = daemon.try_wait()? {
                bail!(
                    "{what} exited ({}) before creating {}: {}",
                    cmd::describe_status(s),
                    file.display(),
                    daemon.log().trim()
                );
            }
            if Instant::now() >= deadline {
                bail!("{what} did not create {} within 15 s", file.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn setup(
        &mut self,
        ports: &[PortSpec],
        threads: Option<Threads>,
        xdp_mode: Option<&str>,
    ) -> Result<()> {
        cleanup::create_dir(&self.names.dir)?;
        if self.owns_namespace {
            cleanup::create_namespace(&self.names.ns_r)?;
        }
        let main_cpu = threads.and_then(|t| t.main_cpu);
        let dpdk = ports
            .iter()
            .any(|p| matches!(p, PortSpec::VhostUserClient { .. }));
        let dir = self.names.dir.clone();
        let d = |f: &str| dir.join(f).display().to_string();
        let (db, db_sock, ctl) = (d("conf.db"), d("db.sock"), d("ovs-vswitchd.ctl"));
        self.tool(&["ovsdb-tool", "create", &db, SCHEMA])?;
        let mut ovsdb = self.spawn_daemon(
            &[
                "ovsdb-server".into(),
                db.clone(),
                format!("--remote=punix:{db_sock}"),
                format!("--unixctl={}", d("ovsdb-server.ctl")),
                format!("--log-file={}", d("ovsdb-server.log")),
            ],
            "ovsdb-server.out",
            main_cpu,
        )?;
        let r = self.wait_for("ovsdb-server", &mut ovsdb, &self.path("db.sock"));
        self.ovsdb = Some(ovsdb);
        r?;
        let db_arg = format!("--db=unix:{db_sock}");
        self.tool(&["ovs-vsctl", &db_arg, "--no-wait", "init"])?;
        if let Some(t) = threads {
            let mask = format!("other_config:pmd-cpu-mask={:#x}", 1u64 << t.pmd_cpu);
            let mut args = vec![
                "ovs-vsctl",
                &db_arg,
                "--no-wait",
                "set",
                "Open_vSwitch",
                ".",
                &mask,
            ];
            // DPDK without huge pages or PCI devices, its runtime files under a prefix of
            // ours, its main lcore beside the daemons. 2 GiB: a port's mempool for MTU 1500
            // takes about 600 MB, and a port reconfigured when its vhost-user device connects
            // gets a new one before the old is freed; with 1 GiB that failed ("Failed to
            // create memory pool for netdev vu1 ... No buffer space available") whenever
            // both devices connected close together, and the port was never polled.
            let lcore = format!(
                "other_config:dpdk-lcore-mask={:#x}",
                1u64 << t.main_cpu.unwrap_or(0)
            );
            let extra = format!(
                "other_config:dpdk-extra=--no-huge -m 2048 --no-pci --no-telemetry \
                 --legacy-mem --file-prefix={}",
                self.names.ns_r
            );
            if dpdk {
                args.extend(["other_config:dpdk-init=true", &lcore, &extra]);
            }
            self.tool(&args)?;
        }
        let vswitchd_bin = if dpdk {
            OVS_VSWITCHD_DPDK
        } else {
            "ovs-vswitchd"
        };
        let mut vswitchd_args = vec![
            vswitchd_bin.into(),
            format!("unix:{db_sock}"),
            format!("--unixctl={ctl}"),
            format!("--log-file={}", d("ovs-vswitchd.log")),
        ];
        if ports.iter().any(|p| matches!(p, PortSpec::Dummy { .. })) {
            vswitchd_args.push("--enable-dummy".into());
        }
        let mut vswitchd = self.spawn_daemon(&vswitchd_args, "ovs-vswitchd.out", main_cpu)?;
        let r = self.wait_for(
            "ovs-vswitchd",
            &mut vswitchd,
            &self.path("ovs-vswitchd.ctl"),
        );
        self.vswitchd = Some(vswitchd);
        r?;
        let mut args: Vec<String> = [
            "ovs-vsctl",
            &db_arg,
            "--timeout=15",
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "fail_mode=secure",
            "protocols=OpenFlow10,OpenFlow13,OpenFlow15",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for port in ports {
            let (name, kind) = match port {
                PortSpec::Internal(p) => (format!("p{p}"), vec!["type=internal".to_string()]),
                PortSpec::Afxdp { ifname, .. } => (
                    ifname.clone(),
                    vec![
                        "type=afxdp".to_string(),
                        format!("options:xdp-mode={}", xdp_mode.unwrap_or("native")),
                        "options:n_rxq=1".to_string(),
                    ],
                ),
                PortSpec::Dummy { ofport, tx_pcap } => (
                    format!("p{ofport}"),
                    vec![
                        "type=dummy".to_string(),
                        format!("options:tx_pcap={}", tx_pcap.display()),
                    ],
                ),
                PortSpec::VhostUserClient { socket, ofport } => (
                    format!("vu{ofport}"),
                    vec![
                        "type=dpdkvhostuserclient".to_string(),
                        format!("options:vhost-server-path={}", socket.display()),
                    ],
                ),
            };
            args.extend([
                "--".to_string(),
                "add-port".into(),
                BRIDGE.into(),
                name.clone(),
                "--".into(),
                "set".into(),
                "interface".into(),
                name,
            ]);
            args.extend(kind);
            args.push(format!("ofport_request={}", port.ofport()));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.tool(&refs)?;
        *self.ctl.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Unixctl::connect(Path::new(&ctl))?);
        // ovs-vsctl returns once the database has the ports; the datapath may add the last of
        // them a moment later (seen with two vhost-user ports on a loaded machine).
        let until = Instant::now() + PORTS_TIMEOUT;
        loop {
            let show = self.appctl(&["dpif/show"])?;
            self.dp_ports = parse_dpif_show(&show, BRIDGE)?;
            let missing = ports
                .iter()
                .map(PortSpec::ofport)
                .find(|p| !self.dp_ports.values().any(|v| v == p));
            match missing {
                None => return Ok(()),
                Some(p) if Instant::now() >= until => bail!(
                    "a port did not get OpenFlow number {p} within {PORTS_TIMEOUT:?}:\n{show}"
                ),
                Some(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Run a unixctl command of ovs-vswitchd (as `ovs-appctl` would) over the kept session.
    pub fn appctl(&self, args: &[&str]) -> Result<String> {
        let Some((method, params)) = args.split_first() else {
            bail!("appctl: empty command");
        };
        let mut guard = self.ctl.lock().unwrap_or_else(|e| e.into_inner());
        let Some(ctl) = guard.as_mut() else {
            bail!("appctl: ovs-vswitchd's control socket is not connected");
        };
        ctl.call(method, params)
    }

    /// Run `ovs-appctl` itself (one process per call; slower than [`Ovs::appctl`]).
    pub fn appctl_process(&self, args: &[&str]) -> Result<String> {
        let t = self.path("ovs-vswitchd.ctl").display().to_string();
        let mut full = vec!["ovs-appctl", "-t", &t];
        full.extend(args);
        self.tool(&full)
    }

    fn mgmt(&self) -> String {
        format!("unix:{}", self.path(&format!("{BRIDGE}.mgmt")).display())
    }

    /// Write `text` to a fresh file in the scratch directory (for `ovs-ofctl add-flows FILE`).
    fn text_file(&self, kind: &str, text: &str) -> Result<String> {
        let n = self
            .files
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = self.path(&format!("{kind}-{n}.txt"));
        std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))?;
        Ok(p.display().to_string())
    }

    /// `ovs-ofctl -O VERSION [OPTIONS] COMMAND MGMT-SOCKET [ARGS]`; options are the leading
    /// `--...` words of `args`.
    fn ofctl(&self, version: &str, args: &[&str]) -> Result<String> {
        let mgmt = self.mgmt();
        let n_opts = args.iter().take_while(|a| a.starts_with("--")).count();
        let (opts, rest) = args.split_at(n_opts);
        let (cmd, rest) = rest
            .split_first()
            .ok_or_else(|| anyhow!("empty ovs-ofctl"))?;
        let mut full = vec!["ovs-ofctl", "-O", version];
        full.extend(opts);
        full.push(cmd);
        full.push(&mgmt);
        full.extend(rest);
        self.tool(&full)
    }

    /// `ovs-ofctl -O OpenFlow13 add-flows` of `text` (one flow per line, `#` comments).
    pub fn add_flows(&self, text: &str) -> Result<()> {
        let f = self.text_file("flows", text)?;
        self.ofctl("OpenFlow13", &["add-flows", &f])?;
        Ok(())
    }

    /// `ovs-ofctl -O OpenFlow15 add-groups` of `text` (one group per line; OpenFlow 1.5 so that
    /// `selection_method=hash,fields(...)` is kept).
    pub fn add_groups(&self, text: &str) -> Result<()> {
        let f = self.text_file("groups", text)?;
        self.ofctl("OpenFlow15", &["add-groups", &f])?;
        Ok(())
    }

    /// `ovs-ofctl -O OpenFlow15 mod-group` of one group.
    pub fn mod_group(&self, text: &str) -> Result<()> {
        self.ofctl("OpenFlow15", &["mod-group", text])?;
        Ok(())
    }

    /// `ovs-ofctl -O VERSION [--strict] mod-flows` of one `MATCH,actions=...` (`version`:
    /// `OpenFlow10` or `OpenFlow13`; a modify that selects nothing adds the rule over 1.0
    /// only).
    pub fn mod_flows(&self, version: &str, text: &str, strict: bool) -> Result<()> {
        let mut args = Vec::new();
        if strict {
            args.push("--strict");
        }
        args.extend(["mod-flows", text]);
        self.ofctl(version, &args)?;
        Ok(())
    }

    /// `ovs-ofctl -O OpenFlow13 [--strict] del-flows MATCH` (`table=`, `cookie=V/M`,
    /// `out_port=` accepted).
    pub fn del_flows_matching(&self, text: &str, strict: bool) -> Result<()> {
        let mut args = Vec::new();
        if strict {
            args.push("--strict");
        }
        args.extend(["del-flows", text]);
        self.ofctl("OpenFlow13", &args)?;
        Ok(())
    }

    /// Delete every rule and every group.
    pub fn del_flows(&self) -> Result<()> {
        self.ofctl("OpenFlow13", &["del-flows"])?;
        self.ofctl("OpenFlow15", &["del-groups"])?;
        Ok(())
    }

    /// `ovs-ofctl --no-stats dump-flows`, one rule per line (no reply header).
    pub fn dump_flows(&self) -> Result<Vec<String>> {
        let out = self.ofctl("OpenFlow13", &["--no-stats", "dump-flows"])?;
        Ok(reply_lines(&out))
    }

    /// `ovs-ofctl dump-flows` with its counters (`cookie=0x0, duration=1.2s, table=0,
    /// n_packets=0, n_bytes=0, priority=...`), one rule per line: what an operator would paste.
    pub fn dump_flows_with_stats(&self) -> Result<Vec<String>> {
        let out = self.ofctl("OpenFlow13", &["dump-flows"])?;
        Ok(reply_lines(&out))
    }

    /// `ovs-ofctl -O OpenFlow15 dump-groups`, one group per line (no reply header).
    pub fn dump_groups(&self) -> Result<Vec<String>> {
        Ok(reply_lines(&self.ofctl("OpenFlow15", &["dump-groups"])?))
    }

    /// Trace a packet given in OVS flow syntax (`in_port=1,tcp,nw_dst=198.18.2.7,tcp_dst=80`;
    /// note that OVS wants `udp_src`/`tcp_dst`-style names for transport ports of a trace).
    pub fn trace(&self, flow: &str) -> Result<Trace> {
        let text = self
            .appctl(&["ofproto/trace", BRIDGE, flow])
            .with_context(|| format!("trace of `{flow}`"))?;
        parse_trace(&text)
    }

    /// [`datapath_to_openflow`] with this switch's port map.
    pub fn openflow_actions(&self, datapath_actions: &str) -> String {
        datapath_to_openflow(datapath_actions, &self.dp_ports)
    }

    /// Stop the daemons and delete the namespace and the directory now, reporting what could
    /// not be deleted.
    pub fn stop(mut self) -> Result<()> {
        self.delete_inner()
    }

    fn delete_inner(&mut self) -> Result<()> {
        if self.deleted {
            return Ok(());
        }
        self.deleted = true;
        *self.ctl.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let mut failed = Vec::new();
        for (what, d) in [
            ("ovs-vswitchd", &mut self.vswitchd),
            ("ovsdb-server", &mut self.ovsdb),
        ] {
            if let Some(mut s) = d.take() {
                if let Err(e) = s.stop(cmd::STOP_GRACE) {
                    failed.push(format!("{what}: {e:#}"));
                }
            }
        }
        // Deleting the namespace also ends anything still inside and frees the tap devices.
        let own_ns = [self.names.ns_r.as_str()];
        let namespaces: &[&str] = if self.owns_namespace { &own_ns } else { &[] };
        // DPDK's runtime files of its `--file-prefix` (the namespace's name), if it ran.
        let dpdk_dir = Path::new("/var/run/dpdk").join(&self.names.ns_r);
        let mut dirs = vec![self.names.dir.as_path()];
        if dpdk_dir.exists() {
            dirs.push(dpdk_dir.as_path());
        }
        failed.extend(cleanup::release(namespaces, &dirs));
        if failed.is_empty() {
            Ok(())
        } else {
            bail!("could not delete Open vSwitch: {}", failed.join("; "))
        }
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        if let Err(e) = self.delete_inner() {
            eprintln!("netlab: {e:#}");
        }
    }
}

/// The lines of an `ovs-ofctl` reply without its `OFPST_...` header, trimmed.
fn reply_lines(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("OFPST_") && !l.starts_with("NXST_"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_output_is_parsed() {
        let text = "Flow: tcp,in_port=1,nw_src=198.18.1.2\n\nbridge(\"br0\")\n-------------\n \
                    0. tcp, priority 100\n    output:2\n\nFinal flow: unchanged\n\
                    Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_frag=no\nDatapath actions: 1\n";
        let t = parse_trace(text).expect("parsed");
        assert_eq!(t.megaflow, "recirc_id=0,eth,tcp,in_port=1,nw_frag=no");
        assert_eq!(t.datapath_actions, "1");
        assert!(parse_trace("Flow: x\n").is_err());
    }

    #[test]
    fn dpif_show_maps_datapath_ports_to_openflow_ports() {
        let text = "netdev@ovs-netdev: hit:0 missed:0\n  br0:\n    br0 65534/4: (tap)\n    \
                    p1 1/3: (tap)\n    p2 2/1: (tap)\n    p7 7/2: (tap)\n  br1:\n    br1 65534/9: (tap)\n";
        let m = parse_dpif_show(text, "br0").expect("parsed");
        assert_eq!(m.len(), 4);
        assert_eq!(m[&3], 1);
        assert_eq!(m[&2], 7);
        assert_eq!(m[&4], OFPP_LOCAL);
        assert!(!m.contains_key(&9));
        assert!(parse_dpif_show("  br0:\n    p1 x/y: (tap)\n", "br0").is_err());
        assert!(parse_dpif_show(text, "br9").is_err());
    }

    #[test]
    fn datapath_actions_are_rewritten_in_openflow_ports() {
        let m: BTreeMap<u32, u16> = [(1, 2), (2, 7), (3, 1), (4, OFPP_LOCAL)].into();
        assert_eq!(
            datapath_to_openflow(
                "set(eth(src=02:00:00:00:00:09)),set(ipv4(ttl=63)),3,push_vlan(vid=5,pcp=0),2",
                &m
            ),
            "set(eth(src=02:00:00:00:00:09)),set(ipv4(ttl=63)),1,push_vlan(vid=5,pcp=0),7"
        );
        assert_eq!(datapath_to_openflow("drop", &m), "drop");
        assert_eq!(datapath_to_openflow("4,9", &m), "LOCAL,dp?9");
        assert_eq!(split_top_level(""), Vec::<&str>::new());
    }

    #[test]
    fn reply_headers_are_dropped() {
        let out = "OFPST_FLOW reply (OF1.3) (xid=0x2):\n priority=1 actions=drop\n\n";
        assert_eq!(reply_lines(out), ["priority=1 actions=drop"]);
    }
}

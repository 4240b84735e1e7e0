//! vecplane in R: the TOML config for a topology (router, bridge or cross-connect over Ra/Rb,
//! driver af-xdp or af-packet, static neighbours for A and B), its validation by the same parser
//! `vecplane run` uses, and the `vecplane run` daemon inside R (or, for vhost-user ports, in this
//! process's namespace) with its control socket. It owns the daemon's lifetime (stopped on drop);
//! it never edits the config format and never talks to a daemon it did not start.

use crate::cmd::{describe_status, Spawned};
use crate::names::Names;
use crate::topology::{addr, Addressing, Host, Topology};
use anyhow::{bail, Context, Result};
use control::{ConfigError, Reply};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a clean stop may take before the daemon is killed (and the stop fails): unhooking
/// XDP programs and closing AF_XDP sockets takes seconds on a loaded machine (3 s was short
/// under `stress-ng --cpu 2` beside two test lanes).
const CLEAN_STOP_GRACE: Duration = Duration::from_secs(20);

/// vecplane's port driver on Ra and Rb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `driver = "af-xdp"`.
    AfXdp {
        /// `queues = N` (absent: the driver's default).
        queues: Option<u32>,
        /// `xdp-mode = "..."` (absent: the driver's default).
        xdp_mode: Option<XdpMode>,
    },
    /// `driver = "af-packet"`.
    AfPacket,
}

impl Driver {
    /// AF_XDP with the driver's defaults.
    pub const AF_XDP: Driver = Driver::AfXdp {
        queues: None,
        xdp_mode: None,
    };

    /// The config's name of the driver.
    pub fn name(self) -> &'static str {
        match self {
            Driver::AfXdp { .. } => "af-xdp",
            Driver::AfPacket => "af-packet",
        }
    }
}

/// `xdp-mode` of an AF_XDP port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// Native if the interface supports it, else generic.
    Auto,
    /// Driver (native) XDP.
    Native,
    /// Generic (skb) XDP.
    Generic,
}

impl XdpMode {
    fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// What vecplane does between Ra and Rb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarding {
    /// IPv4/IPv6 router: Ra 198.18.1.1/24 + 2001:db8:1::1/64, Rb 198.18.2.1/24 +
    /// 2001:db8:2::1/64, static neighbours for A and B.
    Router,
    /// One bridge domain `br0` holding both ports (A and B share 198.18.1.0/24).
    Bridge,
    /// Two cross-connects, Ra -> Rb and Rb -> Ra (an L2 wire).
    Xconnect,
}

impl Forwarding {
    /// How A and B must be addressed for this forwarding.
    pub fn addressing(self) -> Addressing {
        match self {
            Forwarding::Router => Addressing::Routed,
            Forwarding::Bridge | Forwarding::Xconnect => Addressing::Bridged,
        }
    }
}

/// Settings of the generated config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecplaneConfig {
    /// Port driver of both ports.
    pub driver: Driver,
    /// Router, bridge or cross-connect.
    pub forwarding: Forwarding,
    /// `worker-cpu` (None: not pinned).
    pub worker_cpu: Option<usize>,
    /// `buffers` (None: vecplane's default).
    pub buffers: Option<u32>,
}

/// The port names in the generated config.
pub const PORT_A: &str = "Ra";
/// The port towards B.
pub const PORT_B: &str = "Rb";

/// Render the config for a topology whose R-side veths are `ra` and `rb`.
pub fn render_config(ra: &str, rb: &str, cfg: &VecplaneConfig) -> String {
    let mut s = String::new();
    let what = match cfg.forwarding {
        Forwarding::Router => "an IPv4/IPv6 router",
        Forwarding::Bridge => "a bridge",
        Forwarding::Xconnect => "an L2 cross-connect",
    };
    let _ = writeln!(
        s,
        "# Written by netlab: vecplane in namespace R as {what} between {ra} (towards A) and \
         {rb} (towards B)."
    );
    if cfg.worker_cpu.is_some() || cfg.buffers.is_some() {
        s.push_str("\n[dataplane]\n");
        if let Some(b) = cfg.buffers {
            let _ = writeln!(s, "buffers = {b}");
        }
        if let Some(c) = cfg.worker_cpu {
            let _ = writeln!(s, "worker-cpu = {c}");
        }
    }
    if cfg.forwarding == Forwarding::Bridge {
        s.push_str("\n[[bridge]]\nname = \"br0\"\n");
    }
    let ports = [
        (PORT_A, ra, addr::MAC_RA, addr::RA4, addr::RA6),
        (PORT_B, rb, addr::MAC_RB, addr::RB4, addr::RB6),
    ];
    for (name, dev, mac, ip4, ip6) in ports {
        let _ = writeln!(s, "\n[[port]]\nname = \"{name}\"");
        let _ = writeln!(s, "driver = \"{}\"", cfg.driver.name());
        let _ = writeln!(s, "interface = \"{dev}\"");
        if let Driver::AfXdp { queues, xdp_mode } = cfg.driver {
            if let Some(q) = queues {
                let _ = writeln!(s, "queues = {q}");
            }
            if let Some(m) = xdp_mode {
                let _ = writeln!(s, "xdp-mode = \"{}\"", m.name());
            }
        }
        let _ = writeln!(s, "mac = \"{mac}\"");
        match cfg.forwarding {
            Forwarding::Router => {
                let _ = writeln!(s, "ip4 = [\"{ip4}/{}\"]", addr::LEN4);
                let _ = writeln!(s, "ip6 = [\"{ip6}/{}\"]", addr::LEN6);
            }
            Forwarding::Bridge => {
                let _ = writeln!(s, "bridge = \"br0\"");
            }
            Forwarding::Xconnect => {}
        }
    }
    match cfg.forwarding {
        Forwarding::Router => {
            let neighbours = [
                (addr::A4.to_string(), addr::MAC_A0, PORT_A),
                (addr::A6.to_string(), addr::MAC_A0, PORT_A),
                (addr::B4.to_string(), addr::MAC_B0, PORT_B),
                (addr::B6.to_string(), addr::MAC_B0, PORT_B),
            ];
            for (ip, mac, port) in neighbours {
                let _ = writeln!(
                    s,
                    "\n[[neighbour]]\nip = \"{ip}\"\nmac = \"{mac}\"\nport = \"{port}\""
                );
            }
        }
        Forwarding::Xconnect => {
            for (from, to) in [(PORT_A, PORT_B), (PORT_B, PORT_A)] {
                let _ = writeln!(s, "\n[[xconnect]]\nfrom = \"{from}\"\nto = \"{to}\"");
            }
        }
        Forwarding::Bridge => {}
    }
    s
}

/// Validate `text` with vecplane's own config parser.
pub fn validate_config(text: &str) -> Result<(), ConfigError> {
    control::parse_config(text, "netlab.toml", Path::new(".")).map(|_| ())
}

/// A feature of the generated config that this build of vecplane does not accept yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// The port driver (the `driver` value, or its `queues`/`xdp-mode` keys).
    Driver,
    /// Bridges (`[[bridge]]`, or a port's `bridge` key).
    Bridge,
}

/// Which not-yet-accepted feature made `err` (if every issue is about one such feature).
pub fn unsupported_feature(err: &ConfigError) -> Option<Unsupported> {
    let issues = err.issues();
    if issues.is_empty() {
        return None;
    }
    let is_driver = |i: &control::Issue| {
        matches!(i.field.as_deref(), Some("driver" | "queues" | "xdp-mode"))
            || (i.field.as_deref() == Some("interface") && i.message.contains("af-xdp"))
    };
    let is_bridge = |i: &control::Issue| {
        i.field.as_deref() == Some("bridge")
            || i.section.contains("bridge")
            || i.message.contains("`bridge`")
    };
    if issues.iter().all(is_driver) {
        Some(Unsupported::Driver)
    } else if issues.iter().all(is_bridge) {
        Some(Unsupported::Bridge)
    } else {
        None
    }
}

/// One port's counters from `show interfaces`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Port name.
    pub name: String,
    /// Driver name.
    pub driver: String,
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Receive drops.
    pub rx_drops: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmit drops.
    pub tx_drops: u64,
}

/// Parse the `data` of `show interfaces` (JSON).
pub fn parse_interfaces(data: &serde_json::Value) -> Result<Vec<PortCounters>> {
    let list = data
        .get("interfaces")
        .and_then(|v| v.as_array())
        .context("`show interfaces` data has no `interfaces` list")?;
    list.iter()
        .map(|p| {
            let num = |k: &str| {
                p.get(k)
                    .and_then(|v| v.as_u64())
                    .with_context(|| format!("`show interfaces`: no `{k}`"))
            };
            Ok(PortCounters {
                name: p
                    .get("name")
                    .and_then(|v| v.as_str())
                    .context("`show interfaces`: a port without a name")?
                    .to_string(),
                driver: p
                    .get("driver")
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string(),
                rx_packets: num("rx_packets")?,
                rx_bytes: num("rx_bytes")?,
                rx_drops: num("rx_drops")?,
                tx_packets: num("tx_packets")?,
                tx_bytes: num("tx_bytes")?,
                tx_drops: num("tx_drops")?,
            })
        })
        .collect()
}

static DAEMONS: AtomicU32 = AtomicU32::new(0);

/// How long `vecplane run` may take to answer on its control socket.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A `vecplane run` daemon inside R; stopped when dropped.
#[derive(Debug)]
pub struct Vecplane {
    child: Spawned,
    socket: PathBuf,
    config: PathBuf,
    config_text: String,
}

impl Topology {
    /// Render, validate and write a vecplane config for this topology into its scratch
    /// directory. A config this build of vecplane rejects is an error carrying the
    /// [`ConfigError`] (see [`unsupported_feature`]).
    pub fn write_vecplane_config(&self, cfg: &VecplaneConfig) -> Result<PathBuf> {
        let n: &Names = self.names();
        if cfg.forwarding.addressing() != self.mode().addressing() {
            bail!(
                "a vecplane {:?} needs {:?} hosts, but this topology's are {:?}",
                cfg.forwarding,
                cfg.forwarding.addressing(),
                self.mode().addressing()
            );
        }
        let text = render_config(&n.ra, &n.rb, cfg);
        validate_config(&text)?;
        let k = DAEMONS.fetch_add(1, Ordering::Relaxed);
        let path = self.path(&format!("vecplane-{k}.toml"));
        std::fs::write(&path, &text).with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }

    /// Start `exe run --config CONFIG --socket SOCKET` inside R and wait until its control
    /// socket answers (or it exits, which is an error carrying its output).
    pub fn start_vecplane(&self, exe: &Path, config: &Path) -> Result<Vecplane> {
        start_in(self.ns(Host::R), self.dir(), exe, config)
    }
}

/// Start `exe run --config CONFIG --socket DIR/<config stem>.sock` inside namespace `ns` (its
/// output in `DIR/<config stem>.log`) and wait until its control socket answers (or it exits,
/// which is an error carrying its output).
pub(crate) fn start_in(ns: &str, dir: &Path, exe: &Path, config: &Path) -> Result<Vecplane> {
    launch(Some(ns), dir, exe, config)
}

/// [`start_in`] in this process's network namespace (where `ns` is None), the daemon tied to this
/// process (it gets SIGKILL when the process ends, as no namespace deletion would end it).
fn launch(ns: Option<&str>, dir: &Path, exe: &Path, config: &Path) -> Result<Vecplane> {
    let stem = config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "vecplane".to_string());
    let socket = dir.join(format!("{stem}.sock"));
    let exe_s = exe.to_string_lossy().into_owned();
    let config_s = config.to_string_lossy().into_owned();
    let socket_s = socket.to_string_lossy().into_owned();
    let config_text = std::fs::read_to_string(config).unwrap_or_default();
    let log = dir.join(format!("{stem}.log"));
    let run = [&exe_s, "run", "--config", &config_s, "--socket", &socket_s];
    let child = match ns {
        Some(ns) => Spawned::start(&crate::cmd::in_ns(ns, &run), Some(&log))?,
        None => Spawned::start_tied(&run, Some(&log))?,
    };
    let mut v = Vecplane {
        child,
        socket,
        config: config.to_path_buf(),
        config_text,
    };
    v.wait_ready(READY_TIMEOUT)?;
    Ok(v)
}

impl Vecplane {
    /// Start `exe run --config CONFIG --socket DIR/<config stem>.sock` in this process's network
    /// namespace (for ports that need no interface, such as vhost-user), its output in
    /// `DIR/<config stem>.log`, and wait until its control socket answers. The daemon is stopped
    /// on drop and killed when this process ends.
    pub fn start_here(exe: &Path, config: &Path, dir: &Path) -> Result<Vecplane> {
        launch(None, dir, exe, config)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if self.socket.exists() && control::request(&self.socket, "help", false).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "vecplane did not answer on {} within {:.0} s; its output:\n{}",
                    self.socket.display(),
                    timeout.as_secs_f64(),
                    self.child.log().trim_end()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An error (with the daemon's output) if it has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(s) = self.child.try_wait()? {
            bail!(
                "vecplane run exited ({}); its output:\n{}",
                describe_status(s),
                self.child.log().trim_end()
            );
        }
        Ok(())
    }

    /// The daemon's process id (`ip netns exec` replaces itself with it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The config file it runs.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The config text it was started with.
    pub fn config_text(&self) -> &str {
        &self.config_text
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        self.child.log()
    }

    /// Send one `vecplane ctl` command; a reply with `ok: false` is an error.
    pub fn request(&self, command: &str, json: bool) -> Result<Reply> {
        let r = control::request(&self.socket, command, json)
            .with_context(|| format!("`{command}` on {}", self.socket.display()))?;
        if !r.ok {
            bail!(
                "`{command}`: {}",
                r.error.as_deref().unwrap_or("failed without a reason")
            );
        }
        Ok(r)
    }

    /// The per-port counters (`show interfaces`).
    pub fn interfaces(&self) -> Result<Vec<PortCounters>> {
        let r = self.request("show interfaces", true)?;
        let data = r.data.context("`show interfaces` answered without data")?;
        parse_interfaces(&data)
    }

    /// The text of `show runtime`.
    pub fn runtime_text(&self) -> Result<String> {
        Ok(self
            .request("show runtime", false)?
            .text
            .unwrap_or_default())
    }

    /// Stop it (SIGTERM, SIGKILL after a grace period); an error if it did not exit cleanly.
    pub fn stop(mut self) -> Result<ExitStatus> {
        let s = self.child.stop(CLEAN_STOP_GRACE)?;
        if !s.success() {
            bail!(
                "vecplane run ended with {}; its output:\n{}",
                describe_status(s),
                self.child.log().trim_end()
            );
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Names;

    fn names() -> Names {
        Names::for_ids("t", 4242, 1).expect("names")
    }

    fn cfg(driver: Driver, forwarding: Forwarding) -> VecplaneConfig {
        VecplaneConfig {
            driver,
            forwarding,
            worker_cpu: Some(0),
            buffers: Some(4096),
        }
    }

    #[test]
    fn router_config_is_valid_for_af_packet() {
        let n = names();
        let text = render_config(&n.ra, &n.rb, &cfg(Driver::AfPacket, Forwarding::Router));
        let spec = control::parse_config(&text, "router.toml", Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.ports.len(), 2);
        assert_eq!(spec.ports[0].name, PORT_A);
        assert_eq!(spec.neighbours.len(), 4);
        assert_eq!(spec.worker_cpu, Some(0));
        assert_eq!(spec.buffers, 4096);
        match &spec.ports[1].driver {
            dataplane::PortDriver::AfPacket { interface, .. } => assert_eq!(interface, &n.rb),
            other => panic!("driver {other:?}"),
        }
        assert_eq!(spec.ports[0].ip4, vec![(addr::RA4, addr::LEN4)]);
        assert_eq!(spec.ports[1].ip6, vec![(addr::RB6, addr::LEN6)]);
    }

    #[test]
    fn xconnect_config_is_valid() {
        let n = names();
        let text = render_config(&n.ra, &n.rb, &cfg(Driver::AfPacket, Forwarding::Xconnect));
        let spec = control::parse_config(&text, "x.toml", Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.xconnects.len(), 2);
        assert!(spec.neighbours.is_empty());
    }

    #[test]
    fn af_xdp_and_bridge_configs_are_valid_or_only_refused_for_their_feature() {
        let n = names();
        let xdp = Driver::AfXdp {
            queues: Some(1),
            xdp_mode: Some(XdpMode::Auto),
        };
        for (driver, forwarding) in [
            (xdp, Forwarding::Router),
            (Driver::AF_XDP, Forwarding::Router),
            (Driver::AfPacket, Forwarding::Bridge),
            (xdp, Forwarding::Bridge),
        ] {
            let text = render_config(&n.ra, &n.rb, &cfg(driver, forwarding));
            match validate_config(&text) {
                Ok(()) => {}
                Err(e) => {
                    // Before these features are wired, every issue must be about them (so the
                    // rest of the generated config is right).
                    let feature = unsupported_feature(&e);
                    let expected = if driver == Driver::AfPacket {
                        vec![Some(Unsupported::Bridge)]
                    } else {
                        vec![Some(Unsupported::Driver), Some(Unsupported::Bridge)]
                    };
                    assert!(
                        expected.contains(&feature),
                        "{driver:?} {forwarding:?}: {e}\n{text}"
                    );
                    println!("not accepted yet ({feature:?}): {driver:?} {forwarding:?}");
                }
            }
        }
        let text = render_config(&n.ra, &n.rb, &cfg(xdp, Forwarding::Router));
        assert!(text.contains("queues = 1\nxdp-mode = \"auto\"\n"), "{text}");
        assert!(
            text.contains(&format!("interface = \"{}\"", n.ra)),
            "{text}"
        );
    }

    #[test]
    fn unrelated_errors_are_not_taken_for_missing_features() {
        let e = validate_config("[[port]]\nname = \"x\"\ndriver = \"af-packet\"\n")
            .expect_err("no mac");
        assert_eq!(unsupported_feature(&e), None);
    }

    #[test]
    fn interfaces_json_is_parsed() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"time_since_clear":1.0,"interfaces":[{"index":0,"name":"Ra","driver":"af-packet",
            "mac":"02:00:00:00:01:01","rx_packets":5,"rx_bytes":500,"rx_drops":0,"tx_packets":4,
            "tx_bytes":400,"tx_drops":1}]}"#,
        )
        .expect("json");
        let p = parse_interfaces(&v).expect("parsed");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "Ra");
        assert_eq!((p[0].rx_packets, p[0].tx_drops), (5, 1));
        assert!(parse_interfaces(&serde_json::json!({})).is_err());
        assert!(parse_interfaces(&serde_json::json!({"interfaces":[{"name":"x"}]})).is_err());
    }
}

//! `vecplane bench --scenario pvp [--reference ovs-dpdk]`: physical-virtual-physical without a
//! VM, the way DPDK and Open vSwitch test vhost-user. dpdk-testpmd with two `net_virtio_user`
//! ports plays the VM on one CPU (io forwarding: what comes back on one port is sent out of the
//! other, `start tx_first 32` puts 32 bursts per port in flight); the switch forwards between
//! two vhost-user ports on the other CPU. Switches, interleaved run by run:
//! * vecplane, in this process: a cross-connect both ways between two vhost-user ports,
//!   measured by its worker (packets received on both ports, TSC ticks);
//! * with the reference, Open vSwitch with DPDK (`dpdkvhostuserclient` ports, rules
//!   `in_port=1 -> 2` and back, one PMD thread): packets from testpmd's own counters, cycles
//!   per packet from `dpif-netdev/pmd-perf-show`;
//! * with the reference, the floor: a second testpmd with two `net_vhost` ports doing io
//!   forwarding, the least a vhost-user switch can cost on this machine.
//!
//! It owns the processes it starts (testpmd, Open vSwitch), their runtime files and its
//! scratch directory, and removes them whatever happens; it never uses a socket outside that
//! directory and never sends a packet onto a network.

use crate::measure::{self, RunResult, RunSettings};
use crate::report::{self, median_index, Summary};
use crate::scenario::Scenario;
use crate::scratch::ScratchDir;
use crate::testpmd::{self, Guard, Parser, TestpmdRun};
use crate::{sys, BenchArgs, Reference};
use anyhow::{anyhow, bail, Context, Result};
use netlab::{DpdkVhostSwitch, Ovs};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The scenario's name.
pub const NAME: &str = "pvp";
/// The reference's name in reports.
pub const REFERENCE_NAME: &str = "ovs-dpdk";
/// The floor's name in reports.
pub const FLOOR_NAME: &str = "testpmd-vhost";
/// Bursts per port testpmd puts in flight (`start tx_first N`), as Open vSwitch's PVP recipe.
const BURSTS_IN_FLIGHT: u32 = 32;
/// Longest wait for traffic to go round once a switch is up.
const FLOW_TIMEOUT: Duration = Duration::from_secs(45);
/// Bytes of testpmd's stderr kept for error messages.
const STDERR_KEPT: usize = 8192;
/// OpenFlow port numbers of the two vhost-user ports in Open vSwitch.
const OFPORTS: [u16; 2] = [1, 2];

/// One interactive testpmd, driven through its standard input.
struct Testpmd {
    guard: Guard,
    stdin: ChildStdin,
    parser: Arc<Mutex<Parser>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    label: &'static str,
}

impl Testpmd {
    /// Start `path` with EAL arguments `eal` (the `--file-prefix` is added) and application
    /// arguments `app` (`-i` is added).
    fn spawn(path: &Path, label: &'static str, eal: Vec<String>, app: Vec<String>) -> Result<Self> {
        testpmd::check_installed(path)?;
        // Through `stdbuf -oL`: testpmd's interactive output to a pipe is otherwise held in a
        // 4 KiB stdio buffer, and the statistics we ask for would arrive late or never.
        let mut guard = testpmd::spawn(Path::new("stdbuf"), Stdio::piped(), |prefix| {
            let mut a = vec!["-oL".to_string(), path.display().to_string()];
            a.extend(eal);
            a.push(format!("--file-prefix={prefix}"));
            a.push("--".into());
            a.push("-i".into());
            a.extend(app);
            a
        })?;
        let stdin = guard
            .child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("{label}: stdin is not a pipe"))?;
        let stdout = guard
            .child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("{label}: stdout is not a pipe"))?;
        let stderr = guard
            .child
            .stderr
            .take()
            .ok_or_else(|| anyhow!("{label}: stderr is not a pipe"))?;
        let parser = Arc::new(Mutex::new(Parser::default()));
        let p = parser.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                p.lock().unwrap_or_else(|e| e.into_inner()).feed(&line);
                line.clear();
            }
        });
        // Its stderr as it comes, the last few KiB kept (what `died` shows).
        let err = Arc::new(Mutex::new(Vec::new()));
        let e = err.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stderr);
            let mut chunk = [0u8; 4096];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut buf = e.lock().unwrap_or_else(|x| x.into_inner());
                buf.extend_from_slice(&chunk[..n]);
                let excess = buf.len().saturating_sub(STDERR_KEPT);
                buf.drain(..excess);
            }
        });
        Ok(Testpmd {
            guard,
            stdin,
            parser,
            stderr: err,
            label,
        })
    }

    /// The end of what it wrote on stderr.
    fn stderr_tail(&self) -> String {
        let buf = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        testpmd::tail(&String::from_utf8_lossy(&buf), 3000).to_string()
    }

    /// Type one command.
    fn send(&mut self, command: &str) -> Result<()> {
        if self.guard.exited() {
            return Err(self.died());
        }
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| anyhow!("{}: cannot send `{command}`: {e}", self.label))
    }

    fn died(&self) -> anyhow::Error {
        anyhow!("{} exited; it said:\n{}", self.label, self.stderr_tail())
    }

    /// Its forwarding rate over `seconds` (both ports), from `show port stats all` once a
    /// period.
    fn measure(&mut self, seconds: f64, tsc_hz: u64) -> Result<TestpmdRun> {
        *self.parser.lock().unwrap_or_else(|e| e.into_inner()) = Parser::default();
        let periods = seconds.ceil().max(1.0) as usize;
        let period = Duration::from_secs_f64(seconds / periods as f64);
        for i in 0..=periods {
            self.send("show port stats all")?;
            if i < periods {
                std::thread::sleep(period);
            }
        }
        // Let the last block print.
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let complete = self
                .parser
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .parsed()
                .blocks
                .iter()
                .filter(|b| b.is_complete(2))
                .count();
            if complete > periods || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let parsed = self
            .parser
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .parsed()
            .clone();
        testpmd::rate(&parsed, 2, tsc_hz).with_context(|| format!("{}'s statistics", self.label))
    }

    /// Start forwarding with bursts in flight and wait until packets go round.
    fn start_loop(&mut self, tsc_hz: u64) -> Result<()> {
        let until = Instant::now() + FLOW_TIMEOUT;
        loop {
            self.send("set fwd io")?;
            self.send(&format!("start tx_first {BURSTS_IN_FLIGHT}"))?;
            std::thread::sleep(Duration::from_millis(500));
            if self.measure(1.0, tsc_hz).is_ok_and(|r| r.mpps > 0.01) {
                return Ok(());
            }
            if Instant::now() >= until {
                bail!(
                    "{}: no packet went round within {FLOW_TIMEOUT:?}; it said:\n{}",
                    self.label,
                    self.stderr_tail()
                );
            }
            // The first bursts may have gone out before the link was up: start over.
            self.send("stop")?;
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "stop\nquit");
        let _ = self.stdin.flush();
        if !self.guard.wait_for(Duration::from_secs(5)) {
            self.guard.signal(libc::SIGKILL);
            let _ = self.guard.wait_for(Duration::from_secs(5));
        }
        // The guard removes the runtime directory.
    }
}

/// EAL arguments common to every testpmd here: no huge pages, no PCI, `-m 1024`.
fn eal_base(lcores: String) -> Vec<String> {
    let mut a = vec![format!("--lcores={lcores}"), "--main-lcore=0".into()];
    a.extend(
        ["--no-huge", "-m", "1024", "--no-pci", "--no-telemetry"]
            .iter()
            .map(|s| s.to_string()),
    );
    a
}

/// The VM: two virtio-user ports on `sockets` (serving them when `server`), both lcores on
/// `cpu`, frames of `frame_size` bytes with FCS.
fn virtio_user(
    args: &BenchArgs,
    cpu: usize,
    sockets: &[PathBuf; 2],
    server: bool,
    frame_size: usize,
) -> Result<Testpmd> {
    let mut eal = eal_base(format!("0@{cpu},1@{cpu}"));
    for (i, s) in sockets.iter().enumerate() {
        eal.push("--vdev".into());
        eal.push(format!(
            "net_virtio_user{i},path={},queues=1{}{}",
            s.display(),
            if server { ",server=1" } else { "" },
            if args.packed_rings {
                ",packed_vq=1"
            } else {
                ""
            }
        ));
    }
    let size = frame_size.saturating_sub(4);
    let mut app = vec![
        "--nb-cores=1".to_string(),
        "--total-num-mbufs=32768".into(),
        format!("--txpkts={size}"),
        "--no-lsc-interrupt".into(),
    ];
    if size > 2048 {
        app.push(format!("--mbuf-size={}", size + 128));
    }
    Testpmd::spawn(&args.testpmd_path, "testpmd (virtio-user)", eal, app)
}

/// The floor's switch: two vhost ports on `sockets`, forwarding on `cpu`, main lcore on
/// `main_cpu`.
fn vhost_switch(
    args: &BenchArgs,
    cpu: usize,
    main_cpu: usize,
    sockets: &[PathBuf; 2],
) -> Result<Testpmd> {
    let mut eal = eal_base(format!("0@{main_cpu},1@{cpu}"));
    for (i, s) in sockets.iter().enumerate() {
        eal.push("--vdev".into());
        eal.push(format!("net_vhost{i},iface={},queues=1", s.display()));
    }
    let app = vec!["--nb-cores=1".to_string(), "--total-num-mbufs=32768".into()];
    let mut t = Testpmd::spawn(&args.testpmd_path, "testpmd (vhost)", eal, app)?;
    t.send("set fwd io")?;
    t.send("start")?;
    Ok(t)
}

/// vecplane's config: the two vhost-user ports (vecplane serves the sockets), a cross-connect
/// each way, the worker on `cpu`.
pub fn vecplane_config(sockets: &[PathBuf; 2], cpu: usize) -> String {
    format!(
        "# vecplane bench --scenario pvp\n\
         [dataplane]\nworker-cpu = {cpu}\n\n\
         [[port]]\nname = \"vu0\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:00:10\"\nsocket = \"{}\"\n\n\
         [[port]]\nname = \"vu1\"\ndriver = \"vhost-user\"\nmac = \"02:00:00:00:00:11\"\nsocket = \"{}\"\n\n\
         [[xconnect]]\nfrom = \"vu0\"\nto = \"vu1\"\ndst-mac = \"02:00:00:00:00:21\"\n\n\
         [[xconnect]]\nfrom = \"vu1\"\nto = \"vu0\"\ndst-mac = \"02:00:00:00:00:20\"\n",
        sockets[0].display(),
        sockets[1].display()
    )
}

/// Open vSwitch's figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OvsRun {
    /// Forwarding rate by testpmd's counters.
    pub mpps: f64,
    /// Cycles per packet by `dpif-netdev/pmd-perf-show` (its PMD's used cycles / packets).
    pub cycles_per_packet: f64,
    /// Its PMD's Kpps by the same report.
    pub pmd_kpps: f64,
    /// Share of the PMD's cycles spent on busy iterations, when reported.
    pub pmd_busy_percent: Option<f64>,
    /// `cycles_per_packet` times the busy share: the cycles of the iterations that carried
    /// packets, per packet.
    pub busy_cycles_per_packet: Option<f64>,
    /// The whole `pmd-perf-show` text.
    pub perf_show: String,
}

/// `(Kpps, cycles/pkt)` from the "Rx packets:" line of `dpif-netdev/pmd-perf-show`.
pub fn parse_pmd_perf_show(text: &str) -> Option<(f64, f64)> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Rx packets:"))?;
    let inside = line.split('(').nth(1)?.trim_end().trim_end_matches(')');
    let mut kpps = None;
    let mut cycles = None;
    for part in inside.split(',') {
        let mut w = part.split_whitespace();
        let (Some(v), Some(unit)) = (w.next(), w.next()) else {
            continue;
        };
        match unit {
            "Kpps" => kpps = v.parse().ok(),
            "cycles/pkt" => cycles = v.parse().ok(),
            _ => {}
        }
    }
    Some((kpps?, cycles?))
}

/// The busy share from the "- busy iterations:" line (`(... % of used cycles)`).
fn parse_busy_percent(text: &str) -> Option<f64> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("- busy iterations:"))?;
    let at = line.find('(')?;
    line.get(at + 1..)?.split_whitespace().next()?.parse().ok()
}

/// The two vhost-user sockets of one switch in the run's scratch directory.
fn sockets(scratch: &ScratchDir, tag: &str) -> [PathBuf; 2] {
    let s = [
        scratch.path().join(format!("{tag}0.sock")),
        scratch.path().join(format!("{tag}1.sock")),
    ];
    // A testpmd killed on its way out leaves its server sockets behind, and the next one
    // could not bind them (Open vSwitch's client ports then retry a dead path for ever).
    for p in &s {
        let _ = std::fs::remove_file(p);
    }
    s
}

/// Packets received on every port so far.
fn rx_total(view: &dataplane::RuntimeView) -> u64 {
    view.ports
        .get()
        .iter()
        .flat_map(|p| p.stats.iter())
        .map(|s| s.rx_packets.get())
        .sum()
}

/// One measured vecplane run.
fn run_vecplane(
    args: &BenchArgs,
    scratch: &ScratchDir,
    cpus: (usize, usize),
    frame_size: usize,
    tsc_hz: u64,
    label: String,
) -> Result<RunResult> {
    let sockets = sockets(scratch, "vp");
    let text = vecplane_config(&sockets, cpus.0);
    let spec = control::parse_config(&text, "pvp.toml", scratch.path())
        .map_err(|e| anyhow!("the generated config is refused: {e}"))?;
    let settings = RunSettings {
        seconds: args.seconds,
        warmup: args.warmup,
        cpu: cpus.0,
        tsc_hz,
        label,
        progress: !args.no_progress,
        rx_on_every_port: true,
    };
    let (result, generator) = measure::run_once_with(
        &spec,
        Scenario::L2xc,
        &settings,
        |_| {
            let mut g = virtio_user(args, cpus.1, &sockets, false, frame_size)?;
            // Buffered until its ports are up (they come up as vecplane answers).
            g.send("set fwd io")?;
            g.send(&format!("start tx_first {BURSTS_IN_FLIGHT}"))?;
            Ok(g)
        },
        |view| rx_total(view) > 100_000,
    )?;
    drop(generator);
    Ok(result)
}

/// One measured Open vSwitch run.
fn run_ovs(
    args: &BenchArgs,
    scratch: &ScratchDir,
    cpus: (usize, usize),
    frame_size: usize,
    tsc_hz: u64,
) -> Result<OvsRun> {
    let sockets = sockets(scratch, "ovs");
    let ports: Vec<(&Path, u16)> = sockets.iter().map(PathBuf::as_path).zip(OFPORTS).collect();
    // Open vSwitch first: its client ports retry the sockets every second until the VM serves
    // them; then wait until its PMD polls both (a port whose reconfiguration failed is not).
    let ovs = Ovs::start_dpdk_vhost(
        "pvo",
        &DpdkVhostSwitch {
            ports: &ports,
            pmd_cpu: cpus.0,
            main_cpu: cpus.1,
        },
    )?;
    ovs.add_flows(&format!(
        "in_port={a},actions=output:{b}\nin_port={b},actions=output:{a}\n",
        a = OFPORTS[0],
        b = OFPORTS[1]
    ))?;
    let mut vm = virtio_user(args, cpus.1, &sockets, true, frame_size)?;
    wait_until_polled(&ovs)?;
    if let Err(e) = vm.start_loop(tsc_hz) {
        // What Open vSwitch polls and what its rules matched say which side stayed silent.
        let said = |r: Result<String>| r.unwrap_or_else(|e| format!("(cannot ask: {e:#})"));
        let rxqs = said(ovs.appctl(&["dpif-netdev/pmd-rxq-show"]));
        let flows = said(ovs.dump_flows_with_stats().map(|l| l.join("\n")));
        let log = std::fs::read_to_string(ovs.dir().join("ovs-vswitchd.log")).unwrap_or_default();
        let about_ports: Vec<&str> = log
            .lines()
            .filter(|l| {
                ["vHost", "vhost", "queue", "vu1", "vu2"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .collect();
        return Err(e.context(format!(
            "Open vSwitch did not forward.\npmd-rxq-show:\n{rxqs}\nrules:\n{flows}\n\
             its log about the ports:\n{}",
            about_ports.join("\n")
        )));
    }
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    ovs.appctl(&["dpif-netdev/pmd-stats-clear"])?;
    let rate = vm.measure(args.seconds, tsc_hz)?;
    let perf = ovs.appctl(&["dpif-netdev/pmd-perf-show"])?;
    let (pmd_kpps, cycles_per_packet) =
        parse_pmd_perf_show(&perf).ok_or_else(|| anyhow!("cannot read pmd-perf-show:\n{perf}"))?;
    drop(vm);
    ovs.stop()?;
    let busy = parse_busy_percent(&perf);
    Ok(OvsRun {
        mpps: rate.mpps,
        cycles_per_packet,
        pmd_kpps,
        pmd_busy_percent: busy,
        busy_cycles_per_packet: busy.map(|b| cycles_per_packet * b / 100.0),
        perf_show: perf,
    })
}

/// Wait until Open vSwitch's PMD polls a queue of every vhost-user port (the devices are
/// connected and their queues enabled).
fn wait_until_polled(ovs: &Ovs) -> Result<()> {
    let until = Instant::now() + FLOW_TIMEOUT;
    loop {
        let show = ovs.appctl(&["dpif-netdev/pmd-rxq-show"])?;
        let polled = |p: u16| {
            show.lines().any(|l| {
                l.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w[0] == "port:" && w[1] == format!("vu{p}"))
                    && l.contains("(enabled)")
            })
        };
        if OFPORTS.iter().all(|&p| polled(p)) {
            return Ok(());
        }
        if Instant::now() >= until {
            bail!(
                "Open vSwitch does not poll both vhost-user ports within {FLOW_TIMEOUT:?}:\n{show}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One measured floor run.
fn run_floor(
    args: &BenchArgs,
    scratch: &ScratchDir,
    cpus: (usize, usize),
    frame_size: usize,
    tsc_hz: u64,
) -> Result<TestpmdRun> {
    let sockets = sockets(scratch, "floor");
    let switch = vhost_switch(args, cpus.0, cpus.1, &sockets)?;
    // net_vhost creates its sockets as it starts.
    let until = Instant::now() + Duration::from_secs(30);
    while !sockets.iter().all(|s| s.exists()) {
        if Instant::now() >= until {
            bail!("testpmd (vhost) did not create its sockets within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut vm = virtio_user(args, cpus.1, &sockets, false, frame_size)?;
    vm.start_loop(tsc_hz)?;
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let r = vm.measure(args.seconds, tsc_hz)?;
    drop(vm);
    drop(switch);
    Ok(r)
}

/// The CPUs: (switch, VM). The switch gets `--cpu` or the last CPU, the VM another one.
fn cpus(args: &BenchArgs) -> Result<(usize, usize)> {
    let allowed = sys::allowed_cpus();
    let switch = match args.cpu {
        Some(c) => c,
        None => sys::last_cpu().context("cannot read this process's CPU affinity")?,
    };
    if !allowed.contains(&switch) {
        bail!("CPU {switch} is not available to this process");
    }
    let vm = allowed
        .into_iter()
        .find(|&c| c != switch)
        .ok_or_else(|| anyhow!("pvp needs a second CPU for testpmd (the VM); none is allowed"))?;
    Ok((switch, vm))
}

/// The report of one frame size: the engine bench's keys (vecplane's median run) plus
/// `reference` (Open vSwitch with DPDK) and `floor`.
///
/// When testpmd (the VM) is what limits the rate, both switches spin idle part of the time
/// and cycles per packet (all of the core's cycles over the packets) only restate the rate.
/// The busy cycles compare what a packet costs: ours are the node calls that carried
/// packets, Open vSwitch's its PMD's cycles times the share of them in busy iterations.
pub fn report(summary: &Summary, ovs: &[OvsRun], floor: &[TestpmdRun]) -> Result<Value> {
    let mut v = serde_json::to_value(summary)?;
    let Some(obj) = v.as_object_mut() else {
        bail!("a summary is not a JSON object");
    };
    let cpp: Vec<f64> = ovs.iter().map(|r| r.cycles_per_packet).collect();
    if let Some(m) = median_index(&cpp).and_then(|i| ovs.get(i)) {
        let mpps: Vec<f64> = ovs.iter().map(|r| r.mpps).collect();
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let busy = m.busy_cycles_per_packet.unwrap_or(0.0);
        obj.insert(
            "reference".into(),
            json!({
                "name": REFERENCE_NAME,
                "mpps": m.mpps,
                "cycles_per_packet": m.cycles_per_packet,
                "speedup": ratio(summary.mpps, m.mpps),
                "cycles_ratio": ratio(summary.cycles_per_packet, m.cycles_per_packet),
                "busy_cycles_per_packet": m.busy_cycles_per_packet,
                "busy_cycles_ratio": ratio(summary.busy_cycles_per_packet, busy),
                "pmd_busy_percent": m.pmd_busy_percent,
                "runs_mpps": mpps,
                "runs_cycles_per_packet": cpp,
                "pmd_perf_show": m.perf_show,
            }),
        );
    }
    let fm: Vec<f64> = floor.iter().map(|r| r.mpps).collect();
    if let Some(f) = median_index(&fm).and_then(|i| floor.get(i)) {
        obj.insert(
            "floor".into(),
            json!({"name": FLOOR_NAME, "mpps": f.mpps, "runs_mpps": fm}),
        );
    }
    Ok(v)
}

/// The text report of one frame size.
fn human(summary: &Summary, v: &Value) -> String {
    let mut o = report::human(summary);
    if let Some(r) = v.get("reference") {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        o.push_str(&format!(
            "  {REFERENCE_NAME}: {:.2} Mpps, {:.1} cycles/packet, {:.1} of them busy (its PMD, \
             pmd-perf-show, {:.1}% busy); vecplane: {:.1} busy cycles/packet\n  \
             vecplane/ovs: {:.2}x the Mpps, {:.2}x the cycles, {:.2}x the busy cycles \
             (goal: >= 1x the Mpps, <= 0.67x the busy cycles: {})\n",
            f("mpps"),
            f("cycles_per_packet"),
            f("busy_cycles_per_packet"),
            f("pmd_busy_percent"),
            summary.busy_cycles_per_packet,
            f("speedup"),
            f("cycles_ratio"),
            f("busy_cycles_ratio"),
            if f("speedup") >= 1.0 && f("busy_cycles_ratio") <= 2.0 / 3.0 {
                "met"
            } else {
                "not met"
            }
        ));
    }
    if let Some(fl) = v.get("floor") {
        o.push_str(&format!(
            "  floor ({FLOOR_NAME} io loop on the same CPUs): {:.2} Mpps: what testpmd as the VM \
             can carry here\n",
            fl["mpps"].as_f64().unwrap_or(0.0)
        ));
    }
    o
}

/// Run the scenario and print its report.
pub fn run(args: &BenchArgs) -> Result<()> {
    let (summary, v) = compare(args)?;
    if args.json {
        println!("{}", serde_json::to_string(&v)?);
    } else {
        print!("{}", human(&summary, &v));
    }
    Ok(())
}

/// Run the scenario: vecplane's summary, and the JSON report (its keys plus `reference` and
/// `floor` with `--reference ovs-dpdk`).
pub fn compare(args: &BenchArgs) -> Result<(Summary, Value)> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(args.seconds >= 1.0 && args.seconds.is_finite()) {
        bail!("--seconds must be at least 1 for pvp (testpmd counts in whole periods)");
    }
    if !(64..=1518).contains(&args.frame_size) || args.sweep {
        bail!("pvp takes one --frame-size from 64 to 1518");
    }
    testpmd::check_installed(&args.testpmd_path)?;
    let with_ovs = args.reference == Some(Reference::OvsDpdk);
    let cpus = cpus(args)?;
    let tsc_hz = graph::measure_tsc_hz(250);
    let scratch = ScratchDir::create("pvp")?;
    let frame_size = args.frame_size;
    let (mut runs, mut ovs, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..args.runs {
        let label = format!("pvp {frame_size} B run {}/{}", r + 1, args.runs);
        let result = run_vecplane(args, &scratch, cpus, frame_size, tsc_hz, label.clone())?;
        if !args.no_progress {
            eprintln!(
                "{label}: vecplane {:.2} Mpps, {:.1} cycles/packet",
                result.mpps, result.cycles_per_packet
            );
        }
        runs.push(result);
        if with_ovs {
            let o = match run_ovs(args, &scratch, cpus, frame_size, tsc_hz) {
                Ok(o) => o,
                // A reference that did not come up (on a loaded machine Open vSwitch once
                // failed to reconfigure a port for want of DPDK memory, see netlab's ovs.rs)
                // gets one more try with a fresh Open vSwitch and VM; the first failure is
                // printed whole.
                Err(e) => {
                    eprintln!("{label}: {REFERENCE_NAME} run failed, starting it once more: {e:#}");
                    run_ovs(args, &scratch, cpus, frame_size, tsc_hz)?
                }
            };
            let f = run_floor(args, &scratch, cpus, frame_size, tsc_hz)?;
            if !args.no_progress {
                eprintln!(
                    "{label}: {REFERENCE_NAME} {:.2} Mpps, {:.1} cycles/packet; floor {:.2} Mpps",
                    o.mpps, o.cycles_per_packet, f.mpps
                );
            }
            ovs.push(o);
            floor.push(f);
        }
    }
    let input = report::SummaryInput {
        scenario: NAME.to_string(),
        has_fib: false,
        frame_size,
        frame_size_requested: frame_size,
        flows: 1,
        routes: 0,
        seconds: args.seconds,
        warmup_seconds: args.warmup,
        cpu: cpus.0,
        tsc_hz,
        notes: vec![format!(
            "testpmd with two virtio-user ports is the VM on CPU {} (io forwarding, {} bursts \
             per port in flight); packets are counted on both of the switch's ports",
            cpus.1, BURSTS_IN_FLIGHT
        )],
    };
    let summary = report::summarize(input, runs, Vec::new()).context("no run completed")?;
    let v = report(&summary, &ovs, &floor)?;
    Ok((summary, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmd_perf_show_gives_rate_and_cycles() {
        let text = "Time: 10:00:00.000\nMeasurement duration: 3.001 s\n\n\
                    pmd thread numa_id 0 core_id 1:\n\n\
                    \x20 Iterations:             12345678  (0.24 us/it)\n\
                    \x20 - Used TSC cycles:    7791823465  (100.0 % of total cycles)\n\
                    \x20 - idle iterations:      1234567  (  2.1 % of used cycles)\n\
                    \x20 - busy iterations:     11111111  ( 97.9 % of used cycles)\n\
                    \x20 Rx packets:            23345678  (7780 Kpps, 315 cycles/pkt)\n";
        assert_eq!(parse_pmd_perf_show(text), Some((7780.0, 315.0)));
        assert_eq!(parse_busy_percent(text), Some(97.9));
        assert_eq!(parse_pmd_perf_show("nothing"), None);
    }

    #[test]
    fn the_config_is_accepted_by_vecplanes_parser() {
        let sockets = [PathBuf::from("/tmp/a.sock"), PathBuf::from("/tmp/b.sock")];
        let spec = control::parse_config(&vecplane_config(&sockets, 1), "pvp.toml", Path::new("/"))
            .expect("config");
        assert_eq!(spec.ports.len(), 2);
    }
}

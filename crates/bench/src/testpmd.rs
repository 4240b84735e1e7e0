//! The DPDK reference: runs `dpdk-testpmd` in mac forwarding mode on two `net_null` vdevs
//! (`copy=1`, so every packet is written on receive and read on transmit) with its one forwarding
//! lcore on the worker's CPU, reads its once-a-second port statistics, and turns them into a rate.
//! It owns the child process from spawn to reap: it never leaves testpmd running (SIGINT after
//! the run, SIGKILL after a timeout, on drop, and by the kernel if we die) and always removes the
//! runtime directory of its private `--file-prefix`.

use crate::sys;
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Where Debian's `dpdk-dev` installs testpmd.
pub const DEFAULT_PATH: &str = "/usr/bin/dpdk-testpmd";

/// What to tell the user when testpmd is missing.
pub const NOT_INSTALLED: &str = "dpdk-testpmd is not installed (apt-get install dpdk-dev)";

/// Name of the reference in reports.
pub const NAME: &str = "dpdk-testpmd mac";

/// Prefix of our `--file-prefix` values (followed by `<pid>-<n>`).
pub(crate) const PREFIX: &str = "vecplane-bench-";

/// Longest wait for testpmd's first statistics (EAL start-up with `-m 512` takes seconds).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for testpmd to exit after SIGINT before it is killed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How one testpmd run is made.
#[derive(Clone, Debug)]
pub struct TestpmdSettings {
    /// The binary.
    pub path: PathBuf,
    /// Frame size on the wire including FCS (testpmd's packets are 4 bytes shorter).
    pub frame_size: usize,
    /// Measured seconds (rounded up to whole statistics periods, which last 1 or 2 s).
    pub seconds: f64,
    /// CPU of the forwarding lcore.
    pub cpu: usize,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Label of the progress line.
    pub label: String,
    /// Whether to print a progress line on stderr.
    pub progress: bool,
}

/// Figures of one testpmd run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestpmdRun {
    /// Packets forwarded (received on both ports) over the measured statistics periods.
    pub packets: u64,
    /// Length of those periods by testpmd's own clock.
    pub seconds: f64,
    /// Million packets forwarded per second.
    pub mpps: f64,
    /// `tsc_hz / packets per second`.
    pub cycles_per_packet: f64,
    /// Statistics periods measured.
    pub periods: usize,
    /// RX packets of both ports over the whole run, from the statistics printed at exit
    /// (includes start-up; a cross-check only).
    pub accumulated_rx: Option<u64>,
    /// CPU time of the forwarding lcore's thread divided by wall time over the measured
    /// periods (below 1.0: something else ran on its CPU), when the kernel told us.
    pub worker_cpu_share: Option<f64>,
    /// `cycles_per_packet * worker_cpu_share`: ticks per packet while on its CPU.
    pub on_cpu_cycles_per_packet: Option<f64>,
    /// Share of time the other CPUs were busy over the measured periods, when known.
    pub others_busy: Option<f64>,
}

/// One periodic "Port statistics" block, summed over ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsBlock {
    /// Cumulative RX packets of all ports.
    pub rx_packets: u64,
    /// RX packets per second of all ports since the previous block (testpmd's own TSC timing).
    pub rx_pps: u64,
    /// Ports whose RX-packets line was seen.
    pub ports_rx: usize,
    /// Ports whose Rx-pps line was seen.
    pub ports_pps: usize,
}

impl StatsBlock {
    /// Whether every port of the block had both lines (a block cut by exit is not).
    pub fn is_complete(&self, ports: usize) -> bool {
        self.ports_rx == ports && self.ports_pps == ports
    }
}

/// What testpmd printed, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// Periodic statistics blocks, in order.
    pub blocks: Vec<StatsBlock>,
    /// "Accumulated forward statistics for all ports" RX-packets, if printed.
    pub accumulated_rx: Option<u64>,
    /// Same, TX-packets.
    pub accumulated_tx: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Section {
    #[default]
    Other,
    PortStats,
    Forward,
    Accumulated,
}

/// Line-by-line parser of testpmd's output (so progress can be read while it runs).
#[derive(Clone, Debug, Default)]
pub struct Parser {
    parsed: Parsed,
    section: Section,
}

/// The first whitespace-separated token after `key` in `line`, as a number.
fn number_after(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    line.get(at..)?.split_whitespace().next()?.parse().ok()
}

impl Parser {
    /// Feed one line of testpmd's stdout.
    pub fn feed(&mut self, line: &str) {
        if line.contains("Port statistics ====") {
            self.section = Section::PortStats;
            self.parsed.blocks.push(StatsBlock::default());
            return;
        }
        // `show port stats all` (interactive) prints the per-port blocks without the
        // "Port statistics" line: port 0's block starts a new statistics block.
        if line.contains("NIC statistics for port 0 ") {
            let fresh = self.section == Section::PortStats
                && self.parsed.blocks.last().is_some_and(|b| b.ports_rx == 0);
            if !fresh {
                self.parsed.blocks.push(StatsBlock::default());
            }
            self.section = Section::PortStats;
            return;
        }
        if line.contains("Accumulated forward statistics") {
            self.section = Section::Accumulated;
            return;
        }
        if line.contains("Forward statistics for port") {
            self.section = Section::Forward;
            return;
        }
        if line.contains("Telling cores to stop") {
            self.section = Section::Other;
            return;
        }
        match self.section {
            Section::PortStats => {
                let Some(b) = self.parsed.blocks.last_mut() else {
                    return;
                };
                if let Some(n) = number_after(line, "RX-packets:") {
                    b.rx_packets = b.rx_packets.saturating_add(n);
                    b.ports_rx += 1;
                } else if let Some(n) = number_after(line, "Rx-pps:") {
                    b.rx_pps = b.rx_pps.saturating_add(n);
                    b.ports_pps += 1;
                }
            }
            Section::Accumulated => {
                if let Some(n) = number_after(line, "RX-packets:") {
                    self.parsed.accumulated_rx = Some(n);
                } else if let Some(n) = number_after(line, "TX-packets:") {
                    self.parsed.accumulated_tx = Some(n);
                    self.section = Section::Other;
                }
            }
            Section::Forward | Section::Other => {}
        }
    }

    /// What has been parsed so far.
    pub fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    /// The parse result.
    pub fn finish(self) -> Parsed {
        self.parsed
    }
}

/// Parse a whole captured output.
pub fn parse(text: &str) -> Parsed {
    let mut p = Parser::default();
    for line in text.lines() {
        p.feed(line);
    }
    p.finish()
}

/// The forwarding rate over the complete statistics periods after the first block (the first
/// one is printed as forwarding starts and its rate is 0). Each period's length is recovered from
/// testpmd's own rate (`packets / pps`), so the result is packets over time by testpmd's TSC.
pub fn rate(parsed: &Parsed, ports: usize, tsc_hz: u64) -> Result<TestpmdRun> {
    let blocks: Vec<&StatsBlock> = parsed
        .blocks
        .iter()
        .filter(|b| b.is_complete(ports))
        .collect();
    if blocks.len() < 2 {
        bail!(
            "testpmd printed {} complete statistics block(s); at least 2 are needed",
            blocks.len()
        );
    }
    let (mut packets, mut seconds, mut periods) = (0u64, 0f64, 0usize);
    for w in blocks.windows(2) {
        let d = w[1].rx_packets.saturating_sub(w[0].rx_packets);
        if w[1].rx_pps == 0 {
            continue;
        }
        packets += d;
        seconds += d as f64 / w[1].rx_pps as f64;
        periods += 1;
    }
    if packets == 0 || seconds <= 0.0 {
        bail!("testpmd forwarded nothing during the measured periods");
    }
    let pps = packets as f64 / seconds;
    Ok(TestpmdRun {
        packets,
        seconds,
        mpps: pps / 1e6,
        cycles_per_packet: tsc_hz as f64 / pps,
        periods,
        accumulated_rx: parsed.accumulated_rx,
        worker_cpu_share: None,
        on_cpu_cycles_per_packet: None,
        others_busy: None,
    })
}

/// What is sampled as each statistics block begins to print.
#[derive(Clone, Debug)]
struct Sample {
    at: Instant,
    run_ns: Option<u64>,
    cpus: sys::CpuTimes,
}

/// The `schedstat` file of testpmd's forwarding thread on `cpu` (DPDK names lcore threads
/// `rte-worker-<lcore>`, older releases `lcore-worker-<lcore>`; `-l` makes lcore ids CPU ids).
fn worker_schedstat(pid: u32, cpu: usize) -> Option<PathBuf> {
    let suffix = format!("-worker-{cpu}");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|t| t.path())
        .find(|t| {
            std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim().ends_with(&suffix))
        })
        .map(|t| t.join("schedstat"))
}

/// Nanoseconds a thread has run, from its `schedstat` (first field).
fn run_ns(schedstat: &Path) -> Option<u64> {
    std::fs::read_to_string(schedstat)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The samples taken at the first and the last complete statistics blocks.
fn measured_span<'a>(
    parsed: &Parsed,
    ports: usize,
    samples: &'a [Sample],
) -> Option<(&'a Sample, &'a Sample)> {
    let complete: Vec<usize> = (0..parsed.blocks.len())
        .filter(|&i| parsed.blocks[i].is_complete(ports))
        .collect();
    Some((
        samples.get(*complete.first()?)?,
        samples.get(*complete.last()?)?,
    ))
}

/// The share of wall time the forwarding thread ran between the first and the last complete
/// statistics blocks, from samples taken as each block began to print.
fn cpu_share(parsed: &Parsed, ports: usize, samples: &[Sample]) -> Option<f64> {
    let (a, b) = measured_span(parsed, ports, samples)?;
    let wall = b.at.checked_duration_since(a.at)?.as_nanos() as f64;
    let ran = b.run_ns?.checked_sub(a.run_ns?)? as f64;
    (wall > 0.0).then(|| (ran / wall).min(1.0))
}

/// Directory where DPDK keeps the runtime files of a `--file-prefix`.
pub fn runtime_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/run/dpdk");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => Path::new(&d).join("dpdk"),
        None => PathBuf::from("/tmp/dpdk"),
    }
}

/// Remove runtime directories left by bench processes that no longer exist.
pub(crate) fn clean_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The command-line arguments of one run.
pub fn arguments(frame_size: usize, cpu: usize, main_cpu: usize, prefix: &str) -> Vec<String> {
    let size = frame_size.saturating_sub(4);
    let lcores = if main_cpu < cpu {
        format!("{main_cpu},{cpu}")
    } else {
        format!("{cpu},{main_cpu}")
    };
    let mut a: Vec<String> = [
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-telemetry",
        "--no-shconf",
    ]
    .map(String::from)
    .to_vec();
    a.extend([
        format!("--file-prefix={prefix}"),
        "-l".into(),
        lcores,
        format!("--main-lcore={main_cpu}"),
        "--vdev".into(),
        format!("net_null0,copy=1,size={size}"),
        "--vdev".into(),
        format!("net_null1,copy=1,size={size}"),
        "--".into(),
        "--forward-mode=mac".into(),
        "--nb-cores=1".into(),
        "--total-num-mbufs=16384".into(),
        format!("--txpkts={size}"),
        "--stats-period=1".into(),
    ]);
    // The default mbuf holds 2048 bytes of data.
    if size > 2048 {
        a.push(format!("--mbuf-size={}", size + 128));
    }
    a
}

/// Check that testpmd can be run at all.
pub fn check_installed(path: &Path) -> Result<()> {
    if !path.is_file() {
        bail!("{NOT_INSTALLED}");
    }
    Ok(())
}

/// The running child, killed and cleaned up whatever happens.
pub struct Guard {
    pub(crate) child: Child,
    pub(crate) dir: PathBuf,
}

impl Guard {
    pub(crate) fn signal(&self, sig: libc::c_int) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: kill has no memory preconditions; the pid is our own unreaped child, so it
        // cannot have been recycled for another process.
        unsafe {
            libc::kill(pid, sig);
        }
    }

    /// Wait up to `timeout` for the child to exit; true if it did.
    pub(crate) fn wait_for(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => return false,
                Err(_) => return false,
            }
        }
    }

    /// True once the child exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if self.dir.exists() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Progress of the run, shared with the stdout reader thread.
#[derive(Default)]
struct Live {
    /// Statistics periods measured so far.
    periods: AtomicU64,
    /// Their length in seconds (f64 bits).
    seconds: AtomicU64,
    /// Packets per second over them (both ports).
    pps: AtomicU64,
}

/// Keep at most the last `max` bytes of `s`, on a character boundary.
pub(crate) fn tail(s: &str, max: usize) -> &str {
    let mut at = s.len().saturating_sub(max);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// Start testpmd at `path` with the arguments `args(prefix)` makes for a fresh private
/// `--file-prefix`, stdout and stderr piped; it dies with this thread, and the guard removes
/// its runtime directory.
pub fn spawn(path: &Path, stdin: Stdio, args: impl FnOnce(&str) -> Vec<String>) -> Result<Guard> {
    let rt = runtime_dir();
    clean_stale(&rt);
    static RUN: AtomicU64 = AtomicU64::new(0);
    let prefix = format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    );
    let mut cmd = Command::new(path);
    cmd.args(args(&prefix))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // calls (prctl, getppid, _exit). PDEATHSIG kills testpmd if this thread dies first.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", path.display()))?;
    Ok(Guard {
        child,
        dir: rt.join(&prefix),
    })
}

/// Run testpmd once and measure its forwarding rate.
pub fn run(s: &TestpmdSettings) -> Result<TestpmdRun> {
    check_installed(&s.path)?;
    let main_cpu = sys::allowed_cpus()
        .into_iter()
        .find(|&c| c != s.cpu)
        .ok_or_else(|| {
            anyhow!(
                "testpmd needs a CPU besides {} for its main lcore; none is allowed",
                s.cpu
            )
        })?;
    let mut guard = spawn(&s.path, Stdio::null(), |prefix| {
        arguments(s.frame_size, s.cpu, main_cpu, prefix)
    })?;
    let stdout = guard
        .child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("testpmd's stdout is not a pipe"))?;
    let stderr = guard
        .child
        .stderr
        .take()
        .ok_or_else(|| anyhow!("testpmd's stderr is not a pipe"))?;
    let live = Arc::new(Live::default());
    let (started_tx, started_rx) = mpsc::channel::<Instant>();
    let live_r = live.clone();
    let (pid, cpu) = (guard.child.id(), s.cpu);
    let out_thread = std::thread::spawn(move || -> (String, Vec<Sample>) {
        let mut text = String::new();
        let mut samples = Vec::new();
        let mut schedstat = None;
        let mut parser = Parser::default();
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.contains("Port statistics ====") {
                let now = Instant::now();
                if schedstat.is_none() {
                    schedstat = worker_schedstat(pid, cpu);
                }
                samples.push(Sample {
                    at: now,
                    run_ns: schedstat.as_deref().and_then(run_ns),
                    cpus: sys::cpu_times(),
                });
                let _ = started_tx.send(now);
            }
            parser.feed(&line);
            if line.contains("Rx-pps:") {
                if let Ok(r) = rate(parser.parsed(), 2, 1) {
                    live_r.seconds.store(r.seconds.to_bits(), Ordering::Relaxed);
                    live_r.pps.store((r.mpps * 1e6) as u64, Ordering::Relaxed);
                    live_r.periods.store(r.periods as u64, Ordering::Relaxed);
                }
            }
            text.push_str(&line);
        }
        (text, samples)
    });
    let err_thread = std::thread::spawn(move || -> String {
        let mut buf = Vec::new();
        let _ = BufReader::new(stderr).read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    });
    let fail = |guard: Guard, what: String, err_thread: std::thread::JoinHandle<String>| {
        drop(guard);
        let err = err_thread.join().unwrap_or_default();
        anyhow!("{what}; testpmd said:\n{}", tail(&err, 2000))
    };

    // Wait for the first statistics block: forwarding has started.
    let t_spawn = Instant::now();
    let first = loop {
        match started_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(t) => break t,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if guard.exited() {
                    return Err(fail(
                        guard,
                        "testpmd exited before forwarding".into(),
                        err_thread,
                    ));
                }
                if t_spawn.elapsed() > START_TIMEOUT {
                    return Err(fail(
                        guard,
                        format!("testpmd did not start forwarding within {START_TIMEOUT:?}"),
                        err_thread,
                    ));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(fail(guard, "testpmd closed its output".into(), err_thread));
            }
        }
    };
    // testpmd prints statistics every `--stats-period` seconds rounded up to its 1 s sleep, so
    // periods last 1 or 2 s: stop once the measured periods cover the requested time (or give
    // up waiting for them a few seconds later and use what there is).
    let give_up = first + Duration::from_secs_f64(s.seconds + 5.0);
    let tty = std::io::stderr().is_terminal();
    let mut shown = 0u64;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if guard.exited() {
            return Err(fail(
                guard,
                "testpmd exited during the run".into(),
                err_thread,
            ));
        }
        let measured = f64::from_bits(live.seconds.load(Ordering::Relaxed));
        if measured >= s.seconds * 0.98 || Instant::now() >= give_up {
            break;
        }
        let periods = live.periods.load(Ordering::Relaxed);
        if s.progress && periods > 0 && periods != shown {
            shown = periods;
            let line = format!(
                "{}: {:.1} s, {:.2} Mpps",
                s.label,
                measured,
                live.pps.load(Ordering::Relaxed) as f64 / 1e6
            );
            let mut err = std::io::stderr().lock();
            let _ = if tty {
                write!(err, "\r\x1b[K{line}")
            } else {
                writeln!(err, "{line}")
            };
            let _ = err.flush();
        }
    }
    if s.progress && tty && shown > 0 {
        let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
    }
    guard.signal(libc::SIGINT);
    if !guard.wait_for(EXIT_TIMEOUT) {
        guard.signal(libc::SIGKILL);
        let _ = guard.wait_for(EXIT_TIMEOUT);
    }
    drop(guard);
    let (text, samples) = out_thread
        .join()
        .map_err(|_| anyhow!("testpmd's output reader panicked"))?;
    let err = err_thread.join().unwrap_or_default();
    let parsed = parse(&text);
    let mut r = rate(&parsed, 2, s.tsc_hz)
        .map_err(|e| anyhow!("{e}; testpmd said:\n{}", tail(&err, 2000)))?;
    r.worker_cpu_share = cpu_share(&parsed, 2, &samples);
    r.on_cpu_cycles_per_packet = r.worker_cpu_share.map(|f| f * r.cycles_per_packet);
    r.others_busy = measured_span(&parsed, 2, &samples)
        .and_then(|(a, b)| sys::others_busy(&a.cpus, &b.cpus, s.cpu));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../tests/fixtures/testpmd_mac_64.txt");

    #[test]
    fn parses_captured_output() {
        let p = parse(SAMPLE);
        assert!(p.blocks.len() >= 3, "{p:?}");
        assert!(p.blocks.iter().all(|b| b.is_complete(2)));
        assert_eq!(p.blocks[0].rx_pps, 0);
        assert!(p.blocks[1].rx_pps > 1_000_000);
        assert!(p.accumulated_rx.is_some());
        assert_eq!(p.accumulated_rx, p.accumulated_tx);
        let r = rate(&p, 2, 2_596_000_000).expect("rate");
        assert_eq!(r.periods, p.blocks.len() - 1);
        assert!(r.mpps > 1.0 && r.mpps < 200.0, "{r:?}");
        let pps = r.mpps * 1e6;
        assert!((r.cycles_per_packet - 2_596_000_000.0 / pps).abs() < 1e-6);
        // testpmd's periods last one or two seconds by its own clock (its loop sleeps 1 s and
        // prints when at least `--stats-period` has passed).
        let period = r.seconds / r.periods as f64;
        assert!((0.95..2.1).contains(&period), "{r:?}");
    }

    #[test]
    fn interactive_port_stats_make_one_block_per_show() {
        let show = |rx: u64, pps: u64| {
            format!(
                "  ######################## NIC statistics for port 0  ########\n  RX-packets: {rx} RX-missed: 0\n  Rx-pps: {pps} Rx-bps: 0\n\
                 ######################## NIC statistics for port 1  ########\n  RX-packets: {rx} RX-missed: 0\n  Rx-pps: {pps} Rx-bps: 0\n"
            )
        };
        let text = format!("{}{}{}", show(10, 0), show(110, 100), show(310, 200));
        let p = parse(&text);
        assert_eq!(p.blocks.len(), 3, "{p:?}");
        assert!(p.blocks.iter().all(|b| b.is_complete(2)));
        let r = rate(&p, 2, 1000).expect("rate");
        assert_eq!(r.packets, 600);
        // The periodic format (a "Port statistics" line before port 0) is unchanged.
        assert_eq!(
            parse(SAMPLE).blocks.len(),
            SAMPLE.matches("Port statistics ====").count()
        );
    }

    #[test]
    fn rate_needs_two_complete_blocks() {
        let text = "Port statistics ====\n  RX-packets: 10 RX-missed: 0\n  Rx-pps: 0 Rx-bps: 0\n";
        assert!(rate(&parse(text), 1, 1000).is_err());
        let two = format!("{text}Port statistics ====\n  RX-packets: 110\n  Rx-pps: 100\n");
        let r = rate(&parse(&two), 1, 1000).expect("rate");
        assert_eq!(r.packets, 100);
        assert!((r.seconds - 1.0).abs() < 1e-9);
        assert!((r.cycles_per_packet - 10.0).abs() < 1e-9);
        // A block cut short by exit is ignored.
        let cut = format!("{two}Port statistics ====\n  RX-packets: 500\n");
        assert_eq!(rate(&parse(&cut), 1, 1000).expect("rate").packets, 100);
    }

    #[test]
    fn arguments_pin_forwarding_to_the_worker_cpu() {
        let a = arguments(64, 1, 0, "p").join(" ");
        assert!(a.contains("-l 0,1 --main-lcore=0"), "{a}");
        assert!(a.contains("net_null0,copy=1,size=60"));
        assert!(a.contains("--txpkts=60"));
        assert!(a.contains("--file-prefix=p"));
        let b = arguments(1518, 0, 1, "p").join(" ");
        assert!(b.contains("-l 0,1 --main-lcore=1"), "{b}");
        assert!(!b.contains("mbuf-size"));
        assert!(arguments(9000, 1, 0, "p")
            .join(" ")
            .contains("--mbuf-size=9124"));
    }

    #[test]
    fn cpu_share_spans_the_complete_blocks() {
        let text = "Port statistics ====\n  RX-packets: 1\n  Rx-pps: 0\n\
                    Port statistics ====\n  RX-packets: 101\n  Rx-pps: 100\n\
                    Port statistics ====\n  RX-packets: 500\n";
        let p = parse(text);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sample = |ms: u64, run_ns: Option<u64>| Sample {
            at: at(ms),
            run_ns,
            cpus: sys::CpuTimes::default(),
        };
        let samples = [
            sample(0, Some(0)),
            sample(1000, Some(800_000_000)),
            sample(1500, Some(900_000_000)),
        ];
        let share = cpu_share(&p, 1, &samples).expect("share");
        assert!((share - 0.8).abs() < 1e-9, "{share}");
        assert_eq!(
            cpu_share(&p, 1, &[sample(0, None), sample(1000, None)]),
            None
        );
    }

    #[test]
    fn missing_binary_is_reported_plainly() {
        let e = check_installed(Path::new("/nonexistent/dpdk-testpmd")).expect_err("missing");
        assert_eq!(e.to_string(), NOT_INSTALLED);
    }
}

//! `vecplane demo`: builds namespaces A - R - B (netlab) with this vecplane binary in R as an
//! IPv4/IPv6 router, sends a bounded burst of real traffic from A to B (pings over IPv4 and
//! IPv6, an iperf3 TCP transfer, an iperf3 UDP flood at a bounded rate), prints per-port rates
//! once a second from the control socket, then `show runtime`, and deletes everything, also on
//! Ctrl-C and on any error. It owns only the topology it builds and the processes it starts
//! there; it never sends traffic anywhere but to the hosts it created. `vecplane demo --fleet`
//! runs the load-balancer fleet demo of `demo_fleet` instead, `vecplane demo --vms` the two QEMU
//! guests of `demo_vms`.

use anyhow::{bail, Context, Result};
use netlab::{
    unsupported_feature, Addressing, Driver, Forwarding, Host, Mode, Topology, Unsupported,
    Vecplane, VecplaneConfig,
};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The port driver the demo asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoDriver {
    /// AF_XDP sockets on Ra and Rb (falls back to af-packet, with a notice, when this build
    /// does not accept or cannot start it).
    AfXdp,
    /// AF_PACKET sockets on Ra and Rb.
    AfPacket,
}

/// Arguments of `vecplane demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Seconds of the TCP transfer and, again, of the UDP flood (each bounded by this; default
    /// 5); with --fleet, seconds of the HTTP load (a whole number from 10 to 300; default 20);
    /// with --vms, seconds of the guests' TCP transfer (rounded up; default 5).
    #[arg(long, value_parser = parse_seconds)]
    seconds: Option<f64>,
    /// Port driver of vecplane's two ports.
    #[arg(long, value_enum, default_value_t = DemoDriver::AfXdp, conflicts_with_all = ["fleet", "vms"])]
    driver: DemoDriver,
    /// Rate of the UDP flood (iperf3 `-b`, bits per second with K/M/G suffixes).
    #[arg(long, default_value = "200M", conflicts_with_all = ["fleet", "vms"])]
    udp_rate: String,
    /// Do not print the per-second port rates (with --fleet: the per-second LB rates).
    #[arg(long)]
    no_progress: bool,
    /// The load-balancer fleet instead: a client, a BIRD router with ECMP, three vecplane load
    /// balancers and three nginx servers (L3DSR), under HTTP load through a SIGKILL, a restart
    /// and a rolling upgrade (needs bird2, nginx-light, wrk, nftables, curl).
    #[arg(long)]
    fleet: bool,
    /// Two QEMU guests (TCG) on vhost-user ports of a vecplane learning bridge: pings over IPv4
    /// and IPv6 and an iperf3 TCP transfer between them (needs qemu-system-x86,
    /// linux-image-amd64, busybox-static, iperf3, xz-utils, cpio, file).
    #[arg(long, conflicts_with = "fleet")]
    vms: bool,
}

impl DemoArgs {
    /// Seconds of each iperf3 run.
    fn seconds(&self) -> f64 {
        self.seconds.unwrap_or(5.0)
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (1.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}`: accepted: a number of seconds from 1 to 3600"
        )),
    }
}

/// Namespace-name prefix of the demo's topologies.
const PREFIX: &str = "vdm";

/// The tools the demo runs.
const TOOLS: &[&str] = &["ip", "ethtool", "ping", "iperf3"];

/// `vecplane demo`.
pub fn main(args: DemoArgs) -> Result<ExitCode> {
    if args.fleet {
        return crate::demo_fleet::main(args.seconds, !args.no_progress);
    }
    if args.vms {
        return crate::demo_vms::main(args.seconds(), !args.no_progress);
    }
    if let Some(why) = netlab::missing_prerequisite(TOOLS) {
        bail!(
            "cannot run the demo: {why}; it needs root and {} (Debian: apt-get install iproute2 \
             iputils-ping iperf3 ethtool), or run scripts/demo.sh",
            TOOLS.join(", ")
        );
    }
    let exe = std::env::current_exe().context("cannot find this vecplane binary")?;
    netlab::install_cleanup_handlers()?;
    println!("== building namespaces A, R and B (veth pairs A0-Ra, Rb-B0)");
    let topo = Topology::build_with_prefix(PREFIX, Mode::Dataplane(Addressing::Routed))?;
    let n = topo.names();
    println!(
        "   A  {}: {} {}/24, {}/64 via {}",
        n.ns_a,
        n.a0,
        topo.a_ip4(),
        topo.a_ip6(),
        netlab::addr::RA4
    );
    println!(
        "   B  {}: {} {}/24, {}/64 via {}",
        n.ns_b,
        n.b0,
        topo.b_ip4(),
        topo.b_ip6(),
        netlab::addr::RB4
    );
    println!("   R  {}: {} and {} owned by vecplane", n.ns_r, n.ra, n.rb);
    let result = run_demo(&topo, &exe, &args);
    let deleted = topo.delete();
    println!("== deleted the namespaces, veths and scratch files");
    let ok = result?;
    deleted?;
    if ok {
        println!("demo: traffic got through vecplane in both address families");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("vecplane demo: some traffic did not get through (see above)");
        Ok(ExitCode::FAILURE)
    }
}

/// The CPU of the worker: the last CPU when there are at least two (the traffic tools keep the
/// others), otherwise not pinned.
fn worker_cpu() -> Option<usize> {
    let cpus = bench::sys::allowed_cpus();
    if cpus.len() >= 2 {
        cpus.last().copied()
    } else {
        None
    }
}

/// Write the config and start vecplane, falling back from af-xdp to af-packet with a notice.
fn start(topo: &Topology, exe: &std::path::Path, args: &DemoArgs) -> Result<Vecplane> {
    let mut cfg = VecplaneConfig {
        driver: match args.driver {
            DemoDriver::AfXdp => Driver::AF_XDP,
            DemoDriver::AfPacket => Driver::AfPacket,
        },
        forwarding: Forwarding::Router,
        worker_cpu: worker_cpu(),
        buffers: None,
    };
    let attempt = |cfg: &VecplaneConfig| -> Result<Vecplane> {
        let path: PathBuf = topo.write_vecplane_config(cfg)?;
        topo.start_vecplane(exe, &path)
    };
    let v = match attempt(&cfg) {
        Ok(v) => v,
        Err(e) if cfg.driver != Driver::AfPacket => {
            let why = match e.downcast_ref::<control::ConfigError>() {
                Some(c) if unsupported_feature(c) == Some(Unsupported::Driver) => {
                    "this build of vecplane does not accept driver = \"af-xdp\" yet".to_string()
                }
                _ => format!("af-xdp did not start: {e:#}"),
            };
            println!("notice: {why}; falling back to driver = \"af-packet\"");
            cfg.driver = Driver::AfPacket;
            attempt(&cfg)?
        }
        Err(e) => return Err(e),
    };
    println!(
        "== vecplane run in R: router, driver = \"{}\", worker {}; control socket {}",
        cfg.driver.name(),
        cfg.worker_cpu
            .map(|c| format!("on CPU {c}"))
            .unwrap_or_else(|| "not pinned".to_string()),
        v.socket().display()
    );
    Ok(v)
}

fn run_demo(topo: &Topology, exe: &std::path::Path, args: &DemoArgs) -> Result<bool> {
    let mut vp = start(topo, exe, args)?;
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = if args.no_progress {
        None
    } else {
        let socket = vp.socket().to_path_buf();
        let stop = stop.clone();
        Some(std::thread::spawn(move || monitor(&socket, &stop)))
    };
    let outcome = traffic(topo, args);
    stop.store(true, Ordering::SeqCst);
    if let Some(m) = monitor {
        let _ = m.join();
    }
    let still_running = vp.check_running();
    let runtime = vp.runtime_text();
    let interfaces = vp.request("show interfaces", false);
    match (&runtime, &interfaces) {
        (Ok(rt), Ok(ifs)) => {
            println!("== vecplane ctl show interfaces");
            print!("{}", ifs.text.as_deref().unwrap_or(""));
            println!("== vecplane ctl show runtime");
            print!("{rt}");
        }
        (Err(e), _) | (_, Err(e)) => println!("cannot read vecplane's counters: {e:#}"),
    }
    let stopped = vp.stop();
    let checks = outcome?;
    still_running?;
    stopped?;
    Ok(print_results(&checks))
}

/// Print the checks under `== results`; whether all passed.
pub(crate) fn print_results(checks: &[Check]) -> bool {
    let mut ok = true;
    println!("== results");
    for (what, passed, detail) in checks {
        println!(
            "   {:<5} {what}: {detail}",
            if *passed { "ok" } else { "FAIL" }
        );
        ok &= passed;
    }
    ok
}

/// One check: what, whether it passed, the figures.
pub(crate) type Check = (String, bool, String);

fn traffic(topo: &Topology, args: &DemoArgs) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for target in [topo.b_ip4().to_string(), topo.b_ip6().to_string()] {
        println!("== ping {target} from A (5 echo requests)");
        checks.push(ping(topo, &target)?);
    }
    let server = topo.spawn(
        Host::B,
        &["iperf3", "-s", "-B", &topo.b_ip4().to_string()],
        "iperf3-server",
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let secs = format!("{}", args.seconds().ceil() as u64);
    let b4 = topo.b_ip4().to_string();
    println!("== iperf3 TCP, {secs} s, A -> {b4}");
    let tcp = iperf3(topo, &["-c", &b4, "-t", &secs], args.seconds())?;
    checks.push(tcp_check(&tcp));
    println!(
        "== iperf3 UDP at {} bit/s, {secs} s, 1200-byte datagrams, A -> {b4}",
        args.udp_rate
    );
    let udp = iperf3(
        topo,
        &[
            "-c",
            &b4,
            "-u",
            "-b",
            &args.udp_rate,
            "-l",
            "1200",
            "-t",
            &secs,
        ],
        args.seconds(),
    )?;
    checks.push(udp_check(&udp));
    drop(server);
    Ok(checks)
}

fn ping(topo: &Topology, target: &str) -> Result<Check> {
    let out = topo.exec_timeout(
        Host::A,
        &[
            "ping", "-n", "-c", "5", "-i", "0.2", "-W", "1", "-w", "5", target,
        ],
        Duration::from_secs(20),
    )?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = text
        .lines()
        .filter(|l| l.contains("packets transmitted") || l.starts_with("rtt"))
        .collect::<Vec<_>>()
        .join("; ");
    let received = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .and_then(|l| l.split(',').nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(0);
    println!("   {summary}");
    Ok((
        format!("ping {target}"),
        received > 0,
        format!("{received}/5 replies"),
    ))
}

/// Run an iperf3 client in A (JSON output, bounded) and return its JSON.
fn iperf3(topo: &Topology, client_args: &[&str], seconds: f64) -> Result<Value> {
    let mut argv = vec!["iperf3", "-J", "--connect-timeout", "3000"];
    argv.extend_from_slice(client_args);
    let timeout = Duration::from_secs_f64(seconds + 20.0);
    // The server may still be starting: try again on a refused connection, a few times.
    for attempt in 0..5 {
        let out = topo.exec_timeout(Host::A, &argv, timeout)?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(&text)
            .with_context(|| format!("iperf3 printed no JSON: {}", text.trim()))?;
        if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
            if err.contains("refused") && attempt < 4 {
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            println!("   iperf3: {err}");
        }
        return Ok(v);
    }
    bail!("iperf3 could not connect")
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(x) => cur = x,
            None => return 0.0,
        }
    }
    cur.as_f64().unwrap_or(0.0)
}

fn tcp_check(v: &Value) -> Check {
    let bytes = num(v, &["end", "sum_received", "bytes"]);
    let bps = num(v, &["end", "sum_received", "bits_per_second"]);
    let retr = num(v, &["end", "sum_sent", "retransmits"]);
    let detail = format!(
        "{:.1} MB received at {:.0} Mbit/s, {retr:.0} retransmits",
        bytes / 1e6,
        bps / 1e6
    );
    println!("   {detail}");
    ("iperf3 TCP".to_string(), bytes > 0.0, detail)
}

fn udp_check(v: &Value) -> Check {
    let packets = num(v, &["end", "sum", "packets"]);
    let lost = num(v, &["end", "sum", "lost_packets"]);
    let bps = num(v, &["end", "sum", "bits_per_second"]);
    let received = (packets - lost).max(0.0);
    let detail = format!(
        "{received:.0} of {packets:.0} datagrams received ({:.2}% lost), {:.0} Mbit/s sent",
        if packets > 0.0 {
            100.0 * lost / packets
        } else {
            0.0
        },
        bps / 1e6
    );
    println!("   {detail}");
    ("iperf3 UDP".to_string(), received > 0.0, detail)
}

/// Print per-port rates once a second until `stop`.
pub(crate) fn monitor(socket: &std::path::Path, stop: &AtomicBool) {
    let read = || -> Option<Vec<netlab::PortCounters>> {
        let r = control::request(socket, "show interfaces", true).ok()?;
        netlab::vecplane::parse_interfaces(r.data.as_ref()?).ok()
    };
    let start = Instant::now();
    let mut prev = read().map(|p| (Instant::now(), p));
    while !stop.load(Ordering::SeqCst) {
        // Sleep in small steps so the end of the traffic is not delayed by a second.
        let tick = Instant::now();
        while tick.elapsed() < Duration::from_secs(1) && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Some(now) = read() else { continue };
        let t = Instant::now();
        if let Some((t0, before)) = &prev {
            let dt = t.duration_since(*t0).as_secs_f64().max(1e-3);
            let parts: Vec<String> = now
                .iter()
                .map(|p| {
                    let b = before.iter().find(|x| x.name == p.name);
                    let d = |f: fn(&netlab::PortCounters) -> u64| {
                        b.map(|b| f(p).saturating_sub(f(b))).unwrap_or(0) as f64 / dt
                    };
                    format!(
                        "{} rx {} tx {} drops {}",
                        p.name,
                        rate(d(|c| c.rx_packets), d(|c| c.rx_bytes)),
                        rate(d(|c| c.tx_packets), d(|c| c.tx_bytes)),
                        (p.rx_drops + p.tx_drops)
                    )
                })
                .collect();
            println!(
                "   [{:>3.0} s] {}",
                start.elapsed().as_secs_f64(),
                parts.join(" | ")
            );
        }
        prev = Some((t, now));
    }
}

fn rate(pps: f64, bytes_per_s: f64) -> String {
    format!(
        "{:>7.1} kpps {:>7.1} Mbit/s",
        pps / 1e3,
        bytes_per_s * 8.0 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_bounded() {
        assert!(parse_seconds("3").is_ok());
        assert!(parse_seconds("0.5").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("100000").is_err());
    }

    #[test]
    fn iperf3_json_is_read() {
        let tcp: Value = serde_json::from_str(
            r#"{"end":{"sum_sent":{"retransmits":3},"sum_received":{"bytes":1000000,
            "bits_per_second":8e8}}}"#,
        )
        .expect("json");
        let (_, ok, detail) = tcp_check(&tcp);
        assert!(ok, "{detail}");
        let udp: Value = serde_json::from_str(
            r#"{"end":{"sum":{"packets":100,"lost_packets":100,"bits_per_second":1e6}}}"#,
        )
        .expect("json");
        let (_, ok, _) = udp_check(&udp);
        assert!(!ok);
        let (_, ok, _) = tcp_check(&serde_json::json!({"error": "x"}));
        assert!(!ok);
    }
}

//! `vecplane demo --fleet`: the load-balancer fleet of issue 11 in network namespaces (netlab's
//! `LbFleet`): a client, a router whose BIRD installs an ECMP route (L4 hash) to the VIP, three
//! load balancers running this vecplane binary (each announcing the VIP through its own BIRD
//! while its HTTP health checks see a server up) and three nginx servers answering by L3DSR.
//! Under a bounded wrk load of new connections it prints, once a second, every LB's VIP packet
//! rate and the router's next hops, and tells a story with a line per step: SIGKILL of LB 1
//! (the router drops it), its restart (it announces again), a rolling upgrade of LB 0 (drain,
//! ready to stop, SIGTERM, start, announced). At the end: wrk's result, the VIP packets of each
//! LB during the load and `show bgp` of each LB; the exit code is 0 when wrk saw no failed
//! request. Everything is deleted at the end, on an error and on Ctrl-C. Traffic goes only from
//! the fleet's client to its own VIP (198.18.0.0/15), bounded by `--seconds`.

use anyhow::{bail, Context, Result};
use netlab::lb_fleet::addr;
use netlab::{FleetSpec, LbFleet, LoadResult, WrkSpec};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Name prefix of the fleet's namespaces (leftovers of dead runs with it are deleted).
const PREFIX: &str = "vdf";
/// Load balancers.
const LBS: usize = 3;
/// Server weights (three servers).
const WEIGHTS: [u32; 3] = [1, 1, 1];
/// Seconds of load without `--seconds`, and what `--seconds` accepts with `--fleet`.
const DEFAULT_SECONDS: u32 = 20;
const MIN_SECONDS: u32 = 10;
const MAX_SECONDS: u32 = 300;
/// How long the router may take to follow an announcement or a withdrawal.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a drained LB may take to become ready to stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// wrk: connections, threads and the seconds before it counts a request as timed out.
const CONNECTIONS: u32 = 16;
const THREADS: u32 = 2;
const WRK_TIMEOUT_SECONDS: u32 = 5;
/// What to install when a tool is missing.
const INSTALL: &str = "Debian: apt-get install bird2 nginx-light wrk nftables iproute2 curl";

/// The seconds of load: `--seconds` (a whole number from 10 to 300) or 20.
pub fn fleet_seconds(seconds: Option<f64>) -> Result<u32> {
    let Some(s) = seconds else {
        return Ok(DEFAULT_SECONDS);
    };
    if s.fract() == 0.0 && (f64::from(MIN_SECONDS)..=f64::from(MAX_SECONDS)).contains(&s) {
        // A whole number from 10 to 300: exact.
        return Ok(s as u32);
    }
    bail!(
        "--seconds {s}: with --fleet, accepted: a whole number of seconds from {MIN_SECONDS} to \
         {MAX_SECONDS}"
    )
}

/// `vecplane demo --fleet`.
pub fn main(seconds: Option<f64>, progress: bool) -> Result<ExitCode> {
    let seconds = fleet_seconds(seconds)?;
    let mut tools = netlab::FLEET_TOOLS.to_vec();
    tools.push("wrk");
    if let Some(why) = netlab::missing_prerequisite(&tools) {
        bail!(
            "cannot run the fleet demo: {why}; it needs root and {} ({INSTALL})",
            tools.join(", ")
        );
    }
    let exe = std::env::current_exe().context("cannot find this vecplane binary")?;
    netlab::install_cleanup_handlers()?;
    println!(
        "== building the fleet: a client, a router (BIRD, ECMP by L4 hash), {LBS} load \
         balancers (vecplane + BIRD), {} nginx servers (L3DSR)",
        WEIGHTS.len()
    );
    let fleet = LbFleet::build(&spec())?;
    describe(&fleet);
    let mut fleet = fleet;
    let result = run_demo(&mut fleet, &exe, seconds, progress);
    let deleted = fleet.delete();
    println!("== deleted the namespaces, veths, bridges, processes and scratch files");
    let ok = result?;
    deleted?;
    if ok {
        println!("demo: no request failed across the SIGKILL, the restart and the rolling upgrade");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("vecplane demo --fleet: wrk saw failed requests (see above)");
        Ok(ExitCode::FAILURE)
    }
}

/// The VIP's prefix in the router's table.
fn vip_prefix() -> String {
    format!("{}/32", addr::VIP4)
}

/// Three LBs, three servers, HTTP health checks every 500 ms and a one-second drain quiet time.
fn spec() -> FleetSpec {
    FleetSpec {
        prefix: PREFIX.to_string(),
        bgp_keys: "drain-quiet-ms = 1000\ndrain-timeout-ms = 15000\n".to_string(),
        extra_toml: format!(
            "[[lb.health-check]]\nvip = \"{} protocol tcp port 80\"\ntype = \"http\"\n\
             interval-ms = 500\ntimeout-ms = 300\nrise = 2\nfall = 2\n",
            vip_prefix()
        ),
        ..FleetSpec::new(LBS, &WEIGHTS)
    }
}

fn describe(f: &LbFleet) {
    let n = f.names();
    println!(
        "   client  {}: {} -> {}",
        n.ns_client,
        netlab::lb::addr::CLIENT4,
        f.vip().url()
    );
    println!(
        "   router  {}: BIRD AS {}, route to {} by ECMP over the LBs' uplinks",
        n.ns_router,
        addr::ROUTER_AS,
        vip_prefix()
    );
    for i in 0..f.lb_count() {
        println!(
            "   LB {i}    {}: vecplane up {} down {}, BIRD AS {} (eBGP from {})",
            n.ns_lbs[i],
            addr::lb_up4(i),
            addr::lb_down4(i),
            addr::lb_as(i),
            addr::lb_mgmt4(i)
        );
    }
    for s in f.servers() {
        println!(
            "   {}      {}: nginx {} (VIP {} on lo, L3DSR dscp {})",
            s.name,
            s.ns,
            s.ip4,
            addr::VIP4,
            addr::VIP_DSCP
        );
    }
}

/// Sets the flag when dropped: the progress thread ends on every way out.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn run_demo(f: &mut LbFleet, exe: &Path, seconds: u32, progress: bool) -> Result<bool> {
    println!(
        "== starting vecplane in the {LBS} LBs (HTTP health checks every 500 ms, timeout 300 ms, \
         rise 2, fall 2; drain-quiet-ms = 1000)"
    );
    let t0 = Instant::now();
    for i in 0..LBS {
        f.start_lb(i, exe)?;
        let v = f.lb(i).context("vecplane just started")?;
        println!(
            "   LB {i}: vecplane pid {}, control socket {}",
            v.pid(),
            v.socket().display()
        );
    }
    let all: Vec<usize> = (0..LBS).collect();
    let took = wait_route(f, &all)?;
    println!(
        "== the router's next hops for {}: {} ({:.1} s after the first start, {} ms after the \
         last)",
        vip_prefix(),
        hops_long(&f.router_nexthops(&vip_prefix())?),
        t0.elapsed().as_secs_f64(),
        took.as_millis()
    );
    let sockets: Vec<PathBuf> = (0..LBS)
        .map(|i| {
            f.lb(i)
                .map(|v| v.socket().to_path_buf())
                .with_context(|| format!("LB {i} is not running"))
        })
        .collect::<Result<_>>()?;

    let wrk = WrkSpec {
        seconds,
        connections: CONNECTIONS,
        threads: THREADS,
        new_connection_per_request: true,
        timeout_seconds: WRK_TIMEOUT_SECONDS,
    };
    let job = f.wrk_job(&wrk)?;
    println!(
        "== wrk from the client for {seconds} s: {CONNECTIONS} connections, a new connection per \
         request, {} (per second: VIP packets/s of each LB, `-` when it is not running, and the \
         router's next hops)",
        f.vip().url()
    );
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let start = Instant::now();
    let progress_thread = {
        let stop = stop.0.clone();
        let router_ns = f.router_ns().to_string();
        std::thread::spawn(move || watch(&sockets, &router_ns, &stop, start, progress))
    };
    let load = std::thread::spawn(move || job.run());
    story(f, exe, start, seconds)?;
    let result = load
        .join()
        .map_err(|_| anyhow::anyhow!("the wrk thread panicked"))?
        .context("wrk")?;
    stop.0.store(true, Ordering::SeqCst);
    let totals = progress_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the progress thread panicked"))?;
    Ok(report(f, &result, &totals))
}

/// The scripted story, each step at its share of the load's time (or right after the step
/// before, if that one ran late).
fn story(f: &mut LbFleet, exe: &Path, start: Instant, seconds: u32) -> Result<()> {
    let at = |share: f64| start + Duration::from_secs_f64(f64::from(seconds) * share);
    let say = |what: String| println!(">> [{:>5.1} s] {what}", start.elapsed().as_secs_f64());
    let others: Vec<usize> = (0..LBS).filter(|&j| j != 1).collect();
    let all: Vec<usize> = (0..LBS).collect();

    // A crash: SIGKILL of LB 1. Its liveness device goes with the process, its BIRD withdraws.
    sleep_until(at(0.25));
    let pid = f.lb(1).context("LB 1 is not running")?.pid();
    let pid_t = libc::pid_t::try_from(pid).context("process id out of range")?;
    say(format!("SIGKILL LB 1 (vecplane pid {pid})"));
    let killed = Instant::now();
    // SAFETY: kill() on the id of our own child (LbFleet started it and has not reaped it:
    // kill_lb below does), so the id cannot name another process.
    if unsafe { libc::kill(pid_t, libc::SIGKILL) } != 0 {
        bail!(
            "cannot SIGKILL LB 1 (pid {pid}): {}",
            std::io::Error::last_os_error()
        );
    }
    wait_route(f, &others).context("after the SIGKILL of LB 1")?;
    say(format!(
        "the router dropped LB 1 {} ms after the SIGKILL: next hops {}",
        killed.elapsed().as_millis(),
        hops_short(&uplinks(&others))
    ));
    f.kill_lb(1).context("reap LB 1")?;

    // Its restart.
    sleep_until(at(0.40));
    say("restarting LB 1".to_string());
    let t = Instant::now();
    f.start_lb(1, exe).context("restart LB 1")?;
    let answered = t.elapsed();
    wait_route(f, &all).context("LB 1 announces again")?;
    say(format!(
        "LB 1 answers on its control socket after {} ms and announces again after {} ms: next \
         hops {}",
        answered.as_millis(),
        t.elapsed().as_millis(),
        hops_short(&uplinks(&all))
    ));

    // A rolling upgrade of LB 0: drain, wait until ready, SIGTERM, start, announced.
    sleep_until(at(0.60));
    let upgrade = Instant::now();
    let others: Vec<usize> = (0..LBS).filter(|&j| j != 0).collect();
    let reply = show(f, 0, "drain")?;
    let phase = reply["phase"].as_str().unwrap_or("?");
    say(format!("rolling upgrade of LB 0: drain (phase {phase})"));
    wait_route(f, &others).context("the drained LB 0 is withdrawn")?;
    say(format!(
        "LB 0 withdrawn: the router's next hops are {} after {} ms",
        hops_short(&uplinks(&others)),
        upgrade.elapsed().as_millis()
    ));
    let detail = wait_ready(f, 0)?;
    say(format!(
        "LB 0 ready to stop after {} ms ({detail})",
        upgrade.elapsed().as_millis()
    ));
    let t = Instant::now();
    f.stop_lb(0).context("SIGTERM of the drained LB 0")?;
    say(format!(
        "LB 0 stopped by SIGTERM in {} ms (clean exit)",
        t.elapsed().as_millis()
    ));
    let t = Instant::now();
    f.start_lb(0, exe).context("start the new LB 0")?;
    let answered = t.elapsed();
    wait_route(f, &all).context("the new LB 0 announces")?;
    say(format!(
        "new LB 0 answers after {} ms and announces after {} ms: next hops {}; rolling upgrade \
         done in {:.1} s",
        answered.as_millis(),
        t.elapsed().as_millis(),
        hops_short(&uplinks(&all)),
        upgrade.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// The uplinks of `lbs`, sorted (the router's next hops when exactly they announce).
fn uplinks(lbs: &[usize]) -> Vec<Ipv4Addr> {
    let mut v: Vec<Ipv4Addr> = lbs.iter().map(|&i| addr::lb_up4(i)).collect();
    v.sort();
    v
}

/// Wait until the router's next hops for the VIP are exactly the uplinks of `lbs`.
fn wait_route(f: &LbFleet, lbs: &[usize]) -> Result<Duration> {
    let t = Instant::now();
    f.wait_nexthops(&vip_prefix(), &uplinks(lbs), ROUTE_TIMEOUT)?;
    Ok(t.elapsed())
}

/// `command` on LB `i` as JSON.
fn show(f: &LbFleet, i: usize, command: &str) -> Result<Value> {
    let v = f.lb(i).with_context(|| format!("LB {i} is not running"))?;
    Ok(v.request(command, true)?.data.unwrap_or(Value::Null))
}

/// Poll `show bgp` of LB `i` until it says `ready_to_stop`; its detail.
fn wait_ready(f: &LbFleet, i: usize) -> Result<String> {
    let t = Instant::now();
    loop {
        let v = show(f, i, "show bgp")?;
        if v["ready_to_stop"] == true {
            return Ok(v["detail"].as_str().unwrap_or("").to_string());
        }
        if t.elapsed() > DRAIN_TIMEOUT {
            bail!(
                "LB {i} was not ready to stop {} s after its drain: {v}",
                DRAIN_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The LB whose uplink is `hop`.
fn lb_of(hop: Ipv4Addr) -> Option<usize> {
    (0..LBS).find(|&i| addr::lb_up4(i) == hop)
}

/// Next hops as `lb0 lb2` (an address that is no LB's uplink as itself).
fn hops_short(hops: &[Ipv4Addr]) -> String {
    if hops.is_empty() {
        return "(no route)".to_string();
    }
    hops.iter()
        .map(|&h| lb_of(h).map_or_else(|| h.to_string(), |i| format!("lb{i}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Next hops as `198.18.11.2 (lb0), ...`.
fn hops_long(hops: &[Ipv4Addr]) -> String {
    if hops.is_empty() {
        return "(no route)".to_string();
    }
    hops.iter()
        .map(|&h| match lb_of(h) {
            Some(i) => format!("{h} (lb{i})"),
            None => h.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The VIP packets LB behind `socket` sent to servers since it started (`show lb`
/// `vips[0].counters.packets`); None when it does not answer.
fn vip_packets(socket: &Path) -> Option<u64> {
    let r = control::request(socket, "show lb", true).ok()?;
    if !r.ok {
        return None;
    }
    r.data?["vips"][0]["counters"]["packets"].as_u64()
}

/// The router's next hops for the VIP (None when they cannot be read).
fn router_hops(router_ns: &str) -> Option<Vec<Ipv4Addr>> {
    netlab::lb_fleet::nexthops_in(router_ns, &vip_prefix(), Duration::from_secs(5)).ok()
}

/// Once a second until `stop`: print (when `print`) each LB's VIP packets/s and the router's
/// next hops. Returns each LB's VIP packets over the whole run, across restarts (a counter
/// that went back or an LB that came back counts from its new start).
fn watch(
    sockets: &[PathBuf],
    router_ns: &str,
    stop: &AtomicBool,
    start: Instant,
    print: bool,
) -> Vec<u64> {
    let mut totals = vec![0u64; sockets.len()];
    let mut prev: Vec<Option<u64>> = sockets.iter().map(|s| vip_packets(s)).collect();
    let mut t_prev = Instant::now();
    let mut tick = 1u64;
    loop {
        // Sleep in small steps so the end of the load is not delayed by a second.
        let next = start + Duration::from_secs(tick);
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let stopping = stop.load(Ordering::SeqCst);
        let now: Vec<Option<u64>> = sockets.iter().map(|s| vip_packets(s)).collect();
        let t = Instant::now();
        let dt = t.duration_since(t_prev).as_secs_f64().max(1e-3);
        let mut parts = Vec::new();
        for (i, (n, p)) in now.iter().zip(&prev).enumerate() {
            let delta = match (n, p) {
                (Some(n), Some(p)) if n >= p => Some(n - p),
                (Some(n), _) => Some(*n),
                (None, _) => None,
            };
            if let Some(d) = delta {
                totals[i] += d;
            }
            parts.push(match delta {
                Some(d) => format!("lb{i} {:>7.0} pkt/s", d as f64 / dt),
                None => format!("lb{i} {:>7} pkt/s", "-"),
            });
        }
        if stopping {
            return totals;
        }
        if print {
            let hops = router_hops(router_ns)
                .map(|h| hops_short(&h))
                .unwrap_or_else(|| "?".to_string());
            println!(
                "   [{:>3} s] {} | router -> {hops}",
                tick,
                parts.join(" | ")
            );
        }
        prev = now;
        t_prev = t;
        tick += 1;
    }
}

/// Print wrk's result, the per-LB totals and `show bgp` of each LB; true when no request failed.
fn report(f: &LbFleet, r: &LoadResult, totals: &[u64]) -> bool {
    let errors = if r.errors.is_empty() {
        "none".to_string()
    } else {
        r.errors
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let answers = r
        .per_server
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!("== wrk");
    println!(
        "   {} requests in {:.1} s ({:.0}/s), latency p50 {:.1} ms p99 {:.1} ms",
        r.requests,
        r.duration_us as f64 / 1e6,
        r.rate(),
        r.p50_us as f64 / 1e3,
        r.p99_us as f64 / 1e3
    );
    println!("   failed requests: {} ({errors})", r.failures());
    println!(
        "   answers by server: {}",
        if answers.is_empty() {
            "none".to_string()
        } else {
            answers
        }
    );
    let sum: u64 = totals.iter().sum();
    println!("== VIP packets each LB sent to the servers during the load (across restarts)");
    for (i, t) in totals.iter().enumerate() {
        let share = if sum == 0 {
            0.0
        } else {
            100.0 * *t as f64 / sum as f64
        };
        println!("   lb{i} {t:>9} ({share:.0}%)");
    }
    for i in 0..f.lb_count() {
        println!("== vecplane ctl show bgp (LB {i})");
        match f.lb(i).map(|v| v.request("show bgp", false)) {
            Some(Ok(reply)) => print!("{}", reply.text.as_deref().unwrap_or("")),
            Some(Err(e)) => println!("   cannot read it: {e:#}"),
            None => println!("   vecplane is not running"),
        }
    }
    if r.requests == 0 {
        println!("   wrk completed no request");
        return false;
    }
    r.failures() == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_whole_and_bounded() {
        assert_eq!(fleet_seconds(None).ok(), Some(20));
        assert_eq!(fleet_seconds(Some(10.0)).ok(), Some(10));
        assert_eq!(fleet_seconds(Some(300.0)).ok(), Some(300));
        for bad in [9.0, 301.0, 12.5, f64::NAN] {
            assert!(fleet_seconds(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn next_hops_are_named_by_lb() {
        let hops = [
            addr::lb_up4(0),
            addr::lb_up4(2),
            Ipv4Addr::new(192, 0, 2, 1),
        ];
        assert_eq!(hops_short(&hops), "lb0 lb2 192.0.2.1");
        assert_eq!(hops_short(&[]), "(no route)");
        assert_eq!(hops_long(&hops[..1]), format!("{} (lb0)", addr::lb_up4(0)));
    }

    #[test]
    fn the_spec_builds_three_lbs_with_health_checks_and_a_drain() {
        let s = spec();
        assert!(s.check().is_ok());
        assert_eq!(s.lbs, 3);
        assert!(s.bgp_keys.contains("drain-quiet-ms = 1000"));
        assert!(s.extra_toml.contains("interval-ms = 500"));
    }
}

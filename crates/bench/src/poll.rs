//! `vecplane bench --scenario poll`: adaptive against busy polling on the veth router (netlab's
//! A - R - B, R = `vecplane run`, one worker pinned to the forwarding CPU, AF_XDP when this build
//! can start it, else AF_PACKET). Each run starts the daemon with `poll-mode = "adaptive"` and
//! then with `"busy"`, interleaved: first its CPU use (user + system from /proc/PID/stat) over
//! 3 s with no traffic and the round trip of pings 50 ms apart; then, with the sink on B0, the
//! forwarding rate under `vecplane gen tx`'s load, as the veth scenarios measure it. It owns nothing but the report; the topology and processes are
//! `veth`'s and are deleted with it.

use crate::report;
use crate::veth::{self, PpsRun, VethScenario};
use crate::BenchArgs;
use anyhow::{bail, Context, Result};
use netlab::Vecplane;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Idle CPU goal: under 5% of a core.
const IDLE_GOAL: f64 = 0.05;
/// Forwarding goal: adaptive at least 0.95x busy.
const RATIO_GOAL: f64 = 0.95;
/// Seconds of idle CPU measurement per run.
const IDLE_SECONDS: f64 = 3.0;

/// CPU seconds (user + system) process `pid` used so far (0 when unreadable).
fn process_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which ends with ')'): utime is the 12th, stime the
    // 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

/// Share of a core `vp` used over `window` with no traffic offered.
fn idle_cpu(vp: &Vecplane, window: Duration) -> f64 {
    let (c0, t0) = (process_cpu_seconds(vp.pid()), Instant::now());
    std::thread::sleep(window);
    (process_cpu_seconds(vp.pid()) - c0) / t0.elapsed().as_secs_f64()
}

/// Pings A -> B through R, one every 50 ms (so an adaptive worker sleeps between them): the
/// average round trip in microseconds (`ping`'s summary), each crossing R twice.
fn ping_rtt_us(topo: &netlab::Topology) -> Result<f64> {
    let b = topo.b_ip4().to_string();
    let out = topo.exec_timeout(
        netlab::Host::A,
        &["ping", "-n", "-q", "-c", "40", "-i", "0.05", "-W", "2", &b],
        Duration::from_secs(30),
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_rtt_avg_ms(&text)
        .map(|ms| ms * 1000.0)
        .with_context(|| format!("ping printed no round-trip summary: {}", text.trim()))
}

/// The average of `rtt min/avg/max/mdev = 0.045/0.060/0.091/0.010 ms`.
fn parse_rtt_avg_ms(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("min/avg/max"))?;
    let values = line.split('=').nth(1)?.trim();
    values.split('/').nth(1)?.trim().parse().ok()
}

fn median(v: &[f64]) -> f64 {
    report::median(v).unwrap_or(0.0)
}

/// One mode's runs.
#[derive(Default)]
struct Side {
    idle: Vec<f64>,
    rtt_us: Vec<f64>,
    runs: Vec<PpsRun>,
}

impl Side {
    fn pps(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.pps).collect()
    }

    fn med(&self, f: impl Fn(&PpsRun) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }

    fn json(&self) -> Value {
        json!({
            "idle_cpu": median(&self.idle),
            "idle_cpu_runs": self.idle,
            "ping_rtt_us": median(&self.rtt_us),
            "ping_rtt_us_runs": self.rtt_us,
            "pps": median(&self.pps()),
            "pps_runs": self.pps(),
            "offered_pps": self.med(|r| r.offered_pps),
            "fwd_cpu_busy_under_load": self.med(|r| r.fwd_cpu_busy),
            "cycles_per_packet": self.med(|r| r.cycles_per_packet),
            "sleeps_under_load": self.med(|r| r.sleeps as f64),
            "slept_share_under_load": self.med(|r| r.slept_seconds / r.seconds.max(1e-9)),
        })
    }
}

/// Run the comparison and print it (text, or one JSON object with `--json`).
pub fn run(args: &BenchArgs) -> Result<()> {
    let p = veth::plan(args, VethScenario::Router)?;
    netlab::install_cleanup_handlers()?;
    veth::progress(&p, "building the vecplane topology".to_string());
    let side = veth::vecplane_side(&p)?;
    let text = std::fs::read_to_string(&side.config)
        .with_context(|| format!("cannot read {}", side.config.display()))?;
    if !text.contains("[dataplane]\n") {
        bail!("the generated config has no [dataplane] table to set poll-mode in");
    }
    let modes = ["adaptive", "busy"];
    let mut configs = Vec::new();
    for mode in modes {
        let path = side.topo.path(&format!("poll-{mode}.toml"));
        let with_mode = text.replace(
            "[dataplane]\n",
            &format!("[dataplane]\npoll-mode = \"{mode}\"\n"),
        );
        std::fs::write(&path, with_mode)
            .with_context(|| format!("cannot write {}", path.display()))?;
        configs.push(path);
    }
    let mut sides = [Side::default(), Side::default()];
    // Idle phase, before the sink on B0 that would drop the pings.
    for r in 0..p.runs {
        for (k, mode) in modes.iter().enumerate() {
            let vp = side.topo.start_vecplane(&p.exe, &configs[k])?;
            // Past start-up (FIB build, sockets), then idle.
            std::thread::sleep(Duration::from_millis(500));
            let cpu = idle_cpu(&vp, Duration::from_secs_f64(IDLE_SECONDS));
            let rtt = ping_rtt_us(&side.topo);
            let stopped = vp.stop();
            let rtt = rtt?;
            stopped?;
            veth::progress(
                &p,
                format!(
                    "run {}/{} {mode}: idle {:.1}% of a core, ping round trip {rtt:.0} us",
                    r + 1,
                    p.runs,
                    cpu * 100.0
                ),
            );
            sides[k].idle.push(cpu);
            sides[k].rtt_us.push(rtt);
        }
    }
    // Load phase.
    veth::prepare_pps(&side.topo)?;
    for r in 0..p.runs {
        for (k, mode) in modes.iter().enumerate() {
            let vp = side.topo.start_vecplane(&p.exe, &configs[k])?;
            let label = format!("run {}/{} {mode}", r + 1, p.runs);
            let m = veth::measure(&p, &side.topo, Some(&vp), &label);
            let stopped = vp.stop();
            let m = m?;
            stopped?;
            veth::progress(
                &p,
                format!(
                    "{label}: under load {:.1} kpps forwarded (offered {:.1}), CPU {} busy \
                     {:.0}%, {} sleeps ({:.1}% of the window asleep)",
                    m.pps / 1e3,
                    m.offered_pps / 1e3,
                    p.fwd_cpu,
                    m.fwd_cpu_busy * 100.0,
                    m.sleeps,
                    100.0 * m.slept_seconds / m.seconds.max(1e-9)
                ),
            );
            sides[k].runs.push(m);
        }
    }
    let (a, b) = (&sides[0], &sides[1]);
    let ratio = median(&a.pps()) / median(&b.pps()).max(1e-9);
    let pair_ratios: Vec<f64> = a
        .runs
        .iter()
        .zip(&b.runs)
        .map(|(x, y)| x.pps / y.pps.max(1e-9))
        .collect();
    let idle_adaptive = median(&a.idle);
    let notes = vec![
        format!(
            "R: vecplane run ({}), one worker on CPU {}; load: vecplane gen tx in A on CPU {}, \
             {} B frames, {} flows; rate: B0's receive counter over {} s windows",
            side.driver.name(),
            p.fwd_cpu,
            p.gen_cpu,
            p.frame_size,
            p.flows,
            p.seconds
        ),
        format!(
            "idle: the daemon's user + system CPU time over {IDLE_SECONDS} s without traffic \
             (every thread, the control thread included)"
        ),
        "ping: A -> B through R, 40 pings 50 ms apart (an adaptive worker sleeps between \
         them), average round trip; each crosses R twice"
            .to_string(),
    ];
    let json = json!({
        "scenario": "poll",
        "driver": side.driver.name(),
        "runs": p.runs,
        "seconds": p.seconds,
        "frame_size": p.frame_size,
        "flows": p.flows,
        "cpu": p.fwd_cpu,
        "generator_cpu": p.gen_cpu,
        "idle_cpu_adaptive": idle_adaptive,
        "idle_cpu_busy": median(&b.idle),
        "pps_adaptive": median(&a.pps()),
        "pps_busy": median(&b.pps()),
        "forwarding_ratio_adaptive_to_busy": ratio,
        "pair_ratios": pair_ratios,
        "idle_cpu_goal": IDLE_GOAL,
        "ratio_goal": RATIO_GOAL,
        "goals_met": {
            "idle_cpu": idle_adaptive < IDLE_GOAL,
            "forwarding_ratio": ratio >= RATIO_GOAL,
        },
        "adaptive": a.json(),
        "busy": b.json(),
        "load_average": crate::sys::load_average(),
        "notes": notes,
    });
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&json).context("cannot write the JSON report")?
        );
        return Ok(());
    }
    let mut out = format!(
        "poll ({}): {} interleaved run(s) per mode, forwarding on CPU {}, generator on CPU {}\n",
        side.driver.name(),
        p.runs,
        p.fwd_cpu,
        p.gen_cpu
    );
    for n in &notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    for (name, s) in [("adaptive", a), ("busy", b)] {
        out.push_str(&format!(
            "  {name:<9} idle {:>5.1}% of a core, ping {:.0} us; under load {:>7.1} kpps (runs: \
             {}), CPU busy {:.0}%, {:.1}% of the window asleep\n",
            median(&s.idle) * 100.0,
            median(&s.rtt_us),
            median(&s.pps()) / 1e3,
            s.pps()
                .iter()
                .map(|x| format!("{:.1}", x / 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            s.med(|r| r.fwd_cpu_busy) * 100.0,
            100.0 * s.med(|r| r.slept_seconds / r.seconds.max(1e-9)),
        ));
    }
    out.push_str(&format!(
        "  adaptive / busy under load: {ratio:.3} (goal >= {RATIO_GOAL}); idle adaptive {:.1}% \
         (goal < {:.0}%)\n",
        idle_adaptive * 100.0,
        IDLE_GOAL * 100.0
    ));
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_cpu_time() {
        let t0 = process_cpu_seconds(std::process::id());
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(200) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        let t1 = process_cpu_seconds(std::process::id());
        assert!(t1 > t0, "{t0} -> {t1}");
        assert_eq!(process_cpu_seconds(u32::MAX), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
        let ping = "--- 198.18.2.2 ping statistics ---\n40 packets transmitted, 40 received, \
                    0% packet loss, time 1990ms\nrtt min/avg/max/mdev = 0.045/0.060/0.091/0.010 ms\n";
        assert_eq!(parse_rtt_avg_ms(ping), Some(0.060));
        assert_eq!(parse_rtt_avg_ms("100% packet loss"), None);
    }
}

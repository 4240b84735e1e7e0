//! Adaptive polling end to end (root; A - R - B over veths, `vecplane run` in R on AF_PACKET
//! and AF_XDP): an idle adaptive worker goes to sleep (its sleeps and time asleep grow while
//! nothing arrives) and still forwards a ping burst and a bounded UDP burst without loss when
//! traffic comes back; a busy worker never sleeps. With two workers on a one-queue AF_XDP port
//! (software RSS), the worker without a socket is woken by its doorbell when frames are handed to
//! it. `ctl reload` switches a running worker between the modes. What is asserted is behaviour
//! (slept, woke, forwarded), never a CPU share: the machine may be loaded (the shares are printed;
//! `vecplane bench --scenario poll` measures them). Addresses are 198.18.0.0/15 only; namespaces
//! are deleted also when a test fails.

use netlab::{addr, Addressing, Host, Mode, Topology, Vecplane};
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_vecplane");

fn prerequisites() -> bool {
    testenv::can_run(netlab::missing_prerequisite(&["ip", "ping"]))
}

/// CPU seconds (user + system) the process `pid` used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

/// Share of one core the process used over `window` (printed for the reader, never asserted).
fn cpu_share(pid: u32, window: Duration) -> f64 {
    let (c0, t0) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(window);
    (cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64()
}

fn config(t: &Topology, driver: &str, mode: &str, workers: usize) -> std::path::PathBuf {
    let n = t.names();
    let text = format!(
        "[dataplane]\nbuffers = 8192\nworkers = {workers}\npoll-mode = \"{mode}\"\n\n\
         [[port]]\nname = \"Ra\"\ndriver = \"{driver}\"\ninterface = \"{ra}\"\n\
         mac = \"{mac_ra}\"\nip4 = [\"198.18.1.1/24\"]\n\n\
         [[port]]\nname = \"Rb\"\ndriver = \"{driver}\"\ninterface = \"{rb}\"\n\
         mac = \"{mac_rb}\"\nip4 = [\"198.18.2.1/24\"]\n",
        ra = n.ra,
        rb = n.rb,
        mac_ra = addr::MAC_RA,
        mac_rb = addr::MAC_RB,
    );
    let path = t.path(&format!("poll-{driver}-{mode}-{workers}.toml"));
    std::fs::write(&path, text).expect("write config");
    path
}

/// Until one ping from A to B is answered (at most 10 s): the neighbours on both sides are
/// resolved (A's of R, vecplane's of B) before a ping that must lose nothing. A started worker
/// takes a moment to answer its first ARP request, longer on a loaded machine, and the pings
/// sent meanwhile are the kernel's and vecplane's unresolved queues' to drop.
fn warm_up(t: &Topology) {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        let answered = t
            .exec_timeout(
                Host::A,
                &["ping", "-n", "-q", "-c", "1", "-W", "1", "198.18.2.2"],
                Duration::from_secs(5),
            )
            .is_ok_and(|o| o.status.success());
        if answered {
            return;
        }
    }
}

/// 100 pings A -> B at 10 ms, none lost (call `warm_up` first).
fn ping_ok(t: &Topology) -> (bool, String) {
    let out = t
        .exec_timeout(
            Host::A,
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                "100",
                "-i",
                "0.01",
                "-W",
                "2",
                "198.18.2.2",
            ],
            Duration::from_secs(30),
        )
        .expect("ping runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success() && text.contains(" 0% packet loss"),
        text,
    )
}

/// Send `count` UDP frames in 64 flows from A at 20,000 a second; returns how many reached
/// B0 (its receive counter; B's own replies do not count there).
fn udp_burst(t: &Topology, count: u64) -> u64 {
    let b0 = t.names().b0.clone();
    let before = t.link_stats(Host::B, &b0).expect("B0 counters").rx_packets;
    let a0 = t.names().a0.clone();
    let (src, dst, n) = (
        t.a_ip4().to_string(),
        t.b_ip4().to_string(),
        count.to_string(),
    );
    let out = t
        .exec_timeout(
            Host::A,
            &[
                BIN,
                "gen",
                "tx",
                "--interface",
                &a0,
                "--dst-mac",
                t.a_next_hop_mac(),
                "--src-mac",
                addr::MAC_A0,
                "--src-ip",
                &src,
                "--dst-ip",
                &dst,
                "--flows",
                "64",
                "--rate",
                "20000",
                "--count",
                &n,
                "--method",
                "af-xdp",
                "--seconds",
                "10",
                "--json",
                "--no-progress",
            ],
            Duration::from_secs(30),
        )
        .expect("vecplane gen tx runs");
    assert!(
        out.status.success(),
        "gen tx: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Let the last frames cross R: until all arrived, or 15 s (a bound against a hang, not a
    // speed: a loaded machine may take a while).
    let t0 = Instant::now();
    loop {
        let got = t
            .link_stats(Host::B, &b0)
            .expect("B0 counters")
            .rx_packets
            .saturating_sub(before);
        if got >= count || t0.elapsed() > Duration::from_secs(15) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One worker's figures from `show runtime`.
#[derive(Debug, Clone, PartialEq)]
struct WorkerFigures {
    poll_mode: String,
    sleeps: u64,
    slept_seconds: f64,
    /// Packets its handoff-rx node received (software RSS).
    handed: u64,
}

/// Per worker, from `show runtime`.
fn worker_figures(vp: &Vecplane) -> Vec<WorkerFigures> {
    let rt = vp.request("show runtime", true).expect("show runtime");
    let data = rt.data.expect("show runtime data");
    data["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| {
            let handoff = w["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["name"] == "handoff-rx")
                .filter_map(|n| n["packets"].as_u64())
                .sum();
            WorkerFigures {
                poll_mode: w["poll_mode"].as_str().unwrap_or("").to_string(),
                sleeps: w["sleeps"].as_u64().unwrap_or(0),
                slept_seconds: w["slept_seconds"].as_f64().unwrap_or(0.0),
                handed: handoff,
            }
        })
        .collect()
}

/// Idle: every worker goes to sleep (its sleeps and time asleep grow over 2 s with no traffic);
/// then a ping and a UDP burst without loss, which only a worker that woke can forward.
fn idle_then_traffic(t: &Topology, vp: &Vecplane, what: &str, workers: usize) {
    warm_up(t);
    let (ok, text) = ping_ok(t);
    assert!(ok, "{what}, before idling: {text}\n{}", vp.log());
    std::thread::sleep(Duration::from_millis(500));
    let before = worker_figures(vp);
    let idle = cpu_share(vp.pid(), Duration::from_secs(2));
    let after = worker_figures(vp);
    println!(
        "{what}: idle adaptive vecplane: {:.1}% of a core; workers before {before:?}, after \
         {after:?}",
        idle * 100.0
    );
    assert_eq!(after.len(), workers, "{after:?}");
    for (w, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(
            a.poll_mode == "adaptive" && a.sleeps > b.sleeps && a.slept_seconds > b.slept_seconds,
            "{what}: worker {w} did not sleep while idle: before {b:?}, after {a:?}"
        );
    }
    let (ok, text) = ping_ok(t);
    assert!(ok, "{what}, after idling: {text}\n{}", vp.log());
    std::thread::sleep(Duration::from_secs(1));
    const BURST: u64 = 2000;
    let got = udp_burst(t, BURST);
    assert!(
        got >= BURST,
        "{what}: after idling, {got} of a {BURST}-frame UDP burst reached B\n{}",
        vp.log()
    );
}

/// The tests busy-poll a core each: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn idle_and_busy(driver: &str) {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t =
        Topology::build_with_prefix("vppl", Mode::Dataplane(Addressing::Routed)).expect("topology");
    // Adaptive: warm up (ARP), go idle, measure, then traffic again.
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, driver, "adaptive", 1))
        .expect("vecplane run starts");
    idle_then_traffic(&t, &vp, &format!("{driver} adaptive"), 1);
    // A sleeping worker ends on SIGTERM: `stop` fails if it had to be killed.
    vp.stop().expect("a sleeping worker stops");
    // Busy: the worker keeps polling, idle or not: it never sleeps, and it forwards.
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, driver, "busy", 1))
        .expect("vecplane run starts");
    warm_up(&t);
    let (ok, text) = ping_ok(&t);
    assert!(ok, "{driver} busy: {text}\n{}", vp.log());
    let busy = cpu_share(vp.pid(), Duration::from_secs(2));
    let figures = worker_figures(&vp);
    println!(
        "{driver}: idle busy worker process: {:.1}% of a core; {figures:?}",
        busy * 100.0
    );
    assert!(
        figures.len() == 1 && figures[0].poll_mode == "busy" && figures[0].sleeps == 0,
        "{driver}: an idle busy worker slept: {figures:?}"
    );
    vp.stop().expect("stops");
}

#[test]
fn an_idle_adaptive_worker_sleeps_and_wakes_on_traffic_af_packet() {
    idle_and_busy("af-packet");
}

#[test]
fn an_idle_adaptive_worker_sleeps_and_wakes_on_traffic_af_xdp() {
    idle_and_busy("af-xdp");
}

#[test]
fn idle_adaptive_workers_behind_software_rss_wake_on_handoffs_af_xdp() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t =
        Topology::build_with_prefix("vppr", Mode::Dataplane(Addressing::Routed)).expect("topology");
    // One queue per veth, two workers: worker 0 owns both sockets and hands worker 1 its
    // flows; worker 1 hands back what it sends.
    let vp = t
        .start_vecplane(Path::new(BIN), &config(&t, "af-xdp", "adaptive", 2))
        .expect("vecplane run starts");
    idle_then_traffic(&t, &vp, "af-xdp, 2 workers, software RSS", 2);
    let figures = worker_figures(&vp);
    println!("per worker: {figures:?}");
    assert!(
        figures.iter().all(|f| f.handed > 0),
        "both workers were handed frames: {figures:?}\n{}",
        vp.log()
    );
    vp.stop().expect("stops");
}

/// `vecplane ctl reload` switches a running worker between adaptive and busy polling: an idle
/// busy worker stops sleeping, an idle adaptive one sleeps again, and no restart happens (the
/// same process forwards a ping after).
#[test]
fn reload_switches_the_poll_mode_of_a_running_worker() {
    if !prerequisites() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t =
        Topology::build_with_prefix("vppm", Mode::Dataplane(Addressing::Routed)).expect("topology");
    let path = config(&t, "af-packet", "adaptive", 1);
    let vp = t
        .start_vecplane(Path::new(BIN), &path)
        .expect("vecplane run starts");
    warm_up(&t);
    let (ok, text) = ping_ok(&t);
    assert!(ok, "before: {text}\n{}", vp.log());
    let reload = |mode: &str| {
        let text = std::fs::read_to_string(&path).expect("config");
        let old = if mode == "busy" { "adaptive" } else { "busy" };
        std::fs::write(
            &path,
            text.replace(
                &format!("poll-mode = \"{old}\""),
                &format!("poll-mode = \"{mode}\""),
            ),
        )
        .expect("rewrite config");
        let ep = control::Endpoint::Unix(vp.socket().to_path_buf());
        let r = control::http(&ep, "POST", "/v1/reload", None).expect("reload answers");
        let body = String::from_utf8_lossy(&r.body).to_string();
        assert_eq!(r.status, 200, "{body}");
        assert!(body.contains("poll-mode"), "{body}");
        // A sleeping worker takes the change when its sleep ends (1 ms).
        std::thread::sleep(Duration::from_millis(300));
        let rt = vp.request("show runtime", true).expect("show runtime");
        let data = rt.data.expect("data");
        assert_eq!(data["workers"][0]["poll_mode"], mode, "{data}");
    };
    // Sleeps over an idle window of `window` (the count is taken after the switch settled).
    let sleeps_over = |window: Duration| {
        let before = worker_figures(&vp)[0].sleeps;
        let share = cpu_share(vp.pid(), window);
        (worker_figures(&vp)[0].sleeps - before, share)
    };
    reload("busy");
    let (busy_sleeps, busy) = sleeps_over(Duration::from_secs(2));
    reload("adaptive");
    std::thread::sleep(Duration::from_millis(500));
    let (adaptive_sleeps, idle) = sleeps_over(Duration::from_secs(2));
    println!(
        "after reload: busy {busy_sleeps} sleeps ({:.1}% of a core), adaptive {adaptive_sleeps} \
         sleeps ({:.1}%)",
        busy * 100.0,
        idle * 100.0
    );
    assert!(
        busy_sleeps == 0 && adaptive_sleeps > 0,
        "sleeps while idle: busy {busy_sleeps}, adaptive {adaptive_sleeps}"
    );
    let (ok, text) = ping_ok(&t);
    assert!(ok, "after: {text}\n{}", vp.log());
    vp.stop().expect("stops");
}

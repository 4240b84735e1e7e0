//! `vecplane run`: load and check the config, build and start the data plane, serve the control
//! socket, and stop cleanly (inputs finished, SIGINT/SIGTERM, or `--seconds`). It never touches
//! packets; a config error exits with status 2 before anything is started, and a port that
//! stopped early (a pcap record that ends the replay, named with its number, or a pcap file
//! that could not be written whole) makes it exit 1.

use anyhow::Context;
use control::api::{ApiError, ApiState, HttpStatus as StatusCode, Limits};
use control::reload::Reloader;
use control::{final_stats_json, Config, Control, ControlSocket, DEFAULT_SOCKET};

use control::announcer::Announcer;
use control::health::runner::HealthRunner;
use control::health_host::{HealthReporter, LbHealthHost};
use dataplane::probe_host::ProbeHost;
use dataplane::{Dataplane, DataplaneSpec, PortDriver};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `vecplane run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The config file (TOML); relative pcap paths resolve against its directory.
    #[arg(long, short = 'c', value_name = "FILE")]
    config: PathBuf,
    /// The control socket to serve.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Write the final counters (ports, nodes, errors, pool) as JSON to PATH at exit.
    #[arg(long, value_name = "PATH")]
    stats_json: Option<PathBuf>,
    /// Stop after N seconds (fractions allowed), if nothing stopped the run before.
    #[arg(long, value_name = "N", value_parser = parse_seconds, allow_hyphen_values = true)]
    seconds: Option<f64>,
    /// How the daemon's events (health, BGP, reloads, workers, VM ports) are written on
    /// standard error: a readable line each, or JSON for journald and log collectors.
    #[arg(long, value_enum, default_value = "text", env = "VECPLANE_LOG_FORMAT")]
    log_format: crate::logging::LogFormat,
    /// The least severe events written.
    #[arg(long, value_enum, default_value = "info", env = "VECPLANE_LOG_LEVEL")]
    log_level: crate::logging::LogLevel,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a duration; accepted: a positive number of seconds, like 10 or 0.5"
        )),
    }
}

/// Set by SIGINT/SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

/// Set by SIGHUP: reload the config file.
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hangup(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

extern "C" fn on_signal(_: libc::c_int) {
    // A second signal while stopping ends the process at once (async-signal-safe calls only).
    if STOP.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

fn install_signal_handlers() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches an atomic and calls _exit.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
    let hangup: extern "C" fn(libc::c_int) = on_hangup;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGHUP, hangup as libc::sighandler_t);
    }
}

fn describe(spec: &DataplaneSpec) -> String {
    let ports: Vec<String> = spec
        .ports
        .iter()
        .map(|p| {
            let d = match p.driver {
                PortDriver::Memory(_) => "memory",
                PortDriver::Pcap { .. } => "pcap",
                PortDriver::AfPacket { .. } => "af-packet",
                PortDriver::AfXdp { .. } => "af-xdp",
                PortDriver::Tap { .. } => "tap",
                PortDriver::ProbeHost(_) => "probe-host",
                PortDriver::Vxlan(_) => "vxlan",
                PortDriver::VhostUser { .. } => "vhost-user",
            };
            format!("{} {d}", p.name)
        })
        .collect();
    let mut s = format!(
        "{} ({}), {} IPv4 + {} IPv6 routes, {}",
        plural(spec.ports.len(), "port"),
        ports.join(", "),
        spec.routes4.len(),
        spec.routes6.len(),
        plural(spec.neighbours.len(), "neighbour")
    );
    if !spec.xconnects.is_empty() {
        s.push_str(&format!(
            ", {}",
            plural(spec.xconnects.len(), "cross-connect")
        ));
    }
    if !spec.bridges.is_empty() {
        s.push_str(&format!(", {}", plural(spec.bridges.len(), "bridge")));
    }
    s
}

/// "worker on cpu 1", "2 workers on cpus 0, 1", "worker not pinned".
fn workers_line(view: &dataplane::RuntimeView) -> String {
    let cpus: Vec<String> = view
        .workers
        .iter()
        .map(|w| w.cpu.map_or_else(|| "-".to_string(), |c| c.to_string()))
        .collect();
    match (view.workers.len(), view.workers.first().and_then(|w| w.cpu)) {
        (1, Some(c)) => format!("worker on cpu {c}"),
        (1, None) => "worker not pinned".to_string(),
        (n, _) => format!("{n} workers on cpus {}", cpus.join(", ")),
    }
}

/// Print a status line; a closed stdout must not stop the daemon.
fn say(line: String) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// How long the data plane keeps forwarding after the VIPs were withdrawn at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Run the daemon; `Ok(2)` when the config is invalid.
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init(args.log_format, args.log_level);
    let shown = args.config.display().to_string();
    let config = match Config::load(&args.config).and_then(|c| c.check_files().map(|()| c)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            match e.issues().len() {
                0 => eprintln!("vecplane run: nothing was started"),
                n => eprintln!(
                    "vecplane run: {n} problem{} in {shown}; nothing was started",
                    if n == 1 { "" } else { "s" }
                ),
            }
            return Ok(ExitCode::from(2));
        }
    };
    let api_config = config.api.clone();
    let config_features = config.features.clone();
    let port_features = config.port_features.clone();
    let bgp = config.bgp.clone();
    let reload_base = config.clone();
    let mut config = config;
    // Health checks: a private namespace whose kernel makes the probes, as one more port.
    let health = config
        .spec
        .lb
        .as_ref()
        .map(|l| l.health.clone())
        .filter(|h| !h.checks.is_empty());
    let probe_host = match &health {
        None => None,
        Some(_) => match ProbeHost::create() {
            Ok(h) => {
                config.spec.ports.push(h.port_spec());
                Some(h)
            }
            Err(e) => {
                eprintln!("vecplane run: {e}");
                eprintln!("vecplane run: nothing was started");
                return Ok(ExitCode::from(2));
            }
        },
    };
    let spec = Arc::new(config.spec);
    install_signal_handlers();

    // Every output (pcap tx files, --stats-json, the BGP routes file) is checked before any
    // is created or truncated: no symlink, a regular file, not the config or an input, no two
    // the same file, none locked by another process; the routes file's directory is one only
    // root or this daemon's user can write.
    let mut protected = spec.input_files();
    protected.extend(ports::outfile::file_id(&args.config));
    let mut outputs = spec.output_files();
    if let Some(p) = &args.stats_json {
        outputs.push(p.as_path());
    }
    if let Some(b) = &bgp {
        if let Err(e) = control::bgp::routes::check_destination(&b.routes_file) {
            eprintln!("vecplane run: {e}");
            eprintln!("vecplane run: nothing was started");
            return Ok(ExitCode::from(2));
        }
        outputs.push(b.routes_file.as_path());
    }
    if let Err(e) = ports::outfile::check_outputs(&outputs, &protected) {
        eprintln!("{e}");
        eprintln!("vecplane run: nothing was started");
        return Ok(ExitCode::from(2));
    }
    // The stats file is held (open, locked, known by what it is) for the whole run, so no
    // capture and no other process writes over it; it is filled at exit.
    let stats_file = match &args.stats_json {
        None => None,
        Some(p) => {
            match ports::outfile::create_held(p, &protected, "the --stats-json file of this run") {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!("{e}");
                    eprintln!("vecplane run: nothing was started");
                    return Ok(ExitCode::from(2));
                }
            }
        }
    };

    // Bind first: a socket in use must not cost a data plane start.
    let socket = ControlSocket::bind(&args.socket)?;
    // Registered features ([NAME] tables): started before the workers that carry their nodes.
    let features = match control::registry::start_all(
        &config_features,
        &control::registry::StartContext {
            ports: spec.ports.iter().map(|p| p.name.clone()).collect(),
            workers: spec.workers.max(1),
        },
    ) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("vecplane run: {e}");
            eprintln!("vecplane run: nothing was started");
            return Ok(ExitCode::from(2));
        }
    };
    let dp = Dataplane::new_with_features(&spec, features.iter().map(|f| f.worker()).collect())
        .with_context(|| format!("cannot build the data plane described by {shown}"));
    let dp = match dp {
        Ok(dp) => dp,
        Err(e) => {
            control::registry::stop_all(&features);
            return Err(e);
        }
    };
    let view = dp.view().clone();
    // The ports' `features`, enabled before the first packet (checked with the config).
    let enabled: Vec<_> = port_features.iter().map(|f| f.enable(true)).collect();
    if let Err(e) = control::commands::apply_features(&view, &enabled) {
        eprintln!("vecplane run: {shown}: [[port]] features: {e}");
        eprintln!("vecplane run: nothing was started");
        control::registry::stop_all(&features);
        return Ok(ExitCode::from(2));
    }
    if let (Some(h), Some(host)) = (&health, &probe_host) {
        host.configure(&h.sources)
            .map_err(|e| anyhow::anyhow!("cannot set up the health checks of {shown}: {e}"))?;
    }
    say(format!(
        "vecplane: running {shown}: {} buffers x {} B on {}, {}, {}; control socket {}",
        view.pool_buffers,
        spec.data_size,
        view.pool_backing,
        describe(&spec),
        workers_line(&view),
        socket.path().display()
    ));

    tracing::info!(config = %shown, socket = %socket.path().display(), "running");
    let started = Instant::now();
    let running = dp.start();
    let mut control = Control::new(running.view().clone(), spec.clone())
        .protect(&args.config)
        .with_features(features.clone());
    let reporter = match (health, probe_host, &running.view().lb) {
        (Some(h), Some(host), lb) => {
            let keys = h.checks.iter().map(|c| c.vip).collect();
            say(format!(
                "vecplane: health checks: {} from {}",
                plural(h.checks.len(), "checked VIP"),
                [
                    h.sources.ip4.map(|a| a.to_string()),
                    h.sources.ip6.map(|a| a.to_string())
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and ")
            ));
            let host = LbHealthHost::new(lb.clone(), host, keys);
            let r = HealthReporter::new(HealthRunner::start(h, Arc::new(host)));
            control = control.with_health(r.clone());
            Some(r)
        }
        _ => None,
    };
    // BGP: announce the VIPs through BIRD once the data plane forwards.
    let announcer = match (bgp, &running.view().lb) {
        (Some(cfg), lb) => {
            let workers = running
                .view()
                .workers
                .iter()
                .map(|w| w.idle.clone())
                .collect();
            match Announcer::start(cfg, lb.clone(), workers, reporter.clone()) {
                Ok(a) => {
                    let a = Arc::new(a);
                    control = control.with_announcer(a.clone());
                    Some(a)
                }
                Err(e) => {
                    if let Some(r) = &reporter {
                        r.stop();
                    }
                    running.stop();
                    return Err(anyhow::anyhow!("vecplane run: {e}"));
                }
            }
        }
        _ => None,
    };
    let control = Arc::new(control);
    let reloader = Reloader::new(
        &args.config,
        reload_base,
        running.view().routing.clone(),
        running.view().policies(),
    )
    .with_flows(running.view().flows.clone())
    .with_lb(running.view().lb.clone())
    .with_features(features.clone())
    .with_port_features(
        running.view().features.clone(),
        running
            .view()
            .ports
            .get()
            .iter()
            .map(|p| p.name.clone())
            .collect(),
    );
    let reloader = Arc::new(match running.view().port_control.clone() {
        Some(pc) => reloader.with_port_control(pc),
        None => reloader,
    });
    let mut state = ApiState::new(control);
    let r = reloader.clone();
    state.reload = Some(Arc::new(move || {
        r.reload().map_err(|e| {
            ApiError::new(
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::CONFLICT),
                e.to_string(),
            )
        })
    }));
    let server = match socket.serve_with(Arc::new(state), &api_config, Limits::default()) {
        Ok(s) => s,
        Err(e) => {
            running.stop();
            return Err(e.into());
        }
    };
    if let Some(addr) = server.tcp_addr() {
        say(format!(
            "vecplane: API also on http://{addr} (bearer token)"
        ));
    }

    let deadline = args.seconds.map(|s| started + Duration::from_secs_f64(s));
    let reason = loop {
        if STOP.load(Ordering::SeqCst) {
            break "signal";
        }
        if running.is_finished() {
            break "all inputs finished";
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "time limit";
        }
        if RELOAD.swap(false, Ordering::SeqCst) {
            match reloader.reload() {
                Ok(a) => say(format!(
                    "vecplane: reloaded {shown}: {} changes, routing version {}",
                    a["changes"], a["version"]
                )),
                Err(e) => eprintln!("vecplane: reload (SIGHUP): {e}"),
            }
        }
        // Retired table parts are freed once every worker moved past them; flow rules whose
        // timeouts passed are deleted.
        dataplane::build::lock(&running.view().routing).reclaim();
        for sw in &running.view().flows {
            sw.tick();
        }
        // LB: retired snapshots freed; removed servers whose flows are over freed.
        let lb = &running.view().lb;
        lb.tick(lb.now_secs());
        if let Some(a) = &announcer {
            a.tick();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(a) = &announcer {
        // Withdraw first and keep forwarding a moment, so the routers move the traffic away
        // before it would be dropped.
        a.shutdown();
        std::thread::sleep(SHUTDOWN_GRACE);
    }
    if let Some(r) = &reporter {
        r.stop();
    }
    running.stop();
    server.shutdown();
    control::registry::stop_all(&features);

    let stats = final_stats_json(&view, &spec);
    let sum = |key: &str| -> u64 {
        stats["ports"]
            .as_array()
            .map(|ports| ports.iter().filter_map(|p| p[key].as_u64()).sum())
            .unwrap_or(0)
    };
    say(format!(
        "vecplane: stopped ({reason}) after {:.1} s: rx {} packets, tx {} packets, {} dropped \
         in the graph, {} rx drops and {} tx drops at the ports",
        started.elapsed().as_secs_f64(),
        sum("rx_packets"),
        sum("tx_packets"),
        stats["drops_total"].as_u64().unwrap_or(0),
        sum("rx_drops"),
        sum("tx_drops")
    ));
    tracing::info!(
        reason = %reason,
        seconds = started.elapsed().as_secs_f64(),
        drops = stats["drops_total"].as_u64().unwrap_or(0),
        "stopped"
    );
    // A port that stopped early (a pcap record that ends the replay, a full disk under a pcap
    // tx file) fails the run.
    let failures: Vec<String> = view
        .ports
        .get()
        .iter()
        .filter_map(|p| p.failure().map(|f| format!("port `{}`: {f}", p.name)))
        .collect();
    for f in &failures {
        tracing::error!("{f}");
    }
    if let (Some(path), Some(mut file)) = (&args.stats_json, stats_file) {
        let mut text = serde_json::to_string_pretty(&stats)?;
        text.push('\n');
        use ports::outfile::Truncate;
        use std::io::Write;
        file.truncate_to(0)
            .and_then(|()| file.write_all(text.as_bytes()))
            .with_context(|| format!("cannot write --stats-json {}", path.display()))?;
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

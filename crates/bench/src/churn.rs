//! `vecplane bench --scenario route-churn`: how fast routes go in through the API while the
//! data plane forwards, what that costs in memory and in forwarding rate, and how soon a change
//! is seen by every worker; beside the Linux kernel loading the same routes with `ip -batch`
//! into a namespace of its own. It owns the churn plan and its report; it never edits the data
//! plane except through the API, and removes the namespace it made.

use crate::scenario::{Scenario, ScenarioSpec, NEIGHBOUR_IP4, NEIGHBOUR_MAC};
use crate::BenchArgs;
use anyhow::{bail, Context, Result};
use dataplane::{Dataplane, NeighbourSpec};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// Routes per API request while loading.
const LOAD_BATCH: usize = 10_000;

/// Route changes per second the churn windows aim at (the figure).
const CHURN_PER_SECOND: usize = 10_000;

/// Requests per second that carry them.
const CHURN_REQUESTS_PER_SECOND: usize = 100;

/// Single-route changes timed for the visibility figures.
const VISIBILITY_SAMPLES: usize = 1000;

/// The second next hop churned routes alternate with (a static neighbour on tx0 too).
const SECOND_HOP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 3);

/// How the bench reaches the API: a request path and a JSON body, the JSON answer back.
pub trait ApiClient {
    /// POST `body` to `path` (e.g. `/v1/batch?wait=visible`).
    fn post(&mut self, path: &str, body: &[u8]) -> Result<Value>;
}

/// The figures of one route-churn run.
#[derive(Clone, Debug, Default)]
pub struct ChurnReport {
    routes: usize,
    load_seconds: f64,
    peak_rss_bytes: u64,
    fib_memory_bytes: usize,
    quiet_pps: Vec<f64>,
    churn_pps: Vec<f64>,
    churn_applied_per_second: Vec<f64>,
    visible_us: Vec<f64>,
    kernel_seconds: Option<f64>,
    kernel_error: Option<String>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return 0.0;
    }
    let i = ((s.len() as f64 - 1.0) * p).round() as usize;
    s[i.min(s.len() - 1)]
}

impl ChurnReport {
    fn routes_per_second(&self) -> f64 {
        self.routes as f64 / self.load_seconds.max(1e-9)
    }

    /// The report as JSON (stable key order).
    pub fn json(&self) -> Value {
        let ours = self.routes_per_second();
        let reference = match self.kernel_seconds {
            Some(k) => {
                let theirs = self.routes as f64 / k.max(1e-9);
                json!({
                    "name": "linux-ip-batch",
                    "routes_per_second": theirs,
                    "load_seconds": k,
                    "speedup": ours / theirs,
                })
            }
            None => json!({
                "name": "linux-ip-batch",
                "error": self.kernel_error.clone().unwrap_or_default(),
            }),
        };
        let quiet = median(&self.quiet_pps);
        json!({
            "scenario": "route-churn",
            "routes": self.routes,
            "routes_per_second": ours,
            "load_seconds": self.load_seconds,
            "peak_rss_bytes": self.peak_rss_bytes,
            "fib_memory_bytes": self.fib_memory_bytes,
            "forwarding_pps_quiet": quiet,
            "forwarding_pps_churn": median(&self.churn_pps),
            "forwarding_ratio_under_churn": median(&self.churn_pps) / quiet.max(1e-9),
            "churn_changes_per_second": median(&self.churn_applied_per_second),
            "visible_p50_us": percentile(&self.visible_us, 0.5),
            "visible_p99_us": percentile(&self.visible_us, 0.99),
            "visible_samples": self.visible_us.len(),
            "reference": reference,
        })
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let j = self.json();
        let f = |k: &str| j[k].as_f64().unwrap_or(0.0);
        let mut s = format!(
            "route-churn: {} IPv4 routes loaded through the API in {:.2} s: {:.0} routes/s \
             (peak RSS {:.0} MiB, FIB {:.1} MiB)\n",
            self.routes,
            self.load_seconds,
            f("routes_per_second"),
            self.peak_rss_bytes as f64 / 1048576.0,
            self.fib_memory_bytes as f64 / 1048576.0,
        );
        match &j["reference"]["routes_per_second"] {
            Value::Number(n) => {
                s += &format!(
                    "  kernel (ip -batch into a namespace): {:.0} routes/s; vecplane {:.2}x\n",
                    n.as_f64().unwrap_or(0.0),
                    j["reference"]["speedup"].as_f64().unwrap_or(0.0)
                )
            }
            _ => {
                s += &format!(
                    "  kernel reference not measured: {}\n",
                    j["reference"]["error"].as_str().unwrap_or("")
                )
            }
        }
        s += &format!(
            "  forwarding {:.2} Mpps quiet, {:.2} Mpps while {:.0} route changes/s are applied: \
             ratio {:.3}\n",
            f("forwarding_pps_quiet") / 1e6,
            f("forwarding_pps_churn") / 1e6,
            f("churn_changes_per_second"),
            f("forwarding_ratio_under_churn"),
        );
        s += &format!(
            "  change visible to every worker after the reply: p50 {:.1} us, p99 {:.1} us ({} \
             changes)\n",
            f("visible_p50_us"),
            f("visible_p99_us"),
            self.visible_us.len()
        );
        s
    }
}

/// Peak resident set of this process (VmHWM), bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Reset VmHWM to the current RSS (Linux: "5" into clear_refs), so the peak is this phase's.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A batch body of route changes (`op` each, via one next hop), written straight as text: a
/// controller encodes its requests too, and this keeps the client's share of the time small.
fn batch_body(op: &str, routes: impl Iterator<Item = (u32, u8)>, via: Ipv4Addr) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut s = String::from("{\"changes\":[");
    for (i, (p, l)) in routes.enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"op\":\"{op}\",\"route\":{{\"prefix\":\"{}/{l}\",\"via\":[\"{via}\"]}}}}",
            Ipv4Addr::from(p)
        );
    }
    s.push_str("]}");
    s.into_bytes()
}

/// Packets tx0 sent so far (every worker).
fn tx_packets(view: &dataplane::RuntimeView) -> u64 {
    view.ports
        .get()
        .get(1)
        .map_or(0, |p| p.stats.iter().map(|s| s.tx_packets.get()).sum())
}

/// How a run reaches the API: from the running data plane's view and its spec.
pub type MakeApi<'a> =
    &'a dyn Fn(&dataplane::RuntimeView, &dataplane::DataplaneSpec) -> Result<Box<dyn ApiClient>>;

/// Run the scenario with `api` as the way in (`make_api` gets the running data plane's view).
pub fn run_with(
    args: &BenchArgs,
    make_api: MakeApi<'_>,
    progress: &mut dyn FnMut(&str),
) -> Result<ChurnReport> {
    let routes = args.routes.unwrap_or(1_000_000);
    let flows = args.flows.unwrap_or(65_536);
    let cpu = match args.cpu {
        Some(c) => c,
        None => crate::sys::last_cpu().context("no CPU to run the worker on")?,
    };
    let base = ScenarioSpec::build(Scenario::Ip4, routes, flows, cpu, args.seed)?;
    let mut spec = base.spec.clone();
    let table: Vec<(u32, u8)> = spec
        .routes4
        .iter()
        .map(|r| (u32::from(r.prefix), r.len))
        .collect();
    // The routes come in through the API; a second static neighbour lets churn move a route
    // between two next hops that both forward.
    spec.routes4.clear();
    spec.neighbours.push(NeighbourSpec {
        ip: IpAddr::V4(SECOND_HOP),
        mac: [NEIGHBOUR_MAC[0], 0, 0, 0, 2, 3],
        port: 1,
    });
    let dp = Dataplane::new(&spec).context("cannot build the data plane")?;
    let running = dp.start();
    let view = running.view().clone();
    let result = (|| -> Result<ChurnReport> {
        let mut api = make_api(&view, &spec)?;
        let mut report = ChurnReport {
            routes: table.len(),
            ..ChurnReport::default()
        };
        // 1. Load, timed from the first request to the last answer; each request's body is
        // encoded just before it is sent, as a controller would (and the peak memory is not
        // the whole table held as JSON).
        reset_peak_rss();
        let start = Instant::now();
        for (i, chunk) in table.chunks(LOAD_BATCH).enumerate() {
            let body = batch_body("add", chunk.iter().copied(), NEIGHBOUR_IP4);
            api.post("/v1/batch", &body)
                .with_context(|| format!("loading batch {i}"))?;
            if i % 20 == 19 {
                progress(&format!(
                    "loaded {} of {} routes",
                    (i + 1) * LOAD_BATCH,
                    table.len()
                ));
            }
        }
        report.load_seconds = start.elapsed().as_secs_f64();
        report.peak_rss_bytes = peak_rss();
        report.fib_memory_bytes = dataplane::build::lock(&view.routing)
            .stats()
            .ip4_memory_bytes;
        progress(&format!(
            "{} routes in {:.2} s; forwarding with and without churn",
            table.len(),
            report.load_seconds
        ));
        // 2. Forwarding rate, windows without and with churn, interleaved.
        let seconds = args.seconds.max(0.5);
        let mut rng = fib::SplitMix64::new(args.seed ^ 0x0063_6875_726e);
        for run in 0..args.runs.max(1) {
            let before = tx_packets(&view);
            let t = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(seconds));
            report
                .quiet_pps
                .push((tx_packets(&view) - before) as f64 / t.elapsed().as_secs_f64());
            let before = tx_packets(&view);
            let t = Instant::now();
            let per_request = CHURN_PER_SECOND / CHURN_REQUESTS_PER_SECOND;
            let tick = Duration::from_secs(1) / CHURN_REQUESTS_PER_SECOND as u32;
            let mut applied = 0usize;
            let mut flip = false;
            while t.elapsed().as_secs_f64() < seconds {
                let due = t + tick * (applied / per_request) as u32;
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                flip = !flip;
                let via = if flip { SECOND_HOP } else { NEIGHBOUR_IP4 };
                let picked = (0..per_request)
                    .filter_map(|_| table.get(rng.below(table.len() as u64) as usize).copied())
                    .collect::<Vec<_>>();
                api.post("/v1/batch", &batch_body("replace", picked.into_iter(), via))?;
                applied += per_request;
            }
            let elapsed = t.elapsed().as_secs_f64();
            report
                .churn_pps
                .push((tx_packets(&view) - before) as f64 / elapsed);
            report
                .churn_applied_per_second
                .push(applied as f64 / elapsed);
            progress(&format!(
                "run {}: {:.2} Mpps quiet, {:.2} Mpps under churn",
                run + 1,
                report.quiet_pps.last().copied().unwrap_or(0.0) / 1e6,
                report.churn_pps.last().copied().unwrap_or(0.0) / 1e6
            ));
        }
        // 3. Visibility: one change per request, the server waits until every worker saw it.
        for i in 0..VISIBILITY_SAMPLES {
            let Some(&(p, l)) = table.get(rng.below(table.len() as u64) as usize) else {
                break;
            };
            let via = if i % 2 == 0 {
                SECOND_HOP
            } else {
                NEIGHBOUR_IP4
            };
            let answer = api.post(
                "/v1/batch?wait=visible",
                &batch_body("replace", std::iter::once((p, l)), via),
            )?;
            if answer["visible"] != json!(true) {
                bail!("change {i} was not visible to every worker within 1 s: {answer}");
            }
            if let Some(us) = answer["visible_us"].as_f64() {
                report.visible_us.push(us);
            }
        }
        Ok(report)
    })();
    running.stop();
    let mut report = result?;
    // 4. The kernel, after vecplane stopped (the two never share the CPUs).
    progress("loading the same routes into a Linux namespace with ip -batch");
    match kernel_load(&table) {
        Ok(s) => report.kernel_seconds = Some(s),
        Err(e) => report.kernel_error = Some(format!("{e:#}")),
    }
    Ok(report)
}

/// A network namespace that is deleted when dropped.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = netlab::cleanup::delete_namespace(&self.0);
    }
}

/// Seconds Linux takes to add `routes` (via 198.18.2.2 on a veth) with one
/// `ip -batch` in a namespace of its own; the namespace is removed after.
pub fn kernel_load(routes: &[(u32, u8)]) -> Result<f64> {
    if !netlab::cmd::is_root() {
        bail!("needs root (a network namespace)");
    }
    let name = format!("vpchurn{}", std::process::id());
    netlab::cmd::run_ok(&["ip", "netns", "add", &name])?;
    let ns = Namespace(name);
    let ip = |args: &[&str]| -> Result<String> {
        let mut all = vec!["ip", "-n", ns.0.as_str()];
        all.extend_from_slice(args);
        netlab::cmd::run_ok(&all)
    };
    // No dummy module on every kernel: one end of a veth pair serves as well.
    ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"])?;
    ip(&["link", "set", "d1", "up"])?;
    ip(&["addr", "add", "198.18.2.1/24", "dev", "d0"])?;
    ip(&["link", "set", "d0", "up"])?;
    let dir = std::env::temp_dir().join(format!("{}-routes", ns.0));
    std::fs::create_dir_all(&dir).context("cannot create the batch file's directory")?;
    let file = dir.join("routes.batch");
    let written = (|| -> Result<()> {
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(&file).context("cannot create the batch file")?,
        );
        for &(p, l) in routes {
            writeln!(
                w,
                "route add {}/{l} via 198.18.2.2 dev d0",
                Ipv4Addr::from(p)
            )?;
        }
        w.flush()?;
        Ok(())
    })();
    let outcome = written.and_then(|()| {
        let path = file.to_string_lossy().to_string();
        let start = Instant::now();
        let out = netlab::cmd::run_bounded(
            &["ip", "-n", ns.0.as_str(), "-batch", path.as_str()],
            Duration::from_secs(900),
        )?;
        let seconds = start.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!(
                "ip -batch failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
        Ok(seconds)
    });
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// `vecplane bench --scenario route-churn`: run and print the report (JSON with `--json`).
pub fn run(args: &BenchArgs, make_api: MakeApi<'_>) -> Result<()> {
    let quiet = args.no_progress;
    let report = run_with(args, make_api, &mut |m| {
        if !quiet {
            eprintln!("route-churn: {m}");
        }
    })?;
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    Ok(())
}

/// The daemon's HTTP API served in this process on a Unix socket of its own (the same server
/// `vecplane run` starts), and a client of it: requests cross a real socket and HTTP.
pub struct HttpApi {
    endpoint: control::Endpoint,
    _server: control::ServerHandle,
    _dir: crate::scratch::ScratchDir,
}

/// A directory removed when dropped.
impl HttpApi {
    /// Serve the API of the data plane whose view is `view`.
    pub fn new(view: &dataplane::RuntimeView, spec: &dataplane::DataplaneSpec) -> Result<HttpApi> {
        let dir = crate::scratch::ScratchDir::create("churn")?;
        let socket = dir.path().join("api.sock");
        let control = std::sync::Arc::new(control::Control::new(
            view.clone(),
            std::sync::Arc::new(spec.clone()),
        ));
        let server = control::ControlSocket::bind(&socket)?
            .serve(control, &control::ApiConfig::default())?;
        Ok(HttpApi {
            endpoint: control::Endpoint::Unix(socket),
            _server: server,
            _dir: dir,
        })
    }
}

impl ApiClient for HttpApi {
    fn post(&mut self, path: &str, body: &[u8]) -> Result<Value> {
        let reply = control::http(&self.endpoint, "POST", path, Some(body.to_vec()))?;
        if !(200..300).contains(&reply.status) {
            bail!("POST {path}: {} {}", reply.status, reply.error_message());
        }
        Ok(reply.json())
    }
}

/// The API served in this process without a transport: the same model the HTTP layer calls.
pub struct InProcessApi {
    routing: std::sync::Arc<std::sync::Mutex<dataplane::routing::Routing>>,
    ports: Vec<String>,
}

impl InProcessApi {
    /// For the data plane whose view is `view`.
    pub fn new(view: &dataplane::RuntimeView) -> InProcessApi {
        InProcessApi {
            routing: view.routing.clone(),
            ports: view.ports.get().iter().map(|p| p.name.clone()).collect(),
        }
    }
}

impl ApiClient for InProcessApi {
    fn post(&mut self, path: &str, body: &[u8]) -> Result<Value> {
        use control::routes_api;
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        if path != "/v1/batch" {
            bail!("in-process API: no {path}");
        }
        let batch: routes_api::BatchBody =
            serde_json::from_slice(body).context("in-process API: bad batch")?;
        let changes = routes_api::changes_of(&batch, &self.ports)
            .map_err(|e| anyhow::anyhow!("{}", e.body()))?;
        routes_api::apply(&self.routing, &changes, query.contains("wait=visible"))
            .map_err(|e| anyhow::anyhow!("{}", e.body()))
    }
}

//! The command language of `vecplane ctl`: parsing (`language`), and answering each command as text and JSON
//! from the `RuntimeView` and the kept `DataplaneSpec`. It only reads counters and arms/clears
//! traces (`clear` keeps baselines here, never resets a data-plane counter); it never touches packets.

use crate::capture::{parse_start, CaptureJob, CaptureRequest};
use crate::fibview::FibView;
pub use crate::fibview::{FibQuery, MAX_PAGE};
use crate::stats::{
    minus_nodes, port_counts, sum_errors, sum_nodes, worker_errors, worker_nodes, ErrorCount,
    NodeCounts, PortCounts,
};
use crate::table::{render, Align};
use dataplane::{DataplaneSpec, RuntimeView};
use graph::trace::MAX_TRACE_RECORDS;
use packet::headers::format_mac;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use thiserror::Error;

mod features;
mod language;
mod rxq;
pub use features::{apply as apply_features, FeatureChange};

pub use language::*;

/// Counter values at the last `clear`, subtracted from what the data plane reports.
struct Baselines {
    runtime: Vec<Vec<NodeCounts>>,
    /// Per worker: (sleeps, nanoseconds asleep).
    idle: Vec<(u64, u64)>,
    runtime_at: Instant,
    ports: Vec<PortCounts>,
    ports_at: Instant,
    errors: Vec<Vec<ErrorCount>>,
    errors_at: Instant,
}

/// What the control socket serves: the data plane's view, the spec it was built from, and the
/// `clear` baselines. Shared by the connection threads (`Arc<Control>`).
///
/// JSON shapes (the `data` field of a reply when the request has `"json": true`):
/// * `help` → `{"commands":[{"command","help"}]}`
/// * `show runtime [all]` → `{"time_since_start","time_since_clear","tsc_hz",
///   "workers":[{"worker","cpu","poll_mode","sleeps","slept_seconds","nodes":[NODE]}],
///   "total":[NODE]}` (`poll_mode`: "busy" or "adaptive"; sleeps of an idle adaptive worker
///   and the time it spent asleep, since the last clear) with NODE =
///   `{"name","calls","vectors","packets","clocks","clocks_per_packet","vectors_per_call"}`
///   (`clocks_per_packet` = clocks/packets, `vectors_per_call` = packets/calls, both 0 when the
///   denominator is 0; nodes with 0 calls are left out unless `all`, as in the text)
/// * `show rxq` → `{"time_since_clear","tsc_hz","workers":[{"worker","cpu","busy_percent",
///   "queues":[{"name","packets","carried_clocks","cycles_per_packet","load_percent",
///   "share_percent"}]}]}` (see `rxq`)
/// * `show interfaces` → `{"time_since_clear","interfaces":[{"index","name","driver","mac","mtu",
///   "ip4":[..],"ip6":[..],"rx_packets","rx_bytes","rx_drops","tx_packets","tx_bytes","tx_drops"}]}`
/// * `show neighbours` → `{"workers":[{"worker","age_ms","entries":[{"port","ip","mac","state",
///   "age_ms","pinned","queued"}],"counters":{..NeighbourStats fields..}}]}` (`age_ms`: of the
///   snapshot, published by each worker about once a second)
/// * `show bridge` → `{"domains":[{"id","name"}],"workers":[{"worker","counters":{"learned",
///   "aged","moves","refused","flooded","flood_copies","macs"},"macs":[{"domain","vlan","mac",
///   "port","age_seconds"}]}]}`
/// * `show flow-cache` → `{"bridges":[{"bridge","rules","version","workers":[{"worker",
///   "counters":{..CacheStats fields..},"cycles_per_miss":{"count","mean","p50","p99",
///   "buckets"},"malformed":{REASON:N}}],"total":{..}}]}`
/// * `show lb [vips [verbose]]` → what `GET /v1/lb` answers: `{"version","conf":{..},
///   "nat4_inside","nat6_inside","vips":[{"id","vip","prefix","protocol","port","encap","dscp",
///   "target_port","new_len","maglev_size","src_ip_sticky","active_servers","warnings","line",
///   "counters":{..VipTotals..},"servers":[{"address","slot","gen","weight","state",
///   "maglev_entries","share_percent","counters":{..AsTotals..}}]}],"node":{..NodeTotals..}}`
/// * `show lb health` → `GET /v1/lb/health`: `{"error","totals":{"targets","up","down",
///   "unprobed","probes","ok","failed","not_sent","transitions"},"targets":[{"check","vip",
///   "server","slot","type","via","on_down","destination","source","via_vip","state",..}],
///   "transitions":[{"at_unix_ms","vip","server","state","count","last_result",..}]}`
/// * `show bgp`, `drain`, `drain cancel` → `{"phase":"waiting"|"serving"|"draining"|"ready"|
///   "stopping","detail","ready_to_stop","forwarding","announced":[PREFIX],"liveness_device",
///   "liveness_up","stalls","configures","errors","announcements","withdrawals","last_error"}`
/// * `lb which ...` → `{"flow","vip","vip_id","server","slot","gen","hash","maglev_entry",
///   "maglev_size","encap","reason":"maglev"|"no_server"|"no_vip_for_port"|"not_a_vip","why"}`
/// * `show errors` → `{"time_since_clear","errors":[{"node","reason","count"}],"total"}` (non-zero only)
/// * `show ip fib` / `show ip6 fib [after PREFIX] [limit N]` → `{"family":"ip4"|"ip6","total",
///   "entries":[ENTRY],"next":PREFIX|null}`: one page of at most N (default and most `MAX_PAGE`)
///   entries in prefix order; `next` is the last entry's prefix when more follow (ask again
///   `after` it). With an address or prefix: `{"family","query","entries":[ENTRY]}` (the
///   longest match: 0 or 1 entry); ENTRY = `{"prefix","type":
///   "via"|"drop"|"connected","next_hops":[{"ip","port","mac"}],"port"(connected only)}`
/// * `pcap start ...`, `pcap stop`, `show pcap` → `{"port","direction","file","count","snaplen",
///   "state":"running"|"done"|"failed","written","lost","error"}` (`show pcap` before any
///   capture: `{"state":"none"}`)
/// * `show punt` → `{"slots","snap_bytes","per_second","burst","workers":[{"worker",
///   "punted":{REASON:N},"ring_full","rate_limited","injected_to_port","injected_packet_out"}],
///   "delivered":{REASON:N},"last","wakes","inject":{"per_second","burst","accepted",
///   "refused_rate_limited","refused_ring_full"}}` (REASON: no_match, action, invalid_ttl,
///   action_set, group, packet_out)
/// * `trace add NODE N` → `{"node","count","workers"}`
/// * `show trace` → `{"workers":[{"worker","packets":[{"packet","steps":[{"node","text","next"}]}]}]}`
/// * `clear runtime|interfaces|errors|trace` → `{"cleared":"runtime"|...}`
pub struct Control {
    view: RuntimeView,
    spec: Arc<DataplaneSpec>,
    started: Instant,
    base: Mutex<Baselines>,
    capture: Mutex<Option<CaptureJob>>,
    /// Files no capture may overwrite (the config file, the run's inputs).
    protected: Vec<ports::outfile::FileId>,
    /// The running health checks, if any.
    health: Option<crate::health_host::HealthReporter>,
    /// The BGP announcer, if any.
    announcer: Option<Arc<crate::announcer::Announcer>>,
    /// The registered features that run (`crate::registry`).
    running: Vec<Arc<dyn crate::registry::RunningFeature>>,
}

impl Control {
    /// Also refuse captures into the file `path` (the config file).
    pub fn protect(mut self, path: &std::path::Path) -> Control {
        self.protected.extend(ports::outfile::file_id(path));
        self
    }

    /// Report the running health checks (`show lb health`, the API, the metrics).
    pub fn with_health(mut self, health: crate::health_host::HealthReporter) -> Control {
        self.health = Some(health);
        self
    }

    /// The running health checks, if any.
    pub fn health(&self) -> Option<&crate::health_host::HealthReporter> {
        self.health.as_ref()
    }

    /// Serve `show bgp` and `drain` from `announcer`.
    pub fn with_announcer(mut self, announcer: Arc<crate::announcer::Announcer>) -> Control {
        self.announcer = Some(announcer);
        self
    }

    /// The BGP announcer, if any.
    pub fn announcer(&self) -> Option<&Arc<crate::announcer::Announcer>> {
        self.announcer.as_ref()
    }

    /// Serve the registered features that run (`show NAME`, the metrics).
    pub fn with_features(
        mut self,
        running: Vec<Arc<dyn crate::registry::RunningFeature>>,
    ) -> Control {
        self.running = running;
        self
    }

    /// The registered features that run.
    pub fn running_features(&self) -> &[Arc<dyn crate::registry::RunningFeature>] {
        &self.running
    }

    fn on_announcer(
        &self,
        f: impl FnOnce(&crate::announcer::Announcer) -> (String, Value),
    ) -> Result<(String, Value), CommandError> {
        match &self.announcer {
            Some(a) => Ok(f(a)),
            None => Err(CommandError(
                "no VIPs are announced: add a [bgp] table to the config".into(),
            )),
        }
    }

    fn protected_files(&self) -> Vec<ports::outfile::FileId> {
        self.protected.clone()
    }

    /// Serve `view` of a data plane built from `spec`; "time since start" counts from now.
    pub fn new(view: RuntimeView, spec: Arc<DataplaneSpec>) -> Control {
        let now = Instant::now();
        let protected = spec.input_files();
        Control {
            view,
            spec,
            started: now,
            base: Mutex::new(Baselines {
                runtime: Vec::new(),
                idle: Vec::new(),
                runtime_at: now,
                ports: Vec::new(),
                ports_at: now,
                errors: Vec::new(),
                errors_at: now,
            }),
            capture: Mutex::new(None),
            protected,
            health: None,
            announcer: None,
            running: Vec::new(),
        }
    }

    fn capture_job(&self) -> std::sync::MutexGuard<'_, Option<CaptureJob>> {
        self.capture.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pcap_start(&self, r: &CaptureRequest) -> Result<(String, Value), CommandError> {
        let Some(port) = self.view.ports.get().iter().position(|p| p.name == r.port) else {
            let names: Vec<String> = self
                .view
                .ports
                .get()
                .iter()
                .map(|p| p.name.clone())
                .collect();
            return Err(CommandError(format!(
                "no port is named `{}`; accepted: {}",
                r.port,
                names.join(", ")
            )));
        };
        let mut job = self.capture_job();
        if let Some(j) = job.as_ref().filter(|j| j.is_running()) {
            let (status, _) = j.status(self.view.capture.lost.get());
            return Err(CommandError(format!(
                "a capture is running ({}); accepted: `pcap stop` first",
                status.trim_end()
            )));
        }
        *job = None;
        let started = CaptureJob::start(
            self.view.capture.clone(),
            port as u16,
            r.clone(),
            self.view.tsc_hz,
            &self.protected_files(),
        )
        .map_err(|e| CommandError(format!("cannot capture into {}: {e}", r.file.display())))?;
        let out = started.status(self.view.capture.lost.get());
        *job = Some(started);
        Ok(out)
    }

    fn pcap_stop(&self) -> Result<(String, Value), CommandError> {
        let mut job = self.capture_job();
        let Some(j) = job.as_mut() else {
            return Err(CommandError(
                "no capture was started; accepted: `pcap start PORT FILE ...` first".into(),
            ));
        };
        j.stop();
        Ok(j.status(self.view.capture.lost.get()))
    }

    fn show_pcap(&self) -> (String, Value) {
        match self.capture_job().as_ref() {
            Some(j) => j.status(self.view.capture.lost.get()),
            None => (
                "no capture was started\n".to_string(),
                json!({"state": "none"}),
            ),
        }
    }

    /// The view served.
    pub fn view(&self) -> &RuntimeView {
        &self.view
    }

    fn baselines(&self) -> std::sync::MutexGuard<'_, Baselines> {
        self.base.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parse and run one command line; `json` adds the `data` field.
    pub fn execute(&self, line: &str, json: bool) -> Reply {
        match parse_command(line).and_then(|c| self.run(&c, json)) {
            Ok((text, data)) => Reply::success(text, json.then_some(data)),
            Err(e) => Reply::failure(e.0),
        }
    }

    /// Run a parsed command: its text and its JSON data (`json` false may leave out costly data,
    /// e.g. the full FIB listing, as `Value::Null`).
    pub fn run(&self, cmd: &Command, json: bool) -> Result<(String, Value), CommandError> {
        match cmd {
            Command::Help => Ok(self.help()),
            Command::ShowRuntime { all } => Ok(self.show_runtime(*all)),
            Command::ShowFeatures => Ok(features::show(&self.view)),
            Command::ShowFeature(name) => self
                .running
                .iter()
                .find(|r| r.name() == name)
                .map(|r| r.show())
                .ok_or_else(|| {
                    CommandError(format!(
                        "feature `{name}` is not running: add a [{name}] table to the config"
                    ))
                }),
            Command::SetFeature(change) => {
                features::apply(&self.view, std::slice::from_ref(change))
            }
            Command::ShowRxq => {
                let (per_worker, _, since_clear) = self.runtime_since_clear();
                Ok(rxq::show(&self.view, &per_worker, since_clear))
            }
            Command::RxqMove { port, pair, worker } => {
                rxq::move_pair(&self.view, port, *pair, *worker)
            }
            Command::ShowInterfaces => Ok(self.show_interfaces()),
            Command::ShowErrors => Ok(self.show_errors()),
            Command::ShowFib { v6, query } => {
                // The routes and static neighbours as they are now (the API changes them): one
                // bounded page read under the routing lock.
                let routing = dataplane::build::lock(&self.view.routing);
                FibView::new(&self.spec, &routing, *v6)
                    .show(query, json)
                    .map_err(CommandError)
            }
            Command::ShowTrace => Ok(self.show_trace()),
            Command::ShowNeighbours => Ok(self.show_neighbours()),
            Command::ShowBridge => Ok(self.show_bridge()),
            Command::ShowFlowCache => Ok(crate::flows_api::show_flow_cache(&self.view)),
            Command::ShowPcap => Ok(self.show_pcap()),
            Command::ShowPunt => Ok(crate::punt_api::show_punt(&self.view)),
            Command::ShowLb(what) => {
                let lb = crate::lb_api::find(&self.view);
                Ok(crate::lb_show::show(&lb, *what))
            }
            Command::ShowLbHealth => match &self.health {
                Some(h) => Ok(crate::health_host::show(&h.status())),
                None => Err(CommandError(
                    "no health checks run: add [[lb.health-check]] tables to the config".into(),
                )),
            },
            Command::ShowBgp => self.on_announcer(|a| a.show()),
            Command::Drain => self.on_announcer(|a| a.drain()),
            Command::DrainCancel => self.on_announcer(|a| a.undrain()),
            Command::LbWhich(t) => {
                let lb = crate::lb_api::find(&self.view);
                Ok(crate::lb_show::which(&lb, t))
            }
            Command::PcapStart(r) => self.pcap_start(r),
            Command::PcapStop => self.pcap_stop(),
            Command::TraceAdd { node, count } => self.trace_add(node, *count),
            Command::ClearTrace => {
                for w in &self.view.workers {
                    w.trace.get().clear();
                }
                Ok(cleared("trace", "trace records cleared, tracing stopped"))
            }
            Command::ClearRuntime => {
                let snap = self.runtime_now();
                let idle = self.idle_now();
                let mut b = self.baselines();
                b.runtime = snap;
                b.idle = idle;
                b.runtime_at = Instant::now();
                Ok(cleared("runtime", "runtime counters cleared"))
            }
            Command::ClearInterfaces => {
                let snap: Vec<PortCounts> = self.view.ports.get().iter().map(port_counts).collect();
                let mut b = self.baselines();
                b.ports = snap;
                b.ports_at = Instant::now();
                Ok(cleared("interfaces", "interface counters cleared"))
            }
            Command::ClearErrors => {
                let snap = self.errors_now();
                let mut b = self.baselines();
                b.errors = snap;
                b.errors_at = Instant::now();
                Ok(cleared("errors", "error counters cleared"))
            }
        }
    }

    fn help(&self) -> (String, Value) {
        let rows: Vec<Vec<String>> = COMMANDS
            .iter()
            .map(|(c, h)| vec![c.to_string(), h.to_string()])
            .collect();
        let text = render(
            &[("Command", Align::Left), ("What it does", Align::Left)],
            &rows,
        );
        let data = json!({
            "commands": COMMANDS.iter().map(|(c, h)| json!({"command": c, "help": h})).collect::<Vec<_>>()
        });
        (text, data)
    }

    fn runtime_now(&self) -> Vec<Vec<NodeCounts>> {
        self.view
            .workers
            .iter()
            .map(|w| worker_nodes(&w.graph.get()))
            .collect()
    }

    fn idle_now(&self) -> Vec<(u64, u64)> {
        self.view
            .workers
            .iter()
            .map(|w| (w.idle.sleeps.get(), w.idle.slept_ns.get()))
            .collect()
    }

    fn errors_now(&self) -> Vec<Vec<ErrorCount>> {
        self.view
            .workers
            .iter()
            .map(|w| worker_errors(&w.graph.get()))
            .collect()
    }

    /// Per worker: its nodes' counters and (sleeps, nanoseconds asleep) since the last
    /// `clear runtime`; and the seconds since then.
    fn runtime_since_clear(&self) -> (Vec<Vec<NodeCounts>>, Vec<(u64, u64)>, f64) {
        let now = self.runtime_now();
        let idle_now = self.idle_now();
        let b = self.baselines();
        let per: Vec<Vec<NodeCounts>> = now
            .iter()
            .enumerate()
            .map(|(i, w)| minus_nodes(w, b.runtime.get(i)))
            .collect();
        let idle: Vec<(u64, u64)> = idle_now
            .iter()
            .enumerate()
            .map(|(i, &(n, ns))| {
                let (bn, bns) = b.idle.get(i).copied().unwrap_or((0, 0));
                (n.saturating_sub(bn), ns.saturating_sub(bns))
            })
            .collect();
        (per, idle, b.runtime_at.elapsed().as_secs_f64())
    }

    fn show_runtime(&self, all: bool) -> (String, Value) {
        let (per_worker, idle, since_clear) = self.runtime_since_clear();
        let mode = |w: &dataplane::WorkerView| match w.poll.mode() {
            dataplane::PollMode::Busy => "busy",
            dataplane::PollMode::Adaptive => "adaptive",
        };
        let total = sum_nodes(&per_worker);
        let since_start = self.started.elapsed().as_secs_f64();
        let keep = |n: &&NodeCounts| all || n.calls > 0;

        let mut text =
            format!("Time {since_start:.1} s since start, {since_clear:.1} s since last clear\n");
        let table = |nodes: &[NodeCounts]| -> String {
            let rows: Vec<Vec<String>> = nodes
                .iter()
                .filter(keep)
                .map(|n| {
                    vec![
                        n.name.clone(),
                        n.calls.to_string(),
                        n.vectors.to_string(),
                        n.packets.to_string(),
                        if n.packets == 0 {
                            "-".to_string()
                        } else {
                            format!("{:.2}", n.clocks_per_packet())
                        },
                        format!("{:.2}", n.vectors_per_call()),
                    ]
                })
                .collect();
            if rows.is_empty() {
                return "  (no node has run yet; `show runtime all` lists every node)\n".into();
            }
            render(
                &[
                    ("Name", Align::Left),
                    ("Calls", Align::Right),
                    ("Vectors", Align::Right),
                    ("Packets", Align::Right),
                    ("Clocks/Pkt", Align::Right),
                    ("Vectors/Call", Align::Right),
                ],
                &rows,
            )
        };
        for (w, nodes) in self.view.workers.iter().zip(per_worker.iter()) {
            let cpu = w
                .cpu
                .map(|c| format!("cpu {c}"))
                .unwrap_or_else(|| "not pinned".into());
            let (sleeps, slept_ns) = idle.get(w.index).copied().unwrap_or((0, 0));
            text.push_str(&format!(
                "Worker {} ({cpu}, {} polling: {sleeps} sleeps, {:.3} s asleep; {} buffers \
                 free):\n",
                w.index,
                mode(w),
                slept_ns as f64 / 1e9,
                w.pool_free.load(std::sync::atomic::Ordering::Relaxed)
            ));
            text.push_str(&table(nodes));
        }
        if self.view.workers.len() > 1 {
            text.push_str(&format!("Total ({} workers):\n", self.view.workers.len()));
            text.push_str(&table(&total));
        }
        let data = json!({
            "time_since_start": since_start,
            "time_since_clear": since_clear,
            "tsc_hz": self.view.tsc_hz,
            "workers": self.view.workers.iter().zip(per_worker.iter()).map(|(w, nodes)| json!({
                "worker": w.index,
                "cpu": w.cpu,
                "poll_mode": mode(w),
                "sleeps": idle.get(w.index).map_or(0, |i| i.0),
                "slept_seconds": idle.get(w.index).map_or(0.0, |i| i.1 as f64 / 1e9),
                "pool_free": w.pool_free.load(std::sync::atomic::Ordering::Relaxed),
                "nodes": nodes.iter().filter(keep).map(|n| n.json(true)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "total": total.iter().filter(keep).map(|n| n.json(true)).collect::<Vec<_>>(),
        });
        (text, data)
    }

    fn show_interfaces(&self) -> (String, Value) {
        let (base, since) = {
            let b = self.baselines();
            (b.ports.clone(), b.ports_at.elapsed().as_secs_f64())
        };
        let mut rows = Vec::new();
        let mut items = Vec::new();
        // The live addresses (reload and the API change them), read under one lock.
        let live_addrs: Vec<Vec<(std::net::IpAddr, u8)>> = {
            let routing = dataplane::build::lock(&self.view.routing);
            (0..self.view.ports.get().len())
                .map(|i| {
                    routing
                        .port_addresses(i)
                        .map(<[_]>::to_vec)
                        .unwrap_or_default()
                })
                .collect()
        };
        for (i, p) in self.view.ports.get().iter().enumerate() {
            let now = port_counts(p);
            let c = base.get(i).map(|b| now.minus(b)).unwrap_or(now);
            let mac = format_mac(&p.mac);
            let driver = if p.detail.is_empty() {
                p.driver.clone()
            } else {
                format!("{} ({})", p.driver, p.detail)
            };
            rows.push(vec![
                p.name.clone(),
                driver,
                mac.clone(),
                c.rx_packets.to_string(),
                c.rx_bytes.to_string(),
                c.tx_packets.to_string(),
                c.tx_bytes.to_string(),
                c.rx_drops.to_string(),
                c.tx_drops.to_string(),
            ]);
            let addrs = live_addrs.get(i).cloned().unwrap_or_default();
            items.push(json!({
                "index": i,
                "name": p.name,
                "driver": p.driver,
                "detail": p.detail,
                "mac": mac,
                "mtu": self.view.policies.port_mtus.get(i),
                "ip4": addrs.iter().filter(|(a, _)| a.is_ipv4()).map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>(),
                "ip6": addrs.iter().filter(|(a, _)| a.is_ipv6()).map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>(),
                "rx_packets": c.rx_packets,
                "rx_bytes": c.rx_bytes,
                "rx_drops": c.rx_drops,
                "tx_packets": c.tx_packets,
                "tx_bytes": c.tx_bytes,
                "tx_drops": c.tx_drops,
                "failure": p.failure(),
                "driver_counters": p.driver_counters.as_ref().map(|d| {
                    d.counters().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()
                }),
                "driver_state": p.driver_counters.as_ref().and_then(|d| d.state()),
            }));
        }
        // Drivers' own counters (since start; `clear interfaces` leaves them).
        let driver_lines: String = self
            .view
            .ports
            .get()
            .iter()
            .filter_map(|p| {
                let d = p.driver_counters.as_ref()?;
                let counts: Vec<String> = d
                    .counters()
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect();
                let state = d.state().map(|s| format!("{s}; ")).unwrap_or_default();
                Some(format!(
                    "{} ({}): {state}{} (since start)\n",
                    p.name,
                    p.driver,
                    counts.join(", ")
                ))
            })
            .collect();
        let failures: String = self
            .view
            .ports
            .get()
            .iter()
            .filter_map(|p| p.failure().map(|f| format!("{} stopped: {f}\n", p.name)))
            .collect();
        let text = render(
            &[
                ("Name", Align::Left),
                ("Driver", Align::Left),
                ("MAC", Align::Left),
                ("Rx packets", Align::Right),
                ("Rx bytes", Align::Right),
                ("Tx packets", Align::Right),
                ("Tx bytes", Align::Right),
                ("Rx drops", Align::Right),
                ("Tx drops", Align::Right),
            ],
            &rows,
        ) + &driver_lines
            + &failures;
        (
            text,
            json!({"time_since_clear": since, "interfaces": items}),
        )
    }

    fn show_errors(&self) -> (String, Value) {
        let now = self.errors_now();
        let (errors, since) = {
            let b = self.baselines();
            (
                sum_errors(&now, Some(&b.errors)),
                b.errors_at.elapsed().as_secs_f64(),
            )
        };
        let nonzero: Vec<&ErrorCount> = errors.iter().filter(|e| e.count > 0).collect();
        let total: u64 = nonzero.iter().map(|e| e.count).sum();
        let text = if nonzero.is_empty() {
            "No errors.\n".to_string()
        } else {
            let rows: Vec<Vec<String>> = nonzero
                .iter()
                .map(|e| vec![e.count.to_string(), e.node.clone(), e.reason.clone()])
                .collect();
            render(
                &[
                    ("Count", Align::Right),
                    ("Node", Align::Left),
                    ("Reason", Align::Left),
                ],
                &rows,
            )
        };
        let data = json!({
            "time_since_clear": since,
            "errors": nonzero.iter().map(|e| json!({"node": e.node, "reason": e.reason, "count": e.count})).collect::<Vec<_>>(),
            "total": total,
        });
        (text, data)
    }

    fn input_nodes(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for w in &self.view.workers {
            for (i, n) in w.graph.get().node_names.iter().enumerate() {
                if w.graph.get().node_is_input.get(i).copied().unwrap_or(false) && !v.contains(n) {
                    v.push(n.clone());
                }
            }
        }
        v
    }

    fn trace_add(&self, node: &str, count: u32) -> Result<(String, Value), CommandError> {
        let mut armed = 0;
        for w in &self.view.workers {
            let g = w.graph.get();
            let id =
                g.node_names.iter().enumerate().position(|(i, n)| {
                    n == node && g.node_is_input.get(i).copied().unwrap_or(false)
                });
            if let Some(id) = id {
                w.trace.get().arm(id, count);
                armed += 1;
            }
        }
        if armed == 0 {
            let inputs = self.input_nodes();
            return Err(CommandError(format!(
                "`trace add {node} {count}`: `{node}` is not an input node; accepted: {}",
                if inputs.is_empty() {
                    "(this data plane has no input node)".to_string()
                } else {
                    inputs.join(", ")
                }
            )));
        }
        Ok((
            format!(
                "tracing the next {count} packets received by {node} (on {armed} worker{})\n",
                if armed == 1 { "" } else { "s" }
            ),
            json!({"node": node, "count": count, "workers": armed}),
        ))
    }

    fn port_name(&self, port: u16) -> String {
        self.view
            .ports
            .get()
            .get(port as usize)
            .map_or_else(|| format!("port {port}"), |p| p.name.clone())
    }

    fn show_neighbours(&self) -> (String, Value) {
        let now_tsc = graph::rdtsc();
        let hz = self.view.tsc_hz.max(1);
        let mut text = String::new();
        let mut workers = Vec::new();
        for view in &self.view.neighbours {
            let snap = match view.lock() {
                Ok(g) => g.clone(),
                Err(p) => p.into_inner().clone(),
            };
            let age_ms =
                (snap.taken_tsc != 0).then(|| now_tsc.saturating_sub(snap.taken_tsc) * 1000 / hz);
            let mut rows = Vec::new();
            let mut entries = Vec::new();
            let mut sorted = snap.rows.clone();
            sorted.sort_by_key(|r| (r.port, r.ip));
            for r in &sorted {
                let mac = r.mac.map(|m| format_mac(&m));
                rows.push(vec![
                    self.port_name(r.port),
                    r.ip.to_string(),
                    mac.clone().unwrap_or_else(|| "-".into()),
                    r.state.to_string(),
                    format!("{}.{:03}", r.age_ms / 1000, r.age_ms % 1000),
                    if r.pinned { "yes".into() } else { "".into() },
                    r.queued.to_string(),
                ]);
                entries.push(json!({
                    "port": self.port_name(r.port),
                    "ip": r.ip.to_string(),
                    "mac": mac,
                    "state": r.state.to_string(),
                    "age_ms": r.age_ms,
                    "pinned": r.pinned,
                    "queued": r.queued,
                }));
            }
            let st = snap.stats;
            let counters = json!({
                "arp_requests_sent": st.arp_requests_sent,
                "ns_sent": st.ns_sent,
                "probes_sent": st.probes_sent,
                "arp_replies_sent": st.arp_replies_sent,
                "na_sent": st.na_sent,
                "learned": st.learned,
                "aged": st.aged,
                "resolution_failures": st.resolution_failures,
                "queued": st.queued,
                "released": st.released,
                "queue_drops": st.queue_drops,
                "table_full": st.table_full,
                "request_alloc_failures": st.request_alloc_failures,
            });
            text.push_str(&format!(
                "worker {} ({} entries, snapshot {}):\n",
                snap.worker,
                sorted.len(),
                age_ms.map_or_else(
                    || "not yet published".to_string(),
                    |a| format!("{a} ms old")
                )
            ));
            text.push_str(&render(
                &[
                    ("Port", Align::Left),
                    ("Address", Align::Left),
                    ("MAC", Align::Left),
                    ("State", Align::Left),
                    ("Age s", Align::Right),
                    ("Pinned", Align::Left),
                    ("Queued", Align::Right),
                ],
                &rows,
            ));
            text.push_str(&format!(
                "requests sent: {} ARP, {} NS ({} probes); replies sent: {} ARP, {} NA; learned \
                 {}, aged {}, failed {}; packets queued {}, released {}, dropped {}; table full \
                 {}\n",
                st.arp_requests_sent,
                st.ns_sent,
                st.probes_sent,
                st.arp_replies_sent,
                st.na_sent,
                st.learned,
                st.aged,
                st.resolution_failures,
                st.queued,
                st.released,
                st.queue_drops,
                st.table_full
            ));
            workers.push(json!({
                "worker": snap.worker,
                "age_ms": age_ms,
                "entries": entries,
                "counters": counters,
            }));
        }
        (text, json!({ "workers": workers }))
    }

    fn show_bridge(&self) -> (String, Value) {
        let names = &self.view.bridge_names;
        let domain_name = |id: u32| {
            names
                .get((id as usize).wrapping_sub(1))
                .cloned()
                .unwrap_or_else(|| format!("domain {id}"))
        };
        if names.is_empty() {
            return (
                "no bridge domains are configured\n".to_string(),
                json!({"domains": [], "workers": []}),
            );
        }
        let mut text = String::new();
        let mut workers = Vec::new();
        for (w, stats) in self.view.bridges.iter().enumerate() {
            let c = stats.counts();
            let snap = stats.snapshot();
            let mut rows = Vec::new();
            let mut macs = Vec::new();
            for e in &snap.entries {
                rows.push(vec![
                    domain_name(e.domain),
                    e.vlan.to_string(),
                    format_mac(&e.mac),
                    self.port_name(e.port),
                    e.age_seconds.to_string(),
                ]);
                macs.push(json!({
                    "domain": domain_name(e.domain),
                    "vlan": e.vlan,
                    "mac": format_mac(&e.mac),
                    "port": self.port_name(e.port),
                    "age_seconds": e.age_seconds,
                }));
            }
            text.push_str(&format!("worker {w}: {} MACs\n", c.macs));
            text.push_str(&render(
                &[
                    ("Bridge", Align::Left),
                    ("VLAN", Align::Right),
                    ("MAC", Align::Left),
                    ("Port", Align::Left),
                    ("Age s", Align::Right),
                ],
                &rows,
            ));
            text.push_str(&format!(
                "learned {}, aged {}, moved {}, refused (table full) {}, flooded {} ({} copies)\n",
                c.learned, c.aged, c.moves, c.refused, c.flooded, c.flood_copies
            ));
            workers.push(json!({
                "worker": w,
                "counters": {
                    "learned": c.learned,
                    "aged": c.aged,
                    "moves": c.moves,
                    "refused": c.refused,
                    "flooded": c.flooded,
                    "flood_copies": c.flood_copies,
                    "macs": c.macs,
                },
                "macs": macs,
            }));
        }
        let domains: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, n)| json!({"id": i + 1, "name": n}))
            .collect();
        (text, json!({"domains": domains, "workers": workers}))
    }

    fn show_trace(&self) -> (String, Value) {
        let mut text = String::new();
        let mut workers = Vec::new();
        let mut any = false;
        for w in &self.view.workers {
            let records = w.trace.get().snapshot();
            // Group by packet number, in packet order, keeping each packet's step order.
            let mut numbers: Vec<u32> = records.iter().map(|r| r.packet).collect();
            numbers.sort_unstable();
            numbers.dedup();
            let width = records.iter().map(|r| r.node.len()).max().unwrap_or(0);
            let mut packets = Vec::new();
            if !records.is_empty() {
                any = true;
                text.push_str(&format!("Worker {}:\n", w.index));
            }
            for p in numbers {
                let steps: Vec<_> = records.iter().filter(|r| r.packet == p).collect();
                text.push_str(&format!("Packet {p}\n"));
                for s in &steps {
                    let mut line = format!("  {:<width$}  {}", s.node, s.text);
                    if !s.next.is_empty() {
                        line.push_str(&format!(" -> {}", s.next));
                    }
                    text.push_str(line.trim_end());
                    text.push('\n');
                }
                packets.push(json!({
                    "packet": p,
                    "steps": steps.iter().map(|s| json!({"node": s.node, "text": s.text, "next": s.next})).collect::<Vec<_>>(),
                }));
            }
            if records.len() >= MAX_TRACE_RECORDS {
                text.push_str(&format!(
                    "(trace buffer full: {MAX_TRACE_RECORDS} records; later steps were not \
                     recorded)\n"
                ));
            }
            workers.push(json!({"worker": w.index, "packets": packets}));
        }
        if !any {
            text = "No packets traced. Use `trace add NODE N` first, e.g. `trace add in0-rx 10`.\n"
                .to_string();
        }
        (text, json!({"workers": workers}))
    }
}

fn cleared(what: &str, text: &str) -> (String, Value) {
    (format!("{text}\n"), json!({"cleared": what}))
}

#[cfg(test)]
mod tests;

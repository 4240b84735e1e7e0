//! `GET /metrics`: every counter of a running data plane in the Prometheus / OpenMetrics text
//! exposition — per port, per worker and node (calls, vectors, packets, clocks), per drop
//! reason, the buffer pool and the routing tables — with labels, counters as counters. Built
//! with `prometheus-client` from a fresh snapshot per scrape; it only reads counters.

use crate::health::status::{HealthStatus, TargetState};
use crate::stats::{port_counts, worker_errors, worker_nodes};
use dataplane::RuntimeView;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;

type Labels = Vec<(String, String)>;

pub(crate) fn counter_family(
    reg: &mut Registry,
    name: &str,
    help: &str,
) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    reg.register(name, help, f.clone());
    f
}

fn gauge_family(reg: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    reg.register(name, help, f.clone());
    f
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn gauge(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The exposition of `view` now.
pub fn render(view: &RuntimeView) -> String {
    render_with(view, None, None, None)
}

/// The exposition of `view`, of the health checks' `health` and of the BGP announcer's
/// status (`show bgp`'s JSON), and of what the API refused, now.
pub fn render_with(
    view: &RuntimeView,
    health: Option<&HealthStatus>,
    bgp: Option<&Value>,
    api: Option<&crate::api::ApiCounters>,
) -> String {
    let mut reg = Registry::with_prefix("vecplane");

    let rx_packets = counter_family(&mut reg, "port_rx_packets", "Packets received by a port");
    let rx_bytes = counter_family(&mut reg, "port_rx_bytes", "Bytes received by a port");
    let rx_drops = counter_family(
        &mut reg,
        "port_rx_drops",
        "Frames a port could not receive (no buffer, too large, bad record)",
    );
    let tx_packets = counter_family(&mut reg, "port_tx_packets", "Packets sent by a port");
    let tx_bytes = counter_family(&mut reg, "port_tx_bytes", "Bytes sent by a port");
    let tx_drops = counter_family(
        &mut reg,
        "port_tx_drops",
        "Packets a port could not send (ring full, write error)",
    );
    let driver_counters = counter_family(
        &mut reg,
        "port_driver_events",
        "A port driver's own counters by name (vhost-user: guest_errors, rx_bad_frames, \
         tx_no_buffers, notifications, connections)",
    );
    for p in view.ports.get().iter() {
        let c = port_counts(p);
        let l = labels(&[("port", &p.name), ("driver", &p.driver)]);
        rx_packets.get_or_create(&l).inc_by(c.rx_packets);
        rx_bytes.get_or_create(&l).inc_by(c.rx_bytes);
        rx_drops.get_or_create(&l).inc_by(c.rx_drops);
        tx_packets.get_or_create(&l).inc_by(c.tx_packets);
        tx_bytes.get_or_create(&l).inc_by(c.tx_bytes);
        tx_drops.get_or_create(&l).inc_by(c.tx_drops);
        if let Some(d) = &p.driver_counters {
            for (name, v) in d.counters() {
                let l = labels(&[("port", &p.name), ("driver", &p.driver), ("counter", name)]);
                driver_counters.get_or_create(&l).inc_by(v);
            }
        }
    }

    let calls = counter_family(&mut reg, "node_calls", "Times a node ran");
    let vectors = counter_family(&mut reg, "node_vectors", "Vectors a node processed");
    let packets = counter_family(&mut reg, "node_packets", "Packets a node processed");
    let clocks = counter_family(&mut reg, "node_clocks", "TSC ticks a node spent");
    let carried = counter_family(
        &mut reg,
        "rxq_clocks",
        "TSC ticks a receive queue's packets cost in every node (input nodes)",
    );
    let drops = counter_family(&mut reg, "drops", "Packets dropped, by node and reason");
    let sleeps = counter_family(
        &mut reg,
        "worker_sleeps",
        "Sleeps of an idle (adaptive) worker",
    );
    // Seconds, Prometheus's base unit (promtool refuses microseconds).
    let slept = Family::<Labels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register(
        "worker_slept_seconds",
        "Time an idle (adaptive) worker spent asleep",
        slept.clone(),
    );
    for w in &view.workers {
        let worker = w.index.to_string();
        let mode = match w.poll.mode() {
            dataplane::PollMode::Busy => "busy",
            dataplane::PollMode::Adaptive => "adaptive",
        };
        let l = labels(&[("worker", &worker), ("mode", mode)]);
        sleeps.get_or_create(&l).inc_by(w.idle.sleeps.get());
        slept
            .get_or_create(&l)
            .inc_by(w.idle.slept_ns.get() as f64 / 1e9);
        for n in worker_nodes(&w.graph.get()) {
            if n.calls == 0 && n.packets == 0 {
                continue;
            }
            let l = labels(&[("worker", &worker), ("node", &n.name)]);
            calls.get_or_create(&l).inc_by(n.calls);
            vectors.get_or_create(&l).inc_by(n.vectors);
            packets.get_or_create(&l).inc_by(n.packets);
            clocks.get_or_create(&l).inc_by(n.clocks);
            if n.is_input {
                carried.get_or_create(&l).inc_by(n.carried_clocks);
            }
        }
        for e in worker_errors(&w.graph.get()) {
            let l = labels(&[
                ("worker", &worker),
                ("node", &e.node),
                ("reason", &e.reason),
            ]);
            drops.get_or_create(&l).inc_by(e.count);
        }
    }

    let pool = gauge_family(&mut reg, "pool_buffers", "Buffers in each worker's pool");
    pool.get_or_create(&labels(&[("backing", &view.pool_backing)]))
        .set(gauge(view.pool_buffers));
    let free = gauge_family(
        &mut reg,
        "pool_free_buffers",
        "Free buffers in each worker's pool, as the worker last counted them",
    );
    for w in &view.workers {
        let n = w.pool_free.load(std::sync::atomic::Ordering::Relaxed);
        free.get_or_create(&labels(&[("worker", &w.index.to_string())]))
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    let tsc = gauge_family(
        &mut reg,
        "tsc_hz",
        "TSC ticks per second (node_clocks' unit)",
    );
    tsc.get_or_create(&Vec::new())
        .set(i64::try_from(view.tsc_hz).unwrap_or(i64::MAX));
    let workers = gauge_family(&mut reg, "workers", "Worker threads");
    workers
        .get_or_create(&Vec::new())
        .set(gauge(view.workers.len()));

    {
        let r = dataplane::build::lock(&view.routing);
        let (v4, v6) = r.route_counts();
        let stats = r.stats();
        let version = gauge_family(
            &mut reg,
            "routing_version",
            "Batches applied to the routing tables",
        );
        version
            .get_or_create(&Vec::new())
            .set(i64::try_from(r.version()).unwrap_or(i64::MAX));
        let routes = gauge_family(&mut reg, "routes", "Configured routes");
        routes
            .get_or_create(&labels(&[("family", "ipv4")]))
            .set(gauge(v4));
        routes
            .get_or_create(&labels(&[("family", "ipv6")]))
            .set(gauge(v6));
        let fib = gauge_family(
            &mut reg,
            "fib_entries",
            "Routes in the FIB, system ones included",
        );
        fib.get_or_create(&labels(&[("family", "ipv4")]))
            .set(gauge(stats.ip4_routes));
        fib.get_or_create(&labels(&[("family", "ipv6")]))
            .set(gauge(stats.ip6_routes));
        let bytes = gauge_family(
            &mut reg,
            "fib_memory_bytes",
            "Bytes of the FIB lookup tables",
        );
        bytes
            .get_or_create(&labels(&[("family", "ipv4")]))
            .set(gauge(stats.ip4_memory_bytes));
        bytes
            .get_or_create(&labels(&[("family", "ipv6")]))
            .set(gauge(stats.ip6_memory_bytes));
        let neighbours = gauge_family(&mut reg, "static_neighbours", "Static neighbours");
        neighbours
            .get_or_create(&Vec::new())
            .set(gauge(r.neighbours().len()));
    }

    flow_metrics(&mut reg, view);
    crate::punt_api::metrics(&mut reg, view);
    lb_metrics(&mut reg, view);
    if let Some(h) = health {
        health_metrics(&mut reg, h);
    }
    if let Some(b) = bgp {
        bgp_metrics(&mut reg, b);
    }
    if let Some(a) = api {
        api_metrics(&mut reg, a);
    }

    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// The API's admission: connections and requests refused or cut, and accept() failures for
/// want of file descriptors.
fn api_metrics(reg: &mut Registry, api: &crate::api::ApiCounters) {
    let refused = counter_family(
        reg,
        "api_refused",
        "API connections or requests refused or cut, by reason (unix-busy, tcp-busy, \
         unauthenticated-busy, per-client, auth-timeout, request-timeout)",
    );
    for (reason, n) in api.refused() {
        refused
            .get_or_create(&labels(&[("reason", reason)]))
            .inc_by(n);
    }
    let fds = counter_family(
        reg,
        "api_accept_fd_exhausted",
        "accept() calls of the API that failed for want of file descriptors (EMFILE/ENFILE)",
    );
    fds.get_or_create(&Vec::new()).inc_by(
        api.accept_fd_exhausted
            .load(std::sync::atomic::Ordering::Relaxed),
    );
}

/// The flow-mode bridges: cache counters per bridge and worker, rules, malformed packets.
fn flow_metrics(reg: &mut Registry, view: &RuntimeView) {
    if view.flows.is_empty() {
        return;
    }
    let cache = counter_family(
        reg,
        "flow_cache_events",
        "Flow cache events per bridge and worker (emc_hits, megaflow_hits, misses, installed, \
         evicted, expired, revalidated, ...)",
    );
    let megaflows = gauge_family(reg, "flow_megaflows", "Megaflows installed per worker");
    let miss_cycles = counter_family(
        reg,
        "flow_miss_cycles",
        "TSC ticks spent translating and installing cache misses",
    );
    let rules = gauge_family(reg, "flow_rules", "OpenFlow rules of a bridge");
    let malformed = counter_family(
        reg,
        "flow_malformed_packets",
        "Packets with malformed headers a flow bridge switched on what parsed",
    );
    for sw in &view.flows {
        rules
            .get_or_create(&labels(&[("bridge", sw.name())]))
            .set(gauge(sw.rule_count()));
        for (w, (stats, hist)) in sw.cache_stats().iter().enumerate() {
            let worker = w.to_string();
            for (name, v) in flow::cache::CacheStats::NAMES.iter().zip(stats.values()) {
                if *name == "megaflows" || *name == "subtables" {
                    continue;
                }
                cache
                    .get_or_create(&labels(&[
                        ("bridge", sw.name()),
                        ("worker", &worker),
                        ("event", name),
                    ]))
                    .inc_by(v);
            }
            megaflows
                .get_or_create(&labels(&[("bridge", sw.name()), ("worker", &worker)]))
                .set(i64::try_from(stats.megaflows).unwrap_or(i64::MAX));
            miss_cycles
                .get_or_create(&labels(&[("bridge", sw.name()), ("worker", &worker)]))
                .inc_by(hist.sum);
        }
        for (w, shared) in sw.workers().iter().enumerate() {
            let worker = w.to_string();
            for (reason, n) in shared.malformed_counts() {
                if n > 0 {
                    malformed
                        .get_or_create(&labels(&[
                            ("bridge", sw.name()),
                            ("worker", &worker),
                            ("reason", reason),
                        ]))
                        .inc_by(n);
                }
            }
        }
    }
}

/// The load balancer: counters per VIP and per server (gauges for live flows and weights),
/// the node's own counters and the tables' version.
fn lb_metrics(reg: &mut Registry, view: &RuntimeView) {
    let lb = &view.lb;
    if !lb.in_use() {
        return;
    }
    let version = gauge_family(reg, "lb_version", "Changes applied to the load balancer");
    version
        .get_or_create(&Vec::new())
        .set(i64::try_from(lb.version()).unwrap_or(i64::MAX));
    let state = lb.state();
    let memory = state.memory_use();
    for (name, help, value) in [
        (
            "lb_memory_bytes",
            "Bytes the load balancer's tables take (Maglev tables and every worker's flow tables)",
            memory.total(),
        ),
        (
            "lb_memory_limit_bytes",
            "The cap on the load balancer's tables ([lb] memory-limit)",
            state.memory_budget().limit,
        ),
    ] {
        gauge_family(reg, name, help)
            .get_or_create(&Vec::new())
            .set(i64::try_from(value).unwrap_or(i64::MAX));
    }
    let vip_help = [
        ("packets", "Packets a VIP sent to its servers"),
        (
            "bytes",
            "Bytes a VIP sent to its servers (IP length before encapsulation)",
        ),
        ("new_flows", "Flows a VIP created"),
        (
            "nonsyn_misses",
            "Non-SYN packets of a VIP without a flow entry (ECMP moves, aged flows)",
        ),
        (
            "no_server",
            "Packets of a VIP dropped for want of a server with weight > 0",
        ),
        (
            "table_full",
            "Packets of a VIP hashed without a flow entry: the flow table was full",
        ),
        ("fragments", "Fragments of a VIP"),
        (
            "icmp_errors",
            "ICMP errors about a VIP's flows sent after them",
        ),
        (
            "too_big",
            "Packets of a VIP answered with fragmentation needed / packet too big",
        ),
    ];
    let vip_counters: Vec<(&str, Family<Labels, Counter>)> = vip_help
        .iter()
        .map(|(n, h)| (*n, counter_family(reg, &format!("lb_vip_{n}"), h)))
        .collect();
    let vip_live = gauge_family(
        reg,
        "lb_vip_live_flows",
        "Flow-table entries alive of a VIP",
    );
    let vip_servers = gauge_family(
        reg,
        "lb_vip_active_servers",
        "Servers of a VIP with weight > 0 (in its Maglev table)",
    );
    let as_help = [
        ("packets", "Packets sent to a server"),
        ("bytes", "Bytes sent to a server"),
        ("new_flows", "Flows assigned to a server"),
    ];
    let as_counters: Vec<(&str, Family<Labels, Counter>)> = as_help
        .iter()
        .map(|(n, h)| (*n, counter_family(reg, &format!("lb_as_{n}"), h)))
        .collect();
    let as_live = gauge_family(
        reg,
        "lb_as_live_flows",
        "Flow-table entries alive of a server",
    );
    let as_weight = gauge_family(
        reg,
        "lb_as_weight",
        "A server's weight (0: draining or removed), labelled with its state",
    );
    let node = counter_family(
        reg,
        "lb_node_packets",
        "Packets the LB node counts besides the per-VIP counters, by reason \
         (no_vip_for_port, malformed, nat_replies, nat_reply_misses, probes, probes_unleased, \
         gre_fragmented: packets cut into inner fragments for a GRE tunnel, gre_fragments: the \
         fragments)",
    );
    let n = lb.node_totals();
    for (name, v) in dataplane::lb::NodeTotals::NAMES.iter().zip(n.values()) {
        node.get_or_create(&labels(&[("reason", name)])).inc_by(v);
    }
    lb.with_tables(|t| {
        for v in t.vips() {
            let id = v.id.0.to_string();
            let key = v.key.to_string();
            let l = labels(&[("vip", &key), ("id", &id), ("encap", v.encap.name())]);
            let totals = lb.vip_totals(v.id);
            let values = dataplane::lb::VipTotals::NAMES
                .iter()
                .zip(totals.values())
                .collect::<Vec<_>>();
            for (name, fam) in &vip_counters {
                if let Some((_, value)) = values.iter().find(|(n, _)| **n == *name) {
                    fam.get_or_create(&l).inc_by(*value);
                }
            }
            vip_live
                .get_or_create(&l)
                .set(i64::try_from(totals.live_flows).unwrap_or(i64::MAX));
            vip_servers
                .get_or_create(&l)
                .set(i64::from(v.active_servers));
            for &slot in &v.slots {
                let a = t.as_entry(slot);
                let addr = a.addr.to_string();
                let l = labels(&[("vip", &key), ("id", &id), ("server", &addr)]);
                let c = lb.slot_totals(slot);
                for (name, fam) in &as_counters {
                    let value = match *name {
                        "packets" => c.packets,
                        "bytes" => c.bytes,
                        _ => c.new_flows,
                    };
                    fam.get_or_create(&l).inc_by(value);
                }
                as_live
                    .get_or_create(&l)
                    .set(i64::try_from(c.live_flows).unwrap_or(i64::MAX));
                let mut lw = l.clone();
                lw.push((
                    "state".to_string(),
                    crate::lb_api::state_name(a.state).to_string(),
                ));
                as_weight.get_or_create(&lw).set(i64::from(a.weight));
            }
        }
    });
}

/// The health checks: per probed server its state, its probes by result and its state
/// changes; the runner's totals.
fn health_metrics(reg: &mut Registry, h: &HealthStatus) {
    let up = gauge_family(
        reg,
        "lb_health_up",
        "A checked server's health: 1 up, 0 down (unprobed servers are left out)",
    );
    let probes = counter_family(
        reg,
        "lb_health_probes",
        "Health probes of a server by result (ok, or the failure reason)",
    );
    let changes = counter_family(
        reg,
        "lb_health_transitions",
        "Times a checked server went down or came up",
    );
    let running = gauge_family(
        reg,
        "lb_health_running",
        "1 while the health checks run, 0 when they could not start",
    );
    running
        .get_or_create(&Vec::new())
        .set(i64::from(h.error.is_none()));
    counter_family(
        reg,
        "lb_health_probes_delayed",
        "Health probes that went out late because every probe-band port was in use",
    )
    .get_or_create(&Vec::new())
    .inc_by(h.totals.delayed);
    for t in &h.targets {
        let vip = t.vip.to_string();
        let server = t.server.to_string();
        let l = labels(&[("vip", &vip), ("server", &server), ("check", t.kind)]);
        match t.state {
            TargetState::Up => {
                up.get_or_create(&l).set(1);
            }
            TargetState::Down => {
                up.get_or_create(&l).set(0);
            }
            TargetState::Unprobed => {}
        }
        let mut lr = l.clone();
        lr.push(("result".to_string(), "ok".to_string()));
        probes.get_or_create(&lr).inc_by(t.ok);
        for (reason, n) in &t.failures {
            let mut lr = l.clone();
            lr.push(("result".to_string(), reason.to_string()));
            probes.get_or_create(&lr).inc_by(*n);
        }
        changes.get_or_create(&l).inc_by(t.transitions);
    }
}

/// The BGP announcer: what is announced, whether the node serves and the liveness device is
/// up, and its counters.
fn bgp_metrics(reg: &mut Registry, b: &Value) {
    let announced = gauge_family(
        reg,
        "bgp_announced",
        "1 for each VIP prefix this node announces through BIRD",
    );
    for p in b["announced"].as_array().into_iter().flatten() {
        if let Some(p) = p.as_str() {
            announced.get_or_create(&labels(&[("prefix", p)])).set(1);
        }
    }
    let phase = gauge_family(
        reg,
        "bgp_phase",
        "1 for the announcer's phase (waiting, serving, draining, ready, stopping)",
    );
    if let Some(p) = b["phase"].as_str() {
        phase.get_or_create(&labels(&[("phase", p)])).set(1);
    }
    let up = gauge_family(
        reg,
        "bgp_liveness_up",
        "1 while the liveness device the VIP routes go via is up (down: a worker stalled)",
    );
    up.get_or_create(&Vec::new())
        .set(i64::from(b["liveness_up"] == true));
    for (key, help) in [
        (
            "configures",
            "Times BIRD was asked to re-read the routes file",
        ),
        (
            "errors",
            "Failed writes of the routes file or refused BIRD requests",
        ),
        (
            "stalls",
            "Times a worker stalled and the liveness device went down",
        ),
        ("announcements", "VIP prefixes announced"),
        ("withdrawals", "VIP prefixes withdrawn"),
    ] {
        let fam = counter_family(reg, &format!("bgp_{key}"), help);
        fam.get_or_create(&Vec::new())
            .inc_by(b[key].as_u64().unwrap_or(0));
    }
}

/// The same in the classic Prometheus text format (0.0.4), which `promtool check metrics` and
/// older scrapers read: a counter's HELP and TYPE lines name its `_total` samples, and there is
/// no `# EOF`.
pub fn render_text(view: &RuntimeView) -> String {
    to_text_format(&render(view))
}

/// OpenMetrics text as Prometheus text format 0.0.4.
pub fn to_text_format(openmetrics: &str) -> String {
    let lines: Vec<&str> = openmetrics.lines().collect();
    let counters: std::collections::HashSet<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for l in lines {
        if l == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = l.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        match renamed {
            Some(r) => out.push_str(&r),
            None => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;

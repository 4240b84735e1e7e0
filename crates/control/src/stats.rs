//! Counter snapshots: reads the data plane's single-writer counters through `RuntimeView`, sums them
//! over workers, subtracts control-side baselines, and builds the `run --stats-json` object.
//! It only loads atomics; it never writes or resets a counter and never touches packets.

use dataplane::{DataplaneSpec, PortView, RuntimeView};
use graph::GraphStats;
use serde_json::{json, Value};

/// One node's counters (one worker, or summed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeCounts {
    pub name: String,
    pub is_input: bool,
    pub calls: u64,
    pub vectors: u64,
    pub packets: u64,
    pub clocks: u64,
    /// Input nodes: ticks their packets cost in every node (`NodeStats::carried_clocks`).
    pub carried_clocks: u64,
}

impl NodeCounts {
    /// Clocks per packet (0 when no packets).
    pub fn clocks_per_packet(&self) -> f64 {
        crate::table::ratio(self.clocks, self.packets)
    }

    /// Packets per call, VPP's "vectors/call" (0 when never called).
    pub fn vectors_per_call(&self) -> f64 {
        crate::table::ratio(self.packets, self.calls)
    }

    pub fn minus(&self, base: &NodeCounts) -> NodeCounts {
        NodeCounts {
            name: self.name.clone(),
            is_input: self.is_input,
            calls: self.calls.wrapping_sub(base.calls),
            vectors: self.vectors.wrapping_sub(base.vectors),
            packets: self.packets.wrapping_sub(base.packets),
            clocks: self.clocks.wrapping_sub(base.clocks),
            carried_clocks: self.carried_clocks.wrapping_sub(base.carried_clocks),
        }
    }

    fn add(&mut self, o: &NodeCounts) {
        self.calls = self.calls.wrapping_add(o.calls);
        self.vectors = self.vectors.wrapping_add(o.vectors);
        self.packets = self.packets.wrapping_add(o.packets);
        self.clocks = self.clocks.wrapping_add(o.clocks);
        self.carried_clocks = self.carried_clocks.wrapping_add(o.carried_clocks);
    }

    pub fn json(&self, with_vpc: bool) -> Value {
        let mut v = json!({
            "name": self.name,
            "calls": self.calls,
            "vectors": self.vectors,
            "packets": self.packets,
            "clocks": self.clocks,
            "clocks_per_packet": self.clocks_per_packet(),
        });
        if with_vpc {
            v["vectors_per_call"] = json!(self.vectors_per_call());
        }
        v
    }
}

/// The nodes of one worker's graph, by node id.
pub(crate) fn worker_nodes(g: &GraphStats) -> Vec<NodeCounts> {
    g.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodeCounts {
            name: g.node_names.get(i).cloned().unwrap_or_default(),
            is_input: g.node_is_input.get(i).copied().unwrap_or(false),
            calls: n.calls.get(),
            vectors: n.vectors.get(),
            packets: n.packets.get(),
            clocks: n.clocks.get(),
            carried_clocks: n.carried_clocks.get(),
        })
        .collect()
}

/// Sum per-worker node lists by node name (order of first appearance).
pub(crate) fn sum_nodes(per_worker: &[Vec<NodeCounts>]) -> Vec<NodeCounts> {
    let mut out: Vec<NodeCounts> = Vec::new();
    for w in per_worker {
        for n in w {
            match out.iter_mut().find(|o| o.name == n.name) {
                Some(o) => o.add(n),
                None => out.push(n.clone()),
            }
        }
    }
    out
}

/// Subtract a baseline taken from the same graph (matched by position and name).
pub(crate) fn minus_nodes(now: &[NodeCounts], base: Option<&Vec<NodeCounts>>) -> Vec<NodeCounts> {
    now.iter()
        .enumerate()
        .map(|(i, n)| match base.and_then(|b| b.get(i)) {
            Some(b) if b.name == n.name => n.minus(b),
            _ => n.clone(),
        })
        .collect()
}

/// One port's counters summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PortCounts {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_drops: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_drops: u64,
}

impl PortCounts {
    pub fn minus(&self, b: &PortCounts) -> PortCounts {
        PortCounts {
            rx_packets: self.rx_packets.wrapping_sub(b.rx_packets),
            rx_bytes: self.rx_bytes.wrapping_sub(b.rx_bytes),
            rx_drops: self.rx_drops.wrapping_sub(b.rx_drops),
            tx_packets: self.tx_packets.wrapping_sub(b.tx_packets),
            tx_bytes: self.tx_bytes.wrapping_sub(b.tx_bytes),
            tx_drops: self.tx_drops.wrapping_sub(b.tx_drops),
        }
    }
}

pub(crate) fn port_counts(p: &PortView) -> PortCounts {
    let mut c = PortCounts::default();
    for s in &p.stats {
        c.rx_packets = c.rx_packets.wrapping_add(s.rx_packets.get());
        c.rx_bytes = c.rx_bytes.wrapping_add(s.rx_bytes.get());
        c.rx_drops = c.rx_drops.wrapping_add(s.rx_drops.get());
        c.tx_packets = c.tx_packets.wrapping_add(s.tx_packets.get());
        c.tx_bytes = c.tx_bytes.wrapping_add(s.tx_bytes.get());
        c.tx_drops = c.tx_drops.wrapping_add(s.tx_drops.get());
    }
    c
}

/// One error counter: (node, reason, count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ErrorCount {
    pub node: String,
    pub reason: String,
    pub count: u64,
}

/// The error counters of one worker, by error id.
pub(crate) fn worker_errors(g: &GraphStats) -> Vec<ErrorCount> {
    g.errors
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (node, reason) = g.error_names.get(i).cloned().unwrap_or_default();
            ErrorCount {
                node,
                reason,
                count: c.get(),
            }
        })
        .collect()
}

/// Sum per-worker error lists by (node, reason), order of first appearance; subtracts `base`
/// (per worker, same shape) when given.
pub(crate) fn sum_errors(
    per_worker: &[Vec<ErrorCount>],
    base: Option<&Vec<Vec<ErrorCount>>>,
) -> Vec<ErrorCount> {
    let mut out: Vec<ErrorCount> = Vec::new();
    for (w, errs) in per_worker.iter().enumerate() {
        for (i, e) in errs.iter().enumerate() {
            let b = base
                .and_then(|b| b.get(w))
                .and_then(|b| b.get(i))
                .filter(|b| b.node == e.node && b.reason == e.reason)
                .map(|b| b.count)
                .unwrap_or(0);
            let n = e.count.wrapping_sub(b);
            match out
                .iter_mut()
                .find(|o| o.node == e.node && o.reason == e.reason)
            {
                Some(o) => o.count = o.count.wrapping_add(n),
                None => out.push(ErrorCount {
                    node: e.node.clone(),
                    reason: e.reason.clone(),
                    count: n,
                }),
            }
        }
    }
    out
}

/// The object `vecplane run --stats-json` writes: ports, nodes and errors summed over workers
/// (all of them, zeros included), the total of graph drops, and the pool.
///
/// ```text
/// {"ports":  [{"name","driver","rx_packets","rx_bytes","rx_drops","tx_packets","tx_bytes","tx_drops",
///              "failure"}],    // failure: why the port stopped early (a bad pcap record), or null
///  "nodes":  [{"name","calls","vectors","packets","clocks","clocks_per_packet"}],
///  "errors": [{"node","reason","count"}],
///  "drops_total": N,            // sum of all error counters (packets the graph dropped)
///  "pool": {"backing","buffers","data_size"},
///  "workers": N, "tsc_hz": N,
///  "flows": [{"bridge", "rules": [dump-flows items with n_packets], "cache": {counters},
///             "malformed": {REASON: N}}],   // bridges in flow mode (empty without)
///  "lb": {what GET /v1/lb answers} | null}    // the load balancer (null unless [lb] or a VIP)
/// ```
pub fn final_stats_json(view: &RuntimeView, spec: &DataplaneSpec) -> Value {
    let ports: Vec<Value> = view
        .ports
        .get()
        .iter()
        .map(|p| {
            let c = port_counts(p);
            json!({
                "name": p.name,
                "driver": p.driver,
                "rx_packets": c.rx_packets,
                "rx_bytes": c.rx_bytes,
                "rx_drops": c.rx_drops,
                "tx_packets": c.tx_packets,
                "tx_bytes": c.tx_bytes,
                "tx_drops": c.tx_drops,
                "failure": p.failure(),
            })
        })
        .collect();
    let per_worker: Vec<Vec<NodeCounts>> = view
        .workers
        .iter()
        .map(|w| worker_nodes(&w.graph.get()))
        .collect();
    let nodes: Vec<Value> = sum_nodes(&per_worker)
        .iter()
        .map(|n| n.json(false))
        .collect();
    let errs: Vec<Vec<ErrorCount>> = view
        .workers
        .iter()
        .map(|w| worker_errors(&w.graph.get()))
        .collect();
    let errors = sum_errors(&errs, None);
    let drops_total: u64 = errors.iter().map(|e| e.count).sum();
    // Flood copies (packets the graph made besides those it received).
    let emitted_total: u64 = view
        .workers
        .iter()
        .map(|w| {
            w.graph
                .get()
                .nodes
                .iter()
                .map(|n| n.emitted.get())
                .sum::<u64>()
        })
        .sum();
    json!({
        "neighbours": neighbour_totals(view),
        "emitted_total": emitted_total,
        "ports": ports,
        "nodes": nodes,
        "errors": errors.iter().map(|e| json!({"node": e.node, "reason": e.reason, "count": e.count})).collect::<Vec<_>>(),
        "drops_total": drops_total,
        "pool": {
            "backing": view.pool_backing,
            "buffers": view.pool_buffers,
            "data_size": spec.data_size,
        },
        "workers": view.workers.len(),
        "tsc_hz": view.tsc_hz,
        "flows": flow_bridges(view),
        "lb": view.lb.in_use().then(|| crate::lb_api::overview(&view.lb)),
    })
}

/// Each flow-mode bridge's rules with their counters, cache counters and malformed frames
/// summed over workers (what `dump-flows` and `show flow-cache` show, kept at exit).
fn flow_bridges(view: &RuntimeView) -> Value {
    let caches = crate::flows_api::flow_cache(view);
    let list: Vec<Value> = view
        .flows
        .iter()
        .map(|sw| {
            let cache = caches["bridges"]
                .as_array()
                .and_then(|b| b.iter().find(|b| b["bridge"] == sw.name()))
                .map(|b| b["total"].clone())
                .unwrap_or(Value::Null);
            let mut malformed = serde_json::Map::new();
            for w in sw.workers() {
                for (reason, n) in w.malformed_counts() {
                    let sum = malformed.get(reason).and_then(Value::as_u64).unwrap_or(0) + n;
                    malformed.insert(reason.to_string(), json!(sum));
                }
            }
            malformed.retain(|_, n| n.as_u64() != Some(0));
            json!({
                "bridge": sw.name(),
                "rules": crate::flows_api::dump_flows(sw)["flows"].clone(),
                "cache": cache,
                "malformed": malformed,
            })
        })
        .collect();
    Value::Array(list)
}

/// ARP/ND counters summed over workers (as last published; the worker publishes at stop).
fn neighbour_totals(view: &RuntimeView) -> Value {
    let mut t = json!({});
    let mut sums = [0u64; 9];
    for v in &view.neighbours {
        let s = match v.lock() {
            Ok(g) => g.stats,
            Err(p) => p.into_inner().stats,
        };
        let vals = [
            s.arp_requests_sent,
            s.ns_sent,
            s.arp_replies_sent,
            s.na_sent,
            s.learned,
            s.queued,
            s.released,
            s.queue_drops,
            s.resolution_failures,
        ];
        for (a, b) in sums.iter_mut().zip(vals) {
            *a += b;
        }
    }
    let keys = [
        "arp_requests_sent",
        "ns_sent",
        "arp_replies_sent",
        "na_sent",
        "learned",
        "queued",
        "released",
        "queue_drops",
        "resolution_failures",
    ];
    for (k, v) in keys.iter().zip(sums) {
        t[*k] = json!(v);
    }
    // Frames vecplane made itself (requests); replies reuse the request's buffer.
    t["originated"] = json!(sums[0] + sums[1]);
    t
}

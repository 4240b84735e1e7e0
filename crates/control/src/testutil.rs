//! Test helpers: temporary directories and a hand-made `RuntimeView` (no data plane needed).
//! Test-only; never compiled into the library.

use dataplane::{DataplaneSpec, PortView, RuntimeView, WorkerView};
use graph::{Counter, GraphStats, NodeStats, PortStats, TraceControl};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "vecplane-control-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Node names of the fake graph (`in0-rx` and `out0-rx` are input nodes; `unused` never runs).
pub(crate) const NODES: &[&str] = &[
    "in0-rx",
    "out0-rx",
    "ethernet-input",
    "ip4-input",
    "ip4-lookup",
    "out0-tx",
    "unused",
];

/// Error counters of the fake graph.
pub(crate) const ERRORS: &[(&str, &str)] = &[
    ("ip4-input", "ttl-expired"),
    ("ip4-lookup", "no-route"),
    ("ethernet-input", "unknown-ethertype"),
];

pub(crate) fn graph_stats() -> Arc<GraphStats> {
    Arc::new(GraphStats {
        node_names: NODES.iter().map(|s| s.to_string()).collect(),
        node_is_input: NODES.iter().map(|n| n.ends_with("-rx")).collect(),
        nodes: NODES.iter().map(|_| NodeStats::default()).collect(),
        error_names: ERRORS
            .iter()
            .map(|(n, r)| (n.to_string(), r.to_string()))
            .collect(),
        errors: ERRORS.iter().map(|_| Counter::default()).collect(),
    })
}

/// A view with two ports (in0, out0) and `workers` workers, all counters zero, whose routing
/// tables hold the routes of `spec()`.
pub(crate) fn view(workers: usize) -> RuntimeView {
    view_with(workers, &spec())
}

/// `view`, with the routing tables of `spec`.
pub(crate) fn view_with(workers: usize, spec: &DataplaneSpec) -> RuntimeView {
    let ws: Vec<WorkerView> = (0..workers)
        .map(|i| WorkerView {
            index: i,
            cpu: Some(i + 1),
            graph: dataplane::view::Published::new(graph_stats()),
            trace: dataplane::view::Published::new(Arc::new(TraceControl::new(NODES.len()))),
            poll: Arc::new(dataplane::idle::PollSetting::new(
                dataplane::PollMode::Adaptive,
                1000,
            )),
            idle: Arc::new(dataplane::idle::IdleStats::default()),
            pool_free: Arc::default(),
        })
        .collect();
    let port = |name: &str, mac: [u8; 6]| PortView {
        name: name.to_string(),
        driver: "pcap".to_string(),
        detail: String::new(),
        mac,
        stats: (0..workers)
            .map(|_| Arc::new(PortStats::default()))
            .collect(),
        driver_counters: None,
    };
    RuntimeView {
        port_control: None,
        policies: dataplane::LivePolicies::new(spec),
        ports: dataplane::view::Published::new(Arc::new(vec![
            port("in0", [2, 0, 0, 0, 1, 1]),
            port("out0", [2, 0, 0, 0, 1, 2]),
        ])),
        workers: ws,
        pool_backing: "normal pages".to_string(),
        pool_buffers: 16384,
        tsc_hz: 2_000_000_000,
        neighbours: Vec::new(),
        bridges: Vec::new(),
        bridge_names: Vec::new(),
        capture: Arc::new(graph::CaptureControl::new(workers)),
        flows: Vec::new(),
        lb: {
            let lb = dataplane::lb::LbControl::without_workers(
                lb::model::LbState::new(),
                vec!["in0".into(), "out0".into()],
                workers,
            );
            lb.set_configured(false);
            Arc::new(lb)
        },
        rxq: None,
        features: Arc::new(dataplane::features::FeatureArcs::none(2)),
        channels: Arc::new(dataplane::channels::Channels::new(spec, &[], 2_000_000_000)),
        routing: Arc::new(std::sync::Mutex::new(
            dataplane::routing::Routing::without_workers(spec)
                .expect("an empty routing table builds"),
        )),
    }
}

/// Add to node `name`'s counters on worker `w`.
pub(crate) fn run_node(
    v: &RuntimeView,
    w: usize,
    name: &str,
    calls: u64,
    vectors: u64,
    packets: u64,
    clocks: u64,
) {
    let g = v.workers[w].graph.get();
    let i = g.node_names.iter().position(|n| n == name).unwrap();
    let n = &g.nodes[i];
    n.calls.add(calls);
    n.vectors.add(vectors);
    n.packets.add(packets);
    n.clocks.add(clocks);
}

/// Add to error counter (node, reason) on worker `w`.
pub(crate) fn count_error(v: &RuntimeView, w: usize, node: &str, reason: &str, n: u64) {
    let g = v.workers[w].graph.get();
    let i = g.error_id(node, reason).unwrap();
    g.errors[i].add(n);
}

/// The spec the fake view pretends to run: in0/out0 with v4+v6 addresses, neighbours, routes.
pub(crate) fn spec() -> DataplaneSpec {
    crate::config::parse_config(SPEC, "fake.toml", Path::new("/base")).unwrap()
}

pub(crate) const SPEC: &str = r#"
[[port]]
name = "in0"
driver = "pcap"
mac = "02:00:00:00:01:01"
ip4 = ["198.18.1.1/24"]
ip6 = ["2001:db8:1::1/64"]
rx = "in.pcap"

[[port]]
name = "out0"
driver = "pcap"
mac = "02:00:00:00:01:02"
mtu = 9000
ip4 = ["198.18.3.1/24"]
ip6 = ["2001:db8:3::1/64"]
tx = "out.pcap"

[[neighbour]]
ip = "198.18.1.2"
mac = "02:00:00:00:02:02"
port = "in0"

[[neighbour]]
ip = "198.18.3.2"
mac = "02:00:00:00:03:02"
port = "out0"

[[neighbour]]
ip = "2001:db8:3::2"
mac = "02:00:00:00:03:03"
port = "out0"

[[route]]
prefix = "198.18.0.0/15"
via = "198.18.1.2"

[[route]]
prefix = "198.18.2.0/24"
via = ["198.18.1.2", "198.18.3.2"]

[[route]]
prefix = "198.18.2.128/25"
action = "drop"

[[route]]
prefix = "2001:db8:2::/48"
via = "2001:db8:3::2"
"#;

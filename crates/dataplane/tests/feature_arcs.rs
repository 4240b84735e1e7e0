//! Features on the arcs, through the real graph on memory ports: a packet visits only the
//! features enabled for its port, in the arc's order, and enabling and disabling them while
//! packets flow loses none.

mod support;

use dataplane::features::{ArcChange, FeatureBuild, WorkerFeature};
use dataplane::*;
use graph::arc::{ArcConfig, ArcCursor, FeatureDecl};
use graph::{Dispatch, Node, NodeContext};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_B: [u8; 6] = [2, 0, 0, 0, 2, 2];

/// A feature node that counts the packets it sees, by port, and passes them on along its arc.
struct Counting {
    name: String,
    next_nodes: Vec<String>,
    cursor: ArcCursor,
    config: live::Reader<ArcConfig>,
    seen: Arc<[AtomicU64; 4]>,
    by_tx_port: bool,
}

impl Node for Counting {
    fn name(&self) -> &str {
        &self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        self.next_nodes.clone()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let masks = self.config.get().masks(self.cursor.arc());
        for (i, &b) in frame.iter().enumerate() {
            let m = cx.pool.meta(b);
            let port = usize::from(if self.by_tx_port {
                m.tx_port
            } else {
                m.rx_port
            });
            if let Some(c) = self.seen.get(port) {
                c.fetch_add(1, Ordering::Relaxed);
            }
            nexts[i] = self.cursor.next(masks, port);
        }
        Dispatch::PerPacket
    }
}

/// Three features: `first` and `second` on ip4-unicast (`second` registered first but ordered
/// after `first`), `tx` on output.
struct Counters {
    seen: [Arc<[AtomicU64; 4]>; 3],
}

const FEATURES: [(&str, &str, &str); 3] = [
    ("ip4-unicast", "second", "count-second"),
    ("ip4-unicast", "first", "count-first"),
    ("output", "tx", "count-tx"),
];

impl WorkerFeature for Counters {
    fn name(&self) -> &str {
        "counters"
    }
    fn arcs(&self) -> Vec<FeatureDecl> {
        vec![
            FeatureDecl::new(FEATURES[0].0, FEATURES[0].1, FEATURES[0].2).after("first"),
            FeatureDecl::new(FEATURES[1].0, FEATURES[1].1, FEATURES[1].2),
            FeatureDecl::new(FEATURES[2].0, FEATURES[2].1, FEATURES[2].2),
        ]
    }
    fn add_nodes(&self, cx: &mut FeatureBuild<'_>) -> Result<(), BuildError> {
        for ((arc, feature, node), seen) in FEATURES.iter().zip(&self.seen) {
            let id = cx.arcs.arc_id(arc).expect("a standard arc");
            let pos = cx.arcs.position(id, feature).expect("registered");
            cx.graph.add_node(Box::new(Counting {
                name: node.to_string(),
                next_nodes: cx.arcs.next_nodes(id, Some(pos)),
                cursor: cx.arcs.cursor_at(id, Some(pos), 0),
                config: (cx.config)(),
                seen: seen.clone(),
                by_tx_port: *arc == "output",
            }));
        }
        Ok(())
    }
}

/// A memory port sending `limit` frames to 198.19.1.1 (None: only receiving).
fn memory_port(name: &str, mac: [u8; 6], limit: Option<u64>) -> PortSpec {
    let to = |n| {
        let src = "198.18.0.5".parse().expect("ip");
        (src, vec!["198.19.1.1".parse::<IpAddr>().expect("ip")], n)
    };
    support::memory_port(name, mac, 1024, limit.map(to))
}

/// Ports a and c send `packets` each to 198.19.1.1, routed out of port b.
fn spec(packets: u64) -> DataplaneSpec {
    let mut a = memory_port("a", MAC_A, Some(packets));
    a.ip4 = vec![("198.18.0.1".parse().expect("ip"), 24)];
    let mut b = memory_port("b", MAC_B, None);
    b.ip4 = vec![("198.18.2.1".parse().expect("ip"), 24)];
    let mut c = memory_port("c", [2, 0, 0, 0, 0, 3], Some(packets));
    c.ip4 = vec![("198.18.0.1".parse().expect("ip"), 24)];
    DataplaneSpec {
        ports: vec![a, b, c],
        neighbours: vec![NeighbourSpec {
            ip: "198.18.2.2".parse().expect("ip"),
            mac: PEER_B,
            port: 1,
        }],
        routes4: vec![RouteSpec {
            prefix: "198.19.0.0".parse().expect("ip"),
            len: 16,
            target: RouteTarget::Via(vec!["198.18.2.2".parse().expect("ip")]),
        }],
        ..DataplaneSpec::default()
    }
}

fn change(arc: &str, feature: &str, port: usize, enable: bool) -> ArcChange {
    ArcChange {
        arc: arc.into(),
        feature: feature.into(),
        port,
        enable,
    }
}

fn counters() -> Arc<Counters> {
    Arc::new(Counters {
        seen: std::array::from_fn(|_| Arc::new(std::array::from_fn(|_| AtomicU64::new(0)))),
    })
}

#[test]
fn a_packet_visits_only_the_features_enabled_for_its_port() {
    let c = counters();
    let mut dp =
        Dataplane::with_features(&spec(5_000), 2_596_000_000, vec![c.clone()]).expect("build");
    let features = dp.view().features.clone();
    let order: Vec<String> = features.layout().arcs()[0]
        .features
        .iter()
        .map(|(f, _)| f.clone())
        .collect();
    assert_eq!(order, ["first", "second"], "ordered by the constraint");
    let changed = features
        .apply(&[
            change("ip4-unicast", "second", 0, true),
            change("ip4-unicast", "first", 2, true),
            change("output", "tx", 1, true),
        ])
        .expect("valid changes");
    assert_eq!(changed, 3);
    // A change naming a feature that does not exist is refused whole.
    let e = features
        .apply(&[
            change("ip4-unicast", "first", 0, true),
            change("ip4-unicast", "third", 0, true),
        ])
        .expect_err("no such feature");
    assert!(e.to_string().contains("first, second"), "{e}");
    assert!(!features
        .current()
        .is_enabled(features.layout(), "ip4-unicast", "first", 0));
    dp.run_inline(&AtomicBool::new(false), None);
    let got = |f: usize, port: usize| c.seen[f][port].load(Ordering::Relaxed);
    // FEATURES order: second, first, tx.
    assert_eq!((got(0, 0), got(0, 2)), (5_000, 0), "second: port a only");
    assert_eq!((got(1, 0), got(1, 2)), (0, 5_000), "first: port c only");
    assert_eq!(got(2, 1), 10_000, "tx: everything leaving port b");
    assert_eq!(dp.view().ports.get()[1].stats[0].tx_packets.get(), 10_000);
    // A removed port's features go with it; the other ports keep theirs.
    assert_eq!(features.disable_port(0).expect("disable"), 1);
    assert_eq!(features.disable_port(0).expect("again"), 0);
    let now = features.current();
    let on = |arc: &str, f: &str, port: usize| now.is_enabled(features.layout(), arc, f, port);
    assert!(!on("ip4-unicast", "second", 0));
    assert!(on("ip4-unicast", "first", 2) && on("output", "tx", 1));
}

#[test]
fn features_change_while_packets_flow_and_none_is_lost() {
    let c = counters();
    let packets = 200_000;
    let mut dp =
        Dataplane::with_features(&spec(packets), 2_596_000_000, vec![c.clone()]).expect("build");
    let features = dp.view().features.clone();
    let done = Arc::new(AtomicBool::new(false));
    let toggler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut on = true;
            let mut rounds = 0u64;
            while !done.load(Ordering::Relaxed) {
                let changes = [
                    change("ip4-unicast", "first", 0, on),
                    change("ip4-unicast", "second", 2, !on),
                    change("output", "tx", 1, on),
                ];
                features.apply(&changes).expect("valid changes");
                on = !on;
                rounds += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            rounds
        })
    };
    dp.run_inline(&AtomicBool::new(false), None);
    done.store(true, Ordering::Relaxed);
    let rounds = toggler.join().expect("toggler");
    assert!(rounds > 0);
    let v = dp.view();
    let tx: u64 = v.ports.get()[1]
        .stats
        .iter()
        .map(|s| s.tx_packets.get())
        .sum();
    let drops: u64 = v.workers.iter().map(|w| w.graph.get().total_drops()).sum();
    assert_eq!((tx, drops), (2 * packets, 0), "every packet forwarded");
}

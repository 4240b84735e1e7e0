//! Tests of graph edits: appended nodes, inputs and arcs carry packets with the old ids and
//! counters; a refused edit changes nothing; a retired node frees and counts what reaches it;
//! inputs are held, activated, drained and parked; repeated add and retire leak nothing; random
//! edit sequences keep the graph's tables consistent.

use super::*;
use crate::dispatch::GraphBuilder;
use packet::PoolConfig;
use proptest::prelude::*;
use std::sync::atomic::AtomicU64;

/// `remaining` packets, `burst` a poll, all to `next`.
struct Source {
    name: String,
    next: String,
    remaining: u64,
    burst: usize,
}

impl InputNode for Source {
    fn name(&self) -> &str {
        &self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        let want = (self.remaining as usize).min(self.burst).min(out.len());
        let n = cx.pool.alloc_batch(&mut out[..want]);
        for &b in &out[..n] {
            cx.pool.write_packet(b, &[1; 60]);
        }
        self.remaining -= n as u64;
        (n, Dispatch::AllTo(0))
    }
    fn is_finished(&self) -> bool {
        self.remaining == 0
    }
}

fn source(name: &str, next: &str, remaining: u64, burst: usize) -> Box<Source> {
    Box::new(Source {
        name: name.into(),
        next: next.into(),
        remaining,
        burst,
    })
}

/// Sends everything to `sink`, or to the node an event (a `String`) names.
struct Steer {
    target: u16,
}

impl Node for Steer {
    fn name(&self) -> &str {
        "steer"
    }
    fn next_nodes(&self) -> Vec<String> {
        vec!["sink".into()]
    }
    fn process(&mut self, _: &mut NodeContext<'_>, _: &[u32], _: &mut [u16]) -> Dispatch {
        Dispatch::AllTo(self.target)
    }
    fn on_event(&mut self, event: &dyn Any, arcs: &mut NextArcs<'_>) {
        if let Some(name) = event.downcast_ref::<String>() {
            self.target = arcs.add(name).unwrap_or(0);
        }
    }
}

/// Counts and frees.
struct Count(String, Arc<AtomicU64>);

impl Node for Count {
    fn name(&self) -> &str {
        &self.0
    }
    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        self.1.fetch_add(frame.len() as u64, Ordering::Relaxed);
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

fn count(name: &str) -> (Box<Count>, Arc<AtomicU64>) {
    let c = Arc::new(AtomicU64::new(0));
    (Box::new(Count(name.into(), c.clone())), c)
}

fn pool() -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers: 1024,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool")
}

/// source (`packets`, 32 a poll) -> steer -> sink, built with `tsc_hz`.
fn graph(packets: u64, tsc_hz: u64) -> (Graph, BufferPool, Arc<AtomicU64>) {
    let (sink, n) = count("sink");
    let mut b = GraphBuilder::new();
    b.add_input(source("source", "steer", packets, 32))
        .add_node(Box::new(Steer { target: 0 }))
        .add_node(sink);
    (b.build(0, tsc_hz).expect("graph"), pool(), n)
}

fn event(name: &str) -> Arc<dyn Any + Send + Sync> {
    Arc::new(name.to_string())
}

fn run_out(g: &mut Graph, pool: &mut BufferPool) {
    for _ in 0..10_000 {
        if g.is_finished() {
            return;
        }
        g.run_once(pool);
    }
    panic!("the graph did not finish");
}

fn packets(g: &Graph, name: &str) -> u64 {
    let id = g.node_id(name).expect(name);
    g.stats().nodes[id].packets.get()
}

/// Every internal slot once in `order`, no input there; one pending frame and one counter per
/// slot; live names unique.
fn assert_consistent(g: &Graph) {
    let s = g.stats();
    assert_eq!(s.node_names.len(), g.slots.len());
    assert_eq!(s.nodes.len(), g.slots.len());
    assert_eq!(g.pending.len(), g.slots.len());
    assert_eq!(g.trace.budget.len(), g.slots.len());
    let mut order = g.order.clone();
    order.sort_unstable();
    let internal: Vec<u32> = (0..g.slots.len() as u32)
        .filter(|&i| matches!(g.slots[i as usize].imp, NodeImpl::Internal(_)))
        .collect();
    assert_eq!(order, internal);
    let live: Vec<&String> = (0..g.slots.len())
        .filter(|&i| !g.slots[i].retired)
        .map(|i| &s.node_names[i])
        .collect();
    let unique: HashSet<&&String> = live.iter().collect();
    assert_eq!(unique.len(), live.len(), "{live:?}");
    for slot in &g.slots {
        assert_eq!(slot.next_ids.len(), slot.next_names.len());
        for (&id, name) in slot.next_ids.iter().zip(&slot.next_names) {
            assert_eq!(
                &s.node_names[id as usize], name,
                "an arc's name is its node's"
            );
        }
    }
}

#[test]
fn appended_nodes_and_arcs_carry_packets_with_the_old_ids_and_counters() {
    let (mut g, mut pool, sink) = graph(100, 1);
    g.run_once(&mut pool);
    g.run_once(&mut pool);
    let ids: Vec<Option<usize>> = ["source", "steer", "sink"].map(|n| g.node_id(n)).into();
    let (side, side_n) = count("side");
    let mut e = GraphEdit::new();
    e.add_node(side)
        .add_input(source("source2", "steer", 50, 16))
        .with_event(event("side"));
    let removed = g.apply(e, &mut pool).expect("applied");
    assert!(removed.is_empty());
    let now: Vec<Option<usize>> = ["source", "steer", "sink"].map(|n| g.node_id(n)).into();
    assert_eq!(now, ids, "ids kept");
    assert_eq!(packets(&g, "source"), 64, "counters kept");
    assert_eq!(packets(&g, "sink"), 64);
    run_out(&mut g, &mut pool);
    assert_eq!(sink.load(Ordering::Relaxed), 64);
    assert_eq!(side_n.load(Ordering::Relaxed), 36 + 50);
    assert_eq!(packets(&g, "side"), 86);
    assert_eq!(packets(&g, "source2"), 50);
    assert_eq!(g.stats().total_drops(), 0);
    assert_eq!(pool.available(), pool.capacity());
    assert_consistent(&g);
}

#[test]
fn a_refused_edit_changes_nothing() {
    let (mut g, mut pool, sink) = graph(100, 1);
    g.run_once(&mut pool);
    let stats = g.stats();
    let states = g.input_states();
    let mut bad: Vec<(GraphEdit, &str)> = Vec::new();
    let mut e = GraphEdit::new();
    e.add_node(count("sink").0);
    bad.push((e, "two nodes are named `sink`"));
    let mut e = GraphEdit::new();
    e.add_node(count("x").0).add_node(count("x").0);
    bad.push((e, "two nodes are named `x`"));
    let mut e = GraphEdit::new();
    e.add_node(count("fine").0)
        .add_input(source("s2", "nowhere", 1, 1));
    bad.push((e, "sends to `nowhere`"));
    let mut e = GraphEdit::new();
    e.add_node(count("fine").0).retire("ghost");
    bad.push((e, "cannot retire `ghost`"));
    let mut e = GraphEdit::new();
    e.retire("sink").retire("sink");
    bad.push((e, "retired twice"));
    let mut e = GraphEdit::new();
    e.activate("source");
    bad.push((e, "cannot activate `source`"));
    let mut e = GraphEdit::new();
    e.drain("steer", Arc::default());
    bad.push((e, "cannot drain `steer`"));
    let mut e = GraphEdit::new();
    e.add_input(source("s3", "steer", 1, 1))
        .drain("s3", Arc::default());
    bad.push((e, "cannot drain `s3`"));
    let mut e = GraphEdit::new();
    e.retire("steer").add_input(source("s2", "steer", 1, 1));
    bad.push((e, "sends to `steer`"));
    for (e, want) in bad {
        let err = g.apply(e, &mut pool).expect_err(want).to_string();
        assert!(err.contains(want), "{err} (wanted {want})");
        assert!(Arc::ptr_eq(&stats, &g.stats()), "{want}: counters replaced");
        assert_eq!(g.input_states(), states);
        assert_eq!(g.node_id("fine"), None);
    }
    run_out(&mut g, &mut pool);
    assert_eq!(sink.load(Ordering::Relaxed), 100);
    assert_consistent(&g);
}

#[test]
fn a_retired_node_frees_and_counts_what_reaches_it_and_its_name_is_free_again() {
    let (mut g, mut pool, _) = graph(96, 1);
    let (side, side_n) = count("side");
    let mut e = GraphEdit::new();
    e.add_node(side).with_event(event("side"));
    g.apply(e, &mut pool).expect("added");
    g.run_once(&mut pool);
    let side_id = g.node_id("side").expect("side");
    // Retired while `steer` still sends there.
    let mut e = GraphEdit::new();
    e.retire("side");
    let removed = g.apply(e, &mut pool).expect("retired");
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].name(), "side");
    assert_eq!(g.node_id("side"), None);
    assert_eq!(
        g.node_id("side#gone0"),
        Some(side_id),
        "the slot keeps its id"
    );
    g.run_once(&mut pool);
    let s = g.stats();
    let e = s
        .error_id(GRAPH_NODE, SENT_TO_REMOVED_NODE)
        .expect("reason");
    assert_eq!(s.errors[e].get(), 32);
    assert_eq!(side_n.load(Ordering::Relaxed), 32);
    // The name is free again, and `steer`'s arc to the retired node does not capture it.
    let (side, side_n) = count("side");
    let mut e = GraphEdit::new();
    e.add_node(side).with_event(event("side"));
    g.apply(e, &mut pool).expect("added again");
    run_out(&mut g, &mut pool);
    assert_eq!(side_n.load(Ordering::Relaxed), 32);
    assert_eq!(g.stats().errors[e_id(&g)].get(), 32, "counter kept");
    assert_eq!(pool.available(), pool.capacity());
    assert_consistent(&g);
}

fn e_id(g: &Graph) -> usize {
    g.stats()
        .error_id(GRAPH_NODE, SENT_TO_REMOVED_NODE)
        .expect("reason")
}

#[test]
fn held_inputs_start_when_activated() {
    let (mut g, mut pool, sink) = graph(0, 1);
    let mut e = GraphEdit::new();
    e.add_input(source("late", "steer", 40, 8))
        .hold_new_inputs();
    g.apply(e, &mut pool).expect("added");
    assert_eq!(
        g.input_states(),
        [
            ("source".to_string(), InputState::Polled),
            ("late".to_string(), InputState::Held)
        ]
    );
    assert!(!g.is_finished(), "a held input is not finished");
    for _ in 0..10 {
        g.run_once(&mut pool);
    }
    assert_eq!(sink.load(Ordering::Relaxed), 0, "held: not polled");
    let mut e = GraphEdit::new();
    e.activate("late");
    g.apply(e, &mut pool).expect("activated");
    run_out(&mut g, &mut pool);
    assert_eq!(sink.load(Ordering::Relaxed), 40);
    // Added held and activated by one edit: polled at once.
    let mut e = GraphEdit::new();
    e.add_input(source("now", "steer", 8, 8))
        .hold_new_inputs()
        .activate("now");
    g.apply(e, &mut pool).expect("added and activated");
    run_out(&mut g, &mut pool);
    assert_eq!(sink.load(Ordering::Relaxed), 48);
    // A held input is drained at once (it was never polled), then retired.
    let mut e = GraphEdit::new();
    e.add_input(source("never", "steer", 8, 8))
        .hold_new_inputs();
    g.apply(e, &mut pool).expect("added");
    let done = Arc::new(AtomicBool::new(false));
    let mut e = GraphEdit::new();
    e.drain("never", done.clone());
    g.apply(e, &mut pool).expect("drained");
    assert!(done.load(Ordering::Acquire));
    let mut e = GraphEdit::new();
    e.retire("never");
    g.apply(e, &mut pool).expect("retired");
    assert_eq!(sink.load(Ordering::Relaxed), 48);
    assert_consistent(&g);
}

#[test]
fn a_drained_input_delivers_everything_is_parked_when_empty_then_retired() {
    // A clock so slow that the drain's time limit never comes: only an empty poll parks.
    let (mut g, mut pool, sink) = graph(1000, 1 << 50);
    g.run_once(&mut pool);
    let done = Arc::new(AtomicBool::new(false));
    let mut e = GraphEdit::new();
    e.drain("source", done.clone());
    g.apply(e, &mut pool).expect("draining");
    assert_eq!(
        g.input_states(),
        [("source".to_string(), InputState::Draining)]
    );
    let mut rounds = 0;
    while !done.load(Ordering::Acquire) {
        g.run_once(&mut pool);
        rounds += 1;
        assert!(rounds < 1000, "never parked");
    }
    assert_eq!(sink.load(Ordering::Relaxed), 1000, "nothing left behind");
    assert_eq!(
        g.input_states(),
        [("source".to_string(), InputState::Parked)]
    );
    assert!(!g.is_finished(), "parked, not yet retired");
    let mut e = GraphEdit::new();
    e.retire("source");
    let removed = g.apply(e, &mut pool).expect("retired");
    assert!(matches!(&removed[..], [RemovedNode::Input(n)] if n.name() == "source"));
    assert!(g.input_states().is_empty());
    assert_eq!(pool.available(), pool.capacity());
    assert_consistent(&g);
}

#[test]
fn an_input_that_never_runs_dry_is_parked_after_the_drain_time() {
    // A clock of 1 tick a second: the limit has passed at the first poll.
    let (mut g, mut pool, _) = graph(u64::MAX, 1);
    let done = Arc::new(AtomicBool::new(false));
    let mut e = GraphEdit::new();
    e.drain("source", done.clone());
    g.apply(e, &mut pool).expect("draining");
    g.run_once(&mut pool);
    assert!(done.load(Ordering::Acquire));
    assert_eq!(g.input_states()[0].1, InputState::Parked);
    assert_eq!(pool.available(), pool.capacity());
}

#[test]
fn one_name_added_and_retired_a_hundred_times_leaks_nothing() {
    let (mut g, mut pool, sink) = graph(100 * 32, 1);
    let slots = g.slots.len();
    let errors = g.stats().error_names.len();
    let mut total = 0;
    for _ in 0..100 {
        let (x, x_n) = count("x");
        let mut e = GraphEdit::new();
        e.add_node(x).with_event(event("x"));
        g.apply(e, &mut pool).expect("added");
        g.run_once(&mut pool);
        total += x_n.load(Ordering::Relaxed);
        let mut e = GraphEdit::new();
        e.retire("x").with_event(event("sink"));
        g.apply(e, &mut pool).expect("retired");
        assert_eq!(pool.available(), pool.capacity());
    }
    assert_eq!(total, 100 * 32);
    assert_eq!(sink.load(Ordering::Relaxed), 0);
    assert_eq!(g.stats().total_drops(), 0);
    // Append-only: one slot per add; one error name for all the retired nodes.
    assert_eq!(g.slots.len(), slots + 100);
    assert_eq!(g.stats().error_names.len(), errors + 1);
    assert_consistent(&g);
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8),
    AddInput(u8),
    Retire(u8),
    Steer(u8),
    Run,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4).prop_map(Op::Add),
        (0u8..4).prop_map(Op::AddInput),
        (0u8..6).prop_map(Op::Retire),
        (0u8..4).prop_map(Op::Steer),
        Just(Op::Run),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random adds, retires and events: an edit succeeds exactly when a model of the live
    /// names says it may, the tables stay consistent, and no buffer leaks.
    #[test]
    fn random_edits_keep_the_graph_consistent(ops in proptest::collection::vec(op(), 1..40)) {
        let (mut g, mut pool, _) = graph(10_000, 1);
        let mut live: HashSet<String> = ["source", "steer", "sink"].map(String::from).into();
        for op in ops {
            match op {
                Op::Add(k) | Op::AddInput(k) => {
                    let name = format!("n{k}");
                    let mut e = GraphEdit::new();
                    if matches!(op, Op::Add(_)) {
                        e.add_node(count(&name).0);
                    } else {
                        e.add_input(source(&name, "steer", 64, 16));
                    }
                    let r = g.apply(e, &mut pool);
                    prop_assert_eq!(r.is_ok(), !live.contains(&name), "{:?}", r.err());
                    live.insert(name);
                }
                Op::Retire(k) => {
                    let name = if k < 4 { format!("n{k}") } else { "sink".to_string() };
                    let mut e = GraphEdit::new();
                    e.retire(&name);
                    let r = g.apply(e, &mut pool);
                    prop_assert_eq!(r.is_ok(), live.remove(&name));
                }
                Op::Steer(k) => {
                    let mut e = GraphEdit::new();
                    e.with_event(event(&format!("n{k}")));
                    prop_assert!(g.apply(e, &mut pool).is_ok());
                }
                Op::Run => {
                    for _ in 0..4 {
                        g.run_once(&mut pool);
                    }
                }
            }
            assert_consistent(&g);
            prop_assert_eq!(pool.available(), pool.capacity());
        }
    }
}

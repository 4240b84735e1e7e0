//! `show rxq` and `rxq move`: where each worker's time goes, receive queue by receive queue
//! (Open vSwitch's `dpif-netdev/pmd-rxq-show`), where the queues that may move run, and moving
//! one by hand. A queue is an input node; what its packets cost is counted from its poll to
//! the end of the graph's work on them (`NodeStats::carried_clocks`), so a queue whose packets
//! take the slow paths weighs more than one with as many packets on the fast path. It reads the
//! counter snapshots it is given; moves go through the data plane's `Rebalancer`.

use super::NodeCounts;
use crate::table::{ratio, render, Align};
use dataplane::RuntimeView;
use serde_json::{json, Value};

/// One queue of one worker, since the last `clear runtime`.
struct QueueLoad<'a> {
    name: &'a str,
    packets: u64,
    carried: u64,
    /// Percent of the worker's time.
    load: f64,
    /// Percent of the worker's carried ticks (of the work it did).
    share: f64,
}

/// The queues of one worker that received packets, busiest first, and the worker's busy
/// percent.
fn worker_queues(nodes: &[NodeCounts], elapsed_ticks: f64) -> (Vec<QueueLoad<'_>>, f64) {
    let inputs = nodes.iter().filter(|n| n.is_input && n.packets > 0);
    let work: u64 = inputs.clone().map(|n| n.carried_clocks).sum();
    let percent_of = |part: u64, whole: f64| {
        if whole > 0.0 {
            100.0 * part as f64 / whole
        } else {
            0.0
        }
    };
    let mut queues: Vec<QueueLoad<'_>> = inputs
        .map(|n| QueueLoad {
            name: &n.name,
            packets: n.packets,
            carried: n.carried_clocks,
            load: percent_of(n.carried_clocks, elapsed_ticks),
            share: percent_of(n.carried_clocks, work as f64),
        })
        .collect();
    queues.sort_by(|a, b| b.carried.cmp(&a.carried).then(a.name.cmp(b.name)));
    (queues, percent_of(work, elapsed_ticks).min(100.0))
}

/// The text and JSON of `show rxq` from per-worker node counters since the last clear.
pub(super) fn show(
    view: &RuntimeView,
    per_worker: &[Vec<NodeCounts>],
    since: f64,
) -> (String, Value) {
    let elapsed_ticks = since * view.tsc_hz as f64;
    let mut text = format!("Time {since:.1} s since last clear\n");
    let mut workers = Vec::new();
    for (w, nodes) in view.workers.iter().zip(per_worker) {
        let (queues, busy) = worker_queues(nodes, elapsed_ticks);
        let cpu = w
            .cpu
            .map(|c| format!("cpu {c}"))
            .unwrap_or_else(|| "not pinned".into());
        text.push_str(&format!(
            "Worker {} ({cpu}): {busy:.1}% of its time carrying packets\n",
            w.index
        ));
        if queues.is_empty() {
            text.push_str("  (no queue received a packet)\n");
        } else {
            let rows: Vec<Vec<String>> = queues
                .iter()
                .map(|q| {
                    vec![
                        q.name.to_string(),
                        q.packets.to_string(),
                        format!("{:.1}", ratio(q.carried, q.packets)),
                        format!("{:.1}%", q.load),
                        format!("{:.1}%", q.share),
                    ]
                })
                .collect();
            text.push_str(&render(
                &[
                    ("Queue", Align::Left),
                    ("Packets", Align::Right),
                    ("Cycles/Pkt", Align::Right),
                    ("Load", Align::Right),
                    ("Share", Align::Right),
                ],
                &rows,
            ));
        }
        workers.push(json!({
            "worker": w.index,
            "cpu": w.cpu,
            "busy_percent": busy,
            "queues": queues.iter().map(|q| json!({
                "name": q.name,
                "packets": q.packets,
                "carried_clocks": q.carried,
                "cycles_per_packet": ratio(q.carried, q.packets),
                "load_percent": q.load,
                "share_percent": q.share,
            })).collect::<Vec<_>>(),
        }));
    }
    text.push_str(
        "Cycles/Pkt: what a queue's packets cost in every node; Load: share of the worker's \
         time; Share: of the work it did.\n",
    );
    let placement = view.rxq.as_ref().map(|rb| {
        let policy = rb.policy();
        let queues = rb.placement();
        let moves = rb.moves.load(std::sync::atomic::Ordering::Relaxed);
        let so_far = if moves == 1 {
            "1 move so far".to_string()
        } else {
            format!("{moves} moves so far")
        };
        text.push_str(&if policy.rebalance_seconds > 0 {
            format!(
                "Queues that may move, placed by load every {} s when the busiest worker is \
                 {}% busy ({so_far}):\n",
                policy.rebalance_seconds, policy.busy_percent
            )
        } else {
            format!("Queues that may move (by `rxq move` only; {so_far}):\n")
        });
        for (port, pair, worker) in &queues {
            text.push_str(&format!("  {port} pair {pair}: worker {worker}\n"));
        }
        if let Some((last, before, after)) = rb.last_moves() {
            let moved: Vec<String> = last
                .iter()
                .map(|m| format!("{} pair {} {} -> {}", m.port, m.pair, m.from, m.to))
                .collect();
            text.push_str(&format!(
                "  last rebalance: {} (busiest worker {before:.0}% -> {after:.0}%)\n",
                moved.join(", ")
            ));
        }
        json!({
            "rebalance_seconds": policy.rebalance_seconds,
            "busy_percent": policy.busy_percent,
            "moves": moves,
            "queues": queues.iter().map(|(port, pair, worker)| json!({
                "port": port, "pair": pair, "worker": worker,
            })).collect::<Vec<_>>(),
        })
    });
    let data = json!({
        "time_since_clear": since,
        "tsc_hz": view.tsc_hz,
        "workers": workers,
        "placement": placement,
    });
    (text, data)
}

/// `rxq move PORT PAIR WORKER`.
pub(super) fn move_pair(
    view: &RuntimeView,
    port: &str,
    pair: usize,
    worker: usize,
) -> Result<(String, Value), super::CommandError> {
    let Some(rb) = &view.rxq else {
        return Err(super::CommandError(
            "no receive queue may move: that takes a vhost-user port with `queues` > 1 and \
             `workers` > 1"
                .into(),
        ));
    };
    let m = rb
        .move_pair(port, pair, worker)
        .map_err(super::CommandError)?;
    let text = if m.from == m.to {
        format!("{port} pair {pair} is received on worker {worker} already\n")
    } else {
        format!(
            "{port} pair {pair} moved from worker {} to worker {}\n",
            m.from, m.to
        )
    };
    Ok((
        text,
        json!({"port": m.port, "pair": m.pair, "from": m.from, "to": m.to}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, is_input: bool, packets: u64, carried: u64) -> NodeCounts {
        NodeCounts {
            name: name.into(),
            is_input,
            calls: packets,
            vectors: packets,
            packets,
            clocks: carried / 2,
            carried_clocks: if is_input { carried } else { 0 },
        }
    }

    #[test]
    fn queues_are_weighed_by_what_their_packets_cost_busiest_first() {
        let nodes = [
            node("rx-q0", true, 1000, 100_000),
            node("ethernet-input", false, 4000, 50_000),
            node("rx-q1", true, 3000, 300_000),
            node("idle-q", true, 0, 0),
        ];
        // One million ticks elapsed: 40% of them carried packets.
        let (queues, busy) = worker_queues(&nodes, 1_000_000.0);
        assert_eq!(
            queues.iter().map(|q| q.name).collect::<Vec<_>>(),
            ["rx-q1", "rx-q0"],
            "internal nodes and idle queues are not queues to show"
        );
        assert!((busy - 40.0).abs() < 1e-9);
        assert!((queues[0].load - 30.0).abs() < 1e-9);
        assert!((queues[0].share - 75.0).abs() < 1e-9);
        assert!((queues[1].share - 25.0).abs() < 1e-9);
        let (none, busy) = worker_queues(&nodes[1..2], 0.0);
        assert!(none.is_empty() && busy == 0.0, "no time elapsed: no load");
    }
}

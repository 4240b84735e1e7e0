//! The receive-queue rebalancer: a thread that every `RxqPolicy::rebalance_seconds` reads what
//! each worker's receive queues carried since its last look, asks `placement::plan` for a
//! better placement of the queues that may move (vhost-user queue pairs), and moves them
//! through their devices. It owns its last counter snapshot and its record of moves; it never
//! touches packets, and no worker waits for it: a move is a new device snapshot that the two
//! workers concerned take at their next poll (the old one stops the queue where the guest's
//! ring says it stopped, the new one starts there, nothing is lost).

use crate::placement::{self, QueueLoad, Thresholds};
use crate::spec::RxqPolicy;
use graph::GraphStats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vhostuser::VhostUserDevice;

/// A port whose receive queues may move between workers.
pub struct MovablePort {
    /// Port id.
    pub id: u16,
    /// Port name.
    pub name: String,
    /// Its device.
    pub device: Arc<VhostUserDevice>,
    /// The receive node of each pair (the same name on every worker that may run it).
    pub rx_nodes: Vec<String>,
    /// Workers `0..workers` may run its pairs (those with a receive node for each).
    pub workers: usize,
}

/// One move, as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// Port name.
    pub port: String,
    /// Queue pair.
    pub pair: usize,
    /// From worker.
    pub from: usize,
    /// To worker.
    pub to: usize,
}

/// The rebalancer of one data plane.
pub struct Rebalancer {
    ports: Vec<MovablePort>,
    policy: RxqPolicy,
    workers: usize,
    /// Looks taken.
    pub looks: AtomicU64,
    /// Queues moved.
    pub moves: AtomicU64,
    /// The moves of the last look that moved any, and its busiest worker before and after
    /// (percent of the interval).
    last: Mutex<Option<(Vec<Move>, f64, f64)>>,
}

impl std::fmt::Debug for Rebalancer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rebalancer")
            .field("policy", &self.policy)
            .field("placement", &self.placement())
            .field("moves", &self.moves.load(Ordering::Relaxed))
            .finish()
    }
}

/// Carried ticks per (worker, input node name).
type Snapshot = HashMap<(usize, String), u64>;

fn snapshot(graphs: &[Arc<GraphStats>]) -> Snapshot {
    let mut s = HashMap::new();
    for (w, g) in graphs.iter().enumerate() {
        for (i, n) in g.nodes.iter().enumerate() {
            if g.node_is_input.get(i).copied().unwrap_or(false) {
                let name = g.node_names.get(i).cloned().unwrap_or_default();
                s.insert((w, name), n.carried_clocks.get());
            }
        }
    }
    s
}

impl Rebalancer {
    /// The placement of `ports` over `workers` workers; None when nothing may move. With
    /// `policy.rebalance_seconds` 0 only `move_pair` moves queues.
    pub fn new(ports: Vec<MovablePort>, workers: usize, policy: RxqPolicy) -> Option<Rebalancer> {
        if ports.is_empty() || workers < 2 {
            return None;
        }
        Some(Rebalancer {
            ports,
            policy,
            workers,
            looks: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            last: Mutex::new(None),
        })
    }

    /// The policy it follows.
    pub fn policy(&self) -> RxqPolicy {
        self.policy
    }

    /// Move pair `pair` of port `port` (its name) to `worker` by hand (`vecplane ctl rxq
    /// move`): the error names what is accepted.
    pub fn move_pair(&self, port: &str, pair: usize, worker: usize) -> Result<Move, String> {
        let Some(p) = self.ports.iter().find(|p| p.name == port) else {
            let names: Vec<&str> = self.ports.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "port `{port}` has no queues that may move; accepted: {}",
                names.join(", ")
            ));
        };
        if pair >= p.rx_nodes.len() {
            return Err(format!(
                "{port} has no queue pair {pair}; accepted: 0 to {}",
                p.rx_nodes.len() - 1
            ));
        }
        if worker >= p.workers {
            return Err(format!(
                "worker {worker} cannot receive from {port}; accepted: 0 to {}",
                p.workers - 1
            ));
        }
        let from = p.device.rx_worker(pair);
        p.device.move_rx(pair, worker)?;
        if from != worker {
            self.moves.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Move {
            port: port.to_string(),
            pair,
            from,
            to: worker,
        })
    }

    /// Where each movable queue runs: (port, pair, worker).
    pub fn placement(&self) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for p in &self.ports {
            for pair in 0..p.rx_nodes.len() {
                out.push((p.name.clone(), pair, p.device.rx_worker(pair)));
            }
        }
        out
    }

    /// The last look that moved queues: its moves, and the busiest worker's load before and
    /// after (percent).
    pub fn last_moves(&self) -> Option<(Vec<Move>, f64, f64)> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The queue loads between two snapshots, `interval_ticks` apart.
    fn loads(&self, before: &Snapshot, now: &Snapshot) -> Vec<QueueLoad> {
        let mut movable: HashMap<(usize, &str), (u16, u16, usize)> = HashMap::new();
        for p in &self.ports {
            for (pair, node) in p.rx_nodes.iter().enumerate() {
                let owner = p.device.rx_worker(pair);
                movable.insert((owner, node.as_str()), (p.id, pair as u16, p.workers));
            }
        }
        let mut loads = Vec::new();
        let mut fixed_id = 0u16;
        for ((w, name), &ticks) in now {
            let ticks = ticks.wrapping_sub(before.get(&(*w, name.clone())).copied().unwrap_or(0));
            let (id, movable, allowed) = match movable.get(&(*w, name.as_str())) {
                Some(&(port, pair, allowed)) => ((port, pair), true, allowed),
                None if ticks == 0 => continue,
                None => {
                    // Fixed queues only weigh on their worker; their ids need only differ.
                    fixed_id = fixed_id.wrapping_add(1);
                    ((u16::MAX, fixed_id), false, self.workers)
                }
            };
            loads.push(QueueLoad {
                id,
                worker: *w,
                ticks,
                movable,
                allowed,
            });
        }
        loads
    }

    /// One look: plan from the loads between `before` and `now` and apply the moves. The
    /// moves made.
    fn look(&self, before: &Snapshot, now: &Snapshot, interval_ticks: u64) -> Vec<Move> {
        self.looks.fetch_add(1, Ordering::Relaxed);
        let loads = self.loads(before, now);
        let t = Thresholds {
            busy_percent: self.policy.busy_percent,
            ..Thresholds::default()
        };
        let Some(plan) = placement::plan(&loads, self.workers, interval_ticks, t) else {
            return Vec::new();
        };
        let mut done = Vec::new();
        for ((port, pair), from, to) in plan.moves {
            let Some(p) = self.ports.iter().find(|p| p.id == port) else {
                continue;
            };
            match p.device.move_rx(usize::from(pair), to) {
                Ok(()) => done.push(Move {
                    port: p.name.clone(),
                    pair: usize::from(pair),
                    from,
                    to,
                }),
                Err(e) => {
                    tracing::warn!("{} queue pair {pair} stays on worker {from}: {e}", p.name)
                }
            }
        }
        if !done.is_empty() {
            let pct = |t: u64| 100.0 * t as f64 / interval_ticks.max(1) as f64;
            let (b, a) = (pct(plan.busiest_before), pct(plan.busiest_after));
            for m in &done {
                tracing::info!(
                    "{} queue pair {} moves from worker {} to worker {} (busiest \
                     worker {b:.0}% -> {a:.0}% of its time, as measured)",
                    m.port,
                    m.pair,
                    m.from,
                    m.to
                );
            }
            self.moves.fetch_add(done.len() as u64, Ordering::Relaxed);
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((done.clone(), b, a));
        }
        done
    }

    /// Look every `rebalance_seconds` until `stop`; after a look that moved queues, the next
    /// interval is skipped (its loads straddle the move).
    /// The workers' counters are read anew at every look (a graph edited at run time has new
    /// ones).
    pub fn run(
        &self,
        slots: &[Arc<crate::view::Published<GraphStats>>],
        tsc_hz: u64,
        stop: &AtomicBool,
    ) {
        let graphs = || slots.iter().map(|s| s.get()).collect::<Vec<_>>();
        let interval = Duration::from_secs(u64::from(self.policy.rebalance_seconds));
        let mut before = snapshot(&graphs());
        let mut skip = false;
        while sleep_unless_stopped(interval, stop) {
            let now = snapshot(&graphs());
            if !skip {
                let ticks = tsc_hz.saturating_mul(u64::from(self.policy.rebalance_seconds));
                skip = !self.look(&before, &now, ticks).is_empty();
            } else {
                skip = false;
            }
            before = if skip { snapshot(&graphs()) } else { now };
        }
    }
}

/// Sleep `d` in short steps; false when `stop` was set.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let step = Duration::from_millis(50);
    let mut left = d;
    while !left.is_zero() {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
    !stop.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::NodeStats;
    use vhostuser::SocketMode;

    /// A worker's counters with input nodes `inputs` (names) and one internal node.
    fn graph_of(inputs: &[&str]) -> Arc<GraphStats> {
        let mut names: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
        names.push("ethernet-input".into());
        Arc::new(GraphStats {
            node_is_input: names.iter().map(|n| n != "ethernet-input").collect(),
            nodes: names.iter().map(|_| NodeStats::default()).collect(),
            node_names: names,
            error_names: Vec::new(),
            errors: Vec::new(),
        })
    }

    fn carry(g: &GraphStats, node: &str, ticks: u64) {
        let i = g.node_names.iter().position(|n| n == node).expect("node");
        g.nodes[i].carried_clocks.add(ticks);
    }

    #[test]
    fn hot_pairs_on_one_worker_are_spread_and_a_hand_move_is_checked() {
        let socket = std::env::temp_dir().join(format!("vp-rebalance-{}.sock", std::process::id()));
        let device =
            Arc::new(VhostUserDevice::open_on(&socket, SocketMode::Server, 4, 2).expect("device"));
        let nodes: Vec<String> = (0..4).map(|k| format!("vm1-rx-q{k}")).collect();
        let names: Vec<&str> = nodes
            .iter()
            .map(String::as_str)
            .chain(["tap0-rx"])
            .collect();
        let graphs = vec![graph_of(&names), graph_of(&names)];
        let rb = Rebalancer::new(
            vec![MovablePort {
                id: 3,
                name: "vm1".into(),
                device: device.clone(),
                rx_nodes: nodes.clone(),
                workers: 2,
            }],
            2,
            RxqPolicy {
                rebalance_seconds: 1,
                busy_percent: 50,
            },
        )
        .expect("queues may move");
        // Round-robin: pairs 0 and 2 on worker 0, 1 and 3 on worker 1.
        assert_eq!(
            rb.placement().iter().map(|p| p.2).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        let before = snapshot(&graphs);
        // Pairs 0 and 2 are hot; worker 1 also carries a TAP that cannot move.
        carry(&graphs[0], "vm1-rx-q0", 600);
        carry(&graphs[0], "vm1-rx-q2", 500);
        carry(&graphs[1], "vm1-rx-q1", 10);
        carry(&graphs[1], "tap0-rx", 100);
        let now = snapshot(&graphs);
        // Below the busy threshold: nothing moves.
        assert!(rb.look(&before, &now, 10_000).is_empty());
        let moved = rb.look(&before, &now, 1_000);
        assert_eq!(
            moved,
            [Move {
                port: "vm1".into(),
                pair: 2,
                from: 0,
                to: 1
            }]
        );
        assert_eq!(device.rx_worker(2), 1);
        assert_eq!(rb.moves.load(Ordering::Relaxed), 1);
        let (_, b, a) = rb.last_moves().expect("recorded");
        assert_eq!((b.round(), a.round()), (110.0, 61.0));
        // By hand: back to worker 0; refusals name what is accepted.
        assert_eq!(rb.move_pair("vm1", 2, 0).map(|m| m.to), Ok(0));
        assert_eq!(device.rx_worker(2), 0);
        let e = rb.move_pair("vm2", 0, 0).unwrap_err();
        assert!(e.contains("accepted: vm1"), "{e}");
        let e = rb.move_pair("vm1", 4, 0).unwrap_err();
        assert!(e.contains("accepted: 0 to 3"), "{e}");
        let e = rb.move_pair("vm1", 0, 2).unwrap_err();
        assert!(e.contains("accepted: 0 to 1"), "{e}");
    }
}

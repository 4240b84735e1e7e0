//! Receive-queue placement by measured load (Open vSwitch's `pmd-rxq-assign=cycles` with
//! auto load balancing): from what each queue's packets cost over an interval (the ticks its
//! input node carried, see `graph::NodeStats::carried_clocks`) and where each queue runs, the
//! placement that evens the workers out, and whether it is worth moving to. Queues that cannot
//! move (an AF_XDP socket is bound to its worker's memory) stay and count as their worker's
//! base load. It is pure: it reads no counter and moves no queue.

/// One receive queue over the last interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLoad {
    /// Whose queue (an id the caller understands: port and queue).
    pub id: (u16, u16),
    /// The worker running it.
    pub worker: usize,
    /// Ticks its packets cost the worker.
    pub ticks: u64,
    /// Whether it may run on another worker.
    pub movable: bool,
    /// Workers `0..allowed` may run it.
    pub allowed: usize,
}

/// A better placement: the moves, and the busiest worker's load before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (queue, from worker, to worker).
    pub moves: Vec<((u16, u16), usize, usize)>,
    /// Ticks of the busiest worker now.
    pub busiest_before: u64,
    /// Ticks of the busiest worker after the moves (as measured, if loads stay).
    pub busiest_after: u64,
}

/// When a new placement is worth its moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// The busiest worker carries at least this percent of the interval (below, every worker
    /// keeps up and a move would only cost).
    pub busy_percent: u32,
    /// The busiest worker's load falls by at least this percent.
    pub gain_percent: u32,
}

impl Default for Thresholds {
    /// Open vSwitch's auto load balancing defaults: 95% busy, 25% better.
    fn default() -> Self {
        Thresholds {
            busy_percent: 95,
            gain_percent: 25,
        }
    }
}

/// The placement of `queues` over `workers` workers that evens their loads out: the movable
/// queues, those with the fewest workers allowed first and then the heaviest first, each to the
/// allowed worker that has the least load so far (its current worker on a tie), after the
/// fixed queues. None when it is not worth it under `t`: the
/// busiest worker carried less than `t.busy_percent` of `interval_ticks`, or would gain less
/// than `t.gain_percent`.
pub fn plan(
    queues: &[QueueLoad],
    workers: usize,
    interval_ticks: u64,
    t: Thresholds,
) -> Option<Plan> {
    if workers < 2 || queues.iter().any(|q| q.worker >= workers) {
        return None;
    }
    let mut before = vec![0u64; workers];
    let mut after = vec![0u64; workers];
    for q in queues {
        before[q.worker] = before[q.worker].saturating_add(q.ticks);
        if !q.movable {
            after[q.worker] = after[q.worker].saturating_add(q.ticks);
        }
    }
    let busiest_before = before.iter().copied().max().unwrap_or(0);
    if u128::from(busiest_before) * 100 < u128::from(interval_ticks) * u128::from(t.busy_percent) {
        return None;
    }
    let mut movable: Vec<&QueueLoad> = queues.iter().filter(|q| q.movable).collect();
    // The queues with the fewest places to go first, then the heaviest first.
    movable.sort_by(|a, b| {
        a.allowed
            .min(workers)
            .cmp(&b.allowed.min(workers))
            .then(b.ticks.cmp(&a.ticks))
            .then(a.id.cmp(&b.id))
    });
    let mut moves = Vec::new();
    for q in movable {
        // The least loaded worker that may run it; the queue's own on a tie (no needless
        // move).
        let mut to = q.worker;
        // An idle queue stays: moving it costs a stop and gains nothing.
        if q.ticks > 0 {
            for (w, &load) in after.iter().enumerate().take(q.allowed) {
                if load < after[to] {
                    to = w;
                }
            }
        }
        after[to] = after[to].saturating_add(q.ticks);
        if to != q.worker {
            moves.push((q.id, q.worker, to));
        }
    }
    let busiest_after = after.iter().copied().max().unwrap_or(0);
    if moves.is_empty() || busiest_after >= busiest_before {
        return None;
    }
    let gained = u128::from(busiest_before - busiest_after);
    if gained * 100 < u128::from(busiest_before) * u128::from(t.gain_percent) {
        return None;
    }
    Some(Plan {
        moves,
        busiest_before,
        busiest_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(port: u16, queue: u16, worker: usize, ticks: u64, movable: bool) -> QueueLoad {
        QueueLoad {
            id: (port, queue),
            worker,
            ticks,
            movable,
            allowed: usize::MAX,
        }
    }

    const ANY: Thresholds = Thresholds {
        busy_percent: 0,
        gain_percent: 0,
    };

    #[test]
    fn two_hot_queues_on_one_worker_are_split() {
        // Round-robin put pairs 0 and 2 (hot) on worker 0, 1 and 3 (idle) on worker 1.
        let queues = [
            q(0, 0, 0, 900, true),
            q(0, 1, 1, 10, true),
            q(0, 2, 0, 800, true),
            q(0, 3, 1, 20, true),
        ];
        let p = plan(&queues, 2, 1000, Thresholds::default()).expect("worth it");
        assert_eq!(p.busiest_before, 1700);
        assert_eq!(p.busiest_after, 900);
        // Heaviest first: pair 0 stays, pair 2 goes to worker 1, the idle ones fill worker 1
        // after it only if that is still the lighter side.
        assert_eq!(p.moves[0], ((0, 2), 0, 1));
        let on = |id| {
            p.moves.iter().find(|m| m.0 == id).map_or_else(
                || queues.iter().find(|x| x.id == id).map(|x| x.worker),
                |m| Some(m.2),
            )
        };
        assert_eq!(on((0, 0)), Some(0));
        assert_eq!(on((0, 2)), Some(1));
    }

    #[test]
    fn balanced_idle_or_fixed_loads_are_left_alone() {
        let balanced = [q(0, 0, 0, 500, true), q(0, 1, 1, 480, true)];
        assert_eq!(plan(&balanced, 2, 1000, ANY), None, "no move helps");
        let idle = [q(0, 0, 0, 300, true), q(0, 1, 0, 300, true)];
        assert_eq!(
            plan(&idle, 2, 1000, Thresholds::default()),
            None,
            "worker 0 is 60% busy: it keeps up"
        );
        assert!(
            plan(&idle, 2, 1000, ANY).is_some(),
            "but a split would even it"
        );
        // An AF_XDP queue is bound to its worker: nothing else to move.
        let fixed = [q(0, 0, 0, 990, false), q(1, 0, 1, 10, false)];
        assert_eq!(plan(&fixed, 2, 1000, ANY), None);
        // A small gain is not worth a move.
        let near = [
            q(0, 0, 0, 600, true),
            q(0, 1, 0, 400, true),
            q(1, 0, 1, 500, false),
        ];
        let p = plan(&near, 2, 1000, ANY).expect("some gain");
        assert_eq!((p.busiest_before, p.busiest_after), (1000, 900));
        assert_eq!(
            plan(&near, 2, 1000, Thresholds::default()),
            None,
            "10% < 25%"
        );
        assert_eq!(plan(&near, 1, 1000, ANY), None, "one worker");
        assert_eq!(
            plan(&[q(0, 0, 3, 10, true)], 2, 1000, ANY),
            None,
            "no such worker"
        );
        // A queue goes only where it may run.
        let mut only0 = q(0, 2, 0, 800, true);
        only0.allowed = 1;
        let p = plan(&[q(0, 0, 0, 900, true), only0], 2, 1000, ANY).expect("a move");
        assert_eq!(p.moves, [((0, 0), 0, 1)], "the other one moves instead");
    }

    proptest! {
        /// A plan never makes the busiest worker busier, moves only movable queues from where
        /// they are, and ends no worse than twice the ideal (the greedy bound is 4/3 + fixed
        /// load; this checks the looser one cheaply).
        #[test]
        fn plans_only_improve(
            loads in proptest::collection::vec((0usize..3, 0u64..1000, any::<bool>()), 1..12)
        ) {
            let queues: Vec<QueueLoad> = loads
                .iter()
                .enumerate()
                .map(|(i, &(w, t, m))| q(0, i as u16, w, t, m))
                .collect();
            if let Some(p) = plan(&queues, 3, 1, ANY) {
                prop_assert!(p.busiest_after <= p.busiest_before);
                for (id, from, to) in &p.moves {
                    let orig = queues.iter().find(|x| x.id == *id).expect("known queue");
                    prop_assert!(orig.movable);
                    prop_assert_eq!(orig.worker, *from);
                    prop_assert!(*to < 3 && to != from);
                }
                let total: u64 = queues.iter().map(|x| x.ticks).sum();
                let heaviest = queues.iter().map(|x| x.ticks).max().unwrap_or(0);
                let fixed_max = (0..3)
                    .map(|w| queues.iter().filter(|x| !x.movable && x.worker == w).map(|x| x.ticks).sum::<u64>())
                    .max()
                    .unwrap_or(0);
                let ideal = (total / 3).max(heaviest).max(fixed_max);
                prop_assert!(p.busiest_after <= 2 * ideal + heaviest, "{p:?} ideal {ideal}");
            }
        }
    }
}

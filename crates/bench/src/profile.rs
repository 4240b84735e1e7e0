//! The bench's side of the profile (`planner::profile`, re-exported here): the costs a bench
//! run's summaries give, for `planner::profile::record`. The file format, its place and the
//! merge are the planner's; this module only turns the bench's own results into costs.

pub use planner::profile::*;

use crate::report::Summary;
use crate::scenario::Scenario;

/// The cost of a bench summary (its median run's cycles per packet, frame size, scenario and
/// flows) for `path` and `protocol`, dated now.
pub fn cost_from_summary(s: &Summary, path: CostPath, protocol: Protocol) -> Cost {
    Cost {
        path,
        protocol,
        frame_size: s.frame_size,
        cycles_per_packet: s.cycles_per_packet,
        scenario: s.scenario.clone(),
        flows: Some(s.flows),
        date: now(),
    }
}

/// The costs of an engine bench (`l2xc`, `ip4`, `ip6`; one summary per frame size, e.g. from
/// `--sweep`) as the `l2xc`, `ip4-router` and `ip6-router` paths.
pub fn costs_from_engine(summaries: &[Summary], scenario: Scenario) -> Vec<Cost> {
    let (path, protocol) = match scenario {
        Scenario::L2xc => (CostPath::L2xc, Protocol::Ipv4),
        Scenario::Ip4 => (CostPath::Ip4Router, Protocol::Ipv4),
        Scenario::Ip6 => (CostPath::Ip6Router, Protocol::Ipv6),
    };
    summaries
        .iter()
        .map(|s| cost_from_summary(s, path, protocol))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_summaries_become_router_and_l2xc_costs() {
        use crate::measure::RunResult;
        use crate::report::{summarize, SummaryInput};
        let summary = |frame_size: usize, cpp: f64| {
            let run = RunResult {
                packets: 1000,
                tx_packets: 1000,
                dropped: 0,
                accounted: true,
                ticks: (cpp * 1000.0) as u64,
                seconds: 1.0,
                mpps: 0.001,
                cycles_per_packet: cpp,
                dispatch_cycles_per_packet: 1.0,
                busy_cycles_per_packet: 1.0,
                nodes: vec![],
                drops: Default::default(),
                build_seconds: 0.0,
                fib_build_seconds: 0.0,
                fib_memory_bytes: 0,
                fib_routes: 0,
                flow_cache: None,
                worker_cpu_share: 1.0,
                on_cpu_cycles_per_packet: cpp,
                others_busy: None,
                rt_throttle: None,
                involuntary_switches: 0,
                pool_backing: "normal pages".into(),
            };
            let input = SummaryInput {
                scenario: "ip6".into(),
                has_fib: true,
                frame_size,
                frame_size_requested: frame_size,
                flows: 65536,
                routes: 100_000,
                seconds: 1.0,
                warmup_seconds: 0.0,
                cpu: 1,
                tsc_hz: 1,
                notes: vec![],
            };
            summarize(input, vec![run], vec![]).expect("summary")
        };
        let costs = costs_from_engine(&[summary(78, 90.0), summary(1518, 95.0)], Scenario::Ip6);
        let got: Vec<(CostPath, Protocol, usize, f64, Option<u32>)> = costs
            .iter()
            .map(|c| {
                (
                    c.path,
                    c.protocol,
                    c.frame_size,
                    c.cycles_per_packet,
                    c.flows,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (CostPath::Ip6Router, Protocol::Ipv6, 78, 90.0, Some(65536)),
                (CostPath::Ip6Router, Protocol::Ipv6, 1518, 95.0, Some(65536)),
            ]
        );
        assert_eq!(costs[0].scenario, "ip6");
    }
}

//! The `[dataplane]` table: buffers, workers and their CPUs and poll modes, and the policies of the
//! IP, neighbour and bridge nodes. Values are range-checked here; nothing is applied.

use super::ctx::{Ctx, Field, Fields};
use super::util::online_cpus;
use super::value::Node;
use super::value::{kind, show, Val};
use dataplane::{DataplaneSpec, OptionsPolicy, PollMode, PollPolicy};

pub(super) const DATAPLANE_KEYS: &[&str] = &[
    "buffers",
    "data-size",
    "worker-cpu",
    "workers",
    "worker-cpus",
    "ip4-options",
    "icmp-errors-per-second",
    "icmp-errors-burst",
    "bridge-max-macs",
    "bridge-age-seconds",
    "neighbour-capacity",
    "neighbour-reachable-seconds",
    "neighbour-gc-seconds",
    "neighbour-queue",
    "poll-mode",
    "poll-sleep-max-us",
    "rxq-rebalance-seconds",
    "rxq-rebalance-busy-percent",
    "punt-ring-slots",
    "punt-snap-bytes",
    "punt-per-second",
    "punt-burst",
    "inject-per-second",
    "inject-burst",
];

const POLL_MODES_ACCEPTED: &str = "\"busy\", \"adaptive\"";

impl Ctx<'_> {
    pub(super) fn dataplane(&mut self, node: &Node, spec: &mut DataplaneSpec) {
        let Some(f) = self.fields(
            "[dataplane]".to_string(),
            Some("dataplane"),
            node,
            DATAPLANE_KEYS,
        ) else {
            return;
        };
        self.remember_lines(&f);
        if let Some(v) = self.int(&f, "buffers", 64..=16_777_216).ok() {
            spec.buffers = v as u32;
        }
        if let Some(v) = self.int(&f, "data-size", 256..=9216).ok() {
            spec.data_size = v as u16;
        }
        match self.int(&f, "worker-cpu", 0..=i64::from(u32::MAX)) {
            Field::Ok(v, span) => {
                let cpus = online_cpus();
                if (v as usize) < cpus {
                    spec.worker_cpu = Some(v as usize);
                } else {
                    self.error(
                        &span,
                        "[dataplane]",
                        Some("worker-cpu"),
                        format!(
                            "CPU {v} does not exist; accepted: 0..={} (this host has {cpus} \
                             online CPUs)",
                            cpus.saturating_sub(1)
                        ),
                    );
                }
            }
            Field::Missing | Field::Bad => {}
        }
        if let Some(v) = self.int(&f, "workers", 1..=64).ok() {
            spec.workers = v as usize;
        }
        let cpus = online_cpus() as i64;
        let accepted = format!(
            "distinct CPUs 0..={} (this host has {cpus} online CPUs), like [0, 1]",
            cpus - 1
        );
        let cpu_list = self.distinct_ints(
            &f,
            "worker-cpus",
            0..=cpus - 1,
            ("online CPU", "CPUs"),
            &accepted,
        );
        if let Field::Ok(list, span) = cpu_list {
            if list.len() != spec.workers {
                self.error(
                    &span,
                    "[dataplane]",
                    Some("worker-cpus"),
                    format!(
                        "{} CPUs for {} worker{}; accepted: one CPU per worker",
                        list.len(),
                        spec.workers,
                        if spec.workers == 1 { "" } else { "s" }
                    ),
                );
            } else {
                spec.worker_cpus = list.into_iter().map(|c| c as usize).collect();
            }
        }
        if spec.workers > 1 {
            if let Some(n) = f.get("worker-cpu") {
                self.bad(
                    &f,
                    "worker-cpu",
                    n,
                    "`worker-cpu` pins the only worker; with workers > 1 accepted: worker-cpus = \
                     [CPU, ...] with one CPU per worker",
                );
            }
        }
        match self.string(&f, "ip4-options") {
            Field::Ok("forward", _) => spec.ip.ip4_options = OptionsPolicy::Forward,
            Field::Ok("drop", _) => spec.ip.ip4_options = OptionsPolicy::Drop,
            Field::Ok(s, span) => self.error(
                &span,
                "[dataplane]",
                Some("ip4-options"),
                format!("`{s}` is not a policy; accepted: \"forward\", \"drop\""),
            ),
            Field::Missing | Field::Bad => {}
        }
        let max = i64::from(u32::MAX);
        if let Some(v) = self.int(&f, "icmp-errors-per-second", 0..=max).ok() {
            spec.ip.icmp_errors_per_second = v as u32;
        }
        if let Some(v) = self.int(&f, "icmp-errors-burst", 0..=max).ok() {
            spec.ip.icmp_errors_burst = v as u32;
        }
        let max_macs = dataplane::MAX_BRIDGE_MACS as i64;
        if let Some(v) = self.int(&f, "bridge-max-macs", 0..=max_macs).ok() {
            spec.bridge.max_macs = v as usize;
        }
        if let Some(v) = self.int(&f, "bridge-age-seconds", 0..=max).ok() {
            spec.bridge.age_seconds = v as u32;
        }
        let capacity = dataplane::MAX_NEIGHBOUR_CAPACITY as i64;
        if let Some(v) = self.int(&f, "neighbour-capacity", 1..=capacity).ok() {
            spec.neighbour.capacity = v as usize;
        }
        if let Some(v) = self.int(&f, "neighbour-reachable-seconds", 1..=86_400).ok() {
            spec.neighbour.reachable_seconds = v as u32;
        }
        if let Some(v) = self.int(&f, "neighbour-gc-seconds", 1..=86_400).ok() {
            spec.neighbour.gc_seconds = v as u32;
        }
        if let Some(v) = self.int(&f, "neighbour-queue", 1..=256).ok() {
            spec.neighbour.queue_per_neighbour = v as u16;
        }
        if let Some(v) = self.int(&f, "poll-sleep-max-us", 10..=100_000).ok() {
            spec.poll.sleep_max_us = v as u32;
        }
        if let Some(v) = self.int(&f, "rxq-rebalance-seconds", 0..=3600).ok() {
            spec.rxq.rebalance_seconds = v as u32;
        }
        if let Some(v) = self.int(&f, "rxq-rebalance-busy-percent", 1..=100).ok() {
            spec.rxq.busy_percent = v as u32;
        }
        self.punt(&f, &mut spec.punt);
        self.poll_mode(&f, &mut spec.poll, spec.workers);
    }

    /// The punt and inject channels: ring size (a power of two), snap length, rates, bursts.
    fn punt(&mut self, f: &Fields<'_>, punt: &mut dataplane::PuntPolicy) {
        let max = i64::from(u32::MAX);
        if let Field::Ok(v, span) = self.int(f, "punt-ring-slots", 16..=65536) {
            if (v as u64).is_power_of_two() {
                punt.slots = v as u32;
            } else {
                self.error(
                    &span,
                    "[dataplane]",
                    Some("punt-ring-slots"),
                    format!(
                        "{v} is not a power of two; accepted: 16, 32, ..., 65536 (e.g. {})",
                        (v as u64).next_power_of_two()
                    ),
                );
            }
        }
        if let Some(v) = self.int(f, "punt-snap-bytes", 64..=65535).ok() {
            punt.snap_bytes = v as u32;
        }
        if let Some(v) = self.int(f, "punt-per-second", 0..=max).ok() {
            punt.per_second = v as u32;
        }
        if let Some(v) = self.int(f, "punt-burst", 1..=max).ok() {
            punt.burst = v as u32;
        }
        if let Some(v) = self.int(f, "inject-per-second", 0..=max).ok() {
            punt.inject_per_second = v as u32;
        }
        if let Some(v) = self.int(f, "inject-burst", 1..=max).ok() {
            punt.inject_burst = v as u32;
        }
    }

    /// `poll-mode`: one mode for every worker, or an array with one mode per worker.
    fn poll_mode(&mut self, f: &Fields<'_>, poll: &mut PollPolicy, workers: usize) {
        let Some(n) = f.get("poll-mode") else {
            return;
        };
        let accepted = format!(
            "{POLL_MODES_ACCEPTED}, or an array with one of them per worker like \
             [\"busy\", \"adaptive\"]"
        );
        let mode_of = |v: &Val| match v {
            Val::Str(s) if s == "busy" => Some(PollMode::Busy),
            Val::Str(s) if s == "adaptive" => Some(PollMode::Adaptive),
            _ => None,
        };
        match n.get_ref() {
            Val::Array(items) => {
                let mut modes = Vec::new();
                for item in items {
                    match mode_of(item.get_ref()) {
                        Some(m) => modes.push(m),
                        None => self.bad(
                            f,
                            "poll-mode",
                            item,
                            format!(
                                "{} {} is not a poll mode; accepted: {POLL_MODES_ACCEPTED}",
                                kind(item.get_ref()),
                                show(item.get_ref())
                            ),
                        ),
                    }
                }
                if modes.len() != items.len() {
                    return;
                }
                if modes.len() != workers {
                    self.bad(
                        f,
                        "poll-mode",
                        n,
                        format!(
                            "{} poll modes for {workers} worker{}; accepted: one mode per worker, \
                             or a single mode for all: {POLL_MODES_ACCEPTED}",
                            modes.len(),
                            if workers == 1 { "" } else { "s" }
                        ),
                    );
                    return;
                }
                poll.modes = modes;
            }
            other => match mode_of(other) {
                Some(m) => {
                    poll.modes = Vec::new();
                    poll.default = m;
                }
                None => self.bad(
                    f,
                    "poll-mode",
                    n,
                    format!(
                        "{} {} is not a poll mode; accepted: {accepted}",
                        kind(other),
                        show(other)
                    ),
                ),
            },
        }
    }
}

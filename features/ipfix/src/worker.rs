//! One worker's side of the feature: its meters (input arcs; output arc when that node is
//! built), its wall clock, the producing end of its ring to the exporter, and the maintenance
//! its timer node runs (aging, flushes, re-anchoring the clock). Also `IpfixWorker`, which
//! builds that worker's nodes around one shared state. It never blocks, and after the worker's
//! nodes are built it allocates nothing.

use crate::clock::WallClock;
use crate::meter::{AllocError, Meter, MeterCounters, Timeouts};
use crate::node::{Annotate, ArcBinding, IpfixNode, IpfixTimer, Kind, NoAnnotation};
use crate::record::FlowRecord;
use crate::ring::Producer;
use graph::{InputNode, Node};
use nodes::neighbour::WorkerCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// How often the timer node runs the maintenance, in ms.
pub const MAINTAIN_EVERY_MS: u64 = 10;

/// Most buckets a maintenance call visits per table (bounds its time: 4 x 4,096 entries).
pub const MAX_SWEEP_BUCKETS: usize = 4096;

/// What every worker reads at run time; the control handle changes it.
#[derive(Debug)]
pub struct LiveSettings {
    /// One packet in N is metered.
    pub sampling: AtomicU32,
    /// Idle timeout, ms.
    pub idle_ms: AtomicU64,
    /// Active timeout, ms.
    pub active_ms: AtomicU64,
    /// Bumped to ask every worker for a forced flush.
    pub flush_generation: AtomicU64,
}

impl LiveSettings {
    pub(crate) fn new(sampling: u32, idle_s: u32, active_s: u32) -> LiveSettings {
        LiveSettings {
            sampling: AtomicU32::new(sampling),
            idle_ms: AtomicU64::new(u64::from(idle_s) * 1000),
            active_ms: AtomicU64::new(u64::from(active_s) * 1000),
            flush_generation: AtomicU64::new(0),
        }
    }

    pub(crate) fn timeouts(&self) -> Timeouts {
        Timeouts {
            idle_ms: self.idle_ms.load(Ordering::Relaxed).max(1),
            active_ms: self.active_ms.load(Ordering::Relaxed).max(1),
        }
    }
}

/// What the control plane sees of one worker.
#[derive(Debug, Default)]
pub struct WorkerShared {
    /// Its metering counters.
    pub counters: MeterCounters,
    /// The last flush generation it finished.
    pub flushed: AtomicU64,
}

/// One worker's state, shared by its IPFIX nodes through a `WorkerCell`.
pub struct WorkerState {
    pub(crate) clock: WallClock,
    input: Meter,
    output: Option<Meter>,
    ring: Producer<FlowRecord>,
    pub(crate) settings: Arc<LiveSettings>,
    pub(crate) shared: Arc<WorkerShared>,
    flows: usize,
    flush_seen: u64,
    flushing: bool,
}

impl WorkerState {
    /// The meter (input or output), the ring and the counters, borrowed apart.
    #[inline(always)]
    pub(crate) fn parts(
        &mut self,
        output: bool,
    ) -> (
        Option<&mut Meter>,
        &mut Producer<FlowRecord>,
        &MeterCounters,
    ) {
        let meter = if output {
            self.output.as_mut()
        } else {
            Some(&mut self.input)
        };
        (meter, &mut self.ring, &self.shared.counters)
    }

    /// One packet in this many is metered now.
    #[inline(always)]
    pub(crate) fn sampling(&self) -> u32 {
        self.settings.sampling.load(Ordering::Relaxed).max(1)
    }

    /// Flows metered now.
    pub(crate) fn live(&self) -> usize {
        self.input.live() + self.output.as_ref().map_or(0, Meter::live)
    }

    pub(crate) fn flush_seen(&self) -> u64 {
        self.flush_seen
    }

    pub(crate) fn is_flushing(&self) -> bool {
        self.flushing
    }

    /// The timer's work: re-anchor the clock, start a flush that was asked for, report what
    /// is due, and say when a flush is finished.
    pub(crate) fn maintain(&mut self, tsc: u64, tsc_hz: u64) {
        self.clock.maybe_reanchor(tsc, tsc_hz);
        let now = self.clock.now_ms(tsc, tsc_hz);
        let asked = self.settings.flush_generation.load(Ordering::Acquire);
        if asked != self.flush_seen {
            self.flush_seen = asked;
            self.flushing = true;
            self.input.flush();
            if let Some(o) = self.output.as_mut() {
                o.flush();
            }
        }
        let t = self.settings.timeouts();
        let c = &self.shared.counters;
        let mut done = self
            .input
            .sweep(c, &mut self.ring, now, t, MAX_SWEEP_BUCKETS);
        if let Some(o) = self.output.as_mut() {
            done &= o.sweep(c, &mut self.ring, now, t, MAX_SWEEP_BUCKETS);
        }
        if self.flushing && done {
            self.flushing = false;
            self.shared
                .flushed
                .store(self.flush_seen, Ordering::Release);
        }
    }

    /// Build the output meter (cold, once).
    fn ensure_output(&mut self) -> Result<(), AllocError> {
        if self.output.is_none() {
            self.output = Some(Meter::new(self.flows)?);
        }
        Ok(())
    }
}

impl Drop for WorkerState {
    /// The worker's graph is going away (feature disabled, graph rebuilt): report every flow
    /// (`forcedEnd`) as far as the ring has room, and stop counting this worker in flushes.
    fn drop(&mut self) {
        let now = crate::clock::system_ms().max(self.clock.now_ms(0, 1));
        let t = self.settings.timeouts();
        self.input.flush();
        let c = &self.shared.counters;
        self.input.sweep(c, &mut self.ring, now, t, usize::MAX);
        if let Some(o) = self.output.as_mut() {
            o.flush();
            o.sweep(c, &mut self.ring, now, t, usize::MAX);
        }
        self.shared.flushed.store(u64::MAX, Ordering::Release);
    }
}

/// Builds one worker's IPFIX nodes; they share the worker's state (a `WorkerCell`: every
/// node and the timer must go into the same worker's graph).
pub struct IpfixWorker {
    state: Arc<WorkerCell<WorkerState>>,
}

impl IpfixWorker {
    pub(crate) fn new(
        flows: usize,
        ring: Producer<FlowRecord>,
        settings: Arc<LiveSettings>,
        shared: Arc<WorkerShared>,
    ) -> Result<IpfixWorker, AllocError> {
        let flush_seen = settings.flush_generation.load(Ordering::Acquire);
        shared.flushed.store(flush_seen, Ordering::Release);
        let state = WorkerState {
            clock: WallClock::default(),
            input: Meter::new(flows)?,
            output: None,
            ring,
            settings,
            shared,
            flows,
            flush_seen,
            flushing: false,
        };
        Ok(IpfixWorker {
            state: Arc::new(WorkerCell::new(state)),
        })
    }

    /// `ipfix-ip4`, on an IPv4 input arc.
    pub fn ip4_node(&self, arc: ArcBinding) -> Box<dyn Node> {
        self.ip4_node_annotated(arc, NoAnnotation)
    }

    /// `ipfix-ip6`, on an IPv6 input arc.
    pub fn ip6_node(&self, arc: ArcBinding) -> Box<dyn Node> {
        self.ip6_node_annotated(arc, NoAnnotation)
    }

    /// `ipfix-output`, on the output arc (allocates the output meter's tables).
    pub fn output_node(&self, arc: ArcBinding) -> Result<Box<dyn Node>, AllocError> {
        self.output_node_annotated(arc, NoAnnotation)
    }

    /// `ipfix-ip4` reading annotations from `a`.
    pub fn ip4_node_annotated<A: Annotate>(&self, arc: ArcBinding, a: A) -> Box<dyn Node> {
        if A::ACTIVE {
            self.state.with(|st| st.input.v4.enable_annotations());
        }
        Box::new(IpfixNode::new(Kind::Ip4, arc, self.state.clone(), a))
    }

    /// `ipfix-ip6` reading annotations from `a`.
    pub fn ip6_node_annotated<A: Annotate>(&self, arc: ArcBinding, a: A) -> Box<dyn Node> {
        if A::ACTIVE {
            self.state.with(|st| st.input.v6.enable_annotations());
        }
        Box::new(IpfixNode::new(Kind::Ip6, arc, self.state.clone(), a))
    }

    /// `ipfix-output` reading annotations from `a`.
    pub fn output_node_annotated<A: Annotate>(
        &self,
        arc: ArcBinding,
        a: A,
    ) -> Result<Box<dyn Node>, AllocError> {
        self.state.with(|st| {
            st.ensure_output()?;
            if A::ACTIVE {
                if let Some(o) = st.output.as_mut() {
                    o.v4.enable_annotations();
                    o.v6.enable_annotations();
                }
            }
            Ok::<(), AllocError>(())
        })?;
        Ok(Box::new(IpfixNode::new(
            Kind::Output,
            arc,
            self.state.clone(),
            a,
        )))
    }

    /// `ipfix-timer`, the input node that ages this worker's flows (one per worker).
    pub fn timer(&self) -> Box<dyn InputNode> {
        Box::new(IpfixTimer::new(self.state.clone()))
    }
}

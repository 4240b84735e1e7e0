//! The graph nodes: `ipfix-ip4` and `ipfix-ip6` (on the IPv4/IPv6 unicast input arcs, reading
//! the L3 offset `ip4-input`/`ip6-input` set), `ipfix-output` (on the output arc, reading the
//! Ethernet header itself, so it also sees the sending port), and `ipfix-timer` (an input node
//! without packets that ages flows and keeps the wall clock anchored when no traffic comes).
//! A metering node counts each packet (or one in N) and sends it on along its arc with an
//! `ArcCursor`. It never changes a packet's bytes or metadata, never drops, and never
//! allocates, locks or makes a system call per packet.
//!
//! Sampling is a deterministic countdown (systematic count-based, RFC 5475): the packets
//! passed over cost a subtraction per vector, and when every place on the arc has the same
//! next feature (the common case) the node does not even read their metadata. The counting
//! loops are `vector`'s.

use crate::record::Annotation;
use crate::vector::{meter_input, meter_output, Ctx, Pick, Scratch, V4, V6};
use crate::worker::{WorkerState, MAINTAIN_EVERY_MS};
use graph::arc::{ArcConfig, ArcCursor};
use graph::{Dispatch, InputNode, Node, NodeContext};
use nodes::neighbour::WorkerCell;
use packet::BufferPool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Name of the IPv4 metering node.
pub const IPFIX_IP4: &str = "ipfix-ip4";
/// Name of the IPv6 metering node.
pub const IPFIX_IP6: &str = "ipfix-ip6";
/// Name of the output metering node.
pub const IPFIX_OUTPUT: &str = "ipfix-output";
/// Name of the timer input node.
pub const IPFIX_TIMER: &str = "ipfix-timer";

/// Which port is a packet's place on the node's arc (the place its enabled set is read for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The receiving port (input arcs).
    RxPort,
    /// The sending port (the output arc).
    TxPort,
}

/// How a node sits on its arc, as the registry computes it.
pub struct ArcBinding {
    /// The node's next nodes: `Arcs::next_nodes(arc, Some(position))`.
    pub next_nodes: Vec<String>,
    /// Its step along the arc: `Arcs::cursor_at(arc, Some(position), 0)`.
    pub cursor: ArcCursor,
    /// The enabled sets, as published.
    pub config: live::Reader<ArcConfig>,
    /// What a packet's place is.
    pub place: Place,
}

/// Where a node learns what the LB or the flow switch decided for a packet (e.g. from a
/// per-feature metadata area they fill). Called only for metered packets.
pub trait Annotate: Send + 'static {
    /// False for a source that never has anything: the node then skips the call and the
    /// tables keep no annotations.
    const ACTIVE: bool = true;
    /// What is known about buffer `b`'s flow.
    fn annotate(&self, pool: &BufferPool, b: u32) -> Annotation;
}

/// No annotations (the default until packet metadata carries the LB's server and the
/// flow switch's cookie).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAnnotation;

impl Annotate for NoAnnotation {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn annotate(&self, _: &BufferPool, _: u32) -> Annotation {
        Annotation::default()
    }
}

/// What a metering node reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// IPv4 at `meta.l3_offset`, input metering.
    Ip4,
    /// IPv6 at `meta.l3_offset`, input metering.
    Ip6,
    /// Ethernet frames about to be sent, output metering.
    Output,
}

/// A metering node (`ipfix-ip4`, `ipfix-ip6` or `ipfix-output`).
pub struct IpfixNode<A: Annotate = NoAnnotation> {
    kind: Kind,
    arc: ArcBinding,
    state: Arc<WorkerCell<WorkerState>>,
    /// Packets still to pass over before the next sampled one.
    skip: u32,
    annotate: A,
    scratch: Scratch,
}

impl<A: Annotate> IpfixNode<A> {
    pub(crate) fn new(
        kind: Kind,
        arc: ArcBinding,
        state: Arc<WorkerCell<WorkerState>>,
        annotate: A,
    ) -> IpfixNode<A> {
        IpfixNode {
            kind,
            arc,
            state,
            skip: 0,
            annotate,
            scratch: Scratch::new(A::ACTIVE),
        }
    }
}

/// The next index every place gets, when they all get the same (checked for up to 64 places;
/// a packet reaching this node came from a place the arc's sets cover).
#[inline]
fn uniform_next(cursor: &ArcCursor, masks: &[u32]) -> Option<u16> {
    if cursor.is_end_only() {
        return Some(cursor.next_for(0));
    }
    let first = cursor.next_for(masks.first().copied().unwrap_or(0));
    (masks.len() <= 64 && masks.iter().all(|&m| cursor.next_for(m) == first)).then_some(first)
}

/// Meter `frame` on `st` (every packet, or one in N continuing the countdown `skip`).
#[allow(clippy::too_many_arguments)]
fn meter_vector<A: Annotate>(
    st: &mut WorkerState,
    sc: &mut Scratch,
    kind: Kind,
    pool: &BufferPool,
    frame: &[u32],
    annotate: &A,
    skip: &mut u32,
    now_tsc: u64,
    tsc_hz: u64,
) {
    let sampling = st.sampling();
    let now = st.clock.now_ms(now_tsc, tsc_hz);
    let (pick, left) = Pick::new(sampling, *skip, frame.len());
    *skip = left;
    let (meter, ring, c) = st.parts(kind == Kind::Output);
    let Some(meter) = meter else {
        return;
    };
    let cx = Ctx {
        pool,
        annotate,
        sampling,
        now,
    };
    let (counted, unreadable) = match kind {
        Kind::Ip4 => meter_input::<V4, A>(&cx, meter, ring, c, sc, frame, pick),
        Kind::Ip6 => meter_input::<V6, A>(&cx, meter, ring, c, sc, frame, pick),
        Kind::Output => meter_output(&cx, meter, ring, c, sc, frame, pick),
    };
    c.packets.add(counted as u64);
    if sampling > 1 {
        c.skipped
            .add((frame.len() - pick.count(frame.len())) as u64);
    }
    if unreadable != 0 {
        c.unreadable.add(unreadable as u64);
    }
}

impl<A: Annotate> Node for IpfixNode<A> {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Ip4 => IPFIX_IP4,
            Kind::Ip6 => IPFIX_IP6,
            Kind::Output => IPFIX_OUTPUT,
        }
    }

    fn next_nodes(&self) -> Vec<String> {
        self.arc.next_nodes.clone()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (kind, annotate, skip) = (self.kind, &self.annotate, &mut self.skip);
        let sc = &mut self.scratch;
        let pool: &BufferPool = cx.pool;
        let (now_tsc, tsc_hz) = (cx.now_tsc, cx.tsc_hz);
        self.state
            .with(|st| meter_vector(st, sc, kind, pool, frame, annotate, skip, now_tsc, tsc_hz));
        let cursor = self.arc.cursor;
        let config = self.arc.config.get();
        let masks = config.masks(cursor.arc());
        if let Some(next) = uniform_next(&cursor, masks) {
            return Dispatch::AllTo(next);
        }
        for (i, &b) in frame.iter().enumerate() {
            let m = cx.pool.meta(b);
            let place = match self.arc.place {
                Place::RxPort => m.rx_port,
                Place::TxPort => m.tx_port,
            };
            if let Some(n) = nexts.get_mut(i) {
                *n = cursor.next(masks, usize::from(place));
            }
        }
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "{}: metered, rx_port {} tx_port {} length {}",
            self.name(),
            m.rx_port,
            m.tx_port,
            m.length
        )
    }
}

/// `ipfix-timer`: ages the worker's flows and anchors its clock every `MAINTAIN_EVERY_MS`,
/// also when no packet arrives. It brings no packets.
pub struct IpfixTimer {
    state: Arc<WorkerCell<WorkerState>>,
    next_tsc: u64,
    /// TSC ticks between wake-ups of a sleeping worker with flows to age.
    idle_wake: u64,
}

/// How often a sleeping worker with flows is woken to age them, in ms (the sweep visits
/// every bucket within a second anyway).
pub const IDLE_WAKE_MS: u64 = 100;

impl IpfixTimer {
    pub(crate) fn new(state: Arc<WorkerCell<WorkerState>>) -> IpfixTimer {
        IpfixTimer {
            state,
            next_tsc: 0,
            idle_wake: 0,
        }
    }
}

impl InputNode for IpfixTimer {
    fn name(&self) -> &str {
        IPFIX_TIMER
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![nodes::names::ERROR_DROP.to_string()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        _: &mut [u32],
        _: &mut [u16],
    ) -> (usize, Dispatch) {
        if cx.now_tsc >= self.next_tsc {
            self.next_tsc = cx.now_tsc + cx.tsc_hz / 1000 * MAINTAIN_EVERY_MS;
            self.idle_wake = cx.tsc_hz / 1000 * IDLE_WAKE_MS;
            let (tsc, hz) = (cx.now_tsc, cx.tsc_hz);
            self.state.with(|st| st.maintain(tsc, hz));
        }
        (0, Dispatch::AllTo(0))
    }

    /// It never has packets of its own: a run of finite inputs may end around it.
    fn is_finished(&self) -> bool {
        true
    }

    fn next_timer(&self) -> Option<u64> {
        let (flows, flush) = self.state.with(|st| {
            let asked = st.settings.flush_generation.load(Ordering::Acquire) != st.flush_seen();
            (st.live() != 0, asked || st.is_flushing())
        });
        if flush {
            Some(self.next_tsc)
        } else {
            flows.then_some(self.next_tsc.saturating_add(self.idle_wake))
        }
    }
}

//! The actions of `flow-switch` and `flow-packet-out`: running a packet's datapath actions
//! (header edits, outputs with copies, flood, `normal`, tunnel output, punts to the control
//! plane) on its buffer. The `Executor` owns the node's emitter (the copies) and its handle on
//! the worker's punt ring; it never looks anything up in the caches or the tables, and a punt
//! is a copy into a preallocated ring slot (no allocation, no lock, no system call).

use super::{count, fail, FlowDrop, FlowNext, FlowPortInfo, FlowWorkerShared};
use crate::inject::SharedPunt;
use channel::punt::{PuntDrop, PuntMeta, NO_SWITCH};
use flow::execute::apply_to_buffer;
use flow::extract::Parsed;
use flow::{DpAction, DpActions};
use graph::{Emitter, NodeContext, NEXT_CONSUMED};
use packet::meta::FLAG_TUNNEL;
use packet::BufferPool;
use std::sync::atomic::Ordering;

#[inline]
fn is_output(a: &DpAction) -> bool {
    matches!(
        a,
        DpAction::Output(_) | DpAction::Flood | DpAction::Normal | DpAction::TunnelOutput { .. }
    )
}

#[inline]
fn is_punt(a: &DpAction) -> bool {
    matches!(a, DpAction::Controller { .. })
}

/// A copy of packet `b` in a new buffer (metadata and feature line too, at the same place in
/// its slot), or None when the pool is empty.
fn copy_packet(pool: &mut BufferPool, b: u32) -> Option<u32> {
    let meta = *pool.meta(b);
    let len = usize::from(meta.length);
    let c =
        pool.alloc_for((usize::from(meta.data_offset) + len).saturating_sub(pool.headroom()))?;
    if !pool.copy_between(b, 0, len, c, usize::from(meta.data_offset)) {
        pool.free(c);
        return None;
    }
    pool.copy_meta(b, c);
    Some(c)
}

/// The bridge a packet's actions run in.
pub(super) struct Bridge<'a> {
    /// Its ports (vecplane ids), for `flood`.
    pub members: &'a [u16],
    /// Its worker-side counters.
    pub shared: &'a FlowWorkerShared,
    /// (bridge index, OpenFlow `in_port`) for punts; None: from the packet's `rx_port`.
    pub origin: Option<(u16, u16)>,
}

/// Runs datapath actions on packets: the emitter of the copies, the punt ring.
pub(super) struct Executor {
    pub(super) emitter: Emitter,
    punt: Option<SharedPunt>,
    /// By vecplane port: its bridge and OpenFlow number (what a punt says it came in on).
    ports: Box<[Option<FlowPortInfo>]>,
    /// Punted since the last `flush`.
    punted: bool,
}

impl Executor {
    pub(super) fn new(emitter: Emitter, ports: &[Option<FlowPortInfo>]) -> Executor {
        Executor {
            emitter,
            punt: None,
            ports: ports.into(),
            punted: false,
        }
    }

    /// Punt through `punt` (without one, `controller` actions count `punt-ring-full`).
    pub(super) fn set_punt(&mut self, punt: SharedPunt) {
        self.punt = Some(punt);
    }

    /// After a vector: wake the punt consumer if this vector punted.
    #[inline]
    pub(super) fn flush(&mut self) {
        if std::mem::take(&mut self.punted) {
            if let Some(p) = &self.punt {
                p.with(|p| p.flush());
            }
        }
    }

    /// Send a copy of packet `i` (buffer `b`) to `next` with `tx_port`, cut to at most
    /// `max_len` bytes (`output(port=,max_len=)`; `u16::MAX` for the whole packet); counts what
    /// fails.
    fn emit_copy(
        &mut self,
        cx: &mut NodeContext<'_>,
        (i, b): (usize, u32),
        next: u16,
        tx_port: u16,
        max_len: u16,
    ) {
        if self.emitter.is_full() {
            count(cx, FlowDrop::CopyQueueFull);
            return;
        }
        let Some(c) = copy_packet(cx.pool, b) else {
            count(cx, FlowDrop::NoBufferForCopy);
            return;
        };
        let m = cx.pool.meta_mut(c);
        m.tx_port = tx_port;
        m.length = m.length.min(max_len);
        if let Err(c) = self.emitter.emit(i, next, c) {
            cx.pool.free(c);
            count(cx, FlowDrop::CopyQueueFull);
        }
    }

    /// Punt a copy of packet `b` as it is now (`DpAction::Controller`); counts a refusal.
    #[cold]
    fn punt(&mut self, cx: &mut NodeContext<'_>, b: u32, a: &DpAction, origin: Option<(u16, u16)>) {
        let DpAction::Controller {
            max_len,
            reason,
            table,
            cookie,
        } = *a
        else {
            return;
        };
        let Some(punt) = &self.punt else {
            count(cx, FlowDrop::PuntRingFull);
            return;
        };
        let (m, data) = cx.pool.packet(b);
        let (switch, in_port) = origin
            .or_else(|| {
                self.ports
                    .get(usize::from(m.rx_port))
                    .copied()
                    .flatten()
                    .map(|p| (p.switch, p.ofport))
            })
            .unwrap_or((NO_SWITCH, 0));
        let meta = PuntMeta {
            reason,
            rx_port: m.rx_port,
            in_port,
            switch,
            table,
            cookie,
            max_len,
            ..PuntMeta::default()
        };
        match punt.with(|p| p.punt(cx.now_tsc, &meta, data)) {
            Ok(()) => self.punted = true,
            Err(PuntDrop::RingFull) => count(cx, FlowDrop::PuntRingFull),
            Err(PuntDrop::RateLimited) => count(cx, FlowDrop::PuntRateLimited),
        }
    }

    /// Run `actions` on packet `i` (buffer `b`, parsed as `parsed`) in `bridge`; returns its
    /// next index. The last output takes the packet itself and earlier ones take copies, unless
    /// an edit follows it (then every output takes a copy); a punt copies the packet as it is
    /// at that point. A packet whose actions only punt is consumed here (no drop is counted:
    /// it went where its rules said).
    pub(super) fn run(
        &mut self,
        cx: &mut NodeContext<'_>,
        (i, b): (usize, u32),
        parsed: &mut Parsed,
        actions: &DpActions,
        bridge: &Bridge<'_>,
    ) -> u16 {
        let acts = actions.as_slice();
        // The usual megaflow: one output, nothing else.
        if let [DpAction::Output(port)] = acts {
            cx.pool.meta_mut(b).tx_port = *port;
            return FlowNext::Output.id();
        }
        let Some(end) = acts.iter().rposition(|a| is_output(a) || is_punt(a)) else {
            return fail(cx, b, FlowDrop::DroppedByRules);
        };
        // The output that takes the packet itself: the last one, when only punts of the packet
        // as it goes out follow it (not when it is truncated: a punt wants it whole).
        let own = acts[..=end].iter().rposition(is_output).filter(|&k| {
            acts[k + 1..=end].iter().all(is_punt)
                && (k + 1 > end || k == 0 || !matches!(acts[k - 1], DpAction::Truncate(_)))
        });
        let rx = cx.pool.meta(b).rx_port;
        let mut next = FlowNext::Drop.id();
        // `Truncate(n)`: the next output sends at most n bytes.
        let mut truncate: Option<u16> = None;
        for (k, a) in acts[..=end].iter().enumerate() {
            let is_last = Some(k) == own;
            if let (Some(n), DpAction::Output(port)) = (truncate, *a) {
                truncate = None;
                if is_last {
                    let m = cx.pool.meta_mut(b);
                    m.tx_port = port;
                    m.length = m.length.min(n);
                    next = FlowNext::Output.id();
                } else {
                    self.emit_copy(cx, (i, b), FlowNext::Output.id(), port, n);
                }
                continue;
            }
            match *a {
                DpAction::Truncate(n) => truncate = Some(n),
                DpAction::Set { .. } | DpAction::PushVlan { .. } | DpAction::PopVlan => {
                    // A rewrite that does not fit the packet (no such header) is a no-op,
                    // counted, and the actions go on, as Open vSwitch's datapath does.
                    if apply_to_buffer(cx.pool, b, parsed, a).is_err() {
                        bridge.shared.action_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                DpAction::Controller { .. } => self.punt(cx, b, a, bridge.origin),
                DpAction::Output(port) => {
                    if is_last {
                        cx.pool.meta_mut(b).tx_port = port;
                        next = FlowNext::Output.id();
                    } else {
                        self.emit_copy(cx, (i, b), FlowNext::Output.id(), port, u16::MAX);
                    }
                }
                DpAction::TunnelOutput { port, tun_id } => {
                    if is_last {
                        tunnel(cx.pool, b, port, tun_id);
                        next = FlowNext::Output.id();
                    } else {
                        self.emit_tunnel_copy(cx, (i, b), port, tun_id);
                    }
                }
                DpAction::Flood => {
                    let targets = bridge.members.iter().filter(|&&m| m != rx);
                    let n = targets.clone().count();
                    for (j, &m) in targets.enumerate() {
                        if is_last && j + 1 == n {
                            cx.pool.meta_mut(b).tx_port = m;
                            next = FlowNext::Output.id();
                        } else {
                            self.emit_copy(cx, (i, b), FlowNext::Output.id(), m, u16::MAX);
                        }
                    }
                }
                DpAction::Normal => {
                    if is_last {
                        next = FlowNext::Bridge.id();
                    } else {
                        self.emit_copy(cx, (i, b), FlowNext::Bridge.id(), rx, u16::MAX);
                    }
                }
                DpAction::Nop => {}
            }
        }
        if next != FlowNext::Drop.id() {
            return next;
        }
        if own.is_none() {
            // Every output took a copy (or there was none, only punts): the packet is done.
            cx.pool.free(b);
            return NEXT_CONSUMED;
        }
        // A flood to no other port.
        fail(cx, b, FlowDrop::DroppedByRules)
    }

    /// A copy of packet `b` for tunnel port `port` with VNI `tun_id`.
    fn emit_tunnel_copy(
        &mut self,
        cx: &mut NodeContext<'_>,
        (i, b): (usize, u32),
        port: u16,
        tun_id: u64,
    ) {
        let Some(c) = copy_packet(cx.pool, b) else {
            count(cx, FlowDrop::NoBufferForCopy);
            return;
        };
        tunnel(cx.pool, c, port, tun_id);
        if let Err(c) = self.emitter.emit(i, FlowNext::Output.id(), c) {
            cx.pool.free(c);
            count(cx, FlowDrop::CopyQueueFull);
        }
    }
}

/// Send buffer `b` through tunnel port `port` with VNI `tun_id` (the VXLAN port's transmit
/// node takes the VNI from the metadata).
#[inline]
fn tunnel(pool: &mut BufferPool, b: u32, port: u16, tun_id: u64) {
    let m = pool.meta_mut(b);
    m.tx_port = port;
    m.tun_id = tun_id as u32;
    m.flags |= FLAG_TUNNEL;
}

//! The actions of `flow-switch`: running a packet's datapath actions (header edits, outputs
//! with copies, flood, `normal`, tunnel output) on its buffer. It owns no state of its own: the
//! node's emitter takes the copies, the pool gives their buffers. It never looks anything up in
//! the caches or the tables.

use super::{count, fail, FlowDrop, FlowNext, FlowSwitch, FlowWorkerShared};
use flow::execute::apply_to_buffer;
use flow::{DpAction, DpActions};
use graph::NodeContext;
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

impl FlowSwitch {
    /// Send a copy of packet `i` (buffer `b`) to `next` with `tx_port`, cut to at most
    /// `max_len` bytes (`output(port=,max_len=)`; `u16::MAX` for the whole packet); counts what
    /// fails.
    fn emit_copy(
        &mut self,
        cx: &mut NodeContext<'_>,
        i: usize,
        b: u32,
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

    /// Run `actions` on packet `i` (buffer `b`); returns its next index (the last output takes
    /// the packet itself, earlier ones take copies).
    pub(super) fn run(
        &mut self,
        cx: &mut NodeContext<'_>,
        i: usize,
        b: u32,
        actions: &DpActions,
        members: &[u16],
        shared: &FlowWorkerShared,
    ) -> u16 {
        let acts = actions.as_slice();
        // The usual megaflow: one output, nothing else.
        if let [DpAction::Output(port)] = acts {
            cx.pool.meta_mut(b).tx_port = *port;
            return FlowNext::Output.id();
        }
        let Some(last) = acts.iter().rposition(is_output) else {
            return fail(cx, b, FlowDrop::DroppedByRules);
        };
        let rx = cx.pool.meta(b).rx_port;
        let mut next = FlowNext::Drop.id();
        // `Truncate(n)`: the next output sends at most n bytes.
        let mut truncate: Option<u16> = None;
        for (k, a) in acts[..=last].iter().enumerate() {
            let is_last = k == last;
            if let (Some(n), DpAction::Output(port)) = (truncate, *a) {
                truncate = None;
                if is_last {
                    let m = cx.pool.meta_mut(b);
                    m.tx_port = port;
                    m.length = m.length.min(n);
                    next = FlowNext::Output.id();
                } else {
                    self.emit_copy(cx, i, b, FlowNext::Output.id(), port, n);
                }
                continue;
            }
            match *a {
                DpAction::Truncate(n) => truncate = Some(n),
                DpAction::Set { .. } | DpAction::PushVlan { .. } | DpAction::PopVlan => {
                    // A rewrite that does not fit the packet (no such header) is a no-op,
                    // counted, and the actions go on, as Open vSwitch's datapath does.
                    if apply_to_buffer(cx.pool, b, &mut self.parsed[i], a).is_err() {
                        shared.action_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                DpAction::Output(port) => {
                    if is_last {
                        cx.pool.meta_mut(b).tx_port = port;
                        next = FlowNext::Output.id();
                    } else {
                        self.emit_copy(cx, i, b, FlowNext::Output.id(), port, u16::MAX);
                    }
                }
                DpAction::TunnelOutput { port, tun_id } => {
                    // The VXLAN port's transmit node takes the VNI from the metadata.
                    if is_last {
                        let m = cx.pool.meta_mut(b);
                        m.tx_port = port;
                        m.tun_id = tun_id as u32;
                        m.flags |= FLAG_TUNNEL;
                        next = FlowNext::Output.id();
                    } else if let Some(c) = copy_packet(cx.pool, b) {
                        let m = cx.pool.meta_mut(c);
                        m.tx_port = port;
                        m.tun_id = tun_id as u32;
                        m.flags |= FLAG_TUNNEL;
                        if let Err(c) = self.emitter.emit(i, FlowNext::Output.id(), c) {
                            cx.pool.free(c);
                            count(cx, FlowDrop::CopyQueueFull);
                        }
                    } else {
                        count(cx, FlowDrop::NoBufferForCopy);
                    }
                }
                DpAction::Flood => {
                    let targets = members.iter().filter(|&&m| m != rx);
                    let n = targets.clone().count();
                    for (j, &m) in targets.enumerate() {
                        if is_last && j + 1 == n {
                            cx.pool.meta_mut(b).tx_port = m;
                            next = FlowNext::Output.id();
                        } else {
                            self.emit_copy(cx, i, b, FlowNext::Output.id(), m, u16::MAX);
                        }
                    }
                    if is_last && n == 0 {
                        return fail(cx, b, FlowDrop::DroppedByRules);
                    }
                }
                DpAction::Normal => {
                    if is_last {
                        next = FlowNext::Bridge.id();
                    } else {
                        self.emit_copy(cx, i, b, FlowNext::Bridge.id(), rx, u16::MAX);
                    }
                }
                DpAction::Nop => {}
            }
        }
        next
    }
}

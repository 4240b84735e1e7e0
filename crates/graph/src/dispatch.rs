//! The dispatcher: builds the graph once (resolving next-node names to ids), then carries each
//! input vector through every node until no frame is pending (run to completion). It owns the
//! pending frames and the counters' updates; it never looks inside a packet except the trace flag.
//! Packets a node emits besides its frame (see `Emitter`) are merged into the frame's order.

use crate::counters::{Counter, GraphStats, NodeStats};
use crate::node::{Dispatch, Emitted, InputNode, Node, NodeContext};
use crate::rdtsc;
use crate::trace::{TraceControl, TraceRecord, MAX_TRACE_RECORDS};
use packet::meta::FLAG_TRACE;
use packet::{BufferPool, VECTOR_SIZE};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use thiserror::Error;

/// Pending packets a node can hold between its runs (several upstream nodes may feed it).
pub const PENDING_CAPACITY: usize = VECTOR_SIZE * 8;

/// Name of the graph's own pseudo-node for its errors.
pub const GRAPH_NODE: &str = "graph";

/// Errors assembling a graph.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GraphError {
    /// Two nodes share a name.
    #[error("graph: two nodes are named `{0}`; node names must be unique")]
    DuplicateNode(String),
    /// A next node does not exist.
    #[error("graph: node `{node}` sends to `{next}`, which is not in the graph (nodes: {known})")]
    UnknownNext {
        /// The node naming it.
        node: String,
        /// The missing next node.
        next: String,
        /// The nodes that exist.
        known: String,
    },
    /// Too many next nodes or errors.
    #[error("graph: {0}")]
    TooLarge(String),
    /// An edit names a node it cannot change that way (see `GraphEdit`).
    #[error("graph edit: {0}")]
    Edit(String),
}

pub(crate) enum NodeImpl {
    Input(Box<dyn InputNode>),
    Internal(Box<dyn Node>),
}

impl NodeImpl {
    pub(crate) fn name(&self) -> String {
        match self {
            NodeImpl::Input(n) => n.name().to_string(),
            NodeImpl::Internal(n) => n.name().to_string(),
        }
    }
    pub(crate) fn next_nodes(&self) -> Vec<String> {
        match self {
            NodeImpl::Input(n) => n.next_nodes(),
            NodeImpl::Internal(n) => n.next_nodes(),
        }
    }
    pub(crate) fn error_reasons(&self) -> Vec<String> {
        match self {
            NodeImpl::Input(n) => n.error_reasons(),
            NodeImpl::Internal(n) => n.error_reasons(),
        }
    }
    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        match self {
            NodeImpl::Input(n) => n.trace(pool, buffer),
            NodeImpl::Internal(n) => n.trace(pool, buffer),
        }
    }
}

/// Collects nodes, then builds a `Graph`.
#[derive(Default)]
pub struct GraphBuilder {
    nodes: Vec<NodeImpl>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> GraphBuilder {
        GraphBuilder::default()
    }

    /// Add an input node.
    pub fn add_input(&mut self, node: Box<dyn InputNode>) -> &mut Self {
        self.nodes.push(NodeImpl::Input(node));
        self
    }

    /// Add an internal node.
    pub fn add_node(&mut self, node: Box<dyn Node>) -> &mut Self {
        self.nodes.push(NodeImpl::Internal(node));
        self
    }

    /// The nodes added so far (for `GraphEdit::from_builder`).
    pub(crate) fn into_nodes(self) -> Vec<NodeImpl> {
        self.nodes
    }

    /// Resolve names, order the nodes and allocate frames and counters.
    pub fn build(self, worker: usize, tsc_hz: u64) -> Result<Graph, GraphError> {
        let names: Vec<String> = self.nodes.iter().map(NodeImpl::name).collect();
        let mut by_name = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            if by_name.insert(n.clone(), i as u32).is_some() {
                return Err(GraphError::DuplicateNode(n.clone()));
            }
        }
        let mut error_names = vec![(GRAPH_NODE.to_string(), "frame-overflow".to_string())];
        let mut slots = Vec::with_capacity(self.nodes.len());
        let mut emit_capacity = 0;
        for mut imp in self.nodes {
            let name = imp.name();
            let next_names = imp.next_nodes();
            if next_names.len() >= u16::MAX as usize {
                return Err(GraphError::TooLarge(format!(
                    "node `{name}` has too many next nodes"
                )));
            }
            let mut next_ids = Vec::with_capacity(next_names.len());
            for next in &next_names {
                let id = by_name.get(next).ok_or_else(|| GraphError::UnknownNext {
                    node: name.clone(),
                    next: next.clone(),
                    known: names.join(", "),
                })?;
                next_ids.push(*id);
            }
            let error_base = error_names.len();
            for r in imp.error_reasons() {
                error_names.push((name.clone(), r));
            }
            if error_names.len() >= u16::MAX as usize {
                return Err(GraphError::TooLarge("too many drop reasons".into()));
            }
            let emits = match &mut imp {
                NodeImpl::Internal(n) => n.emitter().map(|e| e.capacity()),
                NodeImpl::Input(_) => None,
            };
            emit_capacity = emit_capacity.max(emits.unwrap_or(0));
            slots.push(Slot {
                imp,
                next_ids,
                next_names,
                error_base: error_base as u16,
                emits: emits.is_some(),
                retired: false,
            });
        }
        let order = topological_order(&slots);
        let inputs = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.imp, NodeImpl::Input(_)))
            .map(|(i, _)| i as u32)
            .collect();
        let stats = Arc::new(GraphStats {
            node_is_input: slots
                .iter()
                .map(|s| matches!(s.imp, NodeImpl::Input(_)))
                .collect(),
            node_names: names,
            nodes: slots.iter().map(|_| NodeStats::default()).collect(),
            errors: error_names.iter().map(|_| Counter::default()).collect(),
            error_names,
        });
        let pending = slots.iter().map(|_| Pending::new()).collect();
        let trace = Arc::new(TraceControl::new(slots.len()));
        Ok(Graph {
            pending,
            order,
            inputs,
            held: Vec::new(),
            draining: Vec::new(),
            parked: Vec::new(),
            retired: 0,
            removed_error: None,
            stats,
            trace,
            cur: vec![0; VECTOR_SIZE].into_boxed_slice(),
            nexts: vec![0; VECTOR_SIZE].into_boxed_slice(),
            emitted: vec![Emitted::default(); emit_capacity].into_boxed_slice(),
            traced: Vec::with_capacity(VECTOR_SIZE),
            trace_seq: 0,
            tsc_hz,
            worker,
            slots,
        })
    }
}

/// Nodes in an order where, ignoring back edges, every node comes after the nodes feeding it:
/// one pass then moves a vector from input to output; back edges (e.g. ICMP errors re-entering
/// lookup) are picked up by the next pass.
pub(crate) fn topological_order(slots: &[Slot]) -> Vec<u32> {
    let n = slots.len();
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut post = Vec::with_capacity(n);
    let roots = (0..n)
        .filter(|&i| matches!(slots[i].imp, NodeImpl::Input(_)))
        .chain(0..n);
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (node, ref mut next_i)) = stack.last_mut() {
            if let Some(&child) = slots[node].next_ids.get(*next_i) {
                *next_i += 1;
                if state[child as usize] == 0 {
                    state[child as usize] = 1;
                    stack.push((child as usize, 0));
                }
            } else {
                state[node] = 2;
                post.push(node as u32);
                stack.pop();
            }
        }
    }
    post.reverse();
    post.retain(|&i| matches!(slots[i as usize].imp, NodeImpl::Internal(_)));
    post
}

pub(crate) struct Slot {
    pub(crate) imp: NodeImpl,
    pub(crate) next_ids: Vec<u32>,
    pub(crate) next_names: Vec<String>,
    pub(crate) error_base: u16,
    /// The node has an `Emitter` to empty after each call.
    pub(crate) emits: bool,
    /// An edit retired the node: a sentinel holds its slot (see `GraphEdit::retire`).
    pub(crate) retired: bool,
}

pub(crate) struct Pending {
    pub(crate) buf: Box<[u32]>,
    pub(crate) len: usize,
}

impl Pending {
    pub(crate) fn new() -> Pending {
        Pending {
            buf: vec![0; PENDING_CAPACITY].into_boxed_slice(),
            len: 0,
        }
    }
}

/// A built graph for one worker.
pub struct Graph {
    pub(crate) slots: Vec<Slot>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) order: Vec<u32>,
    /// The inputs polled every round.
    pub(crate) inputs: Vec<u32>,
    /// Inputs an edit added but did not start yet (see `GraphEdit::hold_new_inputs`).
    pub(crate) held: Vec<u32>,
    /// Inputs polled after `inputs` until they come up empty (see `GraphEdit::drain`).
    pub(crate) draining: Vec<crate::edit::Draining>,
    /// Drained inputs, no longer polled, waiting to be retired.
    pub(crate) parked: Vec<u32>,
    /// Nodes retired so far (numbers their slots' new names).
    pub(crate) retired: u32,
    /// The graph's error id for packets sent to a retired node, once one was retired.
    pub(crate) removed_error: Option<u16>,
    pub(crate) stats: Arc<GraphStats>,
    pub(crate) trace: Arc<TraceControl>,
    cur: Box<[u32]>,
    nexts: Box<[u16]>,
    /// What the running node emitted (capacity: the largest emitter in the graph).
    pub(crate) emitted: Box<[Emitted]>,
    traced: Vec<u32>,
    trace_seq: u32,
    pub(crate) tsc_hz: u64,
    worker: usize,
}

impl Graph {
    /// The counters (shared with the control plane).
    pub fn stats(&self) -> Arc<GraphStats> {
        self.stats.clone()
    }

    /// The trace control (shared with the control plane).
    pub fn trace_control(&self) -> Arc<TraceControl> {
        self.trace.clone()
    }

    /// Id of the node named `name`.
    pub fn node_id(&self, name: &str) -> Option<usize> {
        self.stats.node_names.iter().position(|n| n == name)
    }

    /// The inputs the worker polls: every round, and those still draining.
    fn polled_inputs(&self) -> impl Iterator<Item = &dyn InputNode> {
        let ids = self.inputs.iter().copied();
        let ids = ids.chain(self.draining.iter().map(|d| d.id));
        ids.filter_map(|id| match &self.slots[id as usize].imp {
            NodeImpl::Input(n) => Some(&**n),
            NodeImpl::Internal(_) => None,
        })
    }

    /// True when every input is finished (a run of pcap files is over); an input held for a
    /// later start, or parked until it is retired, is not.
    pub fn is_finished(&self) -> bool {
        self.held.is_empty()
            && self.parked.is_empty()
            && self.polled_inputs().all(|n| n.is_finished())
    }

    /// The file descriptors of the inputs that have one (see `InputNode::wait_fd`).
    pub fn wait_fds(&self) -> Vec<std::os::fd::RawFd> {
        let mut fds = Vec::new();
        self.each_wait_fd(|fd| fds.push(fd));
        fds
    }

    /// `wait_fds` one by one, without allocating (an input's descriptor may come and go).
    pub fn each_wait_fd(&self, mut f: impl FnMut(std::os::fd::RawFd)) {
        for n in self.polled_inputs() {
            if let Some(fd) = n.wait_fd() {
                f(fd);
            }
        }
    }

    /// Whether every input agrees to sleep (see `InputNode::before_sleep`); when one does not,
    /// those that agreed are told the sleep is off.
    pub fn before_sleep(&self) -> bool {
        let mut all = true;
        for n in self.polled_inputs() {
            all &= n.before_sleep();
        }
        if !all {
            self.after_sleep();
        }
        all
    }

    /// Tell every input the worker woke up.
    pub fn after_sleep(&self) {
        for n in self.polled_inputs() {
            n.after_sleep();
        }
    }

    /// The soonest timer of any input (see `InputNode::next_timer`), in TSC ticks.
    pub fn next_timer(&self) -> Option<u64> {
        self.polled_inputs().filter_map(|n| n.next_timer()).min()
    }

    /// Tell every internal node the run is over (flushes output files).
    pub fn finish(&mut self) {
        for s in &mut self.slots {
            if let NodeImpl::Internal(n) = &mut s.imp {
                n.finish();
            }
        }
    }

    /// Poll every input once and carry what arrived through the graph; returns packets received.
    pub fn run_once(&mut self, pool: &mut BufferPool) -> usize {
        let mut received = 0;
        for k in 0..self.inputs.len() {
            let id = self.inputs[k] as usize;
            let t0 = rdtsc();
            let n = self.poll_input(pool, id, t0);
            self.drain(pool);
            if n > 0 {
                let dt = rdtsc().wrapping_sub(t0);
                self.stats.nodes[id].carried_clocks.add(dt);
            }
            received += n;
        }
        if !self.draining.is_empty() {
            received += self.poll_draining(pool);
        }
        received
    }

    pub(crate) fn poll_input(&mut self, pool: &mut BufferPool, id: usize, t0: u64) -> usize {
        let stats = &*self.stats;
        let slot = &mut self.slots[id];
        let NodeImpl::Input(node) = &mut slot.imp else {
            return 0;
        };
        let mut cx = NodeContext {
            pool,
            now_tsc: t0,
            tsc_hz: self.tsc_hz,
            worker: self.worker,
            error_base: slot.error_base,
            errors: &stats.errors,
            error_names: &stats.error_names,
        };
        let (n, dispatch) = node.poll(&mut cx, &mut self.cur, &mut self.nexts);
        let n = n.min(VECTOR_SIZE);
        if n > 0 && self.trace.budget[id].load(Ordering::Relaxed) > 0 {
            self.mark_traced(pool, id, n);
        }
        self.finish_call(pool, id, n, dispatch, 0, t0);
        n
    }

    fn mark_traced(&mut self, pool: &mut BufferPool, id: usize, n: usize) {
        let budget = &self.trace.budget[id];
        let want = budget.load(Ordering::Relaxed).min(n as u32);
        budget.fetch_sub(want, Ordering::Relaxed);
        for &b in &self.cur[..want as usize] {
            let m = pool.meta_mut(b);
            m.flags |= FLAG_TRACE;
            m.trace_id = self.trace_seq;
            self.trace_seq = self.trace_seq.wrapping_add(1);
        }
    }

    /// Run pending frames until none is left.
    pub fn drain(&mut self, pool: &mut BufferPool) {
        loop {
            let mut ran = false;
            for k in 0..self.order.len() {
                let id = self.order[k] as usize;
                while self.pending[id].len > 0 {
                    ran = true;
                    self.run_node(pool, id);
                }
            }
            if !ran {
                break;
            }
        }
    }

    fn run_node(&mut self, pool: &mut BufferPool, id: usize) {
        let t0 = rdtsc();
        let p = &mut self.pending[id];
        let n = p.len.min(VECTOR_SIZE);
        self.cur[..n].copy_from_slice(&p.buf[..n]);
        p.buf.copy_within(n..p.len, 0);
        p.len -= n;
        let stats = &*self.stats;
        let slot = &mut self.slots[id];
        let NodeImpl::Internal(node) = &mut slot.imp else {
            return;
        };
        let mut cx = NodeContext {
            pool,
            now_tsc: t0,
            tsc_hz: self.tsc_hz,
            worker: self.worker,
            error_base: slot.error_base,
            errors: &stats.errors,
            error_names: &stats.error_names,
        };
        let dispatch = node.process(&mut cx, &self.cur[..n], &mut self.nexts[..n]);
        let mut extra = 0;
        if slot.emits {
            if let Some(e) = node.emitter() {
                let items = e.items();
                extra = items.len().min(self.emitted.len());
                self.emitted[..extra].copy_from_slice(&items[..extra]);
                // Only a node that swapped in a larger emitter after the build gets here.
                let mut lost = 0;
                for it in &items[extra..] {
                    pool.free(it.buffer);
                    lost += 1;
                }
                e.clear();
                if lost > 0 {
                    self.stats.errors[0].add(lost);
                }
            }
        }
        self.finish_call(pool, id, n, dispatch, extra, t0);
    }

    /// Trace, enqueue to next nodes and count one call of node `id` over `cur[..n]` and the
    /// `extra` packets it emitted (`emitted[..extra]`).
    #[inline]
    fn finish_call(
        &mut self,
        pool: &mut BufferPool,
        id: usize,
        n: usize,
        d: Dispatch,
        extra: usize,
        t0: u64,
    ) {
        if extra > 0 {
            if self.trace.active.load(Ordering::Relaxed) {
                self.record_trace(pool, id, n, d);
            }
            self.merge_emitted(pool, id, n, d, extra);
            self.stats.nodes[id].emitted.add(extra as u64);
        } else if n > 0 {
            if self.trace.active.load(Ordering::Relaxed) {
                self.record_trace(pool, id, n, d);
            }
            match d {
                Dispatch::Consumed => {}
                Dispatch::AllTo(next) => {
                    let dst = self.slots[id].next_ids.get(next as usize).copied();
                    match dst {
                        Some(dst) => self.enqueue_all(pool, dst as usize, n),
                        None => self.lose_all(pool, n),
                    }
                }
                Dispatch::PerPacket => self.scatter(pool, id, n),
            }
        }
        let s = &self.stats.nodes[id];
        s.calls.add(1);
        let dt = rdtsc().wrapping_sub(t0);
        if n > 0 {
            s.vectors.add(1);
            s.packets.add(n as u64);
            s.busy_clocks.add(dt);
        }
        s.clocks.add(dt);
    }

    #[inline]
    fn enqueue_all(&mut self, pool: &mut BufferPool, dst: usize, n: usize) {
        let p = &mut self.pending[dst];
        let room = (PENDING_CAPACITY - p.len).min(n);
        p.buf[p.len..p.len + room].copy_from_slice(&self.cur[..room]);
        p.len += room;
        if room < n {
            pool.free_batch(&self.cur[room..n]);
            self.stats.errors[0].add((n - room) as u64);
        }
    }

    /// Enqueue the frame and the emitted packets, each emitted packet right after the frame
    /// packet it follows (so no port sees a copy overtake or trail behind out of order).
    #[inline(never)]
    fn merge_emitted(
        &mut self,
        pool: &mut BufferPool,
        id: usize,
        n: usize,
        d: Dispatch,
        extra: usize,
    ) {
        let mut lost = 0u64;
        let mut e = 0;
        for i in 0..n {
            let next = match d {
                Dispatch::Consumed => None,
                Dispatch::AllTo(k) => Some(k),
                Dispatch::PerPacket => Some(self.nexts[i]),
            };
            if let Some(next) = next.filter(|&k| k != crate::node::NEXT_CONSUMED) {
                self.enqueue_one(pool, id, next, self.cur[i], &mut lost);
            }
            while e < extra && self.emitted[e].after as usize <= i {
                let it = self.emitted[e];
                self.enqueue_one(pool, id, it.next, it.buffer, &mut lost);
                e += 1;
            }
        }
        for k in e..extra {
            let it = self.emitted[k];
            self.enqueue_one(pool, id, it.next, it.buffer, &mut lost);
        }
        if lost > 0 {
            self.stats.errors[0].add(lost);
        }
    }

    /// Enqueue one packet of node `id` to its next index `next` (freed and counted in `lost`
    /// when that next does not exist or its pending frame is full).
    #[inline(always)]
    fn enqueue_one(&mut self, pool: &mut BufferPool, id: usize, next: u16, b: u32, lost: &mut u64) {
        match self.slots[id].next_ids.get(next as usize) {
            Some(&dst) => {
                let p = &mut self.pending[dst as usize];
                if p.len < PENDING_CAPACITY {
                    p.buf[p.len] = b;
                    p.len += 1;
                } else {
                    pool.free(b);
                    *lost += 1;
                }
            }
            None => {
                pool.free(b);
                *lost += 1;
            }
        }
    }

    #[inline]
    fn scatter(&mut self, pool: &mut BufferPool, id: usize, n: usize) {
        let next_ids = &self.slots[id].next_ids;
        let mut lost = 0u64;
        for i in 0..n {
            let b = self.cur[i];
            if self.nexts[i] == crate::node::NEXT_CONSUMED {
                continue;
            }
            match next_ids.get(self.nexts[i] as usize) {
                Some(&dst) => {
                    let p = &mut self.pending[dst as usize];
                    if p.len < PENDING_CAPACITY {
                        p.buf[p.len] = b;
                        p.len += 1;
                    } else {
                        pool.free(b);
                        lost += 1;
                    }
                }
                None => {
                    pool.free(b);
                    lost += 1;
                }
            }
        }
        if lost > 0 {
            self.stats.errors[0].add(lost);
        }
    }

    /// Free the whole current frame, counting it as lost (a next index the node never declared).
    fn lose_all(&mut self, pool: &mut BufferPool, n: usize) {
        pool.free_batch(&self.cur[..n]);
        self.stats.errors[0].add(n as u64);
    }

    #[cold]
    fn record_trace(&mut self, pool: &BufferPool, id: usize, n: usize, d: Dispatch) {
        self.traced.clear();
        for (i, &b) in self.cur[..n].iter().enumerate() {
            if pool.meta(b).flags & FLAG_TRACE != 0 {
                self.traced.push(i as u32);
            }
        }
        if self.traced.is_empty() {
            return;
        }
        let slot = &self.slots[id];
        let Ok(mut records) = self.trace.records.lock() else {
            return;
        };
        for &i in &self.traced {
            if records.len() >= MAX_TRACE_RECORDS {
                break;
            }
            let b = self.cur[i as usize];
            let next = match d {
                Dispatch::Consumed => String::new(),
                Dispatch::AllTo(k) => slot.next_names.get(k as usize).cloned().unwrap_or_default(),
                Dispatch::PerPacket => slot
                    .next_names
                    .get(self.nexts[i as usize] as usize)
                    .cloned()
                    .unwrap_or_default(),
            };
            records.push(TraceRecord {
                packet: pool.meta(b).trace_id,
                node: self.stats.node_names[id].clone(),
                text: slot.imp.trace(pool, b),
                next,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::PoolConfig;

    /// Emits `remaining` packets, `burst` at a time, all to next 0.
    struct Source {
        remaining: usize,
        burst: usize,
    }
    impl InputNode for Source {
        fn name(&self) -> &str {
            "source"
        }
        fn next_nodes(&self) -> Vec<String> {
            vec!["classify".into()]
        }
        fn poll(
            &mut self,
            cx: &mut NodeContext<'_>,
            out: &mut [u32],
            _: &mut [u16],
        ) -> (usize, Dispatch) {
            let want = self.remaining.min(self.burst).min(out.len());
            let n = cx.pool.alloc_batch(&mut out[..want]);
            for (i, &b) in out[..n].iter().enumerate() {
                cx.pool.write_packet(b, &[(self.remaining - i) as u8; 60]);
            }
            self.remaining -= n;
            (n, Dispatch::AllTo(0))
        }
        fn is_finished(&self) -> bool {
            self.remaining == 0
        }
    }

    /// Odd first byte to sink, even to drop with reason 0.
    struct Classify;
    impl Node for Classify {
        fn name(&self) -> &str {
            "classify"
        }
        fn next_nodes(&self) -> Vec<String> {
            vec!["sink".into(), "drop".into()]
        }
        fn error_reasons(&self) -> Vec<String> {
            vec!["even".into()]
        }
        fn process(
            &mut self,
            cx: &mut NodeContext<'_>,
            frame: &[u32],
            nexts: &mut [u16],
        ) -> Dispatch {
            for (i, &b) in frame.iter().enumerate() {
                if cx.pool.data(b)[0].is_multiple_of(2) {
                    cx.pool.meta_mut(b).error = cx.error_id(0);
                    nexts[i] = 1;
                } else {
                    nexts[i] = 0;
                }
            }
            Dispatch::PerPacket
        }
    }

    struct Sink(String);
    impl Node for Sink {
        fn name(&self) -> &str {
            &self.0
        }
        fn next_nodes(&self) -> Vec<String> {
            vec![]
        }
        fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
            for &b in frame {
                let e = cx.pool.meta(b).error as usize;
                if self.0 == "drop" {
                    cx.errors[e].add(1);
                }
            }
            cx.pool.free_batch(frame);
            Dispatch::Consumed
        }
    }

    fn graph(total: usize, burst: usize) -> (Graph, BufferPool) {
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(Source {
            remaining: total,
            burst,
        }))
        .add_node(Box::new(Sink("drop".into())))
        .add_node(Box::new(Sink("sink".into())))
        .add_node(Box::new(Classify));
        let pool = BufferPool::new(PoolConfig {
            buffers: 1024,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        (b.build(0, 1).expect("graph"), pool)
    }

    #[test]
    fn runs_to_completion_and_counts() {
        let (mut g, mut pool) = graph(1000, 256);
        while !g.is_finished() {
            g.run_once(&mut pool);
        }
        assert_eq!(pool.available(), pool.capacity(), "every buffer came back");
        let s = g.stats();
        let id = |n: &str| s.node_names.iter().position(|x| x == n).expect("node");
        assert_eq!(s.nodes[id("source")].packets.get(), 1000);
        assert_eq!(s.nodes[id("classify")].packets.get(), 1000);
        assert_eq!(s.nodes[id("classify")].vectors.get(), 4);
        assert_eq!(s.nodes[id("sink")].packets.get(), 500);
        let e = s.error_id("classify", "even").expect("reason");
        assert_eq!(s.errors[e].get(), 500);
        // The source's packets cost the worker its poll and every node after it.
        let carried = s.nodes[id("source")].carried_clocks.get();
        let nodes: u64 = ["source", "classify", "sink", "drop"]
            .iter()
            .map(|n| s.nodes[id(n)].busy_clocks.get())
            .sum();
        assert!(carried >= nodes, "carried {carried} < the nodes' {nodes}");
        assert_eq!(
            s.nodes[id("classify")].carried_clocks.get(),
            0,
            "inputs only"
        );
    }

    #[test]
    fn unknown_next_is_an_error() {
        let mut b = GraphBuilder::new();
        b.add_node(Box::new(Classify));
        let err = b.build(0, 1).err().expect("error");
        assert!(matches!(err, GraphError::UnknownNext { ref next, .. } if next == "sink"));
    }

    #[test]
    fn duplicate_names_are_an_error() {
        let mut b = GraphBuilder::new();
        b.add_node(Box::new(Sink("x".into())));
        b.add_node(Box::new(Sink("x".into())));
        assert_eq!(
            b.build(0, 1).err(),
            Some(GraphError::DuplicateNode("x".into()))
        );
    }

    #[test]
    fn trace_records_each_node_for_n_packets() {
        let (mut g, mut pool) = graph(10, 10);
        let src = g.node_id("source").expect("id");
        g.trace_control().arm(src, 3);
        g.run_once(&mut pool);
        let recs = g.trace_control().snapshot();
        // 3 packets x (source, classify, sink|drop)
        assert_eq!(recs.len(), 9);
        assert!(recs
            .iter()
            .any(|r| r.node == "classify" && (r.next == "sink" || r.next == "drop")));
        assert_eq!(recs.iter().filter(|r| r.node == "source").count(), 3);
    }

    /// Sends every packet to `sink` and emits `copies` copies of each packet whose first byte
    /// is a multiple of 4: copy `k` to `sink` when `k` is even, to `copies` when odd.
    struct Dup {
        emitter: crate::node::Emitter,
        copies: usize,
        refused: usize,
    }
    impl Node for Dup {
        fn name(&self) -> &str {
            "dup"
        }
        fn next_nodes(&self) -> Vec<String> {
            vec!["sink".into(), "copies".into()]
        }
        fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
            for (i, &b) in frame.iter().enumerate() {
                let first = cx.pool.data(b)[0];
                if !first.is_multiple_of(4) {
                    continue;
                }
                for k in 0..self.copies {
                    let c = cx.pool.alloc().expect("buffer");
                    cx.pool.write_packet(c, &[first, k as u8 + 1]);
                    if let Err(c) = self.emitter.emit(i, (k % 2) as u16, c) {
                        cx.pool.free(c);
                        self.refused += 1;
                    }
                }
            }
            Dispatch::AllTo(0)
        }
        fn emitter(&mut self) -> Option<&mut crate::node::Emitter> {
            Some(&mut self.emitter)
        }
    }

    type Log = Arc<std::sync::Mutex<Vec<(u8, u8)>>>;

    /// Records (first byte, second byte) of every packet, then frees it.
    struct Recorder(String, Log);
    impl Node for Recorder {
        fn name(&self) -> &str {
            &self.0
        }
        fn next_nodes(&self) -> Vec<String> {
            vec![]
        }
        fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
            let mut log = self.1.lock().expect("lock");
            for &b in frame {
                let d = cx.pool.data(b);
                log.push((d[0], d[1]));
            }
            cx.pool.free_batch(frame);
            Dispatch::Consumed
        }
    }

    fn dup_graph(total: usize, copies: usize, capacity: usize) -> (Graph, BufferPool, Log, Log) {
        let (sink, side): (Log, Log) = (Arc::default(), Arc::default());
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(Source {
            remaining: total,
            burst: 256,
        }))
        .add_node(Box::new(Recorder("sink".into(), sink.clone())))
        .add_node(Box::new(Recorder("copies".into(), side.clone())))
        .add_node(Box::new(PassTo("classify", "dup")))
        .add_node(Box::new(Dup {
            emitter: crate::node::Emitter::new(capacity),
            copies,
            refused: 0,
        }));
        let pool = BufferPool::new(PoolConfig {
            buffers: 8192,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        (b.build(0, 1).expect("graph"), pool, sink, side)
    }

    /// Forwards everything to one next node.
    struct PassTo(&'static str, &'static str);
    impl Node for PassTo {
        fn name(&self) -> &str {
            self.0
        }
        fn next_nodes(&self) -> Vec<String> {
            vec![self.1.into()]
        }
        fn process(&mut self, _: &mut NodeContext<'_>, _: &[u32], _: &mut [u16]) -> Dispatch {
            Dispatch::AllTo(0)
        }
    }

    #[test]
    fn emitted_packets_follow_their_original_in_order() {
        // 40 packets with first bytes 40, 39, ..., 1: multiples of 4 get two copies each.
        let (mut g, mut pool, sink, side) = dup_graph(40, 2, 64);
        while !g.is_finished() {
            g.run_once(&mut pool);
        }
        assert_eq!(pool.available(), pool.capacity(), "every buffer came back");
        let mut want_sink = Vec::new();
        let mut want_side = Vec::new();
        for first in (1..=40u8).rev() {
            want_sink.push((first, first));
            if first % 4 == 0 {
                want_sink.push((first, 1));
                want_side.push((first, 2));
            }
        }
        assert_eq!(*sink.lock().expect("lock"), want_sink);
        assert_eq!(*side.lock().expect("lock"), want_side);
        let s = g.stats();
        let dup = g.node_id("dup").expect("dup");
        assert_eq!(s.nodes[dup].packets.get(), 40);
        assert_eq!(s.nodes[dup].emitted.get(), 20);
        assert_eq!(s.total_drops(), 0);
    }

    #[test]
    fn emitter_and_pending_overflow_free_and_count() {
        // 256 packets; the 64 whose first byte is a multiple of 4 want 80 copies each.
        let (mut g, mut pool, _sink, side) = dup_graph(256, 80, 4096);
        while !g.is_finished() {
            g.run_once(&mut pool);
        }
        assert_eq!(pool.available(), pool.capacity(), "every buffer came back");
        let s = g.stats();
        let dup = g.node_id("dup").expect("dup");
        // 64 packets x 80 copies = 5120 wanted; the emitter holds 4096, so 1024 were refused.
        assert_eq!(s.nodes[dup].emitted.get(), 4096);
        // 2048 each way; each pending frame holds PENDING_CAPACITY (2048) packets: `copies`
        // gets exactly 2048, `sink` gets 256 originals + 2048 copies, 256 over.
        assert_eq!(side.lock().expect("lock").len(), 2048);
        assert_eq!(s.errors[0].get(), 256, "frame-overflow counted");
    }
}

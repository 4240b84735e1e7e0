//! Edits of a built graph while its worker runs, applied by that worker between two rounds
//! (`Graph::apply`), as VPP adds nodes and next arcs to a running graph: nodes and inputs are
//! appended, an existing node appends next arcs when told of an event (`Node::on_event`), an
//! input is drained and then parked, and a retired node's slot is handed to a sentinel that
//! frees and counts whatever still reaches it. It owns the edit's checks and bookkeeping. It
//! never renumbers a node or a next index (ids, counters' baselines and traces keep lining up),
//! never applies half an edit (everything is checked before anything changes) and never runs
//! while a frame is pending.

use crate::counters::{Counter, GraphStats, NodeStats};
use crate::dispatch::{topological_order, Graph, GraphError, NodeImpl, Pending, Slot, GRAPH_NODE};
use crate::node::{Dispatch, Emitted, InputNode, Node, NodeContext};
use crate::trace::TraceControl;
use packet::BufferPool;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The reason counted (under the graph's own node) for a packet that reached a retired node.
pub const SENT_TO_REMOVED_NODE: &str = "sent-to-removed-node";

/// How long a draining input that keeps receiving is polled before it is parked anyway, in
/// thousandths of a second (a source that cannot be stopped, such as a busy AF_PACKET socket).
pub const DRAIN_MILLIS: u64 = 10;

/// One change to a built graph: made on any thread, applied by the graph's worker.
#[derive(Default)]
pub struct GraphEdit {
    nodes: Vec<NodeImpl>,
    hold_new_inputs: bool,
    activate: Vec<String>,
    drain: Vec<(String, Arc<AtomicBool>)>,
    retire: Vec<String>,
    event: Option<Arc<dyn Any + Send + Sync>>,
}

impl GraphEdit {
    /// An edit that changes nothing.
    pub fn new() -> GraphEdit {
        GraphEdit::default()
    }

    /// Append an input node (polled from the next round on, unless `hold_new_inputs`).
    pub fn add_input(&mut self, node: Box<dyn InputNode>) -> &mut Self {
        self.nodes.push(NodeImpl::Input(node));
        self
    }

    /// Append an internal node.
    pub fn add_node(&mut self, node: Box<dyn Node>) -> &mut Self {
        self.nodes.push(NodeImpl::Internal(node));
        self
    }

    /// The inputs this edit adds are not polled until a later edit `activate`s them (so a
    /// port's packets enter only once every worker knows the port).
    pub fn hold_new_inputs(&mut self) -> &mut Self {
        self.hold_new_inputs = true;
        self
    }

    /// Start polling the held input `name`.
    pub fn activate(&mut self, name: &str) -> &mut Self {
        self.activate.push(name.to_string());
        self
    }

    /// Poll the input `name` after the others until a poll comes up empty (or for
    /// `DRAIN_MILLIS` at most), then park it and set `done`; a held input (never polled) is
    /// parked at once.
    pub fn drain(&mut self, name: &str, done: Arc<AtomicBool>) -> &mut Self {
        self.drain.push((name.to_string(), done));
        self
    }

    /// Remove the node `name`: its slot keeps its id under the name `<name>#gone<k>` and frees
    /// and counts what still reaches it; the name may be used again.
    pub fn retire(&mut self, name: &str) -> &mut Self {
        self.retire.push(name.to_string());
        self
    }

    /// Tell every internal node of `event` (`Node::on_event`) once the nodes are appended.
    pub fn with_event(&mut self, event: Arc<dyn Any + Send + Sync>) -> &mut Self {
        self.event = Some(event);
        self
    }

    /// The names of the nodes the edit adds.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(NodeImpl::name).collect()
    }

    /// The names of the nodes the edit adds, each with whether it is an input.
    pub fn node_kinds(&self) -> Vec<(String, bool)> {
        self.nodes
            .iter()
            .map(|n| (n.name(), matches!(n, NodeImpl::Input(_))))
            .collect()
    }

    /// An edit adding the nodes of `b` (code that builds a graph, such as a port's driver,
    /// builds an edit the same way).
    pub fn from_builder(b: crate::dispatch::GraphBuilder) -> GraphEdit {
        GraphEdit {
            nodes: b.into_nodes(),
            ..GraphEdit::default()
        }
    }
}

/// A node an edit took out of the graph, handed back to the caller (dropping it closes what it
/// holds; a port may first return buffers it lent to the kernel).
pub enum RemovedNode {
    /// A retired input node.
    Input(Box<dyn InputNode>),
    /// A retired internal node.
    Node(Box<dyn Node>),
}

impl std::fmt::Debug for RemovedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemovedNode({})", self.name())
    }
}

impl RemovedNode {
    /// Its name when it was in the graph.
    pub fn name(&self) -> &str {
        match self {
            RemovedNode::Input(n) => n.name(),
            RemovedNode::Node(n) => n.name(),
        }
    }
}

/// The next arcs of one node, as `Node::on_event` may extend them.
pub struct NextArcs<'a> {
    by_name: &'a HashMap<String, u32>,
    next_ids: &'a mut Vec<u32>,
    next_names: &'a mut Vec<String>,
}

impl NextArcs<'_> {
    /// The next index of the node `name`, appending an arc to it when the node has none yet;
    /// None when no internal node has that name (an input node takes no packets) or the node
    /// has `u16::MAX - 1` nexts already.
    pub fn add(&mut self, name: &str) -> Option<u16> {
        if let Some(k) = self.next_names.iter().position(|n| n == name) {
            return u16::try_from(k).ok();
        }
        let id = *self.by_name.get(name)?;
        let k = u16::try_from(self.next_ids.len())
            .ok()
            .filter(|&k| k < u16::MAX - 1)?;
        self.next_ids.push(id);
        self.next_names.push(name.to_string());
        Some(k)
    }

    /// How many next arcs the node has.
    pub fn len(&self) -> usize {
        self.next_ids.len()
    }

    /// True when the node has no next arc.
    pub fn is_empty(&self) -> bool {
        self.next_ids.is_empty()
    }
}

/// An input being drained.
pub(crate) struct Draining {
    pub(crate) id: u32,
    done: Arc<AtomicBool>,
    deadline_tsc: u64,
}

/// What takes a retired node's slot: frees every packet that still reaches it and counts it
/// under the graph's `sent-to-removed-node`.
struct Removed {
    name: String,
    error: u16,
}

impl Node for Removed {
    fn name(&self) -> &str {
        &self.name
    }
    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        if let Some(c) = cx.errors.get(usize::from(self.error)) {
            c.add(frame.len() as u64);
        }
        cx.pool.free_batch(frame);
        Dispatch::Consumed
    }
}

fn edit_error(what: String) -> GraphError {
    GraphError::Edit(what)
}

impl Graph {
    /// Apply `edit` between two rounds (frames still pending are carried to the end first).
    /// On an error nothing changed. Returns the retired nodes. Counters and the trace control
    /// are replaced by larger copies holding the same values: read them again through `stats`
    /// and `trace_control` (node ids are unchanged).
    pub fn apply(
        &mut self,
        edit: GraphEdit,
        pool: &mut BufferPool,
    ) -> Result<Vec<RemovedNode>, GraphError> {
        self.drain(pool);
        let plan = self.check(&edit)?;
        let new_sentinel_error = self.removed_error.is_none() && !plan.retire.is_empty();
        let GraphEdit {
            nodes,
            hold_new_inputs,
            activate,
            drain,
            retire: _,
            event,
        } = edit;
        let removed = self.retire_checked(&plan.retire);
        let first_new = self.slots.len() as u32;
        let error_base = self.stats.error_names.len() + usize::from(new_sentinel_error);
        self.append(nodes, error_base, hold_new_inputs);
        if let Some(ev) = event {
            self.tell(&*ev);
        }
        for name in &activate {
            if let Some(id) = self.id_of_live(name) {
                self.held.retain(|&h| h != id);
                self.inputs.push(id);
            }
        }
        let deadline_tsc = crate::rdtsc().wrapping_add(self.tsc_hz / 1000 * DRAIN_MILLIS);
        for (name, done) in drain {
            if let Some(id) = self.id_of_live(&name) {
                if self.held.contains(&id) {
                    // Never polled: nothing to drain.
                    self.held.retain(|&i| i != id);
                    self.parked.push(id);
                    done.store(true, Ordering::Release);
                    continue;
                }
                self.inputs.retain(|&i| i != id);
                self.draining.push(Draining {
                    id,
                    done,
                    deadline_tsc,
                });
            }
        }
        self.order = topological_order(&self.slots);
        self.republish_counters(first_new, new_sentinel_error, plan.new_errors);
        Ok(removed)
    }

    /// The id of a node that is not retired.
    fn id_of_live(&self, name: &str) -> Option<u32> {
        self.live_names().get(name).copied()
    }

    /// Whether `apply(edit)` would be refused (nothing changes): a caller that must not drop
    /// the edit's nodes here (closing a socket may wait for the kernel) checks first.
    pub fn check_edit(&self, edit: &GraphEdit) -> Result<(), GraphError> {
        self.check(edit).map(|_| ())
    }

    /// Everything `apply` would refuse, before anything changes.
    fn check(&self, edit: &GraphEdit) -> Result<Plan, GraphError> {
        let live_names = self.live_names();
        let live: HashMap<&str, u32> = live_names.iter().map(|(n, &i)| (n.as_str(), i)).collect();
        let mut retire = Vec::new();
        for name in &edit.retire {
            let id = *live
                .get(name.as_str())
                .ok_or_else(|| edit_error(format!("cannot retire `{name}`: no such node")))?;
            if retire.contains(&id) {
                return Err(edit_error(format!("`{name}` is retired twice")));
            }
            retire.push(id);
        }
        let retiring: HashSet<&str> = edit.retire.iter().map(String::as_str).collect();
        let new_names = edit.node_names();
        let mut taken: HashSet<&str> = live
            .keys()
            .copied()
            .filter(|n| !retiring.contains(n))
            .collect();
        for n in &new_names {
            if !taken.insert(n.as_str()) {
                return Err(GraphError::DuplicateNode(n.clone()));
            }
        }
        // What a new node may send to: internal nodes, old and new.
        let mut targets: HashSet<&str> = live
            .iter()
            .filter(|(n, &id)| {
                !retiring.contains(*n)
                    && matches!(self.slots[id as usize].imp, NodeImpl::Internal(_))
            })
            .map(|(n, _)| *n)
            .collect();
        targets.extend(
            edit.nodes
                .iter()
                .zip(&new_names)
                .filter(|(imp, _)| matches!(imp, NodeImpl::Internal(_)))
                .map(|(_, n)| n.as_str()),
        );
        let mut new_errors = 0usize;
        for imp in &edit.nodes {
            let name = imp.name();
            let nexts = imp.next_nodes();
            if nexts.len() >= usize::from(u16::MAX) {
                return Err(GraphError::TooLarge(format!(
                    "node `{name}` has too many next nodes"
                )));
            }
            if let Some(next) = nexts.iter().find(|n| !targets.contains(n.as_str())) {
                let mut known: Vec<&str> = targets.iter().copied().collect();
                known.sort_unstable();
                return Err(GraphError::UnknownNext {
                    node: name,
                    next: next.clone(),
                    known: known.join(", "),
                });
            }
            new_errors += imp.error_reasons().len();
        }
        if self.removed_error.is_none() && !retire.is_empty() {
            new_errors += 1;
        }
        if self.stats.error_names.len() + new_errors >= usize::from(u16::MAX) {
            return Err(GraphError::TooLarge("too many drop reasons".into()));
        }
        let new_inputs: HashSet<&str> = edit
            .nodes
            .iter()
            .zip(&new_names)
            .filter(|(imp, _)| matches!(imp, NodeImpl::Input(_)))
            .map(|(_, n)| n.as_str())
            .collect();
        for name in &edit.activate {
            let held = live
                .get(name.as_str())
                .is_some_and(|id| self.held.contains(id))
                || (edit.hold_new_inputs && new_inputs.contains(name.as_str()));
            if !held || retiring.contains(name.as_str()) {
                return Err(edit_error(format!(
                    "cannot activate `{name}`: not an input held for a later start"
                )));
            }
        }
        for (name, _) in &edit.drain {
            let drainable = live
                .get(name.as_str())
                .is_some_and(|id| self.inputs.contains(id) || self.held.contains(id));
            if !drainable || retiring.contains(name.as_str()) {
                return Err(edit_error(format!(
                    "cannot drain `{name}`: not an input polled every round or held"
                )));
            }
        }
        Ok(Plan { retire, new_errors })
    }

    /// Swap the checked nodes for sentinels; returns them.
    fn retire_checked(&mut self, ids: &[u32]) -> Vec<RemovedNode> {
        if ids.is_empty() {
            return Vec::new();
        }
        // A new id is appended by `republish_counters` (counted in `Plan::new_errors`).
        let error = *self
            .removed_error
            .get_or_insert(self.stats.error_names.len() as u16);
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            self.inputs.retain(|&i| i != id);
            self.held.retain(|&i| i != id);
            self.parked.retain(|&i| i != id);
            self.draining.retain(|d| d.id != id);
            let slot = &mut self.slots[id as usize];
            let gone = format!("{}#gone{}", slot.imp.name(), self.retired);
            self.retired += 1;
            let sentinel = NodeImpl::Internal(Box::new(Removed { name: gone, error }));
            let old = std::mem::replace(&mut slot.imp, sentinel);
            slot.next_ids.clear();
            slot.next_names.clear();
            slot.emits = false;
            slot.retired = true;
            out.push(match old {
                NodeImpl::Input(n) => RemovedNode::Input(n),
                NodeImpl::Internal(n) => RemovedNode::Node(n),
            });
            // Arcs to the slot now name the sentinel: a node asking for an arc to the name
            // again (`NextArcs::add`) gets one to whatever node takes the name next.
            let gone = self.slots[id as usize].imp.name();
            for s in &mut self.slots {
                for (k, &to) in s.next_ids.iter().enumerate() {
                    if to == id {
                        s.next_names[k].clone_from(&gone);
                    }
                }
            }
        }
        out
    }

    /// Append the (checked) new nodes after the existing ones.
    /// Append the (checked) new nodes after the existing ones, their drop reasons numbered
    /// from `error_base`.
    fn append(&mut self, nodes: Vec<NodeImpl>, mut error_base: usize, hold: bool) {
        let mut by_name = self.live_names();
        let base = self.slots.len() as u32;
        for (k, imp) in nodes.iter().enumerate() {
            by_name.insert(imp.name(), base + k as u32);
        }
        for mut imp in nodes {
            let next_names = imp.next_nodes();
            let next_ids = next_names
                .iter()
                .map(|n| by_name.get(n).copied().unwrap_or(u32::MAX))
                .collect();
            let emits = match &mut imp {
                NodeImpl::Internal(n) => n.emitter().map(|e| e.capacity()),
                NodeImpl::Input(_) => None,
            };
            if let Some(cap) = emits.filter(|&c| c > self.emitted.len()) {
                self.emitted = vec![Emitted::default(); cap].into_boxed_slice();
            }
            let id = self.slots.len() as u32;
            if matches!(imp, NodeImpl::Input(_)) {
                if hold {
                    self.held.push(id);
                } else {
                    self.inputs.push(id);
                }
            }
            let reasons = imp.error_reasons().len();
            self.slots.push(Slot {
                imp,
                next_ids,
                next_names,
                error_base: error_base as u16,
                emits: emits.is_some(),
                retired: false,
            });
            self.pending.push(Pending::new());
            error_base += reasons;
        }
    }

    /// Names of the nodes that are not retired, with their ids.
    fn live_names(&self) -> HashMap<String, u32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.retired)
            .map(|(i, s)| (s.imp.name(), i as u32))
            .collect()
    }

    /// Give every internal node the event.
    fn tell(&mut self, ev: &(dyn Any + Send + Sync)) {
        let mut by_name = self.live_names();
        by_name.retain(|_, id| matches!(self.slots[*id as usize].imp, NodeImpl::Internal(_)));
        for slot in &mut self.slots {
            let Slot {
                imp,
                next_ids,
                next_names,
                ..
            } = slot;
            if let NodeImpl::Internal(n) = imp {
                let mut arcs = NextArcs {
                    by_name: &by_name,
                    next_ids,
                    next_names,
                };
                n.on_event(ev, &mut arcs);
            }
        }
    }

    /// Replace the counters and the trace control with copies sized to the slots: the same
    /// values, the new nodes' and errors' at zero (the worker is their only writer).
    fn republish_counters(&mut self, first_new: u32, sentinel_error: bool, new_errors: usize) {
        let old = &*self.stats;
        let copy = |c: &Counter| {
            let n = Counter::default();
            n.add(c.get());
            n
        };
        let mut error_names = old.error_names.clone();
        if sentinel_error {
            error_names.push((GRAPH_NODE.to_string(), SENT_TO_REMOVED_NODE.to_string()));
        }
        for s in &self.slots[first_new as usize..] {
            for r in s.imp.error_reasons() {
                error_names.push((s.imp.name(), r));
            }
        }
        debug_assert_eq!(error_names.len(), old.error_names.len() + new_errors);
        let errors = (0..error_names.len())
            .map(|i| old.errors.get(i).map_or_else(Counter::default, copy))
            .collect();
        let nodes = (0..self.slots.len())
            .map(|i| match old.nodes.get(i) {
                Some(s) => NodeStats {
                    calls: copy(&s.calls),
                    vectors: copy(&s.vectors),
                    packets: copy(&s.packets),
                    emitted: copy(&s.emitted),
                    clocks: copy(&s.clocks),
                    busy_clocks: copy(&s.busy_clocks),
                    carried_clocks: copy(&s.carried_clocks),
                },
                None => NodeStats::default(),
            })
            .collect();
        self.stats = Arc::new(GraphStats {
            node_names: self.slots.iter().map(|s| s.imp.name()).collect(),
            node_is_input: self
                .slots
                .iter()
                .map(|s| matches!(s.imp, NodeImpl::Input(_)))
                .collect(),
            nodes,
            error_names,
            errors,
        });
        let trace = TraceControl::new(self.slots.len());
        for (new, old) in trace.budget.iter().zip(&self.trace.budget) {
            new.store(old.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let active = self.trace.active.load(Ordering::Acquire);
        trace.active.store(active, Ordering::Release);
        if let (Ok(mut new), Ok(mut old)) = (trace.records.lock(), self.trace.records.lock()) {
            *new = std::mem::take(&mut *old);
        }
        self.trace = Arc::new(trace);
    }

    /// Poll the draining inputs once each; park those that came up empty or ran out of time.
    pub(crate) fn poll_draining(&mut self, pool: &mut BufferPool) -> usize {
        let mut received = 0;
        let mut k = 0;
        while k < self.draining.len() {
            let id = self.draining[k].id as usize;
            let t0 = crate::rdtsc();
            let n = self.poll_input(pool, id, t0);
            self.drain(pool);
            received += n;
            let late = crate::rdtsc().wrapping_sub(self.draining[k].deadline_tsc) < u64::MAX / 2;
            if n == 0 || late {
                let d = self.draining.swap_remove(k);
                d.done.store(true, Ordering::Release);
                self.parked.push(d.id);
            } else {
                k += 1;
            }
        }
        received
    }

    /// Inputs polled every round, held, draining and parked (by name), for tests and `show`.
    pub fn input_states(&self) -> Vec<(String, InputState)> {
        let name = |id: u32| self.stats.node_names[id as usize].clone();
        let mut v: Vec<(String, InputState)> = Vec::new();
        v.extend(self.inputs.iter().map(|&i| (name(i), InputState::Polled)));
        v.extend(self.held.iter().map(|&i| (name(i), InputState::Held)));
        v.extend(
            self.draining
                .iter()
                .map(|d| (name(d.id), InputState::Draining)),
        );
        v.extend(self.parked.iter().map(|&i| (name(i), InputState::Parked)));
        v
    }
}

/// Where an input stands (see `Graph::input_states`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputState {
    /// Polled every round.
    Polled,
    /// Added but not started yet.
    Held,
    /// Polled after the others until it comes up empty.
    Draining,
    /// Drained and no longer polled, waiting to be retired.
    Parked,
}

/// What `check` found: the ids to retire and how many error names the edit appends.
struct Plan {
    retire: Vec<u32>,
    new_errors: usize,
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;

//! `flow-switch`: the virtual switch's fast path for the ports of bridges in flow mode. Per
//! vector it extracts each packet's flow key, looks the keys up in the worker's exact-match and
//! megaflow caches, translates the misses through the bridge's OpenFlow tables in this worker
//! (grouped: a miss that a megaflow made earlier in the same vector covers is not translated
//! again), installs the megaflows, and runs each packet's datapath actions (header edits,
//! outputs with copies, flood, `normal` to `l2-bridge`, punts to the control plane: the
//! `controller` action). `flow-packet-out` runs the actions of a packet the control plane
//! injected (an OpenFlow packet-out). `flow-maintenance`, an input that never
//! receives, ages and revalidates the caches and publishes their counters between vectors.
//! Owns one worker's caches; it never locks on the fast path and never changes the tables
//! (the control plane publishes new ones, see `dataplane::flows`).

mod actions;
mod packet_out;
mod shared;
#[cfg(test)]
mod tests;

pub use packet_out::{FlowPacketOut, PacketOutBridge, PACKET_OUT};
pub use shared::FlowWorkerShared;

use crate::names;
use crate::neighbour::WorkerCell;
use flow::cache::{write_whole_key, KEY_IN_IP4_WORDS};
use flow::cache::{
    CacheConfig, CycleHistogram, FlowCache, Hit, MegaflowId, Translated, TranslatedRef, Translator,
};
use flow::extract::{extract_ip4_l4, extract_to, ip4_words, Ip4Words, Parsed, Tunnel, IP4_L4_MAP};
use flow::tables::FlowTables;
use flow::{DpActions, FlowKey};
use graph::{Dispatch, Emitter, InputNode, Node, NodeContext};
use live::Reader;
use packet::meta::FLAG_TUNNEL;
use packet::{BufferPool, VECTOR_SIZE};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The node's name.
pub const NAME: &str = "flow-switch";
/// The maintenance input's name.
pub const MAINTENANCE: &str = "flow-maintenance";

/// Milliseconds between two maintenance rounds of a worker's caches.
pub const MAINTENANCE_MS: u64 = 20;
/// Distinct (bridge, rule) pairs whose counters a vector sums before crediting them.
const RULE_TALLY: usize = 16;

/// Most flow-mode bridges (a vector's packets are grouped by bridge and cache switches in a
/// 64-bit set).
pub const MAX_SWITCHES: usize = 16;

/// `group_of` of a packet that is in no group.
const NO_GROUP: u8 = u8::MAX;

/// How many packets ahead extraction prefetches a packet's metadata and header.
const PREFETCH_AHEAD: usize = 8;

/// Misses of one vector remembered to cover later misses of the same vector.
const RECENT: usize = 4;

graph::node_indices! {
    /// `flow-switch`'s next nodes.
    enum FlowNext {
        /// To `INTERFACE_OUTPUT`.
        Output = names::INTERFACE_OUTPUT,
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `l2-bridge` (the `normal` action).
        Bridge = crate::bridge::NAME,
    }
}

graph::node_indices! {
    /// Drop reasons.
    pub enum FlowDrop {
        /// The packet came in on a port that is in no flow-mode bridge.
        NotFlowPort = "not-a-flow-port",
        /// The rules' actions drop it (no output), or no rule matched.
        DroppedByRules = "dropped-by-rules",
        /// The translation failed (resubmits too deep, more than `flow::dpaction::MAX_DP_ACTIONS`
        /// actions).
        TranslationFailed = "translation-failed",
        /// No buffer for a copy (several outputs or flood).
        NoBufferForCopy = "no-buffer-for-copy",
        /// Too many copies in one vector.
        CopyQueueFull = "copy-queue-full",
        /// A `controller` action's copy was lost: the worker's punt ring was full.
        PuntRingFull = "punt-ring-full",
        /// A `controller` action's copy was lost: the worker's punt rate limit was reached.
        PuntRateLimited = "punt-rate-limited",
    }
}

/// A port of a flow-mode bridge, as the node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPortInfo {
    /// Index of its bridge in the node's switches.
    pub switch: u16,
    /// Its OpenFlow port number.
    pub ofport: u16,
    /// Whether its packets use the exact-match cache.
    pub emc: bool,
    /// Whether its packets use the megaflow cache.
    pub megaflow: bool,
}

/// One flow-mode bridge, for one worker.
pub struct SwitchSetup {
    /// The bridge's tables, published by the control plane.
    pub tables: Reader<FlowTables>,
    /// This worker's cache sizes and timers.
    pub cache: CacheConfig,
    /// The bridge's ports (vecplane port ids), for `flood`.
    pub members: Vec<u16>,
    /// What this worker publishes for the control plane.
    pub shared: Arc<FlowWorkerShared>,
}

/// The tables as the caches see them.
struct Xl<'a>(&'a FlowTables);

impl Translator for Xl<'_> {
    #[inline]
    fn version(&self) -> u64 {
        self.0.version()
    }

    fn translate(&self, key: &FlowKey) -> Translated {
        let t = self.0.translate(key);
        Translated {
            actions: t.actions,
            mask: t.mask,
            rules: t.rules.as_slice().iter().copied().collect(),
        }
    }
}

struct SwitchState {
    tables: Reader<FlowTables>,
    cache: FlowCache,
    members: Vec<u16>,
    shared: Arc<FlowWorkerShared>,
    cycles_per_miss: CycleHistogram,
    dump_served: u64,
}

/// What the node and its maintenance input share (one worker's).
struct Inner {
    ports: Vec<Option<FlowPortInfo>>,
    switches: Vec<SwitchState>,
    next_maintenance_ms: u64,
}

impl Inner {
    /// Publish every bridge's counters now (at the end of a run).
    fn publish(&mut self) {
        for s in &mut self.switches {
            s.shared.cache.publish(&s.cache.stats(), &s.cycles_per_miss);
        }
    }

    fn maintain(&mut self, now_ms: u64) {
        if now_ms < self.next_maintenance_ms {
            return;
        }
        self.next_maintenance_ms = now_ms + MAINTENANCE_MS;
        for s in &mut self.switches {
            let tables = s.tables.get();
            s.cache.maintain(&Xl(tables), now_ms);
            s.shared.cache.publish(&s.cache.stats(), &s.cycles_per_miss);
            if let Some(want) = s.shared.dump_wanted(s.dump_served) {
                let cache = &s.cache;
                if s.shared.store_dump(want, |out| cache.dump(now_ms, out)) {
                    s.dump_served = want;
                }
            }
        }
    }
}

/// The last `RECENT` misses of a group (masked key, mask, where their actions went), so that a
/// later miss of the same vector that one of them covers is not translated again. A ring:
/// remembering overwrites the oldest in place, nothing is shifted.
struct RecentMisses {
    entries: [(FlowKey, FlowKey, Source); RECENT],
    len: usize,
    next: usize,
}

impl RecentMisses {
    fn new() -> Self {
        RecentMisses {
            entries: [(FlowKey::ZERO, FlowKey::ZERO, Source::Pending); RECENT],
            len: 0,
            next: 0,
        }
    }

    fn clear(&mut self) {
        (self.len, self.next) = (0, 0);
    }

    /// Where the actions of a remembered miss that covers `key` went.
    fn covering(&self, key: &FlowKey) -> Option<Source> {
        self.entries[..self.len]
            .iter()
            .find(|(mkey, mask, _)| key.matches(mkey, mask))
            .map(|e| e.2)
    }

    fn remember(&mut self, key: &FlowKey, mask: &FlowKey, source: Source) {
        let e = &mut self.entries[self.next];
        e.0 = key.masked(mask);
        e.1 = *mask;
        e.2 = source;
        self.next = (self.next + 1) % RECENT;
        self.len = (self.len + 1).min(RECENT);
    }
}

/// Where a packet's actions are: an installed megaflow or this vector's scratch.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Not looked up yet.
    Pending,
    Megaflow(MegaflowId),
    Scratch(u16),
    Drop(u16),
}

/// Which tier answered a packet (for the trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Emc,
    Megaflow,
    /// A miss translated for this packet; `installed` when it became a megaflow.
    Miss {
        installed: bool,
    },
    /// A miss covered by the megaflow an earlier miss of the same vector made.
    Covered,
    None,
}

/// What the trace says about a traced packet: its tier and the rules its actions came from.
#[derive(Clone, Copy, Debug)]
struct TraceNote {
    buffer: u32,
    tier: Tier,
    megaflow: Option<MegaflowId>,
    rules: flow::cache::RuleList,
    version: u64,
}

/// The `flow-switch` node (one per worker).
pub struct FlowSwitch {
    inner: Arc<WorkerCell<Inner>>,
    /// Each packet's key; not written for a packet of the usual shape until it misses the
    /// exact-match cache (`KEY_IN_IP4_WORDS` in its `words`: the key is in `ip4`).
    keys: Box<[FlowKey]>,
    /// The six words of each key of the usual shape (IPv4 with a transport header).
    ip4: Box<[Ip4Words]>,
    /// The key words extraction wrote, per packet (for the exact-match cache).
    words: Box<[u32]>,
    parsed: Box<[Parsed]>,
    sources: Box<[Source]>,
    /// Each packet's group (bridge * 4 + EMC bit * 2 + megaflow bit), `NO_GROUP` when dropped.
    group_of: Box<[u8]>,
    tiers: Box<[Tier]>,
    /// Notes on this vector's traced packets (cold: only packets marked for tracing).
    notes: Vec<TraceNote>,
    /// Packets and bytes per (bridge, megaflow) of this vector, credited once at its end.
    tally: Vec<(u16, MegaflowId, u64, u64)>,
    /// The same per (bridge, rule), summed over the vector's megaflows: under churn every
    /// packet may have its own megaflow, but they share a few rules, and a rule's counters
    /// are three atomic operations behind a map lookup.
    rule_tally: Vec<(u16, flow::rule::RuleId, u64, u64)>,
    group_keys: Box<[FlowKey]>,
    group_ip4: Box<[Ip4Words]>,
    group_words: Box<[u32]>,
    group_hits: Box<[Hit]>,
    group_index: Vec<u16>,
    scratch: Vec<DpActions>,
    recent: RecentMisses,
    /// Runs the actions: the copies' emitter, the punt ring.
    exec: actions::Executor,
    ms_per_tick: f64,
}

/// The maintenance input (`flow-maintenance`): never receives; runs the caches' bounded
/// background work every `MAINTENANCE_MS`.
pub struct FlowMaintenance {
    inner: Arc<WorkerCell<Inner>>,
    ms_per_tick: f64,
    tsc_per_ms: u64,
}

/// The node and its maintenance input for `ports` (by vecplane port id; None: not a flow
/// port) and `switches`, on a worker whose TSC runs at `tsc_hz`.
pub fn flow_switch_nodes(
    ports: Vec<Option<FlowPortInfo>>,
    switches: Vec<SwitchSetup>,
    tsc_hz: u64,
) -> Result<(FlowSwitch, FlowMaintenance), flow::cache::CacheConfigError> {
    let mut states = Vec::with_capacity(switches.len());
    for s in switches {
        states.push(SwitchState {
            tables: s.tables,
            cache: FlowCache::new(&s.cache)?,
            members: s.members,
            shared: s.shared,
            cycles_per_miss: CycleHistogram::default(),
            dump_served: 0,
        });
    }
    let exec = actions::Executor::new(Emitter::new(VECTOR_SIZE * 4), &ports);
    let inner = Arc::new(WorkerCell::new(Inner {
        ports,
        switches: states,
        next_maintenance_ms: 0,
    }));
    let tsc_per_ms = (tsc_hz / 1000).max(1);
    let ms_per_tick = 1.0 / tsc_per_ms as f64;
    Ok((
        FlowSwitch {
            inner: inner.clone(),
            keys: vec![FlowKey::ZERO; VECTOR_SIZE].into_boxed_slice(),
            ip4: vec![[0; 6]; VECTOR_SIZE].into_boxed_slice(),
            words: vec![0; VECTOR_SIZE].into_boxed_slice(),
            parsed: vec![Parsed::NONE; VECTOR_SIZE].into_boxed_slice(),
            sources: vec![Source::Pending; VECTOR_SIZE].into_boxed_slice(),
            group_of: vec![NO_GROUP; VECTOR_SIZE].into_boxed_slice(),
            tiers: vec![Tier::None; VECTOR_SIZE].into_boxed_slice(),
            notes: Vec::with_capacity(VECTOR_SIZE),
            tally: Vec::with_capacity(VECTOR_SIZE),
            rule_tally: Vec::with_capacity(RULE_TALLY),
            group_keys: vec![FlowKey::ZERO; VECTOR_SIZE].into_boxed_slice(),
            group_ip4: vec![[0; 6]; VECTOR_SIZE].into_boxed_slice(),
            group_words: vec![0; VECTOR_SIZE].into_boxed_slice(),
            group_hits: vec![Hit::Miss; VECTOR_SIZE].into_boxed_slice(),
            group_index: Vec::with_capacity(VECTOR_SIZE),
            scratch: Vec::with_capacity(VECTOR_SIZE),
            recent: RecentMisses::new(),
            exec,
            ms_per_tick,
        },
        FlowMaintenance {
            inner,
            ms_per_tick,
            tsc_per_ms,
        },
    ))
}

#[inline]
fn now_ms(now_tsc: u64, ms_per_tick: f64) -> u64 {
    (now_tsc as f64 * ms_per_tick) as u64
}

#[inline]
fn count(cx: &NodeContext<'_>, reason: FlowDrop) {
    if let Some(c) = cx.errors.get(cx.error_id(reason.id()) as usize) {
        c.add(1);
    }
}

#[inline]
fn fail(cx: &mut NodeContext<'_>, b: u32, reason: FlowDrop) -> u16 {
    let id = cx.error_id(reason.id());
    cx.pool.meta_mut(b).error = id;
    FlowNext::Drop.id()
}

impl Node for FlowSwitch {
    fn name(&self) -> &str {
        NAME
    }

    fn next_nodes(&self) -> Vec<String> {
        FlowNext::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        FlowDrop::names()
    }

    fn emitter(&mut self) -> Option<&mut Emitter> {
        Some(&mut self.exec.emitter)
    }

    /// The last counters, for `--stats-json` and `show flow-cache` after a run ends.
    fn finish(&mut self) {
        self.inner.with(Inner::publish);
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let now = now_ms(cx.now_tsc, self.ms_per_tick);
        let inner = self.inner.clone();
        let all_out = inner.with(|inner| {
            inner.maintain(now);
            // 1. Keys, extracted in place.
            let mut switches_seen = 0u64;
            let mut dropped = false;
            let mut traced = false;
            // The last port's entry and its group (see below).
            let mut last_port: (u16, Option<(FlowPortInfo, u32)>) = (u16::MAX, None);
            // Each packet's source and tier are set by its group's lookup (not here: on the usual
            // vector, whose packets all hit, they are never read).
            // `ethernet-input` has just read every packet's metadata and headers, but a
            // vector's worth (256 of each, 32 KiB) no longer fits in L1 (the first header load
            // stalled, perf annotate): start loading a later packet's. Indexed rather than
            // zipped: six zipped slices kept twelve pointers live and spilled them.
            let n = frame.len().min(VECTOR_SIZE);
            let (keys, ip4s, parseds) = (
                &mut self.keys[..n],
                &mut self.ip4[..n],
                &mut self.parsed[..n],
            );
            let (words, group_of, sources) = (
                &mut self.words[..n],
                &mut self.group_of[..n],
                &mut self.sources[..n],
            );
            for i in 0..n {
                if let Some(&later) = frame.get(i + PREFETCH_AHEAD) {
                    cx.pool.prefetch(later);
                }
                let (m, data) = cx.pool.packet(frame[i]);
                traced |= m.flags & packet::meta::FLAG_TRACE != 0;
                // A vector usually comes from one port: its entry is looked up once.
                if m.rx_port != last_port.0 {
                    let info = inner.ports.get(m.rx_port as usize).copied().flatten();
                    // Config allows at most MAX_SWITCHES bridges, so the group fits in 64 bits.
                    let group = |info: FlowPortInfo| {
                        let g = info.switch as u32 * 4 + (info.emc as u32) * 2;
                        (g + info.megaflow as u32).min(63)
                    };
                    last_port = (m.rx_port, info.map(|info| (info, group(info))));
                    // Every packet of a flow port is in its port's group.
                    if let Some((_, g)) = last_port.1 {
                        switches_seen |= 1u64 << g;
                    }
                }
                let Some((info, group)) = last_port.1 else {
                    sources[i] = Source::Drop(FlowDrop::NotFlowPort.id());
                    group_of[i] = NO_GROUP;
                    dropped = true;
                    continue;
                };
                // The usual packet: six words, the key itself written only if it misses; a
                // packet a VXLAN port decapsulated (its tunnel in the metadata) takes the
                // whole extraction.
                let fast = if m.flags & FLAG_TUNNEL == 0 {
                    extract_ip4_l4(data, info.ofport, &mut parseds[i])
                } else {
                    None
                };
                words[i] = match fast {
                    Some(w) => {
                        ip4s[i] = w;
                        IP4_L4_MAP | KEY_IN_IP4_WORDS
                    }
                    None => {
                        let tunnel = (m.flags & FLAG_TUNNEL != 0).then_some(Tunnel {
                            tun_id: m.tun_id as u64,
                            tun_src: m.tun_src,
                            tun_dst: m.tun_dst,
                        });
                        let (key, parsed) = (&mut keys[i], &mut parseds[i]);
                        let w = extract_to(key, parsed, data, info.ofport, tunnel.as_ref());
                        if w == IP4_L4_MAP {
                            ip4s[i] = ip4_words(key);
                        }
                        // The fast path takes no malformed packet.
                        if let Some(bad) = parsed.malformed {
                            if let Some(s) = inner.switches.get(info.switch as usize) {
                                if let Some(c) = s.shared.malformed.get(bad as usize) {
                                    c.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        w
                    }
                };
                group_of[i] = group as u8;
            }
            self.scratch.clear();
            // 2. Look up each group of packets (same bridge, same cache switches) together;
            // the usual vector (one port, no drop) is one group looked up in place, and when
            // every packet of it hit, its actions are run straight from the hits.
            let whole = !dropped && switches_seen.count_ones() == 1;
            let mut hits_only = false;
            while switches_seen != 0 {
                let g = switches_seen.trailing_zeros() as u16;
                switches_seen &= switches_seen - 1;
                hits_only = self.lookup_group(cx, inner, frame, g, whole, now);
            }
            // Traced packets: which tier answered and through which rules (cold).
            self.notes.clear();
            if traced {
                if hits_only {
                    self.sources_from_hits(frame.len());
                }
                for (i, &b) in frame.iter().enumerate() {
                    if cx.pool.meta(b).flags & packet::meta::FLAG_TRACE != 0 {
                        self.note(cx.pool, inner, i, b);
                    }
                }
            }
            // 3. Actions.
            self.tally.clear();
            let sw = self.group_of.first().map_or(0, |&g| g as usize / 4);
            let all_out = match inner.switches.get_mut(sw) {
                Some(s) if hits_only => self.run_hits(cx, s, sw as u16, frame, nexts),
                _ => {
                    for (i, &b) in frame.iter().enumerate() {
                        let source = self.sources[i];
                        let sw =
                            (self.group_of[i] != NO_GROUP).then_some(self.group_of[i] as usize / 4);
                        nexts[i] = match (source, sw.and_then(|s| inner.switches.get_mut(s))) {
                            (Source::Pending, _) => fail(cx, b, FlowDrop::NotFlowPort),
                            (Source::Drop(reason), _) => {
                                let id = cx.error_id(reason);
                                cx.pool.meta_mut(b).error = id;
                                FlowNext::Drop.id()
                            }
                            (_, None) => fail(cx, b, FlowDrop::NotFlowPort),
                            (Source::Megaflow(id), Some(s)) => {
                                let len = cx.pool.meta(b).length as u64;
                                // The usual megaflow, one output, acts from its hot line;
                                // others borrow their actions (a DpActions is ~400 bytes).
                                let next = match s.cache.output_port(id) {
                                    Some(p) => {
                                        cx.pool.meta_mut(b).tx_port = p;
                                        FlowNext::Output.id()
                                    }
                                    None => match s.cache.actions(id) {
                                        Some(a) => self.run(cx, i, b, a, &s.members, &s.shared),
                                        None => {
                                            nexts[i] = fail(cx, b, FlowDrop::TranslationFailed);
                                            continue;
                                        }
                                    },
                                };
                                let sw = sw.unwrap_or(0) as u16;
                                match self.tally.last_mut() {
                                    Some(t) if t.0 == sw && t.1 == id => {
                                        t.2 += 1;
                                        t.3 += len;
                                    }
                                    _ => self.tally.push((sw, id, 1, len)),
                                }
                                next
                            }
                            (Source::Scratch(k), Some(s)) => {
                                let Some(actions) = self.scratch.get(k as usize).cloned() else {
                                    nexts[i] = fail(cx, b, FlowDrop::TranslationFailed);
                                    continue;
                                };
                                self.run(cx, i, b, &actions, &s.members, &s.shared)
                            }
                        };
                    }
                    false
                }
            };
            // 4. Megaflow counters once per megaflow of the vector, rule counters once per
            // rule (beyond `RULE_TALLY` distinct rules, once per megaflow and rule).
            self.rule_tally.clear();
            for &(sw, id, packets, bytes) in &self.tally {
                if let Some(s) = inner.switches.get_mut(sw as usize) {
                    s.cache.credit(id, packets, bytes);
                    if let Some(rules) = s.cache.rules(id) {
                        for &r in rules.as_slice() {
                            let tally = &mut self.rule_tally;
                            match tally.iter().position(|t| t.0 == sw && t.1 == r) {
                                Some(k) => {
                                    tally[k].2 += packets;
                                    tally[k].3 += bytes;
                                }
                                None if tally.len() < RULE_TALLY => {
                                    tally.push((sw, r, packets, bytes));
                                }
                                None => s.tables.get().counters().add(r, packets, bytes, now),
                            }
                        }
                    }
                }
            }
            for &(sw, r, packets, bytes) in &self.rule_tally {
                if let Some(s) = inner.switches.get(sw as usize) {
                    s.tables.get().counters().add(r, packets, bytes, now);
                }
            }
            all_out
        });
        self.exec.flush();
        if all_out {
            Dispatch::AllTo(FlowNext::Output.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let Some(n) = self.notes.iter().find(|n| n.buffer == buffer) else {
            return format!(
                "buffer {buffer}: rx_port {} tx_port {} length {}",
                m.rx_port, m.tx_port, m.length
            );
        };
        let tier = match n.tier {
            Tier::Emc => "exact-match cache hit".to_string(),
            Tier::Megaflow => "megaflow cache hit".to_string(),
            Tier::Miss { installed: true } => "miss: classified, megaflow installed".to_string(),
            Tier::Miss { installed: false } => {
                "miss: classified, not installed (cache off, full or refused)".to_string()
            }
            Tier::Covered => "miss covered by a megaflow made earlier in this vector".to_string(),
            Tier::None => "not looked up".to_string(),
        };
        let rules: Vec<String> = n.rules.as_slice().iter().map(|r| format!("#{r}")).collect();
        format!(
            "{tier}{}; rules {} (tables version {}); tx_port {}",
            n.megaflow
                .map(|id| format!(" (megaflow {id})"))
                .unwrap_or_default(),
            if rules.is_empty() {
                "none".to_string()
            } else {
                rules.join(" ")
            },
            n.version,
            m.tx_port
        )
    }
}

impl FlowSwitch {
    /// Punt `controller` actions' copies into `punt` (this worker's punt ring); without it
    /// they are counted as `punt-ring-full`.
    pub fn with_punt(mut self, punt: crate::inject::SharedPunt) -> FlowSwitch {
        self.exec.set_punt(punt);
        self
    }

    /// Run `actions` on packet `i` (buffer `b`) of bridge `members`/`shared`: its next index.
    #[inline]
    fn run(
        &mut self,
        cx: &mut NodeContext<'_>,
        i: usize,
        b: u32,
        actions: &DpActions,
        members: &[u16],
        shared: &FlowWorkerShared,
    ) -> u16 {
        let bridge = actions::Bridge {
            members,
            shared,
            origin: None,
        };
        self.exec
            .run(cx, (i, b), &mut self.parsed[i], actions, &bridge)
    }

    /// Write packet `i`'s whole key if extraction left it in `ip4` only.
    #[inline]
    fn whole_key(&mut self, i: usize) {
        write_whole_key(&mut self.keys[i], &self.ip4[i], &mut self.words[i]);
    }

    /// Remember for the trace what answered traced packet `i` (buffer `b`). Cold path.
    #[cold]
    fn note(&mut self, pool: &BufferPool, inner: &mut Inner, i: usize, b: u32) {
        self.whole_key(i);
        let port = pool.meta(b).rx_port as usize;
        let Some(s) = inner
            .ports
            .get(port)
            .copied()
            .flatten()
            .and_then(|p| inner.switches.get(p.switch as usize))
        else {
            return;
        };
        let tables = s.tables.get();
        let megaflow = match self.sources[i] {
            Source::Megaflow(id) => Some(id),
            _ => None,
        };
        let rules = match megaflow.and_then(|id| s.cache.rules(id)) {
            Some(r) => *r,
            None => tables
                .translate(&self.keys[i])
                .rules
                .as_slice()
                .iter()
                .copied()
                .collect(),
        };
        self.notes.push(TraceNote {
            buffer: b,
            tier: self.tiers[i],
            megaflow,
            rules,
            version: tables.version(),
        });
    }
}

impl FlowSwitch {
    /// Look up the packets of group `g` (bridge `g / 4`, EMC bit 1, megaflow bit 0), translate
    /// and install their misses, and set their sources. Returns true, with no source set, when
    /// the group is the `whole` vector and every packet hit: `group_hits` then has the answers
    /// in frame order (see `run_hits`).
    fn lookup_group(
        &mut self,
        cx: &mut NodeContext<'_>,
        inner: &mut Inner,
        frame: &[u32],
        g: u16,
        whole: bool,
        now: u64,
    ) -> bool {
        let packets = frame.len();
        let (sw, emc, megaflow) = (g / 4, g & 2 != 0, g & 1 != 0);
        self.group_index.clear();
        // A whole vector is looked up in place; its index is filled below, only when some
        // packet missed.
        if !whole {
            for i in 0..packets {
                if self.group_of[i] == g as u8 {
                    // The miss path reads `keys`, not the group's copy: write the key now.
                    self.whole_key(i);
                    self.group_keys[self.group_index.len()] = self.keys[i];
                    self.group_ip4[self.group_index.len()] = self.ip4[i];
                    self.group_words[self.group_index.len()] = self.words[i];
                    self.group_index.push(i as u16);
                }
            }
        }
        let Some(s) = inner.switches.get_mut(sw as usize) else {
            // Not looked up: the actions step drops them (not a flow port).
            for i in 0..packets {
                if whole || self.group_of[i] == g as u8 {
                    (self.sources[i], self.tiers[i]) = (Source::Pending, Tier::None);
                }
            }
            return false;
        };
        let n = if whole {
            packets
        } else {
            self.group_index.len()
        };
        s.cache.set_emc_enabled(emc);
        s.cache.set_megaflow_enabled(megaflow);
        let tables = s.tables.get();
        let xl = Xl(tables);
        // A whole vector's keys that miss the exact-match cache are written in place.
        let (keys, ip4, words) = if whole {
            (&mut self.keys[..n], &self.ip4[..n], &mut self.words[..n])
        } else {
            (
                &mut self.group_keys[..n],
                &self.group_ip4[..n],
                &mut self.group_words[..n],
            )
        };
        let misses = s
            .cache
            .lookup_vector(&xl, now, keys, ip4, words, &mut self.group_hits[..n]);
        if whole {
            if misses == 0 {
                return true;
            }
            self.group_index.extend(0..packets as u16);
        }
        self.recent.clear();
        for j in 0..n {
            let i = self.group_index[j] as usize;
            match self.group_hits[j] {
                Hit::Emc(id) => {
                    self.sources[i] = Source::Megaflow(id);
                    self.tiers[i] = Tier::Emc;
                    continue;
                }
                Hit::Megaflow(id) => {
                    self.sources[i] = Source::Megaflow(id);
                    self.tiers[i] = Tier::Megaflow;
                    continue;
                }
                Hit::Miss => {}
            }
            let key = &self.keys[i];
            if let Some(src) = self.recent.covering(key) {
                self.sources[i] = src;
                self.tiers[i] = Tier::Covered;
                continue;
            }
            // A miss: translate, install, remember it for the rest of the vector.
            let start = graph::rdtsc();
            s.cache.prefetch_install();
            let t = tables.translate(key);
            let source = if t.error.is_some() {
                s.shared.translate_errors.fetch_add(1, Ordering::Relaxed);
                Source::Drop(FlowDrop::TranslationFailed.id())
            } else {
                let tr = TranslatedRef {
                    actions: &t.actions,
                    mask: &t.mask,
                    rules: t.rules.as_slice(),
                };
                match s
                    .cache
                    .insert_parts_words(key, self.words[i], tr, tables.version(), now)
                {
                    Ok(id) => Source::Megaflow(id),
                    Err(flow::cache::InsertRefused::Overlap(id)) => Source::Megaflow(id),
                    Err(_) => {
                        let len = cx.pool.meta(frame[i]).length as u64;
                        for r in t.rules.as_slice() {
                            tables.counters().add(*r, 1, len, now);
                        }
                        self.scratch.push(t.actions);
                        Source::Scratch(self.scratch.len() as u16 - 1)
                    }
                }
            };
            s.cycles_per_miss
                .record(graph::rdtsc().saturating_sub(start), 1);
            self.recent.remember(key, &t.mask, source);
            self.sources[i] = source;
            self.tiers[i] = Tier::Miss {
                installed: matches!(source, Source::Megaflow(_)),
            };
        }
        false
    }

    /// Sources and tiers of a vector `lookup_group` answered with hits only (for the trace).
    #[cold]
    fn sources_from_hits(&mut self, packets: usize) {
        for i in 0..packets {
            (self.sources[i], self.tiers[i]) = match self.group_hits[i] {
                Hit::Emc(id) => (Source::Megaflow(id), Tier::Emc),
                Hit::Megaflow(id) => (Source::Megaflow(id), Tier::Megaflow),
                Hit::Miss => (Source::Pending, Tier::None),
            };
        }
    }

    /// The actions of a vector whose packets all hit (one group, `group_hits` in frame order,
    /// bridge `sw`): for a run of packets of one megaflow whose only action is one output, the
    /// port is set and nothing else is looked at. Returns true when every packet goes to
    /// `interface-output`.
    fn run_hits(
        &mut self,
        cx: &mut NodeContext<'_>,
        s: &mut SwitchState,
        sw: u16,
        frame: &[u32],
        nexts: &mut [u16],
    ) -> bool {
        let output = FlowNext::Output.id();
        let mut all_out = true;
        // Taken for the loop (`run` borrows the node), put back after.
        let hits = std::mem::take(&mut self.group_hits);
        let n = frame.len().min(nexts.len()).min(hits.len());
        let (frame, nexts) = (&frame[..n], &mut nexts[..n]);
        // The current run of packets of one megaflow: its id, where it started, its port (None:
        // run its actions) and its bytes so far; tallied when the run ends. Few values live
        // across iterations: the per-packet part stays in registers.
        let mut cur = MegaflowId::MAX;
        let mut run_start = 0;
        let mut port = None;
        let mut bytes = 0u64;
        for i in 0..n {
            let b = frame[i];
            let id = match hits[i] {
                Hit::Emc(id) | Hit::Megaflow(id) => id,
                Hit::Miss => {
                    // Not expected here (the vector had no miss); ends the run.
                    end_run(&mut self.tally, sw, cur, i - run_start, bytes);
                    cur = MegaflowId::MAX;
                    nexts[i] = fail(cx, b, FlowDrop::TranslationFailed);
                    all_out = false;
                    continue;
                }
            };
            if id != cur {
                end_run(&mut self.tally, sw, cur, i - run_start, bytes);
                (cur, run_start, bytes) = (id, i, 0);
                port = s.cache.output_port(id);
            }
            let m = cx.pool.meta_mut(b);
            bytes += m.length as u64;
            if let Some(p) = port {
                m.tx_port = p;
                nexts[i] = output;
            } else {
                nexts[i] = match s.cache.actions(id) {
                    Some(actions) => self.run(cx, i, b, actions, &s.members, &s.shared),
                    None => fail(cx, b, FlowDrop::TranslationFailed),
                };
                all_out &= nexts[i] == output;
            }
        }
        end_run(&mut self.tally, sw, cur, n - run_start, bytes);
        self.group_hits = hits;
        all_out
    }
}

/// Tally a run of `packets` packets (`bytes` bytes) of megaflow `cur` of bridge `sw`, if it
/// has any (`MegaflowId::MAX`: no run).
#[inline]
fn end_run(
    tally: &mut Vec<(u16, MegaflowId, u64, u64)>,
    sw: u16,
    cur: MegaflowId,
    packets: usize,
    bytes: u64,
) {
    if packets != 0 && cur != MegaflowId::MAX {
        tally.push((sw, cur, packets as u64, bytes));
    }
}

impl InputNode for FlowMaintenance {
    fn name(&self) -> &str {
        MAINTENANCE
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![names::ERROR_DROP.to_string()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        _out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let now = now_ms(cx.now_tsc, self.ms_per_tick);
        self.inner.with(|inner| inner.maintain(now));
        (0, Dispatch::AllTo(0))
    }

    /// It never has packets of its own: a run of finite inputs may end around it.
    fn is_finished(&self) -> bool {
        true
    }

    fn next_timer(&self) -> Option<u64> {
        let next = self.inner.with(|inner| {
            inner
                .switches
                .iter()
                .any(|s| {
                    !s.cache.megaflows().is_empty() || s.shared.dump_wanted(s.dump_served).is_some()
                })
                .then_some(inner.next_maintenance_ms)
        })?;
        Some(next.saturating_mul(self.tsc_per_ms))
    }
}

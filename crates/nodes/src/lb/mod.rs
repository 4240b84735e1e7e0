//! `lb`: the L4 load balancer node. Packets reach it two ways: the route of a VIP's prefix
//! (`NextHop::Node`, installed by the control side as VIPs come and go: a packet to any other
//! address never comes here) hands it the packets to VIP addresses, with `VIP_ROUTE` in
//! `next_scratch`; and `ip4-input` / `ip6-input` steer the packets of NAT inside ports here
//! (a NAT server's reply is addressed to the client). A packet to a VIP is given a server (its
//! flow-table entry, else Maglev), encapsulated (L3DSR, GRE4, GRE6, NAT4, NAT6) and handed to
//! the lookup of the outer family toward that server; a NAT server's reply is rewritten back
//! to the VIP; a health probe from the probe host's port is wrapped for the server its source
//! port is leased to (`wrap.rs`). A routed packet no VIP takes (another protocol or port of a
//! VIP's address) is dropped and counted as `no-vip-for-port`, as VPP's `lb` sends it to its
//! default VIP, whose only server drops; a steered packet that is neither for a VIP nor a NAT
//! reply passes to the lookup untouched. A packet the lookup would bring back here (a server
//! inside a VIP's prefix) is dropped as `vip-loop` (`FLAG_LB_DONE`). A VIP packet (or NAT
//! reply) whose sender left offloads undone (a local guest's TSO super-packet or partial
//! checksum) has them finished in software first: the segments re-enter this node as ordinary
//! packets, since no encapsulation here can carry a super-packet. A chunk of plain IPv4 TCP/UDP
//! packets to L3DSR VIPs (a loaded L3DSR balancer's whole traffic) takes a fast lane
//! (`plain.rs`) that skips work and never decides differently. It owns this worker's flow
//! tables (taken when the first VIP comes, `worker_tables.rs`); it reads the published
//! `LbTables` snapshot and writes only this worker's counters. It never allocates, locks or
//! makes a syscall per packet.

use crate::offload::{Fate, OffloadDrop, PortCaps, Replace, SoftwareOffload};
use crate::{icmp_request, names, FLAG_LB_DONE, FLAG_LOCAL_ORIGIN};
use graph::{Dispatch, Emitter, Node, NodeContext, NEXT_CONSUMED};
use lb::counters::LbWorkerCounters;
use lb::encap::{self, EncapError};
use lb::flowtable::{self, AsRef, NatReverse};
use lb::model::{AsSlot, Encap, VipId};
use lb::nat_inside::NatInside;
use lb::parse::{self, Kind, Parsed};
use lb::snapshot::LbTables;
use lb::{stable_hash, FiveTuple};
use live::Reader;
use packet::meta::FLAG_IP6;
use packet::{BufferMeta, BufferPool, VECTOR_SIZE};
use session::{Insert, SessionHash, SessionTable, Touch};
use std::sync::Arc;

#[cfg(test)]
mod frag_tests;
mod plain;
#[cfg(test)]
mod tests;
mod vector;
mod worker_tables;
mod wrap;

use vector::{fragment_vip, mark_sent, pass_all, uniform, VipMemo};
use worker_tables::Taken;
pub use worker_tables::{TableSlot, WorkerTables};
pub use wrap::LbProbe;

/// The node's name.
pub const LB: &str = "lb";
/// The `next_scratch` a VIP prefix's route (`NextHop::Node`) gives the packets it hands to
/// this node: they were routed here because their destination is a VIP's.
pub const VIP_ROUTE: u32 = 0x6c62_0001;
/// Flow-table buckets swept per vector (and per idle call): the default table (512k buckets)
/// is swept in 32k vectors, under a second at 10 Mpps and far less when idle. A larger budget
/// reads more cold lines per packet: 64 cost 7-13 cycles per packet at 1M flows.
const SWEEP_BUDGET: usize = 16;
/// Packets handled per chunk of a vector (see `process`).
const CHUNK: usize = 64;
/// Outer TTL / hop limit of GRE packets.
const GRE_TTL: u8 = 64;
/// Seconds between copies of the flow tables' live counts into the counters.
const PUBLISH_EVERY_S: u32 = 1;
/// Segments one call may emit (as `interface-output`).
const EMIT_CAPACITY: usize = 2048;
/// Every index of a chunk, in order: the general pass 3's list of packets.
const ALL: [u16; CHUNK] = {
    let mut a = [0u16; CHUNK];
    let mut i = 0;
    while i < CHUNK {
        a[i] = i as u16;
        i += 1;
    }
    a
};

graph::node_indices! {
    /// `lb`'s next nodes.
    pub enum LbNext {
        /// To `IP4_LOOKUP`.
        Ip4Lookup = names::IP4_LOOKUP,
        /// To `IP6_LOOKUP`.
        Ip6Lookup = names::IP6_LOOKUP,
        /// To `IP4_ICMP_ERROR` ("fragmentation needed").
        Ip4IcmpError = names::IP4_ICMP_ERROR,
        /// To `IP6_ICMP_ERROR` ("packet too big").
        Ip6IcmpError = names::IP6_ICMP_ERROR,
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// Back to this node: the segments of a super-packet cut in software.
        Lb = LB,
    }
}

graph::node_indices! {
    /// `lb`'s drop reasons.
    pub enum LbError {
        /// To a VIP address, but no VIP has the packet's protocol and port.
        NoVipForPort = "no-vip-for-port",
        /// The VIP has no server with weight > 0.
        NoServer = "no-server",
        /// To a VIP address, but too short or malformed to parse.
        Malformed = "malformed",
        /// Too big for the encapsulation, and no ICMP error may be sent (IPv4 without DF).
        TooBig = "too-big",
        /// The encapsulation could not be applied (no headroom, family mismatch).
        EncapFailed = "encap-failed",
        /// A health probe whose source port is not leased to one of its VIP's servers.
        ProbeNotLeased = "probe-not-leased",
        /// A super-packet or partial checksum whose headers do not allow the software offload.
        BadOffload = "malformed-offload",
        /// No buffer was free for a segment.
        NoOffloadBuffer = "no-buffer-for-segment",
        /// Too many segments in one call.
        OffloadQueueFull = "segment-queue-full",
        /// No buffer was free for a fragment of a packet too big for its GRE tunnel.
        NoFragmentBuffer = "no-buffer-for-fragment",
        /// Too many fragments in one call.
        FragmentQueueFull = "fragment-queue-full",
        /// Routed here by a VIP's prefix after this node had handed it to a lookup already (a
        /// server address inside a VIP's prefix would loop).
        Loop = "vip-loop",
    }
}

/// How this worker's node is made.
pub struct LbConfig {
    /// The published tables.
    pub tables: Reader<LbTables>,
    /// This worker's counters (read by the control plane).
    pub counters: Arc<LbWorkerCounters>,
    /// Where the control side leaves this worker's flow tables when the first VIP comes (None,
    /// or nothing left there: the node allocates them itself, `flow_entries` big).
    pub slot: Option<Arc<TableSlot>>,
    /// Flow-table entries of tables the node allocates itself: at least this many (3 a bucket,
    /// a power of two of buckets, at most `flowtable::MAX_BUCKETS` buckets).
    pub flow_entries: usize,
    /// The MTU of the path toward servers (the smallest port MTU), for GRE.
    pub mtu: u16,
    /// The NAT inside ports (where replies are looked up in the NAT reverse table).
    pub nat_inside: Arc<NatInside>,
    /// Where health probes enter (None: no health checks).
    pub probe: Option<LbProbe>,
}

/// One packet of the vector: whether it parsed, its parse, and its VIP (per vector scratch).
#[derive(Clone, Copy)]
struct Work {
    parsed_ok: bool,
    vip: VipId,
    parsed: Parsed,
}

/// The `lb` node.
pub struct LbNode {
    tables: Reader<LbTables>,
    counters: Arc<LbWorkerCounters>,
    /// The flow tables (placeholders until the first VIP: see `worker_tables.rs`).
    flows: SessionTable<AsRef>,
    nat: SessionTable<NatReverse>,
    /// Where the real ones come from, and whether they came.
    source: TableSource,
    nat_inside: Arc<NatInside>,
    probe: Option<LbProbe>,
    mtu: u16,
    seen: Observed,
    last_publish_s: u32,
    /// Per packet of the vector (by its index in the frame).
    work: Vec<Work>,
    /// The frame indices of the vector's VIP packets; `hashes`, `touch` and `found` follow
    /// this order.
    sel: Vec<u16>,
    hashes: Vec<SessionHash>,
    touch: Vec<Touch>,
    found: Vec<Option<AsRef>>,
    /// NAT reverse entries of this vector's new flows, written after pass 3 (their buckets
    /// are prefetched when they are made, so the other packets' work hides the misses).
    nat_pending: Vec<(SessionHash, NatReverse, u8)>,
    /// The fast lane's scratch, and the packets of a plain chunk it leaves to the general
    /// pass 3.
    lane: plain::Lane,
    retry: Vec<u16>,
    /// Whether the fast lane is tried (tests turn it off to hold it to the general path).
    use_lane: bool,
    /// Offloads finished in software, and the segments it emits back to this node.
    offload: SoftwareOffload,
    emitter: Emitter,
}

impl LbNode {
    /// A node reading `cfg.tables`, holding placeholder flow tables until the first VIP.
    pub fn new(cfg: LbConfig) -> Result<LbNode, flowtable::FlowTableError> {
        let WorkerTables { flows, nat } = WorkerTables::placeholder()?;
        Ok(LbNode {
            tables: cfg.tables,
            counters: cfg.counters,
            flows,
            nat,
            source: TableSource {
                slot: cfg.slot,
                entries: cfg.flow_entries,
                taken: false,
            },
            nat_inside: cfg.nat_inside,
            probe: cfg.probe,
            mtu: cfg.mtu,
            seen: Observed {
                version: u64::MAX,
                active: false,
                has_nat: false,
            },
            last_publish_s: 0,
            work: vec![
                Work {
                    parsed_ok: false,
                    vip: VipId(0),
                    parsed: Parsed::EMPTY,
                };
                VECTOR_SIZE
            ],
            sel: vec![0; VECTOR_SIZE],
            hashes: vec![SessionHash::default(); VECTOR_SIZE],
            touch: vec![Touch::Refresh; VECTOR_SIZE],
            found: vec![None; VECTOR_SIZE],
            nat_pending: Vec::with_capacity(VECTOR_SIZE),
            lane: plain::Lane::new(CHUNK),
            retry: vec![0; CHUNK],
            use_lane: true,
            offload: SoftwareOffload::new(),
            emitter: Emitter::new(EMIT_CAPACITY),
        })
    }
}

/// Where a node's real flow tables come from.
struct TableSource {
    slot: Option<Arc<TableSlot>>,
    /// Entries of tables the node allocates itself.
    entries: usize,
    /// They came (or the node gave up on them: it then keeps hashing without a table).
    taken: bool,
}

/// What the node keeps of the tables version it last saw.
#[derive(Clone, Copy)]
struct Observed {
    version: u64,
    active: bool,
    has_nat: bool,
}

/// The flow tables' timeouts of `t`'s `lb conf`.
fn timeouts_of(t: &LbTables) -> flowtable::Timeouts {
    let c = t.conf().timeouts;
    flowtable::Timeouts {
        tcp: c.tcp,
        udp: c.udp,
        other: c.other,
        closing: flowtable::Timeouts::default().closing.min(c.tcp),
    }
}

/// Adopt a new tables version: timeouts, whether any VIP / NAT VIP exists, and with the first
/// VIP this worker's real flow tables.
fn observe(
    t: &LbTables,
    seen: &mut Observed,
    flows: &mut SessionTable<AsRef>,
    nat: &mut SessionTable<NatReverse>,
    (source, counters): (&mut TableSource, &LbWorkerCounters),
) {
    if t.version() == seen.version && (source.taken || !seen.active) {
        return;
    }
    seen.version = t.version();
    seen.active = t.vips().next().is_some();
    seen.has_nat = t
        .vips()
        .any(|v| matches!(v.encap, Encap::Nat4 { .. } | Encap::Nat6 { .. }));
    if seen.active && !source.taken {
        take_tables(source, flows, nat, counters);
    }
    let ft = timeouts_of(t).classes();
    flows.set_timeouts(ft);
    nat.set_timeouts(ft);
}

/// Swap the placeholders for this worker's flow tables: those the control side left in the
/// slot, else tables allocated here (a node without a slot: tests, tools). Once, at a vector
/// boundary; a busy slot is tried again at the next vector.
#[cold]
fn take_tables(
    source: &mut TableSource,
    flows: &mut SessionTable<AsRef>,
    nat: &mut SessionTable<NatReverse>,
    counters: &LbWorkerCounters,
) {
    let taken = match source.slot.as_ref().map(|s| s.take()) {
        Some(Taken::Busy) => return,
        Some(Taken::Tables(t)) => Ok(*t),
        Some(Taken::Empty) | None => WorkerTables::new(source.entries),
    };
    source.taken = true;
    // Allocation refused: the placeholders stay, a full table (flows are hashed, not dropped).
    if let Ok(t) = taken {
        counters.flow_table_entries.set(t.capacity() as u64);
        *flows = t.flows;
        *nat = t.nat;
    }
}

/// Copy the flow table's live counts into the counters of the VIPs and slots that exist.
fn publish_live(flows: &SessionTable<AsRef>, counters: &LbWorkerCounters, t: &LbTables) {
    let counts = flows.counts();
    for v in t.vips() {
        if let Some(c) = counters.vip(v.id) {
            c.live_flows.set(counts.group(v.id.0) as u64);
        }
        for &s in &v.slots {
            if let Some(c) = counters.slot(s) {
                c.live_flows.set(counts.bin(s.0) as u64);
            }
        }
    }
}

/// Seconds since the TSC's origin, never 0 (the flow tables' clock).
#[inline]
fn now_s(cx: &NodeContext<'_>) -> u32 {
    (cx.now_tsc / cx.tsc_hz.max(1)) as u32 + 1
}

/// The L3 bytes of a packet (what `ip*-input` checked).
#[inline]
fn l3_of<'a>(meta: &BufferMeta, data: &'a [u8]) -> &'a [u8] {
    data.get(meta.l3_offset as usize..).unwrap_or(&[])
}

/// The tuple of a packet that did not parse: only the destination (for `is_vip_address`).
fn dst_only(l3: &[u8], ip6: bool) -> FiveTuple {
    if ip6 {
        let dst = l3.get(24..40).and_then(|d| d.try_into().ok());
        FiveTuple::v6([0; 16], dst.unwrap_or([0; 16]), 0, 0, 0)
    } else {
        let dst = l3.get(16..20).and_then(|d| d.try_into().ok());
        FiveTuple::v4([0; 4], dst.unwrap_or([0; 4]), 0, 0, 0)
    }
}

fn v4_of(a: &[u8; 16]) -> [u8; 4] {
    [a[12], a[13], a[14], a[15]]
}

fn lookup_next(ip6: bool) -> u16 {
    if ip6 {
        LbNext::Ip6Lookup.id()
    } else {
        LbNext::Ip4Lookup.id()
    }
}

impl Node for LbNode {
    fn name(&self) -> &str {
        LB
    }

    fn next_nodes(&self) -> Vec<String> {
        LbNext::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        LbError::names()
    }

    fn emitter(&mut self) -> Option<&mut Emitter> {
        Some(&mut self.emitter)
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let LbNode {
            tables,
            counters,
            flows,
            nat,
            source,
            nat_inside,
            probe,
            mtu,
            seen,
            last_publish_s,
            work,
            sel,
            hashes,
            touch,
            found,
            nat_pending,
            lane,
            retry,
            use_lane,
            offload,
            emitter,
        } = self;
        let tables = tables.get();
        observe(tables, seen, flows, nat, (source, counters));
        if !seen.active {
            return pass_all(cx, counters, frame, nexts);
        }
        let now = now_s(cx);
        let counters = &**counters;
        // The vector is handled in chunks of `CHUNK` packets: the passes below keep per-packet
        // scratch (parse results, keys, hashes), and a chunk's scratch stays in L1 between
        // passes where a whole vector's would not; a chunk still spans enough work to hide the
        // latency of the flow-table lines it prefetches.
        let (whole_frame, whole_nexts) = (frame, nexts);
        // The current run of packets to one VIP: its id, packets and bytes (see pass 3).
        let mut vip_run: VipRun = None;
        // The fast lane (`plain.rs`) is tried on each chunk until one is not for it.
        let mut try_plain = *use_lane;
        let mut memo4 = plain::Memo4::EMPTY;
        let probe_port = probe.as_ref().map(|pr| pr.port);
        for start in (0..whole_frame.len()).step_by(CHUNK) {
            let end = (start + CHUNK).min(whole_frame.len());
            let frame = &whole_frame[start..end];
            let nexts = &mut whole_nexts[start..end];
            let plain_n = if try_plain {
                let out = plain::Keys { sel, hashes, touch };
                lane.prepare(cx, frame, nexts, tables, flows, probe_port, &mut memo4, out)
            } else {
                None
            };
            try_plain = plain_n.is_some();
            let n = if let Some(n) = plain_n {
                n
            } else {
                // Pass 1a: parse every packet in place into its own slot of this vector's work
                // array. Nothing reads a parse result in this loop: the parser writes fields
                // piecemeal, and reading them back as wider words while the stores are still in
                // flight stalls on store-to-load forwarding (measured: ~10% of the node). Pass 1b
                // reads them once they have reached the cache.
                let count = frame.len().min(work.len());
                for (i, &b) in frame.iter().enumerate().take(count) {
                    let meta = cx.pool.meta(b);
                    let ip6 = meta.flags & FLAG_IP6 != 0;
                    let routed = meta.next_scratch == VIP_ROUTE;
                    let slot = &mut work[i];
                    if meta.flags & FLAG_LB_DONE != 0 {
                        slot.parsed_ok = false;
                        cx.pool.meta_mut(b).error = cx.error_base + LbError::Loop.id();
                        nexts[i] = LbNext::Drop.id();
                        continue;
                    }
                    nexts[i] = lookup_next(ip6);
                    let l3 = l3_of(meta, cx.pool.data(b));
                    slot.parsed_ok = parse::parse_into(l3, ip6, &mut slot.parsed).is_ok();
                    if !slot.parsed_ok && (routed || tables.is_vip_address(&dst_only(l3, ip6))) {
                        counters.malformed.add(1);
                        cx.pool.meta_mut(b).error = cx.error_base + LbError::Malformed.id();
                        nexts[i] = LbNext::Drop.id();
                    }
                }
                // Pass 1b: find the VIP, make the flow keys and hashes (prefetching each flow's
                // bucket), answer NAT replies; everything else is decided here. `sel` lists the
                // VIP packets.
                let mut n = 0;
                let mut memo = VipMemo::EMPTY;
                for (i, slot) in work.iter_mut().enumerate().take(count) {
                    if !slot.parsed_ok {
                        continue;
                    }
                    let b = frame[i];
                    let parsed = &slot.parsed;
                    let ip6 = parsed.tuple.ip6;
                    let vip = match parsed.kind {
                        // A first fragment has its ports: find the VIP by them (its tuple keeps
                        // 0s so that every fragment of the datagram hashes alike).
                        Kind::FirstFragment => {
                            let mut t = parsed.tuple;
                            (t.src_port, t.dst_port) = parsed.ports;
                            tables.vip_for(&t)
                        }
                        Kind::LaterFragment => tables
                            .vip_for(&parsed.tuple)
                            .or_else(|| fragment_vip(tables, &parsed.tuple)),
                        _ => memo.vip_for(tables, &parsed.tuple),
                    };
                    match vip {
                        Some(vip)
                            if probe
                                .as_ref()
                                .is_some_and(|pr| pr.port == cx.pool.meta(b).rx_port) =>
                        {
                            // A health probe: to the server its source port is leased to.
                            if let Some(pr) = probe.as_ref() {
                                let (meta, buf) = cx.pool.slot_mut(b);
                                nexts[i] = wrap::wrap_probe(
                                    tables,
                                    &pr.leases,
                                    counters,
                                    vip,
                                    meta,
                                    buf,
                                    parsed,
                                    *mtu,
                                    cx.error_base,
                                );
                            }
                        }
                        Some(vip) => {
                            hashes[n] = flows.hash(&flowtable::flow_key(vip.0, &parsed.tuple));
                            // Start loading the flow's bucket now: the work on the rest of the
                            // vector hides the memory latency.
                            flows.prefetch(hashes[n]);
                            touch[n] = flowtable::touch_for(parsed.kind);
                            sel[n] = i as u16;
                            slot.vip = vip;
                            n += 1;
                        }
                        // To a VIP's address (routed by its prefix, or steered), but no VIP
                        // has its protocol and port.
                        None if cx.pool.meta(b).next_scratch == VIP_ROUTE
                            || tables.is_vip_address(&parsed.tuple) =>
                        {
                            counters.no_vip_for_port.add(1);
                            cx.pool.meta_mut(b).error = cx.error_base + LbError::NoVipForPort.id();
                            nexts[i] = LbNext::Drop.id();
                        }
                        None if seen.has_nat
                            && nat_inside
                                .translates_on(usize::from(cx.pool.meta(b).rx_port), ip6)
                            && !probe.as_ref().is_some_and(|pr| pr.is_reply(&parsed.tuple)) =>
                        {
                            // Maybe a NAT server's reply: server:target_port -> client.
                            let h = nat.hash(&flowtable::reverse_key(&parsed.tuple));
                            let t = if parsed.kind == Kind::FinRst {
                                Touch::Shorten(flowtable::CLASS_CLOSING)
                            } else {
                                Touch::Refresh
                            };
                            match nat.lookup(h, now, t) {
                                Some(_) if cx.pool.meta(b).has_offload() => {
                                    nexts[i] = finish_offload(offload, emitter, cx, start + i, b);
                                }
                                Some(r) => {
                                    let (meta, buf) = cx.pool.slot_mut(b);
                                    if encap::nat_reverse(meta, buf, parsed, r.addr, r.port).is_ok()
                                    {
                                        counters.nat_replies.add(1);
                                    }
                                }
                                None => counters.nat_reply_misses.add(1),
                            }
                        }
                        None => {}
                    }
                }
                n
            };
            // Pass 2: the flow table, batched (the primary buckets were prefetched in pass 1).
            if n > 0 {
                flows.lookup_batch(&hashes[..n], &touch[..n], now, &mut found[..n]);
            }
            // Pass 3: choose, count, encapsulate. A plain chunk has its known flows done by the
            // lane, and lists the rest.
            let list = match plain_n {
                Some(_) => {
                    let m = lane.finish(
                        cx,
                        frame,
                        nexts,
                        tables,
                        counters,
                        &found[..n],
                        work,
                        retry,
                        &mut vip_run,
                    );
                    &retry[..m]
                }
                None => &ALL[..n],
            };
            for &j in list {
                let j = usize::from(j);
                let i = usize::from(sel[j]);
                let w = &work[i];
                let b = frame[i];
                let Some(vip) = tables.vip(w.vip) else {
                    continue;
                };
                let vc = counters.vip(w.vip);
                let p = &w.parsed;
                let kind = p.kind;
                // Fragments bypass the flow table: every fragment of a datagram (ports 0, an
                // address-only hash) goes where Maglev says, whatever order they arrive in.
                let fragment = matches!(kind, Kind::FirstFragment | Kind::LaterFragment);
                let existing = found[j]
                    .filter(|_| !fragment)
                    .filter(|&r| flow_serves(tables, r, kind));
                // The stable hash is needed only to choose a server and for GRE's outer source.
                let hash = || stable_hash(&p.tuple, vip.src_ip_sticky);
                let slot = match existing {
                    Some(r) => AsSlot(r.slot),
                    None => {
                        if !matches!(kind, Kind::Syn | Kind::IcmpError)
                            && !fragment
                            && p.tuple.protocol == packet::headers::proto::TCP
                        {
                            if let Some(c) = vc {
                                c.nonsyn_misses.add(1);
                            }
                        }
                        let Some(slot) = tables.choose(w.vip, hash()) else {
                            if let Some(c) = vc {
                                c.no_server.add(1);
                            }
                            let meta = cx.pool.meta_mut(b);
                            meta.error = cx.error_base + LbError::NoServer.id();
                            nexts[i] = LbNext::Drop.id();
                            continue;
                        };
                        if kind == Kind::IcmpError || fragment {
                            // An error about a flow this worker does not know, or a fragment:
                            // follow Maglev, create no flow.
                        } else {
                            let gen = tables.as_entry(slot).gen;
                            let v = AsRef { slot: slot.0, gen };
                            let class = flowtable::class_of(p.tuple.protocol);
                            match flows.insert(hashes[j], v, class, now) {
                                Insert::Full => {
                                    if let Some(c) = vc {
                                        c.table_full.add(1);
                                    }
                                }
                                Insert::New | Insert::Replaced => {}
                            }
                            if let Some(c) = vc {
                                c.new_flows.add(1);
                            }
                            if let Some(c) = counters.slot(slot) {
                                c.new_flows.add(1);
                            }
                        }
                        slot
                    }
                };
                if cx.pool.meta(b).has_offload() {
                    // Segments come back here; the flow (just made or found) takes them.
                    nexts[i] = finish_offload(offload, emitter, cx, start + i, b);
                    if nexts[i] != LbNext::Lb.id() {
                        continue;
                    }
                }
                let server = tables.as_entry(slot).addr16;
                let len = p.len as u64;
                let (meta, buf) = cx.pool.slot_mut(b);
                let result = wrap::wrap(tables, vip, meta, buf, p, server, *mtu, hash);
                if let (Encap::Nat4 { target_port } | Encap::Nat6 { target_port }, Ok(())) =
                    (vip.encap, result)
                {
                    // The reply server:target_port -> client comes back to this VIP: its
                    // reverse entry is written when the flow starts (a new flow-table entry,
                    // or a SYN); replies refresh it. Not per packet: it is a second random
                    // table access (it made NAT ~3x the cost of L3DSR).
                    let starts = existing.is_none() || kind == Kind::Syn;
                    if starts && kind != Kind::IcmpError && !fragment {
                        let mut reply = p.tuple.reversed();
                        reply.src = server;
                        reply.src_port = if p.tuple.src_port == 0 && p.tuple.dst_port == 0 {
                            0
                        } else {
                            target_port
                        };
                        let h = nat.hash(&flowtable::reverse_key(&reply));
                        let v = NatReverse {
                            vip: w.vip.0,
                            addr: p.tuple.dst,
                            port: p.tuple.dst_port,
                        };
                        nat.prefetch_for_insert(h);
                        nat_pending.push((h, v, flowtable::class_of(reply.protocol)));
                    }
                }
                match result {
                    Ok(()) => {
                        if matches!(vip.encap, Encap::Gre4 | Encap::Gre6) {
                            meta.flags |= FLAG_LOCAL_ORIGIN;
                        }
                        nexts[i] = lookup_next(meta.flags & FLAG_IP6 != 0);
                        count_sent(counters, &mut vip_run, w.vip, slot, len);
                        if let Some(c) = vc {
                            match kind {
                                Kind::FirstFragment | Kind::LaterFragment => c.fragments.add(1),
                                Kind::IcmpError => c.icmp_errors.add(1),
                                _ => {}
                            }
                        }
                    }
                    Err(EncapError::TooBig { mtu, signal: true }) => {
                        if let Some(c) = vc {
                            c.too_big.add(1);
                        }
                        if p.tuple.ip6 {
                            meta.next_scratch = icmp_request(2, 0, mtu);
                            nexts[i] = LbNext::Ip6IcmpError.id();
                        } else {
                            meta.next_scratch = icmp_request(3, 4, mtu);
                            nexts[i] = LbNext::Ip4IcmpError.id();
                        }
                    }
                    Err(EncapError::TooBig { .. }) => {
                        // IPv4 without DF, too big for a GRE tunnel: sent as inner fragments.
                        let frags = wrap::wrap_fragments(
                            tables,
                            vip,
                            counters,
                            cx.pool,
                            emitter,
                            start + i,
                            b,
                            p,
                            server,
                            *mtu,
                            hash,
                        );
                        match frags {
                            Ok(next) => {
                                nexts[i] = next;
                                count_sent(counters, &mut vip_run, w.vip, slot, len);
                            }
                            Err(why) => {
                                if matches!(why, LbError::Malformed) {
                                    counters.malformed.add(1);
                                } else if let Some(c) = vc {
                                    c.too_big.add(1);
                                }
                                cx.pool.meta_mut(b).error = cx.error_base + why.id();
                                nexts[i] = LbNext::Drop.id();
                            }
                        }
                    }
                    Err(_) => {
                        meta.error = cx.error_base + LbError::EncapFailed.id();
                        nexts[i] = LbNext::Drop.id();
                    }
                }
            }
        }
        if let Some((id, packets, bytes)) = vip_run {
            add_vip_traffic(counters, id, packets, bytes);
        }
        for (h, v, class) in nat_pending.drain(..) {
            nat.insert(h, v, class, now);
        }
        // Bounded upkeep: reclaim expired and flushed entries so live counts stay true.
        flows.sweep(now, SWEEP_BUDGET, |v| {
            tables.flow_still_valid(AsSlot(v.slot), v.gen)
        });
        nat.sweep(now, SWEEP_BUDGET / 4, |_| true);
        if now.wrapping_sub(*last_publish_s) >= PUBLISH_EVERY_S {
            *last_publish_s = now;
            publish_live(flows, counters, tables);
        }
        mark_sent(cx.pool, whole_frame, whole_nexts);
        uniform(whole_nexts)
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "lb: length {} l3 {} flags {:#x} -> {}",
            m.length, m.l3_offset, m.flags, m.next_scratch
        )
    }
}

/// The current run of packets to one VIP in a vector: its id, packets and bytes.
type VipRun = Option<(VipId, u64, u64)>;

/// Whether a flow-table entry still sends a packet of `kind` to its server: a TCP SYN only to
/// an active server with weight (else it chooses again), any other packet while the slot
/// holds the same server.
#[inline(always)]
fn flow_serves(tables: &LbTables, r: AsRef, kind: Kind) -> bool {
    if kind == Kind::Syn {
        tables.usable_for_syn(AsSlot(r.slot), r.gen)
    } else {
        tables.flow_still_valid(AsSlot(r.slot), r.gen)
    }
}

/// Count a packet of `len` bytes sent for VIP `vip` to server `slot`. A vector's packets
/// mostly go to one VIP: its packets and bytes are summed over the run and added once.
#[inline(always)]
fn count_sent(counters: &LbWorkerCounters, run: &mut VipRun, vip: VipId, slot: AsSlot, len: u64) {
    if let Some(c) = counters.slot(slot) {
        c.packets.add(1);
        c.bytes.add(len);
    }
    match run {
        Some((id, packets, bytes)) if *id == vip => {
            *packets += 1;
            *bytes += len;
        }
        run => {
            if let Some((id, packets, bytes)) = run.take() {
                add_vip_traffic(counters, id, packets, bytes);
            }
            *run = Some((vip, 1, len));
        }
    }
}

/// Count `packets` and `bytes` sent to a server for VIP `id`.
#[inline]
fn add_vip_traffic(counters: &LbWorkerCounters, id: VipId, packets: u64, bytes: u64) {
    if let Some(c) = counters.vip(id) {
        c.packets.add(packets);
        c.bytes.add(bytes);
    }
}

/// Finish in software what the sender of packet `b` (index `i` of the frame) left undone:
/// its next index. A super-packet is replaced by its segments, emitted back to this node
/// (`NEXT_CONSUMED`); a partial checksum is finished in place (`LbNext::Lb` means: go on with
/// it); what cannot be done is dropped with its reason. Cold: only local guests send these.
#[cold]
fn finish_offload(
    offload: &mut SoftwareOffload,
    emitter: &mut Emitter,
    cx: &mut NodeContext<'_>,
    i: usize,
    b: u32,
) -> u16 {
    // The encapsulations keep jumbo buffers; they take no offload.
    let caps = PortCaps {
        jumbo: true,
        ..PortCaps::default()
    };
    let to = Replace {
        emitter,
        after: i,
        next: LbNext::Lb.id(),
    };
    match offload.prepare(cx.pool, b, caps, to) {
        Ok(Fate::AsIs) => LbNext::Lb.id(),
        Ok(Fate::Replaced) => NEXT_CONSUMED,
        Err(why) => {
            let reason = match why {
                OffloadDrop::Malformed | OffloadDrop::TooBig => LbError::BadOffload,
                OffloadDrop::NoBuffer => LbError::NoOffloadBuffer,
                OffloadDrop::QueueFull => LbError::OffloadQueueFull,
            };
            cx.pool.meta_mut(b).error = cx.error_base + reason.id();
            LbNext::Drop.id()
        }
    }
}

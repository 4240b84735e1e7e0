//! `l2-bridge`: 802.1Q bridge domains with MAC learning, aging and flooding. A port belongs to
//! at most one bridge domain, as an access port (untagged frames, VLAN `pvid`) or a trunk port
//! (802.1Q-tagged frames of its allowed VLANs, optionally a native VLAN carried untagged).
//! Learning and flooding are per (domain, VLAN). Known unicast goes to its learned port; unknown
//! unicast, broadcast and multicast are flooded to every other port of the (domain, VLAN): the
//! original buffer goes to the first port, copies to the others through the node's `Emitter`
//! (the dispatcher enqueues each copy right after its original). Each frame leaves tagged or
//! untagged as its egress port wants (tag pushed into the headroom or popped in place).
//!
//! The node owns its MAC table (one per worker, no lock): a `FixedTable` allocated at
//! construction and bounded by `max_macs`; when full, an insert first sweeps `EVICT_SCAN` slots
//! for expired entries, then new MACs are refused (counted) and their frames still forwarded.
//! Entries age out after `age_seconds` (changed live): checked lazily on every hit and
//! reclaimed by a sweep of `SWEEP_PER_CALL` slots per call; nothing ever scans the whole table
//! in one call.
//!
//! For `show bridge` the worker copies its table into a snapshot `SNAPSHOT_SLOTS_PER_CALL` slots
//! per call, once every `snapshot_interval_ms`, and publishes it under a mutex it only
//! `try_lock`s (never waits). A worker without bridge traffic does not run the node, so its
//! snapshot is as old as `MacSnapshot::taken_unix_ms` says. It sets `meta.tx_port`, `meta.vlan`
//! (the bridge VLAN), keeps `meta.l3_offset` right across a tag push/pop, and for a flooded
//! frame sets `meta.next_scratch` to the number of ports it went to (0 for known unicast; read
//! by its trace). It never parses past the 802.1Q tag and never allocates, locks or makes a
//! syscall per packet.

use crate::fixed_table::{FixedTable, TableKey};
use crate::names;
use graph::{Counter, Dispatch, Emitter, Node, NodeContext};
use packet::headers::{be16, eth, format_mac, put16, Mac};
use packet::meta::BufferMeta;
use packet::{BufferPool, VECTOR_SIZE};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The node's name.
pub const NAME: &str = "l2-bridge";
/// Default MAC age.
pub const DEFAULT_AGE_SECONDS: u32 = 300;
/// Default MAC table bound (per worker).
pub const DEFAULT_MAX_MACS: usize = 65536;
/// Default number of flood copies one call can emit (four full vectors).
pub const DEFAULT_FLOOD_QUEUE: usize = 4 * VECTOR_SIZE;
/// Default time between two `show bridge` snapshots.
pub const DEFAULT_SNAPSHOT_INTERVAL_MS: u64 = 1000;
/// Table slots the aging sweep examines per call.
pub const SWEEP_PER_CALL: usize = 16;
/// Table slots copied into the snapshot being built per call.
pub const SNAPSHOT_SLOTS_PER_CALL: usize = 1024;
/// Largest `max_macs` accepted.
pub const MAX_MAX_MACS: usize = 1 << 24;

/// How a port takes part in its bridge domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BridgePortMode {
    /// Untagged frames (and priority-tagged ones, VID 0, or tagged with `pvid`) are in VLAN
    /// `pvid`; frames leave untagged.
    Access {
        /// The port's VLAN (1..=4094).
        pvid: u16,
    },
    /// 802.1Q-tagged frames of the `allowed` VLANs; they leave tagged with their VID. With a
    /// `native` VLAN, untagged frames belong to it and its frames leave untagged.
    Trunk {
        /// VLANs carried tagged (1..=4094).
        allowed: Vec<u16>,
        /// VLAN carried untagged, if any (also accepted tagged).
        native: Option<u16>,
    },
}

/// One port of a bridge domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgePortConfig {
    /// Port id (as in `meta.rx_port`/`tx_port`).
    pub port: u16,
    /// Access or trunk.
    pub mode: BridgePortMode,
}

/// One bridge domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeDomainConfig {
    /// Domain id (as shown by `show bridge`).
    pub id: u32,
    /// Its ports (a port is in at most one domain).
    pub ports: Vec<BridgePortConfig>,
}

/// Everything `l2-bridge` needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    /// The bridge domains.
    pub domains: Vec<BridgeDomainConfig>,
    /// MAC table bound per worker (0: learn nothing, flood everything).
    pub max_macs: usize,
    /// Seconds after which an unrefreshed MAC is forgotten (0: never).
    pub age_seconds: u32,
    /// Flood copies one call (up to 256 frames) can emit; more are counted
    /// (`flood-queue-full`) and not sent.
    pub flood_queue: usize,
    /// Time between two `show bridge` snapshots.
    pub snapshot_interval_ms: u64,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            domains: Vec::new(),
            max_macs: DEFAULT_MAX_MACS,
            age_seconds: DEFAULT_AGE_SECONDS,
            flood_queue: DEFAULT_FLOOD_QUEUE,
            snapshot_interval_ms: DEFAULT_SNAPSHOT_INTERVAL_MS,
        }
    }
}

/// A bridge configuration that cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeError(pub String);

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bridge: {}", self.0)
    }
}

impl std::error::Error for BridgeError {}

/// One learned MAC, as published for `show bridge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacEntry {
    /// Bridge domain id.
    pub domain: u32,
    /// VLAN.
    pub vlan: u16,
    /// The MAC.
    pub mac: Mac,
    /// Port it was last seen on.
    pub port: u16,
    /// Seconds since it was last seen (when the snapshot copied it).
    pub age_seconds: u32,
}

/// A worker's MAC table as last published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MacSnapshot {
    /// Snapshots published so far (0: none yet).
    pub generation: u64,
    /// Wall-clock time of publication, milliseconds since the Unix epoch.
    pub taken_unix_ms: u64,
    /// Entries, sorted by (domain, vlan, mac), each MAC once.
    pub entries: Vec<MacEntry>,
}

/// Plain copy of a worker's bridge counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeCounts {
    /// MACs learned (new entries, including re-learned expired ones).
    pub learned: u64,
    /// Entries that aged out.
    pub aged: u64,
    /// Entries whose port changed (a MAC seen on another port).
    pub moves: u64,
    /// New MACs not learned because the table was full (their frames were still forwarded).
    pub refused: u64,
    /// Frames flooded (unknown unicast, broadcast, multicast).
    pub flooded: u64,
    /// Copies made for flooding.
    pub flood_copies: u64,
    /// Entries in the table now.
    pub macs: u64,
}

impl std::ops::AddAssign for BridgeCounts {
    fn add_assign(&mut self, o: BridgeCounts) {
        self.learned += o.learned;
        self.aged += o.aged;
        self.moves += o.moves;
        self.refused += o.refused;
        self.flooded += o.flooded;
        self.flood_copies += o.flood_copies;
        self.macs += o.macs;
    }
}

/// A worker's bridge counters (single writer: the worker) and its published MAC snapshot,
/// shared with the control thread.
#[derive(Debug, Default)]
pub struct BridgeStats {
    /// See `BridgeCounts::learned`.
    pub learned: Counter,
    /// See `BridgeCounts::aged`.
    pub aged: Counter,
    /// See `BridgeCounts::moves`.
    pub moves: Counter,
    /// See `BridgeCounts::refused`.
    pub refused: Counter,
    /// See `BridgeCounts::flooded`.
    pub flooded: Counter,
    /// See `BridgeCounts::flood_copies`.
    pub flood_copies: Counter,
    /// Entries in the table (a gauge the worker stores).
    pub macs: AtomicU64,
    snapshot: Mutex<MacSnapshot>,
}

impl BridgeStats {
    /// The counters now.
    pub fn counts(&self) -> BridgeCounts {
        BridgeCounts {
            learned: self.learned.get(),
            aged: self.aged.get(),
            moves: self.moves.get(),
            refused: self.refused.get(),
            flooded: self.flooded.get(),
            flood_copies: self.flood_copies.get(),
            macs: self.macs.load(Ordering::Relaxed),
        }
    }

    /// The last published snapshot, sorted by (domain, vlan, mac), each MAC once (a snapshot is
    /// copied over several calls while the table changes, so a MAC may have been copied twice).
    /// Cold path: copies the entries while holding the lock the worker only `try_lock`s.
    pub fn snapshot(&self) -> MacSnapshot {
        let mut s = match self.snapshot.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        s.entries
            .sort_unstable_by_key(|e| (e.domain, e.vlan, e.mac, e.age_seconds));
        s.entries.dedup_by_key(|e| (e.domain, e.vlan, e.mac));
        s
    }
}

/// A clock tests (and simulations) set by hand; `l2-bridge` then ignores the graph's TSC.
/// Ticks are TSC ticks at the graph's `tsc_hz`.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `ticks`.
    pub fn new(ticks: u64) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(ticks)))
    }
    /// Now.
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
    /// Move to `ticks`.
    pub fn set(&self, ticks: u64) {
        self.0.store(ticks, Ordering::Relaxed);
    }
    /// Move forward by `ticks`.
    pub fn advance(&self, ticks: u64) {
        self.0.fetch_add(ticks, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// The MAC table.

/// Key of a vacant slot: bridge index 0xffff with the broadcast MAC, never learned.
const EMPTY: u64 = u64::MAX;
/// "No bridge" / "no VLAN" marker.
const NONE: u16 = u16::MAX;

#[derive(Clone, Copy, Debug)]
struct MacSlot {
    /// (bridge index << 48) | MAC (`EMPTY` in a vacant slot).
    key: u64,
    /// TSC when last seen.
    seen: u64,
    port: u16,
}

const EMPTY_SLOT: MacSlot = MacSlot {
    key: EMPTY,
    seen: 0,
    port: 0,
};

#[inline(always)]
fn mac_key(bd: u16, mac: u64) -> u64 {
    (bd as u64) << 48 | mac
}

#[inline(always)]
fn mac48(d: &[u8], at: usize) -> u64 {
    u64::from_be_bytes([
        0,
        0,
        d[at],
        d[at + 1],
        d[at + 2],
        d[at + 3],
        d[at + 4],
        d[at + 5],
    ])
}

#[inline(always)]
fn mac_bytes(mac: u64) -> Mac {
    let b = mac.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The I/G (group) bit of a MAC in `mac48` form.
const GROUP_BIT: u64 = 1 << 40;

/// murmur3's 64-bit finalizer: MACs differ mostly in their last bytes.
#[inline(always)]
fn hash(key: u64) -> usize {
    let mut k = key;
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k as usize
}

/// A MAC table key: (bridge index << 48) | MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MacKey(u64);

impl TableKey for MacKey {
    #[inline(always)]
    fn table_hash(&self) -> u64 {
        hash(self.0) as u64
    }
}

/// Slots an insert into a full table sweeps for expired entries before it is refused.
const EVICT_SCAN: usize = 64;

/// The learned MACs: a `FixedTable` of at most `max` entries, aged lazily on every hit and by a
/// bounded sweep.
pub(crate) struct MacTable {
    map: FixedTable<MacKey, MacSlot>,
    max: usize,
    cursor: usize,
}

impl MacTable {
    pub(crate) fn new(max: usize) -> MacTable {
        MacTable {
            map: FixedTable::new(max.max(1), MacKey(EMPTY), EMPTY_SLOT),
            max,
            cursor: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[inline(always)]
    fn expired(seen: u64, now: u64, age: u64) -> bool {
        age != 0 && now.saturating_sub(seen) > age
    }

    /// Record that `key` was seen on `port` at `now`.
    #[inline]
    pub(crate) fn learn(&mut self, key: u64, port: u16, now: u64, age: u64, st: &BridgeStats) {
        if let Some(s) = self.map.find(&MacKey(key)) {
            if let Some(e) = self.map.values_mut().get_mut(s as usize) {
                if e.port != port || e.seen != now {
                    if Self::expired(e.seen, now, age) {
                        st.aged.add(1);
                        st.learned.add(1);
                    } else if e.port != port {
                        st.moves.add(1);
                    }
                    e.port = port;
                    e.seen = now;
                }
            }
            return;
        }
        if self.map.len() >= self.max || self.map.is_full() {
            // Full: make room from entries that expired, if there are some nearby.
            self.sweep(now, age, EVICT_SCAN, st);
        }
        let slot = if self.map.len() < self.max {
            self.map.insert(MacKey(key))
        } else {
            None
        };
        match slot.and_then(|s| self.map.values_mut().get_mut(s as usize)) {
            Some(e) => {
                *e = MacSlot {
                    key,
                    seen: now,
                    port,
                };
                st.learned.add(1);
            }
            None => st.refused.add(1),
        }
    }

    /// The port `key` was last seen on, unless unknown or expired (then it is removed).
    #[inline]
    pub(crate) fn lookup(&mut self, key: u64, now: u64, age: u64, st: &BridgeStats) -> Option<u16> {
        let s = self.map.find(&MacKey(key))?;
        let e = *self.map.values().get(s as usize)?;
        if Self::expired(e.seen, now, age) {
            self.map.remove(s);
            st.aged.add(1);
            return None;
        }
        Some(e.port)
    }

    /// Examine `budget` slots from the sweep cursor on, removing expired entries.
    pub(crate) fn sweep(&mut self, now: u64, age: u64, budget: usize, st: &BridgeStats) {
        if age == 0 || self.map.is_empty() {
            return;
        }
        let cap = self.map.capacity();
        for _ in 0..budget.min(cap) {
            let s = self.cursor;
            self.cursor = (self.cursor + 1) % cap;
            let expired = self.map.is_live(s as u32)
                && self
                    .map
                    .values()
                    .get(s)
                    .is_some_and(|e| Self::expired(e.seen, now, age));
            if expired {
                self.map.remove(s as u32);
                st.aged.add(1);
            }
        }
    }

    fn capacity(&self) -> usize {
        self.map.capacity()
    }

    /// The entry in slot `s`, if one lives there.
    fn slot(&self, s: usize) -> Option<MacSlot> {
        if self.map.is_live(s as u32) {
            self.map.values().get(s).copied()
        } else {
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The node.

/// A port as the fast path sees it.
struct PortInfo {
    /// Bridge (domain, VLAN) index of untagged and priority-tagged frames, or `NONE`.
    untagged_bd: u16,
    /// Access port: its pvid (tagged frames must carry it). Trunk: `NONE`.
    pvid: u16,
    /// Trunk: bridge index by VID (`NONE`: not allowed). Access: empty.
    vlan_bd: Box<[u16]>,
    /// The VLAN whose frames leave this port untagged (`NONE`: all leave tagged).
    untagged_vlan: u16,
}

#[derive(Clone, Copy, Debug)]
struct FloodPort {
    port: u16,
    tagged: bool,
}

/// One (domain, VLAN).
struct Bd {
    domain: u32,
    vlan: u16,
    flood: Box<[FloodPort]>,
}

struct SnapshotState {
    building: bool,
    cursor: usize,
    next_at: u64,
}

graph::node_indices! {
    /// `l2-bridge`'s next nodes.
    enum BridgeNext {
        /// To `INTERFACE_OUTPUT`.
        Output = names::INTERFACE_OUTPUT,
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
    }
}

graph::node_indices! {
    /// Drop reasons. `no-buffer-for-flood` and `flood-queue-full` count copies that were
    pub enum BridgeDrop {
        /// Counted as `no-domain`.
        NoDomain = "no-domain",
        /// Counted as `vlan-not-allowed`.
        VlanNotAllowed = "vlan-not-allowed",
        /// Counted as `same-port`.
        SamePort = "same-port",
        /// Counted as `no-buffer-for-flood`.
        NoBufferForFlood = "no-buffer-for-flood",
        /// Counted as `flood-queue-full`.
        FloodQueueFull = "flood-queue-full",
        /// Counted as `runt`.
        Runt = "runt",
        /// Counted as `invalid-src-mac`.
        InvalidSrcMac = "invalid-src-mac",
        /// Counted as `no-other-port`.
        NoOtherPort = "no-other-port",
        /// Counted as `no-headroom`.
        NoHeadroom = "no-headroom",
    }
}

/// Drop reasons, by index. `no-buffer-for-flood` and `flood-queue-full` count copies that were
/// not made (the original still goes out); the others count dropped frames.
pub const ERRORS: &[&str] = BridgeDrop::NAMES;

/// The `l2-bridge` node (one per worker).
pub struct L2Bridge {
    ports: Box<[Option<PortInfo>]>,
    bds: Box<[Bd]>,
    table: MacTable,
    stats: Arc<BridgeStats>,
    emitter: Emitter,
    /// The frame being flooded, untagged, copied once per flooded frame.
    scratch: Vec<u8>,
    /// Seconds a MAC not seen again is kept (0: forever); shared, changed live.
    age_seconds: Arc<AtomicU32>,
    snapshot_interval_ms: u64,
    snap: SnapshotState,
    shadow: Vec<MacEntry>,
    clock: Option<ManualClock>,
}

fn check_vlan(v: u16, what: &str) -> Result<(), BridgeError> {
    if (1..=4094).contains(&v) {
        Ok(())
    } else {
        Err(BridgeError(format!(
            "{what} VLAN {v} is out of range; accepted: 1..=4094"
        )))
    }
}

impl L2Bridge {
    /// Build the node for one worker: validates `config`, allocates the MAC table, the flood
    /// queue and the snapshot buffers (nothing is allocated afterwards).
    pub fn new(config: &BridgeConfig) -> Result<L2Bridge, BridgeError> {
        if config.max_macs > MAX_MAX_MACS {
            return Err(BridgeError(format!(
                "max_macs = {} is too large; accepted: 0..={MAX_MAX_MACS}",
                config.max_macs
            )));
        }
        if config.flood_queue == 0 {
            return Err(BridgeError(
                "flood_queue = 0 would never flood; accepted: at least 1".into(),
            ));
        }
        let max_port = config
            .domains
            .iter()
            .flat_map(|d| d.ports.iter().map(|p| p.port))
            .max();
        let mut ports: Vec<Option<PortInfo>> = match max_port {
            Some(m) => (0..=m as usize).map(|_| None).collect(),
            None => Vec::new(),
        };
        let mut bds: Vec<Bd> = Vec::new();
        let mut flood: Vec<Vec<FloodPort>> = Vec::new();
        let mut domain_ids = Vec::new();
        for d in &config.domains {
            if domain_ids.contains(&d.id) {
                return Err(BridgeError(format!(
                    "bridge domain {} is defined twice",
                    d.id
                )));
            }
            domain_ids.push(d.id);
            // VLAN -> bridge index within this domain.
            let mut bd_of = vec![NONE; 4096];
            let mut bd = |vlan: u16, bds: &mut Vec<Bd>, flood: &mut Vec<Vec<FloodPort>>| {
                if bd_of[vlan as usize] == NONE {
                    bd_of[vlan as usize] = bds.len() as u16;
                    bds.push(Bd {
                        domain: d.id,
                        vlan,
                        flood: Box::new([]),
                    });
                    flood.push(Vec::new());
                }
                bd_of[vlan as usize]
            };
            for p in &d.ports {
                if ports[p.port as usize].is_some() {
                    return Err(BridgeError(format!(
                        "port {} is listed twice (a port is in at most one bridge domain)",
                        p.port
                    )));
                }
                let info = match &p.mode {
                    BridgePortMode::Access { pvid } => {
                        check_vlan(*pvid, "access port's")?;
                        let b = bd(*pvid, &mut bds, &mut flood);
                        flood[b as usize].push(FloodPort {
                            port: p.port,
                            tagged: false,
                        });
                        PortInfo {
                            untagged_bd: b,
                            pvid: *pvid,
                            vlan_bd: Box::new([]),
                            untagged_vlan: *pvid,
                        }
                    }
                    BridgePortMode::Trunk { allowed, native } => {
                        if allowed.is_empty() && native.is_none() {
                            return Err(BridgeError(format!(
                                "trunk port {} carries no VLAN (no allowed VLANs, no native)",
                                p.port
                            )));
                        }
                        let mut vlan_bd = vec![NONE; 4096].into_boxed_slice();
                        for &v in allowed.iter().chain(native.iter()) {
                            check_vlan(v, "trunk port's")?;
                            if vlan_bd[v as usize] != NONE {
                                continue;
                            }
                            let b = bd(v, &mut bds, &mut flood);
                            vlan_bd[v as usize] = b;
                            flood[b as usize].push(FloodPort {
                                port: p.port,
                                tagged: Some(v) != *native,
                            });
                        }
                        PortInfo {
                            untagged_bd: native.map_or(NONE, |v| vlan_bd[v as usize]),
                            pvid: NONE,
                            vlan_bd,
                            untagged_vlan: native.unwrap_or(NONE),
                        }
                    }
                };
                ports[p.port as usize] = Some(info);
            }
            if bds.len() >= NONE as usize {
                return Err(BridgeError(format!(
                    "{} (domain, VLAN) pairs is too many; accepted: at most {}",
                    bds.len(),
                    NONE - 1
                )));
            }
        }
        for (b, f) in bds.iter_mut().zip(flood) {
            b.flood = f.into_boxed_slice();
        }
        let stats = Arc::new(BridgeStats::default());
        if let Ok(mut s) = stats.snapshot.lock() {
            s.entries.reserve_exact(config.max_macs);
        }
        Ok(L2Bridge {
            ports: ports.into_boxed_slice(),
            bds: bds.into_boxed_slice(),
            table: MacTable::new(config.max_macs),
            stats,
            emitter: Emitter::new(config.flood_queue),
            // Room for the largest frame (a super-packet in a jumbo buffer): never regrown.
            scratch: Vec::with_capacity(usize::from(u16::MAX) + 2 * eth::TAG_LEN),
            age_seconds: Arc::new(AtomicU32::new(config.age_seconds)),
            snapshot_interval_ms: config.snapshot_interval_ms,
            snap: SnapshotState {
                building: false,
                cursor: 0,
                next_at: 0,
            },
            shadow: Vec::with_capacity(config.max_macs),
            clock: None,
        })
    }

    /// Use `clock` instead of the graph's TSC (tests, simulations).
    pub fn with_clock(mut self, clock: ManualClock) -> L2Bridge {
        self.clock = Some(clock);
        self
    }

    /// The counters and snapshot shared with the control thread.
    pub fn stats(&self) -> Arc<BridgeStats> {
        self.stats.clone()
    }

    /// Take the aging time (seconds, 0: never) from `age_seconds` from now on: shared by every
    /// worker's bridge and changed live; read once per vector.
    pub fn with_aging(mut self, age_seconds: Arc<AtomicU32>) -> L2Bridge {
        self.age_seconds = age_seconds;
        self
    }

    /// One bounded step of building the `show bridge` snapshot (and publishing it when done).
    fn snapshot_step(&mut self, now: u64, hz: u64) {
        if !self.snap.building {
            if now < self.snap.next_at {
                return;
            }
            self.snap.building = true;
            self.snap.cursor = 0;
            self.shadow.clear();
        }
        let cap = self.table.capacity();
        let end = (self.snap.cursor + SNAPSHOT_SLOTS_PER_CALL).min(cap);
        for i in self.snap.cursor..end {
            let Some(s) = self.table.slot(i) else {
                continue;
            };
            if self.shadow.len() == self.shadow.capacity() {
                continue;
            }
            let bd = &self.bds[(s.key >> 48) as usize];
            self.shadow.push(MacEntry {
                domain: bd.domain,
                vlan: bd.vlan,
                mac: mac_bytes(s.key & 0xffff_ffff_ffff),
                port: s.port,
                age_seconds: (now.saturating_sub(s.seen) / hz).min(u32::MAX as u64) as u32,
            });
        }
        self.snap.cursor = end;
        if end < cap {
            return;
        }
        // Done: publish unless the control thread holds the lock (then retry next call).
        if let Ok(mut pub_) = self.stats.snapshot.try_lock() {
            std::mem::swap(&mut pub_.entries, &mut self.shadow);
            pub_.generation += 1;
            pub_.taken_unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            self.snap.building = false;
            let interval = (self.snapshot_interval_ms as u128 * hz as u128 / 1000) as u64;
            self.snap.next_at = now.saturating_add(interval);
        }
    }
}

#[inline(always)]
fn count(cx: &NodeContext<'_>, reason: u16) {
    if let Some(c) = cx.errors.get(cx.error_id(reason) as usize) {
        c.add(1);
    }
}

/// Make the frame in `b` leave tagged (`out_tagged`, with TCI `tci`) or untagged; `in_tagged`
/// says whether it carries an 802.1Q tag now. False when there is no headroom for a tag.
#[inline(always)]
fn retag(pool: &mut BufferPool, b: u32, in_tagged: bool, out_tagged: bool, tci: u16) -> bool {
    match (in_tagged, out_tagged) {
        (true, true) => {
            let (_, d) = pool.packet_mut(b);
            put16(d, eth::TYPE + 2, tci);
        }
        (true, false) => {
            let (m, d) = pool.packet_mut(b);
            d.copy_within(0..eth::TYPE, eth::TAG_LEN);
            m.l3_offset = m.l3_offset.saturating_sub(eth::TAG_LEN as u16);
            pool.pull_front(b, eth::TAG_LEN as u16);
        }
        (false, true) => {
            if !pool.push_front(b, eth::TAG_LEN as u16) {
                return false;
            }
            let (m, d) = pool.packet_mut(b);
            d.copy_within(eth::TAG_LEN..eth::TAG_LEN + eth::TYPE, 0);
            put16(d, eth::TYPE, eth::TYPE_VLAN);
            put16(d, eth::TYPE + 2, tci);
            m.l3_offset += eth::TAG_LEN as u16;
        }
        (false, false) => {}
    }
    true
}

impl Node for L2Bridge {
    fn name(&self) -> &str {
        NAME
    }

    fn next_nodes(&self) -> Vec<String> {
        BridgeNext::names()
    }

    fn error_reasons(&self) -> Vec<String> {
        BridgeDrop::names()
    }

    fn emitter(&mut self) -> Option<&mut Emitter> {
        Some(&mut self.emitter)
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let now = self.clock.as_ref().map_or(cx.now_tsc, ManualClock::now);
        let hz = cx.tsc_hz.max(1);
        let age = u64::from(self.age_seconds.load(Ordering::Relaxed)).saturating_mul(hz);
        let base = cx.error_base;
        let mut all_out = true;
        let L2Bridge {
            ports,
            bds,
            table,
            stats,
            emitter,
            scratch,
            ..
        } = self;
        for (i, &b) in frame.iter().enumerate() {
            if let Some(&next) = frame.get(i + 4) {
                cx.pool.prefetch(next);
            }
            let rx = cx.pool.meta(b).rx_port;
            let fail = |pool: &mut BufferPool, reason: u16| {
                pool.meta_mut(b).error = base + reason;
                BridgeNext::Drop.id()
            };
            nexts[i] = 'frame: {
                let Some(port) = ports.get(rx as usize).and_then(Option::as_ref) else {
                    break 'frame fail(cx.pool, BridgeDrop::NoDomain.id());
                };
                let d = cx.pool.data(b);
                if d.len() < eth::HEADER_LEN {
                    break 'frame fail(cx.pool, BridgeDrop::Runt.id());
                }
                let tagged = be16(d, eth::TYPE) == eth::TYPE_VLAN;
                if tagged && d.len() < eth::HEADER_LEN + eth::TAG_LEN {
                    break 'frame fail(cx.pool, BridgeDrop::Runt.id());
                }
                let tci = if tagged { be16(d, eth::TYPE + 2) } else { 0 };
                let vid = tci & 0x0fff;
                let bd = if vid == 0 {
                    port.untagged_bd
                } else if port.pvid != NONE {
                    if vid == port.pvid {
                        port.untagged_bd
                    } else {
                        NONE
                    }
                } else {
                    port.vlan_bd[vid as usize]
                };
                if bd == NONE {
                    break 'frame fail(cx.pool, BridgeDrop::VlanNotAllowed.id());
                }
                let src = mac48(d, eth::SRC);
                let dst = mac48(d, eth::DST);
                if src & GROUP_BIT != 0 || src == 0 {
                    break 'frame fail(cx.pool, BridgeDrop::InvalidSrcMac.id());
                }
                table.learn(mac_key(bd, src), rx, now, age, stats);
                let bdi = &bds[bd as usize];
                let vlan = bdi.vlan;
                let out_tci = (tci & 0xf000) | vlan;
                if dst & GROUP_BIT == 0 {
                    if let Some(to) = table.lookup(mac_key(bd, dst), now, age, stats) {
                        if to == rx {
                            break 'frame fail(cx.pool, BridgeDrop::SamePort.id());
                        }
                        // A learned port is a member of the bridge: it has PortInfo.
                        let out_tagged = ports[to as usize]
                            .as_ref()
                            .is_none_or(|p| p.untagged_vlan != vlan);
                        if !retag(cx.pool, b, tagged, out_tagged, out_tci) {
                            break 'frame fail(cx.pool, BridgeDrop::NoHeadroom.id());
                        }
                        let m = cx.pool.meta_mut(b);
                        m.tx_port = to;
                        m.vlan = vlan;
                        m.next_scratch = 0;
                        break 'frame BridgeNext::Output.id();
                    }
                }
                // Flood: the original to the first other port, copies to the rest.
                let mut first: Option<FloodPort> = None;
                let mut copies = 0u64;
                let mut have_scratch = false;
                for &fp in bdi.flood.iter() {
                    if fp.port == rx {
                        continue;
                    }
                    if first.is_none() {
                        first = Some(fp);
                        continue;
                    }
                    if emitter.is_full() {
                        count(cx, BridgeDrop::FloodQueueFull.id());
                        continue;
                    }
                    if !have_scratch {
                        let d = cx.pool.data(b);
                        let rest = eth::TYPE + if tagged { eth::TAG_LEN } else { 0 };
                        scratch.clear();
                        scratch.extend_from_slice(&d[..eth::TYPE]);
                        scratch.extend_from_slice(&d[rest..]);
                        have_scratch = true;
                    }
                    let tag = if fp.tagged { eth::TAG_LEN } else { 0 };
                    let Some(c) = cx.pool.alloc_for(scratch.len() + tag) else {
                        count(cx, BridgeDrop::NoBufferForFlood.id());
                        continue;
                    };
                    let orig: BufferMeta = *cx.pool.meta(b);
                    let headroom = cx.pool.headroom();
                    let (_, slot) = cx.pool.slot_mut(c);
                    let start = headroom - tag;
                    let total = scratch.len() + tag;
                    if start + total > slot.len() {
                        cx.pool.free(c);
                        count(cx, BridgeDrop::NoBufferForFlood.id());
                        continue;
                    }
                    let out = &mut slot[start..start + total];
                    out[..eth::TYPE].copy_from_slice(&scratch[..eth::TYPE]);
                    if fp.tagged {
                        put16(out, eth::TYPE, eth::TYPE_VLAN);
                        put16(out, eth::TYPE + 2, out_tci);
                    }
                    out[eth::TYPE + tag..].copy_from_slice(&scratch[eth::TYPE..]);
                    cx.pool.copy_meta(b, c);
                    let cm = cx.pool.meta_mut(c);
                    cm.data_offset = start as u16;
                    cm.length = total as u16;
                    cm.tx_port = fp.port;
                    cm.vlan = vlan;
                    let l3 = orig.l3_offset as usize + tag;
                    let untag = if tagged { eth::TAG_LEN } else { 0 };
                    cm.l3_offset = l3.saturating_sub(untag) as u16;
                    if orig.has_offload() {
                        // The checksum start counts from the slot: the copy's frame starts
                        // elsewhere and its tag may differ.
                        let l4 = orig.csum_start.wrapping_sub(orig.data_offset) as usize;
                        cm.csum_start = (start + (l4 + tag).saturating_sub(untag)) as u16;
                    }
                    if let Err(c) = emitter.emit(i, BridgeNext::Output.id(), c) {
                        // Unreachable: checked `is_full` above.
                        cx.pool.free(c);
                        count(cx, BridgeDrop::FloodQueueFull.id());
                        continue;
                    }
                    copies += 1;
                }
                let Some(fp) = first else {
                    break 'frame fail(cx.pool, BridgeDrop::NoOtherPort.id());
                };
                stats.flooded.add(1);
                if copies > 0 {
                    stats.flood_copies.add(copies);
                }
                if !retag(cx.pool, b, tagged, fp.tagged, out_tci) {
                    break 'frame fail(cx.pool, BridgeDrop::NoHeadroom.id());
                }
                let m = cx.pool.meta_mut(b);
                m.tx_port = fp.port;
                m.vlan = vlan;
                m.next_scratch = copies as u32 + 1;
                BridgeNext::Output.id()
            };
            all_out &= nexts[i] == BridgeNext::Output.id();
        }
        table.sweep(now, age, SWEEP_PER_CALL, stats);
        self.snapshot_step(now, hz);
        self.stats
            .macs
            .store(self.table.len() as u64, Ordering::Relaxed);
        if all_out {
            Dispatch::AllTo(BridgeNext::Output.id())
        } else {
            Dispatch::PerPacket
        }
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let d = pool.data(buffer);
        let mut dst: Mac = [0; 6];
        let mut src: Mac = [0; 6];
        if d.len() >= eth::HEADER_LEN {
            dst.copy_from_slice(&d[eth::DST..eth::DST + 6]);
            src.copy_from_slice(&d[eth::SRC..eth::SRC + 6]);
        }
        let how = if m.error != 0 {
            format!("dropped (error {})", m.error)
        } else if m.next_scratch > 0 {
            format!("flooded to {} ports (this is the original)", m.next_scratch)
        } else {
            "forwarded".to_string()
        };
        format!(
            "{} -> {} port {} -> port {} vlan {}: {how}",
            format_mac(&src),
            format_mac(&dst),
            m.rx_port,
            m.tx_port,
            m.vlan
        )
    }
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;

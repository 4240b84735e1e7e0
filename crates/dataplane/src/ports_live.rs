//! Ports added to and removed from a running data plane (`PortControl`), as docs/runtime-ports.md
//! plans it: the port's nodes are built on the control thread by its unchanged driver and handed
//! to every worker as a graph edit (its inputs held), the shared tables learn the port, and only
//! then do its addresses (the routes that lead to it) and its inputs go live. A removal takes the
//! routes away first, drains the port's inputs, then retires its nodes, which come back to the
//! control thread to be dropped (closing a socket may wait for the kernel). It owns the live
//! port list and the order of those steps; it never touches packets, and other ports' traffic
//! only waits between two rounds of each worker while an edit is applied.

use crate::build::{lock, BuildError, WorkersShared};
use crate::idle::Doorbell;
use crate::mailbox::{Mailbox, WorkerParts};
use crate::spec::{DataplaneSpec, PortDriver, PortSpec};
use crate::view::{PortView, Published};
use graph::{GraphBuilder, GraphEdit, PortStats};
use nodes::neighbour::NeighbourPort;
use nodes::port_event::{AddedPort, PortEvent};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most ports a data plane has, removed ones included until their id is given again (the
/// shared per-port tables are sized to it at start).
pub const MAX_PORTS: usize = 1024;

/// How long a worker has to take an edit (it checks every 64 rounds, or at once when woken).
const WORKER_TIMEOUT: Duration = Duration::from_secs(2);

/// A removed port's id is given again only after this long: frames naming it may still sit in
/// the rings between workers.
const ID_QUARANTINE: Duration = Duration::from_secs(1);

/// The drivers a port added or removed at run time may have today.
pub const LIVE_DRIVERS: &str =
    "af-packet, memory, af-xdp (with as many queues as workers or more), tap (with one worker)";

/// Whether a port with this driver can be added to and removed from a running data plane
/// (a TAP only with one worker: with more, worker 0 spreads its flows over handoff rings and
/// `rss-dispatch`, which a running data plane does not create yet; for the same reason an
/// AF_XDP port with fewer queues than workers is refused when its nodes are built).
pub fn live_driver(d: &PortDriver, workers: usize) -> bool {
    match d {
        PortDriver::AfPacket { .. } | PortDriver::Memory(_) | PortDriver::AfXdp { .. } => true,
        PortDriver::Tap { .. } => workers <= 1,
        _ => false,
    }
}

/// Why a port was not added or removed; nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PortChangeError(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, PortChangeError> {
    Err(PortChangeError(why.into()))
}

/// What a removal did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemovedPort {
    /// The port's id (given to a later port after a while).
    pub id: u16,
    /// Packets still queued for neighbour resolution on the port, freed.
    pub freed_packets: u64,
}

/// One worker as port changes reach it.
pub(crate) struct WorkerLink {
    /// Where it takes jobs between rounds.
    pub(crate) mailbox: Arc<Mailbox>,
    /// Rung to wake it.
    pub(crate) doorbell: Arc<Doorbell>,
    /// Jumbo buffers in its pool.
    pub(crate) jumbo_capacity: usize,
    /// Its pool as AF_XDP packet memory, or why it cannot be.
    pub(crate) umem: Result<afxdp::Umem, String>,
}

/// The nodes a port has on each worker: (name, is an input).
type PortNodes = Vec<Vec<(String, bool)>>;

struct Live {
    spec: DataplaneSpec,
    /// By port id: when it was removed (None: in use).
    removed: Vec<Option<Instant>>,
    /// By port id: its nodes per worker, for ports added at run time.
    nodes: Vec<Option<PortNodes>>,
}

impl Live {
    /// The ports in use (not removed), with their ids.
    fn in_use(&self) -> impl Iterator<Item = (u16, &PortSpec)> + '_ {
        let removed = &self.removed;
        let ports = self.spec.ports.iter().enumerate();
        ports
            .filter(move |(i, _)| removed[*i].is_none())
            .map(|(i, p)| (i as u16, p))
    }
}

/// Adds and removes ports while the workers run; one change at a time.
pub struct PortControl {
    live: Mutex<Live>,
    shared: Arc<WorkersShared>,
    workers: Vec<WorkerLink>,
    ports: Arc<Published<Vec<PortView>>>,
}

impl std::fmt::Debug for PortControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortControl")
            .field("workers", &self.workers.len())
            .finish()
    }
}

/// What a worker answers for a job.
type Ack = Result<u64, String>;

impl PortControl {
    /// For the workers built from `spec`.
    pub(crate) fn new(
        spec: &DataplaneSpec,
        shared: Arc<WorkersShared>,
        workers: Vec<WorkerLink>,
        ports: Arc<Published<Vec<PortView>>>,
    ) -> PortControl {
        PortControl {
            live: Mutex::new(Live {
                spec: spec.clone(),
                removed: vec![None; spec.ports.len()],
                nodes: vec![None; spec.ports.len()],
            }),
            shared,
            workers,
            ports,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ports in use now, by id.
    pub fn ports(&self) -> Vec<(u16, PortSpec)> {
        let live = self.lock();
        live.in_use().map(|(i, p)| (i, p.clone())).collect()
    }

    /// Post `job(worker index)` to every worker, wake them, and wait for every answer.
    fn on_every_worker(
        &self,
        mut job: impl FnMut(usize) -> Box<dyn FnOnce(&mut WorkerParts<'_>) -> Ack + Send>,
    ) -> Vec<Ack> {
        let (tx, rx) = mpsc::channel::<(usize, Ack)>();
        for (w, h) in self.workers.iter().enumerate() {
            let run = job(w);
            let tx = tx.clone();
            h.mailbox.post(Box::new(move |parts| {
                let _ = tx.send((w, run(parts)));
            }));
            h.doorbell.wake();
        }
        drop(tx);
        let mut acks: Vec<Ack> = (0..self.workers.len())
            .map(|w| {
                Err(format!(
                    "worker {w} did not answer within {WORKER_TIMEOUT:?}"
                ))
            })
            .collect();
        let deadline = Instant::now() + WORKER_TIMEOUT;
        for _ in 0..self.workers.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((w, ack)) => acks[w] = ack,
                Err(_) => break,
            }
        }
        acks
    }

    /// Have every worker apply the edit `make(worker)` gives; the first refusal.
    fn edit_every_worker(&self, mut make: impl FnMut(usize) -> GraphEdit) -> Result<(), String> {
        let acks = self.on_every_worker(|w| {
            let edit = make(w);
            Box::new(move |parts| {
                parts
                    .graph
                    .apply(edit, parts.pool)
                    .map(|_| 0)
                    .map_err(|e| e.to_string())
            })
        });
        acks.into_iter().try_for_each(|a| a.map(|_| ()))
    }

    /// Add `port` (its addresses, MAC and MTU as the config would give them, already checked
    /// as a `[[port]]` table) to the running data plane; returns its id.
    pub fn add(&self, port: PortSpec) -> Result<u16, PortChangeError> {
        let mut live = self.lock();
        check_addable(&live, &port)?;
        let id = free_id(&live)?;
        let name = port.name.clone();
        // A2: the shared tables know the port (no address yet: no route leads to it).
        self.shared
            .routing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add_port(usize::from(id), port.mac, port.mtu)
            .map_err(|e| PortChangeError(e.0))?;
        self.shared
            .policies
            .port_mtus
            .set(usize::from(id), port.mtu);
        self.shared
            .policies
            .port_addrs
            .ensure_len(usize::from(id) + 1);
        set_slot(&mut live, id, port.clone());
        // A3: the port's nodes for every worker, built here by its driver.
        let built = match self.build_nodes(&live, id) {
            Ok(b) => b,
            Err(e) => {
                live.removed[usize::from(id)] = Some(Instant::now());
                return refuse(e.to_string());
            }
        };
        let nodes: PortNodes = built.iter().map(|b| b.nodes.clone()).collect();
        let view = PortView {
            name: name.clone(),
            driver: built[0].driver.to_string(),
            detail: built[0].detail.clone(),
            mac: port.mac,
            stats: built.iter().map(|b| b.stats.clone()).collect(),
            driver_counters: built.iter().find_map(|b| b.counters.clone()),
        };
        // A4: every worker appends the nodes (inputs held) and learns the port.
        let mut edits: Vec<Option<GraphEdit>> = built.into_iter().map(|b| Some(b.edit)).collect();
        let neighbour = NeighbourPort {
            mac: port.mac,
            mtu: port.mtu,
            ip4: Vec::new(),
            ip6: Vec::new(),
        };
        // An edit a worker refuses comes back here to be dropped, as retired nodes do.
        let refused: Arc<Mutex<Vec<GraphEdit>>> = Arc::default();
        let acks = self.on_every_worker(|w| {
            let edit = edits[w].take();
            let neighbour = neighbour.clone();
            let refused = refused.clone();
            Box::new(move |parts| {
                let edit = edit.ok_or("no edit")?;
                if let Err(e) = parts.graph.check_edit(&edit) {
                    refused.lock().unwrap_or_else(|p| p.into_inner()).push(edit);
                    return Err(e.to_string());
                }
                parts
                    .graph
                    .apply(edit, parts.pool)
                    .map_err(|e| e.to_string())?;
                parts.neighbours.with(|n| n.set_port(id, &neighbour));
                Ok(0)
            })
        });
        drop(std::mem::take(
            &mut *refused.lock().unwrap_or_else(|p| p.into_inner()),
        ));
        if let Some(e) = acks.iter().find_map(|a| a.as_ref().err()) {
            let e = e.clone();
            let _ = self.retire(id, &nodes, &acks);
            live.removed[usize::from(id)] = Some(Instant::now());
            return refuse(format!("port `{name}`: {e}"));
        }
        live.nodes[usize::from(id)] = Some(nodes.clone());
        // A5: publish the port, then its addresses (routes lead to it only now, when every
        // worker can send on it), then start its inputs.
        let mut list = (*self.ports.get()).clone();
        // Ids an add that failed took (and rests) stay lined up: the list is by id.
        while list.len() < usize::from(id) {
            list.push(PortView {
                name: format!("(port {} unused)", list.len()),
                driver: "removed".to_string(),
                detail: String::new(),
                mac: [0; 6],
                stats: Vec::new(),
                driver_counters: None,
            });
        }
        if usize::from(id) < list.len() {
            list[usize::from(id)] = view;
        } else {
            list.push(view);
        }
        self.ports.set(Arc::new(list));
        // The load balancer knows the name (NAT inside ports; with NAT VIPs and no inside
        // port named, every port's replies are steered to it).
        self.shared.lb.set_port(usize::from(id), Some(&name));
        let addrs = port.own_addresses().collect();
        let routed = lock(&self.shared.routing).set_port_addresses(&[(usize::from(id), addrs)]);
        if let Err(e) = routed {
            drop(live);
            let _ = self.remove(&name);
            return refuse(format!("port `{name}`: its addresses: {}", e.0));
        }
        self.shared
            .policies
            .port_addrs
            .set(usize::from(id), (port.ip4.clone(), port.ip6.clone()));
        self.edit_every_worker(|w| {
            let mut edit = GraphEdit::new();
            for (n, _) in nodes[w].iter().filter(|(_, input)| *input) {
                edit.activate(n);
            }
            edit
        })
        .map_err(|e| PortChangeError(format!("port `{name}` added but not started: {e}")))?;
        Ok(id)
    }

    /// Build port `id`'s nodes for every worker.
    fn build_nodes(&self, live: &Live, id: u16) -> Result<Vec<BuiltNodes>, BuildError> {
        let spec = &live.spec;
        let port = &spec.ports[usize::from(id)];
        let mut out = Vec::with_capacity(self.workers.len());
        for (w, h) in self.workers.iter().enumerate() {
            let stats: Arc<PortStats> = Arc::default();
            let all_stats: Vec<Arc<PortStats>> = (0..=usize::from(id))
                .map(|i| {
                    if i == usize::from(id) {
                        stats.clone()
                    } else {
                        Arc::default()
                    }
                })
                .collect();
            let mut b = GraphBuilder::new();
            let mut umem = match (&port.driver, &h.umem) {
                (PortDriver::AfXdp { .. }, Err(why)) => {
                    return Err(BuildError::Port {
                        port: port.name.clone(),
                        reason: format!("worker {w}'s pool cannot be AF_XDP memory: {why}"),
                    })
                }
                (_, u) => u.as_ref().ok().cloned(),
            };
            let mut cx = crate::drivers::PortContext {
                spec,
                port,
                id,
                worker: w,
                rx_name: format!("{}-rx", port.name),
                tx_name: format!("{}-tx", port.name),
                stats: stats.clone(),
                all_stats: &all_stats,
                graph: &mut b,
                pool: None,
                jumbo_capacity: h.jumbo_capacity,
                shared: &self.shared,
                umem: &mut umem,
            };
            let built = crate::drivers::of(&port.driver).build(&mut cx)?;
            if built.rss {
                return Err(cx.error(format!(
                    "its driver hands frames between workers, which a port added at run time \
                     cannot do yet; accepted at run time: {LIVE_DRIVERS}"
                )));
            }
            let mut edit = GraphEdit::from_builder(b);
            let nodes = edit.node_kinds();
            edit.hold_new_inputs()
                .with_event(Arc::new(PortEvent::Added(AddedPort {
                    id,
                    mac: port.mac,
                    mtu: port.mtu,
                    tx: built.tx.clone(),
                    caps: built.caps,
                })));
            out.push(BuiltNodes {
                edit,
                nodes,
                stats,
                driver: built.driver,
                detail: built.detail,
                counters: built.counters,
            });
        }
        Ok(out)
    }

    /// Whether `remove(name)` would be refused for the port's driver or for what it is part
    /// of (a bridge, a cross-connect, a static neighbour, the load balancer's NAT); the routes
    /// through it are the routing tables' to check. Nothing changes.
    pub fn check_removal(&self, name: &str) -> Result<(), PortChangeError> {
        let live = self.lock();
        let id = live_id(&live, name)?;
        if live.nodes[usize::from(id)].is_none() {
            start_nodes(&live.spec.ports[usize::from(id)], self.workers.len())?;
        }
        check_removable(&live, id, &self.shared)
    }

    /// Remove the port named `name`: no route leads to it any more, its inputs are drained
    /// (what they held is forwarded), then its nodes are retired on every worker.
    pub fn remove(&self, name: &str) -> Result<RemovedPort, PortChangeError> {
        let mut live = self.lock();
        let id = live_id(&live, name)?;
        let nodes = match &live.nodes[usize::from(id)] {
            Some(n) => n.clone(),
            None => start_nodes(&live.spec.ports[usize::from(id)], self.workers.len())?,
        };
        check_removable(&live, id, &self.shared)?;
        // R2: no route leads to the port any more (refused when a route's gateway needs it).
        lock(&self.shared.routing)
            .set_port_addresses(&[(usize::from(id), Vec::new())])
            .map_err(|e| {
                PortChangeError(format!(
                    "port `{name}` is needed: {}; delete the routes through it first",
                    e.0
                ))
            })?;
        self.shared
            .policies
            .port_addrs
            .set(usize::from(id), (Vec::new(), Vec::new()));
        // R4: drain its inputs.
        let flags: Vec<Arc<AtomicBool>> = nodes
            .iter()
            .flatten()
            .filter(|(_, input)| *input)
            .map(|_| Arc::default())
            .collect();
        let mut k = 0;
        self.edit_every_worker(|w| {
            let mut edit = GraphEdit::new();
            for (n, _) in nodes[w].iter().filter(|(_, input)| *input) {
                edit.drain(n, flags[k].clone());
                k += 1;
            }
            edit
        })
        .map_err(|e| PortChangeError(format!("port `{name}`: draining its inputs: {e}")))?;
        let deadline = Instant::now() + WORKER_TIMEOUT;
        while !flags.iter().all(|f| f.load(Ordering::Acquire)) && Instant::now() < deadline {
            for h in &self.workers {
                h.doorbell.wake();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // R5: retire its nodes; the workers free what waited for neighbour resolution.
        let ok: Vec<Ack> = (0..self.workers.len()).map(|_| Ok(0)).collect();
        let freed = self.retire(id, &nodes, &ok)?;
        // R6: the id rests, then may be given again, with no feature enabled and unknown to
        // the load balancer.
        if let Err(e) = self.shared.features.disable_port(usize::from(id)) {
            tracing::warn!("port `{name}` removed: its features: {e}");
        }
        self.shared.lb.set_port(usize::from(id), None);
        live.removed[usize::from(id)] = Some(Instant::now());
        live.nodes[usize::from(id)] = None;
        let mut list = (*self.ports.get()).clone();
        if let Some(v) = list.get_mut(usize::from(id)) {
            // A name no request can give (it has a space): lookups by name skip the id.
            v.name = format!("{name} (removed)");
            v.driver = "removed".to_string();
            v.detail.clear();
            // Its driver's counters may hold the device (a TAP's descriptor) open.
            v.driver_counters = None;
        }
        self.ports.set(Arc::new(list));
        Ok(RemovedPort {
            id,
            freed_packets: freed,
        })
    }

    /// Retire port `id`'s nodes on the workers whose answer in `applied` was Ok (every worker
    /// learns of the removal); returns the packets the workers freed (an error when one did
    /// not answer).
    fn retire(&self, id: u16, nodes: &PortNodes, applied: &[Ack]) -> Result<u64, PortChangeError> {
        // The retired nodes come back here to be dropped: closing a socket may wait for an RCU
        // grace period (AF_PACKET's release does), which must not stall a worker.
        let graveyard: Arc<Mutex<Vec<graph::RemovedNode>>> = Arc::default();
        let acks = self.on_every_worker(|w| {
            let mut edit = GraphEdit::new();
            let ok = applied.get(w).is_some_and(Result::is_ok);
            for (n, _) in nodes[w].iter().filter(|_| ok) {
                edit.retire(n);
            }
            edit.with_event(Arc::new(PortEvent::Removed(id)));
            let graveyard = graveyard.clone();
            Box::new(move |parts| {
                let gone = parts
                    .graph
                    .apply(edit, parts.pool)
                    .map_err(|e| e.to_string())?;
                graveyard
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(gone);
                Ok(parts.neighbours.with(|n| n.remove_port(id, parts.pool)) as u64)
            })
        });
        drop(std::mem::take(
            &mut *graveyard.lock().unwrap_or_else(|p| p.into_inner()),
        ));
        let mut freed = 0;
        for a in acks {
            freed += a.map_err(PortChangeError)?;
        }
        Ok(freed)
    }
}

/// What building one port's nodes for one worker gave.
struct BuiltNodes {
    edit: GraphEdit,
    nodes: Vec<(String, bool)>,
    stats: Arc<PortStats>,
    driver: &'static str,
    detail: String,
    counters: Option<Arc<dyn graph::DriverCounters>>,
}

/// Put `port` at `id` (a new id at the end, or a removed port's).
fn set_slot(live: &mut Live, id: u16, port: PortSpec) {
    let i = usize::from(id);
    if i < live.spec.ports.len() {
        live.spec.ports[i] = port;
        live.removed[i] = None;
        live.nodes[i] = None;
    } else {
        live.spec.ports.push(port);
        live.removed.push(None);
        live.nodes.push(None);
    }
}

/// The lowest id free for a new port: a removed port's after its quarantine, or the next one.
fn free_id(live: &Live) -> Result<u16, PortChangeError> {
    let reusable = live
        .removed
        .iter()
        .position(|r| r.is_some_and(|t| t.elapsed() >= ID_QUARANTINE));
    let id = reusable.unwrap_or(live.spec.ports.len());
    if id >= MAX_PORTS {
        return refuse(format!(
            "no port id is free: a data plane has {MAX_PORTS} ports at most (removed ones \
             count for {ID_QUARANTINE:?})"
        ));
    }
    Ok(id as u16)
}

/// The id of the port in use named `name`.
fn live_id(live: &Live, name: &str) -> Result<u16, PortChangeError> {
    match live.in_use().find(|(_, p)| p.name == name) {
        Some((i, _)) => Ok(i),
        None => {
            let names: Vec<&str> = live.in_use().map(|(_, p)| p.name.as_str()).collect();
            refuse(format!(
                "no port is named `{name}`; ports: {}",
                names.join(", ")
            ))
        }
    }
}

/// Whether two own addresses' subnets overlap (same family, equal under the shorter length).
fn overlap(a: (IpAddr, u8), b: (IpAddr, u8)) -> bool {
    let ((v6a, x), (v6b, y)) = (crate::routing::to_u128(a.0), crate::routing::to_u128(b.0));
    let bits = if v6a { 128 } else { 32 };
    let len = a.1.min(b.1);
    v6a == v6b && crate::routing::mask(x, len, bits) == crate::routing::mask(y, len, bits)
}

/// The kernel interface a driver binds, if any.
fn interface(d: &PortDriver) -> Option<&str> {
    match d {
        PortDriver::AfPacket { interface, .. } | PortDriver::AfXdp { interface, .. } => {
            Some(interface)
        }
        PortDriver::Tap { name, .. } => Some(name),
        _ => None,
    }
}

/// Refuse a port whose driver cannot be added yet, whose name or interface another port has,
/// or one of whose addresses another port owns.
fn check_addable(live: &Live, port: &PortSpec) -> Result<(), PortChangeError> {
    if !live_driver(&port.driver, live.spec.workers) {
        return refuse(format!(
            "port `{}`: its driver cannot be added to a running data plane yet; accepted at \
             run time: {LIVE_DRIVERS}",
            port.name
        ));
    }
    let mine: Vec<(IpAddr, u8)> = port.own_addresses().collect();
    for (_, p) in live.in_use() {
        if p.name == port.name {
            return refuse(format!("a port is named `{}` already", port.name));
        }
        if let (Some(a), Some(b)) = (interface(&p.driver), interface(&port.driver)) {
            if a == b {
                return refuse(format!(
                    "port `{}`: interface `{b}` is port `{}`'s already",
                    port.name, p.name
                ));
            }
        }
        for (a, al) in p.own_addresses() {
            if let Some(&(m, ml)) = mine.iter().find(|&&(m, ml)| overlap((m, ml), (a, al))) {
                return refuse(format!(
                    "port `{}`: {m}/{ml} overlaps {a}/{al} of port `{}`; accepted: a subnet \
                     no other port has",
                    port.name, p.name
                ));
            }
        }
    }
    Ok(())
}

/// The nodes a port of the start has on each worker, for the drivers whose nodes are known:
/// `<name>-rx` (an input; a memory port only when it generates) and `<name>-tx`.
fn start_nodes(port: &PortSpec, workers: usize) -> Result<PortNodes, PortChangeError> {
    let rx = match &port.driver {
        PortDriver::AfPacket { .. } | PortDriver::Tap { .. } => true,
        PortDriver::Memory(m) => m.generate,
        _ => false,
    };
    if !live_driver(&port.driver, workers) {
        return refuse(format!(
            "port `{}`: its driver cannot be removed from a running data plane yet; accepted \
             at run time: {LIVE_DRIVERS}",
            port.name
        ));
    }
    if let PortDriver::AfXdp {
        interface, queues, ..
    } = &port.driver
    {
        return af_xdp_start_nodes(&port.name, interface, *queues, workers);
    }
    let mut nodes = vec![(format!("{}-tx", port.name), false)];
    if rx {
        nodes.insert(0, (format!("{}-rx", port.name), true));
    }
    Ok(vec![nodes; workers])
}

/// An AF_XDP port's nodes on each worker, as its driver names them: a receive node per queue
/// the worker owns (`<name>-rx`, or `<name>-rx<queue>` with several queues) and `<name>-tx`.
fn af_xdp_start_nodes(
    name: &str,
    interface: &str,
    queues: u32,
    workers: usize,
) -> Result<PortNodes, PortChangeError> {
    let queues = match queues {
        0 => crate::drivers::af_xdp_queues(interface)
            .map_err(|e| PortChangeError(format!("port `{name}`: {e}")))?,
        q => q,
    } as usize;
    if queues < workers {
        return refuse(format!(
            "port `{name}`: its {queues} queue(s) are spread over {workers} workers (software \
             RSS), which a running data plane cannot take apart yet"
        ));
    }
    Ok((0..workers)
        .map(|w| {
            let mut nodes: Vec<(String, bool)> = (w..queues)
                .step_by(workers)
                .map(|q| match queues {
                    1 => (format!("{name}-rx"), true),
                    _ => (format!("{name}-rx{q}"), true),
                })
                .collect();
            nodes.push((format!("{name}-tx"), false));
            nodes
        })
        .collect())
}

/// Refuse removing a port that a bridge, cross-connect, static neighbour or the load
/// balancer's NAT uses.
fn check_removable(live: &Live, id: u16, shared: &WorkersShared) -> Result<(), PortChangeError> {
    let i = usize::from(id);
    let name = &live.spec.ports[i].name;
    if let Some(b) = live.spec.bridges.iter().find(|b| {
        b.ports.iter().any(|m| m.port == i)
            || b.flow
                .as_ref()
                .is_some_and(|f| f.ports.iter().any(|m| m.port == i))
    }) {
        return refuse(format!("port `{name}` is in bridge `{}`", b.name));
    }
    if live.spec.xconnects.iter().any(|x| x.from == i || x.to == i) {
        return refuse(format!("port `{name}` is cross-connected"));
    }
    if let Some(n) = lock(&shared.routing)
        .neighbours()
        .into_iter()
        .find(|n| n.port == i)
    {
        return refuse(format!(
            "port `{name}` has the static neighbour {}; delete it first",
            n.ip
        ));
    }
    let lb = shared.lb.state();
    if lb.nat_inside(false).contains(name) || lb.nat_inside(true).contains(name) {
        return refuse(format!(
            "port `{name}` is a load-balancer NAT inside port; take it out of `lb set \
             interface nat4/nat6 in` first"
        ));
    }
    Ok(())
}

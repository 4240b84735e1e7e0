//! The health-check scheduler: one OS thread that enters the probe namespace (through the
//! `HealthHost`), then runs a current-thread tokio runtime that probes every server of every
//! checked VIP once per interval (first probes spread over the interval), each probe from a
//! band port of its own that is leased to the server's AS slot while the probe is out and for
//! `LEASE_GRACE` after (its last packets may still wait in the probe TAP). It
//! re-reads the targets every refresh, feeds outcomes to each server's state machine, and on a
//! transition marks the server up or down through the host, logs one line and keeps it in a
//! bounded ring. It never touches the LB tables itself (only `HealthHost::set_health`), never
//! sends a probe before its port is leased, never has two probes on one port, and never
//! changes the health of a server it cannot probe.

use super::outcome::ProbeOutcome;
use super::state::ServerHealth;
use super::status::{
    HealthStatus, HealthTotals, TargetState, TargetStatus, TransitionRecord, RECENT_TRANSITIONS,
};
use super::target::{plan, ProbePlan};
use lb::health::{HealthCheck, HealthConfig, OnDown};
use lb::model::{AsSlot, Encap, VipKey};
use lb::probe::{PROBE_PORT_BASE, PROBE_PORT_LAST};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What the runner needs from vecplane: the probe namespace, the targets, the LB and the probe
/// port leases. Implemented by the lead's wiring (and by fakes in tests).
pub trait HealthHost: Send + Sync + 'static {
    /// Enter the probe namespace; called once on the runner thread before any socket.
    fn enter(&self) -> std::io::Result<()>;
    /// Every server of every VIP that has a health check, now. `health_down` must reflect what
    /// `set_health` set: a disagreement is re-applied at every refresh.
    fn targets(&self) -> Vec<Target>;
    /// Mark a server up or down (LbCommand::SetHealth through the LB's snapshots).
    fn set_health(
        &self,
        vip: &VipKey,
        server: IpAddr,
        down: bool,
        flush: bool,
    ) -> Result<(), String>;
    /// Lease a band port to an AS slot / free it.
    fn lease(&self, port: u16, slot: AsSlot);
    /// Free a band port.
    fn release(&self, port: u16);
}

/// One server of a checked VIP, as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Index into `HealthConfig::checks`.
    pub check: usize,
    /// The VIP.
    pub vip: VipKey,
    /// The address probes through the VIP are sent to.
    pub vip_addr: IpAddr,
    /// The VIP's encapsulation.
    pub encap: Encap,
    /// The server.
    pub server: IpAddr,
    /// Its AS slot.
    pub slot: AsSlot,
    /// Whether the LB model has it marked down by health.
    pub health_down: bool,
}

/// What a probe is handed: the check, its band-port source and destination.
pub(crate) struct ProbeJob {
    /// The check (kind and timeout).
    pub(crate) check: Arc<HealthCheck>,
    /// Probe source and band port.
    pub(crate) local: SocketAddr,
    /// Destination.
    pub(crate) dest: SocketAddr,
}

/// A probe future on the runner's thread.
pub(crate) type ProbeFuture = Pin<Box<dyn Future<Output = ProbeOutcome>>>;

/// Makes probes (the real one opens sockets; tests fake it).
pub(crate) type Prober = Box<dyn Fn(ProbeJob) -> ProbeFuture + Send>;

/// The shortest time between two scheduling rounds: probes due within it go out together.
const TICK: Duration = Duration::from_millis(5);

/// Starts the health-check thread.
pub struct HealthRunner;

impl HealthRunner {
    /// Start probing `config`'s checks with `host`; the thread runs until the handle is stopped
    /// or dropped.
    pub fn start(config: HealthConfig, host: Arc<dyn HealthHost>) -> HealthHandle {
        let prober: Prober = Box::new(|job: ProbeJob| {
            Box::pin(async move {
                super::probe::probe(&job.check.kind, job.local, job.dest, job.check.timeout).await
            })
        });
        HealthRunner::start_with(config, host, prober)
    }

    /// `start` with another prober.
    pub(crate) fn start_with(
        config: HealthConfig,
        host: Arc<dyn HealthHost>,
        prober: Prober,
    ) -> HealthHandle {
        let book = Arc::new(Mutex::new(Book::default()));
        let stop = Arc::new(Stop::default());
        let ctx = Shared {
            checks: config.checks.into_iter().map(Arc::new).collect(),
            sources: config.sources,
            host,
            book: book.clone(),
        };
        let thread_stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("vp-health".to_string())
            .spawn(move || thread_main(ctx, prober, thread_stop));
        let thread = match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                lock(&book).error = Some(format!("cannot start the health-check thread: {e}"));
                None
            }
        };
        HealthHandle { book, stop, thread }
    }
}

/// The running health checks: their status, and the way to stop them.
pub struct HealthHandle {
    book: Arc<Mutex<Book>>,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl HealthHandle {
    /// A snapshot of every target, the totals and the recent transitions.
    pub fn status(&self) -> HealthStatus {
        let book = lock(&self.book);
        let targets: Vec<TargetStatus> = book.entries.values().map(Entry::status).collect();
        HealthStatus {
            error: book.error.clone(),
            totals: HealthTotals {
                delayed: book.delayed,
                ..HealthStatus::sum(&targets, book.transitions)
            },
            targets,
            transitions: book.ring.iter().cloned().collect(),
        }
    }

    /// Per checked VIP, whether one of its servers is up by a probe that was made (state up
    /// and checked): what an announcer asks many times a second, without copying the status.
    pub fn vips_with_a_server_up(&self) -> BTreeMap<VipKey, bool> {
        let book = lock(&self.book);
        let mut out = BTreeMap::new();
        for e in book.entries.values() {
            let up = e.plan.is_ok() && e.health.checked() && e.health.is_up();
            *out.entry(e.target.vip).or_insert(false) |= up;
        }
        out
    }

    /// Stop probing: the thread ends (probes in flight are dropped, their ports released) and
    /// is joined. Idempotent.
    pub fn stop(&mut self) {
        self.stop.flag.store(true, Ordering::SeqCst);
        self.stop.notify.notify_one();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("health: the health-check thread panicked");
            }
        }
    }
}

impl Drop for HealthHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The stop request, from any thread.
#[derive(Default)]
struct Stop {
    flag: AtomicBool,
    notify: Notify,
}

/// What the probe tasks and the handle share.
#[derive(Clone)]
struct Shared {
    checks: Vec<Arc<HealthCheck>>,
    sources: lb::health::ProbeSources,
    host: Arc<dyn HealthHost>,
    book: Arc<Mutex<Book>>,
}

/// A target's key: check, VIP, server.
type Key = (usize, VipKey, IpAddr);

/// The runner's state, read by `status`.
#[derive(Default)]
struct Book {
    entries: BTreeMap<Key, Entry>,
    ring: VecDeque<TransitionRecord>,
    transitions: u64,
    /// Probes that waited because every band port was out or cooling.
    delayed: u64,
    error: Option<String>,
}

/// One target with its state machine and schedule.
struct Entry {
    target: Target,
    check: Arc<HealthCheck>,
    plan: Result<ProbePlan, String>,
    health: ServerHealth,
    next_due: Instant,
    in_flight: bool,
    /// Due, but every band port is out or cooling (counted once in `Book::delayed`).
    waiting_for_port: bool,
}

impl Entry {
    fn status(&self) -> TargetStatus {
        let h = &self.health;
        let state = match (&self.plan, h.is_up()) {
            (Err(_), _) => TargetState::Unprobed,
            (Ok(_), true) => TargetState::Up,
            (Ok(_), false) => TargetState::Down,
        };
        let plan = self.plan.as_ref().ok();
        TargetStatus {
            check: self.target.check,
            vip: self.target.vip,
            server: self.target.server,
            slot: self.target.slot,
            kind: self.check.kind.name(),
            via: self.check.path,
            on_down: self.check.on_down,
            destination: plan.map(|p| p.dest),
            source: plan.map(|p| p.source),
            via_vip: plan.is_some_and(|p| p.via_vip),
            state,
            unprobed: self.plan.as_ref().err().cloned(),
            checked: h.checked(),
            consecutive_ok: h.consecutive_ok(),
            consecutive_fail: h.consecutive_fail(),
            probes: h.probes(),
            ok: h.ok(),
            not_sent: h.not_sent(),
            failures: h.failures().clone(),
            last: h.last(),
            last_rtt: h.last_rtt(),
            since: h.since(),
            transitions: h.transitions(),
        }
    }

    /// The change to re-apply when the model disagrees with this entry (never when unprobed).
    fn disagreement(&self) -> Option<(bool, bool)> {
        let down = !self.health.is_up();
        (self.plan.is_ok() && self.target.health_down != down)
            .then_some((down, down && self.check.on_down == OnDown::Flush))
    }
}

/// Lock, ignoring poisoning (the book stays consistent: each change is one assignment).
fn lock(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(|e| e.into_inner())
}

/// The runner thread: enter the namespace, then schedule until stopped.
fn thread_main(ctx: Shared, prober: Prober, stop: Arc<Stop>) {
    if let Err(e) = ctx.host.enter() {
        let message = format!("cannot enter the probe namespace: {e}");
        tracing::warn!("health: {message}");
        lock(&ctx.book).error = Some(message);
        return;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the health-check runtime: {e}");
            tracing::warn!("health: {message}");
            lock(&ctx.book).error = Some(message);
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, schedule(ctx, Rc::new(prober), stop));
    // Dropping the set drops the probes still out: their leases are released.
    drop(local);
}

/// How long a band port stays leased to its slot after its probe ended: packets the probe's
/// socket sent last (a reset on close) may still wait in the probe TAP, and the data path
/// drops a probe whose port is not leased (a server would keep a half-open connection).
/// The port is reused only after that.
pub(crate) const LEASE_GRACE: Duration = Duration::from_secs(1);

/// The band ports not in use (least recently used first), and those cooling down after their
/// probe (still leased until their grace ends). Dropping it releases every lease it holds.
struct Ports {
    free: RefCell<VecDeque<u16>>,
    cooling: RefCell<VecDeque<(Instant, u16)>>,
    host: Arc<dyn HealthHost>,
}

impl Ports {
    /// Release the leases whose grace is over and free their ports; when the next one ends.
    fn thaw(&self, now: Instant) -> Option<Instant> {
        let mut cooling = self.cooling.borrow_mut();
        while let Some(&(until, port)) = cooling.front() {
            if until > now {
                return Some(until);
            }
            cooling.pop_front();
            self.host.release(port);
            self.free.borrow_mut().push_back(port);
        }
        None
    }
}

impl Drop for Ports {
    fn drop(&mut self) {
        for (_, port) in self.cooling.borrow_mut().drain(..) {
            self.host.release(port);
        }
    }
}

/// A band port leased to a slot for one probe; when dropped, it cools down for
/// `LEASE_GRACE` (still leased) before it is released and freed.
struct Lease {
    port: u16,
    ports: Rc<Ports>,
}

impl Lease {
    fn take(ports: &Rc<Ports>, slot: AsSlot) -> Option<Lease> {
        let port = ports.free.borrow_mut().pop_front()?;
        ports.host.lease(port, slot);
        Some(Lease {
            port,
            ports: ports.clone(),
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.ports
            .cooling
            .borrow_mut()
            .push_back((Instant::now() + LEASE_GRACE, self.port));
    }
}

/// How often the targets are re-read: the shortest interval, within 100 ms..=1 s.
fn refresh_period(checks: &[Arc<HealthCheck>]) -> Duration {
    let shortest = checks.iter().map(|c| c.interval).min();
    shortest
        .unwrap_or(Duration::from_secs(1))
        .clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// The scheduling loop.
async fn schedule(ctx: Shared, prober: Rc<Prober>, stop: Arc<Stop>) {
    let ports = Rc::new(Ports {
        free: RefCell::new((PROBE_PORT_BASE..=PROBE_PORT_LAST).collect()),
        cooling: RefCell::new(VecDeque::new()),
        host: ctx.host.clone(),
    });
    let period = refresh_period(&ctx.checks);
    let mut next_refresh = Instant::now();
    let mut first = true;
    while !stop.flag.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= next_refresh {
            refresh(&ctx, now, first);
            first = false;
            next_refresh = now + period;
        }
        let mut wake = next_refresh;
        let thawed = ports.thaw(now);
        let mut jobs = Vec::new();
        {
            let mut book = lock(&ctx.book);
            let (mut delayed, mut starved) = (0, false);
            for (key, e) in book.entries.iter_mut() {
                let Ok(plan) = &e.plan else { continue };
                if e.next_due > now {
                    wake = wake.min(e.next_due);
                    continue;
                }
                if e.in_flight {
                    continue;
                }
                let lease = if starved {
                    None
                } else {
                    Lease::take(&ports, e.target.slot)
                };
                let Some(lease) = lease else {
                    // Every band port is out or cooling: go on when one comes back (each
                    // probe that waits is counted once).
                    starved = true;
                    if !e.waiting_for_port {
                        e.waiting_for_port = true;
                        delayed += 1;
                    }
                    if let Some(t) = thawed {
                        wake = wake.min(t);
                    }
                    continue;
                };
                e.in_flight = true;
                e.waiting_for_port = false;
                e.next_due = now + e.check.interval;
                let job = ProbeJob {
                    check: e.check.clone(),
                    local: SocketAddr::new(plan.source, lease.port),
                    dest: plan.dest,
                };
                jobs.push((*key, job, lease));
            }
            book.delayed += delayed;
        }
        for (key, job, lease) in jobs {
            let fut = (prober)(job);
            let ctx = ctx.clone();
            tokio::task::spawn_local(async move {
                let outcome = fut.await;
                drop(lease);
                record(&ctx, &key, outcome);
            });
        }
        let wake = wake.max(Instant::now() + TICK);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.notify.notified() => break,
        }
    }
}

/// A spread offset in `[0, interval)`: by index on the first read, by hash later.
fn offset(interval: Duration, key: &Key, index: usize, count: usize, first: bool) -> Duration {
    let nanos = interval.as_nanos().max(1);
    let at = if first {
        nanos * index as u128 / count.max(1) as u128
    } else {
        let mut h = std::hash::DefaultHasher::new();
        key.hash(&mut h);
        u128::from(h.finish()) % nanos
    };
    Duration::from_nanos(u64::try_from(at).unwrap_or(u64::MAX))
}

/// Re-read the targets: add new ones (up, unchecked), drop removed ones, follow slot changes,
/// and re-apply the runner's state where the model disagrees.
fn refresh(ctx: &Shared, now: Instant, first: bool) {
    let targets = ctx.host.targets();
    let wall = SystemTime::now();
    let count = targets.len();
    let mut reapply = Vec::new();
    {
        let mut book = lock(&ctx.book);
        let mut old = std::mem::take(&mut book.entries);
        for (index, t) in targets.into_iter().enumerate() {
            let Some(check) = ctx.checks.get(t.check) else {
                continue;
            };
            let key = (t.check, t.vip, t.server);
            let p = plan(check, t.vip_addr, t.encap, t.server, &ctx.sources);
            let entry = match old.remove(&key) {
                Some(mut e) => {
                    e.target = t;
                    e.plan = p;
                    e
                }
                None => Entry {
                    next_due: now + offset(check.interval, &key, index, count, first),
                    health: ServerHealth::new(check.rise, check.fall, wall),
                    check: check.clone(),
                    target: t,
                    plan: p,
                    in_flight: false,
                    waiting_for_port: false,
                },
            };
            if let Some((down, flush)) = entry.disagreement() {
                reapply.push((key, down, flush));
            }
            book.entries.insert(key, entry);
        }
    }
    for ((_, vip, server), down, flush) in reapply {
        let state = if down { "down" } else { "up" };
        match ctx.host.set_health(&vip, server, down, flush) {
            Ok(()) => tracing::info!(
                "health: {vip} server {server}: {state} re-applied (the load balancer \
                 had it otherwise)"
            ),
            Err(e) => {
                tracing::warn!("health: {vip} server {server}: cannot re-apply {state}: {e}")
            }
        }
    }
}

/// Count a probe's outcome; on a transition, tell the LB, log it and keep it.
fn record(ctx: &Shared, key: &Key, outcome: ProbeOutcome) {
    let wall = SystemTime::now();
    let flip = {
        let mut book = lock(&ctx.book);
        let Some(e) = book.entries.get_mut(key) else {
            return;
        };
        e.in_flight = false;
        e.health
            .record(outcome, wall)
            .map(|t| (t, t.down && e.check.on_down == OnDown::Flush))
    };
    let Some((t, flush)) = flip else {
        return;
    };
    let (check, vip, server) = *key;
    let result = ctx.host.set_health(&vip, server, t.down, flush);
    let flushed = if flush { ", flushed" } else { "" };
    match &result {
        Ok(()) => tracing::info!("health: {vip} server {server} {}{flushed}", t.describe()),
        Err(e) => tracing::warn!(
            "health: {vip} server {server} {}; the load balancer refused it (retried): {e}",
            t.describe()
        ),
    }
    let mut book = lock(&ctx.book);
    book.transitions += 1;
    if book.ring.len() == RECENT_TRANSITIONS {
        book.ring.pop_front();
    }
    book.ring.push_back(TransitionRecord {
        at: wall,
        check,
        vip,
        server,
        down: t.down,
        count: t.count,
        last: t.last,
        flush,
        error: result.err(),
    });
}

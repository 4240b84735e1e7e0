//! The exporter thread: drains every worker's ring, builds messages (`message::Encoder`),
//! re-sends templates on a timer and every N messages, and sends each message over UDP to
//! every collector (IPv4 or IPv6), counting messages, records, bytes, send errors and the
//! workers' ring drops. It is the only code that touches sockets; it never runs on a worker
//! and a slow or absent collector never slows one (its rings just fill and count drops).

use crate::clock::system_ms;
use crate::config::IpfixConfig;
use crate::message::Encoder;
use crate::record::FlowRecord;
use crate::ring::Consumer;
use serde::Serialize;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the thread sleeps when the rings were empty.
pub const TICK: Duration = Duration::from_millis(10);

/// Most records taken from the rings per round.
const BATCH: usize = 16_384;

/// What the exporter counted (every field only grows).
#[derive(Debug, Default)]
pub struct ExporterCounters {
    /// Messages built (each sent to every collector).
    pub messages: AtomicU64,
    /// Of those, messages of templates (and sampling options).
    pub template_messages: AtomicU64,
    /// Flow records sent.
    pub records: AtomicU64,
    /// UDP payload bytes sent, over all collectors.
    pub bytes: AtomicU64,
    /// Sends that failed (or collectors whose socket could not be opened), per collector.
    pub send_errors: AtomicU64,
}

/// A snapshot of `ExporterCounters`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExporterStats {
    /// Messages built.
    pub messages: u64,
    /// Template messages among them.
    pub template_messages: u64,
    /// Flow records sent.
    pub records: u64,
    /// Bytes sent over all collectors.
    pub bytes: u64,
    /// Failed sends.
    pub send_errors: u64,
}

impl ExporterCounters {
    /// The counts now.
    pub fn snapshot(&self) -> ExporterStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ExporterStats {
            messages: g(&self.messages),
            template_messages: g(&self.template_messages),
            records: g(&self.records),
            bytes: g(&self.bytes),
            send_errors: g(&self.send_errors),
        }
    }
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// What the control handle and the exporter thread share.
pub(crate) struct ExporterShared {
    /// The configuration to export with, and a version bumped on every change.
    pub settings: Mutex<(u64, IpfixConfig)>,
    /// The consuming ends of the workers' rings.
    pub rings: Mutex<Vec<Consumer<FlowRecord>>>,
    pub counters: ExporterCounters,
    /// Set to make the thread drain what is left and end.
    pub stop: AtomicBool,
}

/// Lock, taking the value of a poisoned lock (the exporter's state stays usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Collector {
    addr: SocketAddr,
    socket: Option<UdpSocket>,
}

impl Collector {
    fn open(addr: SocketAddr) -> Collector {
        Collector {
            addr,
            socket: open_socket(addr).ok(),
        }
    }
}

/// A UDP socket of `addr`'s family, connected to it.
fn open_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let any: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = UdpSocket::bind(any)?;
    s.connect(addr)?;
    Ok(s)
}

/// The thread's own state.
struct Exporter {
    shared: Arc<ExporterShared>,
    version: u64,
    config: IpfixConfig,
    encoder: Encoder,
    collectors: Vec<Collector>,
    last_refresh: Instant,
    since_refresh: u32,
}

impl Exporter {
    fn new(shared: Arc<ExporterShared>) -> Exporter {
        let (version, config) = lock(&shared.settings).clone();
        Exporter {
            encoder: Encoder::new(
                config.observation_domain,
                usize::from(config.mtu),
                config.cookie_enterprise,
            ),
            collectors: config
                .collectors
                .iter()
                .map(|&a| Collector::open(a))
                .collect(),
            shared,
            version,
            config,
            last_refresh: Instant::now(),
            since_refresh: 0,
        }
    }

    /// Take a changed configuration: new collectors get sockets (and every template again),
    /// a new observation domain a new sequence.
    fn sync_settings(&mut self) {
        let (version, config) = {
            let s = lock(&self.shared.settings);
            if s.0 == self.version {
                return;
            }
            s.clone()
        };
        self.version = version;
        if config.observation_domain != self.config.observation_domain
            || config.collectors != self.config.collectors
        {
            self.encoder = Encoder::new(
                config.observation_domain,
                usize::from(config.mtu),
                config.cookie_enterprise,
            );
        }
        self.encoder
            .set_limits(usize::from(config.mtu), config.cookie_enterprise);
        if config.collectors != self.config.collectors {
            self.collectors = config
                .collectors
                .iter()
                .map(|&a| Collector::open(a))
                .collect();
        }
        self.config = config;
    }

    fn send(&mut self, messages: &[Vec<u8>], templates: bool) {
        let c = &self.shared.counters;
        for col in &mut self.collectors {
            if col.socket.is_none() {
                col.socket = open_socket(col.addr).ok();
            }
        }
        for m in messages {
            bump(&c.messages, 1);
            if templates {
                bump(&c.template_messages, 1);
            }
            for col in &self.collectors {
                match col.socket.as_ref().map(|s| s.send(m)) {
                    Some(Ok(n)) => bump(&c.bytes, n as u64),
                    _ => bump(&c.send_errors, 1),
                }
            }
        }
        self.since_refresh = self.since_refresh.saturating_add(messages.len() as u32);
    }

    /// Send the templates again when the timer or the message count says so.
    fn maybe_refresh(&mut self) {
        let every = Duration::from_secs(u64::from(self.config.template_refresh_s));
        let by_count = self.config.template_refresh_messages != 0
            && self.since_refresh >= self.config.template_refresh_messages;
        if self.last_refresh.elapsed() >= every || by_count {
            let msgs = self.encoder.refresh(export_time());
            self.send(&msgs, true);
            self.last_refresh = Instant::now();
            self.since_refresh = 0;
        }
    }

    /// Encode and send `records`.
    fn export(&mut self, records: &[FlowRecord]) {
        self.maybe_refresh();
        if records.is_empty() {
            return;
        }
        let msgs = self.encoder.encode(records, export_time());
        // Announcements of new templates come first, then the data.
        for m in &msgs {
            self.send(std::slice::from_ref(m), is_template_message(m));
        }
        bump(&self.shared.counters.records, records.len() as u64);
    }

    /// Drain the rings once; the records taken.
    fn drain(&mut self, batch: &mut Vec<FlowRecord>) -> usize {
        batch.clear();
        let mut rings = lock(&self.shared.rings);
        for r in rings.iter_mut() {
            let room = BATCH.saturating_sub(batch.len());
            r.drain_into(batch, room);
        }
        rings.retain_mut(|r| !r.is_finished());
        batch.len()
    }
}

/// True when message `m`'s first set is a template or options template set.
fn is_template_message(m: &[u8]) -> bool {
    m.get(16..18)
        .is_some_and(|id| matches!(u16::from_be_bytes([id[0], id[1]]), 2 | 3))
}

/// Seconds since the Unix epoch (the header's export time).
fn export_time() -> u32 {
    (system_ms() / 1000) as u32
}

/// The thread's body: until stopped, drain, export, sleep when idle; once stopped, drain
/// what is left and end.
pub(crate) fn run(shared: Arc<ExporterShared>) {
    let mut e = Exporter::new(shared);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let stopping = e.shared.stop.load(Ordering::Acquire);
        e.sync_settings();
        let n = e.drain(&mut batch);
        e.export(&batch);
        if n == 0 {
            if stopping {
                return;
            }
            std::thread::sleep(TICK);
        }
    }
}

//! The inject path's control side: each worker's inject ring (a bounded SPSC ring of packet
//! copies the worker's `inject-rx` polls), its token bucket and counters. `inject` checks a
//! whole request first (every packet's length, a packet-out's translation), then takes ring
//! room and tokens for all of it or refuses it whole, so nothing is applied half-way; then it
//! rings the worker's doorbell once. It runs on control threads only (one lock per worker
//! serialises them: the ring has one producer); it never waits for a worker.

use crate::flows::FlowSwitch;
use crate::idle::Doorbell;
use channel::punt::NO_PORT;
use channel::spsc::{ring, Consumer, Producer};
use channel::TokenBucket;
use flow::DpActions;
use nodes::inject::{InjectKind, InjectSlot, InjectStats};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Packets a worker's inject ring holds.
pub const INJECT_SLOTS: usize = 256;
/// Shortest packet injected (an Ethernet header).
pub const MIN_PACKET: usize = 14;
/// OpenFlow's `CONTROLLER` port, the usual `in_port` of a packet-out.
pub const OFPP_CONTROLLER: u16 = 0xfffd;

/// Why an injection was refused (nothing of it was injected).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum InjectError {
    /// The request names something that does not exist or cannot take packets.
    #[error("{0}")]
    BadTarget(String),
    /// A packet is unusable.
    #[error("packet {index}: {reason}")]
    BadPacket {
        /// Its index in the request.
        index: usize,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The worker's rate limit has fewer tokens than packets.
    #[error(
        "refused: {packets} packets exceed worker {worker}'s inject rate limit \
         ({per_second}/s, burst {burst}); send fewer at once or later"
    )]
    RateLimited {
        /// The worker.
        worker: usize,
        /// Packets asked for.
        packets: usize,
        /// The rate.
        per_second: u32,
        /// The burst.
        burst: u32,
    },
    /// The worker's ring has less room than packets.
    #[error(
        "refused: worker {worker}'s inject ring has room for {room} of {packets} packets (it \
         holds {capacity}); try again when the worker has taken them"
    )]
    RingFull {
        /// The worker.
        worker: usize,
        /// Packets asked for.
        packets: usize,
        /// Free slots.
        room: usize,
        /// Slots.
        capacity: usize,
    },
}

/// Where injected packets go.
pub enum InjectTarget<'a> {
    /// Out of vecplane port `port` as they are.
    Port(u16),
    /// Through flow-mode bridge `switch` (its index `index`), received on OpenFlow port
    /// `in_port` (a port of the bridge, or `CONTROLLER`), running `actions` (parsed with
    /// `flow::ofctl::parse_packet_out_actions`; `table` runs the tables).
    PacketOut {
        /// The bridge.
        switch: &'a FlowSwitch,
        /// Its index among the flow-mode bridges.
        index: u16,
        /// Its `in_port`.
        in_port: u16,
        /// The actions.
        actions: &'a [flow::Action],
    },
}

struct WorkerSide {
    ring: Producer<InjectSlot>,
    bucket: TokenBucket,
}

/// What one request injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injected {
    /// The worker that takes them.
    pub worker: usize,
    /// Packets put in its ring.
    pub packets: usize,
}

/// Every worker's inject ring.
pub struct InjectControl {
    workers: Vec<Mutex<WorkerSide>>,
    consumers: Mutex<Vec<Option<Consumer<InjectSlot>>>>,
    stats: Vec<Arc<InjectStats>>,
    doorbells: Vec<Arc<Doorbell>>,
    max_bytes: usize,
    rate: (u32, u32),
    /// Packets accepted.
    pub accepted: AtomicU64,
    /// Requests refused by the rate limit.
    pub refused_rate: AtomicU64,
    /// Requests refused for want of ring room.
    pub refused_full: AtomicU64,
}

impl std::fmt::Debug for InjectControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InjectControl")
            .field("workers", &self.workers.len())
            .finish()
    }
}

impl InjectControl {
    /// Rings for the workers whose doorbells are `doorbells` (one each, at least one), for
    /// packets of up to `max_bytes`, at `per_second` with `burst` per worker.
    pub fn new(
        doorbells: &[Arc<Doorbell>],
        max_bytes: usize,
        (per_second, burst): (u32, u32),
        tsc_hz: u64,
    ) -> InjectControl {
        let n = doorbells.len().max(1);
        let mut workers = Vec::new();
        let mut consumers = Vec::new();
        for _ in 0..n {
            let (p, c) = ring(INJECT_SLOTS, || InjectSlot::new(max_bytes));
            workers.push(Mutex::new(WorkerSide {
                ring: p,
                bucket: TokenBucket::new(per_second, burst, tsc_hz),
            }));
            consumers.push(Some(c));
        }
        InjectControl {
            workers,
            consumers: Mutex::new(consumers),
            stats: (0..n).map(|_| Arc::default()).collect(),
            doorbells: doorbells.to_vec(),
            max_bytes,
            rate: (per_second, burst),
            accepted: AtomicU64::new(0),
            refused_rate: AtomicU64::new(0),
            refused_full: AtomicU64::new(0),
        }
    }

    /// Worker `w`'s end of its ring (once) and its counters, for its `inject-rx`.
    pub fn take_consumer(&self, w: usize) -> Option<(Consumer<InjectSlot>, Arc<InjectStats>)> {
        let c = self
            .consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(w)?
            .take()?;
        Some((c, self.stats.get(w)?.clone()))
    }

    /// Each worker's counters (what its `inject-rx` sent where).
    pub fn worker_stats(&self) -> &[Arc<InjectStats>] {
        &self.stats
    }

    /// Workers with a ring.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The rate and burst per worker.
    pub fn rate(&self) -> (u32, u32) {
        self.rate
    }

    /// Inject `packets` into worker `worker` for `target`: all of them or, with the reason,
    /// none.
    pub fn inject(
        &self,
        worker: usize,
        target: &InjectTarget<'_>,
        packets: &[Vec<u8>],
    ) -> Result<Injected, InjectError> {
        let side = self.workers.get(worker).ok_or_else(|| {
            InjectError::BadTarget(format!(
                "worker {worker} does not exist; accepted: 0..={}",
                self.workers.len() - 1
            ))
        })?;
        if packets.is_empty() {
            return Err(InjectError::BadTarget(
                "no packet to inject; accepted: one or more packets".into(),
            ));
        }
        let slots = self.prepare(target, packets)?;
        let mut side = side.lock().unwrap_or_else(|p| p.into_inner());
        let room = side.ring.capacity() - side.ring.len().min(side.ring.capacity());
        if room < slots.len() {
            self.refused_full.fetch_add(1, Ordering::Relaxed);
            return Err(InjectError::RingFull {
                worker,
                packets: slots.len(),
                room,
                capacity: side.ring.capacity(),
            });
        }
        if !side.bucket.take_n(graph::rdtsc(), slots.len() as u64) {
            self.refused_rate.fetch_add(1, Ordering::Relaxed);
            return Err(InjectError::RateLimited {
                worker,
                packets: slots.len(),
                per_second: self.rate.0,
                burst: self.rate.1,
            });
        }
        for (s, bytes) in slots.iter().zip(packets) {
            // Room was checked under the lock, and only this side fills the ring.
            let pushed = side.ring.try_push(|slot| {
                slot.kind = s.kind;
                slot.port = s.port;
                slot.switch = s.switch;
                slot.in_port = s.in_port;
                slot.actions.assign_from(&s.actions);
                slot.set_bytes(bytes);
            });
            debug_assert!(pushed);
        }
        drop(side);
        self.accepted
            .fetch_add(slots.len() as u64, Ordering::Relaxed);
        if let Some(bell) = self.doorbells.get(worker) {
            bell.ring();
        }
        Ok(Injected {
            worker,
            packets: slots.len(),
        })
    }

    /// Check every packet and make what its slot will hold (a packet-out's actions
    /// translated now, against the bridge's current tables).
    fn prepare(
        &self,
        target: &InjectTarget<'_>,
        packets: &[Vec<u8>],
    ) -> Result<Vec<InjectSlot>, InjectError> {
        let mut out = Vec::with_capacity(packets.len());
        for (index, p) in packets.iter().enumerate() {
            if p.len() < MIN_PACKET || p.len() > self.max_bytes {
                return Err(InjectError::BadPacket {
                    index,
                    reason: format!(
                        "{} bytes; accepted: {MIN_PACKET}..={} bytes (an Ethernet frame that \
                         fits a buffer, [dataplane] data-size)",
                        p.len(),
                        self.max_bytes
                    ),
                });
            }
            let mut slot = InjectSlot::new(0);
            match target {
                InjectTarget::Port(port) => {
                    slot.kind = InjectKind::Port;
                    slot.port = *port;
                }
                InjectTarget::PacketOut {
                    switch,
                    index: sw,
                    in_port,
                    actions,
                } => {
                    let (rx, dp) = switch
                        .packet_out(p, *in_port, actions)
                        .map_err(|reason| InjectError::BadPacket { index, reason })?;
                    slot.kind = InjectKind::PacketOut;
                    slot.port = rx.unwrap_or(NO_PORT);
                    slot.switch = *sw;
                    slot.in_port = *in_port;
                    slot.actions = dp;
                }
            }
            out.push(slot);
        }
        Ok(out)
    }
}

/// The datapath actions of a packet-out, when short enough for an inject slot.
pub(crate) fn inline_actions(actions: DpActions) -> Result<DpActions, String> {
    if actions.is_long() {
        return Err(format!(
            "the actions make {} datapath actions; a packet-out holds at most {}",
            actions.len(),
            flow::dpaction::INLINE_DP_ACTIONS
        ));
    }
    Ok(actions)
}

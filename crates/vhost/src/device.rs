//! What the control thread (which speaks the vhost-user protocol) and the worker's two port
//! nodes share: the device as the frontend configured it, handed to the worker as an
//! immutable `DeviceSnapshot` under a generation number, the worker's acknowledgement of each
//! generation, each queue's progress, and the port's own counters.
//!
//! The protocol it implements between the threads: the control thread publishes a snapshot
//! (stopping, starting or moving queues) and, before it reports a queue's index to the
//! frontend or lets go of guest memory, waits until the receive node (an input node, polled
//! every round) acknowledged that generation. Both nodes run on the same worker thread and
//! check the generation before they touch a ring, so an acknowledgement means neither node
//! will touch a ring of an older generation again. The worker takes the slot's lock only when
//! the generation changed (a reconfiguration), never per packet.

use crate::memory::GuestMemory;
use crate::ring::RingLayout;
use graph::Counter;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Queue 0: the guest's receive queue (the device writes into it).
pub const GUEST_RX: usize = 0;
/// Queue 1: the guest's transmit queue (the device reads from it).
pub const GUEST_TX: usize = 1;

/// A queue the worker may run.
#[derive(Clone)]
pub struct QueueSetup {
    /// Where its rings are.
    pub layout: RingLayout,
    /// Available and used index to start from.
    pub base: u16,
    /// The guest's interrupt (None: the frontend gave none; it polls).
    pub call: Option<Arc<File>>,
    /// A fresh number each time the queue is started: a node that sees a new one starts
    /// over from `base`, one that sees the same keeps its progress.
    pub start: u64,
}

/// The device as the worker runs it.
pub struct DeviceSnapshot {
    /// The guest's memory (kept mapped as long as a snapshot refers to it).
    pub memory: Arc<GuestMemory>,
    /// Queues by index (`GUEST_RX`, `GUEST_TX`); None: stopped.
    pub queues: [Option<QueueSetup>; 2],
    /// Bytes of virtio-net header before each frame (10, or 12 with VERSION_1 or MRG_RXBUF).
    pub hdr_len: usize,
    /// A received frame may span several receive chains (VIRTIO_NET_F_MRG_RXBUF).
    pub mrg_rxbuf: bool,
    /// VIRTIO_RING_F_EVENT_IDX was negotiated.
    pub event_idx: bool,
}

impl DeviceSnapshot {
    /// Bytes of virtio-net header with these features: 12 with VERSION_1 or MRG_RXBUF (the
    /// `num_buffers` field), else 10.
    pub fn header_len(version_1: bool, mrg_rxbuf: bool) -> usize {
        if version_1 || mrg_rxbuf {
            12
        } else {
            10
        }
    }

    /// Nothing configured: no memory, no queue.
    pub fn idle() -> DeviceSnapshot {
        DeviceSnapshot {
            memory: Arc::new(GuestMemory::empty()),
            queues: [None, None],
            hdr_len: 12,
            mrg_rxbuf: false,
            event_idx: false,
        }
    }
}

/// Raise the guest's interrupt: one eventfd write, only when the guest asked for it.
pub fn notify(call: &File) -> bool {
    // An eventfd adds the 8-byte value to its counter; EAGAIN (counter full) means the
    // interrupt is already pending.
    (&*call).write(&1u64.to_ne_bytes()).is_ok()
}

/// Counters of a vhost-user port beyond the common port counters.
#[derive(Default, Debug)]
pub struct DeviceCounters {
    /// Malformed rings (descriptor loops, out-of-range buffers, index jumps...): each stopped
    /// the queue and reset the connection.
    pub guest_errors: Counter,
    /// Frames from the guest dropped: too long for a buffer, shorter than the header, or with
    /// offload requests that were not negotiated.
    pub rx_bad_frames: Counter,
    /// Frames to the guest dropped because it had posted no (or too little) receive buffer.
    pub tx_no_buffers: Counter,
    /// Interrupts raised (eventfd writes).
    pub notifications: Counter,
    /// Frontend connections accepted (or made, in client mode).
    pub connections: Counter,
}

/// The state shared by the control thread and a worker's port nodes.
pub struct Shared {
    generation: AtomicU64,
    slot: Mutex<Arc<DeviceSnapshot>>,
    /// Highest generation the worker acknowledged.
    acked: AtomicU64,
    /// Each queue's next available index as the worker last left it (low 16 bits), tagged
    /// with the low 16 bits of its start number (high 16 bits).
    progress: [AtomicU32; 2],
    /// A ring error the worker met; the control thread resets the connection.
    broken: AtomicBool,
    last_error: Mutex<String>,
    /// Whether a frontend is connected.
    pub connected: AtomicBool,
    /// The counters.
    pub counters: DeviceCounters,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            generation: AtomicU64::new(1),
            slot: Mutex::new(Arc::new(DeviceSnapshot::idle())),
            acked: AtomicU64::new(0),
            progress: [AtomicU32::new(0), AtomicU32::new(0)],
            broken: AtomicBool::new(false),
            last_error: Mutex::new(String::new()),
            connected: AtomicBool::new(false),
            counters: DeviceCounters::default(),
        }
    }
}

impl Shared {
    /// The current generation (worker: one load per poll).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The snapshot of the current generation (worker, cold: after the generation changed).
    pub fn snapshot(&self) -> (u64, Arc<DeviceSnapshot>) {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        (self.generation.load(Ordering::Acquire), slot.clone())
    }

    /// Publish `next` (control thread); returns its generation.
    pub fn publish(&self, next: DeviceSnapshot) -> u64 {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Arc::new(next);
        // Under the lock, so a worker that reads the new generation then locks gets `next`
        // (or a later one).
        self.generation.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The worker runs generation `g` from now on and holds nothing older (receive node, at
    /// the start of a poll).
    #[inline]
    pub fn acknowledge(&self, g: u64) {
        self.acked.store(g, Ordering::Release);
    }

    /// The highest generation the worker acknowledged.
    pub fn acked_generation(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Wait until the worker acknowledged generation `g` (control thread). False after
    /// `timeout`: the worker is stopped or stalled, and holds the old snapshot still.
    pub fn wait_acknowledged(&self, g: u64, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.acked.load(Ordering::Acquire) >= g {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// The worker's progress on queue `q` started as `start` (worker, once per batch).
    #[inline]
    pub fn set_progress(&self, q: usize, start: u64, last_avail: u16) {
        let tagged = (start as u32) << 16 | u32::from(last_avail);
        self.progress[q].store(tagged, Ordering::Release);
    }

    /// The next available index of queue `q` started as `start`, if the worker ran it.
    pub fn progress(&self, q: usize, start: u64) -> Option<u16> {
        let tagged = self.progress[q].load(Ordering::Acquire);
        (tagged >> 16 == (start as u32) & 0xffff).then_some(tagged as u16)
    }

    /// The worker met a malformed ring (cold).
    pub fn ring_error(&self, what: String) {
        self.counters.guest_errors.add(1);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = what;
        self.broken.store(true, Ordering::Release);
    }

    /// Take the broken flag (control thread).
    pub fn take_broken(&self) -> bool {
        self.broken.swap(false, Ordering::AcqRel)
    }

    /// The last ring error met, empty if none.
    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("generation", &self.generation())
            .field("acked", &self.acked_generation())
            .field("connected", &self.connected)
            .field("counters", &self.counters)
            .finish()
    }
}

impl graph::DriverCounters for Shared {
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            ("guest_errors", c.guest_errors.get()),
            ("rx_bad_frames", c.rx_bad_frames.get()),
            ("tx_no_buffers", c.tx_no_buffers.get()),
            ("notifications", c.notifications.get()),
            ("connections", c.connections.get()),
        ]
    }

    fn state(&self) -> Option<String> {
        let connected = if self.connected.load(Ordering::Acquire) {
            "connected"
        } else {
            "waiting for the frontend"
        };
        let last = self.last_error();
        Some(if last.is_empty() {
            connected.to_string()
        } else {
            format!("{connected}; last guest error: {last}")
        })
    }
}

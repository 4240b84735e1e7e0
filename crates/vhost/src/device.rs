//! What the control thread (which speaks the vhost-user protocol) and the worker's two port
//! nodes share: the device as the frontend configured it, handed to the worker as an
//! immutable `DeviceSnapshot` under a generation number, the worker's acknowledgement of each
//! generation, each queue's progress, and the port's own counters.
//!
//! The protocol it implements between the threads: the control thread publishes a snapshot
//! (stopping, starting or moving queues) and, before it reports a queue's index to the
//! frontend or lets go of guest memory, waits until every receive node (an input node, polled
//! every round; one per worker and queue pair it runs) acknowledged that generation. A
//! worker's nodes of the port run on that worker's thread and check the generation before
//! they touch a ring, so an acknowledgement means no node of that worker will touch a ring of
//! an older generation again. The worker takes the slot's lock only when
//! the generation changed (a reconfiguration), never per packet.

use crate::memory::GuestMemory;
use crate::net_header::Offloads;
use crate::ring::RingLayout;
use graph::Counter;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Queue 0: the guest's (first) receive queue (the device writes into it).
pub const GUEST_RX: usize = 0;
/// Queue 1: the guest's (first) transmit queue (the device reads from it).
pub const GUEST_TX: usize = 1;
/// Most queue pairs a port offers (virtio-net multiqueue: pair `k` is receive queue `2k` and
/// transmit queue `2k + 1`).
pub const MAX_QUEUE_PAIRS: usize = 8;
/// Most queues of a port.
pub const MAX_QUEUES: usize = 2 * MAX_QUEUE_PAIRS;
/// Most nodes (one per worker and queue pair at most) that acknowledge generations.
const MAX_ACKERS: usize = 64;

/// The guest's receive queue of pair `pair`.
pub const fn guest_rx(pair: usize) -> usize {
    2 * pair
}

/// The guest's transmit queue of pair `pair`.
pub const fn guest_tx(pair: usize) -> usize {
    2 * pair + 1
}

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
    /// Queues by index (`guest_rx(pair)`, `guest_tx(pair)`); None: stopped.
    pub queues: [Option<QueueSetup>; MAX_QUEUES],
    /// Bytes of virtio-net header before each frame (10, or 12 with VERSION_1 or MRG_RXBUF).
    pub hdr_len: usize,
    /// A received frame may span several receive chains (VIRTIO_NET_F_MRG_RXBUF).
    pub mrg_rxbuf: bool,
    /// VIRTIO_RING_F_EVENT_IDX was negotiated.
    pub event_idx: bool,
    /// VIRTIO_F_RING_PACKED was negotiated: every queue is a packed ring (its layout's
    /// `avail` and `used` are the driver's and device's event suppression structures, its
    /// base carries the wrap counter in bit 15).
    pub packed: bool,
    /// Offloads the guest may ask of us in the frames it sends.
    pub sends: Offloads,
    /// Offloads the guest takes in the frames we hand it.
    pub takes: Offloads,
    /// The worker that receives from each pair's transmit queue: a receive node built for a
    /// worker (`VhostRx::on_worker`) runs its queue only while it is named here, so a queue
    /// moves between workers by a new snapshot (the rebalancer's).
    pub rx_workers: [u8; MAX_QUEUE_PAIRS],
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

    /// The layout and size of each running queue, e.g. "; rings: packed (rx0 256, tx0 256)";
    /// empty when none runs.
    pub fn rings(&self) -> String {
        let queues: Vec<String> = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(q, s)| {
                let way = if q % 2 == GUEST_TX { "tx" } else { "rx" };
                s.as_ref()
                    .map(|s| format!("{way}{} {}", q / 2, s.layout.size))
            })
            .collect();
        if queues.is_empty() {
            return String::new();
        }
        let kind = if self.packed { "packed" } else { "split" };
        format!("; rings: {kind} ({})", queues.join(", "))
    }

    /// Nothing configured: no memory, no queue.
    pub fn idle() -> DeviceSnapshot {
        DeviceSnapshot {
            memory: Arc::new(GuestMemory::empty()),
            queues: Default::default(),
            hdr_len: 12,
            mrg_rxbuf: false,
            event_idx: false,
            packed: false,
            sends: Offloads::default(),
            takes: Offloads::default(),
            rx_workers: [0; MAX_QUEUE_PAIRS],
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
    /// Frames from the guest dropped: longer than 64 KiB or shorter than an Ethernet header.
    pub rx_bad_frames: Counter,
    /// Frames from the guest dropped for their virtio-net header: an offload that was not
    /// negotiated, a checksum field outside the frame, a super-packet without a segment size.
    pub rx_bad_headers: Counter,
    /// Frames from the guest larger than an ordinary buffer dropped because the worker has
    /// no jumbo buffers at all (when it has some, such frames wait until one is free).
    pub rx_no_jumbo_buffers: Counter,
    /// Super-packets (TSO) received from the guest.
    pub rx_super_packets: Counter,
    /// Super-packets handed to the guest whole (it negotiated TSO).
    pub tx_super_packets: Counter,
    /// Super-packets cut into segments in software for a guest without TSO.
    pub tx_segmented: Counter,
    /// Partial checksums finished in software for a guest without checksum offload.
    pub tx_checksums_finished: Counter,
    /// Packets to the guest dropped because they could not be segmented (malformed headers).
    pub tx_bad_super_packets: Counter,
    /// Frames to the guest dropped because it had posted no (or too little) receive buffer.
    pub tx_no_buffers: Counter,
    /// Guest memory files the frontend shrank under their mapping (each read as zeroes from
    /// then on, and reset the connection).
    pub memory_shrunk: Counter,
    /// Interrupts raised (eventfd writes).
    pub notifications: Counter,
    /// Frontend connections accepted (or made, in client mode).
    pub connections: Counter,
}

/// The state shared by the control thread and a worker's port nodes.
pub struct Shared {
    generation: AtomicU64,
    slot: Mutex<Arc<DeviceSnapshot>>,
    /// Highest generation each acknowledging node (see `register_acker`) acknowledged.
    acked: [AtomicU64; MAX_ACKERS],
    /// How many nodes acknowledge.
    ackers: AtomicUsize,
    /// Each queue's next available index as the worker last left it (low 16 bits), tagged
    /// with the low 16 bits of its start number (high 16 bits).
    progress: [AtomicU32; MAX_QUEUES],
    /// A ring error the worker met; the control thread resets the connection.
    broken: AtomicBool,
    /// Written with `broken`, so the control thread resets at once instead of at its next
    /// tick (an eventfd; None if none could be made: the tick still finds the flag).
    broken_bell: Option<OwnedFd>,
    last_error: Mutex<String>,
    /// Whether a frontend is connected.
    pub connected: AtomicBool,
    /// The counters.
    pub counters: DeviceCounters,
    /// The guest's kicks on each pair's transmit queue, for a worker that sleeps.
    pub kicks: [KickWaiter; MAX_QUEUE_PAIRS],
}

/// How a sleeping worker hears the guest's kicks on its transmit queue: an epoll set that lives
/// as long as the port (the worker's wait descriptor) holding the kick eventfd of the current
/// connection. The worker asks for kicks only just before it sleeps (`Ring::arm_kick`, of
/// either layout); while it polls, the guest does not kick at all.
pub struct KickWaiter {
    epoll: Option<OwnedFd>,
    kick: Mutex<Option<File>>,
}

impl Default for KickWaiter {
    fn default() -> Self {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new descriptor
        // we own.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        KickWaiter {
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            epoll: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
            kick: Mutex::new(None),
        }
    }
}

impl KickWaiter {
    /// The descriptor a sleeping worker waits on (None: the kernel refused an epoll set; the
    /// worker then sleeps only its bounded timeout).
    pub fn wait_fd(&self) -> Option<RawFd> {
        self.epoll.as_ref().map(|e| e.as_raw_fd())
    }

    /// The guest's new kick eventfd (None: none now). Control thread.
    pub fn set(&self, fd: Option<File>) {
        let mut kick = self.kick.lock().unwrap_or_else(|p| p.into_inner());
        let Some(epoll) = &self.epoll else {
            *kick = fd;
            return;
        };
        if let Some(old) = kick.take() {
            // SAFETY: both descriptors are open; DEL takes no event.
            unsafe {
                libc::epoll_ctl(
                    epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    old.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
        }
        if let Some(f) = &fd {
            let raw = f.as_raw_fd();
            // Draining must never block the worker.
            // SAFETY: fcntl on an open descriptor with integer arguments.
            unsafe {
                let flags = libc::fcntl(raw, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
            }
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: 0,
            };
            // SAFETY: both descriptors are open; `ev` is a valid event for the call.
            unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, raw, &mut ev) };
        }
        *kick = fd;
    }

    /// Reset the kick eventfd's counter after a sleep, so the next sleep waits for a new kick.
    /// Worker, cold path.
    pub fn drain(&self) {
        let kick = self.kick.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = kick.as_ref() {
            let mut v = [0u8; 8];
            // A non-blocking read: EAGAIN when there was no kick.
            let _ = (&*f).read(&mut v);
        }
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            generation: AtomicU64::new(1),
            slot: Mutex::new(Arc::new(DeviceSnapshot::idle())),
            acked: std::array::from_fn(|_| AtomicU64::new(0)),
            ackers: AtomicUsize::new(0),
            progress: std::array::from_fn(|_| AtomicU32::new(0)),
            broken: AtomicBool::new(false),
            broken_bell: {
                // SAFETY: eventfd takes no pointers; a non-negative result is a new
                // descriptor we own.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                // SAFETY: `fd` is that fresh descriptor.
                (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
            },
            last_error: Mutex::new(String::new()),
            connected: AtomicBool::new(false),
            counters: DeviceCounters::default(),
            kicks: Default::default(),
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

    /// A slot for one more acknowledging node (a receive node, at its construction): every
    /// worker that runs rings of this port has one. None past `MAX_ACKERS` (a configuration
    /// the dataplane refuses before).
    pub fn register_acker(&self) -> Option<usize> {
        let slot = self.ackers.fetch_add(1, Ordering::AcqRel);
        (slot < MAX_ACKERS).then_some(slot)
    }

    /// The worker of acker `slot` runs generation `g` from now on and holds nothing older
    /// (its receive node, at the start of a poll).
    #[inline]
    pub fn acknowledge(&self, slot: usize, g: u64) {
        if let Some(a) = self.acked.get(slot) {
            a.store(g, Ordering::Release);
        }
    }

    /// The lowest generation any acker acknowledged (the current one when there is none).
    pub fn acked_generation(&self) -> u64 {
        let n = self.ackers.load(Ordering::Acquire).min(MAX_ACKERS);
        self.acked[..n]
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .min()
            .unwrap_or_else(|| self.generation())
    }

    /// Wait until every worker acknowledged generation `g` (control thread). False after
    /// `timeout`: a worker is stopped or stalled, and holds the old snapshot still.
    pub fn wait_acknowledged(&self, g: u64, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.acked_generation() >= g {
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
        if let Some(bell) = &self.broken_bell {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to a descriptor we own; a full counter
            // (EAGAIN) still leaves it readable.
            let _ = unsafe { libc::write(bell.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    /// The frontend shrank the file of the guest memory region at `gpa` (control thread).
    pub fn memory_shrunk(&self, gpa: u64) {
        self.counters.memory_shrunk.add(1);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
            format!("the frontend shrank the file of guest memory at {gpa:#x} under its mapping");
    }

    /// Take the broken flag (control thread), emptying its bell.
    pub fn take_broken(&self) -> bool {
        if let Some(bell) = &self.broken_bell {
            let mut v = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live buffer from a descriptor we own
            // (non-blocking: EAGAIN when it was not rung).
            let _ = unsafe { libc::read(bell.as_raw_fd(), v.as_mut_ptr().cast(), v.len()) };
        }
        self.broken.swap(false, Ordering::AcqRel)
    }

    /// The descriptor that becomes readable when the worker reports a broken ring.
    pub fn broken_fd(&self) -> Option<RawFd> {
        self.broken_bell.as_ref().map(|b| b.as_raw_fd())
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
            ("rx_bad_headers", c.rx_bad_headers.get()),
            ("rx_no_jumbo_buffers", c.rx_no_jumbo_buffers.get()),
            ("rx_super_packets", c.rx_super_packets.get()),
            ("tx_no_buffers", c.tx_no_buffers.get()),
            ("tx_super_packets", c.tx_super_packets.get()),
            ("tx_segmented", c.tx_segmented.get()),
            ("tx_checksums_finished", c.tx_checksums_finished.get()),
            ("tx_bad_super_packets", c.tx_bad_super_packets.get()),
            ("memory_shrunk", c.memory_shrunk.get()),
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
        let (_, snap) = self.snapshot();
        let offloads = format!(
            "offloads from the guest: {}; to the guest: {}{}",
            snap.sends,
            snap.takes,
            snap.rings()
        );
        Some(if last.is_empty() {
            format!("{connected}; {offloads}")
        } else {
            format!("{connected}; {offloads}; last guest error: {last}")
        })
    }
}

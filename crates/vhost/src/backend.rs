//! The vhost-user protocol, backend side: a control thread per port that listens on (server
//! mode) or connects to (client mode) the frontend's socket, answers its requests through
//! rust-vmm's `vhost` crate, keeps the device's configuration (features, memory table, the two
//! queues) and publishes it to the worker as `DeviceSnapshot`s. When the frontend goes away
//! (QEMU stops or restarts) it stops the queues, releases the guest's memory once the worker
//! let go of it, and waits for the next connection; when the worker met a malformed ring it
//! drops the connection, which resets the device.
//!
//! It owns the socket and the thread. It never touches a ring (the worker does) and never
//! blocks a worker: the worker only ever sees a new generation number.

use crate::device::{
    guest_tx, DeviceSnapshot, QueueSetup, Shared, GUEST_TX, MAX_QUEUES, MAX_QUEUE_PAIRS,
};
use crate::memory::{GuestMemory, RegionSpec};
use crate::net_header::{guest_sends, guest_takes, OFFLOAD_FEATURES};
use crate::packed_ring::WRAP_BIT;
use crate::ring::RingLayout;
use crate::socket_file::{SocketAccess, SocketFile};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVirtioFeatures,
    VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{
    Backend, BackendListener, BackendReqHandler, Error as VuError, GpuBackend, Listener,
    Result as VuResult, VhostUserBackendReqHandlerMut,
};
use vhost::VhostUserMemoryRegionBase;

/// virtio 1.0 (little-endian, 12-byte net header).
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
/// Receive buffers may be merged (a frame over several receive chains).
pub const VIRTIO_NET_F_MRG_RXBUF: u64 = 1 << 15;
/// Event-index notification suppression.
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;
/// Several queue pairs (offered when the port has more than one).
pub const VIRTIO_NET_F_MQ: u64 = 1 << 22;
/// Packed virtqueues (`packed_ring`) instead of split ones.
pub const VIRTIO_F_RING_PACKED: u64 = 1 << 34;
/// What this backend offers (plus `VIRTIO_NET_F_MQ` on a port with several queue pairs).
pub const OFFERED_FEATURES: u64 = VIRTIO_F_VERSION_1
    | VIRTIO_NET_F_MRG_RXBUF
    | OFFLOAD_FEATURES
    | VIRTIO_RING_F_EVENT_IDX
    | VIRTIO_F_RING_PACKED
    | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();

/// How long the control thread waits for the worker to let go of a generation.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the control thread looks at its stop and broken flags while it waits.
const TICK_MS: i32 = 100;

/// Which side of the socket vecplane is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketMode {
    /// vecplane creates the socket and the frontend (QEMU, virtio-user) connects.
    Server,
    /// The frontend created the socket (QEMU `server=on`); vecplane connects and reconnects.
    Client,
}

/// One queue as the frontend set it up.
#[derive(Default)]
struct QueueState {
    size: u16,
    addr: Option<(u64, u64, u64)>,
    base: u16,
    call: Option<Arc<File>>,
    kicked: bool,
    enabled: bool,
    /// Start number while the worker runs it.
    running: Option<u64>,
}

/// The device's configuration, changed by the frontend's requests.
struct Device {
    shared: Arc<Shared>,
    features: u64,
    protocol: u64,
    memory: Arc<GuestMemory>,
    queues: [QueueState; MAX_QUEUES],
    /// Queue pairs this port offers (1..=MAX_QUEUE_PAIRS).
    pairs: usize,
    /// The worker receiving from each pair (kept across connections).
    rx_workers: [u8; MAX_QUEUE_PAIRS],
    next_start: u64,
    /// Where messages come from.
    label: String,
}

fn bad(why: &'static str) -> VuError {
    VuError::InvalidOperation(why)
}

impl Device {
    /// Pair `k` received by worker `k % workers` to begin with.
    fn new(shared: Arc<Shared>, label: String, pairs: usize, workers: usize) -> Device {
        Device {
            shared,
            features: 0,
            protocol: 0,
            memory: Arc::new(GuestMemory::empty()),
            queues: Default::default(),
            pairs,
            rx_workers: std::array::from_fn(|k| (k % workers.clamp(1, 256)) as u8),
            next_start: 1,
            label,
        }
    }

    fn packed(&self) -> bool {
        self.features & VIRTIO_F_RING_PACKED != 0
    }

    fn protocol_features_acked(&self) -> bool {
        self.features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() != 0
    }

    fn queue(&mut self, index: u32) -> VuResult<&mut QueueState> {
        let index = index as usize;
        if index >= 2 * self.pairs {
            return Err(VuError::InvalidParam);
        }
        self.queues.get_mut(index).ok_or(VuError::InvalidParam)
    }

    /// The virtio features this port offers.
    fn offered(&self) -> u64 {
        if self.pairs > 1 {
            OFFERED_FEATURES | VIRTIO_NET_F_MQ
        } else {
            OFFERED_FEATURES
        }
    }

    /// Publish what the worker must run now and wait until it does: false when a worker did
    /// not take it in time (it will when it next polls).
    fn apply(&mut self) -> bool {
        let mut queues: [Option<QueueSetup>; MAX_QUEUES] = Default::default();
        for (q, st) in self.queues.iter_mut().enumerate() {
            let Some(start) = st.running else { continue };
            let Some((d, a, u)) = st.addr else { continue };
            let layout = if self.features & VIRTIO_F_RING_PACKED != 0 {
                crate::packed_ring::translate(&self.memory, st.size, d, a, u).and_then(|l| {
                    // The base's slot (below its wrap bit) must be inside the ring.
                    if st.base & !WRAP_BIT < st.size {
                        Ok(l)
                    } else {
                        Err(format!(
                            "packed ring base {:#x} is past the ring of {}",
                            st.base, st.size
                        ))
                    }
                })
            } else {
                RingLayout::translate(&self.memory, st.size, d, a, u)
            };
            match layout {
                Ok(layout) => {
                    queues[q] = Some(QueueSetup {
                        layout,
                        base: st.base,
                        call: st.call.clone(),
                        start,
                    })
                }
                Err(why) => {
                    tracing::warn!("{}: queue {q} stopped: {why}", self.label);
                    st.running = None;
                }
            }
        }
        let version_1 = self.features & VIRTIO_F_VERSION_1 != 0;
        let mrg_rxbuf = self.features & VIRTIO_NET_F_MRG_RXBUF != 0;
        let snap = DeviceSnapshot {
            memory: self.memory.clone(),
            queues,
            hdr_len: DeviceSnapshot::header_len(version_1, mrg_rxbuf),
            mrg_rxbuf,
            event_idx: self.features & VIRTIO_RING_F_EVENT_IDX != 0,
            packed: self.packed(),
            sends: guest_sends(self.features),
            takes: guest_takes(self.features),
            rx_workers: self.rx_workers,
        };
        let g = self.shared.publish(snap);
        if !self.shared.wait_acknowledged(g, ACK_TIMEOUT) {
            tracing::warn!(
                "{}: the worker did not take the new configuration within {ACK_TIMEOUT:?} \
                 (stopped or stalled); it will when it next polls",
                self.label
            );
            return false;
        }
        true
    }

    /// Stop queue `q` if it runs; its base becomes where the worker left it.
    fn stop(&mut self, q: usize) {
        let Some(start) = self.queues[q].running.take() else {
            return;
        };
        self.apply();
        if let Some(at) = self.shared.progress(q, start) {
            self.queues[q].base = at;
        }
    }

    /// Start queue `q` when the frontend gave all it needs.
    fn maybe_start(&mut self, q: usize) {
        let ready = {
            let st = &self.queues[q];
            st.running.is_none()
                && st.kicked
                && st.addr.is_some()
                && st.size > 0
                && (st.enabled || !self.protocol_features_acked())
                && self.memory.regions() > 0
        };
        if ready {
            let start = self.next_start;
            self.next_start += 1;
            self.queues[q].running = Some(start);
            self.shared.set_progress(q, start, self.queues[q].base);
            self.apply();
        }
    }

    /// Receive from pair `pair`'s transmit queue on worker `worker` from now on: a running
    /// queue stops where the old worker left it (every frame it took is handed on) and starts
    /// there on the new one; the guest's frames wait in its ring meanwhile.
    fn move_rx(&mut self, pair: usize, worker: usize) -> Result<(), String> {
        if pair >= self.pairs {
            return Err(format!(
                "queue pair {pair}; accepted: 0 to {}",
                self.pairs - 1
            ));
        }
        let w = u8::try_from(worker).map_err(|_| format!("worker {worker} is out of range"))?;
        let from = self.rx_workers[pair];
        if from == w {
            return Ok(());
        }
        self.rx_workers[pair] = w;
        let q = guest_tx(pair);
        let Some(start) = self.queues[q].running.take() else {
            self.apply();
            return Ok(());
        };
        if !self.apply() {
            // A worker has not let go yet: the new one must not start where the ring may still
            // move. Give the queue back to the old worker as it was (same start number: it
            // keeps its place).
            self.rx_workers[pair] = from;
            self.queues[q].running = Some(start);
            self.apply();
            return Err(format!(
                "a worker did not let go of the queue within {ACK_TIMEOUT:?}; it stays on \
                 worker {from}"
            ));
        }
        if let Some(at) = self.shared.progress(q, start) {
            self.queues[q].base = at;
        }
        self.maybe_start(q);
        Ok(())
    }

    /// Forget everything the frontend set (disconnect or reset); the worker lets go first.
    fn reset(&mut self) {
        if let Some(gpa) = self.memory.shrunk_region() {
            self.shared.memory_shrunk(gpa);
        }
        for st in &mut self.queues {
            *st = QueueState::default();
        }
        for k in &self.shared.kicks {
            k.set(None);
        }
        self.memory = Arc::new(GuestMemory::empty());
        self.features = 0;
        self.protocol = 0;
        self.apply();
    }
}

impl VhostUserBackendReqHandlerMut for Device {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.reset();
        Ok(())
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(self.offered())
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !self.offered() != 0 {
            return Err(VuError::InvalidParam);
        }
        self.features = features;
        if self.queues.iter().any(|q| q.running.is_some()) {
            self.apply();
        }
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<Vec<VhostUserMemoryRegionBase>>> {
        let specs: Vec<RegionSpec> = ctx
            .iter()
            .map(|r| RegionSpec {
                gpa: r.guest_phys_addr,
                len: r.memory_size,
                uva: r.user_addr,
                mmap_offset: r.mmap_offset,
            })
            .collect();
        let memory = GuestMemory::map(&specs, files).map_err(|e| {
            tracing::warn!("{}: memory table refused: {e}", self.label);
            VuError::InvalidParam
        })?;
        // Running queues move to the new table (same start, same progress); the old table is
        // released once the worker acknowledged.
        self.memory = Arc::new(memory);
        self.apply();
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        let size = u16::try_from(num).map_err(|_| VuError::InvalidParam)?;
        // Packed rings may have any size; both layouts are checked again when the queue
        // starts (the features may come later from some frontends).
        let valid = if self.packed() {
            (1..=crate::packed_ring::MAX_PACKED_SIZE).contains(&size)
        } else {
            crate::ring::valid_queue_size(size)
        };
        if !valid {
            return Err(VuError::InvalidParam);
        }
        self.queue(index)?.size = size;
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        let q = self.queue(index)?;
        q.addr = Some((descriptor, available, used));
        if q.running.is_some() {
            self.apply();
        }
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        let packed = self.packed();
        let label = self.label.clone();
        let q = self.queue(index)?;
        if packed {
            // Packed: bits 0-14 the next slot to read, bit 15 the avail wrap counter; QEMU
            // (since 4.2) also sends the used slot and wrap counter in bits 16-31, DPDK's
            // virtio-user sends 0 there. This device returns chains in order and all of them
            // before it reports a base, so it starts the used side where the avail side is.
            let (avail, used) = (base as u16, (base >> 16) as u16);
            if used != 0 && used != avail {
                tracing::warn!(
                    "{label}: queue {index}: packed ring base: used {used:#x} behind avail \
                     {avail:#x}; buffers in flight from before are not returned"
                );
            }
            q.base = avail;
        } else {
            q.base = u16::try_from(base).map_err(|_| VuError::InvalidParam)?;
        }
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        self.queue(index)?;
        let q = index as usize;
        self.stop(q);
        // A ring stopped by GET_VRING_BASE restarts only with a new kick.
        self.queues[q].kicked = false;
        self.queues[q].call = None;
        let base = u32::from(self.queues[q].base);
        // Packed: the used slot and wrap counter in the upper half, which QEMU reads back
        // (they equal the avail side: every chain taken was returned). Split: the index.
        let num = if self.packed() {
            base | base << 16
        } else {
            base
        };
        Ok(VhostUserVringState::new(index, num))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        // The worker polls and asks the guest not to kick, except just before it sleeps
        // (adaptive polling): then the guest's transmit kicks wake it.
        self.queue(u32::from(index))?.kicked = true;
        let q = usize::from(index);
        if q % 2 == GUEST_TX {
            self.shared.kicks[q / 2].set(fd);
        }
        self.maybe_start(usize::from(index));
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let q = self.queue(u32::from(index))?;
        q.call = fd.map(Arc::new);
        if q.running.is_some() {
            self.apply();
        }
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        self.queue(u32::from(index))?;
        Ok(())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        Ok(VhostUserProtocolFeatures::REPLY_ACK | VhostUserProtocolFeatures::MQ)
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        self.protocol = features;
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(self.pairs as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        self.queue(index)?.enabled = enable;
        let q = index as usize;
        if enable {
            self.maybe_start(q);
        } else {
            self.stop(q);
        }
        Ok(())
    }

    fn get_config(&mut self, _: u32, _: u32, _: VhostUserConfigFlags) -> VuResult<Vec<u8>> {
        Err(bad("GET_CONFIG is not supported"))
    }

    fn set_config(&mut self, _: u32, _: &[u8], _: VhostUserConfigFlags) -> VuResult<()> {
        Err(bad("SET_CONFIG is not supported"))
    }

    fn set_backend_req_fd(&mut self, _backend: Backend) {}

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> VuResult<()> {
        Err(bad("not a GPU"))
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> VuResult<File> {
        Err(bad("shared objects are not supported"))
    }

    fn get_inflight_fd(&mut self, _: &VhostUserInflight) -> VuResult<(VhostUserInflight, File)> {
        Err(bad("inflight tracking is not supported"))
    }

    fn set_inflight_fd(&mut self, _: &VhostUserInflight, _: File) -> VuResult<()> {
        Err(bad("inflight tracking is not supported"))
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        Err(bad("memory slots are not supported"))
    }

    fn add_mem_region(
        &mut self,
        _: &VhostUserSingleMemoryRegion,
        _: File,
        _: Option<bool>,
    ) -> VuResult<Option<VhostUserMemoryRegionBase>> {
        Err(bad("memory slots are not supported"))
    }

    fn remove_mem_region(&mut self, _: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        Err(bad("memory slots are not supported"))
    }

    fn set_device_state_fd(
        &mut self,
        _: VhostTransferStateDirection,
        _: VhostTransferStatePhase,
        _: File,
    ) -> VuResult<Option<File>> {
        Err(bad("device state transfer is not supported"))
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        Err(bad("device state transfer is not supported"))
    }

    fn get_shmem_config(&mut self) -> VuResult<VhostUserShMemConfig> {
        Err(bad("shared memory regions are not supported"))
    }

    fn set_log_base(&mut self, _: &VhostUserLog, _: File) -> VuResult<()> {
        Err(bad("dirty logging (live migration) is not supported"))
    }
}

/// A vhost-user port's device: its control thread and what it shares with the worker.
pub struct VhostUserDevice {
    shared: Arc<Shared>,
    /// The configuration the control thread serves (the rebalancer moves queues through it).
    device: Arc<Mutex<Device>>,
    socket: PathBuf,
    mode: SocketMode,
    stop: Arc<AtomicBool>,
    /// The frontend's connection while one is served (a second handle on it), so closing the
    /// port can wake a control thread that waits in the middle of a message.
    connection: Arc<Mutex<Option<UnixStream>>>,
    thread: Option<JoinHandle<()>>,
    /// The server-mode socket file, removed after the thread (and its listener) ended.
    _socket_file: Option<SocketFile>,
}

/// Why a vhost-user port could not open.
#[derive(Debug, thiserror::Error)]
#[error("vhost-user port on socket `{socket}`: {why}")]
pub struct OpenError {
    /// The socket path.
    pub socket: String,
    /// What went wrong.
    pub why: String,
}

impl VhostUserDevice {
    /// Listen on `socket` (server mode: created mode 0600, replacing a stale socket file but
    /// nothing else) or start
    /// connecting to it (client mode: retried until the frontend is there), and serve
    /// frontends one after the other until dropped.
    /// `pairs` (1..=`MAX_QUEUE_PAIRS`) is how many queue pairs the port offers.
    pub fn open(
        socket: &Path,
        mode: SocketMode,
        pairs: usize,
    ) -> Result<VhostUserDevice, OpenError> {
        VhostUserDevice::open_on(socket, mode, pairs, 1)
    }

    /// `open`, with pair `k` received by worker `k % workers` until `move_rx` moves it.
    pub fn open_on(
        socket: &Path,
        mode: SocketMode,
        pairs: usize,
        workers: usize,
    ) -> Result<VhostUserDevice, OpenError> {
        VhostUserDevice::open_with(socket, mode, pairs, workers, &SocketAccess::default())
    }

    /// `open_on`, a server-mode socket created with `access` (its mode and group; a
    /// client-mode socket is the frontend's and `access` does not apply).
    pub fn open_with(
        socket: &Path,
        mode: SocketMode,
        pairs: usize,
        workers: usize,
        access: &SocketAccess,
    ) -> Result<VhostUserDevice, OpenError> {
        let err = |why: String| OpenError {
            socket: socket.display().to_string(),
            why,
        };
        if !(1..=MAX_QUEUE_PAIRS).contains(&pairs) {
            return Err(err(format!(
                "{pairs} queue pairs; accepted: 1 to {MAX_QUEUE_PAIRS}"
            )));
        }
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let label = format!("vhost-user {}", socket.display());
        let (listener, socket_file) = match mode {
            SocketMode::Server => {
                let (l, file) = crate::socket_file::bind(socket, access).map_err(err)?;
                l.set_nonblocking(true).map_err(|e| err(e.to_string()))?;
                (Some(Listener::from(l)), Some(file))
            }
            SocketMode::Client => (None, None),
        };
        let connection = Arc::new(Mutex::new(None));
        let device = Arc::new(Mutex::new(Device::new(
            shared.clone(),
            label.clone(),
            pairs,
            workers,
        )));
        let (sh, st, path) = (shared.clone(), stop.clone(), socket.to_path_buf());
        let (conn, dev) = (connection.clone(), device.clone());
        let thread = std::thread::Builder::new()
            .name("vhost-user".into())
            .spawn(move || control_loop(listener, path, (sh, dev), st, conn, label))
            .map_err(|e| err(format!("cannot start its thread: {e}")))?;
        Ok(VhostUserDevice {
            shared,
            device,
            socket: socket.to_path_buf(),
            mode,
            stop,
            connection,
            thread: Some(thread),
            _socket_file: socket_file,
        })
    }

    /// What the worker's nodes share with the control thread.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Server or client.
    pub fn mode(&self) -> SocketMode {
        self.mode
    }

    /// The worker receiving from queue pair `pair`.
    pub fn rx_worker(&self, pair: usize) -> usize {
        let d = self.device.lock().unwrap_or_else(|p| p.into_inner());
        d.rx_workers.get(pair).map_or(0, |&w| usize::from(w))
    }

    /// Receive from queue pair `pair` on `worker` from now on (see `Device::move_rx`); waits
    /// until the workers took it (at most about two of their polls, or the acknowledgement
    /// timeout for a stalled one).
    pub fn move_rx(&self, pair: usize, worker: usize) -> Result<(), String> {
        self.device
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .move_rx(pair, worker)
    }
}

impl Drop for VhostUserDevice {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // A frontend that stopped in the middle of a message leaves the control thread
        // waiting in a read: end the connection under it.
        if let Some(c) = self
            .connection
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Wait up to one tick for `fd` to become readable; false at once when `bell` (the worker's
/// broken-ring bell) rings first.
fn readable(fd: i32, bell: Option<i32>) -> bool {
    let mut p = [fd, bell.unwrap_or(-1)].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: two valid pollfds for the duration of the call (poll ignores a negative fd).
    let r = unsafe { libc::poll(p.as_mut_ptr(), 2, TICK_MS) };
    r > 0 && p[1].revents == 0 && p[0].revents != 0
}

fn control_loop(
    mut listener: Option<Listener>,
    path: PathBuf,
    (shared, device): (Arc<Shared>, Arc<Mutex<Device>>),
    stop: Arc<AtomicBool>,
    connection: Arc<Mutex<Option<UnixStream>>>,
    label: String,
) {
    while !stop.load(Ordering::Acquire) {
        let handler = match listener.as_mut() {
            Some(l) => {
                if !readable(l.as_raw_fd(), None) {
                    continue;
                }
                let Ok(mut bl) = BackendListener::new(l, device.clone()) else {
                    continue;
                };
                match bl.accept() {
                    Ok(Some(h)) => h,
                    _ => continue,
                }
            }
            None => match BackendReqHandler::connect(&path.to_string_lossy(), device.clone()) {
                Ok(h) => h,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(TICK_MS as u64));
                    continue;
                }
            },
        };
        shared.counters.connections.add(1);
        shared.connected.store(true, Ordering::Release);
        *connection.lock().unwrap_or_else(|p| p.into_inner()) = handler.try_clone_connection().ok();
        // The port may have closed just before the handle was stored.
        if !stop.load(Ordering::Acquire) {
            serve(handler, &device, &shared, &stop, &label);
        }
        connection.lock().unwrap_or_else(|p| p.into_inner()).take();
        shared.connected.store(false, Ordering::Release);
        if stop.load(Ordering::Acquire) {
            // The port is closing with its graph: no worker will read the device again.
            break;
        }
        device.lock().unwrap_or_else(|p| p.into_inner()).reset();
        // A report about the rings just dropped must not reset the next frontend.
        shared.take_broken();
    }
}

/// Answer one frontend until it goes away, the worker reports a broken ring, or the port
/// closes.
fn serve(
    mut handler: BackendReqHandler<Mutex<Device>>,
    device: &Mutex<Device>,
    shared: &Shared,
    stop: &AtomicBool,
    label: &str,
) {
    while !stop.load(Ordering::Acquire) {
        if shared.take_broken() {
            tracing::warn!(
                "{label}: malformed ring ({}); resetting the connection",
                shared.last_error()
            );
            return;
        }
        let shrunk = device
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .memory
            .shrunk_region();
        if let Some(gpa) = shrunk {
            // The reset that follows counts it.
            tracing::warn!(
                "{label}: the frontend shrank the file of guest memory at {gpa:#x} under its \
                 mapping (now zeroes); resetting the connection"
            );
            return;
        }
        if !readable(handler.as_raw_fd(), shared.broken_fd()) {
            continue;
        }
        match early_vring_enable(handler.as_raw_fd(), device) {
            Early::NotOne => {}
            Early::Handled => continue,
            Early::Failed(e) => {
                tracing::warn!("{label}: early SET_VRING_ENABLE: {e}; closing the connection");
                return;
            }
        }
        match handler.handle_request() {
            Ok(()) => {}
            Err(VuError::Disconnected) | Err(VuError::PartialMessage) => return,
            Err(e) => {
                tracing::warn!("{label}: request failed: {e}; closing the connection");
                return;
            }
        }
    }
}

/// vhost-user request code of SET_VRING_ENABLE.
const REQ_SET_VRING_ENABLE: u32 = 18;
/// Message header flags: protocol version 1, a reply, the frontend wants a reply.
const MSG_VERSION_1: u32 = 1;
const MSG_REPLY: u32 = 1 << 2;
const MSG_NEED_REPLY: u32 = 1 << 3;
/// Header (request, flags, size) and a vring state (index, num).
const HDR_LEN: usize = 12;
const ENABLE_MSG_LEN: usize = HDR_LEN + 8;

/// What [`early_vring_enable`] did with the next message.
enum Early {
    /// It is not an early SET_VRING_ENABLE: the vhost crate handles it.
    NotOne,
    /// It was one, and it was applied (and acknowledged when asked).
    Handled,
    /// It was one, and the socket failed.
    Failed(std::io::Error),
}

/// QEMU's virtio-net sends SET_VRING_ENABLE when the guest's driver sets its features, which is
/// before the device starts and so before SET_FEATURES: QEMU counts VHOST_USER_F_PROTOCOL_FEATURES
/// as negotiated once the backend offered it. rust-vmm's `vhost` refuses the request until
/// SET_FEATURES acked that bit, and the connection would close (QEMU then falls back to its own
/// userspace virtio and the guest's NIC never passes a packet). While the bit is not acked,
/// such a message is taken off the socket here: peeked, read, applied to the device and
/// acknowledged if the frontend asked (REPLY_ACK). Anything else is left to the crate.
fn early_vring_enable(fd: i32, device: &Mutex<Device>) -> Early {
    let mut msg = [0u8; ENABLE_MSG_LEN];
    let word = |m: &[u8; ENABLE_MSG_LEN], at: usize| {
        u32::from_le_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]])
    };
    // SAFETY: `msg` is a writable buffer of ENABLE_MSG_LEN bytes for the duration of the call.
    let n = unsafe {
        libc::recv(
            fd,
            msg.as_mut_ptr().cast(),
            ENABLE_MSG_LEN,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n != ENABLE_MSG_LEN as isize || word(&msg, 0) != REQ_SET_VRING_ENABLE || word(&msg, 8) != 8 {
        return Early::NotOne;
    }
    let mut dev = device.lock().unwrap_or_else(|p| p.into_inner());
    if dev.protocol_features_acked() {
        return Early::NotOne;
    }
    // The same bytes, now taken off the socket (the message carries no file descriptor).
    // SAFETY: as above.
    let n = unsafe {
        libc::recv(
            fd,
            msg.as_mut_ptr().cast(),
            ENABLE_MSG_LEN,
            libc::MSG_DONTWAIT,
        )
    };
    if n != ENABLE_MSG_LEN as isize {
        return Early::Failed(std::io::Error::last_os_error());
    }
    let (flags, index, num) = (word(&msg, 4), word(&msg, HDR_LEN), word(&msg, HDR_LEN + 4));
    let ok = match num {
        0 | 1 => dev.set_vring_enable(index, num == 1).is_ok(),
        _ => false,
    };
    drop(dev);
    if flags & MSG_NEED_REPLY != 0 {
        let mut reply = [0u8; HDR_LEN + 8];
        reply[0..4].copy_from_slice(&REQ_SET_VRING_ENABLE.to_le_bytes());
        reply[4..8].copy_from_slice(&(MSG_VERSION_1 | MSG_REPLY).to_le_bytes());
        reply[8..12].copy_from_slice(&8u32.to_le_bytes());
        reply[12..20].copy_from_slice(&u64::from(!ok).to_le_bytes());
        // SAFETY: `reply` is a readable buffer of its length for the duration of the call.
        let n = unsafe {
            libc::send(
                fd,
                reply.as_ptr().cast(),
                reply.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n != reply.len() as isize {
            return Early::Failed(std::io::Error::last_os_error());
        }
    }
    Early::Handled
}

#[cfg(test)]
#[path = "backend_tests.rs"]
mod tests;

//! The AF_XDP port as graph nodes: `AfXdpPort::open` binds a socket for one (interface, queue)
//! on the worker's UMEM, and `into_nodes` splits it into `AfXdpRx` (an input node: rx ring ->
//! buffer indices, fill ring refilled from the pool in batches) and `AfXdpTx` (an output node:
//! frames -> tx ring, completion ring drained back to the pool in batches). Syscalls happen only
//! when a ring's need_wakeup flag asks for one: at most one per poll or per transmitted frame.
//! Both halves must run on the worker that owns the pool; they never allocate after
//! construction, never block and never copy packet bytes.

use crate::error::AfXdpError;
use crate::lent::{Lent, LentReturn};
use crate::program::{StaleProgram, XdpMode};
use crate::socket::{self, AfXdpConfig, SocketCore};
use crate::sys::ring::{ConsRing, ProdRing, RingWatch};
use crate::sys::xsk::{self, XdpDesc, XdpStatistics};
use crate::umem::Umem;
use graph::{Dispatch, InputNode, Node, NodeContext, PortStats};
use packet::{BufferMeta, BufferPool, VECTOR_SIZE};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// Low 48 bits of an unaligned-mode descriptor address: the chunk's base address; the high 16
/// bits are an offset to add (XSK_UNALIGNED_BUF_OFFSET_SHIFT).
const ADDR_MASK: u64 = (1 << 48) - 1;

/// Refill the fill ring once at least this many entries are free.
const FILL_BATCH: u32 = 64;

#[inline(always)]
fn umem_offset(addr: u64) -> usize {
    ((addr & ADDR_MASK) + (addr >> 48)) as usize
}

/// An open AF_XDP socket for one (interface, queue), not yet split into nodes.
pub struct AfXdpPort {
    sock: socket::OpenSocket,
    umem: Umem,
    port_id: u16,
    stats: Arc<PortStats>,
}

impl AfXdpPort {
    /// Open the socket for `config` on `umem` (the worker's pool): attach vecplane's XDP program
    /// to the interface if this process has not yet (native mode first, generic otherwise;
    /// removing a stale vecplane program left by a crashed run), bind the socket and put it in
    /// the XSKMAP at its queue. Counters go to `stats`.
    pub fn open(
        umem: &Umem,
        config: &AfXdpConfig,
        stats: Arc<PortStats>,
    ) -> Result<AfXdpPort, AfXdpError> {
        let sock = socket::open(umem, config)?;
        Ok(AfXdpPort {
            sock,
            umem: umem.clone(),
            port_id: config.port_id,
            stats,
        })
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.sock.core.ifname
    }

    /// Queue index.
    pub fn queue(&self) -> u32 {
        self.sock.core.queue
    }

    /// vecplane port number.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// `"native"` or `"generic"`: where the XDP program runs.
    pub fn mode(&self) -> &'static str {
        self.sock.core.mode().as_str()
    }

    /// The XDP mode.
    pub fn xdp_mode(&self) -> XdpMode {
        self.sock.core.mode()
    }

    /// True when the socket runs zero-copy (the driver DMAs into the pool); false in copy mode
    /// (veth, generic XDP).
    pub fn zerocopy(&self) -> bool {
        self.sock.core.zerocopy
    }

    /// True when this socket shares the UMEM registered by another socket of the worker.
    pub fn umem_shared(&self) -> bool {
        self.sock.core.shared_umem
    }

    /// Id of the attached XDP program.
    pub fn program_id(&self) -> u32 {
        self.sock.core.attachment.program_id()
    }

    /// A stale vecplane program (left attached through netlink by an earlier run) that was
    /// removed before attaching, if any.
    pub fn stale_removed(&self) -> Option<StaleProgram> {
        self.sock.core.attachment.stale_removed()
    }

    /// The kernel's XDP_STATISTICS for this socket.
    pub fn statistics(&self) -> Result<XdpStatistics, AfXdpError> {
        self.sock.core.statistics()
    }

    /// The port's counters.
    pub fn stats(&self) -> Arc<PortStats> {
        self.stats.clone()
    }

    /// A handle for the control thread (statistics, mode) that does not keep the port open.
    pub fn handle(&self) -> AfXdpHandle {
        handle(&self.sock.core)
    }

    /// Split into the receive node `rx_node` (sending everything to `rx_next`) and the transmit
    /// node `tx_node`.
    pub fn into_nodes(
        self,
        rx_node: impl Into<String>,
        rx_next: impl Into<String>,
        tx_node: impl Into<String>,
    ) -> (AfXdpRx, AfXdpTx) {
        let socket::OpenSocket {
            rx,
            fill,
            tx,
            comp,
            core,
        } = self.sock;
        let tx_watch = tx.watch();
        let ret = Arc::new(LentReturn::new(self.umem.clone()));
        let buffers = self.umem.buffers();
        let scratch_rx = vec![0u32; fill.size() as usize].into_boxed_slice();
        let scratch_tx = vec![0u32; comp.size().min(4096) as usize].into_boxed_slice();
        let rx_node = AfXdpRx {
            rx,
            fill,
            tx_watch,
            name: rx_node.into(),
            next: rx_next.into(),
            port_id: self.port_id,
            umem: self.umem.clone(),
            stats: self.stats.clone(),
            scratch: scratch_rx,
            last_sample_tsc: 0,
            kernel_rx_drops: 0,
            kernel_tx_invalid: 0,
            lent: Lent::new(buffers),
            core: core.clone(),
            ret: ret.clone(),
        };
        let tx_node = AfXdpTx {
            tx,
            comp,
            name: tx_node.into(),
            port_id: self.port_id,
            umem: self.umem,
            stats: self.stats,
            scratch: scratch_tx,
            filtered: vec![0u32; VECTOR_SIZE].into_boxed_slice(),
            lent: Lent::new(buffers),
            core,
            ret,
        };
        (rx_node, tx_node)
    }
}

impl std::fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("ifname", &self.ifname())
            .field("queue", &self.queue())
            .field("port_id", &self.port_id)
            .field("mode", &self.mode())
            .field("zerocopy", &self.zerocopy())
            .finish()
    }
}

fn handle(core: &Arc<SocketCore>) -> AfXdpHandle {
    AfXdpHandle {
        core: Arc::downgrade(core),
        ifname: core.ifname.clone(),
        queue: core.queue,
        mode: core.mode(),
        zerocopy: core.zerocopy,
    }
}

/// What the control thread keeps of a port: its identity, mode and the kernel's statistics.
/// It does not keep the socket or the XDP program alive.
#[derive(Clone, Debug)]
pub struct AfXdpHandle {
    core: Weak<SocketCore>,
    ifname: String,
    queue: u32,
    mode: XdpMode,
    zerocopy: bool,
}

impl AfXdpHandle {
    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Queue index.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// `"native"` or `"generic"`.
    pub fn mode(&self) -> &'static str {
        self.mode.as_str()
    }

    /// True in zero-copy mode.
    pub fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// The kernel's XDP_STATISTICS, or `Closed` once the port is gone.
    pub fn statistics(&self) -> Result<XdpStatistics, AfXdpError> {
        match self.core.upgrade() {
            Some(core) => core.statistics(),
            None => Err(AfXdpError::Closed {
                ifname: self.ifname.clone(),
                queue: self.queue,
            }),
        }
    }

    /// Wake-up syscalls (sendto/recvfrom) that failed with an unexpected error.
    pub fn wakeup_errors(&self) -> u64 {
        self.core
            .upgrade()
            .map(|c| c.wakeup_errors.load(Ordering::Relaxed))
            .unwrap_or(0)
    }
}

/// The receive half: an input node.
pub struct AfXdpRx {
    // Rings first: unmapped before the socket closes.
    rx: ConsRing<XdpDesc>,
    fill: ProdRing<u64>,
    tx_watch: RingWatch,
    name: String,
    next: String,
    port_id: u16,
    umem: Umem,
    stats: Arc<PortStats>,
    scratch: Box<[u32]>,
    last_sample_tsc: u64,
    kernel_rx_drops: u64,
    kernel_tx_invalid: u64,
    /// Buffers on the fill ring or received and not yet read.
    lent: Lent,
    core: Arc<SocketCore>,
    // Last: dropped after the socket closes.
    ret: Arc<LentReturn>,
}

impl Drop for AfXdpRx {
    fn drop(&mut self) {
        self.ret.deposit(&mut self.lent);
    }
}

/// Drop reasons of `AfXdpRx` (its error ids, in order).
pub const RX_ERRORS: [&str; 1] = ["bad-descriptor"];
/// Drop reasons of `AfXdpTx` (its error ids, in order).
pub const TX_ERRORS: [&str; 2] = ["tx-ring-full", "empty-packet"];

impl AfXdpRx {
    /// Lend the kernel free buffers (as many as the fill ring has room for). `poll` does this
    /// itself; calling it once before the first poll avoids drops while the worker starts.
    pub fn refill(&mut self, pool: &mut BufferPool) {
        self.check_pool(pool);
        let free = self.fill.free(FILL_BATCH);
        if free < FILL_BATCH {
            return;
        }
        let want = (free as usize).min(self.scratch.len());
        let got = pool.alloc_batch(&mut self.scratch[..want]);
        let scratch = &self.scratch;
        let pool_ref = &*pool;
        let put = self.fill.produce(got as u32, |i| {
            pool_ref.slot_offset(scratch[i as usize]) as u64
        }) as usize;
        for &b in self.scratch.iter().take(put) {
            self.lent.set(b);
        }
        if put < got {
            pool.free_batch(&self.scratch[put..got]);
        }
    }

    /// A handle for the control thread.
    pub fn handle(&self) -> AfXdpHandle {
        handle(&self.core)
    }

    /// The kernel's XDP_STATISTICS for this socket.
    pub fn statistics(&self) -> Result<XdpStatistics, AfXdpError> {
        self.core.statistics()
    }

    #[inline(always)]
    fn check_pool(&self, pool: &BufferPool) {
        assert!(
            self.umem.is_pool(pool),
            "AF_XDP port {} queue {}: polled with a buffer pool that is not its UMEM",
            self.core.ifname,
            self.core.queue
        );
    }

    /// Fold the kernel's drop counters into the port's (cold: every 10 ms).
    #[cold]
    fn sample_kernel_stats(&mut self) {
        if let Ok(s) = xsk::statistics(&self.core.fd) {
            let rx = socket::kernel_rx_drops(&s, self.core.zerocopy);
            self.stats
                .rx_drops
                .add(rx.wrapping_sub(self.kernel_rx_drops));
            self.kernel_rx_drops = rx;
            self.stats
                .tx_drops
                .add(s.tx_invalid_descs.wrapping_sub(self.kernel_tx_invalid));
            self.kernel_tx_invalid = s.tx_invalid_descs;
        }
    }
}

impl InputNode for AfXdpRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        // The socket is readable when its rx ring holds descriptors. The fill ring's
        // need_wakeup kick is made by every `poll` that finds it set, so the worker's last
        // round before a sleep leaves the driver able to receive.
        Some(self.core.fd.as_raw_fd())
    }

    /// Frames left on the transmit ring are sent only when something kicks them (`poll` does
    /// on every round, the sleep's `ppoll` once, for one kernel batch): no sleep while there
    /// are any.
    fn before_sleep(&self) -> bool {
        self.tx_watch.pending() == 0
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    fn error_reasons(&self) -> Vec<String> {
        RX_ERRORS.iter().map(|s| s.to_string()).collect()
    }

    #[inline]
    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        self.check_pool(cx.pool);
        let max = out.len().min(VECTOR_SIZE) as u32;
        let (mut n, mut bytes, mut bad) = (0usize, 0u64, 0u64);
        {
            let pool = &mut *cx.pool;
            let stride = self.umem.stride();
            let port = self.port_id;
            let lent = &mut self.lent;
            self.rx
                .consume(max, |d| match pool.index_of_offset(umem_offset(d.addr)) {
                    Some((b, off))
                        if d.len > 0 && d.options == 0 && off + d.len as usize <= stride =>
                    {
                        lent.clear(b);
                        *pool.meta_mut(b) = BufferMeta {
                            data_offset: off as u16,
                            length: d.len as u16,
                            rx_port: port,
                            ..BufferMeta::default()
                        };
                        out[n] = b;
                        n += 1;
                        bytes += d.len as u64;
                    }
                    Some((b, _)) => {
                        lent.clear(b);
                        pool.free(b);
                        bad += 1;
                    }
                    None => bad += 1,
                });
        }
        self.refill(cx.pool);
        if self.fill.needs_wakeup() {
            self.core.count_wakeup(xsk::wake_rx(&self.core.fd));
        }
        // Frames the transmit half left on its ring (the kernel sends a bounded number per
        // sendto, or the device was busy) are kicked from here, since that half only runs when
        // it has packets.
        if self.tx_watch.pending() > 0 && self.tx_watch.needs_wakeup() {
            self.core.count_wakeup(xsk::kick_tx(&self.core.fd));
        }
        if n > 0 {
            self.stats.rx_packets.add(n as u64);
            self.stats.rx_bytes.add(bytes);
        }
        if bad > 0 {
            self.stats.rx_drops.add(bad);
            cx.errors[cx.error_id(0) as usize].add(bad);
        }
        let interval = (cx.tsc_hz / 100).max(1);
        if cx.now_tsc.wrapping_sub(self.last_sample_tsc) >= interval {
            self.last_sample_tsc = cx.now_tsc;
            self.sample_kernel_stats();
        }
        (n, Dispatch::AllTo(0))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "af_xdp rx {} queue {} ({}): port {}, {} bytes at slot offset {}",
            self.core.ifname,
            self.core.queue,
            self.core.mode(),
            m.rx_port,
            m.length,
            m.data_offset
        )
    }
}

/// The transmit half: an output node that takes ownership of every packet it is given.
pub struct AfXdpTx {
    tx: ProdRing<XdpDesc>,
    comp: ConsRing<u64>,
    name: String,
    port_id: u16,
    umem: Umem,
    stats: Arc<PortStats>,
    scratch: Box<[u32]>,
    filtered: Box<[u32]>,
    /// Buffers on the transmit ring, sent or not, until their completion.
    lent: Lent,
    core: Arc<SocketCore>,
    // Last: dropped after the socket closes.
    ret: Arc<LentReturn>,
}

impl Drop for AfXdpTx {
    fn drop(&mut self) {
        self.ret.deposit(&mut self.lent);
    }
}

impl AfXdpTx {
    /// Return the buffers of completed transmissions to the pool. `process` does this itself;
    /// call it when the worker stops to get every buffer back.
    pub fn reclaim(&mut self, pool: &mut BufferPool) -> usize {
        assert!(
            self.umem.is_pool(pool),
            "AF_XDP port {} queue {}: used with a buffer pool that is not its UMEM",
            self.core.ifname,
            self.core.queue
        );
        let mut total = 0;
        loop {
            let mut k = 0;
            let cap = self.scratch.len() as u32;
            let scratch = &mut self.scratch;
            let lent = &mut self.lent;
            let pool_ref = &*pool;
            let n = self.comp.consume(cap, |addr| {
                if let Some((b, _)) = pool_ref.index_of_offset(umem_offset(addr)) {
                    lent.clear(b);
                    scratch[k] = b;
                    k += 1;
                }
            });
            pool.free_batch(&self.scratch[..k]);
            total += k;
            if n < cap {
                return total;
            }
        }
    }

    /// vecplane port number.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Frames on the tx ring the kernel has not taken yet.
    pub fn pending(&self) -> u32 {
        self.tx.watch().pending()
    }

    /// Ask the kernel to send what is on the tx ring, if it wants to be asked.
    pub fn kick(&self) {
        if self.tx.needs_wakeup() {
            self.core.count_wakeup(xsk::kick_tx(&self.core.fd));
        }
    }

    /// A handle for the control thread.
    pub fn handle(&self) -> AfXdpHandle {
        handle(&self.core)
    }

    #[inline]
    fn push(&mut self, pool: &BufferPool, frame: &[u32], bytes: &mut u64) -> usize {
        let sent = self.tx.produce(frame.len() as u32, |i| {
            let b = frame[i as usize];
            let m = pool.meta(b);
            *bytes += m.length as u64;
            XdpDesc {
                addr: (pool.slot_offset(b) + m.data_offset as usize) as u64,
                len: m.length as u32,
                options: 0,
            }
        }) as usize;
        for &b in frame.iter().take(sent) {
            self.lent.set(b);
        }
        sent
    }
}

impl Node for AfXdpTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn error_reasons(&self) -> Vec<String> {
        TX_ERRORS.iter().map(|s| s.to_string()).collect()
    }

    #[inline]
    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        self.reclaim(cx.pool);
        if frame.iter().any(|&b| cx.pool.meta(b).length == 0) {
            // Rare: the kernel would skip an empty descriptor and never complete it.
            let mut filtered = std::mem::take(&mut self.filtered);
            let (mut k, mut empty) = (0, 0u64);
            for &b in frame {
                if cx.pool.meta(b).length == 0 {
                    cx.pool.free(b);
                    empty += 1;
                } else if let Some(slot) = filtered.get_mut(k) {
                    *slot = b;
                    k += 1;
                }
            }
            self.stats.tx_drops.add(empty);
            cx.errors[cx.error_id(1) as usize].add(empty);
            if k > 0 {
                self.send(cx, &filtered[..k]);
            }
            self.filtered = filtered;
        } else {
            self.send(cx, frame);
        }
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "af_xdp tx {} queue {}: port {}, {} bytes",
            self.core.ifname, self.core.queue, self.port_id, m.length
        )
    }
}

impl AfXdpTx {
    #[inline]
    fn send(&mut self, cx: &mut NodeContext<'_>, frame: &[u32]) {
        // One wake-up per frame at most: copy mode sends everything on the ring inside that
        // sendto, so the ring is only full when the device pushes back; then the rest drops.
        let mut bytes = 0u64;
        let sent = self.push(cx.pool, frame, &mut bytes);
        if sent > 0 {
            self.kick();
            self.stats.tx_packets.add(sent as u64);
            self.stats.tx_bytes.add(bytes);
        }
        if sent < frame.len() {
            let rest = &frame[sent..];
            cx.pool.free_batch(rest);
            self.stats.tx_drops.add(rest.len() as u64);
            cx.errors[cx.error_id(0) as usize].add(rest.len() as u64);
        }
    }
}

//! `AfPacketTx`: the output node handing each batch to the kernel with one system call, through
//! the mapped transmit ring or `sendmmsg`. It owns the transmit part of the mapping and its
//! cursor; it never reads the receive ring (`rx`), and frees every buffer it is given.

use super::{
    status_word, AfPacketSocket, TxMode, ETH_HLEN, FRAME_LEN, FRAME_NEXT, FRAME_SNAPLEN,
    FRAME_STATUS, TX_DATA_OFFSET,
};
use graph::{Dispatch, Node, NodeContext, PortStats};
use packet::BufferPool;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Output node handing a batch to the kernel with one system call: frames copied into the
/// transmit ring and one `send()` kick (`TxMode::Ring`), or one `sendmmsg()` straight from the
/// buffers (`TxMode::Sendmmsg`). Packets that find the ring full or that the kernel does not
/// take, or are shorter than an Ethernet header or longer than `tx_max_len`, are counted in
/// `tx_drops`. Every buffer it is given is freed.
pub struct AfPacketTx {
    name: String,
    port_id: u16,
    sock: Arc<AfPacketSocket>,
    /// Next transmit frame to fill (ring mode).
    cursor: usize,
    /// Message headers for sendmmsg mode, preallocated.
    batch: SendBatch,
    stats: Arc<PortStats>,
}

/// One vector's worth of `mmsghdr` + `iovec`, rewritten by every sendmmsg call.
struct SendBatch {
    msgs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
}

// SAFETY: the raw pointers inside are only written and read during one `process` call (they
// point into `iovs` and the pool's buffers for the duration of one sendmmsg); between calls
// they are dead values, so moving the batch to another thread is harmless.
unsafe impl Send for SendBatch {}

impl SendBatch {
    fn new() -> SendBatch {
        // SAFETY: mmsghdr and iovec are plain old data; all-zero (null pointers, zero lengths)
        // is a valid value.
        let (msg, iov) = unsafe {
            (
                std::mem::zeroed::<libc::mmsghdr>(),
                std::mem::zeroed::<libc::iovec>(),
            )
        };
        SendBatch {
            msgs: vec![msg; packet::VECTOR_SIZE].into_boxed_slice(),
            iovs: vec![iov; packet::VECTOR_SIZE].into_boxed_slice(),
        }
    }
}

impl AfPacketTx {
    /// The transmit node of port `port_id` on `sock`.
    pub(super) fn new(
        name: String,
        port_id: u16,
        sock: Arc<AfPacketSocket>,
        stats: Arc<PortStats>,
    ) -> AfPacketTx {
        AfPacketTx {
            name,
            port_id,
            sock,
            cursor: 0,
            batch: SendBatch::new(),
            stats,
        }
    }

    /// The port number this node stands for.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The socket (for its counters and kernel statistics).
    pub fn socket(&self) -> &Arc<AfPacketSocket> {
        &self.sock
    }
}

impl Node for AfPacketTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn next_nodes(&self) -> Vec<String> {
        Vec::new()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _nexts: &mut [u16]) -> Dispatch {
        let (sent, bytes, drops) = match self.sock.tx_mode {
            TxMode::Ring => self.send_ring(cx, frame),
            TxMode::Sendmmsg => self.send_mmsg(cx, frame),
        };
        cx.pool.free_batch(frame);
        self.stats.tx_packets.add(sent);
        self.stats.tx_bytes.add(bytes);
        if drops > 0 {
            self.stats.tx_drops.add(drops);
        }
        Dispatch::Consumed
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "af-packet tx: {} (port {}), {} bytes",
            self.sock.interface,
            self.port_id,
            pool.meta(buffer).length
        )
    }
}

impl AfPacketTx {
    /// Ring mode: copy into free ring frames, one kick. Returns (sent, bytes, drops).
    #[inline]
    fn send_ring(&mut self, cx: &mut NodeContext<'_>, frame: &[u32]) -> (u64, u64, u64) {
        let sock = &*self.sock;
        let (mut sent, mut bytes, mut drops) = (0u64, 0u64, 0u64);
        for (i, &b) in frame.iter().enumerate() {
            let data = cx.pool.data(b);
            let len = data.len();
            if !(ETH_HLEN..=sock.tx_max_len).contains(&len) {
                drops += 1;
                continue;
            }
            let f = sock.tx_frame(self.cursor);
            // SAFETY: the frame status word is aligned (frames are 16-byte aligned) and inside
            // the mapping.
            let status = unsafe { status_word(f.add(FRAME_STATUS)) };
            if status.load(Ordering::Acquire)
                & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING)
                != 0
            {
                // Ring full: the frames after this one are still queued too.
                drops += (frame.len() - i) as u64;
                break;
            }
            // SAFETY: the frame is available (owned by user space); TX_DATA_OFFSET + len <=
            // frame size (tx_max_len); the header words are inside the frame.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), f.add(TX_DATA_OFFSET), len);
                std::ptr::write_volatile(f.add(FRAME_LEN) as *mut u32, len as u32);
                std::ptr::write_volatile(f.add(FRAME_SNAPLEN) as *mut u32, len as u32);
                std::ptr::write_volatile(f.add(FRAME_NEXT) as *mut u32, 0);
            }
            status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.cursor += 1;
            if self.cursor == sock.tx_frames {
                self.cursor = 0;
            }
            sent += 1;
            bytes += len as u64;
        }
        if sent > 0 || sock.tx_retry.load(Ordering::Relaxed) {
            sock.kick(cx.now_tsc);
        }
        (sent, bytes, drops)
    }

    /// Sendmmsg mode: one call for the batch, straight from the buffers. Returns (sent, bytes,
    /// drops); what the kernel did not take is dropped (no retry: at most one call per batch).
    #[inline]
    fn send_mmsg(&mut self, cx: &mut NodeContext<'_>, frame: &[u32]) -> (u64, u64, u64) {
        let sock = &*self.sock;
        let (mut k, mut drops) = (0usize, 0u64);
        let SendBatch { msgs, iovs } = &mut self.batch;
        for &b in frame.iter().take(iovs.len()) {
            let data = cx.pool.data(b);
            if !(ETH_HLEN..=sock.tx_max_len).contains(&data.len()) {
                drops += 1;
                continue;
            }
            iovs[k] = libc::iovec {
                iov_base: data.as_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            let h = &mut msgs[k].msg_hdr;
            h.msg_iov = &mut iovs[k];
            h.msg_iovlen = 1;
            k += 1;
        }
        drops += frame.len().saturating_sub(iovs.len()) as u64;
        if k == 0 {
            return (0, 0, drops);
        }
        // SAFETY: msgs[..k] point at iovs[..k], which point at packet bytes in the pool; the
        // pool is not touched until the call returns (we hold `cx`), and the kernel only reads.
        let r = unsafe {
            libc::sendmmsg(
                sock.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                k as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        let sent = if r < 0 { 0 } else { (r as usize).min(k) };
        if sent < k {
            sock.tx_kick_errors.add(1);
        }
        let bytes: usize = iovs[..sent].iter().map(|v| v.iov_len).sum();
        (sent as u64, bytes as u64, drops + (k - sent) as u64)
    }
}

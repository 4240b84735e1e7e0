//! `AfPacketRx`: the input node reading a port's TPACKET_V3 receive ring into pool buffers and
//! handing each block back to the kernel once read. It owns the ring's read cursor and the fold
//! of the kernel's drop counter into the port's; it never writes the transmit part of the
//! mapping (`tx`) and never makes a system call per packet.

use super::{
    status_word, AfPacketSocket, BLOCK_DESC_LEN, BLOCK_FIRST_PKT, BLOCK_NUM_PKTS, BLOCK_STATUS,
    ETH_HLEN, HDR3_LEN, VLAN_HLEN,
};
use graph::{Dispatch, InputNode, NodeContext, PortStats};
use packet::BufferPool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Input node reading a port's TPACKET_V3 receive ring: up to one vector per poll, from as many
/// retired blocks as it takes; a block goes back to the kernel as soon as it is read.
pub struct AfPacketRx {
    name: String,
    port_id: u16,
    next: String,
    sock: Arc<AfPacketSocket>,
    /// Block being read (or to be read next).
    block: usize,
    /// Packets left in that block (0: the block is not open).
    left: u32,
    /// Offset in the block of the next packet's header.
    offset: usize,
    stats: Arc<PortStats>,
    /// When the kernel's counters were last folded into `stats` (TSC), and its drop count then.
    last_sample_tsc: u64,
    kernel_drops: u64,
}

impl AfPacketRx {
    /// The receive node of port `port_id` on `sock`, handing packets to `next`.
    pub(super) fn new(
        name: String,
        port_id: u16,
        next: String,
        sock: Arc<AfPacketSocket>,
        stats: Arc<PortStats>,
    ) -> AfPacketRx {
        AfPacketRx {
            name,
            port_id,
            next,
            sock,
            block: 0,
            left: 0,
            offset: 0,
            stats,
            last_sample_tsc: 0,
            kernel_drops: 0,
        }
    }

    /// The port number stamped into `rx_port`.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The socket (for its counters and kernel statistics).
    pub fn socket(&self) -> &Arc<AfPacketSocket> {
        &self.sock
    }

    /// Fold the frames the kernel dropped for a full ring into the port's `rx_drops` (cold:
    /// every 10 ms of polling).
    #[cold]
    fn sample_kernel_drops(&mut self) {
        if let Ok(k) = self.sock.kernel_stats() {
            self.stats
                .rx_drops
                .add(k.drops.wrapping_sub(self.kernel_drops));
            self.kernel_drops = k.drops;
        }
    }

    /// Hand the current block back to the kernel and move to the next.
    #[inline]
    fn release_block(&mut self) {
        let block = self.sock.rx_block(self.block);
        // SAFETY: the block status word is aligned and inside the mapping; Release orders our
        // reads of the block before the kernel may overwrite it.
        unsafe { status_word(block.add(BLOCK_STATUS)) }
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.block += 1;
        if self.block == self.sock.rx_blocks {
            self.block = 0;
        }
        self.left = 0;
    }

    /// Copy the packet at `self.offset` of the open block into `buffer` and step to the next;
    /// returns its length, or `None` when it was dropped (counted in `drops`; the buffer is
    /// still free to use). Inconsistent ring data abandons the rest of the block (all counted).
    #[inline]
    fn read_packet(
        &mut self,
        pool: &mut BufferPool,
        buffer: u32,
        drops: &mut u64,
        csum: &mut u64,
    ) -> Option<usize> {
        let bs = self.sock.rx_block_size;
        let off = self.offset;
        self.left -= 1;
        if off < BLOCK_DESC_LEN || off + HDR3_LEN > bs {
            *drops += 1 + self.left as u64;
            self.left = 0;
            return None;
        }
        let block = self.sock.rx_block(self.block);
        // SAFETY: off + HDR3_LEN <= block size (checked above); the block is owned by user space
        // (TP_STATUS_USER seen with Acquire), so the kernel does not write it now.
        let h: libc::tpacket3_hdr =
            unsafe { std::ptr::read_unaligned(block.add(off) as *const libc::tpacket3_hdr) };
        if self.left > 0 {
            let next = h.tp_next_offset as usize;
            if next < HDR3_LEN || off + next + HDR3_LEN > bs {
                // This packet may be fine; the ones after it cannot be found.
                *drops += self.left as u64;
                self.left = 0;
            } else {
                self.offset = off + next;
            }
        }
        let mac = off + h.tp_mac as usize;
        let snap = h.tp_snaplen as usize;
        let vlan = h.tp_status & libc::TP_STATUS_VLAN_VALID != 0;
        let len = snap + if vlan { VLAN_HLEN } else { 0 };
        if mac < off + HDR3_LEN
            || mac + snap > bs
            || snap < h.tp_len as usize
            || snap < ETH_HLEN
            || len > pool.data_size()
        {
            *drops += 1;
            return None;
        }
        let csum_not_ready = h.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0;
        if csum_not_ready {
            *csum += 1;
        }
        // SAFETY: mac + snap <= block size (checked above); the block is ours until released.
        let src = unsafe { std::slice::from_raw_parts(block.add(mac), snap) };
        let (meta, slot) = pool.slot_mut(buffer);
        let start = meta.data_offset as usize;
        let Some(dst) = slot.get_mut(start..start + len) else {
            *drops += 1;
            return None;
        };
        if vlan {
            let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                h.hv1.tp_vlan_tpid
            } else {
                0x8100
            };
            dst[..12].copy_from_slice(&src[..12]);
            dst[12..14].copy_from_slice(&tpid.to_be_bytes());
            dst[14..16].copy_from_slice(&(h.hv1.tp_vlan_tci as u16).to_be_bytes());
            dst[16..].copy_from_slice(&src[12..]);
        } else {
            dst.copy_from_slice(src);
        }
        if csum_not_ready {
            // The local sender left its TCP/UDP checksum to offload: finish it here, or the
            // receiver behind vecplane would drop the packet.
            packet::checksum::finish_l4_checksum(dst);
        }
        meta.length = len as u16;
        meta.rx_port = self.port_id;
        meta.timestamp_ns = h.tp_sec as u64 * 1_000_000_000 + h.tp_nsec as u64;
        Some(len)
    }
}

impl InputNode for AfPacketRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        // Readable once a ring block is retired (full, or after the block timeout).
        Some(self.sock.raw_fd())
    }

    fn next_nodes(&self) -> Vec<String> {
        vec![self.next.clone()]
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        _nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let max = out.len();
        let (mut n, mut bytes, mut drops, mut csum) = (0usize, 0u64, 0u64, 0u64);
        while n < max {
            if self.left == 0 {
                let block = self.sock.rx_block(self.block);
                // SAFETY: the status word is aligned and inside the mapping; Acquire pairs with
                // the kernel's barrier before it hands the block over.
                let status =
                    unsafe { status_word(block.add(BLOCK_STATUS)) }.load(Ordering::Acquire);
                if status & libc::TP_STATUS_USER == 0 {
                    break;
                }
                // SAFETY: both words are inside the block descriptor, which the kernel no longer
                // writes (the block is ours).
                let (num, first) = unsafe {
                    (
                        std::ptr::read_volatile(block.add(BLOCK_NUM_PKTS) as *const u32),
                        std::ptr::read_volatile(block.add(BLOCK_FIRST_PKT) as *const u32),
                    )
                };
                if num == 0 {
                    self.release_block();
                    continue;
                }
                self.left = num;
                self.offset = first as usize;
            }
            let want = (max - n).min(self.left as usize);
            let got = cx.pool.alloc_batch(&mut out[n..n + want]);
            if got == 0 {
                // No buffers: leave the frames in the ring (the kernel drops when it fills).
                break;
            }
            let mut k = 0;
            while k < got && self.left > 0 {
                if let Some(len) = self.read_packet(cx.pool, out[n + k], &mut drops, &mut csum) {
                    k += 1;
                    bytes += len as u64;
                }
            }
            cx.pool.free_batch(&out[n + k..n + got]);
            n += k;
            if self.left == 0 {
                self.release_block();
            }
        }
        if cx.now_tsc.wrapping_sub(self.last_sample_tsc) >= (cx.tsc_hz / 100).max(1) {
            self.last_sample_tsc = cx.now_tsc;
            self.sample_kernel_drops();
        }
        if n > 0 {
            self.stats.rx_packets.add(n as u64);
            self.stats.rx_bytes.add(bytes);
        } else if self.sock.tx_retry.load(Ordering::Relaxed)
            && cx
                .now_tsc
                .wrapping_sub(self.sock.last_kick_tsc.load(Ordering::Relaxed))
                > cx.tsc_hz / 1000
        {
            // Idle, and a transmit kick failed earlier: retry it (at most once a millisecond)
            // so frames left in the tx ring do not wait for the next packet to send.
            self.sock.kick(cx.now_tsc);
        }
        if drops > 0 {
            self.stats.rx_drops.add(drops);
        }
        if csum > 0 {
            self.sock.csum_not_ready.add(csum);
        }
        (n, Dispatch::AllTo(0))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "af-packet rx: {} (port {}), {} bytes",
            self.sock.interface, m.rx_port, m.length
        )
    }
}

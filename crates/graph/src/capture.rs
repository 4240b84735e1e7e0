//! Packet capture for `vecplane ctl pcap`: the switch the control thread arms (which port, which
//! direction, how many packets) and the per-worker buffers the capturing nodes copy frames into.
//! The worker side never waits: it reads one atomic flag per vector while disarmed, and while
//! armed it `try_lock`s its own worker's buffer (a busy or full buffer counts the packet as
//! lost). It never writes files; the control thread drains the buffers into a pcap file.

use crate::counters::Counter;
use packet::meta::BufferMeta;
use packet::BufferPool;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Captured packets a worker holds before the control thread drains them; more are lost.
pub const MAX_BUFFERED: usize = 65536;

/// Capture received packets.
pub const DIR_RX: u8 = 1;
/// Capture packets handed to a port for transmission.
pub const DIR_TX: u8 = 2;

/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedPacket {
    /// TSC when it was captured.
    pub tsc: u64,
    /// Port it was received on or handed to.
    pub port: u16,
    /// True for transmit.
    pub tx: bool,
    /// Its length (the bytes may be cut at the snap length).
    pub length: u32,
    /// Its first bytes.
    pub bytes: Vec<u8>,
}

/// The capture switch and buffers of a data plane (shared by all its workers).
#[derive(Debug)]
pub struct CaptureControl {
    armed: AtomicBool,
    port: AtomicU32,
    dirs: AtomicU8,
    remaining: AtomicU64,
    snaplen: AtomicU32,
    buffers: Vec<Mutex<Vec<CapturedPacket>>>,
    /// Packets that matched but could not be kept (buffer busy or full).
    pub lost: Counter,
}

impl CaptureControl {
    /// A disarmed capture for `workers` workers.
    pub fn new(workers: usize) -> CaptureControl {
        CaptureControl {
            armed: AtomicBool::new(false),
            port: AtomicU32::new(0),
            dirs: AtomicU8::new(0),
            remaining: AtomicU64::new(0),
            snaplen: AtomicU32::new(0),
            buffers: (0..workers.max(1))
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            lost: Counter::default(),
        }
    }

    /// Capture the next `count` packets of `port` in directions `dirs` (`DIR_RX | DIR_TX`),
    /// keeping at most `snaplen` bytes of each. Control thread.
    pub fn arm(&self, port: u16, dirs: u8, count: u64, snaplen: u32) {
        self.armed.store(false, Ordering::Release);
        self.port.store(u32::from(port), Ordering::Relaxed);
        self.dirs.store(dirs, Ordering::Relaxed);
        self.snaplen.store(snaplen.max(64), Ordering::Relaxed);
        self.remaining.store(count, Ordering::Relaxed);
        self.armed.store(count > 0, Ordering::Release);
    }

    /// Stop capturing. Control thread.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::Release);
    }

    /// Whether a capture is running (it ends by itself once `count` packets were taken).
    #[inline(always)]
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Packets still to capture.
    pub fn remaining(&self) -> u64 {
        self.remaining.load(Ordering::Relaxed)
    }

    /// Everything the workers captured so far, oldest first per worker. Control thread.
    pub fn take(&self) -> Vec<CapturedPacket> {
        let mut out = Vec::new();
        for b in &self.buffers {
            let mut g = b.lock().unwrap_or_else(|e| e.into_inner());
            out.append(&mut g);
        }
        out.sort_by_key(|p| p.tsc);
        out
    }

    /// Offer the packets of `frame` (worker `worker`, direction `tx`): those on the armed port
    /// are copied until the count is reached. `port_of` picks the port from the metadata.
    pub fn offer(
        &self,
        pool: &BufferPool,
        frame: &[u32],
        worker: usize,
        tx: bool,
        port_of: impl Fn(&BufferMeta) -> u16,
    ) {
        let dir = if tx { DIR_TX } else { DIR_RX };
        if self.dirs.load(Ordering::Relaxed) & dir == 0 {
            return;
        }
        let port = self.port.load(Ordering::Relaxed);
        let snaplen = self.snaplen.load(Ordering::Relaxed) as usize;
        let Some(buffer) = self.buffers.get(worker) else {
            return;
        };
        let mut held = buffer.try_lock().ok();
        let tsc = crate::rdtsc();
        for &b in frame {
            let meta = pool.meta(b);
            if u32::from(port_of(meta)) != port {
                continue;
            }
            // Take one packet of the count, or stop when it is used up.
            let taken = self
                .remaining
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |r| r.checked_sub(1));
            match taken {
                Ok(1) => self.armed.store(false, Ordering::Release),
                Ok(_) => {}
                Err(_) => return,
            }
            match held.as_mut() {
                Some(v) if v.len() < MAX_BUFFERED => {
                    let data = pool.data(b);
                    v.push(CapturedPacket {
                        tsc,
                        port: port as u16,
                        tx,
                        length: data.len() as u32,
                        bytes: data[..data.len().min(snaplen)].to_vec(),
                    });
                }
                _ => self.lost.add(1),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::PoolConfig;

    #[test]
    fn captures_the_armed_port_up_to_the_count_then_disarms() {
        let mut pool = BufferPool::new(PoolConfig {
            buffers: 16,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        let mut frame = Vec::new();
        for i in 0..6u8 {
            let b = pool.alloc().expect("buffer");
            assert!(pool.write_packet(b, &[i; 100]));
            pool.meta_mut(b).rx_port = u16::from(i % 2);
            frame.push(b);
        }
        let c = CaptureControl::new(2);
        assert!(!c.is_armed());
        c.arm(1, DIR_RX, 2, 64);
        c.offer(&pool, &frame, 0, true, |m| m.rx_port);
        assert!(c.take().is_empty(), "tx was not asked for");
        c.offer(&pool, &frame, 1, false, |m| m.rx_port);
        let got = c.take();
        assert_eq!(got.len(), 2, "the count");
        assert!(got.iter().all(|p| p.port == 1 && !p.tx && p.length == 100));
        assert_eq!(got[0].bytes, vec![1u8; 64], "cut at the snap length");
        assert_eq!(got[1].bytes[0], 3);
        assert!(!c.is_armed(), "done");
        pool.free_batch(&frame);
    }
}

//! An instruction-count loop for callgrind (ignored by default): both port nodes moving
//! 32-packet batches of 60-byte frames between two rings of 256, the guest's side played by
//! the fake guest. Run with
//!   valgrind --tool=callgrind --toggle-collect='*VhostRx*poll*' \
//!     --toggle-collect='*VhostTx*process*' <test binary> --ignored --exact --test-threads=1 \
//!     <test name>
//! and divide the collected instructions by the packets moved (each goes through both nodes).
//! `scripts/vhost_copy_bench.sh` runs them for the copies in and out of guest memory.

use super::*;
use crate::device::{QueueSetup, GUEST_RX, MAX_QUEUES};
use crate::fake_guest::FakeGuest;
use graph::{Counter, Node};
use packet::PoolConfig;

/// Batches and packets per batch the loops move.
pub(super) const ROUNDS: usize = 2000;
pub(super) const BATCH: usize = 32;

pub(super) struct Loop {
    pub(super) shared: Arc<Shared>,
    pub(super) rx: VhostRx,
    pub(super) tx: VhostTx,
    pub(super) pool: BufferPool,
}

impl Loop {
    pub(super) fn new() -> Loop {
        let shared = Arc::new(Shared::default());
        let stats = Arc::new(PortStats::default());
        let rx = VhostRx::on(
            "rx".into(),
            0,
            "tx".into(),
            shared.clone(),
            None,
            stats.clone(),
        );
        let tx = VhostTx::on("tx".into(), shared.clone(), None, stats);
        let pool = BufferPool::new(PoolConfig {
            buffers: 1024,
            headroom: 128,
            data_size: 2048,
            try_hugepages: false,
        })
        .expect("pool");
        Loop {
            shared,
            rx,
            tx,
            pool,
        }
    }

    /// One batch: the receive node takes what the guest sent, the transmit node puts it into
    /// the guest's receive buffers. Returns the packets moved.
    pub(super) fn batch(&mut self) -> usize {
        let errors: Vec<Counter> = Vec::new();
        let names: Vec<(String, String)> = Vec::new();
        let mut cx = NodeContext {
            pool: &mut self.pool,
            now_tsc: 0,
            tsc_hz: 1,
            worker: 0,
            error_base: 0,
            errors: &errors,
            error_names: &names,
        };
        let mut out = [0u32; BATCH];
        let mut nexts = [0u16; BATCH];
        let (n, _) = self.rx.poll(&mut cx, &mut out, &mut nexts);
        self.tx.process(&mut cx, &out[..n], &mut nexts);
        n
    }
}

pub(super) fn queues(
    tx: crate::ring::RingLayout,
    rx: crate::ring::RingLayout,
    base: u16,
) -> [Option<QueueSetup>; MAX_QUEUES] {
    let mut q: [Option<QueueSetup>; MAX_QUEUES] = Default::default();
    q[GUEST_TX] = Some(QueueSetup {
        layout: tx,
        base,
        call: None,
        start: 1,
    });
    q[GUEST_RX] = Some(QueueSetup {
        layout: rx,
        base,
        call: None,
        start: 2,
    });
    q
}

/// A frame of `len` bytes behind a 12-byte virtio-net header.
pub(super) fn sent_frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 12 + len];
    f[12..24].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    f
}

#[test]
#[ignore]
fn callgrind_split_rings() {
    split_rings_moving(60);
}

/// The same with 1500-byte frames: what the copies in and out of the guest cost.
#[test]
#[ignore]
fn callgrind_split_rings_1500() {
    split_rings_moving(1500);
}

fn split_rings_moving(frame_len: usize) {
    let mut tx = FakeGuest::new(256);
    let mut rx = tx.another(1, 256);
    let mut l = Loop::new();
    l.shared.publish(DeviceSnapshot {
        memory: tx.mem.clone(),
        queues: queues(tx.layout(), rx.layout(), 0),
        hdr_len: 12,
        mrg_rxbuf: true,
        ..DeviceSnapshot::idle()
    });
    let f = sent_frame(frame_len);
    let mut moved = 0;
    for _ in 0..ROUNDS {
        for _ in 0..BATCH {
            tx.add_chain(&[f.len() as u32], false, &f);
            rx.add_chain(&[2048], true, &[]);
        }
        moved += l.batch();
    }
    assert_eq!(moved, ROUNDS * BATCH);
}

#[test]
#[ignore]
fn callgrind_packed_rings() {
    use crate::fake_guest::PackedGuest;
    use crate::packed_ring::WRAP_BIT;
    let mut tx = PackedGuest::new(256);
    let mut rx = PackedGuest::on(tx.g.another(1, 256));
    let mut l = Loop::new();
    l.shared.publish(DeviceSnapshot {
        memory: tx.g.mem.clone(),
        queues: queues(tx.layout(), rx.layout(), WRAP_BIT),
        hdr_len: 12,
        mrg_rxbuf: true,
        packed: true,
        ..DeviceSnapshot::idle()
    });
    let f = sent_frame(60);
    let mut moved = 0;
    for _ in 0..ROUNDS {
        for _ in 0..BATCH {
            tx.add_chain(&[f.len() as u32], false, &f);
            rx.add_chain(&[2048], true, &[]);
        }
        moved += l.batch();
        while tx.take_used().is_some() {}
        while rx.take_used().is_some() {}
    }
    assert_eq!(moved, ROUNDS * BATCH);
}

//! What the fuzz targets (`fuzz/fuzz_targets/vhost_rings.rs` for split rings,
//! `vhost_packed_rings.rs` for packed ones) and the stable property tests run: both port nodes
//! over guest memory whose bytes are whatever a guest may have written there (descriptor
//! tables, ring indices or flags and wrap counters, event suppression structures, buffer
//! addresses and lengths, header bytes), with the negotiated features chosen by the input. It
//! must never panic, never touch memory outside the guest's, never leak a buffer, and a
//! malformed ring must stop its queue.
//!
//! It owns its memfd-backed guest memory and a small pool; it never opens a socket.

use crate::device::{DeviceSnapshot, QueueSetup, Shared, GUEST_RX, GUEST_TX};
use crate::memory::{GuestMemory, RegionSpec};
use crate::net_header::Offloads;
use crate::port::{VhostRx, VhostTx};
use crate::ring::RingLayout;
use graph::{Counter, InputNode, Node, NodeContext, PortStats};
use packet::{BufferPool, PoolConfig};
use std::io::Write;
use std::sync::Arc;

/// Guest memory: 64 KiB at guest physical 0, so small numbers in the input are addresses
/// inside it.
const GPA: u64 = 0;
const UVA: u64 = 0x7f00_0000_0000;
const MEM: u64 = 0x1_0000;

fn memfd(len: u64) -> Option<std::fs::File> {
    let name = c"vecplane-vhost-fuzz";
    // SAFETY: a plain syscall with a valid C string; the fd is owned by the File below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    f.set_len(len).ok()?;
    f.flush().ok()?;
    Some(f)
}

/// Run the receive node (the guest's transmit queue) and the transmit node (its receive
/// queue) over guest memory holding `data`. The first byte chooses the ring size (a power of
/// two up to 128) and the features; the two rings are packed at the start of memory (so a
/// short input reaches every part of them), their contents are `data`'s.
pub fn exercise(data: &[u8]) {
    run(data, false)
}

/// The same with packed rings: the first byte chooses the ring size (1 to 100, not only
/// powers of two) and the features; each ring's descriptors, then the driver's and the
/// device's event suppression structures, at the start of memory; both start at slot 0 with
/// the wrap counter in the second byte's low bit.
pub fn exercise_packed(data: &[u8]) {
    run(data, true)
}

/// Packed ring sizes the first byte chooses from.
const PACKED_SIZES: [u16; 8] = [1, 2, 3, 5, 8, 16, 64, 100];

fn run(data: &[u8], packed: bool) {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let Some(file) = memfd(MEM) else { return };
    let spec = RegionSpec {
        gpa: GPA,
        len: MEM,
        uva: UVA,
        mmap_offset: 0,
    };
    let Ok(mem) = GuestMemory::map(&[spec], vec![file]) else {
        return;
    };
    let Some(host) = mem.gpa(GPA, MEM as u32) else {
        return;
    };
    let n = bytes.len().min(MEM as usize);
    // SAFETY: `host` points at MEM writable bytes of the mapping just made; `n <= MEM`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host, n) };
    let size = if packed {
        PACKED_SIZES[usize::from(sel & 7)]
    } else {
        1u16 << (sel & 7)
    };
    // Descriptors (16-byte aligned), then the available ring, then the used ring (4-aligned);
    // packed: descriptors, then the two 4-byte event suppression structures.
    let n = u64::from(size);
    let span = |base: u64| {
        let avail = base + 16 * n;
        let (used, end) = if packed {
            (avail + 4, avail + 16)
        } else {
            let used = (avail + 6 + 2 * n + 3) & !3;
            (used, used + 6 + 8 * n)
        };
        (base, avail, used, (end + 15) & !15)
    };
    let (d0, a0, u0, end0) = span(0);
    let (d1, a1, u1, _) = span(end0);
    let layout = |d: u64, a: u64, u: u64| {
        let (d, a, u) = (UVA + d, UVA + a, UVA + u);
        if packed {
            crate::packed_ring::translate(&mem, size, d, a, u)
        } else {
            RingLayout::translate(&mem, size, d, a, u)
        }
    };
    // Packed rings start on the wrap counter the input says (frontends start on 1).
    let base = match bytes.first() {
        Some(b) if packed && b & 1 == 1 => crate::packed_ring::WRAP_BIT,
        _ => 0,
    };
    let (Ok(tx_ring), Ok(rx_ring)) = (layout(d0, a0, u0), layout(d1, a1, u1)) else {
        return;
    };
    let mem = Arc::new(mem);
    let shared = Arc::new(Shared::default());
    let queue = |layout, start| {
        Some(QueueSetup {
            layout,
            base,
            call: None,
            start,
        })
    };
    let mut queues: [Option<QueueSetup>; crate::device::MAX_QUEUES] = Default::default();
    queues[GUEST_TX] = queue(tx_ring, 1);
    queues[GUEST_RX] = queue(rx_ring, 2);
    let version_1 = sel & 8 != 0;
    let mrg_rxbuf = sel & 16 != 0;
    shared.publish(DeviceSnapshot {
        memory: mem,
        queues,
        hdr_len: DeviceSnapshot::header_len(version_1, mrg_rxbuf),
        mrg_rxbuf,
        event_idx: sel & 32 != 0,
        packed,
        sends: offloads(sel & 64 != 0),
        takes: offloads(sel & 128 != 0),
        rx_workers: [0; crate::device::MAX_QUEUE_PAIRS],
    });
    let config = PoolConfig {
        buffers: 64,
        headroom: 128,
        data_size: 2048,
        try_hugepages: false,
    };
    let Ok(mut pool) = BufferPool::with_jumbo(config, 4) else {
        return;
    };
    let stats = Arc::new(PortStats::default());
    let mut rx = VhostRx::on(
        "rx".into(),
        0,
        "tx".into(),
        shared.clone(),
        None,
        stats.clone(),
    );
    let mut tx = VhostTx::on("tx".into(), shared.clone(), None, stats);
    let errors: Vec<Counter> = Vec::new();
    let names: Vec<(String, String)> = Vec::new();
    let mut out = [0u32; 32];
    let mut nexts = [0u16; 32];
    for _ in 0..3 {
        let mut cx = NodeContext {
            pool: &mut pool,
            now_tsc: 0,
            tsc_hz: 1,
            worker: 0,
            error_base: 0,
            errors: &errors,
            error_names: &names,
        };
        let (got, _) = rx.poll(&mut cx, &mut out, &mut nexts);
        let got = got.min(out.len());
        // What arrived goes back to the guest (an echo), plus a frame of our own.
        let mut frame: Vec<u32> = out[..got].to_vec();
        if let Some(b) = cx.pool.alloc() {
            let (m, _) = cx.pool.slot_mut(b);
            m.length = 60;
            frame.push(b);
        }
        tx.process(&mut cx, &frame, &mut nexts);
    }
    assert_eq!(pool.available(), 64, "a buffer leaked");
    assert_eq!(pool.jumbo_available(), 4, "a jumbo buffer leaked");
}

/// Every offload, or none.
fn offloads(on: bool) -> Offloads {
    Offloads {
        csum: on,
        tso4: on,
        tso6: on,
        ecn: on,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random guest memory never panics the nodes or leaks a buffer.
        #[test]
        fn random_rings_are_survived(data in proptest::collection::vec(any::<u8>(), 0..0x6000)) {
            super::exercise(&data);
        }

        /// The same over packed rings.
        #[test]
        fn random_packed_rings_are_survived(
            data in proptest::collection::vec(any::<u8>(), 0..0x6000),
        ) {
            super::exercise_packed(&data);
        }

        /// Packed rings of descriptors that are mostly well formed: small addresses and
        /// lengths, flags from the few that matter (NEXT, WRITE, INDIRECT, AVAIL, USED), ids
        /// near the ring size.
        #[test]
        fn plausible_packed_rings_are_survived(
            sel in any::<u8>(),
            descs in proptest::collection::vec(
                (0u64..0x8000, 0u32..0x900, 0u16..110, proptest::sample::select(vec![
                    0u16, 1, 2, 3, 4, 0x80, 0x81, 0x82, 0x83, 0x8000, 0x8001, 0x8002, 0x8080,
                ])),
                0..128,
            ),
        ) {
            let mut data = vec![0u8; 1 + 16 * descs.len().max(1) + 0x100];
            data[0] = sel;
            for (i, (addr, len, id, flags)) in descs.iter().enumerate() {
                let at = 1 + 16 * i;
                data[at..at + 8].copy_from_slice(&addr.to_le_bytes());
                data[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
                data[at + 12..at + 14].copy_from_slice(&id.to_le_bytes());
                data[at + 14..at + 16].copy_from_slice(&flags.to_le_bytes());
            }
            super::exercise_packed(&data);
        }

        /// Mostly-zero memory with a few random words: chains that look almost right.
        #[test]
        fn sparse_rings_are_survived(
            sel in any::<u8>(),
            words in proptest::collection::vec((0usize..0x6000, any::<u64>()), 0..64),
        ) {
            let mut data = vec![0u8; 0x6001];
            data[0] = sel;
            for (at, w) in words {
                let at = 1 + (at & !7).min(0x5ff8);
                data[at..at + 8].copy_from_slice(&w.to_le_bytes());
            }
            super::exercise(&data);
        }
    }
}

//! Arbitrary bytes as one received frame through the whole router graph (`harness::router_spec`):
//! the first byte picks the receiving port (and two options), the rest is the frame. After each input: no panic,
//! every buffer back in the pool, rx = tx + drops (all asserted in `Harness::run`), and every
//! transmitted frame is a well-formed result of the input (`harness::check_output`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Mutex, OnceLock};
use vecplane_fuzz::harness::{check_output, Harness};

static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();

/// Make the IPv4 header checksum right (when the frame has an IPv4 header after at most two
/// tags), so mutations get past ip4-input's checksum check to lookup, rewrite and ICMP.
fn repair_ip4_checksum(f: &mut [u8]) {
    if f.len() < 14 {
        return;
    }
    let mut off = 14;
    let mut t = u16::from_be_bytes([f[12], f[13]]);
    for _ in 0..2 {
        if (t == 0x8100 || t == 0x88a8) && f.len() >= off + 4 {
            t = u16::from_be_bytes([f[off + 2], f[off + 3]]);
            off += 4;
        }
    }
    if t != 0x0800 || f.len() < off + 20 {
        return;
    }
    let ihl = ((f[off] & 15) as usize) * 4;
    if ihl < 20 || f.len() < off + ihl {
        return;
    }
    f[off + 10] = 0;
    f[off + 11] = 0;
    let mut s: u32 = 0;
    for c in f[off..off + ihl].chunks(2) {
        s += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    let c = (!(s as u16)).to_be_bytes();
    f[off + 10] = c[0];
    f[off + 11] = c[1];
}

fuzz_target!(|data: &[u8]| {
    // Selector byte: bits 0-5 pick the port, bit 6 repairs the IPv4 header checksum, bit 7
    // sends the frame twice in one vector.
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let mut owned;
    let frame = if selector & 0x40 != 0 {
        owned = frame.to_vec();
        repair_ip4_checksum(&mut owned);
        &owned[..]
    } else {
        frame
    };
    let h = HARNESS.get_or_init(|| Mutex::new(Harness::router()));
    let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
    let ports = h.spec.ports.len() as u16;
    let rx_port = (selector & 0x3f) as u16 % ports;
    let twice = selector & 0x80 != 0;
    let frames: Vec<(u16, &[u8])> = if twice {
        vec![(rx_port, frame), (rx_port, frame)]
    } else {
        vec![(rx_port, frame)]
    };
    let (_, sent) = h.run(&frames);
    assert!(sent.len() <= frames.len(), "more frames out than in");
    for s in &sent {
        if let Err(e) = check_output(&h.spec, rx_port, frame, s.port, &s.bytes) {
            panic!(
                "bad output on port {}: {e}\n input (port {rx_port}): {:02x?}\n output: {:02x?}",
                s.port, frame, s.bytes
            );
        }
    }
});

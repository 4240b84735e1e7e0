//! Arbitrary bytes as a TCP super-packet through software segmentation and checksum finishing
//! (`vecplane_fuzz::gso_check::run`): no panic, nothing emitted for a refused frame, and for an
//! accepted one payloads that put together are the original's, each segment's lengths and
//! checksums right. The first five bytes choose the kind, the mss, csum_start and csum_offset.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vecplane_fuzz::gso_check::run(data);
});

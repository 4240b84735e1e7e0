//! Arbitrary bytes as a frame through the virtual switch's flow extraction and header writes
//! (`vecplane_fuzz::flow_check::run`): no panic, offsets inside the frame, the key a function of
//! the bytes, a write changes only its field and keeps valid checksums valid, VLAN push/pop
//! round trips. The first four bytes choose the field, value, mask and input port.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vecplane_fuzz::flow_check::run(data);
});

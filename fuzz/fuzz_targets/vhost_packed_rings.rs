//! Arbitrary guest memory under a vhost-user port's two nodes over packed virtqueues
//! (`vhostuser::fuzzing::exercise_packed`): descriptors with any flags, ids and wrap bits,
//! event suppression structures, buffer addresses and lengths and virtio-net headers as a
//! hostile guest may write them. No panic, no access outside the guest's memory (a fault), no
//! leaked buffer. The first byte chooses the ring size and the negotiated features.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vhostuser::fuzzing::exercise_packed(data);
});

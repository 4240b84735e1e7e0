//! Arbitrary bytes as BIRD's side of its control socket (`birdc`'s protocol): replies read
//! one after the other never panic, and each one read is whole.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::bird_reply(data);
});

//! Arbitrary bytes as the route file a valid config includes (`route-file`): never a panic,
//! and every problem names a line of the route file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::route_file(data);
});

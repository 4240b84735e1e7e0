//! Arbitrary bytes as the JSON body of an API request (first byte: which endpoint that takes a
//! body) to a fresh control plane: never a panic, never a server error; a refusal is a JSON
//! error naming what was wrong.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    control::fuzzing::api_body(usize::from(which), body);
});

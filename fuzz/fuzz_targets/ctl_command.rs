//! Arbitrary text as lines of the `vecplane ctl` command language through
//! `control::parse_command`: never a panic; a refusal says what is accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        control::fuzzing::command_line(line);
    }
});

//! Arbitrary text as a config file through `control::Config::parse` (TOML, then every
//! section's validation): never a panic, and every problem names a line of the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    control::fuzzing::config_text(text);
});

//! Arbitrary bytes as `lb` CLI text through `lb::cli::parse_lines` and `parse_line`. Must never
//! panic; whatever parses must print, the printed line must parse to the same command, and a
//! parsed batch applied to an empty `LbState` must either apply or be refused, never panic; an
//! applied state must print as lines that rebuild it, and its snapshot must build.
#![no_main]

use lb::cli;
use lb::model::LbState;
use lb::snapshot::LbTables;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for line in s.lines() {
        if let Ok(c) = cli::parse_line(line) {
            let text = cli::format_command(&c);
            let back = cli::parse_line(&text).expect("a printed command parses");
            assert_eq!(back, c, "{text}");
        }
    }
    if let Ok(cmds) = cli::parse_lines(s) {
        if let Ok(st) = LbState::new().apply(&cmds) {
            let printed = cli::format_state(&st);
            let again = LbState::new()
                .apply(&cli::parse_lines(&printed).expect("a printed state parses"))
                .expect("a printed state applies");
            assert_eq!(cli::format_state(&again), printed);
            let t = LbTables::build(&st, None);
            let _ = cli::format_show(&t, lb::model::LbShow::Vips { verbose: true });
        }
    }
});

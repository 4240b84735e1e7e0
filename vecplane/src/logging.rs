//! The daemon's log: what happens while it runs (health transitions, BGP sessions, reload
//! outcomes, workers, vhost-user devices), as `tracing` events on standard error, one line
//! each, in text for a terminal or JSON for journald and log collectors (`--log-format json`:
//! `timestamp`, `level`, `target`, `fields.message`). `--log-level` keeps the events at or
//! above it. It owns only the subscriber; what the daemon tells its operator at start and stop
//! (the `running ...` line) stays on standard output.

use clap::ValueEnum;
use tracing_subscriber::filter::LevelFilter;

/// How events are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line: time, level, where, message.
    Text,
    /// One JSON object a line.
    Json,
}

/// The least severe events written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// And what changes state (the default).
    Info,
    /// And details.
    Debug,
}

impl LogLevel {
    fn filter(self) -> LevelFilter {
        match self {
            LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
        }
    }
}

/// Send this process's events to standard error (once; a second call changes nothing).
pub fn init(format: LogFormat, level: LogLevel) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level.filter());
    let _ = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

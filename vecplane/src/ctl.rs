//! `vecplane ctl`: send one command to a running daemon over its control socket and print the
//! reply (text, or the JSON data with `--json`). It never interprets counters itself.

use control::{request, DEFAULT_SOCKET};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `vecplane ctl`.
#[derive(clap::Args)]
pub struct CtlArgs {
    /// The daemon's control socket.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print the reply's JSON data (pretty-printed) instead of its text.
    #[arg(long)]
    json: bool,
    /// The command, e.g. `show runtime` or `trace add in0-rx 10`; `help` lists them.
    #[arg(required = true, value_name = "WORDS")]
    words: Vec<String>,
}

/// Send the command; exit 1 when the daemon answers with an error.
pub fn main(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let command = absolute_capture_file(&args.words).join(" ");
    let reply = request(&args.socket, &command, args.json)?;
    if !reply.ok {
        eprintln!(
            "vecplane ctl: {}",
            reply
                .error
                .as_deref()
                .unwrap_or("the daemon reported an error without a message")
        );
        return Ok(ExitCode::FAILURE);
    }
    let out = if args.json {
        let data = reply.data.unwrap_or(serde_json::Value::Null);
        serde_json::to_string_pretty(&data)? + "\n"
    } else {
        reply.text.unwrap_or_default()
    };
    // A reader that went away (`vecplane ctl show runtime | head`) is not an error.
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write the reply to stdout")),
    }
}

/// `pcap start PORT FILE ...` with a relative FILE names it from the caller's directory (the
/// daemon has its own working directory); other commands pass unchanged.
fn absolute_capture_file(words: &[String]) -> Vec<String> {
    let mut w = words.to_vec();
    let is_start = matches!(
        (w.first().map(String::as_str), w.get(1).map(String::as_str)),
        (Some("pcap"), Some(s)) if "start".starts_with(s) && !s.is_empty()
    );
    if is_start {
        if let Some(file) = w.get_mut(3) {
            let p = std::path::Path::new(file.as_str());
            if p.is_relative() {
                if let Ok(cwd) = std::env::current_dir() {
                    *file = cwd.join(p).display().to_string();
                }
            }
        }
    }
    w
}

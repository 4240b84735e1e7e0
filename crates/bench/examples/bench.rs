//! Stand-in for `vecplane bench` until the binary wires `BenchArgs` in: parses the same arguments
//! and calls `bench::run`. It owns nothing else and must never grow its own measurement logic.

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Benchmark vecplane scenarios through the real graph"
)]
struct Cli {
    #[command(flatten)]
    args: bench::BenchArgs,
}

fn main() -> ExitCode {
    match bench::run(&Cli::parse().args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

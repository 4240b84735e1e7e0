//! The `vecplane` binary: parses the command line and dispatches to one module per subcommand.
//! It holds no logic of its own; errors reach it as `anyhow` values and are printed once here.

mod ctl;
mod demo;
mod demo_fleet;
mod demo_vms;
mod features;
mod logging;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// A user-space, poll-mode, vector packet-processing data plane.
#[derive(Parser)]
#[command(name = "vecplane", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the data plane described by a config file (the daemon).
    Run(run::RunArgs),
    /// Send a command to a running daemon (`vecplane ctl help` lists them).
    Ctl(ctl::CtlArgs),
    /// Measure the real graph on memory ports (Mpps, Gbit/s, cycles/packet per node).
    Bench(bench::BenchArgs),
    /// How many cores for a traffic (rate, frame mix, hit ratio, new flows), from the bench profile.
    Plan(planner::PlanArgs),
    /// Build namespaces A - R - B with vecplane routing in R, send real traffic, show the counters
    /// (--fleet: three load balancers behind BGP/ECMP under HTTP load; --vms: two QEMU guests on
    /// vhost-user ports).
    Demo(demo::DemoArgs),
    /// AF_XDP traffic generator (`gen tx`) and sink (`gen sink`) for measurements on real interfaces.
    Gen(trafficgen::GenArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    features::install();
    let (name, result) = match cli.command {
        Cmd::Run(args) => ("run", run::main(args)),
        Cmd::Ctl(args) => ("ctl", ctl::main(args)),
        Cmd::Bench(args) => ("bench", bench::run(&args).map(|()| ExitCode::SUCCESS)),
        Cmd::Plan(args) => ("plan", planner::run(&args).map(|()| ExitCode::SUCCESS)),
        Cmd::Demo(args) => ("demo", demo::main(args)),
        Cmd::Gen(args) => ("gen", trafficgen::run(&args).map(|()| ExitCode::SUCCESS)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vecplane {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

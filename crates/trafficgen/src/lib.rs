//! `vecplane gen`: vecplane's own traffic generator and sink for measurements on real interfaces.
//! `gen tx` sends UDP frames of one size (IPv4 or IPv6, many flows by UDP source port, paced by
//! the TSC or as fast as possible) either as XDP live frames (the default: the kernel builds
//! them from a template, vecplane's generator XDP program picks each frame's flow, and they are
//! redirected into the interface in bulk; about 2.5 Mpps of 64 B frames into a veth on one
//! core) or through an AF_XDP socket (copy mode on veth: one socket buffer per frame, about
//! 0.5 Mpps). `gen sink` counts what arrives on an interface's queue through an AF_XDP socket.
//! Both busy-poll one (optionally pinned) thread, print progress once a second on stderr and a
//! summary (text, or one JSON object on stdout) at the end.
//!
//! `run(&GenArgs)` is the whole command. Modules: `args` (command line and its checks), `frames`
//! (what is sent), `pace` (TSC pacing), `tx`, `tx_live` and `sink` (the loops), `report` (what
//! is printed), `sys` (CPU pinning, signals, privileges, interface facts; the only `unsafe`).
//! This crate moves and counts packets for measurement; it never forwards or answers them.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod args;
pub mod frames;
pub mod pace;
pub mod report;
pub mod sink;
mod sys;
pub mod tx;
pub mod tx_live;

pub use args::{GenArgs, GenMode, SinkArgs, TxArgs};

use afxdp::ModeChoice;
use anyhow::{Context, Result};
use args::{CommonArgs, TxMethod, XdpModeArg};
use std::io::Write;

fn mode_choice(m: XdpModeArg) -> ModeChoice {
    match m {
        XdpModeArg::Auto => ModeChoice::Auto,
        XdpModeArg::Native => ModeChoice::Native,
        XdpModeArg::Generic => ModeChoice::Generic,
    }
}

/// Privileges, stop signals, pinning and the TSC rate: what both sides need before their loop.
fn prepare(common: &CommonArgs) -> Result<u64> {
    sys::check_privileges()?;
    sys::install_stop_signals();
    if let Some(cpu) = common.cpu {
        sys::pin_to_cpu(cpu)?;
    }
    // 100 ms on the (pinned) thread that will read the TSC.
    Ok(graph::measure_tsc_hz(100).max(1))
}

fn print_summary(json: bool, value: serde_json::Value, text: String) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{value}").context("cannot write the summary")?;
    } else {
        writeln!(out, "{text}").context("cannot write the summary")?;
    }
    out.flush().context("cannot write the summary")
}

/// Run `vecplane gen tx` or `vecplane gen sink`.
pub fn run(args: &GenArgs) -> Result<()> {
    match &args.mode {
        GenMode::Tx(t) => {
            let facts = sys::interface_facts(&t.common.interface)?;
            let plan = args::tx_plan(t, facts.mac, facts.mtu)?;
            let tsc_hz = prepare(&t.common)?;
            let run = tx::TxRun {
                mode: mode_choice(t.common.xdp_mode),
                tsc_hz,
                progress: !t.common.no_progress,
            };
            // Generic XDP asked for: only the AF_XDP socket has it.
            let generic = t.common.xdp_mode == XdpModeArg::Generic;
            let summary = match plan.method {
                TxMethod::AfXdp => tx::run_tx(&plan, run, &sys::stop_requested)?,
                TxMethod::Auto if generic => tx::run_tx(&plan, run, &sys::stop_requested)?,
                TxMethod::XdpLive | TxMethod::Auto => {
                    match tx_live::run_tx_live(&plan, run, &sys::stop_requested)? {
                        tx_live::LiveOutcome::Done(s) => s,
                        tx_live::LiveOutcome::Unusable(why)
                            if plan.method == TxMethod::Auto && plan.new_flows_per_second == 0 =>
                        {
                            eprintln!(
                                "vecplane gen tx: live frames unusable ({why}); sending through \
                                 an AF_XDP socket instead"
                            );
                            tx::run_tx(&plan, run, &sys::stop_requested)?
                        }
                        tx_live::LiveOutcome::Unusable(why) => {
                            anyhow::bail!("--method xdp-live: {why}; or use --method af-xdp")
                        }
                    }
                }
            };
            print_summary(t.common.json, summary.json(), summary.text())
        }
        GenMode::Sink(s) => {
            sys::interface_facts(&s.common.interface)?;
            let plan = args::sink_plan(s)?;
            let tsc_hz = prepare(&s.common)?;
            let summary = sink::run_sink(
                &plan,
                sink::SinkRun {
                    mode: mode_choice(s.common.xdp_mode),
                    tsc_hz,
                    progress: !s.common.no_progress,
                },
                &sys::stop_requested,
            )?;
            print_summary(s.common.json, summary.json(), summary.text())
        }
    }
}

//! The `lb` command language of FD.io VPP's load-balancer plugin, as vecplane speaks it in the
//! config file, `vecplane ctl` and the API: parse lines into `LbCommand`s, print commands and
//! whole states back as canonical lines, and render `show lb`. Owns no state and never applies
//! anything (that is `LbState::apply`); never panics on any input.
//!
//! Accepted (VPP's lines unchanged, keywords in any order after the prefix, each once):
//! ```text
//! lb vip <prefix> [protocol tcp|udp] [port <n>] [encap gre4|gre6|l3dsr|nat4|nat6] [dscp <n>]
//!        [type clusterip|nodeport] [target_port <n>] [node_port <n>] [new_len <n>]
//!        [src_ip_sticky] [del]
//! lb as <vip-prefix> [protocol tcp|udp] [port <n>] <addr> [<addr> ...] [weight <0-100>]
//!        [del] [flush]
//! lb conf [ip4-src-address <addr>[/<len>]] [ip6-src-address <addr>[/<len>]] [buckets <n>]
//!         [buckets-log2 <n>] [timeout <s>] [timeout tcp|udp|other <s>]
//! lb flush vip <prefix> [protocol tcp|udp] [port <n>]
//! lb set interface nat4|nat6 in <port> [in <port> ...] [del]
//! show lb
//! show lb vips [verbose]
//! ```
//! Defaults: encap gre4 (VPP's), new_len 65537 (VPP's CLI says 1024; Maglev wants a prime at
//! least 100x the servers), timeouts 40 s, buckets 1048576. A prefix may be written as a bare
//! address (a host prefix). In files, `#` starts a comment and blank lines are skipped.
//!
//! As VPP: host bits of a VIP prefix are cleared (`90.1.2.3/8` is `90.0.0.0/8`); a VIP
//! without a port (or `port 0`) takes every protocol and port, whatever `protocol` says; one
//! `weight` (0..=100, default 100) for every address of an `lb as` line; `flush` with or
//! without `del`; `type nodeport` (the node port is `node_port`, as VPP's API and plugin docs
//! write it, else the VIP's port, as VPP's CLI registers it; `node_port` alone means nodeport).
//!
//! Extensions: `timeout tcp|udp|other <s>` (plain
//! `timeout <s>` sets all three, VPP's meaning); a prefix for `ip4-src-address` /
//! `ip6-src-address` (GRE outer sources spread over it). See `model` for the rules.
//!
//! Stricter than VPP: a port needs a protocol; numbers out of range (`port 70000`, `dscp 64`,
//! `weight 101`), a keyword given twice (VPP keeps the last) and host bits in an
//! `ip4-src-address`/`ip6-src-address` prefix are refused.

mod error;
mod format;
mod parse;
mod show;

#[cfg(test)]
mod tests;

pub use error::{CliError, CliFileError};
pub use format::{conf_command, format_command, format_state, state_commands};
pub use parse::parse_line;
pub use show::format_show;

use crate::model::LbCommand;

/// A file (or a `vecplane ctl` batch) of `lb` lines: `#` comments and blank lines skipped; the
/// first bad line refuses the whole text, with its 1-based line number.
pub fn parse_lines(text: &str) -> Result<Vec<LbCommand>, CliFileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|source| CliFileError {
            line: i + 1,
            source,
        })?);
    }
    Ok(out)
}

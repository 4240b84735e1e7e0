//! BGP announcements of the load balancer's VIPs through the operator's BIRD 2 daemon.
//!
//! vecplane never speaks BGP. BIRD runs beside it with `include "<routes-file>";` at the top
//! level of its bird.conf and a BGP export filter that takes the routes of vecplane's two static
//! protocols (`<protocol>4`, `<protocol>6`). vecplane writes that file ([`routes::render`],
//! [`routes::write_atomically`]) and asks BIRD to re-read its configuration over BIRD's control
//! socket ([`bird::configure`]). Every route goes `via "<interface>"`, a TAP device vecplane holds
//! open: when vecplane dies the device disappears and BIRD withdraws the routes at once.
//!
//! What BIRD 2.0.12 does with the attributes (checked with two BIRDs over eBGP): communities
//! and large communities set on the static routes are sent as they are; `bgp_med` and
//! `bgp_next_hop` set on a static route are NOT sent to an eBGP peer unless the export filter
//! sets them again (BIRD keeps only MED "set in the export filter" and replaces the next hop by
//! its own address; `next hop keep` in the channel keeps the next hop but not the MED). Over
//! iBGP both are kept. The operator's BGP channel therefore exports with a filter like:
//!
//! ```text
//! filter vecplane_export {
//!   if proto = "vecplane4" || proto = "vecplane6" then {
//!     if defined(bgp_med) then bgp_med = bgp_med;
//!     if defined(bgp_next_hop) then bgp_next_hop = bgp_next_hop;
//!     accept;
//!   }
//!   reject;
//! }
//! protocol bgp upstream { ...; ipv4 { export filter vecplane_export; }; }
//! ```
//!
//! This module owns the `[bgp]` settings ([`BgpConfig`], filled by the config module), the text
//! of the routes file and the client of BIRD's control socket. It never decides *when* to
//! announce (the caller does, from data-plane readiness and server health), never opens the
//! liveness device and never edits the operator's bird.conf.

pub mod bird;
pub mod routes;

#[cfg(test)]
mod bird_tests;
#[cfg(test)]
pub(crate) mod real_bird_tests;
#[cfg(test)]
mod routes_security_tests;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Default liveness interface (`[bgp] interface`).
pub const DEFAULT_INTERFACE: &str = "vplbgp0";
/// Default static protocol name prefix (`[bgp] protocol`).
pub const DEFAULT_PROTOCOL: &str = "vecplane";
/// Default `[bgp] drain-timeout-ms`.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_millis(30_000);
/// Default `[bgp] drain-quiet-ms`.
pub const DEFAULT_DRAIN_QUIET: Duration = Duration::from_millis(2_000);
/// Default `[bgp] stall-ms`.
pub const DEFAULT_STALL: Duration = Duration::from_millis(500);

/// The BGP daemon vecplane drives (`[bgp] daemon`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Daemon {
    /// BIRD 2: a routes file included by bird.conf, `configure` over its control socket.
    #[default]
    Bird,
}

/// The `[bgp]` table: how the VIPs are announced. Plain, validated data (names are checked at
/// parse time so they can be written into BIRD's config without escaping); it does no I/O.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BgpConfig {
    /// The daemon (only BIRD for now).
    pub daemon: Daemon,
    /// BIRD's control socket (`bird -s PATH`, Debian: /run/bird/bird.ctl).
    pub control_socket: PathBuf,
    /// The file vecplane writes and bird.conf includes.
    pub routes_file: PathBuf,
    /// The liveness device the routes go via: 1..=15 bytes of `[A-Za-z0-9_.-]`.
    pub interface: String,
    /// Static protocol name prefix (a BIRD symbol); the protocols are `<protocol>4`/`<protocol>6`.
    pub protocol: String,
    /// `bgp_med` of every route, if set.
    pub med: Option<u32>,
    /// Standard communities `(ASN, VALUE)` added to every route.
    pub communities: Vec<(u16, u16)>,
    /// Large communities `(GLOBAL, LOCAL1, LOCAL2)` added to every route.
    pub large_communities: Vec<(u32, u32, u32)>,
    /// `bgp_next_hop` of the IPv4 routes, if set.
    pub next_hop4: Option<Ipv4Addr>,
    /// `bgp_next_hop` of the IPv6 routes, if set.
    pub next_hop6: Option<Ipv6Addr>,
    /// How long `vecplane ctl drain` waits at most after the withdrawal before traffic stops.
    pub drain_timeout: Duration,
    /// After the withdrawal, the drain ends early once no new flow has arrived for this long
    /// (the routers have moved the traffic elsewhere); at most `drain_timeout` in all.
    pub drain_quiet: Duration,
    /// How long the workers may make no progress before the announcement is withdrawn.
    pub stall: Duration,
}

impl BgpConfig {
    /// The settings with every optional key at its default.
    pub fn new(control_socket: impl Into<PathBuf>, routes_file: impl Into<PathBuf>) -> BgpConfig {
        BgpConfig {
            daemon: Daemon::Bird,
            control_socket: control_socket.into(),
            routes_file: routes_file.into(),
            interface: DEFAULT_INTERFACE.to_string(),
            protocol: DEFAULT_PROTOCOL.to_string(),
            med: None,
            communities: Vec::new(),
            large_communities: Vec::new(),
            next_hop4: None,
            next_hop6: None,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            drain_quiet: DEFAULT_DRAIN_QUIET,
            stall: DEFAULT_STALL,
        }
    }

    /// The name of the IPv4 static protocol (`<protocol>4`).
    pub fn protocol4(&self) -> String {
        format!("{}4", self.protocol)
    }

    /// The name of the IPv6 static protocol (`<protocol>6`).
    pub fn protocol6(&self) -> String {
        format!("{}6", self.protocol)
    }
}

/// Longest `[bgp] protocol` prefix.
pub const PROTOCOL_MAX_LEN: usize = 32;

/// Prefixes that would make `<prefix>4`/`<prefix>6` a BIRD 2 keyword or predefined symbol
/// (`ipv4`, `vpn6`, `roa4`, `flow6`, `master4`, ...), found with `bird -p` on 2.0.12.
const RESERVED_PROTOCOLS: &[&str] = &["ipv", "vpn", "roa", "flow", "master"];

/// Why `name` cannot be the static protocol prefix, or None when it can: a letter or `_`, then
/// letters, digits and `_`, at most [`PROTOCOL_MAX_LEN`] characters, not a reserved prefix.
pub fn protocol_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some(format!(
            "`{name}` is not a BIRD symbol; accepted: a letter or `_`, then letters, digits and \
             `_`, 1 to {PROTOCOL_MAX_LEN} characters (like vecplane)"
        ));
    }
    if name.len() > PROTOCOL_MAX_LEN {
        return Some(format!(
            "`{name}` is {} characters long; accepted: 1 to {PROTOCOL_MAX_LEN} characters",
            name.len()
        ));
    }
    if RESERVED_PROTOCOLS.contains(&name) {
        return Some(format!(
            "`{name}4`/`{name}6` are BIRD keywords or tables; accepted: another name (like \
             vecplane), not one of {}",
            RESERVED_PROTOCOLS.join(", ")
        ));
    }
    None
}

/// Why `name` cannot be the liveness interface, or None when it can: 1..=15 bytes of
/// `[A-Za-z0-9_.-]`, not `.` or `..`.
pub fn interface_problem(name: &str) -> Option<String> {
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if name.is_empty() || name.len() > 15 || !chars_ok || name == "." || name == ".." {
        return Some(format!(
            "`{name}` is not an interface name; accepted: 1 to 15 characters from a-z A-Z 0-9 \
             _ . - (not `.` or `..`), like {DEFAULT_INTERFACE}"
        ));
    }
    None
}

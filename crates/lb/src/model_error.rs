//! Why `LbState::apply` refused a batch: which command and what was wrong, naming the VIP or
//! server and what is accepted. Owns no state; never decides anything itself.

use super::VipKey;
use std::net::IpAddr;

/// What was wrong with a batch of commands: which command (0-based index into the batch) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("command {index}: {kind}")]
pub struct LbError {
    /// Index of the refused command in the batch given to `apply`.
    pub index: usize,
    /// What was wrong.
    pub kind: LbErrorKind,
}

/// Why a command was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LbErrorKind {
    /// The VIP does not exist.
    #[error("no VIP {0}; create it first with `lb vip {0} encap ...`")]
    NoSuchVip(VipKey),
    /// The server is not on the VIP.
    #[error("server {addr} is not on VIP {vip}")]
    NoSuchServer {
        /// The VIP.
        vip: VipKey,
        /// The server.
        addr: IpAddr,
    },
    /// The same server twice in one command.
    #[error("server {0} given twice on one line; give each server once")]
    DuplicateServer(IpAddr),
    /// A server address that can never be one.
    #[error("server {0}: not a unicast address; accepted: a unicast IPv4 or IPv6 address")]
    BadServer(IpAddr),
    /// A server of the wrong family for the encap.
    #[error(
        "server {addr} on VIP {vip}: encap {encap} sends to {want} servers; \
         use gre4/l3dsr/nat4 for IPv4 servers, gre6/nat6 for IPv6 servers"
    )]
    ServerFamily {
        /// The VIP.
        vip: VipKey,
        /// The server.
        addr: IpAddr,
        /// The encap.
        encap: &'static str,
        /// "IPv4" or "IPv6".
        want: &'static str,
    },
    /// A VIP whose settings do not fit together.
    #[error("VIP {vip}: {reason}")]
    BadVip {
        /// The VIP.
        vip: VipKey,
        /// What was wrong and what is accepted.
        reason: String,
    },
    /// Two L3DSR VIPs a server could not tell apart.
    #[error(
        "VIP {vip}: dscp {dscp} is also used by L3DSR VIP {other}, and server {server} serves \
         both; the server could not tell which VIP a packet was for: give each a different dscp"
    )]
    DscpClash {
        /// The VIP.
        vip: VipKey,
        /// The other VIP.
        other: VipKey,
        /// The shared DSCP.
        dscp: u8,
        /// A shared server.
        server: IpAddr,
    },
    /// GRE needs an outer source.
    #[error("VIP {vip}: encap {encap} needs `lb conf {key} <address>` first")]
    NoSource {
        /// The VIP.
        vip: VipKey,
        /// gre4 or gre6.
        encap: &'static str,
        /// ip4-src-address or ip6-src-address.
        key: &'static str,
    },
    /// A limit was reached.
    #[error("too many {what}: at most {max}")]
    Full {
        /// VIPs or AS slots.
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// A weight out of VPP's range.
    #[error("server {addr}: weight {weight} is out of range; accepted: 0..=100 (VPP's range)")]
    BadWeight {
        /// The server.
        addr: IpAddr,
        /// The weight given.
        weight: u32,
    },
    /// The change would pass the LB memory cap.
    #[error(
        "the load balancer's tables would need {need}, over its memory limit of {limit}; \
         raise `memory-limit` in the config's [lb] table (then reload), or use fewer VIPs, a \
         smaller new_len or smaller `lb conf buckets`"
    )]
    MemoryLimit {
        /// What the state after the change needs, with its parts.
        need: String,
        /// The cap.
        limit: String,
    },
    /// A nodeport VIP whose node port is taken, or without the node address it needs.
    #[error("VIP {vip}: type nodeport: {reason}")]
    NodePort {
        /// The VIP.
        vip: VipKey,
        /// What was wrong and what is accepted.
        reason: String,
    },
    /// A NAT inside port that is not set.
    #[error("port {0:?} is not a NAT inside port")]
    NoSuchNatPort(String),
}

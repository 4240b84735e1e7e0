//! What leaves a worker for the exporter: one finished (or active-timeout) flow report, a plain
//! `Copy` value that fits a ring slot, and what the LB and the flow switch may add to a flow
//! (`Annotation`). It owns no encoding (see `template`) and never allocates.

use std::net::{IpAddr, Ipv4Addr};

/// Why a report was made (IANA `flowEndReason`, element 136).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EndReason {
    /// No packet for the idle timeout (`idleTimeout`, 1).
    #[default]
    Idle = 1,
    /// The flow ran past the active timeout; it goes on (`activeTimeout`, 2).
    Active = 2,
    /// TCP FIN or RST seen, then the flow went quiet (`endOfFlowDetected`, 3).
    EndOfFlow = 3,
    /// Flushed: the feature was disabled or the exporter is stopping (`forcedEnd`, 4).
    Forced = 4,
    /// Evicted to make room for a new flow (`lackOfResources`, 5).
    LackOfResources = 5,
}

/// What a node after the LB or the flow switch knows about a packet's flow beyond its headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Annotation {
    /// The application server the LB chose (exported as `postNATDestinationIPv4Address` or
    /// `postNATDestinationIPv6Address`).
    pub server: Option<IpAddr>,
    /// The cookie of the flow-switch rule that matched (exported as the enterprise-specific
    /// `openflowCookie`).
    pub cookie: Option<u64>,
}

/// One flow report: the flow's key, what was counted since its previous report, and why it
/// was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    /// Source address (the record's family is this address's).
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 when the packet carries none: ICMP, later fragments, other protocols).
    pub src_port: u16,
    /// Destination port (ICMP: type x 256 + code, as NetFlow collectors expect).
    pub dst_port: u16,
    /// IP protocol (IPv6: the header after the extension headers).
    pub protocol: u8,
    /// OR of the TCP flags seen.
    pub tcp_flags: u8,
    /// Receiving port id + 1 (`ingressInterface`; 0: unknown).
    pub ingress: u32,
    /// Sending port id + 1 (`egressInterface`; 0: unknown, e.g. metered before the lookup).
    pub egress: u32,
    /// Packets counted (`packetDeltaCount`; sampled packets only when sampling).
    pub packets: u64,
    /// IP bytes counted, headers included (`octetDeltaCount`).
    pub octets: u64,
    /// Wall time of the first counted packet, ms since the Unix epoch.
    pub start_ms: u64,
    /// Wall time of the last counted packet.
    pub end_ms: u64,
    /// Why the report was made.
    pub reason: EndReason,
    /// What the LB and the flow switch added.
    pub annotation: Annotation,
    /// One packet in this many was metered (1: every packet; otherwise exported as the
    /// `selectorId` of a systematic count-based selector).
    pub sampling: u32,
}

impl Default for FlowRecord {
    fn default() -> FlowRecord {
        FlowRecord {
            src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            dst_port: 0,
            protocol: 0,
            tcp_flags: 0,
            ingress: 0,
            egress: 0,
            packets: 0,
            octets: 0,
            start_ms: 0,
            end_ms: 0,
            reason: EndReason::Idle,
            annotation: Annotation::default(),
            sampling: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_fits_two_cache_lines() {
        // A ring slot; 4,096 of them are about 0.5 MiB per worker.
        assert!(
            std::mem::size_of::<FlowRecord>() <= 128,
            "{}",
            std::mem::size_of::<FlowRecord>()
        );
    }
}

//! Templates and record encoding per RFC 7011/7012: the information elements vecplane exports
//! (IANA numbers, lengths), the data templates (one per record shape: family, server address,
//! cookie), the sampling options templates, and the bytes of each record. It owns the wire
//! layout of records only; messages and sequence numbers are `message`'s, and it never does I/O.
//!
//! Record shapes are fixed per template id, so a collector never sees a template id change
//! meaning: ids 256..=267 are `256 + v6 + 2 x server (none, v4, v6) + 6 x cookie`.
//!
//! Sampling (one packet in N, systematic count-based) is described by an options record whose
//! scope is the observation domain — sampling is configured for the whole feature — carrying
//! `samplingPacketInterval` = 1 and `samplingPacketSpace` = N - 1 (IANA 305/306, RFC 5477).
//! It is sent in two options templates: 268 adds `selectorAlgorithm` (304) = 1 (systematic
//! count-based), the complete description newer collectors read; 269 has the two parameters
//! only, the form nfdump up to 1.7.1 (Debian 12) recognises (its check refused 304 next to 306
//! until upstream fixed it in 2023, nfdump issue #410). Counts in data records are what was
//! metered; the collector scales them.

use crate::record::{EndReason, FlowRecord};
use std::net::IpAddr;

/// IANA information element ids (https://www.iana.org/assignments/ipfix).
pub mod ie {
    /// `octetDeltaCount` (unsigned64).
    pub const OCTET_DELTA_COUNT: u16 = 1;
    /// `packetDeltaCount` (unsigned64).
    pub const PACKET_DELTA_COUNT: u16 = 2;
    /// `protocolIdentifier` (unsigned8).
    pub const PROTOCOL_IDENTIFIER: u16 = 4;
    /// `tcpControlBits` (unsigned16, RFC 7125).
    pub const TCP_CONTROL_BITS: u16 = 6;
    /// `sourceTransportPort` (unsigned16).
    pub const SOURCE_TRANSPORT_PORT: u16 = 7;
    /// `sourceIPv4Address`.
    pub const SOURCE_IPV4_ADDRESS: u16 = 8;
    /// `ingressInterface` (unsigned32).
    pub const INGRESS_INTERFACE: u16 = 10;
    /// `destinationTransportPort` (unsigned16).
    pub const DESTINATION_TRANSPORT_PORT: u16 = 11;
    /// `destinationIPv4Address`.
    pub const DESTINATION_IPV4_ADDRESS: u16 = 12;
    /// `egressInterface` (unsigned32).
    pub const EGRESS_INTERFACE: u16 = 14;
    /// `sourceIPv6Address`.
    pub const SOURCE_IPV6_ADDRESS: u16 = 27;
    /// `destinationIPv6Address`.
    pub const DESTINATION_IPV6_ADDRESS: u16 = 28;
    /// `flowEndReason` (unsigned8).
    pub const FLOW_END_REASON: u16 = 136;
    /// `flowStartMilliseconds` (dateTimeMilliseconds).
    pub const FLOW_START_MILLISECONDS: u16 = 152;
    /// `flowEndMilliseconds` (dateTimeMilliseconds).
    pub const FLOW_END_MILLISECONDS: u16 = 153;
    /// `postNATDestinationIPv4Address`: the destination after a NAT function past the
    /// observation point — the LB's rewrite to the chosen server.
    pub const POST_NAT_DESTINATION_IPV4_ADDRESS: u16 = 226;
    /// `postNATDestinationIPv6Address`.
    pub const POST_NAT_DESTINATION_IPV6_ADDRESS: u16 = 282;
    /// `observationDomainId` (unsigned32): the scope of the sampling options.
    pub const OBSERVATION_DOMAIN_ID: u16 = 149;
    /// `selectorAlgorithm` (unsigned16).
    pub const SELECTOR_ALGORITHM: u16 = 304;
    /// `samplingPacketInterval` (unsigned32): packets taken in a row.
    pub const SAMPLING_PACKET_INTERVAL: u16 = 305;
    /// `samplingPacketSpace` (unsigned32): packets passed over between two intervals.
    pub const SAMPLING_PACKET_SPACE: u16 = 306;
    /// `selectorAlgorithm` value: systematic count-based sampling (RFC 5475).
    pub const SYSTEMATIC_COUNT_BASED: u16 = 1;
    /// Enterprise-specific element number of `openflowCookie` (unsigned64) under the
    /// configured Private Enterprise Number: IANA registers no element for an OpenFlow cookie.
    pub const OPENFLOW_COOKIE: u16 = 1;
}

/// Set id of template sets.
pub const TEMPLATE_SET_ID: u16 = 2;
/// Set id of options template sets.
pub const OPTIONS_TEMPLATE_SET_ID: u16 = 3;
/// Template id of the sampling options template with `selectorAlgorithm`.
pub const SAMPLING_OPTIONS_TEMPLATE_ID: u16 = 268;
/// Template id of the sampling options template with the parameters only (nfdump <= 1.7.1).
pub const SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID: u16 = 269;

/// One field specifier of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Information element id (without the enterprise bit).
    pub id: u16,
    /// Bytes in a record.
    pub len: u16,
    /// Private Enterprise Number of an enterprise-specific element.
    pub enterprise: Option<u32>,
}

const fn iana(id: u16, len: u16) -> Field {
    Field {
        id,
        len,
        enterprise: None,
    }
}

/// The shape of a data record: which template it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// IPv6 flow key.
    pub v6: bool,
    /// The chosen server's address: none, IPv4 or IPv6 (false/true).
    pub server: Option<bool>,
    /// Carries the rule's cookie.
    pub cookie: bool,
}

impl Variant {
    /// The shape `r` is encoded with.
    pub fn of(r: &FlowRecord) -> Variant {
        Variant {
            v6: r.src.is_ipv6(),
            server: r.annotation.server.map(|s| s.is_ipv6()),
            cookie: r.annotation.cookie.is_some(),
        }
    }

    /// Its template id (256..=267).
    pub fn template_id(self) -> u16 {
        let server = match self.server {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        256 + u16::from(self.v6) + 2 * server + 6 * u16::from(self.cookie)
    }

    /// The template's fields, in record order; `pen` owns `openflowCookie`.
    pub fn fields(self, pen: u32) -> Vec<Field> {
        let addr = if self.v6 { 16 } else { 4 };
        let mut f = vec![
            iana(
                if self.v6 {
                    ie::SOURCE_IPV6_ADDRESS
                } else {
                    ie::SOURCE_IPV4_ADDRESS
                },
                addr,
            ),
            iana(
                if self.v6 {
                    ie::DESTINATION_IPV6_ADDRESS
                } else {
                    ie::DESTINATION_IPV4_ADDRESS
                },
                addr,
            ),
            iana(ie::SOURCE_TRANSPORT_PORT, 2),
            iana(ie::DESTINATION_TRANSPORT_PORT, 2),
            iana(ie::PROTOCOL_IDENTIFIER, 1),
            iana(ie::TCP_CONTROL_BITS, 2),
            iana(ie::INGRESS_INTERFACE, 4),
            iana(ie::EGRESS_INTERFACE, 4),
            iana(ie::PACKET_DELTA_COUNT, 8),
            iana(ie::OCTET_DELTA_COUNT, 8),
            iana(ie::FLOW_START_MILLISECONDS, 8),
            iana(ie::FLOW_END_MILLISECONDS, 8),
            iana(ie::FLOW_END_REASON, 1),
        ];
        match self.server {
            Some(false) => f.push(iana(ie::POST_NAT_DESTINATION_IPV4_ADDRESS, 4)),
            Some(true) => f.push(iana(ie::POST_NAT_DESTINATION_IPV6_ADDRESS, 16)),
            None => {}
        }
        if self.cookie {
            f.push(Field {
                id: ie::OPENFLOW_COOKIE,
                len: 8,
                enterprise: Some(pen),
            });
        }
        f
    }

    /// Bytes of one of its records.
    pub fn record_len(self) -> usize {
        self.fields(1).iter().map(|f| usize::from(f.len)).sum()
    }
}

fn put_fields(out: &mut Vec<u8>, fields: &[Field]) {
    for f in fields {
        match f.enterprise {
            None => {
                out.extend_from_slice(&f.id.to_be_bytes());
                out.extend_from_slice(&f.len.to_be_bytes());
            }
            Some(pen) => {
                out.extend_from_slice(&(f.id | 0x8000).to_be_bytes());
                out.extend_from_slice(&f.len.to_be_bytes());
                out.extend_from_slice(&pen.to_be_bytes());
            }
        }
    }
}

/// Append the template record of `v` (RFC 7011 section 3.4.1) to `out`.
pub fn template_record(v: Variant, pen: u32, out: &mut Vec<u8>) {
    let fields = v.fields(pen);
    out.extend_from_slice(&v.template_id().to_be_bytes());
    out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    put_fields(out, &fields);
}

/// Append the sampling options template record `id` (RFC 7011 section 3.4.2.2): scope
/// `observationDomainId`, then (`SAMPLING_OPTIONS_TEMPLATE_ID` only) `selectorAlgorithm`, then
/// `samplingPacketInterval` and `samplingPacketSpace`.
pub fn sampling_options_template(id: u16, out: &mut Vec<u8>) {
    let mut fields = vec![iana(ie::OBSERVATION_DOMAIN_ID, 4)];
    if id == SAMPLING_OPTIONS_TEMPLATE_ID {
        fields.push(iana(ie::SELECTOR_ALGORITHM, 2));
    }
    fields.push(iana(ie::SAMPLING_PACKET_INTERVAL, 4));
    fields.push(iana(ie::SAMPLING_PACKET_SPACE, 4));
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // scope field count
    put_fields(out, &fields);
}

/// Append the options data record of template `id` saying that domain `domain` meters one
/// packet in `n` (systematic count-based: 1 taken, `n - 1` passed over).
pub fn sampling_options_record(id: u16, domain: u32, n: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&domain.to_be_bytes());
    if id == SAMPLING_OPTIONS_TEMPLATE_ID {
        out.extend_from_slice(&ie::SYSTEMATIC_COUNT_BASED.to_be_bytes());
    }
    out.extend_from_slice(&1u32.to_be_bytes());
    out.extend_from_slice(&n.max(1).saturating_sub(1).to_be_bytes());
}

fn put_addr(out: &mut Vec<u8>, a: IpAddr, v6: bool) {
    match (a, v6) {
        (IpAddr::V4(a), false) => out.extend_from_slice(&a.octets()),
        (IpAddr::V6(a), true) => out.extend_from_slice(&a.octets()),
        (IpAddr::V4(a), true) => out.extend_from_slice(&a.to_ipv6_mapped().octets()),
        // A record's addresses share a family; an IPv6 address in an IPv4 field is unknown.
        (IpAddr::V6(_), false) => out.extend_from_slice(&[0; 4]),
    }
}

/// Append `r`'s data record (in `Variant::of(r)`'s template) to `out`.
pub fn data_record(r: &FlowRecord, out: &mut Vec<u8>) {
    let v = Variant::of(r);
    put_addr(out, r.src, v.v6);
    put_addr(out, r.dst, v.v6);
    out.extend_from_slice(&r.src_port.to_be_bytes());
    out.extend_from_slice(&r.dst_port.to_be_bytes());
    out.push(r.protocol);
    out.extend_from_slice(&u16::from(r.tcp_flags).to_be_bytes());
    out.extend_from_slice(&r.ingress.to_be_bytes());
    out.extend_from_slice(&r.egress.to_be_bytes());
    out.extend_from_slice(&r.packets.to_be_bytes());
    out.extend_from_slice(&r.octets.to_be_bytes());
    out.extend_from_slice(&r.start_ms.to_be_bytes());
    out.extend_from_slice(&r.end_ms.to_be_bytes());
    out.push(r.reason as u8);
    if let Some(s) = r.annotation.server {
        put_addr(out, s, s.is_ipv6());
    }
    if let Some(c) = r.annotation.cookie {
        out.extend_from_slice(&c.to_be_bytes());
    }
}

/// Every record shape, for tests and for announcing them all.
pub fn all_variants() -> impl Iterator<Item = Variant> {
    (0..12u16).map(|i| Variant {
        v6: i & 1 == 1,
        server: match (i / 2) % 3 {
            0 => None,
            1 => Some(false),
            _ => Some(true),
        },
        cookie: i / 6 == 1,
    })
}

/// The end reason a `flowEndReason` value names (for decoding in tests and tools).
pub fn end_reason(v: u8) -> Option<EndReason> {
    Some(match v {
        1 => EndReason::Idle,
        2 => EndReason::Active,
        3 => EndReason::EndOfFlow,
        4 => EndReason::Forced,
        5 => EndReason::LackOfResources,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Annotation;

    #[test]
    fn template_ids_are_distinct_and_in_range() {
        let mut ids: Vec<u16> = all_variants().map(Variant::template_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids, (256..268).collect::<Vec<_>>());
        for v in all_variants() {
            let mut r = Vec::new();
            template_record(v, 32473, &mut r);
            let fields = v.fields(32473);
            let enterprise = fields.iter().filter(|f| f.enterprise.is_some()).count();
            assert_eq!(r.len(), 4 + 4 * fields.len() + 4 * enterprise);
        }
    }

    #[test]
    fn ipv4_template_golden_bytes() {
        let v = Variant {
            v6: false,
            server: None,
            cookie: false,
        };
        let mut out = Vec::new();
        template_record(v, 32473, &mut out);
        #[rustfmt::skip]
        let golden = [
            0x01, 0x00, 0x00, 0x0d, // template 256, 13 fields
            0x00, 0x08, 0x00, 0x04, // sourceIPv4Address
            0x00, 0x0c, 0x00, 0x04, // destinationIPv4Address
            0x00, 0x07, 0x00, 0x02, // sourceTransportPort
            0x00, 0x0b, 0x00, 0x02, // destinationTransportPort
            0x00, 0x04, 0x00, 0x01, // protocolIdentifier
            0x00, 0x06, 0x00, 0x02, // tcpControlBits
            0x00, 0x0a, 0x00, 0x04, // ingressInterface
            0x00, 0x0e, 0x00, 0x04, // egressInterface
            0x00, 0x02, 0x00, 0x08, // packetDeltaCount
            0x00, 0x01, 0x00, 0x08, // octetDeltaCount
            0x00, 0x98, 0x00, 0x08, // flowStartMilliseconds (152)
            0x00, 0x99, 0x00, 0x08, // flowEndMilliseconds (153)
            0x00, 0x88, 0x00, 0x01, // flowEndReason (136)
        ];
        assert_eq!(out, golden);
        assert_eq!(
            v.record_len(),
            4 + 4 + 2 + 2 + 1 + 2 + 4 + 4 + 8 + 8 + 8 + 8 + 1
        );
    }

    #[test]
    fn ipv6_template_with_server_and_cookie_golden_tail() {
        let v = Variant {
            v6: true,
            server: Some(true),
            cookie: true,
        };
        assert_eq!(v.template_id(), 256 + 1 + 4 + 6);
        let mut out = Vec::new();
        template_record(v, 32473, &mut out);
        assert_eq!(&out[..4], [0x01, 0x0b, 0x00, 0x0f]); // template 267, 15 fields
        assert_eq!(&out[4..8], [0x00, 0x1b, 0x00, 0x10]); // sourceIPv6Address, 16
        #[rustfmt::skip]
        let tail = [
            0x01, 0x1a, 0x00, 0x10, // postNATDestinationIPv6Address (282), 16
            0x80, 0x01, 0x00, 0x08, 0x00, 0x00, 0x7e, 0xd9, // enterprise element 1, PEN 32473
        ];
        assert_eq!(&out[out.len() - tail.len()..], tail);
    }

    #[test]
    fn sampling_options_golden_bytes() {
        let mut out = Vec::new();
        sampling_options_template(SAMPLING_OPTIONS_TEMPLATE_ID, &mut out);
        #[rustfmt::skip]
        let golden = [
            0x01, 0x0c, 0x00, 0x04, 0x00, 0x01, // template 268, 4 fields, 1 scope field
            0x00, 0x95, 0x00, 0x04, // observationDomainId (149), the scope
            0x01, 0x30, 0x00, 0x02, // selectorAlgorithm (304)
            0x01, 0x31, 0x00, 0x04, // samplingPacketInterval (305)
            0x01, 0x32, 0x00, 0x04, // samplingPacketSpace (306)
        ];
        assert_eq!(out, golden);
        out.clear();
        sampling_options_template(SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID, &mut out);
        assert_eq!(&out[..6], [0x01, 0x0d, 0x00, 0x03, 0x00, 0x01]);
        assert_eq!(out.len(), 6 + 3 * 4);
        out.clear();
        sampling_options_record(SAMPLING_OPTIONS_TEMPLATE_ID, 7, 1000, &mut out);
        assert_eq!(out, [0, 0, 0, 7, 0, 1, 0, 0, 0, 1, 0, 0, 0x03, 0xe7]);
        out.clear();
        sampling_options_record(SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID, 7, 1, &mut out);
        assert_eq!(
            out,
            [0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 0],
            "unsampled: no space"
        );
    }

    #[test]
    fn ipv4_data_record_golden_bytes() {
        let r = FlowRecord {
            src: "198.18.0.1".parse().expect("ip"),
            dst: "198.19.0.2".parse().expect("ip"),
            src_port: 1024,
            dst_port: 80,
            protocol: 6,
            tcp_flags: 0x12,
            ingress: 1,
            egress: 2,
            packets: 3,
            octets: 180,
            start_ms: 0x0102_0304_0506,
            end_ms: 0x0102_0304_0507,
            reason: EndReason::Idle,
            annotation: Annotation::default(),
            sampling: 1,
        };
        let mut out = Vec::new();
        data_record(&r, &mut out);
        #[rustfmt::skip]
        let golden = [
            198, 18, 0, 1, 198, 19, 0, 2, // addresses
            0x04, 0x00, 0x00, 0x50, // ports 1024, 80
            6, 0x00, 0x12, // TCP, SYN+ACK
            0, 0, 0, 1, 0, 0, 0, 2, // ingress 1, egress 2
            0, 0, 0, 0, 0, 0, 0, 3, // packets
            0, 0, 0, 0, 0, 0, 0, 180, // octets
            0, 0, 1, 2, 3, 4, 5, 6, // start ms
            0, 0, 1, 2, 3, 4, 5, 7, // end ms
            1, // idle timeout
        ];
        assert_eq!(out, golden);
        assert_eq!(out.len(), Variant::of(&r).record_len());
    }

    #[test]
    fn annotated_ipv6_record_ends_with_server_and_cookie() {
        let r = FlowRecord {
            src: "2001:db8::1".parse().expect("ip"),
            dst: "2001:db8::2".parse().expect("ip"),
            annotation: Annotation {
                server: Some("198.18.2.1".parse().expect("ip")),
                cookie: Some(0xdead_beef),
            },
            sampling: 100,
            reason: EndReason::Active,
            ..FlowRecord::default()
        };
        let v = Variant::of(&r);
        assert_eq!(v.server, Some(false), "an IPv4 server of an IPv6 flow");
        let mut out = Vec::new();
        data_record(&r, &mut out);
        assert_eq!(out.len(), v.record_len());
        assert_eq!(&out[out.len() - 12..out.len() - 8], [198, 18, 2, 1]);
        assert_eq!(&out[out.len() - 8..], 0xdead_beefu64.to_be_bytes());
        assert_eq!(out[out.len() - 13], 2, "flowEndReason activeTimeout");
    }
}

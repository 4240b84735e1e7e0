//! IPFIX messages (RFC 7011 section 3): the 16-byte header, sets, records packed up to the
//! message size limit, and the per-observation-domain sequence number (data records sent
//! before the message, options data records included). Also which templates a collector was
//! told about, so a data record is never sent before its template. It owns message bytes;
//! it never does I/O and never reads a clock (the caller passes the export time).

use crate::record::FlowRecord;
use crate::template::{
    self, Variant, OPTIONS_TEMPLATE_SET_ID, SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID,
    SAMPLING_OPTIONS_TEMPLATE_ID, TEMPLATE_SET_ID,
};
use std::collections::BTreeSet;

/// IPFIX version number.
pub const VERSION: u16 = 10;
/// Bytes of the message header.
pub const HEADER_LEN: usize = 16;
/// Bytes of a set header.
pub const SET_HEADER_LEN: usize = 4;

/// Builds one message at a time into a buffer, opening a new set when the set id changes.
#[derive(Debug)]
struct Writer {
    limit: usize,
    buf: Vec<u8>,
    /// (set id, offset of its header) of the open set.
    set: Option<(u16, usize)>,
    data_records: u32,
}

impl Writer {
    fn new(limit: usize) -> Writer {
        Writer {
            limit,
            buf: Vec::with_capacity(limit),
            set: None,
            data_records: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.buf.len() <= HEADER_LEN
    }

    fn begin(&mut self, export_time: u32, sequence: u32, domain: u32) {
        self.buf.clear();
        self.buf.extend_from_slice(&VERSION.to_be_bytes());
        self.buf.extend_from_slice(&0u16.to_be_bytes()); // length, patched by `finish`
        self.buf.extend_from_slice(&export_time.to_be_bytes());
        self.buf.extend_from_slice(&sequence.to_be_bytes());
        self.buf.extend_from_slice(&domain.to_be_bytes());
        self.set = None;
        self.data_records = 0;
    }

    /// Append a record of `len` bytes to set `set_id` (written by `put`); false when it does
    /// not fit the limit (nothing written).
    fn push(&mut self, set_id: u16, len: usize, put: impl FnOnce(&mut Vec<u8>)) -> bool {
        let new_set = self.set.map(|(id, _)| id) != Some(set_id);
        let need = len + if new_set { SET_HEADER_LEN } else { 0 };
        if self.buf.len() + need > self.limit {
            return false;
        }
        if new_set {
            self.close_set();
            self.set = Some((set_id, self.buf.len()));
            self.buf.extend_from_slice(&set_id.to_be_bytes());
            self.buf.extend_from_slice(&0u16.to_be_bytes());
        }
        put(&mut self.buf);
        if set_id >= 256 {
            self.data_records += 1;
        }
        true
    }

    /// End the open set: the next record opens a new one even with the same set id.
    fn break_set(&mut self) {
        self.close_set();
    }

    fn close_set(&mut self) {
        if let Some((_, at)) = self.set.take() {
            let len = (self.buf.len() - at) as u16;
            self.buf[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// The finished message (lengths patched).
    fn finish(&mut self) -> Vec<u8> {
        self.close_set();
        let len = self.buf.len() as u16;
        self.buf[2..4].copy_from_slice(&len.to_be_bytes());
        std::mem::take(&mut self.buf)
    }
}

/// One observation domain's exporting state: its sequence number, the templates announced so
/// far, the sampling rate announced, and the message size limit.
#[derive(Debug)]
pub struct Encoder {
    domain: u32,
    limit: usize,
    pen: u32,
    sequence: u32,
    announced: BTreeSet<Variant>,
    /// The one-in-N rate the collectors were told (None: never told, so unsampled).
    sampling: Option<u32>,
}

impl Encoder {
    /// Messages of at most `limit` bytes for observation domain `domain`; `pen` owns the
    /// cookie element.
    pub fn new(domain: u32, limit: usize, pen: u32) -> Encoder {
        Encoder {
            domain,
            limit,
            pen,
            sequence: 0,
            announced: BTreeSet::new(),
            sampling: None,
        }
    }

    /// The next message's sequence number (data records sent so far, modulo 2^32).
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// Change the message size limit and the cookie's enterprise number (the templates are
    /// announced again when the enterprise number changes).
    pub fn set_limits(&mut self, limit: usize, pen: u32) {
        self.limit = limit;
        if pen != self.pen {
            self.pen = pen;
            self.announced.clear();
        }
    }

    /// Messages announcing every template announced so far and the sampling rate (the
    /// refresh of RFC 7011 section 8.4); nothing when nothing was.
    pub fn refresh(&mut self, export_time: u32) -> Vec<Vec<u8>> {
        let variants: Vec<Variant> = self.announced.iter().copied().collect();
        self.announce(&variants, self.sampling, export_time)
    }

    /// Messages carrying `records`, preceded by messages announcing the templates they need
    /// that were not announced yet, and the sampling rate when it differs from the one
    /// announced (the last record's rate counts). Records are grouped by template (so a
    /// message holds few sets) and packed up to the limit.
    pub fn encode(&mut self, records: &[FlowRecord], export_time: u32) -> Vec<Vec<u8>> {
        let mut by_template: Vec<(Variant, &FlowRecord)> =
            records.iter().map(|r| (Variant::of(r), r)).collect();
        by_template.sort_by_key(|(v, _)| v.template_id());
        let new_variants: BTreeSet<Variant> = by_template
            .iter()
            .map(|(v, _)| *v)
            .filter(|v| !self.announced.contains(v))
            .collect();
        let rate = records.last().map(|r| r.sampling.max(1));
        let new_rate = match (rate, self.sampling) {
            (Some(n), Some(told)) if n != told => Some(n),
            (Some(n), None) if n > 1 => Some(n),
            _ => None,
        };
        let new_variants: Vec<Variant> = new_variants.into_iter().collect();
        let mut out = self.announce(&new_variants, new_rate, export_time);
        self.announced.extend(new_variants);
        if new_rate.is_some() {
            self.sampling = new_rate;
        }

        let mut w = Writer::new(self.limit);
        w.begin(export_time, self.sequence, self.domain);
        let mut scratch = Vec::with_capacity(128);
        for (v, r) in by_template {
            scratch.clear();
            template::data_record(r, &mut scratch);
            let put = |b: &mut Vec<u8>| b.extend_from_slice(&scratch);
            if !w.push(v.template_id(), scratch.len(), put) {
                emit(
                    &mut self.sequence,
                    self.domain,
                    &mut w,
                    &mut out,
                    export_time,
                );
                // A record always fits an empty message: the limit is at least 256 bytes.
                w.push(v.template_id(), scratch.len(), |b| {
                    b.extend_from_slice(&scratch)
                });
            }
        }
        if !w.is_empty() {
            emit(
                &mut self.sequence,
                self.domain,
                &mut w,
                &mut out,
                export_time,
            );
        }
        out
    }

    /// Messages holding the template records of `variants`, then (with `sampling`) the two
    /// sampling options templates and their data records.
    fn announce(&mut self, variants: &[Variant], sampling: Option<u32>, t: u32) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if variants.is_empty() && sampling.is_none() {
            return out;
        }
        let (pen, domain) = (self.pen, self.domain);
        let sequence = &mut self.sequence;
        let mut w = Writer::new(self.limit);
        w.begin(t, *sequence, domain);
        let mut scratch = Vec::with_capacity(128);
        let mut put = |w: &mut Writer, out: &mut Vec<Vec<u8>>, set: u16, rec: &[u8]| {
            if !w.push(set, rec.len(), |b| b.extend_from_slice(rec)) {
                emit(sequence, domain, w, out, t);
                w.push(set, rec.len(), |b| b.extend_from_slice(rec));
            }
        };
        for v in variants {
            scratch.clear();
            template::template_record(*v, pen, &mut scratch);
            put(&mut w, &mut out, TEMPLATE_SET_ID, &scratch);
        }
        if let Some(n) = sampling {
            let ids = [
                SAMPLING_OPTIONS_TEMPLATE_ID,
                SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID,
            ];
            for id in ids {
                scratch.clear();
                template::sampling_options_template(id, &mut scratch);
                // One options template per set: nfdump up to 1.7.1 reads only a set's first.
                w.break_set();
                put(&mut w, &mut out, OPTIONS_TEMPLATE_SET_ID, &scratch);
            }
            for id in ids {
                scratch.clear();
                template::sampling_options_record(id, domain, n, &mut scratch);
                put(&mut w, &mut out, id, &scratch);
            }
        }
        if !w.is_empty() {
            emit(sequence, domain, &mut w, &mut out, t);
        }
        out
    }
}

/// Finish `w`'s message into `out`, advance the sequence by its data records, and begin the
/// next message.
fn emit(sequence: &mut u32, domain: u32, w: &mut Writer, out: &mut Vec<Vec<u8>>, t: u32) {
    let records = w.data_records;
    out.push(w.finish());
    *sequence = sequence.wrapping_add(records);
    w.begin(t, *sequence, domain);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{EndReason, FlowRecord};
    use std::net::{IpAddr, Ipv4Addr};

    fn be16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn be32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    fn flow(i: u32) -> FlowRecord {
        FlowRecord {
            src: IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
            src_port: 1000,
            dst_port: 53,
            protocol: 17,
            packets: 1,
            octets: 60,
            reason: EndReason::Idle,
            ..FlowRecord::default()
        }
    }

    /// (set id, set length) of each set of a message, checking the lengths add up.
    fn sets(m: &[u8]) -> Vec<(u16, usize)> {
        assert_eq!(be16(m, 0), VERSION);
        assert_eq!(usize::from(be16(m, 2)), m.len());
        let mut at = HEADER_LEN;
        let mut out = Vec::new();
        while at < m.len() {
            let len = usize::from(be16(m, at + 2));
            assert!(len >= SET_HEADER_LEN && at + len <= m.len());
            out.push((be16(m, at), len));
            at += len;
        }
        assert_eq!(at, m.len());
        out
    }

    #[test]
    fn header_golden_bytes() {
        let mut e = Encoder::new(0x0a0b_0c0d, 1400, 32473);
        let msgs = e.encode(&[flow(1)], 0x6000_0000);
        assert_eq!(msgs.len(), 2, "template message, then data");
        let data = &msgs[1];
        #[rustfmt::skip]
        let header = [
            0x00, 0x0a, // version 10
            0x00, 0x4c, // length 76 = 16 + 4 + 56
            0x60, 0x00, 0x00, 0x00, // export time
            0x00, 0x00, 0x00, 0x00, // sequence: no data record before
            0x0a, 0x0b, 0x0c, 0x0d, // observation domain
        ];
        assert_eq!(&data[..16], header);
        assert_eq!(sets(data), [(256, 60)]);
        assert_eq!(sets(&msgs[0]), [(TEMPLATE_SET_ID, 4 + 4 + 13 * 4)]);
        assert_eq!(be32(&msgs[0], 8), 0, "templates do not count");
        assert_eq!(e.sequence(), 1);
    }

    #[test]
    fn records_pack_up_to_the_limit_and_sequence_counts_data_records() {
        let limit = 300;
        let mut e = Encoder::new(7, limit, 32473);
        let records: Vec<FlowRecord> = (0..20).map(flow).collect();
        let msgs = e.encode(&records, 1);
        let data = &msgs[1..];
        // (300 - 16 - 4) / 56 = 5 records per message: 4 messages.
        assert_eq!(data.len(), 4);
        let mut seq = 0;
        for m in data {
            assert!(m.len() <= limit);
            assert_eq!(be32(m, 8), seq);
            let s = sets(m);
            assert_eq!(s.len(), 1);
            seq += ((s[0].1 - 4) / 56) as u32;
        }
        assert_eq!(seq, 20);
        assert_eq!(e.sequence(), 20);
        // Known templates are not announced again, and the sequence goes on.
        let msgs = e.encode(&records[..1], 2);
        assert_eq!(msgs.len(), 1);
        assert_eq!(be32(&msgs[0], 8), 20);
    }

    #[test]
    fn a_sampling_rate_is_announced_once_and_its_options_count_as_data() {
        let mut e = Encoder::new(1, 1400, 32473);
        let mut r = flow(1);
        r.sampling = 1000;
        let msgs = e.encode(&[r], 5);
        assert_eq!(msgs.len(), 2);
        let ids: Vec<u16> = sets(&msgs[0]).iter().map(|s| s.0).collect();
        assert_eq!(
            ids,
            [
                TEMPLATE_SET_ID,
                OPTIONS_TEMPLATE_SET_ID,
                OPTIONS_TEMPLATE_SET_ID,
                SAMPLING_OPTIONS_TEMPLATE_ID,
                SAMPLING_OPTIONS_COMPAT_TEMPLATE_ID
            ]
        );
        // The two options data records count: the flow's message starts at 2.
        assert_eq!(be32(&msgs[1], 8), 2);
        assert_eq!(e.sequence(), 3);
        assert_eq!(e.encode(&[r], 6).len(), 1, "known rate, known template");
        // A refresh repeats the template, the options templates and the rate.
        let again = e.refresh(9);
        assert_eq!(again.len(), 1);
        assert_eq!(sets(&again[0]).len(), 5);
        assert_eq!(e.sequence(), 6);
        // Back to every packet: the collectors are told (space 0).
        r.sampling = 1;
        let msgs = e.encode(&[r], 10);
        assert_eq!(msgs.len(), 2);
        let last = &msgs[0][msgs[0].len() - 4..];
        assert_eq!(last, [0, 0, 0, 0]);
    }

    #[test]
    fn mixed_shapes_group_into_one_set_each() {
        let mut e = Encoder::new(1, 1400, 32473);
        let mut v6 = flow(0);
        v6.src = "2001:db8::1".parse().expect("ip");
        v6.dst = "2001:db8::2".parse().expect("ip");
        let records = [flow(1), v6, flow(2), v6];
        let msgs = e.encode(&records, 1);
        assert_eq!(msgs.len(), 2);
        let ids: Vec<u16> = sets(&msgs[1]).iter().map(|s| s.0).collect();
        assert_eq!(ids, [256, 257]);
        assert_eq!(sets(&msgs[0]), [(TEMPLATE_SET_ID, 4 + 2 * (4 + 13 * 4))]);
    }

    #[test]
    fn many_templates_split_across_messages_under_the_limit() {
        let mut e = Encoder::new(1, 256, 32473);
        let records: Vec<FlowRecord> = template::all_variants()
            .map(|v| {
                let mut r = flow(1);
                if v.v6 {
                    r.src = "2001:db8::1".parse().expect("ip");
                    r.dst = "2001:db8::2".parse().expect("ip");
                }
                r.annotation.server = v.server.map(|six| {
                    if six {
                        "2001:db8::9".parse().expect("ip")
                    } else {
                        "198.18.2.1".parse().expect("ip")
                    }
                });
                r.annotation.cookie = v.cookie.then_some(7);
                r
            })
            .collect();
        let msgs = e.encode(&records, 1);
        let mut templates = 0;
        let mut data = 0;
        for m in &msgs {
            assert!(m.len() <= 256);
            for (id, len) in sets(m) {
                match id {
                    TEMPLATE_SET_ID => templates += 1,
                    id if (256..268).contains(&id) => data += len,
                    _ => {}
                }
            }
        }
        assert!(templates >= 2, "the 12 templates need several messages");
        assert!(data > 0);
        assert_eq!(e.sequence(), 12);
    }
}

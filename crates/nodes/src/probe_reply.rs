//! `probe-reply`: the local delivery of the lookups when health checks run. A packet addressed
//! to vecplane itself that answers a health probe (`lb::probe::is_probe_reply`: TCP or UDP to
//! a probe-band port, an echo reply or ICMP error about one) is handed to the probe host's
//! port with a fresh Ethernet header (any VLAN tags dropped); an IPv4 packet that is not goes
//! to `vxlan-input` when VXLAN ports exist; everything else is dropped as `to-us`. It owns
//! nothing but the port id and MAC; it never allocates and never looks at a table.

use crate::names;
use graph::{Dispatch, Node, NodeContext};
use packet::headers::{eth, Mac};
use packet::meta::FLAG_IP6;
use packet::BufferPool;

/// The node's name.
pub const PROBE_REPLY: &str = "probe-reply";

/// Next index of `error-drop`.
const NEXT_DROP: u16 = 0;
/// Next index of `interface-output`.
const NEXT_OUTPUT: u16 = 1;
/// Next index of `vxlan-input` (present only with VXLAN ports).
const NEXT_VXLAN: u16 = 2;

graph::node_indices! {
    /// `probe-reply`'s drop reasons.
    pub enum ProbeReplyError {
        /// Addressed to vecplane, and neither a probe reply nor taken by another local node.
        ToUs = "to-us",
        /// The L3 header starts before an Ethernet header would end (cannot be re-framed).
        Malformed = "malformed",
    }
}

/// The `probe-reply` node.
pub struct ProbeReply {
    port: u16,
    mac: Mac,
    vxlan: bool,
}

impl ProbeReply {
    /// Replies go to port `port`, framed to and from `mac` (the probe link's one MAC); with
    /// `vxlan`, other IPv4 packets go to `vxlan-input`.
    pub fn new(port: u16, mac: Mac, vxlan: bool) -> ProbeReply {
        ProbeReply { port, mac, vxlan }
    }
}

impl Node for ProbeReply {
    fn name(&self) -> &str {
        PROBE_REPLY
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v = vec![names::ERROR_DROP.into(), names::INTERFACE_OUTPUT.into()];
        if self.vxlan {
            v.push(crate::vxlan::VXLAN_INPUT.into());
        }
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        ProbeReplyError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        for (i, &b) in frame.iter().enumerate() {
            let meta = cx.pool.meta(b);
            let ip6 = meta.flags & FLAG_IP6 != 0;
            let l3 = usize::from(meta.l3_offset);
            let is_reply = cx
                .pool
                .data(b)
                .get(l3..)
                .is_some_and(|h| lb::probe::is_probe_reply(h, ip6));
            nexts[i] = if !is_reply {
                if self.vxlan && !ip6 {
                    NEXT_VXLAN
                } else {
                    cx.pool.meta_mut(b).error = cx.error_base + ProbeReplyError::ToUs.id();
                    NEXT_DROP
                }
            } else if l3 < eth::HEADER_LEN {
                cx.pool.meta_mut(b).error = cx.error_base + ProbeReplyError::Malformed.id();
                NEXT_DROP
            } else {
                // Drop whatever came before the L3 header but 14 bytes, and write a plain
                // Ethernet header there.
                let cut = l3 - eth::HEADER_LEN;
                let meta = cx.pool.meta_mut(b);
                meta.data_offset += cut as u16;
                meta.length -= cut as u16;
                meta.l3_offset = eth::HEADER_LEN as u16;
                meta.l4_offset = meta.l4_offset.saturating_sub(cut as u16);
                meta.tx_port = self.port;
                let ethertype = if ip6 { 0x86dd_u16 } else { 0x0800 };
                let (_, data) = cx.pool.packet_mut(b);
                data[0..6].copy_from_slice(&self.mac);
                data[6..12].copy_from_slice(&self.mac);
                data[12..14].copy_from_slice(&ethertype.to_be_bytes());
                NEXT_OUTPUT
            };
        }
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!("probe-reply: tx port {} length {}", m.tx_port, m.length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drop::ErrorDrop;
    use crate::testkit::{Inject, Queue, Seen, Sink};
    use graph::GraphBuilder;
    use packet::{BufferMeta, PoolConfig};

    const MAC: Mac = [2, 0x76, 0x70, 0x70, 0x72, 1];

    fn framed(meta: &mut BufferMeta, f: &[u8]) {
        // What ethernet-input and ip*-input leave: the L3 offset after any VLAN tag.
        let tagged = f.get(12..14) == Some(&[0x81, 0x00]);
        meta.l3_offset = if tagged { 18 } else { 14 };
        meta.l4_offset = meta.l3_offset + 20;
        let et = if tagged { 16 } else { 12 };
        if f.get(et..et + 2) == Some(&[0x86, 0xdd]) {
            meta.flags |= FLAG_IP6;
            meta.l4_offset = meta.l3_offset + 40;
        }
    }

    fn tcp4_to(dport: u16, tagged: bool) -> Vec<u8> {
        let mut f = vec![0xaa; 12];
        if tagged {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0];
        ip.extend_from_slice(&[198, 18, 100, 1, 198, 18, 12, 1]);
        f.extend_from_slice(&ip);
        let mut tcp = vec![0, 80];
        tcp.extend_from_slice(&dport.to_be_bytes());
        tcp.extend_from_slice(&[0; 16]);
        f.extend_from_slice(&tcp);
        f
    }

    fn run(vxlan: bool, frames: Vec<Vec<u8>>) -> (Vec<(String, BufferMeta, Vec<u8>)>, u64) {
        let (queue, seen): (Queue, Seen) = Default::default();
        queue
            .lock()
            .expect("lock")
            .extend(frames.into_iter().map(|f| (0, f)));
        let mut b = GraphBuilder::new();
        b.add_input(Box::new(Inject {
            setup: framed,
            ..Inject::new(PROBE_REPLY, queue)
        }));
        b.add_node(Box::new(ProbeReply::new(9, MAC, vxlan)));
        b.add_node(Box::new(Sink(names::INTERFACE_OUTPUT, seen.clone())));
        if vxlan {
            b.add_node(Box::new(Sink(crate::vxlan::VXLAN_INPUT, seen.clone())));
        }
        b.add_node(Box::new(ErrorDrop::new()));
        let mut g = b.build(0, 2_000_000_000).expect("graph");
        let mut pool = packet::BufferPool::new(PoolConfig {
            buffers: 64,
            try_hugepages: false,
            ..PoolConfig::default()
        })
        .expect("pool");
        g.run_once(&mut pool);
        assert_eq!(pool.available(), pool.capacity(), "a buffer leaked");
        let s = g.stats();
        let to_us = s
            .error_id(PROBE_REPLY, "to-us")
            .map_or(0, |id| s.errors[id].get());
        let out = std::mem::take(&mut *seen.lock().expect("lock"));
        (out, to_us)
    }

    #[test]
    fn probe_replies_go_to_the_probe_port_reframed() {
        let base = lb::probe::PROBE_PORT_BASE;
        let (out, to_us) = run(false, vec![tcp4_to(base, false), tcp4_to(base + 1, true)]);
        assert_eq!(to_us, 0);
        assert_eq!(out.len(), 2);
        for (next, meta, f) in &out {
            assert_eq!(next, names::INTERFACE_OUTPUT);
            assert_eq!(meta.tx_port, 9);
            assert_eq!(meta.l3_offset, 14);
            assert_eq!(meta.l4_offset, 34);
            assert_eq!(&f[0..6], &MAC);
            assert_eq!(&f[6..12], &MAC);
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(f.len(), 54, "the VLAN tag is gone, nothing else");
            assert_eq!(&f[14 + 16..14 + 20], &[198, 18, 12, 1]);
        }
    }

    #[test]
    fn other_local_packets_are_dropped_or_go_to_vxlan() {
        let (out, to_us) = run(false, vec![tcp4_to(22, false), tcp4_to(80, true)]);
        assert!(out.is_empty());
        assert_eq!(to_us, 2);
        let (out, to_us) = run(true, vec![tcp4_to(4789, false)]);
        assert_eq!(to_us, 0);
        assert_eq!(out[0].0, crate::vxlan::VXLAN_INPUT);
        assert_eq!(out[0].2, tcp4_to(4789, false), "untouched");
    }
}

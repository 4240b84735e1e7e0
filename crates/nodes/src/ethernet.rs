//! `ethernet-input`: reads the Ethernet II header and up to two 802.1Q/802.1ad tags, and sends
//! the frame to its port's function (cross-connect, bridge) or by ethertype to IPv4, IPv6 or ARP.
//! It records offsets and the VLAN in metadata; it never changes packet bytes. A port added at
//! run time (`PortEvent`) routes (`PortMode::L3`) from the next round.

use crate::names;
use crate::port_event::PortEvent;
use graph::{CaptureControl, Dispatch, NextArcs, Node, NodeContext};
use packet::headers::{be16, eth, format_mac, Mac};
use packet::meta::{FLAG_IP6, FLAG_L2_MULTICAST};
use packet::BufferPool;
use std::any::Any;
use std::sync::Arc;

/// What a port does with what it receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortMode {
    /// IP routing: frames must be addressed to the port's MAC (or be multicast/broadcast).
    L3,
    /// Every frame goes to `l2-xconnect`.
    Xconnect,
    /// Every frame goes to `l2-bridge` (the port is in a bridge domain).
    Bridge,
    /// Every frame goes to `flow-switch` (the port is in a bridge in flow mode).
    Flow,
}

/// Per-port settings `ethernet-input` needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortL2 {
    /// The port's MAC.
    pub mac: Mac,
    /// Its mode.
    pub mode: PortMode,
}

graph::node_indices! {
    /// `ethernet-input`'s fixed next nodes (`arp-input` and `l2-bridge` follow when present).
    enum EthernetNext {
        /// To `ERROR_DROP`.
        Drop = names::ERROR_DROP,
        /// To `IP4_INPUT`.
        Ip4 = names::IP4_INPUT,
        /// To `IP6_INPUT`.
        Ip6 = names::IP6_INPUT,
        /// To `L2_XCONNECT`.
        Xconnect = names::L2_XCONNECT,
    }
}

graph::node_indices! {
    /// Drop reasons.
    pub enum EthernetError {
        /// Counted as `runt`.
        Runt = "runt",
        /// Counted as `vlan-truncated`.
        VlanTruncated = "vlan-truncated",
        /// Counted as `too-many-vlan-tags`.
        TooManyVlanTags = "too-many-vlan-tags",
        /// Counted as `unknown-ethertype`.
        UnknownEthertype = "unknown-ethertype",
        /// Counted as `arp-unsupported`.
        ArpUnsupported = "arp-unsupported",
        /// Counted as `not-for-us`.
        NotForUs = "not-for-us",
        /// Counted as `unknown-port`.
        UnknownPort = "unknown-port",
    }
}

/// Drop reasons, by index.
pub const ERRORS: &[&str] = EthernetError::NAMES;

/// The `ethernet-input` node.
pub struct EthernetInput {
    ports: Vec<PortL2>,
    next_arp: Option<u16>,
    next_bridge: u16,
    next_flow: u16,
    capture: Option<Arc<CaptureControl>>,
}

impl EthernetInput {
    /// A node for ports `ports` (index = port id). ARP is dropped as `arp-unsupported` unless
    /// `with_arp` is called; `l2-bridge` is a next node when a port is in `PortMode::Bridge`.
    pub fn new(ports: Vec<PortL2>) -> EthernetInput {
        EthernetInput {
            ports,
            next_arp: None,
            next_bridge: EthernetNext::NAMES.len() as u16,
            next_flow: 0,
            capture: None,
        }
        .with_flow_index()
    }

    /// `flow-switch` follows `l2-bridge` (when present) in the next nodes.
    fn with_flow_index(mut self) -> EthernetInput {
        self.next_flow = self.next_bridge + self.has_bridge() as u16;
        self
    }

    /// Offer every received frame to `capture` (`vecplane ctl pcap ... rx`).
    pub fn with_capture(mut self, capture: Arc<CaptureControl>) -> EthernetInput {
        self.capture = Some(capture);
        self
    }

    /// Send ARP frames to `arp-input`.
    pub fn with_arp(mut self) -> EthernetInput {
        self.next_arp = Some(EthernetNext::NAMES.len() as u16);
        self.next_bridge = EthernetNext::Xconnect.id() + 2;
        self.with_flow_index()
    }

    fn has_bridge(&self) -> bool {
        self.ports.iter().any(|p| p.mode == PortMode::Bridge)
    }

    fn has_flow(&self) -> bool {
        self.ports.iter().any(|p| p.mode == PortMode::Flow)
    }
}

#[inline(always)]
fn is_tag(t: u16) -> bool {
    t == eth::TYPE_VLAN || t == eth::TYPE_QINQ
}

impl Node for EthernetInput {
    fn name(&self) -> &str {
        names::ETHERNET_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        let mut v = EthernetNext::names();
        if self.next_arp.is_some() {
            v.push(crate::neighbour::ARP_INPUT.into());
        }
        if self.has_bridge() {
            v.push(crate::bridge::NAME.into());
        }
        if self.has_flow() {
            v.push(crate::flow_switch::NAME.into());
        }
        v
    }

    fn error_reasons(&self) -> Vec<String> {
        EthernetError::names()
    }

    /// A port added routes: `PortL2 { mac, L3 }` at its id. Ids skipped on the way (never
    /// given; should not happen) get a MAC of zeros, so they take no unicast frame. A removed
    /// port keeps its entry: frames it received before its removal and still in flight (the
    /// port's drain lets them through) are processed as before, and a port that takes the id
    /// again overwrites it. No next arc changes (a port added at run time is never in a bridge,
    /// cross-connect or flow switch).
    fn on_event(&mut self, event: &dyn Any, _: &mut NextArcs<'_>) {
        if let Some(PortEvent::Added(a)) = event.downcast_ref::<PortEvent>() {
            let p = usize::from(a.id);
            if p >= self.ports.len() {
                let gap = PortL2 {
                    mac: [0; 6],
                    mode: PortMode::L3,
                };
                self.ports.resize(p + 1, gap);
            }
            self.ports[p] = PortL2 {
                mac: a.mac,
                mode: PortMode::L3,
            };
        }
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let base = cx.error_base;
        if let Some(c) = self.capture.as_ref().filter(|c| c.is_armed()) {
            c.offer(cx.pool, frame, cx.worker, false, |m| m.rx_port);
        }
        for (i, &b) in frame.iter().enumerate() {
            if let Some(&next) = frame.get(i + 4) {
                cx.pool.prefetch(next);
            }
            let (meta, data) = cx.pool.packet_mut(b);
            let mut fail = |reason: u16| {
                meta.error = base + reason;
                EthernetNext::Drop.id()
            };
            nexts[i] = 'classify: {
                let Some(port) = self.ports.get(meta.rx_port as usize) else {
                    break 'classify fail(EthernetError::UnknownPort.id());
                };
                if data.len() < eth::HEADER_LEN {
                    break 'classify fail(EthernetError::Runt.id());
                }
                match port.mode {
                    PortMode::Xconnect => break 'classify EthernetNext::Xconnect.id(),
                    PortMode::Bridge => break 'classify self.next_bridge,
                    PortMode::Flow => break 'classify self.next_flow,
                    PortMode::L3 => {}
                }
                // Unicast frames must be for us; multicast and broadcast have the I/G bit set and
                // are marked, so the IP nodes do not forward unicast packets inside them.
                if data[0] & 1 != 0 {
                    meta.flags |= FLAG_L2_MULTICAST;
                } else if data[0..6] != port.mac {
                    break 'classify fail(EthernetError::NotForUs.id());
                }
                let mut t = be16(data, eth::TYPE);
                let mut l3 = eth::HEADER_LEN;
                let mut vlan = 0u16;
                if is_tag(t) {
                    if data.len() < l3 + eth::TAG_LEN {
                        break 'classify fail(EthernetError::VlanTruncated.id());
                    }
                    vlan = be16(data, l3) & 0x0fff;
                    t = be16(data, l3 + 2);
                    l3 += eth::TAG_LEN;
                    if is_tag(t) {
                        if data.len() < l3 + eth::TAG_LEN {
                            break 'classify fail(EthernetError::VlanTruncated.id());
                        }
                        t = be16(data, l3 + 2);
                        l3 += eth::TAG_LEN;
                        if is_tag(t) {
                            break 'classify fail(EthernetError::TooManyVlanTags.id());
                        }
                    }
                }
                meta.vlan = vlan;
                meta.ethertype = t;
                meta.l3_offset = l3 as u16;
                match t {
                    eth::TYPE_IPV4 => EthernetNext::Ip4.id(),
                    eth::TYPE_IPV6 => {
                        meta.flags |= FLAG_IP6;
                        EthernetNext::Ip6.id()
                    }
                    eth::TYPE_ARP => match self.next_arp {
                        Some(next) => next,
                        None => fail(EthernetError::ArpUnsupported.id()),
                    },
                    _ => fail(EthernetError::UnknownEthertype.id()),
                }
            };
        }
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let d = pool.data(buffer);
        if d.len() < eth::HEADER_LEN {
            return format!("runt frame of {} bytes", d.len());
        }
        let mut dst: Mac = [0; 6];
        let mut src: Mac = [0; 6];
        dst.copy_from_slice(&d[0..6]);
        src.copy_from_slice(&d[6..12]);
        format!(
            "{} -> {} type 0x{:04x} vlan {} l3 at {}",
            format_mac(&src),
            format_mac(&dst),
            m.ethertype,
            m.vlan,
            m.l3_offset
        )
    }
}

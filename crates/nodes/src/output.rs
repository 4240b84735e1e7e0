//! `interface-output`: hands each packet to the transmit node of `meta.tx_port` (and, while a
//! capture is armed, offers it to the capture). It owns the port-to-node map and what each port
//! takes; a packet with offloads its port cannot take (a super-packet, a partial checksum, a
//! jumbo buffer) is made fit in software first (`offload`). It changes no other packet's bytes.
//! It starts the `output` feature arc: a packet whose transmit port has output features
//! enabled visits them first and reaches its port through `interface-tx`, a second instance of
//! this node without the arc. Ports come and go at run time (`PortEvent`): a new port's
//! transmit node gets a next arc appended after every existing one; a removed port's packets
//! drop as `port-has-no-tx`. It never removes or renumbers a next arc.

use crate::names;
use crate::offload::{Fate, OffloadDrop, PortCaps, Replace, SoftwareOffload};
use crate::port_event::PortEvent;
use graph::{CaptureControl, Dispatch, Emitter, NextArcs, Node, NodeContext, NEXT_CONSUMED};
use std::any::Any;
use std::sync::Arc;

/// The `interface-output` node.
pub struct InterfaceOutput {
    /// `interface-output`, or `interface-tx` at the end of the output arc.
    name: &'static str,
    /// The `output` arc, when it has features (never on `interface-tx`).
    arc: Option<crate::feature_arc::ArcStart>,
    /// Transmit node name per port id (None: the port cannot send).
    tx_nodes: Vec<Option<String>>,
    /// Next index of each port's transmit node (index = port id; `NEXT_DROP`: the port has
    /// none). `p + 1` for the ports of the build; a port added later gets an appended arc.
    /// As long as `tx_nodes` and `caps`.
    port_next: Vec<u16>,
    capture: Option<Arc<CaptureControl>>,
    /// What each port takes as it is (index = port id; missing: nothing).
    caps: Vec<PortCaps>,
    offload: SoftwareOffload,
    emitter: Emitter,
}

/// Segments and copies one call may emit (a frame of super-packets is cut over several
/// calls' worth of room; what does not fit is dropped and counted).
const EMIT_CAPACITY: usize = 2048;

impl InterfaceOutput {
    /// A node for ports whose transmit nodes are `tx_nodes` (index = port id).
    pub fn new(tx_nodes: Vec<Option<String>>) -> InterfaceOutput {
        let port_next = tx_nodes
            .iter()
            .enumerate()
            .map(|(p, tx)| match tx {
                Some(_) => p as u16 + 1,
                None => NEXT_DROP,
            })
            .collect();
        InterfaceOutput {
            name: names::INTERFACE_OUTPUT,
            arc: None,
            caps: vec![PortCaps::default(); tx_nodes.len()],
            tx_nodes,
            port_next,
            capture: None,
            offload: SoftwareOffload::new(),
            emitter: Emitter::new(EMIT_CAPACITY),
        }
    }

    /// Declare what each port takes as it is (index = port id); ports not listed take no
    /// offload and no jumbo buffer.
    pub fn with_caps(mut self, caps: &[PortCaps]) -> InterfaceOutput {
        for (slot, c) in self.caps.iter_mut().zip(caps) {
            *slot = *c;
        }
        self
    }

    /// The same node as `interface-tx`, the end of the output arc (no arc, no capture: the
    /// packets it gets were offered to the capture by `interface-output`).
    pub fn as_arc_end(mut self) -> InterfaceOutput {
        self.name = names::INTERFACE_TX;
        self.arc = None;
        self.capture = None;
        self
    }

    /// Begin the `output` feature arc of `arcs`: a packet visits the features enabled for its
    /// transmit port (in `config`) before `interface-tx` hands it to the port. Call once the
    /// ports are known (`new`).
    pub fn with_arc(
        mut self,
        arcs: &graph::arc::Arcs,
        config: live::Reader<graph::arc::ArcConfig>,
    ) -> InterfaceOutput {
        // The feature nodes follow `error-drop` and the ports' transmit nodes of the build
        // (`next_nodes`); arcs to ports added later come after them.
        let base = self.tx_nodes.len() as u16 + 1;
        // The arc's end is never this node's next: a packet with nothing enabled goes to its
        // port directly, and one with features never reaches the end from here.
        self.arc = crate::feature_arc::ArcStart::new(arcs, names::ARC_OUTPUT, config, base, 0);
        self
    }

    /// Offer every frame handed to a port to `capture` (`vecplane ctl pcap ... tx`).
    pub fn with_capture(mut self, capture: Arc<CaptureControl>) -> InterfaceOutput {
        self.capture = Some(capture);
        self
    }
}

/// Next index 0 is `error-drop`; port `p`'s transmit node is next index `port_next[p]`.
const NEXT_DROP: u16 = 0;
graph::node_indices! {
    /// `interface-output` drop reasons.
    enum OutputError {
        /// The packet's `tx_port` is not a port.
        UnknownPort = "unknown-port",
        /// The port has no transmit node (e.g. a pcap port without `tx`).
        NoTx = "port-has-no-tx",
        /// A super-packet or partial checksum whose headers do not allow the software offload.
        BadOffload = "malformed-offload",
        /// No buffer was free for a segment or copy.
        NoOffloadBuffer = "no-buffer-for-segment",
        /// Too many segments in one frame.
        OffloadQueueFull = "segment-queue-full",
        /// A jumbo frame for a port that takes ordinary buffers only.
        TooBig = "frame-too-big-for-port",
    }
}

impl InterfaceOutput {
    /// Make packet `i` (buffer `b`) fit port `p`, whose transmit node is next index `next`:
    /// its next index (`NEXT_CONSUMED` when replaced by emitted packets).
    #[cold]
    fn fit(&mut self, cx: &mut NodeContext<'_>, i: usize, b: u32, p: usize, next: u16) -> u16 {
        let caps = self.caps.get(p).copied().unwrap_or_default();
        let to = Replace {
            emitter: &mut self.emitter,
            after: i,
            next,
        };
        match self.offload.prepare(cx.pool, b, caps, to) {
            Ok(Fate::AsIs) => next,
            Ok(Fate::Replaced) => NEXT_CONSUMED,
            Err(why) => {
                let reason = match why {
                    OffloadDrop::Malformed => OutputError::BadOffload,
                    OffloadDrop::NoBuffer => OutputError::NoOffloadBuffer,
                    OffloadDrop::QueueFull => OutputError::OffloadQueueFull,
                    OffloadDrop::TooBig => OutputError::TooBig,
                };
                cx.pool.meta_mut(b).error = cx.error_base + reason.id();
                NEXT_DROP
            }
        }
    }
}

impl InterfaceOutput {
    /// Each packet's next node (`nexts`), visiting the output arc's features first when `ARC`;
    /// whether they all go to one.
    #[inline(always)]
    fn classify<const ARC: bool>(
        &mut self,
        cx: &mut NodeContext<'_>,
        frame: &[u32],
        nexts: &mut [u16],
    ) -> bool {
        let first = cx.pool.meta(frame[0]).tx_port;
        let mut same = true;
        for (i, &b) in frame.iter().enumerate() {
            let jumbo = cx.pool.is_jumbo(b);
            let meta = cx.pool.meta_mut(b);
            let p = meta.tx_port as usize;
            same &= meta.tx_port == first;
            // Output features enabled for the port: they see the packet as routed, and
            // `interface-tx` makes it fit the port after them.
            // (The snapshot is loaded per packet, a plain load on x86, because `fit` needs the
            // node mutably; only when the arc has features.)
            let features = if !ARC {
                0
            } else {
                self.arc.as_ref().map_or(0, |a| {
                    let mask = a.masks().get(p).copied().unwrap_or(0);
                    if mask == 0 {
                        0
                    } else {
                        a.cursor().next_for(mask)
                    }
                })
            };
            // One load says both whether the port is known and where it sends.
            let port_next = self.port_next.get(p).copied();
            nexts[i] = if features != 0 {
                same = false;
                features
            } else if let Some(next) = port_next.filter(|&n| n != NEXT_DROP) {
                if meta.has_offload() || jumbo {
                    same = false;
                    self.fit(cx, i, b, p, next)
                } else {
                    next
                }
            } else {
                let reason = match port_next {
                    None => OutputError::UnknownPort,
                    Some(_) => OutputError::NoTx,
                };
                meta.error = cx.error_base + reason.id();
                NEXT_DROP
            };
        }
        same
    }
}

impl Node for InterfaceOutput {
    fn name(&self) -> &str {
        self.name
    }

    /// Next 0 is `error-drop`; next `p + 1` is port `p`'s transmit node; then the output
    /// arc's feature nodes. The arcs of the build: arcs `on_event` appended later are not
    /// listed (the graph keeps their names).
    fn next_nodes(&self) -> Vec<String> {
        std::iter::once(names::ERROR_DROP.to_string())
            .chain(
                self.tx_nodes
                    .iter()
                    .map(|t| t.clone().unwrap_or_else(|| names::ERROR_DROP.to_string())),
            )
            .chain(self.arc.iter().flat_map(|a| a.next_nodes().iter().cloned()))
            .collect()
    }

    fn error_reasons(&self) -> Vec<String> {
        OutputError::names()
    }

    fn emitter(&mut self) -> Option<&mut Emitter> {
        Some(&mut self.emitter)
    }

    /// A port added: its transmit node gets a next arc (appended, or the one it has) and the
    /// port takes what it says; a gap of ids before it is ports without a transmit node. A
    /// port removed: its packets drop as `port-has-no-tx`; its arc stays (never renumbered).
    fn on_event(&mut self, event: &dyn Any, arcs: &mut NextArcs<'_>) {
        match event.downcast_ref::<PortEvent>() {
            Some(PortEvent::Added(a)) => {
                let p = usize::from(a.id);
                if p >= self.port_next.len() {
                    self.tx_nodes.resize(p + 1, None);
                    self.caps.resize(p + 1, PortCaps::default());
                    self.port_next.resize(p + 1, NEXT_DROP);
                }
                self.tx_nodes[p].clone_from(&a.tx);
                self.caps[p] = a.caps;
                self.port_next[p] =
                    a.tx.as_deref()
                        .and_then(|tx| arcs.add(tx))
                        .unwrap_or(NEXT_DROP);
            }
            Some(PortEvent::Removed(id)) => {
                let p = usize::from(*id);
                if let (Some(tx), Some(next)) =
                    (self.tx_nodes.get_mut(p), self.port_next.get_mut(p))
                {
                    *tx = None;
                    *next = NEXT_DROP;
                }
            }
            None => {}
        }
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        if let Some(c) = self.capture.as_ref().filter(|c| c.is_armed()) {
            c.offer(cx.pool, frame, cx.worker, true, |m| m.tx_port);
        }
        // The arc's test is compiled out of the loop when the arc has no features, or none
        // enabled on any port.
        let same = if self
            .arc
            .as_ref()
            .is_some_and(|a| a.enabled_masks().is_some())
        {
            self.classify::<true>(cx, frame, nexts)
        } else {
            self.classify::<false>(cx, frame, nexts)
        };
        if same {
            Dispatch::AllTo(nexts[0])
        } else {
            Dispatch::PerPacket
        }
    }
}

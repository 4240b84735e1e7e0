//! The nodes `arp-input`, `ip4-arp`, `ip6-nd`, `ip6-discover` and the input `neighbour-tx`: thin
//! wrappers that borrow the worker's `Neighbours` once per frame.

use super::*;

/// `arp-input`: ARP frames from `ethernet-input` (ethertype 0x0806, `l3_offset` at the ARP
/// header). Answers requests for the receiving port's addresses in the same buffer, learns
/// senders, drops the rest with a reason.
pub struct ArpInput {
    pub(super) neighbours: NeighbourHandle,
}

impl ArpInput {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> ArpInput {
        ArpInput { neighbours }
    }
}

impl Node for ArpInput {
    fn name(&self) -> &str {
        ARP_INPUT
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        ArpError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (now, base) = (cx.now_tsc, cx.error_base);
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                nexts[i] = match n.arp_packet(cx.pool, b, now) {
                    Ok(next) => next,
                    Err(reason) => {
                        cx.pool.meta_mut(b).error = base + reason;
                        NEXT_DROP
                    }
                };
            }
        });
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        describe_arp(pool, buffer)
    }
}

/// One line about the ARP packet of a buffer (for traces).
pub fn describe_arp(pool: &BufferPool, buffer: u32) -> String {
    let m = pool.meta(buffer);
    let l3 = m.l3_offset as usize;
    match pool.data(buffer).get(l3..l3 + ARP_LEN) {
        Some(a) => {
            let mut sha: Mac = [0; 6];
            sha.copy_from_slice(&a[8..14]);
            format!(
                "arp op {} {} ({}) -> {} port {}",
                be16(a, 6),
                Ipv4Addr::from(be32(a, 14)),
                format_mac(&sha),
                Ipv4Addr::from(be32(a, 24)),
                m.rx_port
            )
        }
        None => format!("not an ARP packet ({} bytes)", m.length),
    }
}

/// `ip4-arp`: IPv4 packets whose neighbour is unresolved (`next_scratch` = `GLEAN` with
/// `tx_port`, or a neighbour adjacency id). Queues them and sends ARP requests; owns what it
/// gets (queued, passed on through the outbox, or freed and counted).
pub struct Ip4Arp {
    pub(super) neighbours: NeighbourHandle,
}

impl Ip4Arp {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip4Arp {
        Ip4Arp { neighbours }
    }
}

pub(super) fn resolve_frame<A: Family>(
    neighbours: &NeighbourHandle,
    cx: &mut NodeContext<'_>,
    frame: &[u32],
) -> Dispatch {
    let now = cx.now_tsc;
    neighbours.with(|n| {
        let (t, core) = A::table(n);
        for &b in frame {
            if let Err(reason) = resolve_packet(t, core, cx.pool, b, now) {
                count_drop(cx, reason);
                cx.pool.free(b);
            }
        }
    });
    Dispatch::Consumed
}

impl Node for Ip4Arp {
    fn name(&self) -> &str {
        IP4_ARP
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        ResolveError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        resolve_frame::<u32>(&self.neighbours, cx, frame)
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "resolving for adjacency 0x{:08x}: {}",
            pool.meta(buffer).next_scratch,
            crate::ip4::describe_ip4(pool, buffer)
        )
    }
}

/// `ip6-nd`: ICMPv6 Neighbor Solicitations and Advertisements from `ip6-input`. Answers
/// solicitations for the receiving port's addresses with an advertisement in the same buffer,
/// learns from both, drops the rest with a reason.
pub struct Ip6Nd {
    pub(super) neighbours: NeighbourHandle,
}

impl Ip6Nd {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip6Nd {
        Ip6Nd { neighbours }
    }
}

impl Node for Ip6Nd {
    fn name(&self) -> &str {
        IP6_ND
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        NdError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], nexts: &mut [u16]) -> Dispatch {
        let (now, base) = (cx.now_tsc, cx.error_base);
        self.neighbours.with(|n| {
            for (i, &b) in frame.iter().enumerate() {
                nexts[i] = match n.nd_packet(cx.pool, b, now) {
                    Ok(next) => next,
                    Err(reason) => {
                        cx.pool.meta_mut(b).error = base + reason;
                        NEXT_DROP
                    }
                };
            }
        });
        Dispatch::PerPacket
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        let at = m.l3_offset as usize + ip6::HEADER_LEN;
        let d = pool.data(buffer);
        match (d.get(at), d.get(at + 8..at + 24)) {
            (Some(&kind), Some(t)) => format!(
                "nd type {kind} target {}: {}",
                Ipv6Addr::from(be128(t, 0)),
                crate::ip6::describe_ip6(pool, buffer)
            ),
            _ => crate::ip6::describe_ip6(pool, buffer),
        }
    }
}

/// `ip6-discover`: IPv6 packets whose neighbour is unresolved; queues them and sends Neighbor
/// Solicitations to the solicited-node multicast address.
pub struct Ip6Discover {
    pub(super) neighbours: NeighbourHandle,
}

impl Ip6Discover {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> Ip6Discover {
        Ip6Discover { neighbours }
    }
}

impl Node for Ip6Discover {
    fn name(&self) -> &str {
        IP6_DISCOVER
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        ResolveError::names()
    }

    fn process(&mut self, cx: &mut NodeContext<'_>, frame: &[u32], _: &mut [u16]) -> Dispatch {
        resolve_frame::<u128>(&self.neighbours, cx, frame)
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        format!(
            "resolving for adjacency 0x{:08x}: {}",
            pool.meta(buffer).next_scratch,
            crate::ip6::describe_ip6(pool, buffer)
        )
    }
}

/// `neighbour-tx`: the input node that sends what the neighbour nodes produced outside their
/// frames (requests, released packets), and runs the timers. Finished when its outbox is empty.
pub struct NeighbourTx {
    pub(super) neighbours: NeighbourHandle,
}

impl NeighbourTx {
    /// The node over a worker's neighbours.
    pub fn new(neighbours: NeighbourHandle) -> NeighbourTx {
        NeighbourTx { neighbours }
    }
}

impl InputNode for NeighbourTx {
    fn name(&self) -> &str {
        NEIGHBOUR_TX
    }

    fn next_nodes(&self) -> Vec<String> {
        next_nodes()
    }

    fn error_reasons(&self) -> Vec<String> {
        TxError::names()
    }

    fn poll(
        &mut self,
        cx: &mut NodeContext<'_>,
        out: &mut [u32],
        nexts: &mut [u16],
    ) -> (usize, Dispatch) {
        let now = cx.now_tsc;
        let mut k = 0;
        self.neighbours.with(|n| {
            n.worker = cx.worker;
            n.maintain(cx.pool, now);
            for (reason, count) in n.take_unreported().into_iter().enumerate() {
                if count > 0 {
                    if let Some(c) = cx.errors.get(cx.error_id(reason as u16) as usize) {
                        c.add(count);
                    }
                }
            }
            n.drain_outbox(&mut |next, b| {
                if k == out.len() {
                    return false;
                }
                out[k] = b;
                nexts[k] = next;
                k += 1;
                true
            });
        });
        (k, Dispatch::PerPacket)
    }

    fn is_finished(&self) -> bool {
        self.neighbours.with(|n| n.outbox_len() == 0)
    }

    fn next_timer(&self) -> Option<u64> {
        Some(self.neighbours.with(|n| n.next_timer()))
    }

    fn trace(&self, pool: &BufferPool, buffer: u32) -> String {
        let m = pool.meta(buffer);
        format!(
            "neighbour: sending {} bytes (adjacency 0x{:08x}) on port {}",
            m.length, m.next_scratch, m.tx_port
        )
    }
}

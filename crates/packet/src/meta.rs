//! Per-buffer metadata: one cache line that every node on the fast path reads and writes.
//! It describes where the packet bytes are and what earlier nodes learned; it never holds pointers.

/// Flag: the packet is being traced (see `graph::trace`).
pub const FLAG_TRACE: u16 = 1 << 0;
/// Flag: `flow_hash` holds a valid hash of the packet's flow.
pub const FLAG_FLOW_HASH: u16 = 1 << 1;
/// Flag: the packet is an IPv6 packet (set by `ethernet-input`).
pub const FLAG_IP6: u16 = 1 << 2;
/// Flag: the frame was received with a multicast or broadcast destination MAC.
pub const FLAG_L2_MULTICAST: u16 = 1 << 3;
/// Flag: `tun_id`, `tun_src` and `tun_dst` hold the tunnel the frame came in on (set by
/// `vxlan-input`), or the tunnel id a switch chose for it (read by a VXLAN port with a
/// flow-chosen VNI).
pub const FLAG_TUNNEL: u16 = 1 << 4;

/// Metadata of one buffer. Exactly one 64-byte cache line, laid out by how often it is touched.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferMeta {
    /// Offset of the first packet byte from the start of the buffer's slot (headroom before it).
    pub data_offset: u16,
    /// Number of packet bytes.
    pub length: u16,
    /// Port the packet arrived on.
    pub rx_port: u16,
    /// Port the packet leaves on (set by the node that decides it).
    pub tx_port: u16,
    /// Hash of the flow (5-tuple when known), for ECMP and RSS.
    pub flow_hash: u32,
    /// Flags (`FLAG_*`).
    pub flags: u16,
    /// Offset of the L3 header from `data_offset`.
    pub l3_offset: u16,
    /// Offset of the L4 header from `data_offset`.
    pub l4_offset: u16,
    /// Graph-wide error (drop reason) id set by the node that drops the packet.
    pub error: u16,
    /// Scratch for the next node, e.g. the adjacency chosen by a lookup node.
    pub next_scratch: u32,
    /// Outer VLAN id seen on input (0 when untagged).
    pub vlan: u16,
    /// Ethernet type of the L3 payload after any VLAN tags.
    pub ethertype: u16,
    /// Receive timestamp in nanoseconds since the Unix epoch (0 when unknown).
    pub timestamp_ns: u64,
    /// Packet number within the current trace (valid with `FLAG_TRACE`).
    pub trace_id: u32,
    /// Tunnel id (the VXLAN VNI, 24 bits) when `FLAG_TUNNEL` is set.
    pub tun_id: u32,
    /// Outer IPv4 source of the tunnel packet (host order) when `FLAG_TUNNEL` is set by decap.
    pub tun_src: u32,
    /// Outer IPv4 destination of the tunnel packet (host order) when `FLAG_TUNNEL` is set by decap.
    pub tun_dst: u32,
    /// Reserved for later nodes; keeps the line exactly 64 bytes.
    pub reserved: [u8; 8],
}

const _: () = assert!(core::mem::size_of::<BufferMeta>() == 64);
const _: () = assert!(core::mem::align_of::<BufferMeta>() == 64);

//! Per-buffer metadata: one cache line that every node on the fast path reads and writes
//! (`BufferMeta`), and a second, parallel line for the features few packets meet
//! (`FeatureMeta`: connection state, zone, mark, IPv6 tunnel endpoints, a feature's own
//! bytes), kept in an array of its own so nodes that never use it never load it. They describe
//! where the packet bytes are, what earlier nodes learned and which offloads (checksum,
//! segmentation) the sender left to be done; they never hold pointers.

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
/// Flag: the sender left the L4 checksum to be finished: the ones' complement sum of the bytes
/// from `csum_start` to the end of the frame goes at `csum_start + csum_offset` (the virtio-net
/// `NEEDS_CSUM` contract; the field already holds the pseudo-header sum).
pub const FLAG_CSUM_PARTIAL: u16 = 1 << 5;
/// Flag: the buffer's feature line (`FeatureMeta`, `BufferPool::feature_meta`) holds this
/// packet's values. Every reset of the hot line (allocation) clears it, so a reused buffer never
/// shows a previous packet's feature state; only `BufferPool::feature_meta_mut` sets it (after
/// resetting the line), and `BufferPool::copy_meta` copies the line with it.
pub const FLAG_FEATURE_META: u16 = 1 << 6;

/// `gso_type`: not a super-packet.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: a TCP over IPv4 super-packet to cut into `gso_size`-byte segments.
pub const GSO_TCP4: u8 = 1;
/// `gso_type`: a TCP over IPv6 super-packet to cut into `gso_size`-byte segments.
pub const GSO_TCP6: u8 = 2;
/// `gso_flags` bit: the super-packet carries CWR; only the first segment may keep it (ECN).
pub const GSO_FLAG_ECN: u8 = 1;

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
    /// Outer IPv4 source of the tunnel packet (host order) when `FLAG_TUNNEL` is set by decap
    /// (an IPv6 tunnel's are in the feature line: `FeatureMeta::tun6_src`, `FM_TUN6`).
    pub tun_src: u32,
    /// Outer IPv4 destination of the tunnel packet (host order) when `FLAG_TUNNEL` is set by
    /// decap (an IPv6 tunnel's: `FeatureMeta::tun6_dst`).
    pub tun_dst: u32,
    /// With `FLAG_CSUM_PARTIAL`: where the checksummed range starts, counted from the start of
    /// the buffer's slot (not from `data_offset`), so header pushes and pops before the L4
    /// header leave it valid.
    pub csum_start: u16,
    /// With `FLAG_CSUM_PARTIAL`: where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
    /// Payload bytes per segment of a super-packet (`gso_type != GSO_NONE`).
    pub gso_size: u16,
    /// What kind of super-packet this is (`GSO_*`); `GSO_NONE` for an ordinary packet.
    pub gso_type: u8,
    /// `GSO_FLAG_*` bits.
    pub gso_flags: u8,
}

const _: () = assert!(core::mem::size_of::<BufferMeta>() == 64);
const _: () = assert!(core::mem::align_of::<BufferMeta>() == 64);

impl BufferMeta {
    /// True when the packet is a super-packet still to be segmented.
    #[inline(always)]
    pub fn is_gso(&self) -> bool {
        self.gso_type != GSO_NONE
    }

    /// True when the sender left work to do: a checksum to finish or segments to cut.
    #[inline(always)]
    pub fn has_offload(&self) -> bool {
        self.flags & FLAG_CSUM_PARTIAL != 0 || self.gso_type != GSO_NONE
    }

    /// Forget any offload request (after the work was done in software).
    #[inline(always)]
    pub fn clear_offload(&mut self) {
        self.flags &= !FLAG_CSUM_PARTIAL;
        self.csum_start = 0;
        self.csum_offset = 0;
        self.gso_size = 0;
        self.gso_type = GSO_NONE;
        self.gso_flags = 0;
    }
}

/// `FeatureMeta::valid`: `session` holds the packet's connection.
pub const FM_SESSION: u16 = 1 << 0;
/// `FeatureMeta::valid`: `ct_state` and `zone` hold what connection tracking found.
pub const FM_CT: u16 = 1 << 1;
/// `FeatureMeta::valid`: `mark` holds the packet's mark.
pub const FM_MARK: u16 = 1 << 2;
/// `FeatureMeta::valid`: `tun6_src` and `tun6_dst` hold the IPv6 outer addresses of the tunnel
/// the frame came in on (with `FLAG_TUNNEL`; `BufferMeta::tun_src`/`tun_dst` then mean nothing).
pub const FM_TUN6: u16 = 1 << 3;
/// `FeatureMeta::valid`: `opaque` holds the bytes of the feature named by `opaque_owner`.
pub const FM_OPAQUE: u16 = 1 << 4;

/// `FeatureMeta::ct_state` bits, the values of OpenFlow's `ct_state` match (Open vSwitch's
/// `OVS_CS_F_*`): the connection is new.
pub const CT_NEW: u16 = 0x01;
/// `ct_state`: the connection is established (packets seen both ways).
pub const CT_ESTABLISHED: u16 = 0x02;
/// `ct_state`: the packet is related to an existing connection (an ICMP error about it).
pub const CT_RELATED: u16 = 0x04;
/// `ct_state`: the packet goes in the reply direction.
pub const CT_REPLY: u16 = 0x08;
/// `ct_state`: the packet is invalid for its connection's state.
pub const CT_INVALID: u16 = 0x10;
/// `ct_state`: the packet went through connection tracking.
pub const CT_TRACKED: u16 = 0x20;
/// `ct_state`: the packet's source was translated.
pub const CT_SNAT: u16 = 0x40;
/// `ct_state`: the packet's destination was translated.
pub const CT_DNAT: u16 = 0x80;

/// The second metadata line of a buffer: per-packet state of the features most packets never
/// meet (connection tracking, marks, IPv6 tunnel endpoints, one feature's own bytes). It lives
/// in its own array in the pool (`BufferPool::feature_meta`), so nodes that never use it never
/// load it, and allocation never writes it: it holds this packet's values only while the hot
/// line has `FLAG_FEATURE_META`, and each group of fields only with its `FM_*` bit in `valid`.
/// Writers take it through `BufferPool::feature_meta_mut`, which resets a stale line first;
/// a packet copy, segment or fragment takes it along through `BufferPool::copy_meta`. A new
/// packet made from an old one's buffer starts without it (`vxlan-input`'s inner frame, an ICMP
/// error), and so does one that crosses workers (handoff rings carry bytes only).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeatureMeta {
    /// Which groups of fields hold this packet's values (`FM_*`).
    pub valid: u16,
    /// With `FM_CT`: what connection tracking found (`CT_*` bits).
    pub ct_state: u16,
    /// With `FM_CT`: the connection tracking zone the packet was tracked in.
    pub zone: u16,
    /// With `FM_OPAQUE`: the id of the feature whose bytes `opaque` holds (0: none); a feature
    /// reads `opaque` only under its own id.
    pub opaque_owner: u16,
    /// With `FM_SESSION`: the packet's connection, as its tracker numbers it on this worker
    /// (the value its session table holds, not a table place: entries move).
    pub session: u32,
    /// With `FM_MARK`: the packet's mark (OpenFlow's `ct_mark`/`pkt_mark`, set by rules).
    pub mark: u32,
    /// With `FM_TUN6`: the outer IPv6 source of the tunnel packet.
    pub tun6_src: [u8; 16],
    /// With `FM_TUN6`: the outer IPv6 destination of the tunnel packet.
    pub tun6_dst: [u8; 16],
    /// With `FM_OPAQUE`: scratch of the feature `opaque_owner` names, carried between its nodes.
    pub opaque: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<FeatureMeta>() == 64);
const _: () = assert!(core::mem::align_of::<FeatureMeta>() == 64);

/// Which offloads a port (or one direction of a device) takes: what may stay undone in the
/// packets handed to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// Partial checksums.
    pub csum: bool,
    /// TCP/IPv4 super-packets.
    pub tso4: bool,
    /// TCP/IPv6 super-packets.
    pub tso6: bool,
    /// Super-packets with CWR (ECN).
    pub ecn: bool,
}

impl Offloads {
    /// Every offload.
    pub const ALL: Offloads = Offloads {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
    };

    /// True when a packet with metadata `m` can go to this side as it is.
    #[inline(always)]
    pub fn takes(&self, m: &BufferMeta) -> bool {
        match m.gso_type {
            GSO_NONE => self.csum || m.flags & FLAG_CSUM_PARTIAL == 0,
            GSO_TCP4 => self.tso4 && (self.ecn || m.gso_flags & GSO_FLAG_ECN == 0),
            GSO_TCP6 => self.tso6 && (self.ecn || m.gso_flags & GSO_FLAG_ECN == 0),
            _ => false,
        }
    }
}

impl std::fmt::Display for Offloads {
    /// `csum tso4 tso6 ecn`, or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = [
            (self.csum, "csum"),
            (self.tso4, "tso4"),
            (self.tso6, "tso6"),
            (self.ecn, "ecn"),
        ];
        let on: Vec<&str> = names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(" "))
        }
    }
}

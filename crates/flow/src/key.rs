//! The flow key: every header field a rule may match, extracted once per packet into 19 host-order
//! 64-bit words so that masking, hashing and comparing are plain word loops. A mask is a
//! `FlowKey` too (a set bit: the bit was consulted). Owns the layout and the field table; it never
//! parses packets (see `extract`) and never knows rules.
//!
//! Layout (word: fields, bit offset in the word), grouped by lookup stage so that a stage is a
//! contiguous run of words (staged lookup hashes stage after stage):
//! ```text
//! metadata  w0 in_port(0,16) pkt_mark(16,32)  w1 tun_id  w2 tun_src(0,32) tun_dst(32,32)  w3 metadata
//!           w4..w7 reg0..reg7 (two 32-bit registers a word, even register in the low half)
//! l2        w8 eth_src(0,48) vlan_tci(48,16)   w9 eth_dst(0,48) eth_type(48,16)
//! l3        w10 nw_src(0,32) nw_dst(32,32)  (IPv4 addresses, or ARP spa/tpa)
//!           w11,w12 ipv6_src (high, low)  w13,w14 ipv6_dst (high, low)
//!           w15 nw_proto(0,8) ecn(8,2) dscp(10,6) nw_ttl(16,8) nw_frag(24,2) ipv6_label(32,20)
//!           w16 arp_sha(0,48)  w17 arp_tha(0,48)
//! l4        w18 tp_src(0,16) tp_dst(16,16) tcp_flags(32,12)  (ICMP type/code in tp_src/tp_dst)
//! ```
//! As in Open vSwitch, an ARP packet keeps its opcode in `nw_proto` (low 8 bits) and its sender
//! and target protocol addresses in `nw_src`/`nw_dst`; `vlan_tci` has the CFI bit (0x1000) set
//! when a tag is present; `nw_frag` has bit 0 "is a fragment" and bit 1 "not the first fragment".

/// Words in a flow key.
pub const KEY_WORDS: usize = 19;

/// `vlan_tci` bit saying a VLAN tag is present (Open vSwitch's CFI convention).
pub const VLAN_CFI: u16 = 0x1000;
/// `nw_frag` bit: the packet is a fragment.
pub const FRAG_ANY: u8 = 1;
/// `nw_frag` bit: the packet is a fragment other than the first.
pub const FRAG_LATER: u8 = 2;

/// A flow key, or a mask over one. Values are in host order (an address `198.18.0.1` is
/// `0xc612_0001`), so that prefixes are high bits.
#[repr(C, align(8))]
// Equality is the derived one (all words equal), written as a branch-free word loop: derived, it
// became a call to libc's memcmp per comparison, 15% of the flow-switch node on the EMC hit path.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Copy, Eq, Hash, Default)]
pub struct FlowKey {
    /// The words, laid out as the module comment says.
    pub w: [u64; KEY_WORDS],
}

impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &FlowKey) -> bool {
        let mut diff = 0u64;
        for i in 0..KEY_WORDS {
            diff |= self.w[i] ^ other.w[i];
        }
        diff == 0
    }
}

impl std::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_map();
        for field in Field::ALL {
            let v = self.get(*field);
            if v != 0 && !field.is_alias() {
                l.entry(&field.name(), &format_args!("{v:#x}"));
            }
        }
        l.finish()
    }
}

/// The lookup stages, in the order a staged lookup consults them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Port, tunnel, metadata and registers (words 0..=7).
    Metadata,
    /// Ethernet and VLAN (words 8..=9).
    L2,
    /// IPv4, IPv6 and ARP (words 10..=17).
    L3,
    /// Transport ports, TCP flags, ICMP type and code (word 18).
    L4,
}

impl Stage {
    /// Every stage, in lookup order.
    pub const ALL: [Stage; 4] = [Stage::Metadata, Stage::L2, Stage::L3, Stage::L4];

    /// The words of this stage (`start..end`).
    pub const fn words(self) -> std::ops::Range<usize> {
        match self {
            Stage::Metadata => 0..8,
            Stage::L2 => 8..10,
            Stage::L3 => 10..18,
            Stage::L4 => 18..19,
        }
    }
}

/// Where a field lives in the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDef {
    /// Open vSwitch's name of the field (`nw_dst`, `tp_src`, ...).
    pub name: &'static str,
    /// First word. A 128-bit field takes words `word` (high half) and `word + 1` (low half).
    pub word: u8,
    /// Bit offset of the field in its word (0 for 128-bit fields).
    pub shift: u8,
    /// Width in bits (1..=64, or 128).
    pub bits: u8,
}

macro_rules! fields {
    ($($(#[$doc:meta])* $v:ident = ($name:literal, $word:literal, $shift:literal, $bits:literal)),* $(,)?) => {
        /// A field of the flow key.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Field { $($(#[$doc])* $v),* }

        impl Field {
            /// Every field, in key order.
            pub const ALL: &'static [Field] = &[$(Field::$v),*];

            /// Where the field lives.
            pub const fn def(self) -> FieldDef {
                match self {
                    $(Field::$v => FieldDef { name: $name, word: $word, shift: $shift, bits: $bits }),*
                }
            }
        }
    };
}

fields! {
    /// OpenFlow port the packet came in on.
    InPort = ("in_port", 0, 0, 16),
    /// Packet mark (`pkt_mark`): metadata, 0 when a packet arrives (vecplane's ports carry no
    /// mark), set by actions and matched by later lookups.
    PktMark = ("pkt_mark", 0, 16, 32),
    /// Tunnel id (the VNI of a VXLAN packet).
    TunId = ("tun_id", 1, 0, 64),
    /// Tunnel outer IPv4 source.
    TunSrc = ("tun_src", 2, 0, 32),
    /// Tunnel outer IPv4 destination.
    TunDst = ("tun_dst", 2, 32, 32),
    /// OpenFlow metadata.
    Metadata = ("metadata", 3, 0, 64),
    /// Register 0.
    Reg0 = ("reg0", 4, 0, 32),
    /// Register 1.
    Reg1 = ("reg1", 4, 32, 32),
    /// Register 2.
    Reg2 = ("reg2", 5, 0, 32),
    /// Register 3.
    Reg3 = ("reg3", 5, 32, 32),
    /// Register 4.
    Reg4 = ("reg4", 6, 0, 32),
    /// Register 5.
    Reg5 = ("reg5", 6, 32, 32),
    /// Register 6.
    Reg6 = ("reg6", 7, 0, 32),
    /// Register 7.
    Reg7 = ("reg7", 7, 32, 32),
    /// Ethernet source.
    EthSrc = ("dl_src", 8, 0, 48),
    /// The whole 802.1Q TCI with the CFI bit meaning "tagged".
    VlanTci = ("vlan_tci", 8, 48, 16),
    /// VLAN id (alias: bits of `vlan_tci`).
    VlanVid = ("dl_vlan", 8, 48, 12),
    /// "Tagged" bit (alias: the CFI bit of `vlan_tci`).
    VlanPresent = ("vlan_present", 8, 60, 1),
    /// VLAN priority (alias: bits of `vlan_tci`).
    VlanPcp = ("dl_vlan_pcp", 8, 61, 3),
    /// Ethernet destination.
    EthDst = ("dl_dst", 9, 0, 48),
    /// Ethernet type after any VLAN tag.
    EthType = ("dl_type", 9, 48, 16),
    /// IPv4 source, or ARP sender protocol address.
    NwSrc = ("nw_src", 10, 0, 32),
    /// IPv4 destination, or ARP target protocol address.
    NwDst = ("nw_dst", 10, 32, 32),
    /// IPv6 source.
    Ipv6Src = ("ipv6_src", 11, 0, 128),
    /// IPv6 destination.
    Ipv6Dst = ("ipv6_dst", 13, 0, 128),
    /// IP protocol, or ARP opcode.
    NwProto = ("nw_proto", 15, 0, 8),
    /// ECN bits of the traffic class.
    NwEcn = ("nw_ecn", 15, 8, 2),
    /// DSCP bits of the traffic class.
    IpDscp = ("ip_dscp", 15, 10, 6),
    /// TTL or hop limit.
    NwTtl = ("nw_ttl", 15, 16, 8),
    /// Fragment state (`FRAG_ANY`, `FRAG_LATER`).
    NwFrag = ("nw_frag", 15, 24, 2),
    /// IPv6 flow label.
    Ipv6Label = ("ipv6_label", 15, 32, 20),
    /// ARP sender hardware address.
    ArpSha = ("arp_sha", 16, 0, 48),
    /// ARP target hardware address.
    ArpTha = ("arp_tha", 17, 0, 48),
    /// TCP/UDP/SCTP source port, or ICMP type.
    TpSrc = ("tp_src", 18, 0, 16),
    /// TCP/UDP/SCTP destination port, or ICMP code.
    TpDst = ("tp_dst", 18, 16, 16),
    /// TCP flags (12 bits).
    TcpFlags = ("tcp_flags", 18, 32, 12),
}

impl Field {
    /// Open vSwitch's name of the field.
    pub const fn name(self) -> &'static str {
        self.def().name
    }

    /// Width in bits.
    pub const fn bits(self) -> u32 {
        self.def().bits as u32
    }

    /// The stage whose words hold the field.
    pub const fn stage(self) -> Stage {
        match self.def().word {
            0..=7 => Stage::Metadata,
            8..=9 => Stage::L2,
            10..=17 => Stage::L3,
            _ => Stage::L4,
        }
    }

    /// True for a field that is part of another (`dl_vlan`, `vlan_present`, `dl_vlan_pcp` are
    /// bits of `vlan_tci`).
    pub const fn is_alias(self) -> bool {
        matches!(self, Field::VlanVid | Field::VlanPresent | Field::VlanPcp)
    }

    /// All-ones value of the field's width.
    pub const fn all_ones(self) -> u128 {
        let bits = self.def().bits;
        if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }
}

impl FlowKey {
    /// A key with every bit zero (a mask that consults nothing).
    pub const ZERO: FlowKey = FlowKey { w: [0; KEY_WORDS] };

    /// The value of `field` (host order, right-aligned).
    #[inline]
    pub fn get(&self, field: Field) -> u128 {
        let d = field.def();
        let w = d.word as usize;
        if d.bits == 128 {
            return ((self.w[w] as u128) << 64) | self.w[w + 1] as u128;
        }
        let ones = if d.bits == 64 {
            u64::MAX
        } else {
            (1u64 << d.bits) - 1
        };
        ((self.w[w] >> d.shift) & ones) as u128
    }

    /// Set `field` to `value` (bits above its width are ignored).
    #[inline]
    pub fn set(&mut self, field: Field, value: u128) {
        let d = field.def();
        let w = d.word as usize;
        if d.bits == 128 {
            self.w[w] = (value >> 64) as u64;
            self.w[w + 1] = value as u64;
            return;
        }
        let ones = if d.bits == 64 {
            u64::MAX
        } else {
            (1u64 << d.bits) - 1
        };
        let v = (value as u64) & ones;
        self.w[w] = (self.w[w] & !(ones << d.shift)) | (v << d.shift);
    }

    /// Set the bits of `mask` in `field` to those of `value`, keeping the others.
    #[inline]
    pub fn set_masked(&mut self, field: Field, value: u128, mask: u128) {
        let old = self.get(field);
        self.set(field, (old & !mask) | (value & mask));
    }

    /// This key with only the bits of `mask`.
    #[inline]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = FlowKey::ZERO;
        for i in 0..KEY_WORDS {
            out.w[i] = self.w[i] & mask.w[i];
        }
        out
    }

    /// Add the bits of `other` to this mask.
    #[inline]
    pub fn union_with(&mut self, other: &FlowKey) {
        for i in 0..KEY_WORDS {
            self.w[i] |= other.w[i];
        }
    }

    /// Mark all bits of `field` consulted (on a mask).
    #[inline]
    pub fn unwildcard(&mut self, field: Field) {
        self.set(field, field.all_ones());
    }

    /// True when `self & mask == other & mask`.
    #[inline]
    pub fn matches(&self, other: &FlowKey, mask: &FlowKey) -> bool {
        (0..KEY_WORDS).all(|i| (self.w[i] ^ other.w[i]) & mask.w[i] == 0)
    }

    /// True when every bit of `self` (a mask) is also in `other`.
    #[inline]
    pub fn is_subset_of(&self, other: &FlowKey) -> bool {
        (0..KEY_WORDS).all(|i| self.w[i] & !other.w[i] == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fit_their_words_and_do_not_overlap_except_aliases() {
        let mut seen = FlowKey::ZERO;
        for f in Field::ALL {
            let d = f.def();
            assert!(
                d.bits == 128 || d.shift as u32 + d.bits as u32 <= 64,
                "{f:?}"
            );
            assert!((d.word as usize) < KEY_WORDS);
            let mut m = FlowKey::ZERO;
            m.unwildcard(*f);
            assert_eq!(m.get(*f), f.all_ones(), "{f:?}");
            if !f.is_alias() {
                for i in 0..KEY_WORDS {
                    assert_eq!(seen.w[i] & m.w[i], 0, "{f:?} overlaps");
                }
                seen.union_with(&m);
            }
            assert!(Stage::ALL
                .iter()
                .any(|s| s.words().contains(&(d.word as usize))));
        }
    }

    #[test]
    fn get_set_round_trip() {
        let mut k = FlowKey::ZERO;
        k.set(Field::NwDst, 0xc612_0207);
        k.set(Field::Ipv6Src, 0x2001_0db8_0000_0000_0000_0000_0000_0001);
        k.set(Field::VlanTci, 0x1000 | 100);
        assert_eq!(k.get(Field::NwDst), 0xc612_0207);
        assert_eq!(k.get(Field::NwSrc), 0);
        assert_eq!(k.get(Field::VlanVid), 100);
        assert_eq!(k.get(Field::VlanPresent), 1);
        assert_eq!(k.get(Field::Ipv6Src) >> 96, 0x2001_0db8);
        k.set_masked(Field::NwDst, 0xffff_ffff, 0xff);
        assert_eq!(k.get(Field::NwDst), 0xc612_02ff);
    }
}

//! The frames a memory port sends: one UDP template frame plus a compact per-flow patch
//! (destination address, source port, the source address's low 16 bits, both checksums
//! precomputed), applied with a copy and a few stores. It owns frame contents only; it never allocates or computes a checksum per packet.

use crate::error::PortError;
use packet::checksum;
use packet::headers::{build_udp_frame, eth, ip4, ip6, proto, udp, UdpFrameSpec};
use packet::BufferPool;
use std::net::IpAddr;

/// Most flows a set may hold.
pub const MAX_FLOWS: u32 = 1 << 24;

/// Templates are padded with zeros to a multiple of this, so they can be copied in whole chunks.
pub(crate) const CHUNK: usize = 64;

/// Per-flow patch of an IPv4 frame (12 bytes, already in network byte order).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Patch4 {
    dst: [u8; 4],
    src_port: [u8; 2],
    ip_check: [u8; 2],
    udp_check: [u8; 2],
    src_lo: [u8; 2],
}

/// Per-flow patch of an IPv6 frame (22 bytes, already in network byte order).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Patch6 {
    dst: [u8; 16],
    src_port: [u8; 2],
    udp_check: [u8; 2],
    src_lo: [u8; 2],
}

#[derive(Debug)]
enum Patches {
    V4(Box<[Patch4]>),
    V6(Box<[Patch6]>),
}

/// A set of UDP flows that differ in destination address and source port, each with valid IPv4
/// header and UDP checksums. Flow `i` goes to `destinations[i % d]` from UDP source port
/// `base.src_port + i / d` (wrapping), where `d` is the number of destinations; each time the
/// port wraps, the source address's low 16 bits go up by one (so more than 65,536 flows to one
/// destination stay distinct: flow `i`'s source is `base.src_ip + (i / d) / 65536` in its low
/// 16 bits, wrapping there).
#[derive(Debug)]
pub struct FlowSet {
    /// The frame of flow 0, zero-padded to a multiple of `CHUNK` bytes.
    template: Box<[u8]>,
    frame_len: usize,
    /// Offset of the IP destination address.
    dst_at: usize,
    /// Offset of the IPv4 header checksum (unused for IPv6).
    ip_check_at: usize,
    /// Offset of the UDP header.
    udp_at: usize,
    /// Offset of the source address's low 16 bits.
    src_lo_at: usize,
    patches: Patches,
    base: UdpFrameSpec,
    destinations: Vec<IpAddr>,
}

fn family(a: &IpAddr) -> &'static str {
    match a {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

fn addr_bytes(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

impl FlowSet {
    /// Build `flows` flows from `base` (its `dst_ip` is replaced by the destinations).
    ///
    /// Errors: no flows or more than `MAX_FLOWS`, no destinations, a destination of another
    /// family than `base.src_ip`, a `frame_size` too small for the headers or too large for a
    /// 16-bit length.
    pub fn new(
        base: &UdpFrameSpec,
        flows: u32,
        destinations: &[IpAddr],
    ) -> Result<FlowSet, PortError> {
        if flows == 0 || flows > MAX_FLOWS {
            return Err(PortError::Flows(format!(
                "{flows} flows asked for; accepted: 1..={MAX_FLOWS}"
            )));
        }
        let Some(first) = destinations.first() else {
            return Err(PortError::Flows(
                "no destination addresses; accepted: at least one, of the source address's family"
                    .into(),
            ));
        };
        if let Some(bad) = destinations
            .iter()
            .find(|d| d.is_ipv4() != base.src_ip.is_ipv4())
        {
            return Err(PortError::Flows(format!(
                "destination {bad} is {} but source {} is {}; accepted: destinations of the source's family",
                family(bad),
                base.src_ip,
                family(&base.src_ip)
            )));
        }
        let l2 = eth::HEADER_LEN + if base.vlan.is_some() { eth::TAG_LEN } else { 0 };
        let l3_len = if base.src_ip.is_ipv4() {
            ip4::MIN_HEADER_LEN
        } else {
            ip6::HEADER_LEN
        };
        let headers = l2 + l3_len + udp::HEADER_LEN;
        let max = u16::MAX as usize + 4;
        if base.frame_size < headers + 4 || base.frame_size > max {
            return Err(PortError::Flows(format!(
                "frame size {} (with FCS) for {} UDP{}; accepted: {}..={max} bytes ({headers} bytes of headers + 4 FCS at least)",
                base.frame_size,
                family(&base.src_ip),
                if base.vlan.is_some() { " with a VLAN tag" } else { "" },
                headers + 4
            )));
        }
        let spec = UdpFrameSpec {
            dst_ip: *first,
            ..base.clone()
        };
        let frame = build_udp_frame(&spec);
        let frame_len = frame.len();
        let udp_at = l2 + l3_len;
        let udp_len = (frame_len - udp_at) as u16;

        // Sums of everything that does not change between flows.
        let mut rest = frame.clone();
        rest[udp_at..udp_at + 2].fill(0); // source port
        rest[udp_at + udp::CHECKSUM..udp_at + udp::CHECKSUM + 2].fill(0);
        let (dst_at, src_at) = if base.src_ip.is_ipv4() {
            (l2 + ip4::DST, l2 + ip4::SRC)
        } else {
            (l2 + ip6::DST, l2 + ip6::SRC)
        };
        let addr_len = if base.src_ip.is_ipv4() { 4 } else { 16 };
        rest[dst_at..dst_at + addr_len].fill(0);
        let src_lo_at = src_at + addr_len - 2;
        let base_src_lo = u16::from_be_bytes([frame[src_lo_at], frame[src_lo_at + 1]]);
        rest[src_lo_at..src_lo_at + 2].fill(0);
        let ip_check_at = l2 + ip4::CHECKSUM;
        // Every partial sum is folded to 16 bits before sums are combined, so no addition below
        // can overflow (64-bit partial sums of IPv6 addresses come close to 2^64).
        let src_sum = checksum::fold(checksum::sum(0, &rest[src_at..src_at + addr_len])) as u64;
        let udp_rest = checksum::fold(checksum::sum(
            src_sum + proto::UDP as u64 + udp_len as u64,
            &rest[udp_at..frame_len],
        )) as u64;
        let ip_rest = if base.src_ip.is_ipv4() {
            rest[ip_check_at..ip_check_at + 2].fill(0);
            checksum::fold(checksum::sum(0, &rest[l2..l2 + l3_len])) as u64
        } else {
            0
        };

        let per_dst: Vec<(Vec<u8>, u64)> = destinations
            .iter()
            .map(|d| {
                let b = addr_bytes(d);
                let s = checksum::fold(checksum::sum(0, &b)) as u64;
                (b, s)
            })
            .collect();
        let d = per_dst.len();
        let udp_check = |dst_sum: u64, port: u16, src_lo: u16| {
            let c = !checksum::fold(udp_rest + dst_sum + port as u64 + src_lo as u64);
            if c == 0 {
                0xffff
            } else {
                c
            }
        };
        let flow = |i: usize| {
            let (bytes, dst_sum) = &per_dst[i % d];
            let port = base.src_port.wrapping_add((i / d) as u16);
            let src_lo = base_src_lo.wrapping_add(((i / d) >> 16) as u16);
            (bytes, *dst_sum, port, src_lo)
        };
        let patches = if base.src_ip.is_ipv4() {
            Patches::V4(
                (0..flows as usize)
                    .map(|i| {
                        let (bytes, dst_sum, port, src_lo) = flow(i);
                        let mut dst = [0u8; 4];
                        dst.copy_from_slice(bytes);
                        Patch4 {
                            dst,
                            src_port: port.to_be_bytes(),
                            ip_check: (!checksum::fold(ip_rest + dst_sum + src_lo as u64))
                                .to_be_bytes(),
                            udp_check: udp_check(dst_sum, port, src_lo).to_be_bytes(),
                            src_lo: src_lo.to_be_bytes(),
                        }
                    })
                    .collect(),
            )
        } else {
            Patches::V6(
                (0..flows as usize)
                    .map(|i| {
                        let (bytes, dst_sum, port, src_lo) = flow(i);
                        let mut dst = [0u8; 16];
                        dst.copy_from_slice(bytes);
                        Patch6 {
                            dst,
                            src_port: port.to_be_bytes(),
                            udp_check: udp_check(dst_sum, port, src_lo).to_be_bytes(),
                            src_lo: src_lo.to_be_bytes(),
                        }
                    })
                    .collect(),
            )
        };
        let mut template = frame;
        template.resize(frame_len.div_ceil(CHUNK) * CHUNK, 0);
        Ok(FlowSet {
            template: template.into_boxed_slice(),
            frame_len,
            dst_at,
            ip_check_at,
            udp_at,
            src_lo_at,
            patches,
            base: base.clone(),
            destinations: destinations.to_vec(),
        })
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        match &self.patches {
            Patches::V4(p) => p.len(),
            Patches::V6(p) => p.len(),
        }
    }

    /// True when the set has no flows (never, once built).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of every frame (without FCS).
    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// True for IPv6 flows.
    pub fn is_ipv6(&self) -> bool {
        matches!(self.patches, Patches::V6(_))
    }

    /// Bytes the batch fill copies per packet: the frame length rounded up to 64.
    pub(crate) fn padded_len(&self) -> usize {
        self.template.len()
    }

    /// The spec `build_udp_frame` turns into flow `flow`'s frame (cold path).
    pub fn spec(&self, flow: usize) -> Option<UdpFrameSpec> {
        if flow >= self.len() {
            return None;
        }
        let d = self.destinations.len();
        let wraps = ((flow / d) >> 16) as u16;
        let src_ip = match self.base.src_ip {
            IpAddr::V4(a) => {
                let mut o = a.octets();
                let lo = u16::from_be_bytes([o[2], o[3]]).wrapping_add(wraps);
                o[2..].copy_from_slice(&lo.to_be_bytes());
                IpAddr::from(o)
            }
            IpAddr::V6(a) => {
                let mut o = a.octets();
                let lo = u16::from_be_bytes([o[14], o[15]]).wrapping_add(wraps);
                o[14..].copy_from_slice(&lo.to_be_bytes());
                IpAddr::from(o)
            }
        };
        Some(UdpFrameSpec {
            dst_ip: self.destinations[flow % d],
            src_ip,
            src_port: self.base.src_port.wrapping_add((flow / d) as u16),
            ..self.base.clone()
        })
    }

    /// Write flow `flow`'s frame into `out`; returns its length, or 0 (writing nothing) when
    /// `flow >= len()` or `out` is shorter than `frame_len()`.
    #[inline]
    pub fn write(&self, flow: usize, out: &mut [u8]) -> usize {
        let len = self.frame_len;
        if flow >= self.len() || out.len() < len {
            return 0;
        }
        out[..len].copy_from_slice(&self.template[..len]);
        self.patch(flow, out);
        len
    }

    /// Write consecutive flows, from `cursor` on (wrapping), into the buffers `bufs` at the
    /// headroom, setting each buffer's `length` and `rx_port`; returns the next cursor. The batch
    /// is dispatched once to a loop specialised for the address family and, for frames of up to
    /// 256 bytes, for the padded size, so each packet is a fixed-size copy and four stores.
    /// Buffers whose slot cannot hold `padded_len()` bytes after the headroom get an exact copy;
    /// the caller checked `frame_len() <= pool.data_size()`.
    #[inline]
    pub(crate) fn fill(
        &self,
        pool: &mut BufferPool,
        bufs: &[u32],
        cursor: usize,
        rx_port: u16,
    ) -> usize {
        if pool.headroom() + self.padded_len() > pool.stride() {
            return self.fill_exact(pool, bufs, cursor, rx_port);
        }
        match self.padded_len() {
            64 => self.fill_family::<64>(pool, bufs, cursor, rx_port),
            128 => self.fill_family::<128>(pool, bufs, cursor, rx_port),
            192 => self.fill_family::<192>(pool, bufs, cursor, rx_port),
            256 => self.fill_family::<256>(pool, bufs, cursor, rx_port),
            _ => self.fill_exact(pool, bufs, cursor, rx_port),
        }
    }

    #[inline(always)]
    fn fill_family<const N: usize>(
        &self,
        pool: &mut BufferPool,
        bufs: &[u32],
        cursor: usize,
        rx_port: u16,
    ) -> usize {
        let (d, ic, u, sl) = (self.dst_at, self.ip_check_at, self.udp_at, self.src_lo_at);
        let uc = u + udp::CHECKSUM;
        match &self.patches {
            Patches::V4(p) => {
                self.fill_fixed::<N, Patch4>(pool, bufs, cursor, rx_port, p, |o, p| {
                    o[d..d + 4].copy_from_slice(&p.dst);
                    o[ic..ic + 2].copy_from_slice(&p.ip_check);
                    o[u..u + 2].copy_from_slice(&p.src_port);
                    o[uc..uc + 2].copy_from_slice(&p.udp_check);
                    o[sl..sl + 2].copy_from_slice(&p.src_lo);
                })
            }
            Patches::V6(p) => {
                self.fill_fixed::<N, Patch6>(pool, bufs, cursor, rx_port, p, |o, p| {
                    o[d..d + 16].copy_from_slice(&p.dst);
                    o[u..u + 2].copy_from_slice(&p.src_port);
                    o[uc..uc + 2].copy_from_slice(&p.udp_check);
                    o[sl..sl + 2].copy_from_slice(&p.src_lo);
                })
            }
        }
    }

    #[inline(always)]
    fn fill_fixed<const N: usize, P>(
        &self,
        pool: &mut BufferPool,
        bufs: &[u32],
        mut cursor: usize,
        rx_port: u16,
        patches: &[P],
        apply: impl Fn(&mut [u8; N], &P),
    ) -> usize {
        let Some(template) = self.template.first_chunk::<N>() else {
            return cursor;
        };
        let (headroom, len) = (pool.headroom(), self.frame_len as u16);
        for &b in bufs {
            let (meta, slot) = pool.slot_mut(b);
            if let (Some(out), Some(p)) = (
                slot.get_mut(headroom..)
                    .and_then(|s| s.first_chunk_mut::<N>()),
                patches.get(cursor),
            ) {
                *out = *template;
                apply(out, p);
            }
            meta.length = len;
            meta.rx_port = rx_port;
            cursor += 1;
            if cursor == patches.len() {
                cursor = 0;
            }
        }
        cursor
    }

    fn fill_exact(
        &self,
        pool: &mut BufferPool,
        bufs: &[u32],
        mut cursor: usize,
        rx_port: u16,
    ) -> usize {
        let (headroom, len, flows) = (pool.headroom(), self.frame_len as u16, self.len());
        for &b in bufs {
            let (meta, slot) = pool.slot_mut(b);
            if let Some(out) = slot.get_mut(headroom..) {
                self.write(cursor, out);
            }
            meta.length = len;
            meta.rx_port = rx_port;
            cursor += 1;
            if cursor == flows {
                cursor = 0;
            }
        }
        cursor
    }

    /// Apply flow `flow`'s patch to a copy of the template (`flow < len()`, `out` long enough).
    #[inline(always)]
    fn patch(&self, flow: usize, out: &mut [u8]) {
        let (d, u) = (self.dst_at, self.udp_at);
        match &self.patches {
            Patches::V4(p) => {
                let p = &p[flow];
                out[d..d + 4].copy_from_slice(&p.dst);
                out[self.ip_check_at..self.ip_check_at + 2].copy_from_slice(&p.ip_check);
                out[u..u + 2].copy_from_slice(&p.src_port);
                out[u + udp::CHECKSUM..u + udp::CHECKSUM + 2].copy_from_slice(&p.udp_check);
                out[self.src_lo_at..self.src_lo_at + 2].copy_from_slice(&p.src_lo);
            }
            Patches::V6(p) => {
                let p = &p[flow];
                out[d..d + 16].copy_from_slice(&p.dst);
                out[u..u + 2].copy_from_slice(&p.src_port);
                out[u + udp::CHECKSUM..u + udp::CHECKSUM + 2].copy_from_slice(&p.udp_check);
                out[self.src_lo_at..self.src_lo_at + 2].copy_from_slice(&p.src_lo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::headers::{be16, put16};

    fn v4_dsts(n: u8) -> Vec<IpAddr> {
        (0..n).map(|i| IpAddr::from([198, 19, i, 1])).collect()
    }

    fn v6_dsts(n: u16) -> Vec<IpAddr> {
        (0..n)
            .map(|i| IpAddr::from([0x2001, 0xdb8, 1, i, 0, 0, 0, 1]))
            .collect()
    }

    fn v6_base() -> UdpFrameSpec {
        UdpFrameSpec {
            src_ip: "2001:db8::1".parse().expect("addr"),
            frame_size: 128,
            ..UdpFrameSpec::default()
        }
    }

    /// The checksums of a frame verify (IPv4 header, UDP with its pseudo-header).
    fn verify_checksums(f: &[u8]) {
        let mut l2 = eth::HEADER_LEN;
        let mut ty = be16(f, eth::TYPE);
        if ty == eth::TYPE_VLAN {
            ty = be16(f, eth::TYPE + 4);
            l2 += eth::TAG_LEN;
        }
        let (u, pseudo) = if ty == eth::TYPE_IPV4 {
            let h = &f[l2..l2 + 20];
            assert_eq!(checksum::checksum(h), 0, "IPv4 header checksum");
            let mut s = [0u8; 4];
            let mut d = [0u8; 4];
            s.copy_from_slice(&h[ip4::SRC..ip4::SRC + 4]);
            d.copy_from_slice(&h[ip4::DST..ip4::DST + 4]);
            let ulen = (f.len() - l2 - 20) as u16;
            (l2 + 20, checksum::pseudo_header_v4(s, d, 17, ulen))
        } else {
            assert_eq!(ty, eth::TYPE_IPV6);
            let h = &f[l2..l2 + 40];
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&h[ip6::SRC..ip6::SRC + 16]);
            d.copy_from_slice(&h[ip6::DST..ip6::DST + 16]);
            let ulen = (f.len() - l2 - 40) as u32;
            (l2 + 40, checksum::pseudo_header_v6(s, d, 17, ulen))
        };
        assert_ne!(be16(f, u + udp::CHECKSUM), 0, "UDP checksum present");
        assert_eq!(
            !checksum::fold(checksum::sum(pseudo, &f[u..])),
            0,
            "UDP checksum"
        );
    }

    /// Every flow equals the builder's frame of the equivalent spec (computed here from the
    /// documented rule, not from `spec()`), verifies, and the batch fill into a pool agrees.
    fn check_all(base: &UdpFrameSpec, flows: u32, dsts: &[IpAddr]) {
        let set = FlowSet::new(base, flows, dsts).expect("flow set");
        assert_eq!(set.len(), flows as usize);
        let mut out = vec![0xeeu8; set.padded_len() + 7];
        let mut wants = Vec::new();
        for i in 0..flows as usize {
            let wraps = ((i / dsts.len()) >> 16) as u128;
            let src_ip = match base.src_ip {
                IpAddr::V4(a) => {
                    let v = u32::from(a);
                    let lo = (v as u16).wrapping_add(wraps as u16);
                    IpAddr::from(std::net::Ipv4Addr::from(v & 0xffff_0000 | lo as u32))
                }
                IpAddr::V6(a) => {
                    let v = u128::from(a);
                    let lo = (v as u16).wrapping_add(wraps as u16);
                    IpAddr::from(std::net::Ipv6Addr::from(v & !0xffff | lo as u128))
                }
            };
            let spec = UdpFrameSpec {
                dst_ip: dsts[i % dsts.len()],
                src_ip,
                src_port: base.src_port.wrapping_add((i / dsts.len()) as u16),
                ..base.clone()
            };
            let want = build_udp_frame(&spec);
            let n = set.write(i, &mut out);
            assert_eq!(n, set.frame_len());
            assert_eq!(&out[..n], &want[..], "flow {i}");
            assert_eq!(set.spec(i).map(|s| build_udp_frame(&s)), Some(want.clone()));
            verify_checksums(&out[..n]);
            wants.push(want);
        }
        // The batch fill, in batches of up to 256 from a running cursor, writes the same frames.
        let mut pool = BufferPool::new(packet::PoolConfig {
            buffers: 256,
            data_size: set.frame_len().max(2048) as u16,
            try_hugepages: false,
            ..packet::PoolConfig::default()
        })
        .expect("pool");
        let mut bufs = [0u32; 256];
        let (mut cursor, mut i) = (0, 0);
        while i < wants.len() {
            let k = (wants.len() - i).min(256);
            assert_eq!(pool.alloc_batch(&mut bufs[..k]), k);
            cursor = set.fill(&mut pool, &bufs[..k], cursor, 9);
            for &b in &bufs[..k] {
                assert_eq!(pool.data(b), &wants[i][..], "filled flow {i}");
                assert_eq!(pool.meta(b).rx_port, 9);
                i += 1;
            }
            pool.free_batch(&bufs[..k]);
        }
        assert_eq!(cursor, 0);
        assert!(set.spec(flows as usize).is_none());
    }

    #[test]
    fn ipv4_flows_match_the_builder() {
        check_all(&UdpFrameSpec::default(), 1000, &v4_dsts(7));
        let jumbo = UdpFrameSpec {
            frame_size: 9000,
            vlan: Some(100),
            ..UdpFrameSpec::default()
        };
        check_all(&jumbo, 50, &v4_dsts(3));
        for frame_size in [150, 200, 260] {
            let spec = UdpFrameSpec {
                frame_size,
                ..UdpFrameSpec::default()
            };
            check_all(&spec, 300, &v4_dsts(2));
        }
        check_all(
            &UdpFrameSpec {
                frame_size: 1518,
                ..UdpFrameSpec::default()
            },
            20,
            &v4_dsts(1),
        );
    }

    #[test]
    fn more_than_a_port_range_of_flows_to_one_destination_stay_distinct() {
        // Past 65,536 flows per destination the source address's low 16 bits count the wraps;
        // every frame still equals what the builder makes of its spec, checksums included.
        check_all(&UdpFrameSpec::default(), 3 * 65536 + 17, &v4_dsts(1));
        check_all(&v6_base(), 2 * 65536 + 5, &v6_dsts(1));
        let set = FlowSet::new(&UdpFrameSpec::default(), 3 * 65536, &v4_dsts(1)).expect("set");
        let keys: std::collections::HashSet<(IpAddr, u16)> = (0..set.len())
            .map(|i| {
                let s = set.spec(i).expect("spec");
                (s.src_ip, s.src_port)
            })
            .collect();
        assert_eq!(keys.len(), 3 * 65536);
    }

    #[test]
    fn ipv6_flows_match_the_builder() {
        check_all(&v6_base(), 1000, &v6_dsts(5));
        let vlan = UdpFrameSpec {
            vlan: Some(4000),
            frame_size: 70 + 4,
            ..v6_base()
        };
        check_all(&vlan, 300, &v6_dsts(2));
    }

    #[test]
    fn every_source_port_including_zero_checksum_case() {
        // 65536 flows to one destination cover every source port, so one of them sums to a
        // UDP checksum of 0 that must be sent as 0xffff, and the port wraps past 65535.
        let base = UdpFrameSpec {
            src_port: 40000,
            ..UdpFrameSpec::default()
        };
        check_all(&base, 65536, &v4_dsts(1));
        let set = FlowSet::new(&base, 65536, &v4_dsts(1)).expect("set");
        let mut out = [0u8; 64];
        let udp_at = 14 + 20;
        let mut saw_ffff = false;
        for i in 0..65536 {
            set.write(i, &mut out);
            saw_ffff |= be16(&out, udp_at + udp::CHECKSUM) == 0xffff;
        }
        assert!(saw_ffff);
    }

    #[test]
    fn flows_are_distinct() {
        let set = FlowSet::new(&UdpFrameSpec::default(), 5000, &v4_dsts(4)).expect("set");
        let mut seen = std::collections::HashSet::new();
        let mut out = [0u8; 64];
        for i in 0..set.len() {
            set.write(i, &mut out);
            let key = (be16(&out, 34), [out[30], out[31], out[32], out[33]]);
            assert!(seen.insert(key), "flow {i} repeats {key:?}");
        }
    }

    #[test]
    fn errors_say_what_is_accepted() {
        let base = UdpFrameSpec::default();
        let e = FlowSet::new(&base, 10, &[]).expect_err("no destinations");
        assert!(e.to_string().contains("no destination"), "{e}");
        let e = FlowSet::new(&base, 10, &v6_dsts(1)).expect_err("family");
        assert!(
            e.to_string().contains("IPv6 but source 198.18.0.1 is IPv4"),
            "{e}"
        );
        let e = FlowSet::new(&v6_base(), 10, &v4_dsts(1)).expect_err("family");
        assert!(e.to_string().contains("accepted"), "{e}");
        let small6 = UdpFrameSpec {
            frame_size: 64,
            ..v6_base()
        };
        let e = FlowSet::new(&small6, 10, &v6_dsts(1)).expect_err("too small");
        assert!(e.to_string().contains("accepted: 66..="), "{e}");
        let tiny4 = UdpFrameSpec {
            frame_size: 45,
            ..UdpFrameSpec::default()
        };
        assert!(FlowSet::new(&tiny4, 1, &v4_dsts(1)).is_err());
        // 46 holds the headers; the builder pads to the 60-byte minimum.
        let pad4 = UdpFrameSpec {
            frame_size: 46,
            ..UdpFrameSpec::default()
        };
        let set = FlowSet::new(&pad4, 1, &v4_dsts(1)).expect("padded");
        assert_eq!(set.frame_len(), 60);
        let huge = UdpFrameSpec {
            frame_size: 70_000,
            ..UdpFrameSpec::default()
        };
        assert!(FlowSet::new(&huge, 1, &v4_dsts(1)).is_err());
        let e = FlowSet::new(&base, 0, &v4_dsts(1)).expect_err("zero flows");
        assert!(e.to_string().contains("accepted: 1..="), "{e}");
        assert!(FlowSet::new(&base, MAX_FLOWS + 1, &v4_dsts(1)).is_err());
    }

    #[test]
    fn write_refuses_bad_flow_or_short_output() {
        let set = FlowSet::new(&UdpFrameSpec::default(), 3, &v4_dsts(1)).expect("set");
        let mut out = [0u8; 64];
        assert_eq!(set.write(3, &mut out), 0);
        assert_eq!(set.write(0, &mut out[..59]), 0);
        // Patching a copy by hand gives the same bytes (sanity of the offsets).
        let mut f = build_udp_frame(&UdpFrameSpec::default());
        put16(&mut f, 34, 1026);
        let mut c = [0u8; 64];
        set.write(2, &mut c);
        assert_eq!(be16(&c, 34), 1026);
        assert_eq!(&c[..34], &f[..34]);
    }
}

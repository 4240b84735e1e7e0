//! The frames `gen tx` sends: one UDP frame per flow, flows differing only in the UDP source port
//! (addresses stay), built by `ports::FlowSet` (valid IPv4 header and UDP checksums) and kept
//! here as one template plus a 4-byte patch per flow (source port, UDP checksum). A transmit
//! buffer gets the template once; re-sending it as another flow rewrites only those 4 bytes.
//! It owns frame contents; it never allocates, copies a whole frame or sums a checksum per
//! packet.

use anyhow::{bail, Context, Result};
use packet::headers::{eth, ip4, ip6, udp, Mac, UdpFrameSpec};
use ports::FlowSet;
use std::net::IpAddr;

/// UDP source port of flow 0 (flow `i` uses `FIRST_SRC_PORT + i`, wrapping).
pub const FIRST_SRC_PORT: u16 = 1024;
/// UDP destination port of every flow.
pub const DST_PORT: u16 = 1024;
/// TTL / hop limit of every frame.
pub const TTL: u8 = 64;

/// What the frames carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRecipe {
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source MAC.
    pub src_mac: Mac,
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address (same family).
    pub dst_ip: IpAddr,
    /// Flows (distinct source ports).
    pub flows: u32,
    /// On-wire frame size with the FCS (the frame is 4 bytes shorter).
    pub frame_size: usize,
}

/// Per-flow bytes: the UDP source port and checksum, in network byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlowPatch {
    src_port: [u8; 2],
    udp_checksum: [u8; 2],
}

/// Every flow's frame, as a template and per-flow patches.
#[derive(Debug)]
pub struct FlowFrames {
    template: Box<[u8]>,
    patches: Box<[FlowPatch]>,
    src_port_at: usize,
    udp_checksum_at: usize,
}

impl FlowFrames {
    /// Build the frames of `recipe`. Errors: families differ, no flows, a frame size the
    /// headers do not fit.
    pub fn new(recipe: &FrameRecipe) -> Result<FlowFrames> {
        if recipe.flows == 0 || recipe.flows > 65536 {
            bail!(
                "{} flows; accepted: 1..=65536 (one per UDP source port)",
                recipe.flows
            );
        }
        let base = UdpFrameSpec {
            dst_mac: recipe.dst_mac,
            src_mac: recipe.src_mac,
            vlan: None,
            src_ip: recipe.src_ip,
            dst_ip: recipe.dst_ip,
            src_port: FIRST_SRC_PORT,
            dst_port: DST_PORT,
            ttl: TTL,
            frame_size: recipe.frame_size,
        };
        // One destination: flow i differs from flow 0 only in its source port (and checksum).
        let set = FlowSet::new(&base, recipe.flows, &[recipe.dst_ip])
            .context("cannot build the frames")?;
        let len = set.frame_len();
        let l3 = if recipe.src_ip.is_ipv4() {
            ip4::MIN_HEADER_LEN
        } else {
            ip6::HEADER_LEN
        };
        let src_port_at = eth::HEADER_LEN + l3;
        let udp_checksum_at = src_port_at + udp::CHECKSUM;
        let mut template = vec![0u8; len];
        if set.write(0, &mut template) != len {
            bail!("internal: flow 0 of {} flows was not written", set.len());
        }
        let mut frame = vec![0u8; len];
        let mut patches = Vec::with_capacity(set.len());
        for flow in 0..set.len() {
            if set.write(flow, &mut frame) != len {
                bail!("internal: flow {flow} was not written");
            }
            let patch = FlowPatch {
                src_port: [frame[src_port_at], frame[src_port_at + 1]],
                udp_checksum: [frame[udp_checksum_at], frame[udp_checksum_at + 1]],
            };
            // Everything but the 4 patched bytes must equal the template, or patching would
            // send wrong frames.
            frame[src_port_at..src_port_at + 2].copy_from_slice(&template[src_port_at..][..2]);
            frame[udp_checksum_at..udp_checksum_at + 2]
                .copy_from_slice(&template[udp_checksum_at..][..2]);
            if frame != template {
                bail!(
                    "internal: flow {flow} differs from flow 0 beyond the source port and checksum"
                );
            }
            patches.push(patch);
        }
        Ok(FlowFrames {
            template: template.into_boxed_slice(),
            patches: patches.into_boxed_slice(),
            src_port_at,
            udp_checksum_at,
        })
    }

    /// Bytes of every frame (without FCS).
    pub fn frame_len(&self) -> usize {
        self.template.len()
    }

    /// Number of flows.
    pub fn flows(&self) -> usize {
        self.patches.len()
    }

    /// The frame of flow 0.
    pub fn template(&self) -> &[u8] {
        &self.template
    }

    /// Turn `frame` (a copy of the template, patched for any flow) into flow `flow`'s frame by
    /// rewriting its 4 per-flow bytes. Does nothing when `flow >= flows()` or `frame` is shorter
    /// than `frame_len()`.
    #[inline(always)]
    pub fn patch(&self, flow: usize, frame: &mut [u8]) {
        let Some(p) = self.patches.get(flow) else {
            return;
        };
        if frame.len() < self.template.len() {
            return;
        }
        frame[self.src_port_at..self.src_port_at + 2].copy_from_slice(&p.src_port);
        frame[self.udp_checksum_at..self.udp_checksum_at + 2].copy_from_slice(&p.udp_checksum);
    }

    /// Write flow `flow`'s whole frame into `out`; returns its length, or 0 (writing nothing)
    /// when `flow >= flows()` or `out` is too short.
    pub fn write(&self, flow: usize, out: &mut [u8]) -> usize {
        let len = self.template.len();
        if flow >= self.patches.len() || out.len() < len {
            return 0;
        }
        out[..len].copy_from_slice(&self.template);
        self.patch(flow, &mut out[..len]);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::headers::{be16, be32};

    /// RFC 1071 sum, written independently of `packet::checksum`.
    fn ones_complement_sum(chunks: &[&[u8]]) -> u16 {
        let mut acc: u32 = 0;
        for c in chunks {
            for pair in c.chunks(2) {
                let word = (pair[0] as u32) << 8 | pair.get(1).copied().unwrap_or(0) as u32;
                acc += word;
                acc = (acc & 0xffff) + (acc >> 16);
            }
        }
        acc as u16
    }

    fn recipe4() -> FrameRecipe {
        FrameRecipe {
            dst_mac: [0x02, 0, 0, 0, 0, 0x01],
            src_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_ip: "198.18.1.2".parse().expect("ip"),
            dst_ip: "198.18.2.2".parse().expect("ip"),
            flows: 1024,
            frame_size: 64,
        }
    }

    fn recipe6() -> FrameRecipe {
        FrameRecipe {
            src_ip: "2001:db8:1::2".parse().expect("ip"),
            dst_ip: "2001:db8:2::2".parse().expect("ip"),
            frame_size: 78,
            ..recipe4()
        }
    }

    /// Check one IPv4 frame field by field, with both checksums.
    fn check_v4(f: &[u8], r: &FrameRecipe, src_port: u16) {
        assert_eq!(f.len(), r.frame_size - 4, "frame_size - 4 bytes");
        assert_eq!(&f[0..6], &r.dst_mac);
        assert_eq!(&f[6..12], &r.src_mac);
        assert_eq!(be16(f, 12), 0x0800);
        let ip = &f[14..34];
        assert_eq!(ip[0], 0x45);
        assert_eq!(be16(ip, 2) as usize, f.len() - 14, "IPv4 total length");
        assert_eq!(ip[8], TTL);
        assert_eq!(ip[9], 17, "UDP");
        assert_eq!(&ip[12..16], &[198, 18, 1, 2]);
        assert_eq!(&ip[16..20], &[198, 18, 2, 2]);
        assert_eq!(ones_complement_sum(&[ip]), 0xffff, "IPv4 header checksum");
        let u = &f[34..];
        assert_eq!(be16(u, 0), src_port);
        assert_eq!(be16(u, 2), DST_PORT);
        assert_eq!(be16(u, 4) as usize, u.len(), "UDP length");
        assert_ne!(be16(u, 6), 0, "UDP checksum present");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(u.len() as u16).to_be_bytes());
        assert_eq!(ones_complement_sum(&[&pseudo, u]), 0xffff, "UDP checksum");
    }

    fn check_v6(f: &[u8], r: &FrameRecipe, src_port: u16) {
        assert_eq!(f.len(), r.frame_size - 4);
        assert_eq!(&f[0..6], &r.dst_mac);
        assert_eq!(&f[6..12], &r.src_mac);
        assert_eq!(be16(f, 12), 0x86dd);
        let ip = &f[14..54];
        assert_eq!(be32(ip, 0), 0x6000_0000, "version 6, no class or label");
        assert_eq!(be16(ip, 4) as usize, f.len() - 54, "payload length");
        assert_eq!(ip[6], 17);
        assert_eq!(ip[7], TTL);
        let (IpAddr::V6(s), IpAddr::V6(d)) = (r.src_ip, r.dst_ip) else {
            panic!("IPv6 recipe");
        };
        assert_eq!(&ip[8..24], &s.octets());
        assert_eq!(&ip[24..40], &d.octets());
        let u = &f[54..];
        assert_eq!(be16(u, 0), src_port);
        assert_eq!(be16(u, 2), DST_PORT);
        assert_eq!(be16(u, 4) as usize, u.len());
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[8..40]);
        pseudo.extend_from_slice(&(u.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        assert_eq!(ones_complement_sum(&[&pseudo, u]), 0xffff, "UDP checksum");
    }

    #[test]
    fn ipv4_frames_are_valid_and_differ_only_in_source_port() {
        let r = recipe4();
        let frames = FlowFrames::new(&r).expect("frames");
        assert_eq!(frames.flows(), 1024);
        assert_eq!(frames.frame_len(), 60);
        check_v4(frames.template(), &r, FIRST_SRC_PORT);
        let mut buf = [0u8; 64];
        for flow in 0..frames.flows() {
            assert_eq!(frames.write(flow, &mut buf), 60);
            check_v4(&buf[..60], &r, FIRST_SRC_PORT + flow as u16);
        }
        // Patching a buffer that holds another flow's frame gives the same bytes as writing.
        let mut patched = [0u8; 60];
        frames.write(5, &mut patched);
        frames.patch(900, &mut patched);
        let mut written = [0u8; 60];
        frames.write(900, &mut written);
        assert_eq!(patched, written);
    }

    #[test]
    fn ipv6_frames_are_valid() {
        let r = recipe6();
        let frames = FlowFrames::new(&r).expect("frames");
        assert_eq!(frames.frame_len(), 74);
        let mut buf = [0u8; 74];
        for flow in [0usize, 1, 511, 1023] {
            frames.write(flow, &mut buf);
            check_v6(&buf, &r, FIRST_SRC_PORT + flow as u16);
        }
    }

    #[test]
    fn large_frames_and_every_port() {
        let r = FrameRecipe {
            flows: 65536,
            frame_size: 1518,
            ..recipe4()
        };
        let frames = FlowFrames::new(&r).expect("frames");
        let mut buf = vec![0u8; 1514];
        let mut ports = std::collections::HashSet::new();
        for flow in (0..65536).step_by(257).chain([65534]) {
            frames.write(flow, &mut buf);
            let port = FIRST_SRC_PORT.wrapping_add(flow as u16);
            check_v4(&buf, &r, port);
            assert!(ports.insert(port));
        }
    }

    #[test]
    fn out_of_range_is_refused_without_writing() {
        let frames = FlowFrames::new(&FrameRecipe {
            flows: 3,
            ..recipe4()
        })
        .expect("frames");
        let mut buf = [0xeeu8; 60];
        assert_eq!(frames.write(3, &mut buf), 0);
        frames.patch(3, &mut buf);
        assert_eq!(frames.write(0, &mut buf[..59]), 0);
        assert_eq!(buf, [0xee; 60]);
        let mut short = [0xeeu8; 40];
        frames.patch(1, &mut short);
        assert_eq!(short, [0xee; 40]);
    }

    #[test]
    fn mismatched_families_and_tiny_frames_fail() {
        let mixed = FrameRecipe {
            dst_ip: "2001:db8::1".parse().expect("ip"),
            ..recipe4()
        };
        assert!(FlowFrames::new(&mixed).is_err());
        let tiny6 = FrameRecipe {
            frame_size: 64,
            ..recipe6()
        };
        assert!(FlowFrames::new(&tiny6).is_err());
        assert!(FlowFrames::new(&FrameRecipe {
            flows: 0,
            ..recipe4()
        })
        .is_err());
    }
}

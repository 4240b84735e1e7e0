//! Test-only builders of IP packets with full checksums, and a full checksum verifier that the
//! incremental updates of `encap` are checked against. Never used outside tests.
#![allow(dead_code)]

use packet::checksum::{add, fold, pseudo_header_v4, pseudo_header_v6, sum};
use packet::headers::put16;

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;

pub fn a4(s: &str) -> [u8; 4] {
    s.parse::<std::net::Ipv4Addr>().expect("v4").octets()
}

pub fn a6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().expect("v6").octets()
}

/// A TCP header (20 bytes) + payload, checksum left 0.
pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    put16(&mut t, 0, sport);
    put16(&mut t, 2, dport);
    t[4..8].copy_from_slice(&0x1000_0001u32.to_be_bytes());
    t[12] = 0x50;
    t[13] = flags;
    put16(&mut t, 14, 8192);
    t.extend_from_slice(payload);
    t
}

/// A UDP header + payload, checksum left 0 (filled by `ip4`/`ip6` unless `zero_udp`).
pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    put16(&mut u, 0, sport);
    put16(&mut u, 2, dport);
    put16(&mut u, 4, (8 + payload.len()) as u16);
    u.extend_from_slice(payload);
    u
}

/// Options for `ip4_with`.
#[derive(Clone, Copy, Default)]
pub struct Ip4Opts {
    pub tos: u8,
    pub frag: u16,
    pub ttl: u8,
    pub zero_udp: bool,
    /// Do not compute the L4 checksum (fragments: the caller fills it).
    pub no_l4_sum: bool,
}

pub fn ip4(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    ip4_with(src, dst, proto, l4, Ip4Opts::default())
}

pub fn ip4_with(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8], o: Ip4Opts) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[1] = o.tos;
    put16(&mut p, 2, (20 + l4.len()) as u16);
    put16(&mut p, 4, 0x1234);
    put16(&mut p, 6, o.frag);
    p[8] = if o.ttl == 0 { 64 } else { o.ttl };
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = packet::checksum::checksum(&p);
    put16(&mut p, 10, c);
    p.extend_from_slice(l4);
    if !o.no_l4_sum {
        let pseudo = pseudo_header_v4(src, dst, proto, l4.len() as u16);
        fill_l4(&mut p[20..], proto, pseudo, o.zero_udp);
    }
    p
}

pub fn ip6(src: [u8; 16], dst: [u8; 16], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    put16(&mut p, 4, l4.len() as u16);
    p[6] = proto;
    p[7] = 64;
    p[8..24].copy_from_slice(&src);
    p[24..40].copy_from_slice(&dst);
    p.extend_from_slice(l4);
    let pseudo = pseudo_header_v6(src, dst, proto, l4.len() as u32);
    fill_l4(&mut p[40..], proto, pseudo, false);
    p
}

fn fill_l4(l4: &mut [u8], proto: u8, pseudo: u64, zero_udp: bool) {
    let (at, pseudo) = match proto {
        6 => (16, pseudo),
        17 if zero_udp => return,
        17 => (6, pseudo),
        1 => (2, 0),
        58 => (2, pseudo),
        _ => return,
    };
    if l4.len() < at + 2 {
        return;
    }
    put16(l4, at, 0);
    let mut c = !fold(add(pseudo, sum(0, l4)));
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    put16(l4, at, c);
}

/// An ICMP (v4) error of `typ`/`code` quoting `quoted` (cut to `quote` bytes).
pub fn icmp4_error(src: [u8; 4], dst: [u8; 4], typ: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![typ, code, 0, 0, 0, 0, 0, 0];
    if typ == 3 && code == 4 {
        put16(&mut m, 6, 1400);
    }
    m.extend_from_slice(quoted);
    ip4(src, dst, 1, &m)
}

/// An ICMPv6 error of `typ`/`code` quoting `quoted`.
pub fn icmp6_error(src: [u8; 16], dst: [u8; 16], typ: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
    let mut m = vec![typ, code, 0, 0, 0, 0, 0, 0];
    if typ == 2 {
        m[4..8].copy_from_slice(&1280u32.to_be_bytes());
    }
    m.extend_from_slice(quoted);
    ip6(src, dst, 58, &m)
}

/// Every checksum of the IP packet `p` verifies: IPv4 header, TCP/UDP (unless a fragment, or
/// UDP over IPv4 with checksum 0), ICMP/ICMPv6; for ICMP errors also the quoted IP header (v4)
/// and the quoted UDP/TCP checksum cannot be verified (cut short) and are not.
pub fn checksums_ok(p: &[u8]) -> Result<(), String> {
    let be16 = packet::headers::be16;
    if p[0] >> 4 == 4 {
        let ihl = usize::from(p[0] & 15) * 4;
        if packet::checksum::checksum(&p[..ihl]) != 0 {
            return Err("ipv4 header checksum".into());
        }
        let len = usize::from(be16(p, 2));
        if be16(p, 6) & 0x3fff != 0 {
            return Ok(());
        }
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&p[12..16]);
        d.copy_from_slice(&p[16..20]);
        let l4 = &p[ihl..len];
        match p[9] {
            6 | 17 => {
                if p[9] == 17 && be16(l4, 6) == 0 {
                    return Ok(());
                }
                let ps = pseudo_header_v4(s, d, p[9], l4.len() as u16);
                if fold(add(ps, sum(0, l4))) != 0xffff {
                    return Err(format!("l4 checksum proto {}", p[9]));
                }
            }
            1 if fold(sum(0, l4)) != 0xffff => return Err("icmp checksum".into()),
            _ => {}
        }
    } else {
        let len = 40 + usize::from(be16(p, 4));
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&p[8..24]);
        d.copy_from_slice(&p[24..40]);
        let l4 = &p[40..len];
        if matches!(p[6], 6 | 17 | 58) {
            let ps = pseudo_header_v6(s, d, p[6], l4.len() as u32);
            if fold(add(ps, sum(0, l4))) != 0xffff {
                return Err(format!("l4 checksum next header {}", p[6]));
            }
        }
    }
    Ok(())
}

//! Arbitrary bytes as an IP packet through the load balancer's parsers and every rewrite
//! (`lb::parse`, its fast lane's `plain4` and `l3dsr_plain4` held to them, `lb::encap`) and the probe-reply filter (`lb::probe::is_probe_reply`): no panic; offsets inside the packet; L3DSR and NAT keep the
//! length and keep a valid IPv4 header checksum valid; GRE leaves the buffer's offsets inside
//! the slot or the packet untouched. The first byte chooses the family (bit 0) and the rewrite
//! (bits 1-3); the rest is the L3 packet, after a 14-byte Ethernet header in a buffer with
//! 128 bytes of headroom.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lb::encap;
use lb::parse::parse;
use packet::BufferMeta;

const HEADROOM: usize = 128;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, l3)) = data.split_first() else {
        return;
    };
    if l3.len() > 2048 {
        return;
    }
    let ip6 = sel & 1 != 0;
    // The probe-reply filter reads the same untrusted bytes.
    let _ = lb::probe::is_probe_reply(l3, ip6);
    // The fast lane's parser accepts only what `parse` accepts, and says the same of it.
    let plain = lb::parse::plain4(l3);
    let Ok(p) = parse(l3, ip6) else {
        assert!(ip6 || plain.is_none(), "plain4 took what parse refused");
        return;
    };
    if let (Some(q), false) = (plain, ip6) {
        assert_eq!(q.parsed(), p);
    }
    assert!(p.len <= l3.len() && p.l4 <= p.len && p.inner_l4 <= p.len && p.inner_l3 <= p.len);
    let mut slot = vec![0u8; HEADROOM + 14];
    slot.extend_from_slice(l3);
    slot.extend_from_slice(&[0u8; 64]);
    let mut meta = BufferMeta {
        data_offset: HEADROOM as u16,
        length: (14 + l3.len()) as u16,
        l3_offset: 14,
        ..BufferMeta::default()
    };
    let at = HEADROOM + 14;
    let header_ok = !ip6 && packet::checksum::checksum(&l3[..(usize::from(l3[0] & 15) * 4)]) == 0;
    let before = slot.clone();
    let mapped = |a: [u8; 4]| std::net::Ipv4Addr::from(a).to_ipv6_mapped().octets();
    let r = match (sel >> 1) & 7 {
        0 => {
            let r = encap::l3dsr(&meta, &mut slot, &p, [198, 18, 2, 1], sel >> 2);
            if let (Some(q), false) = (plain, ip6) {
                // The fast lane's rewrite writes the same bytes.
                let mut fast = before.clone();
                let f = encap::l3dsr_plain4(&meta, &mut fast, &q, [198, 18, 2, 1], sel >> 2);
                assert_eq!((f, &fast), (r, &slot));
            }
            r
        }
        1 => encap::gre4(&mut meta, &mut slot, &p, [198, 18, 0, 254], [198, 18, 2, 1], 64, 1500, 7),
        2 => {
            let s = [0x20, 1, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
            encap::gre6(&mut meta, &mut slot, &p, s, s, 64, 1500, 7)
        }
        3 | 4 => {
            let a = if ip6 { [0x20; 16] } else { mapped([198, 18, 2, 1]) };
            encap::nat_forward(&meta, &mut slot, &p, a, 8080)
        }
        _ => {
            let a = if ip6 { [0x20; 16] } else { mapped([198, 18, 1, 1]) };
            encap::nat_reverse(&meta, &mut slot, &p, a, 80)
        }
    };
    match (sel >> 1) & 7 {
        1 | 2 => {
            if r.is_ok() {
                let start = usize::from(meta.data_offset);
                assert!(start + usize::from(meta.length) <= slot.len());
                assert_eq!(&slot[start + usize::from(meta.length) - p.len..][..p.len], &l3[..p.len]);
            } else {
                assert_eq!(slot, before, "a refused GRE leaves the packet alone");
            }
        }
        _ => {
            assert_eq!(slot.len(), before.len());
            if r.is_ok() && header_ok {
                let ihl = usize::from(slot[at] & 15) * 4;
                assert_eq!(packet::checksum::checksum(&slot[at..at + ihl]), 0, "IPv4 header checksum");
            }
        }
    }
});

//! Stable fallback of the `flow_extract` cargo-fuzz target: the same body
//! (fuzz/src/flow_check.rs) on arbitrary bytes and on byte-flipped, truncated variants of
//! well-formed frames, so `cargo test` exercises it without nightly.

#[path = "../../../fuzz/src/flow_check.rs"]
mod flow_check;

use proptest::prelude::*;

/// Well-formed frames to mutate: TCP/IPv4 with options, VLAN UDP/IPv6 with a fragment header,
/// ARP, ICMPv6 neighbour solicitation, SCTP.
fn seeds() -> Vec<Vec<u8>> {
    let mac = [2u8, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let mut tcp4 = mac.to_vec();
    tcp4.extend_from_slice(&[8, 0, 0x46, 0, 0, 48, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    tcp4.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 2, 1, 1, 1, 0]);
    tcp4.extend_from_slice(&[
        4, 210, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 1, 0, 0, 0, 0, 0,
    ]);
    let mut udp6 = mac.to_vec();
    udp6.extend_from_slice(&[0x81, 0, 0x20, 7, 0x86, 0xdd, 0x60, 0, 0, 1, 0, 20, 44, 64]);
    udp6.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    udp6.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    udp6.extend_from_slice(&[
        17, 0, 0, 1, 0, 0, 0, 9, 0, 53, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4,
    ]);
    let mut arp = mac.to_vec();
    arp.extend_from_slice(&[
        8, 6, 0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 198, 18, 0, 1,
    ]);
    arp.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 18, 0, 2]);
    let mut ns = mac.to_vec();
    ns.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    ns.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ns.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2]);
    ns.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
    ns.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ns.extend_from_slice(&[1, 1, 2, 0, 0, 0, 0, 1]);
    let mut sctp = mac.to_vec();
    sctp.extend_from_slice(&[8, 0, 0x45, 0, 0, 48, 0, 0, 0, 0, 64, 132, 0, 0]);
    sctp.extend_from_slice(&[198, 18, 0, 1, 198, 19, 0, 2, 0x13, 0x88, 0x13, 0x89]);
    sctp.extend_from_slice(&[0; 8]);
    sctp.extend_from_slice(&[1, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0x10, 0, 0, 1, 0, 1]);
    vec![tcp4, udp6, arp, ns, sctp]
}

#[test]
fn seeds_pass_untouched() {
    for s in seeds() {
        for sel in [0x40u8, 0x41, 0x55, 0x5a, 0x62, 0xe0] {
            for (i, _) in flow::Field::ALL.iter().enumerate() {
                let mut d = vec![(sel & 0xc0) | (i as u8 & 0x3f), 0, 1, sel];
                d.extend_from_slice(&s);
                flow_check::run(&d);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        flow_check::run(&data);
    }

    #[test]
    fn mutated_frames(
        which in 0usize..5,
        head in any::<[u8; 4]>(),
        flips in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4),
        cut in any::<u16>(),
    ) {
        let mut f = seeds().swap_remove(which);
        for (at, x) in flips {
            let n = f.len();
            f[at as usize % n] ^= x;
        }
        let keep = f.len() - (cut as usize % 8).min(f.len());
        f.truncate(if cut & 0x8000 != 0 { keep } else { f.len() });
        let mut d = head.to_vec();
        d.extend_from_slice(&f);
        flow_check::run(&d);
    }
}

#!/usr/bin/env python3
"""Golden frames of IPv4 fragmentation, built by scapy (not by vecplane).

    /usr/bin/python3 crates/packet/tests/golden/make_frag_golden.py --out DIR

writes DIR/frag_input.pcap (whole IPv4 packets in Ethernet frames), DIR/frag_cases.txt (one
line per input: `NAME max_len=N expect=COUNT|refused:REASON`) and DIR/frag_expected.pcap (for
each input, in order, the fragments scapy makes of it with `fragment()` at the payload step
`(max_len - header length)` rounded down to 8, every checksum computed by scapy; for a refused
packet, the input unchanged). crates/packet/tests/frag_golden.rs cuts the inputs with
`packet::frag` and compares bytes.

scapy copies every IPv4 option into every fragment; RFC 791 copies only the options with the
"copied" flag, and vecplane (as Linux) blanks the others with NOPs in later fragments: for a
packet with such an option the later fragments are built here from scapy's with the option
replaced by NOPs (scapy still computes their checksums).
"""

import argparse
import os

from scapy.all import (IP, TCP, UDP, Ether, IPOption_NOP, IPOption_EOL, IPOption_Router_Alert,
                       IPOption_RR, Raw, fragment, wrpcap)

MACS = dict(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
C4, V4 = "198.18.0.1", "198.18.1.1"

cases = []  # (name, max_len, input frame, [expected frames], expect)


def eth(p):
    return Ether(**MACS) / p


def load(n):
    return bytes((i * 7 + i // 256) % 256 for i in range(n))


def step(pkt, max_len):
    return (max_len - pkt[IP].ihl * 4) // 8 * 8


def add(name, max_len, pkt, later_options=None):
    pkt = IP(bytes(pkt))  # every length and checksum computed once
    frags = fragment(pkt, fragsize=step(pkt, max_len))
    out = []
    for k, f in enumerate(frags):
        if k > 0 and later_options is not None:
            f = f.copy()
            f.options = later_options
            del f.chksum
        out.append(bytes(eth(IP(bytes(f)))))
    cases.append((name, max_len, bytes(eth(pkt)), out, str(len(out))))


def refuse(name, max_len, pkt, reason):
    frame = bytes(eth(IP(bytes(pkt))))
    cases.append((name, max_len, frame, [frame], "refused:" + reason))


def build():
    add("udp-1500-gre4", 1476, IP(src=C4, dst=V4, id=0x5a5a, tos=0x28) / UDP(sport=40000, dport=53) / Raw(load(1472)))
    add("udp-1500-gre6", 1456, IP(src=C4, dst=V4, id=0x5a5b) / UDP(sport=40000, dport=53) / Raw(load(1472)))
    add("tcp-4000-576", 552, IP(src=C4, dst=V4, id=7) / TCP(sport=1234, dport=80, flags="PA", seq=1) / Raw(load(3960)))
    add("odd-step", 1001, IP(src=C4, dst=V4, id=9) / UDP(sport=1, dport=2) / Raw(load(2500)))
    add("router-alert-copied", 576, IP(src=C4, dst=V4, id=11, options=[IPOption_Router_Alert()]) /
        UDP(sport=5, dport=6) / Raw(load(1200)))
    add("record-route-blanked", 576,
        IP(src=C4, dst=V4, id=12, options=[IPOption_RR(routers=["198.18.9.9"]), IPOption_EOL()]) /
        UDP(sport=5, dport=6) / Raw(load(1200)),
        later_options=[IPOption_NOP()] * 7 + [IPOption_EOL()])
    add("first-fragment", 1476, IP(src=C4, dst=V4, id=13, flags="MF") / Raw(load(1480)))
    add("middle-fragment", 600, IP(src=C4, dst=V4, id=14, flags="MF", frag=185, proto=17) / Raw(load(1480)))
    add("last-fragment", 600, IP(src=C4, dst=V4, id=15, frag=370, proto=17) / Raw(load(1001)))
    refuse("df", 1476, IP(src=C4, dst=V4, id=16, flags="DF") / UDP(sport=1, dport=2) / Raw(load(1472)), "df")
    refuse("fits", 1476, IP(src=C4, dst=V4, id=17) / UDP(sport=1, dport=2) / Raw(load(1448)), "fits")
    refuse("too-small", 27, IP(src=C4, dst=V4, id=18) / UDP(sport=1, dport=2) / Raw(load(100)), "too-small")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    build()
    os.makedirs(a.out, exist_ok=True)
    # Fixed timestamps: the files are byte-for-byte reproducible.
    inputs = [Ether(c[2]) for c in cases]
    expected = [Ether(f) for c in cases for f in c[3]]
    for p in inputs + expected:
        p.time = 0
    wrpcap(os.path.join(a.out, "frag_input.pcap"), inputs)
    wrpcap(os.path.join(a.out, "frag_expected.pcap"), expected)
    with open(os.path.join(a.out, "frag_cases.txt"), "w") as f:
        for name, max_len, _, _, expect in cases:
            f.write(f"{name} max_len={max_len} expect={expect}\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden frames of the load balancer's encapsulations, built by scapy (not by vecplane).

    /usr/bin/python3 crates/lb/tests/golden/make_lb_golden.py --out DIR

writes DIR/lb_input.pcap (frames as the LB receives them), DIR/lb_cases.txt (one line per
frame: name, what to apply, its parameters and the expected outcome) and DIR/lb_expected.pcap
(for each input, the frame scapy builds from scratch for the rewritten packet, with every
checksum computed by scapy; for a refused packet, the input unchanged).
crates/lb/tests/golden_encap.rs applies the cases with vecplane's code and compares bytes.

Case lines: `NAME OP key=value... expect=ok|toobig:MTU:SIGNAL|malformed:REASON` with OP one of
l3dsr (server, dscp), gre4/gre6 (src, bits, server, ttl, mtu, hash), nat-forward /
nat-reverse (addr, port). After GRE the test writes the L2 header the way ip4-rewrite would
(the input's MACs, the outer ethertype). The outer GRE source is `src` with its low `bits` bits
taken from the hash rotated right by 16 (the rule in crates/lb/src/encap/mod.rs).
"""

import argparse
import ipaddress
import os

from scapy.all import (GRE, ICMP, IP, UDP, TCP, Ether, IPv6, ICMPv6PacketTooBig,
                       ICMPv6DestUnreach, ICMPv6EchoRequest, Raw, Padding, fragment, wrpcap)

MACS = dict(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")
C4, V4, S4, R4, OUT4 = "198.18.0.1", "198.18.1.1", "198.18.2.1", "198.18.5.5", "198.18.0.240"
C6, V6, S6, R6, OUT6 = "2001:db8::1", "2001:db8:1::1", "2001:db8:2::1", "2001:db8:5::5", "2001:db8:ff::"
PAY = b"GET / HTTP/1.1\r\nHost: lb\r\n\r\n"

cases = []  # (name, op, params, input bytes, expected bytes, expect)


def eth(p):
    return Ether(**MACS) / p


def add(name, op, params, inp, out, expect="ok"):
    inp = bytes(inp)
    cases.append((name, op, params, inp, bytes(out) if out is not None else inp, expect))


def tcp4(src, dst, sport, dport, flags="PA", tos=0, df=False):
    return IP(src=src, dst=dst, tos=tos, id=0x1234, flags="DF" if df else 0) / \
        TCP(sport=sport, dport=dport, flags=flags, seq=1000, ack=0 if flags == "S" else 1, window=8192) / Raw(PAY)


def udp4(src, dst, sport, dport, tos=0, chksum=None, load=b"query"):
    u = UDP(sport=sport, dport=dport) if chksum is None else UDP(sport=sport, dport=dport, chksum=chksum)
    return IP(src=src, dst=dst, tos=tos, id=0x1234) / u / Raw(load)


def tcp6(src, dst, sport, dport, tc=0):
    return IPv6(src=src, dst=dst, tc=tc) / TCP(sport=sport, dport=dport, flags="PA", seq=1, ack=1, window=8192) / Raw(PAY)


def udp6(src, dst, sport, dport, load=b"query"):
    return IPv6(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(load)


def l3dsr_cases():
    p = dict(server=S4, dscp=23)
    add("l3dsr-tcp4-syn-ecn", "l3dsr", p, eth(tcp4(C4, V4, 40000, 80, "S", tos=1)),
        eth(tcp4(C4, S4, 40000, 80, "S", tos=23 << 2 | 1)))
    add("l3dsr-udp4-padded", "l3dsr", p, eth(udp4(C4, V4, 5000, 53)) / Padding(b"\0" * 9),
        eth(udp4(C4, S4, 5000, 53, tos=23 << 2)) / Padding(b"\0" * 9))
    add("l3dsr-udp4-zero-checksum", "l3dsr", p, eth(udp4(C4, V4, 5000, 53, chksum=0)),
        eth(udp4(C4, S4, 5000, 53, tos=23 << 2, chksum=0)))
    # A fragmented UDP datagram: both fragments follow, the first's checksum stays right for
    # the whole datagram.
    dg = IP(src=C4, dst=V4, id=77) / UDP(sport=5000, dport=53) / Raw(bytes(range(64)))
    dg2 = IP(src=C4, dst=S4, id=77, tos=23 << 2) / UDP(sport=5000, dport=53) / Raw(bytes(range(64)))
    for i, (a, b) in enumerate(zip(fragment(dg, fragsize=32), fragment(dg2, fragsize=32))):
        add("l3dsr-udp4-fragment-%d" % i, "l3dsr", p, eth(a), eth(b))
    # A router's "fragmentation needed" to the VIP about the server's reply follows the flow.
    reply = bytes(tcp4(V4, C4, 80, 40000, "A"))[:28]
    add("l3dsr-icmp4-frag-needed", "l3dsr", p,
        eth(IP(src=R4, dst=V4) / ICMP(type=3, code=4, nexthopmtu=1400) / Raw(reply)),
        eth(IP(src=R4, dst=S4, tos=23 << 2) / ICMP(type=3, code=4, nexthopmtu=1400) / Raw(reply)))
    add("l3dsr-truncated-tcp", "l3dsr", p, eth(IP(src=C4, dst=V4, proto=6) / Raw(bytes(TCP(sport=1, dport=80))[:12])),
        None, "malformed:truncated-l4")
    add("l3dsr-tcp6-refused", "l3dsr", p, eth(tcp6(C6, V6, 40000, 80)), None, "family")


def gre_source(base, bits, h, width):
    rot = ((h >> 16) | (h << 16)) & 0xffffffff
    mask = (1 << bits) - 1
    b = int(ipaddress.ip_address(base))
    return str(ipaddress.ip_address((b & ~mask & ((1 << width) - 1)) | (rot & mask)))


def gre_cases():
    h = 0x5a3c_9e11
    for outer in ("gre4", "gre6"):
        base, bits, srv = (OUT4, 4, S4) if outer == "gre4" else (OUT6, 16, S6)
        src = gre_source(base, bits, h, 32 if outer == "gre4" else 128)
        p = dict(src=base, bits=bits, server=srv, ttl=60, mtu=1500, hash=hex(h))
        inners = [("tcp4", tcp4(C4, V4, 40000, 80, tos=0x2a << 2 | 2, df=True)),
                  ("udp4", udp4(C4, V4, 5000, 53)),
                  ("tcp6", tcp6(C6, V6, 40000, 443, tc=0x12)),
                  ("udp6", udp6(C6, V6, 5000, 53))]
        for name, inner in inners:
            tos = inner.tos if IP in inner and not inner.haslayer(IPv6) else inner.tc
            gp = 0x0800 if inner.haslayer(IP) else 0x86DD
            if outer == "gre4":
                o = IP(src=src, dst=srv, ttl=60, id=0, flags="DF", tos=tos) / GRE(proto=gp) / inner
                t = 0x0800
            else:
                o = IPv6(src=src, dst=srv, hlim=60, tc=tos, fl=h & 0xFFFFF) / GRE(proto=gp) / inner
                t = 0x86DD
            padded = eth(inner) / Padding(b"\0" * 6) if name == "udp4" else eth(inner)
            add("%s-%s" % (outer, name), outer, p, padded, Ether(type=t, **MACS) / o)
    # Too big for the MTU: left unchanged, with the MTU to report and whether to report it.
    big4df = tcp4(C4, V4, 40000, 80, df=True) / Raw(b"x" * 1400)
    big4 = udp4(C4, V4, 5000, 53, load=b"x" * 1460)
    big6 = udp6(C6, V6, 5000, 53, load=b"y" * 1440)
    p4 = dict(src=OUT4, bits=0, server=S4, ttl=64, mtu=1480, hash="0x1")
    add("gre4-too-big-df", "gre4", p4, eth(big4df), None, "toobig:1456:1")
    add("gre4-too-big-no-df", "gre4", p4, eth(big4), None, "toobig:1456:0")
    add("gre6-too-big-v6", "gre6", dict(p4, src=OUT6, server=S6, mtu=1500), eth(big6), None, "toobig:1456:1")


def nat_cases():
    f4 = dict(addr=S4, port=8080)
    r4 = dict(addr=V4, port=80)
    add("nat4-forward-tcp", "nat-forward", f4, eth(tcp4(C4, V4, 40000, 80, "S")), eth(tcp4(C4, S4, 40000, 8080, "S")))
    add("nat4-reverse-tcp", "nat-reverse", r4, eth(tcp4(S4, C4, 8080, 40000, "SA")), eth(tcp4(V4, C4, 80, 40000, "SA")))
    add("nat4-forward-udp", "nat-forward", f4, eth(udp4(C4, V4, 5000, 80)), eth(udp4(C4, S4, 5000, 8080)))
    add("nat4-reverse-udp-zero-checksum", "nat-reverse", r4, eth(udp4(S4, C4, 8080, 5000, chksum=0)),
        eth(udp4(V4, C4, 80, 5000, chksum=0)))
    dg = IP(src=C4, dst=V4, id=9) / UDP(sport=5000, dport=80) / Raw(bytes(range(48)))
    dg2 = IP(src=C4, dst=S4, id=9) / UDP(sport=5000, dport=8080) / Raw(bytes(range(48)))
    for i, (a, b) in enumerate(zip(fragment(dg, fragsize=24), fragment(dg2, fragsize=24))):
        add("nat4-forward-fragment-%d" % i, "nat-forward", f4, eth(a), eth(b))
    # ICMP errors: to the VIP about VIP:80 -> client (forward), from the server about
    # client -> server:8080 (reverse).
    q = bytes(tcp4(V4, C4, 80, 40000, "A"))
    qs = bytes(tcp4(S4, C4, 8080, 40000, "A"))
    for n in (28, 48):
        add("nat4-forward-icmp-frag-needed-%d" % n, "nat-forward", f4,
            eth(IP(src=R4, dst=V4) / ICMP(type=3, code=4, nexthopmtu=1400) / Raw(q[:n])),
            eth(IP(src=R4, dst=S4) / ICMP(type=3, code=4, nexthopmtu=1400) / Raw(qs[:n])))
    q = bytes(udp4(C4, S4, 5000, 8080))
    qv = bytes(udp4(C4, V4, 5000, 80))
    add("nat4-reverse-icmp-port-unreachable", "nat-reverse", r4,
        eth(IP(src=S4, dst=C4) / ICMP(type=3, code=3) / Raw(q)),
        eth(IP(src=V4, dst=C4) / ICMP(type=3, code=3) / Raw(qv)))
    f6 = dict(addr=S6, port=8443)
    r6 = dict(addr=V6, port=443)
    add("nat6-forward-tcp", "nat-forward", f6, eth(tcp6(C6, V6, 40000, 443)), eth(tcp6(C6, S6, 40000, 8443)))
    add("nat6-reverse-udp", "nat-reverse", r6, eth(udp6(S6, C6, 8443, 5000)), eth(udp6(V6, C6, 443, 5000)))
    add("nat6-forward-echo", "nat-forward", f6,
        eth(IPv6(src=C6, dst=V6) / ICMPv6EchoRequest(id=7, seq=1, data=b"ping")),
        eth(IPv6(src=C6, dst=S6) / ICMPv6EchoRequest(id=7, seq=1, data=b"ping")))
    q = bytes(tcp6(V6, C6, 443, 40000))
    qs = bytes(tcp6(S6, C6, 8443, 40000))
    add("nat6-forward-packet-too-big", "nat-forward", f6,
        eth(IPv6(src=R6, dst=V6) / ICMPv6PacketTooBig(mtu=1280) / Raw(q)),
        eth(IPv6(src=R6, dst=S6) / ICMPv6PacketTooBig(mtu=1280) / Raw(qs)))
    q = bytes(udp6(C6, S6, 5000, 8443))
    qv = bytes(udp6(C6, V6, 5000, 443))
    add("nat6-reverse-port-unreachable", "nat-reverse", r6,
        eth(IPv6(src=S6, dst=C6) / ICMPv6DestUnreach(code=4) / Raw(q)),
        eth(IPv6(src=V6, dst=C6) / ICMPv6DestUnreach(code=4) / Raw(qv)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    l3dsr_cases()
    gre_cases()
    nat_cases()
    os.makedirs(a.out, exist_ok=True)
    inp, exp, lines = [], [], []
    for i, (name, op, params, i_b, o_b, expect) in enumerate(cases):
        x, y = Ether(i_b), Ether(o_b)
        x.time = y.time = i + 1
        inp.append(x)
        exp.append(y)
        kv = " ".join("%s=%s" % (k, v) for k, v in params.items())
        lines.append("%s %s %s expect=%s" % (name, op, kv, expect))
    wrpcap(os.path.join(a.out, "lb_input.pcap"), inp)
    wrpcap(os.path.join(a.out, "lb_expected.pcap"), exp)
    with open(os.path.join(a.out, "lb_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

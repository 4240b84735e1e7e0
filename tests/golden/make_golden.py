#!/usr/bin/python3
"""Writes the golden input and expected output of vecplane's router and cross-connect.

    /usr/bin/python3 tests/golden/make_golden.py [--out DIR] [--print]

Router (router.toml): input.pcap is received on in0 and input_out0.pcap on out0 (answers of
hosts the router resolves with ARP/ND); the data plane must write exactly expected_out0.pcap,
expected_out1.pcap and expected_in0.pcap (ICMP errors, ARP replies and NAs go back out of in0;
ARP requests and NS out of the port of the host asked for), and count the drops, the requests
it made and the ARP/ND counters of expected_stats.json. Cross-connect (l2xc.toml):
l2xc_input.pcap on x0, expected_x1.pcap and expected_l2xc_stats.json.

Every case below says by hand what must happen to its frame ("fwd" to a port, an ICMP error, an
ARP reply or NA, a request then a later result, or a drop with its node and reason); the
expected bytes are then built with scapy from first principles (new MACs, TTL-1 with the
checksum recomputed by scapy, ICMP errors as IP()/ICMP()/quote, ARP() and ICMPv6ND_*() messages).
As a second, independent opinion, scripts/vecmodel.py (a reference model that reads router.toml
and keeps neighbour tables) must agree with every hand-written expectation and ARP/ND counter,
or this script fails.

Each expected record has its input's timestamp (vecplane keeps the receive timestamp; a request
has the timestamp of the packet that made the router ask), and the expected files are in input
order. Deterministic: no randomness, fixed timestamps. Addresses: 198.18.0.0/15 and
2001:db8::/32, and the link-local, solicited-node multicast and unspecified addresses Neighbor
Discovery itself uses.
"""

import argparse
import collections
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

import vecmodel  # noqa: E402
from vecmodel import be16, mac_bytes  # noqa: E402
from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6DestUnreach,  # noqa: E402
                       ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
                       ICMPv6NDOptSrcLLAddr, IPOption_NOP, IPOption_RR, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrFragment, Padding, Raw)
from scapy.layers.inet6 import in6_chksum, in6_getnsma, in6_getnsmac  # noqa: E402
from scapy.pton_ntop import inet_ntop, inet_pton  # noqa: E402

# Topology (must match router.toml; the model reads router.toml and cross-checks).
IN0 = "02:00:00:00:00:01"
OUT0 = "02:00:00:00:01:01"
OUT1 = "02:00:00:00:02:01"
HOST = "02:00:00:00:00:aa"   # the sender, neighbour 198.18.0.2 / 2001:db8::2 on in0
NH1 = "02:00:00:00:01:bb"    # 198.18.1.2 / 2001:db8:1::2 on out0
NH2 = "02:00:00:00:02:cc"    # 198.18.2.2 / 2001:db8:2::2 on out1
PORT_MAC = {"in0": IN0, "out0": OUT0, "out1": OUT1}
NEXT_HOP = {"in0": HOST, "out0": NH1, "out1": NH2}
PORT_IP4 = {"in0": "198.18.0.1", "out0": "198.18.1.1", "out1": "198.18.2.1"}
PORT_IP6 = {"in0": "2001:db8::1", "out0": "2001:db8:1::1", "out1": "2001:db8:2::1"}
IN0_IP4, IN0_IP6 = "198.18.0.1", "2001:db8::1"
IN0_LL = "fe80::ff:fe00:1"   # in0's EUI-64 link-local address (02:00:00:00:00:01)
HOST4, HOST6 = "198.18.0.2", "2001:db8::2"
OUT1_MTU = 1000
BCAST = "ff:ff:ff:ff:ff:ff"
# Hosts that are no static neighbour: their MACs are learned from ARP/ND.
H20 = "02:00:00:00:00:20"    # 198.18.0.20 / 2001:db8::20 on in0 (they solicit us)
H21 = "02:00:00:00:00:21"    # 198.18.0.21 on in0 (an unsolicited ARP reply)
H50 = "02:00:00:00:01:50"    # 198.18.1.50 / 2001:db8:1::50 on out0 (answer our requests)
# What becomes of a packet still waiting for a neighbour when the replay ends.
FLUSHED = ("drop", "neighbour-tx", "flushed-at-stop")
# Each router case: what, the port that receives it, the frame, the expectation, and how many
# MACs it teaches the router (for the "learned" counter).
Case = collections.namedtuple("Case", "what rx frame exp learns")

T0 = 1_700_000_000 * 1_000_000_000


def ts_of(i):
    # Distinct, with nanoseconds that a microsecond file could not hold.
    return T0 + i * 1_000_000 + 7 * i + 1


def payload(tag, size):
    """`size` deterministic payload bytes starting with a readable tag."""
    b = (tag.encode() + b"|" + bytes(range(256)) * 8)[:size]
    assert len(b) == size
    return Raw(b)


def eth(dst=IN0, src=HOST, etype=None):
    return Ether(dst=dst, src=src) if etype is None else Ether(dst=dst, src=src, type=etype)


def v4(dst, l4, ttl=64, src=HOST4, **ip):
    return eth() / IP(src=src, dst=dst, ttl=ttl, **ip) / l4


def v6(dst, l4, hlim=64, src=HOST6, **ip):
    return eth() / IPv6(src=src, dst=dst, hlim=hlim, **ip) / l4


def udp(tag, size=32, sport=1024, dport=53):
    return UDP(sport=sport, dport=dport) / payload(tag, size)


def sized_udp4(dst, total, tag, **ip):
    """IPv4/UDP whose IP total length is exactly `total`."""
    return v4(dst, udp(tag, total - 28), **ip)


def sized_udp6(dst, total, tag, **ip):
    """IPv6/UDP whose IP packet (header included) is exactly `total` bytes."""
    return v6(dst, udp(tag, total - 48), **ip)


def corrupt(frame, at, value):
    b = bytearray(bytes(frame))
    b[at] = value
    return bytes(b)


def checksum_edge_ids(dst, want_out=None, want_in=None):
    """The first IP id making the received (or forwarded) header checksum hit an edge value."""
    base = bytearray(bytes(IP(src=HOST4, dst=dst, ttl=64, id=0) / UDP(sport=7, dport=7)))
    for ident in range(1, 65536):
        b = bytearray(base)
        b[4:6] = ident.to_bytes(2, "big")
        b[10:12] = b"\0\0"
        cin = vecmodel.inet_checksum(bytes(b[:20]))
        b[8] -= 1
        cout = vecmodel.inet_checksum(bytes(b[:20]))
        if (want_out is not None and cout == want_out) or (want_in is not None and cin == want_in):
            return ident
    raise AssertionError("no id found")


# ------------------------------------------------------------------------------------------------
# The router cases: (what, frame, expectation)
#   ("fwd", port)                  routed out of `port`, to its neighbour's MAC
#   ("icmp4", type, code, mtu)     an ICMP error from 198.18.0.1 back to the sender via in0
#   ("icmp6", type, code, mtu)     an ICMPv6 error from 2001:db8::1 back to the sender via in0
#   ("drop", node, reason)

def router_cases():
    c = []

    def add(what, frame, exp, rx="in0", learns=0):
        c.append(Case(what, rx, bytes(frame), exp, learns))

    # --- IPv4 forwarded ------------------------------------------------------------------------
    add("udp4 to 198.19.1.1 (/16 -> out0)", v4("198.19.1.1", udp("udp4")), ("fwd", "out0"))
    add("tcp4 syn to 198.19.2.3:80", v4("198.19.2.3", TCP(sport=40000, dport=80, flags="S",
                                                        seq=1000, window=65535)), ("fwd", "out0"))
    add("icmp echo request to 198.19.3.4", v4("198.19.3.4", ICMP(type=8, id=0x77, seq=1)
                                              / payload("ping", 56)), ("fwd", "out0"))
    add("udp4 ttl 2 -> leaves with ttl 1", v4("198.19.1.1", udp("ttl2"), ttl=2), ("fwd", "out0"))
    add("udp4 ttl 255", v4("198.19.1.1", udp("ttl255"), ttl=255), ("fwd", "out0"))
    add("udp4 dscp EF, id 0xffff", v4("198.19.1.5", udp("dscp"), tos=0xB8, id=0xFFFF),
        ("fwd", "out0"))
    ident = checksum_edge_ids("198.19.1.6", want_out=0x0000)
    add(f"udp4 id {ident}: forwarded checksum is 0x0000",
        v4("198.19.1.6", UDP(sport=7, dport=7), id=ident), ("fwd", "out0"))
    ident = checksum_edge_ids("198.19.1.6", want_in=0x0000)
    add(f"udp4 id {ident}: received checksum is 0x0000",
        v4("198.19.1.6", UDP(sport=7, dport=7), id=ident), ("fwd", "out0"))
    add("udp4 with IP options (RR + NOPs), policy forward",
        v4("198.19.4.4", udp("options"),
           options=[IPOption_NOP(), IPOption_RR(routers=["198.18.0.2", "198.18.0.3"])]),
        ("fwd", "out0"))
    add("first fragment (MF, offset 0)", v4("198.19.5.5", udp("frag1", 64), id=4242,
                                            flags="MF"), ("fwd", "out0"))
    add("last fragment (offset 9*8)", v4("198.19.5.5", payload("frag2", 40), id=4242, frag=9,
                                         proto=17), ("fwd", "out0"))
    add("udp4 DF 1400 bytes to out0 (mtu 1500)", sized_udp4("198.19.6.6", 1400, "df1400",
                                                           flags="DF"), ("fwd", "out0"))
    add("udp4 exactly 1500 bytes to out0 (mtu 1500)", sized_udp4("198.19.6.7", 1500, "mtu1500",
                                                                flags="DF"), ("fwd", "out0"))
    add("802.1Q vlan 10 udp4 -> untagged", eth() / Dot1Q(vlan=10) / IP(src=HOST4,
        dst="198.19.7.7") / udp("vlan10"), ("fwd", "out0"))
    add("802.1Q pcp 5 vlan 4094 tcp4", eth() / Dot1Q(prio=5, vlan=4094) / IP(src=HOST4,
        dst="198.19.7.8") / TCP(sport=1, dport=2, flags="A"), ("fwd", "out0"))
    add("QinQ 802.1ad 100 + 802.1Q 200 udp4 -> untagged",
        eth() / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IP(src=HOST4, dst="198.19.7.9")
        / udp("qinq"), ("fwd", "out0"))
    add("udp4 padded to 60 bytes: trailer after total length cut",
        bytes(eth() / IP(src=HOST4, dst="198.19.8.8") / UDP(sport=9, dport=9) / Raw(b"pad!"))
        + b"\xee" * 14, ("fwd", "out0"))
    add("udp4 to 198.19.127.255 (/16 edge -> out0)", v4("198.19.127.255", udp("edge16")),
        ("fwd", "out0"))
    add("udp4 to 198.19.128.0 (/17 -> out1)", v4("198.19.128.0", udp("edge17")),
        ("fwd", "out1"))
    add("tcp4 to 198.19.200.1 (/17 -> out1)", v4("198.19.200.1", TCP(sport=5555, dport=443,
                                                                     flags="PA") / payload("tcp", 100)),
        ("fwd", "out1"))
    add("udp4 to neighbour 198.18.2.2 (host route)", v4("198.18.2.2", udp("nbr")),
        ("fwd", "out1"))
    add("udp4 DF exactly 1000 bytes to out1 (mtu 1000)", sized_udp4("198.19.200.2", 1000,
                                                                    "mtu1000", flags="DF"),
        ("fwd", "out1"))
    add("udp4 with 3 packets of one flow (1/3)", v4("198.19.9.9", udp("flow-a", 10, 3000, 3001)),
        ("fwd", "out0"))
    add("udp4 with 3 packets of one flow (2/3)", v4("198.19.9.9", udp("flow-b", 20, 3000, 3001)),
        ("fwd", "out0"))
    add("udp4 with 3 packets of one flow (3/3)", v4("198.19.9.9", udp("flow-c", 30, 3000, 3001)),
        ("fwd", "out0"))

    # --- IPv4 ICMP errors ----------------------------------------------------------------------
    add("udp4 ttl 1 -> time exceeded", v4("198.19.1.1", udp("ttl1"), ttl=1), ("icmp4", 11, 0, 0))
    add("icmp echo ttl 0 -> time exceeded", v4("198.19.1.2", ICMP(type=8) / payload("ttl0", 24),
                                                ttl=0), ("icmp4", 11, 0, 0))
    add("tcp4 ttl 1 with options -> quote keeps the options",
        v4("198.19.1.3", TCP(sport=1234, dport=22, flags="S"), ttl=1,
           options=[IPOption_RR(routers=["198.18.0.9"])]), ("icmp4", 11, 0, 0))
    add("udp4 ttl 1, 1400 bytes -> quote cut so the error is 576 bytes",
        sized_udp4("198.19.1.4", 1400, "bigttl1", ttl=1), ("icmp4", 11, 0, 0))
    add("udp4 DF 1200 bytes to out1 (mtu 1000) -> frag needed, mtu 1000",
        sized_udp4("198.19.200.3", 1200, "df1200", flags="DF"), ("icmp4", 3, 4, OUT1_MTU))
    add("udp4 DF 1001 bytes to out1 (mtu 1000) -> frag needed",
        sized_udp4("198.19.200.4", 1001, "df1001", flags="DF"), ("icmp4", 3, 4, OUT1_MTU))
    add("vlan 10 udp4 ttl 1 -> time exceeded, sent untagged",
        eth() / Dot1Q(vlan=10) / IP(src=HOST4, dst="198.19.1.1", ttl=1) / udp("vlanttl1"),
        ("icmp4", 11, 0, 0))
    add("ttl 1 ICMP time-exceeded (an error) -> no error about an error",
        v4("198.19.1.1", ICMP(type=11, code=0) / IP(src="198.19.1.1", dst="198.18.0.2")
           / UDP(), ttl=1), ("drop", "ip4-icmp-error", "not-allowed"))
    add("ttl 1 non-first fragment -> no error", v4("198.19.1.1", payload("frag-ttl1", 16),
                                                   ttl=1, frag=100, proto=17),
        ("drop", "ip4-icmp-error", "not-allowed"))

    # --- IPv4 drops ----------------------------------------------------------------------------
    add("udp4 non-DF 1200 bytes to out1 (mtu 1000)", sized_udp4("198.19.200.5", 1200, "nodf"),
        ("drop", "ip4-rewrite", "mtu-exceeded"))
    add("udp4 to 198.18.200.1: no route", v4("198.18.200.1", udp("noroute")),
        ("drop", "ip4-lookup", "no-route"))
    add("udp4 to 198.19.255.7: blackhole route", v4("198.19.255.7", udp("blackhole")),
        ("drop", "ip4-lookup", "blackhole"))
    add("udp4 to 198.18.0.1 (in0's address)", v4("198.18.0.1", udp("tous")),
        ("drop", "ip4-lookup", "to-us"))
    add("udp4 to 198.18.1.1 (out0's address)", v4("198.18.1.1", udp("tous1")),
        ("drop", "ip4-lookup", "to-us"))
    add("udp4 to 198.18.1.77: connected, never answered -> ARP request, waits, flushed",
        v4("198.18.1.77", udp("unres")), ("resolve", "out0", "198.18.1.77", FLUSHED))
    good = bytes(v4("198.19.1.1", udp("badsum")))
    add("udp4 with a wrong header checksum", corrupt(good, 14 + 10, good[24] ^ 0x5A),
        ("drop", "ip4-input", "bad-checksum"))
    add("IHL 4", corrupt(good, 14, 0x44), ("drop", "ip4-input", "bad-ihl"))
    add("IHL 15 (60 bytes) but total length 40", corrupt(bytes(sized_udp4("198.19.1.1", 40, "ihl15")), 14,
                                              0x4F), ("drop", "ip4-input", "bad-ihl"))
    b = bytearray(good)
    b[16:18] = (200).to_bytes(2, "big")
    add("total length 200 in a 60-byte packet", b, ("drop", "ip4-input", "bad-length"))
    add("version 6 in an IPv4 ethertype", corrupt(good, 14, 0x65),
        ("drop", "ip4-input", "bad-version"))
    add("IPv4 ethertype, 10 bytes of header", eth(etype=0x0800) / Raw(good[14:24]),
        ("drop", "ip4-input", "too-short"))

    # --- Ethernet drops ------------------------------------------------------------------------
    add("runt: 10 bytes", good[:10], ("drop", "ethernet-input", "runt"))
    add("runt: 13 bytes", good[:13], ("drop", "ethernet-input", "runt"))
    add("unknown ethertype 0x88b5", eth(etype=0x88B5) / payload("local-exp", 46),
        ("drop", "ethernet-input", "unknown-ethertype"))
    add("802.3 length field (LLC)", eth(etype=46) / payload("llc", 46),
        ("drop", "ethernet-input", "unknown-ethertype"))
    add("ARP request (broadcast) for 198.18.0.1 -> ARP reply", Ether(dst=BCAST, src=HOST)
        / ARP(op=1, hwsrc=HOST, psrc=HOST4, hwdst="00:00:00:00:00:00", pdst=IN0_IP4),
        ("arp-reply",), learns=1)
    add("unicast to another MAC", Ether(dst="02:00:00:00:99:99", src=HOST)
        / IP(src=HOST4, dst="198.19.1.1") / udp("notforus"),
        ("drop", "ethernet-input", "not-for-us"))
    add("802.1Q tag cut short", eth(etype=0x8100) / Raw(b"\x00\x0a"),
        ("drop", "ethernet-input", "vlan-truncated"))
    add("three VLAN tags", eth() / Dot1AD(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3)
        / IP(src=HOST4, dst="198.19.1.1") / udp("3tags"),
        ("drop", "ethernet-input", "too-many-vlan-tags"))

    # --- IPv6 forwarded ------------------------------------------------------------------------
    add("udp6 to 2001:db8:100::5 (-> out0)", v6("2001:db8:100::5", udp("udp6")), ("fwd", "out0"))
    add("tcp6 to 2001:db8:200::5 (-> out1)", v6("2001:db8:200::5", TCP(sport=2000, dport=80,
                                                                     flags="S")), ("fwd", "out1"))
    add("udp6 with a destination-options header", v6("2001:db8:100::6", IPv6ExtHdrDestOpt()
                                                      / udp("destopt")), ("fwd", "out0"))
    add("ipv6 fragment header", v6("2001:db8:100::7", IPv6ExtHdrFragment(id=99, m=1)
                                   / udp("frag6", 64)), ("fwd", "out0"))
    add("udp6 hop limit 2 -> leaves with 1", v6("2001:db8:100::8", udp("hlim2"), hlim=2),
        ("fwd", "out0"))
    add("udp6 traffic class 0xb8, flow label 0x12345",
        v6("2001:db8:100::9", udp("tcfl"), tc=0xB8, fl=0x12345), ("fwd", "out0"))
    add("802.1Q vlan 20 udp6 -> untagged", eth() / Dot1Q(vlan=20) / IPv6(src=HOST6,
        dst="2001:db8:100::a") / udp("vlan6"), ("fwd", "out0"))
    add("icmpv6 echo request", v6("2001:db8:100::b", ICMPv6EchoRequest(id=5, seq=6,
                                                                      data=b"ping6")), ("fwd", "out0"))
    add("udp6 to neighbour 2001:db8:2::2", v6("2001:db8:2::2", udp("nbr6")), ("fwd", "out1"))
    add("udp6 exactly 1000 bytes to out1 (mtu 1000)", sized_udp6("2001:db8:200::c", 1000,
                                                                 "mtu6"), ("fwd", "out1"))

    # --- IPv6 ICMP errors ----------------------------------------------------------------------
    add("udp6 hop limit 1 -> time exceeded", v6("2001:db8:100::5", udp("hlim1"), hlim=1),
        ("icmp6", 3, 0, 0))
    add("icmpv6 echo hop limit 0 -> time exceeded", v6("2001:db8:100::5",
                                                       ICMPv6EchoRequest(data=b"x" * 8), hlim=0),
        ("icmp6", 3, 0, 0))
    add("udp6 1100 bytes to out1 (mtu 1000) -> packet too big, mtu 1000",
        sized_udp6("2001:db8:200::d", 1100, "ptb"), ("icmp6", 2, 0, OUT1_MTU))
    add("udp6 hop limit 1, 1400 bytes -> quote cut so the error is 1280 bytes",
        sized_udp6("2001:db8:100::e", 1400, "big6", hlim=1), ("icmp6", 3, 0, 0))
    add("hop limit 1 ICMPv6 error -> no error about an error",
        v6("2001:db8:100::5", ICMPv6DestUnreach(code=3) / payload("inner", 48), hlim=1),
        ("drop", "ip6-icmp-error", "not-allowed"))

    # --- IPv6 drops ----------------------------------------------------------------------------
    add("udp6 to 2001:db8:9999::1: no route", v6("2001:db8:9999::1", udp("noroute6")),
        ("drop", "ip6-lookup", "no-route"))
    add("udp6 to 2001:db8:dead::1: blackhole", v6("2001:db8:dead::1", udp("bh6")),
        ("drop", "ip6-lookup", "blackhole"))
    add("udp6 to 2001:db8::1 (in0's address)", v6("2001:db8::1", udp("tous6")),
        ("drop", "ip6-lookup", "to-us"))
    add("udp6 to 2001:db8:1::77: connected, never answered -> NS, waits, flushed",
        v6("2001:db8:1::77", udp("unres6")), ("resolve", "out0", "2001:db8:1::77", FLUSHED))
    good6 = bytes(v6("2001:db8:100::5", udp("badlen6")))
    b = bytearray(good6)
    b[18:20] = (500).to_bytes(2, "big")
    add("ipv6 payload length 500 in a short packet", b, ("drop", "ip6-input", "bad-length"))
    add("version 4 in an IPv6 ethertype", corrupt(good6, 14, 0x40),
        ("drop", "ip6-input", "bad-version"))
    add("IPv6 ethertype, 20 bytes of header", eth(etype=0x86DD) / Raw(good6[14:34]),
        ("drop", "ip6-input", "too-short"))
    # Addresses ip6_rcv_core and RFC 4291 refuse on a wire, and what a router does not forward.
    for what, src, dst, reason in [
        ("multicast source", "ff0e::1", "2001:db8:100::5", "multicast-source"),
        ("unspecified source", "::", "2001:db8:100::5", "unspecified-source"),
        ("loopback source", "::1", "2001:db8:100::5", "loopback-address"),
        ("loopback destination", HOST6, "::1", "loopback-address"),
        ("v4-mapped source", "::ffff:198.18.1.2", "2001:db8:100::5", "v4-mapped-address"),
        ("v4-mapped destination", HOST6, "::ffff:198.18.2.2", "v4-mapped-address"),
        ("unspecified destination", HOST6, "::", "unspecified-destination"),
        ("multicast scope 0", HOST6, "ff00::5", "reserved-multicast-scope"),
        ("interface-local multicast", HOST6, "ff01::5", "interface-local-multicast"),
        ("global multicast", HOST6, "ff0e::5", "multicast-destination"),
        ("link-local destination", HOST6, "fe80::5", "link-local"),
    ]:
        add(f"udp6 with a {what} ({src} -> {dst})", v6(dst, udp("addr6"), src=src),
            ("drop", "ip6-input", reason))
    neighbour_cases(add)
    return c


def arp(op=1, hwsrc=HOST, psrc=HOST4, pdst=IN0_IP4, dst=BCAST, src=None, **kw):
    return Ether(dst=dst, src=src or hwsrc) / ARP(op=op, hwsrc=hwsrc, psrc=psrc,
                                                hwdst="00:00:00:00:00:00", pdst=pdst, **kw)


def ns(tgt, src=HOST6, dst=None, lladdr=HOST, hlim=255, eth_src=HOST, eth_dst=None):
    """A Neighbor Solicitation from `src` for `tgt` (to its solicited-node group by default)."""
    dst = dst or in6_getnsma(inet_pton(socket.AF_INET6, tgt))
    if not isinstance(dst, str):
        dst = inet_ntop(socket.AF_INET6, dst)
    eth_dst = eth_dst or in6_getnsmac(inet_pton(socket.AF_INET6, dst))
    p = IPv6(src=src, dst=dst, hlim=hlim) / ICMPv6ND_NS(tgt=tgt)
    if lladdr is not None:
        p = p / ICMPv6NDOptSrcLLAddr(lladdr=lladdr)
    return Ether(dst=eth_dst, src=eth_src) / p


def na(tgt, lladdr, dst, S=1, O=1, src=None, eth_src=None, eth_dst=OUT0):
    """A Neighbor Advertisement for `tgt` (from `tgt` itself by default) to `dst`."""
    return Ether(dst=eth_dst, src=eth_src or lladdr) / IPv6(src=src or tgt, dst=dst, hlim=255) \
        / ICMPv6ND_NA(R=0, S=S, O=O, tgt=tgt) / ICMPv6NDOptDstLLAddr(lladdr=lladdr)


def neighbour_cases(add):
    """ARP (RFC 826) and Neighbor Discovery (RFC 4861): answers for the router's addresses,
    learning, drops, and resolution of hosts on a connected prefix that are no static
    neighbour. The router receives all of in0's frames in one vector before out0's (the ports
    are polled in config order), so a host on out0 answers after every in0 packet of the
    golden has been looked up."""
    # --- ARP on in0 --------------------------------------------------------------------------
    add("ARP request for 198.18.0.1 unicast to in0's MAC from new host 198.18.0.20 -> reply, "
        "learned (stale)", arp(hwsrc=H20, psrc="198.18.0.20", dst=IN0), ("arp-reply",), learns=1)
    add("udp4 to 198.18.0.20: learned from its ARP request -> sent to its MAC",
        v4("198.18.0.20", udp("arp-learned")), ("fwd-via", "in0", H20))
    add("ARP reply to 198.18.0.1 from 198.18.0.21 (unsolicited) -> learned (reachable)",
        arp(op=2, hwsrc=H21, psrc="198.18.0.21", dst=IN0), ("drop", "arp-input", "learned"),
        learns=1)
    add("udp4 to 198.18.0.21 -> sent to the MAC its ARP reply gave",
        v4("198.18.0.21", udp("arp-reply-learned")), ("fwd-via", "in0", H21))
    add("ARP request for 198.18.0.99 (not ours) from a new host",
        arp(hwsrc="02:00:00:00:00:99", psrc="198.18.0.98", pdst="198.18.0.99"),
        ("drop", "arp-input", "not-for-us"))
    add("ARP request for 198.18.0.99 from 198.18.0.2 (known): updates it, no answer",
        arp(pdst="198.18.0.99"), ("drop", "arp-input", "learned"))
    add("ARP operation 3 (RARP request)", arp(op=3), ("drop", "arp-input", "unsupported-op"))
    add("ARP for IPv6 (protocol type 0x86dd)", arp(ptype=0x86DD),
        ("drop", "arp-input", "malformed"))
    add("ARP cut after 20 bytes", bytes(arp())[:34], ("drop", "arp-input", "malformed"))
    add("ARP sender MAC is multicast", arp(hwsrc="03:00:00:00:00:01", src=HOST),
        ("drop", "arp-input", "bad-sender"))
    add("ARP request from 198.18.0.1 (our own address)", arp(psrc=IN0_IP4),
        ("drop", "arp-input", "address-conflict"))
    add("ARP request for 198.18.1.1 (out0's address) received on in0",
        arp(pdst="198.18.1.1", hwsrc="02:00:00:00:00:97", psrc="198.18.0.97"),
        ("drop", "arp-input", "not-for-us"))
    # --- ND on in0 ---------------------------------------------------------------------------
    add("NS for 2001:db8::1 from 2001:db8::2 -> solicited NA",
        ns(IN0_IP6), ("na",), learns=1)
    add("NS for in0's link-local fe80::ff:fe00:1 from fe80::ff:fe00:aa -> NA from it",
        ns(IN0_LL, src="fe80::ff:fe00:aa"), ("na",), learns=1)
    add("DAD NS (from ::) for 2001:db8::1 -> NA to all nodes", ns(IN0_IP6, src="::", lladdr=None),
        ("na",))
    add("NS unicast to 2001:db8::1, no source link-layer option -> NA to the Ethernet source",
        ns(IN0_IP6, dst=IN0_IP6, eth_dst=IN0, lladdr=None), ("na",))
    add("NS for 2001:db8::1 from new host 2001:db8::20 -> NA, learned (stale)",
        ns(IN0_IP6, src="2001:db8::20", lladdr=H20, eth_src=H20), ("na",), learns=1)
    add("udp6 to 2001:db8::20: learned from its NS -> sent to its MAC",
        v6("2001:db8::20", udp("ns-learned")), ("fwd-via", "in0", H20))
    add("NS with hop limit 64", ns(IN0_IP6, hlim=64), ("drop", "ip6-nd", "bad-hop-limit"))
    bad = bytearray(bytes(ns(IN0_IP6)))
    bad[14 + 40 + 2] ^= 0xFF
    add("NS with a wrong ICMPv6 checksum", bad, ("drop", "ip6-nd", "bad-checksum"))
    add("NS for 2001:db8::77 (not ours)", ns("2001:db8::77"), ("drop", "ip6-nd", "not-for-us"))
    add("NS from 2001:db8::1 (our own address)", ns(IN0_IP6, src=IN0_IP6),
        ("drop", "ip6-nd", "address-conflict"))
    opt0 = bytearray(bytes(ns(IN0_IP6)))
    opt0[14 + 40 + 25] = 0   # option length 0 (RFC 4861 4.6: invalid); checksum fixed below
    add("NS with an option of length 0", fix_icmp6(opt0), ("drop", "ip6-nd", "malformed"))
    add("NA for unknown 2001:db8::30 (not solicited by us)",
        na("2001:db8::30", "02:00:00:00:00:30", IN0_IP6, S=0, eth_dst=IN0),
        ("drop", "ip6-nd", "unsolicited"))
    # --- Resolution: requests, waiting, queue limits --------------------------------------
    for k in range(5):
        exp = ("resolve", "out0", "198.18.1.78", FLUSHED) if k == 0 else \
            ("queued", FLUSHED) if k < 4 else ("drop", "ip4-arp", "queue-full")
        add(f"udp4 {k + 1}/5 to 198.18.1.78 (never answered): 4 wait at most",
            v4("198.18.1.78", udp(f"q{k}")), exp)
    add("udp4 ttl 1 from 198.18.0.9 (no static neighbour) -> the ICMP error waits for its ARP",
        v4("198.19.1.1", udp("ttl1-dyn"), ttl=1, src="198.18.0.9"),
        ("resolve", "in0", "198.18.0.9", FLUSHED))
    # --- Resolution from an empty table: the host answers on out0 --------------------------
    add("udp4 to 198.18.1.50 (unknown) -> ARP request; sent once 198.18.1.50 answers",
        v4("198.18.1.50", udp("res1")), ("resolve", "out0", "198.18.1.50",
                                         ("fwd-via", "out0", H50)))
    add("ARP reply from 198.18.1.50 to 198.18.1.1 on out0 -> learned, releases what waits",
        arp(op=2, hwsrc=H50, psrc="198.18.1.50", pdst="198.18.1.1", dst=OUT0),
        ("drop", "arp-input", "learned"), rx="out0", learns=1)
    add("udp4 to 198.18.1.50 again -> sent to its MAC", v4("198.18.1.50", udp("res2")),
        ("queued", ("fwd-via", "out0", H50)))
    add("udp4 DF 1501 bytes to 198.18.1.50 -> waits, then frag needed (out0 mtu 1500)",
        sized_udp4("198.18.1.50", 1501, "res-big", flags="DF"),
        ("queued", ("icmp4", 3, 4, 1500)))
    add("udp6 to 2001:db8:1::50 (unknown) -> NS; sent once 2001:db8:1::50 answers",
        v6("2001:db8:1::50", udp("res6-1")), ("resolve", "out0", "2001:db8:1::50",
                                              ("fwd-via", "out0", H50)))
    add("NA (solicited, override) from 2001:db8:1::50 to 2001:db8:1::1 on out0 -> learned",
        na("2001:db8:1::50", H50, "2001:db8:1::1"), ("drop", "ip6-nd", "learned"), rx="out0",
        learns=1)
    add("udp6 to 2001:db8:1::50 again -> sent to its MAC", v6("2001:db8:1::50", udp("res6-2")),
        ("queued", ("fwd-via", "out0", H50)))
    add("NA for 2001:db8:1::50 from 2001:db8:1::51 to a multicast group with S set",
        na("2001:db8:1::50", H50, "ff02::1", src="2001:db8:1::51", eth_dst="33:33:00:00:00:01"),
        ("drop", "ip6-nd", "malformed"), rx="out0")


def fix_icmp6(frame):
    """Recompute the ICMPv6 checksum of an untagged frame with scapy's in6_chksum."""
    b = bytearray(frame)
    b[56:58] = b"\0\0"
    b[56:58] = in6_chksum(58, IPv6(bytes(b[14:54])), bytes(b[54:])).to_bytes(2, "big")
    return bytes(b)


def l2xc_cases():
    """Cross-connect: every frame of at least 14 bytes leaves on x1 (dst rewritten, src = x1)."""
    x0 = "02:00:00:00:0a:01"
    c = []

    def add(what, frame, exp):
        c.append(Case(what, "x0", bytes(frame), exp, 0))
    add("udp4 to x0's MAC", Ether(dst=x0, src=HOST) / IP(src=HOST4, dst="198.19.0.1")
        / udp("xc1"), ("xc",))
    add("frame to another MAC (no MAC filter on a cross-connect)",
        Ether(dst="02:00:00:00:77:77", src=HOST) / IP(src=HOST4, dst="198.19.0.2") / udp("xc2"),
        ("xc",))
    add("broadcast ARP", Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST)
        / ARP(hwsrc=HOST, psrc=HOST4, pdst="198.18.0.9"), ("xc",))
    add("QinQ with a non-IP payload (not parsed)", Ether(dst=x0, src=HOST) / Dot1AD(vlan=5)
        / Dot1Q(vlan=6) / Raw(b"\x45" + bytes(40)), ("xc",))
    add("ipv4 ttl 1 (no TTL processing on L2)", Ether(dst=x0, src=HOST)
        / IP(src=HOST4, dst="198.19.0.3", ttl=1) / udp("xc-ttl1"), ("xc",))
    add("exactly 14 bytes", Ether(dst=x0, src=HOST, type=0x88B5), ("xc",))
    add("1514-byte frame", Ether(dst=x0, src=HOST) / IPv6(src=HOST6, dst="2001:db8::9")
        / udp("xc-big", 1452), ("xc",))
    add("runt: 13 bytes", bytes(Ether(dst=x0, src=HOST))[:13],
        ("drop", "ethernet-input", "runt"))
    return c


# ------------------------------------------------------------------------------------------------

def l3_offset(frame):
    off, t = 14, be16(frame, 12)
    while t in (0x8100, 0x88A8):
        t, off = be16(frame, off + 2), off + 4
    return off


def routed(frame, port, mac):
    """The frame after routing out of `port` to `mac`: new MACs, no tags, TTL / hop limit - 1."""
    l3 = l3_offset(frame)
    pkt = frame[l3:]
    l2 = mac_bytes(mac) + mac_bytes(PORT_MAC[port])
    if be16(frame, l3 - 2) == 0x0800:
        total = be16(pkt, 2)
        return l2 + b"\x08\x00" + vecmodel.routed_ip4(pkt[:total])
    pkt = pkt[:40 + be16(pkt, 4)]
    p = IPv6(pkt)
    p.hlim -= 1
    out = bytes(p)
    assert len(out) == len(pkt) and out[:7] == pkt[:7] and out[8:] == pkt[8:], "scapy v6"
    return l2 + b"\x86\xdd" + out


def icmp_error(frame, exp):
    """The ICMP / ICMPv6 error about `frame` that in0 sends back to the sender (HOST)."""
    pkt = frame[l3_offset(frame):]
    l2 = mac_bytes(HOST) + mac_bytes(IN0)
    if exp[0] == "icmp4":
        return l2 + b"\x08\x00" + vecmodel.icmp4_error_packet(IN0_IP4, pkt, exp[1], exp[2],
                                                                exp[3])
    return l2 + b"\x86\xdd" + vecmodel.icmp6_error_packet(IN0_IP6, pkt, exp[1], exp[2], exp[3])


def arp_reply(frame, rx):
    """RFC 826: the reply to an ARP request for one of `rx`'s addresses, from `rx`'s MAC, to
    the requester, padded to 60 bytes."""
    q = Ether(frame)[ARP]
    return bytes(Ether(dst=q.hwsrc, src=PORT_MAC[rx])
                 / ARP(op=2, hwsrc=PORT_MAC[rx], psrc=q.pdst, hwdst=q.hwsrc, pdst=q.psrc)
                 / Padding(load=bytes(18)))


def nd_advert(frame, rx):
    """RFC 4861 7.2.4: the advertisement answering a solicitation for one of `rx`'s addresses:
    router and override flags, solicited unless the solicitation came from :: (duplicate
    address detection: then to all nodes), with `rx`'s MAC as target link-layer address."""
    e = Ether(frame)
    q = e[ICMPv6ND_NS]
    if e[IPv6].src == "::":
        dst, eth_dst, solicited = "ff02::1", "33:33:00:00:00:01", 0
    else:
        dst, solicited = e[IPv6].src, 1
        eth_dst = q[ICMPv6NDOptSrcLLAddr].lladdr if ICMPv6NDOptSrcLLAddr in q else e.src
    return bytes(Ether(dst=eth_dst, src=PORT_MAC[rx])
                 / IPv6(src=q.tgt, dst=dst, hlim=255)
                 / ICMPv6ND_NA(R=1, S=solicited, O=1, tgt=q.tgt)
                 / ICMPv6NDOptDstLLAddr(lladdr=PORT_MAC[rx]))


def request(port, target):
    """What `port` sends to resolve `target`: a broadcast ARP request from its MAC and address
    (target MAC zero, padded to 60 bytes), or a Neighbor Solicitation to the target's
    solicited-node group from its address on the target's prefix, with its MAC as source
    link-layer address."""
    if ":" not in target:
        return bytes(Ether(dst=BCAST, src=PORT_MAC[port])
                     / ARP(op=1, hwsrc=PORT_MAC[port], psrc=PORT_IP4[port],
                           hwdst="00:00:00:00:00:00", pdst=target)
                     / Padding(load=bytes(18)))
    group = inet_ntop(socket.AF_INET6, in6_getnsma(inet_pton(socket.AF_INET6, target)))
    return bytes(Ether(dst=in6_getnsmac(inet_pton(socket.AF_INET6, group)), src=PORT_MAC[port])
                 / IPv6(src=PORT_IP6[port], dst=group, hlim=255)
                 / ICMPv6ND_NS(tgt=target)
                 / ICMPv6NDOptSrcLLAddr(lladdr=PORT_MAC[port]))


def final(frame, exp):
    """(port, bytes) of a packet's last result, or ("drop", node, reason)."""
    if exp[0] == "drop":
        return exp
    if exp[0] == "fwd":
        return exp[1], routed(frame, exp[1], NEXT_HOP[exp[1]])
    if exp[0] == "fwd-via":
        return exp[1], routed(frame, exp[1], exp[2])
    if exp[0] in ("icmp4", "icmp6"):
        return "in0", icmp_error(frame, exp)
    raise ValueError(exp)


def expected(case):
    """What the hand-written expectation of `case` means: (frames sent as [(port, bytes)] in
    the order they leave, drop (node, reason) or None)."""
    frame, exp = case.frame, case.exp
    if exp[0] == "xc":
        return [("x1", mac_bytes("02:00:00:00:0b:ee") + mac_bytes("02:00:00:00:0b:01")
                 + frame[12:])], None
    if exp[0] == "arp-reply":
        return [(case.rx, arp_reply(frame, case.rx))], None
    if exp[0] == "na":
        return [(case.rx, nd_advert(frame, case.rx))], None
    sent = []
    if exp[0] == "resolve":
        sent.append((exp[1], request(exp[1], exp[2])))
        exp = exp[3]
    elif exp[0] == "queued":
        exp = exp[1]
    r = final(frame, exp)
    if r[0] == "drop":
        return sent, r[1:]
    return sent + [r], None


def build(cases, config_path, out_ports, prefix, outdir, show):
    """Write the inputs (one pcap per receiving port) and the expected outputs of `cases`, after
    checking every expectation against the reference model; returns the expected stats."""
    cfg = vecmodel.Config(config_path)
    inputs = collections.defaultdict(list)
    outputs = {p: [] for p in out_ports}
    drops = collections.Counter()
    counters = collections.Counter()
    for i, case in enumerate(cases):
        ts = ts_of(i)
        inputs[case.rx].append((ts, case.frame))
        sent, dropped = expected(case)
        for port, out in sent:
            outputs[port].append((ts, out))
        if dropped:
            drops[dropped] += 1
        kind = case.exp[0]
        counters["learned"] += case.learns
        counters["arp_replies_sent"] += kind == "arp-reply"
        counters["na_sent"] += kind == "na"
        if kind == "resolve":
            counters["ns_sent" if ":" in case.exp[2] else "arp_requests_sent"] += 1
        if kind in ("resolve", "queued"):
            counters["queued"] += 1
            if dropped is None:
                counters["released"] += 1
        if dropped in (("ip4-arp", "queue-full"), ("ip6-discover", "queue-full"),
                       ("neighbour-tx", "flushed-at-stop")):
            counters["queue_drops"] += 1
        if show:
            print(f"{i:3} {ts} {case.rx} {case.what}: {case.exp}")
    # The reference model, fed the same files, must agree with every case.
    model = vecmodel.Model(cfg)
    got = model.replay(inputs)
    for i, case in enumerate(cases):
        sent, dropped = expected(case)
        rec = got[ts_of(i)]
        want_fate = [("drop",) + dropped] if dropped else [("tx",) + sent[-1]]
        model_fate = [f[:3] for f in rec.fate]
        want_requests = [("tx",) + s for s in (sent if dropped else sent[:-1])]
        model_requests = [r[:3] for r in rec.requests]
        if model_fate != want_fate or model_requests != want_requests:
            sys.exit(f"case {i} ({case.what}): the hand-written expectation {case.exp} gives "
                     f"{summarise(want_fate + want_requests)}, the reference model "
                     f"{summarise(model_fate + model_requests)}")
    originated = counters["arp_requests_sent"] + counters["ns_sent"]
    neighbours = {k: counters[k] for k in vecmodel.NEIGHBOUR_COUNTERS}
    neighbours["originated"] = originated
    if {k: model.stats[k] for k in neighbours} != neighbours:
        sys.exit(f"neighbour counters: expected {neighbours}, the reference model "
                 f"{ {k: model.stats[k] for k in neighbours} }")
    for port, records in inputs.items():
        name = "input.pcap" if port == cases[0].rx else f"input_{port}.pcap"
        vecmodel.write_pcap(os.path.join(outdir, prefix + name), records)
    for p in out_ports:
        vecmodel.write_pcap(os.path.join(outdir, f"expected_{p}.pcap"), outputs[p])
    stats = {
        "comment": "Drop counts per (node, reason) and packets per port that vecplane must "
                   "report for this input; every reason not listed must be 0. originated: "
                   "ARP requests and Neighbor Solicitations vecplane made (rx + originated = "
                   "tx + drops).",
        "rx_packets": len(cases),
        "tx_packets": {p: len(outputs[p]) for p in out_ports},
        "drops_total": sum(drops.values()),
        "originated": originated,
        "errors": {},
    }
    if any(neighbours.values()):
        stats["neighbours"] = neighbours
    for (node, reason), n in sorted(drops.items()):
        stats["errors"].setdefault(node, {})[reason] = n
    tx_total = sum(len(v) for v in outputs.values())
    assert stats["rx_packets"] + originated == tx_total + stats["drops_total"]
    return stats


def summarise(results):
    out = []
    for r in results:
        if r[0] == "tx":
            try:
                out.append(f"{r[1]}: {Ether(r[2]).summary()}")
            except Exception:  # noqa: BLE001
                out.append(f"{r[1]}: {r[2].hex()}")
        else:
            out.append("/".join(r[1:]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=HERE, help="directory to write into (default: beside me)")
    ap.add_argument("--print", action="store_true", help="list the cases")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    stats = build(router_cases(), os.path.join(HERE, "router.toml"), ["out0", "out1", "in0"],
                  "", args.out, args.print)
    with open(os.path.join(args.out, "expected_stats.json"), "w") as f:
        json.dump(stats, f, indent=2, sort_keys=True)
        f.write("\n")
    xstats = build(l2xc_cases(), os.path.join(HERE, "l2xc.toml"), ["x1"], "l2xc_", args.out,
                   args.print)
    with open(os.path.join(args.out, "expected_l2xc_stats.json"), "w") as f:
        json.dump(xstats, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"router: {stats['rx_packets']} frames in, {stats['tx_packets']} out "
          f"({stats['originated']} made by the router), {stats['drops_total']} dropped; "
          f"l2xc: {xstats['rx_packets']} in, {xstats['tx_packets']} out, "
          f"{xstats['drops_total']} dropped -> {args.out}")


if __name__ == "__main__":
    main()

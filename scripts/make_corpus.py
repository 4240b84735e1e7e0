#!/usr/bin/python3
"""Writes a seeded corpus of frames nobody on the team wrote, for a pcap-to-pcap replay.

    /usr/bin/python3 scripts/make_corpus.py --seed 1 --count 20000 --out DIR

DIR/corpus_in0.pcap (most frames, nanosecond little-endian), DIR/corpus_out0.pcap (about 8%) and
DIR/corpus_out1.pcap (about 12%, microsecond big-endian: the reader's other formats) are received
on ports in0, out0 and out1 of tests/golden/replay.toml. Every frame has a distinct timestamp, so
check_replay.py can pair each output with its input.

The mix: well-formed IPv4 (UDP/TCP/ICMP, options, fragments, DF, sizes around the MTUs, TTL 0..3)
and IPv6 (extension headers, ICMPv6 errors, hop limit 0..3), 0-2 VLAN tags; scapy `fuzz()` of
Ether/Dot1Q/IP/UDP/TCP/ICMP/IPv6 layers (half with the IPv4 header checksum repaired so they get
past ip4-input); mutations of valid frames (bit flips, byte overwrites, truncation, growth); random
bytes of random lengths 0..2000; random ethertypes, ARP, LLC, tag stacks; ARP and Neighbor
Discovery (answers from hosts the router resolves, requests and solicitations for its addresses,
duplicate address detection, and malformed, misdirected or conflicting ones); a few frames larger
than a buffer. Addresses: any IPv4 address outside 198.18.0.0/15 and any IPv6 address outside
2001:db8::/32 (in IP headers, ICMP quotes, routing headers, IPv4 source-route/record-route options
and ARP) is rewritten into those ranges, keeping a valid IPv4 header checksum valid; hosts of the
router's connected subnets are mapped onto a small set (HOSTS4, HOSTS6), so the router resolves a
bounded number of neighbours whatever the count (ND frames also use the link-local, solicited-node
multicast and unspecified addresses ND requires). Deterministic for a given seed and count.
"""

import argparse
import ipaddress
import os
import random
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vecmodel  # noqa: E402
from vecmodel import be16  # noqa: E402
from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6DestUnreach,  # noqa: E402
                       ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS,
                       ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig,
                       ICMPv6ParamProblem, ICMPv6TimeExceeded, IPOption_NOP, IPOption_RR,
                       IPOption_Timestamp, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Raw, fuzz)
from scapy.layers.inet6 import in6_getnsma, in6_getnsmac  # noqa: E402
from scapy.pton_ntop import inet_ntop, inet_pton  # noqa: E402

T0 = 1_700_000_000 * 1_000_000_000
# The receiving ports of replay.toml: their MAC, the static neighbour that sends most frames,
# the subnet index (198.18.N.0/24, 2001:db8:N::/64) and the port's own addresses.
PORT_MAC = {"in0": "02:00:00:00:00:01", "out0": "02:00:00:00:01:01",
            "out1": "02:00:00:00:02:01"}
PEER_MAC = {"in0": "02:00:00:00:00:aa", "out0": "02:00:00:00:01:b2",
            "out1": "02:00:00:00:02:cc"}
SUBNET = {"in0": 0, "out0": 1, "out1": 2}
RX_SHARE = [("in0", 0.80), ("out0", 0.08), ("out1", 0.12)]

# Hosts of the connected subnets (198.18.N.0/24 and 2001:db8:N::/64, N = 0..3: in0, out0, out1,
# dark) by last byte: the router (1), static neighbours (2, 3 on out0), and hosts that are no
# static neighbour, which the router resolves with ARP/ND: some answer when asked (ANSWER*,
# from HOST_MAC), the others never do. Every other host address of these subnets is mapped onto
# this set (`fit4`, `fit6`), so however many frames a replay has, the router asks for at most a
# dozen hosts: far below its request limiter's burst (100), so what it asks is deterministic.
HOSTS4 = {0: (1, 2, 5, 6, 7), 1: (1, 2, 3, 0x77, 0x78), 2: (1, 2, 9, 10), 3: (1, 2, 9)}
HOSTS6 = {0: (1, 2, 5, 7), 1: (1, 2, 3, 0x77, 0x78), 2: (1, 2, 9, 0x10)}
# Who answers, from which point of the corpus on (a fraction of it): before that, packets to
# them wait (4 at most, the others are refused) after one request; the first answer releases
# them. The other hosts never answer: what waits for them is flushed when the replay ends.
ANSWER4 = {"in0": ((5, 0.3), (6, 0.6)), "out0": ((0x77, 0.3),), "out1": ((9, 0.45),)}
ANSWER6 = {"in0": ((5, 0.3),), "out0": ((0x77, 0.45),), "out1": ((9, 0.3),)}
# ARP senders on a connected subnet other frames (misc ARP, random bytes) may use: the router's
# and static neighbours' addresses only, so only the answers above teach the router a host.
ARP_SENDERS4 = {0: (1, 2), 1: (1, 2, 3), 2: (1, 2), 3: (1, 2)}


def host_mac(subnet, host):
    return f"02:00:00:0a:{subnet:02x}:{host:02x}"


def host4(subnet, host):
    return f"198.18.{subnet}.{host}"


def host6(subnet, host):
    return f"2001:db8:{subnet:x}::{host:x}" if subnet else f"2001:db8::{host:x}"


def link_local(mac):
    """The EUI-64 link-local address of a MAC (RFC 4291 appendix A)."""
    b = vecmodel.mac_bytes(mac)
    return str(ipaddress.IPv6Address(vecmodel.link_local6(b)))


def icmp_fixed_time():
    """An ICMP layer whose timestamp fields (types 13/14 once fuzzed) do not default to the time
    of day, so fuzzed frames are reproducible."""
    return ICMP(ts_ori=0, ts_rx=0, ts_tx=0)


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.phase = 0.0   # how far into the corpus (0..1): when hosts start answering
        # scapy's volatile fields (fuzz()) draw from the global generator.
        random.seed(seed ^ 0x5CA9)

    # --- addresses ------------------------------------------------------------------------------

    def v4(self):
        r = self.r.random()
        if r < 0.55:
            return self.r.choice(["198.19.1.1", "198.19.2.3", "198.19.127.255", "198.19.128.0",
                                  "198.19.200.1", "198.19.70.1", "198.19.255.9", "198.18.0.1",
                                  "198.18.1.1", "198.18.1.77", "198.18.0.2", "198.18.2.2",
                                  "198.18.3.2", "198.18.200.1", "198.18.2.1", "198.18.0.5",
                                  "198.18.0.7", "198.18.1.78", "198.18.2.9", "198.18.2.10",
                                  "198.18.3.9"])
        if r < 0.85:
            return f"198.19.{self.r.randrange(256)}.{self.r.randrange(256)}"
        return f"198.{18 + self.r.randrange(2)}.{self.r.randrange(256)}.{self.r.randrange(256)}"

    def v4src(self):
        return self.r.choice(["198.18.0.2", "198.18.0.2", "198.18.2.2", "198.18.1.2",
                              "198.18.0.6"]) if self.r.random() < 0.7 else self.v4()

    def v6(self):
        r = self.r.random()
        if r < 0.55:
            return self.r.choice(["2001:db8:100::5", "2001:db8:1ff::1", "2001:db8:200::9",
                                  "2001:db8:dead::1", "2001:db8::1", "2001:db8:1::1",
                                  "2001:db8:1::77", "2001:db8::2", "2001:db8:2::2",
                                  "2001:db8:9999::1", "2001:db8::5", "2001:db8::7",
                                  "2001:db8:1::78", "2001:db8:2::9", "2001:db8:2::10"])
        words = [self.r.randrange(65536) for _ in range(6)]
        if r < 0.85:
            return "2001:db8:1%02x::%x:%x" % (self.r.randrange(256), words[0], words[1])
        return "2001:db8:" + ":".join("%x" % w for w in words)

    def v6src(self):
        return self.r.choice(["2001:db8::2", "2001:db8:2::2", "2001:db8::5"]) \
            if self.r.random() < 0.7 else self.v6()

    # --- pieces ---------------------------------------------------------------------------------

    def ether(self, port):
        r = self.r.random()
        dst = PORT_MAC[port] if r < 0.93 else self.r.choice(
            ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01", "02:00:00:00:99:99"])
        return Ether(dst=dst, src=PEER_MAC[port])

    def tags(self, layer):
        n = self.r.choices([0, 1, 2, 3], [80, 12, 7, 1])[0]
        for i in range(n):
            vlan, prio = self.r.randrange(4096), self.r.randrange(8)
            if i == 0 and n >= 2 and self.r.random() < 0.7:
                layer = layer / Dot1AD(vlan=vlan, prio=prio)
            else:
                layer = layer / Dot1Q(vlan=vlan, prio=prio)
        return layer

    def size(self):
        return self.r.choice([0, 1, 8, 18, 26, 64, 100, 300, 512, 548, 900, 952, 960, 972, 980,
                              1000, 1200, 1232, 1400, 1452, 1472, 1480]) + self.r.randrange(4)

    def payload(self, n):
        return Raw(self.r.randbytes(n)) if n else Raw(b"")

    def ttl(self):
        return self.r.choices([0, 1, 2, 3, 64, 128, 255, self.r.randrange(256)],
                              [6, 12, 6, 3, 40, 10, 5, 18])[0]

    def ip4_l4(self):
        k = self.r.random()
        if k < 0.4:
            return UDP(sport=self.r.randrange(65536), dport=self.r.randrange(65536)) \
                / self.payload(self.size())
        if k < 0.65:
            return TCP(sport=self.r.randrange(65536), dport=self.r.randrange(65536),
                       flags=self.r.choice(["S", "SA", "A", "PA", "F", "R"]),
                       seq=self.r.randrange(2 ** 32)) / self.payload(self.size())
        if k < 0.8:
            return ICMP(type=self.r.choice([0, 8]), id=self.r.randrange(65536),
                        seq=self.r.randrange(65536)) / self.payload(self.size())
        if k < 0.92:
            inner = IP(src=self.v4(), dst=self.v4src(), ttl=self.r.randrange(256)) \
                / UDP(sport=53, dport=self.r.randrange(65536))
            icmp = self.r.choice([ICMP(type=3, code=self.r.randrange(16)), ICMP(type=11),
                                  ICMP(type=4), ICMP(type=5), ICMP(type=12),
                                  ICMP(type=3, code=4, nexthopmtu=1000)])
            return icmp / inner / self.payload(self.r.randrange(40))
        return self.payload(self.size())  # raw protocol payload (proto chosen by caller)

    def ip4_options(self):
        return self.r.choice([
            [IPOption_NOP()],
            [IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_NOP()],
            [IPOption_RR(routers=[self.v4() for _ in range(self.r.randrange(1, 4))])],
            [IPOption_Timestamp(flg=0, timestamp=self.r.randrange(2 ** 32))],
        ])

    # --- frame kinds ----------------------------------------------------------------------------

    def valid4(self, port):
        ip = IP(src=self.v4src(), dst=self.v4(), ttl=self.ttl(), id=self.r.randrange(65536),
                tos=self.r.choice([0, 0, 0, 0xB8, self.r.randrange(256)]))
        f = self.r.random()
        if f < 0.35:
            ip.flags = "DF"
        elif f < 0.45:
            ip.flags = "MF"
        elif f < 0.55:
            ip.frag = self.r.randrange(1, 8192)
            ip.flags = self.r.choice([0, "MF"])
        if self.r.random() < 0.1:
            ip.options = self.ip4_options()
        l4 = self.ip4_l4()
        if isinstance(l4, Raw):
            ip.proto = self.r.choice([17, 6, 1, 4, 41, 47, 50, 132, self.r.randrange(256)])
        return bytes(self.tags(self.ether(port)) / ip / l4)

    def valid6(self, port):
        ip = IPv6(src=self.v6src(), dst=self.v6(), hlim=self.ttl(),
                  tc=self.r.choice([0, 0, 0xB8]), fl=self.r.choice([0, self.r.randrange(2 ** 20)]))
        exts = None
        for _ in range(self.r.choices([0, 1, 2, 3], [65, 20, 10, 5])[0]):
            e = self.r.choice([
                IPv6ExtHdrHopByHop(), IPv6ExtHdrDestOpt(),
                IPv6ExtHdrRouting(type=0, addresses=[self.v6() for _ in range(self.r.randrange(3))]),
                IPv6ExtHdrFragment(id=self.r.randrange(2 ** 32), m=self.r.randrange(2),
                                   offset=self.r.choice([0, 0, self.r.randrange(8192)])),
            ])
            exts = e if exts is None else exts / e
        k = self.r.random()
        if k < 0.4:
            l4 = UDP(sport=self.r.randrange(65536), dport=self.r.randrange(65536)) \
                / self.payload(self.size())
        elif k < 0.6:
            l4 = TCP(sport=self.r.randrange(65536), dport=self.r.randrange(65536), flags="S") \
                / self.payload(self.size())
        elif k < 0.75:
            l4 = self.r.choice([ICMPv6EchoRequest, ICMPv6EchoReply])(
                id=self.r.randrange(65536), data=self.r.randbytes(self.size()))
        elif k < 0.92:
            inner = IPv6(src=self.v6(), dst=self.v6src(), hlim=self.r.randrange(256)) \
                / UDP(sport=53) / self.payload(self.r.randrange(60))
            l4 = self.r.choice([ICMPv6DestUnreach(code=self.r.randrange(7)),
                                ICMPv6PacketTooBig(mtu=1280), ICMPv6TimeExceeded(),
                                ICMPv6ParamProblem(ptr=self.r.randrange(40))]) / inner
        else:
            l4 = self.payload(self.size())
            ip.nh = self.r.choice([59, 17, 6, 58, self.r.randrange(256)])
        pkt = ip / exts / l4 if exts is not None else ip / l4
        return bytes(self.tags(self.ether(port)) / pkt)

    def fuzzed(self, port):
        """scapy fuzz() of header layers (addresses kept in range by passing them explicitly)."""
        for _ in range(20):
            try:
                k = self.r.random()
                if k < 0.15:
                    pkt = self.ether(port) / fuzz(IP(src=self.v4src(), dst=self.v4())) \
                        / fuzz(self.r.choice([UDP(), TCP(), icmp_fixed_time()]))
                elif k < 0.3:
                    # Version and header length kept, everything else fuzzed (length, flags,
                    # fragment offset, TTL, protocol...): gets further into the graph.
                    pkt = self.ether(port) / fuzz(IP(version=4, ihl=5, src=self.v4src(),
                                                     dst=self.v4())) \
                        / fuzz(self.r.choice([UDP(), TCP(), icmp_fixed_time()]))
                elif k < 0.45:
                    pkt = self.ether(port) / fuzz(Dot1Q()) / fuzz(IP(src=self.v4src(),
                                                                      dst=self.v4())) / fuzz(UDP())
                elif k < 0.6:
                    pkt = self.ether(port) / fuzz(IPv6(src=self.v6src(), dst=self.v6())) \
                        / fuzz(self.r.choice([UDP(), TCP(), ICMPv6EchoRequest()]))
                elif k < 0.7:
                    pkt = self.ether(port) / fuzz(IPv6(version=6, src=self.v6src(),
                                                       dst=self.v6())) \
                        / fuzz(self.r.choice([UDP(), TCP(), ICMPv6EchoRequest(),
                                              ICMPv6TimeExceeded()]))
                elif k < 0.8:
                    pkt = fuzz(Ether(dst=PORT_MAC[port], src=PEER_MAC[port])) \
                        / self.payload(self.r.randrange(100))
                else:
                    pkt = self.ether(port) / IP(src=self.v4src(), dst=self.v4(), ttl=self.ttl()) \
                        / fuzz(self.r.choice([UDP(), TCP(), icmp_fixed_time()]))
                b = bytearray(bytes(pkt))
                if self.r.random() < 0.5:
                    repair_ip4_checksum(b)
                return bytes(b)
            except Exception:  # noqa: BLE001 - some fuzzed field combinations do not build
                continue
        return self.valid4(port)

    def mutated(self, port):
        b = bytearray(self.valid4(port) if self.r.random() < 0.6 else self.valid6(port))
        for _ in range(self.r.randrange(1, 5)):
            k = self.r.random()
            if k < 0.35 and b:
                i = self.r.randrange(len(b))
                b[i] ^= 1 << self.r.randrange(8)
            elif k < 0.6 and b:
                i = self.r.randrange(min(len(b), 80))
                b[i] = self.r.randrange(256)
            elif k < 0.85:
                del b[self.r.randrange(len(b) + 1):]
            else:
                b += self.r.randbytes(self.r.randrange(1, 64))
        return bytes(b[:2000])

    def random_bytes(self, port):
        n = self.r.choice([0, self.r.randrange(14), self.r.randrange(64),
                           self.r.randrange(2001)])
        b = bytearray(self.r.randbytes(n))
        if len(b) >= 14 and self.r.random() < 0.6:
            b[0:6] = vecmodel.mac_bytes(PORT_MAC[port])
            b[12:14] = self.r.choice([b"\x08\x00", b"\x86\xdd", b"\x81\x00", b"\x88\xa8",
                                      b"\x08\x06"])
        return bytes(b)

    def misc(self, port):
        k = self.r.random()
        e = self.ether(port)
        if k < 0.3:
            return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC[port])
                         / ARP(op=self.r.choice([1, 2]), hwsrc=PEER_MAC[port], psrc=self.v4src(),
                               pdst=self.v4()))
        if k < 0.55:
            return bytes(Ether(dst=e.dst, src=e.src, type=self.r.randrange(65536))
                         / self.payload(self.r.randrange(1500)))
        if k < 0.7:
            return bytes(Ether(dst=e.dst, src=e.src, type=self.r.randrange(1501))
                         / self.payload(self.r.randrange(1500)))
        # Tag stacks, complete or cut.
        b = bytes(e)[:12]
        for _ in range(self.r.randrange(1, 5)):
            b += self.r.choice([b"\x81\x00", b"\x88\xa8"]) + self.r.randbytes(2)
        b += self.r.choice([b"\x08\x00", b"\x86\xdd", b""])
        b += bytes(IP(src=self.v4src(), dst=self.v4()) / UDP())[:self.r.randrange(40)]
        return b

    # --- ARP and Neighbor Discovery -------------------------------------------------------------

    def neighbour(self, port):
        """ARP and ND a router meets: hosts answering its requests (ARP replies, solicited NAs),
        asking for its addresses (ARP requests, NS for its global or link-local address,
        duplicate address detection), and what it must refuse (not for it, bad hop limit,
        checksum, options, sender; conflicts with its addresses; answers on the wrong port).
        Addresses: the port's subnet hosts, 198.18.0.0/15, 2001:db8::/32, and the link-local,
        solicited-node multicast and unspecified addresses ND itself uses."""
        n = SUBNET[port]
        me4, me6 = host4(n, 1), host6(n, 1)
        me_ll = link_local(PORT_MAC[port])
        r = self.r
        # Who may speak now: static neighbours, and the answering hosts whose time has come.
        talk4 = [h for h in HOSTS4[n][1:] if h <= 3] + \
            [h for h, t in ANSWER4[port] if self.phase >= t]
        talk6 = [h for h in HOSTS6[n][1:] if h <= 3] + \
            [h for h, t in ANSWER6[port] if self.phase >= t]
        host = r.choice(talk4)
        mac = host_mac(n, host) if host > 3 else PEER_MAC[port]
        k = r.random()
        if k < 0.16 and host > 3:
            # An answering host's reply to the router (unsolicited ones are learned too).
            return self.arp(port, 2, mac, host4(n, host), me4,
                            dst=r.choice([PORT_MAC[port], PORT_MAC[port], "ff:ff:ff:ff:ff:ff"]))
        h6 = r.choice(talk6)
        m6 = host_mac(n, h6) if h6 > 3 else PEER_MAC[port]
        if k < 0.32 and h6 > 3:
            return self.na(port, host6(n, h6), m6, r.choice([me6, me6, me_ll]),
                           S=r.choice([1, 1, 0]), O=r.choice([1, 1, 0]))
        if k < 0.44:
            # A host asks for the router's address (broadcast or unicast, sometimes tagged).
            return self.arp(port, 1, mac, host4(n, host), me4,
                            dst=r.choice(["ff:ff:ff:ff:ff:ff", PORT_MAC[port]]),
                            tag=r.random() < 0.1)
        if k < 0.56:
            src = r.choice([host6(n, h6), host6(n, h6), link_local(m6)])
            target = me_ll if src.startswith("fe80") and r.random() < 0.5 else me6
            return self.ns(port, src, target, m6, unicast=r.random() < 0.2,
                           option=r.random() < 0.85, tag=r.random() < 0.1)
        if k < 0.60:
            return self.ns(port, "::", r.choice([me6, me_ll]), PEER_MAC[port], option=False)
        # What the router must refuse.
        bad = r.randrange(12)
        if bad == 0:
            # For somebody else: teaches nothing new (updates a known sender only).
            return self.arp(port, 1, mac, host4(n, host), host4(n, r.choice(HOSTS4[n][1:])))
        if bad == 1:
            return self.arp(port, r.choice([3, 4, 8, 9]), mac, host4(n, host), me4)
        if bad == 2:
            return self.arp(port, 1, "03:00:00:00:00:01", host4(n, host), me4)
        if bad == 3:
            return self.arp(port, 1, mac, me4, me4)
        if bad == 4:
            return self.arp(port, 1, mac, host4(n, host), me4)[:14 + r.randrange(28)]
        if bad == 5:
            # An answer for another port's host received here (learned on this port only).
            other = r.choice([p for p in SUBNET if p != port])
            a = r.choice(ANSWER4[other])[0]
            return self.arp(port, 2, host_mac(SUBNET[other], a), host4(SUBNET[other], a), me4)
        if bad == 6:
            return self.ns(port, host6(n, 2), me6, PEER_MAC[port], hlim=r.choice([1, 64, 254]))
        if bad == 7:
            b = bytearray(self.ns(port, host6(n, 2), me6, PEER_MAC[port]))
            b[-1 - r.randrange(8)] ^= 1 << r.randrange(8)
            return bytes(b)
        if bad == 8:
            return self.ns(port, host6(n, 2), host6(n, r.choice(HOSTS6[n][1:])), PEER_MAC[port])
        if bad == 9:
            # Not solicited: nobody asked for 2001:db8:N::30 (an NA never creates an entry).
            return self.na(port, host6(n, 0x30), host_mac(n, 0x30), me6)
        if bad == 10:
            return self.na(port, host6(n, r.choice(talk6)), m6, "ff02::1", S=1)
        return self.ns(port, me6, me6, PEER_MAC[port])

    def arp(self, port, op, hwsrc, psrc, pdst, dst="ff:ff:ff:ff:ff:ff", tag=False):
        e = Ether(dst=dst, src=hwsrc if int(hwsrc[:2], 16) & 1 == 0 else PEER_MAC[port])
        if tag:
            e = e / Dot1Q(vlan=self.r.randrange(1, 4095))
        return bytes(e / ARP(op=op, hwsrc=hwsrc, psrc=psrc, hwdst="00:00:00:00:00:00",
                             pdst=pdst))

    def ns(self, port, src, target, lladdr, unicast=False, option=True, hlim=255, tag=False):
        group = inet_ntop(socket.AF_INET6, in6_getnsma(inet_pton(socket.AF_INET6, target)))
        dst = target if unicast else group
        eth_dst = PORT_MAC[port] if unicast else in6_getnsmac(inet_pton(socket.AF_INET6, group))
        e = Ether(dst=eth_dst, src=lladdr)
        if tag:
            e = e / Dot1Q(vlan=self.r.randrange(1, 4095))
        pkt = IPv6(src=src, dst=dst, hlim=hlim) / ICMPv6ND_NS(tgt=target)
        if option:
            pkt = pkt / ICMPv6NDOptSrcLLAddr(lladdr=lladdr)
        return bytes(e / pkt)

    def na(self, port, target, lladdr, dst, S=1, O=1):
        eth_dst = PORT_MAC[port] if not dst.startswith("ff") else "33:33:00:00:00:01"
        return bytes(Ether(dst=eth_dst, src=lladdr) / IPv6(src=target, dst=dst, hlim=255)
                     / ICMPv6ND_NA(S=S, O=O, tgt=target) / ICMPv6NDOptDstLLAddr(lladdr=lladdr))

    def oversized(self, port):
        return bytes(self.ether(port) / IP(src=self.v4src(), dst=self.v4())
                     / UDP() / self.payload(self.r.randrange(2030, 2080)))

    def frame(self, port):
        kind = self.r.choices(
            ["valid4", "valid6", "fuzzed", "mutated", "random_bytes", "misc", "oversized",
             "neighbour"],
            [30, 20, 18, 17, 6, 8, 1, 4])[0]
        if kind == "neighbour":
            # Built in range; ND's link-local and multicast addresses stay as they are.
            return kind, getattr(self, kind)(port)
        return kind, constrain(getattr(self, kind)(port))


# ------------------------------------------------------------------------------------------------
# Keeping addresses in 198.18.0.0/15 and 2001:db8::/32

def fit4(b, at, subnet_hosts=HOSTS4):
    """Rewrite the IPv4 address at `at` (or the part of it inside the frame) into 198.18.0.0/15,
    and a host of a connected subnet (198.18.0.0/22) onto `subnet_hosts`."""
    if at >= len(b):
        return
    have = min(4, len(b) - at)
    a = int.from_bytes(bytes(b[at:at + have]) + bytes(4 - have), "big")
    if a & 0xFFFE0000 != 0xC6120000:
        a = 0xC6120000 | (a & 0x1FFFF)
    if have == 4 and a & 0xFFFFFC00 == 0xC6120000:
        hosts = subnet_hosts[(a >> 8) & 3]
        if a & 0xFF not in hosts:
            a = (a & ~0xFF) | hosts[(a & 0xFF) % len(hosts)]
    b[at:at + have] = a.to_bytes(4, "big")[:have]


def fit6(b, at):
    """Rewrite the IPv6 address at `at` into 2001:db8::/32, and a host of a connected prefix
    (2001:db8:N::/64, N = 0..2) onto HOSTS6."""
    if at >= len(b):
        return
    have = min(4, len(b) - at)
    b[at:at + have] = b"\x20\x01\x0d\xb8"[:have]
    if len(b) >= at + 16 and bytes(b[at + 4:at + 8]) in (b"\0\0\0\0", b"\0\x01\0\0",
                                                             b"\0\x02\0\0"):
        hosts = HOSTS6[b[at + 5]]
        iid = int.from_bytes(bytes(b[at + 8:at + 16]), "big")
        if iid not in hosts:
            b[at + 8:at + 16] = hosts[iid % len(hosts)].to_bytes(8, "big")


def repair_ip4_checksum(b, l3=None):
    if l3 is None:
        l3, t = l3_of(b)
        if t != 0x0800:
            return
    if len(b) < l3 + 20:
        return
    ihl = (b[l3] & 15) * 4
    if ihl < 20 or len(b) < l3 + ihl:
        return
    b[l3 + 10:l3 + 12] = b"\0\0"
    b[l3 + 10:l3 + 12] = vecmodel.inet_checksum(bytes(b[l3:l3 + ihl])).to_bytes(2, "big")


def l3_of(b):
    if len(b) < 14:
        return len(b), None
    off, t = 14, be16(b, 12)
    while t in (0x8100, 0x88A8) and len(b) >= off + 4:
        t, off = be16(b, off + 2), off + 4
    if t in (0x8100, 0x88A8):
        return off, None
    return off, t


def fit_ip4(b, l3, depth=0):
    if l3 >= len(b):
        return
    ihl = (b[l3] & 15) * 4
    was_valid = ihl >= 20 and len(b) >= l3 + ihl and \
        vecmodel.inet_checksum(bytes(b[l3:l3 + ihl])) == 0
    fit4(b, l3 + 12)
    fit4(b, l3 + 16)
    # Options carrying addresses: record route (7), loose/strict source route (0x83, 0x89).
    end = min(l3 + max(ihl, 20), len(b))
    at = l3 + 20
    while at < end:
        kind = b[at]
        if kind == 0:
            break
        if kind == 1:
            at += 1
            continue
        if at + 1 >= end:
            break
        olen = b[at + 1]
        if olen < 2:
            break
        if kind in (7, 0x83, 0x89):
            for a in range(at + 3, min(at + olen, end), 4):
                fit4(b, a)
        if kind == 0x44 and at + 3 < end and b[at + 3] & 15 in (1, 3):
            for a in range(at + 4, min(at + olen, end), 8):
                fit4(b, a)
        at += olen
    if was_valid:
        repair_ip4_checksum(b, l3)
    # A decoder takes a header length below 20 as 20 (scapy does), so the inner header is there.
    hl = max(ihl, 20)
    if depth < MAX_NESTING and len(b) > l3 + hl:
        l4, proto = l3 + hl, b[l3 + 9]
        if proto == 1 and b[l4] in (3, 4, 5, 11, 12):
            # An ICMP error quotes a header with addresses of its own.
            fit_ip4(b, l4 + 8, depth + 1)
        else:
            fit_inner(b, proto, l4, depth + 1)


def fit_ip6(b, l3, depth=0):
    fit6(b, l3 + 8)
    fit6(b, l3 + 24)
    if len(b) < l3 + 40:
        return
    nh, off = b[l3 + 6], l3 + 40
    for _ in range(8):
        if nh in (0, 60, 43) and off + 2 <= len(b):
            if nh == 43 and off + 4 <= len(b) and b[off + 2] == 0:
                for a in range(off + 8, min(off + 8 + b[off + 1] * 8, len(b)), 16):
                    fit6(b, a)
            nh, off = b[off], off + (b[off + 1] + 1) * 8
        elif nh == 44 and off + 8 <= len(b):
            nh, off = b[off], off + 8
        else:
            break
    if depth < MAX_NESTING and off < len(b):
        if nh == 58 and b[off] < 128:
            fit_ip6(b, off + 8, depth + 1)
        else:
            fit_inner(b, nh, off, depth + 1)


# Headers inside headers (ICMP quotes, tunnels) rewritten this deep.
MAX_NESTING = 6


def fit_inner(b, proto, l4, depth):
    """Tunnelled packets: IPv4-in-IP (4), IPv6-in-IP (41), GRE (47) carrying IPv4 or IPv6."""
    if proto == 4:
        fit_ip4(b, l4, depth)
    elif proto == 41:
        fit_ip6(b, l4, depth)
    elif proto == 47 and l4 + 4 <= len(b):
        flags, ptype = b[l4], be16(b, l4 + 2)
        inner = l4 + 4 + 4 * bin(flags & 0xB0).count("1")
        if ptype == 0x0800:
            fit_ip4(b, inner, depth)
        elif ptype == 0x86DD:
            fit_ip6(b, inner, depth)


def constrain(frame):
    b = bytearray(frame)
    l3, t = l3_of(b)
    if t == 0x0800:
        fit_ip4(b, l3)
    elif t == 0x86DD:
        fit_ip6(b, l3)
    elif t == 0x0806 and len(b) > l3 + 14:
        fit4(b, l3 + 14, ARP_SENDERS4)
        fit4(b, l3 + 24)
    return bytes(b)


def audit(frame):
    """Addresses outside the benchmark ranges that scapy finds in a frame's IP/IPv6/ARP headers
    (outer, ICMP-quoted, tunnelled; not inside UDP/TCP payloads, nor below a header whose
    version or length is invalid), reading only bytes present."""
    bad = []
    if len(frame) < 14:
        return bad
    try:
        layer = Ether(frame)
    except Exception:  # noqa: BLE001 - scapy cannot dissect it: nothing to audit
        return bad
    pos = 0
    nd = ICMPv6ND_NS in layer or ICMPv6ND_NA in layer
    while layer is not None and not isinstance(layer, (Raw, UDP, TCP)):
        name = layer.__class__.__name__
        # What scapy makes of a header whose version or length is garbage is not an address.
        if name in ("IP", "IPerror") and (layer.version != 4 or (layer.ihl or 0) < 5):
            break
        if name in ("IPv6", "IPerror6") and layer.version != 6:
            break
        raw = getattr(layer, "original", None)
        # Where the layer starts: its own bytes, searched after the previous layer's start.
        at = frame.find(raw[:24], pos) if raw else -1
        if at >= 0:
            pos = at + 1
        if at >= 0 and name in ("IP", "IPerror", "IPv6", "IPerror6", "ARP"):
            off = at
            spots = {"IP": [12, 16], "IPerror": [12, 16], "ARP": [14, 24]}.get(name)
            for at in spots or []:
                a = frame[off + at:off + at + 4]
                if (len(a) > 0 and a[0] != 198) or (len(a) > 1 and a[1] not in (18, 19)):
                    bad.append(f"{name} {a.hex()}")
            for at in ([8, 24] if spots is None else []):
                a = frame[off + at:off + at + 4]
                # ND itself uses link-local, solicited-node multicast and unspecified addresses.
                if a != b"\x20\x01\x0d\xb8"[:len(a)] and not (
                        nd and a[:2] in (b"\xfe\x80", b"\xff\x02", b"\0\0")):
                    bad.append(f"{name} {a.hex()}")
        layer = layer.payload if layer.payload else None
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    g = Gen(args.seed)
    files = {port: [] for port, _ in RX_SHARE}
    kinds = {}
    for i in range(args.count):
        x, port = g.r.random(), RX_SHARE[-1][0]
        for name, share in RX_SHARE:
            if x < share:
                port = name
                break
            x -= share
        g.phase = i / args.count
        kind, frame = g.frame(port)
        kinds[kind] = kinds.get(kind, 0) + 1
        files[port].append((T0 + i * 1000, frame))
    problems = []
    for port in files:
        for ts, frame in files[port]:
            bad = audit(frame)
            if bad:
                problems.append(f"{ts}: {bad}: {frame[:64].hex()}")
    if problems:
        sys.exit("addresses outside 198.18.0.0/15 / 2001:db8::/32:\n" + "\n".join(problems[:20]))
    vecmodel.write_pcap(os.path.join(args.out, "corpus_in0.pcap"), files["in0"])
    vecmodel.write_pcap(os.path.join(args.out, "corpus_out0.pcap"), files["out0"])
    vecmodel.write_pcap(os.path.join(args.out, "corpus_out1.pcap"), files["out1"], nanos=False,
                        big_endian=True)
    print(f"corpus seed {args.seed}: {args.count} frames ("
          + ", ".join(f"{len(files[p])} on {p}" for p, _ in RX_SHARE) + "): "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()

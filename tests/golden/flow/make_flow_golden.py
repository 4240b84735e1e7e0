#!/usr/bin/env python3
"""Golden frames for the virtual switch's flow extraction, with the keys scapy says they have.

    /usr/bin/python3 tests/golden/flow/make_flow_golden.py --out DIR
        writes DIR/extract.pcap (frames built with scapy: Ethernet, VLAN, LLC/SNAP, ARP, IPv4 with
        options and fragments, IPv6 with extension headers and fragments, TCP, UDP, SCTP, ICMP,
        ICMPv6 and neighbour discovery, and truncated/malformed ones) and DIR/expected_keys.txt:
        for each frame, every flow key field as Open vSwitch fills it, computed from scapy's
        dissection of the frame (not from vecplane), plus the L3/L4 offsets.
    /usr/bin/python3 tests/golden/flow/make_flow_golden.py --check-checksums FILE.pcap
        prints "ok N" or "bad N: LAYER stored X, scapy computes Y" for every frame of FILE: the
        checksums of IPv4, TCP, UDP, ICMP, ICMPv6 and SCTP recomputed by scapy.

The checked-in extract.pcap and expected_keys.txt are this script's output
(crates/flow/tests/golden_extract.rs checks that they are current).
"""

import argparse
import os
import sys

from scapy.all import (ARP, ICMP, IP, LLC, SNAP, TCP, UDP, Dot1AD, Dot1Q, Ether,
                       ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
                       ICMPv6NDOptSrcLLAddr, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, PcapReader, PcapWriter, Raw,
                       fragment, fragment6, raw)
from scapy.layers.inet import IPOption_RR
from scapy.layers.inet6 import ICMPv6DestUnreach, _ICMPv6
from scapy.layers.ipsec import AH
from scapy.layers.sctp import SCTP, SCTPChunkInit

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"
S4, D4 = "198.18.0.1", "198.19.0.2"
S6, D6 = "2001:db8::1", "2001:db8:1::2"

FIELDS = ["in_port", "tun_id", "tun_src", "tun_dst", "metadata", "reg0", "reg1", "reg2", "reg3",
          "reg4", "reg5", "reg6", "reg7", "dl_src", "vlan_tci", "dl_dst", "dl_type", "nw_src",
          "nw_dst", "ipv6_src", "ipv6_dst", "nw_proto", "nw_ecn", "ip_dscp", "nw_ttl", "nw_frag",
          "ipv6_label", "arp_sha", "arp_tha", "tp_src", "tp_dst", "tcp_flags"]


def frames():
    """(name, frame bytes), deterministic."""
    out = []

    def add(name, pkt):
        out.append((name, raw(pkt)))

    pay = b"vecplane"
    add("tcp4-syn", Ether(dst=A, src=B) / IP(src=S4, dst=D4, tos=0xb9, ttl=61) /
        TCP(sport=40000, dport=80, flags="S", options=[("MSS", 1460)]))
    add("tcp4-flags12", Ether(dst=A, src=B) / IP(src=S4, dst=D4) /
        TCP(sport=1, dport=2, flags=0x1ff, reserved=7) / pay)
    add("udp4-options", Ether(dst=A, src=B) / IP(src=S4, dst=D4, options=[IPOption_RR()]) /
        UDP(sport=53, dport=5353) / pay)
    add("icmp4-echo", Ether(dst=A, src=B) / IP(src=S4, dst=D4) / ICMP(type=8, id=7, seq=1) / pay)
    add("icmp4-unreach", Ether(dst=A, src=B) / IP(src=S4, dst=D4) / ICMP(type=3, code=4) /
        IP(src=D4, dst=S4) / UDP())
    add("gre4", Ether(dst=A, src=B) / IP(src=S4, dst=D4, proto=47) / Raw(b"\0" * 8))
    add("sctp4", Ether(dst=A, src=B) / IP(src=S4, dst=D4) / SCTP(sport=3868, dport=2905) /
        SCTPChunkInit())
    for i, f in enumerate(fragment(IP(src=S4, dst=D4, id=9) / UDP(sport=7, dport=9) /
                                   Raw(bytes(range(200))), fragsize=64)):
        if i < 3:
            add(f"udp4-frag{i}", Ether(dst=A, src=B) / f)
    add("vlan-tcp4", Ether(dst=A, src=B) / Dot1Q(prio=5, vlan=100) / IP(src=S4, dst=D4) /
        TCP(sport=5, dport=6, flags="PA") / pay)
    add("vlan-dei", Ether(dst=A, src=B) / Dot1Q(prio=1, id=1, vlan=4094) / IP(src=S4, dst=D4) /
        UDP(sport=5, dport=6))
    add("qinq-outer", Ether(dst=A, src=B) / Dot1AD(vlan=10) / IP(src=S4, dst=D4) / UDP())
    add("qinq-two-tags", Ether(dst=A, src=B) / Dot1AD(vlan=10) / Dot1Q(vlan=20) /
        IP(src=S4, dst=D4) / UDP())
    add("llc-snap-ip", Ether(dst=A, src=B) / LLC(dsap=0xaa, ssap=0xaa, ctrl=3) /
        SNAP(OUI=0, code=0x0800) / IP(src=S4, dst=D4) / UDP(sport=1, dport=2))
    add("llc-stp", Ether(dst="01:80:c2:00:00:00", src=B) / LLC(dsap=0x42, ssap=0x42, ctrl=3) /
        Raw(b"\0" * 35))
    add("arp-request", Ether(dst="ff:ff:ff:ff:ff:ff", src=B) /
        ARP(op=1, hwsrc=B, psrc=S4, pdst="198.18.0.9"))
    add("arp-reply", Ether(dst=A, src=B) / ARP(op=2, hwsrc=B, psrc=S4, hwdst=A, pdst=D4))
    add("arp-op-300", Ether(dst=A, src=B) / ARP(op=300, hwsrc=B, psrc=S4, pdst=D4))
    add("lldp", Ether(dst="01:80:c2:00:00:0e", src=B, type=0x88cc) / Raw(b"\x02\x07" + b"\0" * 40))
    add("tcp6", Ether(dst=A, src=B) / IPv6(src=S6, dst=D6, tc=0xb8, fl=0x12345, hlim=63) /
        TCP(sport=40000, dport=443, flags="SA"))
    add("udp6-ext", Ether(dst=A, src=B) / IPv6(src=S6, dst=D6) / IPv6ExtHdrHopByHop() /
        IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting(addresses=["2001:db8:ff::9"]) /
        UDP(sport=546, dport=547) / pay)
    add("tcp6-ah", Ether(dst=A, src=B) / IPv6(src=S6, dst=D6) /
        AH(nh=6, payloadlen=4, icv=b"\0" * 12) / TCP(sport=1, dport=2))
    for i, f in enumerate(fragment6(IPv6(src=S6, dst=D6) / IPv6ExtHdrFragment(id=5) /
                                    UDP(sport=7, dport=9) / Raw(bytes(range(200))), 120)):
        add(f"udp6-frag{i}", Ether(dst=A, src=B) / f)
    add("icmp6-echo", Ether(dst=A, src=B) / IPv6(src=S6, dst=D6) / ICMPv6EchoRequest(id=1, seq=2))
    add("icmp6-unreach", Ether(dst=A, src=B) / IPv6(src=S6, dst=D6) / ICMPv6DestUnreach(code=3) /
        IPv6(src=D6, dst=S6) / UDP())
    add("nd-ns", Ether(dst=A, src=B) / IPv6(src=S6, dst="ff02::1:ff00:2", hlim=255) /
        ICMPv6ND_NS(tgt=D6) / ICMPv6NDOptSrcLLAddr(lladdr=B))
    add("nd-na", Ether(dst=A, src=B) / IPv6(src=D6, dst=S6, hlim=255) /
        ICMPv6ND_NA(tgt=D6, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=A))
    add("nd-na-dup", Ether(dst=A, src=B) / IPv6(src=D6, dst=S6, hlim=255) /
        ICMPv6ND_NA(tgt=D6) / ICMPv6NDOptDstLLAddr(lladdr=A) / ICMPv6NDOptDstLLAddr(lladdr=B))
    # Truncated and malformed.
    whole = raw(Ether(dst=A, src=B) / IP(src=S4, dst=D4) / TCP(sport=1, dport=2) / pay)
    out.append(("tcp4-cut-in-ip", whole[:30]))
    out.append(("tcp4-cut-in-tcp", whole[:50]))
    bad_ihl = bytearray(whole)
    bad_ihl[14] = 0x44
    out.append(("ip4-ihl-4", bytes(bad_ihl)))
    short_len = bytearray(whole)
    short_len[16:18] = (30).to_bytes(2, "big")
    out.append(("ip4-total-30", bytes(short_len)))
    out.append(("eth-cut", whole[:13]))
    out.append(("vlan-cut", raw(Ether(dst=A, src=B) / Dot1Q(vlan=3) / IP())[:17]))
    out.append(("arp-cut", raw(Ether(dst=A, src=B) / ARP())[:40]))
    w6 = raw(Ether(dst=A, src=B) / IPv6(src=S6, dst=D6) / UDP(sport=1, dport=2) / pay)
    out.append(("ip6-cut", w6[:50]))
    out.append(("ip6-plen-long", w6[:-2]))
    ext_cut = raw(Ether(dst=A, src=B) / IPv6(src=S6, dst=D6, plen=8, nh=0) /
                  IPv6ExtHdrHopByHop(len=1, nh=6))[:14 + 40 + 8]
    out.append(("ip6-ext-cut", ext_cut))
    return out


def mac_int(m):
    return int(m.replace(":", ""), 16)


def ip4_int(a):
    return int.from_bytes(bytes(int(x) for x in a.split(".")), "big")


def ip6_int(a):
    import ipaddress
    return int(ipaddress.IPv6Address(a))


def expected(data, in_port=1):
    """The OVS flow key fields and (l3, l4) offsets of `data`, from scapy's dissection."""
    k = dict.fromkeys(FIELDS, 0)
    k["in_port"] = in_port
    offs = {"l3": None, "l4": None}
    if len(data) < 14:
        return k, offs
    e = Ether(data)
    k["dl_dst"], k["dl_src"] = mac_int(e.dst), mac_int(e.src)
    t, layer, off = e.type, e.payload, 14
    if t in (0x8100, 0x88a8):
        if len(data) >= 18 and isinstance(layer, (Dot1Q, Dot1AD)):
            k["vlan_tci"] = layer.prio << 13 | layer.id << 12 | layer.vlan | 0x1000
            t, layer, off = layer.type, layer.payload, 18
        else:
            k["dl_type"] = t
            offs["l3"] = 14
            return k, offs
    if t < 0x600:
        t = 0x5FF
        if (isinstance(layer, LLC) and (layer.dsap, layer.ssap, layer.ctrl) == (0xAA, 0xAA, 3)
                and isinstance(layer.payload, SNAP) and layer.payload.OUI == 0):
            off += 8
            if layer.payload.code >= 0x600:
                t = layer.payload.code
            layer = layer.payload.payload
    k["dl_type"] = t
    offs["l3"] = off
    rest = len(data) - off
    if t == 0x0800:
        if rest < 20 or not isinstance(layer, IP):
            return k, offs
        ihl = layer.ihl * 4
        if ihl < 20 or rest < ihl or layer.len > rest or ihl > layer.len:
            return k, offs
        k["nw_src"], k["nw_dst"] = ip4_int(layer.src), ip4_int(layer.dst)
        k["nw_proto"], k["nw_ttl"] = layer.proto, layer.ttl
        k["ip_dscp"], k["nw_ecn"] = layer.tos >> 2, layer.tos & 3
        if layer.flags.MF or layer.frag:
            k["nw_frag"] = 1 | (2 if layer.frag else 0)
        proto, l4len, upper = layer.proto, layer.len - ihl, layer.payload
        offs["l4"] = off + ihl
    elif t == 0x86DD:
        if rest < 40 or not isinstance(layer, IPv6) or 40 + layer.plen > rest:
            return k, offs
        k["ipv6_src"], k["ipv6_dst"] = ip6_int(layer.src), ip6_int(layer.dst)
        proto, l4len, upper, at = layer.nh, layer.plen, layer.payload, off + 40
        frag = 0
        while proto in (0, 43, 60, 51, 44):
            if l4len < 8:
                return k, offs
            if proto == 44:
                assert isinstance(upper, IPv6ExtHdrFragment), upper
                n = 8
                offlg = upper.offset << 3 | upper.res2 << 1 | upper.m
            else:
                n = (upper.payloadlen + 2) * 4 if proto == 51 else (upper.len + 1) * 8
            if n > l4len:
                return k, offs
            nh = upper.nh
            l4len, at = l4len - n, at + n
            if proto == 44 and offlg:
                frag = 1
                if upper.offset:
                    frag, nh = 3, 44
                    upper = None
                    proto = nh
                    break
            proto, upper = nh, upper.payload
        k["nw_proto"], k["nw_ttl"], k["nw_frag"] = proto, layer.hlim, frag
        k["ip_dscp"], k["nw_ecn"], k["ipv6_label"] = layer.tc >> 2, layer.tc & 3, layer.fl
        offs["l4"] = at
    elif t in (0x0806, 0x8035):
        if rest < 28 or not isinstance(layer, ARP):
            return k, offs
        if (layer.hwtype, layer.ptype, layer.hwlen, layer.plen) != (1, 0x800, 6, 4):
            return k, offs
        k["nw_src"], k["nw_dst"] = ip4_int(layer.psrc), ip4_int(layer.pdst)
        k["nw_proto"] = layer.op if layer.op <= 0xFF else 0
        k["arp_sha"], k["arp_tha"] = mac_int(layer.hwsrc), mac_int(layer.hwdst)
        return k, offs
    else:
        return k, offs
    if k["nw_frag"] & 2:
        return k, offs
    # scapy leaves some upper layers undissected (after AH, for one): dissect them by protocol.
    by_proto = {6: TCP, 17: UDP, 132: SCTP, 1: ICMP}
    if proto in by_proto and upper is not None and not isinstance(upper, by_proto[proto]):
        upper = by_proto[proto](raw(upper)) if len(raw(upper)) else None
    if proto == 6 and l4len >= 20 and isinstance(upper, TCP):
        if 20 <= upper.dataofs * 4 <= l4len:
            k["tp_src"], k["tp_dst"] = upper.sport, upper.dport
            k["tcp_flags"] = upper.reserved << 9 | int(upper.flags)
    elif proto == 17 and l4len >= 8 and isinstance(upper, UDP):
        k["tp_src"], k["tp_dst"] = upper.sport, upper.dport
    elif proto == 132 and l4len >= 12 and isinstance(upper, SCTP):
        k["tp_src"], k["tp_dst"] = upper.sport, upper.dport
    elif proto == 1 and l4len >= 8 and isinstance(upper, ICMP):
        k["tp_src"], k["tp_dst"] = upper.type, upper.code
    elif proto == 58 and l4len >= 8 and isinstance(upper, _ICMPv6):
        k["tp_src"], k["tp_dst"] = upper.type, upper.code
        if isinstance(upper, (ICMPv6ND_NS, ICMPv6ND_NA)) and upper.code == 0 and l4len >= 24:
            sll = tll = 0
            opt = upper.payload
            while isinstance(opt, (ICMPv6NDOptSrcLLAddr, ICMPv6NDOptDstLLAddr)):
                # (scapy's DstLLAddr is a subclass of SrcLLAddr: tell them by type.)
                which = "s" if opt.type == 1 else "t"
                cur = sll if which == "s" else tll
                if cur:  # a repeated option: Open vSwitch zeroes both
                    sll = tll = 0
                    break
                if which == "s":
                    sll = mac_int(opt.lladdr)
                else:
                    tll = mac_int(opt.lladdr)
                opt = opt.payload
            k["arp_sha"], k["arp_tha"] = sll, tll
    return k, offs


def line(i, name, k, offs):
    f = " ".join(f"{n}={k[n]:#x}" for n in FIELDS)
    o = " ".join(f"{n}={'-' if v is None else v}" for n, v in offs.items())
    return f"{i} {name}: {f} {o}"


def check_checksums(path):
    bad = 0
    for i, p in enumerate(PcapReader(path)):
        data = bytes(p)
        e = Ether(data)
        e2 = e.copy()
        problems = []
        for cls in (IP, TCP, UDP, ICMP, SCTP, _ICMPv6):
            if cls in e2 and hasattr(e2[cls], "chksum"):
                del e2[cls].chksum
        e2 = Ether(raw(e2))
        for cls in (IP, TCP, UDP, ICMP, SCTP, _ICMPv6):
            if cls in e and hasattr(e[cls], "chksum"):
                a, b = e[cls].chksum, e2[cls].chksum
                if cls is UDP and a == 0:
                    continue
                if a != b:
                    problems.append(f"{cls.__name__} stored {a:#06x}, scapy computes {b:#06x}")
        if problems:
            bad += 1
            print(f"bad {i}: " + "; ".join(problems))
        else:
            print(f"ok {i}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check-checksums")
    a = ap.parse_args()
    if a.check_checksums:
        sys.exit(1 if check_checksums(a.check_checksums) else 0)
    os.makedirs(a.out, exist_ok=True)
    w = PcapWriter(os.path.join(a.out, "extract.pcap"), linktype=1, sync=True)
    lines = []
    for i, (name, data) in enumerate(frames()):
        pkt = Ether(data) if len(data) >= 14 else Raw(data)
        pkt.time = 1_700_000_000 + i
        w.write(pkt if bytes(pkt) == data else Raw(data))
        k, offs = expected(data)
        lines.append(line(i, name, k, offs))
    w.close()
    with open(os.path.join(a.out, "expected_keys.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

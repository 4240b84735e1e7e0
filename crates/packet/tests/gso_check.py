#!/usr/bin/env python3
"""Checks TCP super-packets cut into segments by vecplane (packet::gso) with scapy; run by
crates/packet/tests/gso_scapy.rs over one batch of random cases.

    gso_check.py CASES.pcap MANIFEST.json

MANIFEST is a list of {"case": n, "orig": i, "first": j, "count": k, "mss": m}: record i of the
pcap is a super-packet and records j..j+k-1 are its segments, cut at m payload bytes. For every
case, with scapy's dissection of each record:
- the segments' TCP payloads put together are the original's, each mss bytes but the last;
- sequence numbers advance by the payload offset, IPv4 ids by one per segment (mod 2^32, 2^16);
- TCP flags: the original's, with FIN and PSH only on the last segment and CWR only on the
  first (as Linux's tcp_gso_segment);
- IPv4 total length and IPv6 payload length are the segment's; no trailing padding;
- every other field of Ethernet, VLAN tags, IP and TCP (options included) is the original's;
- the IPv4 header and TCP checksums are what scapy computes: the segment rebuilt with
  chksum=None is byte for byte the segment.
Prints "bad <case>: <what>" for each problem, then "checked <cases> cases, <segments> segments";
exits 1 when something was bad.
"""

import json
import sys

from scapy.all import IP, TCP, Dot1AD, Dot1Q, Ether, IPv6, Padding, RawPcapReader

FIN, PSH, CWR = 0x01, 0x08, 0x80
# Fields segmentation rewrites; every other field must be the original's.
REWRITTEN = {
    IP: {"len", "id", "chksum"},
    IPv6: {"plen"},
    TCP: {"seq", "flags", "chksum"},
}


def fields(layer, skip=()):
    return {f.name: getattr(layer, f.name) for f in layer.fields_desc if f.name not in skip}


def check_case(case, orig_raw, seg_raws, out):
    n = case["case"]
    mss = case["mss"]

    def bad(what):
        out.append(f"bad {n}: {what}")

    o = Ether(orig_raw)
    ip_cls = IP if IP in o else IPv6
    if ip_cls not in o or TCP not in o:
        bad(f"scapy finds no IP/TCP in the original: {o.summary()}")
        return
    otcp = o[TCP]
    payload = bytes(otcp.payload)
    l3 = 14 + 4 * sum(isinstance(x, Dot1Q) for x in layers(o))
    expected = max(1, -(-len(payload) // mss))
    if len(seg_raws) != expected:
        bad(f"{len(seg_raws)} segments, expected {expected} ({len(payload)} bytes at mss {mss})")
        return
    joined = b""
    for i, raw in enumerate(seg_raws):
        s = Ether(raw)
        where = f"segment {i} of {len(seg_raws)}"
        if ip_cls not in s or TCP not in s:
            bad(f"{where}: scapy finds no IP/TCP: {s.summary()}")
            continue
        sip, stcp = s[ip_cls], s[TCP]
        if Padding in s:
            bad(f"{where}: bytes past the IP length")
        seg_payload = bytes(stcp.payload)
        joined += seg_payload
        want_len = min(mss, len(payload) - i * mss) if payload else 0
        if len(seg_payload) != want_len:
            bad(f"{where}: {len(seg_payload)} payload bytes, expected {want_len}")
        if stcp.seq != (otcp.seq + i * mss) % (1 << 32):
            bad(f"{where}: seq {stcp.seq}, expected {(otcp.seq + i * mss) % (1 << 32)}")
        flags = int(otcp.flags)
        if i + 1 < len(seg_raws):
            flags &= ~(FIN | PSH)
        if i > 0:
            flags &= ~CWR
        if int(stcp.flags) != flags:
            bad(f"{where}: flags {int(stcp.flags):#x} ({stcp.flags}), expected {flags:#x}")
        if ip_cls is IP:
            if sip.id != (o[IP].id + i) % (1 << 16):
                bad(f"{where}: IPv4 id {sip.id}, expected {(o[IP].id + i) % (1 << 16)}")
            if sip.len != len(raw) - l3:
                bad(f"{where}: IPv4 total length {sip.len}, the segment has {len(raw) - l3}")
        elif sip.plen != len(raw) - l3 - 40:
            bad(f"{where}: IPv6 payload length {sip.plen}, the segment has {len(raw) - l3 - 40}")
        # Every other field of every header is the original's.
        if [type(x) for x in layers(s)] != [type(x) for x in layers(o)]:
            bad(f"{where}: headers {s.summary()}, the original's {o.summary()}")
        for a, b in zip(layers(s), layers(o)):
            skip = REWRITTEN.get(type(a), set())
            fa, fb = fields(a, skip), fields(b, skip)
            if fa != fb:
                diff = {k: (fa.get(k), fb.get(k)) for k in fa if fa.get(k) != fb.get(k)}
                bad(f"{where}: {type(a).__name__} fields differ (segment, original): {diff}")
        # Checksums: rebuilt by scapy with chksum=None, the segment is unchanged.
        r = s.copy()
        if ip_cls is IP:
            r[IP].chksum = None
        r[TCP].chksum = None
        rebuilt = bytes(r)
        if rebuilt != raw:
            rb = Ether(rebuilt)
            if ip_cls is IP and rb[IP].chksum != sip.chksum:
                bad(f"{where}: IPv4 checksum {sip.chksum:#06x}, scapy computes {rb[IP].chksum:#06x}")
            elif rb[TCP].chksum != stcp.chksum:
                bad(f"{where}: TCP checksum {stcp.chksum:#06x}, scapy computes {rb[TCP].chksum:#06x}")
            else:
                bad(f"{where}: scapy rebuilds other bytes of the segment differently")
    if joined != payload:
        bad(f"the segments' payloads together ({len(joined)} bytes) are not the original's ({len(payload)})")


def layers(p):
    """The header layers of a frame: Ethernet, VLAN tags, IP, TCP (not the payload)."""
    out, layer = [], p
    while layer is not None and not isinstance(layer, TCP):
        out.append(layer)
        layer = layer.payload if layer.payload else None
    if layer is not None:
        out.append(layer)
    return out


def main():
    pcap, manifest = sys.argv[1], sys.argv[2]
    records = [bytes(data) for data, _ in RawPcapReader(pcap)]
    with open(manifest, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    segments = 0
    for case in cases:
        first, count = case["first"], case["count"]
        check_case(case, records[case["orig"]], records[first:first + count], out)
        segments += count
    for line in out:
        print(line)
    print(f"checked {len(cases)} cases, {segments} segments")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Golden pcaps of the virtual switch (a bridge in flow mode on pcap ports), computed by scapy.

    /usr/bin/python3 tests/golden/flow/make_switch_golden.py [--out DIR] [--print]
        writes DIR/switch.toml (the bridge, its rules and groups), DIR/switch_input.pcap (what
        port p1 receives), DIR/expected_switch_p1.pcap .. expected_switch_p6.pcap (what each
        port must send) and DIR/expected_switch.json (per-rule packet counts, malformed frames,
        drops, and the flows a hashing select group spreads over two ports).

Every case says by hand, next to the rules, what OpenFlow semantics make of its frame (which
ports get which copy, which rules it hits); the bytes of each copy are built here with scapy
from first principles (fields rewritten, checksums recomputed by scapy, tags pushed and popped),
never by vecplane. The rules use output, in_port, flood, several outputs, set_field on MACs,
IPv4/IPv6 addresses, L4 ports and DSCP, dec_ttl (with TTL 1 ending the action list), push/pop
VLAN, goto_table, resubmit, groups of type all and select, normal (the learning bridge), and a
default drop. Malformed and truncated frames go to the switch too: they are forwarded unchanged
by a rule that only looks at Ethernet, and counted as malformed.

vecplane/tests/flow_switch_golden.rs runs `vecplane run --config switch.toml --stats-json ...`
and checks its outputs against these files (and that they are what this script writes).
"""

import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))

import vecmodel  # noqa: E402
from scapy.all import ARP, IP, TCP, UDP, Dot1Q, Ether, IPv6, Raw  # noqa: E402

T0 = 1_700_000_000 * 1_000_000_000
H1 = "02:00:00:00:f1:01"       # the host behind p1 (sender of everything)
SW = "02:00:00:00:f2:02"       # the destination MAC of most frames (never learned)
UNKNOWN = "02:00:00:00:dd:99"  # a unicast MAC the bridge never learns
SEL = "02:00:00:00:5e:1e"      # frames of the hashing select group (checked apart)
BAD = "02:00:00:00:ee:ee"      # malformed frames (forwarded by an Ethernet-only rule)
SRC4, SRC6 = "198.18.0.1", "2001:db8:f::1"
PORTS = ["p1", "p2", "p3", "p4", "p5", "p6"]
OTHERS = ["p2", "p3", "p4", "p5", "p6"]   # flood from p1

# The rules, by name (their counters are checked by name). Table 0 unless said.
RULES = [
    ("out", "priority=100,ip,nw_dst=198.18.10.1,actions=output:2"),
    ("flood", "priority=100,ip,nw_dst=198.18.10.2,actions=flood"),
    ("multi", "priority=100,ip,nw_dst=198.18.10.3,actions=output:2,output:3,output:4"),
    ("rewrite-tcp", "priority=100,tcp,nw_dst=198.18.10.4,actions=mod_dl_src:02:00:00:00:aa:01,"
                    "mod_dl_dst:02:00:00:00:aa:02,mod_nw_src:198.18.20.1,"
                    "mod_nw_dst:198.18.20.2,mod_tp_src:1111,mod_tp_dst:2222,output:2"),
    ("rewrite-udp", "priority=100,udp,nw_dst=198.18.10.4,"
                    "actions=set_field:3333->udp_src,set_field:4444->udp_dst,output:2"),
    ("dscp-ttl", "priority=100,udp,nw_dst=198.18.10.5,"
                 "actions=output:2,set_field:46->ip_dscp,dec_ttl,output:3"),
    ("v6-rewrite", "priority=100,udp6,ipv6_dst=2001:db8:10::6,"
                   "actions=set_field:2001:db8:20::1->ipv6_src,"
                   "set_field:2001:db8:20::2->ipv6_dst,dec_ttl,output:4"),
    ("v6-port", "priority=100,tcp6,ipv6_dst=2001:db8:10::7,actions=set_field:8080->tcp_dst,"
                "output:4"),
    ("push", "priority=100,ip,nw_dst=198.18.10.8,actions=push_vlan:0x8100,mod_vlan_vid:100,"
             "mod_vlan_pcp:5,output:5"),
    ("pop", "priority=100,dl_vlan=200,actions=strip_vlan,output:5"),
    ("goto", "priority=100,ip,nw_dst=198.18.10.10,actions=goto_table:1"),
    ("t1-udp", "table=1,priority=10,udp,tp_dst=5000,actions=output:6"),
    ("t1-drop", "table=1,priority=0,actions=drop"),
    ("resubmit", "priority=100,ip,nw_dst=198.18.10.11,actions=mod_dl_dst:02:00:00:00:bb:01,"
                 "resubmit(,2),output:3"),
    ("t2-mac", "table=2,priority=10,dl_dst=02:00:00:00:bb:01,actions=output:4"),
    ("all", "priority=100,ip,nw_dst=198.18.10.12,actions=group:1"),
    ("select-one", "priority=100,ip,nw_dst=198.18.10.13,actions=group:2"),
    ("select-hash", "priority=100,ip,nw_dst=198.18.10.14,actions=group:3"),
    ("arp-normal", "priority=90,arp,actions=normal"),
    ("normal", "priority=100,ip,nw_dst=198.18.10.15,actions=normal"),
    ("in-port", "priority=100,ip,nw_dst=198.18.10.16,actions=in_port"),
    ("out-in-port", "priority=100,ip,nw_dst=198.18.10.17,actions=output:1,output:2"),
    ("malformed", "priority=50,dl_dst=02:00:00:00:ee:ee,actions=output:6"),
    ("default", "priority=0,actions=drop"),
]

GROUPS = [
    "group_id=1,type=all,bucket=output:2,bucket=mod_dl_dst:02:00:00:00:cc:01,output:3",
    "group_id=2,type=select,bucket=weight:0,output:2,bucket=weight:100,output:4",
    "group_id=3,type=select,bucket=output:5,bucket=output:6",
]

Case = collections.namedtuple("Case", "what frame out hits malformed")


def ts_of(i):
    return T0 + i * 1_000_000 + 7 * i + 1


def pay(tag, size=24):
    return Raw((tag.encode() + b"|" + bytes(range(256)))[:size])


def udp4(dst, tag, dmac=SW, sport=1024, dport=4000, ttl=64, tos=0, chksum=None):
    u = UDP(sport=sport, dport=dport) if chksum is None else UDP(sport=sport, dport=dport,
                                                                   chksum=chksum)
    return Ether(src=H1, dst=dmac) / IP(src=SRC4, dst=dst, ttl=ttl, tos=tos) / u / pay(tag)


def tcp4(dst, tag, dmac=SW, sport=40000, dport=80):
    return (Ether(src=H1, dst=dmac) / IP(src=SRC4, dst=dst) /
            TCP(sport=sport, dport=dport, flags="PA", seq=1, ack=1) / pay(tag))


def rebuild(pkt):
    """The frame with every length and checksum recomputed by scapy (a UDP checksum of 0, "none",
    stays 0). `delattr` also drops scapy's cache of the dissected bytes."""
    for layer, fields in ((IP, ("chksum", "len")), (TCP, ("chksum",)), (UDP, ("chksum", "len")),
                          (IPv6, ("plen",))):
        if pkt.haslayer(layer):
            for f in fields:
                if not (layer is UDP and f == "chksum" and pkt[UDP].chksum == 0):
                    delattr(pkt[layer], f)
    return bytes(pkt.__class__(bytes(pkt)))


def edit(frame, fn):
    """A copy of `frame` (bytes) edited by `fn(pkt)` with checksums recomputed."""
    p = Ether(frame)
    fn(p)
    return rebuild(p)


def cases():
    out = []

    def add(what, pkt, sends, hits, malformed=None):
        out.append(Case(what, bytes(pkt), sends, hits, malformed))

    def same(ports):
        return [(p, None) for p in ports]

    add("output:2", udp4("198.18.10.1", "out"), same(["p2"]), ["out"])
    add("flood", udp4("198.18.10.2", "flood"), same(OTHERS), ["flood"])
    add("three outputs", udp4("198.18.10.3", "multi"), same(["p2", "p3", "p4"]), ["multi"])

    def rw_tcp(p):
        p[Ether].src, p[Ether].dst = "02:00:00:00:aa:01", "02:00:00:00:aa:02"
        p[IP].src, p[IP].dst = "198.18.20.1", "198.18.20.2"
        p[TCP].sport, p[TCP].dport = 1111, 2222
    add("MACs, IPv4 addresses and TCP ports rewritten", tcp4("198.18.10.4", "rw"),
        [("p2", rw_tcp)], ["rewrite-tcp"])

    def rw_udp(p):
        p[UDP].sport, p[UDP].dport = 3333, 4444
    add("UDP ports rewritten", udp4("198.18.10.4", "rwu"), [("p2", rw_udp)], ["rewrite-udp"])
    add("UDP ports rewritten, checksum 0 stays 0", udp4("198.18.10.4", "rwu0", chksum=0),
        [("p2", rw_udp)], ["rewrite-udp"])

    def dscp_ttl(p):
        p[IP].tos = (46 << 2) | (p[IP].tos & 3)
        p[IP].ttl -= 1
    add("output, then DSCP 46 and TTL-1 on the next copy",
        udp4("198.18.10.5", "dscp", ttl=64, tos=0x01), [("p2", None), ("p3", dscp_ttl)],
        ["dscp-ttl"])
    add("TTL 1: dec_ttl ends the action list (the copy before it leaves)",
        udp4("198.18.10.5", "ttl1", ttl=1), [("p2", None)], ["dscp-ttl"])

    def v6rw(p):
        p[IPv6].src, p[IPv6].dst = "2001:db8:20::1", "2001:db8:20::2"
        p[IPv6].hlim -= 1
    add("IPv6 addresses rewritten, hop limit - 1",
        Ether(src=H1, dst=SW) / IPv6(src=SRC6, dst="2001:db8:10::6", hlim=64) /
        UDP(sport=7, dport=9) / pay("v6"), [("p4", v6rw)], ["v6-rewrite"])

    def v6port(p):
        p[TCP].dport = 8080
    add("TCP/IPv6 port rewritten",
        Ether(src=H1, dst=SW) / IPv6(src=SRC6, dst="2001:db8:10::7") /
        TCP(sport=50000, dport=80, flags="S") / pay("v6t"), [("p4", v6port)], ["v6-port"])

    def push(p):
        payload = p.payload
        p.remove_payload()
        p.type = 0x8100
        p.add_payload(Dot1Q(vlan=100, prio=5, type=0x0800) / payload)
    add("VLAN 100 pcp 5 pushed", udp4("198.18.10.8", "push"), [("p5", push)], ["push"])
    tagged = (Ether(src=H1, dst=SW) / Dot1Q(vlan=200, prio=3) /
              IP(src=SRC4, dst="198.18.10.9") / UDP(sport=1, dport=2) / pay("pop"))

    def pop(p):
        inner = p[Dot1Q].payload
        p.remove_payload()
        p.type = 0x0800
        p.add_payload(inner)
    add("VLAN 200 popped", tagged, [("p5", pop)], ["pop"])
    add("goto_table:1, UDP 5000 out of p6", udp4("198.18.10.10", "goto", dport=5000),
        same(["p6"]), ["goto", "t1-udp"])
    add("goto_table:1, other UDP dropped there", udp4("198.18.10.10", "goto-d", dport=5001),
        [], ["goto", "t1-drop"])

    def bb(p):
        p[Ether].dst = "02:00:00:00:bb:01"
    add("resubmit(,2) sees the rewritten MAC", udp4("198.18.10.11", "resub"),
        [("p4", bb), ("p3", bb)], ["resubmit", "t2-mac"])

    def cc(p):
        p[Ether].dst = "02:00:00:00:cc:01"
    add("group all: each bucket on its own copy", udp4("198.18.10.12", "all"),
        [("p2", None), ("p3", cc)], ["all"])
    add("group select: a weight-0 bucket is never chosen", udp4("198.18.10.13", "sel1"),
        same(["p4"]), ["select-one"])
    # The hashing select group: 24 TCP flows of 2 packets each; each flow must leave wholly
    # on p5 or wholly on p6 (checked by the test, not byte for byte in the expected pcaps).
    for f in range(24):
        for k in range(2):
            add(f"group select by hash, flow {f}",
                tcp4("198.18.10.14", f"sel{f}.{k}", dmac=SEL, sport=20000 + f),
                [("select", None)], ["select-hash"])
    add("ARP broadcast through normal: the bridge floods it (and learns H1 on p1)",
        Ether(src=H1, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=H1, psrc=SRC4,
                                                    pdst="198.18.0.9"),
        same(OTHERS), ["arp-normal"])
    add("normal to an unknown unicast MAC: flooded", udp4("198.18.10.15", "norm-u", dmac=UNKNOWN),
        same(OTHERS), ["normal"])
    add("normal to H1, learned on p1 itself: filtered", udp4("198.18.10.15", "norm-h", dmac=H1),
        [], ["normal"])
    add("in_port: back out of p1", udp4("198.18.10.16", "inport"), same(["p1"]), ["in-port"])
    add("output:1 is the input port: not sent", udp4("198.18.10.17", "outin"), same(["p2"]),
        ["out-in-port"])
    add("no rule but the default: dropped", udp4("198.18.10.99", "none"), [], ["default"])
    # Malformed and truncated frames: all to BAD, IPv4 destination (if any) .30, which no IP
    # rule names, so however much of them parses, the Ethernet-only rule sends them to p6.
    ip30 = bytes(Ether(src=H1, dst=BAD) / IP(src=SRC4, dst="198.18.10.30") / UDP() / pay("m"))
    add("IPv4 header cut at 10 bytes", Ether(ip30[:24]), same(["p6"]), ["malformed"],
        "ipv4_truncated")
    bad_ihl = bytearray(ip30)
    bad_ihl[14] = 0x43
    add("IPv4 header length 12", Ether(bytes(bad_ihl)), same(["p6"]), ["malformed"],
        "ipv4_bad_header_length")
    add("IPv4 total length past the frame",
        Ether(src=H1, dst=BAD) / IP(src=SRC4, dst="198.18.10.30", len=1400) / UDP() / pay("l"),
        same(["p6"]), ["malformed"], "ipv4_bad_total_length")
    tcp30 = bytes(Ether(src=H1, dst=BAD) / IP(src=SRC4, dst="198.18.10.30", len=28, proto=6) /
                  Raw(bytes(TCP(sport=5, dport=6))[:8]))
    add("TCP header of 8 bytes", Ether(tcp30), same(["p6"]), ["malformed"], "tcp_truncated")
    add("IPv6 header cut at 20 bytes",
        Ether(bytes(Ether(src=H1, dst=BAD) / IPv6(src=SRC6, dst="2001:db8:10::30"))[:34]),
        same(["p6"]), ["malformed"], "ipv6_truncated")
    add("VLAN tag cut short", Ether(bytes(Ether(src=H1, dst=BAD, type=0x8100))[:14] + b"\x00"),
        same(["p6"]), ["malformed"], "vlan_truncated")
    # Shorter than an Ethernet header: ethernet-input drops it (runt) before the switch.
    out.append(Case("10-byte runt", bytes.fromhex("02000000eeee02000000"), [], [], None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=HERE, help="directory to write into (default: beside me)")
    ap.add_argument("--print", action="store_true", help="list the cases")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    inputs, outputs = [], {p: [] for p in PORTS}
    select_flows = collections.defaultdict(list)
    hits, malformed = collections.Counter(), collections.Counter()
    dropped = 0
    for i, c in enumerate(cases()):
        ts = ts_of(i)
        inputs.append((ts, c.frame))
        for port, fn in c.out:
            if port == "select":
                select_flows[c.what].append(ts)
                continue
            outputs[port].append((ts, c.frame if fn is None else edit(c.frame, fn)))
        dropped += not c.out
        for h in c.hits:
            hits[h] += 1
        if c.malformed:
            malformed[c.malformed] += 1
        if args.print:
            print(f"{i:3} {ts} {c.what}: {[p for p, _ in c.out]} {c.hits}")
    names = [n for n, _ in RULES]
    assert len(set(names)) == len(names)
    assert set(hits) <= set(names), set(hits) - set(names)
    vecmodel.write_pcap(os.path.join(args.out, "switch_input.pcap"), inputs)
    for p in PORTS:
        vecmodel.write_pcap(os.path.join(args.out, f"expected_switch_{p}.pcap"), outputs[p])
    expected = {
        "comment": "What vecplane must report for switch_input.pcap: packets per rule (n_packets, "
                   "by the rule's cookie in switch.toml), malformed frames per reason, the flows "
                   "of the hashing select group (timestamps of each flow's packets; every flow "
                   "leaves wholly on p5 or wholly on p6, with destination MAC " + SEL + "), and "
                   "the frames that leave by no port.",
        "rules": {f"{i + 1:#x}": {"name": name, "n_packets": hits[name]}
                  for i, (name, _) in enumerate(RULES)},
        "malformed": dict(sorted(malformed.items())),
        "select_mac": SEL,
        "select_flows": [select_flows[k] for k in sorted(select_flows)],
        "rx_packets": len(inputs),
        "dropped_frames": dropped,
        "tx_packets": {p: len(outputs[p]) for p in PORTS},
    }
    with open(os.path.join(args.out, "expected_switch.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(args.out, "switch.toml"), "w") as f:
        f.write(config())


def config():
    """The bridge: p1 receives switch_input.pcap and sends too; p2..p6 only send."""
    lines = [
        "# Golden test of the virtual switch: a bridge in flow mode on pcap ports.",
        "# Written by make_switch_golden.py (do not edit; edit the script and rerun it).",
        "",
        "[[bridge]]",
        'name = "fsw"',
        'mode = "flow"',
        "flows = [",
    ]
    # Each rule's cookie is its number here: the test finds its counters by it.
    lines += [f'  "cookie={i + 1:#x},{text}",  # {name}' for i, (name, text) in enumerate(RULES)]
    lines += ["]", "groups = ["]
    lines += [f'  "{g}",' for g in GROUPS]
    lines += ["]", ""]
    for n, p in enumerate(PORTS, start=1):
        lines += ["[[port]]", f'name = "{p}"', 'driver = "pcap"',
                  f'mac = "02:00:00:00:0f:{n:02x}"']
        if p == "p1":
            lines.append('rx = "switch_input.pcap"')
        lines += [f'tx = "{p}.out.pcap"', 'bridge = "fsw"', f"ofport = {n}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes flows-random.in: random valid rules (fixed seed) mixing every supported match field
and action with random values and masks, for record.sh to run through Open vSwitch.

    python3 random_flows.py [COUNT] > flows-random.in
"""

import ipaddress
import random
import sys

rng = random.Random(20261125)


def mac():
    return ":".join(f"{rng.randrange(256):02x}" for _ in range(6))


def v4():
    return str(ipaddress.IPv4Address(rng.getrandbits(32)))


def v6():
    return str(ipaddress.IPv6Address(rng.getrandbits(128)))


def hexm(bits):
    return f"{rng.getrandbits(bits):#x}/{rng.getrandbits(bits):#x}"


def rule():
    proto = rng.choice(["", "ip", "ipv6", "arp", "tcp", "udp", "sctp", "icmp", "tcp6", "udp6",
                        "sctp6", "icmp6", "dl_type=0x88cc"])
    is4 = proto in ("ip", "tcp", "udp", "sctp", "icmp")
    is6 = proto in ("ipv6", "tcp6", "udp6", "sctp6", "icmp6")
    p = []
    if rng.random() < 0.3:
        p.append(f"table={rng.randrange(0, 200)}")
    if rng.random() < 0.7:
        p.append(f"priority={rng.randrange(65536)}")
    if rng.random() < 0.3:
        p.append(f"cookie={rng.getrandbits(64):#x}")
    if rng.random() < 0.2:
        p.append(f"idle_timeout={rng.randrange(1, 65536)}")
    if rng.random() < 0.2:
        p.append(f"hard_timeout={rng.randrange(1, 65536)}")
    if proto:
        p.append(proto)
    opt = lambda pr: rng.random() < pr
    if opt(0.4):
        p.append(f"in_port={rng.randrange(1, 65280)}")
    r = rng.random()
    if r < 0.15:
        p.append(f"dl_vlan={rng.randrange(4096)}")
    elif r < 0.25:
        p.append(f"dl_vlan={rng.randrange(4096)},dl_vlan_pcp={rng.randrange(8)}")
    elif r < 0.35:
        p.append(f"vlan_tci={rng.getrandbits(16):#06x}/{rng.getrandbits(16):#06x}")
    if opt(0.3):
        p.append(f"dl_src={mac()}" + (f"/{mac()}" if opt(0.5) else ""))
    if opt(0.3):
        p.append(f"eth_dst={mac()}" + (f"/{mac()}" if opt(0.5) else ""))
    if is4 or proto == "arp":
        if opt(0.6):
            p.append(f"nw_src={v4()}/{rng.randrange(33)}")
        if opt(0.6):
            p.append(f"nw_dst={v4()}" + (f"/{v4()}" if opt(0.5) else ""))
    if proto == "arp":
        if opt(0.5):
            p.append(f"arp_op={rng.randrange(256)}")
        if opt(0.4):
            p.append(f"arp_sha={mac()}/{mac()}")
        if opt(0.4):
            p.append(f"arp_tha={mac()}")
    if is6:
        if opt(0.6):
            p.append(f"ipv6_src={v6()}/{rng.randrange(129)}")
        if opt(0.6):
            p.append(f"ipv6_dst={v6()}" + (f"/{v6()}" if opt(0.5) else ""))
        if opt(0.4):
            p.append(f"ipv6_label={rng.getrandbits(20):#x}" + (f"/{rng.getrandbits(20):#x}" if opt(0.5) else ""))
    if is4 or is6:
        if proto in ("ip", "ipv6") and opt(0.3):
            p.append(f"nw_proto={rng.choice([47, 50, 89, 103, 0, 255])}")
        if opt(0.3):
            p.append(rng.choice([f"nw_tos={rng.randrange(64) * 4}", f"ip_dscp={rng.randrange(64)}"]))
        if opt(0.3):
            p.append(f"nw_ecn={rng.randrange(4)}")
        if opt(0.3):
            p.append(f"nw_ttl={rng.randrange(256)}")
        if opt(0.3):
            p.append(f"ip_frag={rng.choice(['no', 'yes', 'first', 'later', 'not_later'])}")
    if proto in ("tcp", "udp", "sctp", "tcp6", "udp6", "sctp6"):
        if opt(0.5):
            p.append(f"tp_src={rng.randrange(65536)}")
        if opt(0.5):
            p.append(f"tp_dst={hexm(16)}" if opt(0.5) else f"tp_dst={rng.randrange(65536)}")
    if proto in ("tcp", "tcp6") and opt(0.5):
        flags = ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"]
        picked = rng.sample(flags, rng.randrange(1, 5))
        p.append("tcp_flags=" + rng.choice([
            "".join(rng.choice("+-") + f for f in picked),
            "|".join(picked),
            f"{rng.getrandbits(12):#05x}/{rng.getrandbits(12):#05x}",
        ]))
    if proto in ("icmp", "icmp6"):
        if opt(0.6):
            p.append(f"icmp_type={rng.randrange(256)}")
        if opt(0.4):
            p.append(f"icmp_code={rng.randrange(256)}")
    for i in range(8):
        if opt(0.08):
            p.append(f"reg{i}={hexm(32)}" if opt(0.5) else f"reg{i}={rng.getrandbits(32):#x}")
    if opt(0.2):
        p.append(f"tun_id={hexm(64)}" if opt(0.5) else f"tunnel_id={rng.getrandbits(64)}")
    if opt(0.15):
        p.append(f"metadata={hexm(64)}")
    rng.shuffle(p)
    acts = []
    for _ in range(rng.randrange(0, 5)):
        a = rng.choice(["out", "out", "reserved", "set_eth", "set_reg", "load", "tun", "dec",
                        "resubmit", "group", "ip", "vlan"])
        if a == "out":
            acts.append(rng.choice([f"output:{rng.randrange(1, 65280)}", str(rng.randrange(1, 100))]))
        elif a == "reserved":
            acts.append(rng.choice(["in_port", "flood", "all", "normal", "LOCAL", "output:NORMAL"]))
        elif a == "set_eth":
            acts.append(rng.choice([f"set_field:{mac()}->eth_src", f"mod_dl_dst:{mac()}"]))
        elif a == "set_reg":
            acts.append(f"set_field:{rng.getrandbits(32):#x}->reg{rng.randrange(8)}"
                        if opt(0.5) else f"set_field:{hexm(32)}->reg{rng.randrange(8)}")
        elif a == "load":
            lo = rng.randrange(32)
            hi = rng.randrange(lo, 32)
            acts.append(f"load:{rng.getrandbits(hi - lo + 1):#x}->NXM_NX_REG{rng.randrange(8)}[{lo}..{hi}]")
        elif a == "tun":
            acts.append(rng.choice([f"set_tunnel:{rng.getrandbits(32)}", f"set_field:{rng.getrandbits(64):#x}->tun_id"]))
        elif a == "dec" and (is4 or is6):
            acts.append("dec_ttl")
        elif a == "resubmit":
            acts.append(rng.choice([f"resubmit:{rng.randrange(1, 100)}", f"resubmit(,{rng.randrange(254)})",
                                    f"resubmit({rng.randrange(1, 100)},{rng.randrange(254)})"]))
        elif a == "group":
            acts.append(f"group:{rng.choice([1, 2])}")
        elif a == "ip" and is4:
            acts.append(rng.choice([f"set_field:{v4()}->ip_dst", f"mod_nw_src:{v4()}",
                                    f"mod_nw_tos:{rng.randrange(64) * 4}"]))
        elif a == "ip" and proto in ("tcp", "udp"):
            acts.append(f"set_field:{rng.randrange(65536)}->{proto}_dst")
        elif a == "vlan":
            acts.append(rng.choice([f"mod_vlan_vid:{rng.randrange(4096)}",
                                    f"push_vlan:0x8100,set_field:{4096 + rng.randrange(4096)}->vlan_vid"]))
    table = next((int(x[6:]) for x in p if x.startswith("table=")), 0)
    if opt(0.15) and table < 253:
        acts.append(f"goto_table:{rng.randrange(table + 1, 254)}")
    return ",".join(p + ["actions=" + (",".join(acts) if acts else "drop")])


n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
print("# Random valid rules from random_flows.py (seed 20261125); record.sh runs them through OVS.")
for _ in range(n):
    print(rule())

#!/usr/bin/env python3
"""Seeds the cargo-fuzz corpora from the golden pcaps (no scapy needed).

    python3 scripts/fuzz_seeds.py [FUZZ_DIR]

fuzz/corpus/graph_input/: one file per frame of tests/golden/input.pcap and l2xc_input.pcap, each
prefixed with the selector byte of fuzz_targets/graph_input.rs (0 = port p0, 3 = the
cross-connected port p3); fuzz/corpus/pcap_reader/: the golden pcap files themselves, plus
variants in the other byte order and in microseconds; fuzz/corpus/flow_extract/: the frames of
those pcaps and of tests/golden/flow/extract.pcap behind the target's 4-byte head;
fuzz/corpus/ofctl_parse/: every rule, dump line and group of crates/flow/tests/golden/ofctl/;
fuzz/corpus/lb_cli/: every line of crates/lb/tests/lb_cli_lines.txt, and the whole file.
fuzz/corpus/lb_parse/: the packets of crates/lb/tests/golden/lb_input.pcap behind each selector.
fuzz/corpus/gso_segment/: TCP super-packets built here (IPv4/IPv6, 0-2 VLAN tags, IP and TCP
options, payloads from 0 to 9000 bytes) behind the target's 5-byte head (kind, mss, csum_start,
csum_offset).
fuzz/corpus/config_text/: the example configs (examples/*.toml) and the config test files;
fuzz/corpus/route_file/: route lines of both families, a drop, comments and a bad line;
fuzz/corpus/ctl_command/: command lines of the README's tour; fuzz/corpus/bird_reply/: a greeting,
a table and refusals as BIRD writes them; fuzz/corpus/api_body/: a body per endpoint, behind its
selector byte (the index among the endpoints that take a body, as control::fuzzing orders them).
Existing files are kept (libFuzzer adds its own finds next to them).
"""

import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GOLDEN = os.path.join(ROOT, "tests", "golden")


def records(blob):
    magic = struct.unpack("<I", blob[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off, out = 24, []
    while off + 16 <= len(blob):
        sec, frac, caplen, orig = struct.unpack(e + "IIII", blob[off:off + 16])
        out.append((sec, frac, orig, blob[off + 16:off + 16 + caplen]))
        off += 16 + caplen
    return out


def pcap(recs, e="<", nanos=True):
    b = struct.pack(e + "IHHiIII", 0xA1B23C4D if nanos else 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for sec, frac, orig, data in recs:
        b += struct.pack(e + "IIII", sec, frac if nanos else frac // 1000, len(data), orig) + data
    return b


def put(d, data):
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    path = os.path.join(d, name)
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)


def main():
    fuzz = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fuzz")
    gi = os.path.join(fuzz, "corpus", "graph_input")
    pr = os.path.join(fuzz, "corpus", "pcap_reader")
    n = 0
    for name, selector in (("input.pcap", 0), ("l2xc_input.pcap", 3)):
        with open(os.path.join(GOLDEN, name), "rb") as f:
            blob = f.read()
        recs = records(blob)
        for _, _, _, data in recs:
            put(gi, bytes([selector]) + data)
            n += 1
        put(pr, blob)
        put(pr, pcap(recs[:8], ">", True))
        put(pr, pcap(recs[:8], "<", False))
        put(pr, blob[:len(blob) // 2])  # truncated inside a record
    # flow_extract: every golden frame (the router's and the flow extraction's), each behind the
    # target's 4-byte head (field, in_port, seed) with "fill checksums" set, so the header
    # writes start from valid checksums.
    fe = os.path.join(fuzz, "corpus", "flow_extract")
    m = 0
    for name in ("input.pcap", "l2xc_input.pcap", os.path.join("flow", "extract.pcap")):
        path = os.path.join(GOLDEN, name)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            recs = records(f.read())
        for i, (_, _, _, data) in enumerate(recs):
            put(fe, bytes([0x40 | (i % 64), 0, 1, i % 256]) + data)
            m += 1
    print(f"seeded {n} frames into {gi}, pcap files into {pr}, {m} frames into {fe}")
    oc = os.path.join(fuzz, "corpus", "ofctl_parse")
    golden_ofctl = os.path.join(ROOT, "crates", "flow", "tests", "golden", "ofctl")
    k = 0
    for name in sorted(os.listdir(golden_ofctl)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(golden_ofctl, name), encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("#"):
                    continue
                text = line.split(": ", 1)[1] if ": " in line[:12] else line.strip()
                if text.startswith("group:"):
                    text = text[len("group:"):]
                if text:
                    put(oc, text.encode())
                    k += 1
    print(f"seeded {k} lines of ovs-ofctl text into {oc}")
    lc = os.path.join(fuzz, "corpus", "lb_cli")
    with open(os.path.join(ROOT, "crates", "lb", "tests", "lb_cli_lines.txt"), encoding="utf-8") as f:
        text = f.read()
    j = 0
    for line in text.splitlines():
        if line and not line.startswith("#"):
            put(lc, line.encode())
            j += 1
    put(lc, text.split("# refused")[0].encode())
    print(f"seeded {j} lb lines into {lc}")
    # lb_parse: the L3 packets of the load balancer's golden frames (Ethernet header cut), each
    # behind the target's selector byte (bit 0: IPv6; bits 1-3: the rewrite) for every rewrite.
    lp = os.path.join(fuzz, "corpus", "lb_parse")
    lb_golden = os.path.join(ROOT, "crates", "lb", "tests", "golden", "lb_input.pcap")
    j = 0
    if os.path.exists(lb_golden):
        with open(lb_golden, "rb") as f:
            recs = records(f.read())
        for _, _, _, data in recs:
            ip6 = 1 if data[12:14] == b"\x86\xdd" else 0
            for op in range(6):
                put(lp, bytes([op << 1 | ip6]) + data[14:])
                j += 1
    print(f"seeded {j} packets into {lp}")
    gs = os.path.join(fuzz, "corpus", "gso_segment")
    j = 0
    for v6 in (False, True):
        for tags in ((), ((0x8100, 7),), ((0x88A8, 1), (0x8100, 2))):
            for ip_opts, tcp_opts in ((b"", b""), (b"\x01" * 4, b"\x01\x01\x08\x0a" + bytes(8))):
                for payload, mss in ((0, 1448), (100, 1448), (4000, 1448), (3000, 7), (9000, 8948)):
                    frame, l4 = tcp_frame(v6, tags, ip_opts, tcp_opts, payload)
                    head = bytes([1 if v6 else 0]) + struct.pack(">H", mss) + bytes([l4, 16])
                    put(gs, head + frame)
                    j += 1
    print(f"seeded {j} super-packets into {gs}")

    text_seeds(fuzz)


def text_seeds(fuzz):
    """The control plane's text inputs (targets config_text .. api_body)."""
    ct = os.path.join(fuzz, "corpus", "config_text")
    for d in (os.path.join(ROOT, "examples"),):
        for name in sorted(os.listdir(d)):
            if name.endswith(".toml"):
                with open(os.path.join(d, name), "rb") as f:
                    put(ct, f.read())
    rf = os.path.join(fuzz, "corpus", "route_file")
    put(rf, b"198.18.2.0/24 via 198.18.1.2\n2001:db8:9::/48 via 2001:db8:3::2\n")
    put(rf, b"# routes\n198.18.4.0/22 via 198.18.1.2 198.18.3.2\n\n198.18.5.0/24 drop  # gone\n")
    put(rf, b"198.18.2.1/24 via 198.18.1.2\n198.18.6.0/24 via 198.18.9.9\n\xff\n")
    cc = os.path.join(fuzz, "corpus", "ctl_command")
    for line in ("show interfaces", "show ip fib 198.18.2.1", "show runtime", "clear runtime",
                 "trace add ethernet-input 10", "show trace", "show errors", "show neighbours",
                 "show lb vips verbose", "lb which 198.18.100.1", "rxq move vm0 0 1",
                 "show bgp", "bgp drain 30", "show flow-cache", "help"):
        put(cc, line.encode())
    br = os.path.join(fuzz, "corpus", "bird_reply")
    put(br, b"0001 BIRD 2.0.12 ready.\n")
    put(br, b"0001 BIRD 2.0.12 ready.\n1007-Table master4:\n 198.18.100.1/32      unicast "
            b"[vecplane4 02:13:07.466] * (200)\n\tType: static univ\n0000 \n")
    put(br, b"0002-Reading configuration from /etc/bird/bird.conf\n0003 Reconfigured\n")
    put(br, b"9001 syntax error, unexpected CF_SYM_UNDEFINED\n8001 Protocol is down\n")
    ab = os.path.join(fuzz, "corpus", "api_body")
    bodies = [
        b'{"routes":[{"prefix":"198.18.2.0/24","via":["198.18.1.2"]}]}',
        b'{"prefix":"198.18.2.0/24","via":"198.18.1.2"}',
        b'{"action":"drop"}',
        b'{"ip":"198.18.1.9","mac":"02:00:00:00:02:09","port":"in0"}',
        b'{"items":[{"op":"add","route":{"prefix":"198.18.7.0/24","via":"198.18.1.2"}}]}',
        b'{"ip4":["198.18.1.1/24"],"mtu":1500}',
        b'{"lines":["lb vip 198.18.100.1/32 protocol tcp port 80 encap gre4"]}',
        b'{"prefix":"198.18.100.1/32","protocol":"tcp","port":80,"encap":"gre4"}',
        b'{"addresses":["198.18.12.11"],"weight":50}',
        b'{"weight":0,"flush":true}',
        b'{"flows":["priority=1,ip,actions=drop"]}',
    ]
    for selector in range(24):
        for body in bodies:
            put(ab, bytes([selector]) + body)


def tcp_frame(v6, tags, ip_opts, tcp_opts, payload_len):
    """A TCP super-packet as a guest sends one (lengths right, checksums left as they fall);
    returns it and the offset of its TCP header."""
    eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    for tpid, tci in tags:
        eth += struct.pack(">HH", tpid, tci)
    payload = bytes((i * 7) & 0xFF for i in range(payload_len))
    tcp = struct.pack(">HHIIBBHHH", 40000, 5201, 1, 1, (5 + len(tcp_opts) // 4) << 4, 0x18, 512, 0, 0)
    tcp += tcp_opts
    if v6:
        ip = struct.pack(">IHBB", 0x60000000, len(tcp) + payload_len, 6, 64)
        ip += bytes.fromhex("20010db8000000000000000000000001") + bytes.fromhex("20010db8000000010000000000000009")
        eth += b"\x86\xdd"
    else:
        ihl = 5 + len(ip_opts) // 4
        ip = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(tcp) + payload_len, 1, 0x4000, 64, 6, 0,
                         bytes([198, 18, 0, 1]), bytes([198, 19, 0, 1])) + ip_opts
        eth += b"\x08\x00"
    return eth + ip + tcp + payload, len(eth) + len(ip)


if __name__ == "__main__":
    main()

"""Reference model of the vecplane router/xconnect data plane, for tests.

It is written from the design and the RFCs, not from the Rust code: it reads a vecplane config
(TOML, the same file `vecplane run --config` takes), and for one received frame says what the
data plane must do with it: drop it (node, reason) or send which bytes out of which port.
Expected frames are built with scapy (the independent parser/builder): forwarded IPv4 gets TTL-1
and a checksum scapy recomputes, ICMP errors are scapy's IP()/ICMP()/quote.

Also: a small classic-pcap reader/writer (byte-exact control over what we compare against the
data plane's nanosecond pcap output) and helpers shared by make_golden.py, make_corpus.py and
check_replay.py. Run with /usr/bin/python3 (Debian's python3-scapy).
"""

import ipaddress
import os
import struct
import tomllib

from scapy.all import ICMP, IP, IPv6, ICMPv6PacketTooBig, ICMPv6TimeExceeded, Raw  # noqa: E402
from scapy.utils import checksum as scapy_checksum  # noqa: E402

# ------------------------------------------------------------------------------------------------
# pcap files

MAGIC_MICROS = 0xA1B2C3D4
MAGIC_NANOS = 0xA1B23C4D


def write_pcap(path, records, nanos=True, snaplen=65535, big_endian=False):
    """Write a classic pcap file: records are (timestamp_ns, bytes). By default the layout is
    exactly what vecplane's PcapWriter writes (little-endian, nanosecond magic, 2.4, snaplen 65535,
    Ethernet, orig_len = caplen), so an expected file can be compared byte for byte."""
    e = ">" if big_endian else "<"
    with open(path, "wb") as f:
        f.write(struct.pack(e + "IHHiIII", MAGIC_NANOS if nanos else MAGIC_MICROS, 2, 4, 0, 0,
                            snaplen, 1))
        for ts, data in records:
            sec, frac = divmod(ts, 1_000_000_000)
            if not nanos:
                frac //= 1000
            f.write(struct.pack(e + "IIII", sec, frac, len(data), len(data)))
            f.write(data)


def read_pcap(path):
    """Records (timestamp_ns, bytes) of a classic pcap file (either magic, either byte order)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 24:
        raise ValueError(f"{path}: {len(blob)} bytes, not a pcap file")
    magic_le = struct.unpack("<I", blob[:4])[0]
    magic_be = struct.unpack(">I", blob[:4])[0]
    if magic_le in (MAGIC_MICROS, MAGIC_NANOS):
        e, magic = "<", magic_le
    elif magic_be in (MAGIC_MICROS, MAGIC_NANOS):
        e, magic = ">", magic_be
    else:
        raise ValueError(f"{path}: bad magic {blob[:4].hex()}")
    nanos = magic == MAGIC_NANOS
    out = []
    off = 24
    while off < len(blob):
        if off + 16 > len(blob):
            raise ValueError(f"{path}: truncated record header at {off}")
        sec, frac, caplen, _orig = struct.unpack(e + "IIII", blob[off:off + 16])
        off += 16
        if off + caplen > len(blob):
            raise ValueError(f"{path}: truncated record data at {off}")
        ts = sec * 1_000_000_000 + (frac if nanos else frac * 1000)
        out.append((ts, blob[off:off + caplen]))
        off += caplen
    return out


# ------------------------------------------------------------------------------------------------
# byte helpers

def be16(b, at):
    return (b[at] << 8) | b[at + 1]


def be32(b, at):
    return int.from_bytes(b[at:at + 4], "big")


def mac_bytes(s):
    return bytes(int(x, 16) for x in s.split(":"))


def inet_checksum(data):
    """RFC 1071 checksum, written here independently of both scapy and vecplane."""
    if len(data) % 2:
        data = data + b"\0"
    s = 0
    for i in range(0, len(data), 2):
        s += (data[i] << 8) | data[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ip4_header_ok(h):
    """True when an IPv4 header (exactly IHL bytes) sums to 0xffff (its checksum verifies)."""
    return inet_checksum(h) == 0


TAG_TYPES = (0x8100, 0x88A8)

ICMP4_MAX = 576
ICMP6_MAX = 1280


# ------------------------------------------------------------------------------------------------
# configuration

class Port:
    def __init__(self, index, t):
        self.index = index
        self.name = t["name"]
        self.mac = mac_bytes(t["mac"])
        self.mtu = int(t.get("mtu", 1500))
        self.ip4 = [ipaddress.ip_interface(a) for a in t.get("ip4", [])]
        self.ip6 = [ipaddress.ip_interface(a) for a in t.get("ip6", [])]
        self.rx = t.get("rx")
        self.tx = t.get("tx")
        self.xconnect = None  # (to Port, dst mac bytes or None)


class Adjacency:
    def __init__(self, port, mac):
        self.port = port
        self.dst = mac
        self.src = port.mac
        self.mtu = port.mtu


class Fib:
    """Longest-prefix match over (network int, length, target); equal prefixes: the later wins.
    target: ("via", [Adjacency, ...]) | ("drop",) | ("local",) | ("unresolved",)"""

    def __init__(self, bits):
        self.bits = bits
        self.routes = {}

    def add(self, net, length, target):
        self.routes[(net, length)] = target

    def lookup(self, addr):
        for length in range(self.bits, -1, -1):
            mask = ((1 << self.bits) - 1) ^ ((1 << (self.bits - length)) - 1)
            t = self.routes.get((addr & mask, length))
            if t is not None:
                return t
        return None


class Config:
    def __init__(self, path):
        with open(path, "rb") as f:
            doc = tomllib.load(f)
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        dp = doc.get("dataplane", {})
        self.ip4_options = dp.get("ip4-options", "forward")
        self.icmp_per_second = int(dp.get("icmp-errors-per-second", 1000))
        self.icmp_burst = int(dp.get("icmp-errors-burst", 100))
        self.data_size = int(dp.get("data-size", 2048))
        self.ports = [Port(i, t) for i, t in enumerate(doc.get("port", []))]
        self.by_name = {p.name: p for p in self.ports}
        for x in doc.get("xconnect", []):
            frm, to = self.by_name[x["from"]], self.by_name[x["to"]]
            frm.xconnect = (to, mac_bytes(x["dst-mac"]) if "dst-mac" in x else None)
        adj = {}
        for n in doc.get("neighbour", []):
            adj[ipaddress.ip_address(n["ip"])] = Adjacency(self.by_name[n["port"]],
                                                           mac_bytes(n["mac"]))
        self.fib4, self.fib6 = Fib(32), Fib(128)
        # Install order as the design states: connected subnets (unresolved until a neighbour
        # entry exists), neighbour host routes, configured routes, own addresses (local).
        for p in self.ports:
            for a in p.ip4:
                if a.network.prefixlen < 32:
                    self.fib4.add(int(a.network.network_address), a.network.prefixlen,
                                  ("unresolved",))
            for a in p.ip6:
                if a.network.prefixlen < 128:
                    self.fib6.add(int(a.network.network_address), a.network.prefixlen,
                                  ("unresolved",))
        for ip, a in adj.items():
            (self.fib4 if ip.version == 4 else self.fib6).add(int(ip), ip.max_prefixlen,
                                                              ("via", [a]))
        for r in doc.get("route", []):
            net = ipaddress.ip_network(r["prefix"])
            fib = self.fib4 if net.version == 4 else self.fib6
            if r.get("action") == "drop":
                target = ("drop",)
            else:
                via = r["via"] if isinstance(r["via"], list) else [r["via"]]
                target = ("via", [adj[ipaddress.ip_address(v)] for v in via])
            fib.add(int(net.network_address), net.prefixlen, target)
        for p in self.ports:
            for a in p.ip4:
                self.fib4.add(int(a.ip), 32, ("local",))
            for a in p.ip6:
                self.fib6.add(int(a.ip), 128, ("local",))


# ------------------------------------------------------------------------------------------------
# outcomes

def drop(node, reason):
    return ("drop", node, reason)


def tx(port, frame, kind):
    """kind: "fwd4", "fwd6" (routed), "icmp4", "icmp6" (an error vecplane made), "xc"."""
    return ("tx", port.name, bytes(frame), kind)


class Model:
    """What the data plane must do with each received frame.

    `process(frame, rx_port_name)` returns a list of acceptable outcomes (more than one only for
    ECMP routes, where the member depends on the flow hash): ("drop", node, reason) or
    ("tx", port name, frame bytes). `kind` of the last call says what happened for statistics
    ("forward4", "icmp4", ...)."""

    def __init__(self, config):
        self.c = config

    # --- Ethernet ---------------------------------------------------------------------------

    def process(self, frame, rx_name):
        frame = bytes(frame)
        port = self.c.by_name[rx_name]
        if len(frame) == 0 or len(frame) > self.c.data_size:
            return [("rx-drop",)]
        if len(frame) < 14:
            return [drop("ethernet-input", "runt")]
        if port.xconnect is not None:
            to, dst = port.xconnect
            out = (dst if dst is not None else frame[0:6]) + to.mac + frame[12:]
            return [self.output(to, out, "xc")]
        # Multicast/broadcast MACs pass ethernet-input; the IP nodes then drop unicast packets
        # inside them as l2-multicast (RFC 1812 5.3.4).
        if frame[0] & 1 == 0 and frame[0:6] != port.mac:
            return [drop("ethernet-input", "not-for-us")]
        t, l3 = be16(frame, 12), 14
        for depth in range(3):
            if t not in TAG_TYPES:
                break
            if depth == 2:
                return [drop("ethernet-input", "too-many-vlan-tags")]
            if len(frame) < l3 + 4:
                return [drop("ethernet-input", "vlan-truncated")]
            t = be16(frame, l3 + 2)
            l3 += 4
        if t == 0x0800:
            return self.ip4_input(frame, l3, port)
        if t == 0x86DD:
            return self.ip6_input(frame, l3, port)
        if t == 0x0806:
            return [drop("ethernet-input", "arp-unsupported")]
        return [drop("ethernet-input", "unknown-ethertype")]

    def output(self, port, frame, kind):
        if port.tx is None:
            return drop("interface-output", "port-has-no-tx")
        return tx(port, frame, kind)

    # --- IPv4 -------------------------------------------------------------------------------

    def ip4_input(self, frame, l3, port):
        h = frame[l3:]
        if len(h) < 20:
            return [drop("ip4-input", "too-short")]
        if h[0] >> 4 != 4:
            return [drop("ip4-input", "bad-version")]
        ihl = (h[0] & 15) * 4
        total = be16(h, 2)
        if ihl < 20 or ihl > total:
            return [drop("ip4-input", "bad-ihl")]
        if total > len(h):
            return [drop("ip4-input", "bad-length")]
        if not ip4_header_ok(h[:ihl]):
            return [drop("ip4-input", "bad-checksum")]
        if ihl > 20 and self.c.ip4_options == "drop":
            return [drop("ip4-input", "options")]
        src, dst = be32(h, 12), be32(h, 16)
        if src >> 24 in (0, 127) or src >> 24 >= 224:
            return [drop("ip4-input", "bad-source")]
        if dst >> 28 >= 0xE:
            return [drop("ip4-input", "multicast-destination")]
        if frame[0] & 1:
            return [drop("ip4-input", "l2-multicast")]
        if h[8] <= 1:
            return self.icmp4_error(frame, l3, port, 11, 0, 0)
        return self.ip4_forward(frame, l3, port, local=False)

    def ip4_forward(self, frame, l3, rx, local):
        h = frame[l3:]
        target = self.c.fib4.lookup(be32(h, 16))
        if target is None:
            return [drop("ip4-lookup", "no-route")]
        if target[0] != "via":
            return [drop("ip4-lookup", {"drop": "blackhole", "local": "to-us",
                                        "unresolved": "neighbour-unresolved"}[target[0]])]
        outs = []
        for adj in target[1]:
            for o in self.ip4_rewrite(frame, l3, rx, adj, local):
                if o not in outs:
                    outs.append(o)
        return outs

    def ip4_rewrite(self, frame, l3, rx, adj, local):
        h = frame[l3:]
        total = be16(h, 2)
        if total > adj.mtu:
            if be16(h, 6) & 0x4000:
                return self.icmp4_error(frame, l3, rx, 3, 4, adj.mtu)
            return [drop("ip4-rewrite", "mtu-exceeded")]
        # Bytes after the IP total length (link-layer padding or junk) are cut by ip4-input.
        packet = routed_ip4(h[:total], decrement=not local)
        return [self.output(adj.port, adj.dst + adj.src + b"\x08\x00" + packet,
                            "icmp4" if local else "fwd4")]

    def icmp4_error(self, frame, l3, rx, icmp_type, code, mtu):
        if not rx.ip4:
            return [drop("ip4-icmp-error", "no-source-address")]
        h = frame[l3:]
        if len(h) < 20 or not ip4_error_allowed(h):
            return [drop("ip4-icmp-error", "not-allowed")]
        err = icmp4_error_packet(rx.ip4[0].ip, h, icmp_type, code, mtu)
        new = frame[:l3] + err
        return self.ip4_forward(new, l3, rx, local=True)

    # --- IPv6 -------------------------------------------------------------------------------

    def ip6_input(self, frame, l3, port):
        h = frame[l3:]
        if len(h) < 40:
            return [drop("ip6-input", "too-short")]
        if h[0] >> 4 != 6:
            return [drop("ip6-input", "bad-version")]
        if be16(h, 4) + 40 > len(h):
            return [drop("ip6-input", "bad-length")]
        src = int.from_bytes(h[8:24], "big")
        dst = int.from_bytes(h[24:40], "big")
        if src >> 120 == 0xFF or src in (0, 1) or dst in (0, 1):
            return [drop("ip6-input", "bad-source")]
        if dst >> 120 == 0xFF:
            return [drop("ip6-input", "multicast-destination")]
        if src >> 118 == 0xFE80 >> 6 or dst >> 118 == 0xFE80 >> 6:
            return [drop("ip6-input", "link-local")]
        if frame[0] & 1:
            return [drop("ip6-input", "l2-multicast")]
        if h[7] <= 1:
            return self.icmp6_error(frame, l3, port, 3, 0, 0)
        return self.ip6_forward(frame, l3, port, local=False)

    def ip6_forward(self, frame, l3, rx, local):
        h = frame[l3:]
        target = self.c.fib6.lookup(int.from_bytes(h[24:40], "big"))
        if target is None:
            return [drop("ip6-lookup", "no-route")]
        if target[0] != "via":
            return [drop("ip6-lookup", {"drop": "blackhole", "local": "to-us",
                                        "unresolved": "neighbour-unresolved"}[target[0]])]
        outs = []
        for adj in target[1]:
            for o in self.ip6_rewrite(frame, l3, rx, adj, local):
                if o not in outs:
                    outs.append(o)
        return outs

    def ip6_rewrite(self, frame, l3, rx, adj, local):
        h = bytearray(frame[l3:l3 + 40 + be16(frame, l3 + 4)])  # ip6-input cuts trailing bytes
        if be16(h, 4) + 40 > adj.mtu:
            return self.icmp6_error(frame, l3, rx, 2, 0, adj.mtu)
        if not local:
            h[7] = (h[7] - 1) & 0xFF
        return [self.output(adj.port, adj.dst + adj.src + b"\x86\xdd" + bytes(h),
                            "icmp6" if local else "fwd6")]

    def icmp6_error(self, frame, l3, rx, icmp_type, code, mtu):
        if not rx.ip6:
            return [drop("ip6-icmp-error", "no-source-address")]
        h = frame[l3:]
        if len(h) < 40 or not ip6_error_allowed(h):
            return [drop("ip6-icmp-error", "not-allowed")]
        err = icmp6_error_packet(rx.ip6[0].ip, h, icmp_type, code, mtu)
        new = frame[:l3] + err
        return self.ip6_forward(new, l3, rx, local=True)


# ------------------------------------------------------------------------------------------------
# frame builders (scapy): what a correct router emits

# When True (the golden), scapy's re-serialisation of a routed IPv4 packet must equal the
# byte-level computation; when False (fuzzed corpora, where scapy may not round-trip odd options
# or lengths), disagreements are only counted in SCAPY_DISAGREEMENTS.
STRICT_SCAPY = True
SCAPY_DISAGREEMENTS = []


def routed_ip4(packet, decrement=True):
    """An IPv4 packet (exactly total-length bytes) after forwarding: TTL-1 and the header checksum
    recomputed over the whole header (RFC 1812 5.3.1; our own RFC 1071 sum), cross-checked with
    scapy (`del p.chksum`)."""
    packet = bytes(packet)
    ihl = (packet[0] & 15) * 4
    b = bytearray(packet)
    if decrement:
        b[8] = (b[8] - 1) & 0xFF
    b[10:12] = b"\0\0"
    b[10:12] = inet_checksum(bytes(b[:ihl])).to_bytes(2, "big")
    out = bytes(b)
    try:
        p = IP(packet)
        if decrement:
            p.ttl = (p.ttl - 1) & 0xFF
        del p.chksum
        theirs = bytes(p)
    except Exception as e:  # noqa: BLE001 - scapy can choke on fuzzed headers
        theirs = f"scapy failed: {e}"
    if theirs != out:
        if STRICT_SCAPY:
            raise AssertionError(f"scapy and the byte-level TTL/checksum update disagree: "
                                 f"{packet.hex()} -> ours {out.hex()} scapy {theirs!r}")
        SCAPY_DISAGREEMENTS.append(packet)
    return out


def ip4_error_allowed(h):
    """RFC 1812 4.3.2.7: no ICMP error about an ICMP error, a non-first fragment, or a packet
    whose source is not a unicast host."""
    src = be32(h, 12)
    if src >> 24 in (0, 127) or src >> 24 >= 224:
        return False
    if be16(h, 6) & 0x1FFF:
        return False
    ihl = (h[0] & 15) * 4
    if h[9] == 1:
        if len(h) <= ihl or h[ihl] in (3, 4, 5, 11, 12):
            return False
    return True


def icmp4_error_packet(src, h, icmp_type, code, mtu):
    """The ICMP error vecplane sends about IPv4 packet `h`: from `src`, TTL 64, TOS 0xc0,
    quoting the original up to 576 bytes in all (RFC 1812 4.3.2.3)."""
    total = be16(h, 2)
    quote = bytes(h[:min(total, len(h), ICMP4_MAX - 28)])
    dst = str(ipaddress.IPv4Address(be32(h, 12)))
    if icmp_type == 3:
        icmp = ICMP(type=3, code=code, nexthopmtu=mtu)
    else:
        icmp = ICMP(type=icmp_type, code=code)
    pkt = IP(src=str(src), dst=dst, ttl=64, tos=0xC0, id=0, flags=0, frag=0, proto=1) \
        / icmp / Raw(quote)
    out = bytes(pkt)
    assert len(out) == 28 + len(quote) <= ICMP4_MAX
    assert inet_checksum(out[:20]) == 0 and inet_checksum(out[20:]) == 0
    return out


def ip6_error_allowed(h):
    """RFC 4443 2.4(e): no error about an ICMPv6 error (type < 128), or about a packet sent to
    a multicast address or from the unspecified/multicast address."""
    src = int.from_bytes(h[8:24], "big")
    dst = int.from_bytes(h[24:40], "big")
    if src == 0 or src >> 120 == 0xFF or dst >> 120 == 0xFF:
        return False
    return not carries_icmp6_error(h)


def carries_icmp6_error(h):
    """Whether the upper-layer header, behind at most 8 hop-by-hop (0), routing (43),
    destination-options (60) or first-fragment (44) headers, is an ICMPv6 error or too short to
    tell; what cannot be reached is not an error."""
    nh, at = h[6], 40
    for _ in range(8):
        if nh == 58:
            return len(h) <= at or h[at] < 128
        if nh in (0, 43, 60):
            if len(h) < at + 2:
                return False
            nh, at = h[at], at + (h[at + 1] + 1) * 8
        elif nh == 44:
            if len(h) < at + 8 or be16(h, at + 2) & 0xFFF8:
                return False
            nh, at = h[at], at + 8
        else:
            return False
    return False


def icmp6_error_packet(src, h, icmp_type, code, mtu):
    """The ICMPv6 error about IPv6 packet `h`: from `src`, hop limit 64, traffic class 0,
    quoting the original so the whole error fits in 1280 bytes (RFC 4443 2.4(c))."""
    original = min(be16(h, 4) + 40, len(h))
    quote = bytes(h[:min(original, ICMP6_MAX - 48)])
    dst = str(ipaddress.IPv6Address(bytes(h[8:24])))
    if icmp_type == 2:
        icmp = ICMPv6PacketTooBig(code=code, mtu=mtu)
    elif icmp_type == 3:
        icmp = ICMPv6TimeExceeded(code=code)
    else:
        raise ValueError(icmp_type)
    pkt = IPv6(src=str(src), dst=dst, hlim=64, tc=0, fl=0, nh=58) / icmp / Raw(quote)
    out = bytes(pkt)
    assert len(out) == 48 + len(quote) <= ICMP6_MAX
    return out


# ------------------------------------------------------------------------------------------------
# comparing

def frames_equivalent(expected, actual):
    """Equal, or equal but for an IPv4 header checksum written as 0xffff instead of 0x0000 (both
    verify: RFC 1624 section 3 discusses the two zeros). Returns (ok, note)."""
    if expected == actual:
        return True, ""
    if len(expected) != len(actual) or len(actual) < 34:
        return False, ""
    diff = [i for i in range(len(actual)) if expected[i] != actual[i]]
    if actual[12:14] == b"\x08\x00" and set(diff) <= {24, 25}:
        ihl = (actual[14] & 15) * 4
        if ip4_header_ok(actual[14:14 + ihl]):
            return True, "equivalent IPv4 checksum representation"
    return False, ""


__all__ = [n for n in dir() if not n.startswith("_")]
_ = scapy_checksum  # imported so callers can cross-check against scapy's own checksum

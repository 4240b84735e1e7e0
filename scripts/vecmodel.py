"""Reference model of the vecplane router/xconnect data plane, for tests.

It is written from the design and the RFCs, not from the Rust code: it reads a vecplane config
(TOML, the same file `vecplane run --config` takes), and for a replay (the frames each port
receives) says what the data plane must do with each frame: drop it (node, reason) or send which
bytes out of which port, and which ARP requests / Neighbor Solicitations it must send. It keeps
the neighbour tables as the data plane does (ARP, RFC 826; ND, RFC 4861; the learning rules of
crates/nodes/src/neighbour.rs), so it follows the data plane's processing order (see `Model`).
Expected frames are built with scapy (the independent parser/builder): forwarded IPv4 gets TTL-1
and a checksum scapy recomputes, ICMP errors are scapy's IP()/ICMP()/quote, ARP and ND messages
are scapy's ARP() and ICMPv6ND_*().

Also: a small classic-pcap reader/writer (byte-exact control over what we compare against the
data plane's nanosecond pcap output) and helpers shared by make_golden.py, make_corpus.py and
check_replay.py. Run with /usr/bin/python3 (Debian's python3-scapy).
"""

import ipaddress
import os
import struct
import tomllib

from scapy.all import (ARP, ICMP, IP, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,  # noqa: E402
                       ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig, ICMPv6TimeExceeded, IPv6, Ether,
                       Padding, Raw)
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

def mac_str(b):
    return ":".join(f"{x:02x}" for x in b)


def link_local6(mac):
    """The EUI-64 link-local address of a MAC (fe80::/64, RFC 4291 appendix A), as an int."""
    iid = bytes([mac[0] ^ 2, mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]])
    return (0xFE80 << 112) | int.from_bytes(iid, "big")


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
        # What ARP and ND answer for (RFC 826, RFC 4861 7.2.3): the configured addresses, and
        # for ND also the port's EUI-64 link-local address.
        self.own4 = {int(a.ip) for a in self.ip4}
        self.link_local = link_local6(self.mac)
        self.own6 = {int(a.ip) for a in self.ip6} | {self.link_local}

    def source4(self, target):
        """The address an ARP request for `target` is sent from: the port's address on the
        target's subnet, else its first."""
        for a in self.ip4:
            if ipaddress.ip_address(target) in a.network:
                return int(a.ip)
        return int(self.ip4[0].ip) if self.ip4 else None

    def source6(self, target):
        """The source of a Neighbor Solicitation for `target`: the port's address on the
        target's prefix (its link-local address for a link-local target), else its first
        global address."""
        t = ipaddress.IPv6Address(target)
        for a in self.ip6:
            if t in a.network:
                return int(a.ip)
        if target >> 64 == 0xFE80 << 48:
            return self.link_local
        return int(self.ip6[0].ip) if self.ip6 else None


class Adjacency:
    """A static neighbour ([[neighbour]]): port and MAC known from the configuration."""

    def __init__(self, port, mac):
        self.port = port
        self.dst = mac
        self.src = port.mac
        self.mtu = port.mtu


class Pinned:
    """A route's next hop that is no static neighbour: resolved by ARP/ND on the port whose
    prefix holds it (a permanent entry of the neighbour table)."""

    def __init__(self, port, ip, v6):
        self.port = port
        self.ip = ip
        self.v6 = v6


class Fib:
    """Longest-prefix match over (network int, length, target); equal prefixes: the later wins.
    target: ("via", [Adjacency | Pinned, ...]) | ("drop",) | ("local",) | ("glean", Port, host_bits)"""

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
        self.neighbour_capacity = int(dp.get("neighbour-capacity", 4096))
        self.neighbour_queue = int(dp.get("neighbour-queue", 4))
        self.ports = [Port(i, t) for i, t in enumerate(doc.get("port", []))]
        self.by_name = {p.name: p for p in self.ports}
        for x in doc.get("xconnect", []):
            frm, to = self.by_name[x["from"]], self.by_name[x["to"]]
            frm.xconnect = (to, mac_bytes(x["dst-mac"]) if "dst-mac" in x else None)
        adj = {}
        for n in doc.get("neighbour", []):
            adj[ipaddress.ip_address(n["ip"])] = Adjacency(self.by_name[n["port"]],
                                                           mac_bytes(n["mac"]))
        self.pinned = []
        self.fib4, self.fib6 = Fib(32), Fib(128)
        # Install order as the design states: connected subnets (resolved by ARP/ND on their
        # port), neighbour host routes, configured routes, own addresses (local).
        for p in self.ports:
            for a in p.ip4:
                if a.network.prefixlen < 32:
                    self.fib4.add(int(a.network.network_address), a.network.prefixlen,
                                  ("glean", p, 32 - a.network.prefixlen))
            for a in p.ip6:
                if a.network.prefixlen < 128:
                    self.fib6.add(int(a.network.network_address), a.network.prefixlen,
                                  ("glean", p, 0))
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
                hops = []
                for v in via:
                    ip = ipaddress.ip_address(v)
                    hops.append(adj[ip] if ip in adj else self.pin(ip))
                if len(hops) > 1 and any(isinstance(h, Pinned) for h in hops):
                    raise ValueError(f"{path}: route {net}: ECMP over next hops resolved by "
                                     "ARP/ND is not modelled")
                target = ("via", hops)
            fib.add(int(net.network_address), net.prefixlen, target)
        for p in self.ports:
            for a in p.ip4:
                self.fib4.add(int(a.ip), 32, ("local",))
            for a in p.ip6:
                self.fib6.add(int(a.ip), 128, ("local",))

    def pin(self, ip):
        """The permanent neighbour entry of next hop `ip`: on the first port whose prefix holds
        it (not one of the port's own addresses)."""
        for h in self.pinned:
            if h.ip == int(ip) and h.v6 == (ip.version == 6):
                return h
        for p in self.ports:
            for a in (p.ip6 if ip.version == 6 else p.ip4):
                if a.ip != ip and ip in a.network and a.network.prefixlen < ip.max_prefixlen:
                    h = Pinned(p, int(ip), ip.version == 6)
                    self.pinned.append(h)
                    return h
        raise ValueError(f"next hop {ip} is neither a neighbour nor inside a port's prefix")


# ------------------------------------------------------------------------------------------------
# Neighbour resolution (ARP, RFC 826; Neighbor Discovery, RFC 4861)

# Per family, per worker: packets queued in all, requests sent before the rate limit
# (1000/s, burst 100) can refuse one.
QUEUE_TOTAL = 256
REQUEST_BURST = 100
# Records a pcap port reads per poll, and buffers neighbour-tx sends per poll (one vector).
VECTOR = 256

ALL_NODES6 = (0xFF02 << 112) | 1


def solicited_node(a):
    return (0xFF02 << 112) | (1 << 32) | (0xFF << 24) | (a & 0xFFFFFF)


def multicast_mac6(group):
    return b"\x33\x33" + (group & 0xFFFFFFFF).to_bytes(4, "big")


def ip4_str(a):
    return str(ipaddress.IPv4Address(a))


def ip6_str(a):
    return str(ipaddress.IPv6Address(a))


def arp_request_frame(port_mac, source, target):
    """A broadcast ARP request (RFC 826) from `port_mac`/`source` for `target`, padded with
    zeros to the 60-byte Ethernet minimum (target hardware address zero)."""
    return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=mac_str(port_mac))
                 / ARP(op=1, hwsrc=mac_str(port_mac), psrc=ip4_str(source),
                       hwdst="00:00:00:00:00:00", pdst=ip4_str(target))
                 / Padding(load=bytes(18)))


def ns_frame(port_mac, source, target):
    """A Neighbor Solicitation (RFC 4861 4.3, 7.2.2) for `target` to its solicited-node
    multicast group, from `source`, with a source link-layer address option."""
    group = solicited_node(target)
    return bytes(Ether(dst=mac_str(multicast_mac6(group)), src=mac_str(port_mac))
                 / IPv6(src=ip6_str(source), dst=ip6_str(group), hlim=255)
                 / ICMPv6ND_NS(tgt=ip6_str(target))
                 / ICMPv6NDOptSrcLLAddr(lladdr=mac_str(port_mac)))


def na_packet(port_mac, src, dst, target, solicited):
    """The IPv6 packet of a Neighbor Advertisement from a router (R), overriding (O), solicited
    or not, with a target link-layer address option."""
    return bytes(IPv6(src=ip6_str(src), dst=ip6_str(dst), hlim=255, tc=0, fl=0)
                 / ICMPv6ND_NA(R=1, S=1 if solicited else 0, O=1, tgt=ip6_str(target))
                 / ICMPv6NDOptDstLLAddr(lladdr=mac_str(port_mac)))


def nd_options(opts, want):
    """The link-layer address in the first option of type `want`: (ok, mac or None); not ok
    when an option has length 0 or runs past the end (RFC 4861 4.6)."""
    found = None
    while opts:
        if len(opts) < 2:
            return False, None
        n = opts[1] * 8
        if n == 0 or n > len(opts):
            return False, None
        if opts[0] == want and found is None:
            found = bytes(opts[2:8])
        opts = opts[n:]
    return True, found


class Entry:
    """One neighbour of one port: incomplete (being resolved, packets may wait), reachable
    (confirmed) or stale (known, unconfirmed). Timers are not modelled (see Model)."""

    def __init__(self, port, ip, v6):
        self.port = port
        self.ip = ip
        self.v6 = v6
        self.state = "incomplete"
        self.mac = None
        self.queue = []
        self.requested = False   # a request went out since the last confirmation
        self.pinned = False
        self.macs = set()        # every MAC it had during the run

    def key(self):
        return (self.port.index, self.ip)

    def describe(self):
        return f"{self.port.name} {ip6_str(self.ip) if self.v6 else ip4_str(self.ip)}"


class Packet:
    """A packet in flight: the input it came from (its `Outcome`), its current bytes (an ICMP
    error replaces the frame from l3 on), and whether the router made it (no TTL change)."""

    __slots__ = ("rec", "frame", "l3", "rx", "local")

    def __init__(self, rec, frame, l3, rx, local=False):
        self.rec, self.frame, self.l3, self.rx, self.local = rec, frame, l3, rx, local


class Outcome:
    """What became of one received frame.

    fate: a list of acceptable results, more than one only for ECMP: [("tx", port, bytes,
    kind)], [("drop", node, reason)] or [("rx-drop",)]. requests: ("tx", port, bytes, kind) of
    the ARP requests / Neighbor Solicitations it caused (they carry its timestamp). waited: it
    (or the ICMP error it became) went to ip4-arp / ip6-discover. stale: it was sent to a
    neighbour whose entry was stale (unconfirmed)."""

    def __init__(self, ts, port, frame, index):
        self.ts, self.port, self.frame, self.index = ts, port, frame, index
        self.fate = None
        self.requests = []
        self.waited = False
        self.stale = False
        self.vector = None   # (round, port name)


NEIGHBOUR_COUNTERS = ("arp_requests_sent", "ns_sent", "arp_replies_sent", "na_sent", "learned",
                      "queued", "released", "queue_drops", "resolution_failures")


# ------------------------------------------------------------------------------------------------
# outcomes

def drop(node, reason):
    return ("drop", node, reason)


def tx(port, frame, kind):
    """kind: "fwd4", "fwd6" (routed), "icmp4", "icmp6" (an error vecplane made), "xc",
    "arp-reply", "na" (answers made in the received buffer), "arp-request", "ns" (requests
    vecplane made)."""
    return ("tx", port.name, bytes(frame), kind)


class Model:
    """What the data plane must do with a replay: `replay({port name: [(ts, frame), ...]})`
    returns the `Outcome` of every received frame, keyed by timestamp.

    It is stateful like the data plane: the neighbour tables learn from ARP and ND, packets to
    unresolved neighbours wait (at most `neighbour-queue` each, `QUEUE_TOTAL` in all) and leave
    when an answer arrives, or are dropped as `neighbour-tx/flushed-at-stop` when the replay
    ends. The order it processes frames in is the data plane's, which a vector machine does not
    keep across protocols:
      * a pcap port reads `VECTOR` records per poll (received or not); each round polls the
        ports with an rx file in config order, then `neighbour-tx` (requests and released
        packets, `VECTOR` at most);
      * within one vector, ARP and ND frames are handled before any IP packet (arp-input and
        ip6-nd come before ip4-lookup/ip6-lookup in the graph), so an answer later in the same
        vector is already known to earlier packets;
      * packets reach ip4-arp / ip6-discover in passes: those routed directly (in input order),
        then ICMP errors about TTL expiry, then about the MTU.
    Timers are not modelled: retries (1 s), giving up (3 s), probes of stale entries (5 s) and
    aging (30 s / 300 s) and the request rate limit beyond its burst: a replay that lasts less
    than a second and makes fewer than `REQUEST_BURST` requests is predicted exactly; the
    `waited`/`stale` marks of outcomes say which ones a slower replay may change."""

    def __init__(self, config):
        self.c = config
        self.tables = {4: {}, 6: {}}
        self.queued_total = 0
        self.outbox = []
        self.stats = dict.fromkeys(NEIGHBOUR_COUNTERS, 0)
        self.requests_made = 0
        self.asked = set()           # (port name, address) of every neighbour asked for
        self.originated_drops = {}   # (node, reason) -> count, for requests that were dropped
        self.last_ts = 0
        self.records = {}
        for h in config.pinned:
            e = Entry(h.port, h.ip, h.v6)
            e.pinned = True
            self.tables[6 if h.v6 else 4][e.key()] = e

    def macs_of(self, port_name, ip):
        """Every MAC the neighbour `ip` of port `port_name` had during the replay."""
        port = self.c.by_name[port_name]
        macs = set()
        for table in self.tables.values():
            e = table.get((port.index, ip))
            if e is not None:
                macs |= e.macs
        return macs

    # --- the replay ---------------------------------------------------------------------------

    def replay(self, inputs):
        """`inputs`: {port name: [(ts, frame), ...]} in file order. Returns {ts: Outcome}."""
        streams = []
        for p in self.c.ports:
            recs = []
            for i, (ts, frame) in enumerate(inputs.get(p.name, [])):
                if ts in self.records:
                    raise ValueError(f"input timestamp {ts} is not unique")
                rec = Outcome(ts, p, bytes(frame), i)
                self.records[ts] = rec
                recs.append(rec)
            if recs:
                streams.append(recs)
        rnd = 0
        while True:
            busy = False
            for recs in streams:
                chunk = recs[rnd * VECTOR:(rnd + 1) * VECTOR]
                if chunk:
                    busy = True
                    for r in chunk:
                        r.vector = (rnd, r.port.name)
                    self.vector(chunk)
            if self.outbox:
                busy = True
                self.neighbour_tx()
            if not busy:
                break
            rnd += 1
        self.flush()
        for rec in self.records.values():
            assert rec.fate is not None, f"model: no fate for input {rec.ts}"
        return self.records

    def vector(self, recs):
        """One vector of received frames: ethernet-input, then ARP/ND, then IPv4 and IPv6."""
        arp, ip4, ip6 = [], [], []
        for rec in recs:
            r = self.ethernet(rec)
            if r is None:
                continue
            kind, l3 = r
            (arp if kind == "arp" else ip4 if kind == "ip4" else ip6).append((rec, l3))
        for rec, l3 in arp:
            rec.fate = [self.arp_input(rec, rec.frame, l3, rec.port)]
        lookup6, errors6, nd = [], [], []
        for rec, l3 in ip6:
            self.ip6_input(rec, l3, lookup6, errors6, nd)
        for rec, l3, total in nd:
            rec.fate = [self.nd_input(rec, rec.frame, l3, total, rec.port)]
        lookup4, errors4 = [], []
        for rec, l3 in ip4:
            self.ip4_input(rec, l3, lookup4, errors4)
        self.passes4(lookup4, errors4, [])
        self.passes6(lookup6, errors6, [])

    def neighbour_tx(self):
        """The pseudo-input: requests out, released packets on to rewrite (one vector)."""
        batch, self.outbox = self.outbox[:VECTOR], self.outbox[VECTOR:]
        rewrite4, rewrite6 = [], []
        for item in batch:
            if item[0] == "request":
                _, rec, port, frame, kind = item
                out = self.output(port, frame, kind)
                if out[0] == "tx":
                    rec.requests.append(out)
                else:
                    key = out[1:]
                    self.originated_drops[key] = self.originated_drops.get(key, 0) + 1
            else:
                _, p, e = item
                (rewrite6 if e.v6 else rewrite4).append((p, [e]))
        self.passes4([], [], rewrite4)
        self.passes6([], [], rewrite6)

    def flush(self):
        """At stop: what still waits for a neighbour is freed."""
        for table in self.tables.values():
            for e in table.values():
                for p in e.queue:
                    self.set(p, drop("neighbour-tx", "flushed-at-stop"))
                    self.stats["queue_drops"] += 1
                e.queue = []
        self.queued_total = 0
        self.stats["originated"] = self.stats["arp_requests_sent"] + self.stats["ns_sent"]

    @staticmethod
    def set(p, result):
        assert p.rec.fate is None, f"model: input {p.rec.ts} has two fates"
        p.rec.fate = [result]

    # --- Ethernet -------------------------------------------------------------------------------

    def ethernet(self, rec):
        """Sets the fate of what ethernet-input settles; else ("arp"|"ip4"|"ip6", l3)."""
        frame, port = rec.frame, rec.port
        if len(frame) == 0 or len(frame) > self.c.data_size:
            rec.fate = [("rx-drop",)]
            return None
        if len(frame) < 14:
            rec.fate = [drop("ethernet-input", "runt")]
            return None
        if port.xconnect is not None:
            to, dst = port.xconnect
            out = (dst if dst is not None else frame[0:6]) + to.mac + frame[12:]
            rec.fate = [self.output(to, out, "xc")]
            return None
        # Multicast/broadcast MACs pass ethernet-input; the IP nodes then drop unicast packets
        # inside them as l2-multicast (RFC 1812 5.3.4).
        if frame[0] & 1 == 0 and frame[0:6] != port.mac:
            rec.fate = [drop("ethernet-input", "not-for-us")]
            return None
        t, l3 = be16(frame, 12), 14
        for depth in range(3):
            if t not in TAG_TYPES:
                break
            if depth == 2:
                rec.fate = [drop("ethernet-input", "too-many-vlan-tags")]
                return None
            if len(frame) < l3 + 4:
                rec.fate = [drop("ethernet-input", "vlan-truncated")]
                return None
            t = be16(frame, l3 + 2)
            l3 += 4
        if t == 0x0800:
            return "ip4", l3
        if t == 0x86DD:
            return "ip6", l3
        if t == 0x0806:
            return "arp", l3
        rec.fate = [drop("ethernet-input", "unknown-ethertype")]
        return None

    def output(self, port, frame, kind):
        if port.tx is None:
            return drop("interface-output", "port-has-no-tx")
        return tx(port, frame, kind)

    # --- ARP (arp-input) ------------------------------------------------------------------------

    def arp_input(self, rec, frame, l3, port):
        a = frame[l3:l3 + 28]
        if len(a) < 28 or be16(a, 0) != 1 or be16(a, 2) != 0x0800 or a[4] != 6 or a[5] != 4:
            return drop("arp-input", "malformed")
        op = be16(a, 6)
        if op not in (1, 2):
            return drop("arp-input", "unsupported-op")
        sha, spa, tpa = bytes(a[8:14]), be32(a, 14), be32(a, 24)
        if sha[0] & 1 or sha == bytes(6):
            return drop("arp-input", "bad-sender")
        if spa in port.own4:
            return drop("arp-input", "address-conflict")
        for_us = tpa in port.own4
        # A sender of 0.0.0.0 (a probe), loopback, multicast or broadcast teaches nothing.
        learned = "ignored"
        if spa != 0 and spa >> 24 != 127 and spa >> 24 < 224:
            # RFC 826: update an entry whoever the target is; create one when it is for us; a
            # reply to us confirms reachability.
            learned = self.learn(4, port, spa, sha, create=for_us,
                                 confirm=for_us and op == 2, replace=True)
        if not for_us:
            return drop("arp-input", "learned" if learned in ("updated", "unchanged")
                        else "not-for-us")
        if op == 2:
            return drop("arp-input", {"full": "table-full", "ignored": "bad-sender"}
                        .get(learned, "learned"))
        # A request for our address: the reply, in the same buffer (tags kept), padded.
        self.stats["arp_replies_sent"] += 1
        reply = bytes(ARP(op=2, hwsrc=mac_str(port.mac), psrc=ip4_str(tpa), hwdst=mac_str(sha),
                          pdst=ip4_str(spa)))
        out = sha + port.mac + bytes(frame[12:l3]) + reply
        out += bytes(max(60 - len(out), 0))
        return self.output(port, out, "arp-reply")

    # --- ND (ip6-nd) ----------------------------------------------------------------------------

    def nd_input(self, rec, frame, l3, total, port):
        h = frame[l3:l3 + total]
        if len(h) < 64 or h[0] >> 4 != 6 or h[6] != 58:
            return drop("ip6-nd", "malformed")
        plen = be16(h, 4)
        if plen < 24 or 40 + plen > len(h):
            return drop("ip6-nd", "malformed")
        icmp = h[40:40 + plen]
        kind = icmp[0]
        # RFC 4861 7.1.1 / 7.1.2: hop limit 255 (no router forwarded it), code 0, checksum.
        if h[7] != 255:
            return drop("ip6-nd", "bad-hop-limit")
        if icmp[1] != 0:
            return drop("ip6-nd", "malformed")
        pseudo = bytes(h[8:40]) + plen.to_bytes(4, "big") + (58).to_bytes(4, "big")
        if inet_checksum(pseudo + bytes(icmp)) != 0:
            return drop("ip6-nd", "bad-checksum")
        src, dst = int.from_bytes(h[8:24], "big"), int.from_bytes(h[24:40], "big")
        target = int.from_bytes(icmp[8:24], "big")
        if target >> 120 == 0xFF or src >> 120 == 0xFF:
            return drop("ip6-nd", "malformed")
        ok, lla = nd_options(bytes(icmp[24:]), 1 if kind == 135 else 2)
        if not ok or (lla is not None and lla[0] & 1):
            return drop("ip6-nd", "malformed")
        if kind == 136:
            flags = icmp[4]
            if dst >> 120 == 0xFF and flags & 0x40:
                return drop("ip6-nd", "malformed")
            if dst >> 120 != 0xFF and dst not in port.own6:
                return drop("ip6-nd", "not-for-us")
            if target in port.own6:
                return drop("ip6-nd", "address-conflict")
            # RFC 4861 7.2.5: an advertisement updates an entry, never creates one; S confirms,
            # O lets a different MAC replace the known one.
            learned = self.learn(6, port, target, lla, create=False, confirm=bool(flags & 0x40),
                                 replace=bool(flags & 0x20))
            return drop("ip6-nd", "unsolicited" if learned == "ignored" else "learned")
        unspecified = src == 0
        if unspecified and (dst != solicited_node(target) or lla is not None):
            return drop("ip6-nd", "malformed")
        if target not in port.own6:
            return drop("ip6-nd", "not-for-us")
        if dst != target and dst != solicited_node(target) and dst not in port.own6:
            return drop("ip6-nd", "not-for-us")
        if src in port.own6:
            return drop("ip6-nd", "address-conflict")
        if not unspecified and lla is not None:
            self.learn(6, port, src, lla, create=True, confirm=False, replace=True)
        # RFC 4861 7.2.4: the advertisement, in the same buffer; to all nodes for a DAD probe.
        self.stats["na_sent"] += 1
        if unspecified:
            eth_dst, pkt = multicast_mac6(ALL_NODES6), na_packet(port.mac, target, ALL_NODES6,
                                                                 target, solicited=False)
        else:
            eth_dst = lla if lla is not None else bytes(frame[6:12])
            pkt = na_packet(port.mac, target, src, target, solicited=True)
        return self.output(port, eth_dst + port.mac + bytes(frame[12:l3]) + pkt, "na")

    # --- neighbour tables ---------------------------------------------------------------------

    def learn(self, fam, port, ip, mac, create, confirm, replace):
        """RFC 826 merge / RFC 4861 7.2.5: "ignored", "full", "updated" or "unchanged"."""
        table = self.tables[fam]
        e = table.get((port.index, ip))
        if e is None:
            if not create or mac is None:
                return "ignored"
            if len(table) >= self.c.neighbour_capacity:
                return "full"
            e = table[(port.index, ip)] = Entry(port, ip, fam == 6)
        known = e.state != "incomplete"
        if mac is not None and (not known or (mac != e.mac and replace)):
            e.mac = mac
            e.macs.add(mac)
            e.state = "reachable" if confirm else "stale"
            e.requested = False
            self.stats["learned"] += 1
            if not known:
                for p in e.queue:
                    self.outbox.append(("release", p, e))
                    self.stats["released"] += 1
                self.queued_total -= len(e.queue)
                e.queue = []
            return "updated"
        if mac is not None and mac != e.mac:
            if e.state == "reachable":
                e.state = "stale"
                return "updated"
            return "unchanged"
        if known and confirm:
            e.state = "reachable"
            e.requested = False
            return "updated"
        return "unchanged"

    @staticmethod
    def usable(e, p):
        if e.state == "incomplete":
            return False
        if e.state == "stale":
            p.rec.stale = True
        return True

    def resolve(self, p, fam, how):
        """ip4-arp / ip6-discover: queue `p` on its neighbour's entry, asking for the MAC when
        nobody has yet."""
        node = "ip6-discover" if fam == 6 else "ip4-arp"
        p.rec.waited = True
        self.last_ts = p.rec.ts
        if how[0] == "glean":
            _, port, ip = how
            if (port.source6(ip) if fam == 6 else port.source4(ip)) is None:
                return self.set(p, drop(node, "no-source-address"))
            table = self.tables[fam]
            e = table.get((port.index, ip))
            if e is None:
                if len(table) >= self.c.neighbour_capacity:
                    return self.set(p, drop(node, "table-full"))
                e = table[(port.index, ip)] = Entry(port, ip, fam == 6)
        else:
            e = how[1]
        if self.usable(e, p):
            self.outbox.append(("release", p, e))
            return None
        if not e.requested:
            self.request(e, p.rec)
        if len(e.queue) >= self.c.neighbour_queue or self.queued_total >= QUEUE_TOTAL:
            self.stats["queue_drops"] += 1
            return self.set(p, drop(node, "queue-full"))
        e.queue.append(p)
        self.queued_total += 1
        self.stats["queued"] += 1
        return None

    def request(self, e, rec):
        port = e.port
        if e.v6:
            frame, kind = ns_frame(port.mac, port.source6(e.ip), e.ip), "ns"
            self.stats["ns_sent"] += 1
        else:
            frame, kind = arp_request_frame(port.mac, port.source4(e.ip), e.ip), "arp-request"
            self.stats["arp_requests_sent"] += 1
        self.requests_made += 1
        self.asked.add((port.name, e.ip))
        e.requested = True
        self.outbox.append(("request", rec, port, frame, kind))

    # --- IPv4 -------------------------------------------------------------------------------

    def ip4_input(self, rec, l3, lookup, errors):
        frame = rec.frame
        h = frame[l3:]
        r = None
        if len(h) < 20:
            r = drop("ip4-input", "too-short")
        elif h[0] >> 4 != 4:
            r = drop("ip4-input", "bad-version")
        if r is None:
            ihl = (h[0] & 15) * 4
            total = be16(h, 2)
            if ihl < 20 or ihl > total:
                r = drop("ip4-input", "bad-ihl")
            elif total > len(h):
                r = drop("ip4-input", "bad-length")
            elif not ip4_header_ok(h[:ihl]):
                r = drop("ip4-input", "bad-checksum")
            elif ihl > 20 and self.c.ip4_options == "drop":
                r = drop("ip4-input", "options")
        if r is None:
            src, dst = be32(h, 12), be32(h, 16)
            if src >> 24 in (0, 127) or src >> 24 >= 224:
                r = drop("ip4-input", "bad-source")
            elif dst >> 28 >= 0xE:
                r = drop("ip4-input", "multicast-destination")
            elif frame[0] & 1:
                r = drop("ip4-input", "l2-multicast")
            else:
                why = transport_problem4(h, ihl, total)
                if why:
                    r = drop("ip4-input", why)
        if r is not None:
            rec.fate = [r]
            return
        p = Packet(rec, frame, l3, rec.port)
        if h[8] <= 1:
            errors.append((p, 11, 0, 0))
        else:
            lookup.append(p)

    def passes4(self, lookup, errors, rewrite):
        """ip4-lookup, ip4-rewrite, ip4-arp, ip4-icmp-error until nothing is left (the graph
        visits them in this order in each pass; errors re-enter lookup in the next pass)."""
        while lookup or errors or rewrite:
            resolve = []
            for p in lookup:
                self.lookup(p, 4, rewrite, resolve)
            for p, adjs in rewrite:
                self.rewrite(p, 4, adjs, errors, resolve)
            for p, how in resolve:
                self.resolve(p, 4, how)
            lookup, rewrite = [], []
            for p, t, code, mtu in errors:
                e = self.icmp_error(p, 4, t, code, mtu)
                if e is not None:
                    lookup.append(e)
            errors = []

    def passes6(self, lookup, errors, rewrite):
        """ip6-rewrite, ip6-icmp-error, ip6-lookup, ip6-discover, in the graph's order."""
        while lookup or errors or rewrite:
            resolve = []
            for p, adjs in rewrite:
                self.rewrite(p, 6, adjs, errors, resolve)
            rewrite = []
            for p, t, code, mtu in errors:
                e = self.icmp_error(p, 6, t, code, mtu)
                if e is not None:
                    lookup.append(e)
            errors = []
            for p in lookup:
                self.lookup(p, 6, rewrite, resolve)
            lookup = []
            for p, how in resolve:
                self.resolve(p, 6, how)

    def lookup(self, p, fam, rewrite, resolve):
        h = p.frame[p.l3:]
        if fam == 4:
            dst, target, node = be32(h, 16), self.c.fib4.lookup(be32(h, 16)), "ip4-lookup"
        else:
            dst = int.from_bytes(h[24:40], "big")
            target, node = self.c.fib6.lookup(dst), "ip6-lookup"
        if target is None:
            return self.set(p, drop(node, "no-route"))
        if target[0] in ("drop", "local"):
            return self.set(p, drop(node, {"drop": "blackhole", "local": "to-us"}[target[0]]))
        if target[0] == "glean":
            port, host_bits = target[1], target[2]
            # RFC 1812 5.3.5.2: an IPv4 subnet's broadcast or network address (prefixes up
            # to /30) is dropped, never resolved.
            if fam == 4 and 2 <= host_bits < 32:
                host = dst & ((1 << host_bits) - 1)
                if host in (0, (1 << host_bits) - 1):
                    return self.set(p, drop(node, "directed-broadcast"))
            e = self.tables[fam].get((port.index, dst))
            if e is not None and self.usable(e, p):
                rewrite.append((p, [e]))
            else:
                resolve.append((p, ("glean", port, dst)))
            return None
        hops = [self.tables[fam][(h.port.index, h.ip)] if isinstance(h, Pinned) else h
                for h in target[1]]
        rewrite.append((p, hops))
        return None

    def rewrite(self, p, fam, adjs, errors, resolve):
        """ip4-rewrite / ip6-rewrite with a static adjacency or a neighbour entry (ECMP: every
        member is an acceptable result)."""
        results = []
        for a in adjs:
            if isinstance(a, Entry):
                if not self.usable(a, p):
                    assert len(adjs) == 1, "ECMP over unresolved neighbours is not modelled"
                    resolve.append((p, ("entry", a)))
                    return
                a = Adjacency(a.port, a.mac)
            r = self.rewrite_one(p, fam, a)
            if r not in results:
                results.append(r)
        if {r[0] for r in results} == {"tx"}:
            assert p.rec.fate is None, f"model: input {p.rec.ts} has two fates"
            p.rec.fate = results
            return
        if len(results) != 1:
            raise AssertionError(f"model: ECMP members give different results: {results}")
        r = results[0]
        if r[0] == "icmp":
            errors.append((p, r[1], r[2], r[3]))
        else:
            self.set(p, r)

    def rewrite_one(self, p, fam, adj):
        h = p.frame[p.l3:]
        if fam == 4:
            total = be16(h, 2)
            if total > adj.mtu:
                if be16(h, 6) & 0x4000:
                    return ("icmp", 3, 4, adj.mtu)
                return drop("ip4-rewrite", "mtu-exceeded")
            # Bytes after the IP total length (link-layer padding or junk) are cut by ip4-input.
            packet = routed_ip4(h[:total], decrement=not p.local)
            return self.output(adj.port, adj.dst + adj.src + b"\x08\x00" + packet,
                               "icmp4" if p.local else "fwd4")
        b = bytearray(h[:40 + be16(h, 4)])  # ip6-input cuts trailing bytes
        if be16(b, 4) + 40 > adj.mtu:
            return ("icmp", 2, 0, adj.mtu)
        if not p.local:
            b[7] = (b[7] - 1) & 0xFF
        return self.output(adj.port, adj.dst + adj.src + b"\x86\xdd" + bytes(b),
                           "icmp6" if p.local else "fwd6")

    def icmp_error(self, p, fam, icmp_type, code, mtu):
        """ip4-icmp-error / ip6-icmp-error: the error packet (in the same buffer), or None when
        the fate is a drop."""
        rx, h = p.rx, p.frame[p.l3:]
        if fam == 4:
            if not rx.ip4:
                return self.set(p, drop("ip4-icmp-error", "no-source-address"))
            if len(h) < 20 or not ip4_error_allowed(h):
                return self.set(p, drop("ip4-icmp-error", "not-allowed"))
            err = icmp4_error_packet(rx.ip4[0].ip, h, icmp_type, code, mtu)
        else:
            if not rx.ip6:
                return self.set(p, drop("ip6-icmp-error", "no-source-address"))
            if len(h) < 40 or not ip6_error_allowed(h):
                return self.set(p, drop("ip6-icmp-error", "not-allowed"))
            err = icmp6_error_packet(rx.ip6[0].ip, h, icmp_type, code, mtu)
        return Packet(p.rec, p.frame[:p.l3] + err, p.l3, rx, local=True)

    # --- IPv6 -------------------------------------------------------------------------------

    def ip6_input(self, rec, l3, lookup, errors, nd):
        frame = rec.frame
        h = frame[l3:]
        r = None
        if len(h) < 40:
            r = drop("ip6-input", "too-short")
        elif h[0] >> 4 != 6:
            r = drop("ip6-input", "bad-version")
        elif be16(h, 4) + 40 > len(h):
            r = drop("ip6-input", "bad-length")
        if r is None:
            total = be16(h, 4) + 40
            # Neighbor Solicitations/Advertisements go to ip6-nd before the address checks
            # (they use multicast, link-local and unspecified addresses).
            if h[6] == 58 and total > 40 and h[40] in (135, 136):
                nd.append((rec, l3, total))
                return
            src = int.from_bytes(h[8:24], "big")
            dst = int.from_bytes(h[24:40], "big")
            # Address checks as Linux's ip6_rcv_core and RFC 4291, in vecplane's order.
            def v4_mapped(a):
                return a >> 32 == 0xFFFF
            if src >> 120 == 0xFF:
                r = drop("ip6-input", "multicast-source")
            elif src == 0:
                r = drop("ip6-input", "unspecified-source")
            elif src == 1 or dst == 1:
                r = drop("ip6-input", "loopback-address")
            elif v4_mapped(src) or v4_mapped(dst):
                r = drop("ip6-input", "v4-mapped-address")
            elif dst == 0:
                r = drop("ip6-input", "unspecified-destination")
            elif dst >> 120 == 0xFF:
                scope = (dst >> 112) & 0xF
                r = drop("ip6-input", {0: "reserved-multicast-scope",
                                       1: "interface-local-multicast"}.get(scope, "multicast-destination"))
            elif src >> 118 == 0xFE80 >> 6 or dst >> 118 == 0xFE80 >> 6:
                r = drop("ip6-input", "link-local")
            elif frame[0] & 1:
                r = drop("ip6-input", "l2-multicast")
            else:
                why = transport_problem6(h, total)
                if why:
                    r = drop("ip6-input", why)
        if r is not None:
            rec.fate = [r]
            return
        p = Packet(rec, frame, l3, rec.port)
        if h[7] <= 1:
            errors.append((p, 3, 0, 0))
        else:
            lookup.append(p)


# --- transport checks (ip4-input / ip6-input, after the IP header's own) -----------------------
# RFC 768 (a UDP length counts header and data: not below 8, not beyond the datagram; shorter is
# padding), RFC 792/4443 (an ICMP header is 8 bytes), RFC 791 + RFC 1858 era "ping of death"
# (no fragment may end past 65,535), RFC 8200 4.1 (hop-by-hop only first; headers within the
# payload), RFC 2675 (payload length 0 means a jumbogram, not carried). At most 8 extension
# headers are walked. A first fragment's UDP length counts the reassembled datagram.

IP6_EXTENSIONS = (0, 43, 44, 51, 60)


def upper_problem(h, total, proto, at, first):
    payload = total - at
    if proto == 17:
        if payload < 8:
            return "bad-udp-length"
        ulen = be16(h, at + 4)
        if ulen < 8 or (not first and ulen > payload):
            return "bad-udp-length"
    elif proto in (1, 58) and payload < 8:
        return "icmp-too-short"
    return None


def transport_problem4(h, ihl, total):
    word = be16(h, 6)
    offset = (word & 0x1FFF) * 8
    if offset + total - ihl > 65535:
        return "fragment-too-long"
    if offset:
        return None
    return upper_problem(h, total, h[9], ihl, bool(word & 0x2000))


def transport_problem6(h, total):
    nh = h[6]
    if total == 40 and nh != 59:
        return "zero-payload-length"
    at, first, seen = 40, False, 0
    while nh in IP6_EXTENSIONS:
        if seen == 8:
            return "bad-extension-headers"
        if nh == 0 and seen:
            return "hop-by-hop-not-first"
        if at + 2 > total:
            return "bad-extension-headers"
        if nh == 44:
            if at + 8 > total:
                return "bad-extension-headers"
            word = be16(h, at + 2)
            if (word >> 3) * 8 + total - (at + 8) > 65535:
                return "fragment-too-long"
            if word >> 3:
                return None
            first = first or bool(word & 1)
            size = 8
        elif nh == 51:
            size = (h[at + 1] + 2) * 4
        else:
            size = (h[at + 1] + 1) * 8
        if at + size > total:
            return "bad-extension-headers"
        nh, at, seen = h[at], at + size, seen + 1
    return upper_problem(h, total, nh, at, first)

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

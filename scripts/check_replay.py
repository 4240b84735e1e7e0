#!/usr/bin/python3
"""Checks a vecplane pcap-to-pcap replay frame by frame, with scapy as the independent parser.

    /usr/bin/python3 scripts/check_replay.py --config DIR/replay.toml --stats DIR/stats.json \
        [--run-seconds S]

Reads the config (the same TOML `vecplane run --config` takes), every port's `rx` pcap (inputs)
and `tx` pcap (outputs), and the stats JSON (`vecplane run --stats-json`, or the same shape
written by the API test: {"ports": [{"name", "rx_packets", "tx_packets", "rx_drops",
"tx_drops"}], "errors": [{"node", "reason", "count"}], "drops_total", "neighbours":
{"arp_requests_sent", ..., "originated"}}).

Each input frame has a distinct timestamp and vecplane keeps it on what it sends (an ARP
request or Neighbor Solicitation carries the timestamp of the packet that made it ask), so each
output is paired with its input. The reference model (scripts/vecmodel.py) replays the inputs in
the data plane's order, with its neighbour tables, and says what each input must become and
which requests it causes. Then:
  1. every output comes from an input: the input's own result (exactly the model's, ECMP: one
     of the members; at most one) or a request it caused (exactly the model's bytes);
  2. every output is re-checked with scapy: routed IPv4 has TTL-1, a valid header checksum, the
     adjacency's MACs and the rest of the packet unchanged; routed IPv6 has hop limit - 1;
     ICMP/ICMPv6 errors have valid checksums, the right type/code/MTU, source = the receiving
     port's address, destination = the sender, and quote the start of the original packet; ARP
     requests/replies and NS/NA come from the port's MAC and address, to the right
     destination, with valid checksums and options;
  3. the drop counters equal the model's drops per (node, reason) (ICMP errors missing from the
     output are accepted only as counted rate-limited drops), the `neighbours` counters equal
     the model's, rx_drops count the frames no buffer can hold, and rx + originated = tx +
     drops.
Neighbour timers run in real time (retry 1 s, give up 3 s, probe stale entries 5 s):
`--run-seconds` (how long the replay took, measured by the caller) below 1 makes every check
exact; a slower replay may add requests (at most one a second per neighbour, checked), and past
3 s (5 s) the packets that waited for a neighbour (were sent to a stale one) may meet any of the
waiting drops or be sent late: then those are checked as a sum, and what was sent with scapy.
Exit status 1 with the first problems explained (tcpdump-like scapy summaries and hex) when any
check fails.
"""

import argparse
import collections
import ipaddress
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vecmodel  # noqa: E402
from vecmodel import be16, inet_checksum  # noqa: E402
from scapy.all import (ARP, ICMP, IP, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,  # noqa: E402
                       ICMPv6NDOptSrcLLAddr, IPv6, Ether)
from scapy.layers.inet6 import in6_chksum  # noqa: E402

MAX_SHOWN = 15


def summary(frame):
    try:
        return Ether(frame).summary()
    except Exception as e:  # noqa: BLE001
        return f"(scapy: {e})"


def hexdiff(a, b):
    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    lo = max(0, first - 16)
    return (f"first difference at byte {first} (lengths {len(a)} / {len(b)})\n"
            f"      expected {a[lo:first + 32].hex(' ')}\n"
            f"      actual   {b[lo:first + 32].hex(' ')}")


def l3_offset(frame):
    off, t = 14, be16(frame, 12)
    while t in (0x8100, 0x88A8):
        t, off = be16(frame, off + 2), off + 4
    return off


def scapy_validate(kind, rx_port, inp, out, cfg):
    """Independent re-check of one output with scapy; returns a list of problems."""
    bad = []
    e = Ether(out)
    port_macs = {p.mac for p in cfg.ports}
    if bytes.fromhex(e.src.replace(":", "")) not in port_macs:
        bad.append(f"source MAC {e.src} is no port's")
    l3 = l3_offset(inp)
    src_in = inp[l3:]
    if kind in ("fwd4", "icmp4"):
        ip = e[IP]
        ihl = ip.ihl * 4
        if inet_checksum(bytes(out[14:14 + ihl])) != 0:
            bad.append(f"IPv4 header checksum {ip.chksum:#06x} does not verify")
        p2 = IP(out[14:14 + ip.len])
        del p2.chksum
        if IP(bytes(p2)).chksum != ip.chksum:
            bad.append(f"scapy recomputes the IPv4 checksum as {IP(bytes(p2)).chksum:#06x}, "
                       f"frame has {ip.chksum:#06x}")
        if kind == "fwd4":
            ip_in = IP(src_in[:be16(src_in, 2)])
            if ip.ttl != ip_in.ttl - 1:
                bad.append(f"TTL {ip_in.ttl} -> {ip.ttl}")
            # ip4-input cuts what follows the total length (padding, trailers).
            if out[14 + ihl:] != src_in[ihl:be16(src_in, 2)]:
                bad.append("payload after the IPv4 header changed")
            if (ip.src, ip.dst, ip.id, ip.proto, ip.len) != \
                    (ip_in.src, ip_in.dst, ip_in.id, ip_in.proto, ip_in.len):
                bad.append("IPv4 header fields other than TTL/checksum changed")
        else:
            icmp = e[ICMP]
            msg = out[14 + 20:14 + ip.len]
            if inet_checksum(msg) != 0:
                bad.append(f"ICMP checksum {icmp.chksum:#06x} does not verify")
            if (icmp.type, icmp.code) not in ((11, 0), (3, 4)):
                bad.append(f"ICMP type {icmp.type} code {icmp.code}")
            if (icmp.type, icmp.code) == (3, 4):
                mtu = be16(msg, 6)
                if mtu not in {p.mtu for p in cfg.ports}:
                    bad.append(f"next-hop MTU {mtu} is no port's MTU")
            if ip.len > 576 or ip.ttl != 64 or ip.tos != 0xC0:
                bad.append(f"ICMP error length {ip.len} ttl {ip.ttl} tos {ip.tos:#x}")
            own = [str(a.ip) for a in cfg.by_name[rx_port].ip4[:1]]
            if [ip.src] != own:
                bad.append(f"source {ip.src}, receiving port's address is {own}")
            if ip.dst != IP(src_in[:20]).src:
                bad.append(f"destination {ip.dst} is not the sender")
            quote = msg[8:]
            if quote != src_in[:len(quote)] or len(quote) != min(be16(src_in, 2), 548):
                bad.append(f"quote of {len(quote)} bytes is not the start of the original")
    elif kind in ("fwd6", "icmp6"):
        ip6 = e[IPv6]
        if kind == "fwd6":
            if ip6.hlim != src_in[7] - 1:
                bad.append(f"hop limit {src_in[7]} -> {ip6.hlim}")
            # ip6-input cuts what follows the payload length.
            end = 40 + be16(src_in, 4)
            if out[14:14 + 7] != src_in[:7] or out[14 + 8:] != src_in[8:end]:
                bad.append("IPv6 packet changed beyond the hop limit")
        else:
            msg = out[14 + 40:14 + 40 + ip6.plen]
            if in6_chksum(58, ip6, msg) != 0:
                bad.append("ICMPv6 checksum does not verify")
            if (msg[0], msg[1]) not in ((3, 0), (2, 0)):
                bad.append(f"ICMPv6 type {msg[0]} code {msg[1]}")
            if msg[0] == 2 and int.from_bytes(msg[4:8], "big") not in {p.mtu for p in cfg.ports}:
                bad.append("packet-too-big MTU is no port's MTU")
            if 40 + ip6.plen > 1280 or ip6.hlim != 64:
                bad.append(f"ICMPv6 error of {40 + ip6.plen} bytes, hop limit {ip6.hlim}")
            own = [str(a.ip) for a in cfg.by_name[rx_port].ip6[:1]]
            if [ip6.src] != own:
                bad.append(f"source {ip6.src}, receiving port's address is {own}")
            if ip6.dst != IPv6(src_in[:40]).src:
                bad.append(f"destination {ip6.dst} is not the sender")
            quote = msg[8:]
            if quote != src_in[:len(quote)] or len(quote) != min(be16(src_in, 4) + 40, 1232):
                bad.append(f"quote of {len(quote)} bytes is not the start of the original")
    return bad


def validate_neighbour(kind, port, out, cfg, probe_macs=None):
    """Independent re-check with scapy of an ARP/ND frame vecplane sent on `port`: a request it
    made (broadcast / solicited-node; with `probe_macs`, a unicast probe to one of these MACs),
    or an answer about its own address."""
    bad = []
    p = cfg.by_name[port]
    e = Ether(out)
    mac = vecmodel.mac_str(p.mac)
    if e.src != mac:
        bad.append(f"source MAC {e.src} is not {port}'s {mac}")
    if kind in ("arp-request", "arp-reply"):
        if ARP not in e:
            return bad + ["not an ARP frame"]
        a = e[ARP]
        if (a.hwtype, a.ptype, a.hwlen, a.plen) != (1, 0x0800, 6, 4):
            bad.append("ARP is not Ethernet/IPv4")
        if a.hwsrc != mac:
            bad.append(f"ARP sender MAC {a.hwsrc}")
        if ipaddress.ip_address(a.psrc) not in [x.ip for x in p.ip4]:
            bad.append(f"ARP sender address {a.psrc} is not {port}'s")
        if len(out) < 60:
            bad.append(f"{len(out)} bytes, shorter than the Ethernet minimum")
        if kind == "arp-request":
            if a.op != 1 or a.hwdst != "00:00:00:00:00:00":
                bad.append(f"ARP op {a.op} target MAC {a.hwdst}")
            if probe_macs is not None:
                if vecmodel.mac_bytes(e.dst) not in probe_macs:
                    bad.append(f"probe to {e.dst}, a MAC the neighbour never had")
            elif e.dst != "ff:ff:ff:ff:ff:ff":
                bad.append(f"request to {e.dst} (expected broadcast; unicast probes are timed)")
            if not any(ipaddress.ip_address(a.pdst) in x.network for x in p.ip4):
                bad.append(f"request for {a.pdst}, not on {port}'s subnets")
            if bytes(out[42:]) != bytes(len(out) - 42):
                bad.append("padding is not zero")
        elif a.op != 2 or a.hwdst != e.dst:
            bad.append(f"ARP reply op {a.op} to {a.hwdst} in a frame to {e.dst}")
        return bad
    if IPv6 not in e or e[IPv6].hlim != 255 or e[IPv6].nh != 58:
        return bad + ["not an IPv6 ND message with hop limit 255"]
    ip6 = e[IPv6]
    msg = bytes(ip6.payload)[:ip6.plen]
    if in6_chksum(58, ip6, msg) != 0:
        bad.append("ICMPv6 checksum does not verify")
    if kind == "ns":
        if ICMPv6ND_NS not in e or ICMPv6NDOptSrcLLAddr not in e:
            return bad + ["not an NS with a source link-layer address option"]
        ns = e[ICMPv6ND_NS]
        target = int(ipaddress.IPv6Address(ns.tgt))
        group = ipaddress.IPv6Address(vecmodel.solicited_node(target))
        if probe_macs is not None:
            if ip6.dst != ns.tgt or vecmodel.mac_bytes(e.dst) not in probe_macs:
                bad.append(f"probe to {ip6.dst} ({e.dst}): not the neighbour's address and MAC")
        elif ipaddress.IPv6Address(ip6.dst) != group or \
                e.dst != vecmodel.mac_str(vecmodel.multicast_mac6(int(group))):
            bad.append(f"NS to {ip6.dst} ({e.dst}), not {ns.tgt}'s solicited-node group")
        if ipaddress.IPv6Address(ip6.src) != ipaddress.IPv6Address(p.source6(target)):
            bad.append(f"NS from {ip6.src}")
        if not any(ipaddress.IPv6Address(target) in x.network for x in p.ip6):
            bad.append(f"NS for {ns.tgt}, not on {port}'s prefixes")
        if e[ICMPv6NDOptSrcLLAddr].lladdr != mac:
            bad.append("source link-layer address is not the port's MAC")
    else:
        if ICMPv6ND_NA not in e or ICMPv6NDOptDstLLAddr not in e:
            return bad + ["not an NA with a target link-layer address option"]
        na = e[ICMPv6ND_NA]
        if int(ipaddress.IPv6Address(na.tgt)) not in p.own6 or ip6.src != na.tgt:
            bad.append(f"NA for {na.tgt} from {ip6.src}: not {port}'s address")
        if not na.R or not na.O:
            bad.append("NA without the router and override flags")
        if e[ICMPv6NDOptDstLLAddr].lladdr != mac:
            bad.append("target link-layer address is not the port's MAC")
    return bad


def request_key(port, frame):
    """(port, target address) of an ARP request / Neighbor Solicitation, else None."""
    try:
        e = Ether(frame)
        if ARP in e and e[ARP].op == 1:
            return port, int(ipaddress.ip_address(e[ARP].pdst)), "arp-request"
        if ICMPv6ND_NS in e:
            return port, int(ipaddress.ip_address(e[ICMPv6ND_NS].tgt)), "ns"
    except Exception:  # noqa: BLE001
        pass
    return None


class Where:
    """Names an input in a problem report (scapy's summary only when one is reported)."""

    def __init__(self, ts, port, frame):
        self.ts, self.port, self.frame = ts, port, frame

    def __str__(self):
        return f"input ts {self.ts} on {self.port} ({len(self.frame)} bytes: " \
               f"{summary(self.frame)})"

    __format__ = lambda self, spec: str(self)  # noqa: E731


POOL = {("ip4-arp", "queue-full"), ("ip6-discover", "queue-full"),
        ("neighbour-tx", "flushed-at-stop"), ("neighbour-tx", "resolution-failed")}
# When an unanswered entry may have been given up (3 s), an answer finds no entry to update:
# these reasons may then trade counts (RFC 826 merge / RFC 4861 7.2.5 update only).
GIVEN_UP = [{("arp-input", "learned"), ("arp-input", "not-for-us")},
            {("ip6-nd", "learned"), ("ip6-nd", "unsolicited")}]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--run-seconds", type=float, default=0.0,
                    help="how long the replay took (an upper bound): neighbour timers fire after "
                         "1 s (retries), 3 s (giving up) and 5 s (probes); below 1 s everything "
                         "is checked exactly")
    args = ap.parse_args()
    vecmodel.STRICT_SCAPY = False
    cfg = vecmodel.Config(args.config)
    model = vecmodel.Model(cfg)
    secs = args.run_seconds
    # What real time may have changed (see vecmodel.Model): extra requests, then the fate of
    # packets that waited for a neighbour, then of packets sent to stale neighbours.
    retries, expiry, probes = secs >= 1, secs >= 3, secs >= 5

    problems = []

    def problem(text):
        problems.append(text)

    inputs = {}
    for p in cfg.ports:
        if p.rx:
            path = os.path.join(cfg.dir, p.rx)
            inputs[p.name] = vecmodel.read_pcap(path) if os.path.exists(path) else []
    outputs = collections.defaultdict(list)
    n_out = 0
    for p in cfg.ports:
        if p.tx:
            path = os.path.join(cfg.dir, p.tx)
            if not os.path.exists(path):
                problem(f"port {p.name}: output {path} was not written")
                continue
            for ts, frame in vecmodel.read_pcap(path):
                outputs[ts].append((p.name, frame))
                n_out += 1
    try:
        result = model.replay(inputs)
    except ValueError as e:
        sys.exit(f"cannot pair outputs with inputs: {e}")
    # The first request for each neighbour is always sent while the limiter has its burst.
    exact_requests = model.requests_made < vecmodel.REQUEST_BURST

    predicted = collections.Counter()
    kinds = collections.Counter()
    rx_drops = 0
    icmp_missing = 0
    tolerated = 0           # timing-sensitive packets dropped where the model sent them
    sensitive_pool = 0      # timing-sensitive packets dropped (any of POOL)
    extra_requests = collections.Counter()
    requests_seen = collections.Counter()
    probes_seen = 0
    hosts_asked = {}        # (port, target) -> kind, of every request the model predicts
    notes = collections.Counter()
    for rec in result.values():
        for r in rec.requests:
            k = request_key(r[1], r[2])
            hosts_asked[k[:2]] = k[2]
    for ts in sorted(result):
        rec = result[ts]
        port, frame = rec.port.name, rec.frame
        fate = rec.fate
        got = outputs.pop(ts, [])
        where = Where(ts, port, frame)
        if fate[0][0] == "rx-drop":
            rx_drops += 1
            if got:
                problem(f"{where}: cannot be received (no buffer holds it) yet was sent")
            continue
        sensitive = (expiry and rec.waited) or (probes and rec.stale)
        want_requests = list(rec.requests)
        txs = [a for a in fate if a[0] == "tx"]
        drops = [a for a in fate if a[0] == "drop"]
        fate_done = False
        for gport, gframe in got:
            # A request the model predicts (exact bytes), else the packet's own fate.
            req = next((r for r in want_requests if r[1] == gport and r[2] == gframe), None)
            if req is not None:
                want_requests.remove(req)
                kinds[req[3]] += 1
                requests_seen[request_key(gport, gframe)[:2]] += 1
                for b in validate_neighbour(req[3], gport, gframe, cfg):
                    problem(f"{where}: {req[3]} on {gport} ({summary(gframe)}): {b}")
                continue
            match = None
            if not fate_done:
                for a in txs:
                    ok, note = vecmodel.frames_equivalent(a[2], gframe)
                    if a[1] == gport and ok:
                        match = a
                        if note:
                            notes[note] += 1
                        break
            if match is not None:
                fate_done = True
                kinds[match[3]] += 1
                if match[3] in ("arp-reply", "na"):
                    bad = validate_neighbour(match[3], gport, gframe, cfg)
                else:
                    bad = scapy_validate(match[3], port, frame, gframe, cfg)
                for b in bad:
                    problem(f"{where}: output on {gport} ({summary(gframe)}): {b}")
                continue
            key = request_key(gport, gframe)
            if key is not None and probes and gframe[0] & 1 == 0:
                # A unicast probe of a stale entry (5 s after it was learned), timed.
                extra_requests[key[:2]] += 1
                probes_seen += 1
                notes["unicast probes of stale neighbours (timed)"] += 1
                for b in validate_neighbour(key[2], gport, gframe, cfg,
                                            probe_macs=model.macs_of(gport, key[1])):
                    problem(f"{where}: probe on {gport} ({summary(gframe)}): {b}")
                continue
            if key is not None and key[:2] in hosts_asked and retries:
                # A retry (1 s after the last request, while packets wait): timed, bounded below.
                extra_requests[key[:2]] += 1
                requests_seen[key[:2]] += 1
                for b in validate_neighbour(key[2], gport, gframe, cfg):
                    problem(f"{where}: repeated {key[2]} on {gport} ({summary(gframe)}): {b}")
                continue
            if sensitive and not fate_done and txs == [] and drops and \
                    (drops[0][1], drops[0][2]) in POOL:
                # The model dropped it waiting for a neighbour; a slower run may have sent it
                # after an answer: it must be a correct result of its input.
                e = Ether(gframe)
                kind = "fwd4" if e.type == 0x0800 else "fwd6"
                if IP in e and e[IP].proto == 1 and e[IP].tos == 0xC0 and e[IP].ttl == 64:
                    kind = "icmp4"
                elif IPv6 in e and e[IPv6].nh == 58 and e[IPv6].hlim == 64:
                    kind = "icmp6"
                fate_done = True
                notes["waiting packets sent in a slower run"] += 1
                for b in scapy_validate(kind, port, frame, gframe, cfg):
                    problem(f"{where}: output on {gport} ({summary(gframe)}): {b}")
                continue
            if txs:
                a = min(txs, key=lambda a: (a[1] != gport, len(a[2]) != len(gframe),
                                            sum(x != y for x, y in zip(a[2], gframe))))
                problem(f"{where}:\n    sent on {gport}: {summary(gframe)}\n"
                        f"    expected on {a[1]}: {summary(a[2])}\n    "
                        + hexdiff(a[2], gframe))
            elif drops:
                problem(f"{where}:\n    sent on {gport}: {summary(gframe)}\n"
                        f"    expected a drop: {drops[0][1]}/{drops[0][2]}")
            else:
                problem(f"{where}: sent on {gport}: {summary(gframe)}; expected nothing more")
        for r in want_requests:
            if exact_requests:
                problem(f"{where}: expected {r[3]} on {r[1]}: {summary(r[2])} was not sent")
            else:
                notes["predicted requests not sent (beyond the rate limiter's burst)"] += 1
        if fate_done:
            continue
        if drops:
            key = (drops[0][1], drops[0][2])
            if sensitive and key in POOL:
                sensitive_pool += 1
            else:
                predicted[key] += 1
        elif all(a[3] in ("icmp4", "icmp6") for a in txs) and not rec.waited:
            icmp_missing += 1
        elif sensitive:
            tolerated += 1
            sensitive_pool += 1
        else:
            a = txs[0]
            problem(f"{where}: nothing sent; expected on {a[1]}: {summary(a[2])}")
    for ts, got in sorted(outputs.items()):
        for port, frame in got:
            problem(f"output ts {ts} on {port} ({summary(frame)}) matches no input")
    for key, n in sorted(requests_seen.items()):
        if key not in hosts_asked:
            continue
        # At most one request per neighbour per second (plus the first).
        if n > 1 + int(secs):
            ip = vecmodel.ip6_str(key[1]) if hosts_asked[key] == "ns" else \
                vecmodel.ip4_str(key[1])
            problem(f"{n} requests for {ip} on {key[0]} in a run of {secs:.3f} s: more than "
                    "one a second")
    for key, n in model.originated_drops.items():
        predicted[key] += n

    with open(args.stats) as f:
        stats = json.load(f)
    nb = stats.get("neighbours")
    if nb is None:
        problem("the stats have no `neighbours` object (ARP/ND counters)")
        nb = {}
    sent_requests = sum(requests_seen.values()) + probes_seen + \
        sum(model.originated_drops.values())
    if retries and nb.get("originated", 0) > sent_requests:
        # Retries for neighbours on a port without a transmit side are dropped there unseen.
        unseen = nb.get("originated", 0) - sent_requests
        no_tx = {p.name for p in cfg.ports if p.tx is None}
        if any(port in no_tx for port, _ in model.asked):
            predicted[("interface-output", "port-has-no-tx")] += unseen
            sent_requests += unseen
            notes["retries dropped on a port without tx"] += unseen
    errors = collections.Counter()
    for e in stats["errors"]:
        errors[(e["node"], e["reason"])] += e["count"]
    rate_limited = errors.pop(("ip4-icmp-error", "rate-limited"), 0) + \
        errors.pop(("ip6-icmp-error", "rate-limited"), 0)
    if rate_limited != icmp_missing:
        problem(f"{icmp_missing} expected ICMP errors are missing, {rate_limited} counted as "
                "rate-limited")
    queue_full = errors.get(("ip4-arp", "queue-full"), 0) + \
        errors.get(("ip6-discover", "queue-full"), 0)
    if expiry:
        # Which of these reasons a waiting packet met depends on real time: only their sum is
        # predicted for the packets that waited.
        pool_counted = sum(errors.pop(k, 0) for k in POOL)
        pool_predicted = sum(predicted.pop(k, 0) for k in POOL) + sensitive_pool
        if pool_counted != pool_predicted:
            names = ", ".join("/".join(k) for k in sorted(POOL))
            problem(f"drops while waiting for a neighbour ({names}): counted {pool_counted}, "
                    f"the model predicts {pool_predicted}")
        for reasons in GIVEN_UP:
            counted = sum(errors.pop(k, 0) for k in reasons)
            want = sum(predicted.pop(k, 0) for k in reasons)
            if counted != want:
                problem(f"drops {' + '.join('/'.join(k) for k in sorted(reasons))}: counted "
                        f"{counted}, the model predicts {want}")
    for key in sorted(set(errors) | set(predicted)):
        if errors.get(key, 0) != predicted.get(key, 0):
            problem(f"drops {key[0]}/{key[1]}: counted {errors.get(key, 0)}, the model "
                    f"predicts {predicted.get(key, 0)}")
    if not expiry:
        for k in vecmodel.NEIGHBOUR_COUNTERS + ("originated",):
            if k in ("arp_requests_sent", "ns_sent", "originated") and \
                    (retries or not exact_requests):
                continue
            if nb.get(k) != model.stats[k]:
                problem(f"neighbours.{k} {nb.get(k)}, the model predicts {model.stats[k]}")
    if nb and nb.get("queued", 0) + queue_full != nb.get("released", 0) + nb.get("queue_drops", 0):
        problem(f"neighbours: queued {nb.get('queued')} + refused {queue_full} != released "
                f"{nb.get('released')} + queue_drops {nb.get('queue_drops')}")
    if nb and nb.get("originated") != nb.get("arp_requests_sent", 0) + nb.get("ns_sent", 0):
        problem(f"neighbours.originated {nb.get('originated')} is not the requests sent")
    if nb and not probes and nb.get("originated", 0) != sent_requests:
        problem(f"neighbours.originated {nb.get('originated')}, but {sent_requests} requests "
                "were sent or dropped")
    rx = sum(p["rx_packets"] for p in stats["ports"])
    tx = sum(p["tx_packets"] for p in stats["ports"])
    rxd = sum(p["rx_drops"] for p in stats["ports"])
    txd = sum(p["tx_drops"] for p in stats["ports"])
    total = stats["drops_total"]
    made = nb.get("originated", 0) + stats.get("emitted_total", 0)
    n_in = sum(len(v) for v in inputs.values())
    if rx != n_in - rx_drops:
        problem(f"rx_packets {rx}, expected {n_in - rx_drops}")
    if rxd != rx_drops:
        problem(f"rx_drops {rxd}, expected {rx_drops} (frames larger than a buffer or empty)")
    if tx != n_out or txd != 0:
        problem(f"tx_packets {tx} (tx_drops {txd}) but {n_out} frames in the output files")
    if rx + made != tx + total:
        problem(f"rx {rx} + originated {made} != tx {tx} + drops {total}")
    if total != sum(e["count"] for e in stats["errors"]):
        problem(f"drops_total {total} is not the sum of the error counters")

    mode = "exact" if not retries else \
        f"the run took {secs:.1f} s: requests bounded" + \
        (", waiting packets' fates bounded" if expiry else "") + \
        (", stale neighbours' probes allowed" if probes else "")
    print(f"check_replay ({mode}): {n_in} frames in ({rx_drops} not receivable), {n_out} out "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
          f"{sum(predicted.values())} dropped in {len(predicted)} ways, "
          f"{rate_limited} rate-limited")
    waited = sum(1 for r in result.values() if r.waited)
    print(f"  neighbours: {model.requests_made} requests predicted for {len(model.asked)} hosts, "
          f"{waited} packets waited for one; counters {json.dumps(nb, sort_keys=True)}")
    if extra_requests:
        print(f"  note: {sum(extra_requests.values())} more requests than a run under 1 s makes "
              "(retries)")
    for (node, reason), n in sorted(predicted.items()):
        print(f"  {node}/{reason}: {n}")
    for note, n in notes.items():
        print(f"  note: {n} x {note}")
    if tolerated:
        print(f"  note: {tolerated} packets sent by the model dropped while waiting (slow run)")
    if vecmodel.SCAPY_DISAGREEMENTS:
        print(f"  note: scapy did not round-trip {len(vecmodel.SCAPY_DISAGREEMENTS)} odd IPv4 "
              "headers (the byte-level expectation was used)")
    if problems:
        print(f"\n{len(problems)} PROBLEMS; the first {min(MAX_SHOWN, len(problems))}:")
        for p in problems[:MAX_SHOWN]:
            print(" -", p)
        sys.exit(1)
    print("check_replay: OK")


if __name__ == "__main__":
    main()

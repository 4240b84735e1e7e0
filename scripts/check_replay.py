#!/usr/bin/python3
"""Checks a vecplane pcap-to-pcap replay frame by frame, with scapy as the independent parser.

    /usr/bin/python3 scripts/check_replay.py --config DIR/replay.toml --stats DIR/stats.json

Reads the config (the same TOML `vecplane run --config` takes), every port's `rx` pcap (inputs)
and `tx` pcap (outputs), and the stats JSON (`vecplane run --stats-json`, or the same shape
written by the API test: {"ports": [{"name", "rx_packets", "tx_packets", "rx_drops",
"tx_drops"}], "errors": [{"node", "reason", "count"}], "drops_total"}).

Each input frame has a distinct timestamp and vecplane keeps it on what it sends, so each output
is paired with its input. Then:
  1. every output comes from an input, at most one per input;
  2. the reference model (scripts/vecmodel.py) says what each input must become; the output must
     be exactly that (ECMP: one of the members), or absent when the model drops it;
  3. every output is re-checked with scapy: routed IPv4 has TTL-1, a valid header checksum, the
     adjacency's MACs and the rest of the packet unchanged; routed IPv6 has hop limit - 1;
     ICMP/ICMPv6 errors have valid checksums, the right type/code/MTU, source = the receiving
     port's address, destination = the sender, and quote the start of the original packet;
  4. the drop counters equal the model's drops per (node, reason) (ICMP errors missing from the
     output are accepted only as counted rate-limited drops), rx_drops count the frames no buffer
     can hold, and rx = tx + drops.
Exit status 1 with the first problems explained (tcpdump-like scapy summaries and hex) when any
check fails.
"""

import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vecmodel  # noqa: E402
from vecmodel import be16, inet_checksum  # noqa: E402
from scapy.all import ICMP, IP, IPv6, Ether  # noqa: E402
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--stats", required=True)
    args = ap.parse_args()
    vecmodel.STRICT_SCAPY = False
    cfg = vecmodel.Config(args.config)
    model = vecmodel.Model(cfg)

    problems = []

    def problem(text):
        problems.append(text)

    inputs = {}
    for p in cfg.ports:
        if p.rx:
            for ts, frame in vecmodel.read_pcap(os.path.join(cfg.dir, p.rx)):
                if ts in inputs:
                    sys.exit(f"input timestamp {ts} is not unique: cannot pair outputs")
                inputs[ts] = (p.name, frame)
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

    predicted = collections.Counter()
    kinds = collections.Counter()
    rx_drops = 0
    icmp_missing = 0
    notes = collections.Counter()
    for ts in sorted(inputs):
        port, frame = inputs[ts]
        alts = model.process(frame, port)
        got = outputs.pop(ts, [])
        where = f"input ts {ts} on {port} ({len(frame)} bytes: {summary(frame)})"
        if alts[0][0] == "rx-drop":
            rx_drops += 1
            if got:
                problem(f"{where}: cannot be received (no buffer holds it) yet was sent")
            continue
        if len(got) > 1:
            problem(f"{where}: sent {len(got)} times: {[g[0] for g in got]}")
        txs = [a for a in alts if a[0] == "tx"]
        drops = [a for a in alts if a[0] == "drop"]
        if got:
            gport, gframe = got[0]
            match = None
            for a in txs:
                ok, note = vecmodel.frames_equivalent(a[2], gframe)
                if a[1] == gport and ok:
                    match = a
                    if note:
                        notes[note] += 1
                    break
            if match is None:
                if txs:
                    # Show the closest expectation (ECMP: the member whose MACs were used).
                    a = min(txs, key=lambda a: (a[1] != gport, len(a[2]) != len(gframe),
                                                sum(x != y for x, y in zip(a[2], gframe))))
                    problem(f"{where}:\n    sent on {gport}: {summary(gframe)}\n"
                            f"    expected on {a[1]}: {summary(a[2])}\n    "
                            + hexdiff(a[2], gframe))
                else:
                    problem(f"{where}:\n    sent on {gport}: {summary(gframe)}\n"
                            f"    expected a drop: {drops[0][1]}/{drops[0][2]}")
                continue
            kinds[match[3]] += 1
            for b in scapy_validate(match[3], port, frame, gframe, cfg):
                problem(f"{where}: output on {gport} ({summary(gframe)}): {b}")
        elif drops:
            predicted[(drops[0][1], drops[0][2])] += 1
        elif txs and all(a[3] in ("icmp4", "icmp6") for a in txs):
            icmp_missing += 1
        else:
            a = txs[0]
            problem(f"{where}: nothing sent; expected on {a[1]}: {summary(a[2])}")
    for ts, got in sorted(outputs.items()):
        for port, frame in got:
            problem(f"output ts {ts} on {port} ({summary(frame)}) matches no input")

    with open(args.stats) as f:
        stats = json.load(f)
    errors = collections.Counter()
    for e in stats["errors"]:
        errors[(e["node"], e["reason"])] += e["count"]
    rate_limited = errors.pop(("ip4-icmp-error", "rate-limited"), 0) + \
        errors.pop(("ip6-icmp-error", "rate-limited"), 0)
    if rate_limited != icmp_missing:
        problem(f"{icmp_missing} expected ICMP errors are missing, {rate_limited} counted as "
                "rate-limited")
    for key in sorted(set(errors) | set(predicted)):
        if errors.get(key, 0) != predicted.get(key, 0):
            problem(f"drops {key[0]}/{key[1]}: counted {errors.get(key, 0)}, the model "
                    f"predicts {predicted.get(key, 0)}")
    rx = sum(p["rx_packets"] for p in stats["ports"])
    tx = sum(p["tx_packets"] for p in stats["ports"])
    rxd = sum(p["rx_drops"] for p in stats["ports"])
    txd = sum(p["tx_drops"] for p in stats["ports"])
    total = stats["drops_total"]
    if rx != len(inputs) - rx_drops:
        problem(f"rx_packets {rx}, expected {len(inputs) - rx_drops}")
    if rxd != rx_drops:
        problem(f"rx_drops {rxd}, expected {rx_drops} (frames larger than a buffer or empty)")
    if tx != n_out or txd != 0:
        problem(f"tx_packets {tx} (tx_drops {txd}) but {n_out} frames in the output files")
    if rx != tx + total:
        problem(f"rx {rx} != tx {tx} + drops {total}")
    if total != sum(e["count"] for e in stats["errors"]):
        problem(f"drops_total {total} is not the sum of the error counters")

    print(f"check_replay: {len(inputs)} frames in ({rx_drops} not receivable), {n_out} out "
          f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
          f"{sum(predicted.values())} dropped in {len(predicted)} ways, "
          f"{rate_limited} rate-limited")
    for (node, reason), n in sorted(predicted.items()):
        print(f"  {node}/{reason}: {n}")
    for note, n in notes.items():
        print(f"  note: {n} x {note}")
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

#!/usr/bin/env python3
"""Instructions per packet of one graph node, counted by callgrind, by source line.

Timing on this shared 2-vCPU machine moves by 6-8% between identical runs; instruction counts
do not. A node that retires ~6 instructions a cycle (flow-switch's hit path did) is bound by what
it executes, and this tells what that is:

    scripts/instructions_per_packet.py --node flow_switch::FlowSwitch -- \\
        target/release/vecplane bench --scenario flows --flows 1000 --runs 1 --seconds 3 \\
        --warmup 0 --no-profile
    scripts/instructions_per_packet.py --node lb::LbNode -- \\
        target/release/vecplane bench --scenario lb --encap l3dsr --servers 100 --flows 1000 \\
        --runs 1 --seconds 2 --warmup 0 --routes 1000 --no-profile

It runs the command under `valgrind --tool=callgrind`, collecting only inside the node's
`process` (and what it calls), divides by the packets of the bench's median run (the line
`median run: N packets`, so give `--runs 1`), and attributes every instruction to the innermost
source line of this workspace in its inline chain (`addr2line -i`). It needs valgrind and
binutils (Debian's `valgrind`, `binutils`) and a binary with debug info (the release profile has
it). It writes only into a temporary directory and prints a table; it never changes the tree.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def parse_costs(path):
    """Self cost per instruction address from a callgrind file written with --dump-instr=yes."""
    cost = collections.Counter()
    addr = 0
    after_call = False

    def value(tok, prev):
        if tok == "*":
            return prev
        if tok[0] in "+-":
            return prev + int(tok, 0)
        return int(tok, 0)

    with open(path) as f:
        for line in f:
            if line.startswith("calls="):
                # The next cost line is the call's inclusive cost: not this address's own.
                after_call = True
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            parts = line.split()
            if len(parts) < 3:
                continue
            addr = value(parts[0], addr)
            if after_call:
                after_call = False
                continue
            cost[addr] += int(parts[2])
    return cost


def inline_chains(binary, addrs):
    """For each address, its inline chain (innermost first) as 'file:line' strings."""
    chains = {}
    addrs = sorted(addrs)
    for i in range(0, len(addrs), 2000):
        batch = [hex(a) for a in addrs[i : i + 2000]]
        out = subprocess.run(
            ["addr2line", "-a", "-i", "-e", binary] + batch,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        cur = None
        for line in out.splitlines():
            if line.startswith("0x"):
                cur = int(line, 16)
                chains[cur] = []
            elif cur is not None:
                chains[cur].append(re.sub(r" \(discriminator \d+\)", "", line))
    return chains


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--node",
        required=True,
        help="the node's type path in crate nodes, e.g. lb::LbNode, or a whole function name",
    )
    ap.add_argument("--root", default=os.getcwd(), help="workspace root (default: here)")
    ap.add_argument("--top", type=int, default=40, help="source lines to list")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the bench command")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the bench command after --")
    binary = cmd[0]
    # A node's `process` is `<nodes::..::Type as graph::node::Node>::process`; a node of another
    # crate is named whole, e.g. `--node '<ipfix::node::IpfixNode<A> as graph::node::Node>::process'`.
    if a.node.startswith("<"):
        toggle = a.node
    else:
        toggle = f"<nodes::{a.node} as graph::node::Node>::process"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-instr=yes",
                f"--callgrind-out-file={out}",
                f"--toggle-collect={toggle}",
            ]
            + cmd,
            capture_output=True,
            text=True,
        )
        m = re.search(r"median run: (\d+) packets", run.stdout + run.stderr)
        if run.returncode != 0 or not m or not os.path.exists(out):
            sys.stderr.write(run.stdout[-2000:] + run.stderr[-2000:])
            sys.exit(f"the command failed or printed no 'median run: N packets' line")
        packets = int(m.group(1))
        cost = parse_costs(out)
    total = sum(cost.values())
    if total == 0:
        sys.exit(f"nothing collected in {toggle}: is that the node's type path?")
    chains = inline_chains(binary, cost.keys())
    root = os.path.abspath(a.root) + "/"
    by_line = collections.Counter()
    by_file = collections.Counter()
    for addr, c in cost.items():
        ours = [f for f in chains.get(addr, []) if f.startswith(root)]
        where = ours[0][len(root) :] if ours else "(outside the workspace)"
        by_line[where] += c
        by_file[where.rsplit(":", 1)[0]] += c
    print(f"{toggle}: {total / packets:.1f} instructions per packet ({packets} packets)")
    print("\nby file:")
    for f, c in by_file.most_common(12):
        print(f"{c / packets:8.1f}  {f}")
    print("\nby source line (innermost line of this workspace):")
    for f, c in by_line.most_common(a.top):
        print(f"{c / packets:8.1f}  {f}")


if __name__ == "__main__":
    main()

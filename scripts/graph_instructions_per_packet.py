#!/usr/bin/env python3
"""Instructions per packet of a whole worker graph, counted by callgrind, as the marginal cost
between a short and a long run of the same bench command.

    scripts/graph_instructions_per_packet.py -- target/release/vecplane bench --scenario ip4

It runs the command twice under `valgrind --tool=callgrind`, collecting only inside
`Graph::run_once` (every node, the ports' rx and tx included), with `--runs 1 --warmup 0
--no-profile` and `--seconds 1`, then `--seconds 4`, and prints
(instructions(4 s) - instructions(1 s)) / (packets(4 s) - packets(1 s)): what a run does once
(tables, first flows, the first touch of memory) cancels out. The packets are the bench's
`median run: N packets`. Timing on this shared machine moves by several percent between runs;
this count does not. It cannot separate a scenario that runs a reference graph in the same
process (flows beside l2xc, lb beside ip4): use scripts/instructions_per_packet.py per node
there. Needs valgrind; writes only into a temporary directory.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile


def measure(cmd, seconds, tmp):
    out = os.path.join(tmp, f"callgrind.{seconds}")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         "--toggle-collect=*Graph::run_once*"]
        + cmd + ["--runs", "1", "--warmup", "0", "--no-profile", "--seconds", str(seconds)],
        capture_output=True, text=True)
    m = re.search(r"median run: (\d+) packets", run.stdout + run.stderr)
    if run.returncode != 0 or not m or not os.path.exists(out):
        sys.stderr.write(run.stdout[-2000:] + run.stderr[-2000:])
        sys.exit("the command failed or printed no 'median run: N packets' line")
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(m.group(1)), int(line.split()[1])
    sys.exit("callgrind wrote no totals")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the bench command")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the bench command after --")
    with tempfile.TemporaryDirectory() as tmp:
        p1, i1 = measure(cmd, 1, tmp)
        p4, i4 = measure(cmd, 4, tmp)
    if p4 <= p1:
        sys.exit(f"the long run moved no more packets than the short one ({p4} <= {p1})")
    print(f"{(i4 - i1) / (p4 - p1):.1f} instructions per packet "
          f"(runs of {p1} and {p4} packets)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Run the workspace's test binaries in two lanes: what `cargo test --workspace` does, in less time.

`cargo test` runs one test binary after another, and most end-to-end files hold a lock so that their
labs run one at a time: the machine then waits on pings, BGP timers and HTTP loops with a CPU idle.
This runner builds every test binary once (`cargo test --no-run`), then runs them two at a time, each
in its package's directory as cargo would. The binaries that load the CPU for long (QEMU guests under
TCG, the benchmarks' pinned workers, the idle-CPU measurements of the polling tests) never run
beside each other: at most one of them runs, beside a lighter one.

    scripts/run_tests.py [--lanes N] [-- ARGS FOR EVERY TEST BINARY]

Each binary's output is printed whole when it ends, after a line saying what it was and how long it
took; a failing binary does not stop the others. The exit status is 1 when any binary failed.
Doc tests are not run here (`cargo test --doc` does that).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

# Binaries that load the CPU for long, or that need it not loaded by one of those: one at a time.
# lb_e2e is of the second kind: it demands that no HTTP request fails while servers are drained,
# flushed and added, and once, beside QEMU guests under TCG, one curl request in 300 timed out
# (curl's 3 s; the cause was not found). lb_fleet too: it demands that no request fails across
# the SIGKILL of one of three load balancers, and beside QEMU guests it failed twice in three
# runs on 2026-11-28 (a timeout on TCP's retransmission edge, since fixed; then one read error,
# not understood).
HEAVY = {
    ("vecplane", "vm_ports"),
    ("vecplane", "vm_queues"),
    ("vecplane", "demo"),
    ("vecplane", "polling"),
    ("vecplane", "lb_e2e"),
    ("vecplane", "lb_fleet"),
    ("bench", "scenarios"),
    ("netlab", "guest"),
}

# Rough seconds of the long binaries (the CI log of 2026-11-28), to start them first.
EXPECTED = {
    ("vecplane", "vm_ports"): 70,
    ("vecplane", "vm_queues"): 30,
    ("vecplane", "demo"): 65,
    ("bench", "scenarios"): 61,
    ("vecplane", "e2e"): 55,
    ("vecplane", "lb_e2e"): 54,
    ("vecplane", "lb_fleet"): 45,
    ("vecplane", "polling"): 38,
    ("dataplane", "pcap_replay"): 25,
    ("netlab", "guest"): 23,
    ("netlab", "lb_reference"): 20,
    ("fib", "lib"): 18,
}


def build():
    """Build every test binary; [(key, label, path, cwd)]."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            sys.stdout.write(line)
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        cwd = os.path.dirname(msg["manifest_path"])
        # Keyed by the package's directory (crates/fib -> "fib") and the target: "lib" for
        # unit tests, the file's name for integration tests.
        pkg = os.path.basename(cwd)
        kind = target["name"] if target["kind"] == ["test"] else "lib"
        found.append(
            (
                (pkg, kind),
                f"{pkg} {' '.join(target['kind'])} {target['name']}",
                msg["executable"],
                cwd,
            )
        )
    if proc.wait() != 0:
        sys.exit("cargo test --no-run failed")
    return found


class Lanes:
    def __init__(self, jobs, lanes, test_args):
        self.todo = sorted(jobs, key=lambda j: -EXPECTED.get(j[0], 5))
        self.test_args = test_args
        self.cv = threading.Condition()
        self.heavy_running = False
        self.failed = []
        self.print_lock = threading.Lock()
        self.running = {}
        self.last_report = time.monotonic()
        self.threads = [threading.Thread(target=self.lane, args=(i,)) for i in range(lanes)]

    def take(self):
        """The first job this lane may start now, or None when none is left."""
        with self.cv:
            while True:
                if not self.todo:
                    return None
                for i, job in enumerate(self.todo):
                    heavy = job[0] in HEAVY
                    if not heavy or not self.heavy_running:
                        del self.todo[i]
                        if heavy:
                            self.heavy_running = True
                        return job
                self.cv.wait()

    def done(self, job):
        with self.cv:
            if job[0] in HEAVY:
                self.heavy_running = False
            self.cv.notify_all()

    def lane(self, n):
        while True:
            job = self.take()
            if job is None:
                return
            key, label, path, cwd = job
            with self.print_lock:
                print(f"-- lane {n}: {label} started", flush=True)
            t = time.monotonic()
            with self.print_lock:
                self.running[n] = (label, t)
            env = dict(os.environ, CARGO_MANIFEST_DIR=cwd)
            r = subprocess.run(
                [path] + self.test_args,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            secs = time.monotonic() - t
            with self.print_lock:
                del self.running[n]
            self.done(job)
            status = "ok" if r.returncode == 0 else f"FAILED (exit {r.returncode})"
            with self.print_lock:
                print(f"== {label}: {status} in {secs:.1f} s ({path})", flush=True)
                sys.stdout.write(r.stdout.decode("utf-8", "replace"))
                sys.stdout.flush()
                if r.returncode != 0:
                    self.failed.append(label)

    def run(self):
        for t in self.threads:
            t.start()
        # A line a minute on what is still running: a binary's own output comes when it ends.
        while any(t.is_alive() for t in self.threads):
            time.sleep(2)
            now = time.monotonic()
            if now - self.last_report >= 60:
                self.last_report = now
                with self.print_lock:
                    running = ", ".join(
                        f"{label} ({now - t:.0f} s)" for label, t in self.running.values()
                    )
                    if running:
                        print(f"-- still running: {running}", flush=True)
        for t in self.threads:
            t.join()
        return self.failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lanes", type=int, default=2, help="binaries run at once (default 2)")
    ap.add_argument("rest", nargs="*", help="after --: arguments for every test binary")
    a = ap.parse_args()
    if a.lanes < 1:
        sys.exit("--lanes: accepted: 1 or more")
    jobs = build()
    if not jobs:
        sys.exit("no test binary was built")
    # A renamed heavy file would otherwise run beside another heavy one unnoticed.
    lost = sorted(HEAVY - {key for key, _, _, _ in jobs})
    if lost:
        sys.exit(f"run_tests.py: HEAVY names binaries that were not built: {lost}")
    t = time.monotonic()
    failed = Lanes(jobs, a.lanes, a.rest).run()
    print(f"== {len(jobs)} test binaries in {time.monotonic() - t:.0f} s, {a.lanes} at a time")
    if failed:
        print("FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

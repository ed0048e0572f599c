"""CPU seconds of test modules, each run alone as `make test` runs it (``-m "not slow"``), every process counted.

    python benchmarks/module_cpu.py tests/e2e/control/test_control.py [more modules] [--repeats 2]

An argument may name several tests or modules joined by commas: they run in one pytest, as they would share a
session's results (tests/support/shared.py) in `make test`.

On a machine shared with other work wall time says more about the load than about the tests, so this counts
CPU: user + sys of pytest and of every process below it, kernels and engines included. A case's kernel is forked
from a warm process that leaves its starter's process tree (docs/architecture.md, Warm kernels), so a child's
``RUSAGE_CHILDREN`` alone would miss most of a gate's work: this process makes itself the subreaper of what it
starts, so every such orphan is re-parented here and counted when it is reaped. Warm processes left idle when the
module ends are asked to stop (their work is done; only their exit is waited for). Each run gets warm processes of
its own (a variable of its own in the environment is part of their key), as a fresh suite would.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
import uuid

from timing import ROOT, print_rows

PR_SET_CHILD_SUBREAPER = 36
LINGER_S = 5  # what a module's leftovers (warm processes between requests) get to end on their own


def become_subreaper() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap(block_s: float) -> None:
    """Reap every child (re-parented orphans too) until none is left, asking what remains after ``block_s`` to
    stop, then killing it."""
    deadline, asked = time.monotonic() + block_s, None
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        now = time.monotonic()
        if now > deadline and asked is None:
            asked = now
            _signal_children(signal.SIGTERM)
        elif asked is not None and now > asked + 10:
            _signal_children(signal.SIGKILL)
        time.sleep(0.2)


def _signal_children(sig: int) -> None:
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if ppid == me:
            try:
                os.kill(int(entry), sig)
            except ProcessLookupError:
                pass


def cpu_of_module(module: str, extra: list[str]) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and pytest's exit status of one run of ``module`` (names joined by commas)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PARITY_KIT_BENCH_RUN": uuid.uuid4().hex}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *module.split(","), "-q", "-p", "no:cacheprovider", "-m",
                             "not slow", *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    reap(LINGER_S)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(out.strip().splitlines()[-1] if out.strip() else "(no output)", file=sys.stderr)
    return cpu, wall, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed on to pytest")
    args = parser.parse_args()
    become_subreaper()
    rows = [("load (1, 5, 15 min) at the start", " ".join(f"{x:.1f}" for x in os.getloadavg()))]
    for module in args.modules:
        for n in range(args.repeats):
            cpu, wall, rc = cpu_of_module(module, args.pytest_arg)
            rows.append((f"{module} #{n + 1}", f"CPU {cpu:7.1f} s  wall {wall:7.1f} s  pytest exit {rc}"))
            print_rows(rows[-1:])
    rows.append(("load (1, 5, 15 min) at the end", " ".join(f"{x:.1f}" for x in os.getloadavg())))
    print_rows(rows)


if __name__ == "__main__":
    main()

"""CPU time of one `parity-kit check` of the embedded descriptor, with the t quantile cached and without.

    .venv/bin/python benchmarks/command_start.py [--repeats 5]

Every command that reads a descriptor summarizes its cases' power records, and each summary asks the drift test's
t quantile (kit.core.noise.special) for its critical value: the same dozen (p, df) pairs hundreds of times over.
The quantile is a bisection of about a hundred incomplete-beta evaluations, so it is cached. This measures what
the cache saves a command, both ways alternated in one run (the machine's load moves both alike), as user + sys
CPU of the child process rather than wall time. "uncached" runs the same command with the quantile's own function
put back in place of the cached one before anything calls it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

from timing import ROOT, print_rows

DESCRIPTOR = "descriptors/tiny-cpu.toml"
# The command as `parity-kit check` runs it, counting the quantile's calls and distinct arguments on stderr.
RUN = """
import sys
from kit.core.noise import special
cached = special.t_two_sided_quantile
plain = cached.__wrapped__
asked = []
def counted(p, df):
    asked.append((p, df))
    return (plain if {uncached} else cached)(p, df)
special.t_two_sided_quantile = counted
for module in list(sys.modules.values()):
    if getattr(module, "t_two_sided_quantile", None) is cached:
        module.t_two_sided_quantile = counted
from kit.cli.entry import main
sys.argv = ["parity-kit", "check", {descriptor!r}]
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
print(len(asked), len(set(asked)), file=sys.stderr)
"""


def cpu_of(uncached: bool) -> tuple[float, int, int]:
    """User + sys seconds of one command in a fresh interpreter, and how often it asked the quantile (all, distinct)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", RUN.format(uncached=uncached, descriptor=DESCRIPTOR)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    asked, distinct = map(int, proc.stderr.strip().splitlines()[-1].split())
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), asked, distinct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cpu_of(False)  # fills the bytecode cache, so neither side pays for compiling the kit
    runs: dict[bool, list[float]] = {False: [], True: []}
    counts = (0, 0)
    for _ in range(args.repeats):
        for uncached in (True, False):
            seconds, *counted = cpu_of(uncached)
            runs[uncached].append(seconds)
            counts = (counted[0], counted[1])
    cold, warm = statistics.median(runs[True]), statistics.median(runs[False])
    print_rows([("command", f"parity-kit check {DESCRIPTOR}"),
                ("quantile asked", f"{counts[0]} times, {counts[1]} distinct (p, df)"),
                ("CPU, quantile not cached (median)", f"{cold:.2f} s of {', '.join(f'{s:.2f}' for s in runs[True])}"),
                ("CPU, quantile cached (median)", f"{warm:.2f} s of {', '.join(f'{s:.2f}' for s in runs[False])}"),
                ("saved", f"{cold - warm:.2f} s ({(cold - warm) / cold:.0%})")])


if __name__ == "__main__":
    main()

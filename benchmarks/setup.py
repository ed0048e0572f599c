"""Set-up from a clean clone, the old way and the new way side by side: both environments installed by
scripts/ensure-env.sh with pip (``PARITY_KIT_INSTALLER=pip``, what it did before) and with uv (bootstrapped
into the environment when none is on PATH), each into a fresh clone of this checkout with an empty package
cache of its own, one after the other.

    python3 benchmarks/setup.py [--repeats 1] [--only pip|uv] [--keep]

A new user's first command is ``make gate``, which first sets both environments up, so this is the wait before
anything of the kit runs. Each row is one fresh clone: the wall time of the script, the CPU time (user + sys of it
and everything it started) and the times the script reports for each environment; then the same script again in
that clone, which must reuse both environments and install nothing. The machine (CPU model, cores) and its load
(uptime's 1-minute average before and after each run) are printed with them: on a shared 2-core host the load
moves the wall time more than anything else, so compare rows of the same run only. It needs the network (or the
package sources pip is configured with) and about 8 GB of disk in the temporary folder per clone.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from timing import ROOT, print_rows


@dataclass(frozen=True)
class SetupRun:
    installer: str
    wall_s: float
    cpu_s: float
    reported: str  # what the script said it spent on each environment
    again_s: float  # the script once more, in the same clone
    again_quiet: bool  # and it installed nothing, registered nothing
    load_before: float
    load_after: float


def load_average() -> float:
    return os.getloadavg()[0]


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {os.cpu_count()} cores"


def one_setup(installer: str, work: Path) -> SetupRun:
    """Clone the checkout's HEAD into ``work`` and set it up with ``installer``, caches empty."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PARITY_KIT_UV", "PARITY_KIT_INSTALLER"}}
    env.update(PIP_CACHE_DIR=str(work / "pip-cache"), UV_CACHE_DIR=str(work / "uv-cache"))
    if installer == "pip":
        env["PARITY_KIT_INSTALLER"] = "pip"
    else:  # a machine without uv: the script bootstraps its own
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if not (Path(p) / "uv").exists())
    load_before = load_average()
    before = os.times()
    t0 = time.perf_counter()
    proc = subprocess.run([str(clone / "scripts" / "ensure-env.sh")], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = os.times()
    load_after = load_average()
    if proc.returncode != 0:
        raise SystemExit(f"scripts/ensure-env.sh ({installer}) failed:\n{proc.stderr[-3000:]}")
    reported = ", ".join(re.findall(r"installed in \d+ s", proc.stderr))
    t1 = time.perf_counter()
    again = subprocess.run([str(clone / "scripts" / "ensure-env.sh")], capture_output=True, text=True, env=env)
    again_s = time.perf_counter() - t1
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return SetupRun(installer, wall, cpu, reported, again_s, again.returncode == 0 and not again.stderr.strip(),
                    load_before, load_after)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="clean clones per installer, alternating (default 1)")
    ap.add_argument("--only", choices=("pip", "uv"), help="one installer only")
    ap.add_argument("--keep", action="store_true", help="keep the clones and their caches (their folders are printed)")
    args = ap.parse_args()
    installers = [args.only] if args.only else ["pip", "uv"]
    print_rows([("machine", machine())])
    for n in range(args.repeats):
        for installer in installers:
            work = Path(tempfile.mkdtemp(prefix=f"parity-kit-setup-{installer}-"))
            try:
                run = one_setup(installer, work)
                print_rows([(f"{installer} #{n + 1}: set-up, both environments",
                             f"{run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU ({run.reported}); "
                             f"load {run.load_before:.2f} before, {run.load_after:.2f} after"),
                            (f"{installer} #{n + 1}: the same again",
                             f"{run.again_s:.2f} s, {'nothing installed' if run.again_quiet else 'NOT quiet'}")])
                sys.stdout.flush()  # before the clean-up: removing a clone's 8 GB takes minutes on a loaded host
            finally:
                if args.keep:
                    print(f"{installer} #{n + 1}: kept in {work}", flush=True)
                else:
                    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

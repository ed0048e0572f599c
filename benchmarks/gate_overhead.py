"""Figures for the embedded gate: set-up time, gate wall time, per-case papermill overhead.

    .venv/bin/python benchmarks/gate_overhead.py [--setup] [--repeats 3]

The overhead of a case is its duration through papermill (kernel start, notebook,
scraps) minus the same `run_case` called in a fresh Python process (imports,
model load, scoring), both measured here in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IN_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
from kit.descriptor import load_descriptor
from kit.casework import run_case
spec = load_descriptor(sys.argv[1]).case_specs([sys.argv[2]])[0]
t1 = time.perf_counter()
result = run_case(spec)
t2 = time.perf_counter()
run_case(spec)
t3 = time.perf_counter()
print(json.dumps({"cold_s": t2 - t0, "import_s": t1 - t0, "warm_s": t3 - t2, "status": result.status}))
"""


def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    return time.perf_counter() - t0, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="also time scripts/ensure-env.sh into a fresh venv")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    descriptor = str(ROOT / "descriptors" / "tiny-cpu.toml")
    rows = []

    if args.setup:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "VENV": str(Path(tmp) / "venv")}
            first, p = timed(["scripts/ensure-env.sh"], env=env)
            assert p.returncode == 0, p.stderr
            again, _ = timed(["scripts/ensure-env.sh"], env=env)
        rows += [("set-up, fresh venv", f"{first:.1f} s"), ("set-up, second run (reuse)", f"{again:.2f} s")]

    walls, case_s = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            out = Path(tmp) / f"run{i}"
            wall, p = timed([sys.executable, "-m", "kit.cli", "gate", descriptor, "--out", str(out)])
            assert p.returncode == 0, p.stderr
            walls.append(wall)
            for name, case in json.loads((out / "result.json").read_text())["cases"].items():
                case_s.setdefault(name, []).append(case["duration_s"])
    rows.append(("gate wall time (CLI, incl. summary)", f"{statistics.median(walls):.1f} s (median of {len(walls)})"))

    for name, durations in case_s.items():
        inproc = []
        for _ in range(args.repeats):
            _, p = timed([sys.executable, "-c", IN_PROCESS, descriptor, name])
            assert p.returncode == 0, p.stderr
            inproc.append(json.loads(p.stdout.strip().splitlines()[-1]))
        nb = statistics.median(durations)
        cold = statistics.median(r["cold_s"] for r in inproc)
        warm = statistics.median(r["warm_s"] for r in inproc)
        rows += [
            (f"{name}: papermill case", f"{nb:.2f} s"),
            (f"{name}: in-process, fresh process", f"{cold:.2f} s"),
            (f"{name}: in-process, warm (scoring only)", f"{warm:.2f} s"),
            (f"{name}: papermill overhead vs fresh process", f"{nb - cold:.2f} s"),
        ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()

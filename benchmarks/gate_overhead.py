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
import sys
import tempfile
from pathlib import Path

from timing import ROOT, print_rows, timed

sys.path.insert(0, str(ROOT))

from kit.case.interpreter import kernel_python  # noqa: E402

# Run with the case's kernel's Python: a Levanter case needs its own environment.
IN_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
from kit.case.runner import resolve_spec, run_case
spec = resolve_spec(None, sys.argv[1], sys.argv[2])
t1 = time.perf_counter()
result = run_case(spec)
t2 = time.perf_counter()
run_case(spec)
t3 = time.perf_counter()
print(json.dumps({"cold_s": t2 - t0, "import_s": t1 - t0, "warm_s": t3 - t2, "status": result.status}))
"""


def cell_times(notebook: Path, duration_s: float) -> dict:
    """papermill records each cell's duration: split a case into its cells and the rest."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    cells = [c.metadata.get("papermill", {}).get("duration") or 0.0 for c in nb.cells]
    main_cell = max(cells)
    return {"case": duration_s, "cells": sum(cells), "display": sum(cells) - main_cell}


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

    walls, serial = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            out = Path(tmp) / f"run{i}"
            wall, p = timed([sys.executable, "-m", "kit.cli", "gate", descriptor, "--out", str(out)])
            assert p.returncode == 0, p.stderr
            walls.append(wall)
            # One case at a time, as the in-process comparison runs, so both see the same machine.
            out = Path(tmp) / f"serial{i}"
            _, p = timed([sys.executable, "-m", "kit.cli", "gate", descriptor, "--out", str(out), "--jobs", "1",
                          "--no-summary"])
            assert p.returncode == 0, p.stderr
            for name, case in json.loads((out / "result.json").read_text())["cases"].items():
                serial.setdefault(name, []).append(cell_times(Path(case["notebook"]), case["duration_s"]))
            kernels = json.loads((out / "manifest.json").read_text())["kernels"]
    rows.append(("gate wall time, cases side by side (CLI, incl. summary)",
                 f"{statistics.median(walls):.1f} s (median of {len(walls)})"))

    for name, runs in serial.items():
        inproc = []
        for _ in range(args.repeats):
            python, env = kernel_python(kernels[name], name)
            _, p = timed([python, "-c", IN_PROCESS, descriptor, name], env=env)
            assert p.returncode == 0, p.stderr
            inproc.append(json.loads(p.stdout.strip().splitlines()[-1]))
        case = statistics.median(r["case"] for r in runs)
        machinery = statistics.median(r["case"] - r["cells"] for r in runs)
        display = statistics.median(r["display"] for r in runs)
        cold = statistics.median(r["cold_s"] for r in inproc)
        warm = statistics.median(r["warm_s"] for r in inproc)
        rows += [
            (f"{name}: papermill case, alone", f"{case:.2f} s"),
            (f"{name}: run_case in a fresh process", f"{cold:.2f} s"),
            (f"{name}: run_case warm (model loaded, scoring only)", f"{warm:.2f} s"),
            (f"{name}: overhead of the notebook execution", f"{case - cold:.2f} s"),
            (f"{name}:   of which kernel start and papermill", f"{machinery:.2f} s"),
            (f"{name}:   of which the table and plot cells", f"{display:.2f} s"),
        ]
    print_rows(rows)


if __name__ == "__main__":
    main()

"""Where a gate's time goes, case by case and phase by phase, for one run or several side by side.

    python benchmarks/gate_timeline.py RUN_DIR [RUN_DIR ...] [--labels cold,warm] [--markdown]

Each case result holds its phases in the order they ran (kit.core.records.phases): kernel start and imports,
inputs (fixture, golden, model digest), model load, one entry per bucket (the first prompt of a bucket
compiles its program), repeats, decode, engine close, compare, notebook write-out. Given a cold run and
a warm one (the same gate again, compilation caches filled), the difference per phase is what caching
saves. The last rows give each run's case time summed, its cases phase and its whole wall time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kit.core.records.phases import ordered


def load(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def phase_rows(runs: list[dict], case: str) -> list[tuple[str, list[float | None]]]:
    every = {}
    for run in runs:
        every.update((run["cases"].get(case) or {}).get("phases") or {})
    names = [name for name, _ in ordered(every)]
    rows = [(name, [((run["cases"].get(case) or {}).get("phases") or {}).get(name) for run in runs])
            for name in names]
    rows.append(("case total", [(run["cases"].get(case) or {}).get("duration_s") for run in runs]))
    return rows


def table(header: list[str], rows: list[tuple[str, list[float | None]]], markdown: bool) -> str:
    cells = [[label] + ["" if v is None else f"{v:.1f}" for v in values] for label, values in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *cells)]

    def fmt(row):
        return "  ".join(f"{x:<{w}}" if i == 0 else f"{x:>{w}}" for i, (x, w) in enumerate(zip(row, widths)))

    return "\n".join([fmt(header)] + [fmt(c) for c in cells])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--labels", help="comma-separated column names (default: the run folders' names)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    runs = [load(r) for r in args.runs]
    labels = args.labels.split(",") if args.labels else [r.name for r in args.runs]
    header = ["phase (s)"] + labels
    cases = [c for run in runs for c in run["cases"] if c]
    for case in dict.fromkeys(cases):
        devices = {", ".join(d.get("name", "?") + f" #{d.get('index')}" for d in (run["cases"].get(case) or {})
                             .get("devices") or []) for run in runs} - {""}
        print(f"\n{case}" + (f" (GPU {'; '.join(sorted(devices))})" if devices else ""))
        print(table(header, phase_rows(runs, case), args.markdown))
    totals = [("cases summed", [sum(c.get("duration_s") or 0 for c in run["cases"].values()) for run in runs]),
              ("cases phase (wall)", [run.get("duration_s") for run in runs])]
    print("\nthe gate")
    print(table(header, totals, args.markdown))


if __name__ == "__main__":
    main()

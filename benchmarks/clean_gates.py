"""How near a series of clean gates came to a false failure, and whether they were distinct draws of the noise.

A false-failure rate is measured by running the gate, unchanged, on a clean engine many times. That only
measures something when each gate is a fresh draw of the launch-to-launch noise: on one node with its
compilation caches kept, a second kernel runs the very programs the first compiled and gives the same numbers
to the last digit (scripts/gpu-gates.sh's ``GATE_FRESH=1`` gives each gate empty caches instead).

For every case this prints, per gate, its status and the largest error of each bucket over the bucket's bound,
then how many distinct answers the gates gave (prompt errors compared exactly), the number of gates that failed
the case and the nearest any bucket came to its bound. The run directories are read through the kit's one
reader of a run (kit.core.records.results.read_run).

    python benchmarks/clean_gates.py RUN_DIR... [--markdown] [--json OUT]

Exit code 3 when a run directory cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.records.records import CaseResult
from kit.core.records.results import read_run


@dataclass(frozen=True)
class CaseDraw:
    gate: str
    case: str
    status: str
    ratios: dict[str, float]  # per bucket: its largest error over its bound
    fingerprint: tuple[float, ...]  # every prompt's error, in the result's order: equal ones are one draw


@dataclass(frozen=True)
class CaseSeries:
    case: str
    gates: int
    failed: int
    distinct_draws: int
    nearest_ratio: float  # the largest bucket error over its bound, over every gate
    nearest_bucket: str


def draw(gate: str, result: CaseResult) -> CaseDraw:
    ratios: dict[str, float] = {}
    for p in sorted(result.prompts, key=lambda p: p.bucket):
        if p.bound:  # the bound the prompt was judged by (none for an exact case)
            bucket = str(p.bucket)
            ratios[bucket] = max(ratios.get(bucket, 0.0), p.max_probability_error / p.bound)
    return CaseDraw(gate, result.case, result.status, ratios,
                    tuple(round(p.max_probability_error, 12) for p in result.prompts))


def series(draws: list[CaseDraw]) -> CaseSeries:
    nearest = max(((r, b) for d in draws for b, r in d.ratios.items()), default=(0.0, ""))
    return CaseSeries(draws[0].case, len(draws), sum(d.status != "passed" for d in draws),
                      len({d.fingerprint for d in draws}), round(nearest[0], 3), nearest[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--markdown", action="store_true", help="tables for docs/gpu-figures.md")
    parser.add_argument("--json", type=Path, help="write every draw and each case's series here")
    args = parser.parse_args(argv)
    by_case: dict[str, list[CaseDraw]] = defaultdict(list)
    for run_dir in args.runs:
        try:
            run = read_run(run_dir)
        except (OSError, ValueError) as exc:
            print(f"{run_dir}: not a readable gate run: {exc}", file=sys.stderr)
            return 3
        for name, result in run.results.items():
            by_case[name].append(draw(run_dir.name, result))
    summary = [series(d) for d in by_case.values()]
    for case, draws in by_case.items():
        buckets = sorted({b for d in draws for b in d.ratios}, key=int)
        if args.markdown:
            print(f"\n{case}: largest error over the bound, per bucket\n")
            print("| gate | status | " + " | ".join(buckets) + " |")
            print("| --- | --- | " + " | ".join("---:" for _ in buckets) + " |")
        for d in draws:
            cells = [f"{d.ratios[b]:.2f}" if b in d.ratios else "" for b in buckets]
            plain = "  ".join(f"{b}:{c}" for b, c in zip(buckets, cells))
            print(f"| {d.gate} | {d.status} | " + " | ".join(cells) + " |" if args.markdown
                  else f"{case:<12} {d.gate:<10} {d.status:<8} {plain}")
    print()
    for s in summary:
        print(f"{s.case}: {s.failed} of {s.gates} gates failed; {s.distinct_draws} distinct answers; nearest a bucket "
              f"came to its bound: {s.nearest_ratio} of it (bucket {s.nearest_bucket})")
    if args.json:
        args.json.write_text(json.dumps({"series": [asdict(s) for s in summary],
                                         "draws": [asdict(d) for ds in by_case.values() for d in ds]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

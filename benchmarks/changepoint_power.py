"""What the change-point test of kit.history.changepoint does on simulated series: false alarms and power.

Prints, per series length, the fraction of null series (no step) flagged at the stated false-alarm rate,
for normal and for skewed, tied noise; the fraction of null histories announced at least once when tested
after every run (online use); and for steps of 1, 2 and 3 noise sd, the chance of finding the step in a
whole series, and online, how many runs after the step the announcement comes. Values and ranks both.

    python benchmarks/changepoint_power.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import print_rows  # noqa: E402
from kit.history.changepoint import completed_at_last, find_step  # noqa: E402

RATE = 0.01
SEED = 2026


def noise(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(size=n)
    # Exponential rounded to a tenth of its sd: skewed, about a third of the points tied.
    return np.round(rng.exponential(size=n), 1)


def false_alarms(lengths: list[int], trials: int, ranks: bool) -> list[tuple[str, str]]:
    rows = []
    rng = np.random.default_rng(SEED)
    for kind in ("normal", "skewed"):
        for n in lengths:
            count = trials if n <= 200 else max(trials // 4, 100)
            x = [noise(rng, kind, n) for _ in range(count)]
            hits = sum(find_step(v, false_alarm=RATE, ranks=ranks) is not None for v in x)
            sd = np.sqrt(RATE * (1 - RATE) / count)
            rows.append((f"null {kind} n={n}", f"{hits / count:.4f} flagged of {count} (stated {RATE}, sd {sd:.4f})"))
    return rows


def online_false_alarms(lengths: list[int], trials: int, ranks: bool) -> list[tuple[str, str]]:
    rows = []
    rng = np.random.default_rng(SEED + 1)
    for n in lengths:
        ever = 0
        for _ in range(trials):
            x = list(rng.normal(size=n))
            ever += any(completed_at_last(x[:r], false_alarm=RATE, ranks=ranks) for r in range(6, n + 1))
        rows.append((f"online null, {n} runs", f"{ever / trials:.3f} of histories announced at least once"))
    return rows


def power(trials: int, ranks: bool) -> list[tuple[str, str]]:
    rows = []
    rng = np.random.default_rng(SEED + 2)
    for size in (1.0, 2.0, 3.0):
        for n in (20, 50):
            x = [np.r_[np.zeros(n // 2), np.full(n - n // 2, size)] + rng.normal(size=n) for _ in range(trials)]
            steps = [find_step(v, false_alarm=RATE, ranks=ranks) for v in x]
            found = [s for s in steps if s is not None]
            near = sum(abs(s.index - n // 2) <= 2 for s in found)
            line = f"found {len(found) / trials:.2f}, index within 2: {near / trials:.2f}"
            rows.append((f"step {size:g} sd, n={n} middle", line))
        delays = []
        for _ in range(trials):
            v = list(np.r_[np.zeros(10), np.full(30, size)] + rng.normal(size=40))
            runs = (r for r in range(11, 41) if completed_at_last(v[: r + 1], false_alarm=RATE, ranks=ranks))
            delays.append(next((r - 10 for r in runs), None))
        got = [d for d in delays if d is not None]
        median = f"{np.median(got):.0f}" if got else "-"
        line = f"announced within 30 runs {len(got) / trials:.2f}, median delay {median} runs after the step"
        rows.append((f"step {size:g} sd online, 10 before", line))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer trials")
    args = ap.parse_args()
    trials = 200 if args.quick else 1000
    for ranks in (False, True):
        print(f"== statistic: {'ranks (Mann-Whitney)' if ranks else 'values (t)'}; false_alarm {RATE} per series")
        rows = false_alarms([10, 20, 50, 100, 200, 1000], trials, ranks)
        rows += online_false_alarms([24, 100], trials // 5, ranks)
        rows += power(trials // 5, ranks)
        print_rows(rows)


if __name__ == "__main__":
    main()

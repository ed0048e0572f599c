"""How many clean samples a case needs before its bounds stop moving, read from a calibration record's samples.

The rule (kit.core.noise.rule.bound_rule) widens a bucket's range by d2(10)/d2(n) when fewer than ten distinct
samples were taken, and a range seen in few samples is itself short of the range more would show: the two pull
in opposite directions, so the bound a case would get from k of its samples is measured here, not argued. For
each k from the rule's minimum to the record's number of distinct samples, every subset of k (or, past a few
hundred, a fixed random draw of them) gives the bounds the rule would give; the table shows each bucket's median
and largest bound over the subsets, and the k from which the median stays within 5 % of the bound from all of
them. Each distinct sample is also held out once against the bounds of the others (a clean launch the record
had not seen must pass them: the false failures that k samples would give).

    python benchmarks/bound_by_samples.py CALIBRATION_RECORD [--draws 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import statistics
import sys
from pathlib import Path

from kit.core.noise.calibration import MIN_SAMPLES, bucket_bounds, distinct, load_record, prompt_ranges

log = logging.getLogger("bound_by_samples")
SETTLED = 0.05  # a bound within 5 % of the one from every sample has stopped moving


def subsets(n: int, k: int, draws: int, seed: int = 0) -> list[tuple[int, ...]]:
    every = itertools.combinations(range(n), k)
    total = 1
    for i in range(k):
        total = total * (n - i) // (i + 1)
    if total <= draws:
        return list(every)
    rng = random.Random(seed)
    return [tuple(sorted(rng.sample(range(n), k))) for _ in range(draws)]


def bounds_of(samples, buckets: dict[str, int], dtype: str, rule: str) -> dict[str, float]:
    return {b: v["bound"] for b, v in bucket_bounds(prompt_ranges(samples, buckets), len(samples), dtype,
                                                    rule).items()}


def held_out_failures(samples, k: int, buckets: dict[str, int], dtype: str, rule: str, draws: int) -> tuple[int, int]:
    """Of subsets of k samples, each with one further sample held out: how often a held-out clean sample has a
    prompt over the bound the k give (a false failure by the bounds alone; the drift test is apart)."""
    failed = tried = 0
    for chosen in subsets(len(samples), k, draws):
        bounds = bounds_of([samples[i] for i in chosen], buckets, dtype, rule)
        for j in set(range(len(samples))) - set(chosen):
            tried += 1
            failed += any(samples[j].errors[p] > bounds[str(b)] for p, b in buckets.items())
    return failed, tried


def table(record, draws: int) -> dict:
    samples = distinct(record.samples)
    buckets = {p: int(v["bucket"]) for p, v in record.prompts.items()}
    dtype, rule = record.noise_class.get("dtype", "bfloat16"), record.rule["name"]
    full = bounds_of(samples, buckets, dtype, rule)
    rows = []
    for k in range(MIN_SAMPLES, len(samples) + 1):
        per = [bounds_of([samples[i] for i in chosen], buckets, dtype, rule)
               for chosen in subsets(len(samples), k, draws)]
        failed, tried = held_out_failures(samples, k, buckets, dtype, rule, draws) if k < len(samples) else (0, 0)
        rows.append({"k": k, "subsets": len(per),
                     "median": {b: statistics.median(p[b] for p in per) for b in full},
                     "largest": {b: max(p[b] for p in per) for b in full},
                     "held_out_failed": failed, "held_out_tried": tried})
    settled = {b: next((r["k"] for r in rows if all(abs(x["median"][b] - full[b]) <= SETTLED * full[b]
                                                    for x in rows if x["k"] >= r["k"])), None) for b in full}
    return {"record": record.sha256, "case": record.case, "distinct_samples": len(samples),
            "samples": len(record.samples), "bounds": full, "rows": rows, "settled_from": settled}


def markdown(t: dict) -> str:
    buckets = list(t["bounds"])
    out = [f"{t['case']} ({t['record'][:8]}…): {t['distinct_samples']} distinct samples of {t['samples']}", "",
           "| k | subsets | " + " | ".join(f"bucket {b}: median (largest)" for b in buckets) +
           " | held-out clean samples failing |", "| ---: | ---: | " + " | ".join("---" for _ in buckets) + " | ---: |"]
    for r in t["rows"]:
        cells = " | ".join(f"{r['median'][b]:.3g} ({r['largest'][b]:.3g})" for b in buckets)
        held = f"{r['held_out_failed']} of {r['held_out_tried']}" if r["held_out_tried"] else "-"
        out.append(f"| {r['k']} | {r['subsets']} | {cells} | {held} |")
    out.append("")
    out.append("settled (median within 5 % of the bound from every sample) from k = " +
               ", ".join(f"{b}: {k if k is not None else 'not yet'}" for b, k in t["settled_from"].items()))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("record", type=Path)
    ap.add_argument("--draws", type=int, default=200, help="subsets per k when there are more than this many")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    record = load_record(args.record)
    t = table(record, args.draws)
    log.info(markdown(t))
    if args.json:
        args.json.write_text(json.dumps(t, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

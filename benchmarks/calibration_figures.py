"""Print the calibration figures of a descriptor's calibrated cases: per bucket the clean variants' largest
error, their spread and the bound the rule made; per variant its mean error and mean top-probability shift
(what the drift test compares); the drift test's interval; and for a decode case, per decode step the largest
error, spread and bound. docs/calibration.md keeps the output.

    python benchmarks/calibration_figures.py [DESCRIPTOR]
"""

from __future__ import annotations

import statistics
import sys

from kit.core.records import paths
from kit.core.noise.calibration import bucket_bounds, distinct, load_record, prompt_ranges
from kit.core.noise.falsefailure import left_out_headroom
from kit.core.noise.drift import MIN_RELATIVE_ERROR, MIN_RELATIVE_SHIFT, interval, sample_means
from kit.descriptor.load import load_descriptor


def bucket_headroom(record) -> float:
    """The largest error / bound of any distinct sample against the bounds the other samples make."""
    return max(left_out_headroom(record), default=0.0)


def main(descriptor: str) -> None:
    desc = load_descriptor(descriptor)
    for name, case in desc.cases.items():
        files = [case.calibration] if isinstance(case.calibration, str) else case.calibration or []
        for f in files:  # one record, or one per class of hardware
            figures(name, load_record(desc.resolve(f)))


def figures(name: str, record) -> None:
    """One record's per-bucket noise and bounds, per-variant means and drift interval."""
    unique = distinct(record.samples)
    runtime = record.fingerprint["runtime"]
    print(f"\n## {name} ({record.backend}, {record.noise_class['dtype']}) record {record.sha256[:12]}")
    print(f"measured on {runtime['accelerator']['name']}; {len(record.samples)} samples, {len(unique)} distinct "
          f"({', '.join(s.variant for s in unique)})\n")
    print("| bucket | prompts | largest error | spread | bound |\n| ---: | ---: | ---: | ---: | ---: |")
    for bucket, b in sorted(record.buckets.items(), key=lambda kv: int(kv[0])):
        print(f"| {bucket} | {b['prompts']} | {b['largest']:.3g} | {b['spread']:.3g} | {b['bound']:g} |")
    if record.decode:
        steps(record)
    ids = sorted(record.prompts)
    means = sample_means([{"errors": s.errors, "shifts": s.shifts} for s in unique], ids)
    print("\n| variant | mean error | mean top-probability shift |\n| --- | ---: | ---: |")
    for s, e, d in zip(unique, means["error"], means["shift"]):
        print(f"| {s.variant} | {e:.4g} | {d:+.4g} |")
    ref = statistics.fmean(means["error"])
    floor = record.reference().get("resolution") or 0.0
    _, high = interval(means["error"], record.drift["alpha"] / 2, False, max(MIN_RELATIVE_ERROR * ref, floor))
    low_s, high_s = interval(means["shift"], record.drift["alpha"] / 4, True, max(MIN_RELATIVE_SHIFT * ref, floor))
    print(f"\ndrift: a run fails above mean error {high:.4g} ({high / ref - 1:+.0%} on the calibrated {ref:.4g}) "
          f"or outside mean shift {low_s:+.4g} .. {high_s:+.4g}")
    print(f"bounds, each variant left out: it reaches at most {bucket_headroom(record):.2f} of the bound "
          "the others give")
    widening(record, unique)
    loo = record.drift.get("leave_one_out") or []
    if loo:
        print("each variant against the others: " + ", ".join(
            f"{x['variant']} {'passes' if x['passed'] else 'FAILS'} "
            + (f"(p {x['p_value']:.2g})" if x["p_value"] is not None else "(by the range rule)") for x in loo))


def widening(record, unique) -> None:
    """Which clean variant widens each bucket's bound: the bound the rule gives without it (all of a variant's
    distinct samples left out), beside the tightest fixed bound every clean sample passes (the bucket's largest
    error) and the variant that holds that largest error. A variant whose removal tightens a bound a lot is
    one a candidate engine must be able to differ by, or the bound gives away power."""
    buckets = {pid: p["bucket"] for pid, p in record.prompts.items()}
    dtype = record.noise_class["dtype"]
    variants = sorted({s.variant for s in unique})
    without = {v: bucket_bounds(prompt_ranges(rest, buckets), len(rest), dtype, record.rule["name"])
               for v in variants if len(rest := [s for s in unique if s.variant != v]) >= 2}
    print("\n| bucket | bound | tightest fixed bound the clean samples pass (variant, prompt) | "
          + " | ".join(f"without {v}" for v in without) + " |")
    print("| ---: | ---: | ---: | " + " | ".join("---:" for _ in without) + " |")
    for bucket, b in sorted(record.buckets.items(), key=lambda kv: int(kv[0])):
        worst = max(((s.errors[pid], s.variant, pid) for s in unique for pid, k in buckets.items()
                     if str(k) == bucket))
        print(f"| {bucket} | {b['bound']:g} | {worst[0]:.3g} ({worst[1]}, {worst[2]}) | "
              + " | ".join(f"{w[bucket]['bound']:g}" for w in without.values()) + " |")


def steps(record) -> None:
    """A decode case's per-step noise: the prompts whose clean continuations reached each step, their largest
    error, the spread across the distinct continuations and the step's bound (kit.core.noise.stepnoise)."""
    d = record.decode
    print(f"\ndecode steps: {d['distinct_samples']} distinct continuations of {len(record.samples)} samples\n")
    print("| step | prompts | largest error | spread | bound |\n| ---: | ---: | ---: | ---: | ---: |")
    for n, s in sorted(d["per_step"].items(), key=lambda kv: int(kv[0])):
        print(f"| {n} | {s['prompts']} | {s['largest']:.3g} | {s['spread']:.3g} | {s['bound']:g} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(paths.EMBEDDED_DESCRIPTOR))

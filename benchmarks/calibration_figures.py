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
from kit.core.noise.calibration import distinct, load_record
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
    loo = record.drift.get("leave_one_out") or []
    if loo:
        print("each variant against the others: " + ", ".join(
            f"{x['variant']} {'passes' if x['passed'] else 'FAILS'} "
            + (f"(p {x['p_value']:.2g})" if x["p_value"] is not None else "(by the range rule)") for x in loo))



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

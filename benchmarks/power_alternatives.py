"""What would lower a case's detectable effect, measured on the faulted samples a power record already holds.

The same faulted samples are judged again under another bound: per prompt instead of per bucket (each prompt's
largest clean error plus its own range across the variants, by the record's rule), so a prompt the variants
never moved is held close to where it always is, and a prompt they move a lot keeps its latitude. What it costs
is stated beside it: how many clean samples, each left out in turn, the per-prompt bounds of the others fail
(the false failures the tighter rule would bring).

More launches in the calibration need new measurements; what they would give the drift test is projected here
(labelled so): its clean samples replaced by N with the same mean and the same spread of their means, the t
quantile of N - 1 degrees of freedom then standing where that of the record's few stood. With three samples
the test's 0.1 % quantile is 22 standard deviations wide; with ten it is 4.8. The bounds stay as recorded. More
prompts need a new fixture; nothing here projects them.

    python benchmarks/power_alternatives.py POWER_RECORD CALIBRATION_RECORD [N ...]
"""

from __future__ import annotations

import statistics
import sys
from statistics import NormalDist

from kit.core.noise.calibration import distinct, load_record
from kit.core.noise.rule import bound_rule
from kit.core.noise.power import family_power, load_power


def per_prompt_reference(record, samples=None) -> dict:
    """The record's reference with one bound per prompt: the prompt's largest clean error plus its range, by
    the record's rule (the rule's minimum margins and rounding included)."""
    samples = samples if samples is not None else distinct(record.samples)
    dtype = record.noise_class.get("dtype", "bfloat16")
    bounds = {}
    for pid in record.prompts:
        errors = [s.errors[pid] for s in samples]
        bounds[pid] = bound_rule(max(errors), max(errors) - min(errors), len(samples), dtype, record.rule["name"])
    ref = record.reference()
    return {**ref, "bounds": bounds, "prompt_buckets": {p: p for p in record.prompts}}


def left_out_failures(record) -> tuple[int, int]:
    """How many distinct clean samples fail the per-prompt bounds the others give."""
    unique = distinct(record.samples)
    failed = 0
    for i, s in enumerate(unique):
        others = [o for j, o in enumerate(unique) if j != i]
        if len(others) < 2:
            return 0, 0
        bounds = per_prompt_reference(record, others)["bounds"]
        failed += any(s.errors[p] > bounds[p] for p in record.prompts)
    return failed, len(unique)


def more_launches_reference(record, n: int) -> dict:
    """The record's reference with ``n`` clean drift samples of the same mean and spread as its own: each is
    the record's mean sample moved by a constant (the error and the shift each their own), the constants
    evenly spaced normal quantiles scaled to the observed standard deviation of the samples' means. A
    constant moves a sample's mean over any subset of prompts by itself, so whichever prompts a run scores,
    the projected means keep the record's spread."""
    samples = [{"errors": s.errors, "shifts": s.shifts} for s in distinct(record.samples)]
    prompts = sorted(samples[0]["errors"])
    mean = {k: {p: statistics.fmean(s[k][p] for s in samples) for p in prompts} for k in ("errors", "shifts")}
    sd = {k: statistics.stdev(statistics.fmean(s[k].values()) for s in samples) for k in ("errors", "shifts")}
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    scale = statistics.stdev(z)
    projected = [{k: {p: mean[k][p] + sd[k] * zi / scale for p in prompts} for k in ("errors", "shifts")} for zi in z]
    ref = record.reference()
    return {**ref, "drift": {**ref["drift"], "samples": projected}}


def _said(ratio: float | None) -> str:
    return "not caught" if ratio is None else f"{ratio:.2g}x"


def main(power_path: str, record_path: str, launches: list[int] | None = None) -> None:
    record = load_record(record_path)
    power = load_power(power_path, record.reference())
    clean = power.summary["clean_error"]
    by_family = {f: [t for t in power.trials if t.family == f] for f in sorted(power.families)}

    def ratios(reference: dict) -> dict[str, float | None]:
        return {f: family_power(f, trials, reference, clean).ratio for f, trials in by_family.items()}

    print(f"{power.case}: detectable effect per family, x the clean error {clean:.3g} "
          f"(per-bucket bounds as recorded -> per-prompt bounds)")
    for family, after in ratios(per_prompt_reference(record)).items():
        before = power.summary["families"][family]["ratio"]
        print(f"  {family} ({power.families[family]}): {_said(before)} -> {_said(after)}")
    failed, n = left_out_failures(record)
    print(f"per-prompt bounds, each clean sample left out: {failed} of {n} fail the others' bounds")
    for count in launches or []:
        line = ", ".join(f"{f} {_said(r)}" for f, r in ratios(more_launches_reference(record, count)).items())
        print(f"projected, {count} distinct clean samples of the same spread (drift test only): {line}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]])
